/* Unit tests for lib/cluster/reservations: begin / items / put / commit over its two backends,
 * the local ledger and the shared record (over fake_lease.h, a test double of the API server's
 * Lease calls with its resourceVersion rules), including a conflict on commit in each. */
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

#include "kube.h"
#include "ledger.h"
#include "record.h"
#include "reservations.h"
#include "shared.h"
#include "fake_lease.h"

#define GI   (1024ull * 1024 * 1024)
#define WALL 1800000000000ull

static uint64_t wall_now = WALL;
static uint64_t fake_wall(void)
{
	return wall_now;
}

static struct shared *replica(struct fake_lease *f)
{
	struct shared_api api = fake_lease_api(f);
	return shared_new("gmg-system", &api, 60000, fake_wall);
}

/* The items' sum of bytes, and whether key is among them. */
static uint64_t items_bytes(struct resv *r, const char *key, int *has)
{
	const struct placement_item *it;
	size_t n;
	uint64_t sum = 0;

	assert_int_equal(resv_items(r, &it, &n), 0);
	if (has != NULL)
		*has = 0;
	for (size_t i = 0; i < n; i++) {
		sum += it[i].bytes;
		if (has != NULL && key != NULL && strcmp(it[i].key, key) == 0)
			*has = 1;
	}
	return sum;
}

/* One whole placement of key over the node's ledger entry: begin, put, commit. */
static int ledger_place(struct ledger *l, const char *key, const char *uid, uint64_t bytes,
                        uint64_t now)
{
	struct resv r;
	struct ledger_node *ln = ledger_lock(l, "n1");
	assert_non_null(ln);
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, now), 0);
	assert_int_equal(resv_put(&r, key, uid, NULL, bytes, 0), 0);
	int rc = resv_commit(&r, NULL, 0);
	resv_end(&r);
	ledger_unlock(ln);
	return rc;
}

static void test_ledger_begin_items_put_commit(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct resv r;
	int has;
	(void)state;

	assert_int_equal(ledger_place(l, "ns/a", "uid-a", 10 * GI, 1000), RESV_COMMITTED);
	struct ledger_node *ln = ledger_lock(l, "n1");
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, 2000), 0);
	assert_true(resv_fresh(&r));
	assert_int_equal(items_bytes(&r, "ns/a", &has), 10 * GI);
	assert_true(has);
	assert_int_equal(resv_put(&r, "ns/b", NULL, NULL, 5 * GI, 0), 0);
	assert_int_equal(resv_put(&r, "ns/c", NULL, NULL, 5 * GI, 0),
	                 RESV_EINVAL); /* one per txn */
	assert_int_equal(resv_commit(&r, NULL, 0), RESV_COMMITTED);
	assert_int_equal(resv_unseen_dropped(&r), 0);
	resv_end(&r);
	assert_int_equal(ledger_pending_bytes(ln, NULL, 3000), 15 * GI);
	/* Expiry on the caller's clock: at 61000 a's entry (reserved at 1000) no longer counts. */
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, 61000), 0);
	assert_int_equal(items_bytes(&r, "ns/a", &has), 5 * GI);
	assert_false(has);
	resv_end(&r);
	ledger_unlock(ln);
	ledger_free(l);
}

static void test_ledger_seen_pods_settle_at_begin(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct resv r;
	int has;
	(void)state;

	assert_int_equal(ledger_place(l, "ns/a", "uid-a", 10 * GI, 1000), RESV_COMMITTED);
	assert_int_equal(ledger_place(l, "ns/b", "uid-b", 7 * GI, 1000), RESV_COMMITTED);
	struct ledger_node *ln = ledger_lock(l, "n1");
	uint64_t gen = ledger_generation(ln);
	/* a is visible with its uid; b's name is visible but with another uid: a newer pod. */
	const char *keys[] = {"ns/a", "ns/b"}, *uids[] = {"uid-a", "uid-b2"};
	struct resv_seen seen = {keys, uids, 2};
	assert_int_equal(resv_begin_ledger(&r, ln, gen, &seen, 2000), 0);
	assert_int_equal(items_bytes(&r, "ns/a", &has), 7 * GI);
	assert_false(has);
	assert_int_equal(ledger_generation(ln), gen + 1);
	resv_end(&r);
	/* A view taken before that settle is no base: begin says so. */
	assert_int_equal(resv_begin_ledger(&r, ln, gen, NULL, 2000), RESV_CONFLICT);
	resv_end(&r);
	ledger_unlock(ln);
	ledger_free(l);
}

