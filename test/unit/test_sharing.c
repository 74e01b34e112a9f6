/*
 * Unit tests of the pure core on shared GPUs (issue 10): a Node and its pods as the API server
 * sends them, through capacity_from_node(), demand_from_pod() and placement_decide(), as the
 * webhook and the extender use them. One row per kind of sharing (time-slicing, MPS, slots
 * without GFD labels, many slices per container, MIG mixed), each with non-shared controls.
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
#include "placement.h"

#define MAX_PODS 4

/* Node labels (GFD), annotations, allocatable: JSON object bodies, single quotes. */
struct node_spec {
	const char *labels, *annotations, *allocatable;
};

/* A pod: its resources.limits body and GPU_MEMORY_LIMIT (NULL: none). */
struct pod_spec {
	const char *limits, *memory;
};

struct row {
	const char *what;
	struct node_spec node;
	struct pod_spec there[MAX_PODS]; /* already on the node */
	struct pod_spec pod;             /* the pod placed */
	int allowed;
	const char *reason;  /* decision reason, or "CapacityUnknown" / "InvalidDeclaration" */
	const char *message; /* a part of the message, or NULL */
};

static const struct node_spec ts_h100 = {
    "'nvidia.com/gpu.count':'2','nvidia.com/gpu.memory':'81559','nvidia.com/gpu.product':"
    "'NVIDIA-H100-80GB-HBM3-SHARED','nvidia.com/gpu.replicas':'4',"
    "'nvidia.com/gpu.sharing-strategy':'time-slicing'",
    "", "'nvidia.com/gpu':'8'"};
static const struct node_spec plain_h100 = {
    "'nvidia.com/gpu.count':'2','nvidia.com/gpu.memory':'81559','nvidia.com/gpu.product':"
    "'NVIDIA-H100-80GB-HBM3','nvidia.com/gpu.replicas':'1','nvidia.com/gpu.sharing-strategy':"
    "'none'",
    "", "'nvidia.com/gpu':'2'"};
static const struct node_spec mps_l40s = {
    "'nvidia.com/gpu.count':'1','nvidia.com/gpu.memory':'46068','nvidia.com/gpu.product':"
    "'NVIDIA-L40S-SHARED','nvidia.com/gpu.replicas':'10','nvidia.com/gpu.sharing-strategy':'mps'",
    "", "'nvidia.com/gpu':'10'"};
static const struct node_spec hami_slots = {"", "'gpu-memory-guard.io/gpu-memory':'24Gi'",
                                            "'nvidia.com/gpu':'10'"};
static const struct node_spec hami_counted = {"",
                                              "'gpu-memory-guard.io/gpu-memory':'24Gi',"
                                              "'gpu-memory-guard.io/gpu-count':'1'",
                                              "'nvidia.com/gpu':'10'"};
static const struct node_spec units_l40s = {
    "'nvidia.com/gpu.count':'1','nvidia.com/gpu.memory':'46068','nvidia.com/gpu.product':"
    "'NVIDIA-L40S-SHARED','nvidia.com/gpu.replicas':'16384','nvidia.com/gpu.sharing-strategy':"
    "'time-slicing'",
    "", "'nvidia.com/gpu':'16384'"};
/* Two A100-40GB: one whole, one cut into 7 x 1g.5gb (GFD's mixed-strategy labels). */
static const struct node_spec mixed_a100 = {
    "'nvidia.com/gpu.count':'2','nvidia.com/gpu.memory':'40960','nvidia.com/gpu.product':"
    "'NVIDIA-A100-SXM4-40GB','nvidia.com/mig.strategy':'mixed',"
    "'nvidia.com/mig-1g.5gb.count':'7','nvidia.com/mig-1g.5gb.memory':'4864'",
    "", "'nvidia.com/gpu':'1','nvidia.com/mig-1g.5gb':'7'"};
static const struct node_spec mixed_ts = {
    "'nvidia.com/gpu.count':'1','nvidia.com/gpu.memory':'40960','nvidia.com/mig.strategy':"
    "'mixed','nvidia.com/mig-1g.5gb.count':'7','nvidia.com/mig-1g.5gb.memory':'4864',"
    "'nvidia.com/mig-1g.5gb.replicas':'2','nvidia.com/mig-3g.20gb.count':'1'",
    "", "'nvidia.com/gpu':'0','nvidia.com/mig-1g.5gb':'14','nvidia.com/mig-3g.20gb':'1'"};

