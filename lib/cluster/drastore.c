/*
 * drastore: ResourceSlices and ResourceClaims kept for decisions. See drastore.h.
 */
#include "drastore.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capacity.h"
#include "errbuf.h"
#include "satmath.h"

/* One stored slice: only what the counting needs. */
struct sslice {
	char name[DRA_NAME_MAX];
	char node[DRA_POOL_MAX];
	char driver[DRA_DRIVER_MAX];
	char pool[DRA_POOL_MAX];
	size_t n;
	struct dra_device *devices; /* n entries, owned */
	int mark;
};

/* One stored claim, its arrays sized exactly. */
struct sclaim {
	char ns[DRA_NS_MAX];
	char name[DRA_NAME_MAX];
	char uid[DRA_UID_MAX];
	char owner[DRA_UID_MAX];
	char pod_claim[DRA_POD_CLAIM_MAX];
	uint8_t extended, allocated;
	size_t n_requests, n_results, n_reserved;
	struct dra_request *requests;
	struct dra_result *results;
	char (*reserved)[DRA_UID_MAX];
	char (*reserved_names)[DRA_NAME_MAX];
	int mark;
};

struct dra_store {
	pthread_rwlock_t lock;
	struct dra_drivers drivers;
	struct sslice *slices;
	size_t n_slices, cap_slices;
	struct sclaim *claims;
	size_t n_claims, cap_claims;
	int absent[2];
	dra_store_gone_fn gone;
	void *gone_ctx;
};

/* Pods that left a claim, collected under the lock, reported after it (gone_flush). */
struct gone_list {
	size_t n, cap;
	struct {
		char key[DRA_NS_MAX + DRA_NAME_MAX];
		char uid[DRA_UID_MAX];
	} * e;
	int nomem;
};

/* The pods of old (its reservedFor) that new (NULL: none) no longer lists, into g. */
static void gone_diff(const struct sclaim *old, const struct dra_claim *new, struct gone_list *g)
{
	for (size_t i = 0; old != NULL && i < old->n_reserved; i++) {
		int kept = 0;
		for (size_t j = 0; new != NULL &&j < new->n_reserved && !kept; j++)
			kept = strcmp(new->reserved[j], old->reserved[i]) == 0;
		if (kept)
			continue;
		if (g->n == g->cap) {
			size_t nc = g->cap ? 2 * g->cap : 8;
			void *p = realloc(g->e, nc * sizeof(*g->e));
			if (p == NULL) {
				g->nomem =
				    1; /* the reservation then lasts its TTL: the safe side */
				return;
			}
			g->e = p;
			g->cap = nc;
		}
		snprintf(g->e[g->n].key, sizeof(g->e[0].key), "%s/%s", old->ns,
		         old->reserved_names[i]);
		memcpy(g->e[g->n].uid, old->reserved[i], sizeof(g->e[0].uid));
		g->n++;
	}
}

static void gone_flush(struct dra_store *s, struct gone_list *g)
{
	for (size_t i = 0; s->gone != NULL && i < g->n; i++)
		s->gone(s->gone_ctx, g->e[i].key, g->e[i].uid);
	free(g->e);
}

struct dra_store *dra_store_new(const struct dra_drivers *d, dra_store_gone_fn gone, void *gone_ctx)
{
	struct dra_store *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	if (d != NULL)
		s->drivers = *d;
	s->gone = gone;
	s->gone_ctx = gone_ctx;
	pthread_rwlock_init(&s->lock, NULL);
	return s;
}

static void claim_clear(struct sclaim *c)
{
	free(c->requests);
	free(c->results);
	free(c->reserved);
	free(c->reserved_names);
}

void dra_store_free(struct dra_store *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n_slices; i++)
		free(s->slices[i].devices);
	for (size_t i = 0; i < s->n_claims; i++)
		claim_clear(&s->claims[i]);
	free(s->slices);
	free(s->claims);
	pthread_rwlock_destroy(&s->lock);
	free(s);
}

