/*
 * The kube-scheduler extender through the real binary (--cache watch, --scheduler-listen)
 * against the API server TEST DOUBLE: POST /scheduler/filter and /scheduler/prioritize over
 * HTTPS (the admission listener) and over the plain-HTTP scheduler listener, answered from the
 * watch cache with no API call; a placement the webhook admitted (a reservation in its ledger)
 * counts in the next filter; bad bodies; /validate is not on the plain listener; the metrics.
 *
 * Nodes are 81559 MiB per GPU, 1 GPU, threshold 0.9: a limit of 71.68Gi.
 *   ext-full  70Gi used: 1.7Gi free
 *   ext-room  nothing (a webhook placement of 65Gi is added by one test)
 *   ext-hold  nothing: the forged filter calls' test
 *   ext-unseen  nothing: a forged pod CREATE review's reservation (--unseen-reservation-ttl 2s)
 *   ext-bind-a, ext-bind-b  nothing: a pod's holds end when its Binding is admitted
 *   ext-nowhere  not a Node anywhere
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

static struct world W;
static int sched_port;
static char https_base[128], http_base[128];

static unsigned long placement_calls(void)
{
	return apiserver_double_count(W.api, APISERVER_DOUBLE_GET_NODE) +
	       apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD) +
	       apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS);
}

static int group_setup(void **state)
{
	static char listen[64];
	static const char *extra[] = {"--scheduler-listen",
	                              listen,
	                              "--drain-timeout",
	                              "200ms",
	                              "--unseen-reservation-ttl",
	                              "2s",
	                              NULL};

	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	sched_port = harness_free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", sched_port);
	if (world_add_node(&W, "ext-full", 81559, 1) || world_add_node(&W, "ext-room", 81559, 1) ||
	    world_add_node(&W, "ext-hold", 81559, 1) ||
	    world_add_node(&W, "ext-unseen", 81559, 1) ||
	    world_add_node(&W, "ext-bind-a", 81559, 1) ||
	    world_add_node(&W, "ext-bind-b", 81559, 1) ||
	    world_add_pod(&W, "team-x", "resident", "70Gi", "ext-full"))
		return -1;
	if (world_start_gmg(&W, extra, 30000))
		return -1;
	itest_wait_synced(&W, 10000);
	snprintf(https_base, sizeof(https_base), "https://127.0.0.1:%d", W.port);
	snprintf(http_base, sizeof(http_base), "http://127.0.0.1:%d", sched_port);
	return 0;
}

static int group_teardown(void **state)
{
	world_free(&W);
	return 0;
}

/* ExtenderArgs (NodeNames form, as kube-scheduler with nodeCacheCapable: true sends them) for
 * an unbound pod inference/name declaring limit. Caller frees. */
static char *args(const char *name, const char *limit)
{
	char *pod = itest_pod_json(name, "uid-ext", limit, NULL, "Pending");
	size_t cap = strlen(pod) + 256;
	char *body = malloc(cap);
	ITEST_CHECK(pod && body, "out of memory");
	snprintf(body, cap,
	         "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[\"ext-full\",\"ext-room\","
	         "\"ext-nowhere\"]}",
	         pod);
	free(pod);
	return body;
}

/* POST body to base + path; returns the HTTP code, *out the body (caller frees). */
static long post(const char *base, const char *path, const char *body, char **out)
{
	char url[256];
	struct http_resp rs;
	snprintf(url, sizeof(url), "%s%s", base, path);
	struct http_req rq = {
	    .url = url,
	    .ca_file = W.ca_file,
	    .body = body,
	    .body_len = strlen(body),
	    .content_type = "application/json",
	};
	ITEST_CHECK(http_do(NULL, &rq, &rs) == 0, "POST %s: %s", url, rs.error);
	*out = rs.body;
	rs.body = NULL;
	long code = rs.code;
	http_resp_free(&rs);
	return code;
}

static cJSON *post_json(const char *base, const char *path, const char *body)
{
	char *out = NULL;
	long code = post(base, path, body, &out);
	ITEST_CHECK(code == 200, "POST %s%s: HTTP %ld: %s", base, path, code, out ? out : "");
	cJSON *a = cJSON_Parse(out);
	ITEST_CHECK(a != NULL, "POST %s%s: not JSON: %s", base, path, out);
	free(out);
	return a;
}

