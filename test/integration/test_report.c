/*
 * The report through the real binary (`gpu-memory-guard report` and its kubectl plugin name)
 * against the API server test double, with the webhook running on the same double: the
 * report's "largest fit" for a node is admitted by the webhook (dry run) and one byte more is
 * refused. Lists in pages of 2, so the report follows continue tokens; the kubeconfig by flag
 * and by $KUBECONFIG; an API server error and a bad flag end with a message and exit 1 / 2.
 *
 * gpu-node-a (test/data): 81559 MiB x 1, over its limit (nothing fits). gpu-node-roomy: 81559
 * MiB x 1 with one 30Gi pod: the limit (71.68Gi) binds. gpu-node-8x: 8 x 40960 MiB, empty: one
 * GPU's limit (36Gi) binds.
 *
 * GPUMemoryPolicy objects: the webhook runs --cache watch (it applies policies there), the
 * double serves them. The CRD missing (404) is no policy; an enforcing policy at 0.5 on
 * gpu-node-roomy gives the report's limit and largest fit, and the webhook admits that largest
 * fit and refuses one byte more; an invalid policy is a warning on stderr, applied nowhere.
 *
 * An exec credential plugin (a shell script the test writes, named by a kubeconfig the test
 * writes): its token is used for every call of a report (one run for all the pages); a token
 * the double refuses (401) is dropped and the plugin run again; a failing or missing plugin
 * ends the report with a message naming it.
 */
#define _GNU_SOURCE /* asprintf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

static struct world W;

static int group_setup(void **state)
{
	static const char *const extra[] = {"--threshold", "0.9", NULL};
	if (world_init(&W, 2))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch"; /* the webhook applies GPUMemoryPolicy objects from its cache */
	if (world_add_node(&W, "gpu-node-roomy", 81559, 1) ||
	    world_add_node(&W, "gpu-node-8x", 40960, 8) ||
	    world_add_pod(&W, "inference", "roomy-0", "30Gi", "gpu-node-roomy"))
		return -1;
	if (world_start_gmg(&W, extra, 30000))
		return -1;
	itest_wait_synced(&W, 10000);
	return 0;
}

static int group_teardown(void **state)
{
	world_free(&W);
	return 0;
}

