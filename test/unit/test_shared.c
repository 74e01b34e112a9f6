/* Unit tests for lib/cluster/shared: the compare-and-swap loop over a node's reservation record,
 * against a fake Lease API (an in-memory store with the API server's resourceVersion rules:
 * update with a stale version -> 409, create of an existing name -> 409, get of a missing one
 * -> 404). Includes two "replicas" (two struct shared over one fake store) racing on one node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>

#include "jsonpath.h"
#include "kube.h"
#include "metrics.h"
#include "serverclock.h"
#include "shared.h"
#include "fake_lease.h"

#define GI   (1024ull * 1024 * 1024)
#define WALL 1800000000000ull

static uint64_t wall_now = WALL;
static uint64_t fake_wall(void)
{
	return __atomic_load_n(&wall_now, __ATOMIC_RELAXED);
}

static struct shared *replica(struct fake_lease *f)
{
	struct shared_api api = fake_lease_api(f);
	return shared_new("gmg-system", &api, 60000, fake_wall);
}

/* The entries stored in the fake's Lease. */
static size_t stored_entries(struct fake_lease *f, uint64_t *bytes)
{
	struct record r;
	char err[128];
	size_t n = 0;
	record_init(&r);
	pthread_mutex_lock(&f->mu);
	if (f->lease != NULL) {
		cJSON *c = fake_lease_stored(f);
		assert_int_equal(record_from_lease(c, &r, err, sizeof(err)), 0);
		cJSON_Delete(c);
		n = r.n;
	}
	pthread_mutex_unlock(&f->mu);
	if (bytes != NULL)
		*bytes = record_live_bytes(&r, fake_wall());
	record_free(&r);
	return n;
}

/* ---- a decide function: admit `bytes` while the record's live sum stays within `limit` ---- */

struct want {
	const char *key;
	uint64_t bytes, limit;
	int dry_run;
	int calls, fresh_calls;
	int allowed; /* the last call's verdict */
	uint64_t seen_bytes;
};

static enum shared_verdict decide_fits(void *ctx, struct record *rec, int fresh)
{
	struct want *w = ctx;
	uint64_t used = 0;
	w->calls++;
	w->fresh_calls += fresh;
	for (size_t i = 0; i < rec->n; i++)
		if (strcmp(rec->entries[i].key, w->key) != 0 &&
		    rec->entries[i].expires_ms > fake_wall())
			used += rec->entries[i].bytes;
	w->seen_bytes = used;
	w->allowed = used + w->bytes <= w->limit;
	if (!w->allowed)
		return used > 0 && !fresh ? SHARED_REREAD : SHARED_NO_WRITE;
	if (w->dry_run)
		return SHARED_NO_WRITE;
	record_prune(rec, fake_wall(), NULL, 0, 0, 0);
	if (record_put(rec, w->key, NULL, w->bytes, fake_wall() + 60000) != 0)
		return SHARED_NO_WRITE;
	return SHARED_WRITE;
}

static int place(struct shared *s, struct want *w, unsigned *attempts)
{
	char err[512];
	return shared_place(s, "gpu-1", 1e18, decide_fits, w, attempts, err, sizeof(err));
}

static void test_first_write_creates_then_updates_without_reads(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *s = replica(f);
	struct want a = {"ns/a", 10 * GI, 36 * GI, 0, 0, 0, 0, 0};
	struct want b = {"ns/b", 10 * GI, 36 * GI, 0, 0, 0, 0, 0};
	unsigned attempts;
	(void)state;
	assert_int_equal(place(s, &a, &attempts), 0);
	assert_true(a.allowed);
	assert_int_equal(attempts, 1);
	assert_int_equal(f->creates, 1);
	assert_int_equal(place(s, &b, &attempts), 0);
	assert_int_equal(b.seen_bytes, 10 * GI); /* from its own last write, not a read */
	assert_int_equal(f->updates, 1);
	assert_int_equal(f->gets, 0);
	uint64_t bytes;
	assert_int_equal(stored_entries(f, &bytes), 2);
	assert_int_equal(bytes, 20 * GI);
	shared_free(s);
	fake_lease_free(f);
}

static struct shared *other_replica; /* used by the before_update hook */

