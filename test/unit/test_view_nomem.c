/*
 * A node's view that cannot be copied out of the watch cache (view.h: VIEW_ENOMEM, e.g. a node
 * with very many pods and no memory left): the webhook's cache path answers a precise error,
 * 500 "out of memory", with the review's uid, reserves nothing (local ledger, shared record)
 * and does not fall back to the API server; the extender's filter returns EXTENDER_ENOMEM. The
 * API path's live view (view_from_lists) likewise: 500 "out of memory", nothing reserved.
 *
 * This binary is linked with -Wl,--wrap=view_from_cache,--wrap=view_from_lists
 * (CMakeLists.txt): the library's calls fail while view_fails is set, and are the real copy
 * otherwise.
 *
 * The cluster: the fixtures' gpu-node-a (test/data) and its pods but legacy-notebook (40Gi
 * declared of the 71.7Gi limit), in a real watch cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "cache.h"
#include "extender.h"
#include "ledger.h"
#include "log.h"
#include "metrics.h"
#include "shared.h"
#include "view.h"
#include "watch.h"
#include "webhook.h"
#include "fixture.h"
#include "fake_lease.h"
#include "placer_fixture.h"

/* ---- the interposed view_from_cache ---- */

int __real_view_from_cache(void *cache, const char *node, struct view_node *out);
int __wrap_view_from_cache(void *cache, const char *node, struct view_node *out);

static int view_fails; /* the next copies fail */
static int view_calls;

int __wrap_view_from_cache(void *cache, const char *node, struct view_node *out)
{
	view_calls++;
	if (view_fails) {
		memset(out, 0, sizeof(*out));
		return VIEW_ENOMEM;
	}
	return __real_view_from_cache(cache, node, out);
}

int __real_view_from_lists(const char *node, const cJSON *node_obj, const cJSON *pods,
                           const struct view_live_config *cfg, struct view_node *out);
int __wrap_view_from_lists(const char *node, const cJSON *node_obj, const cJSON *pods,
                           const struct view_live_config *cfg, struct view_node *out);

int __wrap_view_from_lists(const char *node, const cJSON *node_obj, const cJSON *pods,
                           const struct view_live_config *cfg, struct view_node *out)
{
	view_calls++;
	if (view_fails) {
		memset(out, 0, sizeof(*out));
		return VIEW_ENOMEM;
	}
	return __real_view_from_lists(node, node_obj, pods, cfg, out);
}

/* ---- an API server that must not be asked ---- */

static int api_calls;

static int no_get_pod(void *ctx, const char *ns, const char *name, cJSON **pod, long *code,
                      char *err, size_t errlen)
{
	(void)ctx, (void)ns, (void)name, (void)pod;
	api_calls++;
	*code = 0;
	snprintf(err, errlen, "not asked in this test");
	return KUBE_ETRANSPORT;
}

static int no_get_node(void *ctx, const char *name, cJSON **node, long *code, char *err,
                       size_t errlen)
{
	(void)ctx, (void)name, (void)node;
	api_calls++;
	*code = 0;
	snprintf(err, errlen, "not asked in this test");
	return KUBE_ETRANSPORT;
}

static int no_list(void *ctx, const char *node, cJSON **items, long *code, char *err, size_t errlen)
{
	(void)ctx, (void)node, (void)items;
	api_calls++;
	*code = 0;
	snprintf(err, errlen, "not asked in this test");
	return KUBE_ETRANSPORT;
}

static uint64_t wall(void)
{
	return 1800000000000ull;
}

struct env {
	struct cache *cache;
	struct ledger *ledger;
	struct metrics *metrics;
	struct fake_lease *leases;
	struct shared *shared;
	struct webhook *w;
};

