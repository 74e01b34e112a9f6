/*
 * placer: the engine loop (ARCHITECTURE.md, "engine loop"): one GPU placement of a pod on a
 * node, from the node's view to the verdict and its reservation. It is the only code that
 * knows the order
 *
 *   view (view.h: the watch cache's view_from_cache, or the live view_from_lists over the API
 *         server's answers; a copy, no lock held while reading)
 *   -> reservations begin / items (reservations.h: the local ledger under the node's lock, or
 *         the shared record inside shared_place(), whose batch commits it)
 *   -> core_decide() (core.h: the one verdict; over a published GPUMemoryPolicy generation, a
 * reference and no lock: policies.h)
 *   -> reservations put / commit, retry on conflict, within the review's time budget.
 *
 * The adapters only decode and encode: the admission adapter (webhook.h) reads the pod (from
 * the review, the cache or a GET), has the engine classify it (placer_classify_pod, placer_exempt:
 * what the pod alone decides) and asks here; the answer is a struct outcome (outcome.h). The
 * scheduler extender adapter (extender.h) has the pod classified the same way and asks the same
 * engine, node by node, the question that reserves nothing (placer_fit, below), over the pods in
 * flight the engine keeps for it (flight.h): the same flags, views, reservations, policies and
 * core, one verdict, in brief (core_brief). It borrows the cache, DRA store,
 * ledger, shared record, policy store and metrics it is given.
 *
 * Which view decides (placer_cached, placer_live):
 *   the watch cache, when it is fresh and its watches healthy (placer_cache_may_decide): the
 *   node and its pods as a copy (view_from_cache; cache.h: demands computed when the events
 *   arrived), the decision's clock read before the copy, no API call. A node the cache has not
 *   seen, or a cache that is not synced or whose watch has been broken too long, take the
 *   live path. A reservation counts until the cache shows its pod on the node (the local ledger
 *   drops it then, matching the key and, where both are known, the uid; the shared record
 *   after RECORD_SETTLE_GRACE_MS), its pod is gone (the cache's gone callback, main.c, calls
 *   ledger_forget and shared_forget), or its TTL passes (reservations.h lists these rules
 *   once). o->source says which view decided ("cache" or "api"). With the local ledger the
 *   cache path is optimistic: lock the node, note its generation, let it go, copy the view, take
 *   it again, begin (settle the pods the view shows; a generation changed meanwhile: begin
 *   again), copy its reservations (resv_own_items), let it go while the core decides, take it
 *   again and commit by compare-and-swap on its version (changed meanwhile: decide again,
 *   gpu_memory_guard_ledger_conflicts_total). The third attempt holds the node from begin to
 *   commit and cannot conflict. On a server thread (may_block 0) a node held by another
 *   placement is never waited for, at any of these steps: a worker decides it from the start.
 *
 *   the live path: GET node -> capacity (threshold annotation overrides the flag) -> note the
 *   node's ledger generation (ledger.h) -> list pods on the node with no lock held -> the
 *   node's live view (view_from_lists: used = sum of their demands by the cache's rule, the pod
 *   itself and Succeeded/Failed pods skipped, terminating and mirror pods count, a GPU pod
 *   without a valid declaration counts its GPUs x memory per GPU) -> lock the node -> look up
 *   reservations of deleted pods (below, the lock let go for the GETs) -> if a reservation was
 *   settled on the node since the generation was noted, list again (3 lists at most, then
 *   denied: NodeBusy) -> drop the reservations of deleted pods, and with the watch cache off
 *   those the list shows (the same pod: uid where both are known, else key; with the cache on
 *   a listed pod and its reservation are counted once, and the reservation settles when the
 *   cache shows the pod) -> add the other pending reservations -> core_decide -> if allowed
 *   and not dry-run, reserve (put and commit) -> unlock. No lock is held across an API call.
 *
 * Deleted pods (live path): a reservation is dropped when the list shows its pod, but a pod
 * admitted and deleted before any later list of its node would otherwise count until the TTL.
 * So for up to PLACER_MAX_STALE_CHECKS reservations (oldest first) older than the grace period
 * (placer_config.grace_ms) that the list does not show, the loop GETs the pod, within the
 * review's budget: not found, bound to another node, Succeeded/Failed, or being deleted while
 * unbound -> dropped; unbound (binding not landed or failed) or any error -> kept until the TTL
 * (counting too much never overfills a node). Reservations of pods known only by generateName
 * cannot be looked up and are kept.
 *
 * Fail closed: when the API server cannot be asked (error, timeout, unexpected answer) the
 * placement is denied with a message naming the call that failed; when the review's budget is
 * spent before a call, too.
 *
 * Thread-safe: placements may run on many threads at once; the per-node serialization is the
 * ledger's with --reservations local (its lock for settling and committing, its version for
 * the compare-and-swap of a decision taken with the node let go, its generation for a view
 * taken before the lock: placer.c decide_cached(), check_node()), and shared_place's with
 * --reservations shared (one leader per node decides and writes for the placements queued
 * behind it, shared.h).
 */
