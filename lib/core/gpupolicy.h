/*
 * gpupolicy: GPUMemoryPolicy objects (group gpu-memory-guard.io, version v1alpha1, kind
 * GPUMemoryPolicy, cluster-scoped; the CRD is manifests/crd-gpumemorypolicy.yaml and
 * helm/gpu-memory-guard/crds/) decoded, matched and applied. Pure: no I/O, no clock, no locks;
 * only gpupolicy_parse() allocates. docs/policies.md is the operator's guide.
 *
 * The object (JSON as the API server serves it):
 *   metadata.name (required), metadata.generation (integer, 0 when absent)
 *   spec.nodeSelector   a LabelSelector (matchLabels, matchExpressions with operators In,
 *                       NotIn, Exists, DoesNotExist; the rules of k8s.io/apimachinery
 *                       pkg/apis/meta/v1 LabelSelector). Absent or {}: every GPU node.
 *   spec.threshold      ratio (0, 1]; absent: the --threshold flag's
 *   spec.warnThreshold  ratio (0, 1]; absent: the --warn-threshold flag's
 *   spec.mode           "enforce" (default), "warn" or "audit"
 *   spec.undeclared     "infer" or "refuse" (issue 19): refuse takes GPU_MEMORY_LIMIT only on
 *                       the selected nodes (policyset.h); absent or infer: the flag's
 *   spec.tiers[]        at most GPUPOLICY_TIERS_MAX, names unique:
 *     name                 a DNS label (1..63 of [a-z0-9-], alphanumeric at both ends)
 *     priorityClassNames[] the pod's spec.priorityClassName is one of them
 *     namespaces[]         the pod's namespace is one of them
 *     podSelector          a LabelSelector on the pod's labels
 *                          A pod belongs to a tier when every criterion given matches (at
 *                          least one must be given); the first tier it belongs to, in order.
 *                          Pods of no tier fall under the node threshold only.
 *     maxShare             ratio (0, 1] of the node's GPU memory (of the pod's pool, on a MIG
 *                          mixed node) the tier's pods may declare together; absent: no budget
 *                          of its own ("the rest": the threshold still applies)
 *     yield                {tier: another tier of this policy that has a maxShare,
 *                           above: ratio (0, 1]}: this tier's pods are refused while that tier
 *                          declares more than above x its budget on the node.
 * The seed's example (docs/policies.md, examples/policies/realtime-batch.yaml): realtime
 * maxShare 0.60; batch without maxShare and yield {tier: realtime, above: 0.80}.
 *
 * The API server validates the same rules (OpenAPI schema and CEL in the CRD), so a bad policy
 * is refused at kubectl apply; gpupolicy_parse() checks them again and says what is wrong
 * (written to the policy's status by the webhook, never ignored silently).
 *
 * Precedence (gpupolicy_resolve): for the node threshold, the node's annotation
 * gpu-memory-guard.io/threshold beats policies, which beat the flags. Where several policies
 * select one node, each is applied in its own mode: the strictest threshold of the enforcing
 * ones enforces, the strictest of the warning ones warns, the strictest of the auditing ones
 * audits, and every tier limit of every policy applies in its policy's mode. A policy in warn
 * or audit mode changes nothing that is enforced: the flags (or the annotation) stay in force
 * beside it. In detail:
 *   annotation: one check, the flags' mode, the annotation's threshold, the flags' warn
 *     threshold, source "node annotation"; no policy threshold is used.
 *   else: enforce check = the smallest threshold of the enforce-mode policies that set one
 *     (source: that policy, the first on ties), or without any the flags (in the flags' mode);
 *     warn check = the smallest of the warn-mode policies, merged into the flags' check (the
 *     smaller threshold) when that is itself a warn check; audit check = the smallest of the
 *     audit-mode policies. A check's warn_threshold: the smallest warnThreshold of the
 *     policies of its mode that set one (with or without a threshold: a policy may ask only
 *     for earlier warnings), else the flags'; the annotation's check takes the enforcing
 *     policies' the same way.
 *
 * Ratios are applied at parts per million, like policy.h: budget = floor(bytes x ppm / 1e6).
 * Thread-safe: a parsed policy is read-only.
 */
#ifndef GMG_GPUPOLICY_H
#define GMG_GPUPOLICY_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

struct cJSON;

