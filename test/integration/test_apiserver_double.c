/*
 * Tests of the API server TEST DOUBLE itself (no gpu-memory-guard binary involved), so the
 * integration tests built on it rest on a checked foundation: token check, GETs, list
 * pagination and field selectors, failure injection, down/up, binding, and the TLS probe
 * (both outcomes, so the TLS 1.1 refusal test of the webhook can fail).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apiserver_double.h"
#include "harness.h"
#include "testcerts.h"

struct fx {
	struct testcert *ca, *srv;
	char ca_file[256];
	char base[64];
	struct apiserver_double *d;
};

static int make_double_ca(struct fx *f, unsigned max_page, int allow_old_tls, int client_ca);

static int make_double(struct fx *f, unsigned max_page, int allow_old_tls)
{
	return make_double_ca(f, max_page, allow_old_tls, 0);
}

static int make_double_ca(struct fx *f, unsigned max_page, int allow_old_tls, int client_ca)
{
	struct apiserver_double_opts o = {0};
	char *ca = NULL, err[256];
	FILE *fp;
	const char *data = getenv("GMG_TEST_DATA");
	f->ca = testcert_new_ca("double test CA");
	f->srv = testcert_new_server(f->ca, "double", 7, 3600);
	o.cert_pem = testcert_cert_pem(f->srv);
	o.key_pem = testcert_key_pem(f->srv);
	o.token = "tok";
	o.max_page = max_page;
	o.allow_old_tls = allow_old_tls;
	o.client_ca_pem = client_ca ? testcert_cert_pem(f->ca) : NULL;
	f->d = apiserver_double_new(&o, err, sizeof err);
	free((char *)o.cert_pem);
	free((char *)o.key_pem);
	free((char *)o.client_ca_pem);
	if (!f->d || !data)
		return -1;
	if (apiserver_double_load_dir(f->d, data, err, sizeof err) < 6)
		return -1;
	static int seq;
	snprintf(f->ca_file, sizeof f->ca_file, "/tmp/gmg-double-ca-%d-%d.pem", (int)getpid(),
	         seq++);
	ca = testcert_cert_pem(f->ca);
	fp = fopen(f->ca_file, "w");
	if (!fp)
		return -1;
	fputs(ca, fp);
	fclose(fp);
	free(ca);
	snprintf(f->base, sizeof f->base, "https://127.0.0.1:%u", apiserver_double_port(f->d));
	return 0;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	*state = f;
	return make_double(f, 2, 0);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	apiserver_double_free(f->d);
	testcert_free(f->srv);
	testcert_free(f->ca);
	unlink(f->ca_file);
	free(f);
	return 0;
}

static long get(struct fx *f, const char *path, const char *token, cJSON **json)
{
	char url[1024];
	struct http_req rq = {0};
	struct http_resp rs;
	snprintf(url, sizeof url, "%s%s", f->base, path);
	rq.url = url;
	rq.ca_file = f->ca_file;
	rq.bearer = token;
	http_do(NULL, &rq, &rs);
	if (json)
		*json = cJSON_Parse(rs.body);
	http_resp_free(&rs);
	return rs.code;
}

static const char *jstr(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
	if (b)
		x = cJSON_GetObjectItemCaseSensitive(x, b);
	return cJSON_IsString(x) ? x->valuestring : "";
}

static void test_token_required(void **state)
{
	struct fx *f = *state;
	cJSON *j = NULL;
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", NULL, &j), 401);
	assert_string_equal(jstr(j, "kind", NULL), "Status");
	cJSON_Delete(j);
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", "wrong", NULL), 401);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_UNAUTHORIZED), 2);
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", "tok", NULL), 200);
	apiserver_double_set_token(f->d, "rotated");
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", "tok", NULL), 401);
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", "rotated", NULL), 200);
	apiserver_double_set_token(f->d, "tok");
}

static void test_get_node_and_pod(void **state)
{
	struct fx *f = *state;
	cJSON *j = NULL;
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", "tok", &j), 200);
	assert_string_equal(jstr(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "labels",
	                         "nvidia.com/gpu.memory"),
	                    "81559");
	cJSON_Delete(j);
	assert_int_equal(get(f, "/api/v1/nodes/nope", "tok", &j), 404);
	assert_string_equal(jstr(j, "reason", NULL), "NotFound");
	cJSON_Delete(j);
	assert_int_equal(get(f, "/api/v1/namespaces/inference/pods/chat-7b-1", "tok", &j), 200);
	assert_string_equal(jstr(j, "metadata", "deletionTimestamp"), "2026-11-29T09:59:00Z");
	cJSON_Delete(j);
	assert_int_equal(get(f, "/api/v1/namespaces/other/pods/chat-7b-1", "tok", NULL), 404);
}

/* Follow continue tokens; returns the number of items, asserts each page's size. */
static int list_all(struct fx *f, const char *query, int page_max, int *pages)
{
	char path[1024], cont[128] = "";
	int total = 0;
	*pages = 0;
	do {
		cJSON *j = NULL, *items;
		char *esc = curl_easy_escape(NULL, cont, 0);
		snprintf(path, sizeof path, "/api/v1/pods?%s%s%s", query, *cont ? "&continue=" : "",
		         esc);
		curl_free(esc);
		assert_int_equal(get(f, path, "tok", &j), 200);
		assert_string_equal(jstr(j, "kind", NULL), "PodList");
		items = cJSON_GetObjectItemCaseSensitive(j, "items");
		assert_true(cJSON_GetArraySize(items) <= page_max);
		total += cJSON_GetArraySize(items);
		snprintf(cont, sizeof cont, "%s", jstr(j, "metadata", "continue"));
		cJSON_Delete(j);
		(*pages)++;
	} while (*cont && *pages < 50);
	return total;
}

