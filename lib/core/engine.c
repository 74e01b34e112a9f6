/*
 * engine: a serving engine's GPU memory share, read from its command line. See engine.h.
 */
#include "engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "capacity.h"
#include "errbuf.h"

/* opaque[] values: a word the shell expands as one word (inside "..."; a kubelet $(VAR)), or
 * an unquoted expansion, which the shell may split into several words, flags included. */
#define OPAQUE_ONE   1
#define OPAQUE_SPLIT 2

#define ENV_TGI "CUDA_MEMORY_FRACTION"

static const char *const names[ENGINE_KINDS] = {"", "vllm", "tgi", "sglang"};
static const char *const flags[ENGINE_KINDS] = {"", "--gpu-memory-utilization",
                                                "--cuda-memory-fraction", "--mem-fraction-static"};

void engine_defaults_init(struct engine_defaults *d)
{
	d->ppm[ENGINE_NONE] = 0;
	d->ppm[ENGINE_VLLM] = ENGINE_DEFAULT_VLLM_PPM;
	d->ppm[ENGINE_TGI] = ENGINE_DEFAULT_TGI_PPM;
	d->ppm[ENGINE_SGLANG] = ENGINE_DEFAULT_SGLANG_PPM;
}

uint32_t engine_ratio_ppm(double r)
{
	uint32_t ppm = quantity_ratio_ppm(r);

	return ppm > 0 ? ppm : 1;
}

enum engine_kind engine_kind_of(const char *name)
{
	for (int k = 1; k < ENGINE_KINDS && name != NULL; k++)
		if (strcmp(name, names[k]) == 0)
			return (enum engine_kind)k;
	return ENGINE_NONE;
}

const char *engine_name(enum engine_kind k)
{
	return (unsigned)k < ENGINE_KINDS ? names[k] : "";
}

const char *engine_flag(enum engine_kind k)
{
	return (unsigned)k < ENGINE_KINDS ? flags[k] : "";
}

/* ---- the shell splitter ---- */

struct split {
	const char *p;
	char *o, *word;      /* output position, start of the current word */
	int in_word, quoted; /* a word is open; some of it was quoted */
	int opaque, skip;    /* its expansion kind; drop the next word (a redirection target) */
	int brace;           /* an unquoted '{' in the word: a ',' or '..' after it is bash's */
	struct engine_words *out;
	char *err;
	size_t errlen;
};

static int push(struct split *s, const char *w, unsigned char opaque, unsigned char sep)
{
	struct engine_words *out = s->out;

	if (out->n == ENGINE_WORDS_MAX) {
		errbuf_set(s->err, s->errlen, "more than %d words", ENGINE_WORDS_MAX);
		return -1;
	}
	out->w[out->n] = w;
	out->opaque[out->n] = opaque;
	out->sep[out->n++] = sep;
	return 0;
}

static int end_word(struct split *s)
{
	int rc = 0;

	if (!s->in_word)
		return 0;
	*s->o++ = '\0';
	if (s->skip)
		s->skip = 0;
	else
		rc = push(s, s->word, (unsigned char)s->opaque, 0);
	s->in_word = s->quoted = s->opaque = s->brace = 0;
	return rc;
}

static int end_command(struct split *s)
{
	struct engine_words *out = s->out;

	if (end_word(s) != 0)
		return -1;
	s->skip = 0;
	if (out->n == 0 || out->sep[out->n - 1])
		return 0;
	return push(s, ";", 0, 1);
}

static void put(struct split *s, char c)
{
	if (!s->in_word) {
		s->in_word = 1;
		s->word = s->o;
	}
	*s->o++ = c;
}

/* An expansion at s->p ('$' or '`'), copied as written up to its end: $NAME, $digit,
 * $special, ${...}, $(...) (nesting counted), `...`. Returns 1 when it is one, 0 for a lone
 * '$' (literal), -1 when unterminated. */
