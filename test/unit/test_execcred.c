/*
 * Unit tests for lib/kube/execcred: a fake plugin (a shell script this test writes) prints what
 * the test puts in its out file, exits with its status file, and records how it was run (its
 * arguments, KUBERNETES_EXEC_INFO, its environment). Times are passed in, so expiry needs no
 * sleeping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "execcred.h"
#include "kubeconfig.h"
#include "monotime.h"

#define V1      "client.authentication.k8s.io/v1"
#define V1BETA1 "client.authentication.k8s.io/v1beta1"
#define CA_PEM  "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"

static char dir[PATH_MAX], plugin[PATH_MAX + 16];

static const char script[] = "#!/bin/sh\n"
                             "d=$(dirname \"$0\")\n"
                             "for a in \"$@\"; do printf '%s\\n' \"$a\"; done >> \"$d/runs\"\n"
                             "echo --- >> \"$d/runs\"\n"
                             "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$d/info\"\n"
                             "env > \"$d/env\"\n"
                             "case \"$1\" in\n"
                             "sleep) exec sleep 10 ;;\n"
                             "big) head -c 2000000 /dev/zero ;;\n"
                             "linger) cat \"$d/out\"; exec >&-; exec sleep 10 ;;\n"
                             "esac\n"
                             "cat \"$d/out\"\n"
                             "exit \"$(cat \"$d/status\")\"\n";

static void write_file(const char *name, const char *content)
{
	char path[PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(content, 1, strlen(content), f), strlen(content));
	assert_int_equal(fclose(f), 0);
}

/* The file's contents (caller frees), "" when it does not exist. */
static char *read_file(const char *name)
{
	char path[PATH_MAX + 32], *buf = calloc(1, 1 << 20);
	FILE *f;

	assert_non_null(buf);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (f != NULL) {
		size_t n = fread(buf, 1, (1 << 20) - 1, f);
		buf[n] = '\0';
		fclose(f);
	}
	return buf;
}

/* How many times the plugin ran (its runs file has one "---" line per run). */
static int plugin_runs(void)
{
	char *s = read_file("runs");
	int n = 0;

	for (char *p = s; (p = strstr(p, "---\n")) != NULL; p += 4)
		n++;
	free(s);
	return n;
}

static void answer(const char *json, int status)
{
	char st[16];

	write_file("out", json);
	snprintf(st, sizeof(st), "%d\n", status);
	write_file("status", st);
}

