/*
 * demand: a pod's declared GPU memory (the env var GPU_MEMORY_LIMIT) and GPU count.
 *
 * A container asks for GPUs when resources.limits (else resources.requests) carries one of
 * the configured GPU resource names (default nvidia.com/gpu) with a positive integer count.
 * A pod is a GPU pod if any container or init container asks for GPUs.
 *
 * Declaration: env GPU_MEMORY_LIMIT with a literal "value" holding a quantity (quantity.h).
 * Problems, each reported with the container's name and the expected form:
 *   - a GPU container without GPU_MEMORY_LIMIT, or with valueFrom instead of value;
 *   - an empty, negative, unparseable value, or one under DEMAND_MIN_BYTES (a unit mistake:
 *     "24" is 24 bytes, the user meant "24Gi").
 * A container that declares memory but asks for no GPU is not an error: it gets a warning and
 * its declaration is ignored (unless it names a claim: DRA containers, below).
 *
 * Pod demand follows Kubernetes' effective-request rule for init containers and native
 * sidecars (init containers with restartPolicy Always), from
 * https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/#resource-sharing-within-containers
 * : max( sum(app containers) + sum(sidecars), max over init containers i of (init_i + sum of
 * sidecars declared before i) ) The same rule gives the pod's effective GPU count.
 *
 * KEP-5004 (extended resources backed by DRA, GA in Kubernetes 1.37): the units of a container's
 * resource that the pod's scheduler-made claim serves, as status.extendedResourceClaimStatus
 * .requestMappings[] names them (containerName, resourceName; k8s.io/api core/v1
 * ContainerExtendedResourceRequest), are not the device plugin's: they are left out of the
 * GPUs, uses, parts and pool here and summed in dra_units instead, since the claim counts
 * them (dra.h, placement.h). The container's other GPU units count as usual, so a pod asking
 * nvidia.com/gpu through the claim and nvidia.com/mig-1g.10gb through the device plugin counts
 * both, once each. A container all of whose units are the claim's is not a GPU container here
 * (its GPU_MEMORY_LIMIT is not read, and no "asks for no GPU" warning is given); one with
 * units of both kinds keeps its whole declaration on its device-plugin units (the safe side).
 * Before the scheduler writes the status (a CREATE) nothing is mapped and every unit counts.
 * A requestMappings that is not a list makes the pod DEMAND_INVALID.
 *
 * DRA containers (issue 21): a container that asks no GPU resource but names one of the pod's
 * claims (resources.claims; k8s.io/api core/v1 ResourceRequirements.Claims) gets its GPUs from
 * those claims. Its own figure is read as a GPU container's would be, as the most it puts on
 * one device of its claims: GPU_MEMORY_LIMIT (the same grammar and errors; bytes), else under
 * infer CUDA_DEVICE_MEMORY_LIMIT (HAMi-core's per-device limit, bytes), and under infer its
 * engine's flag, env or default (engine.h: a share of the whole device, as vLLM's
 * --gpu-memory-utilization is of the whole card whatever share of it a claim holds; an engine
 * whose flags cannot be read: the whole device). Not read for them: HAMi's nvidia.com/gpumem
 * resources and KAI's annotations (they go with a GPU resource). A container that says nothing
 * has no figure: its claims count. The figures are kept in dra_figs (not in bytes, gpus, uses
 * or parts: the pod stays DEMAND_NOT_GPU when nothing else asks a GPU) and resolved by the
 * placement against the node's largest DRA device (placement.h, the pod's consumable-capacity
 * shares count the larger of theirs and the figures'). A malformed value is an error naming the
 * container, as for a GPU container. More than DEMAND_MAX_PARTS such containers with a figure
 * is invalid.
 *
 * MIG: a resource named nvidia.com/mig-<profile> (GFD's mixed strategy, e.g.
 * nvidia.com/mig-1g.10gb) is a GPU resource too, whatever is configured: such a container asks
 * for slices of that profile.
 *
 * Per-GPU fit: for each GPU container, ceil(declaration / its GPU count) must fit in one GPU;
 * max_per_gpu_bytes and max_per_gpu_container report the largest. How a declaration lands on
 * one piece depends on the node's sharing (capacity_piece()), so each GPU container's use (its
 * declaration, units and pool) is kept in uses[] for the placement to judge on the node.
 *
 * GPU counts: Kubernetes accepts any whole number of an extended resource, and operators
 * advertise thousands of time-slice replicas per card as memory units, so the only cap is
 * DEMAND_MAX_GPUS (10^15), far above what any allocatable holds. A count is a whole quantity:
 * digits with an optional k M G T P E / Ki Mi Gi Ti Pi Ei suffix or exponent ("3k", as the API
 * server writes 3000), never a fraction.
 *
 * Inferred demand (cfg->infer; config --undeclared infer). Per GPU container, the first source
 * present wins (issue 19; ../shared/reference/gpu-facts.md):
 *   1. DEMAND_SRC_DECLARED: env GPU_MEMORY_LIMIT, as above (same grammar and errors);
 *   2. DEMAND_SRC_HAMI: in limits (else requests) nvidia.com/gpumem, MiB per GPU unit, or
 *      nvidia.com/gpumem-percentage, percent of each unit's card (1..100); else env
 *      CUDA_DEVICE_MEMORY_LIMIT, HAMi-core's per-device limit ("4096m", "16g", bytes bare;
 *      k m g binary, either case: https://github.com/Project-HAMi/HAMi-core README);
 *      DEMAND_SRC_KAI: pod annotations gpu-memory (MiB per GPU) or gpu-fraction (a ratio
 *      0 < r <= 1 of one card), read for the pod's GPU containers (KAI's own fractional pods ask
 *      no GPU resource: not read here, see the README's limitations);
 *   3. DEMAND_SRC_ENGINE: the serving engine's flag, env or default (engine.h);
 *   4. DEMAND_SRC_WHOLE: nothing found (or an engine whose flags cannot be read): the whole
 *      memory of the units it gets (capacity_undeclared_bytes()).
 * A figure in bytes is final; a share (of a card) becomes bytes only on a node: such a pod has
 * shares set and must go through demand_resolve() with the node's capacity before its bytes,
 * uses and max_per_gpu_* mean anything. When a declaration (1 or 2) and the engine (3) are both
 * present, the larger counts on each node and the resolution warns naming both: the engine
 * takes what its flag says, whatever the env var says.
 * A share declared (HAMi's percentage, KAI's fraction) and the engine's: the larger share (the
 * engine's larger: its words, and a warning naming both). An
 * engine whose flags cannot be read may take its whole units: beside a declaration it counts
 * as an engine's share of 1 (the larger counts, with the warning). More than DEMAND_MAX_PARTS
 * GPU containers is invalid under infer. A malformed value of any source is an error naming the
 * container and the field or flag.
 * Without cfg->infer a GPU container without GPU_MEMORY_LIMIT is invalid (the strict mode,
 * --undeclared refuse, the behaviour before issue 19).
 *
 * Pure (no I/O), thread-safe, no allocation: the result is a value on the caller's stack
 * (about 7 KiB with its parts; demand_from_pod uses about 25 KiB of stack more under infer,
 * for the engine reader's words).
 */