/* Grow an array of elem-sized entries to hold one more. 0, or -1 on allocation failure. */
static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	if ((p = realloc(*arr, ncap * elem)) == NULL)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

static struct sslice *find_slice(struct dra_store *s, const char *name)
{
	for (size_t i = 0; i < s->n_slices; i++)
		if (strcmp(s->slices[i].name, name) == 0)
			return &s->slices[i];
	return NULL;
}

static void remove_slice(struct dra_store *s, struct sslice *sl)
{
	free(sl->devices);
	*sl = s->slices[--s->n_slices];
}

/* Store dec (replacing a slice of the same name). Holds the write lock. */
static int put_slice(struct dra_store *s, const struct dra_slice *dec)
{
	struct sslice *sl = find_slice(s, dec->name);
	struct dra_device *devs = NULL;

	if (dec->n_devices > 0 && (devs = malloc(dec->n_devices * sizeof(*devs))) == NULL)
		return DRA_STORE_ENOMEM;
	if (dec->n_devices > 0)
		memcpy(devs, dec->devices, dec->n_devices * sizeof(*devs));
	if (sl == NULL) {
		if (s->n_slices >= DRA_STORE_MAX_SLICES) {
			free(devs);
			return DRA_STORE_EFULL;
		}
		if (grow((void **)&s->slices, &s->cap_slices, s->n_slices, sizeof(*s->slices)) !=
		    0) {
			free(devs);
			return DRA_STORE_ENOMEM;
		}
		sl = &s->slices[s->n_slices++];
	} else {
		free(sl->devices);
	}
	memset(sl, 0, sizeof(*sl));
	memcpy(sl->name, dec->name, sizeof(sl->name));
	memcpy(sl->node, dec->node, sizeof(sl->node));
	memcpy(sl->driver, dec->driver, sizeof(sl->driver));
	memcpy(sl->pool, dec->pool, sizeof(sl->pool));
	sl->n = dec->n_devices;
	sl->devices = devs;
	return 0;
}

int dra_store_apply_slice(struct dra_store *s, enum watch_event_type type, const cJSON *obj,
                          char *err, size_t errlen)
{
	struct dra_slice *dec;
	int rc = 0;

	if (type != WATCH_ADDED && type != WATCH_MODIFIED && type != WATCH_DELETED)
		return 0;
	if ((dec = malloc(sizeof(*dec))) == NULL)
		return DRA_STORE_ENOMEM;
	if (dra_slice_decode(obj, &s->drivers, dec, err, errlen) != 0) {
		free(dec);
		return DRA_STORE_EINVAL;
	}
	pthread_rwlock_wrlock(&s->lock);
	s->absent[DRA_STORE_SLICES] = 0;
	if (type == WATCH_DELETED) {
		struct sslice *sl = find_slice(s, dec->name);
		if (sl != NULL)
			remove_slice(s, sl);
	} else {
		rc = put_slice(s, dec);
	}
	pthread_rwlock_unlock(&s->lock);
	free(dec);
	return rc;
}

static struct sclaim *find_claim(struct dra_store *s, const char *ns, const char *name)
{
	for (size_t i = 0; i < s->n_claims; i++)
		if (strcmp(s->claims[i].name, name) == 0 && strcmp(s->claims[i].ns, ns) == 0)
			return &s->claims[i];
	return NULL;
}

/* A copy of n elements of size elem, or NULL for n 0; *fail set on allocation failure. */
static void *dup_array(const void *src, size_t n, size_t elem, int *fail)
{
	void *p;

	if (n == 0)
		return NULL;
	if ((p = malloc(n * elem)) == NULL) {
		*fail = 1;
		return NULL;
	}
	memcpy(p, src, n * elem);
	return p;
}

