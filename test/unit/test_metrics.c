/* Unit tests for lib/metrics: the text exposition, counters, histograms, concurrency. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <cmocka.h>

#include "metrics.h"

/* noinline: at -O3 GCC 12 inlines this and then reports every pointer into the rendered text
 * as dangling to the local `text` (-Wdangling-pointer false positive, an error under -Werror). */
static __attribute__((noinline)) char *render(struct metrics *m)
{
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(metrics_render(m, &text, &len), 0);
	assert_int_equal(strlen(text), len);
	return text;
}

static void expect_line(const char *text, const char *line)
{
	char want[512];
	snprintf(want, sizeof(want), "%s\n", line);
	/* A whole line: at the start or after a newline. */
	const char *p = text;
	while ((p = strstr(p, want)) != NULL) {
		if (p == text || p[-1] == '\n')
			return;
		p++;
	}
	fail_msg("missing line: %s", line);
}

static size_t fake_ledger(void *ctx)
{
	return *(size_t *)ctx;
}

static void test_zero_state(void **state)
{
	struct metrics *m = metrics_new();
	assert_non_null(m);
	char *t = render(m);
	expect_line(t, "# TYPE gpu_memory_guard_reviews_total counter");
	expect_line(t, "gpu_memory_guard_reviews_total{kind=\"pod\",decision=\"allowed\"} 0");
	expect_line(t, "gpu_memory_guard_reviews_total{kind=\"binding\",decision=\"denied\"} 0");
	expect_line(t, "# TYPE gpu_memory_guard_review_duration_seconds histogram");
	expect_line(t, "gpu_memory_guard_review_duration_seconds_bucket{le=\"+Inf\"} 0");
	expect_line(t, "gpu_memory_guard_review_duration_seconds_count 0");
	expect_line(t, "gpu_memory_guard_ledger_reservations 0");
	expect_line(t, "# TYPE gpu_memory_guard_certificate_expiry_timestamp_seconds gauge");
	expect_line(t, "gpu_memory_guard_certificate_reloads_total{result=\"success\"} 0");
	expect_line(t, "gpu_memory_guard_certificate_reloads_total{result=\"failure\"} 0");
	expect_line(t, "gpu_memory_guard_ready 0");
	/* Every line is a comment or "name{labels} value" / "name value". */
	for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
		if (line[0] == '#') {
			assert_true(strncmp(line, "# HELP gpu_memory_guard_", 24) == 0 ||
			            strncmp(line, "# TYPE gpu_memory_guard_", 24) == 0);
			continue;
		}
		assert_true(strncmp(line, "gpu_memory_guard_", 17) == 0);
		assert_non_null(strrchr(line, ' '));
	}
	free(t);
	metrics_free(m);
	metrics_free(NULL);
}

