/*
 * execcred: exec credential plugins. See execcred.h for the rules and their sources.
 *
 * The plugin is started with posix_spawnp (no shell, no fork of a threaded process's address
 * space), its stdout read through a pipe with poll() against one deadline, and killed when the
 * deadline passes or it prints more than the cap.
 */
#define _GNU_SOURCE /* pipe2, asprintf, timegm */
#include "execcred.h"

#include "capfile.h"
#include "errbuf.h"
#include "kubeconfig.h"
#include "monotime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define CA_FILE_MAX (1024u * 1024u) /* bytes of a CA file passed to the plugin */
#define INFO_ENV    "KUBERNETES_EXEC_INFO"
#define WHO_MAX     256 /* bytes of the plugin's name in messages */

struct execcred {
	pthread_mutex_t mu;
	char **argv;    /* command, args..., NULL */
	char **env_add; /* "NAME=value" of exec.env, n_env of them */
	size_t n_env;
	char *user;        /* kubeconfig user, for messages */
	char who[WHO_MAX]; /* how messages name it: exec plugin "CMD" (user "U") */
	char *api_version;
	char *install_hint; /* or NULL */
	enum kube_exec_interactive mode;
	cJSON *cluster; /* spec.cluster of KUBERNETES_EXEC_INFO, or NULL */
	long timeout_ms;
	/* the cache, under mu */
	struct execcred_value cached;
	int have;          /* cached holds a credential */
	int64_t expiry_ms; /* INT64_MAX: until a 401 */
	uint64_t generation;
	unsigned long runs;
};

void execcred_value_free(struct execcred_value *v)
{
	if (v == NULL)
		return;
	free(v->token);
	free(v->cert);
	free(v->key);
	memset(v, 0, sizeof(*v));
}

static char *dup_bytes(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d != NULL) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* spec.cluster for provideClusterInfo: server, the CA as base64 ([]byte in JSON), insecure. */
static cJSON *cluster_info(const struct kube_config *k, char *err, size_t errlen)
{
	cJSON *cl = cJSON_CreateObject();
	char *file = NULL, *b64 = NULL;
	const char *ca = k->ca_data;
	size_t ca_len = k->ca_data_len;

	if (cl == NULL || cJSON_AddStringToObject(cl, "server", k->server) == NULL)
		goto oom;
	if (ca == NULL && k->ca_file != NULL) {
		if (capfile_read(k->ca_file, CA_FILE_MAX, 0, &file, &ca_len, err, errlen) < 0)
			goto fail;
		ca = file;
	}
	if (ca != NULL && ca_len > 0) {
		b64 = malloc((ca_len + 2) / 3 * 4 + 1);
		if (b64 == NULL)
			goto oom;
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)ca, (int)ca_len);
		if (cJSON_AddStringToObject(cl, "certificate-authority-data", b64) == NULL)
			goto oom;
	}
	if (k->insecure_skip_tls_verify &&
	    cJSON_AddBoolToObject(cl, "insecure-skip-tls-verify", 1) == NULL)
		goto oom;
	free(b64);
	free(file);
	return cl;
oom:
	errbuf_set(err, errlen, "out of memory");
fail:
	free(b64);
	free(file);
	cJSON_Delete(cl);
	return NULL;
}

