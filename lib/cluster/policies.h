/*
 * policies: the watch cache's store of GPUMemoryPolicy objects (gpupolicy.h), filled by the
 * informer (informer.h, the third kind) from a LIST then a WATCH of
 * /apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies, read by every placement.
 *
 * Each object is kept by name, parsed once when its event arrives. One the webhook cannot use
 * (gpupolicy_parse() refused it: the API server's validation was bypassed or is older than
 * this binary) is kept with its error, applies to nothing, and is counted and logged (and
 * written to its status once the status writer exists): never ignored silently.
 *
 * Synced: the store may be used once a LIST completed, or once the API server said the CRD is
 * not installed (404: no policy can exist; the informer keeps retrying, so a CRD installed
 * later is picked up). Before that, placements are refused (fail closed: a policy not yet read
 * may be stricter than the flags).
 *
 * Thread-safe: one writer (the informer's thread), any number of readers. Decisions (the
 * webhook's placements, the extender's filter, the per-node gauges) read a published generation
 * (policies_acquire): every change the writer makes publishes a new immutable one (the usable
 * policies in name order, and whether the store is synced); a reader holds its generation's
 * reference, not a lock, for as long as it uses the policies in it, so no decision holds a lock
 * of this store while it decides (the publication mutex is held only to swap the generation or
 * take a reference); the status writer matches nodes against one too. policies_each and the
 * counters read under the store's read lock. Lock order: the watch cache's store, then this one,
 * never the other way; no caller nests them.
 */
#ifndef GMG_POLICIES_H
#define GMG_POLICIES_H

#include <stddef.h>

#include "gpupolicy.h"
#include "watch.h"

struct cJSON;
struct metrics_writer;

#define POLICIES_MAX 1024 /* objects kept; past it an event is refused (POLICIES_EFULL) */

#define POLICIES_EINVAL (-1) /* no metadata.name: skipped */
#define POLICIES_ENOMEM (-2)
#define POLICIES_EFULL  (-3)

struct policies;

struct policies *policies_new(void);    /* NULL on allocation failure; caller owns it */
void policies_free(struct policies *s); /* NULL is a no-op; no call may be running */

/* Apply one watch event (or listed object, as WATCH_ADDED), borrowed. BOOKMARK and ERROR are
 * ignored. An object gpupolicy_parse() refuses is kept as invalid (0 is returned: the store
 * holds what the API server has). 0 or POLICIES_E*. */
int policies_apply(struct policies *s, enum watch_event_type type, const struct cJSON *obj);

/* Relist: mark all, apply the list, remove what is still marked; then synced when complete
 * (every listed object was stored), else not synced: an object the store could not hold
 * (POLICIES_EFULL, out of memory) may be stricter than the flags, so placements are refused
 * as before the first list, until a relist stores them all. */
void policies_resync_begin(struct policies *s);
void policies_resync_end(struct policies *s, int complete);

/* The API server says the CRD is not installed: empty, synced (see above). */
void policies_crd_missing(struct policies *s);

/* 1 once listed (or the CRD found missing). */
int policies_synced(struct policies *s);

/* A published generation (see above): policies_acquire returns the latest, referenced (never
 * NULL; out of memory at a publication, an empty unsynced one, so placements are refused until
 * the next change publishes); policies_release drops the reference (NULL is a no-op). The
 * gpupolicy pointers policies_gen_selecting gives stay valid until the release, whatever the
 * writer does meanwhile: gpupolicy_select() over the generation's usable policies in name order,
 * so the policies that apply to a node of these labels (NULL labels for a node whose labels are
 * unknown), at most min(room, GPUPOLICY_SELECT_MAX) (room: the entries out holds); it returns how
 * many were written to out. policies_gen_selecting_all: gpupolicy_select_all(), every policy
 * that selects the node, past the cap (at most room: the status writer's count). A NULL
 * generation selects nothing. policies_gen_synced: policies_synced as of that generation.
 * Thread-safe; policies_acquire takes a mutex for a pointer copy and an increment only. */
struct policies_gen;
const struct policies_gen *policies_acquire(struct policies *s);
void policies_release(const struct policies_gen *g);
int policies_gen_synced(const struct policies_gen *g);
size_t policies_gen_selecting(const struct policies_gen *g,
                              const struct gpupolicy_labels *node_labels,
                              const struct gpupolicy **out, size_t room);
size_t policies_gen_selecting_all(const struct policies_gen *g,
                                  const struct gpupolicy_labels *node_labels,
                                  const struct gpupolicy **out, size_t room);

/* Which pod attributes the tiers of the usable policies held select by: a bitwise or of
 * POLICIES_NEED_LABELS (a tier with a podSelector) and POLICIES_NEED_PRIORITY (a tier with
 * priorityClassNames); 0 when none (the watch cache then keeps neither for bound pods:
 * cache_set_pod_attrs). Thread-safe. */
#define POLICIES_NEED_LABELS   0x1u
#define POLICIES_NEED_PRIORITY 0x2u
unsigned policies_pod_attrs(struct policies *s);
/* The same for one object as the API server sends it (borrowed), before it is applied:
 * parsed as policies_apply() parses it, so an object that does not parse (applies nowhere)
 * needs nothing; out of memory, what its JSON asks, valid or not (a superset). Pure. */
unsigned policies_pod_attrs_of(const struct cJSON *obj);

struct policies_stats {
	size_t usable, invalid;
	int synced, crd_missing;
};
void policies_stats(struct policies *s, struct policies_stats *out);

/* One object as policies_each gives it (every pointer valid during the call only). */
struct policies_object {
	const char *name;
	const char *uid; /* metadata.uid, "" when absent */
	long long generation;
	const struct gpupolicy *p; /* NULL: unusable */
	const char *error;         /* the parse error, "" when usable */
	const char *ready;         /* status.conditions[type=Ready].status as read, "" if none */
	const char *transition;    /* ... and its lastTransitionTime, "" if none */
};

/* Call fn for every object under the read lock. */
typedef void (*policies_each_fn)(void *ctx, const struct policies_object *o);
void policies_each(struct policies *s, policies_each_fn fn, void *ctx);

/* metrics_collector_fn:
 *   gpu_memory_guard_policies{state="usable"|"invalid"}   gauge, objects held */
void policies_collect(void *ctx, struct metrics_writer *w);

#endif
