/*
 * apiserver_double: a TEST DOUBLE of the Kubernetes API server (see apiserver_double.h).
 *
 * One thread per connection, so an injected delay in one answer never holds the others; the
 * state (two cJSON arrays) sits behind one mutex, and every answer is printed under it.
 */
#include "apiserver_double.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BODY_MAX     (4u * 1024u * 1024u)  /* bytes accepted in a POST to the double */
#define FILE_MAX     (16u * 1024u * 1024u) /* bytes of one state file */
#define MAX_TERMS    8                     /* fieldSelector terms */
#define MAX_SEGMENTS 8                     /* path segments */
#define CONTINUE_PFX "dbl:"
#define MODERN_TLS   "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define OLD_TLS_TOO  "NORMAL:+VERS-TLS1.1:+VERS-TLS1.0"

struct apiserver_double {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct MHD_Daemon *mhd;
	char *cert, *key, *token;
	unsigned short port;
	unsigned max_page;
	int allow_old_tls;
	char *client_ca; /* PEM, or NULL */
	cJSON *nodes;    /* array of Node */
	cJSON *pods;     /* array of Pod */
	unsigned long rv;
	int fail_code;
	unsigned delay_ms;
	int expire_continue;
	int stopping;
	unsigned long counts[APISERVER_DOUBLE_N_COUNTERS];
	char last_sel[512];
	char last_limit[32];
};

struct upload {
	char *buf;
	size_t len;
	size_t cap;
	int too_big;
};

struct answer {
	unsigned code;
	char *body; /* malloc'd JSON */
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
	if (b)
		x = cJSON_GetObjectItemCaseSensitive(x, b);
	return cJSON_IsString(x) ? x->valuestring : "";
}

/* A kube Status object, as the API server writes it for errors and some successes. */
static struct answer status_answer(unsigned code, const char *reason, const char *message)
{
	struct answer a = {code, NULL};
	cJSON *s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "kind", "Status");
	cJSON_AddStringToObject(s, "apiVersion", "v1");
	cJSON_AddObjectToObject(s, "metadata");
	cJSON_AddStringToObject(s, "status", code < 300 ? "Success" : "Failure");
	cJSON_AddStringToObject(s, "message", message);
	cJSON_AddStringToObject(s, "reason", reason);
	cJSON_AddNumberToObject(s, "code", code);
	a.body = cJSON_PrintUnformatted(s);
	cJSON_Delete(s);
	return a;
}

static struct answer json_answer(unsigned code, const cJSON *o)
{
	struct answer a = {code, cJSON_PrintUnformatted(o)};
	return a;
}

