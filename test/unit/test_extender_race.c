/*
 * The extender's read order against a pod whose Binding lands while a node is judged (issue 23's
 * view copy). A hold (holds.h) ends when the watch cache shows its pod bound: holds_prune(),
 * run at the start of every filter call. A node judged by reading the cache before the holds
 * can miss such a pod twice: the copy was taken before the Binding reached the cache, and the
 * hold was pruned (by another filter call) before the holds were read. Read in the documented
 * order (extender.h: the holds, then the reservations and the view), one of the two counts it.
 *
 * The interleaving is made deterministic with the linker: this binary is linked with
 * -Wl,--wrap=holds_each (CMakeLists.txt), so when armed, the extender's holds_each() first
 * runs what another thread would: the informer applies the pod's Binding to the cache, and
 * another filter call (which prunes the holds the cache shows settled) runs. The engine
 * (placer_fit) then reads the reservations and the cache's view after the holds.
 *
 * The cluster: n-room, 80Gi, one GPU, 40Gi used, limit 90 percent (72Gi).
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
#include "extender.h"
#include "holds.h"
#include "ledger.h"
#include "metrics.h"
#include "placer_fixture.h"
#include "watch.h"

static struct cache *cache;
static struct ledger *ledger;
static struct placer *pl;
static struct extender *x;
static struct metrics *metrics;

/* ---- the interposed holds_each ---- */

size_t __real_holds_each(struct holds *h, const char *node, const char *except_uid, uint64_t now_ms,
                         holds_add_fn add, void *add_ctx, uint64_t *bytes_out);
size_t __wrap_holds_each(struct holds *h, const char *node, const char *except_uid, uint64_t now_ms,
                         holds_add_fn add, void *add_ctx, uint64_t *bytes_out);

static void (*armed)(void); /* run once, at the next holds_each, before it reads */
static int wrapped_calls;

size_t __wrap_holds_each(struct holds *h, const char *node, const char *except_uid, uint64_t now_ms,
                         holds_add_fn add, void *add_ctx, uint64_t *bytes_out)
{
	void (*fn)(void) = armed;

	wrapped_calls++;
	armed = NULL;
	if (fn != NULL)
		fn();
	return __real_holds_each(h, node, except_uid, now_ms, add, add_ctx, bytes_out);
}

/* ---- the cluster ---- */

static void put_node(const char *name)
{
	char text[512];
	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"%s\",\"uid\":\"%s\",\"annotations\":{"
	         "\"gpu-memory-guard.io/gpu-memory\":\"80Gi\",\"gpu-memory-guard.io/gpu-count\":"
	         "\"1\"}},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"1\"}}}",
	         name, name);
	cJSON *node = cJSON_Parse(text);
	assert_non_null(node);
	assert_int_equal(cache_apply_node(cache, WATCH_ADDED, node), 0);
	cJSON_Delete(node);
}

/* A 1-GPU pod ml/name declaring limit, on node (NULL: pending). */
static char *pod_text(const char *name, const char *limit, const char *node)
{
	char *text = malloc(1024);
	assert_non_null(text);
	snprintf(text, 1024,
	         "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"uid-%s\"},"
	         "\"spec\":{%s%s%s\"containers\":[{\"name\":\"vllm\",\"resources\":{\"limits\":{"
	         "\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":"
	         "\"%s\"}]}]},\"status\":{\"phase\":\"%s\"}}",
	         name, name, node ? "\"nodeName\":\"" : "", node ? node : "", node ? "\"," : "",
	         limit, node ? "Running" : "Pending");
	return text;
}

static void put_pod(const char *name, const char *limit, const char *node)
{
	char *text = pod_text(name, limit, node);
	cJSON *pod = cJSON_Parse(text);
	assert_non_null(pod);
	assert_int_equal(cache_apply_pod(cache, WATCH_ADDED, pod), 0);
	cJSON_Delete(pod);
	free(text);
}

static int always_fresh(void *ctx, double now)
{
	(void)ctx, (void)now;
	return 1;
}

static int setup(void **state)
{
	(void)state;
	cache = cache_new(&(struct demand_config){.gpu_resources = NULL}, NULL, NULL);
	metrics = metrics_new();
	assert_non_null(cache);
	assert_non_null(metrics);
	put_node("n-room");
	put_node("n-other");
	put_pod("resident", "40Gi", "n-room");
	static const struct demand_config dcfg = {.gpu_resources = NULL};
	assert_non_null(ledger = ledger_new(60000));
	struct placer_config pc = placer_fixture_config(cache, ledger, &dcfg);
	pc.cache_fresh = always_fresh;
	assert_non_null(pl = placer_new(&pc));
	struct extender_config cfg = {.placer = pl};
	x = extender_new(&cfg, metrics);
	assert_non_null(x);
	armed = NULL;
	wrapped_calls = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	extender_free(x);
	placer_free(pl);
	ledger_free(ledger);
	cache_free(cache);
	metrics_free(metrics);
	assert_int_equal(placer_fixture_api_calls, 0);
	return 0;
}

