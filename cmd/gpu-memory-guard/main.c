/*
 * gpu-memory-guard: parse flags, set up logging and signals, wire the modules, run until
 * SIGTERM/SIGINT, drain, exit 0. No logic here: everything is in lib/.
 *
 * Exit status: 0 (done, or drained after a signal), 1 (serving failed to start), 2 (bad
 * command line: one line on stderr).
 */
#include "cache.h"
#include "capfile.h"
#include "certgen.h"
#include "clientauth.h"
#include "config.h"
#include "extender.h"
#include "drastore.h"
#include "informer.h"
#include "kube.h"
#include "kubeconfig.h"
#include "ledger.h"
#include "memlimit.h"
#include "policies.h"
#include "policystatus.h"
#include "log.h"
#include "metrics.h"
#include "monotime.h"
#include "report.h"
#include "report_cli.h"
#include "serverclock.h"
#include "server.h"
#include "shared.h"
#include "tls.h"
#include "webhook.h"

#include <ctype.h>
#include <libgen.h>
#include <malloc.h>
#include <stdatomic.h>
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef GMG_VERSION
#define GMG_VERSION "unknown"
#endif

#define EXIT_START_FAILED 1
#define EXIT_USAGE        2
/* glibc malloc arenas for serve: its default, 8 per core, lets each of the HTTP threads,
 * workers and informer threads keep an arena of its own with free chunks in it (the README's
 * 8 MiB of arenas at 150,000 pods). Two keep the LIST's parsing and the reviews apart; the
 * speed cost is in docs/benchmark.md. MALLOC_ARENA_MAX in the environment wins (glibc reads
 * it; serve then leaves it). */
#define SERVE_MALLOC_ARENAS 2

static size_t ledger_gauge(void *ctx)
{
	return ledger_size(ctx);
}

static size_t ledger_unseen(void *ctx)
{
	return (size_t)ledger_unseen_dropped(ctx);
}

/* On the certificate poller's thread: re-read --client-ca-file (logs by itself). */
static void reload_client_ca(void *ctx)
{
	char err[CLIENTAUTH_WHY_MAX];
	(void)clientauth_reload(ctx, err, sizeof(err));
}

/* Where the watch cache reports pods gone before they showed up on their node. */
struct gone_sink {
	struct ledger *ledger;
	struct shared *shared; /* NULL: --reservations local */
	/* Set once made, after the informer's threads started; freed after they stopped. */
	struct extender *_Atomic extender;
};

static void pod_gone(void *ctx, const char *key, const char *uid)
{
	struct gone_sink *g = ctx;
	if (ledger_size(g->ledger) > 0) /* most pods end with nothing reserved anywhere */
		ledger_forget(g->ledger, key, uid);
	if (g->shared != NULL)
		shared_forget(g->shared, uid);
	extender_forget(atomic_load(&g->extender), uid);
}

/* A Binding admitted with its reservation (webhook.h, binding_admitted; ctx the gone_sink): the
 * reservation counts the pod on its node now, so its extender holds elsewhere end. */
static void binding_admitted(void *ctx, const char *uid)
{
	struct gone_sink *g = ctx;
	extender_binding_admitted(atomic_load(&g->extender), uid);
}

/* shared_clock_fn over the API server's clock (serverclock.h), ctx the serverclock. */
static int api_server_clock(void *ctx, int latest, uint64_t *out)
{
	return serverclock_now_ms(ctx, latest ? SERVERCLOCK_LATEST : SERVERCLOCK_EARLIEST,
	                          monotime_ms(), out);
}

/* The API client from --kubeconfig, else the in-cluster service account. */
static struct kube_client *make_kube(const struct config *cfg, struct metrics *m)
{
	struct kube_config kc;
	struct kube_client *c = NULL;
	char err[512];
	int rc = cfg->kubeconfig ? kubeconfig_load(cfg->kubeconfig, &kc, err, sizeof(err))
	                         : kubeconfig_in_cluster(NULL, &kc, err, sizeof(err));
	if (rc != 0) {
		log_fields(LOG_ERROR, "cannot configure the API client",
		           (struct log_field[]){LOG_STR("kubeconfig", cfg->kubeconfig),
		                                LOG_STR("error", err), LOG_END});
		return NULL;
	}
	/* A webhook replica authenticates as its service account; plugins are the report's. */
	if (kc.exec != NULL) {
		log_fields(
		    LOG_ERROR, "cannot configure the API client",
		    (struct log_field[]){
		        LOG_STR("kubeconfig", cfg->kubeconfig),
		        LOG_STR("error", "its user has an exec credential plugin, which serve "
		                         "does not run (only report and kubectl gpu-memory "
		                         "do): give serve a token, tokenFile or client "
		                         "certificate, or run it in the cluster"),
		        LOG_END});
		kubeconfig_free(&kc);
		return NULL;
	}
	c = kube_client_new(&kc, (long)cfg->api_timeout_ms, metrics_api_call, m, err, sizeof(err));
	if (c == NULL)
		log_fields(LOG_ERROR, "cannot create the API client",
		           (struct log_field[]){LOG_STR("error", err), LOG_END});
	else
		log_fields(LOG_INFO, "API server",
		           (struct log_field[]){LOG_STR("server", kc.server), LOG_END});
	kubeconfig_free(&kc);
	return c;
}

