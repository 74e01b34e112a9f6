/*
 * cache: the watch cache's store of Nodes and Pods (ARCHITECTURE.md, "cluster view", the cache
 * backend). The informer (informer.h) fills it from a LIST then a WATCH; placements read it.
 *
 * It keeps only what decisions need, computed once when an event arrives:
 *   - per node: its capacity (capacity_from_node(), or the error that says what to set), and
 *     the GPU pods bound to it that are not Succeeded/Failed, as placement items (placement.h)
 *     with a running sum of their declared bytes and of their undeclared GPUs;
 *   - per pod (every pod, GPU or not, so a Binding of any pod seen needs no API call): its
 *     "namespace/name", uid, node, whether it is finished, a mirror pod, and its demand
 *     (demand.h) with the texts a decision may quote (error, warning, container name); for a
 *     pod naming DRA claims (issue 21), the claims it names (cache_get_pod_claims) and its
 *     DRA containers' own figures (demand.dra_figs): such a pod is never kept compact.
 * Pods are keyed by "namespace/name" (unique at any moment in the API server); an event for
 * the same name with another uid replaces the old pod.
 *
 * Tier attributes (issue 22): a GPU pod's spec.priorityClassName and metadata.labels matter
 * only to GPUMemoryPolicy tiers (gpupolicy.h: priorityClassNames, podSelector). A GPU pod, or
 * one that names DRA claims (its GPUs may be claims only), keeps them
 *   - always while it is unbound: a Binding of it reads them (cache_get_pod_attrs), and a
 *     policy created between that read and the decision must not find them missing;
 *   - once bound, only the kinds the policies' tiers want (cache_set_pod_attrs: the informer
 *     tells the store, from the GPUMemoryPolicy objects; CACHE_ATTRS_ALL until then).
 * A bound pod read while a kind was not wanted lacks it when a policy starts wanting it: its
 * placement item then has attrs_known 0 and counts in every tier of a policy (placement.h:
 * the safe side, as a reservation), and cache_get_pod_attrs answers CACHE_ENOATTRS, until it
 * is read again: cache_set_pod_attrs says how many such pods there are, and the informer
 * relists pods (the simplest correct way: a LIST is the only way to read them all again;
 * keeping every label of every GPU pod costs ~100-400 bytes each at all times, a relist costs
 * the API server one LIST each time a policy first wants a kind). Policies are never decided
 * on labels the store did not keep. Labels are kept whole, not only the keys selectors name:
 * a new key would otherwise cost a relist each time a policy names one.
 *
 * Relist: cache_resync_begin() marks every object of a kind; each listed object applied
 * unmarks it; cache_resync_end() removes what the list did not show (a DELETE missed while the
 * watch was down). In between, reads see the old objects plus the new ones (more counted, never
 * less than the list shows: the safe side).
 *
 * Gone pods: when a pod is deleted, turns Succeeded/Failed (or is first seen so), is replaced by
 * another pod of the same name, or is removed by a resync, the gone callback (cache_new) is
 * called with its key and uid after the store's lock is released, so the caller can drop an
 * in-flight reservation for it (ledger_forget). Once per pod: a finished pod deleted later is
 * not reported again. Pods that ask for no GPU and name no DRA claim are not reported (they
 * never hold a reservation). A pod dropped because it could not be stored is not reported either.
 *
 * Thread-safe: one writer (the informer's threads) and any number of readers; readers hold a
 * read lock only for the duration of a callback (cache_with_node) or a copy.
 * Units: bytes. Caps: CACHE_MAX_PODS pods and CACHE_MAX_NODES nodes (past them an event is
 * refused with CACHE_EFULL and the informer reports an error).
 */
#ifndef GMG_CACHE_H
#define GMG_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "capacity.h"
#include "demand.h"
#include "placement.h"
#include "watch.h"

struct cJSON;

#define CACHE_MAX_PODS  2000000
#define CACHE_MAX_NODES 100000
#define CACHE_UID_MAX   64  /* metadata.uid (a UUID is 36) */
#define CACHE_KEY_MAX   320 /* "namespace/name": 63 + 1 + 253 */

#define CACHE_EINVAL    (-1) /* not an object of the kind, or no name: skipped */
#define CACHE_ENOMEM    (-2)
#define CACHE_EFULL     (-3)
#define CACHE_ENOTFOUND (-4)
#define CACHE_ENOATTRS  (-5) /* cache_get_pod_attrs: read before a policy wanted them */

