/*
 * metrics: lock-free counters and histograms, rendered on demand. See metrics.h.
 */
#include "metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_KINDS         3
#define N_DECISIONS     4
#define N_VERBS         7 /* get, list, watch, create, update, patch, other */
#define N_RESOURCES     5 /* pods, nodes, leases, gpumemorypolicies, other */
#define N_HTTP          8 /* 200 400 403 404 405 413 500 other */
#define CODE_FREE       (-1)
#define N_EXT_VERBS     2
#define N_EXT_RESULTS   3
#define N_AUDIT_REASONS 5
#define N_MODE_REASONS  22 /* METRICS_MODE_REASONS */
#define N_HOLD_REFUSALS 5
#define N_ROUTES        2

static const char *const kind_names[N_KINDS] = {"pod", "binding", "other"};
static const char *const decision_names[N_DECISIONS] = {"allowed", "warned", "denied", "error"};
static const char *const verb_names[N_VERBS] = {"get",    "list",  "watch", "create",
                                                "update", "patch", "other"};
static const char *const resource_names[N_RESOURCES] = {"pods", "nodes", "leases",
                                                        "gpumemorypolicies", "other"};
static const char *const ext_verb_names[N_EXT_VERBS] = {"filter", "prioritize"};
static const char *const ext_result_names[N_EXT_RESULTS] = {"judged", "passthrough", "error"};
static const char *const hold_refusal_names[N_HOLD_REFUSALS] = {
    "not_cached", "other_uid", "not_pending", "no_demand", "body_mismatch"};
static const char *const route_names[N_ROUTES] = {"admission", "extender"};
static const unsigned http_codes[N_HTTP - 1] = {200, 400, 403, 404, 405, 413, 500};

/* Upper bounds in seconds. Reviews are sub-millisecond without I/O and bounded by the API
 * timeout (default 2s) with it; the buckets cover both ends. */
static const double review_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                        0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define N_BUCKETS (sizeof(review_buckets) / sizeof(review_buckets[0]))
/* A review's own time (no waiting) is meant to stay well under a millisecond: finer buckets,
 * as many, so that both histograms share one layout. */
static const double self_buckets[] = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                      0.0025,  0.005,    0.01,    0.025,  0.05,    0.1,    1};
_Static_assert(sizeof(self_buckets) == sizeof(review_buckets), "one histogram layout");

/* Histogram: cumulative counts are computed at render time from per-bucket counts; the sum is
 * kept in nanoseconds so that it is an integer atomic. */
struct histogram {
	const double *bounds;                        /* N_BUCKETS upper bounds, seconds */
	atomic_uint_fast64_t buckets[N_BUCKETS + 1]; /* last: +Inf */
	atomic_uint_fast64_t count;
	atomic_uint_fast64_t sum_ns;
};

struct api_series {
	atomic_long codes[METRICS_MAX_CODES]; /* CODE_FREE until claimed */
	atomic_uint_fast64_t counts[METRICS_MAX_CODES];
	atomic_uint_fast64_t other;
	struct histogram latency;
};

struct metrics {
	atomic_uint_fast64_t reviews[N_KINDS][N_DECISIONS];
	struct histogram review_latency;
	struct histogram review_self;
	atomic_uint_fast64_t http[N_HTTP];
	atomic_uint_fast64_t http_connections[2]; /* enum metrics_listener */
	struct api_series api[N_VERBS][N_RESOURCES];
	atomic_int_fast64_t cert_expiry;
	atomic_uint_fast64_t reloads[2];
	atomic_int ready;
	atomic_uint_fast64_t ext_requests[N_EXT_VERBS][N_EXT_RESULTS];
	atomic_uint_fast64_t ext_filtered_out;
	atomic_uint_fast64_t audit[N_AUDIT_REASONS];
	atomic_uint_fast64_t mode_admitted[2][N_MODE_REASONS]; /* enum metrics_mode */
	atomic_uint_fast64_t holds_refused[N_HOLD_REFUSALS];
	atomic_uint_fast64_t client_auth_failures[N_ROUTES];
	struct histogram ext_latency[N_EXT_VERBS]; /* no I/O: the fine buckets */
	metrics_gauge_fn ledger_fn;
	void *ledger_ctx;
	metrics_gauge_fn unseen_fn; /* the ledger's unseen drops */
	void *unseen_ctx;
	atomic_uint_fast64_t unseen_dropped;   /* the shared records' (metrics_unseen_dropped) */
	atomic_uint_fast64_t ledger_conflicts; /* metrics_ledger_conflict */
	metrics_collector_fn collectors[METRICS_MAX_COLLECTORS];
	void *collector_ctx[METRICS_MAX_COLLECTORS];
	size_t n_collectors;
};

