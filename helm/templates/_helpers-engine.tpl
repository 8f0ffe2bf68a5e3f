{{/* The engine container: arguments, env, ports, resources, probes (see _helpers.tpl). */}}

{{/* vllm executable: lmcache/vllm-openai images install vLLM in /opt/venv (as production-stack renders). */}}
{{- define "pd-stack.vllmExecutable" -}}
{{- if hasPrefix "lmcache/vllm-openai" .spec.repository -}}/opt/venv/bin/vllm{{- else -}}vllm{{- end -}}
{{- end -}}

{{/* The image's Python: /opt/venv/bin/python in lmcache/vllm-openai images (LMCache's
docker/Dockerfile installs vLLM and LMCache into the venv /opt/venv), else python3. */}}
{{- define "pd-stack.pythonExecutable" -}}
{{- if hasPrefix "lmcache/vllm-openai" (.spec.repository | default "") -}}/opt/venv/bin/python{{- else -}}python3{{- end -}}
{{- end -}}

{{/* Arguments of `vllm serve` for one pool, as a YAML list. */}}
{{- define "pd-stack.engineArgs" -}}
{{- $spec := .spec -}}
{{- $vllm := $spec.vllmConfig | default dict -}}
{{- $at := printf "%s.vllmConfig." (include "pd-stack.poolPath" .) -}}
{{- $args := list "serve" $spec.modelURL "--host" "0.0.0.0" "--port" (include "pd-stack.vllmPort" .) -}}
{{- if hasKey $vllm "maxModelLen" -}}{{- $args = concat $args (list "--max-model-len" (include "pd-stack.int" (dict "key" (print $at "maxModelLen") "value" $vllm.maxModelLen))) -}}{{- end -}}
{{- if hasKey $vllm "tensorParallelSize" -}}{{- $args = concat $args (list "--tensor-parallel-size" (include "pd-stack.int" (dict "key" (print $at "tensorParallelSize") "value" $vllm.tensorParallelSize))) -}}{{- end -}}
{{- if hasKey $vllm "gpuMemoryUtilization" -}}{{- $args = concat $args (list "--gpu-memory-utilization" (toString $vllm.gpuMemoryUtilization)) -}}{{- end -}}
{{- if hasKey $vllm "dtype" -}}{{- $args = concat $args (list "--dtype" $vllm.dtype) -}}{{- end -}}
{{- if hasKey $vllm "maxNumSeqs" -}}{{- $args = concat $args (list "--max-num-seqs" (include "pd-stack.int" (dict "key" (print $at "maxNumSeqs") "value" $vllm.maxNumSeqs))) -}}{{- end -}}
{{- if hasKey $vllm "enableChunkedPrefill" -}}
{{- $args = append $args (ternary "--enable-chunked-prefill" "--no-enable-chunked-prefill" $vllm.enableChunkedPrefill) -}}
{{- end -}}
{{- if hasKey $vllm "enablePrefixCaching" -}}
{{- $args = append $args (ternary "--enable-prefix-caching" "--no-enable-prefix-caching" $vllm.enablePrefixCaching) -}}
{{- end -}}
{{- /* Flags below appear only when their key is set, so the tutorial's command is unchanged. Names are
       vLLM's EngineArgs CLI (vllm/engine/arg_utils.py): --pipeline-parallel-size, --data-parallel-size,
       --kv-cache-dtype, --block-size, --enforce-eager, --disable-hybrid-kv-cache-manager. */ -}}
{{- if hasKey $vllm "pipelineParallelSize" -}}{{- $args = concat $args (list "--pipeline-parallel-size" (include "pd-stack.int" (dict "key" (print $at "pipelineParallelSize") "value" $vllm.pipelineParallelSize))) -}}{{- end -}}
{{- if hasKey $vllm "dataParallelSize" -}}{{- $args = concat $args (list "--data-parallel-size" (include "pd-stack.int" (dict "key" (print $at "dataParallelSize") "value" $vllm.dataParallelSize))) -}}{{- end -}}
{{- if hasKey $vllm "kvCacheDtype" -}}{{- $args = concat $args (list "--kv-cache-dtype" $vllm.kvCacheDtype) -}}{{- end -}}
{{- if hasKey $vllm "blockSize" -}}{{- $args = concat $args (list "--block-size" (include "pd-stack.int" (dict "key" (print $at "blockSize") "value" $vllm.blockSize))) -}}{{- end -}}
{{- if $vllm.enforceEager -}}{{- $args = append $args "--enforce-eager" -}}{{- end -}}
{{- if $vllm.disableHybridKvCacheManager -}}{{- $args = append $args "--disable-hybrid-kv-cache-manager" -}}{{- end -}}
{{- /* MoE experts sharded over the TP x DP ranks (wide EP with DP over nodes); vLLM 0.33
       arg_utils.py --enable-expert-parallel. */ -}}
{{- if $vllm.enableExpertParallel -}}{{- $args = append $args "--enable-expert-parallel" -}}{{- end -}}
{{- /* production-stack's model keys; vLLM 0.33 EngineArgs and the OpenAI server's FrontendArgs
       (vllm/entrypoints/common/cli_args.py) name the flags. */ -}}
{{- if $spec.enableLoRA -}}{{- $args = append $args "--enable-lora" -}}{{- end -}}
{{- if hasKey $vllm "maxLoras" -}}{{- $args = concat $args (list "--max-loras" (include "pd-stack.int" (dict "key" (print $at "maxLoras") "value" $vllm.maxLoras))) -}}{{- end -}}
{{- if $spec.enableTool -}}{{- $args = append $args "--enable-auto-tool-choice" -}}{{- end -}}
{{- with $spec.toolCallParser -}}{{- $args = concat $args (list "--tool-call-parser" .) -}}{{- end -}}
{{- with $vllm.runner -}}{{- $args = concat $args (list "--runner" .) -}}{{- end -}}
{{- with $vllm.convert -}}{{- $args = concat $args (list "--convert" .) -}}{{- end -}}
{{- with $spec.modelRevision -}}{{- $args = concat $args (list "--revision" .) -}}{{- end -}}
{{- with $spec.chatTemplate -}}{{- $args = concat $args (list "--chat-template" (printf "/templates/%s" .)) -}}{{- end -}}
{{- $kv := include "pd-stack.kvTransferConfig" . -}}
{{- if $kv -}}{{- $args = concat $args (list "--kv-transfer-config" $kv) -}}{{- end -}}
{{- /* OpenTelemetry (servingEngineSpec.tracing): vLLM's ObservabilityConfig flags (vLLM 0.26.0 and
       0.33.0 vllm/engine/arg_utils.py); several detailed modules go comma-separated. */ -}}
{{- $tracing := .root.Values.servingEngineSpec.tracing | default dict -}}
{{- if $tracing.enabled -}}
{{- $args = concat $args (list "--otlp-traces-endpoint" $tracing.endpoint) -}}
{{- with $tracing.detailed -}}{{- $args = concat $args (list "--collect-detailed-traces" (join "," .)) -}}{{- end -}}
{{- end -}}
{{- $args = concat $args ($vllm.extraArgs | default list) -}}
{{- toYaml $args -}}
{{- end -}}

