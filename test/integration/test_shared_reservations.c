/*
 * Shared reservations across replicas (--reservations shared, issue 8): two and three REAL
 * gpu-memory-guard processes against one API server TEST DOUBLE, which serves the Leases they
 * keep their reservations in (one per GPU node, in gmg-system) with kube-apiserver's
 * compare-and-swap on resourceVersion.
 *
 *   1. Storms: many threads send placements at once, spread round-robin over the replicas (pod
 *      CREATEs with spec.nodeName and pods/binding reviews of unscheduled pods, mixed), onto a
 *      fresh node per round; 12 rounds with 2 replicas and 12 with 3, half of 60 x 1Gi and half
 *      of 30 x 5Gi, some with lease writes slowed down to widen the races. Every round: exactly
 *      what fits is admitted (36 and 7), the node's Lease holds exactly the admitted pods (uid,
 *      bytes), at most one Lease write per admitted placement (the double's count and each
 *      replica's gpu_memory_guard_reservation_writes_total{result="ok"}; placements queued on
 *      one replica share a write), and every 409 the double gave was counted by a replica as a
 *      conflict.
 *   2. A dry run (allowed or not) and a denial write nothing.
 *   3. One replica killed with SIGKILL in the middle of a storm: the node is never over its
 *      limit, the Lease holds every admitted pod and at most the killed replica's in-flight
 *      ones more, and afterwards the other replicas admit exactly what is left.
 *
 *   4. A pod admitted (Binding) and deleted before it shows on its node: once the replicas'
 *      watch caches see the DELETE its entry no longer counts (a placement needing its room is
 *      admitted before the TTL) and the next write drops it from the Lease.
 *   5. The Lease deleted between a replica's write and its next update: the PUT answers 404
 *      (the double's delete_lease_before_put; kube-apiserver would create it), the placement
 *      is decided again, the Lease created and the placement admitted; and as kube-apiserver
 *      v1.33 answers it (the PUT of the absent Lease creates it): admitted too.
 *   6. A pod Pending for longer than the settle grace (30 s) before its Binding: its entry
 *      is kept by the next write after the replica's cache shows it bound (the grace runs
 *      from when the cache first saw it bound, not from when it first saw the pod).
 *
 * Results are read from the answers, the double's Leases and counters and the replicas'
 * /metrics, never from logs. Admitted pods are not persisted (but in 6), so no entry settles or
 * expires during the test (TTL 60 s, fresh node per round).
 *
 * Nodes: 40960 MiB x 1 GPU at the default threshold 0.9: a limit of 36 GiB.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

#define N_REPLICAS 3
#define N_THREADS  20
#define MAX_JOBS   64
#define NS_LEASES  "gmg-system"
#define ANNOTATION "gpu-memory-guard.io/reservations"
#define GIB        (1024ull * 1024ull * 1024ull)
#define LIMIT      (40960ull * 1024ull * 1024ull * 9ull / 10ull) /* 36 GiB */
#define ROUNDS     12 /* per replica count: half 1Gi, half 5Gi */
#define KILL_JOBS  45

static struct world W, R[N_REPLICAS];
static double synced_at[N_REPLICAS]; /* harness_now() when each replica was last synced */

#define LATE_POD "settle-late" /* Pending from the start (test 6) */

/* ---- placements sent at once ---- */

struct job {
	char uid[64];     /* request.uid */
	char name[64];    /* pod name (namespace inference) */
	char pod_uid[96]; /* the pod's metadata.uid */
	int binding;      /* 1: pods/binding review of an unbound pod; 0: pod CREATE */
	int replica;      /* which replica it is sent to */
	int dry_run;
	char *body;
	/* results */
	long code;
	char error[256];
	struct review_answer a;
};

struct run {
	struct job *jobs;
	int n_jobs;
	int jitter_ms; /* up to this long between a thread's jobs */
	atomic_int next;
	atomic_int answered[N_REPLICAS]; /* HTTP 200s from each replica */
	pthread_barrier_t start;
};

struct worker {
	struct run *run;
	unsigned seed;
};

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct run *r = wk->run;
	CURL_HANDLE *h = http_handle_new();
	struct http_req rq = {0};
	struct http_resp rs;
	const char *warm = "{\"request\":{\"uid\":\"warm\"}}";

	rq.ca_file = W.ca_file;
	rq.content_type = "application/json";
	rq.timeout_ms = 30000;
	/* Connect to every live replica first, so the barrier releases the placements. */
	rq.body = warm;
	rq.body_len = strlen(warm);
	for (int i = 0; i < N_REPLICAS; i++) {
		if (!R[i].pid)
			continue;
		rq.url = R[i].url;
		http_do(h, &rq, &rs);
		http_resp_free(&rs);
	}
	pthread_barrier_wait(&r->start);
	for (;;) {
		int i = atomic_fetch_add(&r->next, 1);
		if (i >= r->n_jobs)
			break;
		struct job *j = &r->jobs[i];
		rq.url = R[j->replica].url;
		rq.body = j->body;
		rq.body_len = strlen(j->body);
		http_do(h, &rq, &rs);
		j->code = rs.code;
		snprintf(j->error, sizeof j->error, "%s", rs.error);
		if (rs.code == 200) {
			harness_parse_review(rs.body, &j->a);
			atomic_fetch_add(&r->answered[j->replica], 1);
		}
		http_resp_free(&rs);
		if (r->jitter_ms)
			usleep((rand_r(&wk->seed) % (unsigned)r->jitter_ms) * 1000);
	}
	http_handle_free(h);
	return NULL;
}

