/*
 * certgen: a private CA and the webhook's serving certificate, with OpenSSL 3 in-process.
 * See certgen.h for the contract.
 */
#include "certgen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define SERIAL_BYTES  16   /* RFC 5280: at most 20 octets, positive */
#define BACKDATE_SECS 3600 /* notBefore one hour back: clocks in a cluster disagree */

static const char usage_text[] =
    "Usage: gpu-memory-guard certs --out-dir DIR [flags]\n"
    "\n"
    "Write a private CA (ca.crt, ca.key) and a serving certificate signed by it (tls.crt,\n"
    "tls.key) for the webhook Service, then print the caBundle (base64 of ca.crt) on stdout.\n"
    "The serving certificate is valid for SVC, SVC.NS, SVC.NS.svc, SVC.NS.svc.cluster.local\n"
    "and every --dns/--ip given. Existing files are never replaced without --force/--renew.\n"
    "\n"
    "Flags:\n"
    "  --service NAME     Service name (default " CERTGEN_DEFAULT_SVC ")\n"
    "  --namespace NS     Service namespace (default " CERTGEN_DEFAULT_NS ")\n"
    "  --dns NAME         extra DNS name in the certificate (repeatable, up to 16)\n"
    "  --ip ADDR          extra IP address in the certificate (repeatable, up to 16)\n"
    "  --days N           serving certificate validity in days (default 365)\n"
    "  --ca-days N        CA validity in days (default 3650; at least --days)\n"
    "  --key-type T       ecdsa (P-256, default) or rsa (2048 bits)\n"
    "  --out-dir DIR      output directory (created 0700 if missing; required)\n"
    "  --force            replace all four files with a new CA (the caBundle changes)\n"
    "  --renew            keep ca.crt/ca.key in DIR, re-issue tls.crt/tls.key only\n"
    "                     (the caBundle stays the same)\n"
    "  --help             this text\n";

const char *certgen_usage(void)
{
	return usage_text;
}

void certgen_opts_init(struct certgen_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->service = CERTGEN_DEFAULT_SVC;
	o->namespace = CERTGEN_DEFAULT_NS;
	o->days = CERTGEN_DEFAULT_DAYS;
	o->ca_days = CERTGEN_DEFAULT_CA_DAYS;
	o->key_type = CERTGEN_KEY_ECDSA_P256;
}

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, int code,
                                                      const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* Translate OpenSSL's error queue at the module edge: its first (root-cause) entry, then clear. */
static int ossl_fail(char *err, size_t errlen, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	else
		snprintf(buf, sizeof(buf), "no OpenSSL error recorded");
	ERR_clear_error();
	return fail(err, errlen, CERTGEN_ECRYPTO, "%s: %s", what, buf);
}

/* ---- flag parsing -------------------------------------------------------------------- */

static int parse_days(const char *flag, const char *v, int *out, char *err, size_t errlen)
{
	char *end = NULL;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < 1 || n > CERTGEN_DAYS_MAX)
		return fail(err, errlen, CERTGEN_EUSAGE,
		            "%s: want a whole number of days 1..%d, got %s", flag, CERTGEN_DAYS_MAX,
		            v);
	*out = (int)n;
	return 0;
}

/* Apply one "--name value" pair; returns 0 or CERTGEN_EUSAGE. */
static int apply_flag(struct certgen_opts *o, const char *name, const char *v, char *err,
                      size_t errlen)
{
	if (!strcmp(name, "--service")) {
		o->service = v;
	} else if (!strcmp(name, "--namespace")) {
		o->namespace = v;
	} else if (!strcmp(name, "--out-dir")) {
		o->out_dir = v;
	} else if (!strcmp(name, "--days")) {
		return parse_days(name, v, &o->days, err, errlen);
	} else if (!strcmp(name, "--ca-days")) {
		return parse_days(name, v, &o->ca_days, err, errlen);
	} else if (!strcmp(name, "--dns")) {
		if (o->n_dns >= CERTGEN_MAX_DNS)
			return fail(err, errlen, CERTGEN_EUSAGE, "--dns: at most %d names",
			            CERTGEN_MAX_DNS);
		o->dns[o->n_dns++] = v;
	} else if (!strcmp(name, "--ip")) {
		if (o->n_ip >= CERTGEN_MAX_IP)
			return fail(err, errlen, CERTGEN_EUSAGE, "--ip: at most %d addresses",
			            CERTGEN_MAX_IP);
		o->ip[o->n_ip++] = v;
	} else if (!strcmp(name, "--key-type")) {
		if (!strcmp(v, "ecdsa"))
			o->key_type = CERTGEN_KEY_ECDSA_P256;
		else if (!strcmp(v, "rsa"))
			o->key_type = CERTGEN_KEY_RSA_2048;
		else
			return fail(err, errlen, CERTGEN_EUSAGE,
			            "--key-type: want ecdsa or rsa, got %s", v);
	} else {
		return fail(err, errlen, CERTGEN_EUSAGE, "unknown flag %s (see --help)", name);
	}
	return 0;
}

