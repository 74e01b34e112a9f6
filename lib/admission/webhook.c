/*
 * webhook: the admission adapter. See webhook.h for the contract.
 */
#include "webhook.h"

#include "admission.h"
#include "cache.h"
#include "demand.h"
#include "dra.h"
#include "engine.h"
#include "jsonpath.h"
#include "kube.h"
#include "labelset.h"
#include "ledger.h"
#include "log.h"
#include "metrics.h"
#include "monotime.h"
#include "outcome.h"
#include "placement.h"
#include "placer.h"
#include "pod.h"
#include "policy.h"
#include "server.h"
#include "text.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX LEDGER_KEY_MAX
#define ERR_MAX 512 /* a foreign one-line error (kube, capacity) */

struct webhook {
	int mode_warn, mode_audit; /* --mode: apply_mode(), and the placer's copy */
	char *gpu_resources[DEMAND_MAX_RESOURCES];
	struct demand_config dcfg;
	struct engine_defaults engines; /* dcfg.engines */
	char *exempt[WEBHOOK_MAX_EXEMPT];
	size_t n_exempt;
	uint64_t budget_ms;
	struct placer_source src;
	struct cache *cache;
	struct dra_store *dra;     /* DRA slices and claims; NULL: DRA not read */
	struct policies *policies; /* GPUMemoryPolicy objects; NULL: flags and annotations only */
	struct metrics *metrics;
	struct placer *placer; /* the engine loop: every placement's view, reservations, verdict */
	void (*binding_admitted)(void *ctx, const char *uid); /* webhook.h */
	void *binding_admitted_ctx;
};

double webhook_now(void)
{
	return monotime_s();
}

/* Pod CREATE without a node: check the declarations so mistakes surface at kubectl apply. */
static void check_declarations(struct webhook *w, const cJSON *pod, const char *pod_name,
                               struct outcome *o)
{
	struct demand d;
	int rc = demand_from_pod(pod, &w->dcfg, &d);
	if (rc != 0 || d.status == DEMAND_INVALID) {
		outcome_deny(o, METRICS_DENIED, 403, "InvalidDeclaration", "pod %s: %s", pod_name,
		             d.error);
		return;
	}
	outcome_allow(o, d.status == DEMAND_OK ? "DeclarationValid" : "NotGPU",
	              d.status != DEMAND_OK);
	outcome_warn(o, d.warning);
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

/* The placement of the review's pod on node as the engine loop takes it (placer.h); key is
 * the caller's KEY_MAX buffer. Everything borrowed. */
static struct placer_pod pod_to_place(const struct admission_request *req, const char *pod_name,
                                      const char *node, const struct demand *d, const char *uid,
                                      const struct pod_attrs *a, const struct dra_pod_refs *refs,
                                      char *key)
{
	struct placer_pod pp = {
	    .pod_name = pod_name,
	    .ns = req->namespace_,
	    .key = ledger_key(req, key, KEY_MAX) == 0 ? key : NULL,
	    .uid = uid,
	    .node = node,
	    .demand = d,
	    .attrs = a,
	    .refs = refs,
	    .dry_run = req->dry_run,
	    .pod_create = req->target == ADMISSION_POD,
	};
	return pp;
}

/*
 * The part of a placement of pod on node decided from the pod alone (placer_classify_pod).
 * Returns 1 when decided (mirror pod, invalid declaration, not a GPU pod), 0 when the node must
 * be checked: *d then holds the pod's demand.
 */
static int placement_precheck(struct webhook *w, const cJSON *pod, const char *pod_name,
                              const char *node, struct demand *d, struct dra_pod_refs *refs,
                              struct outcome *o)
{
	char err[DEMAND_MSG_MAX > DRA_MSG_MAX ? DEMAND_MSG_MAX : DRA_MSG_MAX];

