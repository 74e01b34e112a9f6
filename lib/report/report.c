/*
 * report: every GPU node's memory from cluster JSON, by the placement core. See report.h.
 */
#include "report.h"

#include "capacity.h"
#include "core.h"
#include "demand.h"
#include "dra.h"
#include "drastore.h"
#include "engine.h"
#include "gpupolicy.h"
#include "jsonpath.h"
#include "labelset.h"
#include "placement.h"
#include "pod.h"
#include "quantity.h"
#include "satmath.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_GPU_RESOURCE "nvidia.com/gpu"
#define LABEL_SHARING        "nvidia.com/gpu.sharing-strategy"
#define LABEL_MIG            "nvidia.com/mig.strategy"
#define UNNAMED_POD          "(unnamed pod)"
#define SHARING_MAX          64

/* A node as read: what the rows need, not the object. */
struct node_rec {
	char *name;
	char *product;
	char sharing[SHARING_MAX];
	uint64_t replicas;
	int cap_rc; /* capacity_from_node()'s result */
	struct capacity cap;
	char cap_err[CAPACITY_MSG_MAX];
	int gpu_allocatable;    /* allocatable carries a configured GPU resource, not "0" */
	struct labelset labels; /* metadata.labels: GPUMemoryPolicy spec.nodeSelector */
	struct dra_view *dra;   /* report_build: its DRA GPUs and claims (owned) */
};

/* A consumer bound to a node, not finished (placement_consumer(): a GPU pod, or a DRA pod
 * whose containers have figures). */
struct pod_rec {
	char *node;
	char *key;
	char *uid;
	char *problem; /* NULL when declared */
	uint64_t bytes, gpus;
	int gpu_pod; /* status DEMAND_OK or DEMAND_INVALID: a row's pod; 0: a DRA pod's figures
	                only (no consumer of its own: they raise its claim's count), not listed */
	/* What it counts, placement_item_demand_figs()'s, the cache's and the view's rule: its
	 * shares (--undeclared infer: its GPU containers, resolved on its node as the webhook
	 * does) and its DRA containers' figures point into compact and figs when set; build_row
	 * points them again (the record moves: grow, qsort) */
	struct placement_item item;
	struct demand_share compact[DEMAND_MAX_PARTS];
	struct demand_share figs[DEMAND_MAX_PARTS];
	enum demand_source source;
	char words[DEMAND_PART_WORDS];
	char *priority_class;   /* spec.priorityClassName, NULL when none (tiers) */
	struct labelset labels; /* metadata.labels (tiers' podSelector) */
};

/* A GPUMemoryPolicy as read: parsed, or its error. */
struct pol_rec {
	char *name;
	struct gpupolicy *p; /* NULL: not usable */
	char *error;         /* "" when usable */
};

struct report {
	double threshold;
	char *resources[DEMAND_MAX_RESOURCES];
	const char *resource_ptrs[DEMAND_MAX_RESOURCES];
	struct demand_config dcfg;
	struct engine_defaults engines; /* dcfg.engines */
	cJSON *probe;       /* a Pod asking one GPU; its GPU_MEMORY_LIMIT is rewritten per try */
	cJSON *probe_value; /* that env var's value (borrowed from probe) */
	struct node_rec *nodes;
	size_t n_nodes, cap_nodes;
	struct pod_rec *pods;
	size_t n_pods, cap_pods;
	struct pol_rec *pols;
	size_t n_pols, cap_pols;
	const struct gpupolicy *
	    *pol_ps; /* report_build: pols[i].p in name order, gpupolicy_select's */
	int built;
	struct report_row *rows;
	size_t n_rows;
	struct report_pod *row_pods; /* every row's pods, row after row */
	struct dra_store *dra;       /* the DRA slices and claims read (report_add_dra) */
};

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static char *dup_str(const char *s)
{
	return strdup(s != NULL ? s : "");
}

/* The probe: {"metadata":{...},"spec":{"containers":[{"name":"probe","resources":{"limits":
 * {<first GPU resource>:"1"}},"env":[{"name":"GPU_MEMORY_LIMIT","value":...}]}]}}. */
static int make_probe(struct report *r)
{
	cJSON *pod = cJSON_CreateObject(), *meta, *spec, *ctrs, *c, *res, *lim, *env, *e;

	if (pod == NULL)
		return -1;
	meta = cJSON_AddObjectToObject(pod, "metadata");
	spec = cJSON_AddObjectToObject(pod, "spec");
	ctrs = spec ? cJSON_AddArrayToObject(spec, "containers") : NULL;
	c = cJSON_CreateObject();
	if (meta == NULL || ctrs == NULL || c == NULL || !cJSON_AddItemToArray(ctrs, c)) {
		cJSON_Delete(c);
		cJSON_Delete(pod);
		return -1;
	}
	res = cJSON_AddObjectToObject(c, "resources");
	lim = res ? cJSON_AddObjectToObject(res, "limits") : NULL;
	env = cJSON_AddArrayToObject(c, "env");
	e = cJSON_CreateObject();
	if (lim == NULL || env == NULL || e == NULL || !cJSON_AddItemToArray(env, e) ||
	    !cJSON_AddStringToObject(meta, "namespace", "(report)") ||
	    !cJSON_AddStringToObject(meta, "name", "largest-fit") ||
	    !cJSON_AddStringToObject(c, "name", "probe") ||
	    !cJSON_AddStringToObject(lim, r->dcfg.gpu_resources[0], "1") ||
	    !cJSON_AddStringToObject(e, "name", DEMAND_ENV_NAME) ||
	    /* 20 digits: room for any uint64, so cJSON_SetValuestring rewrites it in place */
	    (r->probe_value = cJSON_AddStringToObject(e, "value", "00000000000000000000")) ==
	        NULL) {
		if (e != NULL && env != NULL && cJSON_GetArraySize(env) == 0)
			cJSON_Delete(e);
		cJSON_Delete(pod);
		return -1;
	}
	r->probe = pod;
	return 0;
}

struct report *report_new(const struct report_config *cfg, char *err, size_t errlen)
{
	struct report *r;
	size_t n = cfg->gpu_resources ? cfg->n_gpu_resources : 0;

