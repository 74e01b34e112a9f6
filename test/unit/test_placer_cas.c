/*
 * The cache path's optimistic attempts over the local ledger (placer.c, placer_cached): the
 * node is let go while the view is copied and while the core decides, and the reservation is
 * committed by compare-and-swap on the node's version. Another placement committed while the
 * core decided must make the decision be taken again, over its reservation: else both are
 * admitted over the node's limit.
 *
 * The interleaving is made deterministic with the linker: this binary is linked with
 * -Wl,--wrap=core_decide (CMakeLists.txt), so when armed, core_decide() first runs what another
 * thread would: another pod is reserved on the node (its lock free: the decision holds none).
 *
 * The cluster: gpu-a, one 80Gi GPU (limit 90 percent: 72Gi), 40Gi used by a running pod.
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

static struct cache *cache;
static struct ledger *ledger;
static struct metrics *metrics;
static struct placer *pl;

/* ---- the interposed core_decide ---- */

int __real_core_decide(const struct core_input *in, struct core_verdict *out);
int __wrap_core_decide(const struct core_input *in, struct core_verdict *out);

static unsigned armed;       /* this many core_decide calls reserve another pod first */
static unsigned decided;     /* core_decide calls */
static uint64_t other_bytes; /* what the other pod reserves */
static int keep_locked;      /* the other placement keeps the node locked (held_ln) */
static int hold_only;        /* the other placement reserves nothing, only takes the node */
static struct ledger_node *held_ln;

int __wrap_core_decide(const struct core_input *in, struct core_verdict *out)
{
	decided++;
	if (armed > 0) {
		char key[32], uid[32];
		struct ledger_node *ln = ledger_lock(ledger, "gpu-a"); /* free: no lock held */

		armed--;
		snprintf(key, sizeof(key), "ml/other-%u", decided);
		snprintf(uid, sizeof(uid), "uid-other-%u", decided);
		assert_non_null(ln);
		if (!hold_only)
			assert_int_equal(
			    ledger_reserve_uid(ln, key, uid, other_bytes, ledger_now_ms()), 0);
		if (keep_locked)
			held_ln = ln;
		else
			ledger_unlock(ln);
	}
	return __real_core_decide(in, out);
}

/* ---- the cluster ---- */

static int setup(void **state)
{
	static const struct demand_config dcfg = {.gpu_resources = NULL};
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
	armed = decided = 0;
	other_bytes = 25 * GIB;
	keep_locked = 0;
	hold_only = 0;
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
	assert_int_equal(placer_fixture_api_calls, 0);
	return 0;
}

/* Place ml/p (bytes) on gpu-a from the cache; may_block as a worker (1) or the listener (0).
 * Returns placer_cached's answer. */
static int keep_o; /* place() keeps o as it is (webhook.c: one x->o, listener then worker) */

static int place(uint64_t bytes, int may_block, struct outcome *o)
{
	struct demand d;
	char text[512];

	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"uid-p\"},\"spec\":{"
	         "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
	         "\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"%lluGi\"}]}]}}",
	         (unsigned long long)(bytes / GIB));
	cJSON *pod = cJSON_Parse(text);
	static const struct demand_config dcfg = {.gpu_resources = NULL};
	assert_int_equal(demand_from_pod(pod, &dcfg, &d), 0);
	struct placer_pod pp = {
	    .pod_name = "ml/p",
	    .ns = "ml",
	    .key = "ml/p",
	    .uid = "uid-p",
	    .node = "gpu-a",
	    .demand = &d,
	};
	if (!keep_o)
		memset(o, 0, sizeof(*o));
	int rc = placer_cached(pl, &pp, may_block, o);
	cJSON_Delete(pod);
	return rc;
}

static double conflicts(void)
{
	char *text = NULL;
	size_t len = 0;
	const char *series = "\ngpu_memory_guard_ledger_conflicts_total "; /* not HELP */

	assert_int_equal(metrics_render(metrics, &text, &len), 0);
	const char *at = strstr(text, series);
	assert_non_null(at);
	double v = strtod(at + strlen(series), NULL);
	free(text);
	return v;
}

/* Nothing changes meanwhile: decided once, admitted and reserved, no conflict. */
static void test_uncontended(void **state)
{
	struct outcome o;
	(void)state;
	assert_int_equal(place(20 * GIB, 1, &o), 1);
	assert_true(o.allowed);
	assert_int_equal(decided, 1);
	assert_int_equal(ledger_size(ledger), 1);
	assert_true(conflicts() == 0);
}

/* Another pod (25Gi) is reserved while ml/p (20Gi) is decided: the commit finds the node
 * changed, the decision is taken again over both, and 40 + 25 + 20 > 72 refuses ml/p. Without
 * the compare-and-swap ml/p would be admitted over the limit. */
