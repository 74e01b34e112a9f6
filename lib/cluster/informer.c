/*
 * informer: LIST then WATCH into the cache, one thread per kind. See informer.h.
 */
#include "informer.h"

#include "core.h"
#include "policies.h"

#include "cache.h"
#include "drastore.h"
#include "kube.h"
#include "ledger.h"
#include "log.h"
#include "memlimit.h"
#include "metrics.h"
#include "monotime.h"
#include "quantity.h"
#include "satmath.h"
#include "view.h"
#include "watch.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define RV_MAX 128

struct informer;

struct kind {
	struct informer *inf;
	enum cache_kind which;
	int policies;              /* 1: GPUMemoryPolicy objects into cfg.policies (which unused) */
	int dra;                   /* 1: ResourceSlices, 2: ResourceClaims into cfg.dra */
	int absent, absent_logged; /* DRA: the API group is not served (404) */
	const char *resource;      /* "pods" / "nodes" */
	pthread_t thread;
	int started;
	/* Under inf->mu: */
	int synced, in_watch, watch_event, watch_opened, store_failed;
	int list_failed; /* an object of the LIST in progress could not be stored */
	int gone;        /* the watch ended in 410 Gone: the next LIST waits a jittered delay */
	int requested;   /* pods: the watch ended because a relist was asked (pods_relist) */
	size_t listed, last_listed; /* objects of the LIST in progress, of the last complete one */
	double broken_since, watch_started, last_event;
	uint64_t progress_ms; /* when the API server last spoke on this kind (event, bookmark,
	                         open, list done), monotime_ms() */
	unsigned long relists, watch_restarts, events[5];
	char last_error[256];
	/* pods: set to end the watch and relist (pods_relist), and by informer_free; the
	 * pods' watch polls it instead of inf->stop */
	_Atomic int halt;
	/* The thread's own: */
	char rv[RV_MAX];
	unsigned seed;
};

struct informer {
	struct kube_client *kc;
	struct cache *cache;
	struct informer_config cfg;
	pthread_mutex_t mu;
	pthread_cond_t wake; /* stop */
	_Atomic int stop;    /* set by informer_free, read by the threads and their transfers */
	struct kind pods, nodes;
	struct kind pols;           /* GPUMemoryPolicy objects, when cfg.policies */
	struct kind slices, claims; /* DRA, when cfg.dra */
};

static void set_error(struct kind *k, const char *what, int rc, const char *err)
{
	pthread_mutex_lock(&k->inf->mu);
	snprintf(k->last_error, sizeof(k->last_error), "%s %s: %s", what, k->resource,
	         err[0] ? err : kube_strerror(rc));
	if (k->broken_since == 0)
		k->broken_since = monotime_s();
	pthread_mutex_unlock(&k->inf->mu);
	log_fields(LOG_WARN, "cache: API server call failed",
	           (struct log_field[]){LOG_STR("resource", k->resource), LOG_STR("call", what),
	                                LOG_STR("error", err[0] ? err : kube_strerror(rc)),
	                                LOG_END});
}

/* Sleep ms, or less when stopped. 1 when stopped. On CLOCK_MONOTONIC (inf->wake's clock): a
 * wall clock stepped meanwhile (NTP correcting a wrong one) neither shortens nor stretches it. */
static int nap(struct informer *inf, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&inf->mu);
	while (!inf->stop && pthread_cond_timedwait(&inf->wake, &inf->mu, &ts) != ETIMEDOUT)
		;
	int stopped = inf->stop;
	pthread_mutex_unlock(&inf->mu);
	return stopped;
}

/* Capped exponential backoff with jitter: a draw from [d/2, d], d = min * 2^fails <= max. */
static int backoff(struct kind *k, unsigned fails)
{
	unsigned d = INFORMER_BACKOFF_MIN_MS;
	for (unsigned i = 0; i < fails && d < INFORMER_BACKOFF_MAX_MS; i++)
		d *= 2;
	if (d > INFORMER_BACKOFF_MAX_MS)
		d = INFORMER_BACKOFF_MAX_MS;
	return nap(k->inf, d / 2 + (unsigned)rand_r(&k->seed) % (d / 2 + 1));
}

_Static_assert(POLICIES_NEED_LABELS == CACHE_ATTR_LABELS &&
                   POLICIES_NEED_PRIORITY == CACHE_ATTR_PRIORITY,
               "the policies' needs are passed to cache_set_pod_attrs as they are");

/* Bound GPU pods read while the policies wanted less lack tier attributes (cache.h, "Tier
 * attributes"): end the pods' watch and LIST them again. */
static void pods_relist(struct informer *inf, size_t lacking)
{
	if (lacking == 0)
		return;
	inf->pods.halt = 1;
	log_fields(LOG_INFO,
	           "cache: relisting pods: a GPUMemoryPolicy tier selects by pod "
	           "attributes the cache did not keep",
	           (struct log_field[]){LOG_INT("pods_lacking", (long long)lacking), LOG_END});
}

/* The tier attributes the cache keeps, from the policies. Grown from an object before it is
 * applied (a reader that sees the policy finds the cache ready for it: items of pods that lack
 * them count in every tier); settled from the whole store after (kinds no longer wanted are
 * freed), once the store is synced (before that CACHE_ATTRS_ALL stays). */
static void attrs_grow(struct informer *inf, const cJSON *obj)
{
	unsigned want = cache_pod_attrs_wanted(inf->cache) | policies_pod_attrs_of(obj);
	pods_relist(inf, cache_set_pod_attrs(inf->cache, want));
}

static void attrs_settle(struct informer *inf)
{
	if (policies_synced(inf->cfg.policies))
		pods_relist(inf,
		            cache_set_pod_attrs(inf->cache, policies_pod_attrs(inf->cfg.policies)));
}

