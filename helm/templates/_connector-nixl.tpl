{{/*
NixlConnector (files/connectors.yaml). Sources: vLLM docs/features/nixl_connector_usage.md and
vllm/envs.py. The same config on prefill and decode; the docs recommend an explicit
kv_load_failure_policy "fail" (the default became "fail" in vLLM PR #34896), rendered when the
pool's vLLM is known to have the field.
*/}}
{{- define "pd-stack.connector.nixl.config" -}}
{{- $config := dict -}}
{{- if hasKey .kt "kvBufferDevice" -}}{{- $_ := set $config "kv_buffer_device" .kt.kvBufferDevice -}}{{- end -}}
{{- include "pd-stack.connectorTable" .root -}}
{{- $table := .root.pdStackConnectors -}}
{{- if include "pd-stack.vllmSatisfies" (dict "ctx" . "c" $table.kvTransferFields.loadFailurePolicy.vllmVersions) -}}
{{- $_ := set $config "kv_load_failure_policy" "fail" -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{/* The handshake (side channel) listens on the pod IP and the base port of the nixl-side ports. */}}
{{- define "pd-stack.connector.nixl.env" -}}
{{- $env := list (dict "name" "VLLM_NIXL_SIDE_CHANNEL_HOST" "valueFrom" (dict "fieldRef" (dict "fieldPath" "status.podIP"))) -}}
{{- $env = append $env (dict "name" "VLLM_NIXL_SIDE_CHANNEL_PORT" "value" (include "pd-stack.connectorPort" (dict "ctx" . "port" "nixl-side"))) -}}
{{- toYaml $env -}}
{{- end -}}