static void test_ledger_conflict_on_commit(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct resv r;
	(void)state;

	struct ledger_node *ln = ledger_lock(l, "n1");
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, 1000), 0);
	assert_int_equal(items_bytes(&r, NULL, NULL), 0);
	assert_int_equal(resv_put(&r, "ns/mine", "uid-m", NULL, 20 * GI, 0), 0);
	/* While this placement has let the node go, another one commits on it. */
	ledger_release(ln);
	assert_int_equal(ledger_place(l, "ns/other", "uid-o", 20 * GI, 1500), RESV_COMMITTED);
	ledger_relock(ln);
	assert_int_equal(resv_commit(&r, NULL, 0), RESV_CONFLICT);
	resv_end(&r);
	assert_int_equal(ledger_pending_bytes(ln, NULL, 2000), 20 * GI); /* the other's alone */
	/* Begin again: the other's entry counts now, and the commit goes through. */
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, 2000), 0);
	assert_int_equal(items_bytes(&r, NULL, NULL), 20 * GI);
	assert_int_equal(resv_put(&r, "ns/mine", "uid-m", NULL, 20 * GI, 0), 0);
	assert_int_equal(resv_commit(&r, NULL, 0), RESV_COMMITTED);
	resv_end(&r);
	ledger_unlock(ln);
	ledger_free(l);
}

static void test_ledger_unseen_ttl_and_errors(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct resv r;
	char long_key[LEDGER_KEY_MAX + 1];
	(void)state;

	struct ledger_node *ln = ledger_lock(l, "n1");
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, 1000), 0);
	assert_int_equal(resv_commit(&r, NULL, 0), RESV_EINVAL); /* nothing put */
	memset(long_key, 'k', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	assert_int_equal(resv_put(&r, long_key, NULL, NULL, GI, 0), RESV_EINVAL);
	assert_int_equal(resv_put(&r, "", NULL, NULL, GI, 0), RESV_EINVAL);
	assert_int_equal(resv_put(&r, "ns/created", "uid-c", NULL, 3 * GI, 5000), 0);
	assert_int_equal(resv_commit(&r, NULL, 0), RESV_COMMITTED);
	resv_end(&r);
	assert_int_equal(ledger_pending_bytes(ln, NULL, 5999), 3 * GI);
	assert_int_equal(ledger_pending_bytes(ln, NULL, 6000), 0); /* the unseen TTL */
	ledger_unlock(ln);
	assert_int_equal(resv_begin_ledger(&r, NULL, 0, NULL, 1000), RESV_EINVAL);
	resv_end(&r);
	ledger_free(l);
}

/* One whole placement over s's record of n1: load (or read), begin, put, commit. */
static int record_place(struct shared *s, const char *key, const char *uid, uint64_t bytes,
                        int read, uint64_t *seen_bytes)
{
	struct record rec;
	struct resv r;
	char err[256] = "";

	record_init(&rec);
	assert_int_equal(read ? shared_read(s, "n1", 1e12, &rec, err, sizeof(err))
	                      : shared_load(s, "n1", &rec),
	                 0);
	assert_int_equal(resv_begin_record(&r, s, "n1", &rec, read, NULL, 0, 1000), 0);
	uint64_t b = items_bytes(&r, NULL, NULL);
	if (seen_bytes != NULL)
		*seen_bytes = b;
	assert_int_equal(resv_put(&r, key, uid, NULL, bytes, 0), 0);
	int rc = resv_commit(&r, err, sizeof(err));
	resv_end(&r);
	record_free(&rec);
	return rc;
}

static void test_record_begin_items_put_commit(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *s = replica(f);
	uint64_t seen;
	(void)state;

	assert_int_equal(record_place(s, "ns/a", "uid-a", 10 * GI, 0, &seen), RESV_COMMITTED);
	assert_int_equal(seen, 0);
	assert_int_equal(f->creates, 1); /* no Lease yet: the commit creates it */
	assert_int_equal(record_place(s, "ns/b", "uid-b", 5 * GI, 0, &seen), RESV_COMMITTED);
	assert_int_equal(seen, 10 * GI); /* from its own last write, no read */
	assert_int_equal(f->updates, 1);
	assert_int_equal(f->gets, 0);
	/* A pod reported gone stops counting at once. */
	shared_forget(s, "uid-a");
	struct record rec;
	struct resv r;
	int has;
	record_init(&rec);
	assert_int_equal(shared_load(s, "n1", &rec), 0);
	assert_int_equal(resv_begin_record(&r, s, "n1", &rec, 0, NULL, 0, 1000), 0);
	assert_false(resv_fresh(&r));
	assert_int_equal(items_bytes(&r, "ns/a", &has), 5 * GI);
	assert_false(has);
	resv_end(&r);
	record_free(&rec);
	/* Expiry on the shared clock: 60 s after the writes nothing counts. */
	wall_now = WALL + 60000;
	record_init(&rec);
	assert_int_equal(shared_read(s, "n1", 1e12, &rec, NULL, 0), 0);
	assert_int_equal(resv_begin_record(&r, s, "n1", &rec, 1, NULL, 0, 1000), 0);
	assert_true(resv_fresh(&r));
	assert_int_equal(items_bytes(&r, NULL, NULL), 0);
	resv_end(&r);
	record_free(&rec);
	wall_now = WALL;
	shared_free(s);
	fake_lease_free(f);
}

