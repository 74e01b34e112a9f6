/*
 * Unit tests for lib/kube/watch: the watch stream decoder, over streams shaped like
 * kube-apiserver's (one JSON object per line), fed whole, cut at every byte, byte by byte and
 * many events per chunk; caps, garbage and a callback that stops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch.h"

/* A pods watch as kube-apiserver writes it (objects trimmed to what matters). */
static const char STREAM[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"name\":\"vllm-0\",\"namespace\":\"inference\",\"uid\":\"7c1f\",\"resourceVersion\":"
    "\"5001\"},\"spec\":{\"nodeName\":\"gpu-node-a\",\"containers\":[{\"name\":\"c\",\"env\":[{"
    "\"name\":\"GPU_MEMORY_LIMIT\",\"value\":\"24Gi\"}]}]},\"status\":{\"phase\":\"Running\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"name\":\"vllm-0\",\"namespace\":\"inference\",\"uid\":\"7c1f\",\"resourceVersion\":"
    "\"5002\",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},\"status\":{\"phase\":"
    "\"Running\"}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"resourceVersion\":\"5003\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
    "\"name\":\"vllm-0\",\"namespace\":\"inference\",\"uid\":\"7c1f\",\"resourceVersion\":"
    "\"5004\"},\"status\":{\"phase\":\"Succeeded\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"too old resource version: 4000 (5004)\",\"reason\":"
    "\"Expired\",\"code\":410}}\n";

static const enum watch_event_type STREAM_TYPES[] = {WATCH_ADDED, WATCH_MODIFIED, WATCH_BOOKMARK,
                                                     WATCH_DELETED, WATCH_ERROR};
static const char *const STREAM_RVS[] = {"5001", "5002", "5003", "5004", NULL};

#define MAX_SEEN 16

struct seen {
	int n;
	enum watch_event_type type[MAX_SEEN];
	char rv[MAX_SEEN][32];
	char name[MAX_SEEN][64];
	int code[MAX_SEEN];
	int stop_at; /* return nonzero on this event (1-based); 0: never */
};

static int record(void *ctx, enum watch_event_type type, const struct cJSON *object)
{
	struct seen *s = ctx;
	const char *rv = watch_resource_version(object);
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(object, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(md, "name");

	assert_true(s->n < MAX_SEEN);
	s->type[s->n] = type;
	snprintf(s->rv[s->n], sizeof(s->rv[s->n]), "%s", rv ? rv : "-");
	snprintf(s->name[s->n], sizeof(s->name[s->n]), "%s",
	         cJSON_IsString(name) ? name->valuestring : "");
	s->code[s->n] = watch_status_code(object);
	s->n++;
	return s->stop_at != 0 && s->n == s->stop_at;
}

static void check_stream(const struct seen *s)
{
	assert_int_equal(s->n, 5);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(s->type[i], STREAM_TYPES[i]);
		assert_string_equal(s->rv[i], STREAM_RVS[i] ? STREAM_RVS[i] : "-");
	}
	assert_string_equal(s->name[0], "vllm-0");
	assert_string_equal(s->name[3], "vllm-0");
	assert_string_equal(s->name[2], "");
	assert_int_equal(s->code[4], 410);
	assert_int_equal(s->code[0], 0);
}

static void test_whole_stream(void **state)
{
	struct watch_decoder *d = watch_decoder_new(0);
	struct seen s = {0};
	char err[256] = "";

	(void)state;
	assert_non_null(d);
	assert_int_equal(
	    watch_decoder_feed(d, STREAM, strlen(STREAM), record, &s, err, sizeof(err)), 0);
	check_stream(&s);
	assert_int_equal(watch_decoder_pending(d), 0);
	/* Nothing pending: the end of the stream adds nothing. */
	assert_int_equal(watch_decoder_finish(d, record, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 5);
	watch_decoder_free(d);
	watch_decoder_free(NULL);
}

static void test_split_at_every_byte(void **state)
{
	size_t len = strlen(STREAM);
	char err[256] = "";

	(void)state;
	for (size_t cut = 0; cut <= len; cut++) {
		struct watch_decoder *d = watch_decoder_new(0);
		struct seen s = {0};

		assert_int_equal(watch_decoder_feed(d, STREAM, cut, record, &s, err, sizeof(err)),
		                 0);
		assert_int_equal(
		    watch_decoder_feed(d, STREAM + cut, len - cut, record, &s, err, sizeof(err)),
		    0);
		check_stream(&s);
		assert_int_equal(watch_decoder_pending(d), 0);
		watch_decoder_free(d);
	}
	/* Byte by byte, and in odd-sized chunks. */
	for (size_t step = 1; step <= 7; step += 3) {
		struct watch_decoder *d = watch_decoder_new(0);
		struct seen s = {0};

		for (size_t off = 0; off < len; off += step) {
			size_t n = len - off < step ? len - off : step;
			assert_int_equal(
			    watch_decoder_feed(d, STREAM + off, n, record, &s, err, sizeof(err)),
			    0);
		}
		check_stream(&s);
		watch_decoder_free(d);
	}
}

/* Blank lines, CRLF and whitespace between events; empty feeds. */
static void test_blank_lines_and_crlf(void **state)
{
	const char *chunk =
	    "\n\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\r\n"
	    "   \n\t\r\n"
	    " {\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"}}} \n";
	struct watch_decoder *d = watch_decoder_new(0);
	struct seen s = {0};
	char err[256] = "";

	(void)state;
	assert_int_equal(watch_decoder_feed(d, NULL, 0, record, &s, err, sizeof(err)), 0);
	assert_int_equal(watch_decoder_feed(d, chunk, strlen(chunk), record, &s, err, sizeof(err)),
	                 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.name[0], "a");
	assert_string_equal(s.name[1], "b");
	watch_decoder_free(d);
}