/*
 * n jobs named prefix-NN of limit each onto node, sent round-robin to the first n_replicas
 * replicas: even ones Bindings of pods prefix-b-NN (added unscheduled to the double here), odd
 * ones CREATEs of prefix-c-NN with spec.nodeName.
 */
static void make_jobs(struct job *jobs, int n, const char *prefix, const char *limit,
                      const char *node, int n_replicas, int dry_run)
{
	memset(jobs, 0, sizeof *jobs * (size_t)n);
	for (int i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		snprintf(j->uid, sizeof j->uid, "%s-%02d", prefix, i);
		j->binding = i % 2 == 0 && !dry_run;
		j->replica = i % n_replicas;
		j->dry_run = dry_run;
		snprintf(j->name, sizeof j->name, "%s-%c-%02d", prefix, j->binding ? 'b' : 'c', i);
		harness_pod_uid("inference", j->name, j->pod_uid, sizeof j->pod_uid);
		if (j->binding) {
			ITEST_CHECK(world_add_pod(&W, "inference", j->name, limit, NULL) == 0,
			            "add pod %s", j->name);
			j->body = harness_binding_review(j->uid, j->name, node);
		} else {
			j->body = harness_pod_review(j->uid, j->name, limit, node, dry_run);
		}
		ITEST_CHECK(j->body != NULL, "review %d", i);
	}
}

static void free_jobs(struct job *jobs, int n)
{
	for (int i = 0; i < n; i++) {
		free(jobs[i].body);
		jobs[i].body = NULL;
	}
}

/* Release every job from N_THREADS threads at once; kill replica `kill` (-1: none) with
 * SIGKILL once it has answered kill_after of them. */
static void run_jobs(struct job *jobs, int n, int jitter_ms, int kill, int kill_after)
{
	static struct run r;
	pthread_t t[N_THREADS];
	struct worker wk[N_THREADS];

	memset(&r, 0, sizeof r);
	r.jobs = jobs;
	r.n_jobs = n;
	r.jitter_ms = jitter_ms;
	atomic_init(&r.next, 0);
	for (int i = 0; i < N_REPLICAS; i++)
		atomic_init(&r.answered[i], 0);
	pthread_barrier_init(&r.start, NULL, N_THREADS);
	for (int i = 0; i < N_THREADS; i++) {
		wk[i].run = &r;
		wk[i].seed = 777u + (unsigned)i;
		ITEST_CHECK(pthread_create(&t[i], NULL, worker_main, &wk[i]) == 0,
		            "pthread_create");
	}
	if (kill >= 0) {
		double until = harness_now() + 30;
		while (atomic_load(&r.answered[kill]) < kill_after && harness_now() < until)
			usleep(500);
		ITEST_CHECK(atomic_load(&r.answered[kill]) >= kill_after,
		            "replica %d answered %d placements in 30 s", kill,
		            atomic_load(&r.answered[kill]));
		int status = world_stop_gmg(&R[kill], SIGKILL, 5000);
		ITEST_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		            "replica %d: not killed (status %d)", kill, status);
	}
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&r.start);
}

/* ---- what the replicas and the double say ---- */

/* A replica's counter from its /metrics (name{label}), or -1. */
static double replica_metric(int i, const char *name, const char *label)
{
	char *body = NULL;
	double v = -1;
	if (world_health_get(&R[i], "/metrics", &body) == 200)
		v = harness_metric(body, name, label, 0);
	free(body);
	return v;
}

struct snapshot {
	double writes_ok[N_REPLICAS], writes_conflict[N_REPLICAS];
	unsigned long created, updated, conflicts, lease_writes;
};

static void snapshot(struct snapshot *s, int n_replicas)
{
	memset(s, 0, sizeof *s);
	for (int i = 0; i < n_replicas; i++) {
		if (!R[i].pid)
			continue;
		s->writes_ok[i] =
		    replica_metric(i, "gpu_memory_guard_reservation_writes_total", "result=\"ok\"");
		s->writes_conflict[i] = replica_metric(
		    i, "gpu_memory_guard_reservation_writes_total", "result=\"conflict\"");
		ITEST_CHECK(s->writes_ok[i] >= 0 && s->writes_conflict[i] >= 0,
		            "replica %d: no gpu_memory_guard_reservation_writes_total in /metrics",
		            i);
	}
	s->created = apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_CREATED);
	s->updated = apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_UPDATED);
	s->conflicts = apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_CONFLICT);
	s->lease_writes = apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_WRITE);
}

