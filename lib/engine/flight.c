/* flight: the pods in flight the engine counts for the scheduler extender (flight.h). */
#include "flight.h"

#include "cache.h"
#include "demand.h"
#include "holds.h"
#include "metrics.h"
#include "monotime.h"
#include "placement.h"
#include "pod.h"
#include "reservations.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct flight {
	struct cache *cache;
	struct metrics *metrics;
	struct holds *holds;
};

struct flight *flight_new(struct cache *cache, struct metrics *metrics)
{
	struct flight *fl;

	if ((fl = calloc(1, sizeof(*fl))) == NULL)
		return NULL;
	fl->cache = cache;
	fl->metrics = metrics;
	if ((fl->holds = holds_new()) == NULL) {
		free(fl);
		return NULL;
	}
	return fl;
}

void flight_free(struct flight *fl)
{
	if (fl == NULL)
		return;
	holds_free(fl->holds);
	free(fl);
}

/* The cached pod of key ("namespace/name"): 0 with *p, or -1 (not a key, not cached). */
static int cached_pod(struct cache *c, const char *key, struct cache_pod *p)
{
	char ns[CACHE_KEY_MAX];
	const char *name;

	if (c == NULL || pod_key_split(key, ns, sizeof(ns), &name) != 0)
		return -1;
	return cache_get_pod(c, ns, name, p);
}

/* holds_prune's settled(): bound, finished, being deleted (never bound: pod_being_deleted), or
 * replaced by another pod of the same name. A key holds_put was not given by flight_hold is
 * settled too. */
static int hold_settled(void *ctx, const char *key, const char *uid)
{
	struct flight *fl = ctx;
	struct cache_pod p;
	char ns[CACHE_KEY_MAX];
	const char *name;

	if (pod_key_split(key, ns, sizeof(ns), &name) != 0)
		return 1;
	if (fl->cache == NULL || cache_get_pod(fl->cache, ns, name, &p) != 0)
		return 0;
	return strcmp(p.uid, uid) != 0 || p.node[0] != '\0' || p.finished || p.deleting;
}

void flight_prune(struct flight *fl, uint64_t now_ms)
{
	holds_prune(fl->holds, now_ms, hold_settled, fl);
}

static void item_add(void *ctx, const char *key, const char *uid, uint64_t bytes)
{
	resv_list_add(ctx, key, uid, NULL, bytes);
}

int flight_items(struct flight *fl, const char *node, const char *except_uid, uint64_t now_ms,
                 struct placement_item **items, size_t *n)
{
	struct resv_list l = {0};

	holds_each(fl->holds, node, except_uid, now_ms, item_add, &l, NULL);
	return resv_list_done(&l, items, n) == 0 ? 0 : FLIGHT_ENOMEM;
}

/* 1 when the two demands ask the same of every GPU container (what resolution reads). */
static int same_shares(const struct demand *a, const struct demand *b)
{
	if (a->shares != b->shares || a->n_parts != b->n_parts || a->gpus != b->gpus)
		return 0;
	for (size_t i = 0; i < a->n_parts && i < DEMAND_MAX_PARTS; i++) {
		const struct demand_share *x = &a->compact[i], *y = &b->compact[i];
		if (x->bytes != y->bytes || x->whole != y->whole || x->mig_units != y->mig_units ||
		    x->mig_pool != y->mig_pool || x->ppm != y->ppm || x->init != y->init ||
		    x->sidecar != y->sidecar || x->whole_card != y->whole_card ||
		    x->takes_cards != y->takes_cards)
			return 0;
	}
	return 1;
}

int flight_shows(struct flight *fl, const struct flight_pod *p)
{
	struct cache_pod cp;
	return p->uid != NULL && cached_pod(fl->cache, p->key, &cp) == 0 &&
	       strcmp(cp.uid, p->uid) == 0;
}

/* Whether the cache vouches for p, passed on n nodes (flight.h): 0 with *bytes to hold, or -1
 * with the reason. */
static int vouched(struct flight *fl, const struct flight_pod *p, size_t n, uint64_t *bytes,
                   enum metrics_hold_refusal *why)
{
	struct cache_pod cp;
	const struct demand *d = p->d;

	*why = METRICS_HOLD_NOT_CACHED;
	if (cached_pod(fl->cache, p->key, &cp) != 0)
		return -1;
	*why = METRICS_HOLD_OTHER_UID;
	if (strcmp(cp.uid, p->uid) != 0)
		return -1;
	*why = METRICS_HOLD_NOT_PENDING;
	if (cp.node[0] != '\0' || cp.finished || cp.deleting)
		return -1;
	*why = METRICS_HOLD_NO_DEMAND;
	if (cp.demand.status == DEMAND_NOT_GPU && p->dra_refs && d->gpus == 0) {
		/* GPUs by DRA claims only (the pod the filter judged): the most the claims the
		 * body names came to on the nodes judged, read from the DRA store */
		*bytes = p->most_bytes;
		return 0;
	}
	if (cp.demand.status != DEMAND_OK)
		return -1;
	if (!cp.demand.shares) {
		/* A body stating other bytes than the cached pod's, passing nowhere, is not this
		 * pod's judgement: it would end the pod's hold (a forged call, flight.h). */
		*why = METRICS_HOLD_BODY_MISMATCH;
		if (n == 0 && d->bytes != cp.demand.bytes)
			return -1;
		*bytes = cp.demand.bytes;
		if (p->dra_refs && d->bytes == cp.demand.bytes && p->most_bytes > *bytes)
			*bytes = p->most_bytes; /* and what its DRA claims came to */
		return 0;
	}
	/* An inferred share comes to other bytes on each node: hold the most it came to on the
	 * nodes judged, but only when the body asks what the cached pod asks; else the figure
	 * would be the body's. */
	*why = METRICS_HOLD_BODY_MISMATCH;
	if (!same_shares(&cp.demand, d))
		return -1;
	*bytes = p->most_bytes;
	return 0;
}

int flight_hold(struct flight *fl, const struct flight_pod *p, const char *const *nodes, size_t n,
                uint64_t now_ms, unsigned wait_ms)
{
	enum metrics_hold_refusal why;
	uint64_t bytes = 0;
	int rc;

	if (p->uid == NULL || p->uid[0] == '\0')
		return 0;
	if (n > 0 && wait_ms > 0) {
		const struct timespec step = {0, 5 * 1000 * 1000};
		double end = monotime_s() + wait_ms / 1000.0;
		while (!flight_shows(fl, p) && monotime_s() < end)
			nanosleep(&step, NULL);
	}
	if (vouched(fl, p, n, &bytes, &why) != 0) {
		if (n > 0)
			metrics_hold_refused(fl->metrics, why);
		return FLIGHT_EREFUSED;
	}
	rc = holds_put(fl->holds, p->key, p->uid, bytes, nodes, n, now_ms, HOLDS_TTL_MS);
	if (rc == 0 || rc == HOLDS_EGONE) /* gone: deleted while being judged, nothing to hold */
		return 0;
	return rc == HOLDS_EFULL ? FLIGHT_EFULL : FLIGHT_ENOMEM;
}

void flight_forget(struct flight *fl, const char *uid)
{
	if (uid != NULL && uid[0] != '\0')
		holds_forget(fl->holds, uid);
}

void flight_drop(struct flight *fl, const char *uid)
{
	if (uid != NULL && uid[0] != '\0')
		holds_drop(fl->holds, uid);
}
