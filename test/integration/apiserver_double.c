/*
 * apiserver_double: a TEST DOUBLE of the Kubernetes API server (see apiserver_double.h).
 *
 * One thread per connection, so an injected delay in one answer never holds the others, and a
 * watch stream may block its own thread on the condition variable until there is something to
 * send. The state sits behind one mutex: objects are kept serialized (their JSON text, plus the
 * few fields selectors read), in a hash by namespace/name for O(1) puts and gets, and in an
 * array by insertion sequence, which is the list order and what a continue token points into
 * (a page costs its own items, not the items before it). Every mutation bumps the global
 * resourceVersion and appends its event to a bounded per-resource history that watches read.
 */
#define _GNU_SOURCE /* asprintf */
#include "apiserver_double.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BODY_MAX     (4u * 1024u * 1024u)  /* bytes accepted in a POST to the double */
#define FILE_MAX     (16u * 1024u * 1024u) /* bytes of one state file */
#define MAX_TERMS    8                     /* fieldSelector terms */
#define MAX_SEGMENTS 8                     /* path segments */
#define CONTINUE_PFX "dbl:"
#define MODERN_TLS   "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define OLD_TLS_TOO  "NORMAL:+VERS-TLS1.1:+VERS-TLS1.0"
#define HISTORY_MAX  10000u /* events kept per resource for watches */
#define WATCH_BLOCK  16384u /* bytes MHD asks of a watch stream per read */
#define WATCH_T_DEF  1800L  /* seconds, a watch without timeoutSeconds */
#define WATCH_T_MAX  86400L /* seconds, cap on timeoutSeconds */
#define BOOKMARK_DEF 1000u  /* ms between bookmarks */
#define NAME_MAX_DBL 253    /* bytes of a namespace or name */

/* Leases have a store and a history too (the code is shared), but no list or watch route. */
enum res { RES_PODS = 0, RES_NODES, RES_LEASES, RES_POLICIES, RES_SLICES, RES_CLAIMS, RES_N };

static const char *const RES_KIND[RES_N] = {
    "Pod", "Node", "Lease", "GPUMemoryPolicy", "ResourceSlice", "ResourceClaim"};
static const char *const RES_LIST_KIND[RES_N] = {"PodList",           "NodeList",
                                                 "LeaseList",         "GPUMemoryPolicyList",
                                                 "ResourceSliceList", "ResourceClaimList"};
/* Cluster-scoped kinds: no namespace. */
#define CLUSTER_SCOPED(r) ((r) == RES_NODES || (r) == RES_POLICIES || (r) == RES_SLICES)

/* One stored object. ns is "" for nodes. */
struct obj {
	char *json; /* the object, serialized, metadata.resourceVersion set */
	char *ns, *name, *node, *phase;
	unsigned long seq; /* insertion order: list order, continue position */
	struct obj *hnext;
	int dead; /* deleted: out of the hash, still in order[] until compaction */
};

struct store {
	struct obj **order; /* by seq, ascending, dead entries included */
	size_t n, cap, dead;
	struct obj **bucket;
	size_t nbucket, live;
	unsigned long next_seq;
};

struct event {
	unsigned long rv;
	char *line; /* {"type":...,"object":...}\n */
	size_t len;
};

/* Ring of the last HISTORY_MAX events of one resource, oldest first. */
struct history {
	struct event *ev;
	size_t head, n;
	unsigned long oldest_rv; /* every event with rv > oldest_rv is in the ring */
};

struct apiserver_double {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* broadcast on every count, mutation, stop, cut */
	struct MHD_Daemon *mhd;
	char *cert, *key, *token;
	unsigned short port;
	unsigned max_page;
	int allow_old_tls;
	char *client_ca; /* PEM, or NULL */
	struct store store[RES_N];
	struct history hist[RES_N];
	unsigned long rv;
	unsigned long compacted_rv; /* continue tokens older than this answer 410 */
	unsigned long watch_epoch;  /* bumped by cut: streams of an older epoch end */
	unsigned long open_watches;
	unsigned bookmark_ms;
	int watch_gone;
	int no_policy_crd; /* 1: the GPUMemoryPolicy collection answers 404 (CRD not installed) */
	int dra_forbidden; /* 1: resource.k8s.io answers 403, as to a caller without RBAC for it */
	int dra_served;    /* 1: resource.k8s.io/v1 resourceslices and resourceclaims are served */
	int fail_code;
	unsigned delay_ms;
	int expire_continue;
	unsigned lease_delay_ms;    /* each lease write waits this long before it is applied */
	unsigned long lease_fail_n; /* the next lease_fail_n lease writes answer lease_fail_code */
	int lease_fail_code;
	unsigned long lease_gone_n; /* the next lease_gone_n PUTs of a stored lease delete it and
	                               answer 404 (apiserver_double_delete_lease_before_put) */
	unsigned long uid_seq;      /* metadata.uid of created leases */
	int stopping;
	unsigned long counts[APISERVER_DOUBLE_N_COUNTERS];
	char last_sel[512];
	char last_limit[32];
};

struct upload {
	char *buf;
	size_t len;
	size_t cap;
	int too_big;
};

struct watch_stream;

struct answer {
	unsigned code;
	char *body;              /* malloc'd JSON */
	struct watch_stream *ws; /* instead of body: a watch to stream */
};

