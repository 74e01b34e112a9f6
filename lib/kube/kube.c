/*
 * kube: Kubernetes API reads over libcurl.
 *
 * Per-thread easy handles: libcurl 7.88 cannot share connections across threads, so each
 * calling thread gets its own long-lived handle (keeps its connection alive between calls). The
 * handle is found through a pthread key; a registry (list under mu) lets kube_client_free clean
 * up handles of threads that are still alive, and the key's destructor frees the handle of a
 * thread that exits first.
 */
#include "kube.h"

#include "capfile.h"
#include "errbuf.h"
#include "execcred.h"
#include "jsonpath.h"

#include "kubeconfig.h"
#include "monotime.h"
#include "serverclock.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define TOKEN_MAX    (64u * 1024u) /* bytes, bearer token file */
#define URL_MAX      (16u * 1024u) /* bytes, request URL incl. continue token */
#define STATUS_MSG   256           /* bytes of a Status message quoted in err */
#define NAME_MAX_LEN 253           /* Kubernetes object names */

struct handle {
	CURL *easy;
	struct kube_client *owner;
	struct handle *prev, *next;
	char errbuf[CURL_ERROR_SIZE];
};

struct kube_client {
	struct kube_config cfg; /* deep copy */
	long timeout_ms;
	size_t body_max;
	long watch_slack; /* seconds of silence past timeoutSeconds before a watch is dead */
	kube_observer obs;
	void *obs_ctx;
	pthread_key_t key;
	pthread_mutex_t mu; /* registry */
	struct handle *handles;
	pthread_mutex_t tok_mu; /* token cache */
	char *token;
	struct stat token_st;
	int token_loaded;
	struct execcred *exec;     /* the kubeconfig's credential plugin, or NULL */
	struct serverclock *clock; /* fed every answer's Date header, or NULL; borrowed */
};

/* The credential of one call: a bearer token and, from an exec plugin, a client certificate. */
struct cred {
	char *token;                /* or NULL */
	struct execcred_value exec; /* from the plugin (its token moved to token), or zeroed */
	int from_exec;
};

struct body {
	char *p;
	size_t len, cap, max;
	int too_big;
};

const char *kube_strerror(int code)
{
	switch (code) {
	case 0:
		return "ok";
	case KUBE_ETRANSPORT:
		return "transport error";
	case KUBE_EHTTP:
		return "HTTP error";
	case KUBE_ENOTFOUND:
		return "not found";
	case KUBE_EPARSE:
		return "unexpected response body";
	case KUBE_ETOOBIG:
		return "response too big";
	case KUBE_ENOMEM:
		return "out of memory";
	case KUBE_ETIMEOUT:
		return "timeout";
	case KUBE_EINVAL:
		return "invalid argument";
	case KUBE_EGONE:
		return "gone (resource version too old)";
	case KUBE_ESTOP:
		return "stopped";
	case KUBE_ECONFLICT:
		return "conflict";
	}
	return "unknown error";
}

static int dup_opt(char **dst, const char *src, size_t len)
{
	*dst = NULL;
	if (src == NULL)
		return 0;
	*dst = malloc(len + 1);
	if (*dst == NULL)
		return -1;
	memcpy(*dst, src, len);
	(*dst)[len] = '\0';
	return 0;
}

static int copy_config(struct kube_config *d, const struct kube_config *s)
{
	memset(d, 0, sizeof(*d));
	d->ca_data_len = s->ca_data_len;
	d->client_cert_data_len = s->client_cert_data_len;
	d->client_key_data_len = s->client_key_data_len;
	d->insecure_skip_tls_verify = s->insecure_skip_tls_verify;
	if (dup_opt(&d->server, s->server, s->server ? strlen(s->server) : 0) < 0 ||
	    dup_opt(&d->ca_file, s->ca_file, s->ca_file ? strlen(s->ca_file) : 0) < 0 ||
	    dup_opt(&d->ca_data, s->ca_data, s->ca_data_len) < 0 ||
	    dup_opt(&d->client_cert_file, s->client_cert_file,
	            s->client_cert_file ? strlen(s->client_cert_file) : 0) < 0 ||
	    dup_opt(&d->client_cert_data, s->client_cert_data, s->client_cert_data_len) < 0 ||
	    dup_opt(&d->client_key_file, s->client_key_file,
	            s->client_key_file ? strlen(s->client_key_file) : 0) < 0 ||
	    dup_opt(&d->client_key_data, s->client_key_data, s->client_key_data_len) < 0 ||
	    dup_opt(&d->token, s->token, s->token ? strlen(s->token) : 0) < 0 ||
	    dup_opt(&d->token_file, s->token_file, s->token_file ? strlen(s->token_file) : 0) < 0) {
		kubeconfig_free(d);
		return -1;
	}
	return 0;
}

static void handle_destroy(struct handle *h)
{
	if (h == NULL)
		return;
	if (h->easy != NULL)
		curl_easy_cleanup(h->easy);
	free(h);
}

/* pthread key destructor: the thread exits while the client lives; unlink and free. */
static void handle_release(void *p)
{
	struct handle *h = p;
	struct kube_client *c = h->owner;

	pthread_mutex_lock(&c->mu);
	if (h->prev != NULL)
		h->prev->next = h->next;
	else
		c->handles = h->next;
	if (h->next != NULL)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&c->mu);
	handle_destroy(h);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userp)
{
	struct body *b = userp;
	size_t n = size * nmemb;

	if (n > b->max - b->len) {
		b->too_big = 1;
		return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		char *p;
		while (cap < b->len + n + 1)
			cap *= 2;
		if (cap > b->max + 1)
			cap = b->max + 1;
		p = realloc(b->p, cap);
		if (p == NULL)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

/*
 * Options fixed for the handle's life: TLS material, keep-alive, no signals, body writer.
 * Returns the first failing curl code (e.g. a blob option this libcurl lacks).
 */
static CURLcode handle_setup(struct kube_client *c, struct handle *h)
{
	const struct kube_config *cfg = &c->cfg;
	CURLcode rc = CURLE_OK;

#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (rc == CURLE_OK)                                                                \
			rc = curl_easy_setopt(h->easy, opt, val);                                  \
	} while (0)
	SET(CURLOPT_ERRORBUFFER, h->errbuf);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_PATH_AS_IS, 1L); /* never squash dot segments: names are escaped, not paths */
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_TCP_KEEPALIVE, 1L);
	SET(CURLOPT_TCP_KEEPIDLE, 30L);
	SET(CURLOPT_TCP_KEEPINTVL, 10L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_ACCEPT_ENCODING, "");
	SET(CURLOPT_USERAGENT, "gpu-memory-guard");
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->body_max);
	if (cfg->ca_data != NULL) {
		struct curl_blob blob = {cfg->ca_data, cfg->ca_data_len, CURL_BLOB_COPY};
		SET(CURLOPT_CAINFO_BLOB, &blob);
	} else if (cfg->ca_file != NULL) {
		SET(CURLOPT_CAINFO, cfg->ca_file);
	}
	if (cfg->client_cert_data != NULL) {
		struct curl_blob blob = {cfg->client_cert_data, cfg->client_cert_data_len,
		                         CURL_BLOB_COPY};
		SET(CURLOPT_SSLCERT_BLOB, &blob);
		SET(CURLOPT_SSLCERTTYPE, "PEM");
	} else if (cfg->client_cert_file != NULL) {
		SET(CURLOPT_SSLCERT, cfg->client_cert_file);
	}
	if (cfg->client_key_data != NULL) {
		struct curl_blob blob = {cfg->client_key_data, cfg->client_key_data_len,
		                         CURL_BLOB_COPY};
		SET(CURLOPT_SSLKEY_BLOB, &blob);
		SET(CURLOPT_SSLKEYTYPE, "PEM");
	} else if (cfg->client_key_file != NULL) {
		SET(CURLOPT_SSLKEY, cfg->client_key_file);
	}
	if (cfg->insecure_skip_tls_verify) {
		SET(CURLOPT_SSL_VERIFYPEER, 0L);
		SET(CURLOPT_SSL_VERIFYHOST, 0L);
	}
