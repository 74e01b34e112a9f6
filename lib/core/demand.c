/*
 * demand: a pod's declared GPU memory and GPU count, by the effective-request rule.
 */
#include "demand.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "capacity.h"
#include "jsonpath.h"
#include "quantity.h"
#include "satmath.h"

static const char *const default_resources[] = {"nvidia.com/gpu"};

#define MIG_PER_CONTAINER 4 /* MIG profiles one container may ask for */

/* What one container contributes. */
struct container_info {
	char name[DEMAND_NAME_MAX + 1];
	const char *resource; /* first configured GPU resource it asks for (borrowed) */
	uint64_t gpus;        /* all units: whole GPUs and MIG slices */
	uint64_t whole;       /* of which whole GPUs (configured names) */
	struct {
		const char *profile; /* after DEMAND_MIG_PREFIX (borrowed) */
		uint64_t n;
	} mig[MIG_PER_CONTAINER];
	size_t n_mig;
	uint64_t bytes; /* valid declaration on a GPU container, else 0 */
	int sidecar;    /* init container with restartPolicy Always */
};

/* Running sums for the effective-request rule, kept for bytes and GPUs alike. */
struct rule_acc {
	uint64_t sidecars; /* restartable init containers seen so far */
	uint64_t init_max; /* max over init containers of (init_i + sidecars before i) */
	uint64_t apps;     /* sum over app containers */
};

