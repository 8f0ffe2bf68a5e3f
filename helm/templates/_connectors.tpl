{{/*
KV transfer, generic over the connector table (files/connectors.yaml). What is specific to one
connector (its kv-transfer JSON fields and env) is in its fragment, _connector-<fragment>.tpl,
which defines two helpers called with the context built by pd-stack.connectorContext:
  pd-stack.connector.<fragment>.config  JSON object: kv-transfer fields beyond kv_connector and
                                        kv_role (kv_connector_extra_config is merged with the
                                        user's kvTransfer.extraConfig, which wins)
  pd-stack.connector.<fragment>.env     YAML list of env entries
*/}}

{{/*
Loads the connector table into the root context as .pdStackConnectors, once per template (it is
read for every pool many times); outputs nothing. Use: include it with the root, then read
$.pdStackConnectors.
*/}}
{{- define "pd-stack.connectorTable" -}}
{{- if not (hasKey . "pdStackConnectors") -}}
{{- $_ := set . "pdStackConnectors" (.Files.Get "files/connectors.yaml" | fromYaml) -}}
{{- end -}}
{{- end -}}

{{/*
The table entry for a pool's KV transfer, as JSON, or {} when the pool transfers no KV: the entry
of kvTransfer.connector, or the tutorial LMCache form's for lmcacheConfig.enabled. Adds "name"
(the table key, which is vLLM's kv_connector), "settingsKey" (the modelSpec key holding its
settings), "chosenBy" (the key that picked it, for the checks' messages) and "settings" (those
values, as JSON; fragments read the originals, see pd-stack.connectorContext).
*/}}
{{- define "pd-stack.poolConnector" -}}
{{- include "pd-stack.connectorTable" .root -}}
{{- $table := .root.pdStackConnectors -}}
{{- $entry := dict -}}
{{- $kt := .spec.kvTransfer | default dict -}}
{{- $lm := .spec.lmcacheConfig | default dict -}}
{{- if and $kt.connector (hasKey $table.connectors $kt.connector) -}}
{{- $entry = merge (dict "name" $kt.connector "settingsKey" "kvTransfer" "chosenBy" "kvTransfer.connector" "settings" $kt) (get $table.connectors $kt.connector) -}}
{{- else if $lm.enabled -}}
{{- $entry = merge (dict "name" $table.tutorialLMCache.kvConnector "settingsKey" "lmcacheConfig" "chosenBy" "lmcacheConfig.enabled" "settings" $lm) $table.tutorialLMCache -}}
{{- end -}}
{{- toJson $entry -}}
{{- end -}}

{{/*
The kv_role of a pool ("" when it transfers no KV): kvTransfer.kvRole or lmcacheConfig.kvRole
when set, else what the connector's kvRoles give for the pool's role; kv_both when neither says
(the checks refuse it for connectors that have no kv_both).
*/}}
{{- define "pd-stack.kvRole" -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- $declared := dig "settings" "kvRole" "" $conn -}}
{{- if not $conn -}}
{{- else if $declared -}}{{ $declared }}
{{- else -}}{{ get ($conn.kvRoles | default dict) (include "pd-stack.poolRole" .) | default "kv_both" }}
{{- end -}}
{{- end -}}

{{/* "true" when every settings flag named in .when (a list) is true in .conn's settings. */}}
{{- define "pd-stack.flagsOn" -}}
{{- $on := true -}}
{{- range .when | default list -}}{{- if not (get ($.conn.settings | default dict) .) -}}{{- $on = false -}}{{- end -}}{{- end -}}
{{- if $on -}}true{{- end -}}
{{- end -}}

{{/* A value inside .settings at the key path .key (a list), or .default when absent. */}}
{{- define "pd-stack.setting" -}}
{{- $value := .settings | default dict -}}
{{- $found := true -}}
{{- range .key -}}
{{- if and $found (kindIs "map" $value) (hasKey $value .) -}}{{- $value = get $value . -}}{{- else -}}{{- $found = false -}}{{- end -}}
{{- end -}}
{{- if $found -}}{{ $value }}{{- else -}}{{ .default }}{{- end -}}
{{- end -}}

{{/*
The listener ports of a pool's connector, as a YAML list of {name, port, base}: each table port
whose kv roles include the pool's, from its base (the settings key or the table default) for
count ports (one, tp, 2tp or dp*tp); several ports are named <name>-<i>.
*/}}
{{- define "pd-stack.connectorPorts" -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- $kvRole := include "pd-stack.kvRole" . -}}
{{- $tp := int (include "pd-stack.parallelSize" (dict "ctx" . "key" "tensorParallelSize")) -}}
{{- $dp := int (include "pd-stack.parallelSize" (dict "ctx" . "key" "dataParallelSize")) -}}
{{- $counts := dict "one" 1 "tp" $tp "2tp" (mul 2 $tp) "dp*tp" (mul $dp $tp) -}}
{{- $ports := list -}}
{{- range $port := $conn.ports | default list -}}
{{- if and (include "pd-stack.flagsOn" (dict "conn" $conn "when" $port.when)) (has $kvRole $port.listenOn) -}}
{{- $base := int (include "pd-stack.setting" (dict "settings" $conn.settings "key" $port.key "default" $port.default)) -}}
{{- $count := int (get $counts $port.count) -}}
{{- range $i := until $count -}}
{{- $name := ternary $port.name (printf "%s-%d" $port.name $i) (eq $port.count "one") -}}
{{- $ports = append $ports (dict "name" $name "containerPort" (add $base $i) "base" $port.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $ports -}}
{{- end -}}

{{/* The table port named .port of a pool's connector (.ctx), as JSON ({} if it has none). */}}
{{- define "pd-stack.tablePort" -}}
{{- $want := .port -}}
{{- $found := dict -}}
{{- range (include "pd-stack.poolConnector" .ctx | fromJson).ports | default list -}}
{{- if eq .name $want -}}{{- $found = . -}}{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/* The base port (first of its range) of the connector port named .port of a pool (.ctx): its
settings key, else the table default. */}}
{{- define "pd-stack.connectorPort" -}}
{{- $port := include "pd-stack.tablePort" . | fromJson -}}
{{- $settings := (include "pd-stack.poolConnector" .ctx | fromJson).settings -}}
{{- $value := include "pd-stack.setting" (dict "settings" $settings "key" $port.key "default" $port.default) -}}
{{- include "pd-stack.int" (dict "key" (printf "%s.%s" (include "pd-stack.poolPath" .ctx) (join "." $port.key)) "value" $value) -}}
{{- end -}}

