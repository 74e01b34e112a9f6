/*
 * shared: reservation records in the API server, compare-and-swap on resourceVersion. See
 * shared.h.
 */
#include "shared.h"

#include "errbuf.h"
#include "kube.h"
#include "metrics.h"
#include "monotime.h"
#include "resvrule.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUCKETS      1024 /* of the table of known records */
#define GONE_BUCKETS 4096
#define MAX_ATTEMPT  64 /* decisions per placement, besides the deadline */
#define ERR_MAX      512

/* The record of a node as this process last wrote or read it. */
struct waiter;

struct known {
	struct known *next;
	char *node;
	struct record rec;
	/* Group commit: placements on this node waiting for the one that writes for them. */
	struct waiter *queue, *queue_tail;
	int busy; /* a leader is deciding and writing for this node */
};

/* One shared_place call while it waits (on its own stack). */
struct waiter {
	struct waiter *next;
	shared_decide_fn decide;
	void *ctx;
	double deadline_s;
	enum shared_verdict verdict;
	unsigned attempts;
	int leader, done, rc; /* leader, done: written under mu */
	int finished;         /* the leader's: rc, verdict, attempts and err are set */
	char *err;
	size_t errlen;
	pthread_cond_t cv;
};

static const double write_buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                       0.1,   0.25,   0.5,   1,    2.5};
#define N_WB (sizeof(write_buckets) / sizeof(write_buckets[0]))

/* A pod uid reported gone (shared_forget), in a ring of SHARED_GONE_MAX chained into buckets. */
struct gone {
	char uid[LEDGER_UID_MAX];
	int used;
	struct gone *prev, *next; /* in its bucket */
	size_t bucket;
};

struct shared {
	char *ns;
	struct shared_api api;
	uint64_t ttl_ms;
	uint64_t (*wall_ms)(void);
	shared_clock_fn clock; /* or NULL: wall_ms for both bounds */
	void *clock_ctx;
	pthread_mutex_t mu; /* the table */
	struct known *table[BUCKETS];
	size_t n_known;
	atomic_ulong writes_ok, writes_conflict, writes_error, reads_ok, reads_error, retries;
	atomic_ulong expiry_capped; /* entries whose expiry a read capped (record.h) */
	atomic_ulong wb[N_WB + 1];  /* write latency histogram, the last is +Inf */
	atomic_ullong wsum_us;      /* sum of write latencies, microseconds */
	pthread_mutex_t gone_mu;    /* the gone uids */
	struct gone *gone_ring;     /* SHARED_GONE_MAX slots */
	size_t gone_next;
	struct gone *gone_buckets[GONE_BUCKETS];
};

static uint64_t system_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int kube_get(void *ctx, const char *ns, const char *name, cJSON **lease, long *code,
                    char *err, size_t errlen)
{
	return kube_get_lease(ctx, ns, name, lease, code, err, errlen);
}

static int kube_create(void *ctx, const char *ns, const cJSON *lease, cJSON **out, long *code,
                       char *err, size_t errlen)
{
	return kube_create_lease(ctx, ns, lease, out, code, err, errlen);
}

static int kube_update(void *ctx, const char *ns, const char *name, const cJSON *lease, cJSON **out,
                       long *code, char *err, size_t errlen)
{
	return kube_update_lease(ctx, ns, name, lease, out, code, err, errlen);
}

struct shared_api shared_api_kube(struct kube_client *c)
{
	return (struct shared_api){kube_get, kube_create, kube_update, c};
}

struct shared *shared_new(const char *ns, const struct shared_api *api, uint64_t ttl_ms,
                          uint64_t (*wall_ms)(void))
{
	if (ns == NULL || ns[0] == '\0' || api == NULL || api->get == NULL || api->create == NULL ||
	    api->update == NULL || ttl_ms == 0)
		return NULL;
	struct shared *s = calloc(1, sizeof(*s));
	if (s == NULL || (s->ns = strdup(ns)) == NULL) {
		free(s);
		return NULL;
	}
	s->api = *api;
	s->ttl_ms = ttl_ms;
	s->wall_ms = wall_ms ? wall_ms : system_wall_ms;
	if ((s->gone_ring = calloc(SHARED_GONE_MAX, sizeof(*s->gone_ring))) == NULL) {
		free(s->ns);
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->gone_mu, NULL);
	return s;
}

