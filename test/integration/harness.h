/*
 * harness: what every integration test (and the benchmark) needs around the REAL
 * gpu-memory-guard binary: a scratch directory, certificates, the API server test double
 * loaded with test/data, the binary started on free loopback ports, an HTTPS client (libcurl),
 * a raw TLS probe (OpenSSL) and AdmissionReview helpers.
 *
 * A "world" is one such set-up. Tests change w->cert_file / extra state before
 * world_start_gmg(). Not thread-safe per world, except the HTTP functions, which any thread may
 * call with its own CURL handle.
 *
 * Replicas: several gpu-memory-guard processes against one world (as a Deployment's replicas
 * share one API server). world_replica_init() makes a world that borrows another's scratch
 * directory, certificates, kubeconfig and API server test double, with its own log file; each
 * then runs its own process on its own ports through the same functions as any world
 * (world_start_gmg, world_stop_gmg, world_review, world_health_get, world_dump_log).
 */
#ifndef GMG_TEST_HARNESS_H
#define GMG_TEST_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

#include "apiserver_double.h"
#include "testcerts.h"

#define HARNESS_TOKEN        "test-double-token-0123456789"
#define HARNESS_PATHMAX      512
#define HARNESS_REPLICAS_MAX 8 /* replicas of one world */

typedef void CURL_HANDLE; /* a CURL *, kept opaque so tests need not include curl.h */

struct world {
	char dir[256];                    /* scratch directory, removed by world_free */
	char data_dir[HARNESS_PATHMAX];   /* test/data */
	char ca_file[HARNESS_PATHMAX];    /* CA of both servers (PEM) */
	char cert_file[HARNESS_PATHMAX];  /* webhook serving cert, as passed to the binary */
	char key_file[HARNESS_PATHMAX];   /* its key */
	char kubeconfig[HARNESS_PATHMAX]; /* points at the test double */
	char log_file[HARNESS_PATHMAX];   /* the binary's stdout + stderr */
	struct testcert *ca;
	struct testcert *webhook_cert; /* serial 1000 */
	struct apiserver_double *api;
	pid_t pid; /* the binary, 0 when not running */
	int port;  /* webhook (TLS) */
	int health_port;
	char url[128];        /* https://127.0.0.1:PORT/validate */
	char health_url[128]; /* http://127.0.0.1:HEALTH */
	/* --cache passed to the binary: "off" (world_init's default: these tests check the API
	 * path call by call) or "watch" (the watch cache; test_watch_cache.c). */
	const char *cache_mode;
	/* --undeclared for the binary; NULL: refuse, the strict mode the suite's declarations
	 * were written for (the fixtures' vllm pods would otherwise count vLLM's 0.92 of a card);
	 * "infer": test_infer.c */
	const char *undeclared;
	/* NULL, or a cgroup's cgroup.procs file the binary's process joins between fork and exec
	 * (test_memory_limit.c: the binary under a memory limit, the test outside it) */
	const char *cgroup_procs;
	/* NULL, or "NAME=VALUE" strings (NULL-terminated) added to the binary's environment
	 * (test_clock_skew.c: libfaketime's LD_PRELOAD and FAKETIME) */
	const char *const *env;
	/* 1: world_start_gmg returns as soon as /readyz answers, 503 included (a replica that
	 * stays not ready, test_dra_not_read.c); 0: once it answers 200 */
	int start_unready;
	/* Replicas (world_replica_init): in a replica, is_replica, the world it borrows from
	 * (NULL once that world is freed) and its index; in a world, its replicas. */
	int is_replica;
	int replica_index;
	struct world *parent;
	struct world *replicas[HARNESS_REPLICAS_MAX];
};

/* Binary path and test data directory: argv[1] (or $GMG_BINARY) and $GMG_TEST_DATA (or
 * argv[2]). Exits 2 with a message when missing. Call first in main(). */
void harness_init(int argc, char **argv);
const char *harness_binary(void);
const char *harness_data_dir(void);

