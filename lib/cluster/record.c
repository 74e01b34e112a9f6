/*
 * record: the shared reservation record of a node, as a Lease. See record.h.
 */
#define _GNU_SOURCE /* timegm */
#include "record.h"

#include "errbuf.h"
#include "jsonpath.h"
#include "pod.h"
#include "resvrule.h"
#include "satmath.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MANAGED_BY_LABEL "app.kubernetes.io/managed-by"
#define MANAGED_BY       "gpu-memory-guard"

void record_init(struct record *r)
{
	memset(r, 0, sizeof(*r));
}

void record_free(struct record *r)
{
	free(r->entries);
	record_init(r);
}

int record_copy(struct record *dst, const struct record *src)
{
	record_init(dst);
	if (src->n > 0) {
		dst->entries = malloc(src->n * sizeof(*dst->entries));
		if (dst->entries == NULL)
			return RECORD_ENOMEM;
		memcpy(dst->entries, src->entries, src->n * sizeof(*dst->entries));
		dst->cap = src->n;
	}
	dst->n = src->n;
	memcpy(dst->rv, src->rv, sizeof(dst->rv));
	dst->renew_ms = src->renew_ms;
	return 0;
}

static int grow(struct record *r)
{
	if (r->n < r->cap)
		return 0;
	if (r->n >= RECORD_MAX_ENTRIES)
		return RECORD_EFULL;
	size_t cap = r->cap ? r->cap * 2 : 8;
	if (cap > RECORD_MAX_ENTRIES)
		cap = RECORD_MAX_ENTRIES;
	struct record_entry *e = realloc(r->entries, cap * sizeof(*e));
	if (e == NULL)
		return RECORD_ENOMEM;
	r->entries = e;
	r->cap = cap;
	return 0;
}

static int entry_valid(const char *key, const char *uid, const char *claim, uint64_t bytes,
                       uint64_t expires_ms)
{
	return key != NULL && key[0] != '\0' && strlen(key) < LEDGER_KEY_MAX &&
	       strlen(uid) < LEDGER_UID_MAX && strlen(claim) < LEDGER_UID_MAX &&
	       bytes <= RECORD_MAX_NUMBER && expires_ms <= RECORD_MAX_NUMBER;
}

/* Refresh e with a later put of the same pod, never lowering what counts (record.h,
 * record_put): the larger bytes, the later expiry, unseen only if both were, the uid and claim
 * taken only where e had none. */
static void refresh(struct record_entry *e, const char *uid, const char *claim, uint64_t bytes,
                    uint64_t expires_ms, int unseen)
{
	if (bytes > e->bytes)
		e->bytes = bytes;
	if (expires_ms > e->expires_ms)
		e->expires_ms = expires_ms;
	e->unseen = e->unseen && unseen;
	if (e->uid[0] == '\0')
		snprintf(e->uid, sizeof(e->uid), "%s", uid);
	if (e->claim[0] == '\0')
		snprintf(e->claim, sizeof(e->claim), "%s", claim);
}

/* Put (key, uid) into r: refresh the entry of the same pod when merge is set and there is
 * one, else append. */
static int put(struct record *r, const char *key, const char *uid, const char *claim,
               uint64_t bytes, uint64_t expires_ms, int unseen, int merge)
{
	if (uid == NULL)
		uid = "";
	if (claim == NULL)
		claim = "";
	if (!entry_valid(key, uid, claim, bytes, expires_ms))
		return RECORD_EINVAL;
	struct record_entry *e = NULL;
	for (size_t i = 0; merge && i < r->n && e == NULL; i++)
		if (pod_same(r->entries[i].key, r->entries[i].uid, key, uid))
			e = &r->entries[i];
	if (e != NULL) {
		refresh(e, uid, claim, bytes, expires_ms, unseen);
		return 0;
	}
	int rc = grow(r);
	if (rc != 0)
		return rc;
	e = &r->entries[r->n++];
	snprintf(e->key, sizeof(e->key), "%s", key);
	snprintf(e->uid, sizeof(e->uid), "%s", uid);
	snprintf(e->claim, sizeof(e->claim), "%s", claim);
	e->bytes = bytes;
	e->expires_ms = expires_ms;
	e->unseen = unseen != 0;
	return 0;
}

int record_put(struct record *r, const char *key, const char *uid, uint64_t bytes,
               uint64_t expires_ms)
{
	return put(r, key, uid, NULL, bytes, expires_ms, 0, 1);
}

int record_put_unseen(struct record *r, const char *key, const char *uid, uint64_t bytes,
                      uint64_t expires_ms)
{
	return put(r, key, uid, NULL, bytes, expires_ms, 1, 1);
}

int record_put_claim(struct record *r, const char *key, const char *uid, const char *claim,
                     uint64_t bytes, uint64_t expires_ms, int unseen)
{
	return put(r, key, uid, claim, bytes, expires_ms, unseen, 1);
}

