/*
 * webhook: the admission adapter (ARCHITECTURE.md), from AdmissionReview bytes to
 * AdmissionReview bytes. No HTTP, and no placement logic of its own: it decodes the review,
 * resolves the pod being placed (its demand, GPUMemoryPolicy tier attributes and DRA claims:
 * from the review's object for a pod CREATE, for a Binding from the watch cache's copy of the
 * pod, or a GET), asks the engine loop (placer.h: view, reservations, core_decide, commit) for
 * the verdict, applies --mode, and encodes. It borrows the kube client, cache, ledger, shared
 * record and policy store it is given, and hands them to the placer.
 *
 *   decode -> classify ->
 *     pod CREATE without spec.nodeName: check the GPU declarations (deny if invalid, warnings)
 *     pod CREATE with spec.nodeName, pods/binding CREATE (target Node): placement check
 *     anything else (UPDATE, DELETE, CONNECT, other kinds and subresources): allowed
 *   -> encode, echoing request.uid on every path.
 *
 * Placement check on node N for pod P (decided here from the pod alone): mirror pods
 * (annotation kubernetes.io/config.mirror), exempt namespaces and non-GPU pods are allowed; so
 * is a Binding of a pod already bound or being deleted, or naming another uid than the pod's
 * (the API server's storage refuses it after admission, 409 Conflict: reserving for it would
 * be a phantom on the Binding's node), reserving nothing (reasons AlreadyBound, BeingDeleted,
 * OtherPod; the cache's copy of the pod answers when it has the Binding's uid). Every other
 * placement is the placer's, in the order of placer_decide: from the watch cache (placer_cached)
 * when it is fresh and healthy, else through the API server (placer_live), and when the API server
 * cannot be asked while the cache's watch broke only moments ago (fresh but not connected), from
 * the cache after all; for a Binding the adapter finds the pod on each path (the cache's copy, or a
 * GET). placer.h says how each path decides, which reservations count and what fails closed.
 *
 * No message or warning contains '%': kube-scheduler passes a refused binding's message to
 * Eventf as the format string (pkg/scheduler/schedule_one.go), which would garble it in the
 * FailedScheduling event users read. The policy spells "percent"; a '%' in echoed text (a
 * declared value, an annotation, an API server error) is replaced by U+FF05 FULLWIDTH PERCENT
 * SIGN, which reads the same.
 *
 * The adapter and the placer read the cluster only through struct placer_source (placer.h),
 * which the real API client satisfies (placer_source_kube) and tests fake. It logs one JSON
 * line per decision (placements and declaration checks at info; always-allowed reviews at
 * debug, they are the bulk of the traffic: every kubelet status update; "source" says which
 * view decided a placement: "cache" or "api") and records metrics.
 *
 * Thread-safe: reviews may run on many threads at once (placer.h says how placements on one
 * node are serialized).
 */
#ifndef GMG_WEBHOOK_H
#define GMG_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>

#include "placer.h"
#include "server.h"

struct cJSON;
struct cache;
struct dra_store;
struct kube_client;
struct ledger;
struct metrics;
struct shared;
struct policies;

#define WEBHOOK_EBADREQUEST (-1) /* not an AdmissionReview with request.uid: answer 400 */
#define WEBHOOK_ENOMEM      (-2) /* could not build the answer: answer 500 */
#define WEBHOOK_ERR_MAX     512
#define WEBHOOK_MAX_EXEMPT  64
/* The auditAnnotations key of audit-mode breaches; the API server writes it to the audit log
 * as "<webhook name>/audit-violations" (the shape of Pod Security Admission's). */
#define WEBHOOK_AUDIT_KEY "audit-violations"

