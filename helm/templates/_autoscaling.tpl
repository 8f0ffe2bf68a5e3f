{{/*
Autoscaling per pool: which workload a pool's KEDA ScaledObject scales, its minimum, and the
default triggers (scaledobject-engine.yaml; rule PD023 in _checks-autoscaling.tpl). Pool helpers take
(dict "root" $ "spec" <modelSpec entry>).
*/}}

{{/* "true" when an autoscaler owns a pool's replicas (modelSpec.keda.enabled): its workload then
has no replicas. */}}
{{- define "pd-stack.poolAutoscaled" -}}
{{- if dig "keda" "enabled" false .spec -}}true{{- end -}}
{{- end -}}

{{/* What a pool's ScaledObject scales (its scaleTargetRef), as YAML: the pool's Deployment, its
LeaderWorkerSet (LWS has the /scale subresource), or, for a DisaggregatedSet role, the role's
DisaggregatedSetRoleScaler <set>-<pool> (scalingMode External; files/workloads.yaml). */}}
{{- define "pd-stack.poolScaleTarget" -}}
{{- include "pd-stack.workloadTable" .root -}}
{{- $kind := include "pd-stack.poolKind" . -}}
{{- if eq $kind "Deployment" -}}
apiVersion: apps/v1
kind: Deployment
name: {{ include "pd-stack.poolDeploymentName" . }}
{{- else if eq $kind "LeaderWorkerSet" -}}
apiVersion: {{ .root.pdStackWorkloads.lws.apiVersion }}
kind: LeaderWorkerSet
name: {{ include "pd-stack.poolLeaderWorkerSetName" . }}
{{- else -}}
apiVersion: {{ .root.pdStackWorkloads.disaggregatedSet.roleScaler.apiVersion }}
kind: {{ .root.pdStackWorkloads.disaggregatedSet.roleScaler.kind }}
name: {{ printf "%s-%s" (include "pd-stack.disaggregatedSetName" .root) .spec.name }}
{{- end -}}
{{- end -}}

{{/* A pool's KEDA minReplicaCount (modelSpec.keda): as given, else 1 (production-stack's example
value), never KEDA's default of 0. */}}
{{- define "pd-stack.kedaMinReplicas" -}}
{{- include "pd-stack.int" (dict "key" "keda.minReplicaCount" "value" (ternary 1 .minReplicaCount (kindIs "invalid" .minReplicaCount))) -}}
{{- end -}}

{{/*
The default KEDA triggers of a pool (modelSpec.keda without triggers), as a YAML list: Prometheus
queries (KEDA's prometheus scaler, pkg/scalers/prometheus_scaler.go at v2.20.2: serverAddress,
query, threshold) over the pool's series, selected by namespace, release and model (the chart's
monitors copy the pod labels app.kubernetes.io/instance and model onto every series,
podTargetLabels; two releases in one namespace may name pools alike). Per role:
- every pool: vllm:num_requests_waiting summed over the pool, AverageValue (KEDA divides by the
  replicas: waiting requests per engine), threshold waitingRequests (default 5);
- decode and both: the engines' mean vllm:kv_cache_usage_perc, Value (the HPA scales by
  current/target), threshold kvCacheUsage (default 0.8): a full KV cache preempts requests;
- prefill and both, with ttftSeconds: the pool's p90 of vllm:time_to_first_token_seconds over 2
  minutes, Value: queueing in front of prefill shows there first.
*/}}
{{- define "pd-stack.kedaTriggers" -}}
{{- $keda := .spec.keda -}}
{{- $role := include "pd-stack.poolRole" . -}}
{{- $address := $keda.serverAddress | default "http://prometheus-operated.monitoring.svc:9090" -}}
{{- $series := printf "namespace=%q,app_kubernetes_io_instance=%q,model=%q" .root.Release.Namespace .root.Release.Name .spec.name -}}
{{- $triggers := list -}}
{{- $waiting := ternary 5 $keda.waitingRequests (kindIs "invalid" $keda.waitingRequests) -}}
{{- if $waiting -}}
{{- $query := printf "sum(vllm:num_requests_waiting{%s})" $series -}}
{{- $triggers = append $triggers (dict "type" "prometheus" "name" "waiting-requests" "metricType" "AverageValue" "metadata" (dict "serverAddress" $address "query" $query "threshold" (include "pd-stack.number" $waiting))) -}}
{{- end -}}
{{- $kv := ternary 0.8 $keda.kvCacheUsage (kindIs "invalid" $keda.kvCacheUsage) -}}
{{- if and (ne $role "prefill") $kv -}}
{{- $query := printf "avg(vllm:kv_cache_usage_perc{%s})" $series -}}
{{- $triggers = append $triggers (dict "type" "prometheus" "name" "kv-cache-usage" "metricType" "Value" "metadata" (dict "serverAddress" $address "query" $query "threshold" (include "pd-stack.number" $kv))) -}}
{{- end -}}
{{- if and (ne $role "decode") $keda.ttftSeconds -}}
{{- $query := printf "histogram_quantile(0.9, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{%s}[2m])))" $series -}}
{{- $triggers = append $triggers (dict "type" "prometheus" "name" "ttft-p90" "metricType" "Value" "metadata" (dict "serverAddress" $address "query" $query "threshold" (include "pd-stack.number" $keda.ttftSeconds))) -}}
{{- end -}}
{{- toYaml $triggers -}}
{{- end -}}
