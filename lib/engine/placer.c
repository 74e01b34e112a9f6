/*
 * placer: the engine loop. See placer.h for the contract.
 */
#include "placer.h"

#include "cache.h"
#include "capacity.h"
#include "core.h"
#include "demand.h"
#include "dra.h"
#include "drastore.h"
#include "kube.h"
#include "ledger.h"
#include "log.h"
#include "metrics.h"
#include "monotime.h"
#include "outcome.h"
#include "placement.h"
#include "pod.h"
#include "policies.h"
#include "policy.h"
#include "reservations.h"
#include "resvrule.h"
#include "shared.h"
#include "view.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX LEDGER_KEY_MAX
/* Cache-path attempts over the local ledger (placer.h): all but the last let the node go while
 * the view is copied and the core decides, and commit by compare-and-swap. */
#define PLACER_LEDGER_TRIES 3
#define ERR_MAX             512 /* a foreign one-line error (kube, capacity) */

struct placer {
	double threshold, warn_threshold;
	int mode_warn, mode_audit;
	const struct demand_config *dcfg;
	uint64_t budget_ms;
	uint64_t grace_ms;
	uint64_t unseen_ttl_ms;
	struct placer_source src;
	struct cache *cache;
	int (*cache_fresh)(void *ctx, double now_s);
	int (*dra_fresh)(void *ctx, double now_s);
	int (*cache_connected)(void *ctx, double now_s);
	uint64_t (*cache_progress_ms)(void *ctx);
	void *cache_ctx;
	struct dra_store *dra;
	struct ledger *ledger;
	struct shared *shared;
	struct policies *policies;
	struct metrics *metrics;
	const char *const *exempt;
	size_t n_exempt;
};

/* One placement on its way through the loop: the pod as the adapter gave it, and what the loop
 * learnt of the node (its labels, capacity on the live path, DRA view). */
struct placement {
	const char *pod_name; /* "ns/name" for messages */
	const struct pod_attrs *attrs;
	const struct gpupolicy_labels *node_labels; /* NULL: unknown */
	const char *key;                            /* ledger key */
	const char *uid;                            /* the pod's metadata.uid, or NULL */
	const char *node;
	const struct demand *demand;
	const struct capacity *cap; /* live path; the cache path gives the core its own */
	int dry_run;
	const struct dra_view *dra; /* the node's DRA claims and the pod's (NULL: none) */
	int pod_create;             /* a pod CREATE (spec.nodeName): its pod may never be stored */
};

/* pp as the loop carries it, with the node's DRA view dv (or NULL); the node's labels and
 * capacity are the caller's to set once known. */
static struct placement placement_of(const struct placer_pod *pp, const struct dra_view *dv)
{
	struct placement p = {
	    .pod_name = pp->pod_name,
	    .attrs = pp->attrs,
	    .key = pp->key,
	    .uid = pp->uid,
	    .node = pp->node,
	    .demand = pp->demand,
	    .dry_run = pp->dry_run,
	    .dra = dv,
	    .pod_create = pp->pod_create,
	};
	return p;
}

/* The pod as the core takes it (placement.h). */
static struct placement_pod core_pod(const struct placement *p)
{
	struct placement_pod pod = {
	    .name = p->pod_name,
	    .key = p->key,
	    .uid = p->uid,
	    .demand = p->demand,
	    .dry_run = p->dry_run,
	    .dra = p->dra ? &p->dra->pod : NULL,
	};
	return pod;
}

/* The ledger cannot lock the node (LEDGER_MAX_NODES tracked, or no memory): deny, fail closed. */
static void deny_untracked(struct outcome *o, const char *pod_name, const char *node)
{
	outcome_deny(o, METRICS_ERROR, 500, "LedgerFull",
	             "cannot admit %s on %s: too many nodes tracked; denied to keep GPU memory "
	             "safe, retry later",
	             pod_name, node);
}

/* "--mode audit: GPU memory inferred, not declared: <source>" (the outcome's demand words). */
static void add_mode_audit_inferred(struct outcome *o)
{
	char text[sizeof(o->demand) + 48];
	snprintf(text, sizeof(text), "GPU memory inferred, not declared: %s", o->demand);
	outcome_audit_mode(o, text);
}

/* "cannot check <pod>: out of memory" */
static void deny_nomem(struct outcome *o, const char *pod_name)
{
	outcome_deny(o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
	             pod_name);
}

/* The core's verdict on p over the node's snapshot pn (core_decide(): the flags, the node's
 * annotation, the pod's tier attributes and the GPUMemoryPolicy objects of gen that select the
 * node; --mode audit as warn, so that an over-threshold placement it admits is reserved), with
 * opts (CORE_*). core_decide's return. */
static int core_over(const struct placer *pl, const struct placement *p,
                     const struct placement_node *pn, const struct placement_pod *pod,
                     const struct policies_gen *gen, uint64_t now, unsigned opts,
                     struct core_verdict *v)
{
	static const struct pod_attrs no_attrs = {NULL, NULL, NULL};
	const struct pod_attrs *a = p->attrs ? p->attrs : &no_attrs;
	const struct gpupolicy *sel[GPUPOLICY_SELECT_MAX];
	size_t n = policies_gen_selecting(gen, p->node_labels, sel, GPUPOLICY_SELECT_MAX);
	struct core_input in = {
	    .node = pn,
	    .pod = pod,
	    .pod_namespace = a->ns,
	    .pod_priority_class = a->priority_class,
	    .pod_labels = a->labels,
	    .policies = sel,
	    .n_policies = n,
	    .flags = {pl->threshold, pl->warn_threshold,
	              pl->mode_warn || pl->mode_audit ? POLICY_WARN : POLICY_ENFORCE},
	    .infer = pl->dcfg->infer,
	    .opts = opts,
	    .now_ms = now,
	};
	return core_decide(&in, v);
}

/* Decide with the core over the node's snapshot (core_decide(): the flags, the node's
 * annotation and the GPUMemoryPolicy objects selecting the node) and put its verdict into o.
 * Returns 1 when allowed with a reservation to record (res->reserve_bytes, and
 * res->reserve_claim: the DRA claim it joined unreserved, recorded with it, issue 21), 0
 * otherwise. */
static int decide_core(struct placer *pl, const struct placement *p,
                       const struct placement_node *pn, uint64_t now, struct outcome *o,
                       struct placement_result *out)
{
	struct core_verdict *v = malloc(sizeof(*v));
	const struct policyset_result *ps = v != NULL ? &v->ps : NULL;
	struct placement_pod pod = core_pod(p);
	int rc, reserve = 0;

