/* Unit tests for lib/ledger: reservations, TTL, reconcile, caps and real concurrency. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "ledger.h"

#define GI (1024ull * 1024 * 1024)

static void test_new_and_free(void **state)
{
	struct ledger *l = ledger_new(1000);

	assert_non_null(l);
	assert_null(ledger_new(0));
	assert_int_equal(ledger_size(l), 0);
	assert_null(ledger_lock(l, ""));
	assert_null(ledger_lock(l, NULL));
	assert_null(ledger_lock(NULL, "n"));
	ledger_unlock(NULL);
	ledger_free(l);
	ledger_free(NULL);
	assert_true(ledger_now_ms() > 0);
}

static void test_reserve_pending_entries(void **state)
{
	struct ledger *l = ledger_new(1000);
	struct ledger_node *n = ledger_lock(l, "gpu-node-a");
	struct ledger_entry_view v[4];

	assert_non_null(n);
	assert_int_equal(ledger_pending_bytes(n, NULL, 100), 0);
	assert_int_equal(ledger_reserve(n, "ns/a", 10 * GI, 100), 0);
	assert_int_equal(ledger_reserve(n, "ns/b", 20 * GI, 200), 0);
	assert_int_equal(ledger_pending_bytes(n, NULL, 300), 30 * GI);
	/* A retried binding does not count itself. */
	assert_int_equal(ledger_pending_bytes(n, "ns/a", 300), 20 * GI);
	assert_int_equal(ledger_pending_bytes(n, "ns/zzz", 300), 30 * GI);

	assert_int_equal(ledger_entries(n, v, 4, 300), 2);
	assert_string_equal(v[0].key, "ns/a");
	assert_int_equal(v[0].bytes, 10 * GI);
	assert_int_equal(v[0].expires_ms, 1100);
	assert_string_equal(v[1].key, "ns/b");
	assert_int_equal(v[1].expires_ms, 1200);
	assert_int_equal(ledger_entries(n, v, 1, 300), 1);
	assert_int_equal(ledger_entries(n, NULL, 1, 300), 0);

	/* Refresh: same key, new size and expiry, still one entry. */
	assert_int_equal(ledger_reserve(n, "ns/a", 15 * GI, 500), 0);
	assert_int_equal(ledger_pending_bytes(n, NULL, 600), 35 * GI);
	assert_int_equal(ledger_entries(n, v, 4, 600), 2);
	assert_int_equal(v[0].expires_ms, 1500);
	ledger_unlock(n);
	assert_int_equal(ledger_size(l), 2);

	/* Entries outlive the lock. */
	n = ledger_lock(l, "gpu-node-a");
	assert_int_equal(ledger_pending_bytes(n, NULL, 600), 35 * GI);
	ledger_unlock(n);
	/* Another node is separate. */
	n = ledger_lock(l, "gpu-node-b");
	assert_int_equal(ledger_pending_bytes(n, NULL, 600), 0);
	ledger_unlock(n);
	ledger_free(l);
}

struct visited {
	char keys[4][LEDGER_KEY_MAX];
	char uids[4][LEDGER_UID_MAX];
	char claims[4][LEDGER_UID_MAX];
	uint64_t bytes[4];
	uint64_t reserved[4];
	size_t n;
};

static void visit(void *ctx, const char *key, const char *uid, const char *claim, uint64_t bytes,
                  uint64_t reserved_ms)
{
	struct visited *v = ctx;

	if (v->n < 4) {
		snprintf(v->keys[v->n], sizeof(v->keys[0]), "%s", key);
		snprintf(v->uids[v->n], sizeof(v->uids[0]), "%s", uid);
		snprintf(v->claims[v->n], sizeof(v->claims[0]), "%s", claim);
		v->bytes[v->n] = bytes;
		v->reserved[v->n] = reserved_ms;
	}
	v->n++;
}

/* ledger_visit: the live entries, oldest first, in place of a copy. */
static void test_visit(void **state)
{
	struct ledger *l = ledger_new(1000);
	struct ledger_node *n = ledger_lock(l, "gpu-node-a");
	struct visited v = {0};

	assert_int_equal(ledger_visit(n, 100, visit, &v), 0);
	assert_int_equal(v.n, 0);
	assert_int_equal(ledger_reserve(n, "ns/a", 10 * GI, 100), 0);
	assert_int_equal(ledger_reserve(n, "ns/b", 20 * GI, 600), 0);
	assert_int_equal(ledger_reserve(n, "ns/c", 30 * GI, 700), 0);
	assert_int_equal(ledger_visit(n, 800, visit, &v), 3);
	assert_int_equal(v.n, 3);
	assert_string_equal(v.keys[0], "ns/a");
	assert_int_equal(v.bytes[0], 10 * GI);
	assert_int_equal(v.reserved[0], 100);
	assert_string_equal(v.keys[2], "ns/c");
	assert_int_equal(v.bytes[2], 30 * GI);
	assert_int_equal(v.reserved[2], 700);
	/* ns/a expires at 1100: skipped (not dropped: visiting does not change the node). */
	memset(&v, 0, sizeof(v));
	assert_int_equal(ledger_visit(n, 1100, visit, &v), 2);
	assert_string_equal(v.keys[0], "ns/b");
	assert_string_equal(v.keys[1], "ns/c");
	assert_int_equal(ledger_size(l), 3);
	/* A NULL fn only counts the live entries. */
	assert_int_equal(ledger_visit(n, 1100, NULL, &v), 2);
	assert_int_equal(ledger_visit(NULL, 1100, visit, &v), 0);
	/* A refresh restarts reserved_ms and keeps the entry's place. */
	assert_int_equal(ledger_reserve(n, "ns/b", 20 * GI, 900), 0);
	memset(&v, 0, sizeof(v));
	assert_int_equal(ledger_visit(n, 1000, visit, &v), 3);
	assert_string_equal(v.keys[1], "ns/b");
	assert_int_equal(v.reserved[1], 900);
	ledger_unlock(n);
	ledger_free(l);
}

