{{/*
The chart's own refusals: every combination that would deploy a silently broken PD pair (or
fail later with a worse message). Each message starts with the id of the `pdctl validate` rule
that refuses the same values (pdctl/rules/) and names the key path; an agreement test keeps the
two in step. Called once, from checks.yaml. Connector facts come from files/connectors.yaml.
*/}}
{{- define "pd-stack.checks" -}}
{{- include "pd-stack.checks.productionStack" . -}}
{{- $pools := include "pd-stack.pools" . | fromJsonArray -}}
{{- if and (ne .Values.servingEngineSpec.enableEngine false) (not $pools) -}}
{{- fail "[PD016] servingEngineSpec.modelSpec has no enabled engine pool but servingEngineSpec.enableEngine is true: add at least one engine pool, or set servingEngineSpec.enableEngine: false to render only the router" -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $i, $spec := .Values.servingEngineSpec.modelSpec | default list -}}
{{- if ne $spec.enabled false -}}
{{- if hasKey $seen $spec.name -}}
{{- fail (printf "[PD006] servingEngineSpec.modelSpec[%d].name %q is used twice (also modelSpec[%s]); pool names must be unique: they name the pool's Deployment and Service" $i $spec.name (get $seen $spec.name)) -}}
{{- end -}}
{{- $_ := set $seen $spec.name (toString $i) -}}
{{- end -}}
{{- end -}}
{{- range $spec := $pools -}}
{{- include "pd-stack.checks.pool" (dict "root" $ "spec" $spec) -}}
{{- end -}}
{{- include "pd-stack.checks.pairs" (dict "root" . "pools" $pools) -}}
{{- include "pd-stack.checks.disaggregatedSet" (dict "root" . "pools" $pools) -}}
{{- if .Values.routerSpec.enableRouter -}}
{{- include "pd-stack.checks.router" (dict "root" . "pools" $pools) -}}
{{- end -}}
{{- include "pd-stack.checks.autoscaling" (dict "root" . "pools" $pools) -}}
{{- include "pd-stack.checks.monitoring" . -}}
{{- end -}}