static int setup(void **state)
{
	static struct env e;
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	cJSON *node = fixture_json("node-gpu-node-a.json");
	cJSON *list = fixture_json("podlist-gpu-node-a.json"), *pod;

	memset(&e, 0, sizeof(e));
	log_set_fd(devnull);
	e.cache = cache_new(&(struct demand_config){.gpu_resources = NULL}, NULL, NULL);
	assert_non_null(e.cache);
	assert_int_equal(cache_apply_node(e.cache, WATCH_ADDED, node), 0);
	cJSON_ArrayForEach(pod, cJSON_GetObjectItemCaseSensitive(list, "items"))
	{
		const cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
		if (strcmp(cJSON_GetObjectItemCaseSensitive(md, "name")->valuestring,
		           "legacy-notebook") != 0) /* room left: 40Gi of the 71.7Gi limit */
			assert_int_equal(cache_apply_pod(e.cache, WATCH_ADDED, pod), 0);
	}
	cJSON_Delete(node);
	cJSON_Delete(list);
	e.ledger = ledger_new(60000);
	e.metrics = metrics_new();
	view_fails = 0;
	view_calls = 0;
	api_calls = 0;
	*state = &e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	webhook_free(e->w);
	shared_free(e->shared);
	if (e->leases != NULL)
		fake_lease_free(e->leases);
	ledger_free(e->ledger);
	metrics_free(e->metrics);
	cache_free(e->cache);
	return 0;
}

static void webhook_on_cache(struct env *e, int shared)
{
	struct webhook_config cfg = {.threshold = 0.9, .warn_threshold = 0.8, .cache = e->cache};
	struct placer_source src = {NULL, no_get_pod, no_get_node, no_list};

	if (shared) {
		struct shared_api api;
		e->leases = fake_lease_new();
		api = fake_lease_api(e->leases);
		e->shared = shared_new("gmg-system", &api, 60000, wall);
		assert_non_null(e->shared);
		cfg.shared = e->shared;
	}
	e->w = webhook_new(&cfg, &src, e->ledger, e->metrics);
	assert_non_null(e->w);
}

/* Review the fixture (a pod CREATE with spec.nodeName gpu-node-a, 12Gi): the answer's
 * response, its uid checked. */
static cJSON *review(struct env *e, int *allowed, int *code, char *message, size_t cap)
{
	char *body = fixture_read("review-pod-create-nodename.json", NULL);
	char *out = NULL, err[WEBHOOK_ERR_MAX];
	size_t len = 0;
	int rc = webhook_review(e->w, body, strlen(body), &out, &len, err, sizeof(err));

	free(body);
	if (rc != 0)
		fail_msg("webhook_review: %d %s", rc, err);
	cJSON *root = cJSON_Parse(out);
	free(out);
	assert_non_null(root);
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(resp, "uid")->valuestring,
	                    "a1b2c3d4-0002-4000-8000-000000000002");
	*allowed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed"));
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(resp, "status");
	*code = status ? cJSON_GetObjectItemCaseSensitive(status, "code")->valueint : 200;
	const cJSON *m = status ? cJSON_GetObjectItemCaseSensitive(status, "message") : NULL;
	snprintf(message, cap, "%s", cJSON_IsString(m) ? m->valuestring : "");
	return root;
}

static void expect_nomem_then_decided(struct env *e)
{
	char message[512];
	int allowed, code;
	cJSON *a;

	view_fails = 1;
	a = review(e, &allowed, &code, message, sizeof(message));
	assert_false(allowed);
	assert_int_equal(code, 500);
	assert_string_equal(message, "cannot check inference/embedder-0: out of memory");
	assert_true(view_calls >= 1);
	assert_int_equal(api_calls, 0); /* no fallback to the API path */
	assert_int_equal(ledger_size(e->ledger), 0);
	if (e->leases != NULL)
		assert_int_equal(e->leases->creates + e->leases->updates, 0);
	cJSON_Delete(a);

	/* The copy works again: the same review is decided from the cache (it fits). */
	view_fails = 0;
	a = review(e, &allowed, &code, message, sizeof(message));
	if (!allowed)
		fail_msg("denied %d: %s", code, message);
	assert_int_equal(api_calls, 0);
	if (e->leases != NULL)
		assert_int_equal(e->leases->creates + e->leases->updates, 1);
	else
		assert_int_equal(ledger_size(e->ledger), 1);
	cJSON_Delete(a);
}

