/*
 * policy: the placement decision. Pure: no I/O, no clock, no allocation.
 *
 * Rule: allow when used + demand <= threshold x capacity; otherwise deny (enforce mode) or
 * allow with the same text as a warning (warn mode). Allowed placements whose total passes
 * warn_threshold x capacity carry a warning. A demand that can never fit (a container's
 * per-GPU share above threshold x one GPU's memory) is refused with a message that says so.
 *
 * Message shape (deny; the user reads it after `admission webhook "..." denied the request: `):
 *   placing inference/llama-0 (24Gi) on gpu-node-a would declare 100.2Gi of 79.6Gi GPU memory
 *   (126%), above the 90% limit (71.7Gi); already there: team-b/chat-0 20Gi, team-b/chat-1 20Gi,
 *   ... and 3 more
 * Percentages are rounded down; sizes use quantity_format().
 *
 * Thread-safe.
 */
#ifndef GMG_POLICY_H
#define GMG_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define POLICY_MSG_MAX       1024
#define POLICY_TOP_CONSUMERS 5   /* consumers named in a message */
#define POLICY_NAME_MAX      320 /* "namespace/name" */

enum policy_mode { POLICY_ENFORCE = 0, POLICY_WARN = 1 };

/* One pod (or in-flight reservation) already using GPU memory on the node. */
struct policy_consumer {
	char name[POLICY_NAME_MAX]; /* "namespace/name"; reservations get " (admitting)" */
	uint64_t bytes;
};

struct policy_input {
	const char *pod;          /* "namespace/name" of the pod being placed (borrowed) */
	const char *node;         /* node name (borrowed) */
	uint64_t demand_bytes;    /* effective pod demand */
	uint64_t max_per_gpu_bytes; /* largest per-GPU share of one container */
	const char *max_per_gpu_container;
	uint64_t capacity_bytes;  /* node HBM total */
	uint64_t per_gpu_bytes;   /* one GPU's memory */
	uint64_t gpu_count;
	double threshold;         /* ratio (0,1] in force for this node */
	double warn_threshold;    /* ratio (0,1]; >= threshold disables the early warning */
	enum policy_mode mode;
	uint64_t used_bytes;      /* sum over every consumer already on the node */
	/* The largest consumers, sorted by bytes descending (borrowed; may be fewer than the
	 * total number of consumers: n_consumers_total tells how many there are). */
	const struct policy_consumer *consumers;
	size_t n_consumers;
	size_t n_consumers_total;
};

enum policy_verdict {
	POLICY_ALLOW = 0,          /* fits under the threshold */
	POLICY_ALLOW_WARN = 1,     /* fits, above the warn threshold (warning set) */
	POLICY_DENY = 2,           /* over the threshold, enforce mode */
	POLICY_DENY_NEVER_FITS = 3,/* a container's per-GPU share exceeds one GPU's budget */
	POLICY_WARN_ONLY = 4,      /* over the threshold, warn mode: allowed, warning set */
};

struct policy_decision {
	enum policy_verdict verdict;
	int allowed;                 /* 1 for ALLOW, ALLOW_WARN, WARN_ONLY */
	const char *reason;          /* short machine reason: "Fits", "OverThreshold", "NeverFits",
				        "WarnThreshold" (static string) */
	char message[POLICY_MSG_MAX];/* deny message, or the warning text when allowed */
	uint64_t budget_bytes;       /* floor(threshold x capacity) */
	uint64_t total_bytes;        /* used + demand (saturating) */
};

/* Decide. Always fills *out. Returns 0, or -1 for an input that makes no sense (NULL,
 * threshold outside (0,1], zero capacity) with out->message saying which. */
int policy_decide(const struct policy_input *in, struct policy_decision *out)
	__attribute__((warn_unused_result));

#endif
