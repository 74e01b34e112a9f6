/*
 * The cache path's optimistic attempts over the local ledger (placer.c, placer_cached; review
 * on branch wt/cas) with every allocation failing in turn (ld --wrap of the allocator), on the
 * plain path, with a conflict at commit (a reservation put while core_decide runs: ld
 * --wrap=core_decide) and with the listener finding the node taken after deciding. After each
 * placement: the node is neither locked nor still used (its users balanced: an empty node is
 * freed by its last user), a decided placement is admitted with its reservation or refused,
 * nothing leaks (LeakSanitizer in the ASan build).
 *
 * The node: gpu-a, one 80Gi GPU, 40Gi resident; three reservations with uids (their strings
 * copied by resv_own_items).
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
#include "core.h"
#include "demand.h"
#include "ledger.h"
#include "metrics.h"
#include "outcome.h"
#include "placer_fixture.h"
#include "watch.h"

#define GIB (1024ull * 1024ull * 1024ull)

#include "failing_alloc.h"

static struct cache *cache;
static struct ledger *ledger;
static struct metrics *metrics;
static struct placer *pl;
static const struct demand_config dcfg = {.gpu_resources = NULL};

/* ---- the interposed core_decide ---- */
int __real_core_decide(const struct core_input *in, struct core_verdict *out);
int __wrap_core_decide(const struct core_input *in, struct core_verdict *out);

static int armed;       /* the first core_decide reserves another pod first (a conflict) */
static int keep_locked; /* ... and keeps the node locked (the listener finds it taken) */
static struct ledger_node *held_ln;
static unsigned other_n;

int __wrap_core_decide(const struct core_input *in, struct core_verdict *out)
{
	if (armed) {
		char key[32], uid[32];
		long saved = fail_at;
		fail_at = -1; /* the other placement's allocations do not fail */
		armed = 0;
		struct ledger_node *ln = ledger_lock(ledger, "gpu-a");
		assert_non_null(ln);
		snprintf(key, sizeof(key), "ml/other-%u", ++other_n);
		snprintf(uid, sizeof(uid), "uid-other-%u", other_n);
		assert_int_equal(ledger_reserve_uid(ln, key, uid, 1 * GIB, ledger_now_ms()), 0);
		if (keep_locked)
			held_ln = ln;
		else
			ledger_unlock(ln);
		fail_at = saved;
	}
	return __real_core_decide(in, out);
}

static int setup(void **state)
{
	(void)state;
	cache = cache_new(&dcfg, NULL, NULL);
	ledger = ledger_new(60000);
	metrics = metrics_new();
	assert_non_null(cache);
	assert_non_null(ledger);
	assert_non_null(metrics);
	assert_int_equal(placer_fixture_gpu_a(cache), 0);
	struct placer_config pc = placer_fixture_config(cache, ledger, &dcfg);
	pc.metrics = metrics;
	assert_non_null(pl = placer_new(&pc));
	armed = keep_locked = 0;
	held_ln = NULL;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	placer_free(pl);
	metrics_free(metrics);
	ledger_free(ledger);
	cache_free(cache);
	return 0;
}

static void seed_reservations(void)
{
	struct ledger_node *ln = ledger_lock(ledger, "gpu-a");
	assert_non_null(ln);
	assert_int_equal(ledger_reserve_uid(ln, "ml/a", "uid-a", 1 * GIB, ledger_now_ms()), 0);
	assert_int_equal(ledger_reserve_uid(ln, "ml/b", "uid-b", 1 * GIB, ledger_now_ms()), 0);
	assert_int_equal(ledger_reserve_claim(ln, "ml/c", "uid-c", "claim-c", 1 * GIB, 0,
	                                      ledger_now_ms(), ledger_now_ms()),
	                 0);
	ledger_unlock(ln);
}

/* ledger_visit: is uid-p reserved */
static void find_p(void *ctx, const char *key, const char *uid, const char *claim, uint64_t bytes,
                   uint64_t reserved_ms)
{
	(void)key, (void)claim, (void)bytes, (void)reserved_ms;
	if (strcmp(uid, "uid-p") == 0)
		*(int *)ctx = 1;
}

