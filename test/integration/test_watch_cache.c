/*
 * The watch cache, through the real binary (--cache watch) against the API server TEST DOUBLE
 * serving LIST and WATCH: placements decided with no API call; a pod added by a watch event is
 * counted; a pod deleted before it shows up stops counting; a watch cut for longer than
 * --cache-max-staleness makes placements take the API path (and deny when that fails too); a
 * relist after 410 Gone converges. After each event the node's sums are checked in the
 * binary's /metrics (gpu_memory_guard_node_{capacity,declared,reserved}_bytes): a pod bound by
 * ADDED or by a later MODIFIED, one still Pending, a MODIFIED that changes nothing, a pod
 * finished, replaced by a pod of the same name (another uid) and deleted.
 *
 * Nodes are 81559 MiB per GPU at threshold 0.9: 71.68Gi per GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <unistd.h>

#include "itest.h"

static struct world W;

/* API calls a placement could make. */
static unsigned long placement_calls(void)
{
	return apiserver_double_count(W.api, APISERVER_DOUBLE_GET_NODE) +
	       apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD) +
	       apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS);
}

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* The node's gauge gpu_memory_guard_node_<what>_bytes in /metrics, -1 when absent. */
static double node_gauge(const char *what, const char *node)
{
	char name[96], label[128], *m = NULL;
	double v = -1;
	snprintf(name, sizeof name, "gpu_memory_guard_node_%s_bytes", what);
	snprintf(label, sizeof label, "node=\"%s\"}", node);
	if (world_health_get(&W, "/metrics", &m) == 200)
		v = harness_metric(m, name, label, 0);
	free(m);
	return v;
}

/* Wait up to 5 s for the node's gauge to read want (bytes), else fail naming the event. A node
 * without reservations has no reserved_bytes series: absent reads as 0 there. */
static void expect_sum(const char *what, const char *node, double want, const char *after)
{
	double end = harness_now() + 5, v;
	for (;;) {
		v = node_gauge(what, node);
		if (v < 0 && strcmp(what, "reserved") == 0)
			v = 0;
		if (v == want || harness_now() >= end)
			break;
		usleep(20 * 1000);
	}
	ITEST_CHECK(v == want,
	            "after %s: gpu_memory_guard_node_%s_bytes{node=\"%s\"} = %.0f, want %.0f",
	            after, what, node, v, want);
}

/* Pod watch events of type ("added", "modified", "deleted") the binary has received. */
static double pod_events(const char *type)
{
	char label[64], *m = NULL;
	double v = -1;
	snprintf(label, sizeof label, "resource=\"pods\",type=\"%s\"", type);
	if (world_health_get(&W, "/metrics", &m) == 200)
		v = harness_metric(m, "gpu_memory_guard_cache_events_total", label, 0);
	free(m);
	return v;
}

/* Wait up to 5 s until more than `before` pod events of type have arrived. */
static void wait_pod_event(const char *type, double before, const char *what)
{
	double end = harness_now() + 5;
	while (pod_events(type) <= before && harness_now() < end)
		usleep(20 * 1000);
	ITEST_CHECK(pod_events(type) > before, "%s: no %s pod event in 5 s", what, type);
}

static int group_setup(void **state)
{
	static const char *const extra[] = {"--cache-max-staleness", "1s", "--reservation-ttl",
	                                    "60s", NULL};
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	if (world_add_node(&W, "wc-node-a", 81559, 1) ||
	    world_add_node(&W, "wc-node-b", 81559, 1) ||
	    world_add_node(&W, "wc-node-c", 81559, 1) ||
	    world_add_node(&W, "wc-node-d", 81559, 1) ||
	    world_add_node(&W, "wc-node-e", 81559, 1) ||
	    world_add_node(&W, "wc-node-f", 81559, 1) ||
	    world_add_pod(&W, "team-w", "resident", "30Gi", "wc-node-a"))
		return -1;
	if (world_start_gmg(&W, extra, 30000))
		return -1;
	itest_wait_synced(&W, 10000);
	expect_sum("declared", "wc-node-a", 30 * GIB, "the first list");
	expect_sum("declared", "wc-node-b", 0, "the first list");
	expect_sum("capacity", "wc-node-a", 81559 * MIB, "the first list");
	return 0;
}

