/*
 * informer: keeps the watch cache (cache.h) in step with the API server, the way client-go's
 * reflector does (ARCHITECTURE.md, "cluster view").
 *
 * One thread per kind (pods, nodes; with informer_config.dra also resource.k8s.io/v1
 * resourceslices and resourceclaims, into the DRA store, drastore.h): LIST every object (paginated,
 * kube_list_all), replace the cache's content with it (cache_resync_*), then WATCH from the list's
 * resourceVersion with bookmarks (kube_watch), applying each event as it arrives. A watch the
 * server ends normally (timeoutSeconds) is resumed from the last resourceVersion seen. A 410 Gone
 * (as an HTTP status or an ERROR event: the version is too old) relists, after a jittered delay
 * that grows with the list (INFORMER_RELIST_JITTER_MS). Any other failure retries the watch after a
 * capped exponential backoff with jitter (INFORMER_BACKOFF_MIN_MS doubling up to
 * INFORMER_BACKOFF_MAX_MS, each sleep drawn from [d/2, d]); a failed LIST retries the LIST.
 * A watch that delivered an event (a bookmark counts) or stayed open INFORMER_WATCH_LIVED_S
 * restarts the doubling: quiet watches that end one after another (no event and no bookmark,
 * as the DRA watches of e2e test 12 saw) are resumed after the first step, not later each time.
 *
 * Tier attributes (cache.h): bound GPU pods keep labels and priority classes only while a
 * GPUMemoryPolicy tier selects by them. The policies' thread tells the cache what they want
 * (cache_set_pod_attrs): grown from each object before it is applied, settled from the whole
 * store after each event and LIST once synced (CACHE_ATTRS_ALL before). When pods the cache
 * holds lack a kind now wanted, the pods' watch is ended and pods are LISTed again after the
 * same jittered delay as after a 410 (every replica reads the same policy event at about the
 * same moment; a list under 100 objects waits not at all), the watch counting as broken
 * meanwhile, as after a 410.
 *
 * Freshness (informer_fresh): the cache may decide placements once both kinds have been listed,
 * while every object of the last list and events was stored (a store failure, CACHE_ENOMEM,
 * CACHE_EFULL or an object it cannot key (CACHE_EINVAL), forces a relist and keeps the cache from
 * deciding until one succeeds), and while neither watch has been broken for longer than the
 * staleness bound. A watch counts as broken from the moment one ends in an error until a new one is
 * open (its 2xx answer arrived: WATCH_OPENED), and an open watch silent for INFORMER_SILENCE_S
 * counts as broken since its last word. Callers use the direct API path otherwise. Progress
 * (informer_progress_ms) is when both kinds last heard from the API server: the webhook expires
 * reservations by that clock.
 *
 * DRA kinds: a 404 on their LIST (the API server does not serve resource.k8s.io/v1) leaves the
 * DRA store empty and synced (dra_store_absent), is logged once, and the LIST is tried again
 * every INFORMER_DRA_ABSENT_RETRY_S without a warning each time. They do not gate the pods'
 * and nodes' freshness (informer_fresh): both the cache path and the API path read DRA from the
 * store, which has no live fallback; informer_dra_fresh says whether it may be counted.
 *
 * Metrics (informer_collect, a metrics collector):
 *   gpu_memory_guard_cache_synced{resource}                  gauge 1 when listed, complete and
 *                                                            watching
 *   gpu_memory_guard_cache_events_total{resource,type}       counter (added, modified, deleted,
 *                                                            bookmark, error)
 *   gpu_memory_guard_cache_relists_total{resource}           counter (lists after the first)
 *   gpu_memory_guard_cache_watch_restarts_total{resource}    counter (watches ended in error)
 *   gpu_memory_guard_cache_last_event_age_seconds{resource}  gauge, age of the newest event
 *                                                            (bookmarks included); -1 before any
 *   gpu_memory_guard_cache_objects{resource}                 gauge, objects held
 *   gpu_memory_guard_cache_bytes                             gauge, the store's heap in bytes
 *                                                            (cache_stats().bytes)
 *   gpu_memory_guard_memory_limit_bytes                      gauge, the cgroup's memory limit
 *                                                            (informer_config), 0 when none
 *   per GPU node (a known Node with a GPU capacity, or with GPU pods), label node:
 *   gpu_memory_guard_node_capacity_bytes, gpu_memory_guard_node_declared_bytes (the cached pods'
 *   demands), gpu_memory_guard_node_reserved_bytes (this replica's in-flight reservations),
 *   gpu_memory_guard_node_limit_bytes (capacity x the threshold in force).
 *
 * Thread-safe: informer_fresh, informer_status and informer_collect may be called from any
 * thread while the informer runs. Clock: CLOCK_MONOTONIC seconds (the webhook's clock).
 */