static int copy_exec(struct execcred *c, const struct kube_exec *e)
{
	c->argv = calloc(e->n_args + 2, sizeof(*c->argv));
	c->env_add = calloc(e->n_env + 1, sizeof(*c->env_add));
	if (c->argv == NULL || c->env_add == NULL || (c->argv[0] = strdup(e->command)) == NULL)
		return -1;
	for (size_t i = 0; i < e->n_args; i++)
		if ((c->argv[i + 1] = strdup(e->args[i])) == NULL)
			return -1;
	for (size_t i = 0; i < e->n_env; i++) {
		if (asprintf(&c->env_add[i], "%s=%s", e->env_names[i], e->env_values[i]) < 0) {
			c->env_add[i] = NULL;
			return -1;
		}
		c->n_env = i + 1;
	}
	c->user = strdup(e->user ? e->user : "");
	c->api_version = strdup(e->api_version);
	if (c->user == NULL || c->api_version == NULL)
		return -1;
	if (e->install_hint != NULL && (c->install_hint = strdup(e->install_hint)) == NULL)
		return -1;
	c->mode = e->interactive_mode;
	snprintf(c->who, sizeof(c->who), "exec plugin \"%.128s\" (user \"%.64s\")", c->argv[0],
	         c->user);
	return 0;
}

