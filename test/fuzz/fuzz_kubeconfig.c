/*
 * Fuzz target: the kubeconfig reader (lib/kube/kubeconfig.h), through its memory entry point
 * kubeconfig_parse (kubeconfig_load reads the file and calls it).
 * Properties: success yields an http(s) server and NUL-terminated *_data of the stated length;
 * failure yields a reason and a zeroed config; kubeconfig_free leaves nothing (LeakSanitizer).
 */
#include "fuzz.h"
#include "kubeconfig.h"

static void check_data(const char *what, const char *p, size_t len)
{
	if (p != NULL && p[len] != '\0')
		fuzz_fail("%s not NUL-terminated at its length %zu", what, len);
	if (p == NULL && len != 0)
		fuzz_fail("%s NULL with length %zu", what, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct kube_config zero;
	struct kube_config c;
	char err[256];
	int rc = kubeconfig_parse((const char *)data, size, "/fuzz/base", &c, err, sizeof(err));

	if (rc == 0) {
		if (c.server == NULL ||
		    (strncmp(c.server, "https://", 8) != 0 && strncmp(c.server, "http://", 7) != 0))
			fuzz_fail("accepted without an http(s) server");
		check_data("ca_data", c.ca_data, c.ca_data_len);
		check_data("client_cert_data", c.client_cert_data, c.client_cert_data_len);
		check_data("client_key_data", c.client_key_data, c.client_key_data_len);
		/* Relative paths are resolved against the base directory. */
		const char *paths[] = {c.ca_file, c.client_cert_file, c.client_key_file,
		                       c.token_file};
		for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
			if (paths[i] != NULL && paths[i][0] != '/')
				fuzz_fail("relative path \"%s\" left unresolved", paths[i]);
	} else {
		if (rc != -1)
			fuzz_fail("error code %d", rc);
		if (!fuzz_err_ok(err, sizeof(err)))
			fuzz_fail("refused without a reason");
		if (memcmp(&c, &zero, sizeof(c)) != 0)
			fuzz_fail("refused with a config left to free");
	}
	kubeconfig_free(&c);
	if (memcmp(&c, &zero, sizeof(c)) != 0)
		fuzz_fail("kubeconfig_free did not zero the config");
	return 0;
}
