/*
 * Tests of the API server TEST DOUBLE itself (no gpu-memory-guard binary involved), so the
 * integration tests built on it rest on a checked foundation: token check, GETs, list
 * pagination and field selectors, failure injection, down/up, binding, the TLS probe (both
 * outcomes, so the TLS 1.1 refusal test of the webhook can fail), resource versions, node lists
 * and watches (events after a change, replay, 410 after compaction, bookmarks, cut, stop).
 */
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
	};
	curl_global_init(CURL_GLOBAL_ALL);
	return cmocka_run_group_tests(tests, setup, teardown);
}
