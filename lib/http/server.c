/*
 * server: libmicrohttpd listeners for admission (HTTPS) and health (HTTP). See server.h.
 */
#include "server.h"

#include "clientauth.h"
#include "cpulimit.h"
#include "log.h"
#include "metrics.h"
#include "monotime.h"
#include "tls.h"

#include <arpa/inet.h>
#include <limits.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BODY_INITIAL     (16u * 1024u) /* first buffer when Content-Length is absent */
#define HEALTH_TIMEOUT_S 10

struct request;

/*
 * Placements wait for API calls, so they do not run on libmicrohttpd's threads: a thread
 * blocked on a slow API server would stall every connection it owns (keep-alive pins
 * connections to threads), UPDATEs included. The review is decoded on the MHD thread and what
 * needs no API call is answered there at once; for a placement the connection is suspended, a
 * worker finishes the review and resumes it; libmicrohttpd then calls the handler again to
 * send the answer. Only placements queue for workers, so a burst of them against a hung API
 * server never delays the UPDATEs and DELETEs behind it, and their API budget counts from
 * arrival, so a placement that waited too long in the queue is denied without API calls.
 */
struct workers {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct request *head, *tail;
	size_t queued;
	int stop;
	pthread_t *threads;
	unsigned n;
};

/* A listener of routes: the admission one (TLS, every route) or the scheduler one (plain HTTP,
 * the routes marked plain). */
struct listener {
	struct server *s;
	int plain;
	char not_found[128]; /* "not found (use POST /validate)\n" */
};

struct server {
	struct MHD_Daemon *admission, *health, *scheduler;
	struct server_route routes[SERVER_MAX_ROUTES];
	size_t n_routes;
	struct listener admission_l, scheduler_l;
	struct tls_store *tls;
	struct metrics *metrics;
	struct workers workers;
	atomic_int ready;
	atomic_int draining;
	atomic_uint in_flight;
	uint16_t listen_port, health_port, scheduler_port;
	uint64_t cert_warn_s;
	void (*ready_note)(void *ctx, char *buf, size_t cap);
	void *ready_note_ctx;
	int (*ready_gate)(void *ctx, char *why, size_t cap);
	void *ready_gate_ctx;
	unsigned cpus; /* usable_cpus(): the pools' default size */
	struct clientauth *client_auth;
};

/* Per-request state on the admission listener, from the headers to the completion. */
struct request {
	char *body;
	size_t len, cap;
	int too_big;    /* body over the route's body_max: discard the rest, answer 413 */
	int forbidden;  /* no acceptable client certificate: discard the body, answer 403 (err) */
	size_t seen;    /* body bytes received, kept or not (bounded by SERVER_DISCARD_MAX) */
	int counted;    /* counted in in_flight */
	int answered;   /* a response is queued: ignore further calls */
	double arrived; /* monotime_s() at the first call: the budget's start */
	const struct server_route *route; /* NULL until routed */
	void *ctx;                        /* the route's prepared job, waiting for a worker */
	/* Set by the worker before it resumes the connection. */
	int reviewed;
	int rc;
	char *out;
	size_t out_len;
	char err[SERVER_ERR_MAX];
	struct MHD_Connection *conn;
	struct request *next;
};

/* MHD's messages (refused handshakes, accept errors) as log lines. The format attribute says fmt
 * is MHD's printf format (clang's -Wformat-nonliteral refuses the vsnprintf otherwise). */
__attribute__((format(printf, 2, 0))) static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	const char *listener = cls;
	if (vsnprintf(line, sizeof(line), fmt, ap) < 0)
		return;
	size_t n = strlen(line);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	/* A failed handshake is what every TCP probe, port scan or refused TLS 1.1 client causes
	 * (MHD words them all "received handshake message out of context"): debug, not info, so
	 * a flood of connects cannot flood the log. */
	log_fields(
	    strstr(line, "handshake") != NULL ? LOG_DEBUG : LOG_INFO, "httpd",
	    (struct log_field[]){LOG_STR("listener", listener), LOG_STR("detail", line), LOG_END});
}

static enum MHD_Result reply(struct server *s, struct MHD_Connection *c, unsigned code,
                             const char *ctype, void *body, size_t len,
                             enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	if (r == NULL) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "POST");
	/* While draining, ask keep-alive clients to reconnect: to another replica. */
	if (atomic_load(&s->draining))
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	enum MHD_Result ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_text(struct server *s, struct MHD_Connection *c, unsigned code,
                                  const char *text)
{
	return reply(s, c, code, "text/plain; charset=utf-8", (void *)text, strlen(text),
	             MHD_RESPMEM_PERSISTENT);
}

