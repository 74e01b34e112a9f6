/*
 * Shared GPUs through the real binary (issue 10) against the API server TEST DOUBLE: nodes
 * labelled as GPU Feature Discovery labels them under time-slicing, MPS, MIG mixed, and a
 * node of device-plugin slots without GFD labels; pod CREATE reviews with spec.nodeName (dry
 * runs: nothing reserved, so each case stands alone), on the watch cache and on the API path
 * (--cache off); and the extender's filter reasons (watch cache only).
 *
 * Threshold 0.9 everywhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "itest.h"

static struct world W;

#define GFD_H100 "\"nvidia.com/gpu.count\":\"2\",\"nvidia.com/gpu.memory\":\"81559\","

static const char *const nodes[] = {
    /* 2 H100, 4 time-slice replicas each */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"sh-ts\",\"labels\":{" GFD_H100
    "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3-SHARED\",\"nvidia.com/gpu.replicas\":"
    "\"4\",\"nvidia.com/gpu.sharing-strategy\":\"time-slicing\"}},\"status\":{\"allocatable\":"
    "{\"nvidia.com/gpu\":\"8\"}}}",
    /* the same cards, not shared */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"sh-plain\",\"labels\":{" GFD_H100
    "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\",\"nvidia.com/gpu.replicas\":\"1\","
    "\"nvidia.com/gpu.sharing-strategy\":\"none\"}},\"status\":{\"allocatable\":"
    "{\"nvidia.com/gpu\":\"2\"}}}",
    /* 1 L40S, MPS with 10 replicas */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"sh-mps\",\"labels\":{\"nvidia.com/gpu.count\":"
    "\"1\",\"nvidia.com/gpu.memory\":\"46068\",\"nvidia.com/gpu.product\":\"NVIDIA-L40S-SHARED\","
    "\"nvidia.com/gpu.replicas\":\"10\",\"nvidia.com/gpu.sharing-strategy\":\"mps\"}},"
    "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"10\"}}}",
    /* 10 slots of a plugin without GFD labels (HAMi-style vGPU), 24Gi per GPU */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"sh-slots\",\"annotations\":{"
    "\"gpu-memory-guard.io/gpu-memory\":\"24Gi\"}},\"status\":{\"allocatable\":"
    "{\"nvidia.com/gpu\":\"10\"}}}",
    /* 1 L40S cut into 16384 time-slice replicas (memory units) */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"sh-units\",\"labels\":{\"nvidia.com/gpu.count\":"
    "\"1\",\"nvidia.com/gpu.memory\":\"46068\",\"nvidia.com/gpu.replicas\":\"16384\","
    "\"nvidia.com/gpu.sharing-strategy\":\"time-slicing\"}},\"status\":{\"allocatable\":"
    "{\"nvidia.com/gpu\":\"16384\"}}}",
    /* 2 A100-40GB, MIG mixed: one whole, one cut into 7 x 1g.5gb */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"sh-mixed\",\"labels\":{\"nvidia.com/gpu.count\":"
    "\"2\",\"nvidia.com/gpu.memory\":\"40960\",\"nvidia.com/gpu.product\":"
    "\"NVIDIA-A100-SXM4-40GB\",\"nvidia.com/mig.strategy\":\"mixed\","
    "\"nvidia.com/mig-1g.5gb.count\":\"7\",\"nvidia.com/mig-1g.5gb.memory\":\"4864\"}},"
    "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"1\",\"nvidia.com/mig-1g.5gb\":\"7\"}}}",
};

/* Make every container of pod object obj ask for count of resource (limits and requests). */
static void set_gpus(cJSON *obj, const char *resource, const char *count)
{
	cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(
	                          cJSON_GetObjectItemCaseSensitive(obj, "spec"), "containers"))
	{
		cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
		const char *lists[] = {"limits", "requests"};
		for (int i = 0; i < 2; i++) {
			cJSON *l = cJSON_GetObjectItemCaseSensitive(res, lists[i]);
			cJSON_DeleteItemFromObjectCaseSensitive(l, "nvidia.com/gpu");
			cJSON_AddStringToObject(l, resource, count);
		}
	}
}