#undef SET
	return rc;
}

/* A new, configured, unregistered handle; NULL with a reason in err. */
static struct handle *handle_new(struct kube_client *c, char *err, size_t errlen)
{
	struct handle *h = calloc(1, sizeof(*h));
	CURLcode cc;

	if (h == NULL || (h->easy = curl_easy_init()) == NULL) {
		errbuf_set(err, errlen, "kube client: out of memory");
		goto err;
	}
	h->owner = c;
	if ((cc = handle_setup(c, h)) != CURLE_OK) {
		errbuf_set(err, errlen, "kube client: curl option refused: %s",
		           curl_easy_strerror(cc));
		goto err;
	}
	return h;
err:
	handle_destroy(h);
	return NULL;
}

/* This thread's handle, created and registered on first use. NULL with err on failure. */
static struct handle *thread_handle(struct kube_client *c, char *err, size_t errlen)
{
	struct handle *h = pthread_getspecific(c->key);

	if (h != NULL)
		return h;
	h = handle_new(c, err, errlen);
	if (h == NULL)
		return NULL;
	if (pthread_setspecific(c->key, h) != 0) {
		errbuf_set(err, errlen, "kube client: out of thread resources");
		handle_destroy(h);
		return NULL;
	}
	pthread_mutex_lock(&c->mu);
	h->next = c->handles;
	if (c->handles != NULL)
		c->handles->prev = h;
	c->handles = h;
	pthread_mutex_unlock(&c->mu);
	return h;
}

struct kube_client *kube_client_new(const struct kube_config *cfg, long timeout_ms,
                                    kube_observer obs, void *obs_ctx, char *err, size_t errlen)
{
	struct kube_client *c = NULL;
	struct handle *probe;
	int key_ok = 0, mu_ok = 0, tok_ok = 0;

	if (cfg == NULL || cfg->server == NULL || cfg->server[0] == '\0' || timeout_ms <= 0) {
		errbuf_set(err, errlen, "kube client: no server URL or timeout not positive");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL || copy_config(&c->cfg, cfg) < 0) {
		errbuf_set(err, errlen, "kube client: out of memory");
		goto err;
	}
	c->timeout_ms = timeout_ms;
	c->body_max = KUBE_BODY_MAX;
	c->watch_slack = KUBE_WATCH_IDLE_SLACK;
	c->obs = obs;
	c->obs_ctx = obs_ctx;
	if (pthread_key_create(&c->key, handle_release) != 0)
		goto err_sys;
	key_ok = 1;
	if (pthread_mutex_init(&c->mu, NULL) != 0)
		goto err_sys;
	mu_ok = 1;
	if (pthread_mutex_init(&c->tok_mu, NULL) != 0)
		goto err_sys;
	tok_ok = 1;
	if (cfg->exec != NULL &&
	    (c->exec = execcred_new(cfg->exec, cfg, EXECCRED_TIMEOUT_MS, err, errlen)) == NULL)
		goto err;
	/* Configure one handle now so a bad option fails here, not on the first call. */
	probe = handle_new(c, err, errlen);
	if (probe == NULL)
		goto err;
	handle_destroy(probe);
	return c;
err_sys:
	errbuf_set(err, errlen, "kube client: out of thread resources");
err:
	if (c != NULL)
		execcred_free(c->exec);
	if (tok_ok)
		pthread_mutex_destroy(&c->tok_mu);
	if (mu_ok)
		pthread_mutex_destroy(&c->mu);
	if (key_ok)
		pthread_key_delete(c->key);
	if (c != NULL)
		kubeconfig_free(&c->cfg);
	free(c);
	return NULL;
}

void kube_client_set_body_max(struct kube_client *c, size_t bytes)
{
	if (c != NULL && bytes > 0)
		c->body_max = bytes;
}

void kube_client_set_clock(struct kube_client *c, struct serverclock *clock)
{
	c->clock = clock;
}

void kube_client_set_watch_idle_slack(struct kube_client *c, long seconds)
{
	if (c != NULL && seconds >= 0)
		c->watch_slack = seconds;
}

void kube_client_free(struct kube_client *c)
{
	struct handle *h, *next;

	if (c == NULL)
		return;
	/* Delete the key first: from here on no thread exit runs handle_release for this client. */
	pthread_key_delete(c->key);
	pthread_mutex_lock(&c->mu);
	for (h = c->handles; h != NULL; h = next) {
		next = h->next;
		handle_destroy(h);
	}
	c->handles = NULL;
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->tok_mu);
	free(c->token);
	execcred_free(c->exec);
	kubeconfig_free(&c->cfg);
	free(c);
}

/* Read the token file into a new string, whitespace trimmed. */
static int read_token(const char *path, char **out, char *err, size_t errlen)
{
	char *buf = NULL, why[512];
	size_t got = 0;
	int rc = -1, frc;

	frc = capfile_read(path, TOKEN_MAX, 0, &buf, &got, why, sizeof(why));
	if (frc == CAPFILE_ETOOBIG)
		errbuf_set(err, errlen, "token file %s: over %u bytes", path, TOKEN_MAX);
	else if (frc < 0)
		errbuf_set(err, errlen, "token file %s", why);
	if (frc < 0)
		goto out;
	while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r' || buf[got - 1] == ' '))
		got--;
	buf[got] = '\0';
	if (got == 0 || strpbrk(buf, "\r\n") != NULL) {
		errbuf_set(err, errlen, "token file %s: empty or multi-line", path);
		goto out;
	}
	*out = buf;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	return rc;
}

