/*
 * Every fixture of test/data through the real binary over TLS, against the API server test
 * double serving node-gpu-node-a.json and podlist-gpu-node-a.json (answers per the fixtures
 * README), plus placements on extra nodes sized so that the expected answer pins the
 * computation: pagination followed, Binding looked up, dryRun reserving nothing, the
 * init/sidecar rule, and ledger reconcile when a pod becomes visible on its node.
 *
 * gpu-node-a: 81559 MiB x 1 GPU, 90% budget = 73403.1 MiB (71.68Gi); already there
 * 20Gi + 20Gi + one whole GPU (legacy-notebook) = 119.6Gi, so any placement is denied.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "itest.h"

static struct world W;

/* A node whose labels say 81559 MiB x 1 but whose annotations override memory (40Gi per GPU)
 * and threshold (0.5): budget 20Gi. */
static const char *ANNOTATED_NODE =
    "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"gpu-node-ann\","
    "\"labels\":{\"nvidia.com/gpu.count\":\"1\",\"nvidia.com/gpu.memory\":\"81559\"},"
    "\"annotations\":{\"gpu-memory-guard.io/gpu-memory\":\"40Gi\","
    "\"gpu-memory-guard.io/threshold\":\"0.5\"}},\"status\":{\"allocatable\":"
    "{\"nvidia.com/gpu\":\"1\"}}}";

/* A node without any GPU memory information. */
static const char *UNKNOWN_NODE =
    "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"gpu-node-unknown\","
    "\"labels\":{\"kubernetes.io/os\":\"linux\"}},\"status\":{\"allocatable\":"
    "{\"nvidia.com/gpu\":\"2\"}}}";

static int group_setup(void **state)
{
	static const char *const extra[] = {"--api-timeout", "2s", "--threshold", "0.9", NULL};
	if (world_init(&W, 2)) /* pages of 2: the binary must follow continue tokens */
		return -1;
	itest_world = &W;
	if (world_add_node(&W, "gpu-node-roomy", 81559, 1) ||
	    world_add_node(&W, "gpu-node-dry", 81559, 1) ||
	    world_add_node(&W, "gpu-node-31", 35000, 1) ||
	    world_add_node(&W, "gpu-node-28", 32768, 1) ||
	    world_add_node(&W, "gpu-node-r", 81559, 1) ||
	    world_add_pod(&W, "inference", "r1", "30Gi", NULL) ||
	    world_add_pod(&W, "inference", "r2", "30Gi", NULL) ||
	    world_add_pod(&W, "inference", "r3", "30Gi", NULL) ||
	    apiserver_double_put_node(W.api, ANNOTATED_NODE) ||
	    apiserver_double_put_node(W.api, UNKNOWN_NODE))
		return -1;
	return world_start_gmg(&W, extra, 30000);
}

static int group_teardown(void **state)
{
	world_free(&W);
	return 0;
}

static unsigned long count(enum apiserver_double_counter c)
{
	return apiserver_double_count(W.api, c);
}

static char *fixture(const char *name)
{
	return harness_read_file(name, NULL);
}

static void test_nodename_denied(void **state)
{
	struct review_answer a;
	char *body = fixture("review-pod-create-nodename.json");
	char sel[512], lim[32];
	unsigned long lists = count(APISERVER_DOUBLE_LIST_PODS);
	itest_review(&W, body, "a1b2c3d4-0002-4000-8000-000000000002", 0, &a);
	itest_contains(a.message, "gpu-node-a", "denial names the node");
	itest_contains(a.message, "embedder-0", "denial names the pod");
	itest_contains(a.message, "12Gi", "denial names the demand");
	itest_contains(a.message, "legacy-notebook", "undeclared GPU pod counted as a whole GPU");
	/* Four pods qualify on gpu-node-a; pages of two: at least two list calls. */
	ITEST_CHECK(count(APISERVER_DOUBLE_LIST_PODS) - lists >= 2,
	            "expected a paginated pod list (>= 2 pages), got %lu list calls",
	            count(APISERVER_DOUBLE_LIST_PODS) - lists);
	apiserver_double_last_list_query(W.api, sel, sizeof sel, lim, sizeof lim);
	itest_contains(sel, "spec.nodeName=gpu-node-a", "list fieldSelector");
	free(body);
}

static void test_binding_denied(void **state)
{
	struct review_answer a;
	char *body = fixture("review-binding-create.json");
	unsigned long gets = count(APISERVER_DOUBLE_GET_POD);
	itest_review(&W, body, "a1b2c3d4-0003-4000-8000-000000000003", 0, &a);
	itest_contains(a.message, "gpu-node-a", "binding denial names the node");
	itest_contains(a.message, "llama-8b-6d5f9c7b8-x2k4q", "binding denial names the pod");
	itest_contains(a.message, "24Gi", "binding denial names the looked-up demand");
	ITEST_CHECK(count(APISERVER_DOUBLE_GET_POD) > gets, "the Binding's pod was not looked up");
	free(body);
}

