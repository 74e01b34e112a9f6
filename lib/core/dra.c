/*
 * dra: ResourceSlices, ResourceClaims and a pod's claims decoded; the counting rules. See
 * dra.h for the contract.
 */
#include "dra.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "errbuf.h"
#include "jsonpath.h"
#include "quantity.h"
#include "satmath.h"

/* Copy s (may be NULL: "") into dst of cap bytes; -1 when it does not fit. */
static int copy_str(char *dst, size_t cap, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n >= cap)
		return -1;
	memcpy(dst, s ? s : "", n + 1);
	return 0;
}

/* An array field, or NULL when absent; -1 when present but not an array. */
static int array_at(const cJSON *parent, const char *key, const cJSON **out)
{
	const cJSON *a =
	    cJSON_IsObject(parent) ? cJSON_GetObjectItemCaseSensitive(parent, key) : NULL;

	*out = NULL;
	if (a == NULL || cJSON_IsNull(a))
		return 0;
	if (!cJSON_IsArray(a))
		return -1;
	*out = a;
	return 0;
}

static int valid_driver(const char *s, size_t n)
{
	if (n == 0 || n >= DRA_DRIVER_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      s[i] == '.'))
			return 0;
	return 1;
}

int dra_drivers_add(struct dra_drivers *d, const char *list, char *err, size_t errlen)
{
	const char *p = list ? list : "";

	for (;;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		int dup = 0;

		if (!valid_driver(p, n)) {
			errbuf_set(err, errlen,
			           "--dra-driver \"%.*s\" is not a driver name (a DNS subdomain of "
			           "at most 63 bytes, e.g. gpu.nvidia.com)",
			           (int)(n > 80 ? 80 : n), p);
			return -1;
		}
		for (size_t i = 0; i < d->n; i++)
			dup |= strlen(d->name[i]) == n && memcmp(d->name[i], p, n) == 0;
		if (!dup) {
			if (d->n == DRA_MAX_DRIVERS) {
				errbuf_set(err, errlen, "--dra-driver: more than %d drivers",
				           DRA_MAX_DRIVERS);
				return -1;
			}
			memcpy(d->name[d->n], p, n);
			d->name[d->n++][n] = '\0';
		}
		if (end == NULL)
			return 0;
		p = end + 1;
	}
}

int dra_driver_ours(const struct dra_drivers *d, const char *driver)
{
	if (driver == NULL)
		return 0;
	if (d == NULL || d->n == 0)
		return strcmp(driver, DRA_DRIVER_DEFAULT) == 0;
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->name[i], driver) == 0)
			return 1;
	return 0;
}

/* A quantity string in bytes; -1 with err naming what. */
static int quantity_of(const cJSON *v, const char *what, uint64_t *out, char *err, size_t errlen)
{
	char why[128];

	if (!cJSON_IsString(v) || quantity_parse_str(v->valuestring, out, why, sizeof(why)) != 0) {
		errbuf_set(err, errlen, "%s is not a quantity%s%s", what,
		           cJSON_IsString(v) ? ": " : " (not a string)",
		           cJSON_IsString(v) ? why : "");
		return -1;
	}
	return 0;
}

/* attributes.type (or "<driver>/type"): the device's kind, as the NVIDIA driver writes it. */
static uint8_t device_type(const cJSON *attrs, const char *driver)
{
	char key[DRA_DRIVER_MAX + 8];
	const char *t;

	t = json_str(attrs, "type", "string", NULL);
	if (t == NULL) {
		snprintf(key, sizeof(key), "%s/type", driver);
		t = json_str(attrs, key, "string", NULL);
	}
	if (t == NULL)
		return DRA_TYPE_OTHER;
	return strcmp(t, "gpu") == 0 ? DRA_TYPE_GPU : strcmp(t, "mig") == 0 ? DRA_TYPE_MIG : 0;
}

