/*
 * Unit tests for DRA devices shared by a claim's config (issue 21): lib/core/dra's decoding of
 * the NVIDIA driver's GpuConfig / MigDeviceConfig sharing (time-slicing, MPS and its pinned
 * limit) into each allocation result, lib/cluster/drastore's view of it (dra_claim_use.sharing,
 * pinned, dev_bytes, mine), and placement's shared rule among the claim's pods (placement.h,
 * "DRA devices shared by a config"), as tables. Claims are written by hand from k8s.io/api
 * resource/v1 types.go and api/nvidia.com/resource/v1beta1 of
 * kubernetes-sigs/dra-driver-nvidia-gpu.
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
#include "placement.h"

#include "dra_fixture.h"

/* A claim allocated one device (result request req) with configs cfgs in its allocation. */
#define CLAIM_ALLOC(req, cfgs)                                                                     \
	"{'metadata':{'name':'c','namespace':'dra'},'spec':{'devices':{'requests':[{'name':'gpu'}" \
	"]}},"                                                                                     \
	"'status':{'allocation':{'devices':{'results':[{'request':'" req "','driver':"             \
	"'gpu.nvidia.com','pool':'p','device':'gpu-0'}],'config':[" cfgs "]}}}}"
/* One config of the NVIDIA driver's: source, requests named, kind, sharing. */
#define CFG(src, reqs, kind, sharing)                                                              \
	"{'source':'" src "','requests':[" reqs "],'opaque':{'driver':'gpu.nvidia.com',"           \
	"'parameters':{'apiVersion':'resource.nvidia.com/v1beta1','kind':'" kind                   \
	"','sharing':" sharing "}}}"
#define TS    "{'strategy':'TimeSlicing','timeSlicingConfig':{'interval':'Long'}}"
#define MPS10 "{'strategy':'MPS','mpsConfig':{'defaultPinnedDeviceMemoryLimit':'10Gi'}}"

static void claim_configs(void **state)
{
	(void)state;
	static const struct {
		const char *what, *json;
		uint8_t gpu, mig; /* sharing of a GPU / a MIG device */
		uint64_t pin_gpu; /* the GPU's pinned limit */
	} rows[] = {
	    {"no config: not shared", CLAIM_ALLOC("gpu", ""), DRA_SHARING_NONE, DRA_SHARING_NONE,
	     0},
	    {"the claim's time-slicing naming the request: any device of it",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "'gpu'", "GpuConfig", TS)),
	     DRA_SHARING_TIME_SLICING, DRA_SHARING_TIME_SLICING, 0},
	    {"the class's MPS naming no request: GPUs only, pinned 10Gi",
	     CLAIM_ALLOC("gpu", CFG("FromClass", "", "GpuConfig", MPS10)), DRA_SHARING_MPS,
	     DRA_SHARING_NONE, 10 * GI},
	    {"the claim's config wins over the class's, wherever listed",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig", TS) "," CFG("FromClass", "",
	                                                                      "GpuConfig", MPS10)),
	     DRA_SHARING_TIME_SLICING, DRA_SHARING_NONE, 0},
	    {"of the claim's, the later wins",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig", TS) "," CFG("FromClaim", "",
	                                                                      "GpuConfig", MPS10)),
	     DRA_SHARING_MPS, DRA_SHARING_NONE, 10 * GI},
	    {"a config naming another request does not apply",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "'other'", "GpuConfig", TS)), DRA_SHARING_NONE,
	     DRA_SHARING_NONE, 0},
	    {"a config naming the parent request applies to its subrequest's result",
	     CLAIM_ALLOC("gpu/big", CFG("FromClaim", "'gpu'", "GpuConfig", TS)),
	     DRA_SHARING_TIME_SLICING, DRA_SHARING_TIME_SLICING, 0},
	    {"another kind (VfioDeviceConfig) is not read, even with a sharing",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "VfioDeviceConfig", "{'strategy':'Fancy'}")),
	     DRA_SHARING_NONE, DRA_SHARING_NONE, 0},
	    {"another driver's config is not read",
	     CLAIM_ALLOC("gpu", "{'source':'FromClaim','opaque':{'driver':'nic.example.com',"
	                        "'parameters':{'apiVersion':'resource.nvidia.com/v1beta1','kind':"
	                        "'GpuConfig','sharing':{'strategy':'Fancy'}}}}"),
	     DRA_SHARING_NONE, DRA_SHARING_NONE, 0},
	    {"a config of another group is not read",
	     CLAIM_ALLOC("gpu", "{'source':'FromClaim','opaque':{'driver':'gpu.nvidia.com',"
	                        "'parameters':{'apiVersion':'gpu.example.com/v1','kind':"
	                        "'GpuConfig','sharing':{'strategy':'TimeSlicing'}}}}"),
	     DRA_SHARING_NONE, DRA_SHARING_NONE, 0},
	    {"MigDeviceConfig naming no request: MIG devices only",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "MigDeviceConfig", "{'strategy':'TimeSlicing'}")),
	     DRA_SHARING_NONE, DRA_SHARING_TIME_SLICING, 0},
	    {"MPS without mpsConfig: no pinned limit",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig", "{'strategy':'MPS'}")),
	     DRA_SHARING_MPS, DRA_SHARING_NONE, 0},
	    {"MPS per-device limits over the default: the largest",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig",
	                     "{'strategy':'MPS','mpsConfig':{'defaultPinnedDeviceMemoryLimit':"
	                     "'10Gi','defaultPerDevicePinnedMemoryLimit':{'0':'20Gi','1':"
	                     "'5Gi'}}}")),
	     DRA_SHARING_MPS, DRA_SHARING_NONE, 20 * GI},
	    /* a Quantity also reads a JSON number (k8s resource.Quantity UnmarshalJSON), and the
	     * opaque parameters keep what the user wrote: the driver takes this claim */
	    {"MPS pinned limits as JSON numbers: quantities of bytes",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig",
	                     "{'strategy':'MPS','mpsConfig':{'defaultPinnedDeviceMemoryLimit':"
	                     "10737418240,'defaultPerDevicePinnedMemoryLimit':{'0':"
	                     "21474836480}}}")),
	     DRA_SHARING_MPS, DRA_SHARING_NONE, 20 * GI},
	    {"MPS per-device limits without a default: devices not named are not pinned",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            "{'strategy':'MPS','mpsConfig':{"
	                            "'defaultPerDevicePinnedMemoryLimit':{'0':'20Gi'}}}")),
	     DRA_SHARING_MPS, DRA_SHARING_NONE, 0},
	    {"an allocation without configs: the spec's",
	     "{'metadata':{'name':'c'},'spec':{'devices':{'requests':[{'name':'gpu'}],'config':["
	     "{'requests':['gpu'],'opaque':{'driver':'gpu.nvidia.com','parameters':{'apiVersion':"
	     "'resource.nvidia.com/v1beta1','kind':'GpuConfig','sharing':" TS "}}}]}},'status':{"
	     "'allocation':{'devices':{'results':[{'request':'gpu','driver':'gpu.nvidia.com',"
	     "'pool':'p','device':'gpu-0'}]}}}}",
	     DRA_SHARING_TIME_SLICING, DRA_SHARING_TIME_SLICING, 0},
	};
	struct dra_claim *c = malloc(sizeof(*c));

	assert_non_null(c);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		cJSON *j = fixture_quoted_json(rows[i].json);
		char err[256] = "";

		assert_non_null(j);
		if (dra_claim_decode(j, NULL, c, err, sizeof(err)) != 0)
			fail_msg("row %zu (%s): %s", i, rows[i].what, err);
		assert_int_equal(c->n_results, 1);
		if (c->results[0].sharing[DRA_CFG_GPU] != rows[i].gpu ||
		    c->results[0].sharing[DRA_CFG_MIG] != rows[i].mig ||
		    c->results[0].pinned[DRA_CFG_GPU] != rows[i].pin_gpu)
			fail_msg("row %zu (%s): gpu %d mig %d pinned %llu", i, rows[i].what,
			         c->results[0].sharing[DRA_CFG_GPU],
			         c->results[0].sharing[DRA_CFG_MIG],
			         (unsigned long long)c->results[0].pinned[DRA_CFG_GPU]);
		cJSON_Delete(j);
	}
	free(c);
}