static int same_file_version(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/*
 * The bearer token to send, copied into *tok (caller frees; NULL when none). A token file is
 * re-read when its inode, size or mtime changes (projected tokens rotate by symlink swap).
 */
static int current_token(struct kube_client *c, char **tok, char *err, size_t errlen)
{
	struct stat st;
	char *fresh = NULL;
	int rc = 0;

	*tok = NULL;
	if (c->cfg.token != NULL) {
		*tok = strdup(c->cfg.token);
		return *tok ? 0 : KUBE_ENOMEM;
	}
	if (c->cfg.token_file == NULL)
		return 0;
	pthread_mutex_lock(&c->tok_mu);
	if (stat(c->cfg.token_file, &st) < 0) {
		errbuf_set(err, errlen, "token file %s: %s", c->cfg.token_file, strerror(errno));
		rc = KUBE_ETRANSPORT;
		goto out;
	}
	if (!c->token_loaded || !same_file_version(&st, &c->token_st)) {
		if (read_token(c->cfg.token_file, &fresh, err, errlen) < 0) {
			rc = KUBE_ETRANSPORT;
			goto out;
		}
		free(c->token);
		c->token = fresh;
		c->token_st = st;
		c->token_loaded = 1;
	}
	*tok = strdup(c->token);
	if (*tok == NULL)
		rc = KUBE_ENOMEM;
out:
	pthread_mutex_unlock(&c->tok_mu);
	return rc;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The credential for one call: the exec plugin's (cached until it expires) or the token's. */
static int current_cred(struct kube_client *c, struct cred *cr, char *err, size_t errlen)
{
	memset(cr, 0, sizeof(*cr));
	if (c->exec == NULL)
		return current_token(c, &cr->token, err, errlen);
	if (execcred_get(c->exec, wall_ms(), &cr->exec, err, errlen) < 0)
		return KUBE_ETRANSPORT;
	cr->from_exec = 1;
	cr->token = cr->exec.token;
	cr->exec.token = NULL;
	return 0;
}

static void cred_free(struct cred *cr)
{
	free(cr->token);
	execcred_value_free(&cr->exec);
	memset(cr, 0, sizeof(*cr));
}

/* Put the credential on the handle: the bearer token, and a plugin's client certificate
 * (copied by curl; set on every call, as the plugin may hand out a new one). */
static CURLcode cred_apply(CURL *easy, const struct cred *cr)
{
	CURLcode rc = CURLE_OK;

	if (cr->token != NULL) {
		/* CURLAUTH_BEARER alone: curl sends the header on the first request. */
		curl_easy_setopt(easy, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
		rc = curl_easy_setopt(easy, CURLOPT_XOAUTH2_BEARER, cr->token);
	}
	if (rc == CURLE_OK && cr->exec.cert != NULL) {
		struct curl_blob cert = {cr->exec.cert, cr->exec.cert_len, CURL_BLOB_COPY},
		                 key = {cr->exec.key, cr->exec.key_len, CURL_BLOB_COPY};
		rc = curl_easy_setopt(easy, CURLOPT_SSLCERT_BLOB, &cert);
		if (rc == CURLE_OK)
			rc = curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
		if (rc == CURLE_OK)
			rc = curl_easy_setopt(easy, CURLOPT_SSLKEY_BLOB, &key);
		if (rc == CURLE_OK)
			rc = curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
	}
	return rc;
}

/* Percent-encode s (everything but RFC 3986 unreserved) onto dst at *pos. -1 when full. */
static int url_append_escaped(char *dst, size_t cap, size_t *pos, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		            (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' ||
		            *p == '~';
		if (*pos + (plain ? 1 : 3) + 1 > cap)
			return -1;
		if (plain) {
			dst[(*pos)++] = (char)*p;
		} else {
			dst[(*pos)++] = '%';
			dst[(*pos)++] = hex[*p >> 4];
			dst[(*pos)++] = hex[*p & 15];
		}
	}
	dst[*pos] = '\0';
	return 0;
}

static int url_append(char *dst, size_t cap, size_t *pos, const char *s)
{
	size_t n = strlen(s);

	if (*pos + n + 1 > cap)
		return -1;
	memcpy(dst + *pos, s, n + 1);
	*pos += n;
	return 0;
}

/* Put the Status message of an error body (or its first bytes) into msg. */
static void status_message(const struct body *b, char *msg, size_t msglen)
{
	cJSON *st = NULL;
	const cJSON *m;

	msg[0] = '\0';
	if (b->p == NULL || b->len == 0)
		return;
	st = cJSON_ParseWithLengthOpts(b->p, b->len + 1, NULL, 1);
	m = json_at(st, "message", NULL);
	if (cJSON_IsString(m) && m->valuestring != NULL)
		snprintf(msg, msglen, "%s", m->valuestring);
	else
		snprintf(msg, msglen, "%.*s", (int)(b->len < 120 ? b->len : 120), b->p);
	for (char *p = msg; *p; p++) {
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	}
	cJSON_Delete(st);
}

struct call {
	const char *verb, *resource, *what; /* observer labels; what names the call in err */
	const char *url;
	long budget_ms;           /* total time for this HTTP call */
	const _Atomic int *stop;  /* when set and nonzero, the transfer is aborted (KUBE_ESTOP) */
	const char *method;       /* NULL: GET; else "POST", "PUT" or "PATCH" with body */
	const char *body;         /* JSON request body (method set), NUL-terminated */
	const char *content_type; /* of the body; NULL: application/json */
};

/* CURLOPT_XFERINFOFUNCTION of http_get: abort once *stop is set (polled about once a second
 * while the server is silent, so a shutdown does not wait for a slow page). */
static int call_progress(void *userp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                         curl_off_t ulnow)
{
	const struct call *k = userp;
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return k->stop != NULL && *k->stop != 0;
}

/* Translate a finished transfer into a KUBE_E* code and err. */
static int transfer_result(const struct call *k, struct handle *h, CURLcode cc, long code,
                           const struct body *b, char *err, size_t errlen)
{
	char msg[STATUS_MSG];

	if (b->too_big || cc == CURLE_FILESIZE_EXCEEDED) {
		errbuf_set(err, errlen, "%s: response over %zu bytes", k->what, b->max);
		return KUBE_ETOOBIG;
	}
	if (cc == CURLE_OPERATION_TIMEDOUT) {
		errbuf_set(err, errlen, "%s: no answer within %ld ms", k->what, k->budget_ms);
		return KUBE_ETIMEOUT;
	}
	if (cc == CURLE_OUT_OF_MEMORY || (cc == CURLE_WRITE_ERROR && !b->too_big)) {
		errbuf_set(err, errlen, "%s: out of memory", k->what);
		return KUBE_ENOMEM;
	}
	if (cc != CURLE_OK) {
		errbuf_set(err, errlen, "%s: %s", k->what,
		           h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc));
		return KUBE_ETRANSPORT;
	}
	if (code < 200 || code > 299) {
		status_message(b, msg, sizeof(msg));
		errbuf_set(err, errlen, "%s: HTTP %ld%s%s", k->what, code, msg[0] ? ": " : "", msg);
		return code == 404 ? KUBE_ENOTFOUND : code == 409 ? KUBE_ECONFLICT : KUBE_EHTTP;
	}
	return 0;
}

/* The Date header of one answer (serverclock.h), seen by on_header. */
struct date_seen {
	int64_t date_s; /* Unix seconds, 0 when none */
	uint64_t recv_ms;
};

static size_t on_header(char *data, size_t size, size_t nmemb, void *userp)
{
	struct date_seen *d = userp;
	size_t n = size * nmemb;
	char value[64];

	if (n > 5 && n < 5 + sizeof(value) && strncasecmp(data, "date:", 5) == 0) {
		memcpy(value, data + 5, n - 5);
		value[n - 5] = '\0';
		time_t t = curl_getdate(value, NULL);
		if (t > 0) {
			d->date_s = (int64_t)t;
			d->recv_ms = monotime_ms();
		}
	}
	return n;
}

/*
 * One call: a GET, or k->method with k->body as JSON. On success *out is the parsed JSON object
 * (caller owns). *code is the HTTP status (0 when none), also on failure. *bytes (may be NULL)
 * gets the body size. The thread's handle is left set for a GET.
 */
static int http_once(struct kube_client *c, const struct call *k, cJSON **out, long *code,
                     size_t body_max, size_t *bytes, uint64_t *exec_gen, char *err, size_t errlen)
{
	struct body b = {NULL, 0, 0, body_max, 0};
	struct curl_slist *hdrs = NULL;
	struct handle *h;
	struct cred cr = {0};
	double t0;
	CURLcode cc;
	int rc;

	*out = NULL;
	*code = 0;
	h = thread_handle(c, err, errlen);
	if (h == NULL)
		return KUBE_ENOMEM;
	if ((rc = current_cred(c, &cr, err, errlen)) < 0)
		goto out;
	*exec_gen = cr.exec.generation;
	h->errbuf[0] = '\0';
	if (curl_easy_setopt(h->easy, CURLOPT_URL, k->url) != CURLE_OK) {
		errbuf_set(err, errlen, "%s: out of memory", k->what);
		rc = KUBE_ENOMEM;
		goto out;
	}
	/* Plain setters of integers and pointers: they cannot fail once the handle exists. */
	curl_easy_setopt(h->easy, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h->easy, CURLOPT_TIMEOUT_MS, k->budget_ms);
	curl_easy_setopt(h->easy, CURLOPT_CONNECTTIMEOUT_MS, k->budget_ms);
	curl_easy_setopt(h->easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)body_max);
	/* The handle is the thread's, shared with calls without a stop flag: set both ways. */
	curl_easy_setopt(h->easy, CURLOPT_NOPROGRESS, k->stop != NULL ? 0L : 1L);
	curl_easy_setopt(h->easy, CURLOPT_XFERINFOFUNCTION, k->stop != NULL ? call_progress : NULL);
	curl_easy_setopt(h->easy, CURLOPT_XFERINFODATA, (void *)k);
	if (k->method != NULL) {
		char ctype[96];
		snprintf(ctype, sizeof(ctype), "Content-Type: %s",
		         k->content_type != NULL ? k->content_type : "application/json");
		hdrs = curl_slist_append(NULL, ctype);
		if (hdrs == NULL ||
		    curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, hdrs) != CURLE_OK ||
		    curl_easy_setopt(h->easy, CURLOPT_POSTFIELDS, k->body) != CURLE_OK ||
		    curl_easy_setopt(h->easy, CURLOPT_CUSTOMREQUEST, k->method) != CURLE_OK) {
			errbuf_set(err, errlen, "%s: out of memory", k->what);
			rc = KUBE_ENOMEM;
			goto out;
		}
		curl_easy_setopt(h->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(k->body));
	}
	if (cred_apply(h->easy, &cr) != CURLE_OK) {
		errbuf_set(err, errlen, "%s: out of memory", k->what);
		rc = KUBE_ENOMEM;
		goto out;
	}
	struct date_seen date = {0, 0};
	curl_easy_setopt(h->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h->easy, CURLOPT_HEADERDATA, &date);
	uint64_t sent_ms = monotime_ms();
	t0 = monotime_s();
	cc = curl_easy_perform(h->easy);
	curl_easy_setopt(h->easy, CURLOPT_HEADERDATA, NULL);
	curl_easy_setopt(h->easy, CURLOPT_HEADERFUNCTION, NULL);
	if (date.date_s > 0)
		serverclock_observe(c->clock, date.date_s, sent_ms, date.recv_ms);
	if (cc == CURLE_ABORTED_BY_CALLBACK && k->stop != NULL && *k->stop != 0) {
		errbuf_set(err, errlen, "%s: stopped by the caller", k->what);
		rc = KUBE_ESTOP;
		goto out;
	}
	/* HTTP errors are not curl errors: the status comes from here, also after an abort. */
	curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, code);
	if (c->obs != NULL)
		c->obs(c->obs_ctx, k->verb, k->resource, *code, monotime_s() - t0);
	if (bytes != NULL)
		*bytes = b.len;
	if ((rc = transfer_result(k, h, cc, *code, &b, err, errlen)) < 0)
		goto out;
	*out = cJSON_ParseWithLengthOpts(b.p ? b.p : "", b.len + 1, NULL, 1);
	if (*out == NULL || !cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		errbuf_set(err, errlen, "%s: response is not a JSON object", k->what);
		rc = KUBE_EPARSE;
		goto out;
	}
	rc = 0;
