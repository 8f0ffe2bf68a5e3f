{{/*
The chart's own refusals: every combination that would deploy a silently broken PD pair (or
fail later with a worse message). Each message starts with the id of the `pdctl validate` rule
that refuses the same values (pdctl/rules/) and names the key path; an agreement test keeps the
two in step. Called once, from checks.yaml. Connector facts come from files/connectors.yaml.
*/}}
{{- define "pd-stack.checks" -}}
{{- include "pd-stack.checks.productionStack" . -}}
{{- $pools := include "pd-stack.pools" . | fromJsonArray -}}
{{- if and (ne .Values.servingEngineSpec.enableEngine false) (not $pools) -}}
{{- fail "[PD016] servingEngineSpec.modelSpec has no enabled engine pool but servingEngineSpec.enableEngine is true: add at least one engine pool, or set servingEngineSpec.enableEngine: false to render only the router" -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $i, $spec := .Values.servingEngineSpec.modelSpec | default list -}}
{{- if ne $spec.enabled false -}}
{{- if hasKey $seen $spec.name -}}
{{- fail (printf "[PD006] servingEngineSpec.modelSpec[%d].name %q is used twice (also modelSpec[%s]); pool names must be unique: they name the pool's Deployment and Service" $i $spec.name (get $seen $spec.name)) -}}
{{- end -}}
{{- $_ := set $seen $spec.name (toString $i) -}}
{{- end -}}
{{- end -}}
{{- range $spec := $pools -}}
{{- include "pd-stack.checks.pool" (dict "root" $ "spec" $spec) -}}
{{- end -}}
{{- include "pd-stack.checks.pairs" (dict "root" . "pools" $pools) -}}
{{- include "pd-stack.checks.disaggregatedSet" (dict "root" . "pools" $pools) -}}
{{- if .Values.routerSpec.enableRouter -}}
{{- include "pd-stack.checks.router" (dict "root" . "pools" $pools) -}}
{{- end -}}
{{- include "pd-stack.checks.autoscaling" (dict "root" . "pools" $pools) -}}
{{- include "pd-stack.checks.monitoring" . -}}
{{- include "pd-stack.checks.canary" . -}}
{{- end -}}
