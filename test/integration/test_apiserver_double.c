/*
 * Tests of the API server TEST DOUBLE itself (no gpu-memory-guard binary involved), so the
 * integration tests built on it rest on a checked foundation: token check, GETs, list
 * pagination and field selectors, failure injection, down/up, binding, the TLS probe (both
 * outcomes, so the TLS 1.1 refusal test of the webhook can fail), resource versions, node lists
 * and watches (events after a change, replay, 410 after compaction, bookmarks, cut, stop), and
 * leases: create, compare-and-swap update, the real errors, delete, writers racing (no update
 * lost), injected failures and delays.
 */
#define _GNU_SOURCE /* asprintf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <openssl/ssl.h>
#include <pthread.h>
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
	/* A cut URL would ask for another path: fail instead (and -Wformat-truncation holds). */
	if ((size_t)snprintf(url, sizeof url, "%s%s", f->base, path) >= sizeof url)
		fail_msg("URL longer than %zu bytes: %s", sizeof url, path);
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

/* ---- watches: a raw libcurl reader on its own thread, collecting the stream's bytes ---- */

struct watcher {
	char url[512];
	char ca_file[256];
	pthread_t t;
	pthread_mutex_t mu;
	char *buf;
	size_t len;
	long code;
	int cc;
	int done;
	volatile int stop;
};

static size_t watcher_write(char *data, size_t size, size_t nmemb, void *userp)
{
	struct watcher *w = userp;
	size_t n = size * nmemb;
	char *nb;
	pthread_mutex_lock(&w->mu);
	nb = realloc(w->buf, w->len + n + 1);
	assert_non_null(nb);
	w->buf = nb;
	memcpy(w->buf + w->len, data, n);
	w->len += n;
	w->buf[w->len] = '\0';
	pthread_mutex_unlock(&w->mu);
	return n;
}

static int watcher_progress(void *userp, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct watcher *w = userp;
	return __atomic_load_n(&w->stop, __ATOMIC_SEQ_CST);
}

static void *watcher_main(void *arg)
{
	struct watcher *w = arg;
	CURL *e = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "Authorization: Bearer tok");
	CURLcode cc;
	long code = 0;
	curl_easy_setopt(e, CURLOPT_URL, w->url);
	curl_easy_setopt(e, CURLOPT_CAINFO, w->ca_file);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, watcher_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, watcher_progress);
	curl_easy_setopt(e, CURLOPT_XFERINFODATA, w);
	curl_easy_setopt(e, CURLOPT_TIMEOUT, 60L);
	cc = curl_easy_perform(e);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	pthread_mutex_lock(&w->mu);
	w->cc = (int)cc;
	w->code = code;
	w->done = 1;
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static struct watcher *watch_open(struct fx *f, const char *path)
{
	struct watcher *w = calloc(1, sizeof *w);
	assert_non_null(w);
	snprintf(w->url, sizeof w->url, "%s%s", f->base, path);
	snprintf(w->ca_file, sizeof w->ca_file, "%s", f->ca_file);
	pthread_mutex_init(&w->mu, NULL);
	assert_int_equal(pthread_create(&w->t, NULL, watcher_main, w), 0);
	return w;
}

/* Occurrences of needle in what was received so far. */
static int watch_count(struct watcher *w, const char *needle)
{
	int n = 0;
	pthread_mutex_lock(&w->mu);
	for (const char *p = w->buf; p && (p = strstr(p, needle)); p += strlen(needle))
		n++;
	pthread_mutex_unlock(&w->mu);
	return n;
}

static int watch_done(struct watcher *w)
{
	int done;
	pthread_mutex_lock(&w->mu);
	done = w->done;
	pthread_mutex_unlock(&w->mu);
	return done;
}

/* Wait until needle was received n times (needle NULL: until the stream ended). 0 / -1. */
static int watch_wait(struct watcher *w, const char *needle, int n, double timeout_s)
{
	double until = harness_now() + timeout_s;
	while (harness_now() < until) {
		if (needle ? watch_count(w, needle) >= n : watch_done(w))
			return 0;
		usleep(10000);
	}
	return -1;
}

static void watch_close(struct watcher *w)
{
	__atomic_store_n(&w->stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(w->t, NULL);
	pthread_mutex_destroy(&w->mu);
	free(w->buf);
	free(w);
}

/* The received lines parsed; every line must be one JSON event. Caller frees (cJSON array). */
static cJSON *watch_events(struct watcher *w)
{
	cJSON *all = cJSON_CreateArray();
	char *copy, *save = NULL, *line;
	pthread_mutex_lock(&w->mu);
	copy = strdup(w->buf ? w->buf : "");
	pthread_mutex_unlock(&w->mu);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		cJSON *ev = cJSON_Parse(line);
		assert_non_null(ev);
		cJSON_AddItemToArray(all, ev);
	}
	free(copy);
	return all;
}

static unsigned long ev_rv(const cJSON *ev)
{
	return strtoul(
	    jstr(cJSON_GetObjectItemCaseSensitive(ev, "object"), "metadata", "resourceVersion"),
	    NULL, 10);
}

static int wait_open_watches(struct fx *f, unsigned long n)
{
	double until = harness_now() + 5;
	while (harness_now() < until) {
		if (apiserver_double_open_watches(f->d) == n)
			return 0;
		usleep(10000);
	}
	return -1;
}

