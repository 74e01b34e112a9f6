/* Unit tests for lib/demand: declarations, the effective-request rule, messages, fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "demand.h"
#include "fixture.h"

#define GI (1024ull * 1024 * 1024)

/* Read a fixture from $GMG_TEST_DATA (set by CTest) into a parsed cJSON tree. */
/* Parse a pod written in JSON with single quotes (for readability) instead of double. */
static cJSON *pod(const char *text)
{
	return fixture_quoted_json(text);
}

static struct demand decide(const char *text, const struct demand_config *cfg)
{
	struct demand d;
	cJSON *j = pod(text);

	assert_int_equal(demand_from_pod(j, cfg, &d), 0);
	cJSON_Delete(j);
	return d;
}

/* Container JSON helpers: name, GPU count (NULL: none), declaration (NULL: none), extra. */
#define GPU_C(name, gpus, mem, extra)                                                              \
	"{'name':'" name "','resources':{'limits':{'cpu':'1','nvidia.com/gpu':'" gpus              \
	"'}},'env':[{'name':'GPU_MEMORY_LIMIT','value':'" mem "'}]" extra "}"
#define PLAIN_C(name) "{'name':'" name "','resources':{'limits':{'cpu':'1'}}}"
#define SIDECAR       ",'restartPolicy':'Always'"

static void test_fixture_init_and_sidecar(void **state)
{
	cJSON *review = fixture_json("review-pod-create-init-and-sidecar.json");
	const cJSON *obj = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(review, "request"), "object");
	struct demand d;

	assert_int_equal(demand_from_pod(obj, NULL, &d), 0);
	assert_int_equal(d.status, DEMAND_OK);
	/* max(sidecar 6 + app 20, init 30) */
	assert_int_equal(d.bytes, 30 * GI);
	/* GPUs by the same rule: max(1 + 1, 1) */
	assert_int_equal(d.gpus, 2);
	assert_int_equal(d.max_per_gpu_bytes, 30 * GI);
	assert_string_equal(d.max_per_gpu_container, "warmup");
	assert_string_equal(d.error, "");
	assert_string_equal(d.warning, "");
	cJSON_Delete(review);
}

static void test_fixture_unscheduled(void **state)
{
	cJSON *review = fixture_json("review-pod-create-unscheduled.json");
	const cJSON *obj = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(review, "request"), "object");
	struct demand d;

	assert_int_equal(demand_from_pod(obj, NULL, &d), 0);
	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.bytes, 24 * GI);
	assert_int_equal(d.gpus, 1);
	cJSON_Delete(review);
}

static void test_every_pod_fixture(void **state)
{
	static const struct {
		const char *file;
		uint64_t bytes, gpus;
		const char *largest;
	} cases[] = {
	    {"review-pod-create-dryrun.json", 12 * GI, 1, "tei"},
	    {"review-pod-create-init-and-sidecar.json", 30 * GI, 2, "warmup"},
	    {"review-pod-create-nodename.json", 12 * GI, 1, "tei"},
	    {"review-pod-create-unscheduled.json", 24 * GI, 1, "vllm"},
	    {"review-pod-update.json", 12 * GI, 1, "tei"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *review = fixture_json(cases[i].file);
		const cJSON *obj = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(review, "request"), "object");
		struct demand d;

		assert_int_equal(demand_from_pod(obj, NULL, &d), 0);
		if (d.status != DEMAND_OK || d.bytes != cases[i].bytes || d.gpus != cases[i].gpus ||
		    strcmp(d.max_per_gpu_container, cases[i].largest) != 0)
			fail_msg("%s: status %d bytes %llu gpus %llu largest %s", cases[i].file,
			         d.status, (unsigned long long)d.bytes, (unsigned long long)d.gpus,
			         d.max_per_gpu_container);
		cJSON_Delete(review);
	}
}

