/*
 * policystatus: the writer of GPUMemoryPolicy status (gpupolicy.h, policies.h). One replica
 * writes, elected with a coordination.k8s.io/v1 Lease (POLICYSTATUS_LEASE_NAME) in the
 * webhook's namespace, with client-go's leaderelection rules; the others only watch the Lease.
 *
 * The status written to each policy (PATCH .../gpumemorypolicies/NAME/status, merge patch):
 *   status.observedGeneration  metadata.generation of the object read
 *   status.nodes       GPU nodes of the watch cache whose labels it selects (0 when
 *                              unusable)
 *   status.conditions          [{type Ready, status "True", reason Applied, message "applied to
 *                              N nodes"} or {status "False", reason Invalid, message the parse
 *                              error}, with observedGeneration and lastTransitionTime (RFC 3339
 *                              UTC, kept while status stays the same)]
 * A status is written only when it differs from what this replica last wrote for the policy
 * (forgotten when leadership is lost: the next leader writes each policy once), or when the
 * object is another one of the same name (its metadata.uid changed: deleted and created again
 * between two rounds, without status).
 *
 * Election (k8s.io/client-go tools/leaderelection): every POLICYSTATUS_PERIOD_S the Lease is
 * read; absent: created with this replica as holder; held by this replica: renewed (PUT with
 * the resourceVersion read: a 409 means another replica wrote it first); held by another: taken
 * over only once POLICYSTATUS_LEASE_S have passed on the LOCAL monotonic clock since this
 * replica last saw its resourceVersion change (remote timestamps are not trusted: clocks
 * skew). While the store holds no policy the Lease is not touched at all (nothing to write:
 * a cluster without policies sees no writes), and leadership lapses.
 *
 * Single writer (config single_writer, --reservations local): the replica is the only one (the
 * chart refuses more than one with local reservations, which could overfill a node), so no
 * Lease is used (and none is granted: RBAC for Leases comes with shared reservations); it
 * always writes.
 *
 * Threads: one, started by policystatus_start. It copies what it needs from the policies and
 * the cache under their read locks, and holds no lock across an API call: placements never
 * wait for it. Failed writes are logged (warn, at most once a minute) and retried next round;
 * a refusal every policy would get alike (no answer, 401, 403, 429, 5xx) ends the round, so
 * that a missing RBAC rule costs one PATCH a round, not one per policy.
 */
#ifndef GMG_POLICYSTATUS_H
#define GMG_POLICYSTATUS_H

#include <stddef.h>

#include "gpupolicy.h"
#include "kube.h"

struct cJSON;
struct cache;
struct policies;
struct metrics_writer;

#define POLICYSTATUS_LEASE_NAME   "gpu-memory-guard-policy-status"
#define POLICYSTATUS_RESOURCE     "gpu-memory-guard.io/v1alpha1/gpumemorypolicies"
#define POLICYSTATUS_LEASE_S      15  /* spec.leaseDurationSeconds written */
#define POLICYSTATUS_PERIOD_S     5   /* seconds between rounds (renewals, status writes) */
#define POLICYSTATUS_IDENTITY_MAX 128 /* bytes of holderIdentity with its NUL */
#define POLICYSTATUS_ERROR_MAX    512 /* bytes of a parse error quoted in a condition */
#define POLICYSTATUS_UID_MAX      128 /* bytes of a metadata.uid kept with its NUL */
#define POLICYSTATUS_TIME_MAX     32  /* bytes of an RFC 3339 time with its NUL */
#define POLICYSTATUS_WARN_EVERY_S 60  /* seconds between two warnings of failed writes */

/* ---- pure parts (unit-tested) ---- */

/* What this replica last saw of the Lease: client-go's observedRecord and observedTime. */
struct policystatus_lease {
	int exists;
	char holder[POLICYSTATUS_IDENTITY_MAX]; /* spec.holderIdentity, "" when none */
	char rv[KUBE_RV_MAX];                   /* metadata.resourceVersion */
	long duration_s;                        /* spec.leaseDurationSeconds (<= 0: ours) */
	double observed_s; /* monotonic seconds when rv was last seen to change */
};

enum policystatus_action {
	POLICYSTATUS_CREATE = 0, /* no Lease: create one holding it */
	POLICYSTATUS_RENEW,      /* held by identity: renew */
	POLICYSTATUS_TAKEOVER,   /* held by another and expired (or released): take it */
	POLICYSTATUS_WAIT        /* held by another, not expired: follow */
};

/* Record a read of the Lease (lease NULL: absent) at now_s (monotonic seconds): observed_s
 * moves only when the resourceVersion changed (or the Lease appeared). */
void policystatus_observe(struct policystatus_lease *l, const struct cJSON *lease, double now_s);

/* What to do, from the last observation, now_s (monotonic seconds) and this replica's
 * identity. Expired: now_s >= observed_s + duration_s (POLICYSTATUS_LEASE_S when the Lease
 * says none). */
enum policystatus_action policystatus_decide(const struct policystatus_lease *l, double now_s,
                                             const char *identity);

/* One policy's status, as computed in a round. */
struct policystatus_entry {
	char name[GPUPOLICY_NAME_MAX];
	char uid[POLICYSTATUS_UID_MAX]; /* metadata.uid, "" when unknown */
	long long generation;
	int valid;                          /* 0: the parse error below */
	char error[POLICYSTATUS_ERROR_MAX]; /* gpupolicy_parse's message when !valid */
	size_t nodes;                       /* GPU nodes selected (valid only) */
	char ready_was[8];                  /* the object's Ready status as read, "" if none */
	char transition_was[POLICYSTATUS_TIME_MAX]; /* ... its lastTransitionTime */
};

/* The merge patch {"status": {...}} for e, lastTransitionTime transition (RFC 3339). Caller
 * owns it (cJSON_Delete); NULL on allocation failure. */
struct cJSON *policystatus_patch(const struct policystatus_entry *e, const char *transition);

/* RFC 3339 UTC seconds ("2026-11-30T16:00:00Z") of unix time t. */
void policystatus_rfc3339(long long t, char *buf, size_t cap);

/* This replica's holderIdentity: $POD_NAME when set (1..IDENTITY_MAX-1 bytes), else
 * "hostname_pid". */
void policystatus_identity(char *buf, size_t cap);

/* ---- the writer ---- */

struct policystatus_config {
	struct kube_client *kube;  /* borrowed; outlives the writer */
	int single_writer;         /* 1: no election, always write (see above) */
	const char *ns;            /* the Lease's namespace (copied); unused when single_writer */
	const char *identity;      /* copied; NULL: policystatus_identity() */
	struct cache *cache;       /* borrowed */
	struct policies *policies; /* borrowed */
	unsigned period_ms;        /* 0: POLICYSTATUS_PERIOD_S */
};

struct policystatus;

/* NULL on a bad config (logged) or allocation failure. Caller owns it. */
struct policystatus *policystatus_new(const struct policystatus_config *cfg);
/* Start the thread. 0, or -1 (logged). */
int policystatus_start(struct policystatus *s) __attribute__((warn_unused_result));
/* Stop the thread (within one API call's timeout) and free. NULL is a no-op. Call before the
 * cache, the policies and the client are freed. */
void policystatus_free(struct policystatus *s);

/* 1 while this replica holds the Lease (as of its last round). Thread-safe. */
int policystatus_leader(struct policystatus *s);

/* metrics_collector_fn:
 *   gpu_memory_guard_policy_status_leader   gauge, 1 while this replica writes status */
void policystatus_collect(void *ctx, struct metrics_writer *w);

#endif
