/*
 * Unit tests for lib/core/dra (slices, claims and a pod's claims decoded, as the v1.37 API server
 * serves them: test/data/dra/, written by hand from k8s.io/api resource/v1 types.go),
 * lib/cluster/drastore (the node's view joined from slices and claims), capacity_add_dra and
 * the placement core's DRA counting rules, as tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "cache.h"
#include "capacity.h"
#include "demand.h"
#include "dra.h"
#include "drastore.h"
#include "fixture.h"
#include "ledger.h"
#include "log.h"
#include "metrics.h"
#include "placement.h"
#include "watch.h"
#include "webhook.h"

#include "dra_fixture.h"

static void slice_nvidia(void **state)
{
	(void)state;
	cJSON *j = fixture_json("dra/slice-gpu-dra-0.json");
	struct dra_slice *s = malloc(sizeof(*s));
	char err[256];

	assert_non_null(s);
	assert_int_equal(dra_slice_decode(j, NULL, s, err, sizeof(err)), 0);
	assert_true(s->ours);
	assert_string_equal(s->node, "gpu-dra-0");
	assert_string_equal(s->pool, "gpu-dra-0");
	assert_int_equal(s->n_devices, 2);
	assert_string_equal(s->devices[0].name, "gpu-0");
	assert_int_equal(s->devices[0].memory, H100);
	assert_int_equal(s->devices[0].type, DRA_TYPE_GPU);
	assert_int_equal(s->devices[0].multi, 1);
	assert_int_equal(s->devices[1].multi, 0);

	/* another driver's slice: kept as a name, no devices */
	struct dra_drivers other = {0};
	assert_int_equal(dra_drivers_add(&other, "gpu.example.com", err, sizeof(err)), 0);
	assert_int_equal(dra_slice_decode(j, &other, s, err, sizeof(err)), 0);
	assert_false(s->ours);
	assert_int_equal(s->n_devices, 0);
	cJSON_Delete(j);
	free(s);
}

static void slice_mig(void **state)
{
	(void)state;
	cJSON *j = fixture_json("dra/slice-mig.json");
	struct dra_slice *s = malloc(sizeof(*s));
	char err[256];

	assert_non_null(s);
	assert_int_equal(dra_slice_decode(j, NULL, s, err, sizeof(err)), 0);
	assert_int_equal(s->n_devices, 3);
	assert_int_equal(s->devices[0].type, DRA_TYPE_MIG);
	assert_int_equal(s->devices[0].memory, 9984 * MIB);
	assert_int_equal(s->devices[1].type, DRA_TYPE_GPU); /* "gpu.nvidia.com/type" */
	assert_int_equal(s->devices[2].counters, 1);        /* a partition: not capacity */
	cJSON_Delete(j);
	free(s);
}

