/*
 * Unit tests for lib/webhook: the review pipeline end to end, with the fixtures in test/data and
 * a fake cluster behind struct placer_source (no network).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "cache.h"
#include "kube.h"
#include "ledger.h"
#include "log.h"
#include "metrics.h"
#include "webhook.h"
#include "fixture.h"
#include "fake_lease.h"
#include "record.h"
#include "shared.h"

#define GI (1024ull * 1024 * 1024)

/* The fake cluster: one node, a list of pods on it, pods by name. */
struct fake {
	cJSON *node;                  /* returned by get_node, or NULL -> 404 */
	cJSON *items;                 /* pods listed on the node */
	cJSON *pods;                  /* array of pods get_pod finds by namespace/name */
	int node_rc, list_rc, pod_rc; /* forced errors */
	int node_delay_ms;            /* a slow API server */
	cJSON *pod_override;          /* when set, every get_pod answers this (borrowed) */
	int n_get_pod, n_get_node, n_list;
	char last_pod[256];
	const char *list_err; /* the error text of a forced list error (NULL: a timeout) */
	const char *fail_pod; /* get_pod of this name fails (API error) */
	/* Called by list_pods_on_node after its answer is made (another placement acting while
	 * this one lists), and n_list so far. */
	void (*list_hook)(struct fake *f, const char *node);
	/* When set: list_pods_on_node and get_pod try the node's ledger lock, counting in
	 * lock_busy the calls made while a placement held it. */
	struct ledger *probe_ledger;
	const char *probe_node;
	int lock_busy, lock_probes;
};

static void probe_lock(struct fake *f)
{
	int busy = 0;

	if (f->probe_ledger == NULL)
		return;
	struct ledger_node *n = ledger_trylock(f->probe_ledger, f->probe_node, &busy);
	ledger_unlock(n);
	f->lock_busy += busy;
	f->lock_probes++;
}

static const char *meta_str(const cJSON *o, const char *key)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "metadata");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
	return cJSON_IsString(v) ? v->valuestring : "";
}

static int fake_get_pod(void *ctx, const char *ns, const char *name, cJSON **pod, long *code,
                        char *err, size_t errlen)
{
	struct fake *f = ctx;
	const cJSON *p;
	f->n_get_pod++;
	probe_lock(f);
	snprintf(f->last_pod, sizeof(f->last_pod), "%s/%s", ns, name);
	if (f->pod_rc || (f->fail_pod && strcmp(f->fail_pod, name) == 0)) {
		*code = 0;
		snprintf(err, errlen, "GET pod: connection refused");
		return f->pod_rc ? f->pod_rc : KUBE_ETRANSPORT;
	}
	if (f->pod_override != NULL) { /* a confused or hostile API server */
		*pod = cJSON_Duplicate(f->pod_override, 1);
		*code = 200;
		return 0;
	}
	cJSON_ArrayForEach(p, f->pods)
	{
		if (strcmp(meta_str(p, "namespace"), ns) == 0 &&
		    strcmp(meta_str(p, "name"), name) == 0) {
			*pod = cJSON_Duplicate(p, 1);
			*code = 200;
			return 0;
		}
	}
	*code = 404;
	snprintf(err, errlen, "pods \"%s\" not found", name);
	return KUBE_ENOTFOUND;
}

static int fake_get_node(void *ctx, const char *name, cJSON **node, long *code, char *err,
                         size_t errlen)
{
	struct fake *f = ctx;
	/* atomic: test_self_time_excludes_waits watches it from the main thread */
	__atomic_fetch_add(&f->n_get_node, 1, __ATOMIC_SEQ_CST);
	if (f->node_delay_ms)
		usleep((useconds_t)f->node_delay_ms * 1000);
	if (f->node_rc) {
		*code = 500;
		snprintf(err, errlen, "GET node %s: HTTP 500", name);
		return f->node_rc;
	}
	if (f->node == NULL || strcmp(meta_str(f->node, "name"), name) != 0) {
		*code = 404;
		snprintf(err, errlen, "nodes \"%s\" not found", name);
		return KUBE_ENOTFOUND;
	}
	*node = cJSON_Duplicate(f->node, 1);
	*code = 200;
	return 0;
}

static int fake_list(void *ctx, const char *node, cJSON **items, long *code, char *err,
                     size_t errlen)
{
	struct fake *f = ctx;
	f->n_list++;
	if (f->list_rc) {
		*code = 0;
		snprintf(err, errlen, "%s",
		         f->list_err ? f->list_err : "LIST pods: timeout after 2000 ms");
		return f->list_rc;
	}
	probe_lock(f);
	*items = cJSON_Duplicate(f->items, 1);
	*code = 200;
	if (f->list_hook != NULL)
		f->list_hook(f, node);
	return 0;
}

struct env {
	struct fake fake;
	struct ledger *ledger;
	struct metrics *metrics;
	struct webhook *w;
	const char *exempt[2];
	struct webhook_config cfg;
};

/* The state of gpu-node-a from the fixtures; get_pod knows the unscheduled llama pod. */
static void fake_fixture_state(struct fake *f)
{
	cJSON *list = fixture_json("podlist-gpu-node-a.json");
	f->node = fixture_json("node-gpu-node-a.json");
	f->items = cJSON_DetachItemFromObjectCaseSensitive(list, "items");
	cJSON_Delete(list);
	f->pods = cJSON_CreateArray();
	cJSON *review = fixture_json("review-pod-create-unscheduled.json");
	cJSON *req = cJSON_GetObjectItemCaseSensitive(review, "request");
	cJSON_AddItemToArray(f->pods, cJSON_DetachItemFromObjectCaseSensitive(req, "object"));
	cJSON_Delete(review);
}

static void env_build(struct env *e)
{
	webhook_free(e->w);
	struct placer_source src = {&e->fake, fake_get_pod, fake_get_node, fake_list};
	e->w = webhook_new(&e->cfg, &src, e->ledger, e->metrics);
	assert_non_null(e->w);
}

static int devnull = -1;

static void quiet_logs(void)
{
	if (devnull < 0)
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	log_set_fd(devnull);
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	quiet_logs();
	fake_fixture_state(&e->fake);
	e->ledger = ledger_new(60000);
	e->metrics = metrics_new();
	e->cfg.threshold = 0.90;
	e->cfg.warn_threshold = 0.80;
	env_build(e);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	webhook_free(e->w);
	ledger_free(e->ledger);
	metrics_free(e->metrics);
	cJSON_Delete(e->fake.node);
	cJSON_Delete(e->fake.items);
	cJSON_Delete(e->fake.pods);
	free(e);
	return 0;
}

/* Keep only the non-GPU pod on the node: an empty GPU node. */
static void empty_node(struct env *e)
{
	cJSON_Delete(e->fake.items);
	e->fake.items = cJSON_CreateArray();
}

struct answer {
	cJSON *root;
	const char *uid;
	int allowed;
	int code;
	const char *message;
	const cJSON *warnings;
};

static struct answer review_text(struct env *e, const char *body)
{
	char *out = NULL, err[WEBHOOK_ERR_MAX];
	size_t len = 0;
	struct answer a = {0};
	int rc = webhook_review(e->w, body, strlen(body), &out, &len, err, sizeof(err));
	if (rc != 0)
		fail_msg("webhook_review: %d %s", rc, err);
	assert_int_equal(strlen(out), len);
	a.root = cJSON_Parse(out);
	free(out);
	assert_non_null(a.root);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(a.root, "apiVersion")->valuestring,
	                    "admission.k8s.io/v1");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(a.root, "kind")->valuestring,
	                    "AdmissionReview");
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(a.root, "response");
	assert_non_null(resp);
	a.uid = cJSON_GetObjectItemCaseSensitive(resp, "uid")->valuestring;
	a.allowed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed"));
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(resp, "status");
	if (status != NULL) {
		a.code = cJSON_GetObjectItemCaseSensitive(status, "code")->valueint;
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(status, "message");
		a.message = cJSON_IsString(m) ? m->valuestring : "";
	}
	a.warnings = cJSON_GetObjectItemCaseSensitive(resp, "warnings");
	return a;
}

static struct answer review_fixture(struct env *e, const char *name)
{
	char *body = fixture_read(name, NULL);
	struct answer a = review_text(e, body);
	free(body);
	return a;
}

/* A fixture with one edit made through cJSON: fn changes the request. */
static struct answer review_edited(struct env *e, const char *name, void (*fn)(cJSON *req))
{
	cJSON *r = fixture_json(name);
	fn(cJSON_GetObjectItemCaseSensitive(r, "request"));
	char *body = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	struct answer a = review_text(e, body);
	cJSON_free(body);
	return a;
}

static const char *warning0(const struct answer *a)
{
	const cJSON *w = cJSON_GetArrayItem(a->warnings, 0);
	return cJSON_IsString(w) ? w->valuestring : NULL;
}

static uint64_t pending_on(struct env *e, const char *node)
{
	struct ledger_node *n = ledger_lock(e->ledger, node);
	assert_non_null(n);
	uint64_t b = ledger_pending_bytes(n, NULL, ledger_now_ms());
	ledger_unlock(n);
	return b;
}

static void test_nodename_denied_on_full_node(void **state)
{
	struct env *e = *state;
	struct answer a = review_fixture(e, "review-pod-create-nodename.json");
	assert_string_equal(a.uid, "a1b2c3d4-0002-4000-8000-000000000002");
	assert_false(a.allowed);
	assert_int_equal(a.code, 403);
	/* used: chat-7b-0 20Gi + chat-7b-1 20Gi (terminating) + legacy-notebook one whole GPU
	 * (81559Mi); the Succeeded and the non-GPU pod do not count. */
	assert_non_null(strstr(a.message, "inference/embedder-0"));
	assert_non_null(strstr(a.message, "gpu-node-a"));
	assert_non_null(strstr(a.message, "inference/legacy-notebook"));
	assert_non_null(strstr(a.message, "inference/chat-7b-1"));
	assert_null(strstr(a.message, "batch-summarize"));
	assert_null(strstr(a.message, "log-shipper"));
	assert_int_equal(e->fake.n_get_node, 1);
	assert_int_equal(e->fake.n_list, 1);
	assert_int_equal(e->fake.n_get_pod, 0);
	assert_int_equal(ledger_size(e->ledger), 0);
	cJSON_Delete(a.root);
}

static void test_binding_looks_up_pod_and_denies(void **state)
{
	struct env *e = *state;
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_string_equal(a.uid, "a1b2c3d4-0003-4000-8000-000000000003");
	assert_false(a.allowed);
	assert_int_equal(a.code, 403);
	assert_int_equal(e->fake.n_get_pod, 1);
	assert_string_equal(e->fake.last_pod, "inference/llama-8b-6d5f9c7b8-x2k4q");
	assert_non_null(strstr(a.message, "inference/llama-8b-6d5f9c7b8-x2k4q (24Gi)"));
	cJSON_Delete(a.root);
}

static void test_binding_target_kind_omitted(void **state)
{
	struct env *e = *state;
	struct answer a = review_fixture(e, "review-binding-create-target-kind-omitted.json");
	assert_string_equal(a.uid, "a1b2c3d4-0004-4000-8000-000000000004");
	assert_false(a.allowed); /* exactly like target.kind Node: checked, full node */
	assert_int_equal(e->fake.n_get_pod, 1);
	assert_int_equal(e->fake.n_list, 1);
	cJSON_Delete(a.root);
}

