/*
 * kubeconfig: libyaml document parse of a kubeconfig, and the in-cluster configuration.
 *
 * The document API is used (yaml_parser_load) and walked along fixed paths only, so anchors and
 * aliases (which libyaml turns into shared, possibly cyclic nodes) cannot cause deep recursion.
 */
#include "kubeconfig.h"

#include "capfile.h"
#include "errbuf.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#define ENV_VALUE_MAX 255 /* bytes, KUBERNETES_SERVICE_HOST/PORT */

/* The scalar value of node, or NULL if node is not a scalar (or holds a NUL byte). */
static const char *scalar(yaml_document_t *doc, yaml_node_t *node)
{
	(void)doc;
	if (node == NULL || node->type != YAML_SCALAR_NODE)
		return NULL;
	if (strlen((const char *)node->data.scalar.value) != node->data.scalar.length)
		return NULL;
	return (const char *)node->data.scalar.value;
}

/* map[key] for a mapping node, NULL when absent or node is not a mapping. */
static yaml_node_t *map_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
	if (map == NULL || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		const char *k = scalar(doc, yaml_document_get_node(doc, p->key));
		if (k != NULL && strcmp(k, key) == 0)
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

/* A scalar map[key], NULL when absent; an explicit YAML null ("~", "null", "") counts as absent. */
static const char *map_str(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
	yaml_node_t *n = map_get(doc, map, key);
	const char *s = scalar(doc, n);

	if (s == NULL || s[0] == '\0')
		return NULL;
	if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    (strcmp(s, "~") == 0 || strcmp(s, "null") == 0))
		return NULL;
	return s;
}

/*
 * In the list at root[list_key] (entries {name: N, <item_key>: {...}}), the <item_key> mapping
 * of the entry named name; NULL when not found.
 */
static yaml_node_t *named_entry(yaml_document_t *doc, yaml_node_t *root, const char *list_key,
                                const char *item_key, const char *name)
{
	yaml_node_t *list = map_get(doc, root, list_key);

	if (list == NULL || list->type != YAML_SEQUENCE_NODE)
		return NULL;
	for (yaml_node_item_t *i = list->data.sequence.items.start;
	     i < list->data.sequence.items.top; i++) {
		yaml_node_t *entry = yaml_document_get_node(doc, *i);
		const char *n = map_str(doc, entry, "name");
		if (n != NULL && strcmp(n, name) == 0) {
			yaml_node_t *item = map_get(doc, entry, item_key);
			return item != NULL && item->type == YAML_MAPPING_NODE ? item : NULL;
		}
	}
	return NULL;
}

