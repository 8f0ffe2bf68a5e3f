"""`pdctl up`, `pdctl down` and the local side of `pdctl status`: the library the CLI calls.

`up` renders the values (or reads an already rendered release, a `pdctl template --output-dir`
folder, so that a GPU host needs no helm), chooses the engines (real vLLM where vLLM and GPUs are
present, else the pd-stack simulator), plans the processes (pdctl.local.layout), takes the
release's lock and hands it to the supervisor (pdctl.local.supervisor), and returns once every
process is ready. `down` asks the lock's holder to stop (SIGTERM: the supervisor, or `up` itself
while it renders, which then stops before starting anything), waits for the lock to free (SIGKILL
after STOP_WAIT; after KILL_WAIT more, an error naming the holder: never an endless wait), then
kills what a killed supervisor left: each signal only to a process still provably the one `up`
started (pdctl.local.ownership).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pdctl import defaults, files, manifests, naming, pipeline, process
from pdctl.errors import EnvironmentProblem, InputError, PdctlError, UsageError
from pdctl.local import consent, layout, multiproc, ownership, routers, state, supervisor
from pdctl.models import catalog

ROUTER = "vllm-router"
INSTALL_ROUTER = "pip install 'pdctl[local]'"
TOKEN_ENV = "HF_TOKEN"
STOP_WAIT = 3 * supervisor.GRACE  # seconds `down` waits for the supervisor to stop everything
KILL_WAIT = supervisor.GRACE  # seconds `down` waits after SIGKILL for the lock to free
# A rendered release's bounds: a chart's objects are a few dozen files of tens of KiB.
RENDERED_BYTES = 4 * 1024 * 1024
RENDERED_FILES = 1000
RENDERED_DIRECTORIES = 100

Say = Callable[[str], None]


@dataclass(frozen=True)
class Source:
    """What to start: values files (rendered here through helm) or a rendered folder."""

    values: tuple[str, ...] = ()
    set_values: Sequence[str] = ()
    rendered: Path | None = None
    helm_path: str | None = None
    chart: Path | None = None


@dataclass(frozen=True)
class UpOptions:
    release: str = defaults.RELEASE
    engine: str | None = None  # vllm, sim, or None: choose
    timeout: float = defaults.UP_TIMEOUT_S  # seconds for every process to be ready
    hf_token_file: Path | None = None
    foreground: bool = False
    gpu_type: str = defaults.GPU_TYPE  # the catalog GPU the simulator times its steps for
    allowed: consent.Consent = consent.Consent()  # --allow-env, --allow-command, --allow-code-flag


@dataclass
class Started:
    layout: layout.Layout
    why: str  # why these engines
    folder: state.Folder
    warnings: list[str] = field(default_factory=list)
    added_env: dict[str, str] = field(default_factory=dict)  # to every process's, as printed


# ---- the render ---------------------------------------------------------------------------------


def _rendered_files(folder: Path) -> list[Path]:
    """Every .yaml file under folder, in order; no link to a directory followed, bounded."""
    found: list[Path] = []
    for walked, (directory, subdirectories, names) in enumerate(os.walk(folder), 1):
        if walked > RENDERED_DIRECTORIES:
            raise InputError(f"{folder}: more than {RENDERED_DIRECTORIES} folders: not a render")
        subdirectories.sort()
        found += [Path(directory, name) for name in sorted(names) if name.endswith(".yaml")]
        if len(found) > RENDERED_FILES:
            raise InputError(f"{folder}: more than {RENDERED_FILES} .yaml files: not a render")
    return found


def read_rendered(folder: Path) -> list[manifests.Manifest]:
    """The objects of a `pdctl template --output-dir` folder (every .yaml file under it), each
    read as every input is (pdctl.files: regular files only, at most RENDERED_BYTES)."""
    if not folder.is_dir():
        raise InputError(
            f"{folder}: not a folder (name a values file with -f, or a folder "
            "`pdctl template --output-dir` wrote)"
        )
    paths = _rendered_files(folder)
    if not paths:
        raise InputError(f"{folder}: no .yaml files: not a rendered release")
    objects: list[manifests.Manifest] = []
    for path in paths:
        try:
            objects += manifests.parse(files.read_text(path, RENDERED_BYTES))
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            raise InputError(
                f"{where}: not valid YAML: {getattr(error, 'problem', error)}"
            ) from None
    return objects


def rendered_release(objects: list[manifests.Manifest]) -> str | None:
    """The release a render is of (its Deployments' app.kubernetes.io/instance label)."""
    for obj in objects:
        if obj.get("kind") == "Deployment":
            found = ((obj.get("metadata") or {}).get("labels") or {}).get(naming.INSTANCE)
            if found:
                return str(found)
    return None


def render(source: Source, release: str, say: Say) -> list[manifests.Manifest]:
    if source.rendered is not None:
        objects = read_rendered(source.rendered)
        found = rendered_release(objects)
        if found and found != release:
            raise UsageError(
                f"{source.rendered} is a render of release {found}, not {release}",
                hint=f"pass --release {found}",
            )
        return objects
    prepared = pipeline.prepare(
        source.values, source.set_values, release=release, chart=source.chart
    )
    for finding in prepared.warnings:
        for line in finding.lines():
            say(line)
    rendered = pipeline.render(
        prepared.values, release=release, chart=source.chart, helm_path=source.helm_path
    )
    return rendered.objects


# ---- the engines --------------------------------------------------------------------------------


def gpus() -> list[str]:
    """The GPUs this host shows: CUDA_VISIBLE_DEVICES when set, else nvidia-smi's list."""
    visible = os.environ.get(layout.GPU_ENV)
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listed = process.run(["nvidia-smi", "-L"], deadline=30).stdout
    except EnvironmentProblem:
        return []
    return [str(i) for i, line in enumerate(listed.splitlines()) if line.startswith("GPU ")]


def vllm_version() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return None
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def choose_engine(requested: str | None, devices: list[str], vllm: str | None) -> tuple[str, str]:
    """The engines to run, and why."""
    if requested == "sim":
        return "sim", "the pd-stack simulator (--engine sim)"
    if requested == "vllm":
        if vllm is None:
            raise EnvironmentProblem(
                "--engine vllm: vLLM is not installed here (import vllm)",
                hint="--engine sim runs the release with pd-stack's simulator",
            )
        if not devices:
            raise EnvironmentProblem(
                "--engine vllm: no GPU found (nvidia-smi, CUDA_VISIBLE_DEVICES)",
                hint="--engine sim runs the release with pd-stack's simulator",
            )
        return "vllm", f"vLLM {vllm} on {len(devices)} GPU(s) (--engine vllm)"
    if vllm is not None and devices:
        return "vllm", f"vLLM {vllm} on {len(devices)} GPU(s), found here"
    missing = "no GPU found" if vllm is not None else "vLLM is not installed"
    return "sim", f"the pd-stack simulator, not vLLM ({missing}; --engine vllm to insist)"


# The module production-stack's router's `vllm-router` command runs (its pyproject.toml entry
# point vllm_router.app:main); vLLM's router's is vllm_router.launch_router.
PRODUCTION_STACK_MODULE = "vllm_router.app"


def production_stack_command(path: str) -> bool:
    """Whether the `vllm-router` at path is production-stack's router (a Python entry point that
    imports its module), told by the module it runs, not by its name, which both routers use."""
    try:
        with open(path, "rb") as script:
            head = script.read(4096)
    except OSError:
        return False
    return head.startswith(b"#!") and f"from {PRODUCTION_STACK_MODULE} ".encode() in head


def router_binary() -> str:
    """vllm-router on PATH or beside this Python (a virtualenv's bin); production-stack's router,
    whose command has the same name, is refused."""
    beside = Path(sys.executable).parent / ROUTER
    found = shutil.which(ROUTER) or (str(beside) if beside.is_file() else None)
    if found is None:
        raise EnvironmentProblem(
            "vllm-router is not installed: pdctl up runs the release's router as a process",
            hint=f"install it: {INSTALL_ROUTER}",
        )
    if production_stack_command(found):
        raise EnvironmentProblem(
            f"{found} is production-stack's router (it runs {PRODUCTION_STACK_MODULE}), not "
            "vLLM's vllm-router, which this release's router is",
            hint=f"install vLLM's router ({INSTALL_ROUTER}) first on PATH; or routerSpec.type "
            "production-stack, which pdctl up plays with its router stand-in",
        )
    return found


def _token_env(plan: layout.Layout, token_file: Path | None) -> dict[str, str]:
    """HF_TOKEN for real vLLM on a gated model: from --hf-token-file, else the environment."""
    if token_file is not None:
        try:
            return {TOKEN_ENV: token_file.read_text(encoding="utf-8").strip()}
        except OSError as error:
            raise InputError(f"--hf-token-file {token_file}: {error.strerror}") from None
    if plan.engine == "vllm" and plan.gated and not os.environ.get(TOKEN_ENV):
        raise EnvironmentProblem(
            "the model's weights are gated: the engines read a Hugging Face token from a Secret "
            "in the cluster",
            hint=f"set {TOKEN_ENV} or pass --hf-token-file FILE",
        )
    return {}


def _tag_warnings(plan: layout.Layout, vllm: str | None) -> list[str]:
    """A pool whose image tag names another vLLM than the one installed here."""
    if plan.engine != "vllm" or vllm is None:
        return []
    warnings = []
    for pool, image in plan.images.items():
        tag = image.rsplit(":", 1)[-1] if ":" in image else ""
        if tag.startswith("v") and tag[1:] != vllm:
            warnings.append(
                f"warning: pool {pool} is rendered for {image}; vLLM {vllm} runs here (its flags "
                "were chosen for the image's version)"
            )
    return warnings


# ---- up -----------------------------------------------------------------------------------------


def plan(source: Source, options: UpOptions, say: Say) -> tuple[Started, dict[str, str]]:
    """The processes to start, why these engines, warnings, and the engines' extra env."""
    gpu = catalog.gpu(options.gpu_type).name  # first: a misspelt GPU is refused (exit 2)
    devices, vllm = gpus(), vllm_version()
    engine, why = choose_engine(options.engine, devices, vllm)
    if engine == "sim" and importlib.util.find_spec("pdctl.simulator") is None:
        raise EnvironmentProblem("the pd-stack simulator (pdctl.simulator) is not installed")
    objects = render(source, options.release, say)
    chosen = layout.Options(
        engine, devices if engine == "vllm" else (), gpu=gpu, allowed=options.allowed
    )
    planned = layout.plan(objects, options.release, chosen)
    if planned.router is not None and planned.router_by == routers.VLLM_ROUTER:
        planned.router.argv[0] = router_binary()
    env = _token_env(planned, options.hf_token_file)
    folder = state.Folder.of(options.release)
    planned.changes += multiproc.own_folders(planned.engines, folder.path / "prometheus")
    started = Started(planned, why, folder, _tag_warnings(planned, vllm), layout.shown(env))
    return started, env


def _fresh_logs(folder: state.Folder) -> None:
    state.emptied(folder.logs)


def _detached(folder: state.Folder, lock: int, options: UpOptions, say: Say) -> None:
    """Run the supervisor as its own program (a new session, holding the lock) and relay its
    progress until READY; its failure is an InputError with its last lines."""
    argv = [sys.executable, "-m", "pdctl.local.supervisor", str(folder.path)]
    argv += ["--timeout", f"{options.timeout:g}"]
    with state.append(folder.log(layout.SUPERVISOR)) as log:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            pass_fds=(lock,),
        )
    assert child.stdout is not None
    lines: list[str] = []
    try:
        for raw in child.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if line == supervisor.READY:
                return
            lines.append(line)
            say(line)
    except process.Interrupted:
        child.send_signal(signal.SIGTERM)
        child.wait()
        raise
    finally:
        child.stdout.close()
    child.wait()
    found = folder.read_state() or {}
    if found.get("status") == state.STOPPED:  # `pdctl down` (or a signal) while it started
        raise InputError(
            f"the local release {options.release} was {found.get('detail') or 'stopped'} before "
            "it was ready: nothing of it runs"
        )
    raise InputError(
        f"the local release {options.release} did not start (supervisor exit {child.returncode})",
        hint=f"the processes' logs are in {folder.logs}",
    )


