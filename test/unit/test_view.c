/*
 * Unit tests for lib/cluster/view: a node's snapshot copied out of the watch cache. The copy
 * equals the cache's own view (cache_with_node) field by field, pods' keys, uids, priority
 * classes, labels and shares included, and stays whole after the cache is freed (ASan catches
 * a pointer left into the store), a DRA pod's figures too; an unknown node;
 * view_placement_node; clearing twice.
 * The live backend (view_from_lists): over the same Node and pod list it equals the cache's
 * view (one rule makes a pod an item); finished pods, pods asking no GPU, mirror pods,
 * declared and undeclared pods, pods without a uid or a name; the listed keys and uids; a
 * node whose capacity is unknown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "demand.h"
#include "view.h"
#include "watch.h"

#include "fixture.h"

/* What a test compares: the view as strings and numbers, by value. */
#define SEEN_PODS 8
struct seen {
	char name[64], error[CAPACITY_MSG_MAX];
	int known, capacity_rc, n_labels;
	uint64_t total_bytes, declared, undeclared;
	size_t n_pods;
	char keys[SEEN_PODS][CACHE_KEY_MAX], uids[SEEN_PODS][CACHE_UID_MAX];
	char pcs[SEEN_PODS][64], label0[SEEN_PODS][128];
	uint64_t bytes[SEEN_PODS], gpus[SEEN_PODS], share_bytes[SEEN_PODS];
	size_t n_shares[SEEN_PODS];
};

static void record(const char *name, int known, const struct gpupolicy_labels *labels,
                   int capacity_rc, const struct capacity *cap, const char *error,
                   const struct placement_item *pods, size_t n_pods, uint64_t declared,
                   uint64_t undeclared, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->error, sizeof(s->error), "%s", error);
	s->known = known;
	s->capacity_rc = capacity_rc;
	s->n_labels = labels ? (int)labels->n : -1;
	s->total_bytes = cap ? cap->total_bytes : 0;
	s->declared = declared;
	s->undeclared = undeclared;
	s->n_pods = n_pods;
	assert_true(n_pods <= SEEN_PODS);
	for (size_t i = 0; i < n_pods; i++) {
		const struct placement_item *it = &pods[i];

		snprintf(s->keys[i], sizeof(s->keys[i]), "%s", it->key);
		snprintf(s->uids[i], sizeof(s->uids[i]), "%s", it->uid ? it->uid : "(null)");
		snprintf(s->pcs[i], sizeof(s->pcs[i]), "%s",
		         it->priority_class ? it->priority_class : "(null)");
		if (it->labels != NULL && it->labels->n > 0)
			snprintf(s->label0[i], sizeof(s->label0[i]), "%s=%s", it->labels->kv[0],
			         it->labels->kv[1]);
		s->bytes[i] = it->bytes;
		s->gpus[i] = it->undeclared_gpus;
		s->n_shares[i] = it->n_shares;
		if (cap != NULL && it->shares != NULL)
			s->share_bytes[i] = demand_shares_bytes(it->shares, it->n_shares, cap);
	}
}

static void seen_cache(void *ctx, const struct cache_node_view *v)
{
	record(v->name, v->known, v->labels, v->capacity_rc, v->cap, v->capacity_error, v->pods,
	       v->n_pods, v->declared_bytes, v->undeclared_gpus, ctx);
}

static void seen_view(const struct view_node *v, struct seen *s)
{
	assert_non_null(v->capacity_error);
	record(v->name, v->known, v->labels, v->capacity_rc, v->cap, v->capacity_error, v->pods,
	       v->n_pods, v->declared_bytes, v->undeclared_gpus, s);
}

/* The fixture node and its pods (one with a priority class), under --undeclared infer (the
 * pods without a declaration get shares). */
static struct cache *filled(void)
{
	static const struct demand_config dcfg = {.infer = 1};
	struct cache *c = cache_new(&dcfg, NULL, NULL);
	cJSON *node = fixture_json("node-gpu-node-a.json");
	cJSON *list = fixture_json("podlist-gpu-node-a.json");
	const cJSON *pod;
	int i = 0;

	assert_non_null(c);
	assert_int_equal(cache_apply_node(c, WATCH_ADDED, node), 0);
	cJSON_ArrayForEach(pod, cJSON_GetObjectItemCaseSensitive(list, "items"))
	{
		if (i++ == 0)
			cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
			                        "priorityClassName", "realtime");
		assert_int_equal(cache_apply_pod(c, WATCH_ADDED, pod), 0);
	}
	cJSON_Delete(node);
	cJSON_Delete(list);
	return c;
}

