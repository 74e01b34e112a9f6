/*
 * Pods created at once naming one allocated, time-sliced DRA claim that is not reserved for
 * them yet (issue 21), through the real binary (--cache watch, DRA read from the API server
 * TEST DOUBLE's resource.k8s.io/v1 resourceslices and resourceclaims): pod CREATEs with
 * spec.nodeName, each declaring 40Gi, sent from two threads released together. The claim's
 * reservedFor is empty (the resourceclaim controller adds a pod after the API server stores
 * it), so before issue 21 each was judged as the device's sole consumer and both were admitted
 * (80Gi on a device whose limit is 71.7Gi). Now the first admitted pod's reservation carries
 * the claim's uid and the second is judged beside it: exactly one admitted, the other refused
 * naming the claim's time-sliced device.
 *
 *   - --reservations local: one replica, its ledger;
 *   - --reservations shared: two replicas, one CREATE to each; the admitted pod's entry in the
 *     node's Lease carries "claim" (record.h).
 *
 * Node gpu-dra-0: one H100 (81559 MiB) published by the gpu.nvidia.com driver, threshold 0.9.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "apiserver_double.h"
#include "itest.h"

#define NODE      "gpu-dra-0"
#define NS_LEASES "gmg-system"
#define CLAIM_UID "c1a2b3c4-0021-4d5e-8f90-a1b2c3d4e5f6"

static struct world W, R[2];

static const char NODE_JSON[] =
    "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"" NODE "\",\"labels\":"
    "{\"kubernetes.io/hostname\":\"" NODE "\"}},\"spec\":{},\"status\":{\"allocatable\":"
    "{\"cpu\":\"32\"}}}";

/* Allocated on gpu-dra-0's gpu-0, time-sliced by its GpuConfig, reserved for no pod yet. */
static const char CLAIM_JSON[] =
    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":"
    "\"ts\",\"namespace\":\"inference\",\"uid\":\"" CLAIM_UID "\"},\"spec\":{\"devices\":"
    "{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\"}}]}},"
    "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":"
    "\"gpu.nvidia.com\",\"pool\":\"" NODE "\",\"device\":\"gpu-0\"}],\"config\":[{\"source\":"
    "\"FromClaim\",\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":{\"apiVersion\":"
    "\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\",\"sharing\":{\"strategy\":"
    "\"TimeSlicing\"}}}}]},\"nodeSelector\":{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":"
    "\"metadata.name\",\"operator\":\"In\",\"values\":[\"" NODE "\"]}]}]}}}}";

/* The double serving DRA: the node, its slice (test/data/dra) and the claim. */
static int world_with_claim(struct world *w)
{
	char *slice = NULL;
	int rc = -1;

	if (world_init(w, 0))
		return -1;
	itest_world = w;
	w->cache_mode = "watch";
	apiserver_double_set_dra_served(w->api, 1);
	if ((slice = harness_read_file("dra/slice-gpu-dra-0.json", NULL)) == NULL ||
	    apiserver_double_put_node(w->api, NODE_JSON) ||
	    apiserver_double_put_dra(w->api, slice) || apiserver_double_put_dra(w->api, CLAIM_JSON))
		goto out;
	rc = 0;
out:
	free(slice);
	return rc;
}

/* A pod CREATE review of inference/name on gpu-dra-0, its one container declaring 40Gi and
 * using the claim ts (no device-plugin GPU). Caller frees. */
static char *claim_pod_review(const char *uid, const char *name)
{
	char *text = harness_pod_review(uid, name, "40Gi", NODE, 0), *out = NULL;
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(doc, "request"), "object");
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec"), *c;
	free(text);
	if (spec == NULL)
		goto out;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, "containers"))
	{
		cJSON *res = cJSON_GetObjectItemCaseSensitive(c, "resources");
		cJSON_DeleteItemFromObjectCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(res, "limits"), "nvidia.com/gpu");
		cJSON_DeleteItemFromObjectCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(res, "requests"), "nvidia.com/gpu");
		cJSON *claims = cJSON_AddArrayToObject(res, "claims");
		cJSON_AddItemToArray(claims, cJSON_Parse("{\"name\":\"gpu\"}"));
	}
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "resourceClaims");
	cJSON_AddItemToObject(spec, "resourceClaims",
	                      cJSON_Parse("[{\"name\":\"gpu\",\"resourceClaimName\":\"ts\"}]"));
	out = cJSON_PrintUnformatted(doc);
out:
	cJSON_Delete(doc);
	return out;
}

struct job {
	const struct world *w;
	char uid[96];
	char *body;
	pthread_barrier_t *start;
	long code;
	char error[256];
	struct review_answer a;
};

