/* policies: the store of GPUMemoryPolicy objects (policies.h). */
#include "policies.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonpath.h"
#include "log.h"
#include "metrics.h"

/* A parsed policy shared by the entry that holds it and the generations that list it: freed with
 * its last reference. */
struct polref {
	atomic_uint refs;
	struct gpupolicy *p;
};

/* An immutable generation (policies.h): the usable policies in name order, referenced (v), and
 * their parsed policies in the same order (p: v[i]->p, the array gpupolicy_select() reads). */
struct policies_gen {
	atomic_uint refs;
	int synced;
	size_t n;
	struct polref **v;
	const struct gpupolicy **p;
};

/* What policies_acquire gives when no generation could be made (out of memory): no policy and
 * not synced, so placements are refused until the next change is published. Never freed. */
static struct policies_gen unpublished = {.refs = 1, .synced = 0, .n = 0, .v = NULL, .p = NULL};

struct entry {
	char *name;
	char *uid; /* metadata.uid, "" when absent: a new object of the same name is another */
	long long generation;
	struct polref *ref;  /* NULL: invalid */
	char *error;         /* NULL when usable */
	char ready[8];       /* status.conditions[type=Ready].status as read ("" if none) */
	char transition[40]; /* ... and its lastTransitionTime ("" if none or too long) */
	int mark;
};

struct policies {
	pthread_rwlock_t lock;
	struct entry *v; /* sorted by name */
	size_t n, cap;
	int synced, crd_missing;
	pthread_mutex_t pub;      /* cur: its swap and a reader's reference, nothing more */
	struct policies_gen *cur; /* the generation published last */
};

static void polref_put(struct polref *r)
{
	if (r != NULL && atomic_fetch_sub(&r->refs, 1) == 1) {
		gpupolicy_free(r->p);
		free(r);
	}
}

static void gen_put(struct policies_gen *g)
{
	if (g == NULL || g == &unpublished || atomic_fetch_sub(&g->refs, 1) != 1)
		return;
	for (size_t i = 0; i < g->n; i++)
		polref_put(g->v[i]);
	free(g->v);
	free(g->p);
	free(g);
}

/* With the write lock held (or no reader yet): publish the store as it now is, a new generation
 * replacing the current one (readers holding the old keep it until they release it). Out of
 * memory: the unpublished generation (refuses placements) until a later change publishes. */
static void publish(struct policies *s)
{
	struct policies_gen *g = calloc(1, sizeof(*g)), *old;
	size_t usable = 0;

	for (size_t i = 0; i < s->n; i++)
		usable += s->v[i].ref != NULL;
	if (g != NULL && usable > 0 &&
	    ((g->v = calloc(usable, sizeof(*g->v))) == NULL ||
	     (g->p = calloc(usable, sizeof(*g->p))) == NULL)) {
		free(g->v);
		free(g);
		g = NULL;
	}
	if (g != NULL) {
		atomic_init(&g->refs, 1);
		g->synced = s->synced;
		for (size_t i = 0; i < s->n; i++)
			if (s->v[i].ref != NULL) {
				atomic_fetch_add(&s->v[i].ref->refs, 1);
				g->p[g->n] = s->v[i].ref->p;
				g->v[g->n++] = s->v[i].ref;
			}
	}
	pthread_mutex_lock(&s->pub);
	old = s->cur;
	s->cur = g != NULL ? g : &unpublished;
	pthread_mutex_unlock(&s->pub);
	gen_put(old);
}

struct policies *policies_new(void)
{
	struct policies *s = calloc(1, sizeof(*s));

	if (s == NULL)
		return NULL;
	if (pthread_rwlock_init(&s->lock, NULL) != 0) {
		free(s);
		return NULL;
	}
	if (pthread_mutex_init(&s->pub, NULL) != 0) {
		pthread_rwlock_destroy(&s->lock);
		free(s);
		return NULL;
	}
	publish(s);
	return s;
}

static void entry_clear(struct entry *e)
{
	free(e->name);
	free(e->uid);
	polref_put(e->ref);
	free(e->error);
	memset(e, 0, sizeof(*e));
}

void policies_free(struct policies *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n; i++)
		entry_clear(&s->v[i]);
	free(s->v);
	gen_put(s->cur);
	pthread_mutex_destroy(&s->pub);
	pthread_rwlock_destroy(&s->lock);
	free(s);
}

/* The object's Ready condition as stored (written by the status writer, which keeps its
 * lastTransitionTime while the status stays the same, across leaders). */
static void read_ready(const cJSON *obj, struct entry *e)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, json_at(obj, "status", "conditions", NULL))
	{
		const char *type = json_str(c, "type", NULL);
		const char *st = json_str(c, "status", NULL);
		const char *t = json_str(c, "lastTransitionTime", NULL);

		if (type == NULL || strcmp(type, "Ready") != 0 || st == NULL || t == NULL ||
		    strlen(st) >= sizeof(e->ready) || strlen(t) >= sizeof(e->transition))
			continue;
		memcpy(e->ready, st, strlen(st) + 1);
		memcpy(e->transition, t, strlen(t) + 1);
		return;
	}
}

