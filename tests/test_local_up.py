"""`pdctl up` / `pdctl down` with the pd-stack simulator and the real vllm-router: a release as
processes on this machine, its lifecycle (ready, a second up refused, down stops all and keeps the
logs, the supervisor's death or SIGTERM takes its processes with it), a rendered folder as input,
and verify, bench and status against the live local release."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.errors import EnvironmentProblem
from pdctl.helm import Helm
from pdctl.local import layout, lifecycle, state, supervisor
from tests.doubles import start_order
from tests.helpers import ROOT, STARTUP_LIMIT

runner = CliRunner()
RELEASE = "pd"


@pytest.fixture(scope="module")
def values(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pdctl init's 1P1D layout of the 8B model (the simulator runs it on a CPU)."""
    out = tmp_path_factory.mktemp("init") / "values.yaml"
    init = ["init", "-m", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "2", "--offline"]
    result = runner.invoke(app, [*init, "--mode", "pd", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def rendered_dir(values: Path, helm4: Helm, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("render") / "pd"
    argv = ["template", "-f", str(values), "--output-dir", str(folder), "--helm", str(helm4.path)]
    assert runner.invoke(app, argv).exit_code == 0
    return folder


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state folder of the test's own ($XDG_STATE_HOME, which the supervisor inherits); any
    release still up at the end is brought down."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    yield tmp_path / "state"
    if state.Folder.of(RELEASE).held():
        lifecycle.down(RELEASE)


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, ended but not yet reaped, is not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def wait_gone(pids: list[int], seconds: float = 30.0) -> list[int]:
    """The pids still running after up to `seconds` (a bound, not a measurement)."""
    ends = time.monotonic() + seconds
    while any(running(p) for p in pids) and time.monotonic() < ends:
        time.sleep(0.1)
    return [p for p in pids if running(p)]


def listening(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) the processes listen on over TCP (the address in hex, as /proc/net/tcp
    writes it: 0100007F is 127.0.0.1)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            target = os.readlink(fd) if fd.is_symlink() else ""
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].rsplit(":", 1)
                found.append((address, int(port, 16)))
    return found


def up(source: list[str], *more: str) -> Any:
    result = runner.invoke(app, ["up", *source, "--engine", "sim", "--timeout", "120", *more])
    assert result.exit_code == 0, result.output
    return result


def current() -> dict[str, Any]:
    found = state.Folder.of(RELEASE).read_state()
    assert found is not None
    return found


def process_pids(found: dict[str, Any]) -> list[int]:
    return [int(pid) for pid in found["pids"].values()]


def test_up_runs_the_render_then_verify_bench_status_and_down(
    rendered_dir: Path, state_home: Path, tmp_path: Path
) -> None:
    """From a rendered folder (no helm): up returns with every process ready on loopback; a
    second up is refused; verify proves PD against the local release and says it is the
    simulator; bench writes its PNG report; status lists the processes; down stops them all and
    keeps the logs."""
    result = up([str(rendered_dir)], "--gpu-type", "h200")
    assert "simulator" in result.stdout and "logs:" in result.stderr
    assert "steps timed for H200 (--gpu-type)" in result.stderr
    found = current()
    assert found["status"] == state.READY and found["engine"] == "sim"
    urls = [found["router"], *(e["url"] for e in found["engines"])]
    assert all(url.startswith("http://127.0.0.1:") for url in urls)
    for url in urls:
        with urllib.request.urlopen(url + "/health", timeout=5) as response:
            assert response.status == 200
    assert {e["role"] for e in found["engines"]} == {"prefill", "decode"}
    # Loopback only, at the planned ports: each process's HTTP, each engine's NIXL side channel.
    sockets = listening(process_pids(found))
    assert {address for address, _ in sockets} == {"0100007F"}, sockets
    plan = state.Folder.of(RELEASE).read_layout()
    for engine in plan.engines:  # the simulator times its steps for the GPU named (catalog name)
        assert engine.argv[engine.argv.index("--sim-gpu") + 1] == "H200"
    planned = {p.port for p in [*plan.engines, plan.router] if p is not None}
    planned |= {int(e.env[layout.NIXL_PORT_ENV]) for e in plan.engines}
    assert planned <= {port for _, port in sockets}

    again = runner.invoke(app, ["up", str(rendered_dir), "--engine", "sim"])
    assert again.exit_code == 2 and "is up already" in again.stderr

    verify = runner.invoke(app, ["verify"])
    assert verify.exit_code == 0, verify.output
    assert "local release pd (pdctl up)" in verify.stderr
    assert "the pd-stack simulator (not vLLM)" in verify.stderr
    assert "PD proven" in verify.stderr

    report = tmp_path / "report"
    bench = ["bench", "--requests", "4", "--input-len", "64", "--output-len", "8"]
    done = runner.invoke(app, [*bench, "--report", str(report)])
    assert done.exit_code == 0, done.output
    assert "local release pd (pdctl up)" in done.stderr
    assert (report / "plot-ttft.png").stat().st_size > 0

    shown_text = runner.invoke(app, ["status"])
    assert shown_text.exit_code == 0, shown_text.output
    assert "local release pd (pdctl up), engines: the pd-stack simulator" in shown_text.stdout
    status = runner.invoke(app, ["status", "-o", "json"])
    assert status.exit_code == 0, status.output
    shown = json.loads(status.stdout)
    assert shown["up"] and all(shown["ready"].values()) and len(shown["ready"]) == 3

    pids = [found["supervisor"], *process_pids(found)]
    stopped = runner.invoke(app, ["down"])
    assert stopped.exit_code == 0 and "logs kept in" in stopped.stderr
    assert wait_gone(pids) == []
    logs = Path(found["logs"])
    assert all((logs / f"{name}.log").stat().st_size > 0 for name in found["pids"])
    assert current()["status"] == state.STOPPED
    again = runner.invoke(app, ["down"])
    assert again.exit_code == 0
    assert "was not running (its last run: stopped, stopped by SIGTERM)" in again.stderr


def test_up_of_a_values_file_says_what_it_runs_and_asks_before_running_more(
    values: Path, helm4: Helm, state_home: Path, tmp_path: Path
) -> None:
    """Values whose engines' env sets PYTHONPATH are refused, naming the flag that allows it,
    before anything starts; with --allow-env PYTHONPATH up prints every command it runs and every
    env variable it adds before starting them, then runs them."""
    data = yaml.safe_load(values.read_text(encoding="utf-8"))
    site = tmp_path / "site"
    site.mkdir()
    data["servingEngineSpec"]["env"] = [{"name": "PYTHONPATH", "value": str(site)}]
    changed = tmp_path / "env-values.yaml"
    changed.write_text(yaml.safe_dump(data), encoding="utf-8")
    source = [str(changed), "--helm", str(helm4.path)]

    refused = runner.invoke(app, ["up", *source, "--engine", "sim"])
    assert refused.exit_code == 1, refused.output
    assert "env PYTHONPATH of pool" in refused.stderr
    assert "allow it with --allow-env PYTHONPATH" in refused.stderr
    ended = state.Folder.of(RELEASE).read_state()
    assert ended is not None
    assert ended["status"] == state.FAILED  # refused while planning: no engine ever started
    assert "--allow-env PYTHONPATH" in ended["detail"]
    assert ended["pids"] == {}, ended

    result = up(source, "--allow-env", "PYTHONPATH")
    plan = state.Folder.of(RELEASE).read_layout()
    said = result.stderr
    before = said.index("pdctl up runs these commands")
    assert before < said.index(" ready at ")
    for proc in plan.processes:
        assert f"  {proc.name}: {shlex.join(proc.argv)}" in said[before:]
        for name, value in proc.env.items():
            assert f"    {name}={value}" in said[before:]
    assert all(e.env["PYTHONPATH"] == str(site) for e in plan.engines)
    assert runner.invoke(app, ["down"]).exit_code == 0


def test_the_processes_die_with_a_killed_supervisor(
    values: Path, helm4: Helm, state_home: Path
) -> None:
    """From a values file (rendered through helm): SIGKILL to the supervisor, which cannot stop
    anything itself, still ends every process (PR_SET_PDEATHSIG); the release is then not up."""
    up(["-f", str(values), "--helm", str(helm4.path)])
    found = current()
    os.kill(found["supervisor"], signal.SIGKILL)
    assert wait_gone(process_pids(found)) == []
    assert not state.Folder.of(RELEASE).held()
    dead = lifecycle.status(RELEASE)  # the state file still says ready: status says what is true
    assert dead is not None and dead["status"] == state.DEAD
    owners = {name: recorded["pid"] for name, recorded in found["owners"].items()}
    assert owners == {"supervisor": found["supervisor"], **found["pids"]}
    assert "its supervisor ended without stopping it" in runner.invoke(app, ["down"]).stderr
    assert current()["status"] == state.STOPPED


def test_sigterm_to_the_supervisor_stops_every_process(
    rendered_dir: Path, state_home: Path
) -> None:
    up([str(rendered_dir)])
    found = current()
    os.kill(found["supervisor"], signal.SIGTERM)
    assert wait_gone(process_pids(found)) == []
    assert wait_gone([found["supervisor"]]) == []
    after = current()
    assert after["status"] == state.STOPPED and "SIGTERM" in after["detail"]


def test_foreground_streams_the_logs_and_ctrl_c_stops_all(
    rendered_dir: Path, state_home: Path
) -> None:
    argv = [sys.executable, "-m", "pdctl", "up", str(rendered_dir), "--engine", "sim"]
    child = subprocess.Popen(
        [*argv, "--foreground"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ},
    )
    assert child.stdout is not None
    seen: list[str] = []
    for line in child.stdout:
        seen.append(line)
        if line.startswith("[router]"):  # the router's own log, streamed
            break
    found = current()
    assert found["status"] == state.READY and found["supervisor"] == child.pid
    child.send_signal(signal.SIGINT)
    rest = child.communicate(timeout=60)[0]
    assert child.returncode == 0, "".join(seen) + rest
    assert any("is up" in line for line in seen)
    assert wait_gone(process_pids(found)) == []
    assert current()["status"] == state.STOPPED


def test_an_engine_that_exits_fails_the_start_with_its_log(tmp_path: Path) -> None:
    """supervise() on a stand-in process (plain Python, not an engine) that exits at once."""
    folder = state.Folder(tmp_path / "release")
    argv = [sys.executable, "-c", "print('no GPU here'); raise SystemExit(3)"]
    failing = layout.Process("broken", "prefill", argv, {}, layout.free_port())
    folder.logs.mkdir(parents=True)
    folder.write_layout(layout.Layout([failing], None, engine="sim"))
    said: list[str] = []
    assert supervisor.supervise(folder, 30, said.append) == 1
    outcome = folder.read_state()
    assert outcome is not None and outcome["status"] == state.FAILED
    assert "broken exited with 3" in outcome["detail"] and "no GPU here" in outcome["detail"]
    assert any(line.startswith("FAILED: broken exited with 3") for line in said)


# Writes what PR_GET_PDEATHSIG (2) says to the file it is given.
PDEATHSIG = (
    "import ctypes, sys; got = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(got)); "
    "open(sys.argv[1], 'w').write(str(got.value))"
)


def test_a_launched_process_dies_with_its_parent_or_never_runs(tmp_path: Path) -> None:
    """launch's child asks for SIGTERM at its parent's death (PR_SET_PDEATHSIG), then runs its
    program only while the process that started it is still its parent: a parent that died
    before the child asked would never signal it, so the child exits first (here a pid that is
    not its parent, this process's parent, stands for the dead one)."""
    ran = tmp_path / "ran"
    argv = [sys.executable, "-c", PDEATHSIG, str(ran)]
    probe = layout.Process("probe", "prefill", argv, {}, layout.free_port())
    assert supervisor.launch(probe, tmp_path / "probe.log").wait() == 0
    assert ran.read_text() == str(int(signal.SIGTERM))
    ran.unlink()
    orphan = subprocess.Popen(argv, preexec_fn=supervisor._die_with(os.getppid()))
    assert orphan.wait() == supervisor.ORPHANED and not ran.exists()


# supervise() over one stand-in engine, once per step of the first look of its watch (each call,
# return and C call a profile hook sees once it is ready), with SIGTERM raised at that step; under
# pdctl's entry point's handler (process.signals_raise), as `pdctl up --foreground` runs it.
EVERY_WATCH_STEP = """
import signal, sys
from pathlib import Path
from pdctl import process
from pdctl.local import layout, state, supervisor
from tests.doubles import start_order
from tests.doubles.signal_steps import raising_at

root, steps = Path(sys.argv[1]), int(sys.argv[2])
for step in range(1, steps + 1):
    folder = state.Folder(root / str(step))
    folder.logs.mkdir(parents=True)
    engine = start_order.engine("engine", "both", folder.path)
    folder.write_layout(layout.Layout([engine], None, engine="sim"))
    hook, _ = raising_at(step, signal.SIGTERM)
    with process.signals_raise():
        code = supervisor.supervise(folder, 60, print, on_ready=lambda: sys.setprofile(hook))
    sys.setprofile(None)
    ended = folder.read_state() or {}
    assert code == 0 and ended.get("detail") == "stopped by SIGTERM", (step, ended)
print("stopped at each of", steps, "steps")
"""


def test_a_signal_at_any_step_of_the_watch_stops_the_release(tmp_path: Path) -> None:
    """The supervisor notes SIGTERM and SIGINT and acts on them between two looks at its
    processes: raised where the signal came (Interrupted), it once came just after Popen.poll took
    its lock, which nobody released, and stopping that process waited for ever (`pdctl up
    --foreground` alive after Ctrl-C). Here the signal comes at each step of a look in turn, on a
    stand-in engine (tests/doubles/start_order.py, not an engine); the bound only stops a hang."""
    steps = 24  # a look and the sleep after it are 18 steps
    done = subprocess.run(
        [sys.executable, "-c", EVERY_WATCH_STEP, str(tmp_path), str(steps)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=STARTUP_LIMIT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"stopped at each of {steps} steps" in done.stdout


def _start(folder: state.Folder, engines: list[layout.Process], engine: str) -> list[str]:
    """Supervisor.start of `engines` (no router), then stop; what it said."""
    folder.logs.mkdir(parents=True)
    folder.write_layout(layout.Layout(engines, None, engine=engine))
    said: list[str] = []
    started = supervisor.Supervisor(folder, said.append)
    try:
        started.start(60)
    finally:
        started.stop()
    return said


def test_an_engine_on_a_shared_gpu_is_launched_once_the_other_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in engines (tests/doubles/start_order.py, not vLLM) on GPU 0, as up plans the
    one-GPU pair: decode is launched only once prefill is ready, and up says why (one H200,
    2026-12-04: two vLLM engines profiling one GPU at once, and decode found no KV memory)."""
    prefill = start_order.engine("prefill", "prefill", tmp_path, "0")
    decode = start_order.engine("decode", "decode", tmp_path, "0")
    order = start_order.StartOrder(monkeypatch, [prefill, decode])
    said = _start(state.Folder(tmp_path / "release"), [prefill, decode], "vllm")
    assert order.events == ["launch prefill", "ready prefill", "launch decode", "ready decode"]
    assert said[0] == (
        "decode waits for prefill (same GPU 0): vLLM's start-up memory profiling measures the "
        "whole device"
    )


@pytest.mark.parametrize(("engine", "gpus"), [("vllm", ("0", "1")), ("sim", ("0", "0"))])
def test_engines_on_gpus_of_their_own_and_simulators_start_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, gpus: tuple[str, str]
) -> None:
    prefill = start_order.engine("prefill", "prefill", tmp_path, gpus[0])
    decode = start_order.engine("decode", "decode", tmp_path, gpus[1])
    order = start_order.StartOrder(monkeypatch, [prefill, decode])
    said = _start(state.Folder(tmp_path / "release"), [prefill, decode], engine)
    assert order.events[:2] == ["launch prefill", "launch decode"]
    assert not any("waits for" in line for line in said)


def test_a_missing_router_is_an_environment_problem(
    rendered_dir: Path, state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "ROUTER", "vllm-router-not-installed")
    result = runner.invoke(app, ["up", str(rendered_dir), "--engine", "sim"])
    assert result.exit_code == 3
    assert "pip install 'pdctl[local]'" in result.stderr
    assert not state.Folder.of(RELEASE).held()


def test_a_render_of_another_release_is_refused(rendered_dir: Path, state_home: Path) -> None:
    result = runner.invoke(app, ["up", str(rendered_dir), "--release", "other"])
    assert result.exit_code == 2
    assert "a render of release pd, not other" in result.stderr and "--release pd" in result.stderr


def test_a_gpu_not_in_the_catalog_is_a_usage_error(rendered_dir: Path, state_home: Path) -> None:
    result = runner.invoke(app, ["up", str(rendered_dir), "--engine", "sim", "--gpu-type", "H2000"])
    assert result.exit_code == 2
    assert "--gpu-type 'H2000' is not in the GPU catalog" in result.stderr
    assert "did you mean H200" in result.stderr
    assert not state.Folder.of(RELEASE).held()


def test_a_rendered_folder_runs_alone(rendered_dir: Path) -> None:
    result = runner.invoke(app, ["up", str(rendered_dir), "--set", "routerSpec.replicaCount=2"])
    assert result.exit_code == 2 and "a rendered folder is run as it is" in result.stderr


def test_the_engine_choice_says_why() -> None:
    assert lifecycle.choose_engine(None, ["0"], "0.33.0")[0] == "vllm"
    engine, why = lifecycle.choose_engine(None, [], "0.33.0")
    assert engine == "sim" and "no GPU found" in why
    engine, why = lifecycle.choose_engine(None, ["0"], None)
    assert engine == "sim" and "vLLM is not installed" in why
    for devices, vllm in (([], "0.33.0"), (["0"], None)):
        with pytest.raises(EnvironmentProblem, match="--engine vllm"):
            lifecycle.choose_engine("vllm", devices, vllm)


def test_real_vllm_on_gated_weights_needs_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    plan = layout.Layout([], None, engine="vllm", gated=True)
    with pytest.raises(EnvironmentProblem, match="gated"):
        lifecycle._token_env(plan, None)
    token = tmp_path / "token"
    token.write_text("hf_secret\n")
    assert lifecycle._token_env(plan, token) == {"HF_TOKEN": "hf_secret"}
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    assert lifecycle._token_env(plan, None) == {}  # the engines inherit it


def test_a_tag_other_than_the_installed_vllm_is_warned_about() -> None:
    plan = layout.Layout([], None, engine="vllm", images={"p": "vllm/vllm-openai:v0.33.0"})
    assert lifecycle._tag_warnings(plan, "0.33.0") == []
    (warning,) = lifecycle._tag_warnings(plan, "0.26.0")
    assert "vllm/vllm-openai:v0.33.0" in warning and "vLLM 0.26.0 runs here" in warning


def test_cluster_and_url_together_are_a_usage_error() -> None:
    result = runner.invoke(app, ["verify", "--url", "http://127.0.0.1:1", "--cluster"])
    assert result.exit_code == 2 and "--cluster and --url" in result.stderr


def test_make_demo_runs_the_loop_and_always_stops_it() -> None:
    """`make demo` (dry run): after the render, up with the simulator, verify, bench with a
    report, in one shell whose EXIT trap runs `pdctl down` once up has succeeded (so a failed
    verify or bench leaves no process running); this file's tests run the same commands."""
    from tests.helpers import ROOT

    dry = subprocess.run(
        ["make", "-s", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.replace("\\\n", " ")  # one shell: its lines joined as make joins them
    loop = next(line for line in dry.splitlines() if "run .venv/bin/pdctl up " in line)
    trap = loop.index("trap '[ -z \"$up\" ] || run .venv/bin/pdctl down --release demo' EXIT")
    steps = [loop.index(f"run .venv/bin/pdctl {step} ") for step in ("up", "verify", "bench")]
    assert trap < steps[0] < steps[1] < steps[2] and "set -e" in loop
    assert "--engine sim; up=1;" in loop and "--report build/demo-report" in loop
