/*
 * server: the HTTPS admission listener and the plain-HTTP health listener (libmicrohttpd).
 *
 * Admission listener (TLS 1.2/1.3 only, certificate from tls.h's callback, hot-reloaded):
 *   a table of POST routes (struct server_route; today one: POST /validate, the admission
 *   adapter's webhook_route()): Content-Type application/json and a body of at most the
 *   route's body_max bytes -> its prepare() / finish() -> 200 application/json.
 *   Other paths 404, other methods on a route 405 (Allow: POST), a bigger body 413 (at once
 *   when Content-Length says so; chunked bodies are discarded and answered 413 at the end),
 *   another Content-Type 400, a body that is not an AdmissionReview with request.uid 400 with
 *   the reason. Keep-alive; idle connections close after the connection timeout. A route
 *   marked client_auth answers 403 "client certificate: <why>" before anything else unless the
 *   connection presented a certificate server_options.client_auth accepts.
 *   Threads: an MHD thread pool (epoll) does the I/O and TLS, decodes each review and answers
 *   at once those that need no API call; placements are finished on a pool of worker threads
 *   (the connection is suspended meanwhile), because they wait for the API server and a
 *   waiting MHD thread would stall every connection it owns. A placement's API budget counts
 *   from the request's arrival, queue wait included.
 * Scheduler listener (optional, server_options.scheduler_enabled): plain HTTP serving only the
 *   routes marked plain (the scheduler extender's), with the same handling, threads and
 *   workers as the admission listener, for a kube-scheduler on the same pod network that does
 *   not speak TLS to it. Other paths (POST /validate included) are 404 there.
 * Health listener: GET /healthz (200 while the process runs), /readyz (200 once the
 *   certificate is loaded, the admission listener is up and server_options.ready_gate, if
 *   any, says this replica can decide; 503 "not ready: <why>" while the gate says not, 503
 *   "draining" once draining), /metrics (Prometheus text).
 *
 * Shutdown (server_shutdown): readiness fails first; the admission (and scheduler) listener
 * keeps serving for drain_ms so that the endpoints controller and the API server stop sending;
 * then it stops accepting (MHD_quiesce_daemon; the listen socket is closed, so new connections are
 * refused at once), in-flight reviews get up to shutdown_ms to finish, and both daemons stop.
 *
 * Not thread-safe: one thread owns a struct server (main). The request handlers run on MHD's
 * threads and only touch thread-safe modules.
 */
#ifndef GMG_SERVER_H
#define GMG_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct clientauth;
struct metrics;
struct tls_store;

#define SERVER_PATH_VALIDATE "/validate"
#define SERVER_MAX_ROUTES    8
#define SERVER_EBADREQUEST   (-1) /* prepare: the body is not what the route takes: 400 */
#define SERVER_ENOMEM        (-2) /* prepare / finish: 500 */

/*
 * One POST route of the TLS listener: a JSON body (Content-Type application/json, at most
 * body_max bytes) in, a JSON answer out, in two steps so that what needs no waiting is answered
 * on the listener's thread and only the rest goes to a worker:
 *   prepare(ctx, body, len, arrived, &job, err, errlen): decode and decide what can be decided
 *     at once; body is borrowed for the call; arrived is monotime_s() at the request's arrival.
 *     0 with *job (owned by the server until finish or discard), SERVER_EBADREQUEST with a
 *     reason in err (answered 400 with it), or SERVER_ENOMEM (500).
 *   needs_worker(job): 1 when finish() may wait (for the API server): run it on a worker.
 *   finish(job, &out, &out_len, err, errlen): complete, encode, free job; 0 with *out (malloc'd,
 *     the server frees it) answered 200 application/json, else 500.
 *   refuse_busy(job, why): no worker can take it (queue full, shutting down): decide it now
 *     without waiting (the admission adapter denies: fail closed); finish() then only encodes.
 *   discard(job): free an unanswered job (the client went away).
 * Every callback must be thread-safe. The adapters (webhook_route()) provide routes; the server
 * knows nothing of what they decide.
 */
struct server_route {
	const char *path; /* exact request path, e.g. SERVER_PATH_VALIDATE */
	size_t body_max;  /* bytes, at least 1 MiB; bigger bodies are answered 413 (see
	                     SERVER_DISCARD_MAX) */
	void *ctx;        /* passed to prepare */
	int (*prepare)(void *ctx, const char *body, size_t len, double arrived, void **job,
	               char *err, size_t errlen);
	int (*needs_worker)(const void *job);
	int (*finish)(void *job, char **out, size_t *out_len, char *err, size_t errlen);
	void (*refuse_busy)(void *job, const char *why);
	void (*discard)(void *job);
	int plain; /* 1: also served on the plain-HTTP scheduler listener */
	/* 1: a request must come over a connection that presented a client certificate
	 * server_options.client_auth accepts (clientauth.h); else 403 with the reason, counted in
	 * client_auth_failures_total{route=auth_route}. On the plain listener such a route always
	 * answers 403 (no certificate can be presented there). The caller sets it (the adapters
	 * leave it 0): --client-auth-routes. */
	int client_auth;
	int auth_route; /* enum metrics_route: the label of that counter */
};
#define SERVER_TLS_PRIORITIES   "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define SERVER_CONNECTION_LIMIT 4096 /* concurrent admission connections */
/* The default idle timeout, seconds: over the clients' 90 s keep-alive (config.h,
 * CONFIG_CLIENT_IDLE_S, says why; its CONFIG_CONNECTION_TIMEOUT_S is the flag's default). */