struct metrics *metrics_new(void)
{
	struct metrics *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	/* calloc zeroes every atomic, which is a valid initial state for lock-free integer
	 * atomics on this platform; only the code slots need a non-zero start. */
	m->review_latency.bounds = review_buckets;
	m->review_self.bounds = self_buckets;
	for (int v = 0; v < N_EXT_VERBS; v++)
		m->ext_latency[v].bounds = self_buckets;
	for (int v = 0; v < N_VERBS; v++)
		for (int r = 0; r < N_RESOURCES; r++) {
			m->api[v][r].latency.bounds = review_buckets;
			for (int c = 0; c < METRICS_MAX_CODES; c++)
				atomic_init(&m->api[v][r].codes[c], CODE_FREE);
		}
	return m;
}

void metrics_free(struct metrics *m)
{
	free(m);
}

void metrics_set_unseen_counter(struct metrics *m, metrics_gauge_fn fn, void *ctx)
{
	if (m == NULL)
		return;
	m->unseen_fn = fn;
	m->unseen_ctx = ctx;
}

void metrics_unseen_dropped(struct metrics *m, size_t n)
{
	if (m != NULL && n > 0)
		atomic_fetch_add_explicit(&m->unseen_dropped, n, memory_order_relaxed);
}

void metrics_ledger_conflict(struct metrics *m)
{
	if (m != NULL)
		atomic_fetch_add_explicit(&m->ledger_conflicts, 1, memory_order_relaxed);
}

void metrics_set_ledger_gauge(struct metrics *m, metrics_gauge_fn fn, void *ctx)
{
	if (m == NULL)
		return;
	m->ledger_fn = fn;
	m->ledger_ctx = ctx;
}

static void histogram_observe(struct histogram *h, double seconds)
{
	size_t i = 0;
	if (!(seconds >= 0)) /* NaN or negative: a clock oddity, count as 0 */
		seconds = 0;
	while (i < N_BUCKETS && seconds > h->bounds[i])
		i++;
	atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
	double ns = seconds * 1e9;
	atomic_fetch_add_explicit(&h->sum_ns, ns > 1e18 ? (uint64_t)1e18 : (uint64_t)ns,
	                          memory_order_relaxed);
}

void metrics_review(struct metrics *m, enum metrics_kind kind, enum metrics_decision decision,
                    double seconds, double self_seconds)
{
	if (m == NULL || (unsigned)kind >= N_KINDS || (unsigned)decision >= N_DECISIONS)
		return;
	atomic_fetch_add_explicit(&m->reviews[kind][decision], 1, memory_order_relaxed);
	histogram_observe(&m->review_latency, seconds);
	histogram_observe(&m->review_self, self_seconds);
}

void metrics_extender(struct metrics *m, enum metrics_extender_verb verb,
                      enum metrics_extender_result result, size_t nodes_out, double seconds)
{
	if (m == NULL || (unsigned)verb >= N_EXT_VERBS || (unsigned)result >= N_EXT_RESULTS)
		return;
	atomic_fetch_add_explicit(&m->ext_requests[verb][result], 1, memory_order_relaxed);
	if (nodes_out > 0)
		atomic_fetch_add_explicit(&m->ext_filtered_out, nodes_out, memory_order_relaxed);
	histogram_observe(&m->ext_latency[verb], seconds);
}

