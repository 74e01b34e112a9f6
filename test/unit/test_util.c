/* Unit tests for the helpers of lib/util written once: jsonpath. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "jsonpath.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json_at_follows_keys),
	    cmocka_unit_test(test_json_at_missing_or_wrong_type),
	    cmocka_unit_test(test_json_at_step_cap),
	    cmocka_unit_test(test_json_str),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