out:
	/* The token must not outlive the call in the handle; the next call may be a GET. */
	curl_easy_setopt(h->easy, CURLOPT_XOAUTH2_BEARER, NULL);
	if (k->method != NULL) {
		curl_easy_setopt(h->easy, CURLOPT_CUSTOMREQUEST, NULL);
		curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, NULL);
		curl_easy_setopt(h->easy, CURLOPT_HTTPGET, 1L);
	}
	curl_slist_free_all(hdrs);
	cred_free(&cr);
	free(b.p);
	return rc;
}

/*
 * One call (http_once), and with an exec plugin's credential, once more after a 401: the
 * plugin's credential was revoked or expired early, so it is dropped and the plugin run again
 * (client-go's rule). The second try has the same budget as the first.
 */
static int http_get(struct kube_client *c, const struct call *k, cJSON **out, long *code,
                    size_t body_max, size_t *bytes, char *err, size_t errlen)
{
	uint64_t gen = 0;
	int rc = http_once(c, k, out, code, body_max, bytes, &gen, err, errlen);

	if (rc == KUBE_EHTTP && *code == 401 && c->exec != NULL) {
		execcred_invalidate(c->exec, gen);
		rc = http_once(c, k, out, code, body_max, bytes, &gen, err, errlen);
	}
	return rc;
}

static int check_name(const char *s, const char *what, char *err, size_t errlen)
{
	if (s == NULL || s[0] == '\0' || strlen(s) > NAME_MAX_LEN) {
		errbuf_set(err, errlen, "%s must be 1..%d bytes", what, NAME_MAX_LEN);
		return KUBE_EINVAL;
	}
	/* Escaped or not, "." and ".." are path segments: the URL would name another object. */
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
		errbuf_set(err, errlen, "%s \"%s\" is not a valid name", what, s);
		return KUBE_EINVAL;
	}
	return 0;
}

static int get_object(struct kube_client *c, const char *path_prefix, const char *ns,
                      const char *kind_path, const char *name, const char *resource, cJSON **obj,
                      long *http_code, char *err, size_t errlen)
{
	char url[URL_MAX], what[64 + 2 * NAME_MAX_LEN];
	struct call k = {"get", resource, what, url, c->timeout_ms, NULL, NULL, NULL, NULL};
	size_t pos = 0;
	long code = 0;
	int rc;

	snprintf(what, sizeof(what), "get %s %s%s%s", resource, ns ? ns : "", ns ? "/" : "", name);
	if (url_append(url, sizeof(url), &pos, c->cfg.server) < 0 ||
	    url_append(url, sizeof(url), &pos, path_prefix) < 0 ||
	    (ns != NULL && (url_append_escaped(url, sizeof(url), &pos, ns) < 0 ||
	                    url_append(url, sizeof(url), &pos, kind_path) < 0)) ||
	    url_append_escaped(url, sizeof(url), &pos, name) < 0) {
		errbuf_set(err, errlen, "%s: URL too long", what);
		rc = KUBE_EINVAL;
		goto out;
	}
	rc = http_get(c, &k, obj, &code, c->body_max, NULL, err, errlen);
out:
	if (http_code != NULL)
		*http_code = code;
	return rc;
}

int kube_get_pod(struct kube_client *c, const char *ns, const char *name, struct cJSON **pod,
                 long *http_code, char *err, size_t errlen)
{
	int rc;

	if (pod != NULL)
		*pod = NULL;
	if (http_code != NULL)
		*http_code = 0;
	if (c == NULL || pod == NULL)
		return KUBE_EINVAL;
	if ((rc = check_name(ns, "namespace", err, errlen)) < 0 ||
	    (rc = check_name(name, "pod name", err, errlen)) < 0)
		return rc;
	return get_object(c, "/api/v1/namespaces/", ns, "/pods/", name, "pods", pod, http_code, err,
	                  errlen);
}

int kube_get_node(struct kube_client *c, const char *name, struct cJSON **node, long *http_code,
                  char *err, size_t errlen)
{
	int rc;

	if (node != NULL)
		*node = NULL;
	if (http_code != NULL)
		*http_code = 0;
	if (c == NULL || node == NULL)
		return KUBE_EINVAL;
	if ((rc = check_name(name, "node name", err, errlen)) < 0)
		return rc;
	return get_object(c, "/api/v1/nodes/", NULL, NULL, name, "nodes", node, http_code, err,
	                  errlen);
}

#define LEASES_PATH "/apis/coordination.k8s.io/v1/namespaces/"

int kube_get_lease(struct kube_client *c, const char *ns, const char *name, struct cJSON **lease,
                   long *http_code, char *err, size_t errlen)
{
	int rc;

	if (lease != NULL)
		*lease = NULL;
	if (http_code != NULL)
		*http_code = 0;
	if (c == NULL || lease == NULL)
		return KUBE_EINVAL;
	if ((rc = check_name(ns, "namespace", err, errlen)) < 0 ||
	    (rc = check_name(name, "lease name", err, errlen)) < 0)
		return rc;
	return get_object(c, LEASES_PATH, ns, "/leases/", name, "leases", lease, http_code, err,
	                  errlen);
}

