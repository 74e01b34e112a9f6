/*
 * Fuzz target: the whole AdmissionReview path, raw body to encoded answer (webhook_review:
 * decode, classify, demand, capacity, placement, encode) over a fake cluster: the node of
 * test/data/node-gpu-node-a.json answers for any node name, with the pods of
 * podlist-gpu-node-a.json on it, and any pod looked up is the GPU pod of
 * review-pod-create-unscheduled.json under the name asked. Inputs of odd length are decided on
 * the watch cache path (the same node and pods in a cache, fresh and connected), even ones on
 * the API path. Each input gets a fresh ledger, so an input decides the same way every run.
 *
 * Properties: an answer (rc 0) is strict JSON, {"apiVersion":"admission.k8s.io/v1","kind":
 * "AdmissionReview","response":{...}} whose response.uid is the request's uid (as an
 * independent parse of the body reads it), allowed a boolean, a denial with status.code in
 * 400..599 and a message without '%', never a patch; a refusal (rc WEBHOOK_EBADREQUEST) has a
 * reason; nothing leaks (LeakSanitizer).
 */
#include "cache.h"
#include "fuzz.h"
#include "kube.h"
#include "ledger.h"
#include "webhook.h"

static cJSON *node_fixture, *pod_items, *pod_fixture;
static struct cache *cache;

static const char *meta(const cJSON *o, const char *key)
{
	const cJSON *v =
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), key);
	return cJSON_IsString(v) ? v->valuestring : "";
}

/* A copy of o whose metadata.name (and namespace, when ns is not NULL) are replaced. */
static cJSON *renamed(const cJSON *o, const char *ns, const char *name)
{
	cJSON *c = cJSON_Duplicate(o, 1);
	cJSON *m = c ? cJSON_GetObjectItemCaseSensitive(c, "metadata") : NULL;
	if (m == NULL)
		abort();
	cJSON_DeleteItemFromObjectCaseSensitive(m, "name");
	cJSON_AddStringToObject(m, "name", name);
	if (ns != NULL) {
		cJSON_DeleteItemFromObjectCaseSensitive(m, "namespace");
		cJSON_AddStringToObject(m, "namespace", ns);
	}
	return c;
}

static int fake_get_pod(void *ctx, const char *ns, const char *name, cJSON **pod, long *code,
                        char *err, size_t errlen)
{
	*pod = renamed(pod_fixture, ns, name);
	*code = 200;
	return 0;
}

static int fake_get_node(void *ctx, const char *name, cJSON **node, long *code, char *err,
                         size_t errlen)
{
	*node = renamed(node_fixture, NULL, name);
	*code = 200;
	return 0;
}

static int fake_list(void *ctx, const char *node, cJSON **items, long *code, char *err,
                     size_t errlen)
{
	*items = cJSON_Duplicate(pod_items, 1);
	*code = 200;
	return 0;
}

static int always(void *ctx, double now_s)
{
	return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet_logs();
	node_fixture = fuzz_fixture_json("node-gpu-node-a.json");
	cJSON *list = fuzz_fixture_json("podlist-gpu-node-a.json");
	pod_items = cJSON_DetachItemFromObjectCaseSensitive(list, "items");
	cJSON_Delete(list);
	cJSON *review = fuzz_fixture_json("review-pod-create-unscheduled.json");
	pod_fixture = cJSON_DetachItemFromObjectCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(review, "request"), "object");
	cJSON_Delete(review);
	if (pod_items == NULL || pod_fixture == NULL)
		fuzz_fail("fixtures without items or a pod");

	cache = cache_new(&(struct demand_config){.gpu_resources = NULL}, NULL, NULL);
	if (cache == NULL || cache_apply_node(cache, WATCH_ADDED, node_fixture) != 0)
		fuzz_fail("cannot fill the cache");
	const cJSON *p;
	cJSON_ArrayForEach(p, pod_items)
	{
		if (cache_apply_pod(cache, WATCH_ADDED, p) != 0)
			fuzz_fail("cache refused pod %s", meta(p, "name"));
	}
	return 0;
}

