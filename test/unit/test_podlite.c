/* Unit tests for lib/cluster/podlite: the compact store of pods that ask for no GPU (uids,
 * namespaces interned and freed, the name arena compacted, hash growth, id reuse). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "podlite.h"

static void test_uid(void **state)
{
	uint8_t u[16];
	char back[PODLITE_UID_LEN + 1];
	(void)state;
	assert_int_equal(podlite_uid_parse("6f1c2b9e-01ab-4cde-8f00-123456789abc", u), 0);
	podlite_uid_format(u, back);
	assert_string_equal(back, "6f1c2b9e-01ab-4cde-8f00-123456789abc");
	assert_int_equal(u[0], 0x6f);
	assert_int_equal(u[15], 0xbc);
	/* anything the text would not come back as: kept whole by the cache */
	assert_int_equal(podlite_uid_parse("6F1C2B9E-01AB-4CDE-8F00-123456789ABC", u), -1);
	assert_int_equal(podlite_uid_parse("6f1c2b9e01ab4cde8f00123456789abc", u), -1);
	assert_int_equal(podlite_uid_parse("6f1c2b9e-01ab-4cde-8f00-123456789ab", u), -1);
	assert_int_equal(podlite_uid_parse("6f1c2b9e-01ab-4cde-8f00-123456789abcd", u), -1);
	assert_int_equal(podlite_uid_parse("6f1c2b9e+01ab-4cde-8f00-123456789abc", u), -1);
	assert_int_equal(podlite_uid_parse("6f1c2b9g-01ab-4cde-8f00-123456789abc", u), -1);
	assert_int_equal(podlite_uid_parse("", u), -1);
	assert_int_equal(podlite_uid_parse(NULL, u), -1);
	assert_int_equal(podlite_uid_parse("u1", u), -1);
}

static void uid_of(int i, uint8_t u[16])
{
	char t[PODLITE_UID_LEN + 1];
	snprintf(t, sizeof(t), "6f1c2b9e-0000-4000-8000-%012d", i);
	assert_int_equal(podlite_uid_parse(t, u), 0);
}

#define N 20000

static void test_many(void **state)
{
	struct podlite *s = podlite_new();
	static uint32_t ids[N];
	char ns[32], name[64];
	uint8_t u[16];
	size_t b0;
	(void)state;

	assert_non_null(s);
	b0 = podlite_bytes(s);
	for (int i = 0; i < N; i++) {
		snprintf(ns, sizeof(ns), "ns-%d", i % 37);
		snprintf(name, sizeof(name), "pod-%d-with-a-longer-name", i);
		uid_of(i, u);
		assert_int_equal(podlite_find(s, ns, name), PODLITE_NONE);
		assert_int_equal(podlite_insert(s, ns, name, u, &ids[i]), 0);
		podlite_at(s, ids[i])->node = (uint32_t)i % 100 + 1;
	}
	assert_int_equal(podlite_count(s), N);
	/* about 32 + 4 + the name per pod, with the arrays' slack: under 120 */
	assert_true(podlite_bytes(s) - b0 < (size_t)N * 120);
	for (int i = 0; i < N; i += 7) {
		snprintf(ns, sizeof(ns), "ns-%d", i % 37);
		snprintf(name, sizeof(name), "pod-%d-with-a-longer-name", i);
		uint32_t id = podlite_find(s, ns, name);
		assert_int_equal(id, ids[i]);
		assert_string_equal(podlite_ns(s, id), ns);
		assert_string_equal(podlite_name(s, id), name);
		uid_of(i, u);
		assert_memory_equal(podlite_at(s, id)->uid, u, 16);
		assert_int_equal(podlite_at(s, id)->node, (uint32_t)i % 100 + 1);
	}
	assert_int_equal(podlite_find(s, "ns-0", "pod-1-with-a-longer-name"), PODLITE_NONE);
	assert_int_equal(podlite_find(s, "nope", "pod-1-with-a-longer-name"), PODLITE_NONE);
	/* remove three quarters: the arena is compacted, the others still found */
	for (int i = 0; i < N; i++)
		if (i % 4 != 0)
			podlite_remove(s, ids[i]);
	assert_int_equal(podlite_count(s), N / 4);
	for (int i = 0; i < N / 2; i++) { /* new pods reuse the ids and trigger compaction */
		snprintf(name, sizeof(name), "new-%d", i);
		uid_of(N + i, u);
		uint32_t id;
		assert_int_equal(podlite_insert(s, "fresh", name, u, &id), 0);
		assert_true(id < N);
	}
	for (int i = 0; i < N; i += 4) {
		snprintf(ns, sizeof(ns), "ns-%d", i % 37);
		snprintf(name, sizeof(name), "pod-%d-with-a-longer-name", i);
		uint32_t id = podlite_find(s, ns, name);
		assert_int_equal(id, ids[i]);
		assert_string_equal(podlite_name(s, id), name);
	}
	assert_int_not_equal(podlite_find(s, "fresh", "new-17"), PODLITE_NONE);
	/* everything removed: namespaces freed (their slots reused) */
	for (uint32_t id = 0; id < podlite_ids(s); id++)
		if (podlite_at(s, id)->flags & PODLITE_USED)
			podlite_remove(s, id);
	assert_int_equal(podlite_count(s), 0);
	assert_int_equal(podlite_find(s, "fresh", "new-17"), PODLITE_NONE);
	uid_of(1, u);
	uint32_t id;
	assert_int_equal(podlite_insert(s, "again", "x", u, &id), 0);
	assert_string_equal(podlite_ns(s, id), "again");
	podlite_free(s);
	podlite_free(NULL);
}

static void test_bad_names(void **state)
{
	struct podlite *s = podlite_new();
	char big[PODLITE_NAME_MAX + 2];
	uint8_t u[16];
	uint32_t id;
	(void)state;

	uid_of(1, u);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(podlite_insert(s, "ns", big, u, &id), PODLITE_EFULL);
	assert_int_equal(podlite_insert(s, "ns", "", u, &id), PODLITE_EFULL);
	assert_int_equal(podlite_count(s), 0);
	big[PODLITE_NAME_MAX] = '\0';
	assert_int_equal(podlite_insert(s, "", big, u, &id), 0); /* no namespace: "" */
	assert_int_equal(podlite_find(s, "", big), id);
	podlite_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_uid),
	    cmocka_unit_test(test_many),
	    cmocka_unit_test(test_bad_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