/* POST (name NULL: create in the collection) or PUT (replace name) of a Lease. */
static int write_lease(struct kube_client *c, const char *verb, const char *ns, const char *name,
                       const struct cJSON *lease, struct cJSON **out, long *http_code, char *err,
                       size_t errlen)
{
	char url[URL_MAX], what[64 + 2 * NAME_MAX_LEN];
	const char *obj_name = json_str(lease, "metadata", "name", NULL);
	struct call k = {
	    verb, "leases", what, url, c->timeout_ms, NULL, name != NULL ? "PUT" : "POST",
	    NULL, NULL};
	size_t pos = 0;
	long code = 0;
	char *body = NULL;
	int rc;

	snprintf(what, sizeof(what), "%s lease %s/%s", verb, ns,
	         name != NULL       ? name
	         : obj_name != NULL ? obj_name
	                            : "?");
	if (url_append(url, sizeof(url), &pos, c->cfg.server) < 0 ||
	    url_append(url, sizeof(url), &pos, LEASES_PATH) < 0 ||
	    url_append_escaped(url, sizeof(url), &pos, ns) < 0 ||
	    url_append(url, sizeof(url), &pos, name != NULL ? "/leases/" : "/leases") < 0 ||
	    (name != NULL && url_append_escaped(url, sizeof(url), &pos, name) < 0)) {
		errbuf_set(err, errlen, "%s: URL too long", what);
		rc = KUBE_EINVAL;
		goto out;
	}
	if ((body = cJSON_PrintUnformatted(lease)) == NULL) {
		errbuf_set(err, errlen, "%s: out of memory", what);
		rc = KUBE_ENOMEM;
		goto out;
	}
	k.body = body;
	rc = http_get(c, &k, out, &code, c->body_max, NULL, err, errlen);
out:
	free(body);
	if (http_code != NULL)
		*http_code = code;
	return rc;
}

static int check_lease_args(struct kube_client *c, const char *ns, const char *name,
                            const struct cJSON *lease, struct cJSON **out, long *http_code,
                            char *err, size_t errlen)
{
	int rc;

	if (out != NULL)
		*out = NULL;
	if (http_code != NULL)
		*http_code = 0;
	if (c == NULL || out == NULL || !cJSON_IsObject(lease))
		return KUBE_EINVAL;
	if ((rc = check_name(ns, "namespace", err, errlen)) < 0 ||
	    (rc = check_name(name, "lease name", err, errlen)) < 0)
		return rc;
	return 0;
}

int kube_create_lease(struct kube_client *c, const char *ns, const struct cJSON *lease,
                      struct cJSON **out, long *http_code, char *err, size_t errlen)
{
	int rc = check_lease_args(c, ns, json_str(lease, "metadata", "name", NULL), lease, out,
	                          http_code, err, errlen);
	if (rc < 0)
		return rc;
	return write_lease(c, "create", ns, NULL, lease, out, http_code, err, errlen);
}

int kube_update_lease(struct kube_client *c, const char *ns, const char *name,
                      const struct cJSON *lease, struct cJSON **out, long *http_code, char *err,
                      size_t errlen)
{
	int rc = check_lease_args(c, ns, name, lease, out, http_code, err, errlen);
	if (rc < 0)
		return rc;
	return write_lease(c, "update", ns, name, lease, out, http_code, err, errlen);
}

/* The last segment of a resource path: the observer's resource label ("gpumemorypolicies"). */
static const char *resource_label(const char *resource)
{
	const char *slash = strrchr(resource, '/');
	return slash != NULL ? slash + 1 : resource;
}

static int check_resource(const char *s, char *err, size_t errlen);
static const char *collection_prefix(const char *resource);

int kube_patch_status(struct kube_client *c, const char *resource, const char *name,
                      const struct cJSON *patch, long *http_code, char *err, size_t errlen)
{
	char url[URL_MAX], what[64 + 320 + NAME_MAX_LEN];
	struct call k = {.verb = "patch",
	                 .url = url,
	                 .what = what,
	                 .method = "PATCH",
	                 .content_type = "application/merge-patch+json"};
	size_t pos = 0;
	long code = 0;
	char *body = NULL;
	cJSON *out = NULL;
	int rc;

	if (http_code != NULL)
		*http_code = 0;
	if (c == NULL || !cJSON_IsObject(patch))
		return KUBE_EINVAL;
	if ((rc = check_resource(resource, err, errlen)) < 0 ||
	    (rc = check_name(name, "object name", err, errlen)) < 0)
		return rc;
	k.resource = resource_label(resource);
	k.budget_ms = c->timeout_ms;
	snprintf(what, sizeof(what), "patch %s %s/status", resource, name);
	if (url_append(url, sizeof(url), &pos, c->cfg.server) < 0 ||
	    url_append(url, sizeof(url), &pos, collection_prefix(resource)) < 0 ||
	    url_append(url, sizeof(url), &pos, resource) < 0 ||
	    url_append(url, sizeof(url), &pos, "/") < 0 ||
	    url_append_escaped(url, sizeof(url), &pos, name) < 0 ||
	    url_append(url, sizeof(url), &pos, "/status") < 0) {
		errbuf_set(err, errlen, "%s: URL too long", what);
		rc = KUBE_EINVAL;
		goto out;
	}
	if ((body = cJSON_PrintUnformatted(patch)) == NULL) {
		errbuf_set(err, errlen, "%s: out of memory", what);
		rc = KUBE_ENOMEM;
		goto out;
	}
	k.body = body;
	rc = http_get(c, &k, &out, &code, c->body_max, NULL, err, errlen);
out:
	cJSON_Delete(out);
	free(body);
	if (http_code != NULL)
		*http_code = code;
	return rc;
}

/* Move every element of page.items to the end of all. */
static int take_items(cJSON *page, cJSON *all)
{
	cJSON *items = cJSON_GetObjectItemCaseSensitive(page, "items");

	if (items == NULL || cJSON_IsNull(items))
		return 0;
	if (!cJSON_IsArray(items))
		return -1;
	while (items->child != NULL) {
		cJSON *it = cJSON_DetachItemViaPointer(items, items->child);
		cJSON_AddItemToArray(all, it);
	}
	return 0;
}

/* The list URL for node, with cont (may be NULL) as the continue token. */
static int list_url(struct kube_client *c, const char *node, const char *cont, char *url,
                    size_t cap)
{
	char sel[64 + NAME_MAX_LEN];
	char limit[64];
	size_t pos = 0;

	snprintf(sel, sizeof(sel), "spec.nodeName=%s,status.phase!=Succeeded,status.phase!=Failed",
	         node);
	snprintf(limit, sizeof(limit), "/api/v1/pods?limit=%d&fieldSelector=", KUBE_PAGE_LIMIT);
	if (url_append(url, cap, &pos, c->cfg.server) < 0 ||
	    url_append(url, cap, &pos, limit) < 0 || url_append_escaped(url, cap, &pos, sel) < 0)
		return -1;
	if (cont != NULL && (url_append(url, cap, &pos, "&continue=") < 0 ||
	                     url_append_escaped(url, cap, &pos, cont) < 0))
		return -1;
	return 0;
}

/* State of one list: the pages fetched so far share a deadline and a byte budget. */
struct listing {
	struct call k;
	double deadline; /* CLOCK_MONOTONIC seconds */
	size_t used;     /* body bytes so far */
	char *cont;      /* continue token for the next page, or NULL */
	cJSON *all;      /* items so far */
	long code;
};

