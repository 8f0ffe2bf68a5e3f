{{/* Checks of the monitors. */}}

{{/* Monitors that would scrape nothing or twice (PD024): a ServiceMonitor and a PodMonitor of the same
pods, and a router monitor for LMCache's PD proxy, which exports no metrics. */}}
{{- define "pd-stack.checks.monitoring" -}}
{{- range $where := list "servingEngineSpec" "routerSpec" -}}
{{- $spec := get $.Values $where -}}
{{- /* rule PD024: a monitor scrapes what it names, once: not both `serviceMonitor` and `podMonitor` for the engines or for the router; no router monitor for LMCache's PD proxy (it exports no metrics) */ -}}
{{- if and (dig "serviceMonitor" "enabled" false $spec) (dig "podMonitor" "enabled" false $spec) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD024] %s.podMonitor: %s.serviceMonitor is enabled too: Prometheus would scrape every pod twice and double every sum; enable one" $where $where) "" -}}
{{- end -}}
{{- end -}}
{{- $router := .Values.routerSpec -}}
{{- if and $router.enableRouter (not (include "pd-stack.routerMetricsPort" .)) -}}
{{- range $kind := list "serviceMonitor" "podMonitor" -}}
{{- if dig $kind "enabled" false $router -}}
{{- $_ := set $.pdStackRefusals (printf "[PD024] routerSpec.%s: routerSpec.type %s exports no Prometheus metrics (LMCache's PD proxy serves only its completion routes); disable it" $kind (include "pd-stack.routerType" $)) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
