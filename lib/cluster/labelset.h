/*
 * labelset: a copy of an object's metadata.labels (or any map of strings), in one allocation,
 * shaped as gpupolicy_labels (gpupolicy.h) so selectors match it.
 *
 * Used by the watch cache for Nodes (GPUMemoryPolicy spec.nodeSelector) and GPU pods (tier
 * podSelector), and by the API path over objects it fetched. Values that are not strings are
 * skipped (the API server never sends them). Not thread-safe by itself: the owner's lock.
 */
#ifndef GMG_LABELSET_H
#define GMG_LABELSET_H

#include <stddef.h>

#include "gpupolicy.h"

struct cJSON;

#define LABELSET_MAX 1024 /* labels kept per object: the first ones; more are not kept */

#define LABELSET_ENOMEM (-1)

struct labelset {
	void *block;               /* the pointers then the strings; NULL when empty */
	struct gpupolicy_labels l; /* l.kv points into block */
};

/* Replace *ls with a copy of the string members of map (an object, or NULL/non-object: empty).
 * 0, or LABELSET_ENOMEM with *ls emptied. */
int labelset_copy(struct labelset *ls, const struct cJSON *map);

/* Replace *ls with a copy of the pairs of l (NULL: empty). 0, or LABELSET_ENOMEM. */
int labelset_copy_pairs(struct labelset *ls, const struct gpupolicy_labels *l);

/* Free the copy; *ls becomes empty. */
void labelset_clear(struct labelset *ls);

#endif
