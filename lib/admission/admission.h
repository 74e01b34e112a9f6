/*
 * admission: AdmissionReview (admission.k8s.io/v1) decode and encode.
 *
 * Decoding never trusts the shape: every request field is optional except uid
 * (../shared/reference/kubernetes-admission.md). Keys are matched case-sensitively (cJSON's
 * plain GetObjectItem is case-insensitive). The parse is strict: trailing bytes after the JSON
 * value are an error. request.namespace wins over object.metadata.namespace; the name is
 * request.name, else object.metadata.name, else object.metadata.generateName.
 *
 * Only admission.k8s.io/v1 is served: a review of another apiVersion (v1beta1) is refused
 * (ADMISSION_ESHAPE without the uid, so the webhook answers 400 with the reason), because the
 * API server decodes the answer into the version it sent and a v1 answer to a v1beta1 review
 * fails there. The webhook configurations list admissionReviewVersions: ["v1"] only; an
 * absent apiVersion is read as v1.
 *
 * Encoding always produces {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
 * "response":{"uid":..., "allowed":..., "status"?, "warnings"?, "auditAnnotations"?}} and never
 * a patch (validating webhook).
 *
 * Thread-safe. Ownership is stated per function.
 */
#ifndef GMG_ADMISSION_H
#define GMG_ADMISSION_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

#define ADMISSION_API_VERSION  "admission.k8s.io/v1" /* the only version served */
#define ADMISSION_BODY_MAX     (7u * 1024u * 1024u)  /* bytes, as controller-runtime */
#define ADMISSION_UID_MAX      128
#define ADMISSION_NAME_MAX     253
#define ADMISSION_MAX_WARNINGS 8
#define ADMISSION_WARNING_MAX  512
#define ADMISSION_MSG_MAX      1024

#define ADMISSION_EJSON  (-1) /* not valid JSON, or trailing garbage */
#define ADMISSION_ESHAPE (-2) /* JSON, but not an AdmissionReview with request.uid */
#define ADMISSION_ENOMEM (-3)

enum admission_operation {
	ADMISSION_OP_UNKNOWN = 0,
	ADMISSION_OP_CREATE,
	ADMISSION_OP_UPDATE,
	ADMISSION_OP_DELETE,
	ADMISSION_OP_CONNECT,
};

/* What a review asks about, classified for the webhook. */
enum admission_target {
	ADMISSION_OTHER = 0,   /* anything we always allow */
	ADMISSION_POD = 1,     /* resource pods, no subresource */
	ADMISSION_BINDING = 2, /* pods/binding subresource, or the legacy "bindings" resource */
};

struct admission_request {
	char uid[ADMISSION_UID_MAX + 1];
	enum admission_operation operation;
	enum admission_target target;
	char namespace_[ADMISSION_NAME_MAX + 1];
	char name[ADMISSION_NAME_MAX + 1]; /* request.name | metadata.name | generateName */
	int name_is_generated;             /* name came from generateName only */
	int dry_run;                       /* request.dryRun == true */
	char username[ADMISSION_NAME_MAX + 1];
	const struct cJSON *object; /* request.object, borrowed from the review; may be NULL */
	/* Binding only: target node name and the object's target.kind ("" or "Node" accepted). */
	char binding_node[ADMISSION_NAME_MAX + 1];
	int binding_target_is_node; /* 1 when target.kind is "Node" or empty/absent */
};

/*
 * Parse body[0..len) (need not be NUL-terminated) into a review; *review_out (caller owns,
 * cJSON_Delete) keeps the borrowed pointers in *req alive. Returns 0, or ADMISSION_E* with a
 * reason in err (for the 400 body); on error *review_out is NULL and req->object NULL.
 *   ADMISSION_EJSON:  empty, over ADMISSION_BODY_MAX bytes, a NUL byte, invalid JSON or bytes
 *                     after the value (no uid).
 *   ADMISSION_ESHAPE: not an AdmissionReview, an apiVersion other than ADMISSION_API_VERSION
 *                     (req->uid left empty: answer 400, never a v1 answer to another
 *                     version), no/empty/over-long request.uid, or a wrong type
 *                     or over-long value in a field the decision uses (name, namespace,
 *                     operation, dryRun, object, target). req->uid is filled when the uid
 *                     itself was valid, so the caller can still answer with it echoed.
 * Absent fields are never an error (except uid); resource/kind/subResource fall back to
 * requestResource/requestKind/requestSubResource. username is cut to fit (logs only).
 * Thread-safe (no shared state).
 */
int admission_decode(const char *body, size_t len, struct cJSON **review_out,
                     struct admission_request *req, char *err, size_t errlen)
    __attribute__((warn_unused_result));

struct admission_response {
	const char *uid; /* borrowed; must be request.uid */
	int allowed;
	int code;            /* denial HTTP code (403 policy, 500 internal); ignored if allowed */
	const char *reason;  /* status.reason on denial, e.g. "Forbidden" */
	const char *message; /* status.message on denial (borrowed) */
	const char
	    *warnings[ADMISSION_MAX_WARNINGS]; /* borrowed; each cut to ADMISSION_WARNING_MAX */
	size_t n_warnings;
	/* auditAnnotations: key/value pairs (borrowed), NULL-terminated by n_audit. */
	const char *audit_keys[4];
	const char *audit_values[4];
	size_t n_audit;
};

/*
 * Encode a response. Returns a NUL-terminated JSON string the caller frees with free(),
 * and its length in *len (may be NULL); NULL only on allocation failure or resp == NULL.
 * response.uid is always present ("" when resp->uid is NULL). On denial status.code is
 * resp->code when in 400..599, else 403; status.message is cut to ADMISSION_MSG_MAX bytes.
 * Warnings: empty ones skipped, each cut to ADMISSION_WARNING_MAX bytes, and the list stops
 * before the total passes 4096 bytes (what the API server keeps). Cuts never split a UTF-8
 * character. Thread-safe.
 */
char *admission_encode(const struct admission_response *resp, size_t *len);

#endif
