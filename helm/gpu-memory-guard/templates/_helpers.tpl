{{/* Chart name, overridable. */}}
{{- define "gmg.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Fully qualified name: the release name when it already contains the chart name. */}}
{{- define "gmg.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gmg.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gmg.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gmg.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gmg.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-memory-guard
{{- end -}}

{{/* Name of the serving-certificate Secret mounted by the pods. */}}
{{- define "gmg.secretName" -}}
{{- if eq .Values.certificate.mode "existingSecret" -}}
{{- required "certificate.existingSecret.name is required with certificate.mode=existingSecret" .Values.certificate.existingSecret.name -}}
{{- else -}}
{{- default (printf "%s-tls" (include "gmg.fullname" .)) .Values.certificate.secretName -}}
{{- end -}}
{{- end -}}

{{/* Namespaces neither webhook is called for: kube-system (by default), the release's own
namespace (the webhook must never block its own restart) and the exempt namespaces. A YAML
flow list. */}}
{{- define "gmg.excludedNamespaces" -}}
{{- $ns := concat (.Values.webhook.excludedNamespaces | default list) (list .Release.Namespace) (.Values.exemptNamespaces | default list) | uniq -}}
[{{ range $i, $n := $ns }}{{ if $i }}, {{ end }}{{ $n | quote }}{{ end }}]
{{- end -}}

{{/* The GPU resource names as a CEL list literal: ['nvidia.com/gpu', ...]. */}}
{{- define "gmg.celGpuResources" -}}
[{{ range $i, $r := .Values.gpuResources }}{{ if $i }}, {{ end }}'{{ $r }}'{{ end }}]
{{- end -}}

{{- define "gmg.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The Service DNS names the serving certificate must carry. */}}
{{- define "gmg.serviceNames" -}}
{{- $svc := include "gmg.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson -}}
{{- end -}}

{{/* clientConfig of both webhooks: the Service, or webhook.url for a webhook outside the
cluster. Argument: dict root caBundle. */}}
{{- define "gmg.clientConfig" -}}
{{- $root := .root -}}
{{- if $root.Values.webhook.url -}}
url: {{ $root.Values.webhook.url | quote }}
{{- else -}}
service:
  name: {{ include "gmg.fullname" $root }}
  namespace: {{ $root.Release.Namespace }}
  path: /validate
  port: 443
{{- end }}
{{- with .caBundle }}
caBundle: {{ . }}
{{- end }}
{{- end -}}