static void set_msg(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_msg(char *buf, const char *fmt, ...)
{
	va_list ap;

	if (buf == NULL) /* a later problem: only the first one is reported */
		return;
	va_start(ap, fmt);
	if (vsnprintf(buf, DEMAND_MSG_MAX, fmt, ap) < 0)
		buf[0] = '\0';
	va_end(ap);
}

static void rule_add(struct rule_acc *acc, uint64_t v, int init, int sidecar)
{
	if (!init) {
		acc->apps = sat_add(acc->apps, v);
	} else if (sidecar) {
		acc->sidecars = sat_add(acc->sidecars, v);
	} else {
		uint64_t here = sat_add(v, acc->sidecars);

		if (here > acc->init_max)
			acc->init_max = here;
	}
}

static uint64_t rule_result(const struct rule_acc *acc)
{
	uint64_t running = sat_add(acc->apps, acc->sidecars);

	return running > acc->init_max ? running : acc->init_max;
}

int demand_parse_count(const cJSON *v, uint64_t *out)
{
	uint64_t n = 0;
	const char *s;

	if (cJSON_IsNumber(v)) {
		/* cJSON numbers are doubles: range-check before converting. */
		double d = v->valuedouble;

		if (!(d >= 0 && d <= (double)DEMAND_MAX_GPUS) || (double)(uint64_t)d != d)
			return -1;
		*out = (uint64_t)d;
		return 0;
	}
	if (!cJSON_IsString(v) || v->valuestring == NULL || v->valuestring[0] == '\0')
		return -1;
	s = v->valuestring;
	/* Whole numbers only: no fraction, no milli/micro/nano, no sign, no negative exponent
	 * (quantity_parse would round "1.5" up to 2). */
	if (strpbrk(s, ".mun+-") != NULL || quantity_parse_str(s, &n, NULL, 0) != 0 ||
	    n > DEMAND_MAX_GPUS)
		return -1;
	*out = n;
	return 0;
}

/* GPUs asked for by a resources.limits or .requests object, summed over configured names, and
 * MIG slices (nvidia.com/mig-<profile>) per profile. */
static int count_gpus(const cJSON *list, const char *const *names, size_t n_names,
                      struct container_info *ci, char *err)
{
	size_t plen = strlen(DEMAND_MIG_PREFIX);
	uint64_t total = 0;
	const cJSON *v;

	ci->n_mig = 0;
	for (size_t i = 0; i < n_names; i++) {
		uint64_t n = 0;

		v = json_at(list, names[i], NULL);
		if (v == NULL)
			continue;
		if (demand_parse_count(v, &n) != 0) {
			set_msg(err,
			        "container \"%s\": %s must be a whole number of GPUs, e.g. \"1\"",
			        ci->name, names[i]);
			return -1;
		}
		if (n > 0 && ci->resource == NULL)
			ci->resource = names[i];
		total = sat_add(total, n);
	}
	ci->whole = total;
	if (cJSON_IsObject(list)) {
		cJSON_ArrayForEach(v, list)
		{
			uint64_t n = 0;

			if (v->string == NULL || strncmp(v->string, DEMAND_MIG_PREFIX, plen) != 0)
				continue;
			if (demand_parse_count(v, &n) != 0 ||
			    strlen(v->string) - plen >= DEMAND_PROFILE_MAX) {
				set_msg(
				    err,
				    "container \"%s\": %.64s must be a whole number of MIG slices, "
				    "e.g. \"1\"",
				    ci->name, v->string);
				return -1;
			}
			if (n == 0)
				continue;
			if (ci->n_mig == MIG_PER_CONTAINER) {
				set_msg(err, "container \"%s\" asks for more than %d MIG profiles",
				        ci->name, MIG_PER_CONTAINER);
				return -1;
			}
			if (ci->resource == NULL)
				ci->resource = v->string;
			ci->mig[ci->n_mig].profile = v->string + plen;
			ci->mig[ci->n_mig++].n = n;
			total = sat_add(total, n);
		}
	}
	if (total > DEMAND_MAX_GPUS) {
		set_msg(err, "container \"%s\" asks for more than %llu GPUs", ci->name,
		        (unsigned long long)DEMAND_MAX_GPUS);
		return -1;
	}
	ci->gpus = total;
	return 0;
}

/* The resources of one container: limits win, requests only when limits name no GPU. */
static int container_gpus(const cJSON *c, const char *const *names, size_t n_names,
                          struct container_info *ci, char *err)
{
	const cJSON *limits = json_at(c, "resources", "limits", NULL);
	const cJSON *requests = json_at(c, "resources", "requests", NULL);

	if (count_gpus(limits, names, n_names, ci, err) != 0)
		return -1;
	if (ci->gpus == 0 && count_gpus(requests, names, n_names, ci, err) != 0)
		return -1;
	return 0;
}

/* The last env entry named GPU_MEMORY_LIMIT (the kubelet lets the last duplicate win). */
static const cJSON *find_decl(const cJSON *c)
{
	const cJSON *env = json_at(c, "env", NULL);
	const cJSON *e, *found = NULL;

	if (!cJSON_IsArray(env))
		return NULL;
	cJSON_ArrayForEach(e, env)
	{
		const cJSON *name = json_at(e, "name", NULL);

		if (cJSON_IsString(name) && name->valuestring &&
		    strcmp(name->valuestring, DEMAND_ENV_NAME) == 0)
			found = e;
	}
	return found;
}

/*
 * Check the declaration of a GPU container. Returns 0 with ci->bytes set, or -1 with err
 * naming the container and the expected form.
 */
static int parse_decl(const cJSON *decl, struct container_info *ci, char *err)
{
	const cJSON *value = json_at(decl, "value", NULL);
	char qerr[128];
	uint64_t bytes = 0;
	int rc;

	if (decl == NULL) {
		set_msg(err,
		        "container \"%s\" asks for %llu %s but declares no " DEMAND_ENV_NAME
		        ": add env " DEMAND_ENV_NAME " with the GPU memory it needs, e.g. \"24Gi\"",
		        ci->name, (unsigned long long)ci->gpus, ci->resource);
		return -1;
	}
	if (json_at(decl, "valueFrom", NULL) != NULL) {
		set_msg(err,
		        "container \"%s\": " DEMAND_ENV_NAME " uses valueFrom, which the webhook "
		        "cannot read: set a literal value with the GPU memory it needs, e.g. "
		        "\"24Gi\"",
		        ci->name);
		return -1;
	}
	if (!cJSON_IsString(value) || value->valuestring == NULL || value->valuestring[0] == 0) {
		set_msg(err,
		        "container \"%s\": " DEMAND_ENV_NAME " is empty: set the GPU memory it "
		        "needs, e.g. \"24Gi\"",
		        ci->name);
		return -1;
	}
	rc = quantity_parse_str(value->valuestring, &bytes, qerr, sizeof(qerr));
	if (rc == QUANTITY_ENEGATIVE) {
		set_msg(err,
		        "container \"%s\": " DEMAND_ENV_NAME " \"%.64s\" is negative: set the GPU "
		        "memory it needs, e.g. \"24Gi\"",
		        ci->name, value->valuestring);
		return -1;
	}
	if (rc != 0) {
		set_msg(err,
		        "container \"%s\": " DEMAND_ENV_NAME " \"%.64s\" is not a Kubernetes "
		        "quantity (%s): write it like \"24Gi\", \"24G\" or \"25769803776\"",
		        ci->name, value->valuestring, qerr);
		return -1;
	}
	if (bytes < DEMAND_MIN_BYTES) {
		/* "24" almost always meant "24Gi": suggest exactly that when the value is a
		 * bare number. */
		int bare = strspn(value->valuestring, "0123456789") == strlen(value->valuestring) &&
		           strlen(value->valuestring) <= 6;

		set_msg(err,
		        "container \"%s\": " DEMAND_ENV_NAME " \"%.64s\" is %llu bytes, under 1Mi, "
		        "which looks like a unit mistake: write the unit, e.g. \"%s%s\"",
		        ci->name, value->valuestring, (unsigned long long)bytes,
		        bare ? value->valuestring : "24", "Gi");
		return -1;
	}
	ci->bytes = bytes;
	return 0;
}

/* A container's display name: its name, else its place in the spec. */
static void container_name(const cJSON *c, int init, int idx, char *buf)
{
	const cJSON *name = json_at(c, "name", NULL);

	if (cJSON_IsString(name) && name->valuestring && name->valuestring[0])
		snprintf(buf, DEMAND_NAME_MAX + 1, "%.*s", DEMAND_NAME_MAX, name->valuestring);
	else
		snprintf(buf, DEMAND_NAME_MAX + 1, "%s[%d]", init ? "initContainers" : "containers",
		         idx);
}

struct walk {
	const char *const *names;
	size_t n_names;
	int pools; /* a pool seen yet */
	struct rule_acc bytes_acc, gpus_acc;
	struct demand *out;
};

/* One GPU container's ask of one pool; past DEMAND_MAX_USES folded into the last use as one
 * unit holding the largest declaration (all of it on one piece: the most it could put). */
static void add_use(struct demand *out, const struct container_info *ci, const char *profile,
                    uint64_t gpus)
{
	struct demand_use *u;

	if (out->n_uses == DEMAND_MAX_USES) {
		u = &out->uses[DEMAND_MAX_USES - 1];
		if (ci->bytes > u->bytes) {
			u->bytes = ci->bytes;
			snprintf(u->container, sizeof(u->container), "%.63s", ci->name);
		}
		u->gpus = 1;
		if (strcmp(u->profile, profile ? profile : "") != 0) /* the smallest piece */
			snprintf(u->profile, sizeof(u->profile), "%s", DEMAND_PROFILE_FOLDED);
		return;
	}
	u = &out->uses[out->n_uses++];
	u->bytes = ci->bytes;
	u->gpus = gpus;
	snprintf(u->profile, sizeof(u->profile), "%s", profile ? profile : "");
	snprintf(u->container, sizeof(u->container), "%.63s", ci->name);
}

/* The pod's pool: the one all its GPU containers ask, else CAPACITY_POOL_ANY. */
static void add_pool(struct walk *w, const struct container_info *ci)
{
	for (size_t i = 0; i < ci->n_mig + (ci->whole > 0); i++) {
		uint32_t p =
		    i < ci->n_mig ? capacity_pool_id(ci->mig[i].profile) : CAPACITY_POOL_WHOLE;

		if (!w->pools)
			w->out->pool = p;
		else if (w->out->pool != p)
			w->out->pool = CAPACITY_POOL_ANY;
		w->pools = 1;
	}
}

/* Account one container: GPUs, declaration, warnings, per-GPU share. */
static void visit(struct walk *w, const cJSON *c, int init, int idx)
{
	struct container_info ci;
	struct demand *out = w->out;
	const cJSON *policy = json_at(c, "restartPolicy", NULL);
	const cJSON *decl = find_decl(c);
	int first_error = out->status != DEMAND_INVALID;

	memset(&ci, 0, sizeof(ci));
	container_name(c, init, idx, ci.name);
	ci.sidecar = init && cJSON_IsString(policy) && policy->valuestring &&
	             strcmp(policy->valuestring, "Always") == 0;

	/* Only the first problem is reported: the user fixes one thing at a time. */
	if (container_gpus(c, w->names, w->n_names, &ci, first_error ? out->error : NULL) != 0 ||
	    (ci.gpus > 0 && parse_decl(decl, &ci, first_error ? out->error : NULL) != 0)) {
		out->status = DEMAND_INVALID;
	} else if (ci.gpus > 0) {
		uint64_t share = ci.bytes / ci.gpus + (ci.bytes % ci.gpus != 0);

		if (out->status == DEMAND_NOT_GPU)
			out->status = DEMAND_OK;
		if (share > out->max_per_gpu_bytes) {
			out->max_per_gpu_bytes = share;
			memcpy(out->max_per_gpu_container, ci.name, sizeof(ci.name));
		}
		if (ci.whole > 0)
			add_use(out, &ci, NULL, ci.whole);
		for (size_t i = 0; i < ci.n_mig; i++)
			add_use(out, &ci, ci.mig[i].profile, ci.mig[i].n);
	}
	if (ci.gpus > 0)
		add_pool(w, &ci);
	else if (decl != NULL && out->warning[0] == '\0') {
		set_msg(out->warning,
		        "container \"%s\" declares " DEMAND_ENV_NAME " but asks for no %s: the "
		        "declaration is ignored",
		        ci.name, w->names[0]);
	}
	rule_add(&w->bytes_acc, ci.bytes, init, ci.sidecar);
	rule_add(&w->gpus_acc, ci.gpus, init, ci.sidecar);
}

int demand_from_pod(const cJSON *pod, const struct demand_config *cfg, struct demand *out)
{
	const cJSON *inits = json_at(pod, "spec", "initContainers", NULL);
	const cJSON *apps = json_at(pod, "spec", "containers", NULL);
	struct walk w = {.names = default_resources, .n_names = 1, .out = out};
	const cJSON *c;
	int idx, rc = 0;

	memset(out, 0, sizeof(*out));
	if (cfg != NULL && cfg->gpu_resources != NULL && cfg->n_gpu_resources > 0) {
		w.names = cfg->gpu_resources;
		w.n_names = cfg->n_gpu_resources < DEMAND_MAX_RESOURCES ? cfg->n_gpu_resources
		                                                        : DEMAND_MAX_RESOURCES;
	}
	if (!cJSON_IsObject(pod)) {
		out->status = DEMAND_INVALID;
		set_msg(out->error, "the pod is not a JSON object");
		rc = -1;
		goto out;
	}
	/* A non-array is ignored by cJSON_GetArraySize (0) and by the loops below. */
	if ((cJSON_IsArray(inits) ? cJSON_GetArraySize(inits) : 0) +
	        (cJSON_IsArray(apps) ? cJSON_GetArraySize(apps) : 0) >
	    DEMAND_MAX_CONTAINERS) {
		out->status = DEMAND_INVALID;
		set_msg(out->error, "the pod has more than %d containers", DEMAND_MAX_CONTAINERS);
		rc = -1;
		goto out;
	}
	/* Init containers in order: a sidecar counts only for the init containers after it. */
	idx = 0;
	if (cJSON_IsArray(inits)) {
		cJSON_ArrayForEach(c, inits)
		{
			visit(&w, c, 1, idx++);
		}
	}
	idx = 0;
	if (cJSON_IsArray(apps)) {
		cJSON_ArrayForEach(c, apps)
		{
			visit(&w, c, 0, idx++);
		}
	}

	out->gpus = rule_result(&w.gpus_acc);
	if (out->status == DEMAND_OK)
		out->bytes = rule_result(&w.bytes_acc);
out:
	return rc;
}
