/*
 * Unit tests for lib/core/core: core_decide(), the one entry point. Tables over one 80Gi card
 * (flags 0.9: a 72Gi limit): the threshold in force and its source without a pod (flags, the
 * node's annotation, an enforcing policy; a warning policy changes no limit) and on a node of
 * unknown capacity; with a pod, the verdict (allowed, reason, refusing policy) and the figures
 * (limit, used, free) against their closed form, with and without words; the largest fit by
 * the core's bisection (admitted at it, one byte more refused, by the same entry point); the
 * tiers' figures; the errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "capacity.h"
#include "core.h"
#include "demand.h"
#include "gpupolicy.h"
#include "placement.h"

#include "fixture.h" /* after gpupolicy.h: fixture_policy */

#define MIB (1024ull * 1024)
#define GI  (1024ull * MIB)

static const struct capacity card = {
    .per_gpu_bytes = 80 * GI, .gpu_count = 1, .total_bytes = 80 * GI, .replicas = 1};

static const struct gpupolicy_flags flags = {0.9, 0.8, POLICY_ENFORCE};

/* A pod declaring bytes on one GPU, as demand_from_pod() gives a GPU_MEMORY_LIMIT. */
static void declared(uint64_t bytes, struct demand *d)
{
	memset(d, 0, sizeof(*d));
	d->status = DEMAND_OK;
	d->bytes = bytes;
	d->gpus = 1;
	d->max_per_gpu_bytes = bytes;
	snprintf(d->max_per_gpu_container, sizeof(d->max_per_gpu_container), "c");
	d->pool = CAPACITY_POOL_WHOLE;
	d->source = DEMAND_SRC_DECLARED;
}

static int n_probed;

static int probe(void *ctx, uint64_t bytes, struct demand *out)
{
	(void)ctx;
	n_probed++;
	declared(bytes, out);
	return 1;
}

static int probe_fails(void *ctx, uint64_t bytes, struct demand *out)
{
	(void)ctx;
	declared(bytes, out);
	return -1;
}

struct node_row {
	const char *what;
	double annotation;    /* > 0: the node's threshold annotation */
	const char *policies; /* NULL, or one policy's JSON */
	int no_capacity;
	double threshold; /* in force */
	const char *source;
	int from_node, from_policy;
	uint64_t limit_bytes;
};