/* Scratch dir, CA, webhook cert files, API test double (max_page items per list page; 0 for
 * none) loaded with every Node/Pod/PodList of test/data plus the fixture binding's pod
 * inference/llama-8b-6d5f9c7b8-x2k4q (unscheduled, 24Gi), kubeconfig. 0 / -1 (message
 * printed). */
int world_init(struct world *w, unsigned max_page);

/* Start the binary: serve with --listen/--health-listen on fresh loopback ports, the TLS files,
 * the kubeconfig, then extra (NULL-terminated; may be NULL), and wait until /readyz is 200
 * (timeout_ms). 0 / -1 (log tail printed). */
int world_start_gmg(struct world *w, const char *const *extra, unsigned timeout_ms);

/* Send sig and wait up to timeout_ms for the exit: returns the wait status, or -1 on timeout
 * (then the process is killed). */
int world_stop_gmg(struct world *w, int sig, unsigned timeout_ms);

/* Print the last lines of the binary's log to stderr (for failing assertions). */
void world_dump_log(const struct world *w);

/* Kill the binary if running, free the double and the certs, remove the scratch dir. A
 * replica: kill its binary only. A world with replicas still running: their binaries are
 * killed too (and the replicas left with nothing to start: free them). */
void world_free(struct world *w);

/*
 * Make r a replica of world w (initialized, not itself a replica): the same scratch directory,
 * CA, serving certificate and key, kubeconfig and API server test double (borrowed: w must
 * outlive r's use), the same cache_mode; log file DIR/gpu-memory-guard-r<index>.log. Start it
 * with world_start_gmg(r, ...): its own free loopback ports, its own r->url / r->health_url.
 * world_stop_gmg(r, SIGKILL, ms) kills it without warning, as a node failure would; started
 * again, it appends to its log. Free with world_free(r) (before or after w). 0, or -1 (index
 * out of 0..HARNESS_REPLICAS_MAX-1 or taken, w not a world).
 */
int world_replica_init(struct world *r, struct world *w, int index);

/* Add a GPU node to the double: GFD labels nvidia.com/gpu.memory=mem_mib (MiB per GPU) and
 * nvidia.com/gpu.count=count, allocatable nvidia.com/gpu=count. 0 / -1. */
int world_add_node(struct world *w, const char *name, long mem_mib, int count);

/* Add a GPU pod to the double: the fixture's unscheduled pod renamed ns/name, declaring
 * GPU_MEMORY_LIMIT=limit (a quantity string), on node (NULL: unscheduled). 0 / -1. */
int world_add_pod(struct world *w, const char *ns, const char *name, const char *limit,
                  const char *node);
/* The same with metadata.labels replaced by labels_json (a JSON object; NULL: the fixture's). */
int world_add_pod_labeled(struct world *w, const char *ns, const char *name, const char *limit,
                          const char *node, const char *labels_json);

/* The metadata.uid world_add_pod gives pod ns/name ("uid-NS-NAME"), and that a Binding review
 * of a renamed pod carries (harness_binding_review). */
#define HARNESS_UID_MAX 384
void harness_pod_uid(const char *ns, const char *name, char *buf, size_t cap);

/* A pod CREATE review (the nodename fixture) for ns "inference", pod name, GPU_MEMORY_LIMIT
 * limit, spec.nodeName node, request.uid uid, dryRun as given. Caller frees. */
char *harness_pod_review(const char *uid, const char *name, const char *limit, const char *node,
                         int dry_run);

/* A pods/binding CREATE review (the binding fixture) for inference/name onto node. */
char *harness_binding_review(const char *uid, const char *name, const char *node);

/* ---- HTTP (libcurl) ---- */
struct http_req {
	const char *method; /* "GET", "POST", ...; default GET, or POST with a body */
	const char *url;
	const char *ca_file; /* https: trust this CA (peer and host always verified) */
	const char *body;    /* may be NULL; sent with POST and PUT (DELETE, PATCH: when set) */
	size_t body_len;
	const char *content_type;     /* NULL: no Content-Type header at all */
	int chunked;                  /* send the body with Transfer-Encoding: chunked */
	long timeout_ms;              /* default 10000 */
	const char *bearer;           /* Authorization: Bearer token, or NULL */
	int expect_continue;          /* send Expect: 100-continue (default: no Expect header) */
	const char *client_cert_file; /* TLS client certificate (PEM), or NULL */
	const char *client_key_file;
};

