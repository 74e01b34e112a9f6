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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_expired_at_expiry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
