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

{{/*
The pool's role: prefill, decode or both. modelSpec.role states it; without it the tutorial's
lmcacheConfig.kvRole implies it (kv_producer = prefill, kv_consumer = decode), then
kvTransfer.kvRole the same way; otherwise both (aggregated serving).
*/}}
{{- define "pd-stack.poolRole" -}}
{{- $lmRole := dig "lmcacheConfig" "kvRole" "" .spec -}}
{{- $ktRole := dig "kvTransfer" "kvRole" "" .spec -}}
{{- if .spec.role -}}{{ .spec.role }}
{{- else if eq $lmRole "kv_producer" -}}prefill
{{- else if eq $lmRole "kv_consumer" -}}decode
{{- else if eq $ktRole "kv_producer" -}}prefill
{{- else if eq $ktRole "kv_consumer" -}}decode
{{- else -}}both
{{- end -}}
{{- end -}}

{{/* "servingEngineSpec.modelSpec[<index>]" of a pool, for messages that name the key path. */}}
{{- define "pd-stack.poolPath" -}}
{{- $name := .spec.name -}}
{{- $found := "" -}}
{{- range $i, $s := .root.Values.servingEngineSpec.modelSpec -}}
{{- if and (eq $s.name $name) (eq $found "") -}}{{- $found = toString $i -}}{{- end -}}
{{- end -}}
{{- printf "servingEngineSpec.modelSpec[%s]" $found -}}
{{- end -}}

{{/*
vLLM version inside a pool's image as "X.Y.Z", or "" when unknown: modelSpec.vllmVersion, else
the semver-like tag (vX.Y.Z...) of the official vllm/vllm-openai image. Other images (for
example lmcache/vllm-openai, whose tags name LMCache builds) say nothing about vLLM.
*/}}
{{- define "pd-stack.vllmVersion" -}}
{{- if .spec.vllmVersion -}}
{{- .spec.vllmVersion -}}
{{- else if regexMatch "(^|/)vllm/vllm-openai$" .spec.repository -}}
{{- trimPrefix "v" (regexFind "^v?[0-9]+\\.[0-9]+\\.[0-9]+" (toString .spec.tag)) -}}
{{- end -}}
{{- end -}}

{{/* files/vllm-support.yaml: the vLLM versions that have each connector and kv-transfer field. */}}
{{- define "pd-stack.vllmSupport" -}}
{{- .Files.Get "files/vllm-support.yaml" -}}
{{- end -}}

{{/* "true" when the pool's vLLM version is known and satisfies the constraint .c (e.g. ">=0.11.1"). */}}
{{- define "pd-stack.vllmSatisfies" -}}
{{- $v := include "pd-stack.vllmVersion" .ctx -}}
{{- if and $v (semverCompare .c $v) -}}true{{- end -}}
{{- end -}}

{{/* "true" when the pool's vLLM version is known and does NOT satisfy .c. */}}
{{- define "pd-stack.vllmViolates" -}}
{{- $v := include "pd-stack.vllmVersion" .ctx -}}
{{- if and $v (not (semverCompare .c $v)) -}}true{{- end -}}
{{- end -}}

{{/* GPUs one pod of the pool needs: tensor x pipeline x data parallel size (DP ranks run in the pod). */}}
{{- define "pd-stack.parallelGPUs" -}}
{{- $vllm := .spec.vllmConfig | default dict -}}
{{- mul (int (dig "tensorParallelSize" 1 $vllm)) (int (dig "pipelineParallelSize" 1 $vllm)) (int (dig "dataParallelSize" 1 $vllm)) -}}
{{- end -}}

{{/* The kvTransfer kv_role of a pool: explicit, else NIXL kv_both, else from the role. */}}
{{- define "pd-stack.kvTransferRole" -}}
{{- $kt := .spec.kvTransfer | default dict -}}
{{- $role := include "pd-stack.poolRole" . -}}
{{- if $kt.kvRole -}}{{ $kt.kvRole }}
{{- else if eq $kt.connector "NixlConnector" -}}kv_both
{{- else if eq $role "prefill" -}}kv_producer
{{- else if eq $role "decode" -}}kv_consumer
{{- else -}}kv_both
{{- end -}}
{{- end -}}