static void test_watch_events_after_put(void **state)
{
	struct fx *f = *state;
	char path[256];
	unsigned long rv0 = apiserver_double_resource_version(f->d), prev;
	struct watcher *w, *replay, *nodes;
	const char *types[] = {"ADDED", "MODIFIED", "MODIFIED", "DELETED"};
	cJSON *evs, *ev;
	int i = 0;
	snprintf(path, sizeof path, "/api/v1/pods?watch=1&resourceVersion=%lu&timeoutSeconds=30",
	         rv0);
	apiserver_double_reset_counts(f->d);
	w = watch_open(f, path);
	nodes = watch_open(f, "/api/v1/nodes?watch=true&timeoutSeconds=30");
	assert_int_equal(wait_open_watches(f, 2), 0);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_WATCH_PODS), 1);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_WATCH_NODES), 1);
	assert_int_equal(apiserver_double_put_pod(f->d, "w", "{\"metadata\":{\"name\":\"pw\"}}"),
	                 0);
	assert_int_equal(apiserver_double_bind(f->d, "w", "pw", "gpu-node-a"), 0);
	assert_int_equal(apiserver_double_set_phase(f->d, "w", "pw", "Running"), 0);
	assert_int_equal(apiserver_double_delete_pod(f->d, "w", "pw"), 0);
	assert_int_equal(watch_wait(w, "\"type\":", 4, 5), 0);
	assert_int_equal(apiserver_double_resource_version(f->d), rv0 + 4);
	evs = watch_events(w);
	assert_int_equal(cJSON_GetArraySize(evs), 4);
	prev = rv0;
	cJSON_ArrayForEach(ev, evs)
	{
		const cJSON *obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
		assert_string_equal(jstr(ev, "type", NULL), types[i]);
		assert_string_equal(jstr(obj, "metadata", "name"), "pw");
		assert_string_equal(jstr(obj, "metadata", "namespace"), "w");
		assert_int_equal(ev_rv(ev), prev + 1);
		prev = ev_rv(ev);
		if (i >= 1)
			assert_string_equal(jstr(obj, "spec", "nodeName"), "gpu-node-a");
		if (i >= 2)
			assert_string_equal(jstr(obj, "status", "phase"), "Running");
		i++;
	}
	cJSON_Delete(evs);
	/* A second watch from the same version replays the history at once. */
	replay = watch_open(f, path);
	assert_int_equal(watch_wait(replay, "\"type\":", 4, 5), 0);
	assert_int_equal(watch_count(replay, "\"DELETED\""), 1);
	/* The node watch saw no pod; it sees a node. */
	assert_int_equal(apiserver_double_put_node(f->d, "{\"metadata\":{\"name\":\"nw\"}}"), 0);
	assert_int_equal(watch_wait(nodes, "\"name\":\"nw\"", 1, 5), 0);
	assert_int_equal(watch_count(nodes, "\"type\":\"ADDED\""), 1);
	assert_int_equal(watch_count(nodes, "\"pw\""), 0);
	assert_int_equal(watch_count(w, "\"nw\""), 0);
	assert_int_equal(apiserver_double_delete_node(f->d, "nw"), 0);
	assert_int_equal(watch_wait(nodes, "\"type\":\"DELETED\"", 1, 5), 0);
	/* Cut: every stream ends cleanly (200, complete chunked body). */
	assert_int_equal(apiserver_double_open_watches(f->d), 3);
	apiserver_double_cut_watches(f->d);
	assert_int_equal(watch_wait(w, NULL, 0, 5), 0);
	assert_int_equal(watch_wait(replay, NULL, 0, 5), 0);
	assert_int_equal(watch_wait(nodes, NULL, 0, 5), 0);
	assert_int_equal(w->cc, CURLE_OK);
	assert_int_equal(w->code, 200);
	assert_int_equal(wait_open_watches(f, 0), 0);
	watch_close(w);
	watch_close(replay);
	watch_close(nodes);
}

static void test_watch_gone_after_compact(void **state)
{
	struct fx *f = *state;
	char path[256];
	unsigned long rv0 = apiserver_double_resource_version(f->d);
	struct watcher *w;
	cJSON *evs, *obj;
	assert_int_equal(apiserver_double_put_pod(f->d, "w", "{\"metadata\":{\"name\":\"pc\"}}"),
	                 0);
	apiserver_double_compact(f->d);
	snprintf(path, sizeof path, "/api/v1/pods?watch=1&resourceVersion=%lu", rv0);
	w = watch_open(f, path);
	assert_int_equal(watch_wait(w, NULL, 0, 5), 0);
	evs = watch_events(w);
	assert_int_equal(cJSON_GetArraySize(evs), 1);
	assert_string_equal(jstr(cJSON_GetArrayItem(evs, 0), "type", NULL), "ERROR");
	obj = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(evs, 0), "object");
	assert_string_equal(jstr(obj, "kind", NULL), "Status");
	assert_string_equal(jstr(obj, "reason", NULL), "Expired");
	assert_non_null(strstr(jstr(obj, "message", NULL), "too old resource version"));
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(obj, "code")->valueint, 410);
	assert_int_equal(w->code, 200);
	cJSON_Delete(evs);
	watch_close(w);
	/* From the current version: fine, and it sees what comes next. */
	snprintf(path, sizeof path, "/api/v1/pods?watch=1&resourceVersion=%lu",
	         apiserver_double_resource_version(f->d));
	w = watch_open(f, path);
	assert_int_equal(wait_open_watches(f, 1), 0);
	assert_int_equal(apiserver_double_delete_pod(f->d, "w", "pc"), 0);
	assert_int_equal(watch_wait(w, "\"DELETED\"", 1, 5), 0);
	assert_int_equal(watch_count(w, "ERROR"), 0);
	watch_close(w);
	/* A list's continue token from before a compaction has expired. */
	{
		cJSON *j = NULL;
		char cont[128];
		assert_int_equal(get(f, "/api/v1/pods?limit=1", "tok", &j), 200);
		snprintf(cont, sizeof cont, "/api/v1/pods?limit=1&continue=%s",
		         jstr(j, "metadata", "continue"));
		cJSON_Delete(j);
		assert_int_equal(get(f, cont, "tok", NULL), 200);
		assert_int_equal(
		    apiserver_double_put_node(f->d, "{\"metadata\":{\"name\":\"nc\"}}"), 0);
		apiserver_double_compact(f->d);
		assert_int_equal(get(f, cont, "tok", &j), 410);
		assert_string_equal(jstr(j, "reason", NULL), "Expired");
		cJSON_Delete(j);
		assert_int_equal(apiserver_double_delete_node(f->d, "nc"), 0);
	}
	/* Injected: the watch request itself answers 410. */
	apiserver_double_set_watch_gone(f->d, 1);
	assert_int_equal(get(f, "/api/v1/nodes?watch=1&resourceVersion=5", "tok", NULL), 410);
	apiserver_double_set_watch_gone(f->d, 0);
	assert_int_equal(get(f, "/api/v1/pods?watch=1&resourceVersion=x", "tok", NULL), 400);
	assert_int_equal(
	    get(f, "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Da", "tok", NULL), 400);
	assert_int_equal(get(f, "/api/v1/namespaces/w/pods?watch=1", "tok", NULL), 400);
}

static void test_watch_bookmarks_and_timeout(void **state)
{
	struct fx *f = *state;
	struct watcher *w, *plain;
	char want[64];
	double t0 = harness_now();
	cJSON *evs, *ev;
	apiserver_double_set_bookmark_ms(f->d, 100);
	w = watch_open(f, "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=2");
	plain = watch_open(f, "/api/v1/pods?watch=1&timeoutSeconds=1");
	assert_int_equal(watch_wait(w, "\"BOOKMARK\"", 3, 5), 0);
	/* Ends by itself after timeoutSeconds. */
	assert_int_equal(watch_wait(w, NULL, 0, 5), 0);
	assert_true(harness_now() - t0 >= 1.9);
	assert_int_equal(w->cc, CURLE_OK);
	evs = watch_events(w);
	assert_true(cJSON_GetArraySize(evs) >= 10);
	snprintf(want, sizeof want, "%lu", apiserver_double_resource_version(f->d));
	cJSON_ArrayForEach(ev, evs)
	{
		const cJSON *obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
		assert_string_equal(jstr(ev, "type", NULL), "BOOKMARK");
		assert_string_equal(jstr(obj, "kind", NULL), "Pod");
		assert_string_equal(jstr(obj, "metadata", "resourceVersion"), want);
	}
	cJSON_Delete(evs);
	assert_int_equal(watch_wait(plain, NULL, 0, 5), 0);
	assert_int_equal(plain->len, 0); /* no bookmarks unless asked */
	watch_close(w);
	watch_close(plain);
	apiserver_double_set_bookmark_ms(f->d, 1000);
}

