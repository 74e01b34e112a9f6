/*
 * placement: the one place a placement is decided on one threshold (ARCHITECTURE.md, core
 * box; policyset.h judges the flags, annotation and policies over it).
 *
 * A placement of pod P on node N is decided by placement_decide() over a snapshot, all plain
 * values: the node (its capacity, from capacity.h, with the per-node threshold), the consumers
 * visible on it (pods with their demand already computed), the pending reservations (admitted
 * placements not yet visible), the pod being placed (its demand, from demand.h), the policy
 * (threshold, warn threshold, mode) and `now`. It returns the verdict, the message, and the
 * reservation the caller records when the placement is allowed.
 *
 * Counting rules (the README's "What is already on the node"):
 *   - a visible consumer counts its declared bytes; a GPU pod without a valid declaration counts
 *     the units it holds whole (undeclared_gpus; capacity_undeclared_bytes(): under
 *     time-slicing never more cards than the node has);
 *   - on a MIG-mixed node only consumers of the pod's pool count (whole GPUs, or one profile's
 *     slices), against that pool's memory (capacity_pool_bytes()); a consumer of unknown pool
 *     (a reservation) counts in every pool; elsewhere everything counts against the node;
 *   - two items are the same pod when their uids are equal, where both uids are known, and
 *     otherwise when their keys are equal (a newer pod of an old pod's name is another pod);
 *   - the pod being placed never counts itself (visible or reserved: a retried Binding, a
 *     re-sent CREATE);
 *   - a reservation counts unless expired at now_ms or settled: a visible consumer that is the
 *     same pod is counted once (as the visible pod);
 *   - the total is used + demand, saturating (an 8Ei declaration cannot wrap to a small sum).
 * The threshold in force is the node's (capacity.has_threshold: its annotation) or the policy's.
 * Sharing: each of the pod's GPU containers (demand.uses) is judged on the node's sharing with
 * capacity_piece(): what it may put on one piece (one GPU, one MPS client, one MIG slice) must
 * fit within the threshold of that piece, else the pod can never fit there, and the message
 * names the rule ("time-sliced: both slices may land on one card"). A pod asking for a pool the
 * node lacks (a MIG profile it does not offer, whole GPUs on a node whose cards are all
 * partitioned) can never fit either.
 * Inferred demand (pol->infer; demand.h): the pod's shares are resolved on this node
 * (demand_resolve()), and so are the consumers' (item.shares). Then, per the pod's pool:
 *   - exclusive cards (sharing none, MIG slices without replicas: nothing shares a card): a
 *     consumer that takes its cards (undeclared_gpus, whole_gpus: counted as whole cards, or
 *     a container running an engine, demand_takes_cards()) holds them: they leave
 *     the memory the threshold guards instead of filling it, and such a pod is admitted while
 *     the node has units no such consumer holds (reason "ExclusiveCards"; all held:
 *     "NoFreeCard"). Eight undeclared 1-GPU pods fit an 8-card node; a declared pod beside
 *     them is judged on the remaining cards' memory.
 *   - shared cards (time-slicing, MPS): everything counts what it will take (an engine's
 *     share, the whole card); a pod counted as whole cards (demand_all_whole()) is refused
 *     beside any other consumer ("UndeclaredOnSharedCard"; warn mode allows it with the
 *     text), since it could take all of the card its neighbours use, and admitted alone
 *     ("SoleConsumer": it is counted whole, so the threshold keeps later pods off).
 * DRA (dra.h; KEP-4381 structured parameters, KEP-5075 consumable capacity, KEP-5004): each
 * claim allocated on the node (node->dra) counts once, what it holds there (a whole device's
 * memory, or its consumedCapacity.memory), whoever shares it:
 *   - a claim of the pod being placed (its uid is the claim's owner or in its reservedFor) and
 *     of no other pod is the pod's own: it adds to the pod's demand; one other pods are also
 *     reserved for is already on the node: it counts as used, the pod adds nothing for it;
 *   - any other claim counts as used ("claim ns/name" in messages);
 *   - a visible pod or a reservation whose uid a claim is reserved for is that claim's: a
 *     reservation settles when the claims reserved for its pod count at least its bytes (a
 *     mixed pod's, its device-plugin units beside its claims, counts whole until the pod
 *     shows), and a pod in a KEP-5004 claim's reservedFor is not counted again by its
 *     nvidia.com/gpu units;
 *   - the pod's unallocated claims (pod->dra->pending_bytes: the most they can take on the
 *     node) add to its demand, and the message says so;
 *   - its DRA containers' own figures (demand.dra_figs, demand.h: GPU_MEMORY_LIMIT, HAMi-core's
 *     limit, the engine's share of one device) resolved on the node's largest DRA GPU
 *     (node->dra->gpus.max_bytes, else the node's GPU): when the pod has shares of its own
 *     (its allocated claims' consumedCapacity, its pending claims' capacity.requests), they
 *     count the larger of the two (vLLM takes its share of the whole card, whatever share a
 *     claim holds; KEP-5075 capacity is not enforced at run time); whole devices hold them.
 *   - a visible pod's figures (item.dra_figs) likewise raise the first claim with a share
 *     (bytes > 0) reserved for it: that claim counts the larger of its bytes and the figures
 *     of the pods it is the first such claim of, resolved the same way (the gauges too:
 *     placement_dra_bytes);
 *   - a pod with a KEP-5004 claim (pod->dra->extended, or its own claim is one): when its
 *     demand was read with the pod's requestMappings (demand.dra_units > 0, demand.h), the
 *     units the claim serves are already out of it and what is left (device-plugin units:
 *     a mixed pod) counts beside its claims, as any pod's, and so for a visible pod
 *     (item.dra_units); otherwise (the status not seen yet) it counts its claims only,
 *     never its containers' nvidia.com/gpu units (per-GPU and infer rules are its devices'
 *     then).
 * DRA devices shared by a config (dra_claim_use.sharing: the NVIDIA driver's GpuConfig or
 * MigDeviceConfig sharing.strategy TimeSlicing or MPS on a device the claim holds whole), or
 * by no config (the pods a claim is reserved for all get its device, and the NVIDIA driver
 * time-slices a device no config names: judged as time-sliced, the message saying "shared"): the
 * node's sums above are unchanged (the device stays the claim's), and the pods of such a claim
 * the pod being placed is in (claim_has, or dra_claim_use.mine: it names the claim) share the
 * device as pods share a time-sliced or MPS card (docs/sharing.md), after the decision above
 * allowed the pod:
 *   - each pod counts its DRA containers' own figures (demand.dra_figs; a visible pod's
 *     item.dra_figs, found by the uids of the claim's reservedFor) resolved on the device
 *     (dra_claim_use.dev_bytes, else the node's per-GPU memory), under MPS with a pinned limit
 *     on that limit (a share of it, as the MPS row); a pod of the claim with no figure seen
 *     (none, or not visible with one: not bound yet, or the webhook's API path) counts the
 *     whole device, under MPS with a pinned limit that limit;
 *   - alone on the device (no other pod in the claim's reservedFor) the pod is judged as on a
 *     device held whole: admitted by the rules above (a pod with no figure: "SoleConsumer",
 *     when the claim has a sharing config);
 *   - beside others, a pod with no figure (and no pinned limit) is refused
 *     ("UndeclaredOnSharedCard", the message says how to declare); else its figure plus the
 *     others' must fit within the threshold of the device's memory (policy_decide's reasons,
 *     the message naming the claim's device and the pods on it);
 *   - under MPS with a pinned limit, each of its containers' figures must fit within the
 *     threshold of the limit, alone or not ("NeverFits");
 *   - a pending reservation carrying the claim's uid (item.dra_claim: a pod admitted naming
 *     the claim before it was reserved for it, as pods created with nodeName are) is one of
 *     the claim's other pods, counted as one with no figure seen unless its pod is visible
 *     with figures: concurrent CREATEs naming one unreserved claim are judged against each
 *     other, not each as its sole consumer.
 * The pod's source (result.source) ends every message after "; ".
 * The decision itself and its message are policy_decide()'s (policy.h); the consumers named in a
 * message are the POLICY_TOP_CONSUMERS largest, reservations marked " (admitting)".
 *
 * Who calls it: policyset_decide() (policyset.h), once per threshold check under the flags,
 * the annotation and the GPUMemoryPolicy objects, for core_decide() (core.h), the one entry
 * point the webhook, the extender, the report and the gauges call. The snapshot comes from the
 * cluster view (view.h: the live backend over the API server's answers or the watch cache's, for
 * the webhook; the cache for the extender) or the lists given to the report. Pure:
 * no I/O, no clock (now_ms is an argument), no locks, no allocation (about 7 KiB of stack: the
 * pod's demand resolved on the node); every pointer in the input is borrowed for the call.
 * Thread-safe.
 */
