{{/*
The PD tutorial's LMCache form (modelSpec[].lmcacheConfig; files/connectors.yaml
tutorialLMCache): LMCacheConnectorV1 of May 2025 with the pool's kvRole. With enablePD, the
extra config names the scheduler-worker RPC socket (lmcache_rpc_port, a name and not a TCP port;
LMCache examples/disagg_prefill use "producer1"/"consumer1") and keeps partial chunks
(discard_partial_chunks: false), as LMCache's own PD examples do.
*/}}
{{- define "pd-stack.connector.tutorial-lmcache.config" -}}
{{- $config := dict -}}
{{- if .kt.enablePD -}}
{{- $_ := set $config "kv_connector_extra_config" (dict "discard_partial_chunks" false "lmcache_rpc_port" .spec.name) -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{/*
LMCache 0.2.x/0.3.0 env (lmcache/v1/config.py of that date). With enableNixl, NIXL PD: NIXL
requires local_cpu false, max_local_cpu_size 0 and no remote serde; the receiver listens on
nixl_receiver_port + TP rank and the sender connects to nixl_receiver_host.
*/}}
{{- define "pd-stack.connector.tutorial-lmcache.env" -}}
{{- $lm := .kt -}}
{{- $at := printf "%s.lmcacheConfig." (include "pd-stack.poolPath" .) -}}
{{- $env := list (dict "name" "LMCACHE_USE_EXPERIMENTAL" "value" "True") -}}
{{- /* production-stack's: vLLM's engine-core RPC waits up to 1000 s (LMCache's first
       transfers and lookups can outlast vLLM's default of 10 s). */ -}}
{{- $env = append $env (dict "name" "VLLM_RPC_TIMEOUT" "value" "1000000") -}}
{{- $env = append $env (dict "name" "LMCACHE_LOG_LEVEL" "value" ($lm.logLevel | default "INFO")) -}}
{{- if $lm.enableNixl -}}
{{- $env = append $env (dict "name" "LMCACHE_LOCAL_CPU" "value" "False") -}}
{{- $env = append $env (dict "name" "LMCACHE_MAX_LOCAL_CPU_SIZE" "value" "0") -}}
{{- $env = append $env (dict "name" "LMCACHE_REMOTE_SERDE" "value" "NULL") -}}
{{- $env = append $env (dict "name" "LMCACHE_ENABLE_NIXL" "value" "True") -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_ROLE" "value" $lm.nixlRole) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_RECEIVER_HOST" "value" $lm.nixlPeerHost) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_RECEIVER_PORT" "value" (include "pd-stack.int" (dict "key" (print $at "nixlPeerPort") "value" $lm.nixlPeerPort))) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_BUFFER_SIZE" "value" (include "pd-stack.int" (dict "key" (print $at "nixlBufferSize") "value" ($lm.nixlBufferSize | default "1073741824")))) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_BUFFER_DEVICE" "value" ($lm.nixlBufferDevice | default "cuda")) -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_ENABLE_GC" "value" (ternary "True" "False" (default false $lm.nixlEnableGc))) -}}
{{- end -}}
{{- $env = concat $env (include "pd-stack.connector.tutorial-lmcache.cacheEnv" . | fromYamlArray) -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
production-stack's other lmcacheConfig keys, as env of the same names and values it renders
(its deployment-vllm-multi.yaml): CPU and disk offloading, LMCache's controller for KV-aware
routing (its URLs point at the router Service), P2P sharing. A positive cpuOffloadingBufferSize
turns local CPU offloading on, after (and so instead of) the NIXL path's LMCACHE_LOCAL_CPU=False.
*/}}
{{- define "pd-stack.connector.tutorial-lmcache.cacheEnv" -}}
{{- $lm := .kt -}}
{{- $at := printf "%s.lmcacheConfig." (include "pd-stack.poolPath" .) -}}
{{- /* Keys that take an integer or a comma-separated list of them (a string), as printed. */ -}}
{{- $lists := dict -}}
{{- range $key := list "cudaVisibleDevices" "workerPorts" "p2pInitPorts" -}}
{{- if hasKey $lm $key -}}
{{- $value := get $lm $key -}}
{{- if not (kindIs "string" $value) -}}{{- $value = include "pd-stack.int" (dict "key" (print $at $key) "value" $value) -}}{{- end -}}
{{- $_ := set $lists $key $value -}}
{{- end -}}
{{- end -}}
{{- $env := list -}}
{{- if and (hasKey $lm "cpuOffloadingBufferSize") (gt (float64 $lm.cpuOffloadingBufferSize) 0.0) -}}
{{- $env = append $env (dict "name" "LMCACHE_LOCAL_CPU" "value" "True") -}}
{{- $env = append $env (dict "name" "LMCACHE_MAX_LOCAL_CPU_SIZE" "value" (include "pd-stack.number" $lm.cpuOffloadingBufferSize)) -}}
{{- end -}}
{{- if hasKey $lm "diskOffloadingBufferSize" -}}
{{- $env = append $env (dict "name" "LMCACHE_MAX_LOCAL_DISK_SIZE" "value" (include "pd-stack.number" $lm.diskOffloadingBufferSize)) -}}
{{- end -}}
{{- if hasKey $lm "cudaVisibleDevices" -}}
{{- $env = append $env (dict "name" "CUDA_VISIBLE_DEVICES" "value" $lists.cudaVisibleDevices) -}}
{{- end -}}
{{- if hasKey $lm "enableController" -}}
{{- $env = append $env (dict "name" "LMCACHE_ENABLE_CONTROLLER" "value" (ternary "True" "False" $lm.enableController)) -}}
{{- end -}}
{{- /* Each engine registers with LMCache's controller and peers under its own id: instanceId,
       else the pod's name (production-stack's default). */ -}}
{{- if hasKey $lm "instanceId" -}}
{{- $env = append $env (dict "name" "LMCACHE_LMCACHE_INSTANCE_ID" "value" $lm.instanceId) -}}
{{- else -}}
{{- $env = append $env (dict "name" "LMCACHE_LMCACHE_INSTANCE_ID" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) -}}
{{- end -}}
{{- $router := include "pd-stack.routerServiceName" .root -}}
{{- range $key, $name := dict "controllerPort" "LMCACHE_CONTROLLER_PULL_URL" "controllerReplyPort" "LMCACHE_CONTROLLER_REPLY_URL" -}}
{{- if hasKey $lm $key -}}
{{- $env = append $env (dict "name" $name "value" (printf "%s:%s" $router (include "pd-stack.int" (dict "key" (print $at $key) "value" (get $lm $key))))) -}}
{{- end -}}
{{- end -}}
{{- range $key, $name := dict "workerPorts" "LMCACHE_LMCACHE_WORKER_PORTS" "p2pHost" "LMCACHE_P2P_HOST" "p2pInitPorts" "LMCACHE_P2P_INIT_PORTS" "workerHeartbeatTime" "LMCACHE_LMCACHE_WORKER_HEARTBEAT_TIME" -}}
{{- if hasKey $lm $key -}}
{{- $env = append $env (dict "name" $name "value" (include "pd-stack.number" (ternary (get $lists $key) (get $lm $key) (hasKey $lists $key)))) -}}
{{- end -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}