#define GPUPOLICY_GROUP         "gpu-memory-guard.io"
#define GPUPOLICY_VERSION       "v1alpha1"
#define GPUPOLICY_KIND          "GPUMemoryPolicy"
#define GPUPOLICY_PLURAL        "gpumemorypolicies"
#define GPUPOLICY_TIERS_MAX     16
#define GPUPOLICY_NAME_MAX      254 /* metadata.name: a DNS subdomain, 253 bytes */
#define GPUPOLICY_TIER_NAME_MAX 64
#define GPUPOLICY_LIST_MAX      64 /* priorityClassNames, namespaces, values per list */
#define GPUPOLICY_EXPR_MAX      32 /* matchLabels + matchExpressions per selector */
#define GPUPOLICY_ERR_MAX       512
#define GPUPOLICY_MSG_MAX       POLICY_MSG_MAX

#define GPUPOLICY_EINVAL (-1) /* not a usable policy: err says which field and why */
#define GPUPOLICY_ENOMEM (-2)

enum gpupolicy_mode { GPUPOLICY_ENFORCE = 0, GPUPOLICY_WARN = 1, GPUPOLICY_AUDIT = 2 };

/* Labels of a node or a pod: n pairs, kv[2i] the key, kv[2i+1] the value. Borrowed. */
struct gpupolicy_labels {
	const char *const *kv;
	size_t n;
};

enum labelsel_op { LABELSEL_IN = 0, LABELSEL_NOTIN, LABELSEL_EXISTS, LABELSEL_DOESNOTEXIST };

struct labelsel_req {
	char *key;
	enum labelsel_op op;
	char **values; /* In/NotIn: at least one; matchLabels k: v is In [v] */
	size_t n_values;
};

/* A LabelSelector; no requirement selects everything. */
struct labelsel {
	struct labelsel_req *reqs;
	size_t n;
};

struct gpupolicy_tier {
	char name[GPUPOLICY_TIER_NAME_MAX];
	char **priority_classes;
	size_t n_priority_classes;
	char **namespaces;
	size_t n_namespaces;
	int has_pod_selector;
	struct labelsel pod_selector;
	int has_max_share;
	double max_share;   /* ratio (0,1] */
	int yield_to;       /* index of the tier yielded to, or -1 */
	double yield_above; /* ratio (0,1] of that tier's budget */
};

struct gpupolicy {
	char name[GPUPOLICY_NAME_MAX];
	int64_t generation;
	struct labelsel node_selector;
	int has_threshold;
	double threshold; /* ratio (0,1] */
	int has_warn_threshold;
	double warn_threshold; /* ratio (0,1] */
	enum gpupolicy_mode mode;
	/* spec.undeclared: "refuse" (1): the pool takes GPU_MEMORY_LIMIT declarations only, a pod
	 * counted from another source is refused in the policy's mode (policyset.h); "infer" or
	 * absent (0): as --undeclared says (a policy cannot infer where the flag refuses) */
	int undeclared_refuse;
	struct gpupolicy_tier tiers[GPUPOLICY_TIERS_MAX];
	size_t n_tiers;
};

/*
 * Decode a GPUMemoryPolicy object (borrowed). 0 and *out (caller owns it: gpupolicy_free), or
 * GPUPOLICY_EINVAL with err naming the field ("spec.tiers[1].maxShare: must be a number in
 * (0, 1], got 1.5") and *out NULL, or GPUPOLICY_ENOMEM (nothing left allocated). Unknown
 * fields are ignored (the API server prunes them), and so is a field that is null. Beyond the
 * rules above: metadata.name must be a DNS subdomain (the API server's rule for a custom
 * resource; the name is printed in messages, which never hold a '%'); an empty
 * priorityClassNames or namespaces list counts as not given; a label value may be "".
 * err may be NULL.
 */
int gpupolicy_parse(const struct cJSON *obj, struct gpupolicy **out, char *err, size_t errlen);
void gpupolicy_free(struct gpupolicy *p); /* NULL is a no-op */

/* 1 when sel matches labels (LabelSelector semantics), else 0. */
int labelsel_match(const struct labelsel *sel, const struct gpupolicy_labels *labels);

/* 1 when p selects a node of these labels. */
int gpupolicy_selects(const struct gpupolicy *p, const struct gpupolicy_labels *node_labels);

/*
 * Which policies apply to a node, the one rule (the webhook, the extender, the report and the
 * policy store's readers): of the usable policies (p not NULL: an object that failed to parse
 * applies nowhere) that select the node, the first GPUPOLICY_SELECT_MAX in name order. A node
 * whose labels are unknown (node_labels NULL: the API path without its Node) is selected only by
 * the policies with an empty nodeSelector. gpupolicy_applies() is that test for one policy.
 *
 * gpupolicy_select() is the rule over pols[0..n) (borrowed; an entry may be NULL, a policy that
 * failed to parse), which the caller gives in name order: ascending strcmp() of metadata.name,
 * each name once (a Kubernetes name is unique; the policy store keeps one entry per name, the
 * report refuses a name listed twice). It writes to out the policies that apply, in that order,
 * at most min(room, GPUPOLICY_SELECT_MAX) (room: the entries out holds; a caller placing pods
 * passes GPUPOLICY_SELECT_MAX), and returns how many. The pointers written are pols' (borrowed).
 * gpupolicy_select_all() is the same without the cap, at most room: the status writer counts
 * every selecting node, past the cap too (docs/policies.md). Pure.
 */