static int apply(struct kind *k, enum watch_event_type type, const cJSON *obj)
{
	int rc;

	if (k->policies) {
		if (type == WATCH_ADDED || type == WATCH_MODIFIED)
			attrs_grow(k->inf, obj);
		rc = policies_apply(k->inf->cfg.policies, type, obj);
		attrs_settle(k->inf); /* e.g. an object that asked but did not parse: none */
		rc = rc == POLICIES_EFULL ? CACHE_EFULL : rc == POLICIES_ENOMEM ? CACHE_ENOMEM : rc;
	} else if (k->dra) {
		char err[DRA_MSG_MAX] = "";
		rc = k->dra == 1
		         ? dra_store_apply_slice(k->inf->cfg.dra, type, obj, err, sizeof(err))
		         : dra_store_apply_claim(k->inf->cfg.dra, type, obj, err, sizeof(err));
		if (rc == DRA_STORE_EINVAL) {
			/* An object the decoder refuses (err says which field) would come back on
			 * every relist: logged and skipped (its previous version, if any, stays).
			 */
			if (type != WATCH_DELETED)
				log_fields(LOG_WARN, "cache: DRA object not read",
				           (struct log_field[]){LOG_STR("resource", k->resource),
				                                LOG_STR("error", err), LOG_END});
			return 0;
		}
		rc = rc == DRA_STORE_EFULL    ? CACHE_EFULL
		     : rc == DRA_STORE_ENOMEM ? CACHE_ENOMEM
		                              : rc;
	} else {
		rc = k->which == CACHE_PODS ? cache_apply_pod(k->inf->cache, type, obj)
		                            : cache_apply_node(k->inf->cache, type, obj);
	}
	if (rc != 0 && type != WATCH_DELETED) {
		/* The cache no longer holds everything (out of memory, full, or an object it cannot
		 * key: no name, an over-long uid; a real API server sends none): it must not decide
		 * until a relist stored it all (placements take the API path meanwhile). */
		pthread_mutex_lock(&k->inf->mu);
		k->store_failed = 1;
		k->list_failed = 1;
		pthread_mutex_unlock(&k->inf->mu);
	}
	if (rc != 0 && type != WATCH_DELETED)
		log_fields(
		    LOG_ERROR, "cache: object not stored",
		    (struct log_field[]){LOG_STR("resource", k->resource),
		                         LOG_STR("error", rc == CACHE_EFULL    ? "cache full"
		                                          : rc == CACHE_ENOMEM ? "out of memory"
		                                                               : "unusable object"),
		                         LOG_END});
	return rc;
}

static int on_listed(void *ctx, const cJSON *item)
{
	struct kind *k = ctx;
	k->listed++;
	(void)apply(k, WATCH_ADDED, item); /* a refusal marks the store (apply) */
	return k->inf->stop;               /* shutdown does not wait for a long LIST */
}

static int on_event(void *ctx, enum watch_event_type type, const cJSON *obj)
{
	struct kind *k = ctx;
	const char *rv = NULL;

	if (type == WATCH_OPENED) {
		pthread_mutex_lock(&k->inf->mu);
		k->watch_opened = 1; /* no progress yet: the events since k->rv are still to come */
		k->broken_since = 0;
		pthread_mutex_unlock(&k->inf->mu);
		return k->inf->stop;
	}
	if (type != WATCH_ERROR) {
		rv = watch_resource_version(obj);
		if (type != WATCH_BOOKMARK && apply(k, type, obj) != 0 && type != WATCH_DELETED)
			return 1; /* the store lost an object: end the watch and relist now */
		if (rv != NULL && strlen(rv) < sizeof(k->rv))
			memcpy(k->rv, rv, strlen(rv) + 1);
	}
	pthread_mutex_lock(&k->inf->mu);
	if (type >= WATCH_ADDED && type <= WATCH_ERROR)
		k->events[type - WATCH_ADDED]++;
	k->last_event = monotime_s();
	if (type != WATCH_ERROR) {
		k->watch_event = 1;
		k->broken_since = 0;
		k->progress_ms = monotime_ms();
	}
	pthread_mutex_unlock(&k->inf->mu);
	return k->inf->stop;
}

/* 1 when the cache's bytes are above the warning's share of limit (0: no limit). */
static int over_limit(const struct informer *inf, const struct cache_stats *cs, uint64_t limit)
{
	double r =
	    inf->cfg.memory_warn_ratio > 0 ? inf->cfg.memory_warn_ratio : MEMLIMIT_WARN_RATIO;
	return limit > 0 && (double)cs->bytes > r * (double)limit;
}

/* LIST into the cache. 0, or a KUBE_E* code (already logged). */
static int relist(struct kind *k)
{
	char err[512] = "";
	long code = 0;

	/* store_failed stays set while the LIST runs: the object the store lost is not back
	 * until the list shows it, and a slow LIST must not let the cache decide without it.
	 * Only a complete list that stored every object clears it. */
	pthread_mutex_lock(&k->inf->mu);
	k->list_failed = 0;
	pthread_mutex_unlock(&k->inf->mu);
	if (k == &k->inf->pods && !k->inf->stop)
		k->halt = 0; /* this LIST reads every pod with what the cache wants now */
	if (k->policies)
		policies_resync_begin(k->inf->cfg.policies);
	else if (k->dra)
		dra_store_resync_begin(k->inf->cfg.dra,
		                       k->dra == 1 ? DRA_STORE_SLICES : DRA_STORE_CLAIMS);
	else
		cache_resync_begin(k->inf->cache, k->which);
	/* Until the stop flag: SIGTERM must not wait up to --api-timeout for a slow page. */
	int rc = kube_list_all_until(k->inf->kc, k->resource, k->inf->cfg.page_limit, on_listed, k,
	                             k->rv, sizeof(k->rv), &code, &k->inf->stop, err, sizeof(err));
	if (rc == KUBE_ENOTFOUND && k->policies) {
		/* The CRD is not installed: no policy can exist. Synced and empty; the LIST is
		 * retried (run()), so a CRD installed later is read. */
		policies_crd_missing(k->inf->cfg.policies);
		attrs_settle(k->inf);
		set_error(k, "LIST", rc, "the GPUMemoryPolicy CRD is not installed (404)");
		pthread_mutex_lock(&k->inf->mu);
		k->synced = 1;
		pthread_mutex_unlock(&k->inf->mu);
		return rc;
	}
	if (rc == KUBE_ENOTFOUND && k->dra) {
		/* resource.k8s.io/v1 is not served (a cluster before 1.34, or DRA off): nothing
		 * to count. Logged once; the LIST is tried again, slowly and quietly (run()). */
		dra_store_absent(k->inf->cfg.dra,
		                 k->dra == 1 ? DRA_STORE_SLICES : DRA_STORE_CLAIMS);
		pthread_mutex_lock(&k->inf->mu);
		k->synced = 1;
		k->absent = 1;
		snprintf(k->last_error, sizeof(k->last_error),
		         "LIST %s: not served (404): DRA not read", k->resource);
		int logged = k->absent_logged;
		k->absent_logged = 1;
		pthread_mutex_unlock(&k->inf->mu);
		if (!logged)
			log_fields(LOG_INFO, "cache: DRA API not served, DRA allocations not read",
			           (struct log_field[]){LOG_STR("resource", k->resource), LOG_END});
		return rc;
	}
	if (rc != 0) {
		if (rc != KUBE_ESTOP || !k->inf->stop)
			set_error(k, "LIST", rc, err);
		return rc;
	}
	size_t removed = 0;
	if (k->dra) {
		pthread_mutex_lock(&k->inf->mu);
		k->absent = 0;
		pthread_mutex_unlock(&k->inf->mu);
	}
#ifdef __GLIBC__
	/* A LIST parses thousands of pages and frees each: glibc keeps those pages resident
	 * between the cache's records. Handing them back once per LIST (a rare event) costs a
	 * walk of the heap and keeps RSS near the cache's own bytes (docs/benchmark.md). One
	 * informer thread at a time: under AddressSanitizer glibc's allocator is never used, so
	 * the first malloc_trim initialises it, and two first calls at once (the pods' and the
	 * nodes' LISTs) crashed in mtrim (SEGV at 0x8, integ_shared_reservations, make asan). */
	static pthread_mutex_t trim_mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&trim_mu);
	malloc_trim(0);
	pthread_mutex_unlock(&trim_mu);
