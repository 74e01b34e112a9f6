/*
 * cache: the watch cache's store. See cache.h for the contract.
 *
 * Two chained hash tables (pods by "namespace/name", nodes by name) under one rwlock. Each node
 * keeps an array of placement items for its counted pods (GPU pods bound to it, not finished)
 * and a parallel array of their owners; a pod remembers its slot, so attaching and detaching
 * are O(1) (swap with the last). Item key and uid point into the pod record, which does not
 * move while it is counted.
 *
 * Every pod bound to a node points at the node's record, counted or not (a non-GPU pod, a
 * finished one): a record is freed only when its Node object is not known and no pod points at
 * it (refs), never while a pod could still read its name.
 */
#include "cache.h"

#include "dra.h"
#include "engine.h"

#include "labelset.h"
#include "pod.h"
#include "podlite.h"

#include "jsonpath.h"
#include "monotime.h"
#include "satmath.h"

#include <cjson/cJSON.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_BUCKETS     1024
#define NODE_NAME_MAX   253
#define GONE_INLINE_MAX 2
/* capacity_error of a node whose Node object is not (or no longer) in the store */
#define UNSEEN_MSG "GPU memory unknown: the Node object is not in the watch cache"
/* capacity_error when the message could not be kept (out of memory) */
#define NOMSG_MSG "GPU memory unknown"

/* What a decision may quote of a pod's demand, kept compact (struct demand is ~6.8 KB). */
struct pod_demand {
	uint64_t bytes, gpus, max_per_gpu_bytes;
	uint64_t whole_gpus; /* demand_takes_cards(): the units it holds, else 0 */
	uint64_t dra_units;  /* demand.dra_units: units its KEP-5004 claim serves */
	enum demand_status status;
	uint32_t pool;             /* demand.pool */
	enum demand_source source; /* demand.source */
	uint8_t shares;            /* demand.shares: resolve on the node */
	uint8_t n_uses;            /* demand.n_uses (<= DEMAND_MAX_USES) */
	uint8_t n_parts;           /* demand.n_parts (<= DEMAND_MAX_PARTS) */
	uint8_t n_dra_figs;        /* demand.n_dra_figs (<= DEMAND_MAX_PARTS) */
	/* demand.uses[0..n_uses) packed (pack_uses: the strings without their unused tails; a
	 * struct demand_use is 112 bytes, a packed one about 30), NULL when none */
	unsigned char *uses;
	char *container; /* max_per_gpu_container, NULL when empty */
	/* --undeclared infer: the GPU containers, demand.parts packed (pack_parts: 592 bytes
	 * each unpacked, about 80 packed) and demand.compact as is (placement items point at
	 * it), NULL when none */
	unsigned char *parts;
	struct demand_share *compact;
	char *error;   /* NULL when empty */
	char *warning; /* NULL when empty */
	/* a DRA pod's containers' own figures: demand.dra_figs[0..n_dra_figs) then demand.dra_words
	 * (NUL-terminated) in one block, NULL when none */
	unsigned char *dra;
	/* the DRA claims the pod names (dra_pod_refs): n_templates (1 byte), the KEP-5004 claim's
	 * name, then each name, NUL-terminated, and a final NUL; NULL when it names none */
	unsigned char *claims;
};

/* pack_uses() and pack_parts() write every field: a field added to either struct must be
 * added there too (and to unpack_*), or it is lost in the cache. */
_Static_assert(sizeof(struct demand_use) == 112, "struct demand_use changed: see pack_uses");
_Static_assert(sizeof(struct demand_part) == 592, "struct demand_part changed: see pack_parts");
_Static_assert(DEMAND_MAX_USES < 256 && DEMAND_MAX_PARTS < 256, "n_uses, n_parts are uint8_t");

/* Byte writer (b NULL: only the size) and reader of the packed arrays. */
static size_t put(unsigned char *b, size_t o, const void *v, size_t n)
{
	if (b != NULL)
		memcpy(b + o, v, n);
	return o + n;
}

static size_t put_str(unsigned char *b, size_t o, const char *str, size_t cap)
{
	o = put(b, o, str, strnlen(str, cap - 1));
	return put(b, o, "", 1);
}

static size_t get(const unsigned char *b, size_t o, void *v, size_t n)
{
	memcpy(v, b + o, n);
	return o + n;
}

static size_t get_str(const unsigned char *b, size_t o, char *str, size_t cap)
{
	size_t n = strnlen((const char *)b + o, cap - 1);
	memcpy(str, b + o, n);
	str[n] = '\0';
	return o + n + 1;
}

static size_t pack_uses(unsigned char *b, const struct demand_use *u, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		o = put(b, o, &u[i].bytes, sizeof(u[i].bytes));
		o = put(b, o, &u[i].gpus, sizeof(u[i].gpus));
		o = put(b, o, &u[i].part, sizeof(u[i].part));
		o = put_str(b, o, u[i].profile, sizeof(u[i].profile));
		o = put_str(b, o, u[i].container, sizeof(u[i].container));
	}
	return o;
}

static void unpack_uses(const unsigned char *b, struct demand_use *u, size_t n)
{
	size_t o = 0;
	memset(u, 0, n * sizeof(*u));
	for (size_t i = 0; i < n; i++) {
		o = get(b, o, &u[i].bytes, sizeof(u[i].bytes));
		o = get(b, o, &u[i].gpus, sizeof(u[i].gpus));
		o = get(b, o, &u[i].part, sizeof(u[i].part));
		o = get_str(b, o, u[i].profile, sizeof(u[i].profile));
		o = get_str(b, o, u[i].container, sizeof(u[i].container));
	}
}

static size_t pack_parts(unsigned char *b, const struct demand_part *p, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		o = put(b, o, &p[i].bytes, sizeof(p[i].bytes));
		o = put(b, o, &p[i].ppm, sizeof(p[i].ppm));
		o = put(b, o, &p[i].whole, sizeof(p[i].whole));
		o = put(b, o, &p[i].mig_units, sizeof(p[i].mig_units));
		o = put(b, o, &p[i].init, sizeof(p[i].init));
		o = put(b, o, &p[i].sidecar, sizeof(p[i].sidecar));
		o = put(b, o, &p[i].source, sizeof(p[i].source));
		o = put(b, o, &p[i].both, sizeof(p[i].both));
		o = put(b, o, &p[i].resolved, sizeof(p[i].resolved));
		o = put_str(b, o, p[i].mig_profile, sizeof(p[i].mig_profile));
		o = put_str(b, o, p[i].words, sizeof(p[i].words));
		o = put_str(b, o, p[i].engine_words, sizeof(p[i].engine_words));
		o = put_str(b, o, p[i].container, sizeof(p[i].container));
	}
	return o;
}