static int decode_device(const cJSON *dev, const char *driver, struct dra_device *out, char *err,
                         size_t errlen)
{
	const char *name = json_str(dev, "name", NULL);
	const cJSON *mem = json_at(dev, "capacity", DRA_CAPACITY_KEY, "value", NULL);
	const cJSON *multi = json_at(dev, "allowMultipleAllocations", NULL);
	const cJSON *counters = json_at(dev, "consumesCounters", NULL);
	const cJSON *taints = json_at(dev, "taints", NULL);
	char what[DRA_DEVICE_MAX + 48];

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(dev) || name == NULL || name[0] == '\0' ||
	    copy_str(out->name, sizeof(out->name), name) != 0) {
		errbuf_set(err, errlen, "a device without a name (or one over 63 bytes)");
		return -1;
	}
	snprintf(what, sizeof(what), "device %s: capacity.memory.value", name);
	if (mem != NULL && quantity_of(mem, what, &out->memory, err, errlen) != 0)
		return -1;
	out->type = device_type(json_at(dev, "attributes", NULL), driver);
	/* a uuid too long for the field is no UUID of the driver's: left unknown */
	(void)copy_str(out->uuid, sizeof(out->uuid),
	               json_str(dev, "attributes", "uuid", "string", NULL));
	out->multi = cJSON_IsTrue(multi);
	out->counters = cJSON_IsArray(counters) && cJSON_GetArraySize(counters) > 0;
	out->tainted = cJSON_IsArray(taints) && cJSON_GetArraySize(taints) > 0;
	return 0;
}

int dra_slice_decode(const cJSON *obj, const struct dra_drivers *d, struct dra_slice *out,
                     char *err, size_t errlen)
{
	const char *name = json_str(obj, "metadata", "name", NULL);
	const char *driver = json_str(obj, "spec", "driver", NULL);
	const cJSON *devs = NULL, *dev;
	char why[DRA_MSG_MAX];

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(obj) || name == NULL || name[0] == '\0' ||
	    copy_str(out->name, sizeof(out->name), name) != 0) {
		errbuf_set(err, errlen, "ResourceSlice: no metadata.name (or one over 253 bytes)");
		return DRA_EINVAL;
	}
	if (driver == NULL || copy_str(out->driver, sizeof(out->driver), driver) != 0 ||
	    copy_str(out->pool, sizeof(out->pool), json_str(obj, "spec", "pool", "name", NULL)) !=
	        0 ||
	    copy_str(out->node, sizeof(out->node), json_str(obj, "spec", "nodeName", NULL)) != 0) {
		errbuf_set(
		    err, errlen,
		    "ResourceSlice %s: spec.driver missing, or spec.driver, spec.pool.name or "
		    "spec.nodeName too long",
		    name);
		return DRA_EINVAL;
	}
	out->ours = dra_driver_ours(d, driver);
	if (!out->ours)
		return 0;
	if (array_at(json_at(obj, "spec", NULL), "devices", &devs) != 0 ||
	    cJSON_GetArraySize(devs) > DRA_SLICE_DEVICES) {
		errbuf_set(err, errlen,
		           "ResourceSlice %s: spec.devices is not a list of at most %d devices",
		           name, DRA_SLICE_DEVICES);
		return DRA_EINVAL;
	}
	cJSON_ArrayForEach(dev, devs)
	{
		if (decode_device(dev, driver, &out->devices[out->n_devices], why, sizeof(why)) !=
		    0) {
			errbuf_set(err, errlen, "ResourceSlice %s: %s", name, why);
			return DRA_EINVAL;
		}
		out->n_devices++;
	}
	return 0;
}

/* A positive count: an integral JSON number. */
static int count_of(const cJSON *v, uint64_t *out)
{
	if (v == NULL) {
		*out = 1; /* exactly.count defaults to 1 */
		return 0;
	}
	if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e9 ||
	    v->valuedouble != (double)(uint64_t)v->valuedouble)
		return -1;
	*out = (uint64_t)v->valuedouble;
	return 0;
}

/* One exactly- or subrequest: count, mode, memory share, into r (the larger of r and it). */
static int decode_exact(const cJSON *ex, const char *claim, struct dra_request *r, char *err,
                        size_t errlen)
{
	const char *mode = json_str(ex, "allocationMode", NULL);
	const cJSON *share = json_at(ex, "capacity", "requests", DRA_CAPACITY_KEY, NULL);
	char what[DRA_NAME_MAX + 96];
	uint64_t count, bytes = 0;

	if (count_of(json_at(ex, "count", NULL), &count) != 0) {
		errbuf_set(err, errlen,
		           "ResourceClaim %s: request %s: count is not a positive integer", claim,
		           r->name);
		return -1;
	}
	snprintf(what, sizeof(what), "ResourceClaim %s: request %s: capacity.requests.memory",
	         claim, r->name);
	if (share != NULL && quantity_of(share, what, &bytes, err, errlen) != 0)
		return -1;
	if (mode != NULL && strcmp(mode, "All") == 0)
		r->all = 1;
	if (count > r->count)
		r->count = count;
	/* Of several subrequests, a whole device is the most; else the largest share. */
	if (r->n_seen++ == 0 || (r->share != 0 && (bytes == 0 || bytes > r->share)))
		r->share = bytes;
	return 0;
}

