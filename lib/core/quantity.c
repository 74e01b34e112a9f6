/*
 * quantity: resource.Quantity in bytes, exact.
 *
 * The mantissa is kept as a decimal digit string (a tiny bignum) times a power of ten, so no
 * quantity a user can write (at most QUANTITY_MAX_LEN characters) loses precision: binary
 * suffixes double the digit string, decimal ones move the exponent, and the final rounding up
 * to whole bytes reads the digits. No double is involved anywhere.
 */
#include "quantity.h"

#include "errbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Mantissa digits after the largest binary suffix: 63 written digits grow by at most 19 when
 * multiplied by 2^60. */
#define DIGITS_CAP 96
/* An exponent beyond this is out of range either way (digits are at most DIGITS_CAP). */
#define EXP_CLAMP 100000

struct bignum {
	unsigned char d[DIGITS_CAP]; /* most significant first, no leading zeros */
	size_t len;
	long exp10; /* value = d * 10^exp10 */
};

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Multiply the digit string by 2, in place. */
static void double_digits(struct bignum *b)
{
	unsigned carry = 0;

	for (size_t i = b->len; i-- > 0;) {
		unsigned v = b->d[i] * 2u + carry;
		b->d[i] = (unsigned char)(v % 10);
		carry = v / 10;
	}
	if (carry) {
		memmove(b->d + 1, b->d, b->len);
		b->d[0] = (unsigned char)carry;
		b->len++;
	}
}

/*
 * Read [+-]digits[.digits] from s[*pos..len). Leading zeros are dropped, fraction digits move
 * exp10. Returns 0, or -1 when there is no digit at all (" 1Gi", "Gi", "-", ".").
 */
static int parse_mantissa(const char *s, size_t len, size_t *pos, int *negative, struct bignum *b)
{
	size_t i = *pos;
	int seen_digit = 0;

	*negative = 0;
	if (i < len && (s[i] == '+' || s[i] == '-')) {
		*negative = s[i] == '-';
		i++;
	}
	for (int frac = 0; i < len; i++) {
		if (s[i] == '.' && !frac) {
			frac = 1;
			continue;
		}
		if (!is_digit(s[i]))
			break;
		seen_digit = 1;
		if (frac)
			b->exp10--;
		if (b->len == 0 && s[i] == '0')
			continue;
		b->d[b->len++] =
		    (unsigned char)(s[i] - '0'); /* len < QUANTITY_MAX_LEN < DIGITS_CAP */
	}
	*pos = i;
	return seen_digit ? 0 : -1;
}

/*
 * Parse a signed decimal exponent ("3", "+3", "-12"), saturating at +-EXP_CLAMP. Returns 0,
 * -1 when it is not a signed integer, -2 when it does not fit in 64 bits: apimachinery reads
 * the exponent with strconv.ParseInt(s, 10, 64) and refuses the quantity when that fails.
 */
static int parse_exponent(const char *s, size_t len, long *out)
{
	size_t i = 0;
	int neg = 0;
	uint64_t v = 0, limit;

	if (i < len && (s[i] == '+' || s[i] == '-')) {
		neg = s[i] == '-';
		i++;
	}
	if (i == len)
		return -1;
	limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; i < len; i++) {
		unsigned digit;

		if (!is_digit(s[i]))
			return -1;
		digit = (unsigned)(s[i] - '0');
		if (v > (limit - digit) / 10)
			return -2; /* keep reading would not change that: refused as a whole */
		v = v * 10 + digit;
	}
	if (v > EXP_CLAMP)
		v = EXP_CLAMP;
	*out = neg ? -(long)v : (long)v;
	return 0;
}

/* Apply the suffix s[0..len) to b. Returns 0, -1 (unknown suffix) or -2 (an exponent that does
 * not fit in 64 bits). */