/* An answer of the admission listener: counted by status code. */
static enum MHD_Result answer_text(struct server *s, struct MHD_Connection *c, struct request *r,
                                   unsigned code, const char *text)
{
	r->answered = 1;
	metrics_http(s->metrics, code);
	return reply_text(s, c, code, text);
}

/* application/json, any case, optionally followed by parameters such as charset. */
static int is_json(const char *ctype)
{
	static const char want[] = "application/json";
	if (ctype == NULL)
		return 0;
	while (*ctype == ' ' || *ctype == '\t')
		ctype++;
	if (strncasecmp(ctype, want, sizeof(want) - 1) != 0)
		return 0;
	ctype += sizeof(want) - 1;
	while (*ctype == ' ' || *ctype == '\t')
		ctype++;
	return *ctype == '\0' || *ctype == ';';
}

/* Content-Length as a number; -1 when absent or malformed (MHD rejects the latter itself). */
static long long content_length(struct MHD_Connection *c)
{
	const char *v =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	char *end;
	if (v == NULL || *v < '0' || *v > '9')
		return -1;
	unsigned long long n = strtoull(v, &end, 10);
	return *end == '\0' && n <= (unsigned long long)LLONG_MAX ? (long long)n : -1;
}

/* 413, naming the route's cap. The text is on this stack: copied into the response (MHD sends
 * it after we return; a persistent response sent whatever the stack then held). */
static enum MHD_Result too_large(struct server *s, struct MHD_Connection *c, struct request *r)
{
	char text[64];
	int n =
	    snprintf(text, sizeof(text), "body larger than %zu MiB\n", r->route->body_max >> 20);
	r->answered = 1;
	metrics_http(s->metrics, MHD_HTTP_CONTENT_TOO_LARGE);
	return reply(s, c, MHD_HTTP_CONTENT_TOO_LARGE, "text/plain; charset=utf-8", text,
	             n > 0 && (size_t)n < sizeof(text) ? (size_t)n : 0, MHD_RESPMEM_MUST_COPY);
}

/* The client waits for "100 Continue" before it sends its body. */
static int expects_continue(struct MHD_Connection *c)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
	return v != NULL && strcasecmp(v, "100-continue") == 0;
}

static enum MHD_Result forbidden(struct server *s, struct MHD_Connection *c, struct request *r)
{
	r->answered = 1;
	metrics_http(s->metrics, MHD_HTTP_FORBIDDEN);
	return reply(s, c, MHD_HTTP_FORBIDDEN, "text/plain; charset=utf-8", r->err, strlen(r->err),
	             MHD_RESPMEM_MUST_COPY);
}

/* A route that requires a client certificate: 1 when the connection presented an acceptable
 * one, else 0 with the 403 queued. Checked per request (one chain verification, tens of
 * microseconds), so a CA reload applies to open keep-alive connections at their next request. */
static int client_allowed(const struct listener *l, struct MHD_Connection *c, struct request *r)
{
	struct server *s = l->s;
	char why[CLIENTAUTH_WHY_MAX];
	int rc = CLIENTAUTH_ENOCERT;

	snprintf(why, sizeof(why),
	         "a client certificate is required (this listener is plain "
	         "HTTP: use the TLS one)");
	if (!l->plain) {
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
		rc = clientauth_check(s->client_auth, ci ? (gnutls_session_t)ci->tls_session : NULL,
		                      why, sizeof(why));
		if (rc == 0)
			return 1;
	}
	metrics_client_auth_failure(s->metrics, (enum metrics_route)r->route->auth_route);
	log_fields(
	    LOG_DEBUG, "client refused",
	    (struct log_field[]){LOG_STR("path", r->route->path), LOG_STR("reason", why), LOG_END});
	snprintf(r->err, sizeof(r->err), "client certificate: %s\n", why);
	/* As for a body too large: answered after the body is read and dropped, unless the
	 * client waits for 100 Continue or declares more than can be dropped. */
	r->forbidden = 1;
	r->too_big = 1;
	if (expects_continue(c) || content_length(c) > (long long)SERVER_DISCARD_MAX)
		(void)forbidden(s, c, r);
	return 0;
}