static void test_copy_equals_the_cache_and_outlives_it(void **state)
{
	struct cache *c = filled();
	struct seen want, got;
	struct view_node v;

	(void)state;
	cache_with_node(c, "gpu-node-a", seen_cache, &want);
	assert_int_equal(view_from_cache(c, "gpu-node-a", &v), 0);
	cache_free(c); /* the copy holds nothing of the store's */
	seen_view(&v, &got);
	assert_true(want.known);
	assert_true(want.n_pods >= 3);
	assert_true(want.n_labels > 0);
	assert_string_equal(want.pcs[0], "realtime");
	assert_true(want.label0[0][0] != '\0');
	int some_shares = 0;
	for (size_t i = 0; i < want.n_pods; i++)
		some_shares |= want.n_shares[i] > 0;
	assert_true(some_shares);
	assert_memory_equal(&got, &want, sizeof(want));
	view_node_clear(&v);
	view_node_clear(&v); /* cleared: a no-op */
}

static void test_unknown_node(void **state)
{
	struct cache *c = filled();
	struct seen want, got;
	struct view_node v;

	(void)state;
	cache_with_node(c, "nowhere", seen_cache, &want);
	assert_int_equal(view_from_cache(c, "nowhere", &v), 0);
	seen_view(&v, &got);
	assert_false(got.known);
	assert_int_equal(got.n_pods, 0);
	assert_null(v.cap);
	assert_null(v.labels);
	assert_memory_equal(&got, &want, sizeof(want));
	view_node_clear(&v);
	cache_free(c);
}

static void test_placement_node(void **state)
{
	struct cache *c = filled();
	struct view_node v;
	struct placement_node pn;
	struct placement_item resv = {.key = "ml/r", .bytes = 1};
	struct capacity merged;

	(void)state;
	assert_int_equal(view_from_cache(c, "gpu-node-a", &v), 0);
	merged = *v.cap;
	view_placement_node(&v, &merged, &resv, 1, NULL, &pn);
	assert_string_equal(pn.name, "gpu-node-a");
	assert_ptr_equal(pn.cap, &merged);
	assert_ptr_equal(pn.pods, v.pods);
	assert_int_equal(pn.n_pods, v.n_pods);
	assert_ptr_equal(pn.reserved, &resv);
	assert_int_equal(pn.n_reserved, 1);
	assert_null(pn.dra);
	view_node_clear(&v);
	cache_free(c);
}

/* A DRA pod's containers' own figures (item.dra_figs: no GPU resource, a claim's container
 * declaring 30Gi) are copied too: the copy's item points into the copy, not into the cache's pod,
 * so the figures outlive the cache (a pod deleted meanwhile; ASan: heap-use-after-free). */
static void test_dra_figures_copied(void **state)
{
	static const char pod[] =
	    "{\"metadata\":{\"name\":\"fig\",\"namespace\":\"ml\",\"uid\":"
	    "\"11111111-0000-4000-8000-0000000000f1\"},\"spec\":{\"nodeName\":\"gpu-node-a\","
	    "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"c\"}],\"containers\":[{"
	    "\"name\":\"main\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]},\"env\":[{\"name\":"
	    "\"GPU_MEMORY_LIMIT\",\"value\":\"30Gi\"}]}]}}";
	struct cache *c = filled();
	cJSON *j = cJSON_Parse(pod);
	struct view_node v;
	const struct placement_item *fig = NULL;

	(void)state;
	assert_non_null(j);
	assert_int_equal(cache_apply_pod(c, WATCH_ADDED, j), 0);
	cJSON_Delete(j);
	assert_int_equal(view_from_cache(c, "gpu-node-a", &v), 0);
	cache_free(c);
	for (size_t i = 0; i < v.n_pods; i++)
		if (strcmp(v.pods[i].key, "ml/fig") == 0)
			fig = &v.pods[i];
	assert_non_null(fig);
	assert_int_equal(fig->n_dra_figs, 1);
	assert_non_null(fig->dra_figs);
	assert_true(fig->dra_figs[0].bytes == 30ull * 1024 * 1024 * 1024);
	view_node_clear(&v);
}

/* The fixture's pods, the first with a priority class (as filled() gives the cache). */
static cJSON *fixture_pods(cJSON *list)
{
	cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items");
	cJSON_AddStringToObject(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(items, 0), "spec"),
	    "priorityClassName", "realtime");
	return items;
}

