/*
 * flight: the pods in flight the engine counts for the scheduler extender (extender.h), those
 * its filter passed whose Binding has not yet reached the webhook nor the watch cache. It keeps
 * them in a holds table (holds.h, which says why a pod in flight must count and when a hold
 * ends) and decides, with the watch cache, what each may hold:
 *
 *   a hold is taken only for a pod the cache vouches for: the cache shows the pod's name with
 *   the same uid, unbound, not finished and not being deleted (the API server refuses to bind
 *   it: pod.h, pod_being_deleted), with a valid declaration (never the body's figure
 *   alone: ExtenderArgs is untrusted). It holds the cached pod's bytes; a pod whose GPU
 *   memory is worked out per node (an inferred share, or DRA claims) holds the most it came to
 *   on the nodes judged, and an inferred share only when the body asks what the cached pod
 *   asks; a body stating other bytes than the cached pod's that passed no node does not end
 *   its hold (its judgement is not the pod's). A call the cache does not vouch for leaves the
 *   uid's earlier hold as it was (a forged call cannot end a real pod's) and is counted by
 *   reason (gpu_memory_guard_extender_holds_refused_total, when it passed a node);
 *   a hold is settled (flight_prune) once the cache shows its pod bound (it then counts where
 *   it is), finished, being deleted, or replaced by another pod of the same name; a pod the
 *   cache does not show keeps its hold: the cache may not have seen a pod the scheduler already
 *   has (one it saw deleted is dropped by flight_forget).
 *
 * The engine reads a node's pods in flight before its reservations and its view (placer_fit):
 * a hold ends only once its pod is reserved or shown, so such a pod is counted at least once.
 *
 * Thread-safe (the holds table's lock; the cache's). Clock: callers pass now_ms (monotonic,
 * ledger_now_ms()).
 */
#ifndef GMG_FLIGHT_H
#define GMG_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

struct cache;
struct demand;
struct metrics;
struct placement_item;

/* flight_hold's answers (besides 0) */
#define FLIGHT_EFULL    (-1) /* HOLDS_MAX pods in flight: the hold is lost */
#define FLIGHT_ENOMEM   (-2) /* the hold is lost */
#define FLIGHT_EREFUSED (-3) /* the cache does not vouch for the pod: nothing held (counted) */

struct flight; /* opaque */

/* New, over cache (borrowed, must outlive it; NULL: --cache off, so no pod is vouched for and
 * nothing is held); metrics may be NULL (borrowed). NULL on allocation failure. Caller owns it
 * (flight_free). */
struct flight *flight_new(struct cache *cache, struct metrics *metrics);
void flight_free(struct flight *fl); /* NULL is a no-op; no call may be running */

/* Drop the holds expired at now_ms and those the cache shows settled (above). */
void flight_prune(struct flight *fl, uint64_t now_ms);

/* Node's pods in flight at now_ms but except_uid's (the pod being judged; may be NULL), as
 * placement items (key, uid, bytes; caller owns: resv_peek_free; NULL with *n 0 when none).
 * 0 or FLIGHT_ENOMEM (nothing returned). */
int flight_items(struct flight *fl, const char *node, const char *except_uid, uint64_t now_ms,
                 struct placement_item **items, size_t *n) __attribute__((warn_unused_result));

/* The pod a filter call judged, as its body states it (all borrowed). */
struct flight_pod {
	const char *key;        /* "namespace/name" */
	const char *uid;        /* metadata.uid; NULL or "": nothing is held */
	const struct demand *d; /* the body's demand (placer_classify_pod) */
	int dra_refs;           /* the body names DRA claims (dra_pod_refs().any) */
	uint64_t most_bytes;    /* the most its demand (and the whole DRA devices its claims
	                           take) came to on the nodes judged, bytes (core verdicts) */
};

/* 1 when the cache shows p's name with p's uid, in any state: a filter call for a pod it does
 * not show yet should give it time (flight_hold's wait_ms, on a worker). */
int flight_shows(struct flight *fl, const struct flight_pod *p);

/*
 * Hold p on nodes[0..n) (names borrowed; n 0: the uid's hold is dropped, if the cache vouches)
 * until now_ms + HOLDS_TTL_MS, if the cache vouches for it. wait_ms > 0 (on a worker only):
 * first give the cache up to that long to show the pod (the scheduler's informer may see a new
 * pod before ours does). 0 (also for a pod deleted while judged: nothing to hold), or
 * FLIGHT_EREFUSED, FLIGHT_EFULL, FLIGHT_ENOMEM.
 */
int flight_hold(struct flight *fl, const struct flight_pod *p, const char *const *nodes, size_t n,
                uint64_t now_ms, unsigned wait_ms);

/* The pod of uid is gone (deleted, finished): drop its hold and refuse its late holds (holds.h
 * holds_forget). NULL or "" is a no-op. */
void flight_forget(struct flight *fl, const char *uid);

/* The webhook admitted the Binding of the pod of uid: its reservation counts it from now on.
 * NULL or "" is a no-op. */
void flight_drop(struct flight *fl, const char *uid);

#endif
