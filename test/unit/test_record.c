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

static void test_put_dedupes_by_uid_then_key(void **state)
{
	struct record r;
	(void)state;
	record_init(&r);
	assert_int_equal(record_put(&r, "a/p", "uid-1", GI, WALL + 1000), 0);
	/* The same pod again (a retried Binding): refreshed in place. */
	assert_int_equal(record_put(&r, "a/p", "uid-1", 2 * GI, WALL + 2000), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.entries[0].bytes, 2 * GI);
	assert_int_equal(r.entries[0].expires_ms, WALL + 2000);
	/* ... never lowered: a smaller or shorter put of it leaves the entry as it was. */
	assert_int_equal(record_put(&r, "a/p", "uid-1", GI / 2, WALL + 500), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.entries[0].bytes, 2 * GI);
	assert_int_equal(r.entries[0].expires_ms, WALL + 2000);
	/* A newer pod of the same name (another uid) is another pod. */
	assert_int_equal(record_put(&r, "a/p", "uid-2", 3 * GI, WALL + 1000), 0);
	assert_int_equal(r.n, 2);
	/* Uid unknown on one side: the key decides (refreshes the first of that key, keeping its
	 * uid: a put without one never takes over an entry). */
	assert_int_equal(record_put(&r, "a/p", NULL, 4 * GI, WALL + 1000), 0);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.entries[0].bytes, 4 * GI);
	assert_int_equal(r.entries[0].expires_ms, WALL + 2000);
	assert_string_equal(r.entries[0].uid, "uid-1");
	/* An entry without a uid takes the one a later put of its key brings. */
	assert_int_equal(record_put(&r, "c/s", NULL, GI, WALL + 1000), 0);
	assert_int_equal(record_put(&r, "c/s", "uid-4", GI, WALL + 1000), 0);
	assert_int_equal(r.n, 3);
	assert_string_equal(r.entries[2].uid, "uid-4");
	/* Another pod appends, order kept. */
	assert_int_equal(record_put(&r, "b/q", "uid-3", GI, WALL + 1000), 0);
	assert_int_equal(r.n, 4);
	assert_string_equal(r.entries[3].key, "b/q");
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
	assert_int_equal(record_put(&r, NULL, NULL, GI, WALL), RECORD_EINVAL);
	assert_int_equal(record_put(&r, "", NULL, GI, WALL), RECORD_EINVAL);
	assert_int_equal(record_put(&r, key, NULL, GI, WALL), RECORD_EINVAL);
	assert_int_equal(record_put(&r, "a/p", uid, GI, WALL), RECORD_EINVAL);
	assert_int_equal(record_put(&r, "a/p", NULL, RECORD_MAX_NUMBER + 1, WALL), RECORD_EINVAL);
	assert_int_equal(r.n, 0);
	for (int i = 0; i < RECORD_MAX_ENTRIES; i++) {
		char k[32];
		snprintf(k, sizeof(k), "ns/p%d", i);
		assert_int_equal(record_put(&r, k, NULL, 1, WALL), 0);
	}
	assert_int_equal(record_put(&r, "ns/one-more", NULL, 1, WALL), RECORD_EFULL);
	/* Replacing an entry of a full record still works. */
	assert_int_equal(record_put(&r, "ns/p7", NULL, 2, WALL), 0);
	record_free(&r);
}

