/*
 * reservations: what was admitted on one node but is not visible yet (ARCHITECTURE.md,
 * "reservations"), as one interface over its two backends:
 *
 *   - the local ledger (--reservations local; ledger.h): this process's placements, per-node
 *     entries in memory;
 *   - the shared record (--reservations shared; record.h, shared.h): every replica's
 *     placements, one Lease per node in the API server.
 *
 * One placement on one node goes:
 *
 *   resv_begin_*   take the node's reservations as they stand, with what the backend needs to
 *                  tell later whether they changed (the ledger node's version; the record's
 *                  resourceVersion), and forget the entries that stopped counting (below);
 *   resv_items     the reservations that still count, as placement items for the core
 *                  (view_placement_node, core_decide);
 *   resv_put       the pod's own reservation, when the core admitted it with one;
 *   resv_commit    compare-and-swap: store the put only if the node's reservations are still
 *                  those begin took. RESV_COMMITTED, RESV_CONFLICT (they changed: begin again,
 *                  decide again), or an error (the caller denies: fail closed);
 *   resv_end       release what the transaction holds (always, whatever happened).
 *
 * When a reservation stops counting (one list for both backends; each rule is one function of
 * resvrule.h, which the backends, placer.c and the core call):
 *   1. expiry (resv_expired: an entry counts up to its expiry, not at it), judged on the
 *      reader's clock: the ledger's on the decision's monotonic clock (now_ms: ledger.h, the
 *      --reservation-ttl, or
 *      --unseen-reservation-ttl for a pod CREATE's, running from the put's real time even when
 *      the decision's clock is held back: resv_stamp_at); the record's on the shared clock's
 * earliest bound (record.h, "The argument"), so no reader drops it before the API server's clock
 *      reaches it. A record entry's expiry counts as at most what a replica could stamp when
 *      this replica first read that version of the Lease (the shared clock's latest bound plus
 *      its width plus --reservation-ttl: record.h, "The cap"), so an entry written with an
 *      expiry far ahead (a wrong clock, a forged Lease) stops counting too, never before a whole
 *      TTL on the API server's clock after it was read;
 *   2. the same pod visible: a visible pod and a reservation of the same pod (the uids equal
 *      where both are known, else the keys: placement.h) are counted once, as the pod, by the
 *      core. The entry itself goes: from the ledger at begin when the caller passes the pods
 *      it sees (resv_seen; ledger_settle: the watch cache's pods and the pods the node's DRA
 *      claims are reserved for, or the live list's pods when there is no cache), matched more
 *      strictly (resv_settled_by, which placer.c asks too before it looks a reservation's pod
 *      up: the keys equal and, where both are known, the uids: an entry under webhook.c's
 *      key for a pod named by generateName never settles and lives until its TTL); from the
 *      record at the next write, once the cache has shown the pod for RECORD_SETTLE_GRACE_MS
 *      (record_prune, resv_record_settled_by: by the core's rule, a difference on purpose:
 *      other replicas' caches must have seen it too);
 *   3. the pod gone: a pod reported deleted or finished before it was seen stops counting at
 *      once (ledger_forget, its entries by resv_gone_by: the keys equal and, where both are
 *      known, the uids; shared_forget, whose uids shared_load, shared_read and shared_each_entry
 *      drop, its entries by resv_record_gone_by: the uids, an entry without one counting until
 *      its expiry), and so does a reservation whose pod the API path looked up and found deleted
 *      (404), bound to another node, finished, or deleted before binding (resv_pod_gone;
 *      placer.c, drop_gone: ledger only).
 *   A put of a pod that already has an entry refreshes it (the same pod: in the ledger the keys
 *   equal and, where both are known, the uids; in the record pod.h's pod_same, the uids equal
 *   where both are known, else the keys, record.h), so a retried Binding counts once, and never
 * lowers what counts: the larger bytes, the later expiry, the uid and claim (resv_put) taken only
 * where it had none (ledger.h, record.h). A put under a pod's name with another uid is another
 * entry. So a review replayed or forged for a placed pod cannot shrink, shorten or take over its
 * reservation. The claim changes none of these rules: an entry carrying one expires, settles and is
 * forgotten as any other (issue 21).
 *
 * Units: bytes; now_ms is the decision's monotonic clock in ms (ledger_now_ms(), or held back
 * to the watch cache's progress by the caller); the record's own times are Unix ms on the
 * shared clock (shared.h); TTLs in ms.
 *
 * Ownership: a struct resv lives on the caller's stack. It borrows its backend (the ledger
 * node, the record working copy, the struct shared) for its whole life and owns the items
 * array resv_items returns (valid until resv_put, resv_commit or resv_end; keys and uids
 * borrowed from the backend's entries). Errors: RESV_E* (negative), err (one line) where a
 * call takes one.
 *
 * Thread-safety: one transaction per thread. The ledger backend's calls need the node locked
 * (ledger_lock) at begin, items and commit; between begin and commit the node may be released
 * (ledger_release) and taken again: commit then finds any change made meanwhile (its
 * version). The record backend takes no lock but shared's own; a commit is an API call.
 */