static void claim_config_errors(void **state)
{
	(void)state;
	static const struct {
		const char *json, *err;
	} rows[] = {
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig", "{'strategy':'Fancy'}")),
	     "ResourceClaim c: status.allocation.devices.config[0]: sharing.strategy \"Fancy\" is "
	     "not TimeSlicing or MPS"},
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig", "{'mpsConfig':{}}")),
	     "config[0]: sharing.strategy is missing or not a string (TimeSlicing or MPS)"},
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig", "'MPS'")),
	     "config[0]: sharing is not an object"},
	    {CLAIM_ALLOC("gpu", CFG("FromClass", "", "GpuConfig",
	                            TS) "," CFG("FromClaim", "", "GpuConfig",
	                                        "{'strategy':'MPS','mpsConfig':{"
	                                        "'defaultPinnedDeviceMemoryLimit':'lots'}}")),
	     "config[1]: sharing.mpsConfig.defaultPinnedDeviceMemoryLimit is not a quantity"},
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            "{'strategy':'MPS','mpsConfig':{"
	                            "'defaultPinnedDeviceMemoryLimit':'512Ki'}}")),
	     "defaultPinnedDeviceMemoryLimit is under 1Mi (the driver refuses it)"},
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            "{'strategy':'MPS','mpsConfig':{"
	                            "'defaultPerDevicePinnedMemoryLimit':['10Gi']}}")),
	     "defaultPerDevicePinnedMemoryLimit is not a map"},
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            "{'strategy':'MPS','mpsConfig':{"
	                            "'defaultPerDevicePinnedMemoryLimit':{'GPU-1':true}}}")),
	     "defaultPerDevicePinnedMemoryLimit[GPU-1] is not a quantity (not a string)"},
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            "{'strategy':'MPS','mpsConfig':{"
	                            "'defaultPerDevicePinnedMemoryLimit':{'GPU-1':10}}}")),
	     "defaultPerDevicePinnedMemoryLimit[GPU-1] is under 1Mi"},
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            "{'strategy':'MPS','mpsConfig':{"
	                            "'defaultPinnedDeviceMemoryLimit':-10737418240}}")),
	     "defaultPinnedDeviceMemoryLimit is not a quantity: \"-10737418240\" is negative"},
	    /* an escaped tab is not white space to the driver (it trims the raw JSON text) */
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            "{'strategy':'MPS','mpsConfig':{"
	                            "'defaultPinnedDeviceMemoryLimit':'\\t10Gi'}}")),
	     "defaultPinnedDeviceMemoryLimit is not a quantity"},
	    {CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig",
	                     "{'strategy':'MPS','mpsConfig':{"
	                     "'defaultPerDevicePinnedMemoryLimit':{'0':' \xe2\x80\x80 '}}}")),
	     "defaultPerDevicePinnedMemoryLimit[0] is not a quantity"},
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            "{'strategy':'MPS','timeSlicingConfig':{}}")),
	     "sharing.timeSlicingConfig with strategy MPS"},
	    {CLAIM_ALLOC("gpu", CFG("FromClaim", "", "MigDeviceConfig",
	                            "{'strategy':'TimeSlicing','mpsConfig':{}}")),
	     "sharing.mpsConfig with strategy TimeSlicing"},
	    {"{'metadata':{'name':'c'},'spec':{'devices':{'config':{}}}}",
	     "ResourceClaim c: spec.devices.config is not a list of at most 64"},
	    /* a malformed config of ours is refused even when no result of the claim uses it */
	    {"{'metadata':{'name':'c'},'spec':{'devices':{'config':[" CFG(
	         "", "'gpu'", "GpuConfig", "{'strategy':'timeslicing'}") "]}}}",
	     "spec.devices.config[0]: sharing.strategy \"timeslicing\" is not"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		dra_fixture_refused(1, rows[i].json, rows[i].err, i);
}

