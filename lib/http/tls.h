/*
 * tls: the serving certificate as a sequence of generations, reloaded without restart.
 *
 * A generation is one certificate chain + private key pair read from --tls-cert-file and
 * --tls-key-file, imported for GnuTLS (gnutls_pcert_list_import_x509_raw,
 * gnutls_privkey_import_x509_raw) and checked: the chain parses, the key parses, the key
 * belongs to the leaf certificate (same public key id), and the leaf has not expired.
 * The current generation is published through one atomic pointer; tls_cert_callback() (for
 * MHD_OPTION_HTTPS_CERT_CALLBACK) only loads it.
 *
 * Reload: a poller thread re-reads both files BY PATH every interval and compares their bytes
 * with the current generation's. This follows a Secret volume's ..data symlink swap (the
 * paths resolve to the new files) and in-place rewrites alike, without inotify watches that
 * would have to be re-added after each rename. A changed pair that does not load or match is
 * refused: logged once, counted as a failure, and the old generation keeps serving. Retired
 * generations stay allocated until tls_store_free(), because GnuTLS keeps using what the
 * callback returned for the life of each session (reference/c-libraries.md).
 *
 * Metrics: every successful load sets gpu_memory_guard_certificate_expiry_timestamp_seconds
 * and counts a success; every refusal counts a failure (the first load counts too).
 *
 * Thread-safety: tls_cert_callback() is lock-free and may run on any thread; tls_store_reload()
 * may race with the poller (reloads are serialized by a mutex). tls_store_new/free/start/stop
 * and tls_store_activate() are for the main thread.
 */
#ifndef GMG_TLS_H
#define GMG_TLS_H

#include <stddef.h>
#include <stdint.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

struct metrics;

#define TLS_FILE_MAX  (1024u * 1024u) /* bytes of a PEM file we read */
#define TLS_MAX_CHAIN 8               /* certificates in the chain file */
#define TLS_ERR_MAX   256

#define TLS_EIO       (-1) /* a file could not be read (err says which and why) */
#define TLS_ETOOBIG   (-2) /* a file over TLS_FILE_MAX */
#define TLS_ECERT     (-3) /* the chain does not parse, or is empty */
#define TLS_EKEY      (-4) /* the key does not parse */
#define TLS_EMISMATCH (-5) /* the key does not belong to the leaf certificate */
#define TLS_EEXPIRED  (-6) /* the leaf's NotAfter has passed */
#define TLS_ENOMEM    (-7)
#define TLS_ETHREAD   (-8)

#define TLS_UNCHANGED 0 /* tls_store_reload(): files are the current generation's */
#define TLS_RELOADED  1 /* tls_store_reload(): a new generation is serving */

struct tls_store; /* opaque */

/*
 * Load the first generation from the two files (paths copied). m (borrowed, may be NULL)
 * receives the metrics. NULL on failure with the reason in err (e.g. `--tls-key-file
 * /etc/tls/tls.key: the key does not belong to the certificate`).
 */
struct tls_store *tls_store_new(const char *cert_file, const char *key_file, struct metrics *m,
                                char *err, size_t errlen);

/* Stop the poller, free every generation. Call after the HTTPS daemon is stopped. NULL ok. */
void tls_store_free(struct tls_store *s);

/*
 * Re-read the files now. Returns TLS_RELOADED, TLS_UNCHANGED, or a negative TLS_E* code when
 * the new pair is refused (the old one keeps serving; err says why). A pair already refused
 * is not re-examined (same code, not counted or logged again) until the files change.
 */
int tls_store_reload(struct tls_store *s, char *err, size_t errlen);

/*
 * Run fn(ctx) on the poller's thread after each poll of the certificate files (the client CA
 * is re-read there: clientauth_reload). Set before tls_store_start; fn must not block long.
 */
void tls_store_on_poll(struct tls_store *s, void (*fn)(void *ctx), void *ctx);

/*
 * on: every handshake served from s asks the client for a certificate (GNUTLS_CERT_REQUEST,
 * naming no CA); the handshake never fails for want of one, and nothing here verifies it
 * (clientauth.h does, per route). Thread-safe; applies to handshakes that start later.
 */
void tls_store_request_client_cert(struct tls_store *s, int on);

/* Start the poller thread (interval_ms > 0). 0 or TLS_ETHREAD. */
int tls_store_start(struct tls_store *s, uint64_t interval_ms) __attribute__((warn_unused_result));
/* Stop and join the poller; no-op if not started. */
void tls_store_stop(struct tls_store *s);

/* NotAfter of the current leaf certificate, Unix seconds. */
int64_t tls_store_not_after(struct tls_store *s);

/*
 * When not_after (Unix seconds) is within warn_s seconds of now (or past), write a one-line
 * warning such as "the serving certificate expires in 12 days (2026-12-11T00:00:00Z): renew
 * it" into buf and return 1; else return 0 and leave buf empty. warn_s 0 never warns. Pure.
 */
int tls_expiry_warning(int64_t not_after, int64_t now, uint64_t warn_s, char *buf, size_t cap);

/* How many generations were loaded (1 after tls_store_new). */
unsigned tls_store_generations(struct tls_store *s);

/*
 * Make tls_cert_callback() serve s (NULL: serve nothing, handshakes fail). GnuTLS's retrieve
 * callback carries no user pointer, so the store it serves is process-wide.
 */
void tls_store_activate(struct tls_store *s);

/* gnutls_certificate_retrieve_function2 for MHD_OPTION_HTTPS_CERT_CALLBACK. */
int tls_cert_callback(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                      const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                      gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *pkey);

#endif
