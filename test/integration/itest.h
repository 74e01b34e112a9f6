/*
 * itest: cmocka helpers shared by the integration test binaries (header-only, static).
 * Include after <cmocka.h>.
 */
#ifndef GMG_TEST_ITEST_H
#define GMG_TEST_ITEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The world of the current group, for log dumps on failure. */
static struct world *itest_world;

#define ITEST_CHECK(cond, ...)                                                                     \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			if (itest_world)                                                           \
				world_dump_log(itest_world);                                       \
			fail_msg(__VA_ARGS__);                                                     \
		}                                                                                  \
	} while (0)

/*
 * Send body, require HTTP 200 with a well-formed AdmissionReview answer whose response.uid is
 * uid and whose allowed is `allowed` (-1: either). Returns the elapsed seconds; *a gets the
 * answer.
 */
static inline double itest_review(const struct world *w, const char *body, const char *uid,
                                  int allowed, struct review_answer *a)
{
	struct http_resp rs;
	int rc;
	ITEST_CHECK(body != NULL, "no review body (fixture missing?)");
	rc = world_review(w, body, &rs, a);
	ITEST_CHECK(rc == 0, "review %s: HTTP %ld (%s) body: %.300s", uid, rs.code, rs.error,
	            rs.body ? rs.body : "");
	ITEST_CHECK(a->well_formed, "review %s: answer not a well-formed AdmissionReview: %.300s",
	            uid, rs.body);
	ITEST_CHECK(!strcmp(a->uid, uid), "review %s: response.uid is \"%s\"", uid, a->uid);
	ITEST_CHECK(allowed < 0 || a->allowed == allowed,
	            "review %s: allowed=%d, expected %d; message: %s; warnings: %s", uid,
	            a->allowed, allowed, a->message, a->warnings);
	if (!a->allowed)
		ITEST_CHECK(a->code >= 400 && a->message[0],
		            "review %s: a denial needs status.code >= 400 and a message (code %d)",
		            uid, a->code);
	http_resp_free(&rs);
	return rs.seconds;
}

static inline void itest_contains(const char *hay, const char *needle, const char *what)
{
	ITEST_CHECK(hay && strstr(hay, needle), "%s: \"%s\" not found in: %s", what, needle,
	            hay ? hay : "(null)");
}

/* Start the world's binary or fail the group set-up. */
static inline int itest_start(struct world *w, unsigned max_page, const char *const *extra)
{
	if (world_init(w, max_page))
		return -1;
	itest_world = w;
	return world_start_gmg(w, extra, 30000);
}

#endif