#endif
	if (k->policies) {
		pthread_mutex_lock(&k->inf->mu);
		int complete = !k->list_failed; /* apply() stored every listed object */
		pthread_mutex_unlock(&k->inf->mu);
		policies_resync_end(k->inf->cfg.policies, complete);
		attrs_settle(k->inf);
	} else if (k->dra)
		removed = dra_store_resync_end(k->inf->cfg.dra,
		                               k->dra == 1 ? DRA_STORE_SLICES : DRA_STORE_CLAIMS);
	else
		removed = cache_resync_end(k->inf->cache, k->which);
	pthread_mutex_lock(&k->inf->mu);
	if (k->synced)
		k->relists++;
	k->synced = 1;
	k->store_failed = k->list_failed;
	k->last_listed = k->listed;
	k->progress_ms = monotime_ms();
	pthread_mutex_unlock(&k->inf->mu);
	if (!k->policies && k->which == CACHE_PODS) {
		struct cache_stats cs;
		uint64_t lim = k->inf->cfg.memory_limit_bytes;
		cache_stats(k->inf->cache, &cs);
		/* The cache's bytes against the limit: an operator sees how far the next growth
		 * can go before the OOM killer (docs/install.md, "Sizing"). */
		log_fields(
		    over_limit(k->inf, &cs, lim) ? LOG_WARN : LOG_INFO, "cache: listed",
		    (struct log_field[]){
		        LOG_STR("resource", k->resource), LOG_STR("resource_version", k->rv),
		        LOG_INT("removed", (long long)removed), LOG_INT("pods", (long long)cs.pods),
		        LOG_INT("cache_bytes", (long long)cs.bytes),
		        LOG_INT("memory_limit_bytes", (long long)lim),
		        LOG_INT("percent_of_limit",
		                lim ? (long long)((double)cs.bytes * 100.0 / (double)lim) : -1),
		        LOG_END});
		return 0;
	}
	log_fields(LOG_INFO, "cache: listed",
	           (struct log_field[]){LOG_STR("resource", k->resource),
	                                LOG_STR("resource_version", k->rv),
	                                LOG_INT("removed", (long long)removed), LOG_END});
	return 0;
}

/* The pods' watch ends for pods_relist: no event reaches the cache until the next watch is
 * open, as after a 410 (broken from now: --cache-max-staleness bounds it). Returns 1. */
static int relist_asked(struct kind *k)
{
	pthread_mutex_lock(&k->inf->mu);
	k->requested = 1;
	if (k->broken_since == 0)
		k->broken_since = monotime_s();
	snprintf(k->last_error, sizeof(k->last_error),
	         "WATCH %s: ended to relist: a GPUMemoryPolicy tier selects by pod attributes the "
	         "cache did not keep",
	         k->resource);
	pthread_mutex_unlock(&k->inf->mu);
	return 1;
}

/* WATCH from k->rv until it must relist (returns 1) or the informer stops (returns 0). */
static int watch_loop(struct kind *k)
{
	unsigned fails = 0, decode_errors = 0;

	while (!k->inf->stop) {
		char err[512] = "";
		long code = 0;
		/* DRA's watches are often silent (no object changes, and kube-apiserver v1.37 sent
		 * them no bookmark in e2e test 12): a shorter one ends cleanly before an open watch
		 * silent for INFORMER_SILENCE_S counts as broken and DRANotRead refuses placements.
		 */
		long timeout = k->dra ? INFORMER_DRA_WATCH_TIMEOUT + rand_r(&k->seed) % 11
		                      : INFORMER_WATCH_TIMEOUT + rand_r(&k->seed) % 61;

		if (k->halt && !k->inf->stop)
			return relist_asked(k);
		pthread_mutex_lock(&k->inf->mu);
		k->in_watch = 1;
		k->watch_event = 0;
		k->watch_opened = 0;
		k->watch_started = monotime_s();
		pthread_mutex_unlock(&k->inf->mu);
		int rc = kube_watch(k->inf->kc, k->resource, k->rv, timeout, on_event, k,
		                    k == &k->inf->pods ? &k->halt : &k->inf->stop, &code, err,
		                    sizeof(err));
		pthread_mutex_lock(&k->inf->mu);
		k->in_watch = 0;
		int had_events = k->watch_event, store_failed = k->store_failed;
		/* Open a while, quiet or not (a resource the API server sends no bookmark for):
		 * healthy, not a tight loop; its end restarts the backoff */
		int lived =
		    k->watch_opened && monotime_s() - k->watch_started >= INFORMER_WATCH_LIVED_S;
		/* Ended normally (timeoutSeconds, a proxy, a restarting server): no event reaches
		 * the cache until the next watch is open, and reopening may hang (an API server
		 * that does not answer) or wait for a backoff. Broken from now, so that
		 * --cache-max-staleness bounds that too; the new watch's answer clears it. */
		if (rc == 0 && k->broken_since == 0) {
			k->broken_since = monotime_s();
			snprintf(k->last_error, sizeof(k->last_error),
			         "WATCH %s: the stream ended; reopening", k->resource);
		}
		pthread_mutex_unlock(&k->inf->mu);
		if (had_events || lived)
			fails = 0;
		if (store_failed)
			return 1; /* relist: the store lost an object */
		if (rc == 0) {    /* the server ended it (timeoutSeconds): resume */
			if (!had_events && backoff(k, fails++))
				return 0; /* ... but not in a tight loop when it ends at once */
			continue;
		}
		if (rc == KUBE_ESTOP && k->inf->stop)
			return 0;
		if (rc == KUBE_ESTOP && k->halt)
			return relist_asked(k);
		pthread_mutex_lock(&k->inf->mu);
		k->watch_restarts++;
		pthread_mutex_unlock(&k->inf->mu);
		set_error(k, "WATCH", rc, err);
		if (rc == KUBE_EGONE) {
			k->gone = 1;
			return 1;
		}
		/* An event it cannot read will come again from the same version: relist. */
		if ((rc == KUBE_EPARSE || rc == KUBE_ETOOBIG) && ++decode_errors >= 3)
			return 1;
		if (backoff(k, fails++))
			return 0;
	}
	return 0;
}

