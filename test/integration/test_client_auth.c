/*
 * Client authentication (issue 20) through the real binary against the API server TEST
 * DOUBLE: --client-ca-file with --client-allowed-names, on both routes (--client-auth-routes
 * admission,extender), then on the extender route only.
 *
 *   - a review or a filter call without a certificate, with one from another CA, or with a
 *     server-only certificate (EKU serverAuth) from the client CA: 403 with the reason,
 *     counted in client_auth_failures_total{route};
 *   - an allowed name from the client CA is served (the review's uid echoed, the filter
 *     answered);
 *   - a certificate from the client CA whose name is not allowed: 403; one whose DNS SAN is
 *     (another case, another CN) is served;
 *   - the plain scheduler listener answers the extender routes 403 when they require a
 *     certificate (none can be presented there);
 *   - the CA file is reloaded like the serving certificate: a new CA in the file is in force
 *     within the reload interval, the old CA's clients then refused;
 *   - with --client-auth-routes extender, reviews without a certificate are served.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>

#include "itest.h"

static struct world W;
static int sched_port;
static char ca_file[HARNESS_PATHMAX], good[2][HARNESS_PATHMAX], other_name[2][HARNESS_PATHMAX],
    rogue[2][HARNESS_PATHMAX], server_only[2][HARNESS_PATHMAX], rotated[2][HARNESS_PATHMAX],
    by_san[2][HARNESS_PATHMAX], other_san[2][HARNESS_PATHMAX];
static struct testcert *client_ca, *rogue_ca, *new_ca;

static int write_pair(const struct testcert *c, char paths[2][HARNESS_PATHMAX], const char *name)
{
	snprintf(paths[0], HARNESS_PATHMAX, "%s/%s.crt", W.dir, name);
	snprintf(paths[1], HARNESS_PATHMAX, "%s/%s.key", W.dir, name);
	return c == NULL || testcert_write(c, paths[0], paths[1]) != 0;
}

static int make_certs(void)
{
	client_ca = testcert_new_ca("clients-ca");
	rogue_ca = testcert_new_ca("clients-ca"); /* the same name, another key */
	new_ca = testcert_new_ca("clients-ca-2");
	if (client_ca == NULL || rogue_ca == NULL || new_ca == NULL)
		return -1;
	snprintf(ca_file, sizeof(ca_file), "%s/client-ca.crt", W.dir);
	struct testcert *g = testcert_new_client(client_ca, "kube-apiserver", 11);
	struct testcert *o = testcert_new_client(client_ca, "someone-else", 12);
	struct testcert *r = testcert_new_client(rogue_ca, "kube-apiserver", 13);
	struct testcert *s = testcert_new_server(client_ca, "kube-apiserver", 14, 86400);
	struct testcert *n = testcert_new_client(new_ca, "gmg-scheduler", 15);
	struct testcert *bs =
	    testcert_new_client_san(client_ca, "pod-1234", "DNS:x.example,DNS:GMG-Scheduler", 16);
	struct testcert *os = testcert_new_client_san(client_ca, "pod-5678", "DNS:x.example", 17);
	int rc = testcert_write(client_ca, ca_file, NULL) || write_pair(g, good, "good") ||
	         write_pair(o, other_name, "other-name") || write_pair(r, rogue, "rogue") ||
	         write_pair(s, server_only, "server-only") || write_pair(n, rotated, "rotated") ||
	         write_pair(bs, by_san, "by-san") || write_pair(os, other_san, "other-san");
	testcert_free(bs);
	testcert_free(os);
	testcert_free(g);
	testcert_free(o);
	testcert_free(r);
	testcert_free(s);
	testcert_free(n);
	return rc ? -1 : 0;
}

static int start(const char *routes)
{
	static char listen[64];
	const char *extra[] = {"--scheduler-listen",
	                       listen,
	                       "--drain-timeout",
	                       "200ms",
	                       "--tls-reload-interval",
	                       "200ms",
	                       "--client-ca-file",
	                       ca_file,
	                       "--client-allowed-names",
	                       "kube-apiserver,gmg-scheduler",
	                       "--client-auth-routes",
	                       routes,
	                       NULL};
	sched_port = harness_free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", sched_port);
	if (world_start_gmg(&W, extra, 30000))
		return -1;
	itest_wait_synced(&W, 10000);
	return 0;
}