static void test_stop_ends_watches(void **state)
{
	struct fx *f = *state;
	struct watcher *w = watch_open(f, "/api/v1/nodes?watch=1&timeoutSeconds=60");
	char err[256];
	double t0;
	assert_int_equal(wait_open_watches(f, 1), 0);
	t0 = harness_now();
	assert_int_equal(apiserver_double_stop(f->d), 0);
	assert_true(harness_now() - t0 < 3);
	assert_int_equal(watch_wait(w, NULL, 0, 5), 0);
	assert_int_equal(apiserver_double_open_watches(f->d), 0);
	watch_close(w);
	assert_int_equal(apiserver_double_start(f->d, err, sizeof err), 0);
}

/* Node lists page like pod lists; every page of a list reports the first page's version. */
static void test_node_list_and_versions(void **state)
{
	struct fx *f = *state;
	cJSON *j = NULL, *p;
	char path[256], rv[32];
	int total = 0, pages = 0;
	apiserver_double_reset_counts(f->d);
	snprintf(path, sizeof path, "/api/v1/nodes?limit=1");
	for (;;) {
		assert_int_equal(get(f, path, "tok", &j), 200);
		assert_string_equal(jstr(j, "kind", NULL), "NodeList");
		if (!pages++) {
			snprintf(rv, sizeof rv, "%s", jstr(j, "metadata", "resourceVersion"));
			assert_true(strtoul(rv, NULL, 10) >= 1000);
			/* A change between pages does not change the list's version. */
			assert_int_equal(
			    apiserver_double_put_pod(f->d, "v", "{\"metadata\":{\"name\":\"pv\"}}"),
			    0);
		}
		assert_string_equal(jstr(j, "metadata", "resourceVersion"), rv);
		cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(j, "items"))
		{
			assert_non_null(strstr(jstr(p, "metadata", "resourceVersion"), ""));
			assert_true(*jstr(p, "metadata", "resourceVersion"));
			total++;
		}
		if (!*jstr(j, "metadata", "continue")) {
			cJSON_Delete(j);
			break;
		}
		snprintf(path, sizeof path, "/api/v1/nodes?limit=1&continue=%s",
		         jstr(j, "metadata", "continue"));
		cJSON_Delete(j);
	}
	assert_true(total >= 1);
	assert_int_equal(pages, total); /* the last page is full: no empty page after it */
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LIST_NODES),
	                 (unsigned long)pages);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LIST_PODS), 0);
	assert_int_equal(
	    get(f, "/api/v1/nodes?fieldSelector=metadata.name%3Dgpu-node-a", "tok", &j), 200);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "items")), 1);
	cJSON_Delete(j);
	assert_int_equal(get(f, "/api/v1/nodes?fieldSelector=spec.nodeName%3Dx", "tok", NULL), 400);
	assert_int_equal(apiserver_double_delete_pod(f->d, "v", "pv"), 0);
}

static const char *pod_name(char *buf, int i)
{
	snprintf(buf, 32, "p%d", i);
	return buf;
}

/* Many pods: puts, pages and deletes stay cheap (hash, sequence index, compaction). */
static void test_many_pods(void **state)
{
	struct fx big = {0};
	char pod[256], path[256];
	int n = 30000, total = 0, pages = 0;
	double t0;
	(void)state;
	assert_int_equal(make_double(&big, 0, 0), 0);
	t0 = harness_now();
	for (int i = 0; i < n; i++) {
		snprintf(pod, sizeof pod,
		         "{\"metadata\":{\"name\":\"p%d\",\"namespace\":\"bulk\"},\"spec\":{"
		         "\"nodeName\":\"n%d\"}}",
		         i, i % 100);
		assert_int_equal(apiserver_double_put_pod(big.d, NULL, pod), 0);
	}
	/* Replace one: same place, new version. */
	assert_int_equal(apiserver_double_put_pod(big.d, NULL,
	                                          "{\"metadata\":{\"name\":\"p7\",\"namespace\":"
	                                          "\"bulk\"},\"spec\":{\"nodeName\":\"n9\"}}"),
	                 0);
	for (int i = 0; i < n; i += 2)
		assert_int_equal(apiserver_double_delete_pod(big.d, "bulk", pod_name(pod, i)), 0);
	snprintf(path, sizeof path, "/api/v1/namespaces/bulk/pods?limit=500");
	for (;;) {
		cJSON *j = NULL;
		assert_int_equal(get(&big, path, "tok", &j), 200);
		total += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "items"));
		pages++;
		if (!*jstr(j, "metadata", "continue")) {
			cJSON_Delete(j);
			break;
		}
		snprintf(path, sizeof path, "/api/v1/namespaces/bulk/pods?limit=500&continue=%s",
		         jstr(j, "metadata", "continue"));
		cJSON_Delete(j);
	}
	assert_int_equal(total, n / 2);
	assert_int_equal(pages, n / 2 / 500);
	assert_int_equal(get(&big, "/api/v1/namespaces/bulk/pods/p7", "tok", NULL), 200);
	assert_int_equal(get(&big, "/api/v1/namespaces/bulk/pods/p8", "tok", NULL), 404);
	/* Generous: the quadratic version took minutes here. */
	assert_true(harness_now() - t0 < 60);
	apiserver_double_free(big.d);
	testcert_free(big.srv);
	testcert_free(big.ca);
	unlink(big.ca_file);
}

/* ---- leases ---- */

#define LEASES "/apis/coordination.k8s.io/v1/namespaces/"
#define RESV   "gpu-memory-guard.io/reservations"

/* One request with the token; handle: a keep-alive CURL* or NULL. Returns the HTTP code, *json
 * the parsed body (may be NULL). */
