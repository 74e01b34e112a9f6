/*
 * clientauth: client certificates against --client-ca-file. See clientauth.h.
 */
#include "clientauth.h"

#include "capfile.h"
#include "log.h"

#include <gnutls/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct generation {
	gnutls_x509_trust_list_t trust; /* owns its CA certificates */
	char *pem;                      /* the bytes it was made from, to detect changes */
	size_t len;
	unsigned n_cas;
	struct generation *older; /* retired generations, newest first */
};

struct clientauth {
	char *ca_file;
	char names[CLIENTAUTH_MAX_NAMES][CLIENTAUTH_NAME_MAX];
	size_t n_names;
	_Atomic(struct generation *) current;
	unsigned generations;
	pthread_mutex_t reload_lock;
	char *refused; /* the last refused file's bytes: logged once */
	size_t refused_len;
	int read_failing;
};

static void generation_free(struct generation *g)
{
	if (g == NULL)
		return;
	if (g->trust != NULL)
		gnutls_x509_trust_list_deinit(g->trust, 1);
	free(g->pem);
	free(g);
}

static int read_ca(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
	char why[CLIENTAUTH_WHY_MAX];
	int rc = capfile_read(path, CLIENTAUTH_FILE_MAX, 0, out, len, why, sizeof(why));
	if (rc == 0)
		return 0;
	snprintf(err, errlen, "--client-ca-file %s", why);
	return rc == CAPFILE_ENOMEM ? CLIENTAUTH_ENOMEM : CLIENTAUTH_EIO;
}

