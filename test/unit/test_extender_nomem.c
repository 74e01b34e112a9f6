/*
 * Out of memory at every allocation of a filter / prioritize call (and of placer_fit
 * alone), over a world with reservations (one carrying a DRA claim), pods in flight, a DRA
 * store and a GPUMemoryPolicy. The Nth malloc / calloc / realloc / strdup / strndup made by
 * the library (ld --wrap, CMakeLists.txt) fails, N = 1, 2, ... until a call makes no failing
 * allocation. Each call must return 0 with valid JSON or EXTENDER_ENOMEM, never crash; nothing
 * may leak (LeakSanitizer in the ASan build).
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
#include "dra.h"
#include "drastore.h"
#include "extender.h"
#include "fixture.h"
#include "ledger.h"
#include "metrics.h"
#include "placement.h"
#include "placer_fixture.h"
#include "policies.h"
#include "watch.h"

#define GIB (1024ull * 1024ull * 1024ull)

#include "failing_alloc.h"

/* ---- the world ---- */
static int fresh(void *ctx, double now)
{
	(void)ctx, (void)now;
	return 1;
}

static struct cache *cache;
static struct ledger *ledger;
static struct metrics *metrics;
static struct dra_store *dra;
static struct policies *pols;
static struct demand_config dcfg;
static struct placer *pl;
static struct extender *x;

static void apply_pod(const char *text)
{
	cJSON *j = cJSON_Parse(text);
	assert_non_null(j);
	assert_int_equal(cache_apply_pod(cache, WATCH_ADDED, j), 0);
	cJSON_Delete(j);
}

static void apply_node(const char *name, const char *mem)
{
	char text[1024];
	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"%s\",\"uid\":\"%s\",\"labels\":{\"pool\":\"a\"},"
	         "\"annotations\":{\"gpu-memory-guard.io/gpu-memory\":\"%s\","
	         "\"gpu-memory-guard.io/gpu-count\":\"1\"}},\"status\":{\"allocatable\":{"
	         "\"nvidia.com/gpu\":\"1\"}}}",
	         name, name, mem);
	cJSON *j = cJSON_Parse(text);
	assert_int_equal(cache_apply_node(cache, WATCH_ADDED, j), 0);
	cJSON_Delete(j);
}

#define POD(name, uid, limit, node)                                                                \
	"{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ml\",\"uid\":\"" uid "\","           \
	"\"labels\":{\"app\":\"x\"}},\"spec\":{" node "\"containers\":[{\"name\":\"c\","           \
	"\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":"                \
	"\"GPU_MEMORY_LIMIT\",\"value\":\"" limit "\"}]}]},\"status\":{\"phase\":\"Pending\"}}"

static int setup(void **state)
{
	(void)state;
	char err[256];
	cache = cache_new(&(struct demand_config){.gpu_resources = NULL}, NULL, NULL);
	ledger = ledger_new(60000);
	metrics = metrics_new();
	dra = dra_store_new(NULL, NULL, NULL);
	assert_non_null(cache);
	assert_non_null(dra);
	apply_node("n-a", "80Gi");
	apply_node("n-b", "80Gi");
	apply_node("gpu-dra-0", "80Gi");
	apply_pod(POD("resident", "uid-res", "30Gi", "\"nodeName\":\"n-a\","));
	apply_pod(POD("me", "uid-me", "10Gi", ""));
	apply_pod(POD("held", "uid-held", "12Gi", ""));
	char *slice = fixture_read("dra/slice-gpu-dra-0.json", NULL);
	assert_non_null(slice);
	cJSON *j = cJSON_Parse(slice);
	assert_int_equal(dra_store_apply_slice(dra, WATCH_ADDED, j, err, sizeof(err)), 0);
	cJSON_Delete(j);
	free(slice);
	struct ledger_node *ln = ledger_lock(ledger, "n-a");
	uint64_t now = ledger_now_ms();
	assert_int_equal(
	    ledger_reserve_claim(ln, "ml/r1", "uid-r1", "claim-uid", 5 * GIB, 0, now, now), 0);
	assert_int_equal(ledger_reserve_uid(ln, "ml/r2", "uid-r2", 3 * GIB, now), 0);
	ledger_unlock(ln);
	pols = policies_new();
	j = cJSON_Parse(
	    "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"threshold\":0.8,"
	    "\"mode\":\"enforce\",\"nodeSelector\":{\"matchLabels\":{\"pool\":\"a\"}}}}");
	policies_resync_begin(pols);
	assert_int_equal(policies_apply(pols, WATCH_ADDED, j), 0);
	policies_resync_end(pols, 1);
	cJSON_Delete(j);
	struct placer_config pc = placer_fixture_config(cache, ledger, &dcfg);
	pc.cache_fresh = fresh;
	pc.dra = dra;
	pc.policies = pols;
	pl = placer_new(&pc);
	assert_non_null(pl);
	struct extender_config cfg = {.placer = pl};
	x = extender_new(&cfg, metrics);
	assert_non_null(x);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fail_at = -1;
	extender_free(x);
	placer_free(pl);
	policies_free(pols);
	dra_store_free(dra);
	cache_free(cache);
	ledger_free(ledger);
	metrics_free(metrics);
	assert_int_equal(placer_fixture_api_calls, 0);
	return 0;
}