static const char *str_in(const cJSON *o, const char *map, const char *name)
{
	const cJSON *m = map ? cJSON_GetObjectItemCaseSensitive(o, map) : o;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void expect_filter(const cJSON *a, const char *passing, const char *room_reason)
{
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(a, "NodeNames");
	char got[128] = "";
	const cJSON *it;
	cJSON_ArrayForEach(it, names)
	{
		if (got[0])
			strcat(got, ",");
		strncat(got, cJSON_IsString(it) ? it->valuestring : "?", 60);
	}
	ITEST_CHECK(strcmp(got, passing) == 0, "NodeNames [%s], expected [%s]", got, passing);
	const char *full = str_in(a, "FailedNodes", "ext-full");
	ITEST_CHECK(full && strcmp(full, "needs 10Gi, 1.7Gi free of the 90 percent limit") == 0,
	            "FailedNodes[ext-full] = %s", full ? full : "(none)");
	const char *room = str_in(a, "FailedNodes", "ext-room");
	ITEST_CHECK((room_reason == NULL && room == NULL) ||
	                (room_reason && room && strcmp(room, room_reason) == 0),
	            "FailedNodes[ext-room] = %s, expected %s", room ? room : "(none)",
	            room_reason ? room_reason : "(none)");
	const char *nowhere = str_in(a, "FailedAndUnresolvableNodes", "ext-nowhere");
	ITEST_CHECK(nowhere && strstr(nowhere, "unknown to gpu-memory-guard's watch cache"),
	            "FailedAndUnresolvableNodes[ext-nowhere] = %s", nowhere ? nowhere : "(none)");
	ITEST_CHECK(str_in(a, NULL, "Error") && str_in(a, NULL, "Error")[0] == '\0',
	            "Error is not empty");
}

static int score_of(const cJSON *list, const char *host)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		const char *h = str_in(it, NULL, "Host");
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(it, "Score");
		if (h && strcmp(h, host) == 0 && cJSON_IsNumber(s))
			return s->valueint;
	}
	return -1;
}

/* filter and prioritize over HTTPS and over the plain listener: the same answers, from the
 * cache, with no API call. */
static void test_filter_and_prioritize_both_listeners(void **state)
{
	char *body = args("steered", "10Gi");
	const char *bases[] = {https_base, http_base};

	apiserver_double_reset_counts(W.api);
	for (int i = 0; i < 2; i++) {
		cJSON *a = post_json(bases[i], "/scheduler/filter", body);
		expect_filter(a, "ext-room", NULL);
		cJSON_Delete(a);
		a = post_json(bases[i], "/scheduler/prioritize", body);
		ITEST_CHECK(cJSON_GetArraySize(a) == 3, "3 scores");
		/* 10Gi of 71.68Gi: 1 + round(9 x 0.1395) */
		ITEST_CHECK(score_of(a, "ext-room") == 2, "ext-room score %d",
		            score_of(a, "ext-room"));
		ITEST_CHECK(score_of(a, "ext-full") == 0, "ext-full score %d",
		            score_of(a, "ext-full"));
		ITEST_CHECK(score_of(a, "ext-nowhere") == 0, "ext-nowhere score");
		cJSON_Delete(a);
	}
	ITEST_CHECK(placement_calls() == 0, "the extender made %lu API calls", placement_calls());
	free(body);
}

/* ExtenderArgs for inference/name (uid, declaring limit in the body) onto ext-hold alone;
 * returns the passing names ("ext-hold" or ""), and the FailedNodes reason into why. */
