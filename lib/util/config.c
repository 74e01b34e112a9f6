/*
 * config: command-line parsing. See config.h for the contract.
 */
#include "config.h"

#include "capacity.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_GPU_RESOURCE "nvidia.com/gpu"
#define NS_PER_MS            1000000ull
/* Go's time.Duration is an int64 of ns: the same bound keeps us compatible. */
#define DURATION_MAX_NS 9223372036854775807ull

static const char usage_text[] =
    "Usage:\n"
    "  gpu-memory-guard serve [flags]   run the validating admission webhook\n"
    "  gpu-memory-guard certs [flags]   write a CA and a serving certificate (certs --help)\n"
    "  gpu-memory-guard report [flags]  every GPU node's memory; also `kubectl gpu-memory`\n"
    "                                   (report --help)\n"
    "  gpu-memory-guard version         print the version\n"
    "  gpu-memory-guard help            print this text\n"
    "\n"
    "A Kubernetes validating admission webhook that keeps each node's declared GPU memory\n"
    "(env GPU_MEMORY_LIMIT of its GPU pods) under a share of the node's HBM. It checks pod\n"
    "CREATE with spec.nodeName and pods/binding CREATE; everything else is allowed.\n"
    "\n"
    "Flags of serve (--flag value or --flag=value; durations as 500ms, 2s, 1m, 1h30m):\n"
    "  --listen ADDR:PORT            TLS admission endpoint, POST /validate (default :8443)\n"
    "  --tls-cert-file PATH          serving certificate chain, PEM (required); reloaded\n"
    "                                without restart when the file changes\n"
    "  --tls-key-file PATH           private key of the certificate, PEM (required); a new\n"
    "                                pair that does not load or match is refused and the\n"
    "                                old one kept\n"
    "  --cert-expiry-warning DUR     /readyz still answers 200 but adds a warning line when\n"
    "                                the serving certificate expires within DUR (default\n"
    "                                720h = 30 days; 0 disables)\n"
    "  --tls-reload-interval DUR     how often the certificate files are re-read (default 2s)\n"
    "  --health-listen ADDR:PORT     plain HTTP for /healthz, /readyz, /metrics\n"
    "                                (default :8080)\n"
    "  --scheduler-listen ADDR:PORT  also serve the kube-scheduler extender (POST\n"
    "                                /scheduler/filter, /scheduler/prioritize; always on\n"
    "                                --listen over TLS) over plain HTTP here, for a\n"
    "                                scheduler on the same pod network (default: off;\n"
    "                                needs --cache watch)\n"
    "  --client-ca-file PATH         CAs (PEM) whose client certificates the TLS listener\n"
    "                                accepts; reloaded like the serving certificate; the\n"
    "                                routes of --client-auth-routes then answer 403 to a\n"
    "                                connection without one (default: no client auth)\n"
    "  --client-allowed-names NAME[,NAME...]\n"
    "                                only certificates whose subject CN or a DNS SAN is\n"
    "                                one of these (repeatable; default: any from the CAs)\n"
    "  --client-auth-routes admission|extender[,...]\n"
    "                                routes that require a client certificate: admission\n"
    "                                (POST /validate), extender (/scheduler/*; then also\n"
    "                                403 on --scheduler-listen) (default with\n"
    "                                --client-ca-file: both)\n"
    "  --scheduler-score binpack|spread\n"
    "                                extender scores: binpack prefers the fullest node\n"
    "                                that fits, spread the emptiest (default binpack)\n"
    "  --scheduler-pass-nodes N      the extender's filter passes at most N of the nodes\n"
    "                                where a pod fits, the best-scored; its pods in flight\n"
    "                                then count on those only (default 0: every node)\n"
    "  --kubeconfig PATH             kubeconfig to reach the API server (default: the\n"
    "                                in-cluster service account)\n"
    "  --api-timeout DUR             total timeout of each API server call (default 2s);\n"
    "                                a failed or timed-out call denies the placement, and\n"
    "                                no call starts after 2 x DUR in one review: reviews\n"
    "                                are answered within 3 x DUR\n"
    "  --webhook-timeout DUR         the timeoutSeconds this webhook is registered with\n"
    "                                (1s to 30s; the chart and manifests pass it): at start,\n"
    "                                a warning when it is shorter than 3 x --api-timeout\n"
    "                                (default: not known, no check)\n"
    "  --threshold RATIO             share of a node's GPU memory that placements may\n"
    "                                declare, 0 < RATIO <= 1 (default 0.90); the node\n"
    "                                annotation gpu-memory-guard.io/threshold overrides it\n"
    "  --warn-threshold RATIO        allowed placements above this share carry a warning\n"
    "                                (default 0.80)\n"
    "  --mode enforce|warn|audit     enforce refuses what breaks the rules; warn admits\n"
    "                                everything enforce would refuse, with the refusal as\n"
    "                                a warning; audit admits it silently and records it\n"
    "                                (auditAnnotations, a metric, the log line); a whole-\n"
    "                                webhook rollout (default enforce)\n"
    "  --undeclared infer|refuse     infer (default): count a GPU container without\n"
    "                                GPU_MEMORY_LIMIT by what it says elsewhere (HAMi, KAI,\n"
    "                                its engine's flags, else its whole GPUs); refuse: deny\n"
    "                                it, as before\n"
    "  --engine-default ENGINE=RATIO the share of a card assumed when the engine's flag is\n"
    "                                absent (vllm 0.92, tgi 1, sglang 0.88); repeatable\n"
    "  --gpu-resource NAME           extended resource that counts as a GPU; repeatable\n"
    "                                (default nvidia.com/gpu)\n"
    "  --dra-driver NAME             DRA driver whose ResourceSlice devices are GPUs;\n"
    "                                repeatable or a comma list (default gpu.nvidia.com)\n"
    "  --exempt-namespace NS         never refuse pods of this namespace (they still count\n"
    "                                as usage); repeatable\n"
    "  --reservation-ttl DUR         how long an admitted placement counts before the API\n"
    "                                server shows the pod on its node (default 60s)\n"
    "  --unseen-reservation-ttl DUR  how long a pod CREATE's reservation (spec.nodeName set)\n"
    "                                counts while the pod is never seen: past the end of\n"
    "                                the API server's admission chain, the longest\n"
    "                                timeoutSeconds of the validating webhooks on pods\n"
    "                                (at most 30s) plus the pod's storage (default 35s;\n"
    "                                at most --reservation-ttl)\n"
    "  --reservation-grace DUR       (--cache off and the fallback path) an admitted\n"
    "                                placement its node's pod list still does\n"
    "                                not show after this is looked up; a deleted pod then\n"
    "                                stops counting (default 5s; raise it above the timeout\n"
    "                                of any slower validating webhook on pods)\n"
    "  --reservations local|shared   where admitted placements not yet visible are kept:\n"
    "                                local: in this process (one replica only); shared:\n"
    "                                in a Lease per GPU node that every replica reads and\n"
    "                                writes with resourceVersion preconditions, so two or\n"
    "                                more replicas never overfill a node (default local;\n"
    "                                the chart and manifests set shared)\n"
    "  --reservations-namespace NS   namespace of those Leases (default: the namespace of\n"
    "                                the in-cluster service account)\n"
    "  --cache watch|off             watch: placements read a watch cache of Nodes and\n"
    "                                Pods (LIST then WATCH), no API call per placement;\n"
    "                                off: every placement reads the API server (GET node,\n"
    "                                LIST its pods), for debugging (default watch)\n"
    "  --policies on|off             on: read GPUMemoryPolicy objects through the watch\n"
    "                                cache and apply them (docs/policies.md); GPU\n"
    "                                placements are refused until they are read; off:\n"
    "                                flags and node annotations only (default on with\n"
    "                                --cache watch; --cache off turns it off)\n"
    "  --cache-max-staleness DUR     while a watch is broken placements read the API\n"
    "                                server; the cache decides instead only if the API\n"
    "                                server cannot be asked and the watch broke less than\n"
    "                                DUR ago (default 5s)\n"
    "  --memory-warn-ratio RATIO     /readyz warns while the watch cache holds more than\n"
    "                                this share of the cgroup memory limit (default 0.80)\n"
    "  --log-level LEVEL             debug, info, warn or error (default info)\n"
    "  --threads N                   TLS and HTTP threads (default: CPUs, at least 2;\n"
    "                                CPUs: the container's CPU limit rounded up, from the\n"
    "                                cgroup, else the host's number of CPUs)\n"
    "  --workers N                   threads that run reviews and wait for the API server\n"
    "                                (default: 4 x CPUs, at least 8)\n"
    "  --connection-timeout DUR      close idle client connections after this long\n"
    "                                (default 120s, whole seconds); at start, a warning\n"
    "                                when it is not over 90s, the idle time after which\n"
    "                                the API server and kube-scheduler close theirs\n"
    "  --drain-timeout DUR           after SIGTERM: /readyz fails and reviews are still\n"
    "                                served this long (default 5s)\n"
    "  --shutdown-timeout DUR        then the wait for in-flight reviews before the\n"
    "                                process exits 0 (default 10s)\n"
    "  -h, --help                    print this text\n"
    "\n"
    "Exit status: 0 on success and after a SIGTERM drain, 1 when serving fails to start,\n"
    "2 on a bad command line.\n";

