/*
 * pod: facts about a Pod object that every box reads the same way, written once (core box of
 * ARCHITECTURE.md: the rules the webhook, the extender, the watch cache and the report share).
 *
 *   - finished: status.phase is Succeeded or Failed. Such a pod has stopped its containers and
 *     holds no GPU memory; it never counts on its node (the API path's field selector,
 *     kube_list_pods_on_node(), leaves out the same two phases on the server).
 *   - mirror: the kubelet's copy of a static pod (annotation kubernetes.io/config.mirror). The
 *     kubelet runs it whatever the API server answers, so refusing it protects nothing: the
 *     webhook and the extender let it pass ("MirrorPod"); it still counts once running.
 *   - demand: what a pod already on a node counts, read once by every view of it (pod_demand).
 *
 * Borrowed cJSON objects, no allocation, no I/O. Pure and thread-safe.
 */
#ifndef GMG_POD_H
#define GMG_POD_H

struct cJSON;
struct demand;
struct demand_config;

#define POD_MIRROR_ANNOTATION "kubernetes.io/config.mirror"

/* 1 when pod's status.phase is "Succeeded" or "Failed", else 0 (NULL pod, no phase: 0). */
int pod_finished(const struct cJSON *pod);

/* 1 when pod carries the POD_MIRROR_ANNOTATION annotation (any value), else 0. */
int pod_is_mirror(const struct cJSON *pod);

/* The demand of a pod already on a node (the watch cache's, the live view's, the report's):
 * demand_from_pod() into *d, a failure whatever its status counted as DEMAND_INVALID (it may
 * hold GPU memory we cannot read: counted by its GPUs, the safe side). */
void pod_demand(const struct cJSON *pod, const struct demand_config *cfg, struct demand *d);

#endif
