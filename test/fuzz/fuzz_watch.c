/*
 * Fuzz target: the watch event stream decoder (lib/kube/watch.h).
 * The first two bytes choose how the rest is cut into feeds (the transport cuts at any byte)
 * and the event cap; the stream is decoded in those pieces and again in one piece.
 * Properties: the events and the final result do not depend on the cuts (unless the cap
 * stopped a line earlier in one of them: then both must end in WATCH_ETOOBIG); a spent decoder
 * stays spent with the same code and no more events; events have known types and an object;
 * nothing stays buffered after a clean finish.
 */
#include "fuzz.h"
#include "watch.h"

struct seen {
	unsigned long n;
	unsigned long hash; /* of the types and the objects' resourceVersions, in order */
	int stop_after;     /* return nonzero on this event (0: never) */
};

static int on_event(void *ctx, enum watch_event_type type, const cJSON *object)
{
	struct seen *s = ctx;
	if (type < WATCH_ADDED || type > WATCH_ERROR)
		fuzz_fail("event of type %d", (int)type);
	if (object == NULL || !cJSON_IsObject(object))
		fuzz_fail("%s event without an object", watch_event_type_name(type));
	const char *rv = watch_resource_version(object);
	int code = watch_status_code(object);
	if (code < 0 || code > 999)
		fuzz_fail("status code %d", code);
	s->hash = s->hash * 31 + (unsigned long)type;
	for (const char *p = rv ? rv : ""; *p; p++)
		s->hash = s->hash * 131 + (unsigned char)*p;
	s->n++;
	return s->stop_after != 0 && s->n == (unsigned long)s->stop_after;
}

static int decode(const char *data, size_t size, size_t cap, const uint8_t *cuts, size_t ncuts,
                  struct seen *s)
{
	struct watch_decoder *d = watch_decoder_new(cap);
	char err[256];
	size_t off = 0, k = 0;
	int rc = 0;

	if (d == NULL)
		abort();
	while (off < size && rc == 0) {
		size_t step = ncuts ? (size_t)cuts[k++ % ncuts] + 1 : size - off;
		if (step > size - off)
			step = size - off;
		err[0] = '\0';
		rc = watch_decoder_feed(d, data + off, step, on_event, s, err, sizeof(err));
		off += step;
		if (rc == 0 && watch_decoder_pending(d) > cap)
			fuzz_fail("%zu bytes pending over the cap %zu", watch_decoder_pending(d),
			          cap);
	}
	if (rc == 0) {
		rc = watch_decoder_finish(d, on_event, s, err, sizeof(err));
		if (rc == 0 && watch_decoder_pending(d) != 0)
			fuzz_fail("bytes pending after a clean finish");
	}
	if (rc < 0) {
		unsigned long before = s->n;
		if (rc < WATCH_ESTOP)
			fuzz_fail("unknown code %d", rc);
		if (!fuzz_err_ok(err, sizeof(err)))
			fuzz_fail("code %d without a reason", rc);
		/* Spent: the same code again, no event. */
		if (watch_decoder_feed(d, "{}\n", 3, on_event, s, err, sizeof(err)) != rc ||
		    s->n != before)
			fuzz_fail("a spent decoder decoded again");
	}
	watch_decoder_free(d);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	size_t cap = 64 + (size_t)data[0] * 16; /* 64..4144 bytes: small enough to be hit */
	size_t ncuts = data[1] % 8;
	if (size < 2 + ncuts)
		return 0;
	const uint8_t *cuts = data + 2;
	const char *body = (const char *)data + 2 + ncuts;
	size_t n = size - 2 - ncuts;
	struct seen a = {0, 0, 0}, b = {0, 0, 0};

	int ra = decode(body, n, cap, cuts, ncuts, &a);
	int rb = decode(body, n, cap, NULL, 0, &b);
	/* Over-cap lines are refused as soon as seen: the pieces decide how early. */
	if (ra != rb && !(ra == WATCH_ETOOBIG || rb == WATCH_ETOOBIG))
		fuzz_fail("cut stream %d, whole stream %d", ra, rb);
	if (ra == rb && ra != WATCH_ETOOBIG && (a.n != b.n || a.hash != b.hash))
		fuzz_fail("events differ with the cuts: %lu vs %lu", a.n, b.n);

	/* A callback that stops: WATCH_ESTOP right then. */
	if (b.n > 0) {
		struct seen c = {0, 0, 1};
		int rc = decode(body, n, cap, NULL, 0, &c);
		if (rc != WATCH_ESTOP || c.n != 1)
			fuzz_fail("stop at the first event: rc %d after %lu events", rc, c.n);
	}
	return 0;
}