static void other_replica_writes(struct fake_lease *f)
{
	struct want o = {"ns/other", 30 * GI, 36 * GI, 0, 0, 0, 0, 0};
	(void)f;
	assert_int_equal(place(other_replica, &o, NULL), 0);
	assert_true(o.allowed);
}

static void other_replica_writes_then_get_fails(struct fake_lease *f)
{
	other_replica_writes(f);
	pthread_mutex_lock(&f->mu);
	f->fail_next_get = KUBE_ETRANSPORT;
	pthread_mutex_unlock(&f->mu);
}

static void test_conflict_reads_and_decides_again(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *a = replica(f);
	other_replica = replica(f);
	struct want first = {"ns/first", 1 * GI, 36 * GI, 0, 0, 0, 0, 0};
	struct want w = {"ns/late", 10 * GI, 36 * GI, 0, 0, 0, 0, 0};
	unsigned attempts;
	(void)state;
	assert_int_equal(place(a, &first, NULL), 0); /* a knows the record at some version */
	f->before_update = other_replica_writes;     /* b writes 30Gi between a's read and write */
	assert_int_equal(place(a, &w, &attempts), 0);
	/* a decided on 1Gi (fits), its write got 409, it read 31Gi and refused: 41 > 36. */
	assert_int_equal(attempts, 2);
	assert_false(w.allowed);
	assert_int_equal(w.seen_bytes, 31 * GI);
	assert_int_equal(w.fresh_calls, 1);
	assert_int_equal(f->conflicts, 2); /* b's create (it had no copy) and a's update */
	assert_int_equal(f->gets, 2);
	uint64_t bytes;
	assert_int_equal(stored_entries(f, &bytes), 2);
	assert_int_equal(bytes, 31 * GI);
	shared_free(a);
	shared_free(other_replica);
	fake_lease_free(f);
}

static void test_create_race_and_deleted_record(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *a = replica(f), *b = replica(f);
	struct want wa = {"ns/a", 20 * GI, 36 * GI, 0, 0, 0, 0, 0};
	struct want wb = {"ns/b", 20 * GI, 36 * GI, 0, 0, 0, 0, 0};
	unsigned attempts;
	(void)state;
	assert_int_equal(place(a, &wa, NULL), 0);
	/* b never saw the record: it creates, gets 409 AlreadyExists, reads, refuses. */
	assert_int_equal(place(b, &wb, &attempts), 0);
	assert_int_equal(attempts, 2);
	assert_false(wb.allowed);
	/* The Lease is deleted by hand: a's update gets 404, it reads (none) and creates. */
	pthread_mutex_lock(&f->mu);
	cJSON_Delete(f->lease);
	f->lease = NULL;
	pthread_mutex_unlock(&f->mu);
	wb.calls = 0;
	assert_int_equal(place(a, &wb, &attempts), 0);
	assert_true(wb.allowed);
	assert_int_equal(attempts, 2);
	assert_int_equal(stored_entries(f, NULL), 1);
	shared_free(a);
	shared_free(b);
	fake_lease_free(f);
}

/* The Lease deleted (by hand, or by a cleanup) between this replica's last read or write and
 * its next update: the PUT answers 404. The placement is decided again on a fresh read (none:
 * empty), the record created, and the placement admitted since it fits. A 404 is not an API
 * error (that would refuse every placement on the node). */
static void delete_lease(struct fake_lease *f)
{
	pthread_mutex_lock(&f->mu);
	cJSON_Delete(f->lease);
	f->lease = NULL;
	pthread_mutex_unlock(&f->mu);
}