void shared_free(struct shared *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < BUCKETS; i++) {
		struct known *k = s->table[i], *next;
		for (; k != NULL; k = next) {
			next = k->next;
			record_free(&k->rec);
			free(k->node);
			free(k);
		}
	}
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->gone_mu);
	free(s->gone_ring);
	free(s->ns);
	free(s);
}

uint64_t shared_ttl_ms(const struct shared *s)
{
	return s->ttl_ms;
}

void shared_set_clock(struct shared *s, shared_clock_fn fn, void *ctx)
{
	s->clock = fn;
	s->clock_ctx = ctx;
}

/* The shared clock now: its earliest (latest 0) or latest bound, else the wall clock. */
static uint64_t clock_now(const struct shared *s, int latest)
{
	uint64_t t;
	if (s->clock != NULL && s->clock(s->clock_ctx, latest, &t) == 0)
		return t;
	return s->wall_ms();
}

uint64_t shared_now_wall_ms(const struct shared *s)
{
	return clock_now(s, 0);
}

uint64_t shared_stamp_wall_ms(const struct shared *s)
{
	return clock_now(s, 1);
}

const char *shared_namespace(const struct shared *s)
{
	return s->ns;
}

static uint64_t hash(const char *str)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)str; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h;
}

static size_t bucket(const char *node)
{
	return (size_t)(hash(node) % BUCKETS);
}

void shared_forget(struct shared *s, const char *uid)
{
	if (s == NULL || uid == NULL || uid[0] == '\0' || strlen(uid) >= LEDGER_UID_MAX)
		return;
	size_t b = (size_t)(hash(uid) % GONE_BUCKETS);
	pthread_mutex_lock(&s->gone_mu);
	struct gone *g = &s->gone_ring[s->gone_next];
	s->gone_next = (s->gone_next + 1) % SHARED_GONE_MAX;
	if (g->used) { /* the oldest: unlinked from its bucket */
		if (g->prev != NULL)
			g->prev->next = g->next;
		else
			s->gone_buckets[g->bucket] = g->next;
		if (g->next != NULL)
			g->next->prev = g->prev;
	}
	snprintf(g->uid, sizeof(g->uid), "%s", uid);
	g->used = 1;
	g->bucket = b;
	g->prev = NULL;
	g->next = s->gone_buckets[b];
	if (g->next != NULL)
		g->next->prev = g;
	s->gone_buckets[b] = g;
	pthread_mutex_unlock(&s->gone_mu);
}

/* With gone_mu held: an entry of uid goes with a pod reported gone (rule 3: resv_record_gone_by,
 * over the remembered uids). */
static int is_gone_locked(struct shared *s, const char *uid)
{
	if (uid[0] == '\0')
		return 0; /* no walk: resv_record_gone_by matches no unknown uid */
	for (struct gone *g = s->gone_buckets[hash(uid) % GONE_BUCKETS]; g != NULL; g = g->next)
		if (resv_record_gone_by(uid, g->uid))
			return 1;
	return 0;
}

/* is_gone_locked, taking gone_mu. */
static int is_gone(struct shared *s, const char *uid)
{
	pthread_mutex_lock(&s->gone_mu);
	int gone = is_gone_locked(s, uid);
	pthread_mutex_unlock(&s->gone_mu);
	return gone;
}

/* Drop from rec the entries of pods reported gone: a deleted or finished pod never holds GPU
 * memory again, whatever any replica's cache shows. Returns how many were dropped. */
static size_t drop_gone(struct shared *s, struct record *rec)
{
	size_t kept = 0, n = rec->n;
	pthread_mutex_lock(&s->gone_mu);
	for (size_t i = 0; i < n; i++)
		if (!is_gone_locked(s, rec->entries[i].uid))
			rec->entries[kept++] = rec->entries[i];
	pthread_mutex_unlock(&s->gone_mu);
	rec->n = kept;
	return n - kept;
}

