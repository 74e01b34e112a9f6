/* Unit tests for lib/core/placement under --undeclared infer: the exclusive/shared rule (8
 * undeclared 1-GPU pods on an 8-card exclusive node, an undeclared pod beside others on a
 * time-sliced card), consumers' shares resolved on the node, and the source in the message. */
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
#include "gpupolicy.h"
#include "placement.h"
#include "policyset.h"

#define MI   (1024ull * 1024)
#define GI   (1024ull * MI)
#define H100 (81559ull * MI)

static const struct demand_config infer = {.infer = 1};
static const struct placement_policy pol = {
    .threshold = 0.9, .warn_threshold = 0.8, .mode = POLICY_ENFORCE, .infer = 1};

static struct demand parse(const char *text)
{
	struct demand d;
	cJSON *j = fixture_quoted_json(text);

	assert_int_equal(demand_from_pod(j, &infer, &d), 0);
	assert_int_equal(d.status, DEMAND_OK);
	cJSON_Delete(j);
	return d;
}

static struct capacity node(uint64_t gpus, enum capacity_sharing sharing, uint64_t replicas)
{
	struct capacity c;

	memset(&c, 0, sizeof(c));
	c.per_gpu_bytes = H100;
	c.gpu_count = gpus;
	c.total_bytes = H100 * gpus;
	c.sharing = sharing;
	c.replicas = replicas;
	c.piece_bytes = sharing == CAPACITY_SHARING_MPS ? H100 / replicas : H100;
	return c;
}

#define UNDECLARED                                                                                 \
	"{'spec':{'containers':[{'name':'app','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"
#define VLLM                                                                                       \
	"{'spec':{'containers':[{'name':'vllm','image':'vllm/vllm-openai:v0.9.2','args':"          \
	"['--model','m'],'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"
#define DECLARED(v)                                                                                \
	"{'spec':{'containers':[{'name':'app','env':[{'name':'GPU_MEMORY_LIMIT','value':'" v       \
	"'}],'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}"

/* A consumer for the node from a demand, as the webhook, extender and report build it. */
static struct placement_item item_of(const char *key, const struct demand *d)
{
	return (struct placement_item){
	    .key = key,
	    .bytes = d->bytes,
	    .pool = d->pool,
	    .shares = d->shares ? d->compact : NULL,
	    .n_shares = d->shares ? d->n_parts : 0,
	    .whole_gpus = demand_takes_cards(d) ? d->gpus : 0,
	};
}

static struct placement_result decide(const struct capacity *cap, const struct placement_item *pods,
                                      size_t n, const struct demand *d)
{
	struct placement_node pn = {.name = "n1", .cap = cap, .pods = pods, .n_pods = n};
	struct placement_pod pp = {.name = "ns/new", .key = "ns/new", .demand = d};
	struct placement_result r;

	assert_int_equal(placement_decide(&pn, &pp, &pol, 0, &r), 0);
	return r;
}

