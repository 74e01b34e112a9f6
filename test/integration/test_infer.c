/*
 * --undeclared infer through the real binary (issue 19) against the API server TEST DOUBLE, on
 * the watch cache and on the API path (--cache off): undeclared and engine pods on an 8-card
 * exclusive node and on a time-sliced card, with the source in the message; and the strict
 * mode (--undeclared refuse) refusing the same undeclared pod as before.
 *
 * Threshold 0.9. Reviews are dry-run pod CREATEs with spec.nodeName: nothing is reserved.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "itest.h"

static struct world W;

static const char *const nodes[] = {
    /* 8 H100, not shared */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"in-plain\",\"labels\":{\"nvidia.com/gpu.count\":"
    "\"8\",\"nvidia.com/gpu.memory\":\"81559\",\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-"
    "HBM3\",\"nvidia.com/gpu.sharing-strategy\":\"none\"}},\"status\":{\"allocatable\":{"
    "\"nvidia.com/gpu\":\"8\"}}}",
    /* 1 H100, 4 time-slice replicas */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"in-ts\",\"labels\":{\"nvidia.com/gpu.count\":"
    "\"1\",\"nvidia.com/gpu.memory\":\"81559\",\"nvidia.com/gpu.replicas\":\"4\","
    "\"nvidia.com/gpu.sharing-strategy\":\"time-slicing\"}},\"status\":{\"allocatable\":{"
    "\"nvidia.com/gpu\":\"4\"}}}",
};

/* The fixture's pod object reshaped: no GPU_MEMORY_LIMIT when limit is NULL; image, command
 * (NULL: none) and one args string (NULL: none). */
static void reshape(cJSON *obj, const char *limit, const char *image, const char *sh_c)
{
	cJSON *c =
	    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
	                           cJSON_GetObjectItemCaseSensitive(obj, "spec"), "containers"),
	                       0);

	if (limit == NULL)
		cJSON_DeleteItemFromObjectCaseSensitive(c, "env");
	if (image != NULL) {
		cJSON_DeleteItemFromObjectCaseSensitive(c, "image");
		cJSON_AddStringToObject(c, "image", image);
	}
	if (sh_c != NULL) {
		const char *cmd[] = {"/bin/sh", "-c"};
		cJSON_AddItemToObject(c, "command", cJSON_CreateStringArray(cmd, 2));
		cJSON_AddItemToObject(c, "args", cJSON_CreateStringArray(&sh_c, 1));
	}
}

/* A running pod of that shape on node, into the double. */
static int put_pod(const char *name, const char *limit, const char *node, const char *image,
                   const char *sh_c)
{
	char uid[64], *json = NULL;
	snprintf(uid, sizeof(uid), "uid-%s", name);
	char *text = itest_pod_json(name, uid, limit ? limit : "1Gi", node, "Running");
	cJSON *obj = text ? cJSON_Parse(text) : NULL;
	int rc = -1;
	free(text);
	if (obj) {
		reshape(obj, limit, image, sh_c);
		json = cJSON_PrintUnformatted(obj);
		rc = json ? apiserver_double_put_pod(W.api, "inference", json) : -1;
	}
	cJSON_free(json);
	cJSON_Delete(obj);
	return rc;
}

static int setup(const char *cache_mode, const char *undeclared)
{
	char name[32];

	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = cache_mode;
	W.undeclared = undeclared;
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
		if (apiserver_double_put_node(W.api, nodes[i]))
			return -1;
	for (int i = 0; i < 7; i++) { /* seven undeclared 1-GPU pods on the 8 unshared cards */
		snprintf(name, sizeof(name), "whole-%d", i);
		if (put_pod(name, NULL, "in-plain", NULL, NULL))
			return -1;
	}
	if (put_pod("small", "4Gi", "in-ts", NULL, NULL))
		return -1;
	if (world_start_gmg(&W, NULL, 30000))
		return -1;
	if (!strcmp(cache_mode, "watch"))
		itest_wait_synced(&W, 10000);
	return 0;
}

static int setup_watch(void **state)
{
	return setup("watch", "infer");
}

static int setup_off(void **state)
{
	return setup("off", "infer");
}

static int setup_strict(void **state)
{
	return setup("off", "refuse");
}

static int teardown(void **state)
{
	world_free(&W);
	return 0;
}

