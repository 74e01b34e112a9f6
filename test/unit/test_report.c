/*
 * Unit tests for lib/report: cluster JSON in, rows and text out, by the placement core. The
 * fixtures of test/data (a time-sliced H100 node over its limit) and a List built here (an
 * 8-GPU node, an L4 with its own threshold, a node whose capacity is malformed, a CPU node, pods
 * that do not count); every number checked against the closed form the core implies, and
 * each bad input against its exact error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "capacity.h"
#include "demand.h"
#include "dra.h"
#include "drastore.h"
#include "gpupolicy.h"
#include "jsonpath.h"
#include "placement.h"
#include "pod.h"
#include "policyset.h"
#include "quantity.h"
#include "report.h"
#include "report_cli.h"

#include "fixture.h" /* after gpupolicy.h: fixture_policy */

#define MIB (1024ull * 1024)
#define GI  (1024ull * MIB)

static struct report *new_report(double threshold)
{
	struct report_config cfg = {.threshold = threshold};
	char err[REPORT_ERR_MAX];
	struct report *r = report_new(&cfg, err, sizeof(err));
	if (r == NULL)
		fail_msg("report_new: %s", err);
	return r;
}

static void add_json(struct report *r, const char *text)
{
	char err[REPORT_ERR_MAX];
	cJSON *j = cJSON_Parse(text);
	assert_non_null(j);
	if (report_add_list(r, j, err, sizeof(err)) != 0)
		fail_msg("report_add_list: %s", err);
	cJSON_Delete(j);
}

static void build(struct report *r)
{
	char err[REPORT_ERR_MAX];
	if (report_build(r, err, sizeof(err)) != 0)
		fail_msg("report_build: %s", err);
}

static char *render(struct report *r, enum report_format f, const char *node)
{
	char err[REPORT_ERR_MAX], *out = NULL;
	if (report_render(r, f, node, &out, err, sizeof(err)) != 0)
		fail_msg("report_render: %s", err);
	return out;
}

static const struct report_row *row_named(struct report *r, const char *name)
{
	size_t n;
	const struct report_row *rows = report_rows(r, &n);
	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].name, name) == 0)
			return &rows[i];
	fail_msg("no row %s", name);
	return NULL;
}

/* The fixture node: one H100 (81559 MiB) time-sliced x4; 20Gi + 20Gi declared, a Succeeded
 * 30Gi pod (not counted), a GPU pod without a declaration (counted as the whole GPU), a pod
 * without GPUs (not counted). Over its limit: nothing more fits. */
static void test_fixture_node_over_limit(void **state)
{
	(void)state;
	struct report *r = new_report(0.9);
	char err[REPORT_ERR_MAX];
	cJSON *node = fixture_json("node-gpu-node-a.json");
	cJSON *pods = fixture_json("podlist-gpu-node-a.json");

	assert_int_equal(report_add_list(r, node, err, sizeof(err)), 0);
	assert_int_equal(report_add_list(r, pods, err, sizeof(err)), 0);
	build(r);
	const struct report_row *w = row_named(r, "gpu-node-a");
	uint64_t gpu = 81559 * MIB;
	assert_string_equal(w->product, "NVIDIA-H100-80GB-HBM3-SHARED");
	assert_string_equal(w->sharing, "time-slicing");
	assert_int_equal(w->replicas, 4);
	assert_true(w->capacity_known);
	assert_int_equal(w->gpu_count, 1);
	assert_int_equal(w->capacity_bytes, gpu);
	assert_int_equal(w->limit_bytes, gpu / 10 * 9 + gpu % 10 * 9 / 10);
	assert_int_equal(w->declared_bytes, 40 * GI + gpu);
	assert_int_equal(w->free_bytes, 0);
	assert_int_equal(w->largest_fit_bytes, 0);
	assert_int_equal(w->n_pods, 3);
	assert_int_equal(w->n_undeclared, 1);
	/* by counted bytes: the undeclared pod first */
	assert_string_equal(w->pods[0].key, "inference/legacy-notebook");
	assert_false(w->pods[0].declared);
	assert_int_equal(w->pods[0].counted_bytes, gpu);
	assert_non_null(strstr(w->pods[0].problem, "GPU_MEMORY_LIMIT"));
	assert_string_equal(w->pods[1].key, "inference/chat-7b-0");
	assert_string_equal(w->pods[2].key, "inference/chat-7b-1");

	char *t = render(r, REPORT_TABLE, NULL);
	assert_string_equal(
	    t,
	    "NODE         GPU                            COUNT   SHARING        CAPACITY   LIMIT  "
	    "  DECLARED   FREE   LARGEST FIT   PODS\n"
	    "gpu-node-a   NVIDIA-H100-80GB-HBM3-SHARED   1       time-slicing   79.6Gi     71.7Gi "
	    "  119.6Gi    0      none          3\n");
	free(t);
	cJSON_Delete(node);
	cJSON_Delete(pods);
	report_free(r);
}

/* A List as `kubectl get nodes,pods -o json` writes it. */
static const char cluster[] =
    "{\"kind\":\"List\",\"items\":["
    /* 8 x H100 by GFD labels: two 40Gi pods; one GPU's limit bounds the largest fit */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-h100\",\"labels\":{"
    "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\",\"nvidia.com/gpu.count\":\"8\","
    "\"nvidia.com/gpu.memory\":\"81559\"}}},"
    /* one L4 by the product table, threshold 0.5 on the node, MPS x2 */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-l4\",\"annotations\":{"
    "\"gpu-memory-guard.io/threshold\":\"0.5\"},\"labels\":{"
    "\"nvidia.com/gpu.product\":\"NVIDIA-L4\",\"nvidia.com/gpu.count\":\"1\","
    "\"nvidia.com/gpu.replicas\":\"2\",\"nvidia.com/gpu.sharing-strategy\":\"mps\"}}},"
    /* a malformed override: the capacity is unknown, the row says why */
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-bad\",\"annotations\":{"
    "\"gpu-memory-guard.io/gpu-memory\":\"lots\"},\"labels\":{\"nvidia.com/mig.strategy\":"
    "\"single\"}},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"2\"}}},"
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"cpu-0\"},\"status\":{\"allocatable\":"
    "{\"cpu\":\"8\"}}},"
    "{\"kind\":\"Service\",\"metadata\":{\"name\":\"ignored\"}},"
    "%s"
    "]}";

#define POD(ns, name, node, phase, gpus, decl)                                                     \
	"{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name                \
	"\",\"uid\":\"uid-" name "\"},\"spec\":{\"nodeName\":\"" node                              \
	"\",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"" gpus \
	"\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"" decl                           \
	"\"}]}]},\"status\":{\"phase\":\"" phase "\"}}"

static const char pods[] = POD("team-a", "llama-0", "gpu-h100", "Running", "1", "40Gi") "," POD(
    "team-a", "llama-1", "gpu-h100", "Pending", "1",
    "40Gi") "," POD("team-a", "done", "gpu-h100", "Succeeded", "1",
                    "70Gi") "," POD("team-b", "embed", "gpu-l4", "Running", "1",
                                    "6Gi") "," POD("team-b", "unbound", "", "Pending", "1",
                                                   "6Gi") "," POD("team-c", "cpu-only", "cpu-0",
                                                                  "Running", "0",
                                                                  "1Gi") "," POD("team-c", "on-bad",
                                                                                 "gpu-bad",
                                                                                 "Running", "1",
                                                                                 "3Gi");

