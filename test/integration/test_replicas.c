/*
 * The harness's replicas: several gpu-memory-guard processes against one world (one API server
 * test double, one CA and serving certificate), each on its own ports with its own log, started,
 * killed with SIGKILL and started again one by one; freeing the world kills what still runs.
 * The multi-replica tests (test_shared_reservations.c) stand on this.
 *
 * The replicas run with --reservations shared (the API path: no watch cache). After each step
 * (side by side; one killed; killed and restarted, another stopped and restarted) a storm of
 * 20 x 5Gi placements at once, round-robin over the live replicas, onto a fresh 40Gi node
 * (limit 36Gi): exactly 7 admitted, the rest refused as over the limit, and the node's Lease
 * holds exactly the admitted pods (uid, bytes), none twice. Dry runs write no Lease.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "itest.h"

#define N_REPLICAS 3
#define NODE       "gpu-node-rep"
#define NS_LEASES  "gmg-system"
#define ANNOTATION "gpu-memory-guard.io/reservations"
#define GIB        (1024ull * 1024ull * 1024ull)
#define STORM_JOBS 20 /* x 5Gi onto a 40Gi node: 7 fit under the 36Gi limit */
#define STORM_FIT  7
#define THREADS    10

static struct world W, R[N_REPLICAS];

static const char *const EXTRA[] = {"--reservations",
                                    "shared",
                                    "--reservations-namespace",
                                    NS_LEASES,
                                    "--reservation-ttl",
                                    "60s",
                                    NULL};

/* ---- storms ---- */

struct storm_job {
	char uid[64], name[64];
	int replica;
	char *body;
	long code;
	struct review_answer a;
};

struct storm {
	struct storm_job jobs[STORM_JOBS];
	atomic_int next;
	pthread_barrier_t start;
};

static void *storm_worker(void *arg)
{
	struct storm *st = arg;
	CURL_HANDLE *h = http_handle_new();
	struct http_req rq = {0};
	struct http_resp rs;

	rq.ca_file = W.ca_file;
	rq.content_type = "application/json";
	rq.timeout_ms = 30000;
	pthread_barrier_wait(&st->start);
	for (int i; (i = atomic_fetch_add(&st->next, 1)) < STORM_JOBS;) {
		struct storm_job *j = &st->jobs[i];
		rq.url = R[j->replica].url;
		rq.body = j->body;
		rq.body_len = strlen(j->body);
		http_do(h, &rq, &rs);
		j->code = rs.code;
		if (rs.code == 200)
			harness_parse_review(rs.body, &j->a);
		http_resp_free(&rs);
	}
	http_handle_free(h);
	return NULL;
}

/* The entry of pod inference/name in entries, or NULL. */
static const cJSON *entry_of(const cJSON *entries, const char *name)
{
	char key[128];
	const cJSON *e;
	snprintf(key, sizeof key, "inference/%s", name);
	cJSON_ArrayForEach(e, entries)
	{
		const cJSON *pod = cJSON_GetObjectItemCaseSensitive(e, "pod");
		if (cJSON_IsString(pod) && !strcmp(pod->valuestring, key))
			return e;
	}
	return NULL;
}

/* The node's Lease entries (the annotation parsed), or NULL when there is no Lease. */
static cJSON *lease_entries(const char *node)
{
	char *ann = apiserver_double_lease_annotation(W.api, NS_LEASES, node, ANNOTATION);
	char *lease = apiserver_double_get_lease(W.api, NS_LEASES, node);
	cJSON *entries = lease == NULL ? NULL : ann ? cJSON_Parse(ann) : cJSON_CreateArray();
	ITEST_CHECK(lease == NULL || cJSON_IsArray(entries), "Lease %s: annotation not a list: %s",
	            node, ann ? ann : "(none)");
	free(ann);
	free(lease);
	return entries;
}

/* 20 x 5Gi CREATEs onto a fresh node at once through the live replicas; exactly what fits
 * admitted, and the node's Lease holds exactly the admitted pods. */
