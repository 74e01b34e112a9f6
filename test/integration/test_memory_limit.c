/*
 * Integration: the real binary under a memory limit (issue 22). The test makes a memory cgroup
 * of its own (v2: a child of its cgroup with memory.max; v1, as on a hybrid host: a child in
 * the memory hierarchy with memory.limit_in_bytes) and the binary's process joins it between
 * fork and exec (world.cgroup_procs); the test and the API server double stay outside. The
 * double holds 3,000 GPU pods and 2,000 plain ones (UUID uids: the compact store).
 *   1. --memory-warn-ratio 0.01: the binary reads the limit (log line "memory limit", the
 *      gauge memory_limit_bytes is exactly it), fills the cache, and /readyz is 200 with the
 *      warning line above the cache line; cache_bytes is above 1% of the limit and its parts
 *      add up; the process's RSS is under the limit.
 *   2. The default ratio (0.80): the same cache is far below 80% of 64 MiB: no warning line.
 * (Under a sanitizer the limit is 1 GiB: its shadow memory would not fit in 64 MiB.)
 * The warning's ratio is a flag so the test need not fill 51 MiB of cache under 64 MiB (what
 * the flag changes is only the line's threshold; the byte count and the limit are the real
 * ones). Skipped, with the reason, when no memory cgroup can be made (not root, no cgroup
 * file system, the memory controller not delegated). systemd-run --scope -p MemoryMax= would
 * do the same through systemd; it needs a running systemd, which containers often lack.
 */
#define _GNU_SOURCE /* asprintf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apiserver_double.h"
#include "harness.h"
#include "itest.h"

/* Under AddressSanitizer (the binary is built as the test is) its shadow memory and
 * quarantine take hundreds of MiB: a larger limit, or the OOM killer ends it. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LIMIT_MIB  1024ull
#define WARN_RATIO "0.0005" /* about 0.5 MiB of cache */
#else
#define LIMIT_MIB  64ull
#define WARN_RATIO "0.01" /* about 0.6 MiB of cache */
#endif
#define LIMIT      (LIMIT_MIB * 1024 * 1024)
#define GPU_PODS   3000
#define PLAIN_PODS 2000

static struct world W;
static char cg_dir[512], cg_procs[600], skip_why[1024];

/* This process's cgroup path for the v2 line ("0::") or the v1 memory controller. */
static int own_path(int v2, char *out, size_t cap)
{
	char line[1024];
	FILE *f = fopen("/proc/self/cgroup", "r");
	int found = 0;

	if (f == NULL)
		return -1;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2 == NULL)
			continue;
		*c2 = '\0';
		if (v2 ? strcmp(line, "0") == 0 && c2 == c1 + 1
		       : strstr(c1 + 1, "memory") != NULL) {
			snprintf(out, cap, "%s", strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1);
			found = 1;
		}
	}
	fclose(f);
	return found ? 0 : -1;
}

static int put(const char *dir, const char *file, const char *text)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	FILE *f = fopen(p, "w");
	if (f == NULL)
		return -1;
	int ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* Make the cgroup: 0, or -1 with skip_why. */
static int make_cgroup(void)
{
	char own[400], lim[32];
	struct stat st;
	int v2 = stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0;

	snprintf(lim, sizeof(lim), "%llu\n", LIMIT);
	if (geteuid() != 0) {
		snprintf(skip_why, sizeof(skip_why), "not root: cannot make a memory cgroup");
		return -1;
	}
	if (v2 && own_path(1, own, sizeof(own)) == 0) {
		snprintf(cg_dir, sizeof(cg_dir), "/sys/fs/cgroup%s/gmg-itest-%d", own,
		         (int)getpid());
		if (mkdir(cg_dir, 0755) == 0 && put(cg_dir, "memory.max", lim) == 0)
			goto made;
		snprintf(skip_why, sizeof(skip_why),
		         "cgroup v2: cannot make %s with memory.max (%s; the memory controller "
		         "must be in the parent's cgroup.subtree_control)",
		         cg_dir, strerror(errno));
		rmdir(cg_dir);
		return -1;
	}
	if (stat("/sys/fs/cgroup/memory", &st) == 0 && own_path(0, own, sizeof(own)) == 0) {
		snprintf(cg_dir, sizeof(cg_dir), "/sys/fs/cgroup/memory%s/gmg-itest-%d", own,
		         (int)getpid());
		if (mkdir(cg_dir, 0755) == 0 && put(cg_dir, "memory.limit_in_bytes", lim) == 0)
			goto made;
		snprintf(skip_why, sizeof(skip_why), "cgroup v1: cannot make %s: %s", cg_dir,
		         strerror(errno));
		rmdir(cg_dir);
		return -1;
	}
	snprintf(skip_why, sizeof(skip_why), "no cgroup v2 or v1 memory hierarchy mounted");
	return -1;
made:
	snprintf(cg_procs, sizeof(cg_procs), "%s/cgroup.procs", cg_dir);
	return 0;
}