static int expansion(struct split *s)
{
	const char *p = s->p;
	char open = 0, close = 0;
	int depth = 0;

	if (*p == '`') {
		open = 0;
		close = '`';
	} else if (p[1] == '{' || p[1] == '(') {
		open = p[1];
		close = p[1] == '{' ? '}' : ')';
		put(s, *p++);
	} else if ((p[1] >= 'A' && p[1] <= 'Z') || (p[1] >= 'a' && p[1] <= 'z') || p[1] == '_') {
		put(s, *p++);
		while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_' ||
		       (*p >= '0' && *p <= '9'))
			put(s, *p++);
		s->p = p;
		return 1;
	} else if (p[1] != '\0' && strchr("0123456789@*#?$!-", p[1]) != NULL) {
		put(s, *p++);
		put(s, *p++);
		s->p = p;
		return 1;
	} else {
		return 0;
	}
	put(s, *p++);
	for (; *p != '\0'; p++) {
		put(s, *p);
		if (open != 0 && *p == open)
			depth++;
		else if (*p == close && depth-- == 0) {
			s->p = p + 1;
			return 1;
		}
	}
	errbuf_set(s->err, s->errlen, "an unterminated %s", close == '`' ? "`...`" : "$( or ${");
	return -1;
}

/* "..." at s->p: \ escapes $ ` " \ and newline; expansions make the word opaque (one word). */
static int double_quoted(struct split *s)
{
	s->p++;
	s->quoted = 1;
	put(s, '\0');
	s->o--; /* opens the word even when empty ("") */
	while (*s->p != '"') {
		int rc;

		if (*s->p == '\0') {
			errbuf_set(s->err, s->errlen, "an unterminated \"");
			return -1;
		}
		if (*s->p == '\\' && s->p[1] != '\0' && strchr("$`\"\\\n", s->p[1]) != NULL) {
			if (s->p[1] != '\n')
				put(s, s->p[1]);
			s->p += 2;
			continue;
		}
		if (*s->p == '$' || *s->p == '`') {
			rc = expansion(s);
			if (rc < 0)
				return -1;
			if (rc == 1) {
				if (s->opaque < OPAQUE_ONE)
					s->opaque = OPAQUE_ONE;
				continue;
			}
		}
		put(s, *s->p++);
	}
	s->p++;
	return 0;
}

/* A redirection operator at s->p (< or >): an IO number just before it is dropped, and so is
 * the target word after it. */
static int redirection(struct split *s)
{
	int digits = s->in_word && !s->quoted && !s->opaque;

	for (const char *q = s->word; digits && q < s->o; q++) /* the word is not ended yet */
		digits = *q >= '0' && *q <= '9';
	if (digits) {
		s->o = s->word; /* an IO number */
		s->in_word = 0;
	} else if (end_word(s) != 0) {
		return -1;
	}
	if (s->p[0] == '<' && s->p[1] == '<') {
		errbuf_set(s->err, s->errlen, "a here-document (<<)");
		return -1;
	}
	s->p++;
	if (*s->p == '>' || *s->p == '&' || *s->p == '|')
		s->p++;
	s->skip = 1;
	return 0;
}

