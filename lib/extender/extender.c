/*
 * extender: the kube-scheduler extender adapter. See extender.h for the contract.
 */
#include "extender.h"

#include "cache.h"
#include "core.h"
#include "demand.h"
#include "dra.h"
#include "flight.h"
#include "labelset.h"
#include "jsonpath.h"
#include "ledger.h"
#include "log.h"
#include "metrics.h"
#include "monotime.h"
#include "placement.h"
#include "placer.h"
#include "reservations.h"
#include "satmath.h"
#include "text.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REASON_MAX 512 /* one node's reason, before it is copied */

struct extender {
	struct placer *placer; /* the engine (placer.h): every node judged through placer_fit */
	int cache_off;         /* placer_cache() NULL: --cache off */
	int warns_only;        /* placer_warns_only(): --mode warn or audit */
	enum extender_score score;
	unsigned pass_nodes;   /* extender_config.pass_nodes; 0: all */
	struct flight *flight; /* the pods this extender's filter passed, in flight (flight.h) */
	struct metrics *metrics;
};

/* What the pod alone decides. */
enum kind {
	K_ERROR = 0, /* the call is answered with an Error (filter) or 400 (prioritize) */
	K_PASS,      /* not ours to judge: every node passes, scores 0 */
	K_INVALID,   /* a GPU pod without a valid declaration: no node will take it */
	K_NOCACHE,   /* a GPU pod, but no fresh cache to judge it with */
	K_GPU,       /* judged node by node */
};

/* One call, from the body to the answer. */
struct job {
	struct extender *x;
	enum extender_verb verb;
	double arrived;        /* monotime_s() at arrival */
	double own;            /* seconds of our own work (not queued, not waiting for a node) */
	struct extwire_args a; /* the decoded body (extwire.h) */
	enum kind kind;
	const char *why;              /* K_PASS, K_GPU: a short reason for the log */
	char error[EXTENDER_ERR_MAX]; /* K_ERROR: the call's; K_INVALID: the declaration's */
	char pod_name[CACHE_KEY_MAX]; /* "namespace/name" */
	const char *uid;              /* the pod's metadata.uid (in args), or NULL */
	struct demand d;
	uint64_t hold_bytes;    /* the most d comes to on a node judged (shares resolved) */
	struct extwire_node *v; /* a.n: each node's verdict */
	size_t undecided;
	uint64_t now_ms; /* ledger_now_ms() when the holds were pruned */
	int refused;     /* refuse_busy: nothing more may wait */
	int await_cache; /* a filter call the cache does not show the pod of yet: finish on a
	                    worker, waiting up to EXTENDER_CACHE_WAIT_MS for it (hold_passed) */
	/* GPUMemoryPolicy tier attributes of the pod (in args, and labels) */
	const char *ns, *priority_class;
	struct labelset labels;
	struct dra_pod_refs refs; /* the DRA claims the pod names */
};

/* ---- errors ---- */

static void set_error(struct job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct job *j, const char *fmt, ...)
{
	va_list ap;
	j->kind = K_ERROR;
	va_start(ap, fmt);
	if (vsnprintf(j->error, sizeof(j->error), fmt, ap) < 0)
		j->error[0] = '\0';
	va_end(ap);
	text_no_percent(j->error, sizeof(j->error));
}

/* ---- judging ---- */

/* What the pod alone decides (extender.h; the engine's rule, placer_classify_pod):
 * pass-through, invalid, or judged node by node. */
