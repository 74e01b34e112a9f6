/*
 * Process life and operations of the real binary: health and metrics endpoints, SIGTERM drain
 * (readiness fails first, in-flight reviews complete, exit 0), reservation TTL, warn mode and
 * warn threshold, exempt namespaces, command-line errors. Each test starts its own process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

static struct world W;

static int setup(void **state)
{
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	return world_add_node(&W, "gpu-node-ok", 81559, 1);
}

static int teardown(void **state)
{
	world_free(&W);
	return 0;
}

static void start(const char *const *extra)
{
	ITEST_CHECK(world_start_gmg(&W, extra, 30000) == 0, "start the binary");
}

static void test_health_and_metrics(void **state)
{
	struct review_answer a;
	char *m = NULL, *body;
	double v;
	start(NULL);
	ITEST_CHECK(world_health_get(&W, "/healthz", NULL) == 200, "/healthz");
	ITEST_CHECK(world_health_get(&W, "/readyz", NULL) == 200, "/readyz");
	ITEST_CHECK(world_health_get(&W, "/nope", NULL) == 404, "unknown health path");
	body = harness_read_file("review-pod-create-nodename.json", NULL);
	itest_review(&W, body, "a1b2c3d4-0002-4000-8000-000000000002", 0, &a);
	free(body);
	body = harness_read_file("review-binding-create.json", NULL);
	itest_review(&W, body, "a1b2c3d4-0003-4000-8000-000000000003", 0, &a);
	free(body);
	itest_review(&W, "{\"request\":{\"uid\":\"m-other\"}}", "m-other", 1, &a);
	ITEST_CHECK(world_health_get(&W, "/metrics", &m) == 200, "/metrics");
	itest_contains(m, "gpu_memory_guard_", "metrics prefix");
	v = harness_metric(m, "gpu_memory_guard_reviews_total", NULL, 1);
	ITEST_CHECK(v == 3, "reviews_total sums to %.0f, 3 reviews were sent", v);
	v = harness_metric(m, "gpu_memory_guard_reviews_total", "kind=\"pod\",decision=\"denied\"",
	                   1);
	ITEST_CHECK(v == 1, "reviews_total{kind=pod,decision=denied} = %.0f", v);
	v = harness_metric(m, "gpu_memory_guard_reviews_total",
	                   "kind=\"binding\",decision=\"denied\"", 1);
	ITEST_CHECK(v == 1, "reviews_total{kind=binding,decision=denied} = %.0f", v);
	v = harness_metric(m, "gpu_memory_guard_review_duration_seconds_count", NULL, 1);
	ITEST_CHECK(v == 3, "review_duration_seconds_count = %.0f", v);
	v = harness_metric(m, "gpu_memory_guard_api_requests_total", NULL, 1);
	ITEST_CHECK(v >= 3 &&
	                v == (double)(apiserver_double_count(W.api, APISERVER_DOUBLE_GET_NODE) +
	                              apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD) +
	                              apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS)),
	            "api_requests_total = %.0f, the test double saw %lu", v,
	            apiserver_double_count(W.api, APISERVER_DOUBLE_GET_NODE) +
	                apiserver_double_count(W.api, APISERVER_DOUBLE_GET_POD) +
	                apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS));
	ITEST_CHECK(harness_metric(m, "gpu_memory_guard_ledger_reservations", NULL, 0) == 0,
	            "ledger gauge (nothing admitted)");
	ITEST_CHECK(harness_metric(m, "gpu_memory_guard_certificate_expiry_timestamp_seconds", NULL,
	                           0) > (double)time(NULL),
	            "certificate expiry gauge");
	free(m);
}

struct inflight {
	char *body;
	struct http_resp rs;
	struct review_answer a;
	int rc;
	double done; /* monotonic time the answer came back */
};

static void *send_review(void *arg)
{
	struct inflight *f = arg;
	f->rc = world_review(&W, f->body, &f->rs, &f->a);
	f->done = harness_now();
	return NULL;
}

