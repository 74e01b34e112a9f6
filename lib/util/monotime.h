/*
 * monotime: the one monotonic clock (CLOCK_MONOTONIC), for durations, ages and deadlines; never
 * wall time. Thread-safe.
 */
#ifndef GMG_MONOTIME_H
#define GMG_MONOTIME_H

#include <stdint.h>

double monotime_s(void);    /* seconds */
uint64_t monotime_ms(void); /* milliseconds */

#endif