static void classify(struct job *j)
{
	struct extender *x = j->x;
	const cJSON *pod = j->a.pod;
	const char *ns, *name;

	ns = json_str(pod, "metadata", "namespace", NULL);
	name = json_str(pod, "metadata", "name", NULL);
	j->ns = ns;
	j->priority_class = json_str(pod, "spec", "priorityClassName", NULL);
	snprintf(j->pod_name, sizeof(j->pod_name), "%.63s/%.253s", ns ? ns : "",
	         name ? name : "(unnamed)");
	j->uid = json_str(pod, "metadata", "uid", NULL);
	j->kind = K_PASS;
	if (placer_exempt(x->placer, ns)) {
		j->why = "ExemptNamespace";
		return;
	}
	switch (placer_classify_pod(x->placer, pod, &j->d, &j->refs, j->error, sizeof(j->error))) {
	case PLACER_POD_MIRROR:
		j->why = "MirrorPod";
		return;
	case PLACER_POD_INVALID:
		/* --mode warn or audit: the webhook admits it anywhere, so every node passes */
		j->kind = x->warns_only ? K_PASS : K_INVALID;
		j->why = "InvalidDeclaration";
		return;
	case PLACER_POD_NOT_GPU:
		j->why = "NotGPU";
		return;
	case PLACER_POD_GPU: /* DRA claims only: judged per node (PLACER_FIT_NO_GPU_HERE) */
		break;
	}
	j->why = "Judged";
	const char *not_ready = placer_fit_ready(x->placer);
	if (not_ready != NULL) {
		/* answered with an Error: the scheduler retries; --mode warn or audit: the webhook
		 * admits the pod's Binding anyway (webhook.h), so every node passes, unranked */
		j->kind = x->warns_only ? K_PASS : K_NOCACHE;
		j->why = strcmp(not_ready, "CacheOff") == 0 ? "CacheNotReady" : not_ready;
		return;
	}
	if (labelset_copy(&j->labels, json_at(pod, "metadata", "labels", NULL)) != 0) {
		j->kind = K_NOCACHE;
		j->why = "OutOfMemory";
		return;
	}
	j->kind = K_GPU;
	j->undecided = j->a.n;
}

static void set_verdict(struct extwire_node *v, enum extwire_state st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_verdict(struct extwire_node *v, enum extwire_state st, const char *fmt, ...)
{
	char text[REASON_MAX];
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(text, sizeof(text), fmt, ap) < 0)
		text[0] = '\0';
	va_end(ap);
	text_no_percent(text, sizeof(text));
	v->state = st;
	v->score = 0;
	free(v->reason);
	/* Out of memory: the node still fails, with no text (kube-scheduler accepts ""). */
	v->reason = strdup(text);
}

/* 1..EXTENDER_MAX_PRIORITY for a pod that fits, from how full the node is after it. */
static int fit_score(uint64_t total, uint64_t budget, enum extender_score how)
{
	double fill = budget ? (double)total / (double)budget : 1.0;

	if (fill > 1.0)
		fill = 1.0;
	if (how == EXTENDER_SPREAD)
		fill = 1.0 - fill;
	return 1 + (int)(fill * (EXTENDER_MAX_PRIORITY - 1) + 0.5);
}

/*
 * One node's verdict from the engine's answer (placer_fit: the core's verdict, decided once
 * without words), in the core's brief words (core_brief: from the verdict's figures at its
 * threshold in force, or a policy's tier or declarations rule's own message).
 */
static void judge_fit(struct job *j, struct extwire_node *v, const struct placer_fit *f)
{
	switch (f->state) {
	case PLACER_FIT_JUDGED:
		break;
	case PLACER_FIT_UNTRACKED:
		set_verdict(v, EXTWIRE_FAIL,
		            "gpu-memory-guard tracks too many nodes to read this one's "
		            "reservations");
		return;
	case PLACER_FIT_UNKNOWN_NODE:
		set_verdict(v, EXTWIRE_UNRESOLVABLE,
		            "node unknown to gpu-memory-guard's watch cache");
		return;
	case PLACER_FIT_NO_GPU_HERE:
		v->state = EXTWIRE_PASS; /* no GPU of the pod here: nothing to judge */
		v->score = 0;
		return;
	case PLACER_FIT_NO_CAPACITY:
	case PLACER_FIT_INVALID:
		set_verdict(v, EXTWIRE_UNRESOLVABLE, "%s", f->error);
		return;
	case PLACER_FIT_POLICIES_NOT_READ: /* a relist failed since classify() */
		set_verdict(v, EXTWIRE_FAIL,
		            "gpu-memory-guard has not read the GPUMemoryPolicy objects");
		return;
	default: /* BUSY and ENOMEM are the caller's */
		set_verdict(v, EXTWIRE_FAIL, "out of memory");
		return;
	}
	const struct core_verdict *cv = f->verdict;
	const struct placement_result *res = &cv->ps.main;
	/* held beside its demand: the whole DRA devices its claims take (counted as bytes in
	 * flight: the safe side) */
	uint64_t in_flight = sat_add(res->demand_bytes, res->dra_whole_bytes);
	if (in_flight > j->hold_bytes)
		j->hold_bytes = in_flight;
	char why[CORE_BRIEF_MAX];
	switch (core_brief(cv, f->n_in_flight, f->in_flight_bytes, why, sizeof(why))) {
	case CORE_BRIEF_FITS:
		v->state = EXTWIRE_PASS;
		v->score =
		    fit_score(res->decision.total_bytes, res->decision.budget_bytes, j->x->score);
		return;
	case CORE_BRIEF_WARN_ONLY: /* warn mode: the webhook allows it; it just does not fit */
		v->state = EXTWIRE_PASS;
		v->score = 0;
		return;
	case CORE_BRIEF_REFUSED:
		set_verdict(v, EXTWIRE_FAIL, "%s", why);
		return;
	case CORE_BRIEF_NEVER:
		set_verdict(v, EXTWIRE_UNRESOLVABLE, "%s", why);
		return;
	}
}

