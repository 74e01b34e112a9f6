/*
 * Fuzz target: GPUMemoryPolicy decoding and use (lib/core/gpupolicy.h). The input is JSON
 * text; whatever parses as a policy is then matched and applied with numbers taken from the
 * input's bytes.
 * Properties: a refusal is GPUPOLICY_EINVAL with a terminated reason and no policy (the same
 * answer into a short err or none); an accepted policy keeps every rule of the header (caps,
 * DNS names, ratios in (0,1], yield to another tier with a maxShare); a selector on no labels
 * matches exactly when it has no In and no Exists requirement; tier_of answers -1 or a tier
 * whose criteria hold, never after a catch-all tier; resolve gives 1..3 checks, one per mode,
 * in mode order, the annotation alone when there is one, an enforcing policy's threshold
 * first when it sets one; check_tiers allows a tier exactly at its budget, is monotone in the
 * demand, and its messages have no '%' and are never cut.
 */
#include <math.h>

#include "fuzz.h"
#include "gpupolicy.h"

/* A splitmix64 stream seeded by the input: the numbers the policy is used with. */
static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int dns_label(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

static int ratio_ok(double r)
{
	return r > 0.0 && r <= 1.0;
}

static void check_selector(const struct labelsel *sel)
{
	int needs_label = 0;

	if (sel->n > GPUPOLICY_EXPR_MAX || (sel->n > 0 && sel->reqs == NULL))
		fuzz_fail("selector of %zu requirements", sel->n);
	for (size_t i = 0; i < sel->n; i++) {
		const struct labelsel_req *r = &sel->reqs[i];
		int listed = r->op == LABELSEL_IN || r->op == LABELSEL_NOTIN;

		if (r->key == NULL || r->key[0] == '\0' || r->n_values > GPUPOLICY_LIST_MAX ||
		    (listed && r->n_values == 0) || (!listed && r->n_values != 0))
			fuzz_fail("requirement %zu breaks the LabelSelector rules", i);
		needs_label |= r->op == LABELSEL_IN || r->op == LABELSEL_EXISTS;
	}
	if (labelsel_match(sel, NULL) == needs_label)
		fuzz_fail("a selector on no labels: match %d with In/Exists %d",
		          labelsel_match(sel, NULL), needs_label);
}

static void check_policy(const struct gpupolicy *p)
{
	if (p->name[0] == '\0' || strchr(p->name, '%') != NULL || p->generation < 0 ||
	    p->n_tiers > GPUPOLICY_TIERS_MAX || p->mode > GPUPOLICY_AUDIT)
		fuzz_fail("accepted policy breaks a rule (name, generation, tiers, mode)");
	if ((p->has_threshold && !ratio_ok(p->threshold)) ||
	    (p->has_warn_threshold && !ratio_ok(p->warn_threshold)))
		fuzz_fail("threshold out of (0,1]");
	check_selector(&p->node_selector);
	for (size_t i = 0; i < p->n_tiers; i++) {
		const struct gpupolicy_tier *t = &p->tiers[i];

		if (!dns_label(t->name))
			fuzz_fail("tier %zu name not a DNS label", i);
		for (size_t j = 0; j < i; j++)
			if (strcmp(p->tiers[j].name, t->name) == 0)
				fuzz_fail("tiers %zu and %zu share a name", j, i);
		if (t->n_priority_classes == 0 && t->n_namespaces == 0 && !t->has_pod_selector)
			fuzz_fail("tier %zu without a criterion", i);
		if (t->n_priority_classes > GPUPOLICY_LIST_MAX ||
		    t->n_namespaces > GPUPOLICY_LIST_MAX)
			fuzz_fail("tier %zu list over the cap", i);
		if (t->has_max_share && !ratio_ok(t->max_share))
			fuzz_fail("tier %zu maxShare out of (0,1]", i);
		if (t->yield_to >= 0 &&
		    ((size_t)t->yield_to >= p->n_tiers || (size_t)t->yield_to == i ||
		     !p->tiers[t->yield_to].has_max_share || !ratio_ok(t->yield_above)))
			fuzz_fail("tier %zu yields to %d", i, t->yield_to);
		if (t->yield_to < -1)
			fuzz_fail("tier %zu yield_to %d", i, t->yield_to);
		if (t->has_pod_selector)
			check_selector(&t->pod_selector);
	}
}

/* Pods made of the policy's own names, so tiers are actually hit. */
static void check_tier_of(const struct gpupolicy *p, uint64_t *s)
{
	static const char *const kv[] = {"tier", "batch", "app", "x"};
	struct gpupolicy_labels labels = {kv, (size_t)(mix(s) % 3)};

	for (size_t i = 0; i < p->n_tiers; i++) {
		const struct gpupolicy_tier *t = &p->tiers[i];
		const char *ns = t->n_namespaces ? t->namespaces[mix(s) % t->n_namespaces] : "ns";
		const char *pc = t->n_priority_classes
		                     ? t->priority_classes[mix(s) % t->n_priority_classes]
		                     : NULL;
		int r = gpupolicy_tier_of(p, ns, pc, &labels);

		if (r < -1 || r >= (int)p->n_tiers)
			fuzz_fail("tier_of %d of %zu tiers", r, p->n_tiers);
		/* Tier i is met by this pod when its selector holds: the answer is i or earlier. */
		if ((!t->has_pod_selector || labelsel_match(&t->pod_selector, &labels)) &&
		    (r == -1 || r > (int)i))
			fuzz_fail("pod of tier %zu placed in %d", i, r);
		if (r >= 0 && p->tiers[r].has_pod_selector &&
		    !labelsel_match(&p->tiers[r].pod_selector, &labels))
			fuzz_fail("tier %d chosen, its podSelector does not match", r);
	}
}

static void check_resolve(const struct gpupolicy *p, uint64_t *s)
{
	const struct gpupolicy *sel[2] = {p, p};
	struct gpupolicy_flags f = {
	    .threshold = (double)(mix(s) % 1000000 + 1) / 1e6,
	    .warn_threshold = (double)(mix(s) % 1000000 + 1) / 1e6,
	    .mode = mix(s) & 1 ? POLICY_WARN : POLICY_ENFORCE,
	};
	int annotated = (int)(mix(s) % 4 == 0);
	struct gpupolicy_plan plan;

	gpupolicy_resolve(sel, 1 + mix(s) % 2, &f, annotated, 0.5, &plan);
	if (plan.n < 1 || plan.n > 3 || (annotated && plan.n != 1))
		fuzz_fail("%zu checks (annotation %d)", plan.n, annotated);
	for (size_t i = 0; i < plan.n; i++) {
		const struct gpupolicy_check *c = &plan.checks[i];

		if (!ratio_ok(c->threshold) || !ratio_ok(c->warn_threshold) || c->source == NULL ||
		    (i > 0 && c->mode <= plan.checks[i - 1].mode))
			fuzz_fail("check %zu {%d, %g, %g}", i, (int)c->mode, c->threshold,
			          c->warn_threshold);
	}
	if (annotated && (plan.checks[0].threshold != 0.5 ||
	                  strcmp(plan.checks[0].source, "node annotation") != 0))
		fuzz_fail("the annotation did not win");
	if (!annotated && p->mode == GPUPOLICY_ENFORCE && p->has_threshold &&
	    (plan.checks[0].mode != GPUPOLICY_ENFORCE || plan.checks[0].threshold != p->threshold ||
	     strcmp(plan.checks[0].source, p->name) != 0))
		fuzz_fail("an enforcing policy's threshold is not the first check");
	if (!annotated && !(p->mode == GPUPOLICY_ENFORCE && p->has_threshold) &&
	    plan.checks[0].threshold > f.threshold)
		fuzz_fail("a %s policy weakened the flags", gpupolicy_mode_name(p->mode));
}

static void check_message(const struct gpupolicy_tier_result *r)
{
	size_t n = strnlen(r->message, sizeof(r->message));

	if (n == sizeof(r->message))
		fuzz_fail("message not terminated");
	if (r->violated && (r->reason == NULL || n == 0 || n + 1 >= sizeof(r->message)))
		fuzz_fail("violation without a reason or with a cut message");
	if (!r->violated && r->reason != NULL)
		fuzz_fail("a reason without a violation");
	if (memchr(r->message, '%', n) != NULL)
		fuzz_fail("'%%' in a message: %s", r->message);
}

static void check_tiers(const struct gpupolicy *p, uint64_t *s)
{
	uint64_t tb[GPUPOLICY_TIERS_MAX];
	/* Small numbers or any 64-bit one: the boundaries and the overflows. */
	uint64_t cap = mix(s) & 1 ? mix(s) : mix(s) % (1ull << 40);
	struct gpupolicy_tier_input in = {.policy = p,
	                                  .pod = "ml/pod-0",
	                                  .node = "gpu-node-a",
	                                  .capacity_bytes = cap,
	                                  .tier_bytes = tb};
	struct gpupolicy_tier_result r, half;

	for (size_t i = 0; i < GPUPOLICY_TIERS_MAX; i++)
		tb[i] = mix(s) & 1 ? mix(s) % (cap + 1) : mix(s);
	for (int t = -1; t < (int)p->n_tiers; t++) {
		in.tier = t;
		in.demand_bytes = mix(s) & 1 ? mix(s) % (cap + 1) : mix(s);
		if (gpupolicy_check_tiers(&in, &r) != 0)
			fuzz_fail("check_tiers refused tier %d", t);
		check_message(&r);
		if (t == -1 && r.violated)
			fuzz_fail("a pod of no tier violated");
		if (r.budget_bytes > cap)
			fuzz_fail("budget %llu above capacity %llu",
			          (unsigned long long)r.budget_bytes, (unsigned long long)cap);
		in.demand_bytes /= 2;
		if (gpupolicy_check_tiers(&in, &half) != 0)
			fuzz_fail("check_tiers refused tier %d", t);
		if (half.violated && !r.violated)
			fuzz_fail("tier %d: refused at half the demand, allowed at the whole", t);
		/* Exactly at the budget, with nothing to yield to declared: allowed. */
		if (t >= 0 && p->tiers[t].has_max_share) {
			uint64_t saved = tb[t], ysaved = 0;
			int y = p->tiers[t].yield_to;

			tb[t] = r.budget_bytes / 2;
			in.demand_bytes = r.budget_bytes - tb[t];
			if (y >= 0) {
				ysaved = tb[y];
				tb[y] = 0;
			}
			if (gpupolicy_check_tiers(&in, &r) != 0 || r.violated)
				fuzz_fail("tier %d refused at its budget exactly", t);
			if (y >= 0)
				tb[y] = ysaved;
			tb[t] = saved;
		}
	}
	in.tier = (int)p->n_tiers;
	if (gpupolicy_check_tiers(&in, &r) != -1)
		fuzz_fail("tier index out of range accepted");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *j = cJSON_ParseWithLength((const char *)data, size);
	struct gpupolicy *p = NULL, *q = NULL;
	char err[GPUPOLICY_ERR_MAX], small[8];
	uint64_t s = 0x6770752d706f6cull;
	int rc;

	if (j == NULL)
		return 0;
	memset(err, 'x', sizeof(err));
	rc = gpupolicy_parse(j, &p, err, sizeof(err));
	if (rc != 0 && rc != GPUPOLICY_EINVAL && rc != GPUPOLICY_ENOMEM)
		fuzz_fail("unknown code %d", rc);
	if (rc != 0 && (p != NULL || !fuzz_err_ok(err, sizeof(err))))
		fuzz_fail("refusal %d with a policy or without a reason", rc);
	if (gpupolicy_parse(j, &q, small, sizeof(small)) != rc ||
	    memchr(small, '\0', sizeof(small)) == NULL)
		fuzz_fail("answer or termination changed with an 8-byte err");
	gpupolicy_free(q);
	if (gpupolicy_parse(j, &q, NULL, 0) != rc)
		fuzz_fail("answer changed without err");
	gpupolicy_free(q);
	cJSON_Delete(j);
	if (rc != 0)
		return 0;
	for (size_t i = 0; i < size; i++)
		s = s * 131 + data[i];
	check_policy(p);
	check_tier_of(p, &s);
	check_resolve(p, &s);
	check_tiers(p, &s);
	gpupolicy_free(p);
	return 0;
}
