/*
 * Fuzz target: the shared reservation record decoder (record_from_lease over a parsed JSON:
 * the Lease as the API server returns it, the entries in its annotation).
 * Properties: a refusal has a reason and leaves no entries; an accepted record has at most
 * RECORD_MAX_ENTRIES entries, each with a key, numbers up to RECORD_MAX_NUMBER; writing it back
 * (record_to_lease) and reading that gives the same entries, resourceVersion and renewTime
 * (to the microsecond the Lease keeps); record_copy is equal; nothing leaks.
 *
 * Its first long run found two defects, fixed since: reading merged entries the writer had kept
 * apart (the same-pod rule is not transitive when one uid is unknown: reads now keep entries as
 * stored), and numbers above 10^15 printed by cJSON up to 2 units off (now capped below).
 */
#include "fuzz.h"
#include "record.h"

static void same(const struct record *a, const struct record *b, const char *what)
{
	if (a->n != b->n || strcmp(a->rv, b->rv) != 0)
		fuzz_fail("%s: %zu entries rv \"%s\", then %zu rv \"%s\"", what, a->n, a->rv, b->n,
		          b->rv);
	for (size_t i = 0; i < a->n; i++) {
		const struct record_entry *x = &a->entries[i], *y = &b->entries[i];
		if (strcmp(x->key, y->key) != 0 || strcmp(x->uid, y->uid) != 0 ||
		    x->bytes != y->bytes || x->expires_ms != y->expires_ms)
			fuzz_fail("%s: entry %zu differs (%s/%s)", what, i, x->key, y->key);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_strdup(data, size);
	cJSON *lease = cJSON_ParseWithLength(s, size);
	struct record r, back, copy;
	char err[256] = "";

	free(s);
	if (lease == NULL)
		return 0;
	record_init(&r);
	record_init(&back);
	record_init(&copy);
	int rc = record_from_lease(lease, &r, err, sizeof(err));
	if (rc != 0) {
		if (rc != RECORD_EPARSE || !fuzz_err_ok(err, sizeof(err)) || r.n != 0)
			fuzz_fail("refusal %d with %zu entries, reason \"%s\"", rc, r.n, err);
		goto out;
	}
	if (r.n > RECORD_MAX_ENTRIES)
		fuzz_fail("%zu entries", r.n);
	for (size_t i = 0; i < r.n; i++)
		if (r.entries[i].key[0] == '\0' || r.entries[i].bytes > RECORD_MAX_NUMBER ||
		    r.entries[i].expires_ms > RECORD_MAX_NUMBER)
			fuzz_fail("entry %zu accepted out of bounds", i);
	if (record_copy(&copy, &r) != 0)
		abort();
	same(&r, &copy, "record_copy");

	cJSON *written = record_to_lease(&r, "gpu-memory-guard", "node", r.renew_ms);
	if (written == NULL)
		abort();
	rc = record_from_lease(written, &back, err, sizeof(err));
	if (rc != 0) {
		char *text = cJSON_PrintUnformatted(written);
		fuzz_fail("a written record does not read back (%s): %s", err, text);
	}
	same(&r, &back, "round trip");
	if (back.renew_ms != r.renew_ms)
		fuzz_fail("renewTime %llu read back as %llu", (unsigned long long)r.renew_ms,
		          (unsigned long long)back.renew_ms);
	cJSON_Delete(written);
out:
	record_free(&r);
	record_free(&back);
	record_free(&copy);
	cJSON_Delete(lease);
	return 0;
}
