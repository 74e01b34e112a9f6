/* memlimit: the cgroup's memory limit (memlimit.h). */
#include "memlimit.h"

#include "capfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ABSENT 2 /* slurp(): no such file */

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

int memlimit_parse_value(const char *text, uint64_t *bytes)
{
	size_t n = strlen(text);
	uint64_t v = 0;

	if (n > 0 && text[n - 1] == '\n')
		n--;
	if (n == 3 && memcmp(text, "max", 3) == 0)
		return MEMLIMIT_NONE;
	if (n == 0 || n > 20)
		return MEMLIMIT_EPARSE;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(text[i] - '0');
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return MEMLIMIT_EPARSE;
		v = v * 10 + d;
	}
	if (v >= MEMLIMIT_V1_UNLIMITED)
		return MEMLIMIT_NONE;
	*bytes = v;
	return 0;
}

/* One path of a /proc/self/cgroup line, [p, end), into out (MEMLIMIT_PATH_MAX). */
static int take_path(const char *p, const char *end, char *out)
{
	size_t n = (size_t)(end - p);
	if (n == 0 || p[0] != '/' || n >= MEMLIMIT_PATH_MAX)
		return MEMLIMIT_EPARSE;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

/* 1 when the comma-separated list [p, end) holds "memory". */
static int has_memory(const char *p, const char *end)
{
	while (p < end) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		const char *e = c ? c : end;
		if (e - p == 6 && memcmp(p, "memory", 6) == 0)
			return 1;
		p = e + 1;
	}
	return 0;
}

int memlimit_parse_cgroup(const char *text, char *v2, char *v1)
{
	const char *line = text;

	v2[0] = v1[0] = '\0';
	while (*line != '\0') {
		const char *nl = strchr(line, '\n'), *end = nl ? nl : line + strlen(line);
		const char *c1 = memchr(line, ':', (size_t)(end - line)), *c2;

		if (end == line) { /* an empty line (the last newline) */
			line = nl ? nl + 1 : end;
			continue;
		}
		if (c1 == NULL || c1 == line ||
		    (c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1))) == NULL)
			return MEMLIMIT_EPARSE;
		for (const char *d = line; d < c1; d++)
			if (*d < '0' || *d > '9')
				return MEMLIMIT_EPARSE;
		if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1) {
			if (take_path(c2 + 1, end, v2) != 0)
				return MEMLIMIT_EPARSE;
		} else if (has_memory(c1 + 1, c2) && take_path(c2 + 1, end, v1) != 0) {
			return MEMLIMIT_EPARSE;
		}
		line = nl ? nl + 1 : end;
	}
	return 0;
}

/* The file at path into *text (caller frees): 0, ABSENT, or MEMLIMIT_EIO. */
static int slurp(const char *path, size_t cap, char **text, char *err, size_t errlen)
{
	struct stat st;
	size_t len = 0;
	char why[MEMLIMIT_ERR_MAX];

	if (stat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
		return ABSENT;
	if (capfile_read(path, cap, 0, text, &len, why, sizeof(why)) != 0)
		return fail(err, errlen, MEMLIMIT_EIO, "%s: cannot read it: %s", path, why);
	return 0;
}

/* The value of file dir/name: 0 with *bytes, MEMLIMIT_NONE, ABSENT, or MEMLIMIT_E*. */
static int read_one(const char *dir, const char *name, uint64_t *bytes, char *where, char *err,
                    size_t errlen)
{
	char path[MEMLIMIT_WHERE_MAX + 32], *text = NULL;
	int rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= MEMLIMIT_WHERE_MAX)
		return fail(err, errlen, MEMLIMIT_EIO, "%.200s...: path too long", dir);
	if ((rc = slurp(path, MEMLIMIT_FILE_MAX, &text, err, errlen)) != 0)
		return rc;
	rc = memlimit_parse_value(text, bytes);
	if (rc == MEMLIMIT_EPARSE)
		fail(err, errlen, rc, "%s: \"%.*s\" is not a byte count or \"max\"", path,
		     (int)strcspn(text, "\n"), text);
	else if (rc == 0 && where != NULL)
		snprintf(where, MEMLIMIT_WHERE_MAX, "%.*s", MEMLIMIT_WHERE_MAX - 1, path);
	free(text);
	return rc;
}

/* 1 when path is a directory. */
static int is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The least of file name from base+path up to base (a parent's limit binds its children: v2,
 * and v1 with memory.use_hierarchy, the only mode since Linux 5.x). 0, MEMLIMIT_NONE, ABSENT,
 * or MEMLIMIT_E*. */
static int read_walk(const char *root, const char *path, const char *name, uint64_t *bytes,
                     char *where, char *err, size_t errlen)
{
	char dir[MEMLIMIT_WHERE_MAX];
	uint64_t best = 0, v = 0;
	int found = 0, any = 0;

	snprintf(dir, sizeof(dir), "%s%s", root, strcmp(path, "/") == 0 ? "" : path);
	if (!is_dir(dir))
		snprintf(dir, sizeof(dir), "%s", root); /* the host's path: no cgroup namespace */
	for (;;) {
		char here[MEMLIMIT_WHERE_MAX];
		int rc = read_one(dir, name, &v, here, err, errlen);
		if (rc < 0)
			return rc;
		any |= rc != ABSENT;
		if (rc == 0 && (!found || v < best)) {
			best = v;
			found = 1;
			if (where != NULL)
				snprintf(where, MEMLIMIT_WHERE_MAX, "%s", here);
		}
		char *slash = strrchr(dir, '/');
		if (strlen(dir) <= strlen(root) || slash == NULL || slash == dir)
			break;
		*slash = '\0';
	}
	if (found) {
		*bytes = best;
		return 0;
	}
	return any ? MEMLIMIT_NONE : ABSENT;
}

int memlimit_read(const char *root, const char *proc_cgroup, uint64_t *bytes, char *where,
                  char *err, size_t errlen)
{
	char v2[MEMLIMIT_PATH_MAX], v1[MEMLIMIT_PATH_MAX], dir[MEMLIMIT_WHERE_MAX], *text = NULL;
	int rc;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (strlen(root) >= MEMLIMIT_PATH_MAX)
		return fail(err, errlen, MEMLIMIT_EIO, "cgroup root longer than %d bytes",
		            MEMLIMIT_PATH_MAX - 1);
	rc = slurp(proc_cgroup, MEMLIMIT_CGROUP_FILE_MAX, &text, err, errlen);
	if (rc == ABSENT)
		return MEMLIMIT_NONE; /* not Linux, or no /proc */
	if (rc != 0)
		return rc;
	rc = memlimit_parse_cgroup(text, v2, v1);
	free(text);
	if (rc != 0)
		return fail(err, errlen, rc, "%s: not the kernel's \"ID:CONTROLLERS:PATH\" lines",
		            proc_cgroup);
	if (v2[0] != '\0' &&
	    (rc = read_walk(root, v2, "memory.max", bytes, where, err, errlen)) != ABSENT)
		return rc;
	if (v1[0] == '\0')
		return MEMLIMIT_NONE;
	snprintf(dir, sizeof(dir), "%s/memory", root);
	rc = read_walk(dir, v1, "memory.limit_in_bytes", bytes, where, err, errlen);
	return rc == ABSENT ? MEMLIMIT_NONE : rc;
}
