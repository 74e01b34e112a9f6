/*
 * certgen: generate into a temporary directory and check the result with OpenSSL itself:
 * chain verification, SANs, EKU, validity, file modes, refusal to overwrite, --force, --renew,
 * flag parsing, NotAfter and caBundle.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certgen.h"

struct fixture {
	char dir[256];
	char out[300];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s/gmg-certgen-XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	/* A subdirectory that does not exist yet: certgen must create it. */
	snprintf(f->out, sizeof(f->out), "%s/out", f->dir);
	*state = f;
	return 0;
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[600];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (e->d_type == DT_DIR)
			rm_tree(p);
		else
			unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rm_tree(f->dir);
	free(f);
	return 0;
}

static X509 *load_cert(const char *dir, const char *name)
{
	char p[600];
	FILE *fp;
	X509 *x;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fp = fopen(p, "r");
	assert_non_null(fp);
	x = PEM_read_X509(fp, NULL, NULL, NULL);
	fclose(fp);
	assert_non_null(x);
	return x;
}

static EVP_PKEY *load_key(const char *dir, const char *name)
{
	char p[600];
	FILE *fp;
	EVP_PKEY *k;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fp = fopen(p, "r");
	assert_non_null(fp);
	k = PEM_read_PrivateKey(fp, NULL, NULL, NULL);
	fclose(fp);
	assert_non_null(k);
	return k;
}

static char *slurp(const char *dir, const char *name, size_t *len)
{
	char p[600], *b = malloc(CERTGEN_PEM_MAX);
	FILE *fp;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fp = fopen(p, "rb");
	assert_non_null(fp);
	assert_non_null(b);
	*len = fread(b, 1, CERTGEN_PEM_MAX - 1, fp);
	b[*len] = '\0';
	fclose(fp);
	return b;
}

static mode_t mode_of(const char *dir, const char *name)
{
	char p[600];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	assert_int_equal(stat(p, &st), 0);
	return st.st_mode & 0777;
}

static int gen(struct fixture *f, struct certgen_opts *o, char *bundle, char *err)
{
	o->out_dir = f->out;
	return certgen_generate(o, bundle, CERTGEN_BUNDLE_MAX, err, 512);
}

/* X509_verify_cert against ca.crt alone, for the serverAuth purpose. */
static int verify_chain(X509 *ca, X509 *leaf)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	int ok;

	assert_non_null(store);
	assert_non_null(ctx);
	assert_int_equal(X509_STORE_add_cert(store, ca), 1);
	assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
	X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
	ok = X509_verify_cert(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	return ok;
}

static void test_generate_defaults(void **state)
{
	struct fixture *f = *state;
	struct certgen_opts o;
	char bundle[CERTGEN_BUNDLE_MAX], err[512];
	X509 *ca, *leaf;
	EVP_PKEY *key;
	const char *names[] = {"gpu-memory-guard", "gpu-memory-guard.gpu-memory-guard",
	                       "gpu-memory-guard.gpu-memory-guard.svc",
	                       "gpu-memory-guard.gpu-memory-guard.svc.cluster.local"};
	size_t i;

	certgen_opts_init(&o);
	assert_int_equal(gen(f, &o, bundle, err), 0);
	assert_int_equal(mode_of(f->out, "tls.key"), 0600);
	assert_int_equal(mode_of(f->out, "ca.key"), 0600);
	assert_int_equal(mode_of(f->out, "tls.crt"), 0644);
	assert_int_equal(mode_of(f->dir, "out"), 0700);

	ca = load_cert(f->out, "ca.crt");
	leaf = load_cert(f->out, "tls.crt");
	key = load_key(f->out, "tls.key");
	assert_int_equal(verify_chain(ca, leaf), 1);
	assert_int_equal(X509_check_private_key(leaf, key), 1);
	assert_true(EVP_PKEY_is_a(key, "EC"));
	assert_int_equal(X509_check_ca(ca), 1);
	assert_int_equal(X509_check_ca(leaf), 0);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_int_equal(X509_check_host(leaf, names[i], 0, 0, NULL), 1);
	assert_int_equal(X509_check_host(leaf, "other.gpu-memory-guard.svc", 0, 0, NULL), 0);
	/* EKU serverAuth only. */
	assert_true(X509_get_extension_flags(leaf) & EXFLAG_XKUSAGE);
	assert_true(X509_get_extended_key_usage(leaf) & XKU_SSL_SERVER);
	assert_false(X509_get_extended_key_usage(leaf) & XKU_SSL_CLIENT);
	X509_free(ca);
	X509_free(leaf);
	EVP_PKEY_free(key);
}