static void test_sigterm_drain(void **state)
{
	static const char *const extra[] = {
	    "--drain-timeout", "1s", "--shutdown-timeout", "15s", "--api-timeout", "10s", NULL};
	struct inflight f = {0};
	struct review_answer a;
	pthread_t t;
	double t0, until;
	long ready = 200;
	int status;
	start(extra);
	f.body = harness_pod_review("drain-1", "drain-pod", "1Gi", "gpu-node-ok", 0);
	apiserver_double_set_delay_ms(W.api, 1500);
	ITEST_CHECK(pthread_create(&t, NULL, send_review, &f) == 0, "thread");
	ITEST_CHECK(apiserver_double_wait_count(W.api, APISERVER_DOUBLE_GET_NODE, 1, 10000) == 0 ||
	                apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS) > 0,
	            "the review never reached the API server");
	t0 = harness_now();
	kill(W.pid, SIGTERM);
	/* Readiness fails first, while the review is still in flight. */
	until = t0 + 1.0;
	while (harness_now() < until && (ready = world_health_get(&W, "/readyz", NULL)) == 200)
		usleep(20 * 1000);
	ITEST_CHECK(ready != 200, "/readyz still 200 %.2f s after SIGTERM", harness_now() - t0);
	/* During the drain period new reviews are still served. */
	itest_review(&W, "{\"request\":{\"uid\":\"during-drain\"}}", "during-drain", 1, &a);
	pthread_join(t, NULL);
	ITEST_CHECK(f.rc == 0 && f.rs.code == 200,
	            "in-flight review lost during shutdown: HTTP %ld (%s)", f.rs.code, f.rs.error);
	ITEST_CHECK(!strcmp(f.a.uid, "drain-1") && f.a.allowed,
	            "in-flight review: uid %s allowed %d", f.a.uid, f.a.allowed);
	ITEST_CHECK(f.done > t0 + 0.5, "the review was not in flight across SIGTERM (%.2f s)",
	            f.done - t0);
	http_resp_free(&f.rs);
	free(f.body);
	status = world_stop_gmg(&W, SIGTERM, 20000);
	ITEST_CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	            "exit after SIGTERM: wait status %d (exit %d)", status,
	            status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* --reservation-ttl 1s: two 30Gi placements fill the node (a third does not fit), and once
 * their reservations expire (the double never shows those pods) the third fits.
 * --warn-threshold 0.5: the second placement (75% of the node) carries a warning. */
static void test_reservation_ttl_and_warn_threshold(void **state)
{
	static const char *const extra[] = {"--reservation-ttl", "1s", "--warn-threshold", "0.5",
	                                    NULL};
	struct review_answer a;
	char *m = NULL, *body;
	start(extra);
	body = harness_pod_review("ttl-1", "t-1", "30Gi", "gpu-node-ok", 0);
	itest_review(&W, body, "ttl-1", 1, &a);
	ITEST_CHECK(a.warnings[0] == '\0', "38%% of the node: unexpected warning %s", a.warnings);
	free(body);
	body = harness_pod_review("ttl-2", "t-2", "30Gi", "gpu-node-ok", 0);
	itest_review(&W, body, "ttl-2", 1, &a);
	ITEST_CHECK(a.warnings[0] != '\0',
	            "75%% of the node, over --warn-threshold 0.5: no warning");
	free(body);
	ITEST_CHECK(world_health_get(&W, "/metrics", &m) == 200, "/metrics");
	ITEST_CHECK(harness_metric(m, "gpu_memory_guard_ledger_reservations", NULL, 0) == 2,
	            "ledger gauge after two placements");
	free(m);
	body = harness_pod_review("ttl-3", "t-3", "30Gi", "gpu-node-ok", 0);
	itest_review(&W, body, "ttl-3", 0, &a);
	free(body);
	usleep(1500 * 1000);
	body = harness_pod_review("ttl-3b", "t-3", "30Gi", "gpu-node-ok", 0);
	itest_review(&W, body, "ttl-3b", 1, &a);
	free(body);
}