static int decode_requests(const cJSON *obj, const char *claim, struct dra_claim *out, char *err,
                           size_t errlen)
{
	const cJSON *reqs = NULL, *rq;

	if (array_at(json_at(obj, "spec", "devices", NULL), "requests", &reqs) != 0 ||
	    cJSON_GetArraySize(reqs) > DRA_CLAIM_REQUESTS) {
		errbuf_set(err, errlen,
		           "ResourceClaim %s: spec.devices.requests is not a list of at most %d",
		           claim, DRA_CLAIM_REQUESTS);
		return -1;
	}
	cJSON_ArrayForEach(rq, reqs)
	{
		struct dra_request *r = &out->requests[out->n_requests];
		const cJSON *ex = json_at(rq, "exactly", NULL), *subs = NULL, *s;

		memset(r, 0, sizeof(*r));
		if (copy_str(r->name, sizeof(r->name), json_str(rq, "name", NULL)) != 0) {
			errbuf_set(err, errlen, "ResourceClaim %s: a request name over 63 bytes",
			           claim);
			return -1;
		}
		if (ex != NULL && decode_exact(ex, claim, r, err, errlen) != 0)
			return -1;
		if (array_at(rq, "firstAvailable", &subs) != 0 ||
		    cJSON_GetArraySize(subs) > DRA_CLAIM_REQUESTS) {
			errbuf_set(
			    err, errlen,
			    "ResourceClaim %s: request %s: firstAvailable is not a list of at "
			    "most %d",
			    claim, r->name, DRA_CLAIM_REQUESTS);
			return -1;
		}
		cJSON_ArrayForEach(s,
		                   subs) if (decode_exact(s, claim, r, err, errlen) != 0) return -1;
		if (ex == NULL && subs == NULL)
			r->count = 1;
		out->n_requests++;
	}
	return 0;
}

static int decode_result(const cJSON *res, const char *claim, const struct dra_drivers *d,
                         struct dra_claim *out, char *err, size_t errlen)
{
	struct dra_result *r = &out->results[out->n_results];
	const char *driver = json_str(res, "driver", NULL);
	const cJSON *consumed = json_at(res, "consumedCapacity", DRA_CAPACITY_KEY, NULL);
	char what[DRA_NAME_MAX + 96];

	memset(r, 0, sizeof(*r));
	if (!cJSON_IsObject(res) || driver == NULL ||
	    copy_str(r->driver, sizeof(r->driver), driver) != 0 ||
	    copy_str(r->pool, sizeof(r->pool), json_str(res, "pool", NULL)) != 0 ||
	    copy_str(r->device, sizeof(r->device), json_str(res, "device", NULL)) != 0 ||
	    copy_str(r->request, sizeof(r->request), json_str(res, "request", NULL)) != 0 ||
	    copy_str(r->share_id, sizeof(r->share_id), json_str(res, "shareID", NULL)) != 0) {
		errbuf_set(err, errlen,
		           "ResourceClaim %s: an allocation result without a driver, or with a "
		           "driver, pool, device, request or shareID too long",
		           claim);
		return -1;
	}
	if (!dra_driver_ours(d, driver))
		return 0; /* another driver's device (a NIC): not GPU memory */
	snprintf(what, sizeof(what), "ResourceClaim %s: device %s: consumedCapacity.memory", claim,
	         r->device);
	if (consumed != NULL) {
		if (quantity_of(consumed, what, &r->consumed, err, errlen) != 0)
			return -1;
		r->has_consumed = 1;
	}
	r->admin = cJSON_IsTrue(json_at(res, "adminAccess", NULL));
	out->n_results++;
	return 0;
}

/* The kind of config cfg when it is one this guard reads (dra.h): DRA_CFG_GPU, DRA_CFG_MIG, or
 * -1 (another driver's, another kind, no apiVersion of the NVIDIA driver's group). */
static int config_kind(const cJSON *cfg, const struct dra_drivers *d)
{
	const char *api = json_str(cfg, "opaque", "parameters", "apiVersion", NULL);
	const char *kind = json_str(cfg, "opaque", "parameters", "kind", NULL);
	size_t glen = strlen(DRA_CONFIG_GROUP);

	if (!dra_driver_ours(d, json_str(cfg, "opaque", "driver", NULL)) || api == NULL ||
	    kind == NULL || strncmp(api, DRA_CONFIG_GROUP, glen) != 0 || api[glen] != '/')
		return -1;
	if (strcmp(kind, DRA_CONFIG_GPU) == 0)
		return DRA_CFG_GPU;
	if (strcmp(kind, DRA_CONFIG_MIG) == 0)
		return DRA_CFG_MIG;
	return -1;
}

