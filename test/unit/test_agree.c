/*
 * Unit tests: the admission webhook and the scheduler extender agree on the pod shapes real
 * projects ship (test/data/agree: the e2e workloads of test/e2e/workloads/infer as JSON, and
 * the fixtures' pods). For each pod and node, five answers are compared:
 *
 *   ext  the extender's filter on [node] (ExtenderArgs with the pod as the scheduler sends it)
 *   pc   a pod CREATE with spec.nodeName = node, decided from the watch cache
 *   pa   the same through the API server (cache not fresh: GET node, list pods)
 *   bc   a Binding of the pod to node, the pod read from the watch cache
 *   ba   the same through the API server (GET pod)
 *
 * A placement the webhook admits passes the filter there; one refused as InvalidDeclaration is
 * FailedAndUnresolvable with the same words; all reviews are dry runs: nothing is reserved.
 *
 * The cluster (a real watch cache, and the same objects behind the fake API source):
 *   n-room   1 x 80Gi, ml/resident-room declares 40Gi
 *   n-full   1 x 80Gi, ml/resident-full declares 70.3Gi
 *   n-empty  1 x 80Gi
 *   n-small  1 x 8Gi
 *   n-quad   4 x 80Gi
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "cache.h"
#include "demand.h"
#include "dra.h"
#include "drastore.h"
#include "engine.h"
#include "extender.h"
#include "fixture.h"
#include "kube.h"
#include "ledger.h"
#include "log.h"
#include "metrics.h"
#include "placer.h"
#include "watch.h"
#include "webhook.h"

static const char *const NODES[] = {"n-room", "n-full", "n-empty", "n-small", "n-quad"};
#define N_NODES 5

/* ---- the fake API server: the same objects as the cache ---- */

struct fake {
	cJSON *nodes; /* array */
	cJSON *pods;  /* array: residents (bound) and the pod under test (unbound) */
	int n_calls;
};

static const char *meta(const cJSON *o, const char *k)
{
	const cJSON *v =
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), k);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static const char *node_of(const cJSON *pod)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(pod, "spec"), "nodeName");
	return cJSON_IsString(v) ? v->valuestring : "";
}

static int fake_get_pod(void *ctx, const char *ns, const char *name, cJSON **pod, long *code,
                        char *err, size_t errlen)
{
	struct fake *f = ctx;
	const cJSON *p;
	f->n_calls++;
	cJSON_ArrayForEach(p, f->pods)
	{
		if (strcmp(meta(p, "namespace"), ns) == 0 && strcmp(meta(p, "name"), name) == 0) {
			*pod = cJSON_Duplicate(p, 1);
			*code = 200;
			return 0;
		}
	}
	*code = 404;
	snprintf(err, errlen, "not found");
	return KUBE_ENOTFOUND;
}

static int fake_get_node(void *ctx, const char *name, cJSON **node, long *code, char *err,
                         size_t errlen)
{
	struct fake *f = ctx;
	const cJSON *n;
	f->n_calls++;
	cJSON_ArrayForEach(n, f->nodes)
	{
		if (strcmp(meta(n, "name"), name) == 0) {
			*node = cJSON_Duplicate(n, 1);
			*code = 200;
			return 0;
		}
	}
	*code = 404;
	snprintf(err, errlen, "not found");
	return KUBE_ENOTFOUND;
}

static int fake_list(void *ctx, const char *node, cJSON **items, long *code, char *err,
                     size_t errlen)
{
	struct fake *f = ctx;
	const cJSON *p;
	(void)err, (void)errlen;
	f->n_calls++;
	*items = cJSON_CreateArray();
	cJSON_ArrayForEach(p, f->pods)
	{
		if (strcmp(node_of(p), node) == 0)
			cJSON_AddItemToArray(*items, cJSON_Duplicate(p, 1));
	}
	*code = 200;
	return 0;
}

/* ---- the world ---- */

static int fresh_answer = 1;
static int fresh(void *ctx, double now)
{
	(void)ctx, (void)now;
	return fresh_answer;
}

