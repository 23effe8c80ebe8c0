{{/*
The release's full name, the prefix of every object's name:
fullnameOverride; or the release name when it contains the chart's name
(nameOverride or vpa-inplace), so that release "vpa-inplace" gives the
names of deploy/; or <release>-<name>. At most 40 characters: the longest
suffix (-admission-controller, in a label value) must fit in 63.
*/}}
{{- define "vpa-inplace.fullname" -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- $full := "" -}}
{{- if .Values.fullnameOverride -}}
{{- $full = .Values.fullnameOverride -}}
{{- else if contains $name .Release.Name -}}
{{- $full = .Release.Name -}}
{{- else -}}
{{- $full = printf "%s-%s" .Release.Name $name -}}
{{- end -}}
{{- $full = trimSuffix "-" $full -}}
{{- if gt (len $full) 40 -}}
{{- fail (printf "the chart's name prefix %q is longer than 40 characters, so its object names would not fit: set fullnameOverride (or a shorter release name or nameOverride)" $full) -}}
{{- end -}}
{{- $full -}}
{{- end }}

{{/* The name of one component's Deployment and objects: <fullname>-<component>. */}}
{{- define "vpa-inplace.componentName" -}}
{{- $root := index . 0 -}}
{{- printf "%s-%s" (include "vpa-inplace.fullname" $root) (index . 1) -}}
{{- end }}

{{/* The values of one component ("updater" or "admission-controller"). */}}
{{- define "vpa-inplace.values" -}}
{{- $root := index . 0 -}}
{{- if eq (index . 1) "updater" -}}
{{- toYaml $root.Values.updater -}}
{{- else -}}
{{- toYaml $root.Values.admissionController -}}
{{- end -}}
{{- end }}

{{/*
The ServiceAccount one component runs as: serviceAccount.name, or the
component's name when the chart creates it.
*/}}
{{- define "vpa-inplace.serviceAccountName" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $sa := (include "vpa-inplace.values" .| fromYaml).serviceAccount -}}
{{- if $sa.name -}}
{{- $sa.name -}}
{{- else if $sa.create -}}
{{- include "vpa-inplace.componentName" . -}}
{{- else -}}
{{- fail (printf "%s.serviceAccount.name is required when serviceAccount.create is false: the RBAC is bound to it" (ternary "updater" "admissionController" (eq $component "updater"))) -}}
{{- end -}}
{{- end }}

{{/*
Labels of every object of one component; $ is the root context, the second
argument the component ("updater" or "admission-controller"). The first
three are deploy/'s; commonLabels are added to every object.
*/}}
{{- define "vpa-inplace.labels" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- include "vpa-inplace.selectorLabels" . }}
app.kubernetes.io/component: {{ $component }}
app.kubernetes.io/part-of: vpa-inplace
{{ include "vpa-inplace.releaseLabels" $root }}
{{- end }}

{{/* The labels of the release, on every object, and commonLabels. */}}
{{- define "vpa-inplace.releaseLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The selector of one component's pods, stable across upgrades: the
component's name, which holds the release's full name (two releases never
select each other's pods).
*/}}
{{- define "vpa-inplace.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vpa-inplace.componentName" . }}
{{- end }}

{{/* repository:tag, or repository:tag@digest when a digest is given. */}}
{{- define "vpa-inplace.image" -}}
{{- $image := index . 0 -}}
{{- $root := index . 1 -}}
{{- $ref := printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) -}}
{{- if $image.digest -}}
{{- $ref = printf "%s@%s" $ref $image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end }}

{{/* --feature-gates=A=true,B=false from .Values.featureGates, sorted. */}}
{{- define "vpa-inplace.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $on := .Values.featureGates -}}
{{- $gates = append $gates (printf "%s=%t" $name $on) -}}
{{- end -}}
--feature-gates={{ join "," $gates }}
{{- end }}

{{/* Spread over nodes unless the component's values say otherwise. */}}
{{- define "vpa-inplace.topologySpread" -}}
{{- $values := index . 0 -}}
{{- $selector := index . 1 -}}
{{- if $values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml $values.topologySpreadConstraints | nindent 2 }}
{{- else }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- $selector | nindent 8 }}
{{- end }}
{{- end }}

{{/*
The pod settings both components share: ServiceAccount, scheduling,
priority, pull secrets and the pod security context (the restricted Pod
Security Standard unless podSecurityContext says otherwise).
*/}}
{{- define "vpa-inplace.podSpecCommon" -}}
{{- $values := index . 0 -}}
{{- $component := index . 1 -}}
{{- $root := index . 2 -}}
serviceAccountName: {{ include "vpa-inplace.serviceAccountName" (list $root $component) }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- include "vpa-inplace.topologySpread" (list $values (include "vpa-inplace.selectorLabels" (list $root $component))) }}
securityContext:
  {{- toYaml $values.podSecurityContext | nindent 2 }}
{{- end }}

