/*
 * Unit tests for the informer's relist jitter (informer.h, issue 22): after a 410 every replica's
 * watch breaks at once (an API server restart, an etcd compaction), and their LISTs of a large
 * cluster must not all start together. The draw's bounds, its spread over the range, and that
 * replicas started together (each its own seed from the kernel) draw apart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "informer.h"

/* Bounds: no wait under INFORMER_RELIST_JITTER_PER_MS objects (a small cluster relists at
 * once), at most 1 ms per INFORMER_RELIST_JITTER_PER_MS objects, at most
 * INFORMER_RELIST_JITTER_MS however large. */
static void test_bounds(void **state)
{
	unsigned seed = 12345;
	(void)state;

	for (int i = 0; i < 1000; i++) {
		assert_int_equal(informer_relist_jitter_ms(0, &seed), 0);
		assert_int_equal(
		    informer_relist_jitter_ms(INFORMER_RELIST_JITTER_PER_MS - 1, &seed), 0);
		assert_true(informer_relist_jitter_ms(20000, &seed) <= 200);
		assert_true(informer_relist_jitter_ms(1000000, &seed) <= INFORMER_RELIST_JITTER_MS);
		assert_true(informer_relist_jitter_ms(100000000, &seed) <=
		            INFORMER_RELIST_JITTER_MS);
	}
}

/* 1,000,000 pods: the draws cover [0, 5 s], not a corner of it (each fifth of the range gets
 * at least a tenth of 2,000 draws: a uniform draw gets a fifth). */
static void test_spread(void **state)
{
	unsigned seed = informer_jitter_seed(1), buckets[5] = {0};
	(void)state;

	for (int i = 0; i < 2000; i++) {
		unsigned ms = informer_relist_jitter_ms(1000000, &seed);
		assert_true(ms <= INFORMER_RELIST_JITTER_MS);
		buckets[ms * 5 / (INFORMER_RELIST_JITTER_MS + 1)]++;
	}
	for (int b = 0; b < 5; b++)
		assert_true(buckets[b] >= 200);
}

/* Three replicas started in the same second, pid 1 each, with the same salt (the same kind):
 * their seeds differ, and so do their first draws for 1,000,000 pods (all three equal has a
 * chance of about 1 in 25,000,000 for independent draws; a shared seed makes it certain). */
static void test_replicas_draw_apart(void **state)
{
	unsigned seeds[3], first[3];
	(void)state;

	for (int r = 0; r < 3; r++) {
		seeds[r] = informer_jitter_seed(1);
		first[r] = informer_relist_jitter_ms(1000000, &seeds[r]);
	}
	assert_false(first[0] == first[1] && first[1] == first[2]);
	/* the same seed draws the same: the seed is the only source */
	unsigned a = 777, b = 777;
	for (int i = 0; i < 100; i++)
		assert_int_equal(informer_relist_jitter_ms(1000000, &a),
		                 informer_relist_jitter_ms(1000000, &b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_spread),
	    cmocka_unit_test(test_replicas_draw_apart),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