/*
 * First call, headers only: route, check method and type, size the body buffer. A response
 * queued here ends the request without reading the body: MHD then sends it and closes the
 * connection, and a client still sending gets a reset from the kernel (unread data) that can
 * destroy the answer before it is read. So an oversized body is refused here only when the
 * client waits for 100 Continue (it sends nothing) or declares more than SERVER_DISCARD_MAX;
 * else it is read and dropped (too_big), and the 413 sent after it.
 */
static enum MHD_Result admission_begin(const struct listener *l, struct MHD_Connection *c,
                                       const char *url, const char *method, struct request *r)
{
	static const char wrong_type[] = "Content-Type must be application/json\n";
	struct server *s = l->s;
	for (size_t i = 0; i < s->n_routes && r->route == NULL; i++)
		if (strcmp(url, s->routes[i].path) == 0 && (!l->plain || s->routes[i].plain))
			r->route = &s->routes[i];
	if (r->route == NULL)
		return answer_text(s, c, r, MHD_HTTP_NOT_FOUND, l->not_found);
	if (r->route->client_auth && !client_allowed(l, c, r))
		return MHD_YES;
	if (strcmp(method, MHD_HTTP_METHOD_POST) != 0)
		return answer_text(s, c, r, MHD_HTTP_METHOD_NOT_ALLOWED,
		                   "method not allowed (POST)\n");
	if (!is_json(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)))
		return answer_text(s, c, r, MHD_HTTP_BAD_REQUEST, wrong_type);
	long long cl = content_length(c);
	if (cl > (long long)r->route->body_max) {
		if (expects_continue(c) || cl > (long long)SERVER_DISCARD_MAX)
			return too_large(s, c, r);
		r->too_big = 1;
		return MHD_YES;
	}
	r->cap = cl > 0 ? (size_t)cl : BODY_INITIAL;
	r->body = malloc(r->cap);
	if (r->body == NULL)
		return answer_text(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	return MHD_YES;
}

/* A chunk of body: append within the cap, or switch to discarding. */
static void admission_chunk(struct request *r, const char *data, size_t n)
{
	const size_t max = r->route->body_max;

	if (r->too_big)
		return;
	if (n > max - r->len) {
		r->too_big = 1;
		free(r->body);
		r->body = NULL;
		return;
	}
	if (r->len + n > r->cap) {
		size_t ncap = r->cap * 2;
		while (ncap < r->len + n)
			ncap *= 2;
		if (ncap > max)
			ncap = max;
		char *p = realloc(r->body, ncap);
		if (p == NULL) { /* treat as too big: the answer is an error either way */
			r->too_big = 1;
			free(r->body);
			r->body = NULL;
			return;
		}
		r->body = p;
		r->cap = ncap;
	}
	memcpy(r->body + r->len, data, n);
	r->len += n;
}

