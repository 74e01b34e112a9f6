/*
 * dra: GPUs allocated through Dynamic Resource Allocation (resource.k8s.io/v1), decoded and
 * counted (core box of ARCHITECTURE.md: a demand and capacity source). Pure: no I/O, no locks,
 * no allocation; thread-safe. The store that keeps what the watch follows is cluster/dra.h.
 *
 * What is read (field paths of k8s.io/api resource/v1 types.go, as the v1.37 API server serves
 * them):
 *   ResourceSlice: spec.driver, spec.pool.name, spec.nodeName (a node-local slice; slices with
 *     allNodes / nodeSelector / perDeviceNodeSelection have no node and give no capacity),
 *     spec.devices[].name, .capacity.memory.value (bytes, a quantity), .attributes.type.string
 *     ("gpu" or "mig"; key "type" or "<driver>/type"), .allowMultipleAllocations (KEP-5075),
 *     .consumesCounters (KEP-4815 partitionable devices: marked, not counted as capacity), and
 *     .taints (KEP-5055: marked, still counted). Only devices of our drivers are kept
 *     (gpu.nvidia.com, NVIDIA's kubernetes-sigs/dra-driver-nvidia-gpu, or --dra-driver).
 *   ResourceClaim: metadata.namespace/name/uid, ownerReferences[controller].uid (the pod a
 *     template or the scheduler made it for), annotation
 *     resource.kubernetes.io/extended-resource-claim (KEP-5004: the scheduler's claim for an
 *     extended resource such as nvidia.com/gpu), spec.devices.requests[] (name,
 *     exactly.allocationMode / .count / .capacity.requests.memory; firstAvailable: the largest
 *     of its subrequests), status.allocation.devices.results[] (request, driver, pool, device,
 *     shareID, consumedCapacity.memory, adminAccess), status.reservedFor[] (resource "pods":
 *     their uids), and the device configs (below).
 *   Device configs: status.allocation.devices.config[] when the allocation has them (the
 *     scheduler copies the DeviceClass's configs there, source FromClass, beside the claim's,
 *     FromClaim), else spec.devices.config[]; each {requests[], opaque: {driver, parameters}}.
 *     Read: those whose opaque.driver is one of ours and whose parameters are the NVIDIA
 *     driver's GpuConfig or MigDeviceConfig (apiVersion resource.nvidia.com/<version>; field
 *     names from api/nvidia.com/resource/v1beta1/gpuconfig.go, migconfig.go and sharing.go of
 *     kubernetes-sigs/dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu):
 *     sharing.strategy ("TimeSlicing" or "MPS"), sharing.mpsConfig
 *     .defaultPinnedDeviceMemoryLimit (a quantity) and .defaultPerDevicePinnedMemoryLimit (a map
 *     of device index or UUID to a quantity). Other drivers' configs and other kinds (a
 *     VfioDeviceConfig, a config without apiVersion or kind) are skipped; sharing of ours that
 *     is not an object, an unknown or missing strategy, a mpsConfig beside TimeSlicing or a
 *     timeSlicingConfig beside MPS (the driver refuses both), a pinned limit that is not a
 *     quantity of at least 1Mi (the driver refuses less; a JSON number is one, of bytes, as
 *     resource.Quantity reads it, and white space around a string's quantity is dropped, as
 *     its UnmarshalJSON drops it) is DRA_EINVAL; a limit past what is read (over 64 characters,
 *     or 16Ei or more), which the driver may take, is no limit. Which config applies
 *     to a result is the driver's rule (gpu-kubelet-plugin's device_state.go): the claim's
 *     configs over the class's, a later one over an earlier; one naming the result's request
 *     (or, per the API's doc, its parent request of a "req/sub" result) applies whatever its
 *     kind, one naming no request only to devices of its kind (GpuConfig: GPUs, MigDeviceConfig:
 *     MIG devices), so each result keeps both answers and the store picks by the device's type.
 *     MPS's pinned limit: the default's, and per-device limits matched to the device where the
 *     driver's keys allow it (dra_result_pinned): a key that is the device's UUID (the slice's
 *     attributes.uuid), or "0" in a claim of one device. The driver's index keys are positions
 *     among the config's devices in its own order (its prepared group: GPUs, then MIG
 *     devices), not the devices' index attribute, so for a claim of several devices an index
 *     key is not matched: the largest of the keys and the default is taken for its devices
 *     (with no default, no limit), as when the device's UUID is not known. Not read:
 *     timeSlicingConfig.interval and defaultActiveThreadPercentage (no memory meaning),
 *     multiUser.
 *   Pod: spec.resourceClaims[] (resourceClaimName, resourceClaimTemplateName),
 *     status.resourceClaimStatuses[].resourceClaimName, status.extendedResourceClaimStatus
 *     .resourceClaimName (KEP-5004).
 * Not read: DeviceClasses (their CEL selectors; their configs only as the allocation copies
 * them), admin access results (counted as any allocation: the safe side), binding conditions.
 * KEP-5004: the pod's units its claim serves are told apart by demand.h (requestMappings).
 *
 * Counting rules (dra_result_bytes, dra_request_max_bytes; placement.h applies them per node):
 *   - a result with consumedCapacity.memory (a KEP-5075 share) counts that against the
 *     threshold; any other result holds its whole device (the scheduler gives it to no other
 *     claim): like a device-plugin pod that takes its cards, the device leaves the memory the
 *     threshold guards (placement.h);
 *   - a claim counts once per node, whoever is in its reservedFor (KAI-Scheduler #1930);
 *   - a claim not allocated yet counts what its requests can get at most on a node: per
 *     request count devices (allocationMode All: every device) of the largest memory there,
 *     or count x capacity.requests.memory when the request asks a share;
 *   - a device held whole (with a time-slicing or MPS config, or none: the NVIDIA driver then
 *     time-slices it) is still the claim's alone on the node, but the pods the claim is
 *     reserved for share it: placement.h judges them against each other by docs/sharing.md's
 *     shared rule (dra_claim_use.sharing).
 */
