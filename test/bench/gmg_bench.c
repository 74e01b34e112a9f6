/*
 * gmg-bench: throughput and latency of the real gpu-memory-guard binary, loopback only.
 *
 *   gmg-bench --binary PATH [--clients N] [--requests N] [--duration SECONDS]
 *             [--nodes N] [--pods-per-node N] [--threads N] [--workers N]
 *             [--api-delay-ms N] [--data DIR]
 *
 * Starts the Kubernetes API server TEST DOUBLE (test/integration/apiserver_double.c) with
 * --nodes GPU nodes carrying --pods-per-node declared GPU pods each, starts the binary against
 * it, then drives --clients concurrent keep-alive TLS clients (one thread and one libcurl
 * handle each) sending placement reviews made from the fixtures, half pod CREATEs with
 * spec.nodeName and half pods/binding CREATEs (each a pod GET, a node GET and a paginated pod
 * list at the API server), until --requests reviews were answered or --duration passed.
 *
 * Prints reviews per second, client-side latency percentiles (p50/p99/p999), the server's
 * time per review from its metrics (review_duration_seconds: arrival to answer) and its own
 * time (review_self_duration_seconds: without waiting for a worker, API calls or node locks),
 * and the machine. No assertions: the figures go to docs/benchmark.md.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#ifndef GMG_BENCH_DATA
#define GMG_BENCH_DATA "test/data"
#endif

#define POD_POOL    64 /* distinct pod names per node: keeps the ledger bounded */
#define MAX_CLIENTS 512

struct opts {
	const char *binary;
	const char *data;
	int clients;
	long requests;
	double duration;
	int nodes;
	int pods_per_node;
	const char *threads;
	const char *workers;
	unsigned api_delay_ms;
};

struct shared {
	struct world *w;
	struct opts *o;
	char **bodies; /* prepared reviews, cycled */
	char **uids;
	long n_bodies;
	atomic_long next;
	double deadline;
	double *lat; /* seconds per request index */
	atomic_long ok, allowed, failed;
};

static double now_s(void)
{
	return harness_now();
}

static void *client(void *arg)
{
	struct shared *s = arg;
	CURL_HANDLE *h = http_handle_new();
	struct http_req rq = {0};
	struct http_resp rs;
	struct review_answer a;
	long i;
	rq.url = s->w->url;
	rq.ca_file = s->w->ca_file;
	rq.content_type = "application/json";
	rq.timeout_ms = 30000;
	/* Warm-up: connect and handshake (not measured). */
	rq.body = "{\"request\":{\"uid\":\"warm-up\"}}";
	rq.body_len = strlen(rq.body);
	http_do(h, &rq, &rs);
	http_resp_free(&rs);
	while ((i = atomic_fetch_add(&s->next, 1)) < s->o->requests && now_s() < s->deadline) {
		const char *body = s->bodies[i % s->n_bodies];
		double t0 = now_s();
		rq.body = body;
		rq.body_len = strlen(body);
		int rc = http_do(h, &rq, &rs);
		s->lat[i] = now_s() - t0;
		if (rc == 0 && rs.code == 200 && harness_parse_review(rs.body, &a) == 0 &&
		    !strcmp(a.uid, s->uids[i % s->n_bodies])) {
			atomic_fetch_add(&s->ok, 1);
			if (a.allowed)
				atomic_fetch_add(&s->allowed, 1);
		} else {
			atomic_fetch_add(&s->failed, 1);
			s->lat[i] = -1;
		}
		http_resp_free(&rs);
	}
	http_handle_free(h);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *sorted, long n, double p)
{
	long k;
	if (n == 0)
		return NAN;
	k = (long)ceil(p * (double)n) - 1;
	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return sorted[k];
}

/* Quantile from a Prometheus histogram (cumulative buckets le="..."), linear in a bucket,
 * using the difference between two scrapes. */