unsigned informer_relist_jitter_ms(size_t last_listed, unsigned *seed)
{
	size_t d = last_listed / INFORMER_RELIST_JITTER_PER_MS;
	if (d > INFORMER_RELIST_JITTER_MS)
		d = INFORMER_RELIST_JITTER_MS;
	return (unsigned)rand_r(seed) % (unsigned)(d + 1);
}

static unsigned relist_jitter_ms(struct kind *k)
{
	return informer_relist_jitter_ms(k->last_listed, &k->seed);
}

unsigned informer_jitter_seed(unsigned salt)
{
	/* Replicas restarted together have the same clock and, in containers, the same pid:
	 * the kernel's randomness, else the monotonic clock's nanoseconds, keeps their jitter
	 * apart. */
	unsigned r = 0;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (unsigned)ts.tv_nsec ^ (unsigned)getpid() * 2246822519u;
	return r ^ (unsigned)time(NULL) ^ salt * 2654435761u;
}

static void *run(void *arg)
{
	struct kind *k = arg;
	unsigned fails = 0, gone = 0;

	while (!k->inf->stop) {
		/* After a 410 every replica's watch breaks at once (an API server restart, etcd
		 * compaction): a draw from [0, INFORMER_RELIST_JITTER_MS] spreads their LISTs. */
		if (k->gone && nap(k->inf, relist_jitter_ms(k)))
			break;
		k->gone = 0;
		k->listed = 0;
		if (relist(k) != 0) {
			if (k->absent) { /* not served: look again later, without a warning */
				if (nap(k->inf, INFORMER_DRA_ABSENT_RETRY_S * 1000u))
					break;
				continue;
			}
			if (backoff(k, fails++))
				break;
			continue;
		}
		fails = 0;
		if (!watch_loop(k))
			break;
		if (k->requested) { /* asked for (pods_relist), not the server's doing */
			k->requested = 0;
			/* Every replica reads the same policy event at about the same moment: the
			 * 410's draw spreads their LISTs of a large cluster too (none under 100
			 * pods). Meanwhile the watch counts as broken (relist_asked): placements
			 * take the API path, as they would while the LIST runs. */
			if (nap(k->inf, relist_jitter_ms(k)))
				break;
			continue;
		}
		/* 410 again and again (a server that cannot keep up): relist with backoff, not in
		 * a tight loop. A watch that delivered events first resets the streak. */
		pthread_mutex_lock(&k->inf->mu);
		gone = k->watch_event ? 0 : gone + 1;
		pthread_mutex_unlock(&k->inf->mu);
		if (gone > 1 && backoff(k, gone - 2))
			break;
	}
	return NULL;
}

static void kind_init(struct informer *inf, struct kind *k, enum cache_kind which,
                      const char *resource)
{
	k->inf = inf;
	k->which = which;
	k->resource = resource;
	k->seed = informer_jitter_seed((unsigned)(which + 1));
}

struct informer *informer_new(struct kube_client *kc, struct cache *cache,
                              const struct informer_config *cfg)
{
	struct informer *inf;

	if (kc == NULL || cache == NULL || cfg == NULL || (inf = calloc(1, sizeof(*inf))) == NULL)
		return NULL;
	inf->kc = kc;
	inf->cache = cache;
	inf->cfg = *cfg;
	pthread_mutex_init(&inf->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&inf->wake, &ca);
	pthread_condattr_destroy(&ca);
	kind_init(inf, &inf->pods, CACHE_PODS, "pods");
	kind_init(inf, &inf->nodes, CACHE_NODES, "nodes");
	kind_init(inf, &inf->pols, CACHE_NODES, INFORMER_POLICIES_RESOURCE);
	inf->pols.policies = 1;
	inf->pols.seed ^= 0x9e3779b9u;
	kind_init(inf, &inf->slices, CACHE_NODES, INFORMER_SLICES_RESOURCE);
	inf->slices.dra = 1;
	inf->slices.seed ^= 0x85ebca6bu;
	kind_init(inf, &inf->claims, CACHE_NODES, INFORMER_CLAIMS_RESOURCE);
	inf->claims.dra = 2;
	inf->claims.seed ^= 0xc2b2ae35u;
	if (cfg->policies == NULL) /* no policy, no tier: bound pods keep no tier attributes */
		(void)cache_set_pod_attrs(cache, 0);
	return inf;
}

int informer_start(struct informer *inf)
{
	if (pthread_create(&inf->nodes.thread, NULL, run, &inf->nodes) != 0)
		return -1;
	inf->nodes.started = 1;
	if (pthread_create(&inf->pods.thread, NULL, run, &inf->pods) != 0)
		return -1;
	inf->pods.started = 1;
	if (inf->cfg.policies != NULL) {
		if (pthread_create(&inf->pols.thread, NULL, run, &inf->pols) != 0)
			return -1;
		inf->pols.started = 1;
	}
	if (inf->cfg.dra != NULL) {
		if (pthread_create(&inf->slices.thread, NULL, run, &inf->slices) != 0)
			return -1;
		inf->slices.started = 1;
		if (pthread_create(&inf->claims.thread, NULL, run, &inf->claims) != 0)
			return -1;
		inf->claims.started = 1;
	}
	return 0;
}