#ifndef GMG_RESERVATIONS_H
#define GMG_RESERVATIONS_H

#include <stddef.h>
#include <stdint.h>

#include "ledger.h"
#include "placement.h"
#include "record.h"

struct shared;

#define RESV_COMMITTED  0
#define RESV_CONFLICT   1    /* the node's reservations changed since begin: decide again */
#define RESV_ENOMEM     (-1) /* out of memory */
#define RESV_EFULL      (-2) /* the backend's cap per node (LEDGER_MAX_PER_NODE, RECORD_MAX_ENTRIES) */
#define RESV_EINVAL     (-3) /* a bad argument (an empty or too long key or uid, no put) */
#define RESV_EAPI       (-4) /* the record's write failed (not a conflict): err says why */
#define RESV_EBUDGET    (-5) /* the record's write timed out */
#define RESV_EBUSY      (-6) /* resv_peek_ledger, !may_block: the node is held */
#define RESV_EUNTRACKED (-7) /* resv_peek_ledger: the ledger cannot track the node */

enum resv_backend {
	RESV_LEDGER = 1,
	RESV_RECORD = 2,
};

/* The pods visible on the node, by identity (keys[i] "namespace/name", uids[i] NULL or ""
 * when unknown; uids may be NULL): the ledger forgets their entries at begin (rule 2). */
struct resv_seen {
	const char *const *keys;
	const char *const *uids;
	size_t n;
};

/* One node's transaction (private fields: use the functions). */
struct resv {
	enum resv_backend backend;
	uint64_t now_ms;
	uint64_t stamp_ms; /* the ledger put's expiry runs from it (resv_stamp_at) */
	/* ledger */
	struct ledger_node *ln;
	uint64_t version; /* ledger_version at begin */
	/* record */
	struct shared *sh;
	const char *node;
	struct record *rec;
	int fresh;
	uint64_t wall_ms; /* the shared clock's earliest bound at begin */
	uint64_t mono_ms; /* the monotonic clock at begin, for record_prune's grace */
	const struct placement_item *visible; /* the cache's pods, for record_prune; or NULL */
	size_t n_visible;
	size_t unseen_dropped;
	/* the put */
	int put;
	char key[LEDGER_KEY_MAX];
	char uid[LEDGER_UID_MAX];
	char claim[LEDGER_UID_MAX]; /* "" when none */
	uint64_t bytes, unseen_ttl_ms;
	/* resv_items' array */
	struct placement_item *items;
	size_t n_items;
	int own; /* resv_own_items: the items' strings are copies, freed with the array */
};

/*
 * Begin over the local ledger's node ln, locked by the caller. gen: the node's generation
 * (ledger_generation) when the caller's view of the node's pods was taken: when it has changed
 * since, an entry the view could miss was settled meanwhile, and begin returns RESV_CONFLICT
 * (take the view again). seen (may be NULL): the pods visible now, whose entries are forgotten
 * (rule 2): NULL settles nothing (nor drops expired entries: they are not counted anyway), an
 * empty list drops the expired ones. 0 (begun), RESV_CONFLICT, RESV_EINVAL (ln NULL). After any
 * return, resv_end is the caller's.
 */
