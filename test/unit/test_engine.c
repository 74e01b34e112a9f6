/* Unit tests for lib/core/engine: recognising vLLM, TGI and SGLang and reading their memory
 * flag from command, args, sh -c strings, env and image. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "engine.h"

#define MAXW 16

/* One case: command and args as NULL-terminated lists (cmd NULL: no command). */
struct row {
	const char *cmd[MAXW];
	const char *args[MAXW];
	const char *image;
	const char *env; /* CUDA_MEMORY_FRACTION */
	enum engine_status status;
	enum engine_kind kind;
	enum engine_origin origin;
	uint32_t ppm;
	const char *words; /* a substring of out.words, or NULL */
};

static size_t count(const char *const *v)
{
	size_t n = 0;

	while (n < MAXW && v[n] != NULL)
		n++;
	return n;
}

static int run(const struct row *r, struct engine_setting *out, char *err, size_t errlen)
{
	struct engine_input in = {
	    .container = "server",
	    .command = r->cmd,
	    .n_command = count(r->cmd),
	    .args = r->args,
	    .n_args = count(r->args),
	    .image = r->image,
	    .env_tgi_fraction = r->env,
	};

	return engine_read(&in, NULL, out, err, errlen);
}

static void check_rows(const struct row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct engine_setting out;
		char err[256] = "";
		int rc = run(&rows[i], &out, err, sizeof(err));

		if (rc != 0)
			fail_msg("row %zu: rc %d: %s", i, rc, err);
		if (out.status != rows[i].status || out.kind != rows[i].kind)
			fail_msg("row %zu: status %d kind %d (want %d %d): %s", i, out.status,
			         out.kind, rows[i].status, rows[i].kind, out.words);
		if (out.status == ENGINE_FOUND &&
		    (out.ratio_ppm != rows[i].ppm || out.origin != rows[i].origin))
			fail_msg("row %zu: ppm %u origin %d (want %u %d): %s", i, out.ratio_ppm,
			         out.origin, rows[i].ppm, rows[i].origin, out.words);
		if (rows[i].words != NULL && strstr(out.words, rows[i].words) == NULL)
			fail_msg("row %zu: words \"%s\" lack \"%s\"", i, out.words, rows[i].words);
	}
}

#define F    ENGINE_FOUND
#define U    ENGINE_UNREADABLE
#define N    ENGINE_NOT_FOUND
#define FLAG ENGINE_ORIGIN_FLAG
#define DEF  ENGINE_ORIGIN_DEFAULT
#define ENV  ENGINE_ORIGIN_ENV

