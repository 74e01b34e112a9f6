/*
 * Unit tests for lib/core/policyset: a placement under the flags, the node's annotation and the
 * GPUMemoryPolicy objects selecting the node. Policies are written as the API server serves
 * them (JSON) and decoded by gpupolicy_parse. Covers precedence (annotation > policies > flags;
 * audit and warn policies never weaken the flags; the strictest enforcing threshold), the
 * three modes (refusal, warning, audit entry), and tiers including the seed's example: realtime
 * at most 60 percent of the node, batch refused while realtime declares more than 80 percent
 * of its share; reservations of unknown tier counted in every tier; on a MIG-mixed node a
 * tier's share is of the pod's pool (the whole GPUs, or a profile's slices).
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
#include "demand.h"
#include "gpupolicy.h"
#include "placement.h"
#include "policyset.h"

#include "fixture.h" /* after gpupolicy.h: fixture_policy */

#define MIB (1024ull * 1024)
#define GI  (1024ull * MIB)

/* One 80Gi GPU: the flags' 90 percent budget is 72Gi. */
static const struct capacity card = {
    .per_gpu_bytes = 80 * GI, .gpu_count = 1, .total_bytes = 80 * GI, .replicas = 1};

static const struct gpupolicy_flags flags = {0.9, 0.8, POLICY_ENFORCE};

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

/* A pod already on the node, of priority class pc (NULL: none). */
static struct placement_item pod_item(const char *key, uint64_t bytes, const char *pc)
{
	struct placement_item it = {.key = key, .bytes = bytes, .priority_class = pc};
	it.attrs_known = 1;
	return it;
}

struct run {
	const struct capacity *cap;
	struct placement_item *pods;
	size_t n_pods;
	struct placement_item *reserved;
	size_t n_reserved;
	struct gpupolicy **pols;
	size_t n_pols;
	const char *pc;                        /* the placed pod's priority class */
	const struct gpupolicy_labels *labels; /* the placed pod's labels (NULL: none) */
	uint64_t bytes;
	uint32_t pool;                       /* the placed pod's pool (0: CAPACITY_POOL_ANY) */
	uint64_t now_ms;                     /* the decision's clock (reservations expire by it) */
	const struct gpupolicy_flags *flags; /* NULL: flags (enforce, 0.9, warn 0.8) */
};

static struct policyset_result decide(const struct run *r)
{
	static struct policyset_result out;
	struct demand d = demand_of(r->bytes);
	d.pool = r->pool;
	struct placement_node node = {"gpu-a",     r->cap ? r->cap : &card, r->pods, r->n_pods,
	                              r->reserved, r->n_reserved,           NULL};
	struct placement_pod pod = {"ml/new", "ml/new", "uid-new", &d, 0, NULL};
	struct policyset_input in = {
	    .node = &node,
	    .pod = &pod,
	    .pod_namespace = "ml",
	    .pod_priority_class = r->pc,
	    .pod_labels = r->labels,
	    .policies = (const struct gpupolicy *const *)r->pols,
	    .n_policies = r->n_pols,
	    .flags = r->flags ? *r->flags : flags,
	    .now_ms = r->now_ms,
	};
	assert_int_equal(policyset_decide(&in, &out), 0);
	return out;
}

static void test_no_policy_is_the_flags(void **state)
{
	struct placement_item pods[] = {pod_item("ml/a", 60 * GI, NULL)};
	struct run r = {.pods = pods, .n_pods = 1, .bytes = 12 * GI};
	struct policyset_result res = decide(&r);

	assert_true(res.allowed); /* 72Gi: at the budget exactly */
	assert_true(res.reserve);
	assert_int_equal(res.main.reserve_bytes, 12 * GI);
	r.bytes = 12 * GI + 1;
	res = decide(&r);
	assert_false(res.allowed);
	assert_string_equal(res.reason, "OverThreshold");
	assert_null(res.policy);
	assert_null(strstr(res.message, "GPUMemoryPolicy"));
	(void)state;
}

