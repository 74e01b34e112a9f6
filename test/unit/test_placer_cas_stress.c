/*
 * Stress of the cache path's optimistic attempts over the local ledger (placer.c,
 * placer_cached; review on branch wt/cas): many threads place pods on one node at once,
 * workers (may_block 1) and listener-style callers (may_block 0, handing a busy node to a
 * "worker" call as webhook.c does), while a "kubelet" thread makes admitted pods visible in the
 * watch cache (their reservations settle at the next begin: generation conflicts). core_decide
 * is wrapped (ld --wrap) to yield or sleep at random, so decisions overlap.
 *
 * The invariant: every admitted pod counts on the node, as a reservation or as a visible pod,
 * and what was admitted never exceeds what fits (80Gi GPU, 90 percent: 72Gi; 40Gi resident:
 * 32Gi free). No pod is deleted, no reservation expires (TTL 60 s), so the sum of admitted bytes
 * must stay <= 32Gi. Also: every admitted pod's reservation is in the ledger or its pod visible;
 * no refused pod has a reservation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "core.h"
#include "demand.h"
#include "ledger.h"
#include "metrics.h"
#include "outcome.h"
#include "placer_fixture.h"
#include "watch.h"

#define GIB     (1024ull * 1024ull * 1024ull)
#define THREADS 8
#define PODS    10 /* per thread per round */
#define FREE    (32 * GIB)

static struct cache *cache;
static struct ledger *ledger;
static struct metrics *metrics;
static struct placer *pl;
static const struct demand_config dcfg = {.gpu_resources = NULL};

static _Thread_local unsigned seed;

/* cmocka's asserts longjmp to the test: not from another thread */
#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);      \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static unsigned rnd(void)
{
	seed = seed * 1103515245u + 12345u;
	return (seed >> 16) & 0x7fff;
}

int __real_core_decide(const struct core_input *in, struct core_verdict *out);
int __wrap_core_decide(const struct core_input *in, struct core_verdict *out);

int __wrap_core_decide(const struct core_input *in, struct core_verdict *out)
{
	unsigned r = rnd() % 8;
	if (r < 3)
		sched_yield();
	else if (r < 5)
		usleep(rnd() % 200);
	return __real_core_decide(in, out);
}

/* ---- admitted pods, for the kubelet thread and the check ---- */

struct pod_rec {
	char key[64], uid[64], name[48];
	uint64_t bytes;
	int admitted, visible;
};

static struct pod_rec recs[THREADS * PODS];
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t q[THREADS * PODS], q_n; /* admitted, not yet made visible */
static atomic_int placing;            /* placer threads still running */
static atomic_ulong admitted_bytes;
static atomic_ulong listener_busy, listener_decided;

static void apply(const char *text, enum watch_event_type type)
{
	cJSON *o = cJSON_Parse(text);
	CHECK(o != NULL);
	int rc = strstr(text, "\"kind\":\"Node\"") ? cache_apply_node(cache, type, o)
	                                           : cache_apply_pod(cache, type, o);
	CHECK(rc == 0);
	cJSON_Delete(o);
}

static void make_visible(const struct pod_rec *r)
{
	char text[768];
	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"%s\"},"
	         "\"spec\":{\"nodeName\":\"gpu-a\",\"containers\":[{\"name\":\"c\",\"resources\":{"
	         "\"limits\":{\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\","
	         "\"value\":\"%lluGi\"}]}]},\"status\":{\"phase\":\"Running\"}}",
	         r->name, r->uid, (unsigned long long)(r->bytes / GIB));
	apply(text, WATCH_ADDED);
}

static void *kubelet(void *arg)
{
	(void)arg;
	seed = 7;
	for (;;) {
		size_t i = SIZE_MAX;
		pthread_mutex_lock(&q_mu);
		if (q_n > 0) {
			size_t k = rnd() % q_n;
			i = q[k];
			q[k] = q[--q_n];
		}
		pthread_mutex_unlock(&q_mu);
		if (i != SIZE_MAX) {
			usleep(rnd() % 300);
			make_visible(&recs[i]);
			recs[i].visible = 1; /* read after join */
		} else if (atomic_load(&placing) == 0) {
			return NULL;
		} else {
			usleep(50);
		}
	}
}

static int place_one(struct pod_rec *r, int may_block, struct outcome *o)
{
	struct demand d;
	char text[512];
	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"%s\"},\"spec\":{"
	         "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
	         "\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"%lluGi\"}]}]}}",
	         r->name, r->uid, (unsigned long long)(r->bytes / GIB));
	cJSON *pod = cJSON_Parse(text);
	CHECK(pod != NULL && demand_from_pod(pod, &dcfg, &d) == 0);
	struct placer_pod pp = {
	    .pod_name = r->key,
	    .ns = "ml",
	    .key = r->key,
	    .uid = r->uid,
	    .node = "gpu-a",
	    .demand = &d,
	};
	int rc = placer_cached(pl, &pp, may_block, o);
	cJSON_Delete(pod);
	return rc;
}

static void *placer_thread(void *arg)
{
	size_t t = (size_t)arg;
	seed = (unsigned)(t * 7919 + 1);
	for (size_t k = 0; k < PODS; k++) {
		struct pod_rec *r = &recs[t * PODS + k];
		struct outcome o;
		int may_block = rnd() & 1;

		memset(&o, 0, sizeof(o));
		int decided = place_one(r, may_block, &o);
		if (!may_block) {
			if (decided)
				atomic_fetch_add(&listener_decided, 1);
			else
				atomic_fetch_add(&listener_busy, 1);
		}
		if (!decided) /* the worker, with the listener's outcome as webhook.c hands it */
			decided = place_one(r, 1, &o);
		CHECK(decided == 1);
		if (o.allowed) {
			CHECK(strcmp(o.reserved_uid, r->uid) == 0);
			r->admitted = 1;
			atomic_fetch_add(&admitted_bytes, r->bytes);
			pthread_mutex_lock(&q_mu);
			q[q_n++] = t * PODS + k;
			pthread_mutex_unlock(&q_mu);
		} else {
			CHECK(o.reserved_uid[0] == '\0');
		}
	}
	atomic_fetch_sub(&placing, 1);
	return NULL;
}

