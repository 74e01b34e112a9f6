/*
 * record: the shared reservation record of one GPU node (ARCHITECTURE.md, "reservations", the
 * shared backend): the placements every replica admitted on the node that the API server may not
 * show yet. Pure: no I/O, no clock (times are arguments), no locks.
 *
 * Where it lives: a coordination.k8s.io/v1 Lease named after the node in the webhook's
 * namespace (--reservations-namespace), the entries in its annotation RECORD_ANNOTATION as
 * compact JSON, oldest first:
 *
 *   [{"uid":"<pod metadata.uid or empty>","pod":"<namespace/name>","bytes":<declared bytes>,
 *     "expires":<Unix time in ms>[,"unseen":true][,"claim":"<ResourceClaim metadata.uid>"]},
 *    ...]
 *
 * "unseen" marks the reservation of a pod CREATE (spec.nodeName) written with the shorter
 * --unseen-reservation-ttl: its expiry already says how long it counts, the mark only lets the
 * replica that drops it count it in reservations_unseen_dropped_total. A reader that does not
 * know the key (an older version) ignores it and still expires the entry at "expires".
 *
 * "claim" (issue 21) is the uid of a shared DRA claim the pod joined without being in its
 * reservedFor (placement_result.reserve_claim, a pod CREATE with nodeName naming an allocated
 * claim): the entry counts among that claim's pods (placement.h, item.dra_claim), so the claim's
 * next pod is not judged as its device's sole consumer. Written only when set. An entry without
 * it (every entry a replica of an earlier version writes, and records written before) reads as
 * before: a reservation of its bytes, of no claim. A replica of an earlier version reads an
 * entry with it as before too (it ignores the key), but drops the key from the entries when it
 * rewrites the record: during a rolling upgrade a pending claim's mark can be lost by an older
 * replica's write, and the claim's next pod is then judged as before issue 21 until the
 * resourceclaim controller shows the first in reservedFor (seconds). Size: RECORD_MAX_ENTRIES
 * entries of the longest pod keys (317 bytes) with 36-character uids and claims, and the
 * largest numbers, make 246,785 bytes of annotation (222,721 without the claims), under the API
 * server's 262,144 for an object's annotations.
 *
 * spec.renewTime is the time of the last write (MicroTime, RFC 3339 with microseconds), label
 * app.kubernetes.io/managed-by=gpu-memory-guard. The Lease's metadata.resourceVersion is the
 * compare-and-swap token: writers replace it with a PUT carrying the version they read, and the
 * API server refuses a stale one with 409 (shared.h does the retry loop).
 *
 * Expiry is Unix ms on the clock replicas share: the API server's, as each bounds it from the
 * Date headers of its answers (serverclock.h, shared_set_clock). Writers stamp from its latest
 * bound and readers judge by its earliest, so an entry counts at least until its expiry on the
 * API server's clock, whatever the replicas' own clocks read (an entry lasts up to about 2 s
 * longer than its TTL: the Date header's 1 s resolution on each side).
 *
 * The argument. Let S be the API server's clock. A writer stamps expires = L + ttl, where L >= S
 * at that instant (serverclock's latest bound), so on S the entry lives at least ttl. A reader
 * drops it when E >= expires, where E <= S at its instant (the earliest bound), so S has passed
 * expires: it is never dropped while live on S, never early. And never kept forever: E trails S
 * by at most the bound's width (about 1 s plus a round trip, widened by 500 ppm of the time
 * since the reader's last answer), so once S passes expires plus that, every reader drops it,
 * including one that never saw the writer (a killed replica's entries go). Neither replica's own
 * wall clock appears in either inequality. Durations judged on the reader's own monotonic clock
 * from when it first saw an entry (client-go's leader election) would be skew-proof too, but a
 * reader that first sees an entry late (restarted, or reading the node's record for the first
 * time) would count it up to a whole TTL longer than its writer meant, and each reader a
 * different time; on S they all agree. The cost: several API server instances must agree among
 * themselves (NTP); a difference between two of them lengthens or shortens entries by as much.
 *
 * The cap (issue 23). The argument holds for writers that stamp as above; "expires" is not
 * otherwise checked, and an entry written with an expiry far ahead (by a replica judging on its
 * own wrong clock before it heard from the API server, or by anyone who can write the Lease)
 * would count until its pod shows up or is deleted, forever for a key no pod matches. So a
 * reader caps it: read from the Lease at shared-clock bounds [E, L] (width W = L - E), an
 * entry's expiry counts as at most record_max_expiry(E, L, ttl) = L + W + ttl (Unix ms; ttl
 * the longest a replica writes, --reservation-ttl: the unseen TTL is never longer). An honest
 * writer stamping at that instant writes at most S + W' + ttl (S <= L its clock, W' its bound's
 * width, about W), so honest entries are not touched; and a capped entry still counts until
 * the API server's clock passes S + ttl from its reading, so one written honestly never counts
 * less than its TTL (the cap is safe whatever the writer meant). The cap is taken when a
 * version of the Lease (its resourceVersion) is first read by the replica (shared.c) and set
 * into the entry (record_cap_expiry): reading the same version again keeps the first cap, not a
 * later one, and the replica's next write stores the capped expiry, so every replica agrees
 * from then. An entry rewritten uncapped (a writer of an earlier version, or the forger again)
 * is capped anew from its next read. Replicas should share one --reservation-ttl: a reader with
 * a shorter one caps a longer one's entries at its own.
 *
 * Same-pod rule (as placement.h): two entries, or an entry and a visible pod, are the same pod
 * when their uids are equal where both are known, otherwise when their keys are equal.
 */
