{{/*
PyNcclConnector (files/connectors.yaml). Source: vLLM V0 examples/offline_inference/
disaggregated_prefill.py: prefill kv_producer rank 0, decode kv_consumer rank 1,
kv_parallel_size 2. kv_ip and kv_port are the rank-0 (prefill) address: the prefill binds its own
pod IP ($(POD_IP), expanded by Kubernetes from the container env) and kvPort; the decode dials the
Service of its kvTransfer.peerPool, which forwards that pool's kv_port .. kv_port+2*TP-1.
*/}}
{{- define "pd-stack.connector.pynccl.config" -}}
{{- $producer := eq .kvRole "kv_producer" -}}
{{- $config := dict "kv_rank" (ternary 0 1 $producer) "kv_parallel_size" 2 -}}
{{- $prefill := ternary .spec (include "pd-stack.poolByName" (dict "root" .root "name" .kt.peerPool) | fromJson) $producer -}}
{{- $prefillCtx := dict "root" .root "spec" $prefill -}}
{{- $_ := set $config "kv_ip" (ternary "$(POD_IP)" (include "pd-stack.poolServiceName" $prefillCtx) $producer) -}}
{{- $_ := set $config "kv_port" (int (include "pd-stack.connectorPort" (dict "ctx" $prefillCtx "port" "pynccl"))) -}}
{{- with .kt.kvBufferSize -}}{{- $_ := set $config "kv_buffer_size" (float64 .) -}}{{- end -}}
{{- if hasKey .kt "kvBufferDevice" -}}{{- $_ := set $config "kv_buffer_device" .kt.kvBufferDevice -}}{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{/* The V0 KV connectors run only on the V0 engine. */}}
{{- define "pd-stack.connector.pynccl.env" -}}
{{- toYaml (list (dict "name" "VLLM_USE_V1" "value" "0")) -}}
{{- end -}}