static void test_fixture_podlist(void **state)
{
	cJSON *list = fixture_json("podlist-gpu-node-a.json");
	const cJSON *item;
	int seen = 0;

	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(list, "items"))
	{
		const char *name = cJSON_GetObjectItemCaseSensitive(
		                       cJSON_GetObjectItemCaseSensitive(item, "metadata"), "name")
		                       ->valuestring;
		struct demand d;

		assert_int_equal(demand_from_pod(item, NULL, &d), 0);
		if (strcmp(name, "chat-7b-0") == 0 || strcmp(name, "chat-7b-1") == 0) {
			assert_int_equal(d.status, DEMAND_OK);
			assert_int_equal(d.bytes, 20 * GI);
			seen++;
		} else if (strcmp(name, "batch-summarize-x7") == 0) {
			assert_int_equal(d.status, DEMAND_OK); /* phase filtering is not ours */
			assert_int_equal(d.bytes, 30 * GI);
			seen++;
		} else if (strcmp(name, "legacy-notebook") == 0) {
			assert_int_equal(d.status, DEMAND_INVALID);
			assert_int_equal(d.gpus, 1); /* callers count it as one whole GPU */
			assert_string_equal(
			    d.error, "container \"jupyter\" asks for 1 nvidia.com/gpu but "
			             "declares no GPU_MEMORY_LIMIT: add env GPU_MEMORY_LIMIT "
			             "with the GPU memory it needs, e.g. \"24Gi\"");
			seen++;
		} else if (strcmp(name, "log-shipper-abcde") == 0) {
			assert_int_equal(d.status, DEMAND_NOT_GPU);
			assert_int_equal(d.gpus, 0);
			assert_int_equal(d.bytes, 0);
			seen++;
		}
	}
	assert_int_equal(seen, 5);
	cJSON_Delete(list);
}

static void test_sidecar_before_init_counts_for_it(void **state)
{
	/* The sidecar runs while the later init container runs: max(6+20, 6+30) = 36. */
	struct demand d = decide(
	    "{'spec':{'initContainers':[" GPU_C("side", "1", "6Gi", SIDECAR) "," GPU_C(
	        "init", "1", "30Gi", "") "],'containers':[" GPU_C("app", "1", "20Gi", "") "]}}",
	    NULL);

	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.bytes, 36 * GI);
	assert_int_equal(d.gpus, 2);
}

static void test_init_containers_max_not_sum(void **state)
{
	/* Plain init containers run one at a time: max(10, 30, 5) vs apps 20. */
	struct demand d =
	    decide("{'spec':{'initContainers':[" GPU_C("a", "1", "10Gi", "") "," GPU_C(
	               "b", "1", "30Gi",
	               "") "," GPU_C("c", "1", "5Gi",
	                             "") "],'containers':[" GPU_C("app", "1", "20Gi", "") "]}}",
	           NULL);

	assert_int_equal(d.bytes, 30 * GI);
	assert_int_equal(d.gpus, 1);
}

static void test_sidecars_add_to_apps(void **state)
{
	struct demand d =
	    decide("{'spec':{'initContainers':[" GPU_C("s1", "1", "4Gi", SIDECAR) "," GPU_C(
	               "s2", "1", "2Gi",
	               SIDECAR) "],'containers':[" GPU_C("a1", "1", "10Gi",
	                                                 "") "," GPU_C("a2", "2", "14Gi", "") "]}}",
	           NULL);

	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.bytes, 30 * GI);
	assert_int_equal(d.gpus, 5);
	/* Per-GPU shares: 4, 2, 10, 7: a1 is the largest. */
	assert_int_equal(d.max_per_gpu_bytes, 10 * GI);
	assert_string_equal(d.max_per_gpu_container, "a1");
}

static void test_gpu_only_in_init_container(void **state)
{
	struct demand d =
	    decide("{'spec':{'initContainers':[" GPU_C("convert", "1", "40Gi",
	                                               "") "],'containers':[" PLAIN_C("web") "]}}",
	           NULL);

	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.bytes, 40 * GI);
	assert_int_equal(d.gpus, 1);
	assert_string_equal(d.max_per_gpu_container, "convert");
}