/* A growing string; oom sticks. */
struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *np;
		while (cap < b->len + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

/* The text, or NULL (freed) when memory ran out. Caller frees. */
static char *sb_take(struct sbuf *b)
{
	if (b->oom || !b->p) {
		free(b->p);
		return NULL;
	}
	return b->p;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
	if (b)
		x = cJSON_GetObjectItemCaseSensitive(x, b);
	return cJSON_IsString(x) ? x->valuestring : "";
}

/* A kube Status object, as the API server writes it for errors and some successes. */
static cJSON *status_object(unsigned code, const char *reason, const char *message)
{
	cJSON *s = cJSON_CreateObject();
	cJSON_AddStringToObject(s, "kind", "Status");
	cJSON_AddStringToObject(s, "apiVersion", "v1");
	cJSON_AddObjectToObject(s, "metadata");
	cJSON_AddStringToObject(s, "status", code < 300 ? "Success" : "Failure");
	cJSON_AddStringToObject(s, "message", message);
	cJSON_AddStringToObject(s, "reason", reason);
	cJSON_AddNumberToObject(s, "code", code);
	return s;
}

static struct answer status_answer(unsigned code, const char *reason, const char *message)
{
	struct answer a = {code, NULL, NULL};
	cJSON *s = status_object(code, reason, message);
	a.body = cJSON_PrintUnformatted(s);
	cJSON_Delete(s);
	return a;
}

static struct answer text_answer(unsigned code, const char *json)
{
	struct answer a = {code, strdup(json), NULL};
	return a;
}

static void count(struct apiserver_double *d, enum apiserver_double_counter c)
{
	pthread_mutex_lock(&d->mu);
	d->counts[c]++;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

static void deadline_after(struct timespec *ts, unsigned long ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static int ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The injected delay (of every answer, or of lease writes): a condition wait, so stop() wakes
 * sleepers at once. */
static void injected_delay(struct apiserver_double *d, int lease_write)
{
	struct timespec until;
	pthread_mutex_lock(&d->mu);
	if (lease_write ? d->lease_delay_ms : d->delay_ms) {
		deadline_after(&until, lease_write ? d->lease_delay_ms : d->delay_ms);
		while (!d->stopping && pthread_cond_timedwait(&d->cv, &d->mu, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&d->mu);
}

/* ---- store: hash by namespace/name, array by insertion sequence ---- */

static size_t key_hash(const char *ns, const char *name)
{
	size_t h = 1469598103934665603ull;
	for (const unsigned char *p = (const unsigned char *)ns; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	h = (h ^ '/') * 1099511628211ull;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h;
}

static struct obj *store_find(const struct store *s, const char *ns, const char *name)
{
	struct obj *o;
	if (!s->nbucket)
		return NULL;
	for (o = s->bucket[key_hash(ns, name) % s->nbucket]; o; o = o->hnext)
		if (!strcmp(o->name, name) && !strcmp(o->ns, ns))
			return o;
	return NULL;
}

static void obj_free(struct obj *o)
{
	if (!o)
		return;
	free(o->json);
	free(o->ns);
	free(o->name);
	free(o->node);
	free(o->phase);
	free(o);
}

static int store_rehash(struct store *s, size_t nbucket)
{
	struct obj **b = calloc(nbucket, sizeof *b);
	if (!b)
		return -1;
	for (size_t i = 0; i < s->n; i++) {
		struct obj *o = s->order[i];
		size_t h;
		if (o->dead)
			continue;
		h = key_hash(o->ns, o->name) % nbucket;
		o->hnext = b[h];
		b[h] = o;
	}
	free(s->bucket);
	s->bucket = b;
	s->nbucket = nbucket;
	return 0;
}

/* Add a new object (owned by the store from here). -1 when out of memory (o not taken). */
static int store_add(struct store *s, struct obj *o)
{
	size_t h;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct obj **no = realloc(s->order, cap * sizeof *no);
		if (!no)
			return -1;
		s->order = no;
		s->cap = cap;
	}
	if (s->live + 1 > s->nbucket && store_rehash(s, s->nbucket ? s->nbucket * 2 : 256))
		return -1;
	o->seq = ++s->next_seq;
	s->order[s->n++] = o;
	h = key_hash(o->ns, o->name) % s->nbucket;
	o->hnext = s->bucket[h];
	s->bucket[h] = o;
	s->live++;
	return 0;
}

/* Unhash o and mark it dead; the order array drops dead entries once they are half of it. */
static void store_remove(struct store *s, struct obj *o)
{
	struct obj **pp = &s->bucket[key_hash(o->ns, o->name) % s->nbucket];
	while (*pp != o)
		pp = &(*pp)->hnext;
	*pp = o->hnext;
	o->dead = 1;
	s->live--;
	s->dead++;
	if (s->dead > 1024 && s->dead * 2 > s->n) {
		size_t j = 0;
		for (size_t i = 0; i < s->n; i++) {
			if (s->order[i]->dead)
				obj_free(s->order[i]);
			else
				s->order[j++] = s->order[i];
		}
		s->n = j;
		s->dead = 0;
	}
}

static void store_free(struct store *s)
{
	for (size_t i = 0; i < s->n; i++)
		obj_free(s->order[i]);
	free(s->order);
	free(s->bucket);
	memset(s, 0, sizeof *s);
}

/* Index of the first entry with seq > after (binary search: seqs ascend). */
static size_t store_after(const struct store *s, unsigned long after)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->order[mid]->seq <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- history: the events watches read ---- */

static void history_free(struct history *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->ev[(h->head + i) % HISTORY_MAX].line);
	free(h->ev);
	h->ev = NULL;
	h->head = h->n = 0;
}

/* Append an event (type, object text) of rv; the oldest falls out when full. Caller holds mu. */
static int history_add(struct apiserver_double *d, enum res r, const char *type, const char *json,
                       unsigned long rv)
{
	struct history *h = &d->hist[r];
	struct sbuf b = {0};
	struct event *e;
	if (!h->ev && !(h->ev = calloc(HISTORY_MAX, sizeof *h->ev)))
		return -1;
	sb_str(&b, "{\"type\":\"");
	sb_str(&b, type);
	sb_str(&b, "\",\"object\":");
	sb_str(&b, json);
	sb_str(&b, "}\n");
	if (!sb_take(&b))
		return -1;
	if (h->n == HISTORY_MAX) {
		e = &h->ev[h->head];
		h->oldest_rv = e->rv;
		free(e->line);
		h->head = (h->head + 1) % HISTORY_MAX;
		h->n--;
	}
	e = &h->ev[(h->head + h->n) % HISTORY_MAX];
	e->rv = rv;
	e->line = b.p;
	e->len = b.len;
	h->n++;
	pthread_cond_broadcast(&d->cv);
	return 0;
}

/* The first event with rv > after, or NULL. */
static const struct event *history_after(const struct history *h, unsigned long after)
{
	size_t lo = 0, hi = h->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (h->ev[(h->head + mid) % HISTORY_MAX].rv <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < h->n ? &h->ev[(h->head + lo) % HISTORY_MAX] : NULL;
}

/* ---- mutations: each bumps rv, stamps the object and records its event ---- */

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

/* Stamp tree with the next resourceVersion and serialize it. Caller holds mu. */
static char *stamp(struct apiserver_double *d, cJSON *tree)
{
	char rv[32];
	cJSON *md = cJSON_GetObjectItemCaseSensitive(tree, "metadata");
	d->rv++;
	snprintf(rv, sizeof rv, "%lu", d->rv);
	cJSON_DeleteItemFromObjectCaseSensitive(md, "resourceVersion");
	cJSON_AddStringToObject(md, "resourceVersion", rv);
	return cJSON_PrintUnformatted(tree);
}

/*
 * Add or replace an object (tree owned: freed here). Pods and leases get metadata.namespace
 * from ns when given; pods get "default" when it is absent. 0, or -1 (no name, bad sizes, out
 * of memory).
 */
static int put_locked(struct apiserver_double *d, enum res r, const char *ns, cJSON *tree)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(tree, "metadata");
	struct obj *o = NULL, *old;
	char *json = NULL;
	int rc = -1;
	if (!cJSON_IsObject(md) || !*str_at(tree, "metadata", "name") ||
	    strlen(str_at(tree, "metadata", "name")) > NAME_MAX_DBL)
		goto out;
	if (!CLUSTER_SCOPED(r) && ns) {
		cJSON_DeleteItemFromObjectCaseSensitive(md, "namespace");
		cJSON_AddStringToObject(md, "namespace", ns);
	}
	if (r == RES_PODS && !*str_at(tree, "metadata", "namespace"))
		cJSON_AddStringToObject(md, "namespace", "default");
	if (strlen(str_at(tree, "metadata", "namespace")) > NAME_MAX_DBL)
		goto out;
	o = calloc(1, sizeof *o);
	if (!o)
		goto out;
	o->ns = dup_or_empty(!CLUSTER_SCOPED(r) ? str_at(tree, "metadata", "namespace") : "");
	o->name = dup_or_empty(str_at(tree, "metadata", "name"));
	o->node = dup_or_empty(str_at(tree, "spec", "nodeName"));
	o->phase = dup_or_empty(str_at(tree, "status", "phase"));
	if (!o->ns || !o->name || !o->node || !o->phase || !(json = stamp(d, tree)))
		goto out;
	old = store_find(&d->store[r], o->ns, o->name);
	if (old) {
		/* In place: the object keeps its list position, as with etcd's key order. */
		free(old->json);
		free(old->node);
		free(old->phase);
		old->json = json;
		old->node = o->node;
		old->phase = o->phase;
		o->node = o->phase = NULL;
		json = NULL;
		rc = history_add(d, r, "MODIFIED", old->json, d->rv);
		goto out;
	}
	o->json = json;
	json = NULL;
	if (store_add(&d->store[r], o))
		goto out;
	rc = history_add(d, r, "ADDED", o->json, d->rv);
	o = NULL;
out:
	obj_free(o); /* NULL once the store took it */
	free(json);
	cJSON_Delete(tree);
	return rc;
}

static int put_pod_locked(struct apiserver_double *d, const char *ns, cJSON *pod)
{
	return put_locked(d, RES_PODS, ns, pod);
}

static int put_node_locked(struct apiserver_double *d, cJSON *node)
{
	return put_locked(d, RES_NODES, NULL, node);
}

/* Delete o; the DELETED event carries its last state with the deletion's resourceVersion. */
static int delete_locked(struct apiserver_double *d, enum res r, struct obj *o)
{
	cJSON *tree = cJSON_Parse(o->json);
	char *json = tree ? stamp(d, tree) : NULL;
	int rc = json ? history_add(d, r, "DELETED", json, d->rv) : -1;
	cJSON_Delete(tree);
	free(json);
	store_remove(&d->store[r], o);
	return rc;
}

static struct obj *find_pod(struct apiserver_double *d, const char *ns, const char *name)
{
	return store_find(&d->store[RES_PODS], ns, name);
}

static struct obj *find_node(struct apiserver_double *d, const char *name)
{
	return store_find(&d->store[RES_NODES], "", name);
}

/* Set spec.nodeName / status.phase of a stored pod (a MODIFIED event). Caller holds mu. */
static int set_pod_field(struct apiserver_double *d, struct obj *o, const char *top,
                         const char *field, const char *value)
{
	cJSON *tree = cJSON_Parse(o->json), *sub;
	if (!tree)
		return -1;
	sub = cJSON_GetObjectItemCaseSensitive(tree, top);
	if (!cJSON_IsObject(sub)) {
		cJSON_DeleteItemFromObjectCaseSensitive(tree, top);
		sub = cJSON_AddObjectToObject(tree, top);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(sub, field);
	cJSON_AddStringToObject(sub, field, value);
	return put_locked(d, RES_PODS, NULL, tree);
}

static int bind_locked(struct apiserver_double *d, const char *ns, const char *name,
                       const char *node)
{
	struct obj *o = find_pod(d, ns, name);
	return o ? set_pod_field(d, o, "spec", "nodeName", node) : -1;
}

/* ---- lists ---- */

struct term {
	char field[64];
	char value[256];
	int negate;
};

/* Parse "a=b,c!=d" into terms; nodes know only metadata.name. 0, or -1 with the reason. */
static int parse_selector(const char *sel, enum res r, struct term *t, int *n, char *bad,
                          size_t badlen)
{
	char buf[1024];
	char *save = NULL, *tok;
	*n = 0;
	if (!sel || !*sel)
		return 0;
	if (strlen(sel) >= sizeof buf)
		goto bad;
	snprintf(buf, sizeof buf, "%s", sel);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *op = strstr(tok, "!=");
		size_t vlen;
		const char *val;
		if (*n >= MAX_TERMS)
			goto bad;
		t[*n].negate = op != NULL;
		if (!op)
			op = strchr(tok, '=');
		if (!op || op == tok)
			goto bad;
		val = op + 1;
		if (t[*n].negate || val[0] == '=')
			val++;
		*op = '\0';
		vlen = strlen(val);
		if (strlen(tok) >= sizeof t[*n].field || vlen >= sizeof t[*n].value)
			goto bad;
		if (strcmp(tok, "metadata.name") &&
		    (r != RES_PODS ||
		     (strcmp(tok, "spec.nodeName") && strcmp(tok, "status.phase") &&
		      strcmp(tok, "metadata.namespace")))) {
			snprintf(bad, badlen, "field label not supported: %s", tok);
			return -1;
		}
		snprintf(t[*n].field, sizeof t[*n].field, "%s", tok);
		memcpy(t[*n].value, val, vlen + 1);
		(*n)++;
	}
	return 0;
bad:
	snprintf(bad, badlen, "invalid selector: '%.200s'", sel);
	return -1;
}

static const char *obj_field(const struct obj *o, const char *field)
{
	if (!strcmp(field, "metadata.name"))
		return o->name;
	if (!strcmp(field, "metadata.namespace"))
		return o->ns;
	if (!strcmp(field, "spec.nodeName"))
		return o->node;
	return o->phase;
}

static int obj_matches(const struct obj *o, const char *ns, const struct term *t, int n)
{
	if (ns && strcmp(o->ns, ns))
		return 0;
	for (int i = 0; i < n; i++)
		if ((strcmp(obj_field(o, t[i].field), t[i].value) == 0) == t[i].negate)
			return 0;
	return 1;
}

/* Continue token "dbl:SEQ:RV" (after seq; the list's resourceVersion); "dbl:SEQ" also read. */
static int parse_continue(const char *cont, unsigned long *seq, unsigned long *rv)
{
	const char *p = cont + strlen(CONTINUE_PFX);
	char *end;
	if (strncmp(cont, CONTINUE_PFX, strlen(CONTINUE_PFX)) || *p < '0' || *p > '9')
		return -1;
	*seq = strtoul(p, &end, 10);
	if (*end == ':' && end[1] >= '0' && end[1] <= '9')
		*rv = strtoul(end + 1, &end, 10);
	return *end ? -1 : 0;
}

/*
 * GET a list with fieldSelector, limit and continue. Pages are served from live state, in
 * insertion order; every page of one list reports the first page's resourceVersion (carried in
 * the token), as kube-apiserver does, and a token older than the last compaction is 410 Expired.
 * Caller holds mu.
 */
static struct answer list_objects(struct apiserver_double *d, struct MHD_Connection *c, enum res r,
                                  const char *ns)
{
	const char *sel = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fieldSelector");
	const char *lim = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
	const char *cont = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "continue");
	const struct store *s = &d->store[r];
	struct term t[MAX_TERMS];
	int n_terms, more = 0;
	char bad[300], tok[96], num[32];
	long limit = 0, emitted = 0;
	unsigned long after = 0, list_rv = d->rv, last = 0;
	struct sbuf b = {0};
	struct answer a = {200, NULL, NULL};

	snprintf(d->last_sel, sizeof d->last_sel, "%s", sel ? sel : "");
	snprintf(d->last_limit, sizeof d->last_limit, "%s", lim ? lim : "");
	if (parse_selector(sel, r, t, &n_terms, bad, sizeof bad))
		return status_answer(400, "BadRequest", bad);
	if (lim && *lim && (sscanf(lim, "%ld", &limit) != 1 || limit < 0))
		return status_answer(400, "BadRequest", "invalid limit");
	if (d->max_page && (limit == 0 || limit > (long)d->max_page))
		limit = d->max_page;
	if (cont && *cont) {
		if (d->expire_continue) {
			if (d->expire_continue > 0)
				d->expire_continue--;
			return status_answer(
			    410, "Expired",
			    "The provided continue parameter is too old to display "
			    "a consistent list result.");
		}
		if (parse_continue(cont, &after, &list_rv))
			return status_answer(400, "BadRequest", "invalid continue token");
		if (list_rv < d->compacted_rv)
			return status_answer(410, "Expired",
			                     "The provided continue parameter is too old to "
			                     "display a consistent list result.");
	}
	sb_str(&b, "{\"kind\":\"");
	sb_str(&b, RES_LIST_KIND[r]);
	sb_str(&b, "\",\"apiVersion\":\"v1\",\"items\":[");
	for (size_t i = store_after(s, after); i < s->n; i++) {
		const struct obj *o = s->order[i];
		if (o->dead || !obj_matches(o, ns, t, n_terms))
			continue;
		if (limit && emitted == limit) {
			more = 1;
			break;
		}
		if (emitted++)
			sb_str(&b, ",");
		sb_str(&b, o->json);
		last = o->seq;
	}
	snprintf(num, sizeof num, "%lu", list_rv);
	sb_str(&b, "],\"metadata\":{\"resourceVersion\":\"");
	sb_str(&b, num);
	sb_str(&b, "\"");
	if (more) {
		snprintf(tok, sizeof tok, ",\"continue\":\"" CONTINUE_PFX "%lu:%lu\"", last,
		         list_rv);
		sb_str(&b, tok);
	}
	sb_str(&b, "}}");
	a.body = sb_take(&b);
	return a;
}

static struct answer post_pod(struct apiserver_double *d, const char *ns, const char *body)
{
	cJSON *pod = body ? cJSON_Parse(body) : NULL;
	char name[256];
	if (!cJSON_IsObject(pod)) {
		cJSON_Delete(pod);
		return status_answer(400, "BadRequest", "body is not a Pod");
	}
	snprintf(name, sizeof name, "%s", str_at(pod, "metadata", "name"));
	if (!*name) {
		cJSON_Delete(pod);
		return status_answer(422, "Invalid", "metadata.name: Required value");
	}
	if (find_pod(d, ns, name)) {
		cJSON_Delete(pod);
		return status_answer(409, "AlreadyExists", "pods already exists");
	}
	if (put_pod_locked(d, ns, pod) || !find_pod(d, ns, name))
		return status_answer(422, "Invalid", "pod rejected");
	return text_answer(201, find_pod(d, ns, name)->json);
}

static struct answer post_binding(struct apiserver_double *d, const char *ns, const char *name,
                                  const char *body)
{
	cJSON *b = body ? cJSON_Parse(body) : NULL;
	struct obj *o;
	char node[256];
	snprintf(node, sizeof node, "%s", str_at(b, "target", "name"));
	cJSON_Delete(b);
	if (!*node)
		return status_answer(400, "BadRequest", "binding without target.name");
	o = find_pod(d, ns, name);
	if (!o)
		return status_answer(404, "NotFound", "pods not found");
	if (*o->node)
		return status_answer(409, "Conflict", "pod is already assigned to a node");
	if (bind_locked(d, ns, name, node))
		return status_answer(500, "InternalError", "binding failed (out of memory)");
	return status_answer(201, "", "");
}

/* ---- leases (coordination.k8s.io/v1): kube-apiserver v1.33's semantics ----
 *
 * Copied from k8s.io/apiserver v0.33.13 (endpoints/handlers create.go, update.go, delete.go,
 * rest.go checkName; registry/generic/registry/store.go Create, Update, Delete; storage/etcd3
 * store.go Create, GuaranteedUpdate) and k8s.io/kubernetes v1.33.13
 * pkg/registry/coordination/lease/strategy.go (AllowCreateOnUpdate true, AllowUnconditionalUpdate
 * false) with pkg/apis/coordination/validation. Every write runs with d->mu held, from the
 * resourceVersion comparison to the store: one atomic step, as etcd's transaction makes it.
 */

#define LEASE_GROUP     "coordination.k8s.io"
#define LEASE_API       LEASE_GROUP "/v1"
#define LEASE_RESOURCE  "leases." LEASE_GROUP /* qualifiedResource.String() */
#define LEASE_GROUPKIND "Lease." LEASE_GROUP  /* kind.GroupKind().String() */
#define ANNOTATIONS_MAX 262144L /* bytes of keys + values: TotalAnnotationSizeLimitB */
#define VERR_MAX        8       /* validation errors reported per request */
#define OPTIMISTIC_LOCK_MSG                                                                        \
	"the object has been modified; please apply your changes to the latest version and try "   \
	"again"
#define DNS1123_MSG                                                                                \
	"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "  \
	"or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "      \
	"regex used for validation is "                                                            \
	"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"

static void count_locked(struct apiserver_double *d, enum apiserver_double_counter c)
{
	d->counts[c]++;
	pthread_cond_broadcast(&d->cv);
}

/*
 * A Status answer as the API server writes it for a lease: reason omitted when "" (omitempty);
 * when name is not NULL, details {name, group, kind, uid}, kind being what the error names
 * ("leases", the resource, for NotFound / AlreadyExists / Conflict; "Lease" for Invalid).
 */
static struct answer lease_status(unsigned code, const char *reason, const char *name,
                                  const char *kind, const char *uid, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static struct answer lease_status(unsigned code, const char *reason, const char *name,
                                  const char *kind, const char *uid, const char *fmt, ...)
{
	char msg[1536];
	va_list ap;
	cJSON *s, *det;
	struct answer a = {code, NULL, NULL};
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	s = status_object(code, reason, msg);
	if (!*reason)
		cJSON_DeleteItemFromObjectCaseSensitive(s, "reason");
	if (name) {
		det = cJSON_AddObjectToObject(s, "details");
		cJSON_AddStringToObject(det, "name", name);
		cJSON_AddStringToObject(det, "group", LEASE_GROUP);
		cJSON_AddStringToObject(det, "kind", kind);
		if (uid && *uid)
			cJSON_AddStringToObject(det, "uid", uid);
	}
	a.body = cJSON_PrintUnformatted(s);
	cJSON_Delete(s);
	return a;
}

static struct answer lease_conflict(const char *name, const char *why)
{
	return lease_status(409, "Conflict", name, "leases", NULL,
	                    "Operation cannot be fulfilled on " LEASE_RESOURCE " \"%s\": %s", name,
	                    why);
}

/* The 409 of a failed uid or resourceVersion precondition: a storage InvalidObj error, which
 * the registry turns into a Conflict carrying the storage error's text. */
static struct answer precondition_conflict(const char *ns, const char *name, const char *what,
                                           const char *want, const char *have)
{
	char why[1024];
	snprintf(why, sizeof why,
	         "StorageError: invalid object, Code: 4, Key: /registry/leases/%s/%s, "
	         "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: %s in precondition: "
	         "%s, %s in object meta: %s",
	         ns, name, what, want, what, have);
	return lease_conflict(name, why);
}

static struct answer lease_not_found(const char *name)
{
	return lease_status(404, "NotFound", name, "leases", NULL,
	                    LEASE_RESOURCE " \"%s\" not found", name);
}

/* Go's encoding/json name of a JSON value's type, for its "cannot unmarshal" errors. */
static const char *json_type(const cJSON *x)
{
	if (cJSON_IsString(x))
		return "string";
	if (cJSON_IsNumber(x))
		return "number";
	if (cJSON_IsBool(x))
		return "bool";
	if (cJSON_IsArray(x))
		return "array";
	return "object";
}

enum jt { JT_STRING, JT_INT32, JT_OBJECT, JT_STRMAP };

/* The Lease fields whose JSON type the decoder checks (a mismatch is a 400); others pass. */
static const struct lease_field {
	const char *section; /* NULL: top level */
	const char *name;
	enum jt type;
	const char *go_struct, *go_type; /* for the error text */
} LEASE_FIELDS[] = {
    {NULL, "metadata", JT_OBJECT, "Lease", "v1.ObjectMeta"},
    {NULL, "spec", JT_OBJECT, "Lease", "v1.LeaseSpec"},
    {"metadata", "name", JT_STRING, "ObjectMeta", "string"},
    {"metadata", "generateName", JT_STRING, "ObjectMeta", "string"},
    {"metadata", "namespace", JT_STRING, "ObjectMeta", "string"},
    {"metadata", "uid", JT_STRING, "ObjectMeta", "types.UID"},
    {"metadata", "resourceVersion", JT_STRING, "ObjectMeta", "string"},
    {"metadata", "creationTimestamp", JT_STRING, "ObjectMeta", "v1.Time"},
    {"metadata", "labels", JT_STRMAP, "ObjectMeta", "string"},
    {"metadata", "annotations", JT_STRMAP, "ObjectMeta", "string"},
    {"spec", "holderIdentity", JT_STRING, "LeaseSpec", "string"},
    {"spec", "leaseDurationSeconds", JT_INT32, "LeaseSpec", "int32"},
    {"spec", "acquireTime", JT_STRING, "LeaseSpec", "v1.MicroTime"},
    {"spec", "renewTime", JT_STRING, "LeaseSpec", "v1.MicroTime"},
    {"spec", "leaseTransitions", JT_INT32, "LeaseSpec", "int32"},
    {"spec", "strategy", JT_STRING, "LeaseSpec", "v1.CoordinatedLeaseStrategy"},
    {"spec", "preferredHolder", JT_STRING, "LeaseSpec", "string"},
};

/* "" when x (not null) has the field's type; else Go's error text in out. */
static const char *field_type_error(const struct lease_field *f, const cJSON *x, char *out,
                                    size_t len)
{
	const cJSON *v;
	int ok = 1;
	char where[160];
	snprintf(where, sizeof where, "Go struct field %s.%s%s%s of type %s", f->go_struct,
	         f->section ? f->section : "", f->section ? "." : "", f->name, f->go_type);
	switch (f->type) {
	case JT_STRING:
		ok = cJSON_IsString(x);
		break;
	case JT_OBJECT:
		ok = cJSON_IsObject(x);
		break;
	case JT_INT32:
		if (cJSON_IsNumber(x) &&
		    (x->valuedouble != (double)(long long)x->valuedouble ||
		     x->valuedouble > 2147483647.0 || x->valuedouble < -2147483648.0)) {
			snprintf(out, len, "json: cannot unmarshal number %g into %s",
			         x->valuedouble, where);
			return out;
		}
		ok = cJSON_IsNumber(x);
		break;
	case JT_STRMAP:
		if (!cJSON_IsObject(x))
			break; /* the map itself: reported below with its Go type */
		cJSON_ArrayForEach(v, x) if (!cJSON_IsNull(v) && !cJSON_IsString(v))
		{
			snprintf(out, len, "json: cannot unmarshal %s into %s", json_type(v),
			         where);
			return out;
		}
		return "";
	}
	if (f->type == JT_STRMAP)
		snprintf(where, sizeof where, "Go struct field %s.%s.%s of type map[string]string",
		         f->go_struct, f->section, f->name);
	if (ok)
		return "";
	snprintf(out, len, "json: cannot unmarshal %s into %s", json_type(x), where);
	return out;
}

/*
 * What the API server's decoder refuses in a Lease body, as 400 BadRequest: not a JSON object,
 * another kind or apiVersion, a known field of the wrong JSON type. Returns the tree (owned by
 * the caller) with kind and apiVersion set (the handler's default kind fills absent ones), or
 * NULL with *bad set.
 */
static cJSON *lease_decode(const char *body, struct answer *bad)
{
	cJSON *t = body ? cJSON_Parse(body) : NULL;
	const char *kind, *api, *ver;
	char why[512];
	if (!cJSON_IsObject(t) ||
	    (cJSON_GetObjectItemCaseSensitive(t, "kind") &&
	     !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(t, "kind"))) ||
	    (cJSON_GetObjectItemCaseSensitive(t, "apiVersion") &&
	     !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(t, "apiVersion")))) {
		*bad =
		    lease_status(400, "BadRequest", NULL, NULL, NULL,
		                 "the object provided is unrecognized (must be of type Lease): "
		                 "couldn't get version/kind; json parse error: %s (%.30s)",
		                 t ? "json: cannot unmarshal into Go struct field of type string "
		                     "(apiVersion, kind)"
		                   : "not JSON",
		                 body ? body : "");
		cJSON_Delete(t);
		return NULL;
	}
	kind = *str_at(t, "kind", NULL) ? str_at(t, "kind", NULL) : "Lease";
	api = *str_at(t, "apiVersion", NULL) ? str_at(t, "apiVersion", NULL) : LEASE_API;
	ver = strchr(api, '/') ? strchr(api, '/') + 1 : api;
	if (!strcmp(kind, "Lease") && strcmp(api, LEASE_API) &&
	    !strncmp(api, LEASE_GROUP "/", strlen(LEASE_GROUP) + 1)) {
		/* coordination.k8s.io/v1beta1 decodes (the scheme knows it) but is not this
		 * endpoint's version. */
		*bad =
		    lease_status(400, "BadRequest", NULL, NULL, NULL,
		                 "the API version in the data (%s) does not match the expected API "
		                 "version (" LEASE_API ")",
		                 api);
		goto fail;
	}
	if (strcmp(kind, "Lease") || strcmp(api, LEASE_API)) {
		*bad = lease_status(
		    400, "BadRequest", NULL, NULL, NULL,
		    "%s in version \"%s\" cannot be handled as a Lease: no kind \"%s\" "
		    "is registered for version \"%s\" in this endpoint",
		    kind, ver, kind, api);
		goto fail;
	}
	for (size_t i = 0; i < sizeof LEASE_FIELDS / sizeof LEASE_FIELDS[0]; i++) {
		const struct lease_field *f = &LEASE_FIELDS[i];
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(
		    f->section ? cJSON_GetObjectItemCaseSensitive(t, f->section) : t, f->name);
		if (!x || cJSON_IsNull(x) || !*field_type_error(f, x, why, sizeof why))
			continue;
		*bad =
		    lease_status(400, "BadRequest", NULL, NULL, NULL,
		                 "Lease in version \"v1\" cannot be handled as a Lease: %s", why);
		goto fail;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(t, "kind");
	cJSON_DeleteItemFromObjectCaseSensitive(t, "apiVersion");
	cJSON_AddStringToObject(t, "kind", "Lease");
	cJSON_AddStringToObject(t, "apiVersion", LEASE_API);
	/* The decoder makes both structs: an absent one is empty, a null one too. */
	for (int i = 0; i < 2; i++) {
		const char *sec = i ? "spec" : "metadata";
		if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(t, sec))) {
			cJSON_DeleteItemFromObjectCaseSensitive(t, sec);
			cJSON_AddObjectToObject(t, sec);
		}
	}
	return t;
fail:
	cJSON_Delete(t);
	return NULL;
}

struct verr {
	const char *type; /* Status cause type */
	char field[64];
	char body[768]; /* ErrorBody(): "Invalid value: ...: detail" */
};

static void verr_add(struct verr *e, int *n, const char *type, const char *field, const char *fmt,
                     ...) __attribute__((format(printf, 5, 6)));
static void verr_add(struct verr *e, int *n, const char *type, const char *field, const char *fmt,
                     ...)
{
	va_list ap;
	if (*n >= VERR_MAX)
		return;
	e[*n].type = type;
	snprintf(e[*n].field, sizeof e[*n].field, "%s", field);
	va_start(ap, fmt);
	vsnprintf(e[*n].body, sizeof e[*n].body, fmt, ap);
	va_end(ap);
	(*n)++;
}

/* IsDNS1123Subdomain: lower-case labels of [a-z0-9-], each starting and ending alphanumeric. */
static int dns1123_subdomain(const char *s)
{
	size_t label = 0;
	for (const char *p = s; *p; p++) {
		int alnum = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
		if (*p == '.') {
			if (!label || p[-1] == '-')
				return 0;
			label = 0;
		} else if (alnum || (*p == '-' && label)) {
			label++;
		} else {
			return 0;
		}
	}
	return label && s[strlen(s) - 1] != '-';
}

static int json_int(const cJSON *o, const char *key, long *v)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(x))
		return 0;
	*v = (long)x->valuedouble;
	return 1;
}

