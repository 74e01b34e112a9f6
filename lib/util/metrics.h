/*
 * metrics: Prometheus counters, gauges and histograms for the webhook, rendered in the text
 * exposition format (version 0.0.4). Names carry the prefix gpu_memory_guard_ and base units
 * (seconds, bytes).
 *
 *   gpu_memory_guard_reviews_total{kind,decision}             counter
 *       kind: pod | binding | other; decision: allowed | warned | denied | error
 *       (warned = allowed with a warning; error = denied because the API server could not be
 *       asked or an internal limit was hit: fail closed)
 *   gpu_memory_guard_review_duration_seconds                  histogram, arrival to answer
 *   gpu_memory_guard_review_self_duration_seconds             histogram, the review's own time:
 *       working on it, without waiting for a worker, the API server or the node lock
 *   gpu_memory_guard_http_requests_total{code}                counter (admission listener)
 *   gpu_memory_guard_http_connections_total{listener}         counter, TCP connections
 *       accepted (each a TLS handshake on the admission listener); listener: admission |
 *       scheduler (the plain --scheduler-listen one). Requests per connection =
 *       http_requests_total / this: how well the clients keep connections alive
 *   gpu_memory_guard_api_requests_total{verb,resource,code}   counter (code 0: no answer)
 *   gpu_memory_guard_api_request_duration_seconds{verb,resource}  histogram
 *   gpu_memory_guard_ledger_reservations                      gauge (read at scrape time)
 *   gpu_memory_guard_ledger_conflicts_total                   counter, cache-path placements
 *       decided again: the node's local reservations changed while it was let go (placer.c's
 *       optimistic attempts, the last of which holds the node)
 *   gpu_memory_guard_reservations_unseen_dropped_total        counter, reservations of pod
 *       CREATEs dropped at --unseen-reservation-ttl with their pod never seen (the local
 *       ledger's, read at scrape time, plus the shared records' entries this replica dropped)
 *   gpu_memory_guard_certificate_expiry_timestamp_seconds     gauge (NotAfter, Unix time)
 *   gpu_memory_guard_certificate_reloads_total{result}        counter, result: success | failure
 *   gpu_memory_guard_ready                                    gauge, 1 when /readyz passes
 *   gpu_memory_guard_build_info{version}                      gauge, always 1
 *   gpu_memory_guard_extender_requests_total{verb,result}     counter, scheduler extender
 *       calls; verb: filter | prioritize; result: judged (a GPU pod, its nodes judged) |
 *       passthrough (not a GPU pod, a mirror pod or an exempt namespace: every node passed,
 *       no score) | error (answered with an Error, or 400)
 *   gpu_memory_guard_extender_nodes_filtered_out_total        counter, nodes a filter call put
 *       in FailedNodes or FailedAndUnresolvableNodes
 *   gpu_memory_guard_extender_request_seconds{verb}           histogram, arrival to answer
 *   gpu_memory_guard_extender_holds_refused_total{reason}     counter, filter calls that passed
 *       nodes but hold nothing because the watch cache cannot vouch for the pod (extender.h):
 *       reason: not_cached (no pod of that name) | other_uid (another uid) | not_pending
 *       (bound or finished) | no_demand (the cached pod declares no valid GPU memory) |
 *       body_mismatch (an inferred share the body states otherwise)
 *   gpu_memory_guard_client_auth_failures_total{route}        counter, requests answered 403
 *       because the route requires a client certificate (--client-auth-routes) and the
 *       connection presented none acceptable; route: admission | extender
 *   gpu_memory_guard_policy_audit_violations_total{reason}    counter, placements allowed that
 *       a GPUMemoryPolicy in audit mode would refuse; reason: OverThreshold | NeverFits |
 *       TierOverShare | TierYield | other (one per policy breached)
 *   gpu_memory_guard_mode_admitted_total{mode,reason}         counter, reviews admitted only
 *       because --mode is warn or audit: enforce would have refused them; mode: warn | audit;
 *       reason: the refusal's (METRICS_MODE_REASONS below, anything else: other)
 *
 *   gpu_memory_guard_api_requests_total{verb="watch",...} counts a watch when it ends.
 * Collectors (metrics_add_collector) add the watch cache's series: see informer.h.
 * Recording is lock-free (C11 atomics, relaxed ordering: a scrape may see one series a few
 * increments ahead of another, which Prometheus tolerates). Every recording function and
 * metrics_render() are thread-safe. Recording never allocates; the set of label values is fixed
 * (API status codes: the first METRICS_MAX_CODES distinct codes per verb/resource get their own
 * series, later ones are counted under code "other").
 */
#ifndef GMG_METRICS_H
#define GMG_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_TEXT_MAX                                                                           \
	(16u * 1024u * 1024u) /* bytes of one rendering (per-node gauges of a                      \
	                         large cluster); more is an error */
#define METRICS_MAX_COLLECTORS 6
#define METRICS_MAX_CODES      16 /* distinct API status codes per verb/resource */

enum metrics_kind { METRICS_KIND_POD = 0, METRICS_KIND_BINDING, METRICS_KIND_OTHER };
enum metrics_decision {
	METRICS_ALLOWED = 0,
	METRICS_WARNED,
	METRICS_DENIED,
	METRICS_ERROR,
};
enum metrics_extender_verb { METRICS_EXT_FILTER = 0, METRICS_EXT_PRIORITIZE };
enum metrics_extender_result {
	METRICS_EXT_JUDGED = 0,
	METRICS_EXT_PASSTHROUGH,
	METRICS_EXT_ERROR,
};
enum metrics_hold_refusal {
	METRICS_HOLD_NOT_CACHED = 0,
	METRICS_HOLD_OTHER_UID,
	METRICS_HOLD_NOT_PENDING,
	METRICS_HOLD_NO_DEMAND,
	METRICS_HOLD_BODY_MISMATCH, /* an inferred share the body states otherwise than the cache */
};
enum metrics_route { METRICS_ROUTE_ADMISSION = 0, METRICS_ROUTE_EXTENDER };
enum metrics_reload { METRICS_RELOAD_SUCCESS = 0, METRICS_RELOAD_FAILURE };

