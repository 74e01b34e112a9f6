/*
 * capacity: a node's GPU memory (HBM) capacity, from its labels, annotations and allocatable,
 * and how its GPUs are shared.
 *
 * Memory per GPU, first source that is present wins:
 *   1. annotation gpu-memory-guard.io/gpu-memory: a quantity per GPU (operator override);
 *   2. GPU Feature Discovery label nvidia.com/gpu.memory: MiB per GPU (NVML total / 1024^2);
 *      a value above CAPACITY_GFD_BYTES_CUTOFF is bytes (one 2022 GFD release wrote bytes);
 *   3. a built-in table by nvidia.com/gpu.product, a "-SHARED" suffix stripped
 *      (sizes as NVML reports them; ../shared/reference/gpu-facts.md); whole cards only, so
 *      not under mig.strategy single (a unit is a slice there: unknown).
 *
 * Sharing (GFD's labels, https://github.com/NVIDIA/k8s-device-plugin docs/gpu-feature-discovery
 * and the device plugin's sharing section): label nvidia.com/gpu.sharing-strategy is "none",
 * "time-slicing" or "mps"; label nvidia.com/gpu.replicas is the number of units the device plugin
 * advertises per card (allocatable nvidia.com/gpu = cards x replicas). Without the strategy
 * label (GFD releases before it), or with "none", replicas above 1 or a "-SHARED" product mean
 * time-slicing (the unsafe reading would be none). Another strategy value is an error.
 * What one pod can get in one piece (piece_bytes):
 *   - none: one card (a container's declaration is spread over its cards, ceil(decl / gpus));
 *   - time-slicing: one card, and the device plugin may hand several slices of one card to one
 *     container (it spreads only when another card has free slots): a container of k slices
 *     may get as few as ceil(k / replicas) cards, so its whole declaration over that many;
 *   - mps: the card's memory / replicas: the MPS control daemon pins each client to that
 *     (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT; the device plugin refuses more than one replica per
 *     container), so a container's whole declaration must fit in one such piece.
 *
 * MIG (label nvidia.com/mig.strategy): "single": GFD's gpu.memory and gpu.count describe one
 * slice and the number of slices; nvidia.com/gpu units are slices, read as cards. "mixed": every
 * profile has labels nvidia.com/mig-<g>g.<mem>gb.count, .memory (MiB) and, time-sliced,
 * .replicas; nvidia.com/gpu.count counts every card, partitioned or not, while allocatable
 * nvidia.com/gpu counts only the unpartitioned cards x replicas, so the whole-GPU count is
 * allocatable / replicas there (label gpu.count is not used; the count annotation still wins).
 * A profile without a .memory label gets the size its name says, read as decimal GB (10^9
 * bytes: below what NVML reports for every profile, e.g. 1g.5gb is 4864 MiB = 5.1e9 bytes).
 * At most CAPACITY_MAX_PROFILES profiles are read; more is an error.
 *
 * GPU count, first present wins:
 *   1. annotation gpu-memory-guard.io/gpu-count (override: physical GPUs, or whole-GPU units
 *      under MIG);
 *   2. (mig.strategy mixed) allocatable / replicas: the unpartitioned cards, possibly 0;
 *      unknown when time-sliced without label nvidia.com/gpu.replicas (slots, not cards);
 *   3. label nvidia.com/gpu.count;
 *   4. status.allocatable[<gpu resource>] / label nvidia.com/gpu.replicas (default 1), but only
 *      when a GFD label (nvidia.com/gpu.memory, .product, .replicas or .sharing-strategy) says
 *      what one unit is: a plugin without GFD (HAMi's vGPU, any plugin with several slots per
 *      card) advertises slots, not cards, and nothing on the node says how many per card.
 *      HAMi's own registration annotation (hami.io/node-nvidia-register) is not read: it is
 *      the internal protocol of HAMi's plugin and scheduler (docs/develop/protocol.md there),
 *      not a kept interface; set the count annotation on such nodes.
 * Threshold override: annotation gpu-memory-guard.io/threshold, a ratio 0 < t <= 1.
 * A present but malformed source is an error naming it (never silently skipped): an operator
 * who wrote an override meant it. Numbers in labels and count annotations are positive decimal
 * integers; the memory annotation must be at least 1Mi. allocatable / replicas rounds down
 * (fewer cards is the safe side); 0 whole cards is unknown (but under MIG mixed with profiles).
 * Products match exactly (case included) after the -SHARED strip, so MIG slice products are
 * unknown unless labelled.
 *
 * Pools: a pod takes memory from one pool, the node's whole GPUs (nvidia.com/gpu) or one MIG
 * profile's slices (nvidia.com/mig-<profile>). Only on a mig.strategy=mixed node are pools told
 * apart (capacity_pool_bytes); elsewhere every pod counts against the node's total.
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
#define CAPACITY_LABEL_SHARING  "nvidia.com/gpu.sharing-strategy"
#define CAPACITY_LABEL_MIG      "nvidia.com/mig.strategy"
#define CAPACITY_MIG_PREFIX     "nvidia.com/mig-" /* + <profile>.count/.memory/.replicas */
#define CAPACITY_MAX_PROFILES   8                 /* MIG profiles read per node */
#define CAPACITY_PROFILE_MAX    24                /* "1g.10gb+me" and room to spare */
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
	CAPACITY_SRC_DRA = 5,         /* DRA ResourceSlices (capacity_add_dra) */
};

