/*
 * testcerts: OpenSSL 3 certificate generation for tests (see testcerts.h).
 */
#define _GNU_SOURCE
#include "testcerts.h"

#include <fcntl.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct testcert {
	EVP_PKEY *key;
	X509 *cert;
};

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return -1;
	X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return 0;
}

enum kind { KIND_CA, KIND_SERVER, KIND_CLIENT };

static struct testcert *make(const struct testcert *ca, const char *cn, long serial,
                             long valid_seconds, enum kind kind, const char *client_san)
{
	struct testcert *c = calloc(1, sizeof *c);
	X509_NAME *name;
	X509 *issuer;
	EVP_PKEY *signer;
	if (!c)
		return NULL;
	c->key = EVP_EC_gen("P-256");
	c->cert = X509_new();
	if (!c->key || !c->cert)
		goto err;
	X509_set_version(c->cert, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(c->cert), serial);
	X509_gmtime_adj(X509_getm_notBefore(c->cert), -3600);
	X509_gmtime_adj(X509_getm_notAfter(c->cert), valid_seconds);
	X509_set_pubkey(c->cert, c->key);
	name = X509_get_subject_name(c->cert);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	issuer = ca ? ca->cert : c->cert;
	signer = ca ? ca->key : c->key;
	X509_set_issuer_name(c->cert, X509_get_subject_name(issuer));
	if (kind == KIND_CA) {
		if (add_ext(c->cert, issuer, NID_basic_constraints, "critical,CA:TRUE") ||
		    add_ext(c->cert, issuer, NID_key_usage, "critical,keyCertSign,cRLSign") ||
		    add_ext(c->cert, issuer, NID_subject_key_identifier, "hash"))
			goto err;
	} else {
		if (add_ext(c->cert, issuer, NID_basic_constraints, "critical,CA:FALSE") ||
		    add_ext(c->cert, issuer, NID_key_usage, "critical,digitalSignature") ||
		    add_ext(c->cert, issuer, NID_ext_key_usage,
		            kind == KIND_SERVER ? "serverAuth" : "clientAuth") ||
		    (kind == KIND_SERVER && add_ext(c->cert, issuer, NID_subject_alt_name,
		                                    "IP:127.0.0.1,DNS:localhost")) ||
		    (client_san != NULL &&
		     add_ext(c->cert, issuer, NID_subject_alt_name, client_san)) ||
		    add_ext(c->cert, issuer, NID_authority_key_identifier, "keyid:always"))
			goto err;
	}
	if (!X509_sign(c->cert, signer, EVP_sha256()))
		goto err;
	return c;
err:
	testcert_free(c);
	return NULL;
}

struct testcert *testcert_new_ca(const char *cn)
{
	return make(NULL, cn, 1, 10L * 365 * 86400, KIND_CA, NULL);
}

struct testcert *testcert_new_server(const struct testcert *ca, const char *cn, long serial,
                                     long valid_seconds)
{
	return make(ca, cn, serial, valid_seconds, KIND_SERVER, NULL);
}

struct testcert *testcert_new_client(const struct testcert *ca, const char *cn, long serial)
{
	return make(ca, cn, serial, 86400, KIND_CLIENT, NULL);
}

struct testcert *testcert_new_client_san(const struct testcert *ca, const char *cn, const char *san,
                                         long serial)
{
	return make(ca, cn, serial, 86400, KIND_CLIENT, san);
}

void testcert_free(struct testcert *c)
{
	if (!c)
		return;
	EVP_PKEY_free(c->key);
	X509_free(c->cert);
	free(c);
}

static char *bio_string(BIO *b)
{
	char *data, *out;
	long len = BIO_get_mem_data(b, &data);
	out = malloc((size_t)len + 1);
	if (out) {
		memcpy(out, data, (size_t)len);
		out[len] = '\0';
	}
	return out;
}

char *testcert_cert_pem(const struct testcert *c)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *s = NULL;
	if (b && PEM_write_bio_X509(b, c->cert))
		s = bio_string(b);
	BIO_free(b);
	return s;
}

char *testcert_key_pem(const struct testcert *c)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *s = NULL;
	if (b && PEM_write_bio_PrivateKey(b, c->key, NULL, NULL, 0, NULL, NULL))
		s = bio_string(b);
	BIO_free(b);
	return s;
}

