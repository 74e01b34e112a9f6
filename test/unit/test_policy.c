/* Unit tests for lib/policy: verdicts, boundaries, modes and the exact messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>

#include "policy.h"

#define MIB (1024ull * 1024)
#define GI  (1024ull * MIB)
/* gpu-node-a: one H100 80GB HBM3 as NVML reports it (81559 MiB). */
#define H100 (81559ull * MIB)

static const struct policy_consumer node_a[] = {
    {"default/legacy-notebook", H100}, /* no declaration: one whole GPU */
    {"team-b/chat-7b-0", 20 * GI},
    {"team-b/chat-7b-1", 20 * GI},
};

/* The state of gpu-node-a in the fixtures, placing a pod of demand bytes. */
static struct policy_input node_a_input(uint64_t demand)
{
	struct policy_input in = {
	    .pod = "inference/embedder-0",
	    .node = "gpu-node-a",
	    .demand_bytes = demand,
	    .max_per_gpu_bytes = demand,
	    .max_per_gpu_container = "tei",
	    .capacity_bytes = H100,
	    .per_gpu_bytes = H100,
	    .gpu_count = 1,
	    .threshold = 0.9,
	    .warn_threshold = 0.8,
	    .mode = POLICY_ENFORCE,
	    .used_bytes = H100 + 40 * GI,
	    .consumers = node_a,
	    .n_consumers = 3,
	    .n_consumers_total = 3,
	};
	return in;
}

/* An empty 8 x 80Gi node. */
static struct policy_input empty_input(uint64_t demand, uint64_t used)
{
	struct policy_input in = {
	    .pod = "ns/p",
	    .node = "n1",
	    .demand_bytes = demand,
	    .max_per_gpu_bytes = 10 * GI,
	    .max_per_gpu_container = "c",
	    .capacity_bytes = 8 * 80 * GI,
	    .per_gpu_bytes = 80 * GI,
	    .gpu_count = 8,
	    .threshold = 0.9,
	    .warn_threshold = 0.8,
	    .mode = POLICY_ENFORCE,
	    .used_bytes = used,
	};
	return in;
}

static void test_fixture_node_a_denied(void **state)
{
	struct policy_input in = node_a_input(12 * GI);
	struct policy_decision d;

	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_DENY);
	assert_int_equal(d.allowed, 0);
	assert_string_equal(d.reason, "OverThreshold");
	assert_int_equal(d.budget_bytes, 76968728985ull); /* floor(0.9 x 85,520,809,984) */
	assert_int_equal(d.total_bytes, H100 + 52 * GI);
	assert_string_equal(
	    d.message,
	    "placing inference/embedder-0 (12Gi) on gpu-node-a would declare "
	    "131.6Gi of 79.6Gi GPU memory (165 percent), above the 90 percent limit (71.7Gi); "
	    "already there: default/legacy-notebook 79.6Gi, team-b/chat-7b-0 20Gi, "
	    "team-b/chat-7b-1 20Gi");
}

static void test_header_example_shape(void **state)
{
	static const struct policy_consumer cs[] = {
	    {"team-b/chat-0", 20 * GI},
	    {"team-b/chat-1", 20 * GI},
	};
	struct policy_input in = node_a_input(24 * GI);
	struct policy_decision d;

	in.pod = "inference/llama-0";
	in.max_per_gpu_bytes = 24 * GI;
	/* 100.2Gi in total: 76.2Gi already there in 5 pods, 2 of them named. */
	in.used_bytes = 107589136384ull - 24 * GI;
	in.consumers = cs;
	in.n_consumers = 2;
	in.n_consumers_total = 5;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_DENY);
	assert_string_equal(
	    d.message, "placing inference/llama-0 (24Gi) on gpu-node-a would declare "
	               "100.2Gi of 79.6Gi GPU memory (125 percent), above the 90 percent limit "
	               "(71.7Gi); already there: team-b/chat-0 20Gi, team-b/chat-1 "
	               "20Gi, ... and 3 more");
}

static void test_fits(void **state)
{
	struct policy_input in = empty_input(24 * GI, 100 * GI);
	struct policy_decision d;

	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	assert_int_equal(d.allowed, 1);
	assert_string_equal(d.reason, "Fits");
	assert_string_equal(d.message, "");
	assert_int_equal(d.budget_bytes, 576 * GI);
	assert_int_equal(d.total_bytes, 124 * GI);
}