static int group_teardown(void **state)
{
	world_free(&W);
	return 0;
}

/* 50 placements on a node the cache knows: decided with no GET node, GET pod or LIST. */
static void test_placements_make_no_api_call(void **state)
{
	struct review_answer a;
	char uid[64], name[64];

	apiserver_double_reset_counts(W.api);
	for (int i = 0; i < 50; i++) {
		snprintf(uid, sizeof uid, "wc-uid-%d", i);
		snprintf(name, sizeof name, "small-%d", i);
		char *body = harness_pod_review(uid, name, "100Mi", "wc-node-b", 0);
		itest_review(&W, body, uid, 1, &a);
		free(body);
	}
	/* 30Gi resident + 41Gi: 71Gi of the 71.68Gi limit, allowed; then 1Gi more is not. */
	char *body = harness_pod_review("wc-fit", "fit", "41Gi", "wc-node-a", 0);
	itest_review(&W, body, "wc-fit", 1, &a);
	free(body);
	body = harness_pod_review("wc-over", "over", "1Gi", "wc-node-a", 0);
	itest_review(&W, body, "wc-over", 0, &a);
	itest_contains(a.message, "team-w/resident 30Gi", "denial names the cached pod");
	itest_contains(a.message, "inference/fit (admitting) 41Gi", "denial names the reservation");
	free(body);
	ITEST_CHECK(placement_calls() == 0, "placements made %lu API calls", placement_calls());
	/* Admitted CREATEs are reserved, not pods: the cache's sums do not move. */
	expect_sum("declared", "wc-node-a", 30 * GIB, "placements");
	expect_sum("declared", "wc-node-b", 0, "placements");
	expect_sum("reserved", "wc-node-a", 41 * GIB, "placements");
	expect_sum("reserved", "wc-node-b", 50 * 100 * MIB, "placements");
}

/* A pod that arrives by a watch event is counted by the next placement. */
static void test_pod_added_by_watch_is_counted(void **state)
{
	struct review_answer a;

	ITEST_CHECK(world_add_pod(&W, "team-w", "late", "70Gi", "wc-node-c") == 0, "put pod");
	double end = harness_now() + 5;
	for (int i = 0;; i++) {
		char uid[32];
		snprintf(uid, sizeof uid, "wc-late-%d", i);
		char *body = harness_pod_review(uid, "after-late", "2Gi", "wc-node-c", 1);
		itest_review(&W, body, uid, -1, &a);
		free(body);
		if (!a.allowed)
			break;
		ITEST_CHECK(harness_now() < end, "the watched pod was not counted within 5 s");
		usleep(20 * 1000);
	}
	itest_contains(a.message, "team-w/late 70Gi", "denial names the watched pod");
	expect_sum("declared", "wc-node-c", 70 * GIB, "ADDED team-w/late");
}

/* A pod admitted and deleted before it showed up on its node stops counting at the DELETE. */
static void test_deleted_pod_reservation_dropped(void **state)
{
	struct review_answer a;
	char *body;

	/* The pod exists unbound; its Binding to wc-node-d is admitted (reserves 60Gi). */
	ITEST_CHECK(world_add_pod(&W, "inference", "gone-soon", "60Gi", NULL) == 0, "put pod");
	double end = harness_now() + 5;
	for (int i = 0;; i++) { /* until the cache has the pod (else the binding GETs it) */
		char uid[32];
		snprintf(uid, sizeof uid, "wc-bind-%d", i);
		apiserver_double_reset_counts(W.api);
		body = harness_binding_review(uid, "gone-soon", "wc-node-d");
		itest_review(&W, body, uid, 1, &a);
		free(body);
		if (apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD) == 0)
			break;
		ITEST_CHECK(harness_now() < end, "the binding's pod never came from the cache");
		usleep(20 * 1000);
	}
	body = harness_pod_review("wc-d-1", "d-1", "20Gi", "wc-node-d", 1);
	itest_review(&W, body, "wc-d-1", 0, &a);
	itest_contains(a.message, "inference/gone-soon (admitting) 60Gi", "reservation counted");
	free(body);
	expect_sum("reserved", "wc-node-d", 60 * GIB, "the Binding of gone-soon");
	expect_sum("declared", "wc-node-d", 0, "the Binding of gone-soon (not bound yet)");
	ITEST_CHECK(apiserver_double_delete_pod(W.api, "inference", "gone-soon") == 0, "delete");
	end = harness_now() + 5;
	for (int i = 0;; i++) {
		char uid[32];
		snprintf(uid, sizeof uid, "wc-d-%d", i + 2);
		body = harness_pod_review(uid, "d-2", "20Gi", "wc-node-d", 1);
		itest_review(&W, body, uid, -1, &a);
		free(body);
		if (a.allowed)
			break;
		ITEST_CHECK(harness_now() < end, "the deleted pod's reservation still counts: %s",
		            a.message);
		usleep(20 * 1000);
	}
	expect_sum("reserved", "wc-node-d", 0, "DELETED gone-soon");
	expect_sum("declared", "wc-node-d", 0, "DELETED gone-soon");
}