static void count(struct apiserver_double *d, enum apiserver_double_counter c)
{
	pthread_mutex_lock(&d->mu);
	d->counts[c]++;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

static void deadline_after(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* The injected delay: a condition wait, so stop() wakes sleepers at once. */
static void injected_delay(struct apiserver_double *d)
{
	struct timespec until;
	pthread_mutex_lock(&d->mu);
	if (d->delay_ms) {
		deadline_after(&until, d->delay_ms);
		while (!d->stopping && pthread_cond_timedwait(&d->cv, &d->mu, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&d->mu);
}

/* Index of pod ns/name in d->pods, or -1. Caller holds mu. */
static int find_pod(struct apiserver_double *d, const char *ns, const char *name)
{
	int i = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, d->pods)
	{
		if (!strcmp(str_at(p, "metadata", "namespace"), ns) &&
		    !strcmp(str_at(p, "metadata", "name"), name))
			return i;
		i++;
	}
	return -1;
}

static int find_node(struct apiserver_double *d, const char *name)
{
	int i = 0;
	const cJSON *n;
	cJSON_ArrayForEach(n, d->nodes)
	{
		if (!strcmp(str_at(n, "metadata", "name"), name))
			return i;
		i++;
	}
	return -1;
}

/* Takes ownership of pod. Caller holds mu. */
static int put_pod_locked(struct apiserver_double *d, const char *ns, cJSON *pod)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	int i;
	if (!cJSON_IsObject(md) || !*str_at(pod, "metadata", "name")) {
		cJSON_Delete(pod);
		return -1;
	}
	if (ns) {
		cJSON_DeleteItemFromObjectCaseSensitive(md, "namespace");
		cJSON_AddStringToObject(md, "namespace", ns);
	}
	if (!*str_at(pod, "metadata", "namespace"))
		cJSON_AddStringToObject(md, "namespace", "default");
	i = find_pod(d, str_at(pod, "metadata", "namespace"), str_at(pod, "metadata", "name"));
	if (i >= 0)
		cJSON_ReplaceItemInArray(d->pods, i, pod);
	else
		cJSON_AddItemToArray(d->pods, pod);
	d->rv++;
	return 0;
}

static int put_node_locked(struct apiserver_double *d, cJSON *node)
{
	int i;
	if (!*str_at(node, "metadata", "name")) {
		cJSON_Delete(node);
		return -1;
	}
	i = find_node(d, str_at(node, "metadata", "name"));
	if (i >= 0)
		cJSON_ReplaceItemInArray(d->nodes, i, node);
	else
		cJSON_AddItemToArray(d->nodes, node);
	d->rv++;
	return 0;
}

struct term {
	char field[64];
	char value[256];
	int negate;
};

/* Parse "a=b,c!=d" into terms. 0, or -1 with the offending term in bad. */
static int parse_selector(const char *sel, struct term *t, int *n, char *bad, size_t badlen)
{
	char buf[1024];
	char *save = NULL, *tok;
	*n = 0;
	if (!sel || !*sel)
		return 0;
	snprintf(buf, sizeof buf, "%s", sel);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *op = strstr(tok, "!=");
		size_t vlen;
		const char *val;
		if (*n >= MAX_TERMS)
			goto bad;
		t[*n].negate = op != NULL;
		if (!op)
			op = strchr(tok, '=');
		if (!op || op == tok)
			goto bad;
		val = op + 1;
		if (t[*n].negate || val[0] == '=')
			val++;
		*op = '\0';
		vlen = strlen(val);
		if (strlen(tok) >= sizeof t[*n].field || vlen >= sizeof t[*n].value)
			goto bad;
		if (strcmp(tok, "spec.nodeName") && strcmp(tok, "status.phase") &&
		    strcmp(tok, "metadata.name") && strcmp(tok, "metadata.namespace")) {
			snprintf(bad, badlen, "field label not supported: %s", tok);
			return -1;
		}
		snprintf(t[*n].field, sizeof t[*n].field, "%s", tok);
		memcpy(t[*n].value, val, vlen + 1);
		(*n)++;
	}
	return 0;
bad:
	snprintf(bad, badlen, "invalid selector: '%s'", sel);
	return -1;
}

static int pod_matches(const cJSON *p, const char *ns, const struct term *t, int n)
{
	int i;
	if (ns && strcmp(str_at(p, "metadata", "namespace"), ns))
		return 0;
	for (i = 0; i < n; i++) {
		const char *dot = strchr(t[i].field, '.');
		char top[32];
		snprintf(top, sizeof top, "%.*s", (int)(dot - t[i].field), t[i].field);
		int eq = !strcmp(str_at(p, top, dot + 1), t[i].value);
		if (eq == t[i].negate)
			return 0;
	}
	return 1;
}

/* GET pods list with fieldSelector, limit and continue. Caller holds mu. */
static struct answer list_pods(struct apiserver_double *d, struct MHD_Connection *c, const char *ns)
{
	const char *sel = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fieldSelector");
	const char *lim = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
	const char *cont = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "continue");
	struct term t[MAX_TERMS];
	int n_terms;
	char bad[300], tok[64], rv[32];
	long limit = 0, offset = 0, matched = 0, emitted = 0;
	const cJSON *p;
	cJSON *list, *items, *md;
	struct answer a;

	snprintf(d->last_sel, sizeof d->last_sel, "%s", sel ? sel : "");
	snprintf(d->last_limit, sizeof d->last_limit, "%s", lim ? lim : "");
	if (parse_selector(sel, t, &n_terms, bad, sizeof bad))
		return status_answer(400, "BadRequest", bad);
	if (lim && *lim && (sscanf(lim, "%ld", &limit) != 1 || limit < 0))
		return status_answer(400, "BadRequest", "invalid limit");
	if (d->max_page && (limit == 0 || limit > (long)d->max_page))
		limit = d->max_page;
	if (cont && *cont) {
		if (d->expire_continue) {
			if (d->expire_continue > 0)
				d->expire_continue--;
			return status_answer(
			    410, "Expired",
			    "The provided continue parameter is too old to display "
			    "a consistent list result.");
		}
		if (strncmp(cont, CONTINUE_PFX, strlen(CONTINUE_PFX)) ||
		    sscanf(cont + strlen(CONTINUE_PFX), "%ld", &offset) != 1 || offset < 0)
			return status_answer(400, "BadRequest", "invalid continue token");
	}
	list = cJSON_CreateObject();
	cJSON_AddStringToObject(list, "kind", "PodList");
	cJSON_AddStringToObject(list, "apiVersion", "v1");
	md = cJSON_AddObjectToObject(list, "metadata");
	snprintf(rv, sizeof rv, "%lu", d->rv);
	cJSON_AddStringToObject(md, "resourceVersion", rv);
	items = cJSON_AddArrayToObject(list, "items");
	cJSON_ArrayForEach(p, d->pods)
	{
		if (!pod_matches(p, ns, t, n_terms))
			continue;
		if (matched++ < offset)
			continue;
		if (limit && emitted == limit)
			continue; /* keep counting for remainingItemCount */
		cJSON_AddItemToArray(items, cJSON_Duplicate(p, 1));
		emitted++;
	}
	if (offset + emitted < matched) {
		snprintf(tok, sizeof tok, CONTINUE_PFX "%ld", offset + emitted);
		cJSON_AddStringToObject(md, "continue", tok);
		cJSON_AddNumberToObject(md, "remainingItemCount",
		                        (double)(matched - offset - emitted));
	}
	a = json_answer(200, list);
	cJSON_Delete(list);
	return a;
}

