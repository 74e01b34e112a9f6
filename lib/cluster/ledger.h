/*
 * ledger: in-flight reservations per node, and the per-node lock that serializes
 * check-and-reserve.
 *
 * Admission is eventually consistent: the API server shows a pod on a node only after the
 * placement was admitted and persisted. Two bindings to one node checked concurrently would
 * both see the old usage. So a placement check holds its node's lock from reading its
 * reservations to recording its own; the reservation is counted by later checks until the pod
 * appears in a view of that node (ledger_settle), its owner drops it (ledger_remove: the
 * webhook does when the API server says the pod is gone) or the TTL passes. The node's pods may
 * be read before the lock, with no lock held across the API call: the node's generation
 * (ledger_generation) then says whether an entry the view could miss was settled meanwhile.
 *
 * Reservations are keyed by "namespace/name" (a Binding names its pod; a pod CREATE with
 * nodeName has a name, or only generateName: then the caller passes a key that will never
 * match and the entry lives until the TTL), one entry per pod: a reserve of the same pod (the
 * keys equal and, where both are known, the uids: pod.h's strict rule) refreshes its entry and
 * never lowers it (the larger bytes, the later expiry; see ledger_reserve), one of another uid
 * under the same key is an entry of its own. So no review, replayed or forged under a pod's
 * name, can shrink, shorten or take over another pod's reservation.
 *
 * reservations.h puts begin / items / put / commit over a locked node (the local backend), its
 * compare-and-swap on ledger_version().
 *
 * Clock: callers pass now_ms from a monotonic clock (ledger_now_ms()), so tests drive time.
 * Thread-safe. Caps: LEDGER_MAX_NODES nodes, LEDGER_MAX_PER_NODE reservations per node;
 * past that ledger_reserve fails (the caller denies: fail safe, never unbounded).
 */
#ifndef GMG_LEDGER_H
#define GMG_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#define LEDGER_MAX_NODES    65536
#define LEDGER_MAX_PER_NODE 1024
#define LEDGER_KEY_MAX      320
#define LEDGER_UID_MAX      64 /* metadata.uid (a UUID is 36) */

#define LEDGER_EFULL  (-1) /* caps reached */
#define LEDGER_ENOMEM (-2)
#define LEDGER_EINVAL (-3) /* NULL node, or key empty or not shorter than LEDGER_KEY_MAX */

struct ledger;      /* opaque */
struct ledger_node; /* a locked node, between ledger_lock() and ledger_unlock() */

struct ledger_entry_view {
	char key[LEDGER_KEY_MAX];
	uint64_t bytes;
	uint64_t
	    reserved_ms; /* when this key was last reserved (its stamp_ms: ledger_reserve_claim) */
	uint64_t expires_ms;
};

/* New ledger; ttl_ms > 0 (0 gives NULL). NULL on allocation failure. Caller owns it and
 * frees it with ledger_free(). */
struct ledger *ledger_new(uint64_t ttl_ms);
void ledger_free(struct ledger *l); /* NULL is a no-op; no node may be locked */

/* Monotonic clock in ms for now_ms arguments. */
uint64_t ledger_now_ms(void);

/* Lock the node's entry (created on first use). Blocks while another thread holds it; checks
 * on other nodes do not wait. Returns the locked node (valid until ledger_unlock, which may
 * free it), or NULL for a NULL/empty/over-253-character name, LEDGER_MAX_NODES nodes holding
 * live reservations, or allocation failure: the caller then denies. Not re-entrant: a thread
 * must not lock a node it already holds. */
struct ledger_node *ledger_lock(struct ledger *l, const char *node);
void ledger_unlock(struct ledger_node *n);

/* Let go of the node's lock but not of the node: it is neither freed nor swept until the
 * matching ledger_unlock(), so its generation keeps counting. For I/O between two locked steps
 * of one placement (no lock is held across an API call): ledger_relock() takes the lock again
 * (blocking, as ledger_lock), and the placement ends with ledger_unlock() as usual. */
void ledger_release(struct ledger_node *n);
void ledger_relock(struct ledger_node *n);
/* ledger_relock without waiting: 1 when the lock was taken, 0 when another thread holds it (the
 * node is still released: ledger_end, or try again). */