static char *args(const char *pod)
{
	char *text = malloc(8192);
	snprintf(text, 8192, "{\"Pod\":%s,\"NodeNames\":[\"n-a\",\"n-b\",\"gpu-dra-0\",\"zz\"]}",
	         pod);
	return text;
}

static void sweep(enum extender_verb verb, const char *body)
{
	for (long k = 1; k < 100000; k++) {
		char *out = NULL, err[EXTENDER_ERR_MAX] = "";
		size_t len = 0;
		n_alloc = 0;
		n_failed = 0;
		fail_at = k;
		int rc = extender_handle(x, verb, body, strlen(body), &out, &len, err, sizeof(err));
		fail_at = -1;
		if (rc == 0) {
			cJSON *a = cJSON_Parse(out);
			if (a == NULL)
				fail_msg("allocation %ld failed: answer not JSON: %s", k, out);
			cJSON_Delete(a);
		} else if (rc != EXTENDER_ENOMEM) {
			fail_msg("allocation %ld failed: rc %d (%s)", k, rc, err);
		}
		free(out);
		if (n_failed == 0) {
			print_message("verb %d: %ld allocations swept\n", (int)verb, k - 1);
			return;
		}
	}
	fail_msg("sweep did not end");
}

static void test_filter_nomem(void **state)
{
	(void)state;
	/* a filter that holds "held" on the nodes it passes first (its hold counts below) */
	char *h = args(POD("held", "uid-held", "12Gi", ""));
	char *out = NULL, err[EXTENDER_ERR_MAX];
	size_t len;
	assert_int_equal(
	    extender_handle(x, EXTENDER_FILTER, h, strlen(h), &out, &len, err, sizeof(err)), 0);
	free(out);
	free(h);
	char *body = args(POD("me", "uid-me", "10Gi", ""));
	sweep(EXTENDER_FILTER, body);
	sweep(EXTENDER_PRIORITIZE, body);
	free(body);
	/* a DRA pod too */
	body =
	    args("{\"metadata\":{\"name\":\"d\",\"namespace\":\"ml\",\"uid\":\"uid-d\"},"
	         "\"spec\":{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"c\"}],"
	         "\"containers\":[{\"name\":\"m\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]},"
	         "\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"10Gi\"}]}]}}");
	sweep(EXTENDER_FILTER, body);
	free(body);
}

static void test_placer_fit_nomem(void **state)
{
	(void)state;
	cJSON *pod = cJSON_Parse(POD("me", "uid-me", "10Gi", ""));
	struct demand d;
	assert_int_equal(demand_from_pod(pod, &dcfg, &d), 0);
	struct placement_item fl[2] = {{.key = "ml/f1", .uid = "uid-f1", .bytes = GIB},
	                               {.key = "ml/r2", .uid = "uid-r2", .bytes = GIB}};
	struct placer_pod pp = {.pod_name = "ml/me",
	                        .ns = "ml",
	                        .key = "ml/me",
	                        .uid = "uid-me",
	                        .node = "n-a",
	                        .demand = &d,
	                        .dry_run = 1};
	for (long k = 1; k < 100000; k++) {
		struct placer_fit f;
		n_alloc = 0;
		n_failed = 0;
		fail_at = k;
		enum placer_fit_state st = placer_fit(pl, &pp, fl, 2, 1, &f);
		fail_at = -1;
		if (n_failed > 0 && st != PLACER_FIT_ENOMEM)
			fail_msg("allocation %ld failed: state %d", k, (int)st);
		if (n_failed == 0) {
			assert_int_equal(st, PLACER_FIT_JUDGED);
			assert_int_equal(f.n_in_flight, 1); /* uid-r2 is reserved already */
			placer_fit_clear(&f);
			print_message("placer_fit: %ld allocations swept\n", k - 1);
			break;
		}
		placer_fit_clear(&f);
	}
	cJSON_Delete(pod);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_filter_nomem, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_placer_fit_nomem, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