static double hist_quantile(const char *before, const char *after, const char *name, double q)
{
	double les[64], cnt[64], total, prev_le = 0, prev_c = 0;
	int n = 0, i;
	char bucket[160];
	const char *p = after;
	snprintf(bucket, sizeof bucket, "%s_bucket", name);
	while ((p = strstr(p, bucket)) && n < 64) {
		const char *le = strstr(p, "le=\"");
		char label[96];
		const char *eol = strchr(p, '\n');
		if (!le || (eol && le > eol))
			break;
		les[n] = strncmp(le + 4, "+Inf", 4) ? strtod(le + 4, NULL) : INFINITY;
		snprintf(label, sizeof label, "le=\"%.*s\"", (int)(strchr(le + 4, '"') - le - 4),
		         le + 4);
		cnt[n] = harness_metric(after, bucket, label, 1) -
		         fmax(0, harness_metric(before, bucket, label, 1));
		n++;
		p = eol ? eol : p + strlen(p);
	}
	if (n == 0)
		return NAN;
	total = cnt[n - 1];
	if (total <= 0)
		return NAN;
	for (i = 0; i < n; i++) {
		if (cnt[i] >= q * total) {
			if (isinf(les[i]))
				return prev_le;
			return prev_le + (les[i] - prev_le) * (q * total - prev_c) /
			                     (cnt[i] - prev_c > 0 ? cnt[i] - prev_c : 1);
		}
		prev_le = les[i];
		prev_c = cnt[i];
	}
	return NAN;
}

static double delta(const char *before, const char *after, const char *name)
{
	return harness_metric(after, name, NULL, 1) -
	       fmax(0, harness_metric(before, name, NULL, 1));
}

static void cpu_model(char *out, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	snprintf(out, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "model name", 10)) {
			char *v = strchr(line, ':');
			if (v) {
				v += 2;
				v[strcspn(v, "\n")] = '\0';
				snprintf(out, len, "%s", v);
			}
			break;
		}
	}
	fclose(f);
}

/* The first three fields of /proc/loadavg: other work on the machine skews the figures. */
static const char *loadavg(void)
{
	static char buf[64];
	FILE *f = fopen("/proc/loadavg", "r");
	snprintf(buf, sizeof buf, "unknown");
	if (f) {
		if (fgets(buf, sizeof buf, f)) {
			char *p = buf;
			int spaces = 0;
			while (*p && spaces < 3)
				spaces += *p++ == ' ';
			if (spaces == 3)
				p[-1] = '\0';
		}
		fclose(f);
	}
	return buf;
}

static int setup_state(struct world *w, const struct opts *o)
{
	char node[64], pod[64];
	int n, p;
	for (n = 0; n < o->nodes; n++) {
		snprintf(node, sizeof node, "bench-node-%d", n);
		/* 8 GPUs of 80 GB: room for every pod of the pool. */
		if (world_add_node(w, node, 81559, 8))
			return -1;
		for (p = 0; p < o->pods_per_node; p++) {
			snprintf(pod, sizeof pod, "running-%d-%d", n, p);
			if (world_add_pod(w, "bench", pod, "1Gi", node))
				return -1;
		}
		for (p = 0; p < POD_POOL; p++) {
			snprintf(pod, sizeof pod, "pending-%d-%d", n, p);
			if (world_add_pod(w, "inference", pod, "1Gi", NULL))
				return -1;
		}
	}
	return 0;
}