static long call_h(struct fx *f, CURL_HANDLE *handle, const char *method, const char *path,
                   const char *body, cJSON **json)
{
	char url[1024];
	struct http_req rq = {0};
	struct http_resp rs;
	snprintf(url, sizeof url, "%s%s", f->base, path);
	rq.url = url;
	rq.ca_file = f->ca_file;
	rq.bearer = "tok";
	rq.method = method;
	rq.body = body;
	rq.body_len = body ? strlen(body) : 0;
	rq.content_type = body ? "application/json" : NULL;
	http_do(handle, &rq, &rs);
	if (json)
		*json = cJSON_Parse(rs.body);
	http_resp_free(&rs);
	return rs.code;
}

static long call(struct fx *f, const char *method, const char *path, const char *body, cJSON **json)
{
	return call_h(f, NULL, method, path, body, json);
}

/* A Lease body: name, annotation RESV = value (NULL: none), resourceVersion rv (NULL: none). */
static char *lease_body(const char *name, const char *value, const char *rv)
{
	cJSON *l = cJSON_CreateObject(), *md, *spec;
	char *out;
	cJSON_AddStringToObject(l, "apiVersion", "coordination.k8s.io/v1");
	cJSON_AddStringToObject(l, "kind", "Lease");
	md = cJSON_AddObjectToObject(l, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	if (rv)
		cJSON_AddStringToObject(md, "resourceVersion", rv);
	if (value)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "annotations"), RESV, value);
	spec = cJSON_AddObjectToObject(l, "spec");
	cJSON_AddStringToObject(spec, "holderIdentity", "replica-0");
	cJSON_AddNumberToObject(spec, "leaseDurationSeconds", 60);
	out = cJSON_PrintUnformatted(l);
	cJSON_Delete(l);
	return out;
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("\"%s\" not in: %s", needle, hay);
}

static const char *md_str(const cJSON *lease, const char *key)
{
	return jstr(cJSON_GetObjectItemCaseSensitive(lease, "metadata"), key, NULL);
}

static unsigned long md_rv(const cJSON *lease)
{
	return strtoul(md_str(lease, "resourceVersion"), NULL, 10);
}

/* A Status with this code, reason ("" : none) and exact message. */
static void assert_status(const cJSON *s, long code, const char *reason, const char *message)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "reason");
	assert_string_equal(jstr(s, "kind", NULL), "Status");
	assert_string_equal(jstr(s, "status", NULL), "Failure");
	assert_int_equal((long)cJSON_GetObjectItemCaseSensitive(s, "code")->valuedouble, code);
	if (*reason)
		assert_string_equal(jstr(s, "reason", NULL), reason);
	else
		assert_null(r);
	if (message)
		assert_string_equal(jstr(s, "message", NULL), message);
}

static long post_lease(struct fx *f, const char *ns, const char *body, cJSON **json)
{
	char path[256];
	snprintf(path, sizeof path, LEASES "%s/leases", ns);
	return call(f, "POST", path, body, json);
}

static long put_lease(struct fx *f, const char *ns, const char *name, const char *body,
                      cJSON **json)
{
	char path[512];
	snprintf(path, sizeof path, LEASES "%s/leases/%s", ns, name);
	return call(f, "PUT", path, body, json);
}

static long get_lease(struct fx *f, const char *ns, const char *name, cJSON **json)
{
	char path[512];
	snprintf(path, sizeof path, LEASES "%s/leases/%s", ns, name);
	return call(f, "GET", path, NULL, json);
}

/* POST: 201 with the server's fields; GET reads it back; a taken name is 409 AlreadyExists; a
 * set resourceVersion is 500; the client's uid and creationTimestamp are replaced. */
static void test_lease_create_and_get(void **state)
{
	struct fx *f = *state;
	cJSON *j = NULL, *g = NULL;
	char *body = lease_body("gpu-node-x", "[{\"uid\":\"u1\",\"bytes\":1}]", NULL), *ann;
	apiserver_double_reset_counts(f->d);
	assert_int_equal(get_lease(f, "gmg-a", "gpu-node-x", &j), 404);
	assert_status(j, 404, "NotFound", "leases.coordination.k8s.io \"gpu-node-x\" not found");
	assert_string_equal(jstr(j, "details", "kind"), "leases");
	assert_string_equal(jstr(j, "details", "group"), "coordination.k8s.io");
	cJSON_Delete(j);

	assert_int_equal(post_lease(f, "gmg-a", body, &j), 201);
	assert_string_equal(jstr(j, "kind", NULL), "Lease");
	assert_string_equal(jstr(j, "apiVersion", NULL), "coordination.k8s.io/v1");
	assert_string_equal(md_str(j, "namespace"), "gmg-a");
	assert_int_equal(strlen(md_str(j, "uid")), 36);
	assert_int_equal(strlen(md_str(j, "creationTimestamp")), 20);
	assert_int_equal(md_rv(j), apiserver_double_resource_version(f->d));
	assert_string_equal(
	    jstr(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "annotations", RESV),
	    "[{\"uid\":\"u1\",\"bytes\":1}]");
	assert_string_equal(jstr(j, "spec", "holderIdentity"), "replica-0");
	assert_int_equal(get_lease(f, "gmg-a", "gpu-node-x", &g), 200);
	assert_true(cJSON_Compare(j, g, 1));
	cJSON_Delete(g);
	ann = apiserver_double_lease_annotation(f->d, "gmg-a", "gpu-node-x", RESV);
	assert_string_equal(ann, "[{\"uid\":\"u1\",\"bytes\":1}]");
	free(ann);
	assert_null(apiserver_double_lease_annotation(f->d, "gmg-a", "gpu-node-x", "other"));
	assert_null(apiserver_double_lease_annotation(f->d, "gmg-b", "gpu-node-x", RESV));

	/* Taken: 409 AlreadyExists, nothing written. */
	{
		unsigned long rv = apiserver_double_resource_version(f->d);
		assert_int_equal(post_lease(f, "gmg-a", body, &g), 409);
		assert_status(g, 409, "AlreadyExists",
		              "leases.coordination.k8s.io \"gpu-node-x\" already exists");
		assert_string_equal(jstr(g, "details", "name"), "gpu-node-x");
		cJSON_Delete(g);
		assert_int_equal(apiserver_double_resource_version(f->d), rv);
	}
	/* The same name in another namespace is another lease. */
	assert_int_equal(post_lease(f, "gmg-b", body, NULL), 201);
	free(body);

	/* uid and creationTimestamp are the server's; a resourceVersion may not be sent. */
	assert_int_equal(post_lease(f, "gmg-a",
	                            "{\"metadata\":{\"name\":\"n2\",\"uid\":\"mine\","
	                            "\"creationTimestamp\":\"2001-01-01T00:00:00Z\"}}",
	                            &g),
	                 201);
	assert_string_not_equal(md_str(g, "uid"), "mine");
	assert_string_not_equal(md_str(g, "uid"), md_str(j, "uid"));
	assert_string_not_equal(md_str(g, "creationTimestamp"), "2001-01-01T00:00:00Z");
	assert_string_equal(jstr(g, "kind", NULL), "Lease"); /* defaulted */
	cJSON_Delete(g);
	cJSON_Delete(j);
	assert_int_equal(post_lease(f, "gmg-a",
	                            "{\"metadata\":{\"name\":\"n3\",\"resourceVersion\":\"7\"}}",
	                            &g),
	                 500);
	assert_status(g, 500, "", "resourceVersion should not be set on objects to be created");
	cJSON_Delete(g);
	assert_null(apiserver_double_get_lease(f->d, "gmg-a", "n3"));
	/* generateName: the prefix and 5 characters. */
	assert_int_equal(post_lease(f, "gmg-a", "{\"metadata\":{\"generateName\":\"rec-\"}}", &g),
	                 201);
	assert_int_equal(strlen(md_str(g, "name")), 9);
	assert_memory_equal(md_str(g, "name"), "rec-", 4);
	cJSON_Delete(g);

	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_GET_LEASE), 2);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_WRITE), 6);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_CREATED), 4);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_CONFLICT), 1);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_WRITE), 0);
}