{{/* Checks of one pool (dict root spec). */}}
{{- define "pd-stack.checks.pool" -}}
{{- $spec := .spec -}}
{{- $path := include "pd-stack.poolPath" . -}}
{{- $role := include "pd-stack.poolRole" . -}}
{{- $gpus := int (include "pd-stack.parallelGPUs" .) -}}
{{- $nodes := int (include "pd-stack.poolNodes" .) -}}
{{- if and (or (hasKey $spec "requestGPU") (gt $gpus 1)) (ne (mul (int ($spec.requestGPU | default 0)) $nodes) $gpus) -}}
{{- if gt $nodes 1 -}}
{{- fail (printf "[PD010] %s.requestGPU is %d per pod on multiNode.nodes %d pods (%d GPUs) but the engine's parallelism needs %d GPUs (vllmConfig.tensorParallelSize x pipelineParallelSize x dataParallelSize = multiNode.nodes x requestGPU); make them agree" $path (int ($spec.requestGPU | default 0)) $nodes (mul (int ($spec.requestGPU | default 0)) $nodes) $gpus) -}}
{{- end -}}
{{- fail (printf "[PD010] %s.requestGPU is %d but the pool's parallelism needs %d GPUs per pod (vllmConfig.tensorParallelSize x pipelineParallelSize x dataParallelSize); make them agree" $path (int ($spec.requestGPU | default 0)) $gpus) -}}
{{- end -}}
{{- include "pd-stack.checks.multiNode" . -}}
{{- range $key, $where := dict "labels" ($spec.labels | default dict) "podLabels" ($spec.podLabels | default dict) "servingEngineSpec.labels" (.root.Values.servingEngineSpec.labels | default dict) -}}
{{- if and (hasKey $where "model") (ne (toString (get $where "model")) $spec.name) -}}
{{- fail (printf "[PD015] %s.model is %q but must equal the pool name %q: the router finds a pool's role by the pod label model" (ternary $key (printf "%s.%s" $path $key) (hasPrefix "servingEngineSpec" $key)) (toString (get $where "model")) $spec.name) -}}
{{- end -}}
{{- end -}}
{{- with include "pd-stack.v0Key" . -}}
{{- include "pd-stack.connectorTable" $.root -}}
{{- $v0 := $.root.pdStackConnectors.v0Engine -}}
{{- if include "pd-stack.vllmViolates" (dict "ctx" $ "c" $v0.vllmVersions) -}}
{{- fail (printf "[PD012] %s.vllmConfig.%s asks for the V0 engine, which vLLM %s does not have (%s); remove vllmConfig.%s: vLLM runs its V1 engine" $path . (include "pd-stack.vllmVersion" $) (trim $v0.why) .) -}}
{{- end -}}
{{- end -}}
{{- $lm := $spec.lmcacheConfig | default dict -}}
{{- $kt := $spec.kvTransfer | default dict -}}
{{- if and $kt $lm.enabled -}}
{{- fail (printf "[PD018] %s: lmcacheConfig (the tutorial's LMCache form) and kvTransfer are mutually exclusive; use one of them" $path) -}}
{{- end -}}
{{- if and $lm.enableNixl (not $lm.enabled) -}}
{{- fail (printf "[PD001] %s.lmcacheConfig.enableNixl is true but lmcacheConfig.enabled is not: NIXL transfer runs inside LMCache; set enabled: true, or drop enableNixl" $path) -}}
{{- end -}}
{{- range $declared := list (list "lmcacheConfig" $lm.kvRole) (list "kvTransfer" $kt.kvRole) -}}
{{- $kvRole := last $declared | default "" -}}
{{- if and $spec.role (or (and (eq $kvRole "kv_producer") (ne $role "prefill")) (and (eq $kvRole "kv_consumer") (ne $role "decode"))) -}}
{{- fail (printf "[PD001] %s.%s.kvRole %q contradicts %s.role %q: prefill pools are kv_producer, decode pools kv_consumer" $path (first $declared) $kvRole $path $role) -}}
{{- end -}}
{{- end -}}
{{- if and $lm.enabled $lm.enableNixl $lm.nixlRole (ne $role (ternary "prefill" "decode" (eq $lm.nixlRole "sender"))) -}}
{{- fail (printf "[PD001] %s is a %s pool by its role keys (role, lmcacheConfig.kvRole) but lmcacheConfig.nixlRole %q makes it the other role: a sender is a kv_producer (prefill), a receiver a kv_consumer (decode); if the roles were swapped between the pools, swap them back" $path $role $lm.nixlRole) -}}
{{- end -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- if and (not $conn) (ne $role "both") -}}
{{- fail (printf "[PD018] %s is a %s pool but transfers no KV: set %s.kvTransfer.connector (or the tutorial's lmcacheConfig)" $path $role $path) -}}
{{- end -}}
{{- if $conn -}}
{{- include "pd-stack.checks.connector" (merge (dict "conn" $conn "path" $path "role" $role) .) -}}
{{- end -}}
{{- end -}}

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
{{- $spec := first (get $byRole $role) -}}
{{- fail (printf "[PD001] %s (pool %q) is a %s pool but no %s pool exists: add one, or make the pool role both" (include "pd-stack.poolPath" (dict "root" $root "spec" $spec)) $spec.name $role $other) -}}
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
{{- if ne ($pConn.name | default "") ($dConn.name | default "") -}}
{{- fail (printf "[PD013] %s uses %s but prefill pool %q uses %s: both sides of a PD pair use the same connector" $dPath ($dConn.name | default "no KV connector") .prefill.name ($pConn.name | default "no KV connector")) -}}
{{- end -}}
{{- $pTP := int (include "pd-stack.parallelSize" (dict "ctx" $p "key" "tensorParallelSize")) -}}
{{- $dTP := int (include "pd-stack.parallelSize" (dict "ctx" $d "key" "tensorParallelSize")) -}}
{{- if and $pConn (not $pConn.heteroTP) (ne $pTP $dTP) -}}
{{- fail (printf "[PD013] %s.vllmConfig.tensorParallelSize is %d but prefill pool %q has %d: %s needs the same tensor parallelism on both sides (NixlConnector allows different)" $dPath $dTP .prefill.name $pTP $pConn.name) -}}
{{- end -}}
{{- $pV := .prefill.vllmConfig | default dict -}}
{{- $dV := .decode.vllmConfig | default dict -}}
{{- $fields := list (list "modelURL" .prefill.modelURL .decode.modelURL) -}}
{{- if and (hasKey $pV "maxModelLen") (hasKey $dV "maxModelLen") -}}
{{- $fields = append $fields (list "vllmConfig.maxModelLen" (toString $pV.maxModelLen) (toString $dV.maxModelLen)) -}}
{{- end -}}
{{- $fields = append $fields (list "vllmConfig.kvCacheDtype" ($pV.kvCacheDtype | default "auto") ($dV.kvCacheDtype | default "auto")) -}}
{{- $pBlock := int ($pV.blockSize | default 16) -}}
{{- $dBlock := int ($dV.blockSize | default 16) -}}
{{- if not (and $pConn.smallerPrefillBlocks (le $pBlock $dBlock)) -}}
{{- $fields = append $fields (list "vllmConfig.blockSize" (toString $pBlock) (toString $dBlock)) -}}
{{- end -}}
{{- range $fields -}}
{{- $key := index . 0 -}}
{{- if ne (toString (index . 1)) (toString (index . 2)) -}}
{{- fail (printf "[PD005] %s.%s is %q but prefill pool %q has %q: the KV cache a prefill pool sends is only usable by a decode pool with the same %s" $dPath $key (toString (index . 2)) $.prefill.name (toString (index . 1)) $key) -}}
{{- end -}}
{{- end -}}
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