/* A dry-run CREATE of inference/name of that shape on node; checks allowed and a part of the
 * message (or of the warnings when allowed). */
static void place(const char *name, const char *node, const char *limit, const char *image,
                  const char *sh_c, int allowed, const char *part)
{
	char uid[64], *body = NULL;
	struct review_answer a;
	snprintf(uid, sizeof(uid), "rv-%s-%s", name, W.cache_mode);
	char *text = harness_pod_review(uid, name, limit ? limit : "1Gi", node, 1);
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	free(text);
	reshape(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "request"),
	                                         "object"),
	        limit, image, sh_c);
	body = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	itest_review(&W, body, uid, allowed, &a);
	cJSON_free(body);
	if (part)
		itest_contains(allowed ? a.warnings : a.message, part, name);
}

/* The eighth undeclared 1-GPU pod on the 8-card exclusive node is admitted, and a
 * declared pod is judged on the card no one holds. */
static void test_exclusive_cards(void **state)
{
	place("eighth", "in-plain", NULL, NULL, NULL, 1, NULL);
	place("declared-fits", "in-plain", "70Gi", NULL, NULL, 1, NULL);
	place("declared-over", "in-plain", "72Gi", NULL, NULL, 0, "counted as 72Gi");
}

/* On the time-sliced card: an undeclared pod beside another is refused, saying why and how;
 * vLLM's flag inside sh -c counts its share of this card. */
static void test_shared_card(void **state)
{
	place("undeclared", "in-ts", NULL, NULL, NULL, 0,
	      "declares no GPU memory, and the GPUs of in-ts are shared (time-sliced) with 1 "
	      "other pod(s)");
	place("vllm-half", "in-ts", NULL, "vllm/vllm-openai:v0.9.2",
	      "vllm serve m --gpu-memory-utilization 0.5", 1, NULL);
	place("vllm-most", "in-ts", NULL, "vllm/vllm-openai:v0.9.2",
	      "exec vllm serve m --gpu_memory_utilization=0.88", 0,
	      "counted as 70.1Gi: vllm --gpu-memory-utilization 0.88 of this node's 79.6Gi card");
	place("vllm-garbage", "in-ts", NULL, "vllm/vllm-openai:v0.9.2",
	      "vllm serve m --gpu-memory-utilization lots", 0,
	      "container \"tei\": vllm --gpu-memory-utilization \"lots\" is not a ratio");
}

/* The watch cache's per-node gauge counts the inferred pods as the core resolves them (the
 * seven undeclared pods' cards on in-plain; it showed 0 before), and the by-source metric. */
static void test_declared_gauge(void **state)
{
	char *metrics = NULL;

	ITEST_CHECK(world_health_get(&W, "/metrics", &metrics) == 200, "metrics");
	double v =
	    harness_metric(metrics, "gpu_memory_guard_node_declared_bytes", "node=\"in-plain\"", 0);
	ITEST_CHECK(v == 7.0 * 81559 * 1024 * 1024, "in-plain declared %.0f, want 7 cards", v);
	v = harness_metric(metrics, "gpu_memory_guard_pods_by_demand_source",
	                   "source=\"whole-card\"", 0);
	/* the seven, and undeclared pods of the world's own fixtures */
	ITEST_CHECK(v >= 7, "whole-card pods %.0f, want at least 7", v);
	free(metrics);
}

/* --undeclared refuse: the undeclared pod is refused at creation, as before issue 19. */
static void test_strict(void **state)
{
	place("strict", "in-plain", NULL, NULL, NULL, 0, "declares no GPU_MEMORY_LIMIT");
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest both[] = {
	    cmocka_unit_test(test_exclusive_cards),
	    cmocka_unit_test(test_shared_card),
	};
	const struct CMUnitTest strict[] = {cmocka_unit_test(test_strict)};
	const struct CMUnitTest watch_only[] = {cmocka_unit_test(test_declared_gauge)};
	int rc = cmocka_run_group_tests_name("watch cache", both, setup_watch, teardown);
	rc |= cmocka_run_group_tests_name("watch cache: gauges", watch_only, setup_watch, teardown);
	rc |= cmocka_run_group_tests_name("API path", both, setup_off, teardown);
	rc |= cmocka_run_group_tests_name("strict", strict, setup_strict, teardown);
	return rc;
}