static void test_lists_equal_the_cache(void **state)
{
	static const struct demand_config dcfg = {.infer = 1};
	const struct view_live_config cfg = {&dcfg, 1};
	struct cache *c = filled();
	cJSON *node = fixture_json("node-gpu-node-a.json");
	cJSON *list = fixture_json("podlist-gpu-node-a.json");
	struct seen want, got;
	struct view_node v;

	(void)state;
	cache_with_node(c, "gpu-node-a", seen_cache, &want);
	assert_int_equal(view_from_lists("gpu-node-a", node, fixture_pods(list), &cfg, &v), 0);
	cJSON_Delete(node);
	cJSON_Delete(list); /* the view holds nothing of the lists */
	seen_view(&v, &got);
	assert_true(want.n_pods >= 3);
	assert_string_equal(got.pcs[0], "realtime");
	assert_memory_equal(&got, &want, sizeof(want));
	for (size_t i = 0; i < v.n_pods; i++)
		assert_true(v.pods[i].attrs_known);
	view_node_clear(&v);
	view_node_clear(&v);
	cache_free(c);
}

/* A GPU pod declaring bytes, as a JSON text (uid NULL: none; name NULL: none). */
static cJSON *gpu_pod(const char *name, const char *uid, const char *declared, int mirror)
{
	char text[1024];

	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"namespace\":\"ml\"%s%s%s%s%s%s%s},"
	         "\"spec\":{\"nodeName\":\"gpu-node-a\",\"containers\":[{\"name\":\"c\","
	         "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}},"
	         "\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"%s\"}]}]},"
	         "\"status\":{\"phase\":\"Running\"}}",
	         name ? ",\"name\":\"" : "", name ? name : "", name ? "\"" : "",
	         uid ? ",\"uid\":\"" : "", uid ? uid : "", uid ? "\"" : "",
	         mirror ? ",\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"}" : "",
	         declared);
	cJSON *pod = cJSON_Parse(text);
	assert_non_null(pod);
	return pod;
}

/* The live backend (the API path) reads a DRA pod's containers' own figures as the cache does:
 * a pod asking no GPU resource whose container naming a claim declares 30Gi is an item with that
 * figure (the shared-device rule and the claims' bytes read them from the node's items). */
static void test_lists_dra_figures(void **state)
{
	static const char pod[] =
	    "{\"metadata\":{\"name\":\"fig\",\"namespace\":\"ml\",\"uid\":"
	    "\"11111111-0000-4000-8000-0000000000f1\"},\"spec\":{\"nodeName\":\"gpu-node-a\","
	    "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"c\"}],\"containers\":[{"
	    "\"name\":\"main\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]},\"env\":[{\"name\":"
	    "\"GPU_MEMORY_LIMIT\",\"value\":\"30Gi\"}]}]}}";
	static const struct demand_config dcfg = {.infer = 0};
	const struct view_live_config cfg = {&dcfg, 0};
	cJSON *node = fixture_json("node-gpu-node-a.json");
	cJSON *items = cJSON_CreateArray();
	const struct placement_item *fig = NULL;
	struct view_node v;

	(void)state;
	assert_non_null(items);
	cJSON_AddItemToArray(items, cJSON_Parse(pod));
	assert_int_equal(view_from_lists("gpu-node-a", node, items, &cfg, &v), 0);
	for (size_t i = 0; i < v.n_pods; i++)
		if (strcmp(v.pods[i].key, "ml/fig") == 0)
			fig = &v.pods[i];
	assert_non_null(fig);
	assert_string_equal(fig->uid, "11111111-0000-4000-8000-0000000000f1");
	assert_int_equal(fig->n_dra_figs, 1);
	assert_non_null(fig->dra_figs);
	assert_true(fig->dra_figs[0].bytes == 30ull * 1024 * 1024 * 1024);
	cJSON_Delete(node);
	cJSON_Delete(items);
	view_node_clear(&v);
}

