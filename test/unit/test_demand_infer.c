/* Unit tests for lib/core/demand under --undeclared infer: each source in order (GPU_MEMORY_LIMIT,
 * HAMi, KAI, the engine, nothing), errors naming container and flag, two sources disagreeing, and
 * the resolution of shares on the node (the same pod on an 80 GB and a 24 GB card). */
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
#include "fixture.h"
#include "engine.h"

#define MI   (1024ull * 1024)
#define GI   (1024ull * MI)
#define H100 (81559ull * MI) /* NVML's H100 80GB HBM3 */
#define L4   (23034ull * MI)

static const struct demand_config infer = {.infer = 1};

/* A pod written in JSON with single quotes. */
static struct demand parse(const char *text, const struct demand_config *cfg)
{
	struct demand d;
	cJSON *j = fixture_quoted_json(text);

	assert_int_equal(demand_from_pod(j, cfg, &d), 0);
	cJSON_Delete(j);
	return d;
}

static struct capacity node(uint64_t card, uint64_t gpus, enum capacity_sharing sharing,
                            uint64_t replicas)
{
	struct capacity c;

	memset(&c, 0, sizeof(c));
	c.per_gpu_bytes = card;
	c.gpu_count = gpus;
	c.total_bytes = card * gpus;
	c.sharing = sharing;
	c.replicas = replicas;
	c.piece_bytes = sharing == CAPACITY_SHARING_MPS ? card / replicas : card;
	return c;
}

/* ppm of x rounded up, as the resolution does. */
static uint64_t share(uint64_t x, uint64_t ppm)
{
	return (x / 1000000) * ppm + ((x % 1000000) * ppm + 999999) / 1000000;
}

#define VLLM_SH                                                                                    \
	"{'metadata':{'name':'v'},'spec':{'containers':[{'name':'vllm','image':'vllm/"             \
	"vllm-openai:v0.9.2',"                                                                     \
	"'command':['/bin/sh','-c'],'args':['vllm serve m --gpu-memory-utilization 0.9'],"         \
	"'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"

/* A share resolves against the card of each node: 0.9 of 80 GB, 0.9 of 24 GB. */
static void test_engine_share_per_node(void **state)
{
	struct demand d = parse(VLLM_SH, &infer), r;
	struct capacity big = node(H100, 8, CAPACITY_SHARING_TIME_SLICING, 4);
	struct capacity small = node(L4, 1, CAPACITY_SHARING_NONE, 1);
	char words[DEMAND_MSG_MAX];

	(void)state;
	assert_int_equal(d.status, DEMAND_OK);
	assert_true(d.shares);
	assert_int_equal(d.source, DEMAND_SRC_ENGINE);
	assert_int_equal(d.n_parts, 1);
	assert_int_equal(d.parts[0].ppm, 900000);
	assert_string_equal(d.parts[0].words, "vllm --gpu-memory-utilization 0.9");
	demand_resolve(&d, &big, &r);
	assert_int_equal(r.bytes, share(H100, 900000));
	assert_int_equal(r.uses[0].bytes, r.bytes);
	assert_int_equal(r.max_per_gpu_bytes, r.bytes);
	demand_describe(&r, words, sizeof(words));
	assert_string_equal(words, "counted as 71.7Gi: vllm --gpu-memory-utilization 0.9 of this "
	                           "node's 79.6Gi card");
	demand_resolve(&d, &small, &r);
	assert_int_equal(r.bytes, share(L4, 900000));
	/* in place, too */
	demand_resolve(&d, &small, &d);
	assert_int_equal(d.bytes, share(L4, 900000));
}
/* Nothing said: the whole memory of its units (time-sliced: never more cards than the node's;
 * MPS: its pinned piece). */