#ifndef GMG_RECORD_H
#define GMG_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "kube.h"
#include "ledger.h"
#include "placement.h"

struct cJSON;

#define RECORD_ANNOTATION "gpu-memory-guard.io/reservations"
#define RECORD_MAX_ENTRIES                                                                         \
	512 /* per node; past it a placement is refused (fail safe). Far                           \
	       above a node's pods (kubelet's maxPods default is 110). */
/* An entry whose pod the watch cache has shown on the node for this long is dropped from the
 * record by the next write: every replica's cache has seen the pod by then (their watches
 * follow the same API server within milliseconds; a replica whose watch is broken reads the
 * API server instead). Before that the entry and the visible pod are counted once. */
#define RECORD_SETTLE_GRACE_MS 30000

/* Numbers in the JSON are written with 15 significant digits when they read back within a
 * relative DBL_EPSILON (cJSON 1.7.15 print_number), exact only below 10^15: bytes and expiry
 * are capped there (888 TiB; the year 33658). */
#define RECORD_MAX_NUMBER 999999999999999ull

#define RECORD_EPARSE (-1) /* the annotation is not a record (err says where) */
#define RECORD_EFULL  (-2) /* RECORD_MAX_ENTRIES */
#define RECORD_ENOMEM (-3)
#define RECORD_EINVAL (-4) /* a key, uid or claim too long, an empty key */

struct record_entry {
	char uid[LEDGER_UID_MAX];   /* the pod's metadata.uid, "" when unknown */
	char key[LEDGER_KEY_MAX];   /* "namespace/name", or the webhook's unique key for a pod named
	                               by generateName (webhook.c ledger_key) */
	char claim[LEDGER_UID_MAX]; /* "claim": the DRA claim it joined unreserved, "" when none */
	uint64_t bytes;             /* declared GPU memory, bytes */
	uint64_t expires_ms;        /* Unix time, ms */
	uint8_t unseen;             /* a pod CREATE's, written with --unseen-reservation-ttl */
};

/* One node's record. Owns entries. */
struct record {
	struct record_entry *entries;
	size_t n, cap;
	char rv[KUBE_RV_MAX]; /* metadata.resourceVersion read; "" when the Lease does not exist
	                         (the next write creates it) */
	uint64_t renew_ms;    /* spec.renewTime as Unix ms; 0 when absent */
};

/* Empty record (no Lease yet). */
void record_init(struct record *r);
void record_free(struct record *r); /* frees entries; r stays valid and empty */
/* *dst = a deep copy of src (dst initialized or freed before). 0 or RECORD_ENOMEM. */
int record_copy(struct record *dst, const struct record *src) __attribute__((warn_unused_result));

/*
 * Read a Lease object (borrowed) into *out (initialized; replaced). A Lease without the
 * annotation is an empty record. Entries are kept as stored, in order, none merged (the writer
 * decided which are the same pod; a duplicate counts twice, the safe side), their expiry too
 * (the reader caps it: record_cap_expiry). 0, RECORD_EPARSE with
 * err naming what is wrong (not a Lease, no resourceVersion, an annotation that is not a list of
 * entries, an entry without "pod" or with a bad number, over RECORD_MAX_ENTRIES), RECORD_ENOMEM. On
 * error *out keeps rv and renew_ms when they could be read, and no entries.
 */