def up(
    source: Source,
    options: UpOptions,
    say: Say,
    on_ready: Callable[[Started], None],
    on_plan: Callable[[Started], None] = lambda _: None,
) -> int:
    """Start the release: `on_plan` with what will run before starting it, `on_ready` once every
    process is ready. Detached: returns then (0). --foreground: streams the logs until a signal or
    a process's end, then stops all."""
    folder = state.Folder.of(options.release)
    lock = folder.claim(options.release)  # first: a second `up` is refused before rendering
    folder.write_state(_starting(folder, options.release))
    try:
        started, env = plan(source, options, say)
        on_plan(started)
        _fresh_logs(folder)
        multiproc.fresh(started.layout.engines)
        folder.write_layout(started.layout)
        os.environ.update(env)  # the supervisor's environment, which its processes inherit
        if options.foreground:
            stream = LogStream(folder, say)
            return supervisor.supervise(
                folder, options.timeout, say, on_ready=lambda: on_ready(started), tick=stream.tick
            )
        _detached(folder, lock, options, say)
        on_ready(started)
        return 0
    except process.Interrupted as interrupted:  # `pdctl down`, Ctrl-C: an ordinary end
        _ended_early(folder, state.STOPPED, f"stopped by {interrupted}")
        raise
    except PdctlError as error:
        _ended_early(folder, state.FAILED, error.message)
        raise
    finally:
        os.close(lock)


