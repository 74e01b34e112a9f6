/* policyset: a placement under the flags, the annotation and GPUMemoryPolicy objects
 * (policyset.h). */
#include "policyset.h"

#include "demand.h"

#include <stdio.h>
#include <string.h>

static void add_warning(struct policyset_result *out, const char *text)
{
	if (text[0] == '\0' || out->n_warnings >= POLICYSET_WARNINGS)
		return;
	snprintf(out->warnings[out->n_warnings++], POLICY_MSG_MAX, "%s", text);
}

static void add_audit(struct policyset_result *out, const char *policy, const char *reason,
                      const char *text)
{
	out->n_audit_total++;
	if (out->n_audit >= POLICYSET_AUDIT)
		return;
	struct policyset_audit *a = &out->audit[out->n_audit++];
	a->policy = policy;
	a->reason = reason;
	snprintf(a->message, sizeof(a->message), "%s", text);
}

/* The message of a check, naming the policy that set its threshold. */
static void with_source(char *dst, const char *msg, const struct gpupolicy_check *c, int policy)
{
	size_t len = strnlen(msg, POLICY_MSG_MAX - 1);

	memcpy(dst, msg, len);
	dst[len] = '\0';
	if (policy && len > 0 && len < POLICY_MSG_MAX - 1)
		(void)!snprintf(dst + len, POLICY_MSG_MAX - len, "; GPUMemoryPolicy \"%s\"",
		                c->source);
}

static int from_policy(const struct gpupolicy_check *c)
{
	return c->policy != NULL; /* not the source's text: a policy may be named "flags" */
}

static void refuse(struct policyset_result *out, const char *policy, const char *reason,
                   const char *msg)
{
	out->allowed = 0;
	out->reserve = 0;
	out->policy = policy;
	out->reason = reason;
	snprintf(out->message, sizeof(out->message), "%s", msg);
}

/* The threshold in force: the plan's first check (policyset.h). */
static struct policyset_threshold in_force_of(const struct gpupolicy_plan *plan, int from_node)
{
	return (struct policyset_threshold){
	    .threshold = plan->checks[0].threshold,
	    .source = plan->checks[0].source,
	    .policy = plan->checks[0].policy,
	    .from_node = from_node,
	};
}

static int threshold_checks(const struct policyset_input *in, struct policyset_result *out)
{
	const struct capacity *cap = in->node->cap;
	struct gpupolicy_plan plan;
	char text[POLICY_MSG_MAX];

	gpupolicy_resolve(in->policies, in->n_policies, &in->flags, cap->has_threshold,
	                  cap->threshold, &plan);
	out->in_force = in_force_of(&plan, cap->has_threshold);
	for (size_t i = 0; i < plan.n; i++) {
		const struct gpupolicy_check *c = &plan.checks[i];
		struct placement_pod pod = *in->pod;
		struct placement_policy pol = {
		    .threshold = c->threshold,
		    /* the early warning: the first check's (enforce, or the flags' own warn
		     * check under --mode warn), as placement_decide gave it before policies */
		    .warn_threshold = i == 0 ? c->warn_threshold : 0,
		    .mode = c->mode == GPUPOLICY_ENFORCE ? POLICY_ENFORCE : POLICY_WARN,
		    .verdict_only = in->verdict_only,
		    .infer = in->infer,
		};
		struct placement_result r;
		int pol_src = from_policy(c);

		if (i > 0)
			pod.dry_run = 1; /* only the first check's result reserves */
		if (placement_decide(in->node, &pod, &pol, in->now_ms, i == 0 ? &out->main : &r) !=
		    0) {
			if (i == 0) {
				out->invalid_input = 1;
				return -1;
			}
			continue; /* the same input passed the first check: cannot happen */
		}
		const struct policy_decision *d = i == 0 ? &out->main.decision : &r.decision;
		if (i == 0) {
			out->allowed = d->allowed;
			out->reason = d->reason;
			out->reserve = out->main.reserve;
		}
		with_source(text, d->message, c, pol_src);
		switch (c->mode) {
		case GPUPOLICY_ENFORCE:
			if (!d->allowed) {
				refuse(out, pol_src ? c->source : NULL, d->reason, text);
				return 0;
			}
			if (d->verdict != POLICY_ALLOW)
				add_warning(out, text);
			break;
		case GPUPOLICY_WARN:
			/* flags in warn mode (check 0), or warning policies: a breach or the early
			 * warning is a warning */
			if (d->verdict != POLICY_ALLOW)
				add_warning(out, text);
			break;
		case GPUPOLICY_AUDIT:
			if (d->verdict == POLICY_WARN_ONLY)
				add_audit(out, c->source, d->reason, text);
			break;
		}
	}
	return 0;
}

