"""Run pd-stack's own rendered PD release on real engines on one host's GPUs, prove it with
`pdctl verify`, measure it, and write a record. README.md beside this file says what it needs.

    run.py plan -o layout.json                    # where helm is: render, plan the processes
    run.py run --layout layout.json --phase all   # where the GPUs are: start, measure, verify

`--phase alone` measures one engine by itself (KV pool, prefill, decode step); `--phase pair` the
PD pair through the router (verify, TTFT and ITL, the KV transfer); `--phase recovery` kills the
pair's prefill once PD is proven, starts it again and times how long PD takes to be proven again
(recovery.py). Each phase adds its part to the record (`--record`), so they can run as separate
commands.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.real_engines import measure, model_dir, recovery, steady  # noqa: E402
from pdctl.local import flags, supervisor  # noqa: E402
from pdctl.local import layout as local  # noqa: E402

PDCTL = [sys.executable, "-m", "pdctl"]
DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DEFAULT_CONFIG = ROOT / "tests/fixtures/configs/llama-3.1-8b.json"
MODEL_DIR = Path(tempfile.gettempdir()) / "real-engines-model"
# Engine log lines worth keeping in the record.
# The KV pool, and the kernels and backends vLLM picked (FP8 linear kernels, fused MoE, attention).
KEPT_LOG = re.compile(
    r"Available KV cache memory|GPU KV cache size|Maximum concurrency|[Kk]ernel|[Bb]ackend"
    r"|DeepGEMM|deprecated|Traceback|Error"
)
# UCX prints the protocols and transports it selects when UCX_PROTO_INFO=y (UCX >= 1.15).
UCX_DIAGNOSTICS = {"UCX_PROTO_INFO": "y"}
UCX_TABLE = re.compile(
    r"ucp_context|\|.*\b(tcp|cuda_ipc|cuda_copy|gdr_copy|rc_\w+|dc_\w+|ud_\w+|sysv|posix|cma)/"
)
ALONE_PREFILL = measure.Load(prompt_len=2048, output_len=1, concurrency=32, requests=96)
PD_LOADS = [measure.Load(2048, 64, c, max(2 * c, 8)) for c in (1, 4, 16)]
# One request at a time at growing prompts: the KV transfer's time against its size (link model).
PD_SIZES = [measure.Load(n, 16, 1, 3) for n in (2048, 8192, 32768)]
DECODE_BATCHES = (1, 16, 64)
# Before timing: short requests, then one round of the prefill load's own shape, so that kernels
# compiled on first use of a batch shape (Triton's fused MoE, on MoE models) compile here and not
# inside a timed window (the 2026-12-02 MoE run, benchmarks/records/real-engines-h200-moe-mla.json).
WARM_UP = (
    measure.Load(256, 8, 8, 16),
    measure.Load(ALONE_PREFILL.prompt_len, 1, ALONE_PREFILL.concurrency, ALONE_PREFILL.concurrency),
)


def warm_up(url: str, model: str, vocab: int) -> None:
    for load in WARM_UP:
        measure.run(url, model, load, vocab, "warm-up")


# `--phase bench`: pdctl bench's sweep through the router and to one engine alone.
BENCH_CONCURRENCY = "1,4,16"
BENCH_REQUESTS = 16  # per step
BENCH_PROMPT = 2048  # words (tokens) per prompt
BENCH_OUTPUT = 128
PAIR_PHASES = ("pair", "bench", "recovery")


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for package in (
        "vllm",
        "torch",
        "nixl",
        "nixl-cu13",
        "vllm-router",
        "lmcache",
        "flashinfer-python",
    ):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def gpu() -> str:
    query = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
    try:
        return subprocess.run(query, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# --- plan: render with pdctl's pipeline (needs helm) ----------------------------------------------


def init_values(directory: Path, tag: str | None) -> Path:
    """`pdctl init --mode pd` for the default model on two GPUs; with `tag`, the pools' image tag
    set to it (the render follows that vLLM version's flags)."""
    from pdctl import pipeline

    out = directory / "values.yaml"
    init = [
        "init",
        "-m",
        DEFAULT_MODEL,
        "--gpus",
        "2",
        "--offline",
        "--mode",
        "pd",
        "--out",
        str(out),
        "--force",
    ]
    subprocess.run([*PDCTL, *init], check=True, capture_output=True)
    if not tag:
        return out
    values = pipeline.load_values([str(out)]).data
    for pool in values["servingEngineSpec"]["modelSpec"]:
        pool["tag"] = tag
    tagged = directory / f"values-{tag}.json"
    tagged.write_text(json.dumps(values))
    return tagged


# Ports of the processes: fixed, as the plan is made where helm is and run where the GPUs are.
FIRST_PORT = 18000


def render(values: Path, gpus: int) -> local.Layout:
    """`pdctl up`'s plan of the processes (pdctl.local.layout) on `gpus` GPUs, with dummy weights
    from the generated model folder."""
    from pdctl import defaults, pipeline

    rendered = pipeline.render(pipeline.load_values([str(values)]))
    options = local.Options(devices=[str(i) for i in range(gpus)], weights=MODEL_DIR)
    return local.plan(rendered.objects, defaults.RELEASE, options, local.counting(FIRST_PORT))


def render_difference(ours: local.Layout, other: local.Layout) -> dict[str, list[list[str]]]:
    """Per process, the argv words and env entries that differ between two renders."""
    different: dict[str, list[list[str]]] = {}
    for a, b in zip([*ours.engines, ours.router], [*other.engines, other.router], strict=True):
        if a is None or b is None:
            continue
        env_a = [f"{k}={v}" for k, v in sorted(a.env.items())]
        env_b = [f"{k}={v}" for k, v in sorted(b.env.items())]
        only_a = sorted(set(a.argv + env_a) - set(b.argv + env_b))
        only_b = sorted(set(b.argv + env_b) - set(a.argv + env_a))
        if only_a or only_b:
            different[a.name] = [only_a, only_b]
    return different


def plan_command(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="real-engines-plan-"))
    tag = f"v{args.vllm_version}"
    values = args.values or init_values(work, tag)
    layout = render(values, args.gpus)
    default_render = render(init_values(work, None), args.gpus)
    plan = {
        "values": str(values),
        "tag": tag,
        "gpus": args.gpus,
        "layout": asdict(layout),
        "difference_from_default_render": render_difference(layout, default_render),
    }
    args.out.write_text(json.dumps(plan, indent=1))
    print(f"wrote {args.out}: {len(layout.engines)} engines, router: {bool(layout.router)}")
    return 0


