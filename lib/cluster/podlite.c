/*
 * podlite: the compact store of pods that ask for no GPU. See podlite.h.
 *
 * Three arrays of 32-bit indexes and one arena: recs (the records, a free list through next),
 * buckets (heads of the chains, by FNV-1a of "ns/name", the hash cache.c uses for its keys),
 * the namespaces (a chained table of their own, each with a count of its pods) and names.
 */
#include "podlite.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#define MIN_BUCKETS 1024u
#define NS_BUCKETS  1024u

struct ns_ent {
	char *name;    /* NULL: a free slot */
	uint32_t next; /* in its bucket's chain, or in the free list */
	uint32_t refs; /* pods of this namespace */
};

struct podlite {
	struct podlite_rec *recs;
	uint32_t n_recs, cap_recs, free_rec; /* ids below n_recs were used once */
	uint32_t *buckets, n_buckets;
	size_t count;
	char *names;
	size_t names_len, names_cap, names_dead; /* dead: bytes of removed names */
	struct ns_ent *ns;
	uint32_t n_ns, cap_ns, free_ns;
	uint32_t ns_buckets[NS_BUCKETS];
	size_t ns_bytes; /* heap() of the namespace strings */
};

static size_t heap(const void *p)
{
	return p != NULL ? malloc_usable_size((void *)p) + sizeof(size_t) : 0;
}

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

/* FNV-1a of "ns/name", computed in parts. */
static size_t hash_key(const char *ns, const char *name)
{
	uint64_t h = fnv(1469598103934665603ull, ns);
	h ^= (unsigned char)'/';
	h *= 1099511628211ull;
	return (size_t)fnv(h, name);
}

struct podlite *podlite_new(void)
{
	struct podlite *s = calloc(1, sizeof(*s));

	if (s == NULL || (s->buckets = malloc(MIN_BUCKETS * sizeof(*s->buckets))) == NULL) {
		free(s);
		return NULL;
	}
	memset(s->buckets, 0xff, MIN_BUCKETS * sizeof(*s->buckets));
	s->n_buckets = MIN_BUCKETS;
	s->free_rec = s->free_ns = PODLITE_NONE;
	memset(s->ns_buckets, 0xff, sizeof(s->ns_buckets));
	return s;
}