#ifndef GMG_PLACER_H
#define GMG_PLACER_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;
struct cache;
struct demand;
struct demand_config;
struct dra_pod_refs;
struct dra_store;
struct gpupolicy_labels;
struct kube_client;
struct ledger;
struct metrics;
struct outcome;
struct policies;
struct shared;

/* The time within which an admitted placement is persisted and shown by a list of its node: a
 * reservation younger than this is not looked up. The API server stores a request once every
 * validating webhook answered; they are called in parallel, so persistence follows our answer
 * by milliseconds unless another validating webhook on pods is slower than 5 s. Then a pod
 * CREATE still in flight could read as deleted (404) and lose its reservation early: raise
 * grace_ms (--reservation-grace) above the slowest such webhook's timeout. */
#define PLACER_GRACE_MS_DEFAULT 5000
#define PLACER_MAX_STALE_CHECKS 4 /* pods looked up per review for stale reservations */

/*
 * Where the loop reads pods and nodes live. Each callback returns 0 and an owned cJSON tree
 * (the caller cJSON_Delete()s it), or a negative KUBE_E* code (kube.h) with a one-line reason
 * in err; *http_code is the HTTP status (0 when no answer). KUBE_ENOTFOUND means 404. The
 * callbacks must be thread-safe. ctx is passed through.
 */
struct placer_source {
	void *ctx;
	int (*get_pod)(void *ctx, const char *ns, const char *name, struct cJSON **pod,
	               long *http_code, char *err, size_t errlen);
	int (*get_node)(void *ctx, const char *name, struct cJSON **node, long *http_code,
	                char *err, size_t errlen);
	/* A JSON array of the pods whose spec.nodeName is node (phases Succeeded/Failed may be
	 * omitted by the source; the loop skips them either way). */
	int (*list_pods_on_node)(void *ctx, const char *node, struct cJSON **items, long *http_code,
	                         char *err, size_t errlen);
};

/* The real API client as a source (c borrowed; must outlive the placer). */
struct placer_source placer_source_kube(struct kube_client *c);

/* What the loop decides with; the meaning of each field is webhook_config's (webhook.h), which
 * the admission adapter copies here. Everything is borrowed and must outlive the placer. */
struct placer_config {
	double threshold, warn_threshold; /* ratios (0,1] */
	int mode_warn, mode_audit;        /* --mode (audit only when not warn) */
	const struct demand_config *dcfg; /* the live view's demand rules */
	uint64_t budget_ms;               /* ms from the review's arrival; 0: none */
	uint64_t grace_ms;                /* 0: PLACER_GRACE_MS_DEFAULT */
	uint64_t unseen_ttl_ms;
	struct placer_source src;
	struct cache *cache; /* NULL: --cache off */
	int (*cache_fresh)(void *ctx, double now_s);
	int (*dra_fresh)(void *ctx, double now_s);
	int (*cache_connected)(void *ctx, double now_s);
	uint64_t (*cache_progress_ms)(void *ctx);
	void *cache_ctx;
	struct dra_store *dra;     /* NULL: DRA not read */
	struct ledger *ledger;     /* required */
	struct shared *shared;     /* --reservations shared; NULL: the ledger reserves */
	struct policies *policies; /* NULL: flags and annotations only */
	struct metrics *metrics;   /* may be NULL */
	/* --exempt-namespace: their pods are admitted anywhere and passed everywhere, yet count
	 * where they run (placer_exempt) */
	const char *const *exempt_namespaces;
	size_t n_exempt_namespaces;
};

/* The pod's GPUMemoryPolicy tier attributes (borrowed). */
struct pod_attrs {
	const char *ns;
	const char *priority_class;            /* NULL or "": none */
	const struct gpupolicy_labels *labels; /* NULL: none */
};