	memset(out, 0, sizeof(*out));
	o->n_audit = 0;
	o->audit[0] = '\0';
	o->policy[0] = '\0';
	if (v == NULL) {
		deny_nomem(o, p->pod_name);
		return 0;
	}
	/* The policies' generation is held (a reference, no lock) until the outcome is written:
	 * it borrows the refusing policy's name. */
	const struct policies_gen *gen = pl->policies ? policies_acquire(pl->policies) : NULL;
	if (pl->policies != NULL && !policies_gen_synced(gen)) {
		policies_release(gen);
		free(v);
		outcome_deny(
		    o, METRICS_ERROR, 500, "PoliciesNotRead",
		    "cannot check %s: gpu-memory-guard has not read the GPUMemoryPolicy objects "
		    "yet; "
		    "denied to keep GPU memory safe, retry later",
		    p->pod_name);
		return 0;
	}
	/* Not listed: refuse every GPU placement. Stale (a watch broken past the bound): only
	 * those the DRA store bears on, a node with DRA GPUs or a pod naming claims (a node
	 * without them gains none while its driver publishes no slice). */
	int dra_fresh = pl->dra_fresh != NULL ? pl->dra_fresh(pl->cache_ctx, monotime_s()) : 1;
	if (dra_fresh < 0 ||
	    (dra_fresh == 0 && p->dra != NULL &&
	     (p->dra->pod.any || p->dra->node.gpus.n > 0 || p->dra->node.n_claims > 0))) {
		policies_release(gen);
		free(v);
		outcome_deny(
		    o, METRICS_ERROR, 500, "DRANotRead",
		    "cannot check %s: gpu-memory-guard has not read the cluster's DRA "
		    "ResourceSlices and ResourceClaims (not listed yet, or their watch broken "
		    "longer than --cache-max-staleness); denied to keep GPU memory safe, retry "
		    "later",
		    p->pod_name);
		return 0;
	}
	rc = core_over(pl, p, pn, &pod, gen, now, 0, v);
	*out = ps->main;
	snprintf(o->demand, sizeof(o->demand), "%s", ps->main.source);
	if (rc != 0) {
		outcome_deny(o, METRICS_DENIED, 403, "InvalidCapacity", "node %s: %s", p->node,
		             ps->main.decision.message);
	} else if (!ps->allowed) {
		outcome_deny(o, METRICS_DENIED, 403, ps->reason, "%s", ps->message);
		if (ps->policy != NULL)
			snprintf(o->policy, sizeof(o->policy), "%s", ps->policy);
	} else {
		/* Over the flags' threshold, allowed only by --mode warn or audit. */
		int by_mode = ps->main.decision.verdict == POLICY_WARN_ONLY;
		outcome_allow(o, ps->reason, 0);
		for (size_t i = 0; i < ps->n_warnings; i++)
			if (!(by_mode && pl->mode_audit &&
			      strcmp(ps->warnings[i], ps->main.decision.message) == 0))
				outcome_warn(o, ps->warnings[i]);
		if (ps->main.warning[0] != '\0') /* two of the pod's sources disagree */
			outcome_warn(o, ps->main.warning);
		if (o->n_warnings > 0)
			o->mdec = METRICS_WARNED;
		outcome_keep_audit(o, ps);
		/* --mode audit reports the pods whose demand was inferred (not GPU_MEMORY_LIMIT):
		 * what a later --undeclared refuse, or a policy's spec.undeclared, would refuse. */
		if (pl->mode_audit && p->demand->source > DEMAND_SRC_DECLARED && o->demand[0])
			add_mode_audit_inferred(o);
		if (by_mode) {
			o->by_mode = pl->mode_audit ? "audit" : "warn";
			if (pl->mode_audit)
				outcome_audit_mode(o, ps->main.decision.message);
		}
		reserve = ps->reserve;
	}
	policies_release(gen);
	out->reserve = reserve;
	free(v);
	return reserve;
}

/* Admitted, but its reservation cannot be recorded: deny (fail safe). */
static void deny_unreserved(struct outcome *o, const struct placement *p, const char *why)
{
	o->n_warnings = 0;
	outcome_deny(
	    o, METRICS_ERROR, 500, "LedgerFull",
	    "cannot admit %s on %s: too many placements in flight (%s); denied to keep GPU memory "
	    "safe, retry later",
	    p->pod_name, p->node, why);
}

/* Put the reservation the core decided (res) and commit it (reservations.h). RESV_COMMITTED
 * (o records the reserved pod), RESV_CONFLICT when may_conflict (the node was let go while the
 * core decided: the caller decides again; o untouched), or the error, o then denied. */
static int commit_reservation(struct placer *pl, struct resv *rv, const struct placement *p,
                              const struct placement_result *res, int may_conflict,
                              struct outcome *o)
{
	int rc = resv_put(rv, p->key, p->uid, res->reserve_claim, res->reserve_bytes,
	                  p->pod_create ? pl->unseen_ttl_ms : 0);
	if (rc == 0)
		rc = resv_commit(rv, NULL, 0);
	if (rc == RESV_CONFLICT && may_conflict)
		return rc;
	if (rc != RESV_COMMITTED)
		deny_unreserved(o, p,
		                rc == RESV_EFULL      ? "ledger full"
		                : rc == RESV_CONFLICT ? "the node's reservations changed meanwhile"
		                                      : "no memory");
	else
		outcome_reserved(o, p->uid);
	return rc;
}

/* Decide with the placement core over the node's snapshot, whose reservations are rv's
 * (reservations.h, begun by the caller, the node locked from begin to commit); when allowed
 * with a reservation, put it and commit. */
static void commit_decision(struct placer *pl, struct resv *rv, const struct placement *p,
                            const struct placement_node *pn, uint64_t now, struct outcome *o)
{
	struct placement_result res;

	if (decide_core(pl, p, pn, now, o, &res))
		(void)commit_reservation(pl, rv, p, &res, 0, o);
}

/*
 * --reservations shared: one placement decided over the node's visible pods plus its shared
 * record (shared.h), inside shared_place(). Each call decides anew from the outcome as it was
 * before the first (a conflict means another replica changed the record).
 */
struct shared_decision {
	struct placer *pl;
	const struct placement *p;
	struct outcome *o;
	struct outcome start;
	const struct placement_node *api_node; /* the API path's node and pods; NULL: the cache */
	struct record *rec;
	int fresh;
	int decided; /* the cache knew the node (always 1 on the API path) */
	enum shared_verdict verdict;
	double deciding_s; /* time inside decide_shared: the rest of shared_place is waiting */
};

/* Clock of a decision: monotonic; on the cache path held back to the cache's progress, so a
 * reservation never stops counting before the cache has caught up past its expiry (a watch
 * that went quiet). Counting it longer is the safe side. On the cache path it is read before
 * the node's view is copied (view.h): the copy is then at least as new as the clock. */
static uint64_t decision_now(const struct placer *pl, int cache_path)
{
	uint64_t now = ledger_now_ms();
	if (cache_path && pl->cache_progress_ms != NULL) {
		uint64_t seen = pl->cache_progress_ms(pl->cache_ctx);
		if (seen < now)
			now = seen;
	}
	return now;
}

/*
 * One decision over the node's record (reservations.h, the shared record backend, over the
 * working copy shared_place gives: begin, items, put; shared_place's batch commits it, one
 * write for the placements it batched). On the cache path the put also prunes the entries of
 * the pods every replica's cache shows by now (visible past the grace); both paths drop
 * expired ones.
 */