static int split_one(struct split *s)
{
	char c = *s->p;
	int rc;

	switch (c) {
	case ' ':
	case '\t':
		s->p++;
		return end_word(s);
	case '\n':
	case ';':
	case '&':
	case '|':
	case '(':
	case ')':
		s->p++;
		if ((c == '&' || c == '|' || c == ';') && *s->p == c)
			s->p++;
		return end_command(s);
	case '<':
	case '>':
		return redirection(s);
	case '#':
		if (s->in_word)
			break;
		while (*s->p != '\0' && *s->p != '\n')
			s->p++;
		return 0;
	case '\\':
		if (s->p[1] == '\n') {
			s->p += 2;
			return 0;
		}
		s->p++;
		if (*s->p != '\0') {
			s->quoted = 1;
			put(s, *s->p++);
		} else {
			put(s, '\\');
		}
		return 0;
	case '\'': {
		const char *q = strchr(s->p + 1, '\'');

		if (q == NULL) {
			errbuf_set(s->err, s->errlen, "an unterminated '");
			return -1;
		}
		s->quoted = 1;
		put(s, '\0');
		s->o--;
		for (s->p++; s->p < q; s->p++)
			put(s, *s->p);
		s->p++;
		return 0;
	}
	case '"':
		return double_quoted(s);
	case '$':
	case '`':
		rc = expansion(s);
		if (rc < 0)
			return -1;
		if (rc == 1) {
			s->opaque = OPAQUE_SPLIT;
			return 0;
		}
		/* bash's $'...' (escapes) and $"..." (translation): one word, not as written */
		if (c == '$' && (s->p[1] == '\'' || s->p[1] == '"') && s->opaque < OPAQUE_ONE)
			s->opaque = OPAQUE_ONE;
		break;
	/* Unquoted, a pathname pattern (an image's file may be named like the flag) and bash's
	 * brace expansion ({a,b}, {1..3}) may turn the word into other words. */
	case '*':
	case '?':
	case '[':
		s->opaque = OPAQUE_SPLIT;
		break;
	case '{':
		s->brace = 1;
		break;
	case ',':
	case '.':
		if (s->brace && (c == ',' || s->p[1] == '.'))
			s->opaque = OPAQUE_SPLIT;
		break;
	default:
		break;
	}
	put(s, *s->p++);
	return 0;
}

int engine_shell_split(const char *str, struct engine_words *out, char *err, size_t errlen)
{
	struct split s = {.p = str, .o = out->buf, .out = out, .err = err, .errlen = errlen};

	out->n = 0;
	if (str == NULL || strnlen(str, ENGINE_SCRIPT_MAX + 1) > ENGINE_SCRIPT_MAX) {
		errbuf_set(err, errlen, "a string longer than %d bytes", ENGINE_SCRIPT_MAX);
		return -1;
	}
	while (*s.p != '\0')
		if (split_one(&s) != 0)
			goto fail;
	if (end_command(&s) != 0)
		goto fail;
	return 0;
fail:
	out->n = 0;
	return -1;
}

/* ---- recognising the engine ---- */

static const char *base(const char *w)
{
	const char *slash = strrchr(w, '/');

	return slash ? slash + 1 : w;
}

static int is_python(const char *w)
{
	const char *b = base(w);

	if (strncmp(b, "python", 6) != 0)
		return 0;
	b += 6;
	if (*b == '\0')
		return 1;
	if (*b++ != '3')
		return 0;
	if (*b == '\0')
		return 1;
	if (*b++ != '.')
		return 0;
	return *b != '\0' && strspn(b, "0123456789") == strlen(b);
}

static int is_shell(const char *w)
{
	const char *b = base(w);

	return strcmp(b, "sh") == 0 || strcmp(b, "bash") == 0 || strcmp(b, "dash") == 0 ||
	       strcmp(b, "ash") == 0;
}

/* NAME=value (a shell assignment, or env's). */
static int is_assignment(const char *w)
{
	size_t n = strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789");

	return n > 0 && w[n] == '=' && !(w[0] >= '0' && w[0] <= '9');
}

/* The engine whose command starts at w[0]; *flags_at: where its own words start. */
static enum engine_kind recognise(const char *const *w, size_t n, size_t *flags_at)
{
	const char *b;
	size_t i;

	if (n == 0)
		return ENGINE_NONE;
	b = base(w[0]);
	if (strcmp(b, "text-generation-launcher") == 0) {
		*flags_at = 1;
		return ENGINE_TGI;
	}
	if (n > 1 && strcmp(w[1], "serve") == 0 &&
	    (strcmp(b, "vllm") == 0 || strcmp(b, "sglang") == 0)) {
		*flags_at = 2;
		return b[0] == 'v' ? ENGINE_VLLM : ENGINE_SGLANG;
	}
	if (!is_python(w[0]))
		return ENGINE_NONE;
	/* python's own options before -m; -W and -X take a word, -c runs a string. */
	for (i = 1; i < n && w[i][0] == '-' && strcmp(w[i], "-m") != 0; i++) {
		if (strcmp(w[i], "-c") == 0)
			return ENGINE_NONE;
		if ((strcmp(w[i], "-W") == 0 || strcmp(w[i], "-X") == 0) && ++i == n)
			return ENGINE_NONE;
	}
	if (i + 1 >= n || strcmp(w[i], "-m") != 0)
		return ENGINE_NONE;
	*flags_at = i + 2;
	if (strcmp(w[i + 1], "vllm.entrypoints.openai.api_server") == 0)
		return ENGINE_VLLM;
	if (strcmp(w[i + 1], "sglang.launch_server") == 0)
		return ENGINE_SGLANG;
	return ENGINE_NONE;
}