#ifndef GMG_PLACEMENT_H
#define GMG_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "capacity.h"
#include "demand.h"
#include "policy.h"

struct demand;
struct gpupolicy_labels;
struct dra_node;
struct dra_pod;

/* A consumer of GPU memory on the node: a visible pod, or a reservation. Borrowed. */
struct placement_item {
	const char *key;          /* "namespace/name" (required) */
	const char *uid;          /* metadata.uid, or NULL when unknown */
	uint64_t bytes;           /* declared demand, bytes */
	uint64_t undeclared_gpus; /* > 0: a GPU pod without a valid declaration; counts
	                             capacity_undeclared_bytes(pool, undeclared_gpus) instead */
	uint64_t expires_ms;      /* reservations: expiry on the now_ms clock; 0: never */
	uint64_t seen_ms;         /* visible pods from the watch cache: when the cache first
	                             showed the pod on this node (monotonic ms); 0: unknown. Not
	                             read by placement_decide (shared records prune by it) */
	uint32_t pool;            /* CAPACITY_POOL_*, or a MIG profile's id; 0: every pool */
	/* For GPUMemoryPolicy tiers (gpupolicy.h), when attrs_known: the pod's
	 * spec.priorityClassName (NULL: none) and labels (NULL: none). An item without them (a
	 * reservation: attrs_known 0) counts in every tier, its tier being unknown (the safe
	 * side). Not read by placement_decide. */
	const char *priority_class;
	const struct gpupolicy_labels *labels;
	int attrs_known;
	/* An inferred pod (demand.h, infer): its GPU containers, resolved on the node being
	 * judged (demand_shares_bytes()) instead of bytes; NULL/0: bytes or undeclared_gpus. */
	const struct demand_share *shares;
	size_t n_shares;
	uint64_t whole_gpus; /* > 0: the pod takes its cards (demand_takes_cards()): the units it
	                        holds (exclusive cards, below) */
	uint64_t dra_units;  /* demand.dra_units: the units its KEP-5004 claim serves are left out
	                        of the figures above, so the claim does not stand in for them */
	/* A DRA pod's containers' own figures (demand.dra_figs), NULL/0: none. An item with them
	 * and no GPU resource (bytes, undeclared_gpus, shares all 0) is no consumer of its own:
	 * its figures raise the count of the claim it holds a share of (below). */
	const struct demand_share *dra_figs;
	size_t n_dra_figs;
	/* A reservation of a pod that joined a DRA claim's shared device not yet reserved for it
	 * (placement_result.reserve_claim): that claim's uid; NULL: none. It counts among the
	 * claim's pods (below, "DRA devices shared by a config") until its pod shows there. */
	const char *dra_claim;
};

