/*
 * Placement paths beyond the fixtures, through the real binary: pods that carry only
 * generateName, the legacy "bindings" resource, declarations refused at pod CREATE (so users
 * learn at kubectl apply), UPDATEs never refused, the per-GPU fit, and pods of an exempt
 * namespace that are never refused but still count as usage.
 *
 * Nodes are 81559 MiB per GPU at threshold 0.9: 71.68Gi per GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "itest.h"

static struct world W;

static int group_setup(void **state)
{
	static const char *const extra[] = {"--exempt-namespace", "team-x", NULL};
	int i;
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	if (world_add_node(&W, "gpu-node-gen", 81559, 1) ||
	    world_add_node(&W, "gpu-node-roomy", 81559, 1) ||
	    world_add_node(&W, "gpu-node-2x", 81559, 2) ||
	    world_add_node(&W, "gpu-node-x", 81559, 1) ||
	    world_add_pod(&W, "team-x", "hog", "60Gi", "gpu-node-x") ||
	    world_add_node(&W, "gpu-node-many", 81559, 1) ||
	    world_add_node(&W, "gpu-node-bound-a", 81559, 1) ||
	    world_add_node(&W, "gpu-node-bound-b", 81559, 1) ||
	    world_add_pod(&W, "inference", "already-bound", "60Gi", "gpu-node-bound-a") ||
	    apiserver_double_put_node(
	        W.api, "{\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-node-exact\","
	               "\"annotations\":{\"gpu-memory-guard.io/gpu-memory\":\"10Gi\","
	               "\"gpu-memory-guard.io/gpu-count\":\"1\","
	               "\"gpu-memory-guard.io/threshold\":\"1\"}}}"))
		return -1;
	/* 1200 pods of 50Mi (58.6Gi) on one node: three pages at the client's limit of 500. */
	for (i = 0; i < 1200; i++) {
		char name[32];
		snprintf(name, sizeof name, "small-%04d", i);
		if (world_add_pod(&W, "batch", name, "50Mi", "gpu-node-many"))
			return -1;
	}
	return world_start_gmg(&W, extra, 30000);
}

static int group_teardown(void **state)
{
	world_free(&W);
	return 0;
}

static cJSON *request_of(cJSON *doc)
{
	return cJSON_GetObjectItemCaseSensitive(doc, "request");
}

static cJSON *object_of(cJSON *doc)
{
	return cJSON_GetObjectItemCaseSensitive(request_of(doc), "object");
}

static cJSON *first_container(cJSON *doc)
{
	return cJSON_GetArrayItem(
	    cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(object_of(doc), "spec"), "containers"),
	    0);
}

static void set_str(cJSON *o, const char *k, const char *v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, k);
	if (v)
		cJSON_AddStringToObject(o, k, v);
}

/* Send doc (consumed) and check the answer. */
static void send_doc(cJSON *doc, const char *uid, int allowed, struct review_answer *a)
{
	char *body = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	itest_review(&W, body, uid, allowed, a);
	cJSON_free(body);
}

/* Two pods that carry only generateName (the same prefix) on one node: distinct pods, so the
 * second must count the first's reservation (40Gi + 40Gi > 71.68Gi). */
static void test_generate_name_only_pods(void **state)
{
	struct review_answer a;
	int i;
	for (i = 0; i < 2; i++) {
		char uid[32], *text;
		cJSON *doc, *md;
		snprintf(uid, sizeof uid, "gen-%d", i);
		text = harness_pod_review(uid, "unused", "40Gi", "gpu-node-gen", 0);
		doc = cJSON_Parse(text);
		free(text);
		md = cJSON_GetObjectItemCaseSensitive(object_of(doc), "metadata");
		set_str(md, "name", NULL);
		set_str(md, "generateName", "worker-");
		set_str(request_of(doc), "name", NULL);
		set_str(md, "uid", uid); /* each pod its own, as the API server gives */
		send_doc(doc, uid, i == 0, &a);
	}
}

