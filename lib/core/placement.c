/*
 * placement: the placement decision over a snapshot. See placement.h for the contract.
 */
#include "placement.h"

#include "gpupolicy.h"

#include "capacity.h"
#include "demand.h"
#include "satmath.h"

#include <stdio.h>
#include <string.h>

/* The consumers on the node: their sum and the largest few, for the policy message. */
struct tally {
	uint64_t used, reserved;
	struct policy_consumer top[POLICY_TOP_CONSUMERS];
	size_t n_top, n_total, n_settled;
};

/* Keep the POLICY_TOP_CONSUMERS largest, sorted by bytes descending; an equal one keeps the
 * place of the first seen (visible pods before reservations, each in their given order). */
static void top_insert(struct tally *t, const char *name, const char *suffix, uint64_t bytes)
{
	size_t i = t->n_top;

	t->n_total++;
	if (i == POLICY_TOP_CONSUMERS) {
		if (bytes <= t->top[i - 1].bytes)
			return;
		i--;
	} else {
		t->n_top++;
	}
	while (i > 0 && t->top[i - 1].bytes < bytes) {
		t->top[i] = t->top[i - 1];
		i--;
	}
	snprintf(t->top[i].name, POLICY_NAME_MAX, "%s%s", name, suffix);
	t->top[i].bytes = bytes;
}

/* The same pod: the same uid when both are known (a newer pod of the same name is another
 * pod), else the same key. */
static int same_pod(const struct placement_item *it, const char *key, const char *uid)
{
	if (uid != NULL && uid[0] != '\0' && it->uid != NULL && it->uid[0] != '\0')
		return strcmp(it->uid, uid) == 0;
	return key != NULL && strcmp(it->key, key) == 0;
}

static int visible(const struct placement_node *node, const struct placement_item *r)
{
	for (size_t i = 0; i < node->n_pods; i++)
		if (same_pod(&node->pods[i], r->key, r->uid))
			return 1;
	return 0;
}

uint64_t placement_item_bytes(const struct placement_item *it, const struct capacity *cap)
{
	return it->undeclared_gpus > 0
	           ? capacity_undeclared_bytes(cap, it->pool, it->undeclared_gpus)
	           : it->bytes;
}

static int items_valid(const struct placement_item *v, size_t n)
{
	if (n > 0 && v == NULL)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (v[i].key == NULL)
			return 0;
	return 1;
}

/* Sum what counts; with names, keep the largest consumers for the message. */
static void tally(const struct placement_node *node, const struct placement_pod *pod,
                  uint64_t now_ms, int names, struct tally *t)
{
	const struct capacity *cap = node->cap;
	uint32_t pool = pod->demand->pool;

	for (size_t i = 0; i < node->n_pods; i++) {
		const struct placement_item *it = &node->pods[i];
		uint64_t b = placement_item_bytes(it, cap);

		if (same_pod(it, pod->key, pod->uid) || !capacity_pools_share(cap, it->pool, pool))
			continue;
		t->used = sat_add(t->used, b);
		if (names)
			top_insert(t, it->key, "", b);
	}
	for (size_t i = 0; i < node->n_reserved; i++) {
		const struct placement_item *r = &node->reserved[i];
		uint64_t b = placement_item_bytes(r, cap);

		if (same_pod(r, pod->key, pod->uid) || !capacity_pools_share(cap, r->pool, pool) ||
		    (r->expires_ms != 0 && r->expires_ms <= now_ms))
			continue;
		if (visible(node, r)) {
			t->n_settled++;
			continue;
		}
		t->reserved = sat_add(t->reserved, b);
		if (names)
			top_insert(t, r->key, " (admitting)", b);
	}
	t->used = sat_add(t->used, t->reserved);
}

static int invalid(struct placement_result *out, const char *why)
{
	out->invalid_input = 1;
	out->decision.verdict = POLICY_DENY;
	out->decision.allowed = 0;
	out->decision.reason = "InvalidInput";
	snprintf(out->decision.message, sizeof(out->decision.message), "%s", why);
	return -1;
}

/*
 * Judge each GPU container's use on the node's sharing: the first whose share does not fit
 * within the threshold of its piece (or whose pool the node lacks) goes into out->piece;
 * otherwise the largest share. Returns 1 when one does not fit.
 */
static int judge_pieces(const struct capacity *cap, const struct demand *d, double threshold,
                        struct placement_result *out)
{
	uint64_t ppm = (uint64_t)(threshold * 1e6 + 0.5);
	int have = 0;