#define GPUPOLICY_SELECT_MAX 64
int gpupolicy_applies(const struct gpupolicy *p, const struct gpupolicy_labels *node_labels);
size_t gpupolicy_select(const struct gpupolicy *const *pols, size_t n,
                        const struct gpupolicy_labels *node_labels, const struct gpupolicy **out,
                        size_t room);
size_t gpupolicy_select_all(const struct gpupolicy *const *pols, size_t n,
                            const struct gpupolicy_labels *node_labels,
                            const struct gpupolicy **out, size_t room);

/* The index of the first tier of p the pod belongs to, or -1. priority_class may be NULL or
 * "" (none); labels may be NULL (none). */
int gpupolicy_tier_of(const struct gpupolicy *p, const char *ns, const char *priority_class,
                      const struct gpupolicy_labels *pod_labels);

/* ---- the node threshold: which checks apply (precedence) ---- */

struct gpupolicy_flags {
	double threshold;      /* --threshold */
	double warn_threshold; /* --warn-threshold */
	enum policy_mode mode; /* --mode: enforce or warn */
};

/* One threshold check placement_decide() runs. */
struct gpupolicy_check {
	enum gpupolicy_mode mode; /* how a breach is handled: deny, warning, audit annotation */
	double threshold;         /* ratio (0,1] */
	double warn_threshold;    /* ratio (0,1]; for the early warning of an allowed placement */
	const char *source;       /* "flags", "node annotation", or the policy's name (borrowed
	                             from the policy) */
	const struct gpupolicy *policy; /* the policy that set the threshold, NULL: the flags or
	                                   the annotation (a policy may be named "flags") */
};

/* At most one check per mode, enforce first. */
struct gpupolicy_plan {
	struct gpupolicy_check checks[3];
	size_t n;
};

/* The checks for a node selected by policies sel[0..n) (n may be 0). annotation: the node's
 * threshold annotation when has_annotation (capacity.h). Pure; always fills *out. */
void gpupolicy_resolve(const struct gpupolicy *const *sel, size_t n,
                       const struct gpupolicy_flags *flags, int has_annotation, double annotation,
                       struct gpupolicy_plan *out);

/* ---- tiers ---- */

struct gpupolicy_tier_input {
	const struct gpupolicy *policy;
	const char *pod;            /* "namespace/name", for messages */
	const char *node;           /* for messages */
	int tier;                   /* the pod's tier in policy (gpupolicy_tier_of), -1: none */
	uint64_t demand_bytes;      /* the pod's declared bytes */
	uint64_t capacity_bytes;    /* what maxShare is a share of: the pod's pool on the node */
	const uint64_t *tier_bytes; /* [policy->n_tiers]: what each tier's pods already declare
	                               on the node (the pod itself not included) */
};

struct gpupolicy_tier_result {
	int violated;          /* 0: within every tier rule */
	const char *reason;    /* "TierOverShare", "TierYield" (static), NULL when not violated */
	uint64_t budget_bytes; /* the pod's tier budget (0 without maxShare) */
	char message[GPUPOLICY_MSG_MAX];
	/* TierOverShare: placing ml/b-3 (20Gi) on gpu-a would bring tier "batch" of
	 *   GPUMemoryPolicy "split" to 40Gi, above its budget of 40 percent of 80Gi (32Gi)
	 * TierYield: ml/b-3 (20Gi) is in tier "batch" of GPUMemoryPolicy "split", which yields to
	 *   tier "realtime": on gpu-a "realtime" declares 40Gi, above 80 percent of its budget
	 *   (38.4Gi of 48Gi, 60 percent of 80Gi)
	 * No '%' (see policy.h). */
};

/* Judge the tier rules of one policy for one placement: over-share first, then yield. 0, or -1
 * (not violated, message says why) for a NULL input, a tier index out of range, no tier_bytes,
 * or a hand-made policy whose yield does not name another tier with a maxShare. A pod of no
 * tier never violates. */
int gpupolicy_check_tiers(const struct gpupolicy_tier_input *in, struct gpupolicy_tier_result *out);

/* "enforce", "warn", "audit" */
const char *gpupolicy_mode_name(enum gpupolicy_mode m);

#endif