static struct known *find(struct shared *s, const char *node)
{
	for (struct known *k = s->table[bucket(node)]; k != NULL; k = k->next)
		if (strcmp(k->node, node) == 0)
			return k;
	return NULL;
}

/* Copy the node's known record into *out (initialized); empty when none. */
static int load(struct shared *s, const char *node, struct record *out)
{
	int rc = 0;
	pthread_mutex_lock(&s->mu);
	struct known *k = find(s, node);
	if (k != NULL)
		rc = record_copy(out, &k->rec);
	else
		record_init(out);
	pthread_mutex_unlock(&s->mu);
	return rc == 0 ? 0 : SHARED_ENOMEM;
}

/* With mu held: the node's entry, created when missing (NULL without memory or past
 * SHARED_MAX_NODES). */
static struct known *known_get_locked(struct shared *s, const char *node)
{
	struct known *k = find(s, node);
	if (k == NULL && s->n_known < SHARED_MAX_NODES && (k = calloc(1, sizeof(*k))) != NULL) {
		if ((k->node = strdup(node)) == NULL) {
			free(k);
			k = NULL;
		} else {
			size_t b = bucket(node);
			k->next = s->table[b];
			s->table[b] = k;
			s->n_known++;
		}
	}
	return k;
}

/* Remember rec (moved: *rec is left empty) as the node's record. Without memory, or past
 * SHARED_MAX_NODES, the node is forgotten instead: the next placement reads it again. */
static void store(struct shared *s, const char *node, struct record *rec)
{
	pthread_mutex_lock(&s->mu);
	struct known *k = known_get_locked(s, node);
	if (k != NULL) {
		record_free(&k->rec);
		k->rec = *rec;
		record_init(rec);
	} else {
		record_free(rec);
	}
	pthread_mutex_unlock(&s->mu);
}

/* Cap the expiry of rec's entries, just read from a Lease, at what a replica could write now
 * (record.h, "The cap"), counting those lowered. */
static void cap_read(struct shared *s, struct record *rec)
{
	uint64_t earliest = clock_now(s, 0), latest = clock_now(s, 1);
	size_t n = record_cap_expiry(rec, record_max_expiry(earliest, latest, s->ttl_ms));
	if (n > 0)
		atomic_fetch_add_explicit(&s->expiry_capped, n, memory_order_relaxed);
}

/* Whether the node's known record is the version rec was just read at (its resourceVersion):
 * then *rec is replaced by a copy of it, whose caps were set when that version was first read,
 * so reading it again does not move a cap later (record.h, "The cap"). */
static int known_version(struct shared *s, const char *node, struct record *rec)
{
	struct record copy;
	int same = 0;

	pthread_mutex_lock(&s->mu);
	struct known *k = find(s, node);
	if (k != NULL && rec->rv[0] != '\0' && strcmp(k->rec.rv, rec->rv) == 0 &&
	    record_copy(&copy, &k->rec) == 0)
		same = 1;
	pthread_mutex_unlock(&s->mu);
	if (same) {
		record_free(rec);
		*rec = copy;
	}
	return same;
}

