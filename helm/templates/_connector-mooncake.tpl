{{/*
MooncakeConnector (files/connectors.yaml). Source: vLLM docs/features/mooncake_connector_usage.md:
extra config mooncake_protocol (rdma) and device_name (RDMA devices, e.g. mlx5_0,mlx5_1); the
bootstrap server runs on the prefill side only, at VLLM_MOONCAKE_BOOTSTRAP_PORT.
*/}}
{{- define "pd-stack.connector.mooncake.config" -}}
{{- $mc := .kt.mooncake | default dict -}}
{{- $extra := dict "mooncake_protocol" ($mc.protocol | default "rdma") -}}
{{- with $mc.deviceName -}}{{- $_ := set $extra "device_name" . -}}{{- end -}}
{{- $config := dict "kv_connector_extra_config" $extra -}}
{{- if hasKey .kt "kvBufferDevice" -}}{{- $_ := set $config "kv_buffer_device" .kt.kvBufferDevice -}}{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{/* Mooncake registers its transfer endpoint at vLLM's get_ip(), which honours VLLM_HOST_IP. */}}
{{- define "pd-stack.connector.mooncake.env" -}}
{{- $env := list (dict "name" "VLLM_HOST_IP" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.podIP"))) -}}
{{- if include "pd-stack.listensOn" (dict "ctx" . "port" "mc-bootstrap") -}}
{{- $env = append $env (dict "name" "VLLM_MOONCAKE_BOOTSTRAP_PORT" "value" (include "pd-stack.connectorPort" (dict "ctx" . "port" "mc-bootstrap"))) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}
