/*
 * extwire: the kube-scheduler extender's wire format (HTTP API of k8s.io/kube-scheduler's
 * extender/v1 types), decoded and encoded for the extender adapter (extender.h). Pure: no I/O,
 * no lock; cJSON for the JSON.
 *
 * Wire format (extender/v1 v0.33 has no json tags: Go's field names, as kube-scheduler's
 * encoding/json writes them):
 *   ExtenderArgs {"Pod": <v1.Pod>, "Nodes": <v1.NodeList> | null, "NodeNames": [..] | null}
 *     The three names are matched in any ASCII letter case, as Go's decoder does ("pod",
 *     "NODENAMES"; the non-ASCII folds Go also accepts, U+017F and U+212A, are not: no encoder
 *     writes them); the same for the NodeList's "items". The v1 objects inside are read by
 *     their json tags as the API server writes them ("metadata", "spec"). Exactly one of Nodes
 *     (nodeCacheCapable: false) and NodeNames (nodeCacheCapable: true) is given (not null);
 *     unknown fields are ignored, as Go does.
 *   ExtenderFilterResult {"Nodes": <v1.NodeList> | null, "NodeNames": [..] | null,
 *     "FailedNodes": {node: reason}, "FailedAndUnresolvableNodes": {node: reason},
 *     "Error": ""}: the passing nodes in the form they came in (NodeNames, or Nodes with the
 *     very node objects received), in their order; the other form null.
 *   HostPriorityList [{"Host": node, "Score": 0..10}], one per node, in the input order.
 *
 * Errors: EXTWIRE_EBAD with a one-line reason without '%' (text.h: kube-scheduler's events take
 * it as a format) for a body that is not ExtenderArgs (not JSON, trailing data, not an object, a
 * field given twice in two letter cases, no Pod, both or neither node forms, a node without a
 * name or with one over 253 bytes, a node named twice, more than EXTWIRE_MAX_NODES nodes);
 * EXTWIRE_ENOMEM.
 */
#ifndef GMG_EXTWIRE_H
#define GMG_EXTWIRE_H

#include <stddef.h>

struct cJSON;

/* Nodes per call: Kubernetes supports 5000 nodes per cluster; three times that, refused past. */
#define EXTWIRE_MAX_NODES 15000

#define EXTWIRE_EBAD   (-1) /* not ExtenderArgs: err says why */
#define EXTWIRE_ENOMEM (-2)

/* ExtenderArgs decoded: everything points into root (owned: extwire_free). */
struct extwire_args {
	struct cJSON *root;
	const struct cJSON *pod; /* the Pod object */
	struct cJSON *items;     /* Nodes form: the NodeList's items; NULL in the NodeNames form */
	struct cJSON **objs;     /* Nodes form: the n Node objects; NULL in the NodeNames form */
	const char **names;      /* the n node names, in the order given */
	size_t n;
};

/* Decode body[0..len) (untrusted, borrowed) into *a (replaced; extwire_free it on every
 * return). 0, EXTWIRE_EBAD with err, or EXTWIRE_ENOMEM. */
int extwire_decode(struct extwire_args *a, const char *body, size_t len, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void extwire_free(struct extwire_args *a); /* a zeroed or freed one: no-op */

/* What one node came to, for the answer. UNDECIDED encodes as FAIL (filter) and 0 (prioritize). */
enum extwire_state {
	EXTWIRE_UNDECIDED = 0,
	EXTWIRE_PASS,
	EXTWIRE_FAIL,         /* FailedNodes: the node may take the pod later */
	EXTWIRE_UNRESOLVABLE, /* FailedAndUnresolvableNodes: preemption cannot help */
};

struct extwire_node {
	enum extwire_state state;
	int score;    /* prioritize, PASS: 0..10 (extender/v1 MaxExtenderPriority) */
	char *reason; /* FAIL, UNRESOLVABLE: the caller's (NULL: "") */
};

/*
 * ExtenderFilterResult for a's nodes and their verdicts v[0..a->n), or, error not NULL, the
 * Error answer (both node forms null, no node judged). In the Nodes form the passing Node
 * objects move from a->root into the answer (no copy: a->objs no longer belong to a's tree).
 * *n_out: the nodes filtered out. The JSON text (caller frees), or NULL when out of memory.
 */
char *extwire_filter_result(struct extwire_args *a, const struct extwire_node *v, const char *error,
                            size_t *n_out);

/* HostPriorityList: one {"Host", "Score"} per node in a's order, v[i].score where PASS, else 0.
 * The JSON text (caller frees), or NULL when out of memory. */
char *extwire_priorities(const struct extwire_args *a, const struct extwire_node *v);

#endif
