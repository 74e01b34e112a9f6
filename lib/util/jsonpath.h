/*
 * jsonpath: reading a value at a fixed path of a cJSON tree, written once.
 *
 * json_at(obj, "metadata", "name", NULL) follows object keys (case-sensitive, as Kubernetes
 * field names are) and returns the item, or NULL when any step is missing or not an object.
 * The typed forms return NULL / 0 when the item has another type. Results are borrowed from
 * obj. At most JSON_PATH_MAX steps; a longer path gives NULL. Pure, thread-safe.
 */
#ifndef GMG_JSONPATH_H
#define GMG_JSONPATH_H

struct cJSON;

#define JSON_PATH_MAX 8

/* The item at the NULL-terminated path of keys, or NULL. */
const struct cJSON *json_at(const struct cJSON *obj, ...) __attribute__((sentinel));
/* Its string value, or NULL when absent or not a string. */
const char *json_str(const struct cJSON *obj, ...) __attribute__((sentinel));

#endif
