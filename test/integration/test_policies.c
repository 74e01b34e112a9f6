/*
 * GPUMemoryPolicy objects through the real binary (--cache watch, policies on by default)
 * against the API server TEST DOUBLE, which serves them as a list and a watch at
 * /apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies (no validation of its own: the
 * webhook's must catch what the CRD's would).
 *
 * In order, in one process: the CRD not installed (404: flags only, /readyz says so), then
 * installed and picked up without a restart; an enforcing policy refuses over its threshold on
 * the node it selects and nowhere else; the same policy switched to audit admits with the
 * auditAnnotations entry and the metric; an invalid policy is counted and applies nowhere; the
 * seed's realtime/batch tiers refuse and admit as stated; deleting the policies restores the
 * flags.
 *
 * Nodes: pol-a 80Gi (1 GPU of 81920 MiB, selected: label nvidia.com/gpu.memory=81920),
 * pol-b 40Gi (not selected). Flags: threshold 0.9.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <unistd.h>

#include "itest.h"
#define POLICIES_MAX 1024 /* lib/cluster/policies.h */

static struct world W;
static int review_n;

static int group_setup(void **state)
{
	(void)state;
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	apiserver_double_set_policy_crd(W.api, 0);
	if (world_add_node(&W, "pol-a", 81920, 1) || world_add_node(&W, "pol-b", 40960, 1) ||
	    world_add_node(&W, "pol-c", 81920, 1))
		return -1;
	if (world_start_gmg(&W, NULL, 30000))
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	world_free(&W);
	return 0;
}

/* A dry-run pod CREATE of inference/name on node, declaring limit, of priority class pc (NULL:
 * none). Returns the answer; *audit gets response.auditAnnotations["audit-violations"] or "". */
static struct review_answer place_ex(const char *name, const char *limit, const char *node,
                                     const char *pc, const char *tier, int dry_run, char *audit,
                                     size_t audit_cap)
{
	char uid[64], pod_uid[64];
	struct review_answer a;
	struct http_resp rs;

	snprintf(uid, sizeof(uid), "pol-review-%d", ++review_n);
	snprintf(pod_uid, sizeof(pod_uid), "pol-pod-%d", review_n);
	char *text = itest_pod_review(uid, name, pod_uid, limit, node, dry_run);
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "request"),
	                                     "object"),
	    "spec");
	ITEST_CHECK(spec != NULL, "no pod review");
	if (pc != NULL)
		cJSON_AddStringToObject(spec, "priorityClassName", pc);
	if (tier != NULL) { /* metadata.labels {"tier": tier} */
		cJSON *md = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(
		        cJSON_GetObjectItemCaseSensitive(doc, "request"), "object"),
		    "metadata");
		cJSON_DeleteItemFromObjectCaseSensitive(md, "labels");
		cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "labels"), "tier", tier);
	}
	char *body = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	free(text);
	int rc = world_review(&W, body, &rs, &a);
	ITEST_CHECK(rc == 0 && a.well_formed && !strcmp(a.uid, uid), "review %s: HTTP %ld: %.300s",
	            uid, rs.code, rs.body ? rs.body : "");
	if (audit != NULL) {
		cJSON *ans = cJSON_Parse(rs.body);
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(
		        cJSON_GetObjectItemCaseSensitive(ans, "response"), "auditAnnotations"),
		    "audit-violations");
		snprintf(audit, audit_cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
		cJSON_Delete(ans);
	}
	http_resp_free(&rs);
	free(body);
	return a;
}

static struct review_answer place(const char *name, const char *limit, const char *node,
                                  const char *pc, int dry_run, char *audit, size_t audit_cap)
{
	return place_ex(name, limit, node, pc, NULL, dry_run, audit, audit_cap);
}

