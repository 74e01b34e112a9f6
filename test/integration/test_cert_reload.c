/*
 * Serving certificate replaced on disk while the real binary runs: the new one is served
 * without a restart (checked by the served leaf's serial and NotAfter), including a Secret
 * volume's ..data symlink swap; an invalid new pair is refused and the old one kept.
 *
 * --tls-reload-interval 200ms keeps the waits short; each wait is bounded (15 s).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <openssl/ssl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "itest.h"

#define WAIT_S 15.0

static struct world W;
static const char *const EXTRA[] = {"--tls-reload-interval", "200ms", NULL};

static int setup(void **state)
{
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	return 0;
}

static int teardown(void **state)
{
	world_free(&W);
	return 0;
}

static long served_serial(long long *not_after)
{
	long serial = -1;
	char err[256];
	if (harness_tls_probe(W.port, TLS1_2_VERSION, TLS1_3_VERSION, &serial, not_after, err,
	                      sizeof err))
		return -1;
	return serial;
}

/* Poll until the served serial is `want`; returns it (or the last one seen). */
static long wait_serial(long want)
{
	double until = harness_now() + WAIT_S;
	long s = -1;
	while (harness_now() < until) {
		s = served_serial(NULL);
		if (s == want)
			break;
		usleep(100 * 1000);
	}
	return s;
}

static double metric(const char *name, const char *label)
{
	char *m = NULL;
	double v;
	if (world_health_get(&W, "/metrics", &m) != 200) {
		free(m);
		return -1;
	}
	v = harness_metric(m, name, label, 1);
	free(m);
	return v;
}

/* Same process, and a verified HTTPS review still works (the new cert chains to the CA). */
static void check_same_process_serving(pid_t pid)
{
	struct review_answer a;
	ITEST_CHECK(W.pid == pid && kill(pid, 0) == 0, "the binary was restarted or died");
	itest_review(&W, "{\"request\":{\"uid\":\"after-reload\"}}", "after-reload", 1, &a);
}

static void test_replace_files(void **state)
{
	struct testcert *next = testcert_new_server(W.ca, "gpu-memory-guard", 2001, 10L * 86400);
	long long na = 0;
	long s;
	pid_t pid;
	double expiry;
	ITEST_CHECK(world_start_gmg(&W, EXTRA, 30000) == 0, "start");
	pid = W.pid;
	ITEST_CHECK(served_serial(NULL) == 1000, "initial serial");
	ITEST_CHECK(next && testcert_write(next, W.cert_file, W.key_file) == 0, "write new pair");
	s = wait_serial(2001);
	ITEST_CHECK(s == 2001, "served serial %ld after replacing the files, expected 2001", s);
	served_serial(&na);
	ITEST_CHECK(na > time(NULL) + 9L * 86400 && na < time(NULL) + 11L * 86400,
	            "served NotAfter %lld is not the new certificate's", na);
	check_same_process_serving(pid);
	expiry = metric("gpu_memory_guard_certificate_expiry_timestamp_seconds", NULL);
	ITEST_CHECK((long long)expiry == na, "certificate expiry metric %.0f, served NotAfter %lld",
	            expiry, na);
	ITEST_CHECK(metric("gpu_memory_guard_certificate_reloads_total", "result=\"success\"") >= 1,
	            "no successful reload counted");
	testcert_free(next);
}

/* kubelet's atomic writer: ..data -> ..TIMESTAMP dir; tls.crt -> ..data/tls.crt. */
static int secret_write(const char *dir, const char *gen, const struct testcert *c)
{
	char d[HARNESS_PATHMAX + 64], crt[HARNESS_PATHMAX + 96], key[HARNESS_PATHMAX + 96],
	    tmp[HARNESS_PATHMAX + 64], data[HARNESS_PATHMAX + 64];
	snprintf(d, sizeof d, "%s/%s", dir, gen);
	snprintf(crt, sizeof crt, "%s/tls.crt", d);
	snprintf(key, sizeof key, "%s/tls.key", d);
	snprintf(tmp, sizeof tmp, "%s/..data_tmp", dir);
	snprintf(data, sizeof data, "%s/..data", dir);
	if (mkdir(d, 0700) || testcert_write(c, crt, key))
		return -1;
	unlink(tmp);
	if (symlink(gen, tmp) || rename(tmp, data))
		return -1;
	return 0;
}