static void unpack_parts(const unsigned char *b, struct demand_part *p, size_t n)
{
	size_t o = 0;
	memset(p, 0, n * sizeof(*p));
	for (size_t i = 0; i < n; i++) {
		o = get(b, o, &p[i].bytes, sizeof(p[i].bytes));
		o = get(b, o, &p[i].ppm, sizeof(p[i].ppm));
		o = get(b, o, &p[i].whole, sizeof(p[i].whole));
		o = get(b, o, &p[i].mig_units, sizeof(p[i].mig_units));
		o = get(b, o, &p[i].init, sizeof(p[i].init));
		o = get(b, o, &p[i].sidecar, sizeof(p[i].sidecar));
		o = get(b, o, &p[i].source, sizeof(p[i].source));
		o = get(b, o, &p[i].both, sizeof(p[i].both));
		o = get(b, o, &p[i].resolved, sizeof(p[i].resolved));
		o = get_str(b, o, p[i].mig_profile, sizeof(p[i].mig_profile));
		o = get_str(b, o, p[i].words, sizeof(p[i].words));
		o = get_str(b, o, p[i].engine_words, sizeof(p[i].engine_words));
		o = get_str(b, o, p[i].container, sizeof(p[i].container));
	}
}

/* New packed copies (caller frees), NULL when out of memory. */
static unsigned char *uses_new(const struct demand_use *u, size_t n)
{
	unsigned char *b = malloc(pack_uses(NULL, u, n));
	if (b != NULL)
		pack_uses(b, u, n);
	return b;
}

static unsigned char *parts_new(const struct demand_part *p, size_t n)
{
	unsigned char *b = malloc(pack_parts(NULL, p, n));
	if (b != NULL)
		pack_parts(b, p, n);
	return b;
}

struct node;

struct pod {
	struct pod *next;
	char *key; /* right after the record, in its allocation */
	char uid[CACHE_UID_MAX];
	struct node *node; /* spec.nodeName's record, NULL when unbound */
	size_t slot;       /* index in node->items when counted */
	uint64_t seen_ms;  /* monotime_ms() when first seen bound to its current node */
	unsigned counted : 1, finished : 1, mirror : 1, mark : 1, deleting : 1;
	unsigned gone_sent : 1; /* the gone callback was queued for it (once per pod) */
	unsigned attrs : 2;     /* CACHE_ATTR_* it holds (read when it was last applied) */
	struct pod_demand d;
	/* GPU pods only, for GPUMemoryPolicy tiers, each when attrs says so: */
	char *priority_class; /* spec.priorityClassName, NULL when none */
	struct labelset labels;
};

struct node {
	struct node *next;
	char *name;
	unsigned known : 1, mark : 1;
	int cap_rc;
	struct capacity cap;
	char *cap_err;
	struct labelset labels; /* the Node's metadata.labels (GPUMemoryPolicy nodeSelector) */
	struct placement_item *items;
	struct pod **owners;
	size_t n, n_cap;
	size_t refs;   /* pods whose node is this record, counted or not (n <= refs), compact
	                  ones included */
	uint32_t slot; /* its index in cache.slots (compact pods name their node by it) */
	uint64_t declared, undeclared_gpus;
};

struct table {
	void **buckets;
	size_t n_buckets, count;
};

struct gone {
	char *key;
	char uid[CACHE_UID_MAX];
};

struct cache {
	pthread_rwlock_t lock;
	struct table pods, nodes;
	size_t gpu_pods;
	size_t by_source[CACHE_SOURCES]; /* GPU pods by demand source (cache_stats) */
	struct engine_defaults engines;  /* dcfg.engines */
	size_t known_nodes;   /* records with known set (nodes.count also has records for pods) */
	size_t bytes;         /* heap() of every whole pod's allocations (cache_stats) */
	size_t node_bytes;    /* heap() of every node record's allocations */
	struct podlite *lite; /* pods that ask for no GPU (podlite.h); the others in pods */
	unsigned want_attrs;  /* CACHE_ATTR_*: what bound GPU pods keep (cache_set_pod_attrs) */
	struct node **slots;  /* node records by slot; NULL: a free slot (in free_slots) */
	uint32_t n_slots, cap_slots, n_free_slots;
	uint32_t *free_slots;
	char *resources[DEMAND_MAX_RESOURCES];
	struct demand_config dcfg;
	cache_gone_fn gone;
	void *gone_ctx;
};

static size_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return (size_t)h;
}

static int table_init(struct table *t)
{
	t->buckets = calloc(MIN_BUCKETS, sizeof(void *));
	t->n_buckets = MIN_BUCKETS;
	t->count = 0;
	return t->buckets ? 0 : -1;
}

/* Both record types start with a next pointer and a name pointer. */
struct rec {
	struct rec *next;
	char *name;
};

static struct rec *table_find(const struct table *t, const char *name)
{
	struct rec *r = t->buckets[hash(name) & (t->n_buckets - 1)];
	while (r != NULL && strcmp(r->name, name) != 0)
		r = r->next;
	return r;
}

