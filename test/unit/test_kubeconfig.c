/* Unit tests for lib/kubeconfig: files written to a temp dir, parsed as kubectl would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kubeconfig.h"

#define CA_PEM "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"

struct tmp {
	char dir[PATH_MAX]; /* realpath of the temp dir */
};

static int setup(void **state)
{
	struct tmp *t = calloc(1, sizeof(*t));
	char templ[] = "/tmp/gmg-kubeconfig-XXXXXX";

	assert_non_null(t);
	assert_non_null(mkdtemp(templ));
	assert_non_null(realpath(templ, t->dir));
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tmp *t = *state;
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
	assert_int_equal(system(cmd), 0);
	free(t);
	return 0;
}

static void write_file(const char *dir, const char *name, const char *content)
{
	char path[2 * PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(content, 1, strlen(content), f), strlen(content));
	fclose(f);
}

/* Write content as dir/name and load it. */
static int load(struct tmp *t, const char *name, const char *content, struct kube_config *c,
                char *err, size_t errlen)
{
	char path[2 * PATH_MAX];

	write_file(t->dir, name, content);
	snprintf(path, sizeof(path), "%s/%s", t->dir, name);
	return kubeconfig_load(path, c, err, errlen);
}

static int parse(const char *yaml, struct kube_config *c, char *err, size_t errlen)
{
	return kubeconfig_parse(yaml, strlen(yaml), "/base", c, err, errlen);
}

#define HEAD                                                                                       \
	"apiVersion: v1\n"                                                                         \
	"kind: Config\n"                                                                           \
	"current-context: dev\n"                                                                   \
	"contexts:\n"                                                                              \
	"- name: other\n"                                                                          \
	"  context: {cluster: nowhere, user: nobody}\n"                                            \
	"- name: dev\n"                                                                            \
	"  context:\n"                                                                             \
	"    cluster: kind\n"                                                                      \
	"    user: admin\n"                                                                        \
	"    namespace: default\n"