#ifndef GMG_INFORMER_H
#define GMG_INFORMER_H

#include <stddef.h>
#include <stdint.h>

struct cache;
struct kube_client;
struct ledger;
struct metrics_writer;

#define INFORMER_BACKOFF_MIN_MS 250
#define INFORMER_BACKOFF_MAX_MS 30000
/* A watch that was open this long when it ended (events or not) restarts the backoff. */
#define INFORMER_WATCH_LIVED_S 1.0
#define INFORMER_WATCH_TIMEOUT 300 /* seconds asked of the server per watch (+ up to 60 jitter) */
/* DRA kinds' (+ up to 10 jitter): under INFORMER_SILENCE_S and KUBE_WATCH_SILENCE, so that a quiet
 * watch the server sends no bookmark is ended and resumed by the server's timeout, never judged
 * silent (stale: DRANotRead) or dead. */
#define INFORMER_DRA_WATCH_TIMEOUT 40
/* A LIST after a 410 Gone waits a draw from [0, d] ms, d = the last list's objects /
 * INFORMER_RELIST_JITTER_PER_MS, at most INFORMER_RELIST_JITTER_MS: replicas whose watches broke
 * together (an API server restart) do not all list a large cluster at once (1,000,000 pods:
 * spread over 5 s), while a small one relists at once (under 100 objects: no wait). Seeded
 * from getrandom(): replicas started in the same second, each pid 1 in its container, draw
 * apart. */
#define INFORMER_RELIST_JITTER_MS     5000
#define INFORMER_RELIST_JITTER_PER_MS 100
/* The wait before a LIST after a 410, in ms: a draw (rand_r(seed)) from [0, d], d =
 * last_listed / INFORMER_RELIST_JITTER_PER_MS, at most INFORMER_RELIST_JITTER_MS. Pure but
 * for *seed. */
unsigned informer_relist_jitter_ms(size_t last_listed, unsigned *seed);
/* A seed for the draws of one informer thread: getrandom(), else the monotonic clock's
 * nanoseconds and the pid, with the wall clock's seconds and salt mixed in. */
unsigned informer_jitter_seed(unsigned salt);
/* An open watch silent this long (no event, no bookmark: the API server sends one about once a
 * minute, k8s.io/apiserver pkg/storage/cacher defaultBookmarkFrequency) counts as broken. */
#define INFORMER_SILENCE_S 75.0

/* The DRA collections (drastore.h), group/version/plural. */
#define INFORMER_SLICES_RESOURCE    "resource.k8s.io/v1/resourceslices"
#define INFORMER_CLAIMS_RESOURCE    "resource.k8s.io/v1/resourceclaims"
#define INFORMER_DRA_ABSENT_RETRY_S 300

/* The GPUMemoryPolicy collection (policies.h), group/version/plural. */
#define INFORMER_POLICIES_RESOURCE "gpu-memory-guard.io/v1alpha1/gpumemorypolicies"

struct policies;
struct dra_store;

struct informer_config {
	struct dra_store *dra;     /* two more threads list and watch ResourceSlices and
	                              ResourceClaims into it; NULL: none (borrowed) */
	struct policies *policies; /* a third thread lists and watches GPUMemoryPolicy objects
	                              into it (policies.h); NULL: none (borrowed) */
	long page_limit;           /* items per LIST page (0: KUBE_PAGE_LIMIT) */
	double threshold;          /* --threshold, ratio (0,1], and whether the flags' check is
	                              a warning (--mode warn or audit, as the webhook judges):
	                              the node_limit_bytes gauge's threshold in force
	                              (core_decide() without a pod) */
	int mode_warn;
	struct ledger *ledger;       /* for node_reserved_bytes; may be NULL (borrowed) */
	double max_staleness_s;      /* --cache-max-staleness, for informer_fresh_fn */
	uint64_t memory_limit_bytes; /* the cgroup's memory limit (memlimit.h), 0: none. The
	                                cache's bytes are logged against it after each LIST of
	                                pods, and /readyz warns while they are above
	                                memory_warn_ratio of it */
	double memory_warn_ratio;    /* ratio (0,1]; 0: MEMLIMIT_WARN_RATIO (--memory-warn-ratio) */
};