static struct report *cluster_report(double threshold)
{
	struct report *r = new_report(threshold);
	size_t len = sizeof(cluster) + sizeof(pods);
	char *text = malloc(len);
	assert_non_null(text);
	snprintf(text, len, cluster, pods);
	add_json(r, text);
	free(text);
	build(r);
	return r;
}

static uint64_t ppm_of(uint64_t bytes, uint64_t ppm)
{
	return bytes / 1000000 * ppm + bytes % 1000000 * ppm / 1000000;
}

/* The closed form the core implies on main's capacity model: a 1-GPU pod fits while the node's
 * total stays under its limit and its share stays under one GPU's limit. */
static void test_rows_match_the_closed_form(void **state)
{
	(void)state;
	struct report *r = cluster_report(0.9);
	size_t n;
	const struct report_row *rows = report_rows(r, &n);

	assert_int_equal(n, 3); /* cpu-0 is not a GPU node */
	assert_string_equal(rows[0].name, "gpu-bad");
	assert_string_equal(rows[1].name, "gpu-h100");
	assert_string_equal(rows[2].name, "gpu-l4");

	const struct report_row *h = &rows[1];
	uint64_t gpu = 81559 * MIB;
	assert_int_equal(h->gpu_count, 8);
	assert_int_equal(h->capacity_bytes, 8 * gpu);
	assert_int_equal(h->limit_bytes, ppm_of(8 * gpu, 900000));
	assert_int_equal(h->declared_bytes, 80 * GI);
	assert_int_equal(h->free_bytes, ppm_of(8 * gpu, 900000) - 80 * GI);
	assert_int_equal(h->largest_fit_bytes, ppm_of(gpu, 900000)); /* one GPU's limit */
	assert_int_equal(h->n_pods, 2);
	assert_string_equal(h->sharing, "none");
	assert_false(h->threshold_from_node);

	const struct report_row *l = &rows[2];
	uint64_t l4 = 23034 * MIB;
	assert_true(l->threshold_from_node);
	assert_true(l->threshold == 0.5);
	assert_string_equal(l->sharing, "mps");
	assert_int_equal(l->replicas, 2);
	assert_int_equal(l->limit_bytes, l4 / 2);
	assert_int_equal(l->declared_bytes, 6 * GI);
	assert_int_equal(l->largest_fit_bytes, l4 / 2 - 6 * GI); /* the node's limit binds */
	assert_int_equal(l->free_bytes, l4 / 2 - 6 * GI);

	const struct report_row *b = &rows[0];
	assert_false(b->capacity_known);
	assert_string_equal(b->sharing, "mig-single");
	assert_int_equal(b->n_pods, 1);
	assert_int_equal(b->declared_bytes, 3 * GI);
	assert_int_equal(b->largest_fit_bytes, 0);
	assert_non_null(strstr(b->note, "gpu-memory-guard.io/gpu-memory"));
	report_free(r);
}

/* The answer is the core's: at the largest fit placement_decide admits, one byte more it does
 * not (rebuilt here from the row's own inputs). */
static void test_largest_fit_is_the_cores_edge(void **state)
{
	(void)state;
	struct report *r = cluster_report(0.9);
	const struct report_row *l = row_named(r, "gpu-l4");
	struct capacity cap = {.per_gpu_bytes = l->per_gpu_bytes,
	                       .gpu_count = l->gpu_count,
	                       .total_bytes = l->capacity_bytes,
	                       .has_threshold = 1,
	                       .threshold = 0.5};
	struct placement_item item = {.key = "team-b/embed", .bytes = 6 * GI};
	struct placement_node node = {.name = "gpu-l4", .cap = &cap, .pods = &item, .n_pods = 1};
	struct placement_policy pol = {0.9, 0.8, POLICY_ENFORCE, 0, 0};
	struct placement_result res;

	for (int extra = 0; extra <= 1; extra++) {
		struct demand d = {.status = DEMAND_OK, .gpus = 1};
		d.bytes = d.max_per_gpu_bytes = l->largest_fit_bytes + (uint64_t)extra;
		struct placement_pod pod = {
		    .name = "x/y", .key = "x/y", .demand = &d, .dry_run = 1};
		assert_int_equal(placement_decide(&node, &pod, &pol, 0, &res), 0);
		assert_int_equal(res.decision.allowed, extra == 0);
	}
	report_free(r);
}

static void test_table_wide_and_node(void **state)
{
	(void)state;
	struct report *r = cluster_report(0.9);
	char *t = render(r, REPORT_TABLE, NULL);
	assert_string_equal(
	    t,
	    "NODE       GPU                     COUNT   SHARING      CAPACITY   LIMIT     DECLARED"
	    "   FREE      LARGEST FIT   PODS\n"
	    "gpu-bad    -                       -       mig-single   unknown    -         3Gi     "
	    "   -         -             1\n"
	    "gpu-h100   NVIDIA-H100-80GB-HBM3   8       none         637.2Gi    573.5Gi   80Gi    "
	    "   493.5Gi   71.7Gi        2\n"
	    "gpu-l4     NVIDIA-L4               1       mps          22.5Gi     11.2Gi    6Gi     "
	    "   5.2Gi     5.2Gi         1\n");
	free(t);

	t = render(r, REPORT_WIDE, NULL);
	assert_non_null(strstr(t, "MEMORY/GPU   SHARING      REPLICAS   CAPACITY   THRESHOLD"));
	assert_non_null(strstr(t, "THRESHOLD   THRESHOLD SOURCE   LIMIT"));
	assert_non_null(strstr(t, "UNDECLARED   TIERS   NOTE\n"));
	assert_non_null(strstr(t, "0.5         node annotation    "));
	assert_non_null(strstr(t, "0.9         flags              "));
	assert_non_null(strstr(t, "0.5 "));
	assert_non_null(strstr(t, "node gpu-bad: "));
	free(t);

	t = render(r, REPORT_TABLE, "gpu-h100");
	assert_string_equal(
	    t,
	    "NODE       GPU                     COUNT   SHARING   CAPACITY   LIMIT     DECLARED   "
	    "FREE      LARGEST FIT   PODS\n"
	    "gpu-h100   NVIDIA-H100-80GB-HBM3   8       none      637.2Gi    573.5Gi   80Gi       "
	    "493.5Gi   71.7Gi        2\n"
	    "\n"
	    "NAMESPACE   NAME      GPUS   DECLARED   COUNTED   SOURCE\n"
	    "team-a      llama-0   1      40Gi       40Gi      declared\n"
	    "team-a      llama-1   1      40Gi       40Gi      declared\n");
	free(t);
	report_free(r);
}

static const cJSON *node_in(const cJSON *root, const char *name)
{
	const cJSON *n;
	cJSON_ArrayForEach(n, cJSON_GetObjectItem(root, "nodes"))
	{
		if (strcmp(cJSON_GetObjectItem(n, "name")->valuestring, name) == 0)
			return n;
	}
	fail_msg("no node %s in the JSON", name);
	return NULL;
}

