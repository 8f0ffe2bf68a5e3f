{{/*
The llm-d router (routerSpec.type llm-d): llm-d-router's endpoint picker (EPP), in standalone mode
with an Envoy proxy in the same pod (the EPP selects this release's engine pods by label: no
Gateway, no CRDs), in gateway mode behind your Gateway through an InferencePool and an HTTPRoute;
and the decode sidecar every decode pod runs in front of vLLM. Every image, flag and config
field comes from the release row of files/connectors.yaml routerImages.llm-d (routerSpec.llmd.version);
sources: llm-d/llm-d-router at tag v0.10.0 (config/charts/routerlib, pkg/epp/server/options.go,
pkg/sidecar/proxy/options.go, deploy/config/pd-epp-config.yaml, docs/disaggregation.md).
*/}}

{{/* "true" when routerSpec.type is llm-d and the router is rendered. */}}
{{- define "pd-stack.isLlmd" -}}
{{- if and .Values.routerSpec.enableRouter (eq (include "pd-stack.routerType" .) "llm-d") -}}true{{- end -}}
{{- end -}}

{{/* standalone (default) or gateway. */}}
{{- define "pd-stack.llmdMode" -}}
{{- dig "mode" "standalone" (.Values.routerSpec.llmd | default dict) -}}
{{- end -}}

{{/* "true" when the llm-d router runs in gateway mode: an InferencePool and an HTTPRoute, and no
Envoy in the router pod (the Gateway is the proxy). */}}
{{- define "pd-stack.llmdGateway" -}}
{{- if and (include "pd-stack.isLlmd" .) (eq (include "pd-stack.llmdMode" .) "gateway") -}}true{{- end -}}
{{- end -}}

{{/* The release row (routerImages.llm-d.releases.<version>) as JSON, with "version" added; {} for
a version the table does not have (the schema allows only the table's). */}}
{{- define "pd-stack.llmdRelease" -}}
{{- include "pd-stack.connectorTable" . -}}
{{- $table := index .pdStackConnectors.routerImages "llm-d" -}}
{{- $version := dig "version" $table.default (.Values.routerSpec.llmd | default dict) -}}
{{- $row := get $table.releases $version | default dict -}}
{{- toJson (merge (dict "version" $version) $row) -}}
{{- end -}}

{{/* An image of the release (dict "root" $ "which" epp|sidecar|envoy): the row's repository, or
routerSpec.llmd.<epp|sidecar|proxy>.repository (a mirror), with the row's tag. */}}
{{- define "pd-stack.llmdImage" -}}
{{- $row := include "pd-stack.llmdRelease" .root | fromJson -}}
{{- $image := index $row.images .which -}}
{{- $key := ternary "proxy" .which (eq .which "envoy") -}}
{{- $repository := dig $key "repository" $image.repository (.root.Values.routerSpec.llmd | default dict) -}}
{{- printf "%s:%s" $repository $image.tag -}}
{{- end -}}

{{/* The prefill pools' bootstrap ports (routers.llm-d.bootstrapPort, Mooncake), as a JSON list of
{pool, port}: the sidecar queries every prefill pod on one --mooncake-bootstrap-port. */}}
{{- define "pd-stack.llmdBootstrapPorts" -}}
{{- $ports := list -}}
{{- range include "pd-stack.routerPools" (dict "root" . "router" "llm-d") | fromJsonArray -}}
{{- if and .bootstrapPort (eq .role "prefill") -}}
{{- $ctx := dict "root" $ "spec" .spec -}}
{{- $ports = append $ports (dict "pool" .pool "port" (int (include "pd-stack.connectorPort" (dict "ctx" $ctx "port" .bootstrapPort)))) -}}
{{- end -}}
{{- end -}}
{{- toJson $ports -}}
{{- end -}}

{{/* vLLM's port in decode pods behind the sidecar (routerSpec.llmd.sidecar.modelServerPort). */}}
{{- define "pd-stack.llmdModelServerPort" -}}
{{- include "pd-stack.int" (dict "key" "routerSpec.llmd.sidecar.modelServerPort" "value" (.Values.routerSpec.llmd | default dict).sidecar.modelServerPort) -}}
{{- end -}}

