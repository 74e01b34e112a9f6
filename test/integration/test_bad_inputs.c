/*
 * Bad inputs at the HTTP/TLS edge of the real binary: body cap (Content-Length and chunked),
 * Content-Type, invalid JSON, missing uid, wrong path and method, TLS versions, keep-alive.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "itest.h"

#define CAP (7u * 1024u * 1024u) /* the webhook's body cap: 7 MiB */

static struct world W;

static int group_setup(void **state)
{
	static const char *const extra[] = {"--api-timeout", "2s", NULL};
	return itest_start(&W, 0, extra);
}

static int group_teardown(void **state)
{
	world_free(&W);
	return 0;
}

static long post(const char *url, const char *body, size_t len, const char *ctype, int chunked,
                 char **resp_body)
{
	struct http_req rq = {0};
	struct http_resp rs;
	rq.url = url ? url : W.url;
	rq.ca_file = W.ca_file;
	rq.body = body;
	rq.body_len = len;
	rq.content_type = ctype;
	rq.chunked = chunked;
	rq.timeout_ms = 20000;
	http_do(NULL, &rq, &rs);
	if (resp_body)
		*resp_body = rs.body;
	else
		http_resp_free(&rs);
	return rs.code;
}

/* A valid review padded with trailing whitespace (still valid JSON) to exactly len bytes. */
static char *padded_review(size_t len)
{
	const char *r = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
	                "\"request\":{\"uid\":\"padded\"}}";
	char *b = malloc(len + 1);
	memset(b, ' ', len);
	memcpy(b, r, strlen(r));
	b[len] = '\0';
	return b;
}

static void test_body_at_cap_accepted(void **state)
{
	char *b = padded_review(CAP), *resp = NULL;
	struct review_answer a;
	long code = post(NULL, b, CAP, "application/json", 0, &resp);
	int ok = harness_parse_review(resp, &a) == 0 && !strcmp(a.uid, "padded");
	free(resp);
	free(b);
	ITEST_CHECK(code == 200, "a 7 MiB body is within the cap: HTTP %ld", code);
	ITEST_CHECK(ok, "uid not echoed");
}

/*
 * Over the cap by Content-Length: 413 before the body is read. With Expect: 100-continue (what
 * curl sends for big bodies) the client must see the 413. Without it, a body declared over
 * SERVER_DISCARD_MAX (32 MiB) is answered at once too: the server answers and closes while the
 * client is still sending, so the client may see either the 413 or a failed send; either way
 * the server must not have swallowed the whole body, and it stays healthy.
 */
static void test_body_over_cap_413_content_length(void **state)
{
	struct http_req rq = {0};
	struct http_resp rs;
	char *b = padded_review(6 * CAP);
	rq.url = W.url;
	rq.ca_file = W.ca_file;
	rq.body = b;
	rq.body_len = CAP + 1;
	rq.content_type = "application/json";
	rq.expect_continue = 1;
	http_do(NULL, &rq, &rs);
	http_resp_free(&rs);
	if (rs.code != 413)
		free(b);
	ITEST_CHECK(rs.code == 413, "7 MiB + 1 byte (Expect: 100-continue): HTTP %ld (%s)", rs.code,
	            rs.error);
	ITEST_CHECK(rs.uploaded < CAP, "the server read %.0f bytes of a refused body", rs.uploaded);
	rq.expect_continue = 0;
	rq.body_len = 6 * CAP;
	http_do(NULL, &rq, &rs);
	http_resp_free(&rs);
	ITEST_CHECK(rs.code == 413 || (rs.code == 0 && rs.uploaded < 6.0 * CAP),
	            "42 MiB body without Expect: HTTP %ld (%s), %.0f bytes sent", rs.code, rs.error,
	            rs.uploaded);
	/* Chunked, no length to refuse early: read and dropped up to 32 MiB, then the connection
	 * is closed (no answer: MHD 0.9.75 queues none in the middle of a body). */
	rq.chunked = 1;
	http_do(NULL, &rq, &rs);
	http_resp_free(&rs);
	free(b);
	ITEST_CHECK(rs.code == 413 || (rs.code == 0 && rs.uploaded < 6.0 * CAP),
	            "42 MiB chunked body: HTTP %ld (%s), %.0f bytes sent", rs.code, rs.error,
	            rs.uploaded);
	ITEST_CHECK(world_health_get(&W, "/healthz", NULL) == 200, "healthz after 413");
}