/* Run cmd (a shell command line), its stdout into *out (caller frees); the exit status. */
static int run(const char *cmd, char **out)
{
	FILE *p = popen(cmd, "r");
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	ITEST_CHECK(p != NULL && buf != NULL, "popen %s", cmd);
	for (;;) {
		if (len + 4096 > cap)
			ITEST_CHECK((buf = realloc(buf, cap *= 2)) != NULL, "realloc");
		size_t n = fread(buf + len, 1, cap - len - 1, p);
		if (n == 0)
			break;
		len += n;
	}
	buf[len] = '\0';
	int st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The report's JSON for node (the binary called with extra flags). */
static cJSON *report_json(const char *extra)
{
	char cmd[2048], *out;
	/* --undeclared refuse: the harness's webhook is strict (harness.h), the report must
	 * count as it does */
	snprintf(cmd, sizeof(cmd), "%s report --kubeconfig %s -o json --undeclared refuse %s",
	         harness_binary(), W.kubeconfig, extra);
	int st = run(cmd, &out);
	ITEST_CHECK(st == 0, "report exited %d: %s", st, out);
	cJSON *j = cJSON_Parse(out);
	ITEST_CHECK(j != NULL, "report JSON does not parse: %.500s", out);
	free(out);
	return j;
}

static const cJSON *node_in(const cJSON *root, const char *name)
{
	const cJSON *n;
	cJSON_ArrayForEach(n, cJSON_GetObjectItem(root, "nodes"))
	{
		const cJSON *nm = cJSON_GetObjectItem(n, "name");
		if (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0)
			return n;
	}
	fail_msg("node %s not in the report", name);
	return NULL;
}

static uint64_t field(const cJSON *node, const char *name)
{
	const cJSON *v = cJSON_GetObjectItem(node, name);
	ITEST_CHECK(cJSON_IsNumber(v), "%s missing", name);
	return (uint64_t)v->valuedouble; /* exact: every size here is below 2^53 */
}

/* The webhook's answer to placing a 1-GPU pod declaring bytes on node (dry run). */
static int webhook_allows(const char *node, uint64_t bytes)
{
	static int n;
	char uid[64], limit[32];
	struct review_answer a;
	snprintf(uid, sizeof(uid), "report-%d", ++n);
	snprintf(limit, sizeof(limit), "%" PRIu64, bytes);
	char *body = harness_pod_review(uid, uid, limit, node, 1);
	itest_review(&W, body, uid, -1, &a);
	free(body);
	return a.allowed;
}

static void test_largest_fit_is_the_webhooks(void **state)
{
	cJSON *j = report_json("");
	static const char *const nodes[] = {"gpu-node-roomy", "gpu-node-8x"};
	const uint64_t gi = 1024ull * 1024 * 1024;

	for (size_t i = 0; i < 2; i++) {
		const cJSON *n = node_in(j, nodes[i]);
		uint64_t fit = field(n, "largestFitBytes");
		ITEST_CHECK(fit > gi, "%s: largest fit %" PRIu64, nodes[i], fit);
		ITEST_CHECK(webhook_allows(nodes[i], fit), "%s: %" PRIu64 " refused", nodes[i],
		            fit);
		ITEST_CHECK(!webhook_allows(nodes[i], fit + 1), "%s: %" PRIu64 " admitted",
		            nodes[i], fit + 1);
	}
	const cJSON *roomy = node_in(j, "gpu-node-roomy");
	assert_int_equal(field(roomy, "declaredBytes"), 30 * gi);
	assert_int_equal(field(roomy, "podCount"), 1);
	assert_int_equal(field(roomy, "largestFitBytes"),
	                 field(roomy, "limitBytes") - field(roomy, "declaredBytes"));
	const cJSON *a = node_in(j, "gpu-node-a");
	assert_int_equal(field(a, "largestFitBytes"), 0);
	assert_int_equal(field(a, "podCount"), 3);
	assert_false(webhook_allows("gpu-node-a", 1024 * 1024));
	cJSON_Delete(j);
}

/* The threshold flag is the report's view of the webhook's --threshold. */
static void test_threshold_flag(void **state)
{
	cJSON *j = report_json("--threshold 0.5");
	const cJSON *n = node_in(j, "gpu-node-8x");
	assert_int_equal(field(n, "largestFitBytes"), 40960ull * 1024 * 1024 / 2);
	cJSON_Delete(j);
}

/* What the webhook holds: its gpu_memory_guard_policies gauge, state usable or invalid. */
static double policies_held(const char *state_label)
{
	char *body = NULL;
	long code = world_health_get(&W, "/metrics", &body);
	ITEST_CHECK(code == 200 && body, "GET /metrics: %ld", code);
	double v = harness_metric(body, "gpu_memory_guard_policies", state_label, 0);
	free(body);
	return v;
}

static void wait_policies(double usable, double invalid)
{
	double end = harness_now() + 20.0;
	for (;;) {
		double u = policies_held("state=\"usable\""),
		       i = policies_held("state=\"invalid\"");
		if (u == usable && i == invalid)
			return;
		ITEST_CHECK(harness_now() < end, "policies usable %g invalid %g, waited for %g %g",
		            u, i, usable, invalid);
		usleep(50 * 1000);
	}
}

/* A policy selecting gpu-node-roomy by its hostname label, at 0.5, enforced. */
static const char half_roomy[] =
    "{\"apiVersion\":\"gpu-memory-guard.io/v1alpha1\",\"kind\":\"GPUMemoryPolicy\","
    "\"metadata\":{\"name\":\"half-roomy\",\"generation\":1},\"spec\":{\"nodeSelector\":{"
    "\"matchLabels\":{\"kubernetes.io/hostname\":\"gpu-node-roomy\"}},\"threshold\":0.5,"
    "\"mode\":\"enforce\"}}";

/* The report's limit on a node an enforcing policy selects is the webhook's: its largest fit is
 * admitted, one byte more refused; the CRD missing is no policy; an invalid one a warning. */
static void test_policy_limit_is_the_webhooks(void **state)
{
	const uint64_t mib = 1024ull * 1024, gi = 1024 * mib;
	char cmd[2048], *out;

	/* No CRD: no policy, not an error. */
	apiserver_double_set_policy_crd(W.api, 0);
	cJSON *j = report_json("");
	apiserver_double_set_policy_crd(W.api, 1);
	const cJSON *n = node_in(j, "gpu-node-roomy");
	ITEST_CHECK(!strcmp(cJSON_GetObjectItem(n, "thresholdSource")->valuestring, "flag"),
	            "threshold source without policies");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "policies")), 0);
	cJSON_Delete(j);

	ITEST_CHECK(apiserver_double_put_policy(W.api, half_roomy) == 0, "put policy");
	ITEST_CHECK(
	    apiserver_double_put_policy(
	        W.api, "{\"metadata\":{\"name\":\"broken\"},\"spec\":{\"threshold\":1.5}}") == 0,
	    "put policy");
	wait_policies(1, 1);

	j = report_json("");
	n = node_in(j, "gpu-node-roomy");
	uint64_t limit = field(n, "limitBytes"), fit = field(n, "largestFitBytes");
	assert_int_equal(limit, 81559 * mib / 2); /* the policy's 0.5, not the flags' 0.9 */
	assert_int_equal(field(n, "declaredBytes"), 30 * gi);
	assert_int_equal(field(n, "freeBytes"), limit - 30 * gi);
	assert_int_equal(fit, limit - 30 * gi);
	ITEST_CHECK(
	    !strcmp(cJSON_GetObjectItem(n, "thresholdSource")->valuestring, "policy") &&
	        !strcmp(cJSON_GetObjectItem(n, "thresholdPolicy")->valuestring, "half-roomy"),
	    "threshold source");
	ITEST_CHECK(webhook_allows("gpu-node-roomy", fit), "%" PRIu64 " refused", fit);
	ITEST_CHECK(!webhook_allows("gpu-node-roomy", fit + 1), "%" PRIu64 " admitted", fit + 1);
	/* the 8x node is not selected: the flags' 0.9 of one GPU */
	assert_int_equal(field(node_in(j, "gpu-node-8x"), "largestFitBytes"), 40960 * mib / 10 * 9);
	cJSON_Delete(j);

	/* The invalid policy: a warning line on stderr, with its error. */
	snprintf(cmd, sizeof(cmd), "%s report --kubeconfig %s 2>&1 >/dev/null", harness_binary(),
	         W.kubeconfig);
	assert_int_equal(run(cmd, &out), 0);
	itest_contains(out, "warning: GPUMemoryPolicy broken is not usable, applied to no node: ",
	               "the invalid policy's warning");
	itest_contains(out, "spec.threshold", "its error");
	free(out);

	ITEST_CHECK(apiserver_double_delete_policy(W.api, "half-roomy") == 0 &&
	                apiserver_double_delete_policy(W.api, "broken") == 0,
	            "delete policies");
	wait_policies(0, 0);
}