static void test_binding_allowed_reserves(void **state)
{
	struct env *e = *state;
	empty_node(e);
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	assert_null(a.warnings);
	assert_int_equal(ledger_size(e->ledger), 1);
	assert_int_equal(pending_on(e, "gpu-node-a"), 24 * GI);
	cJSON_Delete(a.root);
	/* The same binding retried does not count itself twice. */
	a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	assert_int_equal(ledger_size(e->ledger), 1);
	cJSON_Delete(a.root);
}

static void set_stale_binding_uid(cJSON *req)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(req, "object"), "metadata");
	cJSON_ReplaceItemInObjectCaseSensitive(
	    md, "uid", cJSON_CreateString("11111111-dead-4000-8000-old0pod0uid0"));
}

/* A Binding naming another uid than the pod's (kube-scheduler's Binding of a pod deleted and
 * created again under its name, a StatefulSet's; or a forged one): the API server's storage
 * refuses it after admission (the Binding's uid is a precondition of the pod's update,
 * pkg/registry/core/pod/storage/storage.go setPodNodeAndMetadata), so the pod read by GET is
 * never placed by it. Admitted as AlreadyBound and BeingDeleted are, reserving nothing: a
 * reservation would count the pod on the node until the TTL, where it never comes. */
static void test_binding_of_another_uid_reserves_nothing(void **state)
{
	struct env *e = *state;
	empty_node(e);
	struct answer a = review_edited(e, "review-binding-create.json", set_stale_binding_uid);
	assert_string_equal(a.uid, "a1b2c3d4-0003-4000-8000-000000000003");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	assert_int_equal(ledger_size(e->ledger), 0);
	assert_int_equal(e->fake.n_list + e->fake.n_get_node, 0);
}

/* The DRA store not read (webhook_config.dra_fresh -1): a GPU placement is refused with 500
 * DRANotRead and reserves nothing, since claims on the node could be missing; read once and
 * stale since (0), the same Binding on a node without DRA GPUs is admitted. */
static int dra_fresh_answer;
static int dra_fresh_stub(void *ctx, double now)
{
	(void)ctx;
	(void)now;
	return dra_fresh_answer;
}

static void test_dra_not_read_refused(void **state)
{
	struct env *e = *state;
	empty_node(e);
	dra_fresh_answer = -1;
	e->cfg.dra_fresh = dra_fresh_stub;
	env_build(e);
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_int_equal(a.code, 500);
	assert_string_equal(a.uid, "a1b2c3d4-0003-4000-8000-000000000003");
	assert_non_null(strstr(a.message, "has not read the cluster's DRA ResourceSlices"));
	assert_int_equal(ledger_size(e->ledger), 0);
	cJSON_Delete(a.root);
	/* Listed once, a watch broken since (0): a node without DRA GPUs and a pod naming no
	 * claim are decided as usual. */
	dra_fresh_answer = 0;
	a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	assert_int_equal(ledger_size(e->ledger), 1);
	cJSON_Delete(a.root);
}

static void test_dryrun_reserves_nothing(void **state)
{
	struct env *e = *state;
	empty_node(e);
	struct answer a = review_fixture(e, "review-pod-create-dryrun.json");
	assert_string_equal(a.uid, "a1b2c3d4-0005-4000-8000-000000000005");
	assert_true(a.allowed);
	assert_int_equal(e->fake.n_list, 1); /* evaluated */
	assert_int_equal(ledger_size(e->ledger), 0);
	cJSON_Delete(a.root);
	/* On the full node a dry run is refused as the real request would be. */
	cJSON_Delete(e->fake.items);
	cJSON *list = fixture_json("podlist-gpu-node-a.json");
	e->fake.items = cJSON_DetachItemFromObjectCaseSensitive(list, "items");
	cJSON_Delete(list);
	a = review_fixture(e, "review-pod-create-dryrun.json");
	assert_false(a.allowed);
	assert_int_equal(ledger_size(e->ledger), 0);
	cJSON_Delete(a.root);
}

static void test_update_allowed_without_io(void **state)
{
	struct env *e = *state;
	struct answer a = review_fixture(e, "review-pod-update.json");
	assert_string_equal(a.uid, "a1b2c3d4-0006-4000-8000-000000000006");
	assert_true(a.allowed);
	assert_int_equal(e->fake.n_get_node + e->fake.n_list + e->fake.n_get_pod, 0);
	cJSON_Delete(a.root);
}

static void test_unscheduled_allowed_without_io(void **state)
{
	struct env *e = *state;
	struct answer a = review_fixture(e, "review-pod-create-unscheduled.json");
	assert_string_equal(a.uid, "a1b2c3d4-0001-4000-8000-000000000001");
	assert_true(a.allowed);
	assert_null(a.warnings);
	assert_int_equal(e->fake.n_get_node + e->fake.n_list + e->fake.n_get_pod, 0);
	cJSON_Delete(a.root);
}

static void set_bad_declaration(cJSON *req)
{
	cJSON *c =
	    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
	                           cJSON_GetObjectItemCaseSensitive(
	                               cJSON_GetObjectItemCaseSensitive(req, "object"), "spec"),
	                           "containers"),
	                       0);
	cJSON *env = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "env"), 0);
	cJSON_ReplaceItemInObjectCaseSensitive(env, "value", cJSON_CreateString("24GB"));
}

static void test_unscheduled_bad_declaration_denied(void **state)
{
	struct env *e = *state;
	struct answer a =
	    review_edited(e, "review-pod-create-unscheduled.json", set_bad_declaration);
	assert_string_equal(a.uid, "a1b2c3d4-0001-4000-8000-000000000001");
	assert_false(a.allowed);
	assert_int_equal(a.code, 403);
	assert_non_null(strstr(a.message, "vllm"));
	assert_int_equal(e->fake.n_get_node + e->fake.n_list, 0);
	cJSON_Delete(a.root);
}

static void test_init_and_sidecar_demand(void **state)
{
	struct env *e = *state;
	empty_node(e);
	struct answer a = review_fixture(e, "review-pod-create-init-and-sidecar.json");
	assert_string_equal(a.uid, "a1b2c3d4-0007-4000-8000-000000000007");
	assert_true(a.allowed);
	/* max(20Gi + 6Gi sidecar, 30Gi init) = 30Gi reserved */
	assert_int_equal(pending_on(e, "gpu-node-a"), 30 * GI);
	cJSON_Delete(a.root);
}

static void test_api_errors_deny_with_uid(void **state)
{
	struct env *e = *state;
	e->fake.list_rc = KUBE_ETIMEOUT;
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_string_equal(a.uid, "a1b2c3d4-0003-4000-8000-000000000003");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "API server could not be asked"));
	assert_non_null(strstr(a.message, "LIST pods on node gpu-node-a"));
	assert_int_equal(ledger_size(e->ledger), 0);
	cJSON_Delete(a.root);

	e->fake.list_rc = 0;
	e->fake.node_rc = KUBE_EHTTP;
	a = review_fixture(e, "review-pod-create-nodename.json");
	assert_string_equal(a.uid, "a1b2c3d4-0002-4000-8000-000000000002");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "GET node gpu-node-a"));
	cJSON_Delete(a.root);

	e->fake.node_rc = 0;
	e->fake.pod_rc = KUBE_ETRANSPORT;
	a = review_fixture(e, "review-binding-create-target-kind-omitted.json");
	assert_string_equal(a.uid, "a1b2c3d4-0004-4000-8000-000000000004");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "GET pod inference/llama-8b-6d5f9c7b8-x2k4q"));
	cJSON_Delete(a.root);
}

/* A slow API server: once the review budget is spent, no further call is made. */
static void test_budget_spent_denies(void **state)
{
	struct env *e = *state;
	empty_node(e);
	e->cfg.budget_ms = 50;
	env_build(e);
	e->fake.node_delay_ms = 80;
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_string_equal(a.uid, "a1b2c3d4-0003-4000-8000-000000000003");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "too slow"));
	assert_non_null(strstr(a.message, "LIST pods on node gpu-node-a"));
	assert_int_equal(e->fake.n_list, 0);
	assert_int_equal(ledger_size(e->ledger), 0);
	cJSON_Delete(a.root);
	e->fake.node_delay_ms = 0; /* well within a budget: decided normally */
	e->cfg.budget_ms = 60000;
	env_build(e);
	a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
}

/* Which reviews need the API server: only GPU placements (the server queues only those). */
static void test_needs_api(void **state)
{
	struct env *e = *state;
	const char *names[] = {
	    "review-pod-update.json",          "review-pod-create-unscheduled.json",
	    "review-pod-create-nodename.json", "review-binding-create.json",
	    "review-pod-create-dryrun.json",
	};
	const int want[] = {0, 0, 1, 1, 1};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *body = fixture_read(names[i], NULL), *out = NULL, err[WEBHOOK_ERR_MAX];
		struct webhook_review_ctx *x = NULL;
		size_t len;
		assert_int_equal(
		    webhook_prepare(e->w, body, strlen(body), webhook_now(), &x, err, sizeof(err)),
		    0);
		free(body);
		assert_int_equal(webhook_needs_api(x), want[i]);
		/* prepare alone never asks the API server */
		assert_int_equal(e->fake.n_get_node + e->fake.n_list + e->fake.n_get_pod, 0);
		if (i == 0) { /* a prepared review may be dropped unanswered */
			webhook_discard(x);
			continue;
		}
		assert_int_equal(webhook_finish(x, &out, &len, err, sizeof(err)), 0);
		free(out);
		e->fake.n_get_node = e->fake.n_list = e->fake.n_get_pod = 0;
	}
	/* Malformed with a uid, and exempt: decided at once too. */
	const char *bad = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
	                  "\"request\":{\"uid\":\"u-1\",\"operation\":\"CREATE\",\"object\":7}}";
	struct webhook_review_ctx *x = NULL;
	char err[WEBHOOK_ERR_MAX];
	assert_int_equal(
	    webhook_prepare(e->w, bad, strlen(bad), webhook_now(), &x, err, sizeof(err)), 0);
	assert_int_equal(webhook_needs_api(x), 0);
	webhook_discard(x);
	webhook_discard(NULL);
	assert_int_equal(webhook_prepare(e->w, "{}", 2, webhook_now(), &x, err, sizeof(err)),
	                 WEBHOOK_EBADREQUEST);
	assert_null(x);
}

/* A placement the server cannot give a thread is denied at once, uid echoed, no API call. */
static void test_refuse_busy(void **state)
{
	struct env *e = *state;
	char *body = fixture_read("review-binding-create.json", NULL), *out = NULL,
	     err[WEBHOOK_ERR_MAX];
	struct webhook_review_ctx *x = NULL;
	size_t len = 0;
	assert_int_equal(
	    webhook_prepare(e->w, body, strlen(body), webhook_now(), &x, err, sizeof(err)), 0);
	free(body);
	assert_int_equal(webhook_needs_api(x), 1);
	webhook_refuse_busy(x, "review queue full");
	assert_int_equal(webhook_finish(x, &out, &len, err, sizeof(err)), 0);
	assert_int_equal(e->fake.n_get_node + e->fake.n_list + e->fake.n_get_pod, 0);
	cJSON *root = cJSON_Parse(out);
	free(out);
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
	assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed")));
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(resp, "uid")->valuestring,
	                    "a1b2c3d4-0003-4000-8000-000000000003");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(resp, "status");
	assert_non_null(strstr(cJSON_GetObjectItemCaseSensitive(st, "message")->valuestring,
	                       "too busy (review queue full)"));
	cJSON_Delete(root);
	assert_int_equal(pending_on(e, "gpu-node-a"), 0);

	/* A review decided without the API server is left as it is. */
	body = fixture_read("review-pod-update.json", NULL);
	assert_int_equal(
	    webhook_prepare(e->w, body, strlen(body), webhook_now(), &x, err, sizeof(err)), 0);
	free(body);
	webhook_refuse_busy(x, "review queue full");
	assert_int_equal(webhook_finish(x, &out, &len, err, sizeof(err)), 0);
	assert_non_null(strstr(out, "\"allowed\":true"));
	free(out);
}