void metrics_hold_refused(struct metrics *m, enum metrics_hold_refusal reason)
{
	if (m == NULL || (unsigned)reason >= N_HOLD_REFUSALS)
		return;
	atomic_fetch_add_explicit(&m->holds_refused[reason], 1, memory_order_relaxed);
}

void metrics_client_auth_failure(struct metrics *m, enum metrics_route route)
{
	if (m == NULL || (unsigned)route >= N_ROUTES)
		return;
	atomic_fetch_add_explicit(&m->client_auth_failures[route], 1, memory_order_relaxed);
}

static const char *const audit_reason_names[N_AUDIT_REASONS] = {
    "OverThreshold", "NeverFits", "TierOverShare", "TierYield", "other"};

void metrics_policy_audit(struct metrics *m, const char *reason)
{
	size_t i = 0;

	if (m == NULL)
		return;
	while (i < N_AUDIT_REASONS - 1 &&
	       (reason == NULL || strcmp(reason, audit_reason_names[i]) != 0))
		i++;
	atomic_fetch_add_explicit(&m->audit[i], 1, memory_order_relaxed);
}

static const char *const mode_reason_names[N_MODE_REASONS] = {METRICS_MODE_REASONS};
_Static_assert(sizeof(mode_reason_names) / sizeof(mode_reason_names[0]) == N_MODE_REASONS,
               "N_MODE_REASONS");

void metrics_mode_admitted(struct metrics *m, enum metrics_mode mode, const char *reason)
{
	size_t i = 0;

	if (m == NULL || (unsigned)mode > METRICS_MODE_AUDIT)
		return;
	while (i < N_MODE_REASONS - 1 &&
	       (reason == NULL || strcmp(reason, mode_reason_names[i]) != 0))
		i++;
	atomic_fetch_add_explicit(&m->mode_admitted[mode][i], 1, memory_order_relaxed);
}

void metrics_http(struct metrics *m, unsigned code)
{
	size_t i = 0;
	if (m == NULL)
		return;
	while (i < N_HTTP - 1 && http_codes[i] != code)
		i++;
	atomic_fetch_add_explicit(&m->http[i], 1, memory_order_relaxed);
}

void metrics_http_connection(struct metrics *m, enum metrics_listener listener)
{
	if (m == NULL || (unsigned)listener > METRICS_LISTENER_SCHEDULER)
		return;
	atomic_fetch_add_explicit(&m->http_connections[listener], 1, memory_order_relaxed);
}

static size_t name_index(const char *s, const char *const *names, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (s != NULL && strcmp(s, names[i]) == 0)
			return i;
	return n - 1; /* "other" */
}

/*
 * Find or claim the slot for code: scan claimed slots, then CAS a free one. Two threads
 * claiming the same new code at once may take two slots; render merges equal codes.
 */
void metrics_api_call(void *ctx, const char *verb, const char *resource, long code, double seconds)
{
	struct metrics *m = ctx;
	if (m == NULL)
		return;
	struct api_series *s = &m->api[name_index(verb, verb_names, N_VERBS)]
	                              [name_index(resource, resource_names, N_RESOURCES)];
	histogram_observe(&s->latency, seconds);
	for (int i = 0; i < METRICS_MAX_CODES; i++) {
		long cur = atomic_load_explicit(&s->codes[i], memory_order_acquire);
		if (cur == CODE_FREE) {
			long expected = CODE_FREE;
			if (!atomic_compare_exchange_strong(&s->codes[i], &expected, code) &&
			    expected != code)
				continue;
			cur = code;
		}
		if (cur == code) {
			atomic_fetch_add_explicit(&s->counts[i], 1, memory_order_relaxed);
			return;
		}
	}
	atomic_fetch_add_explicit(&s->other, 1, memory_order_relaxed);
}

void metrics_set_cert_expiry(struct metrics *m, int64_t not_after)
{
	if (m != NULL)
		atomic_store_explicit(&m->cert_expiry, not_after, memory_order_relaxed);
}