/* The image's repository path without tag or digest is repo, or ends with "/" repo (a registry
 * host, a mirror's prefix: "ghcr.io/huggingface/text-generation-inference:3.0",
 * "registry.local:5000/mirror/vllm/vllm-openai@sha256:..."). */
static int image_is(const char *image, const char *repo)
{
	char buf[256];
	char *end;
	size_t len, rl = strlen(repo);

	if (image == NULL || strnlen(image, sizeof(buf)) >= sizeof(buf))
		return 0;
	snprintf(buf, sizeof(buf), "%s", image);
	if ((end = strchr(buf, '@')) != NULL)
		*end = '\0';
	if ((end = strrchr(buf, ':')) != NULL && strchr(end, '/') == NULL)
		*end = '\0'; /* a tag (a host's port has a '/' after it) */
	len = strlen(buf);
	return len >= rl && strcmp(buf + len - rl, repo) == 0 &&
	       (len == rl || buf[len - rl - 1] == '/');
}

static enum engine_kind image_engine(const char *image)
{
	if (image_is(image, "vllm/vllm-openai"))
		return ENGINE_VLLM;
	if (image_is(image, "huggingface/text-generation-inference"))
		return ENGINE_TGI;
	return ENGINE_NONE;
}

/* Same flag name, `_` read as `-`; name ends at '=' or the word's end. */
static int flag_is(const char *w, const char *flag, const char **eq)
{
	size_t i;

	for (i = 0; flag[i] != '\0'; i++) {
		char c = w[i] == '_' ? '-' : w[i];

		if (c != flag[i] || w[i] == '\0')
			return 0;
	}
	if (w[i] != '\0' && w[i] != '=')
		return 0;
	*eq = w[i] == '=' ? w + i + 1 : NULL;
	return 1;
}

/* A shorter prefix of flag, `_` read as `-`, of at least 5 letters after "--", ending at '=' or
 * the word's end: argparse takes a unique one for the flag (SGLang's parser does). */
static int flag_prefix(const char *w, const char *flag)
{
	size_t n = strcspn(w, "="), i;

	if (n < 7 || n >= strlen(flag))
		return 0;
	for (i = 0; i < n; i++)
		if ((w[i] == '_' ? '-' : w[i]) != flag[i])
			return 0;
	return 1;
}

/* One command line of an engine: its words and their opaqueness (NULL: none). */
struct cmdline {
	const char *const *w;
	const unsigned char *opaque;
	size_t n;
	const char *env_value; /* ENV_TGI from a NAME=value prefix of the command */
	int env_unknown;       /* ENV_TGI is also named elsewhere in the sh -c string (export) */
};

/* A kubelet $(VAR) reference (not the $$( escape) in a word of command or args. */
static int kubelet_ref(const char *w)
{
	for (const char *p = strstr(w, "$("); p != NULL; p = strstr(p + 1, "$("))
		if (p == w || p[-1] != '$')
			return 1;
	return 0;
}

static unsigned char opaque_of(const struct cmdline *c, size_t i)
{
	if (c->opaque != NULL)
		return c->opaque[i];
	return kubelet_ref(c->w[i]) ? OPAQUE_ONE : 0;
}

/* Set out->words; returns 0. */
static int say(struct engine_setting *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int say(struct engine_setting *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(out->words, sizeof(out->words), fmt, ap) < 0)
		out->words[0] = '\0';
	va_end(ap);
	return 0;
}