/* Numbers in bytes, exactly as the rows have them (written as integers, not doubles). */
static void test_json(void **state)
{
	(void)state;
	struct report *r = cluster_report(0.9);
	char *t = render(r, REPORT_JSON, NULL);
	char want[64];
	cJSON *root = cJSON_Parse(t);
	assert_non_null(root);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "nodes")), 3);
	const cJSON *h = node_in(root, "gpu-h100");
	snprintf(want, sizeof(want), "\"largestFitBytes\":\t%llu",
	         (unsigned long long)row_named(r, "gpu-h100")->largest_fit_bytes);
	assert_non_null(strstr(t, want));
	assert_int_equal((uint64_t)cJSON_GetObjectItem(h, "capacityBytes")->valuedouble,
	                 8 * 81559 * MIB);
	assert_string_equal(cJSON_GetObjectItem(h, "thresholdSource")->valuestring, "flag");
	assert_null(cJSON_GetObjectItem(h, "pods")); /* pods only with --node */
	const cJSON *b = node_in(root, "gpu-bad");
	assert_false(cJSON_IsTrue(cJSON_GetObjectItem(b, "capacityKnown")));
	assert_non_null(strstr(cJSON_GetObjectItem(b, "error")->valuestring, "gpu-bad"));
	cJSON_Delete(root);
	free(t);

	t = render(r, REPORT_JSON, "gpu-l4");
	root = cJSON_Parse(t);
	assert_non_null(root);
	const cJSON *l = node_in(root, "gpu-l4");
	assert_string_equal(cJSON_GetObjectItem(l, "thresholdSource")->valuestring, "node");
	const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(l, "pods"), 0);
	assert_string_equal(cJSON_GetObjectItem(p, "namespace")->valuestring, "team-b");
	assert_string_equal(cJSON_GetObjectItem(p, "name")->valuestring, "embed");
	assert_string_equal(cJSON_GetObjectItem(p, "uid")->valuestring, "uid-embed");
	assert_int_equal((uint64_t)cJSON_GetObjectItem(p, "declaredBytes")->valuedouble, 6 * GI);
	cJSON_Delete(root);
	free(t);
	report_free(r);
}

static void expect_list_error(const char *text, int code, const char *want)
{
	struct report *r = new_report(0.9);
	char err[REPORT_ERR_MAX] = "";
	cJSON *j = cJSON_Parse(text);
	assert_non_null(j);
	assert_int_equal(report_add_list(r, j, err, sizeof(err)), code);
	assert_string_equal(err, want);
	cJSON_Delete(j);
	report_free(r);
}

static void test_bad_inputs(void **state)
{
	(void)state;
	expect_list_error("\"nodes\"", REPORT_EINVAL,
	                  "expected a NodeList, PodList, GPUMemoryPolicyList, List, Node, Pod or "
	                  "GPUMemoryPolicy object, got a string");
	expect_list_error("{\"items\":[]}", REPORT_EINVAL,
	                  "expected a NodeList, PodList, GPUMemoryPolicyList, List, Node, Pod or "
	                  "GPUMemoryPolicy object, got an object without kind");
	expect_list_error("{\"kind\":\"Service\"}", REPORT_EINVAL,
	                  "expected a NodeList, PodList, GPUMemoryPolicyList, List, Node, Pod or "
	                  "GPUMemoryPolicy object, got kind \"Service\"");
	expect_list_error("{\"kind\":\"PodList\"}", REPORT_EINVAL, "PodList: no items");
	expect_list_error("{\"kind\":\"PodList\",\"items\":{}}", REPORT_EINVAL,
	                  "PodList: items is an object, not an array");
	expect_list_error("{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{\"name\":\"a\"}},7]}",
	                  REPORT_EINVAL, "NodeList: items[1]: a number, not an object");
	expect_list_error("{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{}}]}", REPORT_EINVAL,
	                  "NodeList: items[0]: node: no metadata.name");
	expect_list_error("{\"kind\":\"List\",\"items\":[{\"metadata\":{\"name\":\"a\"}}]}",
	                  REPORT_EINVAL, "List: items[0]: no kind");

	/* a node twice */
	struct report *r = new_report(0.9);
	char err[REPORT_ERR_MAX] = "", *out = (char *)1;
	add_json(r, "{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{\"name\":\"n1\"}},"
	            "{\"metadata\":{\"name\":\"n1\"}}]}");
	assert_int_equal(report_build(r, err, sizeof(err)), REPORT_EINVAL);
	assert_string_equal(err, "node n1 listed twice");
	report_free(r);

	/* order of use */
	r = new_report(0.9);
	assert_int_equal(report_render(r, REPORT_TABLE, NULL, &out, err, sizeof(err)),
	                 REPORT_ESTATE);
	assert_null(out);
	build(r);
	cJSON *n = cJSON_Parse("{\"metadata\":{\"name\":\"late\"}}");
	assert_int_equal(report_add_node(r, n, err, sizeof(err)), REPORT_ESTATE);
	assert_string_equal(err, "node added after the report was built");
	cJSON_Delete(n);
	out = render(r, REPORT_TABLE, NULL);
	assert_string_equal(out, "No GPU nodes found.\n");
	free(out);
	report_free(r);

	/* --node names no node, or one without GPUs */
	r = cluster_report(0.9);
	assert_int_equal(report_render(r, REPORT_TABLE, "nope", &out, err, sizeof(err)),
	                 REPORT_ENOTFOUND);
	assert_string_equal(err, "node nope not found");
	assert_int_equal(report_render(r, REPORT_JSON, "cpu-0", &out, err, sizeof(err)),
	                 REPORT_ENOTFOUND);
	assert_string_equal(err, "node cpu-0 has no GPUs (no GPU capacity, no GPU pods)");
	report_free(r);

	/* the threshold is the webhook's range */
	struct report_config cfg = {.threshold = 0};
	assert_null(report_new(&cfg, err, sizeof(err)));
	assert_string_equal(err, "threshold 0 outside (0,1]");
	cfg.threshold = 1.5;
	assert_null(report_new(&cfg, err, sizeof(err)));
	assert_string_equal(err, "threshold 1.5 outside (0,1]");
}

/* The flag's threshold moves every node without an annotation, and only those. */
static void test_threshold_flag(void **state)
{
	(void)state;
	struct report *r = cluster_report(0.5);
	const struct report_row *h = row_named(r, "gpu-h100");
	uint64_t gpu = 81559 * MIB;
	assert_int_equal(h->limit_bytes, 4 * gpu);
	assert_int_equal(h->largest_fit_bytes, gpu / 2);
	assert_int_equal(row_named(r, "gpu-l4")->limit_bytes, 23034 * MIB / 2);
	report_free(r);
}