/* label NULL: the sum over every series of name */
static double metric(const char *name, const char *label)
{
	char *body = NULL;
	long code = world_health_get(&W, "/metrics", &body);
	ITEST_CHECK(code == 200 && body, "GET /metrics: %ld", code);
	double v = harness_metric(body, name, label, label == NULL);
	free(body);
	return v;
}

/* Wait until the webhook holds usable/invalid policies as given (its metric). */
static void wait_policies(double usable, double invalid)
{
	double end = harness_now() + 20.0;
	for (;;) {
		double u = metric("gpu_memory_guard_policies", "state=\"usable\"");
		double i = metric("gpu_memory_guard_policies", "state=\"invalid\"");
		if (u == usable && i == invalid)
			return;
		ITEST_CHECK(harness_now() < end, "policies usable %g invalid %g, waited for %g %g",
		            u, i, usable, invalid);
		usleep(50 * 1000);
	}
}

/* Wait until a dry run of name/limit on node is answered allowed (1) or refused (0). */
static struct review_answer wait_verdict(const char *limit, const char *node, const char *pc,
                                         int allowed)
{
	double end = harness_now() + 20.0;
	for (;;) {
		struct review_answer a = place("probe", limit, node, pc, 1, NULL, 0);
		if (a.allowed == allowed)
			return a;
		ITEST_CHECK(harness_now() < end, "%s on %s still allowed=%d: %s", limit, node,
		            a.allowed, a.message);
		usleep(50 * 1000);
	}
}

static int put_policy(const char *json)
{
	return apiserver_double_put_policy(W.api, json);
}

static const char half[] =
    "{\"apiVersion\":\"gpu-memory-guard.io/v1alpha1\",\"kind\":\"GPUMemoryPolicy\","
    "\"metadata\":{\"name\":\"half\",\"generation\":1},\"spec\":{\"nodeSelector\":{"
    "\"matchExpressions\":[{\"key\":\"nvidia.com/gpu.memory\",\"operator\":\"In\","
    "\"values\":[\"81920\"]}]},\"threshold\":0.5,\"mode\":\"%s\"}}";

static void test_crd_missing_then_installed(void **state)
{
	char *body = NULL;
	char json[1024];
	(void)state;

	/* Not installed: synced with no policy (the flags decide), and /readyz says why. */
	double end = harness_now() + 20.0;
	for (;;) {
		free(body);
		body = NULL;
		world_health_get(&W, "/readyz", &body);
		if (body && strstr(body, "CRD is not installed"))
			break;
		ITEST_CHECK(harness_now() < end, "/readyz never said the CRD is missing: %s",
		            body ? body : "(none)");
		usleep(50 * 1000);
	}
	free(body);
	struct review_answer a = place("flags", "60Gi", "pol-a", NULL, 1, NULL, 0);
	ITEST_CHECK(a.allowed, "60Gi of 80Gi under the flags' 90 percent refused: %s", a.message);
	/* Installed, with a policy: read without a restart (the LIST is retried). */
	apiserver_double_set_policy_crd(W.api, 1);
	snprintf(json, sizeof(json), half, "enforce");
	ITEST_CHECK(put_policy(json) == 0, "put policy");
	wait_policies(1, 0);
	itest_wait_synced(&W, 10000);
}

static void test_enforce_selected_node_only(void **state)
{
	(void)state;
	struct review_answer a = wait_verdict("60Gi", "pol-a", NULL, 0);
	itest_contains(a.message, "above the 50 percent limit", "refusal");
	itest_contains(a.message, "GPUMemoryPolicy \"half\"", "refusal names the policy");
	a = place("fits", "40Gi", "pol-a", NULL, 1, NULL, 0);
	ITEST_CHECK(a.allowed, "40Gi (exactly 50 percent) refused: %s", a.message);
	/* pol-b is not selected: the flags' 90 percent */
	a = place("other", "30Gi", "pol-b", NULL, 1, NULL, 0);
	ITEST_CHECK(a.allowed, "30Gi of 40Gi on the unselected node refused: %s", a.message);
	/* node_limit_bytes is the threshold in force (docs/server.md): the policy's on pol-a */
	double lim = metric("gpu_memory_guard_node_limit_bytes", "node=\"pol-a\"");
	ITEST_CHECK(lim == 42949672960.0, "node_limit_bytes{pol-a} %.0f, want 50 percent of 80Gi",
	            lim);
	lim = metric("gpu_memory_guard_node_limit_bytes", "node=\"pol-b\"");
	ITEST_CHECK(lim == 38654705664.0, "node_limit_bytes{pol-b} %.0f, want 90 percent of 40Gi",
	            lim);
}