static void slice_errors(void **state)
{
	(void)state;
	static const struct {
		const char *json, *err;
	} cases[] = {
	    {"[]", "no metadata.name"},
	    {"{'metadata':{'name':'s'},'spec':{}}", "spec.driver missing"},
	    {"{'metadata':{'name':'s'},'spec':{'driver':'gpu.nvidia.com','devices':{}}}",
	     "not a list"},
	    {"{'metadata':{'name':'s'},'spec':{'driver':'gpu.nvidia.com','devices':[{}]}}",
	     "without a name"},
	    {"{'metadata':{'name':'s'},'spec':{'driver':'gpu.nvidia.com','devices':[{'name':'g',"
	     "'capacity':{'memory':{'value':'80GB'}}}]}}",
	     "device g: capacity.memory.value is not a quantity"},
	    {"{'metadata':{'name':'s'},'spec':{'driver':'gpu.nvidia.com','devices':[{'name':'g',"
	     "'capacity':{'memory':{'value':80}}}]}}",
	     "not a string"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		dra_fixture_refused(0, cases[i].json, cases[i].err, i);
}

static void claim_consumable(void **state)
{
	(void)state;
	cJSON *j = fixture_json("dra/claim-consumable.json");
	struct dra_claim *c = malloc(sizeof(*c));
	char err[256];

	assert_non_null(c);
	assert_int_equal(dra_claim_decode(j, NULL, c, err, sizeof(err)), 0);
	assert_string_equal(c->ns, "dra");
	assert_string_equal(c->name, "share-19gi-3");
	assert_true(c->allocated);
	assert_int_equal(c->n_results, 1);
	assert_string_equal(c->results[0].pool, "gpu-dra-0");
	assert_string_equal(c->results[0].device, "gpu-0");
	assert_string_equal(c->results[0].share_id, "5f0e1d2c-3b4a-4958-8776-655443322110");
	assert_true(c->results[0].has_consumed);
	assert_int_equal(c->results[0].consumed, 19 * GI);
	assert_int_equal(dra_result_bytes(&c->results[0], H100), 19 * GI);
	assert_int_equal(c->n_requests, 1);
	assert_int_equal(c->requests[0].share, 19 * GI);
	assert_int_equal(c->n_reserved, 1);
	assert_false(c->extended);
	cJSON_Delete(j);
	free(c);
}

static void claim_shared_and_extended(void **state)
{
	(void)state;
	cJSON *j = fixture_json("dra/claim-shared3.json");
	struct dra_claim *c = malloc(sizeof(*c));
	char err[256];

	assert_non_null(c);
	assert_int_equal(dra_claim_decode(j, NULL, c, err, sizeof(err)), 0);
	assert_int_equal(c->n_reserved, 3);
	assert_string_equal(c->reserved[2], "b0000000-0000-4000-8000-00000000000c");
	assert_false(c->results[0].has_consumed);
	assert_int_equal(dra_result_bytes(&c->results[0], H100), H100); /* a whole device */
	cJSON_Delete(j);

	j = fixture_json("dra/claim-extended.json");
	assert_int_equal(dra_claim_decode(j, NULL, c, err, sizeof(err)), 0);
	assert_true(c->extended);
	assert_string_equal(c->owner, "e0000000-0000-4000-8000-000000000001");
	cJSON_Delete(j);

	j = fixture_json("dra/claim-pending.json");
	assert_int_equal(dra_claim_decode(j, NULL, c, err, sizeof(err)), 0);
	assert_false(c->allocated);
	assert_int_equal(c->n_requests, 2);
	assert_int_equal(c->requests[0].count, 2);
	assert_int_equal(c->requests[1].count, 1);
	assert_int_equal(c->requests[1].share, 0); /* of its subrequests a whole device is most */
	cJSON_Delete(j);
	free(c);
}

static void claim_errors(void **state)
{
	(void)state;
	static const struct {
		const char *json, *err;
	} cases[] = {
	    {"{'metadata':{}}", "no metadata.name"},
	    {"{'metadata':{'name':'c'},'spec':{'devices':{'requests':[{'name':'r','exactly':"
	     "{'count':0}}]}}}",
	     "count is not a positive integer"},
	    {"{'metadata':{'name':'c'},'spec':{'devices':{'requests':[{'name':'r','exactly':"
	     "{'count':1.5}}]}}}",
	     "count is not a positive integer"},
	    {"{'metadata':{'name':'c'},'spec':{'devices':{'requests':[{'name':'r','exactly':"
	     "{'capacity':{'requests':{'memory':'lots'}}}}]}}}",
	     "capacity.requests.memory is not a quantity"},
	    {"{'metadata':{'name':'c'},'status':{'allocation':{'devices':{'results':[{'driver':"
	     "'gpu.nvidia.com','device':'gpu-0','consumedCapacity':{'memory':'-1Gi'}}]}}}}",
	     "consumedCapacity.memory is not a quantity"},
	    {"{'metadata':{'name':'c'},'status':{'allocation':{'devices':{'results':[{}]}}}}",
	     "without a driver"},
	    {"{'metadata':{'name':'c'},'status':{'reservedFor':[{'resource':'pods','name':'p'}]}}",
	     "without a uid"},
	    {"{'metadata':{'name':'c'},'status':{'reservedFor':{}}}", "reservedFor is not a list"},
	};
	struct dra_claim *c = malloc(sizeof(*c));

	assert_non_null(c);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		dra_fixture_refused(1, cases[i].json, cases[i].err, i);
	/* a NIC's result is not GPU memory: skipped, not an error */
	cJSON *j = fixture_quoted_json(
	    "{'metadata':{'name':'c'},'status':{'allocation':{'devices':{'results':[{'driver':"
	    "'nic.example.com','pool':'p','device':'eth1','request':'r'}]}}}}");
	char err[256];
	assert_int_equal(dra_claim_decode(j, NULL, c, err, sizeof(err)), 0);
	assert_int_equal(c->n_results, 0);
	cJSON_Delete(j);
	free(c);
}

static void pod_refs(void **state)
{
	(void)state;
	struct dra_pod_refs r;
	char err[256];
	cJSON *j = fixture_json("dra/pod-claims.json");

	assert_int_equal(dra_pod_refs(j, &r, err, sizeof(err)), 0);
	assert_true(r.any);
	assert_int_equal(r.n, 2); /* the direct claim and the generated one */
	assert_string_equal(r.names[0], "dra-pod-gpu-x7k2p");
	assert_string_equal(r.names[1], "two-gpus");
	assert_int_equal(r.n_templates, 1); /* "later": not generated yet */
	cJSON_Delete(j);

	j = fixture_json("dra/pod-extended.json");
	assert_int_equal(dra_pod_refs(j, &r, err, sizeof(err)), 0);
	assert_true(r.any);
	assert_string_equal(r.extended, "ext-gpu-pod-extended-resources-8k2vd");
	cJSON_Delete(j);

	j = fixture_quoted_json("{'spec':{'containers':[]}}");
	assert_int_equal(dra_pod_refs(j, &r, err, sizeof(err)), 0);
	assert_false(r.any);
	cJSON_Delete(j);
}

static void drivers(void **state)
{
	(void)state;
	struct dra_drivers d = {0};
	char err[256];

	assert_true(dra_driver_ours(&d, "gpu.nvidia.com"));
	assert_int_equal(dra_drivers_add(&d, "gpu.example.com,gpu.nvidia.com", err, sizeof(err)),
	                 0);
	assert_int_equal(dra_drivers_add(&d, "gpu.example.com", err, sizeof(err)), 0);
	assert_int_equal(d.n, 2);
	assert_true(dra_driver_ours(&d, "gpu.example.com"));
	assert_false(dra_driver_ours(&d, "nic.example.com"));
	assert_int_equal(dra_drivers_add(&d, "Bad_Name", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "Bad_Name"));
	assert_int_equal(dra_drivers_add(&d, "a,,b", err, sizeof(err)), -1);
}

static void request_max(void **state)
{
	(void)state;
	struct dra_gpus g = {.n = 2, .bytes = 2 * H100, .max_bytes = H100};
	static const struct {
		struct dra_request r;
		uint64_t want;
	} rows[] = {
	    {{.count = 1}, H100},
	    {{.count = 4}, 2 * H100},           /* at most the node's devices */
	    {{.all = 1, .count = 1}, 2 * H100}, /* allocationMode All */
	    {{.count = 1, .share = 19 * GI}, 19 * GI},
	    {{.count = 2, .share = 200 * GI}, 2 * H100}, /* a share above a device: the device */
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		assert_int_equal(dra_request_max_bytes(&rows[i].r, 1, &g), rows[i].want);
	struct dra_gpus none = {0};
	assert_int_equal(dra_request_max_bytes(&rows[0].r, 1, &none), 0);
}

/* capacity_add_dra: the node's labels and annotations against its slices. */
static void capacity_merge(void **state)
{
	(void)state;
	struct demand_config dcfg = {0};
	struct dra_gpus g = {.n = 2, .bytes = 2 * H100, .max_bytes = H100};
	static const struct {
		const char *node;
		int rc;
		uint64_t total, count;
	} rows[] = {
	    /* KEP-5004 node: no label, no allocatable: the slices alone */
	    {"{'metadata':{'name':'n'}}", 0, 2 * H100, 2},
	    /* GFD labels describing the same DRA cards, no device plugin: not added twice */
	    {"{'metadata':{'name':'n','labels':{'nvidia.com/gpu.memory':'81559',"
	     "'nvidia.com/gpu.count':'2'}}}",
	     0, 2 * H100, 2},
	    /* mixed: 4 device-plugin cards of 40Gi + 2 DRA cards */
	    {"{'metadata':{'name':'n','labels':{'nvidia.com/gpu.memory':'40960',"
	     "'nvidia.com/gpu.count':'4'}},'status':{'allocatable':{'nvidia.com/gpu':'4'}}}",
	     0, 4 * 40 * GI + 2 * H100, 6},
	    /* the memory annotation wins over the driver's figure */
	    {"{'metadata':{'name':'n','annotations':{'gpu-memory-guard.io/gpu-memory':'80Gi'}}}", 0,
	     2 * 80 * GI, 2},
	    /* the count annotation: the operator's figure, slices unread */
	    {"{'metadata':{'name':'n','annotations':{'gpu-memory-guard.io/gpu-memory':'80Gi',"
	     "'gpu-memory-guard.io/gpu-count':'1'}}}",
	     0, 80 * GI, 1},
	    /* a malformed source stays an error */
	    {"{'metadata':{'name':'n','labels':{'nvidia.com/gpu.memory':'lots'}}}",
	     CAPACITY_EINVALID, 0, 0},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		cJSON *j = fixture_quoted_json(rows[i].node);
		struct capacity cap;
		char err[512];
		int rc = capacity_from_node(j, &dcfg, &cap, err, sizeof(err));

		rc = capacity_add_dra(&cap, rc, &g, "n", err, sizeof(err));
		if (rc != rows[i].rc)
			fail_msg("row %zu: rc %d (%s)", i, rc, err);
		if (rc == 0) {
			assert_int_equal(cap.total_bytes, rows[i].total);
			assert_int_equal(cap.gpu_count, rows[i].count);
		}
		cJSON_Delete(j);
	}
	/* DRA GPUs without memory: still unknown, and the message says what to set */
	struct dra_gpus nomem = {.n = 1, .no_memory = 1};
	cJSON *j = fixture_quoted_json("{'metadata':{'name':'n'}}");
	struct capacity cap;
	char err[512];
	int rc = capacity_from_node(j, &dcfg, &cap, err, sizeof(err));
	assert_int_equal(capacity_add_dra(&cap, rc, &nomem, "n", err, sizeof(err)),
	                 CAPACITY_EUNKNOWN);
	assert_non_null(strstr(err, "publish no capacity"));
	cJSON_Delete(j);
}

/* The store: slices and claims joined into a node's view (dra_fixture_store). */
static void store_view(void **state)
{
	(void)state;
	static const char *const files[] = {"dra/slice-gpu-dra-0.json", "dra/slice-mig.json",
	                                    "dra/claim-consumable.json", "dra/claim-shared3.json",
	                                    "dra/claim-pending.json"};
	struct dra_store *s = dra_fixture_store(files, 5);
	struct dra_view *v;
	struct dra_store_stats st;

	assert_int_equal(dra_store_view(s, "gpu-dra-0", NULL, NULL, NULL, &v), 0);
	assert_int_equal(v->node.gpus.n, 2);
	assert_int_equal(v->node.gpus.bytes, 2 * H100);
	assert_int_equal(v->node.n_claims, 2);
	assert_false(v->pod.any);
	dra_view_free(v);

	/* MIG node: the slice and the card, not the partition */
	assert_int_equal(dra_store_view(s, "gpu-mig-0", NULL, NULL, NULL, &v), 0);
	assert_int_equal(v->node.gpus.n, 2);
	assert_int_equal(v->node.gpus.n_mig, 1);
	assert_int_equal(v->node.gpus.bytes, 9984 * MIB + H100);
	assert_int_equal(v->node.n_claims, 0);
	dra_view_free(v);

	/* the pod naming the unallocated claim: 2 whole + 1 whole, at most every card */
	struct dra_pod_refs refs = {.any = 1, .n = 1};
	strcpy(refs.names[0], "two-gpus");
	assert_int_equal(dra_store_view(s, "gpu-dra-0", "dra", "u-1", &refs, &v), 0);
	assert_true(v->pod.any);
	assert_int_equal(v->pod.n_pending, 1);
	assert_int_equal(v->pod.pending_whole_n, 2);
	assert_int_equal(v->pod.pending_whole_bytes, 2 * H100);
	assert_int_equal(v->pod.pending_bytes, 0);
	dra_view_free(v);

	/* deleted and resynced away */
	dra_store_resync_begin(s, DRA_STORE_CLAIMS);
	assert_int_equal(dra_store_resync_end(s, DRA_STORE_CLAIMS), 3);
	dra_store_stats(s, &st);
	assert_int_equal(st.claims, 0);
	assert_int_equal(st.slices, 2);
	assert_int_equal(st.devices, 4);
	dra_store_absent(s, DRA_STORE_SLICES);
	dra_store_stats(s, &st);
	assert_int_equal(st.slices, 0);
	assert_true(st.slices_absent);
	dra_store_free(s);
	dra_store_free(NULL);
}

/* A claim the store holds for the pod by its uid (the scheduler's KEP-5004 claim, owned by and
 * reserved for it, before the pod's status names it) does not stand for a claim the pod names
 * that the store has not seen: that one is still unknown, so the most is every DRA GPU of the
 * node. */
static void store_view_unknown_beside_owned(void **state)
{
	(void)state;
	static const char *const files[] = {"dra/slice-gpu-dra-0.json", "dra/claim-extended.json"};
	struct dra_store *s = dra_fixture_store(files, 2);
	struct dra_view *v;
	struct dra_pod_refs refs = {.any = 1, .n = 1};

	strcpy(refs.names[0], "direct-gpu"); /* resourceClaimName, not in the store yet */
	assert_int_equal(dra_store_view(s, "gpu-dra-0", "dra",
	                                "e0000000-0000-4000-8000-000000000001", &refs, &v),
	                 0);
	assert_int_equal(v->pod.n_here, 1); /* the extended claim, found by owner */
	assert_int_equal(v->pod.n_unknown, 1);
	assert_int_equal(v->pod.pending_whole_n, 2);
	assert_int_equal(v->pod.pending_whole_bytes, 2 * H100);
	dra_view_free(v);
	dra_store_free(s);
}

/* A template's claim the store holds, found by its owner (the pod) before the pod's status
 * names it (the claims' watch ahead of the pods'): read, counted as allocated here, not also as
 * a template claim not generated yet (every DRA GPU of the node: on this node of 2 H100s, 3
 * GPUs for a pod of one, refused NoFreeCard). A claim the pod does not own still does not stand
 * for it (store_view_unknown_beside_owned). */
static void store_view_template_found_by_owner(void **state)
{
	(void)state;
	static const char *const files[] = {"dra/slice-gpu-dra-0.json"};
	struct dra_store *s = dra_fixture_store(files, 1);
	struct dra_view *v;
	struct dra_pod_refs refs = {.any = 1, .n = 0, .n_templates = 1};
	char err[256];
	cJSON *j = fixture_quoted_json(
	    "{'apiVersion':'resource.k8s.io/v1','kind':'ResourceClaim','metadata':{"
	    "'name':'tpl-pod-gpu-x7k2q','namespace':'dra',"
	    "'uid':'c1a2b3c4-0040-4d5e-8f90-a1b2c3d4e5f6',"
	    "'annotations':{'resource.kubernetes.io/pod-claim-name':'gpu'},"
	    "'ownerReferences':[{'apiVersion':'v1',"
	    "'kind':'Pod','name':'tpl-pod','uid':'d0000000-0000-4000-8000-000000000001',"
	    "'controller':true}]},'spec':{'devices':{'requests':[{'name':'gpu','exactly':{"
	    "'deviceClassName':'gpu.nvidia.com','allocationMode':'ExactCount','count':1}}]}},"
	    "'status':{'allocation':{'devices':{'results':[{'request':'gpu','driver':"
	    "'gpu.nvidia.com','pool':'gpu-dra-0','device':'gpu-1'}]}}}}");

	assert_int_equal(dra_store_apply_claim(s, WATCH_ADDED, j, err, sizeof(err)), 0);
	cJSON_Delete(j);
	assert_int_equal(dra_store_view(s, "gpu-dra-0", "dra",
	                                "d0000000-0000-4000-8000-000000000001", &refs, &v),
	                 0);
	assert_int_equal(v->pod.n_here, 1);
	assert_int_equal(v->pod.n_unknown, 0);
	assert_int_equal(v->pod.pending_whole_n, 0);
	assert_int_equal(v->pod.pending_whole_bytes, 0);
	dra_view_free(v);
	/* two templates, one generated: the other is still unknown */
	refs.n_templates = 2;
	assert_int_equal(dra_store_view(s, "gpu-dra-0", "dra",
	                                "d0000000-0000-4000-8000-000000000001", &refs, &v),
	                 0);
	assert_int_equal(v->pod.n_unknown, 1);
	assert_int_equal(v->pod.pending_whole_n, 2);
	dra_view_free(v);
	/* another pod's view of the node: the claim is not its own */
	refs.n_templates = 1;
	assert_int_equal(dra_store_view(s, "gpu-dra-0", "dra",
	                                "d0000000-0000-4000-8000-000000000002", &refs, &v),
	                 0);
	assert_int_equal(v->pod.n_here, 0);
	assert_int_equal(v->pod.n_unknown, 1);
	dra_view_free(v);
	dra_store_free(s);
}

/* A claim the pod owns that the resourceclaim controller did not generate for one of its
 * templates does not stand for a template claim not generated yet: the controller takes as a
 * template's claim only one owned by the pod that carries the annotation
 * resource.kubernetes.io/pod-claim-name naming that template, the first of them (k8s.io/kubernetes
 * v1.37 pkg/controller/resourceclaim findPodResourceClaim). A claim another controller (or
 * user) made with the pod as its controller owner, or a second claim annotated for the same
 * template, is not the pending template's claim: that one, once generated and allocated, would
 * go uncounted on the node (n_unknown 0, no pending whole GPUs). */
static void store_view_owned_not_template(void **state)
{
	(void)state;
	static const char *const files[] = {"dra/slice-gpu-dra-0.json"};
	static const char *const anns[] = {
	    "", /* no annotation: not generated for a template */
	    "'annotations':{'resource.kubernetes.io/pod-claim-name':'gpu'},",
	    "'annotations':{'resource.kubernetes.io/pod-claim-name':'gpu'},", /* the same one */
	};
	struct dra_store *s = dra_fixture_store(files, 1);
	struct dra_view *v;
	struct dra_pod_refs refs = {.any = 1, .n = 0, .n_templates = 1};
	char err[256], text[2048];

	for (size_t i = 0; i < sizeof(anns) / sizeof(anns[0]); i++) {
		snprintf(text, sizeof(text),
		         "{'apiVersion':'resource.k8s.io/v1','kind':'ResourceClaim','metadata':{"
		         "'name':'owned-%zu','namespace':'dra','uid':'c1a2b3c4-0050-4d5e-8f90-"
		         "a1b2c3d4e5f%zu',%s'ownerReferences':[{'apiVersion':'v1','kind':'Pod',"
		         "'name':'tpl-pod','uid':'d0000000-0000-4000-8000-000000000001',"
		         "'controller':true}]},'spec':{'devices':{'requests':[{'name':'gpu',"
		         "'exactly':{'deviceClassName':'gpu.nvidia.com','allocationMode':"
		         "'ExactCount','count':1}}]}}}",
		         i, i, anns[i]);
		cJSON *j = fixture_quoted_json(text);
		assert_int_equal(dra_store_apply_claim(s, WATCH_ADDED, j, err, sizeof(err)), 0);
		cJSON_Delete(j);
		if (i == 0) { /* only the foreign claim: the template's claim is still unknown */
			assert_int_equal(dra_store_view(s, "gpu-dra-0", "dra",
			                                "d0000000-0000-4000-8000-000000000001",
			                                &refs, &v),
			                 0);
			assert_int_equal(v->pod.n_unknown, 1);
			assert_int_equal(v->pod.pending_whole_n, 2);
			dra_view_free(v);
		}
	}
	/* two templates, one claim generated (and a duplicate of it), one foreign: one unknown */
	refs.n_templates = 2;
	assert_int_equal(dra_store_view(s, "gpu-dra-0", "dra",
	                                "d0000000-0000-4000-8000-000000000001", &refs, &v),
	                 0);
	assert_int_equal(v->pod.n_unknown, 1);
	assert_int_equal(v->pod.pending_whole_n, 2);
	dra_view_free(v);
	dra_store_free(s);
}

/* A pool republished (pool.generation 2 in a new slice, the old slice not deleted yet), or a
 * device listed by two slices of a pool: each GPU is the node's once. Counted twice, the node's
 * capacity doubles and a placement passes at twice the threshold. */
static void store_view_device_twice(void **state)
{
	(void)state;
	static const char *const files[] = {"dra/slice-gpu-dra-0.json"};
	struct dra_store *s = dra_fixture_store(files, 1);
	cJSON *j = fixture_json("dra/slice-gpu-dra-0.json");
	cJSON *md = cJSON_GetObjectItem(j, "metadata");
	cJSON *pool = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"), "pool");
	struct dra_view *v;
	char err[256];

	cJSON_ReplaceItemInObject(md, "name", cJSON_CreateString("gpu-dra-0-gpu.nvidia.com-9zz9z"));
	cJSON_ReplaceItemInObject(pool, "generation", cJSON_CreateNumber(2));
	assert_int_equal(dra_store_apply_slice(s, WATCH_ADDED, j, err, sizeof(err)), 0);
	assert_int_equal(dra_store_view(s, "gpu-dra-0", NULL, NULL, NULL, &v), 0);
	assert_int_equal(v->node.gpus.n, 2);
	assert_int_equal(v->node.gpus.bytes, 2 * H100);
	dra_view_free(v);
	cJSON_Delete(j);
	dra_store_free(s);
}

/* Pods that leave a claim's reservedFor (deleted, refused) are reported gone, once each, with
 * their "ns/name" and uid: their reservations can go. */
struct gone_rec {
	size_t n;
	char last[DRA_NS_MAX + DRA_NAME_MAX];
};

static void on_gone(void *ctx, const char *key, const char *uid)
{
	struct gone_rec *g = ctx;
	(void)uid;
	g->n++;
	snprintf(g->last, sizeof(g->last), "%s", key);
}

static void store_gone(void **state)
{
	(void)state;
	struct gone_rec g = {0};
	struct dra_store *s = dra_store_new(NULL, on_gone, &g);
	cJSON *j = fixture_json("dra/claim-shared3.json");
	cJSON *rsv = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "status"), "reservedFor");
	char err[256];

	assert_non_null(s);
	assert_int_equal(dra_store_apply_claim(s, WATCH_ADDED, j, err, sizeof(err)), 0);
	assert_int_equal(g.n, 0);
	cJSON_DeleteItemFromArray(rsv, 2); /* shared-c leaves */
	assert_int_equal(dra_store_apply_claim(s, WATCH_MODIFIED, j, err, sizeof(err)), 0);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.last, "dra/shared-c");
	assert_int_equal(dra_store_apply_claim(s, WATCH_DELETED, j, err, sizeof(err)), 0);
	assert_int_equal(g.n, 3);
	cJSON_Delete(j);
	dra_store_free(s);
}