/* Both spellings of a flag, `_` for `-`, the last occurrence winning, `--` ending options. */
static void test_flag_forms(void **state)
{
	static const struct row rows[] = {
	    {{"vllm", "serve", "m", "--gpu-memory-utilization", "0.5"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     500000,
	     "vllm --gpu-memory-utilization 0.5"},
	    {{"vllm", "serve", "m", "--gpu-memory-utilization=0.6"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     600000,
	     NULL},
	    {{"vllm"},
	     {"serve", "m", "--gpu_memory_utilization", "0.7"},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     700000,
	     NULL},
	    {{"vllm", "serve"},
	     {"--gpu_memory-utilization=0.25"},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     250000,
	     NULL},
	    /* the last occurrence wins, whatever its spelling */
	    {{"vllm", "serve", "--gpu-memory-utilization", "0.5", "--gpu_memory_utilization=0.8"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     800000,
	     "0.8"},
	    {{"vllm", "serve", "--gpu-memory-utilization=0.8", "--gpu-memory-utilization", "0.3"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     300000,
	     NULL},
	    /* after --, words are positional */
	    {{"vllm", "serve", "--gpu-memory-utilization=0.4", "--",
	      "--gpu-memory-utilization=0.9"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     400000,
	     NULL},
	    /* a longer flag sharing the prefix is another flag */
	    {{"vllm", "serve", "--gpu-memory-utilization-x", "0.4"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     DEF,
	     920000,
	     "vllm's default --gpu-memory-utilization 0.92"},
	    {{"/usr/local/bin/vllm", "serve"}, {0}, 0, 0, F, ENGINE_VLLM, DEF, 920000, NULL},
	};
	(void)state;
	check_rows(rows, sizeof(rows) / sizeof(rows[0]));
}

/* Each engine by command, module, image; env for TGI; defaults. */
static void test_engines(void **state)
{
	static const struct row rows[] = {
	    /* env(1) before the engine, as a shell's env is read */
	    {{"/usr/bin/env", "HF_HOME=/cache", "vllm", "serve", "m"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     DEF,
	     920000,
	     NULL},
	    {{"env", "CUDA_MEMORY_FRACTION=0.35", "text-generation-launcher"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_TGI,
	     ENV,
	     350000,
	     NULL},
	    {{"env", "sh", "-c", "vllm serve m --gpu-memory-utilization 0.4"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     400000,
	     NULL},
	    {{"env", "-i", "-u", "X", "--", "vllm", "serve", "m"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     DEF,
	     920000,
	     NULL},
	    {{"env", "CUDA_MEMORY_FRACTION=0.3", "sh", "-c", "text-generation-launcher"},
	     {0},
	     0,
	     "0.1",
	     F,
	     ENGINE_TGI,
	     ENV,
	     300000,
	     NULL},
	    {{"env", "-i", "text-generation-launcher"},
	     {0},
	     0,
	     "0.1",
	     F,
	     ENGINE_TGI,
	     DEF,
	     1000000,
	     NULL},
	    /* env -S splits a string of its own: not read */
	    {{"env", "-S", "vllm serve m"}, {0}, 0, 0, N, 0, 0, 0, NULL},
	    {{"python3", "-m", "vllm.entrypoints.openai.api_server"},
	     {"--model", "m"},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     DEF,
	     920000,
	     NULL},
	    {{"python3.12", "-u", "-m", "vllm.entrypoints.openai.api_server",
	      "--gpu-memory-utilization", "0.85"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     850000,
	     NULL},
	    {{"python", "-W", "ignore", "-m", "sglang.launch_server", "--mem-fraction-static",
	      "0.7"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_SGLANG,
	     FLAG,
	     700000,
	     "sglang --mem-fraction-static 0.7"},
	    {{"sglang", "serve", "--model-path", "m"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_SGLANG,
	     DEF,
	     880000,
	     NULL},
	    {{"text-generation-launcher"},
	     {"--model-id", "m", "--cuda-memory-fraction", "0.4"},
	     0,
	     "0.9",
	     F,
	     ENGINE_TGI,
	     FLAG,
	     400000,
	     NULL},
	    /* the env var when the flag is absent (clap: the flag wins) */
	    {{"text-generation-launcher"},
	     {"--model-id", "m"},
	     0,
	     "0.6",
	     F,
	     ENGINE_TGI,
	     ENV,
	     600000,
	     "tgi env CUDA_MEMORY_FRACTION 0.6"},
	    {{"text-generation-launcher"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_TGI,
	     DEF,
	     1000000,
	     "tgi's default --cuda-memory-fraction 1"},
	    /* by image only: the ENTRYPOINT is the engine, args are its flags */
	    {{0},
	     {"--model", "m", "--gpu-memory-utilization", "0.75"},
	     "vllm/vllm-openai:v0.9.2",
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     750000,
	     NULL},
	    {{0},
	     {"--model", "m"},
	     "docker.io/vllm/vllm-openai@sha256:0123",
	     0,
	     F,
	     ENGINE_VLLM,
	     DEF,
	     920000,
	     NULL},
	    {{0},
	     {"--model-id", "m"},
	     "ghcr.io/huggingface/text-generation-inference:3.0.1",
	     "0.5",
	     F,
	     ENGINE_TGI,
	     ENV,
	     500000,
	     NULL},
	    {{0},
	     {0},
	     "registry.local:5000/mirror/vllm/vllm-openai",
	     0,
	     F,
	     ENGINE_VLLM,
	     DEF,
	     920000,
	     NULL},
	    /* not engines: another image, a look-alike repository, a replaced ENTRYPOINT, python
	     * running something else */
	    {{0},
	     {"--gpu-memory-utilization", "0.5"},
	     "myorg/vllm-openai-fork:1",
	     0,
	     N,
	     0,
	     0,
	     0,
	     NULL},
	    {{0}, {0}, "notvllm/vllm-openai", 0, N, 0, 0, 0, NULL},
	    {{"/app/start"},
	     {"--gpu-memory-utilization", "0.5"},
	     "vllm/vllm-openai",
	     0,
	     N,
	     0,
	     0,
	     0,
	     NULL},
	    {{"python3", "-c", "import vllm"}, {0}, 0, 0, N, 0, 0, 0, NULL},
	    {{"python3", "-m", "vllm.other"}, {0}, 0, 0, N, 0, 0, 0, NULL},
	    {{"vllm", "bench"}, {0}, 0, 0, N, 0, 0, 0, NULL},
	    {{"nvidia-smi"}, {0}, 0, 0, N, 0, 0, 0, NULL},
	    {{0}, {0}, 0, 0, N, 0, 0, 0, NULL},
	};
	(void)state;
	check_rows(rows, sizeof(rows) / sizeof(rows[0]));
}

/* Flags inside sh -c / bash -c strings, split as the shell would. */
static void test_shell_strings(void **state)
{
	static const struct row rows[] = {
	    {{"/bin/sh", "-c"},
	     {"vllm serve m --gpu-memory-utilization 0.6"},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     600000,
	     "vllm --gpu-memory-utilization 0.6"},
	    {{"bash", "-ec", "pip install x && exec vllm serve m --gpu-memory-utilization=0.3"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     300000,
	     NULL},
	    {{"bash", "-o", "pipefail", "-lc"},
	     {"set -x\nexec python3 -m vllm.entrypoints.openai.api_server \\\n  --model m \\\n"
	      "  '--gpu-memory-utilization' \"0.45\" 2>&1 | tee /tmp/log"},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     450000,
	     NULL},
	    /* quotes glue a word; a quoted value with a space is not a ratio (see garbage) */
	    {{"sh", "-c", "vllm serve m --gpu-memory-utilization=\"0.\"'7'"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     700000,
	     NULL},
	    /* a comment and a redirection are dropped */
	    {{"sh", "-c",
	      "# --gpu-memory-utilization 0.1\nvllm serve m >/dev/null "
	      "--gpu-memory-utilization 0.2 # 0.3"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     200000,
	     NULL},
	    /* the env set by another command of the string: unknown (the container's says 0.1) */
	    {{"sh", "-c", "export CUDA_MEMORY_FRACTION=0.9; text-generation-launcher --model-id m"},
	     {0},
	     0,
	     "0.1",
	     U,
	     ENGINE_TGI,
	     0,
	     0,
	     "CUDA_MEMORY_FRACTION"},
	    {{"sh", "-c",
	      "export CUDA_MEMORY_FRACTION=0.9; text-generation-launcher "
	      "--cuda-memory-fraction 0.5"},
	     {0},
	     0,
	     "0.1",
	     F,
	     ENGINE_TGI,
	     FLAG,
	     500000,
	     NULL},
	    /* the engine's env as a prefix assignment */
	    {{"sh", "-c", "CUDA_MEMORY_FRACTION=0.35 text-generation-launcher --model-id m"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_TGI,
	     ENV,
	     350000,
	     NULL},
	    /* a quoted expansion as another flag's value is one word: it cannot be the flag */
	    {{"sh", "-c", "vllm serve \"$MODEL\" --port \"$PORT\" --gpu-memory-utilization 0.5"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     500000,
	     NULL},
	    /* a variable in another command does not matter */
	    {{"sh", "-c", "export X=$(nproc); vllm serve m"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     DEF,
	     920000,
	     NULL},
	    /* an engine not on the first command line */
	    {{"sh", "-c", "echo start; sleep 1 && sglang serve --mem-fraction-static .8"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_SGLANG,
	     FLAG,
	     800000,
	     NULL},
	    /* giving up: what only the shell can expand */
	    {{"sh", "-c", "vllm serve m $EXTRA_ARGS"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     "$EXTRA_ARGS is expanded by the shell"},
	    {{"sh", "-c", "vllm serve m --gpu-memory-utilization $UTIL"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     "--gpu-memory-utilization $UTIL"},
	    {{"sh", "-c", "vllm serve m --gpu-memory-utilization \"${UTIL:-0.9}\""},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     NULL},
	    {{"sh", "-c", "vllm serve m \"$X\" --gpu-memory-utilization 0.5"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     NULL},
	    {{"sh", "-c", "vllm serve $MODEL --gpu-memory-utilization 0.5"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     NULL},
	    {{"sh", "-c", "vllm serve m $(cat /etc/args)"}, {0}, 0, 0, U, ENGINE_VLLM, 0, 0, NULL},
	    {{"sh", "-c", "vllm serve m `cat /etc/args`"}, {0}, 0, 0, U, ENGINE_VLLM, 0, 0, NULL},
	    /* what bash makes of a word: brace expansion, ANSI-C quoting, a pathname pattern (a
	     * file of the image may be named --gpu-memory-utilization=0.9) */
	    {{"bash", "-c",
	      "vllm serve m --gpu-memory-utilization 0.1 {--gpu-memory-utilization=0.9,}"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     NULL},
	    {{"bash", "-c",
	      "vllm serve m --gpu-memory-utilization 0.1 $'\\x2d-gpu-memory-utilization=0.9'"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     NULL},
	    {{"bash", "-c", "vllm serve m --gpu-memory-utilization 0.1 --gpu-memory-util*"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     NULL},
	    {{"sh", "-c",
	      "vllm serve m --gpu-memory-utilization 0.1 --gpu-memory-utilizatio[n]=0.9"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     NULL},
	    /* argparse takes a unique prefix of a flag (SGLang's parser does): it may be the flag
	     */
	    {{"python3", "-m", "sglang.launch_server", "--mem-fraction-static", "0.1", "--mem-frac",
	      "0.9"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_SGLANG,
	     0,
	     0,
	     "--mem-frac"},
	    {{"vllm", "serve", "m", "--gpu-memory-utilization=0.1", "--gpu_memory_util=0.9"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     NULL},
	    /* vLLM's --kv-cache-memory-bytes replaces the share (README: counts the whole cards) */
	    {{"vllm", "serve", "m", "--gpu-memory-utilization", "0.1", "--kv-cache-memory-bytes",
	      "70G"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     "--kv-cache-memory-bytes"},
	    /* too short to be taken for it, or another flag */
	    {{"vllm", "serve", "m", "--gpu", "0", "--gpu-memory-utilization-x",
	      "--gpu-memory-utilization", "0.5"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     500000,
	     NULL},
	    /* quoted, none of them expands */
	    {{"bash", "-c", "vllm serve m '{a,b}' \"x*\" --gpu-memory-utilization 0.5"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     500000,
	     NULL},
	    {{"sh", "-c", "vllm serve m --x 'unterminated"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_NONE,
	     0,
	     0,
	     "cannot split (an unterminated ')"},
	    {{"sh", "-c", "vllm serve m <<EOF\nEOF"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_NONE,
	     0,
	     0,
	     "here-document"},
	    /* a kubelet $(VAR) reference in args (not in a shell) */
	    {{"vllm", "serve", "m", "--gpu-memory-utilization", "$(UTIL)"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     "expanded at run time"},
	    {{"vllm", "serve", "m", "$(EXTRA)", "--gpu-memory-utilization", "0.5"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     "kubelet"},
	    {{"vllm", "serve", "$(MODEL)", "--gpu-memory-utilization", "0.5"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     500000,
	     NULL},
	    {{"vllm", "serve", "--model", "$(MODEL)", "--gpu-memory-utilization", "0.5"},
	     {0},
	     0,
	     0,
	     F,
	     ENGINE_VLLM,
	     FLAG,
	     500000,
	     NULL},
	    /* an expansion after the flag, behind a flag that takes no value (--enforce-eager):
	     * it may be the flag again, which wins (MORE="--gpu-memory-utilization=0.95") */
	    {{"vllm", "serve", "m", "--gpu-memory-utilization", "0.1", "--enforce-eager",
	      "$(MORE)"},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     "$(MORE)"},
	    {{"sh", "-c", "vllm serve m --gpu-memory-utilization 0.1 --enforce-eager \"$MORE\""},
	     {0},
	     0,
	     0,
	     U,
	     ENGINE_VLLM,
	     0,
	     0,
	     "$MORE"},
	    /* a shell without -c, a string without an engine */
	    {{"sh", "/start.sh"}, {0}, 0, 0, N, 0, 0, 0, NULL},
	    {{"sh", "-c", "sleep infinity"}, {0}, 0, 0, N, 0, 0, 0, NULL},
	    {{"sh", "-c", "echo 'oops"}, {0}, 0, 0, N, 0, 0, 0, NULL},
	};
	(void)state;
	check_rows(rows, sizeof(rows) / sizeof(rows[0]));
}

/* A value present but not a ratio: an error naming the container and the flag. */
static void test_garbage(void **state)
{
	static const struct {
		const char *cmd[MAXW];
		const char *env;
		const char *msg;
	} rows[] = {
	    {{"vllm", "serve", "--gpu-memory-utilization", "high"},
	     0,
	     "container \"server\": vllm --gpu-memory-utilization \"high\" is not a ratio"},
	    {{"vllm", "serve", "--gpu-memory-utilization=1.5"},
	     0,
	     "\"1.5\" is not a ratio 0 < r <= 1"},
	    {{"vllm", "serve", "--gpu-memory-utilization=0"}, 0, "\"0\""},
	    {{"vllm", "serve", "--gpu-memory-utilization="}, 0, "\"\""},
	    {{"vllm", "serve", "--gpu-memory-utilization"}, 0, "without a value"},
	    {{"vllm", "serve", "--gpu-memory-utilization", "-0.5"}, 0, "\"-0.5\""},
	    {{"sh", "-c", "vllm serve --gpu-memory-utilization '0.5 '"}, 0, "\"0.5 \""},
	    {{"text-generation-launcher"},
	     "lots",
	     "tgi env CUDA_MEMORY_FRACTION \"lots\" is not a ratio"},
	    {{"python3", "-m", "sglang.launch_server", "--mem-fraction-static", "nan"},
	     0,
	     "sglang --mem-fraction-static \"nan\""},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct engine_setting out;
		char err[256] = "";
		struct row r = {.env = rows[i].env};

		memcpy(r.cmd, rows[i].cmd, sizeof(r.cmd));
		assert_int_equal(run(&r, &out, err, sizeof(err)), ENGINE_EINVAL);
		assert_int_equal(out.status, ENGINE_NOT_FOUND);
		if (strstr(err, rows[i].msg) == NULL)
			fail_msg("row %zu: error \"%s\" lacks \"%s\"", i, err, rows[i].msg);
	}
}

/* The splitter itself: words, opaqueness, separators, caps. */
static void test_split(void **state)
{
	struct engine_words w;
	char err[128];
	char big[ENGINE_SCRIPT_MAX + 2];

	(void)state;
	assert_int_equal(
	    engine_shell_split("a 'b c'\"d\\\"e\"\\ f \"\" $X \"$Y\" g;h&&i", &w, err, sizeof(err)),
	    0);
	const char *want[] = {"a", "b cd\"e f", "", "$X", "$Y", "g", ";", "h", ";", "i", ";"};
	assert_int_equal(w.n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < w.n; i++)
		assert_string_equal(w.w[i], want[i]);
	assert_int_equal(w.opaque[3], 2);
	assert_int_equal(w.opaque[4], 1);
	assert_int_equal(w.opaque[1], 0);
	assert_int_equal(w.sep[6], 1);
	assert_int_equal(w.sep[5], 0);
	/* a lone $ is literal; 2>&1 drops both words */
	assert_int_equal(engine_shell_split("echo $ 2>&1 x", &w, err, sizeof(err)), 0);
	assert_int_equal(w.n, 4);
	assert_string_equal(w.w[1], "$");
	assert_int_equal(w.opaque[1], 0);
	assert_string_equal(w.w[2], "x");
	/* only a word of digits is an IO number */
	assert_int_equal(engine_shell_split("ab2>x y 3<in", &w, err, sizeof(err)), 0);
	assert_int_equal(w.n, 3);
	assert_string_equal(w.w[0], "ab2");
	assert_string_equal(w.w[1], "y");
	/* caps: too long, too many words */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(engine_shell_split(big, &w, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "longer than"));
	for (size_t i = 0; i < 600; i++) {
		big[2 * i] = 'a';
		big[2 * i + 1] = ' ';
	}
	big[1200] = '\0';
	assert_int_equal(engine_shell_split(big, &w, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than 256 words"));
	assert_int_equal(w.n, 0);
	/* unterminated expansions */
	assert_int_equal(engine_shell_split("a $(b", &w, err, sizeof(err)), -1);
	assert_int_equal(engine_shell_split("a \"b", &w, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unterminated \""));
}

/* Defaults are overridable, and names map both ways. */
static void test_defaults(void **state)
{
	struct engine_defaults d;
	struct engine_setting out;
	const char *cmd[] = {"vllm", "serve"};
	struct engine_input in = {.container = "c", .command = cmd, .n_command = 2};

	(void)state;
	engine_defaults_init(&d);
	assert_int_equal(d.ppm[ENGINE_VLLM], 920000);
	d.ppm[ENGINE_VLLM] = 900000;
	assert_int_equal(engine_read(&in, &d, &out, NULL, 0), 0);
	assert_int_equal(out.ratio_ppm, 900000);
	assert_string_equal(out.words, "vllm's default --gpu-memory-utilization 0.9");
	assert_int_equal(engine_kind_of("tgi"), ENGINE_TGI);
	assert_int_equal(engine_kind_of("VLLM"), ENGINE_NONE);
	assert_string_equal(engine_flag(ENGINE_SGLANG), "--mem-fraction-static");
	assert_string_equal(engine_name(ENGINE_NONE), "");
}

/* An engine's share in ppm is quantity_ratio_ppm's rounding (halves away from zero), never 0:
 * the smallest ratio parsed, 0.000001, is 1 ppm; a hand-built 0, tiny or NaN ratio is 1 too. */
static void test_ratio_ppm(void **state)
{
	(void)state;
	assert_int_equal(engine_ratio_ppm(0.9), 900000);
	assert_int_equal(engine_ratio_ppm(1.0), QUANTITY_PPM);
	assert_int_equal(engine_ratio_ppm(0.000001), 1);
	assert_int_equal(engine_ratio_ppm(0.0000015), 2);
	assert_int_equal(engine_ratio_ppm(0.0000025), 3);
	assert_int_equal(engine_ratio_ppm(0.1234564), 123456);
	assert_int_equal(engine_ratio_ppm(1e-9), 1);
	assert_int_equal(engine_ratio_ppm(0.0), 1);
	assert_int_equal(engine_ratio_ppm(NAN), 1);
	assert_int_equal(engine_ratio_ppm(1.5), QUANTITY_PPM);
	for (int i = 1; i <= 1000; i++) { /* the quantity rule, wherever it is not 0 */
		double r = i / 1000.0;
		assert_int_equal(engine_ratio_ppm(r), quantity_ratio_ppm(r));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_flag_forms),    cmocka_unit_test(test_engines),
	    cmocka_unit_test(test_shell_strings), cmocka_unit_test(test_garbage),
	    cmocka_unit_test(test_split),         cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_ratio_ppm),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
