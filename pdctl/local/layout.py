"""The rendered release as processes on one host: each engine's and the router's command line and
environment exactly as the chart rendered them, with only what running outside Kubernetes needs
changed, and nothing else:

- addresses and ports: every process listens on 127.0.0.1 at a port of its own, and each engine
  gets a NIXL side-channel port of its own (pods each have their own network; processes share one);
- GPUs: each engine gets its share of the host's GPUs in CUDA_VISIBLE_DEVICES, and
  `--gpu-memory-utilization` divided among the engines that share a GPU; engines that share a GPU
  get UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y unless the render sets it (pdctl/ucx.py: UCX reads KV over
  TCP between them otherwise) and cuda_ipc in a rendered UCX_TLS list that lacks it, and start
  one after another (start_waves);
- discovery: the router gets the engines' URLs (static mode) instead of Kubernetes selectors;
- env: the downward API's pod IP becomes 127.0.0.1, the pod name the engine's name; Secret
  references and paths inside the pod (HF_HOME, HF_TOKEN_PATH) are left out;
- the engine: `vllm serve` as rendered, or the pd-stack simulator (`python -m pdctl.simulator
  serve`, the same arguments and `--sim-gpu`, the GPU it times its steps for) where there is no
  GPU;
- weights (the GPU benchmark harness only): `--load-format dummy` on a local model folder holding
  the model's config.json and a tokenizer, served under the rendered model name.

- the router: vllm-router as rendered, or, where the render's router is production-stack's or
  LMCache's PD proxy (neither is on a package index), the pd-stack router stand-in playing it
  (pdctl.local.routers, pdctl.standin), named as such; LMCache's PD addresses rewritten for one
  host (pdctl.local.lmcache_env).

A pool of several replicas runs that many engines. Pools of several nodes (LeaderWorkerSet) and
routers up cannot run are refused, naming what would run, and so is what would change what runs
unless the user allows it (pdctl.local.consent: env outside the chart's, another command, flags
that load code; a router command the stand-in plays is not run, its env is still checked).
Whatever the render says, every process listens on loopback only: each form of a flag that sets an
address or port (pdctl.local.flags: `--hos 0.0.0.0`, `--host=...`) is replaced, and env naming
an address to listen on is set to 127.0.0.1.
"""

from __future__ import annotations

import shlex
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl import defaults, manifests, naming, secrets, ucx
from pdctl.errors import EnvironmentProblem, InputError
from pdctl.local import consent, flags, lmcache_env, routers

LOOPBACK = "127.0.0.1"
ENGINES = ("vllm", "sim")  # real vLLM, or the pd-stack simulator
SIMULATOR = [sys.executable, "-m", "pdctl.simulator"]
# Env whose value is a path or a file inside the pod: meaningless on the host.
POD_ONLY_ENV = {"HF_HOME", "HF_TOKEN_PATH"}
# Env that says the engine reads a Hugging Face token (a gated model).
TOKEN_ENV = {"HF_TOKEN", "HF_TOKEN_PATH"}
NIXL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"
GPU_ENV = "CUDA_VISIBLE_DEVICES"
UTILIZATION = "--gpu-memory-utilization"
# The flags that set where a process listens: vLLM's API server (FrontendArgs in
# vllm/entrypoints/openai/cli_args.py: --host, --port, --uds) and data-parallel coordinator
# (--data-parallel-address), the simulator's (--host, --port), vllm-router's (--host, --port,
# --prometheus-host, --prometheus-port).
ENGINE_LISTEN = ("--host", "--port", "--uds", "--data-parallel-address")
ROUTER_LISTEN = ("--host", "--port", "--prometheus-host", "--prometheus-port")
# Env naming the address a connector listens on (the chart sets it to the pod's IP).
LISTEN_ENV = (
    "VLLM_HOST_IP",
    "VLLM_NIXL_SIDE_CHANNEL_HOST",
    "LMCACHE_PD_PEER_HOST",
    lmcache_env.RECEIVER_HOST,
)
# Names up gives its own processes and logs; no pool may take them.
ROUTER = "router"
SUPERVISOR = "supervisor"
# vllm-router's Kubernetes discovery flags (each with the values up to the next flag).
DISCOVERY_FLAGS = {
    "--service-discovery",
    "--service-discovery-namespace",
    "--service-discovery-port",
    "--prefill-selector",
    "--decode-selector",
    "--selector",
}

Ports = Callable[[], int]