/* The store's view: a claim time-sliced by its config (test/data/dra/claim-timesliced.json,
 * the DeviceClass's config copied into the allocation) holds gpu-1 of gpu-dra-0 whole, shared
 * by its 3 pods; mine for a pod in its reservedFor or naming it, not for the gauges. The MPS
 * claim (claim-mps.json: the claim's config naming its request, pinned 10Gi) likewise. */
static void store_shared_view(void **state)
{
	(void)state;
	static const char *const files[] = {"dra/slice-gpu-dra-0.json", "dra/claim-timesliced.json",
	                                    "dra/claim-mps.json"};
	struct dra_store *s = dra_fixture_store(files, sizeof(files) / sizeof(files[0]));
	struct dra_pod_refs refs = {.any = 1, .n = 1};
	struct dra_view *v;

	assert_int_equal(dra_store_view(s, "gpu-dra-0", NULL, NULL, NULL, &v), 0);
	assert_int_equal(v->node.n_claims, 2);
	for (size_t i = 0; i < v->node.n_claims; i++) {
		const struct dra_claim_use *c = &v->node.claims[i];
		int mps = strcmp(c->key, "dra/mps-gpu") == 0;

		assert_int_equal(c->whole_n, 1);
		assert_int_equal(c->sharing, mps ? DRA_SHARING_MPS : DRA_SHARING_TIME_SLICING);
		assert_int_equal(c->pinned, mps ? 10 * GI : 0);
		assert_int_equal(c->dev_bytes, H100);
		assert_false(c->mine);
	}
	dra_view_free(v);
	/* a pod of its reservedFor */
	assert_int_equal(
	    dra_store_view(s, "gpu-dra-0", "dra", "b0000000-0000-4000-8000-00000000000a", NULL, &v),
	    0);
	for (size_t i = 0; i < v->node.n_claims; i++)
		assert_int_equal(v->node.claims[i].mine,
		                 strcmp(v->node.claims[i].key, "dra/ts-gpu") == 0);
	dra_view_free(v);
	/* a pod naming the MPS claim, not reserved yet */
	strcpy(refs.names[0], "mps-gpu");
	assert_int_equal(dra_store_view(s, "gpu-dra-0", "dra", "u-new", &refs, &v), 0);
	for (size_t i = 0; i < v->node.n_claims; i++)
		assert_int_equal(v->node.claims[i].mine,
		                 strcmp(v->node.claims[i].key, "dra/mps-gpu") == 0);
	dra_view_free(v);
	dra_store_free(s);
}

/* Per-device pinned limits matched to the device (dra_result_pinned): the NVIDIA driver keys
 * mpsConfig.defaultPerDevicePinnedMemoryLimit by a UUID of the config's devices or an index
 * among them (api/nvidia.com/resource/v1beta1 sharing.go, MpsPerDevicePinnedMemoryLimit
 * .Normalize), the default for devices no key names. */
#define MPS_PER(def, per)                                                                          \
	"{'strategy':'MPS','mpsConfig':{" def "'defaultPerDevicePinnedMemoryLimit':{" per "}}}"
#define DEF10  "'defaultPinnedDeviceMemoryLimit':'10Gi',"
#define UUID_A "GPU-4d6c1f0e-3b2a-4f1c-9e8d-7a6b5c4d3e2f" /* slice-gpu-dra-0.json's gpu-0 */
#define UUID_B "GPU-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d" /* its gpu-1 */
/* A claim allocated gpu-0 and gpu-1 of gpu-dra-0, with configs cfgs */
#define CLAIM_TWO(cfgs)                                                                            \
	"{'metadata':{'name':'c','namespace':'dra'},'status':{'allocation':{'devices':{'results':" \
	"["                                                                                        \
	"{'request':'gpu','driver':'gpu.nvidia.com','pool':'gpu-dra-0','device':'gpu-0'},"         \
	"{'request':'gpu','driver':'gpu.nvidia.com','pool':'gpu-dra-0','device':'gpu-1'}],"        \
	"'config':[" cfgs "]}}}}"

