/*
 * text: rewriting text a user reads in a Kubernetes event.
 *
 * No '%' in what kube-scheduler shows: it passes a refused binding's message (the webhook's
 * denial) and a FitError's text (the extender's FailedNodes reasons, its Error) to Eventf as
 * the format string (pkg/scheduler/schedule_one.go), so "50%" would read "50%!(NOVERB)" in the
 * FailedScheduling event. Our own texts spell "percent"; a '%' echoed from elsewhere (a
 * declared value, an annotation, an API server error) becomes U+FF05 FULLWIDTH PERCENT SIGN,
 * which reads the same and is no format verb.
 *
 * Pure, thread-safe, no allocation.
 */
#ifndef GMG_TEXT_H
#define GMG_TEXT_H

#include <stddef.h>

/* Replace every '%' of the NUL-terminated s (a buffer of cap bytes) by U+FF05 in place. Text
 * pushed past cap by the wider sign is cut at a UTF-8 character boundary. */
void text_no_percent(char *s, size_t cap);

#endif
