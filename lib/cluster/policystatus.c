/*
 * policystatus: GPUMemoryPolicy status, written by the replica holding a Lease. See
 * policystatus.h.
 */
#include "policystatus.h"

#include "labelset.h"

#include "cache.h"
#include "jsonpath.h"
#include "log.h"
#include "metrics.h"
#include "monotime.h"
#include "policies.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NS_MAX 254 /* bytes of a namespace with its NUL */

/* ---- pure parts ---- */

void policystatus_observe(struct policystatus_lease *l, const cJSON *lease, double now_s)
{
	const char *rv = json_str(lease, "metadata", "resourceVersion", NULL);
	const char *holder = json_str(lease, "spec", "holderIdentity", NULL);
	const cJSON *dur = json_at(lease, "spec", "leaseDurationSeconds", NULL);

	if (lease == NULL) {
		memset(l, 0, sizeof(*l));
		l->observed_s = now_s;
		return;
	}
	if (!l->exists || rv == NULL || strcmp(rv, l->rv) != 0)
		l->observed_s = now_s;
	l->exists = 1;
	snprintf(l->rv, sizeof(l->rv), "%s", rv != NULL ? rv : "");
	snprintf(l->holder, sizeof(l->holder), "%s", holder != NULL ? holder : "");
	l->duration_s = cJSON_IsNumber(dur) ? (long)dur->valuedouble : 0;
}

enum policystatus_action policystatus_decide(const struct policystatus_lease *l, double now_s,
                                             const char *identity)
{
	long dur = l->duration_s > 0 ? l->duration_s : POLICYSTATUS_LEASE_S;

	if (!l->exists)
		return POLICYSTATUS_CREATE;
	if (strcmp(l->holder, identity) == 0)
		return POLICYSTATUS_RENEW;
	/* An empty holder: released (client-go's ReleaseOnCancel). */
	if (l->holder[0] == '\0' || now_s >= l->observed_s + (double)dur)
		return POLICYSTATUS_TAKEOVER;
	return POLICYSTATUS_WAIT;
}

void policystatus_rfc3339(long long t, char *buf, size_t cap)
{
	time_t tt = (time_t)t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

cJSON *policystatus_patch(const struct policystatus_entry *e, const char *transition)
{
	cJSON *root = cJSON_CreateObject(), *st, *conds, *c;
	char msg[64];

	if (root == NULL || (st = cJSON_AddObjectToObject(root, "status")) == NULL ||
	    cJSON_AddNumberToObject(st, "observedGeneration", (double)e->generation) == NULL ||
	    cJSON_AddNumberToObject(st, "nodes", e->valid ? (double)e->nodes : 0) == NULL ||
	    (conds = cJSON_AddArrayToObject(st, "conditions")) == NULL ||
	    (c = cJSON_CreateObject()) == NULL)
		goto err;
	if (!cJSON_AddItemToArray(conds, c)) {
		cJSON_Delete(c);
		goto err;
	}
	snprintf(msg, sizeof(msg), "applied to %zu node%s", e->nodes, e->nodes == 1 ? "" : "s");
	if (cJSON_AddStringToObject(c, "type", "Ready") == NULL ||
	    cJSON_AddStringToObject(c, "status", e->valid ? "True" : "False") == NULL ||
	    cJSON_AddStringToObject(c, "reason", e->valid ? "Applied" : "Invalid") == NULL ||
	    cJSON_AddStringToObject(c, "message", e->valid ? msg : e->error) == NULL ||
	    cJSON_AddNumberToObject(c, "observedGeneration", (double)e->generation) == NULL ||
	    cJSON_AddStringToObject(c, "lastTransitionTime", transition) == NULL)
		goto err;
	return root;
err:
	cJSON_Delete(root);
	return NULL;
}

void policystatus_identity(char *buf, size_t cap)
{
	const char *pod = getenv("POD_NAME");
	char host[256];

	if (pod != NULL && pod[0] != '\0' && strlen(pod) < POLICYSTATUS_IDENTITY_MAX) {
		snprintf(buf, cap, "%s", pod);
		return;
	}
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	snprintf(buf, cap, "%.100s_%ld", host, (long)getpid());
}

/* ---- the writer ---- */

/* What was last written to one policy. */
struct written {
	char name[GPUPOLICY_NAME_MAX];
	char uid[POLICYSTATUS_UID_MAX];         /* of the object written to */
	char *text;                             /* the patch, serialized */
	int valid;                              /* its Ready status */
	char transition[POLICYSTATUS_TIME_MAX]; /* its lastTransitionTime */
	int seen;                               /* in this round's snapshot */
};

struct policystatus {
	struct kube_client *kube;
	char ns[NS_MAX];
	char identity[POLICYSTATUS_IDENTITY_MAX];
	struct cache *cache;
	struct policies *policies;
	unsigned period_ms;
	int single_writer;

	pthread_t thread;
	int started;
	pthread_mutex_t mu; /* stop, cv */
	pthread_cond_t cv;
	int stop;
	_Atomic int leader;

	/* The thread's own state (no lock: one thread). */
	struct policystatus_lease lease;
	struct policystatus_entry *snap; /* POLICIES_MAX */
	size_t n_snap;
	const struct gpupolicy **selecting; /* POLICIES_MAX, for counting */
	struct written *written;            /* POLICIES_MAX */
	size_t n_written;
	double last_warn;
};

static void warn_limited(struct policystatus *s, const char *msg, const char *name, const char *err)
{
	double now = monotime_s();
	enum log_level level = LOG_DEBUG;
	if (s->last_warn == 0 || now - s->last_warn >= POLICYSTATUS_WARN_EVERY_S) {
		level = LOG_WARN;
		s->last_warn = now;
	}
	log_fields(level, msg,
	           (struct log_field[]){LOG_STR("policy", name), LOG_STR("error", err), LOG_END});
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct policystatus_entry *)a)->name,
	              ((const struct policystatus_entry *)b)->name);
}