static int setup(void **state)
{
	char templ[] = "/tmp/gmg-execcred-XXXXXX", cmd[PATH_MAX + 32];

	(void)state;
	assert_non_null(mkdtemp(templ));
	assert_non_null(realpath(templ, dir));
	snprintf(plugin, sizeof(plugin), "%s/plugin", dir);
	write_file("plugin", script);
	assert_int_equal(chmod(plugin, 0755), 0);
	snprintf(cmd, sizeof(cmd), "rm -f '%s/runs'", dir);
	assert_int_equal(system(cmd), 0);
	answer("{}", 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static int64_t at(const char *rfc3339)
{
	int64_t ms;
	assert_int_equal(execcred_parse_time(rfc3339, &ms), 0);
	return ms;
}

/* A runner of the fake plugin with args, v1 unless api is given. */
static struct execcred *runner(const char *api, char **args, size_t n_args, long timeout_ms)
{
	static char *names[] = {"GMG_PLUGIN_SET", "GMG_OUTER_OVERRIDDEN"};
	static char *values[] = {"from-kubeconfig", "inner"};
	struct kube_exec e = {.user = "admin",
	                      .command = plugin,
	                      .args = args,
	                      .n_args = n_args,
	                      .env_names = names,
	                      .env_values = values,
	                      .n_env = 2,
	                      .api_version = (char *)(api ? api : V1),
	                      .install_hint = NULL,
	                      .provide_cluster_info = 1,
	                      .interactive_mode = KUBE_EXEC_IF_AVAILABLE};
	struct kube_config k = {
	    .server = "https://api.example:6443", .ca_data = CA_PEM, .ca_data_len = strlen(CA_PEM)};
	char err[256] = "";
	struct execcred *c = execcred_new(&e, &k, timeout_ms, err, sizeof(err));

	if (c == NULL)
		fail_msg("execcred_new: %s", err);
	return c;
}

#define TOKEN_ANSWER(tok, exp)                                                                     \
	"{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"" tok      \
	"\"" exp "}}"

/* The credential is kept until its expirationTimestamp, then the plugin runs again. */
static void test_cached_until_expiry(void **state)
{
	struct execcred *c = runner(NULL, NULL, 0, 5000);
	struct execcred_value v;
	char err[256] = "";

	(void)state;
	answer(TOKEN_ANSWER("tok-1", ",\"expirationTimestamp\":\"2026-01-01T01:00:00Z\""), 0);
	assert_int_equal(execcred_get(c, at("2026-01-01T00:00:00Z"), &v, err, sizeof(err)), 0);
	assert_string_equal(v.token, "tok-1");
	assert_null(v.cert);
	execcred_value_free(&v);
	answer(TOKEN_ANSWER("tok-2", ",\"expirationTimestamp\":\"2026-01-01T02:00:00Z\""), 0);
	/* Before the expiry: the cached token, no second run. */
	assert_int_equal(execcred_get(c, at("2026-01-01T00:59:59.999Z"), &v, err, sizeof(err)), 0);
	assert_string_equal(v.token, "tok-1");
	execcred_value_free(&v);
	assert_int_equal(plugin_runs(), 1);
	assert_int_equal(execcred_runs(c), 1);
	/* At the expiry: run again. */
	assert_int_equal(execcred_get(c, at("2026-01-01T01:00:00Z"), &v, err, sizeof(err)), 0);
	assert_string_equal(v.token, "tok-2");
	execcred_value_free(&v);
	assert_int_equal(plugin_runs(), 2);
	execcred_free(c);
}

/* Without an expiry the credential lasts until a 401 invalidates it; an invalidation of an older
 * generation (another thread's stale 401) keeps the newer credential. */
static void test_no_expiry_until_invalidated(void **state)
{
	struct execcred *c = runner(NULL, NULL, 0, 5000);
	struct execcred_value v, w;
	char err[256] = "";
	int64_t now = at("2026-01-01T00:00:00Z");

	(void)state;
	answer(TOKEN_ANSWER("tok-1", ""), 0);
	assert_int_equal(execcred_get(c, now, &v, err, sizeof(err)), 0);
	answer(TOKEN_ANSWER("tok-2", ""), 0);
	assert_int_equal(execcred_get(c, now + 365LL * 86400 * 1000, &w, err, sizeof(err)), 0);
	assert_string_equal(w.token, "tok-1");
	assert_int_equal(w.generation, v.generation);
	execcred_value_free(&w);
	execcred_invalidate(c, v.generation);
	assert_int_equal(execcred_get(c, now, &w, err, sizeof(err)), 0);
	assert_string_equal(w.token, "tok-2");
	assert_true(w.generation != v.generation);
	execcred_invalidate(c, v.generation); /* stale: tok-2 stays */
	execcred_value_free(&w);
	assert_int_equal(execcred_get(c, now, &w, err, sizeof(err)), 0);
	assert_string_equal(w.token, "tok-2");
	assert_int_equal(plugin_runs(), 2);
	execcred_value_free(&v);
	execcred_value_free(&w);
	execcred_free(c);
}

/* A client certificate and key, with v1beta1; both kept as given. */
static void test_client_certificate(void **state)
{
	struct execcred *c = runner(V1BETA1, NULL, 0, 5000);
	struct execcred_value v;
	char err[256] = "";

	(void)state;
	answer("{\"apiVersion\":\"" V1BETA1 "\",\"kind\":\"ExecCredential\",\"status\":{"
	       "\"clientCertificateData\":\"CERT\\n\",\"clientKeyData\":\"KEY\\n\"}}",
	       0);
	assert_int_equal(execcred_get(c, 0, &v, err, sizeof(err)), 0);
	assert_null(v.token);
	assert_string_equal(v.cert, "CERT\n");
	assert_int_equal(v.cert_len, 5);
	assert_string_equal(v.key, "KEY\n");
	assert_int_equal(v.key_len, 4);
	execcred_value_free(&v);
	execcred_free(c);
}

/* Arguments verbatim (no shell), the environment (ours, exec.env over it), and
 * KUBERNETES_EXEC_INFO as the spec writes it, with the cluster. */
static void test_how_it_is_run(void **state)
{
	char *args[] = {"eks", "$(touch pwned); *", "a b"};
	struct execcred *c;
	struct execcred_value v;
	char err[256] = "", *runs, *env, *info;
	cJSON *j;

	(void)state;
	assert_int_equal(setenv("GMG_OUTER", "outer", 1), 0);
	assert_int_equal(setenv("GMG_OUTER_OVERRIDDEN", "outer", 1), 0);
	c = runner(NULL, args, 3, 5000);
	answer(TOKEN_ANSWER("t", ""), 0);
	assert_int_equal(execcred_get(c, 0, &v, err, sizeof(err)), 0);
	execcred_value_free(&v);
	execcred_free(c);
	runs = read_file("runs");
	assert_string_equal(runs, "eks\n$(touch pwned); *\na b\n---\n");
	free(runs);
	env = read_file("env");
	assert_non_null(strstr(env, "GMG_OUTER=outer\n"));
	assert_non_null(strstr(env, "GMG_OUTER_OVERRIDDEN=inner\n"));
	assert_null(strstr(env, "GMG_OUTER_OVERRIDDEN=outer"));
	assert_non_null(strstr(env, "GMG_PLUGIN_SET=from-kubeconfig\n"));
	free(env);
	info = read_file("info");
	j = cJSON_Parse(info);
	if (j == NULL)
		fail_msg("KUBERNETES_EXEC_INFO is not JSON: %s", info);
	assert_string_equal(cJSON_GetObjectItem(j, "apiVersion")->valuestring, V1);
	assert_string_equal(cJSON_GetObjectItem(j, "kind")->valuestring, "ExecCredential");
	cJSON *spec = cJSON_GetObjectItem(j, "spec"), *cl = cJSON_GetObjectItem(spec, "cluster");
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(spec, "interactive"))); /* stdin: /dev/null */
	assert_string_equal(cJSON_GetObjectItem(cl, "server")->valuestring,
	                    "https://api.example:6443");
	/* base64 of CA_PEM */
	assert_string_equal(cJSON_GetObjectItem(cl, "certificate-authority-data")->valuestring,
	                    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRF"
	                    "LS0tLS0K");
	assert_null(cJSON_GetObjectItem(cl, "insecure-skip-tls-verify"));
	cJSON_Delete(j);
	free(info);
	unsetenv("GMG_OUTER");
	unsetenv("GMG_OUTER_OVERRIDDEN");
}

