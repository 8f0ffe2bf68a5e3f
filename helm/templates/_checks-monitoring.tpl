{{/* Checks of the monitors (pdctl/rules/monitoring.py). */}}

{{/* Monitors that would scrape nothing or twice (PD024): a ServiceMonitor and a PodMonitor of the same
pods, and a router monitor for LMCache's PD proxy, which exports no metrics. */}}
{{- define "pd-stack.checks.monitoring" -}}
{{- range $where := list "servingEngineSpec" "routerSpec" -}}
{{- $spec := get $.Values $where -}}
{{- if and (dig "serviceMonitor" "enabled" false $spec) (dig "podMonitor" "enabled" false $spec) -}}
{{- fail (printf "[PD024] %s.serviceMonitor and %s.podMonitor are both enabled: Prometheus would scrape every pod twice and double every sum; enable one" $where $where) -}}
{{- end -}}
{{- end -}}
{{- $router := .Values.routerSpec -}}
{{- if and $router.enableRouter (not (include "pd-stack.routerMetricsPort" .)) -}}
{{- range $kind := list "serviceMonitor" "podMonitor" -}}
{{- if dig $kind "enabled" false $router -}}
{{- fail (printf "[PD024] routerSpec.%s: routerSpec.type %s exports no Prometheus metrics (LMCache's PD proxy serves only its completion routes); disable it" $kind (include "pd-stack.routerType" $)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