/* The node and what is on it. */
struct placement_node {
	const char *name;                  /* node name, for messages */
	const struct capacity *cap;        /* from capacity_from_node() */
	const struct placement_item *pods; /* visible consumers: pods bound to the node, not
	                                      Succeeded/Failed, holding GPU memory */
	size_t n_pods;
	const struct placement_item *reserved; /* pending reservations on the node */
	size_t n_reserved;
	const struct dra_node *dra; /* DRA claims allocated on the node (dra.h); NULL: none */
};

/* The pod being placed. */
struct placement_pod {
	const char *name;            /* "namespace/name", for messages */
	const char *key;             /* its reservation key ("namespace/name" or a unique key) */
	const char *uid;             /* metadata.uid, or NULL */
	const struct demand *demand; /* status DEMAND_OK (a pod with DRA claims only: bytes 0,
	                                no uses, no parts: placement_dra_demand()) */
	int dry_run;                 /* 1: decide, but reserve nothing */
	const struct dra_pod *dra;   /* its claims not allocated yet (dra.h); NULL: none */
};

struct placement_policy {
	double threshold;      /* ratio (0,1], used when the node has no threshold annotation */
	double warn_threshold; /* ratio (0,1] */
	enum policy_mode mode;
	int verdict_only; /* 1: decide without words (the scheduler extender judges hundreds of
	                     nodes per call and writes its own short reasons): decision.message
	                     is left empty, no consumer is named; verdict and numbers as usual */
	int infer;        /* --undeclared infer: the exclusive/shared rule below */
};

