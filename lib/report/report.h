/*
 * report: every GPU node's memory at a glance, the `report` command's (and `kubectl gpu-memory`'s)
 * adapter on the placement core (ARCHITECTURE.md: the "report adapter" box). Pure: cluster JSON
 * in, rows out, text out; no I/O (cmd/ lists the nodes and pods and prints the text).
 *
 * Per GPU node (a node with a GPU capacity, a malformed one, an allocatable GPU resource, or GPU
 * pods bound to it): the GPU model (label nvidia.com/gpu.product), the count and memory per GPU
 * (capacity_from_node()), the sharing strategy (labels nvidia.com/gpu.sharing-strategy,
 * nvidia.com/gpu.replicas, nvidia.com/mig.strategy, shown as written), the capacity, the
 * threshold in force, the limit, what is declared there, what is free under the limit, the
 * largest pod that still fits, how many GPU pods count there, and what each tier of the
 * GPUMemoryPolicy objects selecting the node declares there against its budget.
 *
 * The threshold in force is the webhook's (gpupolicy_resolve(), the ENFORCE check): the node's
 * annotation gpu-memory-guard.io/threshold, else the strictest threshold of the enforcing
 * GPUMemoryPolicy objects that select the node (spec.nodeSelector on the node's labels), else
 * report_config.threshold (the webhook's --threshold). Policies in warn or audit mode change no
 * limit (they refuse nothing). Policies are read like nodes (report_add_policy); one
 * gpupolicy_parse() refuses is kept with its error (report_policies) and applied nowhere, as the
 * webhook does. The policies that apply to a node are the webhook's: gpupolicy_select() over
 * them in name order, so at most GPUPOLICY_SELECT_MAX, the first in name order.
 *
 * The numbers are the webhook's: the pods counted are the ones the webhook counts (GPU pods bound
 * to the node, not Succeeded/Failed, each by demand_from_pod(); one without a valid declaration
 * as its GPUs x one GPU's memory; DRA pods' containers' own figures kept as the watch cache
 * keeps them, placement_item_demand_figs(), so they raise their claims' counts as there), and the
 * threshold in force, limit, declared, free, largest fit and tiers are the verdict of one
 * core_decide() (core.h, the webhook's call) for a probe pod. "Largest fit" is the largest
 * GPU_MEMORY_LIMIT a new pod asking for one GPU (the first configured GPU resource), of no tier (no
 * priority class, no labels, a namespace no tier names), could declare and be admitted on that node
 * now: the core's bisection over its own decision on that pod (CORE_LARGEST_FIT; the probe's demand
 * is demand_from_pod() of a one-container Pod object), so every rule the core applies (the node's
 * limit, one GPU's limit, and whatever the core learns later) is the webhook's, to the byte. 0 when
 * not even DEMAND_MIN_BYTES fits. Not counted: placements admitted in the last seconds that the API
 * server does not show yet (the webhook's reservations); the report reads the cluster, not a
 * replica's memory.
 *
 * Use: report_new, then report_add_node / report_add_pod / report_add_list in any order, then
 * report_build once, then report_rows and report_render as often as wanted.
 * Caps: REPORT_MAX_NODES nodes, REPORT_MAX_PODS pods kept (GPU pods and DRA pods with figures;
 * other and finished pods are read and dropped). Not thread-safe (one report per thread); distinct
 * reports are independent.
 */
#ifndef GMG_REPORT_H
#define GMG_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core.h" /* struct core_tier */

struct cJSON;
struct dra_drivers;

#define REPORT_MAX_NODES    100000
#define REPORT_MAX_PODS     1000000
#define REPORT_ERR_MAX      512
#define REPORT_NOTE_MAX     1024
#define REPORT_POLICIES_MAX 4096 /* GPUMemoryPolicy objects read */
/* The key of the probe pod: a namespace with parentheses is not a valid one, so the probe can
 * never be taken for a real pod (placement_decide skips the pod being placed by key). */
#define REPORT_PROBE_KEY "(report)/largest-fit"

#define REPORT_EINVAL    (-1) /* input not what was expected: err names where */
#define REPORT_ENOMEM    (-2)
#define REPORT_EFULL     (-3) /* over REPORT_MAX_NODES or REPORT_MAX_PODS */
#define REPORT_ENOTFOUND (-4) /* report_render: --node names no node, or one without GPUs */
#define REPORT_ESTATE    (-5) /* added after report_build, or rendered before it */

