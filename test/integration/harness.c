/*
 * harness: set-up and clients around the real binary (see harness.h).
 */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FILE_MAX     (16u * 1024u * 1024u)
#define RESP_MAX     (16u * 1024u * 1024u)
#define MAX_ARGS     64
#define BINDING_POD  "llama-8b-6d5f9c7b8-x2k4q"
#define BINDING_NS   "inference"
#define UNSCHED_FILE "review-pod-create-unscheduled.json"

static const char *g_binary;
static const char *g_data;

void harness_init(int argc, char **argv)
{
	g_binary = argc > 1 ? argv[1] : getenv("GMG_BINARY");
	g_data = getenv("GMG_TEST_DATA");
	if (!g_data && argc > 2)
		g_data = argv[2];
	if (!g_binary || !g_data) {
		fprintf(stderr,
		        "usage: %s GPU_MEMORY_GUARD_BINARY [TEST_DATA_DIR] "
		        "(or GMG_BINARY, GMG_TEST_DATA)\n",
		        argv[0]);
		exit(2);
	}
	curl_global_init(CURL_GLOBAL_ALL);
	signal(SIGPIPE, SIG_IGN);
}

const char *harness_binary(void)
{
	return g_binary;
}

const char *harness_data_dir(void)
{
	return g_data;
}

double harness_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int harness_free_port(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof sin;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
	if (fd < 0)
		return -1;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sin, &sl) == 0)
		port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

char *harness_read_file(const char *name, size_t *len)
{
	char path[HARNESS_PATHMAX * 2];
	struct stat st;
	FILE *f;
	char *buf;
	size_t n;
	if (name[0] == '/')
		snprintf(path, sizeof path, "%s", name);
	else
		snprintf(path, sizeof path, "%s/%s", g_data, name);
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	if (fstat(fileno(f), &st) || st.st_size < 0 || (size_t)st.st_size > FILE_MAX) {
		fclose(f);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	n = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
	fclose(f);
	if (!buf)
		return NULL;
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static void replace_str(cJSON *obj, const char *key, const char *value)
{
	if (!cJSON_IsObject(obj))
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
	cJSON_AddStringToObject(obj, key, value);
}

void harness_pod_uid(const char *ns, const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, "uid-%s-%s", ns ? ns : "", name);
}

char *harness_review_from_fixture(const char *fixture, const char *uid, const char *pod_name,
                                  const char *node)
{
	char *text = harness_read_file(fixture, NULL), *out = NULL;
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON *req, *obj, *target, *spec;
	free(text);
	if (!doc)
		return NULL;
	req = cJSON_GetObjectItemCaseSensitive(doc, "request");
	obj = cJSON_GetObjectItemCaseSensitive(req, "object");
	if (uid)
		replace_str(req, "uid", uid);
	if (pod_name) {
		const cJSON *ns = cJSON_GetObjectItemCaseSensitive(req, "namespace");
		const cJSON *was = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "name");
		int same = cJSON_IsString(was) && strcmp(was->valuestring, pod_name) == 0;
		char pod_uid[HARNESS_UID_MAX];
		replace_str(req, "name", pod_name);
		replace_str(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "name", pod_name);
		/* Every pod has its own uid (a pod CREATE's object carries it), and a Binding
		 * carries its pod's (kube-scheduler sets it): the pod world_add_pod made; the
		 * fixture's own pod (add_binding_pod) keeps the fixture's uid. */
		if (cJSON_IsString(ns) && !same) {
			harness_pod_uid(ns->valuestring, pod_name, pod_uid, sizeof(pod_uid));
			replace_str(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "uid",
			            pod_uid);
		}
	}
	if (node) {
		target = cJSON_GetObjectItemCaseSensitive(obj, "target");
		spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
		if (target)
			replace_str(target, "name", node);
		else if (spec)
			replace_str(spec, "nodeName", node);
	}
	out = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	return out;
}