	snprintf(o->node, sizeof(o->node), "%s", node);
	switch (placer_classify_pod(w->placer, pod, d, refs, err, sizeof(err))) {
	case PLACER_POD_MIRROR:
		outcome_allow(o, "MirrorPod", 0);
		return 1;
	case PLACER_POD_INVALID:
		outcome_deny(o, METRICS_DENIED, 403, "InvalidDeclaration", "pod %s: %s", pod_name,
		             err);
		return 1;
	case PLACER_POD_NOT_GPU:
		outcome_allow(o, "NotGPU", 0);
		outcome_warn(o, d->warning);
		return 1;
	case PLACER_POD_GPU: /* DRA claims only: decided on the node (dra_not_gpu() if none is
	                        a GPU) */
		break;
	}
	return 0;
}

/* A Binding whose pod the cache knows, decided without asking the API server. 1 when decided,
 * 0 to take the API path (GET pod). */
static int binding_cached(struct webhook *w, const struct admission_request *req,
                          const char *pod_name, int may_block, struct outcome *o)
{
	struct cache_pod cp;
	const char *uid = json_str(req->object, "metadata", "uid", NULL);

	if (!placer_cache_may_decide(w->placer, o->api_failed) ||
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
		outcome_allow(o, "AlreadyBound", 0); /* binding_refused_by_storage() */
		return 1;
	}
	if (cp.deleting) {
		outcome_allow(o, "BeingDeleted", 0); /* binding_refused_by_storage() */
		return 1;
	}
	if (cp.mirror) {
		outcome_allow(o, "MirrorPod", 0);
		return 1;
	}
	if (cp.demand.status == DEMAND_INVALID) {
		outcome_deny(o, METRICS_DENIED, 403, "InvalidDeclaration", "pod %s: %s", pod_name,
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
		/* out of memory, gone meanwhile, or claims dra_pod_refs refuses: the API path
		 * reads the pod (and refuses the last, InvalidDeclaration) */
		return 0;
	}
	char key[KEY_MAX];
	struct placer_pod pp =
	    pod_to_place(req, pod_name, req->binding_node, &cp.demand, cp.uid, NULL, refs, key);
	if (cp.demand.status == DEMAND_NOT_GPU) {
		/* the DRA store says whether those claims hold or can get GPUs on the node; none:
		 * not a GPU placement */
		int dra;
		if (placer_dra_any(w->placer, &pp, o, &dra) != 0) {
			free(refs);
			return 1;
		}
		if (!dra) {
			free(refs);
			outcome_allow(o, "NotGPU", 0);
			outcome_warn(o, cp.demand.warning);
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
	pp.attrs = &a;
	int decided = placer_cached(w->placer, &pp, may_block, o);
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
 * Conflict, "pod ... is already assigned to node ..."), being deleted ("pod ... is being
 * deleted, cannot be assigned to a host"), or of another pod than the one of its name now (its
 * metadata.uid, buid, is a precondition of the update: a Binding of a pod deleted and created
 * again under its name), in pkg/registry/core/pod/storage/storage.go (setPodNodeAndMetadata).
 * Admitted without a placement check and reserving nothing: a reservation would count, for its
 * TTL, a pod that never comes to that node (a phantom that refuses real placements there). 1
 * when decided.
 */
static int binding_refused_by_storage(const cJSON *pod, const char *buid, struct outcome *o)
{
	const char *bound = json_str(pod, "spec", "nodeName", NULL);
	const char *uid = json_str(pod, "metadata", "uid", NULL);

	if (buid != NULL && buid[0] != '\0' && (uid == NULL || strcmp(uid, buid) != 0)) {
		outcome_allow(o, "OtherPod", 0);
		return 1;
	}
	if (bound != NULL && bound[0] != '\0') {
		outcome_allow(o, "AlreadyBound", 0);
		return 1;
	}
	if (pod_being_deleted(pod)) {
		outcome_allow(o, "BeingDeleted", 0);
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
		outcome_deny(o, METRICS_ERROR, 500, "InternalError",
		             "cannot check %s: out of memory", pod_name);
		return;
	}
	if (outcome_over_budget(o, w->budget_ms, pod_name, call)) {
		free(refs);
		return;
	}
	double t = webhook_now();
	int rc =
	    w->src.get_pod(w->src.ctx, req->namespace_, req->name, &pod, &code, err, sizeof(err));
	o->waited += webhook_now() - t;
	if (rc != 0 || !is_pod_named(pod, req->namespace_, req->name)) {
		outcome_fail_closed(o, pod_name, call, rc ? rc : KUBE_EPARSE,
		                    rc ? err : "the answer is not the Pod asked for");
		goto out;
	}
	if (binding_refused_by_storage(pod, json_str(req->object, "metadata", "uid", NULL), o))
		goto out;
	if (placement_precheck(w, pod, pod_name, req->binding_node, &d, refs, o))
		goto out;
	if (w->policies != NULL && /* tier membership; no tiers with --policies off */
	    labelset_copy(&labels, json_at(pod, "metadata", "labels", NULL)) != 0) {
		outcome_deny(o, METRICS_ERROR, 500, "InternalError",
		             "cannot check %s: out of memory", pod_name);
		goto out;
	}
	struct pod_attrs a = {req->namespace_, json_str(pod, "spec", "priorityClassName", NULL),
	                      labels.l.n ? &labels.l : NULL};
	char key[KEY_MAX];
	struct placer_pod pp = pod_to_place(req, pod_name, req->binding_node, &d,
	                                    json_str(pod, "metadata", "uid", NULL), &a, refs, key);
	if (!placer_cached(w->placer, &pp, 1, o))
		placer_live(w->placer, &pp, o);
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
	int decided; /* o is final: nothing to ask the API server */
	/* A pod CREATE with nodeName: the placement (pp, its pointers into review and below) */
	struct placer_pod pp;
	struct demand d;          /* the pod's demand */
	struct labelset labels;   /* its labels */
	struct pod_attrs attrs;   /* its GPUMemoryPolicy tier attributes (in review, labels) */
	struct dra_pod_refs refs; /* the DRA claims it names */
	char key[KEY_MAX];        /* its reservation key */
	double busy;              /* seconds inside prepare and finish (o.waited of them blocked) */
	char pod_name[2 * ADMISSION_NAME_MAX + 2];
};

/* A Binding's pod on each path, for placer_decide (placer_target): read from the cache, or
 * GET. */
static int binding_from_cache(void *ctx, struct outcome *o)
{
	struct webhook_review_ctx *x = ctx;
	return binding_cached(x->w, &x->req, x->pod_name, 1, o);
}

static void binding_from_api(void *ctx, struct outcome *o)
{
	struct webhook_review_ctx *x = ctx;
	check_binding(x->w, &x->req, x->pod_name, o);
}

/* A placement the server handed to a worker, decided in the engine's order (placer_decide:
 * the cache, else the API server, and the cache after all when the API server cannot be asked
 * while the cache is still fresh; webhook.h). */
static void decide_placement(struct webhook_review_ctx *x)
{
	struct placer_target t = {NULL, binding_from_cache, binding_from_api, x};

	if (x->req.target != ADMISSION_BINDING)
		t.pod = &x->pp;
	placer_decide(x->w->placer, &t, &x->o);
}

/* Decide what the request alone decides. Returns 1 when decided, 0 when a placement must be
 * checked against the API server (a binding to a node, or a GPU pod CREATE with nodeName). */
static int classify(struct webhook_review_ctx *x)
{
	struct webhook *w = x->w;
	const struct admission_request *req = &x->req;
	struct outcome *o = &x->o;

	if (req->operation != ADMISSION_OP_CREATE || req->target == ADMISSION_OTHER) {
		outcome_allow(o, "NotPlacement", 1);
		return 1;
	}
	if (placer_exempt(w->placer, req->namespace_)) {
		outcome_allow(o, "ExemptNamespace", 0);
		return 1;
	}
	if (req->target == ADMISSION_BINDING) {
		if (!req->binding_target_is_node || req->binding_node[0] == '\0') {
			outcome_allow(o, "NotNodeTarget", 0);
			return 1;
		}
		snprintf(o->node, sizeof(o->node), "%s", req->binding_node);
		return binding_cached(w, req, x->pod_name, 0, o);
	}
	if (req->object == NULL) {
		outcome_allow(o, "NoObject", 0);
		return 1;
	}
	const char *node = json_str(req->object, "spec", "nodeName", NULL);
	if (node == NULL || node[0] == '\0') {
		if (pod_is_mirror(req->object))
			outcome_allow(o, "MirrorPod", 0);
		else
			check_declarations(w, req->object, x->pod_name, o);
		return 1;
	}
	if (placement_precheck(w, req->object, x->pod_name, node, &x->d, &x->refs, o))
		return 1;
	if (w->policies != NULL && /* tier membership; no tiers with --policies off */
	    labelset_copy(&x->labels, json_at(req->object, "metadata", "labels", NULL)) != 0) {
		outcome_deny(o, METRICS_ERROR, 500, "InternalError",
		             "cannot check %s: out of memory", x->pod_name);
		return 1;
	}
	x->attrs.ns = req->namespace_;
	x->attrs.priority_class = json_str(req->object, "spec", "priorityClassName", NULL);
	x->attrs.labels = x->labels.l.n ? &x->labels.l : NULL;
	const char *uid = json_str(req->object, "metadata", "uid", NULL);
	if (uid != NULL && strlen(uid) >= LEDGER_UID_MAX) { /* the API server's are UUIDs, 36 */
		outcome_deny(
		    o, METRICS_ERROR, 400, "InvalidReview",
		    "invalid AdmissionReview: request.object.metadata.uid of %s is %zu bytes "
		    "long, at most %d are accepted",
		    x->pod_name, strlen(uid), LEDGER_UID_MAX - 1);
		return 1;
	}
	x->pp = pod_to_place(req, x->pod_name, node, &x->d, uid, &x->attrs, &x->refs, x->key);
	/* With a fresh watch cache the placement is decided here, on the server's thread. */
	return placer_cached(w->placer, &x->pp, 0, o);
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
		outcome_warn(o, o->message);
		o->mdec = METRICS_WARNED;
	} else {
		outcome_audit_mode(o, o->message);
		o->mdec = METRICS_ALLOWED;
	}
	o->message[0] = '\0';
}

void webhook_refuse_busy(struct webhook_review_ctx *x, const char *why)
{
	if (x == NULL || x->decided)
		return;
	outcome_deny(
	    &x->o, METRICS_ERROR, 500, "WebhookBusy",
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
		outcome_allow(&x->o, "NotPlacement", 0);
	else
		outcome_deny(&x->o, METRICS_ERROR, 400, "InvalidReview",
		             "invalid AdmissionReview: %s", derr);
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
	if (req->target == ADMISSION_BINDING && o->allowed && o->reserved_uid[0] != '\0' &&
	    w->binding_admitted != NULL)
		w->binding_admitted(w->binding_admitted_ctx, o->reserved_uid);
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

struct webhook *webhook_new(const struct webhook_config *cfg, const struct placer_source *src,
                            struct ledger *ledger, struct metrics *metrics)
{
	struct webhook *w;
	if (cfg == NULL || src == NULL || ledger == NULL ||
	    cfg->n_gpu_resources > DEMAND_MAX_RESOURCES ||
	    cfg->n_exempt_namespaces > WEBHOOK_MAX_EXEMPT)
		return NULL;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return NULL;
	w->mode_warn = cfg->mode_warn;
	w->mode_audit = cfg->mode_audit && !cfg->mode_warn;
	w->budget_ms = cfg->budget_ms;
	w->src = *src;
	w->cache = cfg->cache;
	w->dra = cfg->dra;
	w->policies = cfg->policies;
	w->metrics = metrics;
	w->binding_admitted = cfg->binding_admitted;
	w->binding_admitted_ctx = cfg->binding_admitted_ctx;
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
	if (!(cfg->threshold > 0 && cfg->threshold <= 1) ||
	    !(cfg->warn_threshold > 0 && cfg->warn_threshold <= 1))
		goto err;
	struct placer_config pc = {
	    .threshold = cfg->threshold,
	    .warn_threshold = cfg->warn_threshold,
	    .mode_warn = w->mode_warn,
	    .mode_audit = w->mode_audit,
	    .dcfg = &w->dcfg,
	    .budget_ms = cfg->budget_ms,
	    .grace_ms = cfg->grace_ms,
	    .unseen_ttl_ms = cfg->unseen_ttl_ms,
	    .src = *src,
	    .cache = cfg->cache,
	    .cache_fresh = cfg->cache_fresh,
	    .dra_fresh = cfg->dra_fresh,
	    .cache_connected = cfg->cache_connected,
	    .cache_progress_ms = cfg->cache_progress_ms,
	    .cache_ctx = cfg->cache_ctx,
	    .dra = cfg->dra,
	    .ledger = ledger,
	    .shared = cfg->shared,
	    .policies = cfg->policies,
	    .metrics = metrics,
	    .exempt_namespaces = (const char *const *)w->exempt,
	    .n_exempt_namespaces = w->n_exempt,
	};
	if ((w->placer = placer_new(&pc)) == NULL)
		goto err;
	return w;
err:
	webhook_free(w);
	return NULL;
}

struct placer *webhook_placer(struct webhook *w)
{
	return w->placer;
}

void webhook_free(struct webhook *w)
{
	if (w == NULL)
		return;
	placer_free(w->placer);
	for (size_t i = 0; i < DEMAND_MAX_RESOURCES; i++)
		free(w->gpu_resources[i]);
	for (size_t i = 0; i < w->n_exempt; i++)
		free(w->exempt[i]);
	free(w);
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
