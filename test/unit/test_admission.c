/* Unit tests for lib/admission: decode every fixture, odd shapes, and encode on every path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "fixture.h"

/* Decode a fixture after applying edit (may be NULL) to its parsed form. */
static int decode_edited(const char *fixture, void (*edit)(cJSON *request), cJSON **review,
                         struct admission_request *req, char *err, size_t errlen)
{
	size_t len;
	char *body = fixture_read(fixture, &len);
	cJSON *j = cJSON_Parse(body);
	char *out;
	int rc;

	assert_non_null(j);
	if (edit != NULL)
		edit(cJSON_GetObjectItemCaseSensitive(j, "request"));
	out = cJSON_PrintUnformatted(j);
	assert_non_null(out);
	rc = admission_decode(out, strlen(out), review, req, err, errlen);
	cJSON_free(out);
	cJSON_Delete(j);
	free(body);
	return rc;
}

static int decode_str(const char *s, cJSON **review, struct admission_request *req, char *err,
                      size_t errlen)
{
	return admission_decode(s, strlen(s), review, req, err, errlen);
}

struct expect {
	const char *file, *uid, *ns, *name, *node, *user;
	enum admission_operation op;
	enum admission_target target;
	int dry_run, generated, is_node;
};

static const struct expect fixtures[] = {
    {"review-pod-create-unscheduled.json", "a1b2c3d4-0001-4000-8000-000000000001", "inference",
     "llama-8b-6d5f9c7b8-x2k4q", "", "system:serviceaccount:kube-system:replicaset-controller",
     ADMISSION_OP_CREATE, ADMISSION_POD, 0, 0, 0},
    {"review-pod-create-nodename.json", "a1b2c3d4-0002-4000-8000-000000000002", "inference",
     "embedder-0", "", NULL, ADMISSION_OP_CREATE, ADMISSION_POD, 0, 0, 0},
    {"review-binding-create.json", "a1b2c3d4-0003-4000-8000-000000000003", "inference",
     "llama-8b-6d5f9c7b8-x2k4q", "gpu-node-a", "system:kube-scheduler", ADMISSION_OP_CREATE,
     ADMISSION_BINDING, 0, 0, 1},
    {"review-binding-create-target-kind-omitted.json", "a1b2c3d4-0004-4000-8000-000000000004",
     "inference", "llama-8b-6d5f9c7b8-x2k4q", "gpu-node-a", "system:kube-scheduler",
     ADMISSION_OP_CREATE, ADMISSION_BINDING, 0, 0, 1},
    {"review-pod-create-dryrun.json", "a1b2c3d4-0005-4000-8000-000000000005", "inference",
     "embedder-dry", "", "alice@example.com", ADMISSION_OP_CREATE, ADMISSION_POD, 1, 0, 0},
    {"review-pod-update.json", "a1b2c3d4-0006-4000-8000-000000000006", "inference", "embedder-0",
     "", "system:node:gpu-node-a", ADMISSION_OP_UPDATE, ADMISSION_POD, 0, 0, 0},
    {"review-pod-create-init-and-sidecar.json", "a1b2c3d4-0007-4000-8000-000000000007", "inference",
     "rag-0", "", NULL, ADMISSION_OP_CREATE, ADMISSION_POD, 0, 0, 0},
};

#define N_FIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

static void test_every_fixture(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_FIXTURES; i++) {
		const struct expect *e = &fixtures[i];
		struct admission_request req;
		cJSON *review = NULL;
		char err[256];
		size_t len;
		char *body = fixture_read(e->file, &len);

		assert_int_equal(admission_decode(body, len, &review, &req, err, sizeof(err)), 0);
		assert_non_null(review);
		assert_string_equal(req.uid, e->uid);
		assert_int_equal(req.operation, e->op);
		assert_int_equal(req.target, e->target);
		assert_string_equal(req.namespace_, e->ns);
		assert_string_equal(req.name, e->name);
		assert_int_equal(req.name_is_generated, e->generated);
		assert_int_equal(req.dry_run, e->dry_run);
		assert_string_equal(req.binding_node, e->node);
		assert_int_equal(req.binding_target_is_node, e->is_node);
		if (e->user != NULL)
			assert_string_equal(req.username, e->user);
		assert_non_null(req.object);
		assert_ptr_equal(
		    req.object, cJSON_GetObjectItemCaseSensitive(
		                    cJSON_GetObjectItemCaseSensitive(review, "request"), "object"));
		cJSON_Delete(review);
		free(body);
	}
}