/* request.uid of the body as a plain strict parse reads it, or NULL (free() the result). */
static char *request_uid(const uint8_t *data, size_t size)
{
	char *s = fuzz_strdup(data, size);
	cJSON *j = memchr(data, '\0', size) ? NULL : cJSON_ParseWithOpts(s, NULL, 1);
	const cJSON *u =
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "request"), "uid");
	char *uid = cJSON_IsString(u) ? strdup(u->valuestring) : NULL;
	cJSON_Delete(j);
	free(s);
	return uid;
}

static void check_answer(const char *out, size_t out_len, const char *uid)
{
	if (uid == NULL)
		fuzz_fail("answered a body without a string request.uid");
	if (out == NULL || strlen(out) != out_len)
		fuzz_fail("answer length %zu, string length %zu", out_len, out ? strlen(out) : 0);
	cJSON *a = cJSON_ParseWithOpts(out, NULL, 1);
	if (a == NULL)
		fuzz_fail("answer is not JSON: %s", out);
	const cJSON *api = cJSON_GetObjectItemCaseSensitive(a, "apiVersion");
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(a, "kind");
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(a, "response");
	const cJSON *ruid = cJSON_GetObjectItemCaseSensitive(r, "uid");
	const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(r, "allowed");
	if (!cJSON_IsString(api) || strcmp(api->valuestring, "admission.k8s.io/v1") != 0 ||
	    !cJSON_IsString(kind) || strcmp(kind->valuestring, "AdmissionReview") != 0)
		fuzz_fail("answer envelope: %s", out);
	if (!cJSON_IsString(ruid) || strcmp(ruid->valuestring, uid) != 0)
		fuzz_fail("answer uid is not the request's \"%s\": %s", uid, out);
	if (!cJSON_IsBool(allowed))
		fuzz_fail("allowed is not a boolean: %s", out);
	if (cJSON_GetObjectItemCaseSensitive(r, "patch") != NULL)
		fuzz_fail("a validating webhook answered a patch: %s", out);
	if (cJSON_IsFalse(allowed)) {
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(st, "code");
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(st, "message");
		if (!cJSON_IsNumber(code) || code->valuedouble < 400 || code->valuedouble > 599)
			fuzz_fail("denial without a 4xx/5xx status.code: %s", out);
		if (!cJSON_IsString(msg) || msg->valuestring[0] == '\0' ||
		    strchr(msg->valuestring, '%') != NULL)
			fuzz_fail("denial message empty or with a percent sign: %s", out);
	}
	cJSON_Delete(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct placer_source src = {NULL, fake_get_pod, fake_get_node, fake_list};
	struct webhook_config cfg = {.threshold = 0.9, .warn_threshold = 0.8};
	static const char *const exempt[] = {"kube-system"};
	char *out = NULL, err[WEBHOOK_ERR_MAX] = "";
	size_t out_len = 0;

	cfg.exempt_namespaces = exempt;
	cfg.n_exempt_namespaces = 1;
	if (size % 2) {
		cfg.cache = cache;
		cfg.cache_fresh = always;
		cfg.cache_connected = always;
	}
	struct ledger *ledger = ledger_new(60000);
	struct webhook *w = ledger ? webhook_new(&cfg, &src, ledger, NULL) : NULL;
	if (w == NULL)
		abort();
	int rc = webhook_review(w, (const char *)data, size, &out, &out_len, err, sizeof(err));
	char *uid = request_uid(data, size);
	if (rc == 0)
		check_answer(out, out_len, uid);
	else if (rc == WEBHOOK_EBADREQUEST && !fuzz_err_ok(err, sizeof(err)))
		fuzz_fail("refused without a reason");
	else if (rc != WEBHOOK_EBADREQUEST)
		fuzz_fail("webhook_review: %d (%s)", rc, err);
	free(uid);
	free(out);
	webhook_free(w);
	ledger_free(ledger);
	return 0;
}
