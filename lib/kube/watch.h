/*
 * watch: a pure, incremental decoder of a Kubernetes watch stream (part of the kube client box
 * of ARCHITECTURE.md; no I/O).
 *
 * The API server answers GET ...?watch=1 with one JSON object per event, each followed by "\n":
 *   {"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}
 * The transport hands over the body in chunks cut at arbitrary bytes; the decoder keeps the
 * unfinished line in its own buffer (grown on demand up to the cap, never beyond) and calls back
 * once per complete event, in order. Blank lines (and a "\r" before "\n") are ignored. A
 * complete line met in the caller's data with nothing buffered is parsed in place, not copied.
 *
 * Errors: 0 on success; WATCH_E* codes; err gets a one-line reason. After any negative return
 * the decoder is spent: every later feed returns the same code without calling back (a stream
 * cannot be resynchronised: the caller rewatches or relists with a new decoder).
 *
 * Threads: a decoder belongs to one thread at a time; different decoders are independent. The
 * helpers below are pure and thread-safe.
 */
#ifndef GMG_WATCH_H
#define GMG_WATCH_H

#include <stddef.h>

struct cJSON;

enum watch_event_type {
	WATCH_ADDED = 1,
	WATCH_MODIFIED,
	WATCH_DELETED,
	WATCH_BOOKMARK,
	WATCH_ERROR,
	WATCH_OPENED /* not an event of the stream: kube_watch's "the watch is open" (object NULL)
	              */
};

#define WATCH_EVENT_MAX (16u * 1024u * 1024u) /* default cap on one event, bytes */

#define WATCH_ETOOBIG (-1) /* one event over the cap */
#define WATCH_EPARSE  (-2) /* a line that is not a JSON object with a known type and an object */
#define WATCH_ENOMEM  (-3)
#define WATCH_ESTOP   (-4) /* the callback returned nonzero: decoding stopped */

struct watch_decoder;

/* A decoder whose events may be up to max_event_bytes long (the line without its "\n"; 0 ->
 * WATCH_EVENT_MAX). Nothing is allocated until a line spans two feeds. NULL when out of
 * memory. Caller owns it; release with watch_decoder_free. */
struct watch_decoder *watch_decoder_new(size_t max_event_bytes);
/* Frees the decoder and its line buffer. NULL is a no-op. */
void watch_decoder_free(struct watch_decoder *d);

/* Called once per decoded event. object is borrowed, valid during the call only (the decoder
 * frees it on return). Return 0 to go on, nonzero to stop (the feed returns WATCH_ESTOP). */
typedef int (*watch_event_fn)(void *ctx, enum watch_event_type type, const struct cJSON *object);

/*
 * Decode len bytes of the stream (any cut: part of an event, several events). fn is called for
 * every event completed by these bytes, in order, before the feed returns. 0 when every complete
 * event was delivered (an unfinished one stays buffered); WATCH_ETOOBIG as soon as the line being
 * read passes the cap (without waiting for its end), WATCH_EPARSE, WATCH_ENOMEM, WATCH_ESTOP.
 * data may be NULL when len is 0.
 */
int watch_decoder_feed(struct watch_decoder *d, const char *data, size_t len, watch_event_fn fn,
                       void *ctx, char *err, size_t errlen) __attribute__((warn_unused_result));

/* End of stream: a last event the server did not end with "\n" is decoded and delivered;
 * whitespace alone is nothing. Returns as watch_decoder_feed (WATCH_EPARSE for a truncated
 * event). The decoder is spent afterwards. */
int watch_decoder_finish(struct watch_decoder *d, watch_event_fn fn, void *ctx, char *err,
                         size_t errlen) __attribute__((warn_unused_result));

/* Bytes of an unfinished event currently buffered (0 between events). */
size_t watch_decoder_pending(const struct watch_decoder *d);

/* For an ERROR event's object (a metav1.Status): its "code" (e.g. 410), 0 if none or not a
 * number in 1..999. */
int watch_status_code(const struct cJSON *status);

/* metadata.resourceVersion of an object, NULL if absent or not a string (borrowed from object). */
const char *watch_resource_version(const struct cJSON *object);

/* "ADDED", "MODIFIED", ... for a type; "UNKNOWN" otherwise. */
const char *watch_event_type_name(enum watch_event_type type);

#endif