/* ---- placement: the counting rules, as a table ---- */

static const struct placement_policy enforce = {0.9, 0.8, POLICY_ENFORCE, 0, 0};

static const char shared_pods[3][DRA_UID_MAX] = {"pa", "pb", "pc"};
static const char one_pod[1][DRA_UID_MAX] = {"pa"};
static const char me[1][DRA_UID_MAX] = {"me"};
static const char me_and_pa[2][DRA_UID_MAX] = {"me", "pa"};

struct row {
	const char *what;
	int cards; /* DRA GPUs of the node (H100 each) */
	struct dra_claim_use claims[4];
	size_t n_claims;
	struct dra_pod pod;
	uint64_t declared;   /* the pod's GPU_MEMORY_LIMIT (device-plugin) bytes; 0: DRA only */
	uint64_t pods_bytes; /* a device-plugin pod "ns/dp" of uid "dp" already there */
	int allowed;
	uint64_t used, demand;
	const char *reason;
	uint64_t dra_units;    /* the pod's demand.dra_units (KEP-5004 units read apart) */
	uint64_t dp_dra_units; /* ... and the device-plugin pod's */
};

static const char dp_pod[1][DRA_UID_MAX] = {"dp"};

static void placement_rules(void **state)
{
	(void)state;
	/* H100 devices by DRA (79.6Gi each); limit 90%: 71.7Gi of one. */
	const struct row rows[] = {
	    {"a whole device another pod's claim holds: a 10Gi device-plugin pod beside it refused",
	     1,
	     {{.key = "dra/a",
	       .uid = "ca",
	       .whole_n = 1,
	       .whole_bytes = H100,
	       .n_pods = 1,
	       .pods = one_pod}},
	     1,
	     {0},
	     10 * GI,
	     0,
	     0,
	     0,
	     10 * GI,
	     "NoFreeCard",
	     0,
	     0},
	    {"a share claim of 3 pods counts once (40Gi, not 120Gi)",
	     1,
	     {{.key = "dra/s", .uid = "cs", .bytes = 40 * GI, .n_pods = 3, .pods = shared_pods}},
	     1,
	     {0},
	     30 * GI,
	     0,
	     1,
	     40 * GI,
	     30 * GI,
	     NULL,
	     0,
	     0},
	    {"a whole-device claim of 3 pods holds one device, not three",
	     2,
	     {{.key = "dra/s",
	       .uid = "cs",
	       .whole_n = 1,
	       .whole_bytes = H100,
	       .n_pods = 3,
	       .pods = shared_pods}},
	     1,
	     {0},
	     30 * GI,
	     0,
	     1,
	     0,
	     30 * GI,
	     NULL,
	     0,
	     0},
	    {"the pod's own allocated claim is its demand (19Gi share)",
	     1,
	     {{.key = "dra/mine", .uid = "cm", .bytes = 19 * GI, .n_pods = 1, .pods = me}},
	     1,
	     {.any = 1},
	     0,
	     0,
	     1,
	     0,
	     19 * GI,
	     NULL,
	     0,
	     0},
	    {"consumable capacity: 3 x 19Gi there, the fourth 19Gi is over 90%",
	     1,
	     {{.key = "dra/s1", .uid = "c1", .bytes = 19 * GI, .n_pods = 1, .pods = one_pod},
	      {.key = "dra/s2", .uid = "c2", .bytes = 19 * GI, .n_pods = 1, .pods = one_pod},
	      {.key = "dra/s3", .uid = "c3", .bytes = 19 * GI, .n_pods = 1, .pods = one_pod},
	      {.key = "dra/s4", .uid = "c4", .bytes = 19 * GI, .n_pods = 1, .pods = me}},
	     4,
	     {.any = 1},
	     0,
	     0,
	     0,
	     57 * GI,
	     19 * GI,
	     NULL,
	     0,
	     0},
	    {"joining a share claim another pod holds adds nothing",
	     1,
	     {{.key = "dra/s", .uid = "cs", .bytes = 60 * GI, .n_pods = 2, .pods = me_and_pa}},
	     1,
	     {.any = 1},
	     0,
	     0,
	     1,
	     60 * GI,
	     0,
	     NULL,
	     0,
	     0},
	    {"KEP-5004: its claim's device, never also nvidia.com/gpu units (70Gi declared)",
	     1,
	     {{.key = "dra/ext",
	       .uid = "ce",
	       .owner = "me",
	       .whole_n = 1,
	       .whole_bytes = H100,
	       .extended = 1}},
	     1,
	     {.any = 1, .extended = 1},
	     70 * GI,
	     0,
	     1,
	     0,
	     0,
	     "ExclusiveCards",
	     0,
	     0},
	    {"a KEP-5004 pod already there counts by its claim only, not its 40Gi units",
	     2,
	     {{.key = "dra/ext",
	       .uid = "ce",
	       .whole_n = 1,
	       .whole_bytes = H100,
	       .extended = 1,
	       .n_pods = 1,
	       .pods = dp_pod}},
	     1,
	     {0},
	     20 * GI,
	     40 * GI,
	     1,
	     0,
	     20 * GI,
	     NULL,
	     0,
	     0},
	    {"KEP-5004 mixed pod: its claim's device and its 70Gi device-plugin part, once each",
	     2,
	     {{.key = "dra/ext",
	       .uid = "ce",
	       .owner = "me",
	       .whole_n = 1,
	       .whole_bytes = H100,
	       .extended = 1}},
	     1,
	     {.any = 1, .extended = 1},
	     70 * GI,
	     40 * GI,
	     0,
	     40 * GI,
	     70 * GI,
	     NULL,
	     1,
	     0},
	    {"a KEP-5004 mixed pod already there counts its 40Gi device-plugin part too",
	     2,
	     {{.key = "dra/ext",
	       .uid = "ce",
	       .whole_n = 1,
	       .whole_bytes = H100,
	       .extended = 1,
	       .n_pods = 1,
	       .pods = dp_pod}},
	     1,
	     {0},
	     40 * GI,
	     40 * GI,
	     0,
	     40 * GI,
	     40 * GI,
	     NULL,
	     0,
	     1},
	    {"a whole-device claim not allocated: one of the free devices",
	     1,
	     {{.bytes = 0}},
	     0,
	     {.any = 1, .pending_whole_n = 1, .pending_whole_bytes = H100, .n_pending = 1},
	     0,
	     0,
	     1,
	     0,
	     0,
	     "ExclusiveCards",
	     0,
	     0},
	    {"a whole-device claim not allocated, the only device held: refused",
	     1,
	     {{.key = "dra/a",
	       .uid = "ca",
	       .whole_n = 1,
	       .whole_bytes = H100,
	       .n_pods = 1,
	       .pods = one_pod}},
	     1,
	     {.any = 1, .pending_whole_n = 1, .pending_whole_bytes = H100, .n_pending = 1},
	     0,
	     0,
	     0,
	     0,
	     0,
	     "NoFreeCard",
	     0,
	     0},
	    {"a pending 19Gi share fits beside a 40Gi device-plugin pod",
	     1,
	     {{.bytes = 0}},
	     0,
	     {.any = 1, .pending_bytes = 19 * GI, .n_pending = 1},
	     0,
	     40 * GI,
	     1,
	     40 * GI,
	     19 * GI,
	     NULL,
	     0,
	     0},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct capacity cap = dra_fixture_h100s((uint64_t)r->cards);
		struct demand d;
		struct placement_item dp = {.key = "ns/dp",
		                            .uid = "dp",
		                            .bytes = r->pods_bytes,
		                            .pool = CAPACITY_POOL_WHOLE,
		                            .dra_units = r->dp_dra_units};
		struct dra_node dn = {.n_claims = r->n_claims, .claims = r->claims};
		struct placement_node node = {.name = "gpu-dra-0",
		                              .cap = &cap,
		                              .pods = &dp,
		                              .n_pods = r->pods_bytes ? 1 : 0,
		                              .dra = &dn};
		struct placement_pod pod = {
		    .name = "ns/me", .key = "ns/me", .uid = "me", .demand = &d, .dra = &r->pod};
		struct placement_result res;

		memset(&d, 0, sizeof(d));
		placement_dra_demand(&d);
		if (r->declared) { /* a device-plugin pod declaring r->declared on one GPU */
			d.bytes = r->declared;
			d.gpus = 1;
			d.pool = CAPACITY_POOL_WHOLE;
			d.n_uses = 1;
			d.uses[0] = (struct demand_use){.bytes = r->declared, .gpus = 1};
			strcpy(d.uses[0].container, "main");
		}
		d.dra_units = r->dra_units;
		assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
		if (res.decision.allowed != r->allowed || res.used_bytes != r->used ||
		    res.demand_bytes != r->demand ||
		    (r->reason != NULL && strcmp(res.decision.reason, r->reason) != 0))
			fail_msg("row %zu (%s): allowed %d used %llu demand %llu %s: %s", i,
			         r->what, res.decision.allowed, (unsigned long long)res.used_bytes,
			         (unsigned long long)res.demand_bytes, res.decision.reason,
			         res.decision.message);
	}
}