/* The node's Lease entries (the annotation parsed; NULL when there is no Lease), its
 * resourceVersion into rv when not NULL. */
static cJSON *lease_entries(const char *node, char *rv, size_t rv_len)
{
	char *json = apiserver_double_get_lease(W.api, NS_LEASES, node);
	cJSON *lease = json ? cJSON_Parse(json) : NULL, *entries = NULL;
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(lease, "metadata");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(md, "annotations"), ANNOTATION);
	free(json);
	if (rv)
		snprintf(rv, rv_len, "%s",
		         cJSON_IsString(cJSON_GetObjectItemCaseSensitive(md, "resourceVersion"))
		             ? cJSON_GetObjectItemCaseSensitive(md, "resourceVersion")->valuestring
		             : "");
	if (lease) {
		entries = cJSON_IsString(ann) ? cJSON_Parse(ann->valuestring) : cJSON_CreateArray();
		ITEST_CHECK(cJSON_IsArray(entries), "Lease %s: annotation is not a list: %s", node,
		            cJSON_IsString(ann) ? ann->valuestring : "(none)");
	}
	cJSON_Delete(lease);
	return entries;
}

/* The entry of pod inference/name, or NULL. */
static const cJSON *entry_of(const cJSON *entries, const char *name)
{
	const cJSON *e;
	char key[128];
	snprintf(key, sizeof key, "inference/%s", name);
	cJSON_ArrayForEach(e, entries)
	{
		const cJSON *pod = cJSON_GetObjectItemCaseSensitive(e, "pod");
		if (cJSON_IsString(pod) && !strcmp(pod->valuestring, key))
			return e;
	}
	return NULL;
}

static unsigned long long entries_bytes(const cJSON *entries)
{
	const cJSON *e;
	unsigned long long sum = 0;
	cJSON_ArrayForEach(e, entries)
	{
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "bytes");
		sum += cJSON_IsNumber(b) ? (unsigned long long)b->valuedouble : 0;
	}
	return sum;
}

/* Every admitted job has its entry (uid, bytes), no entry twice. Returns the entry count. */
static int check_admitted_in_lease(const struct job *jobs, int n, const cJSON *entries,
                                   const char *node, unsigned long long bytes)
{
	for (int i = 0; i < n; i++) {
		if (!jobs[i].a.allowed)
			continue;
		const cJSON *e = entry_of(entries, jobs[i].name);
		char *text = cJSON_PrintUnformatted(entries);
		ITEST_CHECK(e != NULL, "%s admitted on %s but not in its Lease: %s", jobs[i].name,
		            node, text);
		free(text);
		const cJSON *uid = cJSON_GetObjectItemCaseSensitive(e, "uid");
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "bytes");
		ITEST_CHECK(cJSON_IsString(uid) && !strcmp(uid->valuestring, jobs[i].pod_uid),
		            "%s: entry uid %s, pod uid %s", jobs[i].name,
		            cJSON_IsString(uid) ? uid->valuestring : "(none)", jobs[i].pod_uid);
		ITEST_CHECK(cJSON_IsNumber(b) && (unsigned long long)b->valuedouble == bytes,
		            "%s: entry bytes %.0f, declared %llu", jobs[i].name,
		            cJSON_IsNumber(b) ? b->valuedouble : -1.0, bytes);
	}
	const cJSON *e, *f;
	cJSON_ArrayForEach(e, entries)
	{
		int same = 0;
		cJSON_ArrayForEach(f, entries) same +=
		    cJSON_Compare(cJSON_GetObjectItemCaseSensitive(e, "pod"),
		                  cJSON_GetObjectItemCaseSensitive(f, "pod"), 1);
		ITEST_CHECK(same == 1, "Lease %s: pod %s has %d entries", node,
		            cJSON_GetObjectItemCaseSensitive(e, "pod")->valuestring, same);
	}
	return cJSON_GetArraySize(entries);
}

/* ---- set-up ---- */

static const char *const EXTRA[] = {"--reservations",
                                    "shared",
                                    "--reservations-namespace",
                                    NS_LEASES,
                                    "--reservation-ttl",
                                    "60s",
                                    NULL};

static void start_replica(int i)
{
	ITEST_CHECK(world_start_gmg(&R[i], EXTRA, 30000) == 0, "replica %d did not start", i);
	itest_world = &R[i];
	itest_wait_synced(&R[i], 15000);
	synced_at[i] = harness_now();
	itest_world = &W;
}

static int group_setup(void **state)
{
	(void)state;
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	/* Test 6's pod, Pending before any replica starts: each sees it in its first list. */
	if (world_add_pod(&W, "inference", LATE_POD, "20Gi", NULL))
		return -1;
	for (int i = 0; i < N_REPLICAS; i++)
		if (world_replica_init(&R[i], &W, i))
			return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N_REPLICAS; i++)
		world_free(&R[i]);
	world_free(&W);
	return 0;
}

