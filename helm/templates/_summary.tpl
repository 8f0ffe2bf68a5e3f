{{/*
The summary of the pools a workload renders: the facts the chart derives for each pool, by the
helpers that render it, as the annotation pd-stack.io/summary on the workload's own metadata (a
Deployment's, a LeaderWorkerSet's, the DisaggregatedSet's; never the pod template's, so a changed
summary restarts no pod). Its value is a JSON list, one object per pool (a DisaggregatedSet's
holds each of its roles); docs/chart.md "The pools' summary" lists the keys. pdctl's warnings
and `pdctl init` read it from the render (pdctl/rules/summary.py) instead of deriving the facts
again.
*/}}

{{/* The workload's annotations (dict "root" $ "specs" <its pools>): the summary of its pools (one
object per pool) over .annotations (the user's; the summary wins), as YAML. */}}
{{- define "pd-stack.summaryAnnotations" -}}
{{- $pools := list -}}
{{- range $spec := .specs -}}
{{- $ctx := dict "root" $.root "spec" $spec -}}
{{- $conn := include "pd-stack.poolConnector" $ctx | fromJson -}}
{{- $pools = append $pools (dict
  "pool" $spec.name
  "role" (include "pd-stack.poolRole" $ctx)
  "connector" ($conn.name | default "")
  "settingsKey" ($conn.settingsKey | default "")
  "kvRole" (include "pd-stack.kvRole" $ctx)
  "kind" (include "pd-stack.poolKind" $ctx)
  "nodes" (int (include "pd-stack.poolNodes" $ctx))
  "vllmVersion" (include "pd-stack.vllmVersion" $ctx)
  "vllmVersionKey" (include "pd-stack.vllmVersionKey" $ctx)
  "routesPD" (eq (include "pd-stack.routesPD" $.root) "true")
  "routerDiscovery" (include "pd-stack.routerDiscovery" $.root)
  "lmcacheProxy" (eq (include "pd-stack.isLMCacheProxy" $.root) "true")
  "lmcacheBuffer" (ternary (int64 (include "pd-stack.lmcacheBufferSize" ($spec.kvTransfer | default dict))) 0 (eq ($conn.fragment | default "") "lmcache"))) -}}
{{- end -}}
{{- toYaml (merge (dict "pd-stack.io/summary" (toJson $pools)) (.annotations | default dict)) -}}
{{- end -}}
