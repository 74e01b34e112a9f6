/*
 * kube: a small Kubernetes API client over libcurl (OpenSSL), for the webhook's reads.
 *
 * Threads: one long-lived, connection-reusing curl easy handle per calling thread (created on
 * first use, kept in thread-local storage, freed at kube_client_free or thread exit); libcurl
 * 7.88 does not support sharing connections across threads. Every call has a total timeout
 * (the --api-timeout budget, ms) and CURLOPT_NOSIGNAL. The bearer token file is re-read when
 * its mtime changes (projected tokens rotate).
 *
 * Results are parsed cJSON trees the caller owns (cJSON_Delete). Response bodies are capped at
 * KUBE_BODY_MAX; list pagination uses limit=KUBE_PAGE_LIMIT and continue tokens, at most
 * KUBE_MAX_PAGES pages.
 *
 * Errors: 0 on success; KUBE_E* codes; err gets a one-line reason that names the call and, for
 * HTTP errors, the status code and the API server's Status message.
 */
#ifndef GMG_KUBE_H
#define GMG_KUBE_H

#include <stddef.h>

struct cJSON;
struct kube_config;

#define KUBE_BODY_MAX   (64u * 1024u * 1024u) /* bytes per response */
#define KUBE_PAGE_LIMIT 500
#define KUBE_MAX_PAGES  100

#define KUBE_ETRANSPORT (-1) /* connect, TLS, unreadable token file: err has the cause */
#define KUBE_EHTTP      (-2) /* non-2xx: *http_code set */
#define KUBE_ENOTFOUND  (-3) /* 404 */
#define KUBE_EPARSE     (-4) /* body not the JSON expected */
#define KUBE_ETOOBIG    (-5) /* body over KUBE_BODY_MAX or pages over KUBE_MAX_PAGES */
#define KUBE_ENOMEM     (-6)
#define KUBE_ETIMEOUT   (-7) /* total timeout passed */
#define KUBE_EINVAL     (-8) /* bad argument (empty or over-long name); no request made */

struct kube_client;

/* Observer for metrics: called after each HTTP call with verb ("get", "list"), the resource
 * ("pods", "nodes"), the HTTP code (0 when no answer) and the latency in seconds. */
typedef void (*kube_observer)(void *ctx, const char *verb, const char *resource, long code,
                              double seconds);

/* New client; cfg is copied (the caller may free it). timeout_ms > 0 is the budget of each
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

/* All pods with spec.nodeName=NODE and phase not Succeeded/Failed, every page, merged into one
 * JSON array *items (owned by caller). A 410 Gone mid-pagination restarts the list once. The
 * body cap applies to the sum of the pages. */
int kube_list_pods_on_node(struct kube_client *c, const char *node, struct cJSON **items,
                           long *http_code, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Name of a KUBE_E* code. */
const char *kube_strerror(int code);

#endif