/* POST /api/v1/namespaces/NS/bindings: resource "bindings", no subresource. */
static void test_legacy_bindings_resource(void **state)
{
	struct review_answer a;
	const char *nodes[] = {"gpu-node-a", "gpu-node-roomy"};
	int i;
	for (i = 0; i < 2; i++) {
		char uid[32], *text;
		cJSON *doc, *req;
		snprintf(uid, sizeof uid, "legacy-binding-%d", i);
		text = harness_binding_review(uid, "llama-8b-6d5f9c7b8-x2k4q", nodes[i]);
		doc = cJSON_Parse(text);
		free(text);
		req = request_of(doc);
		set_str(cJSON_GetObjectItemCaseSensitive(req, "resource"), "resource", "bindings");
		set_str(cJSON_GetObjectItemCaseSensitive(req, "requestResource"), "resource",
		        "bindings");
		set_str(req, "subResource", NULL);
		set_str(req, "requestSubResource", NULL);
		send_doc(doc, uid, i == 1, &a);
		if (i == 0)
			itest_contains(a.message, "24Gi", "legacy binding: the pod was looked up");
	}
}

/* A Binding of a pod the GET shows already bound reserves nothing (the API server answers 409
 * Conflict, "pod ... is already assigned to node ..."): a reservation would be a phantom that
 * refuses real placements on the Binding's node until its TTL. */
static void test_binding_of_bound_pod_reserves_nothing(void **state)
{
	struct review_answer a;
	char *body = harness_binding_review("rebind", "already-bound", "gpu-node-bound-b");
	itest_review(&W, body, "rebind", 1, &a);
	free(body);
	/* Nothing reserved on gpu-node-bound-b: 70Gi fits its 71.68Gi limit (not a dry run). */
	body = harness_pod_review("rebind-next", "next", "70Gi", "gpu-node-bound-b", 0);
	itest_review(&W, body, "rebind-next", 1, &a);
	free(body);
}

/* An unscheduled pod CREATE whose first container's GPU_MEMORY_LIMIT env is replaced. */
static cJSON *unscheduled_with_env(const char *uid, const cJSON *env_item)
{
	char *text =
	    harness_review_from_fixture("review-pod-create-unscheduled.json", uid, NULL, NULL);
	cJSON *doc = cJSON_Parse(text), *env;
	free(text);
	env = cJSON_GetObjectItemCaseSensitive(first_container(doc), "env");
	cJSON_DeleteItemFromArray(env, 0); /* GPU_MEMORY_LIMIT in the fixture */
	if (env_item)
		cJSON_AddItemToArray(env, cJSON_Duplicate(env_item, 1));
	return doc;
}

static void test_declarations_refused_at_create(void **state)
{
	static const char *const bad[] = {
	    "{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"24GB\"}",
	    "{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"\"}",
	    "{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"-4Gi\"}",
	    "{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"24\"}",
	    "{\"name\":\"GPU_MEMORY_LIMIT\",\"valueFrom\":{\"configMapKeyRef\":{\"name\":\"c\","
	    "\"key\":\"k\"}}}",
	    NULL, /* no declaration at all on a GPU container */
	};
	size_t i;
	struct review_answer a;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char uid[32];
		cJSON *item = bad[i] ? cJSON_Parse(bad[i]) : NULL;
		snprintf(uid, sizeof uid, "bad-decl-%zu", i);
		send_doc(unscheduled_with_env(uid, item), uid, 0, &a);
		itest_contains(a.message, "vllm", "the refusal names the container");
		cJSON_Delete(item);
	}
	/* Accepted forms. */
	{
		static const char *const good[] = {"24Gi", "24G", "25769803776", "1.5Gi"};
		for (i = 0; i < 4; i++) {
			char uid[32], json[128];
			cJSON *item;
			snprintf(uid, sizeof uid, "good-decl-%zu", i);
			snprintf(json, sizeof json,
			         "{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"%s\"}", good[i]);
			item = cJSON_Parse(json);
			send_doc(unscheduled_with_env(uid, item), uid, 1, &a);
			cJSON_Delete(item);
		}
	}
}

/* A container that declares memory but asks for no GPU: allowed, with a warning. */
static void test_declaration_without_gpu_warns(void **state)
{
	struct review_answer a;
	char *text =
	    harness_review_from_fixture("review-pod-create-unscheduled.json", "no-gpu", NULL, NULL);
	cJSON *doc = cJSON_Parse(text), *res;
	free(text);
	res = cJSON_GetObjectItemCaseSensitive(first_container(doc), "resources");
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(res, "limits"),
	                                        "nvidia.com/gpu");
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(res, "requests"),
	                                        "nvidia.com/gpu");
	send_doc(doc, "no-gpu", 1, &a);
	ITEST_CHECK(a.warnings[0] != '\0', "no warning for a declaration without a GPU");
}

