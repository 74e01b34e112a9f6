/*
 * Unit tests for lib/core/placement: the placement decision over plain structs (no JSON, no
 * API, no ledger). One table of cases over the counting rules, then the message and the
 * reservation the caller records.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "capacity.h"
#include "demand.h"
#include "placement.h"

#define MIB (1024ull * 1024)
#define GI  (1024ull * MIB)

/* One 40Gi GPU: the 90 percent budget is 36Gi. */
static const struct capacity one_gpu = {
    .per_gpu_bytes = 40 * GI, .gpu_count = 1, .total_bytes = 40 * GI};

static struct demand demand_of(uint64_t bytes)
{
	struct demand d;
	memset(&d, 0, sizeof(d));
	d.status = DEMAND_OK;
	d.bytes = bytes;
	d.gpus = 1;
	d.max_per_gpu_bytes = bytes;
	snprintf(d.max_per_gpu_container, sizeof(d.max_per_gpu_container), "c");
	return d;
}

static const struct placement_policy enforce = {0.9, 0.8, POLICY_ENFORCE, 0, 0};

struct row {
	const char *what;
	struct placement_item pods[4];
	size_t n_pods;
	struct placement_item reserved[4];
	size_t n_reserved;
	uint64_t demand;
	uint64_t now_ms;
	int allowed;
	const char *reason;
	uint64_t used; /* expected used_bytes */
	size_t n_settled;
};

