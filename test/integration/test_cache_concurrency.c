/*
 * Concurrent placements onto one node through the WATCH CACHE (--cache watch): the real binary
 * against the API server TEST DOUBLE.
 *
 *   1. 16 threads send 40 placements of 5Gi (pod CREATEs with spec.nodeName and pods/binding
 *      reviews mixed) to one node at once: exactly what fits (14) is admitted.
 *   2. The same while the watches are cut again and again from another thread and every
 *      admitted pod is persisted in the double (bound, as the API server would) so that
 *      reservations settle: never more than the limit in total, and after the storm the node
 *      still takes exactly what is left.
 *   3. A StatefulSet-style pod deleted and recreated under the same name with a new uid while
 *      its Binding arrives (watches being cut meanwhile): what is counted on the node is never
 *      below what is really there.
 *
 * Results are read from the answers and the double's state, never from logs; no timing
 * assertions (deadlines of several seconds for polls only).
 *
 * Nodes are 81559 MiB x 1 GPU at threshold 0.9: a limit of 76,968,728,985 bytes (71.68 GiB).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "itest.h"

#define GIB       (1024.0 * 1024.0 * 1024.0)
#define LIMIT     (81559.0 * 1024.0 * 1024.0 * 0.9)
#define N_THREADS 16
#define N_JOBS    40
#define FIT       ((int)(LIMIT / (5 * GIB))) /* 14 */

static struct world W;

/* Pods of the double bound to node (a LIST, as the API server answers it), or -1. */
static int double_pods_on(const char *node)
{
	char url[256];
	struct http_req rq = {0};
	struct http_resp rs;
	int n = -1;

	snprintf(url, sizeof url,
	         "https://127.0.0.1:%u/api/v1/pods?fieldSelector=spec.nodeName%%3D%s",
	         apiserver_double_port(W.api), node);
	rq.url = url;
	rq.ca_file = W.ca_file;
	rq.bearer = HARNESS_TOKEN;
	if (http_do(NULL, &rq, &rs) == 0 && rs.code == 200) {
		cJSON *doc = cJSON_Parse(rs.body);
		cJSON *items = cJSON_GetObjectItemCaseSensitive(doc, "items");
		if (cJSON_IsArray(items))
			n = cJSON_GetArraySize(items);
		cJSON_Delete(doc);
	}
	http_resp_free(&rs);
	return n;
}

/* ---- many placements at once ---- */

struct job {
	char uid[64];     /* request.uid */
	char name[64];    /* pod name (namespace inference) */
	char pod_uid[96]; /* the pod's metadata.uid */
	int binding;      /* 1: pods/binding review of an existing unbound pod; 0: pod CREATE */
	char *body;
	/* results */
	long code;
	char error[256];
	struct review_answer a;
};

struct run {
	struct job *jobs;
	int n_jobs;
	const char *node;
	int persist;   /* persist every admitted pod in the double, bound to node */
	int jitter_ms; /* up to this long between a thread's jobs */
	atomic_int next;
	atomic_int persist_failures;
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
	struct review_client c;

	review_client_open(&c, &W, 30000);
	pthread_barrier_wait(&r->start);
	for (;;) {
		int i = atomic_fetch_add(&r->next, 1);
		if (i >= r->n_jobs)
			break;
		struct job *j = &r->jobs[i];
		review_client_send(&c, j->body, &j->code, j->error, sizeof j->error, &j->a);
		if (r->persist && j->code == 200 && j->a.allowed) {
			/* What the API server does after the admission: the pod is persisted. */
			int rc =
			    j->binding
			        ? apiserver_double_bind(W.api, "inference", j->name, r->node)
			        : itest_put_pod(&W, j->name, j->pod_uid, "5Gi", r->node, "Running");
			if (rc)
				atomic_fetch_add(&r->persist_failures, 1);
		}
		if (r->jitter_ms)
			usleep((rand_r(&wk->seed) % (unsigned)r->jitter_ms) * 1000);
	}
	review_client_close(&c);
	return NULL;
}

/* Jobs prefix-00 .. : even ones Bindings of the pods prefix-b-NN (which must exist, unbound,
 * made by world_add_pod), odd ones CREATEs of prefix-c-NN on node. */
