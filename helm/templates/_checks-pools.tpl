{{/* Checks of one engine pool. */}}

{{/* Checks of one pool (dict root spec). */}}
{{- define "pd-stack.checks.pool" -}}
{{- $spec := .spec -}}
{{- $path := include "pd-stack.poolPath" . -}}
{{- $role := include "pd-stack.poolRole" . -}}
{{- $gpus := int (include "pd-stack.parallelGPUs" .) -}}
{{- $nodes := int (include "pd-stack.poolNodes" .) -}}
{{- $gpu := int ($spec.requestGPU | default 0) -}}
{{- /* A KubeRay pool (production-stack's raySpec, refused by PD019) spreads its engine over Ray
       worker pods: its GPUs per pod are not the engine's. */ -}}
{{- if and (or (hasKey $spec "requestGPU") (gt $gpus 1)) (ne (mul $gpu $nodes) $gpus) (not (hasKey $spec "raySpec")) -}}
{{- /* rule PD010: `requestGPU` = tensorParallelSize x pipelineParallelSize x dataParallelSize */ -}}
{{- if gt $nodes 1 -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD010] %s.requestGPU: is %d per pod on multiNode.nodes %d pods (%d GPUs) but the engine's parallelism needs %d GPUs (vllmConfig.tensorParallelSize x pipelineParallelSize x dataParallelSize = multiNode.nodes x requestGPU) (hint: %s)" $path $gpu $nodes (mul $gpu $nodes) $gpus (ternary (printf "set requestGPU: %d per pod" (div $gpus $nodes)) (printf "make the parallelism a multiple of %d nodes" $nodes) (eq (mod $gpus $nodes) 0))) "" -}}
{{- else -}}
{{- $others := mul (int (include "pd-stack.parallelSize" (dict "ctx" . "key" "pipelineParallelSize"))) (int (include "pd-stack.parallelSize" (dict "ctx" . "key" "dataParallelSize"))) -}}
{{- $keep := ternary (printf "set vllmConfig.tensorParallelSize: %d" (div $gpu (max $others 1))) (printf "change the parallelism to multiply to %d" $gpu) (and (gt $gpu 0) (eq (mod $gpu (max $others 1)) 0)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD010] %s.requestGPU: is %d but the pool's parallelism needs %d GPUs per pod (vllmConfig.tensorParallelSize x pipelineParallelSize x dataParallelSize) (hint: to use %d GPUs per engine %s (with pipeline and data parallel sizes), or set requestGPU: %d)" $path $gpu $gpus $gpu $keep $gpus) "" -}}
{{- end -}}
{{- end -}}
{{- include "pd-stack.checks.multiNode" . -}}
{{- range $key, $where := dict "labels" ($spec.labels | default dict) "podLabels" ($spec.podLabels | default dict) "servingEngineSpec.labels" (.root.Values.servingEngineSpec.labels | default dict) -}}
{{- /* rule PD015: `labels.model` equals the pool name */ -}}
{{- if and (hasKey $where "model") (ne (toString (get $where "model")) $spec.name) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD015] %s.model: is %q but must equal the pool name %q: the router finds a pool's role by the pod label model" (ternary $key (printf "%s.%s" $path $key) (hasPrefix "servingEngineSpec" $key)) (toString (get $where "model")) $spec.name) "" -}}
{{- end -}}
{{- end -}}
{{- with include "pd-stack.v0Key" . -}}
{{- include "pd-stack.connectorTable" $.root -}}
{{- $v0 := $.root.pdStackConnectors.v0Engine -}}
{{- if include "pd-stack.vllmViolates" (dict "ctx" $ "c" $v0.vllmVersions) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD012] %s.vllmConfig.%s: asks for the V0 engine, which vLLM %s does not have (%s); remove vllmConfig.%s: vLLM runs its V1 engine" $path . (include "pd-stack.vllmVersion" $) (trim $v0.why) .) "" -}}
{{- end -}}
{{- end -}}
{{- $lm := $spec.lmcacheConfig | default dict -}}
{{- $kt := $spec.kvTransfer | default dict -}}
{{- if and $kt $lm.enabled -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD018] %s.kvTransfer: lmcacheConfig (the tutorial's LMCache form) and kvTransfer are mutually exclusive; use one of them" $path) "" -}}
{{- end -}}
{{- if and $lm.enableNixl (not $lm.enabled) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD001] %s.lmcacheConfig.enableNixl: is true but lmcacheConfig.enabled is not: NIXL transfer runs inside LMCache; set enabled: true, or drop enableNixl" $path) "" -}}
{{- end -}}
{{- include "pd-stack.topology" .root -}}
{{- $byKv := .root.pdStackTopology.roleByKvRole -}}
{{- range $declared := list (list "lmcacheConfig" $lm.kvRole) (list "kvTransfer" $kt.kvRole) -}}
{{- $kvRole := last $declared | default "" -}}
{{- if and $spec.role (hasKey $byKv $kvRole) (ne $role (get $byKv $kvRole)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD001] %s.%s.kvRole: %q contradicts %s.role %q: prefill pools are kv_producer, decode pools kv_consumer" $path (first $declared) $kvRole $path $role) "" -}}
{{- end -}}
{{- end -}}
{{- if and $lm.enabled $lm.enableNixl $lm.nixlRole (ne $role (ternary "prefill" "decode" (eq $lm.nixlRole "sender"))) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD001] %s.%s: the pool is a %s pool by this key but lmcacheConfig.nixlRole %q makes it the other role: a sender is a kv_producer (prefill), a receiver a kv_consumer (decode); (hint: make the two agree; if the roles were swapped between the pools, swap them back)" $path (ternary "role" (ternary "lmcacheConfig.kvRole" "kvTransfer.kvRole" (hasKey $byKv (toString $lm.kvRole))) (not (empty $spec.role))) $role $lm.nixlRole) "" -}}
{{- end -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- if and (not $conn) (ne $role "both") -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD018] %s: a %s pool that transfers no KV: set %s.kvTransfer.connector (or the tutorial's lmcacheConfig)" $path $role $path) "" -}}
{{- end -}}
{{- if $conn -}}
{{- include "pd-stack.checks.connector" (merge (dict "conn" $conn "path" $path "role" $role) .) -}}
{{- end -}}
{{- $vllm := $spec.vllmConfig | default dict -}}
{{- with $vllm.extraArgs -}}
{{- include "pd-stack.checks.ownedFlags" (dict "root" $.root "args" . "at" (printf "%s.vllmConfig.extraArgs" $path) "command" (include "pd-stack.engineArgs" $ | fromYamlArray) "keys" (dict (printf "%s.vllmConfig" $path) $vllm $path $spec)) -}}
{{- end -}}
{{- range $where, $env := dict (printf "%s.env" $path) ($spec.env | default list) "servingEngineSpec.env" (.root.Values.servingEngineSpec.env | default list) -}}
{{- range $i, $entry := $env -}}
{{- if has (toString $entry.name) (list "VLLM_NIXL_SIDE_CHANNEL_PORT" "VLLM_NIXL_SIDE_CHANNEL_HOST") -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD026] %s[%d].name: %s is the chart's: it sets NixlConnector's side channel itself; remove the entry" $where $i $entry.name) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* rule PD026: `vllmConfig.extraArgs` and `routerSpec.extraArgs` leave alone every flag the chart puts in that command (read from the command the chart renders: `--host`, `--port`, `--kv-transfer-config`, and each flag it sets from a key, such as `--max-model-len` from `vllmConfig.maxModelLen`), in every form the engine's and the routers' parsers take: `--flag value`, `--flag=value`, `_` for `-`, vLLM's `--flag.key`, the `--no-` twin of a boolean flag, and any prefix of the flag (argparse takes a prefix that names one flag, and fails on one that names several, so any prefix is refused); the message names the key to set instead. The llm-d EPP (a Go program, exact flag names) is not checked here: `pdctl validate` warns (PD117). No `VLLM_NIXL_SIDE_CHANNEL_PORT`/`_HOST` in the engines' `env` (`UCX_*` and `LMCACHE_*` are yours to set) */ -}}
{{/* Refuses each argument of .args that sets a flag the chart put in .command, its rendered
arguments ending with .args; .keys maps key paths to the values maps the chart reads (dict root
args at command keys). An argument is cut at `=` and at `.` (vLLM's dotted form
`--kv-transfer-config.kv_role x`: vLLM docs/features/nixl_connector_usage.md). */}}
{{- define "pd-stack.checks.ownedFlags" -}}
{{- $owned := list -}}
{{- range slice .command 0 (sub (len .command) (len .args)) -}}
{{- $flag := first (splitList "=" (toString .)) -}}
{{- if hasPrefix "--" $flag -}}{{- $owned = concat $owned (list $flag (ternary (replace "--no-" "--" $flag) (replace "--" "--no-" $flag) (hasPrefix "--no-" $flag))) -}}{{- end -}}
{{- end -}}
{{- range $i, $arg := .args -}}
{{- $given := first (splitList "." (replace "_" "-" (first (splitList "=" (toString $arg))))) -}}
{{- range $flag := $owned -}}
{{- if and (hasPrefix "--" $given) (gt (len $given) 2) (hasPrefix $given $flag) -}}
{{- $key := untitle (camelcase (replace "-" "_" (trimPrefix "no-" (trimPrefix "--" $flag)))) -}}
{{- $hint := "remove it; helm/README.md lists the keys the chart sets its flags from" -}}
{{- range $at, $values := $.keys -}}{{- if hasKey $values $key -}}{{- $hint = printf "set %s.%s instead" $at $key -}}{{- end -}}{{- end -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD026] %s[%d]: %s sets %s, a flag the chart sets in this command (hint: %s)" $.at $i (toString $arg) $flag $hint) "" -}}
{{- break -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
