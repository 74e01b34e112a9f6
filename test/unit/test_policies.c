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

/* Each generation says whether the store was synced when it was published: not before the
 * first list, synced after a complete relist, not after an incomplete one, synced when the CRD
 * is missing; one acquired before a change keeps its state. */
static void test_generation_synced(void **state)
{
	struct policies *s = policies_new();

	assert_non_null(s);
	const struct policies_gen *g0 = policies_acquire(s);
	assert_non_null(g0);
	assert_int_equal(policies_gen_synced(g0), 0);
	policies_resync_begin(s);
	policies_resync_end(s, 1);
	const struct policies_gen *g1 = policies_acquire(s);
	assert_int_equal(policies_gen_synced(g1), 1);
	assert_int_equal(policies_gen_synced(g0), 0); /* as published */
	policies_resync_begin(s);
	policies_resync_end(s, 0);
	const struct policies_gen *g2 = policies_acquire(s);
	assert_int_equal(policies_gen_synced(g2), 0);
	assert_int_equal(policies_gen_synced(g1), 1);
	policies_crd_missing(s);
	const struct policies_gen *g3 = policies_acquire(s);
	assert_int_equal(policies_gen_synced(g3), 1);
	assert_int_equal(policies_gen_synced(NULL), 0);
	policies_release(g0);
	policies_release(g1);
	policies_release(g2);
	policies_release(g3);
	policies_release(NULL);
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

/* A generation keeps the policies it lists, in name order, while the writer replaces and deletes
 * them and frees the store's copies (under ASan a use after free would show): a reader holds a
 * reference, no lock; the next acquire sees the change. An invalid policy is in no generation. */
static void test_generation_outlives_changes(void **state)
{
	struct policies *s = policies_new();
	const struct gpupolicy *sel[4];
	(void)state;

	assert_non_null(s);
	put(s, WATCH_ADDED, P("b", BY_NS));
	put(s, WATCH_ADDED, P("a", BY_PC));
	put(s, WATCH_ADDED, P("bad", BY_LABELS ",{\"name\":\"d\"}"));
	const struct policies_gen *g = policies_acquire(s);
	assert_int_equal(policies_gen_selecting(g, NULL, sel, 4), 2);
	assert_string_equal(sel[0]->name, "a");
	assert_string_equal(sel[1]->name, "b");
	assert_int_equal(policies_gen_selecting(g, NULL, sel, 1), 1); /* the cap */
	put(s, WATCH_MODIFIED, P("a", BY_LABELS));
	put(s, WATCH_DELETED, P("b", BY_NS));
	/* the old generation still lists both, as they were */
	assert_int_equal(policies_gen_selecting(g, NULL, sel, 4), 2);
	assert_string_equal(sel[1]->name, "b");
	assert_int_equal(sel[0]->tiers[0].n_priority_classes, 1);
	const struct policies_gen *h = policies_acquire(s);
	assert_int_equal(policies_gen_selecting(h, NULL, sel, 4), 1);
	assert_string_equal(sel[0]->name, "a");
	assert_int_equal(sel[0]->tiers[0].n_priority_classes, 0);
	policies_release(g);
	policies_free(s); /* h outlives the store */
	assert_string_equal(sel[0]->name, "a");
	policies_release(h);
}

/* The store's selection is gpupolicy_select over its generation: at most GPUPOLICY_SELECT_MAX,
 * the first in name order, whatever the order of arrival or the room given; the status
 * writer's (policies_gen_selecting_all) counts past the cap. */
static void test_selecting_cap(void **state)
{
	enum { N = GPUPOLICY_SELECT_MAX + 1 };
	struct policies *s = policies_new();
	const struct gpupolicy *sel[N + 1];
	char json[128], want[8];
	(void)state;

	assert_non_null(s);
	for (int i = N - 1; i >= 0; i--) { /* p64 first, p00 last */
		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"p%02d\"},\"spec\":{}}", i);
		put(s, WATCH_ADDED, json);
	}
	const struct policies_gen *g = policies_acquire(s);
	assert_int_equal(policies_gen_selecting(g, NULL, sel, N + 1), GPUPOLICY_SELECT_MAX);
	for (int i = 0; i < GPUPOLICY_SELECT_MAX; i++) {
		snprintf(want, sizeof(want), "p%02d", i);
		assert_string_equal(sel[i]->name, want);
	}
	assert_int_equal(policies_gen_selecting_all(g, NULL, sel, N + 1), N);
	assert_string_equal(sel[N - 1]->name, "p64");
	assert_int_equal(policies_gen_selecting(NULL, NULL, sel, N + 1), 0);
	policies_release(g);
	policies_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_generation_out_of_range),
	    cmocka_unit_test(test_generation_synced),
	    cmocka_unit_test(test_generation_outlives_changes),
	    cmocka_unit_test(test_selecting_cap),
	    cmocka_unit_test(test_pod_attrs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