	if (!(cfg->threshold > 0.0 && cfg->threshold <= 1.0)) {
		fail(err, errlen, REPORT_EINVAL, "threshold %g outside (0,1]", cfg->threshold);
		return NULL;
	}
	if (n > DEMAND_MAX_RESOURCES) {
		fail(err, errlen, REPORT_EINVAL, "%zu GPU resources, at most %d", n,
		     DEMAND_MAX_RESOURCES);
		return NULL;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL)
		goto nomem;
	r->threshold = cfg->threshold;
	for (size_t i = 0; i < n; i++) {
		if ((r->resources[i] = dup_str(cfg->gpu_resources[i])) == NULL)
			goto nomem;
		r->resource_ptrs[i] = r->resources[i];
	}
	if (n == 0)
		r->resource_ptrs[n++] = DEFAULT_GPU_RESOURCE;
	r->dcfg.gpu_resources = r->resource_ptrs;
	r->dcfg.n_gpu_resources = n;
	r->dcfg.infer = cfg->infer;
	if (cfg->engines != NULL)
		r->engines = *cfg->engines;
	else
		engine_defaults_init(&r->engines);
	r->dcfg.engines = &r->engines;
	if (make_probe(r) != 0 || (r->dra = dra_store_new(cfg->dra_drivers, NULL, NULL)) == NULL)
		goto nomem;
	return r;
nomem:
	report_free(r);
	fail(err, errlen, REPORT_ENOMEM, "out of memory");
	return NULL;
}

void report_free(struct report *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < DEMAND_MAX_RESOURCES; i++)
		free(r->resources[i]);
	cJSON_Delete(r->probe);
	dra_store_free(r->dra);
	for (size_t i = 0; i < r->n_nodes; i++) {
		dra_view_free(r->nodes[i].dra);
		free(r->nodes[i].name);
		free(r->nodes[i].product);
		labelset_clear(&r->nodes[i].labels);
	}
	free(r->nodes);
	for (size_t i = 0; i < r->n_pods; i++) {
		free(r->pods[i].node);
		free(r->pods[i].key);
		free(r->pods[i].uid);
		free(r->pods[i].problem);
		free(r->pods[i].priority_class);
		labelset_clear(&r->pods[i].labels);
	}
	free(r->pods);
	for (size_t i = 0; i < r->n_pols; i++) {
		free(r->pols[i].name);
		gpupolicy_free(r->pols[i].p);
		free(r->pols[i].error);
	}
	free(r->pols);
	free(r->pol_ps);
	for (size_t i = 0; r->rows != NULL && i < r->n_rows; i++)
		free((void *)r->rows[i].tiers);
	free(r->rows);
	free(r->row_pods);
	free(r);
}

/* Grow *v (elements of size sz) to hold one more; 0 or -1. */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *p = realloc(*v, ncap * sz);
	if (p == NULL)
		return -1;
	*v = p;
	*cap = ncap;
	return 0;
}

/* "none", "time-slicing", "mps", "mig-single", ... from GFD's labels, as written. */
static void sharing_of(const cJSON *labels, uint64_t replicas, char *buf, size_t cap)
{
	const char *s = json_str(labels, LABEL_SHARING, NULL);
	const char *mig = json_str(labels, LABEL_MIG, NULL);
	const char *strategy = s != NULL && s[0] ? s : replicas > 1 ? "time-slicing" : "none";

	if (mig != NULL && mig[0] && strcmp(mig, "none") != 0) {
		if (strcmp(strategy, "none") == 0)
			snprintf(buf, cap, "mig-%.20s", mig);
		else
			snprintf(buf, cap, "mig-%.20s+%.30s", mig, strategy);
	} else {
		snprintf(buf, cap, "%.60s", strategy);
	}
}

/* A positive decimal label value, else 1. */
static uint64_t replicas_of(const cJSON *labels)
{
	const char *s = json_str(labels, CAPACITY_LABEL_REPLICAS, NULL);
	char *end;
	unsigned long long v;

	if (s == NULL || s[0] < '0' || s[0] > '9')
		return 1;
	v = strtoull(s, &end, 10);
	return *end == '\0' && v > 0 ? (uint64_t)v : 1;
}

static int gpu_allocatable(const struct report *r, const cJSON *node)
{
	for (size_t i = 0; i < r->dcfg.n_gpu_resources; i++) {
		const cJSON *v =
		    json_at(node, "status", "allocatable", r->dcfg.gpu_resources[i], NULL);
		if (cJSON_IsString(v) && strcmp(v->valuestring, "0") != 0)
			return 1;
		if (cJSON_IsNumber(v) && v->valuedouble > 0)
			return 1;
	}
	return 0;
}

int report_add_node(struct report *r, const cJSON *node, char *err, size_t errlen)
{
	const char *name = json_str(node, "metadata", "name", NULL);
	const cJSON *labels = json_at(node, "metadata", "labels", NULL);
	struct node_rec *n;

	if (r->built)
		return fail(err, errlen, REPORT_ESTATE, "node added after the report was built");
	if (!cJSON_IsObject(node))
		return fail(err, errlen, REPORT_EINVAL, "node: not an object");
	if (name == NULL || name[0] == '\0')
		return fail(err, errlen, REPORT_EINVAL, "node: no metadata.name");
	if (r->n_nodes >= REPORT_MAX_NODES)
		return fail(err, errlen, REPORT_EFULL, "more than %d nodes", REPORT_MAX_NODES);
	if (grow((void **)&r->nodes, &r->cap_nodes, r->n_nodes, sizeof(*r->nodes)) != 0)
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	n = &r->nodes[r->n_nodes];
	memset(n, 0, sizeof(*n));
	n->name = dup_str(name);
	n->product = dup_str(json_str(labels, CAPACITY_LABEL_PRODUCT, NULL));
	if (n->name == NULL || n->product == NULL || labelset_copy(&n->labels, labels) != 0) {
		free(n->name);
		free(n->product);
		labelset_clear(&n->labels);
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	}
	n->replicas = replicas_of(labels);
	sharing_of(labels, n->replicas, n->sharing, sizeof(n->sharing));
	n->cap_rc = capacity_from_node(node, &r->dcfg, &n->cap, n->cap_err, sizeof(n->cap_err));
	n->gpu_allocatable = gpu_allocatable(r, node);
	r->n_nodes++;
	return 0;
}

int report_add_policy(struct report *r, const cJSON *policy, char *err, size_t errlen)
{
	const char *name = json_str(policy, "metadata", "name", NULL);
	char why[GPUPOLICY_ERR_MAX] = "";
	struct pol_rec *p;
	int rc;

	if (r->built)
		return fail(err, errlen, REPORT_ESTATE, "policy added after the report was built");
	if (!cJSON_IsObject(policy))
		return fail(err, errlen, REPORT_EINVAL, "GPUMemoryPolicy: not an object");
	if (r->n_pols >= REPORT_POLICIES_MAX)
		return fail(err, errlen, REPORT_EFULL, "more than %d GPUMemoryPolicy objects",
		            REPORT_POLICIES_MAX);
	if (grow((void **)&r->pols, &r->cap_pols, r->n_pols, sizeof(*r->pols)) != 0)
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	p = &r->pols[r->n_pols];
	memset(p, 0, sizeof(*p));
	rc = gpupolicy_parse(policy, &p->p, why, sizeof(why));
	if (rc == GPUPOLICY_ENOMEM)
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	if (rc != 0 && why[0] == '\0')
		snprintf(why, sizeof(why), "not a usable GPUMemoryPolicy");
	p->name = dup_str(name != NULL && name[0] != '\0' ? name : "(unnamed)");
	p->error = dup_str(rc == 0 ? "" : why);
	if (p->name == NULL || p->error == NULL) {
		free(p->name);
		free(p->error);
		gpupolicy_free(p->p);
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	}
	r->n_pols++;
	return 0;
}

