{{/*
Engine workloads: the pod template every kind shares (Deployment, LeaderWorkerSet leader and
workers, DisaggregatedSet roles), the engine command of a multi-node group per vLLM version
(files/workloads.yaml engineForms), and the LeaderWorkerSet spec a LeaderWorkerSet and a
DisaggregatedSet role share. Pool helpers take (dict "root" $ "spec" <modelSpec entry>).
*/}}

{{/* Loads files/workloads.yaml into the root context as .pdStackWorkloads (once); outputs nothing. */}}
{{- define "pd-stack.workloadTable" -}}
{{- if not (hasKey . "pdStackWorkloads") -}}
{{- $_ := set . "pdStackWorkloads" (.Files.Get "files/workloads.yaml" | fromYaml) -}}
{{- end -}}
{{- end -}}

{{/* "true" when the release renders its pools as one DisaggregatedSet (the root). */}}
{{- define "pd-stack.disaggregatedSetEnabled" -}}
{{- if dig "disaggregatedSet" "enabled" false (.Values.servingEngineSpec | default dict) -}}true{{- end -}}
{{- end -}}

{{/* How a pool is rendered: DisaggregatedSet (a role of the release's set), LeaderWorkerSet
(multiNode set) or Deployment. */}}
{{- define "pd-stack.poolKind" -}}
{{- if include "pd-stack.disaggregatedSetEnabled" .root -}}DisaggregatedSet
{{- else if .spec.multiNode -}}LeaderWorkerSet
{{- else -}}Deployment
{{- end -}}
{{- end -}}

{{/* Pods per engine: multiNode.nodes, else 1. */}}
{{- define "pd-stack.poolNodes" -}}
{{- include "pd-stack.int" (dict "key" "multiNode.nodes" "value" (dig "nodes" 1 (.spec.multiNode | default dict))) -}}
{{- end -}}

{{/*
The engine form of a multi-node pool (files/workloads.yaml engineForms) as JSON with its
placeholders filled, or {} for a one-pod engine or when no form fits the pool's vLLM version
(the checks refuse that). Adds "name".
*/}}
{{- define "pd-stack.engineForm" -}}
{{- include "pd-stack.workloadTable" .root -}}
{{- $table := .root.pdStackWorkloads -}}
{{- $nodes := int (include "pd-stack.poolNodes" .) -}}
{{- $dp := int (include "pd-stack.parallelSize" (dict "ctx" . "key" "dataParallelSize")) -}}
{{- $want := ternary "spanning" "single" (gt $dp 1) -}}
{{- $version := include "pd-stack.vllmVersion" . -}}
{{- $found := dict -}}
{{- if gt $nodes 1 -}}
{{- range $table.engineForms -}}
{{- if and (not $found) (eq .dataParallel $want) (or (not $version) (semverCompare .vllmVersions $version)) -}}
{{- $found = . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $found -}}
{{- $mn := merge (deepCopy (.spec.multiNode | default dict)) $table.multiNodeDefaults -}}
{{- $at := printf "%s.multiNode." (include "pd-stack.poolPath" .) -}}
{{- $fill := dict "{nodes}" (include "pd-stack.poolNodes" .) "{dpLocal}" (include "pd-stack.int" (dict "key" "vllmConfig.dataParallelSize / multiNode.nodes" "value" (div $dp $nodes))) -}}
{{- range $key, $name := dict "{masterPort}" "masterPort" "{rayPort}" "rayPort" "{dpRpcPort}" "dataParallelRpcPort" -}}
{{- $_ := set $fill $key (include "pd-stack.int" (dict "key" (print $at $name) "value" (get $mn $name))) -}}
{{- end -}}
{{- $json := toJson $found -}}
{{- range $key, $value := $fill -}}{{- $json = replace $key $value $json -}}{{- end -}}
{{- $json -}}
{{- else -}}{}
{{- end -}}
{{- end -}}

