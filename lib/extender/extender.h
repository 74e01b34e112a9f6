/*
 * extender: the kube-scheduler extender adapter (HTTP API of k8s.io/kube-scheduler's
 * extender/v1 types; ARCHITECTURE.md: the extender adapter box), on the webhook's engine: the
 * pod's demand (demand.h), the node's view copied out of the watch cache (view.h), the
 * pending reservations from the caller (below), and the pure core with the webhook's flags:
 * core_decide() (core.h) once per node, without words (CORE_NO_WORDS), under the
 * GPUMemoryPolicy objects that select it, if any. Each node is judged over its copy, no store's
 * lock held (the pods in flight read-locked, and read before the copy: a hold ends once the
 * cache shows its pod bound; the policy store while one selects the node);
 * nothing waits there. The filter steers; it reserves nothing in the cluster: the Binding through
 * the webhook stays the commit point and the safety net. It only remembers, in this process, the
 * pods it passed whose Binding the watch cache does not show yet (holds.h): each counts on every
 * node its filter passed (the extender is not told which one the scheduler picked) until the cache
 * shows it bound, finished or replaced, or HOLDS_TTL_MS, so the next pod of a burst is not passed
 * onto a node the webhook would then refuse. Only a pod the watch cache shows pending (unbound, not
 * finished) with the call's uid and a valid declaration is held, and for the bytes the cache's
 * copy declares: ExtenderArgs is untrusted (anyone who reaches the port can send one), so a
 * call for a pod the cache does not know, or with a body claiming more memory, is judged but
 * holds nothing beyond the cached pod's figure (metrics.h, extender_holds_refused_total). A
 * pod with DRA claims also holds the most its claims came to on the nodes judged
 * (placement_result.dra_bytes and .dra_whole_bytes, from the DRA store's claims; the claims
 * named are the body's, the pod the filter judged, their figures the store's). A
 * real pod the scheduler saw before the cache did is then not held either: its Binding is
 * still judged by the webhook. The holds are per process: a scheduler whose calls reach
 * another replica (a Service spreads connections, not requests, so one scheduler keeps one
 * replica while its connection lives) does not see them.
 *
 *   POST /scheduler/filter      ExtenderArgs -> ExtenderFilterResult
 *   POST /scheduler/prioritize  ExtenderArgs -> HostPriorityList
 *
 * Wire format (extender/v1 v0.33 has no json tags: Go's field names, as kube-scheduler's
 * encoding/json writes them):
 *   ExtenderArgs {"Pod": <v1.Pod>, "Nodes": <v1.NodeList> | null, "NodeNames": [..] | null}
 *     The three names are matched in any ASCII letter case, as Go's decoder does ("pod",
 *     "NODENAMES"; the non-ASCII folds Go also accepts, U+017F and U+212A, are not: no encoder
 *     writes them); the same for the NodeList's "items". The v1 objects inside are read by
 *     their json tags as the API server writes them ("metadata", "spec"). Exactly one of Nodes
 *     (nodeCacheCapable: false) and NodeNames (nodeCacheCapable: true) is given (not null);
 *     unknown fields are ignored, as Go does.
 *   ExtenderFilterResult {"Nodes": <v1.NodeList> | null, "NodeNames": [..] | null,
 *     "FailedNodes": {node: reason}, "FailedAndUnresolvableNodes": {node: reason},
 *     "Error": ""}: the passing nodes in the form they came in (NodeNames, or Nodes with the
 *     very node objects received), in their order; the other form null.
 *   HostPriorityList [{"Host": node, "Score": 0..10}], one per node, in the input order.
 *
 * filter, for a GPU pod with a valid declaration, per node:
 *   fits under the threshold in force (the node's annotation, else the policy's): passes;
 *   in warn mode a placement over it passes too (the webhook would allow it with a warning);
 *   over the threshold -> FailedNodes "needs 10Gi, 1.7Gi free of the 90 percent limit"
 *     (kube-scheduler shows it in the FailedScheduling event; the node may free memory), with
 *     ", counting 10Gi of 1 pod whose Binding is in flight" when pods in flight counted;
 *   can never fit (the pod alone, or one container's share of a GPU, over the limit) ->
 *     FailedAndUnresolvableNodes "needs 600Gi, above the 90 percent limit of the node's 640Gi
 *     GPU memory" / "container "vllm" needs 75Gi per GPU, above the 90 percent limit of one
 *     GPU's 80Gi", with the node's sharing rule after "; " when one applied ("time-sliced:
 *     both slices may land on one card"; the piece is then "MPS client" or "MIG slice" when
 *     so), or "container "x" asks for MIG slices but the node offers no MIG 2g.10gb slices
 *     ..." / "asks for whole GPUs and every GPU is partitioned into MIG slices" (capacity.h's
 *     sharing rules; preemption cannot help);
 *   unknown or invalid capacity, or a node the watch cache has not seen ->
 *     FailedAndUnresolvableNodes with the capacity error (what to set) or "node unknown to
 *     gpu-memory-guard's watch cache";
 *   refused at a GPUMemoryPolicy's threshold: the same reasons at the policy's limit, then
 *     "; GPUMemoryPolicy "name"" ("needs 10Gi, 0 free of the 50 percent limit; GPUMemoryPolicy
 *     "half""); refused by a policy's tier or declarations rule: that rule's message
 *     (FailedNodes). The node is decided once, without words: the reason is written from the
 *     verdict's figures;
 *   the node's reservations cannot be read (the ledger's node table full) -> FailedNodes.
 *   Sizes as the webhook's messages write them (quantity_format); no '%' (text.h).
 * Pass-through (every node passes, prioritize scores 0, as the webhook allows their
 * Bindings): pods that ask for no configured GPU resource, mirror pods, pods of an exempt
 * namespace.
 * A GPU pod with an invalid or missing declaration: every node in FailedAndUnresolvableNodes
 * with the declaration error ("pod ns/p: container "c": ..."): the webhook would refuse its
 * Binding on every node, and the event tells the user what to fix.
 *
 * prioritize: per node, 0 where the pod does not fit under the threshold (or the node cannot
 * be judged); where it fits, with fill = (used + demand) / limit in (0, 1]:
 *   binpack (default): 1 + round(9 x fill): the fullest node that fits scores highest,
 *     keeping whole GPUs free for big models;
 *   spread: 1 + round(9 x (1 - fill)): the emptiest scores highest.
 * Pass-through pods and invalid declarations: every node 0 (no opinion).
 *
 * Errors: kube-scheduler (pkg/scheduler/extender.go) treats an HTTP status other than 200 and
 * a non-empty Error alike: the filter fails, and with ignorable: false the scheduling attempt
 * fails and the pod is retried with backoff; the Error text reaches the FailedScheduling event.
 * So filter answers 200 with Error for a body that is not ExtenderArgs (not JSON, no Pod, both
 * or neither node forms, a node without a name, a node named twice, more than
 * EXTENDER_MAX_NODES nodes) and, for a GPU pod, when the watch cache is off or not fresh (it
 * never reads the API server: no verdict is better than one from a stale view). A
 * HostPriorityList has no Error field and kube-scheduler ignores a failed prioritize (no score
 * from this extender): prioritize answers the same bad bodies with 400 and the reason
 * (EXTENDER_EBADREQUEST), and with a cache that cannot judge, every node 0. Bodies larger than
 * EXTENDER_BODY_MAX are the server's 413.
 *
 * prioritize counts the pods in flight too (the pod's own hold never counts against it).
 *
 * Order of reading: a node's reservations are copied first, then its view is read from the
 * cache: a pod whose reservation settles in between is then seen at least once (placement.h
 * counts a pod both visible and reserved once), never missed.
 *
 * Thread-safe: calls may run on many threads at once. No API server call, ever.
 */