static int group_setup(void **state)
{
	char name[64], uid[64], *json;
	(void)state;

	if (make_cgroup() != 0) {
		fprintf(stderr, "integ_memory_limit: SKIPPED: %s\n", skip_why);
		return 0;
	}
	fprintf(stderr, "integ_memory_limit: the binary runs in %s (limit %llu bytes)\n", cg_dir,
	        LIMIT);
	if (world_init(&W, 0))
		return -1;
	itest_world = &W;
	W.cache_mode = "watch";
	W.cgroup_procs = cg_procs;
	for (int i = 0; i < 30; i++) {
		snprintf(name, sizeof(name), "ml-node-%02d", i);
		if (world_add_node(&W, name, 81559, 8))
			return -1;
	}
	for (int i = 0; i < GPU_PODS; i++) {
		char node[32];
		snprintf(name, sizeof(name), "gpu-%d", i);
		snprintf(node, sizeof(node), "ml-node-%02d", i % 30);
		if (world_add_pod(&W, "team-ml", name, "1Gi", node))
			return -1;
	}
	for (int i = 0; i < PLAIN_PODS; i++) {
		snprintf(name, sizeof(name), "web-%d", i);
		snprintf(uid, sizeof(uid), "7d2a0000-0000-4000-8000-%012d", i);
		if (asprintf(&json,
		             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
		             "\"%s\",\"namespace\":\"web\",\"uid\":\"%s\"},\"spec\":{\"nodeName\":"
		             "\"ml-node-00\",\"containers\":[{\"name\":\"nginx\",\"image\":"
		             "\"nginx\",\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]},"
		             "\"status\":{\"phase\":\"Running\"}}",
		             name, uid) < 0)
			return -1;
		int rc = apiserver_double_put_pod(W.api, "web", json);
		free(json);
		if (rc != 0)
			return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (cg_dir[0] == '\0')
		return 0;
	world_free(&W);
	for (int i = 0; i < 50 && rmdir(cg_dir) != 0; i++)
		usleep(100 * 1000); /* the killed process leaves the cgroup asynchronously */
	return 0;
}

static long vm_rss_kib(pid_t pid)
{
	char p[64], line[256];
	long kib = -1;
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			kib = atol(line + 6);
	if (f)
		fclose(f);
	return kib;
}

/* Start the binary with extra, wait for the whole world in the cache; the /readyz body. */
static char *start_synced(const char *const *extra)
{
	char *body = NULL;
	double end;

	ITEST_CHECK(world_start_gmg(&W, extra, 30000) == 0, "the binary did not start");
	end = harness_now() + 60;
	for (;;) {
		long pods = 0;
		free(body);
		body = NULL;
		long code = world_health_get(&W, "/readyz", &body);
		const char *s = body ? strstr(body, "cache: synced (") : NULL;
		if (code == 200 && s && sscanf(s + 15, "%ld pods", &pods) == 1 &&
		    pods >= GPU_PODS + PLAIN_PODS)
			return body;
		if (harness_now() >= end) {
			free(body);
			ITEST_CHECK(0, "not synced in 60 s (killed by the limit?)");
		}
		usleep(100 * 1000);
	}
}

static void test_warning_and_gauges(void **state)
{
	static const char *const extra[] = {"--memory-warn-ratio", WARN_RATIO, NULL};
	char *body, *m = NULL, *log;
	(void)state;

	if (cg_dir[0] == '\0')
		skip();
	body = start_synced(extra);
	char want[64], copy[768];
	snprintf(want, sizeof(want), "of the memory limit %llu.0 MiB", LIMIT_MIB);
	snprintf(copy, sizeof(copy), "%s", body);
	const char *warn = strstr(body, "warning: the watch cache holds ");
	int has_limit = strstr(body, want) != NULL, ready = strncmp(body, "ok\n", 3) == 0;
	int above = warn != NULL && warn < strstr(body, "cache: synced");
	free(body); /* before a check fails: cmocka leaves the function */
	ITEST_CHECK(warn != NULL, "no memory warning on /readyz: %s", copy);
	ITEST_CHECK(has_limit, "/readyz: %s", copy);
	ITEST_CHECK(above, "the warning is not above the cache line: %s", copy);
	ITEST_CHECK(ready, "not ready: %s", copy);
	ITEST_CHECK(world_health_get(&W, "/metrics", &m) == 200 && m != NULL, "no /metrics");
	double lim = harness_metric(m, "gpu_memory_guard_memory_limit_bytes", NULL, 1);
	double bytes = harness_metric(m, "gpu_memory_guard_cache_bytes", NULL, 1);
	double parts = harness_metric(m, "gpu_memory_guard_cache_part_bytes", NULL, 1);
	double compact = harness_metric(m, "gpu_memory_guard_cache_compact_pods", NULL, 1);
	free(m);
	ITEST_CHECK(lim == (double)LIMIT, "memory_limit_bytes %.0f, want %llu", lim, LIMIT);
	ITEST_CHECK(bytes > atof(WARN_RATIO) * (double)LIMIT && bytes < (double)LIMIT,
	            "cache_bytes %.0f for %d pods", bytes, GPU_PODS + PLAIN_PODS);
	ITEST_CHECK(parts <= bytes && parts > 0.9 * bytes, "parts %.0f of %.0f", parts, bytes);
	ITEST_CHECK(compact >= PLAIN_PODS, "compact pods %.0f, want >= %d", compact, PLAIN_PODS);
	long rss = vm_rss_kib(W.pid);
	ITEST_CHECK(rss > 0 && (unsigned long long)rss * 1024 < LIMIT, "RSS %ld KiB", rss);
	log = harness_read_file(W.log_file, NULL);
	int logged = log && strstr(log, "\"msg\":\"memory limit\"") &&
	             strstr(log, "\"memory_limit_bytes\":") && strstr(log, "gmg-itest-");
	int listed = log && strstr(log, "\"cache_bytes\":") && strstr(log, "percent_of_limit");
	free(log);
	ITEST_CHECK(logged, "no memory limit log line naming the cgroup's file");
	ITEST_CHECK(listed, "the cache: listed line has no bytes against the limit");
	ITEST_CHECK(world_stop_gmg(&W, SIGTERM, 10000) == 0, "no clean exit");
}

static void test_no_warning_below_the_ratio(void **state)
{
	char *body, *m = NULL;
	(void)state;

	if (cg_dir[0] == '\0')
		skip();
	body = start_synced(NULL);
	int warned = strstr(body, "warning: the watch cache") != NULL;
	free(body);
	ITEST_CHECK(!warned, "a memory warning at 0.80");
	ITEST_CHECK(world_health_get(&W, "/metrics", &m) == 200 && m != NULL, "no /metrics");
	ITEST_CHECK(harness_metric(m, "gpu_memory_guard_memory_limit_bytes", NULL, 1) ==
	                (double)LIMIT,
	            "memory_limit_bytes");
	free(m);
	ITEST_CHECK(world_stop_gmg(&W, SIGTERM, 10000) == 0, "no clean exit");
}

int main(int argc, char **argv)
{
	harness_init(argc, argv);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_warning_and_gauges),
	    cmocka_unit_test(test_no_warning_below_the_ratio),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