/* ValidateLease (create) / ValidateLeaseUpdate: the errors, at most VERR_MAX. The update's
 * immutable metadata (name, namespace, uid, creationTimestamp) is enforced by the caller. */
static int lease_validate(const cJSON *t, struct verr *e)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(t, "metadata");
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(t, "spec"), *a;
	const char *name = str_at(t, "metadata", "name");
	long size = 0, v;
	int n = 0;
	if (!*name)
		verr_add(e, &n, "FieldValueRequired", "metadata.name",
		         "Required value: name or generateName is required");
	if (strlen(name) > 253)
		verr_add(e, &n, "FieldValueInvalid", "metadata.name",
		         "Invalid value: \"%.300s\": must be no more than 253 characters", name);
	if (*name && !dns1123_subdomain(name))
		verr_add(e, &n, "FieldValueInvalid", "metadata.name",
		         "Invalid value: \"%.300s\": " DNS1123_MSG, name);
	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(md, "annotations"))
	{
		size += (long)strlen(a->string);
		if (cJSON_IsString(a))
			size += (long)strlen(a->valuestring);
	}
	if (size > ANNOTATIONS_MAX)
		verr_add(e, &n, "FieldValueTooLong", "metadata.annotations",
		         "Too long: may not be more than %ld bytes", ANNOTATIONS_MAX);
	if (json_int(spec, "leaseDurationSeconds", &v) && v <= 0)
		verr_add(e, &n, "FieldValueInvalid", "spec.leaseDurationSeconds",
		         "Invalid value: %ld: must be greater than 0", v);
	if (json_int(spec, "leaseTransitions", &v) && v < 0)
		verr_add(e, &n, "FieldValueInvalid", "spec.leaseTransitions",
		         "Invalid value: %ld: must be greater than or equal to 0", v);
	return n;
}

