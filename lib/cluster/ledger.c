/*
 * ledger: per-node locks and in-flight reservations.
 *
 * A table (one mutex) maps node names to nodes; each node has its own mutex held across a
 * check-and-reserve (let go, never across an API call, by ledger_release: the user still
 * counts), so checks on different nodes never wait for each other. A node lives while someone
 * uses it (users > 0, counted under the table mutex) or it holds reservations; the last user of
 * an empty node frees it, so the table tracks only nodes with recent placements instead of
 * every node name ever seen. Its generation (settled) only grows while it lives.
 */
#include "ledger.h"

#include "monotime.h"
#include "pod.h"
#include "resvrule.h"
#include "satmath.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS       4096 /* power of two; chains stay short up to LEDGER_MAX_NODES */
#define NODE_NAME_MAX 253  /* DNS subdomain, the longest node name */
#define INITIAL_CAP   1

struct entry {
	char key[LEDGER_KEY_MAX];
	char uid[LEDGER_UID_MAX];   /* "" when unknown */
	char claim[LEDGER_UID_MAX]; /* ledger_reserve_claim's DRA claim uid, "" when none */
	uint64_t bytes;
	uint64_t reserved_ms;
	uint64_t expires_ms;
	int unseen; /* reserved with the unseen bound (ledger_reserve_unseen) */
};

struct ledger_node {
	pthread_mutex_t mu;
	struct ledger *owner;
	struct ledger_node *next; /* bucket chain; owner->mu */
	unsigned users;           /* holders and waiters of mu; owner->mu */
	struct entry *entries;    /* mu (or owner->mu when users == 0) */
	size_t n, cap;
	uint64_t settled; /* ledger_generation: entries dropped because a view showed their pod */
	uint64_t changes; /* ledger_version: entries added, refreshed or dropped */
	char name[NODE_NAME_MAX + 1];
};

struct ledger {
	pthread_mutex_t mu; /* buckets, n_nodes, every node's next and users */
	uint64_t ttl_ms;
	struct ledger_node *buckets[BUCKETS];
	size_t n_nodes;
	atomic_size_t n_entries;   /* reservations held over all nodes, for ledger_size */
	atomic_uint_least64_t now; /* latest now_ms any call passed: the sweep's clock */
	atomic_uint_least64_t unseen_dropped; /* ledger_unseen_dropped */
};

static size_t bucket_of(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return (size_t)(h & (BUCKETS - 1));
}

/* Remember the latest time seen, so a sweep can tell expired entries without a clock of its
 * own (tests drive time through now_ms). */
static void observe_now(struct ledger *l, uint64_t now_ms)
{
	uint_least64_t seen = atomic_load(&l->now);

	while (seen < now_ms && !atomic_compare_exchange_weak(&l->now, &seen, now_ms))
		;
}

static void node_free(struct ledger_node *n)
{
	if (n == NULL)
		return;
	pthread_mutex_destroy(&n->mu);
	free(n->entries);
	free(n);
}

/* The entry a put of the pod named key (uid, NULL or "" when unknown) refreshes: pod.h's strict
 * rule (reservations.h, "A put of a pod that already has an entry"). */
static int same_pod(const struct entry *e, const char *key, const char *uid)
{
	return pod_same_strict(e->key, e->uid, key, uid);
}

#define BY_VIEW 1 /* node_filter: the pods are visible in a view (settle, reconcile) */
#define EXACT   2 /* node_filter: the entry of exactly that key and uid ("" none) */

/* Whether e is the entry of pod key / uid: with BY_VIEW settled by it (resv_settled_by), with
 * EXACT the same key and uid, else gone with it (resv_gone_by: ledger_forget). */
static int filter_matches(const struct entry *e, const char *key, const char *uid, int how)
{
	if (how & EXACT)
		return strcmp(e->key, key) == 0 && strcmp(e->uid, uid ? uid : "") == 0;
	if (how & BY_VIEW)
		return resv_settled_by(e->key, e->uid, key, uid);
	return resv_gone_by(e->key, e->uid, key, uid);
}

