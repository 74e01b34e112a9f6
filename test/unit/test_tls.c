/*
 * Unit tests for lib/tls: loading, key/certificate match, reload by path (in-place rewrite and a
 * Secret volume's ..data symlink swap), refusal of a bad pair, the callback, the poller.
 * Pairs are made in-process with lib/certgen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "certgen.h"
#include "log.h"
#include "metrics.h"
#include "tls.h"

struct fx {
	char dir[64];
	char cert[128], key[128];
	struct metrics *m;
};

static void run(const char *cmd)
{
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

/* Generate a pair into dir/name (ca.crt, tls.crt, tls.key). */
static void make_pair(const char *dir, const char *name, enum certgen_key_type type)
{
	struct certgen_opts o;
	char out[256], bundle[CERTGEN_BUNDLE_MAX], err[512];
	snprintf(out, sizeof(out), "%s/%s", dir, name);
	certgen_opts_init(&o);
	o.out_dir = out;
	o.key_type = type;
	o.ip[o.n_ip++] = "127.0.0.1";
	if (certgen_generate(&o, bundle, sizeof(bundle), err, sizeof(err)) != 0)
		fail_msg("certgen: %s", err);
}

static void copy(const char *from, const char *to)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	run(cmd);
}

static int setup(void **state)
{
	static int devnull = -1;
	struct fx *f = calloc(1, sizeof(*f));
	if (devnull < 0)
		devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	log_set_fd(devnull);
	snprintf(f->dir, sizeof(f->dir), "/tmp/gmg-tls-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	make_pair(f->dir, "a", CERTGEN_KEY_ECDSA_P256);
	make_pair(f->dir, "b", CERTGEN_KEY_RSA_2048);
	snprintf(f->cert, sizeof(f->cert), "%s/tls.crt", f->dir);
	snprintf(f->key, sizeof(f->key), "%s/tls.key", f->dir);
	char p[256];
	snprintf(p, sizeof(p), "%s/a/tls.crt", f->dir);
	copy(p, f->cert);
	snprintf(p, sizeof(p), "%s/a/tls.key", f->dir);
	copy(p, f->key);
	f->m = metrics_new();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	run(cmd);
	metrics_free(f->m);
	free(f);
	return 0;
}

static void use_pair(struct fx *f, const char *name)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s/tls.crt", f->dir, name);
	copy(p, f->cert);
	snprintf(p, sizeof(p), "%s/%s/tls.key", f->dir, name);
	copy(p, f->key);
}

static int metric(struct metrics *m, const char *line)
{
	char *text;
	size_t len;
	assert_int_equal(metrics_render(m, &text, &len), 0);
	int found = strstr(text, line) != NULL;
	free(text);
	return found;
}

/* What the handshake would be served: the callback's chain. */
static const gnutls_datum_t *served_leaf(void)
{
	gnutls_pcert_st *pcert = NULL;
	unsigned n = 0;
	gnutls_privkey_t key = NULL;
	if (tls_cert_callback(NULL, NULL, 0, NULL, 0, &pcert, &n, &key) != 0)
		return NULL;
	assert_true(n >= 1);
	assert_non_null(key);
	return &pcert[0].cert;
}

