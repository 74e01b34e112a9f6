/*
 * Attacks on the watch cache (--cache watch) through the real binary against the API server
 * TEST DOUBLE: a watch that ends and cannot reopen, an object the cache cannot store, a slow
 * API server holding a node's lock while /metrics is scraped, SIGTERM during a long initial
 * LIST, and many concurrent placements onto one node while the cluster changes under the cache.
 *
 * Each test starts its own binary. Nodes are 81559 MiB x 1 GPU at threshold 0.9: a limit of
 * 76,968,728,985 bytes (71.68 GiB).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

#define GIB   (1024.0 * 1024.0 * 1024.0)
#define LIMIT (81559.0 * 1024.0 * 1024.0 * 0.9)

static struct world W;

static int world_up(const char *const *extra, int n_nodes)
{
	char name[32];

	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	for (int i = 0; i < n_nodes; i++) {
		snprintf(name, sizeof name, "ca-node-%d", i);
		if (world_add_node(&W, name, 81559, 1))
			return -1;
	}
	return world_start_gmg(&W, extra, 30000);
}

static int teardown(void **state)
{
	(void)state;
	world_free(&W);
	itest_world = NULL;
	return 0;
}

/* /readyz body (caller frees) and whether it says the cache is synced. */
static int readyz_synced(char **out)
{
	char *body = NULL;
	long code = world_health_get(&W, "/readyz", &body);
	int synced = code == 200 && body && strstr(body, "cache: synced") != NULL;
	if (out)
		*out = body;
	else
		free(body);
	return synced;
}

static void wait_synced(unsigned timeout_ms)
{
	double end = harness_now() + timeout_ms / 1000.0;
	char *body = NULL;

	while (!readyz_synced(&body)) {
		ITEST_CHECK(harness_now() < end, "cache not synced in %u ms; /readyz: %s",
		            timeout_ms, body ? body : "(none)");
		free(body);
		usleep(50 * 1000);
	}
	free(body);
}

static unsigned long placement_calls(void)
{
	return apiserver_double_count(W.api, APISERVER_DOUBLE_GET_NODE) +
	       apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD) +
	       apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS);
}

/*
 * A watch the API server ends normally (its timeoutSeconds, a load balancer, a restarting API
 * server) whose reopening then hangs (the API server does not answer): no event reaches the
 * cache, so after --cache-max-staleness it must not decide. A pod bound meanwhile (71Gi) must
 * not be missed: a 5Gi placement on its node is denied (counted, or fail closed).
 */
static void test_watch_reopen_hanging_is_stale(void **state)
{
	static const char *const extra[] = {"--cache-max-staleness", "1s", "--api-timeout", "2s",
	                                    NULL};
	struct review_answer a;
	char *ready = NULL;

	(void)state;
	ITEST_CHECK(world_up(extra, 1) == 0, "start");
	wait_synced(10000);
	apiserver_double_set_delay_ms(W.api, 60000); /* every answer, watch openings included */
	apiserver_double_cut_watches(W.api);
	ITEST_CHECK(itest_put_pod(&W, "unseen", "uid-unseen", "71Gi", "ca-node-0", "Running") == 0,
	            "put");
	usleep(2500 * 1000); /* > --cache-max-staleness */
	char *body =
	    itest_pod_review("ca-hang", "after-hang", "uid-after-hang", "5Gi", "ca-node-0", 1);
	itest_review(&W, body, "ca-hang", 0, &a);
	free(body);
	ITEST_CHECK(!readyz_synced(&ready), "/readyz says synced while no watch is open: %s",
	            ready ? ready : "(none)");
	free(ready);
	apiserver_double_set_delay_ms(W.api, 0);
	apiserver_double_stop(W.api); /* wake the delayed answers */
	char err[256];
	ITEST_CHECK(apiserver_double_start(W.api, err, sizeof err) == 0, "restart: %s", err);
	wait_synced(20000);
	/* Back: the cache decides again, and counts the pod bound while it was blind. */
	apiserver_double_reset_counts(W.api);
	body = itest_pod_review("ca-back", "after-back", "uid-after-back", "5Gi", "ca-node-0", 1);
	itest_review(&W, body, "ca-back", 0, &a);
	itest_contains(a.message, "inference/unseen", "the denial names the pod");
	free(body);
	ITEST_CHECK(placement_calls() == 0, "after recovery: %lu API calls", placement_calls());
}

