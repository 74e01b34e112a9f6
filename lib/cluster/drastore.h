/*
 * drastore: the watch cache's store of DRA ResourceSlices and ResourceClaims (ARCHITECTURE.md,
 * "cluster view": DRA slices and claims). The informer (informer.h) fills it from a LIST then a
 * WATCH of resource.k8s.io/v1 resourceslices and resourceclaims; placements, the extender and
 * the per-node gauges read copies of it (dra_store_view). Decoding and the counting rules are
 * the core's (dra.h); this module keys, stores and joins them.
 *
 * Kept, per slice of our drivers: its node, driver, pool and devices (name, memory, type,
 * flags). Per claim: its key, uid, owner, KEP-5004 flag, requests, allocation results of our
 * drivers (with the sharing their configs give them, dra.h) and reservedFor pod uids. A claim's
 * view (dra_claim_use) says how its whole devices on the node are shared (by the device's
 * type: a GPU's config or a MIG device's) and whether the pod the view is for names it. Slices of
 * other drivers and claims without any of our results or requests are kept as names only (a later
 * event may change that).
 *
 * A claim is on node N when one of its results names a device (driver, pool, device) that a
 * slice with spec.nodeName N publishes. Claims are counted once each (dra.h).
 *
 * Relist: dra_store_resync_begin() marks one kind, each listed object unmarks it,
 * dra_store_resync_end() drops what the list did not show. dra_store_absent(): the API server
 * does not serve resource.k8s.io/v1 (404): empty and synced.
 *
 * Thread-safe: one writer per kind and any number of readers (a rwlock; readers copy out).
 * It never calls the pod cache: callers may hold the cache's read lock while calling
 * dra_store_view (lock order: cache, then this store). Caps: DRA_STORE_MAX_SLICES slices and
 * DRA_STORE_MAX_CLAIMS claims (past them an event is refused with DRA_STORE_EFULL).
 * Lookups are linear scans: fine for thousands of slices and claims, not for 100,000.
 */
#ifndef GMG_DRASTORE_H
#define GMG_DRASTORE_H

#include <stddef.h>
#include <stdint.h>

#include "dra.h"
#include "watch.h"

struct cJSON;

#define DRA_STORE_MAX_SLICES 100000
#define DRA_STORE_MAX_CLAIMS 1000000

#define DRA_STORE_EINVAL (-1) /* not a slice / claim the decoder reads: skipped */
#define DRA_STORE_ENOMEM (-2)
#define DRA_STORE_EFULL  (-3)

enum dra_store_kind { DRA_STORE_SLICES = 0, DRA_STORE_CLAIMS = 1 };

struct dra_store;

/* Called for each pod a claim stopped being reserved for (it left status.reservedFor, or the
 * claim was deleted or resynced away): the pod let go of that claim's devices (deleted,
 * finished, or its Binding refused), so the caller drops a reservation it holds
 * (ledger_forget, as for cache.h's gone pods: a pod with DRA claims only is not one the pod
 * cache reports). key "ns/name" and uid borrowed for the call; called without the store's
 * lock held. */
typedef void (*dra_store_gone_fn)(void *ctx, const char *key, const char *uid);

/* New empty store for drivers d (copied; NULL: DRA_DRIVER_DEFAULT); gone may be NULL. NULL on
 * allocation failure. Caller owns it (dra_store_free; NULL no-op; nothing may be running). */
struct dra_store *dra_store_new(const struct dra_drivers *d, dra_store_gone_fn gone,
                                void *gone_ctx);
void dra_store_free(struct dra_store *s);

/* Apply one watch event (or a listed object, as WATCH_ADDED) of a ResourceSlice / a
 * ResourceClaim, borrowed. BOOKMARK and ERROR are ignored. 0 or DRA_STORE_E*; on
 * DRA_STORE_EINVAL err says why (the store is unchanged). */
int dra_store_apply_slice(struct dra_store *s, enum watch_event_type type, const struct cJSON *obj,
                          char *err, size_t errlen);
int dra_store_apply_claim(struct dra_store *s, enum watch_event_type type, const struct cJSON *obj,
                          char *err, size_t errlen);

void dra_store_resync_begin(struct dra_store *s, enum dra_store_kind kind);
size_t dra_store_resync_end(struct dra_store *s, enum dra_store_kind kind); /* removed */
void dra_store_absent(struct dra_store *s, enum dra_store_kind kind);

/* A node's DRA input for the core, and the pod being placed, copied (caller owns: free with
 * dra_view_free). */
struct dra_view {
	struct dra_node node; /* node.claims points into claims */
	struct dra_pod pod;
	struct dra_claim_use *claims;
	char (*uids)[DRA_UID_MAX]; /* the claims' pods point here */
	/* The pods the node's claims are reserved for: keys[i] ("ns/name") is the pod of uids[i]
	 * (n_pods entries; a pod of several claims may repeat). The webhook settles their
	 * reservations by them: such a pod is visible through its claims. */
	size_t n_pods;
	char (*keys)[DRA_NS_MAX + DRA_NAME_MAX];
};

/*
 * The view of node (its DRA GPUs and the claims allocated on it) and of the pod being placed:
 * its claims (refs, may be NULL: those of namespace ns owned by or reserved for pod_uid) that
 * are not allocated, counted at the most they can take on node (dra_request_max_bytes); a
 * named claim the store does not hold, or a template claim not generated yet
 * (refs->n_templates, less the claims the store holds owned by pod_uid that refs does not name,
 * that are not its KEP-5004 claim and that the resourceclaim controller generated for one of
 * its templates, once per template (annotation DRA_ANN_POD_CLAIM): generated, the pod's status
 * not updated yet), counts every DRA GPU of the node. pod_uid and ns may be NULL (no pod:
 * the gauges). 0 and *out, or DRA_STORE_ENOMEM. s NULL gives an empty view.
 */
int dra_store_view(struct dra_store *s, const char *node, const char *ns, const char *pod_uid,
                   const struct dra_pod_refs *refs, struct dra_view **out)
    __attribute__((warn_unused_result));
void dra_view_free(struct dra_view *v);

/* The names of the nodes with DRA GPUs (node-local slices of our drivers with a counted
 * device), copied: *names has *n entries of DRA_POOL_MAX bytes (caller frees; NULL when 0).
 * 0, or DRA_STORE_ENOMEM. */
int dra_store_nodes(struct dra_store *s, char (**names)[DRA_POOL_MAX], size_t *n)
    __attribute__((warn_unused_result));

/* The capacity of node from its Node object's (cap, rc, err: capacity_from_node()'s) and its
 * DRA GPUs in v (capacity_add_dra). cap is updated in place; returns the new code. */
struct capacity;
int dra_view_capacity(const struct dra_view *v, struct capacity *cap, int rc, const char *node,
                      char *err, size_t errlen) __attribute__((warn_unused_result));

struct dra_store_stats {
	size_t slices, claims; /* stored (ours or not) */
	size_t devices;        /* GPU devices of our drivers on node-local slices */
	int slices_absent, claims_absent;
};
void dra_store_stats(struct dra_store *s, struct dra_store_stats *out);

#endif
