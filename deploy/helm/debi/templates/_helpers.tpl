{{/* Name of the chart. */}}
{{- define "debi.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Fully qualified name: the release name, prefixed with debi unless it contains it. */}}
{{- define "debi.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; pass (dict "ctx" $ "component" "exporter"). */}}
{{- define "debi.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: debi
{{ include "debi.selectorLabels" . }}
{{- end -}}

{{- define "debi.selectorLabels" -}}
app.kubernetes.io/name: {{ include "debi.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "debi.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "debi.tokenSecret" -}}
{{- if .Values.webhook.token.existingSecret -}}
{{- .Values.webhook.token.existingSecret -}}
{{- else -}}
{{- include "debi.fullname" . }}-webhook-token
{{- end -}}
{{- end -}}

{{/*
The configuration: the example of files/debi.yml (generated from deploy/kustomize/base/debi.yml)
with .Values.config deep-merged over it; the Lease lives in the release namespace and the token
where the webhook Deployment mounts it.
*/}}
{{- define "debi.config" -}}
{{- $cfg := .Files.Get "files/debi.yml" | fromYaml -}}
{{- $cfg = mergeOverwrite $cfg (deepCopy .Values.config) -}}
{{- $wh := get $cfg "webhook" | default dict -}}
{{- $le := get $wh "leader_election" | default dict -}}
{{- $_ := set $le "namespace" .Release.Namespace -}}
{{- $_ := set $wh "leader_election" $le -}}
{{- if not (get $wh "allow_unauthenticated") -}}
{{- $_ := set $wh "bearer_token_file" "/etc/debi/webhook/token" -}}
{{- end -}}
{{- $_ := set $cfg "webhook" $wh -}}
{{- toYaml $cfg -}}
{{- end -}}

{{- define "debi.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "debi.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
Whether to render a Prometheus Operator object: pass (dict "ctx" $ "enabled" .Values.x.enabled
"api" "monitoring.coreos.com/v1"). "auto" (or anything but true/false) renders it where the API
version is served, true always, false never. Returns "true" or "".
*/}}
{{- define "debi.operatorObject" -}}
{{- if eq (toString .enabled) "true" -}}
true
{{- else if eq (toString .enabled) "false" -}}
{{- else if .ctx.Capabilities.APIVersions.Has .api -}}
true
{{- end -}}
{{- end -}}

{{/* The webhook's TLS Secret. */}}
{{- define "debi.tlsSecret" -}}
{{- .Values.webhook.tls.secretName | default (printf "%s-webhook-tls" (include "debi.fullname" .)) -}}
{{- end -}}

{{/* http or https: the webhook's scheme. */}}
{{- define "debi.webhookScheme" -}}
{{- if .Values.webhook.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/* exporter-toolkit's web configuration of the webhook (--web.config.file). */}}
{{- define "debi.webhookWebConfig" -}}
tls_server_config:
  cert_file: /etc/debi/tls/tls.crt
  key_file: /etc/debi/tls/tls.key
{{- end -}}