static void test_update_of_deleted_record_creates_it(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *a = replica(f);
	struct want first = {"ns/first", 20 * GI, 36 * GI, 0, 0, 0, 0, 0};
	struct want w = {"ns/next", 10 * GI, 36 * GI, 0, 0, 0, 0, 0};
	unsigned attempts;
	char err[512] = "";
	uint64_t bytes;
	(void)state;
	assert_int_equal(place(a, &first, NULL), 0); /* created: a knows it at its version */
	assert_int_equal(f->creates, 1);
	f->before_update = delete_lease; /* gone between a's copy and its PUT */
	assert_int_equal(
	    shared_place(a, "gpu-1", 1e18, decide_fits, &w, &attempts, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	/* Decided on a's copy (20Gi: fits), the update got 404, the read found no Lease, decided
	 * again on the empty record and created it. */
	assert_int_equal(f->updates, 1);
	assert_int_equal(f->gets, 1);
	assert_int_equal(f->creates, 2);
	assert_int_equal(attempts, 2);
	assert_int_equal(w.fresh_calls, 1);
	assert_true(w.allowed);
	assert_int_equal(w.seen_bytes, 0);
	assert_int_equal(stored_entries(f, &bytes), 1);
	assert_int_equal(bytes, 10 * GI);
	/* a's copy is the created record: the next placement updates it without a read. */
	struct want w2 = {"ns/third", 10 * GI, 36 * GI, 0, 0, 0, 0, 0};
	assert_int_equal(place(a, &w2, &attempts), 0);
	assert_true(w2.allowed);
	assert_int_equal(attempts, 1);
	assert_int_equal(f->gets, 1);
	assert_int_equal(f->updates, 2);
	assert_int_equal(stored_entries(f, &bytes), 2);
	assert_int_equal(bytes, 20 * GI);
	shared_free(a);
	fake_lease_free(f);
}

static void test_denial_on_stale_entries_rereads_once(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *a = replica(f), *b = replica(f);
	struct want big = {"ns/big", 30 * GI, 36 * GI, 0, 0, 0, 0, 0};
	struct want w = {"ns/w", 30 * GI, 36 * GI, 0, 0, 0, 0, 0};
	unsigned attempts;
	(void)state;
	assert_int_equal(place(a, &big, NULL), 0);
	/* b writes a record without ns/big (its pod became visible, say): a still holds 30Gi. */
	struct record r;
	record_init(&r);
	cJSON *empty = record_to_lease(&r, "gmg-system", "gpu-1", WALL);
	pthread_mutex_lock(&f->mu);
	cJSON_Delete(f->lease);
	f->lease = empty;
	f->rv++;
	pthread_mutex_unlock(&f->mu);
	/* a's stale copy refuses; it reads the record and admits. */
	assert_int_equal(place(a, &w, &attempts), 0);
	assert_true(w.allowed);
	assert_int_equal(attempts, 2);
	assert_int_equal(f->gets, 1);
	/* A refusal on a fresh record does not read again. */
	struct want no = {"ns/no", 30 * GI, 36 * GI, 0, 0, 0, 0, 0};
	f->gets = 0;
	assert_int_equal(place(b, &no, &attempts), 0); /* b has no copy: decides on empty */
	assert_false(no.allowed);                      /* after its create conflicted and it read */
	assert_int_equal(f->gets, 1);
	shared_free(a);
	shared_free(b);
	fake_lease_free(f);
}

static void test_dry_run_and_denial_write_nothing(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *s = replica(f);
	struct want dry = {"ns/dry", GI, 36 * GI, 1, 0, 0, 0, 0};
	struct want huge = {"ns/huge", 40 * GI, 36 * GI, 0, 0, 0, 0, 0};
	(void)state;
	assert_int_equal(place(s, &dry, NULL), 0);
	assert_true(dry.allowed);
	assert_int_equal(place(s, &huge, NULL), 0);
	assert_false(huge.allowed);
	assert_int_equal(f->creates + f->updates + f->gets, 0);
	shared_free(s);
	fake_lease_free(f);
}

static void test_failures_and_deadline(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *s = replica(f);
	struct want w = {"ns/w", GI, 36 * GI, 0, 0, 0, 0, 0};
	char err[512];
	(void)state;
	f->fail_next_write = KUBE_EHTTP;
	assert_int_equal(place(s, &w, NULL), SHARED_EAPI);
	f->fail_next_write = KUBE_ETIMEOUT;
	assert_int_equal(place(s, &w, NULL), SHARED_EBUDGET);
	/* The deadline has passed: no write is started. */
	assert_int_equal(shared_place(s, "gpu-1", 0.0, decide_fits, &w, NULL, err, sizeof(err)),
	                 SHARED_EBUDGET);
	assert_non_null(strstr(err, "gmg-system/gpu-1"));
	assert_int_equal(f->creates, 2);
	assert_int_equal(place(s, &w, NULL), 0);
	assert_int_equal(stored_entries(f, NULL), 1);
	/* A conflict whose re-read fails. */
	other_replica = replica(f);
	f->before_update = other_replica_writes_then_get_fails;
	struct want w2 = {"ns/w2", GI, 36 * GI, 0, 0, 0, 0, 0};
	assert_int_equal(place(s, &w2, NULL), SHARED_EAPI);
	shared_free(other_replica);
	assert_int_equal(shared_place(NULL, "gpu-1", 1e18, decide_fits, &w, NULL, err, sizeof(err)),
	                 SHARED_EINVAL);
	assert_int_equal(shared_place(s, "", 1e18, decide_fits, &w, NULL, err, sizeof(err)),
	                 SHARED_EINVAL);
	shared_free(s);
	fake_lease_free(f);
}

static void set_annotation(struct fake_lease *f, const char *value, const char *renew)
{
	pthread_mutex_lock(&f->mu);
	cJSON_Delete(f->lease);
	f->lease = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(f->lease, "metadata");
	cJSON_AddStringToObject(meta, "name", "gpu-1");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"), RECORD_ANNOTATION,
	                        value);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(f->lease, "spec"), "renewTime", renew);
	f->rv++;
	pthread_mutex_unlock(&f->mu);
}