/* Drop expired entries (resv_expired; now_ms 0 expires none) and those of the pods
 * keys[i] / uids[i] (uids may be NULL) by filter_matches, keeping the order of the rest. how
 * BY_VIEW: such drops count in the node's generation. Returns how many were dropped. */
static size_t node_filter(struct ledger_node *n, const char *const *keys, const char *const *uids,
                          size_t n_keys, uint64_t now_ms, int how)
{
	int by_view = how & BY_VIEW;

	size_t kept = 0, dropped;

	for (size_t i = 0; i < n->n; i++) {
		const struct entry *e = &n->entries[i];
		int drop = resv_expired(e->expires_ms, now_ms);

		if (drop && e->unseen)
			atomic_fetch_add(&n->owner->unseen_dropped, 1);
		for (size_t k = 0; !drop && keys != NULL && k < n_keys; k++)
			drop = filter_matches(e, keys[k], uids ? uids[k] : NULL, how);
		if (drop && by_view && !resv_expired(e->expires_ms, now_ms))
			n->settled++; /* settled by a view (ledger_generation) */
		if (drop)
			continue;
		if (kept != i)
			n->entries[kept] = n->entries[i];
		kept++;
	}
	dropped = n->n - kept;
	n->n = kept;
	n->changes += dropped;
	atomic_fetch_sub(&n->owner->n_entries, dropped);
	return dropped;
}

/* Unlink node n from the table. Caller holds l->mu. */
static void unlink_node(struct ledger *l, struct ledger_node *n)
{
	struct ledger_node **pp = &l->buckets[bucket_of(n->name)];

	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	l->n_nodes--;
}

/*
 * At LEDGER_MAX_NODES: free the unused nodes whose reservations have all expired (a node that
 * left the cluster is never checked again, so nothing else would drop them). Caller holds
 * l->mu; users == 0 means no thread can touch the node's entries meanwhile.
 */
static void sweep(struct ledger *l)
{
	uint64_t now = atomic_load(&l->now);

	for (size_t b = 0; b < BUCKETS; b++) {
		struct ledger_node **pp = &l->buckets[b];

		while (*pp != NULL) {
			struct ledger_node *n = *pp;
			int live = 0;

			for (size_t i = 0; i < n->n && !live; i++)
				live = !resv_expired(n->entries[i].expires_ms, now);
			if (n->users > 0 || live) {
				pp = &n->next;
				continue;
			}
			*pp = n->next;
			l->n_nodes--;
			atomic_fetch_sub(&l->n_entries, n->n);
			for (size_t i = 0; i < n->n; i++)
				if (n->entries[i].unseen)
					atomic_fetch_add(&l->unseen_dropped, 1);
			node_free(n);
		}
	}
}

struct ledger *ledger_new(uint64_t ttl_ms)
{
	struct ledger *l = NULL;

	if (ttl_ms == 0)
		goto err;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		goto err;
	if (pthread_mutex_init(&l->mu, NULL) != 0)
		goto err;
	l->ttl_ms = ttl_ms;
	atomic_init(&l->n_entries, 0);
	atomic_init(&l->now, 0);
	return l;
err:
	free(l);
	return NULL;
}

void ledger_free(struct ledger *l)
{
	if (l == NULL)
		return;
	for (size_t b = 0; b < BUCKETS; b++) {
		struct ledger_node *n = l->buckets[b];

		while (n != NULL) {
			struct ledger_node *next = n->next;

			node_free(n);
			n = next;
		}
	}
	pthread_mutex_destroy(&l->mu);
	free(l);
}

uint64_t ledger_now_ms(void)
{
	return monotime_ms();
}

/* Find or create the node called name, and count the caller as a user. Holds l->mu. */
static struct ledger_node *acquire(struct ledger *l, const char *name, size_t len)
{
	size_t b = bucket_of(name);
	struct ledger_node *n;