static void decide_on_record(struct shared_decision *d, const struct placement_node *visible,
                             uint64_t now)
{
	struct placer *pl = d->pl;
	const struct placement *p = d->p;
	struct placement_result res;
	struct resv rv = {0};
	const struct placement_item *items;
	size_t n_items;
	int cached = d->api_node == NULL;

	d->verdict = SHARED_NO_WRITE;
	if (resv_begin_record(&rv, pl->shared, p->node, d->rec, d->fresh,
	                      cached ? visible->pods : NULL, cached ? visible->n_pods : 0,
	                      now) != 0 ||
	    resv_items(&rv, &items, &n_items) != 0) {
		deny_nomem(d->o, p->pod_name);
		goto out;
	}
	struct placement_node pn = *visible;
	pn.reserved = items;
	pn.n_reserved = n_items;
	int reserve = decide_core(pl, p, &pn, now, d->o, &res);
	if (!d->o->allowed) {
		/* Counted entries of a record read before this review: other replicas may have
		 * dropped some since. Read it and decide again. */
		if (res.reserved_bytes > 0 && !resv_fresh(&rv) && !res.invalid_input)
			d->verdict = SHARED_REREAD;
		goto out;
	}
	if (!reserve) {
		/* Allowed without a reservation (a dry run): no write will check the copy, and
		 * entries other replicas added since would be missed. Read it and decide again. */
		if (!resv_fresh(&rv))
			d->verdict = SHARED_REREAD;
		goto out;
	}
	int rc = resv_put(&rv, p->key, p->uid, res.reserve_claim, res.reserve_bytes,
	                  p->pod_create ? pl->unseen_ttl_ms : 0);
	metrics_unseen_dropped(pl->metrics, resv_unseen_dropped(&rv));
	if (rc != 0) {
		deny_unreserved(d->o, p,
		                rc == RESV_EFULL ? "the node's reservation record is full"
		                                 : "cannot record the reservation");
		goto out;
	}
	d->verdict = SHARED_WRITE;
out:
	resv_end(&rv);
}

/* The capacity of a node the cache knows (v), with its DRA GPUs (dra_view_capacity): 0, or
 * -1 with err (what to set). */
static int view_capacity(const struct view_node *v, const struct dra_view *dv, const char *node,
                         struct capacity *cap, char *err, size_t errlen)
{
	if (v->capacity_rc == 0)
		*cap = *v->cap;
	else
		memset(cap, 0, sizeof(*cap));
	snprintf(err, errlen, "%s", v->capacity_error);
	return dra_view_capacity(dv, cap, v->capacity_rc, node, err, errlen) != 0 ? -1 : 0;
}

/* The cache's view of p's node decides (sets *decided) unless the cache does not know the
 * node. Returns 1 when the placement is to be decided over the view, 0 when not (unknown node:
 * the API path; unknown capacity: denied). */
static int cached_view_usable(const struct view_node *v, const struct placement *p,
                              struct outcome *o, int *decided, struct capacity *cap)
{
	char err[CAPACITY_MSG_MAX];

	if (!v->known)
		return 0;
	*decided = 1;
	o->source = "cache";
	if (view_capacity(v, p->dra, p->node, cap, err, sizeof(err)) != 0) {
		outcome_deny(o, METRICS_DENIED, 403, "UnknownCapacity", "cannot place %s on %s: %s",
		             p->pod_name, p->node, err);
		return 0;
	}
	return 1;
}

/* The shared record decided over the node's view copied out of the cache (now: read before
 * the copy). */
static void shared_cached_view(struct shared_decision *d, const struct view_node *v, uint64_t now)
{
	struct capacity cap;

	if (!cached_view_usable(v, d->p, d->o, &d->decided, &cap))
		return;
	struct placement_node pn;
	view_placement_node(v, &cap, NULL, 0, d->p->dra ? &d->p->dra->node : NULL, &pn);
	const struct placement *given = d->p;
	struct placement q = *given;
	q.node_labels = v->labels; /* the copy's: valid while v is */
	d->p = &q;
	decide_on_record(d, &pn, now);
	d->p = given;
}

static enum shared_verdict decide_shared(void *ctx, struct record *rec, int fresh)
{
	struct shared_decision *d = ctx;
	double t = monotime_s();

	*d->o = d->start;
	d->rec = rec;
	d->fresh = fresh;
	d->verdict = SHARED_NO_WRITE;
	if (d->api_node != NULL) {
		decide_on_record(d, d->api_node, decision_now(d->pl, 0));
	} else {
		uint64_t now = decision_now(d->pl, 1);
		struct view_node vn;

		if (view_from_cache(d->pl->cache, d->p->node, &vn) != 0) {
			d->decided = 1;
			deny_nomem(d->o, d->p->pod_name);
		} else {
			shared_cached_view(d, &vn, now);
			view_node_clear(&vn);
		}
	}
	d->deciding_s += monotime_s() - t;
	return d->verdict;
}

/*
 * Place p on its node through the shared record, the node locked in this process (ln). With
 * api_node NULL the node comes from the cache: returns 0 when the cache does not know the
 * node (nothing decided), 1 when decided (o set).
 */
static int place_shared(struct placer *pl, const struct placement *p,
                        const struct placement_node *api_node, struct outcome *o)
{
	char err[ERR_MAX];
	unsigned attempts = 0;
	struct shared_decision d = {
	    pl, p, o, *o, api_node, NULL, 0, api_node != NULL, SHARED_NO_WRITE, 0};
	double deadline = o->t0 + (double)(pl->budget_ms ? pl->budget_ms : 2000) / 1000.0;
	double t = monotime_s();

	int rc = shared_place(pl->shared, p->node, deadline, decide_shared, &d, &attempts, err,
	                      sizeof(err));
	/* Reads and writes of the record are waiting for the API server, not our own time. */
	o->waited += monotime_s() - t - d.deciding_s;
	if (!d.decided)
		return 0;
	if (rc == 0 && d.verdict == SHARED_WRITE && o->allowed) /* written to the Lease */
		outcome_reserved(o, p->uid);
	if (rc != 0) {
		o->n_warnings = 0;
		if (rc == SHARED_ECORRUPT)
			outcome_deny(o, METRICS_ERROR, 500, "ReservationRecordUnreadable",
			             "cannot admit %s on %s: %s", p->pod_name, p->node, err);
		else
			outcome_deny(
			    o, METRICS_ERROR, 500, "APIServerUnavailable",
			    "cannot admit %s on %s: the shared reservation record could not be "
			    "updated (%s); denied to keep GPU memory safe, retry later",
			    p->pod_name, p->node, err);
	}
	return 1;
}

/* A reservation the list does not show, past the grace period: its pod is looked up. */
struct stale {
	char key[KEY_MAX];
	char uid[LEDGER_UID_MAX];
	uint64_t reserved_ms;
	const char *why; /* its pod is gone (static text): the reservation is dropped */
};

struct stale_scan {
	struct stale s[PLACER_MAX_STALE_CHECKS]; /* oldest first */
	size_t n;
	uint64_t before;      /* reserved at or before this: past the grace period */
	const char *self_key; /* the pod being placed: not stale, it is being placed again */
	const struct view_node *shown; /* the cache off: the listed pods, whose reservations
	                                  settle instead (ledger_settle's rule); NULL: none */
};

/* Whether the view lists a pod that settles the entry of key (uid: "" when unknown) by
 * ledger_settle's rule (resvrule.h, resv_settled_by). */