int config_keepalive_short(const struct config *cfg)
{
	return cfg->connection_timeout_s <= CONFIG_CLIENT_IDLE_S;
}

int config_timeout_short(const struct config *cfg, uint64_t *deadline_ms)
{
	uint64_t d = cfg->api_timeout_ms > UINT64_MAX / 3 ? UINT64_MAX : 3 * cfg->api_timeout_ms;

	*deadline_ms = d;
	return cfg->webhook_timeout_ms > 0 && cfg->webhook_timeout_ms < d;
}

const char *config_usage(void)
{
	return usage_text;
}

void config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->command = CONFIG_CMD_SERVE;
	cfg->listen.port = 8443;
	cfg->health_listen.port = 8080;
	cfg->tls_reload_interval_ms = 2000;
	cfg->threshold = 0.90;
	cfg->warn_threshold = 0.80;
	cfg->gpu_resources[0] = DEFAULT_GPU_RESOURCE;
	cfg->n_gpu_resources = 1;
	cfg->reservation_ttl_ms = 60000;
	cfg->reservation_grace_ms = 5000;
	cfg->unseen_reservation_ttl_ms = 35000;
	cfg->cache_watch = 1;
	cfg->policies = -1; /* on with the cache */
	cfg->cache_max_staleness_ms = 5000;
	cfg->memory_warn_ratio = 0.80;
	cfg->api_timeout_ms = 2000;
	cfg->log_level = "info";
	cfg->drain_timeout_ms = 5000;
	cfg->shutdown_timeout_ms = 10000;
	cfg->cert_expiry_warning_ms = 720ull * 3600 * 1000;
	cfg->connection_timeout_s = CONFIG_CONNECTION_TIMEOUT_S;
	cfg->undeclared_infer = 1;
	engine_defaults_init(&cfg->engine_defaults);
}

