{{/* The second scheduler (scheduler.enabled): names, image, extender settings and its
KubeSchedulerConfiguration. Field names: k8s.io/kube-scheduler config/v1 (types.go). */}}

{{/* Name of the scheduler's Deployment, ServiceAccount, ConfigMap and leader-election Lease. */}}
{{- define "gmg.schedulerFullname" -}}
{{- printf "%s-scheduler" (include "gmg.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gmg.schedulerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "gmg.name" . }}-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gmg.schedulerLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gmg.schedulerSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-memory-guard
app.kubernetes.io/component: scheduler
{{- end -}}

{{/* registry.k8s.io/kube-scheduler at the cluster's version. Managed clusters report versions
with a provider suffix (v1.33.4-eks-a737599, v1.33.4-gke.1036000) that the upstream image has no
tag for: only vMAJOR.MINOR.PATCH is kept. */}}
{{- define "gmg.schedulerImage" -}}
{{- $i := .Values.scheduler.image -}}
{{- if $i.digest -}}
{{- printf "%s@%s" $i.repository $i.digest -}}
{{- else -}}
{{- $tag := $i.tag | default (regexFind "^v[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version) -}}
{{- if not $tag -}}
{{- fail (printf "scheduler.image.tag: cannot derive a kube-scheduler tag from the cluster version %q; set scheduler.image.tag" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- printf "%s:%s" $i.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* httpTimeout: scheduler.extender.httpTimeout, else 3 x apiTimeout: the webhook answers a
review within 3 x --api-timeout, and a filter waits at most for one such placement holding a
node it reads. apiTimeout matches the schema's duration pattern (N ms|s|m|h). */}}
{{/* A review's deadline in ms: 3 x apiTimeout (the webhook answers within it). apiTimeout
matches the schema's duration pattern (N ms|s|m|h). */}}
{{- define "gmg.reviewDeadlineMs" -}}
{{- $d := .Values.apiTimeout | default "2s" -}}
{{- $n := regexFind "^[0-9]+" $d | int64 -}}
{{- $unit := trimPrefix (regexFind "^[0-9]+" $d) $d -}}
{{- $ms := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 -}}
{{- mul 3 $n (index $ms $unit) -}}
{{- end -}}

{{/* The registered timeoutSeconds: webhook.timeoutSeconds when set, else the review's deadline
rounded up to whole seconds plus one (the network and TLS around it): 7 for apiTimeout 2s.
Consistent by construction: a value shorter than the deadline, or a deadline the API server's
30 s maximum cannot cover, fails the render. The Deployment passes the same number as
--webhook-timeout, so the binary can say so too. */}}
{{- define "gmg.webhookTimeoutSeconds" -}}
{{- $deadline := include "gmg.reviewDeadlineMs" . | int64 -}}
{{- $need := add (div (add $deadline 999) 1000) 1 | int64 -}}
{{- $set := .Values.webhook.timeoutSeconds | default 0 | int64 -}}
{{- if gt $deadline 30000 -}}
{{- fail (printf "apiTimeout %s: a review may take 3 x apiTimeout = %dms, more than the API server's 30 s maximum webhook timeout; lower apiTimeout to 10s or less" .Values.apiTimeout $deadline) -}}
{{- end -}}
{{- if $set -}}
{{- if lt (mul $set 1000) $deadline -}}
{{- fail (printf "webhook.timeoutSeconds %d is shorter than a review's deadline, 3 x apiTimeout %s = %dms: callers would see a webhook timeout instead of the guard's denial; unset it (computed: %d) or lower apiTimeout" $set .Values.apiTimeout $deadline (min $need 30)) -}}
{{- end -}}
{{- $set -}}
{{- else -}}
{{- min $need 30 -}}
{{- end -}}
{{- end -}}

{{- define "gmg.schedulerHttpTimeout" -}}
{{- if .Values.scheduler.extender.httpTimeout -}}
{{- .Values.scheduler.extender.httpTimeout -}}
{{- else -}}
{{- $d := .Values.apiTimeout | default "2s" -}}
{{- $n := regexFind "^[0-9]+" $d | int64 -}}
{{- $unit := trimPrefix (regexFind "^[0-9]+" $d) $d -}}
{{- $ms := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 -}}
{{- $total := mul 3 $n (index $ms $unit) -}}
{{- if eq (mod $total 1000) 0 -}}
{{- printf "%ds" (div $total 1000) -}}
{{- else -}}
{{- printf "%dms" $total -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The extender's URL prefix: the webhook's Service (port 443, TLS, the serving certificate
names it), or with webhook.url the same host and port as the admission URL. */}}
{{- define "gmg.schedulerUrlPrefix" -}}
{{- if .Values.webhook.url -}}
{{- regexReplaceAll "^(https://[^/]+).*$" .Values.webhook.url "${1}/scheduler" -}}
{{- else -}}
{{- printf "https://%s.%s.svc:443/scheduler" (include "gmg.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* The CA the chart knows without a cluster render (existingSecret: the value or the
Secret's ca.crt, looked up); selfSigned passes its own from webhook.yaml. Empty: unknown. */}}
{{- define "gmg.existingSecretCa" -}}
{{- if eq .Values.certificate.mode "existingSecret" -}}
{{- $ca := .Values.certificate.existingSecret.caBundle -}}
{{- if not $ca -}}
{{- $s := lookup "v1" "Secret" .Release.Namespace (include "gmg.secretName" .) -}}
{{- if and $s $s.data -}}
{{- $ca = index $s.data "ca.crt" | default "" -}}
{{- end -}}
{{- end -}}
{{- $ca -}}
{{- end -}}
{{- end -}}

{{/* Whether the scheduler reads the CA from the serving Secret's ca.crt (mounted alone):
certManager (cainjector fills webhook configurations, not ConfigMaps) and existingSecret
without a known CA. */}}
{{- define "gmg.schedulerCaFromFile" -}}
{{- if or (eq .Values.certificate.mode "certManager") (and (eq .Values.certificate.mode "existingSecret") (not (include "gmg.existingSecretCa" .))) -}}
true
{{- end -}}
{{- end -}}

{{- define "gmg.schedulerCaDir" -}}/etc/gpu-memory-guard/ca{{- end -}}

{{/* The KubeSchedulerConfiguration. Argument: dict root caData (base64 PEM, or "": caFile).
No clientConnection: in the pod, kube-scheduler uses its ServiceAccount (in-cluster). */}}
{{- define "gmg.schedulerConfig" -}}
{{- $root := .root -}}
{{- $s := $root.Values.scheduler -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceLock: leases
  resourceName: {{ include "gmg.schedulerFullname" $root }}
  resourceNamespace: {{ $root.Release.Namespace }}
  leaseDuration: {{ $s.leaderElection.leaseDuration }}
  renewDeadline: {{ $s.leaderElection.renewDeadline }}
  retryPeriod: {{ $s.leaderElection.retryPeriod }}
profiles:
- schedulerName: {{ $s.schedulerName }}
extenders:
- urlPrefix: {{ include "gmg.schedulerUrlPrefix" $root | quote }}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: {{ $s.extender.weight }}
  # Names only (the webhook's watch cache holds the nodes): ~40 bytes a node, not 5-30 KiB.
  nodeCacheCapable: true
  # Only pods asking for these are sent; the scheduler still checks their counts itself.
  managedResources:
  {{- range $root.Values.gpuResources }}
  - name: {{ . | quote }}
    ignoredByScheduler: false
  {{- end }}
  # An unreachable extender fails the attempt (retried with backoff) rather than placing blind.
  ignorable: false
  httpTimeout: {{ include "gmg.schedulerHttpTimeout" $root }}
  enableHTTPS: true
  tlsConfig:
    {{- if .caData }}
    caData: {{ .caData }}
    {{- else }}
    caFile: {{ include "gmg.schedulerCaDir" $root }}/ca.crt
    {{- end }}
    {{- if include "gmg.schedulerClientAuth" $root }}
    # The client certificate the webhook requires on its extender routes (lib/http/clientauth.h).
    certFile: {{ include "gmg.schedulerClientDir" $root }}/tls.crt
    keyFile: {{ include "gmg.schedulerClientDir" $root }}/tls.key
    {{- end }}
{{- end -}}

{{/* The ConfigMap; rendered from webhook.yaml, where the self-signed CA is made (one render:
genCA in two files would make two CAs). Argument: dict root caData. */}}
{{- define "gmg.schedulerConfigMap" -}}
{{- $root := .root -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "gmg.schedulerFullname" $root }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "gmg.schedulerLabels" $root | nindent 4 }}
data:
  config.yaml: |
    {{- include "gmg.schedulerConfig" . | nindent 4 }}
{{- end -}}

{{/* Whether the chart's scheduler presents a client certificate and the webhook requires one on
its extender routes: scheduler.enabled and scheduler.clientAuth.enabled. */}}
{{- define "gmg.schedulerClientAuth" -}}
{{- if and .Values.scheduler.enabled .Values.scheduler.clientAuth.enabled -}}
true
{{- end -}}
{{- end -}}

{{/* The subject CN of the scheduler's client certificate: the only name the webhook accepts on
its extender routes besides clientAuth.allowedNames. */}}
{{- define "gmg.schedulerClientName" -}}
{{- include "gmg.schedulerFullname" . -}}
{{- end -}}

{{/* The Secret (kubernetes.io/tls) holding the scheduler's client certificate. */}}
{{- define "gmg.schedulerClientSecret" -}}
{{- if eq .Values.certificate.mode "existingSecret" -}}
{{- .Values.scheduler.clientAuth.existingSecret -}}
{{- else -}}
{{- printf "%s-client" (include "gmg.schedulerFullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gmg.schedulerClientDir" -}}/etc/gpu-memory-guard/client{{- end -}}

{{/* --client-auth-routes for the webhook: admission (clientAuth.admission), extender (the
chart's scheduler presents a certificate); empty: no client authentication. Fails the render
where a setting cannot work. */}}
{{- define "gmg.clientAuthRoutes" -}}
{{- $r := list -}}
{{- if .Values.clientAuth.admission -}}
{{- if not .Values.clientAuth.allowedNames -}}
{{- fail "clientAuth.admission: set clientAuth.allowedNames to the subject CN (or a DNS SAN) of the kube-apiserver's client certificate (docs/install.md, \"Authenticating the API server to the webhook\")" -}}
{{- end -}}
{{- $r = append $r "admission" -}}
{{- end -}}
{{- if include "gmg.schedulerClientAuth" . -}}
{{- if and (eq .Values.certificate.mode "existingSecret") (not .Values.scheduler.clientAuth.existingSecret) -}}
{{- fail "scheduler.clientAuth: with certificate.mode existingSecret, set scheduler.clientAuth.existingSecret to a kubernetes.io/tls Secret holding the scheduler's client certificate, issued by the CA in the serving Secret's ca.crt (or set scheduler.clientAuth.enabled=false)" -}}
{{- end -}}
{{- $r = append $r "extender" -}}
{{- end -}}
{{- join "," $r -}}
{{- end -}}

{{/* --client-allowed-names: the scheduler's name (when it authenticates) and
clientAuth.allowedNames. */}}
{{- define "gmg.clientAllowedNames" -}}
{{- $n := .Values.clientAuth.allowedNames | default list -}}
{{- if include "gmg.schedulerClientAuth" . -}}
{{- $n = prepend $n (include "gmg.schedulerClientName" .) -}}
{{- end -}}
{{- join "," (uniq $n) -}}
{{- end -}}
