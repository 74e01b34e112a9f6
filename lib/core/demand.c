/*
 * demand: a pod's declared GPU memory and GPU count, by the effective-request rule.
 */
#include "demand.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "capacity.h"
#include "engine.h"
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
	uint64_t bytes;                 /* valid declaration on a GPU container, else 0 */
	int sidecar;                    /* init container with restartPolicy Always */
	const cJSON *limits, *requests; /* the resources the GPUs were counted from */
	int part;                       /* its parts[] index under infer, else 0 */
	uint64_t dra_units;             /* units its KEP-5004 claim serves (not in gpus) */
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

/* Whether the pod's KEP-5004 claim serves resource of container (status
 * .extendedResourceClaimStatus.requestMappings, borrowed, may be NULL). */
static int claim_serves(const cJSON *mappings, const char *container, const char *resource)
{
	const cJSON *m;

	cJSON_ArrayForEach(m, mappings)
	{
		const char *c = json_str(m, "containerName", NULL);
		const char *r = json_str(m, "resourceName", NULL);

		if (c != NULL && r != NULL && strcmp(c, container) == 0 && strcmp(r, resource) == 0)
			return 1;
	}
	return 0;
}

/* GPUs asked for by a resources.limits or .requests object, summed over configured names, and
 * MIG slices (nvidia.com/mig-<profile>) per profile. Units the pod's KEP-5004 claim serves
 * (mappings) go to ci->dra_units instead. */
