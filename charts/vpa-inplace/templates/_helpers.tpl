{{/*
Labels of every object of one component; $ is the root context, the second
argument the component ("updater" or "admission-controller").
*/}}
{{- define "vpa-inplace.labels" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
app.kubernetes.io/name: vpa-inplace-{{ $component }}
app.kubernetes.io/component: {{ $component }}
app.kubernetes.io/part-of: vpa-inplace
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
helm.sh/chart: {{ $root.Chart.Name }}-{{ $root.Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The selector of one component's pods (stable across upgrades). */}}
{{- define "vpa-inplace.selectorLabels" -}}
app.kubernetes.io/name: vpa-inplace-{{ . }}
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
{{- $component := index . 1 -}}
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
        {{- include "vpa-inplace.selectorLabels" $component | nindent 8 }}
{{- end }}
{{- end }}

{{/*
The pod settings both components share: scheduling, priority, pull secrets
and the restricted Pod Security Standard.
*/}}
{{- define "vpa-inplace.podSpecCommon" -}}
{{- $values := index . 0 -}}
{{- $component := index . 1 -}}
{{- $root := index . 2 -}}
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
{{- include "vpa-inplace.topologySpread" (list $values $component) }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{/* The container security context of the restricted Pod Security Standard. */}}
{{- define "vpa-inplace.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end }}

{{/* Labels and, with cert-manager, the CA injection annotation of the webhook configurations. */}}
{{- define "vpa-inplace.webhookMetadata" -}}
{{- $root := . -}}
labels:
  {{- include "vpa-inplace.labels" (list $root "admission-controller") | nindent 2 }}
{{- if eq $root.Values.certificates.mode "cert-manager" }}
annotations:
  # cert-manager's CA injector fills caBundle from the Certificate's CA.
  cert-manager.io/inject-ca-from: {{ $root.Release.Namespace }}/vpa-inplace-admission
{{- end }}
{{- end }}