static struct answer post_pod(struct apiserver_double *d, const char *ns, const char *body)
{
	cJSON *pod = body ? cJSON_Parse(body) : NULL;
	char name[256];
	struct answer a;
	if (!cJSON_IsObject(pod)) {
		cJSON_Delete(pod);
		return status_answer(400, "BadRequest", "body is not a Pod");
	}
	snprintf(name, sizeof name, "%s", str_at(pod, "metadata", "name"));
	if (!*name) {
		cJSON_Delete(pod);
		return status_answer(422, "Invalid", "metadata.name: Required value");
	}
	if (find_pod(d, ns, name) >= 0) {
		cJSON_Delete(pod);
		return status_answer(409, "AlreadyExists", "pods already exists");
	}
	if (put_pod_locked(d, ns, pod))
		return status_answer(422, "Invalid", "pod rejected");
	a = json_answer(201, cJSON_GetArrayItem(d->pods, find_pod(d, ns, name)));
	return a;
}

static int bind_locked(struct apiserver_double *d, const char *ns, const char *name,
                       const char *node)
{
	int i = find_pod(d, ns, name);
	cJSON *pod, *spec;
	if (i < 0)
		return -1;
	pod = cJSON_GetArrayItem(d->pods, i);
	spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	if (!spec)
		spec = cJSON_AddObjectToObject(pod, "spec");
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "nodeName");
	cJSON_AddStringToObject(spec, "nodeName", node);
	d->rv++;
	return 0;
}

static struct answer post_binding(struct apiserver_double *d, const char *ns, const char *name,
                                  const char *body)
{
	cJSON *b = body ? cJSON_Parse(body) : NULL;
	char node[256];
	snprintf(node, sizeof node, "%s", str_at(b, "target", "name"));
	cJSON_Delete(b);
	if (!*node)
		return status_answer(400, "BadRequest", "binding without target.name");
	if (find_pod(d, ns, name) < 0)
		return status_answer(404, "NotFound", "pods not found");
	if (*str_at(cJSON_GetArrayItem(d->pods, find_pod(d, ns, name)), "spec", "nodeName"))
		return status_answer(409, "Conflict", "pod is already assigned to a node");
	bind_locked(d, ns, name, node);
	return status_answer(201, "", "");
}