/* GET the node's record into *rec (replaced) and remember it. 0 or SHARED_E*. */
static int reread(struct shared *s, const char *node, double deadline_s, struct record *rec,
                  char *err, size_t errlen)
{
	char why[ERR_MAX];
	cJSON *lease = NULL;
	long code = 0;
	int rc;

	if (monotime_s() >= deadline_s) {
		errbuf_set(err, errlen, "reservation record %s/%s: no time left to read it", s->ns,
		           node);
		return SHARED_EBUDGET;
	}
	rc = s->api.get(s->api.ctx, s->ns, node, &lease, &code, why, sizeof(why));
	if (rc == KUBE_ENOTFOUND) {
		atomic_fetch_add_explicit(&s->reads_ok, 1, memory_order_relaxed);
		record_free(rec); /* none: the next write creates it */
		return 0;
	}
	if (rc != 0) {
		atomic_fetch_add_explicit(&s->reads_error, 1, memory_order_relaxed);
		errbuf_set(err, errlen, "%s", why);
		return rc == KUBE_ETIMEOUT ? SHARED_EBUDGET : SHARED_EAPI;
	}
	atomic_fetch_add_explicit(&s->reads_ok, 1, memory_order_relaxed);
	rc = record_from_lease(lease, rec, why, sizeof(why));
	cJSON_Delete(lease);
	if (rc == RECORD_ENOMEM) {
		errbuf_set(err, errlen, "reading reservation record %s/%s: out of memory", s->ns,
		           node);
		return SHARED_ENOMEM;
	}
	if (rc != 0) {
		uint64_t now = clock_now(s, 0);
		if (rec->rv[0] == '\0' || rec->renew_ms == 0 || rec->renew_ms + s->ttl_ms > now) {
			errbuf_set(
			    err, errlen,
			    "reservation record Lease %s/%s is unreadable (%s); placements on "
			    "the node are refused until one --reservation-ttl after its "
			    "spec.renewTime, or until the Lease is deleted",
			    s->ns, node, why);
			return SHARED_ECORRUPT;
		}
		/* Older than the TTL: whatever it held has expired. Overwrite it as empty. */
	} else if (known_version(s, node, rec)) {
		return 0;
	}
	cap_read(s, rec);
	struct record keep;
	if (record_copy(&keep, rec) == 0)
		store(s, node, &keep);
	return 0;
}

