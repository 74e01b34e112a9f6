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

#include <cjson/cJSON.h>
#include <unistd.h>

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

/* ---- the watch cache's tests (W.cache_mode = "watch") ---- */

/* Wait until w's /readyz says the cache is synced, or fail. */
static inline void itest_wait_synced(const struct world *w, unsigned timeout_ms)
{
	double end = harness_now() + timeout_ms / 1000.0;
	char *body = NULL;

	for (;;) {
		free(body);
		body = NULL;
		long code = world_health_get(w, "/readyz", &body);
		if (code == 200 && body && strstr(body, "cache: synced"))
			break;
		ITEST_CHECK(harness_now() < end, "cache not synced in %u ms; /readyz: %s",
		            timeout_ms, body ? body : "(none)");
		usleep(50 * 1000);
	}
	free(body);
}

/* A pod object (JSON text, caller frees) named inference/name with metadata.uid pod_uid,
 * GPU_MEMORY_LIMIT limit, on node (NULL: unbound), phase. */
static inline char *itest_pod_json(const char *name, const char *pod_uid, const char *limit,
                                   const char *node, const char *phase)
{
	char *text = harness_pod_review("x", name, limit, node ? node : "n", 0), *out = NULL;
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(doc, "request"), "object");
	cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	free(text);
	if (md) {
		cJSON_DeleteItemFromObjectCaseSensitive(md, "uid");
		cJSON_AddStringToObject(md, "uid", pod_uid);
		cJSON_DeleteItemFromObjectCaseSensitive(md, "namespace");
		cJSON_AddStringToObject(md, "namespace", "inference");
		cJSON_DeleteItemFromObjectCaseSensitive(md, "generateName");
		cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
		cJSON_DeleteItemFromObjectCaseSensitive(spec, "nodeName");
		if (node)
			cJSON_AddStringToObject(spec, "nodeName", node);
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
		cJSON *st = cJSON_AddObjectToObject(obj, "status");
		cJSON_AddStringToObject(st, "phase", phase);
		out = cJSON_PrintUnformatted(obj);
	}
	cJSON_Delete(doc);
	return out;
}

/* Put that pod into w's API server test double. 0 / -1. */
static inline int itest_put_pod(struct world *w, const char *name, const char *pod_uid,
                                const char *limit, const char *node, const char *phase)
{
	char *json = itest_pod_json(name, pod_uid, limit, node, phase);
	int rc = json ? apiserver_double_put_pod(w->api, "inference", json) : -1;
	free(json);
	return rc;
}

/* Replace request.object.metadata.uid of a review (text freed, new text returned). */
static inline char *itest_with_object_uid(char *text, const char *pod_uid)
{
	cJSON *doc = text ? cJSON_Parse(text) : NULL;
	cJSON *md = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "request"),
	                                     "object"),
	    "metadata");
	char *out = NULL;
	free(text);
	if (md) {
		cJSON_DeleteItemFromObjectCaseSensitive(md, "uid");
		cJSON_AddStringToObject(md, "uid", pod_uid);
		out = cJSON_PrintUnformatted(doc);
	}
	cJSON_Delete(doc);
	return out;
}

/* A pod CREATE review (harness_pod_review) whose pod has metadata.uid pod_uid. */
static inline char *itest_pod_review(const char *uid, const char *name, const char *pod_uid,
                                     const char *limit, const char *node, int dry_run)
{
	return itest_with_object_uid(harness_pod_review(uid, name, limit, node, dry_run), pod_uid);
}

#endif