/* Nanoseconds per unit, or 0 for an unknown unit. Units as Go's time.ParseDuration. */
static uint64_t unit_ns(const char *u, size_t len)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {
	    {"ns", 1ull},           {"us", 1000ull},
	    {"\xc2\xb5s", 1000ull}, /* U+00B5 micro sign */
	    {"\xce\xbcs", 1000ull}, /* U+03BC Greek mu */
	    {"ms", 1000000ull},     {"s", 1000000000ull},
	    {"m", 60000000000ull},  {"h", 3600000000000ull},
	};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strlen(units[i].name) == len && memcmp(units[i].name, u, len) == 0)
			return units[i].ns;
	return 0;
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/*
 * One "<number><unit>" element of a duration at *p, added to *total_ns. Exact integer
 * arithmetic (128-bit intermediate); fractions of a nanosecond are dropped as Go does.
 */
static int duration_element(const char **p, unsigned __int128 *total_ns, char *err, size_t errlen)
{
	const char *s = *p;
	unsigned __int128 whole = 0, frac = 0, scale = 1;
	int digits = 0;

	while (is_digit(*s)) {
		whole = whole * 10 + (unsigned)(*s - '0');
		if (whole > DURATION_MAX_NS)
			goto range;
		s++;
		digits++;
	}
	if (*s == '.') {
		s++;
		while (is_digit(*s)) {
			if (scale < 1000000000000000000ull) { /* 18 digits: below 1 ns anyway */
				frac = frac * 10 + (unsigned)(*s - '0');
				scale *= 10;
			}
			s++;
			digits++;
		}
	}
	if (digits == 0) {
		snprintf(err, errlen, "expected a number at \"%s\"", s);
		return -1;
	}
	const char *u = s;
	while (*s && *s != '.' && !is_digit(*s))
		s++;
	if (s == u) {
		snprintf(err, errlen, "missing unit (use ns, us, ms, s, m or h, e.g. 2s)");
		return -1;
	}
	uint64_t ns = unit_ns(u, (size_t)(s - u));
	if (ns == 0) {
		snprintf(err, errlen, "unknown unit \"%.*s\" (use ns, us, ms, s, m or h)",
		         (int)(s - u), u);
		return -1;
	}
	*total_ns += whole * ns + frac * ns / scale;
	if (*total_ns > DURATION_MAX_NS)
		goto range;
	*p = s;
	return 0;
range:
	snprintf(err, errlen, "duration out of range");
	return -1;
}

