/* Unit tests for lib/capacity: each source of a node's HBM capacity, in order, and errors. */
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
#include "fixture.h"
#include "demand.h"

#define MIB (1024ull * 1024)
#define GI  (1024ull * MIB)

/* A node named gpu-node-b with the given labels, annotations and allocatable (JSON object
 * bodies with single quotes for readability). */
static cJSON *node(const char *labels, const char *annotations, const char *allocatable)
{
	char text[2048];
	cJSON *j;

	snprintf(text, sizeof(text),
	         "{'kind':'Node','metadata':{'name':'gpu-node-b','labels':{%s},'annotations':{%s}},"
	         "'status':{'allocatable':{%s}}}",
	         labels, annotations, allocatable);
	for (char *p = text; *p; p++)
		if (*p == '\'')
			*p = '"';
	j = cJSON_Parse(text);
	if (j == NULL)
		fail_msg("bad test JSON: %s", text);
	return j;
}

static int read_node(const char *labels, const char *annotations, const char *allocatable,
                     struct capacity *out, char *err, size_t errlen)
{
	cJSON *j = node(labels, annotations, allocatable);
	int rc = capacity_from_node(j, NULL, out, err, errlen);

	cJSON_Delete(j);
	return rc;
}

static void test_fixture_gpu_node_a(void **state)
{
	cJSON *j = fixture_json("node-gpu-node-a.json");
	struct capacity c;
	char err[CAPACITY_MSG_MAX];

	assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
	assert_int_equal(c.per_gpu_bytes, 81559 * MIB);
	/* gpu.count 1, not allocatable 4: time-sliced replicas are not cards */
	assert_int_equal(c.gpu_count, 1);
	assert_int_equal(c.total_bytes, 85520809984ull);
	assert_int_equal(c.memory_source, CAPACITY_SRC_GFD_LABEL);
	assert_int_equal(c.count_source, CAPACITY_SRC_GFD_LABEL);
	assert_int_equal(c.has_threshold, 0);
	cJSON_Delete(j);
}

static void test_annotation_wins(void **state)
{
	struct capacity c;
	char err[CAPACITY_MSG_MAX];

	assert_int_equal(read_node("'nvidia.com/gpu.memory':'81559','nvidia.com/gpu.count':'8',"
	                           "'nvidia.com/gpu.product':'NVIDIA-L4'",
	                           "'gpu-memory-guard.io/gpu-memory':'40Gi',"
	                           "'gpu-memory-guard.io/gpu-count':'2'",
	                           "'nvidia.com/gpu':'8'", &c, err, sizeof(err)),
	                 0);
	assert_int_equal(c.per_gpu_bytes, 40 * GI);
	assert_int_equal(c.gpu_count, 2);
	assert_int_equal(c.total_bytes, 80 * GI);
	assert_int_equal(c.memory_source, CAPACITY_SRC_ANNOTATION);
	assert_int_equal(c.count_source, CAPACITY_SRC_ANNOTATION);
}

static void test_gfd_label_mib_and_bytes(void **state)
{
	struct capacity c;
	char err[CAPACITY_MSG_MAX];

	assert_int_equal(read_node("'nvidia.com/gpu.memory':'39538','nvidia.com/gpu.count':'8'", "",
	                           "", &c, err, sizeof(err)),
	                 0);
	assert_int_equal(c.per_gpu_bytes, 39538 * MIB);
	assert_int_equal(c.total_bytes, 8 * 39538 * MIB);

	/* The 2022 GFD release that wrote bytes. */
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'85520809984','nvidia.com/gpu.count':"
	                           "'1'",
	                           "", "", &c, err, sizeof(err)),
	                 0);
	assert_int_equal(c.per_gpu_bytes, 85520809984ull);

	/* At the cutoff it is still MiB (16 TiB). */
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'16777216','nvidia.com/gpu.count':'1'",
	                           "", "", &c, err, sizeof(err)),
	                 0);
	assert_int_equal(c.per_gpu_bytes, 16777216 * MIB);
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'16777217','nvidia.com/gpu.count':'1'",
	                           "", "", &c, err, sizeof(err)),
	                 0);
	assert_int_equal(c.per_gpu_bytes, 16777217);
}

