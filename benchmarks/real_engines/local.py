"""The rendered PD release as processes on one host: each engine's and the router's command line
and environment exactly as the chart rendered them, with only what running outside Kubernetes
needs changed (this list, nothing else):

- addresses and ports: engines listen on 127.0.0.1 at ports of their own, and each engine gets a
  NIXL side-channel port of its own (pods each have their own network; processes share one);
- weights: `--load-format dummy` on the model's real config.json and a tokenizer (a local folder
  given as the model, served under the rendered model name);
- memory: `--gpu-memory-utilization` lowered so that every engine fits when they share GPUs;
- discovery: the router gets the engines' URLs (static mode) instead of Kubernetes selectors;
- env: the downward API's pod IP becomes 127.0.0.1, the pod name the engine's name; Secret
  references and paths inside the pod (HF_HOME, HF_TOKEN_PATH) are left out.

`run.py` starts what this module plans; tests/test_real_engines_local.py checks the planning on
real renders (no GPU needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl import manifests, naming

LOOPBACK = "127.0.0.1"
# Env whose value is a path or a file inside the pod: meaningless on the host.
POD_ONLY_ENV = {"HF_HOME", "HF_TOKEN_PATH"}
NIXL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"
# vllm-router's Kubernetes discovery flags (each with the values up to the next flag).
DISCOVERY_FLAGS = {
    "--service-discovery",
    "--service-discovery-namespace",
    "--service-discovery-port",
    "--prefill-selector",
    "--decode-selector",
}


@dataclass
class Process:
    name: str  # the pool's name, or "router"
    role: str  # prefill, decode, both or router
    argv: list[str]
    env: dict[str, str]
    port: int  # where it serves HTTP

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


@dataclass
class Layout:
    engines: list[Process]
    router: Process | None
    changes: list[str] = field(default_factory=list)  # what was changed, for the record
    rendered_utilization: dict[str, float] = field(default_factory=dict)  # by pool, as rendered


def set_flag(args: list[str], flag: str, value: str) -> list[str]:
    """args with `flag value` replaced (or appended)."""
    out = list(args)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def _env(container: dict[str, Any], pod: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in container.get("env", []):
        name = entry["name"]
        if name in POD_ONLY_ENV:
            continue
        if "value" in entry:
            env[name] = str(entry["value"])
            continue
        path = (entry.get("valueFrom", {}).get("fieldRef") or {}).get("fieldPath")
        if path == "status.podIP":
            env[name] = LOOPBACK
        elif path == "metadata.name":
            env[name] = pod
        # secretKeyRef and others: no Secret on the host
    return env


def engine(
    deployment: dict[str, Any],
    pool: str,
    role: str,
    port: int,
    nixl_port: int,
    model_dir: Path,
    utilization: float,
) -> Process:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    argv = [str(word) for word in [*container.get("command", []), *container.get("args", [])]]
    served = argv[argv.index("serve") + 1]
    argv[argv.index("serve") + 1] = str(model_dir)
    argv = set_flag(argv, "--host", LOOPBACK)
    argv = set_flag(argv, "--port", str(port))
    argv = set_flag(argv, "--gpu-memory-utilization", f"{utilization:g}")
    argv = set_flag(argv, "--load-format", "dummy")
    if "--served-model-name" not in argv:
        argv += ["--served-model-name", served]
    env = _env(container, pool)
    if NIXL_PORT_ENV in env:
        env[NIXL_PORT_ENV] = str(nixl_port)
    return Process(pool, role, argv, env, port)


def router(deployment: dict[str, Any], port: int, engines: list[Process]) -> Process:
    """vllm-router with the engines' URLs in static PD mode, its other rendered flags kept."""
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    argv = [str(word) for word in [*container.get("command", []), *container.get("args", [])]]
    kept: list[str] = []
    dropping = False  # inside a Kubernetes discovery flag and its values
    for word in argv:
        if word.startswith("--"):
            dropping = word in DISCOVERY_FLAGS
        if not dropping:
            kept.append(word)
    kept = set_flag(kept, "--host", LOOPBACK)
    kept = set_flag(kept, "--port", str(port))
    kept = set_flag(kept, "--prometheus-host", LOOPBACK)
    kept = set_flag(kept, "--prometheus-port", str(port + 1))
    for e in engines:
        if e.role in ("prefill", "decode"):
            kept += [f"--{e.role}", e.url]
    return Process("router", "router", kept, _env(container, "router"), port)


def plan(
    objects: list[manifests.Manifest],
    release: str,
    model_dir: Path,
    gpus: int,
    base_port: int = 18000,
) -> Layout:
    """The engines and router of a rendered release as local processes; engines share `gpus`
    GPUs (each one's utilization is the rendered one, divided among the engines on a GPU)."""
    names = naming.Release(release)
    summary = manifests.summarize(objects)
    pools = [p for p in summary.pools if p.kind == "Deployment"]
    per_gpu = max(1, -(-len(pools) // max(gpus, 1)))  # engines sharing one GPU
    engines: list[Process] = []
    rendered_utilization: dict[str, float] = {}
    changes = [
        f"engines on {LOOPBACK}, ports from {base_port}; --load-format dummy on {model_dir}",
        "router in static PD mode with the engines' URLs (no Kubernetes discovery)",
    ]
    for i, pool in enumerate(pools):
        deployment = manifests.find(objects, "Deployment", names.pool_deployment(pool.name))
        args = deployment["spec"]["template"]["spec"]["containers"][0].get("args", [])
        rendered = float(args[args.index("--gpu-memory-utilization") + 1]) if (
            "--gpu-memory-utilization" in args
        ) else 0.9  # fmt: skip
        utilization = round(rendered / per_gpu, 2)
        rendered_utilization[pool.name] = rendered
        if per_gpu > 1:
            changes.append(f"{pool.name}: --gpu-memory-utilization {rendered:g} -> {utilization:g}")
        port, nixl_port = base_port + 10 * i, base_port + 10 * i + 5
        engines.append(
            engine(deployment, pool.name, pool.role, port, nixl_port, model_dir, utilization)
        )
    router_process = None
    if summary.router:
        found = manifests.find(objects, "Deployment", summary.router["name"])
        router_process = router(found, base_port + 10 * len(pools), engines)
    return Layout(engines, router_process, changes, rendered_utilization)
