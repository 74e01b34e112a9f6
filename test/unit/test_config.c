/* Unit tests for lib/config: commands, every flag, durations, ratios, addresses, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"

#define MAXARGS 64

/* Parse a command line given as one string, words split on spaces. */
static int parse(const char *line, struct config *cfg, char *err, size_t errlen)
{
	static char buf[4096];
	static char *argv[MAXARGS];
	int argc = 0;
	snprintf(buf, sizeof(buf), "%s", line);
	argv[argc++] = "gpu-memory-guard";
	for (char *tok = strtok(buf, " "); tok && argc < MAXARGS - 1; tok = strtok(NULL, " "))
		argv[argc++] = tok;
	argv[argc] = NULL;
	return config_parse_args(argc, argv, cfg, err, errlen);
}

static void expect_error(const char *line, const char *fragment)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX] = "";
	int rc = parse(line, &cfg, err, sizeof(err));
	if (rc != CONFIG_EUSAGE)
		fail_msg("\"%s\": accepted, wanted an error with \"%s\"", line, fragment);
	if (strstr(err, fragment) == NULL)
		fail_msg("\"%s\": error \"%s\" lacks \"%s\"", line, err, fragment);
	assert_null(strchr(err, '\n')); /* one line */
}

#define TLS "--tls-cert-file /c.crt --tls-key-file /c.key"

static void test_defaults(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse("serve " TLS, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.command, CONFIG_CMD_SERVE);
	assert_string_equal(cfg.listen.host, "");
	assert_int_equal(cfg.listen.port, 8443);
	assert_string_equal(cfg.health_listen.host, "");
	assert_int_equal(cfg.health_listen.port, 8080);
	assert_string_equal(cfg.tls_cert_file, "/c.crt");
	assert_string_equal(cfg.tls_key_file, "/c.key");
	assert_null(cfg.kubeconfig);
	assert_true(cfg.threshold > 0.8999 && cfg.threshold < 0.9001);
	assert_true(cfg.warn_threshold > 0.7999 && cfg.warn_threshold < 0.8001);
	assert_int_equal(cfg.mode_warn, 0);
	assert_int_equal(cfg.mode_audit, 0);
	assert_int_equal(cfg.n_gpu_resources, 1);
	assert_string_equal(cfg.gpu_resources[0], "nvidia.com/gpu");
	assert_int_equal(cfg.n_exempt_namespaces, 0);
	assert_int_equal(cfg.reservation_ttl_ms, 60000);
	assert_int_equal(cfg.api_timeout_ms, 2000);
	assert_int_equal(cfg.tls_reload_interval_ms, 2000);
	assert_int_equal(cfg.cert_expiry_warning_ms, 720ull * 3600 * 1000);
	assert_int_equal(cfg.reservation_grace_ms, 5000);
	assert_int_equal(cfg.unseen_reservation_ttl_ms, 35000);
	assert_string_equal(cfg.log_level, "info");
	assert_int_equal(cfg.threads, 0);
	assert_int_equal(cfg.reservations_shared, 0);
	assert_null(cfg.reservations_namespace);
}

