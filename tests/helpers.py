"""Plain helpers shared by the test modules: paths, rendering with a given helm, manifest lookups.

Fixtures (the pinned helm binaries, the render cache) live in conftest.py. Test modules take
their helpers from here, never from conftest; nothing here runs helm when loaded.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from pdctl import manifests
from pdctl.helm import Helm, TemplateRequest, find_helm, parse_version, template, tools_dirs

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm"
CI = CHART / "ci"
ASSETS = ROOT / "tutorials" / "assets"
TUTORIAL_VALUES = ASSETS / "values-16-disagg-prefill.yaml"
# Every tutorial asset and helm/ci scenario: each renders, lints and validates cleanly.
VALUES_FILES = sorted(ASSETS.glob("*.yaml")) + sorted(CI.glob("*.yaml"))
HELM_VERSIONS = ["3.17.2", "4.1.4"]
KUBE_VERSIONS = ["1.29.0", "1.35.0"]

# How long a started server (vllm-router, the registry) may take to answer before a test gives
# up on it: a bound against hanging, not a timing check (it ends as soon as the server answers or
# exits). A loaded 2-core machine once took more than 30 s to start vllm-router.
STARTUP_LIMIT = 600

# What conftest's `rendered` fixture gives: rendered(helm, values_file) -> the objects.
Render = Callable[[Helm, Path], list[manifests.Manifest]]


def pinned_helm(version: str) -> Helm:
    """The pinned helm `version` from the tools folder (pdctl.helm.tools_dirs: $PDCTL_TOOLS_DIR
    or .tools); fails the test with what to run when it is missing.

    For conftest's session fixtures (helm3, helm4, helm): tests take those instead.
    """
    for directory in tools_dirs():
        if directory.name == f"helm-{version}":
            helm = find_helm(str(directory / "helm"))
            if parse_version(helm.version) != parse_version(version):
                pytest.fail(f"{helm.path} reports {helm.version}, not v{version}", pytrace=False)
            return helm
    where = os.environ.get("PDCTL_TOOLS_DIR") or ROOT / ".tools"
    pytest.fail(
        f"helm {version} is not in {where}: run `make helm` (make test does it for you)",
        pytrace=False,
    )


def load_values(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def write_values(tmp_path: Path, values: dict[str, Any] | str, name: str = "values.yaml") -> Path:
    path = tmp_path / name
    path.write_text(values if isinstance(values, str) else yaml.safe_dump(values))
    return path


def render_file(helm: Helm, values_file: Path, release: str = "pd") -> list[manifests.Manifest]:
    text = template(
        helm, TemplateRequest(chart=CHART, release=release, values_files=(values_file,))
    )
    return manifests.parse(text)


def helm_template_result(
    helm: Helm, values_file: Path, release: str = "pd"
) -> subprocess.CompletedProcess[str]:
    return helm.run(
        TemplateRequest(chart=CHART, release=release, values_files=(values_file,)).args()
    )


def assert_kube_valid(objects: list[manifests.Manifest], kube_version: str) -> None:
    """Every object against strict Kubernetes schemas; LeaderWorkerSets and DisaggregatedSets
    against their CRDs' own schemas (tests/crd_schemas.py)."""
    from pdctl.validation.kube import library
    from tests import crd_schemas

    kubernetes_validate = library()

    for obj in objects:
        if crd_schemas.is_custom(obj):
            problems = crd_schemas.errors(obj, kube_version)
            if problems:
                pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} fails its CRD: {problems}")
            continue
        try:
            kubernetes_validate.validate(obj, kube_version, strict=True)
        except kubernetes_validate.ValidationError as error:
            name = f"{obj['kind']}/{obj['metadata']['name']}"
            pytest.fail(f"{name} fails Kubernetes {kube_version}: {error.message} at {error.path}")


def container(objects: list[manifests.Manifest], deployment: str) -> dict[str, Any]:
    return manifests.find(objects, "Deployment", deployment)["spec"]["template"]["spec"][
        "containers"
    ][0]