static void ppm_str(uint32_t ppm, char *buf, size_t len)
{
	size_t n;

	snprintf(buf, len, "%u.%06u", ppm / QUANTITY_PPM, ppm % QUANTITY_PPM);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
}

static int ratio(const struct engine_input *in, enum engine_kind k, const char *what, const char *v,
                 uint32_t *ppm, char *err, size_t errlen)
{
	double r = 0;

	if (v == NULL || capacity_parse_ratio(v, &r) != 0) {
		errbuf_set(err, errlen,
		           "container \"%s\": %s %s %s%.32s%s is not a ratio 0 < r <= 1 of the "
		           "card's memory (e.g. 0.9)",
		           in->container ? in->container : "", engine_name(k), what, v ? "\"" : "",
		           v ? v : "without a value", v ? "\"" : "");
		return ENGINE_EINVAL;
	}
	*ppm = engine_ratio_ppm(r);
	return 0;
}

/* The engine's memory flag in c->w[from..n), the last occurrence winning, then env, then the
 * default. */
static int read_flags(const struct engine_input *in, const struct engine_defaults *d,
                      enum engine_kind k, const struct cmdline *c, size_t from, const char *where,
                      struct engine_setting *out, char *err, size_t errlen)
{
	const char *flag = flags[k], *value = NULL, *eq = NULL;
	int found = 0;
	size_t i, at = 0, skipped = 0; /* the flag's last word; the last word skipped, + 1 */

	out->kind = k;
	for (i = from; i < c->n; i++) {
		unsigned char op = opaque_of(c, i);

		if (strcmp(c->w[i], "--") == 0)
			break;
		/* One word that cannot be the flag: the value of another flag, or the model right
		 * after `serve` (vllm serve "$MODEL"). */
		if (op == OPAQUE_ONE &&
		    ((i == from && from >= 2 && strcmp(c->w[from - 1], "serve") == 0) ||
		     (i > from && strncmp(c->w[i - 1], "--", 2) == 0 &&
		      strchr(c->w[i - 1], '=') == NULL && !flag_is(c->w[i - 1], flag, &eq) &&
		      opaque_of(c, i - 1) == 0))) {
			skipped = i + 1;
			continue;
		}
		if (op != 0) {
			out->status = ENGINE_UNREADABLE;
			return say(
			    out, "%s%s: %.40s is expanded by the %s at run time and may hold %s",
			    engine_name(k), where, c->w[i], c->opaque ? "shell" : "kubelet", flag);
		}
		if (!flag_is(c->w[i], flag, &eq)) {
			const char *other = NULL;

			if (flag_prefix(c->w[i], flag))
				other = "may be an abbreviation of";
			else if (k == ENGINE_VLLM &&
			         flag_is(c->w[i], "--kv-cache-memory-bytes", &other))
				other = "replaces";
			if (other != NULL) {
				out->status = ENGINE_UNREADABLE;
				return say(out, "%s%s: %.40s %s %s", engine_name(k), where, c->w[i],
				           other, flag);
			}
			continue;
		}
		found = 1;
		if (eq != NULL) {
			value = eq;
		} else if (i + 1 < c->n) {
			value = c->w[++i];
			if (opaque_of(c, i) != 0) {
				out->status = ENGINE_UNREADABLE;
				return say(out, "%s%s: %s %.40s is expanded at run time",
				           engine_name(k), where, flag, value);
			}
		} else {
			value = NULL;
		}
		at = i + 1;
	}
	/* A word skipped after the flag may be the flag again, and the last one wins: the other
	 * flag it follows may take no value (--enforce-eager "$MORE"). */
	if (found && skipped > at) {
		out->status = ENGINE_UNREADABLE;
		return say(out,
		           "%s%s: %.40s after %s is expanded by the %s at run time and may hold "
		           "%s again",
		           engine_name(k), where, c->w[skipped - 1], flag,
		           c->opaque ? "shell" : "kubelet", flag);
	}
	if (found) {
		if (ratio(in, k, flag, value, &out->ratio_ppm, err, errlen) != 0)
			return ENGINE_EINVAL;
		out->status = ENGINE_FOUND;
		out->origin = ENGINE_ORIGIN_FLAG;
		return say(out, "%s %s %.16s", engine_name(k), flag, value);
	}
	if (k == ENGINE_TGI && c->env_unknown) {
		out->status = ENGINE_UNREADABLE;
		return say(out, "%s%s: " ENV_TGI " is set by the string at run time",
		           engine_name(k), where);
	}
	if (k == ENGINE_TGI && (c->env_value != NULL || in->env_tgi_fraction != NULL)) {
		value = c->env_value != NULL ? c->env_value : in->env_tgi_fraction;
		if (ratio(in, k, "env " ENV_TGI, value, &out->ratio_ppm, err, errlen) != 0)
			return ENGINE_EINVAL;
		out->status = ENGINE_FOUND;
		out->origin = ENGINE_ORIGIN_ENV;
		return say(out, "%s env " ENV_TGI " %.16s", engine_name(k), value);
	}
	char def[16];