/* Send what the route's prepare() or finish() returned. */
static enum MHD_Result send_review(struct server *s, struct MHD_Connection *c, struct request *r)
{
	if (r->rc == SERVER_EBADREQUEST) {
		size_t n = strlen(r->err);
		char *text = malloc(n + 2);
		if (text == NULL)
			return answer_text(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR,
			                   "out of memory\n");
		memcpy(text, r->err, n);
		memcpy(text + n, "\n", 2);
		metrics_http(s->metrics, MHD_HTTP_BAD_REQUEST);
		r->answered = 1;
		return reply(s, c, MHD_HTTP_BAD_REQUEST, "text/plain; charset=utf-8", text, n + 1,
		             MHD_RESPMEM_MUST_FREE);
	}
	if (r->rc != 0)
		return answer_text(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal error\n");
	metrics_http(s->metrics, MHD_HTTP_OK);
	r->answered = 1;
	char *out = r->out;
	r->out = NULL; /* owned by the response from here */
	return reply(s, c, MHD_HTTP_OK, "application/json", out, r->out_len, MHD_RESPMEM_MUST_FREE);
}

/* The rest of a prepared review (API calls for a placement); r->ctx is consumed. */
static void finish_review(struct request *r)
{
	r->rc = r->route->finish(r->ctx, &r->out, &r->out_len, r->err, sizeof(r->err));
	r->ctx = NULL;
	r->reviewed = 1;
}

/*
 * Hand r to a worker: suspend the connection, then queue (under the queue lock, so that no
 * worker can resume it before it is suspended). 0, or -1 when the pool is stopping or the
 * queue is full: then the caller denies the placement at once.
 */
static int submit(struct server *s, struct MHD_Connection *c, struct request *r)
{
	struct workers *w = &s->workers;
	pthread_mutex_lock(&w->lock);
	if (w->n == 0 || w->stop || w->queued >= SERVER_QUEUE_MAX) {
		pthread_mutex_unlock(&w->lock);
		return -1;
	}
	MHD_suspend_connection(c);
	r->conn = c;
	r->next = NULL;
	if (w->tail)
		w->tail->next = r;
	else
		w->head = r;
	w->tail = r;
	w->queued++;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

/* Last call: the whole body is here (or, after a worker resumed us, the review is done). */
static enum MHD_Result admission_finish(struct server *s, struct MHD_Connection *c,
                                        struct request *r)
{
	if (r->reviewed)
		return send_review(s, c, r);
	if (r->forbidden)
		return forbidden(s, c, r);
	if (r->too_big)
		return too_large(s, c, r);
	r->rc = r->route->prepare(r->route->ctx, r->body, r->len, r->arrived, &r->ctx, r->err,
	                          sizeof(r->err));
	free(r->body); /* decoded: not needed while the review waits */
	r->body = NULL;
	if (r->rc != 0)
		return send_review(s, c, r);
	if (r->route->needs_worker(r->ctx)) {
		if (submit(s, c, r) == 0)
			return MHD_YES;
		/* Never wait for the API server on an MHD thread: that stalls every connection
		 * the thread owns. Deny (fail closed); the scheduler retries with backoff. */
		r->route->refuse_busy(r->ctx, "review queue full or shutting down");
	}
	finish_review(r); /* decided without the API server: answer here */
	return send_review(s, c, r);
}

static void *worker_main(void *arg)
{
	struct server *s = arg;
	struct workers *w = &s->workers;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (w->head == NULL && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->head == NULL) /* stopping, and every queued review is done */
			break;
		struct request *r = w->head;
		w->head = r->next;
		if (w->head == NULL)
			w->tail = NULL;
		w->queued--;
		int stopping = w->stop;
		pthread_mutex_unlock(&w->lock);
		/* Past the drain, what has not started is denied without an API call, so that the
		 * exit stays within --shutdown-timeout however long the queue. */
		if (stopping)
			r->route->refuse_busy(r->ctx, "shutting down");
		finish_review(r);
		MHD_resume_connection(r->conn);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int workers_start(struct server *s, unsigned n)
{
	struct workers *w = &s->workers;
	w->threads = calloc(n, sizeof(*w->threads));
	if (w->threads == NULL)
		return -1;
	for (; w->n < n; w->n++)
		if (pthread_create(&w->threads[w->n], NULL, worker_main, s) != 0)
			return -1;
	return 0;
}

/* Finish the queued reviews and join the workers; every suspended connection is resumed
 * after this, as MHD_stop_daemon requires. */
static void workers_stop(struct server *s)
{
	struct workers *w = &s->workers;
	pthread_mutex_lock(&w->lock);
	w->stop = 1;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < w->n; i++)
		pthread_join(w->threads[i], NULL);
	w->n = 0;
	free(w->threads);
	w->threads = NULL;
}

static enum MHD_Result admission_handler(void *cls, struct MHD_Connection *c, const char *url,
                                         const char *method, const char *version,
                                         const char *upload_data, size_t *upload_data_size,
                                         void **con_cls)
{
	const struct listener *l = cls;
	struct server *s = l->s;
	struct request *r = *con_cls;
	if (r == NULL) {
		r = calloc(1, sizeof(*r));
		if (r == NULL)
			return MHD_NO;
		*con_cls = r;
		r->arrived = monotime_s();
		r->counted = 1;
		atomic_fetch_add(&s->in_flight, 1);
		return admission_begin(l, c, url, method, r);
	}
	if (r->answered) { /* answered from the headers: the body is not read */
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		r->seen += *upload_data_size; /* MHD hands at most its buffer: no overflow */
		admission_chunk(r, upload_data, *upload_data_size);
		*upload_data_size = 0;
		/* A chunked body that goes on past the discard bound: MHD 0.9.75 queues no answer
		 * in the middle of a body, so the connection is closed without one. */
		if (r->too_big && r->seen > SERVER_DISCARD_MAX)
			return MHD_NO;
		return MHD_YES;
	}
	return admission_finish(s, c, r);
}

/* A connection opened: counted per listener, so that requests per connection (keep-alive, and on
 * the admission listener the TLS handshakes behind them) can be read off /metrics. */
static void connection_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe)
{
	const struct listener *l = cls;
	(void)c;
	(void)socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		metrics_http_connection(l->s->metrics, l->plain ? METRICS_LISTENER_SCHEDULER
		                                                : METRICS_LISTENER_ADMISSION);
}

static void request_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
	struct server *s = ((const struct listener *)cls)->s;
	struct request *r = *con_cls;
	if (r == NULL)
		return;
	if (r->counted)
		atomic_fetch_sub(&s->in_flight, 1);
	if (r->route != NULL && r->ctx != NULL)
		r->route->discard(r->ctx);
	free(r->body);
	free(r->out);
	free(r);
	*con_cls = NULL;
}