int config_parse_engine_default(const char *v, struct engine_defaults *d, char *err, size_t errlen)
{
	const char *eq = strchr(v, '=');
	char engine[16];
	double r = 0;
	enum engine_kind k = ENGINE_NONE;

	if (eq != NULL && (size_t)(eq - v) < sizeof(engine)) {
		memcpy(engine, v, (size_t)(eq - v));
		engine[eq - v] = '\0';
		k = engine_kind_of(engine);
	}
	if (k == ENGINE_NONE || capacity_parse_ratio(eq + 1, &r) != 0) {
		snprintf(err, errlen,
		         "--engine-default: \"%.64s\" is not ENGINE=RATIO with ENGINE vllm, tgi "
		         "or sglang and 0 < RATIO <= 1 (e.g. vllm=0.9)",
		         v);
		return -1;
	}
	d->ppm[k] = engine_ratio_ppm(r);
	return 0;
}

int config_parse_duration(const char *s, uint64_t *ms, char *err, size_t errlen)
{
	unsigned __int128 total = 0;
	const char *p = s;

	if (s == NULL || *s == '\0') {
		snprintf(err, errlen, "empty duration");
		return -1;
	}
	if (strlen(s) > CONFIG_DURATION_MAX_LEN) {
		snprintf(err, errlen, "duration longer than %d characters",
		         CONFIG_DURATION_MAX_LEN);
		return -1;
	}
	if (*p == '-') {
		snprintf(err, errlen, "negative duration");
		return -1;
	}
	if (*p == '+')
		p++;
	if (strcmp(p, "0") == 0) {
		*ms = 0;
		return 0;
	}
	if (*p == '\0') {
		snprintf(err, errlen, "empty duration");
		return -1;
	}
	while (*p) {
		if (duration_element(&p, &total, err, errlen) != 0)
			return -1;
	}
	*ms = (uint64_t)((total + NS_PER_MS - 1) / NS_PER_MS);
	return 0;
}

static int parse_port(const char *s, uint16_t *port)
{
	char *end;
	if (*s == '\0' || !is_digit(*s))
		return -1;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

int config_parse_addr(const char *s, struct config_addr *out, char *err, size_t errlen)
{
	const char *colon, *host = s;
	size_t host_len;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL || close[1] != ':') {
			snprintf(err, errlen, "\"%s\" is not ADDR:PORT ([v6]:PORT for IPv6)", s);
			return -1;
		}
		host = s + 1;
		host_len = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || memchr(s, ':', (size_t)(colon - s)) != NULL) {
			snprintf(err, errlen,
			         "\"%s\" is not ADDR:PORT (e.g. :8443, 127.0.0.1:8443)", s);
			return -1;
		}
		host_len = (size_t)(colon - s);
	}
	if (host_len > CONFIG_HOST_MAX) {
		snprintf(err, errlen, "address longer than %d characters", CONFIG_HOST_MAX);
		return -1;
	}
	if (parse_port(colon + 1, &out->port) != 0) {
		snprintf(err, errlen, "\"%s\": port must be a number 0-65535", s);
		return -1;
	}
	memcpy(out->host, host, host_len);
	out->host[host_len] = '\0';
	return 0;
}

/* Flags that take a value; dispatched by set_flag(). */
enum flag_id {
	F_LISTEN,
	F_CERT,
	F_KEY,
	F_RELOAD,
	F_HEALTH,
	F_KUBECONFIG,
	F_API_TIMEOUT,
	F_THRESHOLD,
	F_WARN_THRESHOLD,
	F_MEMORY_WARN,
	F_MODE,
	F_GPU_RESOURCE,
	F_DRA_DRIVER,
	F_EXEMPT,
	F_TTL,
	F_LOG_LEVEL,
	F_THREADS,
	F_WORKERS,
	F_CONN_TIMEOUT,
	F_DRAIN,
	F_SHUTDOWN,
	F_WEBHOOK_TIMEOUT,
	F_CERT_WARN,
	F_GRACE,
	F_UNSEEN_TTL,
	F_CACHE,
	F_POLICIES,
	F_CACHE_STALENESS,
	F_RESERVATIONS,
	F_RESERVATIONS_NS,
	F_SCHED_LISTEN,
	F_SCHED_SCORE,
	F_SCHED_PASS,
	F_UNDECLARED,
	F_ENGINE_DEFAULT,
	F_CLIENT_CA,
	F_CLIENT_NAMES,
	F_CLIENT_ROUTES,
};