/* A pod on node asking count of resource and declaring limit: into the double. */
static int put_pod(const char *name, const char *limit, const char *node, const char *resource,
                   const char *count)
{
	char uid[64], *json = NULL;
	snprintf(uid, sizeof(uid), "uid-%s", name);
	char *text = itest_pod_json(name, uid, limit, node, "Running");
	cJSON *obj = text ? cJSON_Parse(text) : NULL;
	int rc = -1;
	free(text);
	if (obj) {
		set_gpus(obj, resource, count);
		json = cJSON_PrintUnformatted(obj);
		rc = json ? apiserver_double_put_pod(W.api, "inference", json) : -1;
	}
	cJSON_free(json);
	cJSON_Delete(obj);
	return rc;
}

static int setup(const char *cache_mode)
{
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = cache_mode;
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
		if (apiserver_double_put_node(W.api, nodes[i]))
			return -1;
	if (put_pod("slot-a", "10Gi", "sh-slots", "nvidia.com/gpu", "1") ||
	    put_pod("slot-b", "10Gi", "sh-slots", "nvidia.com/gpu", "1") ||
	    put_pod("units-a", "11Gi", "sh-units", "nvidia.com/gpu", "2048") ||
	    put_pod("units-b", "11Gi", "sh-units", "nvidia.com/gpu", "2048") ||
	    put_pod("units-c", "11Gi", "sh-units", "nvidia.com/gpu", "2048") ||
	    put_pod("whole-a", "30Gi", "sh-mixed", "nvidia.com/gpu", "1") ||
	    put_pod("slice-a", "4Gi", "sh-mixed", "nvidia.com/mig-1g.5gb", "1"))
		return -1;
	if (world_start_gmg(&W, NULL, 30000))
		return -1;
	if (!strcmp(cache_mode, "watch"))
		itest_wait_synced(&W, 10000);
	return 0;
}

static int setup_watch(void **state)
{
	return setup("watch");
}

static int setup_off(void **state)
{
	return setup("off");
}

static int teardown(void **state)
{
	world_free(&W);
	return 0;
}

/* A dry-run pod CREATE of inference/name on node asking count of resource, declaring limit;
 * checks allowed and, when given, a part of the message. */
static void place(const char *name, const char *node, const char *resource, const char *count,
                  const char *limit, int allowed, const char *part)
{
	char uid[64], *body = NULL;
	struct review_answer a;
	snprintf(uid, sizeof(uid), "rv-%s-%s", name, W.cache_mode);
	char *text = harness_pod_review(uid, name, limit, node, 1);
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	free(text);
	set_gpus(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "request"),
	                                          "object"),
	         resource, count);
	body = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	itest_review(&W, body, uid, allowed, &a);
	cJSON_free(body);
	if (part)
		itest_contains(allowed ? a.warnings : a.message, part, name);
}

/* 1. Time-slicing: both slices of a pod may be on one card; the same pod on unshared cards
 * fits. */
static void test_time_slicing(void **state)
{
	place("ts-two", "sh-ts", "nvidia.com/gpu", "2", "140Gi", 0,
	      "container \"tei\" declares 140Gi per GPU, above the 90 percent limit of one GPU's "
	      "79.6Gi (71.7Gi); time-sliced: both slices may land on one card");
	place("ts-eight", "sh-ts", "nvidia.com/gpu", "8", "140Gi", 1, NULL);
	place("plain-two", "sh-plain", "nvidia.com/gpu", "2", "140Gi", 1, NULL);
}

/* 2. MPS: each client is pinned to card / replicas. */
static void test_mps(void **state)
{
	place("mps-8", "sh-mps", "nvidia.com/gpu", "1", "8Gi", 0,
	      "can never fit on sh-mps: container \"tei\" declares 8Gi per MPS client, above the "
	      "90 percent limit of one MPS client's 4.5Gi (4Gi); MPS: each client is pinned to the "
	      "card's memory / 10 replicas");
	place("mps-4", "sh-mps", "nvidia.com/gpu", "1", "4Gi", 1, NULL);
}

/* 3. Slots without GFD labels: no card count from allocatable alone. */
static void test_slots_without_gfd(void **state)
{
	place("slots", "sh-slots", "nvidia.com/gpu", "1", "10Gi", 0,
	      "GPU count unknown: set annotation gpu-memory-guard.io/gpu-count (physical GPUs) or "
	      "GPU Feature Discovery's labels nvidia.com/gpu.count and nvidia.com/gpu.replicas");
}