{{/* "true" when a pool's pods run the decode sidecar (ctx: root, spec): a decode pool, routed by
llm-d. vLLM then listens on the model-server port and the sidecar on servingEngineSpec.containerPort. */}}
{{- define "pd-stack.llmdSidecarPool" -}}
{{- if and (include "pd-stack.isLlmd" .root) (eq (include "pd-stack.poolRole" .) "decode") -}}true{{- end -}}
{{- end -}}

{{/* The port vLLM serves on in a pool's pods (ctx: root, spec): servingEngineSpec.containerPort, or
behind the llm-d decode sidecar its model-server port. */}}
{{- define "pd-stack.vllmPort" -}}
{{- if include "pd-stack.llmdSidecarPool" . -}}{{ include "pd-stack.llmdModelServerPort" .root }}
{{- else -}}{{ include "pd-stack.int" (dict "key" "servingEngineSpec.containerPort" "value" .root.Values.servingEngineSpec.containerPort) }}
{{- end -}}
{{- end -}}

{{/* The EPP's ports: ext_proc gRPC, gRPC health, Prometheus metrics (the EPP's defaults,
pkg/epp/server/options.go: --grpc-port 9002, --grpc-health-port 9003, --metrics-port 9090). */}}
{{- define "pd-stack.llmdEppPorts" -}}
{{- toJson (dict "grpc" 9002 "health" 9003 "metrics" 9090) -}}
{{- end -}}

{{/*
Arguments of the EPP (pkg/epp/server/options.go at v0.10.0; the same flags at v0.9.0). Standalone:
--endpoint-selector (key=value pairs; v0.10.0 also takes set-based syntax) and --endpoint-target-ports, so the runner starts no
InferencePool reconciler (cmd/epp/runner/runner.go: startCrdReconcilers only without a selector).
Gateway: --pool-name/--pool-namespace of the InferencePool (--pool-group defaults to
inference.networking.k8s.io). --metrics-endpoint-auth=false: metrics auth needs a ClusterRole for
tokenreviews and subjectaccessreviews, and this chart grants the EPP namespaced reads only.
--tracing=false: the EPP's default is on, exporting to an OTLP endpoint nobody configured.
More than one replica: --ha-enable-leader-election (active-passive; a Lease in the namespace).
Then routerSpec.llmd.epp.flags as --name=value and routerSpec.extraArgs.
*/}}
{{- define "pd-stack.llmdEppArgs" -}}
{{- $router := .Values.routerSpec -}}
{{- $llmd := .Values.routerSpec.llmd | default dict -}}
{{- $ports := include "pd-stack.llmdEppPorts" . | fromJson -}}
{{- $args := list -}}
{{- if eq (include "pd-stack.llmdMode" .) "gateway" -}}
{{- $args = concat $args (list "--pool-name" (include "pd-stack.inferencePoolName" .) "--pool-namespace" .Release.Namespace) -}}
{{- else -}}
{{- $args = concat $args (list "--endpoint-selector" (include "pd-stack.selectorArgs" (dict "selector" (include "pd-stack.engineSelector" .)))) -}}
{{- $args = concat $args (list "--endpoint-target-ports" (include "pd-stack.int" (dict "key" "servingEngineSpec.containerPort" "value" .Values.servingEngineSpec.containerPort))) -}}
{{- end -}}
{{- $args = concat $args (list "--config-file" "/config/epp-config.yaml") -}}
{{- $args = concat $args (list "--grpc-port" (include "pd-stack.int" (dict "key" "the EPP gRPC port" "value" $ports.grpc)) "--grpc-health-port" (include "pd-stack.int" (dict "key" "the EPP gRPC health port" "value" $ports.health)) "--metrics-port" (include "pd-stack.int" (dict "key" "the EPP metrics port" "value" $ports.metrics))) -}}
{{- $args = concat $args (list "--metrics-endpoint-auth=false" "--tracing=false") -}}
{{- if gt (int $router.replicaCount) 1 -}}{{- $args = append $args "--ha-enable-leader-election" -}}{{- end -}}
{{- range $name, $value := dig "epp" "flags" dict $llmd -}}
{{- if or (kindIs "float64" $value) (kindIs "int64" $value) -}}{{- $value = include "pd-stack.int" (dict "key" (printf "routerSpec.llmd.epp.flags.%s" $name) "value" $value) -}}{{- end -}}
{{- $args = append $args (printf "--%s=%v" $name $value) -}}
{{- end -}}
{{- toYaml (concat $args ($router.extraArgs | default list)) -}}
{{- end -}}