/* One whole A100 time-sliced (allocatable 4 slices) beside a partitioned one, and no
 * nvidia.com/gpu.replicas label: how many slices one card is cannot be read, so allocatable is
 * not a card count. */
static const struct node_spec mixed_ts_no_replicas = {
    "'nvidia.com/gpu.count':'2','nvidia.com/gpu.memory':'40960','nvidia.com/gpu.product':"
    "'NVIDIA-A100-SXM4-40GB-SHARED','nvidia.com/gpu.sharing-strategy':'time-slicing',"
    "'nvidia.com/mig.strategy':'mixed','nvidia.com/mig-1g.5gb.count':'7',"
    "'nvidia.com/mig-1g.5gb.memory':'4864'",
    "", "'nvidia.com/gpu':'4','nvidia.com/mig-1g.5gb':'7'"};

/* MIG single without nvidia.com/gpu.memory: units are slices, and the product table's size is
 * a whole card's (GFD's own single-strategy product carries -MIG-<profile>, unknown). */
static const struct node_spec single_by_product = {
    "'nvidia.com/gpu.count':'7','nvidia.com/gpu.product':'NVIDIA-A100-SXM4-40GB',"
    "'nvidia.com/mig.strategy':'single'",
    "", "'nvidia.com/gpu':'7'"};

#define GPU(n)  "'nvidia.com/gpu':'" n "'"
#define MIG5(n) "'nvidia.com/mig-1g.5gb':'" n "'"