#ifndef GMG_DRA_H
#define GMG_DRA_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

#define DRA_GROUP_VERSION  "resource.k8s.io/v1"
#define DRA_DRIVER_DEFAULT "gpu.nvidia.com"
#define DRA_ANN_EXTENDED   "resource.kubernetes.io/extended-resource-claim"
#define DRA_ANN_POD_CLAIM  "resource.kubernetes.io/pod-claim-name"
#define DRA_CAPACITY_KEY   "memory" /* the NVIDIA driver's capacity name */
#define DRA_MAX_DRIVERS    8        /* --dra-driver names */
#define DRA_DRIVER_MAX     64       /* a DNS subdomain, at most 63 bytes (API validation) */
#define DRA_POOL_MAX       254      /* pool and node names: 253 */
#define DRA_DEVICE_MAX     64       /* a DNS label, 63 */
#define DRA_UID_MAX        64       /* metadata.uid (a UUID is 36) */
#define DRA_POD_CLAIM_MAX                                                                          \
	64                   /* a pod's claim name (spec.resourceClaims[].name): a DNS             \
	                        label, 63 */
#define DRA_NS_MAX       64  /* a namespace, 63 */
#define DRA_NAME_MAX     254 /* an object name, 253 */
#define DRA_SHARE_ID_MAX 40  /* shareID: a UUID, 36 */
/* The v1 API's own caps (resource/v1 types.go): ResourceSliceMaxDevices 128,
 * AllocationResultsMaxSize 32, ResourceClaimReservedForMaxSize 256, DeviceRequestsMaxSize 32.
 * More is refused (DRA_EINVAL), never cut. */
#define DRA_SLICE_DEVICES  128
#define DRA_CLAIM_RESULTS  32
#define DRA_CLAIM_RESERVED 256
#define DRA_CLAIM_REQUESTS 32
/* Device configs: DeviceConfigMaxSize 32 in a claim's spec, 64 in its allocation (the class's
 * and the claim's, AllocationConfigMaxSize). More is refused. */
#define DRA_CLAIM_CONFIGS 64
#define DRA_CONFIG_GROUP  "resource.nvidia.com" /* the NVIDIA driver's config API group */
#define DRA_CONFIG_GPU    "GpuConfig"
#define DRA_CONFIG_MIG    "MigDeviceConfig"
#define DRA_MIN_PINNED    (1024ull * 1024) /* the driver refuses a pinned limit under 1Mi */
#define DRA_PIN_KEYS      4  /* per-device pinned limits keyed by UUID kept per config and kind */
#define DRA_DEV_UUID_MAX  64 /* a device's uuid attribute ("GPU-" or "MIG-" and a UUID: 40) */
#define DRA_POD_CLAIMS    32 /* claims named by one pod; more is refused */
#define DRA_MSG_MAX       256

