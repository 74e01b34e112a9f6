/* core: the one entry point of a placement decision (core.h). */
#include "core.h"

#include "policy.h"
#include "quantity.h"
#include "satmath.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void policyset_input_of(const struct core_input *in, const struct placement_pod *pod,
                               struct policyset_input *out)
{
	*out = (struct policyset_input){
	    .node = in->node,
	    .pod = pod,
	    .pod_namespace = in->pod_namespace,
	    .pod_priority_class = in->pod_priority_class,
	    .pod_labels = in->pod_labels,
	    .policies = in->policies,
	    .n_policies = in->n_policies,
	    .flags = in->flags,
	    .verdict_only = (in->opts & CORE_NO_WORDS) != 0,
	    .infer = in->infer,
	    .now_ms = in->now_ms,
	};
}

/* Whether a pod like in->pod declaring bytes (the probe's demand) is admitted: 1, 0, or -1
 * (the probe failed). *ps is scratch. The probe is of no tier, as the caller's pod may be. */
static int probe_fits(const struct core_input *in, uint64_t bytes, struct policyset_result *ps)
{
	struct demand d;
	struct placement_pod pod = *in->pod;
	struct policyset_input pin;
	int rc = in->probe(in->probe_ctx, bytes, &d);

	if (rc <= 0)
		return rc;
	pod.demand = &d;
	pod.dry_run = 1;
	policyset_input_of(in, &pod, &pin);
	pin.verdict_only = 1; /* the verdict is all a bisection reads */
	if (policyset_decide(&pin, ps) != 0)
		return 0;
	return ps->allowed;
}

/*
 * The largest declaration the probe is admitted with: bisection between the smallest
 * declaration the webhook takes (admitted, else 0) and the limit + 1 (never fits). Admission
 * is monotone in the declaration (the total, each GPU's share and a tier's total only grow; a
 * tier's yield does not depend on it). 0 or -1 (the probe failed).
 */
static int largest_fit(const struct core_input *in, uint64_t limit, uint64_t *out)
{
	struct policyset_result ps;
	uint64_t lo = DEMAND_MIN_BYTES, hi = sat_add(limit, 1);
	int fits = probe_fits(in, lo, &ps);

	*out = 0;
	if (fits <= 0)
		return fits;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if ((fits = probe_fits(in, mid, &ps)) < 0)
			return -1;
		if (fits)
			lo = mid;
		else
			hi = mid;
	}
	*out = lo;
	return 0;
}

/* Every tier of every selecting policy: declared on the node (placement_tier_bytes for the
 * pod) and budget (gpupolicy_check_tiers' for a pod of that tier declaring nothing, over the
 * pod's pool). Stops at in->tiers_cap entries. */
static size_t tiers(const struct core_input *in, uint64_t pool_bytes)
{
	size_t n = 0;

	for (size_t i = 0; i < in->n_policies; i++) {
		const struct gpupolicy *p = in->policies[i];
		uint64_t declared[GPUPOLICY_TIERS_MAX] = {0}, zero[GPUPOLICY_TIERS_MAX] = {0};

		if (p->n_tiers == 0)
			continue;
		if (placement_tier_bytes(in->node, in->pod, p, in->now_ms, declared) != 0)
			memset(declared, 0, sizeof(declared)); /* the decision refused the input */
		for (size_t k = 0; k < p->n_tiers && n < in->tiers_cap; k++) {
			struct gpupolicy_tier_input ti = {.policy = p,
			                                  .tier = (int)k,
			                                  .demand_bytes = 0,
			                                  .capacity_bytes = pool_bytes,
			                                  .tier_bytes = zero};
			struct gpupolicy_tier_result tr;

			in->tiers[n] = (struct core_tier){
			    .policy = p->name,
			    .tier = p->tiers[k].name,
			    .declared_bytes = declared[k],
			    .has_budget = p->tiers[k].has_max_share,
			};
			if (p->tiers[k].has_max_share && gpupolicy_check_tiers(&ti, &tr) == 0)
				in->tiers[n].budget_bytes = tr.budget_bytes;
			n++;
		}
	}
	return n;
}

