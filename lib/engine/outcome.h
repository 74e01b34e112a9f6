/*
 * outcome: what one review decided, before any wire format (ARCHITECTURE.md, between the
 * engine loop and its adapters): allowed or refused, the refusal's code and reason, the
 * message and warnings users read, the GPUMemoryPolicy audit entries, where the decision was
 * read from, and how long the review waited (API calls, locks: not its own time). The engine
 * loop (placer.h) fills it; the admission adapter (webhook.h) applies --mode, encodes it as an
 * AdmissionReview response and logs and counts it.
 *
 * A struct outcome lives on the caller's stack or in its review; it holds no pointer it owns
 * (reason, status_reason, source, by_mode and audit_reasons are static strings). Not
 * thread-safe: one review, one thread at a time.
 */
#ifndef GMG_OUTCOME_H
#define GMG_OUTCOME_H

#include <stddef.h>

#include "admission.h"
#include "demand.h"
#include "gpupolicy.h"
#include "metrics.h"
#include "policy.h"
#include "policyset.h"

#define OUTCOME_WARNINGS 2  /* warnings kept; the API server shows each to the user */
#define OUTCOME_UID_MAX  64 /* metadata.uid (a UUID is 36), as LEDGER_UID_MAX */

struct outcome {
	int allowed;
	int code;                   /* the refusal's HTTP status (403, 500), 0 when allowed */
	const char *status_reason;  /* the refusal's status.reason ("Forbidden", "InternalError") */
	const char *reason;         /* short machine reason, for logs and metrics */
	enum metrics_decision mdec; /* for the metric */
	int quiet;                  /* log at debug: always-allowed traffic */
	char node[ADMISSION_NAME_MAX + 1];
	char message[ADMISSION_MSG_MAX];
	char warnings[OUTCOME_WARNINGS][POLICY_MSG_MAX]; /* admission_encode cuts each to the
	                                                    API's limit */
	size_t n_warnings;
	double t0;     /* when the review arrived, monotime_s() seconds */
	double waited; /* seconds blocked in API calls and on the node lock: not our own time */
	const char *source; /* placements: "cache" or "api" */
	int api_failed;     /* the API path could not ask the API server: the cache may decide
	                       if its watch broke only moments ago (webhook.h) */
	/* Breaches of GPUMemoryPolicy objects in audit mode: the auditAnnotations entry (each
	 * "GPUMemoryPolicy \"name\" (audit): message", joined by " | ") and the reasons for the
	 * metric. */
	char audit[ADMISSION_MSG_MAX];
	const char *audit_reasons[POLICYSET_AUDIT]; /* static strings */
	size_t n_audit;
	char policy[GPUPOLICY_NAME_MAX]; /* the policy that refused, "" when none */
	const char *by_mode; /* "warn" or "audit": admitted only because of --mode; NULL: not */
	char demand[DEMAND_MSG_MAX]; /* the pod's demand source on the node, "" when strict */
	/* The uid of the pod whose reservation on node this placement recorded (committed to
	 * the ledger, or written to the node's Lease), "" when none was (refused, dry run,
	 * allowed without one, or a pod without a uid). */
	char reserved_uid[OUTCOME_UID_MAX];
};

/* The placement recorded a reservation of the pod uid (NULL: none known) on o->node: reserved_uid
 * (what ends the pod's extender holds, webhook.h binding_admitted). */
void outcome_reserved(struct outcome *o, const char *uid);

/* Allowed, for reason (static). quiet: logged at debug. */
void outcome_allow(struct outcome *o, const char *reason, int quiet);

/* Refused with code (403: the placement is refused; 500: it could not be checked) and reason
 * (static); the message is formatted (cut at ADMISSION_MSG_MAX). */
void outcome_deny(struct outcome *o, enum metrics_decision mdec, int code, const char *reason,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Add a warning (copied, cut at POLICY_MSG_MAX); NULL or "" is ignored, and so is any past
 * OUTCOME_WARNINGS. */
void outcome_warn(struct outcome *o, const char *text);

/*
 * The API server could not be asked (rc: a KUBE_E* code from call, why its one-line reason):
 * refused, naming the call. KUBE_ENOTFOUND is an answer (403 NotFound); anything else fails
 * closed (500 APIServerUnavailable). The scheduler retries a refused Binding with backoff, so
 * a short outage delays GPU pods rather than overfilling a node.
 */
void outcome_fail_closed(struct outcome *o, const char *pod, const char *call, int rc,
                         const char *why);

/*
 * Before an API call: when the review already spent budget_ms (ms since o->t0; 0: no budget)
 * waiting or working, refuse now (500 APIServerUnavailable) rather than answer after the API
 * server gave up on us. Returns 1 when refused.
 */
int outcome_over_budget(struct outcome *o, unsigned long long budget_ms, const char *pod,
                        const char *call);

/* Append "--mode audit: text" to the auditAnnotations entry (cut at its cap). */
void outcome_audit_mode(struct outcome *o, const char *text);

/* Keep the verdict's GPUMemoryPolicy audit entries (copied: ps may go after the call). */
void outcome_keep_audit(struct outcome *o, const struct policyset_result *ps);

#endif