static void pinned_per_device(void **state)
{
	(void)state;
	static const struct {
		const char *what, *json, *uuid;
		int kind;
		uint64_t want;
	} rows[] = {
	    {"the device's UUID names it",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig", MPS_PER(DEF10, "'" UUID_A "':'20Gi'"))),
	     UUID_A, DRA_CFG_GPU, 20 * GI},
	    {"another UUID: the default",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig", MPS_PER(DEF10, "'" UUID_B "':'20Gi'"))),
	     UUID_A, DRA_CFG_GPU, 10 * GI},
	    {"another UUID and no default: not pinned",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig", MPS_PER("", "'" UUID_B "':'20Gi'"))),
	     UUID_A, DRA_CFG_GPU, 0},
	    {"its UUID and no default: pinned",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig", MPS_PER("", "'" UUID_A "':'20Gi'"))),
	     UUID_A, DRA_CFG_GPU, 20 * GI},
	    {"the device's UUID unknown: the largest",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig", MPS_PER(DEF10, "'" UUID_B "':'20Gi'"))),
	     "", DRA_CFG_GPU, 20 * GI},
	    {"index 0 of a claim of one device: its own",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig", MPS_PER(DEF10, "'0':'5Gi'"))),
	     UUID_A, DRA_CFG_GPU, 5 * GI},
	    {"index 0 of a claim of one device, its UUID unknown: still its own",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig", MPS_PER(DEF10, "'0':'5Gi'"))), "",
	     DRA_CFG_GPU, 5 * GI},
	    {"index 0 of a claim of two devices: not matched, the largest",
	     CLAIM_TWO(CFG("FromClaim", "", "GpuConfig", MPS_PER(DEF10, "'0':'20Gi'"))), UUID_B,
	     DRA_CFG_GPU, 20 * GI},
	    {"index 1 of two under the default: not matched, the default is the largest",
	     CLAIM_TWO(CFG("FromClaim", "", "GpuConfig", MPS_PER(DEF10, "'1':'5Gi'"))), UUID_A,
	     DRA_CFG_GPU, 10 * GI},
	    {"a MIG device's UUID under MigDeviceConfig",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "MigDeviceConfig",
	                     MPS_PER("", "'MIG-1b2c3d4e-0000-4000-8000-000000000001':'3Gi'"))),
	     "MIG-1b2c3d4e-0000-4000-8000-000000000001", DRA_CFG_MIG, 3 * GI},
	    {"time-slicing: no pinned limit",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig", TS)), UUID_A, DRA_CFG_GPU, 0},
	    /* JSON numbers are bytes here too (pinned_quantity_of), as the driver takes them */
	    {"a default written as a JSON number, no key names the device",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            MPS_PER("'defaultPinnedDeviceMemoryLimit':10737418240,",
	                                    "'" UUID_B "':'20Gi'"))),
	     UUID_A, DRA_CFG_GPU, 10 * GI},
	    {"the device's UUID names a JSON number",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            MPS_PER(DEF10, "'" UUID_A "':21474836480"))),
	     UUID_A, DRA_CFG_GPU, 20 * GI},
	    {"index 0 of a claim of one device names a JSON number",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig", MPS_PER(DEF10, "'0':5368709120"))),
	     UUID_A, DRA_CFG_GPU, 5 * GI},
	    /* white space around a quantity is dropped, as resource.Quantity's UnmarshalJSON
	     * drops it (strings.TrimSpace): the space, U+00A0 and U+3000 written raw in UTF-8 */
	    {"spaces around the default, the device's UUID names no limit",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            MPS_PER("'defaultPinnedDeviceMemoryLimit':'  10Gi ',",
	                                    "'" UUID_B "':'20Gi'"))),
	     UUID_A, DRA_CFG_GPU, 10 * GI},
	    /* past what the guard reads, taken by the driver: no limit (the whole device), not an
	     * unreadable claim that goes uncounted */
	    {"a default of 70 characters: no limit",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            MPS_PER("'defaultPinnedDeviceMemoryLimit':'"
	                                    "000000000000000000000000000000000000000000000000000000"
	                                    "000000000000010Gi',",
	                                    "'" UUID_B "':'20Gi'"))),
	     UUID_A, DRA_CFG_GPU, 0},
	    {"a default of 1e20 bytes (a JSON number): no limit",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            MPS_PER("'defaultPinnedDeviceMemoryLimit':1e20,",
	                                    "'" UUID_B "':'20Gi'"))),
	     UUID_A, DRA_CFG_GPU, 0},
	    {"the device's own limit of 20Ei: no limit",
	     CLAIM_ALLOC("gpu",
	                 CFG("FromClaim", "", "GpuConfig", MPS_PER(DEF10, "'" UUID_A "':'20Ei'"))),
	     UUID_A, DRA_CFG_GPU, 0},
	    {"Unicode spaces around the device's own limit",
	     CLAIM_ALLOC("gpu", CFG("FromClaim", "", "GpuConfig",
	                            MPS_PER(DEF10, "'" UUID_A "':'\xc2\xa0"
	                                           "20Gi\xe3\x80\x80'"))),
	     UUID_A, DRA_CFG_GPU, 20 * GI},
	};
	struct dra_claim *c = malloc(sizeof(*c));

	assert_non_null(c);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		cJSON *j = fixture_quoted_json(rows[i].json);
		char err[256] = "";

		if (dra_claim_decode(j, NULL, c, err, sizeof(err)) != 0)
			fail_msg("row %zu (%s): %s", i, rows[i].what, err);
		for (size_t k = 0; k < c->n_results; k++) {
			uint64_t got =
			    dra_result_pinned(&c->results[k], rows[i].kind, rows[i].uuid);
			if (got != rows[i].want)
				fail_msg("row %zu (%s), result %zu: pinned %llu, want %llu", i,
				         rows[i].what, k, (unsigned long long)got,
				         (unsigned long long)rows[i].want);
		}
		cJSON_Delete(j);
	}
	free(c);
}

/* The store matches a per-device limit to the device by the slice's uuid attribute: a claim
 * MPS-sharing gpu-0 of gpu-dra-0 (default 10Gi) with a 20Gi limit keyed by gpu-1's UUID gets
 * the default, keyed by gpu-0's the 20Gi (before: the largest, 20Gi, for both). */
static void store_pinned_by_uuid(void **state)
{
	(void)state;
	static const struct {
		const char *key;
		uint64_t want;
	} rows[] = {{UUID_B, 10 * GI}, {UUID_A, 20 * GI}};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		static const char *const files[] = {"dra/slice-gpu-dra-0.json"};
		struct dra_store *s = dra_fixture_store(files, 1);
		struct dra_view *v;
		char text[1024], err[256];

		snprintf(
		    text, sizeof(text),
		    "{'metadata':{'name':'c','namespace':'dra'},'status':{'allocation':{'devices':"
		    "{'results':[{'request':'gpu','driver':'gpu.nvidia.com','pool':'gpu-dra-0',"
		    "'device':'gpu-0'}],'config':[" CFG("FromClaim", "", "GpuConfig",
		                                        MPS_PER(DEF10, "'%s':'20Gi'")) "]}}}}",
		    rows[i].key);
		cJSON *j = fixture_quoted_json(text);
		if (dra_store_apply_claim(s, WATCH_ADDED, j, err, sizeof(err)) != 0)
			fail_msg("%s", err);
		cJSON_Delete(j);
		assert_int_equal(dra_store_view(s, "gpu-dra-0", NULL, NULL, NULL, &v), 0);
		assert_int_equal(v->node.n_claims, 1);
		assert_int_equal(v->node.claims[0].sharing, DRA_SHARING_MPS);
		if (v->node.claims[0].pinned != rows[i].want)
			fail_msg("key %s: pinned %llu, want %llu", rows[i].key,
			         (unsigned long long)v->node.claims[0].pinned,
			         (unsigned long long)rows[i].want);
		dra_view_free(v);
		dra_store_free(s);
	}
}

/* A claim holding two devices of gpu-dra-0 whole, one MPS-pinned by a config naming its request
 * and one no config names (the driver time-slices it, unpinned): its pods share both, so the
 * claim is time-sliced with no pinned limit, whichever result comes first. */
