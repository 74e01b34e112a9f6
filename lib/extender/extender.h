/*
 * extender: the kube-scheduler extender adapter (HTTP API of k8s.io/kube-scheduler's
 * extender/v1 types; ARCHITECTURE.md: the extender adapter box): it decodes ExtenderArgs, asks
 * the webhook's engine about each node (placer_fit, placer.h: the node's reservations and view
 * copied, core_decide() once without words under the flags, the node's annotation and the
 * GPUMemoryPolicy objects that select it) and encodes the answer. No lock is held while a node
 * is judged (the engine's copies; the policies a published generation);
 * nothing waits there. The filter steers; it reserves nothing in the cluster: the Binding through
 * the webhook stays the commit point and the safety net. It only remembers, in this process, the
 * pods it passed whose Binding the watch cache does not show yet (flight.h): each counts on every
 * node its filter passed (the extender is not told which one the scheduler picked) until the cache
 * shows it bound, finished, being deleted or replaced, or HOLDS_TTL_MS, so the next pod of a
 * burst is not passed onto a node the webhook would then refuse. Only a pod the watch cache shows
 * pending (unbound, not finished, not being deleted) with the call's uid and a valid declaration
 * is held, and for the bytes the cache's copy declares: ExtenderArgs is untrusted (anyone who
 * reaches the port can send one), so a call for a pod the cache does not know, or with a body
 * claiming more memory, is judged but holds nothing beyond the cached pod's figure (metrics.h,
 * extender_holds_refused_total). A pod with DRA claims also holds the most its claims came to on
 * the nodes judged (placement_result.dra_bytes and .dra_whole_bytes, from the DRA store's claims;
 * the claims named are the body's, the pod the filter judged, their figures the store's). A real
 * pod the scheduler saw before the cache did is then not held either: its Binding is still judged
 * by the webhook. The holds are per process: a scheduler whose calls reach another replica (a
 * Service spreads connections, not requests, so one scheduler keeps one replica while its
 * connection lives) does not see them.
 *
 *   POST /scheduler/filter      ExtenderArgs -> ExtenderFilterResult
 *   POST /scheduler/prioritize  ExtenderArgs -> HostPriorityList
 *
 * The wire format (ExtenderArgs, ExtenderFilterResult, HostPriorityList) is decoded and encoded
 * by extwire.h.
 *
 * filter, for a GPU pod with a valid declaration, per node:
 *   fits under the threshold in force (the node's annotation, else the policy's): passes;
 *   under --mode warn or audit every node passes, and a node where it does not fit (or that
 *     cannot be judged: any refusal below, a policy's too) scores 0: the webhook admits there
 *     whatever enforce refuses (webhook.h);
 *   over the threshold -> FailedNodes "needs 10Gi, 1.7Gi free of the 90 percent limit"
 *     (kube-scheduler shows it in the FailedScheduling event; the node may free memory), with
 *     ", counting 10Gi of 1 pod whose Binding is in flight" when pods in flight counted;
 *   can never fit (the pod alone, or one container's share of a GPU, over the limit) ->
 *     FailedAndUnresolvableNodes "needs 600Gi, above the 90 percent limit of the node's 640Gi
 *     GPU memory" / "container "vllm" needs 75Gi per GPU, above the 90 percent limit of one
 *     GPU's 80Gi", with the node's sharing rule after "; " when one applied ("time-sliced:
 *     both slices may land on one card"; the piece is then "MPS client" or "MIG slice" when
 *     so), or "container "x" asks for MIG slices but the node offers no MIG 2g.10gb slices
 *     ..." / "asks for whole GPUs and every GPU is partitioned into MIG slices" (capacity.h's
 *     sharing rules; preemption cannot help);
 *   unknown or invalid capacity, or a node the watch cache has not seen ->
 *     FailedAndUnresolvableNodes with the capacity error (what to set) or "node unknown to
 *     gpu-memory-guard's watch cache";
 *   refused at a GPUMemoryPolicy's threshold: the same reasons at the policy's limit, then
 *     "; GPUMemoryPolicy "name"" ("needs 10Gi, 0 free of the 50 percent limit; GPUMemoryPolicy
 *     "half""); refused by a policy's tier or declarations rule: that rule's message
 *     (FailedNodes). The node is decided once, without words: the reason is the verdict's in
 *     brief (core.h, core_brief), written from its figures;
 *   the node's reservations cannot be read (the ledger's node table full) -> FailedNodes;
 *   with pass_nodes (--scheduler-pass-nodes) N, a node where it fits beyond the N the
 *     filter scores highest -> FailedNodes "fits, but the filter passes only the 3 best-scored
 *     of the 12 nodes where it fits (--scheduler-pass-nodes)".
 *   Sizes as the webhook's messages write them (quantity_format); no '%' (text.h).
 * Pass-through (every node passes, prioritize scores 0, as the webhook allows their
 * Bindings): pods that ask for no configured GPU resource, mirror pods, pods of an exempt
 * namespace.
 * A GPU pod with an invalid or missing declaration: every node in FailedAndUnresolvableNodes
 * with the declaration error ("pod ns/p: container "c": ..."): the webhook would refuse its
 * Binding on every node, and the event tells the user what to fix.
 *
 * prioritize: per node, 0 where the pod does not fit under the threshold (or the node cannot
 * be judged); where it fits, with fill = (used + demand) / limit in (0, 1]:
 *   binpack (default): 1 + round(9 x fill): the fullest node that fits scores highest,
 *     keeping whole GPUs free for big models;
 *   spread: 1 + round(9 x (1 - fill)): the emptiest scores highest.
 * Pass-through pods and invalid declarations: every node 0 (no opinion).
 *
 * Errors: kube-scheduler (pkg/scheduler/extender.go) treats an HTTP status other than 200 and
 * a non-empty Error alike: the filter fails, and with ignorable: false the scheduling attempt
 * fails and the pod is retried with backoff; the Error text reaches the FailedScheduling event.
 * So filter answers 200 with Error for a body that is not ExtenderArgs (not JSON, no Pod, both
 * or neither node forms, a node without a name, a node named twice, more than
 * EXTENDER_MAX_NODES nodes) and, for a GPU pod, when the watch cache is off or not fresh (it
 * never reads the API server: no verdict is better than one from a stale view; under --mode
 * warn or audit every node passes instead, unranked: the webhook admits the Binding anyway). A
 * HostPriorityList has no Error field and kube-scheduler ignores a failed prioritize (no score
 * from this extender): prioritize answers the same bad bodies with 400 and the reason
 * (EXTENDER_EBADREQUEST), and with a cache that cannot judge, every node 0. Bodies larger than
 * EXTENDER_BODY_MAX are the server's 413.
 *
 * prioritize counts the pods in flight too (the pod's own hold never counts against it).
 *
 * Order of reading, per node: its pods in flight are copied from the holds first, then the
 * engine copies its reservations, then its view from the cache. A hold ends once its pod's
 * Binding is admitted with a reservation (extender_binding_admitted) or the cache shows it
 * bound, and a reservation once the cache shows its pod: each later source catches what leaves
 * the one before, so such a pod is counted at least once (placement.h counts a pod both visible
 * and reserved once; placer_fit a pod both held and reserved once), never missed.
 *
 * Thread-safe: calls may run on many threads at once. No API server call, ever.
 */