/* 422 Invalid: "<Lease.coordination.k8s.io> \"NAME\" is invalid: <one error, or [a, b]>" with a
 * cause per error. */
static struct answer invalid_answer(const char *groupkind, const char *kind, const char *name,
                                    const struct verr *e, int n)
{
	struct sbuf b = {0};
	cJSON *s, *det, *causes;
	struct answer a = {422, NULL, NULL};
	sb_str(&b, n > 1 ? "[" : "");
	for (int i = 0; i < n; i++) {
		sb_str(&b, i ? ", " : "");
		sb_str(&b, e[i].field);
		sb_str(&b, ": ");
		sb_str(&b, e[i].body);
	}
	sb_str(&b, n > 1 ? "]" : "");
	if (!sb_take(&b))
		return status_answer(500, "InternalError", "out of memory");
	a = lease_status(422, "Invalid", NULL, NULL, NULL, "%s \"%s\" is invalid: %s", groupkind,
	                 name, b.p);
	free(b.p);
	s = a.body ? cJSON_Parse(a.body) : NULL;
	if (!s)
		return a;
	det = cJSON_AddObjectToObject(s, "details");
	cJSON_AddStringToObject(det, "name", name);
	cJSON_AddStringToObject(det, "group", LEASE_GROUP);
	cJSON_AddStringToObject(det, "kind", kind);
	causes = cJSON_AddArrayToObject(det, "causes");
	for (int i = 0; i < n; i++) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "reason", e[i].type);
		cJSON_AddStringToObject(c, "message", e[i].body);
		cJSON_AddStringToObject(c, "field", e[i].field);
		cJSON_AddItemToArray(causes, c);
	}
	free(a.body);
	a.body = cJSON_PrintUnformatted(s);
	cJSON_Delete(s);
	return a;
}

static void set_str(cJSON *o, const char *key, const char *value)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	cJSON_AddStringToObject(o, key, value);
}

/* FillObjectMetaSystemFields: a fresh metadata.uid and metadata.creationTimestamp (now, UTC,
 * seconds). Caller holds mu. */
static void fill_system_fields(struct apiserver_double *d, cJSON *md)
{
	char uid[40], ts[32];
	time_t now = time(NULL);
	struct tm tm;
	unsigned long long x = ++d->uid_seq * 0x9e3779b97f4a7c15ull ^ (unsigned long long)d->port;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* A version-4 layout; unique per double, which is all that is asked of it here. */
	snprintf(uid, sizeof uid, "%08llx-%04llx-4%03llx-8%03llx-%012lx", x >> 32,
	         (x >> 16) & 0xffff, x & 0xfff, (unsigned long long)(d->uid_seq & 0xfff),
	         d->uid_seq);
	set_str(md, "uid", uid);
	set_str(md, "creationTimestamp", ts);
}

/* ObjectResourceVersion of a body: 0 for absent, "" or "0"; -1 (not a number) with why. */
static int body_rv(const cJSON *t, unsigned long *rv, char *why, size_t len)
{
	const char *s = str_at(t, "metadata", "resourceVersion");
	char *end;
	*rv = 0;
	if (!*s || !strcmp(s, "0"))
		return 0;
	errno = 0;
	*rv = strtoul(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno) {
		snprintf(why, len,
		         "resourceVersion: Invalid value: \"%.100s\": strconv.ParseUint: parsing "
		         "\"%.100s\": %s",
		         s, s, errno ? "value out of range" : "invalid syntax");
		return -1;
	}
	return 0;
}

/* Store a validated lease (tree owned) in ns and answer code with it as stored. */
static struct answer lease_store(struct apiserver_double *d, const char *ns, cJSON *t,
                                 unsigned code)
{
	char name[NAME_MAX_DBL + 1];
	struct obj *o;
	snprintf(name, sizeof name, "%s", str_at(t, "metadata", "name"));
	if (put_locked(d, RES_LEASES, ns, t) || !(o = store_find(&d->store[RES_LEASES], ns, name)))
		return status_answer(500, "InternalError", "out of memory");
	count_locked(d,
	             code == 201 ? APISERVER_DOUBLE_LEASE_CREATED : APISERVER_DOUBLE_LEASE_UPDATED);
	return text_answer(code, o->json);
}

/* The create path shared by POST and a PUT of an absent lease (create-on-update): system
 * fields, validation, store. t owned. */
static struct answer lease_create_locked(struct apiserver_double *d, const char *ns, cJSON *t)
{
	struct verr e[VERR_MAX];
	int n;
	fill_system_fields(d, cJSON_GetObjectItemCaseSensitive(t, "metadata"));
	n = lease_validate(t, e);
	if (n) {
		struct answer a =
		    invalid_answer(LEASE_GROUPKIND, "Lease", str_at(t, "metadata", "name"), e, n);
		cJSON_Delete(t);
		return a;
	}
	/* PrepareObjectForStorage: the resourceVersion is the store's to set. */
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "metadata"),
	                                        "resourceVersion");
	return lease_store(d, ns, t, 201);
}

/* EnsureObjectNamespaceMatchesRequestNamespace: absent -> the request's; other -> 400. */
static int lease_namespace(cJSON *t, const char *ns, struct answer *bad)
{
	const char *have = str_at(t, "metadata", "namespace");
	if (*have && strcmp(have, ns)) {
		*bad = lease_status(
		    400, "BadRequest", NULL, NULL, NULL,
		    "the namespace of the provided object does not match the namespace "
		    "sent on the request");
		return -1;
	}
	set_str(cJSON_GetObjectItemCaseSensitive(t, "metadata"), "namespace", ns);
	return 0;
}

/* POST .../namespaces/NS/leases. Caller holds mu. */
static struct answer lease_post(struct apiserver_double *d, const char *ns, const char *body)
{
	static const char gen_chars[] = "bcdfghjklmnpqrstvwxz2456789"; /* SimpleNameGenerator */
	struct answer a;
	cJSON *t = lease_decode(body, &a), *md;
	unsigned long rv;
	char why[400], name[NAME_MAX_DBL + 8];
	if (!t)
		return a;
	md = cJSON_GetObjectItemCaseSensitive(t, "metadata");
	if (lease_namespace(t, ns, &a))
		goto fail;
	/* WipeObjectMetaSystemFields: the server's fields are not the client's to set. */
	cJSON_DeleteItemFromObjectCaseSensitive(md, "creationTimestamp");
	cJSON_DeleteItemFromObjectCaseSensitive(md, "uid");
	cJSON_DeleteItemFromObjectCaseSensitive(md, "deletionTimestamp");
	cJSON_DeleteItemFromObjectCaseSensitive(md, "deletionGracePeriodSeconds");
	cJSON_DeleteItemFromObjectCaseSensitive(md, "selfLink");
	if (!*str_at(t, "metadata", "name") && *str_at(t, "metadata", "generateName")) {
		snprintf(name, sizeof name, "%.247s", str_at(t, "metadata", "generateName"));
		/* Five characters of 27, distinct for the next 27^5 creations (the real ones are
		 * random, retried when taken). */
		size_t l = strlen(name);
		unsigned long x = (d->uid_seq + 1) * 7919ul % 14348907ul;
		for (size_t i = 0; i < 5; i++, x /= 27)
			name[l + i] = gen_chars[x % 27];
		name[l + 5] = '\0';
		set_str(md, "name", name);
	}
	snprintf(name, sizeof name, "%s", str_at(t, "metadata", "name"));
	/* Validation (422) runs in BeforeCreate, before the store's checks below. */
	{
		struct verr e[VERR_MAX];
		int n = lease_validate(t, e);
		if (n) {
			a = invalid_answer(LEASE_GROUPKIND, "Lease", name, e, n);
			goto fail;
		}
	}
	/* etcd3 store.Create: a set resourceVersion is an error that is not a Status: 500,
	 * no reason. A non-numeric one fails to parse there and is dropped. */
	if (body_rv(t, &rv, why, sizeof why) == 0 && rv) {
		a = lease_status(500, "", NULL, NULL, NULL,
		                 "resourceVersion should not be set on objects to be created");
		goto fail;
	}
	if (store_find(&d->store[RES_LEASES], ns, name)) {
		count_locked(d, APISERVER_DOUBLE_LEASE_CONFLICT);
		a = lease_status(409, "AlreadyExists", name, "leases", NULL,
		                 LEASE_RESOURCE " \"%s\" already exists", name);
		goto fail;
	}
	return lease_create_locked(d, ns, t);
fail:
	cJSON_Delete(t);
	return a;
}