struct http_resp {
	long code;   /* 0 when no HTTP answer */
	int curl_rc; /* CURLcode */
	char *body;  /* NUL-terminated, caller frees (http_resp_free) */
	size_t len;
	double seconds;  /* total time */
	double uploaded; /* request body bytes sent */
	long connects;   /* new connections this request opened (0 on a reused keep-alive one) */
	char error[256];
};

/* One request. handle: a CURL* to reuse (keep-alive) or NULL for a fresh one. Returns 0 when
 * an HTTP answer came back (any code), -1 otherwise (resp->error says why). */
int http_do(CURL_HANDLE *handle, const struct http_req *req, struct http_resp *resp);
void http_resp_free(struct http_resp *r);
CURL_HANDLE *http_handle_new(void);
void http_handle_free(CURL_HANDLE *h);

/* GET health_url + path; returns the HTTP code (0 when unreachable); body optional. */
long world_health_get(const struct world *w, const char *path, char **body);

/* ---- AdmissionReview helpers ---- */

/* Read a whole file (test/data name relative to the data dir when not absolute). NULL on
 * error. Caller frees. */
char *harness_read_file(const char *name, size_t *len);

/* A fixture review with request.uid replaced (and, when not NULL, request.name /
 * object.metadata.name and the Binding target node replaced). Caller frees. */
char *harness_review_from_fixture(const char *fixture, const char *uid, const char *pod_name,
                                  const char *node);

struct review_answer {
	int well_formed; /* apiVersion admission.k8s.io/v1, kind AdmissionReview, response */
	char uid[160];
	int allowed;
	int code; /* response.status.code, 0 when absent */
	char message[2048];
	char warnings[2048]; /* all warnings joined by " | " */
};

/* Parse a webhook answer body. 0 when it is JSON with a response object, -1 otherwise. */
int harness_parse_review(const char *body, struct review_answer *a);

/* POST body to the world's webhook (fresh connection); fills resp and, when the answer is a
 * review, *a. Returns 0 when HTTP 200 and a review came back. */
int world_review(const struct world *w, const char *body, struct http_resp *resp,
                 struct review_answer *a);

/* A keep-alive connection to a world's webhook for the concurrency tests: opened by
 * review_client_open(), which sends a warm-up review so that the TLS handshake is done before
 * the caller waits at its barrier (the barrier then releases the placements themselves). */
struct review_client {
	CURL_HANDLE *h;
	struct http_req rq;
};

/* Open c to w's webhook with requests of timeout_ms each, and send the warm-up review. */
void review_client_open(struct review_client *c, const struct world *w, long timeout_ms);

/* POST body on c: *code the HTTP status (0 when no answer), err the transport's error ("" when
 * none; errlen bytes), *a the parsed answer when 200 (else untouched). */
void review_client_send(struct review_client *c, const char *body, long *code, char *err,
                        size_t errlen, struct review_answer *a);

void review_client_close(struct review_client *c);

/* ---- raw TLS (OpenSSL) ---- */

/* Handshake with 127.0.0.1:port allowing only [min_version, max_version] (TLS1_VERSION ...
 * TLS1_3_VERSION; security level 0 so the client itself never refuses old protocols). On
 * success 0 and the served leaf's serial and notAfter; -1 with err otherwise. */
int harness_tls_probe(int port, int min_version, int max_version, long *serial,
                      long long *not_after, char *err, size_t errlen);

/* A free loopback TCP port (bind port 0, read it, close). */
int harness_free_port(void);

/* Monotonic time in seconds. */
double harness_now(void);

/* Value of the first Prometheus sample of metric name whose line contains label (a substring
 * such as decision="deny"; NULL: any), or the sum over all such lines when sum is 1. -1 when
 * absent. */
double harness_metric(const char *metrics, const char *name, const char *label, int sum);

#endif
