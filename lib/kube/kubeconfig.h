/*
 * kubeconfig: where and how to reach the API server.
 *
 * Two sources:
 *   - a kubeconfig file (YAML, parsed with libyaml): current-context -> context -> cluster
 *     (server, certificate-authority | certificate-authority-data, insecure-skip-tls-verify)
 *     and user (client-certificate(-data), client-key(-data), token, tokenFile). Relative file
 *     paths are resolved against the kubeconfig's directory, as kubectl does. exec and
 *     auth-provider plugins are not supported and are refused with a message saying so.
 *   - in-cluster: KUBERNETES_SERVICE_HOST/PORT, the service-account token FILE (re-read by the
 *     client as it rotates, never cached for the process lifetime) and ca.crt.
 *
 * The *_data fields hold decoded PEM bytes. Caps: KUBECONFIG_FILE_MAX for the file.
 * Not thread-safe while loading; the result is read-only afterwards.
 */
#ifndef GMG_KUBECONFIG_H
#define GMG_KUBECONFIG_H

#include <stddef.h>

#define KUBECONFIG_FILE_MAX (1024u * 1024u) /* bytes */
#define KUBECONFIG_SA_DIR   "/var/run/secrets/kubernetes.io/serviceaccount"

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
};

/* Load path (current-context). 0, or -1 with a reason in err. *out is zeroed first; on
 * failure nothing is left to free. Errors: unreadable file or over KUBECONFIG_FILE_MAX,
 * malformed YAML (with the line), no current-context, the context, its cluster or its user
 * missing, no server or a non-http(s) one, invalid base64 (padding required), and exec,
 * auth-provider or basic-auth users (refused: not supported). *-data wins over the file form.
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