static void make_jobs(struct job *jobs, int n, const char *prefix, const char *node)
{
	memset(jobs, 0, sizeof *jobs * (size_t)n);
	for (int i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		snprintf(j->uid, sizeof j->uid, "%s-%02d", prefix, i);
		j->binding = i % 2 == 0;
		snprintf(j->name, sizeof j->name, "%s-%c-%02d", prefix, j->binding ? 'b' : 'c', i);
		harness_pod_uid("inference", j->name, j->pod_uid, sizeof j->pod_uid);
		if (j->binding)
			j->body = harness_binding_review(j->uid, j->name, node);
		else
			j->body = itest_with_object_uid(
			    harness_pod_review(j->uid, j->name, "5Gi", node, 0), j->pod_uid);
		ITEST_CHECK(j->body != NULL, "review %d", i);
	}
}

static int add_binding_pods(const char *prefix, int n)
{
	char name[64];
	for (int i = 0; i < n; i += 2) {
		snprintf(name, sizeof name, "%s-b-%02d", prefix, i);
		if (world_add_pod(&W, "inference", name, "5Gi", NULL))
			return -1;
	}
	return 0;
}

/* Run every job from N_THREADS threads released together; check every answer; return how
 * many were admitted. */
static int run_jobs(struct job *jobs, int n, const char *node, int persist, int jitter_ms)
{
	static struct run r;
	pthread_t t[N_THREADS];
	struct worker wk[N_THREADS];
	int admitted = 0;

	memset(&r, 0, sizeof r);
	r.jobs = jobs;
	r.n_jobs = n;
	r.node = node;
	r.persist = persist;
	r.jitter_ms = jitter_ms;
	atomic_init(&r.next, 0);
	atomic_init(&r.persist_failures, 0);
	pthread_barrier_init(&r.start, NULL, N_THREADS);
	for (int i = 0; i < N_THREADS; i++) {
		wk[i].run = &r;
		wk[i].seed = 1234u + (unsigned)i;
		ITEST_CHECK(pthread_create(&t[i], NULL, worker_main, &wk[i]) == 0,
		            "pthread_create");
	}
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&r.start);
	for (int i = 0; i < n; i++) {
		ITEST_CHECK(jobs[i].code == 200, "job %s: HTTP %ld (%s)", jobs[i].uid, jobs[i].code,
		            jobs[i].error);
		ITEST_CHECK(jobs[i].a.well_formed && !strcmp(jobs[i].a.uid, jobs[i].uid),
		            "job %s: bad answer (uid \"%s\")", jobs[i].uid, jobs[i].a.uid);
		if (jobs[i].a.allowed)
			admitted++;
	}
	ITEST_CHECK(atomic_load(&r.persist_failures) == 0, "%d admitted pods not persisted",
	            atomic_load(&r.persist_failures));
	return admitted;
}

static void free_jobs(struct job *jobs, int n)
{
	for (int i = 0; i < n; i++)
		free(jobs[i].body);
}

/* ---- a thread that cuts the watches again and again ---- */

struct cutter {
	pthread_t t;
	atomic_int stop;
	atomic_int cuts;
};

static void *cutter_main(void *arg)
{
	struct cutter *c = arg;
	unsigned seed = 42;
	while (!atomic_load(&c->stop)) {
		apiserver_double_cut_watches(W.api);
		atomic_fetch_add(&c->cuts, 1);
		usleep((30 + rand_r(&seed) % 250) * 1000);
	}
	return NULL;
}

static void cutter_start(struct cutter *c)
{
	atomic_init(&c->stop, 0);
	atomic_init(&c->cuts, 0);
	ITEST_CHECK(pthread_create(&c->t, NULL, cutter_main, c) == 0, "pthread_create");
}

static void cutter_stop(struct cutter *c)
{
	atomic_store(&c->stop, 1);
	pthread_join(c->t, NULL);
}

/* ---- set-up ---- */

static int group_setup(void **state)
{
	/* Reservations of pods never persisted (scenario 1) must not be looked up and dropped
	 * while the binary runs: a grace and a TTL longer than the whole binary. */
	static const char *const extra[] = {"--threshold",
	                                    "0.9",
	                                    "--reservation-grace",
	                                    "120s",
	                                    "--reservation-ttl",
	                                    "240s",
	                                    "--cache-max-staleness",
	                                    "1s",
	                                    "--api-timeout",
	                                    "5s",
	                                    NULL};
	(void)state;
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	if (world_add_node(&W, "cc-node-0", 81559, 1) ||
	    world_add_node(&W, "cc-node-1", 81559, 1) ||
	    world_add_node(&W, "cc-node-2", 81559, 1) || add_binding_pods("one", N_JOBS) ||
	    add_binding_pods("cut", N_JOBS) ||
	    world_add_pod(&W, "team-f", "filler", "30Gi", "cc-node-2"))
		return -1;
	if (world_start_gmg(&W, extra, 30000))
		return -1;
	itest_wait_synced(&W, 45000);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	world_free(&W);
	return 0;
}

