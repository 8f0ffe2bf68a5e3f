{{/*
The PD router: which one (routerSpec.type), what it discovers, and its command line. Whether a
router can route the pools' connector is a fact of files/connectors.yaml (routers, notRoutedBy),
checked in _checks-router.tpl.
*/}}

{{/* routerSpec.type (files/topology.yaml routerTypes; values.yaml has the default). */}}
{{- define "pd-stack.routerType" -}}
{{- .Values.routerSpec.type -}}
{{- end -}}

{{/* "true" when routerSpec.type is vllm-router (the default is the production-stack router). */}}
{{- define "pd-stack.isVllmRouter" -}}
{{- if eq (include "pd-stack.routerType" .) "vllm-router" -}}true{{- end -}}
{{- end -}}

{{/* "true" when the chart deploys LMCache's PD proxy as the router (routerSpec.type lmcache-proxy,
router enabled): LMCache senders then report to it by default. */}}
{{- define "pd-stack.isLMCacheProxy" -}}
{{- if and .Values.routerSpec.enableRouter (eq (include "pd-stack.routerType" .) "lmcache-proxy") -}}true{{- end -}}
{{- end -}}

{{/* "true" when the router routes PD: production-stack's disaggregated_prefill, vllm-router,
LMCache's PD proxy or the llm-d router. */}}
{{- define "pd-stack.routesPD" -}}
{{- if ne (include "pd-stack.routerType" .) "production-stack" -}}true
{{- else if eq (.Values.routerSpec.routingLogic | toString) "disaggregated_prefill" -}}true
{{- end -}}
{{- end -}}

{{/* How the router finds the engines, k8s or static: routerSpec.serviceDiscovery (production-stack's
key, for both routers), else for vllm-router routerSpec.vllmRouter.serviceDiscovery, else k8s. The
checks refuse the two keys disagreeing. LMCache's PD proxy always takes the pools' Services. */}}
{{- define "pd-stack.routerDiscovery" -}}
{{- $vr := .Values.routerSpec.vllmRouter | default dict -}}
{{- $own := ternary ($vr.serviceDiscovery | default "") "" (eq (include "pd-stack.isVllmRouter" .) "true") -}}
{{- if eq (include "pd-stack.routerType" .) "lmcache-proxy" -}}static
{{- else -}}
{{- .Values.routerSpec.serviceDiscovery | default $own | default "k8s" -}}
{{- end -}}
{{- end -}}

{{/* "true" when the router watches pods through the Kubernetes API (and so needs RBAC). */}}
{{- define "pd-stack.routerUsesKubeAPI" -}}
{{- if eq (include "pd-stack.routerDiscovery" .) "k8s" -}}true{{- end -}}
{{- end -}}

{{/* A router's facts (files/connectors.yaml routers.<router>) for every pool whose connector that
router routes (dict root router), as a JSON list with the pool's "pool", "role", "tensorParallel"
and "spec" added. */}}
{{- define "pd-stack.routerPools" -}}
{{- $found := list -}}
{{- range $spec := include "pd-stack.pools" .root | fromJsonArray -}}
{{- $ctx := dict "root" $.root "spec" $spec -}}
{{- with dig "routers" $.router dict (include "pd-stack.poolConnector" $ctx | fromJson) -}}
{{- $tp := int (include "pd-stack.parallelSize" (dict "ctx" $ctx "key" "tensorParallelSize")) -}}
{{- $found = append $found (merge (dict "pool" $spec.name "role" (include "pd-stack.poolRole" $ctx) "tensorParallel" $tp "spec" $spec) .) -}}
{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/* The distinct values of one router fact over the pools it routes (dict root router key), as a
JSON list: one --kv-connector for the whole release, so the checks refuse more than one. */}}
{{- define "pd-stack.routerPoolsNeed" -}}
{{- $needed := list -}}
{{- range include "pd-stack.routerPools" . | fromJsonArray -}}{{- $needed = append $needed (get . $.key) -}}{{- end -}}
{{- toJson (uniq $needed) -}}
{{- end -}}

