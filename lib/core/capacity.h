/*
 * capacity: a node's GPU memory (HBM) capacity, from its labels, annotations and allocatable.
 *
 * Memory per GPU, first source that is present wins:
 *   1. annotation gpu-memory-guard.io/gpu-memory: a quantity per GPU (operator override);
 *   2. GPU Feature Discovery label nvidia.com/gpu.memory: MiB per GPU (NVML total / 1024^2);
 *      a value above CAPACITY_GFD_BYTES_CUTOFF is bytes (one 2022 GFD release wrote bytes);
 *   3. a built-in table by nvidia.com/gpu.product, a "-SHARED" suffix stripped
 *      (sizes as NVML reports them; ../shared/reference/gpu-facts.md).
 * GPU count, first present wins:
 *   1. annotation gpu-memory-guard.io/gpu-count (override);
 *   2. label nvidia.com/gpu.count;
 *   3. status.allocatable[<gpu resource>] / label nvidia.com/gpu.replicas (default 1):
 *      with time-slicing or MPS allocatable counts replicas, not cards.
 * Threshold override: annotation gpu-memory-guard.io/threshold, a ratio 0 < t <= 1.
 * A present but malformed source is an error naming it (never silently skipped): an operator
 * who wrote an override meant it. Numbers in labels and count annotations are positive decimal
 * integers; the memory annotation must be at least 1Mi. allocatable / replicas rounds down
 * (fewer cards is the safe side); 0 whole cards is unknown. Products match exactly (case
 * included) after the -SHARED strip, so MIG slice products are unknown unless labelled.
 * The "mixed" MIG strategy's per-profile labels are not read.
 *
 * Pure, thread-safe, no allocation.
 */
#ifndef GMG_CAPACITY_H
#define GMG_CAPACITY_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;
struct demand_config;

#define CAPACITY_ANN_GPU_MEMORY "gpu-memory-guard.io/gpu-memory"
#define CAPACITY_ANN_GPU_COUNT  "gpu-memory-guard.io/gpu-count"
#define CAPACITY_ANN_THRESHOLD  "gpu-memory-guard.io/threshold"
#define CAPACITY_LABEL_MEMORY   "nvidia.com/gpu.memory"
#define CAPACITY_LABEL_COUNT    "nvidia.com/gpu.count"
#define CAPACITY_LABEL_PRODUCT  "nvidia.com/gpu.product"
#define CAPACITY_LABEL_REPLICAS "nvidia.com/gpu.replicas"
/* MiB values above this are bytes: 16 TiB per GPU is beyond any card. */
#define CAPACITY_GFD_BYTES_CUTOFF 16777216ull
#define CAPACITY_MSG_MAX          512

#define CAPACITY_EUNKNOWN (-1) /* no source for memory or count: err names what to set */
#define CAPACITY_EINVALID (-2) /* a source is present but malformed: err names it */

enum capacity_source {
	CAPACITY_SRC_ANNOTATION = 1,
	CAPACITY_SRC_GFD_LABEL = 2,
	CAPACITY_SRC_PRODUCT_TABLE = 3,
	CAPACITY_SRC_ALLOCATABLE = 4, /* count only */
};

struct capacity {
	uint64_t per_gpu_bytes; /* memory of one GPU, bytes */
	uint64_t gpu_count;     /* physical GPUs (or MIG slices under mig.strategy single) */
	uint64_t total_bytes;   /* per_gpu_bytes * gpu_count (saturating) */
	enum capacity_source memory_source;
	enum capacity_source count_source;
	int has_threshold; /* node annotation present and valid */
	double threshold;  /* the node's ratio (0,1] when has_threshold */
};

/*
 * Read the capacity of a core/v1 Node object (borrowed). cfg gives the GPU resource names
 * used for the allocatable fallback. Returns 0 and fills *out, or CAPACITY_E* with a message
 * in err such as `node gpu-node-b: GPU memory unknown: set label nvidia.com/gpu.memory (MiB per
 * GPU, as GPU Feature Discovery does) or annotation gpu-memory-guard.io/gpu-memory (e.g. 80Gi)`.
 */
int capacity_from_node(const struct cJSON *node, const struct demand_config *cfg,
                       struct capacity *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* MiB per GPU for a GFD product name (a -SHARED suffix is stripped), 0 if unknown. */
uint64_t capacity_product_mib(const char *product);

/* Parse a ratio 0 < t <= 1 ("0.9", "1"), plain decimal, at least 0.000001 (the policy's
 * parts-per-million resolution). 0 on success, -1 otherwise. Shared with config. */
int capacity_parse_ratio(const char *s, double *out) __attribute__((warn_unused_result));

#endif