/* PUT is a compare-and-swap on metadata.resourceVersion. */
static void test_lease_update_is_compare_and_swap(void **state)
{
	struct fx *f = *state;
	cJSON *j = NULL, *u = NULL, *s = NULL;
	char rv0[32], rv1[32], *body, *ann;
	unsigned long v;
	apiserver_double_reset_counts(f->d);
	body = lease_body("node-cas", "v0", NULL);
	assert_int_equal(post_lease(f, "gmg-c", body, &j), 201);
	free(body);
	snprintf(rv0, sizeof rv0, "%s", md_str(j, "resourceVersion"));

	/* The current version: applied, a new version, uid and creationTimestamp kept. */
	body = lease_body("node-cas", "v1", rv0);
	assert_int_equal(put_lease(f, "gmg-c", "node-cas", body, &u), 200);
	free(body);
	assert_true(md_rv(u) > md_rv(j));
	assert_int_equal(md_rv(u), apiserver_double_resource_version(f->d));
	assert_string_equal(md_str(u, "uid"), md_str(j, "uid"));
	assert_string_equal(md_str(u, "creationTimestamp"), md_str(j, "creationTimestamp"));
	snprintf(rv1, sizeof rv1, "%s", md_str(u, "resourceVersion"));

	/* The old version again: 409 Conflict with the real message; nothing written. */
	v = apiserver_double_resource_version(f->d);
	body = lease_body("node-cas", "v2-stale", rv0);
	assert_int_equal(put_lease(f, "gmg-c", "node-cas", body, &s), 409);
	free(body);
	assert_status(s, 409, "Conflict",
	              "Operation cannot be fulfilled on leases.coordination.k8s.io \"node-cas\": "
	              "the object has been modified; please apply your changes to the latest "
	              "version and try again");
	assert_string_equal(jstr(s, "details", "kind"), "leases");
	cJSON_Delete(s);
	assert_int_equal(apiserver_double_resource_version(f->d), v);
	ann = apiserver_double_lease_annotation(f->d, "gmg-c", "node-cas", RESV);
	assert_string_equal(ann, "v1");
	free(ann);

	/* No version: 422 (leases may not be updated unconditionally); not a number: 500. */
	body = lease_body("node-cas", "v3", NULL);
	assert_int_equal(put_lease(f, "gmg-c", "node-cas", body, &s), 422);
	free(body);
	assert_status(s, 422, "Invalid",
	              "leases.coordination.k8s.io \"node-cas\" is invalid: "
	              "metadata.resourceVersion: Invalid value: 0x0: must be specified for an "
	              "update");
	cJSON_Delete(s);
	body = lease_body("node-cas", "v3", "abc");
	assert_int_equal(put_lease(f, "gmg-c", "node-cas", body, &s), 500);
	free(body);
	assert_status(
	    s, 500, "",
	    "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": "
	    "invalid syntax");
	cJSON_Delete(s);

	/* Another uid: the uid precondition fails (409). */
	{
		cJSON *t = cJSON_Duplicate(u, 1);
		char *text;
		cJSON_ReplaceItemInObject(cJSON_GetObjectItemCaseSensitive(t, "metadata"), "uid",
		                          cJSON_CreateString("not-its-uid"));
		text = cJSON_PrintUnformatted(t);
		assert_int_equal(put_lease(f, "gmg-c", "node-cas", text, &s), 409);
		assert_string_equal(jstr(s, "reason", NULL), "Conflict");
		assert_contains(jstr(s, "message", NULL),
		                "Precondition failed: UID in precondition: not-its-uid");
		cJSON_Delete(s);
		free(text);
		cJSON_Delete(t);
	}

	/* The stored object sent back unchanged: 200, no new version (etcd's no-op update). */
	{
		char *same = cJSON_PrintUnformatted(u);
		v = apiserver_double_resource_version(f->d);
		assert_int_equal(put_lease(f, "gmg-c", "node-cas", same, &s), 200);
		assert_string_equal(md_str(s, "resourceVersion"), rv1);
		assert_int_equal(apiserver_double_resource_version(f->d), v);
		cJSON_Delete(s);
		free(same);
	}

	/* An absent lease: PUT creates it (201), whatever version the body names. */
	body = lease_body("node-new", "w", "123456");
	assert_int_equal(put_lease(f, "gmg-c", "node-new", body, &s), 201);
	free(body);
	assert_int_equal(md_rv(s), apiserver_double_resource_version(f->d));
	assert_int_equal(strlen(md_str(s, "uid")), 36);
	cJSON_Delete(s);

	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_CREATED), 2);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_UPDATED), 1);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_CONFLICT), 2);
	cJSON_Delete(u);
	cJSON_Delete(j);
}