enum report_format { REPORT_TABLE = 0, REPORT_WIDE = 1, REPORT_JSON = 2 };

struct report_config {
	double threshold;                 /* ratio (0,1]; a node's annotation overrides it */
	const char *const *gpu_resources; /* NULL -> nvidia.com/gpu; copied by report_new */
	size_t n_gpu_resources;           /* <= DEMAND_MAX_RESOURCES */
	int infer; /* --undeclared infer (the webhook's: the same counting) */
	const struct engine_defaults *engines; /* copied; NULL: the engine.h table */
	const struct dra_drivers *dra_drivers; /* copied; NULL: gpu.nvidia.com (dra.h) */
};

/* A GPU pod counted on a node. */
struct report_pod {
	const char *key;          /* "namespace/name" ("(unnamed pod)" without a name) */
	const char *uid;          /* "" when unknown */
	uint64_t gpus;            /* effective GPU count */
	int declared;             /* 1: a valid GPU_MEMORY_LIMIT; 0: counts as whole GPUs */
	uint64_t declared_bytes;  /* declared: its demand */
	uint64_t counted_bytes;   /* what the core counts for it on this node (0 if capacity unknown
	                             and undeclared) */
	const char *problem;      /* not declared: demand_from_pod()'s reason; else "" */
	const char *source;       /* demand_source_name() of its demand ("declared", "engine",
	                             "whole-card", ...), "invalid" without a valid one (static) */
	const char *source_words; /* the source of its least declared GPU container in words
	                             ("vllm --gpu-memory-utilization 0.9"); "" when strict */
};

/* A GPUMemoryPolicy as read. */
struct report_policy {
	const char *name;  /* metadata.name ("(unnamed)" without one) */
	const char *mode;  /* "enforce", "warn", "audit"; "" when not usable */
	const char *error; /* "" when usable; else gpupolicy_parse()'s error: applied nowhere */
};

/* One GPU node. Byte fields are 0 when capacity_known is 0. */
struct report_row {
	const char *name;
	const char *product; /* label nvidia.com/gpu.product, "" when absent */
	const char *sharing; /* "none", "time-slicing", "mps", "mig-single", "mig-mixed", or the
	                        strategy label as written; "mig-<s>+<strategy>" when both */
	uint64_t replicas;   /* label nvidia.com/gpu.replicas, 1 when absent or unreadable */
	int capacity_known;  /* 0: capacity_from_node() refused the node: note says why */
	uint64_t gpu_count;
	uint64_t per_gpu_bytes;
	uint64_t capacity_bytes;      /* MIG mixed: the whole GPUs' pool (capacity_pool_bytes) */
	double threshold;             /* in force: the ENFORCE check of gpupolicy_resolve() */
	int threshold_from_node;      /* 1: annotation gpu-memory-guard.io/threshold */
	const char *threshold_source; /* "flags", "node annotation", or the name of the
	                                 enforcing GPUMemoryPolicy that sets it */
	int threshold_from_policy;    /* 1: threshold_source is a policy's name */
	uint64_t limit_bytes;         /* floor(capacity x threshold), the core's budget */
	uint64_t declared_bytes; /* what the core counts on the node (undeclared pods as GPUs) */
	uint64_t free_bytes;     /* limit - declared, 0 when declared is over the limit */
	uint64_t
	    largest_fit_bytes; /* largest declaration a new 1-GPU pod is admitted with; 0: none */
	size_t n_pods;         /* GPU pods counted */
	size_t n_undeclared;   /* of which without a valid declaration */
	const struct report_pod *pods; /* n_pods, by counted bytes descending, then key */
	size_t n_policies;             /* usable GPUMemoryPolicy objects selecting the node */
	const struct core_tier *tiers; /* every tier of every selecting policy with tiers, */
	size_t n_tiers;                /* policies in name order, tiers in their order: what its
	                                  pods declare there (a consumer of unknown tier counts
	                                  in every tier) and its budget (core.h, CORE_TIERS) */
	char note[REPORT_NOTE_MAX];    /* why capacity is unknown; on a MIG-mixed node, that the
	                                  numbers are the whole GPUs' pool and each profile's
	                                  slices and declared bytes; "" otherwise */
};

