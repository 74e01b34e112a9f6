/* Unit tests for lib/util/memlimit: the parsers, and the cgroup memory limit read from files
 * in a temp dir (a fake /proc/self/cgroup beside a fake cgroup root). */
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

#include "memlimit.h"

static void test_parse_value(void **state)
{
	uint64_t b = 7;
	(void)state;
	assert_int_equal(memlimit_parse_value("268435456\n", &b), 0);
	assert_int_equal(b, 268435456);
	assert_int_equal(memlimit_parse_value("0", &b), 0);
	assert_int_equal(b, 0);
	b = 7;
	assert_int_equal(memlimit_parse_value("max\n", &b), MEMLIMIT_NONE);
	assert_int_equal(memlimit_parse_value("max", &b), MEMLIMIT_NONE);
	/* v1's "no limit": PAGE_COUNTER_MAX pages of 4 KiB */
	assert_int_equal(memlimit_parse_value("9223372036854771712\n", &b), MEMLIMIT_NONE);
	assert_int_equal(b, 7);
	assert_int_equal(memlimit_parse_value("", &b), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_value("\n", &b), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_value("-1", &b), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_value("+5", &b), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_value("256Mi", &b), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_value(" 5", &b), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_value("5\n\n", &b), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_value("maxi", &b), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_value("18446744073709551616", &b), MEMLIMIT_EPARSE);
	assert_int_equal(b, 7);
}

static void test_parse_cgroup(void **state)
{
	char v2[MEMLIMIT_PATH_MAX], v1[MEMLIMIT_PATH_MAX], big[MEMLIMIT_PATH_MAX + 16];
	(void)state;
	assert_int_equal(memlimit_parse_cgroup("0::/system.slice/gmg.scope\n", v2, v1), 0);
	assert_string_equal(v2, "/system.slice/gmg.scope");
	assert_string_equal(v1, "");
	/* hybrid: v1 memory controller plus an empty v2 line (this build machine's shape) */
	assert_int_equal(memlimit_parse_cgroup("9:name=systemd:/\n4:memory:/a/b\n"
	                                       "2:cpu,cpuacct:/\n0::/\n",
	                                       v2, v1),
	                 0);
	assert_string_equal(v2, "/");
	assert_string_equal(v1, "/a/b");
	assert_int_equal(memlimit_parse_cgroup("3:cpuset,memory:/k8s/pod1", v2, v1), 0);
	assert_string_equal(v1, "/k8s/pod1");
	assert_string_equal(v2, "");
	assert_int_equal(memlimit_parse_cgroup("3:memoryx:/k8s\n", v2, v1), 0);
	assert_string_equal(v1, "");
	assert_int_equal(memlimit_parse_cgroup("", v2, v1), 0);
	assert_int_equal(memlimit_parse_cgroup("0:/x\n", v2, v1), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_cgroup("a::/x\n", v2, v1), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_cgroup("0::x\n", v2, v1), MEMLIMIT_EPARSE);
	assert_int_equal(memlimit_parse_cgroup("0::\n", v2, v1), MEMLIMIT_EPARSE);
	memset(big, 'a', sizeof(big));
	memcpy(big, "0::/", 4);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(memlimit_parse_cgroup(big, v2, v1), MEMLIMIT_EPARSE);
}