/* Eight undeclared 1-GPU pods on an 8-card exclusive node are all admitted; a ninth is not. */
static void test_eight_undeclared_on_exclusive_node(void **state)
{
	struct capacity cap = node(8, CAPACITY_SHARING_NONE, 1);
	struct demand d = parse(UNDECLARED);
	struct placement_item pods[9];
	static const char *keys[] = {"a/0", "a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7", "a/8"};

	(void)state;
	for (size_t i = 0; i < 8; i++) {
		struct placement_result r = decide(&cap, pods, i, &d);

		if (!r.decision.allowed)
			fail_msg("pod %zu refused: %s", i, r.decision.message);
		assert_string_equal(r.decision.reason, "ExclusiveCards");
		pods[i] = item_of(keys[i], &d);
	}
	struct placement_result r = decide(&cap, pods, 8, &d);
	assert_false(r.decision.allowed);
	assert_string_equal(r.decision.reason, "NoFreeCard");
	assert_non_null(strstr(r.decision.message,
	                       "it takes 1 whole GPU(s) and pods that take their "
	                       "cards already hold 8 of the node's 8 unshared "
	                       "GPUs"));
	/* a declared pod finds no card either */
	struct demand decl = parse(DECLARED("1Gi"));
	r = decide(&cap, pods, 8, &decl);
	assert_false(r.decision.allowed);
	assert_string_equal(r.decision.reason, "NoFreeCard");
	assert_non_null(strstr(r.decision.message, "pods that take their cards hold all 8 of the "
	                                           "node's unshared GPUs; counted as 1Gi"));
	/* a stock vLLM pod (0.92 of its card, more than the 0.9 threshold) takes its card too */
	struct demand v = parse(VLLM);
	r = decide(&cap, pods, 7, &v);
	assert_true(r.decision.allowed);
	assert_string_equal(r.decision.reason, "ExclusiveCards");
	/* an invalid pod already there (undeclared_gpus) holds its cards the same way */
	pods[0] = (struct placement_item){.key = "old/x", .undeclared_gpus = 1};
	r = decide(&cap, pods, 8, &d);
	assert_string_equal(r.decision.reason, "NoFreeCard");
}

/* A declared pod beside pods that hold their cards is judged on the remaining cards. */
static void test_declared_beside_held_cards(void **state)
{
	struct capacity cap = node(8, CAPACITY_SHARING_NONE, 1);
	struct demand u = parse(UNDECLARED);
	struct demand small = parse(DECLARED("70Gi")), big = parse(DECLARED("72Gi"));
	struct placement_item pods[7];
	static const char *keys[] = {"a/0", "a/1", "a/2", "a/3", "a/4", "a/5", "a/6"};

	(void)state;
	for (size_t i = 0; i < 7; i++)
		pods[i] = item_of(keys[i], &u);
	struct placement_result r = decide(&cap, pods, 7, &small);
	assert_true(r.decision.allowed);
	assert_int_equal(r.held_gpus, 7);
	assert_int_equal(r.pool_bytes, H100);
	r = decide(&cap, pods, 7, &big);
	assert_false(r.decision.allowed);
	/* strict mode: the same consumers fill the memory (the behaviour before infer) */
	struct placement_policy strict = pol;
	struct placement_node pn = {.name = "n1", .cap = &cap, .pods = pods, .n_pods = 7};
	struct placement_pod pp = {.name = "ns/new", .key = "ns/new", .demand = &small};
	strict.infer = 0;
	assert_int_equal(placement_decide(&pn, &pp, &strict, 0, &r), 0);
	assert_false(r.decision.allowed);
}

/* On a time-sliced card an undeclared pod is refused beside anything, admitted alone, and
 * counts its whole card for the pods after it. */
static void test_undeclared_on_shared_card(void **state)
{
	struct capacity cap = node(1, CAPACITY_SHARING_TIME_SLICING, 4);
	struct demand u = parse(UNDECLARED), small = parse(DECLARED("4Gi"));
	struct placement_item pods[1] = {item_of("a/declared", &small)};

	(void)state;
	struct placement_result r = decide(&cap, pods, 1, &u);
	assert_false(r.decision.allowed);
	assert_string_equal(r.decision.reason, "UndeclaredOnSharedCard");
	assert_non_null(strstr(r.decision.message,
	                       "ns/new declares no GPU memory, and the GPUs of n1 "
	                       "are shared (time-sliced) with 1 other pod(s)"));
	assert_non_null(strstr(r.decision.message, "GPU_MEMORY_LIMIT (e.g. \"24Gi\")"));
	assert_non_null(strstr(r.decision.message, "; counted as 79.6Gi: no GPU memory declared"));
	r = decide(&cap, NULL, 0, &u);
	assert_true(r.decision.allowed);
	assert_string_equal(r.decision.reason, "SoleConsumer");
	/* after it, a declared pod finds the card full */
	pods[0] = item_of("a/undeclared", &u);
	r = decide(&cap, pods, 1, &small);
	assert_false(r.decision.allowed);
	/* warn mode: allowed with the text */
	struct placement_policy warn = pol;
	struct placement_node pn = {.name = "n1", .cap = &cap, .pods = pods, .n_pods = 1};
	struct placement_pod pp = {.name = "ns/new", .key = "ns/new", .demand = &u};
	warn.mode = POLICY_WARN;
	assert_int_equal(placement_decide(&pn, &pp, &warn, 0, &r), 0);
	assert_true(r.decision.allowed);
	assert_int_equal(r.decision.verdict, POLICY_WARN_ONLY);
}