{{/* Checks of the router against the pools (dict root pools). */}}
{{- define "pd-stack.checks.router" -}}
{{- $root := .root -}}
{{- $router := $root.Values.routerSpec -}}
{{- $type := $router.type | default "production-stack" -}}
{{- $pd := include "pd-stack.routesPD" $root -}}
{{- $roles := list -}}
{{- range $spec := .pools -}}{{- $roles = append $roles (include "pd-stack.poolRole" (dict "root" $root "spec" $spec)) -}}{{- end -}}
{{- $both := and (has "prefill" $roles) (has "decode" $roles) -}}
{{- $how := ternary "routerSpec.routingLogic disaggregated_prefill" (printf "routerSpec.type %s" $type) (eq $type "production-stack") -}}
{{- if and .pools $pd (not $both) -}}
{{- fail (printf "[PD009] %s routes each request through prefill then decode, but the pools have only role(s) %s: add a prefill and a decode pool, or route without PD" $how (join ", " (uniq $roles | sortAlpha))) -}}
{{- end -}}
{{- if and $both (not $pd) -}}
{{- fail (printf "[PD009] prefill and decode pools exist but the router does not route PD (routerSpec.routingLogic %s): set routerSpec.routingLogic: disaggregated_prefill or routerSpec.type: vllm-router" (toString $router.routingLogic)) -}}
{{- end -}}
{{- if $pd -}}
{{- range $spec := .pools -}}
{{- $ctx := dict "root" $root "spec" $spec -}}
{{- $conn := include "pd-stack.poolConnector" $ctx | fromJson -}}
{{- if and $conn (not (hasKey $conn.routers $type)) -}}
{{- fail (printf "[PD017] routerSpec.type %s cannot route %s (%s): %s" $type (include "pd-stack.poolPath" $ctx) $conn.summary (get $conn.notRoutedBy $type)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if eq $type "vllm-router" -}}
{{- include "pd-stack.checks.vllmRouter" $root -}}
{{- else if eq $type "lmcache-proxy" -}}
{{- include "pd-stack.checks.lmcacheProxy" $root -}}
{{- else if eq $type "llm-d" -}}
{{- include "pd-stack.checks.llmd" $root -}}
{{- else -}}
{{- include "pd-stack.checks.staticBackends" $root -}}
{{- include "pd-stack.checks.routerLabels" . -}}
{{- end -}}
{{- end -}}

{{/* vllm-router's --kv-connector agrees with the pools, and static mode has workers (the root). */}}
{{- define "pd-stack.checks.vllmRouter" -}}
{{- $vr := .Values.routerSpec.vllmRouter | default dict -}}
{{- $needed := include "pd-stack.routerPoolsNeed" (dict "root" . "router" "vllm-router" "key" "kvConnector") | fromJsonArray -}}
{{- if gt (len $needed) 1 -}}
{{- fail (printf "[PD017] the engine pools need different vllm-router --kv-connector values (%s); use one connector for the release" (join ", " $needed)) -}}
{{- end -}}
{{- if and $vr.kvConnector $needed (ne $vr.kvConnector (first $needed)) -}}
{{- fail (printf "[PD017] routerSpec.vllmRouter.kvConnector is %s but the engine pools' connector needs %s; set it to %s or leave it unset" $vr.kvConnector (first $needed) (first $needed)) -}}
{{- end -}}
{{- $shared := .Values.routerSpec.serviceDiscovery | default "" -}}
{{- if and $shared $vr.serviceDiscovery (ne $shared $vr.serviceDiscovery) -}}
{{- fail (printf "[PD017] routerSpec.serviceDiscovery is %s but routerSpec.vllmRouter.serviceDiscovery is %s: both say how vllm-router finds the engines; set one of them" $shared $vr.serviceDiscovery) -}}
{{- end -}}
{{- if eq (include "pd-stack.routerDiscovery" .) "static" -}}
{{- $workers := include "pd-stack.vllmRouterStaticWorkers" . | fromJson -}}
{{- if or (not $workers.prefill) (not $workers.decode) -}}
{{- fail (printf "[PD017] %s static needs at least one prefill and one decode URL: set routerSpec.vllmRouter.prefillUrls/decodeUrls or add pools with role prefill and decode" (ternary "routerSpec.serviceDiscovery" "routerSpec.vllmRouter.serviceDiscovery" (ne $shared ""))) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The llm-d router (routerSpec.type llm-d; the root): its endpoint picker finds pods by label, so no
static discovery; gateway settings only in gateway mode, with a Gateway to attach to; one sidecar
--kv-connector (and one Mooncake bootstrap port) for the release; the tensor parallelism llm-d's
P/D guide requires of a pair (files/connectors.yaml routers.llm-d.tp); vLLM's port behind the
sidecar free; the scheduler settings the release has. Facts: _router-llmd.tpl.
*/}}
{{- define "pd-stack.checks.llmd" -}}
{{- $root := . -}}
{{- $llmd := include "pd-stack.llmdValues" . | fromJson -}}
{{- $row := include "pd-stack.llmdRelease" . | fromJson -}}
{{- $gateway := $llmd.gateway | default dict -}}
{{- $mode := include "pd-stack.llmdMode" . -}}
{{- if eq (toString .Values.routerSpec.serviceDiscovery) "static" -}}
{{- fail "[PD022] routerSpec.serviceDiscovery is static but the llm-d router's endpoint picker finds the release's engine pods by label (or through its InferencePool): remove routerSpec.serviceDiscovery" -}}
{{- end -}}
{{- if and (eq $mode "gateway") (ne $gateway.httpRoute false) (not $gateway.name) -}}
{{- fail "[PD022] routerSpec.llmd.gateway.name is required with routerSpec.llmd.mode gateway: the HTTPRoute attaches to that Gateway (or set gateway.httpRoute: false and route to the InferencePool yourself)" -}}
{{- end -}}
{{- if and (ne $mode "gateway") (or $gateway.name $gateway.namespace $gateway.sectionName) -}}
{{- fail "[PD022] routerSpec.llmd.gateway names a Gateway but routerSpec.llmd.mode is standalone, which renders no InferencePool or HTTPRoute: set routerSpec.llmd.mode: gateway, or remove gateway.name, namespace and sectionName" -}}
{{- end -}}
{{- $scheduler := $llmd.scheduler | default dict -}}
{{- range $key, $origin := dict "stageOrder" "disagg-profile-handler's stageOrder, PR #2342" "promptTokens" "prefix-based-pd-decider's promptTokens, PR #933" -}}
{{- if and (get $scheduler $key) (not (get $row $key)) -}}
{{- fail (printf "[PD022] routerSpec.llmd.scheduler.%s needs llm-d-router v0.10.0 or later (%s) but routerSpec.llmd.version is %s: remove it or use a newer release" $key $origin $row.version) -}}
{{- end -}}
{{- end -}}
{{- if and (eq (toString $scheduler.stageOrder) "prefill-first") (eq (toString $scheduler.decider) "prefix-based") -}}
{{- fail "[PD022] routerSpec.llmd.scheduler.decider is prefix-based but stageOrder prefill-first runs prefill on every request and takes no decider (disagg-profile-handler refuses one): use decider always, or stageOrder decode-first" -}}
{{- end -}}
{{- with $scheduler.config -}}
{{- $config := fromYaml . -}}
{{- if or (hasKey $config "Error") (ne (toString $config.kind) "EndpointPickerConfig") -}}
{{- fail "[PD022] routerSpec.llmd.scheduler.config is not an EndpointPickerConfig (a YAML mapping with kind: EndpointPickerConfig): the endpoint picker would not start" -}}
{{- end -}}
{{- if ne (toString $config.apiVersion) $row.configApiVersion -}}
{{- fail (printf "[PD022] routerSpec.llmd.scheduler.config has apiVersion %q but llm-d-router %s reads %s: use that apiVersion" (toString $config.apiVersion) $row.version $row.configApiVersion) -}}
{{- end -}}
{{- end -}}
{{- $pools := include "pd-stack.routerPools" (dict "root" . "router" "llm-d") | fromJsonArray -}}
{{- $needed := include "pd-stack.routerPoolsNeed" (dict "root" . "router" "llm-d" "key" "sidecarConnector") | fromJsonArray -}}
{{- if gt (len $needed) 1 -}}
{{- fail (printf "[PD022] the engine pools need different llm-d sidecar --kv-connector values (%s); use one connector for the release" (join ", " $needed)) -}}
{{- end -}}
{{- $bootstrap := include "pd-stack.llmdBootstrapPorts" . | fromJsonArray -}}
{{- range $bootstrap -}}
{{- if ne (int .port) (int (first $bootstrap).port) -}}
{{- fail (printf "[PD022] %s.kvTransfer.bootstrapPort is %d but prefill pool %q announces %d: the llm-d sidecar asks every prefill pod on one --mooncake-bootstrap-port; give the prefill pools the same bootstrapPort" (include "pd-stack.poolPath" (dict "root" $root "spec" (dict "name" .pool))) (int .port) (first $bootstrap).pool (int (first $bootstrap).port)) -}}
{{- end -}}
{{- end -}}
{{- include "pd-stack.checks.llmdTP" (dict "root" $root "pools" $pools) -}}
{{- $vllmPort := int (include "pd-stack.llmdModelServerPort" .) -}}
{{- $port := int .Values.servingEngineSpec.containerPort -}}
{{- if eq $vllmPort $port -}}
{{- fail (printf "[PD022] routerSpec.llmd.sidecar.modelServerPort is %d, servingEngineSpec.containerPort too: in a decode pod the sidecar listens on containerPort and vLLM moves to modelServerPort; give them different ports" $vllmPort) -}}
{{- end -}}
{{- range $pools -}}
{{- if eq .role "decode" -}}
{{- range include "pd-stack.connectorPorts" (dict "root" $root "spec" .spec) | fromYamlArray -}}
{{- if eq (int .containerPort) $vllmPort -}}
{{- fail (printf "[PD022] routerSpec.llmd.sidecar.modelServerPort %d is also the decode pods' %s port: vLLM's HTTP port behind the sidecar must be free; choose another modelServerPort" $vllmPort .name) -}}
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
{{- fail (printf "[PD022] %s.vllmConfig.tensorParallelSize is %d but prefill pool %q has %d: with the llm-d router %s needs the same tensor parallelism on both sides (llm-d's P/D guide)" $path $dTP $p.pool $pTP $d.spec.kvTransfer.connector) -}}
{{- end -}}
{{- if and (eq (toString $d.tp) "decodeAtLeastPrefill") (lt $dTP $pTP) -}}
{{- fail (printf "[PD022] %s.vllmConfig.tensorParallelSize is %d but prefill pool %q has %d: with the llm-d router %s needs decode TP >= prefill TP (llm-d's P/D guide: the reverse crashes decode); raise the decode pool's TP or lower the prefill pool's" $path $dTP $p.pool $pTP $d.spec.kvTransfer.connector) -}}
{{- end -}}
{{- end -}}{{- end -}}
{{- end -}}{{- end -}}
{{- end -}}

{{/*
LMCache's PD proxy (routerSpec.type lmcache-proxy; the root): its script is given one way; it takes
the pools' Services, not Kubernetes discovery; one list of receiver ports serves every decode pool
(LMCache 0.3.7 disagg_proxy_server.py --decoder-init-port/--decoder-alloc-port), so the decode
pools agree on them; it reaches each decode pool through its Service, which takes one pod (the
sender opens the receiver's init and alloc ports through it); LMCache senders report to this proxy.
*/}}
{{- define "pd-stack.checks.lmcacheProxy" -}}
{{- $router := .Values.routerSpec -}}
{{- $lp := $router.lmcacheProxy | default dict -}}
{{- if eq (empty $lp.scriptConfigMap) (empty $lp.scriptPath) -}}
{{- fail "[PD017] routerSpec.type lmcache-proxy needs LMCache's proxy script (examples/disagg_prefill/disagg_proxy_server.py), which is neither in the lmcache package nor in the release images lmcache/vllm-openai:vX.Y.Z: set routerSpec.lmcacheProxy.scriptConfigMap to a ConfigMap made from LMCache's repository at your image's tag (tutorial 19), or scriptPath to the script inside the image; not both" -}}
{{- end -}}
{{- if eq (toString $router.serviceDiscovery) "k8s" -}}
{{- fail "[PD017] routerSpec.serviceDiscovery is k8s but LMCache's PD proxy takes the pools' Services (static): remove routerSpec.serviceDiscovery" -}}
{{- end -}}
{{- $pools := include "pd-stack.lmcacheProxyPools" . | fromJson -}}
{{- $first := first ($pools.decodePools | default (list dict)) | default dict -}}
{{- range $pools.decodePools -}}
{{- $path := include "pd-stack.poolPath" (dict "root" $ "spec" (dict "name" .pool)) -}}
{{- if gt (int .replicas) 1 -}}
{{- fail (printf "[PD014] %s.replicaCount is %d but LMCache's PD proxy reaches each decode pool through its Service, where a sender's KV must land on the pod the request decodes on: one replica per decode pool (add decode pools for more)" $path (int .replicas)) -}}
{{- end -}}
{{- if or (ne .init $first.init) (ne .alloc $first.alloc) -}}
{{- fail (printf "[PD017] %s receives on init ports %s and alloc ports %s but decode pool %q on %s and %s: LMCache's PD proxy takes one list for every decode pool; give the decode pools the same tensorParallelSize and kvTransfer.lmcache ports" $path .init .alloc $first.pool $first.init $first.alloc) -}}
{{- end -}}
{{- end -}}
{{- $service := include "pd-stack.routerServiceName" . -}}
{{- $hostPattern := printf "^%s(\\.%s(\\.svc(\\.cluster\\.local)?)?)?$" (regexQuoteMeta $service) (regexQuoteMeta .Release.Namespace) -}}
{{- $notify := int (include "pd-stack.lmcacheProxyNotifyPort" .) -}}
{{- range $spec := include "pd-stack.pools" . | fromJsonArray -}}
{{- $ctx := dict "root" $ "spec" $spec -}}
{{- $lmc := dig "kvTransfer" "lmcache" dict $spec -}}
{{- if and (eq (include "pd-stack.kvRole" $ctx) "kv_producer") (hasKey ((include "pd-stack.poolConnector" $ctx | fromJson).routers | default dict) "lmcache-proxy") -}}
{{- if and $lmc.proxyHost (not (regexMatch $hostPattern (toString $lmc.proxyHost))) -}}
{{- fail (printf "[PD003] %s.kvTransfer.lmcache.proxyHost %q is not the LMCache proxy this release deploys (%s): leave it unset" (include "pd-stack.poolPath" $ctx) (toString $lmc.proxyHost) $service) -}}
{{- end -}}
{{- if and $lmc.proxyPort (ne (int $lmc.proxyPort) $notify) -}}
{{- fail (printf "[PD004] %s.kvTransfer.lmcache.proxyPort is %d but the LMCache proxy listens on %d (routerSpec.lmcacheProxy.notifyPort): leave it unset" (include "pd-stack.poolPath" $ctx) (int $lmc.proxyPort) $notify) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The production-stack router's static backends (routerSpec.serviceDiscovery static; the root):
staticBackends and staticModels go together, one model per backend (the router asserts it at
start, src/vllm_router/service_discovery.py StaticServiceDiscovery); with your own backends,
disaggregated_prefill tells prefill from decode only by --static-model-labels.
*/}}
{{- define "pd-stack.checks.staticBackends" -}}
{{- $router := .Values.routerSpec -}}
{{- if eq (include "pd-stack.routerDiscovery" .) "static" -}}
{{- if and (or $router.staticBackends $router.staticModels) (not (and $router.staticBackends $router.staticModels)) -}}
{{- fail (printf "[PD017] routerSpec.%s is set without routerSpec.%s: with serviceDiscovery static give both (one model per backend URL), or neither for one backend per pool Service" (ternary "staticBackends" "staticModels" (not (empty $router.staticBackends))) (ternary "staticModels" "staticBackends" (not (empty $router.staticBackends)))) -}}
{{- end -}}
{{- if $router.staticBackends -}}
{{- $urls := len (splitList "," $router.staticBackends) -}}
{{- $models := len (splitList "," $router.staticModels) -}}
{{- if ne $urls $models -}}
{{- fail (printf "[PD017] routerSpec.staticBackends lists %d URL(s) but routerSpec.staticModels %d model(s): the production-stack router needs one model per backend" $urls $models) -}}
{{- end -}}
{{- if and (eq (toString $router.routingLogic) "disaggregated_prefill") (not (include "pd-stack.extraArgsHave" (dict "root" . "flag" "--static-model-labels"))) -}}
{{- fail "[PD008] routerSpec.extraArgs: routingLogic disaggregated_prefill with routerSpec.staticBackends needs \"--static-model-labels\", \"<pool name of each backend, comma separated>\": the router finds the prefill and decode backends by these labels" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The production-stack router's --prefill-model-labels/--decode-model-labels in routerSpec.extraArgs
(a comma list, as the next argument or inline with =) name pools of that role; with routingLogic
disaggregated_prefill both flags are present (dict root pools).
*/}}
{{- define "pd-stack.checks.routerLabels" -}}
{{- $root := .root -}}
{{- $args := $root.Values.routerSpec.extraArgs | default list -}}
{{- $flags := dict "--prefill-model-labels" "prefill" "--decode-model-labels" "decode" -}}
{{- $seen := dict -}}
{{- range $i, $arg := $args -}}
{{- $parts := splitn "=" 2 (toString $arg) -}}
{{- $role := get $flags $parts._0 -}}
{{- if $role -}}
{{- $_ := set $seen $role true -}}
{{- $at := $i -}}
{{- $text := $parts._1 | default "" -}}
{{- if and (eq (len $parts) 1) (lt (add1 $i) (len $args)) -}}
{{- $at = add1 $i -}}
{{- $text = toString (index $args (add1 $i)) -}}
{{- end -}}
{{- $labels := compact (splitList "," $text) -}}
{{- if not $labels -}}
{{- fail (printf "[PD008] routerSpec.extraArgs[%d]: %s has no value; name the %s pools, e.g. a,b" $at $parts._0 $role) -}}
{{- end -}}
{{- range $labels -}}
{{- $pool := include "pd-stack.poolByName" (dict "root" $root "name" .) | fromJson -}}
{{- if not $pool -}}
{{- fail (printf "[PD008] routerSpec.extraArgs[%d]: %s names %q, which is not a pool of this release" $at $parts._0 .) -}}
{{- end -}}
{{- $actual := include "pd-stack.poolRole" (dict "root" $root "spec" $pool) -}}
{{- if ne $actual $role -}}
{{- fail (printf "[PD008] routerSpec.extraArgs[%d]: %s names %q, a %s pool; list %s pools here" $at $parts._0 . $actual $role) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .pools (eq (toString $root.Values.routerSpec.routingLogic) "disaggregated_prefill") -}}
{{- range $role := list "prefill" "decode" -}}
{{- if not (hasKey $seen $role) -}}
{{- fail (printf "[PD008] routerSpec.extraArgs: routingLogic disaggregated_prefill without --%s-model-labels: the router cannot find the %s pools; add \"--%s-model-labels\", \"<%s pool names>\"" $role $role $role $role) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
production-stack keys pd-stack refuses (files/production-stack.yaml, status refused, or refusedBy
the routerSpec.type in use), each when used: a mapping with `enabled` when that is true (or the
subkey `usedWhen` names when set), any other mapping or list when not empty, a scalar when set.
*/}}
{{- define "pd-stack.checks.productionStack" -}}
{{- $table := .Files.Get "files/production-stack.yaml" | fromYaml -}}
{{- range $path, $entry := $table.keys -}}
{{- if eq $entry.status "refused" -}}
{{- range include "pd-stack.usedKeys" (dict "node" $.Values "parts" (splitList "." $path) "at" "" "usedWhen" ($entry.usedWhen | default "")) | fromJsonArray -}}
{{- fail (printf "[PD019] %s: production-stack's %s is not supported by pd-stack: %s" . (last (splitList "." $path)) (trim (replace "\n" " " $entry.note))) -}}
{{- end -}}
{{- end -}}
{{- /* Keys of the production-stack router's own flags: refused with another router type. */ -}}
{{- $type := $.Values.routerSpec.type | default "production-stack" -}}
{{- with get ($entry.refusedBy | default dict) $type -}}
{{- $why := . -}}
{{- range include "pd-stack.usedKeys" (dict "node" $.Values "parts" (splitList "." $path) "at" "" "usedWhen" ($entry.usedWhen | default "")) | fromJsonArray -}}
{{- fail (printf "[PD019] %s: production-stack's %s is not supported with routerSpec.type %s: %s" . (last (splitList "." $path)) $type (trim (replace "\n" " " $why))) -}}
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
{{- if and (gt $dp 1) (ne (mod $dp $nodes) 0) -}}
{{- fail (printf "[PD020] %s.vllmConfig.dataParallelSize %d does not divide over multiNode.nodes %d: data-parallel ranks spread evenly over the pods (--data-parallel-size-local); make dataParallelSize a multiple of nodes" $path $dp $nodes) -}}
{{- end -}}
{{- if not (include "pd-stack.engineForm" . | fromJson) -}}
{{- fail (printf "[PD020] %s.multiNode: vLLM %s has no way to run one engine over several pods that pd-stack renders (%s; files/workloads.yaml engineForms); use a newer image or one pod per engine" $path (include "pd-stack.vllmVersion" .) (ternary "data parallel over nodes needs vLLM >= 0.9.0" "needs vLLM >= 0.8.5" (gt $dp 1))) -}}
{{- end -}}
{{- $conn := include "pd-stack.poolConnector" . | fromJson -}}
{{- if and $conn (eq $conn.pairing "1P1D") (include "pd-stack.flagsOn" (dict "conn" $conn "when" $conn.pairingWhen)) -}}
{{- fail (printf "[PD020] %s.multiNode: %s pairs exactly one prefill pod with one decode pod; a multi-node engine needs a connector that transfers KV from every node (NixlConnector, MooncakeConnector or LMCacheConnectorV1)" $path $conn.name) -}}
{{- end -}}
{{- if eq (toString $conn.name) "P2pNcclConnector" -}}
{{- fail (printf "[PD020] %s.multiNode: P2pNcclConnector pairs prefill and decode by the addresses of single-pod engines (X-Request-Id); use NixlConnector for engines that span nodes" $path) -}}
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
{{- if $spec.scalingMode -}}
{{- fail (printf "[PD021] %s.scalingMode is set but servingEngineSpec.disaggregatedSet is not enabled: only a DisaggregatedSet role takes its replicas from an autoscaler; remove scalingMode or enable the DisaggregatedSet" (include "pd-stack.poolPath" (dict "root" $.root "spec" $spec))) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $lws := trimPrefix "v" (toString ($engine.lwsVersion | default "")) -}}
{{- if and $lws (not (semverCompare $table.lwsVersions $lws)) -}}
{{- fail (printf "[PD021] %s.enabled: servingEngineSpec.lwsVersion %s has no DisaggregatedSet (%s); upgrade the LWS controller to %s, or render one workload per pool" $at $lws $table.lwsVersionsWhy $table.lwsVersions) -}}
{{- end -}}
{{- $external := list -}}
{{- range $spec := .pools -}}{{- if eq (toString $spec.scalingMode) "External" -}}{{- $external = append $external $spec -}}{{- end -}}{{- end -}}
{{- $policy := $set.placementPolicy | default dict -}}
{{- $placed := and $policy.type (ne $policy.type "None") -}}
{{- range $field, $used := dict "slices" (hasKey $set "slices") "placementPolicy" (not (empty $policy)) "externalScaling" (not (empty $external)) -}}
{{- $need := get $table.fields $field -}}
{{- if and $used $lws (not (semverCompare $need.lwsVersions $lws)) -}}
{{- fail (printf "[PD021] %s: %s needs LWS %s (%s) but servingEngineSpec.lwsVersion is %s; remove it or upgrade the LWS controller" (ternary (printf "%s.%s" $at $field) "servingEngineSpec.modelSpec[].scalingMode" (ne $field "externalScaling")) $field $need.lwsVersions $need.why $lws) -}}
{{- end -}}
{{- end -}}
{{- $roles := len .pools -}}
{{- if or (lt $roles (int $table.minRoles)) (gt $roles (int $table.maxRoles)) -}}
{{- fail (printf "[PD021] %s.enabled: a DisaggregatedSet has %d to %d roles, one per engine pool, but the release has %d pool(s)" $at (int $table.minRoles) (int $table.maxRoles) $roles) -}}
{{- end -}}
{{- $running := list -}}{{- $stopped := list -}}
{{- range $spec := .pools -}}
{{- if ne (toString $spec.scalingMode) "External" -}}
{{- if gt (int (ternary $spec.replicaCount 1 (hasKey $spec "replicaCount"))) 0 -}}{{- $running = append $running $spec.name -}}{{- else -}}{{- $stopped = append $stopped $spec.name -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $running $stopped -}}
{{- fail (printf "[PD021] %s.replicaCount is 0 but pool(s) %s have replicas: in a DisaggregatedSet every Static role has replicas or none has (the CRD's rule); scale them together" (include "pd-stack.poolPath" (dict "root" .root "spec" (dict "name" (first $stopped)))) (join ", " $running)) -}}
{{- end -}}
{{- if and $placed (not $policy.topology) -}}
{{- fail (printf "[PD021] %s.placementPolicy.topology is required with placementPolicy.type %s: the node label key of a topology domain (e.g. kubernetes.io/hostname)" $at $policy.type) -}}
{{- end -}}
{{- range $spec := .pools -}}
{{- if and $placed (dig "exclusiveTopology" "" ($spec.multiNode | default dict)) -}}
{{- fail (printf "[PD021] %s.multiNode.exclusiveTopology cannot be combined with %s.placementPolicy.type %s (the DisaggregatedSet webhook refuses it: both place groups, and the slice would never schedule); use one of them" (include "pd-stack.poolPath" (dict "root" $.root "spec" $spec)) $at $policy.type) -}}
{{- end -}}
{{- end -}}
{{- if and $external (gt (int ($set.slices | default 1)) 1) -}}
{{- fail (printf "[PD021] %s.slices is %d but %s.scalingMode is External: the DisaggregatedSet webhook refuses External scaling with more than one slice (alpha restriction in LWS v0.10.0)" $at (int $set.slices) (include "pd-stack.poolPath" (dict "root" .root "spec" (first $external)))) -}}
{{- end -}}
{{- end -}}
{{- end -}}

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
{{- if and $conn (eq $conn.pairing "1P1D") (include "pd-stack.flagsOn" (dict "conn" $conn "when" $conn.pairingWhen)) -}}
{{- fail (printf "[PD023] %s: %s (%s) pairs exactly one prefill pod with one decode pod, so its pools keep one replica; remove keda" $path $conn.name $conn.settingsKey) -}}
{{- end -}}
{{- if and $proxy (eq (include "pd-stack.poolRole" $ctx) "decode") $conn (hasKey ($conn.routers | default dict) "lmcache-proxy") -}}
{{- fail (printf "[PD023] %s: LMCache's PD proxy reaches each decode pool through its Service, where a sender's KV must land on the pod the request decodes on, so a decode pool keeps one replica; remove keda (add decode pools for more)" $path) -}}
{{- end -}}
{{- if and (eq (include "pd-stack.poolKind" $ctx) "DisaggregatedSet") (ne (toString $spec.scalingMode) "External") -}}
{{- fail (printf "[PD023] %s: the DisaggregatedSet sets this role's replicas itself; set %s.scalingMode: External so that the ScaledObject scales its DisaggregatedSetRoleScaler" $path (include "pd-stack.poolPath" $ctx)) -}}
{{- end -}}
{{- $min := max 1 (int (include "pd-stack.kedaMinReplicas" $keda)) -}}
{{- $max := ternary 100 (int $keda.maxReplicaCount) (kindIs "invalid" $keda.maxReplicaCount) -}}
{{- if gt $min $max -}}
{{- fail (printf "[PD023] %s.minReplicaCount %d is above maxReplicaCount %d (KEDA's default maximum is 100); KEDA refuses the ScaledObject" $path $min $max) -}}
{{- end -}}
{{- if and (not (kindIs "invalid" $keda.idleReplicaCount)) (ge (int $keda.idleReplicaCount) $min) -}}
{{- fail (printf "[PD023] %s.idleReplicaCount %d must be below the minimum of %d (minReplicaCount; 0 counts 1); KEDA refuses the ScaledObject" $path (int $keda.idleReplicaCount) $min) -}}
{{- end -}}
{{- if not $keda.triggers -}}
{{- $zero := ternary (printf "idleReplicaCount %d" (int $keda.idleReplicaCount)) "minReplicaCount 0" (not (kindIs "invalid" $keda.idleReplicaCount)) -}}
{{- if or (not (kindIs "invalid" $keda.idleReplicaCount)) (eq (include "pd-stack.kedaMinReplicas" $keda) "0") -}}
{{- fail (printf "[PD023] %s: %s lets the pool go to zero replicas, and the default triggers read only its own engines' metrics, which then vanish: nothing would scale it back up; keep minReplicaCount >= 1 without idleReplicaCount, or give triggers that see demand elsewhere" $path $zero) -}}
{{- end -}}
{{- end -}}
{{- if and (not $keda.triggers) (not (include "pd-stack.kedaTriggers" $ctx | fromYamlArray)) -}}
{{- fail (printf "[PD023] %s has no trigger: give triggers, or leave waitingRequests above 0 (or set kvCacheUsage or ttftSeconds for the pool's role)" $path) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $scaling := $root.Values.routerSpec.autoscaling | default dict -}}
{{- if and $root.Values.routerSpec.enableRouter $scaling.enabled -}}
{{- $type := include "pd-stack.routerType" $root -}}
{{- if or (eq $type "llm-d") (eq $type "lmcache-proxy") -}}
{{- fail (printf "[PD023] routerSpec.autoscaling: routerSpec.type %s runs as one pod (%s); remove autoscaling" $type (ternary "the llm-d endpoint picker keeps the scheduling state: one active replica, the others stand by" "the LMCache senders report each transfer to the one proxy behind the router Service" (eq $type "llm-d"))) -}}
{{- end -}}
{{- if not (dig "requests" "cpu" "" ($root.Values.routerSpec.resources | default dict)) -}}
{{- fail "[PD023] routerSpec.autoscaling scales on CPU utilization, a share of the container's CPU request: set routerSpec.resources.requests.cpu" -}}
{{- end -}}
{{- if gt (int ($scaling.minReplicas | default 1)) (int ($scaling.maxReplicas | default 3)) -}}
{{- fail (printf "[PD023] routerSpec.autoscaling.minReplicas %d is above maxReplicas %d; Kubernetes refuses the HorizontalPodAutoscaler" (int ($scaling.minReplicas | default 1)) (int ($scaling.maxReplicas | default 3))) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Monitors that would scrape nothing or twice (PD024): a ServiceMonitor and a PodMonitor of the same
pods, and a router monitor for LMCache's PD proxy, which exports no metrics. */}}
{{- define "pd-stack.checks.monitoring" -}}
{{- range $where := list "servingEngineSpec" "routerSpec" -}}
{{- $spec := get $.Values $where -}}
{{- if and (dig "serviceMonitor" "enabled" false $spec) (dig "podMonitor" "enabled" false $spec) -}}
{{- fail (printf "[PD024] %s.serviceMonitor and %s.podMonitor are both enabled: Prometheus would scrape every pod twice and double every sum; enable one" $where $where) -}}
{{- end -}}
{{- end -}}
{{- $router := .Values.routerSpec -}}
{{- if and $router.enableRouter (not (include "pd-stack.routerMetricsPort" .)) -}}
{{- range $kind := list "serviceMonitor" "podMonitor" -}}
{{- if dig $kind "enabled" false $router -}}
{{- fail (printf "[PD024] routerSpec.%s: routerSpec.type %s exports no Prometheus metrics (LMCache's PD proxy serves only its completion routes); disable it" $kind (include "pd-stack.routerType" $)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
