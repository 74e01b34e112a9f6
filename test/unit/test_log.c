/* Unit tests for lib/log: every line one valid JSON object, capped, never interleaved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#define THREADS          8
#define LINES_PER_THREAD 300

struct capture {
	char path[64];
	int fd;
};

static int setup(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	snprintf(c->path, sizeof(c->path), "/tmp/gmg-log-XXXXXX");
	c->fd = mkstemp(c->path);
	assert_true(c->fd >= 0);
	/* O_APPEND: each write lands at the end, as stderr redirected to a file does. */
	assert_int_equal(fcntl(c->fd, F_SETFL, O_APPEND), 0);
	log_set_fd(c->fd);
	log_set_level(LOG_DEBUG);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct capture *c = *state;

	log_set_fd(2);
	log_set_level(LOG_INFO);
	close(c->fd);
	unlink(c->path);
	free(c);
	return 0;
}

/* Everything written so far; caller frees. */
static char *slurp(struct capture *c, size_t *len)
{
	off_t end = lseek(c->fd, 0, SEEK_END);
	char *buf = malloc((size_t)end + 1);

	assert_non_null(buf);
	assert_int_equal(pread(c->fd, buf, (size_t)end, 0), end);
	buf[end] = '\0';
	*len = (size_t)end;
	return buf;
}

/* Exactly one line, parsed. */
static cJSON *one_line(struct capture *c)
{
	size_t len;
	char *buf = slurp(c, &len);
	cJSON *j;

	assert_true(len > 0);
	assert_true(len <= LOG_LINE_MAX);
	assert_int_equal(buf[len - 1], '\n');
	assert_ptr_equal(strchr(buf, '\n'), buf + len - 1);
	j = cJSON_ParseWithLengthOpts(buf, len + 1, NULL, 1);
	assert_non_null(j);
	free(buf);
	return j;
}

static const char *str(const cJSON *j, const char *key)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, key);

	assert_true(cJSON_IsString(it));
	return it->valuestring;
}

static void test_fields_every_kind(void **state)
{
	struct log_field f[] = {LOG_STR("uid", "a1"),      LOG_INT("n", -42),
	                        LOG_DBL("lat", 0.25),      LOG_BOOL("ok", 1),
	                        LOG_STR("none", NULL),     LOG_DBL("nan", NAN),
	                        LOG_INT("big", INT64_MAX), LOG_END};
	cJSON *j;

	log_fields(LOG_WARN, "decision", f);
	j = one_line(*state);
	assert_string_equal(str(j, "level"), "warn");
	assert_string_equal(str(j, "msg"), "decision");
	assert_string_equal(str(j, "uid"), "a1");
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n")->valuedouble, -42);
	assert_true(cJSON_GetObjectItemCaseSensitive(j, "lat")->valuedouble == 0.25);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "none")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "nan")));
	assert_non_null(cJSON_GetObjectItemCaseSensitive(j, "big"));
	assert_null(cJSON_GetObjectItemCaseSensitive(j, "truncated"));
	/* 2026-11-29T17:35:46.123Z */
	const char *ts = str(j, "ts");
	assert_int_equal(strlen(ts), 24);
	assert_int_equal(ts[10], 'T');
	assert_int_equal(ts[19], '.');
	assert_int_equal(ts[23], 'Z');
	cJSON_Delete(j);
}

static void test_level_filter(void **state)
{
	size_t len;
	char *buf;

	log_set_level(LOG_WARN);
	assert_int_equal(log_get_level(), LOG_WARN);
	log_msg(LOG_INFO, "hidden %d", 1);
	log_fields(LOG_DEBUG, "hidden", NULL);
	buf = slurp(*state, &len);
	assert_int_equal(len, 0);
	free(buf);
	log_msg(LOG_ERROR, "shown %d", 2);
	cJSON *j = one_line(*state);
	assert_string_equal(str(j, "msg"), "shown 2");
	assert_string_equal(str(j, "level"), "error");
	cJSON_Delete(j);
}