void podlite_free(struct podlite *s)
{
	if (s == NULL)
		return;
	for (uint32_t i = 0; i < s->n_ns; i++)
		free(s->ns[i].name);
	free(s->ns);
	free(s->recs);
	free(s->buckets);
	free(s->names);
	free(s);
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

int podlite_uid_parse(const char *uid, uint8_t out[16])
{
	size_t j = 0;

	if (uid == NULL || strlen(uid) != PODLITE_UID_LEN)
		return -1;
	for (size_t i = 0; i < PODLITE_UID_LEN;) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (uid[i++] != '-')
				return -1;
			continue;
		}
		int hi = hexval(uid[i]), lo = hexval(uid[i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[j++] = (uint8_t)(hi << 4 | lo);
		i += 2;
	}
	return 0;
}

void podlite_uid_format(const uint8_t uid[16], char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (size_t j = 0; j < 16; j++) {
		if (j == 4 || j == 6 || j == 8 || j == 10)
			out[o++] = '-';
		out[o++] = hex[uid[j] >> 4];
		out[o++] = hex[uid[j] & 15];
	}
	out[o] = '\0';
}

/* The namespace's slot, or PODLITE_NONE. */
static uint32_t ns_find(const struct podlite *s, const char *ns)
{
	uint32_t i = s->ns_buckets[hash_key(ns, "") & (NS_BUCKETS - 1)];
	while (i != PODLITE_NONE && strcmp(s->ns[i].name, ns) != 0)
		i = s->ns[i].next;
	return i;
}

/* The slot of ns, made when new (refs 0). PODLITE_NONE when full or out of memory. */
static uint32_t ns_intern(struct podlite *s, const char *ns)
{
	uint32_t i = ns_find(s, ns);
	char *copy;

	if (i != PODLITE_NONE)
		return i;
	if (s->free_ns == PODLITE_NONE && s->n_ns == s->cap_ns) {
		uint32_t cap = s->cap_ns ? s->cap_ns * 2 : 16;
		struct ns_ent *v;
		if (s->cap_ns >= PODLITE_NS_MAX)
			return PODLITE_NONE;
		if (cap > PODLITE_NS_MAX)
			cap = PODLITE_NS_MAX;
		if ((v = realloc(s->ns, cap * sizeof(*v))) == NULL)
			return PODLITE_NONE;
		s->ns = v;
		s->cap_ns = cap;
	}
	if ((copy = strdup(ns)) == NULL)
		return PODLITE_NONE;
	if (s->free_ns != PODLITE_NONE) {
		i = s->free_ns;
		s->free_ns = s->ns[i].next;
	} else {
		i = s->n_ns++;
	}
	size_t b = hash_key(ns, "") & (NS_BUCKETS - 1);
	s->ns[i] = (struct ns_ent){.name = copy, .next = s->ns_buckets[b], .refs = 0};
	s->ns_buckets[b] = i;
	s->ns_bytes += heap(copy);
	return i;
}

static void ns_unref(struct podlite *s, uint32_t i)
{
	uint32_t *pp;

	if (--s->ns[i].refs > 0)
		return;
	pp = &s->ns_buckets[hash_key(s->ns[i].name, "") & (NS_BUCKETS - 1)];
	while (*pp != i)
		pp = &s->ns[*pp].next;
	*pp = s->ns[i].next;
	s->ns_bytes -= heap(s->ns[i].name);
	free(s->ns[i].name);
	s->ns[i].name = NULL;
	s->ns[i].next = s->free_ns;
	s->free_ns = i;
}

uint32_t podlite_find(const struct podlite *s, const char *ns, const char *name)
{
	uint32_t n = ns_find(s, ns), i;

	if (n == PODLITE_NONE)
		return PODLITE_NONE;
	i = s->buckets[hash_key(ns, name) & (s->n_buckets - 1)];
	while (i != PODLITE_NONE &&
	       (s->recs[i].ns != n || strcmp(s->names + s->recs[i].name, name) != 0))
		i = s->recs[i].next;
	return i;
}

/* Double the buckets when the load passes 1; a failed grow keeps the old ones (slower). */
static void grow_buckets(struct podlite *s)
{
	uint32_t nb = s->n_buckets * 2, *b;

	if (s->count <= s->n_buckets || nb == 0 || (b = malloc(nb * sizeof(*b))) == NULL)
		return;
	memset(b, 0xff, nb * sizeof(*b));
	for (uint32_t i = 0; i < s->n_recs; i++) {
		struct podlite_rec *r = &s->recs[i];
		if (!(r->flags & PODLITE_USED))
			continue;
		size_t j = hash_key(s->ns[r->ns].name, s->names + r->name) & (nb - 1);
		r->next = b[j];
		b[j] = i;
	}
	free(s->buckets);
	s->buckets = b;
	s->n_buckets = nb;
}

/* Room for len more bytes of names: compact the holes first when they are half of it. */
static int names_room(struct podlite *s, size_t len)
{
	if (s->names_dead > s->names_len / 2 && s->names_dead > 4096) {
		char *v = malloc(s->names_len - s->names_dead + len + 1);
		size_t o = 0;
		if (v == NULL)
			return PODLITE_ENOMEM;
		for (uint32_t i = 0; i < s->n_recs; i++) {
			struct podlite_rec *r = &s->recs[i];
			if (!(r->flags & PODLITE_USED))
				continue;
			size_t n = strlen(s->names + r->name) + 1;
			memcpy(v + o, s->names + r->name, n);
			r->name = (uint32_t)o;
			o += n;
		}
		free(s->names);
		s->names = v;
		s->names_cap = s->names_len - s->names_dead + len + 1;
		s->names_len = o;
		s->names_dead = 0;
	}
	if (s->names_len + len > s->names_cap) {
		size_t cap = s->names_cap + s->names_cap / 2 + len + 4096;
		char *v;
		if (cap > UINT32_MAX || (v = realloc(s->names, cap)) == NULL)
			return PODLITE_ENOMEM;
		s->names = v;
		s->names_cap = cap;
	}
	return 0;
}

/* A free record id (recs may move). PODLITE_NONE when out of memory or ids. */
static uint32_t rec_alloc(struct podlite *s)
{
	uint32_t i = s->free_rec;

	if (i != PODLITE_NONE) {
		s->free_rec = s->recs[i].next;
		return i;
	}
	if (s->n_recs == s->cap_recs) {
		size_t cap = s->cap_recs ? (size_t)s->cap_recs + s->cap_recs / 2 : 1024;
		struct podlite_rec *v;
		if (cap > PODLITE_IDS_MAX)
			cap = PODLITE_IDS_MAX;
		if (cap <= s->cap_recs || (v = realloc(s->recs, cap * sizeof(*v))) == NULL)
			return PODLITE_NONE;
		s->recs = v;
		s->cap_recs = (uint32_t)cap;
	}
	return s->n_recs++;
}

int podlite_insert(struct podlite *s, const char *ns, const char *name, const uint8_t uid[16],
                   uint32_t *id)
{
	size_t len = strlen(name) + 1;
	uint32_t n, i;

	if (len < 2 || len > PODLITE_NAME_MAX + 1)
		return PODLITE_EFULL;
	if ((n = ns_intern(s, ns)) == PODLITE_NONE)
		return s->n_ns >= PODLITE_NS_MAX ? PODLITE_EFULL : PODLITE_ENOMEM;
	s->ns[n].refs++; /* before anything can fail: ns_unref undoes it */
	if (names_room(s, len) != 0 || (i = rec_alloc(s)) == PODLITE_NONE) {
		ns_unref(s, n);
		return PODLITE_ENOMEM;
	}
	struct podlite_rec *r = &s->recs[i];
	memcpy(s->names + s->names_len, name, len);
	r->name = (uint32_t)s->names_len;
	s->names_len += len;
	r->ns = (uint16_t)n;
	r->node = 0;
	r->flags = PODLITE_USED;
	memcpy(r->uid, uid, 16);
	size_t b = hash_key(ns, name) & (s->n_buckets - 1);
	r->next = s->buckets[b];
	s->buckets[b] = i;
	s->count++;
	grow_buckets(s);
	*id = i;
	return 0;
}

void podlite_remove(struct podlite *s, uint32_t id)
{
	struct podlite_rec *r = &s->recs[id];
	const char *name = s->names + r->name;
	uint32_t *pp = &s->buckets[hash_key(s->ns[r->ns].name, name) & (s->n_buckets - 1)];

	while (*pp != id)
		pp = &s->recs[*pp].next;
	*pp = r->next;
	s->names_dead += strlen(name) + 1;
	ns_unref(s, r->ns);
	r->flags = 0;
	r->next = s->free_rec;
	s->free_rec = id;
	s->count--;
}

struct podlite_rec *podlite_at(struct podlite *s, uint32_t id)
{
	return &s->recs[id];
}

const char *podlite_ns(const struct podlite *s, uint32_t id)
{
	return s->ns[s->recs[id].ns].name;
}

const char *podlite_name(const struct podlite *s, uint32_t id)
{
	return s->names + s->recs[id].name;
}

uint32_t podlite_ids(const struct podlite *s)
{
	return s->n_recs;
}

size_t podlite_count(const struct podlite *s)
{
	return s->count;
}

size_t podlite_bytes(const struct podlite *s)
{
	return heap(s) + heap(s->recs) + heap(s->buckets) + heap(s->names) + heap(s->ns) +
	       s->ns_bytes;
}