void informer_free(struct informer *inf)
{
	if (inf == NULL)
		return;
	pthread_mutex_lock(&inf->mu);
	inf->stop = 1;
	inf->pods.halt = 1;
	pthread_cond_broadcast(&inf->wake);
	pthread_mutex_unlock(&inf->mu);
	if (inf->pods.started)
		pthread_join(inf->pods.thread, NULL);
	if (inf->nodes.started)
		pthread_join(inf->nodes.thread, NULL);
	if (inf->pols.started)
		pthread_join(inf->pols.thread, NULL);
	if (inf->slices.started)
		pthread_join(inf->slices.thread, NULL);
	if (inf->claims.started)
		pthread_join(inf->claims.thread, NULL);
	pthread_cond_destroy(&inf->wake);
	pthread_mutex_destroy(&inf->mu);
	free(inf);
}

/* How long k's watch has been broken at now (0: not broken). Holds inf->mu. */
static double broken_for(const struct informer *inf, const struct kind *k, double now)
{
	(void)inf;
	/* An open watch the API server has not spoken on (not even a bookmark, sent about once
	 * a minute) for INFORMER_SILENCE_S is as good as broken, since its last word. */
	double quiet_since = k->last_event > k->watch_started ? k->last_event : k->watch_started;
	if (k->in_watch && k->watch_opened && now - quiet_since > INFORMER_SILENCE_S)
		return now - quiet_since;
	if (k->in_watch && k->watch_opened)
		return 0; /* reconnected: the new watch's answer arrived */
	if (k->broken_since != 0)
		return now - k->broken_since;
	/* A watch being opened (after a LIST, or resumed) delivers nothing until its answer
	 * arrives, and an API server may never answer: broken since the attempt began, so that
	 * --cache-max-staleness bounds that wait too. */
	if (k->in_watch)
		return now - k->watch_started;
	return 0;
}

int informer_fresh(struct informer *inf, double now_s, double max_staleness_s)
{
	int fresh;

	if (inf == NULL)
		return 0;
	pthread_mutex_lock(&inf->mu);
	fresh = inf->pods.synced && inf->nodes.synced && !inf->pods.store_failed &&
	        !inf->nodes.store_failed && broken_for(inf, &inf->pods, now_s) <= max_staleness_s &&
	        broken_for(inf, &inf->nodes, now_s) <= max_staleness_s;
	pthread_mutex_unlock(&inf->mu);
	return fresh;
}

uint64_t informer_progress_ms(void *ctx)
{
	struct informer *inf = ctx;
	uint64_t p;

	pthread_mutex_lock(&inf->mu);
	p = inf->pods.progress_ms < inf->nodes.progress_ms ? inf->pods.progress_ms
	                                                   : inf->nodes.progress_ms;
	pthread_mutex_unlock(&inf->mu);
	return p;
}

/* One DRA kind may be counted: listed and complete, and watching (broken no longer than the
 * bound), or not served at all (404: nothing to count). Under inf->mu. */
static int dra_kind_fresh(struct informer *inf, const struct kind *k, double now_s, double bound)
{
	return k->synced && !k->store_failed && (k->absent || broken_for(inf, k, now_s) <= bound);
}

int informer_dra_fresh(struct informer *inf, double now_s, double max_staleness_s)
{
	int fresh;

	if (inf == NULL)
		return -1;
	if (inf->cfg.dra == NULL)
		return 1;
	pthread_mutex_lock(&inf->mu);
	const struct kind *k[2] = {&inf->slices, &inf->claims};
	fresh = 1;
	for (int i = 0; i < 2; i++) {
		if (!k[i]->synced || k[i]->store_failed) {
			fresh = -1;
			break;
		}
		if (!dra_kind_fresh(inf, k[i], now_s, max_staleness_s))
			fresh = 0;
	}
	pthread_mutex_unlock(&inf->mu);
	return fresh;
}

int informer_dra_fresh_fn(void *ctx, double now_s)
{
	struct informer *inf = ctx;
	return informer_dra_fresh(inf, now_s, inf->cfg.max_staleness_s);
}

int informer_fresh_fn(void *ctx, double now_s)
{
	struct informer *inf = ctx;
	return informer_fresh(inf, now_s, inf->cfg.max_staleness_s);
}

static void kind_status(const struct informer *inf, const struct kind *k, double now,
                        struct informer_kind_status *s)
{
	s->synced = k->synced;
	s->incomplete = k->store_failed;
	s->watching = k->in_watch;
	s->broken_for_s = broken_for(inf, k, now);
	s->last_event_age = k->last_event > 0 ? now - k->last_event : -1;
	s->relists = k->relists;
	s->watch_restarts = k->watch_restarts;
	memcpy(s->events, k->events, sizeof(s->events));
	memcpy(s->last_error, k->last_error, sizeof(s->last_error));
}

void informer_status(struct informer *inf, struct informer_status *out)
{
	double now = monotime_s();

	memset(out, 0, sizeof(*out));
	if (inf == NULL)
		return;
	pthread_mutex_lock(&inf->mu);
	kind_status(inf, &inf->pods, now, &out->pods);
	kind_status(inf, &inf->nodes, now, &out->nodes);
	kind_status(inf, &inf->pols, now, &out->policies);
	if (inf->cfg.dra != NULL) {
		kind_status(inf, &inf->slices, now, &out->slices);
		kind_status(inf, &inf->claims, now, &out->claims);
	}
	pthread_mutex_unlock(&inf->mu);
}

int informer_ready_gate(void *ctx, char *why, size_t cap)
{
	struct informer *inf = ctx;
	struct informer_status st;

	if (inf == NULL)
		return 1;
	if (inf->cfg.dra != NULL) {
		informer_status(inf, &st);
		const struct informer_kind_status *k =
		    !st.slices.synced || st.slices.incomplete   ? &st.slices
		    : !st.claims.synced || st.claims.incomplete ? &st.claims
		                                                : NULL;
		if (k != NULL) {
			snprintf(why, cap,
			         "DRA %s not read yet: every GPU placement would be refused "
			         "(DRANotRead)%s%.120s",
			         k == &st.slices ? "ResourceSlices" : "ResourceClaims",
			         k->last_error[0] ? ": " : "", k->last_error);
			return 0;
		}
	}
	if (inf->cfg.policies == NULL || policies_synced(inf->cfg.policies))
		return 1;
	informer_status(inf, &st);
	snprintf(why, cap,
	         "GPUMemoryPolicy objects not read yet: every GPU placement would be refused "
	         "(PoliciesNotRead)%s%.120s",
	         st.policies.last_error[0] ? ": " : "", st.policies.last_error);
	return 0;
}

