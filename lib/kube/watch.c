/*
 * watch: incremental decoder of a Kubernetes watch stream (see watch.h).
 *
 * One line buffer, used only for a line that spans feeds: most events arrive whole inside one
 * chunk and are parsed where they lie. The buffer grows geometrically, clamped to the cap, and
 * the cap is checked before every growth, so a hostile stream costs at most max + 1 bytes.
 */
#include "watch.h"

#include "errbuf.h"
#include "jsonpath.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define BUF_START 4096 /* bytes, first line buffer */
#define QUOTE_MAX 60   /* bytes of a bad line quoted in err */

struct watch_decoder {
	char *buf; /* unfinished line, not NUL-terminated */
	size_t len, cap, max;
	unsigned long events; /* events delivered, for messages */
	int dead;             /* sticky error code, 0 while usable */
};

struct watch_decoder *watch_decoder_new(size_t max_event_bytes)
{
	struct watch_decoder *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	d->max = max_event_bytes ? max_event_bytes : WATCH_EVENT_MAX;
	return d;
}

void watch_decoder_free(struct watch_decoder *d)
{
	if (d == NULL)
		return;
	free(d->buf);
	free(d);
}

size_t watch_decoder_pending(const struct watch_decoder *d)
{
	return d != NULL ? d->len : 0;
}

const char *watch_event_type_name(enum watch_event_type type)
{
	switch (type) {
	case WATCH_ADDED:
		return "ADDED";
	case WATCH_MODIFIED:
		return "MODIFIED";
	case WATCH_DELETED:
		return "DELETED";
	case WATCH_BOOKMARK:
		return "BOOKMARK";
	case WATCH_ERROR:
		return "ERROR";
	case WATCH_OPENED:
		return "OPENED";
	}
	return "UNKNOWN";
}

static int type_of(const char *s, enum watch_event_type *t)
{
	for (int i = WATCH_ADDED; i <= WATCH_ERROR; i++) {
		if (strcmp(s, watch_event_type_name((enum watch_event_type)i)) == 0) {
			*t = (enum watch_event_type)i;
			return 0;
		}
	}
	return -1;
}

static int is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

/* Quote the start of a bad line in err, control bytes replaced. */
static void bad_line(const struct watch_decoder *d, const char *why, const char *line, size_t len,
                     char *err, size_t errlen)
{
	char q[QUOTE_MAX + 1];
	size_t n = len < QUOTE_MAX ? len : QUOTE_MAX;

	for (size_t i = 0; i < n; i++)
		q[i] = (unsigned char)line[i] < 0x20 || line[i] == 0x7f ? '?' : line[i];
	q[n] = '\0';
	errbuf_set(err, errlen, "watch event %lu: %s: %s%s", d->events + 1, why, q,
	           len > n ? "..." : "");
}

/* Decode one complete line (without its "\n") and call fn. */
static int deliver(struct watch_decoder *d, const char *line, size_t len, watch_event_fn fn,
                   void *ctx, char *err, size_t errlen)
{
	const char *end = NULL;
	const cJSON *type, *obj;
	enum watch_event_type t;
	cJSON *ev = NULL;
	int rc = WATCH_EPARSE;

	while (len > 0 && is_space(line[len - 1]))
		len--;
	while (len > 0 && is_space(line[0])) {
		line++;
		len--;
	}
	if (len == 0)
		return 0; /* blank line */
	/* The length form: line is not NUL-terminated when parsed in place. cJSON skips every
	 * byte <= 0x20 as whitespace, NUL included: refuse NUL ourselves. */
	if (memchr(line, '\0', len) == NULL)
		ev = cJSON_ParseWithLengthOpts(line, len, &end, 0);
	if (ev == NULL || end != line + len) {
		bad_line(d, "not one JSON value", line, len, err, errlen);
		goto out;
	}
	type = json_at(ev, "type", NULL);
	obj = json_at(ev, "object", NULL);
	if (!cJSON_IsObject(ev) || !cJSON_IsString(type) || type->valuestring == NULL) {
		bad_line(d, "not an object with a string \"type\"", line, len, err, errlen);
		goto out;
	}
	if (type_of(type->valuestring, &t) < 0) {
		bad_line(d, "unknown event type", line, len, err, errlen);
		goto out;
	}
	if (!cJSON_IsObject(obj)) {
		bad_line(d, "\"object\" missing or not an object", line, len, err, errlen);
		goto out;
	}
	rc = 0;
	if (fn != NULL && fn(ctx, t, obj) != 0) {
		errbuf_set(err, errlen, "watch event %lu (%s): stopped by the callback",
		           d->events + 1, type->valuestring);
		rc = WATCH_ESTOP;
	}
	d->events++;
out:
	cJSON_Delete(ev);
	return rc;
}