static void filter_hold(const char *name, const char *uid, const char *limit, char *got, size_t cap,
                        char *why, size_t why_cap)
{
	char *pod = itest_pod_json(name, uid, limit, NULL, "Pending");
	size_t len = strlen(pod ? pod : "") + 128;
	char *body = malloc(len);
	ITEST_CHECK(pod && body, "out of memory");
	snprintf(body, len, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[\"ext-hold\"]}", pod);
	cJSON *a = post_json(http_base, "/scheduler/filter", body);
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(a, "NodeNames");
	const cJSON *first = cJSON_GetArrayItem(names, 0);
	snprintf(got, cap, "%s", cJSON_IsString(first) ? first->valuestring : "");
	const char *r = str_in(a, "FailedNodes", "ext-hold");
	snprintf(why, why_cap, "%s", r ? r : "");
	cJSON_Delete(a);
	free(body);
	free(pod);
}

static double pods_cached(void)
{
	char *m = NULL;
	double v = -1;
	if (world_health_get(&W, "/metrics", &m) == 200)
		v = harness_metric(m, "gpu_memory_guard_cache_objects", "resource=\"pods\"", 0);
	free(m);
	return v;
}

/* Forged filter calls (issue 20): an ExtenderArgs for a pod the API server never had passes
 * ext-hold and holds nothing, so a 61Gi pod still fits there; one for a real pending pod
 * (10Gi in the API server, 60Gi in the body) holds the cached 10Gi: 62Gi then fits no more
 * (10 + 62 > 71.68), 61Gi does. */
static void test_forged_filter_holds(void **state)
{
	char got[64], why[256];

	filter_hold("forged", "uid-forged", "60Gi", got, sizeof(got), why, sizeof(why));
	ITEST_CHECK(strcmp(got, "ext-hold") == 0, "forged pod: passed [%s] (%s)", got, why);
	filter_hold("probe-a", "uid-probe-a", "61Gi", got, sizeof(got), why, sizeof(why));
	ITEST_CHECK(strcmp(got, "ext-hold") == 0,
	            "a forged call held memory: a 61Gi pod after it passed [%s] (%s)", got, why);

	double before = pods_cached();
	ITEST_CHECK(itest_put_pod(&W, "liar", "uid-liar", "10Gi", NULL, "Pending") == 0,
	            "put pod inference/liar");
	double end = harness_now() + 10;
	while (pods_cached() < before + 1) {
		ITEST_CHECK(harness_now() < end, "the cache never showed inference/liar");
		usleep(20 * 1000);
	}
	filter_hold("liar", "uid-liar", "60Gi", got, sizeof(got), why, sizeof(why));
	ITEST_CHECK(strcmp(got, "ext-hold") == 0, "liar: passed [%s] (%s)", got, why);
	filter_hold("probe-b", "uid-probe-b", "62Gi", got, sizeof(got), why, sizeof(why));
	ITEST_CHECK(strcmp(got, "") == 0 &&
	                strcmp(why, "needs 62Gi, 61.7Gi free of the 90 percent limit, counting "
	                            "10Gi of 1 pod whose Binding is in flight") == 0,
	            "after the cached pod's call a 62Gi pod: passed [%s], reason \"%s\"", got, why);
	filter_hold("probe-c", "uid-probe-c", "61Gi", got, sizeof(got), why, sizeof(why));
	ITEST_CHECK(strcmp(got, "ext-hold") == 0,
	            "the hold counted more than the cached 10Gi: a 61Gi pod passed [%s] (%s)", got,
	            why);

	char *m = NULL;
	ITEST_CHECK(world_health_get(&W, "/metrics", &m) == 200, "GET /metrics");
	double v = harness_metric(m, "gpu_memory_guard_extender_holds_refused_total",
	                          "reason=\"not_cached\"", 1);
	ITEST_CHECK(v == 5,
	            "holds refused as not cached = %.0f, expected 5 (forged, probes a, c "
	            "and the first test's steered pod, twice)",
	            v);
	free(m);
}

/* A forged pod CREATE review (issue 20): admitted (60Gi onto ext-unseen, nodeName set, not a
 * dry run) for a pod the API server never stores. Its reservation refuses a real 20Gi placement
 * at once, and is gone after --unseen-reservation-ttl (2s here; the watch cache's clock is
 * moved on by an unrelated pod event), not after --reservation-ttl (60 s): the same placement is
 * then admitted, and the drop is counted. */
static void test_forged_create_reservation_goes_after_the_bound(void **state)
{
	struct review_answer ra;
	char *ghost = harness_pod_review("unseen-ghost", "ghost-1", "60Gi", "ext-unseen", 0);
	itest_review(&W, ghost, "unseen-ghost", 1, &ra);
	free(ghost);
	char *real = harness_pod_review("unseen-real-1", "real-1", "20Gi", "ext-unseen", 1);
	itest_review(&W, real, "unseen-real-1", 0, &ra);
	itest_contains(ra.message, "ghost-1", "the denial");
	free(real);

	double t0 = harness_now();
	usleep(2300 * 1000);
	ITEST_CHECK(world_add_pod(&W, "team-x", "tick", "1Gi", "ext-full") == 0, "add a pod");
	char *m = NULL;
	double end = t0 + 10, dropped = 0;
	for (;;) {
		real = harness_pod_review("unseen-real-2", "real-1", "20Gi", "ext-unseen", 1);
		itest_review(&W, real, "unseen-real-2", -1, &ra);
		free(real);
		if (ra.allowed)
			break;
		ITEST_CHECK(harness_now() < end,
		            "the forged reservation still counts %.1f s after "
		            "its review: %s",
		            harness_now() - t0, ra.message);
		usleep(100 * 1000);
	}
	ITEST_CHECK(harness_now() - t0 < 10, "took %.1f s", harness_now() - t0);
	ITEST_CHECK(world_health_get(&W, "/metrics", &m) == 200, "GET /metrics");
	dropped = harness_metric(m, "gpu_memory_guard_reservations_unseen_dropped_total", NULL, 1);
	ITEST_CHECK(dropped >= 1, "reservations_unseen_dropped_total = %.0f", dropped);
	free(m);
}

/* A filter call for pod name (uid, 40Gi) onto ext-bind-a and ext-bind-b: the nodes it passed,
 * as "a", "b", "ab" or "". */
static void filter_bind(const char *name, const char *uid, char *got, size_t cap)
{
	char *pod = itest_pod_json(name, uid, "40Gi", NULL, "Pending");
	size_t len = strlen(pod ? pod : "") + 128;
	char *body = malloc(len);
	ITEST_CHECK(pod && body, "out of memory");
	snprintf(body, len,
	         "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[\"ext-bind-a\",\"ext-bind-b\"]}", pod);
	cJSON *a = post_json(http_base, "/scheduler/filter", body);
	const cJSON *n;
	size_t k = 0;
	cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(a, "NodeNames"))
	{
		if (cJSON_IsString(n) && k + 1 < cap)
			got[k++] = strcmp(n->valuestring, "ext-bind-a") == 0 ? 'a' : 'b';
	}
	got[k] = '\0';
	cJSON_Delete(a);
	free(body);
	free(pod);
}

