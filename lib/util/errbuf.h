/*
 * errbuf: the caller-supplied error buffer every fallible lib/ function fills.
 *
 * Modules report a one-line reason into (err, errlen) owned by the caller, as Redis's anet and
 * curl do: the foreign library's message (GnuTLS, OpenSSL, curl, cJSON) is translated at the
 * module's edge and the caller decides how to log it.
 * A NULL buffer or errlen 0 means the caller does not want the text. The text is cut to fit,
 * always NUL-terminated; an encoding error leaves it empty. Thread-safe, no allocation.
 */
#ifndef GMG_ERRBUF_H
#define GMG_ERRBUF_H

#include <stddef.h>

void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