static const struct {
	const char *name;
	enum flag_id id;
} flags[] = {
    {"listen", F_LISTEN},
    {"tls-cert-file", F_CERT},
    {"tls-key-file", F_KEY},
    {"tls-reload-interval", F_RELOAD},
    {"health-listen", F_HEALTH},
    {"kubeconfig", F_KUBECONFIG},
    {"api-timeout", F_API_TIMEOUT},
    {"threshold", F_THRESHOLD},
    {"warn-threshold", F_WARN_THRESHOLD},
    {"mode", F_MODE},
    {"undeclared", F_UNDECLARED},
    {"engine-default", F_ENGINE_DEFAULT},
    {"gpu-resource", F_GPU_RESOURCE},
    {"dra-driver", F_DRA_DRIVER},
    {"exempt-namespace", F_EXEMPT},
    {"reservation-ttl", F_TTL},
    {"log-level", F_LOG_LEVEL},
    {"threads", F_THREADS},
    {"workers", F_WORKERS},
    {"connection-timeout", F_CONN_TIMEOUT},
    {"drain-timeout", F_DRAIN},
    {"shutdown-timeout", F_SHUTDOWN},
    {"webhook-timeout", F_WEBHOOK_TIMEOUT},
    {"cert-expiry-warning", F_CERT_WARN},
    {"reservation-grace", F_GRACE},
    {"unseen-reservation-ttl", F_UNSEEN_TTL},
    {"cache", F_CACHE},
    {"policies", F_POLICIES},
    {"cache-max-staleness", F_CACHE_STALENESS},
    {"memory-warn-ratio", F_MEMORY_WARN},
    {"reservations", F_RESERVATIONS},
    {"reservations-namespace", F_RESERVATIONS_NS},
    {"scheduler-listen", F_SCHED_LISTEN},
    {"scheduler-score", F_SCHED_SCORE},
    {"scheduler-pass-nodes", F_SCHED_PASS},
    {"client-ca-file", F_CLIENT_CA},
    {"client-allowed-names", F_CLIENT_NAMES},
    {"client-auth-routes", F_CLIENT_ROUTES},
};

/*
 * A duration flag within [min_ms, max_ms]; min_text/max_text say the bounds as a user writes
 * them. The bounds keep a typo from turning into a busy loop (--tls-reload-interval 1ns) or a
 * process that never exits (--drain-timeout 999999h).
 */
static int set_duration(const char *name, const char *v, uint64_t min_ms, const char *min_text,
                        uint64_t max_ms, const char *max_text, uint64_t *out, char *err,
                        size_t errlen)
{
	char why[128];
	uint64_t ms;
	if (config_parse_duration(v, &ms, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "--%s: \"%s\": %s", name, v, why);
		return -1;
	}
	if (ms < min_ms || ms > max_ms) {
		snprintf(err, errlen, "--%s: \"%s\" must be from %s to %s", name, v, min_text,
		         max_text);
		return -1;
	}
	*out = ms;
	return 0;
}

static int set_ratio(const char *name, const char *v, double *out, char *err, size_t errlen)
{
	if (capacity_parse_ratio(v, out) != 0) {
		snprintf(err, errlen, "--%s: \"%s\" is not a ratio 0 < r <= 1 (e.g. 0.9)", name, v);
		return -1;
	}
	return 0;
}

static int set_list(const char *name, const char *v, const char **list, size_t *n, size_t cap,
                    char *err, size_t errlen)
{
	if (*v == '\0') {
		snprintf(err, errlen, "--%s: empty value", name);
		return -1;
	}
	for (size_t i = 0; i < *n; i++)
		if (strcmp(list[i], v) == 0)
			return 0; /* repeated: harmless */
	if (*n >= cap) {
		snprintf(err, errlen, "--%s: at most %zu values", name, cap);
		return -1;
	}
	list[(*n)++] = v;
	return 0;
}

/* --client-allowed-names: comma-separated names appended (repeats kept once). */
static int set_client_names(struct config *cfg, const char *v, char *err, size_t errlen)
{
	const char *p = v;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == 0 || len >= CONFIG_CLIENT_NAME_MAX) {
			snprintf(
			    err, errlen,
			    "--client-allowed-names: \"%.64s\": a name is empty or longer than "
			    "%d bytes",
			    v, CONFIG_CLIENT_NAME_MAX - 1);
			return -1;
		}
		size_t i = 0;
		while (i < cfg->n_client_allowed_names &&
		       !(strlen(cfg->client_allowed_names[i]) == len &&
		         memcmp(cfg->client_allowed_names[i], p, len) == 0))
			i++;
		if (i == cfg->n_client_allowed_names) {
			if (i >= CONFIG_MAX_CLIENT_NAMES) {
				snprintf(err, errlen, "--client-allowed-names: at most %d names",
				         CONFIG_MAX_CLIENT_NAMES);
				return -1;
			}
			memcpy(cfg->client_allowed_names[i], p, len);
			cfg->client_allowed_names[i][len] = '\0';
			cfg->n_client_allowed_names++;
		}
		if (comma == NULL)
			return 0;
		p = comma + 1;
	}
}

