/*
 * server: the HTTPS admission listener and the plain-HTTP health listener (libmicrohttpd).
 *
 * Admission listener (TLS 1.2/1.3 only, certificate from tls.h's callback, hot-reloaded):
 *   POST /validate with Content-Type application/json and a body of at most
 *   ADMISSION_BODY_MAX bytes -> webhook_prepare() / webhook_finish() -> 200 application/json.
 *   Other paths 404, other methods on /validate 405 (Allow: POST), a bigger body 413 (at once
 *   when Content-Length says so; chunked bodies are discarded and answered 413 at the end),
 *   another Content-Type 400, a body that is not an AdmissionReview with request.uid 400 with
 *   the reason. Keep-alive; idle connections close after the connection timeout.
 *   Threads: an MHD thread pool (epoll) does the I/O and TLS, decodes each review and answers
 *   at once those that need no API call; placements are finished on a pool of worker threads
 *   (the connection is suspended meanwhile), because they wait for the API server and a
 *   waiting MHD thread would stall every connection it owns. A placement's API budget counts
 *   from the request's arrival, queue wait included.
 * Health listener: GET /healthz (200 while the process runs), /readyz (200 once the
 *   certificate is loaded and the admission listener is up; 503 once draining), /metrics
 *   (Prometheus text).
 *
 * Shutdown (server_shutdown): readiness fails first; the admission listener keeps serving for
 * drain_ms so that the endpoints controller and the API server stop sending; then it stops
 * accepting (MHD_quiesce_daemon; the listen socket is closed, so new connections are refused
 * at once), in-flight reviews get up to shutdown_ms to finish, and both daemons stop.
 *
 * Not thread-safe: one thread owns a struct server (main). The request handlers run on MHD's
 * threads and only touch thread-safe modules.
 */
#ifndef GMG_SERVER_H
#define GMG_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct webhook;
struct metrics;
struct tls_store;

#define SERVER_PATH_VALIDATE    "/validate"
#define SERVER_TLS_PRIORITIES   "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define SERVER_CONNECTION_LIMIT 4096 /* concurrent admission connections */
#define SERVER_PER_IP_LIMIT     0    /* unlimited: the API server is one client with many */
#define SERVER_ERR_MAX          256
#define SERVER_QUEUE_MAX        4096 /* placements waiting for a worker; past it, denied at once */
#define SERVER_MAX_WORKERS      1024

struct server_options {
	const char *listen_host; /* "" = all addresses (dual-stack when available) */
	uint16_t listen_port;    /* 0 = any free port (see server_ports) */
	const char *health_host;
	uint16_t health_port;
	unsigned threads;              /* admission thread pool size; 0 = CPUs (min 2) */
	unsigned workers;              /* review worker threads; 0 = 4 x CPUs (min 8) */
	unsigned connection_timeout_s; /* idle connection timeout, seconds (> 0) */
	uint64_t cert_warn_s; /* /readyz warns when the certificate expires within this, seconds;
	                         0: never */
	/* Optional: one more line of /readyz (e.g. the watch cache's state), written into buf
	 * (cap bytes, NUL-terminated); it never changes the status. Called on the health
	 * thread; must be thread-safe and must not block. */
	void (*ready_note)(void *ctx, char *buf, size_t cap);
	void *ready_note_ctx;
};

struct server; /* opaque */

/*
 * Start both listeners. webhook, tls (already loaded; activated here for the TLS callback)
 * and metrics are borrowed and must outlive the server. NULL with a reason in err (e.g.
 * `--listen :8443: cannot listen (address in use?)`).
 */
struct server *server_start(const struct server_options *opt, struct webhook *webhook,
                            struct tls_store *tls, struct metrics *metrics, char *err,
                            size_t errlen);

/* Bound ports (useful with port 0). */
void server_ports(struct server *s, uint16_t *listen_port, uint16_t *health_port);

/* 1 while /readyz answers 200. Thread-safe. */
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