/* ledger_remove: one key dropped at once, whatever its age; the others keep their order. */
static void test_remove(void **state)
{
	struct ledger *l = ledger_new(1000);
	struct ledger_node *n = ledger_lock(l, "gpu-node-a");
	struct ledger_entry_view e[4];
	struct visited v = {0};

	assert_int_equal(ledger_reserve(n, "ns/a", 10 * GI, 100), 0);
	assert_int_equal(ledger_reserve(n, "ns/b", 20 * GI, 200), 0);
	assert_int_equal(ledger_reserve(n, "ns/c", 30 * GI, 300), 0);
	assert_int_equal(ledger_remove(n, "ns/b", NULL), 1);
	assert_int_equal(ledger_remove(n, "ns/b", NULL), 0);
	assert_int_equal(ledger_remove(n, "ns/x", NULL), 0);
	assert_int_equal(ledger_remove(n, NULL, NULL), 0);
	assert_int_equal(ledger_remove(NULL, "ns/a", NULL), 0);
	assert_int_equal(ledger_size(l), 2);
	assert_int_equal(ledger_pending_bytes(n, NULL, 400), 40 * GI);
	assert_int_equal(ledger_visit(n, 400, visit, &v), 2);
	assert_string_equal(v.keys[0], "ns/a");
	assert_string_equal(v.keys[1], "ns/c");
	assert_int_equal(ledger_entries(n, e, 4, 400), 2);
	assert_int_equal(e[1].reserved_ms, 300);
	/* Removing every entry empties the node. */
	assert_int_equal(ledger_remove(n, "ns/a", NULL), 1);
	assert_int_equal(ledger_remove(n, "ns/c", NULL), 1);
	assert_int_equal(ledger_size(l), 0);
	ledger_unlock(n); /* the last user of an empty node frees it */
	assert_int_equal(ledger_size(l), 0);
	ledger_free(l);
}

static void test_ttl_expiry(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct ledger_node *n = ledger_lock(l, "n1");

	assert_int_equal(ledger_reserve(n, "ns/a", GI, 1000), 0);
	assert_int_equal(ledger_reserve(n, "ns/b", 2 * GI, 31000), 0);
	assert_int_equal(ledger_pending_bytes(n, NULL, 60999), 3 * GI);
	/* a expires at 61000 exactly, b at 91000. */
	assert_int_equal(ledger_pending_bytes(n, NULL, 61000), 2 * GI);
	assert_int_equal(ledger_entries(n, (struct ledger_entry_view[2]){0}, 2, 61000), 1);
	assert_int_equal(ledger_size(l), 2); /* held until dropped */
	assert_int_equal(ledger_reconcile(n, NULL, 0, 61000), 1);
	assert_int_equal(ledger_size(l), 1);
	assert_int_equal(ledger_pending_bytes(n, NULL, 91000), 0);
	assert_int_equal(ledger_reconcile(n, NULL, 0, 91000), 1);
	assert_int_equal(ledger_size(l), 0);
	ledger_unlock(n);

	/* A TTL past the end of the clock saturates instead of wrapping. */
	n = ledger_lock(l, "n1");
	assert_int_equal(ledger_reserve(n, "ns/c", GI, UINT64_MAX - 10), 0);
	assert_int_equal(ledger_pending_bytes(n, NULL, UINT64_MAX - 1), GI);
	ledger_unlock(n);
	ledger_free(l);
}

/* A pod CREATE's reservation (ledger_reserve_unseen) lives the shorter bound, and its drop at
 * expiry is counted; one settled by its pod showing is not; a Binding's refresh of the key is an
 * ordinary entry again; the ledger's TTL caps a longer bound. */
