/*
 * Unit tests for lib/cluster/holds: a pod's hold counts on the nodes it names and on no
 * other, never against the pod itself; it is replaced by the same pod's next hold, dropped
 * with no nodes, by holds_drop, when settled or expired; a pod reported gone (holds_forget)
 * loses its hold and a late hold of it is refused while remembered; bad input and a full table
 * are refused; byte sums saturate.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "holds.h"

#define GIB (1024ull * 1024ull * 1024ull)

/* What holds_each gave, as "key:uid:bytes;..." */
struct seen {
	char text[512];
};

static void add(void *ctx, const char *key, const char *uid, uint64_t bytes)
{
	struct seen *s = ctx;
	size_t len = strlen(s->text);
	snprintf(s->text + len, sizeof(s->text) - len, "%s:%s:%llu;", key, uid,
	         (unsigned long long)(bytes / GIB));
}

static const char *on(struct holds *h, const char *node, const char *except, uint64_t now,
                      size_t expect_n)
{
	static struct seen s;
	s.text[0] = '\0';
	assert_int_equal(holds_each(h, node, except, now, add, &s, NULL), expect_n);
	return s.text;
}

static void test_put_each(void **state)
{
	struct holds *h = holds_new();
	const char *ab[] = {"node-a", "node-b"}, *c[] = {"node-c"};
	uint64_t sum = 0;

	assert_non_null(h);
	assert_int_equal(holds_put(h, "ml/p", "uid-p", 10 * GIB, ab, 2, 1000, 500), 0);
	assert_int_equal(holds_put(h, "ml/q", "uid-q", 5 * GIB, c, 1, 1000, 500), 0);
	assert_string_equal(on(h, "node-a", NULL, 1000, 1), "ml/p:uid-p:10;");
	assert_string_equal(on(h, "node-b", "uid-q", 1000, 1), "ml/p:uid-p:10;");
	assert_string_equal(on(h, "node-c", NULL, 1000, 1), "ml/q:uid-q:5;");
	assert_string_equal(on(h, "node-d", NULL, 1000, 0), "");
	/* never against the pod itself */
	assert_string_equal(on(h, "node-a", "uid-p", 1000, 0), "");
	/* the same pod filtered again: replaced, not added */
	assert_int_equal(holds_put(h, "ml/p", "uid-p", 12 * GIB, c, 1, 1100, 500), 0);
	assert_int_equal(holds_count(h), 2);
	assert_string_equal(on(h, "node-a", NULL, 1100, 0), "");
	assert_int_equal(holds_each(h, "node-c", NULL, 1100, add, &(struct seen){{0}}, &sum), 2);
	assert_int_equal(sum, 17 * GIB);
	/* no node passed: dropped */
	assert_int_equal(holds_put(h, "ml/p", "uid-p", 12 * GIB, NULL, 0, 1100, 500), 0);
	assert_int_equal(holds_count(h), 1);
	holds_drop(h, "uid-q");
	holds_drop(h, "uid-none");
	holds_drop(h, NULL);
	assert_int_equal(holds_count(h), 0);
	holds_free(h);
	holds_free(NULL);
}

static int settle_q(void *ctx, const char *key, const char *uid)
{
	(*(int *)ctx)++;
	return strcmp(uid, "uid-q") == 0 && strcmp(key, "ml/q") == 0;
}

static void test_expiry_and_prune(void **state)
{
	struct holds *h = holds_new();
	const char *a[] = {"node-a"};
	int calls = 0;

	assert_int_equal(holds_put(h, "ml/p", "uid-p", GIB, a, 1, 1000, 500), 0);
	assert_int_equal(holds_put(h, "ml/q", "uid-q", GIB, a, 1, 1000, 900), 0);
	assert_int_equal(holds_put(h, "ml/r", "uid-r", GIB, a, 1, 1000, UINT64_MAX), 0);
	/* live until now reaches the expiry, then never counted, even before a prune */
	assert_string_equal(on(h, "node-a", NULL, 1499, 3),
	                    "ml/p:uid-p:1;ml/q:uid-q:1;ml/r:uid-r:1;");
	assert_string_equal(on(h, "node-a", NULL, 1500, 2), "ml/q:uid-q:1;ml/r:uid-r:1;");
	/* prune: p expired (settled not asked), q settled, r stays (TTL saturated) */
	assert_int_equal(holds_prune(h, 1500, settle_q, &calls), 1);
	assert_int_equal(calls, 2);
	assert_string_equal(on(h, "node-a", NULL, UINT64_MAX - 1, 1), "ml/r:uid-r:1;");
	assert_int_equal(holds_prune(h, 1500, NULL, NULL), 1);
	holds_free(h);
}

/* A pod deleted while its filter call ran: the cache's gone callback came before the hold
 * (e2e: a Deployment torn down while the scheduler judged one of its pods). Its late hold must
 * not count for the whole TTL against the next pods. */
