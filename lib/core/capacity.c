/*
 * capacity: a node's HBM from annotations, GPU Feature Discovery labels, a product table and
 * allocatable, in that order.
 */
#include "capacity.h"
#include "dra.h"

#include "errbuf.h"
#include "jsonpath.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demand.h"
#include "quantity.h"
#include "satmath.h"

#define MIB (1024ull * 1024ull)
/* Longest label/annotation value we read as a number; longer ones are malformed. */
#define VALUE_MAX      64
#define SHARED_SUFFIX  "-SHARED"
#define DEFAULT_GPU_RS "nvidia.com/gpu"

/* Per-GPU memory as NVML reports it, MiB (reference/gpu-facts.md). GFD writes the NVML name
 * with spaces replaced by "-". Defaults only: labels and the annotation win. */
static const struct {
	const char *product;
	uint64_t mib;
} products[] = {
    {"NVIDIA-H100-80GB-HBM3", 81559}, {"NVIDIA-H200", 143771}, {"NVIDIA-A100-SXM4-40GB", 39538},
    {"NVIDIA-A100-PCIE-40GB", 40536}, {"NVIDIA-L40S", 46068},  {"NVIDIA-L4", 23034},
};

uint64_t capacity_product_mib(const char *product)
{
	size_t len, slen = strlen(SHARED_SUFFIX);

	if (product == NULL)
		return 0;
	len = strnlen(product, VALUE_MAX + 1);
	if (len > slen && strcmp(product + len - slen, SHARED_SUFFIX) == 0)
		len -= slen;
	for (size_t i = 0; i < sizeof(products) / sizeof(products[0]); i++) {
		if (strlen(products[i].product) == len &&
		    strncmp(products[i].product, product, len) == 0)
			return products[i].mib;
	}
	return 0;
}

int capacity_parse_ratio(const char *s, double *out)
{
	int digits = 0, dots = 0;
	char *end = NULL;
	double v;

	if (s == NULL || s[0] == '\0' || strnlen(s, VALUE_MAX + 1) > VALUE_MAX)
		return -1;
	/* Plain decimals only: strtod would also take " 0.9", "9e-1", "0x1p-1", "nan", "inf". */
	for (const char *p = s; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.' && dots++ == 0)
			continue;
		else
			return -1;
	}
	if (digits == 0)
		return -1;
	v = strtod(s, &end);
	/* 1e-6 is the policy's resolution (budgets in parts per million): below it, 0. */
	if (end == NULL || *end != '\0' || !(v >= 1e-6 && v <= 1.0))
		return -1;
	*out = v;
	return 0;
}

/* A positive decimal integer ("1", "81559"), at most 18 digits. 0 or -1. */
static int parse_positive(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	size_t n = 0;

	if (s == NULL)
		return -1;
	for (; s[n]; n++) {
		if (s[n] < '0' || s[n] > '9' || n >= 18)
			return -1;
		v = v * 10 + (uint64_t)(s[n] - '0');
	}
	if (n == 0 || v == 0)
		return -1;
	*out = v;
	return 0;
}

/* allocatable[<resource>] as a count: a whole quantity ("16384", "3k") or an integral JSON
 * number (demand_parse_count()). */
static int parse_allocatable(const cJSON *v, uint64_t *out)
{
	return demand_parse_count(v, out);
}

struct node_view {
	const char *name;
	const cJSON *labels, *annotations, *allocatable;
};