/* The node's sums after each kind of pod event, on a node added while the binary runs. */
static void test_node_sums_follow_events(void **state)
{
	const char *node = "wc-node-e";
	double n;

	ITEST_CHECK(world_add_node(&W, node, 81559, 1) == 0, "add node");
	expect_sum("capacity", node, 81559 * MIB, "ADDED node");
	expect_sum("declared", node, 0, "ADDED node");
	ITEST_CHECK(world_add_pod(&W, "team-e", "e-a", "10Gi", node) == 0, "put e-a");
	expect_sum("declared", node, 10 * GIB, "ADDED e-a, bound");
	n = pod_events("added");
	ITEST_CHECK(world_add_pod(&W, "team-e", "e-b", "5Gi", NULL) == 0, "put e-b");
	wait_pod_event("added", n, "ADDED e-b");
	expect_sum("declared", node, 10 * GIB, "ADDED e-b, Pending");
	ITEST_CHECK(apiserver_double_bind(W.api, "team-e", "e-b", node) == 0, "bind e-b");
	expect_sum("declared", node, 15 * GIB, "MODIFIED e-b, bound");
	n = pod_events("modified");
	ITEST_CHECK(apiserver_double_set_phase(W.api, "team-e", "e-a", "Running") == 0, "Running");
	wait_pod_event("modified", n, "MODIFIED e-a Running");
	expect_sum("declared", node, 15 * GIB, "MODIFIED e-a Running (counted once)");
	ITEST_CHECK(apiserver_double_set_phase(W.api, "team-e", "e-a", "Succeeded") == 0,
	            "Succeeded");
	expect_sum("declared", node, 5 * GIB, "MODIFIED e-a Succeeded");
	/* e-b replaced by a pod of the same name (another uid) declaring 3Gi. */
	ITEST_CHECK(apiserver_double_put_pod(
	                W.api, "team-e",
	                "{\"metadata\":{\"name\":\"e-b\",\"uid\":\"uid-e-b-newer\"},\"spec\":{"
	                "\"nodeName\":\"wc-node-e\",\"containers\":[{\"name\":\"c\",\"resources\":"
	                "{\"limits\":{\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":"
	                "\"GPU_MEMORY_LIMIT\",\"value\":\"3Gi\"}]}]},\"status\":{\"phase\":"
	                "\"Running\"}}") == 0,
	            "replace e-b");
	expect_sum("declared", node, 3 * GIB, "e-b replaced (3Gi, another uid)");
	ITEST_CHECK(apiserver_double_delete_pod(W.api, "team-e", "e-b") == 0, "delete e-b");
	expect_sum("declared", node, 0, "DELETED e-b");
	n = pod_events("deleted");
	ITEST_CHECK(apiserver_double_delete_pod(W.api, "team-e", "e-a") == 0, "delete e-a");
	wait_pod_event("deleted", n, "DELETED e-a");
	expect_sum("declared", node, 0, "DELETED e-a (finished: nothing left to subtract)");
}

/* A Binding decided from the cache only for the very pod it names: another uid (an older pod
 * of the same name in the cache) takes the API path, which reads the pod as it is now. */
