/*
 * The DRA store not read yet, through the real binary (--cache watch; DRA on by default,
 * --dra-driver gpu.nvidia.com) against the API server TEST DOUBLE, which answers 403 Forbidden
 * on resource.k8s.io (a ClusterRole without the DRA rule): claims the scheduler allocates could
 * be on any node, so the replica is not ready and refuses every GPU placement (500,
 * DRANotRead) rather than count a node without them. Once the API server answers 404 (DRA not
 * served: nothing to count), the informer's next LIST makes the replica ready and the same
 * placement is admitted.
 *
 * Node: dra-a, 80Gi (1 GPU of 81920 MiB).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <unistd.h>

#include "itest.h"

static struct world W;

static int group_setup(void **state)
{
	(void)state;
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	W.start_unready = 1;
	apiserver_double_set_dra_forbidden(W.api, 1);
	if (world_add_node(&W, "dra-a", 81920, 1))
		return -1;
	if (world_start_gmg(&W, NULL, 30000))
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	world_free(&W);
	return 0;
}

static void test_refused_until_read(void **state)
{
	struct review_answer a;
	char *body = NULL;
	(void)state;

	/* The pods and nodes are listed at once; the DRA LISTs keep failing with 403, and /readyz
	 * says so once the first has failed. */
	long code;
	double end = harness_now() + 10.0;
	for (;;) {
		code = world_health_get(&W, "/readyz", &body);
		ITEST_CHECK(code == 503, "/readyz %ld with DRA forbidden: %s", code,
		            body ? body : "");
		/* "not ready" alone until the listener is up */
		if (body != NULL && strstr(body, "403") &&
		    strstr(body, "DRA ResourceSlices not read yet: every GPU placement would be "
		                 "refused (DRANotRead)"))
			break;
		ITEST_CHECK(harness_now() < end, "/readyz does not name the 403: %s", body);
		free(body);
		usleep(50 * 1000);
	}
	free(body);

	char *review = itest_pod_review("dra-review-1", "dra-0", "dra-pod-1", "10Gi", "dra-a", 1);
	itest_review(&W, review, "dra-review-1", 0, &a);
	free(review);
	ITEST_CHECK(a.code == 500, "refusal code %d, expected 500 (retry later)", a.code);
	itest_contains(a.message,
	               "has not read the cluster's DRA ResourceSlices and ResourceClaims",
	               "refusal");

	/* DRA not served (404): nothing to count; ready at the informer's next LIST. */
	apiserver_double_set_dra_forbidden(W.api, 0);
	end = harness_now() + 30.0;
	while ((code = world_health_get(&W, "/readyz", NULL)) != 200) {
		ITEST_CHECK(harness_now() < end, "/readyz %ld 30 s after DRA answered 404", code);
		usleep(50 * 1000);
	}
	review = itest_pod_review("dra-review-2", "dra-0", "dra-pod-1", "10Gi", "dra-a", 1);
	itest_review(&W, review, "dra-review-2", 1, &a);
	free(review);
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refused_until_read),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
