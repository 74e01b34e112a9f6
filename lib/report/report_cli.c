/*
 * report_cli: the report command's flags. See report_cli.h.
 */
#include "report_cli.h"

#include "capacity.h"
#include "config.h"

#include <stdio.h>
#include <string.h>

static const char usage_text[] =
    "Every GPU node's memory at a glance, by the webhook's own rules.\n"
    "\n"
    "Usage:\n"
    "  %s [flags]\n"
    "\n"
    "Per GPU node: the GPU model and count, the sharing strategy, the capacity, the limit\n"
    "(capacity x the threshold in force: the node's annotation, else the strictest enforcing\n"
    "GPUMemoryPolicy selecting the node, else --threshold), what the node's GPU pods declare\n"
    "(a GPU pod without a valid GPU_MEMORY_LIMIT counts its GPUs whole), what is free under\n"
    "the limit, the largest GPU_MEMORY_LIMIT a new pod asking for one GPU (of no policy tier)\n"
    "would be admitted with there, and the number of GPU pods; wide and json add what each\n"
    "tier of those policies declares there. RBAC: list on nodes, pods,\n"
    "gpumemorypolicies.gpu-memory-guard.io (a cluster without that CRD has no policy), and\n"
    "resourceslices and resourceclaims.resource.k8s.io (DRA, driver gpu.nvidia.com; a\n"
    "cluster that serves no resource.k8s.io/v1 has none).\n"
    "Sizes as the webhook's messages write them (Gi, Mi).\n"
    "\n"
    "Flags (--flag value or --flag=value):\n"
    "  --kubeconfig PATH       kubeconfig to read the cluster with (default: $KUBECONFIG,\n"
    "                          else ~/.kube/config, else the in-cluster service account);\n"
    "                          its user's exec credential plugin, if any, is run as\n"
    "                          kubectl runs it (client.authentication.k8s.io v1, v1beta1)\n"
    "  --node NAME             that node, then its GPU pods by what they count\n"
    "  -o, --output FORMAT     table, wide or json (default table; json: every size in\n"
    "                          bytes, exact)\n"
    "  --threshold RATIO       the limit of nodes without the annotation\n"
    "                          gpu-memory-guard.io/threshold or an enforcing policy,\n"
    "                          0 < RATIO <= 1; set it to the webhook's --threshold\n"
    "                          (default 0.90, the webhook's default)\n"
    "  --gpu-resource NAME     extended resource that counts as a GPU, as the webhook's flag;\n"
    "                          repeatable (default nvidia.com/gpu)\n"
    "  --undeclared MODE       infer or refuse, as the webhook's flag (default infer)\n"
    "  --engine-default ENGINE=RATIO  an engine's share of a card when its flag is absent,\n"
    "                          as the webhook's flag; repeatable (default vllm=0.92, tgi=1,\n"
    "                          sglang=0.88)\n"
    "  --request-timeout DUR   timeout of each API call (default 30s)\n"
    "  -h, --help              print this text\n"
    "\n"
    "Exit status: 0, 1 when the cluster cannot be read (or --node names no GPU node), 2 on a\n"
    "bad command line.\n";

const char *report_cli_usage(const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, usage_text, name);
	return buf;
}

static const char *const known[] = {"kubeconfig", "node",          "output",
                                    "threshold",  "gpu-resource",  "request-timeout",
                                    "undeclared", "engine-default"};

static int is_known(const char *name)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(known[i], name) == 0)
			return 1;
	return 0;
}

static int bad(char *err, size_t errlen, const char *what, const char *value)
{
	snprintf(err, errlen, "%s: invalid value \"%.64s\"", what, value);
	return -1;
}