static void test_prune_expired_and_settled(void **state)
{
	struct record r;
	(void)state;
	record_init(&r);
	assert_int_equal(record_put(&r, "a/expired", "u1", GI, WALL), 0); /* expires now */
	assert_int_equal(record_put(&r, "a/seen-long", "u2", GI, WALL + 60000), 0);
	assert_int_equal(record_put(&r, "a/seen-just-now", "u3", GI, WALL + 60000), 0);
	assert_int_equal(record_put(&r, "a/not-seen", "u4", GI, WALL + 60000), 0);
	assert_int_equal(record_put(&r, "a/other-uid", "u5", GI, WALL + 60000), 0);
	assert_int_equal(record_put(&r, "a/seen-unknown-time", "u6", GI, WALL + 60000), 0);
	uint64_t mono = 100000;
	struct placement_item visible[] = {
	    {.key = "a/seen-long", .uid = "u2", .bytes = GI, .seen_ms = mono - 30000},
	    {.key = "a/seen-just-now", .uid = "u3", .bytes = GI, .seen_ms = mono - 29999},
	    {.key = "a/other-uid", .uid = "u5-newer", .bytes = GI, .seen_ms = 1},
	    {.key = "a/seen-unknown-time", .uid = "u6", .bytes = GI, .seen_ms = 0},
	};
	assert_int_equal(record_prune(&r, WALL, visible, 4, mono, 30000), 2);
	assert_int_equal(r.n, 4);
	assert_string_equal(r.entries[0].key, "a/seen-just-now");
	assert_string_equal(r.entries[1].key, "a/not-seen");
	assert_string_equal(r.entries[2].key, "a/other-uid");
	assert_string_equal(r.entries[3].key, "a/seen-unknown-time");
	/* Without visible pods (the API path): only expiry. */
	assert_int_equal(record_prune(&r, WALL + 59999, NULL, 0, mono, 30000), 0);
	assert_int_equal(record_prune(&r, WALL + 60000, NULL, 0, mono, 30000), 4);
	assert_int_equal(r.n, 0);
	record_free(&r);
}

static void test_items_and_live_bytes(void **state)
{
	struct record r;
	struct placement_item items[4];
	(void)state;
	record_init(&r);
	assert_int_equal(record_put(&r, "a/old", "u1", GI, WALL - 1), 0);
	assert_int_equal(record_put(&r, "a/new", "u2", 2 * GI, WALL + 5000), 0);
	assert_int_equal(record_put(&r, "a/nouid", NULL, 4 * GI, WALL + 1), 0);
	/* expiring exactly at the reading time: expired, neither an item nor live bytes */
	assert_int_equal(record_put(&r, "a/now", "u3", 8 * GI, WALL), 0);
	assert_int_equal(record_items(&r, WALL, 700, items), 2);
	assert_string_equal(items[0].key, "a/new");
	assert_string_equal(items[0].uid, "u2");
	assert_int_equal(items[0].bytes, 2 * GI);
	assert_int_equal(items[0].expires_ms, 5700); /* moved to the decision's clock */
	assert_null(items[1].uid);
	assert_int_equal(items[1].expires_ms, 701);
	assert_int_equal(record_live_bytes(&r, WALL), 6 * GI);
	assert_int_equal(record_live_bytes(&r, WALL + 5000), 0);
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
	assert_int_equal(record_put(&r, "team-a/llama", "8d1e", 24 * GI, WALL + 60000), 0);
	assert_int_equal(record_put(&r, "team-b/web?req-1", "", 1, WALL + 1), 0);
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
	    "1800000060000},{\"uid\":\"\",\"pod\":\"team-b/web?req-1\",\"bytes\":1,\"expires\":"
	    "1800000000001}]");
	assert_int_equal(record_from_lease(lease, &back, err, sizeof(err)), 0);
	assert_string_equal(back.rv, "4711");
	assert_int_equal(back.renew_ms, WALL + 123);
	assert_int_equal(back.n, 2);
	assert_string_equal(back.entries[0].key, "team-a/llama");
	assert_string_equal(back.entries[0].uid, "8d1e");
	assert_int_equal(back.entries[0].bytes, 24 * GI);
	assert_int_equal(back.entries[1].expires_ms, WALL + 1);
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

/* A pod CREATE's entry (--unseen-reservation-ttl) carries "unseen":true through the Lease, so
 * the replica whose write drops it at its expiry counts it; a retried review replaces it in
 * place and an ordinary put clears the mark. */