size_t report_policies(const struct report *r, size_t i, struct report_policy *out)
{
	if (out != NULL && i < r->n_pols) {
		const struct pol_rec *p = &r->pols[i];
		out->name = p->name;
		out->mode = p->p != NULL ? gpupolicy_mode_name(p->p->mode) : "";
		out->error = p->error;
	}
	return r->n_pols;
}

int report_add_pod(struct report *r, const cJSON *pod, char *err, size_t errlen)
{
	const char *ns = json_str(pod, "metadata", "namespace", NULL);
	const char *name = json_str(pod, "metadata", "name", NULL);
	const char *node = json_str(pod, "spec", "nodeName", NULL);
	const char *uid = json_str(pod, "metadata", "uid", NULL);
	struct demand d;
	struct pod_rec *p;

	if (r->built)
		return fail(err, errlen, REPORT_ESTATE, "pod added after the report was built");
	if (!cJSON_IsObject(pod))
		return fail(err, errlen, REPORT_EINVAL, "pod: not an object");
	if (node == NULL || node[0] == '\0' || pod_finished(pod))
		return 0;
	pod_demand(pod, &r->dcfg, &d);
	if (!placement_consumer(0, d.status, d.n_dra_figs))
		return 0;
	if (r->n_pods >= REPORT_MAX_PODS)
		return fail(err, errlen, REPORT_EFULL,
		            "more than %d GPU pods (DRA pods with figures included)",
		            REPORT_MAX_PODS);
	if (grow((void **)&r->pods, &r->cap_pods, r->n_pods, sizeof(*r->pods)) != 0)
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	p = &r->pods[r->n_pods];
	memset(p, 0, sizeof(*p));
	p->node = dup_str(node);
	p->uid = dup_str(uid);
	p->gpu_pod = d.status != DEMAND_NOT_GPU;
	placement_item_demand_figs(&p->item, &d, p->compact, p->figs);
	if (name != NULL && name[0] != '\0') {
		size_t len = strlen(ns ? ns : "") + strlen(name) + 2;
		if ((p->key = malloc(len)) != NULL)
			(void)pod_key_make(ns, name, p->key, len); /* fits: len is its size */
	} else {
		p->key =
		    dup_str(UNNAMED_POD); /* still holds memory: counted, as the webhook does */
	}
	if (d.status == DEMAND_OK) {
		p->bytes = d.bytes;
		p->source = d.source == DEMAND_SRC_NONE ? DEMAND_SRC_DECLARED : d.source;
		/* the words of its least declared GPU container (the pod's source), the first of
		 * them */
		for (size_t i = 0; i < d.n_parts; i++)
			if (d.parts[i].source == d.source) {
				snprintf(p->words, sizeof(p->words), "%s", d.parts[i].words);
				break;
			}
	} else if (d.status == DEMAND_INVALID) {
		p->problem = dup_str(d.error);
	}
	p->gpus = d.gpus;
	const char *pc = json_str(pod, "spec", "priorityClassName", NULL);
	int bad_pc = pc != NULL && pc[0] != '\0' && (p->priority_class = strdup(pc)) == NULL;
	if (p->node == NULL || p->uid == NULL || p->key == NULL ||
	    (d.status == DEMAND_INVALID && p->problem == NULL) || bad_pc ||
	    labelset_copy(&p->labels, json_at(pod, "metadata", "labels", NULL)) != 0) {
		free(p->node);
		free(p->uid);
		free(p->key);
		free(p->problem);
		free(p->priority_class);
		labelset_clear(&p->labels);
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	}
	r->n_pods++;
	return 0;
}

static const char *json_type(const cJSON *v)
{
	if (v == NULL)
		return "nothing";
	if (cJSON_IsObject(v))
		return "an object";
	if (cJSON_IsArray(v))
		return "an array";
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsNumber(v))
		return "a number";
	if (cJSON_IsBool(v))
		return "a boolean";
	return "null";
}

/* The items of a NodeList (as_node 1), PodList (0), GPUMemoryPolicyList (2) or List (-1: by
 * each item's kind). */
static int add_items(struct report *r, const cJSON *list, const char *kind, int as_node, char *err,
                     size_t errlen)
{
	const cJSON *items = json_at(list, "items", NULL);
	const cJSON *it;
	char why[REPORT_ERR_MAX];
	size_t i = 0;

	if (items == NULL)
		return fail(err, errlen, REPORT_EINVAL, "%s: no items", kind);
	if (!cJSON_IsArray(items))
		return fail(err, errlen, REPORT_EINVAL, "%s: items is %s, not an array", kind,
		            json_type(items));
	cJSON_ArrayForEach(it, items)
	{
		int node = as_node, rc;

		if (!cJSON_IsObject(it))
			return fail(err, errlen, REPORT_EINVAL, "%s: items[%zu]: %s, not an object",
			            kind, i, json_type(it));
		if (node < 0) {
			const char *k = json_str(it, "kind", NULL);
			if (k == NULL)
				return fail(err, errlen, REPORT_EINVAL, "%s: items[%zu]: no kind",
				            kind, i);
			node = strcmp(k, "Node") == 0           ? 1
			       : strcmp(k, "Pod") == 0          ? 0
			       : strcmp(k, GPUPOLICY_KIND) == 0 ? 2
			                                        : -1;
		}
		rc = node == 1   ? report_add_node(r, it, why, sizeof(why))
		     : node == 0 ? report_add_pod(r, it, why, sizeof(why))
		     : node == 2 ? report_add_policy(r, it, why, sizeof(why))
		                 : 0; /* another kind of a List: not ours */
		if (rc != 0)
			return fail(err, errlen, rc, "%s: items[%zu]: %s", kind, i, why);
		i++;
	}
	return 0;
}