/*
 * A client that writes its whole request (headers and a body of len bytes, Content-Length, no
 * Expect) before it reads, over TLS to the webhook: curl is not one (it reads while it sends and
 * stops sending at an early answer). Returns the answer's status code with its text in resp
 * (cap bytes), or 0 with the failure in resp.
 */
static long send_all_then_read(const char *body, size_t len, char *resp, size_t cap)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = NULL;
	struct sockaddr_in sin = {0};
	struct timeval tv = {15, 0};
	char head[256];
	size_t got = 0;
	long code = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0), n;

	snprintf(resp, cap, "setup failed");
	if (ctx == NULL || fd < 0)
		goto out;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)W.port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ssl = SSL_new(ctx);
	if (ssl == NULL || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0 ||
	    SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1) {
		snprintf(resp, cap, "connect or handshake failed");
		goto out;
	}
	n = snprintf(
	    head, sizeof head,
	    "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	    len);
	if (SSL_write(ssl, head, n) != n) {
		snprintf(resp, cap, "writing the headers failed");
		goto out;
	}
	for (size_t off = 0; off < len;) {
		int k = len - off > 65536 ? 65536 : (int)(len - off);
		if (SSL_write(ssl, body + off, k) != k) {
			snprintf(resp, cap, "writing the body failed after %zu of %zu bytes", off,
			         len);
			goto out;
		}
		off += (size_t)k;
	}
	while (got + 1 < cap && (n = SSL_read(ssl, resp + got, (int)(cap - 1 - got))) > 0)
		got += (size_t)n;
	resp[got] = '\0';
	if (sscanf(resp, "HTTP/1.1 %ld", &code) != 1)
		code = 0;
out:
	ERR_clear_error();
	SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	SSL_CTX_free(ctx);
	return code;
}

/*
 * Over the cap by Content-Length (up to SERVER_DISCARD_MAX, 32 MiB), without Expect:
 * 100-continue, from a client that sends the whole body before it reads: it must read the 413.
 * The server reads and drops such a body, then answers; it used to answer at once and close
 * with the body unread, and the client's writes met a reset before it could read anything.
 */
static void test_body_over_cap_413_without_expect(void **state)
{
	size_t len = CAP + (1u << 20);
	char *b = padded_review(len), resp[1024];
	long code = send_all_then_read(b, len, resp, sizeof resp);
	ITEST_CHECK(code == 413 && strstr(resp, "body larger than 7 MiB") != NULL,
	            "8 MiB sent whole without Expect: HTTP %ld: %.200s", code, resp);
	/* curl, and chunked encoding (no Content-Length to refuse early) */
	struct http_req rq = {0};
	struct http_resp rs;
	rq.url = W.url;
	rq.ca_file = W.ca_file;
	rq.body = b;
	rq.body_len = len;
	rq.content_type = "application/json";
	rq.timeout_ms = 20000;
	rq.chunked = 1;
	http_do(NULL, &rq, &rs);
	http_resp_free(&rs);
	free(b);
	ITEST_CHECK(rs.code == 413, "8 MiB chunked: HTTP %ld (%s)", rs.code, rs.error);
	ITEST_CHECK(world_health_get(&W, "/healthz", NULL) == 200, "healthz after 413");
}

