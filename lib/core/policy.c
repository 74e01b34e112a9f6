/*
 * policy: the placement decision and the message a user reads.
 */
#include "policy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"
#include "satmath.h"

#define RATIO_MAX 32 /* "4294967295.9 percent" */

/* A bounded string builder over a fixed buffer: appends stop at the cap, never overflow. */
struct msgbuf {
	char *buf;
	size_t cap, len;
};

static void msg_add(struct msgbuf *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void msg_add(struct msgbuf *m, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (m->len + 1 >= m->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(m->buf + m->len, m->cap - m->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		m->buf[m->len] = '\0';
	else
		m->len = (size_t)n < m->cap - m->len ? m->len + (size_t)n : m->cap - 1;
}

/* floor(100 * part / whole), capped at 9999 for display. */
static unsigned percent(uint64_t part, uint64_t whole)
{
	if (whole == 0 || part / whole >= 99)
		return whole == 0 ? 0 : 9999;
	/* Exabyte sizes lose a few low bits here, which a whole percent never shows. */
	while (whole > UINT64_MAX / 100) {
		whole >>= 1;
		part >>= 1;
	}
	return (unsigned)((part / whole) * 100 + (part % whole) * 100 / whole);
}

/* "90 percent" or "92.5 percent" for a threshold in ppm (at most one decimal shown). No '%'
 * in any message: kube-scheduler passes a bind error to Eventf as the format string
 * (pkg/scheduler/schedule_one.go), so "90%" would reach users as "90%!l(MISSING)". */
static void fmt_ratio(uint64_t ppm, char *buf, size_t cap)
{
	uint64_t tenths = (ppm + 500) / 1000; /* per mille, rounded */

	if (tenths % 10 == 0)
		snprintf(buf, cap, "%u percent", (unsigned)(tenths / 10));
	else
		snprintf(buf, cap, "%u.%u percent", (unsigned)(tenths / 10),
		         (unsigned)(tenths % 10));
}

void policy_format_ratio(double ratio, char *buf, size_t cap)
{
	fmt_ratio(quantity_ratio_ppm(ratio), buf, cap);
}

static int check_input(const struct policy_input *in, struct policy_decision *out)
{
	const char *why = NULL;

	if (in == NULL)
		why = "no input";
	else if (!(in->threshold > 0.0 && in->threshold <= 1.0))
		why = "threshold outside (0,1]";
	else if (in->warn_threshold != in->warn_threshold || in->warn_threshold > 1.0)
		why = "warn threshold above 1";
	else if (in->capacity_bytes == 0)
		why = "zero GPU memory capacity";
	else if (in->n_consumers > 0 && in->consumers == NULL)
		why = "consumers missing";
	if (why == NULL)
		return 0;
	snprintf(out->message, sizeof(out->message), "policy: invalid input: %s", why);
	return -1;
}

/* "; already there: a 20Gi, b 20Gi, ... and 3 more" within what is left of the buffer. */
static void add_consumers(struct msgbuf *m, const struct policy_input *in)
{
	/* Room kept for the longest ", ... and N more". */
	const size_t tail = 40;
	size_t shown = 0;

	if (in->n_consumers == 0) {
		char used[QUANTITY_FMT_MAX];

		if (in->used_bytes > 0) {
			quantity_format(in->used_bytes, used, sizeof(used));
			msg_add(m, "; already there: %s", used);
		} else {
			msg_add(m, "; nothing else there");
		}
		return;
	}
	msg_add(m, "; already there: ");
	for (size_t i = 0; i < in->n_consumers && i < POLICY_TOP_CONSUMERS; i++) {
		char b[QUANTITY_FMT_MAX];
		const struct policy_consumer *c = &in->consumers[i];
		size_t name_len = strnlen(c->name, POLICY_NAME_MAX);

		quantity_format(c->bytes, b, sizeof(b));
		if (m->len + name_len + strlen(b) + 4 + tail >= m->cap)
			break;
		msg_add(m, "%s%.*s %s", shown ? ", " : "", (int)name_len, c->name, b);
		shown++;
	}
	if (in->n_consumers_total > shown)
		msg_add(m, "%s... and %zu more", shown ? ", " : "", in->n_consumers_total - shown);
}

/* The over-threshold text: the header's message shape. */
static void over_message(const struct policy_input *in, const struct policy_decision *out,
                         uint64_t ppm, struct msgbuf *m)
{
	char d[QUANTITY_FMT_MAX], t[QUANTITY_FMT_MAX], c[QUANTITY_FMT_MAX], b[QUANTITY_FMT_MAX];
	char r[RATIO_MAX];

	if (m->cap == 0)
		return;
	quantity_format(in->demand_bytes, d, sizeof(d));
	quantity_format(out->total_bytes, t, sizeof(t));
	quantity_format(in->capacity_bytes, c, sizeof(c));
	quantity_format(out->budget_bytes, b, sizeof(b));
	fmt_ratio(ppm, r, sizeof(r));
	msg_add(
	    m,
	    "placing %s (%s) on %s would declare %s of %s GPU memory (%u percent), above the %s "
	    "limit (%s)",
	    in->pod, d, in->node, t, c, percent(out->total_bytes, in->capacity_bytes), r, b);
	add_consumers(m, in);
	if (in->pool_note != NULL && in->pool_note[0] != '\0')
		msg_add(m, "; %s", in->pool_note);
}

/*
 * Never fits: the pod alone is over the node's budget, or one container's per-GPU share is
 * over one GPU's budget. Returns 1 and writes the message when so.
 */
static int never_fits(const struct policy_input *in, const struct policy_decision *out,
                      uint64_t ppm, struct msgbuf *m)
{
	char d[QUANTITY_FMT_MAX], c[QUANTITY_FMT_MAX], b[QUANTITY_FMT_MAX], r[RATIO_MAX];
	uint64_t gpu_budget = quantity_ppm_of(in->per_gpu_bytes, ppm);
	int per_gpu = in->per_gpu_bytes > 0 && in->max_per_gpu_bytes > gpu_budget;

	if (m->cap == 0 || (!per_gpu && in->demand_bytes <= out->budget_bytes))
		return per_gpu || in->demand_bytes > out->budget_bytes;
	fmt_ratio(ppm, r, sizeof(r));
	if (per_gpu) {
		quantity_format(in->max_per_gpu_bytes, d, sizeof(d));
		quantity_format(in->per_gpu_bytes, c, sizeof(c));
		quantity_format(gpu_budget, b, sizeof(b));
		const char *what = in->piece_what ? in->piece_what : "GPU";

		msg_add(m,
		        "%s can never fit on %s: container \"%s\" declares %s per %s, above the %s "
		        "limit of one %s's %s (%s)",
		        in->pod, in->node,
		        in->max_per_gpu_container ? in->max_per_gpu_container : "?", d, what, r,
		        what, c, b);
		if (in->piece_rule != NULL && in->piece_rule[0] != '\0')
			msg_add(m, "; %s", in->piece_rule);
		return 1;
	}
	if (in->demand_bytes > out->budget_bytes) {
		quantity_format(in->demand_bytes, d, sizeof(d));
		quantity_format(in->capacity_bytes, c, sizeof(c));
		quantity_format(out->budget_bytes, b, sizeof(b));
		msg_add(m,
		        "%s can never fit on %s: it declares %s, above the %s limit of the node's "
		        "%s GPU memory (%s)",
		        in->pod, in->node, d, r, c, b);
		return 1;
	}
	return 0;
}

static void warn_message(const struct policy_input *in, const struct policy_decision *out,
                         uint64_t ppm, uint64_t warn_ppm, struct msgbuf *m)
{
	char d[QUANTITY_FMT_MAX], t[QUANTITY_FMT_MAX], c[QUANTITY_FMT_MAX], b[QUANTITY_FMT_MAX];
	char r[RATIO_MAX], w[RATIO_MAX];

	if (m->cap == 0)
		return;
	quantity_format(in->demand_bytes, d, sizeof(d));
	quantity_format(out->total_bytes, t, sizeof(t));
	quantity_format(in->capacity_bytes, c, sizeof(c));
	quantity_format(out->budget_bytes, b, sizeof(b));
	fmt_ratio(ppm, r, sizeof(r));
	fmt_ratio(warn_ppm, w, sizeof(w));
	msg_add(m,
	        "placing %s (%s) on %s brings it to %s of %s GPU memory (%u percent), above the %s "
	        "warning level; the limit is %s (%s)",
	        in->pod, d, in->node, t, c, percent(out->total_bytes, in->capacity_bytes), w, r, b);
	if (in->pool_note != NULL && in->pool_note[0] != '\0')
		msg_add(m, "; %s", in->pool_note);
}

int policy_decide(const struct policy_input *in, struct policy_decision *out)
{
	struct msgbuf m = {.buf = out->message, .cap = sizeof(out->message), .len = 0};
	struct policy_input local;
	uint64_t ppm, warn_ppm;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->verdict = POLICY_DENY;
	out->reason = "InvalidInput";
	if (check_input(in, out) != 0) {
		rc = -1;
		goto out;
	}
	/* Names are only printed: a missing one must not stop a decision. */
	local = *in;
	local.pod = in->pod ? in->pod : "(unnamed pod)";
	local.node = in->node ? in->node : "(unnamed node)";
	in = &local;
	if (in->no_message)
		m.cap = 0; /* msg_add writes nothing; the texts are not even formatted */
	ppm = quantity_ratio_ppm(in->threshold);
	warn_ppm =
	    in->warn_threshold > 0 ? quantity_ratio_ppm(in->warn_threshold) : QUANTITY_PPM + 1;
	out->budget_bytes = quantity_ppm_of(in->capacity_bytes, ppm);
	out->total_bytes = sat_add(in->used_bytes, in->demand_bytes);

	if (never_fits(in, out, ppm, &m)) {
		out->reason = "NeverFits";
		out->verdict = in->mode == POLICY_WARN ? POLICY_WARN_ONLY : POLICY_DENY_NEVER_FITS;
	} else if (out->total_bytes > out->budget_bytes) {
		over_message(in, out, ppm, &m);
		out->reason = "OverThreshold";
		out->verdict = in->mode == POLICY_WARN ? POLICY_WARN_ONLY : POLICY_DENY;
	} else if (warn_ppm < ppm &&
	           out->total_bytes > quantity_ppm_of(in->capacity_bytes, warn_ppm)) {
		warn_message(in, out, ppm, warn_ppm, &m);
		out->reason = "WarnThreshold";
		out->verdict = POLICY_ALLOW_WARN;
	} else {
		out->reason = "Fits";
		out->verdict = POLICY_ALLOW;
	}
	out->allowed = out->verdict == POLICY_ALLOW || out->verdict == POLICY_ALLOW_WARN ||
	               out->verdict == POLICY_WARN_ONLY;
out:
	return rc;
}
