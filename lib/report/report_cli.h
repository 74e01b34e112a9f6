/*
 * report_cli: the command line of `gpu-memory-guard report` and of the kubectl plugin
 * `kubectl gpu-memory` (the same binary, called as kubectl-gpu_memory). Pure: parses argv,
 * never reads the environment or files (cmd/ resolves the kubeconfig).
 *
 * Flags (--flag value or --flag=value; -o as kubectl takes it: -o json, -ojson, -o=json):
 *   --kubeconfig PATH    the kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)
 *   --node NAME          that node's pods, by what they count
 *   -o, --output FORMAT  table (default), wide or json
 *   --threshold RATIO    the limit of nodes without the annotation, 0 < RATIO <= 1 (default
 *                        0.90: the webhook's --threshold, which the report cannot see)
 *   --gpu-resource NAME  extended resource that counts as a GPU; repeatable (default
 *                        nvidia.com/gpu), as the webhook's
 *   --undeclared MODE    infer (default) or refuse, as the webhook's
 *   --engine-default ENGINE=RATIO  repeatable, as the webhook's (default engine.h's table)
 *   --request-timeout DUR  each API call (default 30s)
 *   -h, --help
 */
#ifndef GMG_REPORT_CLI_H
#define GMG_REPORT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "report.h"

#define REPORT_CLI_MAX_GPU_RESOURCES 8 /* = DEMAND_MAX_RESOURCES */
#define REPORT_CLI_ERR_MAX           256
#define REPORT_CLI_TIMEOUT_MS        30000

struct report_cli {
	const char *kubeconfig; /* borrowed from argv; NULL: not given */
	const char *node;       /* borrowed; NULL: every GPU node */
	enum report_format format;
	double threshold;
	const char *gpu_resources[REPORT_CLI_MAX_GPU_RESOURCES]; /* borrowed */
	size_t n_gpu_resources;                                  /* 0: nvidia.com/gpu */
	uint64_t timeout_ms;
	int undeclared_infer;           /* --undeclared infer (default): 1; refuse: 0 */
	struct engine_defaults engines; /* --engine-default ENGINE=RATIO (default engine.h's) */
	int help;                       /* -h/--help: print report_cli_usage() and exit 0 */
};

/* Parse argv[1..argc) (argv[0] is the command's name). 0, or -1 with one line in err naming
 * the flag. */
int report_cli_parse(int argc, char **argv, struct report_cli *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The help text; name is how the user called it ("gpu-memory-guard report", "kubectl
 * gpu-memory"). Static text with the name substituted into buf (cap bytes; 4096 is enough). */
const char *report_cli_usage(const char *name, char *buf, size_t cap);

#endif