void metrics_cert_reload(struct metrics *m, enum metrics_reload result)
{
	if (m != NULL && (unsigned)result < 2)
		atomic_fetch_add_explicit(&m->reloads[result], 1, memory_order_relaxed);
}

void metrics_set_ready(struct metrics *m, int ready)
{
	if (m != NULL)
		atomic_store_explicit(&m->ready, ready ? 1 : 0, memory_order_relaxed);
}

/* Output buffer with a hard cap: exceeding it is an error, never a silent truncation. */
struct metrics_writer {
	char *p;
	size_t len, cap;
	int failed;
};

static void __attribute__((format(printf, 2, 3)))
bprintf(struct metrics_writer *b, const char *fmt, ...)
{
	va_list ap;
	if (b->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t need = b->len + (size_t)n + 1, ncap = b->cap * 2;
		if (need > METRICS_TEXT_MAX) {
			b->failed = 1;
			return;
		}
		if (ncap < need)
			ncap = need;
		if (ncap > METRICS_TEXT_MAX)
			ncap = METRICS_TEXT_MAX;
		char *np = realloc(b->p, ncap);
		if (np == NULL) {
			b->failed = 1;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
}

static uint64_t load(atomic_uint_fast64_t *a)
{
	return atomic_load_explicit(a, memory_order_relaxed);
}

/* One histogram's series; labels is "" or `verb="get",resource="pods"` style. */
static void render_histogram(struct metrics_writer *b, const char *name, const char *labels,
                             struct histogram *h)
{
	uint64_t cum = 0;
	const char *sep = labels[0] ? "," : "";
	for (size_t i = 0; i < N_BUCKETS; i++) {
		cum += load(&h->buckets[i]);
		bprintf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, h->bounds[i],
		        (unsigned long long)cum);
	}
	cum += load(&h->buckets[N_BUCKETS]);
	bprintf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)cum);
	if (labels[0]) {
		bprintf(b, "%s_sum{%s} %.9f\n", name, labels, (double)load(&h->sum_ns) / 1e9);
		bprintf(b, "%s_count{%s} %llu\n", name, labels, (unsigned long long)cum);
	} else {
		bprintf(b, "%s_sum %.9f\n", name, (double)load(&h->sum_ns) / 1e9);
		bprintf(b, "%s_count %llu\n", name, (unsigned long long)cum);
	}
}

static void render_reviews(struct metrics_writer *b, struct metrics *m)
{
	bprintf(b, "# HELP gpu_memory_guard_reviews_total AdmissionReviews answered, by kind "
	           "and decision.\n# TYPE gpu_memory_guard_reviews_total counter\n");
	for (int k = 0; k < N_KINDS; k++)
		for (int d = 0; d < N_DECISIONS; d++)
			bprintf(
			    b, "gpu_memory_guard_reviews_total{kind=\"%s\",decision=\"%s\"} %llu\n",
			    kind_names[k], decision_names[d],
			    (unsigned long long)load(&m->reviews[k][d]));
	bprintf(b, "# HELP gpu_memory_guard_review_duration_seconds Time to answer one "
	           "AdmissionReview.\n# TYPE gpu_memory_guard_review_duration_seconds histogram\n");
	render_histogram(b, "gpu_memory_guard_review_duration_seconds", "", &m->review_latency);
	bprintf(b, "# HELP gpu_memory_guard_review_self_duration_seconds Time the webhook itself "
	           "spent on one AdmissionReview: decode to encode, without waiting for a worker, "
	           "the API server or the node lock.\n"
	           "# TYPE gpu_memory_guard_review_self_duration_seconds histogram\n");
	render_histogram(b, "gpu_memory_guard_review_self_duration_seconds", "", &m->review_self);
	bprintf(b, "# HELP gpu_memory_guard_http_requests_total HTTP answers of the admission "
	           "listener, by status code.\n# TYPE gpu_memory_guard_http_requests_total "
	           "counter\n");
	for (int i = 0; i < N_HTTP; i++) {
		char code[16];
		if (i < N_HTTP - 1)
			snprintf(code, sizeof(code), "%u", http_codes[i]);
		else
			snprintf(code, sizeof(code), "other");
		bprintf(b, "gpu_memory_guard_http_requests_total{code=\"%s\"} %llu\n", code,
		        (unsigned long long)load(&m->http[i]));
	}
	bprintf(b,
	        "# HELP gpu_memory_guard_http_connections_total TCP connections accepted, by "
	        "listener (admission: each one a TLS handshake).\n"
	        "# TYPE gpu_memory_guard_http_connections_total counter\n"
	        "gpu_memory_guard_http_connections_total{listener=\"admission\"} %llu\n"
	        "gpu_memory_guard_http_connections_total{listener=\"scheduler\"} %llu\n",
	        (unsigned long long)load(&m->http_connections[METRICS_LISTENER_ADMISSION]),
	        (unsigned long long)load(&m->http_connections[METRICS_LISTENER_SCHEDULER]));
}