static void test_audit_mode(void **state)
{
	char json[1024], audit[2048];
	(void)state;

	snprintf(json, sizeof(json), half, "audit");
	ITEST_CHECK(put_policy(json) == 0, "put policy");
	wait_verdict("60Gi", "pol-a", NULL, 1);
	/* 60Gi on one 80Gi GPU: over the audited 50 percent of the card (NeverFits) */
	double before = metric("gpu_memory_guard_policy_audit_violations_total", NULL);
	struct review_answer a = place("audited", "60Gi", "pol-a", NULL, 1, audit, sizeof(audit));
	ITEST_CHECK(a.allowed, "audit mode refused: %s", a.message);
	itest_contains(audit, "GPUMemoryPolicy \"half\" (audit)", "auditAnnotations");
	/* an auditing policy changes no limit: the flags' 90 percent is in force */
	double lim = metric("gpu_memory_guard_node_limit_bytes", "node=\"pol-a\"");
	ITEST_CHECK(lim == 77309411328.0, "node_limit_bytes{pol-a} %.0f, want 90 percent of 80Gi",
	            lim);
	itest_contains(audit, "above the 50 percent limit", "auditAnnotations");
	double after = metric("gpu_memory_guard_policy_audit_violations_total", NULL);
	double never =
	    metric("gpu_memory_guard_policy_audit_violations_total", "reason=\"NeverFits\"");
	ITEST_CHECK(after == before + 1 && never >= 1, "audit metric %g -> %g (NeverFits %g)",
	            before, after, never);
	/* within the audited threshold: no entry */
	a = place("quiet", "30Gi", "pol-a", NULL, 1, audit, sizeof(audit));
	ITEST_CHECK(a.allowed && audit[0] == '\0', "30Gi: allowed %d, audit \"%s\"", a.allowed,
	            audit);
	/* the flags still enforce beside it */
	a = place("toobig", "73Gi", "pol-a", NULL, 1, NULL, 0);
	ITEST_CHECK(!a.allowed, "73Gi of 80Gi admitted beside an audit policy");
}

static void test_invalid_policy_counted_applied_nowhere(void **state)
{
	(void)state;
	ITEST_CHECK(
	    put_policy("{\"metadata\":{\"name\":\"broken\"},\"spec\":{\"threshold\":1.5}}") == 0,
	    "put policy");
	wait_policies(1, 1);
	struct review_answer a = place("still", "30Gi", "pol-a", NULL, 1, NULL, 0);
	ITEST_CHECK(a.allowed, "an invalid policy changed a decision: %s", a.message);
	ITEST_CHECK(apiserver_double_delete_policy(W.api, "broken") == 0, "delete");
	wait_policies(1, 0);
}