/* ---- pods in flight (flight.h) ---- */

/* After a filter call for a GPU pod: the nodes it passed hold the pod until its Binding shows,
 * if the watch cache vouches for it (flight_hold: the bytes held are the cached pod's). A pod
 * passed nowhere, or without a uid, holds nothing (a uid-less pod cannot be told from the pod
 * being judged). Out of memory or a full table: the hold is lost, logged; the webhook still
 * refuses a Binding that would not fit. */
static void hold_passed(struct job *j)
{
	const char **pass;
	size_t n = 0;
	int rc = FLIGHT_ENOMEM;

	if (j->uid == NULL || j->uid[0] == '\0')
		return;
	if ((pass = malloc((j->a.n ? j->a.n : 1) * sizeof(*pass))) != NULL) {
		struct flight_pod fp = {j->pod_name, j->uid, &j->d, j->refs.any, j->hold_bytes};

		for (size_t i = 0; i < j->a.n; i++)
			if (j->v[i].state == EXTWIRE_PASS)
				pass[n++] = j->a.names[i];
		rc = flight_hold(j->x->flight, &fp, pass, n, j->now_ms,
		                 j->await_cache ? EXTENDER_CACHE_WAIT_MS : 0);
		free(pass);
	}
	if (rc == 0 || rc == FLIGHT_EREFUSED)
		return;
	struct log_field f[] = {
	    LOG_STR("pod", j->pod_name),
	    LOG_STR("error", rc == FLIGHT_EFULL ? "too many pods in flight" : "out of memory"),
	    LOG_END,
	};
	log_fields(LOG_WARN, "extender hold lost", f);
}

void extender_forget(struct extender *x, const char *uid)
{
	if (x != NULL)
		flight_forget(x->flight, uid);
}

void extender_binding_admitted(struct extender *x, const char *uid)
{
	if (x != NULL)
		flight_drop(x->flight, uid);
}

/*
 * Judge the undecided nodes through the engine (placer_fit), each over its pods in flight
 * copied first (flight.h; then the engine reads the reservations and the view: a hold ends only
 * once its pod is reserved or shown, so such a pod is counted at least once). Nodes whose
 * reservations cannot be read without waiting stay undecided when may_block is 0.
 * 0 or EXTENDER_ENOMEM.
 */
static int judge(struct job *j, int may_block)
{
	struct extender *x = j->x;
	struct pod_attrs attrs = {j->ns, j->priority_class, j->labels.l.n ? &j->labels.l : NULL};
	int rc = 0;

	for (size_t i = 0; i < j->a.n && j->undecided > 0; i++) {
		struct extwire_node *v = &j->v[i];
		struct placer_fit f;
		struct placement_item *fl;
		size_t n_fl;

		if (v->state != EXTWIRE_UNDECIDED)
			continue;
		if (flight_items(x->flight, j->a.names[i], j->uid, j->now_ms, &fl, &n_fl) != 0) {
			rc = EXTENDER_ENOMEM;
			break;
		}
		struct placer_pod pp = {
		    .pod_name = j->pod_name,
		    .ns = j->ns,
		    .key = j->pod_name,
		    .uid = j->uid,
		    .node = j->a.names[i],
		    .demand = &j->d,
		    .attrs = &attrs,
		    .refs = &j->refs,
		    .dry_run = 1, /* the filter reserves nothing */
		};
		enum placer_fit_state st = placer_fit(x->placer, &pp, fl, n_fl, may_block, &f);
		resv_peek_free(fl, n_fl);
		if (st != PLACER_FIT_BUSY && st != PLACER_FIT_ENOMEM) {
			j->undecided--;
			judge_fit(j, v, &f);
			/* --mode warn or audit: the webhook admits whatever enforce refuses
			 * (webhook.h), so the node passes; it is not ranked (score 0). */
			if (x->warns_only && v->state != EXTWIRE_PASS) {
				free(v->reason);
				*v = (struct extwire_node){.state = EXTWIRE_PASS};
			}
		}
		placer_fit_clear(&f);
		if (st == PLACER_FIT_ENOMEM) {
			rc = EXTENDER_ENOMEM;
			break;
		}
	}
	return rc;
}

