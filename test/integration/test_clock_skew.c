/*
 * Replicas whose clocks disagree by 180 s (issue 20): two REAL gpu-memory-guard processes with
 * --reservations shared against one API server TEST DOUBLE, one 90 s behind and one 90 s ahead
 * (libfaketime: LD_PRELOAD with FAKETIME=-90s / +90s; the monotonic clock left alone). Each
 * replica reads the API server's clock from the Date headers of its answers (serverclock.h)
 * and stamps and judges the Lease's entries by it, so they agree on what still counts:
 *
 *   1. Each replica's own clock is off as set (its log's timestamps), so the test tests a skew.
 *   2. The slow replica admits 30Gi on a 36Gi node; the fast one refuses 30Gi more. On their
 *      own clocks the fast one would see the entry expired 10 s before it was written.
 *   3. Storms: 16 threads send 1Gi placements on a fresh node, alternating replicas: exactly
 *      36 admitted, and the node's Lease holds exactly those 36 entries, every one of them
 *      live on the API server's clock (its expiry 25-40 s after now: a pod CREATE's
 *      reservation lasts --unseen-reservation-ttl, 35 s).
 *
 * Nodes: 40960 MiB x 1 GPU at the default threshold 0.9: a limit of 36 GiB.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"

#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
#define NS_LEASES    "gmg-system"
#define ANNOTATION   "gpu-memory-guard.io/reservations"
#define N_THREADS    16
#define STORM_PODS   60

static struct world W, R[2];

static const char *const EXTRA[] = {"--reservations",
                                    "shared",
                                    "--reservations-namespace",
                                    NS_LEASES,
                                    "--reservation-ttl",
                                    "60s",
                                    NULL};
/* ASan insists on coming first among the preloaded libraries: not with libfaketime. */
static const char *const ENV_SLOW[] = {
    "LD_PRELOAD=" FAKETIME_LIB, "FAKETIME=-90s", "FAKETIME_DONT_FAKE_MONOTONIC=1",
    "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1:abort_on_error=1", NULL};
static const char *const ENV_FAST[] = {
    "LD_PRELOAD=" FAKETIME_LIB, "FAKETIME=+90s", "FAKETIME_DONT_FAKE_MONOTONIC=1",
    "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1:abort_on_error=1", NULL};

static int group_setup(void **state)
{
	(void)state;
	if (access(FAKETIME_LIB, R_OK) != 0) {
		fprintf(stderr, "%s missing: apt-get install libfaketime (.ci/install-deps.sh)\n",
		        FAKETIME_LIB);
		return -1;
	}
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	if (world_add_node(&W, "skew-a", 40960, 1) || world_add_node(&W, "skew-storm", 40960, 1))
		return -1;
	for (int i = 0; i < 2; i++) {
		if (world_replica_init(&R[i], &W, i))
			return -1;
		R[i].env = i == 0 ? ENV_SLOW : ENV_FAST;
		if (world_start_gmg(&R[i], EXTRA, 30000))
			return -1;
		itest_wait_synced(&R[i], 15000);
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < 2; i++)
		world_free(&R[i]);
	world_free(&W);
	return 0;
}

static double wall_s(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

/* The replica's last log line's "ts" as Unix seconds: its own clock. */
static double log_clock(const struct world *r)
{
	FILE *f = fopen(r->log_file, "r");
	char line[4096], last[64] = "";
	ITEST_CHECK(f != NULL, "cannot read %s", r->log_file);
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *p = strstr(line, "{\"ts\":\"");
		if (p == line)
			snprintf(last, sizeof(last), "%.23s", p + 7);
	}
	fclose(f);
	struct tm tm = {0};
	const char *rest = strptime(last, "%Y-%m-%dT%H:%M:%S", &tm);
	ITEST_CHECK(rest != NULL, "no timestamp in %s", r->log_file);
	return (double)timegm(&tm);
}

static int review_n;