static void test_body_over_cap_413_chunked(void **state)
{
	char *b = padded_review(CAP + 4096);
	long code = post(NULL, b, CAP + 4096, "application/json", 1, NULL);
	free(b);
	ITEST_CHECK(code == 413, "chunked body over 7 MiB: HTTP %ld, expected 413", code);
	/* A small chunked body is fine. */
	b = padded_review(200);
	code = post(NULL, b, 200, "application/json", 1, NULL);
	free(b);
	ITEST_CHECK(code == 200, "small chunked review: HTTP %ld, expected 200", code);
}

static void test_content_type(void **state)
{
	const char *r = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
	                "\"request\":{\"uid\":\"ct\"}}";
	long code = post(NULL, r, strlen(r), "text/plain", 0, NULL);
	ITEST_CHECK(code == 400, "text/plain: HTTP %ld, expected 400", code);
	code = post(NULL, r, strlen(r), NULL, 0, NULL);
	ITEST_CHECK(code == 400, "no Content-Type: HTTP %ld, expected 400", code);
	code = post(NULL, r, strlen(r), "application/x-www-form-urlencoded", 0, NULL);
	ITEST_CHECK(code == 400, "form content type: HTTP %ld, expected 400", code);
	code = post(NULL, r, strlen(r), "application/json", 0, NULL);
	ITEST_CHECK(code == 200, "application/json: HTTP %ld, expected 200", code);
}

static void test_invalid_json_400(void **state)
{
	static const char *const bad[] = {
	    "{",
	    "not json",
	    "",
	    "{\"request\": {\"uid\": \"x\"}} trailing garbage",
	    "[]",
	    "{\"request\":",
	    "\"just a string\"",
	};
	size_t i;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *body = NULL;
		long code = post(NULL, bad[i], strlen(bad[i]), "application/json", 0, &body);
		ITEST_CHECK(code == 400, "invalid JSON '%s': HTTP %ld, expected 400", bad[i], code);
		ITEST_CHECK(body && body[0], "400 without a reason for '%s'", bad[i]);
		free(body);
	}
}

static void test_missing_uid_400(void **state)
{
	static const char *const bad[] = {
	    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
	    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{}}",
	    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
	    "\"request\":{\"uid\":42}}",
	    "{\"request\":null}",
	};
	size_t i;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		long code = post(NULL, bad[i], strlen(bad[i]), "application/json", 0, NULL);
		ITEST_CHECK(code == 400, "review without uid '%s': HTTP %ld, expected 400", bad[i],
		            code);
	}
}

static void test_path_and_method(void **state)
{
	char url[160];
	struct http_req rq = {0};
	struct http_resp rs;
	const char *r = "{\"request\":{\"uid\":\"p\"}}";
	long code;
	snprintf(url, sizeof url, "https://127.0.0.1:%d/mutate", W.port);
	code = post(url, r, strlen(r), "application/json", 0, NULL);
	ITEST_CHECK(code == 404, "POST /mutate: HTTP %ld, expected 404", code);
	snprintf(url, sizeof url, "https://127.0.0.1:%d/", W.port);
	code = post(url, r, strlen(r), "application/json", 0, NULL);
	ITEST_CHECK(code == 404, "POST /: HTTP %ld, expected 404", code);
	rq.url = W.url;
	rq.ca_file = W.ca_file;
	rq.method = "GET";
	http_do(NULL, &rq, &rs);
	http_resp_free(&rs);
	ITEST_CHECK(rs.code == 405, "GET /validate: HTTP %ld, expected 405", rs.code);
	rq.method = "PUT";
	rq.body = r;
	rq.body_len = strlen(r);
	rq.content_type = "application/json";
	http_do(NULL, &rq, &rs);
	http_resp_free(&rs);
	ITEST_CHECK(rs.code == 405, "PUT /validate: HTTP %ld, expected 405", rs.code);
	rq.method = "DELETE";
	rq.body = NULL;
	http_do(NULL, &rq, &rs);
	http_resp_free(&rs);
	ITEST_CHECK(rs.code == 405, "DELETE /validate: HTTP %ld, expected 405", rs.code);
}

