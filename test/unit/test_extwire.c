/*
 * extwire: ExtenderBindingArgs decoded (every refusal names its field) and ExtenderBindingResult
 * encoded. ExtenderArgs and its answers are covered through the extender (test_extender.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extwire.h"

static int decode(struct extwire_bind *b, const char *body, char *err, size_t errlen)
{
	return extwire_decode_bind(b, body, strlen(body), err, errlen);
}

/* Refused with a reason that contains want; *b left zeroed. */
static void refused(const char *body, const char *want)
{
	struct extwire_bind b;
	char err[256];

	if (decode(&b, body, err, sizeof(err)) != EXTWIRE_EBAD || strstr(err, want) == NULL) {
		print_error("body %s: got \"%s\", want \"%s\"\n", body, err, want);
		fail();
	}
	assert_null(strchr(err, '%'));
	assert_string_equal(b.name, "");
	assert_string_equal(b.node, "");
}

static void test_bind_args_decoded(void **state)
{
	struct extwire_bind b;
	char err[256] = "x";

	(void)state;
	assert_int_equal(
	    decode(&b,
	           "{\"PodName\":\"vllm-0\",\"PodNamespace\":\"ml\",\"PodUID\":"
	           "\"0b5c3a1e-8f1d-4d7e-9a43-2c1f0e6b7a11\",\"Node\":\"gpu-a.zone-1\","
	           "\"Extra\":[1]}",
	           err, sizeof(err)),
	    0);
	assert_string_equal(err, "");
	assert_string_equal(b.name, "vllm-0");
	assert_string_equal(b.ns, "ml");
	assert_string_equal(b.uid, "0b5c3a1e-8f1d-4d7e-9a43-2c1f0e6b7a11");
	assert_string_equal(b.node, "gpu-a.zone-1");
	/* Go's decoder matches field names in any ASCII case; surrounding space is fine. */
	assert_int_equal(decode(&b,
	                        " {\"podname\":\"p\",\"PODNAMESPACE\":\"n\",\"poduid\":\"u\","
	                        "\"node\":\"x\"}\n",
	                        err, sizeof(err)),
	                 0);
	assert_string_equal(b.name, "p");
	assert_string_equal(b.node, "x");
}

static void test_bind_args_refused(void **state)
{
	char big[600];

	(void)state;
	refused("", "ExtenderBindingArgs: empty body");
	refused("{", "ExtenderBindingArgs: not JSON");
	refused("{} x", "trailing data");
	refused("[]", "not a JSON object");
	refused("{\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":\"x\"}", "no PodName");
	refused("{\"PodName\":\"p\",\"PodUID\":\"u\",\"Node\":\"x\"}", "no PodNamespace");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"Node\":\"x\"}", "no PodUID");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"u\"}", "no Node");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":null}",
	        "no Node");
	refused("{\"PodName\":1,\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":\"x\"}",
	        "PodName is not a string");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":{},\"Node\":\"x\"}",
	        "PodUID is not a string");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":[\"x\"]}",
	        "Node is not a string");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":\"\"}",
	        "Node is empty");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"\",\"Node\":\"x\"}",
	        "PodUID is empty");
	refused("{\"PodName\":\"p\",\"podName\":\"q\",\"PodNamespace\":\"n\",\"PodUID\":\"u\","
	        "\"Node\":\"x\"}",
	        "PodName given twice");
	refused("{\"PodName\":\"P\",\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":\"x\"}",
	        "PodName \"P\" is not a DNS-1123 subdomain");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"a.b\",\"PodUID\":\"u\",\"Node\":\"x\"}",
	        "PodNamespace \"a.b\" is not a DNS-1123 label");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"-n\",\"PodUID\":\"u\",\"Node\":\"x\"}",
	        "is not a DNS-1123 label");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":\"../x\"}",
	        "Node \"../x\" is not a DNS-1123 subdomain");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":\"a..b\"}",
	        "is not a DNS-1123 subdomain");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"u v\",\"Node\":\"x\"}",
	        "PodUID \"u v\" is not printable ASCII");
	refused("{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"100%\",\"Node\":\"x%\"}",
	        "Node \"x");

	/* Caps: 253 bytes of a name, 63 of a namespace, EXTWIRE_UID_MAX of a uid. */
	memset(big, 'a', sizeof(big));
	char body[1024];
	snprintf(body, sizeof(body),
	         "{\"PodName\":\"%.254s\",\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":\"x\"}",
	         big);
	refused(body, "PodName is over 253 bytes");
	snprintf(body, sizeof(body),
	         "{\"PodName\":\"p\",\"PodNamespace\":\"%.64s\",\"PodUID\":\"u\",\"Node\":\"x\"}",
	         big);
	refused(body, "PodNamespace is over 63 bytes");
	snprintf(body, sizeof(body),
	         "{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"%.129s\",\"Node\":\"x\"}",
	         big);
	refused(body, "PodUID is over 128 bytes");
	snprintf(body, sizeof(body),
	         "{\"PodName\":\"p\",\"PodNamespace\":\"n\",\"PodUID\":\"u\",\"Node\":\"%.254s\"}",
	         big);
	refused(body, "Node is over 253 bytes");

	/* At the caps: accepted. */
	struct extwire_bind b;
	char err[256];
	snprintf(body, sizeof(body),
	         "{\"PodName\":\"%.253s\",\"PodNamespace\":\"%.63s\",\"PodUID\":\"%.128s\","
	         "\"Node\":\"%.253s\"}",
	         big, big, big, big);
	assert_int_equal(decode(&b, body, err, sizeof(err)), 0);
	assert_int_equal(strlen(b.name), 253);
	assert_int_equal(strlen(b.ns), 63);
	assert_int_equal(strlen(b.uid), 128);
	assert_int_equal(strlen(b.node), 253);
}

static void test_bind_result(void **state)
{
	char *t;

	(void)state;
	t = extwire_bind_result(NULL);
	assert_string_equal(t, "{\"Error\":\"\"}");
	free(t);
	t = extwire_bind_result("");
	assert_string_equal(t, "{\"Error\":\"\"}");
	free(t);
	t = extwire_bind_result("bind pod \"a\": HTTP 409\n");
	assert_string_equal(t, "{\"Error\":\"bind pod \\\"a\\\": HTTP 409\\n\"}");
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bind_args_decoded),
	    cmocka_unit_test(test_bind_args_refused),
	    cmocka_unit_test(test_bind_result),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