struct fx {
	char dir[64], root[96], proc[96];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "%s/memlimit-XXXXXX",
	         tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->root, sizeof(f->root), "%s/cg", f->dir);
	snprintf(f->proc, sizeof(f->proc), "%s/proc-cgroup", f->dir);
	assert_int_equal(mkdir(f->root, 0700), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Write text to root/rel (or the proc file when rel is NULL), making rel's directories. */
static void put(const struct fx *f, const char *rel, const char *text)
{
	char p[256];
	if (rel == NULL) {
		snprintf(p, sizeof(p), "%s", f->proc);
	} else {
		snprintf(p, sizeof(p), "%s/%s", f->root, rel);
		for (char *s = p + strlen(f->root) + 1; (s = strchr(s, '/')) != NULL; s++) {
			*s = '\0';
			mkdir(p, 0700);
			*s = '/';
		}
	}
	FILE *fp = fopen(p, "w");
	assert_non_null(fp);
	fputs(text, fp);
	assert_int_equal(fclose(fp), 0);
}

static int rd(const struct fx *f, uint64_t *b, char *where, char *err)
{
	return memlimit_read(f->root, f->proc, b, where, err, MEMLIMIT_ERR_MAX);
}

static void test_v2(void **state)
{
	struct fx *f = *state;
	char where[MEMLIMIT_WHERE_MAX], err[MEMLIMIT_ERR_MAX], want[256];
	uint64_t b = 0;

	put(f, NULL, "0::/system.slice/run-1.scope\n");
	put(f, "system.slice/run-1.scope/memory.max", "67108864\n");
	put(f, "system.slice/memory.max", "max\n");
	assert_int_equal(rd(f, &b, where, err), 0);
	assert_int_equal(b, 67108864);
	snprintf(want, sizeof(want), "%s/system.slice/run-1.scope/memory.max", f->root);
	assert_string_equal(where, want);
	/* a parent's smaller limit binds */
	put(f, "system.slice/memory.max", "33554432\n");
	assert_int_equal(rd(f, &b, where, err), 0);
	assert_int_equal(b, 33554432);
	/* no limit anywhere */
	put(f, "system.slice/memory.max", "max\n");
	put(f, "system.slice/run-1.scope/memory.max", "max\n");
	b = 5;
	assert_int_equal(rd(f, &b, where, err), MEMLIMIT_NONE);
	assert_int_equal(b, 5);
	/* garbage is an error naming the file */
	put(f, "system.slice/run-1.scope/memory.max", "64M\n");
	assert_int_equal(rd(f, &b, where, err), MEMLIMIT_EPARSE);
	assert_non_null(strstr(err, "run-1.scope/memory.max"));
	assert_non_null(strstr(err, "64M"));
}

static void test_v2_namespaced(void **state)
{
	struct fx *f = *state;
	char err[MEMLIMIT_ERR_MAX];
	uint64_t b = 0;

	/* in a cgroup namespace the path is "/": the root's own file */
	put(f, NULL, "0::/\n");
	put(f, "memory.max", "268435456\n");
	assert_int_equal(rd(f, &b, NULL, err), 0);
	assert_int_equal(b, 268435456);
	/* a host path that does not exist under root (no namespace, mounted the container's
	 * own cgroup): the root's file */
	put(f, NULL, "0::/kubepods.slice/pod1/cri-x\n");
	assert_int_equal(rd(f, &b, NULL, err), 0);
	assert_int_equal(b, 268435456);
}

static void test_v1(void **state)
{
	struct fx *f = *state;
	char where[MEMLIMIT_WHERE_MAX], err[MEMLIMIT_ERR_MAX];
	uint64_t b = 0;

	/* hybrid: "0::/" with no memory.max under root; the v1 memory controller has it */
	put(f, NULL, "4:memory:/process_api/x/gmg\n0::/\n");
	put(f, "memory/process_api/x/gmg/memory.limit_in_bytes", "99999744\n");
	put(f, "memory/process_api/x/memory.limit_in_bytes", "9223372036854771712\n");
	assert_int_equal(rd(f, &b, where, err), 0);
	assert_int_equal(b, 99999744);
	assert_non_null(strstr(where, "memory/process_api/x/gmg/memory.limit_in_bytes"));
	put(f, "memory/process_api/x/gmg/memory.limit_in_bytes", "9223372036854771712\n");
	assert_int_equal(rd(f, &b, where, err), MEMLIMIT_NONE);
}

static void test_nothing(void **state)
{
	struct fx *f = *state;
	char err[MEMLIMIT_ERR_MAX];
	uint64_t b = 0;

	assert_int_equal(rd(f, &b, NULL, err), MEMLIMIT_NONE); /* no proc file */
	put(f, NULL, "0::/a\n");
	assert_int_equal(rd(f, &b, NULL, err), MEMLIMIT_NONE); /* no cgroup files */
	put(f, NULL, "what\n");
	assert_int_equal(rd(f, &b, NULL, err), MEMLIMIT_EPARSE);
	assert_non_null(strstr(err, "proc-cgroup"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_value),
	    cmocka_unit_test(test_parse_cgroup),
	    cmocka_unit_test_setup_teardown(test_v2, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_v2_namespaced, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_v1, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nothing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