/* Every review-*.json in test/data is in the table above. */
static void test_fixture_table_complete(void **state)
{
	const char *dir = getenv("GMG_TEST_DATA");
	DIR *d = opendir(dir ? dir : "test/data");
	struct dirent *de;

	(void)state;
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		int found = 0;
		if (strncmp(de->d_name, "review-", 7) != 0)
			continue;
		for (size_t i = 0; i < N_FIXTURES; i++)
			found |= strcmp(fixtures[i].file, de->d_name) == 0;
		if (!found)
			fail_msg("fixture %s is not tested", de->d_name);
	}
	closedir(d);
}

static void drop_optional(cJSON *r)
{
	cJSON_DeleteItemFromObjectCaseSensitive(r, "requestResource");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "requestKind");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "requestSubResource");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "options");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "userInfo");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "oldObject");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "dryRun");
}

static void test_missing_optional_fields(void **state)
{
	struct admission_request req;
	cJSON *review = NULL;
	char err[256];

	(void)state;
	assert_int_equal(decode_edited("review-binding-create.json", drop_optional, &review, &req,
	                               err, sizeof(err)),
	                 0);
	assert_int_equal(req.target, ADMISSION_BINDING);
	assert_string_equal(req.binding_node, "gpu-node-a");
	assert_string_equal(req.username, "");
	assert_int_equal(req.dry_run, 0);
	cJSON_Delete(review);
	assert_int_equal(decode_edited("review-pod-create-nodename.json", drop_optional, &review,
	                               &req, err, sizeof(err)),
	                 0);
	assert_int_equal(req.target, ADMISSION_POD);
	cJSON_Delete(review);
}

/* Only uid: everything else is absent and still decodes. */
static void test_only_uid(void **state)
{
	struct admission_request req;
	cJSON *review = NULL;
	char err[256];

	(void)state;
	assert_int_equal(
	    decode_str("{\"request\":{\"uid\":\"u-1\"}}", &review, &req, err, sizeof(err)), 0);
	assert_string_equal(req.uid, "u-1");
	assert_int_equal(req.target, ADMISSION_OTHER);
	assert_int_equal(req.operation, ADMISSION_OP_UNKNOWN);
	assert_null(req.object);
	assert_string_equal(req.name, "");
	cJSON_Delete(review);
}

static void only_request_resource(cJSON *r)
{
	cJSON_DeleteItemFromObjectCaseSensitive(r, "resource");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "kind");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "subResource");
}

static void test_request_fields_stand_in(void **state)
{
	struct admission_request req;
	cJSON *review = NULL;
	char err[256];

	(void)state;
	assert_int_equal(decode_edited("review-binding-create.json", only_request_resource, &review,
	                               &req, err, sizeof(err)),
	                 0);
	assert_int_equal(req.target, ADMISSION_BINDING);
	cJSON_Delete(review);
}

static void generate_name_only(cJSON *r)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(r, "object"), "metadata");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "name");
	cJSON_DeleteItemFromObjectCaseSensitive(meta, "name");
	cJSON_DeleteItemFromObjectCaseSensitive(meta, "namespace");
}

static void test_generate_name_only(void **state)
{
	struct admission_request req;
	cJSON *review = NULL;
	char err[256];

	(void)state;
	assert_int_equal(decode_edited("review-pod-create-unscheduled.json", generate_name_only,
	                               &review, &req, err, sizeof(err)),
	                 0);
	assert_string_equal(req.name, "llama-8b-6d5f9c7b8-");
	assert_int_equal(req.name_is_generated, 1);
	/* Namespace only in the request. */
	assert_string_equal(req.namespace_, "inference");
	cJSON_Delete(review);
}

