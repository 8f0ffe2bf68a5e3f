{{/* Checks between prefill and decode pools. */}}

{{/* Checks between prefill and decode pools (dict root pools). */}}
{{- define "pd-stack.checks.pairs" -}}
{{- $root := .root -}}
{{- $byRole := dict "prefill" list "decode" list -}}
{{- range $spec := .pools -}}
{{- $role := include "pd-stack.poolRole" (dict "root" $root "spec" $spec) -}}
{{- if hasKey $byRole $role -}}{{- $_ := set $byRole $role (append (get $byRole $role) $spec) -}}{{- end -}}
{{- end -}}
{{- range $role, $other := dict "prefill" "decode" "decode" "prefill" -}}
{{- if and (get $byRole $role) (not (get $byRole $other)) -}}
{{- /* rule PD001: a declared kvRole agrees with the pool's role (producer = prefill, consumer = decode), a NIXL `nixlRole` too (sender = prefill); a prefill pool has a decode pool and vice versa; NIXL needs LMCache enabled */ -}}
{{- $spec := first (get $byRole $role) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD001] %s: pool %q is a %s pool but no %s pool exists: add one, or make the pool role both" (include "pd-stack.poolPath" (dict "root" $root "spec" $spec)) $spec.name $role $other) "" -}}
{{- end -}}
{{- end -}}
{{- range $p := $byRole.prefill -}}
{{- range $d := $byRole.decode -}}
{{- include "pd-stack.checks.pair" (dict "root" $root "prefill" $p "decode" $d) -}}
{{- end -}}
{{- end -}}
{{- include "pd-stack.checks.tutorialLMCache" . -}}
{{- end -}}

{{/* Checks of one prefill/decode pair (dict root prefill decode): the KV one sends, the other can use. */}}
{{- define "pd-stack.checks.pair" -}}
{{- $p := dict "root" .root "spec" .prefill -}}
{{- $d := dict "root" .root "spec" .decode -}}
{{- $dPath := include "pd-stack.poolPath" $d -}}
{{- $pConn := include "pd-stack.poolConnector" $p | fromJson -}}
{{- $dConn := include "pd-stack.poolConnector" $d | fromJson -}}
{{- /* rule PD013: prefill and decode use the same connector (or both none); PyNccl and P2pNccl need equal TP (NIXL, Mooncake, LMCache allow hetero TP) */ -}}
{{- if ne ($pConn.name | default "") ($dConn.name | default "") -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD013] %s.%s: uses %s but prefill pool %q uses %s: both sides of a PD pair use the same connector" $dPath $dConn.chosenBy ($dConn.name | default "no KV connector") .prefill.name ($pConn.name | default "no KV connector")) "" -}}
{{- end -}}
{{- $pTP := int (include "pd-stack.parallelSize" (dict "ctx" $p "key" "tensorParallelSize")) -}}
{{- $dTP := int (include "pd-stack.parallelSize" (dict "ctx" $d "key" "tensorParallelSize")) -}}
{{- if and $pConn (not $pConn.heteroTP) (ne $pTP $dTP) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD013] %s.vllmConfig.tensorParallelSize: is %d but prefill pool %q has %d: %s needs the same tensor parallelism on both sides (NixlConnector allows different)" $dPath $dTP .prefill.name $pTP $pConn.name) "" -}}
{{- end -}}
{{- $pV := .prefill.vllmConfig | default dict -}}
{{- $dV := .decode.vllmConfig | default dict -}}
{{- $fields := list (list "modelURL" .prefill.modelURL .decode.modelURL) -}}
{{- if and (hasKey $pV "maxModelLen") (hasKey $dV "maxModelLen") -}}
{{- $fields = append $fields (list "vllmConfig.maxModelLen" (include "pd-stack.int" (dict "key" "vllmConfig.maxModelLen" "value" $pV.maxModelLen)) (include "pd-stack.int" (dict "key" "vllmConfig.maxModelLen" "value" $dV.maxModelLen))) -}}
{{- end -}}
{{- $fields = append $fields (list "vllmConfig.kvCacheDtype" ($pV.kvCacheDtype | default "auto") ($dV.kvCacheDtype | default "auto")) -}}
{{- include "pd-stack.vllmImage" $.root -}}
{{- $vllmBlock := $.root.pdStackVllmImage.blockSize -}}
{{- $pBlock := int ($pV.blockSize | default $vllmBlock) -}}
{{- $dBlock := int ($dV.blockSize | default $vllmBlock) -}}
{{- if not (and $pConn.smallerPrefillBlocks (le $pBlock $dBlock)) -}}
{{- $fields = append $fields (list "vllmConfig.blockSize" (toString $pBlock) (toString $dBlock)) -}}
{{- end -}}
{{- range $fields -}}
{{- $key := index . 0 -}}
{{- /* rule PD005: prefill and decode agree on modelURL, maxModelLen, kvCacheDtype, blockSize (NIXL: prefill block size may be smaller) */ -}}
{{- if ne (toString (index . 1)) (toString (index . 2)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD005] %s.%s: is %q but prefill pool %q has %q: the KV cache a prefill pool sends is only usable by a decode pool with the same %s" $dPath $key (toString (index . 2)) $.prefill.name (toString (index . 1)) $key) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
