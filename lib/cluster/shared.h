/*
 * shared: reservations every replica sees (--reservations shared; ARCHITECTURE.md,
 * "reservations", the shared backend). One record per GPU node (record.h, a Lease in the
 * webhook's namespace), changed only by compare-and-swap on its resourceVersion, so that two
 * replicas deciding on one node at once cannot both admit on the same state: the second write
 * gets 409 Conflict, and that replica reads the record again and decides again.
 *
 * The loop of one placement (shared_place):
 *   1. take the node's record as this process last knew it (from its own last write or read;
 *      none yet: empty, and the write creates the Lease), without the entries of pods reported
 *      gone (shared_forget);
 *   2. call decide(rec): the caller counts the node's pods plus rec's entries with the
 *      placement core, and when it admits, prunes rec and adds the reservation (record_put;
 *      the webhook does both through reservations.h, the record backend's begin / items /
 *      put over rec);
 *   3. WRITE: PUT the Lease with rec's resourceVersion (or POST it when it does not exist);
 *      success: the new record is remembered, done. 409 (another replica wrote first, or
 *      created it): GET the Lease, back to 2 with it. 404 on the PUT (the Lease deleted
 *      since it was read, from a server that does not create on update; kube-apiserver
 *      v1.33 creates it, 201): the same, not an error: the GET finds none, decide again on
 *      the empty record, and the write creates it. Within the deadline; past it,
 *      SHARED_EBUDGET (the caller denies: fail closed).
 *      NO_WRITE (denied, dry run): done; nothing is written.
 *      REREAD (a denial that counted entries of a record not read during this call, which other
 *      replicas may have pruned since): GET, back to 2 once.
 * Cost: one write per admitted placement, plus one read per conflict or per such denial.
 *
 * An unreadable record (the annotation edited by hand): entries unknown, so placements on the
 * node are refused (SHARED_ECORRUPT, err says which Lease and why) until one TTL after its last
 * write (spec.renewTime); then it is overwritten as empty: every entry in it has expired.
 *
 * Concurrency: the caller holds no lock (the webhook takes no node lock on this path).
 * Calls on one node in this process queue behind one leader, which decides and writes them in
 * batches (group commit: each decides over the same working copy, one write stores them all).
 * A node this process keeps no entry for (past SHARED_MAX_NODES, or out of memory) is decided
 * unbatched, and two such calls may conflict with each other: still correct (409, read,
 * decide again), slower. decide() runs on the leader's thread, under no shared lock.
 * Thread-safe. Clock: deadline_s is CLOCK_MONOTONIC seconds (monotime_s()); entry
 * expiry is Unix ms on the shared clock (shared_set_clock: the API server's; record.h).
 *
 * Metrics (shared_collect, a metrics collector):
 *   gpu_memory_guard_reservation_writes_total{result}  counter, result: ok | conflict | error
 *   gpu_memory_guard_reservation_conflicts_total       counter, 409s on writes
 *   gpu_memory_guard_reservation_retries_total         counter, decisions made again after a
 *                                                       conflict or a re-read
 *   gpu_memory_guard_reservation_reads_total{result}   counter, GETs of a record: ok | error
 *   gpu_memory_guard_reservation_write_seconds         histogram, latency of the writes
 *   gpu_memory_guard_reservation_record_entries{node}  gauge, entries of each record this
 *                                                       replica last wrote or read
 *   gpu_memory_guard_reservation_expiry_capped_total   counter, entries read with an expiry
 *                                                       past the cap (record.h, "The cap")
 */
#ifndef GMG_SHARED_H
#define GMG_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

struct cJSON;
struct kube_client;
struct metrics_writer;

#define SHARED_MAX_NODES 100000 /* records remembered; past it a node's record is read again */
#define SHARED_GONE_MAX  16384  /* uids of pods reported gone, remembered (shared_forget) */

#define SHARED_EBUDGET   (-1) /* the deadline passed (conflicts, slow API server): deny */
#define SHARED_EAPI      (-2) /* a read or write failed (not a conflict): err says which */
#define SHARED_ECORRUPT  (-3) /* the record cannot be read and is not old enough to replace */
#define SHARED_ENOMEM    (-4)
#define SHARED_EINVAL    (-5)
#define SHARED_ECONFLICT (-6) /* shared_write only: 409 (or 404), the record changed since read */

/* The Lease calls: kube.h's (shared_api_kube), or a fake in tests. Same contract as
 * kube_get_lease / kube_create_lease / kube_update_lease (KUBE_ECONFLICT on 409). */
struct shared_api {
	int (*get)(void *ctx, const char *ns, const char *name, struct cJSON **lease, long *code,
	           char *err, size_t errlen);
	int (*create)(void *ctx, const char *ns, const struct cJSON *lease, struct cJSON **out,
	              long *code, char *err, size_t errlen);
	int (*update)(void *ctx, const char *ns, const char *name, const struct cJSON *lease,
	              struct cJSON **out, long *code, char *err, size_t errlen);
	void *ctx;
};

/* The kube client's Lease calls; c is borrowed. */
struct shared_api shared_api_kube(struct kube_client *c);

struct shared;

/* ns: the namespace of the records (copied); api copied (its ctx borrowed); ttl_ms > 0: how
 * long a reservation counts (--reservation-ttl). wall_ms: the wall clock in Unix ms (NULL:
 * the system's; tests drive time). NULL on a bad argument or allocation failure. */
struct shared *shared_new(const char *ns, const struct shared_api *api, uint64_t ttl_ms,
                          uint64_t (*wall_ms)(void));