struct env {
	struct fake fake;
	struct cache *cache;
	struct ledger *ledger;
	struct metrics *metrics;
	struct engine_defaults engines;
	struct demand_config dcfg;
	struct webhook_config wcfg;
	struct webhook *w;
	struct extender *x;
	struct dra_store *dra; /* NULL: DRA not read */
	const char *exempt[1];
};

static struct env E;

static void add_node(const char *name, const char *mem, const char *gpus)
{
	char text[512];
	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"%s\",\"uid\":\"node-%s\",\"annotations\":{"
	         "\"gpu-memory-guard.io/gpu-memory\":\"%s\",\"gpu-memory-guard.io/gpu-count\":"
	         "\"%s\"}},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"%s\"}}}",
	         name, name, mem, gpus, gpus);
	cJSON *n = cJSON_Parse(text);
	assert_non_null(n);
	assert_int_equal(cache_apply_node(E.cache, WATCH_ADDED, n), 0);
	cJSON_AddItemToArray(E.fake.nodes, n);
}

static void add_resident(const char *name, const char *limit, const char *node)
{
	char text[768];
	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"uid-%s\"},"
	         "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"c\",\"resources\":{"
	         "\"limits\":{\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\","
	         "\"value\":\"%s\"}]}]},\"status\":{\"phase\":\"Running\"}}",
	         name, name, node, limit);
	cJSON *p = cJSON_Parse(text);
	assert_non_null(p);
	assert_int_equal(cache_apply_pod(E.cache, WATCH_ADDED, p), 0);
	cJSON_AddItemToArray(E.fake.pods, p);
}

static int devnull = -1;

static void build(void)
{
	extender_free(E.x);
	webhook_free(E.w);
	struct placer_source src = {&E.fake, fake_get_pod, fake_get_node, fake_list};
	E.w = webhook_new(&E.wcfg, &src, E.ledger, E.metrics);
	assert_non_null(E.w);
	struct extender_config ecfg = {.placer = webhook_placer(E.w)};
	E.x = extender_new(&ecfg, E.metrics);
	assert_non_null(E.x);
}

static int setup(void **state)
{
	(void)state;
	if (devnull < 0)
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	log_set_fd(devnull);
	memset(&E, 0, sizeof(E));
	fresh_answer = 1;
	engine_defaults_init(&E.engines);
	/* the cache and the webhook read demands by one rule (main.c) */
	E.dcfg = (struct demand_config){.infer = 1, .engines = &E.engines};
	E.cache = cache_new(&E.dcfg, NULL, NULL);
	E.ledger = ledger_new(60000);
	E.metrics = metrics_new();
	E.fake.nodes = cJSON_CreateArray();
	E.fake.pods = cJSON_CreateArray();
	assert_non_null(E.cache);
	add_node("n-room", "80Gi", "1");
	add_node("n-full", "80Gi", "1");
	add_node("n-empty", "80Gi", "1");
	add_node("n-small", "8Gi", "1");
	add_node("n-quad", "80Gi", "4");
	add_resident("resident-room", "40Gi", "n-room");
	add_resident("resident-full", "70.3Gi", "n-full");
	E.exempt[0] = "kube-system";
	E.wcfg = (struct webhook_config){
	    .threshold = 0.9,
	    .warn_threshold = 0.8,
	    .infer = 1,
	    .engines = &E.engines,
	    .exempt_namespaces = E.exempt,
	    .n_exempt_namespaces = 1,
	    .cache = E.cache,
	    .cache_fresh = fresh,
	};
	build();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	extender_free(E.x);
	webhook_free(E.w);
	cache_free(E.cache);
	ledger_free(E.ledger);
	metrics_free(E.metrics);
	dra_store_free(E.dra);
	cJSON_Delete(E.fake.nodes);
	cJSON_Delete(E.fake.pods);
	return 0;
}

/* ---- the five answers ---- */

struct verdict {
	int allowed;      /* admitted, or the filter passed */
	int unresolvable; /* the extender: FailedAndUnresolvable */
	char text[1024];  /* the refusal's message (or first warning), or the node's reason */
	char reason[64];  /* the webhook's status.reason */
};