static void test_product_table(void **state)
{
	struct capacity c;
	char err[CAPACITY_MSG_MAX];

	assert_int_equal(capacity_product_mib("NVIDIA-H100-80GB-HBM3"), 81559);
	assert_int_equal(capacity_product_mib("NVIDIA-H100-80GB-HBM3-SHARED"), 81559);
	assert_int_equal(capacity_product_mib("NVIDIA-H200"), 143771);
	assert_int_equal(capacity_product_mib("NVIDIA-A100-SXM4-40GB"), 39538);
	assert_int_equal(capacity_product_mib("NVIDIA-A100-PCIE-40GB"), 40536);
	assert_int_equal(capacity_product_mib("NVIDIA-L40S"), 46068);
	assert_int_equal(capacity_product_mib("NVIDIA-L4"), 23034);
	assert_int_equal(capacity_product_mib("NVIDIA-L4-SHARED"), 23034);
	/* Exact names only: a prefix, a different model, MIG slices, case. */
	assert_int_equal(capacity_product_mib("NVIDIA-L"), 0);
	assert_int_equal(capacity_product_mib("NVIDIA-A100-SXM4-80GB"), 0);
	assert_int_equal(capacity_product_mib("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"), 0);
	assert_int_equal(capacity_product_mib("nvidia-l4"), 0);
	assert_int_equal(capacity_product_mib("-SHARED"), 0);
	assert_int_equal(capacity_product_mib(""), 0);
	assert_int_equal(capacity_product_mib(NULL), 0);

	assert_int_equal(read_node("'nvidia.com/gpu.product':'NVIDIA-L40S-SHARED',"
	                           "'nvidia.com/gpu.count':'2'",
	                           "", "", &c, err, sizeof(err)),
	                 0);
	assert_int_equal(c.per_gpu_bytes, 46068 * MIB);
	assert_int_equal(c.total_bytes, 2 * 46068 * MIB);
	assert_int_equal(c.memory_source, CAPACITY_SRC_PRODUCT_TABLE);
}

static void test_count_from_allocatable(void **state)
{
	struct capacity c;
	char err[CAPACITY_MSG_MAX];

	/* 8 replicas advertised, 4 per card: 2 cards. */
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'23034','nvidia.com/gpu.replicas':'4'",
	                           "", "'nvidia.com/gpu':'8'", &c, err, sizeof(err)),
	                 0);
	assert_int_equal(c.gpu_count, 2);
	assert_int_equal(c.count_source, CAPACITY_SRC_ALLOCATABLE);

	/* No replicas label: one per card. A number works as well as a string. */
	assert_int_equal(
	    read_node("'nvidia.com/gpu.memory':'23034'", "", "'nvidia.com/gpu':3", &c, err, 64), 0);
	assert_int_equal(c.gpu_count, 3);

	/* Configured resource names are used for the lookup. */
	{
		static const char *const names[] = {"example.com/gpu"};
		struct demand_config cfg = {.gpu_resources = names, .n_gpu_resources = 1};
		cJSON *j = node("'nvidia.com/gpu.memory':'23034'", "", "'example.com/gpu':'5'");

		assert_int_equal(capacity_from_node(j, &cfg, &c, err, sizeof(err)), 0);
		assert_int_equal(c.gpu_count, 5);
		cJSON_Delete(j);
	}
}

static void test_unknown(void **state)
{
	struct capacity c;
	char err[CAPACITY_MSG_MAX];

	assert_int_equal(read_node("", "", "'nvidia.com/gpu':'1'", &c, err, sizeof(err)),
	                 CAPACITY_EUNKNOWN);
	assert_string_equal(err, "node gpu-node-b: GPU memory unknown: set label "
	                         "nvidia.com/gpu.memory (MiB per GPU, as GPU Feature Discovery "
	                         "does) or annotation gpu-memory-guard.io/gpu-memory (e.g. 80Gi)");

	assert_int_equal(read_node("'nvidia.com/gpu.product':'NVIDIA-B200'", "",
	                           "'nvidia.com/gpu':'1'", &c, err, sizeof(err)),
	                 CAPACITY_EUNKNOWN);
	assert_string_equal(err,
	                    "node gpu-node-b: GPU memory unknown for product \"NVIDIA-B200\": "
	                    "set label nvidia.com/gpu.memory (MiB per GPU, as GPU Feature "
	                    "Discovery does) or annotation gpu-memory-guard.io/gpu-memory (e.g. "
	                    "80Gi)");

	assert_int_equal(read_node("'nvidia.com/gpu.memory':'81559'", "", "", &c, err, sizeof(err)),
	                 CAPACITY_EUNKNOWN);
	assert_string_equal(err,
	                    "node gpu-node-b: GPU count unknown: set annotation "
	                    "gpu-memory-guard.io/gpu-count (physical GPUs) or GPU Feature "
	                    "Discovery's labels nvidia.com/gpu.count and nvidia.com/gpu.replicas; "
	                    "allocatable alone counts the device plugin's slots, which may be "
	                    "several per GPU (time-slicing, MPS, vGPU)");

	/* Fewer replicas advertised than one card's worth: no whole card. */
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'81559','nvidia.com/gpu.replicas':'4'",
	                           "", "'nvidia.com/gpu':'2'", &c, err, sizeof(err)),
	                 CAPACITY_EUNKNOWN);

	/* Not even an object. */
	assert_int_equal(capacity_from_node(NULL, NULL, &c, err, sizeof(err)), CAPACITY_EUNKNOWN);
	assert_non_null(strstr(err, "node (unnamed): "));
}

