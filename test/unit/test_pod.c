/* Unit tests for lib/core/pod: the "finished" and "mirror pod" rules, written once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "pod.h"

/* rule(the pod of this JSON text) */
static int on(int (*rule)(const struct cJSON *), const char *text)
{
	cJSON *j = cJSON_Parse(text);
	int r;

	assert_non_null(j);
	r = rule(j);
	cJSON_Delete(j);
	return r;
}

#define finished(text) on(pod_finished, text)
#define mirror(text)   on(pod_is_mirror, text)

static void test_finished_phases(void **state)
{
	(void)state;
	assert_int_equal(finished("{\"status\":{\"phase\":\"Succeeded\"}}"), 1);
	assert_int_equal(finished("{\"status\":{\"phase\":\"Failed\"}}"), 1);
	/* every other phase, or none, still holds its memory */
	assert_int_equal(finished("{\"status\":{\"phase\":\"Running\"}}"), 0);
	assert_int_equal(finished("{\"status\":{\"phase\":\"Pending\"}}"), 0);
	assert_int_equal(finished("{\"status\":{\"phase\":\"Unknown\"}}"), 0);
	assert_int_equal(finished("{\"status\":{\"phase\":\"succeeded\"}}"), 0); /* case matters */
	assert_int_equal(finished("{\"status\":{\"phase\":\"Failed \"}}"), 0);
	assert_int_equal(finished("{\"status\":{\"phase\":1}}"), 0);
	assert_int_equal(finished("{\"status\":{}}"), 0);
	assert_int_equal(finished("{}"), 0);
	assert_int_equal(pod_finished(NULL), 0);
}

static void test_mirror_annotation(void **state)
{
	(void)state;
	assert_int_equal(
	    mirror("{\"metadata\":{\"annotations\":{\"kubernetes.io/config.mirror\":\"abc\"}}}"),
	    1);
	/* any value, even empty or not a string: the kubelet's key is what matters */
	assert_int_equal(
	    mirror("{\"metadata\":{\"annotations\":{\"kubernetes.io/config.mirror\":\"\"}}}"), 1);
	assert_int_equal(
	    mirror("{\"metadata\":{\"annotations\":{\"kubernetes.io/config.source\":\"file\"}}}"),
	    0);
	assert_int_equal(
	    mirror("{\"metadata\":{\"labels\":{\"kubernetes.io/config.mirror\":\"abc\"}}}"), 0);
	assert_int_equal(mirror("{\"metadata\":{}}"), 0);
	assert_int_equal(pod_is_mirror(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_finished_phases),
	    cmocka_unit_test(test_mirror_annotation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