/* Engine shares resolve on the node for the pod and for the consumers, with the source in the
 * message; on a shared card 0.92 of it is over a 0.9 threshold. */
static void test_engine_shares_on_shared_card(void **state)
{
	struct capacity cap = node(2, CAPACITY_SHARING_TIME_SLICING, 4);
	struct demand v = parse("{'spec':{'containers':[{'name':'vllm','command':['sh','-c',"
	                        "'vllm serve m --gpu-memory-utilization 0.45'],'resources':{"
	                        "'limits':{'nvidia.com/gpu':'1'}}}]}}");
	struct demand stock = parse(VLLM);
	struct placement_item pods[3];

	(void)state;
	pods[0] = item_of("a/v0", &v);
	pods[1] = item_of("a/v1", &v);
	pods[2] = item_of("a/v2", &v);
	struct placement_result r = decide(&cap, pods, 3, &v);
	/* 4 x 0.45 of one card = 1.8 cards of 2: 90 percent exactly (rounded up per pod) */
	assert_int_equal(r.demand_bytes, placement_item_bytes(&pods[0], &cap));
	assert_int_equal(r.used_bytes, 3 * r.demand_bytes);
	assert_true(r.demand_bytes >= H100 / 100 * 45);
	pods[0] = item_of("a/big", &stock);
	r = decide(&cap, pods, 3, &v);
	assert_false(r.decision.allowed);
	assert_non_null(strstr(r.decision.message, "counted as 35.8Gi: vllm "
	                                           "--gpu-memory-utilization 0.45 of this node's "
	                                           "79.6Gi card"));
	r = decide(&cap, NULL, 0, &stock);
	assert_false(r.decision.allowed);
	assert_string_equal(r.decision.reason, "NeverFits");
	assert_non_null(strstr(r.decision.message, "vllm's default --gpu-memory-utilization 0.92"));
}

/* Two sources disagreeing: the larger counts, and the result carries the warning. */
static void test_disagreement_warning(void **state)
{
	struct capacity cap = node(8, CAPACITY_SHARING_TIME_SLICING, 4);
	struct demand d = parse("{'spec':{'containers':[{'name':'vllm','image':'vllm/vllm-openai',"
	                        "'env':[{'name':'GPU_MEMORY_LIMIT','value':'20Gi'}],'resources':{"
	                        "'limits':{'nvidia.com/gpu':'1'}}}]}}");

	(void)state;
	cap.has_threshold = 1; /* the node's annotation: 0.92 of a card fits under 0.95 */
	cap.threshold = 0.95;
	struct placement_result r = decide(&cap, NULL, 0, &d);
	assert_true(r.decision.allowed);
	assert_true(r.demand_bytes > 70 * GI);
	assert_non_null(strstr(r.warning, "GPU_MEMORY_LIMIT 20Gi (20Gi) is below what vllm's "
	                                  "default --gpu-memory-utilization 0.92 will take"));
	assert_int_equal(r.reserve_bytes, r.demand_bytes);
	/* on a card nothing shares, the engine simply takes it, whatever is declared */
	struct capacity excl = node(1, CAPACITY_SHARING_NONE, 1);
	r = decide(&excl, NULL, 0, &d);
	assert_true(r.decision.allowed);
	assert_string_equal(r.decision.reason, "ExclusiveCards");
}