static void name_from_metadata(cJSON *r)
{
	cJSON_DeleteItemFromObjectCaseSensitive(r, "name");
	cJSON_DeleteItemFromObjectCaseSensitive(r, "namespace");
}

static void test_name_and_namespace_from_object(void **state)
{
	struct admission_request req;
	cJSON *review = NULL;
	char err[256];

	(void)state;
	assert_int_equal(decode_edited("review-pod-create-nodename.json", name_from_metadata,
	                               &review, &req, err, sizeof(err)),
	                 0);
	assert_string_equal(req.name, "embedder-0");
	assert_int_equal(req.name_is_generated, 0);
	assert_string_equal(req.namespace_, "inference");
	cJSON_Delete(review);
}

static void request_namespace_wins(cJSON *r)
{
	cJSON *meta = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(r, "object"), "metadata");
	cJSON_DeleteItemFromObjectCaseSensitive(meta, "namespace");
	cJSON_AddStringToObject(meta, "namespace", "other");
}

static void test_request_namespace_wins(void **state)
{
	struct admission_request req;
	cJSON *review = NULL;
	char err[256];

	(void)state;
	assert_int_equal(decode_edited("review-pod-create-nodename.json", request_namespace_wins,
	                               &review, &req, err, sizeof(err)),
	                 0);
	assert_string_equal(req.namespace_, "inference");
	cJSON_Delete(review);
}

/* Each string is a request body (uid "u") and the target it must classify as. */
static void test_classification(void **state)
{
	static const struct {
		const char *request;
		enum admission_target target;
		int is_node;
	} cases[] = {
	    {"\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
	     "\"subResource\":\"status\"",
	     ADMISSION_OTHER, 0},
	    {"\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
	     "\"subResource\":\"eviction\",\"kind\":{\"group\":\"policy\",\"kind\":\"Eviction\"}",
	     ADMISSION_OTHER, 0},
	    {"\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"bindings\"},"
	     "\"object\":{\"target\":{\"kind\":\"\",\"name\":\"n1\"}}",
	     ADMISSION_BINDING, 1},
	    {"\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Binding\"},"
	     "\"object\":{\"target\":{\"name\":\"n1\"}}",
	     ADMISSION_BINDING, 1},
	    {"\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
	     "\"subResource\":\"binding\",\"object\":{\"target\":{\"kind\":\"Pod\",\"name\":\"x\"}"
	     "}",
	     ADMISSION_BINDING, 0},
	    {"\"resource\":{\"group\":\"apps\",\"version\":\"v1\",\"resource\":\"pods\"}",
	     ADMISSION_OTHER, 0},
	    {"\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"nodes\"}",
	     ADMISSION_OTHER, 0},
	    {"\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"}", ADMISSION_POD, 0},
	    {"\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
	     "\"subResource\":\"\"",
	     ADMISSION_POD, 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char body[1024];
		struct admission_request req;
		cJSON *review = NULL;
		char err[256];

		snprintf(body, sizeof(body), "{\"request\":{\"uid\":\"u\",%s}}", cases[i].request);
		if (decode_str(body, &review, &req, err, sizeof(err)) != 0)
			fail_msg("case %zu: %s", i, err);
		if (req.target != cases[i].target)
			fail_msg("case %zu: target %d, want %d", i, req.target, cases[i].target);
		assert_int_equal(req.binding_target_is_node, cases[i].is_node);
		cJSON_Delete(review);
	}
}

static void test_trailing_garbage(void **state)
{
	static const char *bad[] = {
	    "{\"request\":{\"uid\":\"u\"}} xyz",
	    "{\"request\":{\"uid\":\"u\"}}{}",
	    "{\"request\":{\"uid\":\"u\"}",
	    "",
	    "nul",
	};
	struct admission_request req;
	cJSON *review = NULL;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(decode_str(bad[i], &review, &req, err, sizeof(err)),
		                 ADMISSION_EJSON);
		assert_null(review);
		assert_true(strlen(err) > 0);
	}
	/* Whitespace after the value is fine. */
	assert_int_equal(
	    decode_str("{\"request\":{\"uid\":\"u\"}}\n \r\n", &review, &req, err, sizeof(err)), 0);
	cJSON_Delete(review);
	/* An embedded NUL would hide what follows it from the parser. */
	const char nul[] = "{\"request\":{\"uid\":\"u\"}}\0garbage";
	assert_int_equal(admission_decode(nul, sizeof(nul) - 1, &review, &req, err, sizeof(err)),
	                 ADMISSION_EJSON);
	/* A body that is not NUL-terminated at len is decoded from len bytes only. */
	const char unterminated[] = "{\"request\":{\"uid\":\"u\"}}XXXX";
	assert_int_equal(admission_decode(unterminated, sizeof(unterminated) - 5, &review, &req,
	                                  err, sizeof(err)),
	                 0);
	assert_string_equal(req.uid, "u");
	cJSON_Delete(review);
}

