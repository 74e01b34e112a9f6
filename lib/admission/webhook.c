/*
 * webhook: the review pipeline. See webhook.h for the contract.
 */
#include "webhook.h"

#include "admission.h"
#include "cache.h"
#include "capacity.h"
#include "core.h"
#include "demand.h"
#include "dra.h"
#include "drastore.h"
#include "engine.h"
#include "jsonpath.h"
#include "kube.h"
#include "labelset.h"
#include "ledger.h"
#include "log.h"
#include "metrics.h"
#include "monotime.h"
#include "placement.h"
#include "pod.h"
#include "policies.h"
#include "policy.h"
#include "quantity.h"
#include "reservations.h"
#include "server.h"
#include "shared.h"
#include "text.h"
#include "view.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX LEDGER_KEY_MAX
#define ERR_MAX 512 /* a foreign one-line error (kube, capacity) */

struct webhook {
	double threshold, warn_threshold;
	int mode_warn, mode_audit;
	char *gpu_resources[DEMAND_MAX_RESOURCES];
	struct demand_config dcfg;
	struct engine_defaults engines; /* dcfg.engines */
	char *exempt[WEBHOOK_MAX_EXEMPT];
	size_t n_exempt;
	uint64_t budget_ms;
	uint64_t grace_ms;
	uint64_t unseen_ttl_ms; /* webhook_config.unseen_ttl_ms */
	struct webhook_source src;
	struct cache *cache;
	int (*cache_fresh)(void *ctx, double now_s);
	int (*dra_fresh)(void *ctx, double now_s);
	int (*cache_connected)(void *ctx, double now_s);
	uint64_t (*cache_progress_ms)(void *ctx);
	void *cache_ctx;
	struct dra_store *dra; /* DRA slices and claims; NULL: DRA not read */
	struct ledger *ledger;
	struct shared *shared;     /* --reservations shared; NULL: the ledger reserves */
	struct policies *policies; /* GPUMemoryPolicy objects; NULL: flags and annotations only */
	struct metrics *metrics;
};

/* What the pipeline decided, before encoding. */
struct outcome {
	int allowed;
	int code;                   /* status.code on denial */
	const char *status_reason;  /* status.reason on denial */
	const char *reason;         /* short machine reason, for logs */
	enum metrics_decision mdec; /* for the metric */
	int quiet;                  /* log at debug: always-allowed traffic */
	char node[ADMISSION_NAME_MAX + 1];
	char message[ADMISSION_MSG_MAX];
	char warnings[2][POLICY_MSG_MAX]; /* admission_encode cuts each to the API's limit */
	size_t n_warnings;
	double t0;     /* when the review arrived, webhook_now() seconds */
	double waited; /* seconds blocked in API calls and on the node lock: not our own time */
	const char *source; /* placements: "cache" or "api" */
	int api_failed;     /* the API path could not ask the API server: the cache may decide
	                       if its watch broke only moments ago (webhook.h) */
	/* Breaches of GPUMemoryPolicy objects in audit mode: the auditAnnotations entry
	 * WEBHOOK_AUDIT_KEY (each "GPUMemoryPolicy \"name\" (audit): message", joined by " | ")
	 * and the reasons for the metric. */
	char audit[ADMISSION_MSG_MAX];
	const char *audit_reasons[POLICYSET_AUDIT]; /* static strings */
	size_t n_audit;
	char policy[GPUPOLICY_NAME_MAX]; /* the policy that refused, "" when none */
	const char *by_mode; /* "warn" or "audit": admitted only because of --mode; NULL: not */
	char demand[DEMAND_MSG_MAX]; /* the pod's demand source on the node, "" when strict */
};

double webhook_now(void)
{
	return monotime_s();
}

static void allow(struct outcome *o, const char *reason, int quiet)
{
	o->allowed = 1;
	o->reason = reason;
	o->mdec = METRICS_ALLOWED;
	o->quiet = quiet;
	o->by_mode = NULL;
}