/* A pod CREATE of limit on node sent to replica i; 1 admitted, 0 refused. */
static int place(int i, const char *node, const char *limit)
{
	char uid[64], name[64], pod_uid[64];
	struct review_answer a;
	int n = __atomic_add_fetch(&review_n, 1, __ATOMIC_RELAXED);
	snprintf(uid, sizeof(uid), "skew-review-%d", n);
	snprintf(name, sizeof(name), "skew-%d", n);
	snprintf(pod_uid, sizeof(pod_uid), "skew-pod-%d", n);
	char *body = itest_pod_review(uid, name, pod_uid, limit, node, 0);
	itest_review(&R[i], body, uid, -1, &a);
	free(body);
	return a.allowed;
}

static void test_clocks_are_off(void **state)
{
	(void)state;
	double now = wall_s();
	place(0, "skew-a", "0Gi"); /* a log line now */
	place(1, "skew-a", "0Gi");
	double slow = log_clock(&R[0]) - now, fast = log_clock(&R[1]) - now;
	print_message("replica clocks: %+.0f s and %+.0f s\n", slow, fast);
	ITEST_CHECK(slow < -80 && slow > -100, "slow replica's clock %+.0f s, not -90", slow);
	ITEST_CHECK(fast > 80 && fast < 100, "fast replica's clock %+.0f s, not +90", fast);
}

static void test_fast_replica_counts_slow_replicas_entry(void **state)
{
	(void)state;
	ITEST_CHECK(place(0, "skew-a", "30Gi"), "30Gi refused on an empty 36Gi node");
	ITEST_CHECK(!place(1, "skew-a", "30Gi"),
	            "the replica 180 s ahead admitted 30Gi beside the other's 30Gi: 60Gi on 36Gi");
	ITEST_CHECK(!place(0, "skew-a", "10Gi"), "the slow replica admitted 10Gi beside 30Gi");
	ITEST_CHECK(place(1, "skew-a", "6Gi"), "6Gi refused beside 30Gi (36Gi limit)");
}

struct storm {
	atomic_int next, admitted;
};

static void *storm_thread(void *arg)
{
	struct storm *s = arg;
	for (;;) {
		int i = atomic_fetch_add(&s->next, 1);
		if (i >= STORM_PODS)
			return NULL;
		if (place(i % 2, "skew-storm", "1Gi"))
			atomic_fetch_add(&s->admitted, 1);
	}
}

static void test_storm_exact(void **state)
{
	pthread_t t[N_THREADS];
	struct storm s;
	(void)state;
	atomic_init(&s.next, 0);
	atomic_init(&s.admitted, 0);
	for (int i = 0; i < N_THREADS; i++)
		ITEST_CHECK(pthread_create(&t[i], NULL, storm_thread, &s) == 0, "pthread_create");
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(t[i], NULL);
	int admitted = atomic_load(&s.admitted);
	ITEST_CHECK(admitted == 36, "%d of %d 1Gi placements admitted on a 36Gi node, want 36",
	            admitted, STORM_PODS);
	/* The Lease: 36 entries, each expiring 25-40 s from now on the real clock (a pod CREATE's
	 * reservation lasts --unseen-reservation-ttl, 35 s). */
	char *text = apiserver_double_lease_annotation(W.api, NS_LEASES, "skew-storm", ANNOTATION);
	ITEST_CHECK(text != NULL, "no Lease for skew-storm");
	cJSON *doc = cJSON_Parse(text);
	const cJSON *entries = doc;
	ITEST_CHECK(cJSON_IsArray(entries), "Lease annotation: %s", text);
	int n = 0, live = 0;
	double now_ms = wall_s() * 1000;
	const cJSON *e;
	cJSON_ArrayForEach(e, entries)
	{
		double exp = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "expires"));
		n++;
		live += exp > now_ms + 25000 && exp < now_ms + 40000;
	}
	ITEST_CHECK(n == 36 && live == 36,
	            "Lease holds %d entries, %d expiring 25-40 s from now: %s", n, live, text);
	cJSON_Delete(doc);
	free(text);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clocks_are_off),
	    cmocka_unit_test(test_fast_replica_counts_slow_replicas_entry),
	    cmocka_unit_test(test_storm_exact),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
