/*
 * policyset: one placement decided under the flags, the node's annotation and the
 * GPUMemoryPolicy objects that select the node (gpupolicy.h), over placement_decide()
 * (ARCHITECTURE.md, core box). Called by core_decide() (core.h), the one entry point: the
 * adapters read its verdict, not this module's.
 *
 * The node threshold: gpupolicy_resolve() gives at most three checks (enforce, warn, audit);
 * each is placement_decide() at that check's threshold. Enforce: over it is refused. Warn: over
 * it is allowed with a warning. Audit: over it is allowed, recorded as an audit entry (the
 * webhook writes it to the AdmissionReview response's auditAnnotations and counts it). The
 * early warning (warnThreshold) of an allowed placement comes from the first check (enforce, or
 * the flags' own warn check under --mode warn).
 * Tiers: every selecting policy that has tiers judges the pod's tier (gpupolicy_tier_of) over
 * what each tier already declares on the node (placement_tier_bytes), in the policy's mode.
 * Declarations only (spec.undeclared: refuse, issue 19): after the threshold checks, each such
 * selecting policy refuses (enforce; reason "UndeclaredRefused"), warns or audits a pod whose
 * demand has any source but GPU_MEMORY_LIMIT (demand.source), its source in the message.
 * A message set by a policy names it ("; GPUMemoryPolicy \"a100-pool\"" is appended to the
 * threshold messages it set; tier messages name it themselves).
 *
 * Pure: no I/O, no clock, no allocation; every pointer borrowed. Thread-safe.
 */
#ifndef GMG_POLICYSET_H
#define GMG_POLICYSET_H

#include <stddef.h>
#include <stdint.h>

#include "gpupolicy.h"
#include "placement.h"

#define POLICYSET_WARNINGS 2
#define POLICYSET_AUDIT    4

struct policyset_input {
	const struct placement_node *node;
	const struct placement_pod *pod;
	const char *pod_namespace;                 /* for tier membership */
	const char *pod_priority_class;            /* NULL or "": none */
	const struct gpupolicy_labels *pod_labels; /* NULL: none */
	const struct gpupolicy *const *policies;   /* those selecting the node (policies.h) */
	size_t n_policies;
	struct gpupolicy_flags flags;
	int verdict_only; /* placement_policy.verdict_only: no words (the extender) */
	int infer;        /* placement_policy.infer: --undeclared infer */
	uint64_t now_ms;
};

struct policyset_audit {
	const char *policy; /* borrowed from the input's policy */
	const char *reason; /* "OverThreshold", "NeverFits", "TierOverShare", "TierYield" */
	char message[POLICY_MSG_MAX];
};

struct policyset_threshold {
	double threshold;               /* ratio (0,1] */
	const char *source;             /* "flags", "node annotation" or the policy's name
	                                   (borrowed from the policy) */
	const struct gpupolicy *policy; /* the policy that set it, NULL: flags or annotation */
	int from_node;                  /* 1: the node's annotation */
};

struct policyset_result {
	struct placement_result main; /* the first check's: numbers, reserve, reserve_bytes */
	struct policyset_threshold in_force; /* the first check's threshold: main's budget */
	int invalid_input; /* placement_decide refused the input: main.decision says */
	int allowed;
	const char *reason;           /* the refusal's, or main.decision.reason when allowed */
	const char *policy;           /* the policy that refused, NULL: the flags or annotation */
	char message[POLICY_MSG_MAX]; /* the refusal */
	char warnings[POLICYSET_WARNINGS][POLICY_MSG_MAX];
	size_t n_warnings;
	struct policyset_audit audit[POLICYSET_AUDIT];
	size_t n_audit;       /* entries kept */
	size_t n_audit_total; /* breaches in audit mode, kept or not */
	int reserve;          /* allowed and not a dry run: record main.reserve_bytes */
};

/*
 * The threshold in force on a node and where it comes from, written once: the first check of
 * gpupolicy_resolve() (the node's annotation, else the strictest enforcing policy, else the
 * flags; under flags in warn mode a stricter warning policy merges into their check). It is
 * what a placement is refused over (the webhook's and the extender's first check), the
 * report's threshold column and the node_limit_bytes gauge. sel: the policies that apply to
 * the node (gpupolicy_applies()), n may be 0; cap NULL: a node of unknown capacity (no
 * annotation). Pure; always fills *out.
 */
void policyset_threshold(const struct gpupolicy *const *sel, size_t n,
                         const struct gpupolicy_flags *flags, const struct capacity *cap,
                         struct policyset_threshold *out);

/* Decide. 0, or -1 for invalid input (out->invalid_input, out->main.decision.message). */
int policyset_decide(const struct policyset_input *in, struct policyset_result *out)
    __attribute__((warn_unused_result));

#endif