{{/* The pool named .name (as a dict), or an empty dict. */}}
{{- define "pd-stack.poolByName" -}}
{{- $want := .name -}}
{{- $found := dict -}}
{{- range .root.Values.servingEngineSpec.modelSpec -}}
{{- if eq .name $want -}}{{- $found = . -}}{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/*
Checks a pool's combination of keys that the schema cannot express, and fails with the key path.
Version gates come from files/vllm-support.yaml (shared with `pdctl validate`).
*/}}
{{- define "pd-stack.validatePool" -}}
{{- $spec := .spec -}}
{{- $path := include "pd-stack.poolPath" . -}}
{{- $vllm := $spec.vllmConfig | default dict -}}
{{- $gpus := int (include "pd-stack.parallelGPUs" .) -}}
{{- if and (hasKey $spec "requestGPU") (ne (int $spec.requestGPU) $gpus) -}}
{{- fail (printf "%s.requestGPU is %d but the pool's parallelism needs %d GPUs per pod (vllmConfig.tensorParallelSize x pipelineParallelSize x dataParallelSize); make them agree" $path (int $spec.requestGPU) $gpus) -}}
{{- end -}}
{{- $lm := $spec.lmcacheConfig | default dict -}}
{{- if and $spec.kvTransfer $lm.enabled -}}
{{- fail (printf "%s: lmcacheConfig (the tutorial's LMCache form) and kvTransfer are mutually exclusive; use one of them" $path) -}}
{{- end -}}
{{- $role := include "pd-stack.poolRole" . -}}
{{- if and $spec.role $lm.kvRole (ne $lm.kvRole "kv_both") (ne $role (ternary "prefill" "decode" (eq $lm.kvRole "kv_producer"))) -}}
{{- fail (printf "%s.role is %q but lmcacheConfig.kvRole %q implies the other role" $path $spec.role $lm.kvRole) -}}
{{- end -}}
{{- with $spec.kvTransfer -}}
{{- $kt := . -}}
{{- $conn := $kt.connector -}}
{{- $kvRole := include "pd-stack.kvTransferRole" $ -}}
{{- $ctxv := dict "ctx" $ -}}
{{- if and (ne $conn "NixlConnector") (eq $kvRole "kv_both") -}}
{{- fail (printf "%s.kvTransfer.connector %s needs a prefill or a decode pool (kv_producer or kv_consumer); set %s.role" $path $conn $path) -}}
{{- end -}}
{{- if and $spec.role (ne $role "both") (ne $kvRole "kv_both") (ne $kvRole (ternary "kv_producer" "kv_consumer" (eq $role "prefill"))) -}}
{{- fail (printf "%s.kvTransfer.kvRole %q contradicts %s.role %q" $path $kvRole $path $role) -}}
{{- end -}}
{{- if $kt.peerPool -}}
{{- $peer := include "pd-stack.poolByName" (dict "root" $.root "name" $kt.peerPool) | fromJson -}}
{{- if not $peer -}}
{{- fail (printf "%s.kvTransfer.peerPool %q names no pool in servingEngineSpec.modelSpec" $path $kt.peerPool) -}}
{{- end -}}
{{- end -}}
{{- $support := include "pd-stack.vllmSupport" $.root | fromYaml -}}
{{- with get $support.connectors $conn -}}
{{- if include "pd-stack.vllmViolates" (dict "ctx" $ "c" .versions) -}}
{{- fail (printf "%s.kvTransfer.connector %s is not in vLLM %s: it exists only in vLLM %s (%s); use NixlConnector, or state the image's version in %s.vllmVersion" $path $conn (include "pd-stack.vllmVersion" $) .versions .why $path) -}}
{{- end -}}
{{- end -}}
{{- if eq $conn "PyNcclConnector" -}}
{{- if eq (toString (dig "v1" "0" $vllm)) "1" -}}
{{- fail (printf "%s.vllmConfig.v1 is 1 but PyNcclConnector runs only on the V0 engine (VLLM_USE_V1=0); remove vllmConfig.v1" $path) -}}
{{- end -}}
{{- if gt (int ($spec.replicaCount | default 1)) 1 -}}
{{- fail (printf "%s.replicaCount must be 1 with PyNcclConnector: it pairs exactly one prefill and one decode instance (kv_parallel_size 2)" $path) -}}
{{- end -}}
{{- if and (eq $role "decode") (not $kt.peerPool) -}}
{{- fail (printf "%s.kvTransfer.peerPool is required for a PyNcclConnector decode pool: it names the prefill pool whose Service becomes kv_ip" $path) -}}
{{- end -}}
{{- end -}}
{{- $policy := $support.fields.loadFailurePolicy -}}
{{- if and (hasKey $kt "loadFailurePolicy") (include "pd-stack.vllmViolates" (dict "ctx" $ "c" $policy.versions)) -}}
{{- fail (printf "%s.kvTransfer.loadFailurePolicy: vLLM %s has no kv_load_failure_policy (it needs vLLM %s: %s); remove the key" $path (include "pd-stack.vllmVersion" $) $policy.versions $policy.why) -}}
{{- end -}}
{{- if eq $conn "LMCacheConnectorV1" -}}
{{- $lmc := $kt.lmcache | default dict -}}
{{- if and (eq $kvRole "kv_producer") (not $lmc.proxyHost) -}}
{{- fail (printf "%s.kvTransfer.lmcache.proxyHost is required on an LMCache sender (prefill): the host of the LMCache PD proxy that receives pd_proxy notifications" $path) -}}
{{- end -}}
{{- end -}}
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
{{- else if .spec.kvTransfer -}}
{{- include "pd-stack.kvTransferConfigV2" . -}}
{{- end -}}
{{- end -}}

