/*
 * placer_fixture: the engine (placer.h) for unit tests of the scheduler extender, which judges
 * every node through it. Its API source is a test double that answers every call with an error
 * and counts the calls: the extender must never reach the API server (extender.h), so a test
 * can assert placer_fixture_api_calls stays 0. Header-only (one binary per test_*.c); include
 * after <cmocka.h>.
 */
#ifndef GMG_TEST_PLACER_FIXTURE_H
#define GMG_TEST_PLACER_FIXTURE_H

#include <stdio.h>

#include "kube.h"
#include "placer.h"

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

#endif
