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
 *   (125 percent), above the 90 percent limit (71.7Gi); already there: team-b/chat-0 20Gi,
 *   team-b/chat-1 20Gi, ... and 3 more
 * Percentages are rounded down and spelled "percent": no message contains '%', because
 * kube-scheduler passes a refused binding's message to Eventf as the format string
 * (pkg/scheduler/schedule_one.go) and "90%" would reach users as "90%!l(MISSING)". Sizes use
 * quantity_format() (nearest tenth). Consumers that do
 * not fit in POLICY_MSG_MAX are counted in "... and N more", never cut. With no consumer list
 * the text ends "; already there: <used_bytes>" (or "; nothing else there" when used is 0).
 * Never fits (checked first; enforce mode denies, warn mode allows with it as a warning):
 *   inference/llama-0 can never fit on gpu-node-a: container "vllm" declares 75Gi per GPU,
 *   above the 90 percent limit of one GPU's 80Gi (72Gi)
 *   (with a sharing rule: "...; time-sliced: both slices may land on one card"; "GPU" is the
 *   piece_what: "MPS client", "MIG slice")
 *   inference/llama-0 can never fit on gpu-node-a: it declares 600Gi, above the 90 percent
 *   limit of the node's 640Gi GPU memory (576Gi)
 * Early warning (allowed, total above warn_threshold x capacity):
 *   placing ns/p (24Gi) on n1 brings it to 524Gi of 640Gi GPU memory (81 percent), above the
 *   80 percent warning level; the limit is 90 percent (576Gi)
 * Ratios are applied at parts-per-million resolution so budgets are exact integers:
 * budget = floor(capacity x round(threshold x 1e6) / 1e6); at the budget exactly is allowed.
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
	const char *pod;            /* "namespace/name" of the pod being placed (borrowed) */
	const char *node;           /* node name (borrowed) */
	uint64_t demand_bytes;      /* effective pod demand */
	uint64_t max_per_gpu_bytes; /* largest per-GPU share of one container */
	const char *max_per_gpu_container;
	uint64_t capacity_bytes; /* node HBM total */
	uint64_t per_gpu_bytes;  /* one GPU's memory (or the piece max_per_gpu_bytes lands on);
	                            0 skips the per-GPU check */
	const char *piece_what;  /* what per_gpu_bytes is: NULL or "GPU", "MPS client", ... */
	const char *piece_rule;  /* the sharing rule that made max_per_gpu_bytes, appended to a
	                            never-fits message after "; " (NULL or "": none) */
	const char *pool_note;   /* what capacity_bytes is when not the node's whole memory (MIG
	                            mixed), appended to an over-threshold or warning message after
	                            "; " (NULL or "": none) */
	uint64_t gpu_count;
	double threshold;      /* ratio (0,1] in force for this node */
	double warn_threshold; /* ratio (0,1]; >= threshold or <= 0 disables the warning */
	enum policy_mode mode;
	uint64_t used_bytes; /* sum over every consumer already on the node */
	/* The largest consumers, sorted by bytes descending (borrowed; may be fewer than the
	 * total number of consumers: n_consumers_total tells how many there are). */
	const struct policy_consumer *consumers;
	size_t n_consumers;
	size_t n_consumers_total;
	int no_message; /* 1: verdict and numbers only; out->message stays empty (no formatting) */
};

enum policy_verdict {
	POLICY_ALLOW = 0,           /* fits under the threshold */
	POLICY_ALLOW_WARN = 1,      /* fits, above the warn threshold (warning set) */
	POLICY_DENY = 2,            /* over the threshold, enforce mode */
	POLICY_DENY_NEVER_FITS = 3, /* per-GPU share or the pod alone over budget, enforce */
	POLICY_WARN_ONLY = 4,       /* over or never fits, warn mode: allowed, warning set */
};

struct policy_decision {
	enum policy_verdict verdict;
	int allowed;                  /* 1 for ALLOW, ALLOW_WARN, WARN_ONLY */
	const char *reason;           /* short machine reason: "Fits", "OverThreshold", "NeverFits",
	                                 "WarnThreshold", "InvalidInput" (static string) */
	char message[POLICY_MSG_MAX]; /* deny message, or the warning text when allowed; empty
	                                 for POLICY_ALLOW (nothing to tell the user) */
	uint64_t budget_bytes;        /* floor(threshold x capacity) */
	uint64_t total_bytes;         /* used + demand (saturating) */
};

/* Decide. Always fills *out. Returns 0, or -1 for an input that makes no sense (NULL,
 * threshold outside (0,1], warn_threshold NaN or above 1, zero capacity, n_consumers without
 * consumers) with out->message saying which, verdict POLICY_DENY, allowed 0 and reason
 * "InvalidInput". NULL pod/node names are printed as "(unnamed pod)"/"(unnamed node)". */
int policy_decide(const struct policy_input *in, struct policy_decision *out)
    __attribute__((warn_unused_result));

/* A ratio (0,1] as the messages write it: "90 percent", "92.5 percent" (parts per million,
 * at most one decimal shown; never a '%'). buf of at least POLICY_RATIO_MAX bytes. */
#define POLICY_RATIO_MAX 32
void policy_format_ratio(double ratio, char *buf, size_t cap);

#endif
