/* view: a node's snapshot copied out of a backend (view.h). */
#include "view.h"

#include "cache.h"
#include "demand.h"
#include "jsonpath.h"
#include "pod.h"
#include "satmath.h"

#include <cjson/cJSON.h>
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

/* The live backend (view_from_lists). A listed pod without a usable name: still counted. */
static const char unnamed[] = "(unnamed pod)";

/* The pool's bytes for a listed pod's key "ns/name", or 0 when it has no usable name. */
static size_t listed_key_len(const cJSON *pod)
{
	const char *ns = json_str(pod, "metadata", "namespace", NULL);
	const char *name = json_str(pod, "metadata", "name", NULL);

	if (name == NULL || name[0] == '\0')
		return 0;
	return (ns ? strlen(ns) : 0) + 1 + strlen(name) + 1;
}

/* The listed pod's key into the pool at *at (listed_key_len() > 0). */
static const char *listed_key_put(const cJSON *pod, char *pool, size_t *at)
{
	char *d = pool + *at;
	size_t n = listed_key_len(pod);

	(void)pod_key_of(pod, d, n); /* fits: n is its length with the NUL */
	*at += n;
	return d;
}

/* A string the cache keeps only when not empty (priority classes): NULL for "". */
static const char *non_empty(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : NULL;
}

/* The pool's bytes and the pods' count of a list. */
static size_t lists_pool(const cJSON *pods, const struct view_live_config *cfg, size_t *n)
{
	size_t len = sizeof(unnamed);
	const cJSON *pod;

	*n = 0;
	cJSON_ArrayForEach(pod, pods)
	{
		(*n)++;
		len += listed_key_len(pod) +
		       str_len(non_empty(json_str(pod, "metadata", "uid", NULL))) +
		       (cfg->attrs
		            ? str_len(non_empty(json_str(pod, "spec", "priorityClassName", NULL)))
		            : 0);
	}
	return len;
}

/* One listed pod into out: its key and uid among the listed, and an item when it is a
 * consumer (out->n_pods grows); n: the list's length. 0 or VIEW_ENOMEM. */
static int list_pod(const cJSON *pod, size_t n, const struct view_live_config *cfg,
                    struct view_node *out, size_t *at, struct demand *d)
{
	const char *key = unnamed;
	const char *uid =
	    pool_put(out->pool, at, non_empty(json_str(pod, "metadata", "uid", NULL)));
	size_t k = out->n_pods;

	if (listed_key_len(pod) > 0) {
		key = listed_key_put(pod, out->pool, at);
		out->listed[out->n_listed] = key;
		out->listed[n + out->n_listed] = uid; /* listed_uids: the second half */
		out->n_listed++;
	}
	int finished = pod_finished(pod);
	if (finished)
		return 0;
	pod_demand(pod, cfg->dcfg, d);
	if (!placement_consumer(finished, d->status, d->n_dra_figs))
		return 0;
	struct placement_item *it = &out->items[k];
	struct demand_share *sh = &out->shares[k * 2 * DEMAND_MAX_PARTS];
	*it = (struct placement_item){.key = key, .uid = uid};
	out->n_pods = k + 1; /* before labelset_copy: view_node_clear frees its labels */
	if (cfg->attrs) {
		const char *pc = json_str(pod, "spec", "priorityClassName", NULL);
		if (labelset_copy(&out->pod_labels[k], json_at(pod, "metadata", "labels", NULL)) !=
		    0)
			return VIEW_ENOMEM;
		it->priority_class = pool_put(out->pool, at, non_empty(pc));
		it->labels = out->pod_labels[k].l.n ? &out->pod_labels[k].l : NULL;
		it->attrs_known = 1;
	}
	placement_item_demand_figs(it, d, sh, sh + DEMAND_MAX_PARTS);
	out->declared_bytes = sat_add(out->declared_bytes, it->bytes);
	out->undeclared_gpus = sat_add(out->undeclared_gpus, it->undeclared_gpus);
	return 0;
}

/* The Node object's part of the view: its name, capacity and labels. 0 or VIEW_ENOMEM. */
static int list_node(const char *node, const cJSON *node_obj, const struct view_live_config *cfg,
                     struct view_node *out, size_t *at)
{
	out->name = pool_put(out->pool, at, node);
	out->known = 1;
	out->capacity_rc = capacity_from_node(node_obj, cfg->dcfg, &out->capacity_copy,
	                                      out->error_copy, sizeof(out->error_copy));
	if (out->capacity_rc == 0) {
		out->error_copy[0] = '\0';
		out->cap = &out->capacity_copy;
	}
	out->capacity_error = out->error_copy;
	if (labelset_copy(&out->node_labels, json_at(node_obj, "metadata", "labels", NULL)) != 0)
		return VIEW_ENOMEM;
	out->labels = &out->node_labels.l;
	return 0;
}

int view_from_lists(const char *node, const cJSON *node_obj, const cJSON *pods,
                    const struct view_live_config *cfg, struct view_node *out)
{
	struct demand *d = malloc(sizeof(*d)); /* 7 KiB: not on the stack of a worker */
	size_t n, at = 0, pool_n;
	const cJSON *pod;
	int rc = VIEW_ENOMEM;

	memset(out, 0, sizeof(*out));
	pool_n = lists_pool(pods, cfg, &n) + str_len(node);
	out->pool = malloc(pool_n);
	out->items = calloc(n ? n : 1, sizeof(*out->items));
	out->pod_labels = calloc(n ? n : 1, sizeof(*out->pod_labels));
	out->shares = calloc(n ? n * 2 * DEMAND_MAX_PARTS : 1, sizeof(*out->shares));
	out->listed = calloc(n ? 2 * n : 1, sizeof(*out->listed));
	if (d == NULL || out->pool == NULL || out->items == NULL || out->pod_labels == NULL ||
	    out->shares == NULL || out->listed == NULL)
		goto out;
	memcpy(out->pool, unnamed, sizeof(unnamed));
	at = sizeof(unnamed);
	if (list_node(node, node_obj, cfg, out, &at) != 0)
		goto out;
	cJSON_ArrayForEach(pod, pods)
	{
		if (list_pod(pod, n, cfg, out, &at, d) != 0)
			goto out;
	}
	out->listed_keys = out->listed;
	out->listed_uids = out->listed + n;
	out->pods = out->items;
	rc = 0;
out:
	free(d);
	if (rc != 0)
		view_node_clear(out);
	return rc;
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
	free(v->listed);
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
