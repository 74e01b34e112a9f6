/*
 * admission: AdmissionReview v1 decode/encode with cJSON.
 *
 * Decoding is strict about the JSON (one value, nothing after it, no NUL bytes) and about the
 * types of the fields the webhook decides on (a wrong type is ADMISSION_ESHAPE, with the uid
 * filled when it was readable, so the server can still answer the API server with the uid
 * echoed). Absent fields are never an error, except request.uid.
 */
#include "admission.h"

#include "errbuf.h"
#include "jsonpath.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARNINGS_TOTAL_MAX 4096 /* bytes; the API server drops warnings past this */

/*
 * Copy the optional string obj[key] into dst (dst[0] = '\0' when absent or null). A non-string
 * or a string longer than dstsize - 1 is an error naming `what`.
 */
static int copy_opt_string(const cJSON *obj, const char *key, const char *what, char *dst,
                           size_t dstsize, char *err, size_t errlen)
{
	const cJSON *it = json_at(obj, key, NULL);
	size_t n;

	dst[0] = '\0';
	if (it == NULL || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsString(it) || it->valuestring == NULL) {
		errbuf_set(err, errlen, "%s is not a string", what);
		return ADMISSION_ESHAPE;
	}
	n = strlen(it->valuestring);
	if (n >= dstsize) {
		errbuf_set(err, errlen, "%s is longer than %zu bytes", what, dstsize - 1);
		return ADMISSION_ESHAPE;
	}
	memcpy(dst, it->valuestring, n + 1);
	return 0;
}

/* The string value of obj[key], or "" when absent or not a string (classification only). */
static const char *str_or_empty(const cJSON *obj, const char *key)
{
	const char *s = json_str(obj, key, NULL);

	return s != NULL ? s : "";
}

/* obj[key] when present; otherwise obj[fallback] (resource -> requestResource etc.). */
static const cJSON *child_or(const cJSON *obj, const char *key, const char *fallback)
{
	const cJSON *it = json_at(obj, key, NULL);

	if (it == NULL || cJSON_IsNull(it))
		it = json_at(obj, fallback, NULL);
	return it;
}

static enum admission_operation parse_operation(const char *op)
{
	if (strcmp(op, "CREATE") == 0)
		return ADMISSION_OP_CREATE;
	if (strcmp(op, "UPDATE") == 0)
		return ADMISSION_OP_UPDATE;
	if (strcmp(op, "DELETE") == 0)
		return ADMISSION_OP_DELETE;
	if (strcmp(op, "CONNECT") == 0)
		return ADMISSION_OP_CONNECT;
	return ADMISSION_OP_UNKNOWN;
}

/*
 * pods (core group, no subresource) -> POD; pods/binding, kind Binding, or the legacy core
 * "bindings" resource -> BINDING; anything else (pods/status, pods/eviction, other groups) ->
 * OTHER. requestResource/requestKind/requestSubResource stand in when the plain ones are absent.
 */
static enum admission_target classify(const cJSON *request)
{
	const cJSON *res = child_or(request, "resource", "requestResource");
	const cJSON *kind = child_or(request, "kind", "requestKind");
	const cJSON *sub_it = child_or(request, "subResource", "requestSubResource");
	const char *sub = cJSON_IsString(sub_it) && sub_it->valuestring ? sub_it->valuestring : "";
	int res_core =
	    json_at(res, "group", NULL) == NULL || strcmp(str_or_empty(res, "group"), "") == 0;
	int kind_core =
	    json_at(kind, "group", NULL) == NULL || strcmp(str_or_empty(kind, "group"), "") == 0;
	const char *res_name = str_or_empty(res, "resource");
	const char *kind_name = str_or_empty(kind, "kind");

	if (res_core && strcmp(res_name, "pods") == 0 && strcmp(sub, "binding") == 0)
		return ADMISSION_BINDING;
	if (res_core && strcmp(res_name, "bindings") == 0 && sub[0] == '\0')
		return ADMISSION_BINDING;
	if (kind_core && strcmp(kind_name, "Binding") == 0 &&
	    (sub[0] == '\0' || strcmp(sub, "binding") == 0))
		return ADMISSION_BINDING;
	if (sub[0] != '\0')
		return ADMISSION_OTHER;
	if (res_core && strcmp(res_name, "pods") == 0)
		return ADMISSION_POD;
	if (res == NULL && kind_core && strcmp(kind_name, "Pod") == 0)
		return ADMISSION_POD;
	return ADMISSION_OTHER;
}