static void test_commit_conflict_decides_again(void **state)
{
	struct outcome o;
	(void)state;
	armed = 1;
	assert_int_equal(place(20 * GIB, 1, &o), 1);
	assert_false(o.allowed);
	assert_int_equal(o.code, 403);
	assert_int_equal(decided, 2);
	assert_int_equal(ledger_size(ledger), 1); /* the other pod's only */
	assert_true(conflicts() == 1);
}

/* A placement that fits beside what was reserved meanwhile is admitted at the second attempt. */
static void test_conflict_then_fits(void **state)
{
	struct outcome o;
	(void)state;
	armed = 1;
	assert_int_equal(place(5 * GIB, 1, &o), 1);
	assert_true(o.allowed);
	assert_int_equal(decided, 2);
	assert_int_equal(ledger_size(ledger), 2);
	assert_true(conflicts() == 1);
}

/* Changed at every optimistic attempt: the last attempt holds the node from begin to commit
 * and cannot conflict (another placement then waits for it). */
static void test_last_attempt_holds_the_node(void **state)
{
	struct outcome o;
	(void)state;
	armed = 2; /* the two optimistic attempts; the third holds the node */
	other_bytes = 5 * GIB;
	assert_int_equal(place(1 * GIB, 1, &o), 1);
	assert_true(o.allowed); /* 40 + 5 + 5 + 1 of 72 */
	assert_int_equal(decided, 3);
	assert_int_equal(ledger_size(ledger), 3);
	assert_true(conflicts() == 2);
}

/* On the listener's thread (may_block 0) a node another placement took while the core decided
 * is not waited for: nothing decided, nothing reserved, the node released (a worker decides it
 * from the start). */
static void test_listener_never_waits(void **state)
{
	struct outcome o;
	(void)state;
	armed = 1;
	keep_locked = 1;
	assert_int_equal(place(1 * GIB, 0, &o), 0);
	assert_non_null(held_ln);
	ledger_unlock(held_ln);
	assert_int_equal(ledger_size(ledger), 1);   /* the other pod's only */
	assert_int_equal(place(1 * GIB, 1, &o), 1); /* the worker */
	assert_true(o.allowed);
	assert_int_equal(ledger_size(ledger), 2);
}

/* review (wt/cas): the webhook hands the listener's outcome (x->o) to the worker as it is
 * (webhook_prepare -> webhook_finish -> placer_decide). A listener attempt that got as far as
 * core_decide and then found the node taken (relock busy) returns 0 with o already written:
 * the worker's decision must not inherit its warnings. 40 + 30 of 80 is over the 80 percent
 * warning threshold: one warning, not two. */
static void test_listener_busy_no_duplicate_warning(void **state)
{
	struct outcome o, fresh;
	(void)state;
	memset(&o, 0, sizeof(o));
	keep_o = 1;
	armed = 1;
	keep_locked = 1;
	hold_only = 1;
	assert_int_equal(place(30 * GIB, 0, &o), 0); /* busy: a worker decides it */
	assert_non_null(held_ln);
	ledger_unlock(held_ln);
	held_ln = NULL;
	assert_int_equal(place(30 * GIB, 1, &o), 1);
	keep_o = 0;
	assert_true(o.allowed);
	/* what a fresh outcome gets for the same placement (its reservation refreshed) */
	assert_int_equal(place(30 * GIB, 1, &fresh), 1);
	assert_true(fresh.allowed);
	assert_int_equal(fresh.n_warnings, 1);
	for (size_t i = 0; i < o.n_warnings; i++)
		print_message("warning %zu: %s\n", i, o.warnings[i]);
	assert_int_equal(o.n_warnings, fresh.n_warnings);
}

/* The same, the node changed while the listener's attempt decided: the other pod's 25Gi makes
 * ml/p (30Gi) refused; the refusal must not carry the listener's "admitted, but over the
 * warning threshold" warning. */
static void test_listener_busy_no_stale_warning_on_denial(void **state)
{
	struct outcome o;
	(void)state;
	memset(&o, 0, sizeof(o));
	keep_o = 1;
	armed = 1;
	keep_locked = 1;
	other_bytes = 25 * GIB;
	assert_int_equal(place(30 * GIB, 0, &o), 0); /* its attempt admitted it, then found the
	                                                 node taken */
	assert_int_equal(decided, 1);
	ledger_unlock(held_ln);
	held_ln = NULL;
	assert_int_equal(place(30 * GIB, 1, &o), 1);
	keep_o = 0;
	assert_false(o.allowed);
	if (o.n_warnings > 0)
		print_message("refused (%s) with the listener's warning: %s\n", o.reason,
		              o.warnings[0]);
	assert_int_equal(o.n_warnings, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_uncontended, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_commit_conflict_decides_again, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_conflict_then_fits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_last_attempt_holds_the_node, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_listener_never_waits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_listener_busy_no_duplicate_warning, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_listener_busy_no_stale_warning_on_denial, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