static int memory_per_gpu(const struct node_view *nv, struct capacity *out, char *err,
                          size_t errlen)
{
	const char *ann = json_str(nv->annotations, CAPACITY_ANN_GPU_MEMORY, NULL);
	const char *label = json_str(nv->labels, CAPACITY_LABEL_MEMORY, NULL);
	const char *product = json_str(nv->labels, CAPACITY_LABEL_PRODUCT, NULL);
	char qerr[128] = "";
	uint64_t v = 0;

	if (ann != NULL) {
		if (quantity_parse_str(ann, &v, qerr, sizeof(qerr)) != 0 || v < MIB) {
			errbuf_set(err, errlen,
			           "node %s: annotation " CAPACITY_ANN_GPU_MEMORY
			           " \"%.64s\" is not the memory of one GPU (%s): write a "
			           "quantity such as \"80Gi\"",
			           nv->name, ann, v < MIB && qerr[0] == 0 ? "under 1Mi" : qerr);
			return CAPACITY_EINVALID;
		}
		out->memory_source = CAPACITY_SRC_ANNOTATION;
		out->per_gpu_bytes = v;
		return 0;
	}
	if (label != NULL) {
		if (parse_positive(label, &v) != 0) {
			errbuf_set(err, errlen,
			           "node %s: label " CAPACITY_LABEL_MEMORY
			           " \"%.64s\" is not a positive number of MiB per GPU: fix it or "
			           "set annotation " CAPACITY_ANN_GPU_MEMORY " (e.g. \"80Gi\")",
			           nv->name, label);
			return CAPACITY_EINVALID;
		}
		/* One 2022 GFD release wrote bytes; no GPU has 16 TiB, so a larger value is. */
		out->per_gpu_bytes = v > CAPACITY_GFD_BYTES_CUTOFF ? v : v * MIB;
		out->memory_source = CAPACITY_SRC_GFD_LABEL;
		return 0;
	}
	v = capacity_product_mib(product);
	if (v != 0) {
		out->per_gpu_bytes = v * MIB;
		out->memory_source = CAPACITY_SRC_PRODUCT_TABLE;
		return 0;
	}
	if (product != NULL)
		errbuf_set(err, errlen,
		           "node %s: GPU memory unknown for product \"%.64s\": set "
		           "label " CAPACITY_LABEL_MEMORY
		           " (MiB per GPU, as GPU Feature Discovery does) or "
		           "annotation " CAPACITY_ANN_GPU_MEMORY " (e.g. 80Gi)",
		           nv->name, product);
	else
		errbuf_set(err, errlen,
		           "node %s: GPU memory unknown: set label " CAPACITY_LABEL_MEMORY
		           " (MiB per GPU, as GPU Feature Discovery does) or "
		           "annotation " CAPACITY_ANN_GPU_MEMORY " (e.g. 80Gi)",
		           nv->name);
	return CAPACITY_EUNKNOWN;
}

/* allocatable[<gpu resource>] (first configured name present), 0 when absent or malformed. */
static uint64_t allocatable_gpus(const struct node_view *nv, const struct demand_config *cfg)
{
	static const char *const fallback[] = {DEFAULT_GPU_RS};
	const char *const *names = fallback;
	size_t n_names = 1;
	uint64_t alloc = 0;

	if (cfg != NULL && cfg->gpu_resources != NULL && cfg->n_gpu_resources > 0) {
		names = cfg->gpu_resources;
		n_names = cfg->n_gpu_resources;
	}
	for (size_t i = 0; i < n_names && alloc == 0; i++) {
		const cJSON *a = json_at(nv->allocatable, names[i], NULL);

		if (a != NULL && parse_allocatable(a, &alloc) != 0)
			alloc = 0;
	}
	return alloc;
}

/* Whether a GFD label says what one allocatable unit is (a card, or a card's replica). */
static int gfd_says_unit(const struct node_view *nv)
{
	return json_at(nv->labels, CAPACITY_LABEL_MEMORY, NULL) != NULL ||
	       json_at(nv->labels, CAPACITY_LABEL_PRODUCT, NULL) != NULL ||
	       json_at(nv->labels, CAPACITY_LABEL_REPLICAS, NULL) != NULL ||
	       json_at(nv->labels, CAPACITY_LABEL_SHARING, NULL) != NULL;
}

static int gpu_count(const struct node_view *nv, const struct demand_config *cfg,
                     struct capacity *out, char *err, size_t errlen)
{
	const char *ann = json_str(nv->annotations, CAPACITY_ANN_GPU_COUNT, NULL);
	const char *label = json_str(nv->labels, CAPACITY_LABEL_COUNT, NULL);
	uint64_t v = 0;

