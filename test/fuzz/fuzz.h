/*
 * fuzz: what the libFuzzer targets of test/fuzz share. Header-only (one binary per target).
 *
 * A target checks properties, not only "no crash": a broken one calls fuzz_fail(), which
 * prints why and aborts, so libFuzzer saves the input as a crash artifact.
 */
#ifndef GMG_FUZZ_H
#define GMG_FUZZ_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "log.h"

__attribute__((noreturn, format(printf, 1, 2))) static inline void fuzz_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("fuzz property broken: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

/* lib/ logs one JSON line per decision: thrown away (and below ERROR not even formatted). */
static inline void fuzz_quiet_logs(void)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		log_set_fd(fd);
	log_set_level(LOG_ERROR);
}

/* A file of test/data ($GMG_TEST_DATA, else the source tree's, set by CMake) parsed as JSON.
 * Aborts when missing: a target must not silently fuzz an empty world. */
static inline cJSON *fuzz_fixture_json(const char *name)
{
	const char *dir = getenv("GMG_TEST_DATA");
	char path[1024];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir ? dir : GMG_TEST_DATA_DIR, name) >=
	    sizeof(path))
		fuzz_fail("fixture path too long: %s", name);
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		fuzz_fail("cannot open fixture %s", path);
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	cJSON *j = cJSON_ParseWithLength(buf, n);
	if (j == NULL)
		fuzz_fail("fixture %s is not JSON", path);
	return j;
}

/* data[0..size) as a NUL-terminated copy (caller frees). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (s == NULL)
		abort();
	if (size > 0)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Is err a NUL-terminated, non-empty string within errlen bytes? */
static inline int fuzz_err_ok(const char *err, size_t errlen)
{
	return err[0] != '\0' && memchr(err, '\0', errlen) != NULL;
}

#endif