/* No pod, or a capacity not known: the threshold in force, and the limit on a capacity. */
static int node_only(const struct core_input *in, struct core_verdict *v)
{
	const struct capacity *cap = in->node != NULL ? in->node->cap : NULL;

	policyset_threshold(in->policies, in->n_policies, &in->flags, cap, &v->ps.in_force);
	if (cap != NULL)
		v->limit_bytes =
		    quantity_ppm_of(cap->total_bytes, quantity_ratio_ppm(v->ps.in_force.threshold));
	v->free_bytes = v->limit_bytes;
	return 0;
}

int core_decide(const struct core_input *in, struct core_verdict *v)
{
	struct policyset_input pin;
	int rc;

	memset(v, 0, sizeof(*v));
	if (in == NULL || in->node == NULL || (in->n_policies > 0 && in->policies == NULL) ||
	    ((in->opts & CORE_LARGEST_FIT) && in->pod != NULL && in->probe == NULL) ||
	    ((in->opts & CORE_TIERS) && in->tiers_cap > 0 && in->tiers == NULL)) {
		v->ps.invalid_input = 1;
		v->ps.main.invalid_input = 1;
		v->ps.main.decision.reason = "InvalidInput";
		strcpy(v->ps.main.decision.message, "invalid placement input: missing node, "
		                                    "policies, probe or tiers");
		return CORE_EINVAL;
	}
	if (in->pod == NULL || in->node->cap == NULL)
		return node_only(in, v);
	policyset_input_of(in, in->pod, &pin);
	if (policyset_decide(&pin, &v->ps) != 0)
		return CORE_EINVAL;
	v->decided = 1;
	v->limit_bytes = v->ps.main.decision.budget_bytes;
	v->used_bytes = v->ps.main.used_bytes;
	v->free_bytes = v->limit_bytes > v->used_bytes ? v->limit_bytes - v->used_bytes : 0;
	if (in->opts & CORE_TIERS)
		v->n_tiers = tiers(in, v->ps.main.pool_bytes);
	if (!(in->opts & CORE_LARGEST_FIT))
		return 0;
	rc = largest_fit(in, v->limit_bytes, &v->largest_fit_bytes);
	return rc < 0 ? CORE_EPROBE : 0;
}

/* ---- the verdict in brief ---- */