int record_from_lease(const struct cJSON *lease, struct record *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * The Lease to write for r: name node, namespace ns, metadata.resourceVersion r->rv when not
 * empty (the precondition), the label and annotation above, spec.renewTime now_wall_ms. NULL on
 * allocation failure. Caller owns it (cJSON_Delete).
 */
struct cJSON *record_to_lease(const struct record *r, const char *ns, const char *node,
                              uint64_t now_wall_ms);

/*
 * Record a reservation of bytes for the pod (key, uid: NULL or "" unknown) until expires_ms:
 * an entry of the same pod (pod.h's pod_same: the uids equal where both are known, else the
 * keys) is refreshed in place (a retried Binding), never lowered: it keeps the larger bytes and
 * the later expiry, stays "unseen" only if both puts were, and takes the uid and claim of the put
 * only where it had none; else an entry is appended. So a put forged or replayed under a pod's
 * name (no uid, or another) can add an entry but never shrink, shorten or take over one.
 * 0, RECORD_EFULL, RECORD_EINVAL (also for bytes or expires_ms over RECORD_MAX_NUMBER).
 */
int record_put(struct record *r, const char *key, const char *uid, uint64_t bytes,
               uint64_t expires_ms) __attribute__((warn_unused_result));
/* record_put for a pod CREATE's reservation whose pod may never be stored: the entry is marked
 * "unseen" (its expires_ms is the caller's shorter bound). Same errors. */
int record_put_unseen(struct record *r, const char *key, const char *uid, uint64_t bytes,
                      uint64_t expires_ms) __attribute__((warn_unused_result));

/* record_put (unseen 0) or record_put_unseen (unseen 1) with the uid of a shared DRA claim the
 * pod joined without being in its reservedFor (NULL or "": none; "claim" above). A refreshed
 * entry keeps its claim, or takes this one where it had none. Same errors, RECORD_EINVAL also for a
 * claim not shorter than LEDGER_UID_MAX. */
int record_put_claim(struct record *r, const char *key, const char *uid, const char *claim,
                     uint64_t bytes, uint64_t expires_ms, int unseen)
    __attribute__((warn_unused_result));

/* How many "unseen" entries are expired at now_wall_ms: what record_prune will drop of them
 * at that time (call it just before; an entry whose pod is visible was seen, and it expires
 * at the same bound either way). */
size_t record_unseen_expired(const struct record *r, uint64_t now_wall_ms);

/*
 * Drop the entries that no longer need to count: expired at now_wall_ms, and those whose pod is
 * among visible (the node's pods) with seen_ms != 0 and seen_ms + grace_ms <= now_mono_ms
 * (shown by the cache for the grace). visible may be NULL with n_visible 0. Returns how many
 * were dropped.
 */
size_t record_prune(struct record *r, uint64_t now_wall_ms, const struct placement_item *visible,
                    size_t n_visible, uint64_t now_mono_ms, uint64_t grace_ms);

/*
 * The entries not expired at now_wall_ms as reservations for placement_decide(), their expiry
 * moved to the now_ms clock of the decision (now_ms + time left), an entry's claim as the
 * item's dra_claim (NULL when none). out holds at least r->n items; its keys, uids and claims
 * borrow r's. Returns how many were written.
 */
size_t record_items(const struct record *r, uint64_t now_wall_ms, uint64_t now_ms,
                    struct placement_item *out);

/* Bytes of the entries not expired at now_wall_ms (saturating). */
uint64_t record_live_bytes(const struct record *r, uint64_t now_wall_ms);

/* The latest expiry an entry read now may count until (the cap above): latest_ms + (latest_ms -
 * earliest_ms) + ttl_ms, saturating, from the shared clock's bounds now (Unix ms; a latest_ms
 * below earliest_ms counts as width 0) and the longest TTL a replica writes (ms). Pure. */
uint64_t record_max_expiry(uint64_t earliest_ms, uint64_t latest_ms, uint64_t ttl_ms);

/* Lower every entry's expires_ms past max_expires_ms to it (the cap above; call it on a record
 * just read with record_from_lease). Returns how many were lowered. */
size_t record_cap_expiry(struct record *r, uint64_t max_expires_ms);

#endif
