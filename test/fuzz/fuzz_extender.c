/*
 * Fuzz target: the scheduler extender's decoder and answer (extender_handle, both verbs).
 * The watch cache holds the node of test/data/node-gpu-node-a.json and its pods, fresh; the
 * engine (placer.h) over an empty ledger, with an API source that fails the run if called (the
 * extender never asks the API server). The first input byte picks the verb (even: filter, odd:
 * prioritize), the rest is the body. Properties: filter always answers 200 with a JSON object
 * (errors in its "Error" field, as kube-scheduler reads them); prioritize answers a JSON array of
 * {"Host","Score" 0..10} or refuses with EXTENDER_EBADREQUEST and a reason; nothing leaks.
 */
#include "cache.h"
#include "extender.h"
#include "fuzz.h"
#include "ledger.h"
#include "placer.h"

static struct cache *cache;
static struct ledger *ledger;
static struct placer *pl;
static struct extender *x;

static int no_get_pod(void *ctx, const char *ns, const char *name, cJSON **pod, long *code,
                      char *err, size_t errlen)
{
	fuzz_fail("the extender called the API server (pod %s/%s)", ns ? ns : "", name);
	return -1;
}

static int no_get_node(void *ctx, const char *name, cJSON **node, long *code, char *err,
                       size_t errlen)
{
	fuzz_fail("the extender called the API server (node %s)", name);
	return -1;
}

static int no_list(void *ctx, const char *node, cJSON **items, long *code, char *err, size_t errlen)
{
	fuzz_fail("the extender called the API server (pods on %s)", node);
	return -1;
}

static int always(void *ctx, double now_s)
{
	return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const exempt[] = {"kube-system"};
	fuzz_quiet_logs();
	cache = cache_new(&(struct demand_config){.gpu_resources = NULL}, NULL, NULL);
	cJSON *node = fuzz_fixture_json("node-gpu-node-a.json");
	cJSON *list = fuzz_fixture_json("podlist-gpu-node-a.json");
	const cJSON *p;
	if (cache == NULL || cache_apply_node(cache, WATCH_ADDED, node) != 0)
		fuzz_fail("cannot fill the cache");
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(list, "items"))
	{
		if (cache_apply_pod(cache, WATCH_ADDED, p) != 0)
			fuzz_fail("cache refused a pod");
	}
	cJSON_Delete(node);
	cJSON_Delete(list);
	static const struct demand_config dcfg = {.gpu_resources = NULL};
	struct placer_config pc = {
	    .threshold = 0.9,
	    .warn_threshold = 0.8,
	    .dcfg = &dcfg,
	    .src = {NULL, no_get_pod, no_get_node, no_list},
	    .cache = cache,
	    .cache_fresh = always,
	    .ledger = ledger = ledger_new(60000),
	    .exempt_namespaces = exempt,
	    .n_exempt_namespaces = 1,
	};
	if (ledger == NULL || (pl = placer_new(&pc)) == NULL)
		fuzz_fail("placer_new");
	struct extender_config cfg = {
	    .placer = pl,
	};
	x = extender_new(&cfg, NULL);
	if (x == NULL)
		fuzz_fail("extender_new");
	return 0;
}

static void check_priorities(const cJSON *a, const char *out)
{
	const cJSON *h;
	if (!cJSON_IsArray(a))
		fuzz_fail("prioritize answer is not an array: %s", out);
	cJSON_ArrayForEach(h, a)
	{
		const cJSON *host = cJSON_GetObjectItemCaseSensitive(h, "Host");
		const cJSON *score = cJSON_GetObjectItemCaseSensitive(h, "Score");
		if (!cJSON_IsString(host) || !cJSON_IsNumber(score) || score->valuedouble < 0 ||
		    score->valuedouble > EXTENDER_MAX_PRIORITY)
			fuzz_fail("bad HostPriority: %s", out);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	enum extender_verb verb = data[0] % 2 ? EXTENDER_PRIORITIZE : EXTENDER_FILTER;
	char *out = NULL, err[EXTENDER_ERR_MAX] = "";
	size_t out_len = 0;
	int rc = extender_handle(x, verb, (const char *)data + 1, size - 1, &out, &out_len, err,
	                         sizeof(err));

	if (rc == 0) {
		if (out == NULL || strlen(out) != out_len)
			fuzz_fail("answer length %zu", out_len);
		cJSON *a = cJSON_ParseWithOpts(out, NULL, 1);
		if (a == NULL)
			fuzz_fail("answer is not JSON: %s", out);
		if (verb == EXTENDER_FILTER) {
			const cJSON *e = cJSON_GetObjectItemCaseSensitive(a, "Error");
			if (!cJSON_IsObject(a) || !cJSON_IsString(e))
				fuzz_fail("filter answer without an Error string: %s", out);
		} else {
			check_priorities(a, out);
		}
		cJSON_Delete(a);
	} else if (rc == EXTENDER_EBADREQUEST) {
		if (verb != EXTENDER_PRIORITIZE || !fuzz_err_ok(err, sizeof(err)))
			fuzz_fail("EBADREQUEST for verb %d, reason \"%s\"", (int)verb, err);
	} else {
		fuzz_fail("extender_handle: %d (%s)", rc, err);
	}
	free(out);
	return 0;
}