struct report;

/* New empty report; cfg copied. NULL with a reason in err for a threshold outside (0,1], too
 * many GPU resources, or no memory. */
struct report *report_new(const struct report_config *cfg, char *err, size_t errlen);
/* NULL is a no-op. */
void report_free(struct report *r);

/*
 * Add one core/v1 Node or Pod object (borrowed; only what the report needs is kept). A node
 * needs metadata.name; a pod is kept when it is a GPU pod (demand.h), or a pod asking no GPU
 * resource whose DRA containers have figures (placement_consumer(): counted through its claims,
 * listed in no row's pods), with spec.nodeName set and not Succeeded/Failed. REPORT_EINVAL (no
 * name, not an object), REPORT_EFULL, REPORT_ENOMEM, REPORT_ESTATE after report_build; err says
 * which.
 */
int report_add_node(struct report *r, const struct cJSON *node, char *err, size_t errlen)
    __attribute__((warn_unused_result));
int report_add_pod(struct report *r, const struct cJSON *pod, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Add one GPUMemoryPolicy object (borrowed; decoded by gpupolicy_parse()). One that does not
 * decode is kept with its error (report_policies) and applied to no node: 0 all the same.
 * REPORT_EINVAL (not an object), REPORT_EFULL (over REPORT_POLICIES_MAX), REPORT_ENOMEM,
 * REPORT_ESTATE after report_build.
 */
int report_add_policy(struct report *r, const struct cJSON *policy, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Add every item of a list: a NodeList, PodList or GPUMemoryPolicyList as the API server
 * returns them (items carry no kind), a "List" as `kubectl get nodes,pods,gpumemorypolicies -o
 * json` writes it (each item's kind says: Node, Pod and GPUMemoryPolicy are read, other kinds
 * skipped), or one Node, Pod or GPUMemoryPolicy object. Errors name the item: `PodList:
 * items[3]: not an object`, `List: items[0]: no kind`, `expected a NodeList, PodList,
 * GPUMemoryPolicyList, List, Node, Pod or GPUMemoryPolicy object, got kind "Service"`.
 */
/* One DRA ResourceSlice or ResourceClaim (kind, else a slice when it has spec.driver), as the
 * watch cache keeps it (drastore.h): report_build adds each node's DRA GPUs to its capacity and
 * counts the claims allocated there by the core's rules, as the webhook does. 0, REPORT_EINVAL
 * with the decoder's reason, REPORT_EFULL, REPORT_ENOMEM, REPORT_ESTATE. */
int report_add_dra(struct report *r, const struct cJSON *obj, char *err, size_t errlen)
    __attribute__((warn_unused_result));

int report_add_list(struct report *r, const struct cJSON *list, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Compute the rows (sorted by node name). Once. REPORT_EINVAL for a node or a policy listed
 * twice. */
int report_build(struct report *r, char *err, size_t errlen) __attribute__((warn_unused_result));

/* The rows after report_build (borrowed from r, valid until report_free). */
const struct report_row *report_rows(const struct report *r, size_t *n);

/* How many GPUMemoryPolicy objects were read; when i is below that, *out (may be NULL) is the
 * i-th (name order after report_build; strings borrowed from r). Those with an error are
 * applied nowhere: the caller says so (the command: a line on stderr). */
size_t report_policies(const struct report *r, size_t i, struct report_policy *out);

/*
 * The report as text, owned by the caller (free()). node NULL: every GPU node, one line each
 * (REPORT_TABLE: NODE GPU COUNT SHARING CAPACITY LIMIT DECLARED FREE LARGEST-FIT PODS; WIDE adds
 * memory per GPU, replicas, threshold, threshold source, undeclared pods, the tiers ("realtime
 * 40Gi/48Gi, batch 10Gi"; "policy:tier" when several policies have tiers) and the note; JSON:
 * {"nodes": [...], "policies": [...]} with every number in bytes, exact). node set: that node's
 * row, then its pods by counted bytes (JSON: the node with a "pods" array). Sizes as the webhook's
 * messages write them (quantity_format: 22.5Gi). REPORT_ENOTFOUND when node is not a node of the
 * report, or has no GPUs; REPORT_ESTATE before report_build.
 */
int report_render(const struct report *r, enum report_format fmt, const char *node, char **out,
                  char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
