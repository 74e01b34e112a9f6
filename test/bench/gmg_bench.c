/*
 * gmg-bench: the real gpu-memory-guard binary measured side by side with nginx, loopback only.
 * Not a test: it prints figures (docs/benchmark.md) and asserts nothing about time.
 *
 *   gmg-bench --binary PATH [--scale] [--nodes N] [--cpu-nodes N] [--pods N] [--gpu-pods N]
 *             [--clients N] [--duration S] [--rounds N] [--nginx PATH|none]
 *             [--api-nodes N] [--api-pods-per-node N] [--api-duration S] [--api-delay-ms N]
 *             [--no-api-path] [--no-shared] [--shared-writers 1|2] [--threads N] [--workers N]
 *             [--data DIR]
 *
 * 1. A synthetic world in the Kubernetes API server TEST DOUBLE (test/integration/
 *    apiserver_double.c): --nodes nodes (5,000), of which --cpu-nodes (a tenth) are CPU nodes and
 *    the rest GPU nodes with GFD labels (nvidia.com/gpu.memory / gpu.count, 8 x 80 GB), and
 *    --pods pods (150,000), of which --gpu-pods (20,000) are GPU pods declaring
 *    GPU_MEMORY_LIMIT (a tenth of them unscheduled, in namespace "inference", for Bindings), the
 *    rest plain pods, spread round-robin over the nodes.
 * 2. The binary started against it with --cache watch: the initial sync time (fork to /readyz
 *    "cache: synced (N pods" with every pod of the double) and its peak RSS (VmHWM of
 *    /proc/PID/status) after the sync and after the load.
 * 3. --rounds rounds (3) of three phases of --duration seconds (5) each, interleaved so that
 *    other load on the machine hits them alike, the same client (--clients keep-alive TLS
 *    connections, one thread and one libcurl handle each, handshake before the clock starts):
 *      placements: half pod CREATEs with spec.nodeName, half pods/binding of the unscheduled GPU
 *        pods, onto GPU nodes of the big world (small declarations, so allowed), decided from
 *        the cache; the webhook's api_requests_total (get, list) and the double's own counters
 *        are read around the phase to prove no API call was made;
 *      pod UPDATE reviews (the fixture; not a placement: no API call on any path);
 *      nginx (Debian's, started here on a loopback port with the webhook's certificate) answering
 *        every POST with a fixed 200 whose body is a copy of the webhook's answer.
 *      placements (shared), unless --no-shared: the same reviews to a second process of the
 *        binary started after the first one's sync with --reservations shared
 *        --reservations-namespace gmg-bench (each admitted placement writes its node's Lease
 *        at the test double by compare-and-swap); the double's lease counters and the
 *        binary's reservation_* metrics are read around the phase.
 *      placements (shared, 2 writers), with --shared-writers 2: the same reviews again, half
 *        the clients to that second process and half to a third one started like it, writing
 *        the same Leases (the default install's 2 replicas behind a Service, which balances
 *        per connection): the conflicts between writers, not measured with one.
 *    Then the API path (--cache off) on a small world (--api-nodes 8 GPU nodes with
 *    --api-pods-per-node 40 declared pods each), as the benchmark measured it before the cache.
 * 4. The webhook's own time per placement (review_self_duration_seconds, difference of /metrics
 *    scrapes around the placement phases), p50 and p99 interpolated in the histogram's buckets.
 * 5. A summary table and the targets, each met or not met, and the load average at start and
 *    end (this is a shared machine).
 *
 * --scale: the largest clusters' world (issue 22): 20,000 nodes of which 2,000 CPU nodes (18,000
 * with 8 GPUs), 1,000,000 pods of which 150,000 GPU pods; the other options still apply after
 * it. After the sync it prints the cache's bytes (gpu_memory_guard_cache_bytes and its parts)
 * and the bytes per plain pod and per GPU pod, and its targets are RSS after sync <= 160 MiB
 * and initial sync <= 30 s, with the placement figures as ratios to the UPDATE path.
 *
 *   gmg-bench --extender|--ext-tls --binary PATH [--nodes N] [--pods N] [--gpu-pods N]
 *             [--clients N] [--duration S] [--rounds N] [--nginx PATH|none]
 *
 * The scheduler extender instead (ext_main): a world of --nodes GPU nodes (500, no CPU node) and
 * --pods pods (15,000; --gpu-pods 4,000 of them declaring), the binary with --cache watch,
 * --scheduler-listen and --log-level info, and ExtenderArgs in the NodeNames form naming every
 * node (kube-scheduler's with nodeCacheCapable: true) sent to POST /scheduler/filter and
 * /scheduler/prioritize, on the plain scheduler listener (--ext-tls: the TLS listener), and to
 * nginx answering a copy of a filter answer from a file: --rounds rounds of six phases, the
 * three with 1 client, then with --clients. Own time per call = the "self_ms" of the
 * extender's log line for that call (decode to encode, without waiting), every call, exact
 * percentiles; the metrics' extender_requests_total{result="judged"} is read for the call
 * count, nodes_filtered_out_total for the nodes filtered out.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#ifndef GMG_BENCH_DATA
#define GMG_BENCH_DATA "test/data"
#endif

#define POD_POOL    64   /* API path: distinct pod names per node, keeps the ledger bounded */
#define PLACEMENTS  4096 /* cache path: distinct placement reviews, cycled */
#define UPDATES     1024 /* distinct UPDATE reviews, cycled */
#define MAX_CLIENTS 512
#define MAX_BUCKETS 40

struct opts {
	const char *binary;
	const char *data;
	const char *nginx;
	int nodes, cpu_nodes;
	long pods, gpu_pods;
	int clients, rounds;
	double duration;
	int api_nodes, api_pods_per_node;
	double api_duration;
	unsigned api_delay_ms;
	int api_path;
	int shared; /* the placements through a second binary with --reservations shared too */
	int shared_writers; /* 2: and through it and a third one together (--shared-writers) */
	const char *threads;
	const char *workers;
	int extender; /* --extender: the scheduler extender's benchmark instead (below) */
	int ext_tls;  /* --ext-tls: its calls over the TLS listener, not the plain one */
	int scale;    /* --scale: 20,000 nodes, 1,000,000 pods (issue 22's targets) */
};

/* What an answer must be: an AdmissionReview, or a scheduler extender's answer. */
enum answer_kind { ANS_REVIEW = 0, ANS_FILTER, ANS_PRIORITIZE };

/* What the clients send and how an answer is checked. */
struct target {
	const char *url;
	const char *url2; /* not NULL: the odd-numbered clients send here (a second replica) */
	const char *ca_file;
	char **bodies;
	char **uids; /* NULL: no uid check (nginx answers a fixed body) */
	long n;
	enum answer_kind kind;
	int ext_nodes; /* extender: nodes each call names, all to be answered */
};

struct client_out {
	double *lat;
	long n, cap;
	long ok, allowed, failed, connects;
	long passed; /* ANS_FILTER: nodes that passed, summed over calls */
};

struct phase {
	const struct target *t;
	double duration;
	pthread_barrier_t start;
	atomic_long next;
	struct client_out out[MAX_CLIENTS];
};

/* A phase's figures, accumulated over rounds. */
struct result {
	const char *name;
	double wall;
	long ok, allowed, failed, connects;
	double *lat;
	long n, cap;
	/* from the binary's /metrics (differences around the phase) */
	int n_buckets;
	double le[MAX_BUCKETS], self_cum[MAX_BUCKETS];
	double self_sum, self_cnt, srv_sum, srv_cnt;
	double api_get_list; /* gpu_memory_guard_api_requests_total, verb get + list */
	double api_sum, api_cnt;
	double kind_pod, kind_binding, allowed_srv; /* reviews_total by kind; allowed */
	unsigned long double_reads; /* the double: GET node + GET pod + LIST pods pages */
	/* --reservations shared: the double's lease requests, the binary's record metrics */
	unsigned long lease_gets, lease_writes, lease_created, lease_updated, lease_conflicts;
	double res_ok, res_conflict, res_error, res_retries, res_write_sum, res_write_cnt;
	double round_rate[16];
	int rounds;
	double srv_cpu,
	    cli_cpu; /* CPU seconds (user + system): the server's processes, gmg-bench */
	/* extender (ext 1): per call from the binary's log ("self_ms", "latency_ms"), /metrics */
	int ext;
	double *own, *srvt;
	long n_own, cap_own, n_srvt, cap_srvt;
	double *own_pod[2]; /* own times by pod: [0] the 10Gi 1-GPU pods, [1] the 500Gi 8-GPU */
	long n_own_pod[2], cap_own_pod[2];
	long log_errors; /* extender log lines of this verb with an error */
	long passed;
	double ext_judged, ext_filtered_out;
};

static double now_s(void)
{
	return harness_now();
}

static void push_lat(double **lat, long *n, long *cap, double v)
{
	if (*n == *cap) {
		long nc = *cap ? *cap * 2 : 4096;
		double *p = realloc(*lat, sizeof(double) * (size_t)nc);
		if (!p)
			return;
		*lat = p;
		*cap = nc;
	}
	(*lat)[(*n)++] = v;
}

static long json_count(const cJSON *o)
{
	return cJSON_IsArray(o) || cJSON_IsObject(o) ? (long)cJSON_GetArraySize(o) : 0;
}

/* An extender answer: ExtenderFilterResult in the NodeNames form with no Error, every node
 * named either passing or failed; HostPriorityList with a score 0..10 for every node. 0 / -1;
 * *passed: nodes that passed the filter. */
static int check_ext_answer(const struct target *t, const char *body, long *passed)
{
	cJSON *doc = cJSON_Parse(body), *e;
	int ok = 0;
	*passed = 0;
	if (t->kind == ANS_FILTER) {
		const cJSON *names = cJSON_GetObjectItemCaseSensitive(doc, "NodeNames");
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(doc, "Error");
		long n =
		    json_count(names) +
		    json_count(cJSON_GetObjectItemCaseSensitive(doc, "FailedNodes")) +
		    json_count(cJSON_GetObjectItemCaseSensitive(doc, "FailedAndUnresolvableNodes"));
		ok = cJSON_IsArray(names) &&
		     (!err || (cJSON_IsString(err) && !err->valuestring[0])) && n == t->ext_nodes;
		*passed = json_count(names);
	} else {
		ok = cJSON_IsArray(doc) && json_count(doc) == t->ext_nodes;
		cJSON_ArrayForEach(e, doc)
		{
			if (!ok)
				break;
			const cJSON *sc = cJSON_GetObjectItemCaseSensitive(e, "Score");
			if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "Host")) ||
			    !cJSON_IsNumber(sc) || sc->valuedouble < 0 || sc->valuedouble > 10)
				ok = 0;
		}
	}
	cJSON_Delete(doc);
	return ok ? 0 : -1;
}