{{/*
The EPP configuration (EndpointPickerConfig; apiVersion from the release row): routerSpec.llmd.
scheduler.config as given, else the chart's PD preset, after the llm-d-router repository's own P/D
sample (deploy/config/pd-epp-config.yaml at v0.10.0) with our role label instead of llm-d.ai/role:
label-selector-filter (metav1.LabelSelector parameters, filter/bylabel/selector.go) keeps prefill
pods (pd-stack.io/role prefill) in the prefill profile and decode pods (decode, and both: a pod
without the sidecar serves the whole request) in the decode profile; both profiles score prefix
cache hits (approx-prefix-cache-producer + prefix-cache-scorer) and queue depth and take the best;
disagg-profile-handler runs decode first, then prefill when its decider says so:
always-disagg-pd-decider, or prefix-based-pd-decider with nonCachedTokens and (from v0.10.0, when
above 0) promptTokens; with stageOrder prefill-first it runs prefill on every request, no decider.
*/}}
{{- define "pd-stack.llmdEppConfig" -}}
{{- $scheduler := dig "scheduler" dict (.Values.routerSpec.llmd | default dict) -}}
{{- $row := include "pd-stack.llmdRelease" . | fromJson -}}
{{- if $scheduler.config -}}
{{- $scheduler.config -}}
{{- else -}}
{{- $decider := ternary "prefix-based-pd-decider" "always-disagg-pd-decider" (eq ($scheduler.decider | default "always") "prefix-based") -}}
{{- $role := "pd-stack.io/role" -}}
{{- $plugins := list -}}
{{- $plugins = append $plugins (dict "type" "label-selector-filter" "name" "prefill-pods" "parameters" (dict "matchExpressions" (list (dict "key" $role "operator" "In" "values" (list "prefill"))))) -}}
{{- $plugins = append $plugins (dict "type" "label-selector-filter" "name" "decode-pods" "parameters" (dict "matchExpressions" (list (dict "key" $role "operator" "In" "values" (list "decode" "both"))))) -}}
{{- $plugins = append $plugins (dict "type" "approx-prefix-cache-producer" "parameters" (dict "maxPrefixTokensToMatch" 16384 "lruCapacityPerServer" 31250)) -}}
{{- $plugins = concat $plugins (list (dict "type" "prefix-cache-scorer") (dict "type" "queue-scorer") (dict "type" "max-score-picker")) -}}
{{- $handler := dict -}}
{{- if eq ($scheduler.stageOrder | default "") "prefill-first" -}}
{{- /* Prefill-first runs prefill on every request and takes no decider (v0.10.0 refuses one). */ -}}
{{- $_ := set $handler "stageOrder" "prefill-first" -}}
{{- else -}}
{{- if eq $decider "prefix-based-pd-decider" -}}
{{- $parameters := dict "nonCachedTokens" (int ($scheduler.nonCachedTokens | default 16)) -}}
{{- with $scheduler.promptTokens -}}{{- $_ := set $parameters "promptTokens" (int .) -}}{{- end -}}
{{- $plugins = append $plugins (dict "type" $decider "parameters" $parameters) -}}
{{- else -}}
{{- $plugins = append $plugins (dict "type" $decider) -}}
{{- end -}}
{{- $_ := set $handler "deciders" (dict "prefill" $decider) -}}
{{- with $scheduler.stageOrder -}}{{- $_ := set $handler "stageOrder" . -}}{{- end -}}
{{- end -}}
{{- $plugins = append $plugins (dict "type" "disagg-profile-handler" "parameters" $handler) -}}
{{- $profiles := list -}}
{{- range $profile := list "prefill" "decode" -}}
{{- $refs := list (dict "pluginRef" (printf "%s-pods" $profile)) (dict "pluginRef" "max-score-picker") (dict "pluginRef" "prefix-cache-scorer" "weight" 2) (dict "pluginRef" "queue-scorer" "weight" 1) -}}
{{- $profiles = append $profiles (dict "name" $profile "plugins" $refs) -}}
{{- end -}}
{{- toYaml (dict "apiVersion" $row.configApiVersion "kind" "EndpointPickerConfig" "plugins" $plugins "schedulingProfiles" $profiles) -}}
{{- end -}}
{{- end -}}