static void observe_write(struct shared *s, double seconds)
{
	size_t i = 0;
	while (i < N_WB && seconds > write_buckets[i])
		i++;
	atomic_fetch_add_explicit(&s->wb[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->wsum_us, (unsigned long long)(seconds * 1e6),
	                          memory_order_relaxed);
}

/* Write rec (CAS on rec->rv, or create). 0 (written; rec and the table hold the stored
 * record), KUBE_ECONFLICT / KUBE_ENOTFOUND (decide again), or SHARED_E*. */
static int write_record(struct shared *s, const char *node, struct record *rec, char *err,
                        size_t errlen)
{
	char why[ERR_MAX];
	cJSON *out = NULL;
	long code = 0;
	int rc;

	cJSON *lease = record_to_lease(rec, s->ns, node, clock_now(s, 1));
	if (lease == NULL) {
		errbuf_set(err, errlen, "writing reservation record %s/%s: out of memory", s->ns,
		           node);
		return SHARED_ENOMEM;
	}
	double t0 = monotime_s();
	if (rec->rv[0] != '\0')
		rc = s->api.update(s->api.ctx, s->ns, node, lease, &out, &code, why, sizeof(why));
	else
		rc = s->api.create(s->api.ctx, s->ns, lease, &out, &code, why, sizeof(why));
	observe_write(s, monotime_s() - t0);
	cJSON_Delete(lease);
	if (rc == KUBE_ECONFLICT || (rc == KUBE_ENOTFOUND && rec->rv[0] != '\0')) {
		atomic_fetch_add_explicit(&s->writes_conflict, 1, memory_order_relaxed);
		return rc;
	}
	if (rc != 0) {
		atomic_fetch_add_explicit(&s->writes_error, 1, memory_order_relaxed);
		errbuf_set(err, errlen, "%s", why);
		return rc == KUBE_ETIMEOUT ? SHARED_EBUDGET : SHARED_EAPI;
	}
	atomic_fetch_add_explicit(&s->writes_ok, 1, memory_order_relaxed);
	/* Remember what the server stored (its new resourceVersion). An answer we cannot read
	 * leaves the node unknown: the next placement's write conflicts and reads it. Not
	 * capped (record.h, "The cap"): it holds what this replica sent, entries capped when
	 * read and its own puts, whose stamps a bound narrowed by this answer could trim. */
	struct record stored;
	record_init(&stored);
	if (record_from_lease(out, &stored, why, sizeof(why)) == 0)
		store(s, node, &stored);
	else
		record_free(&stored);
	cJSON_Delete(out);
	return 0;
}

int shared_load(struct shared *s, const char *node, struct record *rec)
{
	if (s == NULL || node == NULL || node[0] == '\0' || rec == NULL)
		return SHARED_EINVAL;
	int rc = load(s, node, rec);
	if (rc == 0)
		drop_gone(s, rec);
	return rc;
}

int shared_read(struct shared *s, const char *node, double deadline_s, struct record *rec,
                char *err, size_t errlen)
{
	if (s == NULL || node == NULL || node[0] == '\0' || rec == NULL)
		return SHARED_EINVAL;
	int rc = reread(s, node, deadline_s, rec, err, errlen);
	if (rc == 0)
		drop_gone(s, rec);
	return rc;
}

int shared_write(struct shared *s, const char *node, struct record *rec, char *err, size_t errlen)
{
	if (s == NULL || node == NULL || node[0] == '\0' || rec == NULL)
		return SHARED_EINVAL;
	int rc = write_record(s, node, rec, err, errlen);
	if (rc == KUBE_ECONFLICT || rc == KUBE_ENOTFOUND) {
		errbuf_set(err, errlen, "reservation record %s/%s: %s", s->ns, node,
		           rc == KUBE_ECONFLICT
		               ? "409 Conflict (written by another replica since it "
		                 "was read)"
		               : "404 Not Found (deleted since it was read)");
		return SHARED_ECONFLICT;
	}
	return rc;
}

/* The latest deadline of the batch's placements still undecided: reads serve them all. */
static double batch_deadline(const struct waiter *batch)
{
	double d = 0;
	for (const struct waiter *w = batch; w != NULL; w = w->next)
		if (!w->finished && w->deadline_s > d)
			d = w->deadline_s;
	return d;
}

static void finish(struct waiter *w, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finish(struct waiter *w, int rc, const char *fmt, ...)
{
	w->rc = rc;
	w->finished = 1;
	if (fmt != NULL && w->err != NULL && w->errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(w->err, w->errlen, fmt, ap);
		va_end(ap);
	}
}

/*
 * Decide and write for a batch of placements on one node (group commit): each decides in turn
 * over the same working copy of the record, so later ones count the entries of earlier ones, and
 * one write stores them all. A conflict, or a denial that asks for a fresh record, reads the
 * record and decides the whole batch again. A placement whose deadline has passed before a
 * round leaves the batch (SHARED_EBUDGET) without its entry being written.
 */
static void run_batch(struct shared *s, const char *node, struct waiter *batch)
{
	char err[ERR_MAX];
	struct record base, work;
	unsigned rounds = 0;
	int fresh = 0, reread_done = 0, rc;

	record_init(&work);
	if (load(s, node, &base) != 0) {
		for (struct waiter *w = batch; w != NULL; w = w->next)
			finish(w, SHARED_ENOMEM, "reservation record %s/%s: out of memory", s->ns,
			       node);
		return;
	}
	for (;;) {
		int any_write = 0, any_reread = 0, left = 0;
		double now = monotime_s();

		for (struct waiter *w = batch; w != NULL; w = w->next) {
			if (w->finished)
				continue;
			if (now >= w->deadline_s || rounds >= MAX_ATTEMPT)
				finish(w, SHARED_EBUDGET,
				       "reservation record %s/%s: no time left after %u attempt%s "
				       "(placements on the node queue for one write at a time)",
				       s->ns, node, w->attempts, w->attempts == 1 ? "" : "s");
			else
				left++;
		}
		if (left == 0)
			break;
		if (rounds > 0)
			atomic_fetch_add_explicit(&s->retries, (unsigned long)left,
			                          memory_order_relaxed);
		rounds++;
		drop_gone(s, &base);
		record_free(&work);
		if (record_copy(&work, &base) != 0) {
			rc = SHARED_ENOMEM;
			snprintf(err, sizeof(err), "reservation record %s/%s: out of memory", s->ns,
			         node);
			goto fail;
		}
		for (struct waiter *w = batch; w != NULL; w = w->next) {
			if (w->finished)
				continue;
			w->verdict = w->decide(w->ctx, &work, fresh);
			w->attempts++;
			any_write |= w->verdict == SHARED_WRITE;
			any_reread |= w->verdict == SHARED_REREAD;
		}
		if (any_reread && !fresh && !reread_done) {
			reread_done = 1;
			if ((rc = reread(s, node, batch_deadline(batch), &base, err,
			                 sizeof(err))) != 0)
				goto fail;
			fresh = 1;
			continue;
		}
		if (!any_write) {
			for (struct waiter *w = batch; w != NULL; w = w->next)
				if (!w->finished)
					finish(w, 0, NULL);
			break;
		}
		rc = write_record(s, node, &work, err, sizeof(err));
		if (rc == 0) {
			for (struct waiter *w = batch; w != NULL; w = w->next)
				if (!w->finished)
					finish(w, 0, NULL);
			break;
		}
		if (rc != KUBE_ECONFLICT && rc != KUBE_ENOTFOUND)
			goto fail;
		/* Another replica wrote first: read what it wrote and decide again. */
		if ((rc = reread(s, node, batch_deadline(batch), &base, err, sizeof(err))) != 0)
			goto fail;
		fresh = 1;
	}
	record_free(&work);
	record_free(&base);
	return;
fail:
	/* Every placement of the batch fails: a denial may have counted a batch-mate's entry
	 * that was never written. */
	for (struct waiter *w = batch; w != NULL; w = w->next)
		if (!w->finished)
			finish(w, rc, "%s", err);
	record_free(&work);
	record_free(&base);
}

int shared_place(struct shared *s, const char *node, double deadline_s, shared_decide_fn decide,
                 void *ctx, unsigned *attempts, char *err, size_t errlen)
{
	struct waiter me = {
	    .decide = decide, .ctx = ctx, .deadline_s = deadline_s, .err = err, .errlen = errlen};

	if (attempts != NULL)
		*attempts = 0;
	if (s == NULL || node == NULL || node[0] == '\0' || decide == NULL)
		return SHARED_EINVAL;
	pthread_cond_init(&me.cv, NULL);
	pthread_mutex_lock(&s->mu);
	struct known *k = known_get_locked(s, node);
	if (k == NULL) { /* no entry for the node: decide alone, unbatched */
		pthread_mutex_unlock(&s->mu);
		run_batch(s, node, &me);
		goto out; /* me.finished: its result is set */
	}
	if (k->queue_tail != NULL)
		k->queue_tail->next = &me;
	else
		k->queue = &me;
	k->queue_tail = &me;
	if (!k->busy) {
		k->busy = 1;
		me.leader = 1;
	}
	while (!me.done && !me.leader)
		pthread_cond_wait(&me.cv, &s->mu);
	/* The leader decides and writes for everyone queued, batch after batch, until its own
	 * placement is done; then it hands the node to the next waiter, if any. */
	while (!me.done) {
		struct waiter *batch = k->queue;
		k->queue = k->queue_tail = NULL;
		pthread_mutex_unlock(&s->mu);
		run_batch(s, node, batch);
		pthread_mutex_lock(&s->mu);
		for (struct waiter *w = batch, *next; w != NULL; w = next) {
			next = w->next;
			w->next = NULL;
			w->done = 1; /* published under mu: the waiter reads its result after */
			if (w != &me)
				pthread_cond_signal(&w->cv);
		}
	}
	if (me.leader) {
		if (k->queue != NULL) {
			k->queue->leader = 1;
			pthread_cond_signal(&k->queue->cv);
		} else {
			k->busy = 0;
		}
	}
	pthread_mutex_unlock(&s->mu);
out:
	pthread_cond_destroy(&me.cv);
	if (attempts != NULL)
		*attempts = me.attempts;
	return me.rc;
}

size_t shared_each_entry(struct shared *s, const char *node, shared_entry_fn fn, void *ctx)
{
	size_t n = 0;
	uint64_t now = clock_now(s, 0);

	pthread_mutex_lock(&s->mu);
	struct known *k = find(s, node);
	for (size_t i = 0; k != NULL && i < k->rec.n; i++) {
		const struct record_entry *e = &k->rec.entries[i];
		if (resv_expired(e->expires_ms, now) || is_gone(s, e->uid)) /* rules 1 and 3 */
			continue;
		fn(ctx, e->key, e->uid, e->claim, e->bytes);
		n++;
	}
	pthread_mutex_unlock(&s->mu);
	return n;
}

void shared_collect(void *ctx, struct metrics_writer *w)
{
	struct shared *s = ctx;
	unsigned long long cum = 0;

	metrics_printf(w, "# HELP gpu_memory_guard_reservation_writes_total Writes of shared "
	                  "reservation records (Leases).\n"
	                  "# TYPE gpu_memory_guard_reservation_writes_total counter\n");
	metrics_printf(w, "gpu_memory_guard_reservation_writes_total{result=\"ok\"} %lu\n",
	               atomic_load(&s->writes_ok));
	metrics_printf(w, "gpu_memory_guard_reservation_writes_total{result=\"conflict\"} %lu\n",
	               atomic_load(&s->writes_conflict));
	metrics_printf(w, "gpu_memory_guard_reservation_writes_total{result=\"error\"} %lu\n",
	               atomic_load(&s->writes_error));
	metrics_printf(w,
	               "# HELP gpu_memory_guard_reservation_conflicts_total Record writes "
	               "refused with 409 Conflict (another replica wrote first).\n"
	               "# TYPE gpu_memory_guard_reservation_conflicts_total counter\n"
	               "gpu_memory_guard_reservation_conflicts_total %lu\n",
	               atomic_load(&s->writes_conflict));
	metrics_printf(w,
	               "# HELP gpu_memory_guard_reservation_retries_total Placements decided "
	               "again after a conflict or a re-read.\n"
	               "# TYPE gpu_memory_guard_reservation_retries_total counter\n"
	               "gpu_memory_guard_reservation_retries_total %lu\n",
	               atomic_load(&s->retries));
	metrics_printf(w,
	               "# HELP gpu_memory_guard_reservation_reads_total Reads of shared "
	               "reservation records.\n"
	               "# TYPE gpu_memory_guard_reservation_reads_total counter\n"
	               "gpu_memory_guard_reservation_reads_total{result=\"ok\"} %lu\n"
	               "gpu_memory_guard_reservation_reads_total{result=\"error\"} %lu\n",
	               atomic_load(&s->reads_ok), atomic_load(&s->reads_error));
	metrics_printf(w,
	               "# HELP gpu_memory_guard_reservation_expiry_capped_total Record entries "
	               "read with an expiry later than a replica could write then (the shared "
	               "clock's latest bound plus its width plus --reservation-ttl), counted "
	               "until that cap instead.\n"
	               "# TYPE gpu_memory_guard_reservation_expiry_capped_total counter\n"
	               "gpu_memory_guard_reservation_expiry_capped_total %lu\n",
	               atomic_load(&s->expiry_capped));
	metrics_printf(w, "# HELP gpu_memory_guard_reservation_write_seconds Latency of record "
	                  "writes.\n# TYPE gpu_memory_guard_reservation_write_seconds histogram\n");
	for (size_t i = 0; i <= N_WB; i++) {
		cum += atomic_load(&s->wb[i]);
		if (i < N_WB)
			metrics_printf(
			    w,
			    "gpu_memory_guard_reservation_write_seconds_bucket{le=\"%g\"} "
			    "%llu\n",
			    write_buckets[i], cum);
		else
			metrics_printf(
			    w,
			    "gpu_memory_guard_reservation_write_seconds_bucket{le=\"+Inf\"} "
			    "%llu\n",
			    cum);
	}
	metrics_printf(w, "gpu_memory_guard_reservation_write_seconds_sum %.6f\n",
	               (double)atomic_load(&s->wsum_us) / 1e6);
	metrics_printf(w, "gpu_memory_guard_reservation_write_seconds_count %llu\n", cum);
	metrics_printf(w, "# HELP gpu_memory_guard_reservation_record_entries Entries of each "
	                  "node's reservation record as this replica last wrote or read it.\n"
	                  "# TYPE gpu_memory_guard_reservation_record_entries gauge\n");
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < BUCKETS; i++)
		for (struct known *k = s->table[i]; k != NULL; k = k->next)
			metrics_printf(
			    w, "gpu_memory_guard_reservation_record_entries{node=\"%s\"} %zu\n",
			    k->node, k->rec.n);
	pthread_mutex_unlock(&s->mu);
}