static void test_nothing_is_whole_cards(void **state)
{
	struct demand d = parse("{'spec':{'containers':[{'name':'app','image':'cuda',"
	                        "'resources':{'limits':{'nvidia.com/gpu':'6'}}}]}}",
	                        &infer),
	              r;
	struct capacity ts = node(H100, 4, CAPACITY_SHARING_TIME_SLICING, 4);
	struct capacity mps = node(H100, 8, CAPACITY_SHARING_MPS, 4);
	struct capacity none = node(H100, 8, CAPACITY_SHARING_NONE, 1);

	(void)state;
	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.source, DEMAND_SRC_WHOLE);
	assert_string_equal(demand_source_name(d.source), "whole-card");
	demand_resolve(&d, &ts, &r);
	assert_int_equal(r.bytes, 4 * H100);
	demand_resolve(&d, &mps, &r);
	assert_int_equal(r.bytes, 6 * (H100 / 4));
	demand_resolve(&d, &none, &r);
	assert_int_equal(r.bytes, 6 * H100);
	/* strict: the same pod is refused as before */
	d = parse(
	    "{'spec':{'containers':[{'name':'app','resources':{'limits':{'nvidia.com/gpu':'1'}}"
	    "}]}}",
	    &(struct demand_config){.infer = 0});
	assert_int_equal(d.status, DEMAND_INVALID);
	assert_non_null(strstr(d.error, "declares no GPU_MEMORY_LIMIT"));
	assert_int_equal(d.n_parts, 0);
}