/* A DRA pod's containers' own figures (demand.dra_figs): its consumable-capacity shares count
 * the larger of theirs and the figures, resolved on the node's largest DRA device (vLLM's 0.9 is
 * of the whole H100, whatever share its claim holds); whole devices hold them. */
static void placement_dra_figures(void **state)
{
	(void)state;
	static const char other[1][DRA_UID_MAX] = {"pa"};
	const uint64_t vllm =
	    (H100 / 1000000u) * 850000u +
	    ((H100 % 1000000u) * 850000u + 999999u) / 1000000u; /* 0.85 of it, rounded up */
	static const struct {
		const char *what;
		struct dra_claim_use own, other;
		struct dra_pod pod;
		uint32_t ppm;
		uint64_t bytes;
		int allowed;
		uint64_t demand;
	} rows[] = {
	    {"vLLM 0.85 alone on its own 19Gi share: counted 0.85 of the device, fits",
	     {.key = "dra/mine", .uid = "cm", .bytes = 19 * GI, .n_pods = 1, .pods = me},
	     {.key = ""},
	     {.any = 1},
	     850000,
	     0,
	     1,
	     0},
	    {"vLLM 0.85 on a 19Gi share beside another pod's 19Gi share: refused",
	     {.key = "dra/mine", .uid = "cm", .bytes = 19 * GI, .n_pods = 1, .pods = me},
	     {.key = "dra/s1", .uid = "c1", .bytes = 19 * GI, .n_pods = 1, .pods = other},
	     {.any = 1},
	     850000,
	     0,
	     0,
	     0},
	    {"GPU_MEMORY_LIMIT 10Gi on a 19Gi share: the share counts",
	     {.key = "dra/mine", .uid = "cm", .bytes = 19 * GI, .n_pods = 1, .pods = me},
	     {.key = ""},
	     {.any = 1},
	     0,
	     10 * GI,
	     1,
	     19 * GI},
	    {"GPU_MEMORY_LIMIT 30Gi on a 19Gi share: 30Gi counts",
	     {.key = "dra/mine", .uid = "cm", .bytes = 19 * GI, .n_pods = 1, .pods = me},
	     {.key = ""},
	     {.any = 1},
	     0,
	     30 * GI,
	     1,
	     30 * GI},
	    {"a pending 19Gi share with vLLM 0.85: counted 0.85 of the device",
	     {.key = ""},
	     {.key = ""},
	     {.any = 1, .pending_bytes = 19 * GI, .n_pending = 1},
	     850000,
	     0,
	     1,
	     0},
	    {"vLLM 0.85 on a whole device: the device holds it, nothing added",
	     {.key = "dra/mine",
	      .uid = "cm",
	      .whole_n = 1,
	      .whole_bytes = H100,
	      .n_pods = 1,
	      .pods = me},
	     {.key = ""},
	     {.any = 1},
	     850000,
	     0,
	     1,
	     0},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct capacity cap = dra_fixture_h100s(1);
		struct dra_claim_use claims[2];
		size_t n = 0;
		if (rows[i].own.key[0] != '\0')
			claims[n++] = rows[i].own;
		if (rows[i].other.key[0] != '\0')
			claims[n++] = rows[i].other;
		struct dra_node dn = {
		    .gpus = dra_fixture_one_h100(), .n_claims = n, .claims = claims};
		struct placement_node node = {.name = "gpu-dra-0", .cap = &cap, .dra = &dn};
		struct demand d;
		struct placement_pod pod = {.name = "ns/me",
		                            .key = "ns/me",
		                            .uid = "me",
		                            .demand = &d,
		                            .dra = &rows[i].pod};
		struct placement_result res;
		uint64_t want = rows[i].demand ? rows[i].demand : rows[i].ppm ? vllm : 0;

		memset(&d, 0, sizeof(d));
		d.dra_figs[0] =
		    (struct demand_share){.whole = 1, .ppm = rows[i].ppm, .bytes = rows[i].bytes};
		d.n_dra_figs = 1;
		snprintf(d.dra_words, sizeof(d.dra_words), "vllm (container main)");
		placement_dra_demand(&d);
		assert_int_equal(d.n_dra_figs, 1);
		assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
		if (rows[i].own.whole_n > 0)
			want = 0;
		if (res.decision.allowed != rows[i].allowed || res.demand_bytes != want)
			fail_msg("row %zu (%s): allowed %d demand %llu (want %llu) %s: %s", i,
			         rows[i].what, res.decision.allowed,
			         (unsigned long long)res.demand_bytes, (unsigned long long)want,
			         res.decision.reason, res.decision.message);
		if (!res.decision.allowed && strstr(res.decision.message, "own figure") == NULL)
			fail_msg("row %zu: the message does not say the figure: %s", i,
			         res.decision.message);
	}
}

