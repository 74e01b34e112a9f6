/*
 * placer_fixture: the engine (placer.h) for unit tests of the scheduler extender, which judges
 * every node through it. Its API source is a test double that answers every call with an error
 * and counts the calls: the extender must never reach the API server (extender.h), so a test
 * can assert placer_fixture_api_calls stays 0; and the node most of its tests place on
 * (placer_fixture_gpu_a). Header-only (one binary per test_*.c); include after <cmocka.h>.
 */
#ifndef GMG_TEST_PLACER_FIXTURE_H
#define GMG_TEST_PLACER_FIXTURE_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "cache.h"
#include "kube.h"
#include "placer.h"
#include "watch.h"

static int placer_fixture_api_calls;

static int placer_fixture_get_pod(void *ctx, const char *ns, const char *name, cJSON **pod,
                                  long *http_code, char *err, size_t errlen)
{
	(void)ctx, (void)ns, (void)name, (void)pod;
	placer_fixture_api_calls++;
	*http_code = 0;
	snprintf(err, errlen, "test double: no API server");
	return KUBE_ETRANSPORT;
}

static int placer_fixture_get_node(void *ctx, const char *name, cJSON **node, long *http_code,
                                   char *err, size_t errlen)
{
	return placer_fixture_get_pod(ctx, NULL, name, node, http_code, err, errlen);
}

static int placer_fixture_list(void *ctx, const char *node, cJSON **items, long *http_code,
                               char *err, size_t errlen)
{
	return placer_fixture_get_pod(ctx, NULL, node, items, http_code, err, errlen);
}

/* A placer_config with the refusing source, thresholds 0.9 / 0.8, over cache and ledger
 * (borrowed); the rest zero (the caller sets what the test needs). */
static inline struct placer_config placer_fixture_config(struct cache *cache, struct ledger *ledger,
                                                         const struct demand_config *dcfg)
{
	struct placer_config pc = {
	    .threshold = 0.9,
	    .warn_threshold = 0.8,
	    .dcfg = dcfg,
	    .src = {NULL, placer_fixture_get_pod, placer_fixture_get_node, placer_fixture_list},
	    .cache = cache,
	    .ledger = ledger,
	};
	return pc;
}

/* The node gpu-a of the engine's tests: one 80Gi GPU (the 90 percent limit: 72Gi) and a running
 * pod ml/resident declaring 40Gi on it, applied to cache. 0, or -1 when the cache refused one. */
static inline int placer_fixture_gpu_a(struct cache *cache)
{
	static const char *const node =
	    "{\"metadata\":{\"name\":\"gpu-a\",\"uid\":\"n1\",\"annotations\":{"
	    "\"gpu-memory-guard.io/gpu-memory\":\"80Gi\",\"gpu-memory-guard.io/gpu-count\":\"1\"}},"
	    "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"1\"}}}";
	static const char *const pod =
	    "{\"metadata\":{\"name\":\"resident\",\"namespace\":\"ml\",\"uid\":\"uid-resident\"},"
	    "\"spec\":{\"nodeName\":\"gpu-a\",\"containers\":[{\"name\":\"c\",\"resources\":{"
	    "\"limits\":{\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\","
	    "\"value\":\"40Gi\"}]}]},\"status\":{\"phase\":\"Running\"}}";
	cJSON *n = cJSON_Parse(node), *p = cJSON_Parse(pod);
	int rc = n != NULL && p != NULL && cache_apply_node(cache, WATCH_ADDED, n) == 0 &&
	                 cache_apply_pod(cache, WATCH_ADDED, p) == 0
	             ? 0
	             : -1;
	cJSON_Delete(n);
	cJSON_Delete(p);
	return rc;
}

#endif