static struct verdict filter(const cJSON *pod, const char *node)
{
	struct verdict v = {0};
	cJSON *a = cJSON_CreateObject(), *list = cJSON_CreateArray();
	cJSON_AddItemToObject(a, "Pod", cJSON_Duplicate(pod, 1));
	cJSON_AddNullToObject(a, "Nodes");
	cJSON_AddItemToArray(list, cJSON_CreateString(node));
	cJSON_AddItemToObject(a, "NodeNames", list);
	char *body = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	char *out = NULL, err[EXTENDER_ERR_MAX] = "";
	size_t len = 0;
	int rc =
	    extender_handle(E.x, EXTENDER_FILTER, body, strlen(body), &out, &len, err, sizeof(err));
	cJSON_free(body);
	if (rc != 0)
		fail_msg("extender_handle: %d (%s)", rc, err);
	cJSON *r = cJSON_Parse(out);
	free(out);
	assert_non_null(r);
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "Error");
	if (cJSON_IsString(e) && e->valuestring[0])
		fail_msg("filter error: %s", e->valuestring);
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(r, "FailedNodes"), node);
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(r, "FailedAndUnresolvableNodes"), node);
	v.allowed = f == NULL && u == NULL;
	v.unresolvable = u != NULL;
	snprintf(v.text, sizeof(v.text), "%s",
	         cJSON_IsString(u)   ? u->valuestring
	         : cJSON_IsString(f) ? f->valuestring
	                             : "");
	cJSON_Delete(r);
	return v;
}

static cJSON *review_of(const char *kind, const char *ns, const char *name, cJSON *object)
{
	cJSON *r = cJSON_CreateObject(), *q = cJSON_AddObjectToObject(r, "request");
	cJSON_AddStringToObject(r, "apiVersion", "admission.k8s.io/v1");
	cJSON_AddStringToObject(r, "kind", "AdmissionReview");
	cJSON_AddStringToObject(q, "uid", "review-uid-1");
	cJSON *k = cJSON_AddObjectToObject(q, "kind");
	cJSON_AddStringToObject(k, "group", "");
	cJSON_AddStringToObject(k, "version", "v1");
	cJSON_AddStringToObject(k, "kind", kind);
	cJSON *res = cJSON_AddObjectToObject(q, "resource");
	cJSON_AddStringToObject(res, "group", "");
	cJSON_AddStringToObject(res, "version", "v1");
	cJSON_AddStringToObject(res, "resource", "pods");
	if (strcmp(kind, "Binding") == 0)
		cJSON_AddStringToObject(q, "subResource", "binding");
	cJSON_AddStringToObject(q, "name", name);
	cJSON_AddStringToObject(q, "namespace", ns);
	cJSON_AddStringToObject(q, "operation", "CREATE");
	cJSON_AddTrueToObject(q, "dryRun");
	cJSON_AddItemToObject(q, "object", object);
	return r;
}

static struct verdict review(cJSON *r)
{
	struct verdict v = {0};
	char *body = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	char *out = NULL, err[WEBHOOK_ERR_MAX];
	size_t len = 0;
	int rc = webhook_review(E.w, body, strlen(body), &out, &len, err, sizeof(err));
	cJSON_free(body);
	if (rc != 0)
		fail_msg("webhook_review: %d %s", rc, err);
	cJSON *a = cJSON_Parse(out);
	free(out);
	assert_non_null(a);
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(a, "response");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(resp, "uid")->valuestring,
	                    "review-uid-1");
	v.allowed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed"));
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(resp, "status"), "message");
	const cJSON *w0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "warnings"), 0);
	const cJSON *rs = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(resp, "status"), "reason");
	snprintf(v.reason, sizeof(v.reason), "%s", cJSON_IsString(rs) ? rs->valuestring : "");
	snprintf(v.text, sizeof(v.text), "%s",
	         cJSON_IsString(m)    ? m->valuestring
	         : cJSON_IsString(w0) ? w0->valuestring
	                              : "");
	cJSON_Delete(a);
	return v;
}

static struct verdict pod_create(const cJSON *pod, const char *node)
{
	cJSON *obj = cJSON_Duplicate(pod, 1);
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "nodeName");
	cJSON_AddStringToObject(spec, "nodeName", node);
	return review(review_of("Pod", meta(pod, "namespace"), meta(pod, "name"), obj));
}