static void test_malformed_sources(void **state)
{
	struct capacity c;
	char err[CAPACITY_MSG_MAX];

	assert_int_equal(read_node("'nvidia.com/gpu.memory':'81559','nvidia.com/gpu.count':'1'",
	                           "'gpu-memory-guard.io/gpu-memory':'80GB'", "", &c, err,
	                           sizeof(err)),
	                 CAPACITY_EINVALID);
	assert_non_null(strstr(err, "annotation gpu-memory-guard.io/gpu-memory \"80GB\""));
	assert_int_equal(
	    read_node("", "'gpu-memory-guard.io/gpu-memory':'80'", "", &c, err, sizeof(err)),
	    CAPACITY_EINVALID);
	assert_non_null(strstr(err, "under 1Mi"));
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'80G'", "", "", &c, err, sizeof(err)),
	                 CAPACITY_EINVALID);
	assert_non_null(strstr(err, "label nvidia.com/gpu.memory \"80G\""));
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'0'", "", "", &c, err, sizeof(err)),
	                 CAPACITY_EINVALID);
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'81559','nvidia.com/gpu.count':'two'",
	                           "", "", &c, err, sizeof(err)),
	                 CAPACITY_EINVALID);
	assert_string_equal(err, "node gpu-node-b: label nvidia.com/gpu.count \"two\" is not a "
	                         "positive number of GPUs");
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'81559','nvidia.com/gpu.count':'1'",
	                           "'gpu-memory-guard.io/gpu-count':'0'", "", &c, err, sizeof(err)),
	                 CAPACITY_EINVALID);
	assert_non_null(strstr(err, "annotation gpu-memory-guard.io/gpu-count \"0\""));
	assert_int_equal(read_node("'nvidia.com/gpu.memory':'81559','nvidia.com/gpu.replicas':'x'",
	                           "", "'nvidia.com/gpu':'4'", &c, err, sizeof(err)),
	                 CAPACITY_EINVALID);
}

static void test_threshold_annotation(void **state)
{
	struct capacity c;
	char err[CAPACITY_MSG_MAX];
	const char *gfd = "'nvidia.com/gpu.memory':'81559','nvidia.com/gpu.count':'1'";

	assert_int_equal(
	    read_node(gfd, "'gpu-memory-guard.io/threshold':'0.75'", "", &c, err, sizeof(err)), 0);
	assert_int_equal(c.has_threshold, 1);
	assert_true(c.threshold == 0.75);

	assert_int_equal(
	    read_node(gfd, "'gpu-memory-guard.io/threshold':'1.5'", "", &c, err, sizeof(err)),
	    CAPACITY_EINVALID);
	assert_string_equal(err,
	                    "node gpu-node-b: annotation gpu-memory-guard.io/threshold \"1.5\" "
	                    "is not a ratio 0 < t <= 1 (e.g. \"0.9\")");
}

static void test_parse_ratio(void **state)
{
	static const char *const good[] = {"0.9", "1", "1.0", ".5", "0.000001", "1.", "0.95"};
	static const char *const bad[] = {"0",    "0.0", "1.01",      "-0.5",     " 0.9", "0.9 ",
	                                  "9e-1", "nan", "inf",       "",         "0x1",  "1..",
	                                  ".",    "90%", "0.0000001", "0.0000009"};
	double v = 0;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (capacity_parse_ratio(good[i], &v) != 0)
			fail_msg("\"%s\" refused", good[i]);
	assert_int_equal(capacity_parse_ratio("0.9", &v), 0);
	assert_true(v == 0.9);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (capacity_parse_ratio(bad[i], &v) == 0)
			fail_msg("\"%s\" accepted", bad[i]);
	assert_int_equal(capacity_parse_ratio(NULL, &v), -1);
}

static void test_total_saturates(void **state)
{
	struct capacity c;
	char err[CAPACITY_MSG_MAX];

	assert_int_equal(read_node("",
	                           "'gpu-memory-guard.io/gpu-memory':'15Ei',"
	                           "'gpu-memory-guard.io/gpu-count':'1000'",
	                           "", &c, err, sizeof(err)),
	                 0);
	assert_int_equal(c.total_bytes, UINT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fixture_gpu_node_a),
	    cmocka_unit_test(test_annotation_wins),
	    cmocka_unit_test(test_gfd_label_mib_and_bytes),
	    cmocka_unit_test(test_product_table),
	    cmocka_unit_test(test_count_from_allocatable),
	    cmocka_unit_test(test_unknown),
	    cmocka_unit_test(test_malformed_sources),
	    cmocka_unit_test(test_threshold_annotation),
	    cmocka_unit_test(test_parse_ratio),
	    cmocka_unit_test(test_total_saturates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