static int put_claim(struct dra_store *s, const struct dra_claim *dec, struct gone_list *g)
{
	struct sclaim nc, *c = find_claim(s, dec->ns, dec->name);
	int fail = 0;

	memset(&nc, 0, sizeof(nc));
	memcpy(nc.ns, dec->ns, sizeof(nc.ns));
	memcpy(nc.name, dec->name, sizeof(nc.name));
	memcpy(nc.uid, dec->uid, sizeof(nc.uid));
	memcpy(nc.owner, dec->owner, sizeof(nc.owner));
	memcpy(nc.pod_claim, dec->pod_claim, sizeof(nc.pod_claim));
	nc.extended = dec->extended;
	nc.allocated = dec->allocated;
	nc.n_requests = dec->n_requests;
	nc.n_results = dec->n_results;
	nc.n_reserved = dec->n_reserved;
	nc.requests = dup_array(dec->requests, dec->n_requests, sizeof(*dec->requests), &fail);
	nc.results = dup_array(dec->results, dec->n_results, sizeof(*dec->results), &fail);
	nc.reserved = dup_array(dec->reserved, dec->n_reserved, sizeof(*dec->reserved), &fail);
	nc.reserved_names =
	    dup_array(dec->reserved_names, dec->n_reserved, sizeof(*dec->reserved_names), &fail);
	if (fail) {
		claim_clear(&nc);
		return DRA_STORE_ENOMEM;
	}
	if (c == NULL) {
		if (s->n_claims >= DRA_STORE_MAX_CLAIMS ||
		    grow((void **)&s->claims, &s->cap_claims, s->n_claims, sizeof(*s->claims)) !=
		        0) {
			claim_clear(&nc);
			return s->n_claims >= DRA_STORE_MAX_CLAIMS ? DRA_STORE_EFULL
			                                           : DRA_STORE_ENOMEM;
		}
		c = &s->claims[s->n_claims++];
	} else {
		gone_diff(c, dec, g);
		claim_clear(c);
	}
	*c = nc;
	return 0;
}

int dra_store_apply_claim(struct dra_store *s, enum watch_event_type type, const cJSON *obj,
                          char *err, size_t errlen)
{
	struct dra_claim *dec;
	struct gone_list g = {0};
	int rc = 0;

	if (type != WATCH_ADDED && type != WATCH_MODIFIED && type != WATCH_DELETED)
		return 0;
	if ((dec = malloc(sizeof(*dec))) == NULL)
		return DRA_STORE_ENOMEM;
	if (dra_claim_decode(obj, &s->drivers, dec, err, errlen) != 0) {
		free(dec);
		return DRA_STORE_EINVAL;
	}
	pthread_rwlock_wrlock(&s->lock);
	s->absent[DRA_STORE_CLAIMS] = 0;
	if (type == WATCH_DELETED) {
		struct sclaim *c = find_claim(s, dec->ns, dec->name);
		if (c != NULL && (dec->uid[0] == '\0' || strcmp(c->uid, dec->uid) == 0)) {
			gone_diff(c, NULL, &g);
			claim_clear(c);
			*c = s->claims[--s->n_claims];
		}
	} else {
		rc = put_claim(s, dec, &g);
	}
	pthread_rwlock_unlock(&s->lock);
	free(dec);
	gone_flush(s, &g);
	return rc;
}

void dra_store_resync_begin(struct dra_store *s, enum dra_store_kind kind)
{
	pthread_rwlock_wrlock(&s->lock);
	if (kind == DRA_STORE_SLICES)
		for (size_t i = 0; i < s->n_slices; i++)
			s->slices[i].mark = 1;
	else
		for (size_t i = 0; i < s->n_claims; i++)
			s->claims[i].mark = 1;
	pthread_rwlock_unlock(&s->lock);
}

size_t dra_store_resync_end(struct dra_store *s, enum dra_store_kind kind)
{
	size_t removed = 0;
	struct gone_list g = {0};

	pthread_rwlock_wrlock(&s->lock);
	if (kind == DRA_STORE_SLICES) {
		for (size_t i = 0; i < s->n_slices;)
			if (s->slices[i].mark) {
				remove_slice(s, &s->slices[i]);
				removed++;
			} else {
				i++;
			}
	} else {
		for (size_t i = 0; i < s->n_claims;)
			if (s->claims[i].mark) {
				gone_diff(&s->claims[i], NULL, &g);
				claim_clear(&s->claims[i]);
				s->claims[i] = s->claims[--s->n_claims];
				removed++;
			} else {
				i++;
			}
	}
	pthread_rwlock_unlock(&s->lock);
	gone_flush(s, &g);
	return removed;
}