/* The length in bytes of the white space character that starts s (n bytes), 0 when s starts
 * with none: the space and the non-ASCII spaces of Go's unicode.IsSpace (U+0085, U+00A0,
 * U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000) in UTF-8. Not the ASCII
 * control characters (tab, newline, ...): JSON writes those only escaped, and an escape is not
 * trimmed by the driver (resource.Quantity's UnmarshalJSON trims the raw JSON text). */
static size_t go_space_len(const unsigned char *s, size_t n)
{
	if (n >= 1 && s[0] == ' ')
		return 1;
	if (n >= 2 && s[0] == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0))
		return 2;
	if (n < 3)
		return 0;
	if (s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80)
		return 3;
	if (s[0] == 0xE2 && s[1] == 0x80 &&
	    ((s[2] >= 0x80 && s[2] <= 0x8A) || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
		return 3;
	if (s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F)
		return 3;
	if (s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80)
		return 3;
	return 0;
}

/* A pinned memory limit's bytes. The opaque parameters keep the JSON as written, and the driver
 * reads them with resource.Quantity's UnmarshalJSON, which parses the raw text, unquoted, after
 * strings.TrimSpace: a JSON number is a quantity (10737418240 is read as "10737418240"), and
 * white space around a string's quantity is dropped (go_space_len says which). cJSON has
 * decoded the escapes already, and the driver decodes none (it parses the text between the
 * quotes as written), so any escape the driver refuses is taken here as the character it
 * stands for: an escaped space ("\u0020", "\u00a0") is dropped, "10\u0047i" is 10Gi, and
 * "10Gi\u0000..." is 10Gi (cJSON's string ends at the NUL). That claim is counted with its
 * limit, and its pods do not start (compared with apimachinery v0.37.2's UnmarshalJSON on
 * 2026-12-06: raw UTF-8 spaces, invalid or truncated UTF-8 at either end, strings of spaces
 * alone agree).
 * Every reader of a pinned limit goes through it (decode_mps validates, result_pins matches to
 * the device). */
#define PIN_BEYOND                                                                                 \
	1 /* pinned_quantity_of: a limit past what is read (over 64 characters, or 16Ei            \
	     or more), which the driver may take: read as no limit (the whole device               \
	     counts), else the claim would be unreadable and go uncounted */
static int pinned_quantity_of(const cJSON *v, const char *what, uint64_t *out, char *err,
                              size_t errlen)
{
	char num[64];
	cJSON text = {.type = cJSON_String, .valuestring = num};

	if (cJSON_IsNumber(v)) {
		if (!isfinite(v->valuedouble) || v->valuedouble >= 18446744073709551616.0)
			return PIN_BEYOND; /* Go reads 1e20 and 1e400; cJSON: no uint64_t (inf) */
		snprintf(num, sizeof(num), "%.17g", v->valuedouble);
		v = &text;
	} else if (cJSON_IsString(v) && v->valuestring != NULL) {
		const char *s = v->valuestring;
		size_t n = strlen(s), k;
		char why[128];

		while ((k = go_space_len((const unsigned char *)s, n)) > 0) {
			s += k;
			n -= k;
		}
		for (;;) {
			for (k = 1; k <= 3 && k <= n; k++)
				if (go_space_len((const unsigned char *)s + n - k, k) == k)
					break;
			if (k > 3 || k > n)
				break;
			n -= k;
		}
		int rc = quantity_parse(s, n, out, why, sizeof(why));

		if (rc == QUANTITY_ETOOLONG || rc == QUANTITY_ERANGE)
			return PIN_BEYOND;
		if (rc != 0) {
			errbuf_set(err, errlen, "%s is not a quantity: %s", what, why);
			return -1;
		}
		return 0;
	}
	return quantity_of(v, what, out, err, errlen);
}

/* A pinned memory limit as the driver takes it: pinned_quantity_of, at least DRA_MIN_PINNED;
 * PIN_BEYOND gives 0, no limit. */
static int pinned_of(const cJSON *v, const char *what, uint64_t *out, char *err, size_t errlen)
{
	int rc = pinned_quantity_of(v, what, out, err, errlen);

	if (rc == PIN_BEYOND) {
		*out = 0;
		return 0;
	}
	if (rc != 0)
		return -1;
	if (*out < DRA_MIN_PINNED) {
		errbuf_set(err, errlen, "%s is under 1Mi (the driver refuses it)", what);
		return -1;
	}
	return 0;
}

/* MPS's pinned limit of mpsConfig mps (may be NULL): the default's, raised to the largest
 * per-device limit when both are set (dra.h); 0 when no default. */
static int decode_mps(const cJSON *mps, const char *where, uint64_t *pinned, char *err,
                      size_t errlen)
{
	const cJSON *def = json_at(mps, "defaultPinnedDeviceMemoryLimit", NULL);
	const cJSON *per = json_at(mps, "defaultPerDevicePinnedMemoryLimit", NULL), *e;
	char what[DRA_NAME_MAX + 160];
	uint64_t b;

	*pinned = 0;
	if (mps != NULL && !cJSON_IsNull(mps) && !cJSON_IsObject(mps)) {
		errbuf_set(err, errlen, "%s: sharing.mpsConfig is not an object", where);
		return -1;
	}
	snprintf(what, sizeof(what), "%s: sharing.mpsConfig.defaultPinnedDeviceMemoryLimit", where);
	if (def != NULL && !cJSON_IsNull(def) && pinned_of(def, what, pinned, err, errlen) != 0)
		return -1;
	if (per == NULL || cJSON_IsNull(per))
		return 0;
	if (!cJSON_IsObject(per)) {
		errbuf_set(
		    err, errlen,
		    "%s: sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit is not a map of "
		    "device index or UUID to a quantity",
		    where);
		return -1;
	}
	cJSON_ArrayForEach(e, per)
	{
		snprintf(what, sizeof(what),
		         "%s: sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[%.40s]", where,
		         e->string ? e->string : "");
		if (pinned_of(e, what, &b, err, errlen) != 0)
			return -1;
		if (b == 0) /* beyond what is read: the largest is no limit */
			*pinned = 0;
		if (*pinned > 0 && b > *pinned)
			*pinned = b;
	}
	return 0;
}

/* The sharing of config cfg (one of ours), into *strategy and *pinned; -1 with err when it is
 * malformed. where names the config in errors. */
static int decode_sharing(const cJSON *cfg, const char *where, uint8_t *strategy, uint64_t *pinned,
                          char *err, size_t errlen)
{
	const cJSON *sh = json_at(cfg, "opaque", "parameters", "sharing", NULL);
	const char *st = json_str(sh, "strategy", NULL);
	const cJSON *ts = json_at(sh, "timeSlicingConfig", NULL);
	const cJSON *mps = json_at(sh, "mpsConfig", NULL);

	*strategy = DRA_SHARING_NONE;
	*pinned = 0;
	if (sh == NULL || cJSON_IsNull(sh))
		return 0;
	if (!cJSON_IsObject(sh)) {
		errbuf_set(err, errlen, "%s: sharing is not an object", where);
		return -1;
	}
	if (st != NULL && strcmp(st, "TimeSlicing") == 0) {
		if (mps != NULL && !cJSON_IsNull(mps)) {
			errbuf_set(err, errlen,
			           "%s: sharing.mpsConfig with strategy TimeSlicing (the driver "
			           "refuses it)",
			           where);
			return -1;
		}
		*strategy = DRA_SHARING_TIME_SLICING;
		return 0;
	}
	if (st != NULL && strcmp(st, "MPS") == 0) {
		if (ts != NULL && !cJSON_IsNull(ts)) {
			errbuf_set(err, errlen,
			           "%s: sharing.timeSlicingConfig with strategy MPS (the driver "
			           "refuses it)",
			           where);
			return -1;
		}
		*strategy = DRA_SHARING_MPS;
		return decode_mps(mps, where, pinned, err, errlen);
	}
	if (st == NULL)
		errbuf_set(err, errlen,
		           "%s: sharing.strategy is missing or not a string (TimeSlicing or MPS)",
		           where);
	else
		errbuf_set(err, errlen,
		           "%s: sharing.strategy \"%.40s\" is not TimeSlicing or MPS (the NVIDIA "
		           "driver's strategies)",
		           where, st);
	return -1;
}

/* Whether config cfg names request req ("gpu", or "gpu/sub": naming "gpu" names it too); 0
 * when it names none (-1: it names no request, so applies by kind). */
static int config_names(const cJSON *cfg, const char *req)
{
	const cJSON *names = json_at(cfg, "requests", NULL), *n;
	const char *slash = strchr(req, '/');
	size_t plen = slash ? (size_t)(slash - req) : strlen(req);

	if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) == 0)
		return -1;
	cJSON_ArrayForEach(n, names) if (cJSON_IsString(n) &&
	                                 (strcmp(n->valuestring, req) == 0 ||
	                                  (strlen(n->valuestring) == plen &&
	                                   strncmp(n->valuestring, req, plen) == 0))) return 1;
	return 0;
}