/* A pool that takes declarations only (GPUMemoryPolicy spec.undeclared: refuse): an inferred
 * pod is refused there in the policy's mode, a declared one is judged as before. */
static struct gpupolicy *policy(const char *mode, const char *undeclared)
{
	char text[512], err[GPUPOLICY_ERR_MAX];
	struct gpupolicy *p = NULL;

	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"strict-pool\",\"generation\":1},\"spec\":{"
	         "\"mode\":\"%s\",\"undeclared\":\"%s\"}}",
	         mode, undeclared);
	cJSON *j = cJSON_Parse(text);
	int rc = gpupolicy_parse(j, &p, err, sizeof(err));
	cJSON_Delete(j);
	if (rc != 0)
		fail_msg("%s", err);
	return p;
}

static void test_policy_takes_declarations_only(void **state)
{
	struct capacity cap = node(8, CAPACITY_SHARING_NONE, 1);
	struct demand v = parse(VLLM), decl = parse(DECLARED("20Gi"));
	struct placement_node pn = {.name = "n1", .cap = &cap};
	struct placement_pod pp = {.name = "ns/new", .key = "ns/new", .demand = &v};
	struct gpupolicy *enforce = policy("enforce", "refuse"), *warn = policy("warn", "refuse");
	struct gpupolicy *infer_p = policy("enforce", "infer");
	const struct gpupolicy *sel[1] = {enforce};
	struct policyset_input in = {.node = &pn,
	                             .pod = &pp,
	                             .policies = sel,
	                             .n_policies = 1,
	                             .flags = {0.9, 0.8, POLICY_ENFORCE},
	                             .infer = 1};
	struct policyset_result *r = malloc(sizeof(*r));
	char err[GPUPOLICY_ERR_MAX];

	(void)state;
	assert_non_null(r);
	assert_int_equal(policyset_decide(&in, r), 0);
	assert_false(r->allowed);
	assert_string_equal(r->reason, "UndeclaredRefused");
	assert_string_equal(r->policy, "strict-pool");
	assert_non_null(strstr(r->message,
	                       "ns/new declares no GPU_MEMORY_LIMIT (counted as 73.3Gi: "
	                       "vllm's default --gpu-memory-utilization 0.92"));
	pp.demand = &decl;
	assert_int_equal(policyset_decide(&in, r), 0);
	assert_true(r->allowed);
	pp.demand = &v;
	sel[0] = warn;
	assert_int_equal(policyset_decide(&in, r), 0);
	assert_true(r->allowed);
	assert_true(r->n_warnings >= 1);
	assert_non_null(strstr(r->warnings[0], "spec.undeclared: refuse"));
	sel[0] = infer_p;
	assert_int_equal(policyset_decide(&in, r), 0);
	assert_true(r->allowed);
	assert_int_equal(r->n_warnings, 0);
	/* a bad value is the policy's error */
	struct gpupolicy *bad = NULL;
	cJSON *j =
	    cJSON_Parse("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"undeclared\":\"maybe\"}}");
	assert_int_equal(gpupolicy_parse(j, &bad, err, sizeof(err)), GPUPOLICY_EINVAL);
	assert_null(bad);
	assert_non_null(
	    strstr(err, "spec.undeclared: must be one of infer, refuse, got \"maybe\""));
	cJSON_Delete(j);
	free(r);
	gpupolicy_free(enforce);
	gpupolicy_free(warn);
	gpupolicy_free(infer_p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_eight_undeclared_on_exclusive_node),
	    cmocka_unit_test(test_declared_beside_held_cards),
	    cmocka_unit_test(test_undeclared_on_shared_card),
	    cmocka_unit_test(test_engine_shares_on_shared_card),
	    cmocka_unit_test(test_disagreement_warning),
	    cmocka_unit_test(test_policy_takes_declarations_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