static void test_case_different_keys(void **state)
{
	static const char *bad[] = {
	    "{\"request\":{\"UID\":\"u\"}}",
	    "{\"Request\":{\"uid\":\"u\"}}",
	    "{\"request\":{\"Uid\":\"u\"}}",
	};
	struct admission_request req;
	cJSON *review = NULL;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(decode_str(bad[i], &review, &req, err, sizeof(err)),
		                 ADMISSION_ESHAPE);
		assert_string_equal(req.uid, "");
		assert_null(review);
	}
	/* A case-different "Name" is ignored, not taken for the name. */
	assert_int_equal(decode_str("{\"request\":{\"uid\":\"u\",\"Name\":\"x\"}}", &review, &req,
	                            err, sizeof(err)),
	                 0);
	assert_string_equal(req.name, "");
	cJSON_Delete(review);
}

/* Only admission.k8s.io/v1 is served: another version is refused without reading the uid, so
 * the webhook answers 400 instead of a v1 envelope the API server would reject. */
static void test_other_versions_refused(void **state)
{
	static const char *const versions[] = {"admission.k8s.io/v1beta1", "admission.k8s.io/v2",
	                                       "v1", "admission.k8s.io/V1"};
	size_t len;
	char *fixture = fixture_read("review-binding-create.json", &len);

	(void)state;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		cJSON *j = cJSON_Parse(fixture), *review = NULL;
		struct admission_request req;
		char err[256] = "";
		assert_non_null(j);
		cJSON_ReplaceItemInObjectCaseSensitive(j, "apiVersion",
		                                       cJSON_CreateString(versions[i]));
		char *body = cJSON_PrintUnformatted(j);
		int rc = admission_decode(body, strlen(body), &review, &req, err, sizeof(err));
		if (rc != ADMISSION_ESHAPE)
			fail_msg("%s: rc %d (%s)", versions[i], rc, err);
		assert_null(review);
		assert_string_equal(req.uid, ""); /* nothing to echo: a 400, not an answer */
		assert_non_null(strstr(err, versions[i]));
		assert_non_null(strstr(err, "admissionReviewVersions"));
		cJSON_free(body);
		cJSON_Delete(j);
	}
	free(fixture);
}