static int is_value_flag(const char *name)
{
	static const char *const flags[] = {"--service", "--namespace", "--out-dir", "--days",
	                                    "--ca-days", "--dns",       "--ip",      "--key-type"};
	size_t i;

	for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (!strcmp(name, flags[i]))
			return 1;
	return 0;
}

int certgen_parse_args(int argc, char **argv, struct certgen_opts *o, char *err, size_t errlen)
{
	char name[32];
	int i, rc;

	certgen_opts_init(o);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *v;
		size_t n;

		if (strncmp(a, "--", 2) != 0)
			return fail(err, errlen, CERTGEN_EUSAGE, "unexpected argument %s", a);
		eq = strchr(a, '=');
		n = eq ? (size_t)(eq - a) : strlen(a);
		if (n >= sizeof(name))
			return fail(err, errlen, CERTGEN_EUSAGE, "unknown flag %.*s", (int)n, a);
		memcpy(name, a, n);
		name[n] = '\0';
		if (!strcmp(name, "--force") || !strcmp(name, "--renew") ||
		    !strcmp(name, "--help")) {
			if (eq)
				return fail(err, errlen, CERTGEN_EUSAGE, "%s takes no value", name);
			if (name[2] == 'f')
				o->force = 1;
			else if (name[2] == 'r')
				o->renew = 1;
			else
				o->help = 1;
			continue;
		}
		if (!is_value_flag(name))
			return fail(err, errlen, CERTGEN_EUSAGE, "unknown flag %s (see --help)",
			            name);
		if (eq) {
			v = eq + 1;
		} else {
			if (i + 1 >= argc)
				return fail(err, errlen, CERTGEN_EUSAGE, "%s needs a value", name);
			v = argv[++i];
		}
		rc = apply_flag(o, name, v, err, errlen);
		if (rc)
			return rc;
	}
	if (o->help)
		return 0;
	if (!o->out_dir || !*o->out_dir)
		return fail(err, errlen, CERTGEN_EUSAGE, "--out-dir is required");
	if (o->force && o->renew)
		return fail(err, errlen, CERTGEN_EUSAGE, "--force and --renew exclude each other");
	return 0;
}

/* ---- validation ---------------------------------------------------------------------- */

/* A DNS-1123 label: lower-case alphanumerics and '-', starting and ending alphanumeric. */
static int valid_label(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > CERTGEN_LABEL_MAX || s[0] == '-' || s[n - 1] == '-')
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* A DNS name for a SAN: labels of [A-Za-z0-9-], a leading "*." wildcard allowed. */
static int valid_dns(const char *s)
{
	size_t i, n = strlen(s), label = 0;

	if (n == 0 || n > CERTGEN_NAME_MAX)
		return 0;
	if (!strncmp(s, "*.", 2))
		s += 2, n -= 2;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0)
				return 0;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return 0;
		if (++label > CERTGEN_LABEL_MAX)
			return 0;
	}
	return label > 0;
}

