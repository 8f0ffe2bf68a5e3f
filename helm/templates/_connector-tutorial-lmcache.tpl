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
{{- $env := list (dict "name" "LMCACHE_USE_EXPERIMENTAL" "value" "True") -}}
{{- $env = append $env (dict "name" "LMCACHE_LOG_LEVEL" "value" ($lm.logLevel | default "INFO")) -}}
{{- if $lm.enableNixl -}}
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
{{- toYaml $env -}}
{{- end -}}