/* What the decoder, the handler and validation refuse; none of it is stored. */
static void test_lease_bad_requests(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *method, *name, *body;
		long code;
		const char *reason, *message; /* message: a substring */
	} cases[] = {
	    {"POST", NULL, "{not json", 400, "BadRequest",
	     "the object provided is unrecognized (must be of type Lease)"},
	    {"POST", NULL, "[1,2]", 400, "BadRequest",
	     "the object provided is unrecognized (must be of type Lease)"},
	    {"POST", NULL, "", 400, "BadRequest",
	     "the object provided is unrecognized (must be of type Lease)"},
	    {"POST", NULL,
	     "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"b1\"}}", 400,
	     "BadRequest", "Pod in version \"v1\" cannot be handled as a Lease"},
	    {"POST", NULL,
	     "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1beta1\",\"metadata\":{"
	     "\"name\":\"b1\"}}",
	     400, "BadRequest",
	     "the API version in the data (coordination.k8s.io/v1beta1) does not match the "
	     "expected API version (coordination.k8s.io/v1)"},
	    {"POST", NULL, "{\"metadata\":{\"name\":\"b1\",\"annotations\":{\"a\":5}}}", 400,
	     "BadRequest",
	     "Lease in version \"v1\" cannot be handled as a Lease: json: cannot unmarshal number "
	     "into Go struct field ObjectMeta.metadata.annotations of type string"},
	    {"POST", NULL, "{\"metadata\":{\"name\":7}}", 400, "BadRequest",
	     "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type "
	     "string"},
	    {"POST", NULL,
	     "{\"metadata\":{\"name\":\"b1\"},\"spec\":{\"leaseDurationSeconds\":\"x\"}}", 400,
	     "BadRequest",
	     "json: cannot unmarshal string into Go struct field "
	     "LeaseSpec.spec.leaseDurationSeconds "
	     "of type int32"},
	    {"POST", NULL, "{\"metadata\":{\"name\":\"b1\",\"namespace\":\"elsewhere\"}}", 400,
	     "BadRequest",
	     "the namespace of the provided object does not match the namespace sent on the "
	     "request"},
	    {"PUT", "b1", "{\"metadata\":{\"name\":\"b2\",\"resourceVersion\":\"1\"}}", 400,
	     "BadRequest", "the name of the object (b2) does not match the name on the URL (b1)"},
	    {"POST", NULL, "{\"metadata\":{}}", 422, "Invalid",
	     "Lease.coordination.k8s.io \"\" is invalid: metadata.name: Required value: name or "
	     "generateName is required"},
	    {"POST", NULL, "{\"metadata\":{\"name\":\"Bad_Name\"}}", 422, "Invalid",
	     "Lease.coordination.k8s.io \"Bad_Name\" is invalid: metadata.name: Invalid value: "
	     "\"Bad_Name\": a lowercase RFC 1123 subdomain must consist of"},
	    {"POST", NULL, "{\"metadata\":{\"name\":\"b1\"},\"spec\":{\"leaseDurationSeconds\":0}}",
	     422, "Invalid",
	     "Lease.coordination.k8s.io \"b1\" is invalid: spec.leaseDurationSeconds: Invalid "
	     "value: 0: must be greater than 0"},
	    {"POST", NULL,
	     "{\"metadata\":{\"name\":\"b1\"},\"spec\":{\"leaseDurationSeconds\":-1,"
	     "\"leaseTransitions\":-2}}",
	     422, "Invalid",
	     "is invalid: [spec.leaseDurationSeconds: Invalid value: -1: must be greater than 0, "
	     "spec.leaseTransitions: Invalid value: -2: must be greater than or equal to 0]"},
	    {"PATCH", "b1", "{}", 405, "MethodNotAllowed", "PUT and DELETE of leases"},
	    {"GET", NULL, NULL, 400, "BadRequest", "lists and watches of leases"},
	};
	char path[512];
	unsigned long rv = apiserver_double_resource_version(f->d);
	apiserver_double_reset_counts(f->d);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		cJSON *s = NULL;
		long code;
		if (cases[i].name)
			snprintf(path, sizeof path, LEASES "gmg-bad/leases/%s", cases[i].name);
		else
			snprintf(path, sizeof path, LEASES "gmg-bad/leases");
		code = call(f, cases[i].method, path, cases[i].body, &s);
		if (code != cases[i].code || strcmp(jstr(s, "reason", NULL), cases[i].reason) ||
		    !strstr(jstr(s, "message", NULL), cases[i].message))
			fail_msg("case %zu (%s %s): HTTP %ld reason %s message %s", i,
			         cases[i].method, cases[i].body ? cases[i].body : "", code,
			         jstr(s, "reason", NULL), jstr(s, "message", NULL));
		cJSON_Delete(s);
	}
	/* Annotations over 256 KiB (keys + values): 422 TooLong. */
	{
		size_t n = 256 * 1024 - 1; /* + the key's 2 bytes: over by one */
		char *big = malloc(n + 64), *body;
		cJSON *s = NULL;
		memset(big, 'x', n);
		big[n] = '\0';
		assert_true(
		    asprintf(&body,
		             "{\"metadata\":{\"name\":\"b1\",\"annotations\":{\"k1\":\"%s\"}}}",
		             big) > 0);
		assert_int_equal(post_lease(f, "gmg-bad", body, &s), 422);
		assert_string_equal(
		    jstr(s, "message", NULL),
		    "Lease.coordination.k8s.io \"b1\" is invalid: metadata.annotations: "
		    "Too long: may not be more than 262144 bytes");
		cJSON_Delete(s);
		/* One byte less: accepted. */
		free(body);
		big[n - 1] = '\0';
		assert_true(
		    asprintf(&body,
		             "{\"metadata\":{\"name\":\"b1\",\"annotations\":{\"k1\":\"%s\"}}}",
		             big) > 0);
		assert_int_equal(post_lease(f, "gmg-bad", body, NULL), 201);
		free(body);
		free(big);
		assert_int_equal(apiserver_double_delete_lease(f->d, "gmg-bad", "b1"), 0);
	}
	assert_int_equal(call(f, "POST", LEASES "gmg-bad/leases?dryRun=All",
	                      "{\"metadata\":{\"name\":\"b1\"}}", NULL),
	                 400);
	assert_null(apiserver_double_get_lease(f->d, "gmg-bad", "b1"));
	assert_null(apiserver_double_get_lease(f->d, "gmg-bad", "b2"));
	assert_null(apiserver_double_get_lease(f->d, "gmg-bad", "Bad_Name"));
	/* Nothing but the accepted lease and its deletion was written. */
	assert_int_equal(apiserver_double_resource_version(f->d), rv + 2);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_CREATED), 1);
}

