/*
 * log: JSON lines, one write(2) per line.
 *
 * A line is built in a stack buffer of LOG_LINE_MAX bytes. The last TAIL_RESERVE bytes are kept
 * for `,"truncated":true}\n` so a cut line is still one valid JSON object. Strings are escaped
 * as JSON; invalid UTF-8 becomes U+FFFD so the line stays valid JSON whatever the caller passes.
 * LOG_LINE_MAX (4096) equals PIPE_BUF on Linux, so a line written to a pipe is atomic.
 */
#include "log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAIL_RESERVE (sizeof(",\"truncated\":true}\n") - 1)

static _Atomic int log_level_min = LOG_INFO;
static _Atomic int log_fd = 2;

struct line {
	char buf[LOG_LINE_MAX];
	size_t len;
	size_t lim; /* writable bytes before the tail reserve */
	int truncated;
};

static const char *level_name(enum log_level level)
{
	switch (level) {
	case LOG_DEBUG:
		return "debug";
	case LOG_INFO:
		return "info";
	case LOG_WARN:
		return "warn";
	case LOG_ERROR:
		return "error";
	}
	return "info";
}

int log_level_parse(const char *name, enum log_level *out)
{
	static const struct {
		const char *name;
		enum log_level level;
	} names[] = {{"debug", LOG_DEBUG},
	             {"info", LOG_INFO},
	             {"warn", LOG_WARN},
	             {"warning", LOG_WARN},
	             {"error", LOG_ERROR}};

	if (name == NULL || out == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(name, names[i].name) == 0) {
			*out = names[i].level;
			return 0;
		}
	}
	return -1;
}

void log_set_level(enum log_level level)
{
	atomic_store_explicit(&log_level_min, (int)level, memory_order_relaxed);
}

enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load_explicit(&log_level_min, memory_order_relaxed);
}

void log_set_fd(int fd)
{
	atomic_store_explicit(&log_fd, fd, memory_order_relaxed);
}

/* Append raw bytes if they fit before the reserve; 0 on success, -1 (nothing written) if not. */
static int put(struct line *l, const char *s, size_t n)
{
	if (n > l->lim - l->len)
		return -1;
	memcpy(l->buf + l->len, s, n);
	l->len += n;
	return 0;
}

/* Length of the valid UTF-8 sequence at s (at most avail bytes), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t avail)
{
	size_t n;
	unsigned int cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n > avail)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8. */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/*
 * Append s as a JSON string. When it does not fit, it is cut at a character boundary, closed,
 * and the line marked truncated. Returns 0 when whole, 1 when cut, -1 when not even the quotes
 * fit (nothing written).
 */
static int put_json_string(struct line *l, const char *s, size_t slen)
{
	const unsigned char *p = (const unsigned char *)s;
	char esc[8];
	int cut = 0;

	if (l->lim - l->len < 2)
		return -1;
	l->buf[l->len++] = '"';
	for (size_t i = 0; i < slen;) {
		const char *out = esc;
		size_t n, adv = 1;

		switch (p[i]) {
		case '"':
			out = "\\\"";
			n = 2;
			break;
		case '\\':
			out = "\\\\";
			n = 2;
			break;
		case '\n':
			out = "\\n";
			n = 2;
			break;
		case '\r':
			out = "\\r";
			n = 2;
			break;
		case '\t':
			out = "\\t";
			n = 2;
			break;
		default:
			if (p[i] < 0x20 || p[i] == 0x7f) {
				n = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", p[i]);
			} else if ((adv = utf8_seq(p + i, slen - i)) > 0) {
				out = (const char *)p + i;
				n = adv;
			} else {
				out = "\\ufffd";
				n = 6;
				adv = 1;
			}
		}
		/* Keep one byte for the closing quote. */
		if (n + 1 > l->lim - l->len) {
			l->truncated = 1;
			cut = 1;
			break;
		}
		memcpy(l->buf + l->len, out, n);
		l->len += n;
		i += adv;
	}
	l->buf[l->len++] = '"';
	return cut;
}

/* Append `,"key":value`; on no room, roll back and mark truncated. */
static int put_field(struct line *l, const struct log_field *f)
{
	size_t mark = l->len;
	char num[64];
	int n = 0;

	if (put(l, ",", 1) < 0 || put_json_string(l, f->key, strlen(f->key)) != 0 ||
	    put(l, ":", 1) < 0)
		goto full;
	switch (f->kind) {
	case LOG_F_STR:
		if (f->s == NULL) {
			if (put(l, "null", 4) < 0)
				goto full;
		} else if (put_json_string(l, f->s, strlen(f->s)) < 0) {
			goto full;
		}
		return 0;
	case LOG_F_INT:
		n = snprintf(num, sizeof(num), "%lld", (long long)f->i);
		break;
	case LOG_F_DBL:
		/* JSON has no NaN or infinity. */
		if (isfinite(f->d))
			n = snprintf(num, sizeof(num), "%.9g", f->d);
		else
			n = snprintf(num, sizeof(num), "null");
		break;
	case LOG_F_BOOL:
		n = snprintf(num, sizeof(num), "%s", f->i ? "true" : "false");
		break;
	}
	if (n <= 0 || put(l, num, (size_t)n) < 0)
		goto full;
	return 0;
full:
	l->len = mark;
	l->truncated = 1;
	return -1;
}

static void put_timestamp(struct line *l)
{
	struct timespec ts;
	struct tm tm;
	char t[32], out[48];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
	int n = snprintf(out, sizeof(out), "{\"ts\":\"%s.%03ldZ\"", t, ts.tv_nsec / 1000000L);
	if (n > 0)
		(void)put(l, out, (size_t)n);
}

static void write_line(const struct line *l)
{
	int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
	size_t off = 0;

	while (off < l->len) {
		ssize_t w = write(fd, l->buf + off, l->len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* logging never fails the caller */
		off += (size_t)w;
	}
}

static void emit(enum log_level level, const char *msg, int msg_cut, const struct log_field *fields)
{
	struct line l;

	l.len = 0;
	l.lim = sizeof(l.buf) - TAIL_RESERVE;
	l.truncated = msg_cut;
	put_timestamp(&l);
	(void)put(&l, ",\"level\":", 9);
	(void)put_json_string(&l, level_name(level), strlen(level_name(level)));
	(void)put(&l, ",\"msg\":", 7);
	(void)put_json_string(&l, msg ? msg : "", msg ? strlen(msg) : 0);
	for (size_t i = 0; fields != NULL && fields[i].key != NULL; i++) {
		if (put_field(&l, &fields[i]) < 0)
			break;
	}
	/* The reserve always has room for the tail. */
	l.lim = sizeof(l.buf);
	if (l.truncated)
		(void)put(&l, ",\"truncated\":true", 17);
	(void)put(&l, "}\n", 2);
	write_line(&l);
}

void log_fields(enum log_level level, const char *msg, const struct log_field *fields)
{
	if ((int)level < atomic_load_explicit(&log_level_min, memory_order_relaxed))
		return;
	emit(level, msg, 0, fields);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char msg[LOG_LINE_MAX];
	va_list ap;
	int n;

	if ((int)level < atomic_load_explicit(&log_level_min, memory_order_relaxed))
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		msg[0] = '\0';
	emit(level, msg, n >= (int)sizeof(msg), NULL);
}