	if (out->mig == CAPACITY_MIG_MIXED && ann == NULL) {
		/* gpu.count counts partitioned cards too; allocatable only the whole ones, in
		 * slots: without the replicas label a slot may be a slice of a card, not a card. */
		if (out->replicas_unknown)
			goto unknown;
		out->gpu_count = allocatable_gpus(nv, cfg) / out->replicas;
		out->count_source = CAPACITY_SRC_ALLOCATABLE;
		if (out->gpu_count > 0 || out->n_profiles > 0)
			return 0;
		goto unknown;
	}
	if (ann != NULL || label != NULL) {
		const char *what =
		    ann ? "annotation " CAPACITY_ANN_GPU_COUNT : "label " CAPACITY_LABEL_COUNT;

		if (parse_positive(ann ? ann : label, &v) != 0) {
			errbuf_set(err, errlen,
			           "node %s: %s \"%.64s\" is not a positive number of GPUs",
			           nv->name, what, ann ? ann : label);
			return CAPACITY_EINVALID;
		}
		out->gpu_count = v;
		out->count_source = ann ? CAPACITY_SRC_ANNOTATION : CAPACITY_SRC_GFD_LABEL;
		return 0;
	}
	/* Time-slicing and MPS advertise count x replicas; rounding down errs on the safe side.
	 * Without GFD nothing says how many slots one card is (HAMi vGPU: 10 per card). */
	if (gfd_says_unit(nv) && !out->replicas_unknown)
		v = allocatable_gpus(nv, cfg) / out->replicas;
	if (v > 0) {
		out->gpu_count = v;
		out->count_source = CAPACITY_SRC_ALLOCATABLE;
		return 0;
	}
unknown:
	errbuf_set(err, errlen,
	           "node %s: GPU count unknown: set annotation " CAPACITY_ANN_GPU_COUNT
	           " (physical GPUs) or GPU Feature Discovery's labels " CAPACITY_LABEL_COUNT
	           " and " CAPACITY_LABEL_REPLICAS
	           "; allocatable alone counts the device plugin's slots, which may be "
	           "several per GPU (time-slicing, MPS, vGPU)",
	           nv->name);
	return CAPACITY_EUNKNOWN;
}

/* Sharing strategy and replicas of the whole GPUs. */
static int sharing(const struct node_view *nv, struct capacity *out, char *err, size_t errlen)
{
	const char *strategy = json_str(nv->labels, CAPACITY_LABEL_SHARING, NULL);
	const char *replicas_s = json_str(nv->labels, CAPACITY_LABEL_REPLICAS, NULL);
	const char *product = json_str(nv->labels, CAPACITY_LABEL_PRODUCT, NULL);
	size_t plen = product ? strnlen(product, VALUE_MAX + 1) : 0;
	size_t slen = strlen(SHARED_SUFFIX);

	out->replicas = 1;
	if (replicas_s != NULL && parse_positive(replicas_s, &out->replicas) != 0) {
		errbuf_set(err, errlen,
		           "node %s: label " CAPACITY_LABEL_REPLICAS
		           " \"%.64s\" is not a positive number",
		           nv->name, replicas_s);
		return CAPACITY_EINVALID;
	}
	if (strategy == NULL || strcmp(strategy, "none") == 0) {
		/* GFD before the strategy label: replicas or "-SHARED" meant time-slicing. */
		int shared = plen > slen && strcmp(product + plen - slen, SHARED_SUFFIX) == 0;

		out->sharing = out->replicas > 1 || shared ? CAPACITY_SHARING_TIME_SLICING
		                                           : CAPACITY_SHARING_NONE;
		out->replicas_unknown = out->sharing != CAPACITY_SHARING_NONE && replicas_s == NULL;
	} else if (strcmp(strategy, "time-slicing") == 0) {
		out->sharing = CAPACITY_SHARING_TIME_SLICING;
		out->replicas_unknown = replicas_s == NULL;
	} else if (strcmp(strategy, "mps") == 0) {
		out->sharing = CAPACITY_SHARING_MPS;
		if (replicas_s == NULL) { /* the pinned piece is card / replicas: unknown */
			errbuf_set(err, errlen,
			           "node %s: label " CAPACITY_LABEL_SHARING
			           " is mps but label " CAPACITY_LABEL_REPLICAS
			           " is missing: what each MPS client may use is unknown",
			           nv->name);
			return CAPACITY_EINVALID;
		}
	} else {
		errbuf_set(err, errlen,
		           "node %s: label " CAPACITY_LABEL_SHARING
		           " \"%.64s\" is none of none, time-slicing, mps",
		           nv->name, strategy);
		return CAPACITY_EINVALID;
	}
	return 0;
}