{{/* "true" when the pool (.ctx) listens on the connector port named .port (its kv role is in
listenOn). */}}
{{- define "pd-stack.listensOn" -}}
{{- $port := include "pd-stack.tablePort" . | fromJson -}}
{{- if has (include "pd-stack.kvRole" .ctx) ($port.listenOn | default list) -}}true{{- end -}}
{{- end -}}

{{/*
The context a connector fragment gets: a pool's dict (root, spec) with, added in place, conn (its
table entry), kt (its settings), kvRole, role, tp and path (the pool's key path, for messages).
*/}}
{{- define "pd-stack.connectorContext" -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- $_ := set . "conn" $conn -}}
{{- /* The settings as written (a JSON round trip would turn integers into floats). */ -}}
{{- $_ := set . "kt" (get .spec $conn.settingsKey) -}}
{{- $_ := set . "kvRole" (include "pd-stack.kvRole" .) -}}
{{- $_ := set . "role" (include "pd-stack.poolRole" .) -}}
{{- $_ := set . "tp" (int (include "pd-stack.parallelSize" (dict "ctx" . "key" "tensorParallelSize"))) -}}
{{- $_ := set . "path" (include "pd-stack.poolPath" .) -}}
{{- end -}}

{{/*
kv-transfer-config JSON of a pool, or "" when it transfers no KV. Field names are those of vLLM's
KVTransferConfig (vllm/config/kv_transfer.py). engine_id is never rendered: vLLM draws a fresh
one per instance, and a shared value would break NIXL and Mooncake.
*/}}
{{- define "pd-stack.kvTransferConfig" -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- if $conn -}}
{{- $ctx := dict "root" .root "spec" .spec -}}
{{- include "pd-stack.connectorContext" $ctx -}}
{{- $config := dict "kv_connector" $conn.name "kv_role" $ctx.kvRole -}}
{{- $config = merge (include (printf "pd-stack.connector.%s.config" $conn.fragment) $ctx | fromJson) $config -}}
{{- $extra := merge (deepCopy ($ctx.kt.extraConfig | default dict)) ($config.kv_connector_extra_config | default dict) -}}
{{- $_ := unset $config "kv_connector_extra_config" -}}
{{- if $extra -}}{{- $_ := set $config "kv_connector_extra_config" $extra -}}{{- end -}}
{{- if hasKey $ctx.kt "loadFailurePolicy" -}}
{{- $_ := set $config "kv_load_failure_policy" $ctx.kt.loadFailurePolicy -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}
{{- end -}}

{{/* Env a pool's KV connector needs, as a YAML list ([] without one). */}}
{{- define "pd-stack.kvTransferEnv" -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- if $conn -}}
{{- $ctx := dict "root" .root "spec" .spec -}}
{{- include "pd-stack.connectorContext" $ctx -}}
{{- include (printf "pd-stack.connector.%s.env" $conn.fragment) $ctx -}}
{{- else -}}[]
{{- end -}}
{{- end -}}

{{/* Pod annotations a pool's connector adds: a prefill's bootstrap port for vllm-router discovery
(the table's routers.vllm-router.bootstrapPort; vllm-router reads vllm.ai/bootstrap-port). */}}
{{- define "pd-stack.connectorAnnotations" -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- $annotations := dict -}}
{{- with dig "routers" "vllm-router" "bootstrapPort" "" $conn -}}
{{- if include "pd-stack.listensOn" (dict "ctx" $ "port" .) -}}
{{- $_ := set $annotations "vllm.ai/bootstrap-port" (include "pd-stack.connectorPort" (dict "ctx" $ "port" .)) -}}
{{- end -}}
{{- end -}}
{{- toYaml $annotations -}}
{{- end -}}

{{/* "true" when the pool's connector settings name the key set for the kv-transfer field .field of
files/connectors.yaml kvTransferFields and the pool's known vLLM lacks it. */}}
{{- define "pd-stack.fieldUnsupported" -}}
{{- include "pd-stack.connectorTable" .ctx.root -}}
{{- $table := .ctx.root.pdStackConnectors -}}
{{- $field := get $table.kvTransferFields .field -}}
{{- if and (hasKey (.ctx.spec.kvTransfer | default dict) .field) (include "pd-stack.vllmViolates" (dict "ctx" .ctx "c" $field.vllmVersions)) -}}true{{- end -}}
{{- end -}}