struct execcred *execcred_new(const struct kube_exec *exec, const struct kube_config *cluster,
                              long timeout_ms, char *err, size_t errlen)
{
	struct execcred *c;

	if (exec == NULL || exec->command == NULL || exec->api_version == NULL || cluster == NULL ||
	    cluster->server == NULL || timeout_ms <= 0) {
		errbuf_set(err, errlen, "exec plugin: no command, apiVersion, server or timeout");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		goto oom;
	if (pthread_mutex_init(&c->mu, NULL) != 0) {
		free(c);
		goto oom;
	}
	c->timeout_ms = timeout_ms;
	if (copy_exec(c, exec) < 0)
		goto oom_c;
	if (exec->provide_cluster_info && (c->cluster = cluster_info(cluster, err, errlen)) == NULL)
		goto err_c;
	return c;
oom_c:
	errbuf_set(err, errlen, "out of memory");
err_c:
	execcred_free(c);
	return NULL;
oom:
	errbuf_set(err, errlen, "out of memory");
	return NULL;
}

void execcred_free(struct execcred *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; c->argv != NULL && c->argv[i] != NULL; i++)
		free(c->argv[i]);
	for (size_t i = 0; i < c->n_env; i++)
		free(c->env_add[i]);
	free(c->argv);
	free(c->env_add);
	free(c->user);
	free(c->api_version);
	free(c->install_hint);
	cJSON_Delete(c->cluster);
	execcred_value_free(&c->cached);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* "NAME=..." names an entry of exec.env, or KUBERNETES_EXEC_INFO: ours wins. */
static int overridden(const struct execcred *c, const char *entry)
{
	size_t n = strcspn(entry, "=");

	if (n == strlen(INFO_ENV) && strncmp(entry, INFO_ENV, n) == 0)
		return 1;
	for (size_t i = 0; i < c->n_env; i++)
		if (strncmp(c->env_add[i], entry, n) == 0 && c->env_add[i][n] == '=')
			return 1;
	return 0;
}

/* The plugin's environment: ours, exec.env over it, then KUBERNETES_EXEC_INFO=info. The
 * array is new; the strings are borrowed except the last one, which is *info_entry. */
static char **plugin_env(const struct execcred *c, const char *info, char **info_entry)
{
	size_t n = 0, k = 0;
	char **envp;

	while (environ != NULL && environ[n] != NULL)
		n++;
	envp = calloc(n + c->n_env + 2, sizeof(*envp));
	if (envp == NULL || asprintf(info_entry, "%s=%s", INFO_ENV, info) < 0) {
		*info_entry = NULL;
		free(envp);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (!overridden(c, environ[i]))
			envp[k++] = environ[i];
	for (size_t i = 0; i < c->n_env; i++)
		envp[k++] = c->env_add[i];
	envp[k] = *info_entry;
	return envp;
}

/* KUBERNETES_EXEC_INFO's value: the ExecCredential the plugin is given. */
static char *exec_info(const struct execcred *c, int interactive)
{
	cJSON *root = cJSON_CreateObject(), *spec;
	char *s = NULL;

	if (root == NULL || cJSON_AddStringToObject(root, "apiVersion", c->api_version) == NULL ||
	    cJSON_AddStringToObject(root, "kind", "ExecCredential") == NULL ||
	    (spec = cJSON_AddObjectToObject(root, "spec")) == NULL ||
	    cJSON_AddBoolToObject(spec, "interactive", interactive) == NULL)
		goto out;
	if (c->cluster != NULL) {
		cJSON *cl = cJSON_Duplicate(c->cluster, 1);
		if (cl == NULL || !cJSON_AddItemToObject(spec, "cluster", cl)) {
			cJSON_Delete(cl);
			goto out;
		}
	}
	s = cJSON_PrintUnformatted(root);
out:
	cJSON_Delete(root);
	return s;
}

/* The plugin's name in messages. */
#define WHO_FMT     "%s"
#define WHO_ARGS(c) (c)->who

/* Read fd until EOF, the cap or the deadline (monotonic seconds). 0, or -1 with err. */
static int read_all(const struct execcred *c, int fd, double deadline, char **out, size_t *len,
                    char *err, size_t errlen)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);

	if (buf == NULL)
		goto oom;
	for (;;) {
		double left = deadline - monotime_s();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr;
		ssize_t r;

		if (left <= 0) {
			errbuf_set(err, errlen, WHO_FMT ": no answer within %ld ms", WHO_ARGS(c),
			           c->timeout_ms);
			goto fail;
		}
		pr = poll(&p, 1, (int)(left * 1000) + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0)
			continue; /* the deadline check above ends it */
		if (n == cap) {
			if (cap >= EXECCRED_OUTPUT_MAX + 1) {
				errbuf_set(err, errlen, WHO_FMT ": printed more than %u bytes",
				           WHO_ARGS(c), EXECCRED_OUTPUT_MAX);
				goto fail;
			}
			cap = cap * 2 > EXECCRED_OUTPUT_MAX + 1 ? EXECCRED_OUTPUT_MAX + 1 : cap * 2;
			char *nb = realloc(buf, cap + 1);
			if (nb == NULL)
				goto oom;
			buf = nb;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			errbuf_set(err, errlen, WHO_FMT ": reading its output: %s", WHO_ARGS(c),
			           strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > EXECCRED_OUTPUT_MAX) {
			errbuf_set(err, errlen, WHO_FMT ": printed more than %u bytes", WHO_ARGS(c),
			           EXECCRED_OUTPUT_MAX);
			goto fail;
		}
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
oom:
	errbuf_set(err, errlen, "out of memory");
fail:
	free(buf);
	return -1;
}

/* Start the plugin with its stdout on pipe_w and stdin /dev/null unless interactive. */
static int spawn(const struct execcred *c, int pipe_w, int interactive, char **envp, pid_t *pid,
                 char *err, size_t errlen)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, pipe_only;
	int rc;

	if (posix_spawn_file_actions_init(&fa) != 0) {
		errbuf_set(err, errlen, "out of memory");
		return -1;
	}
	if (posix_spawnattr_init(&attr) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		errbuf_set(err, errlen, "out of memory");
		return -1;
	}
	/* The plugin starts with no signal blocked and SIGPIPE at its default, whatever ours. */
	sigemptyset(&none);
	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	rc = posix_spawn_file_actions_adddup2(&fa, pipe_w, STDOUT_FILENO);
	if (rc == 0 && !interactive)
		rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (rc == 0)
		rc =
		    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (rc == 0)
		rc = posix_spawnattr_setsigmask(&attr, &none);
	if (rc == 0)
		rc = posix_spawnattr_setsigdefault(&attr, &pipe_only);
	if (rc == 0)
		rc = posix_spawnp(pid, c->argv[0], &fa, &attr, c->argv, envp);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	if (rc == ENOENT)
		errbuf_set(err, errlen, WHO_FMT ": command not found%s%.512s", WHO_ARGS(c),
		           c->install_hint ? ". " : " (not in PATH, or no such file)",
		           c->install_hint ? c->install_hint : "");
	else if (rc != 0)
		errbuf_set(err, errlen, WHO_FMT ": cannot start: %s", WHO_ARGS(c), strerror(rc));
	return rc == 0 ? 0 : -1;
}

/*
 * Wait for pid until deadline (monotonic seconds; 0: kill it now), then SIGKILL it: a plugin
 * that closed its stdout but does not exit must not hang the caller. An exit status other than
 * 0, a signal or the kill is an error (err may be NULL).
 */
static int reap(const struct execcred *c, pid_t pid, double deadline, char *err, size_t errlen)
{
	int st, killed = 0;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &st, killed ? 0 : WNOHANG);
		if (r == pid)
			break;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			errbuf_set(err, errlen, WHO_FMT ": waitpid: %s", WHO_ARGS(c),
			           strerror(errno));
			return -1;
		}
		if (monotime_s() >= deadline) {
			kill(pid, SIGKILL);
			killed = 1;
			continue;
		}
		usleep(5000);
	}
	if (killed) {
		errbuf_set(err, errlen, WHO_FMT ": did not exit within %ld ms (killed)",
		           WHO_ARGS(c), c->timeout_ms);
		return -1;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st))
		errbuf_set(err, errlen, WHO_FMT ": exited with status %d (its stderr is above)",
		           WHO_ARGS(c), WEXITSTATUS(st));
	else
		errbuf_set(err, errlen, WHO_FMT ": killed by signal %d", WHO_ARGS(c), WTERMSIG(st));
	return -1;
}