/* A DRA pod already on the node with its containers' figures (an item carrying dra_figs only):
 * its share claim counts the larger of its 19Gi and the figure (vLLM 0.85 of the H100: 67.7Gi),
 * so a 19Gi pending share beside it is refused; the item counts nothing of its own, and the
 * gauges' sum says the same. */
static void placement_visible_figures(void **state)
{
	(void)state;
	static const char pa[1][DRA_UID_MAX] = {"pa"};
	static const struct demand_share fig = {.whole = 1, .ppm = 850000};
	const uint64_t vllm =
	    (H100 / 1000000u) * 850000u + ((H100 % 1000000u) * 850000u + 999999u) / 1000000u;
	struct capacity cap = dra_fixture_h100s(1);
	struct dra_claim_use theirs = {
	    .key = "dra/theirs", .uid = "ct", .bytes = 19 * GI, .n_pods = 1, .pods = pa};
	struct dra_node dn = {.gpus = dra_fixture_one_h100(), .n_claims = 1, .claims = &theirs};
	struct placement_item it = {.key = "dra/pa", .uid = "pa"};
	struct dra_pod dp = {.any = 1, .pending_bytes = 19 * GI, .n_pending = 1};
	struct demand d;
	struct placement_node node = {
	    .name = "gpu-dra-0", .cap = &cap, .pods = &it, .n_pods = 1, .dra = &dn};
	struct placement_pod pod = {
	    .name = "ns/me", .key = "ns/me", .uid = "me", .demand = &d, .dra = &dp};
	struct placement_result res;

	placement_item_count(&it, &(const struct placement_count){
	                              .status = DEMAND_NOT_GPU, .dra_figs = &fig, .n_dra_figs = 1});
	assert_int_equal(it.n_dra_figs, 1);
	memset(&d, 0, sizeof(d));
	placement_dra_demand(&d);
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
	if (res.decision.allowed || res.used_bytes != vllm)
		fail_msg("allowed %d used %llu (want %llu): %s", res.decision.allowed,
		         (unsigned long long)res.used_bytes, (unsigned long long)vllm,
		         res.decision.message);
	assert_int_equal(placement_dra_bytes(&node, NULL), vllm);
	/* without figures: its 19Gi share, and the pending 19Gi fits */
	it.n_dra_figs = 0;
	it.dra_figs = NULL;
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
	assert_true(res.decision.allowed);
	assert_int_equal(res.used_bytes, 19 * GI);
}