static void render_api_counts(struct metrics_writer *b, struct api_series *s, const char *labels)
{
	for (int i = 0; i < METRICS_MAX_CODES; i++) {
		long code = atomic_load_explicit(&s->codes[i], memory_order_acquire);
		if (code == CODE_FREE)
			continue;
		uint64_t n = load(&s->counts[i]);
		int dup = 0;
		for (int j = 0; j < i; j++)
			if (atomic_load_explicit(&s->codes[j], memory_order_acquire) == code)
				dup = 1;
		if (dup)
			continue;
		for (int j = i + 1; j < METRICS_MAX_CODES; j++)
			if (atomic_load_explicit(&s->codes[j], memory_order_acquire) == code)
				n += load(&s->counts[j]);
		bprintf(b, "gpu_memory_guard_api_requests_total{%s,code=\"%ld\"} %llu\n", labels,
		        code, (unsigned long long)n);
	}
	if (load(&s->other) > 0)
		bprintf(b, "gpu_memory_guard_api_requests_total{%s,code=\"other\"} %llu\n", labels,
		        (unsigned long long)load(&s->other));
}

static void render_api(struct metrics_writer *b, struct metrics *m)
{
	char labels[64];
	bprintf(b, "# HELP gpu_memory_guard_api_requests_total Kubernetes API calls, by verb, "
	           "resource and HTTP status (0: no answer).\n"
	           "# TYPE gpu_memory_guard_api_requests_total counter\n");
	for (int v = 0; v < N_VERBS; v++)
		for (int r = 0; r < N_RESOURCES; r++) {
			snprintf(labels, sizeof(labels), "verb=\"%s\",resource=\"%s\"",
			         verb_names[v], resource_names[r]);
			render_api_counts(b, &m->api[v][r], labels);
		}
	bprintf(b, "# HELP gpu_memory_guard_api_request_duration_seconds Kubernetes API call "
	           "latency.\n# TYPE gpu_memory_guard_api_request_duration_seconds histogram\n");
	for (int v = 0; v < N_VERBS; v++)
		for (int r = 0; r < N_RESOURCES; r++) {
			/* Series that never saw a call are left out, except the two we make. */
			struct histogram *h = &m->api[v][r].latency;
			if (load(&h->count) == 0 && !((v == 0 && r <= 1) || (v == 1 && r == 0)))
				continue;
			snprintf(labels, sizeof(labels), "verb=\"%s\",resource=\"%s\"",
			         verb_names[v], resource_names[r]);
			render_histogram(b, "gpu_memory_guard_api_request_duration_seconds", labels,
			                 h);
		}
}