static void test_seed_tiers(void **state)
{
	char json[2048];
	(void)state;

	ITEST_CHECK(apiserver_double_delete_policy(W.api, "half") == 0, "delete");
	snprintf(json, sizeof(json),
	         "{\"metadata\":{\"name\":\"realtime-batch\",\"generation\":1},\"spec\":{"
	         "\"nodeSelector\":{\"matchLabels\":{\"nvidia.com/gpu.memory\":\"81920\"}},"
	         "\"tiers\":[{\"name\":\"realtime\",\"priorityClassNames\":[\"realtime\"],"
	         "\"maxShare\":0.6},{\"name\":\"batch\",\"priorityClassNames\":[\"batch\"],"
	         "\"yield\":{\"tier\":\"realtime\",\"above\":0.8}}]}}");
	ITEST_CHECK(put_policy(json) == 0, "put policy");
	wait_policies(1, 0);
	/* realtime alone: at most 48Gi */
	struct review_answer a = wait_verdict("49Gi", "pol-a", "realtime", 0);
	itest_contains(a.message, "tier \"realtime\"", "tier refusal");
	a = place("rt", "48Gi", "pol-a", "realtime", 1, NULL, 0);
	ITEST_CHECK(a.allowed, "48Gi realtime refused: %s", a.message);
	/* 40Gi of realtime placed (not a dry run): above 80 percent of 48Gi */
	a = place("rt-0", "40Gi", "pol-a", "realtime", 0, NULL, 0);
	ITEST_CHECK(a.allowed, "40Gi realtime refused: %s", a.message);
	a = place("batch-0", "1Gi", "pol-a", "batch", 1, NULL, 0);
	ITEST_CHECK(!a.allowed, "batch admitted while realtime is above 80 percent of its share");
	itest_contains(a.message, "yields to tier \"realtime\"", "yield refusal");
	/* a pod of no tier: the node threshold only (40 + 30 <= 72) */
	a = place("plain", "30Gi", "pol-a", NULL, 1, NULL, 0);
	ITEST_CHECK(a.allowed, "a pod of no tier refused: %s", a.message);
	ITEST_CHECK(apiserver_double_delete_policy(W.api, "realtime-batch") == 0, "delete");
	wait_policies(0, 0);
	a = place("batch-1", "1Gi", "pol-a", "batch", 1, NULL, 0);
	ITEST_CHECK(a.allowed, "batch refused after the policy was deleted: %s", a.message);
}

/* Issue 22: with no policy selecting by them, bound GPU pods are cached without their labels;
 * a policy whose tiers select by labels, created after they were cached, must see them (the
 * cache relists pods), never read them as "no labels". On pol-c (80Gi, nothing else on it):
 * rt-a (tier=realtime, 20Gi) and bt-b (tier=batch, 20Gi), then tier realtime maxShare 0.5
 * (40Gi). A realtime pod of 25Gi: 45Gi with rt-a, refused; it would be admitted if rt-a were
 * read as labelless (in no tier). One of 15Gi: 35Gi, admitted once the labels are read again;
 * refused while rt-a and bt-b count in every tier (their tier unknown). */