static void test_reviews_and_histogram(void **state)
{
	struct metrics *m = metrics_new();
	metrics_review(m, METRICS_KIND_BINDING, METRICS_DENIED, 0.0003, 0.00002);
	metrics_review(m, METRICS_KIND_BINDING, METRICS_DENIED, 0.004, 0.00003);
	metrics_review(m, METRICS_KIND_POD, METRICS_WARNED, 0.2, 0.0004);
	metrics_review(m, METRICS_KIND_OTHER, METRICS_ERROR, 30, 2);
	metrics_review(NULL, METRICS_KIND_POD, METRICS_ALLOWED, 1, 1); /* no-op */
	char *t = render(m);
	expect_line(t, "gpu_memory_guard_reviews_total{kind=\"binding\",decision=\"denied\"} 2");
	expect_line(t, "gpu_memory_guard_reviews_total{kind=\"pod\",decision=\"warned\"} 1");
	expect_line(t, "gpu_memory_guard_reviews_total{kind=\"other\",decision=\"error\"} 1");
	/* Buckets are cumulative. */
	expect_line(t, "gpu_memory_guard_review_duration_seconds_bucket{le=\"0.0005\"} 1");
	expect_line(t, "gpu_memory_guard_review_duration_seconds_bucket{le=\"0.005\"} 2");
	expect_line(t, "gpu_memory_guard_review_duration_seconds_bucket{le=\"0.25\"} 3");
	expect_line(t, "gpu_memory_guard_review_duration_seconds_bucket{le=\"10\"} 3");
	expect_line(t, "gpu_memory_guard_review_duration_seconds_bucket{le=\"+Inf\"} 4");
	expect_line(t, "gpu_memory_guard_review_duration_seconds_count 4");
	expect_line(t, "gpu_memory_guard_review_duration_seconds_sum 30.204300000");
	/* The review's own time: its own, finer buckets. */
	expect_line(t, "gpu_memory_guard_review_self_duration_seconds_bucket{le=\"1e-05\"} 0");
	expect_line(t, "gpu_memory_guard_review_self_duration_seconds_bucket{le=\"2.5e-05\"} 1");
	expect_line(t, "gpu_memory_guard_review_self_duration_seconds_bucket{le=\"5e-05\"} 2");
	expect_line(t, "gpu_memory_guard_review_self_duration_seconds_bucket{le=\"0.0005\"} 3");
	expect_line(t, "gpu_memory_guard_review_self_duration_seconds_bucket{le=\"1\"} 3");
	expect_line(t, "gpu_memory_guard_review_self_duration_seconds_bucket{le=\"+Inf\"} 4");
	expect_line(t, "gpu_memory_guard_review_self_duration_seconds_count 4");
	expect_line(t, "gpu_memory_guard_review_self_duration_seconds_sum 2.000450000");
	free(t);
	metrics_free(m);
}

static void test_api_calls_by_code(void **state)
{
	struct metrics *m = metrics_new();
	metrics_api_call(m, "get", "pods", 200, 0.01);
	metrics_api_call(m, "get", "pods", 200, 0.02);
	metrics_api_call(m, "get", "pods", 404, 0.01);
	metrics_api_call(m, "list", "pods", 0, 2.0);
	metrics_api_call(m, "get", "nodes", 500, 0.001);
	metrics_api_call(m, "deletecollection", "secrets", 200, 0.001);
	metrics_api_call(m, "patch", "gpumemorypolicies", 200, 0.001);
	for (long code = 1; code <= METRICS_MAX_CODES + 3; code++)
		metrics_api_call(m, "get", "nodes", 600 + code, 0.001);
	char *t = render(m);
	expect_line(t, "gpu_memory_guard_api_requests_total{verb=\"get\",resource=\"pods\","
	               "code=\"200\"} 2");
	expect_line(t, "gpu_memory_guard_api_requests_total{verb=\"get\",resource=\"pods\","
	               "code=\"404\"} 1");
	expect_line(t, "gpu_memory_guard_api_requests_total{verb=\"list\",resource=\"pods\","
	               "code=\"0\"} 1");
	expect_line(t, "gpu_memory_guard_api_requests_total{verb=\"other\",resource=\"other\","
	               "code=\"200\"} 1");
	expect_line(t, "gpu_memory_guard_api_requests_total{verb=\"patch\","
	               "resource=\"gpumemorypolicies\",code=\"200\"} 1");
	/* 500 and 15 more codes take the 16 slots of get/nodes; the last 4 go to "other". */
	expect_line(t, "gpu_memory_guard_api_requests_total{verb=\"get\",resource=\"nodes\","
	               "code=\"other\"} 4");
	expect_line(t, "gpu_memory_guard_api_request_duration_seconds_count{verb=\"get\","
	               "resource=\"pods\"} 3");
	expect_line(t, "gpu_memory_guard_api_request_duration_seconds_bucket{verb=\"list\","
	               "resource=\"pods\",le=\"2.5\"} 1");
	expect_line(t, "gpu_memory_guard_api_request_duration_seconds_bucket{verb=\"list\","
	               "resource=\"pods\",le=\"1\"} 0");
	free(t);
	metrics_free(m);
}