/* The configs (status.allocation.devices.config when the allocation has them, else
 * spec.devices.config) into *out (NULL: none); each of ours whose sharing is malformed is an
 * error. */
static int decode_configs(const cJSON *obj, const char *claim, const struct dra_drivers *d,
                          const cJSON **out, char *err, size_t errlen)
{
	const cJSON *alloc = json_at(obj, "status", "allocation", "devices", "config", NULL), *cfg;
	int from_alloc = alloc != NULL && !cJSON_IsNull(alloc);
	const char *field = from_alloc ? "status.allocation.devices.config" : "spec.devices.config";
	char where[DRA_NAME_MAX + 80];
	uint64_t pinned;
	uint8_t st;
	int i = 0;

	/* An allocation copies the claim's configs and adds the class's; one without (hand-made,
	 * or written before) has only the spec's. */
	if (array_at(from_alloc ? json_at(obj, "status", "allocation", "devices", NULL)
	                        : json_at(obj, "spec", "devices", NULL),
	             "config", out) != 0 ||
	    cJSON_GetArraySize(*out) > DRA_CLAIM_CONFIGS) {
		errbuf_set(err, errlen, "ResourceClaim %s: %s is not a list of at most %d", claim,
		           field, DRA_CLAIM_CONFIGS);
		return -1;
	}
	cJSON_ArrayForEach(cfg, *out)
	{
		snprintf(where, sizeof(where), "ResourceClaim %s: %s[%d]", claim, field, i++);
		if (config_kind(cfg, d) >= 0 &&
		    decode_sharing(cfg, where, &st, &pinned, err, errlen) != 0)
			return -1;
	}
	return 0;
}