static void test_unseen_reservations(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct ledger_node *n = ledger_lock(l, "n1");
	const char *keys[] = {"ns/seen"};

	assert_int_equal(ledger_reserve_unseen(n, "ns/ghost", "u1", GI, 35000, 1000), 0);
	assert_int_equal(ledger_reserve_unseen(n, "ns/seen", "u2", GI, 35000, 1000), 0);
	assert_int_equal(ledger_reserve_unseen(n, "ns/bound", "u3", GI, 35000, 1000), 0);
	assert_int_equal(ledger_reserve_uid(n, "ns/bound", "u3", GI, 2000), 0);
	assert_int_equal(ledger_reserve_unseen(n, "ns/long", "u4", GI, 600000, 1000), 0);
	assert_int_equal(ledger_reserve_unseen(n, "ns/x", NULL, GI, 0, 1000), LEDGER_EINVAL);
	assert_int_equal(ledger_settle(n, keys, NULL, 1, 2000), 1);
	assert_int_equal(ledger_pending_bytes(n, NULL, 35999), 3 * GI);
	assert_int_equal(ledger_pending_bytes(n, NULL, 36000), 2 * GI); /* ghost gone */
	assert_int_equal(ledger_reconcile(n, NULL, 0, 36000), 1);
	assert_int_equal(ledger_unseen_dropped(l), 1);
	/* long: capped at the ledger's 60 s, and counted; bound: the Binding's TTL, not counted */
	assert_int_equal(ledger_reconcile(n, NULL, 0, 61000), 1);
	assert_int_equal(ledger_unseen_dropped(l), 2);
	assert_int_equal(ledger_reconcile(n, NULL, 0, 62000), 1);
	assert_int_equal(ledger_unseen_dropped(l), 2);
	ledger_unlock(n);
	ledger_free(l);
}

/* ledger_reserve_claim (issue 21): the DRA claim a pod joined unreserved is given back by
 * ledger_visit with its entry; entries reserved without one give ""; a refresh keeps it, and
 * gives one to an entry without; a claim as long as LEDGER_UID_MAX is refused. The same-pod and
 * expiry rules are unchanged: a CREATE's entry lives the unseen bound, settles when its pod shows,
 * and counts once per key. */
static void test_claim_carried(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct ledger_node *n = ledger_lock(l, "n1");
	struct visited v = {0};
	char longc[LEDGER_UID_MAX + 1];
	const char *keys[] = {"ns/b"}, *uids[] = {"u2"};

	(void)state;
	memset(longc, 'c', LEDGER_UID_MAX);
	longc[LEDGER_UID_MAX] = '\0';
	assert_int_equal(ledger_reserve_claim(n, "ns/a", "u1", "claim-1", 0, 35000, 1000, 1000), 0);
	assert_int_equal(ledger_reserve_claim(n, "ns/b", "u2", "claim-1", 0, 35000, 1000, 1000), 0);
	assert_int_equal(ledger_reserve_uid(n, "ns/c", "u3", GI, 1000), 0);
	assert_int_equal(ledger_reserve_claim(n, "ns/d", "u4", NULL, GI, 0, 1000, 1000), 0);
	assert_int_equal(ledger_reserve_claim(n, "ns/x", "u9", longc, GI, 0, 1000, 1000),
	                 LEDGER_EINVAL);
	assert_int_equal(ledger_visit(n, 2000, visit, &v), 4);
	assert_string_equal(v.claims[0], "claim-1");
	assert_string_equal(v.claims[1], "claim-1");
	assert_string_equal(v.claims[2], "");
	assert_string_equal(v.claims[3], "");
	/* a refresh of ns/a (its Binding, the claim reserved for it by then): an ordinary entry
	 * now (the TTL, 63000, not the unseen bound), the claim kept (it only adds to what counts)
	 */
	assert_int_equal(ledger_reserve_uid(n, "ns/a", "u1", 0, 3000), 0);
	/* ns/b's pod shows on the node: settled whatever its claim */
	assert_int_equal(ledger_settle(n, keys, uids, 1, 3000), 1);
	memset(&v, 0, sizeof(v));
	assert_int_equal(ledger_visit(n, 3000, visit, &v), 3);
	assert_string_equal(v.keys[0], "ns/a");
	assert_string_equal(v.claims[0], "claim-1");
	/* a claim given on a refresh of an entry without one is taken; the unseen bound it brings
	 * (4000 + 35000) does not shorten the entry's TTL (1000 + 60000) */
	assert_int_equal(ledger_reserve_claim(n, "ns/c", "u3", "claim-2", GI, 35000, 4000, 4000),
	                 0);
	memset(&v, 0, sizeof(v));
	assert_int_equal(ledger_visit(n, 60999, visit, &v), 3);
	assert_string_equal(v.keys[1], "ns/c");
	assert_string_equal(v.claims[1], "claim-2");
	memset(&v, 0, sizeof(v));
	assert_int_equal(ledger_visit(n, 61000, visit, &v), 1); /* ns/c and ns/d expired */
	assert_string_equal(v.keys[0], "ns/a");
	ledger_unlock(n);
	ledger_free(l);
}

