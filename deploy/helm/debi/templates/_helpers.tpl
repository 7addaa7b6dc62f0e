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

{{- define "debi.tidalPushSecret" -}}
{{- if .Values.webhook.tidalPush.existingSecret -}}
{{- .Values.webhook.tidalPush.existingSecret -}}
{{- else -}}
{{- include "debi.fullname" . }}-tidal-push-token
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
{{- if .Values.webhook.tidalPush.enabled -}}
{{- $td := get $wh "tidal" | default dict -}}
{{- $_ := set $td "push" (dict "enabled" true "bearer_token_file" "/etc/debi/tidal-push/token") -}}
{{- $_ := set $wh "tidal" $td -}}
{{- end -}}
{{- $_ := set $cfg "webhook" $wh -}}
{{- if .Values.elasticScaler.enabled -}}
{{- /* Policies from ElasticScaler objects, watched where the chart binds the RBAC to read them. */ -}}
{{- $g := get $cfg "global" | default dict -}}
{{- $es := dict "enabled" true -}}
{{- if not .Values.elasticScaler.clusterWide -}}
{{- $_ := set $es "namespaces" (include "debi.esNamespaces" . | fromJsonArray) -}}
{{- end -}}
{{- $_ := set $g "elastic_scalers" $es -}}
{{- $_ := set $cfg "global" $g -}}
{{- end -}}
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

{{/*
The namespaces whose ElasticScalers are policies (elasticScaler.namespaces, sorted, unique), as a
JSON array; empty with elasticScaler.clusterWide (every namespace). Fails when neither is set:
debi would watch ElasticScalers it may not read.
*/}}
{{- define "debi.esNamespaces" -}}
{{- $ns := .Values.elasticScaler.namespaces | default list | uniq | sortAlpha -}}
{{- if and .Values.elasticScaler.enabled (not $ns) (not .Values.elasticScaler.clusterWide) -}}
{{- fail "elasticScaler.enabled: set elasticScaler.namespaces (the namespaces whose ElasticScalers are policies; the RBAC to read them is bound there only) or elasticScaler.clusterWide=true" -}}
{{- end -}}
{{- if .Values.elasticScaler.clusterWide -}}[]{{- else -}}{{- toJson $ns -}}{{- end -}}
{{- end -}}

{{/*
The rules of one Role or ClusterRole of a generated RBAC file (a copy of deploy/base/<file>, whose
objects are tested by impersonation): pass (dict "ctx" $ "file" "files/x.yaml" "name" "debi-x").
*/}}
{{- define "debi.rbacRules" -}}
{{- $rules := list -}}
{{- range regexSplit "(?m)^---\\s*$" (.ctx.Files.Get .file) -1 -}}
{{- $o := fromYaml . -}}
{{- if and (has (get $o "kind" | default "") (list "ClusterRole" "Role")) (eq (get (get $o "metadata" | default dict) "name" | default "") $.name) -}}
{{- $rules = $o.rules -}}
{{- end -}}
{{- end -}}
{{- if not $rules -}}
{{- fail (printf "%s holds no role %s: run make generate" .file .name) -}}
{{- end -}}
{{- toYaml $rules -}}
{{- end -}}

{{/* The Tidal controller's namespaces (tidalController.namespaces, else elasticScaler.namespaces), a JSON array; empty with tidalController.clusterWide. */}}
{{- define "debi.tidalNamespaces" -}}
{{- $ns := .Values.tidalController.namespaces | default list -}}
{{- if and (not $ns) .Values.elasticScaler.enabled -}}
{{- $ns = .Values.elasticScaler.namespaces | default list -}}
{{- end -}}
{{- if .Values.tidalController.clusterWide -}}[]
{{- else if not $ns -}}
{{- fail "tidalController.enabled: set tidalController.namespaces (or elasticScaler.namespaces: the namespaces whose Tidals it evaluates; its RBAC is bound there only) or tidalController.clusterWide=true" -}}
{{- else -}}{{- $ns | uniq | sortAlpha | toJson -}}
{{- end -}}
{{- end -}}

{{/*
Bindings of an ElasticScaler ClusterRole: a RoleBinding in each of .namespaces, or one
ClusterRoleBinding with elasticScaler.clusterWide. Pass (dict "ctx" $ "role" "webhook-elasticscaler"
"sa" "webhook" "component" "webhook" "namespaces" (list ...)).
*/}}
{{- define "debi.esBindings" -}}
{{- $fullname := include "debi.fullname" .ctx -}}
{{- $c := . -}}
{{- $kinds := list -}}
{{- if .ctx.Values.elasticScaler.clusterWide -}}
{{- $kinds = list "" -}}
{{- else -}}
{{- $kinds = .namespaces -}}
{{- end -}}
{{- range $kinds }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ if . }}RoleBinding{{ else }}ClusterRoleBinding{{ end }}
metadata:
  name: {{ $fullname }}-{{ $c.role }}
  {{- if . }}
  namespace: {{ . }}
  {{- end }}
  labels:
    {{- include "debi.labels" (dict "ctx" $c.ctx "component" $c.component) | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $fullname }}-{{ $c.role }}
subjects:
  - kind: ServiceAccount
    name: {{ $fullname }}-{{ $c.sa }}
    namespace: {{ $c.ctx.Release.Namespace }}
{{- end }}
{{- end -}}

{{/*
The pod spec fields every component takes from its values (pass .Values.exporter, …):
priorityClassName and topologySpreadConstraints. Rendered nothing when unset.
*/}}
{{- define "debi.podSpecExtras" -}}
{{- with .priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with .topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
