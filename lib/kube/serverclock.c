/* serverclock: bounds on the API server's clock from its Date headers (serverclock.h). */
#include "serverclock.h"

#include <pthread.h>
#include <stdlib.h>

/* The largest monotonic ms taken (about 29,000 years of uptime): (date ms - it) x 1000, the
 * widening and now + a bound stay far inside int64_t. */
#define MONO_MAX_MS ((uint64_t)INT64_MAX / 10000)

struct serverclock {
	pthread_mutex_t mu;
	int known;
	int64_t lo, hi; /* server Unix time minus local monotonic time, at at_ms, microseconds */
	uint64_t at_ms; /* monotonic ms of the last observation */
};

struct serverclock *serverclock_new(void)
{
	struct serverclock *sc = calloc(1, sizeof(*sc));
	if (sc == NULL)
		return NULL;
	pthread_mutex_init(&sc->mu, NULL);
	return sc;
}

void serverclock_free(struct serverclock *sc)
{
	if (sc == NULL)
		return;
	pthread_mutex_destroy(&sc->mu);
	free(sc);
}

/* How much each bound has moved out since at_ms (SERVERCLOCK_DRIFT_PPM of the time
 * elapsed), microseconds, rounded up; under sc->mu. */
static int64_t widened_us(const struct serverclock *sc, uint64_t now_ms)
{
	uint64_t age = now_ms > sc->at_ms ? now_ms - sc->at_ms : 0;
	if (age > (uint64_t)INT64_MAX / 1000 / SERVERCLOCK_DRIFT_PPM)
		age = (uint64_t)INT64_MAX / 1000 / SERVERCLOCK_DRIFT_PPM;
	return (int64_t)((age * SERVERCLOCK_DRIFT_PPM + 999) / 1000);
}

/* x / 1000 rounded down (up: up 1), for x of either sign. */
static int64_t us_to_ms(int64_t x, int up)
{
	int64_t q = x / 1000, r = x % 1000;
	if (r != 0 && (r < 0) != up)
		q += up ? 1 : -1;
	return q;
}

void serverclock_observe(struct serverclock *sc, int64_t date_s, uint64_t sent_ms, uint64_t recv_ms)
{
	/* Dates before 2001 or past year 2286 are no clock's, and monotonic times past
	 * MONO_MAX_MS no uptime's (both keep the sums in microseconds in range). */
	if (sc == NULL || date_s < 1000000000 || date_s > 9999999999 || sent_ms > recv_ms ||
	    recv_ms > MONO_MAX_MS)
		return;
	int64_t lo = (date_s * 1000 - (int64_t)recv_ms) * 1000;
	int64_t hi = (date_s * 1000 + 1000 - (int64_t)sent_ms) * 1000;

	pthread_mutex_lock(&sc->mu);
	if (sc->known) {
		int64_t w = widened_us(sc, recv_ms);
		int64_t klo = sc->lo - w, khi = sc->hi + w;
		if (lo <= khi && hi >= klo) { /* they meet: keep what both allow */
			lo = lo > klo ? lo : klo;
			hi = hi < khi ? hi : khi;
		} /* else the server's clock was stepped: the new answer alone */
	}
	sc->lo = lo;
	sc->hi = hi;
	sc->at_ms = recv_ms;
	sc->known = 1;
	pthread_mutex_unlock(&sc->mu);
}

int serverclock_now_ms(struct serverclock *sc, enum serverclock_bound bound, uint64_t now_mono_ms,
                       uint64_t *out)
{
	if (sc == NULL || now_mono_ms > MONO_MAX_MS)
		return -1;
	pthread_mutex_lock(&sc->mu);
	if (!sc->known) {
		pthread_mutex_unlock(&sc->mu);
		return -1;
	}
	int64_t w = widened_us(sc, now_mono_ms);
	int64_t t = (int64_t)now_mono_ms + (bound == SERVERCLOCK_LATEST ? us_to_ms(sc->hi + w, 1)
	                                                                : us_to_ms(sc->lo - w, 0));
	pthread_mutex_unlock(&sc->mu);
	*out = t > 0 ? (uint64_t)t : 0;
	return 0;
}

int64_t serverclock_width_ms(struct serverclock *sc, uint64_t now_mono_ms)
{
	if (sc == NULL)
		return -1;
	pthread_mutex_lock(&sc->mu);
	int64_t w = sc->known ? us_to_ms(sc->hi - sc->lo + 2 * widened_us(sc, now_mono_ms), 1) : -1;
	pthread_mutex_unlock(&sc->mu);
	return w;
}
