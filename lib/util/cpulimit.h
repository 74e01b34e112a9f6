/*
 * cpulimit: how many CPUs this process may use, from its cgroup's CPU limit (util box).
 *
 * A container sees every CPU of its host (sysconf(_SC_NPROCESSORS_ONLN): 64 on a 64-core node)
 * though its CPU limit may be one core; sizing thread pools from the host would start 64 HTTP
 * threads and 256 workers for one core of CPU time. The limit is the CFS bandwidth the kubelet
 * writes for resources.limits.cpu:
 *   cgroup v2: <root>/cpu.max, "QUOTA PERIOD" in microseconds, or "max PERIOD" (no limit);
 *   cgroup v1: <root>/cpu/cpu.cfs_quota_us (-1: no limit) and <root>/cpu/cpu.cfs_period_us,
 *              also tried under <root>/cpu,cpuacct/.
 * v2 is tried first; v1 only when v2's file does not exist. root is where the cgroup file
 * system is mounted, CPULIMIT_CGROUP_ROOT in a container: with a cgroup namespace (the
 * default of containerd and CRI-O on cgroup v2) and with the v1 per-controller mounts that
 * container runtimes make, the files there are the container's own. Nested limits above the
 * container's cgroup are not read (the kubelet sets the container's).
 *
 * Files are read with capfile (CPULIMIT_FILE_MAX bytes) and parsed strictly: anything but what
 * the kernel writes is CPULIMIT_EPARSE with the file and its text in err. Pure apart from the
 * reads; thread-safe.
 */
#ifndef GMG_CPULIMIT_H
#define GMG_CPULIMIT_H

#include <stddef.h>

#define CPULIMIT_CGROUP_ROOT "/sys/fs/cgroup"
#define CPULIMIT_FILE_MAX    64 /* bytes of cpu.max, cpu.cfs_quota_us, cpu.cfs_period_us */
#define CPULIMIT_ERR_MAX     256
#define CPULIMIT_ROOT_MAX    256  /* bytes of root; longer is CPULIMIT_EIO */
#define CPULIMIT_COUNT_MAX   4096 /* cpulimit_count()'s bound */

#define CPULIMIT_NONE   1    /* no limit: no file, "max", or a v1 quota of -1 */
#define CPULIMIT_EPARSE (-1) /* a file holds something the kernel does not write */
#define CPULIMIT_EIO    (-2) /* a file exists but cannot be read, or only one of v1's two */

/*
 * Read the CPU limit under root (borrowed). Returns 0 with *cpus = quota / period (CPUs, e.g.
 * 1.5 for limits.cpu 1500m); CPULIMIT_NONE (*cpus untouched) when no limit is set; or a
 * negative CPULIMIT_E* code with a one-line reason in err ("<path>: ..."). err may be NULL.
 */
int cpulimit_read(const char *root, double *cpus, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * The number of CPUs to size thread pools by: the limit rounded up (1.5 -> 2; at least 1),
 * never more than online (the CPUs the host has; <= 0: unknown) nor CPULIMIT_COUNT_MAX.
 * limit <= 0: no limit, online (or 1 when online is unknown too). Pure.
 */
unsigned cpulimit_count(double limit, long online);

#endif
