/*
 * config: the command line of gpu-memory-guard.
 *
 *   gpu-memory-guard serve [flags]    run the admission webhook
 *   gpu-memory-guard version          print the version
 *   gpu-memory-guard help | --help    print the usage
 * (`gpu-memory-guard certs` has flags of its own: main dispatches it to lib/certgen before
 * config_parse_args, which would call it an unknown command.)
 *
 * Flags are written `--name value` or `--name=value`. Durations are written as Kubernetes
 * tools (Go's time.ParseDuration) write them: "500ms", "2s", "1m", "1h30m", "1.5s"; units
 * ns us µs ms s m h; "0" alone is allowed. Ratios are 0 < r <= 1 ("0.9").
 *
 * Strings in struct config point into argv (borrowed: argv outlives the process's use of the
 * config) or to static defaults; nothing is allocated, nothing needs freeing. Parsing never
 * prints and never exits: on a bad command line it returns CONFIG_EUSAGE and a one-line
 * reason that main prints before exiting with status 2.
 *
 * Not thread-safe while parsing; the result is read-only afterwards.
 */
#ifndef GMG_CONFIG_H
#define GMG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "dra.h"
#include "engine.h"

#define CONFIG_MAX_GPU_RESOURCES 8  /* = DEMAND_MAX_RESOURCES */
#define CONFIG_MAX_EXEMPT        64 /* --exempt-namespace occurrences */
#define CONFIG_HOST_MAX          255
#define CONFIG_ERR_MAX           256   /* enough for any message config writes */
#define CONFIG_MAX_THREADS       256   /* --threads */
#define CONFIG_MAX_WORKERS       1024  /* --workers */
#define CONFIG_MAX_PASS_NODES    15000 /* --scheduler-pass-nodes (EXTENDER_MAX_NODES) */
#define CONFIG_DURATION_MAX_LEN  64
#define CONFIG_MAX_CLIENT_NAMES  32  /* --client-allowed-names entries (CLIENTAUTH_MAX_NAMES) */
#define CONFIG_CLIENT_NAME_MAX   256 /* bytes of one, NUL included (CLIENTAUTH_NAME_MAX) */

#define CONFIG_EUSAGE (-1) /* bad command line: err holds one line */

enum config_command {
	CONFIG_CMD_SERVE = 0,
	CONFIG_CMD_VERSION = 1,
	CONFIG_CMD_HELP = 2,
};

/* A listen address: "ADDR:PORT", ":PORT" (all addresses), "[v6]:PORT". Port 0 asks the
 * kernel for a free port (tests). */
struct config_addr {
	char host[CONFIG_HOST_MAX + 1]; /* "" = all addresses; brackets stripped */
	uint16_t port;
};

struct config {
	enum config_command command;
	struct config_addr listen;        /* --listen, default :8443 (TLS) */
	struct config_addr health_listen; /* --health-listen, default :8080 (plain HTTP) */
	const char *tls_cert_file;        /* --tls-cert-file, required for serve */
	const char *tls_key_file;         /* --tls-key-file, required for serve */
	uint64_t tls_reload_interval_ms;  /* --tls-reload-interval, default 2s (> 0) */
	const char *kubeconfig;           /* --kubeconfig; NULL = in-cluster service account */
	double threshold;                 /* --threshold, ratio (0,1], default 0.90 */
	double warn_threshold;            /* --warn-threshold, ratio (0,1], default 0.80 */
	double memory_warn_ratio;         /* --memory-warn-ratio, ratio (0,1], default 0.80: the
	                                     /readyz warning's share of the memory limit */
	int mode_warn;                    /* --mode warn: 1; enforce (default) and audit: 0 */
	int mode_audit;                   /* --mode audit: 1; enforce and warn: 0 */
	const char *gpu_resources[CONFIG_MAX_GPU_RESOURCES]; /* --gpu-resource, default
	                                                        nvidia.com/gpu */
	size_t n_gpu_resources;
	struct dra_drivers dra_drivers; /* --dra-driver, repeatable or a comma list: the DRA drivers
	                                   whose devices are GPUs (n 0: gpu.nvidia.com) */
	const char *exempt_namespaces[CONFIG_MAX_EXEMPT]; /* --exempt-namespace */
	size_t n_exempt_namespaces;
	uint64_t reservation_ttl_ms;   /* --reservation-ttl, default 60s (> 0) */
	uint64_t reservation_grace_ms; /* --reservation-grace, default 5s: an admitted placement
	                                  the node's pod list does not show after this is
	                                  looked up (deleted pods stop counting) */
	uint64_t unseen_reservation_ttl_ms; /* --unseen-reservation-ttl, default 35s: a pod
	                                       CREATE's reservation whose pod is never seen
	                                       (the webhook uses the shorter of it and
	                                       reservation_ttl_ms) */
	int reservations_shared;            /* --reservations shared: 1; local (default): 0 */
	const char *reservations_namespace; /* --reservations-namespace: where the shared records
	                                       (Leases) live; NULL: main reads the in-cluster
	                                       service account's namespace */
	int cache_watch;                    /* --cache watch (default): 1; off: 0 */
	int policies; /* --policies: 1 on, 0 off; after parsing never -1 (default: cache_watch) */
	uint64_t cache_max_staleness_ms; /* --cache-max-staleness, default 5s: placements read
	                                    the API server while the cache's watch has been
	                                    broken longer than this */
	uint64_t api_timeout_ms;         /* --api-timeout, default 2s (> 0) */
	uint64_t webhook_timeout_ms;     /* --webhook-timeout: the registered timeoutSeconds,
	                                    1s..30s; 0 (default): not known */
	const char *log_level;           /* --log-level debug|info|warn|error, default info */
	uint64_t drain_timeout_ms;       /* --drain-timeout, default 5s: after SIGTERM, /readyz
	                                    fails and requests are still served this long */
	uint64_t cert_expiry_warning_ms; /* --cert-expiry-warning, default 720h (30 days):
	                                    /readyz warns when the certificate expires sooner */
	uint64_t shutdown_timeout_ms;    /* --shutdown-timeout, default 10s: then the wait for
	                                    in-flight requests before closing connections */
	unsigned threads; /* --threads, 0 (default) = CPUs, min 2 (CPUs: the cgroup's CPU limit
	                     rounded up, else the host's; server.h) */
	unsigned workers; /* --workers, 0 (default) = 4 x CPUs, min 8 */
	unsigned connection_timeout_s;       /* --connection-timeout, idle connection, seconds
	                                        (default CONFIG_CONNECTION_TIMEOUT_S) */
	int scheduler_listen_set;            /* --scheduler-listen given: start the plain-HTTP
	                                        scheduler extender listener (needs --cache watch) */
	struct config_addr scheduler_listen; /* --scheduler-listen, no default (off) */
	int scheduler_spread;                /* --scheduler-score spread: 1; binpack (default): 0 */
	unsigned scheduler_pass_nodes;       /* --scheduler-pass-nodes, 0 (default): every node
	                                        where the pod fits (extender.h, pass_nodes) */
	int undeclared_infer; /* --undeclared infer (default): 1, read every demand source
	                         (demand.h); refuse: 0, GPU_MEMORY_LIMIT only */
	struct engine_defaults engine_defaults; /* --engine-default ENGINE=RATIO, repeatable;
	                                          default engine.h's table */
	const char *client_ca_file; /* --client-ca-file: CAs of accepted client certificates
	                               (clientauth.h); NULL: no client authentication */
	/* --client-allowed-names NAME[,NAME...], repeatable: a client certificate's CN or a DNS
	 * SAN must be one of them; none: any certificate from the CAs. Needs --client-ca-file. */
	char client_allowed_names[CONFIG_MAX_CLIENT_NAMES][CONFIG_CLIENT_NAME_MAX];
	size_t n_client_allowed_names;
	/* --client-auth-routes admission|extender[,...]: the routes that require a client
	 * certificate; with --client-ca-file and without this flag, both. Needs --client-ca-file.
	 */
	int client_auth_admission; /* POST /validate */
	int client_auth_extender;  /* POST /scheduler/filter and /scheduler/prioritize */
};