static void tier_checks(const struct policyset_input *in, struct policyset_result *out)
{
	uint64_t tier_bytes[GPUPOLICY_TIERS_MAX];

	for (size_t i = 0; i < in->n_policies && out->allowed; i++) {
		const struct gpupolicy *p = in->policies[i];
		struct gpupolicy_tier_result tr;
		int tier;

		if (p->n_tiers == 0)
			continue;
		tier = gpupolicy_tier_of(p, in->pod_namespace ? in->pod_namespace : "",
		                         in->pod_priority_class, in->pod_labels);
		if (tier < 0)
			continue;
		if (placement_tier_bytes(in->node, in->pod, p, in->now_ms, tier_bytes) != 0)
			continue; /* the threshold check refused the same input first */
		struct gpupolicy_tier_input ti = {
		    .policy = p,
		    .pod = in->pod->name,
		    .node = in->node->name,
		    .tier = tier,
		    .demand_bytes = out->main.demand_bytes, /* resolved on this node */
		    .capacity_bytes = out->main.pool_bytes,
		    .tier_bytes = tier_bytes,
		};
		if (gpupolicy_check_tiers(&ti, &tr) != 0 || !tr.violated)
			continue;
		switch (p->mode) {
		case GPUPOLICY_ENFORCE:
			refuse(out, p->name, tr.reason, tr.message);
			return;
		case GPUPOLICY_WARN:
			add_warning(out, tr.message);
			break;
		case GPUPOLICY_AUDIT:
			add_audit(out, p->name, tr.reason, tr.message);
			break;
		}
	}
}

/* Policies whose pool takes declarations only (spec.undeclared: refuse): a pod counted from
 * anything but GPU_MEMORY_LIMIT is refused (enforce), warned (warn) or audited (audit). */
static void undeclared_checks(const struct policyset_input *in, struct policyset_result *out)
{
	const struct demand *d = in->pod->demand;
	char text[POLICY_MSG_MAX];

	if (d->source <= DEMAND_SRC_DECLARED)
		return;
	for (size_t i = 0; i < in->n_policies && out->allowed; i++) {
		const struct gpupolicy *p = in->policies[i];

		if (!p->undeclared_refuse)
			continue;
		snprintf(
		    text, sizeof(text),
		    "%s declares no GPU_MEMORY_LIMIT (%s), and GPUMemoryPolicy \"%.64s\" takes "
		    "declarations only on %s (spec.undeclared: refuse): add env "
		    "GPU_MEMORY_LIMIT with the GPU memory it needs, e.g. \"24Gi\"",
		    in->pod->name ? in->pod->name : "(unnamed pod)",
		    out->main.source[0] ? out->main.source : "inferred", p->name,
		    in->node->name ? in->node->name : "(unnamed node)");
		switch (p->mode) {
		case GPUPOLICY_ENFORCE:
			refuse(out, p->name, "UndeclaredRefused", text);
			return;
		case GPUPOLICY_WARN:
			add_warning(out, text);
			break;
		case GPUPOLICY_AUDIT:
			add_audit(out, p->name, "UndeclaredRefused", text);
			break;
		}
	}
}

void policyset_threshold(const struct gpupolicy *const *sel, size_t n,
                         const struct gpupolicy_flags *flags, const struct capacity *cap,
                         struct policyset_threshold *out)
{
	struct gpupolicy_plan plan;
	int from_node = cap != NULL && cap->has_threshold;

	gpupolicy_resolve(sel, n, flags, from_node, from_node ? cap->threshold : 0, &plan);
	*out = in_force_of(&plan, from_node);
}

int policyset_decide(const struct policyset_input *in, struct policyset_result *out)
{
	memset(out, 0, sizeof(*out));
	if (in == NULL || in->node == NULL || in->node->cap == NULL || in->pod == NULL ||
	    in->pod->demand == NULL || (in->n_policies > 0 && in->policies == NULL)) {
		out->invalid_input = 1;
		out->main.invalid_input = 1;
		out->main.decision.reason = "InvalidInput";
		snprintf(out->main.decision.message, sizeof(out->main.decision.message),
		         "invalid placement input: missing node, pod or policies");
		return -1;
	}
	if (threshold_checks(in, out) != 0)
		return -1;
	if (out->allowed)
		undeclared_checks(in, out);
	if (out->allowed)
		tier_checks(in, out);
	if (!out->allowed)
		out->n_warnings = 0; /* a refusal says it all */
	return 0;
}
