/*
 * memlimit: this process's memory limit, from its cgroup (util box).
 *
 * The watch cache grows with the cluster (cache.h, cache_stats().bytes); a container whose
 * limit is smaller than the cache is OOM-killed, every replica alike. Read once at start, the
 * limit lets the webhook log the cache's bytes against it, export it
 * (gpu_memory_guard_memory_limit_bytes) and warn on /readyz past MEMLIMIT_WARN_RATIO.
 *
 * Where the limit is:
 *   /proc/self/cgroup names the process's cgroup: "0::PATH" on cgroup v2, and on v1 a line
 *   "ID:CONTROLLERS:PATH" whose comma-separated controllers include "memory";
 *   cgroup v2: <root>PATH/memory.max, then each parent's up to <root> (the least counts: a
 *              limit on a parent, e.g. a pod's cgroup or a systemd slice, binds the child);
 *   cgroup v1: <root>/memory<PATH>/memory.limit_in_bytes, then each parent's the same way
 *              (memory.use_hierarchy, the kernel's only mode since 5.x).
 *   When <root>PATH does not exist (a container without a cgroup namespace sees its host's
 *   PATH; with one, the default of containerd and CRI-O on v2, PATH is "/"), <root> itself is
 *   read, as cpulimit.h does.
 * v2 is tried first, v1 when the v2 line or file is absent.
 *
 * Values, in bytes: "max" (v2) is no limit; v1 writes a huge number for no limit
 * (PAGE_COUNTER_MAX pages, 0x7ffffffffffff000 with 4 KiB pages): any value at or above
 * MEMLIMIT_V1_UNLIMITED is no limit. Parsed strictly: anything but what the kernel writes is
 * MEMLIMIT_EPARSE. Files are read with capfile (MEMLIMIT_FILE_MAX bytes; /proc/self/cgroup
 * MEMLIMIT_CGROUP_FILE_MAX). Pure apart from the reads; thread-safe.
 */
#ifndef GMG_MEMLIMIT_H
#define GMG_MEMLIMIT_H

#include <stddef.h>
#include <stdint.h>

#define MEMLIMIT_CGROUP_ROOT     "/sys/fs/cgroup"
#define MEMLIMIT_PROC_CGROUP     "/proc/self/cgroup"
#define MEMLIMIT_FILE_MAX        64   /* bytes of memory.max, memory.limit_in_bytes */
#define MEMLIMIT_CGROUP_FILE_MAX 8192 /* bytes of /proc/self/cgroup (v1: a line per hierarchy) */
#define MEMLIMIT_PATH_MAX        512  /* bytes of a cgroup path; longer is MEMLIMIT_EPARSE */
#define MEMLIMIT_ERR_MAX         256
#define MEMLIMIT_WHERE_MAX       (2 * MEMLIMIT_PATH_MAX + 64) /* root, path, file name */
#define MEMLIMIT_V1_UNLIMITED    (1ull << 62) /* v1 values from here on mean no limit */
#define MEMLIMIT_WARN_RATIO      0.80         /* /readyz warns above this share of the limit */

#define MEMLIMIT_NONE   1    /* no limit: "max", v1's huge value, or no cgroup files */
#define MEMLIMIT_EPARSE (-1) /* a file holds something the kernel does not write */
#define MEMLIMIT_EIO    (-2) /* a file exists but cannot be read */

/*
 * Parse one memory.max / memory.limit_in_bytes text (a trailing newline allowed): 0 with
 * *bytes, MEMLIMIT_NONE for "max" (v2) or a value >= MEMLIMIT_V1_UNLIMITED, MEMLIMIT_EPARSE
 * otherwise (empty, signs, spaces, units, overflow). Pure.
 */
int memlimit_parse_value(const char *text, uint64_t *bytes) __attribute__((warn_unused_result));

/*
 * From the text of /proc/self/cgroup (borrowed), the v2 path (the "0::" line) into v2 and
 * the v1 memory controller's path into v1, each "" when there is no such line. Paths start
 * with '/'. 0, or MEMLIMIT_EPARSE when a line is malformed or a path does not start with '/'
 * or is MEMLIMIT_PATH_MAX bytes or more. v2 and v1 must hold MEMLIMIT_PATH_MAX bytes. Pure.
 */
int memlimit_parse_cgroup(const char *text, char *v2, char *v1) __attribute__((warn_unused_result));

/*
 * Read the memory limit: /proc/self/cgroup at proc_cgroup (MEMLIMIT_PROC_CGROUP), the files
 * under root (MEMLIMIT_CGROUP_ROOT); both borrowed. Returns 0 with *bytes and the file it came
 * from in where (MEMLIMIT_WHERE_MAX bytes; may be NULL), MEMLIMIT_NONE (*bytes untouched) when
 * no limit is set or nothing can be read, or a negative MEMLIMIT_E* code with a one-line
 * reason in err ("<path>: ..."; err may be NULL).
 */
int memlimit_read(const char *root, const char *proc_cgroup, uint64_t *bytes, char *where,
                  char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
