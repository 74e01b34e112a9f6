/*
 * quantity_driver: lib/core/quantity.c for test/quantity-diff, the differential against
 * k8s.io/apimachinery (docs/quantity-differential.md).
 *
 * Reads one string a line on stdin (the '\n' is not part of it; a NUL byte is) and writes one
 * answer a line: "ok <bytes>" or "err <CODE>", CODE one of EINVAL ENEGATIVE ERANGE EEMPTY
 * ETOOLONG. A line over LINE_CAP bytes is an error of the driver (exit 2), not an answer.
 */
#include "quantity.h"

#include <stdio.h>
#include <string.h>

#define LINE_CAP 4096

static const char *code_name(int rc)
{
	switch (rc) {
	case QUANTITY_EINVAL:
		return "EINVAL";
	case QUANTITY_ENEGATIVE:
		return "ENEGATIVE";
	case QUANTITY_ERANGE:
		return "ERANGE";
	case QUANTITY_EEMPTY:
		return "EEMPTY";
	case QUANTITY_ETOOLONG:
		return "ETOOLONG";
	default:
		return "UNKNOWN";
	}
}

/* Read one line into buf (without its '\n'). Returns its length, -1 at the end, -2 when longer
 * than LINE_CAP. */
static long read_line(char *buf)
{
	long n = 0;
	int c;

	while ((c = getchar()) != EOF && c != '\n') {
		if (n == LINE_CAP)
			return -2;
		buf[n++] = (char)c;
	}
	if (c == EOF && n == 0)
		return -1;
	return n;
}

int main(void)
{
	static char line[LINE_CAP];
	long n;

	while ((n = read_line(line)) >= 0) {
		uint64_t bytes = 0;
		int rc = quantity_parse(line, (size_t)n, &bytes, NULL, 0);

		if (rc == 0)
			printf("ok %llu\n", (unsigned long long)bytes);
		else
			printf("err %s\n", code_name(rc));
	}
	if (n == -2) {
		fprintf(stderr, "quantity_driver: a line over %d bytes\n", LINE_CAP);
		return 2;
	}
	return fflush(stdout) == 0 ? 0 : 2;
}
