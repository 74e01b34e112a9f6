/*
 * kube: a small Kubernetes API client over libcurl (OpenSSL): the webhook's reads, and the
 * writes of its reservation records (Leases).
 *
 * Threads: one long-lived, connection-reusing curl easy handle per calling thread (created on
 * first use, kept in thread-local storage, freed at kube_client_free or thread exit); libcurl
 * 7.88 does not support sharing connections across threads. Every call has a total timeout
 * (the --api-timeout budget, ms) and CURLOPT_NOSIGNAL. The bearer token file is re-read when
 * its mtime changes (projected tokens rotate). A kubeconfig exec plugin (cfg->exec) is run by
 * execcred.h: its credential (token and/or client certificate) is cached until it expires and
 * put on each call; a 401 answer drops it, runs the plugin again and repeats the call once (a
 * watch is not repeated: its caller rewatches). A plugin's failure is KUBE_ETRANSPORT with the
 * plugin's message in err.
 *
 * Results are parsed cJSON trees the caller owns (cJSON_Delete). Response bodies are capped at
 * KUBE_BODY_MAX; list pagination uses limit=KUBE_PAGE_LIMIT and continue tokens, at most
 * KUBE_MAX_PAGES pages (KUBE_LIST_MAX_PAGES for kube_list_all, which holds one page at a time).
 *
 * Watches (kube_watch) are the exception to the per-thread handle: each watch has its own easy
 * handle and connection for its life, with no total timeout (see kube_watch).
 *
 * Errors: 0 on success; KUBE_E* codes; err gets a one-line reason that names the call and, for
 * HTTP errors, the status code and the API server's Status message.
 */
#ifndef GMG_KUBE_H
#define GMG_KUBE_H

#include "watch.h"

#include <stddef.h>

struct cJSON;
struct kube_config;

#define KUBE_BODY_MAX          (64u * 1024u * 1024u) /* bytes per response */
#define KUBE_PAGE_LIMIT        500
#define KUBE_MAX_PAGES         100
#define KUBE_LIST_MAX_PAGES    100000 /* pages of a kube_list_all */
#define KUBE_RV_MAX            128 /* bytes of a resourceVersion with its NUL: size rv buffers so */
#define KUBE_WATCH_TIMEOUT_MAX 86400L /* seconds, timeoutSeconds of a watch */
#define KUBE_WATCH_IDLE_SLACK  30L    /* seconds without a byte past timeoutSeconds: dead */

#define KUBE_ETRANSPORT (-1) /* connect, TLS, unreadable token file: err has the cause */
#define KUBE_EHTTP      (-2) /* non-2xx: *http_code set */
#define KUBE_ENOTFOUND  (-3) /* 404 */
#define KUBE_EPARSE     (-4) /* body not the JSON expected */
#define KUBE_ETOOBIG    (-5) /* body over KUBE_BODY_MAX or pages over KUBE_MAX_PAGES */
#define KUBE_ENOMEM     (-6)
#define KUBE_ETIMEOUT   (-7) /* total timeout passed */
#define KUBE_EINVAL     (-8) /* bad argument (empty or over-long name); no request made */
/* Seconds without a byte after which an open watch is dead: the API server sends a bookmark
 * about once a minute (k8s.io/apiserver pkg/storage/cacher, defaultBookmarkFrequency), so a
 * healthy watch is never this quiet. Plus the idle slack. */
#define KUBE_WATCH_SILENCE 60
#define KUBE_EGONE         (-9)  /* 410 Gone: resourceVersion or continue token too old: relist */
#define KUBE_ESTOP         (-10) /* the caller's callback or stop flag ended the call */
#define KUBE_ECONFLICT                                                                             \
	(-11) /* 409: a resourceVersion precondition failed (update), or the                       \
	         name is taken (create) */

struct kube_client;

/* Observer for metrics: called after each HTTP call with verb ("get", "list"), the resource
 * ("pods", "nodes"; of a "group/version/resource" path, its last segment), the HTTP code (0
 * when no answer) and the latency in seconds. */
typedef void (*kube_observer)(void *ctx, const char *verb, const char *resource, long code,
                              double seconds);

/* New client; cfg is copied (the caller may free it; an exec plugin's runner is made from it,
 * the plugin is not run yet: execcred_new's errors). timeout_ms > 0 is the budget of each
 * call in milliseconds (a paginated list shares one budget over its pages). NULL with err on a
 * bad config. Call curl_global_init() before (cmd does). Thread-safe once created: any number
 * of threads may call kube_get_* and kube_list_* concurrently. */
struct kube_client *kube_client_new(const struct kube_config *cfg, long timeout_ms,
                                    kube_observer obs, void *obs_ctx, char *err, size_t errlen);