{{/* Envoy's configuration in standalone mode: files/envoy.yaml, with the router's ports. */}}
{{- define "pd-stack.llmdEnvoyConfig" -}}
{{- $llmd := .Values.routerSpec.llmd | default dict -}}
{{- $flags := dig "epp" "flags" dict $llmd -}}
{{- $tls := not (and (hasKey $flags "secure-serving") (eq (toString (get $flags "secure-serving")) "false")) -}}
{{- $envoy := dict "containerPort" (int .Values.routerSpec.containerPort) "grpcPort" (include "pd-stack.llmdEppPorts" . | fromJson).grpc -}}
{{- $_ := set $envoy "envoyPorts" (include "pd-stack.llmdEnvoyPorts" . | fromJson) -}}
{{- $_ = set $envoy "failOpen" (dig "proxy" "failOpen" true $llmd) -}}
{{- $_ = set $envoy "tls" $tls -}}
{{- tpl (.Files.Get "files/envoy.yaml") (dict "Template" .Template "Envoy" $envoy) | trimSuffix "\n" -}}
{{- end -}}

{{/*
The decode sidecar (ctx: root, spec), a native sidecar (an init container with restartPolicy
Always) of every decode pod, as a one-item YAML list. Flags of pkg/sidecar/proxy/options.go:
--port (servingEngineSpec.containerPort, where the EPP sends requests), vLLM's port by the
release's flag (--model-server-port; v0.9.0 --vllm-port), --kv-connector from the pools'
connector, --secure-proxy=false (its default true serves HTTPS with a self-signed certificate, which
Envoy's and the Gateway's plain-HTTP hop would fail on; llm-d's guides pass false),
--mooncake-bootstrap-port for Mooncake (the prefill pools' bootstrap port), --prefill-max-retries.
It answers GET /health itself and proxies everything but the completion routes (/metrics too) to vLLM.
*/}}
{{- define "pd-stack.llmdSidecarContainer" -}}
{{- $root := .root -}}
{{- $llmd := $root.Values.routerSpec.llmd | default dict -}}
{{- $sidecar := $llmd.sidecar | default dict -}}
{{- $row := include "pd-stack.llmdRelease" $root | fromJson -}}
{{- $port := include "pd-stack.int" (dict "key" "servingEngineSpec.containerPort" "value" $root.Values.servingEngineSpec.containerPort) -}}
{{- $args := list (print "--port=" $port) (printf "%s=%s" $row.modelServerPortFlag (include "pd-stack.llmdModelServerPort" $root)) -}}
{{- /* The pools' connector's (routers.llm-d.sidecarConnector); the checks refuse pools that need
       different ones. */ -}}
{{- $connector := first (include "pd-stack.routerPoolsNeed" (dict "root" $root "router" "llm-d" "key" "sidecarConnector") | fromJsonArray) | default "nixlv2" -}}
{{- $args = concat $args (list (printf "--kv-connector=%s" $connector) "--secure-proxy=false") -}}
{{- with first (include "pd-stack.llmdBootstrapPorts" $root | fromJsonArray) -}}
{{- $args = append $args (print "--mooncake-bootstrap-port=" (include "pd-stack.int" (dict "key" (printf "prefill pool %s's kvTransfer.bootstrapPort" .pool) "value" .port))) -}}
{{- end -}}
{{- with $sidecar.prefillMaxRetries -}}{{- $args = append $args (print "--prefill-max-retries=" (include "pd-stack.int" (dict "key" "routerSpec.llmd.sidecar.prefillMaxRetries" "value" .))) -}}{{- end -}}
{{- $args = concat $args ($sidecar.extraArgs | default list) -}}
{{- $image := include "pd-stack.llmdImage" (dict "root" $root "which" "sidecar") -}}
{{- $pull := include "pd-stack.pullPolicy" (dict "policy" $root.Values.routerSpec.imagePullPolicy "image" $image) -}}
{{- $container := dict "name" "llm-d-routing-sidecar" "image" $image "imagePullPolicy" $pull "restartPolicy" "Always" "args" $args -}}
{{- /* Its port is declared once, as the pod's "http" on the vLLM container (pd-stack.enginePorts):
       the pool Service and the EPP reach the sidecar there; containers share the pod's network. */ -}}
{{- $_ := set $container "readinessProbe" (dict "tcpSocket" (dict "port" (int $port)) "periodSeconds" 5) -}}
{{- $_ := set $container "livenessProbe" (dict "tcpSocket" (dict "port" (int $port)) "periodSeconds" 10 "failureThreshold" 3) -}}
{{- with $sidecar.resources -}}{{- $_ := set $container "resources" . -}}{{- end -}}
{{- $_ := set $container "securityContext" (dict "allowPrivilegeEscalation" false "runAsNonRoot" true "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault")) -}}
{{- toYaml (list $container) -}}
{{- end -}}