static void test_boundary(void **state)
{
	/* 640Gi x 0.9 = 576Gi exactly: at the budget is allowed, one byte more is not. */
	struct policy_input in = empty_input(24 * GI, 552 * GI);
	struct policy_decision d;

	in.warn_threshold = 1.0; /* >= threshold: no early warning */
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	in.used_bytes++;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_DENY);
	assert_string_equal(
	    d.message, "placing ns/p (24Gi) on n1 would declare 576Gi of 640Gi GPU "
	               "memory (90 percent), above the 90 percent limit (576Gi); already there: "
	               "552Gi");

	/* Threshold 1: the whole card may be declared. */
	in = empty_input(40 * GI, 600 * GI);
	in.threshold = 1.0;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_ALLOW_WARN);
	assert_int_equal(d.budget_bytes, 640 * GI);
}

static void test_warn_mode(void **state)
{
	struct policy_input in = node_a_input(12 * GI);
	struct policy_decision enforce, warn;

	assert_int_equal(policy_decide(&in, &enforce), 0);
	in.mode = POLICY_WARN;
	assert_int_equal(policy_decide(&in, &warn), 0);
	assert_int_equal(warn.verdict, POLICY_WARN_ONLY);
	assert_int_equal(warn.allowed, 1);
	assert_string_equal(warn.reason, "OverThreshold");
	assert_string_equal(warn.message, enforce.message);
}

static void test_warn_threshold(void **state)
{
	struct policy_input in = empty_input(24 * GI, 500 * GI); /* 524Gi: 81%, under 90% */
	struct policy_decision d;

	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_ALLOW_WARN);
	assert_int_equal(d.allowed, 1);
	assert_string_equal(d.reason, "WarnThreshold");
	assert_string_equal(
	    d.message,
	    "placing ns/p (24Gi) on n1 brings it to 524Gi of 640Gi GPU "
	    "memory (81 percent), above the 80 percent warning level; the limit is 90 percent "
	    "(576Gi)");

	/* At the warn level exactly: no warning. */
	in.used_bytes = 512 * GI - 24 * GI;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_ALLOW);

	/* A warn threshold at or above the threshold, or <= 0, disables the warning. */
	in.used_bytes = 500 * GI;
	in.warn_threshold = 0.9;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_ALLOW);
	in.warn_threshold = 0;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_ALLOW);
}

static void test_never_fits_per_gpu(void **state)
{
	struct policy_input in = empty_input(75 * GI, 0);
	struct policy_decision d;

	/* 75Gi on one 80Gi GPU is over its 72Gi budget however empty the node is. */
	in.max_per_gpu_bytes = 75 * GI;
	in.max_per_gpu_container = "vllm";
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_DENY_NEVER_FITS);
	assert_int_equal(d.allowed, 0);
	assert_string_equal(d.reason, "NeverFits");
	assert_string_equal(d.message,
	                    "ns/p can never fit on n1: container \"vllm\" declares 75Gi "
	                    "per GPU, above the 90 percent limit of one GPU's 80Gi (72Gi)");

	in.mode = POLICY_WARN;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_WARN_ONLY);
	assert_int_equal(d.allowed, 1);
	assert_string_equal(d.reason, "NeverFits");

	/* Exactly one GPU's budget fits. */
	in.mode = POLICY_ENFORCE;
	in.max_per_gpu_bytes = 72 * GI;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_ALLOW);
}

static void test_never_fits_whole_node(void **state)
{
	struct policy_input in = empty_input(600 * GI, 0);
	struct policy_decision d;

	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_DENY_NEVER_FITS);
	assert_string_equal(d.message,
	                    "ns/p can never fit on n1: it declares 600Gi, above the 90 percent "
	                    "limit of the node's 640Gi GPU memory (576Gi)");
}

static void test_fractional_threshold(void **state)
{
	struct policy_input in = empty_input(24 * GI, 580 * GI);
	struct policy_decision d;

	in.threshold = 0.925;
	in.warn_threshold = 0.5;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_DENY);
	assert_non_null(strstr(d.message, "above the 92.5 percent limit (592Gi)"));
	assert_int_equal(d.budget_bytes, 592 * GI);
}