static int group_setup(void **state)
{
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	if (world_add_node(&W, "ca-node", 81559, 1) || make_certs() != 0)
		return -1;
	return start("admission,extender");
}

static int group_teardown(void **state)
{
	world_free(&W);
	testcert_free(client_ca);
	testcert_free(rogue_ca);
	testcert_free(new_ca);
	return 0;
}

/* POST body to the webhook's TLS port (or the plain scheduler port) with the client pair (NULL:
 * none). Returns the HTTP code (0: no HTTP answer, e.g. the handshake failed); *out the body. */
static long post(int plain, const char *path, const char *body, char pair[2][HARNESS_PATHMAX],
                 char **out)
{
	char url[256];
	struct http_resp rs;
	snprintf(url, sizeof(url), plain ? "http://127.0.0.1:%d%s" : "https://127.0.0.1:%d%s",
	         plain ? sched_port : W.port, path);
	struct http_req rq = {
	    .url = url,
	    .ca_file = W.ca_file,
	    .body = body,
	    .body_len = strlen(body),
	    .content_type = "application/json",
	    .client_cert_file = pair ? pair[0] : NULL,
	    .client_key_file = pair ? pair[1] : NULL,
	};
	int rc = http_do(NULL, &rq, &rs);
	long code = rc == 0 ? rs.code : 0;
	*out = rs.body;
	rs.body = NULL;
	http_resp_free(&rs);
	return code;
}

static char *review_body(const char *uid)
{
	char *b = harness_pod_review(uid, "auth-pod", "1Gi", "ca-node", 1);
	ITEST_CHECK(b != NULL, "no review body");
	return b;
}