static const struct row rows[] = {
    /* 1. time-slicing: a pod's slices may all be on one card */
    {"time-sliced: 2 slices of 140Gi on 2 H100 x 4 replicas",
     ts_h100,
     {{0}},
     {GPU("2"), "140Gi"},
     0,
     "NeverFits",
     "container \"c0\" declares 140Gi per GPU, above the 90 percent limit of one GPU's 79.6Gi "
     "(71.7Gi); time-sliced: both slices may land on one card"},
    {"time-sliced: 8 slices span at least 2 cards, 70Gi each",
     ts_h100,
     {{0}},
     {GPU("8"), "140Gi"},
     1,
     "Fits",
     NULL},
    {"time-sliced: one slice of 72Gi sees the whole card",
     ts_h100,
     {{0}},
     {GPU("1"), "72Gi"},
     0,
     "NeverFits",
     "time-sliced: one slice may use the whole card"},
    {"control: the same pod on the same cards without sharing",
     plain_h100,
     {{0}},
     {GPU("2"), "140Gi"},
     1,
     "Fits",
     NULL},
    /* 2. MPS: each client pinned to card / replicas */
    {"MPS: 8Gi above one client's 4.5Gi",
     mps_l40s,
     {{0}},
     {GPU("1"), "8Gi"},
     0,
     "NeverFits",
     "container \"c0\" declares 8Gi per MPS client, above the 90 percent limit of one MPS "
     "client's 4.5Gi (4Gi); MPS: each client is pinned to the card's memory / 10 replicas"},
    {"MPS: 4Gi fits in one client's pinned memory",
     mps_l40s,
     {{0}},
     {GPU("1"), "4Gi"},
     1,
     "Fits",
     NULL},
    /* 3. slots without GFD labels: no card count from allocatable alone */
    {"slots without GFD labels: the count is unknown",
     hami_slots,
     {{GPU("1"), "10Gi"}, {GPU("1"), "10Gi"}},
     {GPU("1"), "10Gi"},
     0,
     "CapacityUnknown",
     "GPU count unknown: set annotation gpu-memory-guard.io/gpu-count (physical GPUs) or GPU "
     "Feature Discovery's labels nvidia.com/gpu.count and nvidia.com/gpu.replicas"},
    {"control: the same node with its card count set",
     hami_counted,
     {{GPU("1"), "10Gi"}, {GPU("1"), "10Gi"}},
     {GPU("1"), "10Gi"},
     0,
     "OverThreshold",
     "would declare 30Gi of 24Gi GPU memory"},
    /* 4. thousands of slices per container */
    {"4096 slices of 16384 are a valid count",
     units_l40s,
     {{GPU("2048"), "11Gi"}},
     {GPU("4096"), "11Gi"},
     1,
     "Fits",
     NULL},
    {"a running pod of 2048 slices counts its declaration, not a whole card",
     units_l40s,
     {{GPU("2048"), "11Gi"}, {GPU("2048"), "11Gi"}, {GPU("2048"), "11Gi"}},
     {GPU("4096"), "7Gi"},
     1,
     "Fits",
     NULL},
    {"3k slices, as the API server writes 3000",
     units_l40s,
     {{0}},
     {GPU("3k"), "11Gi"},
     1,
     "Fits",
     NULL},
    {"an undeclared pod of 2048 slices counts the one card, once",
     units_l40s,
     {{GPU("2048"), NULL}},
     {GPU("1"), "1Gi"},
     0,
     "OverThreshold",
     "already there: ns/p0 45Gi"},
    /* 5. MIG mixed: whole GPUs from the unpartitioned cards, profiles by their slices */
    {"MIG mixed: whole GPUs are the unpartitioned card only",
     mixed_a100,
     {{GPU("1"), "30Gi"}},
     {GPU("1"), "30Gi"},
     0,
     "OverThreshold",
     "would declare 60Gi of 40Gi GPU memory (150 percent), above the 90 percent limit (36Gi); "
     "already there: ns/p0 30Gi; MIG mixed: whole-GPU pods share the 1 GPU(s) not partitioned "
     "into MIG slices"},
    {"MIG mixed: 8Gi on a 1g.5gb slice never fits",
     mixed_a100,
     {{0}},
     {MIG5("1"), "8Gi"},
     0,
     "NeverFits",
     "container \"c0\" declares 8Gi per MIG slice, above the 90 percent limit of one MIG slice's "
     "4.8Gi (4.3Gi); MIG 1g.5gb: one slice has its own memory"},
    {"MIG mixed: the slices' pool is apart from the whole card's",
     mixed_a100,
     {{GPU("1"), "30Gi"}, {MIG5("1"), "4Gi"}},
     {MIG5("1"), "4Gi"},
     1,
     "Fits",
     NULL},
    {"MIG mixed, time-sliced slices: both may land on one slice",
     mixed_ts,
     {{0}},
     {MIG5("2"), "8Gi"},
     0,
     "NeverFits",
     "time-sliced: both slices may land on one slice"},
    {"MIG mixed: a profile sized by its name (20 GB)",
     mixed_ts,
     {{0}},
     {"'nvidia.com/mig-3g.20gb':'1'", "17Gi"},
     0,
     "NeverFits",
     "declares 17Gi per MIG slice, above the 90 percent limit of one MIG slice's 18.6Gi"},
    {"MIG mixed: no unpartitioned card for a whole-GPU pod",
     mixed_ts,
     {{0}},
     {GPU("1"), "1Gi"},
     0,
     "NeverFits",
     "every GPU there is partitioned into MIG slices"},
    {"MIG mixed, time-sliced without the replicas label: 4 slots are not 4 cards",
     mixed_ts_no_replicas,
     {{GPU("1"), "30Gi"}},
     {GPU("1"), "30Gi"},
     0,
     "CapacityUnknown",
     "GPU count unknown"},
    {"MIG single by the product table: a slice is not a whole card",
     single_by_product,
     {{0}},
     {GPU("1"), "30Gi"},
     0,
     "CapacityUnknown",
     "MIG slice"},
    {"MIG mixed: a profile the node lacks",
     mixed_a100,
     {{0}},
     {"'nvidia.com/mig-2g.10gb':'1'", "1Gi"},
     0,
     "NeverFits",
     "the node offers no MIG 2g.10gb slices"},
};

static cJSON *parse(const char *text)
{
	char buf[4096];
	cJSON *j;

	snprintf(buf, sizeof(buf), "%s", text);
	for (char *p = buf; *p; p++)
		if (*p == '\'')
			*p = '"';
	j = cJSON_Parse(buf);
	if (j == NULL)
		fail_msg("bad test JSON: %s", buf);
	return j;
}