static struct verdict binding(const cJSON *pod, const char *node)
{
	cJSON *b = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(b, "metadata");
	cJSON_AddStringToObject(b, "kind", "Binding");
	cJSON_AddStringToObject(b, "apiVersion", "v1");
	cJSON_AddStringToObject(md, "name", meta(pod, "name"));
	cJSON_AddStringToObject(md, "namespace", meta(pod, "namespace"));
	cJSON_AddStringToObject(md, "uid", meta(pod, "uid"));
	cJSON *t = cJSON_AddObjectToObject(b, "target");
	cJSON_AddStringToObject(t, "kind", "Node");
	cJSON_AddStringToObject(t, "name", node);
	return review(review_of("Binding", meta(pod, "namespace"), meta(pod, "name"), b));
}

static uint64_t pending(const char *node)
{
	struct ledger_node *n = ledger_lock(E.ledger, node);
	assert_non_null(n);
	uint64_t b = ledger_pending_bytes(n, NULL, ledger_now_ms());
	ledger_unlock(n);
	return b;
}

/* The five answers for pod (unbound, with namespace, name and uid) on every node agree. */
static void check_agree_on(const char *what, cJSON *pod, const char *const *nodes, size_t n)
{
	/* the pod as the cluster has it: unbound, in the cache and behind GET */
	assert_int_equal(cache_apply_pod(E.cache, WATCH_ADDED, pod), 0);
	cJSON_AddItemReferenceToArray(E.fake.pods, pod);
	for (size_t i = 0; i < n; i++) {
		const char *node = nodes[i];
		fresh_answer = 1;
		struct verdict ext = filter(pod, node);
		struct verdict pc = pod_create(pod, node);
		struct verdict bc = binding(pod, node);
		fresh_answer = 0;
		struct verdict pa = pod_create(pod, node);
		struct verdict ba = binding(pod, node);
		fresh_answer = 1;
		print_message("%-22s %-8s ext=%d%s pc=%d pa=%d bc=%d ba=%d | %s | %s\n", what, node,
		              ext.allowed, ext.unresolvable ? "U" : "", pc.allowed, pa.allowed,
		              bc.allowed, ba.allowed, ext.text, pc.text);
		if (pc.allowed != ext.allowed || pa.allowed != ext.allowed ||
		    bc.allowed != ext.allowed || ba.allowed != ext.allowed)
			fail_msg("%s on %s: filter %s (%s), pod CREATE cache %d api %d, Binding "
			         "cache %d (%s) api %d (%s)",
			         what, node, ext.allowed ? "passes" : "fails", ext.text, pc.allowed,
			         pa.allowed, bc.allowed, bc.text, ba.allowed, ba.text);
		if (strcmp(pc.reason, "InvalidDeclaration") == 0) {
			/* refused everywhere: the same words */
			if (!ext.unresolvable || strcmp(pc.text, ext.text) != 0)
				fail_msg("%s on %s: webhook \"%s\", filter \"%s\"", what, node,
				         pc.text, ext.text);
		}
		assert_int_equal(pending(node), 0); /* dry runs reserve nothing */
	}
	cJSON *gone = cJSON_DetachItemFromArray(E.fake.pods, cJSON_GetArraySize(E.fake.pods) - 1);
	cJSON_Delete(gone);
	assert_int_equal(cache_apply_pod(E.cache, WATCH_DELETED, pod), 0);
}

static void check_agree(const char *what, cJSON *pod)
{
	check_agree_on(what, pod, NODES, N_NODES);
}

/* A pod file of test/data (a Pod, or an AdmissionReview whose request.object is one), given
 * namespace ml when none, a uid when none, unbound and Pending. Caller deletes. */
static cJSON *pod_from(const char *file)
{
	cJSON *j = fixture_json(file);
	cJSON *req = cJSON_GetObjectItemCaseSensitive(j, "request");
	cJSON *pod = j;
	if (req != NULL) {
		pod = cJSON_DetachItemFromObjectCaseSensitive(req, "object");
		cJSON_Delete(j);
	}
	cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	if (!cJSON_HasObjectItem(md, "namespace"))
		cJSON_AddStringToObject(md, "namespace", "ml");
	if (!cJSON_HasObjectItem(md, "uid")) {
		char uid[128];
		snprintf(uid, sizeof(uid), "uid-%s", meta(pod, "name"));
		cJSON_AddStringToObject(md, "uid", uid);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
	                                        "nodeName");
	cJSON_DeleteItemFromObjectCaseSensitive(pod, "status");
	cJSON *st = cJSON_AddObjectToObject(pod, "status");
	cJSON_AddStringToObject(st, "phase", "Pending");
	return pod;
}

