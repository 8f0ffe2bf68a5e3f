{{/*
The chart's own refusals: every combination that would deploy a silently broken PD pair (or
fail later with a worse message). Each refusal is one line, `[PDnnn] key.path: message`: the
rule's id (docs/rules.md; each rule's explanation is the `rule` comment beside its check), the
key path it is about, and why. The checks add their lines to the root's pdStackRefusals and the
chart fails once, listing them all. Every top-level template includes this first; it runs once
per render (memoized on the root), so no other template's error comes before the refusals,
whatever order helm renders the templates in. Connector facts come from files/connectors.yaml.
*/}}
{{- define "pd-stack.checks" -}}
{{- if not (hasKey . "pdStackRefusals") -}}
{{- $_ := set . "pdStackRefusals" dict -}}
{{- /* A null servingEngineSpec or routerSpec deletes the chart's defaults (helm drops nulls): no other check can read them. */ -}}
{{- if not (kindIs "map" .Values.servingEngineSpec) -}}
{{- $_ := set .pdStackRefusals "[PD016] servingEngineSpec.modelSpec: servingEngineSpec is null, so there is no engine pool (hint: give servingEngineSpec, with enableEngine: false to render only the router)" "" -}}
{{- end -}}
{{- if not (kindIs "map" .Values.routerSpec) -}}
{{- $_ := set .pdStackRefusals "[PD017] routerSpec: is null, so the chart cannot tell whether to render a router (hint: give routerSpec, with enableRouter: false to render none)" "" -}}
{{- end -}}
{{- if not .pdStackRefusals -}}
{{- include "pd-stack.checks.productionStack" . -}}
{{- $pools := include "pd-stack.pools" . | fromJsonArray -}}
{{- /* rule PD016: engines enabled with no pool (`servingEngineSpec.modelSpec` empty or missing) */ -}}
{{- if and (ne .Values.servingEngineSpec.enableEngine false) (not $pools) -}}
{{- $_ := set $.pdStackRefusals "[PD016] servingEngineSpec.modelSpec: has no enabled engine pool but servingEngineSpec.enableEngine is true: add at least one engine pool, or set servingEngineSpec.enableEngine: false to render only the router" "" -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $i, $spec := .Values.servingEngineSpec.modelSpec | default list -}}
{{- if ne $spec.enabled false -}}
{{- /* rule PD006: pool names are unique */ -}}
{{- if hasKey $seen $spec.name -}}
{{- $_ := set $.pdStackRefusals (printf "[PD006] servingEngineSpec.modelSpec[%d].name: %q is used twice (also modelSpec[%s]); pool names must be unique: they name the pool's Deployment and Service" $i $spec.name (get $seen $spec.name)) "" -}}
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
{{- with .pdStackRefusals -}}
{{- fail (printf "the values were refused:\n%s" (keys . | sortAlpha | join "\n")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
