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
	char *server;  /* "https://host:port", no trailing slash */
	char *ca_file; /* PEM file path, or NULL */
	char *ca_data; /* PEM bytes, or NULL */
	size_t ca_data_len;
	char *client_cert_file; /* PEM path or NULL */
	char *client_cert_data; /* PEM bytes or NULL */
	size_t client_cert_data_len;
	char *client_key_file;
	char *client_key_data;
	size_t client_key_data_len;
	char *token;      /* static bearer token, or NULL */
	char *token_file; /* bearer token re-read on each use, or NULL */
	int insecure_skip_tls_verify;
};

/* Load path (current-context). 0, or -1 with a reason in err. *out is zeroed first; on
 * failure nothing is left to free. */
int kubeconfig_load(const char *path, struct kube_config *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Parse kubeconfig YAML from memory; base_dir resolves relative paths (may be NULL). */
int kubeconfig_parse(const char *yaml, size_t len, const char *base_dir, struct kube_config *out,
                     char *err, size_t errlen) __attribute__((warn_unused_result));

/* In-cluster config from the environment and sa_dir (NULL -> KUBECONFIG_SA_DIR). */
int kubeconfig_in_cluster(const char *sa_dir, struct kube_config *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Free the strings in *c and zero it. NULL is a no-op. */
void kubeconfig_free(struct kube_config *c);

#endif
