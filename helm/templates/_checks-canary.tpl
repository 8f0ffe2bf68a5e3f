{{/* Checks of the PD canary. */}}

{{/* A canary with nothing to prove or nowhere to send its probe (PD025): it needs a prefill and a
decode pool, and a router Service (or canary.routerUrl; the llm-d router in gateway mode has none). */}}
{{- define "pd-stack.checks.canary" -}}
{{- if .Values.canary.enabled -}}
{{- $roles := list -}}
{{- range $spec := include "pd-stack.canaryPools" . | fromJsonArray -}}
{{- $roles = append $roles (include "pd-stack.poolRole" (dict "root" $ "spec" $spec)) -}}
{{- end -}}
{{- range $role := list "prefill" "decode" -}}
{{- /* rule PD025: the canary (`canary.enabled`) needs a prefill and a decode pool, and a router Service or `canary.routerUrl` (the llm-d router in gateway mode renders no router Service) */ -}}
{{- if not (has $role $roles) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD025] canary.enabled: the release has no %s pool, so the canary has no PD pair to prove; add prefill and decode pools to servingEngineSpec.modelSpec, or disable the canary" $role) "" -}}
{{- end -}}
{{- end -}}
{{- if and (not .Values.canary.routerUrl) (or (not .Values.routerSpec.enableRouter) (include "pd-stack.llmdGateway" .)) -}}
{{- $_ := set $.pdStackRefusals "[PD025] canary.routerUrl: is required when the chart renders no router Service (routerSpec.enableRouter false, or routerSpec.llmd.mode gateway): give the URL the canary's probe should go to" "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