/* A pod's holds end when the webhook admits its Binding (issue 23): its reservation counts it on
 * its node from then on, so the other nodes its filter passed are free again at once, not when
 * the watch cache shows it bound (here never: the double does not bind it). 40Gi pods on two
 * empty cards (limit 71.68Gi): the pending pod's filter holds both, a probe then passes none;
 * its Binding to ext-bind-a admitted, the probe passes ext-bind-b and still not ext-bind-a. */
static void test_binding_ends_holds(void **state)
{
	char got[8], uid[HARNESS_UID_MAX];
	struct review_answer ra;

	harness_pod_uid("inference", "inflight", uid, sizeof(uid));
	double before = pods_cached();
	ITEST_CHECK(itest_put_pod(&W, "inflight", uid, "40Gi", NULL, "Pending") == 0,
	            "put pod inference/inflight");
	double end = harness_now() + 10;
	while (pods_cached() < before + 1) {
		ITEST_CHECK(harness_now() < end, "the cache never showed inference/inflight");
		usleep(20 * 1000);
	}
	filter_bind("inflight", uid, got, sizeof(got));
	ITEST_CHECK(strcmp(got, "ab") == 0, "the pending pod passed [%s], want both", got);
	filter_bind("probe-bind", "uid-probe-bind", got, sizeof(got));
	ITEST_CHECK(strcmp(got, "") == 0, "with the pod in flight a probe passed [%s]", got);
	char *review = harness_binding_review("bind-inflight", "inflight", "ext-bind-a");
	itest_review(&W, review, "bind-inflight", 1, &ra);
	free(review);
	filter_bind("probe-bind", "uid-probe-bind", got, sizeof(got));
	ITEST_CHECK(strcmp(got, "b") == 0,
	            "after the Binding to ext-bind-a was admitted a probe passed [%s], want b: the "
	            "hold on ext-bind-b must end, the reservation on ext-bind-a count",
	            got);
}