/*
 * Quiet watches (no event, no bookmark, as the DRA watches of e2e test 12 saw) that stay open a
 * while and then end, again and again: each is healthy, so the reopening waits the first
 * backoff step, not one doubled per cycle. The old loop counted every such end as a failure:
 * after six cycles it napped 8 to 16 s (after eight, 15 to 30 s) with the watches closed, past
 * --cache-max-staleness (5 s), and the cache stopped deciding; for the DRA kinds, which have no
 * API path, every GPU placement was refused (DRANotRead).
 */
static void test_quiet_watches_reopen_at_once(void **state)
{
	(void)state;
	ITEST_CHECK(world_up(NULL, 1) == 0, "start");
	apiserver_double_set_bookmark_ms(W.api, 600000); /* none during the test */
	wait_synced(10000);
	unsigned long n_open = apiserver_double_open_watches(W.api); /* every kind's */
	ITEST_CHECK(n_open >= 2, "%lu watches open", n_open);
	for (int cycle = 0; cycle < 8; cycle++) { /* the first: the next watches have none */
		unsigned long asked = apiserver_double_count(W.api, APISERVER_DOUBLE_WATCH_PODS);
		double end = harness_now() + 40.0; /* not a timing check: the old nap's bound */
		apiserver_double_cut_watches(W.api);
		while (apiserver_double_count(W.api, APISERVER_DOUBLE_WATCH_PODS) == asked ||
		       apiserver_double_open_watches(W.api) < n_open) {
			ITEST_CHECK(harness_now() < end, "cycle %d: watches not reopened", cycle);
			usleep(20 * 1000);
		}
		usleep(1500 * 1000); /* open and quiet a while: a healthy watch */
	}
	apiserver_double_cut_watches(W.api);
	usleep(6000 * 1000); /* > --cache-max-staleness (5 s), < the old nap (>= 15 s) */
	char *ready = NULL;
	ITEST_CHECK(readyz_synced(&ready), "quiet watches left closed past the staleness: %s",
	            ready ? ready : "(none)");
	free(ready);
}

/* A review sent from its own thread. */
struct bg_review {
	char *body;
	const char *uid;
	pthread_t t;
	struct http_resp rs;
	struct review_answer a;
	int rc;
};

static void *bg_run(void *arg)
{
	struct bg_review *b = arg;
	b->rc = world_review(&W, b->body, &b->rs, &b->a);
	return NULL;
}

/*
 * /metrics (and the health listener with it: one thread serves /healthz, /readyz and /metrics)
 * must not wait for a node's lock, which a placement on the API path holds across its API calls
 * (seconds when the API server is slow). Here the cache is stale (its watches cut, every answer
 * delayed 5 s), so a placement GETs the node then LISTs its pods holding the node's lock.
 */
