/*
 * capacity: a node's HBM from annotations, GPU Feature Discovery labels, a product table and
 * allocatable, in that order.
 */
#include "capacity.h"

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

/* allocatable[<resource>] as a count: a digit string, or an integral JSON number. */
static int parse_allocatable(const cJSON *v, uint64_t *out)
{
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble; /* cJSON numbers are doubles: range-check */

		if (!(d >= 1 && d <= 1e15) || (double)(uint64_t)d != d)
			return -1;
		*out = (uint64_t)d;
		return 0;
	}
	return parse_positive(cJSON_IsString(v) ? v->valuestring : NULL, out);
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

static int gpu_count(const struct node_view *nv, const struct demand_config *cfg,
                     struct capacity *out, char *err, size_t errlen)
{
	static const char *const fallback[] = {DEFAULT_GPU_RS};
	const char *ann = json_str(nv->annotations, CAPACITY_ANN_GPU_COUNT, NULL);
	const char *label = json_str(nv->labels, CAPACITY_LABEL_COUNT, NULL);
	const char *replicas_s = json_str(nv->labels, CAPACITY_LABEL_REPLICAS, NULL);
	const char *const *names = fallback;
	size_t n_names = 1;
	uint64_t v = 0, alloc = 0, replicas = 1;

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
	if (replicas_s != NULL && parse_positive(replicas_s, &replicas) != 0) {
		errbuf_set(err, errlen,
		           "node %s: label " CAPACITY_LABEL_REPLICAS
		           " \"%.64s\" is not a positive number",
		           nv->name, replicas_s);
		return CAPACITY_EINVALID;
	}
	if (cfg != NULL && cfg->gpu_resources != NULL && cfg->n_gpu_resources > 0) {
		names = cfg->gpu_resources;
		n_names = cfg->n_gpu_resources;
	}
	for (size_t i = 0; i < n_names && alloc == 0; i++) {
		const cJSON *a = json_at(nv->allocatable, names[i], NULL);

		if (a != NULL && parse_allocatable(a, &alloc) != 0)
			alloc = 0;
	}
	/* Time-slicing and MPS advertise count x replicas; rounding down errs on the safe side. */
	v = alloc / replicas;
	if (v == 0) {
		errbuf_set(err, errlen,
		           "node %s: GPU count unknown: set label " CAPACITY_LABEL_COUNT
		           " or annotation " CAPACITY_ANN_GPU_COUNT,
		           nv->name);
		return CAPACITY_EUNKNOWN;
	}
	out->gpu_count = v;
	out->count_source = CAPACITY_SRC_ALLOCATABLE;
	return 0;
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
	rc = memory_per_gpu(&nv, out, err, errlen);
	if (rc != 0)
		goto out;
	rc = gpu_count(&nv, cfg, out, err, errlen);
	if (rc != 0)
		goto out;
	out->total_bytes = sat_mul(out->per_gpu_bytes, out->gpu_count);
	thr = json_str(nv.annotations, CAPACITY_ANN_THRESHOLD, NULL);
	if (thr != NULL) {
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
	return rc;
}