/* DRA GPUs that publish no memory capacity, their memory given by the node's annotation
 * (capacity_add_dra: per_gpu_bytes from it): a whole device another claim holds (whole_bytes 0,
 * the device's published memory) still leaves no memory on the node's one card, as when the
 * device publishes its memory (the first row of placement_rules). */
static void placement_whole_device_no_memory(void **state)
{
	(void)state;
	struct capacity cap = {.per_gpu_bytes = H100,
	                       .gpu_count = 1,
	                       .total_bytes = H100,
	                       .replicas = 1,
	                       .piece_bytes = H100,
	                       .memory_source = CAPACITY_SRC_ANNOTATION,
	                       .count_source = CAPACITY_SRC_DRA,
	                       .dra_gpus = 1,
	                       .dra_bytes = H100};
	struct dra_claim_use c = {.key = "dra/a",
	                          .uid = "ca",
	                          .whole_n = 1,
	                          .whole_bytes = 0,
	                          .n_pods = 1,
	                          .pods = one_pod};
	struct dra_node dn = {.n_claims = 1, .claims = &c};
	struct placement_node node = {.name = "gpu-dra-0", .cap = &cap, .dra = &dn};
	struct dra_pod dp = {0};
	struct demand d;
	struct placement_pod pod = {
	    .name = "ns/me", .key = "ns/me", .uid = "me", .demand = &d, .dra = &dp};
	struct placement_result res;

	memset(&d, 0, sizeof(d));
	placement_dra_demand(&d);
	d.bytes = 10 * GI; /* a device-plugin pod declaring 10Gi on one GPU */
	d.gpus = 1;
	d.pool = CAPACITY_POOL_WHOLE;
	d.n_uses = 1;
	d.uses[0] = (struct demand_use){.bytes = 10 * GI, .gpus = 1};
	strcpy(d.uses[0].container, "main");
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
	if (res.decision.allowed)
		fail_msg("allowed beside a device held whole: used %llu, %s: %s",
		         (unsigned long long)res.used_bytes, res.decision.reason,
		         res.decision.message);
	assert_string_equal(res.decision.reason, "NoFreeCard");
}

