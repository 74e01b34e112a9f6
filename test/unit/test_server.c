/*
 * Unit tests for lib/server: the real listeners on loopback ports, driven with libcurl.
 * Routing and status codes, body caps, TLS versions, keep-alive, health endpoints, drain.
 * The webhook behind it reads a fake cluster (an empty GPU node).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "admission.h"
#include "certgen.h"
#include "kube.h"
#include "ledger.h"
#include "log.h"
#include "metrics.h"
#include "server.h"
#include "tls.h"
#include "webhook.h"
#include "fixture.h"

#define WORKERS 6

struct fx {
	char dir[64];
	char ca[128];
	struct metrics *metrics;
	struct ledger *ledger;
	struct webhook *webhook;
	struct tls_store *tls;
	struct server *server;
	uint16_t port, health_port;
	cJSON *node;
};

static struct fx F;

static int get_pod(void *ctx, const char *ns, const char *name, cJSON **pod, long *code, char *err,
                   size_t errlen)
{
	*code = 404;
	snprintf(err, errlen, "pods \"%s\" not found", name);
	return KUBE_ENOTFOUND;
}

/* A gate in front of GET node: while closed, reviews that ask for a node wait (a hung API
 * server), and `inside` counts them. */
static atomic_int gate_closed, inside;

static int get_node(void *ctx, const char *name, cJSON **node, long *code, char *err, size_t errlen)
{
	if (atomic_load(&gate_closed)) {
		atomic_fetch_add(&inside, 1);
		while (atomic_load(&gate_closed))
			usleep(1000);
		atomic_fetch_sub(&inside, 1);
	}
	*node = cJSON_Duplicate(F.node, 1);
	*code = 200;
	return 0;
}

static int list_pods(void *ctx, const char *node, cJSON **items, long *code, char *err,
                     size_t errlen)
{
	*items = cJSON_CreateArray();
	*code = 200;
	return 0;
}

static int group_setup(void **state)
{
	char err[512], bundle[CERTGEN_BUNDLE_MAX], out[96], cert[128], key[128];
	size_t len;
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	log_set_fd(devnull);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(F.dir, sizeof(F.dir), "/tmp/gmg-server-XXXXXX");
	if (mkdtemp(F.dir) == NULL)
		return -1;
	struct certgen_opts o;
	certgen_opts_init(&o);
	snprintf(out, sizeof(out), "%s/certs", F.dir);
	o.out_dir = out;
	o.ip[o.n_ip++] = "127.0.0.1";
	if (certgen_generate(&o, bundle, sizeof(bundle), err, sizeof(err)) != 0) {
		fprintf(stderr, "certgen: %s\n", err);
		return -1;
	}
	snprintf(F.ca, sizeof(F.ca), "%s/ca.crt", out);
	snprintf(cert, sizeof(cert), "%s/tls.crt", out);
	snprintf(key, sizeof(key), "%s/tls.key", out);
	char *node = fixture_read("node-gpu-node-a.json", &len);
	F.node = node ? cJSON_Parse(node) : NULL;
	free(node);
	F.metrics = metrics_new();
	F.ledger = ledger_new(60000);
	struct placer_source src = {NULL, get_pod, get_node, list_pods};
	struct webhook_config wc = {.threshold = 0.9, .warn_threshold = 0.8};
	F.webhook = webhook_new(&wc, &src, F.ledger, F.metrics);
	F.tls = tls_store_new(cert, key, F.metrics, err, sizeof(err));
	if (F.node == NULL || F.webhook == NULL || F.tls == NULL)
		return -1;
	struct server_options so = {.listen_host = "127.0.0.1",
	                            .health_host = "127.0.0.1",
	                            .threads = 2,
	                            .workers = WORKERS,
	                            .connection_timeout_s = 5,
	                            /* the test certificate (365 days) is inside this window */
	                            .cert_warn_s = 400 * 86400};
	struct server_route routes[] = {webhook_route(F.webhook)};
	F.server = server_start(&so, routes, 1, F.tls, F.metrics, err, sizeof(err));
	if (F.server == NULL) {
		fprintf(stderr, "server_start: %s\n", err);
		return -1;
	}
	server_ports(F.server, &F.port, &F.health_port);
	return 0;
}