static void test_binding_target_kind_omitted(void **state)
{
	struct review_answer a;
	char *body = fixture("review-binding-create-target-kind-omitted.json");
	itest_review(&W, body, "a1b2c3d4-0004-4000-8000-000000000004", 0, &a);
	itest_contains(a.message, "gpu-node-a", "binding (kind omitted) denial names the node");
	itest_contains(a.message, "24Gi", "binding (kind omitted) denial names the demand");
	free(body);
}

/* The same Binding onto an empty node is allowed: the denials above are the policy's. */
static void test_binding_allowed_on_roomy_node(void **state)
{
	struct review_answer a;
	char *body = harness_review_from_fixture("review-binding-create-target-kind-omitted.json",
	                                         "uid-roomy-1", NULL, "gpu-node-roomy");
	itest_review(&W, body, "uid-roomy-1", 1, &a);
	free(body);
}

/* dryRun: evaluated (denied on the full node) but reserves nothing: seven dry 12Gi placements
 * on an empty node are all allowed, while real ones stop at five (6 x 12Gi > 71.68Gi). */
static void test_dryrun_reserves_nothing(void **state)
{
	struct review_answer a;
	char *body = fixture("review-pod-create-dryrun.json"), uid[64], name[64];
	int i;
	itest_review(&W, body, "a1b2c3d4-0005-4000-8000-000000000005", 0, &a);
	itest_contains(a.message, "gpu-node-a", "dry-run denial is evaluated like any other");
	free(body);
	for (i = 0; i < 7; i++) {
		snprintf(uid, sizeof uid, "dry-%d", i);
		snprintf(name, sizeof name, "dry-pod-%d", i);
		body = harness_pod_review(uid, name, "12Gi", "gpu-node-dry", 1);
		itest_review(&W, body, uid, 1, &a);
		free(body);
	}
	for (i = 0; i < 6; i++) {
		snprintf(uid, sizeof uid, "wet-%d", i);
		snprintf(name, sizeof name, "wet-pod-%d", i);
		body = harness_pod_review(uid, name, "12Gi", "gpu-node-dry", 0);
		itest_review(&W, body, uid, i < 5, &a);
		free(body);
	}
	itest_contains(a.message, "gpu-node-dry", "sixth placement denied");
}

static void test_update_allowed(void **state)
{
	struct review_answer a;
	char *body = fixture("review-pod-update.json");
	itest_review(&W, body, "a1b2c3d4-0006-4000-8000-000000000006", 1, &a);
	free(body);
}

static void test_unscheduled_allowed(void **state)
{
	struct review_answer a;
	char *body = fixture("review-pod-create-unscheduled.json");
	unsigned long lists = count(APISERVER_DOUBLE_LIST_PODS);
	itest_review(&W, body, "a1b2c3d4-0001-4000-8000-000000000001", 1, &a);
	ITEST_CHECK(count(APISERVER_DOUBLE_LIST_PODS) == lists,
	            "a pod without nodeName is not a placement: no pod list expected");
	free(body);
}

/* Demand max(6+20, 30) = 30Gi: allowed under a 30.76Gi budget (35000 MiB x 0.9), denied
 * under 28.8Gi (32768 MiB x 0.9). A sum (56Gi) or app+sidecar (26Gi) gives another answer. */
static void test_init_and_sidecar(void **state)
{
	struct review_answer a;
	char *body = fixture("review-pod-create-init-and-sidecar.json");
	itest_review(&W, body, "a1b2c3d4-0007-4000-8000-000000000007", 0, &a);
	itest_contains(a.message, "30Gi", "effective demand of init + sidecar");
	free(body);
	body = harness_review_from_fixture("review-pod-create-init-and-sidecar.json", "rag-31",
	                                   NULL, "gpu-node-31");
	itest_review(&W, body, "rag-31", 1, &a);
	free(body);
	body = harness_review_from_fixture("review-pod-create-init-and-sidecar.json", "rag-28",
	                                   NULL, "gpu-node-28");
	itest_review(&W, body, "rag-28", 0, &a);
	itest_contains(a.message, "30Gi", "effective demand of init + sidecar");
	free(body);
}

/* Ledger reconcile: r1 (30Gi) admitted and then shown on the node by the double must count
 * once, not twice: r2 (30Gi) then fits (60Gi <= 71.68Gi); r3 does not (r2 still in flight);
 * a retried Binding of r2 does not count itself. */
static void test_ledger_reconcile(void **state)
{
	struct review_answer a;
	char *body = harness_binding_review("rec-1", "r1", "gpu-node-r");
	itest_review(&W, body, "rec-1", 1, &a);
	free(body);
	ITEST_CHECK(apiserver_double_bind(W.api, "inference", "r1", "gpu-node-r") == 0,
	            "double: bind r1");
	body = harness_binding_review("rec-2", "r2", "gpu-node-r");
	itest_review(&W, body, "rec-2", 1, &a);
	free(body);
	body = harness_binding_review("rec-3", "r3", "gpu-node-r");
	itest_review(&W, body, "rec-3", 0, &a);
	free(body);
	body = harness_binding_review("rec-2-retry", "r2", "gpu-node-r");
	itest_review(&W, body, "rec-2-retry", 1, &a);
	free(body);
}