size_t record_unseen_expired(const struct record *r, uint64_t now_wall_ms)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n; i++)
		n += r->entries[i].unseen && resv_expired(r->entries[i].expires_ms, now_wall_ms);
	return n;
}

size_t record_prune(struct record *r, uint64_t now_wall_ms, const struct placement_item *visible,
                    size_t n_visible, uint64_t now_mono_ms, uint64_t grace_ms)
{
	size_t kept = 0, dropped = 0;

	for (size_t i = 0; i < r->n; i++) {
		const struct record_entry *e = &r->entries[i];
		int drop = resv_expired(e->expires_ms, now_wall_ms);
		for (size_t j = 0; !drop && j < n_visible; j++) {
			const struct placement_item *v = &visible[j];
			drop = resv_record_settled_by(e->key, e->uid, v->key, v->uid, v->seen_ms,
			                              now_mono_ms, grace_ms);
		}
		if (drop)
			dropped++;
		else
			r->entries[kept++] = *e;
	}
	r->n = kept;
	return dropped;
}

size_t record_items(const struct record *r, uint64_t now_wall_ms, uint64_t now_ms,
                    struct placement_item *out)
{
	size_t n = 0;

	for (size_t i = 0; i < r->n; i++) {
		const struct record_entry *e = &r->entries[i];
		if (resv_expired(e->expires_ms, now_wall_ms))
			continue;
		out[n++] = (struct placement_item){
		    .key = e->key,
		    .uid = e->uid[0] ? e->uid : NULL,
		    .bytes = e->bytes,
		    .expires_ms = sat_add(now_ms, e->expires_ms - now_wall_ms),
		    .dra_claim = e->claim[0] ? e->claim : NULL,
		};
	}
	return n;
}

uint64_t record_live_bytes(const struct record *r, uint64_t now_wall_ms)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < r->n; i++)
		if (!resv_expired(r->entries[i].expires_ms, now_wall_ms))
			sum = sat_add(sum, r->entries[i].bytes);
	return sum;
}

uint64_t record_max_expiry(uint64_t earliest_ms, uint64_t latest_ms, uint64_t ttl_ms)
{
	uint64_t width = latest_ms > earliest_ms ? latest_ms - earliest_ms : 0;
	return sat_add(sat_add(latest_ms, width), ttl_ms);
}

size_t record_cap_expiry(struct record *r, uint64_t max_expires_ms)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n; i++)
		if (r->entries[i].expires_ms > max_expires_ms) {
			r->entries[i].expires_ms = max_expires_ms;
			n++;
		}
	return n;
}

/* A JSON number that is a whole number of at most 2^53 (exact in a double). */
static int json_u64(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) ||
	    v->valuedouble > (double)RECORD_MAX_NUMBER || floor(v->valuedouble) != v->valuedouble)
		return -1;
	*out = (uint64_t)v->valuedouble;
	return 0;
}

/* RFC 3339 with optional fraction, UTC ("Z") as the API server writes MicroTime. 0 when it
 * cannot be read. */
static uint64_t parse_micro_time(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (p == NULL)
		return 0;
	uint64_t ms = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				ms = ms * 10 + (uint64_t)(*p - '0');
		for (; digits < 3; digits++)
			ms *= 10;
	}
	if (strcmp(p, "Z") != 0)
		return 0;
	time_t t = timegm(&tm);
	return t < 0 ? 0 : (uint64_t)t * 1000 + ms;
}