int report_add_dra(struct report *r, const cJSON *obj, char *err, size_t errlen)
{
	const char *kind = json_str(obj, "kind", NULL);
	char why[DRA_MSG_MAX] = "";
	int rc;

	if (r->built)
		return fail(err, errlen, REPORT_ESTATE,
		            "DRA object added after the report was built");
	/* A list's items carry no kind: the slice decoder tells them by spec.driver. */
	if (kind != NULL && strcmp(kind, "ResourceClaim") == 0)
		rc = dra_store_apply_claim(r->dra, WATCH_ADDED, obj, why, sizeof(why));
	else if (kind != NULL && strcmp(kind, "ResourceSlice") == 0)
		rc = dra_store_apply_slice(r->dra, WATCH_ADDED, obj, why, sizeof(why));
	else
		rc = json_at(obj, "spec", "driver", NULL) != NULL
		         ? dra_store_apply_slice(r->dra, WATCH_ADDED, obj, why, sizeof(why))
		         : dra_store_apply_claim(r->dra, WATCH_ADDED, obj, why, sizeof(why));
	if (rc == DRA_STORE_EINVAL)
		return fail(err, errlen, REPORT_EINVAL, "%s", why);
	if (rc != 0)
		return fail(err, errlen, rc == DRA_STORE_EFULL ? REPORT_EFULL : REPORT_ENOMEM,
		            "DRA objects: %s",
		            rc == DRA_STORE_EFULL ? "too many" : "out of memory");
	return 0;
}

int report_add_list(struct report *r, const cJSON *list, char *err, size_t errlen)
{
	const char *kind = json_str(list, "kind", NULL);
	static const char expected[] = "expected a NodeList, PodList, GPUMemoryPolicyList, List, "
	                               "Node, Pod or GPUMemoryPolicy object";

	if (!cJSON_IsObject(list))
		return fail(err, errlen, REPORT_EINVAL, "%s, got %s", expected, json_type(list));
	if (kind == NULL)
		return fail(err, errlen, REPORT_EINVAL, "%s, got an object without kind", expected);
	if (strcmp(kind, "NodeList") == 0)
		return add_items(r, list, kind, 1, err, errlen);
	if (strcmp(kind, "PodList") == 0)
		return add_items(r, list, kind, 0, err, errlen);
	if (strcmp(kind, GPUPOLICY_KIND "List") == 0)
		return add_items(r, list, kind, 2, err, errlen);
	if (strcmp(kind, "List") == 0)
		return add_items(r, list, kind, -1, err, errlen);
	if (strcmp(kind, GPUPOLICY_KIND) == 0)
		return report_add_policy(r, list, err, errlen);
	if (strcmp(kind, "Node") == 0)
		return report_add_node(r, list, err, errlen);
	if (strcmp(kind, "Pod") == 0)
		return report_add_pod(r, list, err, errlen);
	return fail(err, errlen, REPORT_EINVAL, "%s, got kind \"%.64s\"", expected, kind);
}

static int node_cmp(const void *a, const void *b)
{
	return strcmp(((const struct node_rec *)a)->name, ((const struct node_rec *)b)->name);
}

static int pol_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pol_rec *)a)->name, ((const struct pol_rec *)b)->name);
}

static int pod_cmp(const void *a, const void *b)
{
	const struct pod_rec *x = a, *y = b;
	int c = strcmp(x->node, y->node);
	return c != 0 ? c : strcmp(x->key, y->key);
}

