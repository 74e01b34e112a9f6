/*
 * pod: facts about a Pod object read the same way everywhere (pod.h).
 */
#include "pod.h"

#include <stddef.h>
#include <string.h>

#include "demand.h"
#include "jsonpath.h"

int pod_finished(const struct cJSON *pod)
{
	const char *phase = json_str(pod, "status", "phase", NULL);

	return phase != NULL && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
}

int pod_is_mirror(const struct cJSON *pod)
{
	return json_at(pod, "metadata", "annotations", POD_MIRROR_ANNOTATION, NULL) != NULL;
}

int pod_being_deleted(const struct cJSON *pod)
{
	/* a string: null is Go's nil *Time (not set), and the API server writes nothing else */
	return json_str(pod, "metadata", "deletionTimestamp", NULL) != NULL;
}

void pod_demand(const struct cJSON *pod, const struct demand_config *cfg, struct demand *d)
{
	if (demand_from_pod(pod, cfg, d) != 0 && d->status != DEMAND_INVALID)
		d->status = DEMAND_INVALID; /* demand_from_pod fills status either way */
}

int pod_key_make(const char *ns, const char *name, char *key, size_t cap)
{
	size_t a = ns != NULL ? strlen(ns) : 0, b = name != NULL ? strlen(name) : 0;

	if (cap > 0)
		key[0] = '\0';
	if (b == 0 || a + b + 2 > cap)
		return -1;
	memcpy(key, ns != NULL ? ns : "", a);
	key[a] = '/';
	memcpy(key + a + 1, name, b + 1);
	return 0;
}

int pod_key_of(const struct cJSON *pod, char *key, size_t cap)
{
	return pod_key_make(json_str(pod, "metadata", "namespace", NULL),
	                    json_str(pod, "metadata", "name", NULL), key, cap);
}

int pod_key_split(const char *key, char *ns, size_t cap, const char **name)
{
	const char *slash = key != NULL ? strchr(key, '/') : NULL;
	size_t a = slash != NULL ? (size_t)(slash - key) : 0;

	if (cap > 0)
		ns[0] = '\0';
	if (slash == NULL || a >= cap)
		return -1;
	memcpy(ns, key, a);
	ns[a] = '\0';
	if (name != NULL)
		*name = slash + 1;
	return 0;
}

static int uid_known(const char *uid)
{
	return uid != NULL && uid[0] != '\0';
}

int pod_same(const char *key_a, const char *uid_a, const char *key_b, const char *uid_b)
{
	if (uid_known(uid_a) && uid_known(uid_b))
		return strcmp(uid_a, uid_b) == 0;
	return key_a != NULL && key_b != NULL && strcmp(key_a, key_b) == 0;
}

int pod_same_strict(const char *key_a, const char *uid_a, const char *key_b, const char *uid_b)
{
	if (key_a == NULL || key_b == NULL || strcmp(key_a, key_b) != 0)
		return 0;
	return !uid_known(uid_a) || !uid_known(uid_b) || strcmp(uid_a, uid_b) == 0;
}
