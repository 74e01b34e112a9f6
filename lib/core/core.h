/*
 * core: the one entry point of a placement decision (ARCHITECTURE.md, core box: core_decide ->
 * verdict). The webhook (a pod CREATE or Binding), the scheduler extender (each node of a
 * filter), the report (each row) and the per-node gauges (node_limit_bytes) all call
 * core_decide() and read the one verdict it returns; none recomputes a figure of its own.
 *
 * Input: the node's snapshot (placement.h: its capacity, visible pods, reservations, DRA
 * claims), the pod being placed (or none), the pod's tier attributes, the GPUMemoryPolicy
 * objects that select the node (the caller selects them: gpupolicy_select(), at most
 * GPUPOLICY_SELECT_MAX in name order; policies.h's policies_gen_selecting()), the flags and
 * now_ms.
 * Verdict:
 *   - allowed or not, the reason code and the message, the refusing policy, the warnings and
 *     the audit entries: policyset_decide()'s (policyset.h), in v->ps;
 *   - the threshold in force and where it comes from (flags, node annotation, a policy's name):
 *     v->ps.in_force (policyset_threshold()'s rule, written once);
 *   - limit, used, free: the first (enforce) check's budget, what counts on the node besides
 *     the pod, and limit - used (0 when used is over it), bytes; the figures of that check in
 *     v->ps.main (placement.h: demand on this node, pool, piece, DRA);
 *   - largest fit (CORE_LARGEST_FIT): the largest declaration a pod like the caller's probe
 *     is admitted with, by bisection over the same decision;
 *   - per-tier figures (CORE_TIERS): each tier of each selecting policy, what it declares on
 *     the node and its budget.
 * Without a pod (input.pod NULL), or on a node of unknown capacity (node->cap NULL), only the
 * threshold in force is decided, and with a capacity the limit: the node's total capacity x
 * that threshold (floored at ppm, quantity.h), the node_limit_bytes gauge's figure; with a pod
 * the limit is the pod's pool's (on a MIG-mixed node the whole GPUs' or one profile's slices).
 *
 * Units: bytes, ratios in (0,1], now_ms on the clock of the reservations' expiry (monotonic
 * ms). Ownership: every pointer in the input is borrowed for the call; the verdict borrows
 * the policies' names (in_force.source, ps.policy, ps.audit[].policy, tiers[].policy and
 * .tier), valid while the caller keeps the policies (the store's read lock), and points into
 * the pod's demand (ps.main.piece_container). Pure: no I/O, no clock, no locks; nothing
 * allocated (about 20 KiB of stack with CORE_LARGEST_FIT). Thread-safe.
 */
#ifndef GMG_CORE_H
#define GMG_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "gpupolicy.h"
#include "placement.h"
#include "policyset.h"

#define CORE_NO_WORDS    0x1u /* no message words (the extender asks per node): figures only */
#define CORE_LARGEST_FIT 0x2u /* also the largest fit (input.probe) */
#define CORE_TIERS       0x4u /* also every tier's figures (input.tiers) */

#define CORE_EINVAL (-1) /* input the decision refuses: v->ps.invalid_input, its message */
#define CORE_EPROBE (-2) /* the probe failed (its own error, e.g. no memory) */

/* The pod of bytes for the largest fit: fill *out with a demand declaring bytes. 1, 0 when
 * bytes is no declaration the webhook takes (it does not fit), -1 an error. Called up to ~70
 * times per core_decide; must not call core_decide. */
typedef int (*core_probe_fn)(void *ctx, uint64_t bytes, struct demand *out);

/* One tier of a selecting policy on the node (CORE_TIERS). */
struct core_tier {
	const char *policy;      /* the policy's name (borrowed) */
	const char *tier;        /* the tier's name (borrowed) */
	uint64_t declared_bytes; /* what the tier's pods declare on the node (reservations of
	                            unknown tier count in each: placement_tier_bytes()) */
	uint64_t budget_bytes;   /* floor(pool x maxShare) at ppm, when has_budget */
	int has_budget;          /* the tier has a maxShare */
};