static int row_pod_cmp(const void *a, const void *b)
{
	const struct report_pod *x = a, *y = b;
	if (x->counted_bytes != y->counted_bytes)
		return x->counted_bytes > y->counted_bytes ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* The GPUMemoryPolicy objects that select one node (usable ones, name order). */
struct node_policies {
	const struct gpupolicy *sel[GPUPOLICY_SELECT_MAX];
	size_t n;
};

/* The webhook's flags, as the report knows them: --threshold, enforce. */
static struct gpupolicy_flags report_flags(const struct report *r)
{
	return (struct gpupolicy_flags){
	    .threshold = r->threshold, .warn_threshold = 0, .mode = POLICY_ENFORCE};
}

/* The probe pod's demand declaring bytes (core_probe_fn; ctx the report): 1, 0 when not a
 * declaration the webhook would take (under DEMAND_MIN_BYTES), -1 no memory. */
static int probe_demand(void *ctx, uint64_t bytes, struct demand *d)
{
	struct report *r = ctx;
	char v[24];

	snprintf(v, sizeof(v), "%" PRIu64, bytes);
	if (cJSON_SetValuestring(r->probe_value, v) == NULL)
		return -1;
	return demand_from_pod(r->probe, &r->dcfg, d) == 0 && d->status == DEMAND_OK;
}

static int is_gpu_node(const struct node_rec *n, size_t n_pods)
{
	return n->cap_rc == 0 || n->cap_rc == CAPACITY_EINVALID || n->gpu_allocatable || n_pods > 0;
}

/* A MIG-mixed row: its numbers are the whole GPUs' pool (the probe's), so the note tells each
 * profile's pool apart with what the core counts there (pods of that pool, and pods of several
 * pools, which count in every pool), lest the slices' pods vanish from the row. */
static void mig_note(const struct capacity *cap, const struct placement_item *items, size_t np,
                     struct report_row *row)
{
	size_t len = 0;

	len += (size_t)snprintf(row->note, sizeof(row->note),
	                        "MIG mixed: the numbers are the %" PRIu64
	                        " whole GPU(s)'; MIG slices apart:",
	                        cap->gpu_count);
	for (size_t k = 0; k < cap->n_profiles && len < sizeof(row->note); k++) {
		const struct capacity_profile *pr = &cap->profiles[k];
		uint32_t pool = capacity_pool_id(pr->name);
		uint64_t declared = 0;
		char each[32], sum[32];

		for (size_t i = 0; i < np; i++)
			if (capacity_pools_share(cap, items[i].pool, pool))
				declared = sat_add(declared, placement_item_bytes(&items[i], cap));
		quantity_format(pr->bytes, each, sizeof(each));
		quantity_format(declared, sum, sizeof(sum));
		len += (size_t)snprintf(row->note + len, sizeof(row->note) - len,
		                        "%s %s: %" PRIu64 " slices of %s, %s declared",
		                        k ? ";" : "", pr->name, pr->count, each, sum);
	}
}

/* The policies that apply to node n: gpupolicy_select(), the webhook's rule (r->pol_ps is in
 * name order). */
static void select_policies(const struct report *r, const struct node_rec *n,
                            struct node_policies *out)
{
	out->n = gpupolicy_select(r->pol_ps, r->n_pols, &n->labels.l, out->sel,
	                          sizeof(out->sel) / sizeof(out->sel[0]));
}

/* Fill row from node n and its consumers p[0..np) (rp: where the row's pods go, its GPU pods
 * only): the consumers as the webhook counts them, and the figures of one core_decide() for
 * the probe pod declaring DEMAND_MIN_BYTES (the probe is of no tier): threshold in force,
 * limit, declared, free, largest fit, the tiers. 0 or -1 (no memory). */
static int build_row(struct report *r, const struct node_rec *n, const struct pod_rec *p, size_t np,
                     struct report_pod *rp, struct report_row *row)
{
	struct placement_item *items = calloc(np ? np : 1, sizeof(*items));
	struct core_verdict *v = malloc(sizeof(*v));
	struct core_tier *tiers = NULL;
	struct node_policies pols;
	struct demand d;
	size_t n_tiers = 0;
	int rc = -1;

	memset(row, 0, sizeof(*row));
	if (items == NULL || v == NULL || probe_demand(r, DEMAND_MIN_BYTES, &d) <= 0)
		goto out;
	row->name = n->name;
	row->product = n->product;
	row->sharing = n->sharing;
	row->replicas = n->replicas;
	row->capacity_known = n->cap_rc == 0;
	select_policies(r, n, &pols);
	for (size_t i = 0; i < pols.n; i++)
		n_tiers += pols.sel[i]->n_tiers;
	if (n_tiers > 0 && (tiers = calloc(n_tiers, sizeof(*tiers))) == NULL)
		goto out;
	row->tiers = tiers; /* the row's: report_free frees it */
	row->n_policies = pols.n;
	row->pods = rp;
	for (size_t i = 0; i < np; i++) {
		items[i] = p[i].item;
		items[i].shares = p[i].item.n_shares > 0 ? p[i].compact : NULL;
		items[i].dra_figs = p[i].item.n_dra_figs > 0 ? p[i].figs : NULL;
		items[i].key = p[i].key;
		items[i].uid = p[i].uid[0] ? p[i].uid : NULL;
		items[i].priority_class = p[i].priority_class;
		items[i].labels = p[i].labels.l.n ? &p[i].labels.l : NULL;
		items[i].attrs_known = 1; /* as the webhook's visible pods */
		if (!p[i].gpu_pod)
			continue; /* its figures count in its claim's sum (the core's), not a row */
		struct report_pod *o = &rp[row->n_pods++];
		*o = (struct report_pod){
		    .key = p[i].key,
		    .uid = p[i].uid,
		    .gpus = p[i].gpus,
		    .declared = p[i].problem == NULL,
		    .declared_bytes = p[i].bytes,
		    .counted_bytes =
		        n->cap_rc == 0 ? placement_item_bytes(&items[i], &n->cap) : p[i].bytes,
		    .problem = p[i].problem ? p[i].problem : "",
		    .source = p[i].problem ? "invalid" : demand_source_name(p[i].source),
		    .source_words = p[i].words,
		};
		row->n_undeclared += p[i].problem != NULL;
		row->declared_bytes = sat_add(row->declared_bytes, o->counted_bytes);
	}
	qsort(rp, row->n_pods, sizeof(*rp), row_pod_cmp);

	struct placement_node pn = {.name = n->name,
	                            .cap = n->cap_rc == 0 ? &n->cap : NULL,
	                            .pods = items,
	                            .n_pods = np,
	                            .dra = n->dra ? &n->dra->node : NULL};
	struct placement_pod pp = {
	    .name = REPORT_PROBE_KEY, .key = REPORT_PROBE_KEY, .demand = &d, .dry_run = 1};
	struct core_input in = {
	    .node = &pn,
	    .pod = &pp,
	    .pod_namespace = NULL, /* of no tier: no namespace, priority class or labels */
	    .policies = pols.sel,
	    .n_policies = pols.n,
	    .flags = report_flags(r),
	    .infer = r->dcfg.infer,
	    .opts = CORE_NO_WORDS | CORE_LARGEST_FIT | CORE_TIERS,
	    .probe = probe_demand,
	    .probe_ctx = r,
	    .tiers = tiers,
	    .tiers_cap = n_tiers,
	    .now_ms = 0,
	};
	int crc = core_decide(&in, v);
	const struct policyset_threshold *tf = &v->ps.in_force; /* the flags are enforce here */

	if (crc == CORE_EPROBE)
		goto out;
	row->threshold = tf->threshold;
	row->threshold_source = tf->source;
	row->threshold_from_node = tf->from_node;
	row->threshold_from_policy = !tf->from_node && tf->policy != NULL;
	if (n->cap_rc != 0) {
		snprintf(row->note, sizeof(row->note), "%s", n->cap_err);
		rc = 0;
		goto out;
	}
	row->gpu_count = n->cap.gpu_count;
	row->per_gpu_bytes = n->cap.per_gpu_bytes;
	row->capacity_bytes = n->cap.total_bytes;
	if (n->cap.mig == CAPACITY_MIG_MIXED) {
		row->capacity_bytes = capacity_pool_bytes(&n->cap, CAPACITY_POOL_WHOLE);
		mig_note(&n->cap, items, np, row);
	}
	if (crc != 0) {
		row->capacity_known = 0;
		snprintf(row->note, sizeof(row->note), "%s", v->ps.main.decision.message);
		rc = 0;
		goto out;
	}
	row->limit_bytes = v->limit_bytes;
	row->declared_bytes = v->used_bytes; /* the core's sum: the webhook's number */
	row->free_bytes = v->free_bytes;
	row->largest_fit_bytes = v->largest_fit_bytes;
	row->n_tiers = v->n_tiers;
	rc = 0;
out:
	free(v);
	free(items);
	return rc;
}

int report_build(struct report *r, char *err, size_t errlen)
{
	size_t pi = 0;

	if (r->built)
		return fail(err, errlen, REPORT_ESTATE, "report already built");
	if (r->n_nodes > 1) /* qsort's base may not be NULL, even for 0 elements */
		qsort(r->nodes, r->n_nodes, sizeof(*r->nodes), node_cmp);
	if (r->n_pods > 1)
		qsort(r->pods, r->n_pods, sizeof(*r->pods), pod_cmp);
	for (size_t i = 1; i < r->n_nodes; i++)
		if (strcmp(r->nodes[i - 1].name, r->nodes[i].name) == 0)
			return fail(err, errlen, REPORT_EINVAL, "node %s listed twice",
			            r->nodes[i].name);
	/* Name order, each name once: what gpupolicy_select() is given (the policy store's). */
	if (r->n_pols > 1)
		qsort(r->pols, r->n_pols, sizeof(*r->pols), pol_cmp);
	for (size_t i = 1; i < r->n_pols; i++)
		if (strcmp(r->pols[i - 1].name, r->pols[i].name) == 0)
			return fail(err, errlen, REPORT_EINVAL, "GPUMemoryPolicy %s listed twice",
			            r->pols[i].name);
	free(r->pol_ps); /* a build that failed before may have made it */
	if ((r->pol_ps = calloc(r->n_pols ? r->n_pols : 1, sizeof(*r->pol_ps))) == NULL)
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	for (size_t i = 0; i < r->n_pols; i++)
		r->pol_ps[i] = r->pols[i].p;
	/* Each node's DRA GPUs and claims, and its capacity with them (capacity_add_dra), as
	 * the webhook's. */
	for (size_t i = 0; i < r->n_nodes; i++) {
		struct node_rec *n = &r->nodes[i];
		if (dra_store_view(r->dra, n->name, NULL, NULL, NULL, &n->dra) != 0)
			return fail(err, errlen, REPORT_ENOMEM, "out of memory");
		n->cap_rc = dra_view_capacity(n->dra, &n->cap, n->cap_rc, n->name, n->cap_err,
		                              sizeof(n->cap_err));
	}
	r->rows = calloc(r->n_nodes ? r->n_nodes : 1, sizeof(*r->rows));
	r->row_pods = calloc(r->n_pods ? r->n_pods : 1, sizeof(*r->row_pods));
	if (r->rows == NULL || r->row_pods == NULL)
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	size_t used = 0;
	for (size_t i = 0; i < r->n_nodes; i++) {
		const struct node_rec *n = &r->nodes[i];
		size_t start;

		size_t n_gpu_pods = 0;

		while (pi < r->n_pods && strcmp(r->pods[pi].node, n->name) < 0)
			pi++; /* pods of nodes not listed: nothing to count them against */
		start = pi;
		while (pi < r->n_pods && strcmp(r->pods[pi].node, n->name) == 0)
			n_gpu_pods += r->pods[pi++].gpu_pod;
		if (!is_gpu_node(n, n_gpu_pods))
			continue;
		if (build_row(r, n, &r->pods[start], pi - start, &r->row_pods[used],
		              &r->rows[r->n_rows]) != 0) {
			free((void *)r->rows[r->n_rows].tiers);
			r->rows[r->n_rows].tiers = NULL;
			return fail(err, errlen, REPORT_ENOMEM, "out of memory");
		}
		used += r->rows[r->n_rows].n_pods;
		r->n_rows++;
	}
	r->built = 1;
	return 0;
}

const struct report_row *report_rows(const struct report *r, size_t *n)
{
	*n = r->built ? r->n_rows : 0;
	return r->rows;
}

/* A growing text buffer; a failed append sets failed and stops. */
struct sb {
	char *buf;
	size_t len, cap;
	int failed;
};

static void sb_add(struct sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_add(struct sb *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->failed)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || s->len + (size_t)n + 1 > s->cap) {
		size_t ncap = s->cap ? s->cap : 1024;
		while (n >= 0 && s->len + (size_t)n + 1 > ncap)
			ncap *= 2;
		char *p = n < 0 ? NULL : realloc(s->buf, ncap);
		if (p == NULL) {
			s->failed = 1;
			return;
		}
		s->buf = p;
		s->cap = ncap;
	}
	va_start(ap, fmt);
	vsnprintf(s->buf + s->len, s->cap - s->len, fmt, ap);
	va_end(ap);
	s->len += (size_t)n;
}