/* The probe is known to succeed against a server that allows TLS 1.1 (integ_apiserver_double
 * checks that), so a failure here is the webhook's refusal. */
static void test_tls_versions(void **state)
{
	char err[256];
	long serial = 0;
	ITEST_CHECK(harness_tls_probe(W.port, TLS1_VERSION, TLS1_1_VERSION, NULL, NULL, err,
	                              sizeof err) != 0,
	            "TLS 1.0/1.1 handshake accepted");
	ITEST_CHECK(harness_tls_probe(W.port, TLS1_1_VERSION, TLS1_1_VERSION, NULL, NULL, err,
	                              sizeof err) != 0,
	            "TLS 1.1 handshake accepted");
	ITEST_CHECK(harness_tls_probe(W.port, TLS1_2_VERSION, TLS1_2_VERSION, &serial, NULL, err,
	                              sizeof err) == 0,
	            "TLS 1.2 refused: %s", err);
	ITEST_CHECK(serial == 1000, "served serial %ld, expected 1000", serial);
	ITEST_CHECK(harness_tls_probe(W.port, TLS1_3_VERSION, TLS1_3_VERSION, NULL, NULL, err,
	                              sizeof err) == 0,
	            "TLS 1.3 refused: %s", err);
	ITEST_CHECK(world_health_get(&W, "/healthz", NULL) == 200, "healthz after probes");
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	return size * n;
}

/* curl with CURL_SSLVERSION_MAX_TLSv1_1: refused (the client side may also refuse: either way
 * no answer), while the same client with defaults gets one. */
static void test_tls11_with_curl(void **state)
{
	CURL *c = curl_easy_init();
	CURLcode rc;
	const char *r = "{\"request\":{\"uid\":\"t11\"}}";
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, W.url);
	curl_easy_setopt(c, CURLOPT_CAINFO, W.ca_file);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_SSLVERSION,
	                 (long)(CURL_SSLVERSION_TLSv1_0 | CURL_SSLVERSION_MAX_TLSv1_1));
	rc = curl_easy_perform(c);
	ITEST_CHECK(rc != CURLE_OK, "curl with TLS <= 1.1 got an answer");
	curl_easy_setopt(c, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_DEFAULT);
	rc = curl_easy_perform(c);
	ITEST_CHECK(rc == CURLE_OK, "curl with default TLS: %s", curl_easy_strerror(rc));
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
}

/* Keep-alive: a second review on the same handle reuses the connection. */
static void test_keep_alive(void **state)
{
	CURL_HANDLE *h = http_handle_new();
	struct http_req rq = {0};
	struct http_resp rs;
	long connects = -1;
	const char *r = "{\"request\":{\"uid\":\"ka\"}}";
	int i;
	rq.url = W.url;
	rq.ca_file = W.ca_file;
	rq.body = r;
	rq.body_len = strlen(r);
	rq.content_type = "application/json";
	for (i = 0; i < 3; i++) {
		ITEST_CHECK(http_do(h, &rq, &rs) == 0 && rs.code == 200,
		            "keep-alive review %d: %ld", i, rs.code);
		http_resp_free(&rs);
	}
	curl_easy_getinfo((CURL *)h, CURLINFO_NUM_CONNECTS, &connects);
	ITEST_CHECK(connects == 0, "third review opened %ld new connection(s)", connects);
	http_handle_free(h);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_body_at_cap_accepted),
	    cmocka_unit_test(test_body_over_cap_413_content_length),
	    cmocka_unit_test(test_body_over_cap_413_chunked),
	    cmocka_unit_test(test_body_over_cap_413_without_expect),
	    cmocka_unit_test(test_content_type),
	    cmocka_unit_test(test_invalid_json_400),
	    cmocka_unit_test(test_missing_uid_400),
	    cmocka_unit_test(test_path_and_method),
	    cmocka_unit_test(test_tls_versions),
	    cmocka_unit_test(test_tls11_with_curl),
	    cmocka_unit_test(test_keep_alive),
	};
	harness_init(argc, argv);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
