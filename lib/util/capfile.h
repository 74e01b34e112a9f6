/*
 * capfile: reading a whole file under a byte cap, written once (the bearer token, the
 * kubeconfig, the serving certificate and key).
 *
 * The cap is the caller's, named per use (TOKEN_MAX, KUBECONFIG_FILE_MAX, TLS_FILE_MAX). A
 * file longer than the cap is CAPFILE_ETOOBIG, never cut: a regular file whose size is over
 * the cap is refused before any allocation, and any file (one that grows while read, a pipe,
 * a device) is refused as soon as one byte past the cap is read. Thread-safe: no shared state.
 */
#ifndef GMG_CAPFILE_H
#define GMG_CAPFILE_H

#include <stddef.h>

#define CAPFILE_EIO     (-1) /* cannot open, stat or read it (missing, permission, a directory) */
#define CAPFILE_ETOOBIG (-2) /* more than max_bytes */
#define CAPFILE_ENOMEM  (-3)
#define CAPFILE_ENOTREG (-4) /* not a regular file (symlinks followed), with CAPFILE_REGULAR */

/* Flags. */
#define CAPFILE_REGULAR 0x1u /* refuse anything but a regular file: no pipes, devices */

/*
 * Read the file at path (at most max_bytes bytes; max_bytes is clamped to SIZE_MAX / 2) into a
 * new buffer. Returns 0 with *out (caller has ownership, free() it) holding the *len bytes
 * plus a terminating NUL that *len does not count; an empty file is 0 with *len == 0. On
 * error returns a negative CAPFILE_E* code, leaves *out and *len untouched and frees what it
 * made; err gets "<path>: <cause>" (the system's message for CAPFILE_EIO, "larger than N
 * bytes", "out of memory", "not a regular file"), err may be NULL.
 */
int capfile_read(const char *path, size_t max_bytes, unsigned flags, char **out, size_t *len,
                 char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
