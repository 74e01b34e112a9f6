/* Unit tests for lib/cluster/record: the shared reservation record of a node (a Lease):
 * merging and dedupe by uid, pruning, expiry, the Lease round trip and unreadable records. */
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
#include "record.h"

#define GI   (1024ull * 1024 * 1024)
#define WALL 1800000000000ull /* 2027-01-15, Unix ms */
#define MONO 100000ull        /* the reader's CLOCK_MONOTONIC ms */

static void test_put_dedupes_by_uid_then_key(void **state)
{
	struct record r;
	(void)state;
	record_init(&r);
	assert_int_equal(record_put(&r, "a/p", "uid-1", GI, 1000, WALL, MONO), 0);
	/* The same pod again (a retried Binding): replaced in place. */
	assert_int_equal(record_put(&r, "a/p", "uid-1", 2 * GI, 2000, WALL, MONO + 5), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.entries[0].bytes, 2 * GI);
	assert_int_equal(r.entries[0].expires_ms, WALL + 2000); /* for the previous version */
	assert_int_equal(r.entries[0].ttl_ms, 2000);
	assert_int_equal(r.entries[0].seen_ms, MONO + 5);
	/* A newer pod of the same name (another uid) is another pod. */
	assert_int_equal(record_put(&r, "a/p", "uid-2", 3 * GI, 1000, WALL, MONO), 0);
	assert_int_equal(r.n, 2);
	/* Uid unknown on one side: the key decides (replaces the first of that key). */
	assert_int_equal(record_put(&r, "a/p", NULL, 4 * GI, 1000, WALL, MONO), 0);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.entries[0].bytes, 4 * GI);
	assert_string_equal(r.entries[0].uid, "");
	/* Another pod appends, order kept. */
	assert_int_equal(record_put(&r, "b/q", "uid-3", GI, 1000, WALL, MONO), 0);
	assert_int_equal(r.n, 3);
	assert_string_equal(r.entries[2].key, "b/q");
	record_free(&r);
	assert_int_equal(r.n, 0);
	assert_null(r.entries);
}

static void test_put_rejects_bad_input_and_caps(void **state)
{
	struct record r;
	char key[LEDGER_KEY_MAX + 1], uid[LEDGER_UID_MAX + 1];
	(void)state;
	record_init(&r);
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	memset(uid, 'u', sizeof(uid) - 1);
	uid[sizeof(uid) - 1] = '\0';
	assert_int_equal(record_put(&r, NULL, NULL, GI, 1000, WALL, MONO), RECORD_EINVAL);
	assert_int_equal(record_put(&r, "", NULL, GI, 1000, WALL, MONO), RECORD_EINVAL);
	assert_int_equal(record_put(&r, key, NULL, GI, 1000, WALL, MONO), RECORD_EINVAL);
	assert_int_equal(record_put(&r, "a/p", uid, GI, 1000, WALL, MONO), RECORD_EINVAL);
	assert_int_equal(record_put(&r, "a/p", NULL, RECORD_MAX_NUMBER + 1, 1000, WALL, MONO),
	                 RECORD_EINVAL);
	/* no lifetime, one past the cap, an expiry past RECORD_MAX_NUMBER, no monotonic time */
	assert_int_equal(record_put(&r, "a/p", NULL, GI, 0, WALL, MONO), RECORD_EINVAL);
	assert_int_equal(record_put(&r, "a/p", NULL, GI, RECORD_MAX_TTL_MS + 1, WALL, MONO),
	                 RECORD_EINVAL);
	assert_int_equal(record_put(&r, "a/p", NULL, GI, 1000, RECORD_MAX_NUMBER, MONO),
	                 RECORD_EINVAL);
	assert_int_equal(record_put(&r, "a/p", NULL, GI, 1000, WALL, 0), RECORD_EINVAL);
	assert_int_equal(r.n, 0);
	for (int i = 0; i < RECORD_MAX_ENTRIES; i++) {
		char k[32];
		snprintf(k, sizeof(k), "ns/p%d", i);
		assert_int_equal(record_put(&r, k, NULL, 1, 1000, WALL, MONO), 0);
	}
	assert_int_equal(record_put(&r, "ns/one-more", NULL, 1, 1000, WALL, MONO), RECORD_EFULL);
	/* Replacing an entry of a full record still works. */
	assert_int_equal(record_put(&r, "ns/p7", NULL, 2, 1000, WALL, MONO), 0);
	record_free(&r);
}