/* --reservations-namespace, else the in-cluster service account's namespace (as client-go
 * reads it). 0 with buf set, or -1 (logged). */
static int reservations_namespace(const struct config *cfg, char *buf, size_t cap)
{
	char err[512], *text = NULL;
	size_t len = 0;

	if (cfg->reservations_namespace != NULL) {
		snprintf(buf, cap, "%s", cfg->reservations_namespace);
		return 0;
	}
	if (capfile_read(KUBECONFIG_SA_DIR "/namespace", 256, CAPFILE_REGULAR, &text, &len, err,
	                 sizeof(err)) != 0) {
		log_fields(LOG_ERROR,
		           "--reservations shared needs --reservations-namespace outside a pod",
		           (struct log_field[]){LOG_STR("error", err), LOG_END});
		return -1;
	}
	while (len > 0 && isspace((unsigned char)text[len - 1]))
		text[--len] = '\0';
	snprintf(buf, cap, "%s", text);
	free(text);
	if (len == 0 || len >= cap) {
		log_msg(LOG_ERROR, "the service account's namespace file is empty or too long: set "
		                   "--reservations-namespace");
		return -1;
	}
	return 0;
}

/* The cgroup's memory limit in bytes, 0 when none or unreadable (logged either way). */
static uint64_t memory_limit(void)
{
	char err[MEMLIMIT_ERR_MAX], where[MEMLIMIT_WHERE_MAX] = "";
	uint64_t bytes = 0;
	int rc = memlimit_read(MEMLIMIT_CGROUP_ROOT, MEMLIMIT_PROC_CGROUP, &bytes, where, err,
	                       sizeof(err));

	if (rc < 0) {
		log_fields(LOG_WARN, "cannot read the cgroup memory limit",
		           (struct log_field[]){LOG_STR("error", err), LOG_END});
		return 0;
	}
	if (rc == MEMLIMIT_NONE) {
		log_msg(LOG_INFO, "memory limit: none set (the watch cache may grow unchecked)");
		return 0;
	}
	log_fields(LOG_INFO, "memory limit",
	           (struct log_field[]){LOG_INT("memory_limit_bytes", (long long)bytes),
	                                LOG_STR("file", where), LOG_END});
	return bytes;
}

