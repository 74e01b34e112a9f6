/* serverclock: bounds on the API server's clock from Date headers (serverclock.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "serverclock.h"

#define D0 1796000000LL /* a Date header, Unix seconds (2026-11) */

static uint64_t now_at(struct serverclock *sc, enum serverclock_bound b, uint64_t mono)
{
	uint64_t t = 0;
	assert_int_equal(serverclock_now_ms(sc, b, mono, &t), 0);
	return t;
}

/* Nothing heard: no answer, and the width says so. */
static void test_unknown(void **state)
{
	(void)state;
	struct serverclock *sc = serverclock_new();
	uint64_t t = 42;
	assert_int_equal(serverclock_now_ms(sc, SERVERCLOCK_EARLIEST, 1000, &t), -1);
	assert_int_equal(t, 42);
	assert_int_equal(serverclock_width_ms(sc, 1000), -1);
	assert_int_equal(serverclock_now_ms(NULL, SERVERCLOCK_LATEST, 1000, &t), -1);
	serverclock_free(sc);
}

/* One answer sent at 10,000 ms, headers at 10,020, dated D0: the server read [D0, D0+1 s)
 * somewhere in those 20 ms, so at 10,020 it reads at least D0 and at most D0 + 1 s + 20 ms. */
static void test_one_answer(void **state)
{
	(void)state;
	struct serverclock *sc = serverclock_new();
	serverclock_observe(sc, D0, 10000, 10020);
	uint64_t lo = now_at(sc, SERVERCLOCK_EARLIEST, 10020);
	uint64_t hi = now_at(sc, SERVERCLOCK_LATEST, 10020);
	assert_true(lo <= (uint64_t)D0 * 1000 && lo >= (uint64_t)D0 * 1000 - 2);
	assert_true(hi >= (uint64_t)D0 * 1000 + 1020 && hi <= (uint64_t)D0 * 1000 + 1022);
	/* 60 s later both moved by 60 s, widened by the drift bound (500 ppm: 30 ms) */
	uint64_t lo60 = now_at(sc, SERVERCLOCK_EARLIEST, 70020);
	uint64_t hi60 = now_at(sc, SERVERCLOCK_LATEST, 70020);
	assert_true(lo60 <= lo + 60000 - 30 && lo60 >= lo + 60000 - 32);
	assert_true(hi60 >= hi + 60000 + 30 && hi60 <= hi + 60000 + 32);
	serverclock_free(sc);
}

/* Answers narrow the interval: the second-boundary moment is found within the round trip. */
static void test_answers_narrow(void **state)
{
	(void)state;
	struct serverclock *sc = serverclock_new();
	/* server time = mono + OFF; answers every 100 ms, round trip 4 ms */
	const int64_t OFF = D0 * 1000 - 5000 + 370; /* the server's second starts at mono 370 */
	for (uint64_t sent = 5000; sent < 8000; sent += 100) {
		uint64_t recv = sent + 4;
		int64_t server_ms = (int64_t)sent + 2 + OFF; /* answered mid-way */
		serverclock_observe(sc, server_ms / 1000, sent, recv);
	}
	int64_t w = serverclock_width_ms(sc, 7904);
	assert_true(w >= 0 && w <= 110);
	uint64_t lo = now_at(sc, SERVERCLOCK_EARLIEST, 7904);
	uint64_t hi = now_at(sc, SERVERCLOCK_LATEST, 7904);
	uint64_t truth = (uint64_t)(7904 + OFF);
	assert_true(lo <= truth && truth <= hi);
	serverclock_free(sc);
}

/* The server's clock stepped (an answer outside the interval): the new answer alone counts. */
static void test_server_stepped(void **state)
{
	(void)state;
	struct serverclock *sc = serverclock_new();
	serverclock_observe(sc, D0, 10000, 10010);
	serverclock_observe(sc, D0 + 3600, 11000, 11010); /* an hour ahead, 1 s later */
	uint64_t lo = now_at(sc, SERVERCLOCK_EARLIEST, 11010);
	assert_true(lo >= (uint64_t)(D0 + 3600) * 1000 - 2 && lo <= (uint64_t)(D0 + 3600) * 1000);
	serverclock_free(sc);
}

/* Nonsense is ignored: no Date, dates before 2001 or past 2286, headers before the request. */
static void test_nonsense_ignored(void **state)
{
	(void)state;
	struct serverclock *sc = serverclock_new();
	serverclock_observe(sc, 0, 10, 20);
	serverclock_observe(sc, 999999999, 10, 20);
	serverclock_observe(sc, 10000000000LL, 10, 20);
	serverclock_observe(sc, D0, 30, 20);
	assert_int_equal(serverclock_width_ms(sc, 20), -1);
	serverclock_observe(NULL, D0, 10, 20); /* no-op */
	serverclock_free(NULL);
	serverclock_free(sc);
}

/* Monotonic times whose microseconds would not fit an int64 (the sums overflowed: undefined
 * behaviour, then a garbage interval taken as known) are ignored, and a now past them is not
 * answered: the interval stays what the sane answers gave. */
static void test_huge_monotonic_ignored(void **state)
{
	(void)state;
	struct serverclock *sc = serverclock_new();
	const uint64_t huge = 1ull << 60; /* below INT64_MAX / 2, x 1000 past INT64_MAX */
	uint64_t t = 42;
	serverclock_observe(sc, D0, huge, huge);
	assert_int_equal(serverclock_width_ms(sc, huge), -1);
	serverclock_observe(sc, D0, 10000, 10020);
	assert_int_equal(serverclock_now_ms(sc, SERVERCLOCK_LATEST, huge, &t), -1);
	assert_int_equal(serverclock_now_ms(sc, SERVERCLOCK_EARLIEST, UINT64_MAX, &t), -1);
	assert_int_equal(t, 42);
	assert_true(now_at(sc, SERVERCLOCK_EARLIEST, 10020) <= (uint64_t)D0 * 1000);
	serverclock_free(sc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unknown),          cmocka_unit_test(test_one_answer),
	    cmocka_unit_test(test_answers_narrow),   cmocka_unit_test(test_server_stepped),
	    cmocka_unit_test(test_nonsense_ignored), cmocka_unit_test(test_huge_monotonic_ignored),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
