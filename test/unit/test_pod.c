/* Unit tests for lib/core/pod: the "finished", "mirror pod", "being deleted", key and "same pod"
 * rules, written once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
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
#define deleting(text) on(pod_being_deleted, text)

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

/* "namespace/name": made, read from a pod, split back; what does not fit or has no name is
 * refused with an empty result. */
static void test_key(void **state)
{
	char key[16], ns[8];
	const char *name = NULL;
	cJSON *pod = cJSON_Parse("{\"metadata\":{\"namespace\":\"ml\",\"name\":\"a\"}}");

	(void)state;
	assert_int_equal(pod_key_make("ml", "llama-0", key, sizeof(key)), 0);
	assert_string_equal(key, "ml/llama-0");
	assert_int_equal(pod_key_make(NULL, "a", key, sizeof(key)), 0);
	assert_string_equal(key, "/a");
	assert_int_equal(pod_key_make("ml", "", key, sizeof(key)), -1);
	assert_string_equal(key, "");
	assert_int_equal(pod_key_make("ml", NULL, key, sizeof(key)), -1);
	assert_int_equal(pod_key_make("ml", "0123456789abc", key, sizeof(key)), -1); /* 17 > 16 */
	assert_string_equal(key, "");
	assert_int_equal(pod_key_make("ml", "0123456789ab", key, sizeof(key)), 0); /* 16 */
	assert_int_equal(pod_key_of(pod, key, sizeof(key)), 0);
	assert_string_equal(key, "ml/a");
	cJSON_Delete(pod);

	assert_int_equal(pod_key_split("ml/llama-0", ns, sizeof(ns), &name), 0);
	assert_string_equal(ns, "ml");
	assert_string_equal(name, "llama-0");
	assert_int_equal(pod_key_split("/a", ns, sizeof(ns), NULL), 0);
	assert_string_equal(ns, "");
	assert_int_equal(pod_key_split("no-slash", ns, sizeof(ns), &name), -1);
	assert_string_equal(ns, "");
	assert_int_equal(pod_key_split("namespace/a", ns, sizeof(ns), &name), -1); /* 9 > 8 */
	assert_string_equal(ns, "");
	assert_int_equal(pod_key_split(NULL, ns, sizeof(ns), &name), -1);
}

/* The identity rules as a table: (key, uid) pairs, "" or NULL uid unknown. */
/* Being deleted: the API server writes metadata.deletionTimestamp as an RFC 3339 string; JSON
 * null is how a client may spell "not set" (Go decodes it to a nil *Time: the pod is bound as
 * any other), so it must not make a Binding reserve nothing. */
static void test_being_deleted(void **state)
{
	(void)state;
	assert_int_equal(
	    deleting("{\"metadata\":{\"deletionTimestamp\":\"2026-12-07T01:00:00Z\"}}"), 1);
	assert_int_equal(deleting("{\"metadata\":{\"deletionTimestamp\":null}}"), 0);
	assert_int_equal(deleting("{\"metadata\":{\"deletionTimestamp\":1}}"), 0);
	assert_int_equal(deleting("{\"metadata\":{}}"), 0);
	assert_int_equal(deleting("{\"spec\":{\"deletionTimestamp\":\"x\"}}"), 0);
	assert_int_equal(pod_being_deleted(NULL), 0);
}

static void test_same_pod(void **state)
{
	static const struct {
		const char *ka, *ua, *kb, *ub;
		int same, strict;
	} rows[] = {
	    {"ns/a", "u1", "ns/a", "u1", 1, 1},
	    /* a newer pod of the same name is another pod, by either rule */
	    {"ns/a", "u1", "ns/a", "u2", 0, 0},
	    /* one uid unknown: the keys decide */
	    {"ns/a", "", "ns/a", "u1", 1, 1},
	    {"ns/a", NULL, "ns/a", "u1", 1, 1},
	    {"ns/a", "u1", "ns/a", NULL, 1, 1},
	    {"ns/a", "", "ns/b", "u1", 0, 0},
	    {"ns/a", NULL, "ns/a", NULL, 1, 1},
	    /* the same uid under another key (a generateName pod's reservation, "ns/a?u1", and
	     * the pod the API server stored): the same pod, but it does not settle by key */
	    {"ns/a?u1", "u1", "ns/a-x7k2q", "u1", 1, 0},
	    /* a NULL key is no pod's */
	    {NULL, "u1", "ns/a", "u1", 1, 0},
	    {NULL, "", "ns/a", "", 0, 0},
	    {NULL, NULL, NULL, NULL, 0, 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int same = pod_same(rows[i].ka, rows[i].ua, rows[i].kb, rows[i].ub);
		int strict = pod_same_strict(rows[i].ka, rows[i].ua, rows[i].kb, rows[i].ub);
		int back = pod_same(rows[i].kb, rows[i].ub, rows[i].ka, rows[i].ua);

		if (same != rows[i].same || strict != rows[i].strict || back != same)
			fail_msg("row %zu: same %d (want %d, reversed %d), strict %d (want %d)", i,
			         same, rows[i].same, back, strict, rows[i].strict);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_finished_phases), cmocka_unit_test(test_mirror_annotation),
	    cmocka_unit_test(test_being_deleted),   cmocka_unit_test(test_key),
	    cmocka_unit_test(test_same_pod),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
