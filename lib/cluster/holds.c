/* holds: the extender's pods in flight (holds.h). */
#include "holds.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "satmath.h"

struct hold {
	char *key, *uid;
	uint64_t bytes;
	uint64_t expires_ms;
	uint64_t *nodes; /* sorted hashes of the node names */
	size_t n;
};

struct holds {
	pthread_rwlock_t lock;
	struct hold *v;
	size_t n, cap;
	uint64_t gone[HOLDS_GONE_MAX]; /* hashes of uids forgotten (holds_forget), a ring */
	size_t n_gone, next_gone;
};

/* 64-bit FNV-1a. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 14695981039346656037ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

static int is_gone(const struct holds *h, uint64_t uid_hash)
{
	for (size_t i = 0; i < h->n_gone; i++)
		if (h->gone[i] == uid_hash)
			return 1;
	return 0;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int names(const struct hold *o, uint64_t hash)
{
	return bsearch(&hash, o->nodes, o->n, sizeof(hash), by_value) != NULL;
}

static void hold_clear(struct hold *o)
{
	free(o->key);
	free(o->uid);
	free(o->nodes);
	memset(o, 0, sizeof(*o));
}

/* Remove v[i], keeping no order. Lock held for writing. */
static void remove_at(struct holds *h, size_t i)
{
	hold_clear(&h->v[i]);
	h->v[i] = h->v[--h->n];
}

static size_t find(const struct holds *h, const char *uid)
{
	for (size_t i = 0; i < h->n; i++)
		if (strcmp(h->v[i].uid, uid) == 0)
			return i;
	return h->n;
}

struct holds *holds_new(void)
{
	struct holds *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return NULL;
	if (pthread_rwlock_init(&h->lock, NULL) != 0) {
		free(h);
		return NULL;
	}
	return h;
}

void holds_free(struct holds *h)
{
	if (h == NULL)
		return;
	for (size_t i = 0; i < h->n; i++)
		hold_clear(&h->v[i]);
	free(h->v);
	pthread_rwlock_destroy(&h->lock);
	free(h);
}

int holds_put(struct holds *h, const char *key, const char *uid, uint64_t bytes,
              const char *const *nodes, size_t n, uint64_t now_ms, uint64_t ttl_ms)
{
	struct hold o = {0};
	size_t i;

	if (key == NULL || uid == NULL || !key[0] || !uid[0] || n > HOLDS_MAX_NODES ||
	    (n > 0 && nodes == NULL))
		return HOLDS_EINVAL;
	if (n == 0) {
		holds_drop(h, uid);
		return 0;
	}
	/* Built outside the lock. */
	o.key = strdup(key);
	o.uid = strdup(uid);
	o.nodes = malloc(n * sizeof(*o.nodes));
	if (o.key == NULL || o.uid == NULL || o.nodes == NULL) {
		hold_clear(&o);
		return HOLDS_ENOMEM;
	}
	for (i = 0; i < n; i++)
		o.nodes[i] = name_hash(nodes[i]);
	qsort(o.nodes, n, sizeof(*o.nodes), by_value);
	o.n = n;
	o.bytes = bytes;
	o.expires_ms = sat_add(now_ms, ttl_ms);

	pthread_rwlock_wrlock(&h->lock);
	if (is_gone(h, name_hash(uid))) {
		pthread_rwlock_unlock(&h->lock);
		hold_clear(&o);
		return HOLDS_EGONE;
	}
	i = find(h, uid);
	if (i < h->n) {
		hold_clear(&h->v[i]);
		h->v[i] = o;
		pthread_rwlock_unlock(&h->lock);
		return 0;
	}
	/* Full: expired holds make room first. */
	for (size_t k = h->n; h->n >= HOLDS_MAX && k-- > 0;)
		if (h->v[k].expires_ms <= now_ms)
			remove_at(h, k);
	if (h->n >= HOLDS_MAX) {
		pthread_rwlock_unlock(&h->lock);
		hold_clear(&o);
		return HOLDS_EFULL;
	}
	if (h->n == h->cap) {
		size_t ncap = h->cap ? 2 * h->cap : 16;
		struct hold *p = realloc(h->v, ncap * sizeof(*p));
		if (p == NULL) {
			pthread_rwlock_unlock(&h->lock);
			hold_clear(&o);
			return HOLDS_ENOMEM;
		}
		h->v = p;
		h->cap = ncap;
	}
	h->v[h->n++] = o;
	pthread_rwlock_unlock(&h->lock);
	return 0;
}

void holds_drop(struct holds *h, const char *uid)
{
	size_t i;

	if (uid == NULL)
		return;
	pthread_rwlock_wrlock(&h->lock);
	if ((i = find(h, uid)) < h->n)
		remove_at(h, i);
	pthread_rwlock_unlock(&h->lock);
}

void holds_forget(struct holds *h, const char *uid)
{
	size_t i;

	if (uid == NULL || uid[0] == '\0')
		return;
	pthread_rwlock_wrlock(&h->lock);
	if ((i = find(h, uid)) < h->n)
		remove_at(h, i);
	h->gone[h->next_gone] = name_hash(uid);
	h->next_gone = (h->next_gone + 1) % HOLDS_GONE_MAX;
	if (h->n_gone < HOLDS_GONE_MAX)
		h->n_gone++;
	pthread_rwlock_unlock(&h->lock);
}

size_t holds_prune(struct holds *h, uint64_t now_ms, holds_settled_fn settled, void *ctx)
{
	size_t left;

	pthread_rwlock_wrlock(&h->lock);
	for (size_t i = h->n; i-- > 0;) {
		struct hold *o = &h->v[i];
		if (o->expires_ms <= now_ms || (settled && settled(ctx, o->key, o->uid)))
			remove_at(h, i);
	}
	left = h->n;
	pthread_rwlock_unlock(&h->lock);
	return left;
}

static void holds_rdlock(struct holds *h)
{
	pthread_rwlock_rdlock(&h->lock);
}

static void holds_unlock(struct holds *h)
{
	pthread_rwlock_unlock(&h->lock);
}

static size_t holds_each_locked(struct holds *h, const char *node, const char *except_uid,
                                uint64_t now_ms, holds_add_fn add, void *add_ctx,
                                uint64_t *bytes_out)
{
	uint64_t hash = name_hash(node), sum = 0;
	size_t given = 0;

	for (size_t i = 0; i < h->n; i++) {
		const struct hold *o = &h->v[i];
		if (o->expires_ms <= now_ms || (except_uid && strcmp(o->uid, except_uid) == 0) ||
		    !names(o, hash))
			continue;
		add(add_ctx, o->key, o->uid, o->bytes);
		sum = sat_add(sum, o->bytes);
		given++;
	}
	if (bytes_out)
		*bytes_out = sum;
	return given;
}

size_t holds_each(struct holds *h, const char *node, const char *except_uid, uint64_t now_ms,
                  holds_add_fn add, void *add_ctx, uint64_t *bytes_out)
{
	size_t given;

	holds_rdlock(h);
	given = holds_each_locked(h, node, except_uid, now_ms, add, add_ctx, bytes_out);
	holds_unlock(h);
	return given;
}

size_t holds_count(struct holds *h)
{
	size_t n;

	pthread_rwlock_rdlock(&h->lock);
	n = h->n;
	pthread_rwlock_unlock(&h->lock);
	return n;
}