@dataclass
class Process:
    name: str  # the pool's name (with the replica's index when it has several), or "router"
    role: str  # prefill, decode, both or router
    argv: list[str]
    env: dict[str, str]
    port: int  # where it serves HTTP
    ready_path: str = "/health"  # its rendered readiness probe's path

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


@dataclass
class Layout:
    engines: list[Process]
    router: Process | None
    changes: list[str] = field(default_factory=list)  # what was changed, for the record
    rendered_utilization: dict[str, float] = field(default_factory=dict)  # by pool, as rendered
    release: str = defaults.RELEASE
    engine: str = "vllm"  # what the engines are: vllm or sim
    router_by: str = routers.VLLM_ROUTER  # what plays the router (vllm-router, or the stand-in)
    gated: bool = False  # the engines read a Hugging Face token in the cluster
    images: dict[str, str] = field(default_factory=dict)  # by pool, the rendered engine image

    @property
    def processes(self) -> list[Process]:
        """The engines, then the router (the order they start in)."""
        return [*self.engines, *([self.router] if self.router else [])]

    def engine_waves(self) -> list[list[Process]]:
        """The engines in the waves they start in (start_waves); the simulator's all at once: it
        measures no device."""
        return [self.engines] if self.engine == "sim" else start_waves(self.engines)


def gpus(proc: Process) -> list[str]:
    """The GPUs a process sees (its CUDA_VISIBLE_DEVICES); none where it names none."""
    return [device.strip() for device in proc.env.get(GPU_ENV, "").split(",") if device.strip()]


def start_waves(engines: Sequence[Process]) -> list[list[Process]]:
    """The engines in the waves they start in, in order: each in the first wave after those of
    every earlier engine that shares one of its GPUs; engines on GPUs of their own, or naming
    none, start together. vLLM's start-up memory profiling measures the whole device, so two
    engines profiling one GPU at once count each other's allocations and frees (one H200, vLLM
    0.26, 2026-12-04: "Available KV cache memory: -1323.33 GiB", then "No available memory for
    the cache blocks")."""
    waves: list[list[Process]] = []
    for proc in engines:
        mine = set(gpus(proc))
        shared = [n for n, wave in enumerate(waves) for other in wave if mine & set(gpus(other))]
        wave = max(shared, default=-1) + 1
        if wave == len(waves):
            waves.append([])
        waves[wave].append(proc)
    return waves


def shown(env: dict[str, str]) -> dict[str, str]:
    """env as up prints it: secrets' values masked (pdctl.secrets)."""
    return {k: secrets.MARKER if secrets.is_secret_env(k) else v for k, v in env.items()}


def described(proc: Process) -> dict[str, Any]:
    """What up runs for a process, as it prints it before starting it: the command, and the env
    it adds to the user's own."""
    return {"name": proc.name, "command": shlex.join(proc.argv), "env": shown(proc.env)}


@dataclass(frozen=True)
class Options:
    engine: str = "vllm"
    devices: Sequence[str] = ()  # the host's GPUs (CUDA_VISIBLE_DEVICES ids); none: no assignment
    weights: Path | None = None  # a model folder for --load-format dummy (the GPU harness)
    gpu: str = defaults.GPU_TYPE  # the catalog GPU the simulator times its steps for
    allowed: consent.Consent = consent.Consent()  # what the user allowed beyond the chart's


