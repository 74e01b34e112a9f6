/* Unit tests for the helpers of lib/util written once: jsonpath, monotime, satmath. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <time.h>

#include "jsonpath.h"
#include "ledger.h"
#include "monotime.h"
#include "satmath.h"
#include "webhook.h"

static cJSON *parse(const char *text)
{
	cJSON *j = cJSON_Parse(text);
	assert_non_null(j);
	return j;
}

static void test_json_at_follows_keys(void **state)
{
	cJSON *j = parse("{\"metadata\":{\"name\":\"p\",\"labels\":{\"a/b.c\":\"1\"}},"
	                 "\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");

	assert_ptr_equal(json_at(j, NULL), j); /* no step: the object itself */
	assert_string_equal(json_at(j, "metadata", "name", NULL)->valuestring, "p");
	/* A key is one step, dots and slashes included (label names). */
	assert_string_equal(json_at(j, "metadata", "labels", "a/b.c", NULL)->valuestring, "1");
	assert_true(cJSON_IsArray(json_at(j, "spec", "containers", NULL)));
	assert_true(cJSON_IsObject(json_at(j, "metadata", NULL)));
	cJSON_Delete(j);
}

static void test_json_at_missing_or_wrong_type(void **state)
{
	cJSON *j = parse("{\"metadata\":{\"name\":\"p\",\"n\":1},\"spec\":[{\"name\":\"c\"}]}");

	assert_null(json_at(NULL, "metadata", NULL));
	assert_null(json_at(j, "status", NULL));
	assert_null(json_at(j, "status", "phase", NULL));
	assert_null(json_at(j, "Metadata", NULL)); /* case-sensitive, as Kubernetes names */
	assert_null(json_at(j, "metadata", "Name", NULL));
	assert_null(json_at(j, "metadata", "name", "x", NULL)); /* through a string */
	assert_null(json_at(j, "metadata", "n", "x", NULL));    /* through a number */
	assert_null(json_at(j, "spec", "name", NULL));          /* through an array */
	cJSON_Delete(j);
}

static void test_json_at_step_cap(void **state)
{
	cJSON *j =
	    parse("{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":1}}}}}}}}}");

	/* JSON_PATH_MAX (8) steps are followed; a ninth gives NULL. */
	assert_true(cJSON_IsObject(json_at(j, "a", "a", "a", "a", "a", "a", "a", "a", NULL)));
	assert_null(json_at(j, "a", "a", "a", "a", "a", "a", "a", "a", "a", NULL));
	cJSON_Delete(j);
}

static void test_json_str(void **state)
{
	cJSON *j = parse("{\"metadata\":{\"name\":\"p\",\"n\":1,\"z\":null,\"o\":{},\"e\":\"\"}}");

	assert_string_equal(json_str(j, "metadata", "name", NULL), "p");
	assert_string_equal(json_str(j, "metadata", "e", NULL), "");
	assert_null(json_str(j, "metadata", "n", NULL));
	assert_null(json_str(j, "metadata", "z", NULL));
	assert_null(json_str(j, "metadata", "o", NULL));
	assert_null(json_str(j, "metadata", "missing", NULL));
	assert_null(json_str(j, "metadata", NULL));
	assert_null(json_str(NULL, "metadata", NULL));
	cJSON_Delete(j);
}

static void test_monotime(void **state)
{
	struct timespec nap = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
	double s0 = monotime_s();
	uint64_t ms0 = monotime_ms();

	assert_true(s0 > 0 && ms0 > 0);
	/* One clock in two units. */
	assert_true((double)ms0 / 1000.0 - s0 < 0.5 && s0 - (double)ms0 / 1000.0 < 0.5);
	nanosleep(&nap, NULL);
	assert_true(monotime_s() - s0 >= 0.019);
	assert_true(monotime_ms() - ms0 >= 19);
	/* The webhook's and the ledger's clocks are this clock (the cache's freshness and the
	 * reservations' ages are compared across them). */
	double w = webhook_now(), m = monotime_s();
	assert_true(m >= w && m - w < 0.5);
	uint64_t l = ledger_now_ms(), mm = monotime_ms();
	assert_true(mm >= l && mm - l < 500);
}

static void test_satmath(void **state)
{
	assert_true(sat_add(1, 2) == 3);
	assert_true(sat_add(UINT64_MAX - 1, 1) == UINT64_MAX);
	assert_true(sat_add(UINT64_MAX - 1, 2) == UINT64_MAX);
	assert_true(sat_add(UINT64_MAX, UINT64_MAX) == UINT64_MAX);
	assert_true(sat_mul(3, 4) == 12);
	assert_true(sat_mul(UINT64_MAX, 0) == 0);
	assert_true(sat_mul(0, UINT64_MAX) == 0);
	assert_true(sat_mul(UINT64_MAX / 2, 2) == UINT64_MAX - 1);
	assert_true(sat_mul(UINT64_MAX / 2 + 1, 2) == UINT64_MAX);
	assert_true(sat_mul(1ull << 32, 1ull << 32) == UINT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json_at_follows_keys),
	    cmocka_unit_test(test_json_at_missing_or_wrong_type),
	    cmocka_unit_test(test_json_at_step_cap),
	    cmocka_unit_test(test_json_str),
	    cmocka_unit_test(test_monotime),
	    cmocka_unit_test(test_satmath),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