static int prepare(struct shared *s)
{
	const struct opts *o = s->o;
	long i;
	char uid[64], name[64], node[64];
	s->n_bodies = (long)o->nodes * POD_POOL * 2;
	s->bodies = calloc((size_t)s->n_bodies, sizeof *s->bodies);
	s->uids = calloc((size_t)s->n_bodies, sizeof *s->uids);
	if (!s->bodies || !s->uids)
		return -1;
	for (i = 0; i < s->n_bodies; i++) {
		int n = (int)(i % o->nodes), p = (int)((i / o->nodes) % POD_POOL);
		snprintf(uid, sizeof uid, "bench-%ld", i);
		snprintf(node, sizeof node, "bench-node-%d", n);
		if (i % 2) {
			snprintf(name, sizeof name, "pending-%d-%d", n, p);
			s->bodies[i] = harness_binding_review(uid, name, node);
		} else {
			snprintf(name, sizeof name, "direct-%d-%d", n, p);
			s->bodies[i] = harness_pod_review(uid, name, "1Gi", node, 0);
		}
		s->uids[i] = strdup(uid);
		if (!s->bodies[i] || !s->uids[i])
			return -1;
	}
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	int i;
	o->data = GMG_BENCH_DATA;
	o->clients = 32;
	o->requests = 20000;
	o->duration = 20;
	o->nodes = 8;
	o->pods_per_node = 40;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			return -1;
		if (!strcmp(a, "--binary"))
			o->binary = v;
		else if (!strcmp(a, "--data"))
			o->data = v;
		else if (!strcmp(a, "--clients"))
			o->clients = atoi(v);
		else if (!strcmp(a, "--requests"))
			o->requests = atol(v);
		else if (!strcmp(a, "--duration"))
			o->duration = atof(v);
		else if (!strcmp(a, "--nodes"))
			o->nodes = atoi(v);
		else if (!strcmp(a, "--pods-per-node"))
			o->pods_per_node = atoi(v);
		else if (!strcmp(a, "--threads"))
			o->threads = v;
		else if (!strcmp(a, "--workers"))
			o->workers = v;
		else if (!strcmp(a, "--api-delay-ms"))
			o->api_delay_ms = (unsigned)atoi(v);
		else
			return -1;
		i++;
	}
	if (!o->binary || o->clients < 1 || o->clients > MAX_CLIENTS || o->requests < 1 ||
	    o->duration <= 0 || o->nodes < 1 || o->pods_per_node < 0)
		return -1;
	return 0;
}

