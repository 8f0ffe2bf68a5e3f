{{/* production-stack keys pd-stack refuses by name. */}}

{{/*
production-stack keys pd-stack refuses (files/production-stack.yaml, status refused, or refusedBy
the routerSpec.type in use), each when used: a mapping with `enabled` when that is true (or the
subkey `usedWhen` names when set), any other mapping or list when not empty, a scalar when set.
*/}}
{{- define "pd-stack.checks.productionStack" -}}
{{- $table := .Files.Get "files/production-stack.yaml" | fromYaml -}}
{{- $type := include "pd-stack.routerType" $ -}}
{{- range $path, $entry := $table.keys -}}
{{- $why := get ($entry.refusedBy | default dict) $type -}}
{{- if or (eq $entry.status "refused") $why -}}
{{- $used := include "pd-stack.usedKeys" (dict "node" $.Values "parts" (splitList "." $path) "at" "" "usedWhen" ($entry.usedWhen | default "")) | fromJsonArray -}}
{{- if eq $entry.status "refused" -}}
{{- /* rule PD019: production-stack features pd-stack does not serve are refused by name with the reason and what to use instead (docs/production-stack.md); with `routerSpec.type: vllm-router`, `lmcache-proxy` or `llm-d`, so are the production-stack router's own keys (`staticBackends`, `rootPath`, `prefixMinMatchLength`, the LMCache controller keys) */ -}}
{{- range $used -}}
{{- $_ := set $.pdStackRefusals (printf "[PD019] %s: production-stack's %s is not supported by pd-stack: %s" . (last (splitList "." $path)) (trim (replace "\n" " " $entry.note))) "" -}}
{{- end -}}
{{- end -}}
{{- /* Keys of the production-stack router's own flags: refused with another router type. */ -}}
{{- if $why -}}
{{- range $used -}}
{{- $_ := set $.pdStackRefusals (printf "[PD019] %s: production-stack's %s is not supported with routerSpec.type %s: %s" . (last (splitList "." $path)) $type (trim (replace "\n" " " $why))) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The key paths (JSON list) where .parts (a refused key's path; "x[]" walks each list item)
are used inside .node; .at is the path so far. */}}
{{- define "pd-stack.usedKeys" -}}
{{- $found := list -}}
{{- $part := first .parts -}}
{{- $key := trimSuffix "[]" $part -}}
{{- $at := ternary $key (printf "%s.%s" .at $key) (eq .at "") -}}
{{- if and (kindIs "map" .node) (hasKey .node $key) -}}
{{- $value := get .node $key -}}
{{- if and (hasSuffix "[]" $part) (kindIs "slice" $value) -}}
{{- range $i, $item := $value -}}
{{- $found = concat $found (include "pd-stack.usedKeys" (dict "node" $item "parts" (rest $.parts) "at" (printf "%s[%d]" $at $i) "usedWhen" $.usedWhen) | fromJsonArray) -}}
{{- end -}}
{{- else if gt (len .parts) 1 -}}
{{- $found = include "pd-stack.usedKeys" (dict "node" $value "parts" (rest .parts) "at" $at "usedWhen" .usedWhen) | fromJsonArray -}}
{{- else if include "pd-stack.isUsed" (dict "value" $value "usedWhen" .usedWhen) -}}
{{- $found = list $at -}}
{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/* "true" when a refused key's value turns the feature on (see pd-stack.checks.productionStack). */}}
{{- define "pd-stack.isUsed" -}}
{{- $value := .value -}}
{{- if and (kindIs "map" $value) .usedWhen -}}{{- if get $value .usedWhen -}}true{{- end -}}
{{- else if and (kindIs "map" $value) (hasKey $value "enabled") -}}{{- if $value.enabled -}}true{{- end -}}
{{- else if $value -}}true
{{- end -}}
{{- end -}}