static void test_many_consumers_capped(void **state)
{
	static struct policy_consumer cs[POLICY_TOP_CONSUMERS];
	struct policy_input in = empty_input(24 * GI, 600 * GI);
	struct policy_decision d;

	for (size_t i = 0; i < POLICY_TOP_CONSUMERS; i++) {
		memset(cs[i].name, 'a' + (int)i, POLICY_NAME_MAX - 1);
		cs[i].name[POLICY_NAME_MAX - 1] = '\0';
		cs[i].bytes = 10 * GI;
	}
	in.consumers = cs;
	in.n_consumers = POLICY_TOP_CONSUMERS;
	in.n_consumers_total = 40;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_DENY);
	assert_true(strlen(d.message) < POLICY_MSG_MAX);
	/* Names that do not fit are counted, never cut in half. */
	assert_non_null(strstr(d.message, ", ... and 38 more"));
	assert_null(strstr(d.message, "ccc"));

	/* Short names: the first five are named. */
	for (size_t i = 0; i < POLICY_TOP_CONSUMERS; i++)
		snprintf(cs[i].name, sizeof(cs[i].name), "ns/pod-%zu", i);
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_non_null(strstr(d.message, "already there: ns/pod-0 10Gi, ns/pod-1 10Gi, ns/pod-2 "
	                                  "10Gi, ns/pod-3 10Gi, ns/pod-4 10Gi, ... and 35 more"));
}

static void test_invalid_input(void **state)
{
	struct policy_input in = empty_input(GI, 0);
	struct policy_decision d;

	assert_int_equal(policy_decide(NULL, &d), -1);
	assert_int_equal(d.allowed, 0);
	assert_string_equal(d.message, "policy: invalid input: no input");
	in.threshold = 0;
	assert_int_equal(policy_decide(&in, &d), -1);
	assert_string_equal(d.message, "policy: invalid input: threshold outside (0,1]");
	in.threshold = 1.01;
	assert_int_equal(policy_decide(&in, &d), -1);
	in.threshold = NAN;
	assert_int_equal(policy_decide(&in, &d), -1);
	in = empty_input(GI, 0);
	in.capacity_bytes = 0;
	assert_int_equal(policy_decide(&in, &d), -1);
	assert_int_equal(d.allowed, 0);
	in = empty_input(GI, 0);
	in.warn_threshold = 2;
	assert_int_equal(policy_decide(&in, &d), -1);
	in = empty_input(GI, 0);
	in.n_consumers = 1;
	assert_int_equal(policy_decide(&in, &d), -1);

	/* Missing names are only cosmetic. */
	in = empty_input(600 * GI, 0);
	in.pod = NULL;
	in.node = NULL;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_non_null(strstr(d.message, "(unnamed pod) can never fit on (unnamed node)"));
}

static void test_saturation(void **state)
{
	struct policy_input in = empty_input(UINT64_MAX, UINT64_MAX);
	struct policy_decision d;

	in.capacity_bytes = UINT64_MAX;
	in.per_gpu_bytes = 0; /* unknown per-GPU size: no per-GPU check */
	in.max_per_gpu_bytes = UINT64_MAX;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.total_bytes, UINT64_MAX);
	assert_int_equal(d.verdict, POLICY_DENY_NEVER_FITS);

	in.demand_bytes = GI;
	in.used_bytes = UINT64_MAX;
	assert_int_equal(policy_decide(&in, &d), 0);
	assert_int_equal(d.verdict, POLICY_DENY);
	assert_non_null(strstr(d.message, "(100 percent)"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fixture_node_a_denied),
	    cmocka_unit_test(test_header_example_shape),
	    cmocka_unit_test(test_fits),
	    cmocka_unit_test(test_boundary),
	    cmocka_unit_test(test_warn_mode),
	    cmocka_unit_test(test_warn_threshold),
	    cmocka_unit_test(test_never_fits_per_gpu),
	    cmocka_unit_test(test_never_fits_whole_node),
	    cmocka_unit_test(test_fractional_threshold),
	    cmocka_unit_test(test_many_consumers_capped),
	    cmocka_unit_test(test_invalid_input),
	    cmocka_unit_test(test_saturation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