/* One placement, as the adapter resolved it; everything borrowed for the call. */
struct placer_pod {
	const char *pod_name; /* "ns/name" for messages */
	const char *ns;
	const char *key; /* the reservation key (webhook.c ledger_key); NULL: too long (refused,
	                    403 NameTooLong, where the node is known to be decided here) */
	const char *uid; /* the pod's metadata.uid, or NULL */
	const char *node;
	const struct demand *demand;
	const struct pod_attrs *attrs;
	const struct dra_pod_refs *refs; /* the DRA claims it names, or NULL */
	int dry_run;
	int pod_create; /* a pod CREATE (spec.nodeName): its pod may never be stored */
};

struct placer; /* opaque */

/* New loop; cfg is copied (what it points to is borrowed). NULL on a bad config or no memory. */
struct placer *placer_new(const struct placer_config *cfg);
void placer_free(struct placer *pl); /* NULL is a no-op; no placement may be running */

/* 1 when the watch cache may decide now: healthy (fresh and its watches open), or, after the
 * API server could not be asked (api_failed), merely fresh (webhook.h). */
int placer_cache_may_decide(const struct placer *pl, int api_failed);

/*
 * Decide pp from the watch cache, with no API call (o->api_failed: as the fallback). Returns 1
 * when decided (o set), 0 when the cache cannot decide it (off, not fresh, node unknown, or,
 * when !may_block, its node busy or shared reservations to write): take the live path.
 * may_block 0: on a server thread, never waits for a lock another placement holds.
 */
int placer_cached(struct placer *pl, const struct placer_pod *pp, int may_block, struct outcome *o);

/* Decide pp through the API server (the live path above); always decides (o set). May block
 * up to the budget plus one API call timeout. */
void placer_live(struct placer *pl, const struct placer_pod *pp, struct outcome *o);

/*
 * How an adapter gives a placement to placer_decide(): the placement itself (a pod CREATE with
 * nodeName: its placer_pod), or how to find its pod on each path (a Binding names its pod,
 * which the adapter reads from the cache, or GETs, and then hands to placer_cached or
 * placer_live). cached: as placer_cached with may_block 1 (1 decided, 0 take the live path;
 * o->api_failed set on the fallback below); live: as placer_live (always decides). With pod
 * set, cached and live are not used.
 */
struct placer_target {
	const struct placer_pod *pod;
	int (*cached)(void *ctx, struct outcome *o);
	void (*live)(void *ctx, struct outcome *o);
	void *ctx;
};

/*
 * A placement on a worker (may block), in the engine's one order: from the cache when it may
 * decide, else through the API server; and when the API server cannot be asked (the live
 * path's refusal APIServerUnavailable) while the cache's watch broke only moments ago
 * (placer_cache_may_decide(pl, 1): fresh but not connected), from the cache after all, with
 * o->api_failed set; if the cache cannot decide it either, the live path's refusal stands
 * (o->waited keeps counting both). o is set on return.
 */
void placer_decide(struct placer *pl, const struct placer_target *t, struct outcome *o);

/* ---- the scheduler extender's question (extender.h): reserving nothing ---- */

/*
 * Whether the engine can answer placer_fit now: NULL, or why not, as a reason code:
 * "PoliciesNotRead" (the GPUMemoryPolicy objects not listed yet), "CacheOff" (no watch cache:
 * the extender never reads the API server), "CacheNotReady" (not synced, or its watch broken
 * longer than the staleness bound), "DRANotRead" (the DRA store never listed). Checked in that
 * order.
 */
const char *placer_fit_ready(const struct placer *pl);

/* What placer_fit came to on one node. */
enum placer_fit_state {
	PLACER_FIT_JUDGED = 0,        /* verdict set: allowed or not, with the figures */
	PLACER_FIT_BUSY,              /* !may_block and a placement holds the node's ledger */
	PLACER_FIT_UNTRACKED,         /* the ledger cannot track the node (LEDGER_MAX_NODES) */
	PLACER_FIT_UNKNOWN_NODE,      /* the watch cache has not seen the node */
	PLACER_FIT_NO_GPU_HERE,       /* GPUs by DRA claims only, none of which holds or can get
	                                 a GPU on the node (the webhook's NotGPU there) */
	PLACER_FIT_NO_CAPACITY,       /* the node's GPU memory unknown or invalid: error */
	PLACER_FIT_INVALID,           /* the core cannot judge the placement: error */
	PLACER_FIT_POLICIES_NOT_READ, /* the GPUMemoryPolicy objects' relist failed meanwhile */
	PLACER_FIT_ENOMEM,
};