/*
 * The budget runs from the review's arrival: a placement that waited (for a worker) past it
 * is denied at once, without a single API call, for a pod CREATE and for a binding.
 */
static void test_budget_counts_from_arrival(void **state)
{
	struct env *e = *state;
	empty_node(e);
	e->cfg.budget_ms = 100;
	env_build(e);
	const char *names[] = {"review-pod-create-nodename.json", "review-binding-create.json"};
	for (size_t i = 0; i < 2; i++) {
		char *body = fixture_read(names[i], NULL), *out = NULL, err[WEBHOOK_ERR_MAX];
		struct webhook_review_ctx *x = NULL;
		size_t len;
		/* Arrived 300 ms ago: three budgets spent waiting in a queue. */
		assert_int_equal(webhook_prepare(e->w, body, strlen(body), webhook_now() - 0.3, &x,
		                                 err, sizeof(err)),
		                 0);
		free(body);
		assert_int_equal(webhook_needs_api(x), 1);
		assert_int_equal(webhook_finish(x, &out, &len, err, sizeof(err)), 0);
		cJSON *root = cJSON_Parse(out);
		free(out);
		const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
		assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed")));
		const char *msg = cJSON_GetObjectItemCaseSensitive(
		                      cJSON_GetObjectItemCaseSensitive(resp, "status"), "message")
		                      ->valuestring;
		assert_non_null(strstr(msg, "too busy"));
		assert_non_null(strstr(msg, "since the review arrived"));
		cJSON_Delete(root);
	}
	assert_int_equal(e->fake.n_get_node + e->fake.n_list + e->fake.n_get_pod, 0);
	assert_int_equal(ledger_size(e->ledger), 0);
	/* Arrived just now: the same placement is decided normally. */
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
}

static void test_binding_pod_not_found_denied(void **state)
{
	struct env *e = *state;
	cJSON_Delete(e->fake.pods);
	e->fake.pods = cJSON_CreateArray();
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "not found"));
	assert_int_equal(ledger_size(e->ledger), 0); /* a forged Binding reserves nothing */
	cJSON_Delete(a.root);
}

/* A GET pod answered with anything but the Pod asked for is denied (it would read as no GPU). */
static void test_binding_wrong_object_denied(void **state)
{
	struct env *e = *state;
	cJSON *list = cJSON_Parse("{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":[]}");
	cJSON *other = cJSON_Duplicate(cJSON_GetArrayItem(e->fake.pods, 0), 1);
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(other, "metadata"),
	                                       "name", cJSON_CreateString("someone-else"));
	cJSON *answers[] = {list, other};
	for (size_t i = 0; i < 2; i++) {
		e->fake.pod_override = answers[i];
		struct answer a = review_fixture(e, "review-binding-create.json");
		assert_false(a.allowed);
		assert_non_null(strstr(a.message, "not the Pod asked for"));
		cJSON_Delete(a.root);
	}
	e->fake.pod_override = NULL;
	cJSON_Delete(list);
	cJSON_Delete(other);
}

static void test_exempt_namespace(void **state)
{
	struct env *e = *state;
	e->exempt[0] = "inference";
	e->cfg.exempt_namespaces = e->exempt;
	e->cfg.n_exempt_namespaces = 1;
	env_build(e);
	struct answer a = review_fixture(e, "review-pod-create-nodename.json");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	assert_int_equal(e->fake.n_get_node + e->fake.n_list + e->fake.n_get_pod, 0);
	cJSON_Delete(a.root);
}

static void add_mirror_annotation(cJSON *req)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(req, "object"), "metadata");
	cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
	cJSON_AddStringToObject(ann, "kubernetes.io/config.mirror", "abc123");
}

static void test_mirror_pod_allowed(void **state)
{
	struct env *e = *state;
	struct answer a =
	    review_edited(e, "review-pod-create-nodename.json", add_mirror_annotation);
	assert_true(a.allowed);
	assert_int_equal(e->fake.n_get_node + e->fake.n_list, 0);
	cJSON_Delete(a.root);
}

/* An exempt or mirror pod already on a node still counts as usage there. */
/* The GPU pod of review-pod-create-nodename.json, declaring `value`, added to the node's pod
 * list; returns its metadata for the caller to edit. */
static cJSON *add_listed_gpu_pod(struct env *e, const char *value)
{
	cJSON *review = fixture_json("review-pod-create-nodename.json");
	cJSON *req = cJSON_GetObjectItemCaseSensitive(review, "request");
	cJSON *obj = cJSON_DetachItemFromObjectCaseSensitive(req, "object");
	cJSON_Delete(review);
	cJSON *containers = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(obj, "spec"), "containers");
	cJSON *env = cJSON_GetArrayItem(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(containers, 0), "env"), 0);
	cJSON_ReplaceItemInObjectCaseSensitive(env, "value", cJSON_CreateString(value));
	cJSON_AddItemToArray(e->fake.items, obj);
	return cJSON_GetObjectItemCaseSensitive(obj, "metadata");
}

static void test_mirror_pod_on_node_counts(void **state)
{
	struct env *e = *state;
	empty_node(e);
	cJSON *meta = add_listed_gpu_pod(e, "60Gi");
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "name", cJSON_CreateString("static-gpu"));
	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"),
	                        "kubernetes.io/config.mirror", "x");
	struct answer a = review_fixture(e, "review-binding-create.json"); /* 24Gi */
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "inference/static-gpu 60Gi"));
	cJSON_Delete(a.root);
}

/* A listed pod without a usable metadata.name still counts (fail safe), named "(unnamed pod)". */
static void test_unnamed_listed_pod_counts(void **state)
{
	struct env *e = *state;
	empty_node(e);
	cJSON *meta = add_listed_gpu_pod(e, "60Gi");
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "name", cJSON_CreateNumber(5));
	struct answer a = review_fixture(e, "review-binding-create.json"); /* 24Gi */
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "(unnamed pod) 60Gi"));
	cJSON_Delete(a.root);
}

static void test_warn_mode_allows_with_warning(void **state)
{
	struct env *e = *state;
	e->cfg.mode_warn = 1;
	env_build(e);
	struct answer a = review_fixture(e, "review-pod-create-nodename.json");
	assert_true(a.allowed);
	assert_non_null(warning0(&a));
	assert_non_null(strstr(warning0(&a), "gpu-node-a"));
	assert_int_equal(ledger_size(e->ledger), 1); /* it will run: it counts */
	cJSON_Delete(a.root);
}

/* A binding review for pod ns/name to node, and that pod (24Gi, 1 GPU) known to get_pod. */
static char *binding_for(struct env *e, const char *uid, const char *name, const char *node)
{
	char pod_uid[300];
	cJSON *pod = cJSON_Duplicate(cJSON_GetArrayItem(e->fake.pods, 0), 1);
	cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	snprintf(pod_uid, sizeof(pod_uid), "uid-of-%s", name); /* unique, as in a cluster */
	cJSON_ReplaceItemInObjectCaseSensitive(md, "name", cJSON_CreateString(name));
	cJSON_ReplaceItemInObjectCaseSensitive(md, "uid", cJSON_CreateString(pod_uid));
	cJSON_AddItemToArray(e->fake.pods, pod);
	cJSON *r = fixture_json("review-binding-create.json");
	cJSON *req = cJSON_GetObjectItemCaseSensitive(r, "request");
	cJSON_ReplaceItemInObjectCaseSensitive(req, "uid", cJSON_CreateString(uid));
	cJSON_ReplaceItemInObjectCaseSensitive(req, "name", cJSON_CreateString(name));
	cJSON_ReplaceItemInObjectCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(req, "object"),
	                                     "metadata"),
	    "uid", cJSON_CreateString(pod_uid));
	cJSON *target = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(req, "object"), "target");
	cJSON_ReplaceItemInObjectCaseSensitive(target, "name", cJSON_CreateString(node));
	char *body = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	return body;
}

static void test_reservation_counted_by_next_placement(void **state)
{
	struct env *e = *state;
	empty_node(e);
	/* Budget 90% of 81559Mi = 71.7Gi: two 24Gi pods fit, the third does not. */
	const char *names[3] = {"p-0", "p-1", "p-2"};
	int want[3] = {1, 1, 0};
	for (int i = 0; i < 3; i++) {
		char uid[32];
		snprintf(uid, sizeof(uid), "uid-%d", i);
		char *body = binding_for(e, uid, names[i], "gpu-node-a");
		struct answer a = review_text(e, body);
		cJSON_free(body);
		assert_string_equal(a.uid, uid);
		assert_int_equal(a.allowed, want[i]);
		if (!want[i]) {
			assert_non_null(strstr(a.message, "inference/p-0 (admitting)"));
			assert_non_null(strstr(a.message, "inference/p-1 (admitting)"));
		}
		cJSON_Delete(a.root);
	}
	assert_int_equal(ledger_size(e->ledger), 2);
	/* p-0 appears on the node: its reservation is dropped, its pod counts instead. */
	cJSON *p0 = cJSON_Duplicate(cJSON_GetArrayItem(e->fake.pods, 1), 1);
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(p0, "spec");
	cJSON_AddStringToObject(spec, "nodeName", "gpu-node-a");
	cJSON_AddItemToArray(e->fake.items, p0);
	char *body = binding_for(e, "uid-3", "p-3", "gpu-node-a");
	struct answer a = review_text(e, body);
	cJSON_free(body);
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "inference/p-0 24Gi"));
	assert_null(strstr(a.message, "inference/p-0 (admitting)"));
	cJSON_Delete(a.root);
	assert_int_equal(ledger_size(e->ledger), 1);
}

/* A reservation of key (bytes) on gpu-node-a made age_ms ago. */
static void reserve_aged(struct env *e, const char *key, uint64_t bytes, uint64_t age_ms)
{
	struct ledger_node *n = ledger_lock(e->ledger, "gpu-node-a");
	assert_non_null(n);
	assert_int_equal(ledger_reserve(n, key, bytes, ledger_now_ms() - age_ms), 0);
	ledger_unlock(n);
}

/* A pod named name in inference known to get_pod (the llama pod, unbound), edited by fn. */
static cJSON *known_pod(struct env *e, const char *name)
{
	char pod_uid[300];
	cJSON *pod = cJSON_Duplicate(cJSON_GetArrayItem(e->fake.pods, 0), 1);
	snprintf(pod_uid, sizeof(pod_uid), "uid-of-%s", name);
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"),
	                                       "name", cJSON_CreateString(name));
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"),
	                                       "uid", cJSON_CreateString(pod_uid));
	cJSON_AddItemToArray(e->fake.pods, pod);
	return pod;
}

/*
 * A pod admitted (reserved) and deleted before any list of its node showed it: once past the
 * grace period, the next placement asks for the pod, gets 404 and no longer counts it. The
 * binding (24Gi) fits only without the 60Gi reservation.
 */
static void test_deleted_pod_reservation_dropped(void **state)
{
	struct env *e = *state;
	empty_node(e);
	reserve_aged(e, "inference/gone", 60 * GI, 10000); /* past the 5 s default grace */
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	assert_int_equal(e->fake.n_get_pod, 2); /* the binding's pod, then inference/gone */
	assert_string_equal(e->fake.last_pod, "inference/gone");
	assert_int_equal(ledger_size(e->ledger), 1); /* only the new placement's */
	assert_int_equal(pending_on(e, "gpu-node-a"), 24 * GI);
	cJSON_Delete(a.root);
}

