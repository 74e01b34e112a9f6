/*
 * quantity: Kubernetes resource.Quantity parsing and human formatting, in bytes.
 *
 * Grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go):
 *   quantity ::= <signedNumber><suffix>
 *   suffix   ::= "" | binarySI (Ki Mi Gi Ti Pi Ei) | decimalSI (n u m k M G T P E)
 *              | decimalExponent (e|E followed by a signed integer)
 * Case-sensitive: "m" is milli, "Mi" mebi; "K", "mi", "KB", "gb" are invalid. No spaces.
 * The number needs at least one digit ("1.", ".5" are fine; "-", ".", "Gi" are refused). "e"
 * alone is not a suffix; "E" alone is exa. Zero with any sign or suffix ("-0", "0Gi") is 0.
 * An exponent must fit in 64 bits, as apimachinery reads it (strconv.ParseInt): "1e-" followed
 * by 20 nines is refused (QUANTITY_EINVAL), not read as 1 byte.
 * A bare number means bytes. Fractions are rounded UP to whole bytes, as Quantity.Value()
 * does ("0.5" -> 1, "1.5Ki" -> 1536, "100m" -> 1). Parsing is exact (integer arithmetic on
 * the digits, never a double), so "0.1Gi" is 107374183 bytes (107374182.4 rounded up).
 *
 * Pure, thread-safe, no allocation.
 */
#ifndef GMG_QUANTITY_H
#define GMG_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

/* Longest quantity string accepted, in bytes (Kubernetes itself has no cap; ours is
 * generous for any real memory size and bounds the work). */
#define QUANTITY_MAX_LEN 64

#define QUANTITY_EINVAL    (-1) /* not a quantity by the grammar (message says why) */
#define QUANTITY_ENEGATIVE (-2) /* a valid quantity below zero */
#define QUANTITY_ERANGE    (-3) /* more than UINT64_MAX bytes: 16Ei or more */
#define QUANTITY_EEMPTY    (-4) /* empty string */
#define QUANTITY_ETOOLONG  (-5) /* longer than QUANTITY_MAX_LEN */

/*
 * Parse s[0..len) as a quantity of bytes into *bytes.
 * Returns 0, or a QUANTITY_E* code; then err (if not NULL) holds a one-line reason such as
 * `unknown suffix "GB" (use Ki Mi Gi Ti Pi Ei, or k M G T P E; case matters)` (err may be
 * NULL; a short err is truncated, always NUL-terminated). *bytes is untouched on error.
 */
int quantity_parse(const char *s, size_t len, uint64_t *bytes, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* quantity_parse() on a NUL-terminated string. */
int quantity_parse_str(const char *s, uint64_t *bytes, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Format bytes for people, in binary units with at most one decimal, as messages show them:
 * 0 -> "0", 512 -> "512B", 25769803776 -> "24Gi", 107589136384 -> "100.2Gi".
 * The tenth is rounded to nearest and dropped when it is 0, so exact multiples (and values
 * within 0.05 of one) print without a decimal; 1048575 -> "1Mi", never "1024Ki". Display only:
 * "512B" is not a quantity. Always NUL-terminates; returns the length written
 * (truncated to cap-1). QUANTITY_FMT_MAX is always enough.
 */
#define QUANTITY_FMT_MAX 32
size_t quantity_format(uint64_t bytes, char *buf, size_t cap);

/*
 * Ratios (thresholds, shares of a card, a policy's maxShare) are applied at parts per million,
 * so a budget is an exact integer whatever the capacity ("0.9" is 900000 ppm, never
 * 0.900000000000000022 of the bytes). Written once, for every box:
 *   - quantity_ratio_ppm(r): r x 10^6 rounded to the nearest integer, halves away from zero
 *     (llround: 0.0000005 -> 1 ppm, 0.9 -> 900000). r outside (0,1] (only a hand-built struct:
 *     every parser refuses it) is clamped: NaN and r <= 0 give 0, r >= 1 gives QUANTITY_PPM.
 *   - quantity_ppm_of(bytes, ppm): floor(bytes x ppm / 10^6), exact for every bytes (no
 *     128-bit arithmetic), for ppm <= QUANTITY_PPM: a budget never exceeds its share.
 * (A demand's share of a card rounds up instead, so a share never counts less than it says:
 * that is demand.c's rule, for a demand, not a budget.) Pure, thread-safe.
 * QUANTITY_PPM is the one name of 10^6 ppm, a whole, wherever a ratio is held in ppm (a
 * threshold, a policy's maxShare, an engine's or a KAI share of a card, a HAMi percent).
 */
#define QUANTITY_PPM 1000000u
uint32_t quantity_ratio_ppm(double r);
uint64_t quantity_ppm_of(uint64_t bytes, uint64_t ppm);

/* Human-readable name of a QUANTITY_E* code. */
const char *quantity_strerror(int code);

#endif
