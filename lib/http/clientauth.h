/*
 * clientauth: who may call the TLS listener's routes (ARCHITECTURE.md, "server": client
 * authentication). --client-ca-file names the CAs whose client certificates are accepted,
 * --client-allowed-names optionally the names (a leaf's subject CN or one of its DNS SANs) that
 * may call; the server asks each route whether it requires a certificate (server_route
 * .client_auth) and, when it does, answers 403 to a request whose connection did not present an
 * acceptable one.
 *
 * How the certificate is obtained: the handshake only requests it (GNUTLS_CERT_REQUEST, set by
 * tls_cert_callback() when tls_store_request_client_cert() is on), it never requires or
 * verifies it, so routes that do not require one keep serving clients without a certificate
 * (the health checks of other tools, the plain scheduler listener's peers) and GnuTLS's own
 * trust list (MHD_OPTION_HTTPS_MEM_TRUST, loaded once) is not used: the CertificateRequest
 * names no CA, so every client that has a certificate sends it (Go's crypto/tls sends nothing
 * when the request names CAs its certificate is not from, which a rotated CA would cause).
 * GnuTLS checks the client's proof of possession (CertificateVerify) in the handshake;
 * clientauth_check() then verifies the chain the peer sent against the current generation of
 * --client-ca-file with gnutls_x509_trust_list_verify_crt2 (signatures, validity dates, CA
 * basic constraints, and the leaf's extended key usage, which must allow TLS client
 * authentication when it is present).
 *
 * Generations and reload: like the serving certificate (tls.h), the CA file is re-read by
 * path every --tls-reload-interval (tls_store_on_poll runs clientauth_reload on the same
 * thread); a file that does not parse as at least one PEM certificate is refused, logged once
 * and the old CAs stay in force. Retired generations stay allocated until clientauth_free(),
 * because a check on another thread may still be reading one.
 *
 * Thread-safety: clientauth_check() is lock-free and may run on any thread; clientauth_reload()
 * is serialized by a mutex; clientauth_new/free are for the main thread.
 */
#ifndef GMG_CLIENTAUTH_H
#define GMG_CLIENTAUTH_H

#include <stddef.h>

#include <gnutls/gnutls.h>

#define CLIENTAUTH_FILE_MAX  (1024u * 1024u) /* bytes of the CA file */
#define CLIENTAUTH_MAX_CAS   64              /* certificates in the CA file */
#define CLIENTAUTH_MAX_CHAIN 8               /* certificates a client may send */
#define CLIENTAUTH_MAX_NAMES 32              /* --client-allowed-names entries */
#define CLIENTAUTH_NAME_MAX  256             /* bytes of one name, NUL included */
#define CLIENTAUTH_WHY_MAX   256

#define CLIENTAUTH_ENOCERT    (-1) /* the connection presented no certificate */
#define CLIENTAUTH_EUNTRUSTED (-2) /* not from --client-ca-file, expired, not for clients */
#define CLIENTAUTH_ENAME      (-3) /* trusted, but neither its CN nor a DNS SAN is allowed */
#define CLIENTAUTH_EIO        (-4) /* the CA file could not be read */
#define CLIENTAUTH_ECA        (-5) /* the CA file holds no usable PEM certificate */
#define CLIENTAUTH_ENOMEM     (-6)
#define CLIENTAUTH_EINVAL     (-7) /* too many names, an empty or too long one */

#define CLIENTAUTH_UNCHANGED 0 /* clientauth_reload(): the file is the current generation's */
#define CLIENTAUTH_RELOADED  1 /* clientauth_reload(): new CAs are in force */

struct clientauth; /* opaque */

/*
 * Load the CAs of ca_file (path copied) and the allowed names (names[0..n_names), copied; none:
 * any certificate from those CAs). NULL on failure with the reason in err, e.g.
 * `--client-ca-file /etc/ca.crt: no PEM certificate in it`.
 */
struct clientauth *clientauth_new(const char *ca_file, const char *const *names, size_t n_names,
                                  char *err, size_t errlen);

/* Free every generation. After the HTTPS daemon is stopped. NULL is a no-op. */
void clientauth_free(struct clientauth *a);

/*
 * Re-read the CA file now. CLIENTAUTH_RELOADED, CLIENTAUTH_UNCHANGED, or a negative code when
 * the new file is refused (the old CAs stay in force; err says why; a file already refused is
 * not logged again until it changes).
 */
int clientauth_reload(struct clientauth *a, char *err, size_t errlen);

/*
 * Whether the peer of session (a server session after its handshake) may call: 0, or a
 * negative CLIENTAUTH_E* code with a one-line reason in why (cap bytes), e.g. "client
 * certificate CN=web (DNS: -) is not among --client-allowed-names".
 */
int clientauth_check(struct clientauth *a, gnutls_session_t session, char *why, size_t cap);

/* The same for a chain of DER certificates, leaf first (n 0: CLIENTAUTH_ENOCERT). */
int clientauth_check_chain(struct clientauth *a, const gnutls_datum_t *chain, unsigned n, char *why,
                           size_t cap);

/* How many CA generations were loaded (1 after clientauth_new). */
unsigned clientauth_generations(struct clientauth *a);

#endif