#define PLACER_ERR_MAX 1024 /* >= CAPACITY_MSG_MAX and a core message */

struct core_verdict;
struct placement_item;
struct policies_gen;

/* placer_fit's answer (caller's; placer_fit_clear releases it). */
struct placer_fit {
	enum placer_fit_state state;
	/* JUDGED: the core's verdict (core.h, decided without words: CORE_NO_WORDS), owned; it
	 * borrows the refusing policy's name from gen, held until placer_fit_clear */
	struct core_verdict *verdict;
	const struct policies_gen *gen;
	size_t n_in_flight;         /* the in_flight items counted (those not reserved already) */
	uint64_t in_flight_bytes;   /* their bytes */
	char error[PLACER_ERR_MAX]; /* NO_CAPACITY, INVALID: one line, what to fix */
};

/*
 * Would pp fit on pp->node now? The engine's order on the watch cache, reserving nothing
 * (pp->dry_run is taken as 1, pp->key as the name reservations match): the node's reservations
 * copied (resv_peek_ledger at the decision's clock, or this replica's copy of the shared
 * record: reservations.h), the node's and the pod's DRA claims (drastore.h), the node's view
 * copied out of the cache (view.h), and core_decide() once without words under the flags, the
 * node's annotation and the GPUMemoryPolicy objects selecting the node (a published generation).
 * No lock is held on return, and none across anything but a copy; no API call.
 * in_flight (borrowed, may be NULL with n 0): more pods to count on the node, read by the
 * caller before this call (the extender's pods in flight, holds.h: a hold ends only once its
 * pod is reserved or shown, so reading it first, then the reservations, then the view, counts
 * such a pod at least once); one whose uid a reservation has is counted once.
 * Call placer_fit_ready first: this does not check the cache's freshness. Returns out->state
 * (out set on every path; placer_fit_clear it).
 */
enum placer_fit_state placer_fit(struct placer *pl, const struct placer_pod *pp,
                                 const struct placement_item *in_flight, size_t n_in_flight,
                                 int may_block, struct placer_fit *out);
void placer_fit_clear(struct placer_fit *f); /* a zeroed or cleared one: no-op */

/* ---- what the pod alone decides (both adapters ask this before any node) ---- */

/* 1 when ns is one of placer_config.exempt_namespaces (NULL: 0). */
int placer_exempt(const struct placer *pl, const char *ns);

/* What a pod's placement on any node comes to before the node is read. */
enum placer_pod_class {
	PLACER_POD_GPU = 0, /* judged on the node: *d its demand; a pod that asks no GPU resource
	                       but names DRA claims gets placement_dra_demand() (placement.h) and
	                       is decided on the node (placer_dra_any, PLACER_FIT_NO_GPU_HERE) */
	PLACER_POD_MIRROR,  /* a mirror pod (pod.h, pod_is_mirror): the kubelet's, admitted */
	PLACER_POD_INVALID, /* its declaration (demand.h) or its DRA claim references (dra.h,
	                       dra_pod_refs; read only with a DRA store) are invalid: err says
	                       what to fix, without the pod's name */
	PLACER_POD_NOT_GPU, /* asks no configured GPU resource and names no DRA claim: admitted
	                       (d->warning may say why it might have been meant as one) */
};

/*
 * Classify pod (borrowed) by the engine's demand rules (placer_config.dcfg) and, when a DRA
 * store is read, the claims it names. *d and *refs (the caller's; refs zeroed first) are set as
 * far as the classification went; err (errlen bytes, >= DEMAND_MSG_MAX advised) is set for
 * PLACER_POD_INVALID. The pod's namespace is not looked at (placer_exempt).
 */
enum placer_pod_class placer_classify_pod(const struct placer *pl, const struct cJSON *pod,
                                          struct demand *d, struct dra_pod_refs *refs, char *err,
                                          size_t errlen);

/* What the adapters share with the engine (borrowed from its config, for its life). */
struct cache *placer_cache(const struct placer *pl); /* NULL: --cache off */
int placer_warns_only(const struct placer *pl); /* --mode warn or audit: over-threshold admitted */

/*
 * Whether the DRA store shows pp's claims holding or able to get GPUs on pp->node (*any 1),
 * for a pod that asks no GPU resource. 0, or -1 when out of memory (o refused). *any 0 without
 * a DRA store.
 */
int placer_dra_any(struct placer *pl, const struct placer_pod *pp, struct outcome *o, int *any)
    __attribute__((warn_unused_result));

#endif
