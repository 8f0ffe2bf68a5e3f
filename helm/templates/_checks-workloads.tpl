{{/* Checks of engines over several pods and of the DisaggregatedSet. */}}

{{/*
A pool's workload (dict root spec): a multi-node engine has a command form for its vLLM version
(files/workloads.yaml engineForms), DP ranks that divide over its pods, and a KV connector and
router that serve it; the LWS version the values state has what the release uses.
*/}}
{{- define "pd-stack.checks.multiNode" -}}
{{- include "pd-stack.workloadTable" .root -}}
{{- $table := .root.pdStackWorkloads -}}
{{- $path := include "pd-stack.poolPath" . -}}
{{- $nodes := int (include "pd-stack.poolNodes" .) -}}
{{- $dp := int (include "pd-stack.parallelSize" (dict "ctx" . "key" "dataParallelSize")) -}}
{{- if gt $nodes 1 -}}
{{- /* rule PD020: an engine over several pods (`multiNode`) has a launch form for its vLLM version (`helm/files/workloads.yaml`), `dataParallelSize` divisible by `nodes`, and a connector that moves KV from every node (not PyNccl, the tutorial's 1P1D LMCache form or P2pNccl) */ -}}
{{- if and (gt $dp 1) (ne (mod $dp $nodes) 0) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD020] %s.vllmConfig.dataParallelSize: %d does not divide over multiNode.nodes %d: data-parallel ranks spread evenly over the pods (--data-parallel-size-local); make dataParallelSize a multiple of nodes" $path $dp $nodes) "" -}}
{{- end -}}
{{- if not (include "pd-stack.engineForm" . | fromJson) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD020] %s.%s: vLLM %s has no way to run one engine over several pods that pd-stack renders (%s; files/workloads.yaml engineForms); use a newer image or one pod per engine" $path (ternary "vllmVersion" "tag" (not (empty .spec.vllmVersion))) (include "pd-stack.vllmVersion" .) (ternary "data parallel over nodes needs vLLM >= 0.9.0" "needs vLLM >= 0.8.5" (gt $dp 1))) "" -}}
{{- end -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- if and $conn (eq $conn.pairing "1P1D") (include "pd-stack.flagsOn" (dict "conn" $conn "when" $conn.pairingWhen)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD020] %s.%s: %s pairs exactly one prefill pod with one decode pod; a multi-node engine needs a connector that transfers KV from every node (NixlConnector, MooncakeConnector or LMCacheConnectorV1)" $path $conn.chosenBy $conn.name) "" -}}
{{- else if eq (toString $conn.name) "P2pNcclConnector" -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD020] %s.%s: P2pNcclConnector pairs prefill and decode by the addresses of single-pod engines (X-Request-Id); use NixlConnector for engines that span nodes" $path $conn.chosenBy) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The release's DisaggregatedSet (dict root pools): the installed LWS has it and the fields used
(servingEngineSpec.lwsVersion, when stated), and the CRD's own rules hold (kubebuilder markers and
its webhook at LWS v0.10.0): 2 to 10 roles, replicas all > 0 or all 0 over the Static roles, a
topology for a placement policy and no LWS exclusive-topology annotation beside one, no External
role with several slices. scalingMode means something only in a DisaggregatedSet.
*/}}
{{- define "pd-stack.checks.disaggregatedSet" -}}
{{- include "pd-stack.workloadTable" .root -}}
{{- $table := .root.pdStackWorkloads.disaggregatedSet -}}
{{- $engine := .root.Values.servingEngineSpec -}}
{{- $set := $engine.disaggregatedSet | default dict -}}
{{- $at := "servingEngineSpec.disaggregatedSet" -}}
{{- if not $set.enabled -}}
{{- range $spec := .pools -}}
{{- /* rule PD021: `servingEngineSpec.disaggregatedSet` exists in the stated `lwsVersion` (>= 0.9.0; `slices`, `placementPolicy`, External scaling >= 0.10.0) and keeps the CRD's rules (2-10 roles, Static roles all with replicas or none, a topology for a placement policy, no `multiNode.exclusiveTopology` beside one, no External role with several slices); `scalingMode` only with a DisaggregatedSet */ -}}
{{- if $spec.scalingMode -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD021] %s.scalingMode: is set but servingEngineSpec.disaggregatedSet is not enabled: only a DisaggregatedSet role takes its replicas from an autoscaler; remove scalingMode or enable the DisaggregatedSet" (include "pd-stack.poolPath" (dict "root" $.root "spec" $spec))) "" -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $lws := trimPrefix "v" (toString ($engine.lwsVersion | default "")) -}}
{{- if and $lws (not (semverCompare $table.lwsVersions $lws)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD021] %s.enabled: servingEngineSpec.lwsVersion %s has no DisaggregatedSet (%s); upgrade the LWS controller to %s, or render one workload per pool" $at $lws $table.lwsVersionsWhy $table.lwsVersions) "" -}}
{{- end -}}
{{- $external := list -}}
{{- range $spec := .pools -}}{{- if eq (toString $spec.scalingMode) "External" -}}{{- $external = append $external $spec -}}{{- end -}}{{- end -}}
{{- $policy := $set.placementPolicy | default dict -}}
{{- $placed := and $policy.type (ne $policy.type "None") -}}
{{- range $field, $used := dict "slices" (hasKey $set "slices") "placementPolicy" (not (empty $policy)) "externalScaling" (not (empty $external)) -}}
{{- $need := get $table.fields $field -}}
{{- if and $used $lws (not (semverCompare $need.lwsVersions $lws)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD021] %s: %s needs LWS %s (%s) but servingEngineSpec.lwsVersion is %s; remove it or upgrade the LWS controller" (ternary (printf "%s.%s" $at $field) "servingEngineSpec.modelSpec[].scalingMode" (ne $field "externalScaling")) $field $need.lwsVersions $need.why $lws) "" -}}
{{- end -}}
{{- end -}}
{{- $roles := len .pools -}}
{{- if or (lt $roles (int $table.minRoles)) (gt $roles (int $table.maxRoles)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD021] %s.enabled: a DisaggregatedSet has %d to %d roles, one per engine pool, but the release has %d pool(s)" $at (int $table.minRoles) (int $table.maxRoles) $roles) "" -}}
{{- end -}}
{{- $running := list -}}{{- $stopped := list -}}
{{- range $spec := .pools -}}
{{- if ne (toString $spec.scalingMode) "External" -}}
{{- if gt (int (ternary $spec.replicaCount 1 (hasKey $spec "replicaCount"))) 0 -}}{{- $running = append $running $spec.name -}}{{- else -}}{{- $stopped = append $stopped $spec.name -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $running $stopped -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD021] %s.replicaCount: is 0 but pool(s) %s have replicas: in a DisaggregatedSet every Static role has replicas or none has (the CRD's rule); scale them together" (include "pd-stack.poolPath" (dict "root" .root "spec" (dict "name" (first $stopped)))) (join ", " $running)) "" -}}
{{- end -}}
{{- if and $placed (not $policy.topology) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD021] %s.placementPolicy.topology: is required with placementPolicy.type %s: the node label key of a topology domain (e.g. kubernetes.io/hostname)" $at $policy.type) "" -}}
{{- end -}}
{{- range $spec := .pools -}}
{{- if and $placed (dig "exclusiveTopology" "" ($spec.multiNode | default dict)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD021] %s.multiNode.exclusiveTopology: cannot be combined with %s.placementPolicy.type %s (the DisaggregatedSet webhook refuses it: both place groups, and the slice would never schedule); use one of them" (include "pd-stack.poolPath" (dict "root" $.root "spec" $spec)) $at $policy.type) "" -}}
{{- end -}}
{{- end -}}
{{- if and $external (gt (int ($set.slices | default 1)) 1) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD021] %s.slices: is %d but %s.scalingMode is External: the DisaggregatedSet webhook refuses External scaling with more than one slice (alpha restriction in LWS v0.10.0)" $at (int $set.slices) (include "pd-stack.poolPath" (dict "root" .root "spec" (first $external)))) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