/* Index of name, or where it goes (*found 0). Lock held. */
static size_t find(const struct policies *s, const char *name, int *found)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->v[mid].name, name);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return lo;
}

static void remove_at(struct policies *s, size_t i)
{
	entry_clear(&s->v[i]);
	memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(s->v[0]));
	s->n--;
}

int policies_apply(struct policies *s, enum watch_event_type type, const cJSON *obj)
{
	const char *name = json_str(obj, "metadata", "name", NULL);
	const char *uid = json_str(obj, "metadata", "uid", NULL);
	char err[GPUPOLICY_ERR_MAX] = "";
	struct entry e = {0};
	size_t i;
	int found, rc;

	if (type != WATCH_ADDED && type != WATCH_MODIFIED && type != WATCH_DELETED)
		return 0;
	if (!cJSON_IsObject(obj) || name == NULL || name[0] == '\0')
		return POLICIES_EINVAL;
	if (type == WATCH_DELETED) {
		pthread_rwlock_wrlock(&s->lock);
		i = find(s, name, &found);
		if (found) {
			remove_at(s, i);
			publish(s);
		}
		pthread_rwlock_unlock(&s->lock);
		log_fields(LOG_INFO, "policy deleted",
		           (struct log_field[]){LOG_STR("policy", name), LOG_END});
		return 0;
	}
	/* Parsed outside the lock. */
	const cJSON *gen = json_at(obj, "metadata", "generation", NULL);
	double g = cJSON_IsNumber(gen) ? gen->valuedouble : 0;
	/* An integer in int64's range (2^63 is the first double out of it), else 0: never a
	 * cast out of range, nor a negative observedGeneration (gpupolicy_parse says why). */
	e.generation = g >= 0.0 && g < 9223372036854775808.0 && floor(g) == g ? (long long)g : 0;
	read_ready(obj, &e);
	struct gpupolicy *p = NULL;
	rc = gpupolicy_parse(obj, &p, err, sizeof(err));
	if (rc == GPUPOLICY_ENOMEM)
		return POLICIES_ENOMEM;
	if (p != NULL && (e.ref = malloc(sizeof(*e.ref))) == NULL) {
		gpupolicy_free(p);
		return POLICIES_ENOMEM;
	}
	if (e.ref != NULL) {
		atomic_init(&e.ref->refs, 1);
		e.ref->p = p;
	}
	if ((e.name = strdup(name)) == NULL || (e.uid = strdup(uid ? uid : "")) == NULL ||
	    (rc != 0 && (e.error = strdup(err)) == NULL)) {
		entry_clear(&e);
		return POLICIES_ENOMEM;
	}
	log_fields(rc == 0 ? LOG_INFO : LOG_WARN, rc == 0 ? "policy applied" : "policy unusable",
	           (struct log_field[]){LOG_STR("policy", name),
	                                LOG_INT("generation", e.generation),
	                                LOG_STR("error", rc == 0 ? NULL : err), LOG_END});
	pthread_rwlock_wrlock(&s->lock);
	i = find(s, name, &found);
	if (found) {
		entry_clear(&s->v[i]);
		s->v[i] = e;
		publish(s);
		pthread_rwlock_unlock(&s->lock);
		return 0;
	}
	if (s->n >= POLICIES_MAX) {
		pthread_rwlock_unlock(&s->lock);
		entry_clear(&e);
		return POLICIES_EFULL;
	}
	if (s->n == s->cap) {
		size_t ncap = s->cap ? 2 * s->cap : 8;
		struct entry *v = realloc(s->v, ncap * sizeof(*v));
		if (v == NULL) {
			pthread_rwlock_unlock(&s->lock);
			entry_clear(&e);
			return POLICIES_ENOMEM;
		}
		s->v = v;
		s->cap = ncap;
	}
	memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(s->v[0]));
	s->v[i] = e;
	s->n++;
	publish(s);
	pthread_rwlock_unlock(&s->lock);
	return 0;
}

void policies_resync_begin(struct policies *s)
{
	pthread_rwlock_wrlock(&s->lock);
	for (size_t i = 0; i < s->n; i++)
		s->v[i].mark = 1;
	pthread_rwlock_unlock(&s->lock);
}

void policies_resync_end(struct policies *s, int complete)
{
	pthread_rwlock_wrlock(&s->lock);
	for (size_t i = s->n; i-- > 0;)
		if (s->v[i].mark)
			remove_at(s, i);
	s->synced = complete != 0;
	s->crd_missing = 0;
	publish(s);
	pthread_rwlock_unlock(&s->lock);
}

void policies_crd_missing(struct policies *s)
{
	pthread_rwlock_wrlock(&s->lock);
	while (s->n > 0)
		remove_at(s, s->n - 1);
	s->synced = 1;
	s->crd_missing = 1;
	publish(s);
	pthread_rwlock_unlock(&s->lock);
}

