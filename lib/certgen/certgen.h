/*
 * certgen: the webhook's serving certificate, made in-process with OpenSSL 3.
 *
 * `gpu-memory-guard certs` writes a private CA and a serving certificate signed by it, valid for
 * the names the API server dials: <svc>, <svc>.<ns>, <svc>.<ns>.svc,
 * <svc>.<ns>.svc.cluster.local, plus extra DNS names and IP addresses (clientConfig.url setups
 * dial an IP, and Go verifies IP SANs, not the CN). The caBundle (base64 of ca.crt) goes into the
 * ValidatingWebhookConfiguration.
 *
 * Files in the output directory:
 *   ca.crt  (0644) the CA certificate; its base64 is the caBundle
 *   ca.key  (0600) the CA key, kept so `--renew` can re-issue the serving pair under the same CA
 *                  (caBundle unchanged); keep it out of the cluster Secret
 *   tls.crt (0644) the serving certificate (leaf only)
 *   tls.key (0600) its private key (PKCS#8 PEM)
 * Existing files are never overwritten unless force (or renew, for tls.crt/tls.key). Each file
 * is written to a temporary name in the same directory and then linked (no force: link(2)
 * fails if the name exists, so there is no check-then-write race) or renamed (force) into
 * place: a webhook watching the directory never reads a half-written file.
 *
 * Errors: functions return 0 or a negative CERTGEN_E* code and write one line (with OpenSSL's
 * own message where OpenSSL failed) into the caller's err buffer. lib/ never prints.
 * Thread-safety: the functions share no state; OpenSSL 3 is thread-safe.
 */
#ifndef GMG_CERTGEN_H
#define GMG_CERTGEN_H

#include <stddef.h>
#include <stdint.h>

#define CERTGEN_MAX_DNS         16  /* extra --dns names */
#define CERTGEN_MAX_IP          16  /* extra --ip addresses */
#define CERTGEN_NAME_MAX        253 /* a DNS name, as in RFC 1035 */
#define CERTGEN_LABEL_MAX       63  /* service and namespace names (DNS labels) */
#define CERTGEN_DAYS_MAX        36500
#define CERTGEN_PEM_MAX         (64u * 1024u) /* a PEM file we read back (ca.crt, ca.key) */
#define CERTGEN_BUNDLE_MAX      8192 /* caBundle buffer: base64 of one CA certificate + NUL */
#define CERTGEN_USAGE_MAX       4096 /* certgen_cli's output buffer must hold the usage text */
#define CERTGEN_DEFAULT_SVC     "gpu-memory-guard"
#define CERTGEN_DEFAULT_NS      "gpu-memory-guard"
#define CERTGEN_DEFAULT_DAYS    365
#define CERTGEN_DEFAULT_CA_DAYS 3650

/* Error codes (negative returns). */
#define CERTGEN_EUSAGE  -1 /* bad flags or options */
#define CERTGEN_EEXIST  -2 /* an output file exists and force is off */
#define CERTGEN_EIO     -3 /* file system error */
#define CERTGEN_ECRYPTO -4 /* OpenSSL failed */
#define CERTGEN_ERANGE  -5 /* output buffer too small, or a file over its cap */

/* Process exit statuses of certgen_cli(). */
#define CERTGEN_EXIT_OK    0
#define CERTGEN_EXIT_FAIL  1
#define CERTGEN_EXIT_USAGE 2

enum certgen_key_type { CERTGEN_KEY_ECDSA_P256 = 0, CERTGEN_KEY_RSA_2048 = 1 };

/* What to generate. All strings are borrowed. Fill with certgen_opts_init() first. */
struct certgen_opts {
	const char *service;              /* Service name (DNS label) */
	const char *namespace;            /* its namespace (DNS label) */
	const char *dns[CERTGEN_MAX_DNS]; /* extra DNS SANs */
	size_t n_dns;
	const char *ip[CERTGEN_MAX_IP]; /* extra IP SANs, IPv4 or IPv6 text */
	size_t n_ip;
	int days;    /* serving certificate validity, days (1..CERTGEN_DAYS_MAX) */
	int ca_days; /* CA validity, days; must be >= days */
	enum certgen_key_type key_type; /* for both the CA and the serving key */
	const char *out_dir;            /* created (0700) if missing; its parent must exist */
	int force; /* overwrite all four files, new CA (the caBundle changes) */
	int renew; /* keep ca.crt/ca.key from out_dir; replace tls.crt/tls.key only */
	int help;  /* --help was given (set by certgen_parse_args only) */
};

/* Defaults: service and namespace CERTGEN_DEFAULT_*, days 365, ca_days 3650, ECDSA P-256. */
void certgen_opts_init(struct certgen_opts *o);

/*
 * Parse the `certs` subcommand's flags (argv[0] is the subcommand name and is skipped):
 *   --service NAME --namespace NS --dns NAME (repeatable) --ip ADDR (repeatable) --days N
 *   --ca-days N --key-type ecdsa|rsa --out-dir DIR --force --renew --help
 * Both "--flag value" and "--flag=value". Pure: no I/O. The opts point into argv (borrowed).
 * Returns 0, or CERTGEN_EUSAGE with a one-line reason in err. --out-dir is required unless
 * --help is given; --force and --renew exclude each other.
 */
int certgen_parse_args(int argc, char **argv, struct certgen_opts *o, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Generate the files described above into o->out_dir and write the caBundle (base64 of the
 * ca.crt file's bytes, no newlines, NUL-terminated) into bundle (bundle_len >=
 * CERTGEN_BUNDLE_MAX is always enough). Nothing is written to disk unless every name is free
 * (or force/renew allows replacing it); on failure files this call created are removed.
 * Returns 0 or CERTGEN_EUSAGE (invalid names, days, IPs), CERTGEN_EEXIST, CERTGEN_EIO,
 * CERTGEN_ECRYPTO, CERTGEN_ERANGE, with a reason in err.
 */
int certgen_generate(const struct certgen_opts *o, char *bundle, size_t bundle_len, char *err,
                     size_t errlen) __attribute__((warn_unused_result));

/*
 * The caBundle of a PEM CA file: base64 of its bytes without newlines, NUL-terminated.
 * Returns 0, CERTGEN_EIO, CERTGEN_ERANGE (file over CERTGEN_PEM_MAX or out too small), or
 * CERTGEN_ECRYPTO (the file holds no PEM certificate).
 */
int certgen_ca_bundle(const char *ca_path, char *out, size_t out_len, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * NotAfter of the first certificate in a PEM file, as Unix seconds (UTC). For the
 * gpu_memory_guard_certificate_expiry_timestamp_seconds metric and readiness warnings.
 * Returns 0, CERTGEN_EIO or CERTGEN_ECRYPTO.
 */
int certgen_not_after_file(const char *pem_path, int64_t *not_after, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The same for PEM bytes in memory (len bytes, need not be NUL-terminated). */
int certgen_not_after_pem(const char *pem, size_t len, int64_t *not_after, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * The whole `gpu-memory-guard certs` command, without printing: parse argv (argv[0] = "certs"),
 * generate, and put exactly what stdout should show into out (the caBundle and a newline, or
 * the usage text for --help; out_len >= CERTGEN_USAGE_MAX) and a one-line error (no newline)
 * into err. Returns a process exit
 * status: CERTGEN_EXIT_OK (print out), CERTGEN_EXIT_USAGE (bad flags: print err), or
 * CERTGEN_EXIT_FAIL (generation failed: print err).
 */
int certgen_cli(int argc, char **argv, char *out, size_t out_len, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The usage text of the certs subcommand (static storage). */
const char *certgen_usage(void);

#endif