static void test_odd_types(void **state)
{
	static const struct {
		const char *body;
		int rc;
		const char *uid; /* filled on ESHAPE when readable */
	} cases[] = {
	    {"[]", ADMISSION_ESHAPE, ""},
	    {"null", ADMISSION_ESHAPE, ""},
	    {"42", ADMISSION_ESHAPE, ""},
	    {"{\"request\":[]}", ADMISSION_ESHAPE, ""},
	    {"{\"request\":{\"uid\":42}}", ADMISSION_ESHAPE, ""},
	    {"{\"request\":{\"uid\":\"\"}}", ADMISSION_ESHAPE, ""},
	    {"{\"request\":{\"uid\":null}}", ADMISSION_ESHAPE, ""},
	    {"{\"kind\":\"Pod\",\"request\":{\"uid\":\"u\"}}", ADMISSION_ESHAPE, "u"},
	    {"{\"request\":{\"uid\":\"u\",\"name\":7}}", ADMISSION_ESHAPE, "u"},
	    {"{\"request\":{\"uid\":\"u\",\"namespace\":{}}}", ADMISSION_ESHAPE, "u"},
	    {"{\"request\":{\"uid\":\"u\",\"dryRun\":\"yes\"}}", ADMISSION_ESHAPE, "u"},
	    {"{\"request\":{\"uid\":\"u\",\"object\":\"pod\"}}", ADMISSION_ESHAPE, "u"},
	    {"{\"request\":{\"uid\":\"u\",\"operation\":[]}}", ADMISSION_ESHAPE, "u"},
	    {"{\"request\":{\"uid\":\"u\",\"subResource\":\"binding\",\"resource\":{\"resource\":"
	     "\"pods\"},\"object\":{\"target\":[1]}}}",
	     ADMISSION_ESHAPE, "u"},
	    {"{\"request\":{\"uid\":\"u\",\"object\":{\"metadata\":{\"name\":1e400}}}}",
	     ADMISSION_ESHAPE, "u"},
	    /* Odd types in fields the decision does not use are ignored. */
	    {"{\"request\":{\"uid\":\"u\",\"userInfo\":5,\"options\":\"x\",\"resource\":7}}", 0,
	     "u"},
	    {"{\"request\":{\"uid\":\"u\",\"object\":null,\"dryRun\":null}}", 0, "u"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct admission_request req;
		cJSON *review = NULL;
		char err[256] = "";
		int rc = decode_str(cases[i].body, &review, &req, err, sizeof(err));

		if (rc != cases[i].rc)
			fail_msg("case %zu (%s): rc %d want %d (%s)", i, cases[i].body, rc,
			         cases[i].rc, err);
		assert_string_equal(req.uid, cases[i].uid);
		if (rc != 0) {
			assert_null(review);
			assert_null(req.object);
			assert_true(strlen(err) > 0);
		}
		cJSON_Delete(review);
	}
}

static void test_huge_inputs(void **state)
{
	struct admission_request req;
	cJSON *review = NULL;
	char err[256];
	size_t n = ADMISSION_BODY_MAX + 16;
	char *big = malloc(n + 1);

	(void)state;
	assert_non_null(big);
	/* Too long uid: refused, and not echoed cut. */
	memset(big, 0, n + 1);
	strcpy(big, "{\"request\":{\"uid\":\"");
	memset(big + strlen(big), 'u', ADMISSION_UID_MAX + 1);
	strcat(big, "\"}}");
	assert_int_equal(decode_str(big, &review, &req, err, sizeof(err)), ADMISSION_ESHAPE);
	assert_string_equal(req.uid, "");

	/* Name over 253 bytes. */
	memset(big, 0, n + 1);
	strcpy(big, "{\"request\":{\"uid\":\"u\",\"name\":\"");
	memset(big + strlen(big), 'n', ADMISSION_NAME_MAX + 1);
	strcat(big, "\"}}");
	assert_int_equal(decode_str(big, &review, &req, err, sizeof(err)), ADMISSION_ESHAPE);
	assert_string_equal(req.uid, "u");

	/* Over the body cap: refused before parsing. */
	memset(big, ' ', n);
	big[n] = '\0';
	assert_int_equal(admission_decode(big, n, &review, &req, err, sizeof(err)),
	                 ADMISSION_EJSON);

	/* Nesting past cJSON's limit. */
	memset(big, 0, n + 1);
	strcpy(big, "{\"request\":{\"uid\":\"u\",\"x\":");
	size_t p = strlen(big);
	for (int i = 0; i < 5000; i++)
		big[p++] = '[';
	for (int i = 0; i < 5000; i++)
		big[p++] = ']';
	strcpy(big + p, "}}");
	assert_int_equal(decode_str(big, &review, &req, err, sizeof(err)), ADMISSION_EJSON);

	/* Long user name: cut, not refused (it is only logged). */
	memset(big, 0, n + 1);
	strcpy(big, "{\"request\":{\"uid\":\"u\",\"userInfo\":{\"username\":\"");
	memset(big + strlen(big), 'a', 1000);
	strcat(big, "\"}}}");
	assert_int_equal(decode_str(big, &review, &req, err, sizeof(err)), 0);
	assert_int_equal(strlen(req.username), ADMISSION_NAME_MAX);
	cJSON_Delete(review);
	free(big);
}

/* Parse an encoded response and check the envelope and uid. */
static cJSON *check_envelope(char *out, const size_t *lenp, const char *uid, int allowed)
{
	cJSON *j, *resp;
	size_t len = *lenp; /* read after admission_encode() set it */

	assert_non_null(out);
	assert_int_equal(strlen(out), len);
	j = cJSON_ParseWithLengthOpts(out, len + 1, NULL, 1);
	assert_non_null(j);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "apiVersion")->valuestring,
	                    "admission.k8s.io/v1");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "kind")->valuestring,
	                    "AdmissionReview");
	resp = cJSON_GetObjectItemCaseSensitive(j, "response");
	assert_true(cJSON_IsObject(resp));
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(resp, "uid")->valuestring, uid);
	assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "allowed")), allowed);
	assert_null(cJSON_GetObjectItemCaseSensitive(resp, "patch"));
	assert_null(cJSON_GetObjectItemCaseSensitive(resp, "patchType"));
	free(out);
	return j;
}