/* --client-auth-routes: a comma-separated list of admission, extender (replaces the default). */
static int set_client_routes(struct config *cfg, const char *v, int *seen, char *err, size_t errlen)
{
	const char *p = v;
	*seen = 1;
	cfg->client_auth_admission = cfg->client_auth_extender = 0;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == 9 && memcmp(p, "admission", 9) == 0) {
			cfg->client_auth_admission = 1;
		} else if (len == 8 && memcmp(p, "extender", 8) == 0) {
			cfg->client_auth_extender = 1;
		} else {
			snprintf(err, errlen,
			         "--client-auth-routes: \"%.*s\" is not admission or extender (a "
			         "comma-separated list of them)",
			         (int)(len > 64 ? 64 : len), p);
			return -1;
		}
		if (comma == NULL)
			return 0;
		p = comma + 1;
	}
}

/* A whole number 0..max; zero says what 0 means, for the error. */
static int set_count(const char *name, const char *v, unsigned max, const char *zero, unsigned *out,
                     char *err, size_t errlen)
{
	char *end = NULL;
	errno = 0;
	unsigned long n = is_digit(*v) ? strtoul(v, &end, 10) : ULONG_MAX;
	if (!is_digit(*v) || errno != 0 || *end != '\0' || n > max) {
		snprintf(err, errlen, "--%s: \"%s\" is not a number 0-%u (0 = %s)", name, v, max,
		         zero);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

static int set_flag(struct config *cfg, enum flag_id id, const char *name, const char *v,
                    int *gpu_seen, int *routes_seen, char *err, size_t errlen)
{
	char why[160];
	uint64_t ms;

	switch (id) {
	case F_LISTEN:
	case F_HEALTH:
		if (config_parse_addr(v, id == F_LISTEN ? &cfg->listen : &cfg->health_listen, why,
		                      sizeof(why)) != 0) {
			snprintf(err, errlen, "--%s: %s", name, why);
			return -1;
		}
		return 0;
	case F_SCHED_LISTEN:
		if (config_parse_addr(v, &cfg->scheduler_listen, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "--%s: %s", name, why);
			return -1;
		}
		cfg->scheduler_listen_set = 1;
		return 0;
	case F_UNDECLARED:
		if (strcmp(v, "infer") != 0 && strcmp(v, "refuse") != 0) {
			snprintf(err, errlen, "--undeclared: \"%s\" is not infer or refuse", v);
			return -1;
		}
		cfg->undeclared_infer = strcmp(v, "infer") == 0;
		return 0;
	case F_ENGINE_DEFAULT:
		return config_parse_engine_default(v, &cfg->engine_defaults, err, errlen);
	case F_SCHED_SCORE:
		if (strcmp(v, "binpack") != 0 && strcmp(v, "spread") != 0) {
			snprintf(err, errlen, "--scheduler-score: \"%s\" is not binpack or spread",
			         v);
			return -1;
		}
		cfg->scheduler_spread = strcmp(v, "spread") == 0;
		return 0;
	case F_CERT:
	case F_KEY:
	case F_KUBECONFIG:
		if (*v == '\0') {
			snprintf(err, errlen, "--%s: empty path", name);
			return -1;
		}
		*(id == F_CERT  ? &cfg->tls_cert_file
		  : id == F_KEY ? &cfg->tls_key_file
		                : &cfg->kubeconfig) = v;
		return 0;
	case F_RELOAD:
		return set_duration(name, v, 100, "100ms", 3600000, "1h",
		                    &cfg->tls_reload_interval_ms, err, errlen);
	case F_API_TIMEOUT:
		/* the API server waits for a webhook at most 30 s */
		return set_duration(name, v, 10, "10ms", 30000, "30s", &cfg->api_timeout_ms, err,
		                    errlen);
	case F_TTL:
		return set_duration(name, v, 1000, "1s", 86400000, "24h", &cfg->reservation_ttl_ms,
		                    err, errlen);
	case F_DRAIN:
		return set_duration(name, v, 0, "0s", 3600000, "1h", &cfg->drain_timeout_ms, err,
		                    errlen);
	case F_SHUTDOWN:
		return set_duration(name, v, 0, "0s", 3600000, "1h", &cfg->shutdown_timeout_ms, err,
		                    errlen);
	case F_WEBHOOK_TIMEOUT: /* timeoutSeconds: 1 to 30 (the API server's bounds) */
		return set_duration(name, v, 1000, "1s", 30000, "30s", &cfg->webhook_timeout_ms,
		                    err, errlen);
	case F_CACHE:
		if (strcmp(v, "watch") != 0 && strcmp(v, "off") != 0) {
			snprintf(err, errlen, "--cache: \"%s\" is not watch or off", v);
			return -1;
		}
		cfg->cache_watch = strcmp(v, "watch") == 0;
		return 0;
	case F_POLICIES:
		if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) {
			snprintf(err, errlen, "--policies: \"%s\" is not on or off", v);
			return -1;
		}
		cfg->policies = strcmp(v, "on") == 0;
		return 0;
	case F_RESERVATIONS:
		if (strcmp(v, "local") != 0 && strcmp(v, "shared") != 0) {
			snprintf(err, errlen, "--reservations: \"%s\" is not local or shared", v);
			return -1;
		}
		cfg->reservations_shared = strcmp(v, "shared") == 0;
		return 0;
	case F_RESERVATIONS_NS:
		if (*v == '\0' || strlen(v) > 63) {
			snprintf(err, errlen,
			         "--reservations-namespace: \"%s\" is not a namespace "
			         "name (1-63 characters)",
			         v);
			return -1;
		}
		cfg->reservations_namespace = v;
		return 0;
	case F_CACHE_STALENESS:
		return set_duration(name, v, 100, "100ms", 3600000, "1h",
		                    &cfg->cache_max_staleness_ms, err, errlen);
	case F_GRACE:
		return set_duration(name, v, 1000, "1s", 3600000, "1h", &cfg->reservation_grace_ms,
		                    err, errlen);
	case F_UNSEEN_TTL:
		return set_duration(name, v, 1000, "1s", 86400000, "24h",
		                    &cfg->unseen_reservation_ttl_ms, err, errlen);
	case F_CERT_WARN:
		return set_duration(name, v, 0, "0s", 8760ull * 3600000, "8760h",
		                    &cfg->cert_expiry_warning_ms, err, errlen);
	case F_CONN_TIMEOUT:
		if (set_duration(name, v, 1000, "1s", 86400000, "24h", &ms, err, errlen) != 0)
			return -1;
		if (ms % 1000 != 0) { /* libmicrohttpd counts whole seconds */
			snprintf(err, errlen, "--%s: \"%s\" must be whole seconds", name, v);
			return -1;
		}
		cfg->connection_timeout_s = (unsigned)(ms / 1000);
		return 0;
	case F_THRESHOLD:
		return set_ratio(name, v, &cfg->threshold, err, errlen);
	case F_WARN_THRESHOLD:
		return set_ratio(name, v, &cfg->warn_threshold, err, errlen);
	case F_MEMORY_WARN:
		return set_ratio(name, v, &cfg->memory_warn_ratio, err, errlen);
	case F_MODE:
		if (strcmp(v, "enforce") != 0 && strcmp(v, "warn") != 0 &&
		    strcmp(v, "audit") != 0) {
			snprintf(err, errlen, "--mode: \"%s\" is not enforce, warn or audit", v);
			return -1;
		}
		cfg->mode_warn = strcmp(v, "warn") == 0;
		cfg->mode_audit = strcmp(v, "audit") == 0;
		return 0;
	case F_GPU_RESOURCE:
		if (!*gpu_seen) { /* the first explicit value replaces the default */
			cfg->n_gpu_resources = 0;
			*gpu_seen = 1;
		}
		return set_list(name, v, cfg->gpu_resources, &cfg->n_gpu_resources,
		                CONFIG_MAX_GPU_RESOURCES, err, errlen);
	case F_DRA_DRIVER:
		return dra_drivers_add(&cfg->dra_drivers, v, err, errlen);
	case F_EXEMPT:
		return set_list(name, v, cfg->exempt_namespaces, &cfg->n_exempt_namespaces,
		                CONFIG_MAX_EXEMPT, err, errlen);
	case F_LOG_LEVEL:
		if (strcmp(v, "debug") != 0 && strcmp(v, "info") != 0 && strcmp(v, "warn") != 0 &&
		    strcmp(v, "error") != 0) {
			snprintf(err, errlen,
			         "--log-level: \"%s\" is not debug, info, warn or error", v);
			return -1;
		}
		cfg->log_level = v;
		return 0;
	case F_CLIENT_CA:
		if (*v == '\0') {
			snprintf(err, errlen, "--client-ca-file: empty value");
			return -1;
		}
		cfg->client_ca_file = v;
		return 0;
	case F_CLIENT_NAMES:
		return set_client_names(cfg, v, err, errlen);
	case F_CLIENT_ROUTES:
		return set_client_routes(cfg, v, routes_seen, err, errlen);
	case F_THREADS:
		return set_count(name, v, CONFIG_MAX_THREADS, "automatic", &cfg->threads, err,
		                 errlen);
	case F_WORKERS:
		return set_count(name, v, CONFIG_MAX_WORKERS, "automatic", &cfg->workers, err,
		                 errlen);
	case F_SCHED_PASS:
		return set_count(name, v, CONFIG_MAX_PASS_NODES, "every node where the pod fits",
		                 &cfg->scheduler_pass_nodes, err, errlen);
	}
	snprintf(err, errlen, "--%s: internal error", name);
	return -1;
}

/* Parse the flags of serve, argv[first..argc). */
static int parse_serve(int argc, char **argv, int first, struct config *cfg, char *err,
                       size_t errlen)
{
	int gpu_seen = 0, routes_seen = 0;

	for (int i = first; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			cfg->command = CONFIG_CMD_HELP;
			return 0;
		}
		if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
			snprintf(err, errlen, "unexpected argument \"%s\" (flags start with --)",
			         arg);
			return CONFIG_EUSAGE;
		}
		const char *name = arg + 2, *eq = strchr(name, '='), *value;
		size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
		size_t f = 0, nflags = sizeof(flags) / sizeof(flags[0]);
		while (f < nflags && !(strlen(flags[f].name) == name_len &&
		                       memcmp(flags[f].name, name, name_len) == 0))
			f++;
		if (f == nflags) {
			snprintf(err, errlen, "unknown flag --%.*s (see gpu-memory-guard --help)",
			         (int)(name_len > 64 ? 64 : name_len), name);
			return CONFIG_EUSAGE;
		}
		if (eq != NULL) {
			value = eq + 1;
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			snprintf(err, errlen, "--%s needs a value", flags[f].name);
			return CONFIG_EUSAGE;
		}
		if (set_flag(cfg, flags[f].id, flags[f].name, value, &gpu_seen, &routes_seen, err,
		             errlen) != 0)
			return CONFIG_EUSAGE;
	}
	if (cfg->tls_cert_file == NULL || cfg->tls_key_file == NULL) {
		snprintf(err, errlen, "serve: --tls-cert-file and --tls-key-file are required");
		return CONFIG_EUSAGE;
	}
	if (cfg->policies == 1 && !cfg->cache_watch) {
		/* Policies are read through the watch cache's informer. */
		snprintf(err, errlen, "--policies on needs --cache watch");
		return CONFIG_EUSAGE;
	}
	if (cfg->policies == -1)
		cfg->policies = cfg->cache_watch;
	if (cfg->client_ca_file == NULL && (routes_seen || cfg->n_client_allowed_names > 0)) {
		snprintf(err, errlen, "--%s needs --client-ca-file",
		         routes_seen ? "client-auth-routes" : "client-allowed-names");
		return CONFIG_EUSAGE;
	}
	if (cfg->client_ca_file != NULL && !routes_seen)
		cfg->client_auth_admission = cfg->client_auth_extender = 1;
	if (cfg->scheduler_listen_set && !cfg->cache_watch) {
		/* The extender judges from the watch cache only: with --cache off it could only
		 * answer errors. */
		snprintf(err, errlen, "--scheduler-listen needs --cache watch");
		return CONFIG_EUSAGE;
	}
	return 0;
}

int config_parse_args(int argc, char **argv, struct config *cfg, char *err, size_t errlen)
{
	config_defaults(cfg);
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (argc < 2) {
		snprintf(err, errlen, "missing command (serve or version; see --help)");
		return CONFIG_EUSAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "serve") == 0)
		return parse_serve(argc, argv, 2, cfg, err, errlen);
	if (argc > 2 && (strcmp(cmd, "version") == 0 || strcmp(cmd, "help") == 0 ||
	                 strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)) {
		snprintf(err, errlen, "%s takes no arguments", cmd);
		return CONFIG_EUSAGE;
	}
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		cfg->command = CONFIG_CMD_VERSION;
		return 0;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		cfg->command = CONFIG_CMD_HELP;
		return 0;
	}
	snprintf(err, errlen, "unknown command \"%.64s\" (want serve or version; see --help)", cmd);
	return CONFIG_EUSAGE;
}
