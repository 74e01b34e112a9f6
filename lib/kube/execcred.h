/*
 * execcred: kubeconfig exec credential plugins (box: kube client). Runs the plugin a
 * kubeconfig's user names (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`), reads
 * the ExecCredential it prints and keeps the credential in memory until it expires.
 *
 * The rules are Kubernetes' (client-go's exec authenticator), from
 * https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins
 * and the ExecCredential types of
 * https://kubernetes.io/docs/reference/config-api/client-authentication.v1/ (and v1beta1):
 *   - apiVersion client.authentication.k8s.io/v1 or /v1beta1 (v1alpha1 is gone from
 *     Kubernetes since 1.24 and refused). The plugin's answer must carry the same apiVersion
 *     and kind ExecCredential.
 *   - The command is run without a shell (posix_spawnp: a command without a '/' is looked up
 *     in PATH; kubeconfig.c made a relative one with a '/' absolute against the kubeconfig's
 *     directory), with args, and the process's environment plus the kubeconfig's env entries
 *     (which win) plus KUBERNETES_EXEC_INFO: a JSON ExecCredential whose spec holds
 *     `interactive` and, when provideClusterInfo is true, `cluster` (server,
 *     certificate-authority-data as base64 of the PEM, insecure-skip-tls-verify). The cluster's
 *     `config` extension and tls-server-name / proxy-url are not passed (kubeconfig.c does not
 *     read them).
 *   - interactiveMode Never, IfAvailable or Always (required for v1; v1beta1 defaults to
 *     IfAvailable). The run is interactive when the mode is not Never and stdin is a terminal;
 *     then the plugin gets our stdin, else /dev/null. Always without a terminal is refused
 *     before running anything. The plugin's stderr is ours (its prompts and errors reach the
 *     user).
 *   - status.token (a bearer token) and/or status.clientCertificateData with
 *     status.clientKeyData (PEM, both or neither); at least one of the two.
 *     status.expirationTimestamp (RFC 3339), when present, is when the credential stops being
 *     used; without it the credential is kept until the API server refuses it (401).
 *   - A 401 answer makes the caller drop the credential it used (execcred_invalidate): the
 *     next execcred_get runs the plugin again.
 *
 * Caps: EXECCRED_OUTPUT_MAX bytes of stdout (more is an error, never cut), the run's timeout
 * (execcred_new, ms: from the start to the exit; the plugin is killed with SIGKILL when it
 * passes, also one that answered and closed its stdout but does not exit), EXECCRED_TOKEN_MAX
 * bytes of token.
 *
 * Errors name the plugin (its command) and the kubeconfig user: not found (with the
 * installHint when the kubeconfig has one), exit status or signal, timeout, output too big,
 * not JSON, wrong apiVersion or kind, no credential, a certificate without its key, a bad
 * expirationTimestamp, one already past.
 *
 * Thread-safe: one mutex per object, held while the plugin runs, so concurrent callers wait
 * for one run instead of starting one each. The plugin is not an API call: the lock is not
 * held across any HTTP request.
 */
#ifndef GMG_EXECCRED_H
#define GMG_EXECCRED_H

#include <stddef.h>
#include <stdint.h>

struct kube_config;
struct kube_exec;

#define EXECCRED_OUTPUT_MAX (1024u * 1024u) /* bytes the plugin may print on stdout */
#define EXECCRED_TOKEN_MAX  (64u * 1024u)   /* bytes of status.token */
#define EXECCRED_TIMEOUT_MS 60000L          /* default run timeout: a login may prompt */

struct execcred;

/* A credential, copied out of the cache: every field owned by the holder
 * (execcred_value_free). token and cert/key may each be NULL, never all three. */
struct execcred_value {
	char *token; /* bearer token, NUL-terminated, or NULL */
	char *cert;  /* client certificate PEM (NUL-terminated; cert_len excludes it), or NULL */
	size_t cert_len;
	char *key; /* its private key PEM, or NULL when cert is */
	size_t key_len;
	uint64_t generation; /* which plugin run it came from: pass to execcred_invalidate */
};

/*
 * A plugin runner for exec (borrowed; copied) reaching cluster (borrowed; its server, CA and
 * insecure flag are copied for KUBERNETES_EXEC_INFO when exec->provide_cluster_info; a ca_file
 * is read now). timeout_ms > 0 bounds each run (EXECCRED_TIMEOUT_MS is a fair default). Runs
 * nothing yet. NULL with a reason in err (out of memory, unreadable CA file).
 */
struct execcred *execcred_new(const struct kube_exec *exec, const struct kube_config *cluster,
                              long timeout_ms, char *err, size_t errlen);

/* Free. NULL is a no-op. No call may be in flight. */
void execcred_free(struct execcred *c);

/*
 * The credential for now_ms (wall-clock Unix time in milliseconds, the clock
 * expirationTimestamp is written in): the cached one when it has not expired (expiry > now) and
 * was not invalidated, else the plugin's fresh answer (which is cached). *out is a copy the
 * caller frees with execcred_value_free; zeroed on error. 0, or -1 with one line in err naming
 * the plugin. A fresh credential already expired is an error (running it again would loop).
 */
int execcred_get(struct execcred *c, int64_t now_ms, struct execcred_value *out, char *err,
                 size_t errlen) __attribute__((warn_unused_result));

/* The API server refused the credential of generation (401): drop it if it is still the cached
 * one (a newer run by another thread is kept). */
void execcred_invalidate(struct execcred *c, uint64_t generation);

/* How many times the plugin was started (for tests and logs). */
unsigned long execcred_runs(struct execcred *c);

/* Free the strings of *v and zero it. NULL is a no-op. */
void execcred_value_free(struct execcred_value *v);

/*
 * Decode what a plugin printed (buf: len bytes, 0..EXECCRED_OUTPUT_MAX, NUL not needed) as an
 * ExecCredential of api_version, by the rules above; who names the plugin in messages
 * (`exec plugin "aws" (user "admin")`). *v (zeroed first; the caller frees it with
 * execcred_value_free) gets the token and/or certificate and key, generation 0; *expiry_ms the
 * expirationTimestamp in Unix ms, INT64_MAX without one (an expiry in the past is the caller's
 * to judge). 0, or -1 with err: not a JSON object (the output is never quoted: it may hold a
 * secret), another apiVersion or kind, status missing or a field of it not a string, no
 * credential, a certificate without its key or a key without its certificate, a multi-line or
 * over-long token, an expirationTimestamp that is not RFC 3339. Pure, reentrant.
 */
int execcred_parse(const char *api_version, const char *who, const char *buf, size_t len,
                   struct execcred_value *v, int64_t *expiry_ms, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * RFC 3339 date-time, as metav1.Time writes it ("2026-12-01T18:00:00Z", fractions and
 * "+01:00" offsets accepted) -> Unix milliseconds in *ms. 0, or -1 when s is not one.
 */
int execcred_parse_time(const char *s, int64_t *ms) __attribute__((warn_unused_result));

#endif
