/*
 * text: see text.h.
 */
#include "text.h"

#include <string.h>

void text_no_percent(char *s, size_t cap)
{
	static const char sign[] = "\xef\xbc\x85"; /* U+FF05 in UTF-8 */
	const size_t w = sizeof(sign) - 1;

	for (char *p = strchr(s, '%'); p != NULL; p = strchr(p, '%')) {
		size_t off = (size_t)(p - s), tail = strlen(p + 1);

		if (off + w >= cap) {
			*p = '\0';
			break;
		}
		if (off + w + tail >= cap) {
			tail = cap - 1 - off - w;
			while (tail > 0 && ((unsigned char)p[1 + tail] & 0xc0) == 0x80)
				tail--; /* p[1 + tail], the first byte dropped, must start a
				           character */
		}
		memmove(p + w, p + 1, tail);
		memcpy(p, sign, w);
		p[w + tail] = '\0';
		p += w;
	}
}