void dra_store_absent(struct dra_store *s, enum dra_store_kind kind)
{
	dra_store_resync_begin(s, kind);
	(void)dra_store_resync_end(s, kind);
	pthread_rwlock_wrlock(&s->lock);
	s->absent[kind] = 1;
	pthread_rwlock_unlock(&s->lock);
}

/* The device a result names among the node's slices (local[0..n)), or NULL. */
static const struct dra_device *device_on(struct sslice *const *local, size_t n,
                                          const struct dra_result *r)
{
	for (size_t i = 0; i < n; i++) {
		const struct sslice *sl = local[i];
		if (strcmp(sl->driver, r->driver) != 0 || strcmp(sl->pool, r->pool) != 0)
			continue;
		for (size_t j = 0; j < sl->n; j++)
			if (strcmp(sl->devices[j].name, r->device) == 0)
				return &sl->devices[j];
	}
	return NULL;
}

/* A GPU of the node's capacity: typed gpu or mig, or untyped with a memory capacity (a
 * --dra-driver driver that writes no "type"); never a partition (consumesCounters). */
static int counted(const struct dra_device *d)
{
	return !d->counters && (d->type != DRA_TYPE_OTHER || d->memory > 0);
}

/* 1 when device j of local[i] is listed before it by a slice of the same driver and pool (a
 * pool republished, its old slice not deleted yet): the same GPU. */
static int listed_before(struct sslice *const *local, size_t i, size_t j)
{
	const struct sslice *sl = local[i];

	for (size_t a = 0; a <= i; a++) {
		if (strcmp(local[a]->driver, sl->driver) != 0 ||
		    strcmp(local[a]->pool, sl->pool) != 0)
			continue;
		for (size_t b = 0; b < (a == i ? j : local[a]->n); b++)
			if (strcmp(local[a]->devices[b].name, sl->devices[j].name) == 0)
				return 1;
	}
	return 0;
}

static void gpus_of(struct sslice *const *local, size_t n, struct dra_gpus *g)
{
	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < local[i]->n; j++) {
			const struct dra_device *d = &local[i]->devices[j];
			if (!counted(d) || listed_before(local, i, j))
				continue;
			g->n++;
			g->n_mig += d->type == DRA_TYPE_MIG;
			g->no_memory += d->memory == 0;
			g->bytes = sat_add(g->bytes, d->memory);
			if (d->memory > g->max_bytes)
				g->max_bytes = d->memory;
		}
}

static int claim_of_pod(const struct sclaim *c, const char *ns, const char *uid,
                        const struct dra_pod_refs *refs)
{
	if (ns != NULL && strcmp(c->ns, ns) != 0)
		return 0;
	if (uid != NULL && uid[0] != '\0') {
		if (strcmp(c->owner, uid) == 0)
			return 1;
		for (size_t i = 0; i < c->n_reserved; i++)
			if (strcmp(c->reserved[i], uid) == 0)
				return 1;
	}
	for (size_t i = 0; refs != NULL && i < refs->n; i++)
		if (strcmp(refs->names[i], c->name) == 0)
			return 1;
	return 0;
}

/* The node's slices (pointers into s), counted then filled. Holds the read lock. */
static struct sslice **local_slices(struct dra_store *s, const char *node, size_t *n)
{
	struct sslice **local;
	size_t k = 0;

	*n = 0;
	for (size_t i = 0; i < s->n_slices; i++)
		k += strcmp(s->slices[i].node, node) == 0;
	if ((local = calloc(k ? k : 1, sizeof(*local))) == NULL)
		return NULL;
	for (size_t i = 0; i < s->n_slices; i++)
		if (strcmp(s->slices[i].node, node) == 0)
			local[(*n)++] = &s->slices[i];
	return local;
}

