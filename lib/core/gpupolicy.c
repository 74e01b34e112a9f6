/*
 * gpupolicy: GPUMemoryPolicy objects decoded, matched and applied (the contract is
 * gpupolicy.h). Pure: no I/O, no clock, no globals; only gpupolicy_parse() allocates, and
 * only it touches cJSON.
 */
#include "gpupolicy.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "quantity.h"
#include "satmath.h"

#define ERRPATH_MAX 160 /* a JSON path in an error: "spec.tiers[15].podSelector.matchExpr..." */
#define KEY_SHOWN   63  /* bytes of a matchLabels key shown in a path */
#define GOT_MAX     96  /* what a wrong value is described as */

/* ---- ratios at parts per million (quantity.h) ---- */

/* floor(bytes x ratio) at ppm (quantity.h's rule; a ratio outside (0,1] is clamped there). */
static uint64_t share_of(uint64_t bytes, double ratio)
{
	return quantity_ppm_of(bytes, quantity_ratio_ppm(ratio));
}

/* ---- errors ---- */

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return GPUPOLICY_EINVAL;
}

/* A JSON path for errors; a path longer than ERRPATH_MAX is cut (it is only shown). */
static void subpath(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void subpath(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
}

/* What a value is, for "got ...": 1.5, true, null, "abc", an object, an array, nothing. */
static const char *got(const cJSON *v, char *buf, size_t cap)
{
	if (v == NULL)
		snprintf(buf, cap, "nothing");
	else if (cJSON_IsNumber(v))
		snprintf(buf, cap, "%g", v->valuedouble);
	else if (cJSON_IsTrue(v))
		snprintf(buf, cap, "true");
	else if (cJSON_IsFalse(v))
		snprintf(buf, cap, "false");
	else if (cJSON_IsNull(v))
		snprintf(buf, cap, "null");
	else if (cJSON_IsString(v) && v->valuestring != NULL)
		snprintf(buf, cap, "\"%.40s%s\"", v->valuestring,
		         strlen(v->valuestring) > 40 ? "..." : "");
	else if (cJSON_IsObject(v))
		snprintf(buf, cap, "an object");
	else if (cJSON_IsArray(v))
		snprintf(buf, cap, "an array");
	else
		snprintf(buf, cap, "an invalid value");
	return buf;
}

/* A field of obj; a JSON null counts as absent (the API server prunes nulls of fields that
 * are not nullable, so a null never means anything here). */
static const cJSON *field(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	return cJSON_IsNull(v) ? NULL : v;
}

/* A ratio field: 0 and *out when absent (*has 0) or in (0,1] (*has 1), else EINVAL. */
static int parse_ratio(const cJSON *v, const char *path, int *has, double *out, char *err,
                       size_t errlen)
{
	char g[GOT_MAX];

	*has = 0;
	if (v == NULL)
		return 0;
	if (!cJSON_IsNumber(v) || !(v->valuedouble > 0.0 && v->valuedouble <= 1.0))
		return fail(err, errlen, "%s: must be a number in (0, 1], got %s", path,
		            got(v, g, sizeof(g)));
	*has = 1;
	*out = v->valuedouble;
	return 0;
}

/* ---- freeing (every count is set before its elements are made: NULL elements are fine) ---- */

static void free_strings(char **s, size_t n)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(s[i]);
	free(s);
}

static void free_selector(struct labelsel *sel)
{
	if (sel->reqs == NULL)
		return;
	for (size_t i = 0; i < sel->n; i++) {
		free(sel->reqs[i].key);
		free_strings(sel->reqs[i].values, sel->reqs[i].n_values);
	}
	free(sel->reqs);
	sel->reqs = NULL;
	sel->n = 0;
}

void gpupolicy_free(struct gpupolicy *p)
{
	if (p == NULL)
		return;
	free_selector(&p->node_selector);
	for (size_t i = 0; i < p->n_tiers && i < GPUPOLICY_TIERS_MAX; i++) {
		struct gpupolicy_tier *t = &p->tiers[i];

		free_strings(t->priority_classes, t->n_priority_classes);
		free_strings(t->namespaces, t->n_namespaces);
		free_selector(&t->pod_selector);
	}
	free(p);
}

/* ---- selectors ---- */