static void test_warn_mode(void **state)
{
	static const char *const extra[] = {"--mode", "warn", NULL};
	struct review_answer a;
	char *m = NULL, *body = harness_read_file("review-pod-create-nodename.json", NULL);
	start(extra);
	itest_review(&W, body, "a1b2c3d4-0002-4000-8000-000000000002", 1, &a);
	itest_contains(a.warnings, "gpu-node-a", "warn mode: the denial text as a warning");
	free(body);
	ITEST_CHECK(world_health_get(&W, "/metrics", &m) == 200, "/metrics");
	ITEST_CHECK(harness_metric(m, "gpu_memory_guard_reviews_total", "decision=\"warned\"", 1) ==
	                1,
	            "reviews_total{decision=warned}");
	free(m);
}

static void test_exempt_namespace(void **state)
{
	static const char *const extra[] = {"--exempt-namespace", "kube-system",
	                                    "--exempt-namespace", "inference", NULL};
	struct review_answer a;
	char *body = harness_read_file("review-pod-create-nodename.json", NULL);
	start(extra);
	itest_review(&W, body, "a1b2c3d4-0002-4000-8000-000000000002", 1, &a);
	free(body);
}

/* The API server is down when the binary starts: it still starts and gets ready (readiness
 * does not depend on the API server, or an outage would take the webhook down with it), denies
 * placements meanwhile, and allows them once the API server is back. */
static void test_start_while_api_down(void **state)
{
	struct review_answer a;
	char err[256], *body = harness_pod_review("down-1", "d-1", "1Gi", "gpu-node-ok", 0);
	ITEST_CHECK(apiserver_double_stop(W.api) == 0, "stop the test double");
	start(NULL);
	itest_review(&W, body, "down-1", 0, &a);
	ITEST_CHECK(apiserver_double_start(W.api, err, sizeof err) == 0, "restart: %s", err);
	free(body);
	body = harness_pod_review("down-2", "d-1", "1Gi", "gpu-node-ok", 0);
	itest_review(&W, body, "down-2", 1, &a);
	free(body);
}

/* kubeconfig with client-certificate-data / client-key-data and no token: the binary
 * authenticates to an API server (test double) that trusts the client CA; a client
 * certificate from another CA gets 401, which denies (fail closed). */
static void test_kubeconfig_client_certificate(void **state)
{
	struct apiserver_double_opts o = {0};
	struct apiserver_double *mtls;
	struct testcert *srv = testcert_new_server(W.ca, "apiserver-test-double", 5, 86400);
	struct testcert *client = testcert_new_client(W.ca, "system:gpu-memory-guard", 6);
	struct testcert *other_ca = testcert_new_ca("another CA");
	struct testcert *stranger = testcert_new_client(other_ca, "stranger", 7);
	struct review_answer a;
	char err[256], server[64], *ca = testcert_cert_pem(W.ca), *body;
	o.cert_pem = testcert_cert_pem(srv);
	o.key_pem = testcert_key_pem(srv);
	o.token = "a token nobody presents";
	o.client_ca_pem = ca;
	mtls = apiserver_double_new(&o, err, sizeof err);
	free((char *)o.cert_pem);
	free((char *)o.key_pem);
	ITEST_CHECK(mtls != NULL, "mTLS double: %s", err);
	ITEST_CHECK(apiserver_double_load_dir(mtls, harness_data_dir(), err, sizeof err) > 0,
	            "load: %s", err);
	ITEST_CHECK(apiserver_double_put_node(
	                mtls, "{\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-node-m\","
	                      "\"labels\":{\"nvidia.com/gpu.count\":\"1\","
	                      "\"nvidia.com/gpu.memory\":\"81559\"}}}") == 0,
	            "node");
	snprintf(server, sizeof server, "https://127.0.0.1:%u", apiserver_double_port(mtls));
	ITEST_CHECK(testcerts_write_kubeconfig_client_cert(W.kubeconfig, server, ca, client) == 0,
	            "kubeconfig");
	start(NULL);
	body = harness_pod_review("mtls-1", "m-1", "1Gi", "gpu-node-m", 0);
	itest_review(&W, body, "mtls-1", 1, &a);
	free(body);
	ITEST_CHECK(world_stop_gmg(&W, SIGTERM, 20000) >= 0, "stop");
	ITEST_CHECK(testcerts_write_kubeconfig_client_cert(W.kubeconfig, server, ca, stranger) == 0,
	            "kubeconfig");
	start(NULL);
	body = harness_pod_review("mtls-2", "m-2", "1Gi", "gpu-node-m", 0);
	itest_review(&W, body, "mtls-2", 0, &a);
	itest_contains(a.message, "API server", "401 fails closed");
	free(body);
	free(ca);
	apiserver_double_free(mtls);
	testcert_free(srv);
	testcert_free(client);
	testcert_free(stranger);
	testcert_free(other_ca);
}