static void test_unrelated_init_containers_before_gpu_ones(void **state)
{
	/* Non-GPU init containers must neither shift nor hide the GPU containers after them. */
	struct demand d = decide(
	    "{'spec':{'initContainers':[" PLAIN_C("chown") "," PLAIN_C("fetch") "," GPU_C(
	        "warm", "1", "8Gi",
	        "") "],'containers':[" PLAIN_C("proxy") "," GPU_C("vllm", "1", "24Gi", "") "]}}",
	    NULL);

	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.bytes, 24 * GI);
	assert_int_equal(d.gpus, 1);
	assert_string_equal(d.max_per_gpu_container, "vllm");
}

static void test_missing_declaration(void **state)
{
	struct demand d = decide("{'spec':{'containers':[{'name':'vllm','resources':{'limits':{"
	                         "'nvidia.com/gpu':'1'}}}]}}",
	                         NULL);

	assert_int_equal(d.status, DEMAND_INVALID);
	assert_int_equal(d.gpus, 1);
	assert_string_equal(d.error, "container \"vllm\" asks for 1 nvidia.com/gpu but declares no "
	                             "GPU_MEMORY_LIMIT: add env GPU_MEMORY_LIMIT with the GPU "
	                             "memory it needs, e.g. \"24Gi\"");
}

static void test_value_from_refused(void **state)
{
	struct demand d = decide(
	    "{'spec':{'containers':[{'name':'vllm','resources':{'limits':{'nvidia.com/gpu':'1'}},"
	    "'env':[{'name':'GPU_MEMORY_LIMIT','valueFrom':{'configMapKeyRef':{'name':'x','key':"
	    "'y'}}}]}]}}",
	    NULL);

	assert_int_equal(d.status, DEMAND_INVALID);
	assert_string_equal(d.error,
	                    "container \"vllm\": GPU_MEMORY_LIMIT uses valueFrom, which the "
	                    "webhook cannot read: set a literal value with the GPU memory "
	                    "it needs, e.g. \"24Gi\"");
}

static void expect_invalid(const char *value, const char *want)
{
	char text[512];
	struct demand d;

	snprintf(text, sizeof(text), "{'spec':{'containers':[" GPU_C("vllm", "1", "%s", "") "]}}",
	         value);
	d = decide(text, NULL);
	assert_int_equal(d.status, DEMAND_INVALID);
	assert_int_equal(d.bytes, 0);
	assert_string_equal(d.error, want);
}

static void test_bad_values(void **state)
{
	expect_invalid("", "container \"vllm\": GPU_MEMORY_LIMIT is empty: set the GPU memory it "
	                   "needs, e.g. \"24Gi\"");
	expect_invalid("-24Gi", "container \"vllm\": GPU_MEMORY_LIMIT \"-24Gi\" is negative: set "
	                        "the GPU memory it needs, e.g. \"24Gi\"");
	expect_invalid("24GB", "container \"vllm\": GPU_MEMORY_LIMIT \"24GB\" is not a Kubernetes "
	                       "quantity (unknown suffix \"GB\" (use Ki Mi Gi Ti Pi Ei, or k M G T "
	                       "P E; case matters)): write it like \"24Gi\", \"24G\" or "
	                       "\"25769803776\"");
	expect_invalid("24", "container \"vllm\": GPU_MEMORY_LIMIT \"24\" is 24 bytes, under 1Mi, "
	                     "which looks like a unit mistake: write the unit, e.g. \"24Gi\"");
	expect_invalid("1048575", "container \"vllm\": GPU_MEMORY_LIMIT \"1048575\" is 1048575 "
	                          "bytes, under 1Mi, which looks like a unit mistake: write the "
	                          "unit, e.g. \"24Gi\"");
	expect_invalid("16", "container \"vllm\": GPU_MEMORY_LIMIT \"16\" is 16 bytes, under 1Mi, "
	                     "which looks like a unit mistake: write the unit, e.g. \"16Gi\"");
	expect_invalid("0.5Ki", "container \"vllm\": GPU_MEMORY_LIMIT \"0.5Ki\" is 512 bytes, "
	                        "under 1Mi, which looks like a unit mistake: write the unit, e.g. "
	                        "\"24Gi\"");
	expect_invalid(
	    "99999999999999999999Gi",
	    "container \"vllm\": GPU_MEMORY_LIMIT \"99999999999999999999Gi\" is not a Kubernetes "
	    "quantity (\"99999999999999999999Gi\" is 16Ei or more): write it like \"24Gi\", "
	    "\"24G\" or \"25769803776\"");
}