	out->status = ENGINE_FOUND;
	out->origin = ENGINE_ORIGIN_DEFAULT;
	out->ratio_ppm = d->ppm[k] >= 1 && d->ppm[k] <= QUANTITY_PPM ? d->ppm[k] : QUANTITY_PPM;
	ppm_str(out->ratio_ppm, def, sizeof(def));
	return say(out, "%s's default %s %s", engine_name(k), flag, def);
}

/* env(1) at w[0]: the position of the command it runs, past its options (-i, -, -u NAME,
 * --unset=NAME, --ignore-environment, --) and NAME=value words; 0 when w[0] is not env or env
 * has an option not read here (-S splits a string of its own). *tgi: a CUDA_MEMORY_FRACTION=v
 * word's value; *cleared: an option that may unset the container's env. */
static size_t env_command(const char *const *w, size_t n, const char **tgi, int *cleared)
{
	size_t i;

	if (n == 0 || strcmp(base(w[0]), "env") != 0)
		return 0;
	for (i = 1; i < n && w[i][0] == '-'; i++) {
		if (strcmp(w[i], "--") == 0) {
			i++;
			break;
		}
		*cleared = 1;
		if (strcmp(w[i], "-u") == 0 || strcmp(w[i], "--unset") == 0) {
			if (++i == n)
				return 0;
			continue;
		}
		if (strcmp(w[i], "-i") != 0 && strcmp(w[i], "-") != 0 &&
		    strcmp(w[i], "--ignore-environment") != 0 &&
		    strncmp(w[i], "--unset=", 8) != 0 &&
		    !(strncmp(w[i], "-u", 2) == 0 && w[i][2] != '\0'))
			return 0;
	}
	for (; i < n && is_assignment(w[i]); i++)
		if (strncmp(w[i], ENV_TGI "=", sizeof(ENV_TGI)) == 0)
			*tgi = w[i] + sizeof(ENV_TGI);
	return i < n ? i : 0;
}

/* The position of the string a shell runs in argv (sh [options] -c string), or 0. */
static size_t shell_string(const char *const *w, size_t n)
{
	int c = 0;
	size_t i;

	for (i = 1; i < n && (w[i][0] == '-' || w[i][0] == '+'); i++) {
		if (strcmp(w[i], "--") == 0 || strcmp(w[i], "-") == 0) {
			i++;
			break;
		}
		if (strcmp(w[i] + 1, "o") == 0 && ++i == n)
			return 0;
		if (w[i][0] == '-' && strchr(w[i], 'c') != NULL && w[i][1] != '-')
			c = 1;
	}
	return c && i < n ? i : 0;
}