/*
 * The refresh rule (ledger.h): a reserve under a placed pod's name never lowers its entry. A
 * fresh uid is another entry (both count); the same uid or none refreshes it, keeping the larger
 * bytes, the later expiry, the ordinary TTL and its uid; ledger_remove drops only the exact pod.
 * A stamp after now starts the TTL there; one before it is refused. (A forged or replayed review
 * used to take over or shrink the entry: the attack of issue 23's review.)
 */
static void test_refresh_never_lowers(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct ledger_node *n = ledger_lock(l, "n1");
	struct visited v = {0};

	(void)state;
	assert_int_equal(ledger_reserve_uid(n, "ns/p", "U", 40 * GI, 1000), 0); /* until 61000 */
	/* the same name with a fresh uid: another entry, both count */
	assert_int_equal(ledger_reserve_uid(n, "ns/p", "V", GI, 2000), 0); /* until 62000 */
	assert_int_equal(ledger_pending_bytes(n, NULL, 2000), 41 * GI);
	/* no uid, smaller, a CREATE's shorter bound: refreshes U's entry, lowering nothing */
	assert_int_equal(ledger_reserve_unseen(n, "ns/p", NULL, GI, 1000, 3000), 0);
	assert_int_equal(ledger_visit(n, 4000, visit, &v), 2); /* past the CREATE's bound */
	assert_string_equal(v.uids[0], "U");
	assert_int_equal(v.bytes[0], 40 * GI);
	assert_int_equal(v.reserved[0], 3000);
	assert_string_equal(v.uids[1], "V");
	assert_int_equal(ledger_pending_bytes(n, NULL, 60999), 41 * GI); /* U's TTL */
	/* the same uid, smaller, later: the bytes stay, the TTL runs again from 5000 */
	assert_int_equal(ledger_reserve_uid(n, "ns/p", "U", GI, 5000), 0);
	assert_int_equal(ledger_pending_bytes(n, NULL, 64999), 40 * GI); /* V's gone at 62000 */
	assert_int_equal(ledger_pending_bytes(n, NULL, 65000), 0);
	/* ledger_remove: the exact pod only */
	assert_int_equal(ledger_remove(n, "ns/p", NULL), 0); /* no entry without a uid */
	assert_int_equal(ledger_remove(n, "ns/p", "V"), 1);
	assert_int_equal(ledger_pending_bytes(n, NULL, 5000), 40 * GI);
	assert_int_equal(ledger_remove(n, "ns/p", "U"), 1);
	assert_int_equal(ledger_size(l), 0);
	assert_int_equal(ledger_unseen_dropped(l), 0);
	/* the stamp: the TTL runs from 5000, not 1000; a stamp before now is refused */
	assert_int_equal(ledger_reserve_claim(n, "ns/q", "W", NULL, GI, 0, 1000, 5000), 0);
	assert_int_equal(ledger_pending_bytes(n, NULL, 64999), GI);
	assert_int_equal(ledger_pending_bytes(n, NULL, 65000), 0);
	assert_int_equal(ledger_reserve_claim(n, "ns/q", "W", NULL, GI, 0, 1000, 999),
	                 LEDGER_EINVAL);
	ledger_unlock(n);
	ledger_free(l);
}

static void test_pod_appears(void **state)
{
	struct ledger *l = ledger_new(60000);
	struct ledger_node *n = ledger_lock(l, "n1");
	const char *visible[] = {"other/x", "ns/b", NULL, "ns/c"};

	assert_int_equal(ledger_reserve(n, "ns/a", GI, 0), 0);
	assert_int_equal(ledger_reserve(n, "ns/b", 2 * GI, 0), 0);
	assert_int_equal(ledger_reserve(n, "ns/c", 4 * GI, 0), 0);
	/* The API server now shows b and c on the node: their reservations go, a stays. */
	assert_int_equal(ledger_reconcile(n, visible, 4, 10), 2);
	assert_int_equal(ledger_pending_bytes(n, NULL, 10), GI);
	assert_int_equal(ledger_reconcile(n, visible, 4, 10), 0);
	assert_int_equal(ledger_size(l), 1);
	ledger_unlock(n);
	ledger_free(l);
}

