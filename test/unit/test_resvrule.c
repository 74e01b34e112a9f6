/* Unit tests for lib/core/resvrule.h: when a reservation stops counting, the rules every
 * reservations backend asks (reservations.h, "When a reservation stops counting"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

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

/* Rule 3: which entries a gone pod takes with it: the ledger's by key and uid, the record's by
 * uid only. */
static void test_gone_by(void **state)
{
	static const struct {
		const char *k, *u, *gk, *gu;
		int ledger, record;
	} rows[] = {
	    {"ns/a", "u1", "ns/a", "u1", 1, 1},
	    {"ns/a", "", "ns/a", "u1", 1, 0},   /* no uid: the record's waits for its expiry */
	    {"ns/a", "u1", "ns/a", "", 1, 0},   /* gone known by key only */
	    {"ns/a", "u1", "ns/a", "u2", 0, 0}, /* another pod of the name */
	    {"ns/a?u1", "u1", "ns/a", "u1", 0, 1},
	    {"ns/a", NULL, "ns/a", NULL, 1, 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int l = resv_gone_by(rows[i].k, rows[i].u, rows[i].gk, rows[i].gu);
		int r = resv_record_gone_by(rows[i].u, rows[i].gu);

		if (l != rows[i].ledger || r != rows[i].record ||
		    r != resv_record_gone_by(rows[i].gu, rows[i].u))
			fail_msg("row %zu: ledger %d (want %d), record %d (want %d)", i, l,
			         rows[i].ledger, r, rows[i].record);
	}
}

/* Rule 3 as the API path judges a looked-up pod on node "n1". */
static void test_pod_gone(void **state)
{
	static const struct {
		const char *pod, *why;
	} rows[] = {
	    {"{\"spec\":{\"nodeName\":\"n1\"}}", NULL},
	    {"{\"spec\":{}}", NULL}, /* its Binding has not landed */
	    {"{\"spec\":{\"nodeName\":\"\"}}", NULL},
	    {"{\"spec\":{\"nodeName\":\"n2\"}}", "bound to another node"},
	    {"{\"spec\":{\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Failed\"}}", "finished"},
	    {"{\"status\":{\"phase\":\"Succeeded\"}}", "finished"},
	    {"{\"metadata\":{\"deletionTimestamp\":\"2026-12-07T00:00:00Z\"}}",
	     "deleted before binding"},
	    /* bound here and terminating: its containers may still hold the memory */
	    {"{\"metadata\":{\"deletionTimestamp\":\"2026-12-07T00:00:00Z\"},"
	     "\"spec\":{\"nodeName\":\"n1\"}}",
	     NULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		cJSON *pod = cJSON_Parse(rows[i].pod);
		const char *why;

		assert_non_null(pod);
		why = resv_pod_gone(pod, "n1");
		cJSON_Delete(pod);
		if (rows[i].why == NULL ? why != NULL
		                        : why == NULL || strcmp(why, rows[i].why) != 0)
			fail_msg("row %zu: %s (want %s)", i, why ? why : "kept",
			         rows[i].why ? rows[i].why : "kept");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_expired_at_expiry),
	    cmocka_unit_test(test_settled_by),
	    cmocka_unit_test(test_gone_by),
	    cmocka_unit_test(test_pod_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