static int validate(const struct certgen_opts *o, char *err, size_t errlen)
{
	unsigned char buf[sizeof(struct in6_addr)];
	size_t i;

	if (!o->service || !valid_label(o->service))
		return fail(err, errlen, CERTGEN_EUSAGE,
		            "--service: want a DNS label (a-z, 0-9, '-', at most 63), got %s",
		            o->service ? o->service : "(null)");
	if (!o->namespace || !valid_label(o->namespace))
		return fail(err, errlen, CERTGEN_EUSAGE,
		            "--namespace: want a DNS label (a-z, 0-9, '-', at most 63), got %s",
		            o->namespace ? o->namespace : "(null)");
	for (i = 0; i < o->n_dns; i++)
		if (!valid_dns(o->dns[i]))
			return fail(err, errlen, CERTGEN_EUSAGE, "--dns: not a DNS name: %s",
			            o->dns[i]);
	for (i = 0; i < o->n_ip; i++)
		if (inet_pton(AF_INET, o->ip[i], buf) != 1 &&
		    inet_pton(AF_INET6, o->ip[i], buf) != 1)
			return fail(err, errlen, CERTGEN_EUSAGE,
			            "--ip: not an IPv4 or IPv6 address: %s", o->ip[i]);
	if (o->days < 1 || o->days > CERTGEN_DAYS_MAX || o->ca_days < 1 ||
	    o->ca_days > CERTGEN_DAYS_MAX)
		return fail(err, errlen, CERTGEN_EUSAGE, "validity must be 1..%d days",
		            CERTGEN_DAYS_MAX);
	if (!o->renew && o->ca_days < o->days)
		return fail(err, errlen, CERTGEN_EUSAGE,
		            "--ca-days (%d) must be at least --days (%d): a certificate cannot "
		            "outlive its CA",
		            o->ca_days, o->days);
	if (!o->out_dir || !*o->out_dir)
		return fail(err, errlen, CERTGEN_EUSAGE, "--out-dir is required");
	if (o->force && o->renew)
		return fail(err, errlen, CERTGEN_EUSAGE, "--force and --renew exclude each other");
	return 0;
}

/* ---- certificates -------------------------------------------------------------------- */

static EVP_PKEY *new_key(enum certgen_key_type t)
{
	if (t == CERTGEN_KEY_RSA_2048)
		return EVP_RSA_gen(2048);
	return EVP_EC_gen("P-256");
}

static int add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok;

	if (!ext)
		return 0;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok;
}

static int push_dns(GENERAL_NAMES *gens, const char *name)
{
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_IA5STRING *s = ASN1_IA5STRING_new();

	if (!g || !s || !ASN1_STRING_set(s, name, (int)strlen(name)))
		goto err;
	GENERAL_NAME_set0_value(g, GEN_DNS, s);
	if (!sk_GENERAL_NAME_push(gens, g)) {
		GENERAL_NAME_free(g);
		return 0;
	}
	return 1;
err:
	ASN1_IA5STRING_free(s);
	GENERAL_NAME_free(g);
	return 0;
}

static int push_ip(GENERAL_NAMES *gens, const char *addr)
{
	GENERAL_NAME *g = GENERAL_NAME_new();
	ASN1_OCTET_STRING *ip = a2i_IPADDRESS(addr);

	if (!g || !ip)
		goto err;
	GENERAL_NAME_set0_value(g, GEN_IPADD, ip);
	if (!sk_GENERAL_NAME_push(gens, g)) {
		GENERAL_NAME_free(g);
		return 0;
	}
	return 1;
err:
	ASN1_OCTET_STRING_free(ip);
	GENERAL_NAME_free(g);
	return 0;
}

/* subjectAltName: the four Service names, then the extra DNS names and IPs. */
static int add_sans(X509 *x, const struct certgen_opts *o)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	char name[CERTGEN_NAME_MAX + 1];
	static const char *const suffixes[] = {"", ".svc", ".svc.cluster.local"};
	size_t i;
	int ok = 0;

	if (!gens)
		return 0;
	/* Labels are capped at 63, so the longest (63+1+63+18) always fits. */
	if (!push_dns(gens, o->service))
		goto out;
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(name, sizeof(name), "%s.%s%s", o->service, o->namespace, suffixes[i]);
		if (!push_dns(gens, name))
			goto out;
	}
	for (i = 0; i < o->n_dns; i++)
		if (!push_dns(gens, o->dns[i]))
			goto out;
	for (i = 0; i < o->n_ip; i++)
		if (!push_ip(gens, o->ip[i]))
			goto out;
	ok = X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, 0) == 1;
out:
	GENERAL_NAMES_free(gens);
	return ok;
}

static int set_serial(X509 *x)
{
	unsigned char b[SERIAL_BYTES];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(b, sizeof(b)) != 1)
		return 0;
	b[0] &= 0x7f; /* positive */
	b[0] |= 0x01; /* and never zero */
	bn = BN_bin2bn(b, sizeof(b), NULL);
	if (!bn)
		return 0;
	ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok;
}