static void report(struct shared *s, double wall, const char *m0, const char *m1)
{
	long n = atomic_load(&s->next), i, k = 0;
	double *sorted;
	char cpu[256];
	time_t t = time(NULL);
	char date[64];
	struct utsname u;
	double cnt, sum, api_cnt, api_sum, self_cnt, self_sum;
	if (n > s->o->requests)
		n = s->o->requests;
	sorted = malloc(sizeof(double) * (size_t)(n ? n : 1));
	for (i = 0; i < n; i++)
		if (s->lat[i] >= 0)
			sorted[k++] = s->lat[i];
	qsort(sorted, (size_t)k, sizeof *sorted, cmp_double);
	cpu_model(cpu, sizeof cpu);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
	uname(&u);
	printf("machine: %ld CPUs (nproc), %s, %s %s, %s, load average %s\n",
	       sysconf(_SC_NPROCESSORS_ONLN), cpu, u.sysname, u.release, date, loadavg());
	printf("load: %d clients (keep-alive TLS, one connection each), %d nodes x %d pods, "
	       "reviews: half pod CREATE with nodeName, half pods/binding, API delay %u ms, "
	       "threads %s, workers %s\n",
	       s->o->clients, s->o->nodes, s->o->pods_per_node, s->o->api_delay_ms,
	       s->o->threads ? s->o->threads : "default",
	       s->o->workers ? s->o->workers : "default");
	printf("reviews: %ld answered (%ld allowed), %ld failed, in %.2f s\n", atomic_load(&s->ok),
	       atomic_load(&s->allowed), atomic_load(&s->failed), wall);
	printf("throughput: %.0f reviews/s\n", (double)atomic_load(&s->ok) / wall);
	printf("client latency: p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms\n",
	       pct(sorted, k, 0.50) * 1e3, pct(sorted, k, 0.99) * 1e3, pct(sorted, k, 0.999) * 1e3,
	       k ? sorted[k - 1] * 1e3 : NAN);
	cnt = delta(m0, m1, "gpu_memory_guard_review_duration_seconds_count");
	sum = delta(m0, m1, "gpu_memory_guard_review_duration_seconds_sum");
	api_cnt = delta(m0, m1, "gpu_memory_guard_api_request_duration_seconds_count");
	api_sum = delta(m0, m1, "gpu_memory_guard_api_request_duration_seconds_sum");
	if (cnt > 0)
		printf("server time (review_duration_seconds, arrival to answer): mean %.2f ms, "
		       "p50 ~%.2f ms, "
		       "p99 ~%.2f ms (histogram-interpolated) over %.0f reviews\n",
		       sum / cnt * 1e3,
		       hist_quantile(m0, m1, "gpu_memory_guard_review_duration_seconds", 0.5) * 1e3,
		       hist_quantile(m0, m1, "gpu_memory_guard_review_duration_seconds", 0.99) *
		           1e3,
		       cnt);
	self_cnt = delta(m0, m1, "gpu_memory_guard_review_self_duration_seconds_count");
	self_sum = delta(m0, m1, "gpu_memory_guard_review_self_duration_seconds_sum");
	if (self_cnt > 0)
		printf(
		    "server own time (review_self_duration_seconds: without waiting for a worker, "
		    "API calls or node locks): mean %.3f ms, p50 ~%.3f ms, p99 ~%.3f ms "
		    "(histogram-interpolated) over %.0f reviews\n",
		    self_sum / self_cnt * 1e3,
		    hist_quantile(m0, m1, "gpu_memory_guard_review_self_duration_seconds", 0.5) *
		        1e3,
		    hist_quantile(m0, m1, "gpu_memory_guard_review_self_duration_seconds", 0.99) *
		        1e3,
		    self_cnt);
	if (api_cnt > 0)
		printf("API server calls (test double): %.0f, %.2f per review, mean %.2f ms\n",
		       api_cnt, cnt > 0 ? api_cnt / cnt : NAN, api_sum / api_cnt * 1e3);
	free(sorted);
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	struct world w;
	struct shared s;
	pthread_t th[MAX_CLIENTS];
	char *m0 = NULL, *m1 = NULL, *hargv[3];
	const char *extra[12];
	int i, rc = 1, ne = 0, status;
	double t0, wall;

	if (parse(argc, argv, &o)) {
		fprintf(stderr,
		        "usage: gmg-bench --binary PATH [--clients N] [--requests N] "
		        "[--duration SECONDS] [--nodes N] [--pods-per-node N] [--threads N] "
		        "[--workers N] [--api-delay-ms N] [--data DIR]\n");
		return 2;
	}
	hargv[0] = argv[0];
	hargv[1] = (char *)o.binary;
	hargv[2] = (char *)o.data;
	if (!getenv("GMG_TEST_DATA"))
		setenv("GMG_TEST_DATA", o.data, 1);
	harness_init(3, hargv);
	memset(&s, 0, sizeof s);
	s.w = &w;
	s.o = &o;
	if (world_init(&w, 0) || setup_state(&w, &o) || prepare(&s)) {
		fprintf(stderr, "gmg-bench: set-up failed\n");
		goto out;
	}
	extra[ne++] = "--log-level";
	extra[ne++] = "warn"; /* one decision line per review would measure the terminal */
	if (o.threads) {
		extra[ne++] = "--threads";
		extra[ne++] = o.threads;
	}
	if (o.workers) {
		extra[ne++] = "--workers";
		extra[ne++] = o.workers;
	}
	extra[ne] = NULL;
	if (world_start_gmg(&w, extra, 30000))
		goto out;
	s.lat = calloc((size_t)o.requests, sizeof *s.lat);
	if (!s.lat)
		goto out;
	/* Models a real API server's latency (the double answers in well under 1 ms). */
	apiserver_double_set_delay_ms(w.api, o.api_delay_ms);
	world_health_get(&w, "/metrics", &m0);
	t0 = now_s();
	s.deadline = t0 + o.duration;
	for (i = 0; i < o.clients; i++)
		pthread_create(&th[i], NULL, client, &s);
	for (i = 0; i < o.clients; i++)
		pthread_join(th[i], NULL);
	wall = now_s() - t0;
	world_health_get(&w, "/metrics", &m1);
	report(&s, wall, m0 ? m0 : "", m1 ? m1 : "");
	rc = atomic_load(&s.failed) ? 1 : 0;
	/* A graceful stop after the load: a sanitizer build reports leaks and races here. */
	status = world_stop_gmg(&w, SIGTERM, 30000);
	if (status >= 0 && WIFEXITED(status))
		printf("binary: exit status %d after SIGTERM\n", WEXITSTATUS(status));
	else
		printf("binary: did not exit cleanly after SIGTERM (wait status %d)\n", status);
	if (!(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		world_dump_log(&w);
		rc = 1;
	}
out:
	free(m0);
	free(m1);
	free(s.lat);
	for (i = 0; s.bodies && i < s.n_bodies; i++) {
		free(s.bodies[i]);
		free(s.uids[i]);
	}
	free(s.bodies);
	free(s.uids);
	world_free(&w);
	return rc;
}