#define SERVER_CONNECTION_TIMEOUT_S 120u
#define SERVER_PER_IP_LIMIT         0 /* unlimited: the API server is one client with many */
#define SERVER_ERR_MAX              512
#define SERVER_QUEUE_MAX            4096 /* placements waiting for a worker; past it, denied at once */
#define SERVER_MAX_WORKERS          1024
/*
 * A body over its route's body_max is answered 413. Sent with Expect: 100-continue, or declaring
 * a Content-Length over SERVER_DISCARD_MAX bytes, it is answered before it is read; otherwise it
 * is read and dropped up to SERVER_DISCARD_MAX bytes, then answered, so that a client that sends
 * all before it reads gets the 413, not a reset. Past that (chunked), the connection is closed.
 */
#define SERVER_DISCARD_MAX (32u * 1024u * 1024u)

struct server_options {
	const char *listen_host; /* "" = all addresses (dual-stack when available) */
	uint16_t listen_port;    /* 0 = any free port (see server_ports) */
	const char *health_host;
	uint16_t health_port;
	int scheduler_enabled;      /* 1: start the plain-HTTP scheduler listener */
	const char *scheduler_host; /* as listen_host */
	uint16_t scheduler_port;    /* 0 = any free port */
	/* CPUs below: the cgroup's CPU limit rounded up (cpulimit.h), else the host's CPUs; the
	 * "serving" log line says how many ("cpus"). */
	unsigned threads;              /* admission thread pool size; 0 = CPUs (min 2) */
	unsigned workers;              /* review worker threads; 0 = 4 x CPUs (min 8) */
	unsigned connection_timeout_s; /* idle connection timeout, seconds (0:
	                                  SERVER_CONNECTION_TIMEOUT_S) */
	uint64_t cert_warn_s; /* /readyz warns when the certificate expires within this, seconds;
	                         0: never */
	/* Optional: one more line of /readyz (e.g. the watch cache's state), written into buf
	 * (cap bytes, NUL-terminated); it never changes the status. Called on the health
	 * thread; must be thread-safe and must not block. */
	void (*ready_note)(void *ctx, char *buf, size_t cap);
	void *ready_note_ctx;
	/* Optional: 1 when this replica can decide; 0 with a one-line reason in why (cap bytes,
	 * NUL-terminated) when every review it decided now would be refused, e.g. the
	 * GPUMemoryPolicy objects are not read yet: /readyz answers 503 and the ready gauge is 0,
	 * so the Service sends reviews to the other replicas. Called on the health thread (each
	 * /readyz and /metrics); must be thread-safe and must not block. */
	int (*ready_gate)(void *ctx, char *why, size_t cap);
	void *ready_gate_ctx;
	/* The CAs and names routes with client_auth accept (borrowed, must outlive the server);
	 * NULL: no route may set client_auth (server_start refuses). When set, every TLS
	 * handshake asks for a client certificate (tls_store_request_client_cert). */
	struct clientauth *client_auth;
};

struct server; /* opaque */

/*
 * Start both listeners. routes[0..n_routes) (1..SERVER_MAX_ROUTES) are copied; what they point
 * to, tls (already loaded; activated here for the TLS callback) and metrics are borrowed and
 * must outlive the server. NULL with a reason in err (e.g.
 * `--listen :8443: cannot listen (address in use?)`).
 */
struct server *server_start(const struct server_options *opt, const struct server_route *routes,
                            size_t n_routes, struct tls_store *tls, struct metrics *metrics,
                            char *err, size_t errlen);

/* Bound ports (useful with port 0). */
void server_ports(struct server *s, uint16_t *listen_port, uint16_t *health_port);
/* The scheduler listener's bound port, 0 when it is not started. */
uint16_t server_scheduler_port(struct server *s);

/* 1 while /readyz answers 200 (the ready gate asked now). Thread-safe. */
int server_ready(struct server *s);

/*
 * Drain and stop as described above: drain_ms of serving with readiness failed, then up to
 * shutdown_ms for in-flight requests, then stop. Blocks. Returns the number of requests still
 * in flight when the daemons were stopped (0 for a clean drain).
 */
unsigned server_shutdown(struct server *s, uint64_t drain_ms, uint64_t shutdown_ms);

/* Free a stopped server (server_shutdown first, or it stops abruptly). NULL is a no-op. */
void server_free(struct server *s);

#endif