#ifndef GMG_EXTENDER_H
#define GMG_EXTENDER_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

struct cache;
struct dra_store;
struct ledger;
struct metrics;

#define EXTENDER_PATH_FILTER     "/scheduler/filter"
#define EXTENDER_PATH_PRIORITIZE "/scheduler/prioritize"
/* Body cap. The Nodes form carries whole Node objects, 5 to 30 KiB each (status.images
 * dominates): 64 MiB serves a few thousand nodes; larger clusters should configure
 * nodeCacheCapable: true (names only, ~40 bytes a node). */
#define EXTENDER_BODY_MAX (64u * 1024u * 1024u)
/* Nodes per call: Kubernetes supports 5000 nodes per cluster; three times that, refused past. */
#define EXTENDER_MAX_NODES    15000
#define EXTENDER_MAX_PRIORITY 10 /* extender/v1 MaxExtenderPriority */
#define EXTENDER_ERR_MAX      512
/* A filter call for a pod the watch cache does not show yet (by name and uid) waits on a worker
 * up to this long, ms, for the cache to catch up before it decides whether the pod holds: the
 * scheduler's informer may see a new pod before the webhook's does (a burst on a loaded node
 * measured 55 ms), and a pod that holds nothing lets the next pod's filter pass the same room.
 * A forged call for a pod that never exists costs a worker this long and holds nothing. */