int harness_parse_review(const char *body, struct review_answer *a)
{
	cJSON *doc = body ? cJSON_Parse(body) : NULL;
	const cJSON *resp, *v, *st, *w;
	int rc = -1;
	memset(a, 0, sizeof *a);
	if (!doc)
		return -1;
	resp = cJSON_GetObjectItemCaseSensitive(doc, "response");
	if (!cJSON_IsObject(resp))
		goto out;
	v = cJSON_GetObjectItemCaseSensitive(doc, "apiVersion");
	a->well_formed = cJSON_IsString(v) && !strcmp(v->valuestring, "admission.k8s.io/v1");
	v = cJSON_GetObjectItemCaseSensitive(doc, "kind");
	a->well_formed =
	    a->well_formed && cJSON_IsString(v) && !strcmp(v->valuestring, "AdmissionReview");
	v = cJSON_GetObjectItemCaseSensitive(resp, "uid");
	if (cJSON_IsString(v))
		snprintf(a->uid, sizeof a->uid, "%s", v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(resp, "allowed");
	a->well_formed = a->well_formed && cJSON_IsBool(v);
	a->allowed = cJSON_IsTrue(v);
	st = cJSON_GetObjectItemCaseSensitive(resp, "status");
	v = cJSON_GetObjectItemCaseSensitive(st, "code");
	if (cJSON_IsNumber(v))
		a->code = (int)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(st, "message");
	if (cJSON_IsString(v))
		snprintf(a->message, sizeof a->message, "%s", v->valuestring);
	/* A validating webhook must never patch. */
	if (cJSON_GetObjectItemCaseSensitive(resp, "patch") ||
	    cJSON_GetObjectItemCaseSensitive(resp, "patchType"))
		a->well_formed = 0;
	cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(resp, "warnings"))
	{
		size_t used = strlen(a->warnings);
		if (cJSON_IsString(w))
			snprintf(a->warnings + used, sizeof a->warnings - used, "%s%s",
			         used ? " | " : "", w->valuestring);
	}
	rc = 0;
out:
	cJSON_Delete(doc);
	return rc;
}

/* ---- HTTP ---- */

struct sink {
	char *buf;
	size_t len;
	size_t cap;
};

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t add = size * n;
	if (s->len + add + 1 > RESP_MAX)
		return 0;
	if (s->len + add + 1 > s->cap) {
		size_t cap = (s->len + add + 1) * 2;
		char *nb = realloc(s->buf, cap);
		if (!nb)
			return 0;
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, p, add);
	s->len += add;
	s->buf[s->len] = '\0';
	return add;
}

struct upsrc {
	const char *p;
	size_t left;
};

static size_t on_read(char *dst, size_t size, size_t n, void *ud)
{
	struct upsrc *u = ud;
	size_t k = size * n < u->left ? size * n : u->left;
	memcpy(dst, u->p, k);
	u->p += k;
	u->left -= k;
	return k;
}

CURL_HANDLE *http_handle_new(void)
{
	return curl_easy_init();
}

void http_handle_free(CURL_HANDLE *h)
{
	if (h)
		curl_easy_cleanup((CURL *)h);
}

void http_resp_free(struct http_resp *r)
{
	free(r->body);
	r->body = NULL;
}