/* 1. 40 placements of 5Gi at once onto one node the cache knows: exactly 14 admitted. */
static void test_parallel_mix_exactly_what_fits(void **state)
{
	static struct job jobs[N_JOBS];

	(void)state;
	itest_wait_synced(&W, 45000);
	make_jobs(jobs, N_JOBS, "one", "cc-node-0");
	int admitted = run_jobs(jobs, N_JOBS, "cc-node-0", 0, 0);
	free_jobs(jobs, N_JOBS);
	ITEST_CHECK(admitted * 5 * GIB <= LIMIT,
	            "admitted %d x 5Gi = %.2f GiB over the %.2f GiB limit", admitted,
	            admitted * 5.0, LIMIT / GIB);
	ITEST_CHECK(admitted == FIT, "admitted %d placements of 5Gi, exactly %d fit", admitted,
	            FIT);
}

/* 2. The same while the watches are cut repeatedly and admitted pods get persisted (bound):
 * never more than the limit; afterwards the node takes exactly what is left. */
static void test_parallel_mix_with_watch_cuts_and_binds(void **state)
{
	static struct job jobs[N_JOBS];
	struct cutter c;
	struct review_answer a;

	(void)state;
	itest_wait_synced(&W, 45000);
	make_jobs(jobs, N_JOBS, "cut", "cc-node-1");
	cutter_start(&c);
	int admitted = run_jobs(jobs, N_JOBS, "cc-node-1", 1, 150);
	cutter_stop(&c);
	free_jobs(jobs, N_JOBS);
	ITEST_CHECK(atomic_load(&c.cuts) > 1, "the watches were cut %d times",
	            atomic_load(&c.cuts));
	ITEST_CHECK(admitted * 5 * GIB <= LIMIT,
	            "admitted %d x 5Gi = %.2f GiB over the %.2f GiB limit (%d watch cuts)",
	            admitted, admitted * 5.0, LIMIT / GIB, atomic_load(&c.cuts));
	int visible = double_pods_on("cc-node-1");
	ITEST_CHECK(visible == admitted, "the double has %d pods on the node, %d were admitted",
	            visible, admitted);
	/* Settled: top the node up one 5Gi pod at a time (persisted) until denied. The total
	 * never passes the limit, and what is left is taken (no reservation counted twice). */
	itest_wait_synced(&W, 45000);
	int total = admitted;
	for (int i = 0; i < N_JOBS; i++) {
		char uid[64], name[64], pod_uid[HARNESS_UID_MAX];
		snprintf(uid, sizeof uid, "cut-top-%02d", i);
		snprintf(name, sizeof name, "cut-top-%02d", i);
		harness_pod_uid("inference", name, pod_uid, sizeof pod_uid);
		char *body = itest_with_object_uid(
		    harness_pod_review(uid, name, "5Gi", "cc-node-1", 0), pod_uid);
		itest_review(&W, body, uid, -1, &a);
		free(body);
		if (!a.allowed)
			break;
		ITEST_CHECK(itest_put_pod(&W, name, pod_uid, "5Gi", "cc-node-1", "Running") == 0,
		            "put");
		total++;
		ITEST_CHECK(total * 5 * GIB <= LIMIT,
		            "%d x 5Gi admitted on the node (%d in the storm): over the limit",
		            total, admitted);
	}
	print_message("storm: %d admitted during %d watch cuts, %d more on top\n", admitted,
	              atomic_load(&c.cuts), total - admitted);
	ITEST_CHECK(total == FIT, "%d x 5Gi on the node after topping up (%d in the storm), %d fit",
	            total, admitted, FIT);
	visible = double_pods_on("cc-node-1");
	ITEST_CHECK(visible == total && visible * 5 * GIB <= LIMIT,
	            "the double has %d pods of 5Gi on the node", visible);
}

