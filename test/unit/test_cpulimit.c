/* Unit tests for lib/util/cpulimit: the cgroup CPU limit, with cgroup files in a temp dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpulimit.h"

struct fx {
	char dir[64];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "%s/cpulimit-XXXXXX",
	         tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static void rm(const struct fx *f, const char *rel)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", f->dir, rel);
	unlink(p);
	rmdir(p);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	static const char *const files[] = {"cpu.max",
	                                    "cpu/cpu.cfs_quota_us",
	                                    "cpu/cpu.cfs_period_us",
	                                    "cpu,cpuacct/cpu.cfs_quota_us",
	                                    "cpu,cpuacct/cpu.cfs_period_us",
	                                    "cpu",
	                                    "cpu,cpuacct"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		rm(f, files[i]);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Write text to dir/rel, making rel's directory. */
static void put(const struct fx *f, const char *rel, const char *text)
{
	char p[256];
	const char *slash = strchr(rel, '/');
	if (slash != NULL) {
		snprintf(p, sizeof(p), "%s/%.*s", f->dir, (int)(slash - rel), rel);
		mkdir(p, 0700);
	}
	snprintf(p, sizeof(p), "%s/%s", f->dir, rel);
	FILE *fp = fopen(p, "w");
	assert_non_null(fp);
	fputs(text, fp);
	assert_int_equal(fclose(fp), 0);
}

static double read_ok(const struct fx *f)
{
	double cpus = -1;
	char err[CPULIMIT_ERR_MAX] = "";
	int rc = cpulimit_read(f->dir, &cpus, err, sizeof(err));
	if (rc != 0)
		fail_msg("cpulimit_read: %d %s", rc, err);
	return cpus;
}

static void expect_rc(const struct fx *f, int want, const char *fragment)
{
	double cpus = -7;
	char err[CPULIMIT_ERR_MAX] = "";
	int rc = cpulimit_read(f->dir, &cpus, err, sizeof(err));
	if (rc != want)
		fail_msg("cpulimit_read: %d (%s), wanted %d", rc, err, want);
	assert_true(cpus == -7); /* untouched */
	if (fragment != NULL && strstr(err, fragment) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", err, fragment);
}

static void test_v2(void **state)
{
	struct fx *f = *state;
	put(f, "cpu.max", "150000 100000\n"); /* limits.cpu: 1500m */
	assert_true(read_ok(f) == 1.5);
	put(f, "cpu.max", "100000 100000\n");
	assert_true(read_ok(f) == 1.0);
	put(f, "cpu.max", "25000 100000"); /* no newline: still the kernel's number */
	assert_true(read_ok(f) == 0.25);
	put(f, "cpu.max", "max 100000\n");
	expect_rc(f, CPULIMIT_NONE, NULL);
}

static void test_v2_malformed(void **state)
{
	struct fx *f = *state;
	static const char *const bad[] = {"",
	                                  "\n",
	                                  "150000\n",
	                                  "abc 100000",
	                                  "150000 0\n",
	                                  "0 100000\n",
	                                  "-5 100000",
	                                  "1.5 100000",
	                                  "150000 100000 7\n",
	                                  "150000  100000",
	                                  "150000 100000\n\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put(f, "cpu.max", bad[i]);
		expect_rc(f, CPULIMIT_EPARSE, "cpu.max");
	}
	put(f, "cpu.max", "99999999999999999999999 100000\n"); /* overflow */
	expect_rc(f, CPULIMIT_EPARSE, "cpu.max");
	/* over the cap: never cut and parsed */
	char big[CPULIMIT_FILE_MAX + 16];
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put(f, "cpu.max", big);
	expect_rc(f, CPULIMIT_EIO, "cpu.max");
}

static void test_v1(void **state)
{
	struct fx *f = *state;
	put(f, "cpu/cpu.cfs_quota_us", "200000\n");
	put(f, "cpu/cpu.cfs_period_us", "100000\n");
	assert_true(read_ok(f) == 2.0);
	put(f, "cpu/cpu.cfs_quota_us", "-1\n");
	expect_rc(f, CPULIMIT_NONE, NULL);
	put(f, "cpu/cpu.cfs_quota_us", "lots\n");
	expect_rc(f, CPULIMIT_EPARSE, "cpu.cfs_quota_us");
	put(f, "cpu/cpu.cfs_quota_us", "50000\n");
	put(f, "cpu/cpu.cfs_period_us", "0\n");
	expect_rc(f, CPULIMIT_EPARSE, "cpu.cfs_period_us");
	rm(f, "cpu/cpu.cfs_period_us"); /* a quota without a period */
	expect_rc(f, CPULIMIT_EIO, "cpu.cfs_period_us");
	rm(f, "cpu/cpu.cfs_quota_us");
	rm(f, "cpu");
	/* the combined mount point some runtimes use */
	put(f, "cpu,cpuacct/cpu.cfs_quota_us", "300000\n");
	put(f, "cpu,cpuacct/cpu.cfs_period_us", "100000\n");
	assert_true(read_ok(f) == 3.0);
}

static void test_v2_before_v1(void **state)
{
	struct fx *f = *state;
	put(f, "cpu/cpu.cfs_quota_us", "800000\n");
	put(f, "cpu/cpu.cfs_period_us", "100000\n");
	put(f, "cpu.max", "100000 100000\n");
	assert_true(read_ok(f) == 1.0);
	put(f, "cpu.max", "max 100000\n"); /* v2 says no limit: v1's files are not v2's */
	expect_rc(f, CPULIMIT_NONE, NULL);
}

static void test_nothing(void **state)
{
	struct fx *f = *state;
	expect_rc(f, CPULIMIT_NONE, NULL); /* no cgroup files at all (not Linux, not mounted) */
}

static void test_count(void **state)
{
	(void)state;
	assert_int_equal(cpulimit_count(1.5, 64), 2);
	assert_int_equal(cpulimit_count(1.0, 64), 1);
	assert_int_equal(cpulimit_count(0.1, 64), 1); /* at least one */
	assert_int_equal(cpulimit_count(2.0000001, 64), 3);
	assert_int_equal(cpulimit_count(100.0, 8), 8);   /* a limit above the host's CPUs */
	assert_int_equal(cpulimit_count(0, 64), 64);     /* no limit: the host's */
	assert_int_equal(cpulimit_count(-1, 0), 1);      /* nothing known */
	assert_int_equal(cpulimit_count(3.0, 0), 3);     /* online unknown: the limit */
	assert_int_equal(cpulimit_count(1e30, 0), 4096); /* bounded */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_v2, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_v2_malformed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_v1, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_v2_before_v1, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nothing, setup, teardown),
	    cmocka_unit_test(test_count),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
