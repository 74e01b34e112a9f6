/*
 * Unit tests for lib/cluster/cache: the watch cache's store, driven with Pod and Node objects
 * (the fixtures of test/data and built ones) and with recorded watch streams fed through the
 * watch decoder, cut mid-line, as the informer does. Each test checks the node view (pods,
 * sums, capacity), cache_get_pod, the stats and every gone callback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "dra.h"
#include "fixture.h"
#include "labelset.h"
#include "monotime.h"
#include "watch.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)
#define EIB (1024ull * 1024ull * 1024ull * GIB)

/* ---- gone callback log ---- */

#define GONE_MAX 64

struct gone_log {
	int n; /* every call; the first GONE_MAX are kept */
	char key[GONE_MAX][CACHE_KEY_MAX];
	char uid[GONE_MAX][CACHE_UID_MAX];
};

static void on_gone(void *ctx, const char *key, const char *uid)
{
	struct gone_log *g = ctx;

	assert_non_null(key);
	assert_non_null(uid);
	if (g->n < GONE_MAX) {
		snprintf(g->key[g->n], sizeof(g->key[0]), "%s", key);
		snprintf(g->uid[g->n], sizeof(g->uid[0]), "%s", uid);
	}
	g->n++;
}

/* How many calls were for key (and uid, when not NULL). */
static int gone_count(const struct gone_log *g, const char *key, const char *uid)
{
	int n = 0;
	for (int i = 0; i < g->n && i < GONE_MAX; i++)
		if (strcmp(g->key[i], key) == 0 && (uid == NULL || strcmp(g->uid[i], uid) == 0))
			n++;
	return n;
}

/* ---- node view copy ---- */

#define VIEW_ITEMS 16

struct view {
	int calls, known, capacity_rc, has_cap;
	char name[CACHE_KEY_MAX];
	char error[CAPACITY_MSG_MAX];
	struct capacity cap;
	size_t n_pods;
	uint64_t declared, undeclared;
	uint64_t sum_bytes, sum_gpus; /* recomputed from the items */
	char keys[VIEW_ITEMS][CACHE_KEY_MAX];
	char uids[VIEW_ITEMS][CACHE_UID_MAX];
	uint64_t bytes[VIEW_ITEMS], gpus[VIEW_ITEMS];
	uint64_t seen_ms[VIEW_ITEMS];
	uint64_t fig_bytes[VIEW_ITEMS]; /* dra_figs[0].bytes, 0 when none */
};

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static void view_copy(void *ctx, const struct cache_node_view *v)
{
	struct view *out = ctx;

	memset(out, 0, sizeof(*out));
	out->calls = 1;
	snprintf(out->name, sizeof(out->name), "%s", v->name);
	out->known = v->known;
	out->capacity_rc = v->capacity_rc;
	out->has_cap = v->cap != NULL;
	if (v->capacity_rc == 0) {
		assert_non_null(v->cap);
		out->cap = *v->cap;
	}
	assert_non_null(v->capacity_error); /* printed by callers: never NULL */
	snprintf(out->error, sizeof(out->error), "%s", v->capacity_error);
	out->n_pods = v->n_pods;
	out->declared = v->declared_bytes;
	out->undeclared = v->undeclared_gpus;
	for (size_t i = 0; i < v->n_pods; i++) {
		out->sum_bytes = add_sat(out->sum_bytes, v->pods[i].bytes);
		out->sum_gpus = add_sat(out->sum_gpus, v->pods[i].undeclared_gpus);
		if (i < VIEW_ITEMS) {
			snprintf(out->keys[i], sizeof(out->keys[i]), "%s", v->pods[i].key);
			snprintf(out->uids[i], sizeof(out->uids[i]), "%s",
			         v->pods[i].uid ? v->pods[i].uid : "");
			out->bytes[i] = v->pods[i].bytes;
			out->gpus[i] = v->pods[i].undeclared_gpus;
			out->seen_ms[i] = v->pods[i].seen_ms;
			out->fig_bytes[i] =
			    v->pods[i].n_dra_figs ? v->pods[i].dra_figs[0].bytes : 0;
		}
	}
}

static struct view view_of(struct cache *c, const char *node)
{
	struct view v;
	memset(&v, 0, sizeof(v));
	cache_with_node(c, node, view_copy, &v);
	assert_int_equal(v.calls, 1);
	assert_string_equal(v.name, node);
	/* the running sums always equal the items' */
	assert_true(v.declared == v.sum_bytes);
	assert_true(v.undeclared == v.sum_gpus);
	return v;
}

/* Index of key among the view's items, -1 when absent. */
static int view_find(const struct view *v, const char *key)
{
	for (size_t i = 0; i < v->n_pods && i < VIEW_ITEMS; i++)
		if (strcmp(v->keys[i], key) == 0)
			return (int)i;
	return -1;
}

static struct cache_stats stats_of(struct cache *c)
{
	struct cache_stats s;
	memset(&s, 0xff, sizeof(s));
	cache_stats(c, &s);
	return s;
}

#define assert_stats(c, p, g, n)                                                                   \
	do {                                                                                       \
		struct cache_stats s_ = stats_of(c);                                               \
		assert_int_equal(s_.pods, (p));                                                    \
		assert_int_equal(s_.gpu_pods, (g));                                                \
		assert_int_equal(s_.nodes, (n));                                                   \
	} while (0)

/* ---- objects ---- */

/* A Pod with one container "main"; NULL leaves a field out. gpus: limits nvidia.com/gpu;
 * mem: env GPU_MEMORY_LIMIT. */
static cJSON *make_pod(const char *ns, const char *name, const char *uid, const char *node,
                       const char *phase, const char *gpus, const char *mem)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "kind", "Pod");
	cJSON_AddStringToObject(p, "apiVersion", "v1");
	cJSON *md = cJSON_AddObjectToObject(p, "metadata");
	if (name != NULL)
		cJSON_AddStringToObject(md, "name", name);
	if (ns != NULL)
		cJSON_AddStringToObject(md, "namespace", ns);
	if (uid != NULL)
		cJSON_AddStringToObject(md, "uid", uid);
	cJSON_AddStringToObject(md, "resourceVersion", "1000");
	cJSON *spec = cJSON_AddObjectToObject(p, "spec");
	if (node != NULL)
		cJSON_AddStringToObject(spec, "nodeName", node);
	cJSON *ctr = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), ctr);
	cJSON_AddStringToObject(ctr, "name", "main");
	cJSON_AddStringToObject(ctr, "image", "vllm/vllm-openai:v0.11.0");
	cJSON *lim = cJSON_AddObjectToObject(cJSON_AddObjectToObject(ctr, "resources"), "limits");
	cJSON_AddStringToObject(lim, "cpu", "4");
	if (gpus != NULL)
		cJSON_AddStringToObject(lim, "nvidia.com/gpu", gpus);
	if (mem != NULL) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddItemToArray(cJSON_AddArrayToObject(ctr, "env"), e);
		cJSON_AddStringToObject(e, "name", "GPU_MEMORY_LIMIT");
		cJSON_AddStringToObject(e, "value", mem);
	}
	if (phase != NULL)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "status"), "phase", phase);
	return p;
}

/* Apply a built pod and free it. */
static int pod_ev(struct cache *c, enum watch_event_type t, const char *ns, const char *name,
                  const char *uid, const char *node, const char *phase, const char *gpus,
                  const char *mem)
{
	cJSON *p = make_pod(ns, name, uid, node, phase, gpus, mem);
	int rc = cache_apply_pod(c, t, p);
	cJSON_Delete(p);
	return rc;
}

/* A Node; NULL leaves a label or annotation out. Allocatable nvidia.com/gpu is 8. */
static cJSON *make_node(const char *name, const char *mem_label, const char *count_label,
                        const char *mem_annotation)
{
	cJSON *n = cJSON_CreateObject();
	cJSON_AddStringToObject(n, "kind", "Node");
	cJSON_AddStringToObject(n, "apiVersion", "v1");
	cJSON *md = cJSON_AddObjectToObject(n, "metadata");
	cJSON_AddStringToObject(md, "name", name);
	cJSON *labels = cJSON_AddObjectToObject(md, "labels");
	cJSON_AddStringToObject(labels, "kubernetes.io/hostname", name);
	if (mem_label != NULL)
		cJSON_AddStringToObject(labels, "nvidia.com/gpu.memory", mem_label);
	if (count_label != NULL)
		cJSON_AddStringToObject(labels, "nvidia.com/gpu.count", count_label);
	if (mem_annotation != NULL)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "annotations"),
		                        "gpu-memory-guard.io/gpu-memory", mem_annotation);
	cJSON *alloc = cJSON_AddObjectToObject(cJSON_AddObjectToObject(n, "status"), "allocatable");
	cJSON_AddStringToObject(alloc, "nvidia.com/gpu", "8");
	return n;
}

static int node_ev(struct cache *c, enum watch_event_type t, const char *name,
                   const char *mem_label, const char *count_label, const char *mem_annotation)
{
	cJSON *n = make_node(name, mem_label, count_label, mem_annotation);
	int rc = cache_apply_node(c, t, n);
	cJSON_Delete(n);
	return rc;
}

/* ---- watch streams ---- */

struct sink {
	struct cache *c;
	int nodes; /* 1: apply as Nodes */
	int n;
	enum watch_event_type type[64];
	int rc[64];
};

static int sink_fn(void *ctx, enum watch_event_type type, const struct cJSON *obj)
{
	struct sink *s = ctx;
	int rc = s->nodes ? cache_apply_node(s->c, type, obj) : cache_apply_pod(s->c, type, obj);

	assert_true(s->n < 64);
	s->type[s->n] = type;
	s->rc[s->n] = rc;
	s->n++;
	return 0;
}

/* Feed text through a fresh decoder in chunks of `chunk` bytes (cuts fall mid-line). */
static void feed(struct sink *s, const char *text, size_t chunk)
{
	struct watch_decoder *d = watch_decoder_new(0);
	size_t len = strlen(text);
	char err[256];

	assert_non_null(d);
	for (size_t off = 0; off < len; off += chunk) {
		size_t k = len - off < chunk ? len - off : chunk;
		assert_int_equal(watch_decoder_feed(d, text + off, k, sink_fn, s, err, sizeof(err)),
		                 0);
	}
	assert_int_equal(watch_decoder_finish(d, sink_fn, s, err, sizeof(err)), 0);
	watch_decoder_free(d);
}

/* Feed one event line; it must give exactly one event, applied with rc. */
static void feed_one(struct sink *s, const char *line, enum watch_event_type type, int rc)
{
	int before = s->n;
	feed(s, line, strlen(line) / 2 + 1);
	assert_int_equal(s->n, before + 1);
	assert_int_equal(s->type[before], type);
	assert_int_equal(s->rc[before], rc);
}

/* A Node watch as kube-apiserver writes it (objects trimmed to what matters). */
#define NODE_MD(rv, labels, annotations)                                                           \
	"\"metadata\":{\"name\":\"gpu-node-b\",\"uid\":\"22222222-0000-4000-8000-000000000002\","  \
	"\"resourceVersion\":\"" rv                                                                \
	"\",\"labels\":{\"kubernetes.io/hostname\":\"gpu-node-b\"" labels "}" annotations "}"
#define NODE_STATUS ",\"status\":{\"allocatable\":{\"cpu\":\"63500m\",\"nvidia.com/gpu\":\"8\"}}"
#define NODE_EVENT(type, rv, labels, annotations)                                                  \
	"{\"type\":\"" type                                                                        \
	"\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\"," NODE_MD(rv, labels, annotations) \
	    NODE_STATUS "}}\n"

static const char NODE_ADDED[] =
    NODE_EVENT("ADDED", "700",
               ",\"nvidia.com/gpu.memory\":\"81559\",\"nvidia.com/gpu.count\":\"1\","
               "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\"",
               "");
static const char NODE_MORE_GPUS[] =
    NODE_EVENT("MODIFIED", "701",
               ",\"nvidia.com/gpu.memory\":\"81559\",\"nvidia.com/gpu.count\":\"8\","
               "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\"",
               "");
static const char NODE_ANNOTATED[] =
    NODE_EVENT("MODIFIED", "702",
               ",\"nvidia.com/gpu.memory\":\"81559\",\"nvidia.com/gpu.count\":\"8\","
               "\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\"",
               ",\"annotations\":{\"gpu-memory-guard.io/gpu-memory\":\"40Gi\"}");
static const char NODE_GFD_GONE[] = NODE_EVENT("MODIFIED", "703", "", "");
static const char NODE_BAD_LABEL[] =
    NODE_EVENT("MODIFIED", "704", ",\"nvidia.com/gpu.memory\":\"lots\"", "");
static const char NODE_BACK[] =
    NODE_EVENT("MODIFIED", "705", ",\"nvidia.com/gpu.memory\":\"46068\"", "");
static const char NODE_DELETED[] =
    NODE_EVENT("DELETED", "706", ",\"nvidia.com/gpu.memory\":\"46068\"", "");
static const char NODE_BOOKMARK[] =
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"resourceVersion\":\"707\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n";