struct placement_result {
	struct policy_decision decision; /* verdict, allowed, reason, message, budget, total */
	int invalid_input;       /* 1: policy_decide refused the input (e.g. zero capacity) */
	uint64_t used_bytes;     /* counted on the node besides the pod being placed */
	uint64_t reserved_bytes; /* of which pending reservations */
	size_t n_settled;        /* reservations not counted because their pod is visible */
	uint64_t pool_bytes; /* the memory of the pod's pool on the node (capacity_pool_bytes) */
	struct capacity_piece piece;  /* never fits by a piece: the container's use that does not
	                                 fit (piece.known 0: a pool the node lacks); else the
	                                 largest share judged */
	const char *piece_container;  /* that use's container (points into the demand) */
	char pool_note[128];          /* MIG mixed: which pool the sums are of ("" elsewhere) */
	int reserve;                  /* 1: allowed and not dry-run: record the reservation below */
	uint64_t reserve_bytes;       /* = demand bytes on this node (shares resolved) */
	uint64_t demand_bytes;        /* the pod's demand on this node (shares resolved) */
	uint64_t held_gpus;           /* infer, exclusive cards: units held whole by others */
	char source[DEMAND_MSG_MAX];  /* demand_describe() of the pod on this node; "" when the
	                                 pod has no inferred parts (strict mode) */
	char warning[DEMAND_MSG_MAX]; /* two of its sources disagree (demand_resolve()) */
	uint64_t dra_bytes;           /* of demand_bytes, what its DRA claims take on the node */
	uint64_t dra_used_bytes;      /* of used_bytes, what other claims hold there */
	uint64_t dra_whole_bytes;     /* whole DRA devices its claims take on the node (allocated
	                                 there, and the most its unallocated ones can get): not in
	                                 demand_bytes (they leave the memory the threshold guards);
	                                 what the extender holds for it beside demand_bytes */
	char dra_note[DEMAND_MSG_MAX]; /* how its DRA claims were counted ("" when none) */
	int shared_device;         /* decision was taken on a shared DRA device of one of its claims
	                              (placement.h, "DRA"): its budget and total are the device's */
	const char *reserve_claim; /* reserve: the uid of a claim whose shared device it joins
	                              without being in its reservedFor (it names the claim:
	                              a CREATE with nodeName), borrowed from node->dra; the
	                              caller records it with the reservation (item.dra_claim);
	                              NULL: none */
};

/*
 * Decide placing pod on node under pol at now_ms. Always fills *out. Returns 0; -1 (with
 * out->invalid_input set, out->decision.allowed 0 and its message saying why) for an input that
 * makes no sense: NULL arguments, a demand that is not DEMAND_OK, an item without a key, or
 * what policy_decide() refuses.
 */
int placement_decide(const struct placement_node *node, const struct placement_pod *pod,
                     const struct placement_policy *pol, uint64_t now_ms,
                     struct placement_result *out) __attribute__((warn_unused_result));

/* What each tier of GPUMemoryPolicy p already declares on the node, for the pod being placed
 * (gpupolicy_check_tiers' tier_bytes): the same counting rules as placement_decide (the pod
 * itself, other pools, expired and settled reservations left out); an item without known
 * attributes (attrs_known 0) counts in every tier. tier_bytes has p->n_tiers entries. 0, or -1
 * for a missing input or a consumer without a key. Pure. */
#define PLACEMENT_NS_MAX 64 /* a namespace name: a DNS label, 63 bytes */
struct gpupolicy;
int placement_tier_bytes(const struct placement_node *node, const struct placement_pod *pod,
                         const struct gpupolicy *p, uint64_t now_ms, uint64_t *tier_bytes);