/* DELETE: 200 Success naming the lease, 404 after; DeleteOptions preconditions hold or 409. */
static void test_lease_delete(void **state)
{
	struct fx *f = *state;
	cJSON *j = NULL, *s = NULL;
	char *body = lease_body("node-del", "x", NULL), opts[256], *ann;
	const char *path = LEASES "gmg-d/leases/node-del";
	assert_int_equal(post_lease(f, "gmg-d", body, &j), 201);
	free(body);
	snprintf(opts, sizeof opts,
	         "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"preconditions\":{"
	         "\"resourceVersion\":\"%lu\"}}",
	         md_rv(j) - 1);
	assert_int_equal(call(f, "DELETE", path, opts, &s), 409);
	assert_string_equal(jstr(s, "reason", NULL), "Conflict");
	assert_contains(jstr(s, "message", NULL),
	                "Precondition failed: ResourceVersion in precondition");
	cJSON_Delete(s);
	ann = apiserver_double_lease_annotation(f->d, "gmg-d", "node-del", RESV);
	assert_non_null(ann); /* still there */
	free(ann);
	snprintf(opts, sizeof opts, "{\"preconditions\":{\"resourceVersion\":\"%s\"}}",
	         md_str(j, "resourceVersion"));
	assert_int_equal(call(f, "DELETE", path, opts, &s), 200);
	assert_string_equal(jstr(s, "kind", NULL), "Status");
	assert_string_equal(jstr(s, "status", NULL), "Success");
	assert_string_equal(jstr(s, "details", "name"), "node-del");
	assert_string_equal(jstr(s, "details", "uid"), md_str(j, "uid"));
	cJSON_Delete(s);
	assert_int_equal(call(f, "DELETE", path, NULL, &s), 404);
	cJSON_Delete(s);
	assert_int_equal(get_lease(f, "gmg-d", "node-del", NULL), 404);
	cJSON_Delete(j);
}

/* ---- many writers: the compare-and-swap is atomic ---- */

#define CAS_THREADS 8
#define CAS_INCR    25

struct casw {
	struct fx *f;
	int conflicts; /* 409s this writer got */
	int writes;    /* its successful writes */
	int errors;
};

/* The lease's counter (its annotation, a decimal number) read, incremented and written back
 * with the version read; on 409 read again. CAS_INCR increments. */
static void *cas_writer(void *arg)
{
	struct casw *w = arg;
	CURL_HANDLE *h = http_handle_new();
	const char *path = LEASES "gmg-cas/leases/counter";
	while (w->writes < CAS_INCR && w->errors == 0) {
		cJSON *l = NULL, *ann;
		char *body, num[32];
		long code = call_h(w->f, h, "GET", path, NULL, &l);
		if (code == 404) {
			cJSON_Delete(l);
			body = lease_body("counter", "1", NULL);
			code = call_h(w->f, h, "POST", LEASES "gmg-cas/leases", body, NULL);
			free(body);
		} else if (code == 200) {
			ann = cJSON_GetObjectItemCaseSensitive(
			    cJSON_GetObjectItemCaseSensitive(l, "metadata"), "annotations");
			snprintf(num, sizeof num, "%ld",
			         strtol(jstr(ann, RESV, NULL), NULL, 10) + 1);
			cJSON_ReplaceItemInObject(ann, RESV, cJSON_CreateString(num));
			body = cJSON_PrintUnformatted(l);
			cJSON_Delete(l);
			code = call_h(w->f, h, "PUT", path, body, NULL);
			free(body);
		} else {
			cJSON_Delete(l);
		}
		if (code == 200 || code == 201)
			w->writes++;
		else if (code == 409)
			w->conflicts++;
		else
			w->errors++;
	}
	http_handle_free(h);
	return NULL;
}

/* Writers racing read-modify-write on one lease: no increment lost (every 409 was a real
 * lost race: conflicts counted by the double = conflicts the writers saw), with and without
 * a delay that widens the race. */
static void test_lease_concurrent_writers(void **state)
{
	struct fx *f = *state;
	for (int round = 0; round < 2; round++) {
		struct casw w[CAS_THREADS];
		pthread_t t[CAS_THREADS];
		int conflicts = 0;
		char *ann;
		apiserver_double_delete_lease(f->d, "gmg-cas", "counter");
		apiserver_double_reset_counts(f->d);
		apiserver_double_set_lease_delay_ms(f->d, round ? 3 : 0);
		for (int i = 0; i < CAS_THREADS; i++) {
			w[i] = (struct casw){f, 0, 0, 0};
			assert_int_equal(pthread_create(&t[i], NULL, cas_writer, &w[i]), 0);
		}
		for (int i = 0; i < CAS_THREADS; i++) {
			pthread_join(t[i], NULL);
			assert_int_equal(w[i].errors, 0);
			assert_int_equal(w[i].writes, CAS_INCR);
			conflicts += w[i].conflicts;
		}
		ann = apiserver_double_lease_annotation(f->d, "gmg-cas", "counter", RESV);
		assert_non_null(ann);
		assert_int_equal(strtol(ann, NULL, 10), CAS_THREADS * CAS_INCR);
		free(ann);
		assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_CREATED), 1);
		assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_UPDATED),
		                 CAS_THREADS * CAS_INCR - 1);
		assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_CONFLICT),
		                 (unsigned long)conflicts);
		/* With the delay, 8 writers cannot all have been lucky. */
		if (round)
			assert_true(conflicts > 0);
		print_message("round %d: %d conflicts\n", round, conflicts);
	}
	apiserver_double_set_lease_delay_ms(f->d, 0);
}

struct delayed_put {
	struct fx *f;
	char *body;
	long code;
	double seconds;
};

static void *delayed_put_main(void *arg)
{
	struct delayed_put *p = arg;
	double t0 = harness_now();
	p->code = put_lease(p->f, "gmg-inj", "node-inj", p->body, NULL);
	p->seconds = harness_now() - t0;
	return NULL;
}

/* Injected failures write nothing and look like the real ones; the delay is before the write,
 * so a version that goes stale during it is refused. */