{{/*
The engine container's command and args (YAML) for one pod of a LeaderWorkerSet group (dict root
spec part, part leader or worker): `vllm serve` with the pool's arguments and the form's, through
/bin/sh when the form has a shell line or shell arguments.
*/}}
{{- define "pd-stack.engineCommand" -}}
{{- $ctx := dict "root" .root "spec" .spec -}}
{{- $exe := include "pd-stack.vllmExecutable" $ctx -}}
{{- $serveArgs := include "pd-stack.engineArgs" $ctx | fromYamlArray -}}
{{- $form := include "pd-stack.engineForm" $ctx | fromJson -}}
{{- $role := get $form .part | default dict -}}
{{- $serveArgs = concat $serveArgs ($role.args | default list) -}}
{{- $out := dict "command" (list $exe) "args" $serveArgs -}}
{{- if eq (toString (dig "serve" true $role)) "false" -}}
{{- $out = dict "command" (list "/bin/sh" "-c" $role.shell) "args" list -}}
{{- else if or $role.shell $role.shellArgs -}}
{{- $line := "exec \"$0\" \"$@\"" -}}
{{- with $role.shell -}}{{- $line = printf "%s && %s" . $line -}}{{- end -}}
{{- with $role.shellArgs -}}{{- $line = printf "%s %s" $line (join " " .) -}}{{- end -}}
{{- $out = dict "command" (list "/bin/sh" "-c" $line) "args" (prepend $serveArgs $exe) -}}
{{- end -}}
command:
  {{- toYaml $out.command | nindent 2 }}
{{- with $out.args }}
args:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The LeaderWorkerSet spec of a pool (dict root spec, and external: true for a DisaggregatedSet role
whose replicas an autoscaler owns): replicas groups of multiNode.nodes pods, a
leader (the API server, probed, found by the Service and the routers) and workers (label
app.kubernetes.io/component serving-engine-worker, so no Service or router selects them). One pod
per group renders only the worker template, which LWS uses for the leader too.
*/}}
{{- define "pd-stack.lwsSpec" -}}
{{- $nodes := int (include "pd-stack.poolNodes" .) -}}
{{- $mn := .spec.multiNode | default dict -}}
{{- if not .external }}
replicas: {{ include "pd-stack.int" (dict "key" (printf "%s.replicaCount" (include "pd-stack.poolPath" .)) "value" (ternary .spec.replicaCount 1 (hasKey .spec "replicaCount"))) }}
{{- end }}
leaderWorkerTemplate:
  size: {{ include "pd-stack.poolNodes" . }}
  {{- /* A vLLM engine cannot lose one pod and go on: a failed pod restarts its whole group. */}}
  restartPolicy: {{ $mn.restartPolicy | default "RecreateGroupOnPodRestart" }}
  {{- if gt $nodes 1 }}
  leaderTemplate:
    {{- include "pd-stack.enginePodTemplate" (dict "root" .root "spec" .spec "part" "leader") | nindent 4 }}
  workerTemplate:
    {{- include "pd-stack.enginePodTemplate" (dict "root" .root "spec" .spec "part" "worker") | nindent 4 }}
  {{- else }}
  workerTemplate:
    {{- include "pd-stack.enginePodTemplate" (dict "root" .root "spec" .spec "part" "leader") | nindent 4 }}
  {{- end }}
{{- /* Never more GPUs than the pool holds: one group at a time, no surge (LWS's own default). */}}
rolloutStrategy:
  type: RollingUpdate
  rollingUpdateConfiguration:
    maxSurge: 0
    maxUnavailable: 1
{{- end -}}

