/*
 * resvrule: when a reservation stops counting, written once (core box of ARCHITECTURE.md: the
 * rules reservations.h lists, "When a reservation stops counting"). Every backend (the local
 * ledger, ledger.c; the shared record, record.c and shared.c), the engine (placer.c) and the
 * core (placement.c) ask these functions instead of writing the test out.
 *
 * Why a header of its own in core/ rather than in reservations.h: the core (placement.c) and
 * the backends below reservations.h both need the rules, and the core includes nothing of the
 * cluster box. The functions are the reservations concept's, hence the resv_ prefix.
 *
 * Units: ms on whichever clock the caller's entry is stamped on (the ledger's monotonic now_ms,
 * the record's shared-clock Unix ms): the two arguments are on the same one. Strings and the Pod
 * object are borrowed; nothing is allocated. Pure and thread-safe. Header only (static inline)
 * but resv_pod_gone, which reads a Pod object (resvrule.c).
 */
#ifndef GMG_RESVRULE_H
#define GMG_RESVRULE_H

#include <stdint.h>
#include <string.h>

#include "pod.h"
#include "satmath.h"

struct cJSON;

/* Rule 1, expiry: 1 when an entry expiring at expires_ms no longer counts at now_ms (it counts
 * up to, not at, its expiry), else 0. */
static inline int resv_expired(uint64_t expires_ms, uint64_t now_ms)
{
	return expires_ms <= now_ms;
}

/*
 * Rule 2, the same pod visible, as the local ledger settles (and the engine asks before it
 * looks a reservation's pod up): 1 when the visible pod (pod_key, pod_uid) settles at once the
 * entry of (key, uid), else 0. pod.h's strict rule: the keys equal and, where both are known
 * (not NULL nor ""), the uids; an entry under a key no pod has (webhook.c's key of a pod named
 * by generateName) never settles by a view and lives until its expiry. A NULL key settles
 * nothing. Symmetric.
 */
static inline int resv_settled_by(const char *key, const char *uid, const char *pod_key,
                                  const char *pod_uid)
{
	return pod_same_strict(key, uid, pod_key, pod_uid);
}

/*
 * Rule 2 as the shared record settles, a different rule on purpose (reservations.h, rule 2;
 * record.h, RECORD_SETTLE_GRACE_MS): 1 when the pod (pod_key, pod_uid), which the watch cache
 * has shown on the node since seen_ms (monotonic ms; 0: not shown), settles the record entry of
 * (key, uid) at now_mono_ms: shown for at least grace_ms (every replica's cache has seen it by
 * then) and the same pod by pod.h's pod_same (the core's counting rule: the uids equal where
 * both are known, else the keys). A NULL pod_key settles nothing. Sums saturate.
 */
static inline int resv_record_settled_by(const char *key, const char *uid, const char *pod_key,
                                         const char *pod_uid, uint64_t seen_ms,
                                         uint64_t now_mono_ms, uint64_t grace_ms)
{
	return pod_key != NULL && seen_ms != 0 && sat_add(seen_ms, grace_ms) <= now_mono_ms &&
	       pod_same(key, uid, pod_key, pod_uid);
}

/*
 * Rule 3, the pod gone, as the local ledger forgets (ledger_forget: the watch cache reported the
 * pod (gone_key, gone_uid) deleted or finished): 1 when the entry of (key, uid) goes with it,
 * else 0. pod.h's strict rule, as rule 2's resv_settled_by: the keys equal and, where both are
 * known, the uids (an entry without a uid goes with the gone pod of its key; a gone pod known only
 * by its key takes every entry of that key). A NULL key matches nothing. Symmetric.
 */
static inline int resv_gone_by(const char *key, const char *uid, const char *gone_key,
                               const char *gone_uid)
{
	return pod_same_strict(key, uid, gone_key, gone_uid);
}

/*
 * Rule 3 as the shared record forgets (shared_forget remembers a gone pod by its uid only): 1
 * when the entry of uid goes with the gone pod of gone_uid, both known (not NULL nor "") and
 * equal, else 0. An entry without a uid never goes with a gone pod: it counts until its expiry
 * (the safe side). Symmetric.
 */
static inline int resv_record_gone_by(const char *uid, const char *gone_uid)
{
	return uid != NULL && uid[0] != '\0' && gone_uid != NULL && gone_uid[0] != '\0' &&
	       strcmp(uid, gone_uid) == 0;
}

/*
 * Rule 3 as the API path judges a reserved pod it looked up because its list of the node did not
 * show it (placer.c; the ledger only): why the pod (borrowed, the API server's Pod object)
 * no longer needs a reservation on node, as static text ("bound to another node", "finished",
 * "deleted before binding"), or NULL to keep it (bound to node, or unbound and not deleting: its
 * Binding has not landed, or failed and will be retried). A pod the API server no longer has
 * (404) is gone too: the caller's, as "deleted". NULL pod: as an unbound, live pod (NULL).
 */
const char *resv_pod_gone(const struct cJSON *pod, const char *node);

#endif