static int group_teardown(void **state)
{
	char cmd[128];
	server_free(F.server);
	tls_store_free(F.tls);
	webhook_free(F.webhook);
	ledger_free(F.ledger);
	metrics_free(F.metrics);
	cJSON_Delete(F.node);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", F.dir);
	if (system(cmd) != 0)
		return -1;
	curl_global_cleanup();
	return 0;
}

struct reply {
	long code;
	CURLcode rc;
	char body[65536];
	size_t len;
	char allow[64];
	long connects;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct reply *r = ud;
	size_t k = size * n;
	if (r->len + k < sizeof(r->body)) {
		memcpy(r->body + r->len, p, k);
		r->len += k;
		r->body[r->len] = '\0';
	}
	return k;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct reply *r = ud;
	if (strncasecmp(p, "Allow:", 6) == 0)
		snprintf(r->allow, sizeof(r->allow), "%.*s", (int)(size * n - 6), p + 6);
	return size * n;
}

struct req {
	const char *method; /* NULL: POST when body, else GET */
	const char *path;
	int health;        /* the plain-HTTP listener */
	const char *ctype; /* NULL: application/json */
	const char *body;
	size_t body_len;
	int chunked;
	long tls_max; /* CURL_SSLVERSION_MAX_* or 0 */
	long tls_min;
	CURL *reuse;
};

static struct reply *do_req(const struct req *q)
{
	static struct reply r;
	char url[256], ctype[128];
	struct curl_slist *h = NULL;
	CURL *c = q->reuse ? q->reuse : curl_easy_init();
	memset(&r, 0, sizeof(r));
	snprintf(url, sizeof(url), "%s://127.0.0.1:%u%s", q->health ? "http" : "https",
	         q->health ? F.health_port : F.port, q->path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CAINFO, F.ca);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (q->tls_max || q->tls_min)
		curl_easy_setopt(c, CURLOPT_SSLVERSION, q->tls_min | q->tls_max);
	snprintf(ctype, sizeof(ctype), "Content-Type: %s",
	         q->ctype ? q->ctype : "application/json");
	h = curl_slist_append(h, ctype);
	if (q->chunked)
		h = curl_slist_append(h, "Transfer-Encoding: chunked");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (q->body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body);
		if (!q->chunked)
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len);
	} else {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	}
	if (q->method)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
	r.rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
	curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &r.connects);
	curl_slist_free_all(h);
	if (!q->reuse)
		curl_easy_cleanup(c);
	return &r;
}

static void test_review_200_and_keepalive(void **state)
{
	size_t len;
	char *body = fixture_read("review-binding-create.json", &len);
	assert_non_null(body);
	CURL *c = curl_easy_init();
	struct req q = {.path = "/validate", .body = body, .body_len = len, .reuse = c};
	struct reply *r = do_req(&q);
	assert_int_equal(r->rc, CURLE_OK);
	assert_int_equal(r->code, 200);
	assert_non_null(strstr(r->body, "\"uid\":\"a1b2c3d4-0003-4000-8000-000000000003\""));
	assert_non_null(strstr(r->body, "\"apiVersion\":\"admission.k8s.io/v1\""));
	/* GET pod answered 404: a denial with the uid, still HTTP 200. */
	assert_non_null(strstr(r->body, "\"allowed\":false"));
	r = do_req(&q);
	assert_int_equal(r->code, 200);
	assert_int_equal(r->connects, 0); /* the same connection */
	curl_easy_cleanup(c);
	free(body);
}

/* gpu_memory_guard_http_connections_total{listener="admission"}, from /metrics. */
static unsigned long long admission_connections(void)
{
	static const char key[] =
	    "gpu_memory_guard_http_connections_total{listener=\"admission\"} ";
	struct req q = {.path = "/metrics", .health = 1};
	struct reply *r = do_req(&q);
	assert_int_equal(r->code, 200);
	const char *p = strstr(r->body, key);
	assert_non_null(p);
	return strtoull(p + sizeof(key) - 1, NULL, 10);
}

/* Three requests on one keep-alive connection count one connection; a new connection one more.
 * (Bodies the webhook answers 400, so that the review counters other tests check stay put.) */