{{/* vllm-router's --kv-connector: routerSpec.vllmRouter.kvConnector, else the pools' connector's. */}}
{{- define "pd-stack.vllmRouterKvConnector" -}}
{{- $needed := include "pd-stack.routerPoolsNeed" (dict "root" . "router" "vllm-router" "key" "kvConnector") | fromJsonArray -}}
{{- dig "kvConnector" "" (.Values.routerSpec.vllmRouter | default dict) | default (first $needed) | default "nixl" -}}
{{- end -}}

{{/* "true" when some pool's engines register with vllm-router over ZMQ (P2pNccl). */}}
{{- define "pd-stack.engineRegistration" -}}
{{- range include "pd-stack.routerPools" (dict "root" . "router" "vllm-router") | fromJsonArray -}}{{- if .registers -}}true{{- end -}}{{- end -}}
{{- end -}}

{{/* "true" when routerSpec.extraArgs has the flag .flag (alone, or as --flag=value). */}}
{{- define "pd-stack.extraArgsHave" -}}
{{- $flag := .flag -}}
{{- range .root.Values.routerSpec.extraArgs | default list -}}
{{- if or (eq (toString .) $flag) (hasPrefix (printf "%s=" $flag) (toString .)) -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* The LMCache controller sockets the production-stack router binds on 0.0.0.0 for routingLogic
kvaware (src/vllm_router/routers/routing_logic.py KvawareRouter: pull on --lmcache-controller-port,
default 9000; reply and heartbeat only when their flags are set), as a JSON list of {name, port}:
the router's container ports and Service ports, which engines reach through the router Service. */}}
{{- define "pd-stack.routerLMCachePorts" -}}
{{- $router := .Values.routerSpec -}}
{{- $ports := list -}}
{{- if not (include "pd-stack.isVllmRouter" .) -}}
{{- if or $router.lmcacheControllerPort (eq (toString $router.routingLogic) "kvaware") -}}
{{- $ports = append $ports (dict "name" "lmcache-port" "key" "routerSpec.lmcacheControllerPort" "port" ($router.lmcacheControllerPort | default 9000)) -}}
{{- end -}}
{{- with $router.lmcacheControllerReplyPort -}}{{- $ports = append $ports (dict "name" "lmcache-reply" "key" "routerSpec.lmcacheControllerReplyPort" "port" .) -}}{{- end -}}
{{- with $router.lmcacheControllerHeartbeatPort -}}{{- $ports = append $ports (dict "name" "lmcache-beat" "key" "routerSpec.lmcacheControllerHeartbeatPort" "port" .) -}}{{- end -}}
{{- end -}}
{{- toJson $ports -}}
{{- end -}}

{{/*
Arguments of the production-stack router (src/vllm_router/parsers/parser.py): discovery of this
release's engines (Kubernetes, or static backends), then routing and stats settings, then extraArgs.
Flags that the tutorial's router image (lmcache/lmstack-router:pd-05-26, May 2025) predates appear
only when their key is set: --k8s-service-discovery-type (production-stack PR #586, 2025-07-30),
--root-path (#844, 2026-02-23), --lmcache-controller-reply-port and -heartbeat-port (#908,
2026-04-09), --prefix-min-match-length (#959, 2026-06-22).
*/}}
{{- define "pd-stack.productionStackRouterArgs" -}}
{{- $router := .Values.routerSpec -}}
{{- $args := list "--host" "0.0.0.0" "--port" (include "pd-stack.int" (dict "key" "routerSpec.containerPort" "value" $router.containerPort)) -}}
{{- if eq (include "pd-stack.routerDiscovery" .) "static" -}}
{{- if $router.staticBackends -}}
{{- /* routerSpec.staticBackends/staticModels as given; the user's --static-model-labels in
       extraArgs name them. */ -}}
{{- $args = concat $args (list "--service-discovery" "static" "--static-backends" $router.staticBackends "--static-models" ($router.staticModels | default "")) -}}
{{- else -}}
{{- /* One backend per pool Service with the pool's model and the pool name as its label, so
       disaggregated_prefill tells prefill from decode (--prefill/--decode-model-labels name pools). */ -}}
{{- $backends := list -}}{{- $models := list -}}{{- $labels := list -}}
{{- range $spec := include "pd-stack.pools" . | fromJsonArray -}}
{{- $backends = append $backends (printf "http://%s:%s" (include "pd-stack.poolServiceName" (dict "root" $ "spec" $spec)) (include "pd-stack.int" (dict "key" "servingEngineSpec.servicePort" "value" $.Values.servingEngineSpec.servicePort))) -}}
{{- $models = append $models $spec.modelURL -}}
{{- $labels = append $labels $spec.name -}}
{{- end -}}
{{- $args = concat $args (list "--service-discovery" "static" "--static-backends" (join "," $backends) "--static-models" (join "," $models)) -}}
{{- if and (join "," $labels) (not (include "pd-stack.extraArgsHave" (dict "root" . "flag" "--static-model-labels"))) -}}
{{- $args = concat $args (list "--static-model-labels" (join "," $labels)) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $args = concat $args (list "--service-discovery" "k8s" "--k8s-namespace" .Release.Namespace) -}}
{{- $args = concat $args (list "--k8s-label-selector" (include "pd-stack.selectorArgs" (dict "selector" (include "pd-stack.engineSelector" .)))) -}}
{{- $args = concat $args (list "--k8s-port" (include "pd-stack.int" (dict "key" "servingEngineSpec.containerPort" "value" .Values.servingEngineSpec.containerPort))) -}}
{{- with $router.k8sServiceDiscoveryType -}}
{{- $args = concat $args (list "--k8s-service-discovery-type" .) -}}
{{- end -}}
{{- end -}}
{{- $args = concat $args (list "--routing-logic" $router.routingLogic) -}}
{{- with $router.prefixMinMatchLength -}}
{{- $args = concat $args (list "--prefix-min-match-length" (include "pd-stack.int" (dict "key" "routerSpec.prefixMinMatchLength" "value" .))) -}}
{{- end -}}
{{- with $router.sessionKey -}}
{{- $args = concat $args (list "--session-key" .) -}}
{{- end -}}
{{- with $router.rootPath -}}
{{- $args = concat $args (list "--root-path" .) -}}
{{- end -}}
{{- $args = concat $args (list "--engine-stats-interval" (include "pd-stack.int" (dict "key" "routerSpec.engineScrapeInterval" "value" $router.engineScrapeInterval))) -}}
{{- $args = concat $args (list "--request-stats-window" (include "pd-stack.int" (dict "key" "routerSpec.requestStatsWindow" "value" $router.requestStatsWindow))) -}}
{{- with $router.lmcacheControllerPort -}}
{{- $args = concat $args (list "--lmcache-controller-port" (include "pd-stack.int" (dict "key" "routerSpec.lmcacheControllerPort" "value" .))) -}}
{{- end -}}
{{- with $router.lmcacheControllerReplyPort -}}
{{- $args = concat $args (list "--lmcache-controller-reply-port" (include "pd-stack.int" (dict "key" "routerSpec.lmcacheControllerReplyPort" "value" .))) -}}
{{- end -}}
{{- with $router.lmcacheControllerHeartbeatPort -}}
{{- $args = concat $args (list "--lmcache-controller-heartbeat-port" (include "pd-stack.int" (dict "key" "routerSpec.lmcacheControllerHeartbeatPort" "value" .))) -}}
{{- end -}}
{{- toYaml (concat $args ($router.extraArgs | default list)) -}}
{{- end -}}

{{/*
The router's env (a YAML list): the API key it sends to the engines, LMCACHE_LOG_LEVEL, then
routerSpec.env; a later entry replaces an earlier one of the same name. The key goes to both
VLLM_API_KEY (the production-stack router's discovery requests, src/vllm_router/service_discovery.py)
and OPENAI_API_KEY (the Authorization of its disaggregated_prefill hops,
services/request_service/request.py, and of vllm-router's PD requests,
src/routers/http/vllm_pd_router.rs), always through a secretKeyRef.
*/}}
{{- define "pd-stack.routerEnv" -}}
{{- $router := .Values.routerSpec -}}
{{- $env := list -}}
{{- /* The production-stack router is Python: its replicas hash alike with the engines' seed. */ -}}
{{- if and (eq (include "pd-stack.routerType" .) "production-stack") .Values.servingEngineSpec.pythonHashSeed -}}
{{- $env = append $env (dict "name" "PYTHONHASHSEED" "value" .Values.servingEngineSpec.pythonHashSeed) -}}
{{- end -}}
{{- $ref := include "pd-stack.routerApiKeyRef" . | fromJson -}}
{{- if $ref.name -}}
{{- range list "VLLM_API_KEY" "OPENAI_API_KEY" -}}
{{- $env = append $env (dict "name" . "valueFrom" (dict "secretKeyRef" $ref)) -}}
{{- end -}}
{{- end -}}
{{- if and (eq (include "pd-stack.routerType" .) "lmcache-proxy") (include "pd-stack.lmcacheProxyToken" . | fromJson) -}}
{{- $env = concat $env (include "pd-stack.hfTokenEnv" . | fromYamlArray) -}}
{{- end -}}
{{- with dig "logLevel" "" ($router.lmcacheConfig | default dict) -}}
{{- $env = append $env (dict "name" "LMCACHE_LOG_LEVEL" "value" .) -}}
{{- end -}}
{{- $env = concat $env ($router.env | default list) -}}
{{- $merged := list -}}
{{- range $i, $entry := $env -}}
{{- $later := false -}}
{{- range (slice $env (add1 $i)) -}}{{- if eq .name $entry.name -}}{{- $later = true -}}{{- end -}}{{- end -}}
{{- if not $later -}}{{- $merged = append $merged $entry -}}{{- end -}}
{{- end -}}
{{- toYaml $merged -}}
{{- end -}}

{{/* The Secret key the router's API key is read from, as JSON {name, key}, or {}: routerSpec.vllmApiKey
(a string is stored in <release>-secrets by secret.yaml), else servingEngineSpec.vllmApiKey (its
string under key vllmApiKey), as production-stack's deployment-router.yaml falls back. */}}
{{- define "pd-stack.routerApiKeyRef" -}}
{{- $own := .Values.routerSpec.vllmApiKey -}}
{{- $engines := .Values.servingEngineSpec.vllmApiKey -}}
{{- $ref := dict -}}
{{- if and $own (kindIs "string" $own) -}}
{{- $ref = dict "name" (include "pd-stack.secretName" .) "key" (include "pd-stack.routerApiKeySecretKey" .) -}}
{{- else if and (kindIs "map" $own) (dig "secretName" "" ($own | default dict)) -}}
{{- $ref = dict "name" $own.secretName "key" $own.secretKey -}}
{{- else if ne .Values.servingEngineSpec.enableEngine false -}}
{{- $ref = include "pd-stack.engineApiKeyRef" . | fromJson -}}
{{- end -}}
{{- toJson $ref -}}
{{- end -}}

{{/* One probe of the router container (dict "root" $ "kind" readiness|liveness|startup): the
chart's timings and path, with routerSpec.<kind>Probe's over them; always on the router's port.
vllm-router serves /readiness (healthy prefill and decode workers) and /liveness; the
production-stack router answers /health; LMCache 0.3.7's PD proxy has no GET route (only POST
/v1/completions and /v1/chat/completions), so it gets a TCP probe unless a path is given. */}}
{{- define "pd-stack.routerProbe" -}}
{{- $type := include "pd-stack.routerType" .root -}}
{{- $user := get .root.Values.routerSpec (printf "%sProbe" .kind) | default dict -}}
{{- $defaults := dict "readiness" (dict "periodSeconds" 10) "liveness" (dict "initialDelaySeconds" 30 "periodSeconds" 20) "startup" dict -}}
{{- $paths := dict "production-stack" "/health" "vllm-router" (ternary "/readiness" "/liveness" (eq .kind "readiness")) "lmcache-proxy" "" -}}
{{- $path := dig "httpGet" "path" (get $paths $type) $user -}}
{{- $probe := merge (omit $user "httpGet") (get $defaults .kind) -}}
{{- if $path -}}
{{- $_ := set $probe "httpGet" (dict "path" $path "port" "http") -}}
{{- else -}}
{{- $_ := set $probe "tcpSocket" (dict "port" "http") -}}
{{- end -}}
{{- toYaml $probe -}}
{{- end -}}

{{/* vllm-router's static workers: routerSpec.vllmRouter.prefillUrls/decodeUrls, else one entry per
prefill/decode pool Service (with the prefill's bootstrap port where its connector announces one).
JSON {"prefill": [{url, bootstrapPort}], "decode": [url]}. */}}
{{- define "pd-stack.vllmRouterStaticWorkers" -}}
{{- $vr := .Values.routerSpec.vllmRouter | default dict -}}
{{- $prefill := $vr.prefillUrls | default list -}}
{{- $decode := $vr.decodeUrls | default list -}}
{{- $port := include "pd-stack.int" (dict "key" "servingEngineSpec.servicePort" "value" .Values.servingEngineSpec.servicePort) -}}
{{- range $spec := include "pd-stack.pools" . | fromJsonArray -}}
{{- $ctx := dict "root" $ "spec" $spec -}}
{{- $url := printf "http://%s:%s" (include "pd-stack.poolServiceName" $ctx) $port -}}
{{- $role := include "pd-stack.poolRole" $ctx -}}
{{- if and (eq $role "prefill") (not $vr.prefillUrls) -}}
{{- $entry := dict "url" $url -}}
{{- with dig "routers" "vllm-router" "bootstrapPort" "" (include "pd-stack.poolConnector" $ctx | fromJson) -}}
{{- $_ := set $entry "bootstrapPort" (include "pd-stack.connectorPort" (dict "ctx" $ctx "port" .)) -}}
{{- end -}}
{{- $prefill = append $prefill $entry -}}
{{- else if and (eq $role "decode") (not $vr.decodeUrls) -}}
{{- $decode = append $decode $url -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "prefill" $prefill "decode" $decode) -}}
{{- end -}}

{{/*
Arguments of vllm-router (vllm-project/router, PyPI vllm-router; flags of its
py_src/vllm_router/router_args.py, checked by the tests against the real 0.1.17 parser).
PD mode: --vllm-pd-disaggregation, then either Kubernetes discovery by the pd-stack.io/role pod
label or static --prefill URL [BOOTSTRAP_PORT] / --decode URL lists (default: the pools' Services).
*/}}
{{- define "pd-stack.vllmRouterArgs" -}}
{{- $router := .Values.routerSpec -}}
{{- $vr := $router.vllmRouter | default dict -}}
{{- $engine := .Values.servingEngineSpec -}}
{{- $args := list "--host" "0.0.0.0" "--port" (include "pd-stack.int" (dict "key" "routerSpec.containerPort" "value" $router.containerPort)) "--vllm-pd-disaggregation" -}}
{{- if eq (include "pd-stack.routerDiscovery" .) "k8s" -}}
{{- $args = concat $args (list "--service-discovery" "--service-discovery-namespace" .Release.Namespace "--service-discovery-port" (include "pd-stack.int" (dict "key" "servingEngineSpec.containerPort" "value" $engine.containerPort))) -}}
{{- range $role := list "prefill" "decode" -}}
{{- $selector := printf "%s\npd-stack.io/role: %s" (include "pd-stack.engineSelector" $) $role -}}
{{- $args = concat $args (list (printf "--%s-selector" $role)) (include "pd-stack.selectorArgs" (dict "selector" $selector "list" true) | fromJsonArray) -}}
{{- end -}}
{{- else -}}
{{- $workers := include "pd-stack.vllmRouterStaticWorkers" . | fromJson -}}
{{- range $workers.prefill -}}
{{- $args = concat $args (list "--prefill" .url) -}}
{{- if .bootstrapPort -}}{{- $args = append $args (include "pd-stack.int" (dict "key" "routerSpec.vllmRouter.prefillUrls[].bootstrapPort" "value" .bootstrapPort)) -}}{{- end -}}
{{- end -}}
{{- range $workers.decode -}}{{- $args = concat $args (list "--decode" .) -}}{{- end -}}
{{- end -}}
{{- $args = concat $args (list "--kv-connector" (include "pd-stack.vllmRouterKvConnector" .)) -}}
{{- if include "pd-stack.engineRegistration" . -}}
{{- /* P2pNccl engines register over ZMQ (proxy_ip:proxy_port in their extra config). */ -}}
{{- $args = concat $args (list "--vllm-discovery-address" (print "0.0.0.0:" (include "pd-stack.int" (dict "key" "routerSpec.vllmRouter.discoveryPort" "value" ($vr.discoveryPort | default 30001))))) -}}
{{- end -}}
{{- $args = concat $args (list "--policy" ($vr.policy | default "cache_aware")) -}}
{{- with $vr.prefillPolicy -}}{{- $args = concat $args (list "--prefill-policy" .) -}}{{- end -}}
{{- with $vr.decodePolicy -}}{{- $args = concat $args (list "--decode-policy" .) -}}{{- end -}}
{{- $args = concat $args (list "--prometheus-host" "0.0.0.0" "--prometheus-port" (include "pd-stack.int" (dict "key" "routerSpec.vllmRouter.metricsPort" "value" ($vr.metricsPort | default 29000)))) -}}
{{- $args = concat $args ($router.extraArgs | default list) -}}
{{- toYaml $args -}}
{{- end -}}

{{/* ---- LMCache's PD proxy (routerSpec.type lmcache-proxy) ------------------------------------- */}}

{{/*
The pools LMCache's PD proxy serves (those whose connector files/connectors.yaml routes with
lmcache-proxy), as JSON {prefill: [Service], decode: [Service], decodePools: [{pool, init, alloc}],
image, pullSecret}: the image (and its pull secret) is the first such pool's, prefill first, so the
proxy runs the engines' LMCache.
*/}}
{{- define "pd-stack.lmcacheProxyPools" -}}
{{- $out := dict "prefill" list "decode" list "decodePools" list "image" "" "pullSecret" "" -}}
{{- $first := dict -}}
{{- range $spec := include "pd-stack.pools" . | fromJsonArray -}}
{{- $ctx := dict "root" $ "spec" $spec -}}
{{- $conn := include "pd-stack.poolConnector" $ctx | fromJson -}}
{{- if hasKey ($conn.routers | default dict) "lmcache-proxy" -}}
{{- $role := include "pd-stack.poolRole" $ctx -}}
{{- if or (not $first) (and (eq $role "prefill") (ne $first.role "prefill")) -}}{{- $first = dict "role" $role "spec" $spec -}}{{- end -}}
{{- if eq $role "prefill" -}}
{{- $_ := set $out "prefill" (append $out.prefill (include "pd-stack.poolServiceName" $ctx)) -}}
{{- else if eq $role "decode" -}}
{{- $_ := set $out "decode" (append $out.decode (include "pd-stack.poolServiceName" $ctx)) -}}
{{- $init := list -}}{{- $alloc := list -}}
{{- range include "pd-stack.connectorPorts" $ctx | fromYamlArray -}}
{{- if eq .base "lmc-init" -}}{{- $init = append $init (include "pd-stack.int" (dict "key" "kvTransfer.lmcache.peerInitPort" "value" .containerPort)) -}}{{- end -}}
{{- if eq .base "lmc-alloc" -}}{{- $alloc = append $alloc (include "pd-stack.int" (dict "key" "kvTransfer.lmcache.peerAllocPort" "value" .containerPort)) -}}{{- end -}}
{{- end -}}
{{- $buffer := include "pd-stack.lmcacheBufferSize" ($spec.kvTransfer | default dict) -}}
{{- $_ := set $out "decodePools" (append $out.decodePools (dict "pool" $spec.name "init" (join "," $init) "alloc" (join "," $alloc) "replicas" (int (dig "replicaCount" 1 $spec)) "buffer" $buffer)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $first -}}
{{- $_ := set $out "image" (include "pd-stack.poolImage" (dict "spec" .spec)) -}}
{{- $_ := set $out "pythonCtx" (dict "spec" .spec) -}}
{{- $_ := set $out "pullSecret" (.spec.imagePullSecret | default "") -}}
{{- $_ := set $out "model" (toString .spec.modelURL) -}}
{{- $tag := toString (.spec.tag | default "") -}}
{{- if and (regexMatch "(^|/)lmcache/vllm-openai$" (toString .spec.repository)) (regexMatch "^v?[0-9]+[.][0-9]+[.][0-9]+$" $tag) -}}
{{- $_ := set $out "lmcacheVersion" (trimPrefix "v" $tag) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Where the proxy script is in the container: routerSpec.lmcacheProxy.scriptPath, else the
file disagg_proxy_server.py of scriptConfigMap, mounted at /opt/lmcache-pd-proxy. */}}
{{- define "pd-stack.lmcacheProxyScript" -}}
{{- $lp := .Values.routerSpec.lmcacheProxy | default dict -}}
{{- $lp.scriptPath | default "/opt/lmcache-pd-proxy/disagg_proxy_server.py" -}}
{{- end -}}

{{/* The proxy's ZMQ PULL port for the senders' notifications (LMCache senders' pd_proxy_port). */}}
{{- define "pd-stack.lmcacheProxyNotifyPort" -}}
{{- .Values.routerSpec.lmcacheProxy.notifyPort | int -}}
{{- end -}}

{{/*
The LMCache release whose proxy script the chart runs (root): routerSpec.lmcacheProxy.lmcacheVersion,
else the tag vX.Y.Z of the LMCache pools' image lmcache/vllm-openai (whose tags are LMCache's
releases), else "" (not known: another image, a nightly).
*/}}
{{- define "pd-stack.lmcacheProxyVersion" -}}
{{- $lp := .Values.routerSpec.lmcacheProxy | default dict -}}
{{- $lp.lmcacheVersion | default (include "pd-stack.lmcacheProxyPools" . | fromJson).lmcacheVersion | default "" -}}
{{- end -}}

{{/* Whether LMCache's proxy script takes --model and the sizing flags (root): "true" or "". */}}
{{- define "pd-stack.lmcacheProxySizing" -}}
{{- include "pd-stack.connectorTable" . -}}
{{- $proxy := get .pdStackConnectors.connectors.LMCacheConnectorV1.routers "lmcache-proxy" -}}
{{- $version := include "pd-stack.lmcacheProxyVersion" . -}}
{{- if or (not $version) (semverCompare $proxy.sizingFlags $version) -}}true{{- end -}}
{{- end -}}

{{/* The Hugging Face token LMCache's proxy reads --model's config.json with (root): the Secret
reference of the LMCache pool whose modelURL it is (pd-stack.hfTokenRef), when the script takes
--model; {} otherwise. The proxy mounts it as the engines do (HF_TOKEN_PATH). */}}
{{- define "pd-stack.lmcacheProxyToken" -}}
{{- $pools := include "pd-stack.lmcacheProxyPools" . | fromJson -}}
{{- if and (include "pd-stack.lmcacheProxySizing" .) $pools.pythonCtx -}}
{{- include "pd-stack.hfTokenRef" (dict "root" . "spec" $pools.pythonCtx.spec) -}}
{{- else -}}{}{{- end -}}
{{- end -}}

{{/*
Command line of LMCache's PD proxy: the image's Python runs the script with the flags of LMCache
0.3.7's examples/disagg_prefill/disagg_proxy_server.py (parse_args): HTTP on
0.0.0.0:<containerPort>; --prefiller-host/--decoder-host the pools' Services, comma separated, with
one --prefiller-port/--decoder-port (the script pairs a single port with every host); the receivers'
--decoder-init-port/--decoder-alloc-port, one per TP rank (one list for every decode pool, so the
checks make the decode pools agree); its ZMQ PULL socket on 0.0.0.0:<notifyPort> (--proxy-host,
--proxy-port; the script binds tcp://<proxy-host>:<proxy-port>). With a script that takes them
(files/connectors.yaml sizingFlags: LMCache 0.4.4 and later, and a release not known, as the
repository's newest script and nightly images have them): --model, the LMCache pools' modelURL
(the script reads its config.json for the KV bytes per token), --pd-buffer-size, the smallest
decode pool's PD buffer (the proxy admits a request only while its KV fits, so it must not count
on more than any receiver has), --chunk-size, LMCache's default. Then routerSpec.extraArgs.
*/}}
{{- define "pd-stack.lmcacheProxyCommand" -}}
{{- $router := .Values.routerSpec -}}
{{- $pools := include "pd-stack.lmcacheProxyPools" . | fromJson -}}
{{- $port := include "pd-stack.int" (dict "key" "servingEngineSpec.servicePort" "value" .Values.servingEngineSpec.servicePort) -}}
{{- $first := first ($pools.decodePools | default (list dict)) | default dict -}}
{{- $python := include "pd-stack.pythonExecutable" ($pools.pythonCtx | default (dict "spec" dict)) -}}
{{- $args := list "--host" "0.0.0.0" "--port" (include "pd-stack.int" (dict "key" "routerSpec.containerPort" "value" $router.containerPort)) -}}
{{- $args = concat $args (list "--prefiller-host" (join "," $pools.prefill) "--prefiller-port" $port) -}}
{{- $args = concat $args (list "--decoder-host" (join "," $pools.decode) "--decoder-port" $port) -}}
{{- $args = concat $args (list "--decoder-init-port" ($first.init | default "") "--decoder-alloc-port" ($first.alloc | default "")) -}}
{{- $args = concat $args (list "--proxy-host" "0.0.0.0" "--proxy-port" (include "pd-stack.lmcacheProxyNotifyPort" .)) -}}
{{- if include "pd-stack.lmcacheProxySizing" . -}}
{{- $proxy := get .pdStackConnectors.connectors.LMCacheConnectorV1.routers "lmcache-proxy" -}}
{{- $smallest := int64 0 -}}
{{- range $pools.decodePools -}}{{- $buffer := int64 .buffer -}}{{- if or (eq $smallest 0) (lt $buffer $smallest) -}}{{- $smallest = $buffer -}}{{- end -}}{{- end -}}
{{- $args = concat $args (list "--model" ($pools.model | default "") "--pd-buffer-size" (toString $smallest) "--chunk-size" (toString $proxy.chunkSize)) -}}
{{- end -}}
{{- toYaml (dict "command" (list $python (include "pd-stack.lmcacheProxyScript" .)) "args" (concat $args ($router.extraArgs | default list))) -}}
{{- end -}}