/* A whole device d of result r, shared by the claim's pods (by its config, or without one:
 * dra.h), into cu (its whole_n counts d already): cu's sharing is the devices' when they all
 * have the same, else TIME_SLICING (a device no config names is time-sliced by the driver, and
 * not pinned); its pinned limit the largest of each device's own (dra_result_pinned; 0 when one
 * device has none); its device memory the smallest published. */
static void shared_device(const struct dra_result *r, const struct dra_device *d,
                          struct dra_claim_use *cu)
{
	int k = d->type == DRA_TYPE_MIG ? DRA_CFG_MIG : DRA_CFG_GPU;
	uint8_t st = r->sharing[k];
	uint64_t pin = dra_result_pinned(r, k, d->uuid); /* the device's own, where matched */

	if (d->memory > 0 && (cu->dev_bytes == 0 || d->memory < cu->dev_bytes))
		cu->dev_bytes = d->memory;
	if (cu->whole_n == 1) { /* its first whole device */
		cu->sharing = st;
		cu->pinned = pin;
	} else {
		if (st != cu->sharing)
			cu->sharing = DRA_SHARING_TIME_SLICING;
		cu->pinned = pin == 0 || cu->pinned == 0 ? 0 : pin > cu->pinned ? pin : cu->pinned;
	}
	if (cu->sharing != DRA_SHARING_MPS)
		cu->pinned = 0;
}

/* What claim c holds on the node's slices into cu (NULL: only *on); *on set when one of its
 * devices is there. */
static void claim_on(const struct sclaim *c, struct sslice *const *local, size_t n, int *on,
                     struct dra_claim_use *cu)
{
	*on = 0;
	for (size_t i = 0; i < c->n_results; i++) {
		const struct dra_result *r = &c->results[i];
		const struct dra_device *d = device_on(local, n, r);
		if (d == NULL)
			continue;
		*on = 1;
		if (cu == NULL)
			continue;
		cu->shared |= r->share_id[0] != '\0';
		/* A share of all the device (a request without capacity.requests on a device
		 * that allows several allocations consumes its whole capacity, KEP-5075) is the
		 * whole device: nothing else gets any of it. */
		if (r->has_consumed && (d->memory == 0 || r->consumed < d->memory)) {
			cu->bytes = sat_add(cu->bytes, dra_result_bytes(r, d->memory));
		} else {
			cu->whole_n++;
			cu->whole_bytes = sat_add(cu->whole_bytes, d->memory);
			shared_device(r, d, cu);
		}
	}
}

/* The most claim c (mine, not allocated) can take on a node offering g, into p: its share
 * requests as bytes, its whole-device requests as devices (at most the node's). */
static void pending(const struct sclaim *c, const struct dra_gpus *g, struct dra_pod *p)
{
	uint64_t whole = 0;

	p->n_pending++;
	if (c->n_requests == 0) /* a KEP-5004 claim read without its requests: one device */
		whole = 1;
	for (size_t i = 0; i < c->n_requests; i++) {
		const struct dra_request *r = &c->requests[i];
		if (r->share != 0 && r->share < g->max_bytes)
			p->pending_bytes =
			    sat_add(p->pending_bytes, dra_request_max_bytes(r, 1, g));
		else
			whole = sat_add(whole, r->all ? g->n : r->count);
	}
	p->pending_whole_n = sat_add(p->pending_whole_n, whole);
	if (p->pending_whole_n > g->n)
		p->pending_whole_n = g->n;
	p->pending_whole_bytes = sat_mul(p->pending_whole_n, g->max_bytes);
}

/* Count c, a claim the pod owns, into tpl[0..*n) (the templates whose claims were found) when it
 * is the claim of a template not counted yet: the resourceclaim controller takes as a template's
 * claim only one the pod owns annotated with the template's name, the first (k8s.io/kubernetes
 * v1.37 pkg/controller/resourceclaim findPodResourceClaim). A claim without the annotation (another
 * controller's, a user's) or a second one for the same template is not one, else it would
 * stand for a template claim not generated yet, which then goes uncounted. */