static void *run_job(void *arg)
{
	struct job *j = arg;
	struct review_client c;

	review_client_open(&c, j->w, 30000);
	pthread_barrier_wait(j->start);
	review_client_send(&c, j->body, &j->code, j->error, sizeof j->error, &j->a);
	review_client_close(&c);
	return NULL;
}

/* Two CREATEs of inference/<prefix>-0 and -1 naming the claim, job i sent to to[i], released
 * together: exactly one admitted, the other refused naming the claim's device. Returns the
 * index of the admitted one. */
static int race_two(const char *prefix, const struct world *to0, const struct world *to1)
{
	struct job j[2] = {{.w = to0}, {.w = to1}};
	pthread_t t[2];
	pthread_barrier_t start;
	int admitted = -1;

	pthread_barrier_init(&start, NULL, 2);
	for (int i = 0; i < 2; i++) {
		char name[48];
		snprintf(name, sizeof name, "%.32s-%d", prefix, i);
		snprintf(j[i].uid, sizeof j[i].uid, "rv-%s", name);
		j[i].body = claim_pod_review(j[i].uid, name);
		ITEST_CHECK(j[i].body != NULL, "no review body (fixture missing?)");
		j[i].start = &start;
		ITEST_CHECK(pthread_create(&t[i], NULL, run_job, &j[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < 2; i++) {
		ITEST_CHECK(j[i].code == 200, "job %d: HTTP %ld (%s)", i, j[i].code, j[i].error);
		ITEST_CHECK(j[i].a.well_formed && !strcmp(j[i].a.uid, j[i].uid),
		            "job %d: bad answer (uid \"%s\")", i, j[i].a.uid);
		free(j[i].body);
	}
	ITEST_CHECK(j[0].a.allowed != j[1].a.allowed,
	            "both %s: [%s] [%s] (expected one admitted, one refused)",
	            j[0].a.allowed ? "admitted" : "refused", j[0].a.message, j[1].a.message);
	admitted = j[0].a.allowed ? 0 : 1;
	const struct review_answer *no = &j[1 - admitted].a;
	ITEST_CHECK(no->code == 403, "refusal code %d, expected 403", no->code);
	itest_contains(no->message, "claim inference/ts's time-sliced device", "refusal");
	return admitted;
}

static void test_local(void **state)
{
	static const char *const extra[] = {"--threshold", "0.9", "--reservation-grace", "60s",
	                                    NULL};
	(void)state;
	ITEST_CHECK(world_with_claim(&W) == 0, "world set-up");
	ITEST_CHECK(world_start_gmg(&W, extra, 30000) == 0, "the binary did not start");
	itest_wait_synced(&W, 15000);
	race_two("local", &W, &W);
	/* a third, after both: refused too (the first's reservation still counts) */
	char *body = claim_pod_review("rv-local-2", "local-2");
	struct review_answer a;
	itest_review(&W, body, "rv-local-2", 0, &a);
	free(body);
	itest_contains(a.message, "claim inference/ts's time-sliced device", "third");
}

static void test_shared(void **state)
{
	static const char *const extra[] = {"--threshold",
	                                    "0.9",
	                                    "--reservation-grace",
	                                    "60s",
	                                    "--reservations",
	                                    "shared",
	                                    "--reservations-namespace",
	                                    NS_LEASES,
	                                    NULL};
	(void)state;
	ITEST_CHECK(world_with_claim(&W) == 0, "world set-up");
	for (int i = 0; i < 2; i++) {
		ITEST_CHECK(world_replica_init(&R[i], &W, i) == 0, "replica %d", i);
		ITEST_CHECK(world_start_gmg(&R[i], extra, 30000) == 0, "replica %d did not start",
		            i);
		itest_world = &R[i];
		itest_wait_synced(&R[i], 15000);
	}
	itest_world = &W;
	int first = race_two("shared", &R[0], &R[1]);
	/* the node's Lease holds the admitted pod's entry, with the claim */
	char *ann = apiserver_double_lease_annotation(W.api, NS_LEASES, NODE,
	                                              "gpu-memory-guard.io/reservations");
	char want[128];
	snprintf(want, sizeof want, "\"pod\":\"inference/shared-%d\"", first);
	itest_contains(ann, want, "the node's Lease");
	itest_contains(ann, "\"claim\":\"" CLAIM_UID "\"", "the node's Lease");
	free(ann);
}

/* After each test, passed or failed: the binaries (the replicas too) and the double. */
static int teardown(void **state)
{
	(void)state;
	world_free(&W);
	itest_world = NULL;
	return 0;
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_local, teardown),
	    cmocka_unit_test_teardown(test_shared, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