	for (n = l->buckets[b]; n != NULL; n = n->next)
		if (strcmp(n->name, name) == 0)
			goto found;
	if (l->n_nodes >= LEDGER_MAX_NODES)
		sweep(l);
	if (l->n_nodes >= LEDGER_MAX_NODES)
		return NULL;
	n = calloc(1, sizeof(*n));
	if (n == NULL)
		return NULL;
	if (pthread_mutex_init(&n->mu, NULL) != 0) {
		free(n);
		return NULL;
	}
	memcpy(n->name, name, len + 1);
	n->owner = l;
	n->next = l->buckets[b];
	l->buckets[b] = n;
	l->n_nodes++;
found:
	n->users++;
	return n;
}

/* The length of a usable node name (1..NODE_NAME_MAX), 0 otherwise. */
static size_t name_len(const char *node)
{
	size_t len = node ? strnlen(node, NODE_NAME_MAX + 1) : 0;
	return len > NODE_NAME_MAX ? 0 : len;
}

struct ledger_node *ledger_lock(struct ledger *l, const char *node)
{
	struct ledger_node *n;
	size_t len = name_len(node);

	if (l == NULL || len == 0)
		return NULL;
	pthread_mutex_lock(&l->mu);
	n = acquire(l, node, len);
	pthread_mutex_unlock(&l->mu);
	/* Taken outside the table mutex: a slow check on one node must not stall the others.
	 * users > 0 keeps n alive while we wait. */
	if (n != NULL)
		pthread_mutex_lock(&n->mu);
	return n;
}

void ledger_unlock(struct ledger_node *n)
{
	struct ledger *l;

	if (n == NULL)
		return;
	l = n->owner;
	pthread_mutex_unlock(&n->mu);
	pthread_mutex_lock(&l->mu);
	/* The last user of an empty node frees it; any later ledger_lock creates a fresh one. */
	if (--n->users == 0 && n->n == 0) {
		unlink_node(l, n);
		node_free(n);
	}
	pthread_mutex_unlock(&l->mu);
}

void ledger_release(struct ledger_node *n)
{
	if (n != NULL)
		pthread_mutex_unlock(&n->mu); /* users still counts us: n stays */
}

void ledger_relock(struct ledger_node *n)
{
	if (n != NULL)
		pthread_mutex_lock(&n->mu);
}

int ledger_tryrelock(struct ledger_node *n)
{
	return n != NULL && pthread_mutex_trylock(&n->mu) == 0;
}

void ledger_end(struct ledger_node *n)
{
	struct ledger *l;

	if (n == NULL)
		return;
	l = n->owner;
	pthread_mutex_lock(&l->mu);
	/* As ledger_unlock: users 0 means no thread can touch its entries meanwhile. */
	if (--n->users == 0 && n->n == 0) {
		unlink_node(l, n);
		node_free(n);
	}
	pthread_mutex_unlock(&l->mu);
}

uint64_t ledger_generation(const struct ledger_node *n)
{
	return n != NULL ? n->settled : 0;
}

uint64_t ledger_version(const struct ledger_node *n)
{
	return n != NULL ? n->changes : 0;
}

size_t ledger_settle(struct ledger_node *n, const char *const *keys, const char *const *uids,
                     size_t n_keys, uint64_t now_ms)
{
	if (n == NULL)
		return 0;
	observe_now(n->owner, now_ms);
	return node_filter(n, keys, uids, n_keys, now_ms, BY_VIEW);
}

struct ledger_node *ledger_trylock(struct ledger *l, const char *node, int *busy)
{
	struct ledger_node *n;
	size_t len = name_len(node);

	*busy = 0;
	if (l == NULL || len == 0)
		return NULL;
	pthread_mutex_lock(&l->mu);
	n = acquire(l, node, len);
	if (n != NULL && pthread_mutex_trylock(&n->mu) != 0) {
		/* Held: give the use back (the holder outlives us, so n is not freed here). */
		n->users--;
		n = NULL;
		*busy = 1;
	}
	pthread_mutex_unlock(&l->mu);
	return n;
}