static void test_invalid_keys_and_caps(void **state)
{
	struct ledger *l = ledger_new(1000);
	struct ledger_node *n = ledger_lock(l, "n1");
	char key[LEDGER_KEY_MAX + 1];
	char node[300];

	memset(key, 'k', sizeof(key));
	key[LEDGER_KEY_MAX] = '\0';
	assert_int_equal(ledger_reserve(n, key, 1, 0), LEDGER_EINVAL);
	key[LEDGER_KEY_MAX - 1] = '\0'; /* the longest key that fits */
	assert_int_equal(ledger_reserve(n, key, 1, 0), 0);
	assert_int_equal(ledger_reserve(n, "", 1, 0), LEDGER_EINVAL);
	assert_int_equal(ledger_reserve(n, NULL, 1, 0), LEDGER_EINVAL);
	assert_int_equal(ledger_reserve(NULL, "a", 1, 0), LEDGER_EINVAL);
	assert_int_equal(ledger_reconcile(n, NULL, 5, 0), 0);

	/* LEDGER_MAX_PER_NODE live entries, then refused: the caller denies. */
	for (int i = 1; i < LEDGER_MAX_PER_NODE; i++) {
		snprintf(key, sizeof(key), "ns/p-%d", i);
		assert_int_equal(ledger_reserve(n, key, 1, 0), 0);
	}
	assert_int_equal(ledger_reserve(n, "ns/one-more", 1, 0), LEDGER_EFULL);
	/* A refresh of an existing key still works at the cap. */
	assert_int_equal(ledger_reserve(n, "ns/p-1", 2, 0), 0);
	assert_int_equal(ledger_size(l), LEDGER_MAX_PER_NODE);
	/* Once they expire there is room again (expired entries are dropped first). */
	assert_int_equal(ledger_reserve(n, "ns/one-more", 1, 1000), 0);
	assert_int_equal(ledger_size(l), 1);
	ledger_unlock(n);

	/* Node names: up to 253 characters. */
	memset(node, 'n', sizeof(node));
	node[254] = '\0';
	assert_null(ledger_lock(l, node));
	node[253] = '\0';
	n = ledger_lock(l, node);
	assert_non_null(n);
	ledger_unlock(n);
	ledger_free(l);
}

static void test_empty_nodes_do_not_accumulate(void **state)
{
	struct ledger *l = ledger_new(1000);
	char name[32];

	/* More distinct node names than LEDGER_MAX_NODES: empty nodes are freed on unlock. */
	for (int i = 0; i < LEDGER_MAX_NODES + 100; i++) {
		struct ledger_node *n;

		snprintf(name, sizeof(name), "node-%d", i);
		n = ledger_lock(l, name);
		assert_non_null(n);
		ledger_unlock(n);
	}
	ledger_free(l);
}

static void test_node_cap_and_sweep(void **state)
{
	struct ledger *l = ledger_new(1000);
	struct ledger_node *n;
	char name[32];

	/* Every node holds a live reservation: the table is full and new nodes are refused. */
	for (int i = 0; i < LEDGER_MAX_NODES; i++) {
		snprintf(name, sizeof(name), "node-%d", i);
		n = ledger_lock(l, name);
		assert_non_null(n);
		assert_int_equal(ledger_reserve(n, "ns/p", 1, 0), 0);
		ledger_unlock(n);
	}
	assert_int_equal(ledger_size(l), LEDGER_MAX_NODES);
	assert_null(ledger_lock(l, "one-more"));
	/* Known nodes still work. */
	n = ledger_lock(l, "node-7");
	assert_non_null(n);
	/* Time passes (as seen by any call); every reservation has expired. */
	assert_int_equal(ledger_pending_bytes(n, NULL, 1000), 0);
	ledger_unlock(n);
	/* Nodes that left the cluster are never reconciled: the full table sweeps them. */
	n = ledger_lock(l, "one-more");
	assert_non_null(n);
	assert_int_equal(ledger_size(l), 0);
	assert_int_equal(ledger_reserve(n, "ns/q", 1, 1000), 0);
	ledger_unlock(n);
	assert_int_equal(ledger_size(l), 1);
	ledger_free(l);
}

/* --- another node's lock is independent; the same node's lock blocks --- */

struct blocker {
	struct ledger *l;
	atomic_int acquired;
};

static void *lock_n1(void *arg)
{
	struct blocker *b = arg;
	struct ledger_node *n = ledger_lock(b->l, "n1");

	atomic_store(&b->acquired, 1);
	ledger_unlock(n);
	return NULL;
}

static void test_lock_blocks_same_node_only(void **state)
{
	struct blocker b = {.l = ledger_new(1000)};
	struct ledger_node *n1 = ledger_lock(b.l, "n1");
	struct ledger_node *n2;
	pthread_t t;

	atomic_init(&b.acquired, 0);
	/* Holding n1 does not stop n2. */
	n2 = ledger_lock(b.l, "n2");
	assert_non_null(n2);
	ledger_unlock(n2);

	assert_int_equal(pthread_create(&t, NULL, lock_n1, &b), 0);
	usleep(50 * 1000);
	/* Whatever the timing, the thread cannot have n1 while we hold it. */
	assert_int_equal(atomic_load(&b.acquired), 0);
	ledger_unlock(n1);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&b.acquired), 1);
	ledger_free(b.l);
}

/*
 * --- concurrency: the check-and-reserve protocol never passes the budget ---
 *
 * A small model of the cluster: workers place pods on one node with the webhook's protocol
 * (lock; read the pods the "API server" shows; reconcile; add pending; check; reserve; unlock),
 * while a "kubelet" thread makes admitted pods visible and deletes visible ones, as the API
 * server would, at its own pace. The real usage (admitted and not deleted) must never pass
 * the budget.
 */
#define WORKERS    8
#define ITERATIONS 1000
#define MAX_PODS   (WORKERS * ITERATIONS)
#define BUDGET     (10 * GI)

struct pod {
	char key[32];
	uint64_t bytes;
	int visible, deleted;
};