static int view_lists(const struct view_node *v, const char *key, const char *uid)
{
	for (size_t i = 0; i < v->n_listed; i++)
		if (resv_settled_by(key, uid, v->listed_keys[i], v->listed_uids[i]))
			return 1;
	return 0;
}

/* Keep the PLACER_MAX_STALE_CHECKS oldest reservations past the grace period. Keys of pods
 * known only by generateName ("ns/prefix?uid", ledger_key) name no pod: skipped. */
static void collect_stale(void *ctx, const char *key, const char *uid, const char *claim,
                          uint64_t bytes, uint64_t reserved_ms)
{
	struct stale_scan *sc = ctx;
	size_t i = sc->n;

	(void)claim;
	(void)bytes;
	if (reserved_ms > sc->before || strcmp(key, sc->self_key) == 0 || strchr(key, '?') ||
	    (sc->shown != NULL && view_lists(sc->shown, key, uid)))
		return;
	if (i == PLACER_MAX_STALE_CHECKS) {
		if (reserved_ms >= sc->s[i - 1].reserved_ms)
			return;
		i--;
	} else {
		sc->n++;
	}
	while (i > 0 && sc->s[i - 1].reserved_ms > reserved_ms) {
		sc->s[i] = sc->s[i - 1];
		i--;
	}
	snprintf(sc->s[i].key, sizeof(sc->s[i].key), "%s", key);
	snprintf(sc->s[i].uid, sizeof(sc->s[i].uid), "%s", uid);
	sc->s[i].reserved_ms = reserved_ms;
	sc->s[i].why = NULL;
}

/* With the node locked: the reservations to look up (placer.h, "Deleted pods") into *sc.
 * Returns how many. */
static size_t scan_stale(struct placer *pl, struct ledger_node *ln, const struct placement *p,
                         const struct view_node *v, uint64_t now, struct stale_scan *sc)
{
	memset(sc, 0, sizeof(*sc));
	if (now < pl->grace_ms)
		return 0;
	sc->before = now - pl->grace_ms;
	sc->self_key = p->key;
	/* With the cache off the listed pods' reservations settle (check_node); with it on
	 * they settle only when the cache shows them, and a lookup may drop them before. */
	sc->shown = pl->cache == NULL ? v : NULL;
	ledger_visit(ln, now, collect_stale, sc);
	sc->shown = NULL;
	return sc->n;
}

/* Look up the pods of the stale reservations, no lock held: up to PLACER_MAX_STALE_CHECKS
 * GETs, oldest first, while the review's budget lasts. Never denies: a reservation that cannot
 * be checked stays counted (fail safe). */
static void look_up_stale(struct placer *pl, const struct placement *p, struct stale_scan *sc,
                          struct outcome *o)
{
	for (size_t i = 0; i < sc->n; i++) {
		char ns[KEY_MAX], err[ERR_MAX];
		const char *name;
		cJSON *pod = NULL;
		long code = 0;

		if (pl->budget_ms && (monotime_s() - o->t0) * 1000.0 >= (double)pl->budget_ms)
			break; /* no time left: counting them is the safe side */
		if (pod_key_split(sc->s[i].key, ns, sizeof(ns), &name) != 0)
			continue; /* not a "namespace/name" key: cannot be looked up */
		double t = monotime_s();
		int rc = pl->src.get_pod(pl->src.ctx, ns, name, &pod, &code, err, sizeof(err));
		o->waited += monotime_s() - t;
		if (rc == KUBE_ENOTFOUND) /* gone too (resv_pod_gone) */
			sc->s[i].why = "deleted";
		else if (rc == 0 && cJSON_IsObject(pod))
			sc->s[i].why = resv_pod_gone(pod, p->node);
		cJSON_Delete(pod);
	}
}

/* ledger_visit: whether the entry looked up is still there as it was. */
struct same_entry {
	const struct stale *s;
	int found;
};

static void find_same(void *ctx, const char *key, const char *uid, const char *claim,
                      uint64_t bytes, uint64_t reserved_ms)
{
	struct same_entry *f = ctx;

	(void)claim;
	(void)bytes;
	if (strcmp(key, f->s->key) == 0 && strcmp(uid, f->s->uid) == 0 &&
	    reserved_ms == f->s->reserved_ms)
		f->found = 1;
}

/*
 * With the node locked again: drop the reservations whose pods the lookups found gone, each
 * only when it is still the entry looked up (the same uid and reserved_ms: one refreshed or
 * made anew for a pod of that name while the lock was let go is kept).
 */
static void drop_gone(struct ledger_node *ln, const struct placement *p,
                      const struct stale_scan *sc, uint64_t now)
{
	for (size_t i = 0; i < sc->n; i++) {
		struct same_entry f = {&sc->s[i], 0};

		if (sc->s[i].why == NULL)
			continue;
		ledger_visit(ln, now, find_same, &f);
		if (!f.found)
			continue;
		ledger_remove(ln, sc->s[i].key, sc->s[i].uid);
		log_fields(LOG_INFO, "reservation dropped",
		           (struct log_field[]){LOG_STR("node", p->node),
		                                LOG_STR("pod", sc->s[i].key),
		                                LOG_STR("reason", sc->s[i].why), LOG_END});
	}
}

/* LIST the pods on p's node, no lock held, into its live view v (view.h: view_from_lists over
 * node_obj and the list). 0, or -1 when denied (o set: fail closed). */
static int live_view(struct placer *pl, const struct placement *p, const cJSON *node_obj,
                     struct view_node *v, struct outcome *o)
{
	const struct view_live_config cfg = {pl->dcfg, pl->policies != NULL};
	cJSON *items = NULL;
	long code = 0;
	char err[ERR_MAX], call[ADMISSION_NAME_MAX + 32];

	snprintf(call, sizeof(call), "LIST pods on node %s", p->node);
	/* After the node's first lock: waiting behind other placements on it counts too. */
	if (outcome_over_budget(o, pl->budget_ms, p->pod_name, call))
		return -1;
	double t = monotime_s();
	int rc = pl->src.list_pods_on_node(pl->src.ctx, p->node, &items, &code, err, sizeof(err));
	o->waited += monotime_s() - t;
	if (rc != 0 || !cJSON_IsArray(items)) {
		outcome_fail_closed(o, p->pod_name, call, rc ? rc : KUBE_EPARSE,
		                    rc ? err : "not a list of pods");
		cJSON_Delete(items);
		return -1;
	}
	rc = view_from_lists(p->node, node_obj, items, &cfg, v);
	cJSON_Delete(items);
	if (rc != 0) {
		deny_nomem(o, p->pod_name);
		return -1;
	}
	return 0;
}

/* Take a released node's lock again, counting the wait: when may_block, waiting (1); else only
 * if it is free (1), 0 when another placement holds it (still released). */
static int relock(struct ledger_node *ln, int may_block, struct outcome *o)
{
	double t = monotime_s();
	int taken = 1;

	if (may_block)
		ledger_relock(ln);
	else
		taken = ledger_tryrelock(ln);
	o->waited += monotime_s() - t;
	return taken;
}

