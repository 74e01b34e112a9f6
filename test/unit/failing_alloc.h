/*
 * failing_alloc: the library's allocations failing on demand, for the out-of-memory sweeps of
 * unit tests. The test binary is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,
 * --wrap=strdup,--wrap=strndup (CMakeLists.txt): the calls the library makes go through the
 * wrappers below (the test's own calls too). With fail_at N > 0, the Nth allocation counted
 * since n_alloc was last set to 0 returns NULL; fail_at -1 (the start): none fails. n_failed
 * counts the failures made. Header-only (one binary per test_*.c): include it once.
 */
#ifndef GMG_TEST_FAILING_ALLOC_H
#define GMG_TEST_FAILING_ALLOC_H

#include <stddef.h>

static long fail_at = -1; /* the allocation number that fails; -1: none */
static long n_alloc;
static long n_failed;

static int fail_now(void)
{
	if (fail_at < 0)
		return 0;
	if (++n_alloc == fail_at) {
		n_failed++;
		return 1;
	}
	return 0;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

void *__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t a, size_t b)
{
	return fail_now() ? NULL : __real_calloc(a, b);
}

void *__wrap_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return fail_now() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
	return fail_now() ? NULL : __real_strndup(s, n);
}

#endif