/* A trust list of the PEM certificates in pem (ownership of pem moves into *out on success). */
static int generation_new(const char *path, char *pem, size_t len, struct generation **out,
                          char *err, size_t errlen)
{
	gnutls_x509_crt_t cas[CLIENTAUTH_MAX_CAS];
	unsigned n = CLIENTAUTH_MAX_CAS;
	gnutls_datum_t d = {(unsigned char *)pem, (unsigned)len};
	struct generation *g = calloc(1, sizeof(*g));
	int rc = CLIENTAUTH_ENOMEM;

	if (g == NULL)
		return CLIENTAUTH_ENOMEM;
	int grc = len > 0 ? gnutls_x509_crt_list_import(cas, &n, &d, GNUTLS_X509_FMT_PEM, 0)
	                  : GNUTLS_E_NO_CERTIFICATE_FOUND;
	if (grc <= 0) {
		snprintf(err, errlen, "--client-ca-file %s: no usable PEM certificate in it: %s",
		         path,
		         grc == GNUTLS_E_SHORT_MEMORY_BUFFER ? "more than 64 certificates"
		         : grc == 0                          ? "empty"
		                                             : gnutls_strerror(grc));
		rc = CLIENTAUTH_ECA;
		goto out;
	}
	n = (unsigned)grc;
	if (gnutls_x509_trust_list_init(&g->trust, 0) < 0) {
		for (unsigned i = 0; i < n; i++)
			gnutls_x509_crt_deinit(cas[i]);
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* The list takes the certificates (freed by gnutls_x509_trust_list_deinit(.., 1)). */
	grc = gnutls_x509_trust_list_add_cas(g->trust, cas, n, 0);
	if (grc < 0) {
		for (unsigned i = 0; i < n; i++)
			gnutls_x509_crt_deinit(cas[i]);
		snprintf(err, errlen, "--client-ca-file %s: %s", path, gnutls_strerror(grc));
		rc = CLIENTAUTH_ECA;
		goto out;
	}
	g->n_cas = n;
	g->pem = pem;
	g->len = len;
	*out = g;
	g = NULL;
	rc = 0;
out:
	generation_free(g);
	return rc;
}

static void publish(struct clientauth *a, struct generation *g)
{
	g->older = atomic_load_explicit(&a->current, memory_order_relaxed);
	atomic_store_explicit(&a->current, g, memory_order_release);
	a->generations++;
}

static int set_names(struct clientauth *a, const char *const *names, size_t n, char *err,
                     size_t errlen)
{
	if (n > CLIENTAUTH_MAX_NAMES) {
		snprintf(err, errlen, "--client-allowed-names: more than %d names",
		         CLIENTAUTH_MAX_NAMES);
		return CLIENTAUTH_EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = names[i] ? strlen(names[i]) : 0;
		if (len == 0 || len >= CLIENTAUTH_NAME_MAX) {
			snprintf(err, errlen,
			         "--client-allowed-names: name %zu is empty or longer "
			         "than %d bytes",
			         i + 1, CLIENTAUTH_NAME_MAX - 1);
			return CLIENTAUTH_EINVAL;
		}
		memcpy(a->names[i], names[i], len + 1);
	}
	a->n_names = n;
	return 0;
}

struct clientauth *clientauth_new(const char *ca_file, const char *const *names, size_t n_names,
                                  char *err, size_t errlen)
{
	struct clientauth *a = calloc(1, sizeof(*a));
	struct generation *g = NULL;
	char *pem = NULL;
	size_t len = 0;

	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&a->reload_lock, NULL);
	if ((a->ca_file = strdup(ca_file)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto err;
	}
	if (set_names(a, names, n_names, err, errlen) != 0 ||
	    read_ca(ca_file, &pem, &len, err, errlen) != 0 ||
	    generation_new(ca_file, pem, len, &g, err, errlen) != 0)
		goto err;
	pem = NULL; /* owned by g */
	publish(a, g);
	log_fields(LOG_INFO, "client CA loaded",
	           (struct log_field[]){LOG_STR("client_ca_file", ca_file),
	                                LOG_INT("certificates", g->n_cas),
	                                LOG_INT("allowed_names", (long long)n_names), LOG_END});
	return a;
err:
	free(pem);
	clientauth_free(a);
	return NULL;
}

void clientauth_free(struct clientauth *a)
{
	if (a == NULL)
		return;
	struct generation *g = atomic_load(&a->current);
	while (g != NULL) {
		struct generation *older = g->older;
		generation_free(g);
		g = older;
	}
	free(a->refused);
	free(a->ca_file);
	pthread_mutex_destroy(&a->reload_lock);
	free(a);
}

static int same_bytes(const char *x, size_t xlen, const char *y, size_t ylen)
{
	return x != NULL && y != NULL && xlen == ylen && memcmp(x, y, xlen) == 0;
}

static int reload_locked(struct clientauth *a, char *err, size_t errlen)
{
	struct generation *cur = atomic_load_explicit(&a->current, memory_order_relaxed);
	struct generation *g = NULL;
	char *pem = NULL;
	size_t len = 0;
	int rc = read_ca(a->ca_file, &pem, &len, err, errlen);

	if (rc != 0) {
		if (!a->read_failing)
			log_fields(LOG_WARN, "client CA reload failed, keeping the current one",
			           (struct log_field[]){LOG_STR("error", err), LOG_END});
		a->read_failing = 1;
		return rc;
	}
	a->read_failing = 0;
	if (same_bytes(pem, len, cur->pem, cur->len)) {
		rc = CLIENTAUTH_UNCHANGED;
		goto out;
	}
	if (same_bytes(pem, len, a->refused, a->refused_len)) {
		snprintf(err, errlen, "--client-ca-file holds a file already refused");
		rc = CLIENTAUTH_ECA;
		goto out;
	}
	rc = generation_new(a->ca_file, pem, len, &g, err, errlen);
	if (rc != 0) {
		log_fields(LOG_WARN, "new client CA refused, keeping the current one",
		           (struct log_field[]){LOG_STR("error", err), LOG_END});
		free(a->refused);
		a->refused = pem;
		a->refused_len = len;
		pem = NULL;
		goto out;
	}
	pem = NULL; /* owned by g */
	publish(a, g);
	log_fields(LOG_INFO, "client CA reloaded",
	           (struct log_field[]){LOG_STR("client_ca_file", a->ca_file),
	                                LOG_INT("certificates", g->n_cas),
	                                LOG_INT("generation", a->generations), LOG_END});
	rc = CLIENTAUTH_RELOADED;
out:
	free(pem);
	return rc;
}

int clientauth_reload(struct clientauth *a, char *err, size_t errlen)
{
	pthread_mutex_lock(&a->reload_lock);
	int rc = reload_locked(a, err, errlen);
	pthread_mutex_unlock(&a->reload_lock);
	return rc;
}

unsigned clientauth_generations(struct clientauth *a)
{
	pthread_mutex_lock(&a->reload_lock);
	unsigned n = a->generations;
	pthread_mutex_unlock(&a->reload_lock);
	return n;
}

/* 1 when name is among the allowed names (exact; DNS names compare case-insensitively). */
static int allowed(const struct clientauth *a, const char *name, int dns)
{
	for (size_t i = 0; i < a->n_names; i++)
		if (dns ? strcasecmp(a->names[i], name) == 0 : strcmp(a->names[i], name) == 0)
			return 1;
	return 0;
}

/* The leaf's CN or one of its DNS SANs is allowed; else why names the CN and the first SAN. */
static int name_allowed(const struct clientauth *a, gnutls_x509_crt_t leaf, char *why, size_t cap)
{
	char cn[CLIENTAUTH_NAME_MAX] = "", san[CLIENTAUTH_NAME_MAX],
	     first[CLIENTAUTH_NAME_MAX] = "-";
	size_t size = sizeof(cn);

	if (a->n_names == 0)
		return 1;
	if (gnutls_x509_crt_get_dn_by_oid(leaf, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &size) < 0)
		cn[0] = '\0';
	else if (strlen(cn) == size && allowed(a, cn, 0)) /* no NUL inside */
		return 1;
	for (unsigned seq = 0; seq < 64; seq++) {
		size = sizeof(san);
		int type = gnutls_x509_crt_get_subject_alt_name(leaf, seq, san, &size, NULL);
		if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
			break;
		if (type != GNUTLS_SAN_DNSNAME || strlen(san) != size)
			continue; /* another kind, too long, or a NUL inside */
		if (allowed(a, san, 1))
			return 1;
		if (first[0] == '-')
			snprintf(first, sizeof(first), "%s", san);
	}
	snprintf(why, cap, "client certificate CN=%s (DNS: %s) is not among --client-allowed-names",
	         cn[0] ? cn : "-", first);
	return 0;
}

int clientauth_check_chain(struct clientauth *a, const gnutls_datum_t *chain, unsigned n, char *why,
                           size_t cap)
{
	struct generation *g = atomic_load_explicit(&a->current, memory_order_acquire);
	gnutls_x509_crt_t crts[CLIENTAUTH_MAX_CHAIN];
	unsigned have = 0, status = 0;
	int rc = CLIENTAUTH_EUNTRUSTED;

	if (n == 0 || chain == NULL) {
		snprintf(why, cap, "a client certificate is required");
		return CLIENTAUTH_ENOCERT;
	}
	if (n > CLIENTAUTH_MAX_CHAIN) {
		snprintf(why, cap, "client certificate chain longer than %d", CLIENTAUTH_MAX_CHAIN);
		return CLIENTAUTH_EUNTRUSTED;
	}
	for (; have < n; have++) {
		if (gnutls_x509_crt_init(&crts[have]) < 0) {
			snprintf(why, cap, "out of memory");
			rc = CLIENTAUTH_ENOMEM;
			goto out;
		}
		if (gnutls_x509_crt_import(crts[have], &chain[have], GNUTLS_X509_FMT_DER) < 0) {
			have++;
			snprintf(why, cap, "client certificate %u does not parse", have);
			goto out;
		}
	}
	gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
	                                 .data = (void *)GNUTLS_KP_TLS_WWW_CLIENT};
	int grc =
	    gnutls_x509_trust_list_verify_crt2(g->trust, crts, n, &purpose, 1, 0, &status, NULL);
	if (grc < 0 || status != 0) {
		gnutls_datum_t text = {NULL, 0};
		if (grc >= 0 && gnutls_certificate_verification_status_print(
		                    status, GNUTLS_CRT_X509, &text, 0) >= 0)
			snprintf(why, cap, "client certificate not accepted: %s", text.data);
		else
			snprintf(why, cap, "client certificate not accepted: %s",
			         grc < 0 ? gnutls_strerror(grc) : "not trusted");
		gnutls_free(text.data);
		goto out;
	}
	rc = name_allowed(a, crts[0], why, cap) ? 0 : CLIENTAUTH_ENAME;
out:
	for (unsigned i = 0; i < have; i++)
		gnutls_x509_crt_deinit(crts[i]);
	return rc;
}

int clientauth_check(struct clientauth *a, gnutls_session_t session, char *why, size_t cap)
{
	unsigned n = 0;
	const gnutls_datum_t *chain = NULL;
	if (session != NULL && gnutls_certificate_type_get(session) == GNUTLS_CRT_X509)
		chain = gnutls_certificate_get_peers(session, &n);
	return clientauth_check_chain(a, chain, chain ? n : 0, why, cap);
}