def free_port() -> int:
    """A TCP port on the loopback address that no one listens on now."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def distinct(ports: Ports) -> Ports:
    """`ports` never giving one twice: free_port can (the system may hand a port that a probe
    just closed to the next probe), and every listener needs a port of its own."""
    given: set[int] = set()

    def next_port() -> int:
        for _ in range(100):
            port = ports()
            if port not in given:
                given.add(port)
                return port
        raise EnvironmentProblem(f"no free port on {LOOPBACK} that was not already given")

    return next_port


def counting(base: int) -> Ports:
    """Ports base, base + 1, ... (a plan made on one machine and run on another)."""
    numbers = iter(range(base, 65536))
    return lambda: next(numbers)


def _flag(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args[:-1] else None


def _container(deployment: manifests.Manifest) -> dict[str, Any]:
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def _argv(container: dict[str, Any]) -> list[str]:
    return [str(word) for word in [*container.get("command", []), *container.get("args", [])]]


def _ready_path(container: dict[str, Any]) -> str:
    probe = container.get("readinessProbe") or container.get("startupProbe") or {}
    return str((probe.get("httpGet") or {}).get("path", "/health"))


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
    for name in LISTEN_ENV:
        if name in env:
            env[name] = LOOPBACK
    return env


def _from_secrets(container: dict[str, Any]) -> list[str]:
    """The env names the pod reads from a Secret (left out on the host)."""
    return [
        entry["name"]
        for entry in container.get("env", [])
        if "secretKeyRef" in (entry.get("valueFrom") or {})
    ]


def _gated(container: dict[str, Any]) -> bool:
    return any(entry["name"] in TOKEN_ENV for entry in container.get("env", []))


def engine(
    deployment: manifests.Manifest,
    name: str,
    role: str,
    ports: Ports,
    options: Options,
    utilization: float | None,
    devices: Sequence[str] = (),
) -> Process:
    """One engine of a pool: the rendered `vllm serve` with the host-level changes."""
    container = _container(deployment)
    argv = _argv(container)
    if consent.SERVE not in argv:
        raise InputError(
            f"{name}: its command has no `{consent.SERVE}`: pdctl up runs engines only",
            hint="an engine pool runs the chart's `vllm serve` (servingEngineSpec.modelSpec[]); "
            "deploy other workloads to a cluster (pdctl deploy)",
        )
    serve = argv.index(consent.SERVE)
    if options.weights is not None:
        served = argv[serve + 1]
        argv[serve + 1] = str(options.weights)
        argv = flags.replace(argv, "--load-format", "dummy")
        if "--served-model-name" not in argv:
            argv += ["--served-model-name", served]
    if options.engine == "sim":
        argv = [*SIMULATOR, *argv[serve:], "--sim-gpu", options.gpu]
    port = ports()
    argv, _ = flags.drop(argv, ENGINE_LISTEN)
    argv += ["--host", LOOPBACK, "--port", str(port)]
    if utilization is not None:
        argv = flags.replace(argv, UTILIZATION, f"{utilization:g}")
    env = _env(container, name)
    if NIXL_PORT_ENV in env:
        env[NIXL_PORT_ENV] = str(ports())
    if devices:
        env[GPU_ENV] = ",".join(devices)
    return Process(name, role, argv, env, port, _ready_path(container))


def standin(
    deployment: manifests.Manifest,
    routing: str,
    port: int,
    engines: list[Process],
    notify_port: int | None,
) -> Process:
    """The router stand-in playing the rendered router (pdctl.local.routers), with the engines'
    URLs and the rendered router's env."""
    container = _container(deployment)
    wiring = [(e.role, e.url, _receiver_ports(e)) for e in engines]
    argv = routers.standin_argv(routing, _argv(container), (LOOPBACK, port), wiring, notify_port)
    return Process(ROUTER, ROUTER, argv, _env(container, ROUTER), port)


def _receiver_ports(engine: Process) -> str:
    init, alloc = (engine.env.get(k, "") for k in (lmcache_env.INIT_PORTS, lmcache_env.ALLOC_PORTS))
    return f"{init}/{alloc}" if init and alloc else ""


def router(
    deployment: manifests.Manifest, port: int, metrics_port: int, engines: list[Process]
) -> Process:
    """vllm-router with the engines' URLs in static mode (PD: --prefill and --decode; else
    --worker-urls), its other rendered flags kept."""
    container = _container(deployment)
    kept: list[str] = []
    dropping = False  # inside a Kubernetes discovery flag and its values
    for word in _argv(container):
        if word.startswith("--"):
            dropping = word in DISCOVERY_FLAGS
        if not dropping:
            kept.append(word)
    kept, _ = flags.drop(kept, ROUTER_LISTEN)
    kept += ["--host", LOOPBACK, "--port", str(port)]
    kept += ["--prometheus-host", LOOPBACK, "--prometheus-port", str(metrics_port)]
    if "--vllm-pd-disaggregation" in kept:
        for e in engines:
            kept += [f"--{e.role}", e.url]
    else:
        kept += ["--worker-urls", *(e.url for e in engines)]
    return Process(ROUTER, ROUTER, kept, _env(container, ROUTER), port, _ready_path(container))


def _refuse_what_is_not_local(summary: manifests.Summary) -> None:
    grouped = [p for p in summary.pools if p.kind != "Deployment"]
    if grouped:
        raise InputError(
            f"pools {', '.join(p.name for p in grouped)} span several nodes ({grouped[0].kind}): "
            "pdctl up runs single-node pools only",
            hint="deploy this release to a cluster (pdctl deploy); for this machine, a file of "
            "single-node pools (pdctl init writes them; tutorials/17-nixl-vllm-router.md)",
        )