/*
 * What a visible pod counts as a consumer, the one rule (the cluster view's two backends, the
 * watch cache and the live view over a pod LIST: view.h; the report; each keeps the demand its
 * own way, so it passes these figures; which pods are consumers: placement_consumer()):
 *   - DEMAND_OK: its bytes, or for an inferred pod its shares resolved on the node judged, and
 *     the units it holds when it takes its cards (whole_gpus);
 *   - DEMAND_INVALID (a GPU pod without a valid declaration: it still holds GPU memory): its
 *     GPUs counted whole, at least 1 (undeclared_gpus), no bytes, no shares.
 * The pool is the demand's either way. Pods that ask for no GPU (DEMAND_NOT_GPU) are no
 * consumer: the caller leaves them out.
 */
struct placement_count {
	enum demand_status status;         /* DEMAND_OK or DEMAND_INVALID */
	uint64_t bytes;                    /* demand.bytes (DEMAND_OK) */
	uint64_t gpus;                     /* demand.gpus */
	uint32_t pool;                     /* demand.pool */
	const struct demand_share *shares; /* demand.compact when demand.shares, else NULL */
	size_t n_shares;
	uint64_t whole_gpus;                 /* demand_takes_cards() ? demand.gpus : 0 */
	uint64_t dra_units;                  /* demand.dra_units */
	const struct demand_share *dra_figs; /* demand.dra_figs, kept by the caller as long as the
	                                        item; NULL/0: none (a DRA-only pod with figures:
	                                        status DEMAND_NOT_GPU is then accepted) */
	size_t n_dra_figs;
};

/* Set it's demand fields (bytes, undeclared_gpus, pool, shares, whole_gpus, dra_units) from c by
 * the rule above; the other fields are untouched. it->shares borrows c->shares. */
void placement_item_count(struct placement_item *it, const struct placement_count *c);

/* Whether a visible pod is a consumer on its node, the rule's other half (the watch cache and
 * the live view, view.h, ask it): not finished (phase Succeeded or Failed: pod_finished()), and
 * asking for a GPU (status DEMAND_OK or DEMAND_INVALID), or a pod asking none whose DRA
 * containers have figures (n_dra_figs > 0: they raise its claim's count). 1 or 0. Pure. */
int placement_consumer(int finished, enum demand_status status, size_t n_dra_figs);

/* placement_item_count() from a whole demand d (DEMAND_OK or DEMAND_INVALID), its shares
 * copied into shares (DEMAND_MAX_PARTS entries the caller keeps as long as it; NULL: shares
 * not kept). Its DRA figures are not kept (the item would borrow d). */
void placement_item_demand(struct placement_item *it, const struct demand *d,
                           struct demand_share *shares);

/* The same, d's DRA figures kept too: copied into figs (DEMAND_MAX_PARTS entries the caller
 * keeps as long as it; NULL: not kept), so that d may also be a DRA pod's DEMAND_NOT_GPU with
 * figures (placement_consumer()). */
void placement_item_demand_figs(struct placement_item *it, const struct demand *d,
                                struct demand_share *shares, struct demand_share *figs);

/* A demand for a pod whose GPUs all come from DRA claims (it asks no GPU resource), made in
 * place from its demand_from_pod() result d (DEMAND_NOT_GPU; fully initialised): DEMAND_OK, 0
 * bytes, no uses, pool CAPACITY_POOL_ANY, its DRA containers' figures (dra_figs, dra_words)
 * kept; its claims count through placement_node.dra and placement_pod.dra. */
void placement_dra_demand(struct demand *d);

/* What node->dra's claims hold on the node (shares and whole devices, each claim once), and in
 * *counted_twice the bytes of node->pods whose GPUs are a KEP-5004 claim's (the same memory,
 * counted by the claim: a sum of the pods must leave it out). The per-node gauges' rule, the
 * one placement_decide counts by. Saturating; 0 without node->dra. Pure. */
uint64_t placement_dra_bytes(const struct placement_node *node, uint64_t *counted_twice);

/* Bytes one consumer counts on a node of capacity cap (saturating). */
uint64_t placement_item_bytes(const struct placement_item *it, const struct capacity *cap);

#endif