/* Route an authorized API request. seg[] is the path split on '/'. Caller holds mu. */
static struct answer route_api(struct apiserver_double *d, struct MHD_Connection *c,
                               const char *method, char **seg, int n, const char *body)
{
	int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
	int i;
	char msg[600];
	if (n < 2 || strcmp(seg[0], "api") || strcmp(seg[1], "v1"))
		return status_answer(404, "NotFound",
		                     "the server could not find the requested resource");
	if (n == 4 && !strcmp(seg[2], "nodes") && get) {
		i = find_node(d, seg[3]);
		if (i < 0) {
			snprintf(msg, sizeof msg, "nodes \"%s\" not found", seg[3]);
			return status_answer(404, "NotFound", msg);
		}
		return json_answer(200, cJSON_GetArrayItem(d->nodes, i));
	}
	if (n == 3 && !strcmp(seg[2], "pods") && get)
		return list_pods(d, c, NULL);
	if (n >= 5 && !strcmp(seg[2], "namespaces") && !strcmp(seg[4], "pods")) {
		if (n == 5 && get)
			return list_pods(d, c, seg[3]);
		if (n == 5 && post)
			return post_pod(d, seg[3], body);
		if (n == 7 && post && !strcmp(seg[6], "binding"))
			return post_binding(d, seg[3], seg[5], body);
		if (n == 6) {
			i = find_pod(d, seg[3], seg[5]);
			if (i < 0) {
				snprintf(msg, sizeof msg, "pods \"%s\" not found", seg[5]);
				return status_answer(404, "NotFound", msg);
			}
			if (get)
				return json_answer(200, cJSON_GetArrayItem(d->pods, i));
			if (!strcmp(method, "DELETE")) {
				cJSON_DeleteItemFromArray(d->pods, i);
				d->rv++;
				return status_answer(200, "", "");
			}
		}
	}
	return status_answer(405, "MethodNotAllowed", "the server does not allow this method");
}

static enum apiserver_double_counter classify(const char *method, char **seg, int n)
{
	if (strcmp(method, "GET"))
		return APISERVER_DOUBLE_WRITE;
	if (n == 4 && !strcmp(seg[2], "nodes"))
		return APISERVER_DOUBLE_GET_NODE;
	if (n == 6)
		return APISERVER_DOUBLE_GET_POD;
	return APISERVER_DOUBLE_LIST_PODS;
}

static struct answer control(struct apiserver_double *d, struct MHD_Connection *c, const char *url)
{
	const char *v;
	cJSON *o;
	struct answer a;
	pthread_mutex_lock(&d->mu);
	if (!strcmp(url, "/_double/fail") &&
	    (v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "code")))
		d->fail_code = atoi(v);
	else if (!strcmp(url, "/_double/delay") &&
	         (v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "ms")))
		d->delay_ms = (unsigned)strtoul(v, NULL, 10);
	else if (!strcmp(url, "/_double/expire-continue") &&
	         (v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "times")))
		d->expire_continue = atoi(v);
	else if (strcmp(url, "/_double/stats")) {
		pthread_mutex_unlock(&d->mu);
		return status_answer(404, "NotFound", "unknown control");
	}
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "getNode", (double)d->counts[APISERVER_DOUBLE_GET_NODE]);
	cJSON_AddNumberToObject(o, "getPod", (double)d->counts[APISERVER_DOUBLE_GET_POD]);
	cJSON_AddNumberToObject(o, "listPods", (double)d->counts[APISERVER_DOUBLE_LIST_PODS]);
	cJSON_AddNumberToObject(o, "writes", (double)d->counts[APISERVER_DOUBLE_WRITE]);
	cJSON_AddNumberToObject(o, "unauthorized",
	                        (double)d->counts[APISERVER_DOUBLE_UNAUTHORIZED]);
	cJSON_AddNumberToObject(o, "failCode", d->fail_code);
	cJSON_AddNumberToObject(o, "delayMs", d->delay_ms);
	cJSON_AddNumberToObject(o, "pods", cJSON_GetArraySize(d->pods));
	cJSON_AddNumberToObject(o, "nodes", cJSON_GetArraySize(d->nodes));
	a = json_answer(200, o);
	cJSON_Delete(o);
	pthread_mutex_unlock(&d->mu);
	return a;
}

/* A client certificate chain that the configured client CA verifies (GnuTLS did the
 * handshake; MHD only requests the certificate, verification is ours). */
static int client_cert_ok(struct apiserver_double *d, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci;
	unsigned int status = 0, n = 0;
	if (!d->client_ca)
		return 0;
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return 0;
	if (!gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &n) || n == 0)
		return 0;
	return gnutls_certificate_verify_peers2((gnutls_session_t)ci->tls_session, &status) == 0 &&
	       status == 0;
}