/* UPDATE is never refused, even with a declaration that CREATE would refuse. */
static void test_update_with_bad_declaration_allowed(void **state)
{
	struct review_answer a;
	char *text = harness_read_file("review-pod-update.json", NULL);
	cJSON *doc = cJSON_Parse(text), *env;
	free(text);
	set_str(request_of(doc), "uid", "upd-bad");
	env = cJSON_GetObjectItemCaseSensitive(first_container(doc), "env");
	set_str(cJSON_GetArrayItem(env, 0), "value", "lots");
	send_doc(doc, "upd-bad", 1, &a);
}

/* 75Gi on one GPU of a 2-GPU node: the node total would allow it (143Gi), one GPU cannot. */
static void test_per_gpu_fit(void **state)
{
	struct review_answer a;
	char *body = harness_pod_review("per-gpu", "big-one", "75Gi", "gpu-node-2x", 0);
	itest_review(&W, body, "per-gpu", 0, &a);
	itest_contains(a.message, "never fit", "per-GPU denial says it can never fit");
	free(body);
	body = harness_pod_review("per-gpu-ok", "big-two", "70Gi", "gpu-node-2x", 0);
	itest_review(&W, body, "per-gpu-ok", 1, &a);
	free(body);
}

/* team-x is exempt: its 60Gi pod on gpu-node-x still counts for others (60 + 20 > 71.68),
 * while team-x's own placements are never refused. */
static void test_exempt_pods_count_as_usage(void **state)
{
	struct review_answer a;
	char *text, *body;
	cJSON *doc;
	body = harness_pod_review("exempt-other", "other", "20Gi", "gpu-node-x", 0);
	itest_review(&W, body, "exempt-other", 0, &a);
	itest_contains(a.message, "team-x/hog", "the exempt pod is named among consumers");
	free(body);
	text = harness_pod_review("exempt-own", "own", "20Gi", "gpu-node-x", 0);
	doc = cJSON_Parse(text);
	free(text);
	set_str(request_of(doc), "namespace", "team-x");
	send_doc(doc, "exempt-own", 1, &a);
}

/* Every page counts: 58.6Gi listed + 12Gi fits 71.68Gi, + 14Gi does not. Counting only the
 * first page (500 pods, 24.4Gi) would allow both. */
static void test_many_pods_all_pages(void **state)
{
	struct review_answer a;
	char *body;
	unsigned long lists = apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS);
	body = harness_pod_review("many-1", "many-1", "14Gi", "gpu-node-many", 0);
	itest_review(&W, body, "many-1", 0, &a);
	free(body);
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS) - lists >= 3,
	            "1200 pods should take 3 pages");
	body = harness_pod_review("many-2", "many-2", "12Gi", "gpu-node-many", 0);
	itest_review(&W, body, "many-2", 1, &a);
	free(body);
}

/* The boundary: used + demand <= threshold x capacity is allowed, one byte more is not
 * (10Gi node, threshold 1; dry runs, so nothing is reserved between the two). */
static void test_exact_boundary(void **state)
{
	struct review_answer a;
	char *body = harness_pod_review("exact-1", "exact", "10Gi", "gpu-node-exact", 1);
	itest_review(&W, body, "exact-1", 1, &a);
	free(body);
	body = harness_pod_review("exact-2", "exact", "10737418241", "gpu-node-exact", 1);
	itest_review(&W, body, "exact-2", 0, &a);
	free(body);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_generate_name_only_pods),
	    cmocka_unit_test(test_legacy_bindings_resource),
	    cmocka_unit_test(test_binding_of_bound_pod_reserves_nothing),
	    cmocka_unit_test(test_declarations_refused_at_create),
	    cmocka_unit_test(test_declaration_without_gpu_warns),
	    cmocka_unit_test(test_update_with_bad_declaration_allowed),
	    cmocka_unit_test(test_per_gpu_fit),
	    cmocka_unit_test(test_exempt_pods_count_as_usage),
	    cmocka_unit_test(test_many_pods_all_pages),
	    cmocka_unit_test(test_exact_boundary),
	};
	harness_init(argc, argv);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