enum capacity_sharing {
	CAPACITY_SHARING_NONE = 0,
	CAPACITY_SHARING_TIME_SLICING = 1,
	CAPACITY_SHARING_MPS = 2,
};

enum capacity_mig {
	CAPACITY_MIG_NONE = 0,
	CAPACITY_MIG_SINGLE = 1,
	CAPACITY_MIG_MIXED = 2,
};

/* One MIG profile of a mig.strategy=mixed node. */
struct capacity_profile {
	char name[CAPACITY_PROFILE_MAX]; /* "1g.10gb": the resource is nvidia.com/mig-<name> */
	uint64_t count;                  /* slices of this profile on the node */
	uint64_t bytes;                  /* memory of one slice */
	uint64_t replicas;               /* time-sliced replicas per slice; 1 when not shared */
};

/* Pool ids (placement_item.pool, demand.pool): 0 counts in every pool (unknown, or a pod of
 * several pools), CAPACITY_POOL_WHOLE the node's whole GPUs, anything else a MIG profile's
 * slices (capacity_pool_id() of its name). */
#define CAPACITY_POOL_ANY   0u
#define CAPACITY_POOL_WHOLE 1u

struct capacity {
	uint64_t per_gpu_bytes; /* memory of one GPU, bytes */
	uint64_t gpu_count;     /* physical GPUs (MIG single: slices; MIG mixed: the cards not
	                           partitioned, possibly 0) */
	uint64_t total_bytes;   /* per_gpu_bytes * gpu_count, plus every MIG profile's slices
	                           (mixed) (saturating) */
	enum capacity_source memory_source;
	enum capacity_source count_source;
	int has_threshold;             /* node annotation present and valid */
	double threshold;              /* the node's ratio (0,1] when has_threshold */
	enum capacity_sharing sharing; /* of the whole GPUs (nvidia.com/gpu) */
	uint64_t replicas;             /* units advertised per card; 1 without sharing */
	int replicas_unknown;          /* time-slicing without label nvidia.com/gpu.replicas: how
	                                  many slices a card has is unknown (all of a container's
	                                  may be on one card; no card count from allocatable). MPS
	                                  without it is an error (the pinned piece is unknown) */
	uint64_t piece_bytes;          /* the largest piece one container gets of nvidia.com/gpu:
	                                  one card, or card / replicas under MPS */
	enum capacity_mig mig;
	uint64_t plugin_units; /* status.allocatable of the GPU resources (device plugin units,
	                          0 when none: set even when the capacity is unknown) */
	uint64_t dra_gpus;     /* capacity_add_dra: GPUs published by a DRA driver, counted in
	                          gpu_count and total_bytes */
	uint64_t dra_bytes;    /* ... and their memory */
	size_t n_profiles;     /* mixed: the profiles read from the labels */
	struct capacity_profile profiles[CAPACITY_MAX_PROFILES];
};