/*
 * The API path's placement on p's node (its capacity known: p->cap; node_obj: the Node the
 * API server gave): the node's live view (view_from_lists over a LIST of its pods), the
 * reservations (reservations.h, the local ledger: begin with the view's generation), decide,
 * put and commit. No lock is held across an API call: the node's ledger lock is let go
 * (ledger_release) for the LIST and the lookups of stale reservations, and taken again to
 * settle, decide and reserve.
 *
 * Why a decision over a view taken before the lock is right: the decision counts each pod the
 * view shows and each live reservation the view does not show (placement.h: a reservation
 * and a visible pod of the same pod are one). A reservation made meanwhile (another placement
 * committed) is in the ledger when we lock: counted. An entry that expired or was dropped as
 * gone (ledger_remove, ledger_forget) holds nothing, whatever the view shows. What the view
 * could miss is only an entry dropped because a newer view showed its pod (ledger_settle by
 * another placement or the watch cache's path): that pod may be after our LIST, so neither
 * counted as visible nor as reserved. ledger_generation() counts exactly those drops, and the
 * node is held (released, never freed) from before the LIST, so the count cannot restart: when
 * it is unchanged under the lock, every reservation the view could miss is still counted.
 * When it changed, the LIST is made again (VIEW_ATTEMPTS in all, within the budget), then the
 * placement is denied (fail closed: NodeBusy). Lookups already made stay valid: drop_gone()
 * drops only the very entries looked up.
 */
#define VIEW_ATTEMPTS 3
static void check_node(struct placer *pl, struct placement *p, const cJSON *node_obj,
                       struct outcome *o)
{
	struct view_node v = {0};
	struct resv rv = {0};
	const struct placement_item *items;
	size_t n_items;
	struct stale_scan sc = {0};
	struct placement_node pn;
	struct placement q = *p;
	uint64_t gen, now = 0;
	int looked = 0, locked = 0;

	if (pl->shared != NULL) {
		/* Shared reservations serialize (and batch) placements per node themselves. */
		if (live_view(pl, p, node_obj, &v, o) == 0) {
			q.node_labels = v.labels;
			view_placement_node(&v, p->cap, NULL, 0, p->dra ? &p->dra->node : NULL,
			                    &pn);
			place_shared(pl, &q, &pn, o);
		}
		view_node_clear(&v);
		return;
	}
	double t = monotime_s();
	struct ledger_node *ln = ledger_lock(pl->ledger, p->node);
	o->waited += monotime_s() - t;
	if (ln == NULL) {
		deny_untracked(o, p->pod_name, p->node);
		return;
	}
	locked = 1;
	for (int attempt = 1;; attempt++) {
		gen = ledger_generation(ln);
		ledger_release(ln);
		locked = 0;
		view_node_clear(&v);
		now = decision_now(pl, 0); /* before the LIST: the view is at least as new */
		if (live_view(pl, p, node_obj, &v, o) != 0)
			goto out;
		relock(ln, 1, o);
		locked = 1;
		if (ledger_generation(ln) == gen && !looked) {
			looked = 1;
			if (scan_stale(pl, ln, p, &v, now, &sc) > 0) {
				ledger_release(ln);
				locked = 0;
				look_up_stale(pl, p, &sc, o);
				relock(ln, 1, o);
				locked = 1;
			}
		}
		if (ledger_generation(ln) == gen)
			break;
		if (attempt == VIEW_ATTEMPTS) {
			outcome_deny(
			    o, METRICS_ERROR, 500, "NodeBusy",
			    "cannot check %s: other placements on node %s kept settling its "
			    "reservations while its pods were listed (%d lists); denied to keep "
			    "GPU "
			    "memory safe, retry later",
			    p->pod_name, p->node, VIEW_ATTEMPTS);
			goto out;
		}
	}
	drop_gone(ln, p, &sc, now);
	/* With the watch cache on, a reservation settles only when the cache shows its pod: a pod
	 * this live list shows may not have reached the cache yet, and dropping its reservation
	 * here would leave it uncounted by the next decision from the cache. This decision counts
	 * a listed pod and its reservation once either way (placement.h). The generation is
	 * gen (just checked, and drop_gone's removals do not count in it): begin holds. */
	struct resv_seen listed = {v.listed_keys, v.listed_uids, v.n_listed};
	if (resv_begin_ledger(&rv, ln, gen, pl->cache == NULL ? &listed : NULL, now) != 0 ||
	    resv_items(&rv, &items, &n_items) != 0) {
		deny_nomem(o, p->pod_name);
		goto out;
	}
	q.node_labels = v.labels;
	view_placement_node(&v, p->cap, items, n_items, p->dra ? &p->dra->node : NULL, &pn);
	commit_decision(pl, &rv, &q, &pn, now, o);
out:
	if (locked)
		ledger_unlock(ln);
	else
		ledger_end(ln);
	view_node_clear(&v);
	resv_end(&rv);
}

/* The DRA view of node for pod uid of namespace ns (refs: the claims it names, or NULL), into
 * *out (NULL without a DRA store). 0, or -1 when out of memory (o denied). */
static int dra_view_for(struct placer *pl, const char *node, const char *ns, const char *uid,
                        const struct dra_pod_refs *refs, const char *pod_name, struct outcome *o,
                        struct dra_view **out)
{
	*out = NULL;
	if (pl->dra == NULL)
		return 0;
	if (dra_store_view(pl->dra, node, ns, uid, refs, out) != 0) {
		deny_nomem(o, pod_name);
		return -1;
	}
	return 0;
}

/* Whether a pod that asks no GPU resource (placement_dra_demand: no GPU units) has no claim that
 * holds or can get a GPU on the node (a NIC's claim): then no GPU of it is placed there. The one
 * rule for the webhook (dra_not_gpu) and the extender (placer_fit: PLACER_FIT_NO_GPU_HERE). */
static int dra_no_gpu_here(const struct demand *d, const struct dra_view *v)
{
	return d->gpus == 0 &&
	       !(v != NULL && (v->pod.n_here > 0 || v->pod.extended ||
	                       (v->node.gpus.n > 0 && v->pod.n_pending + v->pod.n_unknown > 0)));
}

/* dra_no_gpu_here: not a GPU placement. 1 when so (o allowed). */
static int dra_not_gpu(const struct demand *d, const struct dra_view *v, struct outcome *o)
{
	if (!dra_no_gpu_here(d, v))
		return 0;
	outcome_allow(o, "NotGPU", 0);
	return 1;
}