#ifndef GMG_DEMAND_H
#define GMG_DEMAND_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

#define DEMAND_ENV_NAME       "GPU_MEMORY_LIMIT"
#define DEMAND_MIN_BYTES      (1024u * 1024u)     /* 1 MiB: smaller is a unit mistake */
#define DEMAND_MAX_CONTAINERS 256                 /* per pod, init + app; more is refused */
#define DEMAND_MAX_RESOURCES  8                   /* configured GPU resource names */
#define DEMAND_MAX_GPUS       1000000000000000ull /* 10^15 units per container */
#define DEMAND_MAX_USES       4  /* GPU containers judged one by one; more are folded */
#define DEMAND_PROFILE_MAX    24 /* a MIG profile name, "1g.10gb" (CAPACITY_PROFILE_MAX) */
/* uses[].profile of a folded use whose containers ask different pools: judged on the smallest
 * piece the node offers (capacity_piece()) */
#define DEMAND_PROFILE_FOLDED   "*"
#define DEMAND_USE_NAME_MAX     64 /* a container name in uses[] (DNS-1123 label: 63) */
#define DEMAND_MIG_PREFIX       "nvidia.com/mig-"
#define DEMAND_MSG_MAX          512
#define DEMAND_NAME_MAX         254 /* DNS-1123 label 63; the cap is generous but fixed */
#define DEMAND_MAX_PARTS        8   /* GPU containers per pod under infer; more is refused */
#define DEMAND_PART_WORDS       224 /* a part's source in words (ENGINE_WORDS_MSG + 32) */
#define DEMAND_ANN_KAI_MEMORY   "gpu-memory"
#define DEMAND_ANN_KAI_FRACTION "gpu-fraction"
#define DEMAND_RES_HAMI_MEM     "nvidia.com/gpumem"
#define DEMAND_RES_HAMI_PCT     "nvidia.com/gpumem-percentage"
#define DEMAND_ENV_HAMI         "CUDA_DEVICE_MEMORY_LIMIT"

struct engine_defaults;
struct capacity;

