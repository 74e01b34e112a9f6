/*
 * serverclock: the API server's wall clock as this process can bound it (ARCHITECTURE.md, "kube
 * client"), so that replicas whose own clocks disagree still agree on when a shared reservation
 * expires (shared.h, record.h).
 *
 * Every answer of the API server carries a Date header (RFC 9110 section 6.6.1: the time the
 * answer was generated, in whole seconds). An answer whose request left at monotonic time s and
 * whose headers arrived at r, dated D, says the server's clock read a time in [D, D + 1 s) at
 * some instant of [s, r], so server time minus this process's CLOCK_MONOTONIC lies in
 * [D - r, D + 1 s - s]. Each observation narrows the kept interval; between observations it
 * widens by SERVERCLOCK_DRIFT_PPM of the time elapsed (the two oscillators drift), and an
 * observation that does not meet it (the server's clock was stepped) replaces it.
 *
 * From the interval: serverclock_now_ms(..., SERVERCLOCK_LATEST) is a time the server's clock
 * has not passed yet (stamp an expiry from it: it never ends early), SERVERCLOCK_EARLIEST one it
 * has passed (judge an expiry by it: never dropped before it ends on the server's clock). The two
 * differ by about 1 s plus the request's round trip. The local wall clock (CLOCK_REALTIME) is
 * never read: a replica whose clock is off by minutes computes the same times as its peers.
 *
 * Units: ms (Unix time for server times, CLOCK_MONOTONIC for local instants). Thread-safe.
 */
#ifndef GMG_SERVERCLOCK_H
#define GMG_SERVERCLOCK_H

#include <stdint.h>

#define SERVERCLOCK_DRIFT_PPM 500 /* widening per elapsed time: 10 x a crystal's 50 ppm */

enum serverclock_bound { SERVERCLOCK_EARLIEST = 0, SERVERCLOCK_LATEST = 1 };

struct serverclock;

/* NULL when out of memory. */
struct serverclock *serverclock_new(void);
void serverclock_free(struct serverclock *sc);

/* One answer: its Date header as Unix seconds (date_s > 0), the monotonic ms at which its
 * request was sent and its headers arrived (sent_ms <= recv_ms, recv_ms within about 29,000
 * years of uptime). Others are ignored. */
void serverclock_observe(struct serverclock *sc, int64_t date_s, uint64_t sent_ms,
                         uint64_t recv_ms);

/* The server's time now (Unix ms) as the bound asked, from the monotonic ms now_mono_ms. 0 and
 * *out set, or -1 before any observation or for a now_mono_ms past the observations' range
 * (*out untouched). */
int serverclock_now_ms(struct serverclock *sc, enum serverclock_bound bound, uint64_t now_mono_ms,
                       uint64_t *out);

/* The kept interval's width in ms (how far apart the two bounds are now), -1 before any
 * observation: for the log and tests. */
int64_t serverclock_width_ms(struct serverclock *sc, uint64_t now_mono_ms);

#endif