/* ledger_visit: sum and find */
struct sum {
	uint64_t bytes;
	const char *uid;
	int found;
};

static void sum_visit(void *ctx, const char *key, const char *uid, const char *claim,
                      uint64_t bytes, uint64_t reserved_ms)
{
	struct sum *s = ctx;
	(void)key, (void)claim, (void)reserved_ms;
	s->bytes += bytes;
	if (s->uid != NULL && strcmp(s->uid, uid) == 0)
		s->found = 1;
}

static double conflicts_total;

static double conflicts(void)
{
	char *text = NULL;
	size_t len = 0;
	const char *series = "\ngpu_memory_guard_ledger_conflicts_total ";
	assert_int_equal(metrics_render(metrics, &text, &len), 0);
	const char *at = strstr(text, series);
	assert_non_null(at);
	double v = strtod(at + strlen(series), NULL);
	free(text);
	return v;
}

static uint64_t one_round(unsigned round, int kubelet_on)
{
	pthread_t th[THREADS], kl;
	static const uint64_t sizes[] = {1, 2, 3, 5};

	cache = cache_new(&dcfg, NULL, NULL);
	ledger = ledger_new(60000);
	metrics = metrics_new();
	assert_non_null(cache);
	assert_non_null(ledger);
	assert_non_null(metrics);
	CHECK(placer_fixture_gpu_a(cache) == 0);
	struct placer_config pc = placer_fixture_config(cache, ledger, &dcfg);
	pc.metrics = metrics;
	assert_non_null(pl = placer_new(&pc));

	memset(recs, 0, sizeof(recs));
	q_n = 0;
	atomic_store(&admitted_bytes, 0);
	seed = round * 31 + 3;
	for (size_t i = 0; i < THREADS * PODS; i++) {
		snprintf(recs[i].name, sizeof(recs[i].name), "p-%u-%zu", round, i);
		snprintf(recs[i].key, sizeof(recs[i].key), "ml/p-%u-%zu", round, i);
		snprintf(recs[i].uid, sizeof(recs[i].uid), "uid-%u-%zu", round, i);
		recs[i].bytes = sizes[rnd() % 4] * GIB;
	}
	atomic_store(&placing, THREADS);
	if (kubelet_on)
		assert_int_equal(pthread_create(&kl, NULL, kubelet, NULL), 0);
	for (size_t t = 0; t < THREADS; t++)
		assert_int_equal(pthread_create(&th[t], NULL, placer_thread, (void *)t), 0);
	for (size_t t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	if (kubelet_on)
		pthread_join(kl, NULL);

	uint64_t admitted = atomic_load(&admitted_bytes);
	if (admitted > FREE)
		fail_msg("round %u: admitted %llu GiB, only %llu GiB fit", round,
		         (unsigned long long)(admitted / GIB), (unsigned long long)(FREE / GIB));
	/* every admitted pod counts (reserved, or visible), no refused pod is reserved */
	struct ledger_node *ln = ledger_lock(ledger, "gpu-a");
	assert_non_null(ln);
	struct sum all = {0};
	ledger_visit(ln, ledger_now_ms(), sum_visit, &all);
	for (size_t i = 0; i < THREADS * PODS; i++) {
		struct sum one = {0, recs[i].uid, 0};
		ledger_visit(ln, ledger_now_ms(), sum_visit, &one);
		if (recs[i].admitted && !recs[i].visible && !one.found)
			fail_msg("round %u: admitted %s has no reservation", round, recs[i].key);
		if (!recs[i].admitted && one.found)
			fail_msg("round %u: refused %s has a reservation", round, recs[i].key);
	}
	ledger_unlock(ln);
	assert_true(all.bytes <= FREE);

	conflicts_total += conflicts();
	placer_free(pl);
	metrics_free(metrics);
	ledger_free(ledger);
	cache_free(cache);
	assert_int_equal(placer_fixture_api_calls, 0);
	return admitted;
}

static unsigned rounds(void)
{
	const char *e = getenv("GMG_STRESS_ROUNDS");
	return e != NULL && atoi(e) > 0 ? (unsigned)atoi(e) : 40;
}

static void test_no_overfill(void **state)
{
	(void)state;
	unsigned n = rounds(), full = 0;
	for (unsigned r = 0; r < n; r++)
		full += one_round(r, 0) >= FREE - 4 * GIB;
	printf("no kubelet: %u rounds, %u filled the node; listener decided %lu, busy %lu; "
	       "conflicts %.0f\n",
	       n, full, atomic_load(&listener_decided), atomic_load(&listener_busy),
	       conflicts_total);
	conflicts_total = 0;
}

static void test_no_overfill_with_settles(void **state)
{
	(void)state;
	unsigned n = rounds(), full = 0;
	for (unsigned r = 0; r < n; r++)
		full += one_round(1000 + r, 1) >= FREE - 4 * GIB;
	printf("kubelet: %u rounds, %u filled the node; listener decided %lu, busy %lu; "
	       "conflicts %.0f\n",
	       n, full, atomic_load(&listener_decided), atomic_load(&listener_busy),
	       conflicts_total);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_overfill),
	    cmocka_unit_test(test_no_overfill_with_settles),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