static void test_connections_counted(void **state)
{
	unsigned long long before = admission_connections();
	CURL *c = curl_easy_init();
	struct req q = {.path = "/validate", .body = "{}", .body_len = 2, .reuse = c};
	for (int i = 0; i < 3; i++) {
		struct reply *r = do_req(&q);
		assert_int_equal(r->code, 400);
		assert_int_equal(r->connects, i == 0 ? 1 : 0);
	}
	assert_int_equal(admission_connections(), before + 1);
	curl_easy_cleanup(c);
	q.reuse = NULL;
	assert_int_equal(do_req(&q)->code, 400);
	assert_int_equal(admission_connections(), before + 2);
}

static void test_unscheduled_allowed(void **state)
{
	size_t len;
	char *body = fixture_read("review-pod-create-unscheduled.json", &len);
	struct req q = {.path = "/validate",
	                .body = body,
	                .body_len = len,
	                .ctype = "Application/JSON; charset=utf-8"};
	struct reply *r = do_req(&q);
	assert_int_equal(r->code, 200);
	assert_non_null(strstr(r->body, "\"allowed\":true"));
	free(body);
}

static void test_routing_and_methods(void **state)
{
	struct req q = {.path = "/other", .body = "{}", .body_len = 2};
	assert_int_equal(do_req(&q)->code, 404);
	q.path = "/validate/";
	assert_int_equal(do_req(&q)->code, 404);
	struct req g = {.path = "/validate"};
	struct reply *r = do_req(&g);
	assert_int_equal(r->code, 405);
	assert_non_null(strstr(r->allow, "POST"));
	struct req put = {.method = "PUT", .path = "/validate", .body = "{}", .body_len = 2};
	assert_int_equal(do_req(&put)->code, 405);
}

static void test_bad_bodies(void **state)
{
	struct req q = {.path = "/validate", .body = "{}", .body_len = 2, .ctype = "text/plain"};
	struct reply *r = do_req(&q);
	assert_int_equal(r->code, 400);
	assert_non_null(strstr(r->body, "application/json"));
	q.ctype = "application/jsonl";
	assert_int_equal(do_req(&q)->code, 400);
	q.ctype = NULL;
	q.body = "{\"request\":";
	q.body_len = strlen(q.body);
	r = do_req(&q);
	assert_int_equal(r->code, 400);
	assert_non_null(strstr(r->body, "invalid JSON"));
	q.body = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
	         "\"request\":{\"operation\":\"CREATE\"}}";
	q.body_len = strlen(q.body);
	r = do_req(&q);
	assert_int_equal(r->code, 400);
	assert_non_null(strstr(r->body, "uid"));
	q.body = "";
	q.body_len = 0;
	assert_int_equal(do_req(&q)->code, 400);
}

static void test_body_caps(void **state)
{
	size_t big = ADMISSION_BODY_MAX + 1;
	char *body = malloc(big + 1);
	memset(body, ' ', big);
	body[big] = '\0';
	struct req q = {.path = "/validate", .body = body, .body_len = big};
	struct reply *r = do_req(&q);
	assert_int_equal(r->code, 413);
	/* The answer names the cap (its text was once sent from a stack buffer gone by then). */
	assert_non_null(strstr(r->body, "body larger than 7 MiB"));
	q.chunked = 1; /* no Content-Length: read, discarded, 413 at the end */
	r = do_req(&q);
	assert_int_equal(r->code, 413);
	assert_non_null(strstr(r->body, "body larger than 7 MiB"));
	/* Exactly the cap is read (and is not JSON: 400). */
	q.chunked = 0;
	q.body_len = ADMISSION_BODY_MAX;
	assert_int_equal(do_req(&q)->code, 400);
	free(body);
}

static void test_tls_versions(void **state)
{
	struct req q = {.path = "/validate",
	                .body = "{}",
	                .body_len = 2,
	                .tls_min = CURL_SSLVERSION_TLSv1_2,
	                .tls_max = CURL_SSLVERSION_MAX_TLSv1_2};
	assert_int_equal(do_req(&q)->code, 400);
	q.tls_min = CURL_SSLVERSION_TLSv1_3;
	q.tls_max = CURL_SSLVERSION_MAX_TLSv1_3;
	assert_int_equal(do_req(&q)->code, 400);
	q.tls_min = CURL_SSLVERSION_TLSv1_1;
	q.tls_max = CURL_SSLVERSION_MAX_TLSv1_1;
	struct reply *r = do_req(&q);
	assert_int_not_equal(r->rc, CURLE_OK);
	assert_int_equal(r->code, 0);
}

