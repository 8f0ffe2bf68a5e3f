"""Object names, labels and selectors exactly as the chart computes them (templates/_helpers.tpl).

Rules, the render summary, deploy, status and verify use these instead of writing a
name by hand; tests/test_naming.py compares every name and selector here with a real render.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pdctl import defaults, topology
from pdctl.errors import UsageError

NAME_LIMIT = 63  # Kubernetes names of Services (DNS-1035 labels) and label values

# A release name: helm's rule (ValidateReleaseName, pkg/chartutil/validate_name.go; both Helm 3
# and 4 print it when they refuse a name: at most 53 characters, DNS-1123 subdomain parts), narrowed
# to what Kubernetes takes at the head of this chart's Service names (<release>-router-service,
# <release>-<pool>-engine-service are DNS-1035 labels: a letter first, no '.'). A namespace: a
# DNS-1123 label (IsDNS1123Label, k8s.io/apimachinery). Matched whole (fullmatch), so no trailing
# newline slips through as it would past a `$`.
RELEASE_LIMIT = 53
NAMESPACE_LIMIT = 63
_RELEASE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

# Label keys.
INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
POOL = "model"  # the production-stack router tells pools apart by this pod label
ROLE = "pd-stack.io/role"
# The annotation on each engine workload's own metadata: the chart's summary of its pools, JSON
# (helm/templates/_summary.tpl; read by pdctl.rules.summary).
SUMMARY = "pd-stack.io/summary"

# Values of ROLE: a pool's part in PD serving (both = aggregated, no KV transfer).
ROLES = topology.load().roles

# Values of COMPONENT.
ENGINE = "serving-engine"
# The workers of a multi-node engine (LeaderWorkerSet): Services and routers select ENGINE, so
# they see only the leaders, which serve HTTP.
ENGINE_WORKER = "serving-engine-worker"
ROUTER = "router"
TEST = "test"
CANARY = "canary"

# The container port vLLM serves on in a decode pod whose engine port the llm-d router's decode
# sidecar holds (templates/_workloads.tpl); elsewhere vLLM serves on the engine port itself.
VLLM_PORT = "vllm"


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str = defaults.NAMESPACE

    # ---- engine pools
    def pool_prefix(self, pool: str) -> str:
        return f"{self.name}-{pool}"

    def pool_deployment(self, pool: str) -> str:
        return f"{self.pool_prefix(pool)}-deployment-vllm"

    def pool_leader_worker_set(self, pool: str) -> str:
        """A multi-node pool's LeaderWorkerSet; its pods are <name>-<group>[-<worker>]."""
        return f"{self.pool_prefix(pool)}-lws-vllm"

    def pool_service(self, pool: str) -> str:
        return f"{self.pool_prefix(pool)}-engine-service"

    def pool_claim(self, pool: str) -> str:
        return f"{self.pool_prefix(pool)}-storage-claim"

    def pool_chat_templates(self, pool: str) -> str:
        return f"{self.pool_prefix(pool)}-chat-templates"

    def pool_disruption_budget(self, pool: str) -> str:
        """A pool's PodDisruptionBudget (modelSpec.pdb), named as production-stack's."""
        return f"{self.pool_prefix(pool)}-pdb-vllm"

    def pool_scaled_object(self, pool: str) -> str:
        """A pool's KEDA ScaledObject (modelSpec.keda), named as production-stack's."""
        return f"{self.pool_prefix(pool)}-scaledobject"

    def role_scaler(self, pool: str) -> str:
        """The DisaggregatedSetRoleScaler of a pool with scalingMode External (LWS names it)."""
        return f"{self.disaggregated_set}-{pool}"

    def pool_workload(self, pool: str, kind: str) -> str:
        """The workload the chart renders for one pool of this kind (the chart's summary of the
        pool says it): its Deployment, its LeaderWorkerSet, or the release's DisaggregatedSet."""
        if kind == "DisaggregatedSet":
            return self.disaggregated_set
        if kind == "LeaderWorkerSet":
            return self.pool_leader_worker_set(pool)
        return self.pool_deployment(pool)

    def pool_objects(self, pool: str, spec: Mapping[str, Any], kind: str) -> list[str]:
        """Names of the objects the chart renders for one pool (its modelSpec entry, its
        workload's kind)."""
        names = [self.pool_workload(pool, kind), self.pool_service(pool)]
        storage = spec.get("pvcStorage")
        if storage and isinstance(storage, str) and not spec.get("pvcExistingClaimName"):
            names.append(self.pool_claim(pool))
        if spec.get("chatTemplate") and spec.get("chatTemplateConfigMap"):
            names.append(self.pool_chat_templates(pool))
        return names

    def service_dns(self, service: str) -> str:
        return f"{service}.{self.namespace}.svc.cluster.local"

    # ---- release-wide objects
    @property
    def secret(self) -> str:
        return f"{self.name}-secrets"

    @property
    def engine_configs(self) -> str:
        """The ConfigMap of servingEngineSpec.configs."""
        return f"{self.name}-configs"

    @property
    def disaggregated_set(self) -> str:
        """The DisaggregatedSet of servingEngineSpec.disaggregatedSet; its controller names the
        LeaderWorkerSets it creates <name>-<slice>-<revision>-<pool>."""
        return f"{self.name}-engines"

    @property
    def router_deployment(self) -> str:
        return f"{self.name}-deployment-router"

    @property
    def router_service(self) -> str:
        return f"{self.name}-router-service"

    @property
    def router_service_account(self) -> str:
        return f"{self.name}-router-service-account"

    @property
    def router_role(self) -> str:
        return f"{self.name}-pod-reader"

    @property
    def router_role_binding(self) -> str:
        return f"{self.name}-router-pod-reader"

    @property
    def router_config(self) -> str:
        """The router's ConfigMap (routerSpec.type llm-d: the EPP's and Envoy's configuration)."""
        return f"{self.name}-router-config"

    @property
    def inference_pool(self) -> str:
        """llm-d gateway mode: the InferencePool of the release's engine pods."""
        return f"{self.name}-inference-pool"

    @property
    def http_route(self) -> str:
        """llm-d gateway mode: the HTTPRoute from the Gateway to the InferencePool."""
        return f"{self.name}-route"

    def engine_monitor(self, kind: str) -> str:
        """The engines' ServiceMonitor or PodMonitor (servingEngineSpec.serviceMonitor, ...)."""
        return f"{self.name}-engine-{kind.lower()}"

    def router_monitor(self, kind: str) -> str:
        """The router's ServiceMonitor or PodMonitor (routerSpec.serviceMonitor, podMonitor)."""
        return f"{self.name}-router-{kind.lower()}"

    @property
    def engine_network_policy(self) -> str:
        """The engines' NetworkPolicy (servingEngineSpec.networkPolicy)."""
        return f"{self.name}-engine-networkpolicy"

    @property
    def dashboard(self) -> str:
        """The Grafana dashboard's ConfigMap (grafanaDashboards)."""
        return f"{self.name}-grafana-pd-stack"

    @property
    def alert_rules(self) -> str:
        """The PrometheusRule of the PD alerts (alerts)."""
        return f"{self.name}-pd-stack-alerts"

    @property
    def router_autoscaler(self) -> str:
        """The router's HorizontalPodAutoscaler (routerSpec.autoscaling)."""
        return f"{self.name}-router-hpa"

    @property
    def router_disruption_budget(self) -> str:
        """The router's PodDisruptionBudget (routerSpec.pdb)."""
        return f"{self.name}-router-pdb"

    @property
    def router_test(self) -> str:
        return f"{self.name}-test-router"

    @property
    def canary(self) -> str:
        """The PD canary (canary.enabled): its CronJob, ConfigMap, ServiceAccount, Role and
        RoleBinding share this name."""
        return f"{self.name}-pd-canary"

    # ---- selectors
    @property
    def engine_selector(self) -> dict[str, str]:
        """Every engine pod of the release (what the routers discover)."""
        return {INSTANCE: self.name, COMPONENT: ENGINE}

    def pool_selector(self, pool: str) -> dict[str, str]:
        return {**self.engine_selector, POOL: pool}

    def pool_pods_selector(self, pool: str) -> dict[str, str]:
        """Every pod of one pool: its engines' leaders and, for a multi-node pool, its workers."""
        return {INSTANCE: self.name, POOL: pool}

    def role_selector(self, role: str) -> dict[str, str]:
        """Engine pods of one PD role (prefill, decode or both)."""
        return {**self.engine_selector, ROLE: role}

    @property
    def router_selector(self) -> dict[str, str]:
        return {INSTANCE: self.name, COMPONENT: ROUTER}

    @property
    def pods_selector(self) -> dict[str, str]:
        """Every pod of the release: engines, router and canary."""
        return {INSTANCE: self.name}

    @property
    def canary_selector(self) -> dict[str, str]:
        return {INSTANCE: self.name, COMPONENT: CANARY}


