/*
 * The GPUMemoryPolicy status writer (lib/cluster/policystatus) through two replicas of the REAL
 * binary (--cache watch, policies on, --reservations shared in namespace gmg-system) against one
 * API server TEST DOUBLE, which stores the status a PATCH .../gpumemorypolicies/NAME/status
 * merges in.
 *
 * In order: exactly one replica holds the Lease gpu-memory-guard-policy-status (the other
 * says so in its metric); the policy "big" (matchLabels nvidia.com/gpu.memory=81920) gets
 * observedGeneration 1, nodes 2 and Ready True Applied "applied to 2 nodes"; an
 * invalid policy (threshold 1.5, which the double does not refuse) gets Ready False Invalid
 * with the webhook's parse error; the leader killed (SIGKILL: no release), the other takes
 * the Lease over after leaseDurationSeconds and writes the status of "big" changed meanwhile
 * (generation 2, selecting the one 40Gi node). The Lease carries the labels the documented
 * cleanup selects (created so, kept so by the takeover's PUT).
 *
 * Then, alone in a world of its own, one replica with --reservations local writes status
 * without a Lease; with every status write refused it does not hammer, and once they are
 * answered again all 30 policies get their status.
 *
 * The status Lease itself is checked: holder, leaseDurationSeconds 15, renewTime moving on
 * while acquireTime and leaseTransitions stay; after the takeover the new holder, one more
 * transition and a new acquireTime.
 *
 * Replicas' identities: POD_NAME=gmg-ps-0 / gmg-ps-1 (the environment the binary inherits).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>

#include "itest.h"

#define NS         "gmg-system"
#define LEASE      "gpu-memory-guard-policy-status"
#define N_REPLICAS 2

static struct world W, R[N_REPLICAS];

static const char *const EXTRA[] = {"--reservations", "shared", "--reservations-namespace", NS,
                                    NULL};

static const char BIG_GEN1[] =
    "{\"apiVersion\":\"gpu-memory-guard.io/v1alpha1\",\"kind\":\"GPUMemoryPolicy\","
    "\"metadata\":{\"name\":\"big\",\"generation\":1},\"spec\":{\"nodeSelector\":{"
    "\"matchLabels\":{\"nvidia.com/gpu.memory\":\"81920\"}},\"threshold\":0.8}}";
static const char BIG_GEN2[] =
    "{\"apiVersion\":\"gpu-memory-guard.io/v1alpha1\",\"kind\":\"GPUMemoryPolicy\","
    "\"metadata\":{\"name\":\"big\",\"generation\":2},\"spec\":{\"nodeSelector\":{"
    "\"matchLabels\":{\"nvidia.com/gpu.memory\":\"40960\"}},\"threshold\":0.8}}";
static const char BAD[] =
    "{\"apiVersion\":\"gpu-memory-guard.io/v1alpha1\",\"kind\":\"GPUMemoryPolicy\","
    "\"metadata\":{\"name\":\"bad\",\"generation\":3},\"spec\":{\"threshold\":1.5}}";

static int group_setup(void **state)
{
	char id[32];
	(void)state;
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	if (world_add_node(&W, "ps-a", 81920, 1) || world_add_node(&W, "ps-b", 81920, 1) ||
	    world_add_node(&W, "ps-c", 40960, 1) || apiserver_double_put_policy(W.api, BIG_GEN1))
		return -1;
	for (int i = 0; i < N_REPLICAS; i++) {
		snprintf(id, sizeof(id), "gmg-ps-%d", i);
		setenv("POD_NAME", id, 1);
		if (world_replica_init(&R[i], &W, i) || world_start_gmg(&R[i], EXTRA, 30000))
			return -1;
	}
	unsetenv("POD_NAME");
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N_REPLICAS; i++)
		world_free(&R[i]);
	world_free(&W);
	return 0;
}

/* gpu_memory_guard_policy_status_leader of replica i (-1 when unreadable). */
static double leader_metric(int i)
{
	char *body = NULL;
	double v = -1;
	if (world_health_get(&R[i], "/metrics", &body) == 200 && body)
		v = harness_metric(body, "gpu_memory_guard_policy_status_leader", NULL, 0);
	free(body);
	return v;
}