struct core_input {
	const struct placement_node *node;         /* required; node->cap NULL: capacity unknown */
	const struct placement_pod *pod;           /* NULL: the node's threshold and limit only */
	const char *pod_namespace;                 /* tier membership; NULL: none */
	const char *pod_priority_class;            /* NULL or "": none */
	const struct gpupolicy_labels *pod_labels; /* NULL: none */
	const struct gpupolicy *const *policies;   /* those selecting the node, name order */
	size_t n_policies;
	struct gpupolicy_flags flags; /* --threshold, --warn-threshold, --mode */
	int infer;                    /* --undeclared infer */
	unsigned opts;                /* CORE_* */
	core_probe_fn probe;          /* CORE_LARGEST_FIT */
	void *probe_ctx;
	struct core_tier *tiers; /* CORE_TIERS: room for tiers_cap entries (caller's) */
	size_t tiers_cap;
	uint64_t now_ms;
};

struct core_verdict {
	int decided;                /* a pod was judged on a known capacity: ps is filled */
	struct policyset_result ps; /* allowed, reason, message, policy, warnings, audit,
	                               in_force (threshold in force, source), main (figures) */
	uint64_t limit_bytes;       /* bytes a placement may bring the node (its pool) to */
	uint64_t used_bytes;        /* counted besides the pod (visible, reserved, DRA) */
	uint64_t free_bytes;        /* limit - used, 0 when used is over the limit */
	uint64_t largest_fit_bytes; /* CORE_LARGEST_FIT; 0: not even DEMAND_MIN_BYTES fits */
	size_t n_tiers;             /* CORE_TIERS: entries written to input.tiers */
};

/*
 * Decide. Always fills *v (v->ps.in_force whatever the input). 0; CORE_EINVAL for an input
 * the decision refuses (v->ps.invalid_input, v->ps.main.decision.message says why; figures
 * 0); CORE_EPROBE when the probe returned -1 (the verdict's other figures are set).
 */
int core_decide(const struct core_input *in, struct core_verdict *v)
    __attribute__((warn_unused_result));

/* ---- the verdict in brief (the scheduler extender's node reasons, extender.h) ---- */

/* What a verdict means for one node of a scheduler's list. */
enum core_brief {
	CORE_BRIEF_FITS = 0,  /* allowed (with a warning at most) */
	CORE_BRIEF_WARN_ONLY, /* over the threshold, admitted under --mode warn (POLICY_WARN_ONLY)
	                       */
	CORE_BRIEF_REFUSED,   /* refused now; may fit once pods leave (kube-scheduler's FailedNodes)
	                       */
	CORE_BRIEF_NEVER,     /* can never fit on the node (FailedAndUnresolvableNodes) */
};

#define CORE_BRIEF_MAX 512 /* a brief reason, with its NUL */

/*
 * The verdict v (core_decide's, with or without CORE_NO_WORDS) in brief: its class and, for
 * REFUSED and NEVER, one line without the pod's name into buf (cap bytes, cut; "" otherwise),
 * written from the verdict's figures at the threshold in force, sizes as quantity_format writes
 * them: "needs 20Gi, 1.7Gi free of the 90 percent limit", "would bring its DRA claim's shared
 * device to ...", "container "c" needs 40Gi per GPU, above ...", "every unshared GPU is held by
 * pods counted as whole GPUs". A refusal by a GPUMemoryPolicy's tier or declarations rule is
 * the policy's own message; a refusal by a check past the first, "refused by the node
 * threshold". n_in_flight > 0 pods of in_flight_bytes counted besides the visible pods and the
 * reservations (the extender's pods in flight, flight.h) are named in a refusal by the node's
 * figures: ", counting 10Gi of 1 pod whose Binding is in flight". A refusal under a policy ends
 * with "; GPUMemoryPolicy "name"". The text may hold a '%' only from a policy's message.
 */
enum core_brief core_brief(const struct core_verdict *v, size_t n_in_flight,
                           uint64_t in_flight_bytes, char *buf, size_t cap);

#endif