/* PUT .../namespaces/NS/leases/NAME. Caller holds mu. */
static struct answer lease_put(struct apiserver_double *d, const char *ns, const char *name,
                               const char *body)
{
	struct answer a;
	cJSON *t = lease_decode(body, &a), *md, *old_t = NULL;
	struct obj *old;
	unsigned long rv, old_rv;
	char why[400];
	const char *uid;
	struct verr e[VERR_MAX];
	int n;
	if (!t)
		return a;
	md = cJSON_GetObjectItemCaseSensitive(t, "metadata");
	if (lease_namespace(t, ns, &a))
		goto fail;
	if (strcmp(str_at(t, "metadata", "name"), name)) {
		a = lease_status(
		    400, "BadRequest", NULL, NULL, NULL,
		    "the name of the object (%.300s) does not match the name on the URL "
		    "(%.300s)",
		    str_at(t, "metadata", "name"), name);
		goto fail;
	}
	old = store_find(&d->store[RES_LEASES], ns, name);
	old_t = old ? cJSON_Parse(old->json) : NULL;
	if (old && !old_t) {
		a = status_answer(500, "InternalError", "out of memory");
		goto fail;
	}
	/* The only precondition an update carries is the body's uid, when it has one. */
	uid = str_at(t, "metadata", "uid");
	if (*uid && strcmp(uid, str_at(old_t, "metadata", "uid"))) {
		count_locked(d, APISERVER_DOUBLE_LEASE_CONFLICT);
		a = precondition_conflict(ns, name, "UID", uid, str_at(old_t, "metadata", "uid"));
		goto fail;
	}
	if (body_rv(t, &rv, why, sizeof why)) {
		a = lease_status(500, "", NULL, NULL, NULL, "%s", why);
		goto fail;
	}
	if (!old) { /* AllowCreateOnUpdate: the body's resourceVersion is not compared */
		cJSON_Delete(old_t);
		return lease_create_locked(d, ns, t);
	}
	/* AllowUnconditionalUpdate is false: an update must name the version it replaces. */
	if (!rv) {
		a = lease_status(422, "Invalid", name, "leases", NULL,
		                 LEASE_RESOURCE
		                 " \"%s\" is invalid: metadata.resourceVersion: Invalid "
		                 "value: 0x0: must be specified for an update",
		                 name);
		goto fail;
	}
	old_rv = strtoul(str_at(old_t, "metadata", "resourceVersion"), NULL, 10);
	if (rv != old_rv) {
		count_locked(d, APISERVER_DOUBLE_LEASE_CONFLICT);
		a = lease_conflict(name, OPTIMISTIC_LOCK_MSG);
		goto fail;
	}
	/* BeforeUpdate: uid (when absent) and creationTimestamp are the stored object's. */
	set_str(md, "uid", str_at(old_t, "metadata", "uid"));
	set_str(md, "creationTimestamp", str_at(old_t, "metadata", "creationTimestamp"));
	n = lease_validate(t, e);
	if (n) {
		a = invalid_answer(LEASE_GROUPKIND, "Lease", name, e, n);
		goto fail;
	}
	/* GuaranteedUpdate writes nothing when the new object equals the stored one: same
	 * resourceVersion, no event. */
	if (cJSON_Compare(t, old_t, 1)) {
		a = text_answer(200, old->json);
		goto fail;
	}
	cJSON_Delete(old_t);
	return lease_store(d, ns, t, 200);
fail:
	cJSON_Delete(old_t);
	cJSON_Delete(t);
	return a;
}

/* DELETE .../namespaces/NS/leases/NAME, with DeleteOptions preconditions when the body has
 * them. Caller holds mu. */
static struct answer lease_delete(struct apiserver_double *d, const char *ns, const char *name,
                                  const char *body)
{
	struct obj *o = store_find(&d->store[RES_LEASES], ns, name);
	cJSON *opts = body && *body ? cJSON_Parse(body) : NULL, *t = NULL;
	const char *want_uid =
	    str_at(cJSON_GetObjectItemCaseSensitive(opts, "preconditions"), "uid", NULL);
	const char *want_rv = str_at(cJSON_GetObjectItemCaseSensitive(opts, "preconditions"),
	                             "resourceVersion", NULL);
	struct answer a;
	char uid[64];
	if (body && *body && !cJSON_IsObject(opts)) {
		a = lease_status(
		    400, "BadRequest", NULL, NULL, NULL,
		    "the object provided is unrecognized (must be of type DeleteOptions): "
		    "couldn't get version/kind; json parse error (%.30s)",
		    body);
		goto out;
	}
	if (!o) {
		a = lease_not_found(name);
		goto out;
	}
	t = cJSON_Parse(o->json);
	if (*want_uid && strcmp(want_uid, str_at(t, "metadata", "uid"))) {
		count_locked(d, APISERVER_DOUBLE_LEASE_CONFLICT);
		a = precondition_conflict(ns, name, "UID", want_uid, str_at(t, "metadata", "uid"));
		goto out;
	}
	if (*want_rv && strcmp(want_rv, str_at(t, "metadata", "resourceVersion"))) {
		count_locked(d, APISERVER_DOUBLE_LEASE_CONFLICT);
		a = precondition_conflict(ns, name, "ResourceVersion", want_rv,
		                          str_at(t, "metadata", "resourceVersion"));
		goto out;
	}
	snprintf(uid, sizeof uid, "%s", str_at(t, "metadata", "uid"));
	delete_locked(d, RES_LEASES, o);
	count_locked(d, APISERVER_DOUBLE_LEASE_DELETED);
	/* finalizeDelete: a Success Status naming what was deleted (no code: omitempty). */
	a = lease_status(200, "", name, "leases", uid, "%s", "");
	if (a.body) {
		cJSON *s = cJSON_Parse(a.body);
		cJSON_DeleteItemFromObjectCaseSensitive(s, "message");
		cJSON_DeleteItemFromObjectCaseSensitive(s, "code");
		free(a.body);
		a.body = s ? cJSON_PrintUnformatted(s) : NULL;
		cJSON_Delete(s);
	}
out:
	cJSON_Delete(opts);
	cJSON_Delete(t);
	return a;
}

/* A lease put straight into the store (test set-up, state files), as the API server would
 * have stored it: kind and apiVersion, metadata.namespace (ns, else the object's, else
 * "default"), a uid and creationTimestamp when absent, spec. tree owned. 0 / -1. */
static int put_lease_locked(struct apiserver_double *d, const char *ns, cJSON *t)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(t, "metadata");
	char own_ns[NAME_MAX_DBL + 1];
	if (!cJSON_IsObject(md)) {
		cJSON_Delete(t);
		return -1;
	}
	snprintf(own_ns, sizeof own_ns, "%s",
	         ns                                    ? ns
	         : *str_at(t, "metadata", "namespace") ? str_at(t, "metadata", "namespace")
	                                               : "default");
	set_str(md, "namespace", own_ns);
	if (!*str_at(t, "metadata", "uid") || !*str_at(t, "metadata", "creationTimestamp")) {
		char uid[64], ts[40];
		snprintf(uid, sizeof uid, "%s", str_at(t, "metadata", "uid"));
		snprintf(ts, sizeof ts, "%s", str_at(t, "metadata", "creationTimestamp"));
		fill_system_fields(d, md);
		if (*uid)
			set_str(md, "uid", uid);
		if (*ts)
			set_str(md, "creationTimestamp", ts);
	}
	set_str(t, "kind", "Lease");
	set_str(t, "apiVersion", LEASE_API);
	if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(t, "spec"))) {
		cJSON_DeleteItemFromObjectCaseSensitive(t, "spec");
		cJSON_AddObjectToObject(t, "spec");
	}
	return put_locked(d, RES_LEASES, NULL, t);
}

/* /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]: 1, else 0. */
/* GET /apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies (list or watch). */
static int is_policy_path(char **seg, int n)
{
	return n == 4 && !strcmp(seg[0], "apis") && !strcmp(seg[1], "gpu-memory-guard.io") &&
	       !strcmp(seg[2], "v1alpha1") && !strcmp(seg[3], "gpumemorypolicies");
}

/* PATCH /apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies/NAME/status */
static int is_policy_status_path(char **seg, int n)
{
	return n == 6 && !strcmp(seg[0], "apis") && !strcmp(seg[1], "gpu-memory-guard.io") &&
	       !strcmp(seg[2], "v1alpha1") && !strcmp(seg[3], "gpumemorypolicies") &&
	       !strcmp(seg[5], "status");
}

/* RFC 7386 merge of patch into target (both objects): null removes a member, an object merges
 * into an object, anything else replaces. 0, or -1 out of memory. */
static int merge_patch(cJSON *target, const cJSON *patch)
{
	const cJSON *p;
	cJSON_ArrayForEach(p, patch)
	{
		cJSON *t = cJSON_GetObjectItemCaseSensitive(target, p->string), *copy;
		if (cJSON_IsNull(p)) {
			cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
			continue;
		}
		if (cJSON_IsObject(p) && cJSON_IsObject(t)) {
			if (merge_patch(t, p))
				return -1;
			continue;
		}
		if (cJSON_IsObject(p)) {
			/* A new object member: merged into {} so that its nulls are dropped. */
			copy = cJSON_CreateObject();
			if (!copy || merge_patch(copy, p)) {
				cJSON_Delete(copy);
				return -1;
			}
		} else if (!(copy = cJSON_Duplicate(p, 1))) {
			return -1;
		}
		cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
		if (!cJSON_AddItemToObject(target, p->string, copy)) {
			cJSON_Delete(copy);
			return -1;
		}
	}
	return 0;
}

/* PATCH of a policy's status subresource: a JSON merge patch whose status member alone is
 * applied (the API server ignores the rest on /status); a new resourceVersion and a MODIFIED
 * event. Caller holds mu. */
static struct answer policy_patch_status(struct apiserver_double *d, struct MHD_Connection *c,
                                         const char *name, const char *body)
{
	const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
	struct obj *o = store_find(&d->store[RES_POLICIES], "", name);
	cJSON *patch = NULL, *tree = NULL;
	const cJSON *st;
	struct answer a;
	char msg[600];

	if (d->no_policy_crd)
		return status_answer(404, "NotFound",
		                     "the server could not find the requested resource");
	if (!ct || strncmp(ct, "application/merge-patch+json", 28))
		return status_answer(415, "UnsupportedMediaType",
		                     "the test double takes application/merge-patch+json only");
	if (!o) {
		snprintf(msg, sizeof msg,
		         "gpumemorypolicies.gpu-memory-guard.io \"%.250s\" not found", name);
		return status_answer(404, "NotFound", msg);
	}
	patch = cJSON_Parse(body ? body : "");
	if (!cJSON_IsObject(patch)) {
		a = status_answer(400, "BadRequest", "the body is not a JSON object");
		goto out;
	}
	tree = cJSON_Parse(o->json);
	st = cJSON_GetObjectItemCaseSensitive(patch, "status");
	if (!tree) {
		a = status_answer(500, "InternalError", "out of memory");
		goto out;
	}
	if (st) {
		cJSON *wrap = cJSON_CreateObject();
		cJSON *copy = wrap ? cJSON_Duplicate(st, 1) : NULL;
		int rc = copy && cJSON_AddItemToObject(wrap, "status", copy) ? 0 : -1;
		if (rc != 0)
			cJSON_Delete(copy);
		if (rc == 0)
			rc = merge_patch(tree, wrap);
		cJSON_Delete(wrap);
		if (rc) {
			a = status_answer(500, "InternalError", "out of memory");
			goto out;
		}
	}
	if (put_locked(d, RES_POLICIES, NULL, tree)) { /* takes tree */
		tree = NULL;
		a = status_answer(500, "InternalError", "cannot store the object");
		goto out;
	}
	tree = NULL;
	o = store_find(&d->store[RES_POLICIES], "", name);
	a = text_answer(200, o->json);
out:
	cJSON_Delete(patch);
	cJSON_Delete(tree);
	return a;
}

static int is_lease_path(char **seg, int n)
{
	return (n == 6 || n == 7) && !strcmp(seg[0], "apis") && !strcmp(seg[1], LEASE_GROUP) &&
	       !strcmp(seg[2], "v1") && !strcmp(seg[3], "namespaces") && !strcmp(seg[5], "leases");
}

/* Route a lease request (is_lease_path). Caller holds mu. */
static struct answer route_leases(struct apiserver_double *d, struct MHD_Connection *c,
                                  const char *method, char **seg, int n, const char *body)
{
	const char *ns = seg[4];
	if (MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "dryRun"))
		return status_answer(400, "BadRequest", "dryRun: not supported by the test double");
	if (n == 6 && !strcmp(method, "POST"))
		return lease_post(d, ns, body);
	if (n == 6 && !strcmp(method, "GET"))
		return status_answer(
		    400, "BadRequest",
		    "lists and watches of leases: not supported by the test double");
	if (n == 7 && !strcmp(method, "GET")) {
		struct obj *o = store_find(&d->store[RES_LEASES], ns, seg[6]);
		return o ? text_answer(200, o->json) : lease_not_found(seg[6]);
	}
	if (n == 7 && !strcmp(method, "PUT")) {
		struct obj *o = store_find(&d->store[RES_LEASES], ns, seg[6]);
		if (o && d->lease_gone_n) { /* apiserver_double_delete_lease_before_put */
			d->lease_gone_n--;
			delete_locked(d, RES_LEASES, o);
			count_locked(d, APISERVER_DOUBLE_LEASE_DELETED);
			count_locked(d, APISERVER_DOUBLE_LEASE_PUT_GONE);
			return lease_not_found(seg[6]);
		}
		return lease_put(d, ns, seg[6], body);
	}
	if (n == 7 && !strcmp(method, "DELETE"))
		return lease_delete(d, ns, seg[6], body);
	return status_answer(405, "MethodNotAllowed",
	                     "the server does not allow this method on the requested resource (the "
	                     "test double serves GET, POST, PUT and DELETE of leases)");
}

