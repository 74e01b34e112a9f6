/*
 * reservations: begin / items / put / commit over the local ledger or the shared record. See
 * reservations.h.
 */
#include "reservations.h"

#include "errbuf.h"
#include "shared.h"

#include <stdlib.h>
#include <string.h>

static void reset(struct resv *r, enum resv_backend backend, uint64_t now_ms)
{
	memset(r, 0, sizeof(*r));
	r->backend = backend;
	r->now_ms = now_ms;
	r->stamp_ms = now_ms;
}

int resv_begin_ledger(struct resv *r, struct ledger_node *ln, uint64_t gen,
                      const struct resv_seen *seen, uint64_t now_ms)
{
	reset(r, RESV_LEDGER, now_ms);
	if (ln == NULL)
		return RESV_EINVAL;
	/* A view taken before an entry it could miss was settled: not a base to decide on. */
	if (ledger_generation(ln) != gen)
		return RESV_CONFLICT;
	r->ln = ln;
	if (seen != NULL)
		ledger_settle(ln, seen->keys, seen->uids, seen->n, now_ms);
	r->version = ledger_version(ln);
	return 0;
}

int resv_begin_record(struct resv *r, struct shared *s, const char *node, struct record *rec,
                      int fresh, const struct placement_item *visible, size_t n_visible,
                      uint64_t now_ms)
{
	reset(r, RESV_RECORD, now_ms);
	if (s == NULL || node == NULL || rec == NULL || (visible == NULL && n_visible > 0))
		return RESV_EINVAL;
	r->sh = s;
	r->node = node;
	r->rec = rec;
	r->fresh = fresh;
	r->mono_ms = ledger_now_ms();
	r->wall_ms = shared_now_wall_ms(s);
	r->visible = visible;
	r->n_visible = n_visible;
	return 0;
}

void resv_stamp_at(struct resv *r, uint64_t stamp_ms)
{
	if (stamp_ms > r->now_ms)
		r->stamp_ms = stamp_ms;
}

int resv_fresh(const struct resv *r)
{
	return r->backend == RESV_LEDGER || r->fresh;
}

/* ledger_visit: the live entries as items, borrowing the node's strings. */
struct collect {
	struct placement_item *items;
	size_t n, cap;
};

static void add_item(void *ctx, const char *key, const char *uid, const char *claim, uint64_t bytes,
                     uint64_t reserved_ms)
{
	struct collect *c = ctx;

	(void)reserved_ms;
	if (c->n < c->cap)
		c->items[c->n++] = (struct placement_item){.key = key,
		                                           .uid = uid[0] ? uid : NULL,
		                                           .bytes = bytes,
		                                           .dra_claim = claim[0] ? claim : NULL};
}

/* Free the items array (and, when owned, their strings). */
static void items_free(struct resv *r)
{
	for (size_t i = 0; r->own && r->items != NULL && i < r->n_items; i++) {
		free((char *)r->items[i].key);
		free((char *)r->items[i].uid);
		free((char *)r->items[i].dra_claim);
	}
	free(r->items);
	r->items = NULL;
	r->n_items = 0;
}

/* Copy the items' strings (resv_own_items). 0 or RESV_ENOMEM (the array freed). */
static int items_own(struct resv *r)
{
	for (size_t i = 0; i < r->n_items; i++) {
		struct placement_item *it = &r->items[i];
		const char *key = it->key, *uid = it->uid, *claim = it->dra_claim;

		it->key = key ? strdup(key) : NULL;
		it->uid = uid ? strdup(uid) : NULL;
		it->dra_claim = claim ? strdup(claim) : NULL;
		if ((key && !it->key) || (uid && !it->uid) || (claim && !it->dra_claim)) {
			r->n_items = i + 1; /* the copies made so far, this one's too */
			items_free(r);
			return RESV_ENOMEM;
		}
	}
	return 0;
}

void resv_own_items(struct resv *r)
{
	r->own = r->backend == RESV_LEDGER;
}