static void test_enforcing_policy_replaces_the_flags(void **state)
{
	struct gpupolicy *strict =
	    fixture_policy("{\"metadata\":{\"name\":\"a100-pool\"},\"spec\":{"
	                   "\"threshold\":0.5,\"mode\":\"enforce\"}}");
	struct gpupolicy *looser =
	    fixture_policy("{\"metadata\":{\"name\":\"looser\"},\"spec\":{\"threshold\":0.95}}");
	struct gpupolicy *pols[] = {looser, strict};
	struct run r = {.pols = pols, .n_pols = 2, .bytes = 40 * GI};
	struct policyset_result res = decide(&r);

	assert_true(res.allowed); /* 40Gi = 50 percent of 80Gi: at the strictest budget */
	r.bytes = 40 * GI + 1;
	res = decide(&r);
	assert_false(res.allowed);
	assert_string_equal(res.policy, "a100-pool");
	assert_non_null(strstr(res.message, "above the 50 percent limit"));
	assert_non_null(strstr(res.message, "GPUMemoryPolicy \"a100-pool\""));
	/* a looser enforcing policy alone replaces the flags' 90 percent */
	r.pols = &looser;
	r.n_pols = 1;
	r.bytes = 76 * GI; /* 95 percent */
	res = decide(&r);
	assert_true(res.allowed);
	gpupolicy_free(strict);
	gpupolicy_free(looser);
	(void)state;
}

/* The threshold in force (policyset_threshold): annotation, strictest enforcing policy, flags;
 * the one the report and the node_limit_bytes gauge read. */
static void test_threshold_in_force(void **state)
{
	struct gpupolicy *strict =
	    fixture_policy("{\"metadata\":{\"name\":\"strict\"},\"spec\":{\"threshold\":0.5}}");
	struct gpupolicy *audit = fixture_policy("{\"metadata\":{\"name\":\"rollout\"},\"spec\":{"
	                                         "\"threshold\":0.3,\"mode\":\"audit\"}}");
	struct gpupolicy *warn = fixture_policy("{\"metadata\":{\"name\":\"soft\"},\"spec\":{"
	                                        "\"threshold\":0.4,\"mode\":\"warn\"}}");
	const struct gpupolicy *both[] = {audit, strict}, *soft[] = {warn};
	const struct gpupolicy_flags warn_flags = {0.9, 0, POLICY_WARN};
	struct capacity annotated = card;
	struct policyset_threshold t;

	policyset_threshold(NULL, 0, &flags, &card, &t);
	assert_true(t.threshold == 0.9 && t.policy == NULL && !t.from_node);
	assert_string_equal(t.source, "flags");
	policyset_threshold(NULL, 0, &flags, NULL, &t); /* capacity unknown: no annotation */
	assert_true(t.threshold == 0.9 && !t.from_node);
	policyset_threshold(both, 2, &flags, &card, &t);
	assert_true(t.threshold == 0.5 && t.policy == strict && !t.from_node);
	assert_string_equal(t.source, "strict");
	policyset_threshold(&both[0], 1, &flags, &card, &t); /* audit changes no limit */
	assert_true(t.threshold == 0.9 && t.policy == NULL);
	policyset_threshold(soft, 1, &flags, &card, &t); /* nor does warn, flags enforcing */
	assert_true(t.threshold == 0.9 && t.policy == NULL);
	policyset_threshold(soft, 1, &warn_flags, &card, &t); /* the flags warn: merged */
	assert_true(t.threshold == 0.4 && t.policy == warn);
	annotated.has_threshold = 1;
	annotated.threshold = 0.8;
	policyset_threshold(both, 2, &flags, &annotated, &t);
	assert_true(t.threshold == 0.8 && t.policy == NULL && t.from_node);
	assert_string_equal(t.source, "node annotation");
	gpupolicy_free(strict);
	gpupolicy_free(audit);
	gpupolicy_free(warn);
	(void)state;
}

