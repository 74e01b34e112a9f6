/*
 * tls: certificate generations and their hot reload. See tls.h.
 */
#include "tls.h"

#include "capfile.h"
#include "log.h"
#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct generation {
	gnutls_pcert_st pcerts[TLS_MAX_CHAIN];
	unsigned n_pcerts;
	gnutls_privkey_t key;
	char *cert_pem, *key_pem; /* the bytes it was made from, to detect changes */
	size_t cert_len, key_len;
	int64_t not_after;
	struct generation *older; /* retired generations, newest first */
};

struct tls_store {
	char *cert_file, *key_file;
	struct metrics *metrics;
	_Atomic(struct generation *) current;
	unsigned generations;
	pthread_mutex_t reload_lock;
	/* Last refused pair, so that a bad pair is logged and counted once. */
	char *refused_cert, *refused_key;
	size_t refused_cert_len, refused_key_len;
	int refused_code;
	int read_failing; /* the last poll could not read the files */
	/* Poller. */
	pthread_t thread;
	int running;
	int stop;
	uint64_t interval_ms;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void (*on_poll)(void *ctx); /* tls_store_on_poll */
	void *on_poll_ctx;
	atomic_int request_client_cert; /* tls_store_request_client_cert */
};

static _Atomic(struct tls_store *) active_store;

static void generation_free(struct generation *g)
{
	if (g == NULL)
		return;
	for (unsigned i = 0; i < g->n_pcerts; i++)
		gnutls_pcert_deinit(&g->pcerts[i]);
	if (g->key != NULL)
		gnutls_privkey_deinit(g->key);
	free(g->cert_pem);
	free(g->key_pem);
	free(g);
}

/* Read a whole file (at most TLS_FILE_MAX bytes) into a new buffer; err names the flag. */
static int read_file(const char *flag, const char *path, char **out, size_t *len, char *err,
                     size_t errlen)
{
	char why[TLS_ERR_MAX];
	int rc = capfile_read(path, TLS_FILE_MAX, 0, out, len, why, sizeof(why));

	if (rc == 0)
		return 0;
	snprintf(err, errlen, "%s %s", flag, why);
	return rc == CAPFILE_ETOOBIG ? TLS_ETOOBIG : rc == CAPFILE_ENOMEM ? TLS_ENOMEM : TLS_EIO;
}

/* The SHA-256 key id of a public key, for comparing the leaf's key with the private key. */
static int key_id(gnutls_pubkey_t pub, unsigned char *id, size_t *len)
{
	return gnutls_pubkey_get_key_id(pub, GNUTLS_KEYID_USE_SHA256, id, len);
}

static int key_matches_leaf(struct generation *g)
{
	unsigned char a[64], b[64];
	size_t alen = sizeof(a), blen = sizeof(b);
	gnutls_pubkey_t pub = NULL;
	int ok = 0;
	if (gnutls_pubkey_init(&pub) < 0)
		return 0;
	if (gnutls_pubkey_import_privkey(pub, g->key, 0, 0) < 0)
		goto out;
	if (key_id(pub, a, &alen) < 0 || key_id(g->pcerts[0].pubkey, b, &blen) < 0)
		goto out;
	ok = alen == blen && memcmp(a, b, alen) == 0;
out:
	gnutls_pubkey_deinit(pub);
	return ok;
}

static int64_t leaf_not_after(struct generation *g)
{
	gnutls_x509_crt_t crt;
	int64_t t = 0;
	if (gnutls_x509_crt_init(&crt) < 0)
		return 0;
	if (gnutls_x509_crt_import(crt, &g->pcerts[0].cert, GNUTLS_X509_FMT_DER) >= 0)
		t = (int64_t)gnutls_x509_crt_get_expiration_time(crt);
	gnutls_x509_crt_deinit(crt);
	return t;
}