int record_from_lease(const cJSON *lease, struct record *out, char *err, size_t errlen)
{
	const char *rv = json_str(lease, "metadata", "resourceVersion", NULL);
	const char *kind = json_str(lease, "kind", NULL);
	int rc = RECORD_EPARSE;

	record_free(out);
	if (!cJSON_IsObject(lease) || (kind != NULL && strcmp(kind, "Lease") != 0)) {
		errbuf_set(err, errlen, "not a Lease");
		return RECORD_EPARSE;
	}
	if (rv == NULL || rv[0] == '\0' || strlen(rv) >= sizeof(out->rv)) {
		errbuf_set(err, errlen, "Lease without a usable metadata.resourceVersion");
		return RECORD_EPARSE;
	}
	snprintf(out->rv, sizeof(out->rv), "%s", rv);
	out->renew_ms = parse_micro_time(json_str(lease, "spec", "renewTime", NULL));
	const cJSON *ann = json_at(lease, "metadata", "annotations", RECORD_ANNOTATION, NULL);
	if (ann == NULL)
		return 0;
	cJSON *list = cJSON_IsString(ann) ? cJSON_Parse(ann->valuestring) : NULL;
	if (!cJSON_IsArray(list)) {
		errbuf_set(err, errlen, "annotation %s is not a JSON list", RECORD_ANNOTATION);
		goto out;
	}
	size_t i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		const cJSON *key = cJSON_GetObjectItemCaseSensitive(it, "pod");
		const cJSON *uid = cJSON_GetObjectItemCaseSensitive(it, "uid");
		const cJSON *unseen = cJSON_GetObjectItemCaseSensitive(it, "unseen");
		/* absent in entries written before issue 21 (and by replicas of that version) */
		const cJSON *claim = cJSON_GetObjectItemCaseSensitive(it, "claim");
		uint64_t bytes, expires;
		if (!cJSON_IsString(key) || (uid != NULL && !cJSON_IsString(uid)) ||
		    (claim != NULL && !cJSON_IsString(claim)) ||
		    (unseen != NULL && !cJSON_IsBool(unseen)) ||
		    json_u64(cJSON_GetObjectItemCaseSensitive(it, "bytes"), &bytes) != 0 ||
		    json_u64(cJSON_GetObjectItemCaseSensitive(it, "expires"), &expires) != 0) {
			errbuf_set(err, errlen,
			           "annotation %s: entry %zu needs \"pod\" (string), \"bytes\" and "
			           "\"expires\" (whole numbers), \"unseen\" a boolean and "
			           "\"uid\", \"claim\" strings if present",
			           RECORD_ANNOTATION, i);
			goto out;
		}
		int prc =
		    put(out, key->valuestring, uid ? uid->valuestring : NULL,
		        claim ? claim->valuestring : NULL, bytes, expires, cJSON_IsTrue(unseen), 0);
		if (prc == RECORD_ENOMEM) {
			rc = RECORD_ENOMEM;
			errbuf_set(err, errlen, "out of memory");
			goto out;
		}
		if (prc != 0) {
			errbuf_set(err, errlen, "annotation %s: entry %zu: %s", RECORD_ANNOTATION,
			           i,
			           prc == RECORD_EFULL ? "over the entry cap"
			                               : "an empty or too long key, uid or claim");
			goto out;
		}
		i++;
	}
	rc = 0;
out:
	cJSON_Delete(list);
	if (rc != 0) {
		free(out->entries);
		out->entries = NULL;
		out->n = out->cap = 0;
	}
	return rc;
}

/* MicroTime: "2026-11-30T16:00:00.123456Z". */
static void format_micro_time(uint64_t ms, char *buf, size_t cap)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char day[32];
	gmtime_r(&t, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, cap, "%s.%03u000Z", day, (unsigned)(ms % 1000));
}

static char *entries_json(const struct record *r)
{
	cJSON *list = cJSON_CreateArray();
	char *s = NULL;

	if (list == NULL)
		return NULL;
	for (size_t i = 0; i < r->n; i++) {
		const struct record_entry *e = &r->entries[i];
		cJSON *o = cJSON_CreateObject();
		if (o == NULL || !cJSON_AddItemToArray(list, o) ||
		    cJSON_AddStringToObject(o, "uid", e->uid) == NULL ||
		    cJSON_AddStringToObject(o, "pod", e->key) == NULL ||
		    cJSON_AddNumberToObject(o, "bytes", (double)e->bytes) == NULL ||
		    cJSON_AddNumberToObject(o, "expires", (double)e->expires_ms) == NULL ||
		    (e->unseen && cJSON_AddTrueToObject(o, "unseen") == NULL) ||
		    (e->claim[0] != '\0' && cJSON_AddStringToObject(o, "claim", e->claim) == NULL))
			goto out;
	}
	s = cJSON_PrintUnformatted(list);
out:
	cJSON_Delete(list);
	return s;
}

cJSON *record_to_lease(const struct record *r, const char *ns, const char *node,
                       uint64_t now_wall_ms)
{
	char when[64];
	char *entries = entries_json(r);
	cJSON *l = cJSON_CreateObject();
	cJSON *meta, *labels, *ann, *spec;

	format_micro_time(now_wall_ms, when, sizeof(when));
	if (entries == NULL || l == NULL ||
	    cJSON_AddStringToObject(l, "apiVersion", "coordination.k8s.io/v1") == NULL ||
	    cJSON_AddStringToObject(l, "kind", "Lease") == NULL ||
	    (meta = cJSON_AddObjectToObject(l, "metadata")) == NULL ||
	    cJSON_AddStringToObject(meta, "name", node) == NULL ||
	    cJSON_AddStringToObject(meta, "namespace", ns) == NULL ||
	    (r->rv[0] != '\0' && cJSON_AddStringToObject(meta, "resourceVersion", r->rv) == NULL) ||
	    (labels = cJSON_AddObjectToObject(meta, "labels")) == NULL ||
	    cJSON_AddStringToObject(labels, MANAGED_BY_LABEL, MANAGED_BY) == NULL ||
	    (ann = cJSON_AddObjectToObject(meta, "annotations")) == NULL ||
	    cJSON_AddStringToObject(ann, RECORD_ANNOTATION, entries) == NULL ||
	    (spec = cJSON_AddObjectToObject(l, "spec")) == NULL ||
	    cJSON_AddStringToObject(spec, "renewTime", when) == NULL) {
		cJSON_Delete(l);
		l = NULL;
	}
	free(entries);
	return l;
}