/* Run the binary with args; returns the wait status; out gets stdout + stderr. */
static int run_cli(const char *args, char *out, size_t outlen)
{
	char cmd[1024];
	FILE *p;
	size_t n;
	snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", harness_binary(), args);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	n = fread(out, 1, outlen - 1, p);
	out[n] = '\0';
	return pclose(p);
}

/* --webhook-timeout: the timeoutSeconds the webhook is registered with. Shorter than a review's
 * deadline (3 x --api-timeout) is warned about at start, once; long enough is not. */
static int log_has(const char *what)
{
	char *log = harness_read_file(W.log_file, NULL);
	int found = log != NULL && strstr(log, what) != NULL;
	free(log);
	return found;
}

static void test_registered_timeout_warning(void **state)
{
	static const char warning[] = "the registered webhook timeout is shorter than a review";
	const char *const short_args[] = {"--api-timeout", "2s", "--webhook-timeout", "5s", NULL};
	const char *const long_args[] = {"--api-timeout", "2s", "--webhook-timeout", "7s", NULL};
	(void)state;
	start(short_args);
	ITEST_CHECK(log_has(warning), "no warning for timeoutSeconds 5 under --api-timeout 2s");
	ITEST_CHECK(log_has("\"deadline_ms\":6000") && log_has("\"webhook_timeout_ms\":5000"),
	            "the warning does not give both numbers");
	ITEST_CHECK(world_stop_gmg(&W, SIGTERM, 20000) == 0, "stop");
	ITEST_CHECK(truncate(W.log_file, 0) == 0, "truncate the log");
	start(long_args);
	ITEST_CHECK(!log_has(warning), "warned although 7 s covers the 6 s deadline");
	ITEST_CHECK(world_stop_gmg(&W, SIGTERM, 20000) == 0, "stop");
}

static void test_command_line(void **state)
{
	char out[8192];
	int st;
	st = run_cli("serve --threshold 1.5", out, sizeof out);
	ITEST_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad --threshold: status %d: %s", st,
	            out);
	ITEST_CHECK(strchr(out, '\n') == out + strlen(out) - 1, "not a one-line error: %s", out);
	st = run_cli("serve --mode sometimes", out, sizeof out);
	ITEST_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad --mode: status %d: %s", st, out);
	st = run_cli("serve --api-timeout 2parsecs", out, sizeof out);
	ITEST_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad duration: status %d: %s", st, out);
	st = run_cli("serve --webhook-timeout 31s", out, sizeof out);
	ITEST_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(out, "--webhook-timeout"),
	            "--webhook-timeout over the API server's 30 s: status %d: %s", st, out);
	st = run_cli("serve --no-such-flag", out, sizeof out);
	ITEST_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "unknown flag: status %d: %s", st, out);
	st = run_cli("version", out, sizeof out);
	ITEST_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "0."),
	            "version: status %d: %s", st, out);
	st = run_cli("--help", out, sizeof out);
	ITEST_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "--help: status %d", st);
	itest_contains(out, "--reservation-ttl", "--help documents every flag");
	itest_contains(out, "--exempt-namespace", "--help documents every flag");
	st = run_cli("serve --listen 127.0.0.1:0 --health-listen 127.0.0.1:0 --tls-cert-file "
	             "/nonexistent/tls.crt --tls-key-file /nonexistent/tls.key --kubeconfig "
	             "/nonexistent/kubeconfig",
	             out, sizeof out);
	ITEST_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1, "missing files: status %d: %s", st, out);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_health_and_metrics, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sigterm_drain, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reservation_ttl_and_warn_threshold, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_warn_mode, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exempt_namespace, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_while_api_down, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kubeconfig_client_certificate, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_registered_timeout_warning, setup, teardown),
	    cmocka_unit_test(test_command_line),
	};
	harness_init(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
