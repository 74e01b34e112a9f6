/*
 * placement: the placement decision over a snapshot. See placement.h for the contract.
 */
#include "placement.h"

#include "gpupolicy.h"

#include "capacity.h"
#include "demand.h"
#include "dra.h"
#include "pod.h"
#include "quantity.h"
#include "resvrule.h"
#include "satmath.h"

#include <stdio.h>
#include <string.h>

/* How to declare, for messages that ask for it. */
#define GMG_DECL_HINT                                                                              \
	"GPU_MEMORY_LIMIT (e.g. \"24Gi\"), or the engine's memory flag (vllm "                     \
	"--gpu-memory-utilization, TGI --cuda-memory-fraction, SGLang --mem-fraction-static)"

/* The consumers on the node: their sum and the largest few, for the policy message. */
struct tally {
	uint64_t used, reserved;
	uint64_t held_gpus, held_bytes; /* exclusive cards: consumers counted whole */
	struct policy_consumer top[POLICY_TOP_CONSUMERS];
	size_t n_top, n_total, n_settled;
	uint64_t dra_own, dra_used; /* shares: the pod's own claims; the node's other claims */
	uint64_t own_whole_n, own_whole_bytes; /* whole devices of its own claims */
	uint64_t dra_held_n, dra_held_bytes;   /* whole devices other claims hold */
	size_t n_dra_own, n_dra_shared;
	int dra_own_extended;
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
	/* A name longer than POLICY_NAME_MAX - 1 (a claim's "claim ns/name") is cut: the message
	 * names it, the figures do not depend on it. */
	if (snprintf(t->top[i].name, POLICY_NAME_MAX, "%s%s", name, suffix) >= POLICY_NAME_MAX)
		t->top[i].name[POLICY_NAME_MAX - 1] = '\0';
	t->top[i].bytes = bytes;
}

/* The same pod (pod.h, pod_same): item it and the pod of key and uid. */
static int same_pod(const struct placement_item *it, const char *key, const char *uid)
{
	return pod_same(it->key, it->uid, key, uid);
}

/* Whether reservation r no longer counts at now_ms: past its expiry (resvrule.h; 0: none, the
 * caller's backend expires it). */
static int reservation_expired(const struct placement_item *r, uint64_t now_ms)
{
	return r->expires_ms != 0 && resv_expired(r->expires_ms, now_ms);
}

/* Whether claim c is reserved for (or owned by) the pod of uid. */
static int claim_has(const struct dra_claim_use *c, const char *uid)
{
	if (uid == NULL || uid[0] == '\0')
		return 0;
	if (strcmp(c->owner, uid) == 0)
		return 1;
	for (size_t i = 0; i < c->n_pods; i++)
		if (strcmp(c->pods[i], uid) == 0)
			return 1;
	return 0;
}

/* Whether a claim other than the pod of uid is reserved for: already on the node. */
static int claim_has_other(const struct dra_claim_use *c, const char *uid)
{
	for (size_t i = 0; i < c->n_pods; i++)
		if (uid == NULL || strcmp(c->pods[i], uid) != 0)
			return 1;
	return c->n_pods == 0 && !claim_has(c, uid); /* allocated, nobody reserved: held */
}

/* The pod of item it holds its GPUs through a KEP-5004 claim on the node and its demand still
 * has the claim's units (its requestMappings not read: dra_units 0): its nvidia.com/gpu units
 * are that claim's, counted there. */
static int extended_claim_pod(const struct placement_node *node, const struct placement_item *it)
{
	if (it->dra_units > 0)
		return 0; /* the claim's units are out of its figures already */
	for (size_t i = 0; node->dra != NULL && i < node->dra->n_claims; i++)
		if (node->dra->claims[i].extended && claim_has(&node->dra->claims[i], it->uid))
			return 1;
	return 0;
}

static uint64_t claim_bytes(const struct placement_node *node, size_t i);

/* Whether reservation r's pod is visible: the same pod shown on the node, or a claim on the
 * node reserved for it that counts what the reservation holds. A mixed pod's reservation (its
 * device-plugin units beside its claims) holds more than its claims count, until the pod shows:
 * counted whole then (its claims' shares twice meanwhile: the safe side). */
static int visible(const struct placement_node *node, const struct placement_item *r)
{
	uint64_t claims = 0;
	int any = 0;

	for (size_t i = 0; i < node->n_pods; i++)
		if (same_pod(&node->pods[i], r->key, r->uid))
			return 1;
	for (size_t i = 0; node->dra != NULL && i < node->dra->n_claims; i++)
		if (claim_has(&node->dra->claims[i], r->uid)) {
			any = 1;
			claims = sat_add(claims, claim_bytes(node, i));
		}
	return any && placement_item_bytes(r, node->cap) <= claims;
}

uint64_t placement_item_bytes(const struct placement_item *it, const struct capacity *cap)
{
	if (it->undeclared_gpus > 0)
		return capacity_undeclared_bytes(cap, it->pool, it->undeclared_gpus);
	if (it->n_shares > 0 && it->shares != NULL)
		return demand_shares_bytes(it->shares, it->n_shares, cap);
	return it->bytes;
}

void placement_dra_demand(struct demand *d)
{
	struct demand_share figs[DEMAND_MAX_PARTS];
	char words[DEMAND_PART_WORDS];
	size_t n = d->n_dra_figs <= DEMAND_MAX_PARTS ? d->n_dra_figs : DEMAND_MAX_PARTS;

	memcpy(figs, d->dra_figs, n * sizeof(figs[0]));
	memcpy(words, d->dra_words, sizeof(words));
	memset(d, 0, sizeof(*d));
	d->status = DEMAND_OK;
	d->pool = CAPACITY_POOL_ANY;
	memcpy(d->dra_figs, figs, n * sizeof(figs[0]));
	d->n_dra_figs = n;
	memcpy(d->dra_words, words, sizeof(words));
	d->dra_words[sizeof(d->dra_words) - 1] = '\0';
}