static void test_binding_of_another_uid_reads_the_pod(void **state)
{
	struct review_answer a;
	double end = harness_now() + 5;

	ITEST_CHECK(world_add_pod(&W, "inference", "same-name", "10Gi", NULL) == 0, "put pod");
	for (int i = 0;; i++) { /* the cache has the pod: a Binding with its uid makes no call */
		char uid[32];
		snprintf(uid, sizeof uid, "wc-same-%d", i);
		apiserver_double_reset_counts(W.api);
		char *body = harness_binding_review(uid, "same-name", "wc-node-b");
		itest_review(&W, body, uid, -1, &a);
		free(body);
		if (apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD) == 0)
			break;
		ITEST_CHECK(harness_now() < end, "the pod never came from the cache");
		usleep(20 * 1000);
	}
	char *text = harness_binding_review("wc-same-other", "same-name", "wc-node-b");
	cJSON *doc = cJSON_Parse(text);
	free(text);
	cJSON *md = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "request"),
	                                     "object"),
	    "metadata");
	cJSON_DeleteItemFromObjectCaseSensitive(md, "uid");
	cJSON_AddStringToObject(md, "uid", "a-newer-pod-of-that-name");
	text = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	apiserver_double_reset_counts(W.api);
	itest_review(&W, text, "wc-same-other", -1, &a);
	free(text);
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD) == 1,
	            "a Binding of another uid made %lu GET pod calls, want 1",
	            apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD));
}

/* A Binding of a pod the cache shows already bound (to another node) reserves nothing: the API
 * server refuses it with 409 Conflict ("pod ... is already assigned to node ..."), so a
 * reservation would be a phantom that refuses real placements on the new node until its TTL. */
static void test_binding_of_bound_pod_reserves_nothing(void **state)
{
	struct review_answer a;
	char uid[64], *body;
	double end = harness_now() + 5;

	ITEST_CHECK(world_add_pod(&W, "inference", "bound-e", "60Gi", "wc-node-e") == 0, "put");
	for (int i = 0;; i++) { /* until the cache counts it on wc-node-e */
		snprintf(uid, sizeof uid, "wc-e-%d", i);
		body = harness_pod_review(uid, "probe-e", "20Gi", "wc-node-e", 1);
		itest_review(&W, body, uid, -1, &a);
		free(body);
		if (!a.allowed)
			break;
		ITEST_CHECK(harness_now() < end, "the bound pod was not counted within 5 s");
		usleep(20 * 1000);
	}
	itest_contains(a.message, "inference/bound-e 60Gi", "the bound pod is counted on e");
	apiserver_double_reset_counts(W.api);
	body = harness_binding_review("wc-rebind", "bound-e", "wc-node-f");
	itest_review(&W, body, "wc-rebind", 1, &a);
	free(body);
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD) == 0,
	            "the Binding of a cached bound pod made %lu GET pod calls, want 0",
	            apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD));
	/* Nothing reserved on wc-node-f: 70Gi fits its 71.68Gi limit (not a dry run). */
	body = harness_pod_review("wc-f-1", "f-1", "70Gi", "wc-node-f", 0);
	itest_review(&W, body, "wc-f-1", 1, &a);
	free(body);
}

/* A relist after 410 Gone converges: the pod created while the watch was down is seen. */
static void test_relist_after_gone(void **state)
{
	struct review_answer a;
	char *metrics = NULL;

	/* Every watch answers 410 for a while: the informer must relist to see the new pod. */
	apiserver_double_set_watch_gone(W.api, 1);
	apiserver_double_compact(W.api);
	apiserver_double_cut_watches(W.api);
	ITEST_CHECK(world_add_pod(&W, "team-w", "while-cut", "71Gi", "wc-node-b") == 0, "put");
	usleep(500 * 1000);
	apiserver_double_set_watch_gone(W.api, 0);
	double end = harness_now() + 10;
	for (int i = 0;; i++) {
		char uid[32];
		snprintf(uid, sizeof uid, "wc-relist-%d", i);
		char *body = harness_pod_review(uid, "after-relist", "5Gi", "wc-node-b", 1);
		itest_review(&W, body, uid, -1, &a);
		free(body);
		if (!a.allowed && strstr(a.message, "team-w/while-cut"))
			break;
		ITEST_CHECK(harness_now() < end, "not converged after 410: %s", a.message);
		usleep(50 * 1000);
	}
	ITEST_CHECK(world_health_get(&W, "/metrics", &metrics) == 200, "metrics");
	double relists =
	    harness_metric(metrics, "gpu_memory_guard_cache_relists_total", "resource=\"pods\"", 0);
	ITEST_CHECK(relists >= 1, "relists_total{pods} = %g", relists);
	itest_contains(metrics, "gpu_memory_guard_node_declared_bytes{node=\"wc-node-b\"}",
	               "per-node gauge");
	free(metrics);
	expect_sum("declared", "wc-node-b", 71 * GIB, "the relist (while-cut)");
}