static void storm(const char *node)
{
	static struct storm st;
	pthread_t t[THREADS];
	int live[N_REPLICAS], n_live = 0, admitted = 0;

	for (int i = 0; i < N_REPLICAS; i++)
		if (R[i].pid)
			live[n_live++] = i;
	ITEST_CHECK(n_live > 0, "no replica runs");
	ITEST_CHECK(world_add_node(&W, node, 40960, 1) == 0, "add node %s", node);
	memset(&st, 0, sizeof st);
	for (int i = 0; i < STORM_JOBS; i++) {
		struct storm_job *j = &st.jobs[i];
		snprintf(j->uid, sizeof j->uid, "%s-%02d", node, i);
		snprintf(j->name, sizeof j->name, "%s-p%02d", node, i);
		j->replica = live[i % n_live];
		j->body = harness_pod_review(j->uid, j->name, "5Gi", node, 0);
		ITEST_CHECK(j->body != NULL, "review %d", i);
	}
	atomic_init(&st.next, 0);
	pthread_barrier_init(&st.start, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		ITEST_CHECK(pthread_create(&t[i], NULL, storm_worker, &st) == 0, "pthread_create");
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&st.start);

	cJSON *entries = lease_entries(node);
	char *text = entries ? cJSON_PrintUnformatted(entries) : NULL;
	ITEST_CHECK(entries != NULL, "storm on %s: no Lease %s/%s", node, NS_LEASES, node);
	for (int i = 0; i < STORM_JOBS; i++) {
		const struct storm_job *j = &st.jobs[i];
		ITEST_CHECK(j->code == 200 && j->a.well_formed && !strcmp(j->a.uid, j->uid),
		            "%s via replica %d: HTTP %ld", j->uid, j->replica, j->code);
		const cJSON *e = entry_of(entries, j->name);
		if (!j->a.allowed) {
			ITEST_CHECK(j->a.code == 403, "%s via replica %d refused with %d: %s",
			            j->uid, j->replica, j->a.code, j->a.message);
			ITEST_CHECK(e == NULL, "%s refused but in the Lease: %s", j->name, text);
			continue;
		}
		admitted++;
		char pod_uid[HARNESS_UID_MAX];
		harness_pod_uid("inference", j->name, pod_uid, sizeof pod_uid);
		const cJSON *uid = cJSON_GetObjectItemCaseSensitive(e, "uid");
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "bytes");
		ITEST_CHECK(e != NULL, "%s admitted via replica %d but not in the Lease: %s",
		            j->name, j->replica, text);
		ITEST_CHECK(cJSON_IsString(uid) && !strcmp(uid->valuestring, pod_uid),
		            "%s: entry uid %s, pod uid %s", j->name,
		            cJSON_IsString(uid) ? uid->valuestring : "(none)", pod_uid);
		ITEST_CHECK(cJSON_IsNumber(b) && (unsigned long long)b->valuedouble == 5 * GIB,
		            "%s: entry bytes %.0f, declared 5Gi", j->name,
		            cJSON_IsNumber(b) ? b->valuedouble : -1.0);
	}
	ITEST_CHECK(admitted == STORM_FIT, "%s: %d x 5Gi admitted through %d replicas, %d fit",
	            node, admitted, n_live, STORM_FIT);
	/* Nothing else in it, nobody twice. */
	ITEST_CHECK(cJSON_GetArraySize(entries) == admitted,
	            "Lease %s: %d entries, %d admitted: %s", node, cJSON_GetArraySize(entries),
	            admitted, text);
	print_message("%s: %d/%d admitted through %d replicas, the Lease holds them\n", node,
	              admitted, STORM_JOBS, n_live);
	free(text);
	cJSON_Delete(entries);
	for (int i = 0; i < STORM_JOBS; i++)
		free(st.jobs[i].body);
}

static int group_setup(void **state)
{
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	if (world_add_node(&W, NODE, 40960, 1))
		return -1;
	for (int i = 0; i < N_REPLICAS; i++)
		if (world_replica_init(&R[i], &W, i) || world_start_gmg(&R[i], EXTRA, 30000))
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
	/* Dry runs reserve nothing: no Lease for NODE. */
	assert_null(lease_entries(NODE));
	storm("rep-storm-all");
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
	storm("rep-storm-killed"); /* through the two left */
	assert_int_equal(world_start_gmg(&R[1], EXTRA, 30000), 0);
	assert_true(R[1].pid > 0 && R[1].pid != pid);
	review_through(&R[1], "restarted-1");
	/* Both runs in the one log, appended. */
	assert_true(count_in_log(&R[1], "side-1") >= 1);
	assert_true(count_in_log(&R[1], "restarted-1") >= 1);
	/* SIGTERM: a clean exit. */
	status = world_stop_gmg(&R[2], SIGTERM, 10000);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(world_start_gmg(&R[2], EXTRA, 30000), 0);
	/* All three again, two of them new processes that have read no record yet. */
	storm("rep-storm-restarted");
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
