{{/* Checks of a pool's KV connector against the connector table (pdctl/rules/connectors.py). */}}

{{/* Checks of a pool's KV connector against the connector table (dict root spec conn path role). */}}
{{- define "pd-stack.checks.connector" -}}
{{- $conn := .conn -}}
{{- $path := .path -}}
{{- $at := printf "%s.%s" $path $conn.settingsKey -}}
{{- $kvRole := include "pd-stack.kvRole" . -}}
{{- if and (eq $kvRole "kv_both") (not $conn.kvBoth) -}}
{{- fail (printf "[PD018] %s.kvTransfer.connector %s needs a prefill or a decode pool (kv_producer or kv_consumer); set %s.role" $path $conn.name $path) -}}
{{- end -}}
{{- range $conn.requires | default list -}}
{{- $supplied := and .unlessRouter $.root.Values.routerSpec.enableRouter (eq (include "pd-stack.routerType" $.root) (toString .unlessRouter)) -}}
{{- if and (has $kvRole .kvRoles) (not $supplied) (eq (include "pd-stack.setting" (dict "settings" $conn.settings "key" .key "default" "")) "") -}}
{{- fail (printf "[PD018] %s.%s is required on a %s %s pool: %s" $at (join "." .key) $kvRole $conn.name .why) -}}
{{- end -}}
{{- end -}}
{{- with $conn.vllmVersions -}}
{{- if include "pd-stack.vllmViolates" (dict "ctx" $ "c" .) -}}
{{- fail (printf "[PD012] %s.kvTransfer.connector %s is not in vLLM %s: it exists only in vLLM %s (%s); use NixlConnector, or state the image's version in %s.vllmVersion" $path $conn.name (include "pd-stack.vllmVersion" $) . $conn.versionsWhy $path) -}}
{{- end -}}
{{- end -}}
{{- $v1 := toString (dig "vllmConfig" "v1" "" .spec) -}}
{{- if and (eq $conn.engine "v0") (eq $v1 "1") -}}
{{- fail (printf "[PD012] %s.vllmConfig.v1 is 1 but %s runs only on the V0 engine (VLLM_USE_V1=0); remove vllmConfig.v1" $path $conn.name) -}}
{{- end -}}
{{- with include "pd-stack.v0Key" . -}}
{{- if eq $conn.engine "v1" -}}
{{- fail (printf "[PD012] %s.vllmConfig.%s asks for the V0 engine but %s needs the vLLM V1 engine; drop vllmConfig.%s" $path . $conn.name .) -}}
{{- end -}}
{{- end -}}
{{- if include "pd-stack.fieldUnsupported" (dict "ctx" . "field" "loadFailurePolicy") -}}
{{- $field := .root.pdStackConnectors.kvTransferFields.loadFailurePolicy -}}
{{- fail (printf "[PD012] %s.kvTransfer.loadFailurePolicy: vLLM %s has no kv_load_failure_policy (it needs vLLM %s: %s); remove the key" $path (include "pd-stack.vllmVersion" .) $field.vllmVersions $field.why) -}}
{{- end -}}
{{- if and (eq $conn.pairing "1P1D") (include "pd-stack.flagsOn" (dict "conn" $conn "when" $conn.pairingWhen)) (gt (int (.spec.replicaCount | default 1)) 1) -}}
{{- fail (printf "[PD014] %s.replicaCount must be 1 with %s (%s): it pairs exactly one prefill pod with one decode pod" $path $conn.name $conn.settingsKey) -}}
{{- end -}}
{{- with .spec.kvTransfer -}}{{- with .peerPool -}}
{{- $peer := include "pd-stack.poolByName" (dict "root" $.root "name" .) | fromJson -}}
{{- $wanted := get (dict "prefill" "decode" "decode" "prefill") $.role -}}
{{- if not $peer -}}
{{- fail (printf "[PD003] %s.kvTransfer.peerPool %q names no pool in servingEngineSpec.modelSpec" $path .) -}}
{{- else if and $wanted (ne (include "pd-stack.poolRole" (dict "root" $.root "spec" $peer)) $wanted) -}}
{{- fail (printf "[PD003] %s.kvTransfer.peerPool %q is not a %s pool: a pool pairs with a pool of the opposite role" $path . $wanted) -}}
{{- end -}}
{{- end -}}{{- end -}}
{{- end -}}

{{/*
The tutorial's LMCache NIXL sender/receiver form (dict root pools): a sender's nixlPeerHost is
the Service <release>-<pool>-engine-service[.<namespace>[.svc[.cluster.local]]] of a receiver
(decode) pool of this release, both use the same nixlPeerPort, and a receiver has one sender.
*/}}
{{- define "pd-stack.checks.tutorialLMCache" -}}
{{- $root := .root -}}
{{- $hostPattern := printf "^%s-([a-z0-9-]+)-engine-service(\\.[a-z0-9-]+(\\.svc(\\.cluster\\.local)?)?)?$" (regexQuoteMeta $root.Release.Name) -}}
{{- $senders := dict -}}
{{- range $spec := .pools -}}
{{- $lm := $spec.lmcacheConfig | default dict -}}
{{- if and $lm.enabled $lm.enableNixl (eq (toString $lm.nixlRole) "sender") -}}
{{- $path := include "pd-stack.poolPath" (dict "root" $root "spec" $spec) -}}
{{- $host := toString $lm.nixlPeerHost -}}
{{- $target := ternary (regexReplaceAll $hostPattern $host "${1}") "" (regexMatch $hostPattern $host) -}}
{{- $receiver := include "pd-stack.poolByName" (dict "root" $root "name" $target) | fromJson -}}
{{- $rLm := $receiver.lmcacheConfig | default dict -}}
{{- if or (not $receiver) (ne (include "pd-stack.poolRole" (dict "root" $root "spec" $receiver)) "decode") -}}
{{- fail (printf "[PD003] %s.lmcacheConfig.nixlPeerHost %q is not the Service of a decode pool of release %q: a sender sends its KV to <release>-<decode pool>-engine-service" $path $host $root.Release.Name) -}}
{{- end -}}
{{- if and $rLm.enableNixl (eq (toString $rLm.nixlRole) "receiver") -}}
{{- if ne (toString $lm.nixlPeerPort) (toString $rLm.nixlPeerPort) -}}
{{- fail (printf "[PD004] %s.lmcacheConfig.nixlPeerPort is %s but its receiver %q listens on %s: use the same nixlPeerPort on both pools" $path (toString $lm.nixlPeerPort) $target (toString $rLm.nixlPeerPort)) -}}
{{- end -}}
{{- if hasKey $senders $target -}}
{{- fail (printf "[PD014] %s sends to receiver %q, which pool %q sends to as well: the LMCache NIXL form is 1P1D, one sender per receiver" $path $target (get $senders $target)) -}}
{{- end -}}
{{- $_ := set $senders $target $spec.name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