static void test_one_mebibyte_is_enough(void **state)
{
	struct demand d =
	    decide("{'spec':{'containers':[" GPU_C("tiny", "1", "1048576", "") "]}}", NULL);

	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.bytes, 1048576);
}

static void test_non_gpu_container_declaring_warns(void **state)
{
	struct demand d = decide("{'spec':{'containers':[{'name':'web','env':[{'name':'GPU_MEMORY_"
	                         "LIMIT','value':'4Gi'}]}]}}",
	                         NULL);

	assert_int_equal(d.status, DEMAND_NOT_GPU);
	assert_int_equal(d.bytes, 0);
	assert_string_equal(d.warning,
	                    "container \"web\" declares GPU_MEMORY_LIMIT but asks for no "
	                    "nvidia.com/gpu: the declaration is ignored");

	/* Next to a GPU container: still a warning, and it adds nothing. */
	d = decide("{'spec':{'containers':[{'name':'web','env':[{'name':'GPU_MEMORY_LIMIT','value'"
	           ":'4Gi'}]}," GPU_C("vllm", "1", "24Gi", "") "]}}",
	           NULL);
	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.bytes, 24 * GI);
	assert_true(strstr(d.warning, "\"web\"") != NULL);
}

static void test_requests_when_no_limits(void **state)
{
	struct demand d = decide("{'spec':{'containers':[{'name':'a','resources':{'requests':{"
	                         "'nvidia.com/gpu':2}},'env':[{'name':'GPU_MEMORY_LIMIT','value':"
	                         "'30Gi'}]}]}}",
	                         NULL);

	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.gpus, 2);
	assert_int_equal(d.max_per_gpu_bytes, 15 * GI);
}

static void test_gpu_counts(void **state)
{
	struct demand d;

	/* Zero GPUs is not a GPU container. */
	d = decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':"
	           "'0'}}}]}}",
	           NULL);
	assert_int_equal(d.status, DEMAND_NOT_GPU);

	/* A fractional count is refused. */
	d = decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':"
	           "'1.5'}}}]}}",
	           NULL);
	assert_int_equal(d.status, DEMAND_INVALID);
	assert_string_equal(d.error, "container \"a\": nvidia.com/gpu must be a whole number of "
	                             "GPUs, e.g. \"1\"");
	d = decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':"
	           "1.5}}}]}}",
	           NULL);
	assert_int_equal(d.status, DEMAND_INVALID);
	d = decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':"
	           "-1}}}]}}",
	           NULL);
	assert_int_equal(d.status, DEMAND_INVALID);
	/* Above DEMAND_MAX_GPUS (10^15): refused. */
	d = decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':"
	           "'1000000000000001'}}}]}}",
	           NULL);
	assert_int_equal(d.status, DEMAND_INVALID);
	assert_non_null(strstr(d.error, "must be a whole number of GPUs"));

	/* Per-GPU share is rounded up. */
	d = decide("{'spec':{'containers':[" GPU_C("a", "3", "10", "") "]}}", NULL);
	assert_int_equal(d.status, DEMAND_INVALID);
	d = decide("{'spec':{'containers':[" GPU_C("a", "3", "10Mi", "") "]}}", NULL);
	assert_int_equal(d.max_per_gpu_bytes, (10 * 1048576 + 2) / 3);
}

static void test_configured_resources(void **state)
{
	static const char *const names[] = {"nvidia.com/gpu", "nvidia.com/gpu.shared"};
	struct demand_config cfg = {.gpu_resources = names, .n_gpu_resources = 2};
	const char *text = "{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/"
	                   "gpu.shared':'1','example.com/gpu':'4'}}}]}}";
	struct demand d;

	d = decide(text, &cfg);
	assert_int_equal(d.status, DEMAND_INVALID);
	assert_int_equal(d.gpus, 1);
	assert_true(strstr(d.error, "asks for 1 nvidia.com/gpu.shared") != NULL);

	/* With the default only nvidia.com/gpu counts. */
	d = decide(text, NULL);
	assert_int_equal(d.status, DEMAND_NOT_GPU);
}

