/*
 * kubeconfig: where and how to reach the API server.
 *
 * Two sources:
 *   - a kubeconfig file (YAML, parsed with libyaml): current-context -> context -> cluster
 *     (server, certificate-authority | certificate-authority-data, insecure-skip-tls-verify)
 *     and user (client-certificate(-data), client-key(-data), token, tokenFile). Relative file
 *     paths are resolved against the kubeconfig's directory, as kubectl does. A user's
 *     `exec` credential plugin is read into struct kube_exec (run by execcred.h, for the
 *     report only); auth-provider plugins (removed from kubectl in 1.26) are refused with a
 *     message saying so.
 *   - in-cluster: KUBERNETES_SERVICE_HOST/PORT, the service-account token FILE (re-read by the
 *     client as it rotates, never cached for the process lifetime) and ca.crt.
 *
 * The *_data fields hold decoded PEM bytes. Caps: KUBECONFIG_FILE_MAX for the file.
 * Not thread-safe while loading; the result is read-only afterwards.
 */
#ifndef GMG_KUBECONFIG_H
#define GMG_KUBECONFIG_H

#include <stddef.h>

#define KUBECONFIG_FILE_MAX      (1024u * 1024u) /* bytes */
#define KUBECONFIG_SA_DIR        "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBECONFIG_EXEC_ARGS_MAX 64   /* exec.args entries */
#define KUBECONFIG_EXEC_ENV_MAX  64   /* exec.env entries */
#define KUBECONFIG_EXEC_STR_MAX  4096 /* bytes of any exec string (command, arg, env value) */

/* exec.interactiveMode (https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/). */
enum kube_exec_interactive {
	KUBE_EXEC_IF_AVAILABLE = 0, /* "IfAvailable": the v1beta1 default */
	KUBE_EXEC_NEVER,            /* "Never" */
	KUBE_EXEC_ALWAYS,           /* "Always": refused without a terminal on stdin */
};

/*
 * A user's exec credential plugin (kubeconfig users[].user.exec), as written; run by
 * execcred.h. Every string owned by the struct kube_config holding it.
 */
struct kube_exec {
	char *user;    /* the kubeconfig user's name, for messages */
	char *command; /* as written, or absolute against the kubeconfig's directory when it is a
	                  relative path with a '/' (client-go's rule); never run through a shell */
	char **args;   /* n_args strings */
	size_t n_args;
	char **env_names; /* n_env names and values: set for the plugin, over our environment */
	char **env_values;
	size_t n_env;
	char *api_version;        /* client.authentication.k8s.io/v1 or /v1beta1 (checked here) */
	char *install_hint;       /* shown when the command is not found, or NULL */
	int provide_cluster_info; /* pass the cluster in KUBERNETES_EXEC_INFO */
	enum kube_exec_interactive interactive_mode; /* required for v1 */
};

struct kube_config {
	char *server;  /* "https://host:port" (or http://), no trailing slash */
	char *ca_file; /* PEM file path, or NULL */
	char *ca_data; /* PEM bytes (NUL-terminated; len excludes the NUL), or NULL */
	size_t ca_data_len;
	char *client_cert_file; /* PEM path or NULL */
	char *client_cert_data; /* PEM bytes or NULL */
	size_t client_cert_data_len;
	char *client_key_file;
	char *client_key_data;
	size_t client_key_data_len;
	char *token;      /* static bearer token, or NULL (wins over tokenFile, as kubectl) */
	char *token_file; /* bearer token re-read on each use, or NULL */
	int insecure_skip_tls_verify;
	struct kube_exec *exec; /* the user's credential plugin, or NULL; never together with a
	                           token, tokenFile or client certificate (refused) */
};

/* Load path (current-context). 0, or -1 with a reason in err. *out is zeroed first; on
 * failure nothing is left to free. Errors: unreadable file or over KUBECONFIG_FILE_MAX,
 * malformed YAML (with the line), no current-context, the context, its cluster or its user
 * missing, no server or a non-http(s) one, invalid base64 (padding required), auth-provider
 * or basic-auth users (refused: not supported), and an exec entry that is not one: no command,
 * no or an unknown apiVersion (v1alpha1 included), an unknown interactiveMode or none with v1,
 * args or env not lists of strings / {name, value}, over the KUBECONFIG_EXEC_* caps, together
 * with a token, tokenFile or client certificate. *-data wins over the file form.
 * Relative paths are made absolute against the file's (real) directory. Reentrant. */
int kubeconfig_load(const char *path, struct kube_config *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Parse kubeconfig YAML from memory (len bytes, 1..KUBECONFIG_FILE_MAX); base_dir resolves
 * relative paths (NULL leaves them as written). Same errors as kubeconfig_load. */
int kubeconfig_parse(const char *yaml, size_t len, const char *base_dir, struct kube_config *out,
                     char *err, size_t errlen) __attribute__((warn_unused_result));

/* In-cluster config: server https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (IPv6
 * bracketed; each value at most 255 bytes), ca_file sa_dir/ca.crt, token_file sa_dir/token
 * (both must be readable now; the token is never read here). sa_dir NULL ->
 * KUBECONFIG_SA_DIR. 0, or -1 with err. Uses getenv: call before threads change the env. */
int kubeconfig_in_cluster(const char *sa_dir, struct kube_config *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Free the strings in *c and zero it. NULL is a no-op. */
void kubeconfig_free(struct kube_config *c);

#endif