/* DRA containers' own figures (demand.dra_figs), each a share of one device of piece bytes,
 * effective-request rule; 0 when none. */
static uint64_t figs_on(const struct demand_share *figs, size_t n, uint64_t piece)
{
	struct capacity one = {
	    .per_gpu_bytes = piece, .gpu_count = 1, .total_bytes = piece, .piece_bytes = piece};

	if (n == 0 || figs == NULL)
		return 0;
	one.replicas = 1;
	return demand_shares_bytes(figs, n <= DEMAND_MAX_PARTS ? n : DEMAND_MAX_PARTS, &one);
}

/* DRA containers' own figures on the node's largest DRA device (else the node's GPU). */
static uint64_t figs_bytes(const struct placement_node *node, const struct demand_share *figs,
                           size_t n)
{
	uint64_t dev = node->dra != NULL && node->dra->gpus.max_bytes > 0
	                   ? node->dra->gpus.max_bytes
	                   : node->cap->per_gpu_bytes;

	return figs_on(figs, n, dev);
}

static uint64_t dra_figures(const struct placement_node *node, const struct demand *d)
{
	return figs_bytes(node, d->dra_figs, d->n_dra_figs);
}

/* An item that is only a DRA pod's figures: no consumer of its own. */
static int figs_only(const struct placement_item *it)
{
	return it->n_dra_figs > 0 && it->bytes == 0 && it->undeclared_gpus == 0 &&
	       it->n_shares == 0;
}

/* What claim i of the node counts: its shares, or the figures of the visible pods it is the
 * first share claim of, the larger (placement.h). */
static uint64_t claim_bytes(const struct placement_node *node, size_t i)
{
	const struct dra_claim_use *c = &node->dra->claims[i];
	uint64_t f = 0;

	if (c->bytes == 0)
		return 0;
	for (size_t k = 0; k < node->n_pods; k++) {
		const struct placement_item *it = &node->pods[k];
		size_t first = node->dra->n_claims;

		if (it->n_dra_figs == 0 || !claim_has(c, it->uid))
			continue;
		for (size_t j = 0; j < node->dra->n_claims && first == node->dra->n_claims; j++)
			if (node->dra->claims[j].bytes > 0 &&
			    claim_has(&node->dra->claims[j], it->uid))
				first = j;
		if (first == i)
			f = sat_add(f, figs_bytes(node, it->dra_figs, it->n_dra_figs));
	}
	return f > c->bytes ? f : c->bytes;
}

void placement_item_count(struct placement_item *it, const struct placement_count *c)
{
	int ok = c->status == DEMAND_OK;

	it->bytes = ok ? c->bytes : 0;
	it->undeclared_gpus = ok ? 0 : (c->gpus ? c->gpus : 1);
	it->pool = c->pool;
	it->shares = ok && c->n_shares > 0 ? c->shares : NULL;
	it->n_shares = it->shares != NULL ? c->n_shares : 0;
	it->whole_gpus = ok ? c->whole_gpus : 0;
	it->dra_units = c->dra_units;
	it->dra_figs = c->n_dra_figs > 0 ? c->dra_figs : NULL;
	it->n_dra_figs = it->dra_figs != NULL ? c->n_dra_figs : 0;
	if (c->status == DEMAND_NOT_GPU) { /* a DRA pod's figures only: no consumer itself */
		it->undeclared_gpus = 0;
		it->whole_gpus = 0;
	}
}

int placement_consumer(int finished, enum demand_status status, size_t n_dra_figs)
{
	return !finished && (status != DEMAND_NOT_GPU || n_dra_figs > 0);
}

void placement_item_demand(struct placement_item *it, const struct demand *d,
                           struct demand_share *shares)
{
	placement_item_demand_figs(it, d, shares, NULL);
}

void placement_item_demand_figs(struct placement_item *it, const struct demand *d,
                                struct demand_share *shares, struct demand_share *figs)
{
	struct placement_count c = {
	    .status = d->status,
	    .bytes = d->bytes,
	    .gpus = d->gpus,
	    .pool = d->pool,
	    .whole_gpus = demand_takes_cards(d) ? d->gpus : 0,
	    .dra_units = d->dra_units,
	};

	if (d->status == DEMAND_OK && d->shares && d->n_parts > 0 && shares != NULL) {
		memcpy(shares, d->compact, d->n_parts * sizeof(*shares));
		c.shares = shares;
		c.n_shares = d->n_parts;
	}
	if (figs != NULL && d->n_dra_figs > 0 && d->n_dra_figs <= DEMAND_MAX_PARTS) {
		memcpy(figs, d->dra_figs, d->n_dra_figs * sizeof(*figs));
		c.dra_figs = figs;
		c.n_dra_figs = d->n_dra_figs;
	}
	placement_item_count(it, &c);
}

/* Units a consumer holds whole (undeclared, or inferred as its cards' whole memory), or 0. */
static uint64_t item_whole(const struct placement_item *it)
{
	return it->undeclared_gpus > 0 ? it->undeclared_gpus : it->whole_gpus;
}

static const struct capacity_profile *profile_of(const struct capacity *cap, uint32_t pool)
{
	for (size_t i = 0; i < cap->n_profiles; i++)
		if (capacity_pool_id(cap->profiles[i].name) == pool)
			return &cap->profiles[i];
	return NULL;
}