struct model {
	struct ledger *l;
	pthread_mutex_t api_mu; /* the "API server" */
	struct pod *pods;
	size_t n_pods;
	atomic_uint_least64_t live; /* bytes of admitted, not deleted pods */
	atomic_int inside;          /* threads inside the node's critical section */
	atomic_int violations;
	atomic_int admitted;
	atomic_int workers_done;
};

static void *worker(void *arg)
{
	struct model *m = arg;
	const char **visible = malloc(MAX_PODS * sizeof(*visible));
	unsigned seed = (unsigned)(uintptr_t)&visible;

	for (int it = 0; visible && it < ITERATIONS; it++) {
		uint64_t demand = (1 + rand_r(&seed) % 3) * GI / 2, used = 0, pending;
		struct ledger_node *n = ledger_lock(m->l, "hot-node");
		size_t n_visible = 0;

		if (n == NULL || atomic_fetch_add(&m->inside, 1) != 0)
			atomic_fetch_add(&m->violations, 1);
		pthread_mutex_lock(&m->api_mu);
		for (size_t i = 0; i < m->n_pods; i++) {
			if (!m->pods[i].visible || m->pods[i].deleted)
				continue;
			used += m->pods[i].bytes;
			visible[n_visible++] = m->pods[i].key;
		}
		pthread_mutex_unlock(&m->api_mu);
		ledger_reconcile(n, visible, n_visible, 0);
		pending = ledger_pending_bytes(n, NULL, 0);
		if (used + pending + demand <= BUDGET) {
			struct pod *p;

			/* Counted live before the kubelet can see (and delete) it. */
			if (atomic_fetch_add(&m->live, demand) + demand > BUDGET)
				atomic_fetch_add(&m->violations, 1);
			pthread_mutex_lock(&m->api_mu);
			p = &m->pods[m->n_pods++];
			snprintf(p->key, sizeof(p->key), "ns/pod-%zu", m->n_pods);
			p->bytes = demand;
			pthread_mutex_unlock(&m->api_mu);
			if (ledger_reserve(n, p->key, demand, 0) != 0)
				atomic_fetch_add(&m->violations, 1);
			atomic_fetch_add(&m->admitted, 1);
		}
		atomic_fetch_sub(&m->inside, 1);
		ledger_unlock(n);
		sched_yield(); /* let the kubelet run: deletions make room */
	}
	free(visible);
	atomic_fetch_add(&m->workers_done, 1);
	return NULL;
}

static void *kubelet(void *arg)
{
	struct model *m = arg;
	unsigned seed = 42;

	while (atomic_load(&m->workers_done) < WORKERS) {
		pthread_mutex_lock(&m->api_mu);
		for (size_t i = 0; i < m->n_pods; i++) {
			struct pod *p = &m->pods[i];

			if (p->deleted || rand_r(&seed) % 2)
				continue;
			if (!p->visible) {
				p->visible = 1;
			} else {
				/* The live count drops once the pod is gone from the API. */
				p->deleted = 1;
				atomic_fetch_sub(&m->live, p->bytes);
			}
		}
		pthread_mutex_unlock(&m->api_mu);
		sched_yield();
	}
	return NULL;
}

static void test_concurrent_check_and_reserve(void **state)
{
	struct model m = {.l = ledger_new(UINT64_MAX / 4)}; /* no expiry during the test */
	pthread_t w[WORKERS], k;

	assert_non_null(m.l);
	m.pods = calloc(MAX_PODS, sizeof(*m.pods));
	assert_non_null(m.pods);
	pthread_mutex_init(&m.api_mu, NULL);
	atomic_init(&m.live, 0);
	atomic_init(&m.inside, 0);
	atomic_init(&m.violations, 0);
	atomic_init(&m.admitted, 0);
	atomic_init(&m.workers_done, 0);

	assert_int_equal(pthread_create(&k, NULL, kubelet, &m), 0);
	for (int i = 0; i < WORKERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, worker, &m), 0);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(w[i], NULL);
	pthread_join(k, NULL);

	assert_int_equal(atomic_load(&m.violations), 0);
	/* At least one budget's worth got in (1.5Gi at most each); how many more depends on how
	 * the threads were scheduled, so it is only reported. */
	assert_true(atomic_load(&m.admitted) >= 6);
	print_message("%d placements admitted, %llu bytes live at the end\n",
	              atomic_load(&m.admitted), (unsigned long long)atomic_load(&m.live));
	assert_true(atomic_load(&m.live) <= BUDGET);
	pthread_mutex_destroy(&m.api_mu);
	free(m.pods);
	ledger_free(m.l);
}

/* Without the pods ever showing up, the ledger alone caps one node at its budget. */
struct plain {
	struct ledger *l;
	atomic_int admitted;
	atomic_int violations;
};