static void test_unreadable_record(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *s = replica(f);
	struct want w = {"ns/w", GI, 36 * GI, 0, 0, 0, 0, 0};
	char err[512];
	(void)state;
	/* Written 10 s ago by hand: its entries may still count. Refused, with the Lease named. */
	set_annotation(f, "{not json", "2027-01-15T07:59:50.000000Z");
	int rc = shared_place(s, "gpu-1", 1e18, decide_fits, &w, NULL, err, sizeof(err));
	assert_int_equal(rc, SHARED_ECORRUPT);
	assert_non_null(strstr(err, "gmg-system/gpu-1 is unreadable"));
	/* One TTL after its renewTime: overwritten as empty. */
	set_annotation(f, "{not json", "2027-01-15T07:59:00.000000Z");
	assert_int_equal(place(s, &w, NULL), 0);
	assert_true(w.allowed);
	assert_int_equal(stored_entries(f, NULL), 1);
	shared_free(s);
	fake_lease_free(f);
}

/* ---- two replicas, many threads, one node: exactly what fits is admitted ---- */

struct racer {
	struct shared *s;
	int first, count;
	int admitted;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	for (int i = 0; i < r->count; i++) {
		char key[32];
		snprintf(key, sizeof(key), "ns/p%d", r->first + i);
		struct want w = {key, GI, 36 * GI, 0, 0, 0, 0, 0};
		char err[512];
		int rc = shared_place(r->s, "gpu-1", 1e18, decide_fits, &w, NULL, err, sizeof(err));
		if (rc == 0 && w.allowed)
			r->admitted++;
	}
	return NULL;
}

static void test_replicas_race_exactly(void **state)
{
	(void)state;
	for (int round = 0; round < 20; round++) {
		struct fake_lease *f = fake_lease_new();
		struct shared *reps[3] = {replica(f), replica(f), replica(f)};
		struct racer rs[6];
		pthread_t th[6];
		int admitted = 0;
		for (int i = 0; i < 6; i++) {
			rs[i] = (struct racer){reps[i % 3], i * 10, 10, 0};
			assert_int_equal(pthread_create(&th[i], NULL, race, &rs[i]), 0);
		}
		for (int i = 0; i < 6; i++) {
			pthread_join(th[i], NULL);
			admitted += rs[i].admitted;
		}
		uint64_t bytes;
		assert_int_equal(admitted, 36);
		assert_int_equal(stored_entries(f, &bytes), 36);
		assert_int_equal(bytes, 36 * GI);
		for (int i = 0; i < 3; i++)
			shared_free(reps[i]);
		fake_lease_free(f);
	}
}

/* One replica, many threads on one node, a slow API server: placements queued behind a write
 * join the next one (group commit): exactly what fits, in fewer writes than admissions. */
static void test_group_commit(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *s = replica(f);
	struct racer rs[12];
	pthread_t th[12];
	int admitted = 0;
	(void)state;
	f->write_delay_us = 20000;
	for (int i = 0; i < 12; i++) {
		rs[i] = (struct racer){s, i * 5, 5, 0};
		assert_int_equal(pthread_create(&th[i], NULL, race, &rs[i]), 0);
	}
	for (int i = 0; i < 12; i++) {
		pthread_join(th[i], NULL);
		admitted += rs[i].admitted;
	}
	uint64_t bytes;
	assert_int_equal(admitted, 36);
	assert_int_equal(stored_entries(f, &bytes), 36);
	assert_int_equal(bytes, 36 * GI);
	int writes = f->creates + f->updates - f->conflicts;
	print_message("group commit: %d admitted in %d writes\n", admitted, writes);
	assert_true(writes <= admitted / 2);
	assert_int_equal(f->conflicts, 0); /* one replica never conflicts with itself */
	shared_free(s);
	fake_lease_free(f);
}