/*
 * One certificate for key, valid for days, signed by (ca, ca_key), or self-signed when ca is
 * NULL. A CA gets basicConstraints CA:TRUE with pathlen 0 and keyCertSign; a leaf gets
 * CA:FALSE, the serving key usages for its key type, serverAuth EKU and the SANs.
 */
static X509 *make_cert(const char *cn, EVP_PKEY *key, int days, X509 *ca, EVP_PKEY *ca_key,
                       const struct certgen_opts *o)
{
	X509 *x = X509_new();
	X509_NAME *name = X509_NAME_new();
	X509V3_CTX ctx;
	int is_ca = ca == NULL;
	int rsa = EVP_PKEY_is_a(key, "RSA");

	if (!x || !name || !X509_set_version(x, 2) || !set_serial(x))
		goto err;
	if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
	                                (const unsigned char *)"gpu-memory-guard", -1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
	                                0) ||
	    !X509_set_subject_name(x, name) ||
	    !X509_set_issuer_name(x, is_ca ? name : X509_get_subject_name(ca)))
		goto err;
	if (!X509_gmtime_adj(X509_getm_notBefore(x), -BACKDATE_SECS) ||
	    !X509_time_adj_ex(X509_getm_notAfter(x), days, 0, NULL) || !X509_set_pubkey(x, key))
		goto err;
	X509V3_set_ctx(&ctx, is_ca ? x : ca, x, NULL, NULL, 0);
	if (is_ca) {
		if (!add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
		    !add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign"))
			goto err;
	} else {
		if (!add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE") ||
		    !add_ext(x, &ctx, NID_key_usage,
		             rsa ? "critical,digitalSignature,keyEncipherment"
		                 : "critical,digitalSignature") ||
		    !add_ext(x, &ctx, NID_ext_key_usage, "serverAuth") || !add_sans(x, o))
			goto err;
	}
	/* The subject key id first: the self-signed CA's authority key id is computed from it. */
	if (!add_ext(x, &ctx, NID_subject_key_identifier, "hash") ||
	    !add_ext(x, &ctx, NID_authority_key_identifier, "keyid:always"))
		goto err;
	if (!X509_sign(x, is_ca ? key : ca_key, EVP_sha256()))
		goto err;
	X509_NAME_free(name);
	return x;
err:
	X509_NAME_free(name);
	X509_free(x);
	return NULL;
}

/* ---- files --------------------------------------------------------------------------- */

struct outfile {
	const char *name;    /* file name within out_dir */
	mode_t mode;         /* 0600 for keys */
	int replace;         /* rename over an existing file (else link: refuse) */
	BIO *pem;            /* contents */
	char path[PATH_MAX]; /* final path */
	char tmp[PATH_MAX];  /* temporary path, "" when none */
	int placed;          /* final name now exists because of this call */
};