#ifndef GMG_EXTENDER_H
#define GMG_EXTENDER_H

#include <stddef.h>
#include <stdint.h>

#include "extwire.h"
#include "server.h"

struct metrics;

#define EXTENDER_PATH_FILTER     "/scheduler/filter"
#define EXTENDER_PATH_PRIORITIZE "/scheduler/prioritize"
/* Body cap. The Nodes form carries whole Node objects, 5 to 30 KiB each (status.images
 * dominates): 64 MiB serves a few thousand nodes; larger clusters should configure
 * nodeCacheCapable: true (names only, ~40 bytes a node). */
#define EXTENDER_BODY_MAX     (64u * 1024u * 1024u)
#define EXTENDER_MAX_NODES    EXTWIRE_MAX_NODES
#define EXTENDER_MAX_PRIORITY 10 /* extender/v1 MaxExtenderPriority */
#define EXTENDER_ERR_MAX      512
/* A filter call for a pod the watch cache does not show yet (by name and uid) waits on a worker
 * up to this long, ms, for the cache to catch up before it decides whether the pod holds: the
 * scheduler's informer may see a new pod before the webhook's does (a burst on a loaded node
 * measured 55 ms), and a pod that holds nothing lets the next pod's filter pass the same room.
 * A forged call for a pod that never exists costs a worker this long and holds nothing. */
