{{/* Checks of KEDA and the router HPA. */}}

{{/*
Autoscalers that cannot own the replicas they are given (PD023): a KEDA ScaledObject on a pool
whose connector or router needs exactly one replica, on a DisaggregatedSet role the set itself
scales, with bounds KEDA refuses (CheckReplicaCountBoundsAreValid at v2.20.2: min <= max, idle <
min; a min of 0 counts 1, an unset max 100), with no trigger, or able to reach zero replicas with
the default triggers, which read only the pool's own engines (at zero nothing would bring it back);
and a router
HPA on a router that must stay one pod, without a CPU request to measure, or with min > max.
*/}}
{{- define "pd-stack.checks.autoscaling" -}}
{{- $root := .root -}}
{{- $proxy := include "pd-stack.isLMCacheProxy" $root -}}
{{- range $spec := .pools -}}
{{- $ctx := dict "root" $root "spec" $spec -}}
{{- if include "pd-stack.poolAutoscaled" $ctx -}}
{{- $path := printf "%s.keda" (include "pd-stack.poolPath" $ctx) -}}
{{- $keda := $spec.keda -}}
{{- $conn := include "pd-stack.poolConnector" $ctx | fromJson -}}
{{- /* rule PD023: an autoscaler can own the replicas it is given: no KEDA ScaledObject (`modelSpec[].keda`) on a pool that must keep one replica (a 1P1D connector, a decode pool behind LMCache's PD proxy) or on a DisaggregatedSet role that is not `scalingMode: External`; KEDA's replica bounds (min <= max, idle below min); at least one trigger; no scale to zero (`minReplicaCount: 0`, `idleReplicaCount`) on the default triggers, which read only the pool's own engines; no router HPA (`routerSpec.autoscaling`) for the llm-d router or LMCache's PD proxy, none without `resources.requests.cpu`, min <= max */ -}}
{{- if and $conn (eq $conn.pairing "1P1D") (include "pd-stack.flagsOn" (dict "conn" $conn "when" $conn.pairingWhen)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD023] %s: %s (%s) pairs exactly one prefill pod with one decode pod, so its pools keep one replica; remove keda" $path $conn.name $conn.settingsKey) "" -}}
{{- end -}}
{{- if and $proxy (eq (include "pd-stack.poolRole" $ctx) "decode") $conn (hasKey ($conn.routers | default dict) "lmcache-proxy") -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD023] %s: LMCache's PD proxy reaches each decode pool through its Service, where a sender's KV must land on the pod the request decodes on, so a decode pool keeps one replica; remove keda (add decode pools for more)" $path) "" -}}
{{- end -}}
{{- if and (eq (include "pd-stack.poolKind" $ctx) "DisaggregatedSet") (ne (toString $spec.scalingMode) "External") -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD023] %s: the DisaggregatedSet sets this role's replicas itself; set %s.scalingMode: External so that the ScaledObject scales its DisaggregatedSetRoleScaler" $path (include "pd-stack.poolPath" $ctx)) "" -}}
{{- end -}}
{{- $min := max 1 (int (include "pd-stack.kedaMinReplicas" $keda)) -}}
{{- $max := ternary 100 (int $keda.maxReplicaCount) (kindIs "invalid" $keda.maxReplicaCount) -}}
{{- if gt $min $max -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD023] %s.minReplicaCount: %d is above maxReplicaCount %d (KEDA's default maximum is 100); KEDA refuses the ScaledObject" $path $min $max) "" -}}
{{- end -}}
{{- if and (not (kindIs "invalid" $keda.idleReplicaCount)) (ge (int $keda.idleReplicaCount) $min) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD023] %s.idleReplicaCount: %d must be below the minimum of %d (minReplicaCount; 0 counts 1); KEDA refuses the ScaledObject" $path (int $keda.idleReplicaCount) $min) "" -}}
{{- end -}}
{{- if not $keda.triggers -}}
{{- $zero := ternary (printf "idleReplicaCount %d" (int $keda.idleReplicaCount)) "minReplicaCount 0" (not (kindIs "invalid" $keda.idleReplicaCount)) -}}
{{- if or (not (kindIs "invalid" $keda.idleReplicaCount)) (eq (include "pd-stack.kedaMinReplicas" $keda) "0") -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD023] %s: %s lets the pool go to zero replicas, and the default triggers read only its own engines' metrics, which then vanish: nothing would scale it back up; keep minReplicaCount >= 1 without idleReplicaCount, or give triggers that see demand elsewhere" $path $zero) "" -}}
{{- end -}}
{{- end -}}
{{- if and (not $keda.triggers) (not (include "pd-stack.kedaTriggers" $ctx | fromYamlArray)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD023] %s: no trigger: give triggers, or leave waitingRequests above 0 (or set kvCacheUsage or ttftSeconds for the pool's role)" $path) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $scaling := $root.Values.routerSpec.autoscaling | default dict -}}
{{- if and $root.Values.routerSpec.enableRouter $scaling.enabled -}}
{{- $type := include "pd-stack.routerType" $root -}}
{{- if or (eq $type "llm-d") (eq $type "lmcache-proxy") -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD023] routerSpec.autoscaling: routerSpec.type %s runs as one pod (%s); remove autoscaling" $type (ternary "the llm-d endpoint picker keeps the scheduling state: one active replica, the others stand by" "the LMCache senders report each transfer to the one proxy behind the router Service" (eq $type "llm-d"))) "" -}}
{{- end -}}
{{- if not (dig "requests" "cpu" "" ($root.Values.routerSpec.resources | default dict)) -}}
{{- $_ := set $.root.pdStackRefusals "[PD023] routerSpec.autoscaling: scales on CPU utilization, a share of the container's CPU request: set routerSpec.resources.requests.cpu" "" -}}
{{- end -}}
{{- if gt (int ($scaling.minReplicas | default 1)) (int ($scaling.maxReplicas | default 3)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD023] routerSpec.autoscaling.minReplicas: %d is above maxReplicas %d; Kubernetes refuses the HorizontalPodAutoscaler" (int ($scaling.minReplicas | default 1)) (int ($scaling.maxReplicas | default 3))) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