/* The kubectl plugin name, the kubeconfig from $KUBECONFIG, the table and --node. */
static void test_plugin_table_and_node(void **state)
{
	char cmd[2048], plugin[HARNESS_PATHMAX + 32], *out;
	snprintf(plugin, sizeof(plugin), "%s/kubectl-gpu_memory", W.dir);
	ITEST_CHECK(symlink(harness_binary(), plugin) == 0 || errno == EEXIST, "symlink");
	snprintf(cmd, sizeof(cmd), "KUBECONFIG=%s %s", W.kubeconfig, plugin);
	assert_int_equal(run(cmd, &out), 0);
	itest_contains(out, "NODE ", "table header");
	itest_contains(out, "LARGEST FIT", "table header");
	itest_contains(out, "\ngpu-node-8x ", "a row per GPU node");
	itest_contains(out, "320Gi", "the 8x node's capacity in Gi");
	free(out);

	snprintf(cmd, sizeof(cmd), "KUBECONFIG=%s %s --node gpu-node-a", W.kubeconfig, plugin);
	assert_int_equal(run(cmd, &out), 0);
	itest_contains(out, "NAMESPACE   NAME", "pod table");
	const char *legacy = strstr(out, "legacy-notebook"), *chat = strstr(out, "chat-7b-0");
	ITEST_CHECK(legacy && chat && legacy < chat, "pods by counted bytes: %s", out);
	ITEST_CHECK(strstr(out, "batch-summarize") == NULL, "a Succeeded pod listed: %s", out);
	free(out);
}