static int read_capped(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	size_t n;
	int rc = 0;

	if (!f)
		return fail(err, errlen, CERTGEN_EIO, "%s: %s", path, strerror(errno));
	b = malloc(CERTGEN_PEM_MAX + 1);
	if (!b) {
		rc = fail(err, errlen, CERTGEN_EIO, "%s: out of memory", path);
		goto out;
	}
	n = fread(b, 1, CERTGEN_PEM_MAX + 1, f);
	if (ferror(f)) {
		rc = fail(err, errlen, CERTGEN_EIO, "%s: read error", path);
		goto out;
	}
	if (n > CERTGEN_PEM_MAX) {
		rc = fail(err, errlen, CERTGEN_ERANGE, "%s: larger than %u bytes", path,
		          CERTGEN_PEM_MAX);
		goto out;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	b = NULL;
out:
	free(b);
	fclose(f);
	return rc;
}

static int write_tmp(struct outfile *f, const char *dir, char *err, size_t errlen)
{
	char *data;
	long len = BIO_get_mem_data(f->pem, &data);
	ssize_t w;
	int fd, rc = 0;

	snprintf(f->tmp, sizeof(f->tmp), "%s/.%s.tmp-XXXXXX", dir, f->name);
	fd = mkstemp(f->tmp);
	if (fd < 0) {
		rc = fail(err, errlen, CERTGEN_EIO, "%s: %s", f->tmp, strerror(errno));
		f->tmp[0] = '\0';
		return rc;
	}
	if (fchmod(fd, f->mode) != 0) {
		rc = fail(err, errlen, CERTGEN_EIO, "%s: chmod: %s", f->tmp, strerror(errno));
		goto out;
	}
	while (len > 0) {
		w = write(fd, data, (size_t)len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = fail(err, errlen, CERTGEN_EIO, "%s: write: %s", f->tmp,
			          strerror(errno));
			goto out;
		}
		data += w;
		len -= w;
	}
	if (fsync(fd) != 0)
		rc = fail(err, errlen, CERTGEN_EIO, "%s: fsync: %s", f->tmp, strerror(errno));
out:
	close(fd);
	return rc;
}

/*
 * Put every file in place: all temporaries first (so a full disk fails before anything is
 * replaced), then link (exclusive) or rename (replace). On failure, remove the temporaries and
 * the names this call created.
 */
static int place_files(struct outfile *fs, size_t n, const char *dir, char *err, size_t errlen)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < n && !rc; i++) {
		if ((size_t)snprintf(fs[i].path, sizeof(fs[i].path), "%s/%s", dir, fs[i].name) >=
		    sizeof(fs[i].path))
			rc = fail(err, errlen, CERTGEN_EUSAGE, "--out-dir: path too long");
		else
			rc = write_tmp(&fs[i], dir, err, errlen);
	}
	for (i = 0; i < n && !rc; i++) {
		if (fs[i].replace) {
			if (rename(fs[i].tmp, fs[i].path) != 0)
				rc = fail(err, errlen, CERTGEN_EIO, "%s: %s", fs[i].path,
				          strerror(errno));
			else
				fs[i].tmp[0] = '\0';
			continue;
		}
		if (link(fs[i].tmp, fs[i].path) != 0)
			rc = errno == EEXIST
			         ? fail(err, errlen, CERTGEN_EEXIST,
			                "%s exists (use --force for a new CA, or --renew to "
			                "re-issue the serving pair under the existing CA)",
			                fs[i].path)
			         : fail(err, errlen, CERTGEN_EIO, "%s: %s", fs[i].path,
			                strerror(errno));
		else
			fs[i].placed = 1;
	}
	for (i = 0; i < n; i++) {
		if (fs[i].tmp[0])
			unlink(fs[i].tmp);
		if (rc && fs[i].placed && !fs[i].replace)
			unlink(fs[i].path);
	}
	return rc;
}

static int ensure_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(dir, 0700) == 0)
		return 0;
	if (errno != EEXIST)
		return fail(err, errlen, CERTGEN_EIO, "%s: %s", dir, strerror(errno));
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return fail(err, errlen, CERTGEN_EIO, "%s: not a directory", dir);
	return 0;
}

/* Refuse early, before generating anything, when a name to be created exclusively exists. */
static int check_free(const struct outfile *fs, size_t n, const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX];
	size_t i;

	for (i = 0; i < n; i++) {
		if (fs[i].replace)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, fs[i].name);
		if (access(path, F_OK) == 0)
			return fail(err, errlen, CERTGEN_EEXIST,
			            "%s exists (use --force for a new CA, or --renew to re-issue "
			            "the serving pair under the existing CA)",
			            path);
	}
	return 0;
}

static int bundle_of(const char *pem, size_t len, char *out, size_t out_len, char *err,
                     size_t errlen)
{
	if (len > CERTGEN_PEM_MAX || out_len < 4 * ((len + 2) / 3) + 1)
		return fail(err, errlen, CERTGEN_ERANGE, "caBundle buffer too small");
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)pem, (int)len);
	return 0;
}

/* Load the existing CA pair from dir for --renew. */
static int load_ca(const char *dir, X509 **ca, EVP_PKEY **key, char *err, size_t errlen)
{
	char path[PATH_MAX], *buf = NULL;
	size_t len;
	BIO *b = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/ca.crt", dir);
	rc = read_capped(path, &buf, &len, err, errlen);
	if (rc)
		return rc;
	b = BIO_new_mem_buf(buf, (int)len);
	*ca = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	free(buf);
	if (!*ca)
		return ossl_fail(err, errlen, "--renew: reading ca.crt");
	snprintf(path, sizeof(path), "%s/ca.key", dir);
	rc = read_capped(path, &buf, &len, err, errlen);
	if (rc)
		return rc;
	b = BIO_new_mem_buf(buf, (int)len);
	*key = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	OPENSSL_cleanse(buf, len);
	free(buf);
	if (!*key)
		return ossl_fail(err, errlen, "--renew: reading ca.key");
	if (X509_check_private_key(*ca, *key) != 1)
		return ossl_fail(err, errlen, "--renew: ca.key does not match ca.crt");
	return 0;
}

