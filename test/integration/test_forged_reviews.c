/*
 * Reviews forged or replayed under a placed pod's name (issue 23's attack on the reservations):
 * the REAL gpu-memory-guard binary, with the watch cache, against an API server TEST DOUBLE, once
 * with --reservations local (the ledger) and once with --reservations shared (one Lease per
 * node). Anyone who can reach the port can send a pod CREATE review; what it may do is add a
 * reservation of its own, never shrink or take over another pod's:
 *
 *   1. victim: a real pod CREATE of 30Gi on a 40Gi card (limit 36Gi), admitted;
 *   2. forged: a CREATE of the same namespace/name declaring 1Gi, with a fresh metadata.uid, or
 *      with none (a replayed review stripped of it), admitted (1Gi fits beside 30Gi);
 *   3. other: a real 20Gi CREATE on the node must be refused: the victim's 30Gi still count.
 *
 * Before the fix the ledger refreshed by key alone (a forged review of either kind replaced the
 * victim's 30Gi by 1Gi) and the record merged a put without a uid into the victim's entry: step
 * 3 was admitted, 50Gi on a 40Gi card.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "itest.h"

static struct world W;

static const char *const SHARED[] = {"--reservations", "shared", "--reservations-namespace",
                                     "gmg-system", NULL};

static int start(const char *const *extra)
{
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	if (world_add_node(&W, "forged-fresh-uid", 40960, 1) ||
	    world_add_node(&W, "forged-no-uid", 40960, 1))
		return -1;
	if (world_start_gmg(&W, extra, 30000))
		return -1;
	itest_wait_synced(&W, 15000);
	return 0;
}

static int setup_local(void **state)
{
	(void)state;
	return start(NULL);
}

static int setup_shared(void **state)
{
	(void)state;
	return start(SHARED);
}

static int teardown(void **state)
{
	(void)state;
	world_free(&W);
	itest_world = NULL;
	return 0;
}

/* One pod CREATE on node; returns whether it was admitted, message in msg. */
static int create(const char *node, const char *name, const char *pod_uid, const char *limit,
                  char *msg, size_t msglen)
{
	char uid[128];
	struct review_answer a;
	snprintf(uid, sizeof(uid), "review-%s-%s-%s", node, name, pod_uid ? pod_uid : "none");
	char *body = itest_pod_review(uid, name, pod_uid, limit, node, 0);
	itest_review(&W, body, uid, -1, &a);
	free(body);
	snprintf(msg, msglen, "%s", a.message);
	return a.allowed;
}

static void forged_then_other(const char *node, const char *forged_uid)
{
	char msg[2048], victim_uid[128], other_uid[128];
	snprintf(victim_uid, sizeof(victim_uid), "%s-victim", node);
	snprintf(other_uid, sizeof(other_uid), "%s-other", node);
	ITEST_CHECK(create(node, "victim", victim_uid, "30Gi", msg, sizeof(msg)),
	            "%s: the victim's 30Gi on an empty 40Gi card refused: %s", node, msg);
	ITEST_CHECK(create(node, "victim", forged_uid, "1Gi", msg, sizeof(msg)),
	            "%s: the forged 1Gi refused: %s", node, msg);
	ITEST_CHECK(!create(node, "other", other_uid, "20Gi", msg, sizeof(msg)),
	            "%s: 20Gi admitted beside the victim's 30Gi on a 40Gi card (limit 36Gi): a "
	            "forged review (uid %s) shrank or took over its reservation",
	            node, forged_uid ? forged_uid : "none");
	itest_contains(msg, "victim", "the refusal names the victim's reservation");
}

static void test_fresh_uid(void **state)
{
	(void)state;
	forged_then_other("forged-fresh-uid", "forged-uid");
}

static void test_no_uid(void **state)
{
	(void)state;
	forged_then_other("forged-no-uid", NULL);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest local[] = {
	    cmocka_unit_test(test_fresh_uid),
	    cmocka_unit_test(test_no_uid),
	};
	const struct CMUnitTest shared[] = {
	    cmocka_unit_test(test_fresh_uid),
	    cmocka_unit_test(test_no_uid),
	};
	int failed = cmocka_run_group_tests_name("local", local, setup_local, teardown);
	failed += cmocka_run_group_tests_name("shared", shared, setup_shared, teardown);
	return failed;
}