#define EXTENDER_CACHE_WAIT_MS 500

#define EXTENDER_EBADREQUEST (-1) /* prioritize: the body is not ExtenderArgs: answer 400 */
#define EXTENDER_ENOMEM      (-2) /* answer 500 */

enum extender_verb { EXTENDER_FILTER = 0, EXTENDER_PRIORITIZE = 1 };
enum extender_score { EXTENDER_BINPACK = 0, EXTENDER_SPREAD = 1 };

struct placer;

struct extender_config {
	/* The engine (placer.h), borrowed, shared with the webhook: every node is judged through
	 * placer_fit (its flags, demand rules, watch cache, DRA store, reservations and
	 * GPUMemoryPolicy objects; --mode warn or audit: the webhook admits whatever enforce
	 * refuses, so every node passes the filter, a refused one with score 0, and a pod without
	 * a valid declaration passes every node). While placer_fit_ready says no (no cache, not
	 * synced or stale, policies or DRA not listed) GPU pods are answered with an Error. */
	struct placer *placer; /* its exempt namespaces too (placer_exempt) */
	enum extender_score score;
	/* --scheduler-pass-nodes: the filter passes at most this many of the nodes where the pod
	 * fits, those it scores highest (the input order among equals); the others fail with a
	 * reason. 0: every node where it fits. A pod in flight is held on the nodes passed only
	 * (flight.h), so a small figure lets many more pods be in flight at once; the scheduler
	 * then chooses among fewer nodes (its own soft preferences, such as preferred affinity,
	 * see only those). <= EXTENDER_MAX_NODES. */
	unsigned pass_nodes;
};

struct extender; /* opaque */

/* New adapter. cfg is copied; metrics may be NULL (borrowed). NULL on a bad config (no placer,
 * unknown score) or allocation failure. */
struct extender *extender_new(const struct extender_config *cfg, struct metrics *metrics);
void extender_free(struct extender *x); /* NULL is a no-op; no call may be running */

/*
 * One call: body[0..len) (untrusted, borrowed) -> *out (caller owns, free()), *out_len: answer
 * 200 application/json. EXTENDER_EBADREQUEST (prioritize only) with the reason in err: answer
 * 400. EXTENDER_ENOMEM: 500. May wait for a node a webhook placement holds (at most that
 * placement's time). Logs, counts metrics. Thread-safe.
 */
int extender_handle(struct extender *x, enum extender_verb verb, const char *body, size_t len,
                    char **out, size_t *out_len, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The watch cache reports pod uid gone (deleted, finished, replaced: cache.h's gone
 * callback): its hold, if any, ends now rather than at HOLDS_TTL_MS (a pod deleted while its
 * Binding was in flight no longer shows in the cache, so the filter cannot tell it settled).
 * NULL x or uid: no-op. Thread-safe; callable from the informer's threads. */
void extender_forget(struct extender *x, const char *uid);

/* This process's webhook admitted pod uid's Binding with its reservation recorded (webhook.h,
 * binding_admitted): the reservation counts the pod on the node picked from now on, so its hold
 * ends on every node (holds_drop) instead of when the watch cache shows it bound. Unlike
 * extender_forget, a later filter call of the pod (its Binding failed after all, and the
 * scheduler tries it again) holds it again. NULL x or uid: no-op. Thread-safe. */
void extender_binding_admitted(struct extender *x, const char *uid);

/* The server's routes (server.h), marked plain (served on the scheduler listener too):
 * POST EXTENDER_PATH_FILTER / EXTENDER_PATH_PRIORITIZE, bodies up to EXTENDER_BODY_MAX. A call
 * is judged on the listener's thread when no node it reads is held by a placement, else on a
 * worker; refused busy (queue full, shutting down): filter answers an Error, prioritize scores
 * what it could not read 0. x is borrowed and must outlive the server. */
struct server_route extender_filter_route(struct extender *x);
struct server_route extender_prioritize_route(struct extender *x);

#endif