int http_do(CURL_HANDLE *handle, const struct http_req *req, struct http_resp *resp)
{
	CURL *c = handle ? (CURL *)handle : curl_easy_init();
	struct curl_slist *hdrs = NULL;
	struct sink s = {0};
	struct upsrc up = {req->body, req->body_len};
	const char *method = req->method ? req->method : (req->body ? "POST" : "GET");
	char ct[160];
	CURLcode rc;

	memset(resp, 0, sizeof *resp);
	if (!c) {
		snprintf(resp->error, sizeof resp->error, "curl_easy_init failed");
		return -1;
	}
	if (handle)
		curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, req->url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, req->timeout_ms ? req->timeout_ms : 10000L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	if (req->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, req->ca_file);
	if (req->client_cert_file) {
		curl_easy_setopt(c, CURLOPT_SSLCERT, req->client_cert_file);
		curl_easy_setopt(c, CURLOPT_SSLKEY, req->client_key_file);
	}
	if (req->content_type)
		snprintf(ct, sizeof ct, "Content-Type: %s", req->content_type);
	else
		snprintf(ct, sizeof ct, "Content-Type:"); /* no value: curl drops its default */
	hdrs = curl_slist_append(hdrs, ct);
	hdrs = curl_slist_append(hdrs, req->expect_continue ? "Expect: 100-continue" : "Expect:");
	if (req->bearer) {
		char auth[512];
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", req->bearer);
		hdrs = curl_slist_append(hdrs, auth);
	}
	if (!strcmp(method, "POST") || !strcmp(method, "PUT") ||
	    (req->body && (!strcmp(method, "DELETE") || !strcmp(method, "PATCH")))) {
		if (req->chunked) {
			hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
			curl_easy_setopt(c, CURLOPT_POST, 1L);
			curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
			curl_easy_setopt(c, CURLOPT_READDATA, &up);
		} else {
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body ? req->body : "");
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
			                 (curl_off_t)(req->body ? req->body_len : 0));
		}
		if (strcmp(method, "POST"))
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	} else if (strcmp(method, "GET")) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	rc = curl_easy_perform(c);
	resp->curl_rc = (int)rc;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->code);
	curl_easy_getinfo(c, CURLINFO_TOTAL_TIME, &resp->seconds);
	{
		curl_off_t up_bytes = 0;
		curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &up_bytes);
		resp->uploaded = (double)up_bytes;
	}
	curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &resp->connects);
	if (rc != CURLE_OK)
		snprintf(resp->error, sizeof resp->error, "%s", curl_easy_strerror(rc));
	resp->body = s.buf ? s.buf : strdup("");
	resp->len = s.len;
	curl_slist_free_all(hdrs);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	if (!handle)
		curl_easy_cleanup(c);
	return rc == CURLE_OK && resp->code ? 0 : -1;
}

long world_health_get(const struct world *w, const char *path, char **body)
{
	char url[256];
	struct http_req rq = {0};
	struct http_resp rs;
	snprintf(url, sizeof url, "%s%s", w->health_url, path);
	rq.url = url;
	rq.timeout_ms = 3000;
	http_do(NULL, &rq, &rs);
	if (body)
		*body = rs.body;
	else
		http_resp_free(&rs);
	return rs.code;
}

int world_review(const struct world *w, const char *body, struct http_resp *resp,
                 struct review_answer *a)
{
	struct http_req rq = {0};
	rq.url = w->url;
	rq.ca_file = w->ca_file;
	rq.body = body;
	rq.body_len = strlen(body);
	rq.content_type = "application/json";
	rq.timeout_ms = 20000;
	memset(a, 0, sizeof *a);
	if (http_do(NULL, &rq, resp))
		return -1;
	if (resp->code != 200 || harness_parse_review(resp->body, a))
		return -1;
	return 0;
}

void review_client_open(struct review_client *c, const struct world *w, long timeout_ms)
{
	static const char warm[] = "{\"request\":{\"uid\":\"warm\"}}";
	struct http_resp rs;

	memset(c, 0, sizeof *c);
	c->h = http_handle_new();
	c->rq.url = w->url;
	c->rq.ca_file = w->ca_file;
	c->rq.content_type = "application/json";
	c->rq.timeout_ms = timeout_ms;
	c->rq.body = warm;
	c->rq.body_len = strlen(warm);
	http_do(c->h, &c->rq, &rs);
	http_resp_free(&rs);
}

void review_client_send(struct review_client *c, const char *body, long *code, char *err,
                        size_t errlen, struct review_answer *a)
{
	struct http_resp rs;

	c->rq.body = body;
	c->rq.body_len = strlen(body);
	http_do(c->h, &c->rq, &rs);
	*code = rs.code;
	snprintf(err, errlen, "%s", rs.error);
	if (rs.code == 200)
		harness_parse_review(rs.body, a);
	http_resp_free(&rs);
}

void review_client_close(struct review_client *c)
{
	http_handle_free(c->h);
	c->h = NULL;
}

/* Set GPU_MEMORY_LIMIT of every container of pod that declares it. */
static void set_limit(cJSON *pod, const char *limit)
{
	cJSON *c, *e;
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, "containers"))
	{
		cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, "env"))
		{
			const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
			if (cJSON_IsString(n) && !strcmp(n->valuestring, "GPU_MEMORY_LIMIT"))
				replace_str(e, "value", limit);
		}
	}
}