static int authorized(struct apiserver_double *d, struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	int ok;
	pthread_mutex_lock(&d->mu);
	ok = h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, d->token);
	pthread_mutex_unlock(&d->mu);
	return ok || client_cert_ok(d, c);
}

static struct answer dispatch(struct apiserver_double *d, struct MHD_Connection *c, const char *url,
                              const char *method, const char *body)
{
	char path[1024], *seg[MAX_SEGMENTS], *save = NULL, *tok;
	int n = 0, fail;
	struct answer a;

	if (!strncmp(url, "/_double/", 9))
		return control(d, c, url);
	if (!authorized(d, c)) {
		count(d, APISERVER_DOUBLE_UNAUTHORIZED);
		return status_answer(401, "Unauthorized", "Unauthorized");
	}
	snprintf(path, sizeof path, "%s", url);
	for (tok = strtok_r(path, "/", &save); tok && n < MAX_SEGMENTS;
	     tok = strtok_r(NULL, "/", &save))
		seg[n++] = tok;
	count(d, classify(method, seg, n));
	injected_delay(d);
	pthread_mutex_lock(&d->mu);
	fail = d->fail_code;
	if (fail) {
		pthread_mutex_unlock(&d->mu);
		return status_answer((unsigned)fail, fail == 500 ? "InternalError" : "Failure",
		                     "injected failure (apiserver test double)");
	}
	a = route_api(d, c, method, seg, n, body);
	pthread_mutex_unlock(&d->mu);
	if (a.code == 400)
		count(d, APISERVER_DOUBLE_BAD_REQUEST);
	return a;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *data_size, void **con_cls)
{
	struct apiserver_double *d = cls;
	struct upload *u = *con_cls;
	struct MHD_Response *r;
	struct answer a;
	enum MHD_Result ret;

	if (!u) {
		u = calloc(1, sizeof *u);
		if (!u)
			return MHD_NO;
		*con_cls = u;
		return MHD_YES;
	}
	if (*data_size) {
		if (u->len + *data_size + 1 > BODY_MAX) {
			u->too_big = 1;
		} else {
			if (u->len + *data_size + 1 > u->cap) {
				size_t cap = (u->len + *data_size + 1) * 2;
				char *nb = realloc(u->buf, cap);
				if (!nb)
					return MHD_NO;
				u->buf = nb;
				u->cap = cap;
			}
			memcpy(u->buf + u->len, data, *data_size);
			u->len += *data_size;
			u->buf[u->len] = '\0';
		}
		*data_size = 0;
		return MHD_YES;
	}
	if (u->too_big)
		a = status_answer(413, "RequestEntityTooLarge", "request body too large");
	else
		a = dispatch(d, c, url, method, u->buf);
	if (!a.body)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(a.body), a.body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		cJSON_free(a.body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(c, a.code, r);
	MHD_destroy_response(r);
	return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
	struct upload *u = *con_cls;
	if (u) {
		free(u->buf);
		free(u);
		*con_cls = NULL;
	}
}

static void quiet_logger(void *cls, const char *fmt, va_list ap)
{
	if (getenv("GMG_DOUBLE_DEBUG"))
		vfprintf(stderr, fmt, ap);
}

int apiserver_double_start(struct apiserver_double *d, char *err, size_t errlen)
{
	struct sockaddr_in sin;
	const union MHD_DaemonInfo *info;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(d->port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Only with a client CA: MHD then asks clients for a certificate. */
	struct MHD_OptionItem trust[] = {
	    {d->client_ca ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, d->client_ca},
	    {MHD_OPTION_END, 0, NULL},
	};
	d->mhd = MHD_start_daemon(
	    MHD_USE_TLS | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	        MHD_USE_ERROR_LOG,
	    d->port, NULL, NULL, handler, d, MHD_OPTION_EXTERNAL_LOGGER, quiet_logger, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin, MHD_OPTION_HTTPS_MEM_KEY, d->key,
	    MHD_OPTION_HTTPS_MEM_CERT, d->cert, MHD_OPTION_HTTPS_PRIORITIES,
	    d->allow_old_tls ? OLD_TLS_TOO : MODERN_TLS, MHD_OPTION_NOTIFY_COMPLETED, completed,
	    NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_ARRAY, trust,
	    MHD_OPTION_END);
	if (!d->mhd) {
		set_err(err, errlen, "apiserver double: MHD_start_daemon failed on port %u",
		        (unsigned)d->port);
		return -1;
	}
	info = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
	if (info && info->port)
		d->port = info->port;
	return 0;
}

int apiserver_double_stop(struct apiserver_double *d)
{
	if (!d->mhd)
		return -1;
	pthread_mutex_lock(&d->mu);
	d->stopping = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	MHD_stop_daemon(d->mhd);
	d->mhd = NULL;
	pthread_mutex_lock(&d->mu);
	d->stopping = 0;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

struct apiserver_double *apiserver_double_new(const struct apiserver_double_opts *o, char *err,
                                              size_t errlen)
{
	struct apiserver_double *d = calloc(1, sizeof *d);
	if (!d)
		goto err;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->cert = strdup(o->cert_pem);
	d->key = strdup(o->key_pem);
	d->token = strdup(o->token);
	d->nodes = cJSON_CreateArray();
	d->pods = cJSON_CreateArray();
	d->port = o->port;
	d->max_page = o->max_page;
	d->allow_old_tls = o->allow_old_tls;
	if (o->client_ca_pem && !(d->client_ca = strdup(o->client_ca_pem))) {
		set_err(err, errlen, "apiserver double: out of memory");
		goto err;
	}
	d->rv = 1000;
	if (!d->cert || !d->key || !d->token || !d->nodes || !d->pods) {
		set_err(err, errlen, "apiserver double: out of memory");
		goto err;
	}
	if (apiserver_double_start(d, err, errlen))
		goto err;
	return d;
err:
	apiserver_double_free(d);
	return NULL;
}

void apiserver_double_free(struct apiserver_double *d)
{
	if (!d)
		return;
	if (d->mhd)
		apiserver_double_stop(d);
	cJSON_Delete(d->nodes);
	cJSON_Delete(d->pods);
	free(d->cert);
	free(d->key);
	free(d->token);
	free(d->client_ca);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

unsigned short apiserver_double_port(const struct apiserver_double *d)
{
	return d->port;
}

/* Add the objects of one parsed document. Caller holds mu. Returns objects added. */
static int add_document(struct apiserver_double *d, const cJSON *doc)
{
	const char *kind = str_at(doc, "kind", NULL);
	const cJSON *items = NULL, *it;
	int added = 0;
	if (!strcmp(kind, "Node"))
		return put_node_locked(d, cJSON_Duplicate(doc, 1)) == 0;
	if (!strcmp(kind, "Pod"))
		return put_pod_locked(d, NULL, cJSON_Duplicate(doc, 1)) == 0;
	if (!strcmp(kind, "PodList") || !strcmp(kind, "NodeList") || !strcmp(kind, "List"))
		items = cJSON_GetObjectItemCaseSensitive(doc, "items");
	if (!*kind) {
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "nodes")) added +=
		    put_node_locked(d, cJSON_Duplicate(it, 1)) == 0;
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "pods")) added +=
		    put_pod_locked(d, NULL, cJSON_Duplicate(it, 1)) == 0;
		return added;
	}
	cJSON_ArrayForEach(it, items)
	{
		const char *k = str_at(it, "kind", NULL);
		/* List items usually omit kind: the list's own kind tells which. */
		if (!strcmp(kind, "NodeList") || !strcmp(k, "Node"))
			added += put_node_locked(d, cJSON_Duplicate(it, 1)) == 0;
		else
			added += put_pod_locked(d, NULL, cJSON_Duplicate(it, 1)) == 0;
	}
	return added;
}