static int dup_str(char **dst, const char *s, char *err, size_t errlen)
{
	*dst = strdup(s);
	if (*dst == NULL) {
		errbuf_set(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* Relative paths are relative to the kubeconfig's directory, as kubectl resolves them. */
static int dup_path(char **dst, const char *path, const char *base_dir, char *err, size_t errlen)
{
	size_t n;

	if (path[0] == '/' || base_dir == NULL || base_dir[0] == '\0')
		return dup_str(dst, path, err, errlen);
	n = strlen(base_dir) + 1 + strlen(path) + 1;
	if (n > PATH_MAX) {
		errbuf_set(err, errlen, "path %.64s... is longer than PATH_MAX", path);
		return -1;
	}
	*dst = malloc(n);
	if (*dst == NULL) {
		errbuf_set(err, errlen, "out of memory");
		return -1;
	}
	snprintf(*dst, n, "%s/%s", base_dir, path);
	return 0;
}

/*
 * Decode base64 (whitespace ignored, padding required as kubectl writes it) into a new
 * NUL-terminated buffer; *len excludes the NUL. EVP_DecodeBlock counts padding bytes as output
 * and chokes on embedded newlines, hence the copy and the adjustment.
 */
static int dup_base64(char **dst, size_t *len, const char *b64, const char *what, char *err,
                      size_t errlen)
{
	size_t in = strlen(b64), m = 0, pad = 0;
	unsigned char *clean = NULL, *out = NULL;
	int n, rc = -1;

	clean = malloc(in + 1);
	if (clean == NULL) {
		errbuf_set(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < in; i++) {
		if (b64[i] != ' ' && b64[i] != '\n' && b64[i] != '\r' && b64[i] != '\t')
			clean[m++] = (unsigned char)b64[i];
	}
	if (m == 0 || m % 4 != 0 || m > INT_MAX) {
		errbuf_set(err, errlen, "%s: not valid base64 (length %zu)", what, m);
		goto out;
	}
	pad = clean[m - 1] == '=' ? (clean[m - 2] == '=' ? 2 : 1) : 0;
	/* EVP_DecodeBlock accepts '=' in odd places: allow it only as the final padding. */
	if (memchr(clean, '=', m - pad) != NULL) {
		errbuf_set(err, errlen, "%s: not valid base64 (padding)", what);
		goto out;
	}
	out = malloc(m / 4 * 3 + 1);
	if (out == NULL) {
		errbuf_set(err, errlen, "out of memory");
		goto out;
	}
	n = EVP_DecodeBlock(out, clean, (int)m);
	if (n < 0 || (size_t)n < pad) {
		errbuf_set(err, errlen, "%s: not valid base64", what);
		goto out;
	}
	*len = (size_t)n - pad;
	out[*len] = '\0';
	*dst = (char *)out;
	out = NULL;
	rc = 0;
out:
	free(clean);
	free(out);
	return rc;
}

static int load_cluster(yaml_document_t *doc, yaml_node_t *cluster, const char *name,
                        const char *base_dir, struct kube_config *out, char *err, size_t errlen)
{
	const char *server = map_str(doc, cluster, "server");
	const char *s;
	size_t n;

	if (server == NULL) {
		errbuf_set(err, errlen, "cluster \"%.64s\" has no server", name);
		return -1;
	}
	if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0) {
		errbuf_set(err, errlen,
		           "cluster \"%.64s\": server \"%.128s\" is not an http(s) URL", name,
		           server);
		return -1;
	}
	/* A host is needed: "https://" alone (or "https:///") would have its slashes stripped
	 * below into "https:" (found by fuzz_kubeconfig). */
	s = server + (server[4] == 's' ? 8 : 7);
	if (s[0] == '\0' || s[0] == '/') {
		errbuf_set(err, errlen, "cluster \"%.64s\": server \"%.128s\" has no host", name,
		           server);
		return -1;
	}
	if (dup_str(&out->server, server, err, errlen) < 0)
		return -1;
	n = strlen(out->server);
	while (n > 0 && out->server[n - 1] == '/')
		out->server[--n] = '\0';
	if ((s = map_str(doc, cluster, "certificate-authority-data")) != NULL) {
		if (dup_base64(&out->ca_data, &out->ca_data_len, s, "certificate-authority-data",
		               err, errlen) < 0)
			return -1;
	} else if ((s = map_str(doc, cluster, "certificate-authority")) != NULL) {
		if (dup_path(&out->ca_file, s, base_dir, err, errlen) < 0)
			return -1;
	}
	s = map_str(doc, cluster, "insecure-skip-tls-verify");
	out->insecure_skip_tls_verify = s != NULL && strcmp(s, "true") == 0;
	return 0;
}

/* A key's inline -data (base64) wins over its file, as in client-go. */
static int load_pem(yaml_document_t *doc, yaml_node_t *user, const char *key, char **file,
                    char **data, size_t *data_len, const char *base_dir, char *err, size_t errlen)
{
	char data_key[64];
	const char *s;

	snprintf(data_key, sizeof(data_key), "%s-data", key);
	if ((s = map_str(doc, user, data_key)) != NULL)
		return dup_base64(data, data_len, s, data_key, err, errlen);
	if ((s = map_str(doc, user, key)) != NULL)
		return dup_path(file, s, base_dir, err, errlen);
	return 0;
}

/* A string of at most KUBECONFIG_EXEC_STR_MAX bytes, or NULL with err naming what. */
static const char *exec_str(yaml_document_t *doc, yaml_node_t *map, const char *key,
                            const char *user, char *err, size_t errlen)
{
	const char *s = map_str(doc, map, key);

	if (s != NULL && strlen(s) > KUBECONFIG_EXEC_STR_MAX) {
		errbuf_set(err, errlen, "user \"%.64s\": exec.%s is over %d bytes", user, key,
		           KUBECONFIG_EXEC_STR_MAX);
		return NULL;
	}
	return s;
}

/* exec.args: a list of strings (an explicit null or an empty list is none). */
static int load_exec_args(yaml_document_t *doc, yaml_node_t *exec, struct kube_exec *e, char *err,
                          size_t errlen)
{
	yaml_node_t *list = map_get(doc, exec, "args");
	size_t n;

	if (list == NULL || (list->type == YAML_SCALAR_NODE && map_str(doc, exec, "args") == NULL))
		return 0;
	if (list->type != YAML_SEQUENCE_NODE) {
		errbuf_set(err, errlen, "user \"%.64s\": exec.args is not a list", e->user);
		return -1;
	}
	n = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
	if (n > KUBECONFIG_EXEC_ARGS_MAX) {
		errbuf_set(err, errlen, "user \"%.64s\": exec.args has %zu entries (at most %d)",
		           e->user, n, KUBECONFIG_EXEC_ARGS_MAX);
		return -1;
	}
	if (n == 0)
		return 0;
	e->args = calloc(n, sizeof(*e->args));
	if (e->args == NULL) {
		errbuf_set(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const char *a =
		    scalar(doc, yaml_document_get_node(doc, list->data.sequence.items.start[i]));
		if (a == NULL || strlen(a) > KUBECONFIG_EXEC_STR_MAX) {
			errbuf_set(err, errlen,
			           "user \"%.64s\": exec.args[%zu] is not a string of at most %d "
			           "bytes",
			           e->user, i, KUBECONFIG_EXEC_STR_MAX);
			return -1;
		}
		if (dup_str(&e->args[i], a, err, errlen) < 0)
			return -1;
		e->n_args = i + 1;
	}
	return 0;
}

/* exec.env: a list of {name, value}; a name is 1..255 bytes without '='. */
static int load_exec_env(yaml_document_t *doc, yaml_node_t *exec, struct kube_exec *e, char *err,
                         size_t errlen)
{
	yaml_node_t *list = map_get(doc, exec, "env");
	size_t n;

	if (list == NULL || (list->type == YAML_SCALAR_NODE && map_str(doc, exec, "env") == NULL))
		return 0;
	if (list->type != YAML_SEQUENCE_NODE) {
		errbuf_set(err, errlen, "user \"%.64s\": exec.env is not a list", e->user);
		return -1;
	}
	n = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
	if (n > KUBECONFIG_EXEC_ENV_MAX) {
		errbuf_set(err, errlen, "user \"%.64s\": exec.env has %zu entries (at most %d)",
		           e->user, n, KUBECONFIG_EXEC_ENV_MAX);
		return -1;
	}
	if (n == 0)
		return 0;
	e->env_names = calloc(n, sizeof(*e->env_names));
	e->env_values = calloc(n, sizeof(*e->env_values));
	if (e->env_names == NULL || e->env_values == NULL) {
		errbuf_set(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *item = yaml_document_get_node(doc, list->data.sequence.items.start[i]);
		const char *name = map_str(doc, item, "name");
		yaml_node_t *vn = map_get(doc, item, "value");
		const char *value = scalar(doc, vn);

		if (name == NULL || strlen(name) > ENV_VALUE_MAX || strchr(name, '=') != NULL ||
		    (vn != NULL && value == NULL) ||
		    (value != NULL && strlen(value) > KUBECONFIG_EXEC_STR_MAX)) {
			errbuf_set(err, errlen,
			           "user \"%.64s\": exec.env[%zu] is not {name, value} (a name of "
			           "1..%d bytes without '=', a string value of at most %d bytes)",
			           e->user, i, ENV_VALUE_MAX, KUBECONFIG_EXEC_STR_MAX);
			return -1;
		}
		if (dup_str(&e->env_names[i], name, err, errlen) < 0 ||
		    dup_str(&e->env_values[i], value ? value : "", err, errlen) < 0) {
			free(e->env_names[i]);
			e->env_names[i] = NULL;
			return -1;
		}
		e->n_env = i + 1;
	}
	return 0;
}

/* apiVersion and interactiveMode, by the rules of client-go's exec authenticator. */
static int load_exec_modes(yaml_document_t *doc, yaml_node_t *exec, struct kube_exec *e, char *err,
                           size_t errlen)
{
	const char *v = map_str(doc, exec, "apiVersion"), *m;

	if (v == NULL || (strcmp(v, "client.authentication.k8s.io/v1") != 0 &&
	                  strcmp(v, "client.authentication.k8s.io/v1beta1") != 0)) {
		errbuf_set(err, errlen,
		           "user \"%.64s\": exec.apiVersion \"%.80s\" is not "
		           "client.authentication.k8s.io/v1 or /v1beta1",
		           e->user, v ? v : "");
		return -1;
	}
	if (dup_str(&e->api_version, v, err, errlen) < 0)
		return -1;
	m = map_str(doc, exec, "interactiveMode");
	if (m == NULL && strcmp(v, "client.authentication.k8s.io/v1") == 0) {
		errbuf_set(err, errlen,
		           "user \"%.64s\": exec.interactiveMode is required with "
		           "client.authentication.k8s.io/v1 (Never, IfAvailable or Always)",
		           e->user);
		return -1;
	}
	if (m == NULL || strcmp(m, "IfAvailable") == 0)
		e->interactive_mode = KUBE_EXEC_IF_AVAILABLE;
	else if (strcmp(m, "Never") == 0)
		e->interactive_mode = KUBE_EXEC_NEVER;
	else if (strcmp(m, "Always") == 0)
		e->interactive_mode = KUBE_EXEC_ALWAYS;
	else {
		errbuf_set(err, errlen,
		           "user \"%.64s\": exec.interactiveMode \"%.64s\" is not Never, "
		           "IfAvailable or Always",
		           e->user, m);
		return -1;
	}
	return 0;
}

/* users[].user.exec into a new out->exec. */
static int load_exec(yaml_document_t *doc, yaml_node_t *exec, const char *name,
                     const char *base_dir, struct kube_config *out, char *err, size_t errlen)
{
	struct kube_exec *e;
	const char *s;

	if (exec->type != YAML_MAPPING_NODE) {
		errbuf_set(err, errlen, "user \"%.64s\": exec is not a mapping", name);
		return -1;
	}
	e = out->exec = calloc(1, sizeof(*e));
	if (e == NULL || dup_str(&e->user, name, err, errlen) < 0) {
		errbuf_set(err, errlen, "out of memory");
		return -1;
	}
	s = exec_str(doc, exec, "command", name, err, errlen);
	if (s == NULL) {
		if (map_str(doc, exec, "command") == NULL)
			errbuf_set(err, errlen, "user \"%.64s\": exec has no command", name);
		return -1;
	}
	/* client-go resolves a command against the kubeconfig only when it is a path. */
	if ((strchr(s, '/') != NULL ? dup_path(&e->command, s, base_dir, err, errlen)
	                            : dup_str(&e->command, s, err, errlen)) < 0)
		return -1;
	if (load_exec_modes(doc, exec, e, err, errlen) < 0 ||
	    load_exec_args(doc, exec, e, err, errlen) < 0 ||
	    load_exec_env(doc, exec, e, err, errlen) < 0)
		return -1;
	if (map_str(doc, exec, "installHint") != NULL &&
	    ((s = exec_str(doc, exec, "installHint", name, err, errlen)) == NULL ||
	     dup_str(&e->install_hint, s, err, errlen) < 0))
		return -1;
	s = map_str(doc, exec, "provideClusterInfo");
	e->provide_cluster_info = s != NULL && strcmp(s, "true") == 0;
	return 0;
}

static int load_user(yaml_document_t *doc, yaml_node_t *user, const char *name,
                     const char *base_dir, struct kube_config *out, char *err, size_t errlen)
{
	yaml_node_t *exec;
	const char *s;

	if (user == NULL)
		return 0; /* no credentials: anonymous */
	if (map_get(doc, user, "auth-provider") != NULL) {
		errbuf_set(err, errlen,
		           "user \"%.64s\" uses an auth-provider plugin, which kubectl removed in "
		           "1.26 and gpu-memory-guard does not run; use the provider's exec plugin "
		           "(for example gke-gcloud-auth-plugin, kubelogin)",
		           name);
		return -1;
	}
	if (map_str(doc, user, "username") != NULL || map_str(doc, user, "password") != NULL) {
		errbuf_set(err, errlen,
		           "user \"%.64s\" uses basic auth, which Kubernetes no longer supports",
		           name);
		return -1;
	}
	if ((exec = map_get(doc, user, "exec")) != NULL) {
		static const char *const others[] = {
		    "token",      "tokenFile",      "client-certificate", "client-certificate-data",
		    "client-key", "client-key-data"};
		for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
			if (map_str(doc, user, others[i]) != NULL) {
				errbuf_set(
				    err, errlen,
				    "user \"%.64s\" has both an exec plugin and %s: give one "
				    "of them",
				    name, others[i]);
				return -1;
			}
		}
		return load_exec(doc, exec, name, base_dir, out, err, errlen);
	}
	if (load_pem(doc, user, "client-certificate", &out->client_cert_file,
	             &out->client_cert_data, &out->client_cert_data_len, base_dir, err,
	             errlen) < 0 ||
	    load_pem(doc, user, "client-key", &out->client_key_file, &out->client_key_data,
	             &out->client_key_data_len, base_dir, err, errlen) < 0)
		return -1;
	/* A static token wins over tokenFile, as in kubectl. */
	if ((s = map_str(doc, user, "token")) != NULL)
		return dup_str(&out->token, s, err, errlen);
	if ((s = map_str(doc, user, "tokenFile")) != NULL)
		return dup_path(&out->token_file, s, base_dir, err, errlen);
	return 0;
}

static int load_document(yaml_document_t *doc, const char *base_dir, struct kube_config *out,
                         char *err, size_t errlen)
{
	yaml_node_t *root = yaml_document_get_root_node(doc);
	yaml_node_t *ctx, *cluster, *user = NULL;
	const char *cur, *cluster_name, *user_name;

	if (root == NULL || root->type != YAML_MAPPING_NODE) {
		errbuf_set(err, errlen, "kubeconfig is not a YAML mapping");
		return -1;
	}
	cur = map_str(doc, root, "current-context");
	if (cur == NULL) {
		errbuf_set(err, errlen, "kubeconfig has no current-context");
		return -1;
	}
	ctx = named_entry(doc, root, "contexts", "context", cur);
	if (ctx == NULL) {
		errbuf_set(err, errlen, "context \"%.64s\" not found in contexts", cur);
		return -1;
	}
	cluster_name = map_str(doc, ctx, "cluster");
	cluster = cluster_name ? named_entry(doc, root, "clusters", "cluster", cluster_name) : NULL;
	if (cluster == NULL) {
		errbuf_set(err, errlen, "context \"%.64s\": cluster \"%.64s\" not found", cur,
		           cluster_name ? cluster_name : "");
		return -1;
	}
	user_name = map_str(doc, ctx, "user");
	if (user_name != NULL &&
	    (user = named_entry(doc, root, "users", "user", user_name)) == NULL) {
		errbuf_set(err, errlen, "context \"%.64s\": user \"%.64s\" not found", cur,
		           user_name);
		return -1;
	}
	if (load_cluster(doc, cluster, cluster_name, base_dir, out, err, errlen) < 0)
		return -1;
	return load_user(doc, user, user_name ? user_name : "", base_dir, out, err, errlen);
}

int kubeconfig_parse(const char *yaml, size_t len, const char *base_dir, struct kube_config *out,
                     char *err, size_t errlen)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	int parser_ok = 0, doc_ok = 0, rc = -1;

	if (out == NULL)
		return -1;
	memset(out, 0, sizeof(*out));
	if (yaml == NULL || len == 0 || len > KUBECONFIG_FILE_MAX) {
		errbuf_set(err, errlen, "kubeconfig is %zu bytes (must be 1..%u)", len,
		           KUBECONFIG_FILE_MAX);
		goto out;
	}
	if (!yaml_parser_initialize(&parser)) {
		errbuf_set(err, errlen, "out of memory");
		goto out;
	}
	parser_ok = 1;
	yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
	if (!yaml_parser_load(&parser, &doc)) {
		errbuf_set(err, errlen, "kubeconfig: YAML error at line %zu: %s",
		           parser.problem_mark.line + 1,
		           parser.problem ? parser.problem : "unknown");
		goto out;
	}
	doc_ok = 1;
	rc = load_document(&doc, base_dir, out, err, errlen);
out:
	if (doc_ok)
		yaml_document_delete(&doc);
	if (parser_ok)
		yaml_parser_delete(&parser);
	if (rc < 0)
		kubeconfig_free(out);
	return rc;
}

int kubeconfig_load(const char *path, struct kube_config *out, char *err, size_t errlen)
{
	char *yaml = NULL, *dir = NULL, *abs = NULL, *slash;
	size_t len = 0;
	int rc = -1, frc;

	if (out == NULL)
		return -1;
	memset(out, 0, sizeof(*out));
	if (path == NULL || path[0] == '\0') {
		errbuf_set(err, errlen, "no kubeconfig path");
		goto out;
	}
	frc = capfile_read(path, KUBECONFIG_FILE_MAX, CAPFILE_REGULAR, &yaml, &len, err, errlen);
	if (frc == CAPFILE_ETOOBIG || frc == CAPFILE_ENOTREG)
		errbuf_set(err, errlen, "%s: not a regular file of at most %zu bytes", path,
		           (size_t)KUBECONFIG_FILE_MAX);
	if (frc < 0)
		goto out;
	dir = strdup(path);
	if (dir == NULL) {
		errbuf_set(err, errlen, "out of memory");
		goto out;
	}
	slash = strrchr(dir, '/');
	if (slash == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	/* An absolute base keeps the paths valid if the process changes directory later. */
	abs = realpath(dir, NULL);
	rc = kubeconfig_parse(yaml, len, abs ? abs : dir, out, err, errlen);
out:
	free(abs);
	free(dir);
	free(yaml);
	return rc;
}

static int env_value(const char *name, const char **value, char *err, size_t errlen)
{
	*value = getenv(name);
	if (*value == NULL || (*value)[0] == '\0') {
		errbuf_set(err, errlen, "%s is not set: not running in a cluster?", name);
		return -1;
	}
	if (strlen(*value) > ENV_VALUE_MAX) {
		errbuf_set(err, errlen, "%s is longer than %d bytes", name, ENV_VALUE_MAX);
		return -1;
	}
	return 0;
}

int kubeconfig_in_cluster(const char *sa_dir, struct kube_config *out, char *err, size_t errlen)
{
	const char *host, *port;
	char url[2 * ENV_VALUE_MAX + 16];
	int rc = -1;

	if (out == NULL)
		return -1;
	memset(out, 0, sizeof(*out));
	if (sa_dir == NULL)
		sa_dir = KUBECONFIG_SA_DIR;
	if (env_value("KUBERNETES_SERVICE_HOST", &host, err, errlen) < 0 ||
	    env_value("KUBERNETES_SERVICE_PORT", &port, err, errlen) < 0)
		goto out;
	/* An IPv6 service address needs brackets in a URL. */
	if (strchr(host, ':') != NULL && host[0] != '[')
		snprintf(url, sizeof(url), "https://[%s]:%s", host, port);
	else
		snprintf(url, sizeof(url), "https://%s:%s", host, port);
	if (dup_str(&out->server, url, err, errlen) < 0 ||
	    dup_path(&out->token_file, "token", sa_dir, err, errlen) < 0 ||
	    dup_path(&out->ca_file, "ca.crt", sa_dir, err, errlen) < 0)
		goto out;
	if (access(out->token_file, R_OK) != 0 || access(out->ca_file, R_OK) != 0) {
		errbuf_set(err, errlen, "service account files in %s: %s", sa_dir, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		kubeconfig_free(out);
	return rc;
}

void kubeconfig_free(struct kube_config *c)
{
	if (c == NULL)
		return;
	free(c->server);
	free(c->ca_file);
	free(c->ca_data);
	free(c->client_cert_file);
	free(c->client_cert_data);
	free(c->client_key_file);
	free(c->client_key_data);
	free(c->token);
	free(c->token_file);
	if (c->exec != NULL) {
		struct kube_exec *e = c->exec;
		for (size_t i = 0; i < e->n_args; i++)
			free(e->args[i]);
		for (size_t i = 0; i < e->n_env; i++) {
			free(e->env_names[i]);
			free(e->env_values[i]);
		}
		free(e->args);
		free(e->env_names);
		free(e->env_values);
		free(e->user);
		free(e->command);
		free(e->api_version);
		free(e->install_hint);
		free(e);
	}
	memset(c, 0, sizeof(*c));
}