/*
 * No ledger lock is held across an API call (ARCHITECTURE.md): while the API path LISTs the
 * node's pods and GETs the pod of a stale reservation, the node's ledger lock is free, so a
 * placement from the cache on a server thread (ledger_trylock) is not turned away. Before the
 * live view (issue 23) both calls ran under the lock: lock_busy was 2.
 */
static void test_api_calls_hold_no_ledger_lock(void **state)
{
	struct env *e = *state;
	empty_node(e);
	reserve_aged(e, "inference/gone", 60 * GI, 10000); /* looked up: a GET on the path */
	e->fake.probe_ledger = e->ledger;
	e->fake.probe_node = "gpu-node-a";
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	assert_int_equal(e->fake.n_list, 1);
	assert_int_equal(e->fake.n_get_pod, 2);
	assert_int_equal(e->fake.lock_probes, 3); /* the binding's pod, the LIST, the lookup */
	assert_int_equal(e->fake.lock_busy, 0);
	assert_int_equal(pending_on(e, "gpu-node-a"), 24 * GI);
	cJSON_Delete(a.root);
}

static cJSON *listed_gpu_pod(struct env *e, const char *name, const char *gpus, const char *mem);

/* Another placement, while this one lists gpu-node-a, sees inference/big (60Gi) on the node
 * and settles its reservation; the next lists show it. */
static void settle_big_once(struct fake *f, const char *node)
{
	int busy = 0;

	if (f->n_list != 1)
		return;
	struct ledger_node *n = ledger_trylock(f->probe_ledger, node, &busy);
	if (n == NULL)
		return; /* held across the LIST: nothing can settle meanwhile */
	const char *key = "inference/big", *uid = "uid-of-big";
	assert_int_equal(ledger_settle(n, &key, &uid, 1, ledger_now_ms()), 1);
	ledger_unlock(n);
	listed_gpu_pod((struct env *)(void *)f, "big", "1", "60Gi");
}

/*
 * The view is taken before the node's lock: a reservation settled meanwhile by a placement
 * that saw its pod (a newer list) would be counted neither as visible (our list is older) nor
 * as reserved. The ledger's generation tells: the pods are listed again, and the 60Gi pod
 * counts, so the 24Gi binding does not fit. Without the check it was admitted (84Gi over a
 * budget of 71.7Gi).
 */
static void test_settled_while_listing_lists_again(void **state)
{
	struct env *e = *state;
	empty_node(e);
	struct ledger_node *n = ledger_lock(e->ledger, "gpu-node-a");
	assert_int_equal(
	    ledger_reserve_uid(n, "inference/big", "uid-of-big", 60 * GI, ledger_now_ms()), 0);
	ledger_unlock(n);
	e->fake.probe_ledger = e->ledger;
	e->fake.probe_node = "gpu-node-a";
	e->fake.list_hook = settle_big_once;
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_int_equal(a.code, 403);
	assert_int_equal(e->fake.n_list, 2);
	assert_non_null(strstr(a.message, "inference/big 60Gi"));
	assert_null(strstr(a.message, "(admitting)"));
	assert_int_equal(ledger_size(e->ledger), 0);
	cJSON_Delete(a.root);
}

/* Every list races a settlement on the node: after 3 lists, denied (fail closed). */
static void settle_every_list(struct fake *f, const char *node)
{
	int busy = 0;
	char key[64];
	const char *k = key;

	snprintf(key, sizeof(key), "inference/churn-%d", f->n_list);
	struct ledger_node *n = ledger_trylock(f->probe_ledger, node, &busy);
	if (n == NULL)
		return;
	assert_int_equal(ledger_reserve(n, key, GI, ledger_now_ms()), 0);
	assert_int_equal(ledger_settle(n, &k, NULL, 1, ledger_now_ms()), 1);
	ledger_unlock(n);
}

static void test_settled_during_every_list_denied(void **state)
{
	struct env *e = *state;
	empty_node(e);
	e->fake.probe_ledger = e->ledger;
	e->fake.probe_node = "gpu-node-a";
	e->fake.list_hook = settle_every_list;
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_int_equal(a.code, 500);
	assert_non_null(strstr(a.message, "kept settling its reservations"));
	assert_int_equal(e->fake.n_list, 3);
	assert_int_equal(ledger_size(e->ledger), 0);
	cJSON_Delete(a.root);
}

/* Within the grace period the pod may not be persisted yet: no lookup, still counted. */
static void test_young_reservation_counted(void **state)
{
	struct env *e = *state;
	empty_node(e);
	reserve_aged(e, "inference/gone", 60 * GI, 0);
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "inference/gone (admitting) 60Gi"));
	assert_int_equal(e->fake.n_get_pod, 1);
	cJSON_Delete(a.root);
	/* The grace period is configurable: 30 s, and a reservation 10 s old is young. */
	e->cfg.grace_ms = 30000;
	env_build(e);
	reserve_aged(e, "inference/gone", 60 * GI, 10000);
	a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_int_equal(e->fake.n_get_pod, 2); /* the binding's own lookup only, again */
	cJSON_Delete(a.root);
	/* ... and 100 ms: 10 s old is stale. */
	e->cfg.grace_ms = 100;
	env_build(e);
	a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
}

/* Kept: the pod exists without a node (binding not landed), the lookup fails, the key names no
 * pod (generateName), or the pod is bound to this node after the list. */
static void test_unverifiable_reservations_counted(void **state)
{
	struct env *e = *state;
	empty_node(e);
	known_pod(e, "waiting");
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(known_pod(e, "late"), "spec"),
	                        "nodeName", "gpu-node-a");
	e->fake.fail_pod = "flaky";
	reserve_aged(e, "inference/waiting", 15 * GI, 10000);
	reserve_aged(e, "inference/flaky", 15 * GI, 10000);
	reserve_aged(e, "inference/late", 15 * GI, 10000);
	reserve_aged(e, "inference/gen-?uid-1", 15 * GI, 10000);
	struct answer a = review_fixture(e, "review-binding-create.json"); /* 60 + 24 > 71.7 */
	assert_false(a.allowed);
	assert_int_equal(e->fake.n_get_pod, 4); /* the binding's pod, waiting, flaky, late */
	assert_int_equal(ledger_size(e->ledger), 4);
	assert_non_null(strstr(a.message, "inference/waiting (admitting)"));
	assert_non_null(strstr(a.message, "inference/flaky (admitting)"));
	cJSON_Delete(a.root);
}

static void set_other_node(cJSON *pod)
{
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "nodeName",
	                        "gpu-node-b");
}

static void set_failed(cJSON *pod)
{
	cJSON_DeleteItemFromObjectCaseSensitive(pod, "status");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(pod, "status"), "phase", "Failed");
}

static void set_deleting(cJSON *pod)
{
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(pod, "metadata"),
	                        "deletionTimestamp", "2026-11-29T18:00:00Z");
}

/* Dropped: bound elsewhere, finished, being deleted unbound; at most 4 lookups, oldest first. */
static void test_gone_reservations_dropped_oldest_first(void **state)
{
	struct env *e = *state;
	empty_node(e);
	set_other_node(known_pod(e, "moved"));
	set_failed(known_pod(e, "failed"));
	set_deleting(known_pod(e, "deleting"));
	reserve_aged(e, "inference/moved", 10 * GI, 9000);
	reserve_aged(e, "inference/young-gone", 10 * GI, 6000); /* the 5th oldest: not asked */
	reserve_aged(e, "inference/failed", 10 * GI, 8000);
	reserve_aged(e, "inference/deleting", 10 * GI, 7000);
	reserve_aged(e, "inference/old-gone", 10 * GI, 20000);
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	assert_int_equal(e->fake.n_get_pod, 1 + PLACER_MAX_STALE_CHECKS);
	assert_string_equal(e->fake.last_pod, "inference/deleting"); /* the 4th oldest */
	/* young-gone and the new placement remain. */
	assert_int_equal(ledger_size(e->ledger), 2);
	assert_int_equal(pending_on(e, "gpu-node-a"), 34 * GI);
	cJSON_Delete(a.root);
	/* The next placement asks about young-gone. */
	a = review_fixture(e, "review-pod-create-nodename.json");
	assert_int_equal(e->fake.n_get_pod, 2 + PLACER_MAX_STALE_CHECKS);
	assert_string_equal(e->fake.last_pod, "inference/young-gone");
	assert_int_equal(ledger_size(e->ledger), 2);
	cJSON_Delete(a.root);
}

/*
 * Rule (placer.h, "Deleted pods"): a reservation is dropped for a pod deleted before binding,
 * not for one bound to this node and terminating: it holds its GPU memory until it stops, and
 * the node's list may not show it yet. Counted, so the binding (24Gi + 60Gi) is refused.
 */
static void test_terminating_bound_pod_reservation_kept(void **state)
{
	struct env *e = *state;
	empty_node(e);
	cJSON *ending = known_pod(e, "ending");
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(ending, "spec"), "nodeName",
	                        "gpu-node-a");
	set_deleting(ending);
	reserve_aged(e, "inference/ending", 60 * GI, 10000); /* past the grace: looked up */
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_int_equal(e->fake.n_get_pod, 2); /* the binding's pod, then inference/ending */
	assert_string_equal(e->fake.last_pod, "inference/ending");
	assert_non_null(strstr(a.message, "inference/ending (admitting) 60Gi"));
	assert_int_equal(ledger_size(e->ledger), 1);
	cJSON_Delete(a.root);
}

/* A pod listed on gpu-node-a: the llama pod renamed (uid "uid-of-<name>"), its container asking
 * for gpus GPUs and declaring mem (NULL: no declaration). */
static cJSON *listed_gpu_pod(struct env *e, const char *name, const char *gpus, const char *mem)
{
	char uid[300];
	cJSON *pod = cJSON_Duplicate(cJSON_GetArrayItem(e->fake.pods, 0), 1);
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0);
	cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
	snprintf(uid, sizeof(uid), "uid-of-%s", name);
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "name", cJSON_CreateString(name));
	cJSON_ReplaceItemInObjectCaseSensitive(meta, "uid", cJSON_CreateString(uid));
	cJSON_AddStringToObject(spec, "nodeName", "gpu-node-a");
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(res, "limits"),
	                                       "nvidia.com/gpu", cJSON_CreateString(gpus));
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(res, "requests"),
	                                       "nvidia.com/gpu", cJSON_CreateString(gpus));
	cJSON_DeleteItemFromObjectCaseSensitive(c, "env");
	if (mem != NULL) {
		cJSON *env = cJSON_AddArrayToObject(c, "env");
		cJSON *v = cJSON_CreateObject();
		cJSON_AddStringToObject(v, "name", "GPU_MEMORY_LIMIT");
		cJSON_AddStringToObject(v, "value", mem);
		cJSON_AddItemToArray(env, v);
	}
	cJSON_AddItemToArray(e->fake.items, pod);
	return pod;
}

/*
 * Rule (placement.h): a listed GPU pod without a valid declaration counts its GPU count x one
 * GPU's memory. gpu-node-a with 4 GPUs of 81559Mi: limit 90 percent of 318.6Gi = 286.7Gi. An
 * undeclared 2-GPU pod counts 159.3Gi: with 110Gi declared and the 24Gi binding, 293.3Gi is
 * over (counting it as one GPU, 213.6Gi, would fit).
 */