/* An API server error: exit 1, the message names the list and the status; a bad flag: 2. */
static void test_errors(void **state)
{
	char cmd[2048], *out;
	snprintf(cmd, sizeof(cmd), "%s report --kubeconfig %s 2>&1", harness_binary(),
	         W.kubeconfig);
	apiserver_double_set_fail(W.api, 500);
	int st = run(cmd, &out);
	apiserver_double_set_fail(W.api, 0);
	assert_int_equal(st, 1);
	itest_contains(out, "gpu-memory-guard report: ", "the command's name");
	itest_contains(out, "500", "the HTTP status");
	free(out);

	snprintf(cmd, sizeof(cmd), "%s report --node nope --kubeconfig %s 2>&1", harness_binary(),
	         W.kubeconfig);
	assert_int_equal(run(cmd, &out), 1);
	itest_contains(out, "node nope not found", "unknown node");
	free(out);

	snprintf(cmd, sizeof(cmd), "%s report -o yaml 2>&1", harness_binary());
	assert_int_equal(run(cmd, &out), 2);
	itest_contains(out, "--output: unknown format \"yaml\"", "bad flag");
	free(out);
}

/* The fake plugin: counts its runs, keeps KUBERNETES_EXEC_INFO, answers a token the double
 * refuses for its first $(cat exec-bad-runs) runs and then the one exec.env gives it; with
 * argument "fail" it complains on stderr and exits 4. */