static void test_every_flag(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX];
	int rc =
	    parse("serve --listen 127.0.0.1:9443 --health-listen=[::1]:9080 " TLS
	          " --kubeconfig /k/config --threshold 0.85 --warn-threshold=0.5 --mode warn"
	          " --gpu-resource nvidia.com/gpu.shared --gpu-resource=amd.com/gpu"
	          " --exempt-namespace kube-system --exempt-namespace gpu-memory-guard"
	          " --reservation-ttl 2m --api-timeout 500ms --log-level debug"
	          " --tls-reload-interval 10s --drain-timeout 0s --shutdown-timeout 1h"
	          " --threads 4 --workers=32 --connection-timeout 2000ms"
	          " --cert-expiry-warning 168h --reservation-grace 12s --unseen-reservation-ttl 20s"
	          " --reservations shared --reservations-namespace=gmg-system",
	          &cfg, err, sizeof(err));
	if (rc != 0)
		fail_msg("%s", err);
	assert_string_equal(cfg.listen.host, "127.0.0.1");
	assert_int_equal(cfg.listen.port, 9443);
	assert_string_equal(cfg.health_listen.host, "::1");
	assert_int_equal(cfg.health_listen.port, 9080);
	assert_string_equal(cfg.kubeconfig, "/k/config");
	assert_true(cfg.threshold > 0.8499 && cfg.threshold < 0.8501);
	assert_true(cfg.warn_threshold > 0.4999 && cfg.warn_threshold < 0.5001);
	assert_int_equal(cfg.mode_warn, 1);
	assert_int_equal(cfg.mode_audit, 0);
	assert_int_equal(cfg.n_gpu_resources, 2); /* the default is replaced */
	assert_string_equal(cfg.gpu_resources[0], "nvidia.com/gpu.shared");
	assert_string_equal(cfg.gpu_resources[1], "amd.com/gpu");
	assert_int_equal(cfg.n_exempt_namespaces, 2);
	assert_string_equal(cfg.exempt_namespaces[1], "gpu-memory-guard");
	assert_int_equal(cfg.reservation_ttl_ms, 120000);
	assert_int_equal(cfg.api_timeout_ms, 500);
	assert_string_equal(cfg.log_level, "debug");
	assert_int_equal(cfg.tls_reload_interval_ms, 10000);
	assert_int_equal(cfg.drain_timeout_ms, 0);
	assert_int_equal(cfg.shutdown_timeout_ms, 3600000);
	assert_int_equal(cfg.cert_expiry_warning_ms, 168ull * 3600 * 1000);
	assert_int_equal(cfg.reservation_grace_ms, 12000);
	assert_int_equal(cfg.unseen_reservation_ttl_ms, 20000);
	assert_int_equal(cfg.threads, 4);
	assert_int_equal(cfg.workers, 32);
	assert_int_equal(cfg.connection_timeout_s, 2);
	assert_int_equal(cfg.reservations_shared, 1);
	assert_string_equal(cfg.reservations_namespace, "gmg-system");
}

/* Client authentication: --client-ca-file alone requires certificates on both routes;
 * --client-auth-routes picks them; names are comma-separated and repeatable; each bad form
 * gets its own error. */
static void test_client_auth_flags(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse("serve " TLS, &cfg, err, sizeof(err)), 0);
	assert_null(cfg.client_ca_file);
	assert_int_equal(cfg.client_auth_admission + cfg.client_auth_extender, 0);
	assert_int_equal(parse("serve " TLS " --client-ca-file /ca.crt", &cfg, err, sizeof(err)),
	                 0);
	assert_string_equal(cfg.client_ca_file, "/ca.crt");
	assert_int_equal(cfg.client_auth_admission, 1);
	assert_int_equal(cfg.client_auth_extender, 1);
	assert_int_equal(cfg.n_client_allowed_names, 0);
	assert_int_equal(parse("serve " TLS
	                       " --client-ca-file /ca.crt --client-auth-routes extender"
	                       " --client-allowed-names a,b.example --client-allowed-names=a,c",
	                       &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.client_auth_admission, 0);
	assert_int_equal(cfg.client_auth_extender, 1);
	assert_int_equal(cfg.n_client_allowed_names, 3);
	assert_string_equal(cfg.client_allowed_names[0], "a");
	assert_string_equal(cfg.client_allowed_names[1], "b.example");
	assert_string_equal(cfg.client_allowed_names[2], "c");
	assert_int_equal(parse("serve " TLS " --client-ca-file /ca.crt --client-auth-routes "
	                       "admission,extender",
	                       &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.client_auth_admission + cfg.client_auth_extender, 2);
	expect_error("serve " TLS " --client-auth-routes extender",
	             "--client-auth-routes needs --client-ca-file");
	expect_error("serve " TLS " --client-allowed-names a",
	             "--client-allowed-names needs --client-ca-file");
	expect_error("serve " TLS " --client-ca-file /ca.crt --client-auth-routes admision",
	             "\"admision\" is not admission or extender");
	expect_error("serve " TLS " --client-ca-file /ca.crt --client-auth-routes admission,",
	             "\"\" is not admission or extender");
	expect_error("serve " TLS " --client-ca-file /ca.crt --client-allowed-names a,,b",
	             "a name is empty");
	expect_error("serve " TLS " --client-ca-file=", "--client-ca-file: empty value");
}

static void test_repeated_values_deduplicated(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse("serve " TLS " --exempt-namespace a --exempt-namespace a", &cfg, err,
	                       sizeof(err)),
	                 0);
	assert_int_equal(cfg.n_exempt_namespaces, 1);
}

