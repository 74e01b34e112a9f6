/*
 * engine: the GPU memory a serving engine will take, read from its command line (core box of
 * ARCHITECTURE.md: a demand source). Pure: no I/O, no allocation, no locks; thread-safe.
 *
 * A container's argv is its command followed by its args (Kubernetes: command replaces the
 * image's ENTRYPOINT, args its CMD). A command that is env(1) is read as the command it runs
 * (past -i, -u NAME, -- and NAME=value words; -S and other options are not read). The engine
 * is recognised, first match wins:
 *   1. argv is a shell running a string: argv[0]'s basename is sh, bash, dash or ash, an
 *      option word before the string holds 'c' (-c, -ec, -lc; -o/+o take a word), and the
 *      string is split as a POSIX shell would (engine_shell_split()); the first simple command
 *      (between ; & | && || newlines and parentheses) whose command word, after NAME=value
 *      assignments and `exec`, is an engine below;
 *   2. argv itself is an engine below;
 *   3. no command (the image's ENTRYPOINT runs) and the image is an engine's: every arg is the
 *      engine's. An image whose ENTRYPOINT was replaced by a command that is not an engine is
 *      not read (the command may be anything).
 * Engines, their memory flag and its meaning (ratios of one card's memory, per process):
 *   vLLM:   `vllm serve`, `python[3[.N]] -m vllm.entrypoints.openai.api_server`, image
 *           [registry/]vllm/vllm-openai; --gpu-memory-utilization, a share of the card's TOTAL
 *           memory the engine takes at start (it refuses to start when less is free).
 *           https://docs.vllm.ai/en/stable/api/vllm/config/cache/ (CacheConfig)
 *   TGI:    `text-generation-launcher`, image ghcr.io/huggingface/text-generation-inference;
 *           --cuda-memory-fraction, else env CUDA_MEMORY_FRACTION (clap: the flag wins).
 *           https://huggingface.co/docs/text-generation-inference/reference/launcher
 *   SGLang: `python[3[.N]] -m sglang.launch_server`, `sglang serve`; --mem-fraction-static, a
 *           share of the memory free at start (counted as a share of the card: the most it
 *           can be). https://docs.sglang.ai/advanced_features/server_arguments.html
 * Flags are read as argparse/clap do: `--flag=v` and `--flag v`, `_` for `-` in the name
 * (vLLM's FlexibleArgumentParser; applied to every engine), the last occurrence wins, `--` ends
 * the options. Giving up on (below): argparse's prefix abbreviations (`--gpu-memory-util`, 5
 * letters or more), vLLM's --kv-cache-memory-bytes (it replaces the share). Not read: config files
 * (vLLM --config), a `sh -c` inside a `sh -c`, other engines (TensorRT-LLM, Triton, Ollama:
 * their share is of memory free after the weights load, or they grow: no flag says the most).
 *
 * Giving up (ENGINE_UNREADABLE): a word of the engine's command line that only a shell or the
 * kubelet can expand ($VAR, ${VAR}, $(...), `...`, a kubelet $(VAR) reference; unquoted, a
 * pathname pattern (* ? [), bash's brace expansion ({a,b}, {1..3}) and $'...' / $"...") may be or
 * hold the memory flag, so the flags cannot be known; but for one word that expands to one word
 * (inside "...", or a kubelet reference) right after `serve` (the model) or after a --flag
 * word without '=' (read as that flag's value: a flag that takes no value there would let the
 * word be anything, a risk taken for `--model "$MODEL"`, unless such a word comes after the
 * memory flag: it may be the flag again, which would win); the caller counts the container's whole
 * cards (the most it can take) and says why (out->words). A string the splitter refuses (an
 * unterminated quote, a here-document, more than the caps) gives up the same way.
 * A value that is present but not a ratio 0 < r <= 1 is an error (ENGINE_EINVAL) naming the
 * container and the flag: the engine would refuse to start or take an unknown share.
 */
#ifndef GMG_ENGINE_H
#define GMG_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "quantity.h" /* QUANTITY_PPM: shares of a card are in ppm */

#define ENGINE_SCRIPT_MAX 8192 /* bytes of one sh -c string; longer gives up */
#define ENGINE_WORDS_MAX  256  /* words of one argv or one split string; more gives up */
#define ENGINE_WORDS_MSG  192  /* out->words */

/* The assumed defaults, when the engine's flag is absent (parts per million of one card).
 * vLLM: CacheConfig.gpu_memory_utilization = 0.92 in vllm/config/cache.py (0.9 before);
 *   https://docs.vllm.ai/en/stable/api/vllm/config/cache/
 * TGI: --cuda-memory-fraction defaults to 1.0;
 *   https://huggingface.co/docs/text-generation-inference/reference/launcher
 * SGLang: --mem-fraction-static defaults to None, then computed from the GPU's memory and the
 *   parallelism, about 0.88 on 80 GB cards (python/sglang/srt/server_args.py); 0.88 assumed.
 *   https://docs.sglang.ai/advanced_features/server_arguments.html
 * Overridable per engine: the caller passes its own struct engine_defaults. */
#define ENGINE_DEFAULT_VLLM_PPM   920000u
#define ENGINE_DEFAULT_TGI_PPM    1000000u
#define ENGINE_DEFAULT_SGLANG_PPM 880000u