/* A pod's life in a pods watch: created, scheduled, running, done, deleted. */
#define POD_EVENT(type, rv, node, phase)                                                           \
	"{\"type\":\"" type "\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{" \
	"\"name\":\"vllm-0\",\"namespace\":\"inference\",\"uid\":"                                 \
	"\"7c1f0000-0000-4000-8000-000000000001\",\"resourceVersion\":\"" rv "\","                 \
	"\"labels\":{\"app\":\"vllm\"}},\"spec\":{" node "\"containers\":[{\"name\":\"serve\","    \
	"\"image\":\"vllm/vllm-openai:v0.11.0\",\"resources\":{\"limits\":{\"cpu\":\"4\","         \
	"\"nvidia.com/gpu\":\"1\"},\"requests\":{\"cpu\":\"4\",\"nvidia.com/gpu\":\"1\"}},"        \
	"\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"24Gi\"}]}],\"restartPolicy\":"        \
	"\"Always\",\"schedulerName\":\"default-scheduler\"},\"status\":{\"phase\":\"" phase       \
	"\",\"qosClass\":\"Burstable\"}}}\n"
#define ON_NODE "\"nodeName\":\"gpu-node-a\","
#define POD_UID "7c1f0000-0000-4000-8000-000000000001"

static const char *const POD_LIFE[] = {
    POD_EVENT("ADDED", "5001", "", "Pending"),
    POD_EVENT("MODIFIED", "5002", ON_NODE, "Pending"),
    POD_EVENT("MODIFIED", "5003", ON_NODE, "Running"),
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"resourceVersion\":\"5004\"}}}\n",
    POD_EVENT("MODIFIED", "5005", ON_NODE, "Succeeded"),
    POD_EVENT("MODIFIED", "5006", ON_NODE, "Succeeded"),
    POD_EVENT("DELETED", "5007", ON_NODE, "Succeeded"),
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"too old resource version: 4000 (5007)\",\"reason\":"
    "\"Expired\",\"code\":410}}\n",
};

/* ---- tests ---- */

static void test_new_free(void **state)
{
	const char *const rs[] = {"nvidia.com/gpu", "amd.com/gpu"};
	struct demand_config dcfg = {.gpu_resources = rs, .n_gpu_resources = 2};

	cache_free(NULL);
	struct cache *c = cache_new(&dcfg, NULL, NULL);
	assert_non_null(c);
	assert_stats(c, 0, 0, 0);
	/* the resource names were copied; a GPU pod of the second name counts, no gone set */
	cJSON *p = make_pod("ml", "amd-0", "u1", "n1", "Running", NULL, "8Gi");
	cJSON *lim = cJSON_GetObjectItem(
	    cJSON_GetObjectItem(
	        cJSON_GetArrayItem(
	            cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "containers"), 0),
	        "resources"),
	    "limits");
	cJSON_AddStringToObject(lim, "amd.com/gpu", "1");
	assert_int_equal(cache_apply_pod(c, WATCH_ADDED, p), 0);
	assert_stats(c, 1, 1, 0);
	assert_true(view_of(c, "n1").declared == 8 * GIB);
	assert_int_equal(cache_apply_pod(c, WATCH_DELETED, p), 0);
	cJSON_Delete(p);
	assert_stats(c, 0, 0, 0);
	cache_free(c);
}

static void test_node_fixture(void **state)
{
	struct cache *c = cache_new(NULL, NULL, NULL);
	cJSON *node = fixture_json("node-gpu-node-a.json");

	assert_int_equal(cache_apply_node(c, WATCH_ADDED, node), 0);
	struct view v = view_of(c, "gpu-node-a");
	assert_true(v.known);
	assert_int_equal(v.capacity_rc, 0);
	assert_string_equal(v.error, "");
	/* gpu.memory MiB x gpu.count, not allocatable (4 time-slicing replicas) */
	assert_true(v.cap.per_gpu_bytes == 81559 * MIB);
	assert_true(v.cap.gpu_count == 1);
	assert_true(v.cap.total_bytes == 85520809984ull);
	assert_int_equal(v.cap.memory_source, CAPACITY_SRC_GFD_LABEL);
	assert_int_equal(v.n_pods, 0);
	assert_stats(c, 0, 0, 1);
	cJSON_Delete(node);
	cache_free(c);
}

/* Labels and the annotation change the capacity on MODIFIED; unknown and malformed give the
 * message; DELETED forgets the Node. Fed as a watch stream. */
static void test_node_capacity_stream(void **state)
{
	struct cache *c = cache_new(NULL, NULL, NULL);
	struct sink s = {.c = c, .nodes = 1};
	struct view v;

	v = view_of(c, "gpu-node-b");
	assert_false(v.known);
	assert_int_not_equal(v.capacity_rc, 0);
	assert_false(v.has_cap);
	assert_string_not_equal(v.error, "");

	feed_one(&s, NODE_ADDED, WATCH_ADDED, 0);
	v = view_of(c, "gpu-node-b");
	assert_true(v.known);
	assert_int_equal(v.capacity_rc, 0);
	assert_true(v.cap.per_gpu_bytes == 81559 * MIB);
	assert_true(v.cap.gpu_count == 1);
	assert_true(v.cap.total_bytes == 81559 * MIB);

	feed_one(&s, NODE_MORE_GPUS, WATCH_MODIFIED, 0);
	v = view_of(c, "gpu-node-b");
	assert_true(v.cap.gpu_count == 8);
	assert_true(v.cap.total_bytes == 8 * 81559 * MIB);

	feed_one(&s, NODE_ANNOTATED, WATCH_MODIFIED, 0);
	v = view_of(c, "gpu-node-b");
	assert_true(v.cap.per_gpu_bytes == 40 * GIB);
	assert_int_equal(v.cap.memory_source, CAPACITY_SRC_ANNOTATION);
	assert_true(v.cap.total_bytes == 320 * GIB);

	/* GFD labels removed: no memory source left (the count falls back to allocatable) */
	feed_one(&s, NODE_GFD_GONE, WATCH_MODIFIED, 0);
	v = view_of(c, "gpu-node-b");
	assert_true(v.known);
	assert_int_equal(v.capacity_rc, CAPACITY_EUNKNOWN);
	assert_false(v.has_cap);
	assert_non_null(strstr(v.error, "gpu-node-b"));
	assert_non_null(strstr(v.error, "nvidia.com/gpu.memory"));
	assert_non_null(strstr(v.error, "gpu-memory-guard.io/gpu-memory"));

	feed_one(&s, NODE_BAD_LABEL, WATCH_MODIFIED, 0);
	v = view_of(c, "gpu-node-b");
	assert_int_equal(v.capacity_rc, CAPACITY_EINVALID);
	assert_non_null(strstr(v.error, "nvidia.com/gpu.memory"));

	feed_one(&s, NODE_BACK, WATCH_MODIFIED, 0);
	v = view_of(c, "gpu-node-b");
	assert_int_equal(v.capacity_rc, 0);
	assert_string_equal(v.error, "");
	assert_true(v.cap.per_gpu_bytes == 46068 * MIB);
	assert_true(v.cap.gpu_count == 8); /* allocatable, no count label */
	assert_int_equal(v.cap.count_source, CAPACITY_SRC_ALLOCATABLE);

	feed_one(&s, NODE_BOOKMARK, WATCH_BOOKMARK, 0);
	assert_stats(c, 0, 0, 1);
	assert_true(view_of(c, "gpu-node-b").known);

	feed_one(&s, NODE_DELETED, WATCH_DELETED, 0);
	v = view_of(c, "gpu-node-b");
	assert_false(v.known);
	assert_int_not_equal(v.capacity_rc, 0);
	assert_false(v.has_cap);
	assert_string_not_equal(v.error, "");
	assert_stats(c, 0, 0, 0);
	/* a second DELETE, and a DELETE of a node never seen: nothing */
	feed_one(&s, NODE_DELETED, WATCH_DELETED, 0);
	assert_int_equal(node_ev(c, WATCH_DELETED, "never-seen", "81559", "1", NULL), 0);
	assert_stats(c, 0, 0, 0);

	/* the whole stream at once, byte by byte: same end state */
	struct sink s2 = {.c = c, .nodes = 1};
	char all[8192];
	snprintf(all, sizeof(all), "%s%s%s%s", NODE_ADDED, NODE_MORE_GPUS, NODE_BOOKMARK,
	         NODE_ANNOTATED);
	feed(&s2, all, 1);
	assert_int_equal(s2.n, 4);
	for (int i = 0; i < s2.n; i++)
		assert_int_equal(s2.rc[i], 0);
	v = view_of(c, "gpu-node-b");
	assert_true(v.known);
	assert_true(v.cap.total_bytes == 320 * GIB);
	assert_stats(c, 0, 0, 1);
	cache_free(c);
}

/* The fixture's pods on gpu-node-a: what counts and what does not. */
static void test_pod_list_fixture(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	cJSON *list = fixture_json("podlist-gpu-node-a.json");
	const cJSON *it;
	struct cache_pod p;

	cJSON_ArrayForEach(it, cJSON_GetObjectItem(list, "items"))
	{
		assert_int_equal(cache_apply_pod(c, WATCH_ADDED, it), 0);
	}
	struct view v = view_of(c, "gpu-node-a");
	assert_false(v.known); /* the Node object was not applied */
	assert_int_not_equal(v.capacity_rc, 0);
	assert_int_equal(v.n_pods, 3);
	assert_true(v.declared == 40 * GIB); /* chat-7b-0 + chat-7b-1 (terminating) */
	assert_true(v.undeclared == 1);      /* legacy-notebook: one whole GPU */
	int i0 = view_find(&v, "inference/chat-7b-0");
	int i1 = view_find(&v, "inference/chat-7b-1");
	int nb = view_find(&v, "research/legacy-notebook");
	if (nb < 0)
		nb = view_find(&v, "inference/legacy-notebook");
	assert_true(i0 >= 0 && i1 >= 0 && nb >= 0);
	assert_true(v.bytes[i0] == 20 * GIB);
	assert_string_equal(v.uids[i0], "11111111-0000-4000-8000-000000000001");
	assert_true(v.bytes[nb] == 0);
	assert_true(v.gpus[nb] == 1);

	/* the non-GPU pod is known, not counted */
	const cJSON *ls = cJSON_GetArrayItem(cJSON_GetObjectItem(list, "items"), 4);
	const char *ns =
	    cJSON_GetObjectItem(cJSON_GetObjectItem(ls, "metadata"), "namespace")->valuestring;
	assert_int_equal(cache_get_pod(c, ns, "log-shipper-abcde", &p), 0);
	assert_int_equal(p.demand.status, DEMAND_NOT_GPU);
	assert_string_equal(p.node, "gpu-node-a");
	assert_string_equal(p.uid, "11111111-0000-4000-8000-000000000005");
	assert_false(p.finished);

	/* the Succeeded pod is known, finished, not counted; first seen finished: gone once */
	assert_int_equal(cache_get_pod(c, "inference", "batch-summarize-x7", &p), 0);
	assert_true(p.finished);
	assert_int_equal(p.demand.status, DEMAND_OK);
	assert_true(p.demand.bytes == 30 * GIB);
	assert_int_equal(view_find(&v, "inference/batch-summarize-x7"), -1);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.key[0], "inference/batch-summarize-x7");
	assert_string_equal(g.uid[0], "11111111-0000-4000-8000-000000000003");

	/* the undeclared GPU pod: invalid, with the error a decision quotes */
	cJSON *nbj = cJSON_GetArrayItem(cJSON_GetObjectItem(list, "items"), 3);
	ns = cJSON_GetObjectItem(cJSON_GetObjectItem(nbj, "metadata"), "namespace")->valuestring;
	assert_int_equal(cache_get_pod(c, ns, "legacy-notebook", &p), 0);
	assert_int_equal(p.demand.status, DEMAND_INVALID);
	assert_true(p.demand.gpus == 1);
	assert_non_null(strstr(p.demand.error, "GPU_MEMORY_LIMIT"));

	assert_int_equal(cache_get_pod(c, "inference", "nope", &p), CACHE_ENOTFOUND);
	assert_int_equal(cache_get_pod(c, "other", "chat-7b-0", &p), CACHE_ENOTFOUND);
	assert_stats(c, 5, 4, 0); /* the finished GPU pod is a GPU pod; no Node object */

	/* the list applied again (a relist): nothing changes, no more gone */
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(list, "items"))
	{
		assert_int_equal(cache_apply_pod(c, WATCH_MODIFIED, it), 0);
	}
	v = view_of(c, "gpu-node-a");
	assert_int_equal(v.n_pods, 3);
	assert_true(v.declared == 40 * GIB);
	assert_int_equal(g.n, 1);
	cJSON_Delete(list);
	cache_free(c);
	assert_int_equal(g.n, 1); /* cache_free does not call gone */
}