static void test_prune_expired_and_settled(void **state)
{
	struct record r;
	(void)state;
	record_init(&r);
	assert_int_equal(record_put(&r, "a/expired", "u1", GI, 1000, WALL, MONO - 1000),
	                 0); /* ends now */
	assert_int_equal(record_put(&r, "a/seen-long", "u2", GI, 60000, WALL, MONO), 0);
	assert_int_equal(record_put(&r, "a/seen-just-now", "u3", GI, 60000, WALL, MONO), 0);
	assert_int_equal(record_put(&r, "a/not-seen", "u4", GI, 60000, WALL, MONO), 0);
	assert_int_equal(record_put(&r, "a/other-uid", "u5", GI, 60000, WALL, MONO), 0);
	assert_int_equal(record_put(&r, "a/seen-unknown-time", "u6", GI, 60000, WALL, MONO), 0);
	uint64_t mono = MONO;
	struct placement_item visible[] = {
	    {.key = "a/seen-long", .uid = "u2", .bytes = GI, .seen_ms = mono - 30000},
	    {.key = "a/seen-just-now", .uid = "u3", .bytes = GI, .seen_ms = mono - 29999},
	    {.key = "a/other-uid", .uid = "u5-newer", .bytes = GI, .seen_ms = 1},
	    {.key = "a/seen-unknown-time", .uid = "u6", .bytes = GI, .seen_ms = 0},
	};
	assert_int_equal(record_prune(&r, mono, visible, 4, 30000), 2);
	assert_int_equal(r.n, 4);
	assert_string_equal(r.entries[0].key, "a/seen-just-now");
	assert_string_equal(r.entries[1].key, "a/not-seen");
	assert_string_equal(r.entries[2].key, "a/other-uid");
	assert_string_equal(r.entries[3].key, "a/seen-unknown-time");
	/* Without visible pods (the API path): only expiry. */
	assert_int_equal(record_prune(&r, mono + 59999, NULL, 0, 30000), 0);
	assert_int_equal(record_prune(&r, mono + 60000, NULL, 0, 30000), 4);
	assert_int_equal(r.n, 0);
	record_free(&r);
}

static void test_items_and_live_bytes(void **state)
{
	struct record r;
	struct placement_item items[4];
	(void)state;
	record_init(&r);
	assert_int_equal(record_put(&r, "a/old", "u1", GI, 1000, WALL, MONO - 1001), 0);
	assert_int_equal(record_put(&r, "a/new", "u2", 2 * GI, 5000, WALL, MONO), 0);
	assert_int_equal(record_put(&r, "a/nouid", NULL, 4 * GI, 1, WALL, MONO), 0);
	/* expiring exactly at the reading time: expired, neither an item nor live bytes */
	assert_int_equal(record_put(&r, "a/now", "u3", 8 * GI, 1000, WALL, MONO - 1000), 0);
	assert_int_equal(record_items(&r, MONO, 700, items), 2);
	assert_string_equal(items[0].key, "a/new");
	assert_string_equal(items[0].uid, "u2");
	assert_int_equal(items[0].bytes, 2 * GI);
	assert_int_equal(items[0].expires_ms, 5700); /* moved to the decision's clock */
	assert_null(items[1].uid);
	assert_int_equal(items[1].expires_ms, 701);
	assert_int_equal(record_live_bytes(&r, MONO), 6 * GI);
	assert_int_equal(record_live_bytes(&r, MONO + 5000), 0);
	record_free(&r);
}