/* A continue token that expired mid-list (410 Gone): the list restarts and still sees every
 * page (legacy-notebook is on the second page); if it keeps expiring, fail closed. */
static void test_continue_expired(void **state)
{
	struct review_answer a;
	char *body = harness_pod_review("expired-1", "exp-pod", "12Gi", "gpu-node-a", 0);
	unsigned long lists = count(APISERVER_DOUBLE_LIST_PODS);
	apiserver_double_set_expire_continue(W.api, 1);
	itest_review(&W, body, "expired-1", 0, &a);
	apiserver_double_set_expire_continue(W.api, 0);
	itest_contains(a.message, "legacy-notebook", "the restarted list reached the second page");
	ITEST_CHECK(count(APISERVER_DOUBLE_LIST_PODS) - lists >= 4,
	            "expected page 1, page 2 (410), page 1, page 2: %lu list calls",
	            count(APISERVER_DOUBLE_LIST_PODS) - lists);
	free(body);
	apiserver_double_set_expire_continue(W.api, -1);
	body = harness_pod_review("expired-2", "exp-pod", "12Gi", "gpu-node-a", 0);
	itest_review(&W, body, "expired-2", 0, &a);
	apiserver_double_set_expire_continue(W.api, 0);
	itest_contains(a.message, "API server", "410 on every continue: fail closed");
	free(body);
}

/* Node annotations override the labels: 40Gi per GPU at 50% = 20Gi. 16Gi fits; 8Gi more does
 * not (with the labels' 71.68Gi, or 40Gi at 90%, it would). */
static void test_node_annotations_override(void **state)
{
	struct review_answer a;
	char *body = harness_pod_review("ann-1", "ann-1", "16Gi", "gpu-node-ann", 0);
	itest_review(&W, body, "ann-1", 1, &a);
	free(body);
	body = harness_pod_review("ann-2", "ann-2", "8Gi", "gpu-node-ann", 0);
	itest_review(&W, body, "ann-2", 0, &a);
	itest_contains(a.message, "50 percent", "the node's threshold annotation");
	free(body);
}

/* Unknown capacity: deny, telling the operator what to set. */
static void test_unknown_capacity(void **state)
{
	struct review_answer a;
	char *body = harness_pod_review("unknown-1", "unk", "1Gi", "gpu-node-unknown", 0);
	itest_review(&W, body, "unknown-1", 0, &a);
	itest_contains(a.message, "gpu-memory-guard.io/gpu-memory", "names the annotation to set");
	free(body);
}

/* A mirror pod (static pod) is never refused: the kubelet runs it anyway. */
static void test_mirror_pod_allowed(void **state)
{
	struct review_answer a;
	char *text =
	    harness_pod_review("mirror-1", "static-web-gpu-node-a", "12Gi", "gpu-node-a", 0);
	cJSON *doc = cJSON_Parse(text), *md, *ann;
	char *body;
	md = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "request"),
	                                     "object"),
	    "metadata");
	ann = cJSON_AddObjectToObject(md, "annotations");
	cJSON_AddStringToObject(ann, "kubernetes.io/config.mirror", "3f1b6d0e1d");
	body = cJSON_PrintUnformatted(doc);
	itest_review(&W, body, "mirror-1", 1, &a);
	cJSON_free(body);
	cJSON_Delete(doc);
	free(text);
}

/* Only uid present: every other request field is optional; the uid is echoed. */
static void test_minimal_review_uid_echoed(void **state)
{
	struct review_answer a;
	itest_review(&W,
	             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
	             "\"request\":{\"uid\":\"minimal-uid-1\"}}",
	             "minimal-uid-1", 1, &a);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nodename_denied),
	    cmocka_unit_test(test_binding_denied),
	    cmocka_unit_test(test_binding_target_kind_omitted),
	    cmocka_unit_test(test_binding_allowed_on_roomy_node),
	    cmocka_unit_test(test_dryrun_reserves_nothing),
	    cmocka_unit_test(test_update_allowed),
	    cmocka_unit_test(test_unscheduled_allowed),
	    cmocka_unit_test(test_init_and_sidecar),
	    cmocka_unit_test(test_ledger_reconcile),
	    cmocka_unit_test(test_continue_expired),
	    cmocka_unit_test(test_node_annotations_override),
	    cmocka_unit_test(test_unknown_capacity),
	    cmocka_unit_test(test_mirror_pod_allowed),
	    cmocka_unit_test(test_minimal_review_uid_echoed),
	};
	harness_init(argc, argv);
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
