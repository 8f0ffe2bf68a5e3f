{{/*
Production settings every workload shares: image references and pull policy, per-pool probes and
grace periods, the drains before engines and routers stop, topology spread, the router's API token,
the Hugging Face token file and PodDisruptionBudget bounds. Autoscaling, monitoring and the
NetworkPolicy have their own helper files. Pool helpers take
(dict "root" $ "spec" <modelSpec entry>).
*/}}

{{/* An image reference: repository:tag, with @digest when a digest is given (dict repository tag
digest). The tag stays readable (and the chart still reads vLLM's version from it); the digest is
what the kubelet pulls. */}}
{{- define "pd-stack.imageRef" -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- with .digest -}}@{{ . }}{{- end -}}
{{- end -}}

{{/* A pool's engine image (modelSpec.repository, tag and digest). */}}
{{- define "pd-stack.poolImage" -}}
{{- include "pd-stack.imageRef" (dict "repository" .spec.repository "tag" .spec.tag "digest" (.spec.digest | default "")) -}}
{{- end -}}

{{/* The pull policy of an image (dict policy image): the policy given, else IfNotPresent for an
image pinned by digest (it cannot change) and Always for a tag (which can move: the kubelet asks
the registry what the tag names now and pulls only layers it lacks). */}}
{{- define "pd-stack.pullPolicy" -}}
{{- if .policy -}}{{ .policy }}
{{- else if contains "@" .image -}}IfNotPresent
{{- else -}}Always
{{- end -}}
{{- end -}}

{{/* The timings (and httpGet path and port) of one engine probe of a pool, as YAML (dict root spec
kind, kind startupProbe|readinessProbe|livenessProbe): the pool's own over servingEngineSpec's,
key by key. pd-stack.healthProbe makes the probe. */}}
{{- define "pd-stack.poolProbeTimings" -}}
{{- $shared := get .root.Values.servingEngineSpec .kind | default dict -}}
{{- toYaml (merge (deepCopy (get .spec .kind | default dict)) (deepCopy $shared)) -}}
{{- end -}}

{{/* Seconds a pool's pods get to stop: modelSpec.terminationGracePeriodSeconds, else
servingEngineSpec's (0 included), else Kubernetes' default of 30. */}}
{{- define "pd-stack.poolGracePeriod" -}}
{{- $seconds := .root.Values.servingEngineSpec.terminationGracePeriodSeconds -}}
{{- if hasKey .spec "terminationGracePeriodSeconds" -}}{{- $seconds = .spec.terminationGracePeriodSeconds -}}{{- end -}}
{{- ternary 30 $seconds (kindIs "invalid" $seconds) | int -}}
{{- end -}}

{{/*
The engine's preStop drain (servingEngineSpec.drain), as a container lifecycle in YAML, or nothing
when drain is off. On deletion the pod leaves its Service's endpoints and the routers' discovery
(both drop terminating pods) while the hook runs: it waits delaySeconds for them to notice, then
until vLLM reports no running and no waiting request (vllm:num_requests_running and
vllm:num_requests_waiting on /metrics, which VLLM_API_KEY does not guard), so that the requests in
flight finish before vLLM gets SIGTERM. A prefill pool then waits holdSeconds more: the decode
engines read its KV blocks after its own request ended. The hook stops 10 seconds before the grace
period ends, leaving vLLM time to exit. A refused connection means vLLM is gone and ends the wait;
a slow or failed scrape is tried again. The image's Python runs it (vLLM images have no curl).
*/}}
{{- define "pd-stack.engineDrain" -}}
{{- $drain := .root.Values.servingEngineSpec.drain | default dict -}}
{{- if ne (toString (dig "enabled" true $drain)) "false" -}}
{{- $delay := int (ternary 5 $drain.delaySeconds (kindIs "invalid" $drain.delaySeconds)) -}}
{{- $budget := max 0 (sub (int (include "pd-stack.poolGracePeriod" .)) 10) -}}
{{- $hold := ternary (int (ternary 30 $drain.holdSeconds (kindIs "invalid" $drain.holdSeconds))) 0 (eq (include "pd-stack.poolRole" .) "prefill") -}}
{{- $script := list
  "import sys, time, urllib.request"
  "port, delay, budget, hold = (int(a) for a in sys.argv[1:5])"
  "end = time.time() + budget"
  "time.sleep(min(delay, budget))"
  "while time.time() < end:"
  "    try:"
  "        text = urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port, timeout=5).read().decode()"
  "    except OSError as error:"
  "        if isinstance(getattr(error, 'reason', error), ConnectionRefusedError):"
  "            break"
  "        time.sleep(1)"
  "        continue"
  "    busy = sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(('vllm:num_requests_running{', 'vllm:num_requests_waiting{')))"
  "    if busy == 0:"
  "        break"
  "    time.sleep(1)"
  "time.sleep(max(0, min(hold, end - time.time())))"
-}}
{{- $command := list (include "pd-stack.pythonExecutable" .) "-c" (join "\n" $script) (include "pd-stack.vllmPort" .) -}}
{{- range list (list "drain.delaySeconds" $delay) (list "terminationGracePeriodSeconds - 10" $budget) (list "drain.holdSeconds" $hold) -}}
{{- $command = append $command (include "pd-stack.int" (dict "key" (print "servingEngineSpec." (first .)) "value" (last .))) -}}
{{- end -}}
{{- toYaml (dict "preStop" (dict "exec" (dict "command" $command))) -}}
{{- end -}}
{{- end -}}