static const cJSON *status_of(const cJSON *j)
{
	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "response"),
	                                        "status");
}

static void test_encode_uid_on_every_path(void **state)
{
	struct admission_response allow = {.uid = "a1b2", .allowed = 1};
	struct admission_response deny = {.uid = "a1b2",
	                                  .allowed = 0,
	                                  .code = 403,
	                                  .reason = "Forbidden",
	                                  .message = "placing x on n would declare too much"};
	struct admission_response error = {
	    .uid = "a1b2", .allowed = 0, .code = 500, .message = "API server: timeout"};
	size_t len;
	cJSON *j;

	(void)state;
	j = check_envelope(admission_encode(&allow, &len), &len, "a1b2", 1);
	assert_null(status_of(j));
	assert_null(cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j, "response"), "warnings"));
	cJSON_Delete(j);

	j = check_envelope(admission_encode(&deny, &len), &len, "a1b2", 0);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(status_of(j), "code")->valueint, 403);
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(status_of(j), "reason")->valuestring,
	                    "Forbidden");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(status_of(j), "message")->valuestring,
	                    deny.message);
	cJSON_Delete(j);

	j = check_envelope(admission_encode(&error, &len), &len, "a1b2", 0);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(status_of(j), "code")->valueint, 500);
	assert_null(cJSON_GetObjectItemCaseSensitive(status_of(j), "reason"));
	cJSON_Delete(j);

	/* A code the API server would not take is replaced with 403. */
	deny.code = 200;
	j = check_envelope(admission_encode(&deny, &len), &len, "a1b2", 0);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(status_of(j), "code")->valueint, 403);
	cJSON_Delete(j);

	/* Missing uid still gives the key (empty), never a missing envelope. */
	allow.uid = NULL;
	j = check_envelope(admission_encode(&allow, &len), &len, "", 1);
	cJSON_Delete(j);
	assert_null(admission_encode(NULL, &len));
}