def _refusals(
    container: dict[str, Any], where: str, engine: bool, allowed: consent.Consent, played: bool
) -> list[str]:
    """What in one rendered container needs the user's consent (pdctl.local.consent); a router
    the stand-in plays runs no rendered command, so only its env is checked."""
    command = [str(word) for word in container.get("command", [])]
    args = [str(word) for word in container.get("args", [])]
    found = [] if played else consent.command_refusal(command, args, where, engine, allowed)
    found += consent.env_refusals(_env(container, where), where, allowed)
    if engine:
        found += consent.code_refusals(args, where, allowed)
    return found


def _refuse_what_changes_what_runs(
    objects: list[manifests.Manifest],
    summary: manifests.Summary,
    names: naming.Release,
    allowed: consent.Consent,
) -> None:
    refused: list[str] = []
    for pool in summary.pools:
        deployment = names.pool_deployment(pool.name)
        container = _container(manifests.find(objects, "Deployment", deployment))
        where = f"pool {pool.name} (Deployment {deployment})"
        refused += _refusals(container, where, True, allowed, False)
    if summary.router:
        deployment = summary.router["name"]
        container = _container(manifests.find(objects, "Deployment", deployment))
        played = routers.kind(container) != routers.VLLM_ROUTER
        where = f"the router (Deployment {deployment})"
        refused += _refusals(container, where, False, allowed, played)
    if refused:
        raise InputError(
            "pdctl up runs what the chart renders and nothing else without your consent:\n  "
            + "\n  ".join(refused),
            hint="values: servingEngineSpec.env and a pool's env reach its engines, "
            "routerSpec.env the router; docs/security.md says why",
        )


def _refuse_own_names(layout: Layout) -> None:
    """Process names are log and state keys: unique, and none of up's own."""
    seen: set[str] = set()
    for proc in layout.engines:
        if proc.name in (ROUTER, SUPERVISOR) or proc.name in seen:
            raise InputError(
                f"engine {proc.name}: pdctl up names its processes and logs by pool (with the "
                f"replica's index); {proc.name!r} is {'taken' if proc.name in seen else 'its own'}",
                hint=f"rename the pool (servingEngineSpec.modelSpec[].name); {ROUTER} and "
                f"{SUPERVISOR} are pdctl up's",
            )
        seen.add(proc.name)


def _sharing(assigned: list[list[str]]) -> list[bool]:
    """For each engine, whether another engine has one of its GPUs."""
    return [
        any(set(mine) & set(other) for j, other in enumerate(assigned) if j != i)
        for i, mine in enumerate(assigned)
    ]


def _cuda_ipc_reads(layout: Layout, shared: list[bool]) -> None:
    """UCX_CUDA_IPC_ENABLE_GET_ZCOPY=y for the engines that share a GPU, where the render does
    not set it (pdctl/ucx.py); the change recorded."""
    changed = [
        e.name
        for e, sharing in zip(layout.engines, shared, strict=True)
        if sharing and ucx.GET_ZCOPY_ENV not in e.env
    ]
    for e in layout.engines:
        if e.name in changed:
            e.env[ucx.GET_ZCOPY_ENV] = ucx.GET_ZCOPY_ON
    if changed:
        layout.changes.append(
            f"{', '.join(changed)}: {ucx.GET_ZCOPY_ENV}={ucx.GET_ZCOPY_ON} (engines on one GPU: "
            f"UCX reads KV over CUDA IPC, not TCP; {ucx.MEASURED})"
        )


def _cuda_ipc_transport(layout: Layout, shared: list[bool]) -> None:
    """cuda_ipc added to a rendered UCX_TLS that lists transports without it, for the engines
    that share a GPU: the chart leaves it out for pods in their own IPC namespaces (PD107), which
    processes of one host are not (pdctl/ucx.py); the change recorded."""
    changed = []
    for e, sharing in zip(layout.engines, shared, strict=True):
        tls = ucx.with_cuda_ipc(e.env.get(ucx.TLS_ENV, "")) if sharing else None
        if tls is not None:
            e.env[ucx.TLS_ENV] = tls
            changed.append(f"{e.name}: {ucx.TLS_ENV}={tls}")
    if changed:
        layout.changes.append(
            f"{'; '.join(changed)} (engines on one GPU share the host's IPC namespace; KV of a "
            f"2,048-token prompt crossed in 26 ms with {ucx.CUDA_IPC}, 780 ms over TCP: "
            f"{ucx.TLS_RECORD})"
        )