/* The ready gate (server_options.ready_gate): 1 when open or absent, else 0 with why. */
static int gate_open(struct server *s, char *why, size_t cap)
{
	why[0] = '\0';
	if (s->ready_gate == NULL || s->ready_gate(s->ready_gate_ctx, why, cap))
		return 1;
	if (why[0] == '\0')
		snprintf(why, cap, "this replica cannot decide yet");
	return 0;
}

/* Ready: 200 "ok", plus a warning line when the certificate expires soon (a probe still
 * passes: an expiring certificate is the operator's to renew, not a reason to stop serving). */
static enum MHD_Result readyz(struct server *s, struct MHD_Connection *c)
{
	char warn[160], note[512], text[768];
	if (!atomic_load(&s->ready) || atomic_load(&s->draining))
		return reply_text(s, c, MHD_HTTP_SERVICE_UNAVAILABLE,
		                  atomic_load(&s->draining) ? "draining\n" : "not ready\n");
	if (!gate_open(s, note, sizeof(note))) {
		metrics_set_ready(s->metrics, 0);
		int n = snprintf(text, sizeof(text), "not ready: %s\n", note);
		if (n < 0 || (size_t)n >= sizeof(text))
			n = (int)strlen(text);
		return reply(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", text,
		             (size_t)n, MHD_RESPMEM_MUST_COPY);
	}
	metrics_set_ready(s->metrics, 1);
	note[0] = '\0';
	if (s->ready_note != NULL)
		s->ready_note(s->ready_note_ctx, note, sizeof(note));
	int warned = tls_expiry_warning(tls_store_not_after(s->tls), (int64_t)time(NULL),
	                                s->cert_warn_s, warn, sizeof(warn));
	if (!warned && note[0] == '\0')
		return reply_text(s, c, MHD_HTTP_OK, "ok\n");
	int n = snprintf(text, sizeof(text), "ok\n%s%s%s%s%s", warned ? "warning: " : "",
	                 warned ? warn : "", warned ? "\n" : "", note, note[0] ? "\n" : "");
	if (n < 0 || (size_t)n >= sizeof(text))
		n = (int)strlen(text);
	return reply(s, c, MHD_HTTP_OK, "text/plain; charset=utf-8", text, (size_t)n,
	             MHD_RESPMEM_MUST_COPY); /* text is on this stack */
}