static void snap_one(void *ctx, const struct policies_object *o)
{
	struct policystatus *s = ctx;
	struct policystatus_entry *e;
	if (s->n_snap >= POLICIES_MAX)
		return;
	e = &s->snap[s->n_snap++];
	snprintf(e->name, sizeof(e->name), "%s", o->name);
	snprintf(e->uid, sizeof(e->uid), "%s", o->uid);
	e->generation = o->generation;
	e->valid = o->p != NULL;
	snprintf(e->error, sizeof(e->error), "%s", o->p != NULL ? "" : o->error);
	e->nodes = 0;
	snprintf(e->ready_was, sizeof(e->ready_was), "%s", o->ready);
	snprintf(e->transition_was, sizeof(e->transition_was), "%s", o->transition);
}

/* The known nodes' labels, copied under the cache's read lock (nothing else happens there). */
struct node_labels {
	struct labelset *v;
	size_t n, cap;
	int failed;
};

static void copy_labels(void *ctx, const struct cache_node_view *v)
{
	struct node_labels *nl = ctx;

	if (!v->known || nl->failed)
		return;
	if (nl->n == nl->cap) {
		size_t cap = nl->cap ? nl->cap * 2 : 64;
		struct labelset *p = realloc(nl->v, cap * sizeof(*p));
		if (p == NULL) {
			nl->failed = 1;
			return;
		}
		nl->v = p;
		nl->cap = cap;
	}
	memset(&nl->v[nl->n], 0, sizeof(nl->v[nl->n]));
	if (labelset_copy_pairs(&nl->v[nl->n], v->labels) != 0)
		nl->failed = 1;
	else
		nl->n++;
}

/* Count the nodes each valid policy of the snapshot selects: the nodes' labels are copied out
 * of the cache first, then matched against the policies' published generation (policies.h: a
 * reference, no lock). Out of memory: no node counted this round (status.nodes 0 until the next).
 */
static void count_nodes(struct policystatus *s)
{
	struct node_labels nl = {0};
	struct policystatus_entry key, *e;

	cache_each_gpu_node(s->cache, copy_labels, &nl);
	if (!nl.failed) {
		const struct policies_gen *gen = policies_acquire(s->policies);
		for (size_t k = 0; k < nl.n; k++) {
			size_t n =
			    policies_gen_selecting_all(gen, &nl.v[k].l, s->selecting, POLICIES_MAX);
			for (size_t i = 0; i < n; i++) {
				snprintf(key.name, sizeof(key.name), "%s", s->selecting[i]->name);
				e = bsearch(&key, s->snap, s->n_snap, sizeof(*s->snap), by_name);
				if (e != NULL && e->valid)
					e->nodes++;
			}
		}
		policies_release(gen);
	}
	for (size_t k = 0; k < nl.n; k++)
		labelset_clear(&nl.v[k]);
	free(nl.v);
}

/* Copy every policy and count the nodes each selects. */
static void snapshot(struct policystatus *s)
{
	s->n_snap = 0;
	if (!policies_synced(s->policies))
		return;
	policies_each(s->policies, snap_one, s);
	qsort(s->snap, s->n_snap, sizeof(*s->snap), by_name);
	if (s->n_snap > 0)
		count_nodes(s);
}

