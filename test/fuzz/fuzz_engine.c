/*
 * Fuzz target: the engine command-line reader and its shell splitter (lib/core/engine.h).
 * Input: byte 0 picks how many of the NUL-separated words after it are the command (the rest
 * are args) and whether an image and a TGI env value are given; the whole input after byte 0
 * is also split as one sh -c string.
 * Properties: engine_read returns 0 or ENGINE_EINVAL; an error names the container and leaves
 * the setting empty; a found setting has a kind and a ratio 0 < r <= 1 and words; a split
 * keeps every word and separator inside its buffer, NUL-terminated, within the word cap; the
 * same input gives the same answer twice.
 */
#include "engine.h"
#include "fuzz.h"

#define WORDS 64

static void check_split(const char *s)
{
	static struct engine_words w;
	char err[96];
	int rc = engine_shell_split(s, &w, err, sizeof(err));

	if (rc != 0) {
		if (rc != -1 || !fuzz_err_ok(err, sizeof(err)) || w.n != 0)
			fuzz_fail("split error %d without a reason or with words", rc);
		return;
	}
	if (w.n > ENGINE_WORDS_MAX)
		fuzz_fail("%zu words", w.n);
	for (size_t i = 0; i < w.n; i++) {
		if (w.sep[i]) {
			if (strcmp(w.w[i], ";") != 0 || w.opaque[i] != 0)
				fuzz_fail("separator %zu is \"%s\"", i, w.w[i]);
			if (i > 0 && w.sep[i - 1])
				fuzz_fail("two separators in a row at %zu", i);
			continue;
		}
		if (w.w[i] < w.buf || w.w[i] >= w.buf + sizeof(w.buf) ||
		    memchr(w.w[i], '\0', (size_t)(w.buf + sizeof(w.buf) - w.w[i])) == NULL)
			fuzz_fail("word %zu outside the buffer", i);
		if (w.opaque[i] > 2)
			fuzz_fail("word %zu opaque %d", i, w.opaque[i]);
		if (w.opaque[i] == 0 && strlen(w.w[i]) > strlen(s))
			fuzz_fail("word %zu longer than the input", i);
	}
	if (w.n > 0 && !w.sep[w.n - 1])
		fuzz_fail("the last command is not ended");
}

static void check_read(const struct engine_input *in)
{
	struct engine_setting a, b;
	char err[256], err2[256];
	int rc = engine_read(in, NULL, &a, err, sizeof(err));
	int rc2 = engine_read(in, NULL, &b, err2, sizeof(err2));

	if (rc != rc2 || memcmp(&a, &b, sizeof(a)) != 0)
		fuzz_fail("two reads of one input differ");
	if (rc == ENGINE_EINVAL) {
		if (!fuzz_err_ok(err, sizeof(err)) || strncmp(err, "container \"", 11) != 0 ||
		    a.status != ENGINE_NOT_FOUND ||
		    (strstr(err, "--") == NULL && strstr(err, "env") == NULL))
			fuzz_fail("an error without the container or the flag: %s", err);
		return;
	}
	if (rc != 0)
		fuzz_fail("engine_read returned %d", rc);
	if (memchr(a.words, '\0', sizeof(a.words)) == NULL)
		fuzz_fail("words not terminated");
	switch (a.status) {
	case ENGINE_NOT_FOUND:
		if (a.kind != ENGINE_NONE || a.words[0] != '\0')
			fuzz_fail("not found, yet kind %d words \"%s\"", a.kind, a.words);
		break;
	case ENGINE_FOUND:
		if (a.kind == ENGINE_NONE || a.kind >= ENGINE_KINDS || a.ratio_ppm == 0 ||
		    a.ratio_ppm > QUANTITY_PPM || a.words[0] == '\0' ||
		    strncmp(a.words, engine_name(a.kind), strlen(engine_name(a.kind))) != 0)
			fuzz_fail("found: kind %d ppm %u words \"%s\"", a.kind, a.ratio_ppm,
			          a.words);
		if (a.origin < ENGINE_ORIGIN_FLAG || a.origin > ENGINE_ORIGIN_DEFAULT)
			fuzz_fail("origin %d", a.origin);
		break;
	case ENGINE_UNREADABLE:
		if (a.words[0] == '\0' || a.ratio_ppm != 0)
			fuzz_fail("unreadable without words");
		break;
	default:
		fuzz_fail("status %d", a.status);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *words[WORDS];
	size_t n = 0, ncmd;
	char *s;

	if (size < 1 || size > 2 * ENGINE_SCRIPT_MAX)
		return 0;
	s = fuzz_strdup(data + 1, size - 1);
	check_split(s);

	/* The words: the NUL-separated pieces of the input after byte 0. */
	for (char *p = s; n < WORDS && p < s + size - 1; p += strlen(p) + 1)
		words[n++] = p;
	ncmd = data[0] & 7;
	if (ncmd > n)
		ncmd = n;
	struct engine_input in = {
	    .container = "fuzz",
	    .command = words,
	    .n_command = ncmd,
	    .args = words + ncmd,
	    .n_args = n - ncmd,
	    .image = (data[0] & 8) && n > 0 ? words[n - 1] : NULL,
	    .env_tgi_fraction = (data[0] & 16) && n > 1 ? words[0] : NULL,
	};
	check_read(&in);
	if (data[0] & 32) { /* the whole input as the string of sh -c */
		const char *sh[] = {"/bin/sh", "-c", s};
		struct engine_input sin = {.container = "fuzz", .command = sh, .n_command = 3};
		check_read(&sin);
	}
	free(s);
	return 0;
}