static void test_lease_injection(void **state)
{
	struct fx *f = *state;
	cJSON *j = NULL, *s = NULL;
	char *body = lease_body("node-inj", "a", NULL), *put;
	unsigned long rv;
	double t0;
	assert_int_equal(post_lease(f, "gmg-inj", body, &j), 201);
	put = lease_body("node-inj", "b", md_str(j, "resourceVersion"));
	apiserver_double_reset_counts(f->d);
	rv = apiserver_double_resource_version(f->d);

	apiserver_double_fail_lease_writes(f->d, 2, 409);
	assert_int_equal(put_lease(f, "gmg-inj", "node-inj", put, &s), 409);
	assert_status(s, 409, "Conflict",
	              "Operation cannot be fulfilled on leases.coordination.k8s.io \"node-inj\": "
	              "the object has been modified; please apply your changes to the latest "
	              "version and try again");
	cJSON_Delete(s);
	assert_int_equal(post_lease(f, "gmg-inj", body, &s), 409);
	assert_status(s, 409, "AlreadyExists",
	              "leases.coordination.k8s.io \"node-inj\" already exists");
	cJSON_Delete(s);
	assert_int_equal(get_lease(f, "gmg-inj", "node-inj", NULL), 200); /* reads unaffected */
	apiserver_double_fail_lease_writes(f->d, 1, 503);
	assert_int_equal(put_lease(f, "gmg-inj", "node-inj", put, &s), 503);
	assert_status(s, 503, "ServiceUnavailable", NULL);
	cJSON_Delete(s);
	assert_int_equal(apiserver_double_resource_version(f->d), rv); /* nothing written */
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_CONFLICT), 0);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_WRITE), 3);

	/* The HTTP controls, as curl would use them. */
	assert_int_equal(call(f, "POST", "/_double/fail-lease-writes?code=500&times=1", NULL, &s),
	                 200);
	assert_int_equal((int)cJSON_GetObjectItemCaseSensitive(s, "leaseFailLeft")->valuedouble, 1);
	cJSON_Delete(s);
	assert_int_equal(put_lease(f, "gmg-inj", "node-inj", put, NULL), 500);
	assert_int_equal(call(f, "POST", "/_double/delay-lease-writes?ms=0", NULL, NULL), 200);

	/* The delay: a writer waits; its version goes stale meanwhile; 409 after the wait. */
	{
		struct delayed_put p = {f, put, 0, 0};
		pthread_t t;
		apiserver_double_set_lease_delay_ms(f->d, 700);
		assert_int_equal(pthread_create(&t, NULL, delayed_put_main, &p), 0);
		assert_int_equal(
		    apiserver_double_wait_count(f->d, APISERVER_DOUBLE_LEASE_WRITE, 5, 5000), 0);
		t0 = harness_now();
		assert_int_equal(get_lease(f, "gmg-inj", "node-inj", NULL), 200);
		assert_true(harness_now() - t0 < 0.5); /* reads are not delayed */
		assert_int_equal(apiserver_double_put_lease(
		                     f->d, "gmg-inj", "{\"metadata\":{\"name\":\"node-inj\"}}"),
		                 0);
		pthread_join(t, NULL);
		assert_int_equal(p.code, 409);
		assert_true(p.seconds >= 0.65);
		apiserver_double_set_lease_delay_ms(f->d, 0);
	}
	free(put);
	free(body);
	cJSON_Delete(j);
}

/* delete_lease_before_put (a test-double feature): the next PUT of a stored lease finds it
 * deleted and answers 404 NotFound; a PUT of an absent lease is not affected (create on update:
 * 201), nor are later PUTs. */
static void test_lease_deleted_before_put(void **state)
{
	struct fx *f = *state;
	cJSON *j = NULL, *s = NULL;
	char *body = lease_body("node-gone", "a", NULL), *put;
	assert_int_equal(post_lease(f, "gmg-gone", body, &j), 201);
	put = lease_body("node-gone", "b", md_str(j, "resourceVersion"));
	apiserver_double_reset_counts(f->d);

	apiserver_double_delete_lease_before_put(f->d, 1);
	assert_int_equal(put_lease(f, "gmg-gone", "node-gone", put, &s), 404);
	assert_status(s, 404, "NotFound", "leases.coordination.k8s.io \"node-gone\" not found");
	cJSON_Delete(s);
	assert_int_equal(get_lease(f, "gmg-gone", "node-gone", NULL), 404);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_PUT_GONE), 1);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_DELETED), 1);
	/* The switch is spent: the same PUT now creates the lease, as kube-apiserver does. */
	assert_int_equal(put_lease(f, "gmg-gone", "node-gone", put, &s), 201);
	cJSON_Delete(s);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_CREATED), 1);
	/* Armed while the lease is absent: that PUT creates it (201), the switch stays armed. */
	assert_int_equal(apiserver_double_delete_lease(f->d, "gmg-gone", "node-gone"), 0);
	apiserver_double_delete_lease_before_put(f->d, 1);
	assert_int_equal(put_lease(f, "gmg-gone", "node-gone", put, &s), 201);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_PUT_GONE), 1);
	char *put2 = lease_body("node-gone", "c", md_str(s, "resourceVersion"));
	cJSON_Delete(s);
	assert_int_equal(put_lease(f, "gmg-gone", "node-gone", put2, NULL), 404);
	assert_int_equal(apiserver_double_count(f->d, APISERVER_DOUBLE_LEASE_PUT_GONE), 2);
	apiserver_double_delete_lease_before_put(f->d, 0);
	free(put2);
	free(put);
	free(body);
	cJSON_Delete(j);
}

/* Leases put directly or loaded from a state file are served like created ones. */
static void test_lease_put_and_load(void **state)
{
	struct fx *f = *state;
	char path[128], err[256];
	cJSON *j = NULL;
	FILE *fp;
	assert_int_equal(
	    apiserver_double_put_lease(f->d, "gmg-p",
	                               "{\"metadata\":{\"name\":\"left\",\"annotations\":{\"" RESV
	                               "\":\"[]\"}}}"),
	    0);
	assert_int_equal(get_lease(f, "gmg-p", "left", &j), 200);
	assert_string_equal(jstr(j, "kind", NULL), "Lease");
	assert_string_equal(md_str(j, "namespace"), "gmg-p");
	assert_int_equal(strlen(md_str(j, "uid")), 36);
	assert_int_equal(md_rv(j), apiserver_double_resource_version(f->d));
	cJSON_Delete(j);
	snprintf(path, sizeof path, "/tmp/gmg-double-leases-%d.json", (int)getpid());
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\",\"items\":[{"
	      "\"metadata\":{\"name\":\"l1\",\"namespace\":\"gmg-p\",\"uid\":\"fixed-uid\"}},{"
	      "\"metadata\":{\"name\":\"l2\",\"namespace\":\"gmg-q\"}}]}",
	      fp);
	fclose(fp);
	assert_int_equal(apiserver_double_load_file(f->d, path, err, sizeof err), 2);
	unlink(path);
	assert_int_equal(get_lease(f, "gmg-p", "l1", &j), 200);
	assert_string_equal(md_str(j, "uid"), "fixed-uid");
	cJSON_Delete(j);
	assert_int_equal(get_lease(f, "gmg-q", "l2", NULL), 200);
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
	    cmocka_unit_test(test_watch_events_after_put),
	    cmocka_unit_test(test_watch_gone_after_compact),
	    cmocka_unit_test(test_watch_bookmarks_and_timeout),
	    cmocka_unit_test(test_stop_ends_watches),
	    cmocka_unit_test(test_node_list_and_versions),
	    cmocka_unit_test(test_many_pods),
	    cmocka_unit_test(test_lease_create_and_get),
	    cmocka_unit_test(test_lease_update_is_compare_and_swap),
	    cmocka_unit_test(test_lease_bad_requests),
	    cmocka_unit_test(test_lease_delete),
	    cmocka_unit_test(test_lease_concurrent_writers),
	    cmocka_unit_test(test_lease_injection),
	    cmocka_unit_test(test_lease_deleted_before_put),
	    cmocka_unit_test(test_lease_put_and_load),
	};
	curl_global_init(CURL_GLOBAL_ALL);
	return cmocka_run_group_tests(tests, setup, teardown);
}