static int count_gpus(const cJSON *list, const char *const *names, size_t n_names,
                      const cJSON *mappings, struct container_info *ci, char *err)
{
	size_t plen = strlen(DEMAND_MIG_PREFIX);
	uint64_t total = 0;
	const cJSON *v;

	ci->n_mig = 0;
	ci->dra_units = 0;
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
		if (n > 0 && claim_serves(mappings, ci->name, names[i])) {
			ci->dra_units = sat_add(ci->dra_units, n);
			continue;
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
			if (claim_serves(mappings, ci->name, v->string)) {
				ci->dra_units = sat_add(ci->dra_units, n);
				continue;
			}
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
                          const cJSON *mappings, struct container_info *ci, char *err)
{
	const cJSON *limits = json_at(c, "resources", "limits", NULL);
	const cJSON *requests = json_at(c, "resources", "requests", NULL);

	if (count_gpus(limits, names, n_names, mappings, ci, err) != 0)
		return -1;
	ci->limits = limits;
	if (ci->gpus == 0 && ci->dra_units == 0 &&
	    count_gpus(requests, names, n_names, mappings, ci, err) != 0)
		return -1;
	ci->requests = requests;
	return 0;
}

/* The last env entry named name (the kubelet lets the last duplicate win). */
static const cJSON *find_env(const cJSON *c, const char *want)
{
	const cJSON *env = json_at(c, "env", NULL);
	const cJSON *e, *found = NULL;

	if (!cJSON_IsArray(env))
		return NULL;
	cJSON_ArrayForEach(e, env)
	{
		const cJSON *name = json_at(e, "name", NULL);

		if (cJSON_IsString(name) && name->valuestring &&
		    strcmp(name->valuestring, want) == 0)
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
	const struct demand_config *cfg;
	const cJSON *annotations; /* the pod's, for KAI's */
	const cJSON *mappings;    /* status.extendedResourceClaimStatus.requestMappings, or NULL */
	int pools;                /* a pool seen yet */
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
	u->part = (uint8_t)ci->part;
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

#define MIB (1024ull * 1024ull)

/* A resource quantity of limits, else requests, as a whole count (HAMi's gpumem). 1 found, 0
 * absent, -1 malformed. */
static int resource_count(const struct container_info *ci, const char *name, uint64_t *out)
{
	const cJSON *v = json_at(ci->limits, name, NULL);

	if (v == NULL)
		v = json_at(ci->requests, name, NULL);
	if (v == NULL)
		return 0;
	return demand_parse_count(v, out) == 0 ? 1 : -1;
}

/* HAMi-core's CUDA_DEVICE_MEMORY_LIMIT: digits with an optional k/m/g (binary, either case).
 * 0 or -1. */
static int parse_hami_limit(const char *s, uint64_t *out)
{
	uint64_t v = 0, mul = 1;
	size_t n = strspn(s, "0123456789");

	if (n == 0 || n > 15)
		return -1;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (uint64_t)(s[i] - '0');
	switch (s[n]) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mul = 1024;
		break;
	case 'm':
	case 'M':
		mul = MIB;
		break;
	case 'g':
	case 'G':
		mul = 1024 * MIB;
		break;
	default:
		return -1;
	}
	if ((s[n] != '\0' && s[n + 1] != '\0') || v > UINT64_MAX / mul)
		return -1; /* past 2^64 bytes: v * mul would wrap to a small figure */
	*out = v * mul;
	return *out >= DEMAND_MIN_BYTES ? 0 : -1;
}

/* A KAI annotation of the pod, a string, or NULL. */
static const char *annotation(const struct walk *w, const char *name)
{
	const cJSON *v = json_at(w->annotations, name, NULL);

	return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

/* Another system's declaration (HAMi, KAI): 1 found (part filled), 0 none, -1 err set. */
static int other_system(const struct walk *w, const cJSON *c, struct container_info *ci,
                        struct demand_part *p, char *err)
{
	uint64_t v = 0;
	const char *a;
	const cJSON *e;
	int rc;

	if ((rc = resource_count(ci, DEMAND_RES_HAMI_MEM, &v)) != 0) {
		if (rc < 0 || v == 0 || v > (UINT64_MAX / MIB) / (ci->gpus ? ci->gpus : 1))
			goto bad_gpumem;
		p->bytes = v * MIB * ci->gpus;
		p->source = DEMAND_SRC_HAMI;
		snprintf(p->words, sizeof(p->words), DEMAND_RES_HAMI_MEM " %lluMi per GPU",
		         (unsigned long long)v);
		return 1;
	}
	if ((rc = resource_count(ci, DEMAND_RES_HAMI_PCT, &v)) != 0) {
		if (rc < 0 || v == 0 || v > 100) {
			set_msg(err,
			        "container \"%s\": " DEMAND_RES_HAMI_PCT " must be a whole percent "
			        "1..100 of each GPU's memory, e.g. \"50\"",
			        ci->name);
			return -1;
		}
		p->ppm = (uint32_t)v * (QUANTITY_PPM / 100); /* a whole percent */
		p->source = DEMAND_SRC_HAMI;
		snprintf(p->words, sizeof(p->words), DEMAND_RES_HAMI_PCT " %llu%%",
		         (unsigned long long)v);
		return 1;
	}
	e = find_env(c, DEMAND_ENV_HAMI);
	if (e != NULL) {
		const cJSON *value = json_at(e, "value", NULL);

		if (!cJSON_IsString(value) || value->valuestring == NULL ||
		    parse_hami_limit(value->valuestring, &v) != 0 ||
		    v > UINT64_MAX / (ci->gpus ? ci->gpus : 1)) {
			set_msg(
			    err,
			    "container \"%s\": " DEMAND_ENV_HAMI " \"%.32s\" is not HAMi-core's "
			    "per-GPU limit of at least 1m (a literal value such as \"4096m\" or "
			    "\"16g\")",
			    ci->name,
			    cJSON_IsString(value) && value->valuestring ? value->valuestring : "");
			return -1;
		}
		p->bytes = v * ci->gpus;
		p->source = DEMAND_SRC_HAMI;
		snprintf(p->words, sizeof(p->words), DEMAND_ENV_HAMI " %.32s per GPU",
		         value->valuestring);
		return 1;
	}
	if ((a = annotation(w, DEMAND_ANN_KAI_MEMORY)) != NULL) {
		cJSON tmp = {.type = cJSON_String, .valuestring = (char *)a};

		if (demand_parse_count(&tmp, &v) != 0 || v == 0 || strpbrk(a, "kMGTPEi") != NULL ||
		    v > (UINT64_MAX / MIB) / (ci->gpus ? ci->gpus : 1)) {
			set_msg(err,
			        "pod annotation " DEMAND_ANN_KAI_MEMORY
			        " \"%.32s\" (KAI, for container "
			        "\"%s\") is not a whole number of MiB, e.g. \"20480\"",
			        a, ci->name);
			return -1;
		}
		p->bytes = v * MIB * ci->gpus;
		p->source = DEMAND_SRC_KAI;
		snprintf(p->words, sizeof(p->words), "KAI " DEMAND_ANN_KAI_MEMORY " %sMi per GPU",
		         a);
		return 1;
	}
	if ((a = annotation(w, DEMAND_ANN_KAI_FRACTION)) != NULL) {
		double r = 0;

		if (capacity_parse_ratio(a, &r) != 0) {
			set_msg(
			    err,
			    "pod annotation " DEMAND_ANN_KAI_FRACTION " \"%.32s\" (KAI, for "
			    "container \"%s\") is not a ratio 0 < r <= 1 of one GPU, e.g. \"0.5\"",
			    a, ci->name);
			return -1;
		}
		p->ppm = quantity_ratio_ppm(r);
		p->source = DEMAND_SRC_KAI;
		snprintf(p->words, sizeof(p->words), "KAI " DEMAND_ANN_KAI_FRACTION " %.16s", a);
		return 1;
	}
	return 0;
bad_gpumem:
	set_msg(err,
	        "container \"%s\": " DEMAND_RES_HAMI_MEM " must be a whole number of MiB per GPU, "
	        "e.g. \"20480\"",
	        ci->name);
	return -1;
}

#define ARGV_MAX ENGINE_WORDS_MAX

/* The strings of a JSON array into v (non-strings as ""), at most cap; the count, or cap + 1
 * when longer. */
static size_t strings(const cJSON *a, const char **v, size_t cap)
{
	const cJSON *e;
	size_t n = 0;

	if (!cJSON_IsArray(a))
		return 0;
	cJSON_ArrayForEach(e, a)
	{
		if (n == cap)
			return cap + 1;
		v[n++] = cJSON_IsString(e) && e->valuestring ? e->valuestring : "";
	}
	return n;
}

/* The engine of container c: 1 found or unreadable (part filled as the engine's), 0 none, -1
 * err set. */
static int engine_source(const struct walk *w, const cJSON *c, const struct container_info *ci,
                         struct demand_part *p, char *err)
{
	const char *argv[2 * ARGV_MAX];
	const cJSON *image = json_at(c, "image", NULL);
	const cJSON *tgi = json_at(find_env(c, "CUDA_MEMORY_FRACTION"), "value", NULL);
	struct engine_input in = {.container = ci->name};
	struct engine_setting es;
	char why[DEMAND_MSG_MAX];
	size_t nc = strings(json_at(c, "command", NULL), argv, ARGV_MAX);
	size_t na = strings(json_at(c, "args", NULL), argv + ARGV_MAX, ARGV_MAX);

	in.command = argv;
	in.n_command = nc;
	in.args = argv + ARGV_MAX;
	in.n_args = na;
	in.image = cJSON_IsString(image) ? image->valuestring : NULL;
	in.env_tgi_fraction = cJSON_IsString(tgi) ? tgi->valuestring : NULL;
	if (engine_read(&in, w->cfg->engines, &es, why, sizeof(why)) != 0) {
		set_msg(err, "%s", why);
		return -1;
	}
	if (es.status == ENGINE_NOT_FOUND)
		return 0;
	if (es.status == ENGINE_UNREADABLE) {
		if (p->source != DEMAND_SRC_NONE) {
			/* beside a declaration: the engine takes what its unknown flags say, up
			 * to the whole of its GPUs, whatever the declaration says */
			p->ppm = QUANTITY_PPM;
			snprintf(p->engine_words, sizeof(p->engine_words),
			         "an engine with unreadable flags (%.188s)", es.words);
			return 1;
		}
		p->ppm = QUANTITY_PPM;
		p->source = DEMAND_SRC_WHOLE;
		snprintf(p->words, sizeof(p->words), "the whole of its GPUs (%s)", es.words);
		return 0;
	}
	p->ppm = es.ratio_ppm;
	snprintf(p->engine_words, sizeof(p->engine_words), "%s", es.words);
	return 1;
}

/* The sources of one GPU container under infer, in order (demand.h); fills a part. */
static int infer_part(struct walk *w, const cJSON *c, const cJSON *decl, int init,
                      struct container_info *ci, char *err)
{
	struct demand *out = w->out;
	struct demand_part p;
	int rc;

	memset(&p, 0, sizeof(p));
	if (out->n_parts == DEMAND_MAX_PARTS) {
		set_msg(err, "the pod has more than %d GPU containers", DEMAND_MAX_PARTS);
		return -1;
	}
	if (decl != NULL) {
		if (parse_decl(decl, ci, err) != 0)
			return -1;
		p.bytes = ci->bytes;
		p.source = DEMAND_SRC_DECLARED;
		snprintf(p.words, sizeof(p.words), DEMAND_ENV_NAME " %.32s",
		         json_at(decl, "value", NULL)->valuestring);
	} else if ((rc = other_system(w, c, ci, &p, err)) < 0) {
		return -1;
	}
	uint32_t share = p.ppm;
	if ((rc = engine_source(w, c, ci, &p, err)) < 0)
		return -1;
	if (rc == 1 && p.source == DEMAND_SRC_NONE) {
		p.source = DEMAND_SRC_ENGINE;
		snprintf(p.words, sizeof(p.words), "%s", p.engine_words);
		p.engine_words[0] = '\0';
	} else if (rc == 1) {
		/* A declaration and the engine: the larger counts on each node. A share declared
		 * (HAMi, KAI) and the engine's: the larger share. */
		if (share != 0 && p.ppm > share) {
			/* the engine's share counts: say so, and name both */
			if (out->warning[0] == '\0')
				set_msg(out->warning,
				        "container \"%s\": %s is below what %s will take: counted "
				        "as the engine's",
				        ci->name, p.words, p.engine_words);
			snprintf(p.words, sizeof(p.words), "%s", p.engine_words);
		} else if (share != 0) {
			p.ppm = share;
		} else {
			p.both = 1;
		}
	}
	if (p.source == DEMAND_SRC_NONE) {
		p.source = DEMAND_SRC_WHOLE;
		p.ppm = QUANTITY_PPM;
		snprintf(p.words, sizeof(p.words), "no GPU memory declared, the whole of its GPUs");
	}
	p.whole = ci->whole;
	for (size_t i = 0; i < ci->n_mig; i++)
		p.mig_units = sat_add(p.mig_units, ci->mig[i].n);
	if (ci->n_mig > 0)
		snprintf(p.mig_profile, sizeof(p.mig_profile), "%s", ci->mig[0].profile);
	p.init = (uint8_t)init;
	p.sidecar = (uint8_t)ci->sidecar;
	snprintf(p.container, sizeof(p.container), "%.63s", ci->name);
	ci->bytes = p.bytes;
	ci->part = (int)out->n_parts;
	out->compact[out->n_parts] = (struct demand_share){
	    .bytes = p.bytes,
	    .whole = p.whole,
	    .mig_units = p.mig_units,
	    .mig_pool = p.mig_units ? capacity_pool_id(p.mig_profile) : 0,
	    .ppm = p.ppm,
	    .init = p.init,
	    .sidecar = p.sidecar,
	    .whole_card = p.source == DEMAND_SRC_WHOLE,
	    .takes_cards = p.source == DEMAND_SRC_WHOLE || p.source == DEMAND_SRC_ENGINE || p.both,
	};
	if (p.ppm != 0)
		out->shares = 1;
	if (p.source > out->source)
		out->source = p.source;
	out->parts[out->n_parts++] = p;
	return 0;
}

/* A GPU container's declaration: strict (GPU_MEMORY_LIMIT only) or inferred. */
static int declare(struct walk *w, const cJSON *c, const cJSON *decl, int init,
                   struct container_info *ci, char *err)
{
	if (w->cfg == NULL || !w->cfg->infer)
		return parse_decl(decl, ci, err);
	return infer_part(w, c, decl, init, ci, err);
}

/* Whether container c names a claim of the pod (resources.claims non-empty). */
static int names_claim(const cJSON *c)
{
	const cJSON *claims = json_at(c, "resources", "claims", NULL);

	return cJSON_IsArray(claims) && cJSON_GetArraySize(claims) > 0;
}

/*
 * A DRA container's own figure (demand.h, "DRA containers"): GPU_MEMORY_LIMIT, else (infer)
 * CUDA_DEVICE_MEMORY_LIMIT, and (infer) its engine's share, as a share of one device. 0 (kept
 * in out->dra_figs when it says anything), or -1 with err.
 */
static int dra_figure(struct walk *w, const cJSON *c, const cJSON *decl, int init,
                      struct container_info *ci, char *err)
{
	struct demand *out = w->out;
	struct demand_share sh = {
	    .whole = 1, .init = (uint8_t)init, .sidecar = (uint8_t)ci->sidecar};
	struct demand_part p;
	const cJSON *hami = find_env(c, DEMAND_ENV_HAMI);
	const cJSON *hv = json_at(hami, "value", NULL);
	int infer = w->cfg != NULL && w->cfg->infer, rc = 0;

	memset(&p, 0, sizeof(p));
	if (decl != NULL) {
		if (parse_decl(decl, ci, err) != 0)
			return -1;
		sh.bytes = ci->bytes;
		snprintf(p.words, sizeof(p.words), DEMAND_ENV_NAME " %.32s",
		         json_at(decl, "value", NULL)->valuestring);
	} else if (infer && hami != NULL) {
		if (!cJSON_IsString(hv) || hv->valuestring == NULL ||
		    parse_hami_limit(hv->valuestring, &sh.bytes) != 0) {
			set_msg(
			    err,
			    "container \"%s\": " DEMAND_ENV_HAMI " \"%.32s\" is not HAMi-core's "
			    "per-GPU limit of at least 1m (a literal value such as \"4096m\" or "
			    "\"16g\")",
			    ci->name, cJSON_IsString(hv) && hv->valuestring ? hv->valuestring : "");
			return -1;
		}
		snprintf(p.words, sizeof(p.words), DEMAND_ENV_HAMI " %.32s", hv->valuestring);
	}
	if (infer) {
		p.source = sh.bytes ? DEMAND_SRC_DECLARED : DEMAND_SRC_NONE;
		if ((rc = engine_source(w, c, ci, &p, err)) < 0)
			return -1;
		if (rc == 1 || p.source == DEMAND_SRC_WHOLE) /* an engine, read or not */
			sh.ppm = p.ppm;
		if (sh.bytes == 0 && rc == 1)
			snprintf(p.words, sizeof(p.words), "%s", p.engine_words);
	}
	if (sh.bytes == 0 && sh.ppm == 0)
		return 0; /* it says nothing: its claims count */
	if (out->n_dra_figs == DEMAND_MAX_PARTS) {
		set_msg(err, "the pod has more than %d containers naming claims with a GPU figure",
		        DEMAND_MAX_PARTS);
		return -1;
	}
	if (out->n_dra_figs == 0)
		snprintf(out->dra_words, sizeof(out->dra_words), "%.160s (container %.50s)",
		         p.words, ci->name);
	out->dra_figs[out->n_dra_figs++] = sh;
	return 0;
}

/* Account one container: GPUs, declaration, warnings, per-GPU share. */
static void visit(struct walk *w, const cJSON *c, int init, int idx)
{
	struct container_info ci;
	struct demand *out = w->out;
	const cJSON *policy = json_at(c, "restartPolicy", NULL);
	const cJSON *decl = find_env(c, DEMAND_ENV_NAME);
	int first_error = out->status != DEMAND_INVALID, dra = 0;

	memset(&ci, 0, sizeof(ci));
	container_name(c, init, idx, ci.name);
	ci.sidecar = init && cJSON_IsString(policy) && policy->valuestring &&
	             strcmp(policy->valuestring, "Always") == 0;

	/* Only the first problem is reported: the user fixes one thing at a time. */
	if (container_gpus(c, w->names, w->n_names, w->mappings, &ci,
	                   first_error ? out->error : NULL) != 0 ||
	    (ci.gpus > 0 && declare(w, c, decl, init, &ci, first_error ? out->error : NULL) != 0)) {
		out->status = DEMAND_INVALID;
	} else if (ci.gpus == 0 && ci.dra_units == 0 && names_claim(c)) {
		dra = 1;
		if (dra_figure(w, c, decl, init, &ci, first_error ? out->error : NULL) != 0)
			out->status = DEMAND_INVALID;
		ci.bytes = 0; /* its figure counts through its claims (placement.h), not here */
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
	out->dra_units = sat_add(out->dra_units, ci.dra_units);
	if (ci.gpus > 0)
		add_pool(w, &ci);
	else if (decl != NULL && ci.dra_units == 0 && !dra && out->warning[0] == '\0') {
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
	struct walk w = {.names = default_resources,
	                 .n_names = 1,
	                 .cfg = cfg,
	                 .annotations = json_at(pod, "metadata", "annotations", NULL),
	                 .out = out};
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
	w.mappings = json_at(pod, "status", "extendedResourceClaimStatus", "requestMappings", NULL);
	if (w.mappings != NULL && !cJSON_IsNull(w.mappings) && !cJSON_IsArray(w.mappings)) {
		out->status = DEMAND_INVALID;
		set_msg(out->error,
		        "status.extendedResourceClaimStatus.requestMappings is not a list");
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

const char *demand_source_name(enum demand_source src)
{
	switch (src) {
	case DEMAND_SRC_DECLARED:
		return "declared";
	case DEMAND_SRC_HAMI:
		return "hami";
	case DEMAND_SRC_KAI:
		return "kai";
	case DEMAND_SRC_ENGINE:
		return "engine";
	case DEMAND_SRC_WHOLE:
		return "whole-card";
	default:
		return "";
	}
}

/* ppm of x, rounded up: a share never counts less than it says. */
static uint64_t ppm_of(uint64_t x, uint32_t ppm)
{
	uint64_t lo = (x % QUANTITY_PPM) * ppm;

	return sat_add((x / QUANTITY_PPM) * ppm, lo / QUANTITY_PPM + (lo % QUANTITY_PPM != 0));
}

/* The bytes one GPU container counts on the node: the larger of its figure and its share of
 * the memory of the units it gets. */
static uint64_t share_bytes(const struct demand_share *s, const struct capacity *cap,
                            uint64_t *share_out)
{
	uint64_t m = 0, share;

	if (s->whole > 0)
		m = capacity_undeclared_bytes(cap, CAPACITY_POOL_WHOLE, s->whole);
	if (s->mig_units > 0)
		m = sat_add(m, capacity_undeclared_bytes(cap, s->mig_pool, s->mig_units));
	share = s->ppm ? ppm_of(m, s->ppm) : 0;
	if (share_out != NULL)
		*share_out = share;
	return share > s->bytes ? share : s->bytes;
}

uint64_t demand_shares_bytes(const struct demand_share *shares, size_t n,
                             const struct capacity *cap)
{
	struct rule_acc acc;

	memset(&acc, 0, sizeof(acc));
	for (size_t i = 0; i < n && shares != NULL && cap != NULL; i++)
		rule_add(&acc, share_bytes(&shares[i], cap, NULL), shares[i].init,
		         shares[i].sidecar);
	return rule_result(&acc);
}

static int all_parts(const struct demand *d, int takes)
{
	if (d->status != DEMAND_OK || d->n_parts == 0)
		return 0;
	for (size_t i = 0; i < d->n_parts; i++)
		if (!(takes ? d->compact[i].takes_cards : d->compact[i].whole_card))
			return 0;
	return 1;
}

int demand_all_whole(const struct demand *d)
{
	return all_parts(d, 0);
}

int demand_takes_cards(const struct demand *d)
{
	return all_parts(d, 1);
}

void demand_resolve(const struct demand *d, const struct capacity *cap, struct demand *out)
{
	struct rule_acc acc;

	if (out != d)
		*out = *d;
	if (d->status != DEMAND_OK || !d->shares || cap == NULL)
		return;
	memset(&acc, 0, sizeof(acc));
	out->card_bytes = cap->per_gpu_bytes;
	out->max_per_gpu_bytes = 0;
	for (size_t i = 0; i < out->n_parts; i++) {
		struct demand_part *p = &out->parts[i];
		uint64_t share = 0;
		uint64_t units = sat_add(p->whole, p->mig_units);
		uint64_t per;

		p->resolved = share_bytes(&out->compact[i], cap, &share);
		if (p->both && share > p->bytes && out->warning[0] == '\0') {
			char a[QUANTITY_FMT_MAX], b[QUANTITY_FMT_MAX];

			quantity_format(p->bytes, a, sizeof(a));
			quantity_format(share, b, sizeof(b));
			set_msg(out->warning,
			        "container \"%s\": %s (%s) is below what %s will take on this node "
			        "(%s): counted as %s",
			        p->container, p->words, a, p->engine_words, b, b);
		}
		rule_add(&acc, p->resolved, p->init, p->sidecar);
		units = units ? units : 1;
		per = p->resolved / units + (p->resolved % units != 0);
		if (per > out->max_per_gpu_bytes) {
			out->max_per_gpu_bytes = per;
			snprintf(out->max_per_gpu_container, sizeof(out->max_per_gpu_container),
			         "%s", p->container);
		}
	}
	out->bytes = rule_result(&acc);
	for (size_t i = 0; i < out->n_uses; i++) {
		struct demand_use *u = &out->uses[i];

		if (u->part >= out->n_parts)
			continue;
		u->bytes = out->parts[u->part].resolved;
		/* The folded last use holds the largest of the containers folded into it. */
		if (i == DEMAND_MAX_USES - 1)
			for (size_t j = u->part; j < out->n_parts; j++)
				if (out->parts[j].resolved > u->bytes)
					u->bytes = out->parts[j].resolved;
	}
}

void demand_describe(const struct demand *d, char *buf, size_t len)
{
	const struct demand_part *big = NULL;
	char q[QUANTITY_FMT_MAX], card[QUANTITY_FMT_MAX];
	int n;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < d->n_parts; i++)
		if (big == NULL || d->parts[i].resolved > big->resolved ||
		    (!d->shares && d->parts[i].bytes > big->bytes))
			big = &d->parts[i];
	if (big == NULL)
		return;
	quantity_format(d->shares ? big->resolved : big->bytes, q, sizeof(q));
	quantity_format(d->card_bytes, card, sizeof(card));
	if (big->ppm != 0 && d->card_bytes > 0 && big->resolved > big->bytes)
		n = snprintf(buf, len, "counted as %s: %s of this node's %s %s", q, big->words,
		             card, big->mig_units > 0 ? "GPU (MIG slice)" : "card");
	else
		n = snprintf(buf, len, "counted as %s: %s", q, big->words);
	if (n >= 0 && (size_t)n < len && d->n_parts > 1)
		snprintf(buf + n, len - (size_t)n, ", and %zu more GPU container(s)",
		         d->n_parts - 1);
}
