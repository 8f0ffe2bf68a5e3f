{{/* The engine pools and the facts every template needs of one (see _helpers.tpl). */}}

{{/* Loads files/topology.yaml (roles, the kv-role map, router types and label flags) into the root
context as .pdStackTopology, once per template; outputs nothing. */}}
{{- define "pd-stack.topology" -}}
{{- if not (hasKey . "pdStackTopology") -}}
{{- $_ := set . "pdStackTopology" (.Files.Get "files/topology.yaml" | fromYaml) -}}
{{- end -}}
{{- end -}}

{{/* The engine pools the chart renders, as JSON: servingEngineSpec.modelSpec without the pools
that say enabled: false, or none when engines are off. */}}
{{- define "pd-stack.pools" -}}
{{- $engine := .Values.servingEngineSpec -}}
{{- $pools := list -}}
{{- if ne $engine.enableEngine false -}}
{{- range $engine.modelSpec | default list -}}
{{- if ne .enabled false -}}{{- $pools = append $pools . -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $pools -}}
{{- end -}}

{{/*
The pool's role: prefill, decode or both. modelSpec.role states it; without it the tutorial's
lmcacheConfig.kvRole implies it (kv_producer = prefill, kv_consumer = decode), then
kvTransfer.kvRole the same way; otherwise both (aggregated serving).
*/}}
{{- define "pd-stack.poolRole" -}}
{{- include "pd-stack.topology" .root -}}
{{- $byKv := .root.pdStackTopology.roleByKvRole -}}
{{- $lmRole := dig "lmcacheConfig" "kvRole" "" .spec -}}
{{- $ktRole := dig "kvTransfer" "kvRole" "" .spec -}}
{{- if .spec.role -}}{{ .spec.role }}
{{- else if hasKey $byKv $lmRole -}}{{ get $byKv $lmRole }}
{{- else if hasKey $byKv $ktRole -}}{{ get $byKv $ktRole }}
{{- else -}}both
{{- end -}}
{{- end -}}

{{/* "servingEngineSpec.modelSpec[<index>]" of a pool, for messages that name the key path: the
entry equal to .spec, else the first of its name (.spec may be just the name). Two pools of one
name (refused by PD006) are told apart by their content. */}}
{{- define "pd-stack.poolPath" -}}
{{- $name := .spec.name -}}
{{- $spec := toJson .spec -}}
{{- $named := "" -}}
{{- $found := "" -}}
{{- range $i, $s := .root.Values.servingEngineSpec.modelSpec -}}
{{- if eq $s.name $name -}}
{{- if eq $named "" -}}{{- $named = toString $i -}}{{- end -}}
{{- if and (eq $found "") (eq (toJson $s) $spec) -}}{{- $found = toString $i -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- printf "servingEngineSpec.modelSpec[%s]" (default $named $found) -}}
{{- end -}}

{{/* The pool named .name (as JSON), or {}. */}}
{{- define "pd-stack.poolByName" -}}
{{- $want := .name -}}
{{- $found := dict -}}
{{- range include "pd-stack.pools" .root | fromJsonArray -}}
{{- if eq .name $want -}}{{- $found = . -}}{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/* Loads files/vllm-image.yaml (what an image's tag says about its vLLM) into the root context
as .pdStackVllmImage, once per template; outputs nothing. */}}
{{- define "pd-stack.vllmImage" -}}
{{- if not (hasKey . "pdStackVllmImage") -}}
{{- $_ := set . "pdStackVllmImage" (.Files.Get "files/vllm-image.yaml" | fromYaml) -}}
{{- end -}}
{{- end -}}

{{/*
vLLM version inside a pool's image as "X.Y.Z", or "" when unknown, as files/vllm-image.yaml
reads it: modelSpec.vllmVersion, else a tag of the official image. Other images (for example
lmcache/vllm-openai, whose tags name LMCache builds) say nothing about vLLM.
*/}}
{{- define "pd-stack.vllmVersion" -}}
{{- $key := include "pd-stack.vllmVersionKey" . -}}
{{- $text := ternary (toString (get .spec $key | default "")) "" (ne $key "") -}}
{{- trimPrefix "v" (regexFind .root.pdStackVllmImage.versionPattern $text) -}}
{{- end -}}

{{/* The modelSpec key pd-stack.vllmVersion reads a pool's vLLM version from: vllmVersion when set,
else tag for the official image, else "" (the image says nothing about vLLM). */}}
{{- define "pd-stack.vllmVersionKey" -}}
{{- include "pd-stack.vllmImage" .root -}}
{{- if .spec.vllmVersion -}}vllmVersion
{{- else if regexMatch .root.pdStackVllmImage.officialRepository (toString (.spec.repository | default "")) -}}tag
{{- end -}}
{{- end -}}

{{/* "true" when the pool's vLLM version is known and satisfies the constraint .c (e.g. ">=0.11.1"). */}}
{{- define "pd-stack.vllmSatisfies" -}}
{{- $v := include "pd-stack.vllmVersion" .ctx -}}
{{- if and $v (semverCompare .c $v) -}}true{{- end -}}
{{- end -}}

{{/* "true" when the pool's vLLM version is known and does NOT satisfy .c. */}}
{{- define "pd-stack.vllmViolates" -}}
{{- $v := include "pd-stack.vllmVersion" .ctx -}}
{{- if and $v (not (semverCompare .c $v)) -}}true{{- end -}}
{{- end -}}

{{/* The vllmConfig key that asks for vLLM's V0 engine (VLLM_USE_V1=0): "v0" (v0: 1), "v1" (v1: 0), or "". */}}
{{- define "pd-stack.v0Key" -}}
{{- $vllm := .spec.vllmConfig | default dict -}}
{{- if eq (toString ($vllm.v0 | default "")) "1" -}}v0
{{- else if and (hasKey $vllm "v1") (eq (toString $vllm.v1) "0") -}}v1
{{- end -}}
{{- end -}}

{{/* A vllmConfig integer of the pool (.key), default 1: tensor/pipeline/data parallel size. */}}
{{- define "pd-stack.parallelSize" -}}
{{- int (dig .key 1 (.ctx.spec.vllmConfig | default dict)) -}}
{{- end -}}

{{/* GPUs one pod of the pool needs: tensor x pipeline x data parallel size (DP ranks run in the pod). */}}
{{- define "pd-stack.parallelGPUs" -}}
{{- $vllm := .spec.vllmConfig | default dict -}}
{{- mul (int (dig "tensorParallelSize" 1 $vllm)) (int (dig "pipelineParallelSize" 1 $vllm)) (int (dig "dataParallelSize" 1 $vllm)) -}}
{{- end -}}