static void check_file(const char *file)
{
	cJSON *pod = pod_from(file);
	check_agree(file, pod);
	cJSON_Delete(pod);
}

/* ---- tests ---- */

static void test_real_workloads(void **state)
{
	static const char *const files[] = {
	    "agree/cuda-vectoradd.json", "agree/hami.json",           "agree/kai.json",
	    "agree/kserve-vllm.json",    "agree/kuberay-worker.json", "agree/tgi.json",
	    "agree/vllm-docs.json",      "agree/vllm-shell.json",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		check_file(files[i]);
	assert_int_equal(E.fake.n_calls > 0, 1);
}

static void test_fixture_pods(void **state)
{
	(void)state;
	check_file("review-pod-create-nodename.json");
	check_file("review-pod-create-unscheduled.json");
	check_file("review-pod-create-init-and-sidecar.json");
	check_file("review-pod-create-dryrun.json");
}

/* An edit of the vLLM pod: fn changes it. */
static void check_edited(const char *what, void (*fn)(cJSON *pod))
{
	cJSON *pod = pod_from("agree/vllm-shell.json");
	fn(pod);
	check_agree(what, pod);
	cJSON_Delete(pod);
}

static cJSON *container0(cJSON *pod)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
	                              cJSON_GetObjectItemCaseSensitive(pod, "spec"), "containers"),
	                          0);
}

static void set_env(cJSON *pod, const char *name, const char *value)
{
	cJSON *c = container0(pod);
	cJSON *env = cJSON_GetObjectItemCaseSensitive(c, "env");
	if (env == NULL)
		env = cJSON_AddArrayToObject(c, "env");
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "name", name);
	cJSON_AddStringToObject(e, "value", value);
	cJSON_AddItemToArray(env, e);
}

static void bad_declaration(cJSON *pod)
{
	set_env(pod, "GPU_MEMORY_LIMIT", "lots");
}

static void huge_declaration(cJSON *pod)
{
	set_env(pod, "GPU_MEMORY_LIMIT", "100Gi");
}

static void small_declaration(cJSON *pod)
{
	set_env(pod, "GPU_MEMORY_LIMIT", "4Gi");
}

static void mirror(cJSON *pod)
{
	bad_declaration(pod);
	cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	cJSON *ann = cJSON_AddObjectToObject(md, "annotations");
	cJSON_AddStringToObject(ann, "kubernetes.io/config.mirror", "abc");
}

static void exempt(cJSON *pod)
{
	huge_declaration(pod);
	cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	cJSON_ReplaceItemInObjectCaseSensitive(md, "namespace", cJSON_CreateString("kube-system"));
}

static void not_gpu(cJSON *pod)
{
	cJSON *c = container0(pod);
	cJSON_DeleteItemFromObjectCaseSensitive(c, "resources");
}

static void test_shapes(void **state)
{
	(void)state;
	check_edited("bad-declaration", bad_declaration);
	check_edited("huge-declaration", huge_declaration);
	check_edited("small-declaration", small_declaration);
	check_edited("mirror", mirror);
	check_edited("exempt", exempt);
	check_edited("not-gpu", not_gpu);
}

/* ---- DRA ---- */

static const char *const DRA_NODES[] = {"dra-free", "dra-held", "n-room", "n-empty"};

