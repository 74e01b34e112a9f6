/*
 * holds: the extender's pods in flight, those the scheduler may have assumed on a node whose
 * Binding has not yet reached the webhook nor the watch cache.
 *
 * kube-scheduler runs one scheduling cycle at a time but binds asynchronously: after the
 * filter passed a pod P and the scheduler assumed it on one of the passing nodes, the next
 * pod Q is filtered while P's Binding is still in flight. Neither the watch cache (P is not
 * bound yet) nor the reservations (the webhook has not admitted P's Binding yet) show P, so a
 * filter that reads only them passes Q onto P's node and the webhook refuses one of the two
 * Bindings. The extender does not learn which node the scheduler picked (no bind verb), so a
 * hold counts P on every node its filter passed: on the safe side, for as long as it is in
 * flight. Q may then be refused on a node that P will not take; the scheduler retries Q when
 * P's Binding lands (a pod event), with its own backoff.
 *
 * A hold ends when its pod settles (the caller's settled(): bound, finished, deleted or
 * replaced, as the watch cache shows), when the webhook admits its Binding (holds_drop, by
 * extender_binding_admitted), when the pod is reported gone (holds_forget), when the
 * same pod is filtered again (holds_put replaces it), or after its TTL (HOLDS_TTL_MS: past it a
 * Binding still in flight is counted by the webhook, the safety net). A pod reported gone
 * before its filter call ended (deleted while the scheduler judged it) is remembered, among the
 * last HOLDS_GONE_MAX gone, so its late hold is refused (HOLDS_EGONE) instead of counting for
 * the whole TTL: kube-scheduler does not retry the pods a hold refused when the hold merely
 * expires (no cluster event), only after its unschedulable-pod timeout (5 minutes).
 *
 * Nodes are remembered by a 64-bit FNV-1a hash of their name: two names that collide count a
 * hold on both, which only errs on the safe side.
 *
 * Thread-safe (a read-write lock). Clock: callers pass now_ms (monotonic, ledger_now_ms()),
 * so tests drive time. Caps: HOLDS_MAX pods, HOLDS_MAX_NODES nodes a pod.
 */
#ifndef GMG_HOLDS_H
#define GMG_HOLDS_H

#include <stddef.h>
#include <stdint.h>

#define HOLDS_MAX       8192  /* pods in flight at once */
#define HOLDS_MAX_NODES 15000 /* nodes one hold names (EXTENDER_MAX_NODES) */
/* How long a hold lives without being settled: longer than a Binding's round trip through the
 * API server and the webhook (the webhook's timeoutSeconds is at most 30). */
#define HOLDS_TTL_MS 30000
/* uids of pods reported gone remembered (holds_forget): deletions that may race a filter call
 * within milliseconds; a 64-bit hash of the uid, so a collision only refuses a hold. */
#define HOLDS_GONE_MAX 4096

#define HOLDS_EFULL  (-1) /* HOLDS_MAX live holds */
#define HOLDS_ENOMEM (-2)
#define HOLDS_EINVAL (-3) /* key or uid NULL or empty, or more than HOLDS_MAX_NODES nodes */
#define HOLDS_EGONE  (-4) /* the pod was reported gone (holds_forget): nothing held */

struct holds; /* opaque */

/* New empty table; NULL on allocation failure. Caller owns it (holds_free). */
struct holds *holds_new(void);
void holds_free(struct holds *h); /* NULL is a no-op; no call may be running */

/* Pod key ("namespace/name") with uid, declaring bytes, may be bound to any of
 * nodes[0..n): count it there until now_ms + ttl_ms. Replaces the pod's (uid's) previous hold;
 * n == 0 drops it. Strings are copied. 0 or HOLDS_E*. */
int holds_put(struct holds *h, const char *key, const char *uid, uint64_t bytes,
              const char *const *nodes, size_t n, uint64_t now_ms, uint64_t ttl_ms);

/* Drop the hold of uid, if any. */
void holds_drop(struct holds *h, const char *uid);

/* The pod of uid is gone (deleted, finished): drop its hold and refuse any later holds_put of
 * it (HOLDS_EGONE) while it is among the last HOLDS_GONE_MAX forgotten. NULL or "" is a no-op. */
void holds_forget(struct holds *h, const char *uid);

/* Drop the expired holds and those settled(ctx, key, uid) says are settled (1). settled is
 * called with the table locked: it must not call holds functions. Returns holds left. */
typedef int (*holds_settled_fn)(void *ctx, const char *key, const char *uid);
size_t holds_prune(struct holds *h, uint64_t now_ms, holds_settled_fn settled, void *ctx);

/* Call add(add_ctx, key, uid, bytes) for every live hold that names node, but the hold of
 * except_uid (the pod being judged; may be NULL). Returns how many were given; *bytes_out
 * (may be NULL) gets their sum (saturated). add is called with the table read-locked. */
typedef void (*holds_add_fn)(void *add_ctx, const char *key, const char *uid, uint64_t bytes);
size_t holds_each(struct holds *h, const char *node, const char *except_uid, uint64_t now_ms,
                  holds_add_fn add, void *add_ctx, uint64_t *bytes_out);

/* Live and expired-but-not-pruned holds. */
size_t holds_count(struct holds *h);

#endif