{{/* A probe of the EPP container (dict "root" $ "kind" readiness|liveness): gRPC health on its
health port, service inference-extension with one replica, readiness/liveness with leader
election (config/charts/routerlib/templates/_deployment.yaml at v0.10.0), with the timings of
routerSpec.<kind>Probe (its httpGet does not apply to the EPP). */}}
{{- define "pd-stack.llmdEppProbe" -}}
{{- $ports := include "pd-stack.llmdEppPorts" .root | fromJson -}}
{{- $ha := gt (int .root.Values.routerSpec.replicaCount) 1 -}}
{{- $user := get .root.Values.routerSpec (printf "%sProbe" .kind) | default dict -}}
{{- $defaults := dict "readiness" (dict "periodSeconds" 2) "liveness" (dict "initialDelaySeconds" 5 "periodSeconds" 10) -}}
{{- $probe := merge (omit $user "httpGet") (get $defaults .kind) -}}
{{- $_ := set $probe "grpc" (dict "port" (int $ports.health) "service" (ternary .kind "inference-extension" $ha)) -}}
{{- toYaml $probe -}}
{{- end -}}

{{/* Envoy's own ports in standalone mode: its admin interface (loopback only) and the listener of
its /ready health check (the container's probes). */}}
{{- define "pd-stack.llmdEnvoyPorts" -}}
{{- toJson (dict "admin" 19000 "ready" 19001) -}}
{{- end -}}

{{/* The EPP container: the release's flags, the downward-API env the EPP reads, its gRPC, health
and metrics ports, the probes of pd-stack.llmdEppProbe, routerSpec.resources, its configuration
file and (to watch pods) the API token. */}}
{{- define "pd-stack.llmdEppContainer" -}}
{{- $router := .Values.routerSpec -}}
{{- $ports := include "pd-stack.llmdEppPorts" . | fromJson -}}
{{- $image := include "pd-stack.llmdImage" (dict "root" . "which" "epp") -}}
{{- $mounts := list (dict "name" "epp-config" "mountPath" "/config" "readOnly" true) -}}
{{- if include "pd-stack.routerUsesKubeAPI" . -}}{{- $mounts = append $mounts (include "pd-stack.routerTokenMount" . | fromYaml) -}}{{- end -}}
name: epp
image: {{ $image | quote }}
imagePullPolicy: {{ include "pd-stack.pullPolicy" (dict "policy" $router.imagePullPolicy "image" $image) }}
args:
  {{- include "pd-stack.llmdEppArgs" . | nindent 2 }}