/* The engine in a sh -c string: its first simple command that is one. */
static int read_shell(const struct engine_input *in, const struct engine_defaults *d,
                      const char *script, struct engine_setting *out, char *err, size_t errlen)
{
	struct engine_words words;
	char why[96];
	size_t start = 0;

	if (engine_shell_split(script, &words, why, sizeof(why)) != 0) {
		if (strstr(script, "vllm") == NULL && strstr(script, "sglang") == NULL &&
		    strstr(script, "text-generation-launcher") == NULL)
			return 0;
		out->status = ENGINE_UNREADABLE;
		return say(out, "a sh -c string the guard cannot split (%s)", why);
	}
	for (size_t i = 0; i <= words.n; i++) {
		struct cmdline c = {.w = words.w, .opaque = words.opaque};
		enum engine_kind k;
		size_t at = 0, j;

		if (i < words.n && !words.sep[i])
			continue;
		/* words[start..i): one simple command; skip assignments, exec, env. */
		for (j = start; j < i; j++) {
			const char *w = words.w[j];

			if (words.opaque[j] == 0 && is_assignment(w)) {
				if (strncmp(w, ENV_TGI "=", sizeof(ENV_TGI)) == 0)
					c.env_value = w + sizeof(ENV_TGI);
				continue;
			}
			if (words.opaque[j] == 0 &&
			    (strcmp(w, "exec") == 0 || strcmp(w, "env") == 0))
				continue;
			break;
		}
		if (j < i && words.opaque[j] == 0) {
			k = recognise(words.w + j, i - j, &at);
			if (k != ENGINE_NONE) {
				size_t named = 0;

				for (const char *p = strstr(script, ENV_TGI); p != NULL;
				     p = strstr(p + 1, ENV_TGI))
					named++;
				c.env_unknown = named > (c.env_value != NULL);
				c.w = words.w + j;
				c.opaque = words.opaque + j;
				c.n = i - j;
				return read_flags(in, d, k, &c, at, " in a sh -c string", out, err,
				                  errlen);
			}
		}
		start = i + 1;
	}
	return 0;
}

int engine_read(const struct engine_input *in, const struct engine_defaults *d,
                struct engine_setting *out, char *err, size_t errlen)
{
	const char *argv[ENGINE_WORDS_MAX] = {0};
	struct engine_defaults def;
	struct engine_input env_in;
	struct cmdline c = {.w = argv};
	enum engine_kind k;
	size_t n = 0, at = 0, sh, e = 0;
	int rc, cleared = 0;

	memset(out, 0, sizeof(*out));
	if (d == NULL) {
		engine_defaults_init(&def);
		d = &def;
	}
	if (in->n_command + in->n_args > ENGINE_WORDS_MAX) {
		out->status = ENGINE_UNREADABLE;
		return say(out, "a command line of more than %d words", ENGINE_WORDS_MAX);
	}
	for (size_t i = 0; i < in->n_command; i++)
		argv[n++] = in->command[i] ? in->command[i] : "";
	for (size_t i = 0; i < in->n_args; i++)
		argv[n++] = in->args[i] ? in->args[i] : "";
	c.n = n;
	/* env(1) as the command: the command it runs, as in a sh -c string */
	if (in->n_command > 0 && (e = env_command(argv, n, &c.env_value, &cleared)) != 0) {
		c.w = argv + e;
		c.n = n - e;
		env_in = *in; /* the env the command runs with, a sh -c string's included */
		if (cleared)
			env_in.env_tgi_fraction = NULL;
		if (c.env_value != NULL)
			env_in.env_tgi_fraction = c.env_value;
		in = &env_in;
	}
	if (c.n > 0 && is_shell(c.w[0]) && (sh = shell_string(c.w, c.n)) != 0) {
		rc = read_shell(in, d, c.w[sh], out, err, errlen);
		goto out;
	}
	k = recognise(c.w, c.n, &at);
	if (k != ENGINE_NONE) {
		rc = read_flags(in, d, k, &c, at, "", out, err, errlen);
		goto out;
	}
	k = in->n_command == 0 ? image_engine(in->image) : ENGINE_NONE;
	rc =
	    k != ENGINE_NONE ? read_flags(in, d, k, &c, 0, " (by its image)", out, err, errlen) : 0;
out:
	if (rc != 0)
		memset(out, 0, sizeof(*out));
	return rc;
}