static void expect_fail(struct execcred *c, int64_t now, const char *needle)
{
	struct execcred_value v;
	char err[512] = "";

	memset(&v, 0x5a, sizeof(v));
	assert_int_equal(execcred_get(c, now, &v, err, sizeof(err)), -1);
	assert_null(v.token);
	assert_null(v.cert);
	if (strstr(err, needle) == NULL)
		fail_msg("error \"%s\" does not mention \"%s\"", err, needle);
	/* Every message names the plugin and the user. */
	if (strstr(err, "exec plugin \"") == NULL || strstr(err, "(user \"admin\")") == NULL)
		fail_msg("error \"%s\" does not name the plugin and its user", err);
}

/* Each bad answer is an error naming the plugin and what is wrong, and nothing is cached. */
static void test_bad_answers(void **state)
{
	struct execcred *c = runner(NULL, NULL, 0, 5000);

	(void)state;
	answer("token: abc\n", 0);
	expect_fail(c, 0, "its output (11 bytes) is not a JSON object");
	answer("", 0);
	expect_fail(c, 0, "its output (0 bytes) is not a JSON object");
	answer(TOKEN_ANSWER("t", ""), 3);
	expect_fail(c, 0, "exited with status 3");
	answer("{\"apiVersion\":\"" V1BETA1 "\",\"kind\":\"ExecCredential\",\"status\":{"
	       "\"token\":\"t\"}}",
	       0);
	expect_fail(c, 0, "printed apiVersion \"" V1BETA1 "\" kind \"ExecCredential\", want " V1);
	answer("{\"apiVersion\":\"" V1 "\",\"kind\":\"Secret\",\"status\":{\"token\":\"t\"}}", 0);
	expect_fail(c, 0, "kind \"Secret\"");
	answer("{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\"}", 0);
	expect_fail(c, 0, "status missing");
	answer("{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{\"token\":7}}",
	       0);
	expect_fail(c, 0, "not a string");
	answer("{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{}}", 0);
	expect_fail(c, 0, "status has no credential");
	answer("{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{"
	       "\"clientCertificateData\":\"C\"}}",
	       0);
	expect_fail(c, 0, "clientCertificateData without clientKeyData");
	answer("{\"apiVersion\":\"" V1 "\",\"kind\":\"ExecCredential\",\"status\":{"
	       "\"token\":\"a\\nb\"}}",
	       0);
	expect_fail(c, 0, "status.token is multi-line");
	answer(TOKEN_ANSWER("t", ",\"expirationTimestamp\":\"tomorrow\""), 0);
	expect_fail(c, 0, "expirationTimestamp \"tomorrow\" is not an RFC 3339 time");
	answer(TOKEN_ANSWER("t", ",\"expirationTimestamp\":\"2026-01-01T00:00:00Z\""), 0);
	expect_fail(c, at("2026-01-01T00:00:00Z"), "already expired");
	assert_int_equal(plugin_runs(), 12);
	execcred_free(c);
}