{{/* The router's preStop (routerSpec.drain): a pause of delaySeconds, so that the router Service's
endpoints drop the pod before the router stops taking connections. */}}
{{- define "pd-stack.routerDrain" -}}
{{- $drain := .Values.routerSpec.drain | default dict -}}
{{- if ne (toString (dig "enabled" true $drain)) "false" -}}
{{- $delay := ternary 5 $drain.delaySeconds (kindIs "invalid" $drain.delaySeconds) -}}
{{- $command := list "/bin/sh" "-c" (print "sleep " (include "pd-stack.int" (dict "key" "routerSpec.drain.delaySeconds" "value" $delay))) -}}
{{- toYaml (dict "preStop" (dict "exec" (dict "command" $command))) -}}
{{- end -}}
{{- end -}}

{{/* topologySpreadConstraints as given (dict constraints selector), each without a labelSelector
given the workload's own pods (selector: "key: value" lines of a selector helper). */}}
{{- define "pd-stack.topologySpread" -}}
{{- $out := list -}}
{{- range .constraints -}}
{{- $constraint := deepCopy . -}}
{{- if not (hasKey $constraint "labelSelector") -}}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" ($.selector | fromYaml)) -}}
{{- end -}}
{{- $out = append $out $constraint -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* Every pod of one pool (dict root spec): its engines and, for a multi-node pool, their workers. */}}
{{- define "pd-stack.poolPodsSelector" -}}
app.kubernetes.io/instance: {{ .root.Release.Name }}
model: {{ .spec.name }}
{{- end -}}

{{/*
The router pod's API token. The pod says automountServiceAccountToken: false; only the container
that discovers pods through the API (the router container, or the llm-d EPP) mounts what the
ServiceAccount admission controller would have: a bound token of 3607 seconds, which the kubelet
renews, the cluster's CA and the namespace (Kubernetes' "Managing Service Accounts", bound service
account token volume). Envoy, static discovery and LMCache's proxy get none.
*/}}
{{- define "pd-stack.routerTokenVolume" -}}
name: kube-api-access
projected:
  defaultMode: 0444
  sources:
    - serviceAccountToken:
        path: token
        expirationSeconds: 3607
    - configMap:
        name: kube-root-ca.crt
        items:
          - key: ca.crt
            path: ca.crt
    - downwardAPI:
        items:
          - path: namespace
            fieldRef:
              apiVersion: v1
              fieldPath: metadata.namespace
{{- end -}}

{{- define "pd-stack.routerTokenMount" -}}
name: kube-api-access
mountPath: /var/run/secrets/kubernetes.io/serviceaccount
readOnly: true
{{- end -}}

{{/* The Secret key of a pool's Hugging Face token (modelSpec.hf_token), as JSON {name, key}, or {}:
a string is stored in <release>-secrets under hf_token_<pool> (secret.yaml), a map names an
existing Secret. */}}
{{- define "pd-stack.hfTokenRef" -}}
{{- $token := .spec.hf_token -}}
{{- $ref := dict -}}
{{- if kindIs "map" $token -}}
{{- $ref = dict "name" $token.secretName "key" $token.secretKey -}}
{{- else if $token -}}
{{- $ref = dict "name" (include "pd-stack.secretName" .root) "key" (printf "hf_token_%s" .spec.name) -}}
{{- end -}}
{{- toJson $ref -}}
{{- end -}}

{{/* Where the engine container reads its Hugging Face token: a file of a Secret volume, named by
HF_TOKEN_PATH, which huggingface_hub reads when HF_TOKEN is not set (constants.HF_TOKEN_PATH,
utils/_auth.get_token), so the token is in no environment (kubectl describe, /proc/<pid>/environ,
child processes). */}}
{{- define "pd-stack.hfTokenDir" -}}
/var/run/secrets/huggingface
{{- end -}}

{{/* The token file's env, HF_TOKEN_PATH, as a one-item YAML list. */}}
{{- define "pd-stack.hfTokenEnv" -}}
- name: HF_TOKEN_PATH
  value: {{ include "pd-stack.hfTokenDir" . }}/token
{{- end -}}

{{/* The budget of a PodDisruptionBudget from production-stack's pdb keys (.pdb, the mapping at
the values path .at): minAvailable or maxUnavailable as given (a number or a percentage), else
maxUnavailable 1; and the unhealthy pod eviction policy (default AlwaysAllow). */}}
{{- define "pd-stack.disruptionBudgetSpec" -}}
{{- $pdb := .pdb -}}
{{- $key := ternary "maxUnavailable" "minAvailable" (kindIs "invalid" $pdb.minAvailable) -}}
{{- $value := ternary 1 (index $pdb $key) (kindIs "invalid" (index $pdb $key)) -}}
{{ $key }}: {{ if kindIs "string" $value }}{{ $value }}{{ else }}{{ include "pd-stack.int" (dict "key" (print .at "." $key) "value" $value) }}{{ end }}
unhealthyPodEvictionPolicy: {{ $pdb.unhealthyPodEvictionPolicy | default "AlwaysAllow" }}
{{- end -}}