static void test_record_conflict_on_commit(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *a = replica(f), *b = replica(f);
	struct record rec;
	struct resv r;
	char err[256] = "";
	uint64_t seen;
	(void)state;

	assert_int_equal(record_place(a, "ns/first", NULL, 1 * GI, 0, NULL), RESV_COMMITTED);
	assert_int_equal(record_place(b, "ns/b", NULL, 30 * GI, 1, &seen), RESV_COMMITTED);
	assert_int_equal(seen, 1 * GI);
	/* a decides on its own copy (1 GiB) and commits: 409, b wrote since. */
	record_init(&rec);
	assert_int_equal(shared_load(a, "n1", &rec), 0);
	assert_int_equal(resv_begin_record(&r, a, "n1", &rec, 0, NULL, 0, 1000), 0);
	assert_int_equal(items_bytes(&r, NULL, NULL), 1 * GI);
	assert_int_equal(resv_put(&r, "ns/late", NULL, NULL, 10 * GI, 0), 0);
	assert_int_equal(resv_commit(&r, err, sizeof(err)), RESV_CONFLICT);
	assert_non_null(strstr(err, "409"));
	resv_end(&r);
	record_free(&rec);
	assert_int_equal(f->conflicts, 1);
	/* Read it again, and b's entry counts. */
	assert_int_equal(record_place(a, "ns/late", NULL, 10 * GI, 1, &seen), RESV_COMMITTED);
	assert_int_equal(seen, 31 * GI);
	shared_free(a);
	shared_free(b);
	fake_lease_free(f);
}

static void test_record_errors_and_prune(void **state)
{
	struct fake_lease *f = fake_lease_new();
	struct shared *s = replica(f);
	struct record rec;
	struct resv r;
	char err[256] = "";
	(void)state;

	assert_int_equal(record_place(s, "ns/a", "uid-a", 10 * GI, 0, NULL), RESV_COMMITTED);
	/* a write that fails (not a conflict): an error, with the reason */
	f->fail_next_write = KUBE_ETRANSPORT;
	record_init(&rec);
	assert_int_equal(shared_load(s, "n1", &rec), 0);
	assert_int_equal(resv_begin_record(&r, s, "n1", &rec, 0, NULL, 0, 1000), 0);
	assert_int_equal(resv_put(&r, "ns/b", NULL, NULL, GI, 0), 0);
	assert_int_equal(resv_commit(&r, err, sizeof(err)), RESV_EAPI);
	assert_non_null(strstr(err, "injected"));
	resv_end(&r);
	record_free(&rec);
	f->fail_next_write = KUBE_ETIMEOUT;
	assert_int_equal(record_place(s, "ns/b", NULL, GI, 0, NULL), RESV_EBUDGET);
	/* A pod the cache has shown on the node past the grace: its entry goes at the next put;
	 * an unseen put (a pod CREATE's) shorter than the TTL is marked so. */
	uint64_t mono = ledger_now_ms();
	struct placement_item visible = {.key = "ns/a", .uid = "uid-a", .bytes = 10 * GI};
	visible.seen_ms = mono > RECORD_SETTLE_GRACE_MS ? mono - RECORD_SETTLE_GRACE_MS : 1;
	record_init(&rec);
	assert_int_equal(shared_load(s, "n1", &rec), 0);
	assert_int_equal(resv_begin_record(&r, s, "n1", &rec, 0, &visible, 1, 1000), 0);
	assert_int_equal(resv_put(&r, "ns/c", "uid-c", NULL, 2 * GI, 5000), 0);
	assert_int_equal(rec.n, 1);
	assert_string_equal(rec.entries[0].key, "ns/c");
	assert_int_equal(rec.entries[0].unseen, 1);
	assert_int_equal(rec.entries[0].expires_ms, WALL + 5000);
	assert_int_equal(resv_commit(&r, err, sizeof(err)), RESV_COMMITTED);
	resv_end(&r);
	record_free(&rec);
	assert_int_equal(resv_begin_record(&r, s, "n1", NULL, 0, NULL, 0, 0), RESV_EINVAL);
	resv_end(&r);
	shared_free(s);
	fake_lease_free(f);
}

