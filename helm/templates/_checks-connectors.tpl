{{/* Checks of a pool's KV connector against the connector table. */}}

{{/* Checks of a pool's KV connector against the connector table (dict root spec conn path role). */}}
{{- define "pd-stack.checks.connector" -}}
{{- $conn := .conn -}}
{{- $path := .path -}}
{{- $at := printf "%s.%s" $path $conn.settingsKey -}}
{{- $kvRole := include "pd-stack.kvRole" . -}}
{{- /* rule PD018: a pool's KV transfer is complete: `lmcacheConfig` and `kvTransfer` are not both set; a prefill or decode pool has a connector; `kv_both` only where the connector has it (NIXL); the settings a side needs (LMCache sender `lmcache.proxyHost` unless the chart deploys the proxy, PyNccl decode `peerPool`) */ -}}
{{- if and (eq $kvRole "kv_both") (not $conn.kvBoth) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD018] %s.kvTransfer.connector: %s needs a prefill or a decode pool (kv_producer or kv_consumer); set %s.role" $path $conn.name $path) "" -}}
{{- end -}}
{{- range $conn.requires | default list -}}
{{- $supplied := and .unlessRouter $.root.Values.routerSpec.enableRouter (eq (include "pd-stack.routerType" $.root) (toString .unlessRouter)) -}}
{{- if and (has $kvRole .kvRoles) (not $supplied) (eq (include "pd-stack.setting" (dict "settings" $conn.settings "key" .key "default" "")) "") -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD018] %s.%s: is required on a %s %s pool: %s" $at (join "." .key) $kvRole $conn.name .why) "" -}}
{{- end -}}
{{- end -}}
{{- with $conn.vllmVersions -}}
{{- /* rule PD012: the connector exists in the image's vLLM (`vllmVersion`, or a `vX.Y.Z` tag of `vllm/vllm-openai`), with the ranges of the connector table (NIXL from 0.9.0; PyNccl up to 0.10.0; P2pNccl from 0.9.2 to before 0.23.0; `loadFailurePolicy` from 0.11.1); the connector's engine (V0 for PyNccl, V1 for the others) agrees with `vllmConfig.v1` */ -}}
{{- if include "pd-stack.vllmViolates" (dict "ctx" $ "c" .) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD012] %s.%s: %s is not in vLLM %s: it exists only in vLLM %s (%s); use NixlConnector, or state the image's version in %s.vllmVersion" $path (ternary "vllmVersion" "tag" (not (empty $.spec.vllmVersion))) $conn.name (include "pd-stack.vllmVersion" $) . $conn.versionsWhy $path) "" -}}
{{- end -}}
{{- end -}}
{{- $v1 := toString (dig "vllmConfig" "v1" "" .spec) -}}
{{- if and (eq $conn.engine "v0") (eq $v1 "1") -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD012] %s.vllmConfig.v1: is 1 but %s runs only on the V0 engine (VLLM_USE_V1=0); remove vllmConfig.v1" $path $conn.name) "" -}}
{{- end -}}
{{- with include "pd-stack.v0Key" . -}}
{{- if eq $conn.engine "v1" -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD012] %s.vllmConfig.%s: asks for the V0 engine but %s needs the vLLM V1 engine; drop vllmConfig.%s" $path . $conn.name .) "" -}}
{{- end -}}
{{- end -}}
{{- if include "pd-stack.fieldUnsupported" (dict "ctx" . "field" "loadFailurePolicy") -}}
{{- $field := .root.pdStackConnectors.kvTransferFields.loadFailurePolicy -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD012] %s.kvTransfer.loadFailurePolicy: vLLM %s has no kv_load_failure_policy (it needs vLLM %s: %s); remove the key" $path (include "pd-stack.vllmVersion" .) $field.vllmVersions $field.why) "" -}}
{{- end -}}
{{- /* rule PD014: 1P1D connectors (PyNccl, the tutorial's LMCache NIXL form): one replica per pool, one sender per receiver; with LMCache's proxy (`routerSpec.type: lmcache-proxy`) one replica per decode pool */ -}}
{{- if and (eq $conn.pairing "1P1D") (include "pd-stack.flagsOn" (dict "conn" $conn "when" $conn.pairingWhen)) (gt (int (.spec.replicaCount | default 1)) 1) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD014] %s.replicaCount: must be 1 with %s (%s): it pairs exactly one prefill pod with one decode pod" $path $conn.name $conn.settingsKey) "" -}}
{{- end -}}
{{- with .spec.kvTransfer -}}{{- with .peerPool -}}
{{- $peer := include "pd-stack.poolByName" (dict "root" $.root "name" .) | fromJson -}}
{{- $wanted := get (dict "prefill" "decode" "decode" "prefill") $.role -}}
{{- /* rule PD003: a sender's `nixlPeerHost` is `<release>-<pool>-engine-service[.<ns>[.svc[.cluster.local]]]` of a decode pool; `kvTransfer.peerPool` names a pool of the opposite role; an LMCache sender's `lmcache.proxyHost`, if set, names the proxy the chart deploys */ -}}
{{- if not $peer -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD003] %s.kvTransfer.peerPool: %q names no pool in servingEngineSpec.modelSpec" $path .) "" -}}
{{- else if and $wanted (ne (include "pd-stack.poolRole" (dict "root" $.root "spec" $peer)) $wanted) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD003] %s.kvTransfer.peerPool: %q is not a %s pool: a pool pairs with a pool of the opposite role" $path . $wanted) "" -}}
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
{{- $_ := set $.root.pdStackRefusals (printf "[PD003] %s.lmcacheConfig.nixlPeerHost: %q is not the Service of a decode pool of release %q: a sender sends its KV to <release>-<decode pool>-engine-service" $path $host $root.Release.Name) "" -}}
{{- end -}}
{{- if and $rLm.enableNixl (eq (toString $rLm.nixlRole) "receiver") -}}
{{- /* rule PD004: sender and receiver `nixlPeerPort` agree; an LMCache sender's `lmcache.proxyPort`, if set, is the deployed proxy's `notifyPort` */ -}}
{{- if ne (toString $lm.nixlPeerPort) (toString $rLm.nixlPeerPort) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD004] %s.lmcacheConfig.nixlPeerPort: is %s but its receiver %q listens on %s: use the same nixlPeerPort on both pools" $path (toString $lm.nixlPeerPort) $target (toString $rLm.nixlPeerPort)) "" -}}
{{- end -}}
{{- if hasKey $senders $target -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD014] %s.lmcacheConfig.nixlPeerHost: sends to receiver %q, which pool %q sends to as well: the LMCache NIXL form is 1P1D, one sender per receiver" $path $target (get $senders $target)) "" -}}
{{- end -}}
{{- $_ := set $senders $target $spec.name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