/* values of a matchExpression into r (r->values allocated here). */
static int parse_values(const cJSON *vals, const char *path, struct labelsel_req *r, char *err,
                        size_t errlen)
{
	char g[GOT_MAX];
	int n;

	if (vals != NULL && !cJSON_IsArray(vals))
		return fail(err, errlen, "%s.values: must be an array of strings, got %s", path,
		            got(vals, g, sizeof(g)));
	n = vals != NULL ? cJSON_GetArraySize(vals) : 0;
	if ((r->op == LABELSEL_IN || r->op == LABELSEL_NOTIN) && n == 0)
		return fail(err, errlen, "%s.values: must have at least one value for %s", path,
		            r->op == LABELSEL_IN ? "In" : "NotIn");
	if ((r->op == LABELSEL_EXISTS || r->op == LABELSEL_DOESNOTEXIST) && n > 0)
		return fail(err, errlen, "%s.values: must be empty for %s", path,
		            r->op == LABELSEL_EXISTS ? "Exists" : "DoesNotExist");
	if (n > GPUPOLICY_LIST_MAX)
		return fail(err, errlen, "%s.values: at most %d values, got %d", path,
		            GPUPOLICY_LIST_MAX, n);
	if (n == 0)
		return 0;
	r->values = calloc((size_t)n, sizeof(*r->values));
	if (r->values == NULL)
		return GPUPOLICY_ENOMEM;
	r->n_values = (size_t)n;
	for (int i = 0; i < n; i++) {
		const cJSON *v = cJSON_GetArrayItem(vals, i);

		/* A label value may be empty (k8s: "" is a valid value). */
		if (!cJSON_IsString(v) || v->valuestring == NULL)
			return fail(err, errlen, "%s.values[%d]: must be a string, got %s", path, i,
			            got(v, g, sizeof(g)));
		r->values[i] = strdup(v->valuestring);
		if (r->values[i] == NULL)
			return GPUPOLICY_ENOMEM;
	}
	return 0;
}

static int parse_op(const cJSON *op, enum labelsel_op *out)
{
	static const char *const names[] = {"In", "NotIn", "Exists", "DoesNotExist"};

	if (!cJSON_IsString(op) || op->valuestring == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(op->valuestring, names[i]) == 0) {
			*out = (enum labelsel_op)i;
			return 0;
		}
	return -1;
}

static int parse_expression(const cJSON *e, const char *path, struct labelsel_req *r, char *err,
                            size_t errlen)
{
	char g[GOT_MAX];
	const cJSON *key, *op;

	if (!cJSON_IsObject(e))
		return fail(err, errlen, "%s: must be an object, got %s", path,
		            got(e, g, sizeof(g)));
	key = field(e, "key");
	if (!cJSON_IsString(key) || key->valuestring == NULL || key->valuestring[0] == '\0')
		return fail(err, errlen, "%s.key: must be a non-empty string, got %s", path,
		            got(key, g, sizeof(g)));
	op = field(e, "operator");
	if (parse_op(op, &r->op) != 0)
		return fail(err, errlen,
		            "%s.operator: must be one of In, NotIn, Exists, DoesNotExist, got %s",
		            path, got(op, g, sizeof(g)));
	r->key = strdup(key->valuestring);
	if (r->key == NULL)
		return GPUPOLICY_ENOMEM;
	return parse_values(field(e, "values"), path, r, err, errlen);
}

/* matchLabels k: v into r as "k In [v]". */
static int parse_match_label(const cJSON *kv, const char *path, struct labelsel_req *r, char *err,
                             size_t errlen)
{
	char g[GOT_MAX];

	if (kv->string == NULL || kv->string[0] == '\0')
		return fail(err, errlen, "%s.matchLabels: a key must not be empty", path);
	if (!cJSON_IsString(kv) || kv->valuestring == NULL)
		return fail(err, errlen, "%s.matchLabels.%.*s: must be a string, got %s", path,
		            KEY_SHOWN, kv->string, got(kv, g, sizeof(g)));
	r->op = LABELSEL_IN;
	r->key = strdup(kv->string);
	if (r->key == NULL)
		return GPUPOLICY_ENOMEM;
	r->values = calloc(1, sizeof(*r->values));
	if (r->values == NULL)
		return GPUPOLICY_ENOMEM;
	r->n_values = 1;
	r->values[0] = strdup(kv->valuestring);
	return r->values[0] == NULL ? GPUPOLICY_ENOMEM : 0;
}

/*
 * A LabelSelector at path (v non-NULL) into sel, with the rules of apimachinery's
 * LabelSelectorAsSelector: In/NotIn need values, Exists/DoesNotExist take none; matchLabels
 * and matchExpressions are ANDed. sel->reqs is allocated here (freed by free_selector()).
 */