static void brief_add(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void brief_add(char *buf, size_t cap, const char *fmt, ...)
{
	size_t len = strnlen(buf, cap);
	va_list ap;

	if (len + 1 >= cap)
		return;
	va_start(ap, fmt);
	if (vsnprintf(buf + len, cap - len, fmt, ap) < 0)
		buf[len] = '\0';
	va_end(ap);
}

/* The first check's refusal from its figures (node level). */
static enum core_brief brief_node(const struct core_verdict *v, char *buf, size_t cap)
{
	const struct placement_result *res = &v->ps.main;
	const struct policy_decision *dec = &res->decision;
	char need[QUANTITY_FMT_MAX], free_b[QUANTITY_FMT_MAX], size[QUANTITY_FMT_MAX];
	char limit[POLICY_RATIO_MAX];

	switch (dec->verdict) {
	case POLICY_ALLOW:
	case POLICY_ALLOW_WARN:
		return CORE_BRIEF_FITS;
	case POLICY_WARN_ONLY:
		return CORE_BRIEF_WARN_ONLY;
	default:
		break;
	}
	if (strcmp(dec->reason, "NoFreeCard") == 0) {
		brief_add(buf, cap, "every unshared GPU is held by pods counted as whole GPUs");
		return CORE_BRIEF_REFUSED;
	}
	if (strcmp(dec->reason, "UndeclaredOnSharedCard") == 0) {
		brief_add(buf, cap,
		          "declares no GPU memory and the node's GPUs are shared with "
		          "other pods");
		return CORE_BRIEF_REFUSED;
	}
	policy_format_ratio(v->ps.in_force.threshold, limit, sizeof(limit));
	quantity_format(res->demand_bytes, need, sizeof(need));
	if (dec->verdict == POLICY_DENY && res->shared_device) {
		/* refused on a shared DRA device (placement.h, "DRA"): its figures (its other pods
		 * and this one), not the node's */
		quantity_format(dec->total_bytes, need, sizeof(need));
		quantity_format(dec->budget_bytes, size, sizeof(size));
		brief_add(
		    buf, cap,
		    "would bring its DRA claim's shared device to %s, above the %s limit (%s)",
		    need, limit, size);
		return CORE_BRIEF_REFUSED;
	}
	if (dec->verdict == POLICY_DENY) {
		quantity_format(v->free_bytes, free_b, sizeof(free_b));
		brief_add(buf, cap, "needs %s, %s free of the %s limit", need, free_b, limit);
		return CORE_BRIEF_REFUSED;
	}
	if (dec->verdict != POLICY_DENY_NEVER_FITS) {
		brief_add(buf, cap, "cannot judge the node (%s)", dec->reason);
		return CORE_BRIEF_NEVER;
	}
	const struct capacity_piece *pc = &res->piece;
	const char *container = res->piece_container ? res->piece_container : "?";
	if (!pc->known) {
		brief_add(buf, cap, "container \"%s\" asks for MIG slices but %s", container,
		          pc->rule);
	} else if (res->pool_bytes == 0) {
		brief_add(buf, cap,
		          "asks for whole GPUs and every GPU is partitioned into MIG slices");
	} else if (res->demand_bytes > dec->budget_bytes) {
		quantity_format(res->pool_bytes, size, sizeof(size));
		brief_add(buf, cap, "needs %s, above the %s limit of the node's %s GPU memory",
		          need, limit, size);
	} else {
		quantity_format(pc->share_bytes, need, sizeof(need));
		quantity_format(pc->piece_bytes, size, sizeof(size));
		brief_add(buf, cap,
		          "container \"%s\" needs %s per %s, above the %s limit of one %s's %s%s%s",
		          container, need, pc->what, limit, pc->what, size, pc->rule[0] ? "; " : "",
		          pc->rule);
	}
	return CORE_BRIEF_NEVER;
}

enum core_brief core_brief(const struct core_verdict *v, size_t n_in_flight,
                           uint64_t in_flight_bytes, char *buf, size_t cap)
{
	const struct policyset_result *ps = &v->ps;
	enum core_brief b;

	if (cap == 0)
		return ps->allowed ? CORE_BRIEF_FITS : CORE_BRIEF_REFUSED;
	buf[0] = '\0';
	if (!ps->allowed && ps->policy != NULL && ps->message[0] != '\0') {
		brief_add(buf, cap, "%s", ps->message); /* a tier or declarations rule */
		return CORE_BRIEF_REFUSED;
	}
	b = brief_node(v, buf, cap);
	if (!ps->allowed && (b == CORE_BRIEF_FITS || b == CORE_BRIEF_WARN_ONLY)) {
		buf[0] = '\0'; /* a check past the first refused */
		brief_add(buf, cap, "refused by the node threshold");
		b = CORE_BRIEF_REFUSED;
	}
	if (b == CORE_BRIEF_REFUSED && n_in_flight > 0) {
		char held[QUANTITY_FMT_MAX];

		quantity_format(in_flight_bytes, held, sizeof(held));
		brief_add(buf, cap, ", counting %s of %zu pod%s whose Binding is in flight", held,
		          n_in_flight, n_in_flight == 1 ? "" : "s");
	}
	if (!ps->allowed && ps->policy != NULL)
		brief_add(buf, cap, "; GPUMemoryPolicy \"%.253s\"", ps->policy);
	return b;
}