static void test_unseen_entries(void **state)
{
	struct record r, back;
	char err[256];
	(void)state;
	record_init(&r);
	record_init(&back);
	snprintf(r.rv, sizeof(r.rv), "%s", "1");
	assert_int_equal(record_put_unseen(&r, "a/ghost", "u1", GI, WALL + 35000), 0);
	assert_int_equal(record_put(&r, "a/bound", "u2", GI, WALL + 60000), 0);
	cJSON *lease = record_to_lease(&r, "ns", "gpu-1", WALL);
	assert_string_equal(json_str(lease, "metadata", "annotations", RECORD_ANNOTATION, NULL),
	                    "[{\"uid\":\"u1\",\"pod\":\"a/ghost\",\"bytes\":1073741824,"
	                    "\"expires\":1800000035000,\"unseen\":true},{\"uid\":\"u2\",\"pod\":"
	                    "\"a/bound\",\"bytes\":1073741824,\"expires\":1800000060000}]");
	assert_int_equal(record_from_lease(lease, &back, err, sizeof(err)), 0);
	cJSON_Delete(lease);
	assert_int_equal(back.n, 2);
	assert_int_equal(back.entries[0].unseen, 1);
	assert_int_equal(back.entries[1].unseen, 0);
	assert_int_equal(record_unseen_expired(&back, WALL + 34999), 0);
	assert_int_equal(record_unseen_expired(&back, WALL + 35000), 1);
	assert_int_equal(record_unseen_expired(&back, WALL + 60000), 1); /* the other is not */
	assert_int_equal(record_put(&back, "a/ghost", "u1", GI, WALL + 60000), 0);
	assert_int_equal(back.entries[0].unseen, 0);
	assert_int_equal(record_unseen_expired(&back, WALL + 60000), 0);
	record_free(&r);
	record_free(&back);
	expect_parse("1", "[{\"pod\":\"a/b\",\"bytes\":1,\"expires\":2,\"unseen\":false}]", NULL, 0,
	             NULL);
	expect_parse("1", "[{\"pod\":\"a/b\",\"bytes\":1,\"expires\":2,\"unseen\":1}]", NULL,
	             RECORD_EPARSE, "\"unseen\" a boolean");
}

/* The claim a pod joined unreserved (issue 21) carries through the Lease as "claim", written
 * only when set: an entry without it is the same JSON as before, and one written by a replica of
 * the previous version (no "claim") reads with none; record_items gives it as dra_claim; a put
 * of the same pod keeps it; a claim that is not a string, or too long, is refused. */