/* A plugin that does not answer is killed at the timeout, and so is one that answers but does
 * not exit; one that prints too much is cut off at the cap; a missing command shows the install
 * hint; Always without a terminal refuses. */
static void test_run_failures(void **state)
{
	char *sleep_arg[] = {"sleep"}, *big_arg[] = {"big"}, *linger_arg[] = {"linger"};
	struct execcred *c = runner(NULL, sleep_arg, 1, 300);
	struct kube_config k = {.server = "https://h"};
	struct kube_exec e = {.user = "admin",
	                      .command = "gmg-no-such-plugin",
	                      .api_version = V1,
	                      .install_hint = "Install it with: apt-get install gmg-plugin",
	                      .interactive_mode = KUBE_EXEC_NEVER};
	char err[256] = "";
	double t0 = monotime_s();

	(void)state;
	expect_fail(c, 0, "no answer within 300 ms");
	assert_true(monotime_s() - t0 < 3.0);
	execcred_free(c);

	c = runner(NULL, big_arg, 1, 10000);
	expect_fail(c, 0, "printed more than 1048576 bytes");
	execcred_free(c);

	/* A full answer, stdout closed, and no exit: killed at the timeout, not waited for. */
	answer(TOKEN_ANSWER("t", ""), 0);
	c = runner(NULL, linger_arg, 1, 300);
	t0 = monotime_s();
	expect_fail(c, 0, "did not exit within 300 ms (killed)");
	assert_true(monotime_s() - t0 < 3.0);
	execcred_free(c);

	c = execcred_new(&e, &k, 1000, err, sizeof(err));
	assert_non_null(c);
	expect_fail(c, 0,
	            "exec plugin \"gmg-no-such-plugin\" (user \"admin\"): command not found. "
	            "Install it with: apt-get install gmg-plugin");
	execcred_free(c);
	e.install_hint = NULL;
	c = execcred_new(&e, &k, 1000, err, sizeof(err));
	expect_fail(c, 0, "command not found (not in PATH, or no such file)");
	execcred_free(c);

	e.command = plugin;
	e.interactive_mode = KUBE_EXEC_ALWAYS;
	c = execcred_new(&e, &k, 1000, err, sizeof(err));
	expect_fail(c, 0, "its interactiveMode is Always and stdin is not a terminal");
	execcred_free(c);
	assert_int_equal(plugin_runs(), 3); /* sleeper, big, linger; Always ran nothing */
}

static void test_parse_time(void **state)
{
	int64_t ms;

	(void)state;
	assert_int_equal(execcred_parse_time("1970-01-01T00:00:00Z", &ms), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(execcred_parse_time("2026-12-01T18:00:00Z", &ms), 0);
	assert_int_equal(ms, 1796148000000LL);
	assert_int_equal(execcred_parse_time("2026-12-01T19:30:00+01:30", &ms), 0);
	assert_int_equal(ms, 1796148000000LL);
	assert_int_equal(execcred_parse_time("2026-12-01T16:00:00-02:00", &ms), 0);
	assert_int_equal(ms, 1796148000000LL);
	assert_int_equal(execcred_parse_time("2026-12-01t18:00:00.25z", &ms), 0);
	assert_int_equal(ms, 1796148000250LL);
	assert_int_equal(execcred_parse_time("2026-12-01T18:00:00.123456789Z", &ms), 0);
	assert_int_equal(ms, 1796148000123LL);
	static const char *const bad[] = {"",
	                                  "2026-12-01",
	                                  "2026-12-01T18:00:00",
	                                  "2026-12-01 18:00:00Z",
	                                  "2026-13-01T18:00:00Z",
	                                  "2026-02-30T18:00:00Z",
	                                  "2026-12-01T24:00:00Z",
	                                  "2026-12-01T18:00:00.Z",
	                                  "2026-12-01T18:00:00+0100",
	                                  "2026-12-01T18:00:00Zjunk",
	                                  "2026-12-01T18:00:00+25:00"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (execcred_parse_time(bad[i], &ms) == 0)
			fail_msg("\"%s\" parsed", bad[i]);
}

int main(void)
{
	/* The plugin's interactive flag follows stdin: make it not a terminal for every run. */
	if (freopen("/dev/null", "r", stdin) == NULL)
		return 1;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_cached_until_expiry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_expiry_until_invalidated, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_client_certificate, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_how_it_is_run, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_answers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_failures, setup, teardown),
	    cmocka_unit_test(test_parse_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