/* The node is unlocked and no use of it is left: emptied and given back, it is freed (a fresh
 * node has version 0). Leaves the node with no entries. */
static void check_node_free(long k)
{
	int busy = 0;
	struct ledger_node *ln = ledger_trylock(ledger, "gpu-a", &busy);
	if (busy || ln == NULL)
		fail_msg("allocation %ld failed: node still locked (busy %d)", k, busy);
	ledger_remove(ln, "ml/a", "uid-a");
	ledger_remove(ln, "ml/b", "uid-b");
	ledger_remove(ln, "ml/c", "uid-c");
	ledger_remove(ln, "ml/p", "uid-p");
	for (unsigned i = 1; i <= other_n; i++) {
		char key[32], uid[32];
		snprintf(key, sizeof(key), "ml/other-%u", i);
		snprintf(uid, sizeof(uid), "uid-other-%u", i);
		ledger_remove(ln, key, uid);
	}
	assert_int_equal(ledger_size(ledger), 0);
	ledger_unlock(ln);
	ln = ledger_lock(ledger, "gpu-a");
	if (ledger_version(ln) != 0)
		fail_msg("allocation %ld failed: the node's users not given back (version %llu)", k,
		         (unsigned long long)ledger_version(ln));
	ledger_unlock(ln);
}

/* mode 0: plain; 1: a conflict at the first commit; 2: listener, the node taken meanwhile */
static void sweep(int may_block, int mode)
{
	for (long k = 1; k < 100000; k++) {
		struct outcome o;
		struct demand d;
		cJSON *pod = cJSON_Parse(
		    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"uid-p\"},"
		    "\"spec\":{"
		    "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/"
		    "gpu\":\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"2Gi\"}]}]}"
		    "}");
		assert_int_equal(demand_from_pod(pod, &dcfg, &d), 0);
		struct placer_pod pp = {.pod_name = "ml/p",
		                        .ns = "ml",
		                        .key = "ml/p",
		                        .uid = "uid-p",
		                        .node = "gpu-a",
		                        .demand = &d};
		seed_reservations();
		armed = mode != 0;
		keep_locked = mode == 2;
		held_ln = NULL;
		memset(&o, 0, sizeof(o));
		n_alloc = n_failed = 0;
		fail_at = k;
		int rc = placer_cached(pl, &pp, may_block, &o);
		fail_at = -1;
		cJSON_Delete(pod);
		if (held_ln != NULL) {
			ledger_unlock(held_ln);
			held_ln = NULL;
		}
		int reserved = 0;
		struct ledger_node *ln = ledger_lock(ledger, "gpu-a");
		ledger_visit(ln, ledger_now_ms(), find_p, &reserved);
		ledger_unlock(ln);
		if (rc == 1 && o.allowed && !reserved)
			fail_msg("allocation %ld failed: admitted without a reservation", k);
		if ((rc == 0 || !o.allowed) && reserved)
			fail_msg("allocation %ld failed: not admitted (rc %d) but reserved", k, rc);
		if (rc == 1 && !o.allowed && o.code != 500)
			fail_msg("allocation %ld failed: refused %d %s: %s", k, o.code, o.reason,
			         o.message);
		check_node_free(k);
		if (n_failed == 0) {
			print_message("may_block %d mode %d: %ld allocations swept\n", may_block,
			              mode, k - 1);
			return;
		}
	}
}

static void test_worker_plain(void **s)
{
	(void)s;
	sweep(1, 0);
}
static void test_listener_plain(void **s)
{
	(void)s;
	sweep(0, 0);
}
static void test_worker_conflict(void **s)
{
	(void)s;
	sweep(1, 1);
}
static void test_listener_conflict(void **s)
{
	(void)s;
	sweep(0, 1);
}
static void test_listener_busy(void **s)
{
	(void)s;
	sweep(0, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_worker_plain, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_listener_plain, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_worker_conflict, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_listener_conflict, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_listener_busy, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
