/* Unit tests for lib/util/capfile: the one capped file reader. */
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

#include "capfile.h"

struct fx {
	char dir[64];
	char path[128];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "%s/capfile-XXXXXX",
	         tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/f", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	unlink(f->path);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* A file of n bytes 'a'..'z' repeating at f->path. */
static void write_file(struct fx *f, size_t n)
{
	FILE *fp = fopen(f->path, "wb");

	assert_non_null(fp);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(fputc('a' + (int)(i % 26), fp), EOF);
	assert_int_equal(fclose(fp), 0);
}

static void check_content(const char *buf, size_t len, size_t want)
{
	assert_int_equal(len, want);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(buf[i], 'a' + (int)(i % 26));
	assert_int_equal(buf[len], '\0');
}

static void test_missing_file(void **state)
{
	struct fx *f = *state;
	char err[256] = "", *buf = (char *)state;
	size_t len = 7;

	assert_int_equal(capfile_read(f->path, 100, 0, &buf, &len, err, sizeof(err)), CAPFILE_EIO);
	assert_ptr_equal(buf, (char *)state); /* untouched on error */
	assert_int_equal(len, 7);
	assert_non_null(strstr(err, f->path));
	assert_non_null(strstr(err, "No such file or directory"));
	/* err may be NULL. */
	assert_int_equal(capfile_read(f->path, 100, CAPFILE_REGULAR, &buf, &len, NULL, 0),
	                 CAPFILE_EIO);
}

static void test_empty_file(void **state)
{
	struct fx *f = *state;
	char err[256] = "", *buf = NULL;
	size_t len = 7;

	write_file(f, 0);
	assert_int_equal(capfile_read(f->path, 100, CAPFILE_REGULAR, &buf, &len, err, sizeof(err)),
	                 0);
	assert_non_null(buf);
	assert_int_equal(len, 0);
	assert_string_equal(buf, "");
	free(buf);
	/* Even with a cap of 0. */
	assert_int_equal(capfile_read(f->path, 0, 0, &buf, &len, err, sizeof(err)), 0);
	assert_int_equal(len, 0);
	free(buf);
}

static void test_at_the_cap(void **state)
{
	struct fx *f = *state;
	char err[256] = "", *buf = NULL;
	size_t len = 0;

	write_file(f, 10000);
	assert_int_equal(capfile_read(f->path, 10000, 0, &buf, &len, err, sizeof(err)), 0);
	check_content(buf, len, 10000);
	free(buf);
	assert_int_equal(
	    capfile_read(f->path, 1 << 20, CAPFILE_REGULAR, &buf, &len, err, sizeof(err)), 0);
	check_content(buf, len, 10000);
	free(buf);
}

static void test_one_byte_over(void **state)
{
	struct fx *f = *state;
	char err[256] = "", *buf = NULL;
	size_t len = 0;

	write_file(f, 10001);
	assert_int_equal(capfile_read(f->path, 10000, 0, &buf, &len, err, sizeof(err)),
	                 CAPFILE_ETOOBIG);
	assert_null(buf);
	assert_non_null(strstr(err, f->path));
	assert_non_null(strstr(err, "larger than 10000 bytes"));
	write_file(f, 1);
	assert_int_equal(capfile_read(f->path, 0, 0, &buf, &len, err, sizeof(err)),
	                 CAPFILE_ETOOBIG);
	assert_null(buf);
}

static void test_directory(void **state)
{
	struct fx *f = *state;
	char err[256] = "", *buf = NULL;
	size_t len = 0;

	/* Read as any file: read(2) refuses it. */
	assert_int_equal(capfile_read(f->dir, 100, 0, &buf, &len, err, sizeof(err)), CAPFILE_EIO);
	assert_non_null(strstr(err, f->dir));
	assert_non_null(strstr(err, "Is a directory"));
	/* Regular files only. */
	assert_int_equal(capfile_read(f->dir, 100, CAPFILE_REGULAR, &buf, &len, err, sizeof(err)),
	                 CAPFILE_ENOTREG);
	assert_non_null(strstr(err, f->dir));
	assert_non_null(strstr(err, "not a regular file"));
	assert_null(buf);
}

/* A pipe holding n bytes, its read end open as /dev/fd/N in path: a file of unknown size. */
static int pipe_of(size_t n, char *path, size_t cap)
{
	char chunk[26];
	int fds[2];

	for (int i = 0; i < 26; i++)
		chunk[i] = (char)('a' + i);
	assert_int_equal(pipe(fds), 0);
	for (size_t done = 0; done < n;) {
		size_t k = n - done < sizeof(chunk) ? n - done : sizeof(chunk);
		assert_int_equal(write(fds[1], chunk, k), (ssize_t)k);
		done += k;
	}
	close(fds[1]);
	snprintf(path, cap, "/dev/fd/%d", fds[0]);
	return fds[0];
}

static void test_unknown_size(void **state)
{
	char err[256] = "", path[64], *buf = NULL;
	size_t len = 0;
	int fd;

	/* Past the first buffer: grows, and stops one byte past the cap. */
	fd = pipe_of(10400, path, sizeof(path)); /* 400 * 26: whole chunks */
	assert_int_equal(capfile_read(path, 10400, 0, &buf, &len, err, sizeof(err)), 0);
	check_content(buf, len, 10400);
	free(buf);
	buf = NULL;
	close(fd);
	fd = pipe_of(10400, path, sizeof(path));
	assert_int_equal(capfile_read(path, 10399, 0, &buf, &len, err, sizeof(err)),
	                 CAPFILE_ETOOBIG);
	assert_non_null(strstr(err, "larger than 10399 bytes"));
	assert_null(buf);
	close(fd);
	fd = pipe_of(26, path, sizeof(path));
	assert_int_equal(capfile_read(path, 100, CAPFILE_REGULAR, &buf, &len, err, sizeof(err)),
	                 CAPFILE_ENOTREG);
	close(fd);
	/* An endless device is refused at the cap. */
	assert_int_equal(capfile_read("/dev/zero", 5000, 0, &buf, &len, err, sizeof(err)),
	                 CAPFILE_ETOOBIG);
	assert_null(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_empty_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_at_the_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_one_byte_over, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_directory, setup, teardown),
	    cmocka_unit_test(test_unknown_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
