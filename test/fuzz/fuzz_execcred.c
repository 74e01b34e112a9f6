/*
 * Fuzz target: what an exec credential plugin prints (lib/kube/execcred.h, execcred_parse),
 * the output of a program the report runs. The first byte picks the apiVersion (even: v1, odd:
 * v1beta1), the rest is the output.
 * Properties: success yields a token and/or a certificate with its key, NUL-terminated at their
 * stated lengths, a token of one line under the cap; failure yields a reason naming the plugin
 * and nothing to free; execcred_value_free leaves nothing (LeakSanitizer).
 */
#include "execcred.h"
#include "fuzz.h"

#define WHO "exec plugin \"fuzz\" (user \"u\")"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct execcred_value zero;
	struct execcred_value v;
	int64_t expiry = 0;
	char err[512] = "";
	const char *api;
	int rc;

	if (size < 1)
		return 0;
	api = data[0] % 2 == 0 ? "client.authentication.k8s.io/v1"
	                       : "client.authentication.k8s.io/v1beta1";
	rc = execcred_parse(api, WHO, (const char *)data + 1, size - 1, &v, &expiry, err,
	                    sizeof(err));
	if (rc == 0) {
		if (v.token == NULL && v.cert == NULL)
			fuzz_fail("accepted without a credential");
		if ((v.cert == NULL) != (v.key == NULL))
			fuzz_fail(
			    "a certificate without its key, or a key without its certificate");
		if (v.token != NULL &&
		    (strlen(v.token) == 0 || strlen(v.token) > EXECCRED_TOKEN_MAX ||
		     strpbrk(v.token, "\r\n") != NULL))
			fuzz_fail("token empty, over the cap or multi-line");
		if (v.cert != NULL && (strlen(v.cert) != v.cert_len || strlen(v.key) != v.key_len))
			fuzz_fail("certificate or key length not its string's");
		if (v.cert == NULL && (v.cert_len != 0 || v.key_len != 0))
			fuzz_fail("lengths without a certificate");
	} else {
		if (rc != -1)
			fuzz_fail("error code %d", rc);
		if (strncmp(err, WHO, strlen(WHO)) != 0)
			fuzz_fail("refused without naming the plugin: \"%s\"", err);
		if (memcmp(&v, &zero, sizeof(v)) != 0)
			fuzz_fail("refused with a value left to free");
	}
	execcred_value_free(&v);
	if (memcmp(&v, &zero, sizeof(v)) != 0)
		fuzz_fail("execcred_value_free did not zero the value");
	return 0;
}