# --- run: start the processes, measure, verify (needs GPUs) ---------------------------------------


class Processes:
    """Started processes with their logs (pdctl up's launch, readiness and stop:
    pdctl.local.supervisor); stopped (process group and all) on exit."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.running: list[tuple[local.Process, subprocess.Popen[bytes]]] = []

    def log(self, process: local.Process) -> Path:
        return self.logs / f"{process.name}.log"

    def launch(self, process: local.Process, extra_env: dict[str, str]) -> subprocess.Popen[bytes]:
        popen = supervisor.launch(process, self.log(process), extra_env)
        self.running.append((process, popen))
        return popen

    def wait_healthy(
        self, process: local.Process, popen: subprocess.Popen[bytes], deadline: float
    ) -> None:
        """Until `process` is ready; SystemExit (with its log's tail) when it exits or the
        monotonic `deadline` passes."""
        try:
            supervisor.wait_ready(process, popen, deadline, self.log(process))
        except supervisor.StartFailed as failed:
            raise SystemExit(str(failed)) from None

    def start(self, process: local.Process, timeout: float, extra_env: dict[str, str]) -> None:
        self.wait_healthy(process, self.launch(process, extra_env), time.monotonic() + timeout)

    @staticmethod
    def waves(engines: list[local.Process]) -> list[list[local.Process]]:
        """local.start_waves, each wait said (supervisor.waiting)."""
        waves = local.start_waves(engines)
        for line in supervisor.waiting(waves):
            print(line, flush=True)
        return waves

    def start_engines(
        self, engines: list[local.Process], timeout: float, extra_env: dict[str, str]
    ) -> None:
        """Start them as pdctl up does: side by side, but those sharing a GPU one after another
        (local.start_waves), all within `timeout`; SystemExit when one is not healthy."""
        deadline = time.monotonic() + timeout
        for wave in self.waves(engines):
            for process, popen in [(p, self.launch(p, extra_env)) for p in wave]:
                self.wait_healthy(process, popen, deadline)

    def start_all(self, processes: list[local.Process], timeout: float) -> dict[str, str | None]:
        """Start them side by side (those sharing a GPU one after another, as start_engines);
        per name, None once healthy or why not (it is then stopped, and the others go on)."""
        deadline = time.monotonic() + timeout
        started: dict[str, str | None] = {}
        for wave in self.waves(processes):
            for process, popen in [(p, self.launch(p, {})) for p in wave]:
                try:
                    self.wait_healthy(process, popen, deadline)
                    started[process.name] = None
                except SystemExit as failure:
                    started[process.name] = str(failure)[-3000:]
                    self.kill(process.name)
        return started

    def kill(self, name: str) -> int | None:
        """SIGKILL one started process (its whole group), as a node or OOM kill would; returns its
        exit code. It leaves the list, so it can be started again."""
        for entry in list(self.running):
            process, popen = entry
            if process.name == name:
                if popen.poll() is None:
                    os.killpg(popen.pid, signal.SIGKILL)
                code = popen.wait(timeout=60)
                self.running.remove(entry)
                return code
        raise KeyError(name)

    def exit_code(self, name: str) -> int | None:
        """None while the process runs (or was never started)."""
        return next((p.poll() for e, p in self.running if e.name == name), None)

    def kept_lines(self, process: local.Process) -> list[str]:
        text = (self.logs / f"{process.name}.log").read_text(errors="replace")
        return [line[-300:] for line in text.splitlines() if KEPT_LOG.search(line)][:120]

    def stop(self) -> None:
        supervisor.stop([popen for _, popen in self.running])
        self.running.clear()


def _process(data: dict[str, Any]) -> local.Process:
    return local.Process(**data)


def kv_pool(lines: list[str]) -> dict[str, str]:
    found = {}
    for line in lines:
        for key, pattern in (
            ("memory", r"Available KV cache memory: ([\d.]+ GiB)"),
            ("tokens", r"GPU KV cache size: ([\d,]+) tokens"),
        ):
            match = re.search(pattern, line)
            if match:
                found[key] = match.group(1)
    return found


def alone_phase(plan: dict[str, Any], processes: Processes, timeout: float) -> dict[str, Any]:
    """The first engine by itself, at the utilization the values file gives it."""
    engine = _process(plan["layout"]["engines"][0])
    rendered = plan["layout"]["rendered_utilization"][engine.name]
    engine.name = f"{engine.name}-alone"
    engine.argv = flags.replace(engine.argv, "--gpu-memory-utilization", f"{rendered:g}")
    model, vocab = served_model(engine), vocab_size()
    processes.start(engine, timeout, {})
    warm_up(engine.url, model, vocab)
    part: dict[str, Any] = {"engine": engine.name, "argv": engine.argv}
    part["prefill"] = measure.run(engine.url, model, ALONE_PREFILL, vocab, "prefill")
    steady.attach(part, gpu())
    part["decode"] = {
        str(batch): measure.run(
            engine.url, model, measure.Load(128, 192, batch, batch), vocab, "decode"
        )
        for batch in DECODE_BATCHES
    }
    part["ttft_alone"] = [measure.run(engine.url, model, load, vocab, "ttft") for load in PD_LOADS]
    processes.stop()
    part["log"] = processes.kept_lines(engine)
    part["kv_pool"] = kv_pool(part["log"])
    return part


def _metrics(url: str) -> Any:
    from pdctl.verify import judge

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return judge.parse(response.read().decode())


def kv_moved(before: Any, after: Any) -> dict[str, float]:
    """The decode engine's KV bytes and transfer seconds between two scrapes (the connector
    table's `metrics.bandwidth` histograms for NIXL)."""
    from pdctl import connectors

    size, seconds = connectors.load().connectors["NixlConnector"].metrics["bandwidth"]
    moved = {}
    for key, name in (("bytes", size), ("seconds", seconds)):
        family = after.family(name)
        if family is None:
            return {}
        now, then = family.read(after), family.read(before) if before.family(name) else {}
        moved[key] = now.get("sum", 0.0) - then.get("sum", 0.0)
        moved[f"{key}_count"] = now["count"] - then.get("count", 0.0)
    if moved["seconds"] > 0:
        moved["gbps"] = round(moved["bytes"] / moved["seconds"] / 1e9, 3)
        moved["ms_per_transfer"] = round(moved["seconds"] / max(moved["seconds_count"], 1) * 1e3, 2)
    return moved


class Pair:
    """The pair's engines and the router, started (`start_pair`) once for the phases that use it."""

    def __init__(self, plan: dict[str, Any], extra_env: dict[str, str]) -> None:
        self.engines = [_process(e) for e in plan["layout"]["engines"]]
        self.router = _process(plan["layout"]["router"])
        self.env = {**UCX_DIAGNOSTICS, **extra_env}
        self.prefill = next(e for e in self.engines if e.role == "prefill")
        self.decode = next(e for e in self.engines if e.role == "decode")
        self.model = served_model(self.engines[0])

    def start(self, processes: Processes, timeout: float) -> None:
        processes.start_engines(self.engines, timeout, self.env)
        processes.start(self.router, 120, {})

    @property
    def urls(self) -> list[str]:
        return engine_urls(self.router, self.engines)


def pair_part(pair: Pair) -> dict[str, Any]:
    """verify, then TTFT/ITL and the KV moved at the PD loads and at growing prompts."""
    vocab = vocab_size()
    verify = subprocess.run(
        [*PDCTL, "verify", *pair.urls, "-o", "json"], capture_output=True, text=True, check=False
    )
    part: dict[str, Any] = {"verify_exit_code": verify.returncode}
    part["verify"] = json.loads(verify.stdout) if verify.stdout.strip() else verify.stderr[-2000:]
    # "ttft": the prompts the engine alone was timed with (alone_phase), for a like comparison.
    for name, series, loads in (
        ("through_router", "ttft", PD_LOADS),
        ("transfer_by_size", "by-size", PD_SIZES),
    ):
        part[name] = []
        for load in loads:
            before = _metrics(pair.decode.url)
            result = measure.run(pair.router.url, pair.model, load, vocab, series)
            result["kv_transfer"] = kv_moved(before, _metrics(pair.decode.url))
            part[name].append(result)
    return part


def bench_dataset(path: Path, series: str, count: int) -> Path:
    """`count` prompts of BENCH_PROMPT words of the generated tokenizer (one token each, no
    shared prefix), as bench's dataset file: bench's own random English words would all be one
    unknown token to that tokenizer."""
    rng = random.Random(zlib.crc32(series.encode()))
    lines = [
        json.dumps({"prompt": model_dir.prompt(rng, BENCH_PROMPT, vocab_size())})
        for _ in range(count)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def bench_part(pair: Pair, logs: Path) -> dict[str, Any]:
    """`pdctl bench` through the router (with both engines' counters), then the same sweep sent
    to the prefill engine alone (an engine serving whole requests by itself: the aggregated
    baseline on this GPU share), each with its own prompts."""
    count = BENCH_REQUESTS * len(BENCH_CONCURRENCY.split(","))
    part: dict[str, Any] = {}
    for name, urls in (
        ("pd", pair.urls),
        ("alone", ["--url", pair.prefill.url]),
    ):
        dataset = bench_dataset(logs / f"bench-{name}.jsonl", f"bench-{name}", count)
        argv = [*PDCTL, "bench", *urls, "--dataset", str(dataset), "--model", pair.model]
        argv += ["--concurrency", BENCH_CONCURRENCY, "--requests", str(BENCH_REQUESTS)]
        argv += ["--output-len", str(BENCH_OUTPUT), "-o", "json"]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        part[name] = {
            "argv": [a if a != str(dataset) else dataset.name for a in argv[len(PDCTL) :]],
            "exit_code": done.returncode,
            "result": json.loads(done.stdout) if done.stdout.strip() else done.stderr[-2000:],
        }
    return part


def verify_proof(urls: list[str], timeout: float = 120.0) -> recovery.Proof:
    """`pdctl verify -o json` against the pair: PD proven, and the checks that failed."""
    try:
        done = subprocess.run(
            [*PDCTL, "verify", *urls, "--requests", "1", "-o", "json"],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return recovery.Proof(False, [f"verify: no answer in {timeout:.0f}s"])
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return recovery.Proof(False, [f"verify: exit {done.returncode}: {done.stderr[-300:]}"])
    failed = [f"{c['id']}: {c['summary']}"[:300] for c in report["checks"] if c["status"] == "fail"]
    return recovery.Proof(bool(report["pd_proven"]), failed)


def engine_urls(router: local.Process, engines: list[local.Process]) -> list[str]:
    urls = ["--url", router.url]
    for engine in engines:
        urls += [f"--{engine.role}-url", engine.url]
    return urls


def _failed_transfers(url: str) -> float | None:
    """The decode engine's NIXL failed-transfer counter (None when it is not exported)."""
    scrape = _metrics(url)
    family = scrape.family("vllm:nixl_num_failed_transfers")
    return None if family is None else family.read(scrape)["count"]


def _kill(processes: Processes, name: str) -> None:
    processes.kill(name)


def recovery_part(pair: Pair, processes: Processes, timeout: float, limit: float) -> dict[str, Any]:
    """With PD proven, SIGKILL the prefill engine and start it again from the same argv and env
    (a replaced pod: a new process, so a new NIXL engine_id and agent), then prove PD with
    `pdctl verify` until it passes or `limit` seconds have passed."""
    failed_before = _failed_transfers(pair.decode.url)
    part = recovery.recover(
        prove=lambda: verify_proof(pair.urls),
        kill=lambda: _kill(processes, pair.prefill.name),
        start=lambda: processes.start(pair.prefill, timeout, pair.env),
        limit=limit,
    )
    part["killed"] = pair.prefill.name
    part["failures_seen"] = recovery.failures_seen(part)
    decode_exit = processes.exit_code(pair.decode.name)  # a crash (vLLM #49238) shows here
    part["decode_exit_code"] = decode_exit
    if decode_exit is None and failed_before is not None:
        after = _failed_transfers(pair.decode.url)
        part["decode_failed_transfers"] = None if after is None else after - failed_before
    return part


def pair_phases(
    plan: dict[str, Any], phases: list[str], processes: Processes, args: argparse.Namespace
) -> dict[str, Any]:
    """Start the pair and the router once and run the pair phases asked for, in the order
    pair, bench, recovery (recovery last: it replaces the prefill engine)."""
    extra_env = dict(pair.split("=", 1) for pair in args.env)
    pair = Pair(plan, extra_env)
    pair.start(processes, args.startup_timeout)
    found: dict[str, Any] = {"pair_env": extra_env}
    if "pair" in phases:
        found["pair"] = {"argv": {e.name: e.argv for e in [*pair.engines, pair.router]}}
        found["pair"].update(pair_part(pair))
    if "bench" in phases:
        found["bench"] = bench_part(pair, processes.logs)
    if "recovery" in phases:
        found["recovery"] = recovery_part(
            pair, processes, args.startup_timeout, args.recovery_limit
        )
    processes.stop()
    logs = {e.name: processes.kept_lines(e) for e in [*pair.engines, pair.router]}
    for phase in PAIR_PHASES:
        if phase in phases:
            found[phase]["logs"] = logs
    if "pair" in phases:
        found["pair"]["ucx"] = ucx_lines(processes.logs, pair.engines)
        found["pair"]["deprecation_warnings"] = sorted(
            {line for e in pair.engines for line in processes.kept_lines(e) if "deprecated" in line}
        )
    return found


def ucx_lines(logs: Path, engines: list[local.Process]) -> list[str]:
    """UCX's protocol selection tables (UCX_PROTO_INFO=y) from the engines' logs."""
    kept: list[str] = []
    for engine in engines:
        text = (logs / f"{engine.name}.log").read_text(errors="replace")
        found = [line[-200:] for line in text.splitlines() if UCX_TABLE.search(line)]
        kept += [f"{engine.name}: {line}" for line in found[:40]]
    return kept


def served_model(engine: local.Process) -> str:
    return engine.argv[engine.argv.index("--served-model-name") + 1]


def vocab_size() -> int:
    return int(json.loads((MODEL_DIR / "config.json").read_text())["vocab_size"])


def run_command(args: argparse.Namespace) -> int:
    plan = json.loads(args.layout.read_text())
    model_dir.make(args.config, MODEL_DIR)
    record: dict[str, Any] = json.loads(args.record.read_text()) if args.record.exists() else {}
    record.update(date=time.strftime("%Y-%m-%d"), versions=versions(), gpu=gpu())
    record["plan"] = {k: v for k, v in plan.items() if k != "layout"}
    record["changes"] = plan["layout"]["changes"] + [
        f"model: {args.config.name} with a generated word-level tokenizer (model_dir.py)",
        f"engines of the pair: {UCX_DIAGNOSTICS} (UCX prints the transports it selects)",
    ]
    logs = Path(tempfile.mkdtemp(prefix="real-engines-logs-"))
    processes = Processes(logs)
    phases = parse_phases(args.phase)
    try:
        if "alone" in phases:
            record["alone"] = alone_phase(plan, processes, args.startup_timeout)
            args.record.write_text(json.dumps(record, indent=1))
        if any(phase in phases for phase in PAIR_PHASES):
            record.update(pair_phases(plan, phases, processes, args))
    finally:
        processes.stop()
        args.record.write_text(json.dumps(record, indent=1))
        print(f"wrote {args.record}; engine logs in {logs}")
    if "recovery" in phases and not record["recovery"]["recovered"]:
        return 1
    return int(record.get("pair", {}).get("verify_exit_code", 0))


def parse_phases(text: str) -> list[str]:
    """`alone,pair` -> the phases to run; `all` is alone and pair."""
    phases = [p.strip() for p in text.split(",") if p.strip()]
    phases = [q for p in phases for q in (("alone", "pair") if p == "all" else (p,))]
    unknown = sorted(set(phases) - {"alone", *PAIR_PHASES})
    if unknown or not phases:
        raise SystemExit(f"--phase {text!r}: choose from alone, pair, bench, recovery, all")
    return phases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser("plan", help="render and plan the processes (needs helm)")
    plan.add_argument("-f", "--values", type=Path, help="default: pdctl init of the 8B layout")
    plan.add_argument("--vllm-version", default="0.26.0", help="the vLLM the GPU host runs")
    plan.add_argument("--gpus", type=int, default=1)
    plan.add_argument("-o", "--out", type=Path, default=Path("layout.json"))
    run = commands.add_parser("run", help="start, measure and verify (needs GPUs)")
    run.add_argument("--layout", type=Path, default=Path("layout.json"))
    run.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="the model's config.json")
    run.add_argument(
        "--phase",
        default="all",
        help="comma-separated: alone, pair, bench, recovery (the pair phases share one start), "
        "or all (alone,pair)",
    )
    run.add_argument("--record", type=Path, default=Path("real-engines-record.json"))
    run.add_argument("--startup-timeout", type=float, default=600.0)
    run.add_argument(
        "--recovery-limit",
        type=float,
        default=300.0,
        help="seconds after the kill within which PD must be proven again (--phase recovery)",
    )
    run.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="more environment for the pair's engines (e.g. UCX_TLS=cuda_ipc,cuda_copy,tcp)",
    )
    args = parser.parse_args()
    return plan_command(args) if args.command == "plan" else run_command(args)


if __name__ == "__main__":
    sys.exit(main())