#define EXTENDER_CACHE_WAIT_MS 500

#define EXTENDER_EBADREQUEST (-1) /* prioritize: the body is not ExtenderArgs: answer 400 */
#define EXTENDER_ENOMEM      (-2) /* answer 500 */
#define EXTENDER_EBUSY       (-3) /* reservations: the node is held and may_block is 0 */
#define EXTENDER_EUNTRACKED  (-4) /* reservations: the node cannot be tracked (table full) */

enum extender_verb { EXTENDER_FILTER = 0, EXTENDER_PRIORITIZE = 1 };
enum extender_score { EXTENDER_BINPACK = 0, EXTENDER_SPREAD = 1 };

/* One pending reservation on a node: key "namespace/name" (or a key no pod matches), uid ("" or
 * NULL when unknown), bytes declared. Strings are borrowed for the call (copied). */
typedef void (*extender_add_fn)(void *add_ctx, const char *key, const char *uid, uint64_t bytes);

/*
 * Where the pending reservations (admitted placements the cache may not show yet) come from:
 * the webhook's local ledger (extender_reservations_ledger) or the shared records
 * (extender_reservations_shared).
 * each(ctx, node, may_block, add, add_ctx) calls add for every live reservation on node and
 * returns 0, EXTENDER_EBUSY (may_block 0 and it would have to wait), EXTENDER_EUNTRACKED, or
 * EXTENDER_ENOMEM. It must be thread-safe and must not call back into the extender. each NULL:
 * no reservations are counted.
 */
struct extender_reservations {
	void *ctx;
	int (*each)(void *ctx, const char *node, int may_block, extender_add_fn add, void *add_ctx);
};

/* The ledger as a reservation source. Reservations expire by progress_ms(progress_ctx) when it
 * is set and earlier than the ledger's clock (the webhook's rule on its cache path: a quiet
 * watch never lets one lapse before the cache could show its pod). Caller owns the struct and
 * keeps it (and the ledger) alive while the extender runs. */
struct extender_ledger {
	struct ledger *ledger;
	uint64_t (*progress_ms)(void *ctx); /* may be NULL */
	void *progress_ctx;
};
struct extender_reservations extender_reservations_ledger(struct extender_ledger *el);

/* The shared records (--reservations shared, shared.h) as a reservation source: each node's
 * record as this replica last wrote or read it (no API call, never waits). Entries other
 * replicas wrote since are not seen, so the filter may pass a node the webhook then refuses:
 * the webhook stays the commit point. s is borrowed. */
struct shared;
struct extender_reservations extender_reservations_shared(struct shared *s);

struct policies;

