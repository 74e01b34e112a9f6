/*
 * log: structured JSON-lines logging to stderr.
 *
 * lib/ never prints; it calls these functions, and cmd/ chooses the level once at start-up.
 * Each call writes exactly one line, a JSON object {"ts": RFC 3339 UTC with ms, "level",
 * "msg", then the caller's fields}, with one write(2) so lines from threads never interleave.
 * Lines are capped at LOG_LINE_MAX bytes; longer values are cut and the line gets
 * "truncated": true (logging must never fail the caller).
 *
 * Strings are JSON-escaped; invalid UTF-8 becomes U+FFFD and non-finite doubles null, so
 * every line parses whatever the caller passes. A short write is retried for the rest; write
 * errors are ignored. LOG_LINE_MAX equals PIPE_BUF, so a line to a pipe is atomic.
 *
 * Thread-safe. No allocation on the hot path (a stack buffer of LOG_LINE_MAX).
 */
#ifndef GMG_LOG_H
#define GMG_LOG_H

#include <stdint.h>

#define LOG_LINE_MAX 4096

enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };

/* Field kinds for log_fields(); a NULL-key entry ends the list. */
enum log_field_kind { LOG_F_STR, LOG_F_INT, LOG_F_DBL, LOG_F_BOOL };
struct log_field {
	const char *key;
	enum log_field_kind kind;
	const char *s; /* LOG_F_STR: borrowed, may be NULL (written as null) */
	int64_t i;     /* LOG_F_INT, LOG_F_BOOL */
	double d;      /* LOG_F_DBL */
};
#define LOG_STR(k, v)  ((struct log_field){(k), LOG_F_STR, (v), 0, 0})
#define LOG_INT(k, v)  ((struct log_field){(k), LOG_F_INT, 0, (int64_t)(v), 0})
#define LOG_DBL(k, v)  ((struct log_field){(k), LOG_F_DBL, 0, 0, (double)(v)})
#define LOG_BOOL(k, v) ((struct log_field){(k), LOG_F_BOOL, 0, (v) ? 1 : 0, 0})
#define LOG_END        ((struct log_field){0, LOG_F_STR, 0, 0, 0})

/* Parse "debug", "info", "warn", "error". 0 or -1 for an unknown name. */
int log_level_parse(const char *name, enum log_level *out);

/* Set the minimum level written (default LOG_INFO). Call before threads start. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Redirect output to fd (default 2). For tests. */
void log_set_fd(int fd);

/* Write one line with msg and the fields (array terminated by LOG_END). */
void log_fields(enum log_level level, const char *msg, const struct log_field *fields);

/* printf-style convenience: {"msg": formatted}. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