void placer_live(struct placer *pl, const struct placer_pod *pp, struct outcome *o)
{
	struct capacity cap;
	struct dra_view *dv = NULL;
	cJSON *node_obj = NULL;
	long code = 0;
	char err[ERR_MAX], call[ADMISSION_NAME_MAX + 32];
	const char *pod_name = pp->pod_name, *node = pp->node;

	o->source = "api";
	snprintf(call, sizeof(call), "GET node %s", node);
	if (outcome_over_budget(o, pl->budget_ms, pod_name, call))
		return;
	double t = monotime_s();
	int rc = pl->src.get_node(pl->src.ctx, node, &node_obj, &code, err, sizeof(err));
	o->waited += monotime_s() - t;
	if (rc != 0 || !cJSON_IsObject(node_obj)) {
		outcome_fail_closed(o, pod_name, call, rc ? rc : KUBE_EPARSE,
		                    rc ? err : "not a Node");
		goto out;
	}
	if (dra_view_for(pl, node, pp->ns, pp->uid, pp->refs, pod_name, o, &dv) != 0 ||
	    dra_not_gpu(pp->demand, dv, o))
		goto out;
	rc = capacity_from_node(node_obj, pl->dcfg, &cap, err, sizeof(err));
	if (dra_view_capacity(dv, &cap, rc, node, err, sizeof(err)) != 0) {
		outcome_deny(o, METRICS_DENIED, 403, "UnknownCapacity", "cannot place %s on %s: %s",
		             pod_name, node, err);
		goto out;
	}
	if (pp->key == NULL) {
		outcome_deny(o, METRICS_DENIED, 403, "NameTooLong",
		             "cannot place %s: name too long", pod_name);
		goto out;
	}
	struct placement p = placement_of(pp, dv);
	p.cap = &cap;
	check_node(pl, &p, node_obj, o);
	outcome_warn(o, pp->demand->warning);
out:
	dra_view_free(dv);
	cJSON_Delete(node_obj);
}

int placer_cache_may_decide(const struct placer *pl, int api_failed)
{
	double now = monotime_s();

	if (pl->cache == NULL || (pl->cache_fresh != NULL && !pl->cache_fresh(pl->cache_ctx, now)))
		return 0;
	return api_failed || pl->cache_connected == NULL || pl->cache_connected(pl->cache_ctx, now);
}

/* One placement decided over the node's view copied out of the cache (view.h). */
struct cached {
	struct placer *pl;
	const struct placement *p;
	struct ledger_node *ln;
	struct outcome *o;
	int decided;  /* 0: the cache does not know the node: take the API path */
	uint64_t now; /* decision_now(), read before the view was copied */
	uint64_t gen; /* the node's ledger_generation, read before the view was copied */
	/* An optimistic attempt (placer_cached): the node let go while the view is copied and
	 * while the core decides, its reservations' copies decided over, the put committed by
	 * compare-and-swap. retry: the node changed meanwhile, decide again; busy: the node could
	 * not be taken again without waiting (may_block 0), it is released: ledger_end. */
	int optimistic, may_block, retry, busy;
};

/* ledger_visit: the reservations of the claims' pods that hold more than the claims count */
struct dra_keep {
	const struct dra_view *dv;
	unsigned char *keep; /* per dv pod */
};

/* The shares the node's claims reserved for (or owned by) the pod of uid count. */
static uint64_t dra_claims_bytes(const struct dra_view *dv, const char *uid)
{
	uint64_t b = 0;

	for (size_t i = 0; i < dv->node.n_claims; i++) {
		const struct dra_claim_use *c = &dv->node.claims[i];
		int has = uid[0] != '\0' && strcmp(c->owner, uid) == 0;

		for (size_t k = 0; !has && k < c->n_pods; k++)
			has = strcmp(c->pods[k], uid) == 0;
		if (has)
			b = b + c->bytes < b ? UINT64_MAX : b + c->bytes;
	}
	return b;
}

static void dra_keep_visit(void *ctx, const char *key, const char *uid, const char *claim,
                           uint64_t bytes, uint64_t reserved_ms)
{
	struct dra_keep *k = ctx;

	(void)claim;
	(void)reserved_ms;
	for (size_t i = 0; i < k->dv->n_pods; i++)
		if (resv_settled_by(key, uid, k->dv->keys[i], k->dv->uids[i]) &&
		    bytes > dra_claims_bytes(k->dv, k->dv->uids[i]))
			k->keep[i] = 1;
}

/*
 * The cache path's placement over the locked node's reservations (reservations.h, the local
 * ledger): the reservations of the pods the cache now shows on the node (the same name and
 * uid) settle at begin, and so do those of the pods the node's DRA claims are reserved for:
 * the claims count them (placement.h), and such a pod (no GPU resource) is not one the cache
 * reports gone when it is deleted. A DRA pod's reservation holding more than its claims count
 * (a mixed pod: its device-plugin units too) stays until the pod shows, as placement counts it.
 */
static void decide_cached(struct cached *c, const struct view_node *v)
{
	struct resv rv = {0};
	const char **keys = NULL;
	const struct dra_view *dv = c->p->dra;
	size_t n_dra = dv != NULL ? dv->n_pods : 0, n_seen = v->n_pods + n_dra, n_items;
	const struct placement_item *items;
	uint64_t now = c->now;
	struct capacity cap;

	if (!cached_view_usable(v, c->p, c->o, &c->decided, &cap))
		return;
	if (n_seen > 0 && (keys = calloc(2 * n_seen, sizeof(*keys))) == NULL)
		goto nomem;
	for (size_t i = 0; i < v->n_pods; i++) {
		keys[i] = v->pods[i].key;
		keys[n_seen + i] = v->pods[i].uid;
	}
	if (n_dra > 0) {
		struct dra_keep k = {dv, calloc(n_dra, 1)};
		size_t n = v->n_pods;

		if (k.keep == NULL)
			goto nomem;
		ledger_visit(c->ln, now, dra_keep_visit, &k);
		for (size_t i = 0; i < n_dra; i++)
			if (!k.keep[i]) {
				keys[n] = dv->keys[i];
				keys[n_seen + n] = dv->uids[i];
				n++;
			}
		free(k.keep);
		n_dra = n - v->n_pods;
	}
	struct resv_seen seen = {keys, keys ? keys + n_seen : NULL, v->n_pods + n_dra};
	/* A conflict at begin: an entry the view (copied while the node was let go) could miss was
	 * settled meanwhile. Not when the node was held while the view was copied. */
	int rc = resv_begin_ledger(&rv, c->ln, c->gen, &seen, now);
	if (rc == RESV_CONFLICT && c->optimistic) {
		c->retry = 1;
		goto out;
	}
	if (c->optimistic)
		resv_own_items(&rv); /* decided over with the node let go */
	if (rc != 0 || resv_items(&rv, &items, &n_items) != 0)
		goto nomem;
	/* now may be held back to the cache's progress (decision_now): the put's TTL still runs
	 * from the real clock, so a watch that went quiet does not shorten it. */
	resv_stamp_at(&rv, ledger_now_ms());
	struct placement_node pn;
	view_placement_node(v, &cap, items, n_items, dv ? &dv->node : NULL, &pn);
	struct placement q = *c->p;
	struct placement_result res;
	q.node_labels = v->labels;
	if (!c->optimistic) {
		commit_decision(c->pl, &rv, &q, &pn, now, c->o);
		goto out;
	}
	/* Optimistic: no lock while the core decides; the commit is a compare-and-swap on the
	 * node's version (resv_commit): a change since begin means deciding again. */
	ledger_release(c->ln);
	int reserve = decide_core(c->pl, &q, &pn, now, c->o, &res);
	if (!relock(c->ln, c->may_block, c->o)) {
		c->busy = 1;
		goto out;
	}
	if (reserve && commit_reservation(c->pl, &rv, &q, &res, 1, c->o) == RESV_CONFLICT)
		c->retry = 1;
	goto out;
nomem:
	deny_nomem(c->o, c->p->pod_name);
out:
	resv_end(&rv);
	free(keys);
}