static enum MHD_Result health_handler(void *cls, struct MHD_Connection *c, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
	struct server *s = cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_text(s, c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed (GET)\n");
	if (strcmp(url, "/healthz") == 0 || strcmp(url, "/livez") == 0)
		return reply_text(s, c, MHD_HTTP_OK, "ok\n");
	if (strcmp(url, "/readyz") == 0)
		return readyz(s, c);
	if (strcmp(url, "/metrics") == 0) {
		char *text;
		size_t len;
		metrics_set_ready(s->metrics, server_ready(s)); /* the gate may have changed */
		if (metrics_render(s->metrics, &text, &len) != 0)
			return reply_text(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "metrics failed\n");
		return reply(s, c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text,
		             len, MHD_RESPMEM_MUST_FREE);
	}
	return reply_text(s, c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/*
 * Resolve host into a sockaddr with port; *v6 set for IPv6. IPv4 is preferred when a name has
 * both ("localhost" resolves to ::1 first on glibc, and clients mostly dial 127.0.0.1).
 * 0 or -1.
 */
static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss, int *v6)
{
	struct addrinfo hints, *res = NULL, *pick;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
		return -1;
	pick = res;
	for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next)
		if (ai->ai_family == AF_INET) {
			pick = ai;
			break;
		}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, pick->ai_addr, pick->ai_addrlen);
	*v6 = pick->ai_family == AF_INET6;
	if (*v6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	freeaddrinfo(res);
	return 0;
}

/* The CPUs this process may use: the cgroup's CPU limit (cpulimit.h), else the host's. Read
 * once per server; a cgroup file the kernel would not write is logged and the host's count
 * used. */
static unsigned usable_cpus(void)
{
	char err[CPULIMIT_ERR_MAX];
	double limit = 0;
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int rc = cpulimit_read(CPULIMIT_CGROUP_ROOT, &limit, err, sizeof(err));

	if (rc < 0) {
		log_fields(
		    LOG_WARN, "cannot read the cgroup CPU limit, sizing by the host's CPUs",
		    (struct log_field[]){LOG_STR("error", err), LOG_INT("cpus", online), LOG_END});
		limit = 0;
	} else if (rc == CPULIMIT_NONE) {
		limit = 0;
	}
	return cpulimit_count(limit, online);
}

static unsigned pool_size(unsigned threads, unsigned cpus)
{
	unsigned n = threads ? threads : cpus;
	return n < 2 ? 2 : n;
}

/* Review workers mostly wait for the API server: several per CPU. */
static unsigned worker_count(unsigned workers, unsigned cpus)
{
	if (workers)
		return workers;
	return cpus * 4 > 8 ? cpus * 4 : 8u;
}

/* The idle timeout of the admission and scheduler listeners (server_options). */
static unsigned conn_timeout_s(const struct server_options *o)
{
	return o->connection_timeout_s ? o->connection_timeout_s : SERVER_CONNECTION_TIMEOUT_S;
}

static struct MHD_Daemon *start_admission(struct server *s, const struct server_options *o,
                                          const struct sockaddr *sa, unsigned extra_flags)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TLS |
	                 MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | extra_flags;
	/* The logger goes first so that errors in the options that follow reach it. */
	return MHD_start_daemon(
	    flags, o->listen_port, NULL, NULL, admission_handler, &s->admission_l,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, "admission", MHD_OPTION_HTTPS_PRIORITIES,
	    SERVER_TLS_PRIORITIES, MHD_OPTION_HTTPS_CERT_CALLBACK, tls_cert_callback,
	    MHD_OPTION_THREAD_POOL_SIZE, pool_size(o->threads, s->cpus),
	    MHD_OPTION_CONNECTION_TIMEOUT, conn_timeout_s(o), MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)SERVER_CONNECTION_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	    (unsigned)SERVER_PER_IP_LIMIT, MHD_OPTION_NOTIFY_COMPLETED, request_completed,
	    &s->admission_l, MHD_OPTION_NOTIFY_CONNECTION, connection_notify, &s->admission_l,
	    MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_END);
}

/* The admission listener's handling without TLS, for the plain routes. */
static struct MHD_Daemon *start_scheduler(struct server *s, const struct server_options *o,
                                          const struct sockaddr *sa, unsigned extra_flags)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
	                 MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | extra_flags;
	return MHD_start_daemon(
	    flags, o->scheduler_port, NULL, NULL, admission_handler, &s->scheduler_l,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, "scheduler", MHD_OPTION_THREAD_POOL_SIZE,
	    pool_size(o->threads, s->cpus), MHD_OPTION_CONNECTION_TIMEOUT, conn_timeout_s(o),
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVER_CONNECTION_LIMIT,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)SERVER_PER_IP_LIMIT,
	    MHD_OPTION_NOTIFY_COMPLETED, request_completed, &s->scheduler_l,
	    MHD_OPTION_NOTIFY_CONNECTION, connection_notify, &s->scheduler_l, MHD_OPTION_SOCK_ADDR,
	    sa, MHD_OPTION_END);
}

static struct MHD_Daemon *start_health(struct server *s, const struct server_options *o,
                                       const struct sockaddr *sa, unsigned extra_flags)
{
	unsigned flags =
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG | extra_flags;
	return MHD_start_daemon(flags, o->health_port, NULL, NULL, health_handler, s,
	                        MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, "health",
	                        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HEALTH_TIMEOUT_S,
	                        MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_END);
}