/* Without a pod: the threshold in force, its source, and capacity x it (the gauge's limit). */
static void test_node_only(void **state)
{
	static const struct node_row rows[] = {
	    {"flags", 0, NULL, 0, 0.9, "flags", 0, 0, 77309411328ull}, /* floor(80Gi x 0.9) */
	    {"annotation", 0.5, NULL, 0, 0.5, "node annotation", 1, 0, 40 * GI},
	    {"annotation beats policy", 0.5,
	     "{\"metadata\":{\"name\":\"strict\"},\"spec\":{\"threshold\":0.25}}", 0, 0.5,
	     "node annotation", 1, 0, 40 * GI},
	    {"enforcing policy", 0,
	     "{\"metadata\":{\"name\":\"strict\"},\"spec\":{\"threshold\":0.25}}", 0, 0.25,
	     "strict", 0, 1, 20 * GI},
	    {"warning policy", 0,
	     "{\"metadata\":{\"name\":\"soft\"},\"spec\":{\"threshold\":0.25,\"mode\":\"warn\"}}",
	     0, 0.9, "flags", 0, 0, 77309411328ull},
	    {"no capacity", 0, "{\"metadata\":{\"name\":\"strict\"},\"spec\":{\"threshold\":0.25}}",
	     1, 0.25, "strict", 0, 1, 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct node_row *r = &rows[i];
		struct capacity cap = card;
		struct gpupolicy *p = r->policies ? fixture_policy(r->policies) : NULL;
		const struct gpupolicy *sel[1] = {p};
		struct placement_node node = {.name = "gpu-a", .cap = r->no_capacity ? NULL : &cap};
		struct core_input in = {
		    .node = &node, .policies = sel, .n_policies = p != NULL, .flags = flags};
		struct core_verdict v;

		if (r->annotation > 0) {
			cap.has_threshold = 1;
			cap.threshold = r->annotation;
		}
		assert_int_equal(core_decide(&in, &v), 0);
		if (v.decided || v.ps.in_force.threshold != r->threshold ||
		    strcmp(v.ps.in_force.source, r->source) != 0 ||
		    v.ps.in_force.from_node != r->from_node ||
		    (v.ps.in_force.policy != NULL) != r->from_policy ||
		    v.limit_bytes != r->limit_bytes || v.free_bytes != r->limit_bytes)
			fail_msg("%s: threshold %g from %s (node %d), limit %llu; want %g from %s, "
			         "%llu",
			         r->what, v.ps.in_force.threshold, v.ps.in_force.source,
			         v.ps.in_force.from_node, (unsigned long long)v.limit_bytes,
			         r->threshold, r->source, (unsigned long long)r->limit_bytes);
		gpupolicy_free(p);
	}
}

struct pod_row {
	const char *what;
	uint64_t used;        /* one visible pod of that many bytes (0: none) */
	uint64_t reserved;    /* one reservation of that many bytes (0: none) */
	uint64_t bytes;       /* the pod's declaration */
	const char *policies; /* NULL, or one policy's JSON */
	int allowed;
	const char *reason;
	const char *policy; /* the refusing policy, NULL: none */
	uint64_t limit_bytes, used_bytes, free_bytes;
};

/* With a pod: the verdict and its figures; the same verdict without words. */
static void test_pod_verdicts(void **state)
{
	static const char half[] =
	    "{\"metadata\":{\"name\":\"half\"},\"spec\":{\"threshold\":0.5}}";
	static const struct pod_row rows[] = {
	    {"empty node", 0, 0, 10 * GI, NULL, 1, "Fits", NULL, 77309411328ull, 0, 77309411328ull},
	    {"at the limit", 30 * GI, 0, 77309411328ull - 30 * GI, NULL, 1, "WarnThreshold", NULL,
	     77309411328ull, 30 * GI, 77309411328ull - 30 * GI},
	    {"one byte over", 30 * GI, 0, 77309411328ull - 30 * GI + 1, NULL, 0, "OverThreshold",
	     NULL, 77309411328ull, 30 * GI, 77309411328ull - 30 * GI},
	    {"reservation counts", 30 * GI, 30 * GI, 20 * GI, NULL, 0, "OverThreshold", NULL,
	     77309411328ull, 60 * GI, 77309411328ull - 60 * GI},
	    {"never fits", 0, 0, 73 * GI, NULL, 0, "NeverFits", NULL, 77309411328ull, 0,
	     77309411328ull},
	    {"over the limit already", 75 * GI, 0, 1 * GI, NULL, 0, "OverThreshold", NULL,
	     77309411328ull, 75 * GI, 0},
	    {"a policy's limit", 30 * GI, 0, 10 * GI + 1, half, 0, "OverThreshold", "half", 40 * GI,
	     30 * GI, 10 * GI},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct pod_row *r = &rows[i];
		struct gpupolicy *p = r->policies ? fixture_policy(r->policies) : NULL;
		const struct gpupolicy *sel[1] = {p};
		struct placement_item vis = {.key = "ml/a", .uid = "uid-a", .bytes = r->used};
		struct placement_item res = {.key = "ml/r", .uid = "uid-r", .bytes = r->reserved};
		struct placement_node node = {.name = "gpu-a",
		                              .cap = &card,
		                              .pods = &vis,
		                              .n_pods = r->used > 0,
		                              .reserved = &res,
		                              .n_reserved = r->reserved > 0};
		struct demand d;
		struct placement_pod pod = {.name = "ml/new", .key = "ml/new", .uid = "uid-new"};
		struct core_input in = {.node = &node,
		                        .pod = &pod,
		                        .pod_namespace = "ml",
		                        .policies = sel,
		                        .n_policies = p != NULL,
		                        .flags = flags};
		static struct core_verdict v, quiet;

		declared(r->bytes, &d);
		pod.demand = &d;
		assert_int_equal(core_decide(&in, &v), 0);
		if (!v.decided || v.ps.allowed != r->allowed ||
		    strcmp(v.ps.reason, r->reason) != 0 ||
		    (r->policy == NULL) != (v.ps.policy == NULL) ||
		    (r->policy && strcmp(r->policy, v.ps.policy) != 0) ||
		    v.limit_bytes != r->limit_bytes || v.used_bytes != r->used_bytes ||
		    v.free_bytes != r->free_bytes)
			fail_msg("%s: allowed %d %s (policy %s), limit %llu used %llu free %llu",
			         r->what, v.ps.allowed, v.ps.reason,
			         v.ps.policy ? v.ps.policy : "-", (unsigned long long)v.limit_bytes,
			         (unsigned long long)v.used_bytes,
			         (unsigned long long)v.free_bytes);
		if (!r->allowed)
			assert_true(strlen(v.ps.message) > 0);
		assert_int_equal(v.ps.reserve, r->allowed);
		/* Without words: the same verdict and figures, no message. */
		in.opts = CORE_NO_WORDS;
		assert_int_equal(core_decide(&in, &quiet), 0);
		assert_int_equal(quiet.ps.allowed, v.ps.allowed);
		assert_string_equal(quiet.ps.reason, v.ps.reason);
		assert_int_equal(quiet.limit_bytes, v.limit_bytes);
		assert_int_equal(quiet.used_bytes, v.used_bytes);
		assert_int_equal(quiet.free_bytes, v.free_bytes);
		assert_string_equal(quiet.ps.main.decision.message, "");
		gpupolicy_free(p);
	}
}

/* The verdict in brief (core_brief, the extender's node reasons): its class and words, from
 * the figures of a verdict decided without words. */
static void test_brief(void **state)
{
	static const char half[] =
	    "{\"metadata\":{\"name\":\"half\"},\"spec\":{\"threshold\":0.5}}";
	static const struct {
		const char *what;
		uint64_t used, bytes;
		const char *policy;
		size_t n_in_flight;
		enum core_brief brief;
		const char *text;
	} rows[] = {
	    {"fits", 30 * GI, 10 * GI, NULL, 0, CORE_BRIEF_FITS, ""},
	    {"over", 30 * GI, 50 * GI, NULL, 0, CORE_BRIEF_REFUSED,
	     "needs 50Gi, 42Gi free of the 90 percent limit"},
	    {"over, pods in flight", 30 * GI, 50 * GI, NULL, 2, CORE_BRIEF_REFUSED,
	     "needs 50Gi, 42Gi free of the 90 percent limit, counting 20Gi of 2 pods whose "
	     "Binding is in flight"},
	    {"never fits", 0, 73 * GI, NULL, 1, CORE_BRIEF_NEVER,
	     "needs 73Gi, above the 90 percent limit of the node's 80Gi GPU memory"},
	    {"a policy's limit", 30 * GI, 20 * GI, half, 0, CORE_BRIEF_REFUSED,
	     "needs 20Gi, 10Gi free of the 50 percent limit; GPUMemoryPolicy \"half\""},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct gpupolicy *p = rows[i].policy ? fixture_policy(rows[i].policy) : NULL;
		const struct gpupolicy *sel[1] = {p};
		struct placement_item vis = {.key = "ml/a", .uid = "uid-a", .bytes = rows[i].used};
		struct placement_node node = {
		    .name = "gpu-a", .cap = &card, .pods = &vis, .n_pods = rows[i].used > 0};
		struct demand d;
		struct placement_pod pod = {.name = "ml/new", .key = "ml/new", .uid = "uid-new"};
		struct core_input in = {.node = &node,
		                        .pod = &pod,
		                        .pod_namespace = "ml",
		                        .policies = sel,
		                        .n_policies = p != NULL,
		                        .flags = flags,
		                        .opts = CORE_NO_WORDS};
		static struct core_verdict v;
		char text[CORE_BRIEF_MAX], small[8];

		declared(rows[i].bytes, &d);
		pod.demand = &d;
		assert_int_equal(core_decide(&in, &v), 0);
		enum core_brief b = core_brief(&v, rows[i].n_in_flight,
		                               rows[i].n_in_flight * 10 * GI, text, sizeof(text));
		if (b != rows[i].brief || strcmp(text, rows[i].text) != 0)
			fail_msg("%s: brief %d \"%s\"", rows[i].what, (int)b, text);
		/* cut to the buffer, never past it */
		core_brief(&v, rows[i].n_in_flight, 0, small, sizeof(small));
		assert_true(strlen(small) < sizeof(small));
		gpupolicy_free(p);
	}
}

/* The pod of the largest fit is admitted by core_decide, one byte more refused. */
static void assert_edge(struct core_input in, uint64_t edge)
{
	struct demand d;
	struct placement_pod pod = *in.pod;
	static struct core_verdict v;

	in.pod = &pod;
	in.opts = CORE_NO_WORDS;
	pod.demand = &d;
	declared(edge, &d);
	assert_int_equal(core_decide(&in, &v), 0);
	assert_true(v.ps.allowed);
	declared(edge + 1, &d);
	assert_int_equal(core_decide(&in, &v), 0);
	assert_false(v.ps.allowed);
}

static void test_largest_fit(void **state)
{
	static const char half[] =
	    "{\"metadata\":{\"name\":\"half\"},\"spec\":{\"threshold\":0.5}}";
	struct gpupolicy *p = fixture_policy(half);
	const struct gpupolicy *sel[1] = {p};
	struct capacity eight = {
	    .per_gpu_bytes = 80 * GI, .gpu_count = 8, .total_bytes = 640 * GI, .replicas = 1};
	struct placement_item vis = {.key = "ml/a", .uid = "uid-a", .bytes = 30 * GI};
	struct placement_node node = {.name = "gpu-a", .cap = &card, .pods = &vis, .n_pods = 1};
	struct demand d;
	struct placement_pod pod = {.name = "(probe)/p", .key = "(probe)/p", .demand = &d};
	struct core_input in = {.node = &node,
	                        .pod = &pod,
	                        .flags = flags,
	                        .opts = CORE_NO_WORDS | CORE_LARGEST_FIT,
	                        .probe = probe};
	static struct core_verdict v;

	(void)state;
	declared(DEMAND_MIN_BYTES, &d);
	/* the node's limit binds: 72Gi - 30Gi */
	assert_int_equal(core_decide(&in, &v), 0);
	assert_int_equal(v.largest_fit_bytes, 77309411328ull - 30 * GI);
	assert_true(n_probed > 30); /* a bisection, not a closed form */
	assert_edge(in, v.largest_fit_bytes);
	/* a policy's limit binds: 40Gi - 30Gi */
	in.policies = sel;
	in.n_policies = 1;
	assert_int_equal(core_decide(&in, &v), 0);
	assert_int_equal(v.largest_fit_bytes, 10 * GI);
	assert_edge(in, v.largest_fit_bytes);
	/* one GPU's limit binds on 8 cards: 0.5 x 80Gi */
	node.cap = &eight;
	assert_int_equal(core_decide(&in, &v), 0);
	assert_int_equal(v.largest_fit_bytes, 40 * GI);
	assert_edge(in, v.largest_fit_bytes);
	/* nothing fits: 0 */
	node.cap = &card;
	vis.bytes = 40 * GI;
	assert_int_equal(core_decide(&in, &v), 0);
	assert_false(v.ps.allowed);
	assert_int_equal(v.largest_fit_bytes, 0);
	/* without CORE_LARGEST_FIT: not computed */
	vis.bytes = 30 * GI;
	in.opts = CORE_NO_WORDS;
	n_probed = 0;
	assert_int_equal(core_decide(&in, &v), 0);
	assert_int_equal(v.largest_fit_bytes, 0);
	assert_int_equal(n_probed, 0);
	/* a probe that fails */
	in.opts = CORE_NO_WORDS | CORE_LARGEST_FIT;
	in.probe = probe_fails;
	assert_int_equal(core_decide(&in, &v), CORE_EPROBE);
	assert_int_equal(v.limit_bytes, 40 * GI); /* the other figures are there */
	gpupolicy_free(p);
}

/* Every tier of the selecting policies: declared (a reservation of unknown tier in each) and
 * budget; at most tiers_cap written. */
static void test_tiers(void **state)
{
	struct gpupolicy *p = fixture_policy(
	    "{\"metadata\":{\"name\":\"realtime-batch\"},\"spec\":{\"threshold\":0.9,\"tiers\":["
	    "{\"name\":\"realtime\",\"priorityClassNames\":[\"realtime\"],\"maxShare\":0.6},"
	    "{\"name\":\"batch\",\"priorityClassNames\":[\"batch\"],"
	    "\"yield\":{\"tier\":\"realtime\",\"above\":0.8}}]}}");
	const struct gpupolicy *sel[1] = {p};
	struct placement_item pods[2] = {
	    {.key = "ml/rt", .bytes = 30 * GI, .priority_class = "realtime", .attrs_known = 1},
	    {.key = "ml/b", .bytes = 10 * GI, .priority_class = "batch", .attrs_known = 1}};
	struct placement_item resv = {.key = "ml/r", .bytes = 2 * GI};
	struct placement_node node = {.name = "gpu-a",
	                              .cap = &card,
	                              .pods = pods,
	                              .n_pods = 2,
	                              .reserved = &resv,
	                              .n_reserved = 1};
	struct demand d;
	struct placement_pod pod = {.name = "(probe)/p", .key = "(probe)/p", .demand = &d};
	struct core_tier t[2];
	struct core_input in = {.node = &node,
	                        .pod = &pod,
	                        .policies = sel,
	                        .n_policies = 1,
	                        .flags = flags,
	                        .opts = CORE_NO_WORDS | CORE_TIERS,
	                        .tiers = t,
	                        .tiers_cap = 2};
	static struct core_verdict v;

	(void)state;
	declared(DEMAND_MIN_BYTES, &d);
	assert_int_equal(core_decide(&in, &v), 0);
	assert_int_equal(v.n_tiers, 2);
	assert_string_equal(t[0].policy, "realtime-batch");
	assert_string_equal(t[0].tier, "realtime");
	assert_int_equal(t[0].declared_bytes, 32 * GI);
	assert_true(t[0].has_budget);
	assert_int_equal(t[0].budget_bytes, 48 * GI);
	assert_string_equal(t[1].tier, "batch");
	assert_int_equal(t[1].declared_bytes, 12 * GI);
	assert_false(t[1].has_budget);
	assert_int_equal(v.used_bytes, 42 * GI);
	in.tiers_cap = 1;
	assert_int_equal(core_decide(&in, &v), 0);
	assert_int_equal(v.n_tiers, 1);
	gpupolicy_free(p);
}

static void test_errors(void **state)
{
	struct placement_node node = {.name = "gpu-a", .cap = &card};
	struct demand d;
	struct placement_pod pod = {.name = "ml/new", .key = "ml/new", .demand = &d};
	struct core_input in = {.node = NULL, .pod = &pod, .flags = flags};
	static struct core_verdict v;

	(void)state;
	declared(10 * GI, &d);
	assert_int_equal(core_decide(NULL, &v), CORE_EINVAL);
	assert_int_equal(core_decide(&in, &v), CORE_EINVAL); /* no node */
	assert_true(v.ps.invalid_input);
	assert_string_equal(v.ps.main.decision.reason, "InvalidInput");
	in.node = &node;
	in.n_policies = 1; /* policies NULL */
	assert_int_equal(core_decide(&in, &v), CORE_EINVAL);
	in.n_policies = 0;
	in.opts = CORE_LARGEST_FIT; /* no probe */
	assert_int_equal(core_decide(&in, &v), CORE_EINVAL);
	in.opts = CORE_TIERS;
	in.tiers_cap = 1; /* tiers NULL */
	assert_int_equal(core_decide(&in, &v), CORE_EINVAL);
	in.opts = 0;
	in.tiers_cap = 0;
	d.status = DEMAND_INVALID; /* the decision refuses it */
	assert_int_equal(core_decide(&in, &v), CORE_EINVAL);
	assert_true(v.ps.invalid_input);
	assert_false(v.ps.allowed);
	assert_true(strlen(v.ps.main.decision.message) > 0);
	assert_string_equal(v.ps.in_force.source, "flags"); /* in force whatever the input */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_node_only), cmocka_unit_test(test_pod_verdicts),
	    cmocka_unit_test(test_brief),     cmocka_unit_test(test_largest_fit),
	    cmocka_unit_test(test_tiers),     cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