def pool_container(
    objects: list[manifests.Manifest], values: dict[str, Any], pool: str
) -> dict[str, Any]:
    """The engine container of a pool whichever workload renders it: its Deployment's, its
    LeaderWorkerSet's leader, or its DisaggregatedSet role's leader."""
    from pdctl.naming import Release

    release = Release("pd")
    engine = values.get("servingEngineSpec") or {}
    spec = next(s for s in engine.get("modelSpec") or [] if s.get("name") == pool)
    if (engine.get("disaggregatedSet") or {}).get("enabled"):
        found = manifests.find(objects, "DisaggregatedSet", release.disaggregated_set)
        lws = next(r for r in found["spec"]["roles"] if r["name"] == pool)["spec"]
    elif spec.get("multiNode"):
        name = release.pool_leader_worker_set(pool)
        lws = manifests.find(objects, "LeaderWorkerSet", name)["spec"]
    else:
        return container(objects, release.pool_deployment(pool))
    template = lws["leaderWorkerTemplate"]
    return (template.get("leaderTemplate") or template["workerTemplate"])["spec"]["containers"][0]


def env_of(container_spec: dict[str, Any]) -> dict[str, Any]:
    """Env as name -> value (or the valueFrom mapping); fails on duplicate names."""
    names = [entry["name"] for entry in container_spec["env"]]
    assert len(names) == len(set(names)), f"duplicate env names: {names}"
    return {
        entry["name"]: entry.get("value", entry.get("valueFrom")) for entry in container_spec["env"]
    }


def stop(proc: subprocess.Popen[Any]) -> None:
    """Ends a process the tests started: politely, then for sure."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def free_port() -> int:
    """A loopback port no one listened on a moment ago (server() starts again if one does now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(
    command: Callable[[int, int], list[str]], ready: Callable[[int], str], log: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int, int]]:
    """A program serving on two free loopback ports: `command(port, other)` started, waited for
    until `ready(port)` (a URL) answers, stopped after the block; (the process, port, other).

    A port that was free a moment ago may be taken by another program on the host (two test
    suites at once): when the program exits saying its address is in use, it starts again on
    other ports, up to five times. A bound on the start (STARTUP_LIMIT), not a timing check."""
    for _ in range(5):
        port, other = free_port(), free_port()
        argv = command(port, other)
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        if _answers(proc, ready(port), log):
            break
        stop(proc)
        if "address already in use" not in log.read_text(errors="replace").lower():
            pytest.fail(f"{Path(argv[0]).name} exited: {log.read_text()[-2000:]}")
    else:
        pytest.fail(f"no free ports for {Path(argv[0]).name} in five tries")
    try:
        yield proc, port, other
    finally:
        stop(proc)


def _answers(proc: subprocess.Popen[bytes], url: str, log: Path) -> bool:
    """Whether the started program answers `url` (False once it has exited)."""
    deadline = time.monotonic() + STARTUP_LIMIT
    while proc.poll() is None:
        assert time.monotonic() < deadline, f"{url} did not answer: {log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(url, timeout=1):
                return proc.poll() is None  # not another program's answer on a taken port
        except OSError:
            time.sleep(0.05)
    return False


def extended(resources: dict[str, Any]) -> dict[str, Any]:
    """Extended resources (GPUs, RDMA NICs) of a requests or limits mapping: without cpu and
    memory, whose limits the chart derives from the requests (limitsFromRequests)."""
    return {key: value for key, value in resources.items() if key not in ("cpu", "memory")}


def canary_script() -> ModuleType:
    """The chart's canary script (helm/files/canary/pd_canary.py) imported as module `pd_canary`
    (registered in sys.modules, as its dataclasses need)."""
    spec = importlib.util.spec_from_file_location(
        "pd_canary", CHART / "files" / "canary" / "pd_canary.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