static void add_dra(void)
{
	char err[256];
	E.dra = dra_store_new(NULL, NULL, NULL);
	assert_non_null(E.dra);
	for (int i = 0; i < 2; i++) {
		char text[1024];
		const char *n = DRA_NODES[i];
		snprintf(text, sizeof(text),
		         "{\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"uid\":\"%s\"}}", n, n);
		cJSON *node = cJSON_Parse(text);
		assert_int_equal(cache_apply_node(E.cache, WATCH_ADDED, node), 0);
		cJSON_AddItemToArray(E.fake.nodes, node);
		snprintf(
		    text, sizeof(text),
		    "{\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"%s-gpu\"},\"spec\":{"
		    "\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"%s\",\"pool\":{\"name\":\"%s\"},"
		    "\"devices\":[{\"name\":\"gpu-0\",\"attributes\":{\"type\":{\"string\":\"gpu\"}"
		    "},\"capacity\":{\"memory\":{\"value\":\"81559Mi\"}}}]}}",
		    n, n, n);
		cJSON *sl = cJSON_Parse(text);
		assert_int_equal(dra_store_apply_slice(E.dra, WATCH_ADDED, sl, err, sizeof(err)),
		                 0);
		cJSON_Delete(sl);
	}
	cJSON *claim = cJSON_Parse(
	    "{\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"other\",\"namespace\":\"ml\","
	    "\"uid\":\"c1\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":"
	    "\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"dra-held\",\"device\":\"gpu-0\"}]}},"
	    "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p\",\"uid\":\"p1\"}]}}");
	assert_int_equal(dra_store_apply_claim(E.dra, WATCH_ADDED, claim, err, sizeof(err)), 0);
	cJSON_Delete(claim);
	E.wcfg.dra = E.dra;
	build();
}

static void check_dra(const char *what, const char *text)
{
	cJSON *pod = cJSON_Parse(text);
	assert_non_null(pod);
	check_agree_on(what, pod, DRA_NODES, 4);
	cJSON_Delete(pod);
}

#define DRA_SPEC_POD(name, extra_spec, limits)                                                     \
	"{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"ml\",\"uid\":\"uid-" name "\"},"     \
	"\"spec\":{" extra_spec "\"containers\":[{\"name\":\"main\",\"resources\":{" limits        \
	"\"claims\":[{\"name\":\"gpu\"}]}}]},\"status\":{\"phase\":\"Pending\"}}"

/* DRA-claims-only pods are judged per node, alike by all five. */
static void test_dra_claims(void **state)
{
	(void)state;
	add_dra();
	check_dra(
	    "dra-template",
	    DRA_SPEC_POD("dra-t",
	                 "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
	                 "\"one-gpu\"}],",
	                 ""));
	check_dra("dra-direct",
	          DRA_SPEC_POD("dra-d",
	                       "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":"
	                       "\"mine\"}],",
	                       ""));
	check_dra(
	    "dra-mixed",
	    DRA_SPEC_POD("dra-m",
	                 "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
	                 "\"one-gpu\"}],",
	                 "\"limits\":{\"nvidia.com/gpu\":\"1\"},"));
}

/* A pod naming more claims than dra_pod_refs reads (DRA_POD_CLAIMS): invalid for the pod
 * CREATE, the API path and the extender; the cached Binding must not admit it. */
static void test_dra_too_many_claims(void **state)
{
	char spec[8192] = "\"resourceClaims\":[";
	(void)state;
	add_dra();
	for (int i = 0; i <= DRA_POD_CLAIMS; i++) {
		char one[128];
		snprintf(one, sizeof(one),
		         "%s{\"name\":\"c%d\",\"resourceClaimName\":\"claim-%d\"}", i ? "," : "", i,
		         i);
		strcat(spec, one);
	}
	strcat(spec, "],");
	char *text = malloc(16384);
	assert_non_null(text);
	snprintf(text, 16384, DRA_SPEC_POD("dra-many", "%s", ""), spec);
	check_dra("dra-too-many", text);
	free(text);
}

/* --mode warn and --mode audit: the webhook admits every placement, the filter passes every
 * node (refused by enforce or not). */
static void test_modes(void **state)
{
	(void)state;
	for (int audit = 0; audit < 2; audit++) {
		E.wcfg.mode_warn = !audit;
		E.wcfg.mode_audit = audit;
		build();
		check_file("agree/hami.json");
		check_file("review-pod-create-nodename.json");
		check_edited("bad-declaration", bad_declaration);
	}
}

/* ---- forged and replayed calls ---- */