#define DRA_EINVAL (-1) /* not an object of the kind, or a field of the wrong shape: err says */

enum dra_type {
	DRA_TYPE_OTHER = 0, /* no "type" attribute, or another value */
	DRA_TYPE_GPU = 1,
	DRA_TYPE_MIG = 2,
};

/* How the NVIDIA driver shares a device among the pods and containers of its claim (its
 * GpuConfig or MigDeviceConfig sharing.strategy). */
enum dra_sharing {
	DRA_SHARING_NONE = 0, /* no config of ours, or one without sharing (the driver's default:
	                         time-slicing; placement.h judges the pods alike) */
	DRA_SHARING_TIME_SLICING = 1,
	DRA_SHARING_MPS = 2,
};

/* dra_result.sharing[] and .pinned[]: the config for a GPU device (or an untyped one), and for
 * a MIG device */
#define DRA_CFG_GPU 0
#define DRA_CFG_MIG 1

/* The drivers whose devices are GPUs. n == 0 means DRA_DRIVER_DEFAULT alone. */
struct dra_drivers {
	size_t n;
	char name[DRA_MAX_DRIVERS][DRA_DRIVER_MAX];
};

/* Add the comma-separated driver names of list ("gpu.nvidia.com,gpu.example.com"). 0, or -1
 * with err naming the bad name (empty, over 63 bytes, more than DRA_MAX_DRIVERS). A name
 * already present is not added twice. */