static void test_metrics(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *s = replica(f);
	struct metrics *m = metrics_new();
	struct want w = {"ns/w", GI, 36 * GI, 0, 0, 0, 0, 0};
	char *text = NULL;
	size_t len;
	(void)state;
	assert_int_equal(metrics_add_collector(m, shared_collect, s), 0);
	assert_int_equal(place(s, &w, NULL), 0);
	other_replica = replica(f);
	f->before_update = other_replica_writes;
	struct want w2 = {"ns/w2", GI, 36 * GI, 0, 0, 0, 0, 0};
	assert_int_equal(place(s, &w2, NULL), 0);
	shared_free(other_replica);
	assert_int_equal(metrics_render(m, &text, &len), 0);
	assert_non_null(
	    strstr(text, "gpu_memory_guard_reservation_writes_total{result=\"ok\"} 2\n"));
	assert_non_null(
	    strstr(text, "gpu_memory_guard_reservation_writes_total{result=\"conflict\"} 1\n"));
	assert_non_null(strstr(text, "gpu_memory_guard_reservation_conflicts_total 1\n"));
	assert_non_null(strstr(text, "gpu_memory_guard_reservation_retries_total 1\n"));
	assert_non_null(
	    strstr(text, "gpu_memory_guard_reservation_reads_total{result=\"ok\"} 1\n"));
	assert_non_null(strstr(text, "gpu_memory_guard_reservation_write_seconds_count 3\n"));
	assert_non_null(
	    strstr(text, "gpu_memory_guard_reservation_record_entries{node=\"gpu-1\"} 3\n"));
	free(text);
	metrics_free(m);
	shared_free(s);
	fake_lease_free(f);
}

struct visited {
	size_t n;
	uint64_t bytes;
	char last_uid[64];
};

static void visit_entry(void *ctx, const char *key, const char *uid, const char *claim,
                        uint64_t bytes)
{
	struct visited *v = ctx;
	(void)key;
	(void)claim;
	v->n++;
	v->bytes += bytes;
	snprintf(v->last_uid, sizeof(v->last_uid), "%s", uid);
}

static void test_each_entry_reads_the_known_record(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *s = replica(f);
	struct want a = {"ns/a", 10 * GI, 36 * GI, 0, 0, 0, 0, 0};
	struct want b = {"ns/b", 5 * GI, 36 * GI, 0, 0, 0, 0, 0};
	struct visited v = {0};
	(void)state;
	assert_int_equal(shared_each_entry(s, "gpu-1", visit_entry, &v), 0); /* none known */
	assert_int_equal(place(s, &a, NULL), 0);
	wall_now += 30000;
	assert_int_equal(place(s, &b, NULL), 0);
	int gets = f->gets;
	assert_int_equal(shared_each_entry(s, "gpu-1", visit_entry, &v), 2);
	assert_int_equal(v.bytes, 15 * GI);
	assert_int_equal(f->gets, gets); /* no API call */
	wall_now += 30000;               /* a's entry expires, b's has 30 s left */
	memset(&v, 0, sizeof(v));
	assert_int_equal(shared_each_entry(s, "gpu-1", visit_entry, &v), 1);
	assert_int_equal(v.bytes, 5 * GI);
	assert_int_equal(shared_each_entry(s, "gpu-2", visit_entry, &v), 0);
	wall_now = WALL;
	shared_free(s);
	fake_lease_free(f);
}

/* ---- two replicas whose clocks are 180 s apart (issue 20): the API server's clock ---- */

static uint64_t mono_now = 500000;          /* both replicas' CLOCK_MONOTONIC, ms */
#define SERVER_OFF ((int64_t)WALL - 500000) /* the API server's clock: mono + this */
static uint64_t wall_slow(void)
{
	return mono_now + SERVER_OFF - 90000;
} /* 90 s behind */
static uint64_t wall_fast(void)
{
	return mono_now + SERVER_OFF + 90000;
} /* 90 s ahead */

