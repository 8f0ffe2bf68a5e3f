{{/*
Shared helpers, in three files: object names, labels and selectors here (pdctl/naming.py computes
the same, and a test compares the two on real renders); the pool facts every template needs in
_helpers-pools.tpl; the engine container (arguments, env, resources, probes) in
_helpers-engine.tpl. Pool helpers take a dict: (dict "root" $ "spec" <modelSpec entry>).
*/}}

{{/* ---- Names --------------------------------------------------------------------------- */}}

{{/* Name prefix of one pool's objects: <release>-<pool>. */}}
{{- define "pd-stack.poolFullname" -}}
{{- printf "%s-%s" .root.Release.Name .spec.name -}}
{{- end -}}

{{- define "pd-stack.poolDeploymentName" -}}
{{- printf "%s-deployment-vllm" (include "pd-stack.poolFullname" .) -}}
{{- end -}}

{{/* A multi-node pool's LeaderWorkerSet (its pods: <name>-<group>[-<worker>]). */}}
{{- define "pd-stack.poolLeaderWorkerSetName" -}}
{{- printf "%s-lws-vllm" (include "pd-stack.poolFullname" .) -}}
{{- end -}}

{{/* The release's DisaggregatedSet (servingEngineSpec.disaggregatedSet; the root). Its controller
names the LeaderWorkerSets it creates <name>-<slice>-<revision>-<pool>. */}}
{{- define "pd-stack.disaggregatedSetName" -}}
{{- printf "%s-engines" .Release.Name -}}
{{- end -}}

{{- define "pd-stack.poolServiceName" -}}
{{- printf "%s-engine-service" (include "pd-stack.poolFullname" .) -}}
{{- end -}}

{{- define "pd-stack.poolClaimName" -}}
{{- printf "%s-storage-claim" (include "pd-stack.poolFullname" .) -}}
{{- end -}}

{{- define "pd-stack.poolChatTemplateName" -}}
{{- printf "%s-chat-templates" (include "pd-stack.poolFullname" .) -}}
{{- end -}}

{{/* A pool's PodDisruptionBudget (modelSpec.pdb), named as production-stack's. */}}
{{- define "pd-stack.poolDisruptionBudgetName" -}}
{{- printf "%s-pdb-vllm" (include "pd-stack.poolFullname" .) -}}
{{- end -}}

{{/* A pool's KEDA ScaledObject (modelSpec.keda), named as production-stack's. */}}
{{- define "pd-stack.poolScaledObjectName" -}}
{{- printf "%s-scaledobject" (include "pd-stack.poolFullname" .) -}}
{{- end -}}

{{- define "pd-stack.secretName" -}}
{{- printf "%s-secrets" .Release.Name -}}
{{- end -}}

{{/* Key of the router's API key (routerSpec.vllmApiKey given as a string) in <release>-secrets. */}}
{{- define "pd-stack.routerApiKeySecretKey" -}}
routerVllmApiKey
{{- end -}}

{{- define "pd-stack.engineConfigsName" -}}
{{- printf "%s-configs" .Release.Name -}}
{{- end -}}

{{- define "pd-stack.routerDeploymentName" -}}
{{- printf "%s-deployment-router" .Release.Name -}}
{{- end -}}

{{- define "pd-stack.routerServiceName" -}}
{{- printf "%s-router-service" .Release.Name -}}
{{- end -}}

{{/* The router pods' ServiceAccount: routerSpec.serviceAccountName (an existing one), else the
chart's own, <release>-router-service-account. */}}
{{- define "pd-stack.routerServiceAccountName" -}}
{{- .Values.routerSpec.serviceAccountName | default (printf "%s-router-service-account" .Release.Name) -}}
{{- end -}}

{{- define "pd-stack.routerRoleName" -}}
{{- printf "%s-pod-reader" .Release.Name -}}
{{- end -}}

{{- define "pd-stack.routerRoleBindingName" -}}
{{- printf "%s-router-pod-reader" .Release.Name -}}
{{- end -}}

{{/* The router's configuration (routerSpec.type llm-d: the EPP's and Envoy's). */}}
{{- define "pd-stack.routerConfigName" -}}
{{- printf "%s-router-config" .Release.Name -}}
{{- end -}}

{{/* llm-d gateway mode: the InferencePool of the release's engine pods and the HTTPRoute to it. */}}
{{- define "pd-stack.inferencePoolName" -}}
{{- printf "%s-inference-pool" .Release.Name -}}
{{- end -}}