static void test_forget_refuses_late_hold(void **state)
{
	struct holds *h = holds_new();
	const char *ab[] = {"node-a", "node-b"};
	char uid[32];

	assert_non_null(h);
	holds_forget(h, "uid-gone");
	assert_int_equal(holds_put(h, "ml/gone", "uid-gone", 20 * GIB, ab, 2, 1000, 30000),
	                 HOLDS_EGONE);
	assert_int_equal(holds_count(h), 0);
	assert_string_equal(on(h, "node-b", NULL, 1001, 0), "");
	/* another pod, even of the same name (a new uid), is held */
	assert_int_equal(holds_put(h, "ml/gone", "uid-new", 20 * GIB, ab, 2, 1000, 30000), 0);
	assert_string_equal(on(h, "node-b", NULL, 1001, 1), "ml/gone:uid-new:20;");
	/* a hold then its pod gone: dropped at once */
	holds_forget(h, "uid-new");
	assert_int_equal(holds_count(h), 0);
	/* NULL and "" are no-ops */
	holds_forget(h, NULL);
	holds_forget(h, "");
	assert_int_equal(holds_put(h, "ml/x", "uid-x", GIB, ab, 1, 1000, 30000), 0);
	/* the memory is bounded: after HOLDS_GONE_MAX later pods gone, the first is forgotten */
	for (int i = 0; i < HOLDS_GONE_MAX; i++) {
		snprintf(uid, sizeof(uid), "uid-later-%d", i);
		holds_forget(h, uid);
	}
	assert_int_equal(holds_put(h, "ml/gone", "uid-gone", GIB, ab, 2, 1000, 30000), 0);
	assert_int_equal(holds_put(h, "ml/l", "uid-later-7", GIB, ab, 2, 1000, 30000), HOLDS_EGONE);
	holds_free(h);
	(void)state;
}

static void test_bad_input_and_full(void **state)
{
	struct holds *h = holds_new();
	const char *a[] = {"node-a"};
	char key[32], uid[32];
	uint64_t sum = 0;

	assert_int_equal(holds_put(h, NULL, "u", 1, a, 1, 0, 1), HOLDS_EINVAL);
	assert_int_equal(holds_put(h, "k", NULL, 1, a, 1, 0, 1), HOLDS_EINVAL);
	assert_int_equal(holds_put(h, "", "u", 1, a, 1, 0, 1), HOLDS_EINVAL);
	assert_int_equal(holds_put(h, "k", "", 1, a, 1, 0, 1), HOLDS_EINVAL);
	assert_int_equal(holds_put(h, "k", "u", 1, NULL, 1, 0, 1), HOLDS_EINVAL);
	assert_int_equal(holds_put(h, "k", "u", 1, a, HOLDS_MAX_NODES + 1, 0, 1), HOLDS_EINVAL);
	for (int i = 0; i < HOLDS_MAX; i++) {
		snprintf(key, sizeof(key), "ml/p%d", i);
		snprintf(uid, sizeof(uid), "uid-%d", i);
		/* the first one expires at 10, the others much later */
		assert_int_equal(holds_put(h, key, uid, UINT64_MAX / 2, a, 1, 0, i ? 1000 : 10), 0);
	}
	assert_int_equal(holds_put(h, "ml/x", "uid-x", 1, a, 1, 5, 1000), HOLDS_EFULL);
	/* a replacement needs no room */
	assert_int_equal(holds_put(h, "ml/p1", "uid-1", 1, a, 1, 5, 1000), 0);
	/* full, but an expired hold makes room */
	assert_int_equal(holds_put(h, "ml/x", "uid-x", 1, a, 1, 10, 1000), 0);
	assert_int_equal(holds_count(h), HOLDS_MAX);
	/* sums saturate */
	assert_int_equal(holds_each(h, "node-a", NULL, 10, add, &(struct seen){{0}}, &sum),
	                 HOLDS_MAX);
	assert_int_equal(sum, UINT64_MAX);
	holds_free(h);
}

/* Filters on several threads and the informer's gone reports at once (run under TSan by
 * `make tsan`): no data race, every put and drop lands, the table ends empty. */
struct worker {
	struct holds *h;
	int id;
	size_t seen;
};

static void count(void *ctx, const char *key, const char *uid, uint64_t bytes)
{
	(void)key;
	(void)uid;
	(void)bytes;
	(*(size_t *)ctx)++;
}

static int never(void *ctx, const char *key, const char *uid)
{
	(void)ctx;
	(void)key;
	(void)uid;
	return 0;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	const char *nodes[] = {"node-a", "node-b"};
	char key[32], uid[32];

	for (int i = 0; i < 2000; i++) {
		snprintf(key, sizeof(key), "ml/w%d-%d", w->id, i % 50);
		snprintf(uid, sizeof(uid), "uid-w%d-%d", w->id, i % 50);
		assert_int_equal(holds_put(w->h, key, uid, GIB, nodes, 2, 0, 1000000), 0);
		holds_each(w->h, nodes[i % 2], uid, 0, count, &w->seen, NULL);
		holds_prune(w->h, 0, never, NULL);
		if (i % 3 == 0)
			holds_drop(w->h, uid);
	}
	for (int i = 0; i < 50; i++) {
		snprintf(uid, sizeof(uid), "uid-w%d-%d", w->id, i);
		holds_drop(w->h, uid);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct holds *h = holds_new();
	struct worker w[4];
	pthread_t t[4];

	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){h, i, 0};
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(holds_count(h), 0);
	holds_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_each),
	    cmocka_unit_test(test_expiry_and_prune),
	    cmocka_unit_test(test_forget_refuses_late_hold),
	    cmocka_unit_test(test_bad_input_and_full),
	    cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
