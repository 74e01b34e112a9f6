/* Unit tests for lib/quantity: the resource.Quantity grammar, rounding, overflow, formatting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "quantity.h"

struct ok_case {
	const char *in;
	uint64_t bytes;
};

struct bad_case {
	const char *in;
	int code;
};

static void test_valid_forms(void **state)
{
	static const struct ok_case cases[] = {
	    {"0", 0},
	    {"1", 1},
	    {"25769803776", 25769803776ull},
	    {"24Gi", 25769803776ull},
	    {"24G", 24000000000ull},
	    {"1Ki", 1024},
	    {"1Mi", 1048576},
	    {"1Ti", 1099511627776ull},
	    {"1Pi", 1125899906842624ull},
	    {"1Ei", 1152921504606846976ull},
	    {"1k", 1000},
	    {"1M", 1000000},
	    {"1T", 1000000000000ull},
	    {"1P", 1000000000000000ull},
	    {"1E", 1000000000000000000ull},
	    {"1e3", 1000},
	    {"1E3", 1000},
	    {"1e+3", 1000},
	    {"2.5e2", 250},
	    {"1.5Gi", 1610612736ull},
	    {"+24Gi", 25769803776ull},
	    {"0024Gi", 25769803776ull},
	    {".5Ki", 512},
	    {"1.Ki", 1024},
	    {"81559Mi", 85520809984ull},
	    {"-0", 0},
	    {"-0Gi", 0},
	    {"0.000Ei", 0},
	    {"1000000000n", 1},
	    {"1000000u", 1},
	    {"1000m", 1},
	    {"18446744073709551615", UINT64_MAX},
	    {"15Ei", 15ull << 60},
	    {"0.0000000000000000000000000000000000000000001e50", 10000000},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;
		char err[128] = "";

		int rc = quantity_parse_str(cases[i].in, &v, err, sizeof(err));
		if (rc != 0 || v != cases[i].bytes)
			fail_msg("%s: rc %d (%s) value %llu, want %llu", cases[i].in, rc, err,
			         (unsigned long long)v, (unsigned long long)cases[i].bytes);
	}
}

static void test_rounding_up(void **state)
{
	static const struct ok_case cases[] = {
	    {"0.5", 1},
	    {"0.1", 1},
	    {"100m", 1},
	    {"1n", 1},
	    {"1.5Ki", 1536},
	    {"1.0001Ki", 1025},   /* 1024.1024 */
	    {"0.1Gi", 107374183}, /* 107374182.4 */
	    {"1e-3", 1},
	    {"1e-100000000", 1},               /* exponent saturates, still rounds up */
	    {"1e-9223372036854775808", 1},     /* the smallest exponent that fits in 64 bits */
	    {"1.999999999999999999999999", 2}, /* beyond any double's precision */
	    {"1.0000000000000000000000001", 2},
	    {"100.2Gi", 107588930765ull}, /* 107588930764.8 */
	    {"2500m", 3},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 0;
		int rc = quantity_parse_str(cases[i].in, &v, NULL, 0);

		if (rc != 0 || v != cases[i].bytes)
			fail_msg("%s: rc %d value %llu, want %llu", cases[i].in, rc,
			         (unsigned long long)v, (unsigned long long)cases[i].bytes);
	}
}