static int serve(const struct config *cfg, const sigset_t *signals)
{
	int status = EXIT_START_FAILED, sig = 0;
	char err[512];
	struct kube_client *kube = NULL;
	struct ledger *ledger = NULL;
	struct webhook *webhook = NULL;
	struct extender *extender = NULL;
	struct cache *cache = NULL;
	struct dra_store *dra = NULL;
	struct informer *informer = NULL;
	struct shared *shared = NULL;
	struct serverclock *clock = NULL;
	struct policies *policies = NULL;
	struct policystatus *pstatus = NULL;
	struct gone_sink sink; /* outlives the cache, which calls pod_gone with it */
	char ns[64] = "";      /* of shared reservations and the policy status Lease */
	struct tls_store *tls = NULL;
	struct clientauth *clientauth = NULL;
	struct server *server = NULL;
	struct metrics *metrics = metrics_new();

	if (metrics == NULL || (ledger = ledger_new(cfg->reservation_ttl_ms)) == NULL)
		goto out;
	metrics_set_ledger_gauge(metrics, ledger_gauge, ledger);
	metrics_set_unseen_counter(metrics, ledger_unseen, ledger);
	if ((kube = make_kube(cfg, metrics)) == NULL || (clock = serverclock_new()) == NULL)
		goto out;
	kube_client_set_clock(kube, clock);
	if (cfg->reservations_shared) {
		struct shared_api api = shared_api_kube(kube);
		if (reservations_namespace(cfg, ns, sizeof(ns)) != 0 ||
		    (shared = shared_new(ns, &api, cfg->reservation_ttl_ms, NULL)) == NULL ||
		    metrics_add_collector(metrics, shared_collect, shared) != 0)
			goto out;
		shared_set_clock(shared, api_server_clock, clock);
		log_fields(LOG_INFO, "shared reservations",
		           (struct log_field[]){LOG_STR("namespace", ns), LOG_END});
	}
	sink.ledger = ledger;
	sink.shared = shared;
	atomic_init(&sink.extender, NULL);
	if (cfg->cache_watch) {
		struct demand_config dcfg = {.gpu_resources = cfg->gpu_resources,
		                             .n_gpu_resources = cfg->n_gpu_resources,
		                             .infer = cfg->undeclared_infer,
		                             .engines = &cfg->engine_defaults};
		if (cfg->policies &&
		    ((policies = policies_new()) == NULL ||
		     metrics_add_collector(metrics, policies_collect, policies) != 0))
			goto out;
		/* DRA (resource.k8s.io/v1) is read by the watch cache only: with --cache off it
		 * is not read (README, limitations). */
		if ((dra = dra_store_new(&cfg->dra_drivers, pod_gone, &sink)) == NULL)
			goto out;
		struct informer_config icfg = {
		    .dra = dra,
		    .policies = policies,
		    .threshold = cfg->threshold,
		    .mode_warn = cfg->mode_warn || cfg->mode_audit,
		    .ledger = ledger,
		    .max_staleness_s = (double)cfg->cache_max_staleness_ms / 1000.0,
		    .memory_limit_bytes = memory_limit(),
		    .memory_warn_ratio = cfg->memory_warn_ratio,
		};
		if ((cache = cache_new(&dcfg, pod_gone, &sink)) == NULL ||
		    (informer = informer_new(kube, cache, &icfg)) == NULL ||
		    metrics_add_collector(metrics, informer_collect, informer) != 0)
			goto out;
		if (informer_start(informer) != 0) {
			log_msg(LOG_ERROR, "cannot start the watch cache's threads");
			goto out;
		}
		if (policies != NULL) {
			/* --reservations local is one replica (see policystatus.h): no Lease. */
			struct policystatus_config pcfg = {.kube = kube,
			                                   .single_writer =
			                                       !cfg->reservations_shared,
			                                   .ns = ns,
			                                   .cache = cache,
			                                   .policies = policies};
			if ((pstatus = policystatus_new(&pcfg)) == NULL ||
			    metrics_add_collector(metrics, policystatus_collect, pstatus) != 0 ||
			    policystatus_start(pstatus) != 0)
				goto out;
		}
	}
	struct placer_source src = placer_source_kube(kube);
	struct webhook_config wcfg = {
	    .threshold = cfg->threshold,
	    .warn_threshold = cfg->warn_threshold,
	    .mode_warn = cfg->mode_warn,
	    .mode_audit = cfg->mode_audit,
	    .gpu_resources = cfg->gpu_resources,
	    .n_gpu_resources = cfg->n_gpu_resources,
	    .infer = cfg->undeclared_infer,
	    .engines = &cfg->engine_defaults,
	    .exempt_namespaces = cfg->exempt_namespaces,
	    .n_exempt_namespaces = cfg->n_exempt_namespaces,
	    /* No API call starts after 2 x --api-timeout: answered within 3 x of arrival. */
	    .budget_ms =
	        cfg->api_timeout_ms > UINT64_MAX / 2 ? UINT64_MAX : 2 * cfg->api_timeout_ms,
	    .grace_ms = cfg->reservation_grace_ms,
	    .unseen_ttl_ms = cfg->unseen_reservation_ttl_ms,
	    .cache = cache,
	    .dra = dra,
	    .cache_fresh = informer_fresh_fn,
	    .dra_fresh = dra ? informer_dra_fresh_fn : NULL,
	    .cache_connected = informer_connected_fn,
	    .cache_progress_ms = informer_progress_ms,
	    .cache_ctx = informer,
	    .shared = shared,
	    .policies = policies,
	    .binding_admitted = binding_admitted,
	    .binding_admitted_ctx = &sink,
	};
	if ((webhook = webhook_new(&wcfg, &src, ledger, metrics)) == NULL)
		goto out;
	/* The scheduler extender: on the webhook's engine (its flags, cache, DRA store, policies
	 * and reservations, read and never written: the ledger's, or with --reservations shared the
	 * records as this replica last saw them; the webhook decides each Binding on fresh ones).
	 */
	struct extender_config ecfg = {
	    .placer = webhook_placer(webhook),
	    .score = cfg->scheduler_spread ? EXTENDER_SPREAD : EXTENDER_BINPACK,
	    .pass_nodes = cfg->scheduler_pass_nodes,
	};
	if ((extender = extender_new(&ecfg, metrics)) == NULL)
		goto out;
	atomic_store(&sink.extender, extender);
	if ((tls = tls_store_new(cfg->tls_cert_file, cfg->tls_key_file, metrics, err,
	                         sizeof(err))) == NULL) {
		log_fields(LOG_ERROR, "cannot load the serving certificate",
		           (struct log_field[]){LOG_STR("error", err), LOG_END});
		goto out;
	}
	if (cfg->client_ca_file != NULL) {
		const char *names[CONFIG_MAX_CLIENT_NAMES];
		for (size_t i = 0; i < cfg->n_client_allowed_names; i++)
			names[i] = cfg->client_allowed_names[i];
		if ((clientauth = clientauth_new(cfg->client_ca_file, names,
		                                 cfg->n_client_allowed_names, err, sizeof(err))) ==
		    NULL) {
			log_fields(LOG_ERROR, "cannot load the client CA",
			           (struct log_field[]){LOG_STR("error", err), LOG_END});
			goto out;
		}
		tls_store_on_poll(tls, reload_client_ca, clientauth);
	}
	if (tls_store_start(tls, cfg->tls_reload_interval_ms) != 0)
		goto out;
	struct server_options so = {
	    .listen_host = cfg->listen.host,
	    .listen_port = cfg->listen.port,
	    .health_host = cfg->health_listen.host,
	    .health_port = cfg->health_listen.port,
	    .threads = cfg->threads,
	    .workers = cfg->workers,
	    .connection_timeout_s = cfg->connection_timeout_s,
	    .cert_warn_s = cfg->cert_expiry_warning_ms / 1000,
	    .ready_note = informer ? informer_ready_note : NULL,
	    .ready_note_ctx = informer,
	    .ready_gate = informer ? informer_ready_gate : NULL,
	    .ready_gate_ctx = informer,
	    .scheduler_enabled = cfg->scheduler_listen_set,
	    .scheduler_host = cfg->scheduler_listen.host,
	    .scheduler_port = cfg->scheduler_listen.port,
	    .client_auth = clientauth,
	};
	struct server_route routes[] = {webhook_route(webhook), extender_filter_route(extender),
	                                extender_prioritize_route(extender)};
	routes[0].client_auth = cfg->client_auth_admission;
	routes[1].client_auth = routes[2].client_auth = cfg->client_auth_extender;
	if ((server = server_start(&so, routes, 3, tls, metrics, err, sizeof(err))) == NULL) {
		log_fields(LOG_ERROR, "cannot serve",
		           (struct log_field[]){LOG_STR("error", err), LOG_END});
		goto out;
	}
	sigwait(signals, &sig);
	log_fields(LOG_INFO, "signal received, shutting down",
	           (struct log_field[]){LOG_STR("signal", strsignal(sig)), LOG_END});
	server_shutdown(server, cfg->drain_timeout_ms, cfg->shutdown_timeout_ms);
	status = 0;
out:
	server_free(server);
	tls_store_free(tls); /* stops the poller that reloads the client CA */
	clientauth_free(clientauth);
	webhook_free(webhook);
	policystatus_free(pstatus); /* reads the cache and the policies: stopped first */
	informer_free(informer);    /* stops its threads: no more ledger_forget, extender_forget */
	extender_free(extender);
	cache_free(cache);
	dra_store_free(dra);
	policies_free(policies); /* after the informer, whose thread filled it */
	shared_free(shared);
	kube_client_free(kube);
	serverclock_free(clock); /* after the client and shared, which read it */
	ledger_free(ledger);
	metrics_free(metrics);
	if (status != 0)
		log_msg(LOG_ERROR, "gpu-memory-guard failed to start");
	return status;
}