/* Below 1Mi free nothing fits (the smallest declaration the webhook takes is 1Mi). */
static void test_almost_full(void **state)
{
	(void)state;
	struct report *r = new_report(1.0);
	add_json(r, "{\"kind\":\"List\",\"items\":["
	            "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n\",\"annotations\":{"
	            "\"gpu-memory-guard.io/gpu-memory\":\"10Gi\",\"gpu-memory-guard.io/gpu-count\":"
	            "\"1\"}}}," POD("a", "p", "n", "Running", "1", "10239.5Mi") "]}");
	build(r);
	const struct report_row *w = row_named(r, "n");
	assert_int_equal(w->free_bytes, MIB / 2);
	assert_int_equal(w->largest_fit_bytes, 0);
	report_free(r);

	r = new_report(1.0);
	add_json(r, "{\"kind\":\"List\",\"items\":["
	            "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n\",\"annotations\":{"
	            "\"gpu-memory-guard.io/gpu-memory\":\"10Gi\",\"gpu-memory-guard.io/gpu-count\":"
	            "\"1\"}}}," POD("a", "p", "n", "Running", "1", "10239Mi") "]}");
	build(r);
	assert_int_equal(row_named(r, "n")->largest_fit_bytes, MIB);
	report_free(r);
}

#define MIG_POD(ns, name, node, slices, env)                                                       \
	"{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name                \
	"\",\"uid\":\"uid-" name "\"},\"spec\":{\"nodeName\":\"" node                              \
	"\",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.5gb\":" \
	"\"" slices "\"}}" env "}]},\"status\":{\"phase\":\"Running\"}}"
#define MIG_ENV(decl) ",\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"" decl "\"}]"

/* A MIG-mixed node: the row's numbers are one pool's (the whole GPUs', which the 1-GPU probe
 * asks for), so its capacity is that pool's and limit = capacity x threshold, as the header
 * says; the slices' pool, apart, is told in the note with what is declared there, never lost. */
static void test_mig_mixed(void **state)
{
	(void)state;
	struct report *r = new_report(0.9);
	add_json(
	    r,
	    "{\"kind\":\"List\",\"items\":["
	    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"half\",\"labels\":{"
	    "\"nvidia.com/gpu.count\":\"2\",\"nvidia.com/gpu.memory\":\"40960\","
	    "\"nvidia.com/mig.strategy\":\"mixed\",\"nvidia.com/mig-1g.5gb.count\":\"7\","
	    "\"nvidia.com/mig-1g.5gb.memory\":\"4864\"}},\"status\":{\"allocatable\":{"
	    "\"nvidia.com/gpu\":\"1\",\"nvidia.com/mig-1g.5gb\":\"7\"}}},"
	    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"allmig\",\"labels\":{"
	    "\"nvidia.com/gpu.count\":\"1\",\"nvidia.com/gpu.memory\":\"40960\","
	    "\"nvidia.com/mig.strategy\":\"mixed\",\"nvidia.com/mig-1g.5gb.count\":\"7\","
	    "\"nvidia.com/mig-1g.5gb.memory\":\"4864\"}},\"status\":{\"allocatable\":{"
	    "\"nvidia.com/gpu\":\"0\",\"nvidia.com/mig-1g.5gb\":\"7\"}}}," POD(
	        "a", "whole", "half", "Running", "1",
	        "10Gi") "," MIG_POD("a", "m2", "half", "1",
	                            MIG_ENV("4Gi")) "," MIG_POD("a", "m3", "half", "2",
	                                                        "") "," MIG_POD("a", "m1", "allmig",
	                                                                        "1",
	                                                                        MIG_ENV(
	                                                                            "4Gi")) "]}");
	build(r);
	const struct report_row *w = row_named(r, "half");
	assert_int_equal(w->capacity_bytes, 40960 * MIB);
	assert_int_equal(w->limit_bytes, ppm_of(40960 * MIB, 900000));
	assert_int_equal(w->declared_bytes, 10 * GI);
	/* 4Gi declared + 2 undeclared slices of 4864Mi: 13.5Gi */
	assert_non_null(strstr(w->note, "1g.5gb: 7 slices of 4.8Gi, 13.5Gi declared"));
	w = row_named(r, "allmig");
	assert_int_equal(w->capacity_bytes, 0);
	assert_int_equal(w->largest_fit_bytes, 0);
	assert_non_null(strstr(w->note, "1g.5gb: 7 slices of 4.8Gi, 4Gi declared"));
	report_free(r);
}

static int parse(const char *const *args, struct report_cli *o, char *err)
{
	char *argv[16];
	int argc = 0;
	argv[argc++] = "report";
	while (*args != NULL)
		argv[argc++] = (char *)*args++;
	return report_cli_parse(argc, argv, o, err, REPORT_CLI_ERR_MAX);
}

/* The command line, kubectl's ways of writing -o included; each bad flag named. */
/* ---- GPUMemoryPolicy objects (gpupolicy.h): the webhook's precedence and tiers ---- */

/* One 80Gi GPU (81920 MiB), label pool=<pool>; annotation: a threshold ("" none). */
#define POLNODE(name, pool, annotation)                                                            \
	"{\"kind\":\"Node\",\"metadata\":{\"name\":\"" name "\",\"annotations\":{" annotation      \
	"},\"labels\":{\"pool\":\"" pool                                                           \
	"\",\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\","                                 \
	"\"nvidia.com/gpu.count\":\"1\",\"nvidia.com/gpu.memory\":\"81920\"}}}"

/* A 1-GPU pod on node declaring decl, of priority class pc ("" none). */
#define POLPOD(ns, name, node, decl, pc)                                                           \
	"{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name                \
	"\",\"uid\":\"uid-" name "\"},\"spec\":{\"nodeName\":\"" node                              \
	"\",\"priorityClassName\":\"" pc "\",\"containers\":[{\"name\":\"c\",\"resources\":"       \
	"{\"limits\":{\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\","         \
	"\"value\":\"" decl "\"}]}]},\"status\":{\"phase\":\"Running\"}}"

/* A policy selecting pool=<pool> ("" every node), mode, threshold (a JSON number). */
#define POLICY(name, pool, mode, threshold)                                                        \
	"{\"apiVersion\":\"gpu-memory-guard.io/v1alpha1\",\"kind\":\"GPUMemoryPolicy\","           \
	"\"metadata\":{\"name\":\"" name "\"},\"spec\":{\"nodeSelector\":{\"matchLabels\":{"       \
	"\"pool\":\"" pool "\"}},\"mode\":\"" mode "\",\"threshold\":" threshold "}}"

/* The seed's example (docs/policies.md), on every node. */
#define SEED_POLICY                                                                                \
	"{\"apiVersion\":\"gpu-memory-guard.io/v1alpha1\",\"kind\":\"GPUMemoryPolicy\","           \
	"\"metadata\":{\"name\":\"realtime-batch\"},\"spec\":{\"threshold\":0.9,\"tiers\":["       \
	"{\"name\":\"realtime\",\"priorityClassNames\":[\"realtime\"],\"maxShare\":0.6},"          \
	"{\"name\":\"batch\",\"priorityClassNames\":[\"batch\"],"                                  \
	"\"yield\":{\"tier\":\"realtime\",\"above\":0.8}}]}}"

static const char half_policy[] = POLICY("half", "a", "enforce", "0.5");
static const char audit_policy[] = POLICY("quarter", "a", "audit", "0.25");