static void test_undeclared_multi_gpu_pod_counts_its_gpus(void **state)
{
	struct env *e = *state;
	empty_node(e);
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(e->fake.node, "metadata");
	cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
	if (ann == NULL)
		ann = cJSON_AddObjectToObject(meta, "annotations");
	cJSON_AddStringToObject(ann, "gpu-memory-guard.io/gpu-count", "4");
	listed_gpu_pod(e, "two-gpus", "2", NULL);
	listed_gpu_pod(e, "big", "1", "110Gi");
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "inference/two-gpus 159.3Gi"));
	assert_non_null(strstr(a.message, "293.3Gi"));
	cJSON_Delete(a.root);
	/* Without the 110Gi pod it fits: 159.3Gi + 24Gi. */
	empty_node(e);
	listed_gpu_pod(e, "two-gpus", "2", NULL);
	a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
}

/*
 * Rule (placement.h, README): the pod being placed never counts itself. A Binding retried after
 * its pod shows on the node, and a re-sent CREATE with nodeName, find the pod in the node's list
 * (same namespace/name): its demand counts once. 24Gi + 30Gi fits under 71.7Gi; counted twice
 * (78Gi) it would not.
 */
static void test_placed_pod_already_listed_counts_once(void **state)
{
	struct env *e = *state;
	empty_node(e);
	cJSON *self = cJSON_Duplicate(cJSON_GetArrayItem(e->fake.pods, 0), 1);
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(self, "spec"), "nodeName",
	                        "gpu-node-a");
	cJSON_AddItemToArray(e->fake.items, self);
	listed_gpu_pod(e, "other", "1", "30Gi");
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	/* The listed copy without a uid (matched by namespace/name alone): the same. */
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(self, "metadata"),
	                                        "uid");
	a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	cJSON_Delete(a.root);

	/* CREATE with nodeName of embedder-0 (12Gi), already listed, beside 26Gi and the llama
	 * binding admitted above (24Gi, reserved): 62Gi fits, 74Gi would not. */
	empty_node(e);
	cJSON *r = fixture_json("review-pod-create-nodename.json");
	cJSON_AddItemToArray(
	    e->fake.items,
	    cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(
	                        cJSON_GetObjectItemCaseSensitive(r, "request"), "object"),
	                    1));
	cJSON_Delete(r);
	listed_gpu_pod(e, "other", "1", "26Gi");
	a = review_fixture(e, "review-pod-create-nodename.json");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	/* Control: another pod of 12Gi there instead, and the same CREATE is refused. */
	empty_node(e);
	listed_gpu_pod(e, "other", "1", "26Gi");
	listed_gpu_pod(e, "twelve", "1", "12Gi");
	a = review_fixture(e, "review-pod-create-nodename.json");
	assert_false(a.allowed);
	cJSON_Delete(a.root);
}

/* Many reservations in flight: the largest few are named, the rest counted. */
static void test_many_reservations_named_and_counted(void **state)
{
	struct env *e = *state;
	empty_node(e);
	struct ledger_node *n = ledger_lock(e->ledger, "gpu-node-a");
	assert_non_null(n);
	for (int i = 0; i < 8; i++) { /* 6..13 Gi, 76Gi in all: no room for 24Gi more */
		char key[32];
		snprintf(key, sizeof(key), "batch/r-%d", i);
		assert_int_equal(ledger_reserve(n, key, (uint64_t)(6 + i) * GI, ledger_now_ms()),
		                 0);
	}
	ledger_unlock(n);
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "batch/r-7 (admitting) 13Gi"));
	assert_non_null(strstr(a.message, "batch/r-3 (admitting) 9Gi"));
	assert_null(strstr(a.message, "batch/r-2 (admitting)"));
	assert_non_null(strstr(a.message, "and 3 more"));
	cJSON_Delete(a.root);
}

static void test_warn_threshold_warning(void **state)
{
	struct env *e = *state;
	empty_node(e);
	e->cfg.warn_threshold = 0.30; /* 24.0Gi of 79.6Gi is 30.1% */
	env_build(e);
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	assert_non_null(warning0(&a));
	cJSON_Delete(a.root);
}

static void remove_node_labels(cJSON *node)
{
	cJSON *labels = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(node, "metadata"), "labels");
	cJSON_DeleteItemFromObjectCaseSensitive(labels, "nvidia.com/gpu.memory");
	cJSON_DeleteItemFromObjectCaseSensitive(labels, "nvidia.com/gpu.product");
}

static void test_unknown_capacity_denied(void **state)
{
	struct env *e = *state;
	remove_node_labels(e->fake.node);
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "gpu-memory-guard.io/gpu-memory"));
	assert_int_equal(e->fake.n_list, 0);
	cJSON_Delete(a.root);
}

static void test_threshold_annotation_overrides(void **state)
{
	struct env *e = *state;
	empty_node(e);
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(e->fake.node, "metadata");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"),
	                        "gpu-memory-guard.io/threshold", "0.25");
	struct answer a = review_fixture(e, "review-binding-create.json"); /* 24Gi > 19.9Gi */
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "25 percent"));
	cJSON_Delete(a.root);
}

/* No '%' in a message or warning: kube-scheduler reads a refused binding's message as a format
 * string. Nor may an echoed '%' (a declared value, an annotation, an API error) slip through. */
static void assert_no_percent(const struct answer *a)
{
	const cJSON *w;
	if (a->message != NULL && strchr(a->message, '%') != NULL)
		fail_msg("'%%' in message: %s", a->message);
	cJSON_ArrayForEach(w, a->warnings)
	{
		if (cJSON_IsString(w) && strchr(w->valuestring, '%') != NULL)
			fail_msg("'%%' in warning: %s", w->valuestring);
	}
}

static void set_percent_declaration(cJSON *req)
{
	cJSON *c =
	    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
	                           cJSON_GetObjectItemCaseSensitive(
	                               cJSON_GetObjectItemCaseSensitive(req, "object"), "spec"),
	                           "containers"),
	                       0);
	cJSON *env = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "env"), 0);
	cJSON_ReplaceItemInObjectCaseSensitive(env, "value", cJSON_CreateString("50%"));
}

static void set_threshold_annotation(struct env *e, const char *value)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(e->fake.node, "metadata");
	cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"),
	                        "gpu-memory-guard.io/threshold", value);
}

static void test_no_percent_in_messages(void **state)
{
	struct env *e = *state;
	const char *fixtures[] = {"review-pod-create-nodename.json", "review-binding-create.json",
	                          "review-binding-create-target-kind-omitted.json",
	                          "review-pod-create-dryrun.json"};
	struct answer a;
	/* Over the threshold on the fixtures' full node, for each placement fixture. */
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		a = review_fixture(e, fixtures[i]);
		assert_false(a.allowed);
		assert_non_null(strstr(a.message, "percent), above the 90 percent limit"));
		assert_no_percent(&a);
		cJSON_Delete(a.root);
	}
	/* Never fits: a threshold of 0.25 leaves less than the pod alone. */
	set_threshold_annotation(e, "0.25");
	a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "25 percent"));
	assert_no_percent(&a);
	cJSON_Delete(a.root);
	/* An annotation value with '%' echoed in the error: shown as the fullwidth sign. */
	set_threshold_annotation(e, "90%");
	a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "90\xef\xbc\x85"));
	assert_no_percent(&a);
	cJSON_Delete(a.root);
	cJSON_DeleteItemFromObjectCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(e->fake.node, "metadata"), "annotations");
	/* A declared value with '%', at kubectl apply and at placement. */
	a = review_edited(e, "review-pod-create-unscheduled.json", set_percent_declaration);
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "\"50\xef\xbc\x85\""));
	assert_no_percent(&a);
	cJSON_Delete(a.root);
	a = review_edited(e, "review-pod-create-nodename.json", set_percent_declaration);
	assert_false(a.allowed);
	assert_no_percent(&a);
	cJSON_Delete(a.root);
	/* An API server error text with '%' (an escaped URL, say). */
	e->fake.list_rc = KUBE_EHTTP;
	e->fake.list_err = "GET /api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-node-a: HTTP 503";
	a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "spec.nodeName\xef\xbc\x85"
	                                  "3Dgpu-node-a"));
	assert_no_percent(&a);
	cJSON_Delete(a.root);
	/* 400 of them: the wider sign pushes the text past the message cap, cut whole. */
	char many[401];
	memset(many, '%', 400);
	many[400] = '\0';
	e->fake.list_err = many;
	a = review_fixture(e, "review-binding-create.json");
	assert_false(a.allowed);
	assert_no_percent(&a);
	size_t mlen = strlen(a.message);
	assert_true(mlen > 900 && mlen < 1024);
	assert_int_equal((mlen - (size_t)(strstr(a.message, "\xef\xbc\x85") - a.message)) % 3, 0);
	cJSON_Delete(a.root);
	e->fake.list_rc = 0;
	/* Warnings: warn mode over the threshold, and the early warning. */
	e->cfg.mode_warn = 1;
	env_build(e);
	a = review_fixture(e, "review-pod-create-nodename.json");
	assert_true(a.allowed);
	assert_non_null(warning0(&a));
	assert_no_percent(&a);
	cJSON_Delete(a.root);
	e->cfg.mode_warn = 0;
	e->cfg.warn_threshold = 0.30;
	env_build(e);
	empty_node(e);
	a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	assert_non_null(warning0(&a));
	assert_non_null(strstr(warning0(&a), "30 percent warning level"));
	assert_no_percent(&a);
	cJSON_Delete(a.root);
}

static void strip_gpu(cJSON *req)
{
	cJSON *c =
	    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
	                           cJSON_GetObjectItemCaseSensitive(
	                               cJSON_GetObjectItemCaseSensitive(req, "object"), "spec"),
	                           "containers"),
	                       0);
	cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(res, "limits"),
	                                        "nvidia.com/gpu");
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(res, "requests"),
	                                        "nvidia.com/gpu");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "env");
}

/* Whole-webhook modes on the refusals integ_modes does not reach: the API server not
 * reachable (fail closed in enforce) and a bad declaration before any node is chosen. Warn
 * admits with the refusal as the warning, audit with it in auditAnnotations only; the reviews
 * are counted warned / allowed, by mode and reason; nothing is reserved. */
static void test_modes_admit_every_refusal(void **state)
{
	struct env *e = *state;
	char *text;
	size_t len;

	for (int audit = 0; audit <= 1; audit++) {
		e->cfg.mode_warn = !audit;
		e->cfg.mode_audit = audit;
		env_build(e);
		e->fake.list_rc = KUBE_ETIMEOUT;
		struct answer a = review_fixture(e, "review-binding-create.json");
		assert_true(a.allowed);
		assert_int_equal(a.code, 0);
		const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(a.root, "response"), "auditAnnotations");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, WEBHOOK_AUDIT_KEY);
		if (audit) {
			assert_null(a.warnings);
			assert_true(cJSON_IsString(v));
			assert_non_null(strstr(v->valuestring, "--mode audit: cannot check"));
			assert_non_null(strstr(v->valuestring, "API server could not be asked"));
		} else {
			assert_null(ann);
			assert_non_null(warning0(&a));
			assert_non_null(strstr(warning0(&a), "API server could not be asked"));
		}
		assert_int_equal(ledger_size(e->ledger), 0);
		cJSON_Delete(a.root);
		e->fake.list_rc = 0;
		a = review_edited(e, "review-pod-create-unscheduled.json", set_bad_declaration);
		assert_true(a.allowed);
		assert_true(audit ? a.warnings == NULL : strstr(warning0(&a), "vllm") != NULL);
		cJSON_Delete(a.root);
	}
	assert_int_equal(metrics_render(e->metrics, &text, &len), 0);
	assert_non_null(strstr(text, "gpu_memory_guard_mode_admitted_total{mode=\"warn\",reason="
	                             "\"APIServerUnavailable\"} 1\n"));
	assert_non_null(strstr(text, "gpu_memory_guard_mode_admitted_total{mode=\"audit\",reason="
	                             "\"APIServerUnavailable\"} 1\n"));
	assert_non_null(strstr(text, "gpu_memory_guard_mode_admitted_total{mode=\"audit\",reason="
	                             "\"InvalidDeclaration\"} 1\n"));
	assert_non_null(strstr(text, "gpu_memory_guard_reviews_total{kind=\"binding\",decision="
	                             "\"warned\"} 1\n"));
	assert_non_null(strstr(text, "gpu_memory_guard_reviews_total{kind=\"binding\",decision="
	                             "\"allowed\"} 1\n"));
	assert_null(strstr(text, "decision=\"error\"} 1"));
	free(text);
}