#define MAX_COLS 16
#define CELL_MAX 256 /* a DNS subdomain name (253) fits whole */

static void cell(char *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void cell(char *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c, CELL_MAX, fmt, ap);
	va_end(ap);
}

static void cell_bytes(char *c, uint64_t b)
{
	quantity_format(b, c, CELL_MAX);
}

/* Print n_cols columns of rows (row 0 the header); the last column is not padded, and a
 * wide note after it (notes[i], may be NULL) is printed whole. */
static void table_print(struct sb *s, char (*cells)[MAX_COLS][CELL_MAX], size_t n_rows,
                        size_t n_cols, const char *const *notes)
{
	size_t width[MAX_COLS] = {0};

	for (size_t i = 0; i < n_rows; i++)
		for (size_t c = 0; c < n_cols; c++) {
			size_t l = strlen(cells[i][c]);
			if (l > width[c])
				width[c] = l;
		}
	for (size_t i = 0; i < n_rows; i++) {
		for (size_t c = 0; c < n_cols; c++) {
			int last = c + 1 == n_cols && notes == NULL;
			sb_add(s, "%-*s%s", last ? 0 : (int)width[c], cells[i][c],
			       last ? "" : "   ");
		}
		if (notes != NULL)
			sb_add(s, "%s", i == 0 ? "NOTE" : notes[i] && notes[i][0] ? notes[i] : "-");
		sb_add(s, "\n");
	}
}

static const char *dash(const char *s)
{
	return s != NULL && s[0] ? s : "-";
}

/* The tiers of a row: "realtime 40Gi/48Gi, batch 10Gi" (tier, declared, /budget when it has
 * one), "policy:tier ..." when several policies have tiers; "-" without. Cut with "..." at
 * CELL_MAX. */
static void tiers_cell(const struct report_row *w, char *c)
{
	size_t len = 0;
	int several = 0;

	for (size_t i = 1; i < w->n_tiers; i++)
		several |= strcmp(w->tiers[i].policy, w->tiers[0].policy) != 0;
	c[0] = '\0';
	for (size_t i = 0; i < w->n_tiers && len < CELL_MAX; i++) {
		const struct core_tier *t = &w->tiers[i];
		char d[32], b[32];
		int k;

		quantity_format(t->declared_bytes, d, sizeof(d));
		quantity_format(t->budget_bytes, b, sizeof(b));
		k = snprintf(c + len, CELL_MAX - len, "%s%s%s%s %s%s%s", i ? ", " : "",
		             several ? t->policy : "", several ? ":" : "", t->tier, d,
		             t->has_budget ? "/" : "", t->has_budget ? b : "");
		len += k > 0 ? (size_t)k : 0;
	}
	if (len >= CELL_MAX)
		memcpy(c + CELL_MAX - 4, "...", 4);
	if (w->n_tiers == 0)
		cell(c, "-");
}

/* One node's cells; wide adds MEMORY/GPU, REPLICAS, THRESHOLD, THRESHOLD SOURCE, UNDECLARED,
 * TIERS. */