/* Where a GPU container's figure came from. The names (demand_source_name()) are bounded
 * metric label values. Ordered from the most declared to the least. */
enum demand_source {
	DEMAND_SRC_NONE = 0,     /* no GPU container */
	DEMAND_SRC_DECLARED = 1, /* GPU_MEMORY_LIMIT */
	DEMAND_SRC_HAMI = 2,
	DEMAND_SRC_KAI = 3,
	DEMAND_SRC_ENGINE = 4,
	DEMAND_SRC_WHOLE = 5, /* nothing said: its cards' whole memory */
};
#define DEMAND_SOURCES 6

/* Configured GPU resource names; borrowed for the call. Only the first DEMAND_MAX_RESOURCES
 * are used (config enforces the cap). A GPU count is a whole quantity (demand_parse_count())
 * or an integral JSON number; anything else (fractional, negative, above DEMAND_MAX_GPUS) makes
 * the pod DEMAND_INVALID. The counts of several configured names on one container add up. */
struct demand_config {
	const char *const *gpu_resources; /* e.g. {"nvidia.com/gpu"}; NULL -> default */
	size_t n_gpu_resources;
	int infer;                             /* 1: read every source above; 0: strict */
	const struct engine_defaults *engines; /* assumed engine defaults; NULL: engine.h's */
};

/* Outcome of demand_from_pod(). */
enum demand_status {
	DEMAND_NOT_GPU = 0, /* no container asks for a configured GPU resource */
	DEMAND_OK = 1,      /* GPU pod, every GPU container declares validly */
	DEMAND_INVALID = 2, /* GPU pod with at least one bad or missing declaration */
};

/* One GPU container's ask of one pool: what the node's sharing rules judge. */
struct demand_use {
	uint64_t bytes;                      /* the container's declaration */
	uint64_t gpus;                       /* units of the pool it asks for */
	char profile[DEMAND_PROFILE_MAX];    /* MIG profile, "" for whole GPUs */
	char container[DEMAND_USE_NAME_MAX]; /* its name (cut at 63 bytes) */
	uint8_t part;                        /* its container's parts[] index (shares) */
};

/* What the resolution of one GPU container needs, compact (callers keep it per pod on a node:
 * placement_item.shares). */
struct demand_share {
	uint64_t bytes;     /* a figure in bytes for the whole container; 0: none */
	uint64_t whole;     /* whole-GPU units */
	uint64_t mig_units; /* MIG slices of pool mig_pool */
	uint32_t mig_pool;  /* capacity_pool_id() of its (first) MIG profile */
	uint32_t ppm;       /* a share of the memory of each unit it gets, per million; 0: none */
	uint8_t init, sidecar;
	uint8_t whole_card;  /* counted as its units' whole memory (source DEMAND_SRC_WHOLE) */
	uint8_t takes_cards; /* whole_card, or an engine runs in it (it takes its share of each
	                        card whatever is declared): on cards nothing shares, it simply
	                        takes them (placement.h) */
};

/* One GPU container as the rule and the resolution see it (cfg->infer only). */
struct demand_part {
	uint64_t bytes;     /* a figure in bytes for the whole container; 0: none */
	uint32_t ppm;       /* a share of the memory of each unit it gets, per million; 0: none */
	uint64_t whole;     /* whole-GPU units */
	uint64_t mig_units; /* MIG slices, all of profile mig_profile (one profile per container
	                       read; more profiles: the first one's size for all) */
	char mig_profile[DEMAND_PROFILE_MAX];
	uint8_t init, sidecar;
	enum demand_source source;
	uint8_t both; /* a declaration (bytes) and the engine (ppm) are both present */
	char words[DEMAND_PART_WORDS]; /* "vllm --gpu-memory-utilization 0.9", "GPU_MEMORY_LIMIT
	                                  20Gi", "no GPU memory declared" */
	char engine_words[DEMAND_PART_WORDS]; /* both: the engine's words */
	char container[DEMAND_USE_NAME_MAX];  /* its name (cut at 63 bytes) */
	uint64_t resolved;                    /* demand_resolve(): its bytes on the node */
};

