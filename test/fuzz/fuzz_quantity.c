/*
 * Fuzz target: the resource.Quantity parser (lib/core/quantity.h).
 * Properties: the length-taking and the NUL-terminated entry points agree; an error leaves
 * *bytes untouched and writes a NUL-terminated reason, even into a 1-byte or small buffer; a
 * value parsed is read back from its decimal digits; quantity_format never overflows its
 * buffer and always terminates it.
 */
#include <inttypes.h>

#include "fuzz.h"
#include "quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	char err[128], small[8], tiny[1];
	uint64_t v = 0xdeadbeef, w = 0xdeadbeef;
	int rc = quantity_parse(s, size, &v, err, sizeof(err));

	if (rc != 0) {
		if (rc < QUANTITY_ETOOLONG || rc > QUANTITY_EINVAL)
			fuzz_fail("unknown error code %d", rc);
		if (v != 0xdeadbeef)
			fuzz_fail("*bytes written on error %d", rc);
		if (!fuzz_err_ok(err, sizeof(err)))
			fuzz_fail("error %d without a reason", rc);
	}
	/* Short error buffers: same answer, a reason always terminated. */
	memset(small, 'x', sizeof(small));
	tiny[0] = 'x';
	if (quantity_parse(s, size, &w, small, sizeof(small)) != rc ||
	    (rc != 0 && memchr(small, 0, sizeof(small)) == NULL))
		fuzz_fail("answer or termination changed with an 8-byte err");
	if (quantity_parse(s, size, &w, tiny, sizeof(tiny)) != rc || (rc != 0 && tiny[0] != '\0'))
		fuzz_fail("answer or termination changed with a 1-byte err");
	if (quantity_parse(s, size, &w, NULL, 0) != rc)
		fuzz_fail("answer changed without err");

	/* The NUL-terminated form reads up to the first NUL. */
	char *z = fuzz_strdup(data, size);
	size_t zlen = strlen(z);
	uint64_t zv = 0;
	int zrc = quantity_parse_str(z, &zv, NULL, 0);
	int lrc = quantity_parse(z, zlen, &w, NULL, 0);
	if (zrc != lrc || (zrc == 0 && zv != w))
		fuzz_fail("quantity_parse_str (%d) and quantity_parse (%d) disagree", zrc, lrc);
	free(z);

	if (rc == 0) {
		char digits[32], fmt[QUANTITY_FMT_MAX];
		uint64_t back = 0;
		snprintf(digits, sizeof(digits), "%" PRIu64, v);
		if (quantity_parse_str(digits, &back, NULL, 0) != 0 || back != v)
			fuzz_fail("%" PRIu64 " does not read back as itself", v);
		size_t n = quantity_format(v, fmt, sizeof(fmt));
		if (n != strlen(fmt) || n == 0)
			fuzz_fail("quantity_format(%" PRIu64 ") length %zu", v, n);
		char cut[4];
		n = quantity_format(v, cut, sizeof(cut));
		if (n > 3 || cut[n] != '\0')
			fuzz_fail("quantity_format into 4 bytes: %zu", n);
	}
	return 0;
}