static void test_annotation_beats_policies(void **state)
{
	struct capacity annotated = card;
	struct gpupolicy *strict =
	    fixture_policy("{\"metadata\":{\"name\":\"strict\"},\"spec\":{\"threshold\":0.5}}");
	struct run r = {.cap = &annotated, .pols = &strict, .n_pols = 1, .bytes = 60 * GI};

	annotated.has_threshold = 1;
	annotated.threshold = 0.8; /* 64Gi */
	assert_true(decide(&r).allowed);
	r.bytes = 64 * GI + 1;
	assert_false(decide(&r).allowed);
	gpupolicy_free(strict);
	(void)state;
}

static void test_audit_and_warn_never_weaken_the_flags(void **state)
{
	struct gpupolicy *audit = fixture_policy("{\"metadata\":{\"name\":\"rollout\"},\"spec\":{"
	                                         "\"threshold\":0.5,\"mode\":\"audit\"}}");
	struct gpupolicy *warn = fixture_policy(
	    "{\"metadata\":{\"name\":\"soon\"},\"spec\":{\"threshold\":0.6,\"mode\":\"warn\"}}");
	struct placement_item pods[] = {pod_item("ml/a", 10 * GI, NULL)};
	struct run r = {.pods = pods, .n_pods = 1, .pols = &audit, .n_pols = 1, .bytes = 35 * GI};
	struct policyset_result res = decide(&r);

	/* audit: allowed, one audit entry, no warning */
	assert_true(res.allowed);
	assert_int_equal(res.n_audit, 1);
	assert_int_equal(res.n_warnings, 0);
	assert_string_equal(res.audit[0].policy, "rollout");
	assert_string_equal(res.audit[0].reason, "OverThreshold");
	assert_non_null(strstr(res.audit[0].message, "above the 50 percent limit"));
	/* within the audit policy's threshold (10 + 30 = 40Gi): nothing to record */
	r.bytes = 30 * GI;
	assert_int_equal(decide(&r).n_audit, 0);
	/* the flags still enforce 90 percent beside an auditing policy */
	r.bytes = 62 * GI + 1;
	res = decide(&r);
	assert_false(res.allowed);
	assert_null(res.policy);
	/* warn: allowed with the policy's warning; the flags still enforce */
	r.pols = &warn;
	r.bytes = 40 * GI; /* 50Gi: above the warning policy's 48Gi */
	res = decide(&r);
	assert_true(res.allowed);
	assert_int_equal(res.n_warnings, 1);
	assert_non_null(strstr(res.warnings[0], "GPUMemoryPolicy \"soon\""));
	r.bytes = 62 * GI + 1;
	assert_false(decide(&r).allowed);
	gpupolicy_free(audit);
	gpupolicy_free(warn);
	(void)state;
}

/* The seed's example: realtime at most 60 percent of the card (48Gi); batch refused while
 * realtime declares more than 80 percent of its share (38.4Gi). */
static const char seed[] =
    "{\"metadata\":{\"name\":\"realtime-batch\",\"generation\":3},\"spec\":{"
    "\"threshold\":0.9,\"tiers\":["
    "{\"name\":\"realtime\",\"priorityClassNames\":[\"realtime\"],\"maxShare\":0.6},"
    "{\"name\":\"batch\",\"priorityClassNames\":[\"batch\"],"
    "\"yield\":{\"tier\":\"realtime\",\"above\":0.8}}]}}";