static void test_webhook_local_ledger(void **state)
{
	struct env *e = *state;
	webhook_on_cache(e, 0);
	expect_nomem_then_decided(e);
}

static void test_webhook_shared_record(void **state)
{
	struct env *e = *state;
	webhook_on_cache(e, 1);
	expect_nomem_then_decided(e);
}

/* ---- the API path (--cache off): the fixtures' node and pods but legacy-notebook ---- */

static int api_get_node(void *ctx, const char *name, cJSON **node, long *code, char *err,
                        size_t errlen)
{
	(void)ctx, (void)name, (void)err, (void)errlen;
	api_calls++;
	*node = fixture_json("node-gpu-node-a.json");
	*code = 200;
	return 0;
}

static int api_list(void *ctx, const char *node, cJSON **items, long *code, char *err,
                    size_t errlen)
{
	cJSON *list = fixture_json("podlist-gpu-node-a.json");

	(void)ctx, (void)node, (void)err, (void)errlen;
	api_calls++;
	*items = cJSON_DetachItemFromObjectCaseSensitive(list, "items");
	cJSON_DeleteItemFromArray(*items, 3); /* legacy-notebook */
	cJSON_Delete(list);
	*code = 200;
	return 0;
}

static void test_webhook_api_path(void **state)
{
	struct env *e = *state;
	struct webhook_config cfg = {.threshold = 0.9, .warn_threshold = 0.8};
	struct placer_source src = {NULL, no_get_pod, api_get_node, api_list};
	char message[512];
	int allowed, code;

	e->w = webhook_new(&cfg, &src, e->ledger, e->metrics);
	assert_non_null(e->w);
	view_fails = 1;
	cJSON *a = review(e, &allowed, &code, message, sizeof(message));
	assert_false(allowed);
	assert_int_equal(code, 500);
	assert_string_equal(message, "cannot check inference/embedder-0: out of memory");
	assert_int_equal(view_calls, 1);
	assert_int_equal(api_calls, 2); /* GET node, LIST */
	assert_int_equal(ledger_size(e->ledger), 0);
	cJSON_Delete(a);
	view_fails = 0;
	a = review(e, &allowed, &code, message, sizeof(message));
	if (!allowed)
		fail_msg("denied %d: %s", code, message);
	assert_int_equal(ledger_size(e->ledger), 1);
	cJSON_Delete(a);
}

/* The extender: a filter whose node's view cannot be copied fails with EXTENDER_ENOMEM (the
 * server answers 500), holds nothing, and the next filter judges the node. */
static void test_extender_filter(void **state)
{
	struct env *e = *state;
	static const struct demand_config dcfg = {.gpu_resources = NULL};
	struct placer_config pc = placer_fixture_config(e->cache, e->ledger, &dcfg);
	struct placer *pl = placer_new(&pc);
	struct extender_config cfg = {.placer = pl};
	struct extender *x = extender_new(&cfg, e->metrics);
	const char *body =
	    "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"u-p\"},"
	    "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
	    "\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":"
	    "\"1Gi\"}]}]}},\"NodeNames\":[\"gpu-node-a\"]}";
	char *out = NULL, err[EXTENDER_ERR_MAX] = "";
	size_t len = 0;

	assert_non_null(x);
	view_fails = 1;
	assert_int_equal(
	    extender_handle(x, EXTENDER_FILTER, body, strlen(body), &out, &len, err, sizeof(err)),
	    EXTENDER_ENOMEM);
	assert_null(out);
	assert_true(view_calls >= 1);
	view_fails = 0;
	assert_int_equal(
	    extender_handle(x, EXTENDER_FILTER, body, strlen(body), &out, &len, err, sizeof(err)),
	    0);
	if (strstr(out, "\"NodeNames\":[\"gpu-node-a\"]") == NULL)
		fail_msg("%s", out);
	free(out);
	extender_free(x);
	placer_free(pl);
	assert_int_equal(placer_fixture_api_calls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_webhook_local_ledger, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_webhook_shared_record, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_extender_filter, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_webhook_api_path, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