/* The size a MIG profile's name says ("3g.20gb": 20 GB), as 10^9 bytes; 0 if none. */
static uint64_t profile_name_bytes(const char *name)
{
	const char *dot = strchr(name, '.');
	uint64_t gb = 0;
	size_t n = 0;

	if (dot == NULL)
		return 0;
	for (dot++; dot[n] >= '0' && dot[n] <= '9' && n < 6; n++)
		gb = gb * 10 + (uint64_t)(dot[n] - '0');
	if (n == 0 || strncmp(dot + n, "gb", 2) != 0)
		return 0;
	return gb * 1000000000ull;
}

/* A profile's label <prefix><name><suffix>, or NULL. */
static const char *profile_label(const struct node_view *nv, const char *name, const char *suffix)
{
	char key[128];

	snprintf(key, sizeof(key), CAPACITY_MIG_PREFIX "%s%s", name, suffix);
	return json_str(nv->labels, key, NULL);
}

/* One profile from its .count label (key); 1 if read, 0 if skipped (count 0), or an error. */
static int read_profile(const struct node_view *nv, const char *key, const char *count_s,
                        struct capacity_profile *pr, char *err, size_t errlen)
{
	size_t plen = strlen(CAPACITY_MIG_PREFIX), klen = strlen(key), slen = strlen(".count");
	const char *mem, *rep;
	uint64_t v = 0; /* set when mem is (GCC -O3 cannot see it: -Wmaybe-uninitialized) */

	if (klen - plen - slen >= CAPACITY_PROFILE_MAX) {
		errbuf_set(err, errlen, "node %s: MIG profile label \"%.96s\" is too long",
		           nv->name, key);
		return CAPACITY_EINVALID;
	}
	memset(pr, 0, sizeof(*pr));
	memcpy(pr->name, key + plen, klen - plen - slen);
	pr->replicas = 1;
	if (strcmp(count_s, "0") == 0)
		return 0;
	mem = profile_label(nv, pr->name, ".memory");
	rep = profile_label(nv, pr->name, ".replicas");
	if (parse_positive(count_s, &pr->count) != 0 ||
	    (mem != NULL && parse_positive(mem, &v) != 0) ||
	    (rep != NULL && parse_positive(rep, &pr->replicas) != 0)) {
		errbuf_set(err, errlen,
		           "node %s: MIG profile %s: its .count, .memory or .replicas label is not "
		           "a positive number",
		           nv->name, pr->name);
		return CAPACITY_EINVALID;
	}
	pr->bytes = mem != NULL ? (v > CAPACITY_GFD_BYTES_CUTOFF ? v : v * MIB)
	                        : profile_name_bytes(pr->name);
	if (pr->bytes == 0) {
		errbuf_set(err, errlen,
		           "node %s: MIG profile %s: no label " CAPACITY_MIG_PREFIX
		           "%s.memory and no size in its name",
		           nv->name, pr->name, pr->name);
		return CAPACITY_EINVALID;
	}
	return 1;
}

/* MIG strategy and, when mixed, the profiles from GFD's per-profile labels. */
static int mig(const struct node_view *nv, struct capacity *out, char *err, size_t errlen)
{
	const char *strategy = json_str(nv->labels, CAPACITY_LABEL_MIG, NULL);
	size_t plen = strlen(CAPACITY_MIG_PREFIX), slen = strlen(".count");
	const cJSON *l;

	if (strategy == NULL || strcmp(strategy, "none") == 0)
		return 0;
	if (strcmp(strategy, "single") == 0) {
		out->mig = CAPACITY_MIG_SINGLE;
		return 0;
	}
	if (strcmp(strategy, "mixed") != 0) {
		errbuf_set(err, errlen,
		           "node %s: label " CAPACITY_LABEL_MIG " \"%.64s\" is none of none, "
		           "single, mixed",
		           nv->name, strategy);
		return CAPACITY_EINVALID;
	}
	out->mig = CAPACITY_MIG_MIXED;
	cJSON_ArrayForEach(l, nv->labels)
	{
		size_t klen = l->string ? strlen(l->string) : 0;
		int rc;

		if (klen <= plen + slen || strncmp(l->string, CAPACITY_MIG_PREFIX, plen) != 0 ||
		    strcmp(l->string + klen - slen, ".count") != 0 || !cJSON_IsString(l))
			continue;
		if (out->n_profiles == CAPACITY_MAX_PROFILES) {
			errbuf_set(err, errlen, "node %s: more than %d MIG profiles", nv->name,
			           CAPACITY_MAX_PROFILES);
			return CAPACITY_EINVALID;
		}
		rc = read_profile(nv, l->string, l->valuestring, &out->profiles[out->n_profiles],
		                  err, errlen);
		if (rc < 0)
			return rc;
		out->n_profiles += (size_t)rc;
	}
	return 0;
}