static int set_flag(struct report_cli *o, const char *name, const char *v, char *err, size_t errlen)
{
	char why[CONFIG_ERR_MAX];

	if (strcmp(name, "kubeconfig") == 0) {
		o->kubeconfig = v;
	} else if (strcmp(name, "node") == 0) {
		if (v[0] == '\0' || strlen(v) > 253)
			return bad(err, errlen, "--node", v);
		o->node = v;
	} else if (strcmp(name, "output") == 0 || strcmp(name, "o") == 0) {
		if (strcmp(v, "table") == 0)
			o->format = REPORT_TABLE;
		else if (strcmp(v, "wide") == 0)
			o->format = REPORT_WIDE;
		else if (strcmp(v, "json") == 0)
			o->format = REPORT_JSON;
		else
			return snprintf(
			           err, errlen,
			           "--output: unknown format \"%.64s\" (want table, wide or json)",
			           v),
			       -1;
	} else if (strcmp(name, "threshold") == 0) {
		if (capacity_parse_ratio(v, &o->threshold) != 0)
			return snprintf(err, errlen,
			                "--threshold: \"%.64s\" is not a ratio 0 < RATIO <= 1", v),
			       -1;
	} else if (strcmp(name, "gpu-resource") == 0) {
		if (v[0] == '\0')
			return bad(err, errlen, "--gpu-resource", v);
		if (o->n_gpu_resources == REPORT_CLI_MAX_GPU_RESOURCES)
			return snprintf(err, errlen, "--gpu-resource: at most %d",
			                REPORT_CLI_MAX_GPU_RESOURCES),
			       -1;
		o->gpu_resources[o->n_gpu_resources++] = v;
	} else if (strcmp(name, "undeclared") == 0) {
		if (strcmp(v, "infer") != 0 && strcmp(v, "refuse") != 0)
			return snprintf(err, errlen,
			                "--undeclared: \"%.64s\" is not infer or refuse", v),
			       -1;
		o->undeclared_infer = strcmp(v, "infer") == 0;
	} else if (strcmp(name, "engine-default") == 0) {
		if (config_parse_engine_default(v, &o->engines, err, errlen) != 0)
			return -1;
	} else if (strcmp(name, "request-timeout") == 0) {
		if (config_parse_duration(v, &o->timeout_ms, why, sizeof(why)) != 0 ||
		    o->timeout_ms == 0)
			return snprintf(err, errlen, "--request-timeout: %s",
			                o->timeout_ms == 0 ? "must be above 0" : why),
			       -1;
	} else {
		snprintf(err, errlen, "unknown flag --%.64s (see --help)", name);
		return -1;
	}
	return 0;
}

int report_cli_parse(int argc, char **argv, struct report_cli *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof(*o));
	o->format = REPORT_TABLE;
	o->threshold = 0.9;
	o->undeclared_infer = 1;
	engine_defaults_init(&o->engines);
	o->timeout_ms = REPORT_CLI_TIMEOUT_MS;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *name, *eq, *value;
		char flag[64];

		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			o->help = 1;
			return 0;
		}
		if (strncmp(arg, "-o", 2) == 0 && arg[2] != '\0') { /* -ojson, -o=json */
			if (set_flag(o, "o", arg[2] == '=' ? arg + 3 : arg + 2, err, errlen) != 0)
				return -1;
			continue;
		}
		if (strcmp(arg, "-o") == 0) {
			name = "o";
			eq = NULL;
		} else if (strncmp(arg, "--", 2) == 0 && arg[2] != '\0') {
			name = arg + 2;
			eq = strchr(name, '=');
		} else {
			snprintf(err, errlen, "unexpected argument \"%.64s\" (see --help)", arg);
			return -1;
		}
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		if (len >= sizeof(flag) || (len == 1 && arg[1] == '-')) {
			snprintf(err, errlen, "unknown flag --%.64s (see --help)", name);
			return -1;
		}
		memcpy(flag, name, len);
		flag[len] = '\0';
		if (strcmp(flag, "o") != 0 && !is_known(flag)) {
			snprintf(err, errlen, "unknown flag --%s (see --help)", flag);
			return -1;
		}
		if (eq != NULL) {
			value = eq + 1;
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			snprintf(err, errlen, "%s%s needs a value", len == 1 ? "-" : "--", flag);
			return -1;
		}
		if (set_flag(o, flag, value, err, errlen) != 0)
			return -1;
	}
	return 0;
}