static void test_metrics_not_blocked_by_placement(void **state)
{
	static const char *const extra[] = {"--cache-max-staleness", "1s", "--api-timeout", "10s",
	                                    NULL};
	struct bg_review b = {0};
	char *metrics = NULL;

	(void)state;
	ITEST_CHECK(world_up(extra, 1) == 0, "start");
	wait_synced(10000);
	/* a reservation on the node, so that the node is in the reserved gauge */
	struct review_answer a;
	char *body = itest_pod_review("ca-m-0", "m-0", "uid-m-0", "1Gi", "ca-node-0", 0);
	itest_review(&W, body, "ca-m-0", 1, &a);
	free(body);
	apiserver_double_set_delay_ms(W.api, 5000);
	apiserver_double_cut_watches(W.api);
	apiserver_double_set_watch_gone(W.api, 1);
	double end = harness_now() + 20;
	while (readyz_synced(NULL)) {
		ITEST_CHECK(harness_now() < end, "the cache never went stale");
		usleep(100 * 1000);
	}
	usleep(1500 * 1000); /* past --cache-max-staleness */
	apiserver_double_reset_counts(W.api);
	b.body = itest_pod_review("ca-m-1", "m-1", "uid-m-1", "1Gi", "ca-node-0", 1);
	b.uid = "ca-m-1";
	ITEST_CHECK(pthread_create(&b.t, NULL, bg_run, &b) == 0, "thread");
	/* The GET node arrives, waits 5 s; then the LIST of the node's pods waits 5 s, under the
	 * node's lock. Scrape in the middle of that LIST. */
	ITEST_CHECK(apiserver_double_wait_count(W.api, APISERVER_DOUBLE_GET_NODE, 1, 15000) == 0,
	            "the placement never asked for the node");
	usleep(6500 * 1000);
	double t0 = harness_now();
	long code = world_health_get(&W, "/metrics", &metrics);
	double took = harness_now() - t0;
	pthread_join(b.t, NULL);
	ITEST_CHECK(code == 200, "/metrics: HTTP %ld", code);
	ITEST_CHECK(b.rc == 0 && !strcmp(b.a.uid, "ca-m-1"), "the placement's answer");
	ITEST_CHECK(took < 2.5, "/metrics took %.2f s: it waited for the node's lock", took);
	free(metrics);
	free(b.body);
	http_resp_free(&b.rs);
	apiserver_double_set_watch_gone(W.api, 0);
	apiserver_double_set_delay_ms(W.api, 0);
}

/*
 * A pod the cache cannot store (a hostile API server: a metadata.uid of 70 bytes) bound to a
 * node with 70Gi: the cache must not decide until a relist stored everything, and a relist in
 * progress is no such proof: while it runs (a slow LIST) a placement on that node must still
 * count the pod (the API path does) or be denied.
 */
static void test_unstorable_pod_not_forgotten_during_relist(void **state)
{
	static const char *const extra[] = {"--cache-max-staleness", "5s", "--api-timeout", "10s",
	                                    NULL};
	struct review_answer a;
	char uid70[71];

	(void)state;
	memset(uid70, 'u', 70);
	uid70[70] = '\0';
	if (world_init(&W, 0) == 0) {
		itest_world = &W;
		W.cache_mode = "watch";
	}
	ITEST_CHECK(world_add_node(&W, "ca-node-0", 81559, 1) == 0, "node");
	ITEST_CHECK(itest_put_pod(&W, "hostile", uid70, "70Gi", "ca-node-0", "Running") == 0,
	            "put");
	ITEST_CHECK(world_start_gmg(&W, extra, 30000) == 0, "start");
	/* Not stored: the cache does not decide; the API path counts the pod. */
	double end = harness_now() + 10;
	for (int i = 0;; i++) {
		char uid[32];
		snprintf(uid, sizeof uid, "ca-h-%d", i);
		char *body = itest_pod_review(uid, "h", "uid-h", "5Gi", "ca-node-0", 1);
		itest_review(&W, body, uid, 0, &a);
		free(body);
		if (strstr(a.message, "inference/hostile"))
			break;
		ITEST_CHECK(harness_now() < end, "never denied naming the pod: %s", a.message);
		usleep(100 * 1000);
	}
	/* The API path may have answered while the nodes were still syncing (a loaded machine):
	 * /readyz names the first problem, so wait until the only one left is the pod not stored.
	 */
	char *ready = NULL;
	end = harness_now() + 15;
	for (;;) {
		ITEST_CHECK(world_health_get(&W, "/readyz", &ready) == 200, "readyz");
		if (ready && strstr(ready, "cache: incomplete"))
			break;
		char note[256];
		snprintf(note, sizeof note, "%s", ready ? ready : "(none)");
		free(ready);
		ready = NULL;
		ITEST_CHECK(harness_now() < end, "/readyz does not say the cache is incomplete: %s",
		            note);
		usleep(100 * 1000);
	}
	free(ready);
	/* Make the informer relist (a 410), slowly: every answer waits 4 s. */
	apiserver_double_set_delay_ms(W.api, 4000);
	apiserver_double_compact(W.api);
	apiserver_double_cut_watches(W.api);
	end = harness_now() + 6;
	for (int i = 0; harness_now() < end; i++) {
		char uid[32];
		snprintf(uid, sizeof uid, "ca-r-%d", i);
		char *body = itest_pod_review(uid, "r", "uid-r", "5Gi", "ca-node-0", 1);
		itest_review(&W, body, uid, 0, &a);
		free(body);
		usleep(200 * 1000);
	}
	apiserver_double_set_delay_ms(W.api, 0);
}