static size_t node_cells(const struct report_row *w, int wide, char (*c)[CELL_MAX])
{
	size_t k = 0;
	int known = w->capacity_known;

	cell(c[k++], "%s", w->name);
	cell(c[k++], "%s", dash(w->product));
	if (known)
		cell(c[k++], "%" PRIu64, w->gpu_count);
	else
		cell(c[k++], "-");
	if (wide) {
		if (known)
			cell_bytes(c[k++], w->per_gpu_bytes);
		else
			cell(c[k++], "-");
	}
	cell(c[k++], "%s", w->sharing);
	if (wide)
		cell(c[k++], "%" PRIu64, w->replicas);
	if (known)
		cell_bytes(c[k++], w->capacity_bytes);
	else
		cell(c[k++], "unknown");
	if (wide) {
		cell(c[k++], "%g", w->threshold);
		cell(c[k++], "%s", dash(w->threshold_source));
	}
	if (known)
		cell_bytes(c[k++], w->limit_bytes);
	else
		cell(c[k++], "-");
	cell_bytes(c[k++], w->declared_bytes);
	if (known) {
		cell_bytes(c[k++], w->free_bytes);
		if (w->largest_fit_bytes > 0)
			cell_bytes(c[k++], w->largest_fit_bytes);
		else
			cell(c[k++], "none");
	} else {
		cell(c[k++], "-");
		cell(c[k++], "-");
	}
	cell(c[k++], "%zu", w->n_pods);
	if (wide) {
		cell(c[k++], "%zu", w->n_undeclared);
		tiers_cell(w, c[k++]);
	}
	return k;
}

static const char *const node_head[] = {"NODE",  "GPU",      "COUNT", "SHARING",     "CAPACITY",
                                        "LIMIT", "DECLARED", "FREE",  "LARGEST FIT", "PODS"};
static const char *const node_head_wide[] = {"NODE",        "GPU",       "COUNT",
                                             "MEMORY/GPU",  "SHARING",   "REPLICAS",
                                             "CAPACITY",    "THRESHOLD", "THRESHOLD SOURCE",
                                             "LIMIT",       "DECLARED",  "FREE",
                                             "LARGEST FIT", "PODS",      "UNDECLARED",
                                             "TIERS"};

static int render_nodes(const struct report_row *rows, size_t n, int wide, struct sb *s)
{
	char(*cells)[MAX_COLS][CELL_MAX] = calloc(n + 1, sizeof(*cells));
	const char **notes = wide ? calloc(n + 1, sizeof(*notes)) : NULL;
	const char *const *head = wide ? node_head_wide : node_head;
	size_t cols = wide ? sizeof(node_head_wide) / sizeof(node_head_wide[0])
	                   : sizeof(node_head) / sizeof(node_head[0]);

	if (cells == NULL || (wide && notes == NULL)) {
		free(cells);
		free(notes);
		return -1;
	}
	for (size_t c = 0; c < cols; c++)
		cell(cells[0][c], "%s", head[c]);
	for (size_t i = 0; i < n; i++) {
		node_cells(&rows[i], wide, cells[i + 1]);
		if (notes != NULL)
			notes[i + 1] = rows[i].note;
	}
	table_print(s, cells, n + 1, cols, notes);
	free(cells);
	free(notes);
	return 0;
}

/* The pods of one node, by counted bytes. */
static int render_pods(const struct report_row *w, int wide, struct sb *s)
{
	char(*cells)[MAX_COLS][CELL_MAX] = calloc(w->n_pods + 1, sizeof(*cells));
	const char **notes = wide ? calloc(w->n_pods + 1, sizeof(*notes)) : NULL;
	static const char *const head[] = {"NAMESPACE", "NAME",   "GPUS", "DECLARED",
	                                   "COUNTED",   "SOURCE", "UID"};
	size_t cols = wide ? 7 : 6;

	if (cells == NULL || (wide && notes == NULL)) {
		free(cells);
		free(notes);
		return -1;
	}
	for (size_t c = 0; c < cols; c++)
		cell(cells[0][c], "%s", head[c]);
	for (size_t i = 0; i < w->n_pods; i++) {
		const struct report_pod *p = &w->pods[i];
		char(*c)[CELL_MAX] = cells[i + 1], ns[CELL_MAX];
		const char *name = p->key;

		if (pod_key_split(p->key, ns, sizeof(ns), &name) == 0)
			cell(c[0], "%s", ns);
		else
			cell(c[0], "-");
		cell(c[1], "%s", name);
		cell(c[2], "%" PRIu64, p->gpus);
		if (p->declared && (p->declared_bytes > 0 || p->source == NULL ||
		                    strcmp(p->source, "declared") == 0))
			cell_bytes(c[3], p->declared_bytes);
		else
			cell(c[3], p->declared ? "-" : "none"); /* inferred: nothing in bytes */
		if (w->capacity_known || p->declared)
			cell_bytes(c[4], p->counted_bytes);
		else
			cell(c[4], "unknown");
		cell(c[5], "%s", p->source ? p->source : "-");
		if (wide) {
			cell(c[6], "%s", dash(p->uid));
			notes[i + 1] = p->problem[0] ? p->problem : p->source_words;
		}
	}
	table_print(s, cells, w->n_pods + 1, cols, notes);
	free(cells);
	free(notes);
	return 0;
}

/* An exact unsigned number: cJSON's numbers are doubles, exact only up to 2^53. */
static int add_u64(cJSON *o, const char *name, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return cJSON_AddRawToObject(o, name, buf) != NULL ? 0 : -1;
}