/* Replicas 0..n-1 running, the others stopped. */
static void use_replicas(int n)
{
	for (int i = 0; i < N_REPLICAS; i++) {
		if (i < n && !R[i].pid)
			start_replica(i);
		if (i >= n && R[i].pid)
			world_stop_gmg(&R[i], SIGTERM, 10000);
	}
}

/* Dump every replica's log when a check fails in a storm. */
static void dump_replica_logs(void)
{
	for (int i = 0; i < N_REPLICAS; i++)
		if (R[i].pid)
			world_dump_log(&R[i]);
}

/* ---- 1. storms ---- */

/* One storm onto a fresh node through n_replicas: exactly fit admitted, the Lease holds them,
 * one write each, conflicts accounted for. */
static void storm_round(int n_replicas, int round, int n_jobs, const char *limit,
                        unsigned long long bytes, int fit, unsigned lease_delay_ms)
{
	static struct job jobs[MAX_JOBS];
	char node[64], prefix[32];
	struct snapshot before, after;
	int admitted = 0, via[N_REPLICAS] = {0};
	double conflict_sum = 0;

	snprintf(node, sizeof node, "shared-%d-%02d", n_replicas, round);
	snprintf(prefix, sizeof prefix, "s%d-%02d", n_replicas, round);
	ITEST_CHECK(world_add_node(&W, node, 40960, 1) == 0, "add node");
	make_jobs(jobs, n_jobs, prefix, limit, node, n_replicas, 0);
	snapshot(&before, n_replicas);
	apiserver_double_set_lease_delay_ms(W.api, lease_delay_ms);
	run_jobs(jobs, n_jobs, 0, -1, 0);
	apiserver_double_set_lease_delay_ms(W.api, 0);
	snapshot(&after, n_replicas);

	for (int i = 0; i < n_jobs; i++) {
		const struct job *j = &jobs[i];
		if (j->code != 200 || !j->a.well_formed || strcmp(j->a.uid, j->uid))
			dump_replica_logs();
		ITEST_CHECK(j->code == 200, "%s via replica %d: HTTP %ld (%s)", j->uid, j->replica,
		            j->code, j->error);
		ITEST_CHECK(j->a.well_formed && !strcmp(j->a.uid, j->uid), "%s: bad answer",
		            j->uid);
		if (j->a.allowed) {
			admitted++;
			via[j->replica]++;
		} else if (j->a.code != 403) {
			dump_replica_logs();
			fail_msg("%s via replica %d refused with %d, not as over the limit: %s",
			         j->uid, j->replica, j->a.code, j->a.message);
		}
	}
	if (admitted != fit)
		dump_replica_logs();
	ITEST_CHECK(admitted == fit, "%s: %d x %s admitted through %d replicas, %d fit", node,
	            admitted, limit, n_replicas, fit);

	cJSON *entries = lease_entries(node, NULL, 0);
	ITEST_CHECK(entries != NULL, "no Lease %s/%s", NS_LEASES, node);
	int n_entries = check_admitted_in_lease(jobs, n_jobs, entries, node, bytes);
	ITEST_CHECK(n_entries == admitted, "Lease %s: %d entries, %d admitted", node, n_entries,
	            admitted);
	ITEST_CHECK(entries_bytes(entries) <= LIMIT, "Lease %s: %llu bytes, over the limit", node,
	            entries_bytes(entries));
	cJSON_Delete(entries);

	/* Cost: at most one Lease write per admitted placement (the first one creates it;
	 * placements queued on one replica share a write: group commit). */
	ITEST_CHECK(after.created - before.created == 1, "%s: %lu Leases created", node,
	            after.created - before.created);
	ITEST_CHECK(after.updated - before.updated <= (unsigned long)admitted - 1,
	            "%s: %lu Lease updates for %d admitted", node, after.updated - before.updated,
	            admitted);
	for (int i = 0; i < n_replicas; i++) {
		double ok = after.writes_ok[i] - before.writes_ok[i];
		ITEST_CHECK(ok <= via[i] && (via[i] == 0 || ok >= 1),
		            "replica %d: writes_total{result=\"ok\"} +%.0f, %d admitted through it",
		            i, ok, via[i]);
		conflict_sum += after.writes_conflict[i] - before.writes_conflict[i];
	}
	/* Every 409 the double answered was a conflict some replica counted. */
	ITEST_CHECK(conflict_sum == (double)(after.conflicts - before.conflicts),
	            "%s: replicas counted %.0f conflicts, the double answered %lu", node,
	            conflict_sum, after.conflicts - before.conflicts);
	print_message("%s: %d/%d admitted (%s) in %lu writes, %lu conflicts, lease delay %u ms\n",
	              node, admitted, n_jobs, limit,
	              after.created - before.created + after.updated - before.updated,
	              after.conflicts - before.conflicts, lease_delay_ms);
	free_jobs(jobs, n_jobs);
}

static void storms(int n_replicas)
{
	use_replicas(n_replicas);
	for (int round = 0; round < ROUNDS; round++) {
		unsigned delay = round % 3 == 2 ? 3 : 0;
		if (round % 2 == 0)
			storm_round(n_replicas, round, 60, "1Gi", GIB, 36, delay);
		else
			storm_round(n_replicas, round, 30, "5Gi", 5 * GIB, 7, delay);
	}
}

