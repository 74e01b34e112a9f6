/*
 * Fuzz target: the DRA ResourceSlice decoder (dra_slice_decode over a parsed JSON, as the watch
 * cache reads one from a LIST or a watch event), then the store (dra_store_apply_slice, a view
 * of its node, a resync that removes it).
 * Properties: a refusal has a reason; an accepted slice has at most DRA_SLICE_DEVICES devices,
 * each named, its strings terminated within their fields, none of another driver's; a node's
 * view counts the slice's devices, a name listed twice once (the store's rule for a pool
 * republished), their memory the sum of theirs; nothing leaks.
 */
#include "drastore.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_strdup(data, size);
	cJSON *obj = cJSON_ParseWithLength(s, size);
	struct dra_slice *sl = malloc(sizeof(*sl));
	struct dra_store *st = NULL;
	struct dra_view *v = NULL;
	char err[DRA_MSG_MAX] = "";

	free(s);
	if (obj == NULL || sl == NULL)
		goto out;
	int rc = dra_slice_decode(obj, NULL, sl, err, sizeof(err));
	if (rc != 0) {
		if (rc != DRA_EINVAL || !fuzz_err_ok(err, sizeof(err)))
			fuzz_fail("refusal %d, reason \"%s\"", rc, err);
		goto out;
	}
	if (sl->n_devices > DRA_SLICE_DEVICES || (!sl->ours && sl->n_devices != 0))
		fuzz_fail("%zu devices (ours %d)", sl->n_devices, sl->ours);
	if (memchr(sl->node, 0, sizeof(sl->node)) == NULL ||
	    memchr(sl->pool, 0, sizeof(sl->pool)) == NULL || sl->name[0] == '\0')
		fuzz_fail("a field not terminated, or no name");
	uint64_t sum = 0, n = 0;
	for (size_t i = 0; i < sl->n_devices; i++) {
		const struct dra_device *d = &sl->devices[i];
		if (d->name[0] == '\0' || memchr(d->name, 0, sizeof(d->name)) == NULL)
			fuzz_fail("device %zu without a name", i);
		int again = 0; /* a name listed before in the slice: the same GPU, counted once */
		for (size_t k = 0; k < i && !again; k++)
			again = strcmp(sl->devices[k].name, d->name) == 0;
		if (!again && !d->counters && (d->type != DRA_TYPE_OTHER || d->memory > 0)) {
			n++;
			sum = sum + d->memory < sum ? UINT64_MAX : sum + d->memory;
		}
	}
	if ((st = dra_store_new(NULL, NULL, NULL)) == NULL)
		goto out;
	rc = dra_store_apply_slice(st, WATCH_ADDED, obj, err, sizeof(err));
	if (rc == DRA_STORE_ENOMEM)
		goto out;
	if (rc != 0)
		fuzz_fail("the store refused what the decoder read: %d %s", rc, err);
	if (sl->node[0] != '\0' && dra_store_view(st, sl->node, NULL, NULL, NULL, &v) == 0) {
		if (v->node.gpus.n != n || v->node.gpus.bytes != sum)
			fuzz_fail("view of %s: %llu devices %llu bytes, the slice %llu, %llu",
			          sl->node, (unsigned long long)v->node.gpus.n,
			          (unsigned long long)v->node.gpus.bytes, (unsigned long long)n,
			          (unsigned long long)sum);
	}
	dra_store_resync_begin(st, DRA_STORE_SLICES);
	if (dra_store_resync_end(st, DRA_STORE_SLICES) != 1)
		fuzz_fail("resync did not remove the one slice");
out:
	dra_view_free(v);
	dra_store_free(st);
	free(sl);
	cJSON_Delete(obj);
	return 0;
}