static cJSON *pod_json(const struct report_pod *p)
{
	cJSON *o = cJSON_CreateObject();
	const char *name = p->key;
	char ns[CELL_MAX];
	int bad = o == NULL;

	(void)pod_key_split(p->key, ns, sizeof(ns), &name); /* no '/': no namespace, the key */
	bad = bad || !cJSON_AddStringToObject(o, "namespace", ns) ||
	      !cJSON_AddStringToObject(o, "name", name) ||
	      !cJSON_AddStringToObject(o, "uid", p->uid) || add_u64(o, "gpus", p->gpus) != 0 ||
	      (p->declared ? add_u64(o, "declaredBytes", p->declared_bytes) != 0
	                   : !cJSON_AddNullToObject(o, "declaredBytes")) ||
	      add_u64(o, "countedBytes", p->counted_bytes) != 0 ||
	      !cJSON_AddStringToObject(o, "demandSource", p->source ? p->source : "") ||
	      (p->source_words && p->source_words[0] &&
	       !cJSON_AddStringToObject(o, "demandSourceWords", p->source_words)) ||
	      (!p->declared && !cJSON_AddStringToObject(o, "error", p->problem));
	if (bad) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* "tiers": [{"policy", "tier", "declaredBytes", "budgetBytes" (null without maxShare)}]. */
static int tiers_json(cJSON *o, const struct report_row *w)
{
	cJSON *arr = cJSON_AddArrayToObject(o, "tiers");

	if (arr == NULL)
		return -1;
	for (size_t i = 0; i < w->n_tiers; i++) {
		const struct core_tier *t = &w->tiers[i];
		cJSON *e = cJSON_CreateObject();
		int bad = e == NULL || !cJSON_AddItemToArray(arr, e);

		if (bad) {
			cJSON_Delete(e);
			return -1;
		}
		if (!cJSON_AddStringToObject(e, "policy", t->policy) ||
		    !cJSON_AddStringToObject(e, "tier", t->tier) ||
		    add_u64(e, "declaredBytes", t->declared_bytes) != 0 ||
		    (t->has_budget ? add_u64(e, "budgetBytes", t->budget_bytes) != 0
		                   : !cJSON_AddNullToObject(e, "budgetBytes")))
			return -1;
	}
	return 0;
}

static cJSON *row_json(const struct report_row *w, int with_pods)
{
	cJSON *o = cJSON_CreateObject(), *pods;
	int bad = o == NULL;

	bad = bad || !cJSON_AddStringToObject(o, "name", w->name) ||
	      !cJSON_AddStringToObject(o, "product", w->product) ||
	      !cJSON_AddStringToObject(o, "sharing", w->sharing) ||
	      add_u64(o, "replicas", w->replicas) != 0 ||
	      !cJSON_AddBoolToObject(o, "capacityKnown", w->capacity_known) ||
	      add_u64(o, "gpuCount", w->gpu_count) != 0 ||
	      add_u64(o, "gpuMemoryBytes", w->per_gpu_bytes) != 0 ||
	      add_u64(o, "capacityBytes", w->capacity_bytes) != 0 ||
	      !cJSON_AddNumberToObject(o, "threshold", w->threshold) ||
	      !cJSON_AddStringToObject(o, "thresholdSource",
	                               w->threshold_from_node     ? "node"
	                               : w->threshold_from_policy ? "policy"
	                                                          : "flag") ||
	      (w->threshold_from_policy
	           ? !cJSON_AddStringToObject(o, "thresholdPolicy", w->threshold_source)
	           : !cJSON_AddNullToObject(o, "thresholdPolicy")) ||
	      add_u64(o, "limitBytes", w->limit_bytes) != 0 ||
	      add_u64(o, "declaredBytes", w->declared_bytes) != 0 ||
	      add_u64(o, "freeBytes", w->free_bytes) != 0 ||
	      add_u64(o, "largestFitBytes", w->largest_fit_bytes) != 0 ||
	      add_u64(o, "podCount", w->n_pods) != 0 ||
	      add_u64(o, "undeclaredPodCount", w->n_undeclared) != 0 ||
	      (w->note[0] &&
	       !cJSON_AddStringToObject(o, w->capacity_known ? "note" : "error", w->note));
	if (!bad)
		bad = tiers_json(o, w) != 0;
	if (!bad && with_pods) {
		bad = (pods = cJSON_AddArrayToObject(o, "pods")) == NULL;
		for (size_t i = 0; !bad && i < w->n_pods; i++) {
			cJSON *p = pod_json(&w->pods[i]);
			bad = p == NULL || !cJSON_AddItemToArray(pods, p);
			if (bad)
				cJSON_Delete(p);
		}
	}
	if (bad) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static char *render_json(const struct report *r, const struct report_row *rows, size_t n,
                         int with_pods)
{
	cJSON *root = cJSON_CreateObject(), *arr, *pols;
	char *text = NULL;

	if (root == NULL || (arr = cJSON_AddArrayToObject(root, "nodes")) == NULL)
		goto out;
	for (size_t i = 0; i < n; i++) {
		cJSON *o = row_json(&rows[i], with_pods);
		if (o == NULL || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			goto out;
		}
	}
	/* Every policy read, an unusable one with its error (applied nowhere). */
	if ((pols = cJSON_AddArrayToObject(root, "policies")) == NULL)
		goto out;
	for (size_t i = 0; i < r->n_pols; i++) {
		const struct pol_rec *p = &r->pols[i];
		cJSON *o = cJSON_CreateObject();
		if (o == NULL || !cJSON_AddItemToArray(pols, o)) {
			cJSON_Delete(o);
			goto out;
		}
		if (!cJSON_AddStringToObject(o, "name", p->name) ||
		    !cJSON_AddBoolToObject(o, "usable", p->p != NULL) ||
		    (p->p != NULL
		         ? !cJSON_AddStringToObject(o, "mode", gpupolicy_mode_name(p->p->mode))
		         : !cJSON_AddStringToObject(o, "error", p->error)))
			goto out;
	}
	text = cJSON_Print(root);
out:
	cJSON_Delete(root);
	return text;
}

static const struct report_row *find_row(const struct report *r, const char *node)
{
	for (size_t i = 0; i < r->n_rows; i++)
		if (strcmp(r->rows[i].name, node) == 0)
			return &r->rows[i];
	return NULL;
}

static int known_node(const struct report *r, const char *node)
{
	for (size_t i = 0; i < r->n_nodes; i++)
		if (strcmp(r->nodes[i].name, node) == 0)
			return 1;
	return 0;
}

int report_render(const struct report *r, enum report_format fmt, const char *node, char **out,
                  char *err, size_t errlen)
{
	const struct report_row *rows = r->rows;
	size_t n = r->n_rows;
	struct sb s = {0};

	*out = NULL;
	if (!r->built)
		return fail(err, errlen, REPORT_ESTATE, "report not built");
	if (node != NULL) {
		if ((rows = find_row(r, node)) == NULL)
			return fail(err, errlen, REPORT_ENOTFOUND,
			            known_node(r, node)
			                ? "node %s has no GPUs (no GPU capacity, no GPU pods)"
			                : "node %s not found",
			            node);
		n = 1;
	}
	if (fmt == REPORT_JSON) {
		char *text = render_json(r, rows, n, node != NULL);
		if (text == NULL)
			return fail(err, errlen, REPORT_ENOMEM, "out of memory");
		/* cJSON_Print's buffer is the caller's to free() (the default hooks). */
		sb_add(&s, "%s\n", text);
		cJSON_free(text);
	} else if (n == 0) {
		sb_add(&s, "No GPU nodes found.\n");
	} else if (render_nodes(rows, n, fmt == REPORT_WIDE, &s) != 0) {
		s.failed = 1;
	} else if (node != NULL) {
		sb_add(&s, "\n");
		if (rows->n_pods == 0)
			sb_add(&s, "No GPU pods on %s.\n", node);
		else if (render_pods(rows, fmt == REPORT_WIDE, &s) != 0)
			s.failed = 1;
	}
	if (s.failed || s.buf == NULL) {
		free(s.buf);
		return fail(err, errlen, REPORT_ENOMEM, "out of memory");
	}
	*out = s.buf;
	return 0;
}