enum engine_kind {
	ENGINE_NONE = 0, /* not a recognised engine */
	ENGINE_VLLM = 1,
	ENGINE_TGI = 2,
	ENGINE_SGLANG = 3,
};
#define ENGINE_KINDS 4

enum engine_status {
	ENGINE_NOT_FOUND = 0,  /* no engine recognised: this source says nothing */
	ENGINE_FOUND = 1,      /* kind and ratio_ppm set */
	ENGINE_UNREADABLE = 2, /* an engine (kind set, or ENGINE_NONE for a string the splitter
	                          refused) whose flags cannot be known: words say why */
};

/* Where the ratio came from. */
enum engine_origin {
	ENGINE_ORIGIN_FLAG = 1,    /* the command line */
	ENGINE_ORIGIN_ENV = 2,     /* the container's env (TGI's CUDA_MEMORY_FRACTION) or a
	                              NAME=value prefix in the sh -c string */
	ENGINE_ORIGIN_DEFAULT = 3, /* the assumed default above */
};

#define ENGINE_EINVAL (-1) /* a present value that is not a ratio: err names container, flag */

/* The assumed default per engine, parts per million of one card, 1..QUANTITY_PPM; indexed by
 * enum engine_kind (index 0 unused). engine_defaults_init() fills the table above. */
struct engine_defaults {
	uint32_t ppm[ENGINE_KINDS];
};

/* One container's command line and the inputs that name its engine; all borrowed. */
struct engine_input {
	const char *container;      /* its name, for messages */
	const char *const *command; /* spec.containers[].command, n_command words */
	size_t n_command;
	const char *const *args; /* spec.containers[].args */
	size_t n_args;
	const char *image;            /* spec.containers[].image, or NULL */
	const char *env_tgi_fraction; /* the literal value of env CUDA_MEMORY_FRACTION, or NULL */
};

struct engine_setting {
	enum engine_status status;
	enum engine_kind kind;
	enum engine_origin origin; /* ENGINE_FOUND */
	uint32_t ratio_ppm;        /* ENGINE_FOUND: share of one card, 1..QUANTITY_PPM */
	/* ENGINE_FOUND: the source in words, "vllm --gpu-memory-utilization 0.9", "vllm's default
	 * --gpu-memory-utilization 0.92"; ENGINE_UNREADABLE: why ("vllm in a sh -c string: $ARGS
	 * is expanded by the shell ..."). */
	char words[ENGINE_WORDS_MSG];
};

/* A shell string split into words: w[i] points into buf; opaque[i] 1 when the word holds an
 * expansion only the shell could do; sep[i] 1 for a command separator (w[i] is ";"). */
struct engine_words {
	size_t n;
	const char *w[ENGINE_WORDS_MAX];
	unsigned char opaque[ENGINE_WORDS_MAX];
	unsigned char sep[ENGINE_WORDS_MAX];
	char buf[2 * ENGINE_SCRIPT_MAX + 2];
};

/* Fill d with the ENGINE_DEFAULT_* table. */
void engine_defaults_init(struct engine_defaults *d);

/* An engine's share of one card in ppm, from a ratio capacity_parse_ratio() accepted (an engine's
 * flag or env in a pod, --engine-default): quantity_ratio_ppm(r), the one rounding rule, but at
 * least 1, so that a share given is never 0 (0 in struct engine_defaults is no entry, read as
 * the whole card). The minimum is not reached from a parsed value (at least 0.000001, which is
 * 1 ppm); it guards a hand-built one: r <= 0 and NaN give 1, r >= 1 QUANTITY_PPM. Pure. */
uint32_t engine_ratio_ppm(double r);

/* The engine kind of a name as configured and written in messages ("vllm", "tgi", "sglang"),
 * ENGINE_NONE for any other. */
enum engine_kind engine_kind_of(const char *name);
const char *engine_name(enum engine_kind k); /* static string; "" for ENGINE_NONE */
const char *engine_flag(enum engine_kind k); /* "--gpu-memory-utilization", ... */

/*
 * Split the shell string s (NUL-terminated, at most ENGINE_SCRIPT_MAX bytes) as POSIX sh does
 * for words: blanks separate; ' quotes everything to the next '; " quotes all but $ ` and \
 * (which escapes $ ` " \ and newline there); an unquoted \ escapes the next byte (\newline is
 * removed); # at a word's start comments to the line's end; ; & | && || newline ( ) end a
 * simple command (one sep word "; " each); a redirection (<, >, >>, >&, <&, an IO number
 * before it) is dropped with its target word. An unquoted or double-quoted $NAME, ${...},
 * $(...), $digit, $special or a backquote makes the word opaque (its letters kept as written).
 * Globs and ~ are left as written. Returns 0 and fills *out, or -1 with err saying what it
 * cannot split: an unterminated quote, a here-document (<<), too long, too many words.
 */
int engine_shell_split(const char *s, struct engine_words *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Read the engine of one container (in) with the assumed defaults d (NULL: the table above).
 * Fills *out always. Returns 0 (out->status says what was found), or ENGINE_EINVAL with err
 * naming the container and the flag, e.g. `container "vllm": --gpu-memory-utilization "high" is
 * not a ratio 0 < r <= 1 (e.g. 0.9)` (out->status ENGINE_NOT_FOUND then).
 * Uses about 21 KiB of stack (one engine_words, 18.5 KiB, and the argv).
 */
int engine_read(const struct engine_input *in, const struct engine_defaults *d,
                struct engine_setting *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