static const char exec_plugin[] =
    "#!/bin/sh\n"
    "d=$(dirname \"$0\")\n"
    "echo run >> \"$d/exec-runs\"\n"
    "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$d/exec-info\"\n"
    "if [ \"$1\" = fail ]; then echo 'plugin: the SSO session has expired' >&2; exit 4; fi\n"
    "if [ \"$1\" = cert ]; then cat \"$d/exec-cert.json\"; exit 0; fi\n"
    "n=$(wc -l < \"$d/exec-runs\")\n"
    "tok=$GMG_TOKEN\n"
    "if [ \"$n\" -le \"$(cat \"$d/exec-bad-runs\")\" ]; then tok=revoked-token; fi\n"
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
    "\"status\":{\"token\":\"%s\",\"expirationTimestamp\":\"2999-01-01T00:00:00Z\"}}\\n' "
    "\"$tok\"\n";

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ITEST_CHECK(f != NULL && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

static char *read_text(const char *path)
{
	char *out = NULL, cmd[2 * HARNESS_PATHMAX + 64];
	snprintf(cmd, sizeof(cmd), "cat '%s'", path);
	ITEST_CHECK(run(cmd, &out) == 0, "read %s", path);
	return out;
}

/* The kubeconfig base (a token user) with its token replaced by an exec entry running command
 * with arg. */
static void write_exec_kubeconfig_from(const char *base, const char *path, const char *command,
                                       const char *arg)
{
	char *kc = read_text(base), *tok, *out = NULL;
	ITEST_CHECK((tok = strstr(kc, "    token: ")) != NULL, "token line in %s", base);
	*tok = '\0';
	ITEST_CHECK(asprintf(&out,
	                     "%s    exec:\n"
	                     "      apiVersion: client.authentication.k8s.io/v1\n"
	                     "      command: %s\n"
	                     "      args: [\"%s\"]\n"
	                     "      env: [{name: GMG_TOKEN, value: \"%s\"}]\n"
	                     "      interactiveMode: Never\n"
	                     "      provideClusterInfo: true\n"
	                     "      installHint: \"get it from the platform team's wiki\"\n%s",
	                     kc, command, arg, HARNESS_TOKEN, strchr(tok + 1, '\n') + 1) >= 0,
	            "asprintf");
	write_text(path, out);
	free(out);
	free(kc);
}

static void write_exec_kubeconfig(const char *path, const char *command, const char *arg)
{
	write_exec_kubeconfig_from(W.kubeconfig, path, command, arg);
}

static int exec_runs(void)
{
	char path[HARNESS_PATHMAX + 16], *s;
	int n = 0;
	snprintf(path, sizeof(path), "%s/exec-runs", W.dir);
	if (access(path, F_OK) != 0)
		return 0;
	s = read_text(path);
	for (char *p = s; (p = strstr(p, "run\n")) != NULL; p += 4)
		n++;
	free(s);
	return n;
}

static void test_exec_plugin(void **state)
{
	char plugin[HARNESS_PATHMAX + 32], kc[HARNESS_PATHMAX + 32], path[HARNESS_PATHMAX + 32];
	char cmd[4 * HARNESS_PATHMAX], *out;

	snprintf(plugin, sizeof(plugin), "%s/fake-auth-plugin", W.dir);
	snprintf(kc, sizeof(kc), "%s/exec-kubeconfig", W.dir);
	write_text(plugin, exec_plugin);
	ITEST_CHECK(chmod(plugin, 0755) == 0, "chmod");
	snprintf(path, sizeof(path), "%s/exec-bad-runs", W.dir);
	write_text(path, "0\n");
	write_exec_kubeconfig(kc, plugin, "ok");

	/* One run for the whole report: nodes, pods and policies in pages of 2. */
	unsigned long pages0 = apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS) +
	                       apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_NODES);
	snprintf(cmd, sizeof(cmd), "%s report --kubeconfig %s -o json 2>&1", harness_binary(), kc);
	ITEST_CHECK(run(cmd, &out) == 0, "report with the exec plugin: %s", out);
	itest_contains(out, "\"gpu-node-8x\"", "the report");
	free(out);
	ITEST_CHECK(apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_PODS) +
	                    apiserver_double_count(W.api, APISERVER_DOUBLE_LIST_NODES) - pages0 >=
	                4,
	            "the report listed several pages");
	assert_int_equal(exec_runs(), 1);
	/* KUBERNETES_EXEC_INFO: v1, not interactive (no terminal), the cluster's server. */
	snprintf(path, sizeof(path), "%s/exec-info", W.dir);
	out = read_text(path);
	itest_contains(out, "\"apiVersion\":\"client.authentication.k8s.io/v1\"", "exec info");
	itest_contains(out, "\"interactive\":false", "exec info");
	char server[64];
	snprintf(server, sizeof(server), "\"server\":\"https://127.0.0.1:%u\"",
	         apiserver_double_port(W.api));
	itest_contains(out, server, "exec info's cluster");
	free(out);

	/* A revoked token (401): dropped, the plugin run again, the report succeeds. */
	snprintf(path, sizeof(path), "%s/exec-bad-runs", W.dir);
	write_text(path,
	           "2\n"); /* run 2 (the next) answers the revoked token, run 3 the good one */
	unsigned long refused0 = apiserver_double_count(W.api, APISERVER_DOUBLE_UNAUTHORIZED);
	ITEST_CHECK(run(cmd, &out) == 0, "report after a 401: %s", out);
	free(out);
	assert_int_equal(apiserver_double_count(W.api, APISERVER_DOUBLE_UNAUTHORIZED) - refused0,
	                 1);
	assert_int_equal(exec_runs(), 3);

	/* The plugin fails: its stderr reaches the user, then our message naming it. */
	write_exec_kubeconfig(kc, plugin, "fail");
	snprintf(cmd, sizeof(cmd), "%s report --kubeconfig %s 2>&1", harness_binary(), kc);
	assert_int_equal(run(cmd, &out), 1);
	itest_contains(out, "plugin: the SSO session has expired", "the plugin's stderr");
	itest_contains(out, "exec plugin \"", "the plugin named");
	itest_contains(out, "(user \"webhook\"): exited with status 4", "its status");
	free(out);

	/* Missing: the install hint. */
	write_exec_kubeconfig(kc, "gmg-no-such-auth-plugin", "ok");
	assert_int_equal(run(cmd, &out), 1);
	itest_contains(out,
	               "exec plugin \"gmg-no-such-auth-plugin\" (user \"webhook\"): command not "
	               "found. get it from the platform team's wiki",
	               "the install hint");
	free(out);

	/* serve refuses a kubeconfig with a plugin: the webhook authenticates as its account. */
	snprintf(cmd, sizeof(cmd),
	         "%s serve --kubeconfig %s --tls-cert-file /dev/null --tls-key-file /dev/null 2>&1",
	         harness_binary(), kc);
	ITEST_CHECK(run(cmd, &out) != 0, "serve started with an exec kubeconfig: %s", out);
	itest_contains(out, "exec credential plugin, which serve does not run", "serve's refusal");
	free(out);
}

