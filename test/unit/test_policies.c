/*
 * Unit tests for lib/cluster/policies: the watch cache's store of GPUMemoryPolicy objects, fed
 * as the informer feeds it (objects as the API server serves them, or as a test double or a
 * buggy server might: the store keeps what it cannot use, with its error, and must stay sane).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "policies.h"

struct seen {
	char name[GPUPOLICY_NAME_MAX];
	long long generation;
	int usable;
};

static void record(void *ctx, const struct policies_object *o)
{
	struct seen *s = ctx;
	snprintf(s->name, sizeof(s->name), "%s", o->name);
	s->generation = o->generation;
	s->usable = o->p != NULL;
}

/* The generation kept for an object (the status writer's observedGeneration, which the CRD
 * wants >= 0): the object's when it is an integer in int64's range, else 0; never a double
 * cast out of range (undefined behaviour; LLONG_MIN on x86). */
static void test_generation_out_of_range(void **state)
{
	static const char *const gens[] = {"1e300", "-1e300", "-3", "9.3e18", "2.5"};
	struct policies *s = policies_new();

	assert_non_null(s);
	for (size_t i = 0; i < sizeof(gens) / sizeof(gens[0]); i++) {
		char json[256];
		struct seen seen = {0};
		snprintf(json, sizeof(json),
		         "{\"metadata\":{\"name\":\"g\",\"generation\":%s},\"spec\":{}}", gens[i]);
		cJSON *o = cJSON_Parse(json);
		assert_non_null(o);
		assert_int_equal(policies_apply(s, WATCH_ADDED, o), 0);
		cJSON_Delete(o);
		policies_each(s, record, &seen);
		assert_string_equal(seen.name, "g");
		assert_false(seen.usable); /* gpupolicy_parse refuses the generation */
		if (seen.generation != 0)
			fail_msg("generation %s kept as %lld, want 0", gens[i], seen.generation);
	}
	policies_free(s);
	(void)state;
}

/* policies_rdlock_synced: what a reader decides on is the synced state under the lock it reads
 * with: not synced before the first list, synced after a complete relist, not synced after an
 * incomplete one (and the read lock is held in every case: a writer would wait). */
static void test_rdlock_synced(void **state)
{
	struct policies *s = policies_new();

	assert_non_null(s);
	assert_int_equal(policies_rdlock_synced(s), 0);
	policies_unlock(s);
	policies_resync_begin(s);
	policies_resync_end(s, 1);
	assert_int_equal(policies_rdlock_synced(s), 1);
	policies_unlock(s);
	policies_resync_begin(s);
	policies_resync_end(s, 0);
	assert_int_equal(policies_rdlock_synced(s), 0);
	policies_unlock(s);
	policies_crd_missing(s);
	assert_int_equal(policies_rdlock_synced(s), 1);
	policies_unlock(s);
	policies_free(s);
	(void)state;
}

static void put(struct policies *s, enum watch_event_type t, const char *json)
{
	cJSON *o = cJSON_Parse(json);
	assert_non_null(o);
	assert_int_equal(policies_apply(s, t, o), 0);
	cJSON_Delete(o);
}

static unsigned need_of(const char *json)
{
	cJSON *o = cJSON_Parse(json);
	unsigned n = policies_pod_attrs_of(o);
	cJSON_Delete(o);
	return n;
}

#define P(name, tiers) "{\"metadata\":{\"name\":\"" name "\"},\"spec\":{\"tiers\":[" tiers "]}}"
#define BY_NS          "{\"name\":\"a\",\"namespaces\":[\"ml\"],\"maxShare\":0.5}"
#define BY_PC          "{\"name\":\"b\",\"priorityClassNames\":[\"high\"],\"maxShare\":0.5}"
#define BY_LABELS      "{\"name\":\"c\",\"podSelector\":{\"matchLabels\":{\"t\":\"x\"}}}"

/* Which pod attributes the tiers select by (the watch cache keeps only those, issue 22):
 * namespaces need none; an invalid policy applies nowhere, so needs none, stored or not. */
static void test_pod_attrs(void **state)
{
	struct policies *s = policies_new();
	(void)state;

	assert_non_null(s);
	assert_int_equal(policies_pod_attrs(s), 0);
	assert_int_equal(need_of(P("n", BY_NS)), 0);
	assert_int_equal(need_of(P("p", BY_NS "," BY_PC)), POLICIES_NEED_PRIORITY);
	assert_int_equal(need_of(P("l", BY_LABELS)), POLICIES_NEED_LABELS);
	assert_int_equal(need_of("{\"metadata\":{\"name\":\"x\"}}"), 0);
	assert_int_equal(need_of("[1]"), 0);
	/* an object that does not parse applies nowhere: needs nothing before it is applied
	 * either (wanting for it would relist every pod at each of its events) */
	assert_int_equal(need_of(P("bad", BY_LABELS ",{\"name\":\"d\"}")), 0);
	assert_int_equal(
	    need_of(P("bad", "{\"name\":\"c\",\"priorityClassNames\":[\"h\"],\"maxShare\":2}")), 0);
	put(s, WATCH_ADDED, P("n", BY_NS));
	assert_int_equal(policies_pod_attrs(s), 0);
	put(s, WATCH_ADDED, P("p", BY_PC));
	assert_int_equal(policies_pod_attrs(s), POLICIES_NEED_PRIORITY);
	put(s, WATCH_ADDED, P("l", BY_LABELS));
	assert_int_equal(policies_pod_attrs(s), POLICIES_NEED_PRIORITY | POLICIES_NEED_LABELS);
	put(s, WATCH_DELETED, P("p", BY_PC));
	assert_int_equal(policies_pod_attrs(s), POLICIES_NEED_LABELS);
	/* invalid (a tier without criterion beside it): kept with its error, needs nothing */
	put(s, WATCH_MODIFIED, P("l", BY_LABELS ",{\"name\":\"d\"}"));
	assert_int_equal(policies_pod_attrs(s), 0);
	policies_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_generation_out_of_range),
	    cmocka_unit_test(test_rdlock_synced),
	    cmocka_unit_test(test_pod_attrs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