static char *filter_body(void)
{
	char *pod = itest_pod_json("auth-pod", "uid-auth", "1Gi", NULL, "Pending");
	size_t cap = strlen(pod) + 128;
	char *body = malloc(cap);
	ITEST_CHECK(body != NULL, "out of memory");
	snprintf(body, cap, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[\"ca-node\"]}", pod);
	free(pod);
	return body;
}

static double failures(const char *route)
{
	char *m = NULL, label[64];
	ITEST_CHECK(world_health_get(&W, "/metrics", &m) == 200, "GET /metrics");
	snprintf(label, sizeof(label), "route=\"%s\"", route);
	double v = harness_metric(m, "gpu_memory_guard_client_auth_failures_total", label, 0);
	free(m);
	return v;
}

/* A refusal: 403 whose text says why. */
static void expect_refused(int plain, const char *path, const char *body,
                           char pair[2][HARNESS_PATHMAX], const char *why)
{
	char *out = NULL;
	long code = post(plain, path, body, pair, &out);
	ITEST_CHECK(code == 403, "POST %s with %s: HTTP %ld, want 403: %s", path,
	            pair ? pair[0] : "no certificate", code, out ? out : "");
	itest_contains(out, why, path);
	free(out);
}

static void test_review_needs_an_allowed_certificate(void **state)
{
	char *body = review_body("auth-review-1"), *out = NULL;
	double before = failures("admission");

	expect_refused(0, "/validate", body, NULL,
	               "client certificate: a client certificate is required");
	expect_refused(0, "/validate", body, rogue, "client certificate not accepted");
	expect_refused(0, "/validate", body, server_only, "client certificate not accepted");
	expect_refused(0, "/validate", body, other_name,
	               "CN=someone-else (DNS: -) is not among --client-allowed-names");
	ITEST_CHECK(failures("admission") == before + 4,
	            "client_auth_failures_total{admission} "
	            "%.0f, want %.0f",
	            failures("admission"), before + 4);

	long code = post(0, "/validate", body, good, &out);
	struct review_answer a;
	ITEST_CHECK(code == 200 && harness_parse_review(out, &a) == 0,
	            "allowed client: HTTP %ld: %s", code, out ? out : "");
	ITEST_CHECK(strcmp(a.uid, "auth-review-1") == 0 && a.allowed, "answer: uid %s allowed %d",
	            a.uid, a.allowed);
	free(out);
	free(body);
}

static void test_filter_needs_an_allowed_certificate(void **state)
{
	char *body = filter_body(), *out = NULL;
	double before = failures("extender");

	expect_refused(0, "/scheduler/filter", body, NULL, "a client certificate is required");
	expect_refused(0, "/scheduler/filter", body, rogue, "not accepted");
	expect_refused(0, "/scheduler/prioritize", body, other_name, "not among");
	expect_refused(0, "/scheduler/filter", body, other_san,
	               "CN=pod-5678 (DNS: x.example) is not among");
	/* The plain listener cannot carry a certificate. */
	expect_refused(1, "/scheduler/filter", body, NULL, "this listener is plain HTTP");
	ITEST_CHECK(failures("extender") == before + 5, "client_auth_failures_total{extender}");
	/* A DNS SAN (any case) among the allowed names is enough, whatever the CN. */
	long sc = post(0, "/scheduler/filter", body, by_san, &out);
	ITEST_CHECK(sc == 200, "allowed DNS SAN: HTTP %ld: %s", sc, out ? out : "");
	free(out);
	long code = post(0, "/scheduler/filter", body, good, &out);
	ITEST_CHECK(code == 200, "allowed client: HTTP %ld: %s", code, out ? out : "");
	itest_contains(out, "\"NodeNames\":[\"ca-node\"]", "filter answer");
	free(out);
	free(body);
}

/* A new CA written over the file is in force within a few reload intervals (200ms); the old
 * CA's certificates are refused from then on, on the next request. */
static void test_client_ca_reloads(void **state)
{
	char *body = review_body("auth-review-2"), *out = NULL;
	ITEST_CHECK(testcert_write(new_ca, ca_file, NULL) == 0, "write the new CA");
	double end = harness_now() + 10;
	long code = 0;
	while (harness_now() < end) {
		free(out);
		code = post(0, "/validate", body, rotated, &out);
		if (code == 200)
			break;
		usleep(100 * 1000);
	}
	ITEST_CHECK(code == 200, "the new CA's client after reload: HTTP %ld: %s", code,
	            out ? out : "");
	free(out);
	expect_refused(0, "/validate", body, good, "not accepted");
	/* An unreadable CA file keeps the current CAs. */
	FILE *f = fopen(ca_file, "w");
	ITEST_CHECK(f != NULL, "truncate the CA file");
	fputs("not a certificate\n", f);
	fclose(f);
	usleep(600 * 1000);
	code = post(0, "/validate", body, rotated, &out);
	ITEST_CHECK(code == 200, "after a bad CA file: HTTP %ld: %s", code, out ? out : "");
	free(out);
	ITEST_CHECK(testcert_write(client_ca, ca_file, NULL) == 0, "restore the CA");
	free(body);
}

/* --client-auth-routes extender: reviews are served without a certificate, filters are not. */
static void test_extender_route_only(void **state)
{
	char *body = review_body("auth-review-3"), *fbody = filter_body(), *out = NULL;
	ITEST_CHECK(world_stop_gmg(&W, SIGTERM, 10000) == 0, "stop");
	ITEST_CHECK(start("extender") == 0, "start with --client-auth-routes extender");
	long code = post(0, "/validate", body, NULL, &out);
	struct review_answer a;
	ITEST_CHECK(code == 200 && harness_parse_review(out, &a) == 0 &&
	                strcmp(a.uid, "auth-review-3") == 0,
	            "review without a certificate: HTTP %ld: %s", code, out ? out : "");
	free(out);
	expect_refused(0, "/scheduler/filter", fbody, NULL, "a client certificate is required");
	code = post(0, "/scheduler/filter", fbody, good, &out);
	ITEST_CHECK(code == 200, "allowed client: HTTP %ld: %s", code, out ? out : "");
	free(out);
	free(body);
	free(fbody);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_review_needs_an_allowed_certificate),
	    cmocka_unit_test(test_filter_needs_an_allowed_certificate),
	    cmocka_unit_test(test_client_ca_reloads),
	    cmocka_unit_test(test_extender_route_only),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