/* Decode a fixture and encode a denial from its uid: the round trip a server makes. */
static void test_roundtrip_fixture_uid(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_FIXTURES; i++) {
		struct admission_request req;
		cJSON *review = NULL;
		char err[256];
		size_t len;
		char *body = fixture_read(fixtures[i].file, &len);

		assert_int_equal(admission_decode(body, len, &review, &req, err, sizeof(err)), 0);
		struct admission_response r = {
		    .uid = req.uid, .allowed = 0, .code = 403, .message = "no"};
		cJSON *j = check_envelope(admission_encode(&r, &len), &len, fixtures[i].uid, 0);
		cJSON_Delete(j);
		cJSON_Delete(review);
		free(body);
	}
}

static void test_encode_warnings_capped(void **state)
{
	char w[1000];
	struct admission_response r = {.uid = "u", .allowed = 1};
	const cJSON *arr, *it;
	size_t len, total = 0, count = 0;
	cJSON *j;

	(void)state;
	/* 'é' (2 bytes) repeated: a cut must not split one. */
	for (size_t i = 0; i + 1 < sizeof(w); i += 2) {
		w[i] = '\xc3';
		w[i + 1] = '\xa9';
	}
	w[sizeof(w) - 1] = '\0';
	for (size_t i = 0; i < ADMISSION_MAX_WARNINGS; i++)
		r.warnings[i] = w;
	r.n_warnings = ADMISSION_MAX_WARNINGS + 5; /* more than the array: clamped */
	r.audit_keys[0] = "gpu-memory-guard.io/demand";
	r.audit_values[0] = "24Gi";
	r.n_audit = 1;
	j = check_envelope(admission_encode(&r, &len), &len, "u", 1);
	arr = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "response"),
	                                       "warnings");
	assert_true(cJSON_IsArray(arr));
	cJSON_ArrayForEach(it, arr)
	{
		size_t n = strlen(it->valuestring);
		assert_true(n <= ADMISSION_WARNING_MAX);
		assert_int_equal(n % 2, 0);
		total += n;
		count++;
	}
	assert_true(count >= 1 && count <= ADMISSION_MAX_WARNINGS);
	assert_true(total <= 4096);
	const cJSON *audit = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(j, "response"), "auditAnnotations");
	assert_string_equal(
	    cJSON_GetObjectItemCaseSensitive(audit, "gpu-memory-guard.io/demand")->valuestring,
	    "24Gi");
	cJSON_Delete(j);
}

static void test_encode_long_message_cut(void **state)
{
	char msg[4 * ADMISSION_MSG_MAX];
	struct admission_response r = {.uid = "u", .allowed = 0, .code = 403, .message = msg};
	size_t len;
	cJSON *j;

	(void)state;
	memset(msg, 'm', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	j = check_envelope(admission_encode(&r, &len), &len, "u", 0);
	assert_int_equal(
	    strlen(cJSON_GetObjectItemCaseSensitive(status_of(j), "message")->valuestring),
	    ADMISSION_MSG_MAX);
	cJSON_Delete(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_fixture),
	    cmocka_unit_test(test_fixture_table_complete),
	    cmocka_unit_test(test_missing_optional_fields),
	    cmocka_unit_test(test_only_uid),
	    cmocka_unit_test(test_request_fields_stand_in),
	    cmocka_unit_test(test_generate_name_only),
	    cmocka_unit_test(test_name_and_namespace_from_object),
	    cmocka_unit_test(test_request_namespace_wins),
	    cmocka_unit_test(test_classification),
	    cmocka_unit_test(test_trailing_garbage),
	    cmocka_unit_test(test_case_different_keys),
	    cmocka_unit_test(test_odd_types),
	    cmocka_unit_test(test_other_versions_refused),
	    cmocka_unit_test(test_huge_inputs),
	    cmocka_unit_test(test_encode_uid_on_every_path),
	    cmocka_unit_test(test_roundtrip_fixture_uid),
	    cmocka_unit_test(test_encode_warnings_capped),
	    cmocka_unit_test(test_encode_long_message_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