int resv_items(struct resv *r, const struct placement_item **items, size_t *n)
{
	size_t cap = 0;

	*items = NULL;
	*n = 0;
	items_free(r);
	if (r->backend == RESV_LEDGER && r->ln != NULL)
		cap = ledger_visit(r->ln, r->now_ms, NULL, NULL);
	else if (r->backend == RESV_RECORD && r->rec != NULL)
		cap = r->rec->n;
	if (cap == 0)
		return 0;
	if ((r->items = calloc(cap, sizeof(*r->items))) == NULL)
		return RESV_ENOMEM;
	if (r->backend == RESV_LEDGER) {
		struct collect c = {r->items, 0, cap};
		ledger_visit(r->ln, r->now_ms, add_item, &c);
		*n = c.n;
	} else {
		*n = record_items(r->rec, r->wall_ms, r->now_ms, r->items);
	}
	r->n_items = *n;
	if (r->own && items_own(r) != 0) {
		*n = 0;
		return RESV_ENOMEM;
	}
	*items = r->items;
	return 0;
}

/* The record's copy without the entries that stopped counting (expired, and the visible pods'
 * past the grace), before it takes the put; the unseen ones that expired are counted. */
static void prune_record(struct resv *r)
{
	r->unseen_dropped = record_unseen_expired(r->rec, r->wall_ms);
	record_prune(r->rec, r->wall_ms, r->visible, r->n_visible, r->mono_ms,
	             RECORD_SETTLE_GRACE_MS);
}

static int put_record(struct resv *r, const char *key, const char *uid)
{
	uint64_t ttl = shared_ttl_ms(r->sh);
	int rc;

	uint64_t stamp = shared_stamp_wall_ms(r->sh); /* never early on the shared clock */
	if (r->unseen_ttl_ms && r->unseen_ttl_ms < ttl)
		rc = record_put_claim(r->rec, key, uid, r->claim, r->bytes,
		                      stamp + r->unseen_ttl_ms, 1);
	else
		rc = record_put_claim(r->rec, key, uid, r->claim, r->bytes, stamp + ttl, 0);
	if (rc == RECORD_EFULL)
		return RESV_EFULL;
	if (rc == RECORD_ENOMEM)
		return RESV_ENOMEM;
	return rc != 0 ? RESV_EINVAL : 0;
}

int resv_put(struct resv *r, const char *key, const char *uid, const char *claim, uint64_t bytes,
             uint64_t unseen_ttl_ms)
{
	size_t klen = key != NULL ? strnlen(key, LEDGER_KEY_MAX) : 0;
	size_t ulen = uid != NULL ? strnlen(uid, LEDGER_UID_MAX) : 0;
	size_t clen = claim != NULL ? strnlen(claim, LEDGER_UID_MAX) : 0;

	/* The claim first: it may be one of the items' strings (resv_own_items' copies). */
	if (clen < LEDGER_UID_MAX)
		memcpy(r->claim, claim != NULL ? claim : "", clen + 1);
	/* The items borrowed the backend's strings: a record put may move them. */
	items_free(r);
	if (r->put || (r->backend == RESV_LEDGER ? r->ln == NULL : r->rec == NULL) ||
	    clen >= LEDGER_UID_MAX)
		return RESV_EINVAL;
	r->bytes = bytes;
	r->unseen_ttl_ms = unseen_ttl_ms;
	if (r->backend == RESV_RECORD) {
		prune_record(r);
		int rc = put_record(r, key, uid); /* record_put checks key and uid itself */
		if (rc != 0)
			return rc;
	} else if (klen == 0 || klen >= LEDGER_KEY_MAX || ulen >= LEDGER_UID_MAX) {
		return RESV_EINVAL;
	}
	memcpy(r->key, key, klen + 1);
	memcpy(r->uid, uid != NULL ? uid : "", ulen + 1);
	r->put = 1;
	return 0;
}

size_t resv_unseen_dropped(const struct resv *r)
{
	return r->unseen_dropped;
}

static int commit_ledger(struct resv *r)
{
	int rc;

	/* Changed while the caller had let the node go: what was decided may not hold. */
	if (ledger_version(r->ln) != r->version)
		return RESV_CONFLICT;
	rc = ledger_reserve_claim(r->ln, r->key, r->uid, r->claim, r->bytes, r->unseen_ttl_ms,
	                          r->now_ms, r->stamp_ms);
	if (rc == LEDGER_EFULL)
		return RESV_EFULL;
	if (rc == LEDGER_ENOMEM)
		return RESV_ENOMEM;
	if (rc != 0)
		return RESV_EINVAL;
	r->version = ledger_version(r->ln);
	return RESV_COMMITTED;
}