static void test_secret_volume_symlink_swap(void **state)
{
	char dir[300], link[HARNESS_PATHMAX - 8], old[HARNESS_PATHMAX + 64];
	struct testcert *next = testcert_new_server(W.ca, "gpu-memory-guard", 3001, 20L * 86400);
	long s;
	long long na = 0;
	pid_t pid;
	snprintf(dir, sizeof dir, "%s/secret", W.dir);
	ITEST_CHECK(mkdir(dir, 0700) == 0, "mkdir secret");
	ITEST_CHECK(secret_write(dir, "..2026_11_29_10_00_00.000000001", W.webhook_cert) == 0,
	            "first generation");
	snprintf(link, sizeof link, "%s/tls.crt", dir);
	ITEST_CHECK(symlink("..data/tls.crt", link) == 0, "tls.crt link");
	snprintf(W.cert_file, sizeof W.cert_file, "%s", link);
	snprintf(link, sizeof link, "%s/tls.key", dir);
	ITEST_CHECK(symlink("..data/tls.key", link) == 0, "tls.key link");
	snprintf(W.key_file, sizeof W.key_file, "%s", link);
	ITEST_CHECK(world_start_gmg(&W, EXTRA, 30000) == 0, "start");
	pid = W.pid;
	ITEST_CHECK(served_serial(NULL) == 1000, "initial serial");
	ITEST_CHECK(next && secret_write(dir, "..2026_11_29_11_00_00.000000002", next) == 0,
	            "swap ..data");
	/* The kubelet then removes the old generation. */
	snprintf(old, sizeof old, "%s/..2026_11_29_10_00_00.000000001/tls.crt", dir);
	unlink(old);
	snprintf(old, sizeof old, "%s/..2026_11_29_10_00_00.000000001/tls.key", dir);
	unlink(old);
	snprintf(old, sizeof old, "%s/..2026_11_29_10_00_00.000000001", dir);
	rmdir(old);
	s = wait_serial(3001);
	ITEST_CHECK(s == 3001, "served serial %ld after the ..data swap, expected 3001", s);
	served_serial(&na);
	ITEST_CHECK(na > time(NULL) + 19L * 86400 && na < time(NULL) + 21L * 86400,
	            "served NotAfter %lld is not the new certificate's", na);
	check_same_process_serving(pid);
	testcert_free(next);
}

static void wait_failures_above(double before)
{
	double until = harness_now() + WAIT_S, f = before;
	while (harness_now() < until) {
		f = metric("gpu_memory_guard_certificate_reloads_total", "result=\"failure\"");
		if (f > before)
			break;
		usleep(100 * 1000);
	}
	ITEST_CHECK(f > before, "the invalid pair was never tried (failures %.0f)", f);
}

static void test_invalid_pair_keeps_old(void **state)
{
	struct testcert *a = testcert_new_server(W.ca, "gpu-memory-guard", 4001, 86400);
	struct testcert *b = testcert_new_server(W.ca, "gpu-memory-guard", 4002, 86400);
	double failures;
	long s;
	pid_t pid;
	FILE *f;
	ITEST_CHECK(a && b, "certs");
	ITEST_CHECK(world_start_gmg(&W, EXTRA, 30000) == 0, "start");
	pid = W.pid;
	failures = metric("gpu_memory_guard_certificate_reloads_total", "result=\"failure\"");
	failures = failures < 0 ? 0 : failures;
	/* Certificate of a, key of b: does not match. */
	ITEST_CHECK(testcert_write(b, NULL, W.key_file) == 0 &&
	                testcert_write(a, W.cert_file, NULL) == 0,
	            "write mismatched pair");
	wait_failures_above(failures);
	usleep(500 * 1000);
	s = served_serial(NULL);
	ITEST_CHECK(s == 1000, "mismatched pair: served serial %ld, expected the old 1000", s);
	check_same_process_serving(pid);
	/* Garbage where the certificate should be. */
	failures = metric("gpu_memory_guard_certificate_reloads_total", "result=\"failure\"");
	f = fopen(W.cert_file, "w");
	ITEST_CHECK(f != NULL, "open cert file");
	fputs("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n", f);
	fclose(f);
	wait_failures_above(failures);
	s = served_serial(NULL);
	ITEST_CHECK(s == 1000, "garbage certificate: served serial %ld, expected 1000", s);
	/* A valid pair again is taken. */
	ITEST_CHECK(testcert_write(b, W.cert_file, NULL) == 0, "write matching cert");
	s = wait_serial(4002);
	ITEST_CHECK(s == 4002, "valid pair after invalid ones: served %ld, expected 4002", s);
	check_same_process_serving(pid);
	testcert_free(a);
	testcert_free(b);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_replace_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_secret_volume_symlink_swap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_invalid_pair_keeps_old, setup, teardown),
	};
	harness_init(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