static int server_clock(void *ctx, int latest, uint64_t *out)
{
	return serverclock_now_ms(ctx, latest ? SERVERCLOCK_LATEST : SERVERCLOCK_EARLIEST, mono_now,
	                          out);
}

/* An answer of the API server: its Date header, 3 ms of round trip. */
static void answer(struct serverclock *sc)
{
	serverclock_observe(sc, (int64_t)(mono_now + 1 + SERVER_OFF) / 1000, mono_now,
	                    mono_now + 3);
}

struct skewed {
	struct shared *s;
	uint64_t bytes, limit;
	int allowed;
};

/* The webhook's use of the clocks (decide_on_record): judge by shared_now_wall_ms, stamp from
 * shared_stamp_wall_ms. */
static enum shared_verdict decide_skewed(void *ctx, struct record *rec, int fresh)
{
	struct skewed *k = ctx;
	uint64_t now = shared_now_wall_ms(k->s), used = record_live_bytes(rec, now);
	(void)fresh;
	k->allowed = used + k->bytes <= k->limit;
	if (!k->allowed)
		return SHARED_NO_WRITE;
	record_prune(rec, now, NULL, 0, 0, 0);
	if (record_put(rec, "ns/p", NULL, k->bytes, shared_stamp_wall_ms(k->s) + 60000) != 0)
		return SHARED_NO_WRITE;
	return SHARED_WRITE;
}

/* Replica A 90 s behind writes 30Gi for 60 s; replica B 90 s ahead judges 20 s later. On their
 * own clocks B would see the entry expired 10 s before A wrote it and admit 30Gi more over a
 * 36Gi limit; on the API server's clock both agree it has 40 s left. And it does expire: 61 s
 * after the write B admits. */
static void test_skewed_replicas_agree(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared_api api = fake_lease_api(f);
	struct shared *a = shared_new("gmg-system", &api, 60000, wall_slow);
	struct shared *b = shared_new("gmg-system", &api, 60000, wall_fast);
	struct serverclock *ca = serverclock_new(), *cb = serverclock_new();
	char err[256];
	(void)state;

	/* Their own clocks alone: the overfill this guards against. */
	struct skewed ka = {a, 30 * GI, 36 * GI, 0}, kb = {b, 30 * GI, 36 * GI, 0};
	assert_int_equal(shared_place(a, "gpu-1", 1e18, decide_skewed, &ka, NULL, err, sizeof(err)),
	                 0);
	assert_true(ka.allowed);
	mono_now += 20000;
	assert_int_equal(shared_place(b, "gpu-1", 1e18, decide_skewed, &kb, NULL, err, sizeof(err)),
	                 0);
	assert_true(kb.allowed); /* wrong: 60Gi on 36Gi */
	shared_free(a);
	shared_free(b);
	fake_lease_free(f);

	/* The API server's clock. */
	f = fake_lease_new();
	api = fake_lease_api(f);
	a = shared_new("gmg-system", &api, 60000, wall_slow);
	b = shared_new("gmg-system", &api, 60000, wall_fast);
	shared_set_clock(a, server_clock, ca);
	shared_set_clock(b, server_clock, cb);
	ka.s = a;
	kb.s = b;
	answer(ca);
	assert_int_equal(shared_place(a, "gpu-1", 1e18, decide_skewed, &ka, NULL, err, sizeof(err)),
	                 0);
	assert_true(ka.allowed);
	uint64_t written = mono_now;
	mono_now += 20000;
	answer(cb);
	assert_int_equal(shared_place(b, "gpu-1", 1e18, decide_skewed, &kb, NULL, err, sizeof(err)),
	                 0);
	assert_false(kb.allowed);
	struct visited v = {0};
	assert_int_equal(shared_each_entry(b, "gpu-1", visit_entry, &v), 1); /* the extender too */
	mono_now = written + 61000;
	answer(cb);
	assert_int_equal(shared_each_entry(b, "gpu-1", visit_entry, &v), 1); /* within 2 s */
	mono_now = written + 62500;
	answer(cb);
	memset(&v, 0, sizeof(v));
	assert_int_equal(shared_each_entry(b, "gpu-1", visit_entry, &v), 0);
	assert_int_equal(shared_place(b, "gpu-1", 1e18, decide_skewed, &kb, NULL, err, sizeof(err)),
	                 0);
	assert_true(kb.allowed);
	shared_free(a);
	shared_free(b);
	serverclock_free(ca);
	serverclock_free(cb);
	fake_lease_free(f);
}