struct demand {
	enum demand_status status;
	uint64_t bytes;             /* effective pod demand in bytes (DEMAND_OK only) */
	uint64_t gpus;              /* effective pod GPU count (GPU pods, valid or not) */
	uint64_t max_per_gpu_bytes; /* largest ceil(decl/gpus) over GPU containers */
	char max_per_gpu_container[DEMAND_NAME_MAX + 1];
	uint32_t pool; /* CAPACITY_POOL_WHOLE, a MIG profile's id, or
	                  CAPACITY_POOL_ANY for a pod asking several pools */
	size_t n_uses; /* DEMAND_OK: GPU containers x pools, up to
	                  DEMAND_MAX_USES; the ones beyond are folded into the last
	                  as one unit holding the largest declaration (the most
	                  one piece could take; of several pools, profile
	                  DEMAND_PROFILE_FOLDED) */
	struct demand_use uses[DEMAND_MAX_USES];
	char error[DEMAND_MSG_MAX];   /* DEMAND_INVALID: first problem, names the container */
	char warning[DEMAND_MSG_MAX]; /* non-empty: declaration on a non-GPU container; after
	                                 demand_resolve(), else two sources disagreeing */
	/* cfg->infer: the GPU containers (DEMAND_OK), the least declared one's source, and
	 * whether a share must be resolved on the node (demand_resolve()) */
	size_t n_parts;
	struct demand_part parts[DEMAND_MAX_PARTS];
	struct demand_share compact[DEMAND_MAX_PARTS]; /* parts[i] compact, for placement items */
	enum demand_source source;
	int shares;
	uint64_t card_bytes; /* demand_resolve(): the memory of one GPU of the node (for words) */
	uint64_t dra_units;  /* GPU units the pod's KEP-5004 claim serves (requestMappings), not
	                        in gpus; > 0: the claim counts them beside this demand */
	/* DRA containers (above) with a figure, each a share of one device (whole 1: bytes, ppm,
	 * init, sidecar), in spec order; and the first one's source in words */
	size_t n_dra_figs;
	struct demand_share dra_figs[DEMAND_MAX_PARTS];
	char dra_words[DEMAND_PART_WORDS];
};

/*
 * Compute the demand of a core/v1 Pod object (borrowed; may be any JSON: a missing or
 * ill-typed spec is DEMAND_NOT_GPU unless containers are there). Fills *out always.
 * Only the first problem is reported in out->error, only the first warning in out->warning.
 * out->gpus is set for invalid pods too: callers count such a pod already on a node as whole
 * GPUs. A container without a name is named by its place ("containers[1]").
 * Not read: envFrom (a GPU_MEMORY_LIMIT from a ConfigMap is invisible here, so the container
 * counts as undeclared).
 * Returns 0; -1 only when pod is not a JSON object or has more than DEMAND_MAX_CONTAINERS
 * containers (then out->error says why and out->status is DEMAND_INVALID).
 */
int demand_from_pod(const struct cJSON *pod, const struct demand_config *cfg, struct demand *out)
    __attribute__((warn_unused_result));

/*
 * The demand d (DEMAND_OK) on the node of capacity cap: each part's share of the memory of the
 * units it gets becomes bytes (capacity_undeclared_bytes(): under time-slicing at most the
 * node's cards, under MPS card / replicas each, MIG slices their own), the larger of a
 * declaration and the engine's share counts (out->warning names both when the share is
 * larger), then the effective-request rule, uses[].bytes and max_per_gpu_* as for a declared
 * pod. out is a copy of d (out may be d). A pod without shares is copied unchanged. Pure.
 */
void demand_resolve(const struct demand *d, const struct capacity *cap, struct demand *out);

/* The effective-request bytes of n GPU containers (shares, from a demand) on the node of
 * capacity cap, each counting the larger of its bytes and its share of its units' memory.
 * Saturating; 0 for n 0. Pure. */
uint64_t demand_shares_bytes(const struct demand_share *shares, size_t n,
                             const struct capacity *cap);

/* 1 when every GPU container of d (DEMAND_OK, infer) is counted as its units' whole memory
 * (demand_all_whole), or takes its cards (demand_takes_cards: whole, or an engine runs in
 * it). */
int demand_all_whole(const struct demand *d);
int demand_takes_cards(const struct demand *d);

/*
 * The source of a resolved demand in words, for messages and logs: "counted as 71.6Gi: vllm
 * --gpu-memory-utilization 0.9 of this node's 79.6Gi card" (the largest GPU container; ", and
 * N more GPU containers"), "declared (GPU_MEMORY_LIMIT)" for a pod whose every GPU container
 * declares. Writes at most len bytes, always terminated; "" for a demand without parts.
 */
void demand_describe(const struct demand *d, char *buf, size_t len);

/* "declared", "hami", "kai", "engine", "whole-card", "" for DEMAND_SRC_NONE (static). */
const char *demand_source_name(enum demand_source s);

/* A GPU count: a whole quantity string ("4096", "3k", "2Ki") or an integral JSON number, at
 * most DEMAND_MAX_GPUS. 0 and *out set, or -1. Shared with capacity (allocatable). */
int demand_parse_count(const struct cJSON *v, uint64_t *out) __attribute__((warn_unused_result));

#endif