static void test_escaping(void **state)
{
	const char *nasty = "q\"b\\s\n\r\t\x01\x7f \xc3\xa9 \xff\xfe end";
	struct log_field f[] = {LOG_STR("k\"ey", nasty), LOG_END};
	cJSON *j;

	log_fields(LOG_INFO, "line1\nline2", f);
	j = one_line(*state);
	assert_string_equal(str(j, "msg"), "line1\nline2");
	/* Invalid UTF-8 bytes become U+FFFD (EF BF BD); the rest round-trips. */
	assert_string_equal(str(j, "k\"ey"),
	                    "q\"b\\s\n\r\t\x01\x7f \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd end");
	cJSON_Delete(j);
}

static void test_truncation(void **state)
{
	size_t big_len = 3 * LOG_LINE_MAX;
	char *big = malloc(big_len + 1);
	cJSON *j;

	assert_non_null(big);
	/* A two-byte character repeated: the cut must not split one. */
	for (size_t i = 0; i < big_len; i += 2) {
		big[i] = '\xc3';
		big[i + 1] = '\xa9';
	}
	big[big_len] = '\0';
	struct log_field f[] = {LOG_STR("a", "first"), LOG_STR("big", big), LOG_INT("after", 1),
	                        LOG_END};
	log_fields(LOG_INFO, "cut", f);
	j = one_line(*state);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "truncated")));
	assert_string_equal(str(j, "a"), "first");
	assert_true(strlen(str(j, "big")) > LOG_LINE_MAX / 2);
	assert_null(cJSON_GetObjectItemCaseSensitive(j, "after"));
	cJSON_Delete(j);
	free(big);
}

static void test_log_msg_truncation(void **state)
{
	char big[2 * LOG_LINE_MAX];
	cJSON *j;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_msg(LOG_INFO, "%s", big);
	j = one_line(*state);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "truncated")));
	assert_int_equal(str(j, "msg")[0], 'x');
	cJSON_Delete(j);
}

static void test_level_parse(void **state)
{
	enum log_level l = LOG_INFO;

	(void)state;
	assert_int_equal(log_level_parse("debug", &l), 0);
	assert_int_equal(l, LOG_DEBUG);
	assert_int_equal(log_level_parse("warn", &l), 0);
	assert_int_equal(l, LOG_WARN);
	assert_int_equal(log_level_parse("error", &l), 0);
	assert_int_equal(l, LOG_ERROR);
	assert_int_equal(log_level_parse("info", &l), 0);
	assert_int_equal(l, LOG_INFO);
	assert_int_equal(log_level_parse("loud", &l), -1);
	assert_int_equal(log_level_parse("", &l), -1);
	assert_int_equal(log_level_parse(NULL, &l), -1);
}

static void *writer(void *arg)
{
	char pad[600];
	long id = (long)(intptr_t)arg;

	memset(pad, 'a' + (int)id, sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	for (int i = 0; i < LINES_PER_THREAD; i++) {
		struct log_field f[] = {LOG_INT("thread", id), LOG_INT("i", i), LOG_STR("pad", pad),
		                        LOG_END};
		log_fields(LOG_INFO, "concurrent", f);
	}
	return NULL;
}

static void test_threads_never_interleave(void **state)
{
	pthread_t t[THREADS];
	size_t len, lines = 0;
	char *buf, *line, *save = NULL;

	for (long i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	buf = slurp(*state, &len);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		cJSON *j = cJSON_Parse(line);
		assert_non_null(j);
		long id = (long)cJSON_GetObjectItemCaseSensitive(j, "thread")->valuedouble;
		assert_int_equal(str(j, "pad")[0], 'a' + id);
		assert_int_equal(strlen(str(j, "pad")), 599);
		cJSON_Delete(j);
		lines++;
	}
	assert_int_equal(lines, THREADS * LINES_PER_THREAD);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fields_every_kind, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_level_filter, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_escaping, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_truncation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_log_msg_truncation, setup, teardown),
	    cmocka_unit_test(test_level_parse),
	    cmocka_unit_test_setup_teardown(test_threads_never_interleave, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