env:
  - {name: NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
  - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
  {{- with include "pd-stack.routerEnv" . | fromYamlArray }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
ports:
  - {name: grpc, containerPort: {{ include "pd-stack.int" (dict "key" "the EPP gRPC port" "value" $ports.grpc) }}, protocol: TCP}
  - {name: grpc-health, containerPort: {{ include "pd-stack.int" (dict "key" "the EPP gRPC health port" "value" $ports.health) }}, protocol: TCP}
  - {name: metrics, containerPort: {{ include "pd-stack.int" (dict "key" "the EPP metrics port" "value" $ports.metrics) }}, protocol: TCP}
{{- with $router.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
readinessProbe:
  {{- include "pd-stack.llmdEppProbe" (dict "root" . "kind" "readiness") | nindent 2 }}
livenessProbe:
  {{- include "pd-stack.llmdEppProbe" (dict "root" . "kind" "liveness") | nindent 2 }}
{{- with $router.containerSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  {{- toYaml (concat $mounts ($router.extraVolumeMounts | default list)) | nindent 2 }}
{{- end -}}

{{/* Envoy in front of the EPP (standalone mode): its listener is the router's http port; it reads
envoy.yaml of the router ConfigMap (pd-stack.llmdEnvoyConfig). */}}
{{- define "pd-stack.llmdEnvoyContainer" -}}
{{- $router := .Values.routerSpec -}}
{{- $image := include "pd-stack.llmdImage" (dict "root" . "which" "envoy") -}}
{{- $ready := dict "httpGet" (dict "path" "/ready" "port" "envoy-ready") -}}
name: envoy
image: {{ $image | quote }}
imagePullPolicy: {{ include "pd-stack.pullPolicy" (dict "policy" $router.imagePullPolicy "image" $image) }}
command: [envoy]
args: [--service-node, envoy-proxy, --log-level, warn, --cpuset-threads, --drain-strategy, immediate, --drain-time-s, "60", -c, /etc/envoy/envoy.yaml]
ports:
  - {name: http, containerPort: {{ include "pd-stack.int" (dict "key" "routerSpec.containerPort" "value" $router.containerPort) }}, protocol: TCP}
  - {name: envoy-ready, containerPort: {{ (include "pd-stack.llmdEnvoyPorts" . | fromJson).ready }}, protocol: TCP}
readinessProbe: {{ merge (dict "periodSeconds" 5 "failureThreshold" 1) $ready | toJson }}
livenessProbe: {{ merge (dict "periodSeconds" 10 "failureThreshold" 3) $ready | toJson }}
{{- with dig "proxy" "resources" nil (.Values.routerSpec.llmd | default dict) }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $router.containerSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - {name: envoy-config, mountPath: /etc/envoy, readOnly: true}
{{- end -}}

{{/* The router pod's containers with routerSpec.type llm-d, as a YAML list: the EPP, and in
standalone mode Envoy in front of it. */}}
{{- define "pd-stack.llmdRouterContainers" -}}
{{- $containers := list (include "pd-stack.llmdEppContainer" . | fromYaml) -}}
{{- if eq (include "pd-stack.llmdMode" .) "standalone" -}}
{{- $containers = append $containers (include "pd-stack.llmdEnvoyContainer" . | fromYaml) -}}
{{- end -}}
{{- toYaml $containers -}}
{{- end -}}

{{/* The router pod's volumes with routerSpec.type llm-d: the EPP's and Envoy's configuration files
of the router ConfigMap, then routerSpec.extraVolumes. */}}
{{- define "pd-stack.llmdRouterVolumes" -}}
{{- $name := include "pd-stack.routerConfigName" . -}}
{{- $volumes := list (dict "name" "epp-config" "configMap" (dict "name" $name "items" (list (dict "key" "epp-config.yaml" "path" "epp-config.yaml")))) -}}
{{- if eq (include "pd-stack.llmdMode" .) "standalone" -}}
{{- $volumes = append $volumes (dict "name" "envoy-config" "configMap" (dict "name" $name "items" (list (dict "key" "envoy.yaml" "path" "envoy.yaml")))) -}}
{{- end -}}
{{- toYaml (concat $volumes (.Values.routerSpec.extraVolumes | default list)) -}}
{{- end -}}

{{/* The router ConfigMap's data (routerSpec.type llm-d), as YAML: the EPP configuration and, in
standalone mode, Envoy's. */}}
{{- define "pd-stack.routerConfigData" -}}
{{- $data := dict "epp-config.yaml" (include "pd-stack.llmdEppConfig" .) -}}
{{- if eq (include "pd-stack.llmdMode" .) "standalone" -}}
{{- $_ := set $data "envoy.yaml" (include "pd-stack.llmdEnvoyConfig" .) -}}
{{- end -}}
{{- toYaml $data -}}
{{- end -}}