#define TWO_DEVICES(r0, r1)                                                                        \
	"{'metadata':{'name':'two','namespace':'dra','uid':'c2'},'spec':{'devices':{'requests':["  \
	"{'name':'a'},{'name':'b'}]}},'status':{'allocation':{'devices':{'results':["              \
	"{'request':'" r0 "','driver':'gpu.nvidia.com','pool':'gpu-dra-0','device':'gpu-0'},"      \
	"{'request':'" r1 "','driver':'gpu.nvidia.com','pool':'gpu-dra-0','device':'gpu-1'}],"     \
	"'config':[" CFG("FromClaim", "'a'", "GpuConfig",                                          \
	                 MPS10) "]}},"                                                             \
	                        "'reservedFor':[{'resource':'pods','name':'p0','uid':'p0'},"       \
	                        "{'resource':'pods','name':'p1','uid':'p1'}]}}"

static void store_unconfigured_device(void **state)
{
	(void)state;
	static const char *const claims[] = {TWO_DEVICES("a", "b"), TWO_DEVICES("b", "a")};

	for (size_t i = 0; i < sizeof(claims) / sizeof(claims[0]); i++) {
		struct dra_store *s = dra_store_new(NULL, NULL, NULL);
		cJSON *slice = fixture_json("dra/slice-gpu-dra-0.json");
		cJSON *claim = fixture_quoted_json(claims[i]);
		struct dra_view *v;
		char err[256];

		assert_non_null(s);
		assert_non_null(claim);
		if (dra_store_apply_slice(s, WATCH_ADDED, slice, err, sizeof(err)) != 0 ||
		    dra_store_apply_claim(s, WATCH_ADDED, claim, err, sizeof(err)) != 0)
			fail_msg("claim %zu: %s", i, err);
		assert_int_equal(dra_store_view(s, "gpu-dra-0", NULL, NULL, NULL, &v), 0);
		assert_int_equal(v->node.n_claims, 1);
		assert_int_equal(v->node.claims[0].whole_n, 2);
		if (v->node.claims[0].sharing != DRA_SHARING_TIME_SLICING ||
		    v->node.claims[0].pinned != 0)
			fail_msg(
			    "claim %zu: sharing %d pinned %llu: the unconfigured device is not "
			    "pinned",
			    i, v->node.claims[0].sharing,
			    (unsigned long long)v->node.claims[0].pinned);
		dra_view_free(v);
		cJSON_Delete(slice);
		cJSON_Delete(claim);
		dra_store_free(s);
	}
}

/* ---- placement: the shared rule among a claim's pods ---- */

static const struct placement_policy enforce = {0.9, 0.8, POLICY_ENFORCE, 0, 1};

/* vLLM's --gpu-memory-utilization as a DRA container's figure (a share of one device) */
#define VLLM(p)                                                                                    \
	{                                                                                          \
		.whole = 1, .ppm = (p)                                                             \
	}
#define LIMIT(b)                                                                                   \
	{                                                                                          \
		.whole = 1, .bytes = (b)                                                           \
	}
#define NO_FIGURE                                                                                  \
	{                                                                                          \
		0                                                                                  \
	}
#define MAX_OTHERS 3

struct shared_row {
	const char *what;
	uint8_t sharing;
	uint64_t pinned;
	uint8_t mine; /* the pod names the claim, not in its reservedFor yet */
	struct demand_share pod;
	size_t n_others;                        /* other pods in the claim's reservedFor */
	struct demand_share others[MAX_OTHERS]; /* their figures (NO_FIGURE: none) */
	int visible[MAX_OTHERS];                /* shown on the node (with a figure) */
	int allowed;
	const char *reason;
	const char *words; /* in the message; NULL: not checked */
};

/* Claim dra/c holding the node's one H100 whole, shared by its config; its pods set apart. */
static struct dra_claim_use shared_claim(uint8_t sharing, uint64_t pinned)
{
	return (struct dra_claim_use){.key = "dra/c",
	                              .uid = "cu",
	                              .whole_n = 1,
	                              .whole_bytes = H100,
	                              .sharing = sharing,
	                              .pinned = pinned,
	                              .dev_bytes = H100};
}