{{/* Deployment metadata both components share. */}}
{{- define "vpa-inplace.deploymentMetadata" -}}
{{- $values := index . 0 -}}
{{- $component := index . 1 -}}
{{- $root := index . 2 -}}
name: {{ include "vpa-inplace.componentName" (list $root $component) }}
namespace: {{ $root.Release.Namespace }}
labels:
  {{- include "vpa-inplace.labels" (list $root $component) | nindent 2 }}
{{- with $values.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The pod template's metadata both components share. */}}
{{- define "vpa-inplace.podMetadata" -}}
{{- $values := index . 0 -}}
{{- $component := index . 1 -}}
{{- $root := index . 2 -}}
labels:
  {{- include "vpa-inplace.labels" (list $root $component) | nindent 2 }}
  {{- with $values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The updater's replicas: updater.replicas when set, else updater.replicaCount. */}}
{{- define "vpa-inplace.updaterReplicas" -}}
{{- if ne .Values.updater.replicas nil -}}
{{ int .Values.updater.replicas }}
{{- else -}}
{{ int .Values.updater.replicaCount }}
{{- end -}}
{{- end }}

{{/* A PodDisruptionBudget's budget: minAvailable when set, else maxUnavailable. */}}
{{- define "vpa-inplace.pdbBudget" -}}
{{- if ne .minAvailable nil -}}
minAvailable: {{ .minAvailable }}
{{- else -}}
maxUnavailable: {{ .maxUnavailable }}
{{- end -}}
{{- end }}

{{/* The Service of the webhooks. */}}
{{- define "vpa-inplace.webhookService" -}}
{{- include "vpa-inplace.fullname" . }}-webhook
{{- end }}

{{/* The DNS names of the webhook Service, for the serving certificate. */}}
{{- define "vpa-inplace.webhookHosts" -}}
{{- $svc := include "vpa-inplace.webhookService" . -}}
{{ $svc }}.{{ .Release.Namespace }}.svc,{{ $svc }}.{{ .Release.Namespace }}.svc.cluster.local
{{- end }}

{{/* The cert-manager Certificate of the webhooks' serving certificate. */}}
{{- define "vpa-inplace.certificateName" -}}
{{- include "vpa-inplace.fullname" . }}-admission
{{- end }}

{{/* The Secret of cert-manager's or your serving certificate. */}}
{{- define "vpa-inplace.tlsSecretName" -}}
{{- include "vpa-inplace.fullname" . }}-admission-tls
{{- end }}

{{/* Labels and, with cert-manager, the CA injection annotation of the webhook configurations. */}}
{{- define "vpa-inplace.webhookMetadata" -}}
{{- $root := . -}}
labels:
  {{- include "vpa-inplace.labels" (list $root "admission-controller") | nindent 2 }}
{{- if eq $root.Values.certificates.mode "cert-manager" }}
annotations:
  # cert-manager's CA injector fills caBundle from the Certificate's CA.
  cert-manager.io/inject-ca-from: {{ $root.Release.Namespace }}/{{ include "vpa-inplace.certificateName" $root }}
{{- end }}
{{- end }}

{{/*
The namespaceSelector of one webhook: the webhook's own when set, else
admissionController.webhooks.namespaceSelector; for the pods webhook
(second argument true) kube-system and the release's namespace are always
left out, whatever the values say.
*/}}
{{- define "vpa-inplace.namespaceSelector" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- $pods := index . 2 -}}
{{- $sel := deepCopy (default $root.Values.admissionController.webhooks.namespaceSelector $own.namespaceSelector) -}}
{{- if $pods -}}
{{- $exclude := dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (list "kube-system" $root.Release.Namespace) -}}
{{- $_ := set $sel "matchExpressions" (append (default (list) $sel.matchExpressions) $exclude) -}}
{{- end -}}
{{- with $sel }}
namespaceSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The objectSelector of one webhook: its own when set, else the common one. */}}
{{- define "vpa-inplace.objectSelector" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- with (default $root.Values.admissionController.webhooks.objectSelector $own.objectSelector) }}
objectSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A PromQL label matcher list, {a="b", c=~"d"}, of the strings given; empty for none. */}}
{{- define "vpa-inplace.matchers" -}}
{{- with . -}}
{{- printf "{%s}" (join ", " .) -}}
{{- end -}}
{{- end }}