/* Fetch one page into l; 0 and l->cont NULL when it was the last. */
static int list_page(struct kube_client *c, const char *node, struct listing *l, char *url,
                     char *err, size_t errlen)
{
	const cJSON *next;
	cJSON *page = NULL;
	size_t bytes = 0;
	int rc;

	l->k.budget_ms = (long)((l->deadline - monotime_s()) * 1000.0);
	if (l->k.budget_ms <= 0) {
		errbuf_set(err, errlen, "%s: no answer within %ld ms", l->k.what, c->timeout_ms);
		return KUBE_ETIMEOUT;
	}
	if (list_url(c, node, l->cont, url, URL_MAX) < 0) {
		errbuf_set(err, errlen, "%s: continue token too long", l->k.what);
		return KUBE_EPARSE;
	}
	rc = http_get(c, &l->k, &page, &l->code, c->body_max - l->used, &bytes, err, errlen);
	if (rc < 0)
		goto out;
	l->used += bytes;
	if (take_items(page, l->all) < 0) {
		errbuf_set(err, errlen, "%s: items is not an array", l->k.what);
		rc = KUBE_EPARSE;
		goto out;
	}
	next = json_at(page, "metadata", "continue", NULL);
	free(l->cont);
	l->cont = NULL;
	if (cJSON_IsString(next) && next->valuestring != NULL && next->valuestring[0] != '\0' &&
	    (l->cont = strdup(next->valuestring)) == NULL) {
		errbuf_set(err, errlen, "%s: out of memory", l->k.what);
		rc = KUBE_ENOMEM;
	}
out:
	cJSON_Delete(page);
	return rc;
}

/* Every page from the start. *gone is set when a continue token expired (410) midway. */
static int list_pass(struct kube_client *c, const char *node, struct listing *l, char *url,
                     int *gone, char *err, size_t errlen)
{
	int rc;

	*gone = 0;
	free(l->cont);
	l->cont = NULL;
	l->used = 0;
	cJSON_Delete(l->all);
	l->all = cJSON_CreateArray();
	if (l->all == NULL) {
		errbuf_set(err, errlen, "%s: out of memory", l->k.what);
		return KUBE_ENOMEM;
	}
	for (int pages = 1;; pages++) {
		int midway = l->cont != NULL;

		if (pages > KUBE_MAX_PAGES) {
			errbuf_set(err, errlen, "%s: more than %d pages", l->k.what,
			           KUBE_MAX_PAGES);
			return KUBE_ETOOBIG;
		}
		rc = list_page(c, node, l, url, err, errlen);
		if (rc == KUBE_EHTTP && l->code == 410 && midway)
			*gone = 1;
		if (rc < 0 || l->cont == NULL)
			return rc;
	}
}

/*
 * Pages share one deadline (the call's budget) and one byte budget (body_max summed over the
 * pages), so a long list cannot exceed what a single call may take. A continue token that
 * expires (410 Gone, etcd compaction) restarts the list from the first page, once.
 */
int kube_list_pods_on_node(struct kube_client *c, const char *node, struct cJSON **items,
                           long *http_code, char *err, size_t errlen)
{
	char what[64 + NAME_MAX_LEN], *url = NULL;
	struct listing l = {
	    {"list", "pods", what, NULL, 0, NULL, NULL, NULL, NULL}, 0, 0, NULL, NULL, 0};
	int gone = 0, rc;

	if (items != NULL)
		*items = NULL;
	if (c == NULL || items == NULL) {
		rc = KUBE_EINVAL;
		goto out;
	}
	if ((rc = check_name(node, "node name", err, errlen)) < 0)
		goto out;
	snprintf(what, sizeof(what), "list pods on node %s", node);
	l.deadline = monotime_s() + (double)c->timeout_ms / 1000.0;
	url = malloc(URL_MAX);
	if (url == NULL) {
		errbuf_set(err, errlen, "%s: out of memory", what);
		rc = KUBE_ENOMEM;
		goto out;
	}
	l.k.url = url;
	rc = list_pass(c, node, &l, url, &gone, err, errlen);
	if (rc < 0 && gone)
		rc = list_pass(c, node, &l, url, &gone, err, errlen);
	if (rc < 0)
		goto out;
	*items = l.all;
	l.all = NULL;
out:
	if (http_code != NULL)
		*http_code = l.code;
	cJSON_Delete(l.all);
	free(l.cont);
	free(url);
	return rc;
}

/* A collection for a cluster-wide path (nothing to escape): a core resource, 1..63 bytes of
 * [a-z0-9], or "group/version/resource" of [a-z0-9.-] with exactly two slashes, at most 317
 * bytes (a 253-byte group, a 63-byte resource). */