static int apply_suffix(const char *s, size_t len, struct bignum *b)
{
	int rc;

	static const char *const binary[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
	static const char decimal[] = "num kMGTPE"; /* index i -> 10^(3*(i-3)) */
	long e;

	if (len == 0)
		return 0;
	if (len == 1) {
		const char *p = strchr(decimal, s[0]);

		/* strchr() would also find the terminating NUL */
		if (s[0] == '\0' || s[0] == ' ' || p == NULL)
			return -1;
		b->exp10 += 3 * ((long)(p - decimal) - 3);
		return 0;
	}
	if (len == 2) {
		for (size_t i = 0; i < sizeof(binary) / sizeof(binary[0]); i++) {
			if (memcmp(s, binary[i], 2) != 0)
				continue;
			/* Doubling a zero mantissa is pointless and keeps len at 0. */
			for (size_t k = 0; b->len > 0 && k < 10 * (i + 1); k++)
				double_digits(b);
			return 0;
		}
	}
	if (s[0] == 'e' || s[0] == 'E') {
		rc = parse_exponent(s + 1, len - 1, &e);
		if (rc == 0)
			b->exp10 += e;
		return rc;
	}
	return -1;
}

/*
 * Round b up to whole units into *out. Returns 0 or QUANTITY_ERANGE. b->len > 0.
 */
static int round_up(const struct bignum *b, uint64_t *out)
{
	long int_digits = (long)b->len + b->exp10; /* digits left of the decimal point */
	uint64_t v = 0;
	int frac_nonzero = 0;

	if (int_digits > 20) /* UINT64_MAX has 20 digits */
		return QUANTITY_ERANGE;
	for (long i = 0; i < int_digits; i++) {
		unsigned digit = i < (long)b->len ? b->d[i] : 0;

		if (v > (UINT64_MAX - digit) / 10)
			return QUANTITY_ERANGE;
		v = v * 10 + digit;
	}
	for (long i = int_digits < 0 ? 0 : int_digits; i < (long)b->len; i++)
		frac_nonzero |= b->d[i] != 0;
	if (frac_nonzero) {
		if (v == UINT64_MAX)
			return QUANTITY_ERANGE;
		v++;
	}
	*out = v;
	return 0;
}

int quantity_parse(const char *s, size_t len, uint64_t *bytes, char *err, size_t errlen)
{
	struct bignum b = {.len = 0, .exp10 = 0};
	size_t pos = 0;
	int negative = 0;
	uint64_t v = 0;
	int rc;

	if (s == NULL || len == 0) {
		errbuf_set(err, errlen, "empty quantity");
		return QUANTITY_EEMPTY;
	}
	if (len > QUANTITY_MAX_LEN) {
		errbuf_set(err, errlen, "quantity longer than %d characters", QUANTITY_MAX_LEN);
		return QUANTITY_ETOOLONG;
	}
	if (parse_mantissa(s, len, &pos, &negative, &b) != 0) {
		errbuf_set(err, errlen, "\"%.*s\" does not start with a number", (int)len, s);
		return QUANTITY_EINVAL;
	}
	rc = apply_suffix(s + pos, len - pos, &b);
	if (rc == -2) {
		errbuf_set(err, errlen, "exponent \"%.*s\" does not fit in 64 bits",
		           (int)(len - pos), s + pos);
		return QUANTITY_EINVAL;
	}
	if (rc != 0) {
		errbuf_set(err, errlen,
		           "unknown suffix \"%.*s\" (use Ki Mi Gi Ti Pi Ei, or k M G T P E; "
		           "case matters)",
		           (int)(len - pos), s + pos);
		return QUANTITY_EINVAL;
	}
	if (b.len == 0) /* zero, whatever its sign or suffix */
		goto out;
	if (negative) {
		errbuf_set(err, errlen, "\"%.*s\" is negative", (int)len, s);
		return QUANTITY_ENEGATIVE;
	}
	rc = round_up(&b, &v);
	if (rc != 0) {
		/* UINT64_MAX bytes is 16Ei - 1: anything out of range is 16Ei or more. */
		errbuf_set(err, errlen, "\"%.*s\" is 16Ei or more", (int)len, s);
		return rc;
	}
out:
	*bytes = v;
	return 0;
}

int quantity_parse_str(const char *s, uint64_t *bytes, char *err, size_t errlen)
{
	/* strnlen bounds the scan: a long string is refused without reading all of it. */
	return quantity_parse(s, s ? strnlen(s, QUANTITY_MAX_LEN + 1) : 0, bytes, err, errlen);
}

size_t quantity_format(uint64_t bytes, char *buf, size_t cap)
{
	static const char *const units[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
	int n;

	if (buf == NULL || cap == 0)
		return 0;
	if (bytes == 0) {
		n = snprintf(buf, cap, "0");
	} else if (bytes < 1024) {
		n = snprintf(buf, cap, "%uB", (unsigned)bytes);
	} else {
		/* Pick the largest unit whose rounded value stays below 1024 ("1023.96Ki" is
		 * "1Mi", not "1024Ki"); tenths are rounded to nearest. */
		size_t u = 0;
		uint64_t whole = 0, tenths = 0;

		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			uint64_t unit = 1ull << (10 * (i + 1));

			whole = bytes / unit;
			/* remainder < 2^60, so remainder*10 fits in 64 bits */
			tenths = ((bytes % unit) * 10 + unit / 2) / unit;
			if (tenths == 10) {
				whole++;
				tenths = 0;
			}
			u = i;
			if (whole < 1024)
				break;
		}
		if (tenths == 0)
			n = snprintf(buf, cap, "%llu%s", (unsigned long long)whole, units[u]);
		else
			n = snprintf(buf, cap, "%llu.%u%s", (unsigned long long)whole,
			             (unsigned)tenths, units[u]);
	}
	if (n < 0) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n < cap ? (size_t)n : cap - 1;
}

const char *quantity_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
	case QUANTITY_EINVAL:
		return "not a quantity";
	case QUANTITY_ENEGATIVE:
		return "negative quantity";
	case QUANTITY_ERANGE:
		return "quantity out of range";
	case QUANTITY_EEMPTY:
		return "empty quantity";
	case QUANTITY_ETOOLONG:
		return "quantity too long";
	default:
		return "unknown quantity error";
	}
}

uint32_t quantity_ratio_ppm(double r)
{
	if (!(r > 0.0))
		return 0;
	if (r >= 1.0)
		return QUANTITY_PPM;
	return (uint32_t)llround(r * (double)QUANTITY_PPM);
}

uint64_t quantity_ppm_of(uint64_t bytes, uint64_t ppm)
{
	return (bytes / QUANTITY_PPM) * ppm + (bytes % QUANTITY_PPM) * ppm / QUANTITY_PPM;
}