static cJSON *node_json(const struct node_spec *n)
{
	char text[4096];

	snprintf(text, sizeof(text),
	         "{'kind':'Node','metadata':{'name':'n1','labels':{%s},'annotations':{%s}},"
	         "'status':{'allocatable':{%s}}}",
	         n->labels, n->annotations, n->allocatable);
	return parse(text);
}

static cJSON *pod_json(const struct pod_spec *p, int i)
{
	char text[2048], env[256] = "";

	if (p->memory)
		snprintf(env, sizeof(env), ",'env':[{'name':'GPU_MEMORY_LIMIT','value':'%s'}]",
		         p->memory);
	snprintf(text, sizeof(text),
	         "{'metadata':{'namespace':'ns','name':'p%d','uid':'u%d'},'spec':{'containers':"
	         "[{'name':'c0','resources':{'limits':{%s}}%s}]}}",
	         i, i, p->limits, env);
	return parse(text);
}

/* Decide row r as the webhook would; fills reason and message. Returns allowed. */
static int decide(const struct row *r, const char **reason, char *msg, size_t cap)
{
	static char keys[MAX_PODS][16];
	struct placement_item items[MAX_PODS];
	struct capacity c;
	struct demand d;
	size_t n = 0;
	cJSON *j = node_json(&r->node);
	int rc = capacity_from_node(j, NULL, &c, msg, cap);

	cJSON_Delete(j);
	if (rc != 0) {
		*reason = "CapacityUnknown";
		return 0;
	}
	memset(items, 0, sizeof(items));
	for (int i = 0; i < MAX_PODS && r->there[i].limits; i++) {
		cJSON *pj = pod_json(&r->there[i], i);

		assert_int_equal(demand_from_pod(pj, NULL, &d), 0);
		cJSON_Delete(pj);
		snprintf(keys[n], sizeof(keys[n]), "ns/p%d", i);
		items[n].key = keys[n];
		items[n].pool = d.pool;
		if (d.status == DEMAND_OK)
			items[n].bytes = d.bytes;
		else
			items[n].undeclared_gpus = d.gpus ? d.gpus : 1;
		n++;
	}
	j = pod_json(&r->pod, 9);
	assert_int_equal(demand_from_pod(j, NULL, &d), 0);
	cJSON_Delete(j);
	if (d.status != DEMAND_OK) {
		*reason = d.status == DEMAND_NOT_GPU ? "NotGPU" : "InvalidDeclaration";
		snprintf(msg, cap, "%s", d.error);
		return d.status == DEMAND_NOT_GPU;
	}
	struct placement_node pn = {.name = "n1", .cap = &c, .pods = items, .n_pods = n};
	struct placement_pod pp = {.name = "ns/p9", .key = "ns/p9", .uid = "u9", .demand = &d};
	struct placement_policy pol = {.threshold = 0.9, .mode = POLICY_ENFORCE};
	struct placement_result res;

	rc = placement_decide(&pn, &pp, &pol, 0, &res);
	*reason = rc == 0 ? res.decision.reason : "InvalidInput";
	snprintf(msg, cap, "%s", res.decision.message);
	return res.decision.allowed;
}

static void test_rows(void **state)
{
	int failed = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		const char *reason = "";
		char msg[POLICY_MSG_MAX] = "";
		int allowed = decide(r, &reason, msg, sizeof(msg));
		int ok = allowed == r->allowed && strcmp(reason, r->reason) == 0 &&
		         (r->message == NULL || strstr(msg, r->message) != NULL);

		if (!ok) {
			print_error(
			    "case %zu (%s): allowed %d reason %s message \"%s\"; want allowed "
			    "%d reason %s message with \"%s\"\n",
			    i, r->what, allowed, reason, msg, r->allowed, r->reason,
			    r->message ? r->message : "");
			failed++;
		}
	}
	assert_int_equal(failed, 0);
}