/* The Lease's holderIdentity ("" when absent). */
static void lease_holder(char *buf, size_t cap)
{
	char *text = apiserver_double_get_lease(W.api, NS, LEASE);
	cJSON *l = text ? cJSON_Parse(text) : NULL;
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(l, "spec"), "holderIdentity");
	snprintf(buf, cap, "%s", cJSON_IsString(h) ? h->valuestring : "");
	cJSON_Delete(l);
	free(text);
}

/* The status Lease's spec as the double stores it. */
struct lease_spec {
	char holder[128], acquire[40], renew[40];
	double duration, transitions; /* -1 when absent */
};

static void lease_spec(struct lease_spec *ls)
{
	char *text = apiserver_double_get_lease(W.api, NS, LEASE);
	cJSON *l = text ? cJSON_Parse(text) : NULL;
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(l, "spec"), *v;
	memset(ls, 0, sizeof(*ls));
#define STR(field, dst)                                                                            \
	v = cJSON_GetObjectItemCaseSensitive(sp, field);                                           \
	snprintf(dst, sizeof(dst), "%s", cJSON_IsString(v) ? v->valuestring : "")
	STR("holderIdentity", ls->holder);
	STR("acquireTime", ls->acquire);
	STR("renewTime", ls->renew);
#undef STR
	v = cJSON_GetObjectItemCaseSensitive(sp, "leaseDurationSeconds");
	ls->duration = cJSON_IsNumber(v) ? v->valuedouble : -1;
	v = cJSON_GetObjectItemCaseSensitive(sp, "leaseTransitions");
	ls->transitions = cJSON_IsNumber(v) ? v->valuedouble : -1;
	cJSON_Delete(l);
	free(text);
}

/* Wait until exactly one running replica says it leads and the Lease names it; its index. */
static int wait_one_leader(double timeout_s)
{
	double end = harness_now() + timeout_s;
	char holder[128], want[32];
	for (;;) {
		int leaders = 0, who = -1;
		for (int i = 0; i < N_REPLICAS; i++) {
			if (!R[i].pid)
				continue;
			if (leader_metric(i) == 1) {
				leaders++;
				who = i;
			}
		}
		lease_holder(holder, sizeof(holder));
		snprintf(want, sizeof(want), "gmg-ps-%d", who);
		if (leaders == 1 && !strcmp(holder, want))
			return who;
		ITEST_CHECK(harness_now() < end, "%d replicas lead, the Lease names \"%s\"",
		            leaders, holder);
		usleep(100 * 1000);
	}
}

struct ready {
	long long observed, cond_generation, selected;
	char status[16], reason[32], message[512], transition[40];
};

/* The policy's status as the double stores it; 0, or -1 when it has no Ready condition. */
static int policy_ready(struct apiserver_double *api, const char *name, struct ready *r)
{
	char *text = apiserver_double_get_policy(api, name);
	cJSON *p = text ? cJSON_Parse(text) : NULL;
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(p, "status"), *c;
	const cJSON *og = cJSON_GetObjectItemCaseSensitive(st, "observedGeneration");
	const cJSON *sel = cJSON_GetObjectItemCaseSensitive(st, "nodes");
	int rc = -1;

	memset(r, 0, sizeof(*r));
	r->observed = cJSON_IsNumber(og) ? (long long)og->valuedouble : -1;
	r->selected = cJSON_IsNumber(sel) ? (long long)sel->valuedouble : -1;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(st, "conditions"))
	{
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "type");
		if (!cJSON_IsString(t) || strcmp(t->valuestring, "Ready"))
			continue;
#define COPY(field, dst)                                                                           \
	do {                                                                                       \
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, field);                       \
		snprintf(dst, sizeof(dst), "%s", cJSON_IsString(v) ? v->valuestring : "");         \
	} while (0)
		COPY("status", r->status);
		COPY("reason", r->reason);
		COPY("message", r->message);
		COPY("lastTransitionTime", r->transition);
#undef COPY
		const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "observedGeneration");
		r->cond_generation = cJSON_IsNumber(g) ? (long long)g->valuedouble : -1;
		rc = 0;
	}
	cJSON_Delete(p);
	free(text);
	return rc;
}

/* Wait until name's status has observedGeneration gen; returns it in *r. */
static void wait_status(struct apiserver_double *api, const char *name, long long gen,
                        double timeout_s, struct ready *r)
{
	double end = harness_now() + timeout_s;
	for (;;) {
		if (policy_ready(api, name, r) == 0 && r->observed == gen)
			return;
		ITEST_CHECK(harness_now() < end,
		            "%s: status observedGeneration %lld (want %lld), Ready %s %s", name,
		            r->observed, gen, r->status, r->reason);
		usleep(100 * 1000);
	}
}