/* `certs`: generate the serving certificate (lib/certgen). Owns its own flags. */
static int cmd_certs(int argc, char **argv)
{
	static char
	    out[CERTGEN_USAGE_MAX > CERTGEN_BUNDLE_MAX ? CERTGEN_USAGE_MAX : CERTGEN_BUNDLE_MAX];
	char err[512];
	int rc = certgen_cli(argc, argv, out, sizeof(out), err, sizeof(err));
	if (rc == CERTGEN_EXIT_OK)
		fputs(out, stdout);
	else
		fprintf(stderr, "gpu-memory-guard certs: %s\n", err);
	return rc;
}

/* The kubeconfig of `report`: --kubeconfig, else the first file of $KUBECONFIG (a list, as
 * kubectl's; we do not merge), else ~/.kube/config if it exists, else in-cluster. */
static int report_kubeconfig(const char *flag, struct kube_config *kc, char *err, size_t errlen)
{
	char path[4096];
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
	struct stat st;

	if (flag != NULL)
		return kubeconfig_load(flag, kc, err, errlen);
	if (env != NULL && env[0] != '\0') {
		size_t len = strcspn(env, ":");
		snprintf(path, sizeof(path), "%.*s", (int)len, env);
		return kubeconfig_load(path, kc, err, errlen);
	}
	if (home != NULL && home[0] != '\0') {
		snprintf(path, sizeof(path), "%s/.kube/config", home);
		if (stat(path, &st) == 0)
			return kubeconfig_load(path, kc, err, errlen);
	}
	return kubeconfig_in_cluster(NULL, kc, err, errlen);
}