size_t ledger_reconcile(struct ledger_node *n, const char *const *visible_keys, size_t n_keys,
                        uint64_t now_ms)
{
	if (n == NULL)
		return 0;
	observe_now(n->owner, now_ms);
	return node_filter(n, visible_keys, NULL, visible_keys ? n_keys : 0, now_ms, BY_VIEW);
}

uint64_t ledger_pending_bytes(struct ledger_node *n, const char *exclude_key, uint64_t now_ms)
{
	uint64_t sum = 0;

	if (n == NULL)
		return 0;
	observe_now(n->owner, now_ms);
	for (size_t i = 0; i < n->n; i++) {
		const struct entry *e = &n->entries[i];

		if (resv_expired(e->expires_ms, now_ms) ||
		    (exclude_key && strcmp(exclude_key, e->key) == 0))
			continue;
		sum = sat_add(sum, e->bytes);
	}
	return sum;
}

size_t ledger_entries(struct ledger_node *n, struct ledger_entry_view *out, size_t cap,
                      uint64_t now_ms)
{
	size_t copied = 0;

	if (n == NULL || out == NULL)
		return 0;
	observe_now(n->owner, now_ms);
	for (size_t i = 0; i < n->n && copied < cap; i++) {
		const struct entry *e = &n->entries[i];

		if (resv_expired(e->expires_ms, now_ms))
			continue;
		memcpy(out[copied].key, e->key, sizeof(out[copied].key));
		out[copied].bytes = e->bytes;
		out[copied].reserved_ms = e->reserved_ms;
		out[copied].expires_ms = e->expires_ms;
		copied++;
	}
	return copied;
}

size_t ledger_visit(struct ledger_node *n, uint64_t now_ms, ledger_visit_fn fn, void *ctx)
{
	size_t visited = 0;

	if (n == NULL)
		return 0;
	observe_now(n->owner, now_ms);
	for (size_t i = 0; i < n->n; i++) {
		const struct entry *e = &n->entries[i];

		if (resv_expired(e->expires_ms, now_ms))
			continue;
		if (fn != NULL)
			fn(ctx, e->key, e->uid, e->claim, e->bytes, e->reserved_ms);
		visited++;
	}
	return visited;
}

/* Make room for one more entry: drop expired ones, then grow up to the cap. */
static int make_room(struct ledger_node *n, uint64_t now_ms)
{
	struct entry *grown;
	size_t cap;

	if (n->n < n->cap)
		return 0;
	node_filter(n, NULL, NULL, 0, now_ms, 0);
	if (n->n < n->cap)
		return 0;
	if (n->cap >= LEDGER_MAX_PER_NODE)
		return LEDGER_EFULL;
	cap = n->cap ? n->cap * 2 : INITIAL_CAP;
	if (cap > LEDGER_MAX_PER_NODE)
		cap = LEDGER_MAX_PER_NODE;
	grown = realloc(n->entries, cap * sizeof(*grown));
	if (grown == NULL)
		return LEDGER_ENOMEM;
	n->entries = grown;
	n->cap = cap;
	return 0;
}

int ledger_reserve(struct ledger_node *n, const char *key, uint64_t bytes, uint64_t now_ms)
{
	return ledger_reserve_uid(n, key, NULL, bytes, now_ms);
}

static int reserve(struct ledger_node *n, const char *key, const char *uid, const char *claim,
                   uint64_t bytes, uint64_t ttl_ms, int unseen, uint64_t now_ms, uint64_t stamp_ms);

int ledger_reserve_uid(struct ledger_node *n, const char *key, const char *uid, uint64_t bytes,
                       uint64_t now_ms)
{
	return reserve(n, key, uid, NULL, bytes, 0, 0, now_ms, now_ms);
}