/* A 1-GPU pod ml/name (uid) declaring limit, unbound, as text. */
static cJSON *gpu_pod(const char *ns, const char *name, const char *uid, const char *limit)
{
	char text[768];
	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"%s\"},"
	         "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
	         "\"limits\":{\"nvidia.com/gpu\":\"1\"}},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\","
	         "\"value\":\"%s\"}]}]},\"status\":{\"phase\":\"Pending\"}}",
	         name, ns, uid, limit);
	cJSON *p = cJSON_Parse(text);
	assert_non_null(p);
	return p;
}

/* x (cached: 40Gi) is filtered on n-empty with bodies that state less, another namespace,
 * another uid, and replayed; each time y (40Gi) must then fail n-empty: x holds 40Gi there
 * (80Gi > 72Gi), whatever the bodies say. Nothing is reserved. */
static void test_forged_filter_bodies(void **state)
{
	(void)state;
	cJSON *x = gpu_pod("ml", "x", "uid-x", "40Gi");
	cJSON *y = gpu_pod("ml", "y", "uid-y", "40Gi");
	assert_int_equal(cache_apply_pod(E.cache, WATCH_ADDED, x), 0);
	assert_int_equal(cache_apply_pod(E.cache, WATCH_ADDED, y), 0);
	struct verdict v = filter(x, "n-empty");
	assert_true(v.allowed);
	assert_false(filter(y, "n-empty").allowed);
	/* the body claims 1Gi: passes, and x still holds its 40Gi */
	cJSON *small = gpu_pod("ml", "x", "uid-x", "1Gi");
	assert_true(filter(small, "n-empty").allowed);
	assert_false(filter(y, "n-empty").allowed);
	/* no GPU at all in the body: passes, the hold stands */
	cJSON *none = cJSON_Parse("{\"metadata\":{\"name\":\"x\",\"namespace\":\"ml\",\"uid\":"
	                          "\"uid-x\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
	assert_true(filter(none, "n-empty").allowed);
	assert_false(filter(y, "n-empty").allowed);
	/* another namespace, another uid, a huge one that fails n-empty (passes nowhere) */
	cJSON *other_ns = gpu_pod("other", "x", "uid-x", "1Gi");
	cJSON *other_uid = gpu_pod("ml", "x", "uid-forged", "1Gi");
	cJSON *huge = gpu_pod("ml", "x", "uid-x", "79Gi");
	assert_true(filter(other_ns, "n-empty").allowed);
	assert_false(filter(y, "n-empty").allowed);
	assert_true(filter(other_uid, "n-empty").allowed);
	assert_false(filter(y, "n-empty").allowed);
	assert_false(filter(huge, "n-empty").allowed);
	assert_false(filter(y, "n-empty").allowed);
	/* replayed: held once (y of 30Gi fits beside 40Gi: 70Gi) */
	assert_true(filter(x, "n-empty").allowed);
	assert_true(filter(x, "n-empty").allowed);
	cJSON *y30 = gpu_pod("ml", "y", "uid-y", "30Gi");
	assert_true(filter(y30, "n-empty").allowed);
	assert_int_equal(pending("n-empty"), 0);
	/* the webhook: x's Binding with a body-less claim is x's own 40Gi, and y's then fails */
	E.wcfg.cache_fresh = fresh;
	cJSON *b = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(b, "metadata");
	cJSON_AddStringToObject(md, "name", "x");
	cJSON_AddStringToObject(md, "namespace", "ml");
	cJSON_AddStringToObject(md, "uid", "uid-x");
	cJSON *t = cJSON_AddObjectToObject(b, "target");
	cJSON_AddStringToObject(t, "kind", "Node");
	cJSON_AddStringToObject(t, "name", "n-empty");
	cJSON *r = review_of("Binding", "ml", "x", b);
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "request"),
	                                        "dryRun");
	assert_true(review(r).allowed);
	assert_int_equal(pending("n-empty"), 40ull << 30);
	assert_false(filter(y, "n-empty").allowed);
	cJSON *objs[] = {x, y, small, none, other_ns, other_uid, huge, y30};
	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
		cJSON_Delete(objs[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_real_workloads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fixture_pods, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shapes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dra_claims, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dra_too_many_claims, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_forged_filter_bodies, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_modes, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