static struct report *policy_report(double threshold, const char *items)
{
	struct report *r = new_report(threshold);
	size_t len = strlen(items) + 64;
	char *text = malloc(len);
	assert_non_null(text);
	snprintf(text, len, "{\"kind\":\"List\",\"items\":[%s]}", items);
	add_json(r, text);
	free(text);
	build(r);
	return r;
}

/* An enforcing policy at 0.5 on pool=a: the limit is 50 percent there, and the largest fit is
 * policyset_decide's edge (the webhook's call); pool=b keeps the flags. An audit policy beside
 * it changes nothing that is enforced. */
static void test_policy_sets_the_limit(void **state)
{
	(void)state;
	struct report *r = policy_report(
	    0.9,
	    POLNODE("pol-a", "a", "") "," POLNODE("pol-b", "b", "") "," POLPOD(
	        "ml", "p-0", "pol-a", "10Gi",
	        "") "," POLPOD("ml", "p-1", "pol-b", "10Gi",
	                       "") "," POLICY("half", "a", "enforce",
	                                      "0.5") "," POLICY("quarter", "a", "audit", "0.25"));
	const struct report_row *a = row_named(r, "pol-a"), *b = row_named(r, "pol-b");

	assert_true(a->threshold == 0.5);
	assert_string_equal(a->threshold_source, "half");
	assert_true(a->threshold_from_policy);
	assert_false(a->threshold_from_node);
	assert_int_equal(a->n_policies, 2);
	assert_int_equal(a->limit_bytes, 40 * GI);
	assert_int_equal(a->declared_bytes, 10 * GI);
	assert_int_equal(a->free_bytes, 30 * GI);
	assert_int_equal(a->largest_fit_bytes, 30 * GI);
	assert_true(b->threshold == 0.9);
	assert_string_equal(b->threshold_source, "flags");
	assert_false(b->threshold_from_policy);
	assert_int_equal(b->n_policies, 0);
	assert_int_equal(b->limit_bytes, ppm_of(80 * GI, 900000));
	assert_int_equal(b->largest_fit_bytes, ppm_of(80 * GI, 900000) - 10 * GI);

	/* The edge, re-decided by policyset_decide from the row's inputs and the same policies. */
	struct gpupolicy *half = fixture_policy(half_policy),
	                 *quarter = fixture_policy(audit_policy);
	const struct gpupolicy *sel[] = {half, quarter};
	struct capacity cap = {.per_gpu_bytes = 80 * GI, .gpu_count = 1, .total_bytes = 80 * GI};
	struct placement_item item = {.key = "ml/p-0", .bytes = 10 * GI, .attrs_known = 1};
	struct placement_node node = {.name = "pol-a", .cap = &cap, .pods = &item, .n_pods = 1};
	struct policyset_result *res = malloc(sizeof(*res));
	assert_non_null(res);
	for (int extra = 0; extra <= 1; extra++) {
		struct demand d = {.status = DEMAND_OK, .gpus = 1};
		d.bytes = d.max_per_gpu_bytes = a->largest_fit_bytes + (uint64_t)extra;
		struct placement_pod pod = {
		    .name = "x/y", .key = "x/y", .demand = &d, .dry_run = 1};
		struct policyset_input in = {.node = &node,
		                             .pod = &pod,
		                             .pod_namespace = "x",
		                             .policies = sel,
		                             .n_policies = 2,
		                             .flags = {0.9, 0.8, POLICY_ENFORCE}};
		assert_int_equal(policyset_decide(&in, res), 0);
		assert_int_equal(res->allowed, extra == 0);
		if (extra)
			assert_string_equal(res->policy, "half");
	}
	free(res);
	gpupolicy_free(half);
	gpupolicy_free(quarter);

	/* JSON: the existing fields, and which policy set the threshold. */
	char *t = render(r, REPORT_JSON, NULL);
	cJSON *root = cJSON_Parse(t);
	assert_non_null(root);
	const cJSON *ja = node_in(root, "pol-a"), *jb = node_in(root, "pol-b");
	assert_string_equal(cJSON_GetObjectItem(ja, "thresholdSource")->valuestring, "policy");
	assert_string_equal(cJSON_GetObjectItem(ja, "thresholdPolicy")->valuestring, "half");
	assert_true(cJSON_GetObjectItem(ja, "threshold")->valuedouble == 0.5);
	assert_int_equal((uint64_t)cJSON_GetObjectItem(ja, "limitBytes")->valuedouble, 40 * GI);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(ja, "tiers")), 0);
	assert_string_equal(cJSON_GetObjectItem(jb, "thresholdSource")->valuestring, "flag");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(jb, "thresholdPolicy")));
	const cJSON *pols = cJSON_GetObjectItem(root, "policies");
	assert_int_equal(cJSON_GetArraySize(pols), 2);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(pols, 0), "name")->valuestring,
	                    "half");
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(pols, 1), "mode")->valuestring,
	                    "audit");
	cJSON_Delete(root);
	free(t);
	t = render(r, REPORT_WIDE, NULL);
	assert_non_null(strstr(t, "0.5         half               40Gi"));
	free(t);
	report_free(r);

	/* The audit policy alone: the flags stay in force. */
	r = policy_report(0.9,
	                  POLNODE("pol-a", "a", "") "," POLICY("quarter", "a", "audit", "0.25"));
	a = row_named(r, "pol-a");
	assert_true(a->threshold == 0.9);
	assert_string_equal(a->threshold_source, "flags");
	assert_int_equal(a->n_policies, 1);
	assert_int_equal(a->limit_bytes, ppm_of(80 * GI, 900000));
	assert_int_equal(a->largest_fit_bytes, ppm_of(80 * GI, 900000));
	report_free(r);
}

/* The policies of a row are the webhook's (gpupolicy_select): 65 enforcing policies select the
 * node, read in reverse name order; the first 64 by name apply, so p64's 0.1, the strictest,
 * is past the cap and p63's 0.4 is in force. */
static void test_policy_cap(void **state)
{
	enum { N = GPUPOLICY_SELECT_MAX + 1 };
	size_t cap = 4096 + (size_t)N * 256, len = 0;
	char *items = malloc(cap);
	(void)state;

	assert_non_null(items);
	len += (size_t)snprintf(items, cap, "%s", POLNODE("pol-a", "a", ""));
	for (int i = N - 1; i >= 0; i--) {
		const char *t = i == N - 1 ? "0.1" : i == N - 2 ? "0.4" : "0.5";
		char name[8];
		snprintf(name, sizeof(name), "p%02d", i);
		len +=
		    (size_t)snprintf(items + len, cap - len,
		                     ",{\"apiVersion\":\"gpu-memory-guard.io/v1alpha1\","
		                     "\"kind\":\"GPUMemoryPolicy\",\"metadata\":{\"name\":\"%s\"},"
		                     "\"spec\":{\"mode\":\"enforce\",\"threshold\":%s}}",
		                     name, t);
		assert_true(len < cap);
	}
	struct report *r = policy_report(0.9, items);
	const struct report_row *a = row_named(r, "pol-a");
	assert_int_equal(a->n_policies, GPUPOLICY_SELECT_MAX);
	assert_true(a->threshold == 0.4);
	assert_string_equal(a->threshold_source, "p63");
	assert_int_equal(a->limit_bytes, ppm_of(80 * GI, 400000));
	report_free(r);
	free(items);
}