int ledger_reserve_unseen(struct ledger_node *n, const char *key, const char *uid, uint64_t bytes,
                          uint64_t ttl_ms, uint64_t now_ms)
{
	if (ttl_ms == 0)
		return LEDGER_EINVAL;
	return reserve(n, key, uid, NULL, bytes, ttl_ms, 1, now_ms, now_ms);
}

int ledger_reserve_claim(struct ledger_node *n, const char *key, const char *uid, const char *claim,
                         uint64_t bytes, uint64_t unseen_ttl_ms, uint64_t now_ms, uint64_t stamp_ms)
{
	return reserve(n, key, uid, claim, bytes, unseen_ttl_ms, unseen_ttl_ms != 0, now_ms,
	               stamp_ms);
}

uint64_t ledger_unseen_dropped(struct ledger *l)
{
	return atomic_load(&l->unseen_dropped);
}

/*
 * Refresh entry e with a later put of the same pod (reservations.h, "A put of a pod that already
 * has an entry"): it never lowers what counts. The larger bytes and the later expiry stay; the
 * entry stays unseen only if both puts were a pod CREATE's; a uid is taken only when the entry had
 * none, and a claim too (an entry's claim only adds to what counts: placement.h, item.dra_claim).
 * So a review replayed or forged under a pod's name (the same uid, none, or a fresh one:
 * then it is another entry) can add a reservation but never shrink, shorten or take over one.
 */
static void refresh(struct entry *e, const char *uid, size_t ulen, const char *claim, size_t clen,
                    uint64_t bytes, uint64_t expires, int unseen, uint64_t stamp_ms)
{
	if (bytes > e->bytes)
		e->bytes = bytes;
	if (expires > e->expires_ms)
		e->expires_ms = expires;
	e->unseen = e->unseen && unseen;
	e->reserved_ms = stamp_ms;
	if (e->uid[0] == '\0' && ulen > 0)
		memcpy(e->uid, uid, ulen + 1);
	if (e->claim[0] == '\0' && clen > 0)
		memcpy(e->claim, claim, clen + 1);
}

/* ttl_ms 0: the ledger's; else the shorter of the two. The expiry runs from stamp_ms, and
 * reserved_ms is stamp_ms: both on the real clock, whatever now_ms was held back to. */
static int reserve(struct ledger_node *n, const char *key, const char *uid, const char *claim,
                   uint64_t bytes, uint64_t ttl_ms, int unseen, uint64_t now_ms, uint64_t stamp_ms)
{
	uint64_t ttl, expires;
	size_t len, ulen = uid ? strnlen(uid, LEDGER_UID_MAX) : 0;
	size_t clen = claim ? strnlen(claim, LEDGER_UID_MAX) : 0;
	int rc;

	if (n == NULL || key == NULL || ulen >= LEDGER_UID_MAX || clen >= LEDGER_UID_MAX ||
	    stamp_ms < now_ms)
		return LEDGER_EINVAL;
	len = strnlen(key, LEDGER_KEY_MAX);
	if (len == 0 || len >= LEDGER_KEY_MAX)
		return LEDGER_EINVAL;
	observe_now(n->owner, now_ms);
	ttl = n->owner->ttl_ms;
	if (ttl_ms != 0 && ttl_ms < ttl)
		ttl = ttl_ms;
	expires = sat_add(stamp_ms, ttl);
	for (size_t i = 0; i < n->n; i++) {
		if (!same_pod(&n->entries[i], key, uid))
			continue;
		/* A retried placement refreshes its reservation instead of adding a second. */
		refresh(&n->entries[i], uid, ulen, claim, clen, bytes, expires, unseen, stamp_ms);
		n->changes++;
		return 0;
	}
	rc = make_room(n, now_ms);
	if (rc != 0)
		return rc;
	memcpy(n->entries[n->n].key, key, len + 1);
	memcpy(n->entries[n->n].uid, uid ? uid : "", ulen + 1);
	memcpy(n->entries[n->n].claim, claim ? claim : "", clen + 1);
	n->entries[n->n].bytes = bytes;
	n->entries[n->n].reserved_ms = stamp_ms;
	n->entries[n->n].expires_ms = expires;
	n->entries[n->n].unseen = unseen;
	n->n++;
	n->changes++;
	atomic_fetch_add(&n->owner->n_entries, 1);
	return 0;
}

