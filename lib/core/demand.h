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
 * its declaration is ignored.
 *
 * Pod demand follows Kubernetes' effective-request rule for init containers and native
 * sidecars (init containers with restartPolicy Always), from
 * https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/#resource-sharing-within-containers
 * : max( sum(app containers) + sum(sidecars), max over init containers i of (init_i + sum of
 * sidecars declared before i) ) The same rule gives the pod's effective GPU count.
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
 * Pure (no I/O), thread-safe, no allocation: the result is a value on the caller's stack.
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
#define DEMAND_PROFILE_FOLDED "*"
#define DEMAND_USE_NAME_MAX   64 /* a container name in uses[] (DNS-1123 label: 63) */
#define DEMAND_MIG_PREFIX     "nvidia.com/mig-"
#define DEMAND_MSG_MAX        512
#define DEMAND_NAME_MAX       254 /* DNS-1123 label 63; the cap is generous but fixed */

/* Configured GPU resource names; borrowed for the call. Only the first DEMAND_MAX_RESOURCES
 * are used (config enforces the cap). A GPU count is a whole quantity (demand_parse_count())
 * or an integral JSON number; anything else (fractional, negative, above DEMAND_MAX_GPUS) makes
 * the pod DEMAND_INVALID. The counts of several configured names on one container add up. */
struct demand_config {
	const char *const *gpu_resources; /* e.g. {"nvidia.com/gpu"}; NULL -> default */
	size_t n_gpu_resources;
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
	char warning[DEMAND_MSG_MAX]; /* non-empty: declaration on a non-GPU container */
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

/* A GPU count: a whole quantity string ("4096", "3k", "2Ki") or an integral JSON number, at
 * most DEMAND_MAX_GPUS. 0 and *out set, or -1. Shared with capacity (allocatable). */
int demand_parse_count(const struct cJSON *v, uint64_t *out) __attribute__((warn_unused_result));

#endif