char *harness_pod_review(const char *uid, const char *name, const char *limit, const char *node,
                         int dry_run)
{
	char *text = harness_read_file("review-pod-create-nodename.json", NULL), *out = NULL;
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON *req = cJSON_GetObjectItemCaseSensitive(doc, "request");
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(req, "object");
	free(text);
	if (!obj) {
		cJSON_Delete(doc);
		return NULL;
	}
	char pod_uid[HARNESS_UID_MAX];
	harness_pod_uid("inference", name, pod_uid, sizeof(pod_uid)); /* each pod its own */
	replace_str(req, "uid", uid);
	replace_str(req, "name", name);
	replace_str(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "name", name);
	replace_str(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "uid", pod_uid);
	replace_str(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "nodeName", node);
	set_limit(obj, limit);
	cJSON_DeleteItemFromObjectCaseSensitive(req, "dryRun");
	cJSON_AddBoolToObject(req, "dryRun", dry_run);
	out = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	return out;
}

char *harness_binding_review(const char *uid, const char *name, const char *node)
{
	return harness_review_from_fixture("review-binding-create.json", uid, name, node);
}

/* ---- world ---- */

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int rc;
	if (!f)
		return -1;
	rc = fputs(text, f) < 0 ? -1 : 0;
	return fclose(f) || rc ? -1 : 0;
}

/* The pod that the fixture Binding names: the unscheduled pod of the fixture review, stored in
 * the double as the API server would have it (namespace from the request). */
static int add_binding_pod(struct world *w)
{
	char *text = harness_read_file(UNSCHED_FILE, NULL), *pod = NULL;
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(doc, "request"), "object");
	cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	int rc = -1;
	if (md) {
		replace_str(md, "name", BINDING_POD);
		pod = cJSON_PrintUnformatted(obj);
	}
	if (pod)
		rc = apiserver_double_put_pod(w->api, BINDING_NS, pod);
	cJSON_free(pod);
	cJSON_Delete(doc);
	free(text);
	return rc;
}

int world_add_node(struct world *w, const char *name, long mem_mib, int count)
{
	char json[1024];
	snprintf(json, sizeof json,
	         "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
	         "\"labels\":{\"kubernetes.io/hostname\":\"%s\",\"nvidia.com/gpu.present\":"
	         "\"true\",\"nvidia.com/gpu.count\":\"%d\",\"nvidia.com/gpu.memory\":\"%ld\","
	         "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\"}},\"spec\":{},"
	         "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"%d\"},\"allocatable\":"
	         "{\"nvidia.com/gpu\":\"%d\"}}}",
	         name, name, count, mem_mib, count, count);
	return apiserver_double_put_node(w->api, json);
}

int world_add_pod(struct world *w, const char *ns, const char *name, const char *limit,
                  const char *node)
{
	return world_add_pod_labeled(w, ns, name, limit, node, NULL);
}

int world_add_pod_labeled(struct world *w, const char *ns, const char *name, const char *limit,
                          const char *node, const char *labels_json)
{
	char *text = harness_read_file(UNSCHED_FILE, NULL), *pod = NULL;
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(doc, "request"), "object");
	cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	int rc = -1;
	free(text);
	if (md) {
		char pod_uid[HARNESS_UID_MAX];
		harness_pod_uid(ns, name, pod_uid, sizeof(pod_uid));
		replace_str(md, "name", name);
		replace_str(md, "uid", pod_uid); /* unique, as the API server makes them */
		cJSON_DeleteItemFromObjectCaseSensitive(md, "generateName");
		if (labels_json != NULL) {
			cJSON *labels = cJSON_Parse(labels_json);
			if (!cJSON_IsObject(labels)) {
				cJSON_Delete(labels);
				cJSON_Delete(doc);
				return -1;
			}
			cJSON_DeleteItemFromObjectCaseSensitive(md, "labels");
			cJSON_AddItemToObject(md, "labels", labels);
		}
		set_limit(obj, limit);
		if (node)
			replace_str(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "nodeName",
			            node);
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
		cJSON_AddItemToObject(
		    obj, "status",
		    cJSON_Parse(node ? "{\"phase\":\"Running\"}" : "{\"phase\":\"Pending\"}"));
		pod = cJSON_PrintUnformatted(obj);
	}
	if (pod)
		rc = apiserver_double_put_pod(w->api, ns, pod);
	cJSON_free(pod);
	cJSON_Delete(doc);
	return rc;
}