static void placement_shared_device(void **state)
{
	(void)state;
	const struct shared_row rows[] = {
	    /* issue 21: three vLLM pods at 0.9 on one claim's time-sliced H100 */
	    {"vLLM 0.9 alone on the time-sliced device: as a device held whole",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     VLLM(900000),
	     0,
	     {NO_FIGURE},
	     {0},
	     1,
	     "ExclusiveCards",
	     NULL},
	    {"a second vLLM 0.9 beside the first: 0.9 of a shared device never fits (as on a "
	     "time-sliced card)",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     VLLM(900000),
	     1,
	     {VLLM(900000)},
	     {1},
	     0,
	     "NeverFits",
	     "claim dra/c's time-sliced device): it declares 71.7Gi"},
	    {"a third beside both",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     VLLM(900000),
	     2,
	     {VLLM(900000), VLLM(900000)},
	     {1, 1},
	     0,
	     "NeverFits",
	     "its figure: vllm --gpu-memory-utilization 0.9"},
	    {"vLLM 0.5 beside vLLM 0.5: the whole device, over 90 percent",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     VLLM(500000),
	     1,
	     {VLLM(500000)},
	     {1},
	     0,
	     "OverThreshold",
	     "already there: dra/p0 39.8Gi"},
	    {"vLLM 0.4 beside vLLM 0.4: fits",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     VLLM(400000),
	     1,
	     {VLLM(400000)},
	     {1},
	     1,
	     NULL,
	     NULL},
	    /* GPU_MEMORY_LIMIT 30Gi pods on the time-sliced 80GB device (limit 71.7Gi) */
	    {"30Gi alone",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     LIMIT(30 * GI),
	     0,
	     {NO_FIGURE},
	     {0},
	     1,
	     NULL,
	     NULL},
	    {"30Gi beside 30Gi: 60Gi fits",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     LIMIT(30 * GI),
	     1,
	     {LIMIT(30 * GI)},
	     {1},
	     1,
	     NULL,
	     NULL},
	    {"30Gi beside two: 90Gi refused",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     LIMIT(30 * GI),
	     2,
	     {LIMIT(30 * GI), LIMIT(30 * GI)},
	     {1, 1},
	     0,
	     "OverThreshold",
	     "already there: dra/p0"},
	    /* undeclared */
	    {"no figure beside a 10Gi pod: refused, saying how to declare",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     NO_FIGURE,
	     1,
	     {LIMIT(10 * GI)},
	     {1},
	     0,
	     "UndeclaredOnSharedCard",
	     "Declare what it needs in the containers naming the claim"},
	    {"no figure alone: admitted, the device is its",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     NO_FIGURE,
	     0,
	     {NO_FIGURE},
	     {0},
	     1,
	     "SoleConsumer",
	     NULL},
	    {"10Gi beside a pod with no figure seen: the whole device is taken",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     0,
	     LIMIT(10 * GI),
	     1,
	     {NO_FIGURE},
	     {0},
	     0,
	     "OverThreshold",
	     "1 pod(s) with no figure seen"},
	    {"no figure beside another under MPS without a pinned limit: refused",
	     DRA_SHARING_MPS,
	     0,
	     0,
	     NO_FIGURE,
	     1,
	     {LIMIT(10 * GI)},
	     {1},
	     0,
	     "UndeclaredOnSharedCard",
	     "(MPS, the claim's config)"},
	    /* MPS, defaultPinnedDeviceMemoryLimit 10Gi: each client within 9Gi */
	    {"MPS pinned 10Gi: a 12Gi client can never fit, even alone",
	     DRA_SHARING_MPS,
	     10 * GI,
	     0,
	     LIMIT(12 * GI),
	     0,
	     {NO_FIGURE},
	     {0},
	     0,
	     "NeverFits",
	     "per MPS client"},
	    {"MPS pinned 10Gi: an 8Gi client alone",
	     DRA_SHARING_MPS,
	     10 * GI,
	     0,
	     LIMIT(8 * GI),
	     0,
	     {NO_FIGURE},
	     {0},
	     1,
	     NULL,
	     NULL},
	    {"MPS pinned 10Gi: an 8Gi client beside one with no figure (10Gi)",
	     DRA_SHARING_MPS,
	     10 * GI,
	     0,
	     LIMIT(8 * GI),
	     1,
	     {NO_FIGURE},
	     {0},
	     1,
	     NULL,
	     NULL},
	    {"MPS pinned 10Gi: no figure beside 8Gi clients counts the limit",
	     DRA_SHARING_MPS,
	     10 * GI,
	     0,
	     NO_FIGURE,
	     2,
	     {LIMIT(8 * GI), LIMIT(8 * GI)},
	     {1, 1},
	     1,
	     NULL,
	     NULL},
	    {"MPS pinned 10Gi: vLLM 0.5 is half of the pinned limit",
	     DRA_SHARING_MPS,
	     10 * GI,
	     0,
	     VLLM(500000),
	     1,
	     {VLLM(500000)},
	     {1},
	     1,
	     NULL,
	     NULL},
	    /* a pod naming the claim before the scheduler reserves it (a CREATE with nodeName,
	     * the extender's filter) */
	    {"vLLM 0.9 naming the claim another vLLM 0.9 holds",
	     DRA_SHARING_TIME_SLICING,
	     0,
	     1,
	     VLLM(900000),
	     1,
	     {VLLM(900000)},
	     {1},
	     0,
	     "NeverFits",
	     NULL},
	    /* no config: the claim's pods still share its device (DRA gives each pod the claim
	     * is reserved for its devices; the NVIDIA driver time-slices a device no config
	     * names, DefaultGpuConfig), so they are judged against each other alike */
	    {"no config: a second vLLM 0.9 beside the first never fits",
	     DRA_SHARING_NONE,
	     0,
	     0,
	     VLLM(900000),
	     1,
	     {VLLM(900000)},
	     {1},
	     0,
	     "NeverFits",
	     "claim dra/c's shared device"},
	    {"no config: no figure beside another, refused",
	     DRA_SHARING_NONE,
	     0,
	     0,
	     NO_FIGURE,
	     1,
	     {LIMIT(10 * GI)},
	     {1},
	     0,
	     "UndeclaredOnSharedCard",
	     "no sharing config: every pod the claim is reserved for uses its device"},
	    {"no config: 30Gi beside 30Gi fits",
	     DRA_SHARING_NONE,
	     0,
	     0,
	     LIMIT(30 * GI),
	     1,
	     {LIMIT(30 * GI)},
	     {1},
	     1,
	     "ExclusiveCards",
	     NULL},
	    {"no config, alone: as a device held whole (no SoleConsumer)",
	     DRA_SHARING_NONE,
	     0,
	     0,
	     NO_FIGURE,
	     0,
	     {NO_FIGURE},
	     {0},
	     1,
	     "ExclusiveCards",
	     NULL},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct shared_row *r = &rows[i];
		char uids[MAX_OTHERS + 1][DRA_UID_MAX];
		char keys[MAX_OTHERS][32];
		struct placement_item items[MAX_OTHERS];
		size_t n_items = 0, n_uids = 0;
		struct capacity cap = dra_fixture_h100s(1);
		struct dra_claim_use c = shared_claim(r->sharing, r->pinned);
		struct dra_node dn = {.gpus = dra_fixture_one_h100(), .n_claims = 1, .claims = &c};
		struct placement_node node = {.name = "gpu-dra-0", .cap = &cap, .dra = &dn};
		struct dra_pod dp = {.any = 1};
		struct demand d;
		struct placement_pod pod = {
		    .name = "dra/me", .key = "dra/me", .uid = "me", .demand = &d, .dra = &dp};
		struct placement_result res;

		c.mine = r->mine;
		for (size_t k = 0; k < r->n_others; k++) {
			snprintf(uids[n_uids++], DRA_UID_MAX, "p%zu", k);
			snprintf(keys[k], sizeof(keys[k]), "dra/p%zu", k);
			if (!r->visible[k])
				continue;
			items[n_items] = (struct placement_item){.key = keys[k], .uid = uids[k]};
			placement_item_count(&items[n_items], &(const struct placement_count){
			                                          .status = DEMAND_NOT_GPU,
			                                          .dra_figs = &r->others[k],
			                                          .n_dra_figs = 1});
			n_items++;
		}
		if (!r->mine)
			snprintf(uids[n_uids++], DRA_UID_MAX, "me");
		c.n_pods = n_uids;
		c.pods = (const char(*)[DRA_UID_MAX])uids;
		node.pods = items;
		node.n_pods = n_items;
		memset(&d, 0, sizeof(d));
		if (r->pod.bytes > 0 || r->pod.ppm > 0) {
			d.dra_figs[0] = r->pod;
			d.n_dra_figs = 1;
			snprintf(d.dra_words, sizeof(d.dra_words), "%s (container main)",
			         r->pod.ppm ? "vllm --gpu-memory-utilization 0.9"
			                    : "GPU_MEMORY_LIMIT");
		}
		placement_dra_demand(&d);
		assert_int_equal(placement_decide(&node, &pod, &enforce, 0, &res), 0);
		if (res.decision.allowed != r->allowed ||
		    (r->reason != NULL && strcmp(res.decision.reason, r->reason) != 0) ||
		    (r->words != NULL && strstr(res.decision.message, r->words) == NULL))
			fail_msg("row %zu (%s): allowed %d %s: %s", i, r->what,
			         res.decision.allowed, res.decision.reason, res.decision.message);
		/* the node's sums are unchanged: the device stays the claim's */
		assert_int_equal(placement_dra_bytes(&node, NULL), H100);
		/* the extender's verdict is the same, without words */
		struct placement_policy quiet = enforce;
		quiet.verdict_only = 1;
		assert_int_equal(placement_decide(&node, &pod, &quiet, 0, &res), 0);
		if (res.decision.allowed != r->allowed)
			fail_msg("row %zu (%s): verdict only: allowed %d", i, r->what,
			         res.decision.allowed);
	}
}