/* Tier attributes a bound GPU pod keeps (cache_set_pod_attrs). */
#define CACHE_ATTR_LABELS   0x1u /* metadata.labels: some tier has a podSelector */
#define CACHE_ATTR_PRIORITY 0x2u /* spec.priorityClassName: some tier has priorityClassNames */
#define CACHE_ATTRS_ALL     (CACHE_ATTR_LABELS | CACHE_ATTR_PRIORITY)

enum cache_kind { CACHE_PODS = 0, CACHE_NODES = 1 };

/* Called for each pod that stopped holding GPU memory (deleted, finished, resynced away). key
 * and uid are borrowed for the call; uid may be "". Called without the store's lock held. */
typedef void (*cache_gone_fn)(void *ctx, const char *key, const char *uid);

struct cache;

/* New empty store. dcfg (GPU resource names) is copied. gone may be NULL. NULL on allocation
 * failure. Caller owns it (cache_free). */
struct cache *cache_new(const struct demand_config *dcfg, cache_gone_fn gone, void *gone_ctx);
void cache_free(struct cache *c); /* NULL is a no-op; no call may be running */

/* Apply one watch event (or one listed object, as WATCH_ADDED) of a Pod / a Node, borrowed.
 * BOOKMARK and ERROR are ignored (0). Returns 0 or CACHE_E*: CACHE_EINVAL (store unchanged)
 * for a non-object, a missing or empty metadata.name, a "namespace/name" not shorter than
 * CACHE_KEY_MAX, a node name over 253 bytes, a metadata.uid not shorter than CACHE_UID_MAX.
 * A DELETED whose uid differs from the stored pod's is an older pod's: ignored. A pod that
 * cannot be stored (CACHE_ENOMEM, CACHE_EFULL) is dropped without a gone callback (its
 * reservation keeps counting): the caller must treat the store as incomplete (the informer
 * relists and keeps placements on the API path meanwhile). */
int cache_apply_pod(struct cache *c, enum watch_event_type type, const struct cJSON *pod);
int cache_apply_node(struct cache *c, enum watch_event_type type, const struct cJSON *node);

/* Relist of one kind: mark everything, apply the list, remove what is still marked. end
 * returns how many objects were removed: pods (gone called), or Node objects (their nodes
 * become unknown; pods bound to them stay counted). */
void cache_resync_begin(struct cache *c, enum cache_kind kind);
size_t cache_resync_end(struct cache *c, enum cache_kind kind);

/* A pod as a Binding needs it. */
struct cache_pod {
	char uid[CACHE_UID_MAX];
	char node[CACHE_KEY_MAX]; /* spec.nodeName, "" when not bound */
	int finished;             /* phase Succeeded or Failed */
	int mirror;               /* annotation kubernetes.io/config.mirror */
	int deleting;             /* metadata.deletionTimestamp set (pod_being_deleted) */
	struct demand demand;     /* as demand_from_pod() gave it */
};

/* Copy pod ns/name into *out. 0, or CACHE_ENOTFOUND when the cache has not seen it. */
int cache_get_pod(struct cache *c, const char *ns, const char *name, struct cache_pod *out);

/* The DRA claims pod ns/name (of uid, when uid is neither NULL nor "") names, as
 * dra_pod_refs() read them from its last event, into *out (out->any 0: none). A pod naming
 * claims is never kept compact, so a compact pod names none. 0, CACHE_ENOTFOUND (out
 * emptied), or CACHE_EINVAL: dra_pod_refs() refused its claim list (out: one claim not read,
 * the safe side for counting; the pod is to be read from the API server to be judged).
 * Thread-safe (read lock). */
struct dra_pod_refs;
int cache_get_pod_claims(struct cache *c, const char *ns, const char *name, const char *uid,
                         struct dra_pod_refs *out);

/* The GPUMemoryPolicy attributes of GPU pod ns/name (of uid, when uid is neither NULL nor ""):
 * its spec.priorityClassName into priority_class ("" when none; cut to pc_cap) and a copy of
 * its labels into *labels (the caller clears it: labelset_clear). 0, CACHE_ENOTFOUND (not seen,
 * another uid), CACHE_ENOATTRS (not kept while some tier wants them: a bound GPU pod read while
 * the policies wanted less, or a pod that asks for no GPU and names no DRA claim, of which
 * none are kept; the caller reads the pod from the API server) or
 * CACHE_ENOMEM. A pod that asks for no GPU, while no tier wants them: 0, both empty. */