int world_init(struct world *w, unsigned max_page)
{
	struct apiserver_double_opts o = {0};
	struct testcert *apicert = NULL;
	char *ca_pem = NULL, *api_cert = NULL, *api_key = NULL, server[128], err[512];
	int rc = -1, n;

	memset(w, 0, sizeof *w);
	snprintf(w->dir, sizeof w->dir, "/tmp/gmg-integ-XXXXXX");
	if (!mkdtemp(w->dir)) {
		perror("mkdtemp");
		w->dir[0] = '\0';
		return -1;
	}
	snprintf(w->data_dir, sizeof w->data_dir, "%s", g_data);
	snprintf(w->ca_file, sizeof w->ca_file, "%s/ca.crt", w->dir);
	snprintf(w->cert_file, sizeof w->cert_file, "%s/tls.crt", w->dir);
	snprintf(w->key_file, sizeof w->key_file, "%s/tls.key", w->dir);
	snprintf(w->kubeconfig, sizeof w->kubeconfig, "%s/kubeconfig", w->dir);
	snprintf(w->log_file, sizeof w->log_file, "%s/gpu-memory-guard.log", w->dir);
	w->ca = testcert_new_ca("gmg integration test CA");
	apicert = w->ca ? testcert_new_server(w->ca, "apiserver-test-double", 2, 86400) : NULL;
	w->webhook_cert =
	    w->ca ? testcert_new_server(w->ca, "gpu-memory-guard", 1000, 30L * 86400) : NULL;
	if (!apicert || !w->webhook_cert) {
		fprintf(stderr, "world_init: certificate generation failed\n");
		goto out;
	}
	ca_pem = testcert_cert_pem(w->ca);
	api_cert = testcert_cert_pem(apicert);
	api_key = testcert_key_pem(apicert);
	if (!ca_pem || !api_cert || !api_key || write_text(w->ca_file, ca_pem) ||
	    testcert_write(w->webhook_cert, w->cert_file, w->key_file))
		goto out;
	o.cert_pem = api_cert;
	o.key_pem = api_key;
	o.token = HARNESS_TOKEN;
	o.max_page = max_page;
	w->api = apiserver_double_new(&o, err, sizeof err);
	if (!w->api) {
		fprintf(stderr, "world_init: %s\n", err);
		goto out;
	}
	n = apiserver_double_load_dir(w->api, g_data, err, sizeof err);
	if (n < 2 || add_binding_pod(w)) {
		fprintf(stderr, "world_init: loading %s: %s\n", g_data, n < 0 ? err : "too few");
		goto out;
	}
	snprintf(server, sizeof server, "https://127.0.0.1:%u", apiserver_double_port(w->api));
	if (testcerts_write_kubeconfig(w->kubeconfig, server, ca_pem, HARNESS_TOKEN))
		goto out;
	rc = 0;
out:
	testcert_free(apicert);
	free(ca_pem);
	free(api_cert);
	free(api_key);
	return rc;
}

static int process_alive(pid_t pid, int *status)
{
	return waitpid(pid, status, WNOHANG) == 0;
}

/* One attempt: 0 ready, -1 failed, 1 exited early with status 1 (e.g. a port taken between
 * harness_free_port() and the binary's bind: worth another attempt with other ports). */