void shared_free(struct shared *s); /* NULL no-op; no call may be running */

uint64_t shared_ttl_ms(const struct shared *s);

/* The clock the records' times are on (--reservations shared): the API server's, bounded from
 * its Date headers (serverclock.h), so that replicas whose own clocks disagree agree on when an
 * entry expires. fn sets *out to the earliest (latest 0) or the latest (1) Unix ms the shared
 * clock may read now and returns 0, or returns -1 while it cannot tell (nothing heard from the
 * API server yet): then shared_new's wall_ms serves both. Set before any call; ctx borrowed.
 * Without it, wall_ms is the clock (replicas' clocks must then agree). */
typedef int (*shared_clock_fn)(void *ctx, int latest, uint64_t *out);
void shared_set_clock(struct shared *s, shared_clock_fn fn, void *ctx);
/* Now, to judge an entry's expiry or a record's age by (the clock's earliest bound): an entry
 * is never dropped before its expiry on the shared clock. */
uint64_t shared_now_wall_ms(const struct shared *s);
/* Now, to stamp an expiry or spec.renewTime from (the latest bound): it never reads early. */
uint64_t shared_stamp_wall_ms(const struct shared *s);
const char *shared_namespace(const struct shared *s);

enum shared_verdict {
	SHARED_NO_WRITE = 0, /* decided without a reservation (denied, dry run): write nothing */
	SHARED_WRITE = 1,    /* rec was changed (the reservation added): write it */
	SHARED_REREAD = 2, /* the decision may rest on entries since dropped: read, decide again */
};

/* rec: the node's record, a working copy the callback may change (record_prune, record_put);
 * fresh: rec was read from the API server during this shared_place. A decide may be called
 * several times for one placement (after each conflict): each call decides anew. */
typedef enum shared_verdict (*shared_decide_fn)(void *ctx, struct record *rec, int fresh);

/*
 * One placement on node, decided by decide() over the node's record (see the loop above).
 * Returns 0 when decide's last verdict stands (WRITE: written; NO_WRITE; REREAD twice in a row
 * counts as NO_WRITE), or SHARED_E* with err (one line naming the Lease and the call): the
 * caller denies. *attempts (may be NULL) gets how many times decide was called.
 */
int shared_place(struct shared *s, const char *node, double deadline_s, shared_decide_fn decide,
                 void *ctx, unsigned *attempts, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * The steps of shared_place, one at a time, for a caller that runs its own loop
 * (reservations.h, the record backend). rec is initialized by the caller (record_init) and
 * replaced; it owns its entries.
 *
 * shared_load: the node's record as this process last wrote or read it (empty, rv "", when
 * none: the write creates the Lease), without the entries of pods reported gone. No API call.
 * 0, SHARED_ENOMEM, SHARED_EINVAL.
 *
 * shared_read: GET the node's Lease into rec (404: empty, rv ""), remember it, and drop the
 * entries of pods reported gone. An entry's expiry past what a replica could write now is
 * lowered to that (record.h, "The cap": record_max_expiry over the shared clock's bounds and
 * ttl_ms) when this replica first reads that resourceVersion; the same version read again is
 * the copy it remembers, its caps unchanged. 0, SHARED_EBUDGET (deadline_s, CLOCK_MONOTONIC
 * seconds, passed, or the GET timed out), SHARED_EAPI, SHARED_ECORRUPT, SHARED_ENOMEM (err says
 * which).
 *
 * shared_write: compare-and-swap: PUT rec with its resourceVersion (rv "": POST). 0 (written:
 * this process's copy is now the stored record, with its new resourceVersion; rec is left as
 * it was, shared_load gives the new one), SHARED_ECONFLICT
 * (409, or 404 on a PUT: another replica wrote or deleted it since it was read; read it again
 * and decide again), SHARED_EBUDGET, SHARED_EAPI, SHARED_ENOMEM (err says which). Counted in the
 * write metrics as shared_place's writes are.
 *
 * Thread-safe; no lock is held across the API call. Calls of these on one node are not queued
 * behind shared_place's leader: two writers conflict, and one decides again.
 */
int shared_load(struct shared *s, const char *node, struct record *rec)
    __attribute__((warn_unused_result));
int shared_read(struct shared *s, const char *node, double deadline_s, struct record *rec,
                char *err, size_t errlen) __attribute__((warn_unused_result));
int shared_write(struct shared *s, const char *node, struct record *rec, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The pod with this metadata.uid stopped holding GPU memory (deleted, finished: the watch
 * cache's gone callback). Its entries in any record stop counting at once in this replica, and
 * its next write of that record drops them (every replica's cache sees the same DELETE). The
 * last SHARED_GONE_MAX uids are remembered; an older one's entries count until they expire (the
 * safe side). NULL or "" uid: no-op. Thread-safe. */
void shared_forget(struct shared *s, const char *uid);

/* Call fn(ctx, key, uid, claim, bytes) (claim: the entry's DRA claim uid, "" when none) for each
 * entry of node's record, as this replica last wrote or read it, that has not expired: no API call
 * (the scheduler extender's view). Another replica's newer entries are not seen until this replica
 * writes or reads the record again. Returns how many entries were visited. fn must not call shared
 * functions. Thread-safe. */
typedef void (*shared_entry_fn)(void *ctx, const char *key, const char *uid, const char *claim,
                                uint64_t bytes);
size_t shared_each_entry(struct shared *s, const char *node, shared_entry_fn fn, void *ctx);

/* metrics_collector_fn: the series above. ctx is the struct shared. */
void shared_collect(void *ctx, struct metrics_writer *w);

#endif