/* Frees the client and every thread's handle. NULL is a no-op. No call may be in flight, and
 * no thread that used the client may be exiting concurrently. */
void kube_client_free(struct kube_client *c);

/* Lower the per-response body cap (bytes, default KUBE_BODY_MAX); for tests. Call before use. */
void kube_client_set_body_max(struct kube_client *c, size_t bytes);

/* GET /api/v1/namespaces/NS/pods/NAME -> *pod (owned by caller; NULL on error). ns and name
 * are URL-escaped, 1..253 bytes. *http_code (may be NULL) is the status, 0 without an answer.
 * KUBE_ENOTFOUND on 404. */
int kube_get_pod(struct kube_client *c, const char *ns, const char *name, struct cJSON **pod,
                 long *http_code, char *err, size_t errlen) __attribute__((warn_unused_result));

/* GET /api/v1/nodes/NAME -> *node. */
int kube_get_node(struct kube_client *c, const char *name, struct cJSON **node, long *http_code,
                  char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * Leases (coordination.k8s.io/v1), the shared reservation records (record.h, shared.h).
 *
 * kube_get_lease: GET /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME -> *lease.
 * kube_create_lease: POST the Lease object lease (borrowed; its metadata.name names it) to
 *   .../namespaces/NS/leases -> *out, the object as stored (with its resourceVersion).
 * kube_update_lease: PUT lease to .../namespaces/NS/leases/NAME -> *out. When lease carries
 *   metadata.resourceVersion the API server applies it only if the stored object still has
 *   that version (optimistic concurrency, etcd's compare-and-swap): else 409.
 * Results are owned by the caller (NULL on error). KUBE_ECONFLICT on 409 (update: the object
 * changed since it was read; create: the name exists): re-read and decide again.
 * KUBE_ENOTFOUND on 404. Others as kube_get_pod. The observer sees verbs "get", "create",
 * "update" on resource "leases". Thread-safe.
 */
int kube_get_lease(struct kube_client *c, const char *ns, const char *name, struct cJSON **lease,
                   long *http_code, char *err, size_t errlen) __attribute__((warn_unused_result));
int kube_create_lease(struct kube_client *c, const char *ns, const struct cJSON *lease,
                      struct cJSON **out, long *http_code, char *err, size_t errlen)
    __attribute__((warn_unused_result));
int kube_update_lease(struct kube_client *c, const char *ns, const char *name,
                      const struct cJSON *lease, struct cJSON **out, long *http_code, char *err,
                      size_t errlen) __attribute__((warn_unused_result));

/*
 * PATCH /apis/<group/version/resource>/NAME/status (a cluster-scoped object's status
 * subresource; resource as for kube_list_all) with patch (borrowed) as a JSON merge patch
 * (Content-Type application/merge-patch+json, RFC 7386). The answer's body is not kept.
 * KUBE_ENOTFOUND on 404 (the object is gone), KUBE_ECONFLICT on 409; else as kube_get_pod.
 * The observer sees verb "patch" and the resource's last segment ("gpumemorypolicies").
 * Thread-safe.
 */
int kube_patch_status(struct kube_client *c, const char *resource, const char *name,
                      const struct cJSON *patch, long *http_code, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* All pods with spec.nodeName=NODE and phase not Succeeded/Failed, every page, merged into one
 * JSON array *items (owned by caller). A 410 Gone mid-pagination restarts the list once. The
 * body cap applies to the sum of the pages. */
int kube_list_pods_on_node(struct kube_client *c, const char *node, struct cJSON **items,
                           long *http_code, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Called per item of kube_list_all; item is borrowed, valid during the call only. Return 0 to
 * go on, nonzero to stop (kube_list_all then returns KUBE_ESTOP). */
typedef int (*kube_item_fn)(void *ctx, const struct cJSON *item);

/*
 * Every object of a cluster-wide collection: GET /api/v1/<resource>?limit=<page_limit>&continue=
 * (resource "group/version/plural": GET /apis/group/version/plural?...)
 * page by page, resource a lowercase plural ("pods", "nodes"; 1..63 bytes of [a-z0-9]). Each
 * page is parsed, fn called per item in order, then the page freed: memory is bounded by one
 * page, and each page by the body cap. page_limit 0 -> KUBE_PAGE_LIMIT; at most
 * KUBE_LIST_MAX_PAGES pages (KUBE_ETOOBIG past it). Each page request has the client's timeout
 * (there is no budget for the whole list: a cluster's list may take minutes).
 *
 * On success rv (rvlen bytes; KUBE_RV_MAX is enough for any API server) gets the list's
 * metadata.resourceVersion, the point a watch continues from. It is the first page's: the API
 * server gives every page of one list the same version, and a server that answers each page from
 * live state gives the oldest one there, so a watch from it replays changes made during the list
 * (which a cache applies idempotently) instead of missing them. rv may be NULL with rvlen 0 when
 * not wanted. A list without a resourceVersion is KUBE_EPARSE; one longer than rvlen - 1,
 * KUBE_ETOOBIG.
 *
 * Errors: a 410 Gone (on any page; mid-list: the continue token expired) is KUBE_EGONE and is
 * not retried: the caller relists from scratch (items already delivered are from an abandoned
 * list). fn returning nonzero: KUBE_ESTOP. Else as kube_get_pod. *http_code (may be NULL) is the
 * last page's status. The observer sees one "list" call per page. Thread-safe.
 */
int kube_list_all(struct kube_client *c, const char *resource, long page_limit, kube_item_fn fn,
                  void *ctx, char *rv, size_t rvlen, long *http_code, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* The same, aborted (KUBE_ESTOP) as soon as *stop (may be NULL) is nonzero, also while a page
 * is awaited: a shutdown does not wait up to the client timeout for a slow API server. */
int kube_list_all_until(struct kube_client *c, const char *resource, long page_limit,
                        kube_item_fn fn, void *ctx, char *rv, size_t rvlen, long *http_code,
                        const _Atomic int *stop, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * A streamed watch: GET /api/v1/<resource>?watch=1&resourceVersion=RV&allowWatchBookmarks=true
 * &timeoutSeconds=T (resource as for kube_list_all; resource_version NULL or "" omits it: the
 * server then starts from its current state; 1..KUBE_RV_MAX-1 bytes otherwise; timeout_seconds
 * 1..KUBE_WATCH_TIMEOUT_MAX). The body is decoded with a watch_decoder as it arrives (never
 * buffered whole; one event may be up to min(body cap, WATCH_EVENT_MAX) bytes) and fn is called
 * per event, in order, on the calling thread; object is borrowed for the call.
 *
 * Transport: its own easy handle and connection for the call (not the thread's cached one), no
 * total timeout, connect timeout = the client timeout, and a low-speed limit: no byte at all (not
 * even a bookmark) for min(timeout_seconds, KUBE_WATCH_SILENCE) + KUBE_WATCH_IDLE_SLACK s (plus up
 * to ~6 s: curl measures speed over a few seconds' window) ends it as KUBE_ETIMEOUT (a dead peer
 * behind a silent network). Token, TLS and path handling as the other calls.
 *
 * When the response headers of a 2xx answer arrive, fn is called once with WATCH_OPENED and a
 * NULL object, before any event: the watch is established (a quiet watch is a healthy one).
 *
 * *stop (may be NULL) is polled between events and about once a second while idle: another
 * thread sets it nonzero to end the watch within ~1 s (KUBE_ESTOP).
 *
 * Returns 0 when the server ends the stream normally (timeoutSeconds passed, or it closed the
 * watch cleanly): the caller rewatches from the last resourceVersion it saw. KUBE_EGONE on HTTP
 * 410, and also after an ERROR event whose Status code is 410 (fn sees that event first): the
 * caller relists. Another ERROR event ends the watch with KUBE_EHTTP (its Status message in
 * err). KUBE_ESTOP when fn returned nonzero or *stop was set. An undecodable event: KUBE_EPARSE;
 * one over the cap: KUBE_ETOOBIG. Other KUBE_E* as kube_get_pod. *http_code (may be NULL) is the
 * HTTP status (200 for a stream, even one that carried an ERROR event). The observer is called
 * once per watch, when it ends, with verb "watch" and the watch's whole duration. Thread-safe:
 * any number of watches may run at once, on different threads.
 */
int kube_watch(struct kube_client *c, const char *resource, const char *resource_version,
               long timeout_seconds, watch_event_fn fn, void *ctx, const _Atomic int *stop,
               long *http_code, char *err, size_t errlen) __attribute__((warn_unused_result));

/* Seconds of silence tolerated past timeoutSeconds before a watch is dead (default
 * KUBE_WATCH_IDLE_SLACK); for tests. Call before use. */
void kube_client_set_watch_idle_slack(struct kube_client *c, long seconds);

/* Feed the Date header of every answer to a call (not to watches) to clock (serverclock.h),
 * borrowed: it must outlive the client. Set before the client is shared between threads; NULL:
 * none (the default). */
struct serverclock;
void kube_client_set_clock(struct kube_client *c, struct serverclock *clock);

/* Name of a KUBE_E* code. */
const char *kube_strerror(int code);

#endif