static void test_extra_names_validity_rsa(void **state)
{
	struct fixture *f = *state;
	struct certgen_opts o;
	char bundle[CERTGEN_BUNDLE_MAX], err[512];
	X509 *ca, *leaf;
	EVP_PKEY *key;
	time_t now = time(NULL), t, done;
	int64_t na;
	char p[600];

	certgen_opts_init(&o);
	o.service = "guard";
	o.namespace = "ops";
	o.dns[o.n_dns++] = "webhook.example.test";
	o.ip[o.n_ip++] = "127.0.0.1";
	o.ip[o.n_ip++] = "::1";
	o.days = 30;
	o.ca_days = 60;
	o.key_type = CERTGEN_KEY_RSA_2048;
	assert_int_equal(gen(f, &o, bundle, err), 0);
	done = time(NULL); /* two RSA keys: seconds under ASan on a loaded machine */
	ca = load_cert(f->out, "ca.crt");
	leaf = load_cert(f->out, "tls.crt");
	key = load_key(f->out, "tls.key");
	assert_true(EVP_PKEY_is_a(key, "RSA"));
	assert_int_equal(EVP_PKEY_get_bits(key), 2048);
	assert_int_equal(verify_chain(ca, leaf), 1);
	assert_int_equal(X509_check_host(leaf, "guard.ops.svc", 0, 0, NULL), 1);
	assert_int_equal(X509_check_host(leaf, "guard.ops.svc.cluster.local", 0, 0, NULL), 1);
	assert_int_equal(X509_check_host(leaf, "webhook.example.test", 0, 0, NULL), 1);
	assert_int_equal(X509_check_ip_asc(leaf, "127.0.0.1", 0), 1);
	assert_int_equal(X509_check_ip_asc(leaf, "::1", 0), 1);
	assert_int_equal(X509_check_ip_asc(leaf, "127.0.0.2", 0), 0);

	/* Valid now, not after 30 days (+ a minute), valid at 29 days. */
	t = now;
	assert_true(X509_cmp_time(X509_get0_notBefore(leaf), &t) < 0);
	t = now + 29 * 86400;
	assert_true(X509_cmp_time(X509_get0_notAfter(leaf), &t) > 0);
	t = now + 30 * 86400 + 60;
	assert_true(X509_cmp_time(X509_get0_notAfter(leaf), &t) < 0);
	t = now + 59 * 86400;
	assert_true(X509_cmp_time(X509_get0_notAfter(ca), &t) > 0);

	snprintf(p, sizeof(p), "%s/tls.crt", f->out);
	assert_int_equal(certgen_not_after_file(p, &na, err, sizeof(err)), 0);
	/* 30 days from when it was made, between the call and its return (5 s slack each way) */
	assert_true(na >= (int64_t)now + 30 * 86400 - 5 && na <= (int64_t)done + 30 * 86400 + 5);
	X509_free(ca);
	X509_free(leaf);
	EVP_PKEY_free(key);
}

static void test_bundle_is_base64_of_ca(void **state)
{
	struct fixture *f = *state;
	struct certgen_opts o;
	char bundle[CERTGEN_BUNDLE_MAX], again[CERTGEN_BUNDLE_MAX], err[512], p[600];
	unsigned char decoded[CERTGEN_BUNDLE_MAX];
	size_t len;
	char *pem;
	int n;

	certgen_opts_init(&o);
	assert_int_equal(gen(f, &o, bundle, err), 0);
	assert_null(strchr(bundle, '\n'));
	pem = slurp(f->out, "ca.crt", &len);
	n = EVP_DecodeBlock(decoded, (const unsigned char *)bundle, (int)strlen(bundle));
	/* EVP_DecodeBlock counts '=' padding as zero bytes. */
	assert_true(n >= (int)len && n <= (int)len + 2);
	assert_memory_equal(decoded, pem, len);
	snprintf(p, sizeof(p), "%s/ca.crt", f->out);
	assert_int_equal(certgen_ca_bundle(p, again, sizeof(again), err, sizeof(err)), 0);
	assert_string_equal(bundle, again);
	assert_int_equal(certgen_ca_bundle(p, again, 16, err, sizeof(err)), CERTGEN_ERANGE);
	free(pem);
}

static void test_refuses_overwrite_then_force(void **state)
{
	struct fixture *f = *state;
	struct certgen_opts o;
	char b1[CERTGEN_BUNDLE_MAX], b2[CERTGEN_BUNDLE_MAX], err[512];
	char *before, *after;
	size_t l1, l2;

	certgen_opts_init(&o);
	assert_int_equal(gen(f, &o, b1, err), 0);
	before = slurp(f->out, "tls.key", &l1);
	assert_int_equal(gen(f, &o, b2, err), CERTGEN_EEXIST);
	assert_non_null(strstr(err, "exists"));
	assert_non_null(strstr(err, "--force"));
	after = slurp(f->out, "tls.key", &l2);
	assert_int_equal(l1, l2);
	assert_memory_equal(before, after, l1);
	free(after);

	o.force = 1;
	assert_int_equal(gen(f, &o, b2, err), 0);
	assert_string_not_equal(b1, b2); /* a new CA */
	after = slurp(f->out, "tls.key", &l2);
	assert_false(l1 == l2 && !memcmp(before, after, l1));
	assert_int_equal(mode_of(f->out, "tls.key"), 0600);
	free(before);
	free(after);
}