	if (d->n_uses == 0) { /* a demand without uses (built by hand): the per-GPU rule */
		out->piece.known = 1;
		out->piece.what = "GPU";
		out->piece.piece_bytes = cap->per_gpu_bytes;
		out->piece.share_bytes = d->max_per_gpu_bytes;
		out->piece_container = d->max_per_gpu_container;
		return 0;
	}
	for (size_t i = 0; i < d->n_uses; i++) {
		const struct demand_use *u = &d->uses[i];
		struct capacity_piece pc;
		uint64_t budget;

		capacity_piece(cap, u->profile, u->gpus, u->bytes, &pc);
		budget =
		    (pc.piece_bytes / 1000000) * ppm + (pc.piece_bytes % 1000000) * ppm / 1000000;
		if (!pc.known || pc.share_bytes > budget) {
			out->piece = pc;
			out->piece_container = u->container;
			return 1;
		}
		if (!have || pc.share_bytes > out->piece.share_bytes) {
			out->piece = pc;
			out->piece_container = u->container;
			have = 1;
		}
	}
	return 0;
}

/* On a MIG-mixed node, say which pool the sums are of. */
static void pool_note(const struct capacity *cap, uint32_t pool, struct placement_result *out)
{
	if (cap->mig != CAPACITY_MIG_MIXED)
		return;
	if (pool == CAPACITY_POOL_WHOLE) {
		snprintf(out->pool_note, sizeof(out->pool_note),
		         "MIG mixed: whole-GPU pods share the %llu GPU(s) not partitioned into MIG "
		         "slices",
		         (unsigned long long)cap->gpu_count);
		return;
	}
	for (size_t i = 0; i < cap->n_profiles; i++)
		if (capacity_pool_id(cap->profiles[i].name) == pool)
			snprintf(out->pool_note, sizeof(out->pool_note),
			         "MIG mixed: counted against the node's %llu %s slices",
			         (unsigned long long)cap->profiles[i].count, cap->profiles[i].name);
}

/* The pod asks for a pool the node lacks: it can never fit there (warn mode: a warning). */
static void no_pool(const struct placement_node *node, const struct placement_pod *pod,
                    const struct placement_policy *pol, struct placement_result *out)
{
	struct policy_decision *dec = &out->decision;

	dec->reason = "NeverFits";
	dec->verdict = pol->mode == POLICY_WARN ? POLICY_WARN_ONLY : POLICY_DENY_NEVER_FITS;
	dec->allowed = pol->mode == POLICY_WARN;
	if (pol->verdict_only)
		return;
	if (out->piece.known)
		snprintf(dec->message, sizeof(dec->message),
		         "%s can never fit on %s: it asks for whole GPUs and every GPU there is "
		         "partitioned into MIG slices (" CAPACITY_LABEL_MIG "=mixed, no "
		         "allocatable whole GPU)",
		         pod->name ? pod->name : "(unnamed pod)",
		         node->name ? node->name : "(unnamed node)");
	else
		snprintf(dec->message, sizeof(dec->message),
		         "%s can never fit on %s: container \"%s\" asks for MIG slices but %s",
		         pod->name ? pod->name : "(unnamed pod)",
		         node->name ? node->name : "(unnamed node)", out->piece_container,
		         out->piece.rule);
}

int placement_decide(const struct placement_node *node, const struct placement_pod *pod,
                     const struct placement_policy *pol, uint64_t now_ms,
                     struct placement_result *out)
{
	struct tally t;

	memset(out, 0, sizeof(*out));
	if (node == NULL || node->cap == NULL || pod == NULL || pod->demand == NULL || pol == NULL)
		return invalid(out, "invalid placement input: missing node, pod or policy");
	if (pod->demand->status != DEMAND_OK)
		return invalid(out, "invalid placement input: the pod has no valid declaration");
	if (!items_valid(node->pods, node->n_pods) ||
	    !items_valid(node->reserved, node->n_reserved))
		return invalid(out, "invalid placement input: a consumer without a key");
	memset(&t, 0, sizeof(t));
	tally(node, pod, now_ms, !pol->verdict_only, &t);
	out->used_bytes = t.used;
	out->reserved_bytes = t.reserved;
	out->n_settled = t.n_settled;

	const struct capacity *cap = node->cap;
	double threshold = cap->has_threshold ? cap->threshold : pol->threshold;
	int piece_fails = 0;