def _starting(folder: state.Folder, release: str) -> dict[str, Any]:
    """The state while `up` renders and starts the supervisor: `up` is its supervisor."""
    (folder.path / "layout.json").unlink(missing_ok=True)  # the last run's: not this one's
    me = ownership.identify(os.getpid())
    return {
        "release": release,
        "status": state.STARTING,
        "detail": "pdctl up renders the release",
        "supervisor": os.getpid(),
        "engine": None,
        "router": None,
        "engines": [],
        "logs": str(folder.logs),
        "pids": {},
        "owners": {"supervisor": me.as_dict() if me else None},
    }


def _ended_early(folder: state.Folder, status: str, detail: str) -> None:
    """Record how `up` ended, unless its supervisor took over the state (and recorded it)."""
    found = folder.read_state() or {}
    if found.get("supervisor") == os.getpid() and found.get("status") == state.STARTING:
        found.update(status=status, detail=detail)
        folder.write_state(found)


class LogStream:
    """--foreground: each process's new log lines, prefixed with its name."""

    def __init__(self, folder: state.Folder, say: Say) -> None:
        self.folder, self.say = folder, say
        self.read: dict[Path, int] = {}

    def tick(self) -> None:
        for path in sorted(self.folder.logs.glob("*.log")):
            if path.stem == layout.SUPERVISOR:
                continue
            with path.open("rb") as log:
                log.seek(self.read.get(path, 0))
                chunk = log.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self.read[path] = self.read.get(path, 0) + len(complete)
            for line in complete.decode(errors="replace").splitlines():
                self.say(f"[{path.stem}] {line}")