static void forget_written(struct policystatus *s)
{
	for (size_t i = 0; i < s->n_written; i++)
		free(s->written[i].text);
	s->n_written = 0;
}

/*
 * The labels of the Lease: the reservation records' app.kubernetes.io/managed-by (record.c), so
 * the documented cleanup (`kubectl delete leases -l app.kubernetes.io/managed-by=
 * gpu-memory-guard`, docs/install.md) removes it with them, and the chart's
 * app.kubernetes.io/part-of. Set on every write, so a Lease an older version created without
 * them gets them at its next renewal; other labels are kept.
 */
static int set_labels(cJSON *o)
{
	static const char *const kv[][2] = {{"app.kubernetes.io/managed-by", "gpu-memory-guard"},
	                                    {"app.kubernetes.io/part-of", "gpu-memory-guard"}};
	cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata"), *labels;

	if (!cJSON_IsObject(md))
		return -1;
	labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
	if (!cJSON_IsObject(labels)) {
		cJSON_DeleteItemFromObjectCaseSensitive(md, "labels");
		if ((labels = cJSON_AddObjectToObject(md, "labels")) == NULL)
			return -1;
	}
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
		cJSON_DeleteItemFromObjectCaseSensitive(labels, kv[i][0]);
		if (cJSON_AddStringToObject(labels, kv[i][0], kv[i][1]) == NULL)
			return -1;
	}
	return 0;
}

/* The Lease to create (base NULL) or to PUT (base: the one read, its resourceVersion kept as
 * the precondition), labelled (set_labels). Caller owns it. */
