{{/*
The summary of the pools a workload renders: the facts the chart derives for each pool, by the
helpers that render it, as the annotation pd-stack.io/summary on the workload's own metadata (a
Deployment's, a LeaderWorkerSet's, the DisaggregatedSet's; never the pod template's, so a changed
summary restarts no pod). Its value is a JSON list, one object per pool (a DisaggregatedSet's
holds each of its roles); docs/chart.md "The pools' summary" lists the keys. pdctl's warnings
and `pdctl init` read it from the render (pdctl/rules/summary.py) instead of deriving the facts
again.
*/}}

{{/* One pool's summary (dict "root" $ "spec" <modelSpec entry>), as a JSON object. */}}
{{- define "pd-stack.poolSummary" -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- toJson (dict
  "pool" .spec.name
  "role" (include "pd-stack.poolRole" .)
  "connector" ($conn.name | default "")
  "settingsKey" ($conn.settingsKey | default "")
  "kvRole" (include "pd-stack.kvRole" .)
  "kind" (include "pd-stack.poolKind" .)
  "nodes" (int (include "pd-stack.poolNodes" .))
  "vllmVersion" (include "pd-stack.vllmVersion" .)
  "vllmVersionKey" (include "pd-stack.vllmVersionKey" .)
  "routesPD" (eq (include "pd-stack.routesPD" .root) "true")
  "routerDiscovery" (include "pd-stack.routerDiscovery" .root)
  "lmcacheProxy" (eq (include "pd-stack.isLMCacheProxy" .root) "true")) -}}
{{- end -}}

{{/* The workload's annotations (dict "root" $ "specs" <its pools>): the summary of its pools over
.annotations (the user's; the summary wins), as YAML. */}}
{{- define "pd-stack.summaryAnnotations" -}}
{{- $pools := list -}}
{{- range .specs -}}
{{- $pools = append $pools (include "pd-stack.poolSummary" (dict "root" $.root "spec" .) | fromJson) -}}
{{- end -}}
{{- toYaml (merge (dict "pd-stack.io/summary" (toJson $pools)) (.annotations | default dict)) -}}
{{- end -}}