/* One file in the way: nothing else is written, no temporary is left behind. */
static void test_partial_conflict_writes_nothing(void **state)
{
	struct fixture *f = *state;
	struct certgen_opts o;
	char b[CERTGEN_BUNDLE_MAX], err[512], p[600];
	DIR *d;
	struct dirent *e;
	int entries = 0;
	FILE *fp;

	assert_int_equal(mkdir(f->out, 0700), 0);
	snprintf(p, sizeof(p), "%s/tls.crt", f->out);
	fp = fopen(p, "w");
	assert_non_null(fp);
	fputs("mine\n", fp);
	fclose(fp);
	certgen_opts_init(&o);
	assert_int_equal(gen(f, &o, b, err), CERTGEN_EEXIST);
	d = opendir(f->out);
	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			entries++;
		else if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			fail_msg("leftover %s", e->d_name);
	closedir(d);
	assert_int_equal(entries, 1);
}

static void test_renew_keeps_ca(void **state)
{
	struct fixture *f = *state;
	struct certgen_opts o;
	char b1[CERTGEN_BUNDLE_MAX], b2[CERTGEN_BUNDLE_MAX], err[512];
	X509 *ca, *leaf1, *leaf2;

	certgen_opts_init(&o);
	assert_int_equal(gen(f, &o, b1, err), 0);
	leaf1 = load_cert(f->out, "tls.crt");
	o.renew = 1;
	o.ip[o.n_ip++] = "127.0.0.1";
	assert_int_equal(gen(f, &o, b2, err), 0);
	assert_string_equal(b1, b2);
	ca = load_cert(f->out, "ca.crt");
	leaf2 = load_cert(f->out, "tls.crt");
	assert_int_not_equal(X509_cmp(leaf1, leaf2), 0);
	assert_int_equal(verify_chain(ca, leaf2), 1);
	assert_int_equal(X509_check_ip_asc(leaf2, "127.0.0.1", 0), 1);

	/* A serving certificate may not outlive the CA. */
	o.days = CERTGEN_DEFAULT_CA_DAYS + 10;
	assert_int_equal(gen(f, &o, b2, err), CERTGEN_EUSAGE);
	assert_non_null(strstr(err, "CA expires"));
	X509_free(ca);
	X509_free(leaf1);
	X509_free(leaf2);
}

static void test_renew_without_ca(void **state)
{
	struct fixture *f = *state;
	struct certgen_opts o;
	char b[CERTGEN_BUNDLE_MAX], err[512];

	certgen_opts_init(&o);
	o.renew = 1;
	assert_int_equal(gen(f, &o, b, err), CERTGEN_EIO);
	assert_non_null(strstr(err, "ca.crt"));
}

static void test_invalid_options(void **state)
{
	struct fixture *f = *state;
	struct certgen_opts o;
	char b[CERTGEN_BUNDLE_MAX], err[512];

	certgen_opts_init(&o);
	o.service = "Bad_Name";
	assert_int_equal(gen(f, &o, b, err), CERTGEN_EUSAGE);
	assert_non_null(strstr(err, "--service"));

	certgen_opts_init(&o);
	o.dns[o.n_dns++] = "a,b";
	assert_int_equal(gen(f, &o, b, err), CERTGEN_EUSAGE);

	certgen_opts_init(&o);
	o.ip[o.n_ip++] = "300.1.1.1";
	assert_int_equal(gen(f, &o, b, err), CERTGEN_EUSAGE);
	assert_non_null(strstr(err, "--ip"));

	certgen_opts_init(&o);
	o.days = 400;
	o.ca_days = 300;
	assert_int_equal(gen(f, &o, b, err), CERTGEN_EUSAGE);
	assert_non_null(strstr(err, "--ca-days"));
	assert_int_equal(access(f->out, F_OK), -1); /* nothing created on bad input */
}