/* The plugin's answer: a client certificate and key, PEM in JSON strings. */
static void write_cert_answer(const struct testcert *client)
{
	char path[HARNESS_PATHMAX + 32], *cert = testcert_cert_pem(client),
	                                 *key = testcert_key_pem(client);
	cJSON *j = cJSON_CreateObject(), *st = cJSON_AddObjectToObject(j, "status");
	cJSON_AddStringToObject(j, "apiVersion", "client.authentication.k8s.io/v1");
	cJSON_AddStringToObject(j, "kind", "ExecCredential");
	cJSON_AddStringToObject(st, "clientCertificateData", cert);
	cJSON_AddStringToObject(st, "clientKeyData", key);
	char *text = cJSON_Print(j);
	ITEST_CHECK(text != NULL, "cJSON_Print");
	snprintf(path, sizeof(path), "%s/exec-cert.json", W.dir);
	write_text(path, text);
	free(text);
	cJSON_Delete(j);
	free(cert);
	free(key);
}

/* A plugin's client certificate authenticates the report to an API server that trusts its CA
 * (and takes no token the report has); one from another CA is refused (401, exit 1). */
static void test_exec_plugin_client_certificate(void **state)
{
	struct apiserver_double_opts o = {0};
	struct apiserver_double *mtls;
	struct testcert *srv = testcert_new_server(W.ca, "apiserver-test-double", 15, 86400);
	struct testcert *client = testcert_new_client(W.ca, "report-user", 16);
	struct testcert *other_ca = testcert_new_ca("another CA");
	struct testcert *stranger = testcert_new_client(other_ca, "stranger", 17);
	char err[256], server[64], base[HARNESS_PATHMAX + 32], kc[HARNESS_PATHMAX + 32];
	char plugin[HARNESS_PATHMAX + 32], cmd[4 * HARNESS_PATHMAX], *ca = testcert_cert_pem(W.ca),
	                                                             *out;

	o.cert_pem = testcert_cert_pem(srv);
	o.key_pem = testcert_key_pem(srv);
	o.token = "a token nobody presents";
	o.client_ca_pem = ca;
	mtls = apiserver_double_new(&o, err, sizeof err);
	free((char *)o.cert_pem);
	free((char *)o.key_pem);
	ITEST_CHECK(mtls != NULL, "mTLS double: %s", err);
	ITEST_CHECK(apiserver_double_load_dir(mtls, harness_data_dir(), err, sizeof err) > 0,
	            "load: %s", err);
	snprintf(server, sizeof server, "https://127.0.0.1:%u", apiserver_double_port(mtls));
	snprintf(base, sizeof(base), "%s/mtls-base-kubeconfig", W.dir);
	snprintf(kc, sizeof(kc), "%s/mtls-exec-kubeconfig", W.dir);
	snprintf(plugin, sizeof(plugin), "%s/fake-auth-plugin", W.dir);
	write_text(plugin, exec_plugin);
	ITEST_CHECK(chmod(plugin, 0755) == 0, "chmod");
	ITEST_CHECK(testcerts_write_kubeconfig(base, server, ca, "placeholder") == 0, "kubeconfig");
	write_exec_kubeconfig_from(base, kc, plugin, "cert");

	write_cert_answer(client);
	snprintf(cmd, sizeof(cmd), "%s report --kubeconfig %s -o json 2>&1", harness_binary(), kc);
	ITEST_CHECK(run(cmd, &out) == 0, "report with the plugin's certificate: %s", out);
	itest_contains(out, "\"gpu-node-a\"", "the report");
	free(out);

	write_cert_answer(stranger);
	assert_int_equal(run(cmd, &out), 1);
	itest_contains(out, "401", "a certificate of another CA refused");
	free(out);

	free(ca);
	apiserver_double_free(mtls);
	testcert_free(srv);
	testcert_free(client);
	testcert_free(stranger);
	testcert_free(other_ca);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_largest_fit_is_the_webhooks),
	    cmocka_unit_test(test_threshold_flag),
	    cmocka_unit_test(test_policy_limit_is_the_webhooks),
	    cmocka_unit_test(test_plugin_table_and_node),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_exec_plugin),
	    cmocka_unit_test(test_exec_plugin_client_certificate),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