static const struct row rows[] = {
    {"empty node", {{0}}, 0, {{0}}, 0, 10 * GI, 0, 1, "Fits", 0, 0},
    {"exactly at the budget is allowed",
     {{"a/x", NULL, 26 * GI, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     {{0}},
     0,
     10 * GI,
     0,
     1,
     "WarnThreshold",
     26 * GI,
     0},
    {"one byte over the budget is denied",
     {{"a/x", NULL, 26 * GI + 1, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     {{0}},
     0,
     10 * GI,
     0,
     0,
     "OverThreshold",
     26 * GI + 1,
     0},
    {"an undeclared GPU pod counts a whole GPU",
     {{"a/old", NULL, 0, 1, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     {{0}},
     0,
     1 * GI,
     0,
     0,
     "OverThreshold",
     40 * GI,
     0},
    {"an undeclared pod asking for 2 GPUs counts 2 whole GPUs",
     {{"a/old2", NULL, 0, 2, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     {{0}},
     0,
     1 * GI,
     0,
     0,
     "OverThreshold",
     80 * GI,
     0},
    {"a reservation counts",
     {{0}},
     0,
     {{"a/r", NULL, 30 * GI, 0, 1000, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     10 * GI,
     10,
     0,
     "OverThreshold",
     30 * GI,
     0},
    {"an expired reservation does not count",
     {{0}},
     0,
     {{"a/r", NULL, 30 * GI, 0, 1000, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     10 * GI,
     1000,
     1,
     "Fits",
     0,
     0},
    {"a reservation whose pod is visible counts once (by key)",
     {{"a/r", NULL, 30 * GI, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     {{"a/r", NULL, 30 * GI, 0, 1000, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     5 * GI,
     10,
     1,
     "WarnThreshold",
     30 * GI,
     1},
    {"... and by uid",
     {{"a/r", "u-1", 30 * GI, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     {{"a/r2", "u-1", 30 * GI, 0, 1000, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     5 * GI,
     10,
     1,
     "WarnThreshold",
     30 * GI,
     1},
    {"the pod placed again does not count itself, visible or reserved",
     {{"ns/p", NULL, 30 * GI, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     {{"ns/p", NULL, 30 * GI, 0, 1000, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     30 * GI,
     10,
     1,
     "Fits",
     0,
     0},
    {"the pod matched by uid does not count itself",
     {{0}},
     0,
     {{"ns/other", "uid-p", 30 * GI, 0, 1000, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     30 * GI,
     10,
     1,
     "Fits",
     0,
     0},
    {"sums saturate instead of wrapping",
     {{"a/x", NULL, UINT64_MAX - 1, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     {{"a/y", NULL, 10, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}},
     1,
     10 * GI,
     0,
     0,
     "OverThreshold",
     UINT64_MAX,
     0},
};

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct demand d = demand_of(r->demand);
		struct placement_node node = {"n1",        &one_gpu,      r->pods, r->n_pods,
		                              r->reserved, r->n_reserved, NULL};
		struct placement_pod pod = {"ns/p", "ns/p", "uid-p", &d, 0, NULL};
		struct placement_result res;

		print_message("case %zu: %s\n", i, r->what);
		assert_int_equal(placement_decide(&node, &pod, &enforce, r->now_ms, &res), 0);
		assert_int_equal(res.decision.allowed, r->allowed);
		assert_string_equal(res.decision.reason, r->reason);
		assert_true(res.used_bytes == r->used);
		assert_int_equal(res.n_settled, r->n_settled);
		assert_int_equal(res.reserve, r->allowed);
		assert_true(res.reserve_bytes == (r->allowed ? r->demand : 0));
	}
}

static void test_message_names_pods_and_reservations(void **state)
{
	(void)state;
	struct placement_item pods[] = {
	    {"team-a/big", NULL, 20 * GI, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL},
	    {"team-a/small", NULL, 2 * GI, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0,
	     NULL}};
	struct placement_item res_items[] = {{"team-b/coming", NULL, 10 * GI, 0, 0, 0, 0, NULL,
	                                      NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}};
	struct demand d = demand_of(8 * GI);
	struct placement_node node = {"gpu-1", &one_gpu, pods, 2, res_items, 1, NULL};
	struct placement_pod pod = {"ns/p", "ns/p", NULL, &d, 0, NULL};
	struct placement_result res;

	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
	assert_false(res.decision.allowed);
	assert_string_equal(res.decision.message,
	                    "placing ns/p (8Gi) on gpu-1 would declare 40Gi of 40Gi GPU memory "
	                    "(100 percent), above the 90 percent limit (36Gi); already there: "
	                    "team-a/big 20Gi, team-b/coming (admitting) 10Gi, team-a/small 2Gi");
	assert_int_equal(res.reserved_bytes, 10 * GI);

	/* Without words (the extender): the same verdict and numbers, no text. */
	struct placement_policy quiet = enforce;
	struct placement_result q;
	quiet.verdict_only = 1;
	assert_int_equal(placement_decide(&node, &pod, &quiet, 0, &q), 0);
	assert_int_equal(q.decision.verdict, res.decision.verdict);
	assert_string_equal(q.decision.reason, res.decision.reason);
	assert_int_equal(q.decision.total_bytes, res.decision.total_bytes);
	assert_int_equal(q.decision.budget_bytes, res.decision.budget_bytes);
	assert_int_equal(q.used_bytes, res.used_bytes);
	assert_string_equal(q.decision.message, "");
	/* ... also for never-fits and the warning level. */
	struct demand huge = demand_of(37 * GI), warm = demand_of(1 * GI);
	struct placement_node empty = {"gpu-1", &one_gpu, NULL, 0, NULL, 0, NULL};
	pod.demand = &huge;
	assert_int_equal(placement_decide(&empty, &pod, &quiet, 0, &q), 0);
	assert_int_equal(q.decision.verdict, POLICY_DENY_NEVER_FITS);
	assert_string_equal(q.decision.message, "");
	pod.demand = &warm;
	node.n_reserved = 0; /* 22 + 1 = 23Gi of 40: not warned; 20+2+10+1 was over */
	pods[0].bytes = 31 * GI;
	assert_int_equal(placement_decide(&node, &pod, &quiet, 0, &q), 0);
	assert_int_equal(q.decision.verdict, POLICY_ALLOW_WARN);
	assert_string_equal(q.decision.message, "");
}

static void test_node_threshold_overrides_policy(void **state)
{
	(void)state;
	struct capacity cap = one_gpu;
	struct demand d = demand_of(30 * GI);
	struct placement_node node = {"n1", &cap, NULL, 0, NULL, 0, NULL};
	struct placement_pod pod = {"ns/p", "ns/p", NULL, &d, 0, NULL};
	struct placement_result res;

	cap.has_threshold = 1;
	cap.threshold = 0.5; /* 20Gi */
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
	assert_false(res.decision.allowed);
	assert_string_equal(res.decision.reason, "NeverFits");
	assert_true(res.decision.budget_bytes == 20 * GI);
}

static void test_warn_mode_and_dry_run(void **state)
{
	(void)state;
	struct placement_item pods[] = {
	    {"a/x", NULL, 35 * GI, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}};
	struct demand d = demand_of(5 * GI);
	struct placement_node node = {"n1", &one_gpu, pods, 1, NULL, 0, NULL};
	struct placement_pod pod = {"ns/p", "ns/p", NULL, &d, 0, NULL};
	struct placement_policy warn = {0.9, 0.8, POLICY_WARN, 0, 0};
	struct placement_result res;

	assert_int_equal(placement_decide(&node, &pod, &warn, 0, &res), 0);
	assert_true(res.decision.allowed);
	assert_int_equal(res.decision.verdict, POLICY_WARN_ONLY);
	assert_int_equal(res.reserve, 1);
	assert_non_null(strstr(res.decision.message, "above the 90 percent limit"));
	pod.dry_run = 1;
	assert_int_equal(placement_decide(&node, &pod, &warn, 0, &res), 0);
	assert_true(res.decision.allowed);
	assert_int_equal(res.reserve, 0);
}

static void test_invalid_inputs(void **state)
{
	(void)state;
	struct demand d = demand_of(GI), bad = demand_of(GI);
	struct capacity zero = {0};
	struct placement_item keyless[] = {
	    {NULL, NULL, GI, 0, 0, 0, 0, NULL, NULL, 0, NULL, 0, 0, 0, NULL, 0, NULL}};
	struct placement_node node = {"n1", &one_gpu, NULL, 0, NULL, 0, NULL};
	struct placement_pod pod = {"ns/p", "ns/p", NULL, &d, 0, NULL};
	struct placement_result res;

	assert_int_equal(placement_decide(NULL, &pod, &enforce, 0, &res), -1);
	assert_true(res.invalid_input);
	assert_false(res.decision.allowed);
	assert_int_equal(placement_decide(&node, NULL, &enforce, 0, &res), -1);
	assert_int_equal(placement_decide(&node, &pod, NULL, 0, &res), -1);
	bad.status = DEMAND_INVALID;
	pod.demand = &bad;
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), -1);
	pod.demand = &d;
	node.pods = keyless;
	node.n_pods = 1;
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), -1);
	node.pods = NULL; /* n_pods 1 without pods */
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), -1);
	node.n_pods = 0;
	node.cap = &zero; /* policy_decide refuses a zero capacity */
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), -1);
	assert_true(res.invalid_input);
	assert_false(res.decision.allowed);
	assert_int_equal(res.reserve, 0);
}

/* pod -> placement item, the one rule (placement_item_count): a declared pod its bytes and
 * shares, an undeclared GPU pod its GPUs whole (at least 1), never both. */
static void test_item_count(void **state)
{
	struct demand_share sh[2] = {{0}};
	struct placement_item it;
	struct demand d;

	(void)state;
	memset(&it, 0xff, sizeof(it));
	it.key = "ns/a";
	placement_item_count(&it, &(const struct placement_count){.status = DEMAND_OK,
	                                                          .bytes = 1000,
	                                                          .gpus = 2,
	                                                          .pool = 7,
	                                                          .shares = sh,
	                                                          .n_shares = 2,
	                                                          .whole_gpus = 2});
	assert_string_equal(it.key, "ns/a"); /* untouched */
	assert_true(it.bytes == 1000 && it.undeclared_gpus == 0 && it.pool == 7);
	assert_true(it.shares == sh && it.n_shares == 2 && it.whole_gpus == 2);
	/* invalid: bytes, shares and held cards given are ignored */
	placement_item_count(&it, &(const struct placement_count){.status = DEMAND_INVALID,
	                                                          .bytes = 1000,
	                                                          .gpus = 3,
	                                                          .pool = 7,
	                                                          .shares = sh,
	                                                          .n_shares = 2,
	                                                          .whole_gpus = 3});
	assert_true(it.bytes == 0 && it.undeclared_gpus == 3 && it.pool == 7);
	assert_true(it.shares == NULL && it.n_shares == 0 && it.whole_gpus == 0);
	placement_item_count(&it, &(const struct placement_count){.status = DEMAND_INVALID});
	assert_true(it.undeclared_gpus == 1); /* a GPU pod holds at least one */
	/* shares without a count: none */
	placement_item_count(&it,
	                     &(const struct placement_count){.status = DEMAND_OK, .shares = sh});
	assert_true(it.shares == NULL && it.n_shares == 0 && it.undeclared_gpus == 0);
	/* the whole-demand form takes the same path */
	memset(&d, 0, sizeof(d));
	d.status = DEMAND_INVALID;
	d.gpus = 4;
	d.bytes = 99;
	placement_item_demand(&it, &d, sh);
	assert_true(it.bytes == 0 && it.undeclared_gpus == 4 && it.shares == NULL);
	d.status = DEMAND_OK;
	placement_item_demand(&it, &d, sh);
	assert_true(it.bytes == 99 && it.undeclared_gpus == 0 && it.whole_gpus == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_item_count),
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_message_names_pods_and_reservations),
	    cmocka_unit_test(test_node_threshold_overrides_policy),
	    cmocka_unit_test(test_warn_mode_and_dry_run),
	    cmocka_unit_test(test_invalid_inputs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