/* Run the plugin once; its whole stdout into *out (caller frees). 0, or -1 with err. */
static int run_plugin(const struct execcred *c, char **out, size_t *len, char *err, size_t errlen)
{
	int tty = isatty(STDIN_FILENO), interactive, fds[2] = {-1, -1}, rc = -1;
	char *info = NULL, *info_entry = NULL, **envp = NULL;
	double deadline;
	pid_t pid;

	if (c->mode == KUBE_EXEC_ALWAYS && !tty) {
		errbuf_set(err, errlen,
		           WHO_FMT ": its interactiveMode is Always and stdin is not a terminal",
		           WHO_ARGS(c));
		return -1;
	}
	interactive = c->mode != KUBE_EXEC_NEVER && tty;
	if ((info = exec_info(c, interactive)) == NULL ||
	    (envp = plugin_env(c, info, &info_entry)) == NULL) {
		errbuf_set(err, errlen, "out of memory");
		goto out;
	}
	if (pipe2(fds, O_CLOEXEC) < 0) {
		errbuf_set(err, errlen, WHO_FMT ": pipe: %s", WHO_ARGS(c), strerror(errno));
		goto out;
	}
	if (spawn(c, fds[1], interactive, envp, &pid, err, errlen) < 0)
		goto out;
	close(fds[1]);
	fds[1] = -1;
	deadline = monotime_s() + (double)c->timeout_ms / 1000.0;
	if (read_all(c, fds[0], deadline, out, len, err, errlen) < 0) {
		(void)reap(c, pid, 0, NULL, 0);
		goto out;
	}
	if (reap(c, pid, deadline, err, errlen) < 0) {
		free(*out);
		*out = NULL;
		goto out;
	}
	rc = 0;
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	free(envp);
	free(info_entry);
	free(info);
	return rc;
}

/* Two decimal digits at s. */
static int digits(const char *s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (s[i] - '0');
	}
	return 0;
}