static int leader;
static struct lease_spec first_term; /* the Lease as the first leader keeps it */

/* The Lease's labels carry app.kubernetes.io/managed-by and part-of gpu-memory-guard (the
 * documented cleanup selects on managed-by). */
static void assert_lease_labelled(void)
{
	char *text = apiserver_double_get_lease(W.api, NS, LEASE);
	cJSON *l = text ? cJSON_Parse(text) : NULL;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(l, "metadata"), "labels");
	const cJSON *mb = cJSON_GetObjectItemCaseSensitive(labels, "app.kubernetes.io/managed-by"),
	            *po = cJSON_GetObjectItemCaseSensitive(labels, "app.kubernetes.io/part-of");
	ITEST_CHECK(cJSON_IsString(mb) && strcmp(mb->valuestring, "gpu-memory-guard") == 0 &&
	                cJSON_IsString(po) && strcmp(po->valuestring, "gpu-memory-guard") == 0,
	            "the policy-status Lease's labels: %s", text ? text : "(no Lease)");
	cJSON_Delete(l);
	free(text);
}

static void test_one_leader(void **state)
{
	struct lease_spec later;
	char want[32];
	(void)state;
	leader = wait_one_leader(20.0);
	lease_spec(&first_term);
	snprintf(want, sizeof(want), "gmg-ps-%d", leader);
	assert_string_equal(first_term.holder, want);
	assert_true(first_term.duration == 15); /* POLICYSTATUS_LEASE_S */
	assert_true(first_term.transitions == 0);
	assert_int_equal(strlen(first_term.renew), 27); /* MicroTime: 2026-11-30T16:00:00.123456Z */
	assert_true(first_term.acquire[0] != '\0');
	/* Stays so: the other keeps following while the leader renews (a round every 5 s:
	 * renewTime moves on, acquireTime and leaseTransitions do not). */
	sleep(6);
	assert_int_equal(wait_one_leader(1.0), leader);
	assert_int_equal(leader_metric(1 - leader), 0);
	lease_spec(&later);
	assert_string_equal(later.holder, want);
	assert_true(strcmp(later.renew, first_term.renew) > 0);
	assert_string_equal(later.acquire, first_term.acquire);
	assert_true(later.transitions == 0);
	assert_lease_labelled(); /* created labelled, and kept so by the renewals (PUTs) */
}

static void test_ready_applied(void **state)
{
	struct ready r;
	(void)state;
	wait_status(W.api, "big", 1, 20.0, &r);
	assert_string_equal(r.status, "True");
	assert_string_equal(r.reason, "Applied");
	assert_string_equal(r.message, "applied to 2 nodes");
	assert_int_equal(r.selected, 2);
	assert_int_equal(r.cond_generation, 1);
	assert_int_equal(strlen(r.transition), 20); /* 2026-11-30T16:00:00Z */
	assert_int_equal(r.transition[19], 'Z');
	assert_true(apiserver_double_count(W.api, APISERVER_DOUBLE_PATCH_POLICY_STATUS) >= 1);
	/* The leader's API metrics name the resource by its plural, for the list and the patch. */
	char *body = NULL;
	ITEST_CHECK(world_health_get(&R[leader], "/metrics", &body) == 200, "metrics");
	assert_true(harness_metric(body, "gpu_memory_guard_api_requests_total",
	                           "verb=\"patch\",resource=\"gpumemorypolicies\",code=\"200\"",
	                           0) >= 1);
	assert_true(harness_metric(body, "gpu_memory_guard_api_requests_total",
	                           "verb=\"list\",resource=\"gpumemorypolicies\"", 1) >= 1);
	free(body);
}

static char bad_transition[40]; /* "bad"'s lastTransitionTime as its first writer wrote it */

static void test_invalid(void **state)
{
	struct ready r;
	(void)state;
	assert_int_equal(apiserver_double_put_policy(W.api, BAD), 0);
	wait_status(W.api, "bad", 3, 20.0, &r);
	snprintf(bad_transition, sizeof(bad_transition), "%s", r.transition);
	assert_string_equal(r.status, "False");
	assert_string_equal(r.reason, "Invalid");
	itest_contains(r.message, "threshold", "Invalid message");
	itest_contains(r.message, "1.5", "Invalid message");
	assert_int_equal(r.selected, 0);
	assert_int_equal(r.cond_generation, 3);
	/* "big" untouched by the other policy's status. */
	wait_status(W.api, "big", 1, 1.0, &r);
	assert_string_equal(r.reason, "Applied");
	assert_int_equal(r.selected, 2);
}