def selector_text(selector: dict[str, str]) -> str:
    """A selector as kubectl and the Kubernetes API take it: "k=v,k=v"."""
    return ",".join(f"{key}={value}" for key, value in selector.items())


def service_pool(release: Release, host: str) -> str | None:
    """The pool whose Service a host names: <release>-<pool>-engine-service, optionally followed by
    .<namespace>, .<namespace>.svc or .<namespace>.svc.cluster.local; else None. The chart's
    check of the tutorial's nixlPeerHost uses the same pattern
    (templates/_checks-connectors.tpl)."""
    pattern = (
        rf"{re.escape(release.name)}-([a-z0-9-]+)-engine-service"
        r"(\.[a-z0-9-]+(\.svc(\.cluster\.local)?)?)?"
    )
    match = re.fullmatch(pattern, host)
    return match.group(1) if match else None


def check_release(name: str) -> str:
    """The name, if helm takes it as a release name and Kubernetes the chart's Service names made
    from it; else UsageError saying the rule."""
    if len(name) > RELEASE_LIMIT or not _RELEASE.fullmatch(name):
        raise UsageError(
            f"{name!r} is not a release name: at most {RELEASE_LIMIT} lowercase letters, digits "
            "and '-', starting with a letter and ending with a letter or digit (helm's rule, "
            "narrowed to what the chart's Service names <release>-... need)"
        )
    return name


def check_namespace(name: str) -> str:
    """The name, if Kubernetes takes it as a namespace; else UsageError saying the rule."""
    if len(name) > NAMESPACE_LIMIT or not _LABEL.fullmatch(name):
        raise UsageError(
            f"{name!r} is not a namespace: Kubernetes takes at most {NAMESPACE_LIMIT} lowercase "
            "letters, digits and '-', starting and ending with a letter or digit (DNS-1123 label)"
        )
    return name