/* How a container's declaration lands on one piece of GPU memory (capacity_piece()). */
struct capacity_piece {
	uint64_t piece_bytes; /* the piece: one GPU, one MPS client, one MIG slice */
	uint64_t share_bytes; /* the most the container's declaration puts on one piece */
	const char *what;     /* "GPU", "MPS client", "MIG slice" (static) */
	char rule[160];       /* the sharing rule applied, for messages; "" without sharing */
	int known;            /* 0: the node offers no such pool (a MIG profile it lacks) */
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

/*
 * Add the GPUs a DRA driver publishes on the node (g, from its ResourceSlices: dra.h) to the
 * capacity capacity_from_node() gave (cap, its return code rc, its message in err). Rules:
 *   - annotation gpu-memory-guard.io/gpu-count present: the operator's figure wins, g unread;
 *   - annotation gpu-memory-guard.io/gpu-memory present: each DRA GPU counts that much, else
 *     its own capacity memory (the driver's NVML figure, better than the product table);
 *   - device-plugin GPUs (allocatable nvidia.com/gpu: plugin_units > 0) keep their count and
 *     memory, the DRA GPUs are added (a mixed node); without any, the DRA GPUs are the node's
 *     (GFD labels on such a node describe the same cards: not added twice), and a KEP-5004
 *     node with no label at all gets its capacity from the slices alone;
 *   - a malformed source (CAPACITY_EINVALID) stays an error; a node whose DRA GPUs publish no
 *     memory stays unknown (err says so).
 * Returns the new code (0 when the capacity is now known). g NULL or empty: rc unchanged.
 * per_gpu_bytes and piece_bytes (what device-plugin pods are judged per card on) are the
 * device plugin's when it has GPUs, else the largest DRA GPU. Pure.
 */
struct dra_gpus;
int capacity_add_dra(struct capacity *cap, int rc, const struct dra_gpus *g, const char *node,
                     char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * The piece a container asking gpus units of a pool gets on this node, and what its
 * declaration (bytes) puts on one piece, by the sharing rules above. profile is NULL or "" for
 * whole GPUs (nvidia.com/gpu), else the MIG profile name ("1g.10gb"), or DEMAND_PROFILE_FOLDED
 * ("*": containers of several pools judged as one, the whole declaration on the smallest piece
 * of a MIG-mixed node; elsewhere no such pool). Fills *out always;
 * out->known is 0 (and the piece 0) for a MIG profile the node does not offer.
 */
void capacity_piece(const struct capacity *cap, const char *profile, uint64_t gpus, uint64_t bytes,
                    struct capacity_piece *out);

/* The pool id of a MIG profile name (NULL or "": CAPACITY_POOL_WHOLE). Never POOL_ANY. */
uint32_t capacity_pool_id(const char *profile);

/* The memory a pod of pool may use on the node: on a MIG-mixed node the pool's own (whole GPUs:
 * gpu_count x per_gpu_bytes; a profile: count x bytes; 0 for a profile it lacks), elsewhere, or
 * for CAPACITY_POOL_ANY, total_bytes. */
uint64_t capacity_pool_bytes(const struct capacity *cap, uint32_t pool);

/* Whether a consumer of pool a counts against a decision for pool b (always, but on MIG-mixed
 * nodes between two different known pools). */
int capacity_pools_share(const struct capacity *cap, uint32_t a, uint32_t b);

/* Bytes a GPU pod without a valid declaration counts: it may use every unit it holds whole.
 * gpus units of pool: whole GPUs count min(gpus, gpu_count) cards under time-slicing (slices of
 * one card share it), gpus x card / replicas under MPS (at most every card), gpus cards
 * otherwise; a MIG profile's units count gpus slices (min(gpus, count) when time-sliced).
 * Saturating. */
uint64_t capacity_undeclared_bytes(const struct capacity *cap, uint32_t pool, uint64_t gpus);

/* MiB per GPU for a GFD product name (a -SHARED suffix is stripped), 0 if unknown. */
uint64_t capacity_product_mib(const char *product);

/* Parse a ratio 0 < t <= 1 ("0.9", "1"), plain decimal, at least 0.000001 (the policy's
 * parts-per-million resolution). 0 on success, -1 otherwise. Shared with config. */
int capacity_parse_ratio(const char *s, double *out) __attribute__((warn_unused_result));

#endif