/* Whether nothing shares one piece of the pool: sharing none, MIG slices without replicas. */
static int pool_exclusive(const struct capacity *cap, uint32_t pool)
{
	const struct capacity_profile *pr;

	if (cap->mig != CAPACITY_MIG_MIXED || pool == CAPACITY_POOL_WHOLE)
		return cap->sharing == CAPACITY_SHARING_NONE;
	if (pool == CAPACITY_POOL_ANY) {
		for (size_t i = 0; i < cap->n_profiles; i++)
			if (cap->profiles[i].replicas > 1)
				return 0;
		return cap->sharing == CAPACITY_SHARING_NONE;
	}
	pr = profile_of(cap, pool);
	return pr != NULL && pr->replicas <= 1;
}

/* The units of the pool on the node (cards, or one profile's slices). */
static uint64_t pool_units(const struct capacity *cap, uint32_t pool)
{
	const struct capacity_profile *pr;
	uint64_t n;

	if (cap->mig != CAPACITY_MIG_MIXED || pool == CAPACITY_POOL_WHOLE)
		return cap->gpu_count;
	if (pool != CAPACITY_POOL_ANY)
		return (pr = profile_of(cap, pool)) != NULL ? pr->count : 0;
	n = cap->gpu_count;
	for (size_t i = 0; i < cap->n_profiles; i++)
		n = sat_add(n, cap->profiles[i].count);
	return n;
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
                  uint64_t now_ms, int names, int excl, struct tally *t)
{
	const struct capacity *cap = node->cap;
	uint32_t pool = pod->demand->pool;

	for (size_t i = 0; i < node->n_pods; i++) {
		const struct placement_item *it = &node->pods[i];
		uint64_t b = placement_item_bytes(it, cap);

		if (same_pod(it, pod->key, pod->uid) ||
		    !capacity_pools_share(cap, it->pool, pool) || extended_claim_pod(node, it) ||
		    figs_only(it))
			continue;
		if (excl && item_whole(it) > 0) { /* it takes its cards */
			t->held_gpus = sat_add(t->held_gpus, item_whole(it));
			t->held_bytes = sat_add(t->held_bytes, b);
			t->n_total++;
			continue;
		}
		t->used = sat_add(t->used, b);
		if (names)
			top_insert(t, it->key, "", b);
	}
	for (size_t i = 0; i < node->n_reserved; i++) {
		const struct placement_item *r = &node->reserved[i];
		uint64_t b = placement_item_bytes(r, cap);

		if (same_pod(r, pod->key, pod->uid) || !capacity_pools_share(cap, r->pool, pool) ||
		    reservation_expired(r, now_ms))
			continue;
		if (visible(node, r)) {
			t->n_settled++;
			continue;
		}
		if (excl && item_whole(r) > 0) {
			t->held_gpus = sat_add(t->held_gpus, item_whole(r));
			t->held_bytes = sat_add(t->held_bytes, b);
			t->n_total++;
			continue;
		}
		t->reserved = sat_add(t->reserved, b);
		if (names)
			top_insert(t, r->key, " (admitting)", b);
	}
	for (size_t i = 0; node->dra != NULL && i < node->dra->n_claims; i++) {
		const struct dra_claim_use *c = &node->dra->claims[i];

		if (claim_has(c, pod->uid) && !claim_has_other(c, pod->uid)) {
			t->dra_own = sat_add(t->dra_own, c->bytes);
			t->own_whole_n = sat_add(t->own_whole_n, c->whole_n);
			t->own_whole_bytes = sat_add(t->own_whole_bytes, c->whole_bytes);
			t->dra_own_extended |= c->extended;
			t->n_dra_own++;
			continue;
		}
		uint64_t cb = claim_bytes(node, i);
		t->dra_used = sat_add(t->dra_used, cb);
		t->dra_held_n = sat_add(t->dra_held_n, c->whole_n);
		t->dra_held_bytes = sat_add(t->dra_held_bytes, c->whole_bytes);
		t->n_dra_shared += claim_has(c, pod->uid);
		if (names && cb > 0)
			top_insert(t, "claim ", c->key, cb); /* "claim ns/name" */
	}
	t->used = sat_add(t->used, t->dra_used);
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
	uint64_t ppm = quantity_ratio_ppm(threshold);
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
		budget = quantity_ppm_of(pc.piece_bytes, ppm);
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

/* Infer, exclusive cards, a pod counted as whole cards: it takes free cards, or none are left. */
static void exclusive_whole(const struct placement_node *node, const struct placement_pod *pod,
                            const struct placement_policy *pol, const struct demand *d,
                            const struct tally *t, struct placement_result *out)
{
	struct policy_decision *dec = &out->decision;
	uint64_t units = pool_units(node->cap, d->pool);

	if (sat_add(t->held_gpus, d->gpus) <= units) {
		dec->verdict = POLICY_ALLOW;
		dec->allowed = 1;
		dec->reason = "ExclusiveCards";
		return;
	}
	dec->reason = "NoFreeCard";
	dec->verdict = pol->mode == POLICY_WARN ? POLICY_WARN_ONLY : POLICY_DENY;
	dec->allowed = pol->mode == POLICY_WARN;
	if (pol->verdict_only)
		return;
	if (demand_takes_cards(d))
		snprintf(dec->message, sizeof(dec->message),
		         "placing %s on %s: it takes %llu whole GPU(s) and pods that take their "
		         "cards already hold %llu of the node's %llu unshared GPUs",
		         pod->name ? pod->name : "(unnamed pod)",
		         node->name ? node->name : "(unnamed node)", (unsigned long long)d->gpus,
		         (unsigned long long)t->held_gpus, (unsigned long long)units);
	else
		snprintf(dec->message, sizeof(dec->message),
		         "placing %s on %s: pods that take their cards hold all %llu of the node's "
		         "unshared GPUs",
		         pod->name ? pod->name : "(unnamed pod)",
		         node->name ? node->name : "(unnamed node)", (unsigned long long)units);
}

/* Infer, shared cards, a pod counted as whole cards beside others: refused, saying how. */
static void undeclared_shared(const struct placement_node *node, const struct placement_pod *pod,
                              const struct placement_policy *pol, const struct tally *t,
                              struct placement_result *out)
{
	struct policy_decision *dec = &out->decision;
	const struct capacity *cap = node->cap;

	dec->reason = "UndeclaredOnSharedCard";
	dec->verdict = pol->mode == POLICY_WARN ? POLICY_WARN_ONLY : POLICY_DENY;
	dec->allowed = pol->mode == POLICY_WARN;
	if (pol->verdict_only)
		return;
	snprintf(dec->message, sizeof(dec->message),
	         "%s declares no GPU memory, and the GPUs of %s are shared (%s) with %zu other "
	         "pod(s): it could take the whole card they use. Declare what it needs: "
	         "env " GMG_DECL_HINT,
	         pod->name ? pod->name : "(unnamed pod)",
	         node->name ? node->name : "(unnamed node)",
	         cap->sharing == CAPACITY_SHARING_MPS ? "MPS" : "time-sliced", t->n_total);
}

/*
 * The pod's DRA claims on the node: its own allocated claims and the most its unallocated
 * ones can take add to its demand (rd); with a KEP-5004 claim they are its whole demand.
 */
static void dra_demand(const struct placement_node *node, const struct placement_pod *pod,
                       const struct tally *t, struct demand *rd, struct placement_result *out)
{
	const struct dra_pod *dp = pod->dra;
	uint64_t pending = dp != NULL ? dp->pending_bytes : 0;
	uint64_t b = sat_add(t->dra_own, pending);
	/* its containers' own figures: its shares count the larger (whole devices hold them) */
	uint64_t fig = b > 0 ? dra_figures(node, pod->demand) : 0;
	char own[QUANTITY_FMT_MAX], most[QUANTITY_FMT_MAX], f[QUANTITY_FMT_MAX];
	size_t n = 0;

	out->dra_used_bytes = t->dra_used;
	int figured = fig > b;
	if (figured)
		b = fig;
	if (((dp != NULL && dp->extended) || t->dra_own_extended) && rd->dra_units == 0) {
		/* nvidia.com/gpu backed by DRA (KEP-5004): the claim is the demand, never also
		 * the units */
		rd->bytes = b;
		rd->n_uses = 0;
		rd->max_per_gpu_bytes = 0;
		rd->n_parts = 0;
		rd->shares = 0;
		rd->pool = CAPACITY_POOL_ANY;
	} else {
		rd->bytes = sat_add(rd->bytes, b);
	}
	out->dra_bytes = b;
	out->dra_whole_bytes = sat_add(t->own_whole_bytes, dp ? dp->pending_whole_bytes : 0);
	out->demand_bytes = rd->bytes;
	if (t->n_dra_own == 0 && pending == 0 && t->n_dra_shared == 0 &&
	    (dp == NULL || (dp->n_pending == 0 && dp->n_unknown == 0)))
		return;
	quantity_format(sat_add(t->dra_own, t->own_whole_bytes), own, sizeof(own));
	quantity_format(sat_add(pending, dp ? dp->pending_whole_bytes : 0), most, sizeof(most));
	if (t->n_dra_own > 0)
		n += (size_t)snprintf(out->dra_note, sizeof(out->dra_note),
		                      "DRA: %zu claim(s) allocated here, %s", t->n_dra_own, own);
	if (t->n_dra_shared > 0 && n < sizeof(out->dra_note))
		n += (size_t)snprintf(out->dra_note + n, sizeof(out->dra_note) - n,
		                      "%s%zu claim(s) shared with pods already here, counted once",
		                      n ? "; " : "DRA: ", t->n_dra_shared);
	if (dp != NULL && (dp->n_pending > 0 || dp->n_unknown > 0) && n < sizeof(out->dra_note))
		(void)snprintf(
		    out->dra_note + n, sizeof(out->dra_note) - n,
		    "%s%zu claim(s) not allocated yet, counted at the most they can take "
		    "on %s: %s%s",
		    n ? "; " : "DRA: ", dp->n_pending + dp->n_unknown,
		    node->name ? node->name : "the node", most,
		    dp->n_unknown > 0 ? " (a claim not read: every DRA GPU of the node)" : "");
	n = strlen(out->dra_note);
	if (figured && n < sizeof(out->dra_note)) {
		quantity_format(fig, f, sizeof(f));
		(void)snprintf(out->dra_note + n, sizeof(out->dra_note) - n,
		               "; its shares counted as %s, its containers' own figure (%s)", f,
		               pod->demand->dra_words[0] ? pod->demand->dra_words
		                                         : "GPU_MEMORY_LIMIT or engine");
	}
}

/*
 * Whole DRA devices: those other claims hold, and those the pod's own claims take (allocated,
 * or the most its unallocated claims can get), leave the memory the threshold guards, as cards
 * taken whole do (exclusive_whole). Refused when they are more than the node's DRA GPUs
 * ("NoFreeCard"); a pod that takes whole devices only is then admitted ("ExclusiveCards": the
 * scheduler gives a device to one claim). Returns 1 when decided here.
 */
static int dra_devices(const struct placement_node *node, const struct placement_pod *pod,
                       const struct placement_policy *pol, const struct demand *rd,
                       const struct tally *t, struct placement_result *out)
{
	const struct dra_pod *dp = pod->dra;
	uint64_t own_n = sat_add(t->own_whole_n, dp ? dp->pending_whole_n : 0);
	uint64_t own_b = sat_add(t->own_whole_bytes, dp ? dp->pending_whole_bytes : 0);
	uint64_t units = node->cap->dra_gpus ? node->cap->dra_gpus : node->cap->gpu_count;
	uint64_t held_b = t->dra_held_bytes;
	struct policy_decision *dec = &out->decision;

	/* Devices that publish no memory are the annotation's size (capacity_add_dra): held
	 * whole, they take that much, not the 0 they publish. */
	if (node->cap->memory_source == CAPACITY_SRC_ANNOTATION) {
		uint64_t each = node->cap->per_gpu_bytes;
		if (sat_mul(t->dra_held_n, each) > held_b)
			held_b = sat_mul(t->dra_held_n, each);
		if (sat_mul(own_n, each) > own_b)
			own_b = sat_mul(own_n, each);
	}
	uint64_t taken = sat_add(held_b, own_b);

	if (t->dra_held_n == 0 && own_n == 0)
		return 0;
	out->held_gpus = sat_add(out->held_gpus, t->dra_held_n);
	out->pool_bytes = out->pool_bytes > taken ? out->pool_bytes - taken : 0;
	if (sat_add(t->dra_held_n, own_n) <= units && (rd->bytes == 0 || out->pool_bytes > 0)) {
		if (rd->bytes > 0)
			return 0; /* its shares and declarations: judged on what is left */
		dec->verdict = POLICY_ALLOW;
		dec->allowed = 1;
		dec->reason = "ExclusiveCards";
		return 1;
	}
	dec->reason = "NoFreeCard";
	dec->verdict = pol->mode == POLICY_WARN ? POLICY_WARN_ONLY : POLICY_DENY;
	dec->allowed = pol->mode == POLICY_WARN;
	if (!pol->verdict_only)
		snprintf(
		    dec->message, sizeof(dec->message),
		    "placing %s on %s: DRA claims hold %llu whole GPU(s) and it takes %llu, of "
		    "the node's %llu%s",
		    pod->name ? pod->name : "(unnamed pod)",
		    node->name ? node->name : "(unnamed node)", (unsigned long long)t->dra_held_n,
		    (unsigned long long)own_n, (unsigned long long)units,
		    out->pool_bytes == 0 ? ", leaving no GPU memory for what else it asks" : "");
	return 1;
}

/* The visible pod of uid carrying DRA containers' figures, or NULL. */
static const struct placement_item *figs_item(const struct placement_node *node, const char *uid)
{
	for (size_t i = 0; i < node->n_pods; i++)
		if (node->pods[i].n_dra_figs > 0 && node->pods[i].uid != NULL &&
		    strcmp(node->pods[i].uid, uid) == 0)
			return &node->pods[i];
	return NULL;
}

/* A shared DRA claim's device as the messages name it. */
struct shared_dev {
	const struct dra_claim_use *c;
	const char *how;   /* "time-sliced", "MPS", "shared" (no sharing config) */
	const char *by;    /* what shares it: the claim's config, or the claim itself */
	uint64_t dev, pin; /* the device's memory; MPS's pinned limit (0: none) */
	char where[POLICY_NAME_MAX + 96];
};

/* MPS with a pinned limit: a container's figure over the threshold of it can never fit. */
static void pinned_never_fits(const struct placement_pod *pod, const struct placement_policy *pol,
                              double threshold, const struct shared_dev *sd, uint64_t largest,
                              struct placement_result *out)
{
	struct policy_decision *dec = &out->decision;
	char f[QUANTITY_FMT_MAX], p[QUANTITY_FMT_MAX], b[QUANTITY_FMT_MAX], r[POLICY_RATIO_MAX];

	dec->reason = "NeverFits";
	dec->verdict = pol->mode == POLICY_WARN ? POLICY_WARN_ONLY : POLICY_DENY_NEVER_FITS;
	dec->allowed = pol->mode == POLICY_WARN;
	if (pol->verdict_only)
		return;
	quantity_format(largest, f, sizeof(f));
	quantity_format(sd->pin, p, sizeof(p));
	quantity_format(quantity_ppm_of(sd->pin, quantity_ratio_ppm(threshold)), b, sizeof(b));
	policy_format_ratio(threshold, r, sizeof(r));
	if (snprintf(dec->message, sizeof(dec->message),
	             "%s can never fit on %s: a container naming the claim declares %s per MPS "
	             "client, above the %s limit of one MPS client's %s (%s); MPS: the claim's "
	             "config pins each client to %s (sharing.mpsConfig); its figure: %s",
	             pod->name ? pod->name : "(unnamed pod)", sd->where, f, r, p, b, p,
	             pod->demand->dra_words) >= (int)sizeof(dec->message))
		dec->message[sizeof(dec->message) - 1] = '\0'; /* cut: the verdict stands */
}

/* A pod without a figure beside other pods on a shared DRA device: refused, saying how. */
static void undeclared_dra(const struct placement_pod *pod, const struct placement_policy *pol,
                           const struct shared_dev *sd, size_t n_others,
                           struct placement_result *out)
{
	struct policy_decision *dec = &out->decision;

	dec->reason = "UndeclaredOnSharedCard";
	dec->verdict = pol->mode == POLICY_WARN ? POLICY_WARN_ONLY : POLICY_DENY;
	dec->allowed = pol->mode == POLICY_WARN;
	if (pol->verdict_only)
		return;
	if (snprintf(dec->message, sizeof(dec->message),
	             "%s declares no GPU memory, and %s is shared (%s, %s) with "
	             "%zu other pod(s): it could take the whole device they use. Declare what it "
	             "needs in the containers naming the claim: env " GMG_DECL_HINT,
	             pod->name ? pod->name : "(unnamed pod)", sd->where, sd->how, sd->by,
	             n_others) >= (int)sizeof(dec->message))
		dec->message[sizeof(dec->message) - 1] = '\0'; /* cut: the verdict stands */
}

/* What policy_decide() judges for the pod at where (the node, or a claim's shared device):
 * demand bytes beside the consumers tallied in t (borrowed: t->top must outlive the input), on
 * capacity bytes of gpu_count GPUs, with note after an over-threshold message. No per-piece
 * check (per_gpu_bytes 0): the caller adds one. */
static struct policy_input judged_input(const struct placement_pod *pod,
                                        const struct placement_policy *pol, double threshold,
                                        const struct tally *t, const char *where, uint64_t demand,
                                        uint64_t capacity, uint64_t gpu_count, const char *note)
{
	return (struct policy_input){
	    .pod = pod->name,
	    .node = where,
	    .demand_bytes = demand,
	    .capacity_bytes = capacity,
	    .pool_note = note,
	    .gpu_count = gpu_count,
	    .threshold = threshold,
	    .warn_threshold = pol->warn_threshold,
	    .mode = pol->mode,
	    .used_bytes = t->used,
	    .consumers = t->top,
	    .n_consumers = t->n_top,
	    .n_consumers_total = t->n_total,
	    .no_message = pol->verdict_only,
	};
}

/* Another pod of a claim's shared device (uid, NULL when unknown) into t: its figures when the
 * view shows it with some, else (*n_bare counted) the whole device or its pinned limit, piece. */
static void tally_claim_pod(const struct placement_node *node, const char *uid, uint64_t piece,
                            struct tally *t, size_t *n_bare)
{
	const struct placement_item *it = uid != NULL ? figs_item(node, uid) : NULL;

	if (it != NULL) {
		uint64_t b = figs_on(it->dra_figs, it->n_dra_figs, piece);
		t->used = sat_add(t->used, b);
		top_insert(t, it->key, "", b);
	} else {
		(*n_bare)++;
		t->used = sat_add(t->used, piece);
	}
}

/*
 * One claim's shared device (placement.h, "DRA devices shared by a config"): the pod's figures
 * beside those of the claim's other pods, on the device (the pinned limit under MPS). Returns
 * 1 when decided here (out->decision set), 0 otherwise; *sole set when the pod has no figure
 * and no other pod shares the device.
 */
static int judge_shared(const struct placement_node *node, const struct placement_pod *pod,
                        const struct placement_policy *pol, double threshold, uint64_t now_ms,
                        const struct dra_claim_use *c, struct placement_result *out, int *sole)
{
	const struct demand *d = pod->demand;
	struct shared_dev sd = {.c = c};
	struct tally t; /* the other pods, for the message */
	struct policy_decision dec;
	char note[POLICY_MSG_MAX / 2];
	size_t n_others = 0, n_bare = 0;
	uint64_t largest = 0, mine, piece;

	/* No sharing config: the claim's pods still get its device at once (DRA gives every pod
	 * a claim is reserved for its devices; the NVIDIA driver time-slices a device no config
	 * names, its DefaultGpuConfig) */
	sd.how = c->sharing == DRA_SHARING_MPS            ? "MPS"
	         : c->sharing == DRA_SHARING_TIME_SLICING ? "time-sliced"
	                                                  : "shared";
	sd.by = c->sharing != DRA_SHARING_NONE
	            ? "the claim's config"
	            : "no sharing config: every pod the claim is reserved for uses its device";
	sd.dev = c->dev_bytes > 0 ? c->dev_bytes : node->cap->per_gpu_bytes;
	sd.pin = c->sharing == DRA_SHARING_MPS ? c->pinned : 0;
	piece = sd.pin > 0 ? sd.pin : sd.dev;
	if (snprintf(sd.where, sizeof(sd.where), "%s (claim %s's %s device)",
	             node->name ? node->name : "(unnamed node)", c->key,
	             sd.how) >= (int)sizeof(sd.where))
		sd.where[sizeof(sd.where) - 1] =
		    '\0'; /* a name cut: the figures do not depend on it */
	for (size_t k = 0; k < d->n_dra_figs && k < DEMAND_MAX_PARTS; k++) {
		uint64_t b = figs_on(&d->dra_figs[k], 1, piece);
		if (b > largest)
			largest = b;
	}
	if (sd.pin > 0 && largest > quantity_ppm_of(sd.pin, quantity_ratio_ppm(threshold))) {
		pinned_never_fits(pod, pol, threshold, &sd, largest, out);
		return 1;
	}
	memset(&t, 0, sizeof(t));
	for (size_t k = 0; k < c->n_pods; k++) {
		if (pod->uid != NULL && strcmp(c->pods[k], pod->uid) == 0)
			continue;
		n_others++;
		tally_claim_pod(node, c->pods[k], piece, &t, &n_bare);
	}
	/* Pods admitted naming the claim before it is reserved for them (item.dra_claim) */
	for (size_t k = 0; k < node->n_reserved; k++) {
		const struct placement_item *r = &node->reserved[k];

		if (r->dra_claim == NULL || strcmp(r->dra_claim, c->uid) != 0 ||
		    same_pod(r, pod->key, pod->uid) || reservation_expired(r, now_ms) ||
		    claim_has(c, r->uid))
			continue; /* not of the claim, the pod itself, expired, or counted above */
		n_others++;
		tally_claim_pod(node, r->uid, piece, &t, &n_bare);
	}
	if (n_others == 0) {
		*sole |= d->n_dra_figs == 0 && c->sharing != DRA_SHARING_NONE;
		return 0; /* alone on the device: as a device held whole */
	}
	if (d->n_dra_figs == 0 && sd.pin == 0) {
		undeclared_dra(pod, pol, &sd, n_others, out);
		return 1;
	}
	mine = d->n_dra_figs > 0 ? figs_on(d->dra_figs, d->n_dra_figs, piece) : sd.pin;
	if (n_bare > 0) {
		char name[64];
		snprintf(name, sizeof(name), "%zu pod(s) with no figure seen", n_bare);
		top_insert(&t, name, "", sat_mul(n_bare, piece)); /* one entry for them all */
	}
	if (snprintf(note, sizeof(note),
	             "DRA: the claim's device is shared (%s, %s) among the pods it is "
	             "reserved for, each counted at its containers' own figure%s; its figure: %s",
	             sd.how, sd.by, sd.pin > 0 ? " (a share of the pinned limit under MPS)" : "",
	             d->n_dra_figs > 0 ? d->dra_words : "none (the pinned limit)") >=
	    (int)sizeof(note))
		note[sizeof(note) - 1] = '\0';
	struct policy_input in =
	    judged_input(pod, pol, threshold, &t, sd.where, mine, sd.dev, 1, note);
	if (policy_decide(&in, &dec) != 0 || dec.verdict == POLICY_ALLOW)
		return 0; /* a device of no memory: judged as a device held whole */
	out->decision = dec;
	out->shared_device = 1;
	if (strcmp(dec.reason, "NeverFits") == 0 && !pol->verdict_only) {
		size_t n = strlen(out->decision.message); /* policy_decide says no note there */
		if (n + 2 < sizeof(out->decision.message))
			snprintf(out->decision.message + n, sizeof(out->decision.message) - n,
			         "; %s", note);
	}
	return 1;
}

/* The shared DRA devices of claims the pod is in (judge_shared); 1 when decided here. */
static int dra_shared(const struct placement_node *node, const struct placement_pod *pod,
                      const struct placement_policy *pol, double threshold, uint64_t now_ms,
                      struct placement_result *out, int *sole)
{
	for (size_t i = 0; node->dra != NULL && i < node->dra->n_claims; i++) {
		const struct dra_claim_use *c = &node->dra->claims[i];

		if (c->whole_n == 0 || !(c->mine || claim_has(c, pod->uid)))
			continue;
		if (judge_shared(node, pod, pol, threshold, now_ms, c, out, sole))
			return 1;
		/* not reserved for it yet: its reservation says so to the claim's next pods */
		if (out->reserve_claim == NULL && !claim_has(c, pod->uid) && c->uid[0] != '\0')
			out->reserve_claim = c->uid;
	}
	return 0;
}

/* End the message with the pod's source on this node. */
static void add_source(const struct placement_policy *pol, const struct demand *d,
                       struct placement_result *out)
{
	size_t n;

	if (d->n_parts == 0)
		return;
	demand_describe(d, out->source, sizeof(out->source));
	n = strlen(out->decision.message);
	if (!pol->verdict_only && n > 0 && out->source[0] != '\0' &&
	    n + 2 < sizeof(out->decision.message))
		snprintf(out->decision.message + n, sizeof(out->decision.message) - n, "; %s",
		         out->source);
}

int placement_decide(const struct placement_node *node, const struct placement_pod *pod,
                     const struct placement_policy *pol, uint64_t now_ms,
                     struct placement_result *out)
{
	struct tally t;
	struct demand rd; /* the pod's demand on this node */
	int excl;

	memset(out, 0, sizeof(*out));
	if (node == NULL || node->cap == NULL || pod == NULL || pod->demand == NULL || pol == NULL)
		return invalid(out, "invalid placement input: missing node, pod or policy");
	if (pod->demand->status != DEMAND_OK)
		return invalid(out, "invalid placement input: the pod has no valid declaration");
	if (!items_valid(node->pods, node->n_pods) ||
	    !items_valid(node->reserved, node->n_reserved))
		return invalid(out, "invalid placement input: a consumer without a key");
	const struct capacity *cap = node->cap;

	demand_resolve(pod->demand, cap, &rd);
	if (rd.n_parts > 0 && strcmp(rd.warning, pod->demand->warning) != 0)
		snprintf(out->warning, sizeof(out->warning), "%s", rd.warning);
	/* A KEP-5004 pod's GPUs are its claim's devices: no card rule of its own, unless its
	 * demand is its device-plugin units alone (dra_units: the claim's are out of it). */
	excl = pol->infer && pool_exclusive(cap, rd.pool) &&
	       !(pod->dra && pod->dra->extended && rd.dra_units == 0);
	memset(&t, 0, sizeof(t));
	tally(node, pod, now_ms, !pol->verdict_only, excl, &t);
	if (excl && t.dra_own_extended && rd.dra_units == 0) { /* known from its claim only */
		excl = 0;
		memset(&t, 0, sizeof(t));
		tally(node, pod, now_ms, !pol->verdict_only, excl, &t);
	}
	dra_demand(node, pod, &t, &rd, out);
	out->used_bytes = t.used;
	out->reserved_bytes = t.reserved;
	out->n_settled = t.n_settled;
	out->held_gpus = t.held_gpus;

	double threshold = cap->has_threshold ? cap->threshold : pol->threshold;
	int piece_fails = 0;

	out->pool_bytes = capacity_pool_bytes(cap, rd.pool);
	if (excl && demand_takes_cards(&rd) && out->pool_bytes > 0) {
		exclusive_whole(node, pod, pol, &rd, &t, out);
		goto decided;
	}
	if (pol->infer && !excl && demand_all_whole(&rd)) {
		if (t.n_total > 0) {
			undeclared_shared(node, pod, pol, &t, out);
		} else { /* alone: the threshold protects the neighbours that come later */
			out->decision.verdict = POLICY_ALLOW;
			out->decision.allowed = 1;
			out->decision.reason = "SoleConsumer";
		}
		goto decided;
	}
	if (threshold > 0.0 && threshold <= 1.0)
		piece_fails = judge_pieces(cap, &rd, threshold, out);
	/* A pool the node lacks; a zero capacity elsewhere is policy_decide's invalid input. */
	if ((piece_fails && !out->piece.known) ||
	    (out->pool_bytes == 0 && cap->mig == CAPACITY_MIG_MIXED)) {
		if (!piece_fails)
			out->piece.known = 1;
		no_pool(node, pod, pol, out);
		goto decided;
	}
	if (excl && t.held_gpus > 0) { /* the held cards leave the memory the threshold guards */
		out->pool_bytes =
		    out->pool_bytes > t.held_bytes ? out->pool_bytes - t.held_bytes : 0;
		if (out->pool_bytes == 0) {
			exclusive_whole(node, pod, pol, &rd, &t, out);
			out->decision.reason = "NoFreeCard";
			goto decided;
		}
	}

	if (dra_devices(node, pod, pol, &rd, &t, out))
		goto decided;
	pool_note(cap, rd.pool, out);
	struct policy_input in = judged_input(pod, pol, threshold, &t, node->name, rd.bytes,
	                                      out->pool_bytes, cap->gpu_count, out->pool_note);
	in.max_per_gpu_bytes = out->piece.share_bytes; /* one piece's check: the node's only */
	in.max_per_gpu_container = out->piece_container;
	in.per_gpu_bytes = out->piece.piece_bytes;
	in.piece_what = out->piece.what;
	in.piece_rule = out->piece.rule;
	if (policy_decide(&in, &out->decision) != 0) {
		out->invalid_input = 1;
		return -1;
	}
decided:
	if (out->decision.allowed && out->decision.verdict != POLICY_WARN_ONLY && threshold > 0.0 &&
	    threshold <= 1.0) {
		int sole = 0;
		if (!dra_shared(node, pod, pol, threshold, now_ms, out, &sole) && sole &&
		    strcmp(out->decision.reason, "ExclusiveCards") == 0)
			out->decision.reason = "SoleConsumer";
	}
	add_source(pol, &rd, out);
	if (out->dra_note[0] != '\0' && !pol->verdict_only) {
		size_t n = strlen(out->decision.message);
		if (n > 0 && n + 2 < sizeof(out->decision.message))
			snprintf(out->decision.message + n, sizeof(out->decision.message) - n,
			         "; %s", out->dra_note);
	}
	if (out->decision.allowed && !pod->dry_run) {
		out->reserve = 1;
		out->reserve_bytes = rd.bytes;
	} else {
		out->reserve_claim = NULL;
	}
	return 0;
}

uint64_t placement_dra_bytes(const struct placement_node *node, uint64_t *counted_twice)
{
	uint64_t b = 0, twice = 0;

	for (size_t i = 0; node->dra != NULL && i < node->dra->n_claims; i++)
		b = sat_add(b, sat_add(claim_bytes(node, i), node->dra->claims[i].whole_bytes));
	for (size_t i = 0; node->dra != NULL && i < node->n_pods; i++)
		if (extended_claim_pod(node, &node->pods[i]))
			twice = sat_add(twice, placement_item_bytes(&node->pods[i], node->cap));
	if (counted_twice != NULL)
		*counted_twice = twice;
	return b;
}

/* The pod's tier under p of an item with known attributes; -1: none. */
static int item_tier(const struct gpupolicy *p, const struct placement_item *it)
{
	char ns[PLACEMENT_NS_MAX];

	(void)pod_key_split(it->key, ns, sizeof(ns), NULL); /* not a "namespace/name" key: "" */
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
		if (same_pod(it, pod->key, pod->uid) ||
		    !capacity_pools_share(cap, it->pool, pool) || extended_claim_pod(node, it) ||
		    figs_only(it))
			continue;
		tier_add(p, it, placement_item_bytes(it, cap), tier_bytes);
	}
	for (size_t i = 0; i < node->n_reserved; i++) {
		const struct placement_item *r = &node->reserved[i];
		if (same_pod(r, pod->key, pod->uid) || !capacity_pools_share(cap, r->pool, pool) ||
		    reservation_expired(r, now_ms) || visible(node, r))
			continue;
		tier_add(p, r, placement_item_bytes(r, cap), tier_bytes);
	}
	for (size_t i = 0; node->dra != NULL && i < node->dra->n_claims; i++) {
		const struct dra_claim_use *c = &node->dra->claims[i];
		struct placement_item it = {.key = c->key}; /* its tier is unknown: every tier */

		if (claim_has(c, pod->uid) && !claim_has_other(c, pod->uid))
			continue;
		tier_add(p, &it, claim_bytes(node, i), tier_bytes);
	}
	return 0;
}