/* A pod's life fed as a recorded watch stream. */
static void test_pod_life_stream(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	struct sink s = {.c = c};
	struct cache_pod p;
	struct view v;

	assert_int_equal(node_ev(c, WATCH_ADDED, "gpu-node-a", "81559", "1", NULL), 0);

	/* Pending, no nodeName: known, not on any node */
	feed_one(&s, POD_LIFE[0], WATCH_ADDED, 0);
	assert_int_equal(cache_get_pod(c, "inference", "vllm-0", &p), 0);
	assert_string_equal(p.node, "");
	assert_string_equal(p.uid, POD_UID);
	assert_int_equal(p.demand.status, DEMAND_OK);
	assert_true(p.demand.bytes == 24 * GIB);
	assert_true(p.demand.gpus == 1);
	assert_int_equal(view_of(c, "gpu-node-a").n_pods, 0);
	assert_stats(c, 1, 1, 1);

	/* scheduled: counted on the node */
	feed_one(&s, POD_LIFE[1], WATCH_MODIFIED, 0);
	assert_int_equal(cache_get_pod(c, "inference", "vllm-0", &p), 0);
	assert_string_equal(p.node, "gpu-node-a");
	v = view_of(c, "gpu-node-a");
	assert_int_equal(v.n_pods, 1);
	assert_true(v.declared == 24 * GIB);
	assert_string_equal(v.keys[0], "inference/vllm-0");
	assert_string_equal(v.uids[0], POD_UID);

	/* Running: counted once, not twice */
	feed_one(&s, POD_LIFE[2], WATCH_MODIFIED, 0);
	v = view_of(c, "gpu-node-a");
	assert_int_equal(v.n_pods, 1);
	assert_true(v.declared == 24 * GIB);

	feed_one(&s, POD_LIFE[3], WATCH_BOOKMARK, 0);
	assert_int_equal(view_of(c, "gpu-node-a").n_pods, 1);
	assert_stats(c, 1, 1, 1);
	assert_int_equal(g.n, 0);

	/* Succeeded: not counted, gone once; still known */
	feed_one(&s, POD_LIFE[4], WATCH_MODIFIED, 0);
	v = view_of(c, "gpu-node-a");
	assert_int_equal(v.n_pods, 0);
	assert_true(v.declared == 0);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.key[0], "inference/vllm-0");
	assert_string_equal(g.uid[0], POD_UID);
	assert_int_equal(cache_get_pod(c, "inference", "vllm-0", &p), 0);
	assert_true(p.finished);
	assert_string_equal(p.node, "gpu-node-a");

	/* another status update, then the DELETE: gone is not called again */
	feed_one(&s, POD_LIFE[5], WATCH_MODIFIED, 0);
	feed_one(&s, POD_LIFE[6], WATCH_DELETED, 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(cache_get_pod(c, "inference", "vllm-0", &p), CACHE_ENOTFOUND);
	assert_stats(c, 0, 0, 1);

	feed_one(&s, POD_LIFE[7], WATCH_ERROR, 0);
	assert_stats(c, 0, 0, 1);
	assert_int_equal(g.n, 1);

	/* the whole life again, in 7-byte chunks: same outcome */
	struct sink s2 = {.c = c};
	char all[16384] = "";
	for (size_t i = 0; i < sizeof(POD_LIFE) / sizeof(POD_LIFE[0]); i++)
		strcat(all, POD_LIFE[i]);
	feed(&s2, all, 7);
	assert_int_equal(s2.n, 8);
	for (int i = 0; i < s2.n; i++)
		assert_int_equal(s2.rc[i], 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(gone_count(&g, "inference/vllm-0", POD_UID), 2);
	assert_stats(c, 0, 0, 1);
	assert_int_equal(view_of(c, "gpu-node-a").n_pods, 0);
	cache_free(c);
}

static void test_pod_deleted(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	struct cache_pod p;

	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "n1", "Running", "1", "10Gi"), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "b", "ub", "n1", "Running", "2", "30Gi"), 0);
	struct view v = view_of(c, "n1");
	assert_int_equal(v.n_pods, 2);
	assert_true(v.declared == 40 * GIB);

	/* a DELETE of a pod never seen: nothing, no callback */
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "zz", "uz", "n1", "Running", "1", "1Gi"),
	                 0);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "other", "a", "ua", "n1", "Running", "1", "1Gi"),
	                 0);
	assert_int_equal(g.n, 0);
	assert_stats(c, 2, 2, 0);

	/* a DELETE of an older pod of the same name (another uid): the current one stays */
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "a", "old", "n1", "Running", "1", "1Gi"),
	                 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(view_of(c, "n1").n_pods, 2);

	/* DELETE: gone once, not counted, not known */
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "a", "ua", "n1", "Running", "1", "10Gi"),
	                 0);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.key[0], "ml/a");
	assert_string_equal(g.uid[0], "ua");
	v = view_of(c, "n1");
	assert_int_equal(v.n_pods, 1);
	assert_true(v.declared == 30 * GIB);
	assert_string_equal(v.keys[0], "ml/b");
	assert_int_equal(cache_get_pod(c, "ml", "a", &p), CACHE_ENOTFOUND);
	/* deleted twice: the second is a no-op */
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "a", "ua", "n1", "Running", "1", "10Gi"),
	                 0);
	assert_int_equal(g.n, 1);

	/* a DELETE without a uid removes whatever pod has the name; a non-GPU pod too */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "cpu", "uc", "n1", "Running", NULL, NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "b", NULL, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "cpu", "uc", "n1", "Running", NULL, NULL),
	                 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(gone_count(&g, "ml/b", "ub"), 1);
	assert_int_equal(gone_count(&g, "ml/cpu", "uc"), 0); /* no GPU: never reserved */
	v = view_of(c, "n1");
	assert_int_equal(v.n_pods, 0);
	assert_true(v.declared == 0);
	assert_stats(c, 0, 0, 0);
	cache_free(c);
}

/* The same name with another uid: the old pod is replaced (gone called for it). */
static void test_pod_replaced(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	struct cache_pod p;

	assert_int_equal(node_ev(c, WATCH_ADDED, "n1", "81559", "8", NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "web-0", "u1", "n1", "Running", "1", "10Gi"),
	                 0);
	/* a StatefulSet recreates web-0: the DELETE was missed, the new pod arrives */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "web-0", "u2", "n1", "Running", "1", "12Gi"),
	                 0);
	assert_int_equal(g.n, 1);
	assert_string_equal(g.key[0], "ml/web-0");
	assert_string_equal(g.uid[0], "u1");
	struct view v = view_of(c, "n1");
	assert_int_equal(v.n_pods, 1);
	assert_true(v.declared == 12 * GIB);
	assert_string_equal(v.uids[0], "u2");
	assert_int_equal(cache_get_pod(c, "ml", "web-0", &p), 0);
	assert_string_equal(p.uid, "u2");
	assert_true(p.demand.bytes == 12 * GIB);
	assert_stats(c, 1, 1, 1);

	/* the late DELETE of the old one changes nothing */
	assert_int_equal(
	    pod_ev(c, WATCH_DELETED, "ml", "web-0", "u1", "n1", "Running", "1", "10Gi"), 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(view_of(c, "n1").n_pods, 1);

	/* a pod first seen without uid takes the uid of its next event, not replaced */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "x", NULL, "n1", "Running", "1", "1Gi"), 0);
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "x", "ux", "n1", "Running", "1", "1Gi"),
	                 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(cache_get_pod(c, "ml", "x", &p), 0);
	assert_string_equal(p.uid, "ux");

	/* a finished pod replaced: it already had its gone */
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "x", "ux", "n1", "Failed", "1", "1Gi"), 0);
	assert_int_equal(g.n, 2);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "x", "ux2", "n1", "Pending", "1", "1Gi"), 0);
	assert_int_equal(g.n, 2);
	v = view_of(c, "n1");
	assert_int_equal(v.n_pods, 2);
	assert_true(v.declared == 13 * GIB);
	cache_free(c);
}

/* A mirror pod and a pod moving between nodes; the view of a node only pods name. */
static void test_pod_fields(void **state)
{
	struct cache *c = cache_new(NULL, NULL, NULL);
	struct cache_pod p;

	cJSON *m = make_pod("kube-system", "dcgm-n1", "um", "n1", "Running", "1", "2Gi");
	cJSON_AddStringToObject(
	    cJSON_AddObjectToObject(cJSON_GetObjectItem(m, "metadata"), "annotations"),
	    "kubernetes.io/config.mirror", "abc");
	assert_int_equal(cache_apply_pod(c, WATCH_ADDED, m), 0);
	cJSON_Delete(m);
	assert_int_equal(cache_get_pod(c, "kube-system", "dcgm-n1", &p), 0);
	assert_true(p.mirror);

	/* GPUs but an unparseable declaration: undeclared GPUs, the error kept */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "bad", "ub", "n1", "Running", "2", "24"), 0);
	assert_int_equal(cache_get_pod(c, "ml", "bad", &p), 0);
	assert_false(p.mirror);
	assert_int_equal(p.demand.status, DEMAND_INVALID);
	assert_string_not_equal(p.demand.error, "");
	struct view v = view_of(c, "n1");
	assert_false(v.known);
	assert_int_equal(v.n_pods, 2);
	assert_true(v.declared == 2 * GIB);
	assert_true(v.undeclared == 2);

	/* the declaration fixed on MODIFIED (not possible in Kubernetes, but the store follows) */
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "bad", "ub", "n1", "Running", "2", "24Gi"),
	                 0);
	v = view_of(c, "n1");
	assert_true(v.declared == 26 * GIB);
	assert_true(v.undeclared == 0);
	assert_int_equal(cache_get_pod(c, "ml", "bad", &p), 0);
	assert_int_equal(p.demand.status, DEMAND_OK);
	assert_string_equal(p.demand.error, "");
	assert_true(p.demand.max_per_gpu_bytes == 12 * GIB);
	assert_string_equal(p.demand.max_per_gpu_container, "main");

	/* moved to n2 */
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "bad", "ub", "n2", "Running", "2", "24Gi"),
	                 0);
	assert_true(view_of(c, "n1").declared == 2 * GIB);
	assert_true(view_of(c, "n2").declared == 24 * GIB);
	assert_int_equal(cache_get_pod(c, "ml", "bad", &p), 0);
	assert_string_equal(p.node, "n2");
	assert_stats(c, 2, 2, 0);
	cache_free(c);
}

/* BOOKMARK and ERROR never touch the store, whatever object they carry. */
/* A visible pod's seen_ms is when the cache first saw it bound to its node (a shared record
 * drops the pod's entry RECORD_SETTLE_GRACE_MS after it: by then every replica's cache shows
 * the Binding), not when it first saw the pod: a pod Pending for a while gets the time of the
 * event that binds it. Later events of the pod on the same node keep it. */
static void test_seen_when_first_bound(void **state)
{
	struct cache *c = cache_new(NULL, NULL, NULL);
	uint64_t before, after, seen;
	struct view v;
	(void)state;
	assert_non_null(c);
	assert_int_equal(node_ev(c, WATCH_ADDED, "gpu-1", "81920", "1", NULL), 0);
	assert_int_equal(
	    pod_ev(c, WATCH_ADDED, "ml", "late", "uid-late", NULL, "Pending", "1", "10Gi"), 0);
	usleep(20000);
	assert_int_equal(
	    pod_ev(c, WATCH_MODIFIED, "ml", "late", "uid-late", NULL, "Pending", "1", "10Gi"), 0);
	usleep(20000); /* the clock moves on: Pending for 40 ms, then bound */
	before = monotime_ms();
	assert_int_equal(
	    pod_ev(c, WATCH_MODIFIED, "ml", "late", "uid-late", "gpu-1", "Pending", "1", "10Gi"),
	    0);
	after = monotime_ms();
	v = view_of(c, "gpu-1");
	assert_int_equal(v.n_pods, 1);
	seen = v.seen_ms[0];
	if (seen < before || seen > after)
		fail_msg("seen_ms %llu: not the binding event's time [%llu, %llu]",
		         (unsigned long long)seen, (unsigned long long)before,
		         (unsigned long long)after);
	/* Running on the same node, later: unchanged. */
	usleep(20000);
	assert_int_equal(
	    pod_ev(c, WATCH_MODIFIED, "ml", "late", "uid-late", "gpu-1", "Running", "1", "10Gi"),
	    0);
	v = view_of(c, "gpu-1");
	assert_int_equal(v.n_pods, 1);
	assert_int_equal(v.seen_ms[0], seen);
	cache_free(c);
}

