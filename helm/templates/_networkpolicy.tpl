{{/*
The engines' NetworkPolicy (networkpolicy-engine.yaml): which pods it selects and which router
ports it opens.
*/}}

{{/* Every engine pod of the release, leaders and workers, as a label selector (YAML). */}}
{{- define "pd-stack.enginePodsSelector" -}}
matchLabels:
  app.kubernetes.io/instance: {{ .Release.Name }}
matchExpressions:
  - key: app.kubernetes.io/component
    operator: In
    values: [serving-engine, serving-engine-worker]
{{- end -}}

{{/* The engine ports the release's router connects to, as NetworkPolicy ports (YAML): the HTTP port,
and each pool's connector port the router type reaches (files/connectors.yaml routers.<type>:
vllm-router asks a Mooncake prefill's bootstrap server, bootstrapPort). */}}
{{- define "pd-stack.routerEnginePorts" -}}
{{- $type := include "pd-stack.routerType" . -}}
{{- $names := list "http" -}}
{{- range $spec := include "pd-stack.pools" . | fromJsonArray -}}
{{- $conn := include "pd-stack.poolConnector" (dict "root" $ "spec" $spec) | fromJson -}}
{{- if and (eq $type "vllm-router") (eq (include "pd-stack.poolRole" (dict "root" $ "spec" $spec)) "prefill") -}}
{{- with dig "routers" "vllm-router" "bootstrapPort" "" $conn -}}{{- $names = append $names . -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $ports := list -}}
{{- range uniq $names -}}{{- $ports = append $ports (dict "port" . "protocol" "TCP") -}}{{- end -}}
{{- toYaml $ports -}}
{{- end -}}