/* ---- the cap (record.h, "The cap"): an expiry written far ahead counts at most a TTL ---- */

/* The shared clock's bounds: 500 ms either side of fake_wall (a width of 1 s). */
static int wide_clock(void *ctx, int latest, uint64_t *out)
{
	(void)ctx;
	*out = latest ? fake_wall() + 500 : fake_wall() - 500;
	return 0;
}

struct clocked {
	struct shared *s;
	const char *key;
	uint64_t bytes, limit;
	int allowed;
};

/* decide_fits on the shared clock (as decide_skewed): a denial on a copy not read for it asks
 * for a read. */
static enum shared_verdict decide_clocked(void *ctx, struct record *rec, int fresh)
{
	struct clocked *c = ctx;
	uint64_t now = shared_now_wall_ms(c->s);
	c->allowed = record_live_bytes(rec, now) + c->bytes <= c->limit;
	if (!c->allowed)
		return fresh ? SHARED_NO_WRITE : SHARED_REREAD;
	record_prune(rec, now, NULL, 0, 0, 0);
	if (record_put(rec, c->key, NULL, c->bytes, shared_stamp_wall_ms(c->s) + 60000) != 0)
		return SHARED_NO_WRITE;
	return SHARED_WRITE;
}

/* The Lease holds, besides an honest entry (stamped by a replica at the same bounds), one of
 * 30Gi written to expire in 10 years. Read at WALL (bounds WALL -/+ 500, TTL 60 s) it counts
 * until WALL + 500 + 1000 + 60000 on the earliest bound, i.e. until fake_wall reaches
 * WALL + 62000, however often the same version is read again meanwhile; then a 30Gi placement
 * on the 36Gi node is admitted and its write drops the entry. Without the cap it refuses forever;
 * with a cap taken anew at every read of the same version it refuses as long as placements keep
 * coming (each denial on a copy reads it again). */
static void test_far_expiry_capped(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *a = replica(f);
	struct metrics *m = metrics_new();
	struct clocked p = {a, "ns/p", 30 * GI, 36 * GI, 0};
	struct record r;
	char err[512], *text = NULL;
	size_t len;
	(void)state;
	shared_set_clock(a, wide_clock, NULL);
	assert_int_equal(metrics_add_collector(m, shared_collect, a), 0);
	record_init(&r);
	assert_int_equal(record_put(&r, "ns/honest", NULL, 2 * GI, WALL + 500 + 60000), 0);
	assert_int_equal(record_put(&r, "ns/ghost", NULL, 30 * GI, WALL + 315360000000ull), 0);
	f->lease = record_to_lease(&r, "gmg-system", "gpu-1", WALL);
	record_free(&r);

	/* a has no copy: decides on none, its create conflicts, it reads and refuses. */
	assert_int_equal(shared_place(a, "gpu-1", 1e18, decide_clocked, &p, NULL, err, sizeof(err)),
	                 0);
	assert_false(p.allowed);
	assert_int_equal(f->gets, 1);
	assert_int_equal(shared_load(a, "gpu-1", &r), 0);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.entries[0].expires_ms, WALL + 60500); /* honest: untouched */
	assert_int_equal(r.entries[1].expires_ms, WALL + 61500); /* capped */
	record_free(&r);

	/* Denied on its copy, it reads the same version again: the cap stays where it was. */
	wall_now = WALL + 30000;
	assert_int_equal(shared_place(a, "gpu-1", 1e18, decide_clocked, &p, NULL, err, sizeof(err)),
	                 0);
	assert_false(p.allowed);
	assert_int_equal(f->gets, 2);
	wall_now = WALL + 61999;
	assert_int_equal(shared_place(a, "gpu-1", 1e18, decide_clocked, &p, NULL, err, sizeof(err)),
	                 0);
	assert_false(p.allowed);
	struct visited v = {0};
	assert_int_equal(shared_each_entry(a, "gpu-1", visit_entry, &v), 1); /* the extender too */
	wall_now = WALL + 62000;
	assert_int_equal(shared_each_entry(a, "gpu-1", visit_entry, &v), 0);
	assert_int_equal(shared_place(a, "gpu-1", 1e18, decide_clocked, &p, NULL, err, sizeof(err)),
	                 0);
	assert_true(p.allowed);
	uint64_t bytes;
	assert_int_equal(stored_entries(f, &bytes), 1); /* the write dropped both */
	assert_int_equal(bytes, 30 * GI);
	assert_int_equal(metrics_render(m, &text, &len), 0);
	assert_non_null(strstr(text, "gpu_memory_guard_reservation_expiry_capped_total 1\n"));
	free(text);
	wall_now = WALL;
	metrics_free(m);
	shared_free(a);
	fake_lease_free(f);
}