static void render_extender(struct metrics_writer *b, struct metrics *m)
{
	char labels[32];
	bprintf(b, "# HELP gpu_memory_guard_extender_requests_total Scheduler extender calls, by "
	           "verb and result.\n# TYPE gpu_memory_guard_extender_requests_total counter\n");
	for (int v = 0; v < N_EXT_VERBS; v++)
		for (int r = 0; r < N_EXT_RESULTS; r++)
			bprintf(
			    b,
			    "gpu_memory_guard_extender_requests_total{verb=\"%s\",result=\"%s\"} "
			    "%llu\n",
			    ext_verb_names[v], ext_result_names[r],
			    (unsigned long long)load(&m->ext_requests[v][r]));
	bprintf(b,
	        "# HELP gpu_memory_guard_extender_nodes_filtered_out_total Nodes the extender's "
	        "filter refused (FailedNodes and FailedAndUnresolvableNodes).\n"
	        "# TYPE gpu_memory_guard_extender_nodes_filtered_out_total counter\n"
	        "gpu_memory_guard_extender_nodes_filtered_out_total %llu\n",
	        (unsigned long long)load(&m->ext_filtered_out));
	bprintf(b, "# HELP gpu_memory_guard_extender_holds_refused_total Filter calls whose pod "
	           "holds nothing: the watch cache does not show it pending with that uid, by "
	           "reason.\n# TYPE gpu_memory_guard_extender_holds_refused_total counter\n");
	for (int r = 0; r < N_HOLD_REFUSALS; r++)
		bprintf(b, "gpu_memory_guard_extender_holds_refused_total{reason=\"%s\"} %llu\n",
		        hold_refusal_names[r], (unsigned long long)load(&m->holds_refused[r]));
	bprintf(b, "# HELP gpu_memory_guard_client_auth_failures_total Requests refused (403) for "
	           "want of an acceptable client certificate, by route.\n"
	           "# TYPE gpu_memory_guard_client_auth_failures_total counter\n");
	for (int r = 0; r < N_ROUTES; r++)
		bprintf(b, "gpu_memory_guard_client_auth_failures_total{route=\"%s\"} %llu\n",
		        route_names[r], (unsigned long long)load(&m->client_auth_failures[r]));
	bprintf(b, "# HELP gpu_memory_guard_policy_audit_violations_total Placements allowed that "
	           "a GPUMemoryPolicy in audit mode would refuse, by reason.\n"
	           "# TYPE gpu_memory_guard_policy_audit_violations_total counter\n");
	for (int r = 0; r < N_AUDIT_REASONS; r++)
		bprintf(b, "gpu_memory_guard_policy_audit_violations_total{reason=\"%s\"} %llu\n",
		        audit_reason_names[r], (unsigned long long)load(&m->audit[r]));
	bprintf(b, "# HELP gpu_memory_guard_mode_admitted_total Reviews admitted only because "
	           "--mode is warn or audit: enforce would have refused them, by reason.\n"
	           "# TYPE gpu_memory_guard_mode_admitted_total counter\n");
	for (int md = 0; md < 2; md++)
		for (int r = 0; r < N_MODE_REASONS; r++)
			bprintf(b,
			        "gpu_memory_guard_mode_admitted_total{mode=\"%s\",reason=\"%s\"} "
			        "%llu\n",
			        md == METRICS_MODE_AUDIT ? "audit" : "warn", mode_reason_names[r],
			        (unsigned long long)load(&m->mode_admitted[md][r]));
	bprintf(b, "# HELP gpu_memory_guard_extender_request_seconds Time to answer one scheduler "
	           "extender call, from its arrival.\n"
	           "# TYPE gpu_memory_guard_extender_request_seconds histogram\n");
	for (int v = 0; v < N_EXT_VERBS; v++) {
		snprintf(labels, sizeof(labels), "verb=\"%s\"", ext_verb_names[v]);
		render_histogram(b, "gpu_memory_guard_extender_request_seconds", labels,
		                 &m->ext_latency[v]);
	}
}