/* KEP-5004: units the pod's scheduler-made claim serves (status.extendedResourceClaimStatus
 * .requestMappings) are the claim's, left out of the device-plugin demand; the rest counts. */
#define EXT_STATUS(maps)                                                                           \
	",'status':{'extendedResourceClaimStatus':{'resourceClaimName':'p-ext','requestMappings'"  \
	":" maps "}}"
#define MAP(c, r) "{'containerName':'" c "','resourceName':'" r "','requestName':'req'}"

static void test_extended_claim_units(void **state)
{
	(void)state;
	static const struct {
		const char *what, *pod;
		enum demand_status status;
		uint64_t gpus, dra_units, bytes;
		int warns;
	} rows[] = {
	    {"all its units the claim's: not a GPU pod here, no warning for its declaration",
	     "{'spec':{'containers':[" GPU_C("a", "1", "20Gi", "") "]}" EXT_STATUS(
	         "[" MAP("a", "nvidia.com/gpu") "]") "}",
	     DEMAND_NOT_GPU, 0, 1, 0, 0},
	    {"mixed: nvidia.com/gpu by the claim, a MIG slice by the device plugin: both kept",
	     "{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'2',"
	     "'nvidia.com/"
	     "mig-1g.10gb':'1'}},'env':[{'name':'GPU_MEMORY_LIMIT','value':'8Gi'}]}]}" EXT_STATUS(
	         "[" MAP("a", "nvidia.com/gpu") "]") "}",
	     DEMAND_OK, 1, 2, 8 * GI, 0},
	    {"mixed across containers: b's GPU is the device plugin's",
	     "{'spec':{'containers':[" GPU_C("a", "1", "20Gi", "") "," GPU_C(
	         "b", "1", "30Gi", "") "]}" EXT_STATUS("[" MAP("a", "nvidia.com/gpu") "]") "}",
	     DEMAND_OK, 1, 1, 30 * GI, 0},
	    {"a mapping of another container or resource does not apply",
	     "{'spec':{'containers':[" GPU_C("a", "1", "20Gi", "") "]}" EXT_STATUS(
	         "[" MAP("b", "nvidia.com/gpu") "," MAP("a", "example.com/gpu") "]") "}",
	     DEMAND_OK, 1, 0, 20 * GI, 0},
	    {"limits mapped: requests are not read instead",
	     "{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'},"
	     "'requests':{'nvidia.com/gpu':'1'}}}]}" EXT_STATUS(
	         "[" MAP("a", "nvidia.com/gpu") "]") "}",
	     DEMAND_NOT_GPU, 0, 1, 0, 0},
	    {"no status yet (a CREATE): every unit counts",
	     "{'spec':{'containers':[" GPU_C("a", "1", "20Gi", "") "]}}", DEMAND_OK, 1, 0, 20 * GI,
	     0},
	    {"requestMappings not a list: invalid",
	     "{'spec':{'containers':[" GPU_C("a", "1", "20Gi", "") "]}" EXT_STATUS("{}") "}",
	     DEMAND_INVALID, 0, 0, 0, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct demand d = decide(rows[i].pod, NULL);

		if (d.status != rows[i].status || d.gpus != rows[i].gpus ||
		    d.dra_units != rows[i].dra_units || d.bytes != rows[i].bytes ||
		    (d.warning[0] != '\0') != rows[i].warns)
			fail_msg("row %zu (%s): status %d gpus %llu dra_units %llu bytes %llu "
			         "warning \"%s\" error \"%s\"",
			         i, rows[i].what, d.status, (unsigned long long)d.gpus,
			         (unsigned long long)d.dra_units, (unsigned long long)d.bytes,
			         d.warning, d.error);
	}
	struct demand d = decide(
	    "{'spec':{'containers':[" GPU_C("a", "1", "20Gi", "") "]}" EXT_STATUS("{}") "}", NULL);
	assert_string_equal(d.error, "status.extendedResourceClaimStatus.requestMappings is not a "
	                             "list");
}

static void test_first_problem_reported(void **state)
{
	struct demand d = decide("{'spec':{'containers':[" GPU_C(
	                             "ok", "1", "8Gi", "") ",{'name':'bad1','resources':{"
	                                                   "'limits':{'nvidia.com/gpu':'1'}}"
	                                                   "}," GPU_C("bad2", "1", "7", "") "]}}",
	                         NULL);

	assert_int_equal(d.status, DEMAND_INVALID);
	assert_int_equal(d.gpus, 3);
	assert_true(strstr(d.error, "\"bad1\"") != NULL);
}

static void test_names_and_duplicates(void **state)
{
	struct demand d;

	/* No name: the position names it. */
	d = decide("{'spec':{'containers':[" PLAIN_C("x") ",{'resources':{'limits':{'nvidia.com/"
	                                                  "gpu':'1'}}}]}}",
	           NULL);
	assert_true(strstr(d.error, "container \"containers[1]\"") != NULL);

	/* Duplicate env names: the last wins, as in the kubelet. */
	d = decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'"
	           "}},'env':[{'name':'GPU_MEMORY_LIMIT','value':'1Gi'},{'name':'GPU_MEMORY_LIMIT',"
	           "'value':'2Gi'}]}]}}",
	           NULL);
	assert_int_equal(d.bytes, 2 * GI);

	/* Env names are case-sensitive. */
	d = decide("{'spec':{'containers':[{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'"
	           "}},'env':[{'name':'gpu_memory_limit','value':'1Gi'}]}]}}",
	           NULL);
	assert_int_equal(d.status, DEMAND_INVALID);
}