static void test_gauges_and_reloads(void **state)
{
	struct metrics *m = metrics_new();
	size_t ledger = 7;
	metrics_set_ledger_gauge(m, fake_ledger, &ledger);
	metrics_set_cert_expiry(m, 1827510256);
	metrics_cert_reload(m, METRICS_RELOAD_SUCCESS);
	metrics_cert_reload(m, METRICS_RELOAD_SUCCESS);
	metrics_cert_reload(m, METRICS_RELOAD_FAILURE);
	metrics_set_ready(m, 1);
	metrics_http(m, 200);
	metrics_http(m, 413);
	metrics_http(m, 418);
	char *t = render(m);
	expect_line(t, "gpu_memory_guard_ledger_reservations 7");
	expect_line(t, "gpu_memory_guard_certificate_expiry_timestamp_seconds 1827510256");
	expect_line(t, "gpu_memory_guard_certificate_reloads_total{result=\"success\"} 2");
	expect_line(t, "gpu_memory_guard_certificate_reloads_total{result=\"failure\"} 1");
	expect_line(t, "gpu_memory_guard_ready 1");
	expect_line(t, "gpu_memory_guard_http_requests_total{code=\"413\"} 1");
	expect_line(t, "gpu_memory_guard_http_requests_total{code=\"other\"} 1");
	free(t);
	ledger = 0;
	t = render(m);
	expect_line(t, "gpu_memory_guard_ledger_reservations 0");
	free(t);
	metrics_free(m);
}

#define THREADS 8
#define PER     10000

static void *hammer(void *arg)
{
	struct metrics *m = arg;
	for (int i = 0; i < PER; i++) {
		metrics_review(m, METRICS_KIND_BINDING, METRICS_ALLOWED, 0.001, 0.0001);
		metrics_api_call(m, "list", "pods", 200 + (i % 3), 0.001);
	}
	return NULL;
}

/* Concurrent recording loses nothing (atomics), and equal codes claimed by two threads at
 * once are merged in the output. */
static void test_concurrent_recording(void **state)
{
	struct metrics *m = metrics_new();
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, hammer, m), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	char *t = render(m);
	char line[256];
	snprintf(line, sizeof(line),
	         "gpu_memory_guard_reviews_total{kind=\"binding\",decision=\"allowed\"} %d",
	         THREADS * PER);
	expect_line(t, line);
	long total = 0;
	for (int code = 200; code <= 202; code++) {
		char key[160];
		snprintf(key, sizeof(key),
		         "gpu_memory_guard_api_requests_total{verb=\"list\",resource=\"pods\","
		         "code=\"%d\"} ",
		         code);
		const char *p = strstr(t, key);
		assert_non_null(p);
		total += strtol(p + strlen(key), NULL, 10);
		assert_null(strstr(p + 1, key)); /* one series per code */
	}
	assert_int_equal(total, THREADS * PER);
	free(t);
	metrics_free(m);
}

static void emit(void *ctx, struct metrics_writer *w)
{
	metrics_printf(w, "gpu_memory_guard_test_gauge{node=\"%s\"} 1\n", (const char *)ctx);
}

/* Collectors add their series at scrape time; watches are a verb of their own. */
static void test_collectors_and_watch_verb(void **state)
{
	(void)state;
	struct metrics *m = metrics_new();
	char *text = NULL;
	size_t len = 0;

	assert_int_equal(metrics_add_collector(m, emit, "gpu-1"), 0);
	for (int i = 1; i < METRICS_MAX_COLLECTORS; i++)
		assert_int_equal(metrics_add_collector(m, emit, "gpu-x"), 0);
	assert_int_equal(metrics_add_collector(m, emit, "gpu-y"), -1);
	metrics_api_call(m, "watch", "pods", 200, 300.0);
	assert_int_equal(metrics_render(m, &text, &len), 0);
	assert_non_null(strstr(text, "gpu_memory_guard_test_gauge{node=\"gpu-1\"} 1\n"));
	assert_null(strstr(text, "gpu-y"));
	assert_non_null(strstr(text, "gpu_memory_guard_api_requests_total{verb=\"watch\",resource="
	                             "\"pods\",code=\"200\"} 1"));
	free(text);
	metrics_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_zero_state),
	    cmocka_unit_test(test_reviews_and_histogram),
	    cmocka_unit_test(test_api_calls_by_code),
	    cmocka_unit_test(test_gauges_and_reloads),
	    cmocka_unit_test(test_concurrent_recording),
	    cmocka_unit_test(test_collectors_and_watch_verb),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