/* The node's annotation beats an enforcing policy (gpupolicy_resolve's precedence). */
static void test_annotation_beats_policy(void **state)
{
	(void)state;
	struct report *r = policy_report(
	    0.9, POLNODE("pol-ann", "a", "\"gpu-memory-guard.io/threshold\":\"0.7\"") "," POLICY(
	             "half", "a", "enforce", "0.5"));
	const struct report_row *a = row_named(r, "pol-ann");
	assert_true(a->threshold == 0.7);
	assert_string_equal(a->threshold_source, "node annotation");
	assert_true(a->threshold_from_node);
	assert_false(a->threshold_from_policy);
	assert_int_equal(a->n_policies, 1);
	assert_int_equal(a->limit_bytes, ppm_of(80 * GI, 700000));
	assert_int_equal(a->largest_fit_bytes, ppm_of(80 * GI, 700000));
	char *t = render(r, REPORT_JSON, NULL);
	assert_non_null(strstr(t, "\"thresholdSource\":\t\"node\""));
	free(t);
	report_free(r);
}

/* The seed's tiers: what realtime and batch declare on the node, realtime's budget (60 percent
 * of 80Gi), batch without one; a pod of no tier in neither. Two policies with tiers: named. */
static void test_seed_tiers(void **state)
{
	(void)state;
	struct report *r = policy_report(
	    0.9,
	    POLNODE("pol-a", "a", "") "," POLPOD("ml", "rt-0", "pol-a", "20Gi", "realtime") "," POLPOD(
	        "ml", "rt-1", "pol-a",
	        "10Gi", "realtime") "," POLPOD("ml", "b-0", "pol-a", "10Gi",
	                                       "batch") "," POLPOD("ml", "x-0", "pol-a", "5Gi",
	                                                           "") "," SEED_POLICY);
	const struct report_row *a = row_named(r, "pol-a");

	assert_int_equal(a->n_tiers, 2);
	assert_string_equal(a->tiers[0].policy, "realtime-batch");
	assert_string_equal(a->tiers[0].tier, "realtime");
	assert_int_equal(a->tiers[0].declared_bytes, 30 * GI);
	assert_true(a->tiers[0].has_budget);
	assert_int_equal(a->tiers[0].budget_bytes, 48 * GI);
	assert_string_equal(a->tiers[1].tier, "batch");
	assert_int_equal(a->tiers[1].declared_bytes, 10 * GI);
	assert_false(a->tiers[1].has_budget);
	assert_int_equal(a->tiers[1].budget_bytes, 0);
	assert_string_equal(a->threshold_source, "realtime-batch");
	assert_int_equal(a->declared_bytes, 45 * GI);
	/* the probe is of no tier: the node's limit binds */
	assert_int_equal(a->largest_fit_bytes, ppm_of(80 * GI, 900000) - 45 * GI);
	char *t = render(r, REPORT_WIDE, NULL);
	assert_non_null(strstr(t, "   realtime 30Gi/48Gi, batch 10Gi   -\n"));
	free(t);
	t = render(r, REPORT_JSON, NULL);
	cJSON *root = cJSON_Parse(t);
	const cJSON *tiers = cJSON_GetObjectItem(node_in(root, "pol-a"), "tiers");
	assert_int_equal(cJSON_GetArraySize(tiers), 2);
	const cJSON *rt = cJSON_GetArrayItem(tiers, 0), *bt = cJSON_GetArrayItem(tiers, 1);
	assert_string_equal(cJSON_GetObjectItem(rt, "policy")->valuestring, "realtime-batch");
	assert_string_equal(cJSON_GetObjectItem(rt, "tier")->valuestring, "realtime");
	assert_int_equal((uint64_t)cJSON_GetObjectItem(rt, "declaredBytes")->valuedouble, 30 * GI);
	assert_int_equal((uint64_t)cJSON_GetObjectItem(rt, "budgetBytes")->valuedouble, 48 * GI);
	assert_string_equal(cJSON_GetObjectItem(bt, "tier")->valuestring, "batch");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(bt, "budgetBytes")));
	cJSON_Delete(root);
	free(t);
	report_free(r);

	/* A second policy with a tier: each tier named by its policy. */
	r = policy_report(
	    0.9, POLNODE("pol-a", "a", "") "," POLPOD(
	             "ml", "rt-0", "pol-a", "20Gi",
	             "realtime") "," SEED_POLICY
	                         ",{\"kind\":\"GPUMemoryPolicy\",\"metadata\":{\"name\":\"gold\"},"
	                         "\"spec\":{\"tiers\":[{\"name\":\"vip\",\"namespaces\":[\"vip\"],"
	                         "\"maxShare\":0.25}]}}");
	t = render(r, REPORT_WIDE, NULL);
	assert_non_null(strstr(t, "   gold:vip 0/20Gi, realtime-batch:realtime 20Gi/48Gi, "
	                          "realtime-batch:batch 0   -\n"));
	free(t);
	report_free(r);
}

/* An invalid policy is reported with its error and applied nowhere; lists of policies. */
static void test_invalid_policy_reported(void **state)
{
	(void)state;
	struct report *r = policy_report(
	    0.9, POLNODE("pol-a", "a", "") ",{\"kind\":\"GPUMemoryPolicy\",\"metadata\":{\"name\":"
	                                   "\"broken\"},\"spec\":{\"threshold\":1.5}}");
	const struct report_row *a = row_named(r, "pol-a");
	struct report_policy p;

	assert_true(a->threshold == 0.9);
	assert_string_equal(a->threshold_source, "flags");
	assert_int_equal(a->n_policies, 0);
	assert_int_equal(a->limit_bytes, ppm_of(80 * GI, 900000));
	assert_int_equal(report_policies(r, 0, &p), 1);
	assert_string_equal(p.name, "broken");
	assert_string_equal(p.mode, "");
	assert_non_null(strstr(p.error, "spec.threshold"));
	char *t = render(r, REPORT_JSON, NULL);
	cJSON *root = cJSON_Parse(t);
	const cJSON *jp = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "policies"), 0);
	assert_string_equal(cJSON_GetObjectItem(jp, "name")->valuestring, "broken");
	assert_false(cJSON_IsTrue(cJSON_GetObjectItem(jp, "usable")));
	assert_string_equal(cJSON_GetObjectItem(jp, "error")->valuestring, p.error);
	cJSON_Delete(root);
	free(t);
	report_free(r);

	/* A GPUMemoryPolicyList (items without kind), and a policy alone. */
	r = new_report(0.9);
	add_json(r, "{\"kind\":\"NodeList\",\"items\":[" POLNODE("pol-a", "a", "") "]}");
	add_json(r, "{\"kind\":\"GPUMemoryPolicyList\",\"items\":[{\"metadata\":{\"name\":"
	            "\"half\"},\"spec\":{\"threshold\":0.5}}]}");
	add_json(r, audit_policy);
	build(r);
	assert_int_equal(report_policies(r, 0, NULL), 2);
	assert_int_equal(row_named(r, "pol-a")->limit_bytes, 40 * GI);
	report_free(r);

	/* a policy twice */
	r = new_report(0.9);
	char err[REPORT_ERR_MAX] = "";
	add_json(r, half_policy);
	add_json(r, half_policy);
	assert_int_equal(report_build(r, err, sizeof(err)), REPORT_EINVAL);
	assert_string_equal(err, "GPUMemoryPolicy half listed twice");
	report_free(r);
}