static void *client(void *arg)
{
	struct phase *ph = ((void **)arg)[0];
	struct client_out *o = ((void **)arg)[1];
	const struct target *t = ph->t;
	CURL_HANDLE *h = http_handle_new();
	struct http_req rq = {0};
	struct http_resp rs;
	struct review_answer a;
	double deadline;
	long i;
	rq.url = t->url2 && (o - ph->out) % 2 ? t->url2 : t->url;
	rq.ca_file = t->ca_file;
	rq.content_type = "application/json";
	rq.timeout_ms = 30000;
	/* Connect and handshake before the clock starts (not measured). The extender: a pod that
	 * asks for no GPU and no node (passed through: logged at debug only, so not in the figures
	 * read from the log; counted as passthrough in the metrics). */
	rq.body = t->kind == ANS_REVIEW
	              ? "{\"request\":{\"uid\":\"warm-up\"}}"
	              : "{\"Pod\":{\"metadata\":{\"name\":\"warm-up\",\"namespace\":"
	                "\"default\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}},"
	                "\"Nodes\":null,\"NodeNames\":[]}";
	rq.body_len = strlen(rq.body);
	http_do(h, &rq, &rs);
	http_resp_free(&rs);
	pthread_barrier_wait(&ph->start);
	deadline = now_s() + ph->duration;
	while (now_s() < deadline) {
		i = atomic_fetch_add(&ph->next, 1);
		rq.body = t->bodies[i % t->n];
		rq.body_len = strlen(rq.body);
		double t0 = now_s();
		int rc = http_do(h, &rq, &rs);
		double dt = now_s() - t0;
		long passed = 0;
		if (t->kind != ANS_REVIEW) {
			if (rc == 0 && rs.code == 200 &&
			    check_ext_answer(t, rs.body, &passed) == 0) {
				o->ok++;
				o->passed += passed;
				push_lat(&o->lat, &o->n, &o->cap, dt);
			} else {
				o->failed++;
			}
		} else if (rc == 0 && rs.code == 200 && harness_parse_review(rs.body, &a) == 0 &&
		           (!t->uids || !strcmp(a.uid, t->uids[i % t->n]))) {
			o->ok++;
			o->allowed += a.allowed;
			push_lat(&o->lat, &o->n, &o->cap, dt);
		} else {
			o->failed++;
		}
		o->connects += rs.connects;
		http_resp_free(&rs);
	}
	http_handle_free(h);
	return NULL;
}

/* CPU seconds (user + system) pid used so far, from /proc/PID/stat; 0 when unreadable. */
static double proc_cpu(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* fields after the command name: state is field 3 */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds of pid and its children (nginx: the master and its workers). */
static double tree_cpu(pid_t pid)
{
	DIR *d;
	struct dirent *e;
	double sum;
	if (pid <= 0)
		return 0;
	sum = proc_cpu(pid);
	d = opendir("/proc");
	while (d && (e = readdir(d))) {
		char path[300], buf[512], *p;
		int ppid = 0;
		FILE *f;
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')) &&
		    sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == pid)
			sum += proc_cpu(atoi(e->d_name));
		fclose(f);
	}
	if (d)
		closedir(d);
	return sum;
}

static double self_cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Run clients against t for duration seconds; adds to r. server: the process answering (its
 * CPU time is measured, children included). */
static void run_phase(const struct target *t, int clients, double duration, pid_t server,
                      struct result *r)
{
	double srv0, cli0;
	struct phase *ph = calloc(1, sizeof *ph);
	pthread_t th[MAX_CLIENTS];
	void *args[MAX_CLIENTS][2];
	double t0, wall;
	long ok = 0;
	int i;
	if (!ph)
		return;
	ph->t = t;
	ph->duration = duration;
	pthread_barrier_init(&ph->start, NULL, (unsigned)clients + 1);
	for (i = 0; i < clients; i++) {
		args[i][0] = ph;
		args[i][1] = &ph->out[i];
		pthread_create(&th[i], NULL, client, args[i]);
	}
	pthread_barrier_wait(&ph->start);
	t0 = now_s();
	srv0 = tree_cpu(server);
	cli0 = self_cpu();
	for (i = 0; i < clients; i++)
		pthread_join(th[i], NULL);
	wall = now_s() - t0;
	r->srv_cpu += tree_cpu(server) - srv0;
	r->cli_cpu += self_cpu() - cli0;
	for (i = 0; i < clients; i++) {
		struct client_out *o = &ph->out[i];
		for (long k = 0; k < o->n; k++)
			push_lat(&r->lat, &r->n, &r->cap, o->lat[k]);
		free(o->lat);
		ok += o->ok;
		r->ok += o->ok;
		r->allowed += o->allowed;
		r->failed += o->failed;
		r->connects += o->connects;
		r->passed += o->passed;
	}
	r->wall += wall;
	if (r->rounds < 16)
		r->round_rate[r->rounds] = (double)ok / wall;
	r->rounds++;
	pthread_barrier_destroy(&ph->start);
	free(ph);
}

static double metric(const char *m, const char *name, const char *label)
{
	double v = harness_metric(m, name, label, 1);
	return v < 0 ? 0 : v;
}

/* Adds the difference of two /metrics scrapes to r. */
static void add_metrics(struct result *r, const char *m0, const char *m1)
{
	static const char self[] = "gpu_memory_guard_review_self_duration_seconds_bucket{le=\"";
	const char *p = m1;
	int n = 0;
	while ((p = strstr(p, self)) && n < MAX_BUCKETS) {
		const char *le = p + sizeof self - 1;
		char label[64];
		r->le[n] = strncmp(le, "+Inf", 4) ? strtod(le, NULL) : INFINITY;
		snprintf(label, sizeof label, "le=\"%.*s\"", (int)(strchr(le, '"') - le), le);
		r->self_cum[n] +=
		    metric(m1, "gpu_memory_guard_review_self_duration_seconds_bucket", label) -
		    metric(m0, "gpu_memory_guard_review_self_duration_seconds_bucket", label);
		n++;
		p = le;
	}
	r->n_buckets = n;
#define D(name, label) (metric(m1, name, label) - metric(m0, name, label))
	r->self_sum += D("gpu_memory_guard_review_self_duration_seconds_sum", NULL);
	r->self_cnt += D("gpu_memory_guard_review_self_duration_seconds_count", NULL);
	r->srv_sum += D("gpu_memory_guard_review_duration_seconds_sum", NULL);
	r->srv_cnt += D("gpu_memory_guard_review_duration_seconds_count", NULL);
	r->api_get_list += D("gpu_memory_guard_api_requests_total", "verb=\"get\"") +
	                   D("gpu_memory_guard_api_requests_total", "verb=\"list\"");
	r->kind_pod += D("gpu_memory_guard_reviews_total", "kind=\"pod\"");
	r->kind_binding += D("gpu_memory_guard_reviews_total", "kind=\"binding\"");
	r->allowed_srv += D("gpu_memory_guard_reviews_total", "decision=\"allowed\"");
	r->api_sum += D("gpu_memory_guard_api_request_duration_seconds_sum", NULL);
	r->api_cnt += D("gpu_memory_guard_api_request_duration_seconds_count", NULL);
	r->res_ok += D("gpu_memory_guard_reservation_writes_total", "result=\"ok\"");
	r->res_conflict += D("gpu_memory_guard_reservation_writes_total", "result=\"conflict\"");
	r->res_error += D("gpu_memory_guard_reservation_writes_total", "result=\"error\"");
	r->res_retries += D("gpu_memory_guard_reservation_retries_total", NULL);
	r->res_write_sum += D("gpu_memory_guard_reservation_write_seconds_sum", NULL);
	r->res_write_cnt += D("gpu_memory_guard_reservation_write_seconds_count", NULL);
#undef D
}

/* Quantile of the own-time histogram, linear within a bucket. */
static double self_quantile(const struct result *r, double q)
{
	double total, prev_le = 0, prev_c = 0;
	int i;
	if (r->n_buckets == 0 || (total = r->self_cum[r->n_buckets - 1]) <= 0)
		return NAN;
	for (i = 0; i < r->n_buckets; i++) {
		if (r->self_cum[i] >= q * total) {
			if (isinf(r->le[i]))
				return prev_le;
			return prev_le +
			       (r->le[i] - prev_le) * (q * total - prev_c) /
			           (r->self_cum[i] - prev_c > 0 ? r->self_cum[i] - prev_c : 1);
		}
		prev_le = r->le[i];
		prev_c = r->self_cum[i];
	}
	return NAN;
}

/* Fraction of own times within bound seconds (exact when bound is a bucket bound). */
static double self_within(const struct result *r, double bound)
{
	int i;
	double total = r->n_buckets ? r->self_cum[r->n_buckets - 1] : 0;
	for (i = 0; i < r->n_buckets && total > 0; i++)
		if (fabs(r->le[i] - bound) < bound * 1e-9)
			return r->self_cum[i] / total;
	return NAN;
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

static double rate(const struct result *r)
{
	return r->wall > 0 ? (double)r->ok / r->wall : 0;
}

static void print_result(const struct result *r)
{
	int i;
	qsort(r->lat, (size_t)r->n, sizeof *r->lat, cmp_double);
	printf("  %-28s %8.0f /s (rounds:", r->name, rate(r));
	for (i = 0; i < r->rounds && i < 16; i++)
		printf(" %.0f", r->round_rate[i]);
	printf("), %ld answered", r->ok);
	if (!r->ext) /* an extender's answer allows nothing */
		printf(" (%ld allowed)", r->allowed);
	printf(", %ld failed, %ld reconnects; client p50 %.2f ms, p99 %.2f ms, p999 %.2f ms\n",
	       r->failed, r->connects, pct(r->lat, r->n, 0.5) * 1e3, pct(r->lat, r->n, 0.99) * 1e3,
	       pct(r->lat, r->n, 0.999) * 1e3);
	if (r->ok > 0)
		printf("  %-28s CPU per request: server %.1f us, gmg-bench (clients and test "
		       "double) %.1f us\n",
		       "", r->srv_cpu / (double)r->ok * 1e6, r->cli_cpu / (double)r->ok * 1e6);
	if (r->self_cnt > 0)
		printf("  %-28s server time mean %.3f ms; own time mean %.3f ms, p50 ~%.3f ms, "
		       "p99 ~%.3f ms, %.2f%% <= 1 ms; API get+list %.0f (%.2f per review), "
		       "double reads %lu\n",
		       "", r->srv_sum / r->srv_cnt * 1e3, r->self_sum / r->self_cnt * 1e3,
		       self_quantile(r, 0.5) * 1e3, self_quantile(r, 0.99) * 1e3,
		       self_within(r, 0.001) * 100, r->api_get_list, r->api_get_list / r->self_cnt,
		       r->double_reads);
	if (r->self_cnt > 0)
		printf(
		    "  %-28s the webhook counted %.0f pod and %.0f binding reviews, %.0f allowed\n",
		    "", r->kind_pod, r->kind_binding, r->allowed_srv);
	if (r->lease_writes > 0 || r->res_ok > 0)
		printf("  %-28s Leases at the double: %lu writes (%lu created, %lu updated, %lu "
		       "conflicts), %lu GETs = %.2f writes per placement; the binary: record "
		       "writes ok %.0f, conflict %.0f, error %.0f, retries %.0f, write latency "
		       "mean %.3f ms\n",
		       "", r->lease_writes, r->lease_created, r->lease_updated, r->lease_conflicts,
		       r->lease_gets, r->ok ? (double)r->lease_writes / (double)r->ok : NAN,
		       r->res_ok, r->res_conflict, r->res_error, r->res_retries,
		       r->res_write_cnt > 0 ? r->res_write_sum / r->res_write_cnt * 1e3 : NAN);
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
static void loadavg(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");
	snprintf(buf, len, "unknown");
	if (f) {
		if (fgets(buf, (int)len, f)) {
			char *p = buf;
			int spaces = 0;
			while (*p && spaces < 3)
				spaces += *p++ == ' ';
			if (spaces == 3)
				p[-1] = '\0';
		}
		fclose(f);
	}
}

/* VmHWM and VmRSS of pid, in KiB (-1 when unreadable). */
static void rss_kib(pid_t pid, long *hwm, long *rss)
{
	char path[64], line[256];
	FILE *f;
	*hwm = *rss = -1;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "VmHWM:", 6))
			*hwm = atol(line + 6);
		else if (!strncmp(line, "VmRSS:", 6))
			*rss = atol(line + 6);
	}
	fclose(f);
}

/* ---- the big world ---- */

static const char *const limits[] = {"4Gi", "8Gi", "10Gi", "16Gi"};