/* decide_fits, with the entry uid given to record_put (the gone rule matches by uid). */
static enum shared_verdict decide_with_uid(void *ctx, struct record *rec, int fresh)
{
	struct want *w = ctx;
	enum shared_verdict v = decide_fits(ctx, rec, fresh);
	if (v == SHARED_WRITE) /* decide_fits put it without a uid: give it one */
		snprintf(rec->entries[rec->n - 1].uid, sizeof(rec->entries[0].uid), "uid-%s",
		         w->key);
	return v;
}

static void test_forget_drops_gone_pods(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *a = replica(f), *b = replica(f);
	char err[512];
	struct visited v = {0};
	(void)state;
	struct want big = {"ns/big", 30 * GI, 36 * GI, 0, 0, 0, 0, 0};
	assert_int_equal(
	    shared_place(a, "gpu-1", 1e18, decide_with_uid, &big, NULL, err, sizeof(err)), 0);
	assert_true(big.allowed);
	/* ns/big is deleted before it shows on the node: both replicas' caches report it. */
	shared_forget(a, "uid-ns/big");
	shared_forget(b, "uid-ns/big");
	assert_int_equal(shared_each_entry(a, "gpu-1", visit_entry, &v), 0);
	struct want next = {"ns/next", 30 * GI, 36 * GI, 0, 0, 0, 0, 0};
	assert_int_equal(
	    shared_place(b, "gpu-1", 1e18, decide_with_uid, &next, NULL, err, sizeof(err)), 0);
	assert_true(next.allowed); /* 30 + 30 > 36 had ns/big still counted */
	uint64_t bytes;
	assert_int_equal(stored_entries(f, &bytes), 1); /* and the write dropped it */
	assert_int_equal(bytes, 30 * GI);
	/* Only the last SHARED_GONE_MAX uids are remembered: an evicted one counts again (a's
	 * copy of the record still holds ns/big, written before b dropped it). */
	for (int i = 0; i < SHARED_GONE_MAX - 1; i++) {
		char uid[32];
		snprintf(uid, sizeof(uid), "other-%d", i);
		shared_forget(a, uid);
	}
	memset(&v, 0, sizeof(v));
	assert_int_equal(shared_each_entry(a, "gpu-1", visit_entry, &v), 0); /* still known */
	shared_forget(a, "one-more");
	assert_int_equal(shared_each_entry(a, "gpu-1", visit_entry, &v), 1); /* evicted */
	assert_string_equal(v.last_uid, "uid-ns/big");
	shared_forget(a, NULL);
	shared_forget(a, "");
	shared_forget(NULL, "x");
	shared_free(a);
	shared_free(b);
	fake_lease_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_first_write_creates_then_updates_without_reads),
	    cmocka_unit_test(test_conflict_reads_and_decides_again),
	    cmocka_unit_test(test_create_race_and_deleted_record),
	    cmocka_unit_test(test_update_of_deleted_record_creates_it),
	    cmocka_unit_test(test_denial_on_stale_entries_rereads_once),
	    cmocka_unit_test(test_dry_run_and_denial_write_nothing),
	    cmocka_unit_test(test_failures_and_deadline),
	    cmocka_unit_test(test_unreadable_record),
	    cmocka_unit_test(test_replicas_race_exactly),
	    cmocka_unit_test(test_group_commit),
	    cmocka_unit_test(test_metrics),
	    cmocka_unit_test(test_each_entry_reads_the_known_record),
	    cmocka_unit_test(test_skewed_replicas_agree),
	    cmocka_unit_test(test_far_expiry_capped),
	    cmocka_unit_test(test_forget_drops_gone_pods),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