static void test_invalid_forms(void **state)
{
	static const struct bad_case cases[] = {
	    {"", QUANTITY_EEMPTY},
	    {"K", QUANTITY_EINVAL},
	    {"1K", QUANTITY_EINVAL},
	    {"1mi", QUANTITY_EINVAL},
	    {"1KB", QUANTITY_EINVAL},
	    {"1GB", QUANTITY_EINVAL},
	    {"1gb", QUANTITY_EINVAL},
	    {"1gi", QUANTITY_EINVAL},
	    {"1GI", QUANTITY_EINVAL},
	    {" 1Gi", QUANTITY_EINVAL},
	    {"1Gi ", QUANTITY_EINVAL},
	    {"1 Gi", QUANTITY_EINVAL},
	    {"Gi", QUANTITY_EINVAL},
	    {"-", QUANTITY_EINVAL},
	    {"+", QUANTITY_EINVAL},
	    {".", QUANTITY_EINVAL},
	    {"1e", QUANTITY_EINVAL},
	    {"1e+", QUANTITY_EINVAL},
	    {"1e3.5", QUANTITY_EINVAL},
	    {"1Ee3", QUANTITY_EINVAL},
	    {"1.2.3", QUANTITY_EINVAL},
	    {"+-1", QUANTITY_EINVAL},
	    {"0x10", QUANTITY_EINVAL},
	    {"1Gii", QUANTITY_EINVAL},
	    {"1iG", QUANTITY_EINVAL},
	    {"24Gi\n", QUANTITY_EINVAL},
	    {"abc", QUANTITY_EINVAL},
	    {"-1", QUANTITY_ENEGATIVE},
	    {"-24Gi", QUANTITY_ENEGATIVE},
	    {"-100m", QUANTITY_ENEGATIVE},
	    {"18446744073709551616", QUANTITY_ERANGE},
	    {"16Ei", QUANTITY_ERANGE},
	    {"1e20", QUANTITY_ERANGE},
	    {"1e9223372036854775807", QUANTITY_ERANGE}, /* fits in int64: just too large */
	    /* Exponents that do not fit in 64 bits: apimachinery's ParseInt fails, the quantity is
	     * refused (they were read as 0 or 1 byte, or out of range). */
	    {"1e100000000000000000000", QUANTITY_EINVAL},
	    {"1e9223372036854775808", QUANTITY_EINVAL},
	    {"1e-9223372036854775809", QUANTITY_EINVAL},
	    {"1e-99999999999999999999", QUANTITY_EINVAL},
	    {"0e-99999999999999999999", QUANTITY_EINVAL},
	    {"1E+000000000000000000000000000099999999999999999999", QUANTITY_EINVAL},
	    {"99999999999999999999999", QUANTITY_ERANGE},
	    {"18446744073709551615.1", QUANTITY_ERANGE},
	    {"12345678901234567890123456789012345678901234567890123456789012345",
	     QUANTITY_ETOOLONG},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 777;
		char err[128] = "";
		int rc = quantity_parse_str(cases[i].in, &v, err, sizeof(err));

		if (rc != cases[i].code)
			fail_msg("\"%s\": rc %d, want %d", cases[i].in, rc, cases[i].code);
		assert_int_equal(v, 777); /* untouched on error */
		assert_true(err[0] != '\0');
	}
}

static void test_error_messages(void **state)
{
	uint64_t v;
	char err[128];

	assert_int_equal(quantity_parse_str("24GB", &v, err, sizeof(err)), QUANTITY_EINVAL);
	assert_string_equal(err, "unknown suffix \"GB\" (use Ki Mi Gi Ti Pi Ei, or k M G T P E; "
	                         "case matters)");
	assert_int_equal(quantity_parse_str("-1Gi", &v, err, sizeof(err)), QUANTITY_ENEGATIVE);
	assert_string_equal(err, "\"-1Gi\" is negative");
	/* UINT64_MAX is 16Ei - 1 byte: 16Ei itself is the first value out of range. */
	assert_int_equal(quantity_parse_str("16Ei", &v, err, sizeof(err)), QUANTITY_ERANGE);
	assert_string_equal(err, "\"16Ei\" is 16Ei or more");
	assert_int_equal(quantity_parse_str("1e-99999999999999999999", &v, err, sizeof(err)),
	                 QUANTITY_EINVAL);
	assert_string_equal(err, "exponent \"e-99999999999999999999\" does not fit in 64 bits");
	/* A tiny buffer is still terminated. */
	assert_int_equal(quantity_parse_str("x", &v, err, 4), QUANTITY_EINVAL);
	assert_int_equal(strlen(err), 3);
	assert_string_equal(quantity_strerror(QUANTITY_ERANGE), "quantity out of range");
	assert_string_equal(quantity_strerror(42), "unknown quantity error");
}

static void test_length_bounded(void **state)
{
	/* Not NUL-terminated: only len bytes are read. */
	const char buf[4] = {'2', '4', 'G', 'i'};
	uint64_t v = 0;
	char longer[QUANTITY_MAX_LEN + 1];

	assert_int_equal(quantity_parse(buf, 3, &v, NULL, 0), 0);
	assert_int_equal(v, 24000000000ull);
	assert_int_equal(quantity_parse(buf, sizeof(buf), &v, NULL, 0), 0);
	assert_int_equal(v, 25769803776ull);
	assert_int_equal(quantity_parse("1\0k", 3, &v, NULL, 0), QUANTITY_EINVAL);
	assert_int_equal(quantity_parse(NULL, 0, &v, NULL, 0), QUANTITY_EEMPTY);

	/* Exactly QUANTITY_MAX_LEN characters is accepted. */
	memset(longer, '0', sizeof(longer));
	longer[QUANTITY_MAX_LEN - 1] = '7';
	assert_int_equal(quantity_parse(longer, QUANTITY_MAX_LEN, &v, NULL, 0), 0);
	assert_int_equal(v, 7);
	assert_int_equal(quantity_parse(longer, QUANTITY_MAX_LEN + 1, &v, NULL, 0),
	                 QUANTITY_ETOOLONG);
}