/* Namespace and name: request fields win, then object.metadata (name, then generateName). */
static int decode_identity(const cJSON *request, struct admission_request *req, char *err,
                           size_t errlen)
{
	const cJSON *meta = json_at(req->object, "metadata", NULL);
	int rc;

	if ((rc = copy_opt_string(request, "namespace", "request.namespace", req->namespace_,
	                          sizeof(req->namespace_), err, errlen)) < 0)
		return rc;
	if (req->namespace_[0] == '\0' &&
	    (rc = copy_opt_string(meta, "namespace", "object.metadata.namespace", req->namespace_,
	                          sizeof(req->namespace_), err, errlen)) < 0)
		return rc;
	if ((rc = copy_opt_string(request, "name", "request.name", req->name, sizeof(req->name),
	                          err, errlen)) < 0)
		return rc;
	if (req->name[0] == '\0' &&
	    (rc = copy_opt_string(meta, "name", "object.metadata.name", req->name,
	                          sizeof(req->name), err, errlen)) < 0)
		return rc;
	if (req->name[0] == '\0') {
		if ((rc = copy_opt_string(meta, "generateName", "object.metadata.generateName",
		                          req->name, sizeof(req->name), err, errlen)) < 0)
			return rc;
		req->name_is_generated = req->name[0] != '\0';
	}
	return 0;
}

static int decode_binding(struct admission_request *req, char *err, size_t errlen)
{
	const cJSON *target = json_at(req->object, "target", NULL);
	char kind[ADMISSION_NAME_MAX + 1];
	int rc;

	if (target != NULL && !cJSON_IsNull(target) && !cJSON_IsObject(target)) {
		errbuf_set(err, errlen, "object.target is not an object");
		return ADMISSION_ESHAPE;
	}
	if ((rc = copy_opt_string(target, "name", "object.target.name", req->binding_node,
	                          sizeof(req->binding_node), err, errlen)) < 0)
		return rc;
	if ((rc = copy_opt_string(target, "kind", "object.target.kind", kind, sizeof(kind), err,
	                          errlen)) < 0)
		return rc;
	/* The API server accepts "" for Node (pkg/registry/core/pod/storage). */
	req->binding_target_is_node = kind[0] == '\0' || strcmp(kind, "Node") == 0;
	return 0;
}

/* Everything but the uid: operation, dryRun, user, object, classification, identity. */
static int decode_request(const cJSON *request, struct admission_request *req, char *err,
                          size_t errlen)
{
	const cJSON *it;
	char op[16];
	int rc;

	if ((rc = copy_opt_string(request, "operation", "request.operation", op, sizeof(op), err,
	                          errlen)) < 0)
		return rc;
	req->operation = parse_operation(op);

	it = json_at(request, "dryRun", NULL);
	if (it != NULL && !cJSON_IsNull(it) && !cJSON_IsBool(it)) {
		errbuf_set(err, errlen, "request.dryRun is not a boolean");
		return ADMISSION_ESHAPE;
	}
	req->dry_run = it != NULL && cJSON_IsTrue(it);

	/* The user name is for logs only: cut rather than refuse a long one. */
	it = json_at(request, "userInfo", "username", NULL);
	if (it != NULL && cJSON_IsString(it) && it->valuestring != NULL)
		snprintf(req->username, sizeof(req->username), "%s", it->valuestring);

	it = json_at(request, "object", NULL);
	if (it != NULL && !cJSON_IsNull(it) && !cJSON_IsObject(it)) {
		errbuf_set(err, errlen, "request.object is not an object");
		return ADMISSION_ESHAPE;
	}
	req->object = cJSON_IsObject(it) ? it : NULL;

	req->target = classify(request);
	if ((rc = decode_identity(request, req, err, errlen)) < 0)
		return rc;
	if (req->target == ADMISSION_BINDING)
		return decode_binding(req, err, errlen);
	return 0;
}

/* Envelope checks and the uid. */
static int decode_envelope(const cJSON *root, const cJSON **request_out,
                           struct admission_request *req, char *err, size_t errlen)
{
	const cJSON *request, *uid;
	const char *kind = str_or_empty(root, "kind");
	const char *api = str_or_empty(root, "apiVersion");