/* Whether a per-device key is an index (the driver: not a UUID of its devices, then
 * strconv.Atoi); only plain digits are read as one, a sign is left unmatched. */
static int index_key(const char *k)
{
	if (k == NULL || *k == '\0')
		return 0;
	for (; *k; k++)
		if (*k < '0' || *k > '9')
			return 0;
	return 1;
}

/* MPS config mps's limits into *p, to match to the device (dra_result_pinned); sole: the claim
 * has one result of ours. Validated by decode_configs: the quantities parse. */
static void result_pins(const cJSON *mps, int sole, struct dra_pin *p)
{
	const cJSON *e;

	memset(p, 0, sizeof(*p));
	(void)pinned_quantity_of(json_at(mps, "defaultPinnedDeviceMemoryLimit", NULL), "", &p->def,
	                         NULL, 0);
	cJSON_ArrayForEach(e, json_at(mps, "defaultPerDevicePinnedMemoryLimit", NULL))
	{
		uint64_t b = 0;

		(void)pinned_quantity_of(e, "", &b, NULL, 0);
		if (index_key(e->string)) {
			if (sole && strspn(e->string, "0") == strlen(e->string)) /* index 0 */
				p->own = b;
			else
				p->unmatched = 1; /* another device's, or one of several */
		} else if (p->n_keys < DRA_PIN_KEYS &&
		           copy_str(p->uuid[p->n_keys], DRA_DEV_UUID_MAX, e->string) == 0) {
			p->bytes[p->n_keys++] = b;
		} else {
			p->unmatched = 1;
		}
	}
}

uint64_t dra_result_pinned(const struct dra_result *r, int k, const char *uuid)
{
	const struct dra_pin *p;
	int known = uuid != NULL && uuid[0] != '\0';

	if (k < 0 || k > 1 || r->sharing[k] != DRA_SHARING_MPS)
		return 0;
	p = &r->pin[k];
	for (size_t i = 0; known && i < p->n_keys; i++)
		if (strcmp(p->uuid[i], uuid) == 0)
			return p->bytes[i];
	if (p->own > 0)
		return p->own;
	if (!p->unmatched && (known || p->n_keys == 0))
		return p->def; /* no key names it: the default (0: not pinned) */
	return r->pinned[k];
}

/* The sharing of result r's device when it is of kind (DRA_CFG_GPU / DRA_CFG_MIG), by the
 * driver's precedence (dra.h): the claim's configs, then the class's, each from the last. sole:
 * the claim has this one result of ours. */