static void test_commands(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX];
	assert_int_equal(parse("version", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.command, CONFIG_CMD_VERSION);
	assert_int_equal(parse("--version", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.command, CONFIG_CMD_VERSION);
	assert_int_equal(parse("help", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.command, CONFIG_CMD_HELP);
	assert_int_equal(parse("--help", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.command, CONFIG_CMD_HELP);
	assert_int_equal(parse("serve --help", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.command, CONFIG_CMD_HELP);
	assert_int_equal(parse("serve --threshold 0.5 -h", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.command, CONFIG_CMD_HELP);
	expect_error("", "missing command");
	expect_error("run", "unknown command \"run\"");
	expect_error("version extra", "takes no arguments");
}

static void test_flag_errors(void **state)
{
	expect_error("serve", "--tls-cert-file and --tls-key-file are required");
	expect_error("serve --tls-cert-file /c", "required");
	expect_error("serve " TLS " --bogus 1", "unknown flag --bogus");
	expect_error("serve " TLS " extra", "unexpected argument \"extra\"");
	expect_error("serve " TLS " --threshold", "--threshold needs a value");
	expect_error("serve " TLS " --threshold 1.5", "--threshold: \"1.5\" is not a ratio");
	expect_error("serve " TLS " --threshold 0", "--threshold: \"0\" is not a ratio");
	expect_error("serve " TLS " --threshold abc", "is not a ratio");
	expect_error("serve " TLS " --warn-threshold -0.1", "--warn-threshold");
	expect_error("serve " TLS " --mode observe",
	             "--mode: \"observe\" is not enforce, warn or audit");
	expect_error("serve " TLS " --reservations etcd",
	             "--reservations: \"etcd\" is not local or shared");
	expect_error("serve " TLS " --reservations-namespace=",
	             "--reservations-namespace: \"\" is not a namespace name (1-63 characters)");
	expect_error("serve " TLS " --log-level trace", "--log-level: \"trace\"");
	expect_error("serve " TLS " --api-timeout 2", "--api-timeout: \"2\": missing unit");
	expect_error("serve " TLS " --api-timeout 0s",
	             "--api-timeout: \"0s\" must be from 10ms to 30s");
	expect_error("serve " TLS " --api-timeout 9223372036854775807ns", "from 10ms to 30s");
	expect_error("serve " TLS " --tls-reload-interval 1ns", "from 100ms to 1h");
	expect_error("serve " TLS " --drain-timeout 999999h", "--drain-timeout");
	expect_error("serve " TLS " --shutdown-timeout 1h30m", "from 0s to 1h");
	expect_error("serve " TLS " --reservation-ttl 500ms", "from 1s to 24h");
	expect_error("serve " TLS " --unseen-reservation-ttl 500ms",
	             "--unseen-reservation-ttl: \"500ms\" must be from 1s");
	expect_error("serve " TLS " --reservation-grace 0s",
	             "--reservation-grace: \"0s\" must be from 1s");
	expect_error("serve " TLS " --connection-timeout 1.5s", "must be whole seconds");
	expect_error("serve " TLS " --reservation-ttl 1d", "unknown unit \"d\"");
	expect_error("serve " TLS " --reservation-ttl -5s", "negative");
	expect_error("serve " TLS " --listen 8443", "--listen: \"8443\" is not ADDR:PORT");
	expect_error("serve " TLS " --listen :99999", "port must be a number");
	expect_error("serve " TLS " --listen ::1:80", "is not ADDR:PORT");
	expect_error("serve " TLS " --health-listen [::1]80", "--health-listen");
	expect_error("serve " TLS " --threads many", "--threads: \"many\"");
	expect_error("serve " TLS " --threads 100000", "--threads");
	expect_error("serve " TLS " --workers 1025", "--workers: \"1025\" is not a number 0-1024");
	expect_error("serve " TLS " --kubeconfig=", "--kubeconfig: empty path");
	expect_error("serve " TLS " --exempt-namespace=", "--exempt-namespace: empty value");
	expect_error("serve " TLS " --gpu-resource a --gpu-resource b --gpu-resource c "
	             "--gpu-resource d --gpu-resource e --gpu-resource f --gpu-resource g "
	             "--gpu-resource h --gpu-resource i",
	             "at most 8 values");
}

static uint64_t dur(const char *s)
{
	uint64_t ms = 12345;
	char err[128];
	if (config_parse_duration(s, &ms, err, sizeof(err)) != 0)
		fail_msg("\"%s\": %s", s, err);
	return ms;
}

static void bad_dur(const char *s)
{
	uint64_t ms = 777;
	char err[128] = "";
	if (config_parse_duration(s, &ms, err, sizeof(err)) == 0)
		fail_msg("\"%s\" accepted as %llu ms", s, (unsigned long long)ms);
	assert_int_equal(ms, 777);
	assert_true(strlen(err) > 0);
}

static void test_durations(void **state)
{
	assert_int_equal(dur("0"), 0);
	assert_int_equal(dur("500ms"), 500);
	assert_int_equal(dur("2s"), 2000);
	assert_int_equal(dur("1m"), 60000);
	assert_int_equal(dur("1h"), 3600000);
	assert_int_equal(dur("1h30m"), 5400000);
	assert_int_equal(dur("1m30s500ms"), 90500);
	assert_int_equal(dur("1.5s"), 1500);
	assert_int_equal(dur(".5s"), 500);
	assert_int_equal(dur("1.s"), 1000);
	assert_int_equal(dur("+2s"), 2000);
	assert_int_equal(dur("0s"), 0);
	assert_int_equal(dur("1500us"), 2); /* sub-ms rounded up */
	assert_int_equal(dur("1\xc2\xb5s"), 1);
	assert_int_equal(dur("1\xce\xbcs"), 1);
	assert_int_equal(dur("1ns"), 1);
	assert_int_equal(dur("2562047h"), 2562047ull * 3600000);
	bad_dur("");
	bad_dur("2");
	bad_dur("s");
	bad_dur(".s");
	bad_dur("-1s");
	bad_dur("1d");
	bad_dur("1S");
	bad_dur("1 s");
	bad_dur("1sec");
	bad_dur("2562048h"); /* past Go's int64 nanoseconds */
	bad_dur("99999999999999999999s");
	bad_dur("1s2");
	bad_dur("0000000000000000000000000000000000000000000000000000000000000000001s");
}

static void test_addresses(void **state)
{
	struct config_addr a;
	char err[128];
	assert_int_equal(config_parse_addr(":8443", &a, err, sizeof(err)), 0);
	assert_string_equal(a.host, "");
	assert_int_equal(a.port, 8443);
	assert_int_equal(config_parse_addr("0.0.0.0:0", &a, err, sizeof(err)), 0);
	assert_string_equal(a.host, "0.0.0.0");
	assert_int_equal(a.port, 0);
	assert_int_equal(config_parse_addr("localhost:65535", &a, err, sizeof(err)), 0);
	assert_string_equal(a.host, "localhost");
	assert_int_equal(config_parse_addr("[::]:443", &a, err, sizeof(err)), 0);
	assert_string_equal(a.host, "::");
	assert_int_equal(config_parse_addr("", &a, err, sizeof(err)), -1);
	assert_int_equal(config_parse_addr(":", &a, err, sizeof(err)), -1);
	assert_int_equal(config_parse_addr(":-1", &a, err, sizeof(err)), -1);
	assert_int_equal(config_parse_addr(":65536", &a, err, sizeof(err)), -1);
	assert_int_equal(config_parse_addr(":80x", &a, err, sizeof(err)), -1);
	assert_int_equal(config_parse_addr("[::1:80", &a, err, sizeof(err)), -1);
}

/* The scheduler extender's flags: off and binpack by default; the plain listener needs the
 * watch cache the extender judges from. */
static void test_scheduler_flags(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX];

	assert_int_equal(parse("serve " TLS, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.scheduler_listen_set, 0);
	assert_int_equal(cfg.scheduler_spread, 0);
	assert_int_equal(parse("serve " TLS
	                       " --scheduler-listen 127.0.0.1:9090 --scheduler-score=spread",
	                       &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.scheduler_listen_set, 1);
	assert_string_equal(cfg.scheduler_listen.host, "127.0.0.1");
	assert_int_equal(cfg.scheduler_listen.port, 9090);
	assert_int_equal(cfg.scheduler_spread, 1);
	assert_int_equal(parse("serve " TLS " --scheduler-score spread --scheduler-score binpack",
	                       &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.scheduler_spread, 0);
	assert_int_equal(cfg.scheduler_listen_set, 0);
	expect_error("serve " TLS " --scheduler-score pack", "\"pack\" is not binpack or spread");
	assert_int_equal(cfg.scheduler_pass_nodes, 0);
	assert_int_equal(parse("serve " TLS " --scheduler-pass-nodes 3", &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.scheduler_pass_nodes, 3);
	expect_error("serve " TLS " --scheduler-pass-nodes 15001",
	             "--scheduler-pass-nodes: \"15001\" is not a number 0-15000 (0 = every node "
	             "where the pod fits)");
	expect_error("serve " TLS " --scheduler-pass-nodes -1", "is not a number 0-15000");
	expect_error("serve " TLS " --scheduler-listen 9090",
	             "--scheduler-listen: \"9090\" is not");
	expect_error("serve " TLS " --scheduler-listen :99999", "port must be a number");
	expect_error("serve " TLS " --scheduler-listen :9090 --cache off",
	             "--scheduler-listen needs --cache watch");
	expect_error("serve " TLS " --scheduler-listen", "--scheduler-listen needs a value");
}

static void test_usage_documents_every_flag(void **state)
{
	const char *u = config_usage();
	const char *flags[] = {"--listen",
	                       "--tls-cert-file",
	                       "--tls-key-file",
	                       "--health-listen",
	                       "--kubeconfig",
	                       "--threshold",
	                       "--mode",
	                       "--gpu-resource",
	                       "--exempt-namespace",
	                       "--warn-threshold",
	                       "--reservation-ttl",
	                       "--api-timeout",
	                       "--log-level",
	                       "--tls-reload-interval",
	                       "--drain-timeout",
	                       "--shutdown-timeout",
	                       "--workers",
	                       "--threads",
	                       "--connection-timeout",
	                       "--reservations",
	                       "--reservations-namespace",
	                       "--scheduler-listen",
	                       "--scheduler-score",
	                       "--scheduler-pass-nodes",
	                       "version"};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (strstr(u, flags[i]) == NULL)
			fail_msg("usage lacks %s", flags[i]);
	assert_int_equal(u[strlen(u) - 1], '\n');
}

/* The idle timeout is over the API server's and kube-scheduler's (config.h, Keep-alive): at 30 s
 * (the old default) a review written on a connection as the webhook closed it failed with EOF. */
static void test_connection_timeout_over_clients_idle(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX] = "";
	(void)state;
	assert_int_equal(parse("serve " TLS, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.connection_timeout_s, 120);
	assert_true(cfg.connection_timeout_s > CONFIG_CLIENT_IDLE_S);
	assert_false(config_keepalive_short(&cfg));
	assert_int_equal(parse("serve " TLS " --connection-timeout 90s", &cfg, err, sizeof(err)),
	                 0);
	assert_true(config_keepalive_short(&cfg)); /* equal races too */
	assert_int_equal(parse("serve " TLS " --connection-timeout 91s", &cfg, err, sizeof(err)),
	                 0);
	assert_false(config_keepalive_short(&cfg));
	assert_int_equal(parse("serve " TLS " --connection-timeout 30s", &cfg, err, sizeof(err)),
	                 0);
	assert_true(config_keepalive_short(&cfg));
}

static void test_webhook_timeout(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX] = "";
	uint64_t deadline = 0;
	(void)state;
	assert_int_equal(parse("serve " TLS, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.webhook_timeout_ms, 0);
	assert_false(config_timeout_short(&cfg, &deadline)); /* not known: no check */
	assert_int_equal(deadline, 6000);
	assert_int_equal(parse("serve " TLS " --webhook-timeout 5s", &cfg, err, sizeof(err)), 0);
	assert_true(config_timeout_short(&cfg, &deadline)); /* 5 s < 3 x 2 s */
	assert_int_equal(parse("serve " TLS " --webhook-timeout 6s", &cfg, err, sizeof(err)), 0);
	assert_false(config_timeout_short(&cfg, &deadline)); /* exactly the deadline */
	assert_int_equal(
	    parse("serve " TLS " --webhook-timeout 7s --api-timeout 3s", &cfg, err, sizeof(err)),
	    0);
	assert_true(config_timeout_short(&cfg, &deadline));
	assert_int_equal(deadline, 9000);
	expect_error("serve " TLS " --webhook-timeout 500ms",
	             "--webhook-timeout: \"500ms\" must be from 1s to 30s");
	expect_error("serve " TLS " --webhook-timeout 31s", "must be from 1s to 30s");
	expect_error("serve " TLS " --webhook-timeout soon", "--webhook-timeout: \"soon\"");
}

static void test_mode_audit(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX] = "";
	(void)state;
	assert_int_equal(parse("serve " TLS " --mode audit", &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.mode_audit, 1);
	assert_int_equal(cfg.mode_warn, 0);
	/* the last occurrence wins, as for every flag */
	assert_int_equal(parse("serve " TLS " --mode audit --mode enforce", &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.mode_audit + cfg.mode_warn, 0);
}

/* --undeclared and --engine-default (issue 19): defaults, values, errors. */
static void test_undeclared_and_engine_defaults(void **state)
{
	struct config cfg;
	char err[CONFIG_ERR_MAX];

	(void)state;
	assert_int_equal(parse("serve " TLS, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.undeclared_infer, 1);
	assert_int_equal(cfg.engine_defaults.ppm[ENGINE_VLLM], ENGINE_DEFAULT_VLLM_PPM);
	if (parse("serve " TLS " --undeclared refuse --engine-default vllm=0.9"
	          " --engine-default=sglang=0.5",
	          &cfg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(cfg.undeclared_infer, 0);
	assert_int_equal(cfg.engine_defaults.ppm[ENGINE_VLLM], 900000);
	assert_int_equal(cfg.engine_defaults.ppm[ENGINE_SGLANG], 500000);
	assert_int_equal(cfg.engine_defaults.ppm[ENGINE_TGI], ENGINE_DEFAULT_TGI_PPM);
	/* engine_ratio_ppm's rounding, as a pod's own flag: the smallest ratio is 1 ppm */
	if (parse("serve " TLS " --engine-default vllm=0.000001 --engine-default tgi=0.0000025"
	          " --engine-default sglang=1",
	          &cfg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(cfg.engine_defaults.ppm[ENGINE_VLLM], 1);
	assert_int_equal(cfg.engine_defaults.ppm[ENGINE_TGI], 3);
	assert_int_equal(cfg.engine_defaults.ppm[ENGINE_SGLANG], QUANTITY_PPM);
	expect_error("serve " TLS " --engine-default vllm=0.0000004", "--engine-default");
	expect_error("serve " TLS " --undeclared maybe",
	             "--undeclared: \"maybe\" is not infer or refuse");
	expect_error("serve " TLS " --engine-default ollama=0.5",
	             "--engine-default: \"ollama=0.5\" is not ENGINE=RATIO");
	expect_error("serve " TLS " --engine-default vllm=1.2", "--engine-default");
	expect_error("serve " TLS " --engine-default vllm", "--engine-default");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_mode_audit),
	    cmocka_unit_test(test_webhook_timeout),
	    cmocka_unit_test(test_connection_timeout_over_clients_idle),
	    cmocka_unit_test(test_undeclared_and_engine_defaults),
	    cmocka_unit_test(test_every_flag),
	    cmocka_unit_test(test_client_auth_flags),
	    cmocka_unit_test(test_repeated_values_deduplicated),
	    cmocka_unit_test(test_commands),
	    cmocka_unit_test(test_flag_errors),
	    cmocka_unit_test(test_durations),
	    cmocka_unit_test(test_addresses),
	    cmocka_unit_test(test_scheduler_flags),
	    cmocka_unit_test(test_usage_documents_every_flag),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