static void test_seed_tiers(void **state)
{
	struct gpupolicy *p = fixture_policy(seed);
	struct placement_item pods[3] = {pod_item("ml/rt-0", 30 * GI, "realtime"),
	                                 pod_item("ml/b-0", 10 * GI, "batch"),
	                                 pod_item("ml/other", 5 * GI, NULL)};
	struct run r = {.pods = pods, .n_pods = 3, .pols = &p, .n_pols = 1};
	struct policyset_result res;

	/* realtime up to 48Gi: 30 + 18 */
	r.pc = "realtime";
	r.bytes = 18 * GI;
	assert_true(decide(&r).allowed);
	r.bytes = 18 * GI + 1;
	res = decide(&r);
	assert_false(res.allowed);
	assert_string_equal(res.reason, "TierOverShare");
	assert_string_equal(res.policy, "realtime-batch");
	assert_non_null(strstr(res.message, "tier \"realtime\""));
	/* batch while realtime declares 30Gi (under 38.4Gi): allowed, however large, up to the
	 * node threshold */
	r.pc = "batch";
	r.bytes = 20 * GI;
	assert_true(decide(&r).allowed);
	/* realtime at exactly 80 percent of its share (floor of 38.4Gi): batch still allowed */
	pods[0].bytes = (48 * GI * 8) / 10;
	r.bytes = 1 * GI;
	assert_true(decide(&r).allowed);
	/* one byte more: batch refused, the message names both tiers */
	pods[0].bytes++;
	res = decide(&r);
	assert_false(res.allowed);
	assert_string_equal(res.reason, "TierYield");
	assert_non_null(strstr(res.message, "\"batch\""));
	assert_non_null(strstr(res.message, "\"realtime\""));
	/* a pod of no tier: the node threshold only */
	r.pc = NULL;
	r.bytes = 10 * GI;
	assert_true(decide(&r).allowed);
	gpupolicy_free(p);
	(void)state;
}

static void test_reservation_of_unknown_tier_counts_in_each(void **state)
{
	struct gpupolicy *p = fixture_policy(seed);
	struct placement_item pods[] = {pod_item("ml/rt-0", 30 * GI, "realtime")};
	struct placement_item resv[] = {{.key = "ml/admitting", .uid = "u-1", .bytes = 10 * GI}};
	struct run r = {.pods = pods,
	                .n_pods = 1,
	                .reserved = resv,
	                .n_reserved = 1,
	                .pols = &p,
	                .n_pols = 1,
	                .pc = "realtime",
	                .bytes = 8 * GI + 1};
	struct policyset_result res = decide(&r);

	/* 30 + 10 (its tier unknown: counted as realtime too) + 8Gi + 1 > 48Gi */
	assert_false(res.allowed);
	assert_string_equal(res.reason, "TierOverShare");
	/* once the cache shows it (a visible pod of the same uid), its own tier counts */
	struct placement_item both[] = {pods[0], pod_item("ml/admitting", 10 * GI, "batch")};
	both[1].uid = "u-1";
	r.pods = both;
	r.n_pods = 2;
	assert_true(decide(&r).allowed);
	gpupolicy_free(p);
	(void)state;
}

/* A reservation whose expiry is exactly the decision's time has expired: it counts in no tier
 * (nor against the threshold); one expiring a millisecond later still counts. */
static void test_reservation_expiring_now_counts_in_no_tier(void **state)
{
	struct gpupolicy *p = fixture_policy(seed);
	struct placement_item pods[] = {pod_item("ml/rt-0", 30 * GI, "realtime")};
	struct placement_item resv[] = {
	    {.key = "ml/admitted", .uid = "u-1", .bytes = 10 * GI, .expires_ms = 5000}};
	struct run r = {.pods = pods,
	                .n_pods = 1,
	                .reserved = resv,
	                .n_reserved = 1,
	                .pols = &p,
	                .n_pols = 1,
	                .pc = "realtime",
	                .bytes = 18 * GI,
	                .now_ms = 5000};
	struct policyset_result res = decide(&r);

	/* 30 + 18 is realtime's 48Gi budget exactly: the expired 10Gi is not in it */
	assert_true(res.allowed);
	assert_int_equal(res.main.reserved_bytes, 0);
	/* at 4999 it is live: 30 + 10 + 18 > 48Gi */
	r.now_ms = 4999;
	res = decide(&r);
	assert_false(res.allowed);
	assert_string_equal(res.reason, "TierOverShare");
	gpupolicy_free(p);
	(void)state;
}