static void test_claim_entries(void **state)
{
	struct record r, back;
	struct placement_item items[3];
	char err[256], longc[LEDGER_UID_MAX + 1];
	(void)state;
	record_init(&r);
	record_init(&back);
	memset(longc, 'c', LEDGER_UID_MAX);
	longc[LEDGER_UID_MAX] = '\0';
	snprintf(r.rv, sizeof(r.rv), "%s", "1");
	assert_int_equal(record_put_claim(&r, "a/p1", "u1", "c-1", 0, WALL + 35000, 1), 0);
	assert_int_equal(record_put_claim(&r, "a/p2", "u2", NULL, GI, WALL + 60000, 0), 0);
	assert_int_equal(record_put_claim(&r, "a/p3", "u3", longc, GI, WALL + 60000, 0),
	                 RECORD_EINVAL);
	cJSON *lease = record_to_lease(&r, "ns", "gpu-1", WALL);
	assert_string_equal(json_str(lease, "metadata", "annotations", RECORD_ANNOTATION, NULL),
	                    "[{\"uid\":\"u1\",\"pod\":\"a/p1\",\"bytes\":0,"
	                    "\"expires\":1800000035000,\"unseen\":true,\"claim\":\"c-1\"},"
	                    "{\"uid\":\"u2\",\"pod\":\"a/p2\",\"bytes\":1073741824,"
	                    "\"expires\":1800000060000}]");
	assert_int_equal(record_from_lease(lease, &back, err, sizeof(err)), 0);
	cJSON_Delete(lease);
	assert_int_equal(back.n, 2);
	assert_string_equal(back.entries[0].claim, "c-1");
	assert_int_equal(back.entries[0].unseen, 1);
	assert_string_equal(back.entries[1].claim, "");
	assert_int_equal(record_items(&back, WALL, 500, items), 2);
	assert_string_equal(items[0].dra_claim, "c-1");
	assert_int_equal(items[0].expires_ms, 500 + 35000);
	assert_null(items[1].dra_claim);
	/* the same pod put again (its Binding, the claim reserved for it by then): the claim is
	 * kept (it only adds to what counts), the entry an ordinary one now; an entry without a
	 * claim takes the one a later put brings */
	assert_int_equal(record_put(&back, "a/p1", "u1", 0, WALL + 60000), 0);
	assert_int_equal(back.n, 2);
	assert_string_equal(back.entries[0].claim, "c-1");
	assert_int_equal(back.entries[0].unseen, 0);
	assert_int_equal(record_put_claim(&back, "a/p2", "u2", "c-2", GI, WALL + 60000, 0), 0);
	assert_string_equal(back.entries[1].claim, "c-2");
	record_free(&r);
	record_free(&back);
	/* an entry of the previous version: no claim, read as before */
	lease = lease_with("7",
	                   "[{\"uid\":\"u9\",\"pod\":\"a/old\",\"bytes\":0,\"expires\":"
	                   "1800000035000,\"unseen\":true}]",
	                   NULL);
	assert_int_equal(record_from_lease(lease, &back, err, sizeof(err)), 0);
	cJSON_Delete(lease);
	assert_int_equal(back.n, 1);
	assert_string_equal(back.entries[0].claim, "");
	assert_int_equal(record_items(&back, WALL, 500, items), 1);
	assert_null(items[0].dra_claim);
	assert_string_equal(items[0].key, "a/old");
	record_free(&back);
	expect_parse("1", "[{\"pod\":\"a/b\",\"bytes\":1,\"expires\":2,\"claim\":\"\"}]", NULL, 0,
	             NULL);
	expect_parse("1", "[{\"pod\":\"a/b\",\"bytes\":1,\"expires\":2,\"claim\":7}]", NULL,
	             RECORD_EPARSE, "\"claim\" strings");
	char ann[256];
	snprintf(ann, sizeof(ann), "[{\"pod\":\"a/b\",\"bytes\":1,\"expires\":2,\"claim\":\"%s\"}]",
	         longc);
	expect_parse("1", ann, NULL, RECORD_EPARSE, "too long key, uid or claim");
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
	assert_int_equal(record_put(&r, "a/p", "A", 1 * GI, WALL), 0);
	assert_int_equal(record_put(&r, "a/p", "B", 2 * GI, WALL), 0);
	assert_int_equal(record_put(&r, "a/p", NULL, 4 * GI, WALL), 0);
	assert_int_equal(r.n, 2);
	cJSON *l = record_to_lease(&r, "ns", "n", WALL);
	assert_int_equal(record_from_lease(l, &back, err, sizeof(err)), 0);
	assert_int_equal(back.n, 2);
	assert_int_equal(record_live_bytes(&back, 0), 6 * GI);
	cJSON_Delete(l);
	/* The largest number allowed reads back exactly (cJSON prints 15 digits). */
	assert_int_equal(record_put(&r, "a/q", NULL, RECORD_MAX_NUMBER, RECORD_MAX_NUMBER), 0);
	l = record_to_lease(&r, "ns", "n", WALL);
	assert_int_equal(record_from_lease(l, &back, err, sizeof(err)), 0);
	assert_int_equal(back.entries[2].bytes, RECORD_MAX_NUMBER);
	assert_int_equal(back.entries[2].expires_ms, RECORD_MAX_NUMBER);
	cJSON_Delete(l);
	record_free(&r);
	record_free(&back);
}

/* The cap (record.h, "The cap"): read at the shared clock's bounds [WALL - 500, WALL + 500]
 * with a 60 s TTL, an expiry counts at most until WALL + 500 + 1000 + 60000. An entry written
 * far ahead (a wrong clock, a forged Lease) is lowered to that and stops counting there; what a
 * replica at those bounds stamps (WALL + 500 + 60000) is untouched; the capped expiry is what
 * the next write stores. */