struct extender_config {
	double threshold;      /* ratio (0,1]; a node annotation overrides it */
	double warn_threshold; /* ratio (0,1] */
	int mode_warn; /* 1 (the webhook's --mode warn or audit): what the webhook admits there
	                  passes the filter with score 0: over-threshold placements, nodes of
	                  unknown capacity, pods without a valid declaration (every node) */
	const char *const *gpu_resources;      /* NULL -> nvidia.com/gpu; strings copied */
	size_t n_gpu_resources;                /* <= DEMAND_MAX_RESOURCES */
	int infer;                             /* --undeclared infer (webhook.h) */
	const struct engine_defaults *engines; /* copied; NULL: the engine.h table */
	const char *const *exempt_namespaces;  /* strings copied */
	size_t n_exempt_namespaces;            /* <= EXTENDER_MAX_EXEMPT */
	enum extender_score score;
	/* The watch cache (borrowed), or NULL: then GPU pods are answered with an Error. While
	 * cache_fresh(cache_ctx, now_s) is 0 (not synced, or its watch broken longer than the
	 * staleness bound) the same. cache_fresh NULL: always fresh. */
	struct cache *cache;
	int (*cache_fresh)(void *ctx, double now_s);
	void *cache_ctx;
	/* The DRA store (drastore.h), borrowed, or NULL: each node judged counts its DRA GPUs and
	 * claims, and the pod's claims (not allocated yet at a filter) at the most they can take
	 * there, by the placement core's rules (placement.h, "DRA"), as the webhook does. */
	struct dra_store *dra;
	/* Whether the DRA store may be counted (informer_dra_fresh_fn, ctx cache_ctx): while it
	 * was never listed (-1) a GPU pod's filter is answered with an Error (DRANotRead: the
	 * scheduler retries); stale (0) pods are judged on it (the webhook guards the Binding).
	 * NULL: always listed. */
	int (*dra_fresh)(void *ctx, double now_s);
	struct extender_reservations reservations; /* copied; what it points to is borrowed */
	/* GPUMemoryPolicy objects (policies.h), borrowed, or NULL: a node that policies select is
	 * judged under them as the webhook judges a Binding there (policyset.h); a refusal by a
	 * policy carries its message. Until they are read, GPU pods are answered with an Error. */
	struct policies *policies;
};
#define EXTENDER_MAX_EXEMPT 64

struct extender; /* opaque */

/* New adapter. cfg is copied (strings too); metrics may be NULL (borrowed). NULL on a bad
 * config (thresholds outside (0,1], too many names, unknown score) or allocation failure. */
struct extender *extender_new(const struct extender_config *cfg, struct metrics *metrics);
void extender_free(struct extender *x); /* NULL is a no-op; no call may be running */

/*
 * One call: body[0..len) (untrusted, borrowed) -> *out (caller owns, free()), *out_len: answer
 * 200 application/json. EXTENDER_EBADREQUEST (prioritize only) with the reason in err: answer
 * 400. EXTENDER_ENOMEM: 500. May wait for a node a webhook placement holds (at most that
 * placement's time). Logs, counts metrics. Thread-safe.
 */
int extender_handle(struct extender *x, enum extender_verb verb, const char *body, size_t len,
                    char **out, size_t *out_len, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The watch cache reports pod uid gone (deleted, finished, replaced: cache.h's gone
 * callback): its hold, if any, ends now rather than at HOLDS_TTL_MS (a pod deleted while its
 * Binding was in flight no longer shows in the cache, so the filter cannot tell it settled).
 * NULL x or uid: no-op. Thread-safe; callable from the informer's threads. */
void extender_forget(struct extender *x, const char *uid);

/* This process's webhook admitted pod uid's Binding with its reservation recorded (webhook.h,
 * binding_admitted): the reservation counts the pod on the node picked from now on, so its hold
 * ends on every node (holds_drop) instead of when the watch cache shows it bound. Unlike
 * extender_forget, a later filter call of the pod (its Binding failed after all, and the
 * scheduler tries it again) holds it again. NULL x or uid: no-op. Thread-safe. */
void extender_binding_admitted(struct extender *x, const char *uid);

/* The server's routes (server.h), marked plain (served on the scheduler listener too):
 * POST EXTENDER_PATH_FILTER / EXTENDER_PATH_PRIORITIZE, bodies up to EXTENDER_BODY_MAX. A call
 * is judged on the listener's thread when no node it reads is held by a placement, else on a
 * worker; refused busy (queue full, shutting down): filter answers an Error, prioritize scores
 * what it could not read 0. x is borrowed and must outlive the server. */
struct server_route extender_filter_route(struct extender *x);
struct server_route extender_prioritize_route(struct extender *x);

#endif