/* The capacity model's three answers for each kind of node. */
static void test_model(void **state)
{
	const uint64_t mib = 1024ull * 1024;
	struct capacity c;
	char err[CAPACITY_MSG_MAX];
	cJSON *j;

	(void)state;
	j = node_json(&ts_h100);
	assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
	cJSON_Delete(j);
	assert_int_equal(c.sharing, CAPACITY_SHARING_TIME_SLICING);
	assert_int_equal(c.gpu_count, 2);
	assert_int_equal(c.replicas, 4);
	assert_int_equal(c.piece_bytes, 81559 * mib);

	j = node_json(&mps_l40s);
	assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
	cJSON_Delete(j);
	assert_int_equal(c.sharing, CAPACITY_SHARING_MPS);
	assert_int_equal(c.gpu_count, 1);
	assert_int_equal(c.per_gpu_bytes, 46068 * mib);
	assert_int_equal(c.piece_bytes, 46068 * mib / 10); /* 4606 MiB and a bit */

	j = node_json(&plain_h100);
	assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
	cJSON_Delete(j);
	assert_int_equal(c.sharing, CAPACITY_SHARING_NONE);
	assert_int_equal(c.piece_bytes, 81559 * mib);

	j = node_json(&mixed_a100);
	assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
	cJSON_Delete(j);
	assert_int_equal(c.mig, CAPACITY_MIG_MIXED);
	assert_int_equal(c.gpu_count, 1); /* not gpu.count 2: one card is partitioned */
	assert_int_equal(c.n_profiles, 1);
	assert_string_equal(c.profiles[0].name, "1g.5gb");
	assert_int_equal(c.profiles[0].count, 7);
	assert_int_equal(c.profiles[0].bytes, 4864 * mib);
	assert_int_equal(capacity_pool_bytes(&c, CAPACITY_POOL_WHOLE), 40960 * mib);
	assert_int_equal(capacity_pool_bytes(&c, capacity_pool_id("1g.5gb")), 7 * 4864 * mib);
	assert_int_equal(capacity_pool_bytes(&c, capacity_pool_id("2g.10gb")), 0);
	assert_int_equal(c.total_bytes, (40960 + 7 * 4864) * mib);

	/* GFD before the strategy label: replicas > 1 is time-slicing. */
	{
		struct node_spec old = {
		    "'nvidia.com/gpu.count':'1','nvidia.com/gpu.memory':'23034',"
		    "'nvidia.com/gpu.replicas':'4'",
		    "", "'nvidia.com/gpu':'4'"};
		j = node_json(&old);
		assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
		cJSON_Delete(j);
		assert_int_equal(c.sharing, CAPACITY_SHARING_TIME_SLICING);
	}
	/* Time-slicing without the replicas label: slices per card unknown, so all of a container's
	 * may be on one card, and allocatable says nothing about cards. */
	{
		struct node_spec shared = {
		    "'nvidia.com/gpu.count':'2','nvidia.com/gpu.memory':'81559',"
		    "'nvidia.com/gpu.product':'NVIDIA-H100-80GB-HBM3-SHARED'",
		    "", "'nvidia.com/gpu':'8'"};
		struct capacity_piece pc;

		j = node_json(&shared);
		assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
		cJSON_Delete(j);
		assert_int_equal(c.sharing, CAPACITY_SHARING_TIME_SLICING);
		assert_true(c.replicas_unknown);
		capacity_piece(&c, NULL, 8, 160 * 1024 * mib, &pc);
		assert_int_equal(pc.share_bytes, 160 * 1024 * mib);
		assert_string_equal(pc.rule, "time-sliced: all its slices may land on one card");
		shared.labels = "'nvidia.com/gpu.memory':'81559','nvidia.com/gpu.sharing-strategy':"
		                "'time-slicing'";
		j = node_json(&shared);
		assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)),
		                 CAPACITY_EUNKNOWN);
		cJSON_Delete(j);
		/* MPS without replicas: the pinned piece is unknown. */
		shared.labels = "'nvidia.com/gpu.count':'1','nvidia.com/gpu.memory':'46068',"
		                "'nvidia.com/gpu.sharing-strategy':'mps'";
		j = node_json(&shared);
		assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)),
		                 CAPACITY_EINVALID);
		cJSON_Delete(j);
		assert_non_null(strstr(err, "nvidia.com/gpu.replicas is missing"));
	}
	/* An unknown strategy is an error naming the label. */
	{
		struct node_spec bad = {
		    "'nvidia.com/gpu.count':'1','nvidia.com/gpu.memory':'23034',"
		    "'nvidia.com/gpu.sharing-strategy':'vgpu'",
		    "", ""};
		j = node_json(&bad);
		assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)),
		                 CAPACITY_EINVALID);
		cJSON_Delete(j);
		assert_non_null(strstr(err, "nvidia.com/gpu.sharing-strategy \"vgpu\""));
	}
}