def _shares(
    pools: list[manifests.RenderedPool], devices: Sequence[str]
) -> tuple[int, list[list[str]]]:
    """Engines per GPU, and each engine's GPUs: in turn over the host's GPUs, shared when the
    engines need more GPUs than there are."""
    needs = [max(pool.gpus_per_pod, 1) for pool in pools for _ in range(pool.replicas)]
    if not devices:
        return 1, [[] for _ in needs]
    if max(needs) > len(devices):
        raise InputError(
            f"an engine of this release needs {max(needs)} GPUs; this host has {len(devices)}",
            hint="--engine sim runs it here without GPUs; or a layout for this host: pdctl init "
            f"--gpus {len(devices)}",
        )
    share = -(-sum(needs) // len(devices))
    assigned, cursor = [], 0
    for need in needs:
        assigned.append([devices[(cursor + i) % len(devices)] for i in range(need)])
        cursor += need
    return share, assigned


def plan(
    objects: list[manifests.Manifest],
    release: str,
    options: Options,
    ports: Ports = free_port,
) -> Layout:
    """The engines and router of a rendered release as local processes (see the module
    docstring)."""
    names = naming.Release(release)
    summary = manifests.summarize(objects)
    if not summary.pools:
        raise InputError(
            f"the render holds no engine pool of release {release}",
            hint="--release names the release the folder was rendered for; pdctl init writes a "
            "file with engine pools",
        )
    _refuse_what_is_not_local(summary)
    _refuse_what_changes_what_runs(objects, summary, names, options.allowed)
    ports = distinct(ports)
    share, assigned = _shares(summary.pools, options.devices)
    layout = Layout([], None, release=release, engine=options.engine)
    layout.changes = [f"every process on {LOOPBACK} at ports of its own"]
    if options.engine == "sim":
        layout.changes.append(
            "engines: the pd-stack simulator (not vLLM), the rendered arguments; steps timed for "
            f"{options.gpu} (--gpu-type)"
        )
    if options.weights is not None:
        layout.changes.append(f"--load-format dummy on {options.weights}")
    pools: dict[str, str] = {}  # engine name -> its pool
    for pool in summary.pools:
        deployment = manifests.find(objects, "Deployment", names.pool_deployment(pool.name))
        container = _container(deployment)
        layout.gated |= _gated(container)
        layout.images[pool.name] = pool.image
        rendered = float(_flag(_argv(container), UTILIZATION) or 0.9)
        layout.rendered_utilization[pool.name] = rendered
        utilization = None
        if options.devices:
            utilization = round(rendered / share, 2)
            if share > 1:
                layout.changes.append(f"{pool.name}: {UTILIZATION} {rendered:g} -> {utilization:g}")
        for replica in range(pool.replicas):
            name = pool.name if pool.replicas == 1 else f"{pool.name}-{replica}"
            pools[name] = pool.name
            devices = assigned[len(layout.engines)]
            layout.engines.append(
                engine(deployment, name, pool.role, ports, options, utilization, devices)
            )
    _refuse_own_names(layout)
    if any(NIXL_PORT_ENV in e.env for e in layout.engines):
        layout.changes[0] += "; one NIXL side-channel port per engine"
    shared = _sharing(assigned)
    _cuda_ipc_reads(layout, shared)
    _cuda_ipc_transport(layout, shared)
    secret_env = set()
    for deployment in objects:
        if deployment.get("kind") == "Deployment":
            secret_env.update(_from_secrets(_container(deployment)))
    if secret_env:
        left_out = ", ".join(sorted(secret_env))
        layout.changes.append(f"env read from the cluster's Secrets left out: {left_out}")
    wired, notify = lmcache_env.wire(layout.engines, pools, release, ports, LOOPBACK)
    layout.changes += wired
    if summary.router:
        _plan_router(
            layout, manifests.find(objects, "Deployment", summary.router["name"]), ports, notify
        )
    return layout


def _plan_router(
    layout: Layout, deployment: manifests.Manifest, ports: Ports, notify: int | None
) -> None:
    """vllm-router as rendered, or the stand-in playing the rendered router (named in the
    record of changes)."""
    kind = routers.kind(_container(deployment))
    if kind == routers.VLLM_ROUTER:
        layout.router = router(deployment, ports(), ports(), layout.engines)
        layout.changes.insert(
            1, "router in static mode with the engines' URLs (no Kubernetes discovery)"
        )
        return
    layout.router = standin(deployment, kind, ports(), layout.engines, notify)
    layout.router_by = routers.plays(kind)
    layout.changes.insert(
        1,
        f"router: the {layout.router_by}, with the engines' URLs (no discovery); "
        "the rendered router's command is not run",
    )
