"""pdctl.naming against real renders: every name, label and selector the module computes is what
the chart renders, for a release name and namespace other than the defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pdctl import manifests, naming
from pdctl.helm import Helm, TemplateRequest, template
from pdctl.rules import summary
from tests.helpers import ASSETS, CHART, CI, container, load_values

RELEASE = naming.Release("team-a", "serving")
FILES = [
    ASSETS / "values-16-disagg-prefill.yaml",  # production-stack router, PVCs, chart Secret
    ASSETS / "values-18-nixl-xpyd.yaml",  # vllm-router with Kubernetes discovery
    CI / "nixl-dp-recompute-values.yaml",  # a pool of each role, the canary
]


def render(helm: Helm, path: Path, tmp_path: Path) -> list[manifests.Manifest]:
    # The tutorial names its decode Service with release "pd"; this release is another.
    text = path.read_text().replace("pd-llama-decode", f"{RELEASE.name}-llama-decode")
    values = tmp_path / path.name
    values.write_text(text)
    request = TemplateRequest(
        chart=CHART, release=RELEASE.name, namespace=RELEASE.namespace, values_files=(values,)
    )
    return manifests.parse(template(helm, request))


def names(objects: list[manifests.Manifest], kind: str) -> set[str]:
    return {obj["metadata"]["name"] for obj in objects if obj["kind"] == kind}


def pools(path: Path) -> list[dict[str, Any]]:
    return load_values(path)["servingEngineSpec"]["modelSpec"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_pool_objects_names_and_selectors(helm4: Helm, path: Path, tmp_path: Path) -> None:
    objects = render(helm4, path, tmp_path)
    for spec in pools(path):
        pool = spec["name"]
        deployment = manifests.find(objects, "Deployment", RELEASE.pool_deployment(pool))
        service = manifests.find(objects, "Service", RELEASE.pool_service(pool))
        assert deployment["metadata"]["namespace"] == RELEASE.namespace
        assert deployment["spec"]["selector"]["matchLabels"] == RELEASE.pool_selector(pool)
        assert service["spec"]["selector"] == RELEASE.pool_selector(pool)
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        role = labels[naming.ROLE]
        assert RELEASE.role_selector(role).items() <= labels.items()
        assert RELEASE.engine_selector.items() <= labels.items()
        wanted = set(RELEASE.pool_objects(pool, spec, summary.read(objects)[pool].kind))
        rendered = {deployment["metadata"]["name"], service["metadata"]["name"]}
        rendered |= names(objects, "PersistentVolumeClaim") & {RELEASE.pool_claim(pool)}
        rendered |= names(objects, "ConfigMap") & {RELEASE.pool_chat_templates(pool)}
        assert rendered == wanted


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_release_objects(helm4: Helm, path: Path, tmp_path: Path) -> None:
    objects = render(helm4, path, tmp_path)
    router = manifests.find(objects, "Deployment", RELEASE.router_deployment)
    assert router["spec"]["selector"]["matchLabels"] == RELEASE.router_selector
    service = manifests.find(objects, "Service", RELEASE.router_service)
    assert service["spec"]["selector"] == RELEASE.router_selector
    spec = router["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == RELEASE.router_service_account
    canary = {RELEASE.canary} if load_values(path).get("canary", {}).get("enabled") else set()
    assert names(objects, "ServiceAccount") == {RELEASE.router_service_account} | canary
    assert names(objects, "Role") == {RELEASE.router_role} | canary
    binding = manifests.find(objects, "RoleBinding", RELEASE.router_role_binding)
    assert binding["roleRef"]["name"] == RELEASE.router_role
    assert names(objects, "CronJob") == canary
    assert names(objects, "ConfigMap") & canary == canary
    if canary:
        job = manifests.find(objects, "CronJob", RELEASE.canary)["spec"]["jobTemplate"]["spec"]
        pod = job["template"]
        assert RELEASE.canary_selector.items() <= pod["metadata"]["labels"].items()
        assert pod["spec"]["serviceAccountName"] == RELEASE.canary
        binding = manifests.find(objects, "RoleBinding", RELEASE.canary)
        assert binding["roleRef"]["name"] == binding["subjects"][0]["name"] == RELEASE.canary
        policy = manifests.find(objects, "NetworkPolicy", RELEASE.engine_network_policy)
        admitted = [rule["from"][0].get("podSelector", {}) for rule in policy["spec"]["ingress"]]
        assert {"matchLabels": RELEASE.canary_selector} in admitted
    assert names(objects, "Pod") == {RELEASE.router_test}
    # Every pool Deployment and Service is one naming knows; nothing else is named by hand.
    kinds = {name: fact.kind for name, fact in summary.read(objects).items()}
    engine_names = {
        n
        for spec in pools(path)
        for n in RELEASE.pool_objects(spec["name"], spec, kinds[spec["name"]])
    }
    assert names(objects, "Deployment") - engine_names == {RELEASE.router_deployment}
    assert names(objects, "Service") - engine_names == {RELEASE.router_service}


def test_secret_and_router_discovery_selectors(helm4: Helm, tmp_path: Path) -> None:
    tutorial = render(helm4, FILES[0], tmp_path)
    assert names(tutorial, "Secret") == {RELEASE.secret}
    args = container(tutorial, RELEASE.router_deployment)["args"]
    selector = args[args.index("--k8s-label-selector") + 1]
    assert selector == naming.selector_text(RELEASE.engine_selector)
    vllm_router = container(render(helm4, FILES[1], tmp_path), RELEASE.router_deployment)["args"]
    for role in ("prefill", "decode"):
        start = vllm_router.index(f"--{role}-selector") + 1
        rendered = vllm_router[start : start + len(RELEASE.role_selector(role))]
        assert ",".join(rendered) == naming.selector_text(RELEASE.role_selector(role))


@pytest.mark.parametrize(
    ("host", "pool"),
    [
        ("team-a-decode-engine-service", "decode"),
        ("team-a-llama-decode-engine-service.serving", "llama-decode"),
        ("team-a-decode-engine-service.serving.svc", "decode"),
        ("team-a-decode-engine-service.serving.svc.cluster.local", "decode"),
        ("team-a-decode-engine-service.serving.svc.cluster", None),
        ("other-decode-engine-service", None),
        ("team-a-decode-engine-service\n", None),
        ("team-a--engine-service", None),
    ],
)
def test_service_pool(host: str, pool: str | None) -> None:
    assert naming.service_pool(RELEASE, host) == pool


def test_service_dns() -> None:
    service = RELEASE.pool_service("decode")
    assert RELEASE.service_dns(service) == "team-a-decode-engine-service.serving.svc.cluster.local"
