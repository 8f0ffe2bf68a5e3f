{{/*
LMCacheConnectorV1 with LMCache >= 0.3.7 (files/connectors.yaml). Sources: LMCache
examples/disagg_prefill (1p1d, xpyd) for the extra config: a per-instance RPC socket name
(lmcache_rpc_port, a name and not a TCP port), partial chunks kept, and the receiver skipping the
last token, which the LMCache proxy appends itself; lmcache/v1/config.py for the pd_* keys, set as
LMCACHE_<KEY> env, which overrides any config file (update_config_from_env); lists are
comma-separated.
*/}}
{{- define "pd-stack.connector.lmcache.config" -}}
{{- $extra := dict "discard_partial_chunks" false "lmcache_rpc_port" .spec.name -}}
{{- if eq .kvRole "kv_consumer" -}}{{- $_ := set $extra "skip_last_n_tokens" 1 -}}{{- end -}}
{{- toJson (dict "kv_connector_extra_config" $extra) -}}
{{- end -}}

{{- define "pd-stack.connector.lmcache.env" -}}
{{- $lmc := .kt.lmcache | default dict -}}
{{- /* PYTHONHASHSEED, which LMCache's chunk hashes need equal on every engine, is every
       engine's (servingEngineSpec.pythonHashSeed). */ -}}
{{- $env := list (dict "name" "LMCACHE_LOCAL_CPU" "value" "False") -}}
{{- $env = append $env (dict "name" "LMCACHE_MAX_LOCAL_CPU_SIZE" "value" "0") -}}
{{- $env = append $env (dict "name" "LMCACHE_ENABLE_PD" "value" "True") -}}
{{- $env = append $env (dict "name" "LMCACHE_TRANSFER_CHANNEL" "value" "nixl") -}}
{{- $env = append $env (dict "name" "LMCACHE_NIXL_BACKENDS" "value" (join "," ($lmc.nixlBackends | default (list "UCX")))) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_ROLE" "value" (ternary "sender" "receiver" (eq .kvRole "kv_producer"))) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_BUFFER_SIZE" "value" (include "pd-stack.lmcacheBufferSize" .kt)) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_BUFFER_DEVICE" "value" (.kt.kvBufferDevice | default "cuda")) -}}
{{- /* vLLM's Model Runner V1: on vLLM 0.26's default V2 runner a decode step replayed as a full CUDA
       graph calls the connector's start_load_kv without attention metadata, and LMCache's adapter
       then loads nothing (benchmarks/records/lmcache-h200-1gpu-leak.json; with 0 it loaded:
       lmcache-h200-1gpu-v1runner.json). LMCache's own PD CI sets it on both roles (LMCache v0.5.6
       .buildkite/configs/pd.yaml, citing vllm-project/vllm#43458); a vLLM without a V2 runner
       ignores it. The pool's env can set it again. */ -}}
{{- $env = append $env (dict "name" "VLLM_USE_V2_MODEL_RUNNER" "value" "0") -}}
{{- if eq .kvRole "kv_producer" -}}
{{- /* kvTransfer.lmcache.proxyHost/proxyPort, else, when the chart deploys the LMCache proxy
       (routerSpec.type lmcache-proxy), the router Service and the proxy's notify port. */ -}}
{{- $deployed := eq (include "pd-stack.isLMCacheProxy" .root) "true" -}}
{{- $host := $lmc.proxyHost | default (ternary (include "pd-stack.routerServiceName" .root) "" $deployed) -}}
{{- $port := int ($lmc.proxyPort | default (include "pd-stack.lmcacheProxyNotifyPort" .root)) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_PROXY_HOST" "value" $host) -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_PROXY_PORT" "value" (include "pd-stack.int" (dict "key" "kvTransfer.lmcache.proxyPort" "value" $port))) -}}
{{- else -}}
{{- $env = append $env (dict "name" "LMCACHE_PD_PEER_HOST" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.podIP"))) -}}
{{- $ports := include "pd-stack.connectorPorts" . | fromYamlArray -}}
{{- range $pair := list (list "LMCACHE_PD_PEER_INIT_PORT" "lmc-init") (list "LMCACHE_PD_PEER_ALLOC_PORT" "lmc-alloc") -}}
{{- $list := list -}}
{{- range $ports -}}{{- if eq .base (last $pair) -}}{{- $list = append $list (include "pd-stack.int" (dict "key" (printf "kvTransfer's %s port" .base) "value" .containerPort)) -}}{{- end -}}{{- end -}}
{{- $env = append $env (dict "name" (first $pair) "value" (join "," $list)) -}}
{{- end -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/* A pool's LMCache PD buffer in bytes (pd_buffer_size), from its kvTransfer (.): kvBufferSize, else
1 GiB. */}}
{{- define "pd-stack.lmcacheBufferSize" -}}
{{- toString (int64 (.kvBufferSize | default 1073741824)) -}}
{{- end -}}