/* The reason kube-apiserver gives with an HTTP status, for injected failures. */
static const char *reason_for(int code)
{
	switch (code) {
	case 400:
		return "BadRequest";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "NotFound";
	case 409:
		return "Conflict";
	case 410:
		return "Expired";
	case 422:
		return "Invalid";
	case 429:
		return "TooManyRequests";
	case 500:
		return "InternalError";
	case 503:
		return "ServiceUnavailable";
	case 504:
		return "Timeout";
	default:
		return "";
	}
}

/* An injected failure of a lease write: a 409 looks like the real one (POST: AlreadyExists,
 * else Conflict) so the client's conflict path runs; other codes carry their usual reason. */
static struct answer lease_injected(int code, const char *method, char **seg, int n,
                                    const char *body)
{
	char name[NAME_MAX_DBL + 1] = "";
	if (n == 7)
		snprintf(name, sizeof name, "%s", seg[6]);
	else if (body) {
		cJSON *t = cJSON_Parse(body);
		snprintf(name, sizeof name, "%s", str_at(t, "metadata", "name"));
		cJSON_Delete(t);
	}
	if (code == 409 && !strcmp(method, "POST"))
		return lease_status(409, "AlreadyExists", name, "leases", NULL,
		                    LEASE_RESOURCE " \"%s\" already exists", name);
	if (code == 409)
		return lease_conflict(name, OPTIMISTIC_LOCK_MSG);
	return lease_status((unsigned)code, reason_for(code), NULL, NULL, NULL,
	                    "injected failure of a lease write (apiserver test double)");
}

/* ---- watches ---- */

/* One open watch stream; MHD's reader callback runs on the connection's own thread. */
struct watch_stream {
	struct apiserver_double *d;
	enum res r;
	unsigned long next_rv; /* events with rv > next_rv are still to send */
	unsigned long epoch;   /* d->watch_epoch when opened */
	struct timespec deadline, next_bookmark;
	int bookmarks;
	int ending; /* end once out is sent */
	char *out;  /* bytes being sent */
	size_t out_len, out_off;
};

static int is_watch(struct MHD_Connection *c)
{
	const char *w = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "watch");
	return w && (!strcmp(w, "1") || !strcmp(w, "true"));
}

/* The ERROR event the API server sends when a watch's resourceVersion is compacted away. */
static char *gone_line(const struct apiserver_double *d, unsigned long from)
{
	char msg[128], *obj, *line = NULL;
	cJSON *s;
	snprintf(msg, sizeof msg, "too old resource version: %lu (%lu)", from, d->rv);
	s = status_object(410, "Expired", msg);
	obj = cJSON_PrintUnformatted(s);
	cJSON_Delete(s);
	if (obj && asprintf(&line, "{\"type\":\"ERROR\",\"object\":%s}\n", obj) < 0)
		line = NULL;
	free(obj);
	return line;
}

static char *bookmark_line(const struct apiserver_double *d, enum res r)
{
	char *line = NULL;
	if (asprintf(&line,
	             "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"v1\","
	             "\"metadata\":{\"resourceVersion\":\"%lu\"}}}\n",
	             RES_KIND[r], d->rv) < 0)
		return NULL;
	return line;
}

/*
 * Decide what w sends next: 1 with w->out set, 0 to end the stream, -1 on out of memory.
 * Blocks on the condition variable while there is nothing to send. Caller holds mu.
 */
static int watch_next(struct apiserver_double *d, struct watch_stream *w)
{
	const struct history *h = &d->hist[w->r];
	const struct event *e;
	struct timespec now, until;
	for (;;) {
		if (d->stopping || w->epoch != d->watch_epoch)
			return 0;
		clock_gettime(CLOCK_REALTIME, &now);
		if (!ts_before(&now, &w->deadline))
			return 0;
		if (w->next_rv < h->oldest_rv) {
			w->out = gone_line(d, w->next_rv);
			w->ending = 1;
			break;
		}
		if ((e = history_after(h, w->next_rv))) {
			w->out = strdup(e->line);
			w->next_rv = e->rv;
			break;
		}
		/* Caught up: every event of this resource up to d->rv was sent. */
		if (w->bookmarks && !ts_before(&now, &w->next_bookmark)) {
			w->out = bookmark_line(d, w->r);
			w->next_rv = d->rv;
			deadline_after(&w->next_bookmark, d->bookmark_ms);
			break;
		}
		until = w->bookmarks && ts_before(&w->next_bookmark, &w->deadline)
		            ? w->next_bookmark
		            : w->deadline;
		pthread_cond_timedwait(&d->cv, &d->mu, &until);
	}
	if (!w->out)
		return -1;
	w->out_len = strlen(w->out);
	w->out_off = 0;
	return 1;
}

static ssize_t watch_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct watch_stream *w = cls;
	int rc;
	for (;;) {
		if (w->out_off < w->out_len) {
			size_t n = w->out_len - w->out_off < max ? w->out_len - w->out_off : max;
			memcpy(buf, w->out + w->out_off, n);
			w->out_off += n;
			return (ssize_t)n;
		}
		free(w->out);
		w->out = NULL;
		w->out_len = w->out_off = 0;
		if (w->ending)
			return MHD_CONTENT_READER_END_OF_STREAM;
		pthread_mutex_lock(&w->d->mu);
		rc = watch_next(w->d, w);
		pthread_mutex_unlock(&w->d->mu);
		if (rc <= 0)
			return rc < 0 ? MHD_CONTENT_READER_END_WITH_ERROR
			              : MHD_CONTENT_READER_END_OF_STREAM;
	}
}

static void watch_free(void *cls)
{
	struct watch_stream *w = cls;
	struct apiserver_double *d = w->d;
	pthread_mutex_lock(&d->mu);
	d->open_watches--;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	free(w->out);
	free(w);
}

/*
 * GET .../pods?watch=1 (or nodes): a stream from resourceVersion (absent, "" or "0": from now;
 * the real server would first send the current objects as ADDED). Caller holds mu.
 */
static struct answer start_watch(struct apiserver_double *d, struct MHD_Connection *c, enum res r)
{
	const char *rv = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "resourceVersion");
	const char *ts = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "timeoutSeconds");
	const char *bm =
	    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "allowWatchBookmarks");
	struct answer a = {200, NULL, NULL};
	struct watch_stream *w;
	unsigned long from = d->rv;
	long timeout = WATCH_T_DEF;
	char *end;
	if (d->watch_gone)
		return status_answer(410, "Expired", "too old resource version (injected)");
	if (MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fieldSelector"))
		return status_answer(400, "BadRequest",
		                     "fieldSelector on a watch: not supported by the test double");
	if (rv && *rv && strcmp(rv, "0")) {
		from = strtoul(rv, &end, 10);
		if (*rv < '0' || *rv > '9' || *end)
			return status_answer(400, "BadRequest", "resourceVersion: Invalid value");
	}
	if (ts && *ts) {
		timeout = strtol(ts, &end, 10);
		if (*end || timeout < 0)
			return status_answer(400, "BadRequest", "timeoutSeconds: Invalid value");
		if (timeout == 0 || timeout > WATCH_T_MAX)
			timeout = timeout ? WATCH_T_MAX : WATCH_T_DEF;
	}
	w = calloc(1, sizeof *w);
	if (!w)
		return status_answer(500, "InternalError", "out of memory");
	w->d = d;
	w->r = r;
	w->next_rv = from;
	w->epoch = d->watch_epoch;
	w->bookmarks = bm && (!strcmp(bm, "true") || !strcmp(bm, "1"));
	deadline_after(&w->deadline, (unsigned long)timeout * 1000ul);
	deadline_after(&w->next_bookmark, d->bookmark_ms);
	a.ws = w;
	return a;
}

/* Route an authorized API request. seg[] is the path split on '/'. Caller holds mu. */
static struct answer route_api(struct apiserver_double *d, struct MHD_Connection *c,
                               const char *method, char **seg, int n, const char *body)
{
	int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
	struct obj *o;
	char msg[600];
	if (is_lease_path(seg, n))
		return route_leases(d, c, method, seg, n, body);
	if (is_policy_status_path(seg, n) && !strcmp(method, "PATCH"))
		return policy_patch_status(d, c, seg[4], body);
	if (is_policy_path(seg, n) && get) {
		if (d->no_policy_crd)
			return status_answer(404, "NotFound",
			                     "the server could not find the requested resource");
		return is_watch(c) ? start_watch(d, c, RES_POLICIES)
		                   : list_objects(d, c, RES_POLICIES, NULL);
	}
	if (d->dra_forbidden && n >= 4 && !strcmp(seg[0], "apis") &&
	    !strcmp(seg[1], "resource.k8s.io")) {
		snprintf(msg, sizeof msg,
		         "%.100s.resource.k8s.io is forbidden: User \"system:serviceaccount:"
		         "gpu-memory-guard:gpu-memory-guard\" cannot list resource \"%.100s\" in "
		         "API group \"resource.k8s.io\" at the cluster scope",
		         seg[3], seg[3]);
		return status_answer(403, "Forbidden", msg);
	}
	/* DRA's cluster-wide collections, list and watch, as the informer reads them */
	if (d->dra_served && get && n == 4 && !strcmp(seg[0], "apis") &&
	    !strcmp(seg[1], "resource.k8s.io") && !strcmp(seg[2], "v1") &&
	    (!strcmp(seg[3], "resourceslices") || !strcmp(seg[3], "resourceclaims"))) {
		enum res r = !strcmp(seg[3], "resourceslices") ? RES_SLICES : RES_CLAIMS;
		return is_watch(c) ? start_watch(d, c, r) : list_objects(d, c, r, NULL);
	}
	if (n < 2 || strcmp(seg[0], "api") || strcmp(seg[1], "v1"))
		return status_answer(404, "NotFound",
		                     "the server could not find the requested resource");
	if (n == 3 && get && (!strcmp(seg[2], "pods") || !strcmp(seg[2], "nodes"))) {
		enum res r = !strcmp(seg[2], "pods") ? RES_PODS : RES_NODES;
		return is_watch(c) ? start_watch(d, c, r) : list_objects(d, c, r, NULL);
	}
	if (n == 4 && !strcmp(seg[2], "nodes") && get) {
		o = find_node(d, seg[3]);
		if (!o) {
			snprintf(msg, sizeof msg, "nodes \"%.250s\" not found", seg[3]);
			return status_answer(404, "NotFound", msg);
		}
		return text_answer(200, o->json);
	}
	if (n >= 5 && !strcmp(seg[2], "namespaces") && !strcmp(seg[4], "pods")) {
		if (n == 5 && get && is_watch(c))
			return status_answer(400, "BadRequest",
			                     "namespaced watch: not supported by the test double");
		if (n == 5 && get)
			return list_objects(d, c, RES_PODS, seg[3]);
		if (n == 5 && post)
			return post_pod(d, seg[3], body);
		if (n == 7 && post && !strcmp(seg[6], "binding"))
			return post_binding(d, seg[3], seg[5], body);
		if (n == 6) {
			o = find_pod(d, seg[3], seg[5]);
			if (!o) {
				snprintf(msg, sizeof msg, "pods \"%.250s\" not found", seg[5]);
				return status_answer(404, "NotFound", msg);
			}
			if (get)
				return text_answer(200, o->json);
			if (!strcmp(method, "DELETE")) {
				delete_locked(d, RES_PODS, o);
				return status_answer(200, "", "");
			}
		}
	}
	return status_answer(405, "MethodNotAllowed", "the server does not allow this method");
}

static enum apiserver_double_counter classify(struct MHD_Connection *c, const char *method,
                                              char **seg, int n)
{
	int nodes = n >= 3 && !strcmp(seg[2], "nodes");
	if (is_lease_path(seg, n))
		return strcmp(method, "GET") ? APISERVER_DOUBLE_LEASE_WRITE
		                             : APISERVER_DOUBLE_GET_LEASE;
	if (is_policy_status_path(seg, n))
		return APISERVER_DOUBLE_PATCH_POLICY_STATUS;
	if (is_policy_path(seg, n) && !strcmp(method, "GET"))
		return is_watch(c) ? APISERVER_DOUBLE_WATCH_POLICIES
		                   : APISERVER_DOUBLE_LIST_POLICIES;
	if (strcmp(method, "GET"))
		return APISERVER_DOUBLE_WRITE;
	if (n == 4 && nodes)
		return APISERVER_DOUBLE_GET_NODE;
	if (n == 6)
		return APISERVER_DOUBLE_GET_POD;
	if (n == 3 && is_watch(c))
		return nodes ? APISERVER_DOUBLE_WATCH_NODES : APISERVER_DOUBLE_WATCH_PODS;
	if (n == 3 && nodes)
		return APISERVER_DOUBLE_LIST_NODES;
	return APISERVER_DOUBLE_LIST_PODS;
}

