/*
 * The harness's replicas: several gpu-memory-guard processes against one world (one API server
 * test double, one CA and serving certificate), each on its own ports with its own log, started,
 * killed with SIGKILL and started again one by one; freeing the world kills what still runs.
 * The multi-replica tests (test_shared_reservations.c) stand on this.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

#include "itest.h"

#define N_REPLICAS 3
#define NODE       "gpu-node-rep"

static struct world W, R[N_REPLICAS];

static int group_setup(void **state)
{
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	if (world_add_node(&W, NODE, 40960, 1))
		return -1;
	for (int i = 0; i < N_REPLICAS; i++)
		if (world_replica_init(&R[i], &W, i) || world_start_gmg(&R[i], NULL, 30000))
			return -1;
	return 0;
}

static int group_teardown(void **state)
{
	for (int i = 0; i < N_REPLICAS; i++)
		world_free(&R[i]);
	world_free(&W);
	return 0;
}

/* A dry-run placement of 1Gi on NODE through r: allowed, answered by r. */
static void review_through(struct world *r, const char *uid)
{
	struct review_answer a;
	char *body = harness_pod_review(uid, uid, "1Gi", NODE, 1);
	itest_world = r;
	itest_review(r, body, uid, 1, &a);
	free(body);
	itest_world = &W;
}

static int count_in_log(const struct world *r, const char *needle)
{
	char *log = harness_read_file(r->log_file, NULL);
	int n = 0;
	for (const char *p = log; p && (p = strstr(p, needle)); p += strlen(needle))
		n++;
	free(log);
	return n;
}

static void test_replicas_side_by_side(void **state)
{
	unsigned long gets = apiserver_double_count(W.api, APISERVER_DOUBLE_GET_NODE);
	char uid[32];
	assert_int_equal(W.pid, 0); /* the world itself runs nothing here */
	for (int i = 0; i < N_REPLICAS; i++) {
		assert_true(R[i].pid > 0);
		assert_true(R[i].is_replica);
		assert_ptr_equal(R[i].api, W.api);
		assert_string_equal(R[i].kubeconfig, W.kubeconfig);
		assert_string_equal(R[i].cert_file, W.cert_file);
		for (int j = 0; j < i; j++) {
			assert_int_not_equal(R[i].port, R[j].port);
			assert_int_not_equal(R[i].health_port, R[j].health_port);
			assert_int_not_equal(R[i].pid, R[j].pid);
			assert_string_not_equal(R[i].log_file, R[j].log_file);
		}
		assert_int_equal(world_health_get(&R[i], "/readyz", NULL), 200);
		snprintf(uid, sizeof uid, "side-%d", i);
		review_through(&R[i], uid);
		assert_true(count_in_log(&R[i], "\"msg\"") > 0); /* each writes its own log */
	}
	/* One API server behind them all: each read the node there. */
	assert_true(apiserver_double_count(W.api, APISERVER_DOUBLE_GET_NODE) >= gets + N_REPLICAS);
}

static void test_replica_killed_and_restarted(void **state)
{
	int status;
	pid_t pid = R[1].pid;
	status = world_stop_gmg(&R[1], SIGKILL, 5000);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_int_equal(R[1].pid, 0);
	assert_int_equal(kill(pid, 0), -1); /* reaped */
	assert_int_equal(errno, ESRCH);
	assert_int_equal(world_health_get(&R[1], "/healthz", NULL), 0);
	review_through(&R[0], "after-kill-0");
	review_through(&R[2], "after-kill-2");
	assert_int_equal(world_start_gmg(&R[1], NULL, 30000), 0);
	assert_true(R[1].pid > 0 && R[1].pid != pid);
	review_through(&R[1], "restarted-1");
	/* Both runs in the one log, appended. */
	assert_true(count_in_log(&R[1], "side-1") >= 1);
	assert_true(count_in_log(&R[1], "restarted-1") >= 1);
	/* SIGTERM: a clean exit. */
	status = world_stop_gmg(&R[2], SIGTERM, 10000);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(world_start_gmg(&R[2], NULL, 30000), 0);
}

/* Freeing a world kills its replicas' processes; the replicas are then inert but freeable. */
static void test_world_free_kills_replicas(void **state)
{
	struct world w2, r2;
	pid_t pid;
	assert_int_equal(world_init(&w2, 0), 0);
	assert_int_equal(world_replica_init(&r2, &w2, 0), 0);
	assert_int_equal(world_replica_init(&r2, &w2, 0), -1); /* index taken */
	assert_int_equal(world_replica_init(&r2, &r2, 1), -1); /* not a world */
	assert_int_equal(world_start_gmg(&r2, NULL, 30000), 0);
	pid = r2.pid;
	world_free(&w2);
	assert_int_equal(kill(pid, 0), -1);
	assert_int_equal(errno, ESRCH);
	assert_int_equal(r2.pid, 0);
	assert_null(r2.api);
	assert_int_equal(world_start_gmg(&r2, NULL, 1000), -1);
	world_free(&r2);
	/* And in the other order: the replica's free leaves the world whole. */
	assert_int_equal(world_init(&w2, 0), 0);
	assert_int_equal(world_replica_init(&r2, &w2, 3), 0);
	assert_int_equal(world_start_gmg(&r2, NULL, 30000), 0);
	world_free(&r2);
	assert_null(w2.replicas[3]);
	assert_int_equal(world_start_gmg(&w2, NULL, 30000), 0);
	world_free(&w2);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replicas_side_by_side),
	    cmocka_unit_test(test_replica_killed_and_restarted),
	    cmocka_unit_test(test_world_free_kills_replicas),
	};
	harness_init(argc, argv);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