static void check_format(uint64_t bytes, const char *want)
{
	char buf[QUANTITY_FMT_MAX];
	size_t n = quantity_format(bytes, buf, sizeof(buf));

	if (strcmp(buf, want) != 0 || n != strlen(want))
		fail_msg("format %llu: \"%s\" (%zu), want \"%s\"", (unsigned long long)bytes, buf,
		         n, want);
}

static void test_format(void **state)
{
	check_format(0, "0");
	check_format(1, "1B");
	check_format(512, "512B");
	check_format(1023, "1023B");
	check_format(1024, "1Ki");
	check_format(1536, "1.5Ki");
	check_format(25769803776ull, "24Gi");
	check_format(107589136384ull, "100.2Gi");
	check_format(85520809984ull, "79.6Gi"); /* gpu-node-a, 81559Mi */
	check_format(76968728985ull, "71.7Gi"); /* its 90% budget, rounded to nearest */
	check_format(1048575, "1Mi");           /* 1023.999Ki rounds into the next unit */
	check_format(1073741824ull * 1023 + 1073741824ull / 2, "1023.5Gi");
	check_format(UINT64_MAX, "16Ei");
	check_format(1ull << 60, "1Ei");
}

static void test_format_truncates(void **state)
{
	char buf[4];

	assert_int_equal(quantity_format(107589136384ull, buf, sizeof(buf)), 3);
	assert_string_equal(buf, "100");
	assert_int_equal(quantity_format(1, NULL, 0), 0);
}

static void test_format_roundtrip(void **state)
{
	/* What we print for whole units parses back to the same bytes. */
	static const uint64_t values[] = {1024, 25769803776ull, 1ull << 50, 3ull << 40};

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char buf[QUANTITY_FMT_MAX];
		uint64_t v = 0;

		quantity_format(values[i], buf, sizeof(buf));
		assert_int_equal(quantity_parse_str(buf, &v, NULL, 0), 0);
		assert_int_equal(v, values[i]);
	}
}

/* The one ratio rule (quantity.h): nearest ppm, halves up, clamped; budgets floored. */
static void test_ratio_ppm(void **state)
{
	(void)state;
	assert_int_equal(quantity_ratio_ppm(0.9), 900000);
	assert_int_equal(quantity_ratio_ppm(0.925), 925000);
	assert_int_equal(quantity_ratio_ppm(1.0), QUANTITY_PPM);
	assert_int_equal(quantity_ratio_ppm(0.0000004), 0); /* below half a ppm */
	assert_int_equal(quantity_ratio_ppm(0.0000006), 1);
	assert_int_equal(quantity_ratio_ppm(0.1234565), 123457); /* 123456.5 up */
	assert_int_equal(quantity_ratio_ppm(0.12345649), 123456);
	/* outside (0,1]: clamped, never wrapping */
	assert_int_equal(quantity_ratio_ppm(0.0), 0);
	assert_int_equal(quantity_ratio_ppm(-0.5), 0);
	assert_int_equal(quantity_ratio_ppm(0.0 / 0.0), 0);
	assert_int_equal(quantity_ratio_ppm(1.5), QUANTITY_PPM);
	assert_int_equal(quantity_ratio_ppm(1e300), QUANTITY_PPM);
}

static void test_ppm_of(void **state)
{
	(void)state;
	/* 90 percent of 80 GiB, floored: 77309411328 (exact) */
	assert_true(quantity_ppm_of(85899345920ull, 900000) == 77309411328ull);
	assert_true(quantity_ppm_of(999999, 999999) == 999998); /* 999998.000001 floored */
	assert_true(quantity_ppm_of(1, 999999) == 0);
	assert_true(quantity_ppm_of(UINT64_MAX, QUANTITY_PPM) == UINT64_MAX);
	/* exact where a double would not be: (2^64 - 1) x 0.5 */
	assert_true(quantity_ppm_of(UINT64_MAX, 500000) == UINT64_MAX / 2);
	assert_true(quantity_ppm_of(12345, 0) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid_forms),      cmocka_unit_test(test_rounding_up),
	    cmocka_unit_test(test_invalid_forms),    cmocka_unit_test(test_error_messages),
	    cmocka_unit_test(test_length_bounded),   cmocka_unit_test(test_format),
	    cmocka_unit_test(test_format_truncates), cmocka_unit_test(test_format_roundtrip),
	    cmocka_unit_test(test_ratio_ppm),        cmocka_unit_test(test_ppm_of),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