	if (!cJSON_IsObject(root)) {
		errbuf_set(err, errlen, "body is not a JSON object");
		return ADMISSION_ESHAPE;
	}
	request = json_at(root, "request", NULL);
	if (request == NULL || !cJSON_IsObject(request)) {
		errbuf_set(err, errlen, "no request object: not an AdmissionReview");
		return ADMISSION_ESHAPE;
	}
	/* Before the uid is read: an answer echoing it would be a v1 envelope, which the API
	 * server cannot take for a review of another version (it decodes the answer into the
	 * version it sent). The request is refused (400) instead, saying what to configure. */
	if (api[0] != '\0' && strcmp(api, ADMISSION_API_VERSION) != 0) {
		errbuf_set(err, errlen,
		           "apiVersion \"%.64s\" is not served: only " ADMISSION_API_VERSION
		           " (set admissionReviewVersions: [\"v1\"] in the webhook configuration)",
		           api);
		return ADMISSION_ESHAPE;
	}
	uid = json_at(request, "uid", NULL);
	if (uid == NULL || !cJSON_IsString(uid) || uid->valuestring == NULL ||
	    uid->valuestring[0] == '\0') {
		errbuf_set(err, errlen, "request.uid missing or not a string");
		return ADMISSION_ESHAPE;
	}
	if (strlen(uid->valuestring) > ADMISSION_UID_MAX) {
		errbuf_set(err, errlen, "request.uid longer than %d bytes", ADMISSION_UID_MAX);
		return ADMISSION_ESHAPE;
	}
	strcpy(req->uid, uid->valuestring);
	if (kind[0] != '\0' && strcmp(kind, "AdmissionReview") != 0) {
		errbuf_set(err, errlen, "not an AdmissionReview (kind \"%.64s\")", kind);
		return ADMISSION_ESHAPE;
	}
	*request_out = request;
	return 0;
}

/*
 * The body is copied into a NUL-terminated buffer because cJSON's strict mode needs the NUL
 * inside len (reference/c-libraries.md); an embedded NUL would end the parse early and hide
 * trailing bytes, so it is refused first.
 */
int admission_decode(const char *body, size_t len, struct cJSON **review_out,
                     struct admission_request *req, char *err, size_t errlen)
{
	const cJSON *request = NULL;
	const char *end = NULL;
	cJSON *root = NULL;
	char *buf = NULL;
	int rc;

	if (review_out != NULL)
		*review_out = NULL;
	if (req != NULL)
		memset(req, 0, sizeof(*req));
	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (review_out == NULL || req == NULL || (body == NULL && len > 0)) {
		errbuf_set(err, errlen, "invalid arguments");
		rc = ADMISSION_ESHAPE;
		goto out;
	}
	if (len == 0 || len > ADMISSION_BODY_MAX) {
		errbuf_set(err, errlen, "body is %zu bytes (must be 1..%u)", len,
		           ADMISSION_BODY_MAX);
		rc = ADMISSION_EJSON;
		goto out;
	}
	if (memchr(body, '\0', len) != NULL) {
		errbuf_set(err, errlen, "body contains a NUL byte");
		rc = ADMISSION_EJSON;
		goto out;
	}
	buf = malloc(len + 1);
	if (buf == NULL) {
		errbuf_set(err, errlen, "out of memory");
		rc = ADMISSION_ENOMEM;
		goto out;
	}
	memcpy(buf, body, len);
	buf[len] = '\0';
	root = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1);
	if (root == NULL) {
		size_t off = end != NULL && end >= buf ? (size_t)(end - buf) : 0;
		errbuf_set(err, errlen, "invalid JSON at byte %zu", off);
		rc = ADMISSION_EJSON;
		goto out;
	}
	if ((rc = decode_envelope(root, &request, req, err, errlen)) < 0)
		goto out;
	if ((rc = decode_request(request, req, err, errlen)) < 0)
		goto out;
	*review_out = root;
	root = NULL;
	rc = 0;
out:
	if (rc < 0 && req != NULL)
		req->object = NULL; /* it pointed into root, freed below */
	cJSON_Delete(root);
	free(buf);
	return rc;
}

