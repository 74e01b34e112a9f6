/*
 * capfile: see capfile.h.
 */
#include "capfile.h"

#include "errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIRST_CHUNK 4096 /* bytes; the first buffer when the size is not known in advance */

/* The first buffer size: the file's size plus one byte that proves EOF without a resize,
 * when known; never more than max + 1 bytes, which prove a file over the cap. */
static size_t first_size(const struct stat *st, size_t max)
{
	size_t want = FIRST_CHUNK;

	if (S_ISREG(st->st_mode))
		want = (size_t)st->st_size + 1;
	return want > max + 1 ? max + 1 : want;
}

/* Read fd to EOF into *buf (size *size + 1 for the NUL, grown up to max + 1 + 1). */
static int read_all(int fd, const char *path, size_t max, char **buf, size_t *size, size_t *n,
                    char *err, size_t errlen)
{
	for (;;) {
		if (*n == *size) {
			size_t grown = *size > max / 2 ? max + 1 : *size * 2;
			char *p;

			if (*size > max) {
				errbuf_set(err, errlen, "%s: larger than %zu bytes", path, max);
				return CAPFILE_ETOOBIG;
			}
			if ((p = realloc(*buf, grown + 1)) == NULL) {
				errbuf_set(err, errlen, "%s: out of memory", path);
				return CAPFILE_ENOMEM;
			}
			*buf = p;
			*size = grown;
		}
		ssize_t r = read(fd, *buf + *n, *size - *n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			errbuf_set(err, errlen, "%s: %s", path, strerror(errno));
			return CAPFILE_EIO;
		}
		if (r == 0)
			return 0;
		*n += (size_t)r;
	}
}

int capfile_read(const char *path, size_t max_bytes, unsigned flags, char **out, size_t *len,
                 char *err, size_t errlen)
{
	size_t max = max_bytes > SIZE_MAX / 2 ? SIZE_MAX / 2 : max_bytes;
	size_t size, n = 0;
	struct stat st;
	char *buf = NULL;
	int rc = CAPFILE_EIO, fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		errbuf_set(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if ((flags & CAPFILE_REGULAR) && !S_ISREG(st.st_mode)) {
		errbuf_set(err, errlen, "%s: not a regular file", path);
		rc = CAPFILE_ENOTREG;
		goto out;
	}
	if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > max) {
		errbuf_set(err, errlen, "%s: larger than %zu bytes", path, max);
		rc = CAPFILE_ETOOBIG;
		goto out;
	}
	size = first_size(&st, max);
	if ((buf = malloc(size + 1)) == NULL) {
		errbuf_set(err, errlen, "%s: out of memory", path);
		rc = CAPFILE_ENOMEM;
		goto out;
	}
	if ((rc = read_all(fd, path, max, &buf, &size, &n, err, errlen)) != 0)
		goto out;
	buf[n] = '\0';
	*out = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}