static void test_expiry_cap(void **state)
{
	struct record r, back;
	struct placement_item items[4];
	char err[256];
	(void)state;
	assert_int_equal(record_max_expiry(WALL - 500, WALL + 500, 60000), WALL + 61500);
	/* one clock (width 0), and bounds out of order: width 0 too */
	assert_int_equal(record_max_expiry(WALL, WALL, 60000), WALL + 60000);
	assert_int_equal(record_max_expiry(WALL + 9, WALL, 60000), WALL + 60000);
	assert_true(record_max_expiry(UINT64_MAX - 9, UINT64_MAX - 5, 60000) == UINT64_MAX);

	record_init(&r);
	record_init(&back);
	snprintf(r.rv, sizeof(r.rv), "%s", "7");
	assert_int_equal(record_put(&r, "a/honest", "u1", GI, WALL + 60500), 0);
	assert_int_equal(record_put_unseen(&r, "a/at-cap", "u2", 2 * GI, WALL + 61500), 0);
	assert_int_equal(record_put(&r, "a/ghost", NULL, 30 * GI, RECORD_MAX_NUMBER), 0);
	cJSON *lease = record_to_lease(&r, "gmg-system", "gpu-1", WALL);
	assert_int_equal(record_from_lease(lease, &back, err, sizeof(err)), 0);
	cJSON_Delete(lease);
	assert_int_equal(back.entries[2].expires_ms, RECORD_MAX_NUMBER); /* read as stored */

	uint64_t cap = record_max_expiry(WALL - 500, WALL + 500, 60000);
	assert_int_equal(record_cap_expiry(&back, cap), 1);
	assert_int_equal(back.entries[0].expires_ms, WALL + 60500);
	assert_int_equal(back.entries[1].expires_ms, WALL + 61500);
	assert_int_equal(back.entries[2].expires_ms, cap);
	assert_string_equal(back.entries[2].key, "a/ghost"); /* nothing else changed */
	assert_int_equal(back.entries[2].bytes, 30 * GI);
	assert_int_equal(record_live_bytes(&back, WALL + 60499), 33 * GI);
	assert_int_equal(record_live_bytes(&back, cap - 1), 32 * GI);
	assert_int_equal(record_live_bytes(&back, cap), 0); /* it stops counting */
	assert_int_equal(record_items(&back, cap, 700, items), 0);
	assert_int_equal(record_items(&back, WALL, 700, items), 3);
	assert_int_equal(items[2].expires_ms, 700 + 61500); /* on the decision's clock too */
	assert_int_equal(record_prune(&back, cap, NULL, 0, 0, 0), 3);
	assert_int_equal(record_cap_expiry(&back, cap), 0);

	/* Written back capped: every reader of that version agrees. */
	assert_int_equal(record_cap_expiry(&r, cap), 1);
	lease = record_to_lease(&r, "gmg-system", "gpu-1", WALL);
	assert_int_equal(record_from_lease(lease, &back, err, sizeof(err)), 0);
	cJSON_Delete(lease);
	assert_int_equal(back.entries[2].expires_ms, WALL + 61500);
	record_free(&r);
	record_free(&back);
}

static void test_copy(void **state)
{
	struct record a, b;
	(void)state;
	record_init(&a);
	snprintf(a.rv, sizeof(a.rv), "%s", "12");
	assert_int_equal(record_put(&a, "a/p", "u", GI, WALL), 0);
	assert_int_equal(record_copy(&b, &a), 0);
	assert_int_equal(record_put(&b, "a/q", "v", GI, WALL), 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_dedupes_by_uid_then_key),
	    cmocka_unit_test(test_put_rejects_bad_input_and_caps),
	    cmocka_unit_test(test_prune_expired_and_settled),
	    cmocka_unit_test(test_items_and_live_bytes),
	    cmocka_unit_test(test_lease_round_trip),
	    cmocka_unit_test(test_parse_errors),
	    cmocka_unit_test(test_unseen_entries),
	    cmocka_unit_test(test_claim_entries),
	    cmocka_unit_test(test_read_keeps_entries_apart),
	    cmocka_unit_test(test_expiry_cap),
	    cmocka_unit_test(test_copy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
