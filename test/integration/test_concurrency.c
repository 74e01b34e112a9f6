/*
 * Concurrent placements onto one node, released together from 50 threads (one libcurl handle
 * and one TLS connection each): the check-and-reserve is serialized per node, so the number
 * admitted is exactly what fits and the admitted total never passes the threshold.
 *
 * Nodes: 81559 MiB x 1 GPU, threshold 0.9 -> budget 76,968,728,985 bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "itest.h"

#define N_THREADS 50
#define GIB       (1024.0 * 1024.0 * 1024.0)
#define BUDGET    (81559.0 * 1024.0 * 1024.0 * 0.9)

static struct world W;

struct job {
	char uid[64];
	char *body;
	double bytes;
	pthread_barrier_t *start;
	/* results */
	long code;
	struct review_answer a;
	char error[256];
};

static int group_setup(void **state)
{
	/* The double never stores the pods these reviews admit, so a reservation older than
	 * --reservation-grace would be looked up, found missing (404) and dropped: keep the grace
	 * above the longest review of a loaded, sanitized run (5 s was passed at load 11). */
	static const char *const extra[] = {"--api-timeout",       "10s", "--threshold", "0.9",
	                                    "--reservation-grace", "60s", NULL};
	char name[64];
	int i;
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	if (world_add_node(&W, "gpu-node-c", 81559, 1) ||
	    world_add_node(&W, "gpu-node-d", 81559, 1))
		return -1;
	for (i = 0; i < N_THREADS; i++) {
		snprintf(name, sizeof name, "bind-%02d", i);
		if (world_add_pod(&W, "inference", name, "4Gi", NULL))
			return -1;
	}
	return world_start_gmg(&W, extra, 30000);
}

static int group_teardown(void **state)
{
	world_free(&W);
	return 0;
}

static void *run_job(void *arg)
{
	struct job *j = arg;
	struct review_client c;

	review_client_open(&c, &W, 60000);
	pthread_barrier_wait(j->start);
	review_client_send(&c, j->body, &j->code, j->error, sizeof j->error, &j->a);
	review_client_close(&c);
	return NULL;
}

/* Run all jobs at once; check every answer; return the admitted bytes and count. */
static double run_all(struct job *jobs, int *admitted)
{
	pthread_t t[N_THREADS];
	pthread_barrier_t start;
	double total = 0;
	int i;
	pthread_barrier_init(&start, NULL, N_THREADS);
	for (i = 0; i < N_THREADS; i++) {
		jobs[i].start = &start;
		ITEST_CHECK(pthread_create(&t[i], NULL, run_job, &jobs[i]) == 0, "pthread_create");
	}
	for (i = 0; i < N_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	*admitted = 0;
	for (i = 0; i < N_THREADS; i++) {
		ITEST_CHECK(jobs[i].code == 200, "job %d: HTTP %ld (%s)", i, jobs[i].code,
		            jobs[i].error);
		ITEST_CHECK(jobs[i].a.well_formed && !strcmp(jobs[i].a.uid, jobs[i].uid),
		            "job %d: bad answer (uid \"%s\")", i, jobs[i].a.uid);
		if (jobs[i].a.allowed) {
			total += jobs[i].bytes;
			(*admitted)++;
		}
	}
	return total;
}

static void free_jobs(struct job *jobs)
{
	int i;
	for (i = 0; i < N_THREADS; i++)
		free(jobs[i].body);
}

/* 50 Bindings of 4Gi pods to one node: floor(budget / 4Gi) = 17 fit. */
static void test_50_bindings_one_node(void **state)
{
	static struct job jobs[N_THREADS];
	char name[64];
	int i, admitted;
	double total;
	memset(jobs, 0, sizeof jobs);
	for (i = 0; i < N_THREADS; i++) {
		snprintf(jobs[i].uid, sizeof jobs[i].uid, "conc-bind-%02d", i);
		snprintf(name, sizeof name, "bind-%02d", i);
		jobs[i].body = harness_binding_review(jobs[i].uid, name, "gpu-node-c");
		jobs[i].bytes = 4 * GIB;
		ITEST_CHECK(jobs[i].body != NULL, "review %d", i);
	}
	total = run_all(jobs, &admitted);
	free_jobs(jobs);
	ITEST_CHECK(admitted == (int)(BUDGET / (4 * GIB)),
	            "admitted %d bindings of 4Gi, exactly %d fit", admitted,
	            (int)(BUDGET / (4 * GIB)));
	ITEST_CHECK(total <= BUDGET, "admitted %.0f bytes over the budget %.0f", total, BUDGET);
}

/* 50 pod CREATEs with nodeName and sizes 1..12Gi: the admitted total stays within the budget,
 * and every denied pod is bigger than what was left at the end (serialized checks: what was
 * left only shrank). */
static void test_50_mixed_sizes_one_node(void **state)
{
	static struct job jobs[N_THREADS];
	char name[64], limit[16];
	int i, admitted;
	double total;
	memset(jobs, 0, sizeof jobs);
	for (i = 0; i < N_THREADS; i++) {
		int gib = 1 + (i * 7) % 12;
		snprintf(jobs[i].uid, sizeof jobs[i].uid, "conc-mixed-%02d", i);
		snprintf(name, sizeof name, "mixed-%02d", i);
		snprintf(limit, sizeof limit, "%dGi", gib);
		jobs[i].body = harness_pod_review(jobs[i].uid, name, limit, "gpu-node-d", 0);
		jobs[i].bytes = gib * GIB;
		ITEST_CHECK(jobs[i].body != NULL, "review %d", i);
	}
	total = run_all(jobs, &admitted);
	free_jobs(jobs);
	ITEST_CHECK(total <= BUDGET, "admitted %.0f bytes over the budget %.0f", total, BUDGET);
	ITEST_CHECK(admitted > 0 && admitted < N_THREADS, "admitted %d of %d", admitted, N_THREADS);
	for (i = 0; i < N_THREADS; i++)
		if (!jobs[i].a.allowed)
			ITEST_CHECK(jobs[i].bytes > BUDGET - total,
			            "%s (%.0f GiB) denied while %.2f GiB were still free",
			            jobs[i].uid, jobs[i].bytes / GIB, (BUDGET - total) / GIB);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_50_bindings_one_node),
	    cmocka_unit_test(test_50_mixed_sizes_one_node),
	};
	harness_init(argc, argv);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