/* Written once: a round that finds nothing changed writes nothing. */
static void test_no_rewrite(void **state)
{
	(void)state;
	unsigned long n = apiserver_double_count(W.api, APISERVER_DOUBLE_PATCH_POLICY_STATUS);
	sleep(11); /* two rounds */
	assert_int_equal(apiserver_double_count(W.api, APISERVER_DOUBLE_PATCH_POLICY_STATUS), n);
}

static void test_takeover(void **state)
{
	struct ready r;
	int other = 1 - leader;
	(void)state;
	double t0 = harness_now();
	ITEST_CHECK(world_stop_gmg(&R[leader], SIGKILL, 10000) >= 0, "kill the leader");
	assert_int_equal(apiserver_double_put_policy(W.api, BIG_GEN2), 0);
	assert_int_equal(wait_one_leader(25.0), other);
	assert_lease_labelled(); /* the takeover's PUT */
	wait_status(W.api, "big", 2, 10.0, &r);
	double took = harness_now() - t0;
	print_message("replica %d took over and wrote generation 2 %.1f s after the kill\n", other,
	              took);
	assert_string_equal(r.status, "True");
	assert_string_equal(r.reason, "Applied");
	assert_string_equal(r.message, "applied to 1 node");
	assert_int_equal(r.selected, 1);
	assert_int_equal(r.cond_generation, 2);
	/* Not before the Lease expired on the follower's clock (15 s, minus a round's slack). */
	assert_true(took >= 9.0);
	assert_true(took <= 30.0);
	/* The invalid one is written again by the new leader (in the same round as "big", before
	 * it: name order), unchanged in substance: its lastTransitionTime is kept
	 * (metav1.Condition: the last time the status changed, and "bad" has been False all along).
	 */
	wait_status(W.api, "bad", 3, 10.0, &r);
	assert_string_equal(r.reason, "Invalid");
	assert_string_equal(r.transition, bad_transition);
	/* The Lease: the other's now, one transition, acquired anew. */
	struct lease_spec ls;
	char want[32];
	lease_spec(&ls);
	snprintf(want, sizeof(want), "gmg-ps-%d", other);
	assert_string_equal(ls.holder, want);
	assert_true(ls.transitions == first_term.transitions + 1);
	assert_true(strcmp(ls.acquire, first_term.acquire) > 0);
	assert_true(ls.duration == 15);
}

static struct world L;

/* --reservations local: one replica by contract, which writes status without any Lease. */
static void test_single_writer(void **state)
{
	struct ready r;
	char *body = NULL;
	(void)state;
	ITEST_CHECK(world_init(&L, 0) == 0, "world");
	itest_world = &L;
	L.cache_mode = "watch";
	ITEST_CHECK(world_add_node(&L, "ps-a", 81920, 1) == 0 &&
	                apiserver_double_put_policy(L.api, BIG_GEN1) == 0 &&
	                world_start_gmg(&L, NULL, 30000) == 0,
	            "start");
	wait_status(L.api, "big", 1, 20.0, &r);
	assert_string_equal(r.message, "applied to 1 node");
	assert_null(apiserver_double_get_lease(L.api, "default", LEASE));
	assert_null(apiserver_double_get_lease(L.api, NS, LEASE));
	assert_int_equal(apiserver_double_count(L.api, APISERVER_DOUBLE_LEASE_WRITE), 0);
	ITEST_CHECK(world_health_get(&L, "/metrics", &body) == 200, "metrics");
	assert_true(harness_metric(body, "gpu_memory_guard_policy_status_leader", NULL, 0) == 1);
	free(body);
}

/* Deleted and created again between two rounds (kubectl replace --force, delete then apply):
 * a new object, without status, whose status would be the same text as the old one's (a new
 * object's generation is 1 again). It is written all the same. */