static void test_list_pagination_and_selector(void **state)
{
	struct fx *f = *state;
	int pages;
	char sel[256], lim[16];
	/* 5 pods on gpu-node-a in the fixture, one Succeeded. max_page 2 caps limit=500. */
	assert_int_equal(list_all(f,
	                          "fieldSelector=spec.nodeName%3Dgpu-node-a%2Cstatus.phase%21%3D"
	                          "Succeeded%2Cstatus.phase%21%3DFailed&limit=500",
	                          2, &pages),
	                 4);
	assert_int_equal(pages, 2);
	apiserver_double_last_list_query(f->d, sel, sizeof sel, lim, sizeof lim);
	assert_string_equal(sel, "spec.nodeName=gpu-node-a,status.phase!=Succeeded,status.phase!="
	                         "Failed");
	assert_string_equal(lim, "500");
	assert_int_equal(list_all(f, "fieldSelector=spec.nodeName%3Dgpu-node-a&limit=1", 1, &pages),
	                 5);
	assert_int_equal(pages, 5);
	assert_int_equal(list_all(f, "fieldSelector=spec.nodeName%3Dother", 2, &pages), 0);
	assert_int_equal(get(f, "/api/v1/pods?fieldSelector=spec.bogus%3Dx", "tok", NULL), 400);
	apiserver_double_set_expire_continue(f->d, 1);
	assert_int_equal(get(f, "/api/v1/pods?limit=1&continue=dbl%3A1", "tok", NULL), 410);
	assert_int_equal(get(f, "/api/v1/pods?limit=1&continue=dbl%3A1", "tok", NULL), 200);
	apiserver_double_set_expire_continue(f->d, -1);
	assert_int_equal(get(f, "/api/v1/pods?limit=1&continue=dbl%3A1", "tok", NULL), 410);
	assert_int_equal(get(f, "/api/v1/pods?limit=1&continue=dbl%3A1", "tok", NULL), 410);
	apiserver_double_set_expire_continue(f->d, 0);
}

static void test_failure_injection(void **state)
{
	struct fx *f = *state;
	cJSON *j = NULL;
	double t0;
	char err[256];
	apiserver_double_set_fail(f->d, 500);
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", "tok", &j), 500);
	assert_string_equal(jstr(j, "reason", NULL), "InternalError");
	cJSON_Delete(j);
	apiserver_double_set_fail(f->d, 0);
	apiserver_double_set_delay_ms(f->d, 600);
	t0 = harness_now();
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", "tok", NULL), 200);
	assert_true(harness_now() - t0 >= 0.55);
	apiserver_double_set_delay_ms(f->d, 0);
	assert_int_equal(apiserver_double_stop(f->d), 0);
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", "tok", NULL), 0);
	assert_int_equal(apiserver_double_start(f->d, err, sizeof err), 0);
	assert_int_equal(get(f, "/api/v1/nodes/gpu-node-a", "tok", NULL), 200);
}