{{/*
kv-transfer-config JSON of a pool with modelSpec.kvTransfer. Field names are those of vLLM's
KVTransferConfig (vllm/config/kv_transfer.py): kv_connector, kv_role, kv_rank, kv_parallel_size,
kv_ip, kv_port, kv_buffer_size, kv_buffer_device, kv_connector_extra_config,
kv_load_failure_policy. engine_id is never rendered: vLLM draws a fresh one per instance.
*/}}
{{- define "pd-stack.kvTransferConfigV2" -}}
{{- $spec := .spec -}}
{{- $kt := $spec.kvTransfer -}}
{{- $conn := $kt.connector -}}
{{- $role := include "pd-stack.poolRole" . -}}
{{- $kvRole := include "pd-stack.kvTransferRole" . -}}
{{- $tp := int (dig "vllmConfig" "tensorParallelSize" 1 $spec) -}}
{{- $config := dict "kv_connector" $conn "kv_role" $kvRole -}}
{{- $extra := dict -}}
{{- if eq $conn "NixlConnector" -}}
{{- /* docs/features/nixl_connector_usage.md: the same config on P and D; the docs recommend an
       explicit kv_load_failure_policy "fail" (the default became "fail" in PR #34896). */ -}}
{{- if hasKey $kt "kvBufferDevice" -}}{{- $_ := set $config "kv_buffer_device" $kt.kvBufferDevice -}}{{- end -}}
{{- else if eq $conn "LMCacheConnectorV1" -}}
{{- /* LMCache examples/disagg_prefill (1p1d, xpyd): a per-instance RPC socket name, partial chunks
       kept; the receiver skips the last token, which the LMCache proxy appends itself. */ -}}
{{- $_ := set $extra "discard_partial_chunks" false -}}
{{- $_ := set $extra "lmcache_rpc_port" $spec.name -}}
{{- if eq $kvRole "kv_consumer" -}}{{- $_ := set $extra "skip_last_n_tokens" 1 -}}{{- end -}}
{{- else if eq $conn "MooncakeConnector" -}}
{{- /* docs/features/mooncake_connector_usage.md: extra config mooncake_protocol (rdma) and
       device_name (RDMA devices, e.g. mlx5_0,mlx5_1). */ -}}
{{- $mc := $kt.mooncake | default dict -}}
{{- $_ := set $extra "mooncake_protocol" ($mc.protocol | default "rdma") -}}
{{- with $mc.deviceName -}}{{- $_ := set $extra "device_name" . -}}{{- end -}}
{{- else if eq $conn "P2pNcclConnector" -}}
{{- /* examples/online_serving/disaggregated_serving_p2p_nccl_xpyd and p2p_nccl_engine.py: ZMQ on
       <VLLM_HOST_IP>:kv_port+rank; registration with the proxy at proxy_ip:proxy_port; http_port
       must equal --port. Extra-config values are strings as in the upstream example
       (nccl_num_channels is written into NCCL_* env). */ -}}
{{- $p2p := $kt.p2pNccl | default dict -}}
{{- $_ := set $config "kv_port" (int ($kt.kvPort | default 21001)) -}}
{{- $_ := set $config "kv_buffer_size" (float64 ($kt.kvBufferSize | default (ternary 1 8e9 (eq $kvRole "kv_producer")))) -}}
{{- $_ := set $extra "proxy_ip" ($p2p.proxyHost | default (include "pd-stack.routerServiceName" .root)) -}}
{{- $_ := set $extra "proxy_port" (toString ($p2p.proxyPort | default 30001)) -}}
{{- $_ := set $extra "http_port" (toString .root.Values.servingEngineSpec.containerPort) -}}
{{- $_ := set $extra "send_type" ($p2p.sendType | default "PUT_ASYNC") -}}
{{- $_ := set $extra "nccl_num_channels" (toString ($p2p.ncclNumChannels | default 16)) -}}
{{- else if eq $conn "PyNcclConnector" -}}
{{- /* V0 examples/offline_inference/disaggregated_prefill.py: prefill kv_producer rank 0, decode
       kv_consumer rank 1, kv_parallel_size 2. kv_ip is the rank-0 (prefill) address: the prefill
       binds its own pod IP ($(POD_IP), expanded by Kubernetes from the container env); the
       decode dials the prefill pool's Service, which forwards kv_port .. kv_port+2*TP-1. */ -}}
{{- $_ := set $config "kv_rank" (ternary 0 1 (eq $kvRole "kv_producer")) -}}
{{- $_ := set $config "kv_parallel_size" 2 -}}
{{- if eq $kvRole "kv_producer" -}}
{{- $_ := set $config "kv_ip" "$(POD_IP)" -}}
{{- else -}}
{{- $_ := set $config "kv_ip" (include "pd-stack.poolServiceName" (dict "root" .root "spec" (dict "name" $kt.peerPool))) -}}
{{- end -}}
{{- $_ := set $config "kv_port" (int ($kt.kvPort | default 14579)) -}}
{{- with $kt.kvBufferSize -}}{{- $_ := set $config "kv_buffer_size" (float64 .) -}}{{- end -}}
{{- end -}}
{{- if and (ne $conn "NixlConnector") (hasKey $kt "kvBufferDevice") (ne $conn "LMCacheConnectorV1") -}}
{{- $_ := set $config "kv_buffer_device" $kt.kvBufferDevice -}}
{{- end -}}
{{- $extra = merge (deepCopy ($kt.extraConfig | default dict)) $extra -}}
{{- if $extra -}}{{- $_ := set $config "kv_connector_extra_config" $extra -}}{{- end -}}
{{- if hasKey $kt "loadFailurePolicy" -}}
{{- $_ := set $config "kv_load_failure_policy" $kt.loadFailurePolicy -}}
{{- else if and (eq $conn "NixlConnector") (include "pd-stack.vllmSatisfies" (dict "ctx" . "c" (include "pd-stack.vllmSupport" .root | fromYaml).fields.loadFailurePolicy.versions)) -}}
{{- $_ := set $config "kv_load_failure_policy" "fail" -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{- define "pd-stack.routerServiceName" -}}
{{- printf "%s-router-service" .Release.Name -}}
{{- end -}}

{{- define "pd-stack.routerServiceAccountName" -}}
{{- printf "%s-router-service-account" .Release.Name -}}
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
{{- /* Flags below appear only when their key is set, so the tutorial's command is unchanged. Names are
       vLLM's EngineArgs CLI (vllm/engine/arg_utils.py): --pipeline-parallel-size, --data-parallel-size,
       --kv-cache-dtype, --block-size, --enforce-eager, --disable-hybrid-kv-cache-manager. */ -}}
{{- if hasKey $vllm "pipelineParallelSize" -}}{{- $args = concat $args (list "--pipeline-parallel-size" (toString $vllm.pipelineParallelSize)) -}}{{- end -}}
{{- if hasKey $vllm "dataParallelSize" -}}{{- $args = concat $args (list "--data-parallel-size" (toString $vllm.dataParallelSize)) -}}{{- end -}}
{{- if hasKey $vllm "kvCacheDtype" -}}{{- $args = concat $args (list "--kv-cache-dtype" $vllm.kvCacheDtype) -}}{{- end -}}
{{- if hasKey $vllm "blockSize" -}}{{- $args = concat $args (list "--block-size" (toString $vllm.blockSize)) -}}{{- end -}}
{{- if $vllm.enforceEager -}}{{- $args = append $args "--enforce-eager" -}}{{- end -}}
{{- if $vllm.disableHybridKvCacheManager -}}{{- $args = append $args "--disable-hybrid-kv-cache-manager" -}}{{- end -}}
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
{{- $env = concat $env (include "pd-stack.kvTransferEnv" . | fromYamlArray) -}}
{{- $net := $spec.network | default dict -}}
{{- /* UCX transports and devices (NIXL and LMCache-over-NIXL use UCX; NCCL_* do not apply). */ -}}
{{- with $net.ucxTls -}}{{- $env = append $env (dict "name" "UCX_TLS" "value" .) -}}{{- end -}}
{{- with $net.ucxNetDevices -}}{{- $env = append $env (dict "name" "UCX_NET_DEVICES" "value" .) -}}{{- end -}}
{{- $user := concat (.root.Values.servingEngineSpec.env | default list) ($spec.env | default list) -}}
{{- $userNames := list -}}
{{- range $user -}}{{- $userNames = append $userNames .name -}}{{- end -}}
{{- $merged := list -}}
{{- range $env -}}{{- if not (has .name $userNames) -}}{{- $merged = append $merged . -}}{{- end -}}{{- end -}}
{{- toYaml (concat $merged $user) -}}
{{- end -}}

{{/* Env a pool's modelSpec.kvTransfer needs, as a YAML list ([] without kvTransfer). */}}
{{- define "pd-stack.kvTransferEnv" -}}
{{- $spec := .spec -}}
{{- $env := list -}}
{{- $podIP := dict "fieldRef" (dict "fieldPath" "status.podIP") -}}
{{- with $spec.kvTransfer -}}
{{- $kt := . -}}
{{- $conn := $kt.connector -}}
{{- $kvRole := include "pd-stack.kvTransferRole" $ -}}
{{- $tp := int (dig "vllmConfig" "tensorParallelSize" 1 $spec) -}}
{{- if eq $conn "NixlConnector" -}}
{{- /* vllm/envs.py: the NIXL handshake (side channel) listens on this host and port. */ -}}
{{- $env = append $env (dict "name" "VLLM_NIXL_SIDE_CHANNEL_HOST" "valueFrom" $podIP) -}}
{{- $env = append $env (dict "name" "VLLM_NIXL_SIDE_CHANNEL_PORT" "value" (toString ($kt.sideChannelPort | default 5600))) -}}
{{- else if eq $conn "MooncakeConnector" -}}
{{- /* Mooncake registers its transfer endpoint at vLLM's get_ip(), which honours VLLM_HOST_IP;
       the bootstrap server runs on the prefill side only (mooncake_connector_usage.md). */ -}}
{{- $env = append $env (dict "name" "VLLM_HOST_IP" "valueFrom" $podIP) -}}
{{- if eq $kvRole "kv_producer" -}}
{{- $env = append $env (dict "name" "VLLM_MOONCAKE_BOOTSTRAP_PORT" "value" (toString ($kt.bootstrapPort | default 8998))) -}}
{{- end -}}
{{- else if eq $conn "P2pNcclConnector" -}}
{{- $env = append $env (dict "name" "VLLM_HOST_IP" "valueFrom" $podIP) -}}
{{- /* Request-id randomisation (PR #27987, v0.14.0) breaks P2pNccl; PR #34415 added this switch. */ -}}
{{- if not (include "pd-stack.vllmViolates" (dict "ctx" $ "c" ">=0.14.0")) -}}
{{- $env = append $env (dict "name" "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION" "value" "1") -}}
{{- end -}}
{{- else if eq $conn "PyNcclConnector" -}}
{{- /* The V0 KV connectors run only on the V0 engine. */ -}}
{{- $env = append $env (dict "name" "VLLM_USE_V1" "value" "0") -}}
{{- else if eq $conn "LMCacheConnectorV1" -}}
{{- /* LMCache >= 0.3.7 PD keys (lmcache/v1/config.py), set as LMCACHE_<KEY> env, which overrides
       any config file (update_config_from_env); lists are comma-separated. */ -}}
{{- $lmc := $kt.lmcache | default dict -}}
{{- $env = append $env (dict "name" "PYTHONHASHSEED" "value" "0") -}}
{{- $env = append $env (dict "name" "LMCACHE_LOCAL_CPU" "value" "False") -}}
{{- $env = append $env (dict "name" "LMCACHE_MAX_LOCAL_CPU_SIZE" "value" "0") -}}
{{- $env = append $env (dict "name" "LMCACHE_ENABLE_PD" "value" "True") -}}
{{- $env = append $env (dict "name" "LMCACHE_TRANSFER_CHANNEL" "value" "nixl") -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_BACKENDS" "value" (join "," ($lmc.nixlBackends | default (list "UCX")))) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_ROLE" "value" (ternary "sender" "receiver" (eq $kvRole "kv_producer"))) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_BUFFER_SIZE" "value" (toString (int64 ($kt.kvBufferSize | default 1073741824)))) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_BUFFER_DEVICE" "value" ($kt.kvBufferDevice | default "cuda")) -}}
{{- if eq $kvRole "kv_producer" -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_PROXY_HOST" "value" $lmc.proxyHost) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_PROXY_PORT" "value" (toString ($lmc.proxyPort | default 7500))) -}}
{{- else -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_PEER_HOST" "valueFrom" $podIP) -}}
{{- $init := list -}}{{- $alloc := list -}}
{{- range $rank := until $tp -}}
{{- $init = append $init (toString (add ($lmc.peerInitPort | default 7300) $rank)) -}}
{{- $alloc = append $alloc (toString (add ($lmc.peerAllocPort | default 7400) $rank)) -}}
{{- end -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_PEER_INIT_PORT" "value" (join "," $init)) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_PEER_ALLOC_PORT" "value" (join "," $alloc)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $env -}}
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
{{- with .spec.kvTransfer -}}
{{- $kt := . -}}
{{- $conn := $kt.connector -}}
{{- $kvRole := include "pd-stack.kvTransferRole" $ -}}
{{- $vllm := $.spec.vllmConfig | default dict -}}
{{- $tp := int (dig "tensorParallelSize" 1 $vllm) -}}
{{- $dp := int (dig "dataParallelSize" 1 $vllm) -}}
{{- if eq $conn "NixlConnector" -}}
{{- /* One side-channel listener per DP rank (current vLLM: base + dp_rank); images of v0.10/0.11
       used base + dp_rank*tp_size + tp_rank (PR #24249), so the whole DP x TP range is declared. */ -}}
{{- $base := int ($kt.sideChannelPort | default 5600) -}}
{{- range $i := until (int (mul $dp $tp)) -}}
{{- $ports = append $ports (dict "name" (printf "nixl-side-%d" $i) "containerPort" (add $base $i) "protocol" "TCP") -}}
{{- end -}}
{{- else if and (eq $conn "MooncakeConnector") (eq $kvRole "kv_producer") -}}
{{- $ports = append $ports (dict "name" "mc-bootstrap" "containerPort" (int ($kt.bootstrapPort | default 8998)) "protocol" "TCP") -}}
{{- else if eq $conn "P2pNcclConnector" -}}
{{- range $rank := until $tp -}}
{{- $ports = append $ports (dict "name" (printf "p2p-zmq-%d" $rank) "containerPort" (add (int ($kt.kvPort | default 21001)) $rank) "protocol" "TCP") -}}
{{- end -}}
{{- else if and (eq $conn "PyNcclConnector") (eq $kvRole "kv_producer") -}}
{{- /* kv_pipe/pynccl_pipe.py: per TP rank a data pipe at kv_port+2*rank and a signal pipe at +1. */ -}}
{{- range $i := until (int (mul 2 $tp)) -}}
{{- $ports = append $ports (dict "name" (printf "pynccl-%d" $i) "containerPort" (add (int ($kt.kvPort | default 14579)) $i) "protocol" "TCP") -}}
{{- end -}}
{{- else if and (eq $conn "LMCacheConnectorV1") (ne $kvRole "kv_producer") -}}
{{- $lmc := $kt.lmcache | default dict -}}
{{- range $rank := until $tp -}}
{{- $ports = append $ports (dict "name" (printf "lmc-init-%d" $rank) "containerPort" (add (int ($lmc.peerInitPort | default 7300)) $rank) "protocol" "TCP") -}}
{{- $ports = append $ports (dict "name" (printf "lmc-alloc-%d" $rank) "containerPort" (add (int ($lmc.peerAllocPort | default 7400)) $rank) "protocol" "TCP") -}}
{{- end -}}
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
{{- $net := $spec.network | default dict -}}
{{- with $net.rdmaResource -}}
{{- /* RDMA NICs from a device plugin (e.g. rdma/ib or rdma/hca_shared_devices_a). */ -}}
{{- $_ := set $requests . (toString ($net.rdmaCount | default 1)) -}}
{{- $_ := set $limits . (toString ($net.rdmaCount | default 1)) -}}
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

{{/* "true" when some pool uses P2pNcclConnector (its engines register with the router over ZMQ). */}}
{{- define "pd-stack.usesP2pNccl" -}}
{{- range .Values.servingEngineSpec.modelSpec -}}
{{- if and .kvTransfer (eq .kvTransfer.connector "P2pNcclConnector") -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when routerSpec.type is vllm-router (the default is the production-stack router). */}}
{{- define "pd-stack.isVllmRouter" -}}
{{- if eq (.Values.routerSpec.type | default "production-stack") "vllm-router" -}}true{{- end -}}
{{- end -}}

{{/* "true" when the router watches pods through the Kubernetes API (and so needs RBAC). */}}
{{- define "pd-stack.routerUsesKubeAPI" -}}
{{- if not (include "pd-stack.isVllmRouter" .) -}}true
{{- else if eq (dig "serviceDiscovery" "k8s" (.Values.routerSpec.vllmRouter | default dict)) "k8s" -}}true
{{- end -}}
{{- end -}}

{{/*
Arguments of the production-stack router (src/vllm_router/parsers/parser.py): Kubernetes
discovery of this release's engine pods, then routing and stats settings, then extraArgs.
*/}}
{{- define "pd-stack.productionStackRouterArgs" -}}
{{- $router := .Values.routerSpec -}}
{{- $args := list "--host" "0.0.0.0" "--port" (toString $router.containerPort) -}}
{{- $args = concat $args (list "--service-discovery" "k8s" "--k8s-namespace" .Release.Namespace) -}}
{{- $args = concat $args (list "--k8s-label-selector" (include "pd-stack.engineSelectorString" .)) -}}
{{- $args = concat $args (list "--k8s-port" (toString .Values.servingEngineSpec.containerPort)) -}}
{{- with $router.k8sServiceDiscoveryType -}}
{{- $args = concat $args (list "--k8s-service-discovery-type" .) -}}
{{- end -}}
{{- $args = concat $args (list "--routing-logic" $router.routingLogic) -}}
{{- with $router.sessionKey -}}
{{- $args = concat $args (list "--session-key" .) -}}
{{- end -}}
{{- $args = concat $args (list "--engine-stats-interval" (toString $router.engineScrapeInterval)) -}}
{{- $args = concat $args (list "--request-stats-window" (toString $router.requestStatsWindow)) -}}
{{- toYaml (concat $args ($router.extraArgs | default list)) -}}
{{- end -}}

{{/*
Arguments of vllm-router (vllm-project/router, PyPI vllm-router; flags of its
py_src/vllm_router/router_args.py, checked by the tests against the real 0.1.17 parser).
PD mode: --vllm-pd-disaggregation, then either Kubernetes discovery by the pd-stack.io/role pod
label or static --prefill URL [BOOTSTRAP_PORT] / --decode URL lists (default: the pools' Services).
*/}}
{{- define "pd-stack.vllmRouterArgs" -}}
{{- $router := .Values.routerSpec -}}
{{- $vr := $router.vllmRouter | default dict -}}
{{- $engine := .Values.servingEngineSpec -}}
{{- $args := list "--host" "0.0.0.0" "--port" (toString $router.containerPort) "--vllm-pd-disaggregation" -}}
{{- $mode := $vr.serviceDiscovery | default "k8s" -}}
{{- $connectors := list -}}
{{- range $engine.modelSpec -}}{{- with .kvTransfer -}}{{- $connectors = append $connectors .connector -}}{{- end -}}{{- end -}}
{{- $defaultKv := ternary "mooncake" "nixl" (has "MooncakeConnector" $connectors) -}}
{{- $kvConnector := $vr.kvConnector | default $defaultKv -}}
{{- if and (has "MooncakeConnector" $connectors) (ne $kvConnector "mooncake") -}}
{{- fail "routerSpec.vllmRouter.kvConnector must be mooncake: the engine pools use MooncakeConnector" -}}
{{- end -}}
{{- if and (eq $kvConnector "mooncake") (not (has "MooncakeConnector" $connectors)) -}}
{{- fail "routerSpec.vllmRouter.kvConnector is mooncake but no engine pool uses kvTransfer.connector MooncakeConnector" -}}
{{- end -}}
{{- range $c := list "LMCacheConnectorV1" "PyNcclConnector" -}}
{{- if has $c $connectors -}}
{{- fail (printf "routerSpec.type vllm-router cannot route %s pools: vllm-router speaks the NIXL, Mooncake and P2pNccl PD protocols; use routerSpec.type production-stack or NixlConnector" $c) -}}
{{- end -}}
{{- end -}}
{{- if $engine.enableEngine -}}
{{- range $engine.modelSpec -}}
{{- if .lmcacheConfig -}}{{- if .lmcacheConfig.enabled -}}
{{- fail "routerSpec.type vllm-router cannot route the tutorial's LMCache pools (lmcacheConfig); use routerSpec.type production-stack" -}}
{{- end -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if eq $mode "k8s" -}}
{{- $sel := printf "app.kubernetes.io/instance=%s" .Release.Name -}}
{{- $args = concat $args (list "--service-discovery" "--service-discovery-namespace" .Release.Namespace "--service-discovery-port" (toString $engine.containerPort)) -}}
{{- $args = concat $args (list "--prefill-selector" $sel "app.kubernetes.io/component=serving-engine" "pd-stack.io/role=prefill") -}}
{{- $args = concat $args (list "--decode-selector" $sel "app.kubernetes.io/component=serving-engine" "pd-stack.io/role=decode") -}}
{{- else -}}
{{- $prefill := $vr.prefillUrls | default list -}}
{{- $decode := $vr.decodeUrls | default list -}}
{{- if and (not $prefill) $engine.enableEngine -}}
{{- range $spec := $engine.modelSpec -}}
{{- $ctx := dict "root" $ "spec" $spec -}}
{{- if eq (include "pd-stack.poolRole" $ctx) "prefill" -}}
{{- $entry := dict "url" (printf "http://%s:%d" (include "pd-stack.poolServiceName" $ctx) (int $engine.servicePort)) -}}
{{- if and $spec.kvTransfer (eq $spec.kvTransfer.connector "MooncakeConnector") -}}
{{- $_ := set $entry "bootstrapPort" ($spec.kvTransfer.bootstrapPort | default 8998) -}}
{{- end -}}
{{- $prefill = append $prefill $entry -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (not $decode) $engine.enableEngine -}}
{{- range $spec := $engine.modelSpec -}}
{{- $ctx := dict "root" $ "spec" $spec -}}
{{- if eq (include "pd-stack.poolRole" $ctx) "decode" -}}
{{- $decode = append $decode (printf "http://%s:%d" (include "pd-stack.poolServiceName" $ctx) (int $engine.servicePort)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if or (not $prefill) (not $decode) -}}
{{- fail "routerSpec.vllmRouter.serviceDiscovery static needs at least one prefill and one decode URL: set routerSpec.vllmRouter.prefillUrls/decodeUrls or add pools with role prefill and decode" -}}
{{- end -}}
{{- range $prefill -}}
{{- $args = concat $args (list "--prefill" .url) -}}
{{- if .bootstrapPort -}}{{- $args = append $args (toString .bootstrapPort) -}}{{- end -}}
{{- end -}}
{{- range $decode -}}{{- $args = concat $args (list "--decode" .) -}}{{- end -}}
{{- end -}}
{{- $args = concat $args (list "--kv-connector" $kvConnector) -}}
{{- if include "pd-stack.usesP2pNccl" . -}}
{{- /* P2pNccl engines register over ZMQ (proxy_ip:proxy_port in their extra config). */ -}}
{{- $args = concat $args (list "--vllm-discovery-address" (printf "0.0.0.0:%d" (int ($vr.discoveryPort | default 30001)))) -}}
{{- end -}}
{{- $args = concat $args (list "--policy" ($vr.policy | default "cache_aware")) -}}
{{- with $vr.prefillPolicy -}}{{- $args = concat $args (list "--prefill-policy" .) -}}{{- end -}}
{{- with $vr.decodePolicy -}}{{- $args = concat $args (list "--decode-policy" .) -}}{{- end -}}
{{- $args = concat $args (list "--prometheus-host" "0.0.0.0" "--prometheus-port" (toString ($vr.metricsPort | default 29000))) -}}
{{- $args = concat $args ($router.extraArgs | default list) -}}
{{- toYaml $args -}}
{{- end -}}