static void test_bookmark_error_ignored(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	cJSON *p = make_pod("ml", "a", "ua", "n1", "Running", "1", "10Gi");
	cJSON *n = make_node("n1", "81559", "1", NULL);

	assert_int_equal(cache_apply_pod(c, WATCH_BOOKMARK, p), 0);
	assert_int_equal(cache_apply_pod(c, WATCH_ERROR, p), 0);
	assert_int_equal(cache_apply_node(c, WATCH_BOOKMARK, n), 0);
	assert_int_equal(cache_apply_node(c, WATCH_ERROR, n), 0);
	assert_int_equal(cache_apply_pod(c, WATCH_BOOKMARK, NULL), 0);
	assert_int_equal(cache_apply_node(c, WATCH_ERROR, NULL), 0);
	assert_int_equal(cache_apply_pod(c, (enum watch_event_type)0, p), 0);
	assert_stats(c, 0, 0, 0);
	assert_false(view_of(c, "n1").known);

	assert_int_equal(cache_apply_pod(c, WATCH_ADDED, p), 0);
	assert_int_equal(cache_apply_node(c, WATCH_ADDED, n), 0);
	assert_int_equal(cache_apply_pod(c, WATCH_ERROR, p), 0);
	assert_int_equal(cache_apply_node(c, WATCH_BOOKMARK, n), 0);
	assert_stats(c, 1, 1, 1);
	assert_int_equal(view_of(c, "n1").n_pods, 1);
	assert_int_equal(g.n, 0);

	/* the same through a stream: a bookmark, a 410 */
	struct sink s = {.c = c};
	feed(
	    &s,
	    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":"
	    "\"9\"}}}\n\r\n{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n",
	    5);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.rc[0], 0);
	assert_int_equal(s.rc[1], 0);
	assert_stats(c, 1, 1, 1);
	cJSON_Delete(p);
	cJSON_Delete(n);
	cache_free(c);
}

static void test_resync_pods(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	struct cache_pod p;

	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "n1", "Running", "1", "10Gi"), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "b", "ub", "n1", "Running", "1", "20Gi"), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "cpu", "uc", "n1", "Running", NULL, NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "pend", "up", NULL, "Pending", "1", "5Gi"),
	                 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "done", "ud", "n1", "Succeeded", "1", "5Gi"),
	                 0);
	assert_int_equal(g.n, 1); /* "done" */
	assert_stats(c, 5, 4, 0);

	cache_resync_begin(c, CACHE_PODS);
	/* the relist shows a, the non-GPU pod and a new one; until end, the old ones still count */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "n1", "Running", "1", "10Gi"), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "cpu", "uc", "n1", "Running", NULL, NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "new", "un", "n1", "Running", "1", "1Gi"), 0);
	struct view v = view_of(c, "n1");
	assert_int_equal(v.n_pods, 3);
	assert_true(v.declared == 31 * GIB);
	/* a node resync in between leaves pods alone */
	cache_resync_begin(c, CACHE_NODES);
	assert_int_equal(cache_resync_end(c, CACHE_NODES), 0);
	assert_int_equal(cache_resync_end(c, CACHE_PODS), 3); /* b, pend, done */

	/* gone for b and pend; not again for done (already reported when it finished) */
	assert_int_equal(g.n, 3);
	assert_int_equal(gone_count(&g, "ml/b", "ub"), 1);
	assert_int_equal(gone_count(&g, "ml/pend", "up"), 1);
	assert_int_equal(gone_count(&g, "ml/done", "ud"), 1);
	v = view_of(c, "n1");
	assert_int_equal(v.n_pods, 2);
	assert_true(v.declared == 11 * GIB);
	assert_int_equal(cache_get_pod(c, "ml", "b", &p), CACHE_ENOTFOUND);
	assert_int_equal(cache_get_pod(c, "ml", "pend", &p), CACHE_ENOTFOUND);
	assert_int_equal(cache_get_pod(c, "ml", "done", &p), CACHE_ENOTFOUND);
	assert_int_equal(cache_get_pod(c, "ml", "cpu", &p), 0);
	assert_int_equal(cache_get_pod(c, "ml", "new", &p), 0);
	assert_stats(c, 3, 2, 0);

	/* a resync that lists everything removes nothing; an empty list removes all */
	cache_resync_begin(c, CACHE_PODS);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "n1", "Running", "1", "10Gi"), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "cpu", "uc", "n1", "Running", NULL, NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "new", "un", "n1", "Running", "1", "1Gi"), 0);
	assert_int_equal(cache_resync_end(c, CACHE_PODS), 0);
	assert_int_equal(g.n, 3);
	cache_resync_begin(c, CACHE_PODS);
	assert_int_equal(cache_resync_end(c, CACHE_PODS), 3);
	assert_int_equal(g.n, 5); /* a and new; not the non-GPU pod */
	assert_stats(c, 0, 0, 0);
	v = view_of(c, "n1");
	assert_int_equal(v.n_pods, 0);
	assert_true(v.declared == 0);
	/* end without begin: nothing */
	assert_int_equal(cache_resync_end(c, CACHE_PODS), 0);
	cache_free(c);
}

/* A pod that asks no GPU resource but names DRA claims may hold a reservation (its GPUs may be
 * claims only): its going is reported, on a DELETED event and when a resync drops it; a plain
 * CPU pod's is not. */
static void test_dra_pod_gone(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	static const char *const pods[] = {
	    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"dra-a\",\"uid\":\"u-a\"},\"spec\":{"
	    "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"claim-a\"}],"
	    "\"containers\":[{\"name\":\"main\"}]}}",
	    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"dra-b\",\"uid\":\"u-b\"},\"spec\":{"
	    "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"claim-b\"}],"
	    "\"containers\":[{\"name\":\"main\"}]}}",
	};
	cJSON *j[2];

	(void)state;
	assert_non_null(c);
	for (int i = 0; i < 2; i++) {
		assert_non_null(j[i] = cJSON_Parse(pods[i]));
		assert_int_equal(cache_apply_pod(c, WATCH_ADDED, j[i]), 0);
	}
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "cpu", "u-c", NULL, "Pending", NULL, NULL),
	                 0);
	assert_int_equal(cache_apply_pod(c, WATCH_DELETED, j[0]), 0);
	assert_int_equal(gone_count(&g, "ml/dra-a", "u-a"), 1);
	cache_resync_begin(c, CACHE_PODS); /* the relist shows neither dra-b nor cpu */
	assert_int_equal(cache_resync_end(c, CACHE_PODS), 2);
	assert_int_equal(gone_count(&g, "ml/dra-b", "u-b"), 1);
	assert_int_equal(g.n, 2);
	for (int i = 0; i < 2; i++)
		cJSON_Delete(j[i]);
	cache_free(c);
}

static void test_resync_nodes(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);

	assert_int_equal(node_ev(c, WATCH_ADDED, "n1", "81559", "1", NULL), 0);
	assert_int_equal(node_ev(c, WATCH_ADDED, "n2", "81559", "1", NULL), 0);
	assert_int_equal(node_ev(c, WATCH_ADDED, "n3", NULL, NULL, NULL), 0); /* unknown capacity */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "n2", "Running", "1", "10Gi"), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "c", "uc", "n3", "Running", NULL, NULL), 0);
	/* a pod on a node whose Node object was never seen: not a Node to resync */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "g", "ug", "ghost", "Running", "1", "1Gi"),
	                 0);
	assert_stats(c, 3, 2, 3);

	cache_resync_begin(c, CACHE_NODES);
	assert_int_equal(node_ev(c, WATCH_ADDED, "n1", "81559", "2", NULL), 0);
	assert_int_equal(node_ev(c, WATCH_ADDED, "n4", "46068", "1", NULL), 0);
	assert_true(view_of(c, "n2").known);                   /* until end */
	assert_int_equal(cache_resync_end(c, CACHE_NODES), 2); /* n2, n3 */
	assert_int_equal(g.n, 0);                              /* nodes have no gone */

	struct view v = view_of(c, "n1");
	assert_true(v.known);
	assert_true(v.cap.gpu_count == 2);
	assert_true(view_of(c, "n4").known);
	/* n2: unknown now, its pod still counted (the safe side) */
	v = view_of(c, "n2");
	assert_false(v.known);
	assert_int_not_equal(v.capacity_rc, 0);
	assert_false(v.has_cap);
	assert_string_not_equal(v.error, "");
	assert_int_equal(v.n_pods, 1);
	assert_true(v.declared == 10 * GIB);
	v = view_of(c, "n3");
	assert_false(v.known);
	assert_int_equal(v.n_pods, 0);
	/* the non-GPU pod on the forgotten n3 still reads its node */
	struct cache_pod p;
	assert_int_equal(cache_get_pod(c, "ml", "c", &p), 0);
	assert_string_equal(p.node, "n3");
	assert_stats(c, 3, 2, 2);

	/* the ghost node is not a Node object: resync does not count it */
	cache_resync_begin(c, CACHE_NODES);
	assert_int_equal(cache_resync_end(c, CACHE_NODES), 2); /* n1, n4 */
	assert_stats(c, 3, 2, 0);
	assert_int_equal(view_of(c, "ghost").n_pods, 1);
	/* the pods still move and go */
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "c", "uc", "n3", "Running", NULL, NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "a", "ua", "n1", "Running", "1", "10Gi"),
	                 0);
	assert_int_equal(view_of(c, "n1").n_pods, 1);
	assert_int_equal(view_of(c, "n2").n_pods, 0);
	cache_free(c);
}

struct visits {
	int n;
	char names[8][64];
	int known[8], rc[8];
	size_t n_pods[8];
};

static void visit(void *ctx, const struct cache_node_view *v)
{
	struct visits *vs = ctx;
	assert_true(vs->n < 8);
	snprintf(vs->names[vs->n], sizeof(vs->names[0]), "%s", v->name);
	vs->known[vs->n] = v->known;
	vs->rc[vs->n] = v->capacity_rc;
	vs->n_pods[vs->n] = v->n_pods;
	vs->n++;
}

static int visited(const struct visits *vs, const char *name)
{
	for (int i = 0; i < vs->n; i++)
		if (strcmp(vs->names[i], name) == 0)
			return i;
	return -1;
}

static void test_each_gpu_node_and_stats(void **state)
{
	struct cache *c = cache_new(NULL, NULL, NULL);
	struct visits vs = {0};

	cache_each_gpu_node(c, visit, &vs);
	assert_int_equal(vs.n, 0);

	assert_int_equal(node_ev(c, WATCH_ADDED, "gpu-a", "81559", "8", NULL), 0); /* capacity */
	assert_int_equal(node_ev(c, WATCH_ADDED, "cpu-1", NULL, NULL, NULL), 0);   /* none */
	assert_int_equal(node_ev(c, WATCH_ADDED, "cpu-2", NULL, NULL, NULL), 0);   /* GPU pod */
	assert_int_equal(node_ev(c, WATCH_ADDED, "cpu-3", NULL, NULL, NULL), 0);   /* CPU pod */
	assert_int_equal(node_ev(c, WATCH_ADDED, "bad", "lots", NULL, NULL), 0);   /* invalid */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "g", "ug", "cpu-2", "Running", "1", "4Gi"),
	                 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "w", "uw", "cpu-3", "Running", NULL, NULL),
	                 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "f", "uf", "cpu-1", "Failed", "1", "4Gi"), 0);
	/* GPU pods on a node never seen: not visited (no Node object) */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "h", "uh", "ghost", "Running", "1", "4Gi"),
	                 0);
	cache_each_gpu_node(c, visit, &vs);
	assert_int_equal(vs.n, 2);
	int a = visited(&vs, "gpu-a"), b = visited(&vs, "cpu-2");
	assert_true(a >= 0 && b >= 0);
	assert_true(vs.known[a] && vs.known[b]);
	assert_int_equal(vs.rc[a], 0);
	assert_int_not_equal(vs.rc[b], 0);
	assert_int_equal(vs.n_pods[a], 0);
	assert_int_equal(vs.n_pods[b], 1);
	assert_stats(c, 4, 3, 5);

	/* gpu-a deleted, cpu-2's pod gone: none left */
	assert_int_equal(node_ev(c, WATCH_DELETED, "gpu-a", NULL, NULL, NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "g", "ug", "cpu-2", "Running", "1", "4Gi"),
	                 0);
	memset(&vs, 0, sizeof(vs));
	cache_each_gpu_node(c, visit, &vs);
	assert_int_equal(vs.n, 0);
	assert_stats(c, 3, 2, 4);
	cache_free(c);
}

/* Many pods on one node, added, changed and removed in random order: the sums and the items
 * follow a model (the swap-remove slot bookkeeping). */
#define RAND_PODS 300

struct items_copy {
	size_t n;
	uint64_t declared, undeclared;
	int idx[RAND_PODS + 1];
	uint64_t bytes[RAND_PODS + 1], gpus[RAND_PODS + 1];
	char uid[RAND_PODS + 1][CACHE_UID_MAX];
};

