/*
 * The whole-webhook rollout modes through the real binary (--cache watch) against the API
 * server TEST DOUBLE: --mode warn and --mode audit admit every placement enforce refuses, for
 * every refusal reason, and record it: warn as the answer's warning, audit silently in the
 * auditAnnotations entry "audit-violations"; both in
 * gpu_memory_guard_mode_admitted_total{mode,reason}.
 *
 * Three refusals, each admitted: over the threshold (20Gi on mode-a, 80Gi at 90 percent with
 * 60Gi already there),
 * no capacity known (mode-nocap: a GPU node without GFD labels or annotation), and no
 * declaration (a GPU pod without GPU_MEMORY_LIMIT). A fitting placement is answered as in
 * enforce: allowed, nothing recorded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"

static struct world W;
static int review_n;

static const char nocap_node[] =
    "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"mode-nocap\",\"labels\":{"
    "\"kubernetes.io/hostname\":\"mode-nocap\"}},\"spec\":{},\"status\":{\"capacity\":{"
    "\"nvidia.com/gpu\":\"1\"},\"allocatable\":{\"nvidia.com/gpu\":\"1\"}}}";

static int group_setup(void **state)
{
	(void)state;
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	if (world_add_node(&W, "mode-a", 81920, 1) ||
	    apiserver_double_put_node(W.api, nocap_node) != 0 ||
	    world_add_pod(&W, "inference", "resident", "60Gi", "mode-a") != 0)
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	world_free(&W);
	return 0;
}

struct seen {
	struct review_answer a;
	char audit[2048]; /* response.auditAnnotations["audit-violations"], "" when absent */
};

/* A dry-run pod CREATE of inference/name on node declaring limit (NULL: no declaration at all,
 * the env variable removed). */
static struct seen place(const char *name, const char *limit, const char *node)
{
	char uid[64], pod_uid[64];
	struct seen s;
	struct http_resp rs;

	memset(&s, 0, sizeof(s));
	snprintf(uid, sizeof(uid), "mode-review-%d", ++review_n);
	snprintf(pod_uid, sizeof(pod_uid), "mode-pod-%d", review_n);
	char *text = itest_pod_review(uid, name, pod_uid, limit ? limit : "1Gi", node, 1);
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON *c = cJSON_GetArrayItem(
	    cJSON_GetObjectItemCaseSensitive(
	        cJSON_GetObjectItemCaseSensitive(
	            cJSON_GetObjectItemCaseSensitive(
	                cJSON_GetObjectItemCaseSensitive(doc, "request"), "object"),
	            "spec"),
	        "containers"),
	    0);
	ITEST_CHECK(c != NULL, "no pod review");
	if (limit == NULL)
		cJSON_DeleteItemFromObjectCaseSensitive(c, "env");
	char *body = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	free(text);
	int rc = world_review(&W, body, &rs, &s.a);
	ITEST_CHECK(rc == 0 && s.a.well_formed && !strcmp(s.a.uid, uid),
	            "review %s: HTTP %ld: %.300s", uid, rs.code, rs.body ? rs.body : "");
	cJSON *ans = cJSON_Parse(rs.body);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ans, "response"),
	                                     "auditAnnotations"),
	    "audit-violations");
	snprintf(s.audit, sizeof(s.audit), "%s", cJSON_IsString(v) ? v->valuestring : "");
	cJSON_Delete(ans);
	http_resp_free(&rs);
	free(body);
	return s;
}

static double admitted(const char *mode, const char *reason)
{
	char *body = NULL, label[128];
	long code = world_health_get(&W, "/metrics", &body);
	ITEST_CHECK(code == 200 && body, "GET /metrics: %ld", code);
	snprintf(label, sizeof(label), "mode=\"%s\",reason=\"%s\"", mode, reason);
	double v = harness_metric(body, "gpu_memory_guard_mode_admitted_total", label, 0);
	free(body);
	return v;
}

static void start(const char *mode)
{
	const char *extra[] = {"--mode", mode, NULL};
	ITEST_CHECK(world_start_gmg(&W, extra, 30000) == 0, "gpu-memory-guard --mode %s", mode);
	itest_wait_synced(&W, 10000);
}

/* The three refusals and a fit under mode; check(s, what) checks each admitted one. */
static void each_refusal(const char *mode, void (*check)(const struct seen *s, const char *what))
{
	static const struct {
		const char *name, *limit, *node, *reason, *text;
	} cases[] = {
	    {"over", "20Gi", "mode-a", "OverThreshold", "above the 90 percent limit"},
	    {"nocap", "10Gi", "mode-nocap", "UnknownCapacity", "mode-nocap"},
	    {"undeclared", NULL, "mode-a", "InvalidDeclaration", "GPU_MEMORY_LIMIT"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double before = admitted(mode, cases[i].reason);
		struct seen s = place(cases[i].name, cases[i].limit, cases[i].node);
		ITEST_CHECK(s.a.allowed, "--mode %s refused %s (%s): %s", mode, cases[i].name,
		            cases[i].reason, s.a.message);
		check(&s, cases[i].text);
		ITEST_CHECK(admitted(mode, cases[i].reason) == before + 1,
		            "mode_admitted_total{mode=%s,reason=%s} not counted once", mode,
		            cases[i].reason);
	}
	double over = admitted(mode, "OverThreshold");
	struct seen s = place("fits", "1Gi", "mode-a");
	ITEST_CHECK(
	    s.a.allowed && s.a.warnings[0] == '\0' && s.audit[0] == '\0',
	    "a fitting placement under --mode %s: allowed %d, warnings \"%s\", audit \"%s\"", mode,
	    s.a.allowed, s.a.warnings, s.audit);
	ITEST_CHECK(admitted(mode, "OverThreshold") == over, "a fit counted as admitted by mode");
}

static void warned(const struct seen *s, const char *what)
{
	ITEST_CHECK(strstr(s->a.warnings, what) != NULL, "warning without \"%s\": \"%s\"", what,
	            s->a.warnings);
	ITEST_CHECK(s->audit[0] == '\0', "warn mode wrote an audit annotation: %s", s->audit);
}

static void audited(const struct seen *s, const char *what)
{
	ITEST_CHECK(s->a.warnings[0] == '\0', "audit mode warned the user: %s", s->a.warnings);
	ITEST_CHECK(strstr(s->audit, "--mode audit: ") == s->audit && strstr(s->audit, what),
	            "audit annotation without \"--mode audit: ...%s\": \"%s\"", what, s->audit);
}

static void test_warn_warns_every_refusal(void **state)
{
	(void)state;
	start("warn");
	each_refusal("warn", warned);
	ITEST_CHECK(world_stop_gmg(&W, SIGTERM, 20000) == 0, "stop");
}

static void test_audit_admits_and_records_every_refusal(void **state)
{
	(void)state;
	start("audit");
	each_refusal("audit", audited);
	ITEST_CHECK(world_stop_gmg(&W, SIGTERM, 20000) == 0, "stop");
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_warn_warns_every_refusal),
	    cmocka_unit_test(test_audit_admits_and_records_every_refusal),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