/* Double the buckets when the load passes 1; a failed grow keeps the old table (slower). */
static void table_grow(struct table *t)
{
	size_t nb = t->n_buckets * 2;
	void **b;

	if (t->count <= t->n_buckets || (b = calloc(nb, sizeof(void *))) == NULL)
		return;
	for (size_t i = 0; i < t->n_buckets; i++) {
		struct rec *r = t->buckets[i], *next;
		for (; r != NULL; r = next) {
			next = r->next;
			size_t j = hash(r->name) & (nb - 1);
			r->next = b[j];
			b[j] = r;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->n_buckets = nb;
}

static void table_insert(struct table *t, struct rec *r)
{
	size_t i = hash(r->name) & (t->n_buckets - 1);
	r->next = t->buckets[i];
	t->buckets[i] = r;
	t->count++;
	table_grow(t);
}

static void table_remove(struct table *t, struct rec *r)
{
	struct rec **pp = (struct rec **)&t->buckets[hash(r->name) & (t->n_buckets - 1)];
	while (*pp != NULL && *pp != r)
		pp = &(*pp)->next;
	if (*pp == r) {
		*pp = r->next;
		t->count--;
	}
}

/* What one allocation costs the heap: glibc's usable size plus its chunk header. */
static size_t heap(const void *p)
{
	return p != NULL ? malloc_usable_size((void *)p) + sizeof(size_t) : 0;
}

static size_t pod_bytes(const struct pod *p)
{
	return heap(p) + heap(p->d.uses) + heap(p->d.parts) + heap(p->d.compact) +
	       heap(p->d.container) + heap(p->d.error) + heap(p->d.warning) + heap(p->d.dra) +
	       heap(p->d.claims) + heap(p->priority_class) + heap(p->labels.block);
}

static size_t node_bytes(const struct node *n)
{
	return heap(n) + heap(n->name) + heap(n->cap_err) + heap(n->labels.block) + heap(n->items) +
	       heap(n->owners);
}

static char *dup_or_null(const char *s)
{
	return s != NULL && s[0] != '\0' ? strdup(s) : NULL;
}

static void pod_demand_clear(struct pod_demand *d)
{
	free(d->uses);
	free(d->parts);
	free(d->compact);
	free(d->container);
	free(d->error);
	free(d->warning);
	free(d->dra);
	free(d->claims);
	memset(d, 0, sizeof(*d));
}

static void node_free(struct node *n)
{
	if (n == NULL)
		return;
	free(n->name);
	free(n->cap_err);
	labelset_clear(&n->labels);
	free(n->items);
	free(n->owners);
	free(n);
}

static void pod_free(struct pod *p)
{
	if (p == NULL)
		return;
	pod_demand_clear(&p->d);
	free(p->priority_class);
	labelset_clear(&p->labels);
	free(p);
}

/* A slot for n (n->slot). 0, or -1 out of memory. */
static int slot_take(struct cache *c, struct node *n)
{
	if (c->n_free_slots > 0) {
		n->slot = c->free_slots[--c->n_free_slots];
	} else {
		if (c->n_slots == c->cap_slots) {
			uint32_t cap = c->cap_slots ? c->cap_slots * 2 : 256;
			struct node **v = realloc(c->slots, cap * sizeof(*v));
			if (v != NULL)
				c->slots = v;
			uint32_t *f = v ? realloc(c->free_slots, cap * sizeof(*f)) : NULL;
			if (f == NULL)
				return -1;
			c->free_slots = f;
			c->cap_slots = cap;
		}
		n->slot = c->n_slots++;
	}
	c->slots[n->slot] = n;
	return 0;
}

static struct node *node_get(struct cache *c, const char *name, int create)
{
	struct node *n = (struct node *)table_find(&c->nodes, name);

	if (n != NULL || !create)
		return n;
	if (c->nodes.count >= CACHE_MAX_NODES || (n = calloc(1, sizeof(*n))) == NULL)
		return NULL;
	if ((n->name = strdup(name)) == NULL) {
		free(n);
		return NULL;
	}
	n->cap_rc = CAPACITY_EUNKNOWN;
	if (slot_take(c, n) != 0) {
		node_free(n);
		return NULL;
	}
	table_insert(&c->nodes, (struct rec *)n);
	c->node_bytes += node_bytes(n);
	return n;
}

/* A node record with nothing left to say, and no pod pointing at it, is dropped. */
static void node_maybe_drop(struct cache *c, struct node *n)
{
	if (n != NULL && !n->known && n->refs == 0) {
		table_remove(&c->nodes, (struct rec *)n);
		c->node_bytes -= node_bytes(n);
		c->slots[n->slot] = NULL;
		c->free_slots[c->n_free_slots++] = n->slot;
		node_free(n);
	}
}

/* The sums again from the items: a saturated sum cannot be decremented (it lost the excess). */
static void node_resum(struct node *n)
{
	n->declared = 0;
	n->undeclared_gpus = 0;
	for (size_t i = 0; i < n->n; i++) {
		n->declared = sat_add(n->declared, n->items[i].bytes);
		n->undeclared_gpus = sat_add(n->undeclared_gpus, n->items[i].undeclared_gpus);
	}
}

static void detach(struct cache *c, struct pod *p)
{
	struct node *n = p->node;

	if (n == NULL)
		return;
	if (p->counted) {
		size_t last = n->n - 1;
		int saturated = n->declared == UINT64_MAX || n->undeclared_gpus == UINT64_MAX;
		n->declared -= n->items[p->slot].bytes;
		n->undeclared_gpus -= n->items[p->slot].undeclared_gpus;
		if (p->slot != last) {
			n->items[p->slot] = n->items[last];
			n->owners[p->slot] = n->owners[last];
			n->owners[p->slot]->slot = p->slot;
		}
		n->n--;
		p->counted = 0;
		if (saturated)
			node_resum(n);
	}
	n->refs--;
	p->node = NULL;
	node_maybe_drop(c, n);
}

/* The tier attributes of counted pod p into its item: known when p holds every kind the
 * policies want (an item without them counts in every tier: placement.h). */
static void item_attrs(const struct cache *c, const struct pod *p, struct placement_item *it)
{
	it->priority_class = p->priority_class;
	it->labels = p->labels.l.n ? &p->labels.l : NULL;
	it->attrs_known = (p->attrs & c->want_attrs) == c->want_attrs;
}

/* Count p on node name (when it holds GPU memory). 0 or CACHE_E*. */
static int attach(struct cache *c, struct pod *p, const char *name)
{
	struct node *n = node_get(c, name, 1);

	if (n == NULL)
		return c->nodes.count >= CACHE_MAX_NODES ? CACHE_EFULL : CACHE_ENOMEM;
	p->node = n;
	n->refs++;
	/* a pod asking no GPU is no consumer, unless its DRA containers have figures: they raise
	 * its claim's count (placement.h) */
	if (!placement_consumer(p->finished, p->d.status, p->d.n_dra_figs))
		return 0;
	if (n->n == n->n_cap) {
		size_t cap = n->n_cap ? n->n_cap * 2 : 4, before = node_bytes(n);
		struct placement_item *it = realloc(n->items, cap * sizeof(*it));
		struct pod **ow = it != NULL ? realloc(n->owners, cap * sizeof(*ow)) : NULL;
		if (it != NULL)
			n->items = it;
		if (ow != NULL) {
			n->owners = ow;
			n->n_cap = cap;
		}
		c->node_bytes = c->node_bytes - before + node_bytes(n);
		if (ow == NULL)
			return CACHE_ENOMEM;
	}
	p->slot = n->n++;
	struct placement_item *it = &n->items[p->slot];
	*it = (struct placement_item){
	    .key = p->key,
	    .uid = p->uid,
	    .seen_ms = p->seen_ms,
	};
	item_attrs(c, p, it);
	placement_item_count(it,
	                     &(const struct placement_count){
	                         .status = p->d.status,
	                         .bytes = p->d.bytes,
	                         .gpus = p->d.gpus,
	                         .pool = p->d.pool,
	                         .shares = p->d.shares ? p->d.compact : NULL,
	                         .n_shares = p->d.shares ? p->d.n_parts : 0,
	                         .whole_gpus = p->d.whole_gpus,
	                         .dra_units = p->d.dra_units,
	                         .dra_figs = (const struct demand_share *)(const void *)p->d.dra,
	                         .n_dra_figs = p->d.n_dra_figs,
	                     });
	n->owners[p->slot] = p;
	n->declared = sat_add(n->declared, it->bytes);
	n->undeclared_gpus = sat_add(n->undeclared_gpus, it->undeclared_gpus);
	p->counted = 1;
	return 0;
}

/* 1 when pod p's placement is judged: a GPU pod, or one that names DRA claims (its GPUs may be
 * claims only). Such a pod may hold a reservation or an extender's hold, so its going is
 * reported; it keeps its tier attributes (cache.h, "Tier attributes": a Binding of it reads
 * them, and a bound one with containers' figures is an item of its node). */
static int judged(const struct pod *p)
{
	return p->d.status != DEMAND_NOT_GPU || p->d.claims != NULL;
}

/* Queue the gone callback for p, once per pod: a finished pod already had it. A pod not
 * judged() never holds a reservation: not reported. */
static void gone_add(struct gone *g, size_t *n, struct pod *p)
{
	if (p->gone_sent || !judged(p))
		return;
	p->gone_sent = 1;
	if (*n >= GONE_INLINE_MAX || (g[*n].key = strdup(p->key)) == NULL)
		return; /* the reservation then lives until its TTL: counting more is safe */
	memcpy(g[*n].uid, p->uid, sizeof(g[*n].uid));
	(*n)++;
}

static void gone_flush(struct cache *c, struct gone *g, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (c->gone != NULL)
			c->gone(c->gone_ctx, g[i].key, g[i].uid);
		free(g[i].key);
	}
}

/* The by_source slot of a GPU pod: its source, strict declarations as declared, invalid
 * ones in CACHE_SOURCE_INVALID. */
static size_t source_slot(const struct pod_demand *d)
{
	if (d->status == DEMAND_INVALID)
		return CACHE_SOURCE_INVALID;
	return d->source == DEMAND_SRC_NONE ? DEMAND_SRC_DECLARED : (size_t)d->source;
}

static void pod_remove(struct cache *c, struct pod *p)
{
	if (p->d.status != DEMAND_NOT_GPU) {
		c->gpu_pods--;
		c->by_source[source_slot(&p->d)]--;
	}
	detach(c, p);
	table_remove(&c->pods, (struct rec *)p);
	c->bytes -= pod_bytes(p);
	pod_free(p);
}

/* 1 when pod obj names DRA claims (dra_pod_refs().any): kept whole, with them */
static int names_claims(const cJSON *obj)
{
	const cJSON *rc = json_at(obj, "spec", "resourceClaims", NULL);

	return (cJSON_IsArray(rc) && cJSON_GetArraySize(rc) > 0) ||
	       json_at(obj, "status", "extendedResourceClaimStatus", "resourceClaimName", NULL) !=
	           NULL;
}

/* The claims pod obj names, packed (pod_demand.claims); NULL with *rc 0 when none, NULL with
 * *rc CACHE_ENOMEM. A claim list the decoder refuses is packed with no template, no name and
 * no extended claim (a shape no readable list gives: it names at least one): read back as one
 * claim not read (the safe side: every DRA GPU of the node) and CACHE_EINVAL, so that a
 * Binding of it takes the API path, which refuses such a pod (InvalidDeclaration), as the
 * extender and a pod CREATE do. */
static unsigned char *claims_pack(const cJSON *obj, int *rc)
{
	struct dra_pod_refs *r = malloc(sizeof(*r)); /* 8 KiB */
	unsigned char *b = NULL;
	size_t len = 2, o = 1;
	char err[DRA_MSG_MAX];

	*rc = r == NULL ? CACHE_ENOMEM : 0;
	if (r == NULL)
		return NULL;
	if (dra_pod_refs(obj, r, err, sizeof(err)) != 0) {
		memset(r, 0, sizeof(*r));
		r->any = 1; /* n_templates 0: not read (cache_get_pod_claims) */
	}
	if (!r->any)
		goto out;
	len += strlen(r->extended) + 1;
	for (size_t i = 0; i < r->n; i++)
		len += strlen(r->names[i]) + 1;
	if ((b = malloc(len)) == NULL) {
		*rc = CACHE_ENOMEM;
		goto out;
	}
	b[0] = (unsigned char)(r->n_templates < 255 ? r->n_templates : 255);
	for (size_t i = 0; i <= r->n; i++) {
		const char *n = i == 0 ? r->extended : r->names[i - 1];
		size_t l = strlen(n) + 1;
		memcpy(b + o, n, l);
		o += l;
	}
	b[o] = '\0';
out:
	free(r);
	return b;
}

/* 1 when pod p keeps tier attributes (cache.h, "Tier attributes"): judged(). */
static int keeps_attrs(const struct pod *p)
{
	return judged(p);
}

/* The pod's fields from its object and its demand d (pod_demand). 0 or CACHE_ENOMEM (p
 * unchanged but its demand). */
static int pod_fill(struct cache *c, struct pod *p, const cJSON *obj, const struct demand *dp)
{
	const struct demand d = *dp;
	const char *uid = json_str(obj, "metadata", "uid", NULL);

	if (p->d.status != DEMAND_NOT_GPU) {
		c->gpu_pods--;
		c->by_source[source_slot(&p->d)]--;
	}
	pod_demand_clear(&p->d);
	p->d.status = d.status;
	p->d.source = d.source;
	p->d.shares = d.status == DEMAND_OK && d.shares;
	p->d.whole_gpus = demand_takes_cards(&d) ? d.gpus : 0;
	p->d.dra_units = d.dra_units;
	if (d.status == DEMAND_OK && d.n_parts > 0) {
		p->d.parts = parts_new(d.parts, d.n_parts);
		p->d.compact = malloc(d.n_parts * sizeof(*p->d.compact));
		if (p->d.parts != NULL && p->d.compact != NULL) {
			memcpy(p->d.compact, d.compact, d.n_parts * sizeof(*p->d.compact));
			p->d.n_parts = (uint8_t)d.n_parts;
		} else {
			p->d.shares = 0;
		}
	}
	p->d.bytes = d.bytes;
	p->d.gpus = d.gpus;
	p->d.max_per_gpu_bytes = d.max_per_gpu_bytes;
	p->d.pool = d.pool;
	if (d.n_uses > 0) {
		p->d.uses = uses_new(d.uses, d.n_uses);
		if (p->d.uses != NULL) {
			p->d.n_uses = (uint8_t)d.n_uses;
		}
	}
	int crc = 0;
	p->d.claims = names_claims(obj) ? claims_pack(obj, &crc) : NULL;
	if (crc != 0)
		return CACHE_ENOMEM;
	p->d.container = dup_or_null(d.max_per_gpu_container);
	p->d.error = dup_or_null(d.error);
	p->d.warning = dup_or_null(d.warning);
	if (d.n_dra_figs > 0 && d.n_dra_figs <= DEMAND_MAX_PARTS) {
		size_t fb = d.n_dra_figs * sizeof(d.dra_figs[0]);
		size_t wl = strnlen(d.dra_words, sizeof(d.dra_words) - 1);
		if ((p->d.dra = malloc(fb + wl + 1)) != NULL) {
			memcpy(p->d.dra, d.dra_figs, fb);
			memcpy(p->d.dra + fb, d.dra_words, wl);
			p->d.dra[fb + wl] = '\0';
			p->d.n_dra_figs = (uint8_t)d.n_dra_figs;
		}
	}
	if (p->d.status != DEMAND_NOT_GPU) {
		c->gpu_pods++;
		c->by_source[source_slot(&p->d)]++;
	}
	free(p->priority_class);
	p->priority_class = NULL;
	labelset_clear(&p->labels);
	p->attrs = 0;
	if (keeps_attrs(p)) {
		/* Unbound, a Binding may still read them (cache_get_pod_attrs): all kept. Bound,
		 * only what the policies' tiers want (cache.h, "Tier attributes"). */
		const char *pc = json_str(obj, "spec", "priorityClassName", NULL);
		const char *node = json_str(obj, "spec", "nodeName", NULL);
		unsigned keep = node != NULL && node[0] != '\0' && strlen(node) <= NODE_NAME_MAX
		                    ? c->want_attrs
		                    : CACHE_ATTRS_ALL;
		if ((keep & CACHE_ATTR_PRIORITY) && pc && pc[0] &&
		    (p->priority_class = strdup(pc)) == NULL)
			return CACHE_ENOMEM;
		if ((keep & CACHE_ATTR_LABELS) &&
		    labelset_copy(&p->labels, json_at(obj, "metadata", "labels", NULL)) != 0)
			return CACHE_ENOMEM;
		p->attrs = keep;
	}
	if ((d.n_uses > 0 && !p->d.uses) || (d.max_per_gpu_container[0] && !p->d.container) ||
	    (d.status == DEMAND_OK && d.n_parts > 0 && p->d.n_parts == 0) ||
	    (d.error[0] && !p->d.error) || (d.warning[0] && !p->d.warning) ||
	    (d.n_dra_figs > 0 && p->d.n_dra_figs == 0))
		return CACHE_ENOMEM;
	snprintf(p->uid, sizeof(p->uid), "%s", uid ? uid : "");
	p->finished = pod_finished(obj);
	p->mirror = pod_is_mirror(obj);
	p->deleting = pod_being_deleted(obj);
	return 0;
}

/* 1 when a pod of demand d and uid can be kept compact (podlite.h): it asks for no GPU and
 * has nothing else a caller could read (no warning), its uid is a UUID (into uid16). */
static int lite_eligible(const struct demand *d, const char *uid, uint8_t uid16[16])
{
	return d->status == DEMAND_NOT_GPU && d->bytes == 0 && d->gpus == 0 &&
	       d->max_per_gpu_bytes == 0 && d->max_per_gpu_container[0] == '\0' && d->pool == 0 &&
	       d->n_uses == 0 && d->error[0] == '\0' && d->warning[0] == '\0' && d->n_parts == 0 &&
	       d->source == DEMAND_SRC_NONE && !d->shares && !demand_takes_cards(d) &&
	       d->n_dra_figs == 0 && podlite_uid_parse(uid, uid16) == 0;
}

static int lite_uid_is(const struct podlite_rec *r, const char *uid)
{
	uint8_t u[16];
	return podlite_uid_parse(uid, u) == 0 && memcmp(u, r->uid, 16) == 0;
}

/* Point compact pod id at node name ("" or NULL: unbound; over NODE_NAME_MAX: unbound, as a
 * whole pod). 0 or CACHE_E* (then unbound). */
static int lite_bind(struct cache *c, uint32_t id, const char *name)
{
	struct podlite_rec *r = podlite_at(c->lite, id);
	struct node *old = r->node ? c->slots[r->node - 1] : NULL, *n = NULL;

	if (name != NULL && name[0] != '\0' && strlen(name) <= NODE_NAME_MAX) {
		if (old != NULL && strcmp(old->name, name) == 0)
			return 0;
		if ((n = node_get(c, name, 1)) == NULL) {
			r->node = 0;
			if (old != NULL) {
				old->refs--;
				node_maybe_drop(c, old);
			}
			return c->nodes.count >= CACHE_MAX_NODES ? CACHE_EFULL : CACHE_ENOMEM;
		}
		n->refs++;
	}
	r->node = n ? n->slot + 1 : 0;
	if (old != NULL) {
		old->refs--;
		node_maybe_drop(c, old);
	}
	return 0;
}

static void lite_remove(struct cache *c, uint32_t id)
{
	(void)lite_bind(c, id, NULL);
	podlite_remove(c->lite, id);
}

/* Store or refresh compact pod ns/name (id, or PODLITE_NONE when new). 0 or CACHE_E*: the pod
 * is then not stored. */
static int lite_apply(struct cache *c, uint32_t id, const char *ns, const char *name,
                      const uint8_t uid16[16], const cJSON *obj)
{
	int rc;

	if (id == PODLITE_NONE) {
		if (c->pods.count + podlite_count(c->lite) >= CACHE_MAX_PODS)
			return CACHE_EFULL;
		rc = podlite_insert(c->lite, ns, name, uid16, &id);
		if (rc != 0)
			return rc == PODLITE_ENOMEM ? CACHE_ENOMEM : CACHE_EFULL;
	}
	if ((rc = lite_bind(c, id, json_str(obj, "spec", "nodeName", NULL))) != 0) {
		lite_remove(c, id);
		return rc;
	}
	struct podlite_rec *r = podlite_at(c->lite, id);
	r->flags = PODLITE_USED | (pod_finished(obj) ? PODLITE_FINISHED : 0) |
	           (pod_is_mirror(obj) ? PODLITE_MIRROR : 0) |
	           (pod_being_deleted(obj) ? PODLITE_DELETING : 0);
	return 0;
}

static int apply_pod_locked(struct cache *c, enum watch_event_type type, const cJSON *obj,
                            struct gone *g, size_t *ng)
{
	char key[CACHE_KEY_MAX];
	const char *uid = json_str(obj, "metadata", "uid", NULL);
	const char *ns = json_str(obj, "metadata", "namespace", NULL);
	const char *name = json_str(obj, "metadata", "name", NULL);
	uint32_t li = PODLITE_NONE;
	uint8_t uid16[16];
	struct demand d;
	struct pod *p;

	if (!cJSON_IsObject(obj) || pod_key_of(obj, key, sizeof(key)) != 0)
		return CACHE_EINVAL;
	if (uid != NULL && strlen(uid) >= CACHE_UID_MAX)
		return CACHE_EINVAL; /* cut, it would differ from itself: every event a new pod */
	ns = ns ? ns : "";
	p = (struct pod *)table_find(&c->pods, key);
	if (p == NULL && (li = podlite_find(c->lite, ns, name)) != PODLITE_NONE) {
		/* A compact pod asks for no GPU: never reported gone (it holds no reservation). */
		int same = uid == NULL || lite_uid_is(podlite_at(c->lite, li), uid);
		if (type == WATCH_DELETED || !same) {
			if (same || type != WATCH_DELETED)
				lite_remove(c, li);
			li = PODLITE_NONE;
			if (type == WATCH_DELETED)
				return 0;
		}
	}
	if (type == WATCH_DELETED) {
		if (p != NULL && (uid == NULL || p->uid[0] == '\0' || strcmp(p->uid, uid) == 0)) {
			gone_add(g, ng, p);
			pod_remove(c, p);
		}
		return 0;
	}
	if (p != NULL && uid != NULL && p->uid[0] != '\0' && strcmp(p->uid, uid) != 0) {
		gone_add(g, ng, p); /* same name, another pod: the old one was deleted */
		pod_remove(c, p);
		p = NULL;
	}
	pod_demand(obj, &c->dcfg, &d);
	if (lite_eligible(&d, uid, uid16) && !names_claims(obj)) {
		/* Kept compact. A whole record of it (it asked for a GPU before) is dropped
		 * without a gone callback, as a whole pod that stops asking keeps its
		 * reservation. */
		if (p != NULL)
			pod_remove(c, p);
		int rc = lite_apply(c, li, ns, name, uid16, obj);
		if (rc != CACHE_EFULL || c->pods.count + podlite_count(c->lite) >= CACHE_MAX_PODS)
			return rc;
		/* no namespace slot left, or a name it cannot keep: kept whole instead */
		p = NULL;
	} else if (li != PODLITE_NONE) {
		lite_remove(c, li); /* asks for a GPU now (or has a warning): kept whole */
	}
	if (p == NULL) {
		if (c->pods.count + podlite_count(c->lite) >= CACHE_MAX_PODS)
			return CACHE_EFULL;
		size_t klen = strlen(key) + 1;
		if ((p = calloc(1, sizeof(*p) + klen)) == NULL)
			return CACHE_ENOMEM;
		p->key = memcpy(p + 1, key, klen); /* one allocation: the record, then its key */
		table_insert(&c->pods, (struct rec *)p);
	} else {
		c->bytes -= pod_bytes(p); /* counted again below, as refilled */
	}
	p->mark = 0;
	int was_finished = p->finished;
	const char *node = json_str(obj, "spec", "nodeName", NULL);
	/* seen_ms: when the pod first showed on this node (shared records prune by it). */
	if (node == NULL || p->node == NULL || strcmp(p->node->name, node) != 0)
		p->seen_ms = monotime_ms();
	detach(c, p);
	int rc = pod_fill(c, p, obj, &d);
	c->bytes += pod_bytes(p);
	if (rc == 0 && node != NULL && node[0] != '\0' && strlen(node) <= NODE_NAME_MAX)
		rc = attach(c, p, node);
	if (rc != 0) {
		/* Never keep a pod half known: drop it. It is not gone (no callback: its
		 * reservation must keep counting); the caller learns the store is incomplete from
		 * rc. */
		pod_remove(c, p);
		return rc;
	}
	if (p->finished && !was_finished)
		gone_add(g, ng, p);
	return 0;
}

int cache_apply_pod(struct cache *c, enum watch_event_type type, const cJSON *pod)
{
	struct gone g[GONE_INLINE_MAX];
	size_t ng = 0;
	int rc = 0;

	if (type != WATCH_ADDED && type != WATCH_MODIFIED && type != WATCH_DELETED)
		return 0;
	pthread_rwlock_wrlock(&c->lock);
	rc = apply_pod_locked(c, type, pod, g, &ng);
	pthread_rwlock_unlock(&c->lock);
	gone_flush(c, g, ng);
	return rc;
}

/* The Node object is gone (deleted, or resynced away): the record stays while pods point at it. */
static void node_forget(struct cache *c, struct node *n)
{
	if (n->known)
		c->known_nodes--;
	n->known = 0;
	n->mark = 0;
	n->cap_rc = CAPACITY_EUNKNOWN;
	c->node_bytes -= heap(n->cap_err);
	free(n->cap_err);
	n->cap_err = NULL;
	node_maybe_drop(c, n);
}

int cache_apply_node(struct cache *c, enum watch_event_type type, const cJSON *obj)
{
	char err[CAPACITY_MSG_MAX];
	const char *name = json_str(obj, "metadata", "name", NULL);
	int rc = 0;

	if (type != WATCH_ADDED && type != WATCH_MODIFIED && type != WATCH_DELETED)
		return 0;
	if (!cJSON_IsObject(obj) || name == NULL || name[0] == '\0' || strlen(name) > NODE_NAME_MAX)
		return CACHE_EINVAL;
	pthread_rwlock_wrlock(&c->lock);
	struct node *n = node_get(c, name, type != WATCH_DELETED);
	if (n == NULL) {
		if (type != WATCH_DELETED)
			rc = c->nodes.count >= CACHE_MAX_NODES ? CACHE_EFULL : CACHE_ENOMEM;
		goto out;
	}
	n->mark = 0;
	if (type == WATCH_DELETED) {
		node_forget(c, n);
		goto out;
	}
	c->node_bytes -= node_bytes(n);
	free(n->cap_err);
	n->cap_err = NULL;
	if (!n->known)
		c->known_nodes++;
	n->known = 1;
	err[0] = '\0';
	n->cap_rc = capacity_from_node(obj, &c->dcfg, &n->cap, err, sizeof(err));
	if (n->cap_rc != 0 && (n->cap_err = strdup(err)) == NULL)
		rc = CACHE_ENOMEM; /* the node reads as unknown capacity without a message */
	if (labelset_copy(&n->labels, json_at(obj, "metadata", "labels", NULL)) != 0)
		rc = CACHE_ENOMEM; /* no labels: selected by no policy until the relist */
	c->node_bytes += node_bytes(n);
out:
	pthread_rwlock_unlock(&c->lock);
	return rc;
}

void cache_resync_begin(struct cache *c, enum cache_kind kind)
{
	struct table *t = kind == CACHE_PODS ? &c->pods : &c->nodes;

	pthread_rwlock_wrlock(&c->lock);
	for (uint32_t i = 0; kind == CACHE_PODS && i < podlite_ids(c->lite); i++) {
		struct podlite_rec *r = podlite_at(c->lite, i);
		if (r->flags & PODLITE_USED)
			r->flags |= PODLITE_MARK;
	}
	for (size_t i = 0; i < t->n_buckets; i++)
		for (struct rec *r = t->buckets[i]; r != NULL; r = r->next) {
			if (kind == CACHE_PODS)
				((struct pod *)r)->mark = 1;
			else
				((struct node *)r)->mark = ((struct node *)r)->known;
		}
	pthread_rwlock_unlock(&c->lock);
}

size_t cache_resync_end(struct cache *c, enum cache_kind kind)
{
	struct table *t = kind == CACHE_PODS ? &c->pods : &c->nodes;
	struct gone *g = NULL;
	size_t removed = 0, ng = 0, cap = 0;

	pthread_rwlock_wrlock(&c->lock);
	for (uint32_t i = 0; kind == CACHE_PODS && i < podlite_ids(c->lite); i++) {
		struct podlite_rec *r = podlite_at(c->lite, i);
		if ((r->flags & (PODLITE_USED | PODLITE_MARK)) == (PODLITE_USED | PODLITE_MARK)) {
			lite_remove(c, i); /* never reserved: no gone callback */
			removed++;
		}
	}
	for (size_t i = 0; i < t->n_buckets; i++) {
		struct rec *r = t->buckets[i], *next;
		for (; r != NULL; r = next) {
			next = r->next;
			if (kind == CACHE_NODES) {
				struct node *n = (struct node *)r;
				if (n->mark) {
					removed++;
					node_forget(c, n);
				}
				continue;
			}
			struct pod *p = (struct pod *)r;
			if (!p->mark)
				continue;
			removed++;
			if (p->gone_sent || !judged(p)) {
				/* finished (reported then), or never reserved */
				pod_remove(c, p);
				continue;
			}
			p->gone_sent = 1;
			if (ng == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct gone *ngp = realloc(g, nc * sizeof(*g));
				if (ngp != NULL) {
					g = ngp;
					cap = nc;
				}
			}
			if (ng < cap && (g[ng].key = strdup(p->key)) != NULL) {
				memcpy(g[ng].uid, p->uid, sizeof(g[ng].uid));
				ng++;
			}
			pod_remove(c, p);
		}
	}
	pthread_rwlock_unlock(&c->lock);
	gone_flush(c, g, ng);
	free(g);
	return removed;
}

int cache_get_pod(struct cache *c, const char *ns, const char *name, struct cache_pod *out)
{
	char key[CACHE_KEY_MAX];
	int rc = CACHE_ENOTFOUND;
	uint32_t li;

	memset(out, 0, sizeof(*out));
	if (pod_key_make(ns, name, key, sizeof(key)) != 0)
		return rc;
	pthread_rwlock_rdlock(&c->lock);
	const struct pod *p = (const struct pod *)table_find(&c->pods, key);
	if (p != NULL) {
		struct demand *d = &out->demand;
		snprintf(out->uid, sizeof(out->uid), "%s", p->uid);
		snprintf(out->node, sizeof(out->node), "%s", p->node ? p->node->name : "");
		out->finished = p->finished;
		out->mirror = p->mirror;
		out->deleting = p->deleting;
		d->status = p->d.status;
		d->bytes = p->d.bytes;
		d->gpus = p->d.gpus;
		d->dra_units = p->d.dra_units;
		d->max_per_gpu_bytes = p->d.max_per_gpu_bytes;
		d->pool = p->d.pool;
		d->n_uses = p->d.n_uses;
		if (d->n_uses > 0)
			unpack_uses(p->d.uses, d->uses, d->n_uses);
		d->source = p->d.source;
		d->shares = p->d.shares;
		d->n_parts = p->d.n_parts;
		if (d->n_parts > 0) {
			unpack_parts(p->d.parts, d->parts, d->n_parts);
			memcpy(d->compact, p->d.compact, d->n_parts * sizeof(d->compact[0]));
		}
		snprintf(d->max_per_gpu_container, sizeof(d->max_per_gpu_container), "%s",
		         p->d.container ? p->d.container : "");
		snprintf(d->error, sizeof(d->error), "%s", p->d.error ? p->d.error : "");
		snprintf(d->warning, sizeof(d->warning), "%s", p->d.warning ? p->d.warning : "");
		d->n_dra_figs = p->d.n_dra_figs;
		if (d->n_dra_figs > 0) {
			size_t fb = d->n_dra_figs * sizeof(d->dra_figs[0]);
			memcpy(d->dra_figs, p->d.dra, fb);
			snprintf(d->dra_words, sizeof(d->dra_words), "%s",
			         (const char *)p->d.dra + fb);
		}
		rc = 0;
	} else if ((li = podlite_find(c->lite, ns, name)) != PODLITE_NONE) {
		/* the demand of a pod that asks for no GPU: DEMAND_NOT_GPU and zeros (eligible) */
		const struct podlite_rec *r = podlite_at(c->lite, li);
		podlite_uid_format(r->uid, out->uid);
		snprintf(out->node, sizeof(out->node), "%s",
		         r->node ? c->slots[r->node - 1]->name : "");
		out->finished = (r->flags & PODLITE_FINISHED) != 0;
		out->mirror = (r->flags & PODLITE_MIRROR) != 0;
		out->deleting = (r->flags & PODLITE_DELETING) != 0;
		out->demand.status = DEMAND_NOT_GPU;
		rc = 0;
	}
	pthread_rwlock_unlock(&c->lock);
	return rc;
}

int cache_get_pod_claims(struct cache *c, const char *ns, const char *name, const char *uid,
                         struct dra_pod_refs *out)
{
	char key[CACHE_KEY_MAX];
	int rc = CACHE_ENOTFOUND;

	memset(out, 0, sizeof(*out));
	if (pod_key_make(ns, name, key, sizeof(key)) != 0)
		return rc;
	pthread_rwlock_rdlock(&c->lock);
	const struct pod *p = (const struct pod *)table_find(&c->pods, key);
	if (p != NULL && (uid == NULL || uid[0] == '\0' || strcmp(p->uid, uid) == 0)) {
		rc = 0;
		if (p->d.claims != NULL) {
			const char *s = (const char *)p->d.claims + 1;
			out->any = 1;
			out->n_templates = p->d.claims[0];
			snprintf(out->extended, sizeof(out->extended), "%s", s);
			for (s += strlen(s) + 1; *s != '\0' && out->n < DRA_POD_CLAIMS;
			     s += strlen(s) + 1)
				snprintf(out->names[out->n++], DRA_NAME_MAX, "%s", s);
			if (out->n_templates == 0 && out->n == 0) { /* not read (claims_pack) */
				out->n_templates = 1;
				rc = CACHE_EINVAL;
			}
		}
	} else if (p == NULL && podlite_find(c->lite, ns, name) != PODLITE_NONE) {
		rc = 0; /* compact: it names no claim */
	}
	pthread_rwlock_unlock(&c->lock);
	return rc;
}

int cache_get_pod_attrs(struct cache *c, const char *ns, const char *name, const char *uid,
                        char *priority_class, size_t pc_cap, struct labelset *labels)
{
	char key[CACHE_KEY_MAX];
	int rc = CACHE_ENOTFOUND;

	priority_class[0] = '\0';
	labelset_clear(labels);
	if (pod_key_make(ns, name, key, sizeof(key)) != 0)
		return CACHE_ENOTFOUND;
	pthread_rwlock_rdlock(&c->lock);
	const struct pod *p = (const struct pod *)table_find(&c->pods, key);
	uint32_t li = p == NULL ? podlite_find(c->lite, ns, name) : PODLITE_NONE;
	if (p != NULL && (uid == NULL || uid[0] == '\0' || strcmp(p->uid, uid) == 0)) {
		if ((p->attrs & c->want_attrs) != c->want_attrs) {
			/* bound, read before a policy wanted them; or asks for no GPU and names
			 * no DRA claim: none kept */
			rc = CACHE_ENOATTRS;
		} else {
			snprintf(priority_class, pc_cap, "%s",
			         p->priority_class ? p->priority_class : "");
			rc = labelset_copy_pairs(labels, &p->labels.l) == 0 ? 0 : CACHE_ENOMEM;
		}
	} else if (li != PODLITE_NONE &&
	           (uid == NULL || uid[0] == '\0' || lite_uid_is(podlite_at(c->lite, li), uid))) {
		/* asks for no GPU: no attributes kept. A Binding reads them only for a pod whose
		 * GPUs are DRA claims: its tier is read from the API server when a tier wants them
		 */
		rc = c->want_attrs != 0 ? CACHE_ENOATTRS : 0;
	}
	pthread_rwlock_unlock(&c->lock);
	return rc;
}

static void view_of(const struct node *n, const char *name, struct cache_node_view *v)
{
	memset(v, 0, sizeof(*v));
	v->name = name;
	v->capacity_rc = CAPACITY_EUNKNOWN;
	v->capacity_error = UNSEEN_MSG;
	if (n == NULL)
		return;
	v->known = n->known;
	if (n->known) {
		v->labels = &n->labels.l;
		v->capacity_rc = n->cap_rc;
		v->cap = n->cap_rc == 0 ? &n->cap : NULL;
		v->capacity_error = n->cap_rc == 0 ? "" : n->cap_err ? n->cap_err : NOMSG_MSG;
	}
	v->pods = n->items;
	v->n_pods = n->n;
	v->declared_bytes = n->declared;
	v->undeclared_gpus = n->undeclared_gpus;
}

void cache_with_node(struct cache *c, const char *node, cache_node_fn fn, void *ctx)
{
	struct cache_node_view v;

	pthread_rwlock_rdlock(&c->lock);
	view_of((const struct node *)table_find(&c->nodes, node), node, &v);
	fn(ctx, &v);
	pthread_rwlock_unlock(&c->lock);
}

void cache_each_gpu_node(struct cache *c, cache_node_fn fn, void *ctx)
{
	struct cache_node_view v;

	pthread_rwlock_rdlock(&c->lock);
	for (size_t i = 0; i < c->nodes.n_buckets; i++)
		for (struct rec *r = c->nodes.buckets[i]; r != NULL; r = r->next) {
			const struct node *n = (const struct node *)r;
			if (!n->known || (n->cap_rc != 0 && n->n == 0))
				continue;
			view_of(n, n->name, &v);
			fn(ctx, &v);
		}
	pthread_rwlock_unlock(&c->lock);
}

size_t cache_set_pod_attrs(struct cache *c, unsigned want)
{
	size_t lacking = 0;

	want &= CACHE_ATTRS_ALL;
	pthread_rwlock_wrlock(&c->lock);
	if (want == c->want_attrs)
		goto out;
	unsigned drop = c->want_attrs & ~want;
	c->want_attrs = want;
	for (size_t i = 0; i < c->pods.n_buckets; i++)
		for (struct rec *r = c->pods.buckets[i]; r != NULL; r = r->next) {
			struct pod *p = (struct pod *)r;
			if (!keeps_attrs(p) || p->node == NULL)
				continue; /* no attributes, or unbound: all kept */
			c->bytes -= pod_bytes(p);
			if ((drop & CACHE_ATTR_PRIORITY) && (p->attrs & CACHE_ATTR_PRIORITY)) {
				free(p->priority_class);
				p->priority_class = NULL;
				p->attrs &= ~CACHE_ATTR_PRIORITY;
			}
			if ((drop & CACHE_ATTR_LABELS) && (p->attrs & CACHE_ATTR_LABELS)) {
				labelset_clear(&p->labels);
				p->attrs &= ~CACHE_ATTR_LABELS;
			}
			c->bytes += pod_bytes(p);
			if (!p->counted)
				continue; /* finished: in no sum, its attributes never read */
			item_attrs(c, p, &p->node->items[p->slot]);
			if ((p->attrs & want) != want)
				lacking++;
		}
out:
	pthread_rwlock_unlock(&c->lock);
	return lacking;
}

unsigned cache_pod_attrs_wanted(struct cache *c)
{
	pthread_rwlock_rdlock(&c->lock);
	unsigned want = c->want_attrs;
	pthread_rwlock_unlock(&c->lock);
	return want;
}

void cache_stats(struct cache *c, struct cache_stats *out)
{
	pthread_rwlock_rdlock(&c->lock);
	out->pods = c->pods.count + podlite_count(c->lite);
	out->compact_pods = podlite_count(c->lite);
	out->compact_bytes = podlite_bytes(c->lite);
	out->gpu_pods = c->gpu_pods;
	memcpy(out->by_source, c->by_source, sizeof(out->by_source));
	out->nodes = c->known_nodes;
	out->pod_bytes = c->bytes + heap(c->pods.buckets);
	out->node_bytes =
	    c->node_bytes + heap(c->nodes.buckets) + heap(c->slots) + heap(c->free_slots);
	out->bytes = heap(c) + out->pod_bytes + out->node_bytes + out->compact_bytes;
	for (size_t i = 0; i < DEMAND_MAX_RESOURCES; i++)
		out->bytes += heap(c->resources[i]);
	pthread_rwlock_unlock(&c->lock);
}

struct cache *cache_new(const struct demand_config *dcfg, cache_gone_fn gone, void *gone_ctx)
{
	struct cache *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	if (pthread_rwlock_init(&c->lock, NULL) != 0) {
		free(c);
		return NULL;
	}
	c->gone = gone;
	c->gone_ctx = gone_ctx;
	c->want_attrs = CACHE_ATTRS_ALL; /* until told what the policies want */
	if (table_init(&c->pods) != 0 || table_init(&c->nodes) != 0 ||
	    (c->lite = podlite_new()) == NULL)
		goto err;
	for (size_t i = 0;
	     dcfg && dcfg->gpu_resources && i < dcfg->n_gpu_resources && i < DEMAND_MAX_RESOURCES;
	     i++) {
		if ((c->resources[i] = strdup(dcfg->gpu_resources[i])) == NULL)
			goto err;
		c->dcfg.n_gpu_resources++;
	}
	c->dcfg.gpu_resources = c->dcfg.n_gpu_resources ? (const char *const *)c->resources : NULL;
	c->dcfg.infer = dcfg ? dcfg->infer : 0;
	if (dcfg != NULL && dcfg->engines != NULL)
		c->engines = *dcfg->engines;
	else
		engine_defaults_init(&c->engines);
	c->dcfg.engines = &c->engines;
	return c;
err:
	cache_free(c);
	return NULL;
}

void cache_free(struct cache *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; c->pods.buckets && i < c->pods.n_buckets; i++) {
		struct rec *r = c->pods.buckets[i], *next;
		for (; r != NULL; r = next) {
			next = r->next;
			pod_free((struct pod *)r);
		}
	}
	for (size_t i = 0; c->nodes.buckets && i < c->nodes.n_buckets; i++) {
		struct rec *r = c->nodes.buckets[i], *next;
		for (; r != NULL; r = next) {
			next = r->next;
			node_free((struct node *)r);
		}
	}
	free(c->pods.buckets);
	free(c->nodes.buckets);
	podlite_free(c->lite);
	free(c->slots);
	free(c->free_slots);
	for (size_t i = 0; i < DEMAND_MAX_RESOURCES; i++)
		free(c->resources[i]);
	pthread_rwlock_destroy(&c->lock);
	free(c);
}
