/*
 * jsonpath: see jsonpath.h.
 */
#include "jsonpath.h"

#include <cjson/cJSON.h>
#include <stdarg.h>

static const cJSON *walk(const cJSON *obj, va_list ap)
{
	const cJSON *it = obj;
	const char *key;
	int steps = 0;

	while (it != NULL && (key = va_arg(ap, const char *)) != NULL) {
		if (++steps > JSON_PATH_MAX || !cJSON_IsObject(it))
			return NULL;
		it = cJSON_GetObjectItemCaseSensitive(it, key);
	}
	return it;
}

const cJSON *json_at(const cJSON *obj, ...)
{
	va_list ap;
	va_start(ap, obj);
	const cJSON *it = walk(obj, ap);
	va_end(ap);
	return it;
}

const char *json_str(const cJSON *obj, ...)
{
	va_list ap;
	va_start(ap, obj);
	const cJSON *it = walk(obj, ap);
	va_end(ap);
	return cJSON_IsString(it) ? it->valuestring : NULL;
}