static void test_parse_args(void **state)
{
	struct certgen_opts o;
	char err[512];
	char *ok[] = {
	    "certs",      "--service", "svc",       "--namespace=ns", "--dns",  "a.example",
	    "--dns=b",    "--ip",      "10.0.0.1",  "--days",         "7",      "--ca-days=70",
	    "--key-type", "rsa",       "--out-dir", "/tmp/x",         "--force"};
	char *help[] = {"certs", "--help"};
	char *no_out[] = {"certs", "--days", "7"};
	char *bad_days[] = {"certs", "--out-dir", "d", "--days", "7x"};
	char *zero_days[] = {"certs", "--out-dir", "d", "--days=0"};
	char *unknown[] = {"certs", "--out-dir", "d", "--bogus"};
	char *missing[] = {"certs", "--out-dir"};
	char *unknown_last[] = {"certs", "--bogus"};
	char *both[] = {"certs", "--out-dir", "d", "--force", "--renew"};
	char *positional[] = {"certs", "extra"};
	char *flag_val[] = {"certs", "--out-dir", "d", "--force=yes"};
	char *bad_key[] = {"certs", "--out-dir", "d", "--key-type", "dsa"};

	(void)state;
	assert_int_equal(certgen_parse_args(17, ok, &o, err, sizeof(err)), 0);
	assert_string_equal(o.service, "svc");
	assert_string_equal(o.namespace, "ns");
	assert_int_equal(o.n_dns, 2);
	assert_string_equal(o.dns[1], "b");
	assert_int_equal(o.n_ip, 1);
	assert_int_equal(o.days, 7);
	assert_int_equal(o.ca_days, 70);
	assert_int_equal(o.key_type, CERTGEN_KEY_RSA_2048);
	assert_string_equal(o.out_dir, "/tmp/x");
	assert_true(o.force);
	assert_false(o.renew);

	assert_int_equal(certgen_parse_args(2, help, &o, err, sizeof(err)), 0);
	assert_true(o.help);
	assert_int_equal(certgen_parse_args(3, no_out, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_non_null(strstr(err, "--out-dir"));
	assert_int_equal(certgen_parse_args(5, bad_days, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_int_equal(certgen_parse_args(4, zero_days, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_int_equal(certgen_parse_args(4, unknown, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_non_null(strstr(err, "--bogus"));
	assert_int_equal(certgen_parse_args(2, missing, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_int_equal(certgen_parse_args(2, unknown_last, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_non_null(strstr(err, "unknown flag --bogus"));
	assert_int_equal(certgen_parse_args(5, both, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_int_equal(certgen_parse_args(2, positional, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_int_equal(certgen_parse_args(4, flag_val, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_int_equal(certgen_parse_args(5, bad_key, &o, err, sizeof(err)), CERTGEN_EUSAGE);
	assert_null(strchr(err, '\n')); /* one-line errors */
}

static void test_cli(void **state)
{
	struct fixture *f = *state;
	char out[CERTGEN_USAGE_MAX], err[512];
	char *help[] = {"certs", "--help"};
	char *bad[] = {"certs", "--nope"};
	char *run[] = {"certs", "--out-dir", f->out, "--ip", "127.0.0.1"};

	assert_int_equal(certgen_cli(2, help, out, sizeof(out), err, sizeof(err)), CERTGEN_EXIT_OK);
	assert_non_null(strstr(out, "--out-dir"));
	assert_int_equal(certgen_cli(2, bad, out, sizeof(out), err, sizeof(err)),
	                 CERTGEN_EXIT_USAGE);
	assert_int_equal(certgen_cli(5, run, out, sizeof(out), err, sizeof(err)), CERTGEN_EXIT_OK);
	assert_true(strlen(out) > 100);
	assert_non_null(strchr(out, '\n'));
	assert_true(strchr(out, '\n') == out + strlen(out) - 1); /* one line */
	assert_int_equal(certgen_cli(5, run, out, sizeof(out), err, sizeof(err)),
	                 CERTGEN_EXIT_FAIL);
	assert_non_null(strstr(err, "exists"));
}

static void test_not_after_errors(void **state)
{
	int64_t na;
	char err[512];

	(void)state;
	assert_int_equal(certgen_not_after_pem("garbage", 7, &na, err, sizeof(err)),
	                 CERTGEN_ECRYPTO);
	/* OpenSSL's own message is carried through. */
	assert_non_null(strstr(err, "error:"));
	assert_int_equal(certgen_not_after_file("/nonexistent/x.pem", &na, err, sizeof(err)),
	                 CERTGEN_EIO);
	assert_non_null(strstr(err, "/nonexistent/x.pem"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_generate_defaults, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_extra_names_validity_rsa, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bundle_is_base64_of_ca, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refuses_overwrite_then_force, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_partial_conflict_writes_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_renew_keeps_ca, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_renew_without_ca, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_invalid_options, setup, teardown),
	    cmocka_unit_test(test_parse_args),
	    cmocka_unit_test_setup_teardown(test_cli, setup, teardown),
	    cmocka_unit_test(test_not_after_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