static void *plain_worker(void *arg)
{
	struct plain *p = arg;
	char key[64];

	for (int it = 0; it < 2000; it++) {
		struct ledger_node *n = ledger_lock(p->l, "gpu-node-a");

		if (ledger_pending_bytes(n, NULL, 5) + GI <= BUDGET) {
			snprintf(key, sizeof(key), "ns/%p-%d", (void *)&key, it);
			if (ledger_reserve(n, key, GI, 5) != 0)
				atomic_fetch_add(&p->violations, 1);
			atomic_fetch_add(&p->admitted, 1);
		}
		ledger_unlock(n);
	}
	return NULL;
}

static void test_concurrent_budget_without_api(void **state)
{
	struct plain p = {.l = ledger_new(60000)};
	pthread_t t[WORKERS];
	struct ledger_node *n;

	atomic_init(&p.admitted, 0);
	atomic_init(&p.violations, 0);
	for (int i = 0; i < WORKERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, plain_worker, &p), 0);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&p.violations), 0);
	assert_int_equal(atomic_load(&p.admitted), 10);
	assert_int_equal(ledger_size(p.l), 10);
	n = ledger_lock(p.l, "gpu-node-a");
	assert_int_equal(ledger_pending_bytes(n, NULL, 5), BUDGET);
	ledger_unlock(n);
	ledger_free(p.l);
}

/* Many threads over a few nodes, with nodes freed and recreated all the time (ASan checks
 * that no thread touches a freed node). */
static void *churn(void *arg)
{
	struct ledger *l = arg;
	unsigned seed = (unsigned)(uintptr_t)&seed;
	char name[16], key[32];

	for (int it = 0; it < 3000; it++) {
		struct ledger_node *n;
		const char *k = key;

		snprintf(name, sizeof(name), "n%d", rand_r(&seed) % 6);
		snprintf(key, sizeof(key), "ns/p%d", rand_r(&seed) % 4);
		n = ledger_lock(l, name);
		if (n == NULL)
			abort();
		if (rand_r(&seed) % 2)
			(void)!ledger_reserve(n, key, 1, (uint64_t)it);
		else
			ledger_reconcile(n, &k, 1, (uint64_t)it);
		ledger_unlock(n);
	}
	return NULL;
}

static void test_node_churn(void **state)
{
	struct ledger *l = ledger_new(1000000);
	pthread_t t[WORKERS];
	size_t held = 0;

	for (int i = 0; i < WORKERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, churn, l), 0);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	/* The size counter agrees with what the nodes hold. */
	for (int i = 0; i < 6; i++) {
		char name[16];
		struct ledger_entry_view v[8];
		struct ledger_node *n;

		snprintf(name, sizeof(name), "n%d", i);
		n = ledger_lock(l, name);
		held += ledger_entries(n, v, 8, 0);
		ledger_unlock(n);
	}
	assert_int_equal(ledger_size(l), held);
	ledger_free(l);
}

/* A pod gone before it showed up: its reservations are dropped on every node, but not those
 * of a newer pod of the same name (another uid). */
static void test_forget(void **state)
{
	(void)state;
	struct ledger *l = ledger_new(60000);
	struct ledger_node *a = ledger_lock(l, "node-a");

	assert_int_equal(ledger_reserve_uid(a, "ns/p", "uid-1", 10 * GI, 100), 0);
	assert_int_equal(ledger_reserve_uid(a, "ns/q", "uid-2", 10 * GI, 100), 0);
	assert_int_equal(ledger_reserve(a, "ns/r", 10 * GI, 100), 0); /* uid unknown */
	ledger_unlock(a);
	struct ledger_node *b = ledger_lock(l, "node-b");
	assert_int_equal(ledger_reserve_uid(b, "ns/p", "uid-3", 10 * GI, 100), 0);
	ledger_unlock(b);
	assert_int_equal(ledger_size(l), 4);

	assert_int_equal(ledger_forget(l, "ns/p", "uid-1"), 1); /* uid-3 is another pod */
	assert_int_equal(ledger_forget(l, "ns/r", "uid-9"), 1); /* unknown uid: by key */
	assert_int_equal(ledger_forget(l, "ns/none", NULL), 0);
	assert_int_equal(ledger_forget(l, "ns/p", NULL), 1); /* no uid given: by key */
	assert_int_equal(ledger_forget(l, "", NULL), 0);
	assert_int_equal(ledger_forget(NULL, "ns/q", NULL), 0);
	assert_int_equal(ledger_size(l), 1);
	a = ledger_lock(l, "node-a");
	assert_int_equal(ledger_pending_bytes(a, NULL, 200), 10 * GI); /* ns/q */
	char uid[LEDGER_UID_MAX + 1];
	memset(uid, 'u', LEDGER_UID_MAX);
	uid[LEDGER_UID_MAX] = '\0';
	assert_int_equal(ledger_reserve_uid(a, "ns/x", uid, GI, 200), LEDGER_EINVAL);
	ledger_unlock(a);
	ledger_free(l);
}

/* Settling by key and uid: a newer pod of the same name does not settle the reservation of the
 * pod admitted; trylock never waits. */