/* ---- one call ---- */

static void job_free(struct job *j)
{
	if (j == NULL)
		return;
	for (size_t i = 0; j->v != NULL && i < j->a.n; i++)
		free(j->v[i].reason);
	free(j->v);
	extwire_free(&j->a);
	labelset_clear(&j->labels);
	free(j);
}

/* A GPU pod with an invalid declaration: no node takes it, the reason says what to fix. */
static void fail_all(struct job *j)
{
	for (size_t i = 0; i < j->a.n; i++)
		set_verdict(&j->v[i], EXTWIRE_UNRESOLVABLE, "pod %s: %s", j->pod_name, j->error);
}

static void pass_all(struct job *j)
{
	for (size_t i = 0; i < j->a.n; i++)
		j->v[i].state = EXTWIRE_PASS;
}

/* Decode and decide what needs no waiting. 0 with *out set, or EXTENDER_ENOMEM. */
static int job_prepare(struct extender *x, enum extender_verb verb, const char *body, size_t len,
                       double arrived, struct job **out)
{
	double t = monotime_s();
	struct job *j = calloc(1, sizeof(*j));
	int rc;

	*out = NULL;
	if (j == NULL)
		return EXTENDER_ENOMEM;
	j->x = x;
	j->verb = verb;
	j->arrived = arrived;
	j->kind = K_PASS;
	rc = extwire_decode(&j->a, body, len, j->error, sizeof(j->error));
	if (rc == EXTWIRE_EBAD) {
		j->kind = K_ERROR;
		goto done;
	}
	if (rc != 0 || (j->v = calloc(j->a.n ? j->a.n : 1, sizeof(*j->v))) == NULL) {
		rc = EXTENDER_ENOMEM;
		goto err;
	}
	classify(j);
	if (j->kind == K_PASS)
		pass_all(j);
	else if (j->kind == K_INVALID)
		fail_all(j);
	else if (j->kind == K_NOCACHE && verb == EXTENDER_FILTER &&
	         strcmp(j->why, "PoliciesNotRead") == 0)
		set_error(j,
		          "gpu-memory-guard cannot judge GPU pod %s: it has not read the "
		          "GPUMemoryPolicy objects yet; retry",
		          j->pod_name);
	else if (j->kind == K_NOCACHE && verb == EXTENDER_FILTER &&
	         strcmp(j->why, "DRANotRead") == 0)
		set_error(j,
		          "gpu-memory-guard cannot judge GPU pod %s: it has not read the DRA "
		          "ResourceSlices and ResourceClaims (not listed yet, or their watch is "
		          "stale); retry",
		          j->pod_name);
	else if (j->kind == K_NOCACHE && verb == EXTENDER_FILTER &&
	         strcmp(j->why, "OutOfMemory") == 0)
		set_error(j, "gpu-memory-guard cannot judge GPU pod %s: out of memory; retry",
		          j->pod_name);
	else if (j->kind == K_NOCACHE && verb == EXTENDER_FILTER)
		set_error(j,
		          "gpu-memory-guard cannot judge GPU pod %s: its watch cache is %s; retry",
		          j->pod_name, x->cache_off ? "off (--cache off)" : "not synced or stale");
	else if (j->kind == K_GPU) {
		j->now_ms = ledger_now_ms();
		flight_prune(x->flight, j->now_ms);
		if ((rc = judge(j, 0)) != 0)
			goto err;
	}
done:
	j->own = monotime_s() - t;
	*out = j;
	return 0;
err:
	job_free(j);
	return rc;
}

static enum metrics_extender_result result_of(const struct job *j)
{
	if (j->kind == K_PASS)
		return METRICS_EXT_PASSTHROUGH;
	if (j->kind == K_ERROR || j->kind == K_NOCACHE)
		return METRICS_EXT_ERROR;
	return METRICS_EXT_JUDGED;
}

