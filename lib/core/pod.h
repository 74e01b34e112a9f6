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
 *   - being deleted: metadata.deletionTimestamp is set (pod_being_deleted); the API server
 *     binds no such pod.
 *   - demand: what a pod already on a node counts, read once by every view of it (pod_demand).
 *   - identity: a pod is named by its key ("namespace/name": pod_key_make, pod_key_of,
 *     pod_key_split) and its uid (metadata.uid; NULL or
 *     "" when unknown, as for a reservation made before the API server answered). A newer pod of
 *     the same name is another pod. Two rules, each written here only:
 *       pod_same: uids equal where both are known, else keys equal. Whether two things count
 *         once: a reservation and a visible pod (placement.h), two entries of the shared record
 *         (record.h).
 *       pod_same_strict: keys equal, and uids equal where both are known. Whether a visible pod
 *         settles a reservation (reservations.h, rule 2): the key must match, so a reservation
 *         under a key no pod has (a pod named by generateName: webhook.c's ledger_key) never
 *         settles by a view and lives until its TTL.
 *
 * Borrowed cJSON objects, no allocation, no I/O. Pure and thread-safe.
 */
#ifndef GMG_POD_H
#define GMG_POD_H

#include <stddef.h>

struct cJSON;
struct demand;
struct demand_config;

#define POD_MIRROR_ANNOTATION "kubernetes.io/config.mirror"

/* 1 when pod's status.phase is "Succeeded" or "Failed", else 0 (NULL pod, no phase: 0). */
int pod_finished(const struct cJSON *pod);

/* 1 when pod carries the POD_MIRROR_ANNOTATION annotation (any value), else 0. */
int pod_is_mirror(const struct cJSON *pod);

/* 1 when pod has metadata.deletionTimestamp as a string (the API server writes an RFC 3339
 * one; JSON null is not set: Go decodes it to a nil *Time), else 0. The API server refuses to
 * bind such a pod (pkg/registry/core/pod/storage/storage.go, setPodNodeAndMetadata: "pod ...
 * is being deleted, cannot be assigned to a host"), so a Binding of it reserves nothing
 * (webhook.c), a reservation of one that is still unbound is dropped (placer.c pod_gone,
 * placer.h "Deleted pods"), and the extender holds nothing for it (flight.h). */
int pod_being_deleted(const struct cJSON *pod);

/* The demand of a pod already on a node (the watch cache's, the live view's, the report's):
 * demand_from_pod() into *d, a failure whatever its status counted as DEMAND_INVALID (it may
 * hold GPU memory we cannot read: counted by its GPUs, the safe side). */
void pod_demand(const struct cJSON *pod, const struct demand_config *cfg, struct demand *d);

/* The key: "namespace/name" (a pod of no namespace: "/name"), as every box names a pod. */

/* ns (NULL: "") '/' name into key (cap bytes). 0, or -1 (key "" when cap > 0) when name is
 * NULL or "" or the key does not fit. */
int pod_key_make(const char *ns, const char *name, char *key, size_t cap);

/* pod's metadata.namespace and metadata.name as pod_key_make writes them. 0 or -1. */
int pod_key_of(const struct cJSON *pod, char *key, size_t cap);

/* key's namespace into ns (cap bytes) and, when name is not NULL, *name pointing into key
 * after the '/'. 0, or -1 (ns "" when cap > 0) when key is NULL, has no '/', or its namespace
 * does not fit. */
int pod_key_split(const char *key, char *ns, size_t cap, const char **name);

/* 1 when (key_a, uid_a) and (key_b, uid_b) are the same pod by the identity rule above, else 0;
 * a NULL key is no pod's (0). */
int pod_same(const char *key_a, const char *uid_a, const char *key_b, const char *uid_b);

/* 1 when they are the same pod by the strict rule above, else 0; a NULL key is no pod's (0). */
int pod_same_strict(const char *key_a, const char *uid_a, const char *key_b, const char *uid_b);

#endif