/* --renew: refuse a serving certificate that would outlive the CA that signs it. */
static int check_ca_outlives(X509 *ca, int days, char *err, size_t errlen)
{
	time_t leaf_end = time(NULL) + (time_t)days * 86400;
	int cmp = X509_cmp_time(X509_get0_notAfter(ca), &leaf_end);

	if (cmp == 0)
		return ossl_fail(err, errlen, "--renew: reading the CA's notAfter");
	if (cmp < 0)
		return fail(err, errlen, CERTGEN_EUSAGE,
		            "--renew: the CA expires before a %d-day serving certificate would; "
		            "make a new CA with --force (the caBundle changes)",
		            days);
	return 0;
}

static BIO *pem_cert(X509 *x)
{
	BIO *b = BIO_new(BIO_s_mem());

	if (b && !PEM_write_bio_X509(b, x)) {
		BIO_free(b);
		return NULL;
	}
	return b;
}

static BIO *pem_key(EVP_PKEY *k)
{
	BIO *b = BIO_new(BIO_s_mem());

	if (b && !PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL)) {
		BIO_free(b);
		return NULL;
	}
	return b;
}

/* The signing CA: loaded from out_dir (--renew) or made new. On failure nothing is left. */
static int obtain_ca(const struct certgen_opts *o, X509 **ca, EVP_PKEY **ca_key, char *err,
                     size_t errlen)
{
	char cn[CERTGEN_NAME_MAX + 1];
	int rc;

	if (o->renew) {
		rc = load_ca(o->out_dir, ca, ca_key, err, errlen);
		if (!rc)
			rc = check_ca_outlives(*ca, o->days, err, errlen);
		goto out;
	}
	*ca_key = new_key(o->key_type);
	if (!*ca_key) {
		rc = ossl_fail(err, errlen, "generating the CA key");
		goto out;
	}
	snprintf(cn, sizeof(cn), "%s-ca", o->service);
	*ca = make_cert(cn, *ca_key, o->ca_days, NULL, NULL, o);
	rc = *ca ? 0 : ossl_fail(err, errlen, "making the CA certificate");
out:
	if (rc) {
		X509_free(*ca);
		EVP_PKEY_free(*ca_key);
		*ca = NULL;
		*ca_key = NULL;
	}
	return rc;
}

/* A new serving key and certificate signed by (ca, ca_key). On failure nothing is left. */
static int issue_leaf(const struct certgen_opts *o, X509 *ca, EVP_PKEY *ca_key, X509 **leaf,
                      EVP_PKEY **key, char *err, size_t errlen)
{
	char cn[CERTGEN_NAME_MAX + 1];

	*key = new_key(o->key_type);
	if (!*key)
		return ossl_fail(err, errlen, "generating the serving key");
	snprintf(cn, sizeof(cn), "%s.%s.svc", o->service, o->namespace);
	*leaf = make_cert(cn, *key, o->days, ca, ca_key, o);
	if (!*leaf) {
		EVP_PKEY_free(*key);
		*key = NULL;
		return ossl_fail(err, errlen, "making the serving certificate");
	}
	return 0;
}