static int target_cached(struct placer *pl, const struct placer_target *t, struct outcome *o)
{
	return t->pod != NULL ? placer_cached(pl, t->pod, 1, o) : t->cached(t->ctx, o);
}

void placer_decide(struct placer *pl, const struct placer_target *t, struct outcome *o)
{
	if (!target_cached(pl, t, o)) {
		if (t->pod != NULL)
			placer_live(pl, t->pod, o);
		else
			t->live(t->ctx, o);
	}
	if (o->allowed || o->reason == NULL || strcmp(o->reason, "APIServerUnavailable") != 0 ||
	    !placer_cache_may_decide(pl, 1))
		return;
	struct outcome api = *o; /* the refusal, if the cache cannot decide either */
	o->api_failed = 1;
	o->n_warnings = 0;
	if (!target_cached(pl, t, o)) {
		double waited = o->waited;
		*o = api;
		o->waited = waited;
	}
}

int placer_cached(struct placer *pl, const struct placer_pod *pp, int may_block, struct outcome *o)
{
	int busy = 0, decided;
	struct ledger_node *ln;
	struct dra_view *dv = NULL;
	const char *pod_name = pp->pod_name, *node = pp->node;
	const struct demand *d = pp->demand;

	if (!placer_cache_may_decide(pl, o->api_failed))
		return 0;
	/* Shared reservations are written to the API server: never on a server thread. */
	if (pl->shared != NULL && !may_block)
		return 0;
	if (pp->key == NULL) {
		outcome_deny(o, METRICS_DENIED, 403, "NameTooLong",
		             "cannot place %s: name too long", pod_name);
		return 1;
	}
	struct placement p = placement_of(pp, NULL);
	if (dra_view_for(pl, node, pp->ns, pp->uid, pp->refs, pod_name, o, &dv) != 0 ||
	    dra_not_gpu(d, dv, o)) {
		dra_view_free(dv);
		return 1;
	}
	p.dra = dv;
	if (pl->shared != NULL) {
		/* No node lock here: shared_place batches this process's placements on a node
		 * into one record write (group commit). */
		decided = place_shared(pl, &p, NULL, o);
		if (decided)
			outcome_warn(o, d->warning);
		dra_view_free(dv);
		return decided;
	}
	struct outcome start = *o;
	struct cached c;
	for (unsigned attempt = 1;; attempt++) {
		double t = monotime_s();
		if (may_block) {
			ln = ledger_lock(pl->ledger, node);
		} else {
			/* On a server thread: never wait for a node another placement holds (while
			 * it decides; no lock is held across an API call); a worker will decide it
			 * instead. */
			ln = ledger_trylock(pl->ledger, node, &busy);
			if (busy) {
				dra_view_free(dv);
				return 0;
			}
		}
		o->waited += monotime_s() - t;
		if (ln == NULL) {
			dra_view_free(dv);
			deny_untracked(o, pod_name, node);
			return 1;
		}
		/* The last attempt holds the node from begin to commit: it cannot conflict. */
		c = (struct cached){pl,
		                    &p,
		                    ln,
		                    o,
		                    0,
		                    decision_now(pl, 1),
		                    ledger_generation(ln),
		                    attempt < PLACER_LEDGER_TRIES,
		                    may_block,
		                    0,
		                    0};
		struct view_node vn;
		if (c.optimistic)
			ledger_release(ln); /* the view is copied with no ledger lock held */
		int copied = view_from_cache(pl->cache, node, &vn);
		if (c.optimistic && !relock(ln, may_block, o))
			c.busy = 1;
		else if (copied != 0) {
			c.decided = 1;
			deny_nomem(o, pod_name);
		} else {
			decide_cached(&c, &vn);
		}
		if (copied == 0)
			view_node_clear(&vn);
		if (c.busy) { /* released: a worker decides it, from the start (as it came) */
			double waited = o->waited;
			*o = start;
			o->waited = waited;
			ledger_end(ln);
			dra_view_free(dv);
			return 0;
		}
		ledger_unlock(ln);
		if (!c.retry)
			break;
		double waited = o->waited;
		*o = start; /* the node changed while it was let go: decide again */
		o->waited = waited;
		metrics_ledger_conflict(pl->metrics);
	}
	if (c.decided)
		outcome_warn(o, d->warning);
	dra_view_free(dv);
	return c.decided;
}

int placer_dra_any(struct placer *pl, const struct placer_pod *pp, struct outcome *o, int *any)
{
	struct dra_view *dv = NULL;

	*any = 0;
	if (dra_view_for(pl, pp->node, pp->ns, pp->uid, pp->refs, pp->pod_name, o, &dv) != 0)
		return -1;
	*any = dv != NULL && dv->pod.any;
	dra_view_free(dv);
	return 0;
}

/* ---- the scheduler extender's question ---- */

const char *placer_fit_ready(const struct placer *pl)
{
	if (pl->policies != NULL && !policies_synced(pl->policies))
		return "PoliciesNotRead";
	if (pl->cache == NULL)
		return "CacheOff";
	if (pl->cache_fresh != NULL && !pl->cache_fresh(pl->cache_ctx, monotime_s()))
		return "CacheNotReady";
	if (pl->dra_fresh != NULL && pl->dra_fresh(pl->cache_ctx, monotime_s()) < 0)
		return "DRANotRead";
	return NULL;
}

/* resv[0, n_resv) then the in_flight items whose uid no reservation has (placer_fit), into
 * *out (owned; the items borrowed). 0 or -1 (no memory). */
static int merge_in_flight(const struct placement_item *resv, size_t n_resv,
                           const struct placement_item *in_flight, size_t n_in_flight,
                           struct placement_item **out, size_t *n, struct placer_fit *f)
{
	struct placement_item *m = NULL;

	*out = NULL;
	*n = 0;
	if (n_resv + n_in_flight == 0)
		return 0;
	if ((m = malloc((n_resv + n_in_flight) * sizeof(*m))) == NULL)
		return -1;
	if (n_resv > 0)
		memcpy(m, resv, n_resv * sizeof(*m));
	*n = n_resv;
	for (size_t i = 0; i < n_in_flight; i++) {
		const struct placement_item *it = &in_flight[i];
		int reserved = 0;

		for (size_t k = 0; it->uid != NULL && !reserved && k < n_resv; k++)
			reserved = resv[k].uid != NULL && strcmp(resv[k].uid, it->uid) == 0;
		if (reserved)
			continue;
		m[(*n)++] = *it;
		f->n_in_flight++;
		f->in_flight_bytes = f->in_flight_bytes + it->bytes < f->in_flight_bytes
		                         ? UINT64_MAX
		                         : f->in_flight_bytes + it->bytes;
	}
	*out = m;
	return 0;
}