int ledger_tryrelock(struct ledger_node *n);
/* End a released node's use without taking its lock again (ledger_unlock's other half; NULL is
 * a no-op). */
void ledger_end(struct ledger_node *n);

/* With the node locked (or released, by its holder): how many entries ledger_settle and
 * ledger_reconcile dropped because a view showed their pod, since the node was created (not
 * those that expired, nor ledger_remove's or ledger_forget's: those pods are gone whatever a
 * view shows). A decision over a view taken while the node was held (locked or released)
 * counts every reservation that view could miss as long as the generation has not changed
 * since (placer.c, check_node). 0 for NULL. */
uint64_t ledger_generation(const struct ledger_node *n);

/* With the node locked (or released, by its holder): how many times its entries changed (an
 * entry added, refreshed or dropped, for whatever reason) since the node was created; it only
 * grows while the node lives. Equal values read at two times mean the node's entries are the
 * same (reservations.h: the local backend's compare-and-swap). 0 for NULL. */
uint64_t ledger_version(const struct ledger_node *n);

/* With the node locked: drop expired entries and entries whose key is in visible_keys
 * (the pods the API server now shows on the node). Returns how many were dropped. */
size_t ledger_reconcile(struct ledger_node *n, const char *const *visible_keys, size_t n_keys,
                        uint64_t now_ms);

/* With the node locked: drop expired entries and the entries of pods now visible on the node:
 * keys[i] with uids[i] (uids may be NULL, an element NULL or "": unknown). An entry matches when
 * the keys are equal and, if both uids are known, the uids too (a newer pod of the same name is
 * not the pod reserved). Returns how many were dropped. */
size_t ledger_settle(struct ledger_node *n, const char *const *keys, const char *const *uids,
                     size_t n_keys, uint64_t now_ms);

/* Like ledger_lock, but never waits: NULL with *busy = 1 when another thread holds the node
 * (the caller retries where it may block); NULL with *busy = 0 as ledger_lock's NULL. */
struct ledger_node *ledger_trylock(struct ledger *l, const char *node, int *busy);

/* With the node locked: total bytes of the live reservations, optionally excluding one key
 * (the pod being admitted again: a retried binding must not count itself). */
uint64_t ledger_pending_bytes(struct ledger_node *n, const char *exclude_key, uint64_t now_ms);

/* With the node locked: copy up to cap live entries into out; returns the number copied. */
size_t ledger_entries(struct ledger_node *n, struct ledger_entry_view *out, size_t cap,
                      uint64_t now_ms);

/* One live reservation, for ledger_visit(); key, uid ("" when unknown) and claim (the DRA claim
 * uid ledger_reserve_claim gave, "" when none) stay valid until the node is modified
 * (ledger_reconcile, ledger_reserve, ledger_remove) or unlocked. reserved_ms is when it was last
 * reserved: the stamp_ms of its latest reserve (now_ms where no stamp is given; a refresh
 * restarts it), so the live path's grace check (placer.c) ages it on the real clock. */
typedef void (*ledger_visit_fn)(void *ctx, const char *key, const char *uid, const char *claim,
                                uint64_t bytes, uint64_t reserved_ms);

/* With the node locked: call fn(ctx, key, uid, claim, bytes, reserved_ms) for each live entry, in
 * the order they were first reserved (a refresh keeps its place), without copying (ledger_entries
 * copies LEDGER_KEY_MAX bytes per entry). fn must not call ledger functions; a NULL fn only counts.
 * Returns how many live entries there are (visited); 0 when n is NULL. */
size_t ledger_visit(struct ledger_node *n, uint64_t now_ms, ledger_visit_fn fn, void *ctx);

/* With the node locked: record (or refresh) a reservation of bytes for key, counting until
 * now_ms + the TTL. A refresh (the same pod, above) keeps the larger bytes and the later expiry,
 * restarts reserved_ms, and takes the uid and claim it brings only where the entry had none.
 * 0 or LEDGER_E*. */
int ledger_reserve(struct ledger_node *n, const char *key, uint64_t bytes, uint64_t now_ms)
    __attribute__((warn_unused_result));