static const struct capacity_profile *find_profile(const struct capacity *cap, const char *name)
{
	for (size_t i = 0; i < cap->n_profiles; i++)
		if (strcmp(cap->profiles[i].name, name) == 0)
			return &cap->profiles[i];
	return NULL;
}

static const struct capacity_profile *pool_profile(const struct capacity *cap, uint32_t pool)
{
	for (size_t i = 0; i < cap->n_profiles; i++)
		if (capacity_pool_id(cap->profiles[i].name) == pool)
			return &cap->profiles[i];
	return NULL;
}

uint32_t capacity_pool_id(const char *profile)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	if (profile == NULL || profile[0] == '\0')
		return CAPACITY_POOL_WHOLE;
	for (; *profile; profile++) {
		h ^= (unsigned char)*profile;
		h *= 16777619u;
	}
	return h | 0x80000000u; /* never POOL_ANY or POOL_WHOLE */
}

uint64_t capacity_pool_bytes(const struct capacity *cap, uint32_t pool)
{
	const struct capacity_profile *pr;

	if (pool == CAPACITY_POOL_ANY)
		return cap->total_bytes;
	if (pool == CAPACITY_POOL_WHOLE)
		return cap->mig == CAPACITY_MIG_MIXED ? sat_mul(cap->gpu_count, cap->per_gpu_bytes)
		                                      : cap->total_bytes;
	pr = cap->mig == CAPACITY_MIG_MIXED ? pool_profile(cap, pool) : NULL;
	return pr ? sat_mul(pr->count, pr->bytes) : 0;
}

int capacity_pools_share(const struct capacity *cap, uint32_t a, uint32_t b)
{
	return cap->mig != CAPACITY_MIG_MIXED || a == CAPACITY_POOL_ANY || b == CAPACITY_POOL_ANY ||
	       a == b;
}

uint64_t capacity_undeclared_bytes(const struct capacity *cap, uint32_t pool, uint64_t gpus)
{
	const struct capacity_profile *pr = pool == CAPACITY_POOL_WHOLE || pool == CAPACITY_POOL_ANY
	                                        ? NULL
	                                        : pool_profile(cap, pool);
	uint64_t cards = gpus;

	if (pr != NULL)
		return sat_mul(pr->replicas > 1 && gpus > pr->count ? pr->count : gpus, pr->bytes);
	if (cap->sharing == CAPACITY_SHARING_MPS) {
		uint64_t all = sat_mul(cap->gpu_count, cap->per_gpu_bytes);
		uint64_t b = sat_mul(gpus, cap->piece_bytes);

		return b < all ? b : all;
	}
	if (cap->sharing == CAPACITY_SHARING_TIME_SLICING && cards > cap->gpu_count &&
	    cap->gpu_count > 0)
		cards = cap->gpu_count;
	return sat_mul(cards, cap->per_gpu_bytes);
}