static int parse_selector(const cJSON *v, const char *path, struct labelsel *sel, char *err,
                          size_t errlen)
{
	char g[GOT_MAX], sub[ERRPATH_MAX];
	const cJSON *ml, *me, *kv;
	int nl, ne, i = 0, rc;

	if (!cJSON_IsObject(v))
		return fail(err, errlen, "%s: must be an object, got %s", path,
		            got(v, g, sizeof(g)));
	ml = field(v, "matchLabels");
	me = field(v, "matchExpressions");
	if (ml != NULL && !cJSON_IsObject(ml))
		return fail(err, errlen, "%s.matchLabels: must be an object, got %s", path,
		            got(ml, g, sizeof(g)));
	if (me != NULL && !cJSON_IsArray(me))
		return fail(err, errlen, "%s.matchExpressions: must be an array, got %s", path,
		            got(me, g, sizeof(g)));
	nl = ml != NULL ? cJSON_GetArraySize(ml) : 0;
	ne = me != NULL ? cJSON_GetArraySize(me) : 0;
	if (nl + ne > GPUPOLICY_EXPR_MAX)
		return fail(
		    err, errlen,
		    "%s: at most %d requirements (matchLabels and matchExpressions), got %d", path,
		    GPUPOLICY_EXPR_MAX, nl + ne);
	if (nl + ne == 0)
		return 0;
	sel->reqs = calloc((size_t)(nl + ne), sizeof(*sel->reqs));
	if (sel->reqs == NULL)
		return GPUPOLICY_ENOMEM;
	sel->n = (size_t)(nl + ne);
	cJSON_ArrayForEach(kv, ml)
	{
		rc = parse_match_label(kv, path, &sel->reqs[i++], err, errlen);
		if (rc != 0)
			return rc;
	}
	for (int j = 0; j < ne; j++) {
		subpath(sub, sizeof(sub), "%s.matchExpressions[%d]", path, j);
		rc = parse_expression(cJSON_GetArrayItem(me, j), sub, &sel->reqs[i++], err, errlen);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* ---- tiers ---- */

/* A DNS label (RFC 1123): 1..63 of [a-z0-9-], alphanumeric first and last. */
static int dns_label(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* A DNS subdomain (RFC 1123), the rule the API server applies to a custom resource's name:
 * DNS labels joined by '.', 1..253 bytes. Checked here too because the name is printed in
 * messages: a subdomain has no '%' (see policy.h) and nothing to escape. */
static int dns_subdomain(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= GPUPOLICY_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		int alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');
		int edge = i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.';

		if (!alnum && !(s[i] == '-' && !edge) && !(s[i] == '.' && i > 0 && i < n - 1))
			return 0;
		if (s[i] == '.' && (s[i - 1] == '.' || s[i - 1] == '-'))
			return 0;
	}
	return 1;
}

/* A list of non-empty strings (at most GPUPOLICY_LIST_MAX) into *out, *n. */
static int parse_list(const cJSON *v, const char *path, char ***out, size_t *n, char *err,
                      size_t errlen)
{
	char g[GOT_MAX];
	int len;

	if (v == NULL)
		return 0;
	if (!cJSON_IsArray(v))
		return fail(err, errlen, "%s: must be an array of strings, got %s", path,
		            got(v, g, sizeof(g)));
	len = cJSON_GetArraySize(v);
	if (len > GPUPOLICY_LIST_MAX)
		return fail(err, errlen, "%s: at most %d entries, got %d", path, GPUPOLICY_LIST_MAX,
		            len);
	if (len == 0)
		return 0;
	*out = calloc((size_t)len, sizeof(**out));
	if (*out == NULL)
		return GPUPOLICY_ENOMEM;
	*n = (size_t)len;
	for (int i = 0; i < len; i++) {
		const cJSON *s = cJSON_GetArrayItem(v, i);

		if (!cJSON_IsString(s) || s->valuestring == NULL || s->valuestring[0] == '\0')
			return fail(err, errlen, "%s[%d]: must be a non-empty string, got %s", path,
			            i, got(s, g, sizeof(g)));
		(*out)[i] = strdup(s->valuestring);
		if ((*out)[i] == NULL)
			return GPUPOLICY_ENOMEM;
	}
	return 0;
}

/* yield's own fields (its tier is resolved once every tier is known: resolve_yield()). */
static int parse_yield(const cJSON *y, const char *path, struct gpupolicy_tier *t, char *err,
                       size_t errlen)
{
	char g[GOT_MAX], sub[ERRPATH_MAX];
	const cJSON *tier;
	int has;

	if (!cJSON_IsObject(y))
		return fail(err, errlen, "%s: must be an object {tier, above}, got %s", path,
		            got(y, g, sizeof(g)));
	tier = field(y, "tier");
	if (!cJSON_IsString(tier) || tier->valuestring == NULL || tier->valuestring[0] == '\0')
		return fail(err, errlen, "%s.tier: must be the name of another tier, got %s", path,
		            got(tier, g, sizeof(g)));
	subpath(sub, sizeof(sub), "%s.above", path);
	if (field(y, "above") == NULL)
		return fail(err, errlen, "%s: required, a number in (0, 1]", sub);
	return parse_ratio(field(y, "above"), sub, &has, &t->yield_above, err, errlen);
}

static int parse_tier(const cJSON *v, const char *path, struct gpupolicy_tier *t, char *err,
                      size_t errlen)
{
	char g[GOT_MAX], sub[ERRPATH_MAX];
	const cJSON *name, *ps, *y;
	int rc;

	t->yield_to = -1;
	if (!cJSON_IsObject(v))
		return fail(err, errlen, "%s: must be an object, got %s", path,
		            got(v, g, sizeof(g)));
	name = field(v, "name");
	if (!cJSON_IsString(name) || name->valuestring == NULL || !dns_label(name->valuestring))
		return fail(err, errlen,
		            "%s.name: must be a DNS label (1 to 63 characters of a-z, 0-9 and -, "
		            "starting and ending with a letter or digit), got %s",
		            path, got(name, g, sizeof(g)));
	snprintf(t->name, sizeof(t->name), "%s", name->valuestring);
	subpath(sub, sizeof(sub), "%s.priorityClassNames", path);
	rc = parse_list(field(v, "priorityClassNames"), sub, &t->priority_classes,
	                &t->n_priority_classes, err, errlen);
	if (rc != 0)
		return rc;
	subpath(sub, sizeof(sub), "%s.namespaces", path);
	rc = parse_list(field(v, "namespaces"), sub, &t->namespaces, &t->n_namespaces, err, errlen);
	if (rc != 0)
		return rc;
	ps = field(v, "podSelector");
	if (ps != NULL) {
		subpath(sub, sizeof(sub), "%s.podSelector", path);
		rc = parse_selector(ps, sub, &t->pod_selector, err, errlen);
		if (rc != 0)
			return rc;
		t->has_pod_selector = 1;
	}
	if (t->n_priority_classes == 0 && t->n_namespaces == 0 && !t->has_pod_selector)
		return fail(
		    err, errlen,
		    "%s: needs at least one of priorityClassNames, namespaces (non-empty) or "
		    "podSelector",
		    path);
	subpath(sub, sizeof(sub), "%s.maxShare", path);
	rc = parse_ratio(field(v, "maxShare"), sub, &t->has_max_share, &t->max_share, err, errlen);
	if (rc != 0)
		return rc;
	y = field(v, "yield");
	if (y == NULL)
		return 0;
	subpath(sub, sizeof(sub), "%s.yield", path);
	return parse_yield(y, sub, t, err, errlen);
}

/* Tier i's yield.tier names another tier of p that has a maxShare (declared anywhere). */
static int resolve_yield(struct gpupolicy *p, size_t i, const char *to, char *err, size_t errlen)
{
	for (size_t j = 0; j < p->n_tiers; j++) {
		if (strcmp(p->tiers[j].name, to) != 0)
			continue;
		if (j == i)
			return fail(err, errlen,
			            "spec.tiers[%zu].yield.tier: a tier cannot yield to "
			            "itself (\"%s\")",
			            i, to);
		if (!p->tiers[j].has_max_share)
			return fail(
			    err, errlen,
			    "spec.tiers[%zu].yield.tier: tier \"%s\" has no maxShare to yield "
			    "to",
			    i, to);
		p->tiers[i].yield_to = (int)j;
		return 0;
	}
	return fail(err, errlen,
	            "spec.tiers[%zu].yield.tier: \"%.63s\" is not a tier of this policy", i, to);
}

static int parse_tiers(const cJSON *v, struct gpupolicy *p, char *err, size_t errlen)
{
	char g[GOT_MAX], path[ERRPATH_MAX];
	int n, rc;

	if (v == NULL)
		return 0;
	if (!cJSON_IsArray(v))
		return fail(err, errlen, "spec.tiers: must be an array, got %s",
		            got(v, g, sizeof(g)));
	n = cJSON_GetArraySize(v);
	if (n > GPUPOLICY_TIERS_MAX)
		return fail(err, errlen, "spec.tiers: at most %d tiers, got %d",
		            GPUPOLICY_TIERS_MAX, n);
	p->n_tiers = (size_t)n;
	for (int i = 0; i < n; i++) {
		subpath(path, sizeof(path), "spec.tiers[%d]", i);
		rc = parse_tier(cJSON_GetArrayItem(v, i), path, &p->tiers[i], err, errlen);
		if (rc != 0)
			return rc;
		for (int j = 0; j < i; j++)
			if (strcmp(p->tiers[j].name, p->tiers[i].name) == 0)
				return fail(err, errlen, "%s.name: \"%s\" is used by tiers[%d] too",
				            path, p->tiers[i].name, j);
	}
	/* Second pass: a tier may yield to one declared after it. */
	for (int i = 0; i < n; i++) {
		const cJSON *y = field(cJSON_GetArrayItem(v, i), "yield");

		if (y == NULL)
			continue;
		rc = resolve_yield(p, (size_t)i, field(y, "tier")->valuestring, err, errlen);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* ---- the object ---- */

static int parse_metadata(const cJSON *obj, struct gpupolicy *p, char *err, size_t errlen)
{
	char g[GOT_MAX];
	const cJSON *md = field(obj, "metadata"), *name, *gen;
	double d;

	if (!cJSON_IsObject(md))
		return fail(err, errlen, "metadata: required, an object, got %s",
		            got(md, g, sizeof(g)));
	name = field(md, "name");
	if (!cJSON_IsString(name) || name->valuestring == NULL || name->valuestring[0] == '\0')
		return fail(err, errlen, "metadata.name: required, a non-empty string, got %s",
		            got(name, g, sizeof(g)));
	if (strlen(name->valuestring) >= GPUPOLICY_NAME_MAX)
		return fail(err, errlen, "metadata.name: at most %d bytes, got %zu",
		            GPUPOLICY_NAME_MAX - 1, strlen(name->valuestring));
	if (!dns_subdomain(name->valuestring))
		return fail(
		    err, errlen,
		    "metadata.name: must be a DNS subdomain (a-z, 0-9, - and ., starting and "
		    "ending with a letter or digit), got %s",
		    got(name, g, sizeof(g)));
	snprintf(p->name, sizeof(p->name), "%s", name->valuestring);
	gen = field(md, "generation");
	if (gen == NULL)
		return 0;
	d = cJSON_IsNumber(gen) ? gen->valuedouble : -1.0;
	/* 2^63 is the first double out of int64 range. */
	if (!(d >= 0.0 && d < 9223372036854775808.0) || floor(d) != d)
		return fail(err, errlen, "metadata.generation: must be an integer >= 0, got %s",
		            got(gen, g, sizeof(g)));
	p->generation = (int64_t)d;
	return 0;
}

static int parse_mode(const cJSON *v, enum gpupolicy_mode *out, char *err, size_t errlen)
{
	char g[GOT_MAX];

	*out = GPUPOLICY_ENFORCE;
	if (v == NULL)
		return 0;
	for (int m = GPUPOLICY_ENFORCE; m <= GPUPOLICY_AUDIT; m++)
		if (cJSON_IsString(v) && v->valuestring != NULL &&
		    strcmp(v->valuestring, gpupolicy_mode_name((enum gpupolicy_mode)m)) == 0) {
			*out = (enum gpupolicy_mode)m;
			return 0;
		}
	return fail(err, errlen, "spec.mode: must be one of enforce, warn, audit, got %s",
	            got(v, g, sizeof(g)));
}

static int parse_undeclared(const cJSON *v, int *refuse, char *err, size_t errlen)
{
	char g[GOT_MAX];

	*refuse = 0;
	if (v == NULL)
		return 0;
	if (cJSON_IsString(v) && v->valuestring != NULL &&
	    (strcmp(v->valuestring, "infer") == 0 || strcmp(v->valuestring, "refuse") == 0)) {
		*refuse = strcmp(v->valuestring, "refuse") == 0;
		return 0;
	}
	return fail(err, errlen, "spec.undeclared: must be one of infer, refuse, got %s",
	            got(v, g, sizeof(g)));
}

static int parse_spec(const cJSON *obj, struct gpupolicy *p, char *err, size_t errlen)
{
	char g[GOT_MAX];
	const cJSON *spec = field(obj, "spec"), *ns;
	int rc;

	if (!cJSON_IsObject(spec))
		return fail(err, errlen, "spec: required, an object, got %s",
		            got(spec, g, sizeof(g)));
	ns = field(spec, "nodeSelector");
	if (ns != NULL) {
		rc = parse_selector(ns, "spec.nodeSelector", &p->node_selector, err, errlen);
		if (rc != 0)
			return rc;
	}
	rc = parse_ratio(field(spec, "threshold"), "spec.threshold", &p->has_threshold,
	                 &p->threshold, err, errlen);
	if (rc == 0)
		rc = parse_ratio(field(spec, "warnThreshold"), "spec.warnThreshold",
		                 &p->has_warn_threshold, &p->warn_threshold, err, errlen);
	if (rc == 0)
		rc = parse_mode(field(spec, "mode"), &p->mode, err, errlen);
	if (rc == 0)
		rc =
		    parse_undeclared(field(spec, "undeclared"), &p->undeclared_refuse, err, errlen);
	if (rc == 0)
		rc = parse_tiers(field(spec, "tiers"), p, err, errlen);
	return rc;
}

int gpupolicy_parse(const struct cJSON *obj, struct gpupolicy **out, char *err, size_t errlen)
{
	char g[GOT_MAX];
	struct gpupolicy *p = NULL;
	int rc;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (out == NULL)
		return fail(err, errlen, "gpupolicy_parse: no output");
	*out = NULL;
	if (!cJSON_IsObject(obj)) {
		rc = fail(err, errlen, "GPUMemoryPolicy: must be a JSON object, got %s",
		          got(obj, g, sizeof(g)));
		goto out;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		rc = GPUPOLICY_ENOMEM;
		goto out;
	}
	rc = parse_metadata(obj, p, err, errlen);
	if (rc == 0)
		rc = parse_spec(obj, p, err, errlen);
out:
	if (rc == GPUPOLICY_ENOMEM && err != NULL && errlen > 0)
		snprintf(err, errlen, "out of memory");
	if (rc != 0)
		gpupolicy_free(p);
	else
		*out = p;
	return rc;
}

/* ---- matching ---- */

/* The value of key in labels, or NULL (the first pair wins, as a map would hold one). */
static const char *label_value(const struct gpupolicy_labels *labels, const char *key)
{
	if (labels == NULL || labels->kv == NULL)
		return NULL;
	for (size_t i = 0; i < labels->n; i++) {
		const char *k = labels->kv[2 * i];

		if (k != NULL && strcmp(k, key) == 0)
			return labels->kv[2 * i + 1] != NULL ? labels->kv[2 * i + 1] : "";
	}
	return NULL;
}

static int in_list(char *const *list, size_t n, const char *s)
{
	if (s == NULL)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (list[i] != NULL && strcmp(list[i], s) == 0)
			return 1;
	return 0;
}

/* Every requirement holds (AND); In: present with a listed value; NotIn: absent or not
 * listed; Exists; DoesNotExist. No requirement: everything matches. */
int labelsel_match(const struct labelsel *sel, const struct gpupolicy_labels *labels)
{
	if (sel == NULL || sel->reqs == NULL)
		return 1;
	for (size_t i = 0; i < sel->n; i++) {
		const struct labelsel_req *r = &sel->reqs[i];
		const char *v = r->key != NULL ? label_value(labels, r->key) : NULL;
		int ok;

		switch (r->op) {
		case LABELSEL_IN:
			ok = v != NULL && in_list(r->values, r->n_values, v);
			break;
		case LABELSEL_NOTIN:
			ok = v == NULL || !in_list(r->values, r->n_values, v);
			break;
		case LABELSEL_EXISTS:
			ok = v != NULL;
			break;
		case LABELSEL_DOESNOTEXIST:
			ok = v == NULL;
			break;
		default:
			ok = 0;
			break;
		}
		if (!ok)
			return 0;
	}
	return 1;
}

int gpupolicy_selects(const struct gpupolicy *p, const struct gpupolicy_labels *node_labels)
{
	return p != NULL && labelsel_match(&p->node_selector, node_labels);
}

int gpupolicy_applies(const struct gpupolicy *p, const struct gpupolicy_labels *node_labels)
{
	static const struct gpupolicy_labels none = {NULL, 0};

	if (p == NULL)
		return 0;
	if (node_labels == NULL)
		return p->node_selector.n == 0 && gpupolicy_selects(p, &none);
	return gpupolicy_selects(p, node_labels);
}

size_t gpupolicy_select_all(const struct gpupolicy *const *pols, size_t n,
                            const struct gpupolicy_labels *node_labels,
                            const struct gpupolicy **out, size_t room)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k < room; i++)
		if (gpupolicy_applies(pols[i], node_labels))
			out[k++] = pols[i];
	return k;
}

size_t gpupolicy_select(const struct gpupolicy *const *pols, size_t n,
                        const struct gpupolicy_labels *node_labels, const struct gpupolicy **out,
                        size_t room)
{
	return gpupolicy_select_all(pols, n, node_labels, out,
	                            room < GPUPOLICY_SELECT_MAX ? room : GPUPOLICY_SELECT_MAX);
}

/* Every criterion given matches; a pod without a priority class never matches a tier that
 * lists priority classes (nor one that lists namespaces without a namespace). */
int gpupolicy_tier_of(const struct gpupolicy *p, const char *ns, const char *priority_class,
                      const struct gpupolicy_labels *pod_labels)
{
	if (p == NULL)
		return -1;
	if (priority_class != NULL && priority_class[0] == '\0')
		priority_class = NULL;
	for (size_t i = 0; i < p->n_tiers && i < GPUPOLICY_TIERS_MAX; i++) {
		const struct gpupolicy_tier *t = &p->tiers[i];

		if (t->n_priority_classes > 0 &&
		    !in_list(t->priority_classes, t->n_priority_classes, priority_class))
			continue;
		if (t->n_namespaces > 0 && !in_list(t->namespaces, t->n_namespaces, ns))
			continue;
		if (t->has_pod_selector && !labelsel_match(&t->pod_selector, pod_labels))
			continue;
		return (int)i;
	}
	return -1;
}

/* ---- precedence ---- */

const char *gpupolicy_mode_name(enum gpupolicy_mode m)
{
	switch (m) {
	case GPUPOLICY_ENFORCE:
		return "enforce";
	case GPUPOLICY_WARN:
		return "warn";
	case GPUPOLICY_AUDIT:
		return "audit";
	}
	return "unknown";
}

static enum gpupolicy_mode flags_mode(const struct gpupolicy_flags *f)
{
	return f->mode == POLICY_WARN ? GPUPOLICY_WARN : GPUPOLICY_ENFORCE;
}

/*
 * The check of the policies of mode m that set a threshold: the smallest threshold (source:
 * the first policy giving it), warn threshold the smallest of theirs that set one, else the
 * flags'. 0 (and *out untouched) when no policy of mode m sets a threshold.
 */
static int group_check(const struct gpupolicy *const *sel, size_t n, enum gpupolicy_mode m,
                       const struct gpupolicy_flags *flags, struct gpupolicy_check *out)
{
	struct gpupolicy_check c = {.mode = m, .warn_threshold = flags->warn_threshold};
	int found = 0, has_warn = 0;

	for (size_t i = 0; i < n; i++) {
		const struct gpupolicy *p = sel[i];

		if (p == NULL || p->mode != m)
			continue;
		/* warnThreshold counts even without a threshold: a policy may ask only for earlier
		 * warnings */
		if (p->has_warn_threshold && (!has_warn || p->warn_threshold < c.warn_threshold)) {
			c.warn_threshold = p->warn_threshold;
			has_warn = 1;
		}
		if (!p->has_threshold)
			continue;
		if (!found || p->threshold < c.threshold) {
			c.threshold = p->threshold;
			c.source = p->name;
			c.policy = p;
		}
		found = 1;
	}
	if (found)
		*out = c;
	else if (has_warn)
		out->warn_threshold = c.warn_threshold; /* the flags' check keeps its threshold */
	return found;
}

/*
 * Precedence, in the order the checks are made:
 *  1. The node's annotation: one check, in the flags' mode, at the annotation's threshold with
 *     the flags' warn threshold; the policies' thresholds are not used (their tiers still
 *     apply, in gpupolicy_check_tiers()).
 *  2. Else the enforce check: the strictest threshold of the enforce-mode policies that set one
 *     (source: that policy, the first on ties); without any, the flags' check in the flags'
 *     mode. Warn and audit policies never replace the flags: a policy being rolled out in warn
 *     or audit mode must not weaken what is enforced.
 *  3. The warn check: the strictest threshold of the warn-mode policies; when check 2 is the
 *     flags' own check in warn mode, the two are one warn check at the smaller threshold
 *     (source of the smaller; the flags on ties).
 *  4. The audit check: the strictest threshold of the audit-mode policies.
 * Each check's warn threshold: the smallest warnThreshold of the policies of its mode that set
 * one (with or without a threshold: a policy may ask only for earlier warnings), else the
 * flags'; the annotation's check takes the enforcing policies' the same way.
 */
void gpupolicy_resolve(const struct gpupolicy *const *sel, size_t n,
                       const struct gpupolicy_flags *flags, int has_annotation, double annotation,
                       struct gpupolicy_plan *out)
{
	struct gpupolicy_check *c;
	struct gpupolicy_check w;

	memset(out, 0, sizeof(*out));
	if (flags == NULL)
		return;
	if (sel == NULL)
		n = 0;
	c = &out->checks[0];
	c->mode = flags_mode(flags);
	c->threshold = flags->threshold;
	c->warn_threshold = flags->warn_threshold;
	c->source = "flags";
	out->n = 1;
	if (has_annotation) {
		struct gpupolicy_check e = *c;
		c->threshold = annotation;
		c->source = "node annotation";
		/* the enforcing policies' warnThreshold still beats the flags' */
		group_check(sel, n, GPUPOLICY_ENFORCE, flags, &e);
		c->warn_threshold = e.warn_threshold;
		return;
	}
	group_check(sel, n, GPUPOLICY_ENFORCE, flags, c);
	if (group_check(sel, n, GPUPOLICY_WARN, flags, &w)) {
		if (c->mode == GPUPOLICY_WARN) {
			/* The flags' own warn check (no enforce policy): one warn check. */
			if (w.threshold < c->threshold) {
				c->threshold = w.threshold;
				c->source = w.source;
				c->policy = w.policy;
			}
			c->warn_threshold = w.warn_threshold;
		} else {
			out->checks[out->n++] = w;
		}
	}
	if (group_check(sel, n, GPUPOLICY_AUDIT, flags, &out->checks[out->n]))
		out->n++;
}

/* ---- tiers ---- */

static void tier_invalid(struct gpupolicy_tier_result *out, const char *why)
{
	out->violated = 0;
	out->reason = NULL;
	snprintf(out->message, sizeof(out->message), "gpupolicy: invalid tier input: %s", why);
}

static void over_share_message(const struct gpupolicy_tier_input *in, const char *pod,
                               const char *node, uint64_t total, struct gpupolicy_tier_result *out)
{
	const struct gpupolicy_tier *t = &in->policy->tiers[in->tier];
	char d[QUANTITY_FMT_MAX], tt[QUANTITY_FMT_MAX], c[QUANTITY_FMT_MAX], b[QUANTITY_FMT_MAX];
	char r[POLICY_RATIO_MAX];

	quantity_format(in->demand_bytes, d, sizeof(d));
	quantity_format(total, tt, sizeof(tt));
	quantity_format(in->capacity_bytes, c, sizeof(c));
	quantity_format(out->budget_bytes, b, sizeof(b));
	policy_format_ratio(t->max_share, r, sizeof(r));
	snprintf(out->message, sizeof(out->message),
	         "placing %s (%s) on %s would bring tier \"%s\" of GPUMemoryPolicy \"%s\" to %s, "
	         "above its budget of %s of %s (%s)",
	         pod, d, node, t->name, in->policy->name, tt, r, c, b);
}

static void yield_message(const struct gpupolicy_tier_input *in, const char *pod, const char *node,
                          uint64_t limit, uint64_t ybudget, struct gpupolicy_tier_result *out)
{
	const struct gpupolicy_tier *t = &in->policy->tiers[in->tier];
	const struct gpupolicy_tier *y = &in->policy->tiers[t->yield_to];
	char d[QUANTITY_FMT_MAX], yb[QUANTITY_FMT_MAX], l[QUANTITY_FMT_MAX], b[QUANTITY_FMT_MAX];
	char c[QUANTITY_FMT_MAX], above[POLICY_RATIO_MAX], share[POLICY_RATIO_MAX];

	quantity_format(in->demand_bytes, d, sizeof(d));
	quantity_format(in->tier_bytes[t->yield_to], yb, sizeof(yb));
	quantity_format(limit, l, sizeof(l));
	quantity_format(ybudget, b, sizeof(b));
	quantity_format(in->capacity_bytes, c, sizeof(c));
	policy_format_ratio(t->yield_above, above, sizeof(above));
	policy_format_ratio(y->max_share, share, sizeof(share));
	snprintf(
	    out->message, sizeof(out->message),
	    "%s (%s) is in tier \"%s\" of GPUMemoryPolicy \"%s\", which yields to tier \"%s\": "
	    "on %s \"%s\" declares %s, above %s of its budget (%s of %s, %s of %s)",
	    pod, d, t->name, in->policy->name, y->name, node, y->name, yb, above, l, b, share, c);
}

/*
 * Over-share first: the tier's own budget, floor(capacity x maxShare) at ppm, may be declared
 * exactly, not one byte more. Then yield: the tier yielded to may declare up to
 * floor(its budget x above) before this tier's pods are refused.
 */
int gpupolicy_check_tiers(const struct gpupolicy_tier_input *in, struct gpupolicy_tier_result *out)
{
	const struct gpupolicy_tier *t;
	const char *pod, *node;
	uint64_t total;

	if (out == NULL)
		return -1;
	memset(out, 0, sizeof(*out));
	if (in == NULL || in->policy == NULL) {
		tier_invalid(out, "no input");
		return -1;
	}
	if (in->tier == -1)
		return 0;
	if (in->tier < -1 || (size_t)in->tier >= in->policy->n_tiers ||
	    in->tier >= GPUPOLICY_TIERS_MAX) {
		tier_invalid(out, "tier index out of range");
		return -1;
	}
	t = &in->policy->tiers[in->tier];
	if (in->tier_bytes == NULL) {
		tier_invalid(out, "no tier_bytes");
		return -1;
	}
	if (t->yield_to >= 0 &&
	    ((size_t)t->yield_to >= in->policy->n_tiers || t->yield_to == in->tier ||
	     !in->policy->tiers[t->yield_to].has_max_share)) {
		tier_invalid(out, "yield to a tier that is not another tier with a maxShare");
		return -1;
	}
	pod = in->pod != NULL ? in->pod : "(unnamed pod)";
	node = in->node != NULL ? in->node : "(unnamed node)";
	if (t->has_max_share) {
		out->budget_bytes = share_of(in->capacity_bytes, t->max_share);
		total = sat_add(in->tier_bytes[in->tier], in->demand_bytes);
		if (total > out->budget_bytes) {
			out->violated = 1;
			out->reason = "TierOverShare";
			over_share_message(in, pod, node, total, out);
			return 0;
		}
	}
	if (t->yield_to >= 0) {
		const struct gpupolicy_tier *y = &in->policy->tiers[t->yield_to];
		uint64_t ybudget = share_of(in->capacity_bytes, y->max_share);
		uint64_t limit = share_of(ybudget, t->yield_above);

		if (in->tier_bytes[t->yield_to] > limit) {
			out->violated = 1;
			out->reason = "TierYield";
			yield_message(in, pod, node, limit, ybudget, out);
		}
	}
	return 0;
}