static void test_malformed_pods(void **state)
{
	struct demand d;
	cJSON *j = cJSON_CreateArray();
	cJSON *big, *spec, *cs;

	assert_int_equal(demand_from_pod(j, NULL, &d), -1);
	assert_int_equal(d.status, DEMAND_INVALID);
	cJSON_Delete(j);
	assert_int_equal(demand_from_pod(NULL, NULL, &d), -1);

	d = decide("{}", NULL);
	assert_int_equal(d.status, DEMAND_NOT_GPU);
	d = decide("{'spec':{'containers':'nope','initContainers':7}}", NULL);
	assert_int_equal(d.status, DEMAND_NOT_GPU);
	d = decide("{'spec':{'containers':[1,'x',null,{'resources':[]}]}}", NULL);
	assert_int_equal(d.status, DEMAND_NOT_GPU);

	big = cJSON_CreateObject();
	spec = cJSON_AddObjectToObject(big, "spec");
	cs = cJSON_AddArrayToObject(spec, "containers");
	for (int i = 0; i < DEMAND_MAX_CONTAINERS + 1; i++)
		cJSON_AddItemToArray(cs, cJSON_CreateObject());
	assert_int_equal(demand_from_pod(big, NULL, &d), -1);
	assert_string_equal(d.error, "the pod has more than 256 containers");
	cJSON_Delete(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fixture_init_and_sidecar),
	    cmocka_unit_test(test_fixture_unscheduled),
	    cmocka_unit_test(test_fixture_podlist),
	    cmocka_unit_test(test_every_pod_fixture),
	    cmocka_unit_test(test_sidecar_before_init_counts_for_it),
	    cmocka_unit_test(test_init_containers_max_not_sum),
	    cmocka_unit_test(test_sidecars_add_to_apps),
	    cmocka_unit_test(test_gpu_only_in_init_container),
	    cmocka_unit_test(test_unrelated_init_containers_before_gpu_ones),
	    cmocka_unit_test(test_missing_declaration),
	    cmocka_unit_test(test_value_from_refused),
	    cmocka_unit_test(test_bad_values),
	    cmocka_unit_test(test_one_mebibyte_is_enough),
	    cmocka_unit_test(test_non_gpu_container_declaring_warns),
	    cmocka_unit_test(test_requests_when_no_limits),
	    cmocka_unit_test(test_gpu_counts),
	    cmocka_unit_test(test_configured_resources),
	    cmocka_unit_test(test_extended_claim_units),
	    cmocka_unit_test(test_first_problem_reported),
	    cmocka_unit_test(test_names_and_duplicates),
	    cmocka_unit_test(test_malformed_pods),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