static void drop_declaration(cJSON *req)
{
	cJSON *c =
	    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
	                           cJSON_GetObjectItemCaseSensitive(
	                               cJSON_GetObjectItemCaseSensitive(req, "object"), "spec"),
	                           "containers"),
	                       0);
	cJSON_DeleteItemFromObjectCaseSensitive(c, "env");
	cJSON_ReplaceItemInObjectCaseSensitive(req, "dryRun",
	                                       cJSON_CreateTrue()); /* reserve none */
}

static void set_dry_run(cJSON *req)
{
	cJSON_ReplaceItemInObjectCaseSensitive(req, "dryRun", cJSON_CreateTrue());
}

/* --mode audit reports a pod whose demand was inferred (--undeclared infer: here its whole card,
 * alone on the empty time-sliced gpu-node-a) in auditAnnotations, with the source; a declared pod
 * gets no such entry, nor does an inferred one under --mode enforce. */
static void test_audit_reports_inferred_demand(void **state)
{
	struct env *e = *state;

	empty_node(e);
	for (int audit = 0; audit <= 1; audit++) {
		e->cfg.infer = 1;
		e->cfg.mode_audit = audit;
		env_build(e);
		struct answer a =
		    review_edited(e, "review-pod-create-nodename.json", drop_declaration);
		assert_true(a.allowed);
		const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(a.root, "response"), "auditAnnotations");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, WEBHOOK_AUDIT_KEY);
		if (audit) {
			assert_true(cJSON_IsString(v));
			assert_non_null(strstr(
			    v->valuestring, "--mode audit: GPU memory inferred, not declared: "));
		} else {
			assert_null(v);
		}
		cJSON_Delete(a.root);
	}
	/* Declared (GPU_MEMORY_LIMIT 12Gi) under audit: nothing to report. */
	struct answer a = review_edited(e, "review-pod-create-nodename.json", set_dry_run);
	assert_true(a.allowed);
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(a.root, "response"), "auditAnnotations");
	assert_null(cJSON_GetObjectItemCaseSensitive(ann, WEBHOOK_AUDIT_KEY));
	cJSON_Delete(a.root);
}

static void test_non_gpu_placement_allowed(void **state)
{
	struct env *e = *state;
	struct answer a = review_edited(e, "review-pod-create-nodename.json", strip_gpu);
	assert_true(a.allowed);
	assert_int_equal(e->fake.n_get_node + e->fake.n_list, 0);
	cJSON_Delete(a.root);
}

static void test_bad_requests(void **state)
{
	struct env *e = *state;
	char *out = NULL, err[WEBHOOK_ERR_MAX];
	size_t len;
	const char *bodies[] = {"not json", "{}", "{\"request\":{}}",
	                        "{\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"\"}} x", ""};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		int rc = webhook_review(e->w, bodies[i], strlen(bodies[i]), &out, &len, err,
		                        sizeof(err));
		assert_int_equal(rc, WEBHOOK_EBADREQUEST);
		assert_null(out);
		assert_true(strlen(err) > 0);
	}
}

/* A v1beta1 review (a webhook configuration listing admissionReviewVersions v1beta1) is refused
 * with 400 and the reason: a v1 answer would be rejected by the API server. */
static void test_v1beta1_review_refused(void **state)
{
	struct env *e = *state;
	size_t len;
	char *body = fixture_read("review-binding-create.json", &len);
	char *v = strstr(body, "\"admission.k8s.io/v1\"");
	assert_non_null(v);
	/* Same body, version v1beta1. */
	size_t head = (size_t)(v - body) + strlen("\"admission.k8s.io/v1");
	char *beta = malloc(len + 8);
	assert_non_null(beta);
	memcpy(beta, body, head);
	memcpy(beta + head, "beta1", 5);
	memcpy(beta + head + 5, body + head, len - head + 1);
	char *out = NULL, err[WEBHOOK_ERR_MAX] = "";
	size_t out_len = 0;
	int rc = webhook_review(e->w, beta, strlen(beta), &out, &out_len, err, sizeof(err));
	assert_int_equal(rc, WEBHOOK_EBADREQUEST);
	assert_null(out);
	assert_non_null(strstr(err, "\"admission.k8s.io/v1beta1\" is not served"));
	assert_int_equal(e->fake.n_get_node + e->fake.n_list + e->fake.n_get_pod, 0);
	free(beta);
	free(body);
}

/* A review that has a uid but an unreadable shape is answered (uid echoed) and denied. */
static void test_bad_shape_with_uid_denied(void **state)
{
	struct env *e = *state;
	const char *body = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
	                   "\"request\":{\"uid\":\"u-1\",\"operation\":\"CREATE\",\"object\":7}}";
	struct answer a = review_text(e, body);
	assert_string_equal(a.uid, "u-1");
	assert_false(a.allowed);
	cJSON_Delete(a.root);
	/* An UPDATE is never a placement: allowed even when unreadable. */
	body = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
	       "\"request\":{\"uid\":\"u-2\",\"operation\":\"UPDATE\",\"object\":7}}";
	a = review_text(e, body);
	assert_string_equal(a.uid, "u-2");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
}

static void test_metrics_recorded(void **state)
{
	struct env *e = *state;
	struct answer a = review_fixture(e, "review-binding-create.json");
	cJSON_Delete(a.root);
	a = review_fixture(e, "review-pod-update.json");
	cJSON_Delete(a.root);
	char *text;
	size_t len;
	assert_int_equal(metrics_render(e->metrics, &text, &len), 0);
	assert_non_null(strstr(text, "gpu_memory_guard_reviews_total{kind=\"binding\",decision="
	                             "\"denied\"} 1\n"));
	assert_non_null(strstr(text, "gpu_memory_guard_reviews_total{kind=\"pod\",decision="
	                             "\"allowed\"} 1\n"));
	assert_non_null(strstr(text, "gpu_memory_guard_review_duration_seconds_count 2\n"));
	free(text);
}

static double metric_value(struct metrics *m, const char *name)
{
	char *text, key[128];
	size_t len;
	assert_int_equal(metrics_render(m, &text, &len), 0);
	snprintf(key, sizeof(key), "\n%s ", name);
	const char *p = strstr(text, key);
	assert_non_null(p);
	double v = strtod(p + strlen(key), NULL);
	free(text);
	return v;
}

struct bg_review {
	struct env *e;
	int allowed;
};

static void *review_in_background(void *arg)
{
	struct bg_review *b = arg;
	struct answer a = review_fixture(b->e, "review-binding-create.json");
	b->allowed = a.allowed;
	cJSON_Delete(a.root);
	return NULL;
}

/*
 * review_self_duration_seconds is the review's time minus its waits: 300 ms in a slow API
 * call, then 300 ms behind another holder of the node's lock, are in review_duration_seconds
 * and not in the review's own time.
 */
static void test_self_time_excludes_waits(void **state)
{
	struct env *e = *state;
	empty_node(e);
	e->fake.node_delay_ms = 300;
	struct answer a = review_fixture(e, "review-binding-create.json");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	double total = metric_value(e->metrics, "gpu_memory_guard_review_duration_seconds_sum");
	double self = metric_value(e->metrics, "gpu_memory_guard_review_self_duration_seconds_sum");
	assert_true(total >= 0.3);
	assert_true(self >= 0 && self <= total - 0.29);
	assert_int_equal(
	    metric_value(e->metrics, "gpu_memory_guard_review_self_duration_seconds_count"), 1);

	e->fake.node_delay_ms = 0;
	struct ledger_node *n = ledger_lock(e->ledger, "gpu-node-a");
	assert_non_null(n);
	struct bg_review b = {e, 0};
	pthread_t th;
	int before = e->fake.n_get_node;
	assert_int_equal(pthread_create(&th, NULL, review_in_background, &b), 0);
	/* Once it asked for the node, the review is a few steps from the node's lock. */
	while (__atomic_load_n(&e->fake.n_get_node, __ATOMIC_SEQ_CST) == before)
		usleep(1000);
	usleep(300 * 1000);
	ledger_unlock(n);
	pthread_join(th, NULL);
	assert_true(b.allowed);
	double total2 = metric_value(e->metrics, "gpu_memory_guard_review_duration_seconds_sum");
	double self2 =
	    metric_value(e->metrics, "gpu_memory_guard_review_self_duration_seconds_sum");
	/* The second review waited about 300 ms for the lock: less only by the few steps from
	 * GET node to the lock. */
	assert_true(self2 - self <= (total2 - total) - 0.2);
}

static void test_one_log_line_per_decision(void **state)
{
	struct env *e = *state;
	char path[] = "/tmp/gmg-webhook-log-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	log_set_fd(fd);
	struct answer a = review_fixture(e, "review-binding-create.json");
	cJSON_Delete(a.root);
	quiet_logs();
	char buf[8192] = {0};
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(path);
	assert_true(n > 0);
	assert_non_null(strchr(buf, '\n'));
	assert_null(strchr(strchr(buf, '\n') + 1, '\n')); /* exactly one line */
	cJSON *line = cJSON_Parse(buf);
	assert_non_null(line);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(line, "uid")->valuestring,
	                    "a1b2c3d4-0003-4000-8000-000000000003");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(line, "namespace")->valuestring,
	                    "inference");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(line, "pod")->valuestring,
	                    "llama-8b-6d5f9c7b8-x2k4q");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(line, "node")->valuestring,
	                    "gpu-node-a");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(line, "decision")->valuestring,
	                    "deny");
	assert_non_null(cJSON_GetObjectItemCaseSensitive(line, "reason"));
	assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(line, "latency_ms")));
	cJSON_Delete(line);
}

/* ---- --reservations shared: two webhooks ("replicas") over one fake Lease store ---- */

static uint64_t shared_wall(void)
{
	return 1800000000000ull;
}

struct pair {
	struct fake_lease *leases;
	struct shared *shared[2];
	struct webhook *w[2]; /* w[0] is e->w's config with shared[0]; w[1] a second replica */
};

static void pair_start(struct env *e, struct pair *pr)
{
	struct shared_api api;
	struct placer_source src = {&e->fake, fake_get_pod, fake_get_node, fake_list};
	pr->leases = fake_lease_new();
	api = fake_lease_api(pr->leases);
	for (int i = 0; i < 2; i++) {
		pr->shared[i] = shared_new("gmg-system", &api, 60000, shared_wall);
		assert_non_null(pr->shared[i]);
		e->cfg.shared = pr->shared[i];
		pr->w[i] = webhook_new(&e->cfg, &src, e->ledger, e->metrics);
		assert_non_null(pr->w[i]);
	}
	e->cfg.shared = NULL;
}

static void pair_stop(struct pair *pr)
{
	for (int i = 0; i < 2; i++) {
		webhook_free(pr->w[i]);
		shared_free(pr->shared[i]);
	}
	fake_lease_free(pr->leases);
}