/* Append n bytes of an unfinished line; the cap is checked before any allocation. */
static int append(struct watch_decoder *d, const char *p, size_t n, char *err, size_t errlen)
{
	if (n == 0)
		return 0;
	if (n > d->max - d->len) {
		errbuf_set(err, errlen, "watch event %lu: over %zu bytes", d->events + 1, d->max);
		return WATCH_ETOOBIG;
	}
	if (d->len + n > d->cap) {
		size_t cap = d->cap ? d->cap : BUF_START;
		char *nb;

		while (cap < d->len + n && cap < d->max)
			cap = cap > d->max / 2 ? d->max : cap * 2;
		if (cap < d->len + n)
			cap = d->len + n;
		nb = realloc(d->buf, cap);
		if (nb == NULL) {
			errbuf_set(err, errlen, "watch event %lu: out of memory", d->events + 1);
			return WATCH_ENOMEM;
		}
		d->buf = nb;
		d->cap = cap;
	}
	memcpy(d->buf + d->len, p, n);
	d->len += n;
	return 0;
}

static int spent(const struct watch_decoder *d, char *err, size_t errlen)
{
	errbuf_set(err, errlen, "watch decoder: stopped by an earlier error");
	return d->dead;
}

int watch_decoder_feed(struct watch_decoder *d, const char *data, size_t len, watch_event_fn fn,
                       void *ctx, char *err, size_t errlen)
{
	int rc = 0;

	if (d == NULL || (data == NULL && len > 0)) {
		errbuf_set(err, errlen, "watch decoder: no decoder or no data");
		return WATCH_EPARSE;
	}
	if (d->dead)
		return spent(d, err, errlen);
	while (len > 0) {
		const char *nl = memchr(data, '\n', len);
		size_t seg = nl != NULL ? (size_t)(nl - data) : len;

		if ((rc = append(d, data, d->len > 0 || nl == NULL ? seg : 0, err, errlen)) < 0)
			goto out;
		if (nl == NULL)
			break;
		if (d->len == 0 && seg > d->max) {
			errbuf_set(err, errlen, "watch event %lu: over %zu bytes", d->events + 1,
			           d->max);
			rc = WATCH_ETOOBIG;
			goto out;
		}
		rc = d->len > 0 ? deliver(d, d->buf, d->len, fn, ctx, err, errlen)
		                : deliver(d, data, seg, fn, ctx, err, errlen);
		d->len = 0;
		if (rc < 0)
			goto out;
		data = nl + 1;
		len -= seg + 1;
	}
out:
	if (rc < 0)
		d->dead = rc;
	return rc;
}

int watch_decoder_finish(struct watch_decoder *d, watch_event_fn fn, void *ctx, char *err,
                         size_t errlen)
{
	int rc;

	if (d == NULL) {
		errbuf_set(err, errlen, "watch decoder: no decoder");
		return WATCH_EPARSE;
	}
	if (d->dead)
		return spent(d, err, errlen);
	rc = deliver(d, d->buf, d->len, fn, ctx, err, errlen);
	d->len = 0;
	d->dead = rc < 0 ? rc : WATCH_EPARSE;
	return rc;
}

int watch_status_code(const struct cJSON *status)
{
	const cJSON *code = json_at(status, "code", NULL);

	if (!cJSON_IsNumber(code) || code->valuedouble < 1 || code->valuedouble > 999)
		return 0;
	return (int)code->valuedouble;
}

const char *watch_resource_version(const struct cJSON *object)
{
	return json_str(object, "metadata", "resourceVersion", NULL);
}