# ---- down and status ----------------------------------------------------------------------------


@dataclass
class Stopped:
    release: str
    was_up: bool
    logs: Path
    last: str  # how its last run ended, when it was not up: "failed: why" or "stopped: why"


def _sweep(found: dict[str, Any]) -> None:
    """SIGKILL the process groups a supervisor that did not stop them left (it was killed), each
    only while it is provably the process `up` started."""
    if found.get("status") == state.STOPPED:
        return
    for recorded in (found.get("owners") or {}).values():
        identity = ownership.Identity.from_dict(recorded)
        if identity is not None:
            ownership.signal_group(identity, signal.SIGKILL)


def _signal_holder(folder: state.Folder, signum: int, seconds: float) -> bool:
    """Send `signum` once to the lock's holder (as soon as the lock file names one: `up` hands
    it to the supervisor, which renames it); whether the lock frees within `seconds`."""
    ends = time.monotonic() + seconds
    signalled = False
    while folder.held():
        if time.monotonic() >= ends:
            return False
        holder = None if signalled else folder.holder()
        if holder is not None:
            signalled = ownership.signal(holder, signum)
        time.sleep(0.1)
    return True


def _stop_holder(folder: state.Folder, release: str) -> None:
    """SIGTERM to the lock's holder, SIGKILL STOP_WAIT seconds later; InputError when the lock
    is still held KILL_WAIT seconds after that."""
    for signum, seconds in ((signal.SIGTERM, STOP_WAIT), (signal.SIGKILL, KILL_WAIT)):
        if _signal_holder(folder, signum, seconds):
            return
    holder = folder.holder()
    raise InputError(
        f"the local release {release} did not stop: its lock is still held"
        + (f" by pid {holder.pid}" if holder else ""),
        hint=f"the lock is {folder.path / 'lock'}; stop its holder, then pdctl down again",
    )


