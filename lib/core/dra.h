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
 *     their uids).
 *   Pod: spec.resourceClaims[] (resourceClaimName, resourceClaimTemplateName),
 *     status.resourceClaimStatuses[].resourceClaimName, status.extendedResourceClaimStatus
 *     .resourceClaimName (KEP-5004).
 * Not read: DeviceClasses (their CEL selectors), opaque driver configs (spec.devices.config[]
 * .opaque: the NVIDIA driver's GpuConfig sharing.strategy TimeSlicing / MPS of a claim's
 * devices: the claim is counted once at what it holds, whoever shares it, so of
 * docs/sharing.md's rule only the exclusive half holds for DRA devices: a device held whole is
 * the claim's alone; the pods sharing it are not judged against each other), admin access
 * results (counted as any allocation: the safe side), binding conditions. KEP-5004: the pod's
 * units its claim serves are told apart by demand.h (requestMappings).
 *
 * Counting rules (dra_result_bytes, dra_request_max_bytes; placement.h applies them per node):
 *   - a result with consumedCapacity.memory (a KEP-5075 share) counts that against the
 *     threshold; any other result holds its whole device (the scheduler gives it to no other
 *     claim): like a device-plugin pod that takes its cards, the device leaves the memory the
 *     threshold guards (placement.h);
 *   - a claim counts once per node, whoever is in its reservedFor (KAI-Scheduler #1930);
 *   - a claim not allocated yet counts what its requests can get at most on a node: per
 *     request count devices (allocationMode All: every device) of the largest memory there,
 *     or count x capacity.requests.memory when the request asks a share.
 */
#ifndef GMG_DRA_H
#define GMG_DRA_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

#define DRA_GROUP_VERSION  "resource.k8s.io/v1"
#define DRA_DRIVER_DEFAULT "gpu.nvidia.com"
#define DRA_ANN_EXTENDED   "resource.kubernetes.io/extended-resource-claim"
#define DRA_CAPACITY_KEY   "memory" /* the NVIDIA driver's capacity name */
#define DRA_MAX_DRIVERS    8        /* --dra-driver names */
#define DRA_DRIVER_MAX     64       /* a DNS subdomain, at most 63 bytes (API validation) */
#define DRA_POOL_MAX       254      /* pool and node names: 253 */
#define DRA_DEVICE_MAX     64       /* a DNS label, 63 */
#define DRA_UID_MAX        64       /* metadata.uid (a UUID is 36) */
#define DRA_NS_MAX         64       /* a namespace, 63 */
#define DRA_NAME_MAX       254      /* an object name, 253 */
#define DRA_SHARE_ID_MAX   40       /* shareID: a UUID, 36 */
/* The v1 API's own caps (resource/v1 types.go): ResourceSliceMaxDevices 128,
 * AllocationResultsMaxSize 32, ResourceClaimReservedForMaxSize 256, DeviceRequestsMaxSize 32.
 * More is refused (DRA_EINVAL), never cut. */
#define DRA_SLICE_DEVICES  128
#define DRA_CLAIM_RESULTS  32
#define DRA_CLAIM_RESERVED 256
#define DRA_CLAIM_REQUESTS 32
#define DRA_POD_CLAIMS     32 /* claims named by one pod; more is refused */
#define DRA_MSG_MAX        256

#define DRA_EINVAL (-1) /* not an object of the kind, or a field of the wrong shape: err says */

enum dra_type {
	DRA_TYPE_OTHER = 0, /* no "type" attribute, or another value */
	DRA_TYPE_GPU = 1,
	DRA_TYPE_MIG = 2,
};

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
};

/* One ResourceSlice, decoded. About 10 KiB: callers put it on the heap. */
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
};

/* One request of the claim's spec, as the most it can get. */
struct dra_request {
	char name[DRA_DEVICE_MAX];
	uint64_t count; /* devices (exactly.count, default 1) */
	uint8_t all;    /* allocationMode All */
	uint64_t share; /* capacity.requests.memory per device, bytes; 0: whole devices */
	uint8_t n_seen; /* decoding's own: subrequests read */
};

/* One ResourceClaim, decoded. About 100 KiB: callers put it on the heap. */
struct dra_claim {
	char ns[DRA_NS_MAX];
	char name[DRA_NAME_MAX];
	char uid[DRA_UID_MAX];
	char owner[DRA_UID_MAX]; /* the controller ownerReference's uid ("" when none) */
	uint8_t extended;        /* annotation DRA_ANN_EXTENDED (KEP-5004) */
	uint8_t allocated;       /* status.allocation present */
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
 * count that is not a positive integer, a quantity that does not parse. */
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