int execcred_parse_time(const char *s, int64_t *ms)
{
	struct tm tm = {0};
	int y, mo, d, h, mi, sec, oh = 0, om = 0, frac_ms = 0;
	const char *p;
	time_t t;

	if (s == NULL || strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-' ||
	    digits(s + 5, 2, &mo) || s[7] != '-' || digits(s + 8, 2, &d) ||
	    (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) || s[13] != ':' ||
	    digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &sec))
		return -1;
	p = s + 19;
	if (*p == '.') {
		int nd = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, nd++)
			if (nd < 3)
				frac_ms = frac_ms * 10 + (*p - '0');
		if (nd == 0)
			return -1;
		for (; nd < 3; nd++)
			frac_ms *= 10;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if ((*p == '+' || *p == '-') && !digits(p + 1, 2, &oh) && p[3] == ':' &&
	           !digits(p + 4, 2, &om)) {
		if (oh > 23 || om > 59)
			return -1;
		if (*p == '-')
			oh = -oh, om = -om;
		p += 6;
	} else {
		return -1;
	}
	if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	/* timegm normalizes 31 February into March: a date that does not exist is refused. */
	if (tm.tm_mday != d || tm.tm_mon != mo - 1)
		return -1;
	*ms = ((int64_t)t - (int64_t)oh * 3600 - (int64_t)om * 60) * 1000 + frac_ms;
	return 0;
}

/* A string field of status, NULL when absent or empty; -1 when present but not a string. */
static int status_str(const cJSON *status, const char *key, const char **v)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(status, key);

	*v = NULL;
	if (f == NULL || cJSON_IsNull(f))
		return 0;
	if (!cJSON_IsString(f) || f->valuestring == NULL)
		return -1;
	*v = f->valuestring[0] ? f->valuestring : NULL;
	return 0;
}

int execcred_parse(const char *api_version, const char *who, const char *buf, size_t len,
                   struct execcred_value *v, int64_t *expiry_ms, char *err, size_t errlen)
{
	cJSON *root = NULL;
	const cJSON *av, *kind, *status;
	const char *tok, *cert, *key, *exp;
	int rc = -1;