def down(release: str) -> Stopped:
    """Stop the release: its lock's holder, then what a killed supervisor left (see the module
    docstring). The state then says what is true: stopped."""
    folder = state.Folder.of(release)
    was_up = folder.held()
    found = folder.read_state()
    if found is None and not was_up:
        raise UsageError(
            f"no local release {release} (nothing under {folder.path})",
            hint="pdctl up starts one; pdctl status --cluster shows a cluster release",
        )
    if was_up:
        _stop_holder(folder, release)
    found = folder.read_state() or found or {}
    last = _last_run(found)
    _sweep(found)
    if found.get("status") not in (state.STOPPED, state.FAILED):
        found.update(status=state.STOPPED, detail=f"by pdctl down: {last}")
        folder.write_state(found)
    return Stopped(release, was_up, folder.logs, last)


def _last_run(found: dict[str, Any]) -> str:
    if found.get("status") in (state.STOPPED, state.FAILED):
        return f"{found['status']}, {found.get('detail') or 'no reason recorded'}"
    return "its supervisor ended without stopping it; what it left was stopped now"


def engines_named(engine: str) -> str:
    """What the engines are, as every command names them."""
    return "the pd-stack simulator (not vLLM)" if engine == "sim" else "vLLM"


@dataclass(frozen=True)
class Endpoints:
    """A live local release's URLs, for verify and bench."""

    release: str
    router: str
    engines: dict[str, list[str]]  # by role: prefill, decode, both
    engine: str  # vllm or sim

    router_by: str = routers.VLLM_ROUTER  # what plays the router

    def describe(self) -> str:
        return (
            f"local release {self.release} (pdctl up): router {self.router} ({self.router_by}), "
            f"engines: {engines_named(self.engine)}; --cluster for the cluster's"
        )


def endpoints(release: str) -> Endpoints | None:
    """The URLs of the local release when it is up and ready (and has a router), else None."""
    found = state.live(release)
    if found is None or not found.get("router"):
        return None
    by_role: dict[str, list[str]] = {role: [] for role in naming.ROLES}
    for engine in found["engines"]:
        by_role.setdefault(engine["role"], []).append(engine["url"])
    by = found.get("router_by") or routers.VLLM_ROUTER
    return Endpoints(release, found["router"], by_role, found["engine"], by)


def status(release: str) -> dict[str, Any] | None:
    """The local release's state (None when there is none), with `up` and each process's
    readiness now. A state that says it runs while its lock is free (its supervisor was killed)
    is `dead`: nothing of it answers for it."""
    folder = state.Folder.of(release)
    found = folder.read_state()
    if found is None:
        return None
    found["up"] = folder.held()
    if not found["up"] and found.get("status") in (state.STARTING, state.READY):
        found.update(status=state.DEAD, detail="its supervisor ended without stopping it")
    plan = folder.read_layout().processes if (folder.path / "layout.json").exists() else []
    found["ready"] = {
        p.name: found["up"] and supervisor.answers(p.url + p.ready_path) for p in plan
    }
    return found