/* Fill *cfg with the defaults (command SERVE). */
void config_defaults(struct config *cfg);

/*
 * Parse the whole process command line (argv[0] is the program). Returns 0 with cfg filled
 * (cfg->command says what to do), or CONFIG_EUSAGE with a one-line reason in err, e.g.
 * `--threshold: "1.5" is not a ratio 0 < r <= 1`. argv is borrowed and must outlive cfg.
 */
int config_parse_args(int argc, char **argv, struct config *cfg, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* --engine-default's value ENGINE=RATIO into d (the webhook's and the report's flag). 0, or -1
 * with err naming the flag. */
int config_parse_engine_default(const char *v, struct engine_defaults *d, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Parse a Kubernetes-style duration into milliseconds, rounding sub-millisecond remainders up
 * ("500us" -> 1). Returns 0, or -1 with a reason in err (negative, unknown unit, overflow,
 * empty). Pure and thread-safe.
 */
int config_parse_duration(const char *s, uint64_t *ms, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Parse "ADDR:PORT" as described for struct config_addr. 0 or -1 with a reason in err. */
int config_parse_addr(const char *s, struct config_addr *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Keep-alive. The API server's webhook client and kube-scheduler's extender client close a
 * connection idle for CONFIG_CLIENT_IDLE_S seconds: the IdleConnTimeout of Go's
 * http.DefaultTransport, which k8s.io/apimachinery/pkg/util/net SetTransportDefaults gives
 * them (client-go transport/cache.go, kube-scheduler's extender.go makeTransport). A server
 * that closes an idle connection first races the client: a review written on it as it closes
 * gets no answer, and the client, which does not resend a POST it has written, fails it with
 * "Post ...: EOF" (a webhook call error: the failurePolicy's answer). Measured on 2026-12-06,
 * bursts of 45 POSTs over a pool of 25 connections, gaps around a 2 s server idle timeout:
 * 45 of 1,350 failed (30 through a TCP proxy); with the client's idle timeout under the
 * server's, 0 of 1,350. So the webhook's idle timeout defaults over the clients'.
 */
#define CONFIG_CLIENT_IDLE_S        90
#define CONFIG_CONNECTION_TIMEOUT_S 120

/* 1 when --connection-timeout is not over CONFIG_CLIENT_IDLE_S (the race above), else 0.
 * Pure. */
int config_keepalive_short(const struct config *cfg);

/*
 * A review is answered within 3 x --api-timeout of its arrival (webhook.h); the API server
 * gives up after the timeoutSeconds it was registered with (--webhook-timeout), and then the
 * user sees "context deadline exceeded" instead of the webhook's explained denial. Returns 1
 * when --webhook-timeout is given and shorter than that deadline, else 0; *deadline_ms gets
 * the deadline (ms) either way. Pure.
 */
int config_timeout_short(const struct config *cfg, uint64_t *deadline_ms);

/* The --help text (static, ends with a newline). */
const char *config_usage(void);

#endif