/* The node judged over its view v (copied), the DRA view dv (or NULL) and the items counted. */
static void fit_view(struct placer *pl, const struct placer_pod *pp, const struct view_node *v,
                     const struct dra_view *dv, const struct placement_item *items, size_t n,
                     uint64_t now, struct placer_fit *f)
{
	struct capacity cap;

	if (!v->known) {
		f->state = PLACER_FIT_UNKNOWN_NODE;
		return;
	}
	if (dra_no_gpu_here(pp->demand, dv)) {
		f->state = PLACER_FIT_NO_GPU_HERE;
		return;
	}
	if (view_capacity(v, dv, pp->node, &cap, f->error, sizeof(f->error)) != 0) {
		f->state = PLACER_FIT_NO_CAPACITY;
		return;
	}
	f->gen = pl->policies ? policies_acquire(pl->policies) : NULL;
	if (pl->policies != NULL && !policies_gen_synced(f->gen)) {
		f->state = PLACER_FIT_POLICIES_NOT_READ;
		return;
	}
	if ((f->verdict = malloc(sizeof(*f->verdict))) == NULL) {
		f->state = PLACER_FIT_ENOMEM;
		return;
	}
	struct placement_node pn;
	view_placement_node(v, &cap, items, n, dv ? &dv->node : NULL, &pn);
	struct placement p = placement_of(pp, dv);
	p.node_labels = v->labels;
	p.dry_run = 1;
	struct placement_pod pod = core_pod(&p);
	if (core_over(pl, &p, &pn, &pod, f->gen, now, CORE_NO_WORDS, f->verdict) != 0) {
		f->state = PLACER_FIT_INVALID;
		snprintf(f->error, sizeof(f->error), "%s", f->verdict->ps.main.decision.message);
		return;
	}
	f->state = PLACER_FIT_JUDGED;
}

enum placer_fit_state placer_fit(struct placer *pl, const struct placer_pod *pp,
                                 const struct placement_item *in_flight, size_t n_in_flight,
                                 int may_block, struct placer_fit *out)
{
	struct placement_item *resv = NULL, *items = NULL;
	size_t n_resv = 0, n_items = 0;
	struct dra_view *dv = NULL;
	struct view_node vn;
	/* The reservations' clock: held back to the cache's progress (decision_now). */
	uint64_t now = decision_now(pl, 1);
	int rc;

	memset(out, 0, sizeof(*out));
	rc = pl->shared != NULL
	         ? resv_peek_record(pl->shared, pp->node, &resv, &n_resv)
	         : resv_peek_ledger(pl->ledger, pp->node, now, may_block, &resv, &n_resv);
	if (rc != 0) {
		out->state = rc == RESV_EBUSY        ? PLACER_FIT_BUSY
		             : rc == RESV_EUNTRACKED ? PLACER_FIT_UNTRACKED
		                                     : PLACER_FIT_ENOMEM;
		return out->state;
	}
	/* Copied before the cache is read (the store never waits on it). */
	if ((pl->dra != NULL &&
	     dra_store_view(pl->dra, pp->node, pp->ns, pp->uid, pp->refs, &dv) != 0) ||
	    merge_in_flight(resv, n_resv, in_flight, n_in_flight, &items, &n_items, out) != 0 ||
	    view_from_cache(pl->cache, pp->node, &vn) != 0) {
		out->state = PLACER_FIT_ENOMEM;
		goto out;
	}
	fit_view(pl, pp, &vn, dv, items, n_items, now, out);
	view_node_clear(&vn);
out:
	dra_view_free(dv);
	free(items);
	resv_peek_free(resv, n_resv);
	return out->state;
}

void placer_fit_clear(struct placer_fit *f)
{
	free(f->verdict);
	policies_release(f->gen);
	f->verdict = NULL;
	f->gen = NULL;
}

int placer_exempt(const struct placer *pl, const char *ns)
{
	for (size_t i = 0; ns != NULL && i < pl->n_exempt; i++)
		if (strcmp(pl->exempt[i], ns) == 0)
			return 1;
	return 0;
}

enum placer_pod_class placer_classify_pod(const struct placer *pl, const cJSON *pod,
                                          struct demand *d, struct dra_pod_refs *refs, char *err,
                                          size_t errlen)
{
	memset(refs, 0, sizeof(*refs));
	if (pod_is_mirror(pod))
		return PLACER_POD_MIRROR;
	if (demand_from_pod(pod, pl->dcfg, d) != 0 || d->status == DEMAND_INVALID) {
		snprintf(err, errlen, "%s", d->error);
		return PLACER_POD_INVALID;
	}
	if (pl->dra != NULL && dra_pod_refs(pod, refs, err, errlen) != 0)
		return PLACER_POD_INVALID;
	if (d->status == DEMAND_NOT_GPU && refs->any) {
		placement_dra_demand(d); /* GPUs by DRA claims only: decided on the node */
		return PLACER_POD_GPU;
	}
	return d->status == DEMAND_NOT_GPU ? PLACER_POD_NOT_GPU : PLACER_POD_GPU;
}

struct cache *placer_cache(const struct placer *pl)
{
	return pl->cache;
}

int placer_warns_only(const struct placer *pl)
{
	return pl->mode_warn || pl->mode_audit;
}

static int src_get_pod(void *ctx, const char *ns, const char *name, cJSON **pod, long *code,
                       char *err, size_t errlen)
{
	return kube_get_pod(ctx, ns, name, pod, code, err, errlen);
}

static int src_get_node(void *ctx, const char *name, cJSON **node, long *code, char *err,
                        size_t errlen)
{
	return kube_get_node(ctx, name, node, code, err, errlen);
}

static int src_list(void *ctx, const char *node, cJSON **items, long *code, char *err,
                    size_t errlen)
{
	return kube_list_pods_on_node(ctx, node, items, code, err, errlen);
}

struct placer_source placer_source_kube(struct kube_client *c)
{
	struct placer_source s = {c, src_get_pod, src_get_node, src_list};
	return s;
}

struct placer *placer_new(const struct placer_config *cfg)
{
	struct placer *pl;

	if (cfg == NULL || cfg->ledger == NULL || cfg->dcfg == NULL || cfg->src.get_pod == NULL ||
	    cfg->src.get_node == NULL || cfg->src.list_pods_on_node == NULL)
		return NULL;
	pl = calloc(1, sizeof(*pl));
	if (pl == NULL)
		return NULL;
	pl->threshold = cfg->threshold;
	pl->warn_threshold = cfg->warn_threshold;
	pl->mode_warn = cfg->mode_warn;
	pl->mode_audit = cfg->mode_audit && !cfg->mode_warn;
	pl->dcfg = cfg->dcfg;
	pl->budget_ms = cfg->budget_ms;
	pl->grace_ms = cfg->grace_ms ? cfg->grace_ms : PLACER_GRACE_MS_DEFAULT;
	pl->unseen_ttl_ms = cfg->unseen_ttl_ms;
	pl->src = cfg->src;
	pl->cache = cfg->cache;
	pl->cache_fresh = cfg->cache_fresh;
	pl->dra_fresh = cfg->dra_fresh;
	pl->cache_connected = cfg->cache_connected;
	pl->cache_progress_ms = cfg->cache_progress_ms;
	pl->cache_ctx = cfg->cache_ctx;
	pl->dra = cfg->dra;
	pl->ledger = cfg->ledger;
	pl->shared = cfg->shared;
	pl->policies = cfg->policies;
	pl->metrics = cfg->metrics;
	pl->exempt = cfg->exempt_namespaces;
	pl->n_exempt = cfg->exempt_namespaces != NULL ? cfg->n_exempt_namespaces : 0;
	return pl;
}

void placer_free(struct placer *pl)
{
	free(pl);
}