{{/*
Env of one engine container, as a YAML list: the chart's entries (the pool's KV connector's from
its fragment), then the user's (servingEngineSpec.env, then modelSpec.env). A later entry replaces
an earlier one of the same name, so no name appears twice (server-side apply in Helm 4 rejects
duplicate env names) and users can override UCX_* and LMCACHE_*.
*/}}
{{- define "pd-stack.engineEnv" -}}
{{- $spec := .spec -}}
{{- $vllm := $spec.vllmConfig | default dict -}}
{{- $env := list -}}
{{- with .root.Values.servingEngineSpec.pythonHashSeed -}}
{{- $env = append $env (dict "name" "PYTHONHASHSEED" "value" .) -}}
{{- end -}}
{{- $env = append $env (dict "name" "HF_HOME" "value" "/data") -}}
{{- $env = append $env (dict "name" "POD_IP" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.podIP"))) -}}
{{- if include "pd-stack.hfTokenRef" . | fromJson -}}
{{- /* The token is a file of a Secret volume (pd-stack.hfTokenDir), not env. */ -}}
{{- $env = concat $env (include "pd-stack.hfTokenEnv" . | fromYamlArray) -}}
{{- end -}}
{{- with include "pd-stack.engineApiKeyRef" .root | fromJson -}}
{{- $env = append $env (dict "name" "VLLM_API_KEY" "valueFrom" (dict "secretKeyRef" .)) -}}
{{- end -}}
{{- if hasKey $vllm "v1" -}}
{{- $env = append $env (dict "name" "VLLM_USE_V1" "value" (toString $vllm.v1)) -}}
{{- end -}}
{{- if eq (toString ($vllm.v0 | default "")) "1" -}}
{{- $env = append $env (dict "name" "VLLM_USE_V1" "value" "0") -}}
{{- end -}}
{{- if include "pd-stack.isLlmd" .root -}}
{{- /* The llm-d sidecar keeps connections to prefill and decode vLLM idle up to 90 s (Go's
       default); vLLM's keep-alive (5 s) would reset them: llm-d's P/D guide sets 120. */ -}}
{{- $env = append $env (dict "name" "VLLM_HTTP_TIMEOUT_KEEP_ALIVE" "value" "120") -}}
{{- end -}}
{{- with include "pd-stack.prometheusMultiprocDir" . -}}
{{- $env = append $env (dict "name" "PROMETHEUS_MULTIPROC_DIR" "value" .) -}}
{{- end -}}
{{- $tracing := .root.Values.servingEngineSpec.tracing | default dict -}}
{{- if $tracing.enabled -}}
{{- /* The OpenTelemetry SDK reads both (vLLM 0.26.0 vllm/tracing/otel.py: Resource.create,
       get_span_exporter). */ -}}
{{- $env = append $env (dict "name" "OTEL_SERVICE_NAME" "value" (printf "%s-%s" .root.Release.Name $spec.name)) -}}
{{- $env = append $env (dict "name" "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" "value" ($tracing.protocol | default "grpc")) -}}
{{- end -}}
{{- $env = concat $env (include "pd-stack.kvTransferEnv" . | fromYamlArray) -}}
{{- $net := $spec.network | default dict -}}
{{- /* UCX transports and devices (NIXL and LMCache-over-NIXL use UCX; NCCL_* do not apply). */ -}}
{{- with $net.ucxTls -}}{{- $env = append $env (dict "name" "UCX_TLS" "value" .) -}}{{- end -}}
{{- with $net.ucxNetDevices -}}{{- $env = append $env (dict "name" "UCX_NET_DEVICES" "value" .) -}}{{- end -}}
{{- $env = concat $env (.root.Values.servingEngineSpec.env | default list) ($spec.env | default list) -}}
{{- $merged := list -}}
{{- range $i, $entry := $env -}}
{{- $later := false -}}
{{- range (slice $env (add1 $i)) -}}{{- if eq .name $entry.name -}}{{- $later = true -}}{{- end -}}{{- end -}}
{{- if not $later -}}{{- $merged = append $merged $entry -}}{{- end -}}
{{- end -}}
{{- toYaml $merged -}}
{{- end -}}

{{/*
The engine's PROMETHEUS_MULTIPROC_DIR (ctx: root, spec), "" for none: vllmConfig.prometheusMultiprocDir
when set ("" turns it off), else the pool's connector's (files/connectors.yaml
prometheusMultiprocDir: LMCache's). The pod mounts an emptyDir there (pd-stack.prometheusMultiprocMount),
so the folder exists, starts empty and is the pod's own, as prometheus_client's multiprocess mode
needs.
*/}}
{{- define "pd-stack.prometheusMultiprocDir" -}}
{{- $vllm := .spec.vllmConfig | default dict -}}
{{- if hasKey $vllm "prometheusMultiprocDir" -}}
{{- $vllm.prometheusMultiprocDir | default "" -}}
{{- else -}}
{{- (include "pd-stack.poolConnector" . | fromJson).prometheusMultiprocDir | default "" -}}
{{- end -}}
{{- end -}}

{{/* Whether the chart mounts an emptyDir at the engine's PROMETHEUS_MULTIPROC_DIR ("true" or ""):
where there is one, unless the pool's extraVolumeMounts mount a volume of their own there. */}}
{{- define "pd-stack.prometheusMultiprocMount" -}}
{{- with include "pd-stack.prometheusMultiprocDir" . -}}
{{- $dir := . -}}
{{- $own := false -}}
{{- range $.spec.extraVolumeMounts | default list -}}{{- if eq (toString .mountPath) $dir -}}{{- $own = true -}}{{- end -}}{{- end -}}
{{- if not $own -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* Ports the engine container listens on, as a YAML list: HTTP, then the connector's listeners. */}}
{{- define "pd-stack.enginePorts" -}}
{{- $ports := list (dict "name" "http" "containerPort" (int .root.Values.servingEngineSpec.containerPort) "protocol" "TCP") -}}
{{- range include "pd-stack.connectorPorts" . | fromYamlArray -}}
{{- $ports = append $ports (dict "name" .name "containerPort" .containerPort "protocol" "TCP") -}}
{{- end -}}
{{- toYaml $ports -}}
{{- end -}}

{{/* Resources of one engine container. GPU limits equal requests (extended resources cannot overcommit). */}}
{{- define "pd-stack.engineResources" -}}
{{- $spec := .spec -}}
{{- $at := printf "%s." (include "pd-stack.poolPath" .) -}}
{{- $requests := dict -}}
{{- $limits := dict -}}
{{- if hasKey $spec "requestCPU" -}}{{- $_ := set $requests "cpu" (include "pd-stack.number" $spec.requestCPU) -}}{{- end -}}
{{- if hasKey $spec "requestMemory" -}}{{- $_ := set $requests "memory" $spec.requestMemory -}}{{- end -}}
{{- if hasKey $spec "limitCPU" -}}{{- $_ := set $limits "cpu" (include "pd-stack.number" $spec.limitCPU) -}}{{- end -}}
{{- if hasKey $spec "limitMemory" -}}{{- $_ := set $limits "memory" $spec.limitMemory -}}{{- end -}}
{{- /* servingEngineSpec.limitsFromRequests: a CPU or memory request without a limit is the limit
       too, so the pod is Guaranteed QoS (values.yaml says why). */ -}}
{{- if ne (toString (dig "limitsFromRequests" true .root.Values.servingEngineSpec)) "false" -}}
{{- range $resource := list "cpu" "memory" -}}
{{- if and (hasKey $requests $resource) (not (hasKey $limits $resource)) -}}{{- $_ := set $limits $resource (get $requests $resource) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $gpus := include "pd-stack.int" (dict "key" (print $at "requestGPU") "value" ($spec.requestGPU | default 0)) -}}
{{- if gt (int $gpus) 0 -}}
{{- $gpuType := $spec.requestGPUType | default "nvidia.com/gpu" -}}
{{- $_ := set $requests $gpuType $gpus -}}
{{- $_ := set $limits $gpuType $gpus -}}
{{- end -}}
{{- /* HAMi GPU sharing (production-stack's request/limitGPUMem, ...MemPercentage, ...Cores). */ -}}
{{- range $key, $resource := dict "GPUMem" "nvidia.com/gpumem" "GPUMemPercentage" "nvidia.com/gpumem-percentage" "GPUCores" "nvidia.com/gpucores" -}}
{{- range $kind, $into := dict "request" $requests "limit" $limits -}}
{{- $name := print $kind $key -}}
{{- if hasKey $spec $name -}}{{- $_ := set $into $resource (include "pd-stack.int" (dict "key" (print $at $name) "value" (get $spec $name))) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $net := $spec.network | default dict -}}
{{- with $net.rdmaResource -}}
{{- /* RDMA NICs from a device plugin (e.g. rdma/ib or rdma/hca_shared_devices_a). */ -}}
{{- $count := include "pd-stack.int" (dict "key" (print $at "network.rdmaCount") "value" ($net.rdmaCount | default 1)) -}}
{{- $_ := set $requests . $count -}}
{{- $_ := set $limits . $count -}}
{{- end -}}
{{- $resources := dict -}}
{{- if $requests -}}{{- $_ := set $resources "requests" $requests -}}{{- end -}}
{{- if $limits -}}{{- $_ := set $resources "limits" $limits -}}{{- end -}}
{{- toYaml $resources -}}
{{- end -}}

{{/* The Secret key of the engines' API key (servingEngineSpec.vllmApiKey), as JSON {name, key},
or {} for none: a string is stored in <release>-secrets under vllmApiKey (secret.yaml); a map
names an existing Secret, or none when its names are "" (production-stack's default). */}}
{{- define "pd-stack.engineApiKeyRef" -}}
{{- $key := .Values.servingEngineSpec.vllmApiKey -}}
{{- $ref := dict -}}
{{- if and $key (kindIs "string" $key) -}}
{{- $ref = dict "name" (include "pd-stack.secretName" .) "key" "vllmApiKey" -}}
{{- else if and (kindIs "map" $key) (dig "secretName" "" ($key | default dict)) -}}
{{- $ref = dict "name" $key.secretName "key" $key.secretKey -}}
{{- end -}}
{{- toJson $ref -}}
{{- end -}}

{{/* An httpGet probe on /health of the engine port, with the timings given. */}}
{{- define "pd-stack.healthProbe" -}}
{{- $port := ternary .port (dig "httpGet" "port" .port .timings) (eq (toString .force) "true") -}}
httpGet:
  path: {{ dig "httpGet" "path" "/health" .timings }}
  port: {{ if kindIs "string" $port }}{{ $port }}{{ else }}{{ include "pd-stack.int" (dict "key" "the probe's httpGet.port" "value" $port) }}{{ end }}
{{ toYaml (omit .timings "httpGet") }}
{{- end -}}

{{/* Tolerations of one pool's pods, as a YAML list: servingEngineSpec.tolerations, then the
pool's own (tolerationsPolicy append), or only the pool's when it has any (override). */}}
{{- define "pd-stack.poolTolerations" -}}
{{- $shared := .root.Values.servingEngineSpec.tolerations | default list -}}
{{- $own := .spec.tolerations | default list -}}
{{- if and $own (eq (.spec.tolerationsPolicy | default "append") "override") -}}
{{- toYaml $own -}}
{{- else -}}
{{- toYaml (concat $shared $own) -}}
{{- end -}}
{{- end -}}

{{/* envFrom of one engine container, as a YAML list: servingEngineSpec.configs' ConfigMap and
the pool's envFromSecret. */}}
{{- define "pd-stack.engineEnvFrom" -}}
{{- $from := list -}}
{{- if .root.Values.servingEngineSpec.configs -}}
{{- $from = append $from (dict "configMapRef" (dict "name" (include "pd-stack.engineConfigsName" .root))) -}}
{{- end -}}
{{- with .spec.envFromSecret -}}
{{- $from = append $from (dict "secretRef" (dict "name" .name)) -}}
{{- end -}}
{{- toYaml $from -}}
{{- end -}}

{{/* The pool's initContainer (modelSpec.initContainer, production-stack's form) as a one-item
YAML list: env RELEASE_NAME then its own, envFromSecret, and the pool's /data volume when
mountPvcStorage is true. With the pool's hf_token it reads the token as the engine does (a file
named by HF_TOKEN_PATH), so that it may download a gated model. */}}
{{- define "pd-stack.engineInitContainer" -}}
{{- $init := .spec.initContainer -}}
{{- $container := dict "name" $init.name "image" $init.image -}}
{{- with $init.command -}}{{- $_ := set $container "command" . -}}{{- end -}}
{{- with $init.args -}}{{- $_ := set $container "args" . -}}{{- end -}}
{{- $env := list (dict "name" "RELEASE_NAME" "value" .root.Release.Name) -}}
{{- $token := include "pd-stack.hfTokenRef" . | fromJson -}}
{{- if $token -}}{{- $env = concat $env (include "pd-stack.hfTokenEnv" . | fromYamlArray) -}}{{- end -}}
{{- $_ := set $container "env" (concat $env ($init.env | default list)) -}}
{{- with .spec.envFromSecret -}}{{- $_ := set $container "envFrom" (list (dict "secretRef" (dict "name" .name))) -}}{{- end -}}
{{- with $init.resources -}}{{- $_ := set $container "resources" . -}}{{- end -}}
{{- $mounts := list -}}
{{- if and $init.mountPvcStorage .spec.pvcStorage -}}{{- $mounts = append $mounts (dict "name" "hf-cache" "mountPath" "/data") -}}{{- end -}}
{{- if $token -}}{{- $mounts = append $mounts (dict "name" "hf-token" "mountPath" (include "pd-stack.hfTokenDir" .) "readOnly" true) -}}{{- end -}}
{{- $mounts = concat $mounts ($init.extraVolumeMounts | default list) -}}
{{- with $mounts -}}{{- $_ := set $container "volumeMounts" . -}}{{- end -}}
{{- with .root.Values.servingEngineSpec.containerSecurityContext -}}{{- $_ := set $container "securityContext" . -}}{{- end -}}
{{- toYaml (list $container) -}}
{{- end -}}
