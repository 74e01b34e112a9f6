/*
 * satmath: saturating unsigned 64-bit arithmetic, written once. Byte counts add up from
 * untrusted declarations (a pod may declare 8Ei); a sum that would wrap stays at UINT64_MAX,
 * which every budget refuses, instead of wrapping to a small number that one would admit.
 * Header only, pure, thread-safe.
 */
#ifndef GMG_SATMATH_H
#define GMG_SATMATH_H

#include <stdint.h>

/* a + b, or UINT64_MAX when the sum does not fit. */
static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* a * b, or UINT64_MAX when the product does not fit. */
static inline uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

#endif
