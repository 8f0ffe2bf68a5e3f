{{/*
The PD router: which one (routerSpec.type), what it discovers, and its command line. Whether a
router can route the pools' connector is a fact of files/connectors.yaml (routers, notRoutedBy),
checked in _checks.tpl.
*/}}

{{/* "true" when routerSpec.type is vllm-router (the default is the production-stack router). */}}
{{- define "pd-stack.isVllmRouter" -}}
{{- if eq (.Values.routerSpec.type | default "production-stack") "vllm-router" -}}true{{- end -}}
{{- end -}}

{{/* "true" when the router routes PD: production-stack's disaggregated_prefill, or vllm-router. */}}
{{- define "pd-stack.routesPD" -}}
{{- if or (include "pd-stack.isVllmRouter" .) (eq (.Values.routerSpec.routingLogic | toString) "disaggregated_prefill") -}}true{{- end -}}
{{- end -}}

{{/* "true" when the router watches pods through the Kubernetes API (and so needs RBAC). */}}
{{- define "pd-stack.routerUsesKubeAPI" -}}
{{- if not (include "pd-stack.isVllmRouter" .) -}}true
{{- else if eq (dig "serviceDiscovery" "k8s" (.Values.routerSpec.vllmRouter | default dict)) "k8s" -}}true
{{- end -}}
{{- end -}}

{{/* The vllm-router facts (files/connectors.yaml routers.vllm-router) of every pool's connector that
vllm-router routes, as a JSON list with the pool's context fields "pool" and "role" added. */}}
{{- define "pd-stack.vllmRouterPools" -}}
{{- $found := list -}}
{{- range $spec := include "pd-stack.pools" . | fromJsonArray -}}
{{- $ctx := dict "root" $ "spec" $spec -}}
{{- $conn := include "pd-stack.poolConnector" $ctx | fromJson -}}
{{- with dig "routers" "vllm-router" dict $conn -}}
{{- $found = append $found (merge (dict "pool" $spec.name "role" (include "pd-stack.poolRole" $ctx)) .) -}}
{{- end -}}
{{- end -}}
{{- toJson $found -}}
{{- end -}}

{{/* vllm-router's --kv-connector: routerSpec.vllmRouter.kvConnector, else the pools' connector's. */}}
{{- define "pd-stack.vllmRouterKvConnector" -}}
{{- $needed := list -}}
{{- range include "pd-stack.vllmRouterPools" . | fromJsonArray -}}{{- $needed = append $needed .kvConnector -}}{{- end -}}
{{- dig "kvConnector" "" (.Values.routerSpec.vllmRouter | default dict) | default (first (uniq $needed)) | default "nixl" -}}
{{- end -}}

{{/* "true" when some pool's engines register with vllm-router over ZMQ (P2pNccl). */}}
{{- define "pd-stack.engineRegistration" -}}
{{- range include "pd-stack.vllmRouterPools" . | fromJsonArray -}}{{- if .registers -}}true{{- end -}}{{- end -}}
{{- end -}}

{{/*
Arguments of the production-stack router (src/vllm_router/parsers/parser.py): Kubernetes
discovery of this release's engine pods, then routing and stats settings, then extraArgs.
*/}}
{{- define "pd-stack.productionStackRouterArgs" -}}
{{- $router := .Values.routerSpec -}}
{{- $args := list "--host" "0.0.0.0" "--port" (toString $router.containerPort) -}}
{{- $args = concat $args (list "--service-discovery" "k8s" "--k8s-namespace" .Release.Namespace) -}}
{{- $args = concat $args (list "--k8s-label-selector" (include "pd-stack.selectorArgs" (dict "selector" (include "pd-stack.engineSelector" .)))) -}}
{{- $args = concat $args (list "--k8s-port" (toString .Values.servingEngineSpec.containerPort)) -}}
{{- with $router.k8sServiceDiscoveryType -}}
{{- $args = concat $args (list "--k8s-service-discovery-type" .) -}}
{{- end -}}
{{- $args = concat $args (list "--routing-logic" $router.routingLogic) -}}
{{- with $router.sessionKey -}}
{{- $args = concat $args (list "--session-key" .) -}}
{{- end -}}
{{- $args = concat $args (list "--engine-stats-interval" (toString $router.engineScrapeInterval)) -}}
{{- $args = concat $args (list "--request-stats-window" (toString $router.requestStatsWindow)) -}}
{{- toYaml (concat $args ($router.extraArgs | default list)) -}}
{{- end -}}

