/*
 * view: the cluster view (ARCHITECTURE.md, cluster view box): "this node: its capacity, its
 * labels, its pods with their demands, their sums" as a snapshot copied out, never a callback
 * under a store's lock. Two backends fill the same struct view_node: the watch cache's,
 * view_from_cache() (a view_fn), and the live one, view_from_lists(), over the Node object and
 * the pod LIST its caller read from the API server (the webhook's API path) with no lock held.
 * Both make a pod an item by one rule (pod_demand(), placement_consumer(), placement_item_*:
 * pod.h, placement.h). The caller decides over the copy with no lock of the store held, and
 * builds the core's node from it with view_placement_node(), the one place a view becomes a
 * struct placement_node. DRA allocations are the DRA store's copy (drastore.h:
 * dra_store_view()), passed beside.
 *
 * Ownership: a view_node is a value the caller keeps (on its stack); a backend fills it with
 * storage of its own (one string pool for the names, keys, uids and priority classes, the
 * pods' items, shares, DRA figures and labels), released by view_node_clear(). Everything a
 * view_node points to lives until then. Not thread-safe by itself: one view per thread; backends
 * are thread-safe.
 */
#ifndef GMG_VIEW_H
#define GMG_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "capacity.h"
#include "labelset.h"
#include "placement.h"

struct cJSON;
struct cache;
struct demand_config;

#define VIEW_ENOMEM (-1)

/* A node's snapshot: the same fields as cache_node_view (cache.h), owned, and the live
 * backend's listed pods. */
struct view_node {
	const char *name;                      /* the node asked for */
	int known;                             /* the Node object has been seen */
	const struct gpupolicy_labels *labels; /* its labels when known, else NULL */
	int capacity_rc;                       /* 0, or CAPACITY_E* */
	const struct capacity *cap;            /* valid when capacity_rc == 0, else NULL */
	const char *capacity_error; /* the message when capacity_rc != 0 (never NULL; "" when 0) */
	const struct placement_item *pods; /* GPU pods bound to it, not finished; their labels,
	                                      priority classes, shares and DRA figures
	                                      (dra_figs) copied too */
	size_t n_pods;
	uint64_t declared_bytes;  /* sum of the declared bytes of pods */
	uint64_t undeclared_gpus; /* sum of the GPUs of pods without a valid declaration */
	/* Every pod the live backend's list shows on the node, consumers or not (finished pods,
	 * pods asking no GPU): their keys and uids (NULL: none) for settling the reservations of
	 * pods now visible (ledger_settle). The cache backend leaves them empty: its pods are
	 * settled as they are counted, the others reported gone by its informer. */
	const char *const *listed_keys;
	const char *const *listed_uids;
	size_t n_listed;
	/* the storage (private) */
	struct capacity capacity_copy;
	char error_copy[CAPACITY_MSG_MAX];
	struct labelset node_labels;
	struct labelset *pod_labels; /* n_pods */
	struct placement_item *items;
	struct demand_share *shares; /* the pods' shares, then their DRA figures */
	const char **listed;
	char *pool;
};

/* A backend: fill *out (cleared first) with node's snapshot. 0, or VIEW_ENOMEM (*out left
 * empty). A node the backend does not know is given with known 0. */
typedef int (*view_fn)(void *backend, const char *node, struct view_node *out);

/* The watch cache's backend (backend: a struct cache): the copy is made under the cache's read
 * lock (cache_with_node()), nothing else happens there. Thread-safe. */
int view_from_cache(void *cache, const char *node, struct view_node *out)
    __attribute__((warn_unused_result));

/* What the live backend needs to read pods as the watch cache does (cache_new's). */
struct view_live_config {
	const struct demand_config *dcfg; /* borrowed for the call */
	int attrs; /* 1: keep the consumers' tier attributes (priority class, labels; attrs_known
	              1), as the cache does when GPUMemoryPolicy objects are read; 0: none */
};

/* The live backend: node's snapshot from the Node object node_obj (its capacity and labels:
 * capacity_from_node) and pods, the JSON array of the pods bound to it (the API path's LIST),
 * both borrowed for the call and not referenced after; known is 1. A pod is an item by the
 * cache's rule (pod_demand, placement_consumer: finished pods and pods asking no GPU are not,
 * mirror pods are), with its uid (NULL when it has none); a listed pod without a usable name
 * still holds GPU memory: it counts as "(unnamed pod)" and is not in listed_keys. 0, or
 * VIEW_ENOMEM (*out left empty). Pure (no I/O, no lock): thread-safe. */
int view_from_lists(const char *node, const struct cJSON *node_obj, const struct cJSON *pods,
                    const struct view_live_config *cfg, struct view_node *out)
    __attribute__((warn_unused_result));

/* Release what *v holds; *v becomes empty (a cleared view_node is a no-op). */
void view_node_clear(struct view_node *v);

/* The core's node over view v (borrowed for as long as *out is used): its name and pods, the
 * capacity cap (the view's, or one merged with DRA slices: dra_view_capacity(); NULL:
 * unknown), the reservations and the DRA claims (NULL: none). */
void view_placement_node(const struct view_node *v, const struct capacity *cap,
                         const struct placement_item *reserved, size_t n_reserved,
                         const struct dra_node *dra, struct placement_node *out);

#endif