static void test_expiry_warning(void **state)
{
	char buf[160];
	const int64_t day = 86400, now = 1800000000; /* 2027-01-15T08:00:00Z */
	(void)state;
	assert_int_equal(tls_expiry_warning(now + 60 * day, now, 30 * day, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	assert_int_equal(tls_expiry_warning(now + 12 * day, now, 30 * day, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "the serving certificate expires in 12 days "
	                         "(2027-01-27T08:00:00Z): renew it");
	assert_int_equal(tls_expiry_warning(now - 1, now, 30 * day, buf, sizeof(buf)), 1);
	assert_non_null(strstr(buf, "expired at 2027-01-15T07:59:59Z"));
	/* 0 disables; an unknown NotAfter never warns */
	assert_int_equal(tls_expiry_warning(now + day, now, 0, buf, sizeof(buf)), 0);
	assert_int_equal(tls_expiry_warning(0, now, 30 * day, buf, sizeof(buf)), 0);
}

static void test_load_and_serve(void **state)
{
	struct fx *f = *state;
	char err[TLS_ERR_MAX];
	struct tls_store *s = tls_store_new(f->cert, f->key, f->m, err, sizeof(err));
	if (s == NULL)
		fail_msg("%s", err);
	assert_int_equal(tls_store_generations(s), 1);
	assert_true(tls_store_not_after(s) > 0);
	assert_true(metric(f->m, "reloads_total{result=\"success\"} 1\n"));
	char want[96];
	snprintf(want, sizeof(want), "expiry_timestamp_seconds %lld\n",
	         (long long)tls_store_not_after(s));
	assert_true(metric(f->m, want));
	tls_store_activate(NULL);
	assert_null(served_leaf());
	tls_store_activate(s);
	assert_non_null(served_leaf());
	assert_int_equal(tls_store_reload(s, err, sizeof(err)), TLS_UNCHANGED);
	tls_store_free(s);
	assert_null(served_leaf()); /* freeing the active store deactivates it */
}

static void test_refuses_bad_first_pair(void **state)
{
	struct fx *f = *state;
	char err[TLS_ERR_MAX], p[256];
	snprintf(p, sizeof(p), "%s/b/tls.key", f->dir);
	assert_null(tls_store_new(f->cert, p, f->m, err, sizeof(err)));
	assert_non_null(strstr(err, "does not belong to the certificate"));
	assert_null(tls_store_new("/nonexistent/tls.crt", f->key, f->m, err, sizeof(err)));
	assert_non_null(strstr(err, "--tls-cert-file /nonexistent/tls.crt"));
	snprintf(p, sizeof(p), "%s/a/ca.crt", f->dir); /* a certificate is not a key */
	assert_null(tls_store_new(f->cert, p, f->m, err, sizeof(err)));
	assert_non_null(strstr(err, "--tls-key-file"));
	snprintf(p, sizeof(p), "%s/tls.key", f->dir); /* a key is not a certificate */
	assert_null(tls_store_new(p, f->key, f->m, err, sizeof(err)));
	assert_non_null(strstr(err, "certificate"));
}

static void test_reload_in_place_and_refusal(void **state)
{
	struct fx *f = *state;
	char err[TLS_ERR_MAX], p[256];
	struct tls_store *s = tls_store_new(f->cert, f->key, f->m, err, sizeof(err));
	assert_non_null(s);
	tls_store_activate(s);
	const gnutls_datum_t *leaf_a = served_leaf();
	use_pair(f, "b");
	assert_int_equal(tls_store_reload(s, err, sizeof(err)), TLS_RELOADED);
	assert_int_equal(tls_store_generations(s), 2);
	const gnutls_datum_t *leaf_b = served_leaf();
	assert_true(leaf_a->size != leaf_b->size ||
	            memcmp(leaf_a->data, leaf_b->data, leaf_a->size) != 0);
	/* The retired generation is still valid memory (sessions may hold it). */
	assert_true(leaf_a->size > 0 && leaf_a->data[0] == 0x30);

	/* A new certificate with the old key: refused, b keeps serving, counted once. */
	snprintf(p, sizeof(p), "%s/a/tls.crt", f->dir);
	copy(p, f->cert);
	assert_int_equal(tls_store_reload(s, err, sizeof(err)), TLS_EMISMATCH);
	assert_int_equal(tls_store_reload(s, err, sizeof(err)), TLS_EMISMATCH);
	assert_true(metric(f->m, "reloads_total{result=\"failure\"} 1\n"));
	assert_ptr_equal(served_leaf(), leaf_b);
	/* Garbage: refused. */
	FILE *fp = fopen(f->cert, "w");
	fputs("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", fp);
	fclose(fp);
	assert_int_equal(tls_store_reload(s, err, sizeof(err)), TLS_ECERT);
	assert_true(metric(f->m, "reloads_total{result=\"failure\"} 2\n"));
	/* A missing file: refused, reported once. */
	unlink(f->cert);
	assert_int_equal(tls_store_reload(s, err, sizeof(err)), TLS_EIO);
	assert_int_equal(tls_store_reload(s, err, sizeof(err)), TLS_EIO);
	assert_true(metric(f->m, "reloads_total{result=\"failure\"} 3\n"));
	/* The good pair a again: served. */
	use_pair(f, "a");
	assert_int_equal(tls_store_reload(s, err, sizeof(err)), TLS_RELOADED);
	assert_int_equal(tls_store_generations(s), 3);
	assert_true(metric(f->m, "reloads_total{result=\"success\"} 3\n"));
	tls_store_free(s);
}

/* The kubelet's Secret volume: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>, and an
 * update is one rename of ..data. The poller follows it by path. */
static void test_symlink_swap_with_poller(void **state)
{
	struct fx *f = *state;
	char err[TLS_ERR_MAX], cmd[1024], cert[128], key[128];
	snprintf(cmd, sizeof(cmd),
	         "cd '%s' && mkdir vol && cp -r a vol/..2026_a && ln -s ..2026_a vol/..data && "
	         "ln -s ..data/tls.crt vol/tls.crt && ln -s ..data/tls.key vol/tls.key",
	         f->dir);
	run(cmd);
	snprintf(cert, sizeof(cert), "%s/vol/tls.crt", f->dir);
	snprintf(key, sizeof(key), "%s/vol/tls.key", f->dir);
	struct tls_store *s = tls_store_new(cert, key, f->m, err, sizeof(err));
	assert_non_null(s);
	assert_int_equal(tls_store_start(s, 20), 0);
	snprintf(cmd, sizeof(cmd),
	         "cd '%s' && cp -r b vol/..2026_b && ln -s ..2026_b vol/..data_tmp && "
	         "mv -T vol/..data_tmp vol/..data && rm -rf vol/..2026_a",
	         f->dir);
	run(cmd);
	for (int i = 0; i < 200 && tls_store_generations(s) < 2; i++)
		usleep(10000);
	assert_int_equal(tls_store_generations(s), 2);
	tls_store_stop(s);
	tls_store_stop(s); /* idempotent */
	tls_store_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_expiry_warning),
	    cmocka_unit_test_setup_teardown(test_load_and_serve, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refuses_bad_first_pair, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reload_in_place_and_refusal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_symlink_swap_with_poller, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