static int put_node(struct world *w, int i, int gpu)
{
	char json[2048];
	snprintf(json, sizeof json,
	         "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"node-%05d\","
	         "\"uid\":\"10000000-0000-4000-8000-%012d\",\"creationTimestamp\":"
	         "\"2026-11-01T00:00:00Z\",\"labels\":{\"beta.kubernetes.io/arch\":\"amd64\","
	         "\"beta.kubernetes.io/os\":\"linux\",\"kubernetes.io/arch\":\"amd64\","
	         "\"kubernetes.io/hostname\":\"node-%05d\",\"kubernetes.io/os\":\"linux\","
	         "\"topology.kubernetes.io/zone\":\"zone-%d\"%s},\"annotations\":{\"node.alpha."
	         "kubernetes.io/ttl\":\"0\"}},\"spec\":{\"podCIDR\":\"10.%d.%d.0/24\"%s},"
	         "\"status\":{\"capacity\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"110\""
	         "%s},\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"110\"%s},"
	         "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":"
	         "\"KubeletReady\",\"lastHeartbeatTime\":\"2026-11-29T00:00:00Z\"}],"
	         "\"nodeInfo\":{\"kubeletVersion\":\"v1.34.1\",\"containerRuntimeVersion\":"
	         "\"containerd://2.1.4\",\"architecture\":\"amd64\",\"operatingSystem\":"
	         "\"linux\"}}}",
	         i, i, i, i % 3,
	         gpu ? ",\"nvidia.com/gpu.present\":\"true\",\"nvidia.com/gpu.count\":\"8\","
	               "\"nvidia.com/gpu.memory\":\"81559\",\"nvidia.com/gpu.product\":"
	               "\"NVIDIA-H100-80GB-HBM3\",\"nvidia.com/gpu.machine\":\"DGX-H100\""
	             : "",
	         (i / 256) % 256, i % 256,
	         gpu ? ",\"taints\":[{\"key\":\"nvidia.com/gpu\",\"value\":\"present\","
	               "\"effect\":\"NoSchedule\"}]"
	             : "",
	         gpu ? "224" : "64", gpu ? "2113309012Ki" : "263854976Ki",
	         gpu ? ",\"nvidia.com/gpu\":\"8\"" : "", gpu ? "222" : "63",
	         gpu ? "2113206612Ki" : "263752576Ki", gpu ? ",\"nvidia.com/gpu\":\"8\"" : "");
	return apiserver_double_put_node(w->api, json);
}

/* A pod as the API server stores it (about 1.3 KB) into json[len]: a GPU pod asking for gpus
 * nvidia.com/gpu and declaring limit when limit is not NULL; on node when not NULL (Running),
 * else Pending. */
static void pod_json(char *json, size_t len, const char *ns, const char *name, long uid,
                     const char *node, const char *limit, int gpus)
{
	char node_field[96] = "", res[256], env[160] = "";
	if (node)
		snprintf(node_field, sizeof node_field, ",\"nodeName\":\"%s\"", node);
	if (limit) {
		snprintf(
		    res, sizeof res,
		    "{\"limits\":{\"cpu\":\"4\",\"memory\":\"32Gi\",\"nvidia.com/gpu\":\"%d\"},"
		    "\"requests\":{\"cpu\":\"4\",\"memory\":\"32Gi\",\"nvidia.com/gpu\":\"%d\"}}",
		    gpus, gpus);
		snprintf(env, sizeof env,
		         ",\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"%s\"},{\"name\":"
		         "\"VLLM_GPU_MEMORY_UTILIZATION\",\"value\":\"0.2\"}]",
		         limit);
	} else {
		snprintf(res, sizeof res,
		         "{\"limits\":{\"memory\":\"512Mi\"},\"requests\":{\"cpu\":\"100m\","
		         "\"memory\":\"256Mi\"}}");
	}
	snprintf(json, len,
	         "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
	         "\"namespace\":\"%s\",\"uid\":\"20000000-0000-4000-8000-%012ld\","
	         "\"creationTimestamp\":\"2026-11-20T10:00:00Z\",\"labels\":{\"app\":\"%s\","
	         "\"pod-template-hash\":\"6d5f9c7b8\"},\"ownerReferences\":[{\"apiVersion\":"
	         "\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"%s-6d5f9c7b8\",\"uid\":"
	         "\"30000000-0000-4000-8000-%012ld\",\"controller\":true,"
	         "\"blockOwnerDeletion\":true}]},\"spec\":{\"containers\":[{\"name\":\"main\","
	         "\"image\":\"registry.example.com/%s:1.0\",\"resources\":%s%s,"
	         "\"terminationMessagePath\":\"/dev/termination-log\","
	         "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\"}],"
	         "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,"
	         "\"dnsPolicy\":\"ClusterFirst\",\"serviceAccountName\":\"default\","
	         "\"schedulerName\":\"default-scheduler\"%s,\"tolerations\":[{\"key\":"
	         "\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":"
	         "\"NoExecute\",\"tolerationSeconds\":300},{\"key\":\"nvidia.com/gpu\","
	         "\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],\"priority\":0,"
	         "\"enableServiceLinks\":true},\"status\":{\"phase\":\"%s\",\"qosClass\":"
	         "\"Burstable\"%s}}",
	         name, ns, uid, name, name, uid, limit ? "vllm" : "app", res, env, node_field,
	         node ? "Running" : "Pending",
	         node ? ",\"podIP\":\"10.244.1.7\",\"startTime\":\"2026-11-20T10:00:05Z\"" : "");
}

static int put_pod(struct world *w, const char *ns, const char *name, long uid, const char *node,
                   const char *limit)
{
	char json[4096];
	pod_json(json, sizeof json, ns, name, uid, node, limit, 1);
	return apiserver_double_put_pod(w->api, ns, json);
}

static int gpu_nodes(const struct opts *o)
{
	return o->nodes - o->cpu_nodes;
}

static long pending_pods(const struct opts *o)
{
	return o->gpu_pods / 10;
}

/* GPU node k of the world (nodes 0 .. gpu_nodes-1 are the GPU nodes). */
static void gpu_node_name(char *buf, size_t len, long k, const struct opts *o)
{
	snprintf(buf, len, "node-%05ld", k % gpu_nodes(o));
}

static int build_world(struct world *w, const struct opts *o)
{
	char node[32], name[64], ns[32];
	long i, pending = pending_pods(o), uid = 0;
	int n;
	for (n = 0; n < o->nodes; n++)
		if (put_node(w, n, n < gpu_nodes(o)))
			return -1;
	/* GPU pods: the unscheduled ones first (namespace inference, for the Bindings), then
	 * round-robin over the GPU nodes. */
	for (i = 0; i < o->gpu_pods; i++) {
		if (i < pending) {
			snprintf(name, sizeof name, "pending-%ld", i);
			if (put_pod(w, "inference", name, uid++, NULL, "2Gi"))
				return -1;
			continue;
		}
		gpu_node_name(node, sizeof node, i, o);
		snprintf(ns, sizeof ns, "ml-%ld", i % 20);
		snprintf(name, sizeof name, "vllm-%ld", i);
		if (put_pod(w, ns, name, uid++, node, limits[i % 4]))
			return -1;
	}
	/* Plain pods over all nodes. */
	for (i = 0; i < o->pods - o->gpu_pods; i++) {
		snprintf(node, sizeof node, "node-%05ld", i % o->nodes);
		snprintf(ns, sizeof ns, "team-%ld", i % 50);
		snprintf(name, sizeof name, "web-%ld", i);
		if (put_pod(w, ns, name, uid++, node, NULL))
			return -1;
	}
	return 0;
}

static void free_target(struct target *t)
{
	for (long i = 0; t->bodies && i < t->n; i++) {
		free(t->bodies[i]);
		if (t->uids)
			free(t->uids[i]);
	}
	free(t->bodies);
	free(t->uids);
	memset(t, 0, sizeof *t);
}

static int alloc_target(struct target *t, const struct world *w, long n)
{
	t->url = w->url;
	t->ca_file = w->ca_file;
	t->n = n;
	t->bodies = calloc((size_t)n, sizeof *t->bodies);
	t->uids = calloc((size_t)n, sizeof *t->uids);
	return t->bodies && t->uids ? 0 : -1;
}

/* kube-scheduler sets a Binding's metadata.uid to its pod's, and the webhook decides from the
 * cache only for the very pod the Binding names (same uid): put the uid put_pod gave the world's
 * pod number k. Frees body. */
static char *with_pod_uid(char *body, long k)
{
	cJSON *doc = body ? cJSON_Parse(body) : NULL;
	cJSON *md = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "request"),
	                                     "object"),
	    "metadata");
	char uid[64], *out = NULL;
	free(body);
	if (cJSON_IsObject(md)) {
		snprintf(uid, sizeof uid, "20000000-0000-4000-8000-%012ld", k);
		cJSON_DeleteItemFromObjectCaseSensitive(md, "uid");
		cJSON_AddStringToObject(md, "uid", uid);
		out = cJSON_PrintUnformatted(doc);
	}
	cJSON_Delete(doc);
	return out;
}

/* Cache placements: even: pod CREATE with nodeName (1Gi); odd: Binding of an unscheduled pod
 * (2Gi), each pod always onto the same node. */
static int prepare_placements(struct target *t, const struct world *w, const struct opts *o)
{
	long pending = pending_pods(o);
	char uid[64], name[64], node[32];
	if (alloc_target(t, w, PLACEMENTS))
		return -1;
	for (long i = 0; i < t->n; i++) {
		snprintf(uid, sizeof uid, "place-%ld", i);
		if (i % 2 && pending > 0) {
			long p = (i / 2) % pending;
			snprintf(name, sizeof name, "pending-%ld", p);
			gpu_node_name(node, sizeof node, p * 13, o);
			t->bodies[i] = with_pod_uid(harness_binding_review(uid, name, node), p);
		} else {
			snprintf(name, sizeof name, "new-%ld", i);
			gpu_node_name(node, sizeof node, i * 7919, o);
			t->bodies[i] = harness_pod_review(uid, name, "1Gi", node, 0);
		}
		t->uids[i] = strdup(uid);
		if (!t->bodies[i] || !t->uids[i])
			return -1;
	}
	return 0;
}

static int prepare_updates(struct target *t, const struct world *w)
{
	char uid[64];
	if (alloc_target(t, w, UPDATES))
		return -1;
	for (long i = 0; i < t->n; i++) {
		snprintf(uid, sizeof uid, "update-%ld", i);
		t->bodies[i] =
		    harness_review_from_fixture("review-pod-update.json", uid, NULL, NULL);
		t->uids[i] = strdup(uid);
		if (!t->bodies[i] || !t->uids[i])
			return -1;
	}
	return 0;
}

/* ---- the small world (API path) ---- */