int resv_begin_ledger(struct resv *r, struct ledger_node *ln, uint64_t gen,
                      const struct resv_seen *seen, uint64_t now_ms)
    __attribute__((warn_unused_result));

/*
 * Begin over the shared record rec of node (borrowed: a working copy the transaction changes
 * at put, as read by shared_load or shared_read, its resourceVersion the compare-and-swap
 * token). fresh: rec was read from the API server for this placement (shared_read), not this
 * process's last copy. visible (may be NULL, n_visible 0): the watch cache's pods on the node,
 * whose entries the put prunes after RECORD_SETTLE_GRACE_MS (rule 2). s gives the clocks, the
 * TTL and the write. 0 or RESV_EINVAL.
 */
int resv_begin_record(struct resv *r, struct shared *s, const char *node, struct record *rec,
                      int fresh, const struct placement_item *visible, size_t n_visible,
                      uint64_t now_ms) __attribute__((warn_unused_result));

/* Stamp the ledger put at stamp_ms instead of begin's now_ms: its TTL runs from there. For a
 * decision whose clock is held back (the watch cache's progress, behind the monotonic clock when
 * the watch went quiet; placer.c): the put is stamped on the real clock, so the lag does not come
 * off its TTL (rule 1). A stamp_ms not after now_ms changes nothing. The record's put is always
 * stamped on the shared clock (shared_stamp_wall_ms). */
void resv_stamp_at(struct resv *r, uint64_t stamp_ms);

/* Whether the reservations begin took are the backend's latest: always for the ledger; for the
 * record, whether it was read for this placement (a denial that counted a stale copy's entries
 * is worth a read and a second decision: other replicas may have pruned some). */
int resv_fresh(const struct resv *r);

/*
 * The reservations that still count at now_ms (rules 1 and 3; rule 2's same-pod counting is
 * the core's), oldest first, as placement items (key, uid, bytes, dra_claim as resv_put gave it
 * or NULL; the record's with their expiry on the now_ms clock). *items is the transaction's (valid
 * until resv_put, resv_commit or resv_end), NULL with *n 0 when there are none. 0 or RESV_ENOMEM.
 */
int resv_items(struct resv *r, const struct placement_item **items, size_t *n)
    __attribute__((warn_unused_result));

/* Make the items of later resv_items calls the transaction's own: their keys, uids and claims
 * copied (freed with the array), so that the ledger node may be let go (ledger_release) while the
 * core decides over them; resv_commit then finds any change made meanwhile (its version: the
 * local backend's compare-and-swap). The record backend's copy is the caller's anyway. */
void resv_own_items(struct resv *r);

/*
 * Put the pod's reservation of bytes: key ("namespace/name", or webhook.c's unique key of a pod
 * named by generateName), uid (NULL or "" unknown), claim (NULL or "": none): the uid of the
 * shared DRA claim the pod joined without being in its reservedFor (placement_result.
 * reserve_claim), carried by the entry (ledger_reserve_claim; the record's "claim", record.h)
 * and given back by resv_items as the item's dra_claim, so the core counts the pending pod
 * among the claim's pods. unseen_ttl_ms > 0: a pod CREATE's, whose pod
 * the API server may never store: it counts for that long when shorter than the backend's TTL
 * (--unseen-reservation-ttl; ledger_reserve_unseen, record_put_unseen); 0: the TTL. The record
 * backend prunes the copy first (expired entries, and the visible pods' past the grace) and
 * counts the expired unseen ones (resv_unseen_dropped). One put per transaction. 0,
 * RESV_EINVAL (also a claim not shorter than LEDGER_UID_MAX), RESV_EFULL (the record full).
 */