int certgen_generate(const struct certgen_opts *o, char *bundle, size_t bundle_len, char *err,
                     size_t errlen)
{
	struct outfile fs[4] = {
	    {.name = "ca.crt", .mode = 0644, .replace = o->force},
	    {.name = "ca.key", .mode = 0600, .replace = o->force},
	    {.name = "tls.key", .mode = 0600, .replace = o->force || o->renew},
	    {.name = "tls.crt", .mode = 0644, .replace = o->force || o->renew},
	};
	/* With --renew only the serving pair is written, key before certificate. */
	struct outfile *files = o->renew ? fs + 2 : fs;
	size_t nfiles = o->renew ? 2 : 4, i;
	X509 *ca = NULL, *leaf = NULL;
	EVP_PKEY *ca_key = NULL, *key = NULL;
	char *pem;
	long pem_len;
	int rc;

	ERR_clear_error();
	rc = validate(o, err, errlen);
	if (!rc)
		rc = ensure_dir(o->out_dir, err, errlen);
	if (!rc)
		rc = check_free(files, nfiles, o->out_dir, err, errlen);
	if (rc)
		goto out;
	rc = obtain_ca(o, &ca, &ca_key, err, errlen);
	if (!rc)
		rc = issue_leaf(o, ca, ca_key, &leaf, &key, err, errlen);
	if (rc)
		goto out;
	fs[0].pem = pem_cert(ca);
	fs[1].pem = pem_key(ca_key);
	fs[2].pem = pem_key(key);
	fs[3].pem = pem_cert(leaf);
	for (i = 0; i < 4; i++)
		if (!fs[i].pem) {
			rc = ossl_fail(err, errlen, "encoding PEM");
			goto out;
		}
	if (o->renew) {
		/* The caBundle is the bytes already published: ca.crt as it is on disk. */
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/ca.crt", o->out_dir);
		rc = certgen_ca_bundle(path, bundle, bundle_len, err, errlen);
	} else {
		pem_len = BIO_get_mem_data(fs[0].pem, &pem);
		rc = bundle_of(pem, (size_t)pem_len, bundle, bundle_len, err, errlen);
	}
	if (!rc)
		rc = place_files(files, nfiles, o->out_dir, err, errlen);
out:
	for (i = 0; i < 4; i++)
		BIO_free(fs[i].pem);
	X509_free(leaf);
	X509_free(ca);
	EVP_PKEY_free(key);
	EVP_PKEY_free(ca_key);
	return rc;
}

int certgen_ca_bundle(const char *ca_path, char *out, size_t out_len, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len;
	int rc;

	rc = read_capped(ca_path, &buf, &len, err, errlen);
	if (rc)
		return rc;
	if (!strstr(buf, "-----BEGIN CERTIFICATE-----"))
		rc = fail(err, errlen, CERTGEN_ECRYPTO, "%s: no PEM certificate", ca_path);
	else
		rc = bundle_of(buf, len, out, out_len, err, errlen);
	free(buf);
	return rc;
}

int certgen_not_after_pem(const char *pem, size_t len, int64_t *not_after, char *err, size_t errlen)
{
	BIO *b;
	X509 *x = NULL;
	struct tm tm;
	int rc = 0;

	ERR_clear_error();
	if (len > INT_MAX)
		return fail(err, errlen, CERTGEN_ERANGE, "PEM too large");
	b = BIO_new_mem_buf(pem, (int)len);
	if (b)
		x = PEM_read_bio_X509(b, NULL, NULL, NULL);
	if (!x) {
		rc = ossl_fail(err, errlen, "reading certificate");
		goto out;
	}
	memset(&tm, 0, sizeof(tm));
	if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1) {
		rc = ossl_fail(err, errlen, "reading notAfter");
		goto out;
	}
	*not_after = (int64_t)timegm(&tm);
out:
	X509_free(x);
	BIO_free(b);
	return rc;
}

int certgen_not_after_file(const char *pem_path, int64_t *not_after, char *err, size_t errlen)
{
	char *buf = NULL, inner[256];
	size_t len;
	int rc;

	rc = read_capped(pem_path, &buf, &len, err, errlen);
	if (rc)
		return rc;
	rc = certgen_not_after_pem(buf, len, not_after, inner, sizeof(inner));
	if (rc)
		fail(err, errlen, rc, "%s: %s", pem_path, inner);
	free(buf);
	return rc;
}

int certgen_cli(int argc, char **argv, char *out, size_t out_len, char *err, size_t errlen)
{
	struct certgen_opts o;

	if (out && out_len)
		out[0] = '\0';
	if (certgen_parse_args(argc, argv, &o, err, errlen) != 0)
		return CERTGEN_EXIT_USAGE;
	if (o.help) {
		if ((size_t)snprintf(out, out_len, "%s", usage_text) >= out_len) {
			fail(err, errlen, CERTGEN_ERANGE, "usage buffer too small");
			return CERTGEN_EXIT_FAIL;
		}
		return CERTGEN_EXIT_OK;
	}
	switch (certgen_generate(&o, out, out_len, err, errlen)) {
	case 0:
		/* A line of output: the caBundle and a newline, as the usage text ends in one. */
		if (strlen(out) + 2 > out_len) {
			fail(err, errlen, CERTGEN_ERANGE, "output buffer too small");
			return CERTGEN_EXIT_FAIL;
		}
		strcat(out, "\n");
		return CERTGEN_EXIT_OK;
	case CERTGEN_EUSAGE:
		return CERTGEN_EXIT_USAGE;
	default:
		return CERTGEN_EXIT_FAIL;
	}
}
