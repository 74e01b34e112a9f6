/* labelset: a copy of a map of strings, in one allocation (labelset.h). */
#include "labelset.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

void labelset_clear(struct labelset *ls)
{
	free(ls->block);
	memset(ls, 0, sizeof(*ls));
}

int labelset_copy(struct labelset *ls, const cJSON *map)
{
	size_t n = 0, bytes = 0;
	const cJSON *it;

	labelset_clear(ls);
	if (!cJSON_IsObject(map))
		return 0;
	cJSON_ArrayForEach(it, map)
	{
		if (!cJSON_IsString(it) || it->string == NULL)
			continue;
		if (n == LABELSET_MAX)
			break;
		n++;
		bytes += strlen(it->string) + 1 + strlen(it->valuestring) + 1;
	}
	if (n == 0)
		return 0;
	char *block = malloc(2 * n * sizeof(char *) + bytes);
	if (block == NULL)
		return LABELSET_ENOMEM;
	const char **kv = (const char **)(void *)block;
	char *s = block + 2 * n * sizeof(char *);
	size_t i = 0;
	cJSON_ArrayForEach(it, map)
	{
		if (!cJSON_IsString(it) || it->string == NULL)
			continue;
		if (i == 2 * n)
			break;
		const char *parts[2] = {it->string, it->valuestring};
		for (int k = 0; k < 2; k++) {
			size_t len = strlen(parts[k]) + 1;
			memcpy(s, parts[k], len);
			kv[i++] = s;
			s += len;
		}
	}
	ls->block = block;
	ls->l.kv = kv;
	ls->l.n = n;
	return 0;
}

int labelset_copy_pairs(struct labelset *ls, const struct gpupolicy_labels *l)
{
	size_t bytes = 0;

	labelset_clear(ls);
	if (l == NULL || l->n == 0)
		return 0;
	for (size_t i = 0; i < 2 * l->n; i++)
		bytes += strlen(l->kv[i]) + 1;
	char *block = malloc(2 * l->n * sizeof(char *) + bytes);
	if (block == NULL)
		return LABELSET_ENOMEM;
	const char **kv = (const char **)(void *)block;
	char *s = block + 2 * l->n * sizeof(char *);
	for (size_t i = 0; i < 2 * l->n; i++) {
		size_t len = strlen(l->kv[i]) + 1;
		memcpy(s, l->kv[i], len);
		kv[i] = s;
		s += len;
	}
	ls->block = block;
	ls->l.kv = kv;
	ls->l.n = l->n;
	return 0;
}