/* Bytes of s that fit in max without splitting a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/* Add obj[key] = the first utf8_cut(s, max) bytes of s. NULL on allocation failure. */
static cJSON *add_cut_string(cJSON *obj, const char *key, const char *s, size_t max)
{
	size_t n = utf8_cut(s, max);
	char *tmp = malloc(n + 1);
	cJSON *it;

	if (tmp == NULL)
		return NULL;
	memcpy(tmp, s, n);
	tmp[n] = '\0';
	it = cJSON_CreateString(tmp);
	free(tmp);
	if (it == NULL)
		return NULL;
	if (key != NULL)
		cJSON_AddItemToObject(obj, key, it);
	else
		cJSON_AddItemToArray(obj, it);
	return it;
}

static int encode_status(cJSON *response, const struct admission_response *resp)
{
	cJSON *status = cJSON_AddObjectToObject(response, "status");
	int code = resp->code;

	/* The API server raises codes < 400 to 400; 403 is the honest default for a policy. */
	if (code < 400 || code > 599)
		code = 403;
	if (status == NULL || cJSON_AddNumberToObject(status, "code", code) == NULL)
		return -1;
	if (add_cut_string(status, "message", resp->message ? resp->message : "",
	                   ADMISSION_MSG_MAX) == NULL)
		return -1;
	if (resp->reason != NULL && resp->reason[0] != '\0' &&
	    cJSON_AddStringToObject(status, "reason", resp->reason) == NULL)
		return -1;
	return 0;
}

/* Warnings: at most ADMISSION_MAX_WARNINGS, each cut, the total kept under what kubectl shows. */
static int encode_warnings(cJSON *response, const struct admission_response *resp)
{
	size_t n =
	    resp->n_warnings < ADMISSION_MAX_WARNINGS ? resp->n_warnings : ADMISSION_MAX_WARNINGS;
	size_t total = 0;
	cJSON *arr = NULL;

	for (size_t i = 0; i < n; i++) {
		const char *w = resp->warnings[i];
		size_t wl;

		if (w == NULL || w[0] == '\0')
			continue;
		wl = utf8_cut(w, ADMISSION_WARNING_MAX);
		if (total + wl > WARNINGS_TOTAL_MAX)
			break;
		total += wl;
		if (arr == NULL && (arr = cJSON_AddArrayToObject(response, "warnings")) == NULL)
			return -1;
		if (add_cut_string(arr, NULL, w, ADMISSION_WARNING_MAX) == NULL)
			return -1;
	}
	return 0;
}

static int encode_audit(cJSON *response, const struct admission_response *resp)
{
	size_t n = resp->n_audit < 4 ? resp->n_audit : 4;
	cJSON *obj = NULL;

	for (size_t i = 0; i < n; i++) {
		if (resp->audit_keys[i] == NULL || resp->audit_values[i] == NULL)
			continue;
		if (obj == NULL &&
		    (obj = cJSON_AddObjectToObject(response, "auditAnnotations")) == NULL)
			return -1;
		if (add_cut_string(obj, resp->audit_keys[i], resp->audit_values[i],
		                   ADMISSION_MSG_MAX) == NULL)
			return -1;
	}
	return 0;
}

char *admission_encode(const struct admission_response *resp, size_t *len)
{
	cJSON *root = NULL, *response;
	char *printed = NULL, *out = NULL;
	size_t n;

	if (len != NULL)
		*len = 0;
	if (resp == NULL)
		goto out;
	root = cJSON_CreateObject();
	if (root == NULL ||
	    cJSON_AddStringToObject(root, "apiVersion", ADMISSION_API_VERSION) == NULL ||
	    cJSON_AddStringToObject(root, "kind", "AdmissionReview") == NULL)
		goto out;
	response = cJSON_AddObjectToObject(root, "response");
	if (response == NULL ||
	    cJSON_AddStringToObject(response, "uid", resp->uid ? resp->uid : "") == NULL ||
	    cJSON_AddBoolToObject(response, "allowed", resp->allowed ? 1 : 0) == NULL)
		goto out;
	if (!resp->allowed && encode_status(response, resp) < 0)
		goto out;
	if (encode_warnings(response, resp) < 0 || encode_audit(response, resp) < 0)
		goto out;
	printed = cJSON_PrintUnformatted(root);
	if (printed == NULL)
		goto out;
	/* cJSON may use other allocators (cJSON_InitHooks); the caller frees with free(). */
	n = strlen(printed);
	out = malloc(n + 1);
	if (out == NULL)
		goto out;
	memcpy(out, printed, n + 1);
	if (len != NULL)
		*len = n;
out:
	if (printed != NULL)
		cJSON_free(printed);
	cJSON_Delete(root);
	return out;
}
