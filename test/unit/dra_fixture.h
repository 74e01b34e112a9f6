/*
 * dra_fixture: what the DRA unit tests (test_dra.c, test_dra_sharing.c) build alike: a node of
 * H100s published by a DRA driver, the store loaded from test/data/dra, and a decoder's refusal
 * checked against its message. Header-only, as fixture.h (one binary per test_*.c). Include
 * after <cmocka.h> and <cjson/cJSON.h>.
 */
#ifndef GMG_TEST_DRA_FIXTURE_H
#define GMG_TEST_DRA_FIXTURE_H

#include <stdint.h>
#include <string.h>

#include "capacity.h"
#include "dra.h"
#include "drastore.h"
#include "fixture.h"

#define MIB  (1024ull * 1024)
#define GI   (1024ull * MIB)
#define H100 (81559ull * MIB) /* test/data/dra/slice-gpu-dra-0.json's devices */

/* A node of cards H100s, all published by a DRA driver (capacity_add_dra's result). */
static inline struct capacity dra_fixture_h100s(uint64_t cards)
{
	return (struct capacity){.per_gpu_bytes = H100,
	                         .gpu_count = cards,
	                         .total_bytes = H100 * cards,
	                         .replicas = 1,
	                         .piece_bytes = H100,
	                         .dra_gpus = cards,
	                         .dra_bytes = H100 * cards};
}

/* The DRA GPUs of a node of one H100 (dra_node.gpus). */
static inline struct dra_gpus dra_fixture_one_h100(void)
{
	return (struct dra_gpus){.n = 1, .bytes = H100, .max_bytes = H100};
}

/* A new store (caller dra_store_free()s) with the slices and claims of test/data files[0..n),
 * each by its kind; one the store refuses fails the test. */
static inline struct dra_store *dra_fixture_store(const char *const *files, size_t n)
{
	struct dra_store *s = dra_store_new(NULL, NULL, NULL);
	char err[256];

	assert_non_null(s);
	for (size_t i = 0; i < n; i++) {
		cJSON *j = fixture_json(files[i]);
		const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(j, "kind"));
		int rc = kind != NULL && strcmp(kind, "ResourceSlice") == 0
		             ? dra_store_apply_slice(s, WATCH_ADDED, j, err, sizeof(err))
		             : dra_store_apply_claim(s, WATCH_ADDED, j, err, sizeof(err));
		if (rc != 0)
			fail_msg("%s: %s", files[i], err);
		cJSON_Delete(j);
	}
	return s;
}

/* The single-quoted JSON (fixture_quoted_json) decoded as a slice (claim 0) or a claim (1):
 * refused with DRA_EINVAL and a message holding want, else the test fails naming row. */
static inline void dra_fixture_refused(int claim, const char *json, const char *want, size_t row)
{
	cJSON *j = fixture_quoted_json(json);
	char err[256] = "";
	int rc;

	if (claim) {
		struct dra_claim *c = malloc(sizeof(*c));
		assert_non_null(c);
		rc = dra_claim_decode(j, NULL, c, err, sizeof(err));
		free(c);
	} else {
		struct dra_slice *s = malloc(sizeof(*s));
		assert_non_null(s);
		rc = dra_slice_decode(j, NULL, s, err, sizeof(err));
		free(s);
	}
	if (rc != DRA_EINVAL || strstr(err, want) == NULL)
		fail_msg("row %zu: rc %d: %s (want %s)", row, rc, err, want);
	cJSON_Delete(j);
}

#endif