{{/* vllm-router's static workers: routerSpec.vllmRouter.prefillUrls/decodeUrls, else one entry per
prefill/decode pool Service (with the prefill's bootstrap port where its connector announces one).
JSON {"prefill": [{url, bootstrapPort}], "decode": [url]}. */}}
{{- define "pd-stack.vllmRouterStaticWorkers" -}}
{{- $vr := .Values.routerSpec.vllmRouter | default dict -}}
{{- $prefill := $vr.prefillUrls | default list -}}
{{- $decode := $vr.decodeUrls | default list -}}
{{- $port := int .Values.servingEngineSpec.servicePort -}}
{{- range $spec := .Values.servingEngineSpec.modelSpec | default list -}}
{{- if $.Values.servingEngineSpec.enableEngine -}}
{{- $ctx := dict "root" $ "spec" $spec -}}
{{- $url := printf "http://%s:%d" (include "pd-stack.poolServiceName" $ctx) $port -}}
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
{{- $args := list "--host" "0.0.0.0" "--port" (toString $router.containerPort) "--vllm-pd-disaggregation" -}}
{{- if eq ($vr.serviceDiscovery | default "k8s") "k8s" -}}
{{- $args = concat $args (list "--service-discovery" "--service-discovery-namespace" .Release.Namespace "--service-discovery-port" (toString $engine.containerPort)) -}}
{{- range $role := list "prefill" "decode" -}}
{{- $selector := printf "%s\npd-stack.io/role: %s" (include "pd-stack.engineSelector" $) $role -}}
{{- $args = concat $args (list (printf "--%s-selector" $role)) (include "pd-stack.selectorArgs" (dict "selector" $selector "list" true) | fromJsonArray) -}}
{{- end -}}
{{- else -}}
{{- $workers := include "pd-stack.vllmRouterStaticWorkers" . | fromJson -}}
{{- range $workers.prefill -}}
{{- $args = concat $args (list "--prefill" .url) -}}
{{- if .bootstrapPort -}}{{- $args = append $args (toString .bootstrapPort) -}}{{- end -}}
{{- end -}}
{{- range $workers.decode -}}{{- $args = concat $args (list "--decode" .) -}}{{- end -}}
{{- end -}}
{{- $args = concat $args (list "--kv-connector" (include "pd-stack.vllmRouterKvConnector" .)) -}}
{{- if include "pd-stack.engineRegistration" . -}}
{{- /* P2pNccl engines register over ZMQ (proxy_ip:proxy_port in their extra config). */ -}}
{{- $args = concat $args (list "--vllm-discovery-address" (printf "0.0.0.0:%d" (int ($vr.discoveryPort | default 30001)))) -}}
{{- end -}}
{{- $args = concat $args (list "--policy" ($vr.policy | default "cache_aware")) -}}
{{- with $vr.prefillPolicy -}}{{- $args = concat $args (list "--prefill-policy" .) -}}{{- end -}}
{{- with $vr.decodePolicy -}}{{- $args = concat $args (list "--decode-policy" .) -}}{{- end -}}
{{- $args = concat $args (list "--prometheus-host" "0.0.0.0" "--prometheus-port" (toString ($vr.metricsPort | default 29000))) -}}
{{- $args = concat $args ($router.extraArgs | default list) -}}
{{- toYaml $args -}}
{{- end -}}