struct report_sink {
	struct report *report;
	int (*add)(struct report *r, const struct cJSON *item, char *err, size_t errlen);
	char err[REPORT_ERR_MAX];
	int rc;
};

static int report_item(void *ctx, const struct cJSON *item)
{
	struct report_sink *s = ctx;
	return s->rc = s->add(s->report, item, s->err, sizeof(s->err));
}

/* List every node, every pod, then every GPUMemoryPolicy into the report: the webhook's
 * inputs, read once. The policies' CRD not installed (404) is no policy, as for the webhook; a
 * 403 names the RBAC the report lacks. */
static int report_read(struct kube_client *c, struct report *r, char *err, size_t errlen)
{
	static const char *const resources[] = {
	    "nodes", "pods", GPUPOLICY_GROUP "/" GPUPOLICY_VERSION "/" GPUPOLICY_PLURAL,
	    INFORMER_SLICES_RESOURCE, INFORMER_CLAIMS_RESOURCE};
	struct report_sink sink = {.report = r};
	long code = 0;

	for (size_t i = 0; i < 5; i++) {
		sink.add = i == 0   ? report_add_node
		           : i == 1 ? report_add_pod
		           : i == 2 ? report_add_policy
		                    : report_add_dra;
		code = 0;
		int rc = kube_list_all(c, resources[i], 0, report_item, &sink, NULL, 0, &code, err,
		                       errlen);
		if (rc == KUBE_ENOTFOUND && i >= 2)
			continue; /* the CRD is not installed (no policy can exist), or the API
			             server serves no resource.k8s.io/v1 (no DRA) */
		if (rc == KUBE_ESTOP)
			snprintf(err, errlen, "%s: %.400s", resources[i], sink.err);
		else if (rc != 0 && code == 403 && i == 2) {
			char why[REPORT_ERR_MAX];
			snprintf(why, sizeof(why), "%s", err);
			snprintf(
			    err, errlen,
			    "%.300s (the report needs list on %s.%s, cluster-wide, to apply the "
			    "webhook's GPUMemoryPolicy objects)",
			    why, GPUPOLICY_PLURAL, GPUPOLICY_GROUP);
		}
		if (rc != 0)
			return -1;
	}
	return 0;
}

/* A policy the webhook cannot use applies to no node: say so, on stderr. */
static void report_warn_policies(const struct report *r, const char *name)
{
	struct report_policy p;

	for (size_t i = 0; i < report_policies(r, i, &p); i++)
		if (p.error[0] != '\0')
			fprintf(
			    stderr,
			    "%s: warning: GPUMemoryPolicy %s is not usable, applied to no node: "
			    "%s\n",
			    name, p.name, p.error);
}