static void test_lease_round_trip(void **state)
{
	struct record r, back;
	char err[256];
	(void)state;
	record_init(&r);
	record_init(&back);
	snprintf(r.rv, sizeof(r.rv), "%s", "4711");
	assert_int_equal(record_put(&r, "team-a/llama", "8d1e", 24 * GI, 60000, WALL, MONO), 0);
	assert_int_equal(record_put(&r, "team-b/web?req-1", "", 1, 1, WALL, MONO), 0);
	cJSON *lease = record_to_lease(&r, "gmg-system", "gpu-h100-a", WALL + 123);
	assert_non_null(lease);
	assert_string_equal(json_str(lease, "apiVersion", NULL), "coordination.k8s.io/v1");
	assert_string_equal(json_str(lease, "kind", NULL), "Lease");
	assert_string_equal(json_str(lease, "metadata", "name", NULL), "gpu-h100-a");
	assert_string_equal(json_str(lease, "metadata", "namespace", NULL), "gmg-system");
	assert_string_equal(json_str(lease, "metadata", "resourceVersion", NULL), "4711");
	assert_string_equal(
	    json_str(lease, "metadata", "labels", "app.kubernetes.io/managed-by", NULL),
	    "gpu-memory-guard");
	assert_string_equal(json_str(lease, "spec", "renewTime", NULL),
	                    "2027-01-15T08:00:00.123000Z");
	assert_string_equal(
	    json_str(lease, "metadata", "annotations", RECORD_ANNOTATION, NULL),
	    "[{\"uid\":\"8d1e\",\"pod\":\"team-a/llama\",\"bytes\":25769803776,\"expires\":"
	    "1800000060000,\"ttl\":60000},{\"uid\":\"\",\"pod\":\"team-b/web?req-1\",\"bytes\":1,"
	    "\"expires\":1800000000001,\"ttl\":1}]");
	assert_int_equal(record_from_lease(lease, &back, err, sizeof(err)), 0);
	assert_string_equal(back.rv, "4711");
	assert_int_equal(back.renew_ms, WALL + 123);
	assert_int_equal(back.n, 2);
	assert_string_equal(back.entries[0].key, "team-a/llama");
	assert_string_equal(back.entries[0].uid, "8d1e");
	assert_int_equal(back.entries[0].bytes, 24 * GI);
	assert_int_equal(back.entries[1].expires_ms, WALL + 1);
	assert_int_equal(back.entries[0].ttl_ms, 60000);
	assert_int_equal(back.entries[0].seen_ms, 0); /* not stamped until observed */
	cJSON_Delete(lease);
	/* No resourceVersion yet (the first write creates the Lease): none in the object. */
	r.rv[0] = '\0';
	lease = record_to_lease(&r, "gmg-system", "gpu-h100-a", WALL);
	assert_null(json_str(lease, "metadata", "resourceVersion", NULL));
	cJSON_Delete(lease);
	record_free(&r);
	record_free(&back);
}

/* A Lease as the API server returns it, with the annotation value given. */
static cJSON *lease_with(const char *rv, const char *annotation, const char *renew)
{
	cJSON *l = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(l, "metadata");
	cJSON_AddStringToObject(l, "kind", "Lease");
	cJSON_AddStringToObject(meta, "name", "gpu-1");
	if (rv != NULL)
		cJSON_AddStringToObject(meta, "resourceVersion", rv);
	if (annotation != NULL)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"),
		                        RECORD_ANNOTATION, annotation);
	if (renew != NULL)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(l, "spec"), "renewTime", renew);
	return l;
}