static void test_health_endpoints(void **state)
{
	struct req q = {.path = "/healthz", .health = 1};
	assert_int_equal(do_req(&q)->code, 200);
	q.path = "/readyz";
	assert_int_equal(do_req(&q)->code, 200);
	assert_non_null(
	    strstr(do_req(&q)->body, "ok\nwarning: the serving certificate expires in 36"));
	assert_true(server_ready(F.server));
	q.path = "/metrics";
	struct reply *r = do_req(&q);
	assert_int_equal(r->code, 200);
	assert_non_null(strstr(r->body, "gpu_memory_guard_reviews_total{kind=\"binding\","
	                                "decision=\"denied\"} 2\n"));
	assert_non_null(strstr(r->body, "gpu_memory_guard_http_requests_total{code=\"413\"} 2\n"));
	assert_non_null(strstr(r->body, "gpu_memory_guard_ready 1\n"));
	q.path = "/nope";
	assert_int_equal(do_req(&q)->code, 404);
	struct req p = {.path = "/healthz", .health = 1, .body = "x", .body_len = 1};
	assert_int_equal(do_req(&p)->code, 405);
}

struct slow {
	char *body;
	size_t len;
	long code;
};

static void *slow_review(void *arg)
{
	struct slow *j = arg;
	CURL *c = curl_easy_init();
	/* do_req's reply is static, so this thread drives a handle of its own. */
	char url[128];
	snprintf(url, sizeof(url), "https://127.0.0.1:%u/validate", F.port);
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CAINFO, F.ca);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->len);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &j->code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return NULL;
}

/*
 * Reviews waiting for a hung API server run on workers: they all wait side by side (more of
 * them than MHD threads), and the MHD threads keep answering other connections meanwhile.
 * No timing: the slow reviews are held at a gate until the fast one has been answered.
 */
static void test_slow_reviews_do_not_block_others(void **state)
{
	enum { N = WORKERS }; /* > the 2 MHD threads, <= the workers */
	struct slow jobs[N];
	pthread_t th[N];
	size_t len;
	char *body = fixture_read("review-pod-create-nodename.json", &len);
	atomic_store(&gate_closed, 1);
	for (int i = 0; i < N; i++) {
		jobs[i] = (struct slow){.body = body, .len = len};
		assert_int_equal(pthread_create(&th[i], NULL, slow_review, &jobs[i]), 0);
	}
	for (int i = 0; i < 10000 && atomic_load(&inside) < N; i++)
		usleep(1000);
	int waiting = atomic_load(&inside);
	char *update = fixture_read("review-pod-update.json", &len);
	struct req q = {.path = "/validate", .body = update, .body_len = len};
	struct reply *r = do_req(&q);
	CURLcode rc = r->rc;
	long code = r->code;
	atomic_store(&gate_closed, 0); /* before any assertion: never leave the server stuck */
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(waiting, N);
	assert_int_equal(rc, CURLE_OK);
	assert_int_equal(code, 200);
	for (int i = 0; i < N; i++)
		assert_int_equal(jobs[i].code, 200);
	free(body);
	free(update);
}

/*
 * Every worker held by a hung API server and one more placement queued behind them: what
 * needs no API call (an UPDATE, an unscheduled CREATE, a malformed review) is still answered
 * at once, from the MHD threads, instead of waiting in the workers' queue. No timing: the
 * placements are held at the gate until the others have been answered (or timed out).
 */