int resv_put(struct resv *r, const char *key, const char *uid, const char *claim, uint64_t bytes,
             uint64_t unseen_ttl_ms) __attribute__((warn_unused_result));

/* Entries of pod CREATEs never seen that the record backend's put dropped at their expiry (for
 * gpu_memory_guard_reservations_unseen_dropped_total); 0 for the ledger, which counts its own
 * (ledger_unseen_dropped). */
size_t resv_unseen_dropped(const struct resv *r);

/*
 * Commit the put by compare-and-swap.
 *   ledger: with the node locked, RESV_CONFLICT when its version changed since begin (an entry
 *   added, refreshed or dropped meanwhile, while the caller had released it), else the entry is
 *   recorded (ledger_reserve_uid / ledger_reserve_unseen): RESV_COMMITTED, RESV_EFULL,
 *   RESV_ENOMEM, RESV_EINVAL.
 *   record: shared_write of the copy with the resourceVersion read: RESV_COMMITTED,
 *   RESV_CONFLICT (409, or 404: read it again with shared_read and decide again), RESV_EBUDGET,
 *   RESV_EAPI, RESV_ENOMEM with err. (shared_place makes the same write for a whole batch of
 *   placements, its group commit: the webhook's placements commit there.)
 * Without a put: RESV_EINVAL.
 */
int resv_commit(struct resv *r, char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * Read-only: a copy of the reservations that count on node now, for a question that reserves
 * nothing (the scheduler extender's filter, placer_fit). Nothing is settled, forgotten or
 * written, and no lock is held on return.
 *   ledger (resv_peek_ledger): the node's live entries at now_ms (rule 1), read under its lock
 *   (ledger_trylock when !may_block: RESV_EBUSY when another placement holds it), the entries
 *   of pods reported gone already forgotten (rule 3); RESV_EUNTRACKED when the ledger cannot
 *   track the node (LEDGER_MAX_NODES, ledger_lock's NULL);
 *   record (resv_peek_record): the node's record as this replica last wrote or read it
 *   (shared_each_entry: no API call, never waits), expired and gone entries left out. Entries
 *   other replicas wrote since are not seen: a question answered on it may pass a node a
 *   placement then refuses (the placement reads the record afresh).
 * Rule 2 is the core's, as for resv_items: a visible pod and its entry count once.
 * *items (caller owns: resv_peek_free) as placement items (key, uid or NULL, bytes, the DRA
 * claim resv_put gave or NULL; no expiry: they count now), NULL with *n 0 when there are none. 0,
 * RESV_EBUSY, RESV_EUNTRACKED or RESV_ENOMEM (nothing returned).
 */
int resv_peek_ledger(struct ledger *l, const char *node, uint64_t now_ms, int may_block,
                     struct placement_item **items, size_t *n) __attribute__((warn_unused_result));
int resv_peek_record(struct shared *s, const char *node, struct placement_item **items, size_t *n)
    __attribute__((warn_unused_result));
void resv_peek_free(struct placement_item *items, size_t n); /* NULL: no-op */

/* A growing array of owned placement items, as resv_peek_* give them (and the extender's pods in
 * flight, flight.h): start it zeroed, add, then resv_list_done. */
struct resv_list {
	struct placement_item *items;
	size_t n, cap;
	int nomem; /* an allocation failed: the list is incomplete */
};
/* Append a copy of key (NULL: nothing added), uid and claim (NULL or "": none) with bytes. */
void resv_list_add(struct resv_list *l, const char *key, const char *uid, const char *claim,
                   uint64_t bytes);
/* 0 with *items, *n the list's (caller owns: resv_peek_free; NULL, 0 when empty), or RESV_ENOMEM
 * after an allocation failed (the list freed, *items NULL). */
int resv_list_done(struct resv_list *l, struct placement_item **items, size_t *n)
    __attribute__((warn_unused_result));

/* Release the transaction's items. The backend is not touched (the ledger node stays locked,
 * the record copy stays the caller's). A zeroed or ended struct resv is a no-op. */
void resv_end(struct resv *r);

#endif