static void render_gauges(struct metrics_writer *b, struct metrics *m)
{
	size_t ledger = m->ledger_fn ? m->ledger_fn(m->ledger_ctx) : 0;
	bprintf(b,
	        "# HELP gpu_memory_guard_ledger_reservations Admitted placements not yet "
	        "shown by the API server.\n# TYPE gpu_memory_guard_ledger_reservations gauge\n"
	        "gpu_memory_guard_ledger_reservations %zu\n",
	        ledger);
	bprintf(b,
	        "# HELP gpu_memory_guard_ledger_conflicts_total Placements decided again because "
	        "the node's local reservations changed while it was let go.\n"
	        "# TYPE gpu_memory_guard_ledger_conflicts_total counter\n"
	        "gpu_memory_guard_ledger_conflicts_total %llu\n",
	        (unsigned long long)load(&m->ledger_conflicts));
	bprintf(b,
	        "# HELP gpu_memory_guard_reservations_unseen_dropped_total Reservations of pod "
	        "CREATEs dropped at --unseen-reservation-ttl, their pod never seen.\n"
	        "# TYPE gpu_memory_guard_reservations_unseen_dropped_total counter\n"
	        "gpu_memory_guard_reservations_unseen_dropped_total %llu\n",
	        (unsigned long long)((m->unseen_fn ? m->unseen_fn(m->unseen_ctx) : 0) +
	                             load(&m->unseen_dropped)));
	bprintf(b,
	        "# HELP gpu_memory_guard_certificate_expiry_timestamp_seconds NotAfter of the "
	        "serving certificate, Unix time.\n"
	        "# TYPE gpu_memory_guard_certificate_expiry_timestamp_seconds gauge\n"
	        "gpu_memory_guard_certificate_expiry_timestamp_seconds %lld\n",
	        (long long)atomic_load_explicit(&m->cert_expiry, memory_order_relaxed));
	bprintf(b,
	        "# HELP gpu_memory_guard_certificate_reloads_total Serving certificate reloads, by "
	        "result.\n# TYPE gpu_memory_guard_certificate_reloads_total counter\n"
	        "gpu_memory_guard_certificate_reloads_total{result=\"success\"} %llu\n"
	        "gpu_memory_guard_certificate_reloads_total{result=\"failure\"} %llu\n",
	        (unsigned long long)load(&m->reloads[0]), (unsigned long long)load(&m->reloads[1]));
	bprintf(b,
	        "# HELP gpu_memory_guard_ready 1 when the webhook is ready to serve.\n"
	        "# TYPE gpu_memory_guard_ready gauge\ngpu_memory_guard_ready %d\n",
	        atomic_load_explicit(&m->ready, memory_order_relaxed));
	bprintf(b,
	        "# HELP gpu_memory_guard_build_info Build version.\n"
	        "# TYPE gpu_memory_guard_build_info gauge\n"
	        "gpu_memory_guard_build_info{version=\"%s\"} 1\n",
#ifdef GMG_VERSION
	        GMG_VERSION
#else
	        "unknown"
#endif
	);
}

void metrics_printf(struct metrics_writer *w, const char *fmt, ...)
{
	va_list ap;
	char small[512];

	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		w->failed = 1;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		bprintf(w, "%s", small);
		return;
	}
	char *big = malloc((size_t)n + 1);
	if (big == NULL) {
		w->failed = 1;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	bprintf(w, "%s", big);
	free(big);
}

int metrics_add_collector(struct metrics *m, metrics_collector_fn fn, void *ctx)
{
	if (m == NULL || fn == NULL || m->n_collectors == METRICS_MAX_COLLECTORS)
		return -1;
	m->collectors[m->n_collectors] = fn;
	m->collector_ctx[m->n_collectors] = ctx;
	m->n_collectors++;
	return 0;
}

int metrics_render(struct metrics *m, char **text, size_t *len)
{
	struct metrics_writer b = {.p = malloc(16384), .len = 0, .cap = 16384, .failed = 0};
	if (b.p == NULL)
		return -1;
	b.p[0] = '\0';
	render_reviews(&b, m);
	render_api(&b, m);
	render_extender(&b, m);
	render_gauges(&b, m);
	for (size_t i = 0; i < m->n_collectors; i++)
		m->collectors[i](m->collector_ctx[i], &b);
	if (b.failed) {
		free(b.p);
		return -1;
	}
	*text = b.p;
	*len = b.len;
	return 0;
}
