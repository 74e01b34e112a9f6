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
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
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

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_largest_fit_is_the_webhooks),
	    cmocka_unit_test(test_threshold_flag),
	    cmocka_unit_test(test_policy_limit_is_the_webhooks),
	    cmocka_unit_test(test_plugin_table_and_node),
	    cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