static void test_cli(void **state)
{
	(void)state;
	struct report_cli o;
	char err[REPORT_CLI_ERR_MAX];

	assert_int_equal(parse((const char *[]){NULL}, &o, err), 0);
	assert_int_equal(o.format, REPORT_TABLE);
	assert_true(o.threshold == 0.9);
	assert_null(o.kubeconfig);
	assert_null(o.node);
	assert_int_equal(o.timeout_ms, REPORT_CLI_TIMEOUT_MS);
	assert_int_equal(
	    parse((const char *[]){"-o", "json", "--node=n1", "--kubeconfig", "k", "--threshold",
	                           "0.8", "--gpu-resource", "a/b", "--request-timeout=5s", NULL},
	          &o, err),
	    0);
	assert_int_equal(o.format, REPORT_JSON);
	assert_string_equal(o.node, "n1");
	assert_string_equal(o.kubeconfig, "k");
	assert_true(o.threshold == 0.8);
	assert_int_equal(o.n_gpu_resources, 1);
	assert_string_equal(o.gpu_resources[0], "a/b");
	assert_int_equal(o.timeout_ms, 5000);
	assert_int_equal(parse((const char *[]){"-owide", NULL}, &o, err), 0);
	assert_int_equal(o.format, REPORT_WIDE);
	assert_int_equal(parse((const char *[]){"-o=json", NULL}, &o, err), 0);
	assert_int_equal(o.format, REPORT_JSON);
	assert_int_equal(parse((const char *[]){"--output", "wide", NULL}, &o, err), 0);
	assert_int_equal(o.format, REPORT_WIDE);
	assert_int_equal(parse((const char *[]){"--node", "x", "-h", NULL}, &o, err), 0);
	assert_true(o.help);
	/* the webhook's --engine-default, so that the report counts an engine as it does */
	err[0] = '\0';
	if (parse(
	        (const char *[]){"--engine-default", "vllm=0.5", "--engine-default=tgi=0.8", NULL},
	        &o, err) != 0)
		fail_msg("--engine-default: %s", err);
	assert_int_equal(o.engines.ppm[ENGINE_VLLM], 500000);
	assert_int_equal(o.engines.ppm[ENGINE_TGI], 800000);
	assert_int_equal(o.engines.ppm[ENGINE_SGLANG], ENGINE_DEFAULT_SGLANG_PPM);

	static const struct {
		const char *args[4];
		const char *err;
	} bad[] = {
	    {{"-o", "yaml"}, "--output: unknown format \"yaml\" (want table, wide or json)"},
	    {{"--threshold", "0"}, "--threshold: \"0\" is not a ratio 0 < RATIO <= 1"},
	    {{"--threshold=1.1"}, "--threshold: \"1.1\" is not a ratio 0 < RATIO <= 1"},
	    {{"--bogus", "x"}, "unknown flag --bogus (see --help)"},
	    {{"--node"}, "--node needs a value"},
	    {{"-o"}, "-o needs a value"},
	    {{"json"}, "unexpected argument \"json\" (see --help)"},
	    {{"--node="}, "--node: invalid value \"\""},
	    {{"--request-timeout", "0s"}, "--request-timeout: must be above 0"},
	    {{"--engine-default", "ollama=0.5"},
	     "--engine-default: \"ollama=0.5\" is not ENGINE=RATIO with ENGINE vllm, tgi or sglang "
	     "and 0 < RATIO <= 1 (e.g. vllm=0.9)"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(parse(bad[i].args, &o, err), -1);
		assert_string_equal(err, bad[i].err);
	}
	char usage[4096];
	assert_non_null(strstr(report_cli_usage("kubectl gpu-memory", usage, sizeof(usage)),
	                       "  kubectl gpu-memory [flags]\n"));
	assert_non_null(strstr(usage, "exec credential plugin"));
	/* The whole text fits the 4096 bytes the header promises: it ends with its last line. */
	assert_non_null(strstr(usage, "bad command line.\n"));
}

/* --undeclared infer: the same resolution as the webhook's, and the source per pod (SOURCE,
 * demandSource): a vLLM pod counts 0.92 of the node's card, an undeclared pod its card. */
static void test_inferred_sources(void **state)
{
	struct report_config cfg = {.threshold = 0.9, .infer = 1};
	char err[REPORT_ERR_MAX];
	struct report *r = report_new(&cfg, err, sizeof(err));

	(void)state;
	assert_non_null(r);
	add_json(r,
	         "{\"kind\":\"List\",\"items\":[{\"kind\":\"Node\",\"metadata\":{\"name\":"
	         "\"ts\",\"labels\":{\"nvidia.com/gpu.count\":\"2\",\"nvidia.com/gpu.memory\":"
	         "\"81559\",\"nvidia.com/gpu.replicas\":\"4\",\"nvidia.com/gpu.sharing-strategy\":"
	         "\"time-slicing\"}}},"
	         "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"a\",\"name\":\"vllm\","
	         "\"uid\":\"u1\"},\"spec\":{\"nodeName\":\"ts\",\"containers\":[{\"name\":"
	         "\"c\",\"image\":\"vllm/vllm-openai:v0.9.2\",\"resources\":{\"limits\":{"
	         "\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":\"Running\"}},"
	         "{\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"a\",\"name\":\"bare\","
	         "\"uid\":\"u2\"},\"spec\":{\"nodeName\":\"ts\",\"containers\":[{\"name\":"
	         "\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{"
	         "\"phase\":\"Running\"}}]}");
	build(r);
	const struct report_row *row = row_named(r, "ts");
	uint64_t vllm = (81559 * MIB / 1000000) * 920000 +
	                ((81559 * MIB % 1000000) * 920000 + 999999) / 1000000;
	assert_int_equal(row->n_pods, 2);
	assert_int_equal(row->declared_bytes, vllm + 81559 * MIB);
	char *t = render(r, REPORT_TABLE, "ts");
	assert_non_null(strstr(t, "SOURCE"));
	assert_non_null(strstr(t, "engine"));
	assert_non_null(strstr(t, "   -          7")); /* DECLARED "-", COUNTED 0.92 x 79.6Gi */
	assert_non_null(strstr(t, "whole-card"));
	free(t);
	t = render(r, REPORT_JSON, "ts");
	assert_non_null(strstr(t, "\"demandSource\":\t\"engine\""));
	assert_non_null(
	    strstr(t, "\"demandSourceWords\":\t\"vllm's default --gpu-memory-utilization 0.92\""));
	free(t);
	report_free(r);
}

/* DRA (issue 21): a node known only by its ResourceSlice (test/data/dra/slice-gpu-dra-0.json:
 * two H100s of the NVIDIA driver) gets its capacity from it; a 19Gi consumable-capacity claim
 * on it counts as declared, once. */
static void test_dra(void **state)
{
	(void)state;
	struct report *r = new_report(0.9);
	char err[REPORT_ERR_MAX];
	cJSON *slice = fixture_json("dra/slice-gpu-dra-0.json");
	cJSON *claim = fixture_json("dra/claim-consumable.json");

	add_json(r, "{\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-dra-0\"}}");
	assert_int_equal(report_add_dra(r, slice, err, sizeof(err)), 0);
	assert_int_equal(report_add_dra(r, claim, err, sizeof(err)), 0);
	build(r);
	const struct report_row *row = row_named(r, "gpu-dra-0");
	assert_true(row->capacity_known);
	assert_int_equal(row->capacity_bytes, 2 * 81559 * MIB);
	assert_int_equal(row->gpu_count, 2);
	assert_int_equal(row->declared_bytes, 19 * GI);
	cJSON_Delete(slice);
	cJSON_Delete(claim);
	report_free(r);
}

/* What placement_decide() (the webhook's core) counts used on gpu-dra-0 beside a pod asking
 * nothing: the node's slice and claim as the watch cache keeps them (dra_store_view), its
 * capacity from them, and the pod as the cache and the live view make their items
 * (placement_item_demand_figs). */
static uint64_t decided_used(const cJSON *slice, const cJSON *claim, const cJSON *pod)
{
	struct dra_store *s = dra_store_new(NULL, NULL, NULL);
	struct demand_config dcfg = {.infer = 0}; /* new_report's: strict */
	struct demand_share shares[DEMAND_MAX_PARTS], figs[DEMAND_MAX_PARTS];
	struct placement_item it = {.key = "dra/mine",
	                            .uid = json_str(pod, "metadata", "uid", NULL)};
	struct dra_view *v = NULL;
	struct capacity cap;
	struct demand *d = malloc(sizeof(*d)), *me = malloc(sizeof(*me));
	struct placement_result res;
	char err[512];

	assert_non_null(s);
	assert_non_null(d);
	assert_non_null(me);
	assert_int_equal(dra_store_apply_slice(s, WATCH_ADDED, slice, err, sizeof(err)), 0);
	assert_int_equal(dra_store_apply_claim(s, WATCH_ADDED, claim, err, sizeof(err)), 0);
	assert_int_equal(dra_store_view(s, "gpu-dra-0", NULL, NULL, NULL, &v), 0);
	cJSON *node = cJSON_Parse("{\"metadata\":{\"name\":\"gpu-dra-0\"}}");
	int rc = capacity_from_node(node, &dcfg, &cap, err, sizeof(err));
	assert_int_equal(dra_view_capacity(v, &cap, rc, "gpu-dra-0", err, sizeof(err)), 0);
	pod_demand(pod, &dcfg, d);
	assert_true(placement_consumer(0, d->status, d->n_dra_figs));
	placement_item_demand_figs(&it, d, shares, figs);
	memset(me, 0, sizeof(*me));
	placement_dra_demand(me);
	struct placement_node pn = {
	    .name = "gpu-dra-0", .cap = &cap, .pods = &it, .n_pods = 1, .dra = &v->node};
	struct placement_pod pp = {.name = "x/probe", .key = "x/probe", .demand = me, .dry_run = 1};
	struct placement_policy pol = {0.9, 0.9, POLICY_ENFORCE, 1, 0};
	assert_int_equal(placement_decide(&pn, &pp, &pol, 0, &res), 0);
	cJSON_Delete(node);
	dra_view_free(v);
	dra_store_free(s);
	free(d);
	free(me);
	return res.used_bytes;
}

/* DRA (issue 21): a DRA pod's containers' own figures count in the report as in the webhook's
 * decision. A pod whose container names its claim and declares GPU_MEMORY_LIMIT asks no GPU
 * resource (demand.h: DEMAND_NOT_GPU, its figure in dra_figs); on the 19Gi consumable-capacity
 * share of claim-consumable.json its 40Gi raises the claim's count to 40Gi (placement.h); on
 * the time-sliced device of claim-timesliced.json (held whole) its figure is judged on the
 * device, not added to the node's sum. Either way the row's declared is what placement_decide
 * counts, and the pod, no GPU pod, is no row of its own. */
static void test_dra_figures_as_decided(void **state)
{
	(void)state;
	static const struct {
		const char *claim, *claim_name, *pod, *uid;
		uint64_t declared;
	} rows[] = {
	    {"dra/claim-consumable.json", "share-19gi-3", "share-3",
	     "a0000000-0000-4000-8000-000000000003", 40 * GI},
	    {"dra/claim-timesliced.json", "ts-gpu", "ts-a", "b0000000-0000-4000-8000-00000000000a",
	     0},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct report *r = new_report(0.9);
		char err[REPORT_ERR_MAX], text[1024];
		cJSON *slice = fixture_json("dra/slice-gpu-dra-0.json");
		cJSON *claim = fixture_json(rows[i].claim);

		snprintf(text, sizeof(text),
		         "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"dra\","
		         "\"uid\":\"%s\"},\"spec\":{\"nodeName\":\"gpu-dra-0\",\"containers\":[{"
		         "\"name\":\"main\",\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":"
		         "\"40Gi\"}],\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}],"
		         "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"%s\"}]},"
		         "\"status\":{\"phase\":\"Running\"}}",
		         rows[i].pod, rows[i].uid, rows[i].claim_name);
		cJSON *pod = cJSON_Parse(text);
		assert_non_null(pod);
		add_json(r, "{\"kind\":\"Node\",\"metadata\":{\"name\":\"gpu-dra-0\"}}");
		assert_int_equal(report_add_dra(r, slice, err, sizeof(err)), 0);
		assert_int_equal(report_add_dra(r, claim, err, sizeof(err)), 0);
		assert_int_equal(report_add_pod(r, pod, err, sizeof(err)), 0);
		build(r);
		const struct report_row *row = row_named(r, "gpu-dra-0");
		uint64_t used = decided_used(slice, claim, pod);
		if (row->declared_bytes != used || used != rows[i].declared)
			fail_msg("%s: the report declares %llu, placement_decide counts %llu (want "
			         "%llu)",
			         rows[i].claim, (unsigned long long)row->declared_bytes,
			         (unsigned long long)used, (unsigned long long)rows[i].declared);
		assert_int_equal(row->n_pods, 0);
		cJSON_Delete(pod);
		cJSON_Delete(slice);
		cJSON_Delete(claim);
		report_free(r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fixture_node_over_limit),
	    cmocka_unit_test(test_rows_match_the_closed_form),
	    cmocka_unit_test(test_largest_fit_is_the_cores_edge),
	    cmocka_unit_test(test_table_wide_and_node),
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_bad_inputs),
	    cmocka_unit_test(test_threshold_flag),
	    cmocka_unit_test(test_almost_full),
	    cmocka_unit_test(test_mig_mixed),
	    cmocka_unit_test(test_dra),
	    cmocka_unit_test(test_dra_figures_as_decided),
	    cmocka_unit_test(test_policy_sets_the_limit),
	    cmocka_unit_test(test_policy_cap),
	    cmocka_unit_test(test_annotation_beats_policy),
	    cmocka_unit_test(test_seed_tiers),
	    cmocka_unit_test(test_invalid_policy_reported),
	    cmocka_unit_test(test_cli),
	    cmocka_unit_test(test_inferred_sources),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