static void test_tier_modes(void **state)
{
	struct gpupolicy *audit = fixture_policy(
	    "{\"metadata\":{\"name\":\"tiers-audit\"},\"spec\":{\"mode\":\"audit\",\"tiers\":["
	    "{\"name\":\"rt\",\"namespaces\":[\"ml\"],\"maxShare\":0.25}]}}");
	struct gpupolicy *warn = fixture_policy(
	    "{\"metadata\":{\"name\":\"tiers-warn\"},\"spec\":{\"mode\":\"warn\",\"tiers\":["
	    "{\"name\":\"rt\",\"namespaces\":[\"ml\"],\"maxShare\":0.25}]}}");
	struct run r = {.pols = &audit, .n_pols = 1, .bytes = 30 * GI};
	struct policyset_result res = decide(&r);

	assert_true(res.allowed);
	assert_int_equal(res.n_audit, 1);
	assert_string_equal(res.audit[0].reason, "TierOverShare");
	assert_string_equal(res.audit[0].policy, "tiers-audit");
	r.pols = &warn;
	res = decide(&r);
	assert_true(res.allowed);
	assert_int_equal(res.n_audit, 0);
	assert_int_equal(res.n_warnings, 1);
	assert_non_null(strstr(res.warnings[0], "tier \"rt\""));
	gpupolicy_free(audit);
	gpupolicy_free(warn);
	(void)state;
}

/* A MIG-mixed node: one whole 80Gi card and 2 slices of profile 3g.40gb (80Gi together):
 * 160Gi in all. A tier's maxShare is a share of the pod's pool, not of the node's total: 50
 * percent is 40Gi of the whole card or 40Gi of the slices, never 80Gi. */
static const struct capacity mig_mixed = {.per_gpu_bytes = 80 * GI,
                                          .gpu_count = 1,
                                          .total_bytes = 160 * GI,
                                          .replicas = 1,
                                          .piece_bytes = 80 * GI,
                                          .mig = CAPACITY_MIG_MIXED,
                                          .n_profiles = 1,
                                          .profiles = {{"3g.40gb", 2, 40 * GI, 1}}};

static void test_tier_share_of_the_pods_pool_on_mig_mixed(void **state)
{
	struct gpupolicy *p = fixture_policy(
	    "{\"metadata\":{\"name\":\"half\"},\"spec\":{\"tiers\":[{\"name\":\"rt\","
	    "\"priorityClassNames\":[\"realtime\"],\"maxShare\":0.5}]}}");
	uint32_t slices = capacity_pool_id("3g.40gb");
	struct run r = {.cap = &mig_mixed, .pols = &p, .n_pols = 1, .pc = "realtime"};
	struct policyset_result res;

	/* Whole GPUs, nothing on the node: 50Gi is within the 72Gi threshold of the card but over
	 * the tier's 40Gi (with the node's 160Gi as the base it would pass an 80Gi budget). */
	r.pool = CAPACITY_POOL_WHOLE;
	r.bytes = 50 * GI;
	res = decide(&r);
	assert_false(res.allowed);
	assert_string_equal(res.reason, "TierOverShare");
	assert_non_null(strstr(res.message, "(40Gi)"));
	r.bytes = 40 * GI;
	assert_true(decide(&r).allowed);
	r.bytes = 40 * GI + 1;
	assert_false(decide(&r).allowed);

	/* The slices: 20Gi of the tier there already, 30Gi on the whole card (another pool: not
	 * counted). 20 + 20 is the slices' 40Gi budget; one byte more is over it. */
	struct placement_item pods[] = {pod_item("ml/rt-slice", 20 * GI, "realtime"),
	                                pod_item("ml/rt-card", 30 * GI, "realtime")};
	pods[0].pool = slices;
	pods[1].pool = CAPACITY_POOL_WHOLE;
	r.pods = pods;
	r.n_pods = 2;
	r.pool = slices;
	r.bytes = 20 * GI;
	assert_true(decide(&r).allowed);
	r.bytes = 20 * GI + 1;
	res = decide(&r);
	assert_false(res.allowed);
	assert_string_equal(res.reason, "TierOverShare");
	assert_non_null(strstr(res.message, "(40Gi)"));
	gpupolicy_free(p);
	(void)state;
}