static void test_lists_pods(void **state)
{
	static const struct demand_config dcfg = {.infer = 0};
	const struct view_live_config cfg = {&dcfg, 0};
	cJSON *node = fixture_json("node-gpu-node-a.json");
	cJSON *list = fixture_json("podlist-gpu-node-a.json");
	cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items");
	struct view_node v;
	const uint64_t gi = 1024ull * 1024 * 1024;

	(void)state;
	cJSON_AddItemToArray(items,
	                     gpu_pod("static-0", "22222222-0000-4000-8000-000000000001", "5Gi", 1));
	cJSON_AddItemToArray(items, gpu_pod("no-uid", NULL, "3Gi", 0));
	cJSON_AddItemToArray(items,
	                     gpu_pod(NULL, "22222222-0000-4000-8000-000000000003", "2Gi", 0));
	assert_int_equal(view_from_lists("gpu-node-a", node, items, &cfg, &v), 0);
	assert_string_equal(v.name, "gpu-node-a");
	assert_true(v.known);
	assert_int_equal(v.capacity_rc, 0);
	assert_non_null(v.cap);
	assert_string_equal(v.capacity_error, "");
	assert_non_null(v.labels);
	/* chat-7b-0, chat-7b-1 (20Gi each), legacy-notebook (undeclared: 1 GPU), the mirror
	 * pod, the pod without a uid and the unnamed one; not the finished batch job nor the
	 * log shipper (no GPU) */
	assert_int_equal(v.n_pods, 6);
	static const char *const keys[] = {
	    "inference/chat-7b-0", "inference/chat-7b-1", "inference/legacy-notebook",
	    "ml/static-0",         "ml/no-uid",           "(unnamed pod)"};
	static const char *const uids[] = {"11111111-0000-4000-8000-000000000001",
	                                   "11111111-0000-4000-8000-000000000002",
	                                   "11111111-0000-4000-8000-000000000004",
	                                   "22222222-0000-4000-8000-000000000001",
	                                   NULL,
	                                   "22222222-0000-4000-8000-000000000003"};
	static const uint64_t bytes[] = {20, 20, 0, 5, 3, 2};
	for (size_t i = 0; i < 6; i++) {
		const struct placement_item *it = &v.pods[i];
		assert_string_equal(it->key, keys[i]);
		if (uids[i] == NULL)
			assert_null(it->uid);
		else
			assert_string_equal(it->uid, uids[i]);
		assert_int_equal(it->bytes, bytes[i] * gi);
		assert_int_equal(it->undeclared_gpus, i == 2 ? 1 : 0);
		assert_false(it->attrs_known); /* cfg.attrs 0 */
		assert_null(it->labels);
		assert_null(it->priority_class);
	}
	assert_int_equal(v.declared_bytes, 50 * gi);
	assert_int_equal(v.undeclared_gpus, 1);
	/* every named pod is listed, for settling reservations: the finished and the non-GPU
	 * ones too; the unnamed one cannot match a reservation */
	assert_int_equal(v.n_listed, 7);
	static const char *const listed[] = {"inference/chat-7b-0",
	                                     "inference/chat-7b-1",
	                                     "inference/batch-summarize-x7",
	                                     "inference/legacy-notebook",
	                                     "observability/log-shipper-abcde",
	                                     "ml/static-0",
	                                     "ml/no-uid"};
	for (size_t i = 0; i < 7; i++)
		assert_string_equal(v.listed_keys[i], listed[i]);
	assert_string_equal(v.listed_uids[2], "11111111-0000-4000-8000-000000000003");
	assert_string_equal(v.listed_uids[4], "11111111-0000-4000-8000-000000000005");
	assert_null(v.listed_uids[6]);
	cJSON_Delete(node);
	cJSON_Delete(list);
	view_node_clear(&v);
}

static void test_lists_unknown_capacity(void **state)
{
	static const struct demand_config dcfg = {.infer = 0};
	const struct view_live_config cfg = {&dcfg, 1};
	cJSON *node = cJSON_Parse("{\"metadata\":{\"name\":\"cpu-1\"}}");
	cJSON *pods = cJSON_CreateArray();
	struct view_node v;

	(void)state;
	assert_int_equal(view_from_lists("cpu-1", node, pods, &cfg, &v), 0);
	assert_true(v.known);
	assert_int_not_equal(v.capacity_rc, 0);
	assert_null(v.cap);
	assert_true(v.capacity_error[0] != '\0');
	assert_int_equal(v.n_pods, 0);
	assert_int_equal(v.n_listed, 0);
	assert_non_null(v.labels);
	assert_int_equal(v.labels->n, 0);
	cJSON_Delete(node);
	cJSON_Delete(pods);
	view_node_clear(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_copy_equals_the_cache_and_outlives_it),
	    cmocka_unit_test(test_dra_figures_copied),
	    cmocka_unit_test(test_unknown_node),
	    cmocka_unit_test(test_placement_node),
	    cmocka_unit_test(test_lists_equal_the_cache),
	    cmocka_unit_test(test_lists_pods),
	    cmocka_unit_test(test_lists_dra_figures),
	    cmocka_unit_test(test_lists_unknown_capacity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