	memset(v, 0, sizeof(*v));
	*expiry_ms = INT64_MAX;
	if (api_version == NULL || who == NULL || (buf == NULL && len > 0) ||
	    len > EXECCRED_OUTPUT_MAX) {
		errbuf_set(err, errlen, "exec plugin: no apiVersion, or an output over %u bytes",
		           EXECCRED_OUTPUT_MAX);
		goto out;
	}
	root = cJSON_ParseWithLength(buf != NULL ? buf : "", len);
	av = cJSON_GetObjectItemCaseSensitive(root, "apiVersion");
	kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
	status = cJSON_GetObjectItemCaseSensitive(root, "status");
	if (!cJSON_IsObject(root)) {
		/* The output is not quoted: a broken one may still hold a secret. */
		errbuf_set(err, errlen,
		           WHO_FMT ": its output (%zu bytes) is not a JSON object (an "
		                   "ExecCredential)",
		           who, len);
		goto out;
	}
	if (!cJSON_IsString(av) || strcmp(av->valuestring, api_version) != 0 ||
	    !cJSON_IsString(kind) || strcmp(kind->valuestring, "ExecCredential") != 0) {
		errbuf_set(err, errlen,
		           WHO_FMT ": printed apiVersion \"%.64s\" kind \"%.32s\", want %s "
		                   "ExecCredential (the kubeconfig's exec.apiVersion)",
		           who, cJSON_IsString(av) ? av->valuestring : "",
		           cJSON_IsString(kind) ? kind->valuestring : "", api_version);
		goto out;
	}
	if (!cJSON_IsObject(status) || status_str(status, "token", &tok) < 0 ||
	    status_str(status, "clientCertificateData", &cert) < 0 ||
	    status_str(status, "clientKeyData", &key) < 0 ||
	    status_str(status, "expirationTimestamp", &exp) < 0) {
		errbuf_set(
		    err, errlen,
		    WHO_FMT
		    ": status missing, or a field of it (token, "
		    "clientCertificateData, clientKeyData, expirationTimestamp) not a string",
		    who);
		goto out;
	}
	if ((cert == NULL) != (key == NULL) || (tok == NULL && cert == NULL)) {
		errbuf_set(err, errlen,
		           WHO_FMT ": status has %s: want a token, or clientCertificateData with "
		                   "clientKeyData",
		           who,
		           cert != NULL  ? "clientCertificateData without clientKeyData"
		           : key != NULL ? "clientKeyData without clientCertificateData"
		                         : "no credential");
		goto out;
	}
	if (tok != NULL && (strlen(tok) > EXECCRED_TOKEN_MAX || strpbrk(tok, "\r\n") != NULL)) {
		errbuf_set(err, errlen, WHO_FMT ": status.token is multi-line or over %u bytes",
		           who, EXECCRED_TOKEN_MAX);
		goto out;
	}
	if (exp != NULL && execcred_parse_time(exp, expiry_ms) < 0) {
		errbuf_set(err, errlen,
		           WHO_FMT ": status.expirationTimestamp \"%.64s\" is not an RFC 3339 time",
		           who, exp);
		goto out;
	}
	if ((tok != NULL && (v->token = strdup(tok)) == NULL) ||
	    (cert != NULL && ((v->cert = dup_bytes(cert, v->cert_len = strlen(cert))) == NULL ||
	                      (v->key = dup_bytes(key, v->key_len = strlen(key))) == NULL))) {
		execcred_value_free(v);
		errbuf_set(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

static int copy_value(const struct execcred_value *s, struct execcred_value *d)
{
	memset(d, 0, sizeof(*d));
	d->generation = s->generation;
	d->cert_len = s->cert_len;
	d->key_len = s->key_len;
	if ((s->token != NULL && (d->token = strdup(s->token)) == NULL) ||
	    (s->cert != NULL && (d->cert = dup_bytes(s->cert, s->cert_len)) == NULL) ||
	    (s->key != NULL && (d->key = dup_bytes(s->key, s->key_len)) == NULL)) {
		execcred_value_free(d);
		return -1;
	}
	return 0;
}

/* Run the plugin and cache its answer. Under c->mu. */
static int refresh(struct execcred *c, int64_t now_ms, char *err, size_t errlen)
{
	struct execcred_value v;
	int64_t expiry;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	c->runs++;
	if (run_plugin(c, &buf, &len, err, errlen) < 0)
		return -1;
	rc = execcred_parse(c->api_version, c->who, buf, len, &v, &expiry, err, errlen);
	free(buf);
	if (rc < 0)
		return -1;
	if (expiry <= now_ms) {
		errbuf_set(err, errlen,
		           WHO_FMT ": its credential has already expired (expirationTimestamp in "
		                   "the past: is the clock right?)",
		           WHO_ARGS(c));
		execcred_value_free(&v);
		return -1;
	}
	execcred_value_free(&c->cached);
	c->cached = v;
	c->cached.generation = ++c->generation;
	c->expiry_ms = expiry;
	c->have = 1;
	return 0;
}

int execcred_get(struct execcred *c, int64_t now_ms, struct execcred_value *out, char *err,
                 size_t errlen)
{
	int rc = -1;

	if (out == NULL)
		return -1;
	memset(out, 0, sizeof(*out));
	if (c == NULL)
		return -1;
	pthread_mutex_lock(&c->mu);
	if (!c->have || c->expiry_ms <= now_ms) {
		c->have = 0;
		if (refresh(c, now_ms, err, errlen) < 0)
			goto out;
	}
	if (copy_value(&c->cached, out) < 0) {
		errbuf_set(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void execcred_invalidate(struct execcred *c, uint64_t generation)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	if (c->have && c->cached.generation == generation)
		c->have = 0;
	pthread_mutex_unlock(&c->mu);
}

unsigned long execcred_runs(struct execcred *c)
{
	unsigned long n;

	if (c == NULL)
		return 0;
	pthread_mutex_lock(&c->mu);
	n = c->runs;
	pthread_mutex_unlock(&c->mu);
	return n;
}
