{{/* Checks of the llm-d router. */}}

{{/*
The llm-d router (routerSpec.type llm-d; the root): its endpoint picker finds pods by label, so no
static discovery; gateway settings only in gateway mode, with a Gateway to attach to; one sidecar
--kv-connector (and one Mooncake bootstrap port) for the release; the tensor parallelism llm-d's
P/D guide requires of a pair (files/connectors.yaml routers.llm-d.tp); vLLM's port behind the
sidecar free; the scheduler settings the release has. Facts: _router-llmd.tpl.
*/}}
{{- define "pd-stack.checks.llmd" -}}
{{- $root := . -}}
{{- $llmd := .Values.routerSpec.llmd | default dict -}}
{{- $row := include "pd-stack.llmdRelease" . | fromJson -}}
{{- $gateway := $llmd.gateway | default dict -}}
{{- $mode := include "pd-stack.llmdMode" . -}}
{{- /* rule PD022: the llm-d router (`routerSpec.type: llm-d`): no static discovery (its endpoint picker selects pods by label); gateway mode names a Gateway (`llmd.gateway.name`), standalone mode none; one sidecar `--kv-connector` and one Mooncake bootstrap port for the release; the tensor parallelism llm-d's P/D guide requires (NIXL: decode TP >= prefill TP; Mooncake: equal); vLLM's port behind the sidecar (`llmd.sidecar.modelServerPort`) is neither the engine port nor a connector port; `scheduler.stageOrder` and `scheduler.promptTokens` only from llm-d-router v0.10.0, and no prefix-based decider with `stageOrder: prefill-first`; a raw `scheduler.config` is an EndpointPickerConfig of the release's apiVersion. The schema takes `gateway.failureMode` FailOpen or FailClose only (llm-d's chart README's FailClosed is refused by the InferencePool CRD) and `nonCachedTokens` >= 1 (0 would never disaggregate) */ -}}
{{- if eq (toString .Values.routerSpec.serviceDiscovery) "static" -}}
{{- $_ := set $.pdStackRefusals "[PD022] routerSpec.serviceDiscovery: is static but the llm-d router's endpoint picker finds the release's engine pods by label (or through its InferencePool): remove routerSpec.serviceDiscovery" "" -}}
{{- end -}}
{{- if and (eq $mode "gateway") (ne $gateway.httpRoute false) (not $gateway.name) -}}
{{- $_ := set $.pdStackRefusals "[PD022] routerSpec.llmd.gateway.name: is required with routerSpec.llmd.mode gateway: the HTTPRoute attaches to that Gateway (or set gateway.httpRoute: false and route to the InferencePool yourself)" "" -}}
{{- end -}}
{{- if and (ne $mode "gateway") (or $gateway.name $gateway.namespace $gateway.sectionName) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD022] routerSpec.llmd.gateway.%s: names a Gateway but routerSpec.llmd.mode is standalone, which renders no InferencePool or HTTPRoute: set routerSpec.llmd.mode: gateway, or remove gateway.name, namespace and sectionName" (ternary "name" (ternary "namespace" "sectionName" (not (empty $gateway.namespace))) (not (empty $gateway.name)))) "" -}}
{{- end -}}
{{- $scheduler := $llmd.scheduler | default dict -}}
{{- range $key, $origin := dict "stageOrder" "disagg-profile-handler's stageOrder, PR #2342" "promptTokens" "prefix-based-pd-decider's promptTokens, PR #933" -}}
{{- if and (get $scheduler $key) (not (get $row $key)) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD022] routerSpec.llmd.scheduler.%s: needs llm-d-router v0.10.0 or later (%s) but routerSpec.llmd.version is %s: remove it or use a newer release" $key $origin $row.version) "" -}}
{{- end -}}
{{- end -}}
{{- if and (eq (toString $scheduler.stageOrder) "prefill-first") (eq (toString $scheduler.decider) "prefix-based") -}}
{{- $_ := set $.pdStackRefusals "[PD022] routerSpec.llmd.scheduler.decider: is prefix-based but stageOrder prefill-first runs prefill on every request and takes no decider (disagg-profile-handler refuses one): use decider always, or stageOrder decode-first" "" -}}
{{- end -}}
{{- with $scheduler.config -}}
{{- $config := fromYaml . -}}
{{- if or (hasKey $config "Error") (ne (toString $config.kind) "EndpointPickerConfig") -}}
{{- $_ := set $.pdStackRefusals "[PD022] routerSpec.llmd.scheduler.config: is not an EndpointPickerConfig (a YAML mapping with kind: EndpointPickerConfig): the endpoint picker would not start" "" -}}
{{- else if ne (toString $config.apiVersion) $row.configApiVersion -}}
{{- $_ := set $.pdStackRefusals (printf "[PD022] routerSpec.llmd.scheduler.config: has apiVersion %q but llm-d-router %s reads %s: use that apiVersion" (toString $config.apiVersion) $row.version $row.configApiVersion) "" -}}
{{- end -}}
{{- end -}}
{{- $pools := include "pd-stack.routerPools" (dict "root" . "router" "llm-d") | fromJsonArray -}}
{{- $needed := include "pd-stack.routerPoolsNeed" (dict "root" . "router" "llm-d" "key" "sidecarConnector") | fromJsonArray -}}
{{- if gt (len $needed) 1 -}}
{{- $_ := set $.pdStackRefusals (printf "[PD022] servingEngineSpec.modelSpec: the engine pools need different llm-d sidecar --kv-connector values (%s); use one connector for the release" (join ", " $needed)) "" -}}
{{- end -}}
{{- $bootstrap := include "pd-stack.llmdBootstrapPorts" . | fromJsonArray -}}
{{- range $bootstrap -}}
{{- if ne (int .port) (int (first $bootstrap).port) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD022] %s.kvTransfer.bootstrapPort: is %d but prefill pool %q announces %d: the llm-d sidecar asks every prefill pod on one --mooncake-bootstrap-port; give the prefill pools the same bootstrapPort" (include "pd-stack.poolPath" (dict "root" $root "spec" (dict "name" .pool))) (int .port) (first $bootstrap).pool (int (first $bootstrap).port)) "" -}}
{{- end -}}
{{- end -}}
{{- include "pd-stack.checks.llmdTP" (dict "root" $root "pools" $pools) -}}
{{- $vllmPort := int (include "pd-stack.llmdModelServerPort" .) -}}
{{- $port := int .Values.servingEngineSpec.containerPort -}}
{{- if eq $vllmPort $port -}}
{{- $_ := set $.pdStackRefusals (printf "[PD022] routerSpec.llmd.sidecar.modelServerPort: is %d, servingEngineSpec.containerPort too: in a decode pod the sidecar listens on containerPort and vLLM moves to modelServerPort; give them different ports" $vllmPort) "" -}}
{{- end -}}
{{- range $pools -}}
{{- if eq .role "decode" -}}
{{- range include "pd-stack.connectorPorts" (dict "root" $root "spec" .spec) | fromYamlArray -}}
{{- if eq (int .containerPort) $vllmPort -}}
{{- $_ := set $.pdStackRefusals (printf "[PD022] routerSpec.llmd.sidecar.modelServerPort: %d is also the decode pods' %s port: vLLM's HTTP port behind the sidecar must be free; choose another modelServerPort" $vllmPort .name) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The tensor parallelism llm-d's P/D guide requires of each prefill/decode pair (dict root
pools; pools: pd-stack.routerPools of llm-d): equal (Mooncake), or decode at least prefill (NIXL). */}}
{{- define "pd-stack.checks.llmdTP" -}}
{{- $root := .root -}}
{{- range $p := .pools -}}{{- if eq $p.role "prefill" -}}
{{- range $d := $.pools -}}{{- if eq $d.role "decode" -}}
{{- $path := include "pd-stack.poolPath" (dict "root" $root "spec" $d.spec) -}}
{{- $pTP := int $p.tensorParallel -}}{{- $dTP := int $d.tensorParallel -}}
{{- if and (eq (toString $d.tp) "equal") (ne $pTP $dTP) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD022] %s.vllmConfig.tensorParallelSize: is %d but prefill pool %q has %d: with the llm-d router %s needs the same tensor parallelism on both sides (llm-d's P/D guide)" $path $dTP $p.pool $pTP $d.spec.kvTransfer.connector) "" -}}
{{- end -}}
{{- if and (eq (toString $d.tp) "decodeAtLeastPrefill") (lt $dTP $pTP) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD022] %s.vllmConfig.tensorParallelSize: is %d but prefill pool %q has %d: with the llm-d router %s needs decode TP >= prefill TP (llm-d's P/D guide: the reverse crashes decode); raise the decode pool's TP or lower the prefill pool's" $path $dTP $p.pool $pTP $d.spec.kvTransfer.connector) "" -}}
{{- end -}}
{{- end -}}{{- end -}}
{{- end -}}{{- end -}}
{{- end -}}