static void test_two_replicas_exactly_what_fits(void **state)
{
	(void)state;
	storms(2);
}

static void test_three_replicas_exactly_what_fits(void **state)
{
	(void)state;
	storms(3);
}

/* ---- 2. what writes nothing ---- */

static void test_dry_run_and_denial_write_nothing(void **state)
{
	static struct job jobs[MAX_JOBS];
	const char *node = "shared-quiet";
	unsigned long writes;
	char rv[32], rv2[32];
	cJSON *entries;
	(void)state;
	use_replicas(3);
	ITEST_CHECK(world_add_node(&W, node, 40960, 1) == 0, "add node");

	/* Dry runs on a node without a Lease: allowed (they fit), no Lease made. */
	writes = apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_WRITE);
	make_jobs(jobs, 12, "dry0", "1Gi", node, 3, 1);
	run_jobs(jobs, 12, 0, -1, 0);
	for (int i = 0; i < 12; i++)
		ITEST_CHECK(jobs[i].code == 200 && jobs[i].a.allowed,
		            "dry run %s: HTTP %ld allowed %d", jobs[i].uid, jobs[i].code,
		            jobs[i].a.allowed);
	free_jobs(jobs, 12);
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_WRITE) == writes,
	            "dry runs wrote %lu times",
	            apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_WRITE) - writes);
	ITEST_CHECK(apiserver_double_get_lease(W.api, NS_LEASES, node) == NULL,
	            "a dry run created the Lease");

	/* Fill the node: 30Gi admitted (one write). */
	make_jobs(jobs, 1, "fill", "30Gi", node, 1, 0);
	run_jobs(jobs, 1, 0, -1, 0);
	ITEST_CHECK(jobs[0].code == 200 && jobs[0].a.allowed, "30Gi not admitted: %s",
	            jobs[0].a.message);
	free_jobs(jobs, 1);
	entries = lease_entries(node, rv, sizeof rv);
	ITEST_CHECK(entries && cJSON_GetArraySize(entries) == 1, "Lease %s: not one entry", node);
	cJSON_Delete(entries);

	/* Dry runs that fit (6Gi) and do not (7Gi), denials (7Gi), through every replica:
	 * answered as usual, nothing written. */
	writes = apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_WRITE);
	make_jobs(jobs, 6, "dry6", "6Gi", node, 3, 1);
	run_jobs(jobs, 6, 0, -1, 0);
	for (int i = 0; i < 6; i++)
		ITEST_CHECK(jobs[i].code == 200 && jobs[i].a.allowed,
		            "dry run %s (6Gi): allowed %d: %s", jobs[i].uid, jobs[i].a.allowed,
		            jobs[i].a.message);
	free_jobs(jobs, 6);
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_WRITE) == writes,
	            "dry runs wrote %lu times",
	            apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_WRITE) - writes);
	make_jobs(jobs, 6, "dry7", "7Gi", node, 3, 1);
	run_jobs(jobs, 6, 0, -1, 0);
	for (int i = 0; i < 6; i++)
		ITEST_CHECK(
		    jobs[i].code == 200 && !jobs[i].a.allowed && jobs[i].a.code == 403,
		    "dry run %s (7Gi) via replica %d: allowed %d code %d, the real one would "
		    "be refused (30Gi of 36Gi reserved in the Lease)",
		    jobs[i].uid, jobs[i].replica, jobs[i].a.allowed, jobs[i].a.code);
	free_jobs(jobs, 6);
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_WRITE) == writes,
	            "dry runs wrote %lu times",
	            apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_WRITE) - writes);
	/* A replica that has not read this Lease yet tries its write (409) before it denies:
	 * what must not happen is a write that succeeds. */
	struct snapshot s0, s1;
	snapshot(&s0, 3);
	make_jobs(jobs, 12, "deny7", "7Gi", node, 3, 0);
	run_jobs(jobs, 12, 0, -1, 0);
	snapshot(&s1, 3);
	for (int i = 0; i < 12; i++)
		ITEST_CHECK(jobs[i].code == 200 && !jobs[i].a.allowed && jobs[i].a.code == 403,
		            "%s (7Gi): allowed %d code %d: %s", jobs[i].uid, jobs[i].a.allowed,
		            jobs[i].a.code, jobs[i].a.message);
	free_jobs(jobs, 12);
	ITEST_CHECK(s1.created == s0.created && s1.updated == s0.updated,
	            "denials wrote: %lu created, %lu updated", s1.created - s0.created,
	            s1.updated - s0.updated);
	for (int i = 0; i < 3; i++)
		ITEST_CHECK(s1.writes_ok[i] == s0.writes_ok[i],
		            "replica %d: %.0f writes for denials", i,
		            s1.writes_ok[i] - s0.writes_ok[i]);
	print_message("%s: 12 denials, %lu write attempts refused (409)\n", node,
	              s1.conflicts - s0.conflicts);
	entries = lease_entries(node, rv2, sizeof rv2);
	ITEST_CHECK(!strcmp(rv, rv2), "Lease %s changed: resourceVersion %s -> %s", node, rv, rv2);
	ITEST_CHECK(entries && cJSON_GetArraySize(entries) == 1, "Lease %s: not one entry", node);
	cJSON_Delete(entries);
}

