/*
 * fixture: read files of test/data in unit tests. The directory is $GMG_TEST_DATA (ctest sets
 * it), else test/data relative to the working directory. Header-only: CMake builds one binary
 * per test_*.c, so shared test code lives in static functions here. Include after <cmocka.h>
 * and <cjson/cJSON.h>.
 */
#ifndef GMG_TEST_FIXTURE_H
#define GMG_TEST_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file, NUL-terminated (caller frees); *len (if not NULL) its size in bytes.
 * A missing or unreadable file fails the test. */
static inline char *fixture_read(const char *name, size_t *len)
{
	const char *dir = getenv("GMG_TEST_DATA");
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "test/data", name);
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		fail_msg("cannot open %s (set GMG_TEST_DATA)", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	if (len != NULL)
		*len = (size_t)n;
	return buf;
}

/* The file parsed as JSON (caller cJSON_Delete()s); invalid JSON fails the test. */
static inline cJSON *fixture_json(const char *name)
{
	size_t len;
	char *text = fixture_read(name, &len);
	cJSON *j = cJSON_ParseWithLength(text, len);
	free(text);
	assert_non_null(j);
	return j;
}

/* A JSON text written with single quotes (for readability in C strings) parsed as JSON
 * (caller cJSON_Delete()s); invalid JSON fails the test. */
static inline cJSON *fixture_quoted_json(const char *text)
{
	char *s = strdup(text);
	cJSON *j;

	assert_non_null(s);
	for (char *p = s; *p; p++)
		if (*p == '\'')
			*p = '"';
	j = cJSON_Parse(s);
	if (j == NULL)
		fail_msg("bad test JSON: %s", s);
	free(s);
	return j;
}

#ifdef GMG_GPUPOLICY_H
/* A GPUMemoryPolicy decoded from JSON as the API server serves it (caller gpupolicy_free()s);
 * invalid JSON or a policy gpupolicy_parse() refuses fails the test. Defined when gpupolicy.h
 * is included before this header. */
static inline struct gpupolicy *fixture_policy(const char *json)
{
	char err[GPUPOLICY_ERR_MAX] = "";
	struct gpupolicy *p = NULL;
	cJSON *o = cJSON_Parse(json);

	assert_non_null(o);
	if (gpupolicy_parse(o, &p, err, sizeof(err)) != 0)
		fail_msg("gpupolicy_parse: %s", err);
	cJSON_Delete(o);
	return p;
}
#endif

#endif