static void expect_parse(const char *rv, const char *annotation, const char *renew, int want_rc,
                         const char *want_err)
{
	struct record r;
	char err[256] = "";
	cJSON *l = lease_with(rv, annotation, renew);
	record_init(&r);
	int rc = record_from_lease(l, &r, err, sizeof(err));
	if (rc != want_rc || (want_err != NULL && strstr(err, want_err) == NULL))
		fail_msg("annotation %s: rc %d (want %d), err \"%s\" (want \"%s\")",
		         annotation ? annotation : "(none)", rc, want_rc, err,
		         want_err ? want_err : "");
	if (rc != 0)
		assert_int_equal(r.n, 0);
	record_free(&r);
	cJSON_Delete(l);
}

static void test_parse_errors(void **state)
{
	(void)state;
	expect_parse("1", NULL, NULL, 0, NULL); /* a Lease without entries: empty */
	expect_parse("1", "[]", NULL, 0, NULL);
	expect_parse(NULL, "[]", NULL, RECORD_EPARSE, "resourceVersion");
	expect_parse("1", "{}", NULL, RECORD_EPARSE, "not a JSON list");
	expect_parse("1", "[", NULL, RECORD_EPARSE, "not a JSON list");
	expect_parse("1", "[{\"bytes\":1,\"expires\":2}]", NULL, RECORD_EPARSE, "entry 0");
	expect_parse("1", "[{\"pod\":\"a/b\",\"bytes\":-1,\"expires\":2}]", NULL, RECORD_EPARSE,
	             "whole numbers");
	expect_parse("1", "[{\"pod\":\"a/b\",\"bytes\":1.5,\"expires\":2}]", NULL, RECORD_EPARSE,
	             "whole numbers");
	expect_parse("1", "[{\"pod\":\"a/b\",\"bytes\":1e300,\"expires\":2}]", NULL, RECORD_EPARSE,
	             "whole numbers");
	expect_parse("1", "[{\"pod\":\"a/b\",\"bytes\":\"1\",\"expires\":2}]", NULL, RECORD_EPARSE,
	             "whole numbers");
	expect_parse("1", "[{\"pod\":\"a/b\",\"uid\":7,\"bytes\":1,\"expires\":2}]", NULL,
	             RECORD_EPARSE, "entry 0");
	expect_parse("1",
	             "[{\"pod\":\"a/b\",\"bytes\":1,\"expires\":2},{\"pod\":\"\",\"bytes\":1,"
	             "\"expires\":2}]",
	             NULL, RECORD_EPARSE, "entry 1");
	/* renewTime is kept even when the entries are unreadable (shared.c overwrites a record
	 * unreadable for longer than the TTL). */
	struct record r;
	char err[128];
	cJSON *l = lease_with("9", "garbage", "2027-01-15T08:00:00.5Z");
	record_init(&r);
	assert_int_equal(record_from_lease(l, &r, err, sizeof(err)), RECORD_EPARSE);
	assert_string_equal(r.rv, "9");
	assert_int_equal(r.renew_ms, WALL + 500);
	cJSON_Delete(l);
	l = lease_with("9", "[]", "not a time");
	assert_int_equal(record_from_lease(l, &r, err, sizeof(err)), 0);
	assert_int_equal(r.renew_ms, 0);
	cJSON_Delete(l);
	/* Not a Lease at all. */
	l = cJSON_CreateObject();
	cJSON_AddStringToObject(l, "kind", "Pod");
	assert_int_equal(record_from_lease(l, &r, err, sizeof(err)), RECORD_EPARSE);
	assert_string_equal(err, "not a Lease");
	cJSON_Delete(l);
	record_free(&r);
}

/* Entries are read as stored: puts of (k, A), (k, B), (k, no uid) keep two entries, and a read
 * must not merge them (the same-pod rule is not transitive; found by fuzz_record). */