struct webhook_config {
	double threshold;      /* ratio (0,1]; a node annotation overrides it */
	double warn_threshold; /* ratio (0,1] */
	/* --mode (at most one of the two set; neither: enforce). Whole-webhook rollout: in both
	 * modes every review enforce would refuse, whatever the reason (over the threshold, no
	 * or a bad declaration, no capacity known, the API server not reachable, a
	 * GPUMemoryPolicy in enforce mode...), is admitted and counted in
	 * gpu_memory_guard_mode_admitted_total{mode,reason}; its log line carries "mode" and
	 * the refusal's reason. mode_warn: the refusal's text is the answer's warning.
	 * mode_audit: no warning; the text goes to the auditAnnotations entry WEBHOOK_AUDIT_KEY
	 * ("--mode audit: <text>", after any GPUMemoryPolicy audit entries); an admitted pod whose
	 * demand was inferred (not GPU_MEMORY_LIMIT) is reported there too ("--mode audit: GPU
	 * memory inferred, not declared: <source>"), without counting as admitted by the mode.
	 * Over-threshold
	 * placements admitted so are reserved as any admitted placement; the others (refused
	 * before a decision could reserve) count once the API server shows the pod. */
	int mode_warn;
	int mode_audit;
	const char *const *gpu_resources; /* NULL -> nvidia.com/gpu; strings copied */
	size_t n_gpu_resources;           /* <= DEMAND_MAX_RESOURCES */
	int infer; /* --undeclared infer: every demand source (demand.h) and the exclusive/shared
	              rule (placement.h); 0: GPU_MEMORY_LIMIT only */
	const struct engine_defaults *engines; /* assumed engine defaults (copied); NULL: the
	                                         engine.h table */
	const char *const *exempt_namespaces;  /* strings copied */
	size_t n_exempt_namespaces;            /* <= WEBHOOK_MAX_EXEMPT */
	/* Time budget of one review, ms from its arrival (0: none): no API call starts once it
	 * is spent (the placement is denied instead), so a review ends within budget + one call
	 * timeout of its arrival, even when it waited for a thread or for its node's lock behind
	 * other placements. main passes 2 x
	 * --api-timeout: answers within 3 x --api-timeout (6 s by default, under the API
	 * server's default webhook timeout of 10 s). */
	uint64_t budget_ms;
	/* A reservation the list does not show is looked up once older than this, ms
	 * (0: PLACER_GRACE_MS_DEFAULT). */
	uint64_t grace_ms;
	/* A pod CREATE with spec.nodeName: its reservation counts at most this long (ms; 0: as
	 * long as any other, the ledger's TTL) unless its pod shows before. The API server
	 * stores the pod only after the whole admission chain admits it: validating webhooks
	 * run in parallel, each within its timeoutSeconds (at most 30 s), so a pod not stored
	 * within that plus its storage never will be (a later webhook refused it, or the review
	 * was forged). On the cache path the bound runs on the cache's clock, like the TTL.
	 * Bindings keep the TTL (their pod exists: it is checked by uid). */
	uint64_t unseen_ttl_ms;
	/* The watch cache (cache.h), or NULL (--cache off), borrowed. While cache_fresh(cache_ctx,
	 * now) returns 1, a placement whose node (and, for a Binding, whose pod) the cache knows
	 * is decided from it in webhook_prepare(), with no API call and no worker thread; any
	 * other placement takes the API server path of webhook_finish(). */
	struct cache *cache;
	int (*cache_fresh)(void *ctx, double now_s);
	/* The DRA store (drastore.h), or NULL, borrowed: every placement, on the cache path and
	 * on the API path alike, reads the node's DRA GPUs and claims and the pod's claims from
	 * it (placement.h, "DRA"); a pod whose GPUs come only from DRA claims (no GPU resource)
	 * is a GPU placement when it has claims with GPU devices on the node. */
	struct dra_store *dra;
	/* Whether the DRA store may be counted (informer_dra_fresh_fn: 1 listed and watching, 0
	 * listed but a watch broken longer than the staleness bound, -1 not listed yet). There is
	 * no live path for DRA: at -1 every GPU placement is refused (500, DRANotRead: fail closed,
	 * the API server retries), at 0 those on a node with DRA GPUs or of a pod naming claims
	 * (claims allocated meanwhile could be missing). NULL: always 1. ctx is cache_ctx. */
	int (*dra_fresh)(void *ctx, double now_s);
	/* 1 while the cache's watches are open and healthy: only then does the cache decide
	 * alone. While cache_fresh but not connected (a watch broken for less than the staleness
	 * bound), a placement asks the API server first and is decided from the cache only when
	 * the API server cannot be asked. NULL: cache_fresh alone decides. */
	int (*cache_connected)(void *ctx, double now_s);
	/* When the cache last heard from the API server (ledger_now_ms() clock): reservations
	 * expire by this clock on the cache path, so a quiet watch never lets one lapse before
	 * the cache could have shown its pod. NULL: the wall clock. */
	uint64_t (*cache_progress_ms)(void *ctx);
	void *cache_ctx;
	/* Shared reservations (--reservations shared, shared.h), borrowed; NULL: reservations are
	 * the ledger's, this process's alone (--reservations local). With it every GPU placement
	 * is decided on a worker (it writes to the API server): its node's pods (cache or API
	 * path, as above) plus the node's shared record, and an admitted placement is recorded
	 * there by compare-and-swap; the ledger is not used on this path (shared_place queues
	 * this process's placements on a node behind one leader). A denial or a dry run writes
	 * nothing. */
	struct shared *shared;
	/* GPUMemoryPolicy objects (policies.h, filled by the informer), borrowed; NULL: the flags
	 * and node annotations only. Every GPU placement is decided under the policies selecting
	 * its node (policyset.h); until the store has been listed, GPU placements are refused
	 * (500, PoliciesNotRead: fail closed). A breach of a policy in audit mode is allowed with
	 * the auditAnnotations entry WEBHOOK_AUDIT_KEY and counted
	 * (gpu_memory_guard_policy_audit_violations_total). */
	struct policies *policies;
	/* Called (on the review's thread, after the decision, before the answer is sent) with the
	 * pod's uid when a Binding was admitted with its reservation recorded (outcome.h,
	 * reserved_uid; not a dry run): from then on the reservation counts the pod on its node,
	 * for the scheduler extender too (extender.h, "reservations"), so main.c ends the pod's
	 * holds on the nodes its filter passed instead of waiting for the watch
	 * cache to show it bound (extender_binding_admitted). NULL: nothing is called. */
	void (*binding_admitted)(void *ctx, const char *uid);
	void *binding_admitted_ctx;
};