static void test_settle_and_trylock(void **state)
{
	(void)state;
	struct ledger *l = ledger_new(60000);
	struct ledger_node *n = ledger_lock(l, "node-a");
	int busy = -1;

	assert_int_equal(ledger_reserve_uid(n, "ns/p", "uid-2", 10 * GI, 100), 0);
	assert_int_equal(ledger_reserve(n, "ns/q", 10 * GI, 100), 0);
	const char *keys[] = {"ns/p", "ns/q"}, *old_uid[] = {"uid-1", "uid-9"};
	assert_int_equal(ledger_settle(n, keys, old_uid, 2, 200), 1); /* ns/q: uid unknown */
	const char *new_uid[] = {"uid-2", NULL};
	assert_int_equal(ledger_settle(n, keys, new_uid, 1, 200), 1);
	assert_int_equal(ledger_pending_bytes(n, NULL, 200), 0);
	/* Held by this thread: trylock from another use reports busy. */
	assert_null(ledger_trylock(l, "node-a", &busy));
	assert_int_equal(busy, 1);
	ledger_unlock(n);
	n = ledger_trylock(l, "node-a", &busy);
	assert_non_null(n);
	assert_int_equal(busy, 0);
	ledger_unlock(n);
	assert_null(ledger_trylock(l, "", &busy));
	assert_int_equal(busy, 0);
	ledger_free(l);
}

/*
 * ledger_release / ledger_relock / ledger_end and the generation: a released node is not
 * locked (another user takes it) yet not freed while empty, so its generation keeps counting;
 * only entries dropped because a view showed their pod (settle, reconcile) move it, not
 * reserves, expiry, ledger_remove or ledger_forget.
 */
static void test_release_and_generation(void **state)
{
	(void)state;
	struct ledger *l = ledger_new(1000);
	struct ledger_node *n = ledger_lock(l, "node-a"), *m;
	int busy = -1;
	const char *key = "ns/p", *uid = "uid-1";

	uint64_t g = ledger_generation(n);
	ledger_release(n); /* empty, but kept: we still use it */
	m = ledger_trylock(l, "node-a", &busy);
	assert_ptr_equal(m, n); /* the same node, free to lock */
	assert_int_equal(ledger_reserve_uid(m, key, uid, GI, 100), 0);
	assert_int_equal(ledger_reserve(m, "ns/q", GI, 100), 0);
	assert_int_equal(ledger_reserve(m, "ns/r", GI, 100), 0);
	assert_int_equal(ledger_remove(m, "ns/r", NULL), 1);
	assert_int_equal(ledger_generation(m), g);
	ledger_unlock(m);
	assert_int_equal(ledger_forget(l, "ns/q", NULL), 1); /* takes the lock itself */
	m = ledger_trylock(l, "node-a", &busy);
	assert_ptr_equal(m, n);
	assert_int_equal(ledger_reserve(m, "ns/q", GI, 100), 0);
	assert_int_equal(ledger_generation(m), g);
	assert_int_equal(ledger_reconcile(m, NULL, 0, 200), 0);
	assert_int_equal(ledger_generation(m), g);
	assert_int_equal(ledger_settle(m, &key, &uid, 1, 200), 1);
	assert_int_equal(ledger_generation(m), g + 1);
	ledger_unlock(m);
	ledger_relock(n);
	assert_int_equal(ledger_generation(n), g + 1);
	const char *q = "ns/q";
	assert_int_equal(ledger_reconcile(n, &q, 1, 300), 1);
	assert_int_equal(ledger_generation(n), g + 2);
	assert_int_equal(ledger_reserve(n, "ns/s", GI, 300), 0);
	assert_int_equal(ledger_settle(n, NULL, NULL, 0, 5000), 1); /* expired: no move */
	assert_int_equal(ledger_generation(n), g + 2);
	ledger_release(n);
	ledger_end(n); /* the last use of an empty node frees it (ASan: no leak) */
	assert_int_equal(ledger_size(l), 0);
	ledger_end(NULL);
	assert_int_equal(ledger_generation(NULL), 0);
	ledger_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_new_and_free),
	    cmocka_unit_test(test_reserve_pending_entries),
	    cmocka_unit_test(test_visit),
	    cmocka_unit_test(test_remove),
	    cmocka_unit_test(test_ttl_expiry),
	    cmocka_unit_test(test_unseen_reservations),
	    cmocka_unit_test(test_claim_carried),
	    cmocka_unit_test(test_refresh_never_lowers),
	    cmocka_unit_test(test_pod_appears),
	    cmocka_unit_test(test_invalid_keys_and_caps),
	    cmocka_unit_test(test_empty_nodes_do_not_accumulate),
	    cmocka_unit_test(test_node_cap_and_sweep),
	    cmocka_unit_test(test_lock_blocks_same_node_only),
	    cmocka_unit_test(test_concurrent_check_and_reserve),
	    cmocka_unit_test(test_concurrent_budget_without_api),
	    cmocka_unit_test(test_node_churn),
	    cmocka_unit_test(test_forget),
	    cmocka_unit_test(test_settle_and_trylock),
	    cmocka_unit_test(test_release_and_generation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