static void deny(struct outcome *o, enum metrics_decision mdec, int code, const char *reason,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void deny(struct outcome *o, enum metrics_decision mdec, int code, const char *reason,
                 const char *fmt, ...)
{
	va_list ap;
	o->allowed = 0;
	o->code = code;
	o->status_reason = code >= 500 ? "InternalError" : "Forbidden";
	o->reason = reason;
	o->mdec = mdec;
	o->quiet = 0;
	o->by_mode = NULL;
	va_start(ap, fmt);
	if (vsnprintf(o->message, sizeof(o->message), fmt, ap) < 0)
		o->message[0] = '\0';
	va_end(ap);
}

static void add_warning(struct outcome *o, const char *text)
{
	if (text == NULL || text[0] == '\0' || o->n_warnings >= 2)
		return;
	char *w = o->warnings[o->n_warnings++];
	size_t n = strlen(text); /* producers NUL-terminate within their buffers */
	if (n >= sizeof(o->warnings[0]))
		n = sizeof(o->warnings[0]) - 1;
	memcpy(w, text, n);
	w[n] = '\0';
}

/*
 * The API server could not be asked: deny (fail closed), naming the call. The scheduler will
 * retry the binding with backoff, so a short outage delays GPU pods rather than overfilling.
 */
static void fail_closed(struct outcome *o, const char *pod, const char *call, int rc,
                        const char *why)
{
	if (rc == KUBE_ENOTFOUND) { /* the API server answered: the object is not there */
		deny(o, METRICS_DENIED, 403, "NotFound", "cannot check %s: %s: not found (%s)", pod,
		     call, why);
		return;
	}
	deny(o, METRICS_ERROR, 500, "APIServerUnavailable",
	     "cannot check %s: the API server could not be asked (%s failed: %s); denied to keep "
	     "GPU memory safe, retry later",
	     pod, call, why);
}

/*
 * Before each API call: when the review already spent its budget since it arrived (slow API
 * server, or a wait for a thread or the node lock), deny now rather than answer after the API
 * server gave up on us. Returns 1 when denied.
 */
static int over_budget(const struct webhook *w, struct outcome *o, const char *pod,
                       const char *call)
{
	double spent_ms = (webhook_now() - o->t0) * 1000.0;
	if (w->budget_ms == 0 || spent_ms < (double)w->budget_ms)
		return 0;
	deny(o, METRICS_ERROR, 500, "APIServerUnavailable",
	     "cannot check %s: no time left to ask the API server (%.0f ms since the review "
	     "arrived, before %s; budget %llu ms): the API server is too slow or the webhook too "
	     "busy; denied to keep GPU memory safe, retry later",
	     pod, spent_ms, call, (unsigned long long)w->budget_ms);
	return 1;
}

static int is_exempt(const struct webhook *w, const char *ns)
{
	for (size_t i = 0; i < w->n_exempt; i++)
		if (strcmp(w->exempt[i], ns) == 0)
			return 1;
	return 0;
}

/* Pod CREATE without a node: check the declarations so mistakes surface at kubectl apply. */
static void check_declarations(struct webhook *w, const cJSON *pod, const char *pod_name,
                               struct outcome *o)
{
	struct demand d;
	int rc = demand_from_pod(pod, &w->dcfg, &d);
	if (rc != 0 || d.status == DEMAND_INVALID) {
		deny(o, METRICS_DENIED, 403, "InvalidDeclaration", "pod %s: %s", pod_name, d.error);
		return;
	}
	allow(o, d.status == DEMAND_OK ? "DeclarationValid" : "NotGPU", d.status != DEMAND_OK);
	add_warning(o, d.warning);
}

/* The ledger cannot lock the node (LEDGER_MAX_NODES tracked, or no memory): deny, fail closed. */
static void deny_untracked(struct outcome *o, const char *pod_name, const char *node)
{
	deny(o, METRICS_ERROR, 500, "LedgerFull",
	     "cannot admit %s on %s: too many nodes tracked; denied to keep GPU memory safe, "
	     "retry later",
	     pod_name, node);
}

/* The pod's GPUMemoryPolicy tier attributes (borrowed). */
struct pod_attrs {
	const char *ns;
	const char *priority_class;            /* NULL or "": none */
	const struct gpupolicy_labels *labels; /* NULL: none */
};

struct placement {
	const char *pod_name; /* "ns/name" for messages */
	const struct pod_attrs *attrs;
	const struct gpupolicy_labels *node_labels; /* NULL: unknown */
	const char *key;                            /* ledger key */
	const char *uid;                            /* the pod's metadata.uid, or NULL */
	const char *node;
	const struct demand *demand;
	const struct capacity *cap; /* API path; the cache path gives the core its own */
	int dry_run;
	const struct dra_view *dra; /* the node's DRA claims and the pod's (NULL: none) */
	int pod_create;             /* a pod CREATE (spec.nodeName): its pod may never be stored */
};

/* Append "--mode audit: text" to the outcome's auditAnnotations entry (cut at its cap). */
static void add_mode_audit(struct outcome *o, const char *text)
{
	static const char sep[] = " | ", tag[] = "--mode audit: ";
	size_t len = strlen(o->audit), cap = sizeof(o->audit) - 1; /* room for the NUL */
	const char *parts[3] = {len ? sep : "", tag, text};

	for (size_t i = 0; i < 3 && len < cap; i++) {
		size_t n = strlen(parts[i]);
		if (n > cap - len)
			n = cap - len; /* the API server keeps a bounded annotation anyway */
		memcpy(o->audit + len, parts[i], n);
		len += n;
	}
	o->audit[len] = '\0';
}

/* "--mode audit: GPU memory inferred, not declared: <source>" (the outcome's demand words). */
static void add_mode_audit_inferred(struct outcome *o)
{
	char text[sizeof(o->demand) + 48];
	snprintf(text, sizeof(text), "GPU memory inferred, not declared: %s", o->demand);
	add_mode_audit(o, text);
}

/* Copy the verdict's audit entries into the outcome (before the policies are unlocked). */
static void keep_audit(struct outcome *o, const struct policyset_result *ps)
{
	size_t len = 0;

	o->audit[0] = '\0';
	o->n_audit = 0;
	for (size_t i = 0; i < ps->n_audit; i++) {
		int n = snprintf(o->audit + len, sizeof(o->audit) - len,
		                 "%sGPUMemoryPolicy \"%s\" (audit): %s", i ? " | " : "",
		                 ps->audit[i].policy, ps->audit[i].message);
		if (n > 0)
			len += (size_t)n < sizeof(o->audit) - len ? (size_t)n
			                                          : sizeof(o->audit) - len - 1;
		o->audit_reasons[o->n_audit++] = ps->audit[i].reason;
	}
}

/* Decide with the core over the node's snapshot (core_decide(): the flags, the node's
 * annotation and the GPUMemoryPolicy objects selecting the node) and put its verdict into o.
 * Returns 1 when allowed with a reservation to record (res->reserve_bytes, and
 * res->reserve_claim: the DRA claim it joined unreserved, recorded with it, issue 21), 0
 * otherwise. */
static int decide_core(struct webhook *w, const struct placement *p,
                       const struct placement_node *pn, uint64_t now, struct outcome *o,
                       struct placement_result *out)
{
	static const struct pod_attrs no_attrs = {NULL, NULL, NULL};
	const struct pod_attrs *a = p->attrs ? p->attrs : &no_attrs;
	const struct gpupolicy *sel[GPUPOLICY_SELECT_MAX];
	struct core_verdict *v = malloc(sizeof(*v));
	const struct policyset_result *ps = v != NULL ? &v->ps : NULL;
	struct placement_pod pod = {
	    .name = p->pod_name,
	    .key = p->key,
	    .uid = p->uid,
	    .demand = p->demand,
	    .dry_run = p->dry_run,
	    .dra = p->dra ? &p->dra->pod : NULL,
	};
	size_t n = 0;
	int rc, reserve = 0;

	memset(out, 0, sizeof(*out));
	o->n_audit = 0;
	o->audit[0] = '\0';
	o->policy[0] = '\0';
	if (v == NULL) {
		deny(o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
		     p->pod_name);
		return 0;
	}
	if (w->policies != NULL && !policies_rdlock_synced(w->policies)) {
		policies_unlock(w->policies);
		free(v);
		deny(o, METRICS_ERROR, 500, "PoliciesNotRead",
		     "cannot check %s: gpu-memory-guard has not read the GPUMemoryPolicy objects "
		     "yet; "
		     "denied to keep GPU memory safe, retry later",
		     p->pod_name);
		return 0;
	}
	/* Not listed: refuse every GPU placement. Stale (a watch broken past the bound): only
	 * those the DRA store bears on, a node with DRA GPUs or a pod naming claims (a node
	 * without them gains none while its driver publishes no slice). */
	int dra_fresh = w->dra_fresh != NULL ? w->dra_fresh(w->cache_ctx, webhook_now()) : 1;
	if (dra_fresh < 0 ||
	    (dra_fresh == 0 && p->dra != NULL &&
	     (p->dra->pod.any || p->dra->node.gpus.n > 0 || p->dra->node.n_claims > 0))) {
		if (w->policies != NULL)
			policies_unlock(w->policies);
		free(v);
		deny(o, METRICS_ERROR, 500, "DRANotRead",
		     "cannot check %s: gpu-memory-guard has not read the cluster's DRA "
		     "ResourceSlices and ResourceClaims (not listed yet, or their watch broken "
		     "longer than --cache-max-staleness); denied to keep GPU memory safe, retry "
		     "later",
		     p->pod_name);
		return 0;
	}
	if (w->policies != NULL)
		n = policies_selecting(w->policies, p->node_labels, sel, GPUPOLICY_SELECT_MAX);
	struct core_input in = {
	    .node = pn,
	    .pod = &pod,
	    .pod_namespace = a->ns,
	    .pod_priority_class = a->priority_class,
	    .pod_labels = a->labels,
	    .policies = sel,
	    .n_policies = n,
	    /* audit as warn here, so that an over-threshold placement it admits is reserved */
	    .flags = {w->threshold, w->warn_threshold,
	              w->mode_warn || w->mode_audit ? POLICY_WARN : POLICY_ENFORCE},
	    .infer = w->dcfg.infer,
	    .now_ms = now,
	};
	rc = core_decide(&in, v);
	*out = ps->main;
	snprintf(o->demand, sizeof(o->demand), "%s", ps->main.source);
	if (rc != 0) {
		deny(o, METRICS_DENIED, 403, "InvalidCapacity", "node %s: %s", p->node,
		     ps->main.decision.message);
	} else if (!ps->allowed) {
		deny(o, METRICS_DENIED, 403, ps->reason, "%s", ps->message);
		if (ps->policy != NULL)
			snprintf(o->policy, sizeof(o->policy), "%s", ps->policy);
	} else {
		/* Over the flags' threshold, allowed only by --mode warn or audit. */
		int by_mode = ps->main.decision.verdict == POLICY_WARN_ONLY;
		allow(o, ps->reason, 0);
		for (size_t i = 0; i < ps->n_warnings; i++)
			if (!(by_mode && w->mode_audit &&
			      strcmp(ps->warnings[i], ps->main.decision.message) == 0))
				add_warning(o, ps->warnings[i]);
		if (ps->main.warning[0] != '\0') /* two of the pod's sources disagree */
			add_warning(o, ps->main.warning);
		if (o->n_warnings > 0)
			o->mdec = METRICS_WARNED;
		keep_audit(o, ps);
		/* --mode audit reports the pods whose demand was inferred (not GPU_MEMORY_LIMIT):
		 * what a later --undeclared refuse, or a policy's spec.undeclared, would refuse. */
		if (w->mode_audit && p->demand->source > DEMAND_SRC_DECLARED && o->demand[0])
			add_mode_audit_inferred(o);
		if (by_mode) {
			o->by_mode = w->mode_audit ? "audit" : "warn";
			if (w->mode_audit)
				add_mode_audit(o, ps->main.decision.message);
		}
		reserve = ps->reserve;
	}
	if (w->policies != NULL)
		policies_unlock(w->policies);
	out->reserve = reserve;
	free(v);
	return reserve;
}

/* Admitted, but its reservation cannot be recorded: deny (fail safe). */
static void deny_unreserved(struct outcome *o, const struct placement *p, const char *why)
{
	o->n_warnings = 0;
	deny(o, METRICS_ERROR, 500, "LedgerFull",
	     "cannot admit %s on %s: too many placements in flight (%s); denied to keep GPU memory "
	     "safe, retry later",
	     p->pod_name, p->node, why);
}

/* Decide with the placement core over the node's snapshot, whose reservations are rv's
 * (reservations.h, begun by the caller); when allowed with a reservation, put it and commit. */
static void commit_decision(struct webhook *w, struct resv *rv, const struct placement *p,
                            const struct placement_node *pn, uint64_t now, struct outcome *o)
{
	struct placement_result res;

	if (!decide_core(w, p, pn, now, o, &res))
		return;
	int rc = resv_put(rv, p->key, p->uid, res.reserve_claim, res.reserve_bytes,
	                  p->pod_create ? w->unseen_ttl_ms : 0);
	if (rc == 0)
		rc = resv_commit(rv, NULL, 0);
	/* RESV_CONFLICT cannot happen: the node stays locked from begin to commit. */
	if (rc != RESV_COMMITTED)
		deny_unreserved(o, p,
		                rc == RESV_EFULL      ? "ledger full"
		                : rc == RESV_CONFLICT ? "the node's reservations changed meanwhile"
		                                      : "no memory");
}

/*
 * --reservations shared: one placement decided over the node's visible pods plus its shared
 * record (shared.h), inside shared_place(). Each call decides anew from the outcome as it was
 * before the first (a conflict means another replica changed the record).
 */
struct shared_decision {
	struct webhook *w;
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
static uint64_t decision_now(const struct webhook *w, int cache_path)
{
	uint64_t now = ledger_now_ms();
	if (cache_path && w->cache_progress_ms != NULL) {
		uint64_t seen = w->cache_progress_ms(w->cache_ctx);
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
	struct webhook *w = d->w;
	const struct placement *p = d->p;
	struct placement_result res;
	struct resv rv = {0};
	const struct placement_item *items;
	size_t n_items;
	int cached = d->api_node == NULL;

	d->verdict = SHARED_NO_WRITE;
	if (resv_begin_record(&rv, w->shared, p->node, d->rec, d->fresh,
	                      cached ? visible->pods : NULL, cached ? visible->n_pods : 0,
	                      now) != 0 ||
	    resv_items(&rv, &items, &n_items) != 0) {
		deny(d->o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
		     p->pod_name);
		goto out;
	}
	struct placement_node pn = *visible;
	pn.reserved = items;
	pn.n_reserved = n_items;
	int reserve = decide_core(w, p, &pn, now, d->o, &res);
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
	                  p->pod_create ? w->unseen_ttl_ms : 0);
	metrics_unseen_dropped(w->metrics, resv_unseen_dropped(&rv));
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
	/* The node's capacity with its DRA GPUs (capacity_add_dra) */
	if (v->capacity_rc == 0)
		*cap = *v->cap;
	else
		memset(cap, 0, sizeof(*cap));
	snprintf(err, sizeof(err), "%s", v->capacity_error);
	if (dra_view_capacity(p->dra, cap, v->capacity_rc, p->node, err, sizeof(err)) != 0) {
		deny(o, METRICS_DENIED, 403, "UnknownCapacity", "cannot place %s on %s: %s",
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
	double t = webhook_now();

	*d->o = d->start;
	d->rec = rec;
	d->fresh = fresh;
	d->verdict = SHARED_NO_WRITE;
	if (d->api_node != NULL) {
		decide_on_record(d, d->api_node, decision_now(d->w, 0));
	} else {
		uint64_t now = decision_now(d->w, 1);
		struct view_node vn;

		if (view_from_cache(d->w->cache, d->p->node, &vn) != 0) {
			d->decided = 1;
			deny(d->o, METRICS_ERROR, 500, "InternalError",
			     "cannot check %s: out of memory", d->p->pod_name);
		} else {
			shared_cached_view(d, &vn, now);
			view_node_clear(&vn);
		}
	}
	d->deciding_s += webhook_now() - t;
	return d->verdict;
}

/*
 * Place p on its node through the shared record, the node locked in this process (ln). With
 * api_node NULL the node comes from the cache: returns 0 when the cache does not know the
 * node (nothing decided), 1 when decided (o set).
 */
static int place_shared(struct webhook *w, const struct placement *p,
                        const struct placement_node *api_node, struct outcome *o)
{
	char err[ERR_MAX];
	unsigned attempts = 0;
	struct shared_decision d = {
	    w, p, o, *o, api_node, NULL, 0, api_node != NULL, SHARED_NO_WRITE, 0};
	double deadline = o->t0 + (double)(w->budget_ms ? w->budget_ms : 2000) / 1000.0;
	double t = webhook_now();

	int rc = shared_place(w->shared, p->node, deadline, decide_shared, &d, &attempts, err,
	                      sizeof(err));
	/* Reads and writes of the record are waiting for the API server, not our own time. */
	o->waited += webhook_now() - t - d.deciding_s;
	if (!d.decided)
		return 0;
	if (rc != 0) {
		o->n_warnings = 0;
		if (rc == SHARED_ECORRUPT)
			deny(o, METRICS_ERROR, 500, "ReservationRecordUnreadable",
			     "cannot admit %s on %s: %s", p->pod_name, p->node, err);
		else
			deny(o, METRICS_ERROR, 500, "APIServerUnavailable",
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
	struct stale s[WEBHOOK_MAX_STALE_CHECKS]; /* oldest first */
	size_t n;
	uint64_t before;      /* reserved at or before this: past the grace period */
	const char *self_key; /* the pod being placed: not stale, it is being placed again */
	const struct view_node *shown; /* the cache off: the listed pods, whose reservations
	                                  settle instead (ledger_settle's rule); NULL: none */
};

/* Whether the view lists the pod key (uid: "" when unknown) by ledger_settle's rule: the same
 * key and, when both uids are known, the same uid. */
static int view_lists(const struct view_node *v, const char *key, const char *uid)
{
	for (size_t i = 0; i < v->n_listed; i++) {
		const char *lu = v->listed_uids[i];
		if (strcmp(v->listed_keys[i], key) == 0 &&
		    (uid[0] == '\0' || lu == NULL || lu[0] == '\0' || strcmp(lu, uid) == 0))
			return 1;
	}
	return 0;
}

/* Keep the WEBHOOK_MAX_STALE_CHECKS oldest reservations past the grace period. Keys of pods
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
	if (i == WEBHOOK_MAX_STALE_CHECKS) {
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

/* Why a reserved pod the list does not show no longer needs its reservation, or NULL to keep
 * it (unbound: its binding has not landed, or failed and will be retried). */
static const char *pod_gone(const cJSON *pod, const char *node)
{
	const char *bound = json_str(pod, "spec", "nodeName", NULL);
	int unbound = bound == NULL || bound[0] == '\0';

	if (!unbound && strcmp(bound, node) != 0)
		return "bound to another node";
	if (pod_finished(pod))
		return "finished";
	if (unbound && json_str(pod, "metadata", "deletionTimestamp", NULL) != NULL)
		return "deleted before binding";
	return NULL;
}

/* With the node locked: the reservations to look up (webhook.h, "Deleted pods") into *sc.
 * Returns how many. */
static size_t scan_stale(struct webhook *w, struct ledger_node *ln, const struct placement *p,
                         const struct view_node *v, uint64_t now, struct stale_scan *sc)
{
	memset(sc, 0, sizeof(*sc));
	if (now < w->grace_ms)
		return 0;
	sc->before = now - w->grace_ms;
	sc->self_key = p->key;
	/* With the cache off the listed pods' reservations settle (check_node); with it on
	 * they settle only when the cache shows them, and a lookup may drop them before. */
	sc->shown = w->cache == NULL ? v : NULL;
	ledger_visit(ln, now, collect_stale, sc);
	sc->shown = NULL;
	return sc->n;
}

/* Look up the pods of the stale reservations, no lock held: up to WEBHOOK_MAX_STALE_CHECKS
 * GETs, oldest first, while the review's budget lasts. Never denies: a reservation that cannot
 * be checked stays counted (fail safe). */
static void look_up_stale(struct webhook *w, const struct placement *p, struct stale_scan *sc,
                          struct outcome *o)
{
	for (size_t i = 0; i < sc->n; i++) {
		char ns[KEY_MAX], err[ERR_MAX];
		const char *key = sc->s[i].key, *slash = strchr(key, '/');
		cJSON *pod = NULL;
		long code = 0;

		if (w->budget_ms && (webhook_now() - o->t0) * 1000.0 >= (double)w->budget_ms)
			break; /* no time left: counting them is the safe side */
		if (slash == NULL)
			continue;
		memcpy(ns, key, (size_t)(slash - key));
		ns[slash - key] = '\0';
		double t = webhook_now();
		int rc = w->src.get_pod(w->src.ctx, ns, slash + 1, &pod, &code, err, sizeof(err));
		o->waited += webhook_now() - t;
		if (rc == KUBE_ENOTFOUND)
			sc->s[i].why = "deleted";
		else if (rc == 0 && cJSON_IsObject(pod))
			sc->s[i].why = pod_gone(pod, p->node);
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
		ledger_remove(ln, sc->s[i].key);
		log_fields(LOG_INFO, "reservation dropped",
		           (struct log_field[]){LOG_STR("node", p->node),
		                                LOG_STR("pod", sc->s[i].key),
		                                LOG_STR("reason", sc->s[i].why), LOG_END});
	}
}

/* LIST the pods on p's node, no lock held, into its live view v (view.h: view_from_lists over
 * node_obj and the list). 0, or -1 when denied (o set: fail closed). */
static int live_view(struct webhook *w, const struct placement *p, const cJSON *node_obj,
                     struct view_node *v, struct outcome *o)
{
	const struct view_live_config cfg = {&w->dcfg, w->policies != NULL};
	cJSON *items = NULL;
	long code = 0;
	char err[ERR_MAX], call[ADMISSION_NAME_MAX + 32];

	snprintf(call, sizeof(call), "LIST pods on node %s", p->node);
	/* After the node's first lock: waiting behind other placements on it counts too. */
	if (over_budget(w, o, p->pod_name, call))
		return -1;
	double t = webhook_now();
	int rc = w->src.list_pods_on_node(w->src.ctx, p->node, &items, &code, err, sizeof(err));
	o->waited += webhook_now() - t;
	if (rc != 0 || !cJSON_IsArray(items)) {
		fail_closed(o, p->pod_name, call, rc ? rc : KUBE_EPARSE,
		            rc ? err : "not a list of pods");
		cJSON_Delete(items);
		return -1;
	}
	rc = view_from_lists(p->node, node_obj, items, &cfg, v);
	cJSON_Delete(items);
	if (rc != 0) {
		deny(o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
		     p->pod_name);
		return -1;
	}
	return 0;
}

static void relock(struct ledger_node *ln, struct outcome *o)
{
	double t = webhook_now();
	ledger_relock(ln);
	o->waited += webhook_now() - t;
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
static void check_node(struct webhook *w, struct placement *p, const cJSON *node_obj,
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

	if (w->shared != NULL) {
		/* Shared reservations serialize (and batch) placements per node themselves. */
		if (live_view(w, p, node_obj, &v, o) == 0) {
			q.node_labels = v.labels;
			view_placement_node(&v, p->cap, NULL, 0, p->dra ? &p->dra->node : NULL,
			                    &pn);
			place_shared(w, &q, &pn, o);
		}
		view_node_clear(&v);
		return;
	}
	double t = webhook_now();
	struct ledger_node *ln = ledger_lock(w->ledger, p->node);
	o->waited += webhook_now() - t;
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
		now = decision_now(w, 0); /* before the LIST: the view is at least as new */
		if (live_view(w, p, node_obj, &v, o) != 0)
			goto out;
		relock(ln, o);
		locked = 1;
		if (ledger_generation(ln) == gen && !looked) {
			looked = 1;
			if (scan_stale(w, ln, p, &v, now, &sc) > 0) {
				ledger_release(ln);
				locked = 0;
				look_up_stale(w, p, &sc, o);
				relock(ln, o);
				locked = 1;
			}
		}
		if (ledger_generation(ln) == gen)
			break;
		if (attempt == VIEW_ATTEMPTS) {
			deny(o, METRICS_ERROR, 500, "NodeBusy",
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
	if (resv_begin_ledger(&rv, ln, gen, w->cache == NULL ? &listed : NULL, now) != 0 ||
	    resv_items(&rv, &items, &n_items) != 0) {
		deny(o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
		     p->pod_name);
		goto out;
	}
	q.node_labels = v.labels;
	view_placement_node(&v, p->cap, items, n_items, p->dra ? &p->dra->node : NULL, &pn);
	commit_decision(w, &rv, &q, &pn, now, o);
out:
	if (locked)
		ledger_unlock(ln);
	else
		ledger_end(ln);
	view_node_clear(&v);
	resv_end(&rv);
}

/*
 * The ledger key of the pod being placed: "ns/name". A pod known only by generateName gets a
 * key no listed pod can match ("ns/prefix?uid"): its reservation then lives until the TTL
 * (ledger.h). The API server never sends such a review: it generates the name and the uid
 * before it calls validating webhooks, and passes the generated name as request.name
 * (k8s.io/apiserver v0.37: registry/generic/registry/store.go create() fills them before
 * createValidation; registry/rest/create.go AdmissionToValidateObjectFunc, "in case the
 * generated name is populated"); only mutating webhooks see a pod without its name. Another
 * caller's review might. A create retried for a generated name that was taken is reviewed
 * again under a new name and uid; the first review's reservation is a CREATE never seen
 * (--unseen-reservation-ttl). 0, or -1 when it does not fit (Kubernetes caps namespace + name
 * at 63 + 253, below LEDGER_KEY_MAX).
 */
static int ledger_key(const struct admission_request *req, char *key, size_t cap)
{
	int n;
	if (req->name_is_generated) {
		n = snprintf(key, cap, "%s/%s?%s", req->namespace_, req->name, req->uid);
		if (n < 0 || (size_t)n >= cap) /* a long prefix: the uid alone is unique */
			n = snprintf(key, cap, "%s/?%s", req->namespace_, req->uid);
	} else
		n = snprintf(key, cap, "%s/%s", req->namespace_, req->name);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/*
 * The part of a placement of pod on node decided from the pod alone. Returns 1 when decided
 * (mirror pod, invalid declaration, not a GPU pod), 0 when the node must be checked: *d then
 * holds the pod's demand.
 */
static int placement_precheck(struct webhook *w, const cJSON *pod, const char *pod_name,
                              const char *node, struct demand *d, struct dra_pod_refs *refs,
                              struct outcome *o)
{
	char err[DRA_MSG_MAX];

	snprintf(o->node, sizeof(o->node), "%s", node);
	memset(refs, 0, sizeof(*refs));
	if (pod_is_mirror(pod)) {
		allow(o, "MirrorPod", 0);
		return 1;
	}
	if (demand_from_pod(pod, &w->dcfg, d) != 0 || d->status == DEMAND_INVALID) {
		deny(o, METRICS_DENIED, 403, "InvalidDeclaration", "pod %s: %s", pod_name,
		     d->error);
		return 1;
	}
	if (w->dra != NULL && dra_pod_refs(pod, refs, err, sizeof(err)) != 0) {
		deny(o, METRICS_DENIED, 403, "InvalidDeclaration", "pod %s: %s", pod_name, err);
		return 1;
	}
	if (d->status == DEMAND_NOT_GPU && refs->any) {
		/* GPUs by DRA claims only: decided on the node (dra_not_gpu() if none is a GPU) */
		placement_dra_demand(d);
		return 0;
	}
	if (d->status == DEMAND_NOT_GPU) {
		allow(o, "NotGPU", 0);
		add_warning(o, d->warning);
		return 1;
	}
	return 0;
}

/* The DRA view of node for pod uid of namespace ns (refs: the claims it names, or NULL), into
 * *out (NULL without a DRA store). 0, or -1 when out of memory (o denied). */
static int dra_view_for(struct webhook *w, const char *node, const char *ns, const char *uid,
                        const struct dra_pod_refs *refs, const char *pod_name, struct outcome *o,
                        struct dra_view **out)
{
	*out = NULL;
	if (w->dra == NULL)
		return 0;
	if (dra_store_view(w->dra, node, ns, uid, refs, out) != 0) {
		deny(o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
		     pod_name);
		return -1;
	}
	return 0;
}

/* A pod that asks no GPU resource (placement_dra_demand: no GPU units) and none of whose claims
 * holds or can get a GPU on the node: not a GPU placement (a NIC's claim). 1 when so (o
 * allowed). */
static int dra_not_gpu(const struct demand *d, const struct dra_view *v, struct outcome *o)
{
	if (d->gpus != 0 ||
	    (v != NULL && (v->pod.n_here > 0 || v->pod.extended ||
	                   (v->node.gpus.n > 0 && v->pod.n_pending + v->pod.n_unknown > 0))))
		return 0;
	allow(o, "NotGPU", 0);
	return 1;
}

/* A GPU placement (demand d) on node: the heart of the webhook. */
static void check_placement(struct webhook *w, const struct admission_request *req,
                            const char *pod_name, const char *node, const struct demand *d,
                            const char *uid, const struct pod_attrs *a,
                            const struct dra_pod_refs *refs, struct outcome *o)
{
	struct capacity cap;
	struct dra_view *dv = NULL;
	cJSON *node_obj = NULL;
	long code = 0;
	char err[ERR_MAX], key[KEY_MAX], call[ADMISSION_NAME_MAX + 32];

	o->source = "api";
	snprintf(call, sizeof(call), "GET node %s", node);
	if (over_budget(w, o, pod_name, call))
		return;
	double t = webhook_now();
	int rc = w->src.get_node(w->src.ctx, node, &node_obj, &code, err, sizeof(err));
	o->waited += webhook_now() - t;
	if (rc != 0 || !cJSON_IsObject(node_obj)) {
		fail_closed(o, pod_name, call, rc ? rc : KUBE_EPARSE, rc ? err : "not a Node");
		goto out;
	}
	if (dra_view_for(w, node, req->namespace_, uid, refs, pod_name, o, &dv) != 0 ||
	    dra_not_gpu(d, dv, o))
		goto out;
	rc = capacity_from_node(node_obj, &w->dcfg, &cap, err, sizeof(err));
	if (dra_view_capacity(dv, &cap, rc, node, err, sizeof(err)) != 0) {
		deny(o, METRICS_DENIED, 403, "UnknownCapacity", "cannot place %s on %s: %s",
		     pod_name, node, err);
		goto out;
	}
	if (ledger_key(req, key, sizeof(key)) != 0) {
		deny(o, METRICS_DENIED, 403, "NameTooLong", "cannot place %s: name too long",
		     pod_name);
		goto out;
	}
	struct placement p = {
	    .pod_name = pod_name,
	    .attrs = a,
	    .key = key,
	    .uid = uid,
	    .node = node,
	    .demand = d,
	    .cap = &cap,
	    .dry_run = req->dry_run,
	    .dra = dv,
	    .pod_create = req->target == ADMISSION_POD,
	};
	check_node(w, &p, node_obj, o);
	add_warning(o, d->warning);
out:
	dra_view_free(dv);
	cJSON_Delete(node_obj);
}

/* The watch cache alone may decide now: fresh, and its watches healthy (webhook.h). */
static int cache_connected(const struct webhook *w)
{
	double now = webhook_now();
	return w->cache != NULL && (w->cache_fresh == NULL || w->cache_fresh(w->cache_ctx, now)) &&
	       (w->cache_connected == NULL || w->cache_connected(w->cache_ctx, now));
}

/* The watch cache may decide now (webhook_config.cache), at least as the fallback. */
static int cache_usable(const struct webhook *w)
{
	return w->cache != NULL &&
	       (w->cache_fresh == NULL || w->cache_fresh(w->cache_ctx, webhook_now()));
}

/* One placement decided over the node's view copied out of the cache (view.h). */
struct cached {
	struct webhook *w;
	const struct placement *p;
	struct ledger_node *ln;
	struct outcome *o;
	int decided;  /* 0: the cache does not know the node: take the API path */
	uint64_t now; /* decision_now(), read before the view was copied */
	uint64_t gen; /* the node's ledger_generation, read before the view was copied */
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
		if (pod_same_strict(k->dv->keys[i], k->dv->uids[i], key, uid) &&
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
	/* The node was locked before its view was copied: no conflict at begin. */
	if (resv_begin_ledger(&rv, c->ln, c->gen, &seen, now) != 0 ||
	    resv_items(&rv, &items, &n_items) != 0)
		goto nomem;
	struct placement_node pn;
	view_placement_node(v, &cap, items, n_items, dv ? &dv->node : NULL, &pn);
	struct placement q = *c->p;
	q.node_labels = v->labels;
	commit_decision(c->w, &rv, &q, &pn, now, c->o);
	goto out;
nomem:
	deny(c->o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
	     c->p->pod_name);
out:
	resv_end(&rv);
	free(keys);
}

/*
 * A GPU placement (demand d) on node decided from the watch cache, with no API call. Returns 1
 * when decided (o set), 0 when the cache cannot decide it (off, not fresh, node unknown): the
 * caller takes the API path.
 */
static int place_cached(struct webhook *w, const struct admission_request *req,
                        const char *pod_name, const char *node, const struct demand *d,
                        const char *uid, const struct pod_attrs *a, const struct dra_pod_refs *refs,
                        int may_block, struct outcome *o)
{
	char key[KEY_MAX];
	int busy = 0, decided;
	struct ledger_node *ln;
	struct dra_view *dv = NULL;

	if (!(o->api_failed ? cache_usable(w) : cache_connected(w)))
		return 0;
	/* Shared reservations are written to the API server: never on a server thread. */
	if (w->shared != NULL && !may_block)
		return 0;
	if (ledger_key(req, key, sizeof(key)) != 0) {
		deny(o, METRICS_DENIED, 403, "NameTooLong", "cannot place %s: name too long",
		     pod_name);
		return 1;
	}
	struct placement p = {
	    .pod_name = pod_name,
	    .attrs = a,
	    .key = key,
	    .uid = uid,
	    .node = node,
	    .demand = d,
	    .dry_run = req->dry_run,
	    .pod_create = req->target == ADMISSION_POD,
	};
	if (dra_view_for(w, node, req->namespace_, uid, refs, pod_name, o, &dv) != 0 ||
	    dra_not_gpu(d, dv, o)) {
		dra_view_free(dv);
		return 1;
	}
	p.dra = dv;
	if (w->shared != NULL) {
		/* No node lock here: shared_place batches this process's placements on a node
		 * into one record write (group commit). */
		decided = place_shared(w, &p, NULL, o);
		if (decided)
			add_warning(o, d->warning);
		dra_view_free(dv);
		return decided;
	}
	double t = webhook_now();
	if (may_block) {
		ln = ledger_lock(w->ledger, node);
	} else {
		/* On a server thread: never wait for a node another placement holds (while it
		 * decides; no lock is held across an API call); a worker will decide it instead. */
		ln = ledger_trylock(w->ledger, node, &busy);
		if (busy) {
			dra_view_free(dv);
			return 0;
		}
	}
	o->waited += webhook_now() - t;
	if (ln == NULL) {
		dra_view_free(dv);
		deny_untracked(o, pod_name, node);
		return 1;
	}
	struct cached c = {w, &p, ln, o, 0, decision_now(w, 1), ledger_generation(ln)};
	struct view_node vn;
	if (view_from_cache(w->cache, node, &vn) != 0) {
		c.decided = 1;
		deny(o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
		     pod_name);
	} else {
		decide_cached(&c, &vn);
		view_node_clear(&vn);
	}
	ledger_unlock(ln);
	if (c.decided)
		add_warning(o, d->warning);
	dra_view_free(dv);
	return c.decided;
}

/* A Binding whose pod the cache knows, decided without asking the API server. 1 when decided,
 * 0 to take the API path (GET pod). */
static int binding_cached(struct webhook *w, const struct admission_request *req,
                          const char *pod_name, int may_block, struct outcome *o)
{
	struct cache_pod cp;
	const char *uid = json_str(req->object, "metadata", "uid", NULL);

	if (!(o->api_failed ? cache_usable(w) : cache_connected(w)) ||
	    cache_get_pod(w->cache, req->namespace_, req->name, &cp) != 0)
		return 0;
	/* Only the very pod the Binding names (kube-scheduler sets the Binding's uid to the
	 * pod's): an older pod of the same name, or a finished one, is not it; nor can a Binding
	 * without a uid be matched. The API path GETs the pod as it is. */
	if (uid == NULL || strcmp(uid, cp.uid) != 0 || cp.finished)
		return 0;
	snprintf(o->node, sizeof(o->node), "%s", req->binding_node);
	o->source = "cache";
	if (cp.node[0] != '\0') {
		allow(o, "AlreadyBound", 0); /* binding_refused_by_storage() */
		return 1;
	}
	if (cp.mirror) {
		allow(o, "MirrorPod", 0);
		return 1;
	}
	if (cp.demand.status == DEMAND_INVALID) {
		deny(o, METRICS_DENIED, 403, "InvalidDeclaration", "pod %s: %s", pod_name,
		     cp.demand.error);
		return 1;
	}
	/* The claims the cached pod names (cache_get_pod_claims), with those the DRA store holds
	 * owned by or reserved for it: a directly named claim the watch has not shown reserved
	 * for it yet still counts. */
	struct dra_pod_refs *refs = w->dra != NULL ? malloc(sizeof(*refs)) : NULL; /* 8 KiB */
	if (w->dra != NULL &&
	    (refs == NULL ||
	     cache_get_pod_claims(w->cache, req->namespace_, req->name, cp.uid, refs) != 0)) {
		free(refs);
		return 0; /* out of memory, or gone meanwhile: the API path reads the pod */
	}
	if (cp.demand.status == DEMAND_NOT_GPU) {
		/* the DRA store says whether those claims hold or can get GPUs on the node; none:
		 * not a GPU placement (dra_not_gpu()) */
		struct dra_view *dv = NULL;
		if (dra_view_for(w, req->binding_node, req->namespace_, cp.uid, refs, pod_name, o,
		                 &dv) != 0) {
			free(refs);
			return 1;
		}
		int dra = dv != NULL && dv->pod.any;
		dra_view_free(dv);
		if (!dra) {
			free(refs);
			allow(o, "NotGPU", 0);
			add_warning(o, cp.demand.warning);
			return 1;
		}
		placement_dra_demand(&cp.demand);
	}
	char pc[GPUPOLICY_NAME_MAX] = "";
	struct labelset labels = {0};
	/* tier membership, for the policies (none with --policies off) */
	int arc = w->policies == NULL ? 0
	                              : cache_get_pod_attrs(w->cache, req->namespace_, req->name,
	                                                    cp.uid, pc, sizeof(pc), &labels);
	if (arc != 0) { /* gone meanwhile, or out of memory: the API path reads the pod */
		labelset_clear(&labels);
		free(refs);
		return 0;
	}
	struct pod_attrs a = {req->namespace_, pc, labels.l.n ? &labels.l : NULL};
	int decided = place_cached(w, req, pod_name, req->binding_node, &cp.demand, cp.uid, &a,
	                           refs, may_block, o);
	labelset_clear(&labels);
	free(refs);
	return decided;
}

/* A pods/binding CREATE to a node: the pod is read from the API server, then placed. */
/* The object a GET pod returned is that Pod: kind Pod (when present) and the name asked for.
 * Anything else (a PodList, another object) would be read as a pod without GPUs: fail open. */
static int is_pod_named(const cJSON *pod, const char *ns, const char *name)
{
	const char *kind = json_str(pod, "kind", NULL);
	const char *got = json_str(pod, "metadata", "name", NULL);
	const char *got_ns = json_str(pod, "metadata", "namespace", NULL);
	if (!cJSON_IsObject(pod) || (kind != NULL && strcmp(kind, "Pod") != 0))
		return 0;
	return got != NULL && strcmp(got, name) == 0 && (got_ns == NULL || strcmp(got_ns, ns) == 0);
}

/*
 * A Binding the API server's storage refuses after admission: of a pod already bound (409
 * Conflict, "pod ... is already assigned to node ...") or being deleted ("pod ... is being
 * deleted, cannot be assigned to a host"), in pkg/registry/core/pod/storage/storage.go
 * (setPodNodeAndMetadata). Admitted without a placement check and reserving nothing: a
 * reservation would count, for its TTL, a pod that never comes to that node (a phantom that
 * refuses real placements there). 1 when decided.
 */
static int binding_refused_by_storage(const cJSON *pod, struct outcome *o)
{
	const char *bound = json_str(pod, "spec", "nodeName", NULL);

	if (bound != NULL && bound[0] != '\0') {
		allow(o, "AlreadyBound", 0);
		return 1;
	}
	if (json_at(pod, "metadata", "deletionTimestamp", NULL) != NULL) {
		allow(o, "BeingDeleted", 0);
		return 1;
	}
	return 0;
}

static void check_binding(struct webhook *w, const struct admission_request *req,
                          const char *pod_name, struct outcome *o)
{
	struct demand d;
	struct dra_pod_refs *refs = malloc(sizeof(*refs)); /* 8 KiB */
	struct labelset labels = {0};
	cJSON *pod = NULL;
	long code = 0;
	char err[ERR_MAX], call[2 * ADMISSION_NAME_MAX + 32];

	o->source = "api";
	snprintf(call, sizeof(call), "GET pod %s", pod_name);
	if (refs == NULL) {
		deny(o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
		     pod_name);
		return;
	}
	if (over_budget(w, o, pod_name, call)) {
		free(refs);
		return;
	}
	double t = webhook_now();
	int rc =
	    w->src.get_pod(w->src.ctx, req->namespace_, req->name, &pod, &code, err, sizeof(err));
	o->waited += webhook_now() - t;
	if (rc != 0 || !is_pod_named(pod, req->namespace_, req->name)) {
		fail_closed(o, pod_name, call, rc ? rc : KUBE_EPARSE,
		            rc ? err : "the answer is not the Pod asked for");
		goto out;
	}
	if (binding_refused_by_storage(pod, o))
		goto out;
	if (placement_precheck(w, pod, pod_name, req->binding_node, &d, refs, o))
		goto out;
	if (w->policies != NULL && /* tier membership; no tiers with --policies off */
	    labelset_copy(&labels, json_at(pod, "metadata", "labels", NULL)) != 0) {
		deny(o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
		     pod_name);
		goto out;
	}
	struct pod_attrs a = {req->namespace_, json_str(pod, "spec", "priorityClassName", NULL),
	                      labels.l.n ? &labels.l : NULL};
	if (!place_cached(w, req, pod_name, req->binding_node, &d,
	                  json_str(pod, "metadata", "uid", NULL), &a, refs, 1, o))
		check_placement(w, req, pod_name, req->binding_node, &d,
		                json_str(pod, "metadata", "uid", NULL), &a, refs, o);
out:
	free(refs);
	labelset_clear(&labels);
	cJSON_Delete(pod);
}

/* One review from webhook_prepare() to webhook_finish(). */
struct webhook_review_ctx {
	struct webhook *w;
	cJSON *review; /* keeps req's borrowed pointers alive */
	struct admission_request req;
	struct outcome o;
	int decided;      /* o is final: nothing to ask the API server */
	const char *node; /* pod CREATE with nodeName: the node (in review); NULL for a binding */
	struct demand d;  /* ... and the pod's demand */
	const char *uid;  /* ... and its metadata.uid (in review), or NULL */
	struct labelset labels;   /* ... and its labels */
	struct pod_attrs attrs;   /* ... its GPUMemoryPolicy tier attributes (in review, labels) */
	struct dra_pod_refs refs; /* ... and the DRA claims it names */
	double busy;              /* seconds inside prepare and finish (o.waited of them blocked) */
	char pod_name[2 * ADMISSION_NAME_MAX + 2];
};

/*
 * A placement the server handed to a worker: from the cache when its watches are healthy, else
 * through the API server; and when the API server cannot be asked while the cache's watch broke
 * only moments ago (fresh but not connected), from the cache after all (webhook.h).
 */
static void decide_placement(struct webhook_review_ctx *x)
{
	struct webhook *w = x->w;
	const struct admission_request *req = &x->req;
	struct outcome *o = &x->o;

	if (req->target == ADMISSION_BINDING) {
		if (!binding_cached(w, req, x->pod_name, 1, o))
			check_binding(w, req, x->pod_name, o);
	} else if (!place_cached(w, req, x->pod_name, x->node, &x->d, x->uid, &x->attrs, &x->refs,
	                         1, o)) {
		check_placement(w, req, x->pod_name, x->node, &x->d, x->uid, &x->attrs, &x->refs,
		                o);
	}
	if (o->allowed || o->reason == NULL || strcmp(o->reason, "APIServerUnavailable") != 0 ||
	    !cache_usable(w))
		return;
	struct outcome api = *o; /* the refusal, if the cache cannot decide either */
	o->api_failed = 1;
	o->n_warnings = 0;
	int decided = req->target == ADMISSION_BINDING
	                  ? binding_cached(w, req, x->pod_name, 1, o)
	                  : place_cached(w, req, x->pod_name, x->node, &x->d, x->uid, &x->attrs,
	                                 &x->refs, 1, o);
	if (!decided) {
		double waited = o->waited;
		*o = api;
		o->waited = waited;
	}
}

/* Decide what the request alone decides. Returns 1 when decided, 0 when a placement must be
 * checked against the API server (a binding to a node, or a GPU pod CREATE with nodeName). */
static int classify(struct webhook_review_ctx *x)
{
	struct webhook *w = x->w;
	const struct admission_request *req = &x->req;
	struct outcome *o = &x->o;

	if (req->operation != ADMISSION_OP_CREATE || req->target == ADMISSION_OTHER) {
		allow(o, "NotPlacement", 1);
		return 1;
	}
	if (is_exempt(w, req->namespace_)) {
		allow(o, "ExemptNamespace", 0);
		return 1;
	}
	if (req->target == ADMISSION_BINDING) {
		if (!req->binding_target_is_node || req->binding_node[0] == '\0') {
			allow(o, "NotNodeTarget", 0);
			return 1;
		}
		snprintf(o->node, sizeof(o->node), "%s", req->binding_node);
		return binding_cached(w, req, x->pod_name, 0, o);
	}
	if (req->object == NULL) {
		allow(o, "NoObject", 0);
		return 1;
	}
	const char *node = json_str(req->object, "spec", "nodeName", NULL);
	if (node == NULL || node[0] == '\0') {
		if (pod_is_mirror(req->object))
			allow(o, "MirrorPod", 0);
		else
			check_declarations(w, req->object, x->pod_name, o);
		return 1;
	}
	x->node = node;
	x->uid = json_str(req->object, "metadata", "uid", NULL);
	if (placement_precheck(w, req->object, x->pod_name, node, &x->d, &x->refs, o))
		return 1;
	if (w->policies != NULL && /* tier membership; no tiers with --policies off */
	    labelset_copy(&x->labels, json_at(req->object, "metadata", "labels", NULL)) != 0) {
		deny(o, METRICS_ERROR, 500, "InternalError", "cannot check %s: out of memory",
		     x->pod_name);
		return 1;
	}
	x->attrs.ns = req->namespace_;
	x->attrs.priority_class = json_str(req->object, "spec", "priorityClassName", NULL);
	x->attrs.labels = x->labels.l.n ? &x->labels.l : NULL;
	/* With a fresh watch cache the placement is decided here, on the server's thread. */
	return place_cached(w, req, x->pod_name, node, &x->d, x->uid, &x->attrs, &x->refs, 0, o);
}

static const char *kind_name(enum admission_target t)
{
	return t == ADMISSION_POD ? "pod" : t == ADMISSION_BINDING ? "binding" : "other";
}

static const char *op_name(enum admission_operation op)
{
	static const char *const names[] = {"UNKNOWN", "CREATE", "UPDATE", "DELETE", "CONNECT"};
	return (unsigned)op < 5 ? names[op] : "UNKNOWN";
}

static void log_decision(const struct admission_request *req, const struct outcome *o,
                         double latency_s, double self_s)
{
	const char *text = o->allowed ? (o->n_warnings ? o->warnings[0] : NULL) : o->message;
	struct log_field f[] = {
	    LOG_STR("uid", req->uid),
	    LOG_STR("kind", kind_name(req->target)),
	    LOG_STR("operation", op_name(req->operation)),
	    LOG_STR("namespace", req->namespace_),
	    LOG_STR("pod", req->name),
	    LOG_STR("node", o->node[0] ? o->node : NULL),
	    LOG_STR("decision", o->allowed ? "allow" : "deny"),
	    LOG_STR("reason", o->reason),
	    LOG_STR("source", o->source),
	    LOG_STR("demand", o->demand[0] ? o->demand : NULL),
	    LOG_STR("message", text),
	    LOG_STR("policy", o->policy[0] ? o->policy : NULL),
	    LOG_STR("audit", o->allowed && o->audit[0] ? o->audit : NULL),
	    LOG_STR("mode", o->by_mode),
	    LOG_BOOL("dry_run", req->dry_run),
	    LOG_DBL("latency_ms", latency_s * 1000.0),
	    LOG_DBL("self_ms", self_s * 1000.0),
	    LOG_END,
	};
	log_fields(o->quiet ? LOG_DEBUG : LOG_INFO, "review", f);
}

static int encode(const struct admission_request *req, const struct outcome *o, char **out,
                  size_t *out_len)
{
	struct admission_response resp;
	memset(&resp, 0, sizeof(resp));
	resp.uid = req->uid;
	resp.allowed = o->allowed;
	resp.code = o->code;
	resp.reason = o->status_reason;
	resp.message = o->message;
	for (size_t i = 0; i < o->n_warnings; i++)
		resp.warnings[resp.n_warnings++] = o->warnings[i];
	if (o->allowed && o->audit[0] != '\0') {
		resp.audit_keys[0] = WEBHOOK_AUDIT_KEY;
		resp.audit_values[0] = o->audit;
		resp.n_audit = 1;
	}
	*out = admission_encode(&resp, out_len);
	return *out ? 0 : WEBHOOK_ENOMEM;
}

/*
 * --mode warn or audit: admit what enforce refuses, whatever the reason (webhook.h), in this
 * one place, so that no refusal path can be missed. Warn: the refusal's text becomes the
 * warning; audit: the auditAnnotations entry. The reason stays the refusal's, for the log and
 * gpu_memory_guard_mode_admitted_total.
 */
static void apply_mode(struct webhook *w, struct outcome *o)
{
	if (o->allowed || (!w->mode_warn && !w->mode_audit))
		return;
	o->allowed = 1;
	o->code = 0;
	o->status_reason = NULL;
	o->quiet = 0;
	o->by_mode = w->mode_audit ? "audit" : "warn";
	o->n_warnings = 0;
	if (w->mode_warn) {
		add_warning(o, o->message);
		o->mdec = METRICS_WARNED;
	} else {
		add_mode_audit(o, o->message);
		o->mdec = METRICS_ALLOWED;
	}
	o->message[0] = '\0';
}

void webhook_refuse_busy(struct webhook_review_ctx *x, const char *why)
{
	if (x == NULL || x->decided)
		return;
	deny(&x->o, METRICS_ERROR, 500, "WebhookBusy",
	     "cannot check %s: the webhook is too busy (%s); denied to keep GPU memory safe, "
	     "retry later",
	     x->pod_name, why ? why : "no thread free");
	x->decided = 1;
}

void webhook_discard(struct webhook_review_ctx *x)
{
	if (x == NULL)
		return;
	labelset_clear(&x->labels);
	cJSON_Delete(x->review);
	free(x);
}

int webhook_prepare(struct webhook *w, const char *body, size_t len, double arrived,
                    struct webhook_review_ctx **ctx, char *err, size_t errlen)
{
	char derr[ADMISSION_MSG_MAX];
	double t = webhook_now();
	struct webhook_review_ctx *x = calloc(1, sizeof(*x));

	*ctx = NULL;
	if (x == NULL) {
		snprintf(err, errlen, "out of memory");
		return WEBHOOK_ENOMEM;
	}
	x->w = w;
	x->o.t0 = arrived;
	int rc = admission_decode(body, len, &x->review, &x->req, derr, sizeof(derr));
	if (rc == ADMISSION_ENOMEM) {
		snprintf(err, errlen, "out of memory");
		webhook_discard(x);
		return WEBHOOK_ENOMEM;
	}
	if (rc != 0 && x->req.uid[0] == '\0') {
		snprintf(err, errlen, "invalid AdmissionReview: %s", derr);
		log_fields(LOG_INFO, "invalid request",
		           (struct log_field[]){LOG_STR("reason", derr), LOG_END});
		webhook_discard(x);
		return WEBHOOK_EBADREQUEST;
	}
	snprintf(x->pod_name, sizeof(x->pod_name), "%s/%s", x->req.namespace_, x->req.name);
	/* With a uid to echo, answer the API server: a CREATE it cannot read is denied (it may be
	 * a placement); any other operation is never a placement and stays allowed. */
	x->decided = 1;
	if (rc == 0)
		x->decided = classify(x);
	else if (x->req.operation != ADMISSION_OP_CREATE &&
	         x->req.operation != ADMISSION_OP_UNKNOWN)
		allow(&x->o, "NotPlacement", 0);
	else
		deny(&x->o, METRICS_ERROR, 400, "InvalidReview", "invalid AdmissionReview: %s",
		     derr);
	x->busy = webhook_now() - t;
	*ctx = x;
	return 0;
}

int webhook_needs_api(const struct webhook_review_ctx *x)
{
	return x != NULL && !x->decided;
}

int webhook_finish(struct webhook_review_ctx *x, char **out, size_t *out_len, char *err,
                   size_t errlen)
{
	struct webhook *w = x->w;
	const struct admission_request *req = &x->req;
	struct outcome *o = &x->o;
	double t = webhook_now();

	*out = NULL;
	*out_len = 0;
	if (!x->decided)
		decide_placement(x);
	apply_mode(w, o);
	text_no_percent(o->message, sizeof(o->message));
	text_no_percent(o->audit, sizeof(o->audit));
	for (size_t i = 0; i < o->n_warnings; i++)
		text_no_percent(o->warnings[i], sizeof(o->warnings[i]));
	int rc = encode(req, o, out, out_len);
	double end = webhook_now();
	double dt = end - o->t0;
	/* Our own time: working on the review, not waiting for a worker, the API or a lock. */
	double self = x->busy + (end - t) - o->waited;
	if (self < 0)
		self = 0;
	log_decision(req, o, dt, self);
	for (size_t i = 0; o->allowed && i < o->n_audit; i++)
		metrics_policy_audit(w->metrics, o->audit_reasons[i]);
	if (o->by_mode)
		metrics_mode_admitted(
		    w->metrics, w->mode_audit ? METRICS_MODE_AUDIT : METRICS_MODE_WARN, o->reason);
	metrics_review(w->metrics,
	               req->target == ADMISSION_POD       ? METRICS_KIND_POD
	               : req->target == ADMISSION_BINDING ? METRICS_KIND_BINDING
	                                                  : METRICS_KIND_OTHER,
	               o->mdec, dt, self);
	webhook_discard(x);
	if (rc != 0)
		snprintf(err, errlen, "out of memory encoding the response");
	return rc;
}

int webhook_review(struct webhook *w, const char *body, size_t len, char **out, size_t *out_len,
                   char *err, size_t errlen)
{
	struct webhook_review_ctx *x = NULL;

	*out = NULL;
	*out_len = 0;
	int rc = webhook_prepare(w, body, len, webhook_now(), &x, err, errlen);
	if (rc != 0)
		return rc;
	return webhook_finish(x, out, out_len, err, errlen);
}

struct webhook *webhook_new(const struct webhook_config *cfg, const struct webhook_source *src,
                            struct ledger *ledger, struct metrics *metrics)
{
	struct webhook *w;
	if (cfg == NULL || src == NULL || ledger == NULL || src->get_pod == NULL ||
	    src->get_node == NULL || src->list_pods_on_node == NULL ||
	    cfg->n_gpu_resources > DEMAND_MAX_RESOURCES ||
	    cfg->n_exempt_namespaces > WEBHOOK_MAX_EXEMPT)
		return NULL;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return NULL;
	w->threshold = cfg->threshold;
	w->warn_threshold = cfg->warn_threshold;
	w->mode_warn = cfg->mode_warn;
	w->mode_audit = cfg->mode_audit && !cfg->mode_warn;
	w->budget_ms = cfg->budget_ms;
	w->grace_ms = cfg->grace_ms ? cfg->grace_ms : WEBHOOK_GRACE_MS_DEFAULT;
	w->unseen_ttl_ms = cfg->unseen_ttl_ms;
	w->src = *src;
	w->cache = cfg->cache;
	w->dra = cfg->dra;
	w->cache_fresh = cfg->cache_fresh;
	w->dra_fresh = cfg->dra_fresh;
	w->cache_connected = cfg->cache_connected;
	w->cache_progress_ms = cfg->cache_progress_ms;
	w->cache_ctx = cfg->cache_ctx;
	w->ledger = ledger;
	w->shared = cfg->shared;
	w->policies = cfg->policies;
	w->metrics = metrics;
	for (size_t i = 0; cfg->gpu_resources && i < cfg->n_gpu_resources; i++) {
		if ((w->gpu_resources[i] = strdup(cfg->gpu_resources[i])) == NULL)
			goto err;
		w->dcfg.n_gpu_resources++;
	}
	w->dcfg.gpu_resources =
	    w->dcfg.n_gpu_resources ? (const char *const *)w->gpu_resources : NULL;
	w->dcfg.infer = cfg->infer;
	if (cfg->engines != NULL)
		w->engines = *cfg->engines;
	else
		engine_defaults_init(&w->engines);
	w->dcfg.engines = &w->engines;
	for (size_t i = 0; i < cfg->n_exempt_namespaces; i++) {
		if ((w->exempt[i] = strdup(cfg->exempt_namespaces[i])) == NULL)
			goto err;
		w->n_exempt++;
	}
	if (!(w->threshold > 0 && w->threshold <= 1) ||
	    !(w->warn_threshold > 0 && w->warn_threshold <= 1))
		goto err;
	return w;
err:
	webhook_free(w);
	return NULL;
}

void webhook_free(struct webhook *w)
{
	if (w == NULL)
		return;
	for (size_t i = 0; i < DEMAND_MAX_RESOURCES; i++)
		free(w->gpu_resources[i]);
	for (size_t i = 0; i < w->n_exempt; i++)
		free(w->exempt[i]);
	free(w);
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

struct webhook_source webhook_source_kube(struct kube_client *c)
{
	struct webhook_source s = {c, src_get_pod, src_get_node, src_list};
	return s;
}

/* The server's view of a review: one POST route (server.h). */
static int route_prepare(void *ctx, const char *body, size_t len, double arrived, void **job,
                         char *err, size_t errlen)
{
	struct webhook_review_ctx *x = NULL;
	int rc = webhook_prepare(ctx, body, len, arrived, &x, err, errlen);
	*job = x;
	return rc == WEBHOOK_EBADREQUEST ? SERVER_EBADREQUEST : rc ? SERVER_ENOMEM : 0;
}

static int route_needs_worker(const void *job)
{
	return webhook_needs_api(job);
}

static int route_finish(void *job, char **out, size_t *out_len, char *err, size_t errlen)
{
	return webhook_finish(job, out, out_len, err, errlen) == 0 ? 0 : SERVER_ENOMEM;
}

static void route_refuse_busy(void *job, const char *why)
{
	webhook_refuse_busy(job, why);
}

static void route_discard(void *job)
{
	webhook_discard(job);
}

struct server_route webhook_route(struct webhook *w)
{
	struct server_route r = {
	    .path = SERVER_PATH_VALIDATE,
	    .body_max = ADMISSION_BODY_MAX,
	    .ctx = w,
	    .prepare = route_prepare,
	    .needs_worker = route_needs_worker,
	    .finish = route_finish,
	    .refuse_busy = route_refuse_busy,
	    .discard = route_discard,
	    .auth_route = METRICS_ROUTE_ADMISSION,
	};
	return r;
}