struct labelset;
int cache_get_pod_attrs(struct cache *c, const char *ns, const char *name, const char *uid,
                        char *priority_class, size_t pc_cap, struct labelset *labels);

/* What bound GPU pods keep from now on: want, CACHE_ATTR_* (the kinds some usable
 * GPUMemoryPolicy tier selects by). Kinds no longer wanted are freed at once; every counted
 * pod's item is updated (attrs_known). Returns how many counted pods lack a kind wanted now
 * (their items count in every tier until they are applied again: the caller relists pods);
 * 0 when want is unchanged. Walks the GPU pods under the write lock (rare: a policy event).
 * Callers order it around the policy store so that a reader never sees a policy the items
 * are not ready for: grow before the policy is visible, shrink after it is gone (informer.c).
 * Thread-safe. */
size_t cache_set_pod_attrs(struct cache *c, unsigned want);
/* The kinds wanted now (CACHE_ATTRS_ALL from cache_new). Thread-safe. */
unsigned cache_pod_attrs_wanted(struct cache *c);

/* A node's snapshot for the placement core, borrowed during the callback only. */
struct cache_node_view {
	const char *name;
	int known;                             /* the Node object has been seen */
	const struct gpupolicy_labels *labels; /* its labels when known, else NULL */
	int capacity_rc;                       /* 0, or CAPACITY_E* */
	const struct capacity *cap;            /* valid when capacity_rc == 0, else NULL */
	const char *capacity_error;            /* the message when capacity_rc != 0 (never NULL;
	                                          "" when 0) */
	const struct placement_item *pods;     /* GPU pods bound to it, not finished */
	size_t n_pods;
	uint64_t declared_bytes;  /* sum of the declared bytes of pods */
	uint64_t undeclared_gpus; /* sum of the GPUs of pods without a valid declaration */
};

/* Call fn(ctx, view) with the store read-locked (fn must not call cache functions that write,
 * and must not block). A node never seen is given with known 0 and no pods unless pods were
 * seen bound to it. Thread-safe. */
typedef void (*cache_node_fn)(void *ctx, const struct cache_node_view *v);
void cache_with_node(struct cache *c, const char *node, cache_node_fn fn, void *ctx);

/* Call fn for every node whose Node object is known and has a GPU capacity or GPU pods (the
 * per-node gauges), with the store read-locked. */
void cache_each_gpu_node(struct cache *c, cache_node_fn fn, void *ctx);

/* pods: all pods stored; gpu_pods: of which GPU pods (finished included); nodes: Node
 * objects known (not the nodes only named by a pod's spec.nodeName); by_source: the GPU pods
 * by the source of their demand, indexed by enum demand_source (its least declared GPU
 * container; a strict declaration is DEMAND_SRC_DECLARED, slot 0 unused), and
 * CACHE_SOURCE_INVALID for those without a valid one.
 * bytes: the heap the store holds, in bytes: for each allocation it made and still holds
 * (records, strings, label copies, placement items, hash buckets, the store itself) glibc's
 * malloc_usable_size() plus one 8-byte chunk header. It is the cache's own share of the
 * process's memory: allocator fragmentation, free chunks kept by malloc, the LIST pages being
 * parsed and the rest of the process are not in it (the bench prints RSS beside it). */
#define CACHE_SOURCE_INVALID DEMAND_SOURCES
#define CACHE_SOURCES        (DEMAND_SOURCES + 1)
struct cache_stats {
	size_t pods, gpu_pods, nodes;
	size_t by_source[CACHE_SOURCES];
	size_t bytes;
	size_t compact_pods;  /* of pods, those kept compact (podlite.h: no GPU, a UUID uid) */
	size_t compact_bytes; /* of bytes, the compact store's (podlite_bytes()) */
	size_t pod_bytes;     /* of bytes, the whole pods' records and their hash table */
	size_t node_bytes;    /* of bytes, the node records, their placement items, their table */
};
void cache_stats(struct cache *c, struct cache_stats *out);

#endif