static int start_once(struct world *w, const char *const *extra, unsigned timeout_ms)
{
	const char *argv[MAX_ARGS];
	char listen[64], health[64];
	int argc = 0, i, status = 0, logfd;
	double until;

	w->port = harness_free_port();
	w->health_port = harness_free_port();
	while (w->health_port == w->port)
		w->health_port = harness_free_port();
	snprintf(listen, sizeof listen, "127.0.0.1:%d", w->port);
	snprintf(health, sizeof health, "127.0.0.1:%d", w->health_port);
	snprintf(w->url, sizeof w->url, "https://127.0.0.1:%d/validate", w->port);
	snprintf(w->health_url, sizeof w->health_url, "http://127.0.0.1:%d", w->health_port);
	argv[argc++] = g_binary;
	argv[argc++] = "serve";
	argv[argc++] = "--listen";
	argv[argc++] = listen;
	argv[argc++] = "--health-listen";
	argv[argc++] = health;
	argv[argc++] = "--tls-cert-file";
	argv[argc++] = w->cert_file;
	argv[argc++] = "--tls-key-file";
	argv[argc++] = w->key_file;
	argv[argc++] = "--kubeconfig";
	argv[argc++] = w->kubeconfig;
	argv[argc++] = "--cache";
	argv[argc++] = w->cache_mode ? w->cache_mode : "off";
	argv[argc++] = "--undeclared";
	argv[argc++] = w->undeclared ? w->undeclared : "refuse";
	for (i = 0; extra && extra[i] && argc < MAX_ARGS - 1; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;

	logfd = open(w->log_file, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (logfd < 0)
		return -1;
	w->pid = fork();
	if (w->pid == 0) {
		dup2(logfd, 1);
		dup2(logfd, 2);
		if (w->cgroup_procs != NULL) { /* into that cgroup before exec: its limits bind */
			FILE *f = fopen(w->cgroup_procs, "w");
			if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
				fprintf(stderr, "harness: cannot join %s\n", w->cgroup_procs);
				_exit(126);
			}
		}
		for (i = 0; w->env != NULL && w->env[i] != NULL; i++)
			if (putenv((char *)w->env[i]) != 0)
				_exit(126);
		execv(g_binary, (char *const *)argv);
		_exit(127);
	}
	close(logfd);
	if (w->pid < 0) {
		w->pid = 0;
		return -1;
	}
	until = harness_now() + timeout_ms / 1000.0;
	while (harness_now() < until) {
		if (!process_alive(w->pid, &status)) {
			fprintf(stderr, "gpu-memory-guard exited early (status %d)\n", status);
			w->pid = 0;
			world_dump_log(w);
			return WIFEXITED(status) && WEXITSTATUS(status) == 1 ? 1 : -1;
		}
		long ready = world_health_get(w, "/readyz", NULL);
		if (ready == 200 || (w->start_unready && ready == 503))
			return 0;
		usleep(50 * 1000);
	}
	fprintf(stderr, "gpu-memory-guard not ready after %u ms\n", timeout_ms);
	world_dump_log(w);
	return -1;
}

int world_start_gmg(struct world *w, const char *const *extra, unsigned timeout_ms)
{
	int attempt, rc = -1;
	if (w->is_replica && !w->parent) {
		fprintf(stderr, "world_start_gmg: replica %d outlived its world\n",
		        w->replica_index);
		return -1;
	}
	for (attempt = 0; attempt < 3; attempt++) {
		rc = start_once(w, extra, timeout_ms);
		if (rc <= 0)
			break;
		fprintf(stderr, "retrying with other ports\n");
	}
	return rc == 0 ? 0 : -1;
}

int world_stop_gmg(struct world *w, int sig, unsigned timeout_ms)
{
	int status = 0;
	double until = harness_now() + timeout_ms / 1000.0;
	if (!w->pid)
		return -1;
	kill(w->pid, sig);
	while (harness_now() < until) {
		pid_t r = waitpid(w->pid, &status, WNOHANG);
		if (r == w->pid) {
			w->pid = 0;
			return status;
		}
		usleep(20 * 1000);
	}
	kill(w->pid, SIGKILL);
	waitpid(w->pid, &status, 0);
	w->pid = 0;
	return -1;
}

void world_dump_log(const struct world *w)
{
	size_t len = 0;
	char *log = harness_read_file(w->log_file, &len);
	const char *start;
	int lines = 0;
	if (!log)
		return;
	start = log + len;
	while (start > log && lines <= 40)
		if (*--start == '\n')
			lines++;
	fprintf(stderr, "---- %s (tail) ----\n%s\n---- end ----\n", w->log_file, start);
	free(log);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void kill_gmg(struct world *w)
{
	if (w->pid) {
		kill(w->pid, SIGKILL);
		waitpid(w->pid, NULL, 0);
		w->pid = 0;
	}
}

int world_replica_init(struct world *r, struct world *w, int index)
{
	if (index < 0 || index >= HARNESS_REPLICAS_MAX || w->is_replica || !w->api ||
	    w->replicas[index])
		return -1;
	memset(r, 0, sizeof *r);
	snprintf(r->dir, sizeof r->dir, "%s", w->dir);
	snprintf(r->data_dir, sizeof r->data_dir, "%s", w->data_dir);
	snprintf(r->ca_file, sizeof r->ca_file, "%s", w->ca_file);
	snprintf(r->cert_file, sizeof r->cert_file, "%s", w->cert_file);
	snprintf(r->key_file, sizeof r->key_file, "%s", w->key_file);
	snprintf(r->kubeconfig, sizeof r->kubeconfig, "%s", w->kubeconfig);
	snprintf(r->log_file, sizeof r->log_file, "%s/gpu-memory-guard-r%d.log", w->dir, index);
	r->ca = w->ca;
	r->webhook_cert = w->webhook_cert;
	r->api = w->api;
	r->cache_mode = w->cache_mode;
	r->is_replica = 1;
	r->parent = w;
	r->replica_index = index;
	w->replicas[index] = r;
	return 0;
}

void world_free(struct world *w)
{
	kill_gmg(w);
	if (w->is_replica) {
		/* Borrowed: the double, the certs and the directory are the parent's. */
		if (w->parent)
			w->parent->replicas[w->replica_index] = NULL;
		memset(w, 0, sizeof *w);
		return;
	}
	for (int i = 0; i < HARNESS_REPLICAS_MAX; i++) {
		struct world *r = w->replicas[i];
		if (!r)
			continue;
		kill_gmg(r);
		r->parent = NULL;
		r->api = NULL; /* freed below: nothing left to start against */
		r->ca = r->webhook_cert = NULL;
		w->replicas[i] = NULL;
	}
	apiserver_double_free(w->api);
	w->api = NULL;
	testcert_free(w->ca);
	testcert_free(w->webhook_cert);
	w->ca = w->webhook_cert = NULL;
	if (w->dir[0] && !getenv("GMG_KEEP_TMP"))
		nftw(w->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	w->dir[0] = '\0';
}

/* ---- raw TLS ---- */

int harness_tls_probe(int port, int min_version, int max_version, long *serial,
                      long long *not_after, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = NULL;
	X509 *peer = NULL;
	struct sockaddr_in sin;
	struct tm tm;
	int fd = -1, rc = -1;
	struct timeval tv = {5, 0};

	if (!ctx)
		goto out;
	/* Debian's OpenSSL defaults refuse TLS < 1.2 on the client side: lower them so only the
	 * server can be what refuses. */
	SSL_CTX_set_security_level(ctx, 0);
	SSL_CTX_set_cipher_list(ctx, "ALL:@SECLEVEL=0");
	SSL_CTX_set_min_proto_version(ctx, min_version);
	SSL_CTX_set_max_proto_version(ctx, max_version);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof sin)) {
		snprintf(err, errlen, "connect: %s", strerror(errno));
		goto out;
	}
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, fd);
	if (SSL_connect(ssl) != 1) {
		unsigned long e = ERR_get_error();
		snprintf(err, errlen, "handshake refused: %s",
		         e ? ERR_error_string(e, NULL) : "connection closed");
		goto out;
	}
	peer = SSL_get1_peer_certificate(ssl);
	if (!peer) {
		snprintf(err, errlen, "no peer certificate");
		goto out;
	}
	if (serial)
		*serial = ASN1_INTEGER_get(X509_get0_serialNumber(peer));
	if (not_after && ASN1_TIME_to_tm(X509_get0_notAfter(peer), &tm) == 1)
		*not_after = (long long)timegm(&tm);
	rc = 0;
	SSL_shutdown(ssl);
out:
	ERR_clear_error();
	X509_free(peer);
	SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	SSL_CTX_free(ctx);
	return rc;
}

double harness_metric(const char *metrics, const char *name, const char *label, int sum)
{
	const char *p = metrics;
	size_t nlen = strlen(name);
	double total = 0;
	int found = 0;
	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t llen = eol ? (size_t)(eol - p) : strlen(p);
		char line[1024];
		snprintf(line, sizeof line, "%.*s", (int)llen, p);
		p = eol ? eol + 1 : NULL;
		if (strncmp(line, name, nlen) || (line[nlen] != ' ' && line[nlen] != '{'))
			continue;
		if (label && !strstr(line, label))
			continue;
		/* The value is the field after the last space (no timestamps are written). */
		total += strtod(strrchr(line, ' ') + 1, NULL);
		found = 1;
		if (!sum)
			break;
	}
	return found ? total : -1;
}