/* Warn mode: a pod the shared rule refuses is admitted with the refusal as its warning. */
static void placement_shared_warn(void **state)
{
	(void)state;
	static const char pods[2][DRA_UID_MAX] = {"pa", "me"};
	static const struct demand_share fig = VLLM(900000);
	struct capacity cap = dra_fixture_h100s(1);
	struct dra_claim_use c = shared_claim(DRA_SHARING_TIME_SLICING, 0);
	struct dra_node dn = {.gpus = dra_fixture_one_h100(), .n_claims = 1, .claims = &c};
	struct placement_item it = {.key = "dra/pa", .uid = "pa"};
	struct placement_node node = {
	    .name = "gpu-dra-0", .cap = &cap, .pods = &it, .n_pods = 1, .dra = &dn};
	struct dra_pod dp = {.any = 1};
	struct demand d;
	struct placement_pod pod = {
	    .name = "dra/me", .key = "dra/me", .uid = "me", .demand = &d, .dra = &dp};
	struct placement_policy warn = enforce;
	struct placement_result res;

	c.n_pods = 2;
	c.pods = pods;
	warn.mode = POLICY_WARN;
	placement_item_count(&it, &(const struct placement_count){
	                              .status = DEMAND_NOT_GPU, .dra_figs = &fig, .n_dra_figs = 1});
	memset(&d, 0, sizeof(d));
	d.dra_figs[0] = fig;
	d.n_dra_figs = 1;
	placement_dra_demand(&d);
	assert_int_equal(placement_decide(&node, &pod, &warn, 0, &res), 0);
	assert_true(res.decision.allowed);
	assert_int_equal(res.decision.verdict, POLICY_WARN_ONLY);
	assert_non_null(strstr(res.decision.message, "claim dra/c's time-sliced device"));
}

/* Issue 21: pods created with nodeName naming one allocated claim not yet reserved for them
 * (the resourceclaim controller adds them to reservedFor after the API server stores them).
 * Each one admitted leaves a reservation carrying the claim's uid (placement_result
 * .reserve_claim, item.dra_claim), and the next pod naming the claim counts it among the
 * claim's pods: before, each was judged as the device's sole consumer, so two vLLM 0.9 pods
 * created at once were both admitted on one time-sliced H100. */
struct pending_row {
	const char *what;
	uint8_t sharing;
	uint64_t pinned;
	struct demand_share pod;
	const char *res_claim;   /* the reservation's dra_claim */
	uint64_t res_expires;    /* its expiry (now is 10) */
	struct demand_share vis; /* its pod shown on the node with this figure (NO_FIGURE: not) */
	int allowed;
	const char *reason;
};