static void test_recreated_gets_status(void **state)
{
	static const char big_again[] =
	    "{\"apiVersion\":\"gpu-memory-guard.io/v1alpha1\",\"kind\":\"GPUMemoryPolicy\","
	    "\"metadata\":{\"name\":\"big\",\"uid\":\"big-recreated\",\"generation\":1},"
	    "\"spec\":{\"nodeSelector\":{\"matchLabels\":{\"nvidia.com/gpu.memory\":\"81920\"}},"
	    "\"threshold\":0.8}}";
	struct ready r;
	(void)state;
	ITEST_CHECK(apiserver_double_delete_policy(L.api, "big") == 0 &&
	                apiserver_double_put_policy(L.api, big_again) == 0,
	            "recreate");
	ITEST_CHECK(policy_ready(L.api, "big", &r) != 0, "the new object has no status yet");
	wait_status(L.api, "big", 1, 15.0, &r);
	assert_string_equal(r.status, "True");
	assert_string_equal(r.message, "applied to 1 node");
}

/* Status writes refused for every policy alike (403: the status RBAC missing; or 5xx, or no
 * answer): a round stops at the first such refusal, and the rest wait for the next round,
 * rather than one failing PATCH per policy every round (1024 policies: 200 a second). */
static void test_refused_writes_do_not_hammer(void **state)
{
	char json[512], *body = NULL;
	(void)state;
	for (int i = 0; i < 30; i++) {
		snprintf(json, sizeof(json),
		         "{\"metadata\":{\"name\":\"many-%02d\",\"generation\":1},\"spec\":{"
		         "\"threshold\":0.9}}",
		         i);
		ITEST_CHECK(apiserver_double_put_policy(L.api, json) == 0, "put many-%02d", i);
	}
	/* as soon as the webhook holds them (before its next round writes them), refuse all */
	double end = harness_now() + 10.0;
	for (;;) {
		ITEST_CHECK(world_health_get(&L, "/metrics", &body) == 200, "metrics");
		double u = harness_metric(body, "gpu_memory_guard_policies", "state=\"usable\"", 0);
		free(body);
		body = NULL;
		if (u >= 31)
			break;
		ITEST_CHECK(harness_now() < end, "the webhook holds %g policies", u);
		usleep(20 * 1000);
	}
	apiserver_double_set_fail(L.api, 403);
	unsigned long n0 = apiserver_double_count(L.api, APISERVER_DOUBLE_PATCH_POLICY_STATUS);
	sleep(11); /* two rounds at least */
	unsigned long n = apiserver_double_count(L.api, APISERVER_DOUBLE_PATCH_POLICY_STATUS) - n0;
	apiserver_double_set_fail(L.api, 0);
	print_message("%lu status PATCHes refused in 11 s\n", n);
	ITEST_CHECK(n <= 4, "%lu status PATCHes in 11 s while every one is refused", n);
	/* Writes answered again: every one of the 30 gets its status (the rounds go on). No
	 * nodeSelector selects every GPU node: ps-a and the fixtures' gpu-node-a. */
	for (int i = 0; i < 30; i++) {
		struct ready r;
		char name[32];
		snprintf(name, sizeof(name), "many-%02d", i);
		wait_status(L.api, name, 1, i == 0 ? 20.0 : 5.0, &r);
		ITEST_CHECK(!strcmp(r.status, "True") && !strcmp(r.reason, "Applied") &&
		                !strcmp(r.message, "applied to 2 nodes") && r.selected == 2 &&
		                r.cond_generation == 1,
		            "%s: Ready %s %s, nodes %lld, generation %lld", name, r.status,
		            r.reason, r.selected, r.cond_generation);
	}
}

static void test_single_writer_exit(void **state)
{
	(void)state;
	/* A clean shutdown with the writer running: exit 0 (under ASan: no leak, no misuse). */
	int st = world_stop_gmg(&L, SIGTERM, 15000);
	ITEST_CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
	world_free(&L);
	itest_world = NULL;
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_leader), cmocka_unit_test(test_ready_applied),
	    cmocka_unit_test(test_invalid),    cmocka_unit_test(test_no_rewrite),
	    cmocka_unit_test(test_takeover),
	};
	const struct CMUnitTest single[] = {cmocka_unit_test(test_single_writer),
	                                    cmocka_unit_test(test_recreated_gets_status),
	                                    cmocka_unit_test(test_refused_writes_do_not_hammer),
	                                    cmocka_unit_test(test_single_writer_exit)};
	int failed = cmocka_run_group_tests_name("replicas", tests, group_setup, group_teardown);
	return failed + cmocka_run_group_tests_name("single", single, NULL, NULL);
}