/* ---- 3. a replica killed in the middle of a storm ---- */

static void test_replica_killed_mid_storm(void **state)
{
	static struct job jobs[MAX_JOBS];
	const char *node = "shared-kill";
	int admitted = 0, lost = 0, entries_n, left;
	cJSON *entries;
	(void)state;
	use_replicas(3);
	ITEST_CHECK(world_add_node(&W, node, 40960, 1) == 0, "add node");
	/* 45 x 1Gi, 15 through each replica: over the limit, and with replica 1 cut early, room
	 * left for the survivors to prove they count its entries. */
	make_jobs(jobs, KILL_JOBS, "kill", "1Gi", node, 3, 0);
	/* Slowed writes and jittered senders: the storm lasts long enough to be cut. */
	apiserver_double_set_lease_delay_ms(W.api, 5);
	run_jobs(jobs, KILL_JOBS, 20, 1, 3);
	apiserver_double_set_lease_delay_ms(W.api, 0);
	for (int i = 0; i < KILL_JOBS; i++) {
		const struct job *j = &jobs[i];
		if (j->code == 200 && j->a.allowed)
			admitted++;
		else if (j->code != 200)
			lost++;
		/* Only the killed replica may fail to answer. */
		ITEST_CHECK(j->code == 200 || j->replica == 1, "%s via replica %d: HTTP %ld (%s)",
		            j->uid, j->replica, j->code, j->error);
	}
	ITEST_CHECK(lost > 0, "the kill came after the storm: no placement was cut");
	entries = lease_entries(node, NULL, 0);
	ITEST_CHECK(entries != NULL, "no Lease %s", node);
	entries_n = check_admitted_in_lease(jobs, KILL_JOBS, entries, node, GIB);
	ITEST_CHECK(entries_bytes(entries) <= LIMIT, "Lease %s: %llu bytes, over the limit", node,
	            entries_bytes(entries));
	ITEST_CHECK(admitted <= 36, "%d x 1Gi admitted on a 36Gi node", admitted);
	/* Entries beyond the answered admissions: written by the killed replica before it could
	 * answer; at most one per request it had in flight. */
	ITEST_CHECK(entries_n - admitted <= lost, "Lease %s: %d entries, %d admitted, %d cut", node,
	            entries_n, admitted, lost);
	print_message("%s: %d admitted, %d cut by the kill, %d entries\n", node, admitted, lost,
	              entries_n);
	cJSON_Delete(entries);
	free_jobs(jobs, KILL_JOBS);

	/* The survivors honour every entry, the dead replica's too: exactly what is left fits. */
	left = 36 - entries_n;
	make_jobs(jobs, 40, "after", "1Gi", node, 3, 0);
	for (int i = 0; i < 40; i++)
		jobs[i].replica = i % 2 == 0 ? 0 : 2;
	run_jobs(jobs, 40, 0, -1, 0);
	admitted = 0;
	for (int i = 0; i < 40; i++) {
		ITEST_CHECK(jobs[i].code == 200, "%s: HTTP %ld (%s)", jobs[i].uid, jobs[i].code,
		            jobs[i].error);
		admitted += jobs[i].a.allowed;
	}
	ITEST_CHECK(admitted == left, "after the kill: %d admitted, %d left", admitted, left);
	print_message("%s: after the kill %d more admitted, as many as were left\n", node,
	              admitted);
	entries = lease_entries(node, NULL, 0);
	ITEST_CHECK(entries_bytes(entries) == 36 * GIB, "Lease %s: %llu bytes after, limit %llu",
	            node, entries_bytes(entries), LIMIT);
	cJSON_Delete(entries);
	free_jobs(jobs, 40);
	start_replica(1);
}

/* ---- 4. a pod deleted before it shows on its node ---- */

