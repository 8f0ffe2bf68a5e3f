{{/*
Monitoring: what the ServiceMonitors and PodMonitors of the engines and the router scrape
(servicemonitor-*.yaml, podmonitor-*.yaml; rule PD024).
*/}}

{{/* The pod labels every scraped series gets as Prometheus labels (app_kubernetes_io_instance,
model, pd_stack_io_role): the dashboard and the KEDA default triggers select by them. */}}
{{- define "pd-stack.monitorPodLabels" -}}
- app.kubernetes.io/instance
- model
- pd-stack.io/role
{{- end -}}

{{/*
One ServiceMonitor or PodMonitor (monitoring.coreos.com/v1; prometheus-operator's CRDs, checked
against v0.93.0) of the engines or the router (dict root kind component monitor port): the
release's engine Services/pods (component serving-engine) or its router's (component router), the
named port's /metrics, production-stack's monitor keys (additionalLabels, interval, ...), and the pod
labels copied onto every series: pd-stack.monitorPodLabels for engines, the release for the router.
*/}}
{{- define "pd-stack.monitor" -}}
{{- $engines := eq .component "serving-engine" -}}
{{- $name := include (ternary "pd-stack.engineMonitorName" "pd-stack.routerMonitorName" $engines) . -}}
{{- $selector := include (ternary "pd-stack.engineSelector" "pd-stack.routerSelector" $engines) .root -}}
apiVersion: monitoring.coreos.com/v1
kind: {{ .kind }}
metadata:
  name: {{ $name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "pd-stack.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with .monitor.additionalLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- $selector | nindent 6 }}
  podTargetLabels:
    {{- if $engines }}
    {{- include "pd-stack.monitorPodLabels" . | nindent 4 }}
    {{- else }}
    - app.kubernetes.io/instance
    {{- end }}
  {{ ternary "endpoints" "podMetricsEndpoints" (eq .kind "ServiceMonitor") }}:
    {{- include "pd-stack.monitorEndpoints" . | nindent 4 }}
{{- end -}}

{{/* The scrape endpoints of a monitor (dict monitor port) as a one-item YAML list, production-stack's
keys: /metrics of the named port. */}}
{{- define "pd-stack.monitorEndpoints" -}}
{{- $m := .monitor -}}
{{- $endpoint := dict "port" .port "path" "/metrics" -}}
{{- range $key := list "interval" "scrapeTimeout" "metricRelabelings" "relabelings" -}}
{{- with get $m $key -}}{{- $_ := set $endpoint $key . -}}{{- end -}}
{{- end -}}
{{- if hasKey $m "honorLabels" -}}{{- $_ := set $endpoint "honorLabels" $m.honorLabels -}}{{- end -}}
{{- toYaml (list $endpoint) -}}
{{- end -}}

{{/* The name of the router's port that serves its Prometheus metrics on /metrics (a Service port
and a container port of that name): the production-stack router's HTTP port, vllm-router's
--prometheus-port and the llm-d endpoint picker's --metrics-port (both "metrics"); "" for LMCache's
PD proxy, which has none. */}}
{{- define "pd-stack.routerMetricsPort" -}}
{{- $type := include "pd-stack.routerType" . -}}
{{- if eq $type "production-stack" -}}http
{{- else if or (eq $type "vllm-router") (eq $type "llm-d") -}}metrics
{{- end -}}
{{- end -}}