static void test_binding_makes_pod_visible(void **state)
{
	struct fx *f = *state;
	char url[256];
	struct http_req rq = {0};
	struct http_resp rs;
	int pages;
	const char *pod = "{\"metadata\":{\"name\":\"p1\"},\"spec\":{\"containers\":[]}}";
	const char *binding = "{\"kind\":\"Binding\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
	                      "\"p1\"},\"target\":{\"kind\":\"Node\",\"name\":\"n9\"}}";
	snprintf(url, sizeof url, "%s/api/v1/namespaces/t/pods", f->base);
	rq.url = url;
	rq.ca_file = f->ca_file;
	rq.bearer = "tok";
	rq.body = pod;
	rq.body_len = strlen(pod);
	rq.content_type = "application/json";
	assert_int_equal(http_do(NULL, &rq, &rs), 0);
	assert_int_equal(rs.code, 201);
	http_resp_free(&rs);
	assert_int_equal(list_all(f, "fieldSelector=spec.nodeName%3Dn9", 2, &pages), 0);
	snprintf(url, sizeof url, "%s/api/v1/namespaces/t/pods/p1/binding", f->base);
	rq.body = binding;
	rq.body_len = strlen(binding);
	assert_int_equal(http_do(NULL, &rq, &rs), 0);
	assert_int_equal(rs.code, 201);
	http_resp_free(&rs);
	assert_int_equal(list_all(f, "fieldSelector=spec.nodeName%3Dn9", 2, &pages), 1);
	assert_int_equal(apiserver_double_set_phase(f->d, "t", "p1", "Failed"), 0);
	assert_int_equal(
	    list_all(f, "fieldSelector=spec.nodeName%3Dn9%2Cstatus.phase%21%3DFailed", 2, &pages),
	    0);
	assert_int_equal(apiserver_double_delete_pod(f->d, "t", "p1"), 0);
	assert_int_equal(list_all(f, "fieldSelector=spec.nodeName%3Dn9", 2, &pages), 0);
}

/* The probe must be able to succeed with TLS 1.1 (against a server that allows it) and to fail
 * (against one that does not), or the webhook's TLS 1.1 test would prove nothing. */
static void test_tls_probe_both_ways(void **state)
{
	struct fx *f = *state, old = {0};
	long serial = 0;
	long long na = 0;
	char err[256];
	assert_int_equal(harness_tls_probe(apiserver_double_port(f->d), TLS1_2_VERSION,
	                                   TLS1_3_VERSION, &serial, &na, err, sizeof err),
	                 0);
	assert_int_equal(serial, 7);
	assert_true(na > 0);
	assert_int_not_equal(harness_tls_probe(apiserver_double_port(f->d), TLS1_VERSION,
	                                       TLS1_1_VERSION, NULL, NULL, err, sizeof err),
	                     0);
	assert_int_equal(make_double(&old, 0, 1), 0);
	assert_int_equal(harness_tls_probe(apiserver_double_port(old.d), TLS1_1_VERSION,
	                                   TLS1_1_VERSION, &serial, NULL, err, sizeof err),
	                 0);
	apiserver_double_free(old.d);
	testcert_free(old.srv);
	testcert_free(old.ca);
	unlink(old.ca_file);
}

/* With a client CA, a client certificate that CA issued authenticates; another CA's does not. */
static void test_client_certificate_auth(void **state)
{
	struct fx f = {0};
	struct testcert *good, *other_ca, *bad;
	char url[128], crt[64], key[64];
	struct http_req rq = {0};
	struct http_resp rs;
	assert_int_equal(make_double_ca(&f, 0, 0, 1), 0);
	good = testcert_new_client(f.ca, "webhook", 11);
	other_ca = testcert_new_ca("other CA");
	bad = testcert_new_client(other_ca, "intruder", 12);
	snprintf(crt, sizeof crt, "/tmp/gmg-client-%d.crt", (int)getpid());
	snprintf(key, sizeof key, "/tmp/gmg-client-%d.key", (int)getpid());
	snprintf(url, sizeof url, "%s/api/v1/nodes/gpu-node-a", f.base);
	rq.url = url;
	rq.ca_file = f.ca_file;
	rq.client_cert_file = crt;
	rq.client_key_file = key;
	assert_int_equal(testcert_write(good, crt, key), 0);
	assert_int_equal(http_do(NULL, &rq, &rs), 0);
	http_resp_free(&rs);
	assert_int_equal(rs.code, 200);
	assert_int_equal(testcert_write(bad, crt, key), 0);
	http_do(NULL, &rq, &rs);
	http_resp_free(&rs);
	assert_int_equal(rs.code, 401);
	rq.client_cert_file = rq.client_key_file = NULL;
	http_do(NULL, &rq, &rs);
	http_resp_free(&rs);
	assert_int_equal(rs.code, 401);
	unlink(crt);
	unlink(key);
	testcert_free(good);
	testcert_free(bad);
	testcert_free(other_ca);
	apiserver_double_free(f.d);
	testcert_free(f.srv);
	testcert_free(f.ca);
	unlink(f.ca_file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_token_required),
	    cmocka_unit_test(test_get_node_and_pod),
	    cmocka_unit_test(test_list_pagination_and_selector),
	    cmocka_unit_test(test_failure_injection),
	    cmocka_unit_test(test_binding_makes_pod_visible),
	    cmocka_unit_test(test_tls_probe_both_ways),
	    cmocka_unit_test(test_client_certificate_auth),
	};
	curl_global_init(CURL_GLOBAL_ALL);
	return cmocka_run_group_tests(tests, setup, teardown);
}