typedef struct MHD_Daemon *(*starter)(struct server *, const struct server_options *,
                                      const struct sockaddr *, unsigned);

/*
 * Start one listener on host:port. An empty host means all addresses: dual-stack IPv6 first,
 * then IPv4 only (a pod without IPv6 cannot bind ::).
 */
static struct MHD_Daemon *listen_on(struct server *s, const struct server_options *o, starter start,
                                    const char *host, uint16_t port)
{
	struct sockaddr_storage ss;
	int v6 = 0;
	if (host == NULL || host[0] == '\0') {
		struct MHD_Daemon *d = start(s, o, NULL, MHD_USE_DUAL_STACK);
		return d ? d : start(s, o, NULL, 0);
	}
	if (resolve(host, port, &ss, &v6) != 0)
		return NULL;
	return start(s, o, (const struct sockaddr *)&ss, v6 ? MHD_USE_IPv6 : 0);
}

static uint16_t bound_port(struct MHD_Daemon *d)
{
	const union MHD_DaemonInfo *i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	return i ? i->port : 0;
}

/* "not found (use POST /validate or /scheduler/filter)\n": the routes l serves. */
static void set_not_found(struct listener *l)
{
	const struct server *s = l->s;
	size_t off = 0, cap = sizeof(l->not_found);
	const char *sep = "not found (use POST ";

	for (size_t i = 0; i < s->n_routes && off < cap; i++) {
		if (l->plain && !s->routes[i].plain)
			continue;
		off +=
		    (size_t)snprintf(l->not_found + off, cap - off, "%s%s", sep, s->routes[i].path);
		sep = " or ";
	}
	if (off < cap)
		snprintf(l->not_found + off, cap - off, "%s\n", off ? ")" : "not found");
}

struct server *server_start(const struct server_options *opt, const struct server_route *routes,
                            size_t n_routes, struct tls_store *tls, struct metrics *metrics,
                            char *err, size_t errlen)
{
	struct server *s;

	if (routes == NULL || n_routes == 0 || n_routes > SERVER_MAX_ROUTES) {
		snprintf(err, errlen, "between 1 and %d routes", SERVER_MAX_ROUTES);
		return NULL;
	}
	for (size_t i = 0; i < n_routes; i++)
		if (routes[i].path == NULL || routes[i].path[0] != '/' ||
		    routes[i].prepare == NULL || routes[i].needs_worker == NULL ||
		    routes[i].finish == NULL || routes[i].refuse_busy == NULL ||
		    routes[i].discard == NULL || routes[i].body_max < (1u << 20)) {
			snprintf(err, errlen, "route %zu is incomplete", i);
			return NULL;
		} else if (routes[i].client_auth && opt->client_auth == NULL) {
			snprintf(err, errlen,
			         "route %s requires client certificates, but no client "
			         "CA is given",
			         routes[i].path);
			return NULL;
		}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memcpy(s->routes, routes, n_routes * sizeof(*routes));
	s->n_routes = n_routes;
	s->admission_l.s = s->scheduler_l.s = s;
	s->scheduler_l.plain = 1;
	set_not_found(&s->admission_l);
	set_not_found(&s->scheduler_l);
	s->tls = tls;
	s->cert_warn_s = opt->cert_warn_s;
	s->ready_note = opt->ready_note;
	s->ready_note_ctx = opt->ready_note_ctx;
	s->ready_gate = opt->ready_gate;
	s->ready_gate_ctx = opt->ready_gate_ctx;
	s->metrics = metrics;
	s->client_auth = opt->client_auth;
	s->cpus = usable_cpus();
	pthread_mutex_init(&s->workers.lock, NULL);
	pthread_cond_init(&s->workers.cond, NULL);
	if (workers_start(s, worker_count(opt->workers, s->cpus)) != 0) {
		snprintf(err, errlen, "cannot start %u review workers",
		         worker_count(opt->workers, s->cpus));
		goto err;
	}
	tls_store_request_client_cert(tls, opt->client_auth != NULL);
	tls_store_activate(tls);
	s->health = listen_on(s, opt, start_health, opt->health_host, opt->health_port);
	if (s->health == NULL) {
		snprintf(err, errlen, "--health-listen %s:%u: cannot listen (address in use?)",
		         opt->health_host, opt->health_port);
		goto err;
	}
	s->admission = listen_on(s, opt, start_admission, opt->listen_host, opt->listen_port);
	if (s->admission == NULL) {
		snprintf(err, errlen, "--listen %s:%u: cannot listen with TLS (address in use?)",
		         opt->listen_host, opt->listen_port);
		goto err;
	}
	if (opt->scheduler_enabled) {
		s->scheduler =
		    listen_on(s, opt, start_scheduler, opt->scheduler_host, opt->scheduler_port);
		if (s->scheduler == NULL) {
			snprintf(err, errlen,
			         "--scheduler-listen %s:%u: cannot listen (address in use?)",
			         opt->scheduler_host ? opt->scheduler_host : "",
			         opt->scheduler_port);
			goto err;
		}
		s->scheduler_port = bound_port(s->scheduler);
	}
	s->listen_port = bound_port(s->admission);
	s->health_port = bound_port(s->health);
	atomic_store(&s->ready, tls != NULL);
	metrics_set_ready(metrics, server_ready(s));
	log_fields(
	    LOG_INFO, "serving",
	    (struct log_field[]){
	        LOG_STR("listen_host", opt->listen_host), LOG_INT("listen_port", s->listen_port),
	        LOG_STR("health_host", opt->health_host), LOG_INT("health_port", s->health_port),
	        LOG_INT("scheduler_port", s->scheduler_port), LOG_INT("cpus", s->cpus),
	        LOG_INT("threads", pool_size(opt->threads, s->cpus)),
	        LOG_INT("workers", s->workers.n), LOG_END});
	return s;
err:
	server_free(s);
	return NULL;
}

