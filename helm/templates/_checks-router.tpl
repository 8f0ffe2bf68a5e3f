{{/* Checks of the router against the pools. */}}

{{/* Checks of the router against the pools (dict root pools). */}}
{{- define "pd-stack.checks.router" -}}
{{- $root := .root -}}
{{- $router := $root.Values.routerSpec -}}
{{- $type := include "pd-stack.routerType" .root -}}
{{- $pd := include "pd-stack.routesPD" $root -}}
{{- $roles := list -}}
{{- range $spec := .pools -}}{{- $roles = append $roles (include "pd-stack.poolRole" (dict "root" $root "spec" $spec)) -}}{{- end -}}
{{- $both := and (has "prefill" $roles) (has "decode" $roles) -}}
{{- $how := ternary "routerSpec.routingLogic disaggregated_prefill" (printf "routerSpec.type %s" $type) (eq $type "production-stack") -}}
{{- /* rule PD009: PD routing (`disaggregated_prefill`, or `routerSpec.type` vllm-router, lmcache-proxy or llm-d) has both roles; prefill+decode pools have PD routing */ -}}
{{- if and .pools $pd (not $both) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD009] %s: %s routes each request through prefill then decode, but the pools have only role(s) %s: add a prefill and a decode pool, or route without PD" (first (splitList " " $how)) $how (join ", " (uniq $roles | sortAlpha))) "" -}}
{{- end -}}
{{- if and $both (not $pd) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD009] routerSpec.routingLogic: prefill and decode pools exist but the router does not route PD (routerSpec.routingLogic %s): set routerSpec.routingLogic: disaggregated_prefill or routerSpec.type: vllm-router" (toString $router.routingLogic)) "" -}}
{{- end -}}
{{- if $pd -}}
{{- range $spec := .pools -}}
{{- $ctx := dict "root" $root "spec" $spec -}}
{{- $conn := include "pd-stack.poolConnector" $ctx | fromJson -}}
{{- /* rule PD017: the router can route the pools' connector (production-stack's `disaggregated_prefill`: the tutorial's LMCache and PyNccl; vllm-router: NIXL, Mooncake, P2pNccl; lmcache-proxy: LMCache >= 0.3.7; llm-d: NIXL, Mooncake); LMCache's proxy has its script (`lmcacheProxy.scriptConfigMap` or `scriptPath`), the pools' Services (no `serviceDiscovery: k8s`) and one list of receiver ports for all decode pools; vllm-router's `kvConnector` is the one the pools need; static discovery has a prefill and a decode worker; `routerSpec.serviceDiscovery` agrees with `vllmRouter.serviceDiscovery`; the production-stack router's `staticBackends` and `staticModels` come together, one model per backend */ -}}
{{- if and $conn (not (hasKey $conn.routers $type)) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD017] routerSpec.type: %s cannot route %s (%s): %s" $type (include "pd-stack.poolPath" $ctx) $conn.summary (get $conn.notRoutedBy $type)) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $router.extraArgs (ne $type "llm-d") -}}
{{- $command := list -}}
{{- if eq $type "lmcache-proxy" -}}{{- $command = (include "pd-stack.lmcacheProxyCommand" $root | fromYaml).args -}}
{{- else -}}{{- $command = include (ternary "pd-stack.vllmRouterArgs" "pd-stack.productionStackRouterArgs" (eq $type "vllm-router")) $root | fromYamlArray -}}{{- end -}}
{{- include "pd-stack.checks.ownedFlags" (dict "root" $root "args" $router.extraArgs "at" "routerSpec.extraArgs" "command" $command "keys" (dict "routerSpec" $router "routerSpec.vllmRouter" ($router.vllmRouter | default dict))) -}}
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
{{- $_ := set $.pdStackRefusals (printf "[PD017] servingEngineSpec.modelSpec: the engine pools need different vllm-router --kv-connector values (%s); use one connector for the release" (join ", " $needed)) "" -}}
{{- end -}}
{{- if and $vr.kvConnector $needed (ne $vr.kvConnector (first $needed)) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD017] routerSpec.vllmRouter.kvConnector: is %s but the engine pools' connector needs %s; set it to %s or leave it unset" $vr.kvConnector (first $needed) (first $needed)) "" -}}
{{- end -}}
{{- $shared := .Values.routerSpec.serviceDiscovery | default "" -}}
{{- if and $shared $vr.serviceDiscovery (ne $shared $vr.serviceDiscovery) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD017] routerSpec.serviceDiscovery: is %s but routerSpec.vllmRouter.serviceDiscovery is %s: both say how vllm-router finds the engines; set one of them" $shared $vr.serviceDiscovery) "" -}}
{{- end -}}
{{- if eq (include "pd-stack.routerDiscovery" .) "static" -}}
{{- $workers := include "pd-stack.vllmRouterStaticWorkers" . | fromJson -}}
{{- if or (not $workers.prefill) (not $workers.decode) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD017] routerSpec.vllmRouter.%s: serviceDiscovery static needs at least one prefill and one decode URL: set routerSpec.vllmRouter.prefillUrls/decodeUrls or add pools with role prefill and decode" (ternary "prefillUrls" "decodeUrls" (not $workers.prefill))) "" -}}
{{- end -}}
{{- end -}}
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
{{- $_ := set $.pdStackRefusals "[PD017] routerSpec.lmcacheProxy: routerSpec.type lmcache-proxy needs LMCache's proxy script (examples/disagg_prefill/disagg_proxy_server.py), which is neither in the lmcache package nor in the release images lmcache/vllm-openai:vX.Y.Z: set routerSpec.lmcacheProxy.scriptConfigMap to a ConfigMap made from LMCache's repository at your image's tag (tutorial 19), or scriptPath to the script inside the image; not both" "" -}}
{{- end -}}
{{- if eq (toString $router.serviceDiscovery) "k8s" -}}
{{- $_ := set $.pdStackRefusals "[PD017] routerSpec.serviceDiscovery: is k8s but LMCache's PD proxy takes the pools' Services (static): remove routerSpec.serviceDiscovery" "" -}}
{{- end -}}
{{- $pools := include "pd-stack.lmcacheProxyPools" . | fromJson -}}
{{- $first := first ($pools.decodePools | default (list dict)) | default dict -}}
{{- range $pools.decodePools -}}
{{- $path := include "pd-stack.poolPath" (dict "root" $ "spec" (dict "name" .pool)) -}}
{{- if gt (int .replicas) 1 -}}
{{- $_ := set $.pdStackRefusals (printf "[PD014] %s.replicaCount: is %d but LMCache's PD proxy reaches each decode pool through its Service, where a sender's KV must land on the pod the request decodes on: one replica per decode pool (add decode pools for more)" $path (int .replicas)) "" -}}
{{- end -}}
{{- if or (ne .init $first.init) (ne .alloc $first.alloc) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD017] %s.kvTransfer.lmcache: receives on init ports %s and alloc ports %s but decode pool %q on %s and %s: LMCache's PD proxy takes one list for every decode pool; give the decode pools the same tensorParallelSize and kvTransfer.lmcache ports" $path .init .alloc $first.pool $first.init $first.alloc) "" -}}
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
{{- $_ := set $.pdStackRefusals (printf "[PD003] %s.kvTransfer.lmcache.proxyHost: %q is not the LMCache proxy this release deploys (%s): leave it unset" (include "pd-stack.poolPath" $ctx) (toString $lmc.proxyHost) $service) "" -}}
{{- end -}}
{{- if and $lmc.proxyPort (ne (int $lmc.proxyPort) $notify) -}}
{{- $_ := set $.pdStackRefusals (printf "[PD004] %s.kvTransfer.lmcache.proxyPort: is %d but the LMCache proxy listens on %d (routerSpec.lmcacheProxy.notifyPort): leave it unset" (include "pd-stack.poolPath" $ctx) (int $lmc.proxyPort) $notify) "" -}}
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
{{- $_ := set $.pdStackRefusals (printf "[PD017] routerSpec.%s: is set without routerSpec.%s: with serviceDiscovery static give both (one model per backend URL), or neither for one backend per pool Service" (ternary "staticBackends" "staticModels" (not (empty $router.staticBackends))) (ternary "staticModels" "staticBackends" (not (empty $router.staticBackends)))) "" -}}
{{- end -}}
{{- if and $router.staticBackends $router.staticModels -}}
{{- $urls := len (splitList "," $router.staticBackends) -}}
{{- $models := len (splitList "," $router.staticModels) -}}
{{- if ne $urls $models -}}
{{- $_ := set $.pdStackRefusals (printf "[PD017] routerSpec.staticModels: lists %d model(s) but routerSpec.staticBackends %d URL(s): the production-stack router needs one model per backend" $models $urls) "" -}}
{{- end -}}
{{- /* rule PD008: `--prefill-model-labels`/`--decode-model-labels` in the production-stack router's `routerSpec.extraArgs` (comma lists, `--flag=x` too) name existing pools of that role; `disaggregated_prefill` has both flags, and with your own `staticBackends` also `--static-model-labels` */ -}}
{{- if and (eq (toString $router.routingLogic) "disaggregated_prefill") (not (include "pd-stack.extraArgsHave" (dict "root" . "flag" "--static-model-labels"))) -}}
{{- $_ := set $.pdStackRefusals "[PD008] routerSpec.extraArgs: routingLogic disaggregated_prefill with routerSpec.staticBackends needs \"--static-model-labels\", \"<pool name of each backend, comma separated>\": the router finds the prefill and decode backends by these labels" "" -}}
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
{{- include "pd-stack.topology" $root -}}
{{- $flags := $root.pdStackTopology.routerLabelFlags -}}
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
{{- $_ := set $.root.pdStackRefusals (printf "[PD008] routerSpec.extraArgs[%d]: %s has no value; name the %s pools, e.g. a,b" $at $parts._0 $role) "" -}}
{{- end -}}
{{- range $labels -}}
{{- $pool := include "pd-stack.poolByName" (dict "root" $root "name" .) | fromJson -}}
{{- $actual := include "pd-stack.poolRole" (dict "root" $root "spec" $pool) -}}
{{- if not $pool -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD008] routerSpec.extraArgs[%d]: %s names %q, which is not a pool of this release" $at $parts._0 .) "" -}}
{{- else if ne $actual $role -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD008] routerSpec.extraArgs[%d]: %s names %q, a %s pool; list %s pools here" $at $parts._0 . $actual $role) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .pools (eq (toString $root.Values.routerSpec.routingLogic) "disaggregated_prefill") -}}
{{- range $role := list "prefill" "decode" -}}
{{- if not (hasKey $seen $role) -}}
{{- $_ := set $.root.pdStackRefusals (printf "[PD008] routerSpec.extraArgs: routingLogic disaggregated_prefill without --%s-model-labels: the router cannot find the %s pools; add \"--%s-model-labels\", \"<%s pool names>\"" $role $role $role $role) "" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