struct metrics; /* opaque */

/* Gauge read at render time (e.g. ledger_size); ctx is borrowed. */
typedef size_t (*metrics_gauge_fn)(void *ctx);

/* New registry with every series at zero. NULL on allocation failure. */
struct metrics *metrics_new(void);
/* NULL is a no-op; no thread may still record. */
void metrics_free(struct metrics *m);

/* Source of gpu_memory_guard_ledger_reservations. Call before threads start. */
void metrics_set_ledger_gauge(struct metrics *m, metrics_gauge_fn fn, void *ctx);

/* Source of the local ledger's part of reservations_unseen_dropped_total (a counter read at
 * render time, e.g. ledger_unseen_dropped); call before threads start. */
void metrics_set_unseen_counter(struct metrics *m, metrics_gauge_fn fn, void *ctx);
/* n shared-record entries dropped as unseen (placer.c). m may be NULL. */
void metrics_unseen_dropped(struct metrics *m, size_t n);
/* One gpu_memory_guard_ledger_conflicts_total more (m may be NULL). */
void metrics_ledger_conflict(struct metrics *m);

/* One review answered. seconds: from the request's arrival to the answer; self_seconds: the
 * part spent working on it (seconds minus the waits for a worker thread, API calls and the
 * node lock). m may be NULL (no-op). */
void metrics_review(struct metrics *m, enum metrics_kind kind, enum metrics_decision decision,
                    double seconds, double self_seconds);

/* One scheduler extender call answered: nodes_out nodes filtered out (filter only), seconds
 * from arrival to answer. m may be NULL. */
void metrics_extender(struct metrics *m, enum metrics_extender_verb verb,
                      enum metrics_extender_result result, size_t nodes_out, double seconds);

/* One filter call whose pod holds nothing: the cache could not vouch for it. m may be NULL. */
void metrics_hold_refused(struct metrics *m, enum metrics_hold_refusal reason);

/* One request refused for want of an acceptable client certificate. m may be NULL. */
void metrics_client_auth_failure(struct metrics *m, enum metrics_route route);

/* One breach of a GPUMemoryPolicy in audit mode (policyset.h), by reason. m may be NULL. */
void metrics_policy_audit(struct metrics *m, const char *reason);

/* The refusal reasons gpu_memory_guard_mode_admitted_total names (its last value: other). */
#define METRICS_MODE_REASONS                                                                       \
	"OverThreshold", "NeverFits", "TierOverShare", "TierYield", "InvalidDeclaration",          \
	    "UnknownCapacity", "InvalidCapacity", "NotFound", "APIServerUnavailable",              \
	    "ReservationRecordUnreadable", "PoliciesNotRead", "DRANotRead", "LedgerFull",          \
	    "NodeBusy", "NameTooLong", "WebhookBusy", "InternalError", "InvalidReview",            \
	    "NoFreeCard", "UndeclaredOnSharedCard", "UndeclaredRefused", "other"
enum metrics_mode { METRICS_MODE_WARN = 0, METRICS_MODE_AUDIT };

/* One review admitted that enforce would refuse with reason (--mode warn or audit). m may be
 * NULL. */
void metrics_mode_admitted(struct metrics *m, enum metrics_mode mode, const char *reason);

/* One HTTP answer on the admission or scheduler listener, by status code. m may be NULL. */
void metrics_http(struct metrics *m, unsigned code);

enum metrics_listener { METRICS_LISTENER_ADMISSION = 0, METRICS_LISTENER_SCHEDULER };

/* One connection accepted on listener. m may be NULL. */
void metrics_http_connection(struct metrics *m, enum metrics_listener listener);

/* One API server call; verb "get"/"list"/"watch"/"create"/"update", resource
 * "pods"/"nodes"/"leases" (others are counted as "other"), code the HTTP status or 0 when no answer
 * came. m may be NULL. Its signature fits kube_observer (kube.h) with m as ctx. */
void metrics_api_call(void *m, const char *verb, const char *resource, long code, double seconds);

/* The serving certificate's NotAfter, Unix seconds. */
void metrics_set_cert_expiry(struct metrics *m, int64_t not_after);
void metrics_cert_reload(struct metrics *m, enum metrics_reload result);
void metrics_set_ready(struct metrics *m, int ready);

/* Series another module renders at scrape time (the watch cache's state and its per-node
 * gauges): fn appends exposition text with metrics_printf(). At most METRICS_MAX_COLLECTORS;
 * call before threads start. 0, or -1 when full. fn runs on the scraping thread. */
struct metrics_writer;
typedef void (*metrics_collector_fn)(void *ctx, struct metrics_writer *w);
int metrics_add_collector(struct metrics *m, metrics_collector_fn fn, void *ctx);
/* Append formatted text to a rendering; past METRICS_TEXT_MAX the rendering fails. */
void metrics_printf(struct metrics_writer *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Render every series. Returns 0 with *text (caller owns, free()) and *len, or -1 on
 * allocation failure or when the text would pass METRICS_TEXT_MAX.
 */
int metrics_render(struct metrics *m, char **text, size_t *len) __attribute__((warn_unused_result));

#endif