static struct answer review_on(struct env *e, struct webhook *w, const char *body)
{
	struct webhook *keep = e->w;
	e->w = w;
	struct answer a = review_text(e, body);
	e->w = keep;
	return a;
}

static size_t lease_entries(struct pair *pr, struct record *r)
{
	char err[256];
	record_init(r);
	if (pr->leases->lease == NULL)
		return 0;
	cJSON *l = fake_lease_stored(pr->leases);
	assert_int_equal(record_from_lease(l, r, err, sizeof(err)), 0);
	cJSON_Delete(l);
	return r->n;
}

static void test_shared_bindings_across_replicas(void **state)
{
	struct env *e = *state;
	struct pair pr;
	struct record r;
	empty_node(e);
	pair_start(e, &pr);
	/* Budget 71.7Gi: two 24Gi pods fit, the third does not, whichever replica is asked. */
	const char *names[3] = {"p-0", "p-1", "p-2"};
	int want[3] = {1, 1, 0};
	for (int i = 0; i < 3; i++) {
		char uid[32];
		snprintf(uid, sizeof(uid), "uid-%d", i);
		char *body = binding_for(e, uid, names[i], "gpu-node-a");
		struct answer a = review_on(e, pr.w[i % 2], body);
		cJSON_free(body);
		assert_string_equal(a.uid, uid);
		assert_int_equal(a.allowed, want[i]);
		if (!want[i]) {
			/* Replica 0 refuses with replica 1's reservation named. */
			assert_non_null(strstr(a.message, "inference/p-0 (admitting)"));
			assert_non_null(strstr(a.message, "inference/p-1 (admitting)"));
		}
		cJSON_Delete(a.root);
	}
	assert_int_equal(ledger_size(e->ledger), 0); /* nothing in the process-local ledger */
	assert_int_equal(lease_entries(&pr, &r), 2);
	assert_string_equal(r.entries[0].key, "inference/p-0");
	assert_string_equal(r.entries[0].uid, "uid-of-p-0");
	assert_int_equal(r.entries[0].bytes, 24 * GI);
	assert_int_equal(r.entries[0].expires_ms, shared_wall() + 60000);
	record_free(&r);
	/* One write per admitted placement: create, then update after one 409 (replica 1 had
	 * never seen the record) and one read. */
	assert_int_equal(pr.leases->creates + pr.leases->updates - pr.leases->conflicts, 2);
	/* p-0 shows on the node: it counts once (as the visible pod), not twice. */
	cJSON *p0 = cJSON_Duplicate(cJSON_GetArrayItem(e->fake.pods, 1), 1);
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(p0, "spec"), "nodeName",
	                        "gpu-node-a");
	cJSON_AddItemToArray(e->fake.items, p0);
	char *body = binding_for(e, "uid-3", "p-3", "gpu-node-a");
	struct answer a = review_on(e, pr.w[1], body);
	cJSON_free(body);
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "inference/p-0 24Gi"));
	assert_null(strstr(a.message, "inference/p-0 (admitting)"));
	assert_non_null(strstr(a.message, "would declare 72Gi")); /* 24 + 24 + 24, not 96 */
	cJSON_Delete(a.root);
	pair_stop(&pr);
}

static void test_shared_dry_run_and_denial_write_nothing(void **state)
{
	struct env *e = *state;
	struct pair pr;
	empty_node(e);
	pair_start(e, &pr);
	char *body = fixture_read("review-pod-create-dryrun.json", NULL);
	char *limit = strstr(body, "\"12Gi\""); /* the fixture's declaration, made 30Gi */
	assert_non_null(limit);
	memcpy(limit + 1, "30", 2);
	struct answer a = review_on(e, pr.w[0], body);
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	/* A dry run has no write to catch a stale copy: it reads the record (none yet). */
	assert_int_equal(pr.leases->creates + pr.leases->updates, 0);
	assert_int_equal(pr.leases->gets, 1);
	/* Replica 1 admits two 24Gi pods; replica 0 never saw the record since: its dry run of
	 * the same 30Gi pod must be refused as the real request would be (78 > 71.7Gi). */
	for (int i = 0; i < 2; i++) {
		char uid[16], name[16];
		snprintf(uid, sizeof(uid), "uid-%d", i);
		snprintf(name, sizeof(name), "p-%d", i);
		char *b = binding_for(e, uid, name, "gpu-node-a");
		a = review_on(e, pr.w[1], b);
		cJSON_free(b);
		assert_true(a.allowed);
		cJSON_Delete(a.root);
	}
	int writes = pr.leases->creates + pr.leases->updates;
	a = review_on(e, pr.w[0], body);
	free(body);
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "inference/p-1 (admitting)"));
	cJSON_Delete(a.root);
	assert_int_equal(pr.leases->creates + pr.leases->updates, writes);
	pair_stop(&pr);
}

static void test_shared_write_failure_denies(void **state)
{
	struct env *e = *state;
	struct pair pr;
	struct record r;
	empty_node(e);
	pair_start(e, &pr);
	pr.leases->fail_next_write = KUBE_ETRANSPORT;
	char *body = binding_for(e, "uid-f", "p-f", "gpu-node-a");
	struct answer a = review_on(e, pr.w[0], body);
	cJSON_free(body);
	assert_string_equal(a.uid, "uid-f");
	assert_false(a.allowed);
	assert_int_equal(a.code, 500);
	assert_non_null(strstr(a.message, "shared reservation record could not be updated"));
	assert_null(a.warnings);
	cJSON_Delete(a.root);
	assert_int_equal(lease_entries(&pr, &r), 0);
	record_free(&r);
	pair_stop(&pr);
}

/* The cache's progress for test_cache_clock_lag: the monotonic clock minus lag_ms. */
static uint64_t lag_ms;

static uint64_t lagging_progress(void *ctx)
{
	(void)ctx;
	return ledger_now_ms() - lag_ms;
}

static int always_fresh(void *ctx, double now_s)
{
	(void)ctx, (void)now_s;
	return 1;
}

/* A watch cache holding gpu-node-a (no pods), always fresh, for e's webhook (rebuilt with
 * connected as cache_connected, progress as cache_progress_ms; each may be NULL). Caller frees
 * it after webhook_free. */
static struct cache *cache_env(struct env *e, int (*connected)(void *, double),
                               uint64_t (*progress)(void *))
{
	struct cache *cache = cache_new(&(struct demand_config){.gpu_resources = NULL}, NULL, NULL);

	assert_non_null(cache);
	assert_int_equal(cache_apply_node(cache, WATCH_ADDED, e->fake.node), 0);
	e->cfg.cache = cache;
	e->cfg.cache_fresh = always_fresh;
	e->cfg.cache_connected = connected;
	e->cfg.cache_progress_ms = progress;
	return cache;
}

/* A pod CREATE on gpu-node-a (nodeName set) named name, uid uid, declaring mem. */
static struct answer create_on_node(struct env *e, const char *name, const char *uid,
                                    const char *mem)
{
	cJSON *r = fixture_json("review-pod-create-nodename.json");
	cJSON *req = cJSON_GetObjectItemCaseSensitive(r, "request");
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(req, "object");
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	cJSON *ctr =
	    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
	                           cJSON_GetObjectItemCaseSensitive(obj, "spec"), "containers"),
	                       0);
	cJSON *env = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ctr, "env"), 0);
	cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(req, "uid"), uid);
	cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(req, "name"), name);
	cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(meta, "name"), name);
	cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(meta, "uid"), uid);
	cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(env, "value"), mem);
	char *body = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	struct answer a = review_text(e, body);
	cJSON_free(body);
	return a;
}

/*
 * The cache path decides on the cache's clock, held back to its progress (a watch that went
 * quiet), but a reservation's TTL runs from the real clock. The watch is 70 s behind and the
 * unseen bound 35 s: a 60Gi CREATE is admitted on the empty 80GB card (71.7Gi limit). Once the
 * cache catches up, a second 60Gi is still refused: its pod was never seen, but 35 s have not
 * passed. (When the put was stamped on the held-back clock, it had already expired by then and
 * the second pod was admitted: the node overfilled.)
 */
static void test_cache_clock_lag(void **state)
{
	struct env *e = *state;
	struct cache *cache = cache_env(e, NULL, lagging_progress);

	e->cfg.unseen_ttl_ms = 35000;
	env_build(e);
	lag_ms = 70000;
	e->fake.node_rc = KUBE_ETRANSPORT; /* the API server is not asked: the cache decides */
	e->fake.list_rc = KUBE_ETRANSPORT;

	struct answer a = create_on_node(e, "first", "uid-first", "60Gi");
	if (!a.allowed)
		fail_msg("60Gi on an empty 80GB card refused: %s", a.message);
	cJSON_Delete(a.root);
	a = create_on_node(e, "probe", "uid-probe", "60Gi");
	assert_false(a.allowed);
	assert_non_null(strstr(a.message, "first"));
	cJSON_Delete(a.root);
	lag_ms = 0; /* the watch caught up */
	a = create_on_node(e, "second", "uid-second", "60Gi");
	if (a.allowed)
		fail_msg("admitted 60Gi beside the first pod's 60Gi reservation once the cache "
		         "caught up: its TTL was shortened by the watch's lag");
	assert_non_null(strstr(a.message, "first"));
	cJSON_Delete(a.root);
	assert_int_equal(e->fake.n_list + e->fake.n_get_node, 0);
	webhook_free(e->w);
	e->w = NULL;
	cache_free(cache);
}

static int never_connected(void *ctx, double now_s)
{
	(void)ctx, (void)now_s;
	return 0;
}

/*
 * The engine's order (placer_decide): while the cache is fresh but its watch broke moments ago
 * (not connected), a placement asks the API server first; when the API server cannot be asked
 * either, the cache decides after all, for a pod CREATE and for a Binding whose pod it shows. A
 * node the cache does not know: the API path's refusal (500, APIServerUnavailable) stands.
 */
static void test_api_down_cache_decides(void **state)
{
	struct env *e = *state;
	struct cache *cache = cache_env(e, never_connected, NULL);

	env_build(e);
	e->fake.node_rc = KUBE_ETRANSPORT;
	e->fake.list_rc = KUBE_ETRANSPORT;
	e->fake.pod_rc = KUBE_ETRANSPORT;

	struct answer a = create_on_node(e, "during-break", "uid-during-break", "10Gi");
	if (!a.allowed)
		fail_msg("10Gi on an empty card refused with the cache fresh: %s", a.message);
	cJSON_Delete(a.root);
	assert_int_equal(e->fake.n_get_node, 1); /* the API server was asked first */
	assert_int_equal(pending_on(e, "gpu-node-a"), 10 * GI);

	/* a Binding of a pod the cache shows (pending, 24Gi): GET fails, the cache decides */
	char *body = binding_for(e, "uid-b", "cached-pod", "gpu-node-a");
	cJSON *pod = cJSON_GetArrayItem(e->fake.pods, cJSON_GetArraySize(e->fake.pods) - 1);
	assert_int_equal(cache_apply_pod(cache, WATCH_ADDED, pod), 0);
	a = review_text(e, body);
	free(body);
	if (!a.allowed)
		fail_msg("a Binding of a cached pod refused with the cache fresh: %s", a.message);
	cJSON_Delete(a.root);
	assert_int_equal(e->fake.n_get_pod, 1);
	assert_int_equal(pending_on(e, "gpu-node-a"), 34 * GI);

	/* the node unknown to the cache: the API path's refusal stands */
	cJSON *r = fixture_json("review-pod-create-nodename.json");
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "request"),
	                                     "object"),
	    "spec");
	cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(spec, "nodeName"), "gpu-node-x");
	body = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	a = review_text(e, body);
	cJSON_free(body);
	assert_false(a.allowed);
	assert_int_equal(a.code, 500);
	assert_non_null(strstr(a.message, "could not be asked"));
	cJSON_Delete(a.root);
	webhook_free(e->w);
	e->w = NULL;
	cache_free(cache);
}