static void test_read_keeps_entries_apart(void **state)
{
	struct record r, back;
	char err[128];
	(void)state;
	record_init(&r);
	record_init(&back);
	snprintf(r.rv, sizeof(r.rv), "%s", "5");
	assert_int_equal(record_put(&r, "a/p", "A", 1 * GI, 1000, WALL, MONO), 0);
	assert_int_equal(record_put(&r, "a/p", "B", 2 * GI, 1000, WALL, MONO), 0);
	assert_int_equal(record_put(&r, "a/p", NULL, 4 * GI, 1000, WALL, MONO), 0);
	assert_int_equal(r.n, 2);
	cJSON *l = record_to_lease(&r, "ns", "n", WALL);
	assert_int_equal(record_from_lease(l, &back, err, sizeof(err)), 0);
	assert_int_equal(back.n, 2);
	assert_int_equal(record_live_bytes(&back, 0), 6 * GI);
	cJSON_Delete(l);
	/* The largest number allowed reads back exactly (cJSON prints 15 digits). */
	assert_int_equal(record_put(&r, "a/q", NULL, RECORD_MAX_NUMBER, RECORD_MAX_TTL_MS,
	                            RECORD_MAX_NUMBER - RECORD_MAX_TTL_MS, MONO),
	                 0);
	l = record_to_lease(&r, "ns", "n", WALL);
	assert_int_equal(record_from_lease(l, &back, err, sizeof(err)), 0);
	assert_int_equal(back.entries[2].bytes, RECORD_MAX_NUMBER);
	assert_int_equal(back.entries[2].expires_ms, RECORD_MAX_NUMBER);
	cJSON_Delete(l);
	record_free(&r);
	record_free(&back);
}

static void test_copy(void **state)
{
	struct record a, b;
	(void)state;
	record_init(&a);
	snprintf(a.rv, sizeof(a.rv), "%s", "12");
	assert_int_equal(record_put(&a, "a/p", "u", GI, 1000, WALL, MONO), 0);
	assert_int_equal(record_copy(&b, &a), 0);
	assert_int_equal(record_put(&b, "a/q", "v", GI, 1000, WALL, MONO), 0);
	assert_int_equal(a.n, 1);
	assert_int_equal(b.n, 2);
	assert_string_equal(b.rv, "12");
	record_free(&a);
	record_free(&b);
	record_init(&a);
	assert_int_equal(record_copy(&b, &a), 0);
	assert_int_equal(b.n, 0);
	record_free(&b);
}

/* Clock skew (issue 20): a writer whose wall clock is 90 s behind or ahead of the reader's
 * (and whose monotonic clock is anything) writes a 60 s reservation; the reader reads the
 * record at its monotonic 1000 ms and must count the entry for its whole 60 s from then, and
 * no longer: the record's time is the reader's own, from when it first saw the entry. */
static void skew_case(int64_t writer_offset_ms)
{
	struct record w, back, again;
	struct placement_item items[1];
	char err[256];
	uint64_t writer_wall = (uint64_t)((int64_t)WALL + writer_offset_ms);

	record_init(&w);
	record_init(&back);
	record_init(&again);
	snprintf(w.rv, sizeof(w.rv), "%s", "1");
	assert_int_equal(record_put(&w, "a/p", "u", GI, 60000, writer_wall, 987654321), 0);
	cJSON *lease = record_to_lease(&w, "gmg-system", "gpu-1", writer_wall);
	assert_int_equal(record_from_lease(lease, &back, err, sizeof(err)), 0);
	record_observe(&back, NULL, 1000, 30000); /* the entry's own ttl, not the default */
	/* just read, 59.999 s later: counted */
	assert_int_equal(record_items(&back, 1000, 1000, items), 1);
	assert_int_equal(items[0].expires_ms, 61000);
	assert_int_equal(record_live_bytes(&back, 1000 + 59999), GI);
	/* read again 30 s later, unchanged: the first sight still counts */
	assert_int_equal(record_from_lease(lease, &again, err, sizeof(err)), 0);
	record_observe(&again, &back, 31000, 30000);
	assert_int_equal(again.entries[0].seen_ms, 1000);
	cJSON_Delete(lease);
	/* 60 s after the reader first saw it: gone */
	assert_int_equal(record_live_bytes(&back, 61000), 0);
	assert_int_equal(record_prune(&back, 61000, NULL, 0, 30000), 1);
	assert_int_equal(record_prune(&again, 61000, NULL, 0, 30000), 1);
	record_free(&w);
	record_free(&back);
	record_free(&again);
}

