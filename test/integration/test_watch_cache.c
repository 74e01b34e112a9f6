/*
 * The watch cache, through the real binary (--cache watch) against the API server TEST DOUBLE
 * serving LIST and WATCH: placements decided with no API call; a pod added by a watch event is
 * counted; a pod deleted before it shows up stops counting; a watch cut for longer than
 * --cache-max-staleness makes placements take the API path (and deny when that fails too); a
 * relist after 410 Gone converges.
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
	    cmocka_unit_test(test_binding_of_another_uid_reads_the_pod),
	    cmocka_unit_test(test_binding_of_bound_pod_reserves_nothing),
	    cmocka_unit_test(test_relist_after_gone),
	    cmocka_unit_test(test_broken_watch_asks_the_api_server),
	    cmocka_unit_test(test_stale_cache_falls_back),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
