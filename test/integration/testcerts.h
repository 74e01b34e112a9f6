/*
 * testcerts: certificates for the integration tests and the benchmark, made in-process with
 * OpenSSL (a CA, server certificates with IP SAN 127.0.0.1 and DNS localhost) and the
 * kubeconfig that points the webhook at the API server test double.
 *
 * Keys are ECDSA P-256 (fast to generate). Not thread-safe per object; separate objects are
 * independent. Strings returned by _pem functions are malloc'd: the caller frees them.
 */
#ifndef GMG_TEST_TESTCERTS_H
#define GMG_TEST_TESTCERTS_H

#include <stddef.h>

struct testcert; /* a key and its certificate (opaque: OpenSSL objects) */

/* A self-signed CA. NULL on failure. */
struct testcert *testcert_new_ca(const char *cn);

/*
 * A server certificate for cn, issued by ca, serial number `serial`, valid from one hour ago
 * for valid_seconds (negative: already expired). SANs: IP 127.0.0.1, DNS localhost; EKU
 * serverAuth. NULL on failure.
 */
struct testcert *testcert_new_server(const struct testcert *ca, const char *cn, long serial,
                                     long valid_seconds);

/* A client certificate (EKU clientAuth, no SANs) for cn, issued by ca, valid one day. */
struct testcert *testcert_new_client(const struct testcert *ca, const char *cn, long serial);

/* The same with a subjectAltName extension of san (OpenSSL's form: "DNS:a,DNS:b"). */
struct testcert *testcert_new_client_san(const struct testcert *ca, const char *cn, const char *san,
                                         long serial);

void testcert_free(struct testcert *c); /* NULL is a no-op */

char *testcert_cert_pem(const struct testcert *c); /* caller frees */
char *testcert_key_pem(const struct testcert *c);  /* caller frees */
long testcert_serial(const struct testcert *c);

/* Write cert and key PEM files (mode 0600, written to a temporary name then renamed, so a
 * watcher never sees half a file). Either path may be NULL. 0 / -1. */
int testcert_write(const struct testcert *c, const char *cert_path, const char *key_path);

/* Write a kubeconfig for server (https://127.0.0.1:PORT) trusting ca_pem (embedded as
 * certificate-authority-data) with a bearer token. 0 / -1. */
int testcerts_write_kubeconfig(const char *path, const char *server, const char *ca_pem,
                               const char *token);

/* The same with tokenFile: token_file (re-read by the client as it rotates). 0 / -1. */
int testcerts_write_kubeconfig_token_file(const char *path, const char *server, const char *ca_pem,
                                          const char *token_file);

/* The same with client-certificate-data / client-key-data of client, and no token. 0 / -1. */
int testcerts_write_kubeconfig_client_cert(const char *path, const char *server, const char *ca_pem,
                                           const struct testcert *client);

/* Serial number and notAfter (seconds since the epoch) of a PEM certificate. 0 / -1. */
int testcerts_pem_info(const char *pem, size_t len, long *serial, long long *not_after);

#endif