struct informer_kind_status {
	int synced;            /* listed at least once */
	int incomplete;        /* an object could not be stored: relisting, the cache does not
	                          decide */
	int watching;          /* a watch is open now (or being opened) */
	double broken_for_s;   /* how long the watch has been broken; 0 when not broken */
	double last_event_age; /* seconds since the newest event, -1 before any */
	unsigned long relists, watch_restarts;
	unsigned long events[5]; /* by type: added, modified, deleted, bookmark, error */
	char last_error[256];    /* the latest list/watch failure, "" when none */
};

struct informer_status {
	struct informer_kind_status pods, nodes;
	struct informer_kind_status policies;       /* zero when informer_config.policies is NULL */
	struct informer_kind_status slices, claims; /* zero when informer_config.dra is NULL */
};

struct informer;

/* New informer over kc and cache (both borrowed; they must outlive it). cfg copied. NULL on
 * allocation failure. Nothing runs before informer_start(). */
struct informer *informer_new(struct kube_client *kc, struct cache *cache,
                              const struct informer_config *cfg);
/* Start the two threads. 0, or -1 when a thread cannot be created. */
int informer_start(struct informer *inf) __attribute__((warn_unused_result));
/* Stop the threads (within about a second: watches poll a stop flag) and free. NULL no-op. */
void informer_free(struct informer *inf);

/* 1 when placements may read the cache at now_s (webhook_now() seconds): both kinds listed and
 * no watch broken for longer than max_staleness_s. */
int informer_fresh(struct informer *inf, double now_s, double max_staleness_s);

/* Whether the DRA store (informer_config.dra) may be counted now: 1 when ResourceSlices and
 * ResourceClaims are each listed with every object stored and each watch broken no longer than
 * max_staleness_s (as informer_fresh), or the kind not served (404, dra_store_absent); 0 when
 * both were listed but a watch has been broken longer (the store is as it was then); -1 while
 * either has not been listed completely (the store knows nothing). 1 without a DRA store, -1 for
 * a NULL informer. Thread-safe, never blocks. */
int informer_dra_fresh(struct informer *inf, double now_s, double max_staleness_s);

/* informer_dra_fresh(ctx, now_s, cfg.max_staleness_s), shaped for webhook_config.dra_fresh (the
 * engine's, placer_config.dra_fresh, which the extender asks too). */
int informer_dra_fresh_fn(void *ctx, double now_s);

/* informer_fresh(ctx, now_s, cfg.max_staleness_s), shaped for webhook_config.cache_fresh. */
int informer_fresh_fn(void *ctx, double now_s);

/* The /readyz line (server_options.ready_note): "cache: synced (N pods, M nodes)", or why
 * placements read the API server now ("cache: syncing", "cache: pods watch broken for 7.1s:
 * ..."). Above it, while the cache's bytes are over memory_warn_ratio of
 * informer_config.memory_limit_bytes, a line "warning: the watch cache holds N MiB, P% of the
 * memory limit L MiB (...)" (still ready: the replica decides as before; the operator raises
 * the limit, docs/install.md "Sizing"). ctx is the informer. */
void informer_ready_note(void *ctx, char *buf, size_t cap);

/* The readiness gate (server_options.ready_gate), ctx the informer: 0 with why while the DRA
 * store (informer_config.dra) has not listed ResourceSlices or ResourceClaims completely yet
 * (the webhook refuses every GPU placement meanwhile, DRANotRead; a 404 counts as listed), or
 * while the GPUMemoryPolicy store (informer_config.policies) is not synced, i.e. before its first
 * LIST completed or after a relist could not store every object: the webhook then refuses every GPU
 * placement (PoliciesNotRead), so the replica must not take reviews. 1 otherwise, also
 * without policies: an unsynced pod or node cache only sends placements to the API server,
 * it refuses nothing. Thread-safe, never blocks. */
int informer_ready_gate(void *ctx, char *why, size_t cap);

/* 1 when both watches are open and healthy now (not broken, not silent), the cache complete:
 * the cache alone may decide. Between this and informer_fresh_fn (a break shorter than the
 * staleness bound) the webhook asks the API server first and uses the cache only when the API
 * server cannot be asked: writes made meanwhile (exempt pods, other replicas' placements) may be
 * missing from the cache. Shaped for webhook_config.cache_connected. */
int informer_connected_fn(void *ctx, double now_s);

/* When the API server last spoke on both kinds (the older of the two), monotime_ms(); shaped
 * for webhook_config.cache_progress_ms. */
uint64_t informer_progress_ms(void *ctx);

/* A copy of the state, for /readyz and tests. */
void informer_status(struct informer *inf, struct informer_status *out);

/* metrics_collector_fn: the series listed above. ctx is the informer. */
void informer_collect(void *ctx, struct metrics_writer *w);

#endif