/* Undeclared pods count the units they hold whole, never more cards than the node has. */
/* Past DEMAND_MAX_USES GPU containers the rest are judged as one use: when they ask different
 * MIG profiles, that use must be judged on the smallest of their pieces, never on a whole card.
 * Here the fifth container puts 9Gi on a 2g.10gb slice (9.5Gi, 90 percent: 8.6Gi): never fits,
 * alone or with four small ones before it. */
static void test_folded_profiles(void **state)
{
	static const struct node_spec mixed2 = {
	    "'nvidia.com/gpu.count':'3','nvidia.com/gpu.memory':'40960','nvidia.com/mig.strategy':"
	    "'mixed','nvidia.com/mig-1g.5gb.count':'7','nvidia.com/mig-1g.5gb.memory':'4864',"
	    "'nvidia.com/mig-2g.10gb.count':'3','nvidia.com/mig-2g.10gb.memory':'9728'",
	    "", "'nvidia.com/gpu':'1'"};
	char text[4096];
	size_t n = 0;
	struct capacity c;
	struct demand d;
	char err[CAPACITY_MSG_MAX];
	cJSON *j = node_json(&mixed2);

	(void)state;
	assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
	cJSON_Delete(j);
	n += (size_t)snprintf(text + n, sizeof(text) - n,
	                      "{'metadata':{'namespace':'ns','name':'p9','uid':'u9'},'spec':{"
	                      "'containers':[");
	for (int i = 0; i < 5; i++)
		n += (size_t)snprintf(
		    text + n, sizeof(text) - n,
		    "%s{'name':'c%d','resources':{'limits':{'nvidia.com/mig-%s':'1'}},"
		    "'env':[{'name':'GPU_MEMORY_LIMIT','value':'%s'}]}",
		    i ? "," : "", i, i < 4 ? "1g.5gb" : "2g.10gb", i < 4 ? "1Gi" : "9Gi");
	snprintf(text + n, sizeof(text) - n, "]}}");
	j = parse(text);
	assert_int_equal(demand_from_pod(j, NULL, &d), 0);
	cJSON_Delete(j);
	assert_int_equal(d.status, DEMAND_OK);

	struct placement_node pn = {.name = "n1", .cap = &c};
	struct placement_pod pp = {.name = "ns/p9", .key = "ns/p9", .uid = "u9", .demand = &d};
	struct placement_policy pol = {.threshold = 0.9, .mode = POLICY_ENFORCE};
	struct placement_result res;

	assert_int_equal(placement_decide(&pn, &pp, &pol, 0, &res), 0);
	assert_false(res.decision.allowed);
	assert_string_equal(res.decision.reason, "NeverFits");
}

static void test_undeclared_bytes(void **state)
{
	const uint64_t mib = 1024ull * 1024;
	struct capacity c;
	char err[CAPACITY_MSG_MAX];
	cJSON *j = node_json(&ts_h100);

	(void)state;
	assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
	cJSON_Delete(j);
	assert_int_equal(capacity_undeclared_bytes(&c, CAPACITY_POOL_WHOLE, 1), 81559 * mib);
	assert_int_equal(capacity_undeclared_bytes(&c, CAPACITY_POOL_WHOLE, 8), 2 * 81559 * mib);
	j = node_json(&mps_l40s);
	assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
	cJSON_Delete(j);
	assert_int_equal(capacity_undeclared_bytes(&c, CAPACITY_POOL_WHOLE, 2),
	                 2 * (46068 * mib / 10));
	j = node_json(&plain_h100);
	assert_int_equal(capacity_from_node(j, NULL, &c, err, sizeof(err)), 0);
	cJSON_Delete(j);
	assert_int_equal(capacity_undeclared_bytes(&c, CAPACITY_POOL_WHOLE, 2), 2 * 81559 * mib);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rows),
	    cmocka_unit_test(test_model),
	    cmocka_unit_test(test_undeclared_bytes),
	    cmocka_unit_test(test_folded_profiles),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