size_t ledger_remove(struct ledger_node *n, const char *key, const char *uid)
{
	if (n == NULL || key == NULL)
		return 0;
	/* Only the exact entry, live or expired (at time 0 nothing has expired): another pod of
	 * the name (another uid, or an entry without one while uid is known) is kept. */
	return node_filter(n, &key, &uid, 1, 0, EXACT);
}

/* Drop the entries of key on one locked node; with a uid on both sides, only the same pod. */
static size_t forget_on(struct ledger_node *n, const char *key, const char *uid)
{
	return node_filter(n, &key, &uid, 1, 0, 0);
}

/* Pin every node (users++) under the table mutex, so each can then be locked alone: never
 * hold the table mutex while waiting for a node (ledger_unlock takes them the other way). The
 * table holds only nodes with recent placements, so this is short. Returns the pinned nodes
 * (caller frees the array and ledger_unlock()s each after locking it), NULL when none. */
/* Give back a use taken by pin_all() without holding the node's lock (ledger_unlock's
 * bookkeeping: the last user of an empty node frees it). */
static void unpin(struct ledger_node *n)
{
	struct ledger *l = n->owner;

	pthread_mutex_lock(&l->mu);
	if (--n->users == 0 && n->n == 0) {
		unlink_node(l, n);
		node_free(n);
	}
	pthread_mutex_unlock(&l->mu);
}

static struct ledger_node **pin_all(struct ledger *l, size_t *n_held)
{
	struct ledger_node **held = NULL;

	*n_held = 0;
	pthread_mutex_lock(&l->mu);
	if (l->n_nodes > 0 && (held = calloc(l->n_nodes, sizeof(*held))) != NULL) {
		for (size_t b = 0; b < BUCKETS; b++)
			for (struct ledger_node *n = l->buckets[b];
			     n != NULL && *n_held < l->n_nodes; n = n->next) {
				n->users++;
				held[(*n_held)++] = n;
			}
	}
	pthread_mutex_unlock(&l->mu);
	return held;
}

size_t ledger_forget(struct ledger *l, const char *key, const char *uid)
{
	size_t n_held = 0, dropped = 0;

	if (l == NULL || key == NULL || key[0] == '\0')
		return 0;
	struct ledger_node **held = pin_all(l, &n_held);
	for (size_t i = 0; i < n_held; i++) {
		pthread_mutex_lock(&held[i]->mu);
		dropped += forget_on(held[i], key, uid);
		ledger_unlock(held[i]);
	}
	free(held);
	return dropped;
}

size_t ledger_each(struct ledger *l, uint64_t now_ms, ledger_each_fn fn, void *ctx)
{
	size_t n_held = 0, visited = 0;

	if (l == NULL || fn == NULL)
		return 0;
	struct ledger_node **held = pin_all(l, &n_held);
	for (size_t i = 0; i < n_held; i++) {
		/* Never wait: the caller is /metrics, served by the one thread of the health
		 * listener (/healthz, /readyz too). No placement holds a node's lock across an API
		 * call any more, but one may hold it while deciding over thousands of pods. A node
		 * being checked right now is skipped this time. */
		if (pthread_mutex_trylock(&held[i]->mu) != 0) {
			unpin(held[i]);
			continue;
		}
		uint64_t bytes = ledger_pending_bytes(held[i], NULL, now_ms);
		if (bytes > 0) {
			fn(ctx, held[i]->name, bytes);
			visited++;
		}
		ledger_unlock(held[i]);
	}
	free(held);
	return visited;
}

size_t ledger_size(struct ledger *l)
{
	return l ? atomic_load(&l->n_entries) : 0;
}