struct webhook; /* opaque */

/*
 * New pipeline. cfg and src are copied; ledger (required) and metrics (may be NULL) are
 * borrowed and must outlive it. NULL on a bad config or allocation failure.
 */
struct webhook *webhook_new(const struct webhook_config *cfg, const struct placer_source *src,
                            struct ledger *ledger, struct metrics *metrics);
void webhook_free(struct webhook *w); /* NULL is a no-op; no review may be running */

/* The engine the webhook places with (placer.h), owned by w: the scheduler extender asks it
 * too (extender_config.placer), so both judge with one set of flags, views and reservations. */
struct placer;
struct placer *webhook_placer(struct webhook *w);

/*
 * Review body[0..len) (an AdmissionReview request, untrusted) in one call: webhook_prepare()
 * with arrived = now, then webhook_finish(). Returns 0 with *out (caller owns, free()) holding
 * the AdmissionReview response and *out_len its length: answer 200. Returns
 * WEBHOOK_EBADREQUEST with a reason in err when the body is not JSON or has no request.uid
 * (answer 400), WEBHOOK_ENOMEM otherwise (answer 500).
 */
int webhook_review(struct webhook *w, const char *body, size_t len, char **out, size_t *out_len,
                   char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * The same review in two steps, so that a server can answer at once what needs no API call
 * and hand only placements to threads that may wait for the API server:
 *
 *   webhook_prepare()   decode and decide whatever the request alone decides (UPDATE,
 *                       DELETE, other kinds, pod CREATE without nodeName, exempt namespaces,
 *                       mirror and non-GPU pods, malformed reviews with a uid). No I/O.
 *   webhook_needs_api() 1 when the decision still needs the API server (a GPU placement).
 *   webhook_finish()    make the API calls if needed, encode, log, count; frees the review.
 *
 * The review's API budget (webhook_config.budget_ms) runs from `arrived`, not from
 * webhook_finish(): a placement that waited for a thread past its budget is denied at once
 * (fail closed, "too busy / too slow") instead of starting API calls the API server would no
 * longer wait for.
 */
struct webhook_review_ctx; /* opaque: one review between prepare and finish */

/* CLOCK_MONOTONIC in seconds: the clock of `arrived`. Thread-safe. */
double webhook_now(void);

/*
 * Decode body[0..len) (untrusted; not referenced after the call) and decide what needs no API
 * server. arrived: when the request reached the server, webhook_now() seconds. Returns 0 with
 * *ctx (caller owns: pass it to webhook_finish() or webhook_discard()); WEBHOOK_EBADREQUEST
 * with a reason in err (answer 400) or WEBHOOK_ENOMEM (answer 500), *ctx NULL. Thread-safe.
 */
int webhook_prepare(struct webhook *w, const char *body, size_t len, double arrived,
                    struct webhook_review_ctx **ctx, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* 1 when webhook_finish(ctx) will ask the API server (and may wait up to the budget plus one
 * call timeout), 0 when it only encodes the decision already made. */
int webhook_needs_api(const struct webhook_review_ctx *ctx);

/*
 * Finish the review and free ctx (ownership passes in, whatever the result). Returns 0 with
 * *out (caller owns, free()) and *out_len: answer 200; WEBHOOK_ENOMEM with a reason in err
 * (answer 500). May run on another thread than webhook_prepare().
 */
int webhook_finish(struct webhook_review_ctx *ctx, char **out, size_t *out_len, char *err,
                   size_t errlen) __attribute__((warn_unused_result));

/*
 * Decide a prepared placement without asking the API server: denied (fail closed) because the
 * server cannot give it a thread now (why: e.g. "review queue full"). A later webhook_finish()
 * only encodes, logs and counts. No-op when ctx needs no API call. Thread-safe per ctx.
 */
void webhook_refuse_busy(struct webhook_review_ctx *ctx, const char *why);

/* Free a prepared review without answering it (not logged or counted). NULL is a no-op. */
void webhook_discard(struct webhook_review_ctx *ctx);

/* The HTTP server's route for reviews: POST /validate (SERVER_PATH_VALIDATE), bodies up to
 * ADMISSION_BODY_MAX, the steps above. w is borrowed and must outlive the server. */
struct server_route webhook_route(struct webhook *w);

#endif