static void result_sharing(const cJSON *configs, const struct dra_drivers *d, struct dra_result *r,
                           int kind, int sole)
{
	int n = cJSON_GetArraySize(configs);

	for (int pass = 0; pass < 2; pass++)
		for (int i = n - 1; i >= 0; i--) {
			const cJSON *cfg = cJSON_GetArrayItem(configs, i);
			const char *src = json_str(cfg, "source", NULL);
			int from_class = src != NULL && strcmp(src, "FromClass") == 0;
			int k = config_kind(cfg, d), named;

			if (k < 0 || from_class != (pass == 1))
				continue;
			named = config_names(cfg, r->request);
			if (named == 0 || (named < 0 && k != kind))
				continue;
			/* validated by decode_configs: cannot fail */
			(void)decode_sharing(cfg, "", &r->sharing[kind], &r->pinned[kind], NULL, 0);
			if (r->sharing[kind] != DRA_SHARING_MPS)
				r->pinned[kind] = 0;
			else
				result_pins(json_at(cfg, "opaque", "parameters", "sharing",
				                    "mpsConfig", NULL),
				            sole, &r->pin[kind]);
			return;
		}
}

static int decode_status(const cJSON *obj, const char *claim, const struct dra_drivers *d,
                         struct dra_claim *out, char *err, size_t errlen)
{
	const cJSON *results = NULL, *res, *rsv = NULL, *ref, *configs = NULL;
	const cJSON *alloc = json_at(obj, "status", "allocation", NULL);

	out->allocated = cJSON_IsObject(alloc);
	if (array_at(json_at(alloc, "devices", NULL), "results", &results) != 0 ||
	    cJSON_GetArraySize(results) > DRA_CLAIM_RESULTS) {
		errbuf_set(
		    err, errlen,
		    "ResourceClaim %s: status.allocation.devices.results is not a list of at "
		    "most %d",
		    claim, DRA_CLAIM_RESULTS);
		return -1;
	}
	cJSON_ArrayForEach(res, results) if (decode_result(res, claim, d, out, err, errlen) !=
	                                     0) return -1;
	if (decode_configs(obj, claim, d, &configs, err, errlen) != 0)
		return -1;
	for (size_t i = 0; configs != NULL && i < out->n_results; i++) {
		result_sharing(configs, d, &out->results[i], DRA_CFG_GPU, out->n_results == 1);
		result_sharing(configs, d, &out->results[i], DRA_CFG_MIG, out->n_results == 1);
	}
	if (array_at(json_at(obj, "status", NULL), "reservedFor", &rsv) != 0 ||
	    cJSON_GetArraySize(rsv) > DRA_CLAIM_RESERVED) {
		errbuf_set(err, errlen,
		           "ResourceClaim %s: status.reservedFor is not a list of at most %d",
		           claim, DRA_CLAIM_RESERVED);
		return -1;
	}
	cJSON_ArrayForEach(ref, rsv)
	{
		const char *res_name = json_str(ref, "resource", NULL);
		const char *group = json_str(ref, "apiGroup", NULL);
		const char *uid = json_str(ref, "uid", NULL);

		if (res_name == NULL || strcmp(res_name, "pods") != 0 ||
		    (group != NULL && group[0] != '\0'))
			continue; /* not a pod: nothing this guard counts by */
		if (uid == NULL || uid[0] == '\0' ||
		    copy_str(out->reserved[out->n_reserved], DRA_UID_MAX, uid) != 0 ||
		    copy_str(out->reserved_names[out->n_reserved], DRA_NAME_MAX,
		             json_str(ref, "name", NULL)) != 0) {
			errbuf_set(
			    err, errlen,
			    "ResourceClaim %s: a reservedFor pod without a uid (or a uid over 63 "
			    "bytes, a name over 253)",
			    claim);
			return -1;
		}
		out->n_reserved++;
	}
	return 0;
}

/* The controller ownerReference's uid, "" when none. */
static int decode_owner(const cJSON *obj, struct dra_claim *out)
{
	const cJSON *refs = NULL, *ref;

	if (array_at(json_at(obj, "metadata", NULL), "ownerReferences", &refs) != 0)
		return -1;
	cJSON_ArrayForEach(
	    ref, refs) if (cJSON_IsTrue(json_at(ref, "controller",
	                                        NULL))) return copy_str(out->owner,
	                                                                sizeof(out->owner),
	                                                                json_str(ref, "uid", NULL));
	return 0;
}