/* 4. Thousands of slices: valid, and running pods count their declarations (3 x 11Gi). */
static void test_many_slices(void **state)
{
	place("units-ok", "sh-units", "nvidia.com/gpu", "4096", "7Gi", 1, NULL);
	place("units-over", "sh-units", "nvidia.com/gpu", "4096", "8Gi", 0,
	      "would declare 41Gi of 45Gi GPU memory");
}

/* 5. MIG mixed: whole GPUs are the one unpartitioned card; slices are judged by their profile
 * and summed apart. */
static void test_mig_mixed(void **state)
{
	place(
	    "mixed-whole", "sh-mixed", "nvidia.com/gpu", "1", "30Gi", 0,
	    "would declare 60Gi of 40Gi GPU memory (150 percent), above the 90 percent limit "
	    "(36Gi); already there: inference/whole-a 30Gi; MIG mixed: whole-GPU pods share the 1 "
	    "GPU(s) not partitioned into MIG slices");
	place("mixed-slice-big", "sh-mixed", "nvidia.com/mig-1g.5gb", "1", "8Gi", 0,
	      "declares 8Gi per MIG slice, above the 90 percent limit of one MIG slice's 4.8Gi "
	      "(4.3Gi); MIG 1g.5gb: one slice has its own memory");
	place("mixed-slice", "sh-mixed", "nvidia.com/mig-1g.5gb", "1", "4Gi", 1, NULL);
}

/* The extender: the same core, the rule in its reasons. */
static void test_extender_reasons(void **state)
{
	char url[160], *pod = itest_pod_json("ext-two", "uid-ext-two", "140Gi", NULL, "Pending");
	cJSON *obj = cJSON_Parse(pod);
	free(pod);
	set_gpus(obj, "nvidia.com/gpu", "2");
	pod = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	size_t cap = strlen(pod) + 128;
	char *body = malloc(cap);
	snprintf(body, cap, "{\"Pod\":%s,\"NodeNames\":[\"sh-ts\",\"sh-plain\",\"sh-slots\"]}",
	         pod);
	cJSON_free(pod);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/scheduler/filter", W.port);
	struct http_req rq = {.url = url,
	                      .ca_file = W.ca_file,
	                      .body = body,
	                      .body_len = strlen(body),
	                      .content_type = "application/json"};
	struct http_resp rs;
	ITEST_CHECK(http_do(NULL, &rq, &rs) == 0 && rs.code == 200, "filter: HTTP %ld %s", rs.code,
	            rs.error);
	cJSON *a = cJSON_Parse(rs.body);
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(a, "NodeNames");
	const cJSON *un = cJSON_GetObjectItemCaseSensitive(a, "FailedAndUnresolvableNodes");
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(un, "sh-ts");
	const cJSON *slots = cJSON_GetObjectItemCaseSensitive(un, "sh-slots");
	ITEST_CHECK(cJSON_GetArraySize(names) == 1 &&
	                !strcmp(cJSON_GetArrayItem(names, 0)->valuestring, "sh-plain"),
	            "filter passes sh-plain only: %s", rs.body);
	ITEST_CHECK(
	    cJSON_IsString(ts) &&
	        !strcmp(ts->valuestring,
	                "container \"tei\" needs 140Gi per GPU, above the 90 percent limit "
	                "of one GPU's 79.6Gi; time-sliced: both slices may land on one card"),
	    "sh-ts reason: %s", rs.body);
	ITEST_CHECK(cJSON_IsString(slots) &&
	                strstr(slots->valuestring, "gpu-memory-guard.io/gpu-count"),
	            "sh-slots reason: %s", rs.body);
	cJSON_Delete(a);
	http_resp_free(&rs);
	free(body);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest both[] = {
	    cmocka_unit_test(test_time_slicing),      cmocka_unit_test(test_mps),
	    cmocka_unit_test(test_slots_without_gfd), cmocka_unit_test(test_many_slices),
	    cmocka_unit_test(test_mig_mixed),
	};
	const struct CMUnitTest watch_only[] = {cmocka_unit_test(test_extender_reasons)};
	int rc = cmocka_run_group_tests_name("watch cache", both, setup_watch, teardown);
	rc |=
	    cmocka_run_group_tests_name("watch cache: extender", watch_only, setup_watch, teardown);
	rc |= cmocka_run_group_tests_name("API path", both, setup_off, teardown);
	return rc;
}
