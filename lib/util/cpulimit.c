/* cpulimit: the cgroup's CPU limit (cpulimit.h). */
#include "cpulimit.h"

#include "capfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* One decimal number of the kernel's, digits only (a leading '-' when neg_ok), no sign
 * otherwise; *end set past it. 0 or -1 (none, overflow). */
static int number(const char *s, int neg_ok, long long *v, const char **end)
{
	const char *p = s;
	if (neg_ok && *p == '-')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	char *e;
	*v = strtoll(s, &e, 10);
	if (errno != 0 || e == s)
		return -1;
	*end = e;
	return 0;
}

#define ABSENT 2 /* slurp(), read_v1(): no such file (not CPULIMIT_NONE: that is "max", -1) */

/* The file at path into *text (caller frees), trailing newline removed: 0, ABSENT, or
 * CPULIMIT_EIO. */
static int slurp(const char *path, char **text, char *err, size_t errlen)
{
	struct stat st;
	size_t len = 0;
	char why[CPULIMIT_ERR_MAX];

	if (stat(path, &st) != 0 && errno == ENOENT)
		return ABSENT;
	if (capfile_read(path, CPULIMIT_FILE_MAX, 0, text, &len, why, sizeof(why)) != 0)
		return fail(err, errlen, CPULIMIT_EIO, "%s: cannot read it: %s", path, why);
	if (len > 0 && (*text)[len - 1] == '\n')
		(*text)[--len] = '\0';
	return 0;
}

/* cgroup v2's cpu.max: "QUOTA PERIOD" or "max PERIOD". */
static int parse_v2(const char *path, const char *t, double *cpus, char *err, size_t errlen)
{
	long long quota = 0, period = 0;
	const char *p = t;
	int unlimited = strncmp(t, "max ", 4) == 0;

	if (unlimited)
		p = t + 3;
	else if (number(t, 0, &quota, &p) != 0 || quota <= 0)
		goto bad;
	if (*p != ' ' || number(p + 1, 0, &period, &p) != 0 || *p != '\0' || period <= 0)
		goto bad;
	if (unlimited)
		return CPULIMIT_NONE;
	*cpus = (double)quota / (double)period;
	return 0;
bad:
	return fail(err, errlen, CPULIMIT_EPARSE,
	            "%s: \"%s\" is not \"QUOTA PERIOD\" or \"max PERIOD\" (microseconds)", path, t);
}

/* cgroup v1's pair under dir: cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us. */
static int read_v1(const char *dir, double *cpus, char *err, size_t errlen)
{
	char qpath[512], ppath[512], *q = NULL, *per = NULL;
	long long quota = 0, period = 0;
	const char *end;
	int rc;

	snprintf(qpath, sizeof(qpath), "%.400s/cpu.cfs_quota_us", dir);
	snprintf(ppath, sizeof(ppath), "%.400s/cpu.cfs_period_us", dir);
	if ((rc = slurp(qpath, &q, err, errlen)) != 0)
		goto out;
	if (number(q, 1, &quota, &end) != 0 || *end != '\0' || (quota <= 0 && quota != -1)) {
		rc = fail(err, errlen, CPULIMIT_EPARSE,
		          "%s: \"%s\" is not a quota in microseconds or -1", qpath, q);
		goto out;
	}
	if (quota == -1) {
		rc = CPULIMIT_NONE;
		goto out;
	}
	if ((rc = slurp(ppath, &per, err, errlen)) != 0) {
		if (rc == ABSENT)
			rc = fail(err, errlen, CPULIMIT_EIO, "%s: missing beside %s", ppath, qpath);
		goto out;
	}
	if (number(per, 0, &period, &end) != 0 || *end != '\0' || period <= 0) {
		rc = fail(err, errlen, CPULIMIT_EPARSE,
		          "%s: \"%s\" is not a period in microseconds", ppath, per);
		goto out;
	}
	*cpus = (double)quota / (double)period;
	rc = 0;
out:
	free(q);
	free(per);
	return rc;
}

int cpulimit_read(const char *root, double *cpus, char *err, size_t errlen)
{
	static const char *const v1_dirs[] = {"cpu", "cpu,cpuacct"};
	char path[512], *text = NULL;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (strlen(root) > CPULIMIT_ROOT_MAX)
		return fail(err, errlen, CPULIMIT_EIO, "cgroup root longer than %d bytes",
		            CPULIMIT_ROOT_MAX);
	snprintf(path, sizeof(path), "%.256s/cpu.max", root);
	int rc = slurp(path, &text, err, errlen);
	if (rc == 0) {
		rc = parse_v2(path, text, cpus, err, errlen);
		free(text);
		return rc;
	}
	if (rc != ABSENT)
		return rc;
	for (size_t i = 0; i < sizeof(v1_dirs) / sizeof(v1_dirs[0]); i++) {
		snprintf(path, sizeof(path), "%.256s/%s", root, v1_dirs[i]);
		if ((rc = read_v1(path, cpus, err, errlen)) != ABSENT)
			return rc;
	}
	return CPULIMIT_NONE; /* no cgroup CPU files: not Linux, or not mounted */
}

unsigned cpulimit_count(double limit, long online)
{
	double n = limit > 0 ? limit : online > 0 ? (double)online : 1.0;

	if (online > 0 && n > (double)online)
		n = (double)online;
	if (n > CPULIMIT_COUNT_MAX)
		return CPULIMIT_COUNT_MAX;
	unsigned c = (unsigned)n;
	if ((double)c < n)
		c++; /* rounded up: 1.5 CPUs of time keep 2 threads busy */
	return c < 1 ? 1 : c;
}