void informer_ready_note(void *ctx, char *buf, size_t cap)
{
	struct informer *inf = ctx;
	struct informer_status st;
	struct cache_stats cs;
	const struct informer_kind_status *bad = NULL;
	const char *which = NULL;

	informer_status(inf, &st);
	cache_stats(inf->cache, &cs);
	if (over_limit(inf, &cs, inf->cfg.memory_limit_bytes)) {
		uint64_t lim = inf->cfg.memory_limit_bytes;
		int n =
		    snprintf(buf, cap,
		             "warning: the watch cache holds %.1f MiB, %.0f%% of the memory "
		             "limit %.1f MiB (%zu pods): raise the limit before the OOM killer "
		             "stops this replica (docs/install.md, Sizing)\n",
		             (double)cs.bytes / 1048576.0, (double)cs.bytes * 100.0 / (double)lim,
		             (double)lim / 1048576.0, cs.pods);
		if (n > 0 && (size_t)n < cap) {
			buf += n;
			cap -= (size_t)n;
		}
	}
	if (!st.pods.synced || !st.nodes.synced) {
		const struct informer_kind_status *k = !st.pods.synced ? &st.pods : &st.nodes;
		snprintf(buf, cap, "cache: syncing %s (placements read the API server)%s%s",
		         !st.pods.synced ? "pods" : "nodes", k->last_error[0] ? ": " : "",
		         k->last_error);
		return;
	}
	if (st.pods.incomplete || st.nodes.incomplete) {
		snprintf(
		    buf, cap,
		    "cache: incomplete, relisting %s (an object could not be stored; placements "
		    "read the API server)",
		    st.pods.incomplete ? "pods" : "nodes");
		return;
	}
	if (st.pods.broken_for_s > 0)
		bad = &st.pods, which = "pods";
	else if (st.nodes.broken_for_s > 0)
		bad = &st.nodes, which = "nodes";
	if (bad != NULL) {
		snprintf(buf, cap, "cache: %s watch broken for %.1fs%s: %s", which,
		         bad->broken_for_s,
		         bad->broken_for_s > inf->cfg.max_staleness_s
		             ? " (placements read the API server)"
		             : "",
		         bad->last_error);
		return;
	}
	if (inf->cfg.policies != NULL) {
		struct policies_stats ps;
		policies_stats(inf->cfg.policies, &ps);
		if (!ps.synced)
			snprintf(
			    buf, cap,
			    "cache: syncing GPUMemoryPolicy objects (%zu pods, %zu nodes read; "
			    "GPU placements refused until they are)%s%s",
			    cs.pods, cs.nodes, st.policies.last_error[0] ? ": " : "",
			    st.policies.last_error);
		else if (ps.crd_missing)
			snprintf(buf, cap,
			         "cache: synced (%zu pods, %zu nodes); policies: the "
			         "GPUMemoryPolicy CRD "
			         "is not installed (flags and node annotations only)",
			         cs.pods, cs.nodes);
		else
			snprintf(buf, cap,
			         "cache: synced (%zu pods, %zu nodes); policies: %zu usable, %zu "
			         "invalid",
			         cs.pods, cs.nodes, ps.usable, ps.invalid);
		return;
	}
	snprintf(buf, cap, "cache: synced (%zu pods, %zu nodes)", cs.pods, cs.nodes);
}

struct gauge_ctx {
	struct metrics_writer *w;
	struct gpupolicy_flags flags;
	struct policies *policies;
	struct dra_store *dra;
};

/* One node's per-node gauges (gpu_memory_guard_node_{capacity,declared,limit}_bytes). */
struct node_gauges {
	char *name;
	unsigned long long capacity, declared, limit;
};

/* The node's limit from core_decide() without a pod: its capacity x the threshold in force
 * (its annotation, the policies that apply to it, the flags), floored at ppm. Called with no
 * lock of the cache held (v is a copy); the policies are read-locked for the selection. An
 * unsynced store gives what it holds: a gauge, not a decision. */
static unsigned long long limit_of(const struct gauge_ctx *g, const struct view_node *v,
                                   const struct capacity *cap)
{
	const struct gpupolicy *sel[GPUPOLICY_SELECT_MAX];
	struct placement_node pn = {.name = v->name, .cap = cap};
	struct core_verdict *cv = malloc(sizeof(*cv));
	unsigned long long limit = 0;
	size_t n = 0;

	if (cv == NULL)
		return 0; /* a gauge: 0 for a scrape out of memory */
	const struct policies_gen *gen = g->policies ? policies_acquire(g->policies) : NULL;
	n = policies_gen_selecting(gen, v->labels, sel, sizeof(sel) / sizeof(sel[0]));
	struct core_input in = {.node = &pn, .policies = sel, .n_policies = n, .flags = g->flags};
	if (core_decide(&in, cv) == 0)
		limit = cv->limit_bytes;
	policies_release(gen);
	free(cv);
	return limit;
}

/* The gauges of node v, a copy (view_from_cache): no lock of the cache is held, the DRA store's
 * view is read after the copy. dra_only: a node known only by DRA slices (a KEP-5004 node
 * without GFD labels: the cache's own pass does not give it). Returns 1 with *out filled
 * (name borrowed from v), 0 when the node has no gauges: gone since its name was read, or
 * (dra_only) given by the cache's pass or of no capacity. */
static int gauges_of(const struct gauge_ctx *g, const struct view_node *v, int dra_only,
                     struct node_gauges *out)
{
	struct dra_view *dv = NULL;
	struct capacity merged;
	char err[CAPACITY_MSG_MAX];

	if (dra_only ? !v->known || v->capacity_rc == 0 || v->n_pods > 0
	             : !v->known || (v->capacity_rc != 0 && v->n_pods == 0))
		return 0; /* dra_only: given by the cache's pass; else cache_each_gpu_node()'s rule
		           */
	if (g->dra != NULL && dra_store_view(g->dra, v->name, NULL, NULL, NULL, &dv) != 0)
		dv = NULL;
	if (v->capacity_rc == 0)
		merged = *v->cap;
	else
		memset(&merged, 0, sizeof(merged));
	int has_cap =
	    dra_view_capacity(dv, &merged, v->capacity_rc, v->name, err, sizeof(err)) == 0;
	if (dra_only && !has_cap) {
		dra_view_free(dv);
		return 0;
	}
	const struct capacity *mc = &merged;
	struct placement_item it = {
	    .key = "", .undeclared_gpus = v->undeclared_gpus, .pool = CAPACITY_POOL_WHOLE};
	unsigned long long val = v->declared_bytes;