int policies_synced(struct policies *s)
{
	int synced;

	pthread_rwlock_rdlock(&s->lock);
	synced = s->synced;
	pthread_rwlock_unlock(&s->lock);
	return synced;
}

/* What a policy's tiers select by: a bitwise or of POLICIES_NEED_*. */
static unsigned tiers_need(const struct gpupolicy *p)
{
	unsigned need = 0;

	for (size_t t = 0; p != NULL && t < p->n_tiers; t++) {
		if (p->tiers[t].has_pod_selector)
			need |= POLICIES_NEED_LABELS;
		if (p->tiers[t].n_priority_classes > 0)
			need |= POLICIES_NEED_PRIORITY;
	}
	return need;
}

unsigned policies_pod_attrs(struct policies *s)
{
	unsigned need = 0;

	pthread_rwlock_rdlock(&s->lock);
	for (size_t i = 0; i < s->n; i++)
		need |= tiers_need(s->v[i].ref ? s->v[i].ref->p : NULL);
	pthread_rwlock_unlock(&s->lock);
	return need;
}

unsigned policies_pod_attrs_of(const cJSON *obj)
{
	char err[GPUPOLICY_ERR_MAX];
	struct gpupolicy *p = NULL;
	const cJSON *tier;
	unsigned need = 0;

	/* Parsed as policies_apply() will: an object that does not parse applies nowhere and
	 * needs nothing (wanting for it would end the pods' watch and relist every pod for a
	 * policy that can use none of it, at each of its events). */
	int rc = gpupolicy_parse(obj, &p, err, sizeof(err));
	if (rc != GPUPOLICY_ENOMEM) {
		need = rc == 0 ? tiers_need(p) : 0;
		gpupolicy_free(p);
		return need;
	}
	/* Out of memory: what the JSON asks, valid or not (a superset). */
	cJSON_ArrayForEach(tier, json_at(obj, "spec", "tiers", NULL))
	{
		const cJSON *sel = cJSON_GetObjectItemCaseSensitive(tier, "podSelector");
		const cJSON *pcs = cJSON_GetObjectItemCaseSensitive(tier, "priorityClassNames");
		if (sel != NULL && !cJSON_IsNull(sel))
			need |= POLICIES_NEED_LABELS;
		if (cJSON_GetArraySize(pcs) > 0)
			need |= POLICIES_NEED_PRIORITY;
	}
	return need;
}

const struct policies_gen *policies_acquire(struct policies *s)
{
	struct policies_gen *g;

	pthread_mutex_lock(&s->pub);
	g = s->cur;
	if (g != &unpublished)
		atomic_fetch_add(&g->refs, 1);
	pthread_mutex_unlock(&s->pub);
	return g;
}

void policies_release(const struct policies_gen *g)
{
	gen_put((struct policies_gen *)g);
}

int policies_gen_synced(const struct policies_gen *g)
{
	return g != NULL && g->synced;
}

size_t policies_gen_selecting(const struct policies_gen *g,
                              const struct gpupolicy_labels *node_labels,
                              const struct gpupolicy **out, size_t room)
{
	return g != NULL ? gpupolicy_select(g->p, g->n, node_labels, out, room) : 0;
}

size_t policies_gen_selecting_all(const struct policies_gen *g,
                                  const struct gpupolicy_labels *node_labels,
                                  const struct gpupolicy **out, size_t room)
{
	return g != NULL ? gpupolicy_select_all(g->p, g->n, node_labels, out, room) : 0;
}

void policies_stats(struct policies *s, struct policies_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_rwlock_rdlock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].ref != NULL)
			out->usable++;
		else
			out->invalid++;
	}
	out->synced = s->synced;
	out->crd_missing = s->crd_missing;
	pthread_rwlock_unlock(&s->lock);
}

void policies_each(struct policies *s, policies_each_fn fn, void *ctx)
{
	pthread_rwlock_rdlock(&s->lock);
	for (size_t i = 0; i < s->n; i++) {
		const struct entry *e = &s->v[i];
		struct policies_object o = {
		    .name = e->name,
		    .uid = e->uid,
		    .generation = e->generation,
		    .p = e->ref ? e->ref->p : NULL,
		    .error = e->error ? e->error : "",
		    .ready = e->ready,
		    .transition = e->transition,
		};
		fn(ctx, &o);
	}
	pthread_rwlock_unlock(&s->lock);
}

void policies_collect(void *ctx, struct metrics_writer *w)
{
	struct policies_stats st;

	policies_stats(ctx, &st);
	metrics_printf(w,
	               "# HELP gpu_memory_guard_policies GPUMemoryPolicy objects held, by state "
	               "(invalid: refused by the webhook's own validation, applied nowhere).\n"
	               "# TYPE gpu_memory_guard_policies gauge\n"
	               "gpu_memory_guard_policies{state=\"usable\"} %zu\n"
	               "gpu_memory_guard_policies{state=\"invalid\"} %zu\n",
	               st.usable, st.invalid);
}