static void test_data_fields(void **state)
{
	const char *yaml = HEAD "clusters:\n"
	                        "- name: kind\n"
	                        "  cluster:\n"
	                        "    server: https://127.0.0.1:6443//\n"
	                        "    certificate-authority-data: " CA_B64 "\n"
	                        "users:\n"
	                        "- name: admin\n"
	                        "  user:\n"
	                        "    client-certificate-data: Q0VSVDE=\n"
	                        "    client-key-data: \"S0VZ\\nMTI=\"\n";
	struct kube_config c;
	char err[256] = "";

	(void)state;
	if (parse(yaml, &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_string_equal(c.server, "https://127.0.0.1:6443");
	assert_int_equal(c.ca_data_len, strlen(CA_PEM));
	assert_memory_equal(c.ca_data, CA_PEM, strlen(CA_PEM));
	assert_int_equal(c.client_cert_data_len, 5);
	assert_string_equal(c.client_cert_data, "CERT1");
	/* A newline inside the base64 (wrapped output) is ignored. */
	assert_int_equal(c.client_key_data_len, 5);
	assert_string_equal(c.client_key_data, "KEY12");
	assert_null(c.ca_file);
	assert_null(c.client_cert_file);
	assert_null(c.token);
	assert_null(c.token_file);
	assert_int_equal(c.insecure_skip_tls_verify, 0);
	kubeconfig_free(&c);
	assert_null(c.server);
	kubeconfig_free(&c); /* zeroed: twice is harmless */
	kubeconfig_free(NULL);
}

static void test_base64_padding(void **state)
{
	static const struct {
		const char *b64, *want;
		int ok;
	} cases[] = {
	    {"Sw==", "K", 1},  {"S0U=", "KE", 1}, {"S0VZ", "KEY", 1},        {"Sw", NULL, 0},
	    {"S===", NULL, 0}, {"!!!!", NULL, 0}, {"Q0VS VDE=", "CERT1", 1},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char yaml[1024], err[256] = "";
		struct kube_config c;
		int rc;

		snprintf(yaml, sizeof(yaml),
		         HEAD "clusters:\n- name: kind\n  cluster:\n    server: https://h\n"
		              "    certificate-authority-data: \"%s\"\n"
		              "users:\n- name: admin\n  user: {}\n",
		         cases[i].b64);
		rc = parse(yaml, &c, err, sizeof(err));
		if (!cases[i].ok) {
			if (rc == 0)
				fail_msg("case %zu (%s) accepted", i, cases[i].b64);
			assert_non_null(strstr(err, "certificate-authority-data"));
			continue;
		}
		if (rc != 0)
			fail_msg("case %zu (%s): %s", i, cases[i].b64, err);
		assert_int_equal(c.ca_data_len, strlen(cases[i].want));
		assert_string_equal(c.ca_data, cases[i].want);
		kubeconfig_free(&c);
	}
}

static void test_relative_paths(void **state)
{
	struct tmp *t = *state;
	char want[PATH_MAX + 32], sub[PATH_MAX + 8];
	struct kube_config c;
	char err[256] = "";

	snprintf(sub, sizeof(sub), "%s/sub", t->dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	if (load(t, "sub/config",
	         HEAD "clusters:\n"
	              "- name: kind\n"
	              "  cluster:\n"
	              "    server: https://kind:6443\n"
	              "    certificate-authority: ca.crt\n"
	              "users:\n"
	              "- name: admin\n"
	              "  user:\n"
	              "    client-certificate: certs/client.crt\n"
	              "    client-key: /abs/client.key\n"
	              "    tokenFile: ../token\n",
	         &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	snprintf(want, sizeof(want), "%s/sub/ca.crt", t->dir);
	assert_string_equal(c.ca_file, want);
	snprintf(want, sizeof(want), "%s/sub/certs/client.crt", t->dir);
	assert_string_equal(c.client_cert_file, want);
	assert_string_equal(c.client_key_file, "/abs/client.key");
	snprintf(want, sizeof(want), "%s/sub/../token", t->dir);
	assert_string_equal(c.token_file, want);
	assert_null(c.token);
	kubeconfig_free(&c);
}

static void test_token_and_insecure(void **state)
{
	struct kube_config c;
	char err[256] = "";

	(void)state;
	if (parse(HEAD "clusters:\n"
	               "- name: kind\n"
	               "  cluster:\n"
	               "    server: http://127.0.0.1:8001\n"
	               "    insecure-skip-tls-verify: true\n"
	               "users:\n"
	               "- name: admin\n"
	               "  user:\n"
	               "    token: abc.def-ghi\n"
	               "    tokenFile: /var/token\n",
	          &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_string_equal(c.server, "http://127.0.0.1:8001");
	assert_int_equal(c.insecure_skip_tls_verify, 1);
	/* A static token wins over tokenFile, as in kubectl. */
	assert_string_equal(c.token, "abc.def-ghi");
	assert_null(c.token_file);
	kubeconfig_free(&c);
}

static void test_token_file(void **state)
{
	struct kube_config c;
	char err[256] = "";

	(void)state;
	if (parse(HEAD "clusters:\n- name: kind\n  cluster:\n    server: https://h\n"
	               "users:\n- name: admin\n  user:\n    tokenFile: tok\n",
	          &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_string_equal(c.token_file, "/base/tok");
	kubeconfig_free(&c);
}

static void expect_error(const char *yaml, const char *needle)
{
	struct kube_config c;
	char err[256] = "";

	memset(&c, 0x5a, sizeof(c));
	assert_int_equal(parse(yaml, &c, err, sizeof(err)), -1);
	if (strstr(err, needle) == NULL)
		fail_msg("error \"%s\" does not mention \"%s\"", err, needle);
	/* Nothing left to free on failure. */
	assert_null(c.server);
	assert_null(c.ca_data);
	assert_null(c.token);
	assert_null(c.exec);
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("apiVersion: v1\nclusters: []\n", "current-context");
	expect_error("current-context: \"\"\n", "current-context");
	expect_error("current-context: nope\ncontexts: []\n", "context \"nope\" not found");
	expect_error(HEAD "clusters: []\n", "cluster \"kind\" not found");
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {server: https://h}\n",
	             "user \"admin\" not found");
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {insecure-skip-tls-verify: true}\n"
	                  "users:\n- name: admin\n  user: {}\n",
	             "no server");
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {server: ftp://h}\n"
	                  "users:\n- name: admin\n  user: {}\n",
	             "not an http(s) URL");
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {server: \"http://\"}\n"
	                  "users:\n- name: admin\n  user: {}\n",
	             "has no host");
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {server: \"https:///x\"}\n"
	                  "users:\n- name: admin\n  user: {}\n",
	             "has no host");
	expect_error("- a\n- b\n", "not a YAML mapping");
	expect_error("current-context: [unclosed\n", "YAML error");
	expect_error("a: b\n  c: d\n", "YAML error");
	expect_error("key: \"unterminated\n", "YAML error");
	/* Basic auth left Kubernetes in 1.19. */
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {server: https://h}\n"
	                  "users:\n- name: admin\n  user: {username: a, password: b}\n",
	             "basic auth");
}

#define EXEC_USER(body)                                                                            \
	HEAD "clusters:\n- name: kind\n  cluster: {server: https://h}\n"                           \
	     "users:\n- name: admin\n  user:\n    exec:\n" body

/* An exec plugin as client-go reads it: every field, the path rule for the command. */
static void test_exec(void **state)
{
	struct kube_config c;
	char err[256] = "";
	const char *yaml = EXEC_USER("      apiVersion: client.authentication.k8s.io/v1\n"
	                             "      command: aws\n"
	                             "      args: [eks, get-token, --cluster-name, prod]\n"
	                             "      env:\n"
	                             "      - {name: AWS_PROFILE, value: platform}\n"
	                             "      - {name: EMPTY, value: \"\"}\n"
	                             "      installHint: install the AWS CLI\n"
	                             "      provideClusterInfo: true\n"
	                             "      interactiveMode: Never\n");

	(void)state;
	assert_int_equal(parse(yaml, &c, err, sizeof(err)), 0);
	assert_non_null(c.exec);
	assert_null(c.token);
	assert_string_equal(c.exec->user, "admin");
	assert_string_equal(c.exec->command, "aws"); /* no '/': looked up in PATH when run */
	assert_int_equal(c.exec->n_args, 4);
	assert_string_equal(c.exec->args[0], "eks");
	assert_string_equal(c.exec->args[3], "prod");
	assert_int_equal(c.exec->n_env, 2);
	assert_string_equal(c.exec->env_names[0], "AWS_PROFILE");
	assert_string_equal(c.exec->env_values[0], "platform");
	assert_string_equal(c.exec->env_values[1], "");
	assert_string_equal(c.exec->api_version, "client.authentication.k8s.io/v1");
	assert_string_equal(c.exec->install_hint, "install the AWS CLI");
	assert_true(c.exec->provide_cluster_info);
	assert_int_equal(c.exec->interactive_mode, KUBE_EXEC_NEVER);
	kubeconfig_free(&c);
	assert_null(c.exec);

	/* v1beta1 defaults interactiveMode to IfAvailable; a relative path is the kubeconfig's. */
	assert_int_equal(parse(EXEC_USER("      apiVersion: client.authentication.k8s.io/v1beta1\n"
	                                 "      command: bin/get-token\n"),
	                       &c, err, sizeof(err)),
	                 0);
	assert_string_equal(c.exec->command, "/base/bin/get-token");
	assert_int_equal(c.exec->interactive_mode, KUBE_EXEC_IF_AVAILABLE);
	assert_int_equal(c.exec->n_args, 0);
	assert_false(c.exec->provide_cluster_info);
	assert_null(c.exec->install_hint);
	kubeconfig_free(&c);
	assert_int_equal(parse(EXEC_USER("      apiVersion: client.authentication.k8s.io/v1\n"
	                                 "      command: /usr/bin/kubelogin\n"
	                                 "      interactiveMode: Always\n"),
	                       &c, err, sizeof(err)),
	                 0);
	assert_string_equal(c.exec->command, "/usr/bin/kubelogin");
	assert_int_equal(c.exec->interactive_mode, KUBE_EXEC_ALWAYS);
	kubeconfig_free(&c);
}

static void test_exec_errors(void **state)
{
	(void)state;
	expect_error(EXEC_USER("      apiVersion: client.authentication.k8s.io/v1\n"
	                       "      interactiveMode: Never\n"),
	             "user \"admin\": exec has no command");
	expect_error(EXEC_USER("      command: aws\n"), "exec.apiVersion \"\" is not");
	expect_error(EXEC_USER("      command: aws\n"
	                       "      apiVersion: client.authentication.k8s.io/v1alpha1\n"),
	             "exec.apiVersion \"client.authentication.k8s.io/v1alpha1\" is not");
	expect_error(EXEC_USER("      command: aws\n"
	                       "      apiVersion: client.authentication.k8s.io/v1\n"),
	             "exec.interactiveMode is required");
	expect_error(EXEC_USER("      command: aws\n      interactiveMode: Sometimes\n"
	                       "      apiVersion: client.authentication.k8s.io/v1beta1\n"),
	             "interactiveMode \"Sometimes\" is not Never, IfAvailable or Always");
	expect_error(EXEC_USER("      command: aws\n      args: eks\n"
	                       "      apiVersion: client.authentication.k8s.io/v1beta1\n"),
	             "exec.args is not a list");
	expect_error(EXEC_USER("      command: aws\n      args: [eks, [x]]\n"
	                       "      apiVersion: client.authentication.k8s.io/v1beta1\n"),
	             "exec.args[1] is not a string");
	expect_error(EXEC_USER("      command: aws\n      env: {A: b}\n"
	                       "      apiVersion: client.authentication.k8s.io/v1beta1\n"),
	             "exec.env is not a list");
	expect_error(EXEC_USER("      command: aws\n      env: [{value: b}]\n"
	                       "      apiVersion: client.authentication.k8s.io/v1beta1\n"),
	             "exec.env[0] is not {name, value}");
	expect_error(EXEC_USER("      command: aws\n      env: [{name: \"A=B\", value: b}]\n"
	                       "      apiVersion: client.authentication.k8s.io/v1beta1\n"),
	             "exec.env[0] is not {name, value}");
	expect_error(EXEC_USER("      command: aws\n      env: [{name: A, value: [b]}]\n"
	                       "      apiVersion: client.authentication.k8s.io/v1beta1\n"),
	             "exec.env[0] is not {name, value}");
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {server: https://h}\n"
	                  "users:\n- name: admin\n  user:\n    exec: aws\n",
	             "exec is not a mapping");
	/* client-go refuses a plugin beside static credentials; so do we, naming the field. */
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {server: https://h}\n"
	                  "users:\n- name: admin\n  user:\n    token: t\n    exec:\n"
	                  "      apiVersion: client.authentication.k8s.io/v1beta1\n"
	                  "      command: aws\n",
	             "both an exec plugin and token");
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {server: https://h}\n"
	                  "users:\n- name: admin\n  user:\n    client-key-data: eA==\n    exec:\n"
	                  "      apiVersion: client.authentication.k8s.io/v1beta1\n"
	                  "      command: aws\n",
	             "both an exec plugin and client-key-data");
	expect_error(HEAD "clusters:\n- name: kind\n  cluster: {server: https://h}\n"
	                  "users:\n- name: admin\n  user:\n    auth-provider:\n      name: gcp\n",
	             "auth-provider plugin");
}

/* The caps: more args or env entries than KUBECONFIG_EXEC_*_MAX, a string over its cap. */
static void test_exec_caps(void **state)
{
	char *yaml = malloc(64 * 1024), *p;
	struct kube_config c;
	char err[256] = "";
	int n;

	(void)state;
	assert_non_null(yaml);
	p = yaml + sprintf(yaml, "%s",
	                   EXEC_USER("      apiVersion: client.authentication.k8s.io/v1beta1\n"
	                             "      command: aws\n      args:\n"));
	for (n = 0; n < KUBECONFIG_EXEC_ARGS_MAX; n++)
		p += sprintf(p, "      - a%d\n", n);
	assert_int_equal(parse(yaml, &c, err, sizeof(err)), 0); /* at the cap: fine */
	assert_int_equal(c.exec->n_args, KUBECONFIG_EXEC_ARGS_MAX);
	kubeconfig_free(&c);
	sprintf(p, "      - one-more\n");
	assert_int_equal(parse(yaml, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "exec.args has 65 entries (at most 64)"));

	p = yaml + sprintf(yaml, "%s",
	                   EXEC_USER("      apiVersion: client.authentication.k8s.io/v1beta1\n"
	                             "      command: aws\n      env:\n"));
	for (n = 0; n <= KUBECONFIG_EXEC_ENV_MAX; n++)
		p += sprintf(p, "      - {name: E%d, value: v}\n", n);
	assert_int_equal(parse(yaml, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "exec.env has 65 entries (at most 64)"));

	p = yaml + sprintf(yaml, "%s",
	                   EXEC_USER("      apiVersion: client.authentication.k8s.io/v1beta1\n"
	                             "      command: "));
	memset(p, 'x', KUBECONFIG_EXEC_STR_MAX + 1);
	strcpy(p + KUBECONFIG_EXEC_STR_MAX + 1, "\n");
	assert_int_equal(parse(yaml, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "exec.command is over 4096 bytes"));
	free(yaml);
}

static void test_aliases(void **state)
{
	struct kube_config c;
	char err[256] = "";

	(void)state;
	/* Anchors are legal YAML; a self-referencing one must not hang or crash. */
	if (parse(HEAD "clusters:\n- name: kind\n  cluster: &c {server: https://h}\n"
	               "x: &loop [*loop]\n",
	          &c, err, sizeof(err)) == 0)
		kubeconfig_free(&c);
	assert_int_equal(parse(HEAD "defs:\n  k: &k {server: 'https://aliased'}\n"
	                            "clusters:\n- name: kind\n  cluster: *k\n"
	                            "users:\n- name: admin\n  user: {}\n",
	                       &c, err, sizeof(err)),
	                 0);
	assert_string_equal(c.server, "https://aliased");
	kubeconfig_free(&c);
}

static void test_load_file_errors(void **state)
{
	struct tmp *t = *state;
	struct kube_config c;
	char err[256] = "";
	char *big;

	assert_int_equal(kubeconfig_load("/nonexistent/kubeconfig", &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/kubeconfig"));
	assert_int_equal(kubeconfig_load(t->dir, &c, err, sizeof(err)), -1); /* a directory */
	assert_int_equal(load(t, "empty", "", &c, err, sizeof(err)), -1);
	big = malloc(KUBECONFIG_FILE_MAX + 2);
	assert_non_null(big);
	memset(big, '#', KUBECONFIG_FILE_MAX + 1);
	big[KUBECONFIG_FILE_MAX + 1] = '\0';
	assert_int_equal(load(t, "big", big, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "at most"));
	free(big);
	assert_int_equal(kubeconfig_parse("x", 0, NULL, &c, err, sizeof(err)), -1);
}

static void test_in_cluster(void **state)
{
	struct tmp *t = *state;
	struct kube_config c;
	char err[256] = "", want[PATH_MAX + 16];

	write_file(t->dir, "token", "eyJhbGciOi\n");
	write_file(t->dir, "ca.crt", CA_PEM);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	if (kubeconfig_in_cluster(t->dir, &c, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_string_equal(c.server, "https://10.96.0.1:443");
	snprintf(want, sizeof(want), "%s/token", t->dir);
	assert_string_equal(c.token_file, want);
	snprintf(want, sizeof(want), "%s/ca.crt", t->dir);
	assert_string_equal(c.ca_file, want);
	assert_null(c.token); /* the file is re-read by the client, never cached here */
	kubeconfig_free(&c);

	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	assert_int_equal(kubeconfig_in_cluster(t->dir, &c, err, sizeof(err)), 0);
	assert_string_equal(c.server, "https://[fd00::1]:443");
	kubeconfig_free(&c);

	assert_int_equal(kubeconfig_in_cluster("/nonexistent-sa", &c, err, sizeof(err)), -1);
	assert_null(c.server);

	unsetenv("KUBERNETES_SERVICE_PORT");
	assert_int_equal(kubeconfig_in_cluster(t->dir, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "KUBERNETES_SERVICE_PORT"));
	unsetenv("KUBERNETES_SERVICE_HOST");
	assert_int_equal(kubeconfig_in_cluster(t->dir, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_data_fields),
	    cmocka_unit_test(test_base64_padding),
	    cmocka_unit_test_setup_teardown(test_relative_paths, setup, teardown),
	    cmocka_unit_test(test_token_and_insecure),
	    cmocka_unit_test(test_token_file),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_exec),
	    cmocka_unit_test(test_exec_errors),
	    cmocka_unit_test(test_exec_caps),
	    cmocka_unit_test(test_aliases),
	    cmocka_unit_test_setup_teardown(test_load_file_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_in_cluster, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