{{/*
The pod template of an engine (dict root spec part): part pod (a Deployment's pod), leader or
worker (a LeaderWorkerSet group's). Workers carry the component label serving-engine-worker and
no probes (they serve no HTTP).
*/}}
{{- define "pd-stack.enginePodTemplate" -}}
{{- $ctx := dict "root" .root "spec" .spec -}}
{{- $spec := .spec -}}
{{- $part := .part -}}
{{- $engine := .root.Values.servingEngineSpec -}}
{{- $tp := int (include "pd-stack.parallelGPUs" $ctx) -}}
{{- $net := $spec.network | default dict -}}
{{- /* The llm-d router's decode sidecar (_router-llmd.tpl) in decode pods that serve HTTP: it takes
       the engine port, vLLM moves to the sidecar's model-server port (named vllm), probed there. */ -}}
{{- $sidecar := and (ne $part "worker") (eq (include "pd-stack.llmdSidecarPool" $ctx) "true") -}}
{{- $probePort := ternary "vllm" "http" $sidecar -}}
{{- /* The connector's annotations win over podAnnotations: vllm-router reads the bootstrap port from them. */ -}}
{{- $annotations := merge (include "pd-stack.connectorAnnotations" $ctx | fromYaml) ($spec.podAnnotations | default dict) -}}
{{- $csc := deepCopy ($engine.containerSecurityContext | default dict) -}}
{{- if $net.ipcLock -}}
{{- /* RDMA memory registration pins pages: IPC_LOCK lifts the locked-memory limit. */ -}}
{{- $caps := $csc.capabilities | default dict -}}
{{- $_ := set $caps "add" (uniq (append ($caps.add | default list) "IPC_LOCK")) -}}
{{- $_ := set $csc "capabilities" $caps -}}
{{- end -}}
metadata:
  labels:
    {{- $labels := include "pd-stack.poolPodLabels" (dict "root" .root "spec" $spec "component" (ternary "serving-engine-worker" "serving-engine" (eq $part "worker"))) }}
    {{- $labels | nindent 4 }}
    {{- /* podLabels may add labels, never replace the chart's (PD015 guards model). */}}
    {{- range $key, $value := $spec.podLabels }}
    {{- if not (hasKey ($labels | fromYaml) $key) }}
    {{ $key }}: {{ $value | quote }}
    {{- end }}
    {{- end }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- with (ternary $spec.runtimeClassName $engine.runtimeClassName (hasKey $spec "runtimeClassName")) }}
  runtimeClassName: {{ . | quote }}
  {{- end }}
  {{- with $engine.schedulerName }}
  schedulerName: {{ . | quote }}
  {{- end }}
  {{- with $spec.priorityClassName }}
  priorityClassName: {{ . | quote }}
  {{- end }}
  {{- with $spec.serviceAccountName }}
  serviceAccountName: {{ . | quote }}
  {{- end }}
  {{- if $spec.hostIPC }}
  # Asked for by modelSpec.hostIPC: UCX cuda_ipc between pods on one node needs a shared IPC namespace.
  hostIPC: true
  {{- end }}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {{ include "pd-stack.poolGracePeriod" $ctx }}
  {{- with $spec.nodeName }}
  nodeName: {{ . }}
  {{- end }}
  {{- with $spec.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with include "pd-stack.poolTolerations" $ctx | fromYamlArray }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if $spec.affinity }}
  affinity:
    {{- toYaml $spec.affinity | nindent 4 }}
  {{- else if and $spec.nodeSelectorTerms (not $spec.nodeName) }}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          {{- toYaml $spec.nodeSelectorTerms | nindent 10 }}
  {{- end }}
  {{- with $spec.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- include "pd-stack.topologySpread" (dict "constraints" . "selector" (include "pd-stack.poolPodsSelector" $ctx)) | nindent 4 }}
  {{- end }}
  {{- with $spec.imagePullSecret }}
  imagePullSecrets:
    - name: {{ . }}
  {{- end }}
  {{- with $engine.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- $inits := list }}
  {{- if $spec.initContainer }}{{- $inits = include "pd-stack.engineInitContainer" $ctx | fromYamlArray }}{{- end }}
  {{- if $sidecar }}{{- $inits = concat $inits (include "pd-stack.llmdSidecarContainer" $ctx | fromYamlArray) }}{{- end }}
  {{- with $inits }}
  initContainers:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: vllm
      {{- $image := include "pd-stack.poolImage" $ctx }}
      image: {{ $image | quote }}
      imagePullPolicy: {{ include "pd-stack.pullPolicy" (dict "policy" $engine.imagePullPolicy "image" $image) }}
      {{- if eq $part "pod" }}
      command: [{{ include "pd-stack.vllmExecutable" $ctx | quote }}]
      args:
        {{- include "pd-stack.engineArgs" $ctx | nindent 8 }}
      {{- else }}
      {{- include "pd-stack.engineCommand" . | nindent 6 }}
      {{- end }}
      env:
        {{- include "pd-stack.engineEnv" $ctx | nindent 8 }}
      {{- with include "pd-stack.engineEnvFrom" $ctx | fromYamlArray }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      ports:
        {{- include "pd-stack.enginePorts" $ctx | nindent 8 }}
        {{- if $sidecar }}
        - name: vllm
          containerPort: {{ include "pd-stack.vllmPort" $ctx }}
          protocol: TCP
        {{- end }}
      {{- with ($spec.resources | default (include "pd-stack.engineResources" $ctx | fromYaml)) }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if ne $part "worker" }}
      startupProbe:
        {{- include "pd-stack.healthProbe" (dict "port" $probePort "force" $sidecar "timings" (include "pd-stack.poolProbeTimings" (dict "root" .root "spec" $spec "kind" "startupProbe") | fromYaml)) | nindent 8 }}
      readinessProbe:
        {{- include "pd-stack.healthProbe" (dict "port" $probePort "force" $sidecar "timings" (include "pd-stack.poolProbeTimings" (dict "root" .root "spec" $spec "kind" "readinessProbe") | fromYaml)) | nindent 8 }}
      livenessProbe:
        {{- include "pd-stack.healthProbe" (dict "port" $probePort "force" $sidecar "timings" (include "pd-stack.poolProbeTimings" (dict "root" .root "spec" $spec "kind" "livenessProbe") | fromYaml)) | nindent 8 }}
      {{- with include "pd-stack.engineDrain" $ctx }}
      lifecycle:
        {{- . | nindent 8 }}
      {{- end }}
      {{- end }}
      {{- with $csc }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: hf-cache
          mountPath: /data
        {{- if include "pd-stack.hfTokenRef" $ctx | fromJson }}
        - name: hf-token
          mountPath: {{ include "pd-stack.hfTokenDir" $ctx }}
          readOnly: true
        {{- end }}
        {{- if or $spec.shmSize (gt $tp 1) }}
        - name: dshm
          mountPath: /dev/shm
        {{- end }}
        {{- if $spec.chatTemplate }}
        - name: chat-templates
          mountPath: /templates
        {{- end }}
        {{- if include "pd-stack.prometheusMultiprocMount" $ctx }}
        - name: prometheus-multiproc
          mountPath: {{ include "pd-stack.prometheusMultiprocDir" $ctx }}
        {{- end }}
        {{- with $spec.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: hf-cache
      {{- if kindIs "map" $spec.pvcStorage }}
      emptyDir:
        {{- toYaml $spec.pvcStorage.emptyDir | nindent 8 }}
      {{- else if $spec.pvcStorage }}
      persistentVolumeClaim:
        claimName: {{ $spec.pvcExistingClaimName | default (include "pd-stack.poolClaimName" $ctx) }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- with include "pd-stack.hfTokenRef" $ctx | fromJson }}
    - name: hf-token
      secret:
        secretName: {{ .name | quote }}
        defaultMode: 0444
        items:
          - key: {{ .key | quote }}
            path: token
    {{- end }}
    {{- if $spec.chatTemplate }}
    - name: chat-templates
      {{- if $spec.chatTemplateConfigMap }}
      configMap:
        name: {{ include "pd-stack.poolChatTemplateName" $ctx }}
      {{- else }}
      # As production-stack: the template file comes from an existing PVC of this name.
      persistentVolumeClaim:
        claimName: vllm-templates-pvc
      {{- end }}
    {{- end }}
    {{- if include "pd-stack.prometheusMultiprocMount" $ctx }}
    # PROMETHEUS_MULTIPROC_DIR: prometheus_client's multiprocess files, empty at start, per pod.
    - name: prometheus-multiproc
      emptyDir: {}
    {{- end }}
    {{- with $spec.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- if or $spec.shmSize (gt $tp 1) }}
    # Parallel workers (TP/PP/DP in one pod) exchange data through /dev/shm; the container default (64Mi) is too small.
    - name: dshm
      emptyDir:
        medium: Memory
        sizeLimit: {{ $spec.shmSize | default "20Gi" }}
    {{- end }}
{{- end -}}