void server_ports(struct server *s, uint16_t *listen_port, uint16_t *health_port)
{
	if (listen_port)
		*listen_port = s->listen_port;
	if (health_port)
		*health_port = s->health_port;
}

uint16_t server_scheduler_port(struct server *s)
{
	return s->scheduler_port;
}

int server_ready(struct server *s)
{
	char why[256];
	return atomic_load(&s->ready) && !atomic_load(&s->draining) &&
	       gate_open(s, why, sizeof(why));
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

unsigned server_shutdown(struct server *s, uint64_t drain_ms, uint64_t shutdown_ms)
{
	if (s == NULL || s->admission == NULL)
		return 0;
	atomic_store(&s->draining, 1);
	metrics_set_ready(s->metrics, 0);
	log_fields(LOG_INFO, "draining: readiness failed, still serving",
	           (struct log_field[]){LOG_INT("drain_ms", drain_ms), LOG_END});
	sleep_ms(drain_ms);
	/* A quiesced daemon no longer accepts and leaves its listen socket to us: closed at once,
	 * so that new connections are refused rather than left waiting in the backlog. */
	MHD_socket fd = MHD_quiesce_daemon(s->admission);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	if (s->scheduler != NULL && (fd = MHD_quiesce_daemon(s->scheduler)) != MHD_INVALID_SOCKET)
		close(fd);
	uint64_t waited = 0;
	while (atomic_load(&s->in_flight) > 0 && waited < shutdown_ms) {
		sleep_ms(10);
		waited += 10;
	}
	unsigned left = atomic_load(&s->in_flight);
	workers_stop(s); /* reviews already running finish: they are bounded by the API budget */
	/* Let the MHD threads send what the workers just resumed before the daemon stops. */
	for (waited = 0; atomic_load(&s->in_flight) > 0 && waited < 1000; waited += 10)
		sleep_ms(10);
	MHD_stop_daemon(s->admission);
	s->admission = NULL;
	if (s->scheduler != NULL)
		MHD_stop_daemon(s->scheduler);
	s->scheduler = NULL;
	if (s->health != NULL)
		MHD_stop_daemon(s->health);
	s->health = NULL;
	log_fields(LOG_INFO, "stopped",
	           (struct log_field[]){LOG_INT("in_flight_abandoned", left), LOG_END});
	return left;
}

void server_free(struct server *s)
{
	if (s == NULL)
		return;
	workers_stop(s);
	if (s->admission != NULL)
		MHD_stop_daemon(s->admission);
	if (s->scheduler != NULL)
		MHD_stop_daemon(s->scheduler);
	if (s->health != NULL)
		MHD_stop_daemon(s->health);
	pthread_mutex_destroy(&s->workers.lock);
	pthread_cond_destroy(&s->workers.cond);
	free(s);
}
