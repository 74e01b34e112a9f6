/*
 * Unit tests for lib/cluster/policystatus: the pure parts (the Lease decision as a function of
 * what was observed, when, and who asks; the status patch). The thread is covered by
 * test/integration/test_policy_status.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policystatus.h"

static cJSON *lease(const char *rv, const char *holder, int duration)
{
	char text[512];
	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"" POLICYSTATUS_LEASE_NAME
	         "\",\"resourceVersion\":\"%s\"},"
	         "\"spec\":{\"holderIdentity\":\"%s\",\"leaseDurationSeconds\":%d,"
	         "\"renewTime\":\"2000-01-01T00:00:00.000000Z\"}}",
	         rv, holder, duration);
	cJSON *o = cJSON_Parse(text);
	assert_non_null(o);
	return o;
}

static void test_absent_is_created(void **state)
{
	struct policystatus_lease l = {0};
	(void)state;
	policystatus_observe(&l, NULL, 100.0);
	assert_int_equal(policystatus_decide(&l, 100.0, "me"), POLICYSTATUS_CREATE);
}

static void test_own_lease_is_renewed(void **state)
{
	struct policystatus_lease l = {0};
	cJSON *o = lease("10", "me", 15);
	(void)state;
	policystatus_observe(&l, o, 100.0);
	assert_int_equal(policystatus_decide(&l, 100.0, "me"), POLICYSTATUS_RENEW);
	/* Even long after: the holder renews, whatever the remote renewTime says. */
	assert_int_equal(policystatus_decide(&l, 1000.0, "me"), POLICYSTATUS_RENEW);
	cJSON_Delete(o);
}

/* Another's Lease: wait until leaseDurationSeconds passed on OUR clock since its
 * resourceVersion last changed; a renewal seen restarts the wait. The remote renewTime (year
 * 2000 here) is not trusted. */
static void test_other_waits_then_takes_over(void **state)
{
	struct policystatus_lease l = {0};
	cJSON *a = lease("10", "other", 15), *b = lease("11", "other", 15);
	(void)state;
	policystatus_observe(&l, a, 100.0);
	assert_int_equal(policystatus_decide(&l, 100.0, "me"), POLICYSTATUS_WAIT);
	assert_int_equal(policystatus_decide(&l, 114.9, "me"), POLICYSTATUS_WAIT);
	/* Seen again unchanged: the observation time stays. */
	policystatus_observe(&l, a, 110.0);
	assert_int_equal(policystatus_decide(&l, 115.0, "me"), POLICYSTATUS_TAKEOVER);
	/* Renewed (new resourceVersion) at 112: wait again from there. */
	policystatus_observe(&l, b, 112.0);
	assert_int_equal(policystatus_decide(&l, 115.0, "me"), POLICYSTATUS_WAIT);
	assert_int_equal(policystatus_decide(&l, 126.9, "me"), POLICYSTATUS_WAIT);
	assert_int_equal(policystatus_decide(&l, 127.0, "me"), POLICYSTATUS_TAKEOVER);
	cJSON_Delete(a);
	cJSON_Delete(b);
}

static void test_duration_from_lease_and_release(void **state)
{
	struct policystatus_lease l = {0};
	cJSON *a = lease("10", "other", 60), *r = lease("12", "", 15), *z = lease("13", "other", 0);
	(void)state;
	policystatus_observe(&l, a, 0.0);
	assert_int_equal(policystatus_decide(&l, 59.0, "me"), POLICYSTATUS_WAIT);
	assert_int_equal(policystatus_decide(&l, 60.0, "me"), POLICYSTATUS_TAKEOVER);
	/* Released (holder ""): taken at once. */
	policystatus_observe(&l, r, 70.0);
	assert_int_equal(policystatus_decide(&l, 70.0, "me"), POLICYSTATUS_TAKEOVER);
	/* No duration: ours. */
	policystatus_observe(&l, z, 80.0);
	assert_int_equal(policystatus_decide(&l, 80.0 + POLICYSTATUS_LEASE_S - 0.1, "me"),
	                 POLICYSTATUS_WAIT);
	assert_int_equal(policystatus_decide(&l, 80.0 + POLICYSTATUS_LEASE_S, "me"),
	                 POLICYSTATUS_TAKEOVER);
	cJSON_Delete(a);
	cJSON_Delete(r);
	cJSON_Delete(z);
}

static char *patch_text(const struct policystatus_entry *e, const char *t)
{
	cJSON *p = policystatus_patch(e, t);
	assert_non_null(p);
	char *s = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	assert_non_null(s);
	return s;
}

static void test_patch_ready(void **state)
{
	struct policystatus_entry e = {.name = "p", .generation = 7, .valid = 1, .nodes = 3};
	(void)state;
	char *s = patch_text(&e, "2026-11-30T16:00:00Z");
	assert_string_equal(
	    s,
	    "{\"status\":{\"observedGeneration\":7,\"nodes\":3,\"conditions\":[{\"type\":"
	    "\"Ready\",\"status\":\"True\",\"reason\":\"Applied\",\"message\":\"applied to 3 "
	    "nodes\",\"observedGeneration\":7,\"lastTransitionTime\":\"2026-11-30T16:00:00Z\"}]}}");
	free(s);
	e.nodes = 1;
	s = patch_text(&e, "x");
	assert_non_null(strstr(s, "\"applied to 1 node\""));
	free(s);
}

static void test_patch_invalid(void **state)
{
	struct policystatus_entry e = {.name = "p", .generation = 2, .valid = 0, .nodes = 0};
	(void)state;
	snprintf(e.error, sizeof(e.error), "spec.threshold: must be a number in (0, 1], got 1.5");
	char *s = patch_text(&e, "2026-11-30T16:00:00Z");
	assert_string_equal(
	    s,
	    "{\"status\":{\"observedGeneration\":2,\"nodes\":0,\"conditions\":[{\"type\":"
	    "\"Ready\",\"status\":\"False\",\"reason\":\"Invalid\",\"message\":\"spec.threshold: "
	    "must be a number in (0, 1], got 1.5\",\"observedGeneration\":2,"
	    "\"lastTransitionTime\":\"2026-11-30T16:00:00Z\"}]}}");
	free(s);
}

static void test_rfc3339_and_identity(void **state)
{
	char buf[POLICYSTATUS_TIME_MAX], id[POLICYSTATUS_IDENTITY_MAX];
	(void)state;
	policystatus_rfc3339(1796054400LL, buf, sizeof(buf));
	assert_string_equal(buf, "2026-11-30T16:00:00Z");
	setenv("POD_NAME", "gmg-7d9f-abcde", 1);
	policystatus_identity(id, sizeof(id));
	assert_string_equal(id, "gmg-7d9f-abcde");
	unsetenv("POD_NAME");
	policystatus_identity(id, sizeof(id));
	assert_non_null(strchr(id, '_')); /* hostname_pid */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_absent_is_created),
	    cmocka_unit_test(test_own_lease_is_renewed),
	    cmocka_unit_test(test_other_waits_then_takes_over),
	    cmocka_unit_test(test_duration_from_lease_and_release),
	    cmocka_unit_test(test_patch_ready),
	    cmocka_unit_test(test_patch_invalid),
	    cmocka_unit_test(test_rfc3339_and_identity),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