/* A watch broken only moments ago while the API server answers: the placement asks the API
 * server (writes made meanwhile may be missing from the cache), not the cache. */
static void test_broken_watch_asks_the_api_server(void **state)
{
	struct review_answer a;
	char *ready = NULL;

	itest_wait_synced(&W, 10000);
	apiserver_double_set_watch_gone(W.api, 1); /* every new watch fails: the break lasts */
	apiserver_double_cut_watches(W.api);
	double end = harness_now() + 5;
	for (;;) { /* until the webhook sees the break */
		free(ready);
		ready = NULL;
		world_health_get(&W, "/readyz", &ready);
		if (ready && strstr(ready, "watch broken"))
			break;
		ITEST_CHECK(harness_now() < end, "the cut watch is not reported: %s",
		            ready ? ready : "(none)");
		usleep(10 * 1000);
	}
	free(ready);
	apiserver_double_reset_counts(W.api);
	char *body = harness_pod_review("wc-broken", "broken", "1Gi", "wc-node-b", 1);
	itest_review(&W, body, "wc-broken", -1, &a);
	free(body);
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_GET_NODE) == 1,
	            "a placement during a broken watch made %lu GET node calls, want 1 (API path)",
	            apiserver_double_count(W.api, APISERVER_DOUBLE_GET_NODE));
	apiserver_double_set_watch_gone(W.api, 0);
	itest_wait_synced(&W, 15000);
}

/* The API server down longer than the staleness bound: placements take the API path, which
 * fails, so they are denied (never decided from the stale cache); back up, the cache again. */
static void test_stale_cache_falls_back(void **state)
{
	struct review_answer a;
	char *body, *ready = NULL;

	itest_wait_synced(&W, 10000);
	ITEST_CHECK(apiserver_double_stop(W.api) == 0, "stop the double");
	usleep(1600 * 1000); /* > --cache-max-staleness 1s */
	body = harness_pod_review("wc-stale", "stale", "1Gi", "wc-node-b", 1);
	itest_review(&W, body, "wc-stale", 0, &a);
	itest_contains(a.message, "could not be asked", "denied on the API path");
	free(body);
	ITEST_CHECK(world_health_get(&W, "/readyz", &ready) == 200, "readyz stays 200");
	itest_contains(ready, "watch broken", "readyz reports the broken watch");
	free(ready);
	char err[256];
	ITEST_CHECK(apiserver_double_start(W.api, err, sizeof err) == 0, "restart: %s", err);
	itest_wait_synced(&W, 15000);
	apiserver_double_reset_counts(W.api);
	body = harness_pod_review("wc-back", "back", "1Gi", "wc-node-b", 1);
	itest_review(&W, body, "wc-back", -1, &a);
	free(body);
	ITEST_CHECK(placement_calls() == 0, "after recovery: %lu API calls", placement_calls());
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_placements_make_no_api_call),
	    cmocka_unit_test(test_pod_added_by_watch_is_counted),
	    cmocka_unit_test(test_deleted_pod_reservation_dropped),
	    cmocka_unit_test(test_node_sums_follow_events),
	    cmocka_unit_test(test_binding_of_another_uid_reads_the_pod),
	    cmocka_unit_test(test_binding_of_bound_pod_reserves_nothing),
	    cmocka_unit_test(test_relist_after_gone),
	    cmocka_unit_test(test_broken_watch_asks_the_api_server),
	    cmocka_unit_test(test_stale_cache_falls_back),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