static struct answer control(struct apiserver_double *d, struct MHD_Connection *c, const char *url)
{
	const char *v, *t;
	cJSON *o;
	struct answer a = {200, NULL, NULL};
	pthread_mutex_lock(&d->mu);
	if (!strcmp(url, "/_double/fail") &&
	    (v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "code")))
		d->fail_code = atoi(v);
	else if (!strcmp(url, "/_double/delay") &&
	         (v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "ms")))
		d->delay_ms = (unsigned)strtoul(v, NULL, 10);
	else if (!strcmp(url, "/_double/expire-continue") &&
	         (v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "times")))
		d->expire_continue = atoi(v);
	else if (!strcmp(url, "/_double/fail-lease-writes") &&
	         (v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "code")) &&
	         (t = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "times")) &&
	         atoi(v) >= 400 && atoi(v) <= 599) {
		d->lease_fail_code = atoi(v);
		d->lease_fail_n = strtoul(t, NULL, 10);
	} else if (!strcmp(url, "/_double/delay-lease-writes") &&
	           (v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "ms")))
		d->lease_delay_ms = (unsigned)strtoul(v, NULL, 10);
	else if (strcmp(url, "/_double/stats")) {
		pthread_mutex_unlock(&d->mu);
		return status_answer(404, "NotFound", "unknown control");
	}
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "getNode", (double)d->counts[APISERVER_DOUBLE_GET_NODE]);
	cJSON_AddNumberToObject(o, "getPod", (double)d->counts[APISERVER_DOUBLE_GET_POD]);
	cJSON_AddNumberToObject(o, "listPods", (double)d->counts[APISERVER_DOUBLE_LIST_PODS]);
	cJSON_AddNumberToObject(o, "listNodes", (double)d->counts[APISERVER_DOUBLE_LIST_NODES]);
	cJSON_AddNumberToObject(o, "watchPods", (double)d->counts[APISERVER_DOUBLE_WATCH_PODS]);
	cJSON_AddNumberToObject(o, "watchNodes", (double)d->counts[APISERVER_DOUBLE_WATCH_NODES]);
	cJSON_AddNumberToObject(o, "openWatches", (double)d->open_watches);
	cJSON_AddNumberToObject(o, "writes", (double)d->counts[APISERVER_DOUBLE_WRITE]);
	cJSON_AddNumberToObject(o, "unauthorized",
	                        (double)d->counts[APISERVER_DOUBLE_UNAUTHORIZED]);
	cJSON_AddNumberToObject(o, "failCode", d->fail_code);
	cJSON_AddNumberToObject(o, "delayMs", d->delay_ms);
	cJSON_AddNumberToObject(o, "resourceVersion", (double)d->rv);
	cJSON_AddNumberToObject(o, "pods", (double)d->store[RES_PODS].live);
	cJSON_AddNumberToObject(o, "nodes", (double)d->store[RES_NODES].live);
	cJSON_AddNumberToObject(o, "leases", (double)d->store[RES_LEASES].live);
	cJSON_AddNumberToObject(o, "getLease", (double)d->counts[APISERVER_DOUBLE_GET_LEASE]);
	cJSON_AddNumberToObject(o, "leaseWrites", (double)d->counts[APISERVER_DOUBLE_LEASE_WRITE]);
	cJSON_AddNumberToObject(o, "leaseCreated",
	                        (double)d->counts[APISERVER_DOUBLE_LEASE_CREATED]);
	cJSON_AddNumberToObject(o, "leaseUpdated",
	                        (double)d->counts[APISERVER_DOUBLE_LEASE_UPDATED]);
	cJSON_AddNumberToObject(o, "leaseConflicts",
	                        (double)d->counts[APISERVER_DOUBLE_LEASE_CONFLICT]);
	cJSON_AddNumberToObject(o, "leaseDeleted",
	                        (double)d->counts[APISERVER_DOUBLE_LEASE_DELETED]);
	cJSON_AddNumberToObject(o, "leasePutGone",
	                        (double)d->counts[APISERVER_DOUBLE_LEASE_PUT_GONE]);
	cJSON_AddNumberToObject(o, "leaseGoneLeft", (double)d->lease_gone_n);
	cJSON_AddNumberToObject(o, "leaseFailLeft", (double)d->lease_fail_n);
	cJSON_AddNumberToObject(o, "leaseFailCode", d->lease_fail_code);
	cJSON_AddNumberToObject(o, "leaseDelayMs", d->lease_delay_ms);
	a.body = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	pthread_mutex_unlock(&d->mu);
	return a;
}

/* A client certificate chain that the configured client CA verifies (GnuTLS did the
 * handshake; MHD only requests the certificate, verification is ours). */
static int client_cert_ok(struct apiserver_double *d, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci;
	unsigned int status = 0, n = 0;
	if (!d->client_ca)
		return 0;
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return 0;
	if (!gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &n) || n == 0)
		return 0;
	return gnutls_certificate_verify_peers2((gnutls_session_t)ci->tls_session, &status) == 0 &&
	       status == 0;
}

static int authorized(struct apiserver_double *d, struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	int ok;
	pthread_mutex_lock(&d->mu);
	ok = h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, d->token);
	pthread_mutex_unlock(&d->mu);
	return ok || client_cert_ok(d, c);
}

static struct answer dispatch(struct apiserver_double *d, struct MHD_Connection *c, const char *url,
                              const char *method, const char *body)
{
	char path[1024], *seg[MAX_SEGMENTS], *save = NULL, *tok;
	int n = 0, fail;
	enum apiserver_double_counter kind;
	struct answer a;

	if (!strncmp(url, "/_double/", 9))
		return control(d, c, url);
	if (!authorized(d, c)) {
		count(d, APISERVER_DOUBLE_UNAUTHORIZED);
		return status_answer(401, "Unauthorized", "Unauthorized");
	}
	snprintf(path, sizeof path, "%s", url);
	for (tok = strtok_r(path, "/", &save); tok && n < MAX_SEGMENTS;
	     tok = strtok_r(NULL, "/", &save))
		seg[n++] = tok;
	kind = classify(c, method, seg, n);
	count(d, kind);
	injected_delay(d, 0);
	/* Before the write is applied: a precondition read earlier may be stale by then. */
	if (kind == APISERVER_DOUBLE_LEASE_WRITE)
		injected_delay(d, 1);
	pthread_mutex_lock(&d->mu);
	fail = d->fail_code;
	if (fail) {
		pthread_mutex_unlock(&d->mu);
		return status_answer((unsigned)fail, fail == 500 ? "InternalError" : "Failure",
		                     "injected failure (apiserver test double)");
	}
	if (kind == APISERVER_DOUBLE_LEASE_WRITE && d->lease_fail_n) {
		d->lease_fail_n--;
		fail = d->lease_fail_code;
		pthread_mutex_unlock(&d->mu);
		return lease_injected(fail, method, seg, n, body);
	}
	a = route_api(d, c, method, seg, n, body);
	if (a.ws)
		d->open_watches++; /* until watch_free */
	pthread_mutex_unlock(&d->mu);
	if (a.code == 400)
		count(d, APISERVER_DOUBLE_BAD_REQUEST);
	return a;
}

/* A watch: chunked (size unknown), the reader blocking on its own connection's thread. */
static enum MHD_Result queue_watch(struct MHD_Connection *c, struct watch_stream *ws)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, WATCH_BLOCK, watch_read, ws,
	                                      watch_free);
	if (!r) {
		watch_free(ws);
		return MHD_NO;
	}
	/* The stream may be silent for long (no bookmarks): no idle timeout on it. */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *data_size, void **con_cls)
{
	struct apiserver_double *d = cls;
	struct upload *u = *con_cls;
	struct MHD_Response *r;
	struct answer a;
	enum MHD_Result ret;

	if (!u) {
		u = calloc(1, sizeof *u);
		if (!u)
			return MHD_NO;
		*con_cls = u;
		return MHD_YES;
	}
	if (*data_size) {
		if (u->len + *data_size + 1 > BODY_MAX) {
			u->too_big = 1;
		} else {
			if (u->len + *data_size + 1 > u->cap) {
				size_t cap = (u->len + *data_size + 1) * 2;
				char *nb = realloc(u->buf, cap);
				if (!nb)
					return MHD_NO;
				u->buf = nb;
				u->cap = cap;
			}
			memcpy(u->buf + u->len, data, *data_size);
			u->len += *data_size;
			u->buf[u->len] = '\0';
		}
		*data_size = 0;
		return MHD_YES;
	}
	if (u->too_big)
		a = status_answer(413, "RequestEntityTooLarge", "request body too large");
	else
		a = dispatch(d, c, url, method, u->buf);
	if (a.ws)
		return queue_watch(c, a.ws);
	if (!a.body)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(a.body), a.body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(a.body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(c, a.code, r);
	MHD_destroy_response(r);
	return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
	struct upload *u = *con_cls;
	if (u) {
		free(u->buf);
		free(u);
		*con_cls = NULL;
	}
}

static void quiet_logger(void *cls, const char *fmt, va_list ap)
{
	if (getenv("GMG_DOUBLE_DEBUG"))
		vfprintf(stderr, fmt, ap);
}

int apiserver_double_start(struct apiserver_double *d, char *err, size_t errlen)
{
	struct sockaddr_in sin;
	const union MHD_DaemonInfo *info;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(d->port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Only with a client CA: MHD then asks clients for a certificate. */
	struct MHD_OptionItem trust[] = {
	    {d->client_ca ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, d->client_ca},
	    {MHD_OPTION_END, 0, NULL},
	};
	d->mhd = MHD_start_daemon(
	    MHD_USE_TLS | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	        MHD_USE_ERROR_LOG,
	    d->port, NULL, NULL, handler, d, MHD_OPTION_EXTERNAL_LOGGER, quiet_logger, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin, MHD_OPTION_HTTPS_MEM_KEY, d->key,
	    MHD_OPTION_HTTPS_MEM_CERT, d->cert, MHD_OPTION_HTTPS_PRIORITIES,
	    d->allow_old_tls ? OLD_TLS_TOO : MODERN_TLS, MHD_OPTION_NOTIFY_COMPLETED, completed,
	    NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_ARRAY, trust,
	    MHD_OPTION_END);
	if (!d->mhd) {
		set_err(err, errlen, "apiserver double: MHD_start_daemon failed on port %u",
		        (unsigned)d->port);
		return -1;
	}
	info = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
	if (info && info->port)
		d->port = info->port;
	return 0;
}

/* Open watch streams end (stopping), then MHD closes the port and joins every connection. */
int apiserver_double_stop(struct apiserver_double *d)
{
	if (!d->mhd)
		return -1;
	pthread_mutex_lock(&d->mu);
	d->stopping = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	MHD_stop_daemon(d->mhd);
	d->mhd = NULL;
	pthread_mutex_lock(&d->mu);
	d->stopping = 0;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

struct apiserver_double *apiserver_double_new(const struct apiserver_double_opts *o, char *err,
                                              size_t errlen)
{
	struct apiserver_double *d = calloc(1, sizeof *d);
	if (!d)
		goto err;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->cert = strdup(o->cert_pem);
	d->key = strdup(o->key_pem);
	d->token = strdup(o->token);
	d->port = o->port;
	d->max_page = o->max_page;
	d->allow_old_tls = o->allow_old_tls;
	d->bookmark_ms = BOOKMARK_DEF;
	if (o->client_ca_pem && !(d->client_ca = strdup(o->client_ca_pem))) {
		set_err(err, errlen, "apiserver double: out of memory");
		goto err;
	}
	d->rv = 1000;
	for (int r = 0; r < RES_N; r++)
		d->hist[r].oldest_rv = d->rv;
	if (!d->cert || !d->key || !d->token) {
		set_err(err, errlen, "apiserver double: out of memory");
		goto err;
	}
	if (apiserver_double_start(d, err, errlen))
		goto err;
	return d;
err:
	apiserver_double_free(d);
	return NULL;
}

void apiserver_double_free(struct apiserver_double *d)
{
	if (!d)
		return;
	if (d->mhd)
		apiserver_double_stop(d);
	for (int r = 0; r < RES_N; r++) {
		store_free(&d->store[r]);
		history_free(&d->hist[r]);
	}
	free(d->cert);
	free(d->key);
	free(d->token);
	free(d->client_ca);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

unsigned short apiserver_double_port(const struct apiserver_double *d)
{
	return d->port;
}

/* Add the objects of one parsed document. Caller holds mu. Returns objects added. */
static int add_document(struct apiserver_double *d, const cJSON *doc)
{
	const char *kind = str_at(doc, "kind", NULL);
	const cJSON *items = NULL, *it;
	int added = 0;
	if (!strcmp(kind, "Node"))
		return put_node_locked(d, cJSON_Duplicate(doc, 1)) == 0;
	if (!strcmp(kind, "Pod"))
		return put_pod_locked(d, NULL, cJSON_Duplicate(doc, 1)) == 0;
	if (!strcmp(kind, "Lease"))
		return put_lease_locked(d, NULL, cJSON_Duplicate(doc, 1)) == 0;
	if (!strcmp(kind, "PodList") || !strcmp(kind, "NodeList") || !strcmp(kind, "LeaseList") ||
	    !strcmp(kind, "List"))
		items = cJSON_GetObjectItemCaseSensitive(doc, "items");
	if (!*kind) {
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "nodes")) added +=
		    put_node_locked(d, cJSON_Duplicate(it, 1)) == 0;
		cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(doc, "pods")) added +=
		    put_pod_locked(d, NULL, cJSON_Duplicate(it, 1)) == 0;
		return added;
	}
	cJSON_ArrayForEach(it, items)
	{
		const char *k = str_at(it, "kind", NULL);
		/* List items usually omit kind: the list's own kind tells which. */
		if (!strcmp(kind, "NodeList") || !strcmp(k, "Node"))
			added += put_node_locked(d, cJSON_Duplicate(it, 1)) == 0;
		else if (!strcmp(kind, "LeaseList") || !strcmp(k, "Lease"))
			added += put_lease_locked(d, NULL, cJSON_Duplicate(it, 1)) == 0;
		else
			added += put_pod_locked(d, NULL, cJSON_Duplicate(it, 1)) == 0;
	}
	return added;
}

int apiserver_double_load_file(struct apiserver_double *d, const char *path, char *err,
                               size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len;
	cJSON *doc = NULL;
	int n = -1;
	if (!f) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	buf = malloc(FILE_MAX + 1);
	if (!buf)
		goto out;
	len = fread(buf, 1, FILE_MAX + 1, f);
	if (len > FILE_MAX) {
		set_err(err, errlen, "%s: over %u bytes", path, FILE_MAX);
		goto out;
	}
	buf[len] = '\0';
	doc = cJSON_Parse(buf);
	if (!doc) {
		set_err(err, errlen, "%s: not JSON", path);
		goto out;
	}
	pthread_mutex_lock(&d->mu);
	n = add_document(d, doc);
	pthread_mutex_unlock(&d->mu);
out:
	cJSON_Delete(doc);
	free(buf);
	fclose(f);
	return n;
}

int apiserver_double_load_dir(struct apiserver_double *d, const char *dir, char *err, size_t errlen)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	char path[4096];
	int total = 0, n;
	if (!dh) {
		set_err(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(dh))) {
		size_t l = strlen(e->d_name);
		if (l < 5 || strcmp(e->d_name + l - 5, ".json"))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		n = apiserver_double_load_file(d, path, err, errlen);
		if (n < 0) {
			total = -1;
			break;
		}
		total += n;
	}
	closedir(dh);
	return total;
}