/* A placement the webhook admitted (not yet a pod on the node) counts in the next filter. */
static void test_webhook_reservation_counts(void **state)
{
	struct review_answer ra;
	char *review = harness_pod_review("ext-admit", "admitted", "65Gi", "ext-room", 0);
	itest_review(&W, review, "ext-admit", 1, &ra);
	free(review);

	char *body = args("steered-2", "10Gi");
	cJSON *a = post_json(http_base, "/scheduler/filter", body);
	expect_filter(a, "", "needs 10Gi, 6.7Gi free of the 90 percent limit");
	cJSON_Delete(a);
	free(body);
}

/* Bad bodies: the filter answers 200 with an Error (kube-scheduler's contract), prioritize
 * 400 with the reason; /validate is not served on the plain listener. */
static void test_bad_bodies(void **state)
{
	char *out = NULL;
	cJSON *a = post_json(https_base, "/scheduler/filter", "{\"NodeNames\":[]}");
	const char *err = str_in(a, NULL, "Error");
	ITEST_CHECK(err && strstr(err, "ExtenderArgs: no Pod"), "Error: %s", err ? err : "(none)");
	cJSON_Delete(a);
	long code = post(http_base, "/scheduler/prioritize", "not json", &out);
	ITEST_CHECK(code == 400 && out && strstr(out, "ExtenderArgs: not JSON"),
	            "prioritize of a bad body: HTTP %ld %s", code, out ? out : "");
	free(out);
	code = post(http_base, "/validate", "{}", &out);
	ITEST_CHECK(code == 404 && out && strstr(out, "/scheduler/filter"),
	            "/validate on the plain listener: HTTP %ld %s", code, out ? out : "");
	free(out);
}

/* Calls are counted by verb and result. */
static void test_metrics(void **state)
{
	char *m = NULL;
	ITEST_CHECK(world_health_get(&W, "/metrics", &m) == 200, "GET /metrics");
	double v = harness_metric(m, "gpu_memory_guard_extender_requests_total",
	                          "verb=\"filter\",result=\"judged\"", 1);
	ITEST_CHECK(v >= 3, "filter judged = %.0f", v);
	v = harness_metric(m, "gpu_memory_guard_extender_requests_total",
	                   "verb=\"prioritize\",result=\"judged\"", 1);
	ITEST_CHECK(v >= 2, "prioritize judged = %.0f", v);
	v = harness_metric(m, "gpu_memory_guard_extender_nodes_filtered_out_total", NULL, 1);
	ITEST_CHECK(v >= 6, "nodes filtered out = %.0f", v);
	v = harness_metric(m, "gpu_memory_guard_extender_request_seconds_count", "verb=\"filter\"",
	                   1);
	ITEST_CHECK(v >= 3, "filter latency count = %.0f", v);
	free(m);
}

/* SIGTERM with the scheduler listener open: drained and stopped, exit 0 (under ASan: no leak). */
static void test_sigterm_exits_cleanly(void **state)
{
	int status = world_stop_gmg(&W, SIGTERM, 20000);
	ITEST_CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	            "exit status 0x%x after SIGTERM", (unsigned)status);
	struct http_resp rs;
	char url[256];
	snprintf(url, sizeof(url), "%s/scheduler/filter", http_base);
	struct http_req rq = {.url = url,
	                      .body = "{}",
	                      .body_len = 2,
	                      .content_type = "application/json",
	                      .timeout_ms = 2000};
	ITEST_CHECK(http_do(NULL, &rq, &rs) != 0, "the plain listener still answers after exit");
	http_resp_free(&rs);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_filter_and_prioritize_both_listeners),
	    cmocka_unit_test(test_forged_filter_holds),
	    cmocka_unit_test(test_webhook_reservation_counts),
	    cmocka_unit_test(test_forged_create_reservation_goes_after_the_bound),
	    cmocka_unit_test(test_binding_ends_holds),
	    cmocka_unit_test(test_bad_bodies),
	    cmocka_unit_test(test_metrics),
	    cmocka_unit_test(test_sigterm_exits_cleanly),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