static int setup_small(struct world *w, const struct opts *o)
{
	char node[64], pod[64];
	int n, p;
	for (n = 0; n < o->api_nodes; n++) {
		snprintf(node, sizeof node, "bench-node-%d", n);
		/* 8 GPUs of 80 GB: room for every pod of the pool. */
		if (world_add_node(w, node, 81559, 8))
			return -1;
		for (p = 0; p < o->api_pods_per_node; p++) {
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

static int prepare_small(struct target *t, const struct world *w, const struct opts *o)
{
	char uid[64], name[64], node[64];
	if (alloc_target(t, w, (long)o->api_nodes * POD_POOL * 2))
		return -1;
	for (long i = 0; i < t->n; i++) {
		int n = (int)(i % o->api_nodes), p = (int)((i / o->api_nodes) % POD_POOL);
		snprintf(uid, sizeof uid, "bench-%ld", i);
		snprintf(node, sizeof node, "bench-node-%d", n);
		if (i % 2) {
			snprintf(name, sizeof name, "pending-%d-%d", n, p);
			t->bodies[i] = harness_binding_review(uid, name, node);
		} else {
			snprintf(name, sizeof name, "direct-%d-%d", n, p);
			t->bodies[i] = harness_pod_review(uid, name, "1Gi", node, 0);
		}
		t->uids[i] = strdup(uid);
		if (!t->bodies[i] || !t->uids[i])
			return -1;
	}
	return 0;
}

/* ---- nginx ---- */

/* Start nginx on a free loopback port with the world's certificate, answering every request
 * (POST included) 200 with body. Returns its pid (0 when not started) and the URL. */
static pid_t start_nginx(const struct opts *o, const struct world *w, const char *body, char *url,
                         size_t url_len)
{
	char conf[HARNESS_PATHMAX + 32], errlog[HARNESS_PATHMAX + 32], quoted[8192];
	FILE *f;
	pid_t pid;
	size_t k = 0;
	int port = harness_free_port();
	double until;
	if (!o->nginx || !strcmp(o->nginx, "none") || access(o->nginx, X_OK)) {
		printf("nginx: %s not found or disabled: the nginx column is left empty\n",
		       o->nginx ? o->nginx : "(none)");
		return 0;
	}
	/* nginx single-quoted string: escape ' and \; $ would start a variable. */
	for (const char *p = body; *p && k + 3 < sizeof quoted; p++) {
		if (*p == '\'' || *p == '\\')
			quoted[k++] = '\\';
		quoted[k++] = *p == '$' ? '_' : *p;
	}
	quoted[k] = '\0';
	snprintf(conf, sizeof conf, "%s/nginx.conf", w->dir);
	snprintf(errlog, sizeof errlog, "%s/nginx-error.log", w->dir);
	f = fopen(conf, "w");
	if (!f)
		return 0;
	fprintf(f,
	        "daemon off;\nmaster_process on;\nworker_processes auto;\n%s"
	        "pid %s/nginx.pid;\nerror_log %s warn;\n"
	        "events { worker_connections 1024; }\n"
	        "http {\n  access_log off;\n"
	        "  client_body_temp_path %s/nginx-body;\n  proxy_temp_path %s/nginx-proxy;\n"
	        "  fastcgi_temp_path %s/nginx-fastcgi;\n  uwsgi_temp_path %s/nginx-uwsgi;\n"
	        "  scgi_temp_path %s/nginx-scgi;\n"
	        "  keepalive_requests 100000000;\n  keepalive_timeout 600s;\n"
	        "  server {\n    listen 127.0.0.1:%d ssl;\n"
	        "    ssl_certificate %s;\n    ssl_certificate_key %s;\n"
	        "    ssl_protocols TLSv1.2 TLSv1.3;\n"
	        "    location / {\n      default_type application/json;\n"
	        "      return 200 '%s';\n    }\n  }\n}\n",
	        geteuid() == 0 ? "user root;\n" : "", w->dir, errlog, w->dir, w->dir, w->dir,
	        w->dir, w->dir, port, w->cert_file, w->key_file, quoted);
	fclose(f);
	pid = fork();
	if (pid == 0) {
		execl(o->nginx, o->nginx, "-p", w->dir, "-e", errlog, "-c", conf, (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		return 0;
	snprintf(url, url_len, "https://127.0.0.1:%d/validate", port);
	until = now_s() + 10;
	while (now_s() < until) {
		struct http_req rq = {0};
		struct http_resp rs;
		int status;
		rq.url = url;
		rq.ca_file = w->ca_file;
		rq.body = "{}";
		rq.body_len = 2;
		rq.content_type = "application/json";
		rq.timeout_ms = 2000;
		if (http_do(NULL, &rq, &rs) == 0 && rs.code == 200) {
			http_resp_free(&rs);
			return pid;
		}
		http_resp_free(&rs);
		if (waitpid(pid, &status, WNOHANG) == pid) {
			char *log = harness_read_file(errlog, NULL);
			printf("nginx: exited at start (status %d): %s\n", status, log ? log : "");
			free(log);
			return 0;
		}
		usleep(50 * 1000);
	}
	printf("nginx: not answering after 10 s\n");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}

static void stop_nginx(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/* ---- options ---- */

static int parse(int argc, char **argv, struct opts *o)
{
	int i, cpu_set = 0, nodes_set = 0, pods_set = 0, gpu_set = 0;
	o->data = GMG_BENCH_DATA;
	o->nginx = "/usr/sbin/nginx";
	o->nodes = 5000;
	o->pods = 150000;
	o->gpu_pods = 20000;
	o->clients = 32;
	o->rounds = 3;
	o->duration = 5;
	o->api_nodes = 8;
	o->api_pods_per_node = 40;
	o->api_duration = 10;
	o->api_path = 1;
	o->shared = 1;
	o->shared_writers = 1;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--no-api-path")) {
			o->api_path = 0;
			continue;
		}
		if (!strcmp(a, "--no-shared")) {
			o->shared = 0;
			continue;
		}
		if (!strcmp(a, "--shared-writers") && v) {
			o->shared_writers = atoi(v);
			if (o->shared_writers < 1 || o->shared_writers > 2) {
				fprintf(stderr, "gmg-bench: --shared-writers: 1 or 2, not %s\n", v);
				return -1;
			}
			i++;
			continue;
		}
		if (!strcmp(a, "--scale")) {
			o->scale = 1;
			o->nodes = nodes_set ? o->nodes : 20000;
			o->cpu_nodes = cpu_set ? o->cpu_nodes : 2000;
			o->pods = pods_set ? o->pods : 1000000;
			o->gpu_pods = gpu_set ? o->gpu_pods : 150000;
			nodes_set = pods_set = gpu_set = cpu_set = 1;
			continue;
		}
		if (!strcmp(a, "--extender") || !strcmp(a, "--ext-tls")) {
			o->extender = 1;
			o->ext_tls |= !strcmp(a, "--ext-tls");
			continue;
		}
		if (!v)
			return -1;
		if (!strcmp(a, "--binary"))
			o->binary = v;
		else if (!strcmp(a, "--data"))
			o->data = v;
		else if (!strcmp(a, "--nginx"))
			o->nginx = v;
		else if (!strcmp(a, "--nodes"))
			o->nodes = atoi(v), nodes_set = 1;
		else if (!strcmp(a, "--cpu-nodes"))
			o->cpu_nodes = atoi(v), cpu_set = 1;
		else if (!strcmp(a, "--pods"))
			o->pods = atol(v), pods_set = 1;
		else if (!strcmp(a, "--gpu-pods"))
			o->gpu_pods = atol(v), gpu_set = 1;
		else if (!strcmp(a, "--clients"))
			o->clients = atoi(v);
		else if (!strcmp(a, "--rounds"))
			o->rounds = atoi(v);
		else if (!strcmp(a, "--duration"))
			o->duration = atof(v);
		else if (!strcmp(a, "--api-nodes"))
			o->api_nodes = atoi(v);
		else if (!strcmp(a, "--api-pods-per-node"))
			o->api_pods_per_node = atoi(v);
		else if (!strcmp(a, "--api-duration"))
			o->api_duration = atof(v);
		else if (!strcmp(a, "--api-delay-ms"))
			o->api_delay_ms = (unsigned)atoi(v);
		else if (!strcmp(a, "--threads"))
			o->threads = v;
		else if (!strcmp(a, "--workers"))
			o->workers = v;
		else
			return -1;
		i++;
	}
	if (o->extender) {
		/* 500 GPU nodes, 30 pods a node of which 8 GPU pods. */
		o->nodes = nodes_set ? o->nodes : 500;
		o->cpu_nodes = cpu_set ? o->cpu_nodes : 0;
		o->pods = pods_set ? o->pods : 15000;
		o->gpu_pods = gpu_set ? o->gpu_pods : 4000;
	} else if (!cpu_set) {
		o->cpu_nodes = o->nodes / 10;
	}
	if (!o->binary || o->clients < 1 || o->clients > MAX_CLIENTS || o->duration <= 0 ||
	    o->rounds < 1 || o->rounds > 16 || o->nodes < 1 || o->cpu_nodes < 0 ||
	    o->cpu_nodes >= o->nodes || o->gpu_pods < 0 || o->pods < o->gpu_pods ||
	    o->api_nodes < 1 || o->api_pods_per_node < 0 || o->api_duration <= 0)
		return -1;
	return 0;
}

static int gmg_args(const struct opts *o, const char **extra)
{
	int ne = 0;
	extra[ne++] = "--log-level";
	extra[ne++] = "warn"; /* one decision line per review would measure the terminal */
	if (o->threads) {
		extra[ne++] = "--threads";
		extra[ne++] = o->threads;
	}
	if (o->workers) {
		extra[ne++] = "--workers";
		extra[ne++] = o->workers;
	}
	extra[ne] = NULL;
	return ne;
}

static unsigned long double_reads(struct apiserver_double *d)
{
	return apiserver_double_count(d, APISERVER_DOUBLE_GET_NODE) +
	       apiserver_double_count(d, APISERVER_DOUBLE_GET_POD) +
	       apiserver_double_count(d, APISERVER_DOUBLE_LIST_PODS) +
	       apiserver_double_count(d, APISERVER_DOUBLE_LIST_NODES);
}

/* One webhook phase: scrape, reset the double's counters, run, scrape. */
static void webhook_phase(struct world *w, const struct target *t, int clients, double duration,
                          struct result *r)
{
	char *m0 = NULL, *m1 = NULL;
	struct apiserver_double *d = w->api;
	world_health_get(w, "/metrics", &m0);
	apiserver_double_reset_counts(d);
	run_phase(t, clients, duration, w->pid, r);
	r->double_reads += double_reads(d);
	r->lease_gets += apiserver_double_count(d, APISERVER_DOUBLE_GET_LEASE);
	r->lease_writes += apiserver_double_count(d, APISERVER_DOUBLE_LEASE_WRITE);
	r->lease_created += apiserver_double_count(d, APISERVER_DOUBLE_LEASE_CREATED);
	r->lease_updated += apiserver_double_count(d, APISERVER_DOUBLE_LEASE_UPDATED);
	r->lease_conflicts += apiserver_double_count(d, APISERVER_DOUBLE_LEASE_CONFLICT);
	world_health_get(w, "/metrics", &m1);
	add_metrics(r, m0 ? m0 : "", m1 ? m1 : "");
	free(m0);
	free(m1);
}

/* webhook_phase over two replicas of one world (t->url2: half the clients to the second): the
 * double's counters once (one double), both binaries' metrics added; the server CPU is the
 * first one's only (run_phase measures one process tree). */
static void webhook_phase2(struct world *w, struct world *w2, const struct target *t, int clients,
                           double duration, struct result *r)
{
	char *m0 = NULL, *m1 = NULL;
	world_health_get(w2, "/metrics", &m0);
	webhook_phase(w, t, clients, duration, r);
	world_health_get(w2, "/metrics", &m1);
	add_metrics(r, m0 ? m0 : "", m1 ? m1 : "");
	free(m0);
	free(m1);
}

static int stop_binary(struct world *w)
{
	int status = world_stop_gmg(w, SIGTERM, 30000);
	if (status >= 0 && WIFEXITED(status))
		printf("binary: exit status %d after SIGTERM\n", WEXITSTATUS(status));
	else
		printf("binary: did not exit cleanly after SIGTERM (wait status %d)\n", status);
	if (!(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		world_dump_log(w);
		return -1;
	}
	return 0;
}

static const char *verdict(int met)
{
	return met ? "met" : "NOT MET";
}

/* ---- the scheduler extender (--extender) ---- */

#define EXT_BODIES 256 /* distinct ExtenderArgs, cycled */
/* Distinct pods among them: the extender counts each pod its filter passed until the watch
 * cache shows it bound (lib/cluster/holds.h); kube-scheduler binds each within milliseconds,
 * so a burst has a handful in flight, but the benchmark's pods are never bound: bodies k and
 * k + EXT_IN_FLIGHT are the same pod (its hold replaced), so at most this many are in flight.
 * Even, so that a pod keeps its size (k's parity). */
#define EXT_IN_FLIGHT       8
#define EXT_PATH_FILTER     "/scheduler/filter"
#define EXT_PATH_PRIORITIZE "/scheduler/prioritize"

/* ExtenderArgs as kube-scheduler sends them with nodeCacheCapable: true: {"Pod": the v1.Pod,
 * "Nodes": null, "NodeNames": every GPU node}. Pod k % EXT_IN_FLIGHT is a Pending pod not in the
 * world; even k:
 * 1 GPU declaring 10Gi (fits on every node), odd k: 8 GPUs declaring 500Gi (fails where the
 * world's pods leave less). Caller frees. */
static char *ext_args(long k, const struct opts *o)
{
	char pod[4096], name[64], node[32];
	size_t cap, len;
	char *body;
	snprintf(name, sizeof name, "sched-%ld", k % EXT_IN_FLIGHT);
	pod_json(pod, sizeof pod, "inference", name, 900000 + k % EXT_IN_FLIGHT, NULL,
	         k % 2 ? "500Gi" : "10Gi", k % 2 ? 8 : 1);
	cap = strlen(pod) + (size_t)gpu_nodes(o) * 16 + 64;
	if (!(body = malloc(cap)))
		return NULL;
	len = (size_t)snprintf(body, cap, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[", pod);
	for (int n = 0; n < gpu_nodes(o); n++) {
		gpu_node_name(node, sizeof node, n, o);
		len += (size_t)snprintf(body + len, cap - len, "%s\"%s\"", n ? "," : "", node);
	}
	snprintf(body + len, cap - len, "]}");
	return body;
}

static int prepare_ext(struct target *t, const char *url, const char *ca_file,
                       enum answer_kind kind, const struct opts *o)
{
	t->url = url;
	t->ca_file = ca_file;
	t->kind = kind;
	t->ext_nodes = gpu_nodes(o);
	t->n = EXT_BODIES;
	if (!(t->bodies = calloc((size_t)t->n, sizeof *t->bodies)))
		return -1;
	for (long i = 0; i < t->n; i++)
		if (!(t->bodies[i] = ext_args(i, o)))
			return -1;
	return 0;
}

/* The double of a "key":number field of a log line, or NAN. */
static double log_number(const char *line, const char *key)
{
	const char *p = strstr(line, key);
	return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* The binary's log from offset *off to its end: every extender line of verb (one per call,
 * --log-level info) adds its self_ms (own time: decode to encode, without waiting) and
 * latency_ms (arrival to answer) to r. *off is moved to the end. */
static void read_ext_log(const struct world *w, long *off, const char *verb, struct result *r)
{
	char want[64], *line = NULL;
	size_t cap = 0;
	FILE *f = fopen(w->log_file, "r");
	if (!f)
		return;
	snprintf(want, sizeof want, "\"verb\":\"%s\"", verb);
	if (fseek(f, *off, SEEK_SET) == 0) {
		while (getline(&line, &cap, f) > 0) {
			double own, lat, k;
			if (!strstr(line, "\"msg\":\"extender\"") || !strstr(line, want))
				continue;
			if (!strstr(line, "\"error\":null")) {
				r->log_errors++;
				continue;
			}
			own = log_number(line, "\"self_ms\":");
			lat = log_number(line, "\"latency_ms\":");
			k = log_number(line, "\"pod\":\"inference/sched-");
			if (!isnan(own))
				push_lat(&r->own, &r->n_own, &r->cap_own, own / 1e3);
			if (!isnan(own) && !isnan(k)) {
				int odd = (long)k % 2 != 0;
				push_lat(&r->own_pod[odd], &r->n_own_pod[odd], &r->cap_own_pod[odd],
				         own / 1e3);
			}
			if (!isnan(lat))
				push_lat(&r->srvt, &r->n_srvt, &r->cap_srvt, lat / 1e3);
		}
	}
	*off = ftell(f);
	free(line);
	fclose(f);
}

static long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* One extender phase: scrape, note the log's end, run, read the log, scrape. */
static void ext_phase(struct world *w, const struct target *t, int clients, double duration,
                      struct result *r)
{
	const char *verb = t->kind == ANS_FILTER ? "filter" : "prioritize";
	char *m0 = NULL, *m1 = NULL, label[64];
	long off = file_size(w->log_file);
	world_health_get(w, "/metrics", &m0);
	apiserver_double_reset_counts(w->api);
	run_phase(t, clients, duration, w->pid, r);
	r->double_reads += double_reads(w->api);
	world_health_get(w, "/metrics", &m1);
	read_ext_log(w, &off, verb, r);
	if (!m0 || !m1)
		goto out;
	snprintf(label, sizeof label, "verb=\"%s\"", verb);
#define D(name, lbl) (metric(m1, name, lbl) - metric(m0, name, lbl))
	snprintf(label, sizeof label, "verb=\"%s\",result=\"judged\"", verb);
	r->ext_judged += D("gpu_memory_guard_extender_requests_total", label);
	if (t->kind == ANS_FILTER)
		r->ext_filtered_out +=
		    D("gpu_memory_guard_extender_nodes_filtered_out_total", NULL);
	r->api_get_list += D("gpu_memory_guard_api_requests_total", "verb=\"get\"") +
	                   D("gpu_memory_guard_api_requests_total", "verb=\"list\"");
#undef D
out:
	free(m0);
	free(m1);
}

/* Start nginx on a free loopback port (TLS with the world's certificate when tls) answering
 * every request, POST included, 200 with body from a file (an extender answer is larger than
 * what nginx's `return` takes in its configuration). Returns its pid (0 when not started) and
 * the URL. */
static pid_t start_nginx_static(const struct opts *o, const struct world *w, const char *body,
                                int tls, char *url, size_t url_len)
{
	char conf[HARNESS_PATHMAX + 32], errlog[HARNESS_PATHMAX + 32], file[HARNESS_PATHMAX + 32];
	FILE *f;
	pid_t pid;
	int port = harness_free_port();
	double until;
	if (!o->nginx || !strcmp(o->nginx, "none") || access(o->nginx, X_OK)) {
		printf("nginx: %s not found or disabled: no baseline\n",
		       o->nginx ? o->nginx : "(none)");
		return 0;
	}
	snprintf(file, sizeof file, "%s/answer.json", w->dir);
	snprintf(conf, sizeof conf, "%s/nginx-static.conf", w->dir);
	snprintf(errlog, sizeof errlog, "%s/nginx-error.log", w->dir);
	if (!(f = fopen(file, "w")))
		return 0;
	fputs(body, f);
	fclose(f);
	if (!(f = fopen(conf, "w")))
		return 0;
	/* The static module answers a POST 405; error_page turns that into the file, 200. */
	fprintf(f,
	        "daemon off;\nmaster_process on;\nworker_processes auto;\n%s"
	        "pid %s/nginx.pid;\nerror_log %s warn;\n"
	        "events { worker_connections 1024; }\n"
	        "http {\n  access_log off;\n"
	        "  client_body_temp_path %s/nginx-body;\n  proxy_temp_path %s/nginx-proxy;\n"
	        "  fastcgi_temp_path %s/nginx-fastcgi;\n  uwsgi_temp_path %s/nginx-uwsgi;\n"
	        "  scgi_temp_path %s/nginx-scgi;\n"
	        "  keepalive_requests 100000000;\n  keepalive_timeout 600s;\n"
	        "  client_body_buffer_size 1m;\n"
	        "  server {\n    listen 127.0.0.1:%d%s;\n",
	        geteuid() == 0 ? "user root;\n" : "", w->dir, errlog, w->dir, w->dir, w->dir,
	        w->dir, w->dir, port, tls ? " ssl" : "");
	if (tls)
		fprintf(f,
		        "    ssl_certificate %s;\n    ssl_certificate_key %s;\n"
		        "    ssl_protocols TLSv1.2 TLSv1.3;\n",
		        w->cert_file, w->key_file);
	fprintf(f,
	        "    location / {\n      root %s;\n      default_type application/json;\n"
	        "      try_files /answer.json =404;\n      error_page 405 =200 /answer.json;\n"
	        "    }\n  }\n}\n",
	        w->dir);
	fclose(f);
	pid = fork();
	if (pid == 0) {
		execl(o->nginx, o->nginx, "-p", w->dir, "-e", errlog, "-c", conf, (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		return 0;
	snprintf(url, url_len, "%s://127.0.0.1:%d%s", tls ? "https" : "http", port,
	         EXT_PATH_FILTER);
	until = now_s() + 10;
	while (now_s() < until) {
		struct http_req rq = {0};
		struct http_resp rs;
		int status;
		rq.url = url;
		rq.ca_file = w->ca_file;
		rq.body = "{}";
		rq.body_len = 2;
		rq.content_type = "application/json";
		rq.timeout_ms = 2000;
		if (http_do(NULL, &rq, &rs) == 0 && rs.code == 200 && rs.len == strlen(body)) {
			http_resp_free(&rs);
			return pid;
		}
		http_resp_free(&rs);
		if (waitpid(pid, &status, WNOHANG) == pid) {
			char *log = harness_read_file(errlog, NULL);
			printf("nginx: exited at start (status %d): %s\n", status, log ? log : "");
			free(log);
			return 0;
		}
		usleep(50 * 1000);
	}
	printf("nginx: not answering the file after 10 s\n");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}

static void print_ext_result(const struct result *r, int ext_nodes)
{
	print_result(r);
	if (r->n_own > 0) {
		qsort(r->own, (size_t)r->n_own, sizeof *r->own, cmp_double);
		qsort(r->srvt, (size_t)r->n_srvt, sizeof *r->srvt, cmp_double);
		printf("  %-28s own time per call (log self_ms, %ld calls): p50 %.3f ms, p99 %.3f "
		       "ms, p99.9 %.3f ms, max %.3f ms; server time (arrival to answer) p50 %.3f "
		       "ms, p99 %.3f ms\n",
		       "", r->n_own, pct(r->own, r->n_own, 0.5) * 1e3,
		       pct(r->own, r->n_own, 0.99) * 1e3, pct(r->own, r->n_own, 0.999) * 1e3,
		       r->own[r->n_own - 1] * 1e3, pct(r->srvt, r->n_srvt, 0.5) * 1e3,
		       pct(r->srvt, r->n_srvt, 0.99) * 1e3);
		for (int k = 0; k < 2; k++) {
			qsort(r->own_pod[k], (size_t)r->n_own_pod[k], sizeof(double), cmp_double);
			printf("  %-28s own time, %s: p50 %.3f ms, p99 %.3f ms (%ld calls)\n", "",
			       k ? "8-GPU pods declaring 500Gi" : "1-GPU pods declaring 10Gi",
			       pct(r->own_pod[k], r->n_own_pod[k], 0.5) * 1e3,
			       pct(r->own_pod[k], r->n_own_pod[k], 0.99) * 1e3, r->n_own_pod[k]);
		}
	}
	if (r->ext_judged > 0)
		printf("  %-28s metrics: %.0f calls judged (the clients' warm-up calls are "
		       "passthrough); API get+list %.0f, double reads %lu; %ld log lines with an "
		       "error\n",
		       "", r->ext_judged, r->api_get_list, r->double_reads, r->log_errors);
	if (r->ok > 0 && r->passed > 0)
		printf("  %-28s nodes per call: %d named, %.1f passed, %.1f filtered out "
		       "(gpu_memory_guard_extender_nodes_filtered_out_total)\n",
		       "", ext_nodes, (double)r->passed / (double)r->ok,
		       r->ext_judged > 0 ? r->ext_filtered_out / r->ext_judged : NAN);
}

static void free_result(struct result *r)
{
	free(r->lat);
	free(r->own);
	free(r->srvt);
	free(r->own_pod[0]);
	free(r->own_pod[1]);
}

/*
 * The extender's benchmark: a world of --nodes GPU nodes (500) with their pods, the binary with
 * --cache watch, --scheduler-listen and --log-level info (one line per judged call with its
 * self_ms), then --rounds rounds of six phases of --duration seconds: filter, prioritize and
 * nginx (a copy of a filter answer) with one client (kube-scheduler calls an extender from its
 * scheduling cycle, one pod at a time), then the same with --clients clients.
 */
static int ext_main(const struct opts *o, const char *load0)
{
	struct world w;
	struct target tf1 = {0}, tp1 = {0}, ngx = {0};
	struct result rf1 = {.name = "filter, 1 client", .ext = 1},
	              rp1 = {.name = "prioritize, 1 client", .ext = 1},
	              rn1 = {.name = "nginx static, 1 client", .ext = 1},
	              rfn = {.name = "filter, N clients", .ext = 1},
	              rpn = {.name = "prioritize, N clients", .ext = 1},
	              rnn = {.name = "nginx static, N clients", .ext = 1};
	char listen[64], url_f[160], url_p[160], nginx_url[160] = "", load1[64], *ready = NULL;
	const char *extra[12];
	int rc = 1, ne = 0, sched_port = harness_free_port();
	double t0;
	pid_t nginx = 0;
	long cached_pods = 0, cached_nodes = 0;

	if (world_init(&w, 0)) {
		fprintf(stderr, "gmg-bench: set-up failed\n");
		return 1;
	}
	t0 = now_s();
	if (build_world(&w, o)) {
		fprintf(stderr, "gmg-bench: building the world failed\n");
		goto out;
	}
	printf("world: %d nodes (%d GPU nodes, 8 x 81559 MiB, GFD labels; %d CPU nodes), %ld "
	       "pods (%ld GPU pods declaring GPU_MEMORY_LIMIT 4-16Gi, %ld of them unscheduled; "
	       "%ld plain pods), plus the fixtures; loaded in %.1f s\n",
	       o->nodes, gpu_nodes(o), o->cpu_nodes, o->pods, o->gpu_pods, pending_pods(o),
	       o->pods - o->gpu_pods, now_s() - t0);
	snprintf(listen, sizeof listen, "127.0.0.1:%d", sched_port);
	extra[ne++] = "--log-level";
	extra[ne++] = "info"; /* the extender's line per call carries its own time */
	extra[ne++] = "--scheduler-listen";
	extra[ne++] = listen;
	if (o->threads) {
		extra[ne++] = "--threads";
		extra[ne++] = o->threads;
	}
	if (o->workers) {
		extra[ne++] = "--workers";
		extra[ne++] = o->workers;
	}
	extra[ne] = NULL;
	w.cache_mode = "watch";
	if (world_start_gmg(&w, extra, 30000))
		goto out;
	for (t0 = now_s();; usleep(20 * 1000)) {
		free(ready);
		ready = NULL;
		if (world_health_get(&w, "/readyz", &ready) == 200 && ready &&
		    strstr(ready, "cache: synced (") &&
		    sscanf(strstr(ready, "cache: synced (") + 15, "%ld pods, %ld nodes",
		           &cached_pods, &cached_nodes) == 2 &&
		    cached_pods >= o->pods && cached_nodes >= o->nodes)
			break;
		if (now_s() - t0 > 300) {
			printf("sync: not synced after 300 s; /readyz: %s\n", ready ? ready : "");
			goto out;
		}
	}
	printf("sync: --cache watch, %ld pods and %ld nodes cached\n", cached_pods, cached_nodes);
	if (o->ext_tls) {
		snprintf(url_f, sizeof url_f, "https://127.0.0.1:%d%s", w.port, EXT_PATH_FILTER);
		snprintf(url_p, sizeof url_p, "https://127.0.0.1:%d%s", w.port,
		         EXT_PATH_PRIORITIZE);
	} else {
		snprintf(url_f, sizeof url_f, "http://127.0.0.1:%d%s", sched_port, EXT_PATH_FILTER);
		snprintf(url_p, sizeof url_p, "http://127.0.0.1:%d%s", sched_port,
		         EXT_PATH_PRIORITIZE);
	}
	if (prepare_ext(&tf1, url_f, w.ca_file, ANS_FILTER, o) ||
	    prepare_ext(&tp1, url_p, w.ca_file, ANS_PRIORITIZE, o)) {
		fprintf(stderr, "gmg-bench: preparing ExtenderArgs failed\n");
		goto out;
	}
	{
		/* nginx answers a copy of the filter's answer to the first (10Gi) pod. */
		struct http_req rq = {0};
		struct http_resp rs;
		long passed = 0;
		rq.url = url_f;
		rq.ca_file = w.ca_file;
		rq.body = tf1.bodies[0];
		rq.body_len = strlen(rq.body);
		rq.content_type = "application/json";
		if (http_do(NULL, &rq, &rs) || rs.code != 200 ||
		    check_ext_answer(&tf1, rs.body, &passed)) {
			printf("extender: the first filter call failed (HTTP %ld): %s\n", rs.code,
			       rs.body ? rs.body : rs.error);
			http_resp_free(&rs);
			world_dump_log(&w);
			goto out;
		}
		printf("ExtenderArgs: %d distinct, %zu-%zu bytes, NodeNames form, %d nodes each; "
		       "half a 1-GPU pod declaring 10Gi, half an 8-GPU pod declaring 500Gi; first "
		       "filter answer %zu bytes, %ld nodes passed\n",
		       EXT_BODIES, strlen(tf1.bodies[0]), strlen(tf1.bodies[1]), gpu_nodes(o),
		       rs.len, passed);
		nginx = start_nginx_static(o, &w, rs.body, o->ext_tls, nginx_url, sizeof nginx_url);
		http_resp_free(&rs);
	}
	if (nginx) {
		ngx = tf1;
		ngx.url = nginx_url;
		printf("nginx: %s, answering a copy of that filter answer to every POST\n",
		       nginx_url);
	}
	printf("load: %s, %d rounds x 6 phases x %.0f s: filter, prioritize, nginx with 1 client, "
	       "then with %d clients (keep-alive, one connection each)\n",
	       o->ext_tls ? "the TLS listener"
	                  : "the plain scheduler listener (--scheduler-listen)",
	       o->rounds, o->duration, o->clients);
	for (int r = 0; r < o->rounds; r++) {
		ext_phase(&w, &tf1, 1, o->duration, &rf1);
		ext_phase(&w, &tp1, 1, o->duration, &rp1);
		if (nginx)
			run_phase(&ngx, 1, o->duration, nginx, &rn1);
		ext_phase(&w, &tf1, o->clients, o->duration, &rfn);
		ext_phase(&w, &tp1, o->clients, o->duration, &rpn);
		if (nginx)
			run_phase(&ngx, o->clients, o->duration, nginx, &rnn);
	}
	if (stop_binary(&w))
		goto out;
	stop_nginx(nginx);
	nginx = 0;
	loadavg(load1, sizeof load1);

	printf("\nresults (same client, same run):\n");
	print_ext_result(&rf1, gpu_nodes(o));
	print_ext_result(&rp1, gpu_nodes(o));
	if (nginx_url[0])
		print_result(&rn1);
	print_ext_result(&rfn, gpu_nodes(o));
	print_ext_result(&rpn, gpu_nodes(o));
	if (nginx_url[0])
		print_result(&rnn);
	printf("\n| | filter, 1 client | prioritize, 1 client | nginx, 1 client | filter, %d "
	       "clients | prioritize, %d clients | nginx, %d clients |\n|---|---|---|---|---|---|"
	       "---|\n",
	       o->clients, o->clients, o->clients);
	printf("| calls/s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", rate(&rf1), rate(&rp1),
	       rate(&rn1), rate(&rfn), rate(&rpn), rate(&rnn));
	printf("| client p50 / p99 ms | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %.2f / %.2f | "
	       "%.2f / %.2f | %.2f / %.2f |\n",
	       pct(rf1.lat, rf1.n, 0.5) * 1e3, pct(rf1.lat, rf1.n, 0.99) * 1e3,
	       pct(rp1.lat, rp1.n, 0.5) * 1e3, pct(rp1.lat, rp1.n, 0.99) * 1e3,
	       pct(rn1.lat, rn1.n, 0.5) * 1e3, pct(rn1.lat, rn1.n, 0.99) * 1e3,
	       pct(rfn.lat, rfn.n, 0.5) * 1e3, pct(rfn.lat, rfn.n, 0.99) * 1e3,
	       pct(rpn.lat, rpn.n, 0.5) * 1e3, pct(rpn.lat, rpn.n, 0.99) * 1e3,
	       pct(rnn.lat, rnn.n, 0.5) * 1e3, pct(rnn.lat, rnn.n, 0.99) * 1e3);
	printf("| own time p50 / p99 ms | %.3f / %.3f | %.3f / %.3f | - | %.3f / %.3f | %.3f / "
	       "%.3f | - |\n",
	       pct(rf1.own, rf1.n_own, 0.5) * 1e3, pct(rf1.own, rf1.n_own, 0.99) * 1e3,
	       pct(rp1.own, rp1.n_own, 0.5) * 1e3, pct(rp1.own, rp1.n_own, 0.99) * 1e3,
	       pct(rfn.own, rfn.n_own, 0.5) * 1e3, pct(rfn.own, rfn.n_own, 0.99) * 1e3,
	       pct(rpn.own, rpn.n_own, 0.5) * 1e3, pct(rpn.own, rpn.n_own, 0.99) * 1e3);
	printf("| server CPU per call us | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
	       rf1.ok ? rf1.srv_cpu / (double)rf1.ok * 1e6 : NAN,
	       rp1.ok ? rp1.srv_cpu / (double)rp1.ok * 1e6 : NAN,
	       rn1.ok ? rn1.srv_cpu / (double)rn1.ok * 1e6 : NAN,
	       rfn.ok ? rfn.srv_cpu / (double)rfn.ok * 1e6 : NAN,
	       rpn.ok ? rpn.srv_cpu / (double)rpn.ok * 1e6 : NAN,
	       rnn.ok ? rnn.srv_cpu / (double)rnn.ok * 1e6 : NAN);
	printf("\ntarget: own time per filter call over %d nodes p99 <= 1 ms:\n", gpu_nodes(o));
	printf("  1 client (kube-scheduler's pattern): p99 %.3f ms: %s\n",
	       pct(rf1.own, rf1.n_own, 0.99) * 1e3,
	       verdict(rf1.n_own > 0 && pct(rf1.own, rf1.n_own, 0.99) <= 0.001));
	printf("  %d clients: p99 %.3f ms: %s\n", o->clients, pct(rfn.own, rfn.n_own, 0.99) * 1e3,
	       verdict(rfn.n_own > 0 && pct(rfn.own, rfn.n_own, 0.99) <= 0.001));
	if (nginx_url[0])
		printf("baseline: filter throughput / nginx static: %.2fx (1 client), %.2fx (%d "
		       "clients)\n",
		       rate(&rf1) / rate(&rn1), rate(&rfn) / rate(&rnn), o->clients);
	printf("API calls during the load: %.0f get+list (binary's metrics), %lu reads at the "
	       "double\n",
	       rf1.api_get_list + rp1.api_get_list + rfn.api_get_list + rpn.api_get_list,
	       rf1.double_reads + rp1.double_reads + rfn.double_reads + rpn.double_reads);
	printf("\nload average at start: %s; at end: %s (%ld CPUs)\n", load0, load1,
	       sysconf(_SC_NPROCESSORS_ONLN));
	rc = rf1.failed || rp1.failed || rn1.failed || rfn.failed || rpn.failed || rnn.failed ||
	             rf1.log_errors || rfn.log_errors || rp1.log_errors || rpn.log_errors
	         ? 1
	         : 0;
out:
	stop_nginx(nginx);
	free(ready);
	free_result(&rf1);
	free_result(&rp1);
	free_result(&rn1);
	free_result(&rfn);
	free_result(&rpn);
	free_result(&rnn);
	free_target(&tf1);
	free_target(&tp1);
	world_free(&w);
	return rc;
}

/* Poll w's /readyz every 20 ms until its cache holds the whole world; seconds since t0, or NAN
 * after 300 s (message printed). */
static double wait_synced(struct world *w, const struct opts *o, double t0, long *pods, long *nodes)
{
	char *ready = NULL;
	double s = NAN;
	for (;;) {
		long code;
		free(ready);
		ready = NULL;
		code = world_health_get(w, "/readyz", &ready);
		if (code == 200 && ready && strstr(ready, "cache: synced (") &&
		    sscanf(strstr(ready, "cache: synced (") + 15, "%ld pods, %ld nodes", pods,
		           nodes) == 2 &&
		    *pods >= o->pods && *nodes >= o->nodes) {
			s = now_s() - t0;
			break;
		}
		if (now_s() - t0 > 300) {
			printf("sync: not synced after 300 s; /readyz: %s\n", ready ? ready : "");
			break;
		}
		usleep(20 * 1000);
	}
	free(ready);
	return s;
}

/* The cache's bytes after the sync (gpu_memory_guard_cache_bytes and its parts, when the
 * binary exports them) and the bytes per plain pod (the compact store's) and per GPU pod (the
 * whole pods': GPU pods, and plain pods the compact store cannot keep). */
static void print_cache_bytes(struct world *w, long pods, long rss_kb, const struct opts *o,
                              double *per_plain, double *per_gpu)
{
	char *m = NULL;
	world_health_get(w, "/metrics", &m);
	double total = m ? harness_metric(m, "gpu_memory_guard_cache_bytes", NULL, 1) : -1;
	double compact =
	    m ? harness_metric(m, "gpu_memory_guard_cache_part_bytes", "part=\"compact_pods\"", 1)
	      : -1;
	double whole =
	    m ? harness_metric(m, "gpu_memory_guard_cache_part_bytes", "part=\"pods\"", 1) : -1;
	double nodes =
	    m ? harness_metric(m, "gpu_memory_guard_cache_part_bytes", "part=\"nodes\"", 1) : -1;
	double ncompact =
	    m ? harness_metric(m, "gpu_memory_guard_cache_compact_pods", NULL, 1) : -1;
	free(m);
	printf("RSS per cached pod: %.0f bytes (RSS after sync / pods; %ld plain, %ld GPU pods in "
	       "the world)\n",
	       rss_kb * 1024.0 / (double)(pods > 0 ? pods : 1), o->pods - o->gpu_pods, o->gpu_pods);
	if (total < 0 || compact < 0 || ncompact < 0) {
		printf("cache bytes: not exported by this binary (gpu_memory_guard_cache_bytes)\n");
		return;
	}
	*per_plain = ncompact > 0 ? compact / ncompact : NAN;
	*per_gpu = pods - ncompact > 0 ? whole / ((double)pods - ncompact) : NAN;
	printf("cache bytes: %.1f MiB (gpu_memory_guard_cache_bytes): compact pods %.1f MiB for "
	       "%.0f pods, whole pods %.1f MiB for %.0f pods, nodes %.1f MiB for %ld nodes; bytes "
	       "per plain pod %.1f, per GPU pod %.1f, per node %.0f\n",
	       total / 1048576.0, compact / 1048576.0, ncompact, whole / 1048576.0,
	       (double)pods - ncompact, nodes / 1048576.0, (long)o->nodes, *per_plain, *per_gpu,
	       nodes / (double)o->nodes);
}

/* Replica index of w started with flags and synced; *up set once r needs world_free. 0 or -1. */
static int start_replica(struct world *r, struct world *w, int index, const char *const *flags,
                         const struct opts *o, int *up, const char *what)
{
	long pods = 0, nodes = 0;
	double t0, synced;
	if (world_replica_init(r, w, index))
		return -1;
	*up = 1;
	t0 = now_s();
	if (world_start_gmg(r, flags, 30000) ||
	    isnan(synced = wait_synced(r, o, t0, &pods, &nodes)))
		return -1;
	printf("shared: %s, %ld pods synced in %.2f s\n", what, pods, synced);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	struct world w, sw, rw, rw2;
	struct target place = {0}, upd = {0}, ngx = {0}, small = {0}, place_sh = {0},
	              place_sh2 = {0};
	struct result rp = {.name = "placements (cache)"}, rsh = {.name = "placements (shared)"},
	              rsh2 = {.name = "placements (shared, 2 wr.)"},
	              ru = {.name = "pod UPDATE (no API call)"}, rn = {.name = "nginx static 200"},
	              ra = {.name = "placements (API path)"};
	char *hargv[3], *ready = NULL, *nginx_body = NULL, nginx_url[128] = "", cpu[256], date[64];
	char load0[64], load1[64], ngx_rate[32] = "-";
	const char *extra[12], *extra_sh[20];
	pid_t nginx = 0;
	int rc = 1, world_up = 0, small_up = 0, shared_up = 0, shared2_up = 0, ne;
	long hwm_sync = -1, rss_sync = -1, hwm_load = -1, rss_load = -1, cached_pods = 0,
	     cached_nodes = 0;
	double per_plain[1] = {NAN}, per_gpu[1] = {NAN};
	double t0, build_s, sync_s = NAN, sync_cpu0;
	struct utsname u;
	time_t now = time(NULL);

	if (parse(argc, argv, &o)) {
		fprintf(
		    stderr,
		    "usage: gmg-bench --binary PATH [--scale] [--nodes N] [--cpu-nodes N] [--pods "
		    "N] "
		    "[--gpu-pods N] [--clients N] [--duration S] [--rounds N] "
		    "[--nginx PATH|none] [--api-nodes N] [--api-pods-per-node N] "
		    "[--api-duration S] [--api-delay-ms N] [--no-api-path] [--no-shared] "
		    "[--shared-writers 1|2] "
		    "[--threads N] "
		    "[--workers N] [--data DIR]\n"
		    "       gmg-bench --extender|--ext-tls --binary PATH [--nodes N] [--pods N] "
		    "[--gpu-pods N] [--clients N] [--duration S] [--rounds N] [--nginx PATH|none] "
		    "[--threads N] [--workers N]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	loadavg(load0, sizeof load0);
	cpu_model(cpu, sizeof cpu);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
	uname(&u);
	printf("machine: %ld CPUs (nproc), %s, %s %s, %s\n", sysconf(_SC_NPROCESSORS_ONLN), cpu,
	       u.sysname, u.release, date);
	printf("load average at start: %s\n", load0);
	hargv[0] = argv[0];
	hargv[1] = (char *)o.binary;
	hargv[2] = (char *)o.data;
	if (!getenv("GMG_TEST_DATA"))
		setenv("GMG_TEST_DATA", o.data, 1);
	harness_init(3, hargv);
	if (o.extender)
		return ext_main(&o, load0);
	ne = gmg_args(&o, extra);
	/* The same binary with the shared backend: a Lease per GPU node in gmg-bench. */
	memcpy(extra_sh, extra, sizeof(*extra) * (size_t)ne);
	extra_sh[ne++] = "--reservations";
	extra_sh[ne++] = "shared";
	extra_sh[ne++] = "--reservations-namespace";
	extra_sh[ne++] = "gmg-bench";
	extra_sh[ne] = NULL;

	/* 1. The big world. */
	t0 = now_s();
	if (world_init(&w, 0)) {
		fprintf(stderr, "gmg-bench: set-up failed\n");
		return 1;
	}
	world_up = 1;
	if (build_world(&w, &o)) {
		fprintf(stderr, "gmg-bench: building the world failed\n");
		goto out;
	}
	build_s = now_s() - t0;
	printf("world: %d nodes (%d GPU nodes, 8 x 81559 MiB, GFD labels; %d CPU nodes), %ld "
	       "pods (%ld GPU pods declaring GPU_MEMORY_LIMIT, %ld of them unscheduled; %ld plain "
	       "pods), plus the fixtures; loaded into the test double in %.1f s\n",
	       o.nodes, gpu_nodes(&o), o.cpu_nodes, o.pods, o.gpu_pods, pending_pods(&o),
	       o.pods - o.gpu_pods, build_s);

	/* 2. The binary with the watch cache: sync time and RSS. */
	w.cache_mode = "watch";
	t0 = now_s();
	sync_cpu0 = self_cpu();
	if (world_start_gmg(&w, extra, 30000))
		goto out;
	if (isnan(sync_s = wait_synced(&w, &o, t0, &cached_pods, &cached_nodes)))
		goto out;
	rss_kib(w.pid, &hwm_sync, &rss_sync);
	printf("sync: --cache watch, fork to /readyz \"cache: synced (%ld pods, %ld nodes)\" in "
	       "%.2f s (polled every 20 ms); RSS %.1f MiB, peak (VmHWM) %.1f MiB\n",
	       cached_pods, cached_nodes, sync_s, rss_sync / 1024.0, hwm_sync / 1024.0);
	/* Where the sync's time goes on these 2 CPUs: the binary's own CPU (decoding the pages,
	 * storing) against this process's (the test double encoding and serving them, and the
	 * readiness polls). A real API server runs elsewhere. */
	printf("sync CPU: the binary %.2f s, gmg-bench (the test double serving the LIST) %.2f s, "
	       "over %.2f s of wall time\n",
	       proc_cpu(w.pid), self_cpu() - sync_cpu0, sync_s);
	print_cache_bytes(&w, cached_pods, rss_sync, &o, per_plain, per_gpu);

	/* 2b. A second process of the same binary with --reservations shared, started after the
	 * first one's sync (its figures unchanged): a replica of the world (same double). 2c. With
	 * --shared-writers 2, a third one like it, writing the same Leases. */
	if (o.shared &&
	    start_replica(&rw, &w, 0, extra_sh, &o, &shared_up,
	                  "a second process with --reservations shared "
	                  "--reservations-namespace gmg-bench (Leases at the test double)"))
		goto out;
	if (o.shared && o.shared_writers == 2 &&
	    start_replica(&rw2, &w, 1, extra_sh, &o, &shared2_up,
	                  "a third process like the second (2 writers of the same Leases)"))
		goto out;

	/* 3. Placements, UPDATEs and nginx, interleaved. */
	if (prepare_placements(&place, &w, &o) || prepare_updates(&upd, &w)) {
		fprintf(stderr, "gmg-bench: preparing reviews failed\n");
		goto out;
	}
	{
		struct http_resp rs;
		struct review_answer a;
		if (world_review(&w, place.bodies[0], &rs, &a) == 0)
			nginx_body = strdup(rs.body);
		http_resp_free(&rs);
	}
	if (nginx_body && (nginx = start_nginx(&o, &w, nginx_body, nginx_url, sizeof nginx_url))) {
		ngx.url = nginx_url;
		ngx.ca_file = w.ca_file;
		ngx.bodies = place.bodies; /* the same requests; the answer is fixed */
		ngx.n = place.n;
		printf("nginx: %s, %d workers, answering %zu bytes (a copy of the webhook's "
		       "answer) to every POST\n",
		       nginx_url, (int)sysconf(_SC_NPROCESSORS_ONLN), strlen(nginx_body));
	}
	printf("load: %d keep-alive TLS clients, %d rounds x %.0f s per phase; placements: %d "
	       "distinct reviews (half pod CREATE with nodeName 1Gi, half pods/binding of "
	       "unscheduled 2Gi pods) over the GPU nodes\n",
	       o.clients, o.rounds, o.duration, PLACEMENTS);
	if (shared_up) {
		place_sh = place; /* the same reviews (bodies shared, not freed twice) */
		place_sh.url = rw.url;
	}
	if (shared2_up) {
		place_sh2 = place_sh; /* half the clients to each writer */
		place_sh2.url2 = rw2.url;
	}
	for (int r = 0; r < o.rounds; r++) {
		webhook_phase(&w, &place, o.clients, o.duration, &rp);
		if (shared_up)
			webhook_phase(&rw, &place_sh, o.clients, o.duration, &rsh);
		if (shared2_up)
			webhook_phase2(&rw, &rw2, &place_sh2, o.clients, o.duration, &rsh2);
		webhook_phase(&w, &upd, o.clients, o.duration, &ru);
		if (nginx)
			run_phase(&ngx, o.clients, o.duration, nginx, &rn);
	}
	rss_kib(w.pid, &hwm_load, &rss_load);
	{
		char *m = NULL;
		world_health_get(&w, "/metrics", &m);
		printf("after the load: in-flight reservations in the ledger: %.0f "
		       "(gpu_memory_guard_ledger_reservations)\n",
		       m ? metric(m, "gpu_memory_guard_ledger_reservations", NULL) : NAN);
		free(m);
	}
	free(ready);
	ready = NULL;
	world_health_get(&w, "/readyz", &ready);
	for (char *c = ready; c && *c; c++)
		if (*c == '\n')
			*c = c[1] ? ';' : '\0';
	printf("after the load: RSS %.1f MiB, peak (VmHWM) %.1f MiB; /readyz: %s\n",
	       rss_load / 1024.0, hwm_load / 1024.0, ready ? ready : "");
	if (shared2_up) {
		if (stop_binary(&rw2))
			goto out;
		world_free(&rw2);
		shared2_up = 0;
	}
	if (shared_up) {
		if (stop_binary(&rw))
			goto out;
		world_free(&rw);
		shared_up = 0;
	}
	if (stop_binary(&w))
		goto out;
	stop_nginx(nginx);
	nginx = 0;
	world_free(&w);
	world_up = 0;

	/* The API path on the small world, as before the cache. */
	if (o.api_path) {
		small_up = 1; /* world_init clears sw first: world_free is safe after it */
		if (world_init(&sw, 0) || setup_small(&sw, &o) || prepare_small(&small, &sw, &o)) {
			fprintf(stderr, "gmg-bench: small world set-up failed\n");
			goto out;
		}
		sw.cache_mode = "off";
		if (world_start_gmg(&sw, extra, 30000))
			goto out;
		apiserver_double_set_delay_ms(sw.api, o.api_delay_ms);
		printf("API path: --cache off, %d GPU nodes x %d declared pods, API delay %u ms, "
		       "%.0f s\n",
		       o.api_nodes, o.api_pods_per_node, o.api_delay_ms, o.api_duration);
		webhook_phase(&sw, &small, o.clients, o.api_duration, &ra);
		if (stop_binary(&sw))
			goto out;
	}

	/* 4, 5. Report. */
	loadavg(load1, sizeof load1);
	printf("\nresults (same client, same run):\n");
	print_result(&rp);
	if (o.shared)
		print_result(&rsh);
	if (o.shared && o.shared_writers == 2)
		print_result(&rsh2);
	print_result(&ru);
	if (nginx_url[0])
		print_result(&rn);
	if (o.api_path)
		print_result(&ra);
	printf("\n| | placements (cache) | placements (cache, --reservations shared) | pod UPDATE "
	       "| nginx static 200 | placements (API path, small world) |\n"
	       "|---|---|---|---|---|---|\n");
	if (nginx_url[0])
		snprintf(ngx_rate, sizeof ngx_rate, "%.0f", rate(&rn));
	/* Columns not measured (no nginx, --no-shared, --no-api-path) print nan. */
	printf("| reviews/s | %.0f | %.0f | %.0f | %s | %.0f |\n", rate(&rp), rate(&rsh), rate(&ru),
	       ngx_rate, rate(&ra));
	printf("| client p50 / p99 ms | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | "
	       "%.2f / %.2f |\n",
	       pct(rp.lat, rp.n, 0.5) * 1e3, pct(rp.lat, rp.n, 0.99) * 1e3,
	       pct(rsh.lat, rsh.n, 0.5) * 1e3, pct(rsh.lat, rsh.n, 0.99) * 1e3,
	       pct(ru.lat, ru.n, 0.5) * 1e3, pct(ru.lat, ru.n, 0.99) * 1e3,
	       pct(rn.lat, rn.n, 0.5) * 1e3, pct(rn.lat, rn.n, 0.99) * 1e3,
	       pct(ra.lat, ra.n, 0.5) * 1e3, pct(ra.lat, ra.n, 0.99) * 1e3);
	printf("| own time p50 / p99 ms | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | - | %.3f / "
	       "%.3f |\n",
	       self_quantile(&rp, 0.5) * 1e3, self_quantile(&rp, 0.99) * 1e3,
	       self_quantile(&rsh, 0.5) * 1e3, self_quantile(&rsh, 0.99) * 1e3,
	       self_quantile(&ru, 0.5) * 1e3, self_quantile(&ru, 0.99) * 1e3,
	       self_quantile(&ra, 0.5) * 1e3, self_quantile(&ra, 0.99) * 1e3);
	printf("| server time mean ms | %.3f | %.3f | %.3f | - | %.3f |\n",
	       rp.srv_cnt > 0 ? rp.srv_sum / rp.srv_cnt * 1e3 : NAN,
	       rsh.srv_cnt > 0 ? rsh.srv_sum / rsh.srv_cnt * 1e3 : NAN,
	       ru.srv_cnt > 0 ? ru.srv_sum / ru.srv_cnt * 1e3 : NAN,
	       ra.srv_cnt > 0 ? ra.srv_sum / ra.srv_cnt * 1e3 : NAN);
	printf("| server CPU per request us | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
	       rp.ok ? rp.srv_cpu / (double)rp.ok * 1e6 : NAN,
	       rsh.ok ? rsh.srv_cpu / (double)rsh.ok * 1e6 : NAN,
	       ru.ok ? ru.srv_cpu / (double)ru.ok * 1e6 : NAN,
	       rn.ok ? rn.srv_cpu / (double)rn.ok * 1e6 : NAN,
	       ra.ok ? ra.srv_cpu / (double)ra.ok * 1e6 : NAN);
	printf("| API calls per review | %.2f | %.2f get+list, %.2f Lease writes | %.2f | - | "
	       "%.2f |\n",
	       rp.self_cnt > 0 ? rp.api_get_list / rp.self_cnt : NAN,
	       rsh.self_cnt > 0 ? rsh.api_get_list / rsh.self_cnt : NAN,
	       rsh.ok > 0 ? (double)rsh.lease_writes / (double)rsh.ok : NAN,
	       ru.self_cnt > 0 ? ru.api_get_list / ru.self_cnt : NAN,
	       ra.self_cnt > 0 ? ra.api_get_list / ra.self_cnt : NAN);
	{
		int full = o.pods >= 150000 && o.nodes >= 5000;
		double place_rate = rate(&rp);
		const char *scale = full ? "" : " (world smaller than the target's)";
		printf("\ntargets:\n");
		if (nginx_url[0])
			printf("  placement throughput >= 0.5x nginx: %.0f / %.0f = %.2fx: %s\n",
			       place_rate, rate(&rn), place_rate / rate(&rn),
			       verdict(place_rate >= 0.5 * rate(&rn)));
		else
			printf("  placement throughput >= 0.5x nginx: not measured (no nginx)\n");
		printf("  placement throughput >= 0.8x the UPDATE path: %.0f / %.0f = %.2fx: %s\n",
		       place_rate, rate(&ru), place_rate / rate(&ru),
		       verdict(place_rate >= 0.8 * rate(&ru)));
		printf("  0 API calls per placement: %.0f get+list calls (webhook metrics), %lu "
		       "reads at the double, over %ld placements: %s\n",
		       rp.api_get_list, rp.double_reads, rp.ok,
		       verdict(rp.api_get_list == 0 && rp.double_reads == 0));
		printf("  own time p99 <= 1 ms: p99 ~%.3f ms, %.2f%% within 1 ms: %s\n",
		       self_quantile(&rp, 0.99) * 1e3, self_within(&rp, 0.001) * 100,
		       verdict(self_within(&rp, 0.001) >= 0.99));
		printf("  peak RSS <= 64 MiB with %ld pods cached: %.1f MiB after sync, %.1f MiB "
		       "after the load: %s%s\n",
		       cached_pods, hwm_sync / 1024.0, hwm_load / 1024.0,
		       verdict(hwm_load > 0 && hwm_load <= 64 * 1024), scale);
		printf("  initial sync of %ld pods <= 20 s: %.2f s: %s%s\n", cached_pods, sync_s,
		       verdict(sync_s <= 20), scale);
		if (o.scale) {
			printf("  --scale: RSS after sync <= 160 MiB with %ld pods: %.1f MiB: %s\n",
			       cached_pods, rss_sync / 1024.0,
			       verdict(rss_sync > 0 && rss_sync <= 160 * 1024));
			printf("  --scale: initial sync <= 30 s: %.2f s: %s (load average at start "
			       "%s)\n",
			       sync_s, verdict(sync_s <= 30), load0);
			printf("  --scale: bytes per plain pod %.1f, per GPU pod %.1f (cache_bytes "
			       "parts; a figure, no target)\n",
			       per_plain[0], per_gpu[0]);
		}
		if (o.shared)
			printf(
			    "shared vs local (a figure, no target): placements/s %.0f / %.0f = "
			    "%.2fx; client p99 %.2f vs %.2f ms; %.2f Lease writes per placement\n",
			    rate(&rsh), place_rate, rate(&rsh) / place_rate,
			    pct(rsh.lat, rsh.n, 0.99) * 1e3, pct(rp.lat, rp.n, 0.99) * 1e3,
			    rsh.ok > 0 ? (double)rsh.lease_writes / (double)rsh.ok : NAN);
		if (o.shared && o.shared_writers == 2)
			printf("2 writers vs 1 vs local (a figure, no target): placements/s %.0f / "
			       "%.0f "
			       "/ %.0f = %.2fx of one writer, %.2fx of local; client p99 %.2f ms; "
			       "%.2f "
			       "Lease writes and %.2f conflicts (409) per placement (one writer: "
			       "%.2f)\n",
			       rate(&rsh2), rate(&rsh), place_rate, rate(&rsh2) / rate(&rsh),
			       rate(&rsh2) / place_rate, pct(rsh2.lat, rsh2.n, 0.99) * 1e3,
			       rsh2.ok > 0 ? (double)rsh2.lease_writes / (double)rsh2.ok : NAN,
			       rsh2.ok > 0 ? (double)rsh2.lease_conflicts / (double)rsh2.ok : NAN,
			       rsh.ok > 0 ? (double)rsh.lease_conflicts / (double)rsh.ok : NAN);
	}
	printf("\nload average at start: %s; at end: %s (%ld CPUs)\n", load0, load1,
	       sysconf(_SC_NPROCESSORS_ONLN));
	rc = rp.failed || rsh.failed || rsh2.failed || ru.failed || rn.failed || ra.failed ? 1 : 0;
out:
	stop_nginx(nginx);
	free(ready);
	free(nginx_body);
	free(rp.lat);
	free(rsh.lat);
	free(rsh2.lat);
	free(ru.lat);
	free(rn.lat);
	free(ra.lat);
	free_target(&place);
	free_target(&upd);
	free_target(&small);
	if (shared2_up)
		world_free(&rw2); /* replicas of w: before w */
	if (shared_up)
		world_free(&rw);
	if (world_up)
		world_free(&w);
	if (small_up)
		world_free(&sw);
	return rc;
}