	if (threshold > 0.0 && threshold <= 1.0)
		piece_fails = judge_pieces(cap, pod->demand, threshold, out);
	out->pool_bytes = capacity_pool_bytes(cap, pod->demand->pool);
	/* A pool the node lacks; a zero capacity elsewhere is policy_decide's invalid input. */
	if ((piece_fails && !out->piece.known) ||
	    (out->pool_bytes == 0 && cap->mig == CAPACITY_MIG_MIXED)) {
		if (!piece_fails)
			out->piece.known = 1;
		no_pool(node, pod, pol, out);
		return 0;
	}

	pool_note(cap, pod->demand->pool, out);
	struct policy_input in = {
	    .pod = pod->name,
	    .node = node->name,
	    .demand_bytes = pod->demand->bytes,
	    .max_per_gpu_bytes = out->piece.share_bytes,
	    .max_per_gpu_container = out->piece_container,
	    .capacity_bytes = out->pool_bytes,
	    .per_gpu_bytes = out->piece.piece_bytes,
	    .piece_what = out->piece.what,
	    .piece_rule = out->piece.rule,
	    .pool_note = out->pool_note,
	    .gpu_count = cap->gpu_count,
	    .threshold = threshold,
	    .warn_threshold = pol->warn_threshold,
	    .mode = pol->mode,
	    .used_bytes = t.used,
	    .consumers = t.top,
	    .n_consumers = t.n_top,
	    .n_consumers_total = t.n_total,
	    .no_message = pol->verdict_only,
	};
	if (policy_decide(&in, &out->decision) != 0) {
		out->invalid_input = 1;
		return -1;
	}
	if (out->decision.allowed && !pod->dry_run) {
		out->reserve = 1;
		out->reserve_bytes = pod->demand->bytes;
	}
	return 0;
}

/* The pod's tier under p of an item with known attributes; -1: none. */
static int item_tier(const struct gpupolicy *p, const struct placement_item *it)
{
	char ns[PLACEMENT_NS_MAX];
	const char *slash = strchr(it->key, '/');
	size_t len = slash ? (size_t)(slash - it->key) : 0;

	if (len >= sizeof(ns))
		len = 0; /* not a "namespace/name" key: no namespace */
	memcpy(ns, it->key, len);
	ns[len] = '\0';
	return gpupolicy_tier_of(p, ns, it->priority_class, it->labels);
}

static void tier_add(const struct gpupolicy *p, const struct placement_item *it, uint64_t b,
                     uint64_t *tier_bytes)
{
	if (!it->attrs_known) { /* a reservation: its tier is unknown, count it in each */
		for (size_t k = 0; k < p->n_tiers; k++)
			tier_bytes[k] = sat_add(tier_bytes[k], b);
		return;
	}
	int t = item_tier(p, it);
	if (t >= 0 && (size_t)t < p->n_tiers)
		tier_bytes[t] = sat_add(tier_bytes[t], b);
}

int placement_tier_bytes(const struct placement_node *node, const struct placement_pod *pod,
                         const struct gpupolicy *p, uint64_t now_ms, uint64_t *tier_bytes)
{
	if (node == NULL || node->cap == NULL || pod == NULL || pod->demand == NULL || p == NULL ||
	    tier_bytes == NULL || !items_valid(node->pods, node->n_pods) ||
	    !items_valid(node->reserved, node->n_reserved))
		return -1;
	const struct capacity *cap = node->cap;
	uint32_t pool = pod->demand->pool;

	memset(tier_bytes, 0, p->n_tiers * sizeof(*tier_bytes));
	for (size_t i = 0; i < node->n_pods; i++) {
		const struct placement_item *it = &node->pods[i];
		if (same_pod(it, pod->key, pod->uid) || !capacity_pools_share(cap, it->pool, pool))
			continue;
		tier_add(p, it, placement_item_bytes(it, cap), tier_bytes);
	}
	for (size_t i = 0; i < node->n_reserved; i++) {
		const struct placement_item *r = &node->reserved[i];
		if (same_pod(r, pod->key, pod->uid) || !capacity_pools_share(cap, r->pool, pool) ||
		    (r->expires_ms != 0 && r->expires_ms <= now_ms) || visible(node, r))
			continue;
		tier_add(p, r, placement_item_bytes(r, cap), tier_bytes);
	}
	return 0;
}