static void test_non_placements_not_queued(void **state)
{
	enum { N = WORKERS + 1 };
	struct slow jobs[N];
	pthread_t th[N];
	size_t len;
	char *body = fixture_read("review-pod-create-nodename.json", &len);
	char *update = fixture_read("review-pod-update.json", &len);
	char *unsched = fixture_read("review-pod-create-unscheduled.json", &len);
	atomic_store(&gate_closed, 1);
	for (int i = 0; i < N; i++) {
		jobs[i] = (struct slow){.body = body, .len = strlen(body)};
		assert_int_equal(pthread_create(&th[i], NULL, slow_review, &jobs[i]), 0);
	}
	for (int i = 0; i < 10000 && atomic_load(&inside) < WORKERS; i++)
		usleep(1000);
	usleep(100000); /* the last placement reaches the queue */
	int waiting = atomic_load(&inside);
	long codes[3];
	CURLcode rcs[3];
	int allowed[2];
	const char *bodies[3] = {update, unsched, "{\"request\":{}}"};
	for (int i = 0; i < 3; i++) {
		struct req q = {
		    .path = "/validate", .body = bodies[i], .body_len = strlen(bodies[i])};
		struct reply *r = do_req(&q);
		rcs[i] = r->rc;
		codes[i] = r->code;
		if (i < 2)
			allowed[i] = strstr(r->body, "\"allowed\":true") != NULL;
	}
	atomic_store(&gate_closed, 0); /* before any assertion: never leave the server stuck */
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(waiting, WORKERS);
	for (int i = 0; i < 3; i++)
		assert_int_equal(rcs[i], CURLE_OK);
	assert_int_equal(codes[0], 200);
	assert_int_equal(codes[1], 200);
	assert_int_equal(codes[2], 400);
	assert_true(allowed[0] && allowed[1]);
	for (int i = 0; i < N; i++)
		assert_int_equal(jobs[i].code, 200);
	free(body);
	free(update);
	free(unsched);
}

static void *shutdown_thread(void *arg)
{
	*(unsigned *)arg = server_shutdown(F.server, 600, 2000);
	return NULL;
}

/* SIGTERM's sequence: readiness fails first, reviews are still served during the drain, then
 * the listeners close. */
static void test_drain(void **state)
{
	pthread_t th;
	unsigned left = 99;
	assert_int_equal(pthread_create(&th, NULL, shutdown_thread, &left), 0);
	usleep(200000);
	assert_false(server_ready(F.server));
	struct req h = {.path = "/readyz", .health = 1};
	struct reply *r = do_req(&h);
	assert_int_equal(r->code, 503);
	assert_non_null(strstr(r->body, "draining"));
	size_t len;
	char *body = fixture_read("review-pod-update.json", &len);
	struct req q = {.path = "/validate", .body = body, .body_len = len};
	assert_int_equal(do_req(&q)->code, 200);
	pthread_join(th, NULL);
	assert_int_equal(left, 0);
	r = do_req(&q);
	assert_int_not_equal(r->rc, CURLE_OK); /* closed */
	free(body);
}

/* The route table: an incomplete route, none, or too many are refused at start. */
static void test_route_table_checked(void **state)
{
	(void)state;
	struct server_options so = {.listen_host = "127.0.0.1",
	                            .health_host = "127.0.0.1",
	                            .threads = 2,
	                            .workers = 2,
	                            .connection_timeout_s = 5};
	struct server_route ok = webhook_route(F.webhook), bad = ok;
	struct server_route many[SERVER_MAX_ROUTES + 1];
	char err[SERVER_ERR_MAX];

	bad.finish = NULL;
	assert_null(server_start(&so, &bad, 1, F.tls, F.metrics, err, sizeof(err)));
	assert_non_null(strstr(err, "route 0 is incomplete"));
	bad = ok;
	bad.path = "validate"; /* not a path */
	assert_null(server_start(&so, &bad, 1, F.tls, F.metrics, err, sizeof(err)));
	bad = ok;
	bad.body_max = 1000; /* under 1 MiB */
	assert_null(server_start(&so, &bad, 1, F.tls, F.metrics, err, sizeof(err)));
	assert_null(server_start(&so, &ok, 0, F.tls, F.metrics, err, sizeof(err)));
	for (size_t i = 0; i < SERVER_MAX_ROUTES + 1; i++)
		many[i] = ok;
	assert_null(
	    server_start(&so, many, SERVER_MAX_ROUTES + 1, F.tls, F.metrics, err, sizeof(err)));
	assert_non_null(strstr(err, "routes"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_review_200_and_keepalive),
	    cmocka_unit_test(test_connections_counted),
	    cmocka_unit_test(test_unscheduled_allowed),
	    cmocka_unit_test(test_routing_and_methods),
	    cmocka_unit_test(test_route_table_checked),
	    cmocka_unit_test(test_bad_bodies),
	    cmocka_unit_test(test_body_caps),
	    cmocka_unit_test(test_tls_versions),
	    cmocka_unit_test(test_health_endpoints),
	    cmocka_unit_test(test_slow_reviews_do_not_block_others),
	    cmocka_unit_test(test_non_placements_not_queued),
	    cmocka_unit_test(test_drain),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