/* A reservation whose pod a claim is now reserved for is settled, not counted twice; the
 * refusal names the claim and says how a pending claim was counted. */
static void placement_settle_and_words(void **state)
{
	(void)state;
	struct capacity cap = {.per_gpu_bytes = H100,
	                       .gpu_count = 1,
	                       .total_bytes = H100,
	                       .replicas = 1,
	                       .piece_bytes = H100};
	struct dra_claim_use c = {
	    .key = "dra/a", .uid = "ca", .bytes = 40 * GI, .n_pods = 1, .pods = one_pod};
	struct dra_node dn = {.n_claims = 1, .claims = &c};
	struct placement_item resv = {.key = "dra/a-pod", .uid = "pa", .bytes = 40 * GI};
	struct placement_node node = {
	    .name = "gpu-dra-0", .cap = &cap, .reserved = &resv, .n_reserved = 1, .dra = &dn};
	struct dra_pod dp = {.any = 1, .pending_bytes = 40 * GI, .n_pending = 1};
	struct demand d;
	struct placement_pod pod = {
	    .name = "ns/me", .key = "ns/me", .uid = "me", .demand = &d, .dra = &dp};
	struct placement_result res;

	memset(&d, 0, sizeof(d));
	placement_dra_demand(&d);
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
	assert_false(res.decision.allowed);
	assert_int_equal(res.used_bytes, 40 * GI); /* the reservation settled by the claim */
	assert_int_equal(res.n_settled, 1);
	assert_non_null(strstr(res.decision.message, "claim dra/a"));
	assert_non_null(strstr(res.decision.message, "not allocated yet"));
}

/* A mixed pod (a DRA claim, and nvidia.com/gpu of the device plugin declaring 40Gi) admitted
 * a moment ago: the scheduler reserved its claim for it before its Binding, so the claim lists
 * it while the pod is not visible yet. Its reservation is what its device-plugin card holds:
 * the claim counts its DRA device only, so the reservation must still count. */