/*
 * A Binding of a pod the cache shows unbound but being deleted (metadata.deletionTimestamp,
 * kept by a finalizer) is admitted from the cache and reserves nothing, as on the API path
 * (BeingDeleted): the API server's storage refuses to bind it, so a reservation would be a
 * phantom on the node until the pod is gone. The API server is not asked.
 */
static void test_binding_of_cached_deleting_pod(void **state)
{
	struct env *e = *state;
	struct cache *cache = cache_env(e, NULL, NULL);

	env_build(e);
	e->fake.node_rc = KUBE_ETRANSPORT; /* the cache decides, or the test fails */
	e->fake.list_rc = KUBE_ETRANSPORT;
	e->fake.pod_rc = KUBE_ETRANSPORT;
	char *body = binding_for(e, "uid-del", "deleting-pod", "gpu-node-a");
	cJSON *pod = cJSON_GetArrayItem(e->fake.pods, cJSON_GetArraySize(e->fake.pods) - 1);
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(pod, "metadata"),
	                        "deletionTimestamp", "2026-12-07T01:00:00Z");
	assert_int_equal(cache_apply_pod(cache, WATCH_ADDED, pod), 0);
	struct answer a = review_text(e, body);
	free(body);
	if (!a.allowed)
		fail_msg("a Binding of a pod being deleted refused: %s", a.message);
	cJSON_Delete(a.root);
	assert_int_equal(e->fake.n_get_pod + e->fake.n_list + e->fake.n_get_node, 0);
	assert_int_equal(ledger_size(e->ledger), 0);
	/* the same pod, no longer being deleted: reserved (the cache path decides it) */
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"),
	                                        "deletionTimestamp");
	assert_int_equal(cache_apply_pod(cache, WATCH_MODIFIED, pod), 0);
	body = binding_for(e, "uid-del-2", "deleting-pod", "gpu-node-a");
	a = review_text(e, body);
	free(body);
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	assert_int_equal(pending_on(e, "gpu-node-a"), 24 * GI);
	webhook_free(e->w);
	e->w = NULL;
	cache_free(cache);
}

/* A pod whose metadata.deletionTimestamp is JSON null is not being deleted (Go reads a nil
 * *Time: the API server binds it): its Binding is judged and reserves, on the API path as on
 * the cache path, never admitted as BeingDeleted with nothing counted. */
static void test_binding_null_deletion_timestamp(void **state)
{
	struct env *e = *state;
	struct cache *cache = cache_env(e, NULL, NULL);
	const char *names[2] = {"null-api", "null-cache"};

	env_build(e);
	for (int i = 0; i < 2; i++) {
		char *body = binding_for(e, names[i], names[i], "gpu-node-a");
		cJSON *pod = cJSON_GetArrayItem(e->fake.pods, cJSON_GetArraySize(e->fake.pods) - 1);
		cJSON_AddNullToObject(cJSON_GetObjectItemCaseSensitive(pod, "metadata"),
		                      "deletionTimestamp");
		if (i == 1) { /* the cache decides, or the test fails */
			assert_int_equal(cache_apply_pod(cache, WATCH_ADDED, pod), 0);
			e->fake.node_rc = e->fake.list_rc = e->fake.pod_rc = KUBE_ETRANSPORT;
		}
		struct answer a = review_text(e, body);
		free(body);
		assert_true(a.allowed);
		cJSON_Delete(a.root);
		assert_int_equal(pending_on(e, "gpu-node-a"), (uint64_t)(i + 1) * 24 * GI);
	}
	webhook_free(e->w);
	e->w = NULL;
	cache_free(cache);
}

/* webhook_config.binding_admitted: the uids it was called with. */
static char admitted_uids[4][64];
static int n_admitted;

static void record_admitted(void *ctx, const char *uid)
{
	(void)ctx;
	if (n_admitted < 4)
		snprintf(admitted_uids[n_admitted], sizeof(admitted_uids[0]), "%s", uid);
	n_admitted++;
}

static char *as_dry_run(char *body)
{
	cJSON *r = cJSON_Parse(body);
	cJSON *req = cJSON_GetObjectItemCaseSensitive(r, "request");
	cJSON_DeleteItemFromObjectCaseSensitive(req, "dryRun");
	cJSON_AddBoolToObject(req, "dryRun", 1);
	cJSON_free(body);
	body = cJSON_PrintUnformatted(r);
	cJSON_Delete(r);
	return body;
}

/*
 * binding_admitted (main.c ends the pod's extender holds with it) is called with the pod's uid
 * for a Binding admitted with its reservation recorded, in the ledger or the shared Lease; not
 * for a dry run, a refused Binding or a pod CREATE.
 */
static void test_binding_admitted_called(void **state)
{
	struct env *e = *state;
	struct pair pr;

	n_admitted = 0;
	empty_node(e);
	e->cfg.binding_admitted = record_admitted;
	env_build(e);
	struct answer a = create_on_node(e, "created", "uid-created", "10Gi");
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	char *body = as_dry_run(binding_for(e, "uid-d", "p-d", "gpu-node-a"));
	a = review_text(e, body);
	cJSON_free(body);
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	assert_int_equal(n_admitted, 0);
	/* 10 + 24 + 24 of 71.7Gi: p-0 and p-1 admitted, p-2 refused */
	for (int i = 0; i < 3; i++) {
		char uid[32], name[32];
		snprintf(uid, sizeof(uid), "uid-%d", i);
		snprintf(name, sizeof(name), "p-%d", i);
		body = binding_for(e, uid, name, "gpu-node-a");
		a = review_text(e, body);
		cJSON_free(body);
		assert_int_equal(a.allowed, i < 2);
		cJSON_Delete(a.root);
	}
	assert_int_equal(n_admitted, 2);
	assert_string_equal(admitted_uids[0], "uid-of-p-0");
	assert_string_equal(admitted_uids[1], "uid-of-p-1");
	/* shared reservations: the same, once the Lease is written */
	pair_start(e, &pr);
	body = binding_for(e, "uid-s", "p-s", "gpu-node-a");
	a = review_on(e, pr.w[1], body);
	cJSON_free(body);
	assert_true(a.allowed);
	cJSON_Delete(a.root);
	assert_int_equal(n_admitted, 3);
	assert_string_equal(admitted_uids[2], "uid-of-p-s");
	pair_stop(&pr);
}

/* A cache_connected the test turns on and off. */
static int conn_flag;

static int toggled_connected(void *ctx, double now_s)
{
	(void)ctx, (void)now_s;
	return conn_flag;
}

/*
 * A reservation made on the cache path while the watch is quiet (its progress lag behind the
 * monotonic clock) is as young as it is for the live path's grace check (--reservation-grace,
 * 5 s): a 60Gi CREATE admitted from the cache, then the watch breaks (not connected: the API
 * server is asked first) while the CREATE is still in the API server's admission chain (a GET
 * of its pod answers 404); a 24Gi Binding on the same 80GB card (limit 71.7Gi) must be refused.
 * When reserved_ms was the held-back clock, the entry looked lag old, was looked up at once,
 * read as deleted and dropped, and the Binding admitted (84Gi once the pod is stored; found by
 * an attack review). With no lag the grace always protected it.
 */
static void run_grace_lag(void **state, uint64_t lag)
{
	struct env *e = *state;
	struct cache *cache = cache_env(e, toggled_connected, lagging_progress);

	e->cfg.unseen_ttl_ms = 35000;
	env_build(e);
	empty_node(e);
	lag_ms = lag;
	conn_flag = 1;
	struct answer a = create_on_node(e, "first", "uid-first", "60Gi");
	if (!a.allowed)
		fail_msg("60Gi on an empty card refused: %s", a.message);
	cJSON_Delete(a.root);
	assert_int_equal(e->fake.n_list + e->fake.n_get_node, 0); /* the cache decided */
	conn_flag = 0;
	char *body = binding_for(e, "uid-x", "x", "gpu-node-a");
	a = review_text(e, body);
	cJSON_free(body);
	if (a.allowed)
		fail_msg("24Gi Binding admitted beside the 60Gi CREATE made 0 s ago (lag %llu ms): "
		         "get_pod calls %d, last %s; pending now %llu bytes",
		         (unsigned long long)lag, e->fake.n_get_pod, e->fake.last_pod,
		         (unsigned long long)pending_on(e, "gpu-node-a"));
	assert_non_null(strstr(a.message, "inference/first"));
	cJSON_Delete(a.root);
	webhook_free(e->w);
	e->w = NULL;
	cache_free(cache);
	lag_ms = 0;
}

static void test_grace_without_lag(void **state)
{
	run_grace_lag(state, 0);
}

static void test_grace_with_lag(void **state)
{
	run_grace_lag(state, 30000);
}

/* A pod CREATE whose metadata.uid is longer than any the API server gives (a UUID is 36; the
 * ledger keeps 63): refused as an invalid review (400), not as a full ledger. */
static void test_long_uid_invalid(void **state)
{
	struct env *e = *state;
	char uid[100];

	memset(uid, 'u', sizeof(uid) - 1);
	uid[sizeof(uid) - 1] = '\0';
	empty_node(e);
	struct answer a = create_on_node(e, "longuid", uid, "10Gi");
	assert_false(a.allowed);
	assert_int_equal(a.code, 400);
	assert_non_null(strstr(a.message, "metadata.uid of inference/longuid is 99 bytes long"));
	cJSON_Delete(a.root);
	assert_int_equal(pending_on(e, "gpu-node-a"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_nodename_denied_on_full_node, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_looks_up_pod_and_denies, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_target_kind_omitted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_allowed_reserves, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_of_another_uid_reserves_nothing, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_dra_not_read_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dryrun_reserves_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_update_allowed_without_io, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unscheduled_allowed_without_io, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unscheduled_bad_declaration_denied, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_init_and_sidecar_demand, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_api_errors_deny_with_uid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_budget_spent_denies, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_needs_api, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refuse_busy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_budget_counts_from_arrival, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_pod_not_found_denied, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_wrong_object_denied, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exempt_namespace, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mirror_pod_allowed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mirror_pod_on_node_counts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unnamed_listed_pod_counts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_warn_mode_allows_with_warning, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reservation_counted_by_next_placement, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_many_reservations_named_and_counted, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_deleted_pod_reservation_dropped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_api_calls_hold_no_ledger_lock, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_settled_while_listing_lists_again, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_settled_during_every_list_denied, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_young_reservation_counted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unverifiable_reservations_counted, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_terminating_bound_pod_reservation_kept, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_undeclared_multi_gpu_pod_counts_its_gpus, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_placed_pod_already_listed_counts_once, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_gone_reservations_dropped_oldest_first, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_warn_threshold_warning, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unknown_capacity_denied, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_threshold_annotation_overrides, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_percent_in_messages, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_audit_reports_inferred_demand, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_modes_admit_every_refusal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_non_gpu_placement_allowed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_v1beta1_review_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_shape_with_uid_denied, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_metrics_recorded, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_self_time_excludes_waits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_one_log_line_per_decision, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shared_bindings_across_replicas, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shared_dry_run_and_denial_write_nothing, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_shared_write_failure_denies, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cache_clock_lag, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_api_down_cache_decides, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_of_cached_deleting_pod, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_null_deletion_timestamp, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_admitted_called, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_grace_without_lag, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_grace_with_lag, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_long_uid_invalid, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