static int check_resource(const char *s, char *err, size_t errlen)
{
	size_t n = s != NULL ? strlen(s) : 0, slashes = 0;
	const char *p;

	if (n > 0 && n <= 63 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789") == n)
		return 0;
	for (p = s; n > 0 && *p; p++)
		slashes += *p == '/';
	if (n > 0 && n <= 317 && slashes == 2 && s[0] != '/' && s[n - 1] != '/' &&
	    strstr(s, "//") == NULL && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789.-/") == n)
		return 0;
	errbuf_set(err, errlen,
	           "resource must be 1..63 bytes of [a-z0-9], or group/version/resource");
	return KUBE_EINVAL;
}

/* "/api/v1/" for a core resource, "/apis/" for group/version/resource. */
static const char *collection_prefix(const char *resource)
{
	return strchr(resource, '/') != NULL ? "/apis/" : "/api/v1/";
}

/* GET /api/v1/<resource>?limit=N[&continue=T] (or /apis/<group/version/resource>) */
static int list_all_url(struct kube_client *c, const char *resource, long limit, const char *cont,
                        char *url, size_t cap)
{
	char q[64];
	size_t pos = 0;

	snprintf(q, sizeof(q), "?limit=%ld", limit);
	if (url_append(url, cap, &pos, c->cfg.server) < 0 ||
	    url_append(url, cap, &pos, collection_prefix(resource)) < 0 ||
	    url_append(url, cap, &pos, resource) < 0 || url_append(url, cap, &pos, q) < 0)
		return -1;
	if (cont != NULL && (url_append(url, cap, &pos, "&continue=") < 0 ||
	                     url_append_escaped(url, cap, &pos, cont) < 0))
		return -1;
	return 0;
}

/* metadata.<field> of a list page as a string, NULL when absent or empty. */
static const char *list_meta(const cJSON *page, const char *field)
{
	const cJSON *v = json_at(page, "metadata", field, NULL);

	return cJSON_IsString(v) && v->valuestring != NULL && v->valuestring[0] != '\0'
	           ? v->valuestring
	           : NULL;
}

/* One page of kube_list_all: fn per item, the page's RV (first page) and next continue token. */
static int list_all_page(const cJSON *page, const char *what, kube_item_fn fn, void *ctx,
                         char *first_rv, char **cont, char *err, size_t errlen)
{
	const cJSON *items = json_at(page, "items", NULL), *it, *arr;
	const char *v;

	if (first_rv[0] == '\0') {
		v = list_meta(page, "resourceVersion");
		if (v == NULL || strlen(v) >= KUBE_RV_MAX) {
			errbuf_set(err, errlen,
			           "%s: list without a usable metadata.resourceVersion", what);
			return KUBE_EPARSE;
		}
		snprintf(first_rv, KUBE_RV_MAX, "%s", v);
	}
	if (items != NULL && !cJSON_IsNull(items) && !cJSON_IsArray(items)) {
		errbuf_set(err, errlen, "%s: items is not an array", what);
		return KUBE_EPARSE;
	}
	arr = cJSON_IsArray(items) ? items : NULL;
	cJSON_ArrayForEach(it, arr)
	{
		if (fn(ctx, it) != 0) {
			errbuf_set(err, errlen, "%s: stopped by the caller", what);
			return KUBE_ESTOP;
		}
	}
	free(*cont);
	*cont = NULL;
	v = list_meta(page, "continue");
	if (v != NULL && (*cont = strdup(v)) == NULL) {
		errbuf_set(err, errlen, "%s: out of memory", what);
		return KUBE_ENOMEM;
	}
	return 0;
}

/*
 * Pages one at a time, each with the whole client timeout: unlike kube_list_pods_on_node (a
 * placement's budget), a full list is a cache's startup or relist, bounded by the page cap.
 */
int kube_list_all(struct kube_client *c, const char *resource, long page_limit, kube_item_fn fn,
                  void *ctx, char *rv, size_t rvlen, long *http_code, char *err, size_t errlen)
{
	return kube_list_all_until(c, resource, page_limit, fn, ctx, rv, rvlen, http_code, NULL,
	                           err, errlen);
}

int kube_list_all_until(struct kube_client *c, const char *resource, long page_limit,
                        kube_item_fn fn, void *ctx, char *rv, size_t rvlen, long *http_code,
                        const _Atomic int *stop, char *err, size_t errlen)
{
	char what[96], first_rv[KUBE_RV_MAX] = "", *url = NULL, *cont = NULL;
	struct call k = {"list", resource_label(resource), what, NULL, 0, NULL, NULL, NULL, NULL};
	long code = 0;
	int rc;

	if (rv != NULL && rvlen > 0)
		rv[0] = '\0';
	if (c == NULL || fn == NULL || page_limit < 0 || (rv == NULL) != (rvlen == 0)) {
		errbuf_set(err, errlen, "list: bad arguments");
		rc = KUBE_EINVAL;
		goto out;
	}
	if ((rc = check_resource(resource, err, errlen)) < 0)
		goto out;
	snprintf(what, sizeof(what), "list %s", resource);
	if ((url = malloc(URL_MAX)) == NULL) {
		errbuf_set(err, errlen, "%s: out of memory", what);
		rc = KUBE_ENOMEM;
		goto out;
	}
	k.url = url;
	k.budget_ms = c->timeout_ms;
	k.stop = stop;
	for (long pages = 1;; pages++) {
		cJSON *page = NULL;

		if (pages > KUBE_LIST_MAX_PAGES) {
			errbuf_set(err, errlen, "%s: more than %d pages", what,
			           KUBE_LIST_MAX_PAGES);
			rc = KUBE_ETOOBIG;
			goto out;
		}
		if (list_all_url(c, resource, page_limit ? page_limit : KUBE_PAGE_LIMIT, cont, url,
		                 URL_MAX) < 0) {
			errbuf_set(err, errlen, "%s: continue token too long", what);
			rc = KUBE_EPARSE;
			goto out;
		}
		rc = http_get(c, &k, &page, &code, c->body_max, NULL, err, errlen);
		if (rc == KUBE_EHTTP && code == 410)
			rc = KUBE_EGONE;
		if (rc == 0)
			rc = list_all_page(page, what, fn, ctx, first_rv, &cont, err, errlen);
		cJSON_Delete(page);
		if (rc < 0)
			goto out;
		if (cont == NULL)
			break;
	}
	if (rv != NULL && strlen(first_rv) >= rvlen) {
		errbuf_set(err, errlen, "%s: resourceVersion over %zu bytes", what, rvlen - 1);
		rc = KUBE_ETOOBIG;
		goto out;
	}
	if (rv != NULL)
		snprintf(rv, rvlen, "%s", first_rv);
	rc = 0;
out:
	if (http_code != NULL)
		*http_code = code;
	free(cont);
	free(url);
	return rc;
}

/* ---- watch ---- */

#define WATCH_ERRBODY_MAX (64u * 1024u) /* bytes of a non-2xx watch answer kept for err */

/* State of one watch transfer, shared by the curl callbacks. */
struct watch_xfer {
	CURL *easy;
	struct watch_decoder *dec;
	watch_event_fn fn;
	void *ctx;
	const _Atomic int *stop;
	long code;      /* HTTP status, read at the first body byte */
	int dec_rc;     /* a WATCH_E* that ended decoding, 0 */
	int stopped;    /* *stop was seen set */
	int user_stop;  /* fn returned nonzero */
	int error_code; /* an ERROR event's Status code (-1: none seen) */
	int opened;     /* a 2xx status and its headers arrived */
	char error_msg[STATUS_MSG];
	char dec_err[256]; /* the decoder's reason */
	struct body errbody;
};

static int stop_requested(struct watch_xfer *w)
{
	if (w->stop != NULL && *w->stop != 0)
		w->stopped = 1;
	return w->stopped;
}

/* Decoder callback: the caller's fn, then an ERROR event ends the watch. */
static int on_watch_event(void *ctx, enum watch_event_type type, const struct cJSON *object)
{
	struct watch_xfer *w = ctx;

	if (stop_requested(w))
		return 1;
	if (w->fn(w->ctx, type, object) != 0) {
		w->user_stop = 1;
		return 1;
	}
	if (type == WATCH_ERROR) {
		const cJSON *m = json_at(object, "message", NULL);

		w->error_code = watch_status_code(object);
		snprintf(w->error_msg, sizeof(w->error_msg), "%s",
		         cJSON_IsString(m) && m->valuestring ? m->valuestring : "");
		return 1;
	}
	return 0;
}

static size_t on_watch_body(char *data, size_t size, size_t nmemb, void *userp)
{
	struct watch_xfer *w = userp;
	size_t n = size * nmemb;
	int rc;

	if (stop_requested(w))
		return 0;
	if (w->code == 0)
		curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->code);
	if (w->code < 200 || w->code > 299) {
		/* An error answer: keep its start for the message, drop the rest. */
		size_t room = w->errbody.max - w->errbody.len;
		if (on_body(data, 1, n < room ? n : room, &w->errbody) != (n < room ? n : room))
			return 0;
		return n;
	}
	rc = watch_decoder_feed(w->dec, data, n, on_watch_event, w, w->dec_err, sizeof(w->dec_err));
	if (rc < 0) {
		w->dec_rc = rc;
		return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
	}
	return n;
}

static int on_watch_progress(void *userp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                             curl_off_t ulnow)
{
	return stop_requested(userp);
}

/* GET /api/v1/<resource>?watch=1[&resourceVersion=RV]&allowWatchBookmarks=true&timeoutSeconds=
 * (or /apis/<group/version/resource>) */
static int watch_url(struct kube_client *c, const char *resource, const char *rv, long timeout_s,
                     char *url, size_t cap)
{
	char q[96];
	size_t pos = 0;

	if (url_append(url, cap, &pos, c->cfg.server) < 0 ||
	    url_append(url, cap, &pos, collection_prefix(resource)) < 0 ||
	    url_append(url, cap, &pos, resource) < 0 || url_append(url, cap, &pos, "?watch=1") < 0)
		return -1;
	if (rv != NULL && rv[0] != '\0' &&
	    (url_append(url, cap, &pos, "&resourceVersion=") < 0 ||
	     url_append_escaped(url, cap, &pos, rv) < 0))
		return -1;
	snprintf(q, sizeof(q), "&allowWatchBookmarks=true&timeoutSeconds=%ld", timeout_s);
	return url_append(url, cap, &pos, q);
}

/* The end of the response headers: a 2xx means the watch is open, which the caller learns
 * (WATCH_OPENED) before any event: a quiet watch is a healthy one. */
static size_t on_watch_header(char *data, size_t size, size_t nmemb, void *userp)
{
	struct watch_xfer *w = userp;
	size_t n = size * nmemb;
	long code = 0;

	int end = (n == 2 && data[0] == '\r' && data[1] == '\n') || (n == 1 && data[0] == '\n');

	if (w->opened || !end)
		return n;
	curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code <= 299) {
		w->opened = 1;
		if (w->fn(w->ctx, WATCH_OPENED, NULL) != 0) {
			w->user_stop = 1;
			return 0;
		}
	}
	return n;
}