static void test_label_tiers_after_sync(void **state)
{
	(void)state;

	ITEST_CHECK(world_add_pod_labeled(&W, "ml", "rt-a", "20Gi", "pol-c",
	                                  "{\"tier\":\"realtime\",\"app\":\"serve\"}") == 0 &&
	                world_add_pod_labeled(&W, "ml", "bt-b", "20Gi", "pol-c",
	                                      "{\"tier\":\"batch\",\"app\":\"train\"}") == 0,
	            "add pods");
	double end = harness_now() + 20.0;
	while (metric("gpu_memory_guard_node_declared_bytes", "node=\"pol-c\"") !=
	       40.0 * 1073741824.0) {
		ITEST_CHECK(harness_now() < end, "pol-c's two pods never cached");
		usleep(50 * 1000);
	}
	double relists = metric("gpu_memory_guard_cache_relists_total", "resource=\"pods\"");
	ITEST_CHECK(put_policy("{\"metadata\":{\"name\":\"by-label\",\"generation\":1},\"spec\":{"
	                       "\"nodeSelector\":{\"matchLabels\":{\"kubernetes.io/hostname\":"
	                       "\"pol-c\"}},\"tiers\":[{\"name\":\"realtime\",\"podSelector\":{"
	                       "\"matchLabels\":{\"tier\":\"realtime\"}},\"maxShare\":0.5}]}}") ==
	                0,
	            "put policy");
	wait_policies(1, 0);
	/* from the moment the policy is read, and after the relist alike */
	struct review_answer a = place_ex("rt-25", "25Gi", "pol-c", NULL, "realtime", 1, NULL, 0);
	ITEST_CHECK(!a.allowed, "25Gi realtime admitted beside rt-a's 20Gi (over 40Gi)");
	end = harness_now() + 20.0;
	for (;;) {
		a = place_ex("rt-15", "15Gi", "pol-c", NULL, "realtime", 1, NULL, 0);
		if (a.allowed)
			break;
		ITEST_CHECK(harness_now() < end, "15Gi realtime still refused: %s", a.message);
		usleep(50 * 1000);
	}
	/* The API path admits rt-15 from the moment the watch ends for the relist, before the
	 * LIST is done (a LIST slowed by 400 ms gave 0 here, the cascade CI saw at stop 32):
	 * counted once synced. */
	itest_wait_synced(&W, 10000); /* the cache decides again, not the API path */
	double after = metric("gpu_memory_guard_cache_relists_total", "resource=\"pods\"");
	ITEST_CHECK(after == relists + 1, "pods relisted %g times for the policy, want 1",
	            after - relists);
	a = place_ex("rt-15", "15Gi", "pol-c", NULL, "realtime", 1, NULL, 0);
	ITEST_CHECK(a.allowed, "15Gi realtime refused from the cache: %s", a.message);
	a = place_ex("rt-25", "25Gi", "pol-c", NULL, "realtime", 1, NULL, 0);
	ITEST_CHECK(!a.allowed, "25Gi realtime admitted from the cache beside rt-a's 20Gi");
	itest_contains(a.message, "tier \"realtime\"", "tier refusal");
	/* a batch pod is in no tier: the node threshold only (40 + 30 <= 72) */
	a = place_ex("bt-30", "30Gi", "pol-c", NULL, "batch", 1, NULL, 0);
	ITEST_CHECK(a.allowed, "30Gi batch refused: %s", a.message);
	ITEST_CHECK(apiserver_double_delete_policy(W.api, "by-label") == 0, "delete");
	wait_policies(0, 0);
}

/* Issue 22, attack: a policy whose tiers select by labels but that does not parse applies
 * nowhere, so bound pods need not keep labels for it; its events (ADDED, the status written
 * back, MODIFIED) must not end the pods' watch and LIST every pod again, each time, on every
 * replica at once. Bound GPU pods are on pol-c (test_label_tiers_after_sync), with no policy
 * wanting their labels. */
static void test_invalid_label_policy_no_relist(void **state)
{
	(void)state;
	double relists = metric("gpu_memory_guard_cache_relists_total", "resource=\"pods\"");
	/* maxShare 2 is out of range: invalid */
	ITEST_CHECK(put_policy("{\"metadata\":{\"name\":\"bad-sel\",\"generation\":1},"
	                       "\"spec\":{\"tiers\":[{\"name\":\"rt\",\"podSelector\":{"
	                       "\"matchLabels\":{\"tier\":\"realtime\"}},\"maxShare\":2}]}}") == 0,
	            "put policy");
	wait_policies(0, 1);
	ITEST_CHECK(put_policy("{\"metadata\":{\"name\":\"bad-sel\",\"generation\":2},"
	                       "\"spec\":{\"tiers\":[{\"name\":\"rt\",\"podSelector\":{"
	                       "\"matchLabels\":{\"tier\":\"batch\"}},\"maxShare\":3}]}}") == 0,
	            "modify policy");
	usleep(1500 * 1000); /* a relist asked for would be done by now (a few pods) */
	double after = metric("gpu_memory_guard_cache_relists_total", "resource=\"pods\"");
	ITEST_CHECK(after == relists, "pods relisted %g times for an invalid policy, want 0",
	            after - relists);
	ITEST_CHECK(apiserver_double_delete_policy(W.api, "bad-sel") == 0, "delete");
	wait_policies(0, 0);
}