	out->capacity = has_cap ? mc->total_bytes : 0;
	if (v->undeclared_gpus && has_cap)
		val = sat_add(val, placement_item_bytes(&it, mc));
	/* Inferred pods: declared_bytes holds their figures in bytes only; their shares count as
	 * the core resolves them on this node. */
	for (size_t i = 0; has_cap && i < v->n_pods; i++) {
		const struct placement_item *p = &v->pods[i];
		uint64_t b;

		if (p->n_shares == 0 || p->undeclared_gpus > 0)
			continue;
		b = placement_item_bytes(p, mc);
		val = sat_add(val, b > p->bytes ? b - p->bytes : 0);
	}
	/* DRA claims, by the core's rule: each once, and a KEP-5004 pod by its claim only (after
	 * the pods' sums above, which counted it by its units) */
	if (dv != NULL && has_cap) {
		struct placement_node pn = {.name = v->name,
		                            .cap = mc,
		                            .pods = v->pods,
		                            .n_pods = v->n_pods,
		                            .dra = &dv->node};
		uint64_t twice, claims = placement_dra_bytes(&pn, &twice);
		val = sat_add(val > twice ? val - twice : 0, claims);
	}
	out->declared = val;
	out->limit = has_cap ? limit_of(g, v, mc) : 0;
	dra_view_free(dv);
	return 1;
}

/* Node names copied out of the cache under its read lock (nothing else happens there). */
struct names {
	char **v;
	size_t n, cap;
	int failed;
};

static void name_add(struct names *ns, const char *name)
{
	if (ns->failed)
		return;
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 64;
		char **v = realloc(ns->v, cap * sizeof(*v));
		if (v == NULL) {
			ns->failed = 1;
			return;
		}
		ns->v = v;
		ns->cap = cap;
	}
	if ((ns->v[ns->n] = strdup(name)) == NULL)
		ns->failed = 1;
	else
		ns->n++;
}

static void name_of(void *ctx, const struct cache_node_view *v)
{
	name_add(ctx, v->name);
}

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
}

/* Every node's gauges into *out (count returned; *out NULL when none or out of memory: a
 * gauge, so a scrape then shows none). The nodes of cache_each_gpu_node(), then those known
 * only by DRA slices; each node copied out (view_from_cache) and judged with no lock of the
 * cache held, so the DRA store's and the policies' locks are never taken inside it. */
static size_t all_gauges(struct informer *inf, const struct gauge_ctx *g, struct node_gauges **out)
{
	struct names ns = {0};
	size_t n_cache, n = 0;
	char(*dn)[DRA_POOL_MAX] = NULL;
	size_t n_dn = 0;
	struct node_gauges *rows;

	*out = NULL;
	cache_each_gpu_node(inf->cache, name_of, &ns);
	n_cache = ns.n;
	if (inf->cfg.dra != NULL && dra_store_nodes(inf->cfg.dra, &dn, &n_dn) == 0)
		for (size_t i = 0; i < n_dn; i++)
			name_add(&ns, dn[i]);
	free(dn);
	rows = ns.failed || ns.n == 0 ? NULL : calloc(ns.n, sizeof(*rows));
	for (size_t i = 0; rows != NULL && i < ns.n; i++) {
		struct view_node v;

		if (view_from_cache(inf->cache, ns.v[i], &v) != 0)
			continue; /* out of memory: this node's gauges are not shown */
		if (gauges_of(g, &v, i >= n_cache, &rows[n])) {
			rows[n].name = ns.v[i];
			ns.v[i] = NULL; /* the row owns it */
			n++;
		}
		view_node_clear(&v);
	}
	names_free(&ns);
	if (n == 0) {
		free(rows);
		return 0;
	}
	*out = rows;
	return n;
}

/* Reservations come from the ledger, outside the cache's lock (placements take the ledger's
 * node lock first, then the cache's). */
static void node_reserved(void *ctx, const char *node, uint64_t bytes)
{
	struct gauge_ctx *g = ctx;
	metrics_printf(g->w, "gpu_memory_guard_node_reserved_bytes{node=\"%s\"} %llu\n", node,
	               (unsigned long long)bytes);
}