/* Options of a watch on a fresh handle (handle_setup already applied). */
static int watch_setup(struct kube_client *c, struct handle *h, struct watch_xfer *w,
                       const char *url, long timeout_s)
{
	CURLcode rc = CURLE_OK;

#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (rc == CURLE_OK)                                                                \
			rc = curl_easy_setopt(h->easy, opt, val);                                  \
	} while (0)
	SET(CURLOPT_URL, url);
	SET(CURLOPT_WRITEFUNCTION, on_watch_body);
	SET(CURLOPT_WRITEDATA, w);
	SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)0); /* a stream: the cap is per event */
	SET(CURLOPT_TIMEOUT_MS, 0L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms);
	/* Below 1 byte/s for that long: curl's speed is a ~5 s window, so silence is what counts.
	 */
	SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
	SET(CURLOPT_LOW_SPEED_TIME,
	    (timeout_s < KUBE_WATCH_SILENCE ? timeout_s : KUBE_WATCH_SILENCE) + c->watch_slack);
	SET(CURLOPT_HEADERFUNCTION, on_watch_header);
	SET(CURLOPT_HEADERDATA, w);
	SET(CURLOPT_NOPROGRESS, 0L);
	SET(CURLOPT_XFERINFOFUNCTION, on_watch_progress);
	SET(CURLOPT_XFERINFODATA, w);
#undef SET
	return rc == CURLE_OK ? 0 : -1;
}

/* The KUBE_E* of a finished watch, most specific cause first. */
static int watch_result(const char *what, struct handle *h, struct watch_xfer *w, CURLcode cc,
                        long timeout_s, long slack, char *err, size_t errlen)
{
	char msg[STATUS_MSG];

	if (w->stopped || w->user_stop) {
		errbuf_set(err, errlen, "%s: stopped by the caller", what);
		return KUBE_ESTOP;
	}
	if (w->error_code >= 0) {
		errbuf_set(err, errlen, "%s: ERROR event, code %d: %s", what, w->error_code,
		           w->error_msg);
		return w->error_code == 410 ? KUBE_EGONE : KUBE_EHTTP;
	}
	if (w->dec_rc < 0) {
		errbuf_set(err, errlen, "%s: %s", what, w->dec_err);
		return w->dec_rc == WATCH_ETOOBIG  ? KUBE_ETOOBIG
		       : w->dec_rc == WATCH_ENOMEM ? KUBE_ENOMEM
		                                   : KUBE_EPARSE;
	}
	if (w->code != 0 && (w->code < 200 || w->code > 299)) {
		status_message(&w->errbody, msg, sizeof(msg));
		errbuf_set(err, errlen, "%s: HTTP %ld%s%s", what, w->code, msg[0] ? ": " : "", msg);
		return w->code == 410 ? KUBE_EGONE : w->code == 404 ? KUBE_ENOTFOUND : KUBE_EHTTP;
	}
	if (cc == CURLE_OPERATION_TIMEDOUT) {
		errbuf_set(
		    err, errlen, "%s: no connection within the timeout or no byte for %ld s", what,
		    (timeout_s < KUBE_WATCH_SILENCE ? timeout_s : KUBE_WATCH_SILENCE) + slack);
		return KUBE_ETIMEOUT;
	}
	if (cc == CURLE_OUT_OF_MEMORY || cc == CURLE_WRITE_ERROR) {
		errbuf_set(err, errlen, "%s: out of memory", what);
		return KUBE_ENOMEM;
	}
	if (cc != CURLE_OK) {
		errbuf_set(err, errlen, "%s: %s", what,
		           h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc));
		return KUBE_ETRANSPORT;
	}
	return 0;
}

static int check_watch_args(struct kube_client *c, const char *resource, const char *rv,
                            long timeout_s, watch_event_fn fn, char *err, size_t errlen)
{
	if (c == NULL || fn == NULL || timeout_s < 1 || timeout_s > KUBE_WATCH_TIMEOUT_MAX ||
	    (rv != NULL && strlen(rv) >= KUBE_RV_MAX)) {
		errbuf_set(
		    err, errlen,
		    "watch: bad arguments (timeout 1..%ld s, resourceVersion under %d bytes)",
		    KUBE_WATCH_TIMEOUT_MAX, KUBE_RV_MAX);
		return KUBE_EINVAL;
	}
	return check_resource(resource, err, errlen);
}

int kube_watch(struct kube_client *c, const char *resource, const char *resource_version,
               long timeout_seconds, watch_event_fn fn, void *ctx, const _Atomic int *stop,
               long *http_code, char *err, size_t errlen)
{
	struct watch_xfer w = {.fn = fn, .ctx = ctx, .stop = stop, .error_code = -1};
	char what[96], *url = NULL;
	struct handle *h = NULL;
	struct cred cr = {0};
	double t0;
	CURLcode cc;
	int rc;

	if ((rc = check_watch_args(c, resource, resource_version, timeout_seconds, fn, err,
	                           errlen)) < 0)
		goto out;
	snprintf(what, sizeof(what), "watch %s", resource);
	w.errbody.max = WATCH_ERRBODY_MAX;
	w.dec = watch_decoder_new(c->body_max < WATCH_EVENT_MAX ? c->body_max : WATCH_EVENT_MAX);
	url = malloc(URL_MAX);
	if (w.dec == NULL || url == NULL) {
		errbuf_set(err, errlen, "%s: out of memory", what);
		rc = KUBE_ENOMEM;
		goto out;
	}
	if (watch_url(c, resource, resource_version, timeout_seconds, url, URL_MAX) < 0) {
		errbuf_set(err, errlen, "%s: URL too long", what);
		rc = KUBE_EINVAL;
		goto out;
	}
	if ((rc = current_cred(c, &cr, err, errlen)) < 0)
		goto out;
	if ((h = handle_new(c, err, errlen)) == NULL) {
		rc = KUBE_ENOMEM;
		goto out;
	}
	w.easy = h->easy;
	if (watch_setup(c, h, &w, url, timeout_seconds) < 0 ||
	    cred_apply(h->easy, &cr) != CURLE_OK) {
		errbuf_set(err, errlen, "%s: curl option refused", what);
		rc = KUBE_ENOMEM;
		goto out;
	}
	t0 = monotime_s();
	cc = curl_easy_perform(h->easy);
	curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &w.code);
	if (c->obs != NULL)
		c->obs(c->obs_ctx, "watch", resource_label(resource), w.code, monotime_s() - t0);
	/* A clean end: the server may have left a last event without its newline. */
	if (cc == CURLE_OK && w.code >= 200 && w.code <= 299 && w.dec_rc == 0 && w.error_code < 0 &&
	    !w.user_stop && !w.stopped)
		w.dec_rc =
		    watch_decoder_finish(w.dec, on_watch_event, &w, w.dec_err, sizeof(w.dec_err));
	if (w.dec_rc == WATCH_ESTOP)
		w.dec_rc = 0; /* the reason is in stopped, user_stop or error_code */
	rc = watch_result(what, h, &w, cc, timeout_seconds, c->watch_slack, err, errlen);
	/* A plugin's credential refused: the caller's next watch runs the plugin again. */
	if (w.code == 401 && cr.from_exec)
		execcred_invalidate(c->exec, cr.exec.generation);
out:
	if (http_code != NULL)
		*http_code = w.code;
	handle_destroy(h);
	cred_free(&cr);
	free(url);
	free(w.errbody.p);
	watch_decoder_free(w.dec);
	return rc;
}