/* --mode warn: the flags' own check is a warn check, and --warn-threshold still gives the early
 * warning of an allowed placement past it (as before policies: placement_decide at the flags'
 * warn threshold), and so does an enforcing policy that only sets warnThreshold. */
static void test_flags_warn_mode_keeps_the_early_warning(void **state)
{
	static const struct gpupolicy_flags warn_flags = {0.9, 0.8, POLICY_WARN};
	struct placement_item pods[] = {pod_item("ml/a", 60 * GI, NULL)};
	struct run r = {.pods = pods, .n_pods = 1, .bytes = 6 * GI, .flags = &warn_flags};
	struct policyset_result res = decide(&r);

	assert_true(res.allowed); /* 66Gi: 82 percent, past the 80 percent warning level */
	assert_int_equal(res.n_warnings, 1);
	assert_non_null(strstr(res.warnings[0], "80 percent warning level"));
	/* an enforcing policy asking only for earlier warnings: at 50 percent */
	struct gpupolicy *early =
	    fixture_policy("{\"metadata\":{\"name\":\"early\"},\"spec\":{\"warnThreshold\":0.5}}");
	struct gpupolicy *pols[] = {early};
	struct run e = {.pols = pols, .n_pols = 1, .bytes = 45 * GI, .flags = &warn_flags};
	res = decide(&e);
	assert_true(res.allowed);
	assert_int_equal(res.n_warnings, 1);
	assert_non_null(strstr(res.warnings[0], "50 percent warning level"));
	gpupolicy_free(early);
	(void)state;
}

/* A policy may be named "flags" (a DNS subdomain like any): its refusal is still a policy's,
 * named in the message and in res.policy, not taken for the --threshold flag's. */
static void test_policy_named_flags(void **state)
{
	struct gpupolicy *p =
	    fixture_policy("{\"metadata\":{\"name\":\"flags\"},\"spec\":{\"threshold\":0.5}}");
	struct run r = {.pols = &p, .n_pols = 1, .bytes = 40 * GI + 1};
	struct policyset_result res = decide(&r);

	assert_false(res.allowed);
	assert_non_null(res.policy);
	assert_string_equal(res.policy, "flags");
	assert_non_null(strstr(res.message, "; GPUMemoryPolicy \"flags\""));
	gpupolicy_free(p);
	(void)state;
}

