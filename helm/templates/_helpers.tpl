{{/*
Shared helpers. Engine helpers take a dict: (dict "root" $ "spec" <modelSpec entry>).
*/}}

{{/* Labels every object of this release carries. */}}
{{- define "pd-stack.labels" -}}
app.kubernetes.io/name: pd-stack
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pd-stack
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector of all engine pods of this release: what the router discovers. */}}
{{- define "pd-stack.engineSelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: serving-engine
{{- end -}}

{{/* Router discovery selector as a comma-separated string (--k8s-label-selector). */}}
{{- define "pd-stack.engineSelectorString" -}}
{{- printf "app.kubernetes.io/instance=%s,app.kubernetes.io/component=serving-engine" .Release.Name -}}
{{- end -}}

{{/* Selector of one pool's pods. */}}
{{- define "pd-stack.poolSelector" -}}
{{ include "pd-stack.engineSelector" .root }}
model: {{ .spec.name }}
{{- end -}}

{{/* Name prefix of one pool's objects: <release>-<pool>. */}}
{{- define "pd-stack.poolFullname" -}}
{{- printf "%s-%s" .root.Release.Name .spec.name -}}
{{- end -}}

{{- define "pd-stack.poolServiceName" -}}
{{- printf "%s-engine-service" (include "pd-stack.poolFullname" .) -}}
{{- end -}}

{{- define "pd-stack.poolClaimName" -}}
{{- printf "%s-storage-claim" (include "pd-stack.poolFullname" .) -}}
{{- end -}}

{{- define "pd-stack.secretName" -}}
{{- printf "%s-secrets" .Release.Name -}}
{{- end -}}

{{- define "pd-stack.routerName" -}}
{{- printf "%s-router" .Release.Name -}}
{{- end -}}

{{/*
The pool's role: prefill, decode or both. The tutorial's LMCache kvRole implies it
(kv_producer = prefill, kv_consumer = decode).
*/}}
{{- define "pd-stack.poolRole" -}}
{{- $kvRole := dig "lmcacheConfig" "kvRole" "kv_both" .spec -}}
{{- if eq $kvRole "kv_producer" -}}prefill
{{- else if eq $kvRole "kv_consumer" -}}decode
{{- else -}}both
{{- end -}}
{{- end -}}

{{/* True ("true") when the pool uses the LMCache NIXL PD env of the tutorial's LMCache. */}}
{{- define "pd-stack.usesLegacyNixl" -}}
{{- $lm := .spec.lmcacheConfig | default dict -}}
{{- if and $lm.enabled $lm.enableNixl -}}true{{- end -}}
{{- end -}}

{{/* Pod labels of one pool. User labels may add keys but never replace the chart's. */}}
{{- define "pd-stack.poolPodLabels" -}}
{{- $spec := .spec -}}
{{- $own := dict "model" $spec.name "app.kubernetes.io/component" "serving-engine" "pd-stack.io/role" (include "pd-stack.poolRole" .) -}}
{{- $user := merge (deepCopy ($spec.labels | default dict)) (.root.Values.servingEngineSpec.labels | default dict) -}}
{{- if and (hasKey $user "model") (ne (toString (get $user "model")) $spec.name) -}}
{{- fail (printf "servingEngineSpec.modelSpec[%s].labels.model is %q but must equal the pool name %q: the router finds a pool's role by the pod label model" $spec.name (toString (get $user "model")) $spec.name) -}}
{{- end -}}
{{ include "pd-stack.labels" .root }}
{{ toYaml (merge $own $user) }}
{{- end -}}

{{/*
kv-transfer-config JSON of a pool, or "" when the pool transfers no KV.
Tutorial form (LMCache of May 2025, vLLM V1): LMCacheConnectorV1 with the pool's kvRole. With
enablePD, the extra config names the scheduler-worker RPC socket (lmcache_rpc_port, a name and
not a TCP port; LMCache examples/disagg_prefill use "producer1"/"consumer1") and keeps partial
chunks (discard_partial_chunks: false), as LMCache's own PD examples do.
*/}}
{{- define "pd-stack.kvTransferConfig" -}}
{{- $lm := .spec.lmcacheConfig | default dict -}}
{{- if $lm.enabled -}}
{{- $config := dict "kv_connector" "LMCacheConnectorV1" "kv_role" ($lm.kvRole | default "kv_both") -}}
{{- if $lm.enablePD -}}
{{- $_ := set $config "kv_connector_extra_config" (dict "discard_partial_chunks" false "lmcache_rpc_port" .spec.name) -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}
{{- end -}}

{{/* vllm executable: lmcache/vllm-openai images install vLLM in /opt/venv (as production-stack renders). */}}
{{- define "pd-stack.vllmExecutable" -}}
{{- if hasPrefix "lmcache/vllm-openai" .spec.repository -}}/opt/venv/bin/vllm{{- else -}}vllm{{- end -}}
{{- end -}}

{{/* Arguments of `vllm serve` for one pool, as a YAML list. */}}
{{- define "pd-stack.engineArgs" -}}
{{- $spec := .spec -}}
{{- $vllm := $spec.vllmConfig | default dict -}}
{{- $args := list "serve" $spec.modelURL "--host" "0.0.0.0" "--port" (toString .root.Values.servingEngineSpec.containerPort) -}}
{{- if hasKey $vllm "maxModelLen" -}}{{- $args = concat $args (list "--max-model-len" (toString $vllm.maxModelLen)) -}}{{- end -}}
{{- if hasKey $vllm "tensorParallelSize" -}}{{- $args = concat $args (list "--tensor-parallel-size" (toString $vllm.tensorParallelSize)) -}}{{- end -}}
{{- if hasKey $vllm "gpuMemoryUtilization" -}}{{- $args = concat $args (list "--gpu-memory-utilization" (toString $vllm.gpuMemoryUtilization)) -}}{{- end -}}
{{- if hasKey $vllm "dtype" -}}{{- $args = concat $args (list "--dtype" $vllm.dtype) -}}{{- end -}}
{{- if hasKey $vllm "maxNumSeqs" -}}{{- $args = concat $args (list "--max-num-seqs" (toString $vllm.maxNumSeqs)) -}}{{- end -}}
{{- if hasKey $vllm "enableChunkedPrefill" -}}
{{- $args = append $args (ternary "--enable-chunked-prefill" "--no-enable-chunked-prefill" $vllm.enableChunkedPrefill) -}}
{{- end -}}
{{- if hasKey $vllm "enablePrefixCaching" -}}
{{- $args = append $args (ternary "--enable-prefix-caching" "--no-enable-prefix-caching" $vllm.enablePrefixCaching) -}}
{{- end -}}
{{- $kv := include "pd-stack.kvTransferConfig" . -}}
{{- if $kv -}}{{- $args = concat $args (list "--kv-transfer-config" $kv) -}}{{- end -}}
{{- $args = concat $args ($vllm.extraArgs | default list) -}}
{{- toYaml $args -}}
{{- end -}}

{{/*
Env of one engine container, as a YAML list: the chart's entries, then the user's
(servingEngineSpec.env, then modelSpec.env). A user entry replaces a chart entry of the same name,
so no name appears twice (server-side apply in Helm 4 rejects duplicate env names).
*/}}
{{- define "pd-stack.engineEnv" -}}
{{- $spec := .spec -}}
{{- $lm := $spec.lmcacheConfig | default dict -}}
{{- $vllm := $spec.vllmConfig | default dict -}}
{{- $env := list (dict "name" "HF_HOME" "value" "/data") -}}
{{- $env = append $env (dict "name" "POD_IP" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.podIP"))) -}}
{{- if $spec.hf_token -}}
{{- $ref := dict "name" (include "pd-stack.secretName" .root) "key" (printf "hf_token_%s" $spec.name) -}}
{{- if kindIs "map" $spec.hf_token -}}
{{- $ref = dict "name" $spec.hf_token.secretName "key" $spec.hf_token.secretKey -}}
{{- end -}}
{{- $env = append $env (dict "name" "HF_TOKEN" "valueFrom" (dict "secretKeyRef" $ref)) -}}
{{- end -}}
{{- if hasKey $vllm "v1" -}}
{{- $env = append $env (dict "name" "VLLM_USE_V1" "value" (toString $vllm.v1)) -}}
{{- end -}}
{{- if $lm.enabled -}}
{{- $env = append $env (dict "name" "LMCACHE_USE_EXPERIMENTAL" "value" "True") -}}
{{- $env = append $env (dict "name" "LMCACHE_LOG_LEVEL" "value" ($lm.logLevel | default "INFO")) -}}
{{- end -}}
{{- if include "pd-stack.usesLegacyNixl" . -}}
{{- /* LMCache 0.2.x/0.3.0 NIXL PD (lmcache/v1/config.py of that date): NIXL requires local_cpu
       false, max_local_cpu_size 0 and no remote serde; the receiver listens on
       nixl_receiver_port + TP rank and the sender connects to nixl_receiver_host. */ -}}
{{- $env = append $env (dict "name" "LMCACHE_LOCAL_CPU" "value" "False") -}}
{{- $env = append $env (dict "name" "LMCACHE_MAX_LOCAL_CPU_SIZE" "value" "0") -}}
{{- $env = append $env (dict "name" "LMCACHE_REMOTE_SERDE" "value" "NULL") -}}
{{- $env = append $env (dict "name" "LMCACHE_ENABLE_NIXL" "value" "True") -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_ROLE" "value" $lm.nixlRole) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_RECEIVER_HOST" "value" $lm.nixlPeerHost) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_RECEIVER_PORT" "value" (toString $lm.nixlPeerPort)) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_BUFFER_SIZE" "value" (toString ($lm.nixlBufferSize | default "1073741824"))) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_BUFFER_DEVICE" "value" ($lm.nixlBufferDevice | default "cuda")) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_ENABLE_GC" "value" (ternary "True" "False" (default false $lm.nixlEnableGc))) -}}
{{- end -}}
{{- $user := concat (.root.Values.servingEngineSpec.env | default list) ($spec.env | default list) -}}
{{- $userNames := list -}}
{{- range $user -}}{{- $userNames = append $userNames .name -}}{{- end -}}
{{- $merged := list -}}
{{- range $env -}}{{- if not (has .name $userNames) -}}{{- $merged = append $merged . -}}{{- end -}}{{- end -}}
{{- toYaml (concat $merged $user) -}}
{{- end -}}

{{/* Ports the engine container listens on, as a YAML list. */}}
{{- define "pd-stack.enginePorts" -}}
{{- $ports := list (dict "name" "http" "containerPort" (int .root.Values.servingEngineSpec.containerPort) "protocol" "TCP") -}}
{{- $lm := .spec.lmcacheConfig | default dict -}}
{{- if and (include "pd-stack.usesLegacyNixl" .) (eq ($lm.nixlRole | toString) "receiver") -}}
{{- $tp := int (dig "vllmConfig" "tensorParallelSize" 1 .spec) -}}
{{- range $rank := until $tp -}}
{{- $ports = append $ports (dict "name" (printf "nixl-%d" $rank) "containerPort" (add (int $lm.nixlPeerPort) $rank) "protocol" "TCP") -}}
{{- end -}}
{{- end -}}
{{- toYaml $ports -}}
{{- end -}}

{{/* Resources of one engine container. GPU limits equal requests (extended resources cannot overcommit). */}}
{{- define "pd-stack.engineResources" -}}
{{- $spec := .spec -}}
{{- $requests := dict -}}
{{- $limits := dict -}}
{{- if hasKey $spec "requestCPU" -}}{{- $_ := set $requests "cpu" (toString $spec.requestCPU) -}}{{- end -}}
{{- if hasKey $spec "requestMemory" -}}{{- $_ := set $requests "memory" $spec.requestMemory -}}{{- end -}}
{{- if hasKey $spec "limitCPU" -}}{{- $_ := set $limits "cpu" (toString $spec.limitCPU) -}}{{- end -}}
{{- if hasKey $spec "limitMemory" -}}{{- $_ := set $limits "memory" $spec.limitMemory -}}{{- end -}}
{{- $gpus := int ($spec.requestGPU | default 0) -}}
{{- if gt $gpus 0 -}}
{{- $gpuType := $spec.requestGPUType | default "nvidia.com/gpu" -}}
{{- $_ := set $requests $gpuType (toString $gpus) -}}
{{- $_ := set $limits $gpuType (toString $gpus) -}}
{{- end -}}
{{- $resources := dict -}}
{{- if $requests -}}{{- $_ := set $resources "requests" $requests -}}{{- end -}}
{{- if $limits -}}{{- $_ := set $resources "limits" $limits -}}{{- end -}}
{{- toYaml $resources -}}
{{- end -}}

{{/* An httpGet probe on /health of the engine port, with the timings given. */}}
{{- define "pd-stack.healthProbe" -}}
httpGet:
  path: /health
  port: {{ .port }}
{{ toYaml .timings }}
{{- end -}}