/* SIGTERM while the initial LIST waits for a slow API server: the exit stays within the drain
 * and shutdown timeouts plus a couple of seconds, not the LIST's --api-timeout. --policies off
 * (their unread store would name itself first in /readyz). The replica is not ready while the
 * DRA LISTs wait (integ_dra_not_read), so the test takes the 503 and checks it names them. */
static void test_sigterm_during_slow_initial_list(void **state)
{
	static const char *const extra[] = {"--api-timeout",
	                                    "30s",
	                                    "--drain-timeout",
	                                    "0s",
	                                    "--shutdown-timeout",
	                                    "1s",
	                                    "--policies",
	                                    "off",
	                                    NULL};
	char *ready = NULL;

	(void)state;
	if (world_init(&W, 0) == 0) {
		itest_world = &W;
		W.cache_mode = "watch";
		W.start_unready = 1;
	}
	apiserver_double_set_delay_ms(W.api, 25000);
	ITEST_CHECK(world_start_gmg(&W, extra, 30000) == 0, "start");
	/* 503 "not ready" until the listener is up, then 503 naming the DRA LISTs that wait. */
	double until = harness_now() + 10.0;
	for (;;) {
		long code = world_health_get(&W, "/readyz", &ready);
		ITEST_CHECK(code == 503, "readyz %ld while the LISTs wait: %s", code,
		            ready ? ready : "");
		if (ready != NULL && strstr(ready, "DRA ResourceSlices not read yet"))
			break;
		ITEST_CHECK(harness_now() < until, "readyz while the LISTs wait: %s",
		            ready ? ready : "");
		free(ready);
		ready = NULL;
		usleep(50 * 1000);
	}
	free(ready);
	ITEST_CHECK(apiserver_double_wait_count(W.api, APISERVER_DOUBLE_LIST_NODES, 1, 10000) == 0,
	            "no LIST");
	usleep(300 * 1000);
	double t0 = harness_now();
	int status = world_stop_gmg(&W, SIGTERM, 20000);
	double took = harness_now() - t0;
	apiserver_double_set_delay_ms(W.api, 0);
	ITEST_CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	            "exit after SIGTERM: status %d", status);
	ITEST_CHECK(took < 4.0, "SIGTERM during a slow LIST took %.2f s to exit", took);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_watch_reopen_hanging_is_stale, teardown),
	    cmocka_unit_test_teardown(test_metrics_not_blocked_by_placement, teardown),
	    cmocka_unit_test_teardown(test_unstorable_pod_not_forgotten_during_relist, teardown),
	    cmocka_unit_test_teardown(test_sigterm_during_slow_initial_list, teardown),
	    cmocka_unit_test_teardown(test_quiet_watches_reopen_at_once, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