static void template_claim_add(const struct sclaim *c, const char **tpl, size_t *n)
{
	if (c->pod_claim[0] == '\0' || *n == DRA_POD_CLAIMS)
		return; /* past DRA_POD_CLAIMS: the pod names no more (dra_pod_refs) */
	for (size_t i = 0; i < *n; i++)
		if (strcmp(tpl[i], c->pod_claim) == 0)
			return;
	tpl[(*n)++] = c->pod_claim;
}

/* Fill v's claims (the node's) and pod part. Holds the read lock. */
static int fill_view(struct dra_store *s, struct sslice *const *local, size_t n_local,
                     const char *ns, const char *uid, const struct dra_pod_refs *refs,
                     struct dra_view *v)
{
	size_t n_uids = 0, k = 0, u = 0, found = 0, named = 0, n_tpl = 0;
	const char *tpl[DRA_POD_CLAIMS];
	int on;

	/* No slice on the node and no pod: no claim is on it (claim_on), nothing to read. Every
	 * node of a scrape's gauges asks (informer.c): without this, each scanned every claim. */
	int none = n_local == 0 && ns == NULL && uid == NULL && refs == NULL;

	for (size_t i = 0; !none && i < s->n_claims; i++) {
		claim_on(&s->claims[i], local, n_local, &on, NULL);
		if (on) {
			k++;
			n_uids += s->claims[i].n_reserved;
		}
	}
	v->claims = calloc(k + 1, sizeof(*v->claims)); /* + 1: the scratch entry below */
	v->uids = calloc(n_uids ? n_uids : 1, sizeof(*v->uids));
	v->keys = calloc(n_uids ? n_uids : 1, sizeof(*v->keys));
	if (v->claims == NULL || v->uids == NULL || v->keys == NULL)
		return DRA_STORE_ENOMEM;
	for (size_t i = 0; !none && i < s->n_claims; i++) {
		const struct sclaim *c = &s->claims[i];
		struct dra_claim_use *cu = &v->claims[v->node.n_claims];
		int mine =
		    (ns != NULL || uid != NULL || refs != NULL) && claim_of_pod(c, ns, uid, refs);

		size_t by_name = 0;

		found += mine;
		for (size_t r = 0; mine && refs != NULL && r < refs->n; r++)
			by_name += strcmp(refs->names[r], c->name) == 0;
		named += by_name;
		/* Owned by the pod, not named by it, not its KEP-5004 claim, and generated for one
		 * of its templates: a template's claim the pod's status does not name yet (the
		 * claim's watch ahead of the pod's). */
		if (mine && by_name == 0 && !c->extended && uid != NULL && uid[0] != '\0' &&
		    strcmp(c->owner, uid) == 0)
			template_claim_add(c, tpl, &n_tpl);
		if (mine && c->extended)
			v->pod.extended = 1;
		claim_on(c, local, n_local, &on, cu);
		if (!on) {
			memset(cu, 0, sizeof(*cu));
			if (mine && !c->allocated)
				pending(c, &v->node.gpus, &v->pod);
			continue;
		}
		v->node.n_claims++;
		v->pod.n_here += mine;
		snprintf(cu->key, sizeof(cu->key), "%s/%s", c->ns, c->name);
		memcpy(cu->uid, c->uid, sizeof(cu->uid));
		memcpy(cu->owner, c->owner, sizeof(cu->owner));
		cu->extended = c->extended;
		cu->mine = (uint8_t)mine;
		cu->n_pods = c->n_reserved;
		cu->pods = (const char(*)[DRA_UID_MAX])v->uids[u];
		if (c->n_reserved > 0)
			memcpy(v->uids[u], c->reserved, c->n_reserved * sizeof(*c->reserved));
		for (size_t r = 0; r < c->n_reserved; r++)
			snprintf(v->keys[u + r], sizeof(v->keys[0]), "%s/%s", c->ns,
			         c->reserved_names[r]);
		u += c->n_reserved;
		v->n_pods = u;
	}
	v->node.claims = v->claims;
	if (refs != NULL) {
		/* Named claims the store does not hold, and template claims not generated yet:
		 * not read, so the most is every DRA GPU of the node. A template claim the store
		 * holds, found by its owner, is read: counted above, not again here. */
		size_t missing = refs->n > named ? refs->n - named : 0; /* not: by uid */
		v->pod.n_unknown =
		    missing + (refs->n_templates > n_tpl ? refs->n_templates - n_tpl : 0);
		if (v->pod.n_unknown > 0) {
			v->pod.pending_whole_n = v->node.gpus.n;
			v->pod.pending_whole_bytes = v->node.gpus.bytes;
		}
		v->pod.any = refs->any;
	}
	v->pod.any |= found > 0;
	return 0;
}