long testcert_serial(const struct testcert *c)
{
	return ASN1_INTEGER_get(X509_get0_serialNumber(c->cert));
}

static int write_atomic(const char *path, const char *data)
{
	char tmp[4096];
	int fd, rc = -1;
	size_t len = strlen(data);
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	if (write(fd, data, len) == (ssize_t)len && fsync(fd) == 0)
		rc = 0;
	close(fd);
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -1;
	if (rc)
		unlink(tmp);
	return rc;
}

int testcert_write(const struct testcert *c, const char *cert_path, const char *key_path)
{
	char *cert = testcert_cert_pem(c), *key = testcert_key_pem(c);
	int rc = -1;
	if (!cert || !key)
		goto out;
	if (key_path && write_atomic(key_path, key))
		goto out;
	if (cert_path && write_atomic(cert_path, cert))
		goto out;
	rc = 0;
out:
	free(cert);
	free(key);
	return rc;
}

/* Base64 of a NUL-terminated string, one line (kubeconfig *-data fields). Caller frees. */
static char *b64(const char *s)
{
	size_t len = strlen(s);
	unsigned char *out = malloc(4 * ((len + 2) / 3) + 1);
	if (out)
		EVP_EncodeBlock(out, (const unsigned char *)s, (int)len);
	return (char *)out;
}

static int write_kubeconfig(const char *path, const char *server, const char *ca_pem,
                            const char *user_key, const char *user_value)
{
	size_t len = strlen(ca_pem);
	size_t b64len = 4 * ((len + 2) / 3) + 1;
	unsigned char *b64 = malloc(b64len);
	char *doc = NULL;
	int rc = -1;
	if (!b64)
		return -1;
	EVP_EncodeBlock(b64, (const unsigned char *)ca_pem, (int)len);
	if (asprintf(&doc,
	             "apiVersion: v1\n"
	             "kind: Config\n"
	             "clusters:\n"
	             "- name: apiserver-test-double\n"
	             "  cluster:\n"
	             "    server: %s\n"
	             "    certificate-authority-data: %s\n"
	             "users:\n"
	             "- name: webhook\n"
	             "  user:\n"
	             "    %s: %s\n"
	             "contexts:\n"
	             "- name: test\n"
	             "  context:\n"
	             "    cluster: apiserver-test-double\n"
	             "    user: webhook\n"
	             "current-context: test\n",
	             server, (const char *)b64, user_key, user_value) < 0)
		doc = NULL;
	if (doc)
		rc = write_atomic(path, doc);
	free(doc);
	free(b64);
	return rc;
}

int testcerts_write_kubeconfig(const char *path, const char *server, const char *ca_pem,
                               const char *token)
{
	return write_kubeconfig(path, server, ca_pem, "token", token);
}

int testcerts_write_kubeconfig_token_file(const char *path, const char *server, const char *ca_pem,
                                          const char *token_file)
{
	return write_kubeconfig(path, server, ca_pem, "tokenFile", token_file);
}

int testcerts_write_kubeconfig_client_cert(const char *path, const char *server, const char *ca_pem,
                                           const struct testcert *client)
{
	char *cert = testcert_cert_pem(client), *key = testcert_key_pem(client);
	char *b64c = cert ? b64(cert) : NULL, *b64k = key ? b64(key) : NULL;
	char *user = NULL;
	int rc = -1;
	if (b64c && b64k && asprintf(&user, "%s\n    client-key-data: %s", b64c, b64k) >= 0)
		rc = write_kubeconfig(path, server, ca_pem, "client-certificate-data", user);
	free(user);
	free(b64c);
	free(b64k);
	free(cert);
	free(key);
	return rc;
}

int testcerts_pem_info(const char *pem, size_t len, long *serial, long long *not_after)
{
	BIO *b = BIO_new_mem_buf(pem, (int)len);
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	struct tm tm;
	int rc = -1;
	if (!x)
		goto out;
	*serial = ASN1_INTEGER_get(X509_get0_serialNumber(x));
	if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1)
		goto out;
	*not_after = (long long)timegm(&tm);
	rc = 0;
out:
	X509_free(x);
	BIO_free(b);
	return rc;
}