/* ceil(a / b), b > 0 */
static uint64_t div_up(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

/* Slices of k units with r replicas per card (or slice) may all sit on ceil(k / r) of them. */
static void time_sliced(struct capacity_piece *out, uint64_t gpus, uint64_t replicas,
                        uint64_t bytes, const char *where)
{
	uint64_t cards = div_up(gpus, replicas);

	out->share_bytes = div_up(bytes, cards);
	if (gpus == 1)
		snprintf(out->rule, sizeof(out->rule),
		         "time-sliced: one slice may use the whole %s", where);
	else if (cards == 1)
		snprintf(out->rule, sizeof(out->rule), "time-sliced: %s slices may land on one %s",
		         gpus == 2 ? "both" : "all its", where);
	else
		snprintf(out->rule, sizeof(out->rule),
		         "time-sliced: its %llu slices may land on %llu %ss",
		         (unsigned long long)gpus, (unsigned long long)cards, where);
}

/* Containers of several pools judged as one (demand's folded use): the whole declaration on the
 * smallest piece the node offers (a whole card when it has one, each profile's slice). */
static void folded_piece(const struct capacity *cap, uint64_t bytes, struct capacity_piece *out)
{
	if (cap->mig != CAPACITY_MIG_MIXED) { /* at least one of them asks for MIG slices */
		out->known = 0;
		out->what = "MIG slice";
		snprintf(out->rule, sizeof(out->rule),
		         "the node offers no MIG slices (no " CAPACITY_LABEL_MIG "=mixed)");
		return;
	}
	out->piece_bytes = cap->gpu_count > 0 ? cap->piece_bytes : UINT64_MAX;
	out->share_bytes = bytes;
	for (size_t i = 0; i < cap->n_profiles; i++)
		if (cap->profiles[i].bytes < out->piece_bytes) {
			out->piece_bytes = cap->profiles[i].bytes;
			out->what = "MIG slice";
		}
	if (out->piece_bytes == UINT64_MAX)
		out->piece_bytes = cap->piece_bytes;
	snprintf(out->rule, sizeof(out->rule),
	         "its GPU containers past the %dth ask for several pools: judged together on "
	         "the node's smallest piece",
	         DEMAND_MAX_USES);
}

void capacity_piece(const struct capacity *cap, const char *profile, uint64_t gpus, uint64_t bytes,
                    struct capacity_piece *out)
{
	memset(out, 0, sizeof(*out));
	out->known = 1;
	out->what = "GPU";
	if (gpus == 0)
		gpus = 1;
	if (profile != NULL && strcmp(profile, DEMAND_PROFILE_FOLDED) == 0) {
		folded_piece(cap, bytes, out);
		return;
	}
	if (profile != NULL && profile[0] != '\0') {
		const struct capacity_profile *pr =
		    cap->mig == CAPACITY_MIG_MIXED ? find_profile(cap, profile) : NULL;

		out->what = "MIG slice";
		if (pr == NULL) {
			out->known = 0;
			snprintf(
			    out->rule, sizeof(out->rule),
			    "the node offers no MIG %.24s slices (no label " CAPACITY_MIG_PREFIX
			    "%.24s.count under " CAPACITY_LABEL_MIG "=mixed)",
			    profile, profile);
			return;
		}
		out->piece_bytes = pr->bytes;
		if (pr->replicas > 1) {
			time_sliced(out, gpus, pr->replicas, bytes, "slice");
		} else {
			out->share_bytes = div_up(bytes, gpus);
			snprintf(out->rule, sizeof(out->rule),
			         "MIG %s: one slice has its own memory", pr->name);
		}
		return;
	}
	out->piece_bytes = cap->piece_bytes;
	switch (cap->sharing) {
	case CAPACITY_SHARING_TIME_SLICING:
		time_sliced(out, gpus, cap->replicas_unknown ? UINT64_MAX : cap->replicas, bytes,
		            "card");
		break;
	case CAPACITY_SHARING_MPS:
		out->what = "MPS client";
		out->share_bytes = bytes;
		snprintf(out->rule, sizeof(out->rule),
		         "MPS: each client is pinned to the card's memory / %llu replicas",
		         (unsigned long long)cap->replicas);
		break;
	default:
		out->share_bytes = div_up(bytes, gpus);
		break;
	}
}

int capacity_from_node(const cJSON *node, const struct demand_config *cfg, struct capacity *out,
                       char *err, size_t errlen)
{
	struct node_view nv = {
	    .name = json_str(node, "metadata", "name", NULL),
	    .labels = json_at(node, "metadata", "labels", NULL),
	    .annotations = json_at(node, "metadata", "annotations", NULL),
	    .allocatable = json_at(node, "status", "allocatable", NULL),
	};
	const char *thr = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (nv.name == NULL)
		nv.name = "(unnamed)";
	out->plugin_units = allocatable_gpus(&nv, cfg);
	rc = memory_per_gpu(&nv, out, err, errlen);
	if (rc == 0)
		rc = sharing(&nv, out, err, errlen);
	if (rc == 0)
		rc = mig(&nv, out, err, errlen);
	if (rc == 0)
		rc = gpu_count(&nv, cfg, out, err, errlen);
	if (rc != 0)
		goto out;
	if (out->mig == CAPACITY_MIG_SINGLE && out->memory_source == CAPACITY_SRC_PRODUCT_TABLE) {
		/* The table holds whole cards; a unit here is one MIG slice. */
		errbuf_set(err, errlen,
		           "node %s: GPU memory unknown: " CAPACITY_LABEL_MIG
		           " is single, so one unit is a MIG slice, and the product table knows "
		           "whole cards only: set label " CAPACITY_LABEL_MEMORY
		           " (MiB per slice, as GPU Feature Discovery does) or "
		           "annotation " CAPACITY_ANN_GPU_MEMORY,
		           nv.name);
		rc = CAPACITY_EUNKNOWN;
		goto out;
	}
	out->piece_bytes = out->sharing == CAPACITY_SHARING_MPS ? out->per_gpu_bytes / out->replicas
	                                                        : out->per_gpu_bytes;
	out->total_bytes = sat_mul(out->per_gpu_bytes, out->gpu_count);
	for (size_t i = 0; i < out->n_profiles; i++)
		out->total_bytes = sat_add(out->total_bytes,
		                           sat_mul(out->profiles[i].count, out->profiles[i].bytes));
	thr = json_str(nv.annotations, CAPACITY_ANN_THRESHOLD, NULL);
	if (thr != NULL) {
		/* (capacity_add_dra reads it on a node known by its slices alone) */
		if (capacity_parse_ratio(thr, &out->threshold) != 0) {
			errbuf_set(err, errlen,
			           "node %s: annotation " CAPACITY_ANN_THRESHOLD
			           " \"%.64s\" is not a ratio 0 < t <= 1 (e.g. \"0.9\")",
			           nv.name, thr);
			rc = CAPACITY_EINVALID;
			goto out;
		}
		out->has_threshold = 1;
	}
out:
	/* Unknown here, a DRA driver's slices may still give it (capacity_add_dra): keep the
	 * node's threshold for that case. */
	if (rc == CAPACITY_EUNKNOWN &&
	    (thr = json_str(nv.annotations, CAPACITY_ANN_THRESHOLD, NULL)) != NULL &&
	    capacity_parse_ratio(thr, &out->threshold) == 0)
		out->has_threshold = 1;
	return rc;
}

int capacity_add_dra(struct capacity *cap, int rc, const struct dra_gpus *g, const char *node,
                     char *err, size_t errlen)
{
	uint64_t each, bytes;

	if (g == NULL || g->n == 0 || rc == CAPACITY_EINVALID)
		return rc;
	if (rc == 0 && cap->count_source == CAPACITY_SRC_ANNOTATION)
		return 0; /* the operator counted the node's GPUs */
	each = cap->memory_source == CAPACITY_SRC_ANNOTATION ? cap->per_gpu_bytes : 0;
	if (each == 0 && g->no_memory == g->n) {
		errbuf_set(err, errlen,
		           "node %s: GPU memory unknown: its %llu DRA GPU(s) publish no capacity "
		           "\"" DRA_CAPACITY_KEY
		           "\" in their ResourceSlices; set annotation " CAPACITY_ANN_GPU_MEMORY
		           " (e.g. 80Gi)",
		           node ? node : "(unnamed)", (unsigned long long)g->n);
		return CAPACITY_EUNKNOWN;
	}
	bytes = each ? sat_mul(each, g->n) : g->bytes;
	if (rc != 0 || cap->plugin_units == 0) {
		/* The DRA GPUs are the node's: labels (if any) describe the same cards. */
		int has_thr = cap->has_threshold;
		double thr = cap->threshold;

		memset(cap, 0, sizeof(*cap));
		cap->has_threshold = has_thr;
		cap->threshold = thr;
		cap->replicas = 1;
		cap->per_gpu_bytes = each ? each : g->max_bytes;
		cap->piece_bytes = cap->per_gpu_bytes;
		cap->memory_source = each ? CAPACITY_SRC_ANNOTATION : CAPACITY_SRC_DRA;
		cap->count_source = CAPACITY_SRC_DRA;
	}
	cap->gpu_count = sat_add(cap->gpu_count, g->n);
	cap->total_bytes = sat_add(cap->total_bytes, bytes);
	cap->dra_gpus = g->n;
	cap->dra_bytes = bytes;
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	return 0;
}
