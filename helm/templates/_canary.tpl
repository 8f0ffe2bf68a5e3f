{{/*
The PD canary (canary.enabled; configmap-canary.yaml, cronjob-canary.yaml and its RBAC): the pools
it reads, its image and the configuration its script (files/canary/pd_canary.py) reads. Metric
names come from files/connectors.yaml and the bandwidth floor from files/links.yaml, never from
this file.
*/}}

{{/* The model name vLLM serves for a pool (dict root spec): --served-model-name from
vllmConfig.extraArgs, else its modelURL, as vLLM names it. */}}
{{- define "pd-stack.servedModel" -}}
{{- $model := .spec.modelURL | default "" -}}
{{- $args := (.spec.vllmConfig | default dict).extraArgs | default list -}}
{{- range $i, $arg := $args -}}
{{- if and (eq (toString $arg) "--served-model-name") (lt (add1 $i) (len $args)) -}}
{{- $model = index $args (add1 $i) | toString -}}
{{- else if hasPrefix "--served-model-name=" (toString $arg) -}}
{{- $model = trimPrefix "--served-model-name=" (toString $arg) -}}
{{- end -}}
{{- end -}}
{{- $model -}}
{{- end -}}

{{/* The pools the canary reads: every prefill and decode pool, as a JSON list. */}}
{{- define "pd-stack.canaryPools" -}}
{{- $pools := list -}}
{{- range $spec := include "pd-stack.pools" . | fromJsonArray -}}
{{- if has (include "pd-stack.poolRole" (dict "root" $ "spec" $spec)) (list "prefill" "decode") -}}
{{- $pools = append $pools $spec -}}
{{- end -}}
{{- end -}}
{{- toJson $pools -}}
{{- end -}}

{{/* The first prefill pool (JSON; {} when none): its model, image and Python are the canary's. */}}
{{- define "pd-stack.canaryPool" -}}
{{- $found := dict -}}
{{- range $spec := include "pd-stack.canaryPools" . | fromJsonArray -}}
{{- if and (not $found) (eq (include "pd-stack.poolRole" (dict "root" $ "spec" $spec)) "prefill") -}}
{{- $found = $spec -}}
{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/* The KV bandwidth floor of the link table (files/links.yaml): the slowest RDMA link's GB/s x
minimumFraction, as pdctl/models/links.py computes it for `pdctl verify`. */}}
{{- define "pd-stack.linkFloor" -}}
{{- $table := .Files.Get "files/links.yaml" | fromYaml -}}
{{- $slowest := 0.0 -}}
{{- range $table.links -}}
{{- if and .rdma (or (eq $slowest 0.0) (lt (float64 .gbps) $slowest)) -}}{{- $slowest = float64 .gbps -}}{{- end -}}
{{- end -}}
{{- mulf $slowest $table.minimumFraction -}}
{{- end -}}

{{/* The URL the canary's probe goes to: canary.routerUrl, else the router Service. */}}
{{- define "pd-stack.canaryRouterUrl" -}}
{{- .Values.canary.routerUrl | default (printf "http://%s:%s" (include "pd-stack.routerServiceName" .) (include "pd-stack.int" (dict "key" "routerSpec.servicePort" "value" .Values.routerSpec.servicePort))) -}}
{{- end -}}

{{/* The canary's configuration (config.json beside the script). The connector's name and metrics
are the union over the pools' connectors (names joined by ", "; the table's metrics.transfer,
metrics.failures and metrics.loaded; bandwidth: the first [bytes, seconds] pair; metricsEvery: the longest); the
evidence is the table's transferEvidence. */}}
{{- define "pd-stack.canaryConfig" -}}
{{- include "pd-stack.connectorTable" . -}}
{{- $canary := .Values.canary -}}
{{- $evidence := .pdStackConnectors.transferEvidence -}}
{{- $label := keys $evidence.labels | first -}}
{{- $pools := list -}}
{{- $transfer := list -}}
{{- $failures := list -}}
{{- $loaded := list -}}
{{- $bandwidth := list -}}
{{- $names := list -}}
{{- $every := 0 -}}
{{- range $spec := include "pd-stack.canaryPools" . | fromJsonArray -}}
{{- $ctx := dict "root" $ "spec" $spec -}}
{{- $selector := include "pd-stack.selectorArgs" (dict "selector" (include "pd-stack.poolSelector" $ctx)) -}}
{{- $pools = append $pools (dict "name" $spec.name "role" (include "pd-stack.poolRole" $ctx) "selector" $selector) -}}
{{- $connector := include "pd-stack.poolConnector" $ctx | fromJson -}}
{{- if $connector.name -}}{{- $names = append $names $connector.name -}}{{- end -}}
{{- $metrics := $connector.metrics | default dict -}}
{{- $transfer = concat $transfer ($metrics.transfer | default list) -}}
{{- $failures = concat $failures ($metrics.failures | default list) -}}
{{- $loaded = concat $loaded ($metrics.loaded | default list) -}}
{{- if and (not $bandwidth) (eq (len ($metrics.bandwidth | default list)) 2) -}}{{- $bandwidth = $metrics.bandwidth -}}{{- end -}}
{{- $every = max $every ($connector.metricsEvery | default 0 | int) -}}
{{- end -}}
{{- $config := dict
  "release" .Release.Name
  "namespace" .Release.Namespace
  "router" (include "pd-stack.canaryRouterUrl" .)
  "model" (include "pd-stack.servedModel" (dict "root" . "spec" (include "pd-stack.canaryPool" . | fromJson)))
  "pools" $pools
  "portNames" (list "vllm" "http")
  "promptWords" (int $canary.promptWords)
  "maxTokens" (int $canary.maxTokens)
  "timeoutSeconds" (int $canary.timeoutSeconds)
  "settleSeconds" (int $canary.settleSeconds)
  "minKvGbps" (hasKey $canary "minKvGbps" | ternary $canary.minKvGbps (include "pd-stack.linkFloor" . | float64))
  "evidence" (dict "metric" $evidence.metric "label" $label "value" (get $evidence.labels $label) "role" $evidence.poolRole)
  "connector" (dict "name" (uniq $names | join ", ") "transfer" (uniq $transfer) "failures" (uniq $failures) "loaded" (uniq $loaded) "bandwidth" $bandwidth "metricsEvery" $every)
-}}
{{- toPrettyJson $config -}}
{{- end -}}