static void items_copy(void *ctx, const struct cache_node_view *v)
{
	struct items_copy *ic = ctx;
	ic->n = v->n_pods;
	ic->declared = v->declared_bytes;
	ic->undeclared = v->undeclared_gpus;
	for (size_t i = 0; i < v->n_pods && i <= RAND_PODS; i++) {
		int k = -1;
		sscanf(v->pods[i].key, "rnd/p-%d", &k);
		ic->idx[i] = k;
		ic->bytes[i] = v->pods[i].bytes;
		ic->gpus[i] = v->pods[i].undeclared_gpus;
		snprintf(ic->uid[i], sizeof(ic->uid[i]), "%s",
		         v->pods[i].uid ? v->pods[i].uid : "");
	}
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

enum { ABSENT = 0, COUNTED, FINISHED, CPU };

struct model {
	int st[RAND_PODS];
	int gen[RAND_PODS];
	uint64_t bytes[RAND_PODS], gpus[RAND_PODS];
	int gone_expected;
};

static void model_apply(struct cache *c, struct model *m, int i, enum watch_event_type t,
                        const char *phase)
{
	char name[32], uid[32], mem[32], gpus[8];
	int kind = i % 10; /* 0: non-GPU; 1: undeclared (i%3+1 GPUs); else declared */

	snprintf(name, sizeof(name), "p-%d", i);
	snprintf(uid, sizeof(uid), "uid-%d-%d", i, m->gen[i]);
	snprintf(gpus, sizeof(gpus), "%d", i % 3 + 1);
	uint64_t mib = (rnd() % 4096 + 1) * 64;
	snprintf(mem, sizeof(mem), "%lluMi", (unsigned long long)mib);
	assert_int_equal(pod_ev(c, t, "rnd", name, uid, "gpu-node-r", phase,
	                        kind == 0 ? NULL : gpus, kind <= 1 ? NULL : mem),
	                 0);
	if (t == WATCH_DELETED) {
		if (m->st[i] == COUNTED) /* pods that ask for no GPU are not reported */
			m->gone_expected++;
		m->st[i] = ABSENT;
		m->gen[i]++;
		return;
	}
	if (strcmp(phase, "Succeeded") == 0) {
		if (m->st[i] != FINISHED && kind != 0)
			m->gone_expected++;
		m->st[i] = FINISHED;
		return;
	}
	m->st[i] = kind == 0 ? CPU : COUNTED;
	m->bytes[i] = kind <= 1 ? 0 : mib * MIB;
	m->gpus[i] = kind == 1 ? (uint64_t)(i % 3 + 1) : 0;
}

static void model_check(struct cache *c, const struct model *m)
{
	static struct items_copy ic;
	static int seen[RAND_PODS];
	size_t n = 0, pods = 0, gpu_pods = 0;
	uint64_t declared = 0, undeclared = 0;

	for (int i = 0; i < RAND_PODS; i++) {
		if (m->st[i] != ABSENT)
			pods++;
		if (m->st[i] != ABSENT && i % 10 != 0)
			gpu_pods++;
		if (m->st[i] == COUNTED) {
			n++;
			declared += m->bytes[i];
			undeclared += m->gpus[i];
		}
	}
	memset(&ic, 0, sizeof(ic));
	cache_with_node(c, "gpu-node-r", items_copy, &ic);
	assert_int_equal(ic.n, n);
	assert_true(ic.declared == declared);
	assert_true(ic.undeclared == undeclared);
	memset(seen, 0, sizeof(seen));
	for (size_t k = 0; k < ic.n; k++) {
		int i = ic.idx[k];
		char uid[32];
		assert_true(i >= 0 && i < RAND_PODS);
		assert_false(seen[i]); /* each pod once */
		seen[i] = 1;
		assert_int_equal(m->st[i], COUNTED);
		assert_true(ic.bytes[k] == m->bytes[i]);
		assert_true(ic.gpus[k] == m->gpus[i]);
		snprintf(uid, sizeof(uid), "uid-%d-%d", i, m->gen[i]);
		assert_string_equal(ic.uid[k], uid);
	}
	assert_stats(c, pods, gpu_pods, 0);
}

static void test_many_pods_random(void **state)
{
	static struct model m;
	static int order[RAND_PODS];
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);

	memset(&m, 0, sizeof(m));
	for (int i = 0; i < RAND_PODS; i++)
		order[i] = i;
	for (int i = RAND_PODS - 1; i > 0; i--) {
		int j = (int)(rnd() % (uint64_t)(i + 1)), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int i = 0; i < RAND_PODS; i++) {
		model_apply(c, &m, order[i], WATCH_ADDED, "Running");
		if (i % 17 == 0)
			model_check(c, &m);
	}
	model_check(c, &m);

	for (int step = 0; step < 4000; step++) {
		int i = (int)(rnd() % RAND_PODS);
		uint64_t op = rnd() % 8;
		if (m.st[i] == ABSENT)
			model_apply(c, &m, i, WATCH_ADDED, "Running");
		else if (op < 3)
			model_apply(c, &m, i, WATCH_DELETED, "Running");
		else if (op < 6 && m.st[i] != FINISHED)
			model_apply(c, &m, i, WATCH_MODIFIED, "Running"); /* a new declaration */
		else if (op < 7)
			model_apply(c, &m, i, WATCH_MODIFIED, "Succeeded");
		else
			model_apply(c, &m, i, WATCH_DELETED, "Running");
		if (step % 7 == 0)
			model_check(c, &m);
	}
	model_check(c, &m);

	/* all removed in random order */
	for (int i = RAND_PODS - 1; i > 0; i--) {
		int j = (int)(rnd() % (uint64_t)(i + 1)), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int k = 0; k < RAND_PODS; k++) {
		int i = order[k];
		if (m.st[i] != ABSENT)
			model_apply(c, &m, i, WATCH_DELETED, "Running");
		if (k % 13 == 0)
			model_check(c, &m);
	}
	model_check(c, &m);
	assert_int_equal(g.n, m.gone_expected);
	assert_stats(c, 0, 0, 0);
	cache_free(c);
}

/* Declarations whose sum does not fit in 64 bits: the sum saturates, and removing a pod gives
 * the exact sum of the others again (a saturated sum cannot be decremented). */
static void test_saturated_sum(void **state)
{
	struct cache *c = cache_new(NULL, NULL, NULL);

	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "n1", "Running", "1", "7Ei"), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "b", "ub", "n1", "Running", "1", "7Ei"), 0);
	assert_true(view_of(c, "n1").declared == 14 * EIB);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "c", "uc", "n1", "Running", "1", "7Ei"), 0);
	assert_true(view_of(c, "n1").declared == UINT64_MAX);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "d", "ud", "n1", "Running", "1", "1Gi"), 0);
	assert_true(view_of(c, "n1").declared == UINT64_MAX);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "a", "ua", "n1", "Running", "1", "7Ei"), 0);
	assert_true(view_of(c, "n1").declared == 14 * EIB + GIB);
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "b", "ub", "n1", "Succeeded", "1", "7Ei"),
	                 0);
	assert_true(view_of(c, "n1").declared == 7 * EIB + GIB);
	cache_free(c);
}

/* A node record outlives its Node object while pods, counted or not, are bound to it. */
static void test_node_record_lifetime(void **state)
{
	struct cache *c = cache_new(NULL, NULL, NULL);
	struct cache_pod p;

	/* two non-GPU pods on a node never seen: deleting one leaves the other's node */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "cpu-0", "Running", NULL, NULL),
	                 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "b", "ub", "cpu-0", "Running", NULL, NULL),
	                 0);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "a", "ua", "cpu-0", "Running", NULL, NULL),
	                 0);
	assert_int_equal(cache_get_pod(c, "ml", "b", &p), 0);
	assert_string_equal(p.node, "cpu-0");
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "b", "ub", "cpu-0", "Running", NULL, NULL),
	                 0);
	assert_int_equal(cache_get_pod(c, "ml", "b", &p), 0);
	assert_string_equal(p.node, "cpu-0");

	/* a Node deleted under a non-GPU pod and a finished GPU pod */
	assert_int_equal(node_ev(c, WATCH_ADDED, "n1", "81559", "1", NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "c", "uc", "n1", "Running", NULL, NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "f", "uf", "n1", "Succeeded", "1", "1Gi"), 0);
	assert_int_equal(node_ev(c, WATCH_DELETED, "n1", NULL, NULL, NULL), 0);
	assert_int_equal(cache_get_pod(c, "ml", "c", &p), 0);
	assert_string_equal(p.node, "n1");
	assert_int_equal(cache_get_pod(c, "ml", "f", &p), 0);
	assert_string_equal(p.node, "n1");
	/* the Node comes back: the same record, known again */
	assert_int_equal(node_ev(c, WATCH_ADDED, "n1", "81559", "1", NULL), 0);
	assert_true(view_of(c, "n1").known);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "c", "uc", "n1", "Running", NULL, NULL), 0);
	assert_true(view_of(c, "n1").known);
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "f", "uf", "n1", "Succeeded", "1", "1Gi"),
	                 0);

	/* resync forgets a Node under a non-GPU pod */
	assert_int_equal(node_ev(c, WATCH_ADDED, "n2", "81559", "1", NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "d", "ud", "n2", "Running", NULL, NULL), 0);
	cache_resync_begin(c, CACHE_NODES);
	assert_int_equal(cache_resync_end(c, CACHE_NODES), 2);
	assert_int_equal(cache_get_pod(c, "ml", "d", &p), 0);
	assert_string_equal(p.node, "n2");
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "d", "ud", "n3", "Running", NULL, NULL),
	                 0);
	assert_int_equal(cache_get_pod(c, "ml", "d", &p), 0);
	assert_string_equal(p.node, "n3");
	assert_stats(c, 3, 1, 0);
	cache_free(c);
}

/* Objects that are not a pod or a node of the store: CACHE_EINVAL, nothing changed. */
static void test_bad_input(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	char long_name[400], uid[CACHE_UID_MAX + 8];
	const enum watch_event_type types[] = {WATCH_ADDED, WATCH_MODIFIED, WATCH_DELETED};

	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "n1", "Running", "1", "10Gi"), 0);
	assert_int_equal(node_ev(c, WATCH_ADDED, "n1", "81559", "1", NULL), 0);

	memset(long_name, 'x', sizeof(long_name));
	long_name[sizeof(long_name) - 1] = '\0';
	memset(uid, 'u', sizeof(uid));
	uid[CACHE_UID_MAX] = '\0'; /* one too long */

	for (size_t t = 0; t < 3; t++) {
		enum watch_event_type ty = types[t];
		cJSON *j;

		assert_int_equal(cache_apply_pod(c, ty, NULL), CACHE_EINVAL);
		assert_int_equal(cache_apply_node(c, ty, NULL), CACHE_EINVAL);
		j = cJSON_Parse("[{\"metadata\":{\"name\":\"a\",\"namespace\":\"ml\"}}]");
		assert_int_equal(cache_apply_pod(c, ty, j), CACHE_EINVAL);
		assert_int_equal(cache_apply_node(c, ty, j), CACHE_EINVAL);
		cJSON_Delete(j);
		j = cJSON_CreateString("ml/a");
		assert_int_equal(cache_apply_pod(c, ty, j), CACHE_EINVAL);
		assert_int_equal(cache_apply_node(c, ty, j), CACHE_EINVAL);
		cJSON_Delete(j);
		j = cJSON_Parse("{\"kind\":\"Pod\",\"spec\":{\"nodeName\":\"n1\"}}");
		assert_int_equal(cache_apply_pod(c, ty, j), CACHE_EINVAL);
		assert_int_equal(cache_apply_node(c, ty, j), CACHE_EINVAL);
		cJSON_Delete(j);
		j = cJSON_Parse("{\"metadata\":\"n1\"}");
		assert_int_equal(cache_apply_pod(c, ty, j), CACHE_EINVAL);
		assert_int_equal(cache_apply_node(c, ty, j), CACHE_EINVAL);
		cJSON_Delete(j);
		j = cJSON_Parse("{\"metadata\":{\"name\":7,\"namespace\":\"ml\"}}");
		assert_int_equal(cache_apply_pod(c, ty, j), CACHE_EINVAL);
		assert_int_equal(cache_apply_node(c, ty, j), CACHE_EINVAL);
		cJSON_Delete(j);
		assert_int_equal(pod_ev(c, ty, "ml", NULL, "ua", "n1", "Running", "1", "1Gi"),
		                 CACHE_EINVAL);
		assert_int_equal(pod_ev(c, ty, "ml", "", "ua", "n1", "Running", "1", "1Gi"),
		                 CACHE_EINVAL);
		assert_int_equal(pod_ev(c, ty, "ml", long_name, "ux", "n1", "Running", "1", "1Gi"),
		                 CACHE_EINVAL);
		assert_int_equal(node_ev(c, ty, "", "81559", "1", NULL), CACHE_EINVAL);
		assert_int_equal(node_ev(c, ty, long_name, "81559", "1", NULL), CACHE_EINVAL);
		/* a uid that does not fit: kept cut it would never match itself */
		assert_int_equal(pod_ev(c, ty, "ml", "a", uid, "n1", "Running", "1", "1Gi"),
		                 CACHE_EINVAL);
		assert_int_equal(pod_ev(c, ty, "ml", "u", uid, "n1", "Running", "1", "1Gi"),
		                 CACHE_EINVAL);
	}
	assert_int_equal(g.n, 0);
	assert_stats(c, 1, 1, 1);
	struct view v = view_of(c, "n1");
	assert_true(v.known);
	assert_int_equal(v.capacity_rc, 0);
	assert_int_equal(v.n_pods, 1);
	assert_true(v.declared == 10 * GIB);
	struct cache_pod p;
	assert_int_equal(cache_get_pod(c, "ml", "a", &p), 0);
	assert_string_equal(p.uid, "ua");
	assert_int_equal(cache_get_pod(c, "ml", long_name, &p), CACHE_ENOTFOUND);

	/* the longest that fit: a key of CACHE_KEY_MAX - 1 bytes, a uid of CACHE_UID_MAX - 1, a
	 * node name of 253 */
	long_name[CACHE_KEY_MAX - 1 - 3] = '\0'; /* "ml/" + name */
	uid[CACHE_UID_MAX - 1] = '\0';
	char node[254];
	memset(node, 'n', 253);
	node[253] = '\0';
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", long_name, uid, node, "Running", "1", "1Gi"),
	                 0);
	assert_int_equal(node_ev(c, WATCH_ADDED, node, "81559", "1", NULL), 0);
	assert_int_equal(cache_get_pod(c, "ml", long_name, &p), 0);
	assert_string_equal(p.uid, uid);
	assert_string_equal(p.node, node);
	v = view_of(c, node);
	assert_true(v.known);
	assert_int_equal(v.n_pods, 1);
	/* a MODIFIED of it is the same pod, not a replacement */
	assert_int_equal(
	    pod_ev(c, WATCH_MODIFIED, "ml", long_name, uid, node, "Running", "1", "1Gi"), 0);
	assert_int_equal(g.n, 0);
	long_name[CACHE_KEY_MAX - 1 - 3] = 'x';
	long_name[CACHE_KEY_MAX - 3] = '\0';
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", long_name, uid, node, "Running", "1", "1Gi"),
	                 CACHE_EINVAL);
	assert_stats(c, 2, 2, 2);
	cache_free(c);
}