int apiserver_double_load_file(struct apiserver_double *d, const char *path, char *err,
                               size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len;
	cJSON *doc = NULL;
	int n = -1;
	if (!f) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	buf = malloc(FILE_MAX + 1);
	if (!buf)
		goto out;
	len = fread(buf, 1, FILE_MAX + 1, f);
	if (len > FILE_MAX) {
		set_err(err, errlen, "%s: over %u bytes", path, FILE_MAX);
		goto out;
	}
	buf[len] = '\0';
	doc = cJSON_Parse(buf);
	if (!doc) {
		set_err(err, errlen, "%s: not JSON", path);
		goto out;
	}
	pthread_mutex_lock(&d->mu);
	n = add_document(d, doc);
	pthread_mutex_unlock(&d->mu);
out:
	cJSON_Delete(doc);
	free(buf);
	fclose(f);
	return n;
}

int apiserver_double_load_dir(struct apiserver_double *d, const char *dir, char *err, size_t errlen)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	char path[4096];
	int total = 0, n;
	if (!dh) {
		set_err(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(dh))) {
		size_t l = strlen(e->d_name);
		if (l < 5 || strcmp(e->d_name + l - 5, ".json"))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		n = apiserver_double_load_file(d, path, err, errlen);
		if (n < 0) {
			total = -1;
			break;
		}
		total += n;
	}
	closedir(dh);
	return total;
}