int dra_store_view(struct dra_store *s, const char *node, const char *ns, const char *pod_uid,
                   const struct dra_pod_refs *refs, struct dra_view **out)
{
	struct dra_view *v = calloc(1, sizeof(*v));
	struct sslice **local = NULL;
	size_t n_local = 0;
	int rc = 0;

	*out = NULL;
	if (v == NULL)
		return DRA_STORE_ENOMEM;
	if (s == NULL || node == NULL) {
		*out = v;
		return 0;
	}
	pthread_rwlock_rdlock(&s->lock);
	if ((local = local_slices(s, node, &n_local)) == NULL)
		rc = DRA_STORE_ENOMEM;
	if (rc == 0) {
		gpus_of(local, n_local, &v->node.gpus);
		rc = fill_view(s, local, n_local, ns, pod_uid, refs, v);
	}
	pthread_rwlock_unlock(&s->lock);
	free(local);
	if (rc != 0) {
		dra_view_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

void dra_view_free(struct dra_view *v)
{
	if (v == NULL)
		return;
	free(v->claims);
	free(v->uids);
	free(v->keys);
	free(v);
}

void dra_store_stats(struct dra_store *s, struct dra_store_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (s == NULL)
		return;
	pthread_rwlock_rdlock(&s->lock);
	out->slices = s->n_slices;
	out->claims = s->n_claims;
	for (size_t i = 0; i < s->n_slices; i++)
		if (s->slices[i].node[0] != '\0')
			for (size_t j = 0; j < s->slices[i].n; j++)
				out->devices += (size_t)counted(&s->slices[i].devices[j]);
	out->slices_absent = s->absent[DRA_STORE_SLICES];
	out->claims_absent = s->absent[DRA_STORE_CLAIMS];
	pthread_rwlock_unlock(&s->lock);
}

int dra_store_nodes(struct dra_store *s, char (**names)[DRA_POOL_MAX], size_t *n)
{
	char(*out)[DRA_POOL_MAX] = NULL;
	size_t k = 0;
	int rc = 0;

	*names = NULL;
	*n = 0;
	if (s == NULL)
		return 0;
	pthread_rwlock_rdlock(&s->lock);
	if (s->n_slices > 0 && (out = calloc(s->n_slices, sizeof(*out))) == NULL)
		rc = DRA_STORE_ENOMEM;
	for (size_t i = 0; rc == 0 && i < s->n_slices; i++) {
		const struct sslice *sl = &s->slices[i];
		int gpus = 0, seen = 0;

		for (size_t j = 0; j < sl->n; j++)
			gpus |= counted(&sl->devices[j]);
		for (size_t j = 0; j < k; j++)
			seen |= strcmp(out[j], sl->node) == 0;
		if (gpus && !seen && sl->node[0] != '\0')
			memcpy(out[k++], sl->node, sizeof(out[0]));
	}
	pthread_rwlock_unlock(&s->lock);
	if (rc != 0 || k == 0) {
		free(out);
		return rc;
	}
	*names = out;
	*n = k;
	return 0;
}

int dra_view_capacity(const struct dra_view *v, struct capacity *cap, int rc, const char *node,
                      char *err, size_t errlen)
{
	return capacity_add_dra(cap, rc, v != NULL ? &v->node.gpus : NULL, node, err, errlen);
}
