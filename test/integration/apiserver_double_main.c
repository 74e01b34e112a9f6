/*
 * apiserver-double: run the Kubernetes API server TEST DOUBLE as a process, for manual testing
 * with curl and kubectl-like clients. Not a Kubernetes API server.
 *
 *   apiserver-double --dir OUT [--state PATH]... [--port N] [--max-page N]
 *
 * Writes OUT/ca.crt, OUT/token and OUT/kubeconfig (generated CA, server cert for 127.0.0.1),
 * loads each --state (a JSON file or a directory of them: nodes, pods, leases), prints the URL
 * and serves until SIGINT / SIGTERM. Leases are served at
 * /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]; their failure injection through
 * POST /_double/fail-lease-writes?code=N&times=M and /_double/delay-lease-writes?ms=N, their
 * counters in GET /_double/stats (apiserver_double.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apiserver_double.h"
#include "testcerts.h"

#define TOKEN "apiserver-double-token"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	g_stop = 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: apiserver-double --dir OUT [--state PATH]... [--port N] "
	                "[--max-page N]\n");
	return 2;
}

static int load(struct apiserver_double *d, const char *path)
{
	struct stat st;
	char err[512];
	int n;
	if (stat(path, &st)) {
		perror(path);
		return -1;
	}
	n = S_ISDIR(st.st_mode) ? apiserver_double_load_dir(d, path, err, sizeof err)
	                        : apiserver_double_load_file(d, path, err, sizeof err);
	if (n < 0)
		fprintf(stderr, "apiserver-double: %s\n", err);
	else
		fprintf(stderr, "apiserver-double: %s: %d objects\n", path, n);
	return n < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *states[32];
	int n_states = 0, i, rc = 1;
	struct apiserver_double_opts o = {0};
	struct testcert *ca = NULL, *srv = NULL;
	char *ca_pem = NULL, path[1024], server[64], err[512];
	struct apiserver_double *d = NULL;
	FILE *f;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--state") && i + 1 < argc && n_states < 32)
			states[n_states++] = argv[++i];
		else if (!strcmp(argv[i], "--port") && i + 1 < argc)
			o.port = (unsigned short)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--max-page") && i + 1 < argc)
			o.max_page = (unsigned)atoi(argv[++i]);
		else
			return usage();
	}
	if (!dir)
		return usage();
	ca = testcert_new_ca("apiserver test double CA");
	srv = ca ? testcert_new_server(ca, "apiserver-test-double", 2, 30L * 86400) : NULL;
	ca_pem = ca ? testcert_cert_pem(ca) : NULL;
	o.cert_pem = srv ? testcert_cert_pem(srv) : NULL;
	o.key_pem = srv ? testcert_key_pem(srv) : NULL;
	o.token = TOKEN;
	if (!ca_pem || !o.cert_pem || !o.key_pem)
		goto out;
	d = apiserver_double_new(&o, err, sizeof err);
	if (!d) {
		fprintf(stderr, "apiserver-double: %s\n", err);
		goto out;
	}
	for (i = 0; i < n_states; i++)
		if (load(d, states[i]))
			goto out;
	snprintf(path, sizeof path, "%s/ca.crt", dir);
	f = fopen(path, "w");
	if (!f || fputs(ca_pem, f) < 0 || fclose(f)) {
		perror(path);
		goto out;
	}
	snprintf(path, sizeof path, "%s/token", dir);
	f = fopen(path, "w");
	if (!f || fputs(TOKEN, f) < 0 || fclose(f)) {
		perror(path);
		goto out;
	}
	snprintf(server, sizeof server, "https://127.0.0.1:%u", apiserver_double_port(d));
	snprintf(path, sizeof path, "%s/kubeconfig", dir);
	if (testcerts_write_kubeconfig(path, server, ca_pem, TOKEN))
		goto out;
	printf("%s\n", server);
	fflush(stdout);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (!g_stop)
		pause();
	rc = 0;
out:
	apiserver_double_free(d);
	free((char *)o.cert_pem);
	free((char *)o.key_pem);
	free(ca_pem);
	testcert_free(srv);
	testcert_free(ca);
	return rc;
}