/* Filter pod text on node, and return the passing node names joined by ",". */
static void filter(const char *pod, const char *node, char *names, size_t cap)
{
	cJSON *a = cJSON_CreateObject(), *list = cJSON_CreateArray(), *it;
	char *out = NULL, err[EXTENDER_ERR_MAX] = "";
	size_t len = 0;

	cJSON_AddItemToObject(a, "Pod", cJSON_Parse(pod));
	cJSON_AddNullToObject(a, "Nodes");
	cJSON_AddItemToArray(list, cJSON_CreateString(node));
	cJSON_AddItemToObject(a, "NodeNames", list);
	char *body = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	int rc =
	    extender_handle(x, EXTENDER_FILTER, body, strlen(body), &out, &len, err, sizeof(err));
	free(body);
	if (rc != 0)
		fail_msg("extender_handle: %d (%s)", rc, err);
	cJSON *answer = cJSON_Parse(out);
	free(out);
	assert_non_null(answer);
	names[0] = '\0';
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(answer, "NodeNames"))
	{
		if (names[0])
			strncat(names, ",", cap - strlen(names) - 1);
		strncat(names, it->valuestring, cap - strlen(names) - 1);
	}
	cJSON_Delete(answer);
}

/* What runs on other threads while the node is being judged: ml/first's Binding reaches the
 * cache, then another filter call (for a pod elsewhere) prunes the holds the cache shows
 * settled, ml/first's among them. */
static void first_binds_and_another_filter_prunes(void)
{
	char names[64];
	char *other = pod_text("other", "1Gi", NULL);

	put_pod("first", "10Gi", "n-room");
	filter(other, "n-other", names, sizeof(names));
	assert_string_equal(names, "n-other");
	free(other);
}

/* ml/first (10Gi) passes n-room and is held there; ml/big (25Gi) is filtered while ml/first's
 * Binding lands: 40 + 10 + 25 > 72 on n-room whichever of the hold and the cache shows
 * ml/first, so n-room fails. Reading the cache before the holds misses ml/first and passes
 * n-room (65Gi counted), a node the webhook then refuses. */
static void test_binding_landing_while_judged_is_counted(void **state)
{
	(void)state;
	char names[64];
	char *first = pod_text("first", "10Gi", NULL), *big = pod_text("big", "25Gi", NULL);

	put_pod("first", "10Gi", NULL);
	put_pod("big", "25Gi", NULL);
	put_pod("other", "1Gi", NULL);
	filter(first, "n-room", names, sizeof(names));
	assert_string_equal(names, "n-room"); /* held on n-room */

	armed = first_binds_and_another_filter_prunes;
	filter(big, "n-room", names, sizeof(names));
	assert_null(armed); /* the interleaving ran */
	assert_string_equal(names, "");

	/* Settled: the cache alone now shows ml/first on n-room, and ml/big still does not fit. */
	filter(big, "n-room", names, sizeof(names));
	assert_string_equal(names, "");
	free(first);
	free(big);
}

/* What the webhook does on another thread while the node is being judged: it admits
 * ml/first's Binding with a reservation on n-room, then ends its holds (extender_binding_admitted,
 * main.c); the cache does not show the Binding yet. */
static void first_binding_admitted(void)
{
	struct ledger_node *ln = ledger_lock(ledger, "n-room");

	assert_non_null(ln);
	assert_int_equal(
	    ledger_reserve_uid(ln, "ml/first", "uid-first", 10ull << 30, ledger_now_ms()), 0);
	ledger_unlock(ln);
	extender_binding_admitted(x, "uid-first");
}

/* ml/first (10Gi) passes n-room and is held there; ml/big (25Gi) is filtered while the webhook
 * admits ml/first's Binding: its hold ends and its reservation begins, and the cache does not
 * show it bound. Read holds first, then reservations (extender.h), one of them counts it and
 * n-room fails (40 + 10 + 25 > 72); reading the reservations before the holds misses it in both
 * and passes n-room, a node the webhook then refuses. */
static void test_binding_admitted_while_judged_is_counted(void **state)
{
	(void)state;
	char names[64];
	char *first = pod_text("first", "10Gi", NULL), *big = pod_text("big", "25Gi", NULL);

	put_pod("first", "10Gi", NULL);
	put_pod("big", "25Gi", NULL);
	filter(first, "n-room", names, sizeof(names));
	assert_string_equal(names, "n-room"); /* held on n-room */

	armed = first_binding_admitted;
	filter(big, "n-room", names, sizeof(names));
	assert_null(armed); /* the interleaving ran */
	assert_string_equal(names, "");
	free(first);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_binding_landing_while_judged_is_counted, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_binding_admitted_while_judged_is_counted, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