static cJSON *lease_body(struct policystatus *s, const cJSON *base, int takeover)
{
	char now[64];
	struct timeval tv;
	struct tm tm;
	time_t t;
	cJSON *o = base != NULL ? cJSON_Duplicate(base, 1) : cJSON_CreateObject(), *md, *spec;
	const cJSON *acq = json_at(base, "spec", "acquireTime", NULL);
	const cJSON *tr = json_at(base, "spec", "leaseTransitions", NULL);
	double transitions = cJSON_IsNumber(tr) ? tr->valuedouble : 0;

	gettimeofday(&tv, NULL);
	t = tv.tv_sec;
	gmtime_r(&t, &tm);
	strftime(now, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(now + strlen(now), sizeof(now) - strlen(now), ".%06ldZ", (long)tv.tv_usec);
	if (o == NULL)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(o, "spec");
	if (base == NULL) {
		if (cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1") == NULL ||
		    cJSON_AddStringToObject(o, "kind", "Lease") == NULL ||
		    (md = cJSON_AddObjectToObject(o, "metadata")) == NULL ||
		    cJSON_AddStringToObject(md, "name", POLICYSTATUS_LEASE_NAME) == NULL ||
		    cJSON_AddStringToObject(md, "namespace", s->ns) == NULL)
			goto err;
	}
	if (set_labels(o) < 0 || (spec = cJSON_AddObjectToObject(o, "spec")) == NULL ||
	    cJSON_AddStringToObject(spec, "holderIdentity", s->identity) == NULL ||
	    cJSON_AddNumberToObject(spec, "leaseDurationSeconds", POLICYSTATUS_LEASE_S) == NULL ||
	    cJSON_AddStringToObject(spec, "acquireTime",
	                            !takeover && base != NULL && cJSON_IsString(acq)
	                                ? acq->valuestring
	                                : now) == NULL ||
	    cJSON_AddStringToObject(spec, "renewTime", now) == NULL ||
	    cJSON_AddNumberToObject(spec, "leaseTransitions", transitions + (takeover ? 1 : 0)) ==
	        NULL)
		goto err;
	return o;
err:
	cJSON_Delete(o);
	return NULL;
}

/* Read the Lease, decide, write. Returns 1 when this replica holds it now, else 0. */
static int elect(struct policystatus *s)
{
	char err[512];
	cJSON *cur = NULL, *body = NULL, *out = NULL;
	long code = 0;
	int rc, held = 0;
	enum policystatus_action act;

	rc = kube_get_lease(s->kube, s->ns, POLICYSTATUS_LEASE_NAME, &cur, &code, err, sizeof(err));
	if (rc != 0 && rc != KUBE_ENOTFOUND) {
		warn_limited(s, "policy status: cannot read the leader Lease", "", err);
		goto out;
	}
	policystatus_observe(&s->lease, cur, monotime_s());
	act = policystatus_decide(&s->lease, monotime_s(), s->identity);
	if (act == POLICYSTATUS_WAIT)
		goto out;
	if ((body = lease_body(s, cur, act == POLICYSTATUS_TAKEOVER)) == NULL)
		goto out;
	rc = act == POLICYSTATUS_CREATE
	         ? kube_create_lease(s->kube, s->ns, body, &out, &code, err, sizeof(err))
	         : kube_update_lease(s->kube, s->ns, POLICYSTATUS_LEASE_NAME, body, &out, &code,
	                             err, sizeof(err));
	if (rc == KUBE_ECONFLICT) /* another replica wrote first: follow it */
		goto out;
	if (rc != 0) {
		warn_limited(s, "policy status: cannot write the leader Lease", "", err);
		goto out;
	}
	policystatus_observe(&s->lease, out, monotime_s());
	held = 1;
	if (act != POLICYSTATUS_RENEW)
		log_fields(LOG_INFO, "policy status: this replica writes GPUMemoryPolicy status",
		           (struct log_field[]){LOG_STR("identity", s->identity),
		                                LOG_STR("lease", POLICYSTATUS_LEASE_NAME),
		                                LOG_STR("namespace", s->ns), LOG_END});
out:
	cJSON_Delete(cur);
	cJSON_Delete(body);
	cJSON_Delete(out);
	return held;
}

static struct written *find_written(struct policystatus *s, const char *name)
{
	for (size_t i = 0; i < s->n_written; i++)
		if (strcmp(s->written[i].name, name) == 0)
			return &s->written[i];
	return NULL;
}

/* A refusal every policy would get alike: no answer, unauthorized, forbidden (the status
 * RBAC missing), throttled, a server error. The round stops there. */
static int refused_for_all(int rc, long code)
{
	return rc == KUBE_ETRANSPORT || rc == KUBE_ETIMEOUT ||
	       (rc == KUBE_EHTTP && (code == 401 || code == 403 || code == 429 || code >= 500));
}

/* Write e's status when it differs from the last written. Returns 1 when the write was
 * refused in a way every other policy's would be too (refused_for_all), else 0. */
static int write_one(struct policystatus *s, const struct policystatus_entry *e)
{
	struct written *w = find_written(s, e->name);
	char transition[POLICYSTATUS_TIME_MAX], err[512];
	cJSON *patch = NULL;
	char *text = NULL;
	long code = 0;
	int rc, all = 0;

	if (w != NULL) {
		w->seen = 1;
		if (strcmp(w->uid, e->uid) !=
		    0) { /* another object of that name: not written yet */
			free(w->text);
			w->text = NULL;
			w->valid = -1;
		}
	}
	if (w != NULL && w->valid == e->valid)
		snprintf(transition, sizeof(transition), "%s", w->transition);
	else if ((w == NULL || w->valid == -1) && e->transition_was[0] != '\0' &&
	         strcmp(e->ready_was, e->valid ? "True" : "False") == 0)
		/* not written by this replica yet (a new leader): the object's own, when its
		 * status is the same */
		snprintf(transition, sizeof(transition), "%s", e->transition_was);
	else
		policystatus_rfc3339((long long)time(NULL), transition, sizeof(transition));
	if ((patch = policystatus_patch(e, transition)) == NULL ||
	    (text = cJSON_PrintUnformatted(patch)) == NULL)
		goto out;
	if (w != NULL && w->text != NULL && strcmp(w->text, text) == 0)
		goto out;
	rc = kube_patch_status(s->kube, POLICYSTATUS_RESOURCE, e->name, patch, &code, err,
	                       sizeof(err));
	if (rc != 0) {
		if (rc != KUBE_ENOTFOUND) /* deleted meanwhile: its DELETED event follows */
			warn_limited(s, "policy status: cannot write a policy's status", e->name,
			             err);
		all = refused_for_all(rc, code);
		goto out;
	}
	if (w == NULL) {
		if (s->n_written >= POLICIES_MAX)
			goto out;
		w = &s->written[s->n_written++];
		memset(w, 0, sizeof(*w));
		snprintf(w->name, sizeof(w->name), "%s", e->name);
		w->seen = 1;
	}
	free(w->text);
	w->text = text;
	text = NULL;
	w->valid = e->valid;
	snprintf(w->uid, sizeof(w->uid), "%s", e->uid);
	snprintf(w->transition, sizeof(w->transition), "%s", transition);
	log_fields(LOG_DEBUG, "policy status written",
	           (struct log_field[]){LOG_STR("policy", e->name), LOG_END});
out:
	cJSON_Delete(patch);
	free(text);
	return all;
}

/* Drop what was written to policies no longer in the store. */
static void prune_written(struct policystatus *s)
{
	size_t j = 0;
	for (size_t i = 0; i < s->n_written; i++) {
		if (!s->written[i].seen) {
			free(s->written[i].text);
			continue;
		}
		s->written[i].seen = 0;
		s->written[j++] = s->written[i];
	}
	s->n_written = j;
}

static void round_once(struct policystatus *s)
{
	int held = 0;

	snapshot(s);
	/* Nothing to write: no Lease traffic (and leadership lapses). */
	if (s->n_snap > 0)
		held = s->single_writer ? 1 : elect(s);
	if (!held && atomic_load(&s->leader))
		log_fields(LOG_INFO, "policy status: this replica no longer writes status",
		           (struct log_field[]){LOG_STR("identity", s->identity), LOG_END});
	atomic_store(&s->leader, held);
	if (!held) {
		forget_written(s); /* another replica may write meanwhile */
		return;
	}
	/* After a refusal every policy would get, the rest wait for the next round (kept as
	 * seen): not one failing PATCH per policy every round. */
	int stopped = 0;
	for (size_t i = 0; i < s->n_snap; i++) {
		struct written *w;
		if (!stopped)
			stopped = write_one(s, &s->snap[i]);
		else if ((w = find_written(s, s->snap[i].name)) != NULL)
			w->seen = 1;
	}
	prune_written(s);
}

static void *run(void *arg)
{
	struct policystatus *s = arg;
	struct timespec until;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		int stop = s->stop;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			break;
		round_once(s);
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += s->period_ms / 1000;
		until.tv_nsec += (long)(s->period_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&s->mu);
		while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

struct policystatus *policystatus_new(const struct policystatus_config *cfg)
{
	struct policystatus *s = NULL;
	pthread_condattr_t ca;

	if (cfg == NULL || cfg->kube == NULL || cfg->cache == NULL || cfg->policies == NULL ||
	    (!cfg->single_writer &&
	     (cfg->ns == NULL || cfg->ns[0] == '\0' || strlen(cfg->ns) >= NS_MAX))) {
		log_msg(LOG_ERROR,
		        "policy status: a client, the cache, the policies and a namespace "
		        "are needed");
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->kube = cfg->kube;
	s->cache = cfg->cache;
	s->policies = cfg->policies;
	s->period_ms = cfg->period_ms ? cfg->period_ms : POLICYSTATUS_PERIOD_S * 1000u;
	s->single_writer = cfg->single_writer;
	snprintf(s->ns, sizeof(s->ns), "%s", cfg->ns != NULL ? cfg->ns : "");
	if (cfg->identity != NULL)
		snprintf(s->identity, sizeof(s->identity), "%s", cfg->identity);
	else
		policystatus_identity(s->identity, sizeof(s->identity));
	atomic_init(&s->leader, 0);
	s->snap = calloc(POLICIES_MAX, sizeof(*s->snap));
	s->selecting = calloc(POLICIES_MAX, sizeof(*s->selecting));
	s->written = calloc(POLICIES_MAX, sizeof(*s->written));
	if (s->snap == NULL || s->selecting == NULL || s->written == NULL)
		goto err;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	return s;
err:
	free(s->snap);
	free(s->selecting);
	free(s->written);
	free(s);
	return NULL;
}

int policystatus_start(struct policystatus *s)
{
	if (s == NULL || s->started)
		return -1;
	if (pthread_create(&s->thread, NULL, run, s) != 0) {
		log_msg(LOG_ERROR, "policy status: cannot start its thread");
		return -1;
	}
	s->started = 1;
	if (s->single_writer)
		log_msg(LOG_INFO, "policy status writer started (single replica: no Lease)");
	else
		log_fields(LOG_INFO, "policy status writer started",
		           (struct log_field[]){LOG_STR("identity", s->identity),
		                                LOG_STR("lease", POLICYSTATUS_LEASE_NAME),
		                                LOG_STR("namespace", s->ns), LOG_END});
	return 0;
}

void policystatus_free(struct policystatus *s)
{
	if (s == NULL)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->mu);
		s->stop = 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
	}
	forget_written(s);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->snap);
	free(s->selecting);
	free(s->written);
	free(s);
}

int policystatus_leader(struct policystatus *s)
{
	return s != NULL && atomic_load(&s->leader);
}

void policystatus_collect(void *ctx, struct metrics_writer *w)
{
	metrics_printf(
	    w,
	    "# HELP gpu_memory_guard_policy_status_leader 1 while this replica holds the "
	    "Lease " POLICYSTATUS_LEASE_NAME " and writes GPUMemoryPolicy status.\n"
	    "# TYPE gpu_memory_guard_policy_status_leader gauge\n"
	    "gpu_memory_guard_policy_status_leader %d\n",
	    policystatus_leader(ctx));
}