/* The claim of resv_put (issue 21) comes back from resv_items as the item's dra_claim, over
 * both backends: the ledger's entry, and the record's, read by another replica from the Lease.
 * A put without one gives NULL; a claim as long as LEDGER_UID_MAX is refused. */
static const char *item_claim(struct resv *r, const char *key)
{
	const struct placement_item *it;
	size_t n;

	assert_int_equal(resv_items(r, &it, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (strcmp(it[i].key, key) == 0)
			return it[i].dra_claim != NULL ? it[i].dra_claim : "(none)";
	return "(absent)";
}

static void test_claim_carried(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct fake_lease *f = fake_lease_new();
	struct shared *a = replica(f), *b = replica(f);
	struct ledger_node *ln = ledger_lock(l, "n1");
	struct record rec;
	struct resv r;
	char err[256] = "", longc[LEDGER_UID_MAX + 1];
	(void)state;

	memset(longc, 'c', LEDGER_UID_MAX);
	longc[LEDGER_UID_MAX] = '\0';
	/* the ledger */
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, 1000), 0);
	assert_int_equal(resv_put(&r, "ns/a", "uid-a", longc, 0, 5000), RESV_EINVAL);
	assert_int_equal(resv_put(&r, "ns/a", "uid-a", "claim-1", 0, 5000), 0);
	assert_int_equal(resv_commit(&r, NULL, 0), RESV_COMMITTED);
	resv_end(&r);
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, 2000), 0);
	assert_string_equal(item_claim(&r, "ns/a"), "claim-1");
	assert_int_equal(resv_put(&r, "ns/b", "uid-b", NULL, GI, 0), 0);
	assert_int_equal(resv_commit(&r, NULL, 0), RESV_COMMITTED);
	resv_end(&r);
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, 3000), 0);
	assert_string_equal(item_claim(&r, "ns/a"), "claim-1");
	assert_string_equal(item_claim(&r, "ns/b"), "(none)");
	resv_end(&r);
	/* the pod CREATE's bound still applies: gone at 1000 + 5000 */
	assert_int_equal(resv_begin_ledger(&r, ln, ledger_generation(ln), NULL, 6000), 0);
	assert_string_equal(item_claim(&r, "ns/a"), "(absent)");
	resv_end(&r);
	ledger_unlock(ln);
	/* the record: a writes, b reads the Lease */
	record_init(&rec);
	assert_int_equal(shared_load(a, "n1", &rec), 0);
	assert_int_equal(resv_begin_record(&r, a, "n1", &rec, 0, NULL, 0, 1000), 0);
	assert_int_equal(resv_put(&r, "ns/a", "uid-a", "claim-1", 0, 5000), 0);
	assert_int_equal(resv_commit(&r, err, sizeof(err)), RESV_COMMITTED);
	resv_end(&r);
	record_free(&rec);
	assert_int_equal(record_place(a, "ns/b", "uid-b", GI, 0, NULL), RESV_COMMITTED);
	record_init(&rec);
	assert_int_equal(shared_read(b, "n1", 1e12, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.n, 2);
	assert_int_equal(resv_begin_record(&r, b, "n1", &rec, 1, NULL, 0, 1000), 0);
	assert_string_equal(item_claim(&r, "ns/a"), "claim-1");
	assert_string_equal(item_claim(&r, "ns/b"), "(none)");
	resv_end(&r);
	record_free(&rec);
	shared_free(a);
	shared_free(b);
	fake_lease_free(f);
	ledger_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ledger_begin_items_put_commit),
	    cmocka_unit_test(test_ledger_seen_pods_settle_at_begin),
	    cmocka_unit_test(test_ledger_conflict_on_commit),
	    cmocka_unit_test(test_ledger_unseen_ttl_and_errors),
	    cmocka_unit_test(test_record_begin_items_put_commit),
	    cmocka_unit_test(test_record_conflict_on_commit),
	    cmocka_unit_test(test_record_errors_and_prune),
	    cmocka_unit_test(test_claim_carried),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