/* HAMi's resources and env, KAI's annotations; bytes are final, shares resolve. */
static void test_other_systems(void **state)
{
	struct capacity c = node(H100, 8, CAPACITY_SHARING_TIME_SLICING, 4);
	struct demand d, r;

	(void)state;
	d = parse("{'spec':{'containers':[{'name':'h','resources':{'limits':{'nvidia.com/gpu':2,"
	          "'nvidia.com/gpumem':'10240'}}}]}}",
	          &infer);
	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.source, DEMAND_SRC_HAMI);
	assert_false(d.shares);
	assert_int_equal(d.bytes, 20 * GI);
	assert_string_equal(d.parts[0].words, "nvidia.com/gpumem 10240Mi per GPU");

	d = parse("{'spec':{'containers':[{'name':'h','resources':{'limits':{'nvidia.com/gpu':1,"
	          "'nvidia.com/gpumem-percentage':'25'}}}]}}",
	          &infer);
	assert_true(d.shares);
	demand_resolve(&d, &c, &r);
	assert_int_equal(r.bytes, share(H100, 250000));

	d = parse("{'spec':{'containers':[{'name':'h','env':[{'name':'CUDA_DEVICE_MEMORY_LIMIT',"
	          "'value':'4096m'}],'resources':{'limits':{'nvidia.com/gpu':'2'}}}]}}",
	          &infer);
	assert_int_equal(d.source, DEMAND_SRC_HAMI);
	assert_int_equal(d.bytes, 8 * GI);

	d = parse("{'metadata':{'annotations':{'gpu-memory':'20480'}},'spec':{'containers':[{"
	          "'name':'k','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	          &infer);
	assert_int_equal(d.source, DEMAND_SRC_KAI);
	assert_int_equal(d.bytes, 20 * GI);

	d = parse("{'metadata':{'annotations':{'gpu-fraction':'0.5'}},'spec':{'containers':[{"
	          "'name':'k','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	          &infer);
	assert_int_equal(d.source, DEMAND_SRC_KAI);
	demand_resolve(&d, &c, &r);
	assert_int_equal(r.bytes, share(H100, 500000));

	/* a share declared below the engine's: the engine's counts, and the words and a warning
	 * say so (not "KAI gpu-fraction 0.01" for 0.95 of the card) */
	d = parse(
	    "{'metadata':{'annotations':{'gpu-fraction':'0.01'}},'spec':{'containers':[{"
	    "'name':'k','image':'vllm/vllm-openai','args':['--gpu-memory-utilization','0.95'],"
	    "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	    &infer);
	assert_int_equal(d.source, DEMAND_SRC_KAI);
	demand_resolve(&d, &c, &r);
	assert_int_equal(r.bytes, share(H100, 950000));
	assert_non_null(strstr(r.parts[0].words, "vllm --gpu-memory-utilization 0.95"));
	assert_non_null(strstr(r.warning, "KAI gpu-fraction 0.01 is below"));
	assert_non_null(strstr(r.warning, "vllm --gpu-memory-utilization 0.95"));

	/* GPU_MEMORY_LIMIT comes first */
	d = parse("{'metadata':{'annotations':{'gpu-fraction':'0.5'}},'spec':{'containers':[{"
	          "'name':'k','env':[{'name':'GPU_MEMORY_LIMIT','value':'10Gi'}],"
	          "'resources':{'limits':{'nvidia.com/gpu':'1','nvidia.com/gpumem':'30000'}}}]}}",
	          &infer);
	assert_int_equal(d.source, DEMAND_SRC_DECLARED);
	assert_int_equal(d.bytes, 10 * GI);
	assert_false(d.shares);
}

/* A declaration below what the engine takes: the larger counts, a warning names both; above
 * it, the declaration counts silently. */
static void test_disagreeing_sources(void **state)
{
	struct capacity big = node(H100, 8, CAPACITY_SHARING_TIME_SLICING, 4);
	struct capacity small = node(L4, 1, CAPACITY_SHARING_TIME_SLICING, 4);
	struct demand d, r;

	(void)state;
	d = parse("{'spec':{'containers':[{'name':'vllm','image':'vllm/vllm-openai',"
	          "'env':[{'name':'GPU_MEMORY_LIMIT','value':'21Gi'}],"
	          "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	          &infer);
	assert_int_equal(d.source, DEMAND_SRC_DECLARED);
	assert_true(d.shares);
	demand_resolve(&d, &big, &r);
	assert_int_equal(r.bytes, share(H100, 920000));
	assert_non_null(strstr(r.warning, "GPU_MEMORY_LIMIT 21Gi (21Gi) is below what vllm's "
	                                  "default --gpu-memory-utilization 0.92 will take"));
	/* on a 24 GB card 0.92 is 20.7Gi: the declaration is larger and counts */
	demand_resolve(&d, &small, &r);
	assert_int_equal(r.bytes, 21 * GI);
	assert_string_equal(r.warning, "");
}

/* A declaration and an engine whose flags cannot be read: the engine may take up to its whole
 * cards whatever the declaration says, so the larger (the cards) counts, with a warning. */
static void test_declared_and_unreadable_engine(void **state)
{
	struct capacity c = node(H100, 8, CAPACITY_SHARING_TIME_SLICING, 4);
	struct demand d, r;

	(void)state;
	/* MORE="--enforce-eager": vLLM takes its default 0.92, not 1Gi */
	d = parse("{'spec':{'containers':[{'name':'v','command':['vllm','serve','m','$(MORE)'],"
	          "'env':[{'name':'GPU_MEMORY_LIMIT','value':'1Gi'},{'name':'MORE','value':"
	          "'--enforce-eager'}],'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	          &infer);
	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.source, DEMAND_SRC_DECLARED);
	demand_resolve(&d, &c, &r);
	assert_int_equal(r.bytes, H100);
	assert_non_null(strstr(r.warning, "GPU_MEMORY_LIMIT 1Gi (1Gi) is below what"));
	assert_non_null(strstr(r.warning, "$(MORE)"));

	/* a share declared (KAI) and an unreadable engine: the whole card */
	d = parse("{'metadata':{'annotations':{'gpu-fraction':'0.1'}},'spec':{'containers':[{"
	          "'name':'k','command':['sh','-c','vllm serve m $ARGS'],"
	          "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	          &infer);
	assert_int_equal(d.source, DEMAND_SRC_KAI);
	demand_resolve(&d, &c, &r);
	assert_int_equal(r.bytes, H100);
	assert_non_null(strstr(r.warning, "KAI gpu-fraction 0.1 is below"));
}

/* A value present but wrong: an error naming the container and the flag or field. */
static void test_errors_name_container_and_flag(void **state)
{
	static const struct {
		const char *pod, *msg;
	} rows[] = {
	    {"{'spec':{'containers':[{'name':'srv','command':['vllm','serve','--gpu-memory-"
	     "utilization','lots'],'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	     "container \"srv\": vllm --gpu-memory-utilization \"lots\" is not a ratio"},
	    {"{'spec':{'containers':[{'name':'h','resources':{'limits':{'nvidia.com/gpu':'1',"
	     "'nvidia.com/gpumem-percentage':'150'}}}]}}",
	     "container \"h\": nvidia.com/gpumem-percentage must be a whole percent"},
	    {"{'spec':{'containers':[{'name':'h','resources':{'limits':{'nvidia.com/gpu':'1',"
	     "'nvidia.com/gpumem':'1.5'}}}]}}",
	     "container \"h\": nvidia.com/gpumem must be a whole number of MiB"},
	    {"{'spec':{'containers':[{'name':'h','env':[{'name':'CUDA_DEVICE_MEMORY_LIMIT','value':"
	     "'4x'}],'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	     "container \"h\": CUDA_DEVICE_MEMORY_LIMIT \"4x\""},
	    /* 17179869185 GiB is 2^64 + 1Gi bytes: not 1Gi */
	    {"{'spec':{'containers':[{'name':'h','env':[{'name':'CUDA_DEVICE_MEMORY_LIMIT','value':"
	     "'17179869185g'}],'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	     "container \"h\": CUDA_DEVICE_MEMORY_LIMIT \"17179869185g\""},
	    {"{'metadata':{'annotations':{'gpu-fraction':'half'}},'spec':{'containers':[{'name':'k'"
	     ","
	     "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	     "gpu-fraction \"half\" (KAI, for container \"k\")"},
	    {"{'metadata':{'annotations':{'gpu-memory':'20Gi'}},'spec':{'containers':[{'name':'k',"
	     "'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	     "gpu-memory \"20Gi\" (KAI, for container \"k\") is not a whole number of MiB"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct demand d = parse(rows[i].pod, &infer);

		assert_int_equal(d.status, DEMAND_INVALID);
		if (strstr(d.error, rows[i].msg) == NULL)
			fail_msg("row %zu: \"%s\" lacks \"%s\"", i, d.error, rows[i].msg);
	}
}

/* The effective-request rule over resolved parts: a native sidecar engine plus an app. */
static void test_rule_over_resolved_parts(void **state)
{
	struct capacity c = node(H100, 8, CAPACITY_SHARING_TIME_SLICING, 4);
	struct demand
	    d = parse(
	        "{'spec':{'initContainers':[{'name':'warm','command':['vllm','serve','--gpu-memory-"
	        "utilization','0.5'],'resources':{'limits':{'nvidia.com/gpu':'1'}}},"
	        "{'name':'side','restartPolicy':'Always','env':[{'name':'GPU_MEMORY_LIMIT','value':"
	        "'2Gi'}],'resources':{'limits':{'nvidia.com/gpu':'1'}}}],"
	        "'containers':[{'name':'tgi','command':['text-generation-launcher'],'env':[{'name':"
	        "'CUDA_MEMORY_FRACTION','value':'0.25'}],'resources':{'limits':{'nvidia.com/"
	        "gpu':'1'}}},"
	        "{'name':'web','image':'nginx'}]}}",
	        &infer),
	    r;
	char words[DEMAND_MSG_MAX];

	(void)state;
	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.n_parts, 3);
	assert_int_equal(d.source, DEMAND_SRC_ENGINE);
	demand_resolve(&d, &c, &r);
	/* max(apps + sidecars, init + sidecars before it) = max(0.25 card + 2Gi, 0.5 card) */
	uint64_t apps = share(H100, 250000) + 2 * GI, init = share(H100, 500000);
	assert_int_equal(r.bytes, apps > init ? apps : init);
	/* the compact form placement items carry gives the same bytes */
	assert_int_equal(demand_shares_bytes(d.compact, d.n_parts, &c), r.bytes);
	assert_int_equal(r.n_uses, 3);
	assert_int_equal(r.uses[2].bytes, share(H100, 250000));
	assert_string_equal(r.max_per_gpu_container, "warm");
	demand_describe(&r, words, sizeof(words));
	assert_non_null(strstr(words, "vllm --gpu-memory-utilization 0.5 of this node's 79.6Gi "
	                              "card, and 2 more GPU container(s)"));
}

/* Assumed defaults come from the config, and a pod of declared containers needs no node. */
static void test_defaults_and_declared(void **state)
{
	struct engine_defaults e;
	struct demand_config cfg = {.infer = 1, .engines = &e};
	struct capacity c = node(H100, 1, CAPACITY_SHARING_NONE, 1);
	struct demand d, r;
	char words[DEMAND_MSG_MAX];

	(void)state;
	engine_defaults_init(&e);
	e.ppm[ENGINE_TGI] = 800000;
	d = parse("{'spec':{'containers':[{'name':'t','image':'ghcr.io/huggingface/text-generation-"
	          "inference:3.0','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	          &cfg);
	assert_string_equal(d.parts[0].words, "tgi's default --cuda-memory-fraction 0.8");
	demand_resolve(&d, &c, &r);
	assert_int_equal(r.bytes, share(H100, 800000));

	d = parse("{'spec':{'containers':[{'name':'a','env':[{'name':'GPU_MEMORY_LIMIT','value':"
	          "'20Gi'}],'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	          &cfg);
	assert_false(d.shares);
	assert_int_equal(d.source, DEMAND_SRC_DECLARED);
	demand_resolve(&d, &c, &r);
	assert_int_equal(r.bytes, 20 * GI);
	demand_describe(&r, words, sizeof(words));
	assert_string_equal(words, "counted as 20Gi: GPU_MEMORY_LIMIT 20Gi");
}

/* KAI's GPU sharing counted once: the reservation pod KAI puts on a shared card (it asks the
 * whole GPU and states nothing) stands for the card's memory; the fractional pods beside it
 * ask for no GPU resource and are not GPU pods, so nothing counts twice (docs/sharing.md). */
static void test_kai_counted_once(void **state)
{
	struct capacity c = node(H100, 8, CAPACITY_SHARING_NONE, 1);
	struct demand d, r;

	(void)state;
	d = parse(
	    "{'metadata':{'namespace':'kai-resource-reservation','name':'gpu-reservation-"
	    "node-a-x1'},'spec':{'containers':[{'name':'resource-reservation','image':"
	    "'ghcr.io/nvidia/kai-scheduler/resource-reservation:v0.5.0','resources':{'limits':{"
	    "'nvidia.com/gpu':'1'}}}]}}",
	    &infer);
	assert_int_equal(d.status, DEMAND_OK);
	assert_int_equal(d.source, DEMAND_SRC_WHOLE);
	assert_true(demand_takes_cards(&d));
	demand_resolve(&d, &c, &r);
	assert_int_equal(r.bytes, H100);
	d = parse("{'metadata':{'namespace':'team','name':'frac','annotations':{'gpu-fraction':"
	          "'0.5'}},'spec':{'schedulerName':'kai-scheduler','containers':[{'name':'app'}]}}",
	          &infer);
	assert_int_equal(d.status, DEMAND_NOT_GPU);
}

/* DRA containers (demand.h): a container that asks no GPU resource but names a claim keeps its
 * own figure in dra_figs, a share of one device, and the pod stays DEMAND_NOT_GPU. */
#define DRA_C(extra)                                                                               \
	"{'spec':{'resourceClaims':[{'name':'gpu','resourceClaimName':'c'}],'containers':[{'name'" \
	":"                                                                                        \
	"'main','image':'vllm/vllm-openai:v0.9.2','resources':{'claims':[{'name':'gpu'}]}" extra   \
	"}]}}"

static void test_dra_containers(void **state)
{
	(void)state;
	static const struct {
		const char *what, *pod;
		int infer;
		enum demand_status status;
		size_t n;
		uint64_t bytes;
		uint32_t ppm;
		const char *words; /* dra_words, or the error when invalid */
	} rows[] = {
	    {"GPU_MEMORY_LIMIT, strict: kept, no warning",
	     DRA_C(",'env':[{'name':'GPU_MEMORY_LIMIT','value':'20Gi'}]"), 0, DEMAND_NOT_GPU, 1,
	     20 * GI, 0, "GPU_MEMORY_LIMIT 20Gi (container main)"},
	    {"vLLM's flag: a share of the device",
	     DRA_C(",'command':['vllm','serve','m','--gpu-memory-utilization','0.5']"), 1,
	     DEMAND_NOT_GPU, 1, 0, 500000, "vllm --gpu-memory-utilization 0.5 (container main)"},
	    {"vLLM's default (0.92 here)", DRA_C(",'command':['vllm','serve','m']"), 1,
	     DEMAND_NOT_GPU, 1, 0, 920000, NULL},
	    {"the engine not read in strict mode", DRA_C(",'command':['vllm','serve','m']"), 0,
	     DEMAND_NOT_GPU, 0, 0, 0, NULL},
	    {"HAMi-core's per-device limit",
	     DRA_C(",'command':['sleep','1'],'env':[{'name':'CUDA_DEVICE_MEMORY_LIMIT','value':"
	           "'16g'}]"),
	     1, DEMAND_NOT_GPU, 1, 16 * GI, 0, NULL},
	    {"a unit mistake is an error naming the container",
	     DRA_C(",'env':[{'name':'GPU_MEMORY_LIMIT','value':'24'}]"), 0, DEMAND_INVALID, 0, 0, 0,
	     "container \"main\": GPU_MEMORY_LIMIT \"24\" is 24 bytes"},
	    {"a container naming no claim: not read (a warning)",
	     "{'spec':{'resourceClaims':[{'name':'gpu','resourceClaimName':'c'}],'containers':[{"
	     "'name':'side','env':[{'name':'GPU_MEMORY_LIMIT','value':'20Gi'}]}]}}",
	     0, DEMAND_NOT_GPU, 0, 0, 0, NULL},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct demand d = parse(rows[i].pod, rows[i].infer ? &infer : NULL);
		const char *w = d.status == DEMAND_INVALID ? d.error : d.dra_words;

		if (d.status != rows[i].status || d.n_dra_figs != rows[i].n ||
		    (rows[i].n > 0 &&
		     (d.dra_figs[0].bytes != rows[i].bytes || d.dra_figs[0].ppm != rows[i].ppm ||
		      d.dra_figs[0].whole != 1)) ||
		    (rows[i].words != NULL &&
		     strncmp(w, rows[i].words, strlen(rows[i].words)) != 0) ||
		    (rows[i].n > 0 && d.warning[0] != '\0'))
			fail_msg("row %zu (%s): status %d n %zu bytes %llu ppm %u words \"%s\" "
			         "warning \"%s\"",
			         i, rows[i].what, d.status, d.n_dra_figs,
			         (unsigned long long)d.dra_figs[0].bytes, d.dra_figs[0].ppm, w,
			         d.warning);
		if (i == sizeof(rows) / sizeof(rows[0]) - 1)
			assert_non_null(strstr(d.warning, "asks for no"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dra_containers),
	    cmocka_unit_test(test_engine_share_per_node),
	    cmocka_unit_test(test_nothing_is_whole_cards),
	    cmocka_unit_test(test_other_systems),
	    cmocka_unit_test(test_disagreeing_sources),
	    cmocka_unit_test(test_errors_name_container_and_flag),
	    cmocka_unit_test(test_declared_and_unreadable_engine),
	    cmocka_unit_test(test_rule_over_resolved_parts),
	    cmocka_unit_test(test_defaults_and_declared),
	    cmocka_unit_test(test_kai_counted_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