/* The same with the pod's metadata.uid (NULL or "" when unknown), so that ledger_forget can
 * tell this pod from an earlier pod of the same name. LEDGER_EINVAL for a uid not shorter than
 * LEDGER_UID_MAX. An entry with a uid is refreshed only by a reserve with the same uid or none. */
int ledger_reserve_uid(struct ledger_node *n, const char *key, const char *uid, uint64_t bytes,
                       uint64_t now_ms) __attribute__((warn_unused_result));

/* The same for a pod CREATE (spec.nodeName set), whose pod the API server stores only if the
 * rest of its admission chain admits it: the entry lives ttl_ms (--unseen-reservation-ttl; the
 * ledger's TTL when that is shorter) unless settled before, and one that expires so (its pod
 * never seen on the node) is counted by ledger_unseen_dropped. ttl_ms > 0, else LEDGER_EINVAL.
 * A later ledger_reserve_uid of the key (the pod's Binding) makes it an ordinary entry. */
int ledger_reserve_unseen(struct ledger_node *n, const char *key, const char *uid, uint64_t bytes,
                          uint64_t ttl_ms, uint64_t now_ms) __attribute__((warn_unused_result));

/* The same with the uid of a shared DRA claim the pod joined without being in its reservedFor
 * (placement_result.reserve_claim; NULL or "": none), which ledger_visit gives back: the core
 * counts the entry among that claim's pods (placement.h, item.dra_claim). unseen_ttl_ms > 0: a
 * pod CREATE's, as ledger_reserve_unseen; 0: as ledger_reserve_uid. A refresh keeps the entry's
 * claim, or takes this one where it had none. LEDGER_EINVAL for a claim not shorter than
 * LEDGER_UID_MAX. The claim changes no other rule: the entry expires, settles and is forgotten as
 * any other. stamp_ms (>= now_ms, else LEDGER_EINVAL): the monotonic time the TTL runs from, the
 * real clock when now_ms is held back (the webhook's cache path decides on the watch cache's
 * progress: reservations.h, rule 1), so the entry's TTL is not shortened by the watch's lag, nor
 * does it look older than it is to the live path's grace check (reserved_ms is stamp_ms too). */
int ledger_reserve_claim(struct ledger_node *n, const char *key, const char *uid, const char *claim,
                         uint64_t bytes, uint64_t unseen_ttl_ms, uint64_t now_ms, uint64_t stamp_ms)
    __attribute__((warn_unused_result));

/* Entries of ledger_reserve_unseen dropped at their expiry (never seen), since ledger_new; an
 * entry removed otherwise (settled, forgotten, removed) is not counted. Thread-safe. */
uint64_t ledger_unseen_dropped(struct ledger *l);

/* The pod key (uid) stopped holding GPU memory before it was seen on its node (deleted,
 * finished): drop its reservations on every node (resvrule.h, resv_gone_by). An entry whose uid
 * and the given uid are both known and differ is another pod of the same name, and is kept.
 * Takes the node locks itself: the caller must hold none. Returns how many entries were dropped.
 * Thread-safe. */
size_t ledger_forget(struct ledger *l, const char *key, const char *uid);

/* Call fn(ctx, node, bytes) for each node holding live reservations (bytes: their sum at
 * now_ms), with that node locked: fn must not call ledger functions. Takes the node locks
 * itself, never waiting: a node another thread holds (a placement in progress) is skipped.
 * The caller must hold none. Returns the number of nodes visited. Thread-safe. */
typedef void (*ledger_each_fn)(void *ctx, const char *node, uint64_t bytes);
size_t ledger_each(struct ledger *l, uint64_t now_ms, ledger_each_fn fn, void *ctx);

/* With the node locked: drop the reservation of exactly the pod key with uid (NULL or "": the
 * entry without a uid), live or expired, e.g. when its pod is known to be deleted; another pod's
 * entry under the same key is kept. Returns 1 when one was dropped, 0 when there was none (or n
 * or key is NULL). */
size_t ledger_remove(struct ledger_node *n, const char *key, const char *uid);

/* Reservations held over all nodes (for the ledger-size metric). Thread-safe, never blocks.
 * An expired reservation is counted until a reconcile, reserve or sweep on its node drops it;
 * a node unused and without live reservations is freed when the node table is full. */
size_t ledger_size(struct ledger *l);

#endif