static void test_writer_clock_behind(void **state)
{
	(void)state;
	skew_case(-90000);
}

static void test_writer_clock_ahead(void **state)
{
	(void)state;
	skew_case(90000);
}

/* An entry of the previous version (no "ttl") lives the reader's default from its first
 * sight, whatever its "expires" says; a rewritten entry (a re-put: another "expires") counts
 * anew; a "ttl" of 0 or over the cap is refused with the entry named. */
static void test_observe_old_entries_and_bad_ttl(void **state)
{
	struct record r, prev;
	char err[256];
	(void)state;
	record_init(&r);
	record_init(&prev);
	cJSON *l = cJSON_Parse("{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"3\","
	                       "\"annotations\":{\"" RECORD_ANNOTATION "\":\"[{\\\"pod\\\":"
	                       "\\\"a/old\\\",\\\"bytes\\\":1,\\\"expires\\\":5}]\"}}}");
	assert_non_null(l);
	assert_int_equal(record_from_lease(l, &r, err, sizeof(err)), 0);
	assert_int_equal(r.entries[0].ttl_ms, 0);
	record_observe(&r, NULL, 2000, 60000);
	assert_int_equal(r.entries[0].ttl_ms, 60000);
	assert_int_equal(record_live_bytes(&r, 61999), 1);
	assert_int_equal(record_live_bytes(&r, 62000), 0);
	cJSON_Delete(l);
	/* a re-put of the same pod is a new entry to a reader that knew the old one */
	assert_int_equal(record_put(&prev, "a/p", "u", GI, 60000, WALL, 500), 0);
	assert_int_equal(record_put(&r, "a/p", "u", GI, 60000, WALL + 1, 500), 0);
	r.entries[1].seen_ms = 0; /* as read */
	record_observe(&r, &prev, 9000, 60000);
	assert_int_equal(r.entries[1].seen_ms, 9000);
	r.entries[1].seen_ms = 0;
	r.entries[1].expires_ms = WALL + 60000; /* unchanged after all */
	record_observe(&r, &prev, 9000, 60000);
	assert_int_equal(r.entries[1].seen_ms, 500);
	const char *bad[] = {"0", "86400001", "-1", "1.5", "\\\"60\\\""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[512];
		snprintf(text, sizeof(text),
		         "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"3\","
		         "\"annotations\":{\"" RECORD_ANNOTATION "\":\"[{\\\"pod\\\":\\\"a/p\\\","
		         "\\\"bytes\\\":1,\\\"expires\\\":5,\\\"ttl\\\":%s}]\"}}}",
		         bad[i]);
		l = cJSON_Parse(text);
		assert_non_null(l);
		assert_int_equal(record_from_lease(l, &r, err, sizeof(err)), RECORD_EPARSE);
		assert_non_null(strstr(err,
		                       "entry 0: \"ttl\" must be a whole number of ms from 1 to "
		                       "86400000"));
		cJSON_Delete(l);
	}
	record_free(&r);
	record_free(&prev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_dedupes_by_uid_then_key),
	    cmocka_unit_test(test_put_rejects_bad_input_and_caps),
	    cmocka_unit_test(test_prune_expired_and_settled),
	    cmocka_unit_test(test_items_and_live_bytes),
	    cmocka_unit_test(test_lease_round_trip),
	    cmocka_unit_test(test_parse_errors),
	    cmocka_unit_test(test_read_keeps_entries_apart),
	    cmocka_unit_test(test_copy),
	    cmocka_unit_test(test_writer_clock_behind),
	    cmocka_unit_test(test_writer_clock_ahead),
	    cmocka_unit_test(test_observe_old_entries_and_bad_ttl),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