/*
 * Build a generation from PEM bytes (ownership of cert/key moves into it on success). Every
 * check that GnuTLS would otherwise only fail at handshake time is made here, so a bad pair
 * is refused before it can serve.
 */
static int generation_new(struct tls_store *s, char *cert, size_t cert_len, char *key,
                          size_t key_len, struct generation **out, char *err, size_t errlen)
{
	int rc, grc;
	struct generation *g = calloc(1, sizeof(*g));
	gnutls_datum_t cd = {(unsigned char *)cert, (unsigned)cert_len};
	gnutls_datum_t kd = {(unsigned char *)key, (unsigned)key_len};
	if (g == NULL)
		return TLS_ENOMEM;
	g->n_pcerts = TLS_MAX_CHAIN;
	grc =
	    gnutls_pcert_list_import_x509_raw(g->pcerts, &g->n_pcerts, &cd, GNUTLS_X509_FMT_PEM, 0);
	if (grc < 0 || g->n_pcerts == 0) {
		g->n_pcerts = 0;
		snprintf(err, errlen, "--tls-cert-file %s: no usable PEM certificate chain: %s",
		         s->cert_file, grc < 0 ? gnutls_strerror(grc) : "empty");
		rc = TLS_ECERT;
		goto out;
	}
	if ((grc = gnutls_privkey_init(&g->key)) < 0 ||
	    (grc = gnutls_privkey_import_x509_raw(g->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
		snprintf(err, errlen, "--tls-key-file %s: not a usable PEM private key: %s",
		         s->key_file, gnutls_strerror(grc));
		rc = TLS_EKEY;
		goto out;
	}
	if (!key_matches_leaf(g)) {
		snprintf(err, errlen,
		         "--tls-key-file %s: the key does not belong to the certificate in %s",
		         s->key_file, s->cert_file);
		rc = TLS_EMISMATCH;
		goto out;
	}
	g->not_after = leaf_not_after(g);
	if (g->not_after <= (int64_t)time(NULL)) {
		snprintf(err, errlen, "--tls-cert-file %s: the certificate expired (NotAfter %lld)",
		         s->cert_file, (long long)g->not_after);
		rc = TLS_EEXPIRED;
		goto out;
	}
	g->cert_pem = cert;
	g->cert_len = cert_len;
	g->key_pem = key;
	g->key_len = key_len;
	*out = g;
	g = NULL;
	rc = 0;
out:
	generation_free(g);
	return rc;
}

static int same_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
	return a != NULL && b != NULL && alen == blen && memcmp(a, b, alen) == 0;
}

static void remember_refused(struct tls_store *s, char *cert, size_t cert_len, char *key,
                             size_t key_len, int code)
{
	free(s->refused_cert);
	free(s->refused_key);
	s->refused_cert = cert;
	s->refused_cert_len = cert_len;
	s->refused_key = key;
	s->refused_key_len = key_len;
	s->refused_code = code;
}

/* Install g as current; the old one is kept on g's list until tls_store_free(). */
static void publish(struct tls_store *s, struct generation *g)
{
	g->older = atomic_load_explicit(&s->current, memory_order_relaxed);
	atomic_store_explicit(&s->current, g, memory_order_release);
	s->generations++;
	metrics_set_cert_expiry(s->metrics, g->not_after);
	metrics_cert_reload(s->metrics, METRICS_RELOAD_SUCCESS);
}

/* Reload with reload_lock held. */
static int reload_locked(struct tls_store *s, char *err, size_t errlen)
{
	char *cert = NULL, *key = NULL;
	size_t cert_len = 0, key_len = 0;
	struct generation *cur = atomic_load_explicit(&s->current, memory_order_relaxed);
	struct generation *g = NULL;
	int rc = read_file("--tls-cert-file", s->cert_file, &cert, &cert_len, err, errlen);
	if (rc == 0)
		rc = read_file("--tls-key-file", s->key_file, &key, &key_len, err, errlen);
	if (rc != 0) {
		/* A file missing for one poll is a transient of some writers: report it once. */
		if (!s->read_failing) {
			log_fields(LOG_WARN, "certificate reload failed, keeping the current one",
			           (struct log_field[]){LOG_STR("error", err), LOG_END});
			metrics_cert_reload(s->metrics, METRICS_RELOAD_FAILURE);
		}
		s->read_failing = 1;
		goto out;
	}
	s->read_failing = 0;
	if (same_bytes(cert, cert_len, cur->cert_pem, cur->cert_len) &&
	    same_bytes(key, key_len, cur->key_pem, cur->key_len)) {
		rc = TLS_UNCHANGED;
		goto out;
	}
	if (same_bytes(cert, cert_len, s->refused_cert, s->refused_cert_len) &&
	    same_bytes(key, key_len, s->refused_key, s->refused_key_len)) {
		snprintf(err, errlen, "the certificate files hold a pair already refused");
		rc = s->refused_code;
		goto out;
	}
	rc = generation_new(s, cert, cert_len, key, key_len, &g, err, errlen);
	if (rc != 0) {
		log_fields(LOG_WARN, "new certificate refused, keeping the current one",
		           (struct log_field[]){LOG_STR("error", err), LOG_END});
		metrics_cert_reload(s->metrics, METRICS_RELOAD_FAILURE);
		remember_refused(s, cert, cert_len, key, key_len, rc);
		cert = key = NULL;
		goto out;
	}
	cert = key = NULL; /* owned by g */
	publish(s, g);
	log_fields(LOG_INFO, "serving a new certificate",
	           (struct log_field[]){LOG_STR("cert_file", s->cert_file),
	                                LOG_INT("not_after", g->not_after),
	                                LOG_INT("generation", s->generations), LOG_END});
	rc = TLS_RELOADED;
out:
	free(cert);
	free(key);
	return rc;
}

int tls_store_reload(struct tls_store *s, char *err, size_t errlen)
{
	pthread_mutex_lock(&s->reload_lock);
	int rc = reload_locked(s, err, errlen);
	pthread_mutex_unlock(&s->reload_lock);
	return rc;
}

struct tls_store *tls_store_new(const char *cert_file, const char *key_file, struct metrics *m,
                                char *err, size_t errlen)
{
	struct tls_store *s = calloc(1, sizeof(*s));
	char *cert = NULL, *key = NULL;
	size_t cert_len = 0, key_len = 0;
	struct generation *g = NULL;
	pthread_condattr_t ca;

	if (s == NULL)
		goto err;
	s->cert_file = strdup(cert_file);
	s->key_file = strdup(key_file);
	s->metrics = m;
	pthread_mutex_init(&s->reload_lock, NULL);
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (s->cert_file == NULL || s->key_file == NULL)
		goto err;
	if (read_file("--tls-cert-file", cert_file, &cert, &cert_len, err, errlen) != 0 ||
	    read_file("--tls-key-file", key_file, &key, &key_len, err, errlen) != 0)
		goto err;
	if (generation_new(s, cert, cert_len, key, key_len, &g, err, errlen) != 0) {
		metrics_cert_reload(m, METRICS_RELOAD_FAILURE);
		goto err;
	}
	publish(s, g);
	log_fields(LOG_INFO, "serving certificate loaded",
	           (struct log_field[]){LOG_STR("cert_file", cert_file),
	                                LOG_INT("not_after", g->not_after), LOG_END});
	return s;
err:
	free(cert);
	free(key);
	tls_store_free(s);
	return NULL;
}

static void *poller(void *arg)
{
	struct tls_store *s = arg;
	char err[TLS_ERR_MAX];
	struct timespec deadline;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += (time_t)(s->interval_ms / 1000);
		deadline.tv_nsec += (long)(s->interval_ms % 1000) * 1000000L;
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
		while (!s->stop && pthread_cond_timedwait(&s->cond, &s->lock, &deadline) == 0)
			;
		if (s->stop)
			break;
		pthread_mutex_unlock(&s->lock);
		(void)tls_store_reload(s, err, sizeof(err)); /* logs and counts by itself */
		if (s->on_poll != NULL)
			s->on_poll(s->on_poll_ctx);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

void tls_store_on_poll(struct tls_store *s, void (*fn)(void *ctx), void *ctx)
{
	s->on_poll = fn;
	s->on_poll_ctx = ctx;
}

void tls_store_request_client_cert(struct tls_store *s, int on)
{
	atomic_store_explicit(&s->request_client_cert, on != 0, memory_order_release);
}

int tls_store_start(struct tls_store *s, uint64_t interval_ms)
{
	if (s->running || interval_ms == 0)
		return s->running ? 0 : TLS_ETHREAD;
	s->interval_ms = interval_ms;
	s->stop = 0;
	if (pthread_create(&s->thread, NULL, poller, s) != 0)
		return TLS_ETHREAD;
	s->running = 1;
	return 0;
}

void tls_store_stop(struct tls_store *s)
{
	if (s == NULL || !s->running)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	s->running = 0;
}

void tls_store_free(struct tls_store *s)
{
	if (s == NULL)
		return;
	tls_store_stop(s);
	struct tls_store *expected = s;
	atomic_compare_exchange_strong(&active_store, &expected, NULL);
	struct generation *g = atomic_load(&s->current);
	while (g != NULL) {
		struct generation *older = g->older;
		generation_free(g);
		g = older;
	}
	free(s->refused_cert);
	free(s->refused_key);
	free(s->cert_file);
	free(s->key_file);
	pthread_mutex_destroy(&s->reload_lock);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

int tls_expiry_warning(int64_t not_after, int64_t now, uint64_t warn_s, char *buf, size_t cap)
{
	char when[32] = "?";
	struct tm tm;
	time_t t = (time_t)not_after;

	if (cap > 0)
		buf[0] = '\0';
	if (warn_s == 0 || not_after <= 0 ||
	    (not_after > now && (uint64_t)(not_after - now) > warn_s))
		return 0;
	if (gmtime_r(&t, &tm) != NULL)
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (not_after <= now)
		snprintf(buf, cap, "the serving certificate expired at %s: renew it", when);
	else
		snprintf(buf, cap, "the serving certificate expires in %lld days (%s): renew it",
		         (long long)((not_after - now) / 86400), when);
	return 1;
}

int64_t tls_store_not_after(struct tls_store *s)
{
	struct generation *g = atomic_load_explicit(&s->current, memory_order_acquire);
	return g ? g->not_after : 0;
}

unsigned tls_store_generations(struct tls_store *s)
{
	pthread_mutex_lock(&s->reload_lock);
	unsigned n = s->generations;
	pthread_mutex_unlock(&s->reload_lock);
	return n;
}

void tls_store_activate(struct tls_store *s)
{
	atomic_store_explicit(&active_store, s, memory_order_release);
}

/* Lock-free: one acquire load of the store, one of its current generation. */
int tls_cert_callback(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                      const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                      gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
	struct tls_store *s = atomic_load_explicit(&active_store, memory_order_acquire);
	struct generation *g = s ? atomic_load_explicit(&s->current, memory_order_acquire) : NULL;
	if (g == NULL)
		return -1;
	/* Ask for a client certificate, never require one: clientauth.h checks it per route.
	 * Set here because libmicrohttpd gives no other hook on a new session; GnuTLS reads it
	 * when it writes the CertificateRequest, after this callback picked the certificate. */
	if (atomic_load_explicit(&s->request_client_cert, memory_order_acquire))
		gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUEST);
	*pcert = g->pcerts;
	*pcert_length = g->n_pcerts;
	*pkey = g->key;
	return 0;
}
