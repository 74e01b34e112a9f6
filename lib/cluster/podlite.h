/*
 * podlite: the watch cache's compact store of pods that ask for no GPU (ARCHITECTURE.md,
 * "cluster view", inside the cache backend; cache.c is its only user and holds its lock).
 *
 * Most pods of a GPU cluster ask for no GPU (the bench's world: 850,000 of 1,000,000). For
 * those the cache only answers "is this Binding's pod known, and not a GPU pod" (cache_get_pod:
 * uid, node, finished, mirror), so such a pod is kept in the fewest bytes that still answer it:
 *   - one 32-byte record in one array (struct podlite_rec), found by a chained hash of
 *     "namespace/name" whose buckets and links are 32-bit indexes;
 *   - its namespace interned: a 16-bit index into a table of the namespaces in use, each
 *     string kept once and freed with its last pod (at most PODLITE_NS_MAX at a time);
 *   - its node as the caller's 32-bit index (cache.c's node slots), 0 when unbound;
 *   - its uid as the 16 bytes of the UUID (metadata.uid is a lowercase RFC 4122 text the API
 *     server generates; any other text cannot be stored here: the caller keeps that pod whole);
 *   - its name in one arena of NUL-terminated strings, 32-bit offsets; a removed name leaves a
 *     hole, and the arena is compacted when the holes pass half of it.
 * Bytes per pod: 32 + 4 (bucket, at load <= 1) + strlen(name) + 1, plus the arrays' unused
 * capacity (they grow by half); podlite_bytes() counts what is allocated.
 *
 * Not thread-safe: the caller's lock. Records move only on podlite_insert (the array grows);
 * a record's id never changes while it is stored. Names: at most PODLITE_NAME_MAX bytes.
 */
#ifndef GMG_PODLITE_H
#define GMG_PODLITE_H

#include <stddef.h>
#include <stdint.h>

#define PODLITE_NONE     UINT32_MAX
#define PODLITE_NS_MAX   65535 /* namespaces in use at once; past it PODLITE_EFULL */
#define PODLITE_NAME_MAX 253   /* metadata.name, bytes */
#define PODLITE_UID_LEN  36    /* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
#define PODLITE_IDS_MAX  (UINT32_MAX - 1)

#define PODLITE_ENOMEM (-2)
#define PODLITE_EFULL  (-3) /* no namespace slot, or ids exhausted: keep the pod whole */

/* flags */
#define PODLITE_USED     0x1u
#define PODLITE_FINISHED 0x2u  /* phase Succeeded or Failed */
#define PODLITE_MIRROR   0x4u  /* annotation kubernetes.io/config.mirror */
#define PODLITE_MARK     0x8u  /* cache_resync_begin() marked it */
#define PODLITE_DELETING 0x10u /* metadata.deletionTimestamp set (pod_being_deleted) */

struct podlite_rec {
	uint32_t next;   /* next in its bucket's chain (or in the free list); PODLITE_NONE */
	uint32_t name;   /* offset of metadata.name in the arena */
	uint32_t node;   /* the caller's node index + 1; 0 when unbound */
	uint16_t ns;     /* namespace slot */
	uint8_t flags;   /* PODLITE_* */
	uint8_t uid[16]; /* metadata.uid, the UUID's bytes */
};

struct podlite;

struct podlite *podlite_new(void);    /* NULL on allocation failure */
void podlite_free(struct podlite *s); /* NULL is a no-op */

/* uid (borrowed) as 16 bytes: 0, or -1 when it is not a lowercase canonical UUID. Pure. */
int podlite_uid_parse(const char *uid, uint8_t out[16]);
/* The 36 characters and a NUL into out (PODLITE_UID_LEN + 1 bytes). Pure. */
void podlite_uid_format(const uint8_t uid[16], char *out);

/* The id of pod ns/name, or PODLITE_NONE. */
uint32_t podlite_find(const struct podlite *s, const char *ns, const char *name);

/* Store a new pod ns/name (not stored yet; name 1..PODLITE_NAME_MAX bytes) with its uid;
 * node 0, flags PODLITE_USED. 0 with *id, PODLITE_ENOMEM or PODLITE_EFULL (nothing stored). */
int podlite_insert(struct podlite *s, const char *ns, const char *name, const uint8_t uid[16],
                   uint32_t *id) __attribute__((warn_unused_result));

/* Remove pod id (stored). */
void podlite_remove(struct podlite *s, uint32_t id);

/* The record of id (stored): valid until the next podlite_insert or podlite_remove. */
struct podlite_rec *podlite_at(struct podlite *s, uint32_t id);
const char *podlite_ns(const struct podlite *s, uint32_t id);
const char *podlite_name(const struct podlite *s, uint32_t id);

/* Ids are below podlite_ids(); a stored one has PODLITE_USED (iteration). */
uint32_t podlite_ids(const struct podlite *s);
size_t podlite_count(const struct podlite *s);
/* The heap it holds: each allocation's malloc_usable_size() plus an 8-byte chunk header. */
size_t podlite_bytes(const struct podlite *s);

#endif
