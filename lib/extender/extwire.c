/*
 * extwire: the kube-scheduler extender's wire format. See extwire.h.
 */
#include "extwire.h"

#include "jsonpath.h"
#include "text.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NODE_NAME_MAX 253 /* a DNS-1123 subdomain */

/* ---- decoding ExtenderArgs ---- */

struct decoding {
	struct extwire_args *a;
	char *err;
	size_t errlen;
	int bad; /* not ExtenderArgs: err says why */
};

static void bad(struct decoding *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(struct decoding *d, const char *fmt, ...)
{
	va_list ap;

	if (d->bad)
		return;
	d->bad = 1;
	va_start(ap, fmt);
	if (vsnprintf(d->err, d->errlen, fmt, ap) < 0 && d->errlen > 0)
		d->err[0] = '\0';
	va_end(ap);
	text_no_percent(d->err, d->errlen);
}

/* The member of obj named name in any ASCII case (Go's decoder matches field names so), or
 * NULL; a JSON null counts as absent, as Go reads it. -1 when two members match: ambiguous
 * (Go would take the last), refused. */
static int member(const cJSON *obj, const char *name, cJSON **out)
{
	cJSON *it, *found = NULL;

	cJSON_ArrayForEach(it, obj)
	{
		if (it->string == NULL || strcasecmp(it->string, name) != 0)
			continue;
		if (found != NULL)
			return -1;
		found = it;
	}
	*out = found && !cJSON_IsNull(found) ? found : NULL;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A node named twice: the call is refused (kube-scheduler never sends one). */
static int check_unique(struct decoding *d)
{
	const char **sorted;

	if (d->a->n < 2)
		return 0;
	if ((sorted = malloc(d->a->n * sizeof(*sorted))) == NULL)
		return EXTWIRE_ENOMEM;
	memcpy(sorted, d->a->names, d->a->n * sizeof(*sorted));
	qsort(sorted, d->a->n, sizeof(*sorted), by_name);
	for (size_t i = 1; i < d->a->n; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0) {
			bad(d, "ExtenderArgs: node \"%.253s\" given twice", sorted[i]);
			break;
		}
	free(sorted);
	return 0;
}

/* A usable node name: a non-empty string of at most NODE_NAME_MAX bytes. */
static int name_ok(const char *s)
{
	return s != NULL && s[0] != '\0' && strnlen(s, NODE_NAME_MAX + 1) <= NODE_NAME_MAX;
}

/* The NodeNames form. 0 (d->bad on a bad list) or EXTWIRE_ENOMEM. */
static int decode_names(struct decoding *d, const cJSON *list)
{
	const cJSON *it;
	size_t i = 0;

	if (!cJSON_IsArray(list)) {
		bad(d, "ExtenderArgs: NodeNames is not a list of node names");
		return 0;
	}
	d->a->n = (size_t)cJSON_GetArraySize(list);
	if (d->a->n > EXTWIRE_MAX_NODES) {
		bad(d, "ExtenderArgs: %zu nodes, more than the %d one call may judge", d->a->n,
		    EXTWIRE_MAX_NODES);
		return 0;
	}
	if ((d->a->names = calloc(d->a->n ? d->a->n : 1, sizeof(*d->a->names))) == NULL)
		return EXTWIRE_ENOMEM;
	cJSON_ArrayForEach(it, list)
	{
		if (!cJSON_IsString(it) || !name_ok(it->valuestring)) {
			bad(d,
			    "ExtenderArgs: NodeNames[%zu] is not a node name (a non-empty "
			    "string of at most %d bytes)",
			    i, NODE_NAME_MAX);
			return 0;
		}
		d->a->names[i++] = it->valuestring;
	}
	return 0;
}

/* The Nodes form: a v1.NodeList whose items are Node objects with metadata.name. */
static int decode_nodes(struct decoding *d, const cJSON *list)
{
	cJSON *items = NULL, *it;
	size_t i = 0;

	if (!cJSON_IsObject(list) || member(list, "items", &items) != 0 ||
	    (items != NULL && !cJSON_IsArray(items))) {
		bad(d, "ExtenderArgs: Nodes is not a NodeList (an object with an items list)");
		return 0;
	}
	d->a->items = items;
	d->a->n = items ? (size_t)cJSON_GetArraySize(items) : 0;
	if (d->a->n > EXTWIRE_MAX_NODES) {
		bad(d, "ExtenderArgs: %zu nodes, more than the %d one call may judge", d->a->n,
		    EXTWIRE_MAX_NODES);
		return 0;
	}
	d->a->names = calloc(d->a->n ? d->a->n : 1, sizeof(*d->a->names));
	d->a->objs = calloc(d->a->n ? d->a->n : 1, sizeof(*d->a->objs));
	if (d->a->names == NULL || d->a->objs == NULL)
		return EXTWIRE_ENOMEM;
	cJSON_ArrayForEach(it, items)
	{
		const char *name = json_str(it, "metadata", "name", NULL);
		if (!cJSON_IsObject(it) || !name_ok(name)) {
			bad(d,
			    "ExtenderArgs: Nodes.items[%zu] is not a Node with metadata.name "
			    "(a non-empty string of at most %d bytes)",
			    i, NODE_NAME_MAX);
			return 0;
		}
		d->a->objs[i] = it;
		d->a->names[i++] = name;
	}
	return 0;
}

/* Parse and check the body. 0 (d->bad with the reason when it is not ExtenderArgs) or
 * EXTWIRE_ENOMEM. */
static int decode(struct decoding *d, const char *body, size_t len)
{
	const char *end = NULL;
	cJSON *pod, *nodes, *names;
	int rc;

	d->a->root = len ? cJSON_ParseWithLengthOpts(body, len, &end, 0) : NULL;
	if (d->a->root == NULL) {
		if (len == 0)
			bad(d, "ExtenderArgs: empty body");
		else
			bad(d, "ExtenderArgs: not JSON (error at byte %zu)",
			    end && end >= body ? (size_t)(end - body) : (size_t)0);
		return 0;
	}
	while (end && (size_t)(end - body) < len && strchr(" \t\r\n", *end) && *end)
		end++;
	if (end == NULL || (size_t)(end - body) != len) {
		bad(d, "ExtenderArgs: not JSON (trailing data at byte %zu)",
		    end ? (size_t)(end - body) : (size_t)0);
		return 0;
	}
	if (!cJSON_IsObject(d->a->root)) {
		bad(d, "ExtenderArgs: not a JSON object");
		return 0;
	}
	if (member(d->a->root, "Pod", &pod) || member(d->a->root, "Nodes", &nodes) ||
	    member(d->a->root, "NodeNames", &names)) {
		bad(d, "ExtenderArgs: a field (Pod, Nodes or NodeNames) given twice, in "
		       "different letter cases");
		return 0;
	}
	if (!cJSON_IsObject(pod)) {
		bad(d, "ExtenderArgs: no Pod (a v1.Pod object)");
		return 0;
	}
	d->a->pod = pod;
	if ((nodes != NULL) == (names != NULL)) {
		bad(d, "ExtenderArgs: %s",
		    nodes ? "both Nodes and NodeNames given (one is null)"
		          : "neither Nodes nor NodeNames given");
		return 0;
	}
	rc = names ? decode_names(d, names) : decode_nodes(d, nodes);
	if (rc != 0 || d->bad)
		return rc;
	return check_unique(d);
}

int extwire_decode(struct extwire_args *a, const char *body, size_t len, char *err, size_t errlen)
{
	struct decoding d = {a, err, errlen, 0};
	int rc;

	memset(a, 0, sizeof(*a));
	if (errlen > 0)
		err[0] = '\0';
	rc = decode(&d, body, len);
	if (rc != 0)
		return rc;
	return d.bad ? EXTWIRE_EBAD : 0;
}

void extwire_free(struct extwire_args *a)
{
	free(a->names);
	free(a->objs);
	cJSON_Delete(a->root);
	memset(a, 0, sizeof(*a));
}

/* ---- encoding ---- */

static cJSON *add_map(cJSON *o, const char *name)
{
	return cJSON_AddObjectToObject(o, name);
}

/* ExtenderFilterResult with Go's field names. */
char *extwire_filter_result(struct extwire_args *a, const struct extwire_node *v, const char *error,
                            size_t *n_out)
{
	cJSON *o = cJSON_CreateObject(), *pass = NULL, *failed, *unres;
	char *text = NULL;

	*n_out = 0;
	if (o == NULL)
		return NULL;
	if (error != NULL) {
		cJSON_AddNullToObject(o, "Nodes");
		cJSON_AddNullToObject(o, "NodeNames");
	} else if (a->items != NULL) {
		cJSON *list = cJSON_AddObjectToObject(o, "Nodes");
		if (list == NULL || cJSON_AddObjectToObject(list, "metadata") == NULL ||
		    (pass = cJSON_AddArrayToObject(list, "items")) == NULL)
			goto out;
		cJSON_AddNullToObject(o, "NodeNames");
	} else {
		cJSON_AddNullToObject(o, "Nodes");
		if ((pass = cJSON_AddArrayToObject(o, "NodeNames")) == NULL)
			goto out;
	}
	failed = add_map(o, "FailedNodes");
	unres = add_map(o, "FailedAndUnresolvableNodes");
	if (failed == NULL || unres == NULL ||
	    cJSON_AddStringToObject(o, "Error", error != NULL ? error : "") == NULL)
		goto out;
	for (size_t i = 0; error == NULL && i < a->n; i++) {
		cJSON *item;

		if (v[i].state == EXTWIRE_PASS) {
			/* The node object moves from the request to the answer: no copy. */
			item = a->objs ? cJSON_DetachItemViaPointer(a->items, a->objs[i])
			               : cJSON_CreateString(a->names[i]);
			if (item == NULL || !cJSON_AddItemToArray(pass, item)) {
				cJSON_Delete(item);
				goto out;
			}
			continue;
		}
		(*n_out)++;
		item = cJSON_CreateString(v[i].reason ? v[i].reason : "");
		if (item == NULL ||
		    !cJSON_AddItemToObject(v[i].state == EXTWIRE_FAIL ? failed : unres, a->names[i],
		                           item)) {
			cJSON_Delete(item);
			goto out;
		}
	}
	text = cJSON_PrintUnformatted(o);
out:
	cJSON_Delete(o);
	return text;
}

/* HostPriorityList: [{"Host": name, "Score": n}], in the input order. */
char *extwire_priorities(const struct extwire_args *a, const struct extwire_node *v)
{
	cJSON *list = cJSON_CreateArray();
	char *text = NULL;

	if (list == NULL)
		return NULL;
	for (size_t i = 0; i < a->n; i++) {
		cJSON *hp = cJSON_CreateObject();
		int score = v[i].state == EXTWIRE_PASS ? v[i].score : 0;
		if (hp == NULL || !cJSON_AddItemToArray(list, hp) ||
		    cJSON_AddStringToObject(hp, "Host", a->names[i]) == NULL ||
		    cJSON_AddNumberToObject(hp, "Score", score) == NULL)
			goto out;
	}
	text = cJSON_PrintUnformatted(list);
out:
	cJSON_Delete(list);
	return text;
}