/* xorshift32: the property test's draws, the same on every libc. */
static uint32_t next(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* Attack on issue 22: the watch cache may hold a bound pod without its labels or priority
 * class (read while no tier wanted them); its item then has attrs_known 0 and counts in every
 * tier. That must be the safe side for every tier rule: whatever the policies (tiers by
 * priority class, by labels, by namespace; maxShare budgets; yield; pods of no tier) and
 * whichever pods are unknown, a placement refused with every pod's attributes known is refused
 * with some unknown. 20,000 random worlds, a fixed seed. */
static void test_unknown_attrs_never_admit_more(void **state)
{
	static const char *const pol_json[] = {
	    "{\"metadata\":{\"name\":\"by-pc\"},\"spec\":{\"tiers\":["
	    "{\"name\":\"rt\",\"priorityClassNames\":[\"high\"],\"maxShare\":0.5},"
	    "{\"name\":\"bt\",\"priorityClassNames\":[\"low\"],\"maxShare\":0.3,"
	    "\"yield\":{\"tier\":\"rt\",\"above\":0.6}}]}}",
	    "{\"metadata\":{\"name\":\"by-label\"},\"spec\":{\"tiers\":["
	    "{\"name\":\"rt\",\"podSelector\":{\"matchLabels\":{\"tier\":\"rt\"}},"
	    "\"maxShare\":0.4},{\"name\":\"bt\",\"podSelector\":{\"matchExpressions\":[{"
	    "\"key\":\"tier\",\"operator\":\"NotIn\",\"values\":[\"rt\"]}]},"
	    "\"yield\":{\"tier\":\"rt\",\"above\":0.5}}]}}",
	    "{\"metadata\":{\"name\":\"mixed\"},\"spec\":{\"threshold\":0.95,\"tiers\":["
	    "{\"name\":\"ns\",\"namespaces\":[\"ml\"],\"priorityClassNames\":[\"high\"],"
	    "\"maxShare\":0.35},{\"name\":\"lab\",\"podSelector\":{\"matchLabels\":{"
	    "\"tier\":\"bt\"}},\"maxShare\":0.25}]}}",
	};
	static const char *const pcs[] = {NULL, "high", "low"};
	static const char *const kv_rt[] = {"tier", "rt"}, *const kv_bt[] = {"tier", "bt"};
	static const struct gpupolicy_labels lab_rt = {kv_rt, 1}, lab_bt = {kv_bt, 1};
	static const struct gpupolicy_labels *const labs[] = {NULL, &lab_rt, &lab_bt};
	static const char *const keys[] = {"ml/p0", "ml/p1", "web/p2", "ml/p3", "web/p4", "ml/p5"};
	struct gpupolicy *all[3];
	uint32_t rng = 22;
	size_t refused_known = 0, flips = 0;
	(void)state;

	for (size_t i = 0; i < 3; i++)
		all[i] = fixture_policy(pol_json[i]);
	for (int iter = 0; iter < 20000; iter++) {
		struct placement_item known[6], unknown[6];
		size_t n = (size_t)next(&rng) % 7;
		for (size_t i = 0; i < n; i++) {
			known[i] = pod_item(keys[i], (uint64_t)(next(&rng) % 25 + 1) * GI,
			                    pcs[next(&rng) % 3]);
			known[i].labels = labs[next(&rng) % 3];
			unknown[i] = known[i];
			if (next(&rng) % 2) { /* read while no tier wanted them: none kept */
				unknown[i].attrs_known = 0;
				unknown[i].priority_class = NULL;
				unknown[i].labels = NULL;
			}
		}
		struct gpupolicy *pols[3];
		size_t n_pols = 0;
		for (size_t i = 0; i < 3; i++)
			if (next(&rng) % 2)
				pols[n_pols++] = all[i];
		/* the placed pod's own attributes are always read (unbound, or from the API) */
		struct run r = {.pods = known,
		                .n_pods = n,
		                .pols = pols,
		                .n_pols = n_pols,
		                .pc = pcs[next(&rng) % 3],
		                .labels = labs[next(&rng) % 3],
		                .bytes = (uint64_t)(next(&rng) % 30 + 1) * GI};
		int allowed_known = decide(&r).allowed;
		r.pods = unknown;
		int allowed_unknown = decide(&r).allowed;
		if (!allowed_known) {
			refused_known++;
			if (allowed_unknown)
				fail_msg("iteration %d: refused with attributes known, admitted "
				         "with some "
				         "unknown",
				         iter);
		} else if (!allowed_unknown) {
			flips++; /* the safe side's cost */
		}
	}
	/* the worlds exercise both sides */
	assert_true(refused_known > 1000 && flips > 100);
	for (size_t i = 0; i < 3; i++)
		gpupolicy_free(all[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_policy_is_the_flags),
	    cmocka_unit_test(test_enforcing_policy_replaces_the_flags),
	    cmocka_unit_test(test_threshold_in_force),
	    cmocka_unit_test(test_annotation_beats_policies),
	    cmocka_unit_test(test_audit_and_warn_never_weaken_the_flags),
	    cmocka_unit_test(test_seed_tiers),
	    cmocka_unit_test(test_reservation_of_unknown_tier_counts_in_each),
	    cmocka_unit_test(test_reservation_expiring_now_counts_in_no_tier),
	    cmocka_unit_test(test_tier_modes),
	    cmocka_unit_test(test_tier_share_of_the_pods_pool_on_mig_mixed),
	    cmocka_unit_test(test_flags_warn_mode_keeps_the_early_warning),
	    cmocka_unit_test(test_policy_named_flags),
	    cmocka_unit_test(test_unknown_attrs_never_admit_more),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