/* Past CACHE_MAX_NODES an event is refused with CACHE_EFULL (not CACHE_ENOMEM). */
static void test_nodes_full(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	cJSON *n = make_node("x", "81559", "1", NULL);
	cJSON *name = cJSON_GetObjectItem(cJSON_GetObjectItem(n, "metadata"), "name");
	char buf[32];
	struct cache_pod p;

	for (int i = 0; i < CACHE_MAX_NODES; i++) {
		snprintf(buf, sizeof(buf), "node-%d", i);
		assert_non_null(cJSON_SetValuestring(name, buf));
		assert_int_equal(cache_apply_node(c, WATCH_ADDED, n), 0);
	}
	assert_stats(c, 0, 0, CACHE_MAX_NODES);
	assert_non_null(cJSON_SetValuestring(name, "one-more"));
	assert_int_equal(cache_apply_node(c, WATCH_ADDED, n), CACHE_EFULL);
	assert_int_equal(cache_apply_node(c, WATCH_DELETED, n), 0);
	assert_false(view_of(c, "one-more").known);
	/* a pod bound to yet another node: refused, dropped as if deleted */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "one-more", "Running", "1", "1Gi"),
	                 CACHE_EFULL);
	assert_int_equal(cache_get_pod(c, "ml", "a", &p), CACHE_ENOTFOUND);
	/* on a known node it is fine */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "b", "ub", "node-7", "Running", "1", "1Gi"),
	                 0);
	/* one Node deleted makes room */
	assert_non_null(cJSON_SetValuestring(name, "node-0"));
	assert_int_equal(cache_apply_node(c, WATCH_DELETED, n), 0);
	assert_non_null(cJSON_SetValuestring(name, "one-more"));
	assert_int_equal(cache_apply_node(c, WATCH_ADDED, n), 0);
	assert_stats(c, 1, 1, CACHE_MAX_NODES);
	cJSON_Delete(n);
	cache_free(c);
}

/* The gone callback runs after the store is updated and unlocked: it may read the cache. */
struct reentrant {
	struct cache *c;
	int calls;
	size_t pods_seen;
	int found;
	size_t n_pods_seen;
};

static void count_pods(void *ctx, const struct cache_node_view *v)
{
	((struct reentrant *)ctx)->n_pods_seen = v->n_pods;
}

static void on_gone_reads(void *ctx, const char *key, const char *uid)
{
	struct reentrant *r = ctx;
	struct cache_stats st;
	struct cache_pod p;

	r->calls++;
	cache_stats(r->c, &st);
	r->pods_seen = st.pods;
	r->found = cache_get_pod(r->c, "ml", "a", &p) == 0;
	cache_with_node(r->c, "n1", count_pods, r);
}

static void test_gone_reads_cache(void **state)
{
	struct reentrant r = {0};
	struct cache *c = cache_new(NULL, on_gone_reads, &r);

	r.c = c;
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "a", "ua", "n1", "Running", "1", "1Gi"), 0);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "b", "ub", "n1", "Running", "1", "1Gi"), 0);
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "a", "ua", "n1", "Succeeded", "1", "1Gi"),
	                 0);
	assert_int_equal(r.calls, 1);
	assert_true(r.found); /* finished, still known */
	assert_int_equal(r.n_pods_seen, 1);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "ml", "b", "ub", "n1", "Running", "1", "1Gi"), 0);
	assert_int_equal(r.calls, 2);
	assert_int_equal(r.pods_seen, 1);
	assert_int_equal(r.n_pods_seen, 0);
	cache_resync_begin(c, CACHE_PODS);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "x", "ux", "n1", "Running", "1", "1Gi"), 0);
	assert_int_equal(cache_resync_end(c, CACHE_PODS), 1); /* a: finished, no second gone */
	assert_int_equal(r.calls, 2);
	cache_resync_begin(c, CACHE_PODS);
	assert_int_equal(cache_resync_end(c, CACHE_PODS), 1);
	assert_int_equal(r.calls, 3);
	assert_int_equal(r.pods_seen, 0);
	assert_false(r.found);
	cache_free(c);
}

/* One writer, readers checking that every view they get is consistent. */
struct race {
	struct cache *c;
	volatile int stop;
	long views, bad;
};

static void race_view(void *ctx, const struct cache_node_view *v)
{
	struct race *r = ctx;
	uint64_t sum = 0;
	for (size_t i = 0; i < v->n_pods; i++)
		sum += v->pods[i].bytes;
	if (sum != v->declared_bytes || v->n_pods > 64)
		r->bad++;
	r->views++;
}

static void *race_reader(void *arg)
{
	struct race *r = arg;
	struct cache_stats st;
	struct cache_pod p;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		cache_with_node(r->c, "hot", race_view, r);
		cache_stats(r->c, &st);
		if (cache_get_pod(r->c, "ml", "p-3", &p) == 0 && p.demand.bytes % GIB != 0)
			r->bad++;
	}
	return NULL;
}

static void test_concurrent_readers(void **state)
{
	struct race r[2];
	pthread_t th[2];
	struct cache *c = cache_new(NULL, NULL, NULL);

	for (int i = 0; i < 2; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].c = c;
		assert_int_equal(pthread_create(&th[i], NULL, race_reader, &r[i]), 0);
	}
	for (int k = 0; k < 3000; k++) {
		char name[16], mem[16];
		int i = (int)(rnd() % 64);
		snprintf(name, sizeof(name), "p-%d", i);
		snprintf(mem, sizeof(mem), "%dGi", (int)(rnd() % 40) + 1);
		enum watch_event_type t = rnd() % 3 == 0 ? WATCH_DELETED : WATCH_MODIFIED;
		assert_int_equal(pod_ev(c, t, "ml", name, name, "hot", "Running", "1", mem), 0);
		if (k % 500 == 0)
			assert_int_equal(node_ev(c, k % 1000 ? WATCH_DELETED : WATCH_ADDED, "hot",
			                         "81559", "1", NULL),
			                 0);
	}
	for (int i = 0; i < 2; i++) {
		__atomic_store_n(&r[i].stop, 1, __ATOMIC_RELEASE);
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(r[i].bad, 0);
		assert_true(r[i].views > 0);
	}
	cache_free(c);
}

/* cache_stats().bytes: grows with what is stored and comes back to the empty store's figure
 * when everything is deleted (fewer pods than the first hash table's buckets: no growth). */
/* The pieces of a whole pod record pod_fill allocates anew (cache.c pod_bytes: every heap()
 * term but the record itself), and what glibc may hand out over a chunk's size (MINSIZE 32
 * less the 16-byte alignment). */
#define POD_PIECES  10
#define CHUNK_SLACK 16

static void test_bytes_accounted(void **state)
{
	struct cache *c = cache_new(NULL, NULL, NULL);
	char name[32], uid[64];
	size_t empty, empty_compact, full, one;

	(void)state;
	empty = stats_of(c).bytes;
	empty_compact = stats_of(c).compact_bytes;
	assert_true(empty > 0);
	assert_int_equal(node_ev(c, WATCH_ADDED, "n1", "81559", "8", NULL), 0);
	assert_int_equal(node_ev(c, WATCH_ADDED, "n2", NULL, NULL, "bad"), 0); /* cap_err */
	assert_true(stats_of(c).bytes > empty);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		snprintf(uid, sizeof(uid), "6f1c2b9e-0000-4000-8000-%012d", i);
		assert_int_equal(pod_ev(c, WATCH_ADDED, i % 3 ? "default" : "ml", name, uid,
		                        i % 2 ? "n1" : "n3", "Running", i % 5 ? NULL : "1",
		                        i % 5 ? NULL : "10Gi"),
		                 0);
	}
	full = stats_of(c).bytes;
	assert_true(full > empty + 300 * 16);
	assert_int_equal(stats_of(c).compact_pods, 240); /* the plain ones */
	/* Modified in place: the same figure. The pod's pieces are allocated anew (pod_fill), and
	 * glibc hands a free chunk out whole when splitting it would leave less than MINSIZE (32
	 * bytes on 64-bit), so one of the first pieces may have had up to 16 bytes more usable
	 * size than its refill gets (which piece depends on the heap's layout: one more pointer in
	 * struct placement_item moved it). The first refill is within that of the figure, per
	 * refilled piece; from then on every refill gives the same figure exactly: nothing counted
	 * twice or lost. */
	size_t refilled = 0;
	for (int k = 0; k < 8; k++) {
		assert_int_equal(pod_ev(c, WATCH_MODIFIED, "ml", "p0",
		                        "6f1c2b9e-0000-4000-8000-000000000000", "n3", "Running",
		                        "1", "10Gi"),
		                 0);
		if (k == 0) {
			refilled = stats_of(c).bytes;
			assert_true(refilled <= full + POD_PIECES * CHUNK_SLACK &&
			            refilled + POD_PIECES * CHUNK_SLACK >= full);
		}
		assert_int_equal(stats_of(c).bytes, refilled);
	}
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		assert_int_equal(pod_ev(c, WATCH_DELETED, i % 3 ? "default" : "ml", name, NULL,
		                        NULL, NULL, NULL, NULL),
		                 0);
	}
	one = stats_of(c).bytes;
	assert_true(one < full);
	assert_int_equal(node_ev(c, WATCH_DELETED, "n1", NULL, NULL, NULL), 0);
	assert_int_equal(node_ev(c, WATCH_DELETED, "n2", NULL, NULL, NULL), 0);
	assert_stats(c, 0, 0, 0);
	/* the compact store's arrays keep their capacity (reused by the next pods); the node
	 * slot table too: all else is back */
	struct cache_stats st = stats_of(c);
	assert_int_equal(st.compact_pods, 0);
	assert_true(st.bytes - st.compact_bytes <= empty - empty_compact + 4096);
	cache_free(c);
}

/* Pods that ask for no GPU and have a UUID are kept compact (podlite.h): the same answers as
 * a whole record gave, through every change. */