{{- define "pd-stack.httpRouteName" -}}
{{- printf "%s-route" .Release.Name -}}
{{- end -}}

{{/* prometheus-operator scrape objects (servingEngineSpec/routerSpec serviceMonitor, podMonitor);
the ServiceMonitors are named as production-stack's. .kind: ServiceMonitor or PodMonitor. */}}
{{- define "pd-stack.engineMonitorName" -}}
{{- printf "%s-engine-%s" .root.Release.Name (lower .kind) -}}
{{- end -}}

{{- define "pd-stack.routerMonitorName" -}}
{{- printf "%s-router-%s" .root.Release.Name (lower .kind) -}}
{{- end -}}

{{/* The engines' NetworkPolicy (servingEngineSpec.networkPolicy). */}}
{{- define "pd-stack.engineNetworkPolicyName" -}}
{{- printf "%s-engine-networkpolicy" .Release.Name -}}
{{- end -}}

{{/* The ConfigMap of the Grafana dashboard (grafanaDashboards), named as production-stack's
<release>-grafana-<dashboard file>. */}}
{{- define "pd-stack.dashboardName" -}}
{{- printf "%s-grafana-pd-stack" .Release.Name -}}
{{- end -}}

{{/* The PrometheusRule of the PD alerts (alerts). */}}
{{- define "pd-stack.alertRulesName" -}}
{{- printf "%s-pd-stack-alerts" .Release.Name -}}
{{- end -}}

{{/* The router's HorizontalPodAutoscaler (routerSpec.autoscaling), named as production-stack's. */}}
{{- define "pd-stack.routerAutoscalerName" -}}
{{- printf "%s-router-hpa" .Release.Name -}}
{{- end -}}

{{- define "pd-stack.routerDisruptionBudgetName" -}}
{{- printf "%s-router-pdb" .Release.Name -}}
{{- end -}}

{{/* The PD canary (canary.enabled): its CronJob, ConfigMap, ServiceAccount, Role and RoleBinding. */}}
{{- define "pd-stack.canaryName" -}}
{{- printf "%s-pd-canary" .Release.Name -}}
{{- end -}}

{{- define "pd-stack.routerTestName" -}}
{{- printf "%s-test-router" .Release.Name -}}
{{- end -}}

{{/* ---- Labels and selectors ---------------------------------------------------------------- */}}

{{/* Labels every object of this release carries. */}}
{{- define "pd-stack.labels" -}}
app.kubernetes.io/name: pd-stack
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pd-stack
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector of all engine pods of this release: what the routers discover. */}}
{{- define "pd-stack.engineSelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: serving-engine
{{- end -}}

{{/* Selector of one pool's pods: the engine selector and the pool label model=<pool>. */}}
{{- define "pd-stack.poolSelector" -}}
{{ include "pd-stack.engineSelector" .root }}
model: {{ .spec.name }}
{{- end -}}

{{/* Selector of the router pods. */}}
{{- define "pd-stack.routerSelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: router
{{- end -}}

{{/* Selector of the canary's pods. */}}
{{- define "pd-stack.canarySelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: canary
{{- end -}}

{{/* A selector (the "key: value" lines of a selector helper, in .selector) as "k=v,k=v" or, with
.list, a JSON list of "k=v", in the helper's order. */}}
{{- define "pd-stack.selectorArgs" -}}
{{- $pairs := list -}}
{{- range splitList "\n" .selector -}}
{{- with splitList ": " . -}}{{- $pairs = append $pairs (printf "%s=%s" (first .) (last .)) -}}{{- end -}}
{{- end -}}
{{- if .list -}}{{- toJson $pairs -}}{{- else -}}{{- join "," $pairs -}}{{- end -}}
{{- end -}}

{{/* Pod labels of one pool: the release labels, model=<pool>, the component (.component, default
serving-engine; the workers of a multi-node engine are serving-engine-worker, so that Services and
routers, which select serving-engine, see only leaders) and the PD role (pd-stack.io/role). User
labels may add keys but never replace these (checked in _checks.tpl). */}}
{{- define "pd-stack.poolPodLabels" -}}
{{- $spec := .spec -}}
{{- $own := dict "model" $spec.name "app.kubernetes.io/component" (.component | default "serving-engine") "pd-stack.io/role" (include "pd-stack.poolRole" .) -}}
{{- $user := merge (deepCopy ($spec.labels | default dict)) (.root.Values.servingEngineSpec.labels | default dict) -}}
{{ include "pd-stack.labels" .root }}
{{ toYaml (merge $own $user) }}
{{- end -}}