/* A dry-run 2Gi placement on cc-node-2 must be denied: what is really there (filler 30Gi +
 * sts-0 40Gi = 70Gi) leaves 1.68Gi. */
static void probe_denied(const char *when, int gen)
{
	static int seq;
	struct review_answer a;
	char uid[64], name[64], pod_uid[HARNESS_UID_MAX];

	snprintf(uid, sizeof uid, "sts-probe-%d", seq);
	snprintf(name, sizeof name, "sts-probe-%d", seq++);
	harness_pod_uid("inference", name, pod_uid, sizeof pod_uid);
	char *body =
	    itest_with_object_uid(harness_pod_review(uid, name, "2Gi", "cc-node-2", 1), pod_uid);
	itest_review(&W, body, uid, -1, &a);
	free(body);
	ITEST_CHECK(!a.allowed,
	            "generation %d, %s: 2Gi admitted on a node holding 70Gi of its 71.68Gi "
	            "(sts-0 not counted?)",
	            gen, when);
}

/* 3. StatefulSet style: sts-0 (40Gi) deleted and recreated with a new uid, its Binding sent at
 * once (denied until the old pod stops counting, then admitted), the watches cut meanwhile;
 * the old pod is alternately bound (visible) or only admitted (reserved) when deleted. What
 * the node counts never drops below filler + sts-0. */
static void test_statefulset_recreate_while_binding(void **state)
{
	enum { GENERATIONS = 8 };
	struct cutter c;
	struct review_answer a;
	char pod_uid[64], uid[64];
	int attempt = 0;

	(void)state;
	itest_wait_synced(&W, 45000);
	cutter_start(&c);
	for (int gen = 0; gen < GENERATIONS; gen++) {
		/* The StatefulSet controller: the old sts-0 is gone, a new one (new uid) exists. */
		if (gen > 0)
			ITEST_CHECK(apiserver_double_delete_pod(W.api, "inference", "sts-0") == 0,
			            "delete");
		snprintf(pod_uid, sizeof pod_uid, "uid-sts-0-gen-%d", gen);
		ITEST_CHECK(itest_put_pod(&W, "sts-0", pod_uid, "40Gi", NULL, "Pending") == 0,
		            "put");
		/* The scheduler binds it: denied while the old pod still counts, then admitted. */
		double end = harness_now() + 20;
		for (;;) {
			snprintf(uid, sizeof uid, "sts-bind-%d", attempt++);
			char *body = itest_with_object_uid(
			    harness_binding_review(uid, "sts-0", "cc-node-2"), pod_uid);
			itest_review(&W, body, uid, -1, &a);
			free(body);
			if (a.allowed)
				break;
			ITEST_CHECK(harness_now() < end,
			            "generation %d: the Binding of the new sts-0 still denied "
			            "after 20 s: %s",
			            gen, a.message);
			usleep(50 * 1000);
		}
		for (int k = 0; k < 4; k++) {
			probe_denied("admitted, not bound", gen);
			usleep(40 * 1000);
		}
		if (gen % 2 == 0) { /* the API server persists the binding */
			ITEST_CHECK(
			    apiserver_double_bind(W.api, "inference", "sts-0", "cc-node-2") == 0,
			    "bind");
			ITEST_CHECK(
			    apiserver_double_set_phase(W.api, "inference", "sts-0", "Running") == 0,
			    "phase");
			for (int k = 0; k < 4; k++) {
				probe_denied("bound", gen);
				usleep(40 * 1000);
			}
		}
	}
	cutter_stop(&c);
	print_message("%d generations: %d Binding reviews, %d watch cuts\n", GENERATIONS, attempt,
	              atomic_load(&c.cuts));
	/* Settled, watches healthy: still counted. A watch cut again and again without events
	 * backs off up to INFORMER_BACKOFF_MAX_MS (30 s) before it reopens: wait longer than that
	 * (on a loaded machine the draw and the relist took more than 15 s). */
	itest_wait_synced(&W, 45000);
	for (int k = 0; k < 3; k++)
		probe_denied("after the cuts", GENERATIONS - 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parallel_mix_exactly_what_fits),
	    cmocka_unit_test(test_parallel_mix_with_watch_cuts_and_binds),
	    cmocka_unit_test(test_statefulset_recreate_while_binding),
	};
	harness_init(argc, argv);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
