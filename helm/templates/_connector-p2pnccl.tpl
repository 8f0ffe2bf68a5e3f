{{/*
P2pNcclConnector (files/connectors.yaml). Sources: vLLM
examples/online_serving/disaggregated_serving_p2p_nccl_xpyd and p2p_nccl_engine.py: ZMQ on
<VLLM_HOST_IP>:kv_port+rank; registration with the proxy (here vllm-router's
--vllm-discovery-address) at proxy_ip:proxy_port; http_port must equal --port. Extra-config
values are strings as in the upstream example (nccl_num_channels is written into NCCL_* env).
*/}}
{{- define "pd-stack.connector.p2pnccl.config" -}}
{{- $p2p := .kt.p2pNccl | default dict -}}
{{- $vr := .root.Values.routerSpec.vllmRouter | default dict -}}
{{- $config := dict "kv_port" (int (include "pd-stack.connectorPort" (dict "ctx" . "port" "p2p-zmq"))) -}}
{{- $_ := set $config "kv_buffer_size" (float64 (.kt.kvBufferSize | default (ternary 1 8e9 (eq .kvRole "kv_producer")))) -}}
{{- if hasKey .kt "kvBufferDevice" -}}{{- $_ := set $config "kv_buffer_device" .kt.kvBufferDevice -}}{{- end -}}
{{- $extra := dict "proxy_ip" ($p2p.proxyHost | default (include "pd-stack.routerServiceName" .root)) -}}
{{- $at := printf "%s.kvTransfer.p2pNccl." (include "pd-stack.poolPath" .) -}}
{{- $proxyPort := dict "key" (print $at "proxyPort") "value" $p2p.proxyPort -}}
{{- if not $p2p.proxyPort -}}{{- $proxyPort = dict "key" "routerSpec.vllmRouter.discoveryPort" "value" ($vr.discoveryPort | default 30001) -}}{{- end -}}
{{- $_ := set $extra "proxy_port" (include "pd-stack.int" $proxyPort) -}}
{{- $_ := set $extra "http_port" (include "pd-stack.int" (dict "key" "servingEngineSpec.containerPort" "value" .root.Values.servingEngineSpec.containerPort)) -}}
{{- $_ := set $extra "send_type" ($p2p.sendType | default "PUT_ASYNC") -}}
{{- $_ := set $extra "nccl_num_channels" (include "pd-stack.int" (dict "key" (print $at "ncclNumChannels") "value" ($p2p.ncclNumChannels | default 16))) -}}
{{- $_ := set $config "kv_connector_extra_config" $extra -}}
{{- toJson $config -}}
{{- end -}}

{{/* P2pNccl binds to vLLM's get_ip() (VLLM_HOST_IP). Request-id randomisation (vLLM PR #27987,
v0.14.0) breaks P2pNccl; PR #34415 added the switch, rendered unless the image is known older. */}}
{{- define "pd-stack.connector.p2pnccl.env" -}}
{{- $env := list (dict "name" "VLLM_HOST_IP" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.podIP"))) -}}
{{- if not (include "pd-stack.vllmViolates" (dict "ctx" . "c" ">=0.14.0")) -}}
{{- $env = append $env (dict "name" "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION" "value" "1") -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}