static void test_compact_pods(void **state)
{
	struct gone_log g = {0};
	struct cache *c = cache_new(NULL, on_gone, &g);
	struct cache_pod cp;
	const char *u1 = "6f1c2b9e-0000-4000-8000-000000000001";
	const char *u2 = "6f1c2b9e-0000-4000-8000-000000000002";
	(void)state;

	assert_int_equal(pod_ev(c, WATCH_ADDED, "web", "a", u1, "n9", "Running", NULL, NULL), 0);
	assert_int_equal(stats_of(c).compact_pods, 1);
	assert_stats(c, 1, 0, 0);
	assert_int_equal(cache_get_pod(c, "web", "a", &cp), 0);
	assert_string_equal(cp.uid, u1);
	assert_string_equal(cp.node, "n9");
	assert_int_equal(cp.finished, 0);
	assert_int_equal(cp.mirror, 0);
	assert_int_equal(cp.demand.status, DEMAND_NOT_GPU);
	assert_int_equal(cp.demand.bytes, 0);
	assert_int_equal(cache_get_pod(c, "web", "b", &cp), CACHE_ENOTFOUND);
	assert_int_equal(cache_get_pod(c, "other", "a", &cp), CACHE_ENOTFOUND);
	/* its node is only named: unknown, no pods counted */
	struct view v = view_of(c, "n9");
	assert_int_equal(v.known, 0);
	assert_int_equal(v.n_pods, 0);
	/* moved and finished */
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "web", "a", u1, "n8", "Succeeded", NULL, NULL),
	                 0);
	assert_int_equal(cache_get_pod(c, "web", "a", &cp), 0);
	assert_string_equal(cp.node, "n8");
	assert_int_equal(cp.finished, 1);
	/* a DELETE of another uid is an older pod's: ignored */
	assert_int_equal(pod_ev(c, WATCH_DELETED, "web", "a", u2, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(cache_get_pod(c, "web", "a", &cp), 0);
	/* the same name, another pod: replaced, no gone (it held nothing) */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "web", "a", u2, "n8", "Running", NULL, NULL), 0);
	assert_int_equal(cache_get_pod(c, "web", "a", &cp), 0);
	assert_string_equal(cp.uid, u2);
	assert_int_equal(cp.finished, 0);
	/* it asks for a GPU now: kept whole and counted; then none again: compact, uncounted */
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "web", "a", u2, "n8", "Running", "1", "10Gi"),
	                 0);
	assert_int_equal(stats_of(c).compact_pods, 0);
	assert_stats(c, 1, 1, 0);
	v = view_of(c, "n8");
	assert_int_equal(v.n_pods, 1);
	assert_int_equal(v.declared, 10 * GIB);
	assert_int_equal(pod_ev(c, WATCH_MODIFIED, "web", "a", u2, "n8", "Running", NULL, NULL), 0);
	assert_int_equal(stats_of(c).compact_pods, 1);
	assert_stats(c, 1, 0, 0);
	assert_int_equal(view_of(c, "n8").n_pods, 0);
	assert_int_equal(g.n, 0);
	/* a uid that is not a UUID: kept whole, the same answers */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "web", "b", "u-b", "n8", "Running", NULL, NULL), 0);
	assert_int_equal(stats_of(c).compact_pods, 1);
	assert_stats(c, 2, 0, 0);
	assert_int_equal(cache_get_pod(c, "web", "b", &cp), 0);
	assert_string_equal(cp.uid, "u-b");
	/* resync: what the list does not show goes */
	cache_resync_begin(c, CACHE_PODS);
	assert_int_equal(pod_ev(c, WATCH_ADDED, "web", "b", "u-b", "n8", "Running", NULL, NULL), 0);
	assert_int_equal(cache_resync_end(c, CACHE_PODS), 1);
	assert_int_equal(cache_get_pod(c, "web", "a", &cp), CACHE_ENOTFOUND);
	assert_int_equal(stats_of(c).compact_pods, 0);
	/* deleted: its node record goes with its last pod */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "web", "c", u1, "n7", "Running", NULL, NULL), 0);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "web", "c", u1, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(cache_get_pod(c, "web", "c", &cp), CACHE_ENOTFOUND);
	assert_int_equal(pod_ev(c, WATCH_DELETED, "web", "b", NULL, NULL, NULL, NULL, NULL), 0);
	assert_stats(c, 0, 0, 0);
	assert_int_equal(g.n, 0);
	cache_free(c);
}

/* A pod whose GPU is asked only by an init container, only in limits, by a MIG resource, or
 * whose uid is a UUID in capitals: a GPU pod (or not a UUID): never compact, its demand kept. */
static void test_gpu_pods_never_compact(void **state)
{
	static const char *const pods[] = {
	    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"init\",\"uid\":"
	    "\"6f1c2b9e-0000-4000-8000-0000000000a1\"},\"spec\":{\"nodeName\":\"n1\","
	    "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
	    "\"1\"}}}],\"containers\":[{\"name\":\"m\"}]},\"status\":{\"phase\":\"Running\"}}",
	    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"limits\",\"uid\":"
	    "\"6f1c2b9e-0000-4000-8000-0000000000a2\"},\"spec\":{\"nodeName\":\"n1\","
	    "\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
	    "\"2\"}}}]},\"status\":{\"phase\":\"Running\"}}",
	    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"sidecar\",\"uid\":"
	    "\"6f1c2b9e-0000-4000-8000-0000000000a3\"},\"spec\":{\"nodeName\":\"n1\","
	    "\"initContainers\":[{\"name\":\"s\",\"restartPolicy\":\"Always\",\"resources\":{"
	    "\"limits\":{\"nvidia.com/gpu\":\"1\"}}}],\"containers\":[{\"name\":\"m\"}]},"
	    "\"status\":{\"phase\":\"Running\"}}",
	    "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"upper\",\"uid\":"
	    "\"6F1C2B9E-0000-4000-8000-0000000000A4\"},\"spec\":{\"nodeName\":\"n1\","
	    "\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
	    "\"1\"}}}]},\"status\":{\"phase\":\"Running\"}}",
	};
	struct cache *c = cache_new(NULL, NULL, NULL);
	struct cache_pod cp;
	(void)state;

	assert_int_equal(node_ev(c, WATCH_ADDED, "n1", "81559", "8", NULL), 0);
	for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++) {
		cJSON *p = cJSON_Parse(pods[i]);
		assert_non_null(p);
		assert_int_equal(cache_apply_pod(c, WATCH_ADDED, p), 0);
		const char *name = cJSON_GetStringValue(
		    cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "name"));
		assert_int_equal(cache_get_pod(c, "ml", name, &cp), 0);
		if (cp.demand.status == DEMAND_NOT_GPU)
			fail_msg("pod %s: read as asking no GPU", name);
		cJSON_Delete(p);
	}
	assert_int_equal(stats_of(c).compact_pods, 0);
	cache_free(c);
}

/* ---- tier attributes (issue 22) ---- */

struct attrs_seen {
	size_t n;
	int known[4];
	size_t n_labels[4];
	char pc[4][32];
};

static void attrs_copy(void *ctx, const struct cache_node_view *v)
{
	struct attrs_seen *a = ctx;
	a->n = v->n_pods;
	for (size_t i = 0; i < v->n_pods && i < 4; i++) {
		a->known[i] = v->pods[i].attrs_known;
		a->n_labels[i] = v->pods[i].labels ? v->pods[i].labels->n : 0;
		snprintf(a->pc[i], sizeof(a->pc[i]), "%s",
		         v->pods[i].priority_class ? v->pods[i].priority_class : "");
	}
}

static struct attrs_seen attrs_on(struct cache *c, const char *node)
{
	struct attrs_seen a;
	memset(&a, 0, sizeof(a));
	cache_with_node(c, node, attrs_copy, &a);
	return a;
}

/* A GPU pod of 8Gi with labels tier=<tier>, app=train and priority class pc, on node (NULL:
 * unbound). */
static int tier_pod(struct cache *c, const char *name, const char *uid, const char *node,
                    const char *tier, const char *pc)
{
	cJSON *p = make_pod("ml", name, uid, node, "Running", "1", "8Gi");
	cJSON *labels = cJSON_AddObjectToObject(cJSON_GetObjectItem(p, "metadata"), "labels");
	cJSON_AddStringToObject(labels, "tier", tier);
	cJSON_AddStringToObject(labels, "app", "train");
	cJSON_AddStringToObject(cJSON_GetObjectItem(p, "spec"), "priorityClassName", pc);
	int rc = cache_apply_pod(c, WATCH_ADDED, p);
	cJSON_Delete(p);
	return rc;
}

/* Bound GPU pods keep labels and priority classes only while the policies want them; unbound
 * ones always (a Binding reads them); a kind wanted again is missing (attrs_known 0,
 * CACHE_ENOATTRS) until the pod is applied again, never read as "no labels". */
static void test_tier_attrs_kept_when_wanted(void **state)
{
	struct cache *c = cache_new(NULL, NULL, NULL);
	struct labelset ls = {0};
	char pc[32];
	(void)state;

	assert_non_null(c);
	/* until told: everything kept */
	assert_int_equal(cache_pod_attrs_wanted(c), CACHE_ATTRS_ALL);
	assert_int_equal(tier_pod(c, "a", "uid-a", "n1", "realtime", "high"), 0);
	assert_int_equal(tier_pod(c, "p", "uid-p", NULL, "batch", "low"), 0);
	struct attrs_seen a = attrs_on(c, "n1");
	assert_int_equal(a.n, 1);
	assert_true(a.known[0] && a.n_labels[0] == 2 && strcmp(a.pc[0], "high") == 0);
	size_t before = stats_of(c).pod_bytes;

	/* no policy wants them: the bound pod's are freed, its item still known (nothing to
	 * know); the unbound pod keeps its own */
	assert_int_equal(cache_set_pod_attrs(c, 0), 0);
	assert_int_equal(cache_set_pod_attrs(c, 0), 0); /* unchanged: nothing to do */
	assert_true(stats_of(c).pod_bytes < before);
	a = attrs_on(c, "n1");
	assert_true(a.known[0] && a.n_labels[0] == 0 && a.pc[0][0] == '\0');
	assert_int_equal(cache_get_pod_attrs(c, "ml", "p", "uid-p", pc, sizeof(pc), &ls), 0);
	assert_string_equal(pc, "low");
	assert_int_equal(ls.l.n, 2);
	labelset_clear(&ls);
	assert_int_equal(cache_get_pod_attrs(c, "ml", "a", "uid-a", pc, sizeof(pc), &ls), 0);
	assert_int_equal(ls.l.n, 0);
	/* pods that ask for no GPU (compact, or whole: a uid that is not a UUID) keep none:
	 * empty while no tier wants them */
	assert_int_equal(pod_ev(c, WATCH_ADDED, "ml", "cpu-1",
	                        "7c1f0000-0000-4000-8000-0000000000c1", "n1", "Running", NULL,
	                        NULL),
	                 0);
	assert_int_equal(
	    pod_ev(c, WATCH_ADDED, "ml", "cpu-2", "not-a-uuid", "n1", "Running", NULL, NULL), 0);
	assert_int_equal(stats_of(c).compact_pods, 1);
	assert_int_equal(cache_get_pod_attrs(c, "ml", "cpu-1", NULL, pc, sizeof(pc), &ls), 0);
	assert_int_equal(cache_get_pod_attrs(c, "ml", "cpu-2", NULL, pc, sizeof(pc), &ls), 0);
	/* a new bound pod keeps none either; the unbound one, bound, drops its own */
	assert_int_equal(tier_pod(c, "b", "uid-b", "n1", "batch", "low"), 0);
	assert_int_equal(tier_pod(c, "p", "uid-p", "n2", "batch", "low"), 0);
	a = attrs_on(c, "n2");
	assert_true(a.n == 1 && a.known[0] && a.n_labels[0] == 0 && a.pc[0][0] == '\0');

	/* a policy selects by labels: the three bound pods lack them, their items count in
	 * every tier (attrs_known 0) and a Binding's read is refused, not answered empty */
	assert_int_equal(cache_set_pod_attrs(c, CACHE_ATTR_LABELS), 3);
	a = attrs_on(c, "n1");
	assert_int_equal(a.n, 2);
	assert_false(a.known[0] || a.known[1]);
	assert_int_equal(cache_get_pod_attrs(c, "ml", "a", "uid-a", pc, sizeof(pc), &ls),
	                 CACHE_ENOATTRS);
	/* ... and not answered empty for pods that ask for no GPU either (a DRA pod's Binding
	 * reads its labels from the API server) */
	assert_int_equal(cache_get_pod_attrs(c, "ml", "cpu-1", NULL, pc, sizeof(pc), &ls),
	                 CACHE_ENOATTRS);
	assert_int_equal(cache_get_pod_attrs(c, "ml", "cpu-2", NULL, pc, sizeof(pc), &ls),
	                 CACHE_ENOATTRS);
	/* read again (the relist): labels kept, the priority class still not */
	assert_int_equal(tier_pod(c, "a", "uid-a", "n1", "realtime", "high"), 0);
	assert_int_equal(cache_get_pod_attrs(c, "ml", "a", "uid-a", pc, sizeof(pc), &ls), 0);
	assert_int_equal(ls.l.n, 2);
	assert_string_equal(pc, "");
	labelset_clear(&ls);
	a = attrs_on(c, "n1");
	int ia = a.n_labels[0] == 2 ? 0 : 1;
	assert_true(a.known[ia] && a.n_labels[ia] == 2 && a.pc[ia][0] == '\0');
	assert_false(a.known[1 - ia]); /* b not read again yet */
	/* priority classes wanted too: a lacks one kind now */
	assert_int_equal(cache_set_pod_attrs(c, CACHE_ATTRS_ALL), 3);
	assert_false(attrs_on(c, "n1").known[ia]);
	/* back to labels only: nothing lacking, a known again without reading it */
	assert_int_equal(cache_set_pod_attrs(c, CACHE_ATTR_LABELS), 2);
	a = attrs_on(c, "n1");
	assert_true(a.known[ia] && a.n_labels[ia] == 2);
	cache_free(c);
}

/* A GPU pod like tier_pod's, in phase (Running, Succeeded: finished). */
static int tier_pod_phase(struct cache *c, const char *name, const char *node, const char *phase)
{
	cJSON *p = make_pod("ml", name, name, node, phase, "1", "8Gi");
	cJSON *labels = cJSON_AddObjectToObject(cJSON_GetObjectItem(p, "metadata"), "labels");
	cJSON_AddStringToObject(labels, "tier", "realtime-with-a-long-value");
	cJSON_AddStringToObject(labels, "app.kubernetes.io/name", "trainer");
	cJSON_AddStringToObject(cJSON_GetObjectItem(p, "spec"), "priorityClassName", "high");
	int rc = cache_apply_pod(c, WATCH_ADDED, p);
	cJSON_Delete(p);
	return rc;
}