int dra_drivers_add(struct dra_drivers *d, const char *list, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* 1 when driver is one of d's (d NULL or empty: DRA_DRIVER_DEFAULT). */
int dra_driver_ours(const struct dra_drivers *d, const char *driver);

/* One device of a slice. */
struct dra_device {
	char name[DRA_DEVICE_MAX];
	uint64_t memory;  /* capacity "memory", bytes; 0: not published */
	uint8_t type;     /* enum dra_type */
	uint8_t multi;    /* allowMultipleAllocations: shares of it are claimed (KEP-5075) */
	uint8_t counters; /* consumesCounters: a partition of a device (KEP-4815): not capacity */
	uint8_t tainted;  /* taints present (not read further) */
	char uuid[DRA_DEV_UUID_MAX]; /* attributes.uuid (the NVIDIA driver's), "" when absent or
	                                longer (per-device pinned limits: dra_result_pinned) */
};

/* One ResourceSlice, decoded. About 19 KiB: callers put it on the heap. */
struct dra_slice {
	char name[DRA_NAME_MAX];
	char driver[DRA_DRIVER_MAX];
	char pool[DRA_POOL_MAX];
	char node[DRA_POOL_MAX]; /* spec.nodeName, "" when not node-local */
	int ours;                /* the driver is one of ours; else n_devices is 0 */
	size_t n_devices;
	struct dra_device devices[DRA_SLICE_DEVICES];
};

/* Decode a ResourceSlice (borrowed). 0 and *out filled, or DRA_EINVAL with err: not an object,
 * no metadata.name or spec.driver, a name, pool or node too long, more than DRA_SLICE_DEVICES
 * devices, a device without a name, a capacity memory value that is not a quantity. */
int dra_slice_decode(const struct cJSON *obj, const struct dra_drivers *d, struct dra_slice *out,
                     char *err, size_t errlen) __attribute__((warn_unused_result));

/* One allocated device of a claim (status.allocation.devices.results[]). */
struct dra_result {
	char request[DRA_DEVICE_MAX]; /* "gpu", or "gpu/sub" for a firstAvailable subrequest */
	char driver[DRA_DRIVER_MAX];
	char pool[DRA_POOL_MAX];
	char device[DRA_DEVICE_MAX];
	char share_id[DRA_SHARE_ID_MAX]; /* "" when the device is not shared */
	uint64_t consumed;               /* consumedCapacity.memory, bytes, when has_consumed */
	uint8_t has_consumed;
	uint8_t admin; /* adminAccess */
	/* The sharing its device gets from the claim's configs (above), [DRA_CFG_GPU] when the
	 * device is a GPU or untyped, [DRA_CFG_MIG] when a MIG device (the store knows which) */
	uint8_t sharing[2]; /* enum dra_sharing */
	uint64_t
	    pinned[2]; /* MPS: each client's pinned memory limit, bytes, for a device the
	                  per-device limits cannot be matched to (dra_result_pinned); 0: none */
	/* MPS: the applying config's limits, to match to the device (dra_result_pinned) */
	struct dra_pin {
		uint64_t def;      /* defaultPinnedDeviceMemoryLimit, bytes; 0: none */
		uint64_t own;      /* key "0" when the claim has this one result: its device's */
		uint8_t n_keys;    /* UUID keys kept below */
		uint8_t unmatched; /* keys not kept: an index among several devices (the driver's
		                      order is not the API's), or UUIDs past DRA_PIN_KEYS */
		char uuid[DRA_PIN_KEYS][DRA_DEV_UUID_MAX];
		uint64_t bytes[DRA_PIN_KEYS];
	} pin[2];
};

/* One request of the claim's spec, as the most it can get. */
struct dra_request {
	char name[DRA_DEVICE_MAX];
	uint64_t count; /* devices (exactly.count, default 1) */
	uint8_t all;    /* allocationMode All */
	uint64_t share; /* capacity.requests.memory per device, bytes; 0: whole devices */
	uint8_t n_seen; /* decoding's own: subrequests read */
};

/* One ResourceClaim, decoded. About 120 KiB: callers put it on the heap. */
struct dra_claim {
	char ns[DRA_NS_MAX];
	char name[DRA_NAME_MAX];
	char uid[DRA_UID_MAX];
	char owner[DRA_UID_MAX]; /* the controller ownerReference's uid ("" when none) */
	uint8_t extended;        /* annotation DRA_ANN_EXTENDED (KEP-5004) */
	uint8_t allocated;       /* status.allocation present */
	/* annotation DRA_ANN_POD_CLAIM: the pod claim the resourceclaim controller generated it
	 * for (from a template), "" when none (or longer than a pod claim's name: none) */
	char pod_claim[DRA_POD_CLAIM_MAX];
	size_t n_requests;
	struct dra_request requests[DRA_CLAIM_REQUESTS];
	size_t n_results; /* of our drivers only */
	struct dra_result results[DRA_CLAIM_RESULTS];
	size_t n_reserved; /* reservedFor entries that are pods */
	char reserved[DRA_CLAIM_RESERVED][DRA_UID_MAX];
	char reserved_names[DRA_CLAIM_RESERVED][DRA_NAME_MAX]; /* ... and their names */
};

/* Decode a ResourceClaim (borrowed). 0 and *out filled, or DRA_EINVAL with err: not an object,
 * no metadata.name, a string too long for its field, more entries than the caps above, a
 * count that is not a positive integer, a quantity that does not parse, a config of ours whose
 * sharing is malformed (above). */
int dra_claim_decode(const struct cJSON *obj, const struct dra_drivers *d, struct dra_claim *out,
                     char *err, size_t errlen) __attribute__((warn_unused_result));

/* The claims a pod names: resourceClaimName (direct), the generated names of
 * status.resourceClaimStatuses, the KEP-5004 claim of status.extendedResourceClaimStatus. */
struct dra_pod_refs {
	int any;            /* spec.resourceClaims non-empty, or an extended-resource claim */
	size_t n;           /* names known */
	size_t n_templates; /* template claims whose generated name the status does not show yet */
	char names[DRA_POD_CLAIMS][DRA_NAME_MAX];
	char extended[DRA_NAME_MAX]; /* the KEP-5004 claim's name, "" when none */
};

/* Read the claims pod (borrowed) names. 0, or DRA_EINVAL with err for a name too long or more
 * than DRA_POD_CLAIMS entries. A pod without claims gives any 0. */
int dra_pod_refs(const struct cJSON *pod, struct dra_pod_refs *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* What a result counts, given its device's memory (0 when the device is not known): its
 * consumedCapacity.memory when present, else the device's memory. */
uint64_t dra_result_bytes(const struct dra_result *r, uint64_t device_memory);

/* MPS's pinned limit of result r's device of config kind k (DRA_CFG_GPU or DRA_CFG_MIG) whose
 * uuid attribute is uuid (NULL or "": unknown), bytes; 0: no limit (not MPS, or none set).
 * The driver's rule (MpsPerDevicePinnedMemoryLimit.Normalize: a key is a UUID of the config's
 * devices, else an index among them; the default for devices no key names): a key equal to
 * uuid; else key "0" of a claim of one device; else, when every key is a UUID kept and uuid is
 * known (no key names it), the default; else (an index among several devices, a UUID past
 * DRA_PIN_KEYS, uuid unknown) r->pinned[k], the largest of the default and the keys'. Pure. */
uint64_t dra_result_pinned(const struct dra_result *r, int k, const char *uuid);

/* The GPUs a node offers through DRA (of our drivers, node-local, not partitions). */
struct dra_gpus {
	uint64_t n;         /* devices */
	uint64_t n_mig;     /* of which MIG devices */
	uint64_t bytes;     /* their memory, summed (saturating) */
	uint64_t max_bytes; /* the largest device */
	uint64_t no_memory; /* devices publishing no memory capacity (not in bytes) */
};

/* The most n requests r (a claim not allocated) can take on a node offering g: per request,
 * all devices (allocationMode All) or min(count, g->n) of them, each g->max_bytes, or its
 * memory share when smaller; at most g->bytes in all. Saturating. 0 when g has no device. */
uint64_t dra_request_max_bytes(const struct dra_request *r, size_t n, const struct dra_gpus *g);

/*
 * The placement core's DRA input (placement.h): a node's claims, each counted once, and the
 * pod being placed. Filled by the store (cluster/dra.h), or by hand in tests; borrowed by the
 * core.
 */
struct dra_claim_use {
	char key[DRA_NS_MAX + DRA_NAME_MAX]; /* "ns/name", for messages */
	char uid[DRA_UID_MAX];
	char owner[DRA_UID_MAX]; /* controller ownerReference uid, "" when none */
	uint64_t bytes;          /* its shares on this node: consumedCapacity.memory summed */
	uint64_t whole_n;        /* whole devices it holds on this node (results without
	                            consumedCapacity, or consuming all the device's memory:
	                            nothing else can be allocated them) */
	uint64_t whole_bytes;    /* ... and their memory */
	uint8_t extended;        /* KEP-5004 claim */
	uint8_t shared;          /* a result with a shareID (KEP-5075) */
	size_t n_pods;           /* reservedFor pods */
	const char (*pods)[DRA_UID_MAX];
	/* How its whole devices on the node are shared (dra_result.sharing): their sharing when
	 * they all have the same, else TIME_SLICING (one no config names is time-sliced, not
	 * pinned); NONE: no config of ours says
	 * (the pods it is reserved for still share its devices, and are judged against each
	 * other as on a time-sliced one: the NVIDIA driver time-slices a device no config names,
	 * its DefaultGpuConfig). */
	uint8_t sharing;    /* enum dra_sharing */
	uint64_t pinned;    /* MPS: each client's pinned limit, bytes (the largest of its whole
	                       devices'); 0: none, or one of them not pinned */
	uint64_t dev_bytes; /* the smallest memory of its whole devices; 0: not published (the
	                       node's per-GPU memory is taken) */
	uint8_t mine;       /* the pod being placed names it (by name, or as its owner or in its
	                       reservedFor: dra_store_view's pod) */
};

struct dra_node {
	struct dra_gpus gpus; /* what the node offers through DRA */
	size_t n_claims;      /* claims allocated with a device on the node */
	const struct dra_claim_use *claims;
};

/* The claims of the pod being placed that are not allocated yet (a CREATE with nodeName, or a
 * cache that has not seen the scheduler's allocation): the most they can take on the node. */
struct dra_pod {
	int any;                  /* the pod names claims (dra_pod_refs().any) */
	int extended;             /* it has a KEP-5004 claim (named, or found for its uid) */
	uint64_t pending_bytes;   /* shares its unallocated claims ask (capacity.requests.memory:
	                             dra_request_max_bytes of those requests) */
	uint64_t pending_whole_n; /* whole devices they can get at most on the node (every DRA
	                             GPU of the node for a claim not read: n_unknown) */
	uint64_t pending_whole_bytes; /* ... each of the node's largest DRA GPU */
	size_t n_pending, n_unknown;
	size_t n_here; /* its claims allocated with a device on the node */
};

#endif