void informer_collect(void *ctx, struct metrics_writer *w)
{
	static const char *const types[5] = {"added", "modified", "deleted", "bookmark", "error"};
	static const char *const help[4] = {
	    "GPU memory of the node (HBM), bytes.",
	    "GPU memory declared by the pods on the node (watch cache), bytes.",
	    "GPU memory admitted by this replica and not yet shown by the API server, bytes.",
	    "GPU memory placements may declare on the node (capacity x threshold), bytes."};
	static const char *const names[4] = {"capacity", "declared", "reserved", "limit"};
	struct informer *inf = ctx;
	struct informer_status st;
	struct cache_stats cs;

	informer_status(inf, &st);
	cache_stats(inf->cache, &cs);
	const struct informer_kind_status *ks[5] = {&st.pods, &st.nodes, &st.policies, &st.slices,
	                                            &st.claims};
	const char *res[5] = {"pods", "nodes", "gpumemorypolicies", "resourceslices",
	                      "resourceclaims"};
	int nk = 0, kinds[5]; /* the kinds watched */
	kinds[nk++] = 0;
	kinds[nk++] = 1;
	if (inf->cfg.policies != NULL)
		kinds[nk++] = 2;
	if (inf->cfg.dra != NULL) {
		kinds[nk++] = 3;
		kinds[nk++] = 4;
	}
	metrics_printf(w, "# HELP gpu_memory_guard_cache_synced 1 when the watch cache of the "
	                  "resource is listed and its watch not broken.\n"
	                  "# TYPE gpu_memory_guard_cache_synced gauge\n");
	for (int j = 0, i; j < nk && (i = kinds[j]) >= 0; j++)
		metrics_printf(w, "gpu_memory_guard_cache_synced{resource=\"%s\"} %d\n", res[i],
		               ks[i]->synced && !ks[i]->incomplete && ks[i]->broken_for_s == 0);
	metrics_printf(w, "# HELP gpu_memory_guard_cache_events_total Watch events received.\n"
	                  "# TYPE gpu_memory_guard_cache_events_total counter\n");
	for (int j = 0, i; j < nk && (i = kinds[j]) >= 0; j++)
		for (int t = 0; t < 5; t++)
			metrics_printf(
			    w,
			    "gpu_memory_guard_cache_events_total{resource=\"%s\",type=\"%s\"} "
			    "%lu\n",
			    res[i], types[t], ks[i]->events[t]);
	metrics_printf(w, "# HELP gpu_memory_guard_cache_relists_total Full lists after the first "
	                  "(watch too old, 410 Gone).\n"
	                  "# TYPE gpu_memory_guard_cache_relists_total counter\n");
	for (int j = 0, i; j < nk && (i = kinds[j]) >= 0; j++)
		metrics_printf(w, "gpu_memory_guard_cache_relists_total{resource=\"%s\"} %lu\n",
		               res[i], ks[i]->relists);
	metrics_printf(w, "# HELP gpu_memory_guard_cache_watch_restarts_total Watches that ended "
	                  "in an error.\n"
	                  "# TYPE gpu_memory_guard_cache_watch_restarts_total counter\n");
	for (int j = 0, i; j < nk && (i = kinds[j]) >= 0; j++)
		metrics_printf(w,
		               "gpu_memory_guard_cache_watch_restarts_total{resource=\"%s\"} %lu\n",
		               res[i], ks[i]->watch_restarts);
	metrics_printf(w, "# HELP gpu_memory_guard_cache_last_event_age_seconds Age of the newest "
	                  "watch event, bookmarks included (-1 before any).\n"
	                  "# TYPE gpu_memory_guard_cache_last_event_age_seconds gauge\n");
	for (int j = 0, i; j < nk && (i = kinds[j]) >= 0; j++)
		metrics_printf(
		    w, "gpu_memory_guard_cache_last_event_age_seconds{resource=\"%s\"} %.3f\n",
		    res[i], ks[i]->last_event_age);
	metrics_printf(w,
	               "# HELP gpu_memory_guard_cache_objects Objects held by the watch cache.\n"
	               "# TYPE gpu_memory_guard_cache_objects gauge\n"
	               "gpu_memory_guard_cache_objects{resource=\"pods\"} %zu\n"
	               "gpu_memory_guard_cache_objects{resource=\"nodes\"} %zu\n",
	               cs.pods, cs.nodes);
	if (inf->cfg.dra != NULL) {
		struct dra_store_stats ds;
		dra_store_stats(inf->cfg.dra, &ds);
		metrics_printf(w,
		               "gpu_memory_guard_cache_objects{resource=\"resourceslices\"} %zu\n"
		               "gpu_memory_guard_cache_objects{resource=\"resourceclaims\"} %zu\n",
		               ds.slices, ds.claims);
	}
	metrics_printf(w,
	               "# HELP gpu_memory_guard_cache_bytes Heap held by the watch cache (its "
	               "allocations' usable sizes plus chunk headers), bytes.\n"
	               "# TYPE gpu_memory_guard_cache_bytes gauge\n"
	               "gpu_memory_guard_cache_bytes %zu\n"
	               "# HELP gpu_memory_guard_cache_part_bytes Of cache_bytes, by part: "
	               "compact_pods (pods that ask for no GPU), pods (the others, whole), nodes.\n"
	               "# TYPE gpu_memory_guard_cache_part_bytes gauge\n"
	               "gpu_memory_guard_cache_part_bytes{part=\"compact_pods\"} %zu\n"
	               "gpu_memory_guard_cache_part_bytes{part=\"pods\"} %zu\n"
	               "gpu_memory_guard_cache_part_bytes{part=\"nodes\"} %zu\n"
	               "# HELP gpu_memory_guard_cache_compact_pods Of the cached pods, those kept "
	               "compact (no GPU asked, a UUID uid).\n"
	               "# TYPE gpu_memory_guard_cache_compact_pods gauge\n"
	               "gpu_memory_guard_cache_compact_pods %zu\n"
	               "# HELP gpu_memory_guard_memory_limit_bytes The cgroup memory limit read at "
	               "start, bytes; 0 when none.\n"
	               "# TYPE gpu_memory_guard_memory_limit_bytes gauge\n"
	               "gpu_memory_guard_memory_limit_bytes %llu\n",
	               cs.bytes, cs.compact_bytes, cs.pod_bytes, cs.node_bytes, cs.compact_pods,
	               (unsigned long long)inf->cfg.memory_limit_bytes);
	/* Bounded label values: demand_source_name()'s five and "invalid". */
	metrics_printf(w, "# HELP gpu_memory_guard_pods_by_demand_source GPU pods in the watch "
	                  "cache by where their GPU memory figure comes from (the least declared "
	                  "GPU container's source).\n"
	                  "# TYPE gpu_memory_guard_pods_by_demand_source gauge\n");
	for (size_t i = DEMAND_SRC_DECLARED; i < CACHE_SOURCES; i++)
		metrics_printf(w, "gpu_memory_guard_pods_by_demand_source{source=\"%s\"} %zu\n",
		               i == CACHE_SOURCE_INVALID
		                   ? "invalid"
		                   : demand_source_name((enum demand_source)i),
		               cs.by_source[i]);
	struct gauge_ctx g = {
	    .w = w,
	    .flags = {inf->cfg.threshold, 0, inf->cfg.mode_warn ? POLICY_WARN : POLICY_ENFORCE},
	    .policies = inf->cfg.policies,
	    .dra = inf->cfg.dra,
	};
	struct node_gauges *rows;
	size_t n_rows = all_gauges(inf, &g, &rows);
	for (int pass = 0; pass < 4; pass++) {
		metrics_printf(w,
		               "# HELP gpu_memory_guard_node_%s_bytes %s\n"
		               "# TYPE gpu_memory_guard_node_%s_bytes gauge\n",
		               names[pass], help[pass], names[pass]);
		if (pass == 2) {
			ledger_each(inf->cfg.ledger, ledger_now_ms(), node_reserved, &g);
			continue;
		}
		for (size_t i = 0; i < n_rows; i++)
			metrics_printf(w, "gpu_memory_guard_node_%s_bytes{node=\"%s\"} %llu\n",
			               names[pass], rows[i].name,
			               pass == 0   ? rows[i].capacity
			               : pass == 1 ? rows[i].declared
			                           : rows[i].limit);
	}
	for (size_t i = 0; i < n_rows; i++)
		free(rows[i].name);
	free(rows);
}

int informer_connected_fn(void *ctx, double now_s)
{
	struct informer *inf = ctx;
	int ok;

	pthread_mutex_lock(&inf->mu);
	ok = inf->pods.synced && inf->nodes.synced && !inf->pods.store_failed &&
	     !inf->nodes.store_failed && inf->pods.in_watch && inf->nodes.in_watch &&
	     broken_for(inf, &inf->pods, now_s) == 0 && broken_for(inf, &inf->nodes, now_s) == 0;
	pthread_mutex_unlock(&inf->mu);
	return ok;
}