static void tier_pods_all(struct cache *c)
{
	static const struct {
		const char *name, *node, *phase;
	} pods[] = {
	    {"b1", "n1", "Running"}, {"b2", "n1", "Running"},   {"b3", "n2", "Running"},
	    {"u1", NULL, "Pending"}, {"f1", "n1", "Succeeded"},
	};
	for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++)
		assert_int_equal(tier_pod_phase(c, pods[i].name, pods[i].node, pods[i].phase), 0);
}

/* Attack on issue 22: the cache's bytes (cache_stats, the gauge the memory warning reads) stay
 * exact across want changes: dropping attributes lowers the figure, and once every pod is
 * deleted after any sequence of wants and relists (bound, unbound and finished pods), the
 * figure is the empty cache's to the byte (each allocation counted in and out alike; a fresh
 * cache is no reference: glibc may give the same request a chunk 16 bytes larger). */
static void test_tier_attrs_bytes_exact(void **state)
{
	static const unsigned wants[] = {
	    0, CACHE_ATTR_LABELS, CACHE_ATTR_PRIORITY, CACHE_ATTRS_ALL, CACHE_ATTR_LABELS, 0};
	static const char *const names[] = {"b1", "b2", "b3", "u1", "f1"};
	(void)state;

	for (size_t w = 0; w < sizeof(wants) / sizeof(wants[0]); w++) {
		struct cache *c = cache_new(NULL, NULL, NULL);
		assert_non_null(c);
		size_t empty = stats_of(c).pod_bytes;
		tier_pods_all(c);
		/* every want up to this one, in turn: dropped, then read again (a relist) */
		for (size_t k = 0; k <= w; k++) {
			size_t before = stats_of(c).pod_bytes;
			unsigned had = cache_pod_attrs_wanted(c);
			(void)cache_set_pod_attrs(c, wants[k]);
			if (had & ~wants[k]) /* some kind dropped from 4 bound pods */
				assert_true(stats_of(c).pod_bytes < before);
			else
				assert_int_equal(stats_of(c).pod_bytes, before);
			tier_pods_all(c);
		}
		for (size_t i = 0; i < 5; i++)
			assert_int_equal(
			    pod_ev(c, WATCH_DELETED, "ml", names[i], NULL, NULL, NULL, NULL, NULL),
			    0);
		assert_int_equal(stats_of(c).pod_bytes, empty);
		cache_free(c);
	}
}

/* A DRA pod's containers' own figures (demand.dra_figs) are kept: cache_get_pod gives them back
 * (the webhook's Binding path reads them from there), and a bound one is an item of its node
 * carrying only them (placement.h: they raise its claim's count); a DRA pod without a figure
 * is no item. */
static void test_dra_figures_kept(void **state)
{
	(void)state;
	struct cache *c = cache_new(NULL, NULL, NULL);
	struct cache_pod p;
	static const char *const pods[] = {
	    "{\"metadata\":{\"name\":\"fig\",\"namespace\":\"ml\",\"uid\":"
	    "\"11111111-0000-4000-8000-0000000000f1\"},\"spec\":{\"nodeName\":\"n\","
	    "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"c\"}],\"containers\":[{"
	    "\"name\":\"main\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]},\"env\":[{\"name\":"
	    "\"GPU_MEMORY_LIMIT\",\"value\":\"30Gi\"}]}]}}",
	    "{\"metadata\":{\"name\":\"nofig\",\"namespace\":\"ml\",\"uid\":"
	    "\"11111111-0000-4000-8000-0000000000f2\"},\"spec\":{\"nodeName\":\"n\","
	    "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":\"c\"}],\"containers\":[{"
	    "\"name\":\"main\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}]}}",
	};

	assert_non_null(c);
	for (size_t i = 0; i < 2; i++) {
		cJSON *j = cJSON_Parse(pods[i]);
		assert_non_null(j);
		assert_int_equal(cache_apply_pod(c, WATCH_ADDED, j), 0);
		cJSON_Delete(j);
	}
	assert_int_equal(cache_get_pod(c, "ml", "fig", &p), 0);
	assert_int_equal(p.demand.status, DEMAND_NOT_GPU);
	assert_int_equal(p.demand.n_dra_figs, 1);
	assert_true(p.demand.dra_figs[0].bytes == 30 * GIB);
	assert_string_equal(p.demand.dra_words, "GPU_MEMORY_LIMIT 30Gi (container main)");
	assert_int_equal(cache_get_pod(c, "ml", "nofig", &p), 0);
	assert_int_equal(p.demand.n_dra_figs, 0);
	/* fig is on node n as its figures only (no bytes, no GPUs of its own); nofig is not */
	struct view v = view_of(c, "n");
	assert_int_equal(v.n_pods, 1);
	assert_string_equal(v.keys[0], "ml/fig");
	assert_true(v.bytes[0] == 0 && v.gpus[0] == 0 && v.declared == 0);
	assert_true(v.fig_bytes[0] == 30 * GIB);
	cache_free(c);
}

/* The claims a pod names are kept (cache_get_pod_claims: the webhook's Binding path passes them
 * to the DRA store, so a directly named claim not yet shown reserved for the pod still counts):
 * direct and generated names, templates not generated yet, the KEP-5004 claim; a pod naming
 * none is kept compact and names none; an unknown pod is not found. */
static void test_pod_claims_kept(void **state)
{
	(void)state;
	struct cache *c = cache_new(NULL, NULL, NULL);
	struct dra_pod_refs *r = malloc(sizeof(*r));
	static const char *const pods[] = {
	    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ml\",\"uid\":"
	    "\"11111111-0000-4000-8000-0000000000a1\"},\"spec\":{\"resourceClaims\":[{\"name\":"
	    "\"g\",\"resourceClaimName\":\"mine\"},{\"name\":\"t\",\"resourceClaimTemplateName\":"
	    "\"tpl\"},{\"name\":\"u\",\"resourceClaimTemplateName\":\"tpl\"}],\"containers\":[{"
	    "\"name\":\"main\"}]},\"status\":{\"resourceClaimStatuses\":[{\"name\":\"t\","
	    "\"resourceClaimName\":\"a-t-x7k2p\"}]}}",
	    "{\"metadata\":{\"name\":\"ext\",\"namespace\":\"ml\",\"uid\":"
	    "\"11111111-0000-4000-8000-0000000000a2\"},\"spec\":{\"containers\":[{\"name\":"
	    "\"main\","
	    "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{"
	    "\"extendedResourceClaimStatus\":{\"resourceClaimName\":\"ext-er-1\","
	    "\"requestMappings\":"
	    "[{\"containerName\":\"main\",\"resourceName\":\"nvidia.com/gpu\",\"requestName\":"
	    "\"r\"}]}}}",
	    "{\"metadata\":{\"name\":\"plain\",\"namespace\":\"ml\",\"uid\":"
	    "\"11111111-0000-4000-8000-0000000000a3\"},\"spec\":{\"containers\":[{\"name\":"
	    "\"main\"}]}}",
	};

	assert_non_null(c);
	assert_non_null(r);
	for (size_t i = 0; i < 3; i++) {
		cJSON *j = cJSON_Parse(pods[i]);
		assert_non_null(j);
		assert_int_equal(cache_apply_pod(c, WATCH_ADDED, j), 0);
		cJSON_Delete(j);
	}
	assert_int_equal(cache_get_pod_claims(c, "ml", "a", NULL, r), 0);
	assert_true(r->any);
	assert_int_equal(r->n, 2);
	assert_string_equal(r->names[0], "mine");
	assert_string_equal(r->names[1], "a-t-x7k2p");
	assert_int_equal(r->n_templates, 1);
	assert_string_equal(r->extended, "");
	assert_int_equal(
	    cache_get_pod_claims(c, "ml", "ext", "11111111-0000-4000-8000-0000000000a2", r), 0);
	assert_true(r->any);
	assert_string_equal(r->extended, "ext-er-1");
	assert_int_equal(r->n, 1);
	assert_string_equal(r->names[0], "ext-er-1");
	assert_int_equal(cache_get_pod_claims(c, "ml", "plain", NULL, r), 0);
	assert_false(r->any);
	assert_int_equal(stats_of(c).compact_pods, 1); /* plain only */
	assert_int_equal(cache_get_pod_claims(c, "ml", "ext", "another-uid", r), CACHE_ENOTFOUND);
	assert_int_equal(cache_get_pod_claims(c, "ml", "nope", NULL, r), CACHE_ENOTFOUND);
	free(r);
	cache_free(c);
}

/* A pod whose GPUs are DRA claims only keeps its tier attributes like a GPU pod: unbound, all
 * (its Binding reads them: a tier policy created meanwhile never finds them missing); bound with
 * containers' figures (an item of its node), what the policies want, and a kind wanted again
 * counts it in every tier and asks for a relist. */
static void test_dra_pod_tier_attrs(void **state)
{
	(void)state;
	struct cache *c = cache_new(NULL, NULL, NULL);
	struct labelset ls = {0};
	char pc[32];
	static const char *const pods[] = {
	    "{\"metadata\":{\"name\":\"u\",\"namespace\":\"ml\",\"uid\":"
	    "\"11111111-0000-4000-8000-0000000000e1\",\"labels\":{\"tier\":\"rt\"}},\"spec\":{"
	    "\"priorityClassName\":\"high\",\"resourceClaims\":[{\"name\":\"gpu\","
	    "\"resourceClaimName\":\"c1\"}],\"containers\":[{\"name\":\"main\"}]}}",
	    "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ml\",\"uid\":"
	    "\"11111111-0000-4000-8000-0000000000e2\",\"labels\":{\"tier\":\"rt\"}},\"spec\":{"
	    "\"nodeName\":\"n\",\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimName\":"
	    "\"c2\"}],\"containers\":[{\"name\":\"main\",\"resources\":{\"claims\":[{\"name\":"
	    "\"gpu\"}]},\"env\":[{\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"30Gi\"}]}]}}",
	};

	assert_non_null(c);
	(void)cache_set_pod_attrs(c, 0); /* no tier wants them: bound pods keep none */
	for (size_t i = 0; i < 2; i++) {
		cJSON *j = cJSON_Parse(pods[i]);
		assert_non_null(j);
		assert_int_equal(cache_apply_pod(c, WATCH_ADDED, j), 0);
		cJSON_Delete(j);
	}
	/* a tier by labels and priority class appears: the unbound one still has both */
	assert_int_equal(cache_set_pod_attrs(c, CACHE_ATTRS_ALL), 1); /* b lacks them */
	assert_int_equal(cache_get_pod_attrs(c, "ml", "u", NULL, pc, sizeof(pc), &ls), 0);
	assert_string_equal(pc, "high");
	assert_int_equal(ls.l.n, 1);
	labelset_clear(&ls);
	assert_int_equal(cache_get_pod_attrs(c, "ml", "b", NULL, pc, sizeof(pc), &ls),
	                 CACHE_ENOATTRS);
	struct attrs_seen a = attrs_on(c, "n");
	assert_int_equal(a.n, 1);
	assert_int_equal(a.known[0], 0); /* in every tier until read again */
	/* read again (the relist): known */
	cJSON *j = cJSON_Parse(pods[1]);
	assert_int_equal(cache_apply_pod(c, WATCH_MODIFIED, j), 0);
	cJSON_Delete(j);
	a = attrs_on(c, "n");
	assert_int_equal(a.known[0], 1);
	assert_int_equal(a.n_labels[0], 1);
	labelset_clear(&ls);
	cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_new_free),
	    cmocka_unit_test(test_node_fixture),
	    cmocka_unit_test(test_node_capacity_stream),
	    cmocka_unit_test(test_pod_list_fixture),
	    cmocka_unit_test(test_pod_life_stream),
	    cmocka_unit_test(test_pod_deleted),
	    cmocka_unit_test(test_pod_replaced),
	    cmocka_unit_test(test_pod_fields),
	    cmocka_unit_test(test_seen_when_first_bound),
	    cmocka_unit_test(test_bookmark_error_ignored),
	    cmocka_unit_test(test_resync_pods),
	    cmocka_unit_test(test_dra_pod_gone),
	    cmocka_unit_test(test_resync_nodes),
	    cmocka_unit_test(test_each_gpu_node_and_stats),
	    cmocka_unit_test(test_many_pods_random),
	    cmocka_unit_test(test_saturated_sum),
	    cmocka_unit_test(test_node_record_lifetime),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_nodes_full),
	    cmocka_unit_test(test_gone_reads_cache),
	    cmocka_unit_test(test_concurrent_readers),
	    cmocka_unit_test(test_bytes_accounted),
	    cmocka_unit_test(test_compact_pods),
	    cmocka_unit_test(test_gpu_pods_never_compact),
	    cmocka_unit_test(test_tier_attrs_kept_when_wanted),
	    cmocka_unit_test(test_tier_attrs_bytes_exact),
	    cmocka_unit_test(test_dra_figures_kept),
	    cmocka_unit_test(test_pod_claims_kept),
	    cmocka_unit_test(test_dra_pod_tier_attrs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
