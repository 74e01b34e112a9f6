/*
 * outcome: what one review decided, before any wire format. See outcome.h.
 */
#include "outcome.h"

#include "kube.h"
#include "monotime.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void outcome_allow(struct outcome *o, const char *reason, int quiet)
{
	o->allowed = 1;
	o->reason = reason;
	o->mdec = METRICS_ALLOWED;
	o->quiet = quiet;
	o->by_mode = NULL;
}

void outcome_deny(struct outcome *o, enum metrics_decision mdec, int code, const char *reason,
                  const char *fmt, ...)
{
	va_list ap;
	o->allowed = 0;
	o->code = code;
	o->status_reason = code >= 500 ? "InternalError" : "Forbidden";
	o->reason = reason;
	o->mdec = mdec;
	o->quiet = 0;
	o->by_mode = NULL;
	va_start(ap, fmt);
	if (vsnprintf(o->message, sizeof(o->message), fmt, ap) < 0)
		o->message[0] = '\0';
	va_end(ap);
}

void outcome_warn(struct outcome *o, const char *text)
{
	if (text == NULL || text[0] == '\0' || o->n_warnings >= OUTCOME_WARNINGS)
		return;
	char *w = o->warnings[o->n_warnings++];
	size_t n = strlen(text); /* producers NUL-terminate within their buffers */
	if (n >= sizeof(o->warnings[0]))
		n = sizeof(o->warnings[0]) - 1;
	memcpy(w, text, n);
	w[n] = '\0';
}

void outcome_fail_closed(struct outcome *o, const char *pod, const char *call, int rc,
                         const char *why)
{
	if (rc == KUBE_ENOTFOUND) { /* the API server answered: the object is not there */
		outcome_deny(o, METRICS_DENIED, 403, "NotFound",
		             "cannot check %s: %s: not found (%s)", pod, call, why);
		return;
	}
	outcome_deny(
	    o, METRICS_ERROR, 500, "APIServerUnavailable",
	    "cannot check %s: the API server could not be asked (%s failed: %s); denied to keep "
	    "GPU memory safe, retry later",
	    pod, call, why);
}

int outcome_over_budget(struct outcome *o, unsigned long long budget_ms, const char *pod,
                        const char *call)
{
	double spent_ms = (monotime_s() - o->t0) * 1000.0;
	if (budget_ms == 0 || spent_ms < (double)budget_ms)
		return 0;
	outcome_deny(
	    o, METRICS_ERROR, 500, "APIServerUnavailable",
	    "cannot check %s: no time left to ask the API server (%.0f ms since the review "
	    "arrived, before %s; budget %llu ms): the API server is too slow or the webhook too "
	    "busy; denied to keep GPU memory safe, retry later",
	    pod, spent_ms, call, budget_ms);
	return 1;
}

void outcome_audit_mode(struct outcome *o, const char *text)
{
	static const char sep[] = " | ", tag[] = "--mode audit: ";
	size_t len = strlen(o->audit), cap = sizeof(o->audit) - 1; /* room for the NUL */
	const char *parts[3] = {len ? sep : "", tag, text};

	for (size_t i = 0; i < 3 && len < cap; i++) {
		size_t n = strlen(parts[i]);
		if (n > cap - len)
			n = cap - len; /* the API server keeps a bounded annotation anyway */
		memcpy(o->audit + len, parts[i], n);
		len += n;
	}
	o->audit[len] = '\0';
}

void outcome_keep_audit(struct outcome *o, const struct policyset_result *ps)
{
	size_t len = 0;

	o->audit[0] = '\0';
	o->n_audit = 0;
	for (size_t i = 0; i < ps->n_audit; i++) {
		int n = snprintf(o->audit + len, sizeof(o->audit) - len,
		                 "%sGPUMemoryPolicy \"%s\" (audit): %s", i ? " | " : "",
		                 ps->audit[i].policy, ps->audit[i].message);
		if (n > 0)
			len += (size_t)n < sizeof(o->audit) - len ? (size_t)n
			                                          : sizeof(o->audit) - len - 1;
		o->audit_reasons[o->n_audit++] = ps->audit[i].reason;
	}
}

void outcome_reserved(struct outcome *o, const char *uid)
{
	snprintf(o->reserved_uid, sizeof(o->reserved_uid), "%s", uid ? uid : "");
}