static void log_call(const struct job *j, size_t n_out, double latency)
{
	static const char *const verbs[] = {"filter", "prioritize"};
	struct log_field f[] = {
	    LOG_STR("verb", verbs[j->verb]),
	    LOG_STR("pod", j->pod_name[0] ? j->pod_name : NULL),
	    LOG_STR("reason", j->why ? j->why : "BadRequest"),
	    LOG_INT("nodes", j->a.n),
	    LOG_INT("filtered_out", n_out),
	    LOG_STR("error", j->kind == K_ERROR ? j->error : NULL),
	    LOG_DBL("latency_ms", latency * 1000.0),
	    LOG_DBL("self_ms", j->own * 1000.0),
	    LOG_END,
	};
	log_fields(j->kind == K_PASS ? LOG_DEBUG : LOG_INFO, "extender", f);
}

/* Sort key of a passing node for pass_best: higher score first, then the input order. */
struct ranked {
	int score;
	size_t i;
};

static int by_rank(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* --scheduler-pass-nodes: of the nodes a filter passed, keep the pass_nodes it scores highest;
 * the others fail (extender.h). 0 or EXTENDER_ENOMEM. */
static int pass_best(struct job *j)
{
	unsigned keep = j->x->pass_nodes;
	struct ranked *r;
	size_t n = 0;

	for (size_t i = 0; i < j->a.n; i++)
		n += j->v[i].state == EXTWIRE_PASS;
	if (keep == 0 || n <= keep)
		return 0;
	if ((r = malloc(n * sizeof(*r))) == NULL)
		return EXTENDER_ENOMEM;
	n = 0;
	for (size_t i = 0; i < j->a.n; i++)
		if (j->v[i].state == EXTWIRE_PASS)
			r[n++] = (struct ranked){j->v[i].score, i};
	qsort(r, n, sizeof(*r), by_rank);
	for (size_t k = keep; k < n; k++)
		set_verdict(&j->v[r[k].i], EXTWIRE_FAIL,
		            "fits, but the filter passes only the %u best-scored of the %zu nodes "
		            "where it fits (--scheduler-pass-nodes)",
		            keep, n);
	free(r);
	return 0;
}

/* Finish (waiting for held nodes unless refused), encode, log, count; frees j. */
static int job_finish(struct job *j, char **out, size_t *out_len, char *err, size_t errlen)
{
	double t = monotime_s();
	size_t n_out = 0;
	int rc = 0;

	*out = NULL;
	*out_len = 0;
	if (j->kind == K_GPU && j->undecided > 0 && !j->refused)
		rc = judge(j, 1);
	if (rc == 0 && j->kind == K_GPU && j->verb == EXTENDER_FILTER && j->undecided == 0 &&
	    (rc = pass_best(j)) == 0)
		hold_passed(j);
	if (rc == 0 && j->verb == EXTENDER_PRIORITIZE && j->kind == K_ERROR) {
		snprintf(err, errlen, "%s", j->error);
		rc = EXTENDER_EBADREQUEST;
	} else if (rc == 0) {
		*out = j->verb == EXTENDER_FILTER
		           ? extwire_filter_result(&j->a, j->v,
		                                   j->kind == K_ERROR ? j->error : NULL, &n_out)
		           : extwire_priorities(&j->a, j->v);
		if (*out == NULL)
			rc = EXTENDER_ENOMEM;
		else
			*out_len = strlen(*out);
	}
	if (rc == EXTENDER_ENOMEM)
		snprintf(err, errlen, "out of memory");
	double end = monotime_s();
	j->own += end - t;
	metrics_extender(j->x->metrics,
	                 j->verb == EXTENDER_FILTER ? METRICS_EXT_FILTER : METRICS_EXT_PRIORITIZE,
	                 result_of(j), n_out, end - j->arrived);
	log_call(j, n_out, end - j->arrived);
	job_free(j);
	return rc;
}

int extender_handle(struct extender *x, enum extender_verb verb, const char *body, size_t len,
                    char **out, size_t *out_len, char *err, size_t errlen)
{
	struct job *j = NULL;
	int rc = job_prepare(x, verb, body, len, monotime_s(), &j);

	*out = NULL;
	*out_len = 0;
	if (rc != 0) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	return job_finish(j, out, out_len, err, errlen);
}

/* ---- routes ---- */

static int route_prepare(struct extender *x, enum extender_verb verb, const char *body, size_t len,
                         double arrived, void **job, char *err, size_t errlen)
{
	struct job *j = NULL;
	int rc = job_prepare(x, verb, body, len, arrived, &j);

	*job = j;
	if (rc != 0)
		snprintf(err, errlen, "out of memory");
	else if (j->kind == K_GPU && verb == EXTENDER_FILTER && j->uid != NULL && j->uid[0] &&
	         !flight_shows(x->flight, &(struct flight_pod){.key = j->pod_name, .uid = j->uid}))
		j->await_cache = 1;
	return rc ? SERVER_ENOMEM : 0;
}

static int filter_prepare(void *ctx, const char *body, size_t len, double arrived, void **job,
                          char *err, size_t errlen)
{
	return route_prepare(ctx, EXTENDER_FILTER, body, len, arrived, job, err, errlen);
}

static int prioritize_prepare(void *ctx, const char *body, size_t len, double arrived, void **job,
                              char *err, size_t errlen)
{
	return route_prepare(ctx, EXTENDER_PRIORITIZE, body, len, arrived, job, err, errlen);
}

static int route_needs_worker(const void *job)
{
	const struct job *j = job;
	return j->kind == K_GPU && (j->undecided > 0 || j->await_cache);
}

static int route_finish(void *job, char **out, size_t *out_len, char *err, size_t errlen)
{
	int rc = job_finish(job, out, out_len, err, errlen);
	return rc == EXTENDER_EBADREQUEST ? SERVER_EBADREQUEST : rc ? SERVER_ENOMEM : 0;
}

/* No worker free: the filter answers an Error (the scheduler retries), prioritize gives what
 * it could not read 0. */
static void route_refuse_busy(void *job, const char *why)
{
	struct job *j = job;
	size_t i = 0;

	j->await_cache = 0; /* decide the hold now: the pod holds nothing if not cached */
	if (j->kind != K_GPU || j->undecided == 0)
		return;
	j->refused = 1;
	j->why = "Busy";
	if (j->verb == EXTENDER_PRIORITIZE)
		return;
	while (i < j->a.n && j->v[i].state != EXTWIRE_UNDECIDED)
		i++;
	set_error(j, "gpu-memory-guard is too busy (%s) to judge GPU pod %s on node %s; retry",
	          why ? why : "no thread free", j->pod_name, i < j->a.n ? j->a.names[i] : "?");
}

static void route_discard(void *job)
{
	job_free(job);
}

static struct server_route route(struct extender *x, const char *path,
                                 int (*prepare)(void *, const char *, size_t, double, void **,
                                                char *, size_t))
{
	struct server_route r = {
	    .path = path,
	    .body_max = EXTENDER_BODY_MAX,
	    .ctx = x,
	    .prepare = prepare,
	    .needs_worker = route_needs_worker,
	    .finish = route_finish,
	    .refuse_busy = route_refuse_busy,
	    .discard = route_discard,
	    .plain = 1,
	    .auth_route = METRICS_ROUTE_EXTENDER,
	};
	return r;
}

struct server_route extender_filter_route(struct extender *x)
{
	return route(x, EXTENDER_PATH_FILTER, filter_prepare);
}

struct server_route extender_prioritize_route(struct extender *x)
{
	return route(x, EXTENDER_PATH_PRIORITIZE, prioritize_prepare);
}

/* ---- life cycle ---- */

struct extender *extender_new(const struct extender_config *cfg, struct metrics *metrics)
{
	struct extender *x;

	if (cfg == NULL || cfg->placer == NULL ||
	    (cfg->score != EXTENDER_BINPACK && cfg->score != EXTENDER_SPREAD))
		return NULL;
	if ((x = calloc(1, sizeof(*x))) == NULL)
		return NULL;
	x->placer = cfg->placer;
	x->cache_off = placer_cache(cfg->placer) == NULL;
	x->warns_only = placer_warns_only(cfg->placer);
	x->score = cfg->score;
	x->pass_nodes = cfg->pass_nodes;
	x->metrics = metrics;
	if ((x->flight = flight_new(placer_cache(cfg->placer), metrics)) == NULL) {
		free(x);
		return NULL;
	}
	return x;
}

void extender_free(struct extender *x)
{
	if (x == NULL)
		return;
	flight_free(x->flight);
	free(x);
}
