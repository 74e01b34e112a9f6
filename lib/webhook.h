/*
 * webhook: the review pipeline, from AdmissionReview bytes to AdmissionReview bytes. No HTTP.
 *
 *   decode -> classify ->
 *     pod CREATE without spec.nodeName: check the GPU declarations (deny if invalid, warnings)
 *     pod CREATE with spec.nodeName, pods/binding CREATE (target Node): placement check
 *     anything else (UPDATE, DELETE, CONNECT, other kinds and subresources): allowed
 *   -> encode, echoing request.uid on every path.
 *
 * Placement check on node N for pod P:
 *   mirror pods (annotation kubernetes.io/config.mirror), exempt namespaces and non-GPU pods
 *   are allowed; otherwise GET node -> capacity (threshold annotation overrides the flag) ->
 *   lock N in the ledger -> list pods on N -> used = sum of their demands (P itself and
 *   Succeeded/Failed pods skipped; terminating pods count; a GPU pod without a valid
 *   declaration counts its GPUs x memory per GPU) -> drop reservations the list now shows ->
 *   add the other pending reservations -> policy_decide -> if allowed and not dry-run, reserve
 *   -> unlock.
 * Fail closed: when the API server cannot be asked (error, timeout, unexpected answer) the
 * placement is denied with a message naming the call that failed.
 *
 * The pipeline reads the cluster only through struct webhook_source, which the real API client
 * satisfies (webhook_source_kube) and tests fake. It logs one JSON line per decision (placements
 * and declaration checks at info; always-allowed reviews at debug, they are the bulk of the
 * traffic: every kubelet status update) and records metrics.
 *
 * Thread-safe: webhook_review() may run on many threads at once; the per-node serialization is
 * the ledger's.
 */
#ifndef GMG_WEBHOOK_H
#define GMG_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;
struct kube_client;
struct ledger;
struct metrics;

#define WEBHOOK_EBADREQUEST       (-1) /* not an AdmissionReview with request.uid: answer 400 */
#define WEBHOOK_ENOMEM            (-2) /* could not build the answer: answer 500 */
#define WEBHOOK_ERR_MAX           512
#define WEBHOOK_MAX_EXEMPT        64
#define WEBHOOK_MIRROR_ANNOTATION "kubernetes.io/config.mirror"

/*
 * Where the pipeline reads pods and nodes. Each callback returns 0 and an owned cJSON tree
 * (the caller cJSON_Delete()s it), or a negative KUBE_E* code (kube.h) with a one-line reason
 * in err; *http_code is the HTTP status (0 when no answer). KUBE_ENOTFOUND means 404. The
 * callbacks must be thread-safe. ctx is passed through.
 */
struct webhook_source {
	void *ctx;
	int (*get_pod)(void *ctx, const char *ns, const char *name, struct cJSON **pod,
	               long *http_code, char *err, size_t errlen);
	int (*get_node)(void *ctx, const char *name, struct cJSON **node, long *http_code,
	                char *err, size_t errlen);
	/* A JSON array of the pods whose spec.nodeName is node (phases Succeeded/Failed may be
	 * omitted by the source; the pipeline skips them either way). */
	int (*list_pods_on_node)(void *ctx, const char *node, struct cJSON **items, long *http_code,
	                         char *err, size_t errlen);
};

/* The real API client as a source (c borrowed; must outlive the webhook). */
struct webhook_source webhook_source_kube(struct kube_client *c);

struct webhook_config {
	double threshold;                 /* ratio (0,1]; a node annotation overrides it */
	double warn_threshold;            /* ratio (0,1] */
	int mode_warn;                    /* 1: over-threshold placements allowed with a warning */
	const char *const *gpu_resources; /* NULL -> nvidia.com/gpu; strings copied */
	size_t n_gpu_resources;           /* <= DEMAND_MAX_RESOURCES */
	const char *const *exempt_namespaces; /* strings copied */
	size_t n_exempt_namespaces;           /* <= WEBHOOK_MAX_EXEMPT */
	/* Time budget of one review, ms (0: none): no API call starts once it is spent (the
	 * placement is denied instead), so a review ends within budget + one call timeout, even
	 * when it waited for its node's lock behind other placements. main passes 2 x
	 * --api-timeout: answers within 3 x --api-timeout (6 s by default, under the API
	 * server's default webhook timeout of 10 s). */
	uint64_t budget_ms;
};

struct webhook; /* opaque */

/*
 * New pipeline. cfg and src are copied; ledger (required) and metrics (may be NULL) are
 * borrowed and must outlive it. NULL on a bad config or allocation failure.
 */
struct webhook *webhook_new(const struct webhook_config *cfg, const struct webhook_source *src,
                            struct ledger *ledger, struct metrics *metrics);
void webhook_free(struct webhook *w); /* NULL is a no-op; no review may be running */

/*
 * Review body[0..len) (an AdmissionReview request, untrusted). Returns 0 with *out (caller
 * owns, free()) holding the AdmissionReview response and *out_len its length: answer 200.
 * Returns WEBHOOK_EBADREQUEST with a reason in err when the body is not JSON or has no
 * request.uid (answer 400), WEBHOOK_ENOMEM otherwise (answer 500).
 */
int webhook_review(struct webhook *w, const char *body, size_t len, char **out, size_t *out_len,
                   char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
