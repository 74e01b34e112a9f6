/* view: a node's snapshot copied out of a backend (view.h). */
#include "view.h"

#include "cache.h"

#include <stdlib.h>
#include <string.h>

/* The pool's length for one string: its bytes and NUL, or 0 for NULL. */
static size_t str_len(const char *s)
{
	return s != NULL ? strlen(s) + 1 : 0;
}

/* Copy s into the pool at *at; NULL stays NULL. */
static const char *pool_put(char *pool, size_t *at, const char *s)
{
	size_t n = str_len(s);
	char *d = pool + *at;

	if (s == NULL)
		return NULL;
	memcpy(d, s, n);
	*at += n;
	return d;
}

struct copying {
	struct view_node *out;
	int rc;
};

/* The sizes of the copy: the pool's bytes, and the shares and DRA figures of every pod. */
static void sizes(const struct cache_node_view *v, size_t *pool, size_t *shares)
{
	*pool = str_len(v->name);
	*shares = 0;
	for (size_t i = 0; i < v->n_pods; i++) {
		const struct placement_item *it = &v->pods[i];

		*pool += str_len(it->key) + str_len(it->uid) + str_len(it->priority_class);
		*shares += it->shares != NULL ? it->n_shares : 0;
		*shares += it->dra_figs != NULL ? it->n_dra_figs : 0;
	}
}

/* The pods' items, strings, shares and labels into out's storage (allocated). */
static int copy_pods(const struct cache_node_view *v, struct view_node *out, size_t *at)
{
	size_t k = 0;

	for (size_t i = 0; i < v->n_pods; i++) {
		const struct placement_item *src = &v->pods[i];
		struct placement_item *it = &out->items[i];

		*it = *src;
		it->key = pool_put(out->pool, at, src->key);
		it->uid = pool_put(out->pool, at, src->uid);
		it->priority_class = pool_put(out->pool, at, src->priority_class);
		if (src->shares != NULL && src->n_shares > 0) {
			memcpy(&out->shares[k], src->shares, src->n_shares * sizeof(*out->shares));
			it->shares = &out->shares[k];
			k += src->n_shares;
		}
		/* a DRA pod's figures point into the cache's pod, as shares do: copied alike */
		if (src->dra_figs != NULL && src->n_dra_figs > 0) {
			memcpy(&out->shares[k], src->dra_figs,
			       src->n_dra_figs * sizeof(*out->shares));
			it->dra_figs = &out->shares[k];
			k += src->n_dra_figs;
		}
		if (src->labels != NULL) {
			if (labelset_copy_pairs(&out->pod_labels[i], src->labels) != 0)
				return VIEW_ENOMEM;
			it->labels = &out->pod_labels[i].l;
		}
	}
	return 0;
}

/* Under the cache's read lock: copy, nothing else. */
static void copy_view(void *ctx, const struct cache_node_view *v)
{
	struct copying *c = ctx;
	struct view_node *out = c->out;
	size_t pool_n, shares_n, at = 0;

	sizes(v, &pool_n, &shares_n);
	out->pool = malloc(pool_n ? pool_n : 1);
	out->items = calloc(v->n_pods ? v->n_pods : 1, sizeof(*out->items));
	out->pod_labels = calloc(v->n_pods ? v->n_pods : 1, sizeof(*out->pod_labels));
	out->shares = calloc(shares_n ? shares_n : 1, sizeof(*out->shares));
	if (out->pool == NULL || out->items == NULL || out->pod_labels == NULL ||
	    out->shares == NULL)
		return;
	out->n_pods = v->n_pods; /* before copy_pods: view_node_clear frees their labels */
	if (copy_pods(v, out, &at) != 0)
		return;
	if (v->labels != NULL) {
		if (labelset_copy_pairs(&out->node_labels, v->labels) != 0)
			return;
		out->labels = &out->node_labels.l;
	}
	out->name = pool_put(out->pool, &at, v->name);
	out->known = v->known;
	out->capacity_rc = v->capacity_rc;
	if (v->cap != NULL) {
		out->capacity_copy = *v->cap;
		out->cap = &out->capacity_copy;
	}
	/* a message longer than the capacity module's cap (CAPACITY_MSG_MAX) is cut there */
	strncpy(out->error_copy, v->capacity_error ? v->capacity_error : "",
	        sizeof(out->error_copy) - 1);
	out->capacity_error = out->error_copy;
	out->pods = out->items;
	out->declared_bytes = v->declared_bytes;
	out->undeclared_gpus = v->undeclared_gpus;
	c->rc = 0;
}

int view_from_cache(void *cache, const char *node, struct view_node *out)
{
	struct copying c = {out, VIEW_ENOMEM};

	memset(out, 0, sizeof(*out));
	cache_with_node(cache, node, copy_view, &c);
	if (c.rc != 0)
		view_node_clear(out);
	return c.rc;
}

void view_node_clear(struct view_node *v)
{
	if (v->pod_labels != NULL)
		for (size_t i = 0; i < v->n_pods; i++)
			labelset_clear(&v->pod_labels[i]);
	labelset_clear(&v->node_labels);
	free(v->pod_labels);
	free(v->items);
	free(v->shares);
	free(v->pool);
	memset(v, 0, sizeof(*v));
}

void view_placement_node(const struct view_node *v, const struct capacity *cap,
                         const struct placement_item *reserved, size_t n_reserved,
                         const struct dra_node *dra, struct placement_node *out)
{
	*out = (struct placement_node){
	    .name = v->name,
	    .cap = cap,
	    .pods = v->pods,
	    .n_pods = v->n_pods,
	    .reserved = reserved,
	    .n_reserved = n_reserved,
	    .dra = dra,
	};
}