static void placement_pending_claim(void **state)
{
	(void)state;
	const struct pending_row rows[] = {
	    {"vLLM 0.9 beside a pending pod of the claim: never fits", DRA_SHARING_TIME_SLICING, 0,
	     VLLM(900000), "cu", 0, NO_FIGURE, 0, NULL},
	    {"30Gi beside a pending pod with no figure seen: the whole device",
	     DRA_SHARING_TIME_SLICING, 0, LIMIT(30 * GI), "cu", 0, NO_FIGURE, 0, "OverThreshold"},
	    {"no figure beside a pending pod: refused", DRA_SHARING_TIME_SLICING, 0, NO_FIGURE,
	     "cu", 0, NO_FIGURE, 0, "UndeclaredOnSharedCard"},
	    {"no config: 30Gi beside a pending pod, refused", DRA_SHARING_NONE, 0, LIMIT(30 * GI),
	     "cu", 0, NO_FIGURE, 0, "OverThreshold"},
	    {"30Gi beside a pending pod shown with 30Gi: 60Gi fits", DRA_SHARING_TIME_SLICING, 0,
	     LIMIT(30 * GI), "cu", 0, LIMIT(30 * GI), 1, NULL},
	    {"MPS pinned 10Gi: 8Gi beside a pending pod (10Gi) fits", DRA_SHARING_MPS, 10 * GI,
	     LIMIT(8 * GI), "cu", 0, NO_FIGURE, 1, NULL},
	    {"control: a reservation of another claim", DRA_SHARING_TIME_SLICING, 0, VLLM(900000),
	     "other", 0, NO_FIGURE, 1, "ExclusiveCards"},
	    {"control: a reservation without a claim", DRA_SHARING_TIME_SLICING, 0, VLLM(900000),
	     NULL, 0, NO_FIGURE, 1, "ExclusiveCards"},
	    {"control: an expired reservation", DRA_SHARING_TIME_SLICING, 0, VLLM(900000), "cu", 5,
	     NO_FIGURE, 1, "ExclusiveCards"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct pending_row *r = &rows[i];
		struct capacity cap = dra_fixture_h100s(1);
		struct dra_claim_use c = shared_claim(r->sharing, r->pinned);
		struct dra_node dn = {.gpus = dra_fixture_one_h100(), .n_claims = 1, .claims = &c};
		struct placement_item resv = {.key = "dra/a",
		                              .uid = "a",
		                              .expires_ms = r->res_expires,
		                              .dra_claim = r->res_claim};
		struct placement_item vis = {.key = "dra/a", .uid = "a"};
		struct placement_node node = {.name = "gpu-dra-0",
		                              .cap = &cap,
		                              .reserved = &resv,
		                              .n_reserved = 1,
		                              .dra = &dn};
		struct dra_pod dp = {.any = 1, .n_here = 1};
		struct demand d;
		struct placement_pod pod = {
		    .name = "dra/me", .key = "dra/me", .uid = "me", .demand = &d, .dra = &dp};
		struct placement_result res;

		c.mine = 1; /* it names the claim; reservedFor is empty */
		if (r->vis.bytes > 0 || r->vis.ppm > 0) {
			placement_item_count(
			    &vis, &(const struct placement_count){.status = DEMAND_NOT_GPU,
			                                          .dra_figs = &r->vis,
			                                          .n_dra_figs = 1});
			node.pods = &vis;
			node.n_pods = 1;
		}
		memset(&d, 0, sizeof(d));
		if (r->pod.bytes > 0 || r->pod.ppm > 0) {
			d.dra_figs[0] = r->pod;
			d.n_dra_figs = 1;
			snprintf(d.dra_words, sizeof(d.dra_words),
			         "GPU_MEMORY_LIMIT (container main)");
		}
		placement_dra_demand(&d);
		assert_int_equal(placement_decide(&node, &pod, &enforce, 10, &res), 0);
		if (res.decision.allowed != r->allowed ||
		    (r->reason != NULL && strcmp(res.decision.reason, r->reason) != 0))
			fail_msg("row %zu (%s): allowed %d %s: %s", i, r->what,
			         res.decision.allowed, res.decision.reason, res.decision.message);
		/* admitted: its own reservation names the claim too */
		if (r->allowed &&
		    (res.reserve_claim == NULL || strcmp(res.reserve_claim, "cu") != 0))
			fail_msg("row %zu (%s): reserve_claim %s", i, r->what,
			         res.reserve_claim ? res.reserve_claim : "NULL");
	}
}

/* The race end to end through the core: two vLLM 0.9 pods created with nodeName
 * naming the unreserved claim, one after the other under the node's lock: the first is
 * admitted (alone, it holds the device whole) and its reservation names the claim; the second
 * never fits beside it. A pod in the claim's reservedFor (a Binding) reserves no claim. */
static void placement_concurrent_creates(void **state)
{
	(void)state;
	static const struct demand_share fig = VLLM(900000);
	static const char me_uid[1][DRA_UID_MAX] = {"b"};
	struct capacity cap = dra_fixture_h100s(1);
	struct dra_claim_use c = shared_claim(DRA_SHARING_TIME_SLICING, 0);
	struct dra_node dn = {.gpus = dra_fixture_one_h100(), .n_claims = 1, .claims = &c};
	struct placement_node node = {.name = "gpu-dra-0", .cap = &cap, .dra = &dn};
	struct dra_pod dp = {.any = 1, .n_here = 1};
	struct demand d;
	struct placement_pod a = {
	    .name = "dra/a", .key = "dra/a", .uid = "a", .demand = &d, .dra = &dp};
	struct placement_pod b = {
	    .name = "dra/b", .key = "dra/b", .uid = "b", .demand = &d, .dra = &dp};
	struct placement_result res;

	c.mine = 1;
	memset(&d, 0, sizeof(d));
	d.dra_figs[0] = fig;
	d.n_dra_figs = 1;
	snprintf(d.dra_words, sizeof(d.dra_words), "vllm --gpu-memory-utilization 0.9");
	placement_dra_demand(&d);
	assert_int_equal(placement_decide(&node, &a, &enforce, 0, &res), 0);
	assert_true(res.decision.allowed);
	assert_true(res.reserve);
	assert_string_equal(res.reserve_claim, "cu");
	struct placement_item ra = {
	    .key = "dra/a", .uid = "a", .bytes = res.reserve_bytes, .dra_claim = res.reserve_claim};
	node.reserved = &ra;
	node.n_reserved = 1;
	assert_int_equal(placement_decide(&node, &b, &enforce, 0, &res), 0);
	if (res.decision.allowed)
		fail_msg("the second pod was admitted: %s %s", res.decision.reason,
		         res.decision.message);
	assert_non_null(strstr(res.decision.message, "claim dra/c's time-sliced device"));
	/* a pod the claim is reserved for reserves no claim of its own */
	c.pods = me_uid;
	c.n_pods = 1;
	node.n_reserved = 0;
	assert_int_equal(placement_decide(&node, &b, &enforce, 0, &res), 0);
	assert_true(res.decision.allowed);
	assert_null(res.reserve_claim);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(claim_configs),
	    cmocka_unit_test(claim_config_errors),
	    cmocka_unit_test(store_shared_view),
	    cmocka_unit_test(store_unconfigured_device),
	    cmocka_unit_test(placement_shared_device),
	    cmocka_unit_test(placement_shared_warn),
	    cmocka_unit_test(pinned_per_device),
	    cmocka_unit_test(store_pinned_by_uuid),
	    cmocka_unit_test(placement_pending_claim),
	    cmocka_unit_test(placement_concurrent_creates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