/* A stream's last event without "\n": delivered at finish; a truncated one is an error. */
static void test_finish(void **state)
{
	const char *last = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"z\"}}}";
	struct watch_decoder *d = watch_decoder_new(0);
	struct seen s = {0};
	char err[256] = "";

	(void)state;
	assert_int_equal(watch_decoder_feed(d, last, strlen(last), record, &s, err, sizeof(err)),
	                 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(watch_decoder_pending(d), strlen(last));
	assert_int_equal(watch_decoder_finish(d, record, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.name[0], "z");
	/* Spent afterwards. */
	assert_true(watch_decoder_feed(d, "\n", 1, record, &s, err, sizeof(err)) < 0);
	watch_decoder_free(d);

	d = watch_decoder_new(0);
	assert_int_equal(watch_decoder_feed(d, last, 20, record, &s, err, sizeof(err)), 0);
	assert_int_equal(watch_decoder_finish(d, record, &s, err, sizeof(err)), WATCH_EPARSE);
	assert_int_equal(s.n, 1);
	watch_decoder_free(d);

	d = watch_decoder_new(0);
	assert_int_equal(watch_decoder_feed(d, " \r", 2, record, &s, err, sizeof(err)), 0);
	assert_int_equal(watch_decoder_finish(d, record, &s, err, sizeof(err)), 0);
	watch_decoder_free(d);
}

static char *event_of_size(size_t size)
{
	const char *head = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"";
	const char *tail = "\"}}}";
	char *e = malloc(size + 2);

	assert_non_null(e);
	assert_true(size > strlen(head) + strlen(tail));
	memcpy(e, head, strlen(head));
	memset(e + strlen(head), 'x', size - strlen(head) - strlen(tail));
	memcpy(e + size - strlen(tail), tail, strlen(tail));
	e[size] = '\n';
	e[size + 1] = '\0';
	return e;
}

static void test_over_cap(void **state)
{
	char *fits = event_of_size(200), *over = event_of_size(201);
	struct watch_decoder *d;
	struct seen s = {0};
	char err[256] = "";

	(void)state;
	/* Exactly the cap: fine, whole or in pieces. */
	d = watch_decoder_new(200);
	assert_int_equal(watch_decoder_feed(d, fits, 201, record, &s, err, sizeof(err)), 0);
	assert_int_equal(watch_decoder_feed(d, fits, 100, record, &s, err, sizeof(err)), 0);
	assert_int_equal(watch_decoder_feed(d, fits + 100, 101, record, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 2);
	/* One byte over, in one chunk. */
	assert_int_equal(watch_decoder_feed(d, over, 202, record, &s, err, sizeof(err)),
	                 WATCH_ETOOBIG);
	assert_non_null(strstr(err, "over 200 bytes"));
	/* Spent: the rest of the stream is not decoded. */
	assert_int_equal(watch_decoder_feed(d, fits, 201, record, &s, err, sizeof(err)),
	                 WATCH_ETOOBIG);
	assert_int_equal(s.n, 2);
	watch_decoder_free(d);

	/* Over the cap before its end arrives: refused without waiting for the newline. */
	d = watch_decoder_new(200);
	assert_int_equal(watch_decoder_feed(d, over, 150, record, &s, err, sizeof(err)), 0);
	assert_int_equal(watch_decoder_feed(d, over + 150, 51, record, &s, err, sizeof(err)),
	                 WATCH_ETOOBIG);
	watch_decoder_free(d);

	/* A larger cap takes it. */
	d = watch_decoder_new(201);
	assert_int_equal(watch_decoder_feed(d, over, 202, record, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 3);
	watch_decoder_free(d);
	free(fits);
	free(over);
}

static void test_garbage_lines(void **state)
{
	static const char *const bad[] = {
	    "not json\n",
	    "[1,2]\n",
	    "\"ADDED\"\n",
	    "{\"type\":\"ADDED\"}\n",
	    "{\"type\":\"ADDED\",\"object\":[]}\n",
	    "{\"type\":\"ADDED\",\"object\":null}\n",
	    "{\"type\":\"WHATEVER\",\"object\":{}}\n",
	    "{\"type\":7,\"object\":{}}\n",
	    "{\"object\":{}}\n",
	    "{\"type\":\"ADDED\",\"object\":{}} {\"type\":\"ADDED\",\"object\":{}}\n",
	    "{\"type\":\"ADDED\",\"object\":{}}x\n",
	    "{\"type\":\"ADDED\",\"object\":{\n",
	};
	const char *good = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"ok\"}}}\n";
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct watch_decoder *d = watch_decoder_new(0);
		struct seen s = {0};
		char chunk[512];

		/* A good event first: delivered even though the chunk then goes bad. */
		snprintf(chunk, sizeof(chunk), "%s%s%s", good, bad[i], good);
		err[0] = '\0';
		assert_int_equal(
		    watch_decoder_feed(d, chunk, strlen(chunk), record, &s, err, sizeof(err)),
		    WATCH_EPARSE);
		assert_int_equal(s.n, 1);
		assert_non_null(strstr(err, "watch event 2"));
		assert_null(strchr(err, '\n'));
		watch_decoder_free(d);
	}
	/* A NUL inside a line is not JSON either. */
	{
		struct watch_decoder *d = watch_decoder_new(0);
		const char nul[] = "{\"type\":\"ADDED\",\0\"object\":{}}\n";

		assert_int_equal(
		    watch_decoder_feed(d, nul, sizeof(nul) - 1, record, NULL, err, sizeof(err)),
		    WATCH_EPARSE);
		watch_decoder_free(d);
	}
}

static void test_callback_stops(void **state)
{
	struct watch_decoder *d = watch_decoder_new(0);
	struct seen s = {.stop_at = 2};
	char err[256] = "";

	(void)state;
	assert_int_equal(
	    watch_decoder_feed(d, STREAM, strlen(STREAM), record, &s, err, sizeof(err)),
	    WATCH_ESTOP);
	assert_int_equal(s.n, 2);
	assert_non_null(strstr(err, "MODIFIED"));
	assert_int_equal(
	    watch_decoder_feed(d, STREAM, strlen(STREAM), record, &s, err, sizeof(err)),
	    WATCH_ESTOP);
	assert_int_equal(s.n, 2);
	watch_decoder_free(d);
}

static void test_helpers(void **state)
{
	cJSON *o = cJSON_Parse("{\"code\":410,\"metadata\":{\"resourceVersion\":\"77\"}}");
	cJSON *bad = cJSON_Parse("{\"code\":\"410\",\"metadata\":{\"resourceVersion\":77}}");

	(void)state;
	assert_int_equal(watch_status_code(o), 410);
	assert_string_equal(watch_resource_version(o), "77");
	assert_int_equal(watch_status_code(bad), 0);
	assert_null(watch_resource_version(bad));
	assert_int_equal(watch_status_code(NULL), 0);
	assert_null(watch_resource_version(NULL));
	assert_string_equal(watch_event_type_name(WATCH_BOOKMARK), "BOOKMARK");
	assert_string_equal(watch_event_type_name((enum watch_event_type)0), "UNKNOWN");
	cJSON_Delete(o);
	cJSON_Delete(bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_whole_stream),
	    cmocka_unit_test(test_split_at_every_byte),
	    cmocka_unit_test(test_blank_lines_and_crlf),
	    cmocka_unit_test(test_finish),
	    cmocka_unit_test(test_over_cap),
	    cmocka_unit_test(test_garbage_lines),
	    cmocka_unit_test(test_callback_stops),
	    cmocka_unit_test(test_helpers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