static void test_deleted_pod_stops_counting(void **state)
{
	static struct job jobs[MAX_JOBS];
	const char *node = "shared-deleted";
	double deleted_before[2];
	cJSON *entries;
	(void)state;
	use_replicas(2);
	ITEST_CHECK(world_add_node(&W, node, 40960, 1) == 0, "add node");
	/* Replica 0 admits a 30Gi Binding; the pod never shows on the node. */
	make_jobs(jobs, 1, "gone", "30Gi", node, 1, 0);
	ITEST_CHECK(jobs[0].binding, "job 0 is not a Binding");
	run_jobs(jobs, 1, 0, -1, 0);
	ITEST_CHECK(jobs[0].code == 200 && jobs[0].a.allowed, "30Gi not admitted: %s",
	            jobs[0].a.message);
	for (int i = 0; i < 2; i++)
		deleted_before[i] = replica_metric(i, "gpu_memory_guard_cache_events_total",
		                                   "resource=\"pods\",type=\"deleted\"");
	/* It is deleted: every replica's watch cache sees the DELETE. */
	ITEST_CHECK(apiserver_double_delete_pod(W.api, "inference", jobs[0].name) == 0,
	            "delete pod %s", jobs[0].name);
	free_jobs(jobs, 1);
	for (int i = 0; i < 2; i++) {
		double until = harness_now() + 10;
		while (replica_metric(i, "gpu_memory_guard_cache_events_total",
		                      "resource=\"pods\",type=\"deleted\"") <= deleted_before[i] &&
		       harness_now() < until)
			usleep(20000);
		ITEST_CHECK(replica_metric(i, "gpu_memory_guard_cache_events_total",
		                           "resource=\"pods\",type=\"deleted\"") >
		                deleted_before[i],
		            "replica %d did not see the DELETE in 10 s", i);
	}
	/* Replica 1 then admits 30Gi at once (before the TTL, 60 s): the deleted pod's entry no
	 * longer counts, and its write drops it from the Lease. */
	make_jobs(jobs, 1, "after-gone", "30Gi", node, 1, 0);
	jobs[0].replica = 1;
	run_jobs(jobs, 1, 0, -1, 0);
	ITEST_CHECK(jobs[0].code == 200 && jobs[0].a.allowed,
	            "30Gi refused while the deleted pod's entry should be gone: %s",
	            jobs[0].a.message);
	free_jobs(jobs, 1);
	entries = lease_entries(node, NULL, 0);
	ITEST_CHECK(entries && cJSON_GetArraySize(entries) == 1 &&
	                entries_bytes(entries) == 30 * GIB,
	            "Lease %s: %d entries, %llu bytes (want the new pod's alone)", node,
	            entries ? cJSON_GetArraySize(entries) : -1, entries_bytes(entries));
	cJSON_Delete(entries);
}

/* ---- 5. the Lease deleted before an update ---- */

static double replica_errors(int i)
{
	return replica_metric(i, "gpu_memory_guard_reservation_writes_total", "result=\"error\"");
}

/* One placement of limit through replica 0 (a Binding), admitted; fails the test otherwise. */
static void admit_one(struct job *jobs, const char *prefix, const char *limit, const char *node)
{
	make_jobs(jobs, 1, prefix, limit, node, 1, 0);
	run_jobs(jobs, 1, 0, -1, 0);
	if (jobs[0].code != 200 || !jobs[0].a.allowed)
		dump_replica_logs();
	ITEST_CHECK(jobs[0].code == 200 && jobs[0].a.allowed, "%s (%s) on %s: HTTP %ld, %s",
	            jobs[0].name, limit, node, jobs[0].code,
	            jobs[0].code == 200 ? jobs[0].a.message : jobs[0].error);
}

static void test_update_of_deleted_lease(void **state)
{
	static struct job a[1], b[1], c[1];
	const char *node = "shared-lease-gone";
	struct snapshot before, after;
	cJSON *entries;
	(void)state;
	use_replicas(2);
	ITEST_CHECK(world_add_node(&W, node, 40960, 1) == 0, "add node");
	admit_one(a, "lg-a", "20Gi", node); /* replica 0 creates the Lease, knows its version */

	/* Replica 0's next placement updates its copy: the double deletes the Lease first and
	 * answers the PUT 404. Decided again on a fresh read (none), the Lease is created. */
	unsigned long gone = apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_PUT_GONE);
	unsigned long gets = apiserver_double_count(W.api, APISERVER_DOUBLE_GET_LEASE);
	double errors = replica_errors(0);
	snapshot(&before, 2);
	apiserver_double_delete_lease_before_put(W.api, 1);
	admit_one(b, "lg-b", "10Gi", node);
	apiserver_double_delete_lease_before_put(W.api, 0);
	snapshot(&after, 2);
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_PUT_GONE) == gone + 1,
	            "the update was not sent, or not answered 404 (%lu PUTs answered 404)",
	            apiserver_double_count(W.api, APISERVER_DOUBLE_LEASE_PUT_GONE) - gone);
	ITEST_CHECK(after.created - before.created == 1, "%lu Leases created after the 404",
	            after.created - before.created);
	ITEST_CHECK(after.writes_ok[0] - before.writes_ok[0] == 1,
	            "replica 0: writes_total{result=\"ok\"} +%.0f",
	            after.writes_ok[0] - before.writes_ok[0]);
	/* Not a write error, and decided again on a read. (With a 404 taken as an error the
	 * first decision refuses, APIServerUnavailable; decide_placement then decides once more
	 * from the cache and that PUT of the now absent Lease creates it: admitted too, but
	 * with a write error and no read.) */
	ITEST_CHECK(replica_errors(0) == errors, "replica 0 counted the 404 as a write error");
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_GET_LEASE) == gets + 1,
	            "%lu Lease reads after the 404 (want 1: decided again on a fresh read)",
	            apiserver_double_count(W.api, APISERVER_DOUBLE_GET_LEASE) - gets);
	entries = lease_entries(node, NULL, 0);
	ITEST_CHECK(entries && cJSON_GetArraySize(entries) == 1 && entry_of(entries, b[0].name) &&
	                entries_bytes(entries) == 10 * GIB,
	            "Lease %s: %d entries, %llu bytes (want %s's 10Gi alone)", node,
	            entries ? cJSON_GetArraySize(entries) : -1, entries_bytes(entries), b[0].name);
	check_admitted_in_lease(b, 1, entries, node, 10 * GIB);
	cJSON_Delete(entries);

	/* As kube-apiserver answers it: the Lease deleted, the PUT of the absent Lease creates it
	 * (201) from replica 0's copy plus the new entry. */
	ITEST_CHECK(apiserver_double_delete_lease(W.api, NS_LEASES, node) == 0, "delete Lease");
	snapshot(&before, 2);
	admit_one(c, "lg-c", "5Gi", node);
	snapshot(&after, 2);
	ITEST_CHECK(after.created - before.created == 1 && after.updated == before.updated,
	            "PUT of the absent Lease: %lu created, %lu updated",
	            after.created - before.created, after.updated - before.updated);
	entries = lease_entries(node, NULL, 0);
	ITEST_CHECK(entries && cJSON_GetArraySize(entries) == 2 && entry_of(entries, b[0].name) &&
	                entry_of(entries, c[0].name) && entries_bytes(entries) == 15 * GIB,
	            "Lease %s: %d entries, %llu bytes (want %s and %s, 15Gi)", node,
	            entries ? cJSON_GetArraySize(entries) : -1, entries_bytes(entries), b[0].name,
	            c[0].name);
	cJSON_Delete(entries);
	free_jobs(a, 1);
	free_jobs(b, 1);
	free_jobs(c, 1);
}