/* `report` (and `kubectl gpu-memory`): read the cluster, print the report. */
static int cmd_report(int argc, char **argv, const char *name)
{
	struct report_cli cli;
	struct kube_config kc = {0};
	struct kube_client *c = NULL;
	struct report *r = NULL;
	char err[REPORT_ERR_MAX], usage[4096], *out = NULL;
	int status = 1;

	if (report_cli_parse(argc, argv, &cli, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s\n", name, err);
		return EXIT_USAGE;
	}
	if (cli.help) {
		fputs(report_cli_usage(name, usage, sizeof(usage)), stdout);
		return 0;
	}
	log_set_level(LOG_ERROR); /* a command's errors go to stderr as one line, below */
	struct report_config rc = {.threshold = cli.threshold,
	                           .gpu_resources = cli.gpu_resources,
	                           .n_gpu_resources = cli.n_gpu_resources,
	                           .infer = cli.undeclared_infer,
	                           .engines = &cli.engines};
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "%s: curl_global_init failed\n", name);
		return 1;
	}
	if (report_kubeconfig(cli.kubeconfig, &kc, err, sizeof(err)) != 0 ||
	    (c = kube_client_new(&kc, (long)cli.timeout_ms, NULL, NULL, err, sizeof(err))) ==
	        NULL ||
	    (r = report_new(&rc, err, sizeof(err))) == NULL ||
	    report_read(c, r, err, sizeof(err)) || report_build(r, err, sizeof(err)) != 0 ||
	    report_render(r, cli.format, cli.node, &out, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s\n", name, err);
		goto out;
	}
	report_warn_policies(r, name);
	fputs(out, stdout);
	status = fflush(stdout) == 0 ? 0 : 1;
out:
	free(out);
	report_free(r);
	kube_client_free(c);
	kubeconfig_free(&kc);
	curl_global_cleanup();
	return status;
}

int main(int argc, char **argv)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX];
	enum log_level level = LOG_INFO;
	sigset_t signals;

	/* Called as the kubectl plugin (kubectl gpu-memory runs kubectl-gpu_memory, a link to
	 * this binary): the report, with the plugin's arguments. */
	if (argc >= 1 && strcmp(basename(argv[0]), "kubectl-gpu_memory") == 0)
		return cmd_report(argc, argv, "kubectl gpu-memory");
	/* Subcommands with flags of their own are dispatched here, before config. */
	if (argc >= 2 && strcmp(argv[1], "certs") == 0)
		return cmd_certs(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "report") == 0)
		return cmd_report(argc - 1, argv + 1, "gpu-memory-guard report");

	if (config_parse_args(argc, argv, &cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "gpu-memory-guard: %s\n", err);
		return EXIT_USAGE;
	}
	switch (cfg.command) {
	case CONFIG_CMD_VERSION:
		printf("gpu-memory-guard %s\n", GMG_VERSION);
		return 0;
	case CONFIG_CMD_HELP:
		fputs(config_usage(), stdout);
		return 0;
	case CONFIG_CMD_SERVE:
		break;
	}
	if (getenv("MALLOC_ARENA_MAX") == NULL)
		(void)mallopt(M_ARENA_MAX, SERVE_MALLOC_ARENAS); /* before any thread starts */
	if (log_level_parse(cfg.log_level, &level) == 0)
		log_set_level(level);

	/* Every thread started from here on inherits the mask: signals reach sigwait only. */
	sigemptyset(&signals);
	sigaddset(&signals, SIGTERM);
	sigaddset(&signals, SIGINT);
	pthread_sigmask(SIG_BLOCK, &signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_msg(LOG_ERROR, "curl_global_init failed");
		return EXIT_START_FAILED;
	}
	log_fields(LOG_INFO, "starting",
	           (struct log_field[]){LOG_STR("version", GMG_VERSION), LOG_END});
	uint64_t deadline_ms = 0;
	if (config_timeout_short(&cfg, &deadline_ms))
		log_fields(
		    LOG_WARN,
		    "the registered webhook timeout is shorter than a review's deadline (3 x "
		    "--api-timeout): a slow API server shows callers a webhook timeout instead "
		    "of the denial; raise timeoutSeconds or lower --api-timeout",
		    (struct log_field[]){LOG_INT("webhook_timeout_ms", cfg.webhook_timeout_ms),
		                         LOG_INT("deadline_ms", deadline_ms), LOG_END});
	if (config_keepalive_short(&cfg))
		log_fields(
		    LOG_WARN,
		    "--connection-timeout is not over the API server's and kube-scheduler's "
		    "idle keep-alive (90s): a review sent on a connection as this replica "
		    "closes it fails with EOF, and the failurePolicy answers it",
		    (struct log_field[]){LOG_INT("connection_timeout_s", cfg.connection_timeout_s),
		                         LOG_INT("client_idle_s", CONFIG_CLIENT_IDLE_S), LOG_END});
	int status = serve(&cfg, &signals);
	curl_global_cleanup();
	return status;
}
