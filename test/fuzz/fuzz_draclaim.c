/*
 * Fuzz target: the DRA ResourceClaim decoder (dra_claim_decode over a parsed JSON, as the watch
 * cache reads one), the pod-claims reader (dra_pod_refs over the same document: a Pod's fields
 * are read from it), and the store's join with a fixed slice (test/data/dra/slice-gpu-dra-0.json).
 * Properties: a refusal has a reason; an accepted claim stays within the v1 API's caps, each
 * result of our driver, each reservedFor uid non-empty, each result's sharing (its configs')
 * a known strategy with a pinned limit only under MPS and never under 1Mi; the view of the
 * slice's node holds the claim at most once, with no more whole devices than results, shared
 * only when it holds a device whole, pinned only under MPS; a pod view's pending counts stay
 * within the node's devices; nothing leaks.
 */
#include "drastore.h"
#include "fuzz.h"

static cJSON *slice;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_strdup(data, size);
	cJSON *obj = cJSON_ParseWithLength(s, size);
	struct dra_claim *c = malloc(sizeof(*c));
	struct dra_pod_refs *refs = malloc(sizeof(*refs));
	struct dra_store *st = NULL;
	struct dra_view *v = NULL;
	char err[DRA_MSG_MAX] = "";

	free(s);
	if (slice == NULL)
		slice = fuzz_fixture_json("dra/slice-gpu-dra-0.json");
	if (obj == NULL || c == NULL || refs == NULL)
		goto out;
	if (dra_pod_refs(obj, refs, err, sizeof(err)) != 0) {
		if (!fuzz_err_ok(err, sizeof(err)))
			fuzz_fail("pod refs refused without a reason");
		refs->n = refs->n_templates = 0;
	} else if (refs->n > DRA_POD_CLAIMS) {
		fuzz_fail("%zu pod claims", refs->n);
	}
	int rc = dra_claim_decode(obj, NULL, c, err, sizeof(err));
	if (rc != 0) {
		if (rc != DRA_EINVAL || !fuzz_err_ok(err, sizeof(err)))
			fuzz_fail("refusal %d, reason \"%s\"", rc, err);
		goto out;
	}
	if (c->n_results > DRA_CLAIM_RESULTS || c->n_reserved > DRA_CLAIM_RESERVED ||
	    c->n_requests > DRA_CLAIM_REQUESTS)
		fuzz_fail("over a cap: %zu results %zu reserved %zu requests", c->n_results,
		          c->n_reserved, c->n_requests);
	for (size_t i = 0; i < c->n_results; i++)
		if (!dra_driver_ours(NULL, c->results[i].driver))
			fuzz_fail("result %zu of driver %s kept", i, c->results[i].driver);
	for (size_t i = 0; i < c->n_reserved; i++)
		if (c->reserved[i][0] == '\0')
			fuzz_fail("reservedFor %zu without a uid", i);
	for (size_t i = 0; i < c->n_results; i++)
		for (int k = DRA_CFG_GPU; k <= DRA_CFG_MIG; k++) {
			const struct dra_result *r = &c->results[i];
			if (r->sharing[k] > DRA_SHARING_MPS ||
			    (r->pinned[k] > 0 &&
			     (r->sharing[k] != DRA_SHARING_MPS || r->pinned[k] < DRA_MIN_PINNED)))
				fuzz_fail("result %zu: sharing %d pinned %llu", i, r->sharing[k],
				          (unsigned long long)r->pinned[k]);
		}
	if ((st = dra_store_new(NULL, NULL, NULL)) == NULL ||
	    dra_store_apply_slice(st, WATCH_ADDED, slice, err, sizeof(err)) != 0)
		goto out;
	rc = dra_store_apply_claim(st, WATCH_ADDED, obj, err, sizeof(err));
	if (rc == DRA_STORE_ENOMEM)
		goto out;
	if (rc != 0)
		fuzz_fail("the store refused what the decoder read: %d %s", rc, err);
	if (dra_store_view(st, "gpu-dra-0", c->ns, c->owner, refs, &v) != 0)
		goto out;
	if (v->node.n_claims > 1 ||
	    (v->node.n_claims == 1 && v->node.claims[0].whole_n > c->n_results))
		fuzz_fail("view: %zu claims", v->node.n_claims);
	if (v->node.n_claims == 1 &&
	    ((v->node.claims[0].sharing != DRA_SHARING_NONE && v->node.claims[0].whole_n == 0) ||
	     (v->node.claims[0].pinned > 0 && v->node.claims[0].sharing != DRA_SHARING_MPS)))
		fuzz_fail("view: sharing %d pinned %llu with %llu whole devices",
		          v->node.claims[0].sharing, (unsigned long long)v->node.claims[0].pinned,
		          (unsigned long long)v->node.claims[0].whole_n);
	if (v->pod.pending_whole_n > v->node.gpus.n)
		fuzz_fail("pending %llu whole devices of %llu",
		          (unsigned long long)v->pod.pending_whole_n,
		          (unsigned long long)v->node.gpus.n);
	/* a delete of another uid is an older claim's: the claim stays */
	(void)dra_store_apply_claim(st, WATCH_DELETED, obj, err, sizeof(err));
out:
	dra_view_free(v);
	dra_store_free(st);
	free(refs);
	free(c);
	cJSON_Delete(obj);
	return 0;
}