/* ---- 6. a pod Pending for longer than the settle grace, then bound ---- */

static void test_long_pending_pod_entry_kept_after_binding(void **state)
{
	const char *node = "shared-settle";
	struct review_answer ans;
	char *body;
	cJSON *entries;
	(void)state;
	use_replicas(2);
	ITEST_CHECK(world_add_node(&W, node, 40960, 1) == 0, "add node");
	/* LATE_POD has been Pending, in replica 0's cache, for more than 30 s. */
	double wait = synced_at[0] + 31 - harness_now();
	if (wait > 0) {
		print_message("waiting %.1f s: %s Pending for 31 s in replica 0's cache\n", wait,
		              LATE_POD);
		usleep((useconds_t)(wait * 1e6));
	}
	itest_world = &R[0];
	body = harness_binding_review("late-bind", LATE_POD, node);
	itest_review(&R[0], body, "late-bind", 1, &ans);
	free(body);

	/* The Binding happens: replica 0's cache sees the pod bound to the node (MODIFIED). */
	double modified = replica_metric(0, "gpu_memory_guard_cache_events_total",
	                                 "resource=\"pods\",type=\"modified\"");
	ITEST_CHECK(apiserver_double_bind(W.api, "inference", LATE_POD, node) == 0, "bind");
	double until = harness_now() + 10;
	while (replica_metric(0, "gpu_memory_guard_cache_events_total",
	                      "resource=\"pods\",type=\"modified\"") <= modified &&
	       harness_now() < until)
		usleep(20000);
	ITEST_CHECK(replica_metric(0, "gpu_memory_guard_cache_events_total",
	                           "resource=\"pods\",type=\"modified\"") > modified,
	            "replica 0 did not see the Binding in 10 s");

	/* The next write (a 5Gi CREATE) prunes entries whose pods the cache has shown bound for
	 * the grace: LATE_POD was shown bound a moment ago, so its entry stays (other replicas'
	 * caches may not show it yet). */
	body = harness_pod_review("late-next", "late-next", "5Gi", node, 0);
	itest_review(&R[0], body, "late-next", 1, &ans);
	free(body);
	itest_world = &W;
	entries = lease_entries(node, NULL, 0);
	ITEST_CHECK(entries && cJSON_GetArraySize(entries) == 2 && entry_of(entries, LATE_POD) &&
	                entry_of(entries, "late-next") && entries_bytes(entries) == 25 * GIB,
	            "Lease %s: %d entries, %llu bytes (want %s's 20Gi and late-next's 5Gi: the "
	            "entry of a pod bound a moment ago was pruned)",
	            node, entries ? cJSON_GetArraySize(entries) : -1, entries_bytes(entries),
	            LATE_POD);
	cJSON_Delete(entries);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_replicas_exactly_what_fits),
	    cmocka_unit_test(test_three_replicas_exactly_what_fits),
	    cmocka_unit_test(test_dry_run_and_denial_write_nothing),
	    cmocka_unit_test(test_replica_killed_mid_storm),
	    cmocka_unit_test(test_deleted_pod_stops_counting),
	    cmocka_unit_test(test_update_of_deleted_lease),
	    cmocka_unit_test(test_long_pending_pod_entry_kept_after_binding),
	};
	harness_init(argc, argv);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
