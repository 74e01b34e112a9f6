/* Unit tests for lib/core/resvrule.h: when a reservation stops counting, the rules every
 * reservations backend asks (reservations.h, "When a reservation stops counting"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "resvrule.h"

/* Rule 1: an entry counts up to its expiry, not at it, on one clock. */
static void test_expired_at_expiry(void **state)
{
	(void)state;
	assert_int_equal(resv_expired(1000, 999), 0);
	assert_int_equal(resv_expired(1000, 1000), 1);
	assert_int_equal(resv_expired(1000, 1001), 1);
	assert_int_equal(resv_expired(UINT64_MAX, UINT64_MAX - 1), 0); /* a saturated expiry */
	assert_int_equal(resv_expired(1, 0), 0); /* at time 0 (ledger_remove's) nothing expired */
}

/* Rule 2: which visible pod settles an entry, at once (the ledger, placer.c) or after the grace
 * (the record). */
static void test_settled_by(void **state)
{
	static const struct {
		const char *k, *u, *pk, *pu;
		int ledger, record;
	} rows[] = {
	    {"ns/a", "u1", "ns/a", "u1", 1, 1},
	    {"ns/a", "", "ns/a", "u1", 1, 1},      /* the entry's uid unknown */
	    {"ns/a", NULL, "ns/a", NULL, 1, 1},    /* neither known */
	    {"ns/a", "u1", "ns/a", "u2", 0, 0},    /* a newer pod of the name */
	    {"ns/a?u1", "u1", "ns/a", "u1", 0, 1}, /* generateName key: the ledger keeps it */
	    {"ns/a", "u1", NULL, "u1", 0, 0},      /* no visible pod */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int l = resv_settled_by(rows[i].k, rows[i].u, rows[i].pk, rows[i].pu);
		int back = resv_settled_by(rows[i].pk, rows[i].pu, rows[i].k, rows[i].u);
		int r = resv_record_settled_by(rows[i].k, rows[i].u, rows[i].pk, rows[i].pu, 1000,
		                               1000 + 30000, 30000);

		if (l != rows[i].ledger || back != l || r != rows[i].record)
			fail_msg("row %zu: ledger %d (want %d, reversed %d), record %d (want %d)",
			         i, l, rows[i].ledger, back, r, rows[i].record);
	}
	/* the record's grace: shown for grace_ms at least, and shown at all */
	assert_int_equal(resv_record_settled_by("ns/a", "u1", "ns/a", "u1", 1000, 30999, 30000), 0);
	assert_int_equal(resv_record_settled_by("ns/a", "u1", "ns/a", "u1", 0, 99999, 30000), 0);
	assert_int_equal(resv_record_settled_by("ns/a", "u1", "ns/a", "u1", UINT64_MAX - 1,
	                                        UINT64_MAX - 1, 30000),
	                 0); /* the sum saturates instead of wrapping to a time long past */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_expired_at_expiry),
	    cmocka_unit_test(test_settled_by),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