static void placement_mixed_reservation(void **state)
{
	(void)state;
	struct capacity cap = {.per_gpu_bytes = H100,
	                       .gpu_count = 2,
	                       .total_bytes = 2 * H100,
	                       .replicas = 1,
	                       .piece_bytes = H100,
	                       .dra_gpus = 1,
	                       .dra_bytes = H100};
	struct dra_claim_use c = {.key = "dra/a",
	                          .uid = "ca",
	                          .whole_n = 1,
	                          .whole_bytes = H100,
	                          .n_pods = 1,
	                          .pods = one_pod};
	struct dra_node dn = {
	    .gpus = {.n = 1, .bytes = H100, .max_bytes = H100}, .n_claims = 1, .claims = &c};
	struct placement_item resv = {.key = "dra/a-pod", .uid = "pa", .bytes = 40 * GI};
	struct placement_node node = {
	    .name = "gpu-mixed-0", .cap = &cap, .reserved = &resv, .n_reserved = 1, .dra = &dn};
	struct dra_pod dp = {0};
	struct demand d;
	struct placement_pod pod = {
	    .name = "ns/me", .key = "ns/me", .uid = "me", .demand = &d, .dra = &dp};
	struct placement_result res;

	memset(&d, 0, sizeof(d));
	placement_dra_demand(&d);
	d.bytes = 40 * GI; /* a device-plugin pod declaring 40Gi on one GPU */
	d.gpus = 1;
	d.pool = CAPACITY_POOL_WHOLE;
	d.n_uses = 1;
	d.uses[0] = (struct demand_use){.bytes = 40 * GI, .gpus = 1};
	strcpy(d.uses[0].container, "main");
	assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
	if (res.decision.allowed)
		fail_msg("allowed: 40Gi beside the mixed pod's 40Gi reservation on one free 80GB "
		         "card: used %llu, reserved %llu, settled %zu, %s",
		         (unsigned long long)res.used_bytes, (unsigned long long)res.reserved_bytes,
		         res.n_settled, res.decision.reason);
	assert_int_equal(res.reserved_bytes, 40 * GI);
}

static int no_call(void *ctx, const char *a, cJSON **out, long *code, char *err, size_t errlen)
{
	(void)ctx, (void)a, (void)out;
	*code = 0;
	snprintf(err, errlen, "not asked in this test");
	return -1;
}

static int no_get_pod(void *ctx, const char *ns, const char *name, cJSON **pod, long *code,
                      char *err, size_t errlen)
{
	(void)ns;
	return no_call(ctx, name, pod, code, err, errlen);
}

static int no_list(void *ctx, const char *node, cJSON **items, long *code, char *err, size_t errlen)
{
	return no_call(ctx, node, items, code, err, errlen);
}

/* The same on the webhook's cache path: the claims reserved for the mixed pod (the DRA store)
 * must not settle its reservation in the ledger either (dra_settle), or the next placement,
 * a 40Gi CREATE on the node's one free H100 (71.7Gi limit), is admitted beside its 40Gi. */
static void webhook_mixed_reservation(void **state)
{
	(void)state;
	int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	struct cache *cache = cache_new(&(struct demand_config){.gpu_resources = NULL}, NULL, NULL);
	struct dra_store *dra = dra_store_new(NULL, NULL, NULL);
	struct ledger *ledger = ledger_new(600000);
	struct metrics *metrics = metrics_new();
	cJSON *node = fixture_quoted_json(
	    "{'kind':'Node','metadata':{'name':'gpu-dra-0','uid':'n0'},'status':{'allocatable':{"
	    "'cpu':'8'}}}");
	cJSON *slice = fixture_json("dra/slice-gpu-dra-0.json");
	cJSON *claim = fixture_quoted_json(
	    "{'metadata':{'name':'mixed-claim','namespace':'inference','uid':'cm'},'spec':{"
	    "'devices':{'requests':[{'name':'gpu'}]}},'status':{'allocation':{'devices':{"
	    "'results':[{'request':'gpu','driver':'gpu.nvidia.com','pool':'gpu-dra-0','device':"
	    "'gpu-0'}]}},'reservedFor':[{'resource':'pods','name':'mixed-p','uid':'p-uid'}]}}");
	cJSON *review = fixture_json("review-pod-create-nodename.json");
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(review, "request"), "object");
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	cJSON *ctr = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0);
	cJSON *env = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ctr, "env"), 0);
	struct placer_source src = {NULL, no_get_pod, no_call, no_list};
	char err[256], *body, *out = NULL;
	size_t len = 0;

	assert_true(devnull >= 0);
	log_set_fd(devnull);
	assert_non_null(cache);
	assert_non_null(dra);
	assert_non_null(ledger);
	assert_non_null(node);
	assert_non_null(claim);
	assert_non_null(review);
	assert_int_equal(cache_apply_node(cache, WATCH_ADDED, node), 0);
	if (dra_store_apply_slice(dra, WATCH_ADDED, slice, err, sizeof(err)) != 0 ||
	    dra_store_apply_claim(dra, WATCH_ADDED, claim, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	/* the mixed pod's reservation: its 40Gi of device-plugin memory, admitted a moment ago */
	struct ledger_node *ln = ledger_lock(ledger, "gpu-dra-0");
	assert_non_null(ln);
	assert_int_equal(
	    ledger_reserve_uid(ln, "inference/mixed-p", "p-uid", 40 * GI, ledger_now_ms()), 0);
	ledger_unlock(ln);
	cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(spec, "nodeName"), "gpu-dra-0");
	cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(env, "value"), "40Gi");
	body = cJSON_PrintUnformatted(review);
	assert_non_null(body);

	struct webhook_config cfg = {
	    .threshold = 0.9, .warn_threshold = 0.8, .cache = cache, .dra = dra};
	struct webhook *w = webhook_new(&cfg, &src, ledger, metrics);
	assert_non_null(w);
	if (webhook_review(w, body, strlen(body), &out, &len, err, sizeof(err)) != 0)
		fail_msg("webhook_review: %s", err);
	cJSON *root = cJSON_Parse(out);
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(resp, "status");
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(st, "message");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed")))
		fail_msg("admitted 40Gi beside the mixed pod's 40Gi reservation: %s", out);
	assert_non_null(strstr(cJSON_IsString(msg) ? msg->valuestring : "", "mixed-p"));
	cJSON_Delete(root);
	free(out);
	free(body);
	webhook_free(w);
	metrics_free(metrics);
	ledger_free(ledger);
	dra_store_free(dra);
	cache_free(cache);
	cJSON_Delete(review);
	cJSON_Delete(claim);
	cJSON_Delete(slice);
	cJSON_Delete(node);
	log_set_fd(2);
	close(devnull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(placement_mixed_reservation),
	    cmocka_unit_test(webhook_mixed_reservation),
	    cmocka_unit_test(slice_nvidia),
	    cmocka_unit_test(slice_mig),
	    cmocka_unit_test(slice_errors),
	    cmocka_unit_test(claim_consumable),
	    cmocka_unit_test(claim_shared_and_extended),
	    cmocka_unit_test(claim_errors),
	    cmocka_unit_test(pod_refs),
	    cmocka_unit_test(drivers),
	    cmocka_unit_test(request_max),
	    cmocka_unit_test(capacity_merge),
	    cmocka_unit_test(store_view),
	    cmocka_unit_test(store_view_unknown_beside_owned),
	    cmocka_unit_test(store_view_template_found_by_owner),
	    cmocka_unit_test(store_view_owned_not_template),
	    cmocka_unit_test(store_view_device_twice),
	    cmocka_unit_test(store_gone),
	    cmocka_unit_test(placement_rules),
	    cmocka_unit_test(placement_dra_figures),
	    cmocka_unit_test(placement_visible_figures),
	    cmocka_unit_test(placement_settle_and_words),
	    cmocka_unit_test(placement_whole_device_no_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