int dra_claim_decode(const cJSON *obj, const struct dra_drivers *d, struct dra_claim *out,
                     char *err, size_t errlen)
{
	const char *name = json_str(obj, "metadata", "name", NULL);

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(obj) || name == NULL || name[0] == '\0' ||
	    copy_str(out->name, sizeof(out->name), name) != 0) {
		errbuf_set(err, errlen, "ResourceClaim: no metadata.name (or one over 253 bytes)");
		return DRA_EINVAL;
	}
	if (copy_str(out->ns, sizeof(out->ns), json_str(obj, "metadata", "namespace", NULL)) != 0 ||
	    copy_str(out->uid, sizeof(out->uid), json_str(obj, "metadata", "uid", NULL)) != 0 ||
	    decode_owner(obj, out) != 0) {
		errbuf_set(
		    err, errlen,
		    "ResourceClaim %s: metadata.namespace, uid or an owner's uid too long, or "
		    "ownerReferences not a list",
		    name);
		return DRA_EINVAL;
	}
	out->extended = json_at(obj, "metadata", "annotations", DRA_ANN_EXTENDED, NULL) != NULL;
	if (copy_str(out->pod_claim, sizeof(out->pod_claim),
	             json_str(obj, "metadata", "annotations", DRA_ANN_POD_CLAIM, NULL)) != 0)
		out->pod_claim[0] = '\0'; /* not a pod claim's name: not a template's claim */
	if (decode_requests(obj, name, out, err, errlen) != 0 ||
	    decode_status(obj, name, d, out, err, errlen) != 0)
		return DRA_EINVAL;
	return 0;
}

static int add_ref(struct dra_pod_refs *out, const char *name, char *err, size_t errlen)
{
	for (size_t i = 0; i < out->n; i++)
		if (strcmp(out->names[i], name) == 0)
			return 0;
	if (out->n == DRA_POD_CLAIMS || copy_str(out->names[out->n], DRA_NAME_MAX, name) != 0) {
		errbuf_set(err, errlen,
		           "pod claims: more than %d, or a claim name over 253 bytes (%.64s)",
		           DRA_POD_CLAIMS, name);
		return -1;
	}
	out->n++;
	return 0;
}

int dra_pod_refs(const cJSON *pod, struct dra_pod_refs *out, char *err, size_t errlen)
{
	const cJSON *claims = NULL, *statuses = NULL, *c, *s;
	const char *ext =
	    json_str(pod, "status", "extendedResourceClaimStatus", "resourceClaimName", NULL);

	memset(out, 0, sizeof(*out));
	if (array_at(json_at(pod, "spec", NULL), "resourceClaims", &claims) != 0 ||
	    array_at(json_at(pod, "status", NULL), "resourceClaimStatuses", &statuses) != 0) {
		errbuf_set(err, errlen,
		           "spec.resourceClaims or status.resourceClaimStatuses is not a list");
		return DRA_EINVAL;
	}
	cJSON_ArrayForEach(c, claims)
	{
		const char *direct = json_str(c, "resourceClaimName", NULL);
		const char *local = json_str(c, "name", NULL);
		const char *generated = NULL;

		out->any = 1;
		if (direct != NULL) {
			if (add_ref(out, direct, err, errlen) != 0)
				return DRA_EINVAL;
			continue;
		}
		cJSON_ArrayForEach(s, statuses)
		{
			const char *n = json_str(s, "name", NULL);
			if (n != NULL && local != NULL && strcmp(n, local) == 0)
				generated = json_str(s, "resourceClaimName", NULL);
		}
		if (generated == NULL)
			out->n_templates++;
		else if (add_ref(out, generated, err, errlen) != 0)
			return DRA_EINVAL;
	}
	if (ext != NULL && ext[0] != '\0') {
		out->any = 1;
		if (copy_str(out->extended, sizeof(out->extended), ext) != 0 ||
		    add_ref(out, ext, err, errlen) != 0) {
			errbuf_set(err, errlen,
			           "status.extendedResourceClaimStatus: name too long");
			return DRA_EINVAL;
		}
	}
	return 0;
}

uint64_t dra_result_bytes(const struct dra_result *r, uint64_t device_memory)
{
	return r->has_consumed ? r->consumed : device_memory;
}

uint64_t dra_request_max_bytes(const struct dra_request *r, size_t n, const struct dra_gpus *g)
{
	uint64_t sum = 0;

	if (g == NULL || g->n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t k = r[i].all || r[i].count > g->n ? g->n : r[i].count;
		uint64_t each = r[i].share && r[i].share < g->max_bytes ? r[i].share : g->max_bytes;

		sum = sat_add(sum, sat_mul(k, each));
	}
	return sum < g->bytes ? sum : g->bytes;
}