int apiserver_double_put_pod(struct apiserver_double *d, const char *ns, const char *pod_json)
{
	cJSON *p = cJSON_Parse(pod_json);
	int rc;
	if (!p)
		return -1;
	pthread_mutex_lock(&d->mu);
	rc = put_pod_locked(d, ns, p);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_put_node(struct apiserver_double *d, const char *node_json)
{
	cJSON *n = cJSON_Parse(node_json);
	int rc;
	if (!n)
		return -1;
	pthread_mutex_lock(&d->mu);
	rc = put_node_locked(d, n);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_bind(struct apiserver_double *d, const char *ns, const char *name,
                          const char *node)
{
	int rc;
	pthread_mutex_lock(&d->mu);
	rc = bind_locked(d, ns, name, node);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_set_phase(struct apiserver_double *d, const char *ns, const char *name,
                               const char *phase)
{
	struct obj *o;
	int rc = -1;
	pthread_mutex_lock(&d->mu);
	o = find_pod(d, ns, name);
	if (o)
		rc = set_pod_field(d, o, "status", "phase", phase);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_delete_pod(struct apiserver_double *d, const char *ns, const char *name)
{
	struct obj *o;
	int rc = -1;
	pthread_mutex_lock(&d->mu);
	o = find_pod(d, ns, name);
	if (o)
		rc = delete_locked(d, RES_PODS, o);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_delete_node(struct apiserver_double *d, const char *name)
{
	struct obj *o;
	int rc = -1;
	pthread_mutex_lock(&d->mu);
	o = find_node(d, name);
	if (o)
		rc = delete_locked(d, RES_NODES, o);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_put_lease(struct apiserver_double *d, const char *ns, const char *lease_json)
{
	cJSON *t = cJSON_Parse(lease_json);
	int rc;
	if (!t)
		return -1;
	pthread_mutex_lock(&d->mu);
	rc = put_lease_locked(d, ns, t);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_delete_lease(struct apiserver_double *d, const char *ns, const char *name)
{
	struct obj *o;
	int rc = -1;
	pthread_mutex_lock(&d->mu);
	o = store_find(&d->store[RES_LEASES], ns, name);
	if (o)
		rc = delete_locked(d, RES_LEASES, o);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

char *apiserver_double_get_lease(struct apiserver_double *d, const char *ns, const char *name)
{
	struct obj *o;
	char *json = NULL;
	pthread_mutex_lock(&d->mu);
	o = store_find(&d->store[RES_LEASES], ns, name);
	if (o)
		json = strdup(o->json);
	pthread_mutex_unlock(&d->mu);
	return json;
}

char *apiserver_double_lease_annotation(struct apiserver_double *d, const char *ns,
                                        const char *name, const char *key)
{
	char *json = apiserver_double_get_lease(d, ns, name), *value = NULL;
	cJSON *t = json ? cJSON_Parse(json) : NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "metadata"),
	                                     "annotations"),
	    key);
	if (cJSON_IsString(v))
		value = strdup(v->valuestring);
	cJSON_Delete(t);
	free(json);
	return value;
}

void apiserver_double_fail_lease_writes(struct apiserver_double *d, unsigned long times,
                                        int http_code)
{
	pthread_mutex_lock(&d->mu);
	d->lease_fail_n = http_code >= 400 && http_code <= 599 ? times : 0;
	d->lease_fail_code = http_code;
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_delete_lease_before_put(struct apiserver_double *d, unsigned long times)
{
	pthread_mutex_lock(&d->mu);
	d->lease_gone_n = times;
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_lease_delay_ms(struct apiserver_double *d, unsigned ms)
{
	pthread_mutex_lock(&d->mu);
	d->lease_delay_ms = ms;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

unsigned long apiserver_double_resource_version(struct apiserver_double *d)
{
	unsigned long rv;
	pthread_mutex_lock(&d->mu);
	rv = d->rv;
	pthread_mutex_unlock(&d->mu);
	return rv;
}

void apiserver_double_cut_watches(struct apiserver_double *d)
{
	pthread_mutex_lock(&d->mu);
	d->watch_epoch++;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_compact(struct apiserver_double *d)
{
	pthread_mutex_lock(&d->mu);
	for (int r = 0; r < RES_N; r++) {
		history_free(&d->hist[r]);
		d->hist[r].oldest_rv = d->rv;
	}
	d->compacted_rv = d->rv;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_bookmark_ms(struct apiserver_double *d, unsigned ms)
{
	pthread_mutex_lock(&d->mu);
	d->bookmark_ms = ms ? ms : 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_watch_gone(struct apiserver_double *d, int on)
{
	pthread_mutex_lock(&d->mu);
	d->watch_gone = on;
	pthread_mutex_unlock(&d->mu);
}

unsigned long apiserver_double_open_watches(struct apiserver_double *d)
{
	unsigned long n;
	pthread_mutex_lock(&d->mu);
	n = d->open_watches;
	pthread_mutex_unlock(&d->mu);
	return n;
}

void apiserver_double_set_fail(struct apiserver_double *d, int http_code)
{
	pthread_mutex_lock(&d->mu);
	d->fail_code = http_code;
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_delay_ms(struct apiserver_double *d, unsigned ms)
{
	pthread_mutex_lock(&d->mu);
	d->delay_ms = ms;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_expire_continue(struct apiserver_double *d, int times)
{
	pthread_mutex_lock(&d->mu);
	d->expire_continue = times;
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_token(struct apiserver_double *d, const char *token)
{
	char *t = strdup(token);
	if (!t)
		return;
	pthread_mutex_lock(&d->mu);
	free(d->token);
	d->token = t;
	pthread_mutex_unlock(&d->mu);
}

unsigned long apiserver_double_count(struct apiserver_double *d, enum apiserver_double_counter c)
{
	unsigned long v;
	pthread_mutex_lock(&d->mu);
	v = d->counts[c];
	pthread_mutex_unlock(&d->mu);
	return v;
}

void apiserver_double_reset_counts(struct apiserver_double *d)
{
	pthread_mutex_lock(&d->mu);
	memset(d->counts, 0, sizeof d->counts);
	pthread_mutex_unlock(&d->mu);
}

int apiserver_double_wait_count(struct apiserver_double *d, enum apiserver_double_counter c,
                                unsigned long n, unsigned timeout_ms)
{
	struct timespec until;
	int rc = 0;
	deadline_after(&until, timeout_ms);
	pthread_mutex_lock(&d->mu);
	while (d->counts[c] < n && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&d->cv, &d->mu, &until);
	rc = d->counts[c] >= n ? 0 : -1;
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void apiserver_double_last_list_query(struct apiserver_double *d, char *selector, size_t sel_len,
                                      char *limit, size_t limit_len)
{
	pthread_mutex_lock(&d->mu);
	snprintf(selector, sel_len, "%s", d->last_sel);
	snprintf(limit, limit_len, "%s", d->last_limit);
	pthread_mutex_unlock(&d->mu);
}

int apiserver_double_put_policy(struct apiserver_double *d, const char *policy_json)
{
	cJSON *t = cJSON_Parse(policy_json);
	int rc;
	if (!t)
		return -1;
	pthread_mutex_lock(&d->mu);
	rc = put_locked(d, RES_POLICIES, NULL, t);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int apiserver_double_delete_policy(struct apiserver_double *d, const char *name)
{
	struct obj *o;
	int rc = -1;
	pthread_mutex_lock(&d->mu);
	o = store_find(&d->store[RES_POLICIES], "", name);
	if (o)
		rc = delete_locked(d, RES_POLICIES, o);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

char *apiserver_double_get_policy(struct apiserver_double *d, const char *name)
{
	struct obj *o;
	char *json = NULL;
	pthread_mutex_lock(&d->mu);
	o = store_find(&d->store[RES_POLICIES], "", name);
	if (o)
		json = strdup(o->json);
	pthread_mutex_unlock(&d->mu);
	return json;
}

void apiserver_double_set_dra_forbidden(struct apiserver_double *d, int forbidden)
{
	pthread_mutex_lock(&d->mu);
	d->dra_forbidden = forbidden;
	pthread_mutex_unlock(&d->mu);
}

void apiserver_double_set_dra_served(struct apiserver_double *d, int served)
{
	pthread_mutex_lock(&d->mu);
	d->dra_served = served;
	pthread_mutex_unlock(&d->mu);
}

int apiserver_double_put_dra(struct apiserver_double *d, const char *json)
{
	cJSON *t = cJSON_Parse(json);
	const char *kind = t ? str_at(t, "kind", NULL) : "";
	enum res r = !strcmp(kind, "ResourceSlice")   ? RES_SLICES
	             : !strcmp(kind, "ResourceClaim") ? RES_CLAIMS
	                                              : RES_N;
	int rc;
	if (r == RES_N) {
		cJSON_Delete(t);
		return -1;
	}
	pthread_mutex_lock(&d->mu);
	rc = put_locked(d, r, NULL, t);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void apiserver_double_set_policy_crd(struct apiserver_double *d, int installed)
{
	pthread_mutex_lock(&d->mu);
	d->no_policy_crd = !installed;
	pthread_mutex_unlock(&d->mu);
}
