{{/*
The metrics Service and ServiceMonitor of one component: (list $ component
values serviceSuffix). Every replica is scraped (docs/observability.md tells
which metrics only the updater's leader moves). The Prometheus Operator
labels every series with job (the Service's name), namespace, service, pod,
container and endpoint (the port's name, "metrics"): the metrics' own
labels avoid those names, and the alerts are tested with them
(hack/monitoring/rules-test.yaml).
*/}}
{{- define "vpa-inplace.serviceMonitor" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $v := index . 2 -}}
{{- $sm := $v.serviceMonitor -}}
{{- $service := printf "%s-%s" (include "vpa-inplace.fullname" $root) (index . 3) }}
apiVersion: v1
kind: Service
metadata:
  name: {{ $service }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "vpa-inplace.labels" (list $root $component) | nindent 4 }}
    vpa-inplace.dev/service: metrics
spec:
  selector:
    {{- include "vpa-inplace.selectorLabels" (list $root $component) | nindent 4 }}
  ports:
    - name: metrics
      port: {{ $v.metricsPort }}
      targetPort: metrics
      protocol: TCP
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "vpa-inplace.componentName" (list $root $component) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "vpa-inplace.labels" (list $root $component) | nindent 4 }}
    {{- with $sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "vpa-inplace.selectorLabels" (list $root $component) | nindent 6 }}
      vpa-inplace.dev/service: metrics
  namespaceSelector:
    matchNames:
      - {{ $root.Release.Namespace }}
  endpoints:
    - port: metrics
      path: /metrics
      interval: {{ $sm.interval }}
      {{- with $sm.scrapeTimeout }}
      scrapeTimeout: {{ . }}
      {{- end }}
      {{- with $sm.relabelings }}
      relabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $sm.metricRelabelings }}
      metricRelabelings:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