int apiserver_double_put_pod(struct apiserver_double *d, const char *ns, const char *pod_json)
{
	cJSON *p = cJSON_Parse(pod_json);
	int rc;
	if (!p)
		return -1;
	pthread_mutex_lock(&d->mu);
	rc = put_pod_locked(d, ns, p);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_put_node(struct apiserver_double *d, const char *node_json)
{
	cJSON *n = cJSON_Parse(node_json);
	int rc;
	if (!n)
		return -1;
	pthread_mutex_lock(&d->mu);
	rc = put_node_locked(d, n);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_bind(struct apiserver_double *d, const char *ns, const char *name,
                          const char *node)
{
	int rc;
	pthread_mutex_lock(&d->mu);
	rc = bind_locked(d, ns, name, node);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_set_phase(struct apiserver_double *d, const char *ns, const char *name,
                               const char *phase)
{
	int i, rc = -1;
	cJSON *pod, *st;
	pthread_mutex_lock(&d->mu);
	i = find_pod(d, ns, name);
	if (i >= 0) {
		pod = cJSON_GetArrayItem(d->pods, i);
		st = cJSON_GetObjectItemCaseSensitive(pod, "status");
		if (!st)
			st = cJSON_AddObjectToObject(pod, "status");
		cJSON_DeleteItemFromObjectCaseSensitive(st, "phase");
		cJSON_AddStringToObject(st, "phase", phase);
		d->rv++;
		rc = 0;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_delete_pod(struct apiserver_double *d, const char *ns, const char *name)
{
	int i, rc = -1;
	pthread_mutex_lock(&d->mu);
	i = find_pod(d, ns, name);
	if (i >= 0) {
		cJSON_DeleteItemFromArray(d->pods, i);
		d->rv++;
		rc = 0;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void apiserver_double_set_fail(struct apiserver_double *d, int http_code)
{
	pthread_mutex_lock(&d->mu);
	d->fail_code = http_code;
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_delay_ms(struct apiserver_double *d, unsigned ms)
{
	pthread_mutex_lock(&d->mu);
	d->delay_ms = ms;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_expire_continue(struct apiserver_double *d, int times)
{
	pthread_mutex_lock(&d->mu);
	d->expire_continue = times;
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_token(struct apiserver_double *d, const char *token)
{
	char *t = strdup(token);
	if (!t)
		return;
	pthread_mutex_lock(&d->mu);
	free(d->token);
	d->token = t;
	pthread_mutex_unlock(&d->mu);
}

unsigned long apiserver_double_count(struct apiserver_double *d, enum apiserver_double_counter c)
{
	unsigned long v;
	pthread_mutex_lock(&d->mu);
	v = d->counts[c];
	pthread_mutex_unlock(&d->mu);
	return v;
}

void apiserver_double_reset_counts(struct apiserver_double *d)
{
	pthread_mutex_lock(&d->mu);
	memset(d->counts, 0, sizeof d->counts);
	pthread_mutex_unlock(&d->mu);
}

int apiserver_double_wait_count(struct apiserver_double *d, enum apiserver_double_counter c,
                                unsigned long n, unsigned timeout_ms)
{
	struct timespec until;
	int rc = 0;
	deadline_after(&until, timeout_ms);
	pthread_mutex_lock(&d->mu);
	while (d->counts[c] < n && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&d->cv, &d->mu, &until);
	rc = d->counts[c] >= n ? 0 : -1;
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void apiserver_double_last_list_query(struct apiserver_double *d, char *selector, size_t sel_len,
                                      char *limit, size_t limit_len)
{
	pthread_mutex_lock(&d->mu);
	snprintf(selector, sel_len, "%s", d->last_sel);
	snprintf(limit, limit_len, "%s", d->last_limit);
	pthread_mutex_unlock(&d->mu);
}