static int commit_record(struct resv *r, char *err, size_t errlen)
{
	int rc = shared_write(r->sh, r->node, r->rec, err, errlen);

	switch (rc) {
	case 0:
		return RESV_COMMITTED;
	case SHARED_ECONFLICT:
		return RESV_CONFLICT;
	case SHARED_EBUDGET:
		return RESV_EBUDGET;
	case SHARED_ENOMEM:
		return RESV_ENOMEM;
	case SHARED_EINVAL:
		return RESV_EINVAL;
	default:
		return RESV_EAPI;
	}
}

int resv_commit(struct resv *r, char *err, size_t errlen)
{
	free(r->items);
	r->items = NULL;
	if (!r->put) {
		errbuf_set(err, errlen, "reservations: nothing to commit");
		return RESV_EINVAL;
	}
	if (r->backend == RESV_LEDGER)
		return commit_ledger(r);
	return commit_record(r, err, errlen);
}

void resv_end(struct resv *r)
{
	if (r == NULL)
		return;
	items_free(r);
}

/* ---- read-only copies (resv_peek_*) ---- */

void resv_list_add(struct resv_list *l, const char *key, const char *uid, const char *claim,
                   uint64_t bytes)
{
	struct placement_item it = {.bytes = bytes};
	int has_uid = uid != NULL && uid[0] != '\0', has_claim = claim != NULL && claim[0] != '\0';

	if (l->nomem || key == NULL)
		return;
	if (l->n == l->cap) {
		size_t ncap = l->cap ? 2 * l->cap : 8;
		struct placement_item *p = realloc(l->items, ncap * sizeof(*p));
		if (p == NULL) {
			l->nomem = 1;
			return;
		}
		l->items = p;
		l->cap = ncap;
	}
	it.key = strdup(key);
	it.uid = has_uid ? strdup(uid) : NULL;
	it.dra_claim = has_claim ? strdup(claim) : NULL;
	if (it.key == NULL || (has_uid && it.uid == NULL) || (has_claim && it.dra_claim == NULL)) {
		free((char *)it.key);
		free((char *)it.uid);
		free((char *)it.dra_claim);
		l->nomem = 1;
		return;
	}
	l->items[l->n++] = it;
}

int resv_list_done(struct resv_list *l, struct placement_item **items, size_t *n)
{
	if (l->nomem) {
		resv_peek_free(l->items, l->n);
		*items = NULL;
		*n = 0;
		return RESV_ENOMEM;
	}
	*items = l->items;
	*n = l->n;
	return 0;
}

/* The entry's DRA claim is kept: the core counts the pod among the claim's pods (issue 21). */
static void peek_ledger_one(void *ctx, const char *key, const char *uid, const char *claim,
                            uint64_t bytes, uint64_t reserved_ms)
{
	(void)reserved_ms;
	resv_list_add(ctx, key, uid, claim, bytes);
}

static void peek_record_one(void *ctx, const char *key, const char *uid, const char *claim,
                            uint64_t bytes)
{
	resv_list_add(ctx, key, uid, claim, bytes);
}

int resv_peek_ledger(struct ledger *l, const char *node, uint64_t now_ms, int may_block,
                     struct placement_item **items, size_t *n)
{
	struct resv_list pk = {0};
	struct ledger_node *ln;
	int busy = 0;

	*items = NULL;
	*n = 0;
	ln = may_block ? ledger_lock(l, node) : ledger_trylock(l, node, &busy);
	if (ln == NULL)
		return busy ? RESV_EBUSY : RESV_EUNTRACKED;
	ledger_visit(ln, now_ms, peek_ledger_one, &pk);
	ledger_unlock(ln);
	return resv_list_done(&pk, items, n);
}

int resv_peek_record(struct shared *s, const char *node, struct placement_item **items, size_t *n)
{
	struct resv_list pk = {0};

	*items = NULL;
	*n = 0;
	shared_each_entry(s, node, peek_record_one, &pk);
	return resv_list_done(&pk, items, n);
}

void resv_peek_free(struct placement_item *items, size_t n)
{
	for (size_t i = 0; items != NULL && i < n; i++) {
		free((char *)items[i].key);
		free((char *)items[i].uid);
		free((char *)items[i].dra_claim);
	}
	free(items);
}