/* More policies than the store holds (POLICIES_MAX): one is not stored, and a policy not read
 * may be stricter than the flags, so placements are refused (PoliciesNotRead), as before the
 * policies are read; never decided without it. Last: the world ends with it. */
static void test_store_full_fails_closed(void **state)
{
	char json[512];
	(void)state;

	for (int i = 0; i < POLICIES_MAX; i++) {
		snprintf(json, sizeof(json),
		         "{\"metadata\":{\"name\":\"fill-%04d\",\"generation\":1},\"spec\":{"
		         "\"nodeSelector\":{\"matchLabels\":{\"no-such-label\":\"x\"}}}}",
		         i);
		ITEST_CHECK(put_policy(json) == 0, "put filler %d", i);
	}
	wait_policies(POLICIES_MAX, 0);
	/* flags: 30Gi fits pol-b's 36Gi */
	struct review_answer a = place("full-0", "30Gi", "pol-b", NULL, 1, NULL, 0);
	ITEST_CHECK(a.allowed, "30Gi on pol-b refused: %s", a.message);
	/* one more, enforcing 50 percent (20Gi) on pol-b: not storable */
	ITEST_CHECK(put_policy("{\"metadata\":{\"name\":\"zz-strict\",\"generation\":1},"
	                       "\"spec\":{\"nodeSelector\":{\"matchLabels\":{"
	                       "\"nvidia.com/gpu.memory\":\"40960\"}},\"threshold\":0.5}}") == 0,
	            "put zz-strict");
	a = wait_verdict("30Gi", "pol-b", NULL, 0);
	print_message("refused with the store full: %s\n", a.message);
	sleep(3); /* and stays so (the relist that cannot store it must not say synced) */
	a = place("full-1", "30Gi", "pol-b", NULL, 1, NULL, 0);
	ITEST_CHECK(!a.allowed,
	            "30Gi on pol-b admitted without the policy the store could not hold");
	/* A replica refusing every GPU placement is not ready: the Service sends reviews to the
	 * others (issue 24). */
	char *body = NULL;
	long code = world_health_get(&W, "/readyz", &body);
	ITEST_CHECK(code == 503 && body && strstr(body, "GPUMemoryPolicy objects not read"),
	            "/readyz with the policies unread: %ld %s", code, body ? body : "(none)");
	free(body);
	ITEST_CHECK(metric("gpu_memory_guard_ready", NULL) == 0, "ready gauge 1 while not ready");
	/* Ready again once it can decide: without zz-strict every policy fits, and the next
	 * relist (forced here by ending the watches) stores them all. */
	ITEST_CHECK(apiserver_double_delete_policy(W.api, "zz-strict") == 0, "delete zz-strict");
	apiserver_double_cut_watches(W.api);
	double end = harness_now() + 20.0;
	while ((code = world_health_get(&W, "/readyz", NULL)) != 200) {
		ITEST_CHECK(harness_now() < end, "/readyz %ld 20 s after the store had room", code);
		usleep(50 * 1000);
	}
	ITEST_CHECK(metric("gpu_memory_guard_ready", NULL) == 1, "ready gauge 0 while ready");
	a = place("full-2", "30Gi", "pol-b", NULL, 1, NULL, 0);
	ITEST_CHECK(a.allowed, "30Gi on pol-b refused once every policy was read: %s", a.message);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crd_missing_then_installed),
	    cmocka_unit_test(test_enforce_selected_node_only),
	    cmocka_unit_test(test_audit_mode),
	    cmocka_unit_test(test_invalid_policy_counted_applied_nowhere),
	    cmocka_unit_test(test_seed_tiers),
	    cmocka_unit_test(test_label_tiers_after_sync),
	    cmocka_unit_test(test_invalid_label_policy_no_relist),
	    cmocka_unit_test(test_store_full_fails_closed),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
