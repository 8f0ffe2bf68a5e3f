"""Run the chart's LMCache PD forms on real vLLM + LMCache on one host, as far as each runs, and
write a record. README.md beside this file says how it ran on the H200.

    lmcache_pair.py plan -o plan.json          # where helm is: render both forms, plan processes
    lmcache_pair.py forms --plan plan.json     # where LMCache is: what LMCache reads of each form
    lmcache_pair.py run --plan plan.json --out DIR   # where the GPUs are: start, verify, bench

The current form (`kvTransfer.connector: LMCacheConnectorV1`, tutorials/assets/values-19-lmcache-
pd.yaml) runs as pdctl up would run it (pdctl.local.layout: loopback ports, dummy weights, the GPU
shared), with LMCache's PD proxy (`routerSpec.type: lmcache-proxy`) as the router: the rendered
proxy command with the engines' URLs, its script taken from the same LMCache source release. The
tutorial's form (`lmcacheConfig`, LMCACHE_NIXL_* env, values-16-disagg-prefill.yaml) is checked by
`forms`: the LMCache configuration that LMCache builds from each rendered engine's env.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.real_engines import measure, model_dir, run  # noqa: E402
from pdctl.local import flags  # noqa: E402
from pdctl.local import layout as local  # noqa: E402

CURRENT = ROOT / "tutorials/assets/values-19-lmcache-pd.yaml"
TUTORIAL = ROOT / "tutorials/assets/values-16-disagg-prefill.yaml"
RELEASE = "pd"
# Where build_lmcache.sh unpacks LMCache's source release on the GPU host: the proxy script is an
# example of that release (examples/disagg_prefill/disagg_proxy_server.py), not part of the wheel.
LMCACHE_SOURCE = Path("/tmp/lmcache-0.5.6")
PROXY_SCRIPT = LMCACHE_SOURCE / "examples/disagg_prefill/disagg_proxy_server.py"
# The LMCache settings each form is about (LMCacheEngineConfig attributes).
FORM_KEYS = (
    "enable_pd",
    "pd_role",
    "transfer_channel",
    "pd_peer_host",
    "pd_peer_init_port",
    "pd_peer_alloc_port",
    "pd_proxy_host",
    "pd_proxy_port",
    "pd_buffer_size",
    "pd_buffer_device",
    "nixl_backends",
    "local_cpu",
    "max_local_cpu_size",
)
LMCACHE_LOG = re.compile(r"LMCache (WARNING|ERROR)|Unknown configuration key|deprecated", re.I)
BENCH_CONCURRENCY = "1,4,16"
BENCH_REQUESTS = 16
BENCH_OUTPUT = 128


# --- plan: render with pdctl's pipeline (needs helm) ----------------------------------------------


def _render(values: Path) -> list[dict[str, Any]]:
    from pdctl import pipeline

    return pipeline.render(pipeline.load_values([str(values)])).objects


def _container(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    from pdctl import manifests

    deployment = manifests.find(objects, "Deployment", name)
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def _engines(objects: list[dict[str, Any]], router: str) -> local.Layout:
    """pdctl up's plan of the engines (pdctl.local.layout) on one GPU with dummy weights; the
    router Deployment is left out of the plan (up runs vllm-router only) and planned here."""
    engines_only = [o for o in objects if o["metadata"]["name"] != router]
    options = local.Options(devices=["0"], weights=run.MODEL_DIR)
    return local.plan(engines_only, RELEASE, options, local.counting(run.FIRST_PORT))


def _proxy(
    container: dict[str, Any], engines: local.Layout, port: int
) -> tuple[local.Process, list[str]]:
    """LMCache's PD proxy as rendered, with the engines' loopback URLs; the changes listed."""
    argv = [str(w) for w in [*container.get("command", []), *container.get("args", [])]]
    prefill = next(e for e in engines.engines if e.role == "prefill")
    decode = next(e for e in engines.engines if e.role == "decode")
    changes = [
        f"proxy: {argv[0]} {argv[1]} -> python3 {PROXY_SCRIPT} (the script of the LMCache "
        "source release that was built, as tutorial 19 says to take it)",
    ]
    argv = ["python3", str(PROXY_SCRIPT), *argv[2:]]
    for flag, value in (
        ("--host", local.LOOPBACK),
        ("--port", str(port)),
        ("--prefiller-host", local.LOOPBACK),
        ("--prefiller-port", str(prefill.port)),
        ("--decoder-host", local.LOOPBACK),
        ("--decoder-port", str(decode.port)),
        ("--proxy-host", local.LOOPBACK),
        # pdctl up gives the sender's notify port and the receiver's ports fresh numbers
        # (pdctl/local/lmcache_env.py): the proxy is told the same.
        ("--proxy-port", prefill.env["LMCACHE_PD_PROXY_PORT"]),
        ("--decoder-init-port", decode.env["LMCACHE_PD_PEER_INIT_PORT"]),
        ("--decoder-alloc-port", decode.env["LMCACHE_PD_PEER_ALLOC_PORT"]),
    ):
        argv = flags.replace(argv, flag, value)
    changes.append("proxy: loopback host/port, the engines' loopback URLs and LMCache ports")
    # LMCache >= 0.5 sizes its PD-buffer semaphore from the model's config.json (--model, default
    # the Hugging Face id meta-llama/Llama-3.1-8B-Instruct, which it fetches): no network here.
    argv += ["--model", str(run.MODEL_DIR)]
    changes.append(f"proxy: --model {run.MODEL_DIR} (LMCache 0.5.6's script reads config.json)")
    # FastAPI serves /docs: the proxy's only GET route (its own routes are POST).
    return local.Process(local.ROUTER, local.ROUTER, argv, {}, port, "/docs"), changes


def _sender_proxy(engines: local.Layout) -> list[str]:
    """The sender reports to the proxy's ZMQ port on loopback, not the router Service."""
    changed = []
    for engine in engines.engines:
        if "LMCACHE_PD_PROXY_HOST" in engine.env:
            engine.env["LMCACHE_PD_PROXY_HOST"] = local.LOOPBACK
            changed.append(f"{engine.name}: LMCACHE_PD_PROXY_HOST -> {local.LOOPBACK}")
    return changed


def _command(engines: local.Layout) -> list[str]:
    """The image's /opt/venv/bin/vllm is `vllm` on the host's PATH."""
    changed = []
    for engine in engines.engines:
        if engine.argv[0] != "vllm":
            changed.append(f"{engine.name}: {engine.argv[0]} -> vllm (the host's)")
            engine.argv[0] = "vllm"
    return changed


def _tutorial_env(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    from pdctl import manifests, naming

    found = {}
    for pool in manifests.summarize(objects).pools:
        container = _container(objects, naming.Release(RELEASE).pool_deployment(pool.name))
        found[pool.name] = {
            e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e
        }
    return found


def plan_command(args: argparse.Namespace) -> int:
    from pdctl import manifests

    objects = _render(args.values)
    router = manifests.summarize(objects).router["name"]
    engines = _engines(objects, router)
    proxy, proxy_changes = _proxy(_container(objects, router), engines, run.FIRST_PORT + 50)
    # The layout's line on vllm-router's static mode is not this router's (the proxy's follow).
    kept = [c for c in engines.changes if not c.startswith("router in static mode")]
    changes = [*kept, *_command(engines), *_sender_proxy(engines), *proxy_changes]
    plan = {
        "values": str(args.values.relative_to(ROOT)),
        "engines": [asdict(e) for e in engines.engines],
        "router": asdict(proxy),
        "changes": changes,
        "tutorial_form": {
            "values": str(TUTORIAL.relative_to(ROOT)),
            "env": _tutorial_env(_render(TUTORIAL)),
        },
        "current_form_env": {e.name: e.env for e in engines.engines},
    }
    args.out.write_text(json.dumps(plan, indent=1))
    print(f"wrote {args.out}")
    return 0


# --- forms: what LMCache reads of each form's env (needs LMCache) ---------------------------------


FORM_PROBE = """
import json, logging, sys
from lmcache.v1.config import LMCacheEngineConfig
seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
logging.getLogger("lmcache").addHandler(Keep())
for name in list(logging.root.manager.loggerDict):
    if name.startswith("lmcache"):
        logging.getLogger(name).addHandler(Keep())
config = LMCacheEngineConfig.from_env()
keys = json.loads(sys.argv[1])
print(json.dumps({"config": {k: getattr(config, k, None) for k in keys}, "log": seen}, default=str))
"""


def forms_command(args: argparse.Namespace) -> int:
    plan = json.loads(args.plan.read_text())
    cases = {f"tutorial/{k}": v for k, v in plan["tutorial_form"]["env"].items()}
    cases.update({f"current/{k}": v for k, v in plan["current_form_env"].items()})
    found = {}
    for name, env in cases.items():
        clean = {k: v for k, v in os.environ.items() if not k.startswith("LMCACHE_")}
        done = subprocess.run(
            [sys.executable, "-c", FORM_PROBE, json.dumps(FORM_KEYS)],
            env={**clean, **env},
            capture_output=True,
            text=True,
            check=False,
        )
        last = done.stdout.strip().splitlines()[-1:] or [""]
        try:
            found[name] = json.loads(last[0])
        except ValueError:
            found[name] = {"exit_code": done.returncode, "stderr": done.stderr[-3000:]}
        found[name]["lmcache_env"] = {k: v for k, v in env.items() if k.startswith("LMCACHE_")}
        found[name]["stderr_lines"] = [
            line[-300:] for line in done.stderr.splitlines() if LMCACHE_LOG.search(line)
        ][:20]
    args.out.write_text(json.dumps(found, indent=1, default=str))
    print(json.dumps(found, indent=1, default=str)[:6000])
    return 0


# --- run: start the pair and the proxy, verify, bench (needs GPUs) --------------------------------


def _process(data: dict[str, Any]) -> local.Process:
    return local.Process(**data)


def _scrape(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _pdctl(argv: list[str], timeout: float) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [*run.PDCTL, *argv], capture_output=True, text=True, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"argv": argv, "exit_code": None, "error": f"no end in {timeout:.0f}s"}
    try:
        result: Any = json.loads(done.stdout)
    except ValueError:
        result = {"stdout": done.stdout[-3000:], "stderr": done.stderr[-3000:]}
    return {"argv": argv, "exit_code": done.returncode, "result": result}


def _log_lines(path: Path, pattern: re.Pattern[str], limit: int = 60) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return [line[-300:] for line in text.splitlines() if pattern.search(line)][:limit]


KEPT = re.compile(
    r"Available KV cache memory|GPU KV cache size|LMCache (INFO|WARNING|ERROR)|Traceback|Error|"
    r"deprecated|NIXL|nixl|UCX|ucx|transport|Unknown configuration"
)


def variant(
    plan: dict[str, Any], name: str, extra_env: dict[str, str], out: Path, timeout: float
) -> dict[str, Any]:
    """Start the engines and the proxy with `extra_env`, verify, bench, scrape; then stop."""
    logs = out / f"logs-{name}"
    processes = run.Processes(logs)
    engines = [_process(e) for e in plan["engines"]]
    proxy = _process(plan["router"])
    prefill = next(e for e in engines if e.role == "prefill")
    decode = next(e for e in engines if e.role == "decode")
    env = {**run.UCX_DIAGNOSTICS, **extra_env}
    part: dict[str, Any] = {"env": extra_env, "started": {}}
    urls = ["--url", proxy.url, "--prefill-url", prefill.url, "--decode-url", decode.url]
    model = run.served_model(engines[0])
    began = time.monotonic()
    try:
        per_engine = {e.name: {**env, **_own(extra_env, e.name)} for e in engines}
        popens = [(e, processes.launch(e, per_engine[e.name])) for e in engines]
        deadline = time.monotonic() + timeout
        for engine, popen in popens:
            processes.wait_healthy(engine, popen, deadline)
        part["started"]["engines_s"] = round(time.monotonic() - began, 1)
        processes.start(proxy, 180, {})
        part["started"]["proxy_s"] = round(time.monotonic() - began, 1)
        _progress(out, f"{name}: up after {time.monotonic() - began:.0f}s")
        before = {e.role: _scrape(e.url) for e in engines}
        part["verify"] = _pdctl(
            ["verify", *urls, "--connector", "LMCacheConnectorV1", "--requests", "2", "-o", "json"],
            300,
        )
        _progress(out, f"{name}: verify exit {part['verify']['exit_code']}")
        dataset = run.bench_dataset(out / f"bench-{name}.jsonl", f"bench-{name}", 48)
        bench = ["bench", *urls, "--dataset", str(dataset), "--model", model]
        bench += ["--concurrency", BENCH_CONCURRENCY, "--requests", str(BENCH_REQUESTS)]
        bench += ["--output-len", str(BENCH_OUTPUT), "--connector", "LMCacheConnectorV1"]
        part["bench"] = _pdctl([*bench, "-o", "json"], 420)
        part["bench"]["argv"] = [a if a != str(dataset) else dataset.name for a in bench]
        _progress(out, f"{name}: bench exit {part['bench']['exit_code']}")
        part["loads"] = _loads(proxy.url, decode.url, model)
        _progress(out, f"{name}: loads done")
        for e in engines:
            (out / f"metrics-{name}-{e.role}-before.txt").write_text(before[e.role])
            (out / f"metrics-{name}-{e.role}.txt").write_text(_scrape(e.url))
    except SystemExit as failed:
        part["failed"] = str(failed)[-4000:]
        _progress(out, f"{name}: failed: {str(failed)[:300]}")
    finally:
        processes.stop()
    part["logs"] = {p.name: _log_lines(logs / f"{p.name}.log", KEPT) for p in [*engines, proxy]}
    part["ucx"] = run.ucx_lines(logs, engines) if logs.exists() else []
    part["wall_s"] = round(time.monotonic() - began, 1)
    return part


PAIR_LOADS = [measure.Load(2048, 64, c, max(2 * c, 8), min_tokens=False) for c in (1, 4, 16)]
PAIR_SIZES = [measure.Load(n, 16, 1, 3, min_tokens=False) for n in (2048, 8192, 16384)]


def _loads(router: str, decode: str, model: str) -> list[dict[str, Any]]:
    """TTFT/ITL through the proxy at 1/4/16 in flight (2,048-token prompts), then one request at a
    time at growing prompts; around each, the decode engine's counters (tokens it loaded from
    prefill's KV, and LMCache's own where exported)."""
    vocab = run.vocab_size()
    found = []
    for series, loads in (("pd", PAIR_LOADS), ("by-size", PAIR_SIZES)):
        for load in loads:
            before = _scrape(decode)
            result = measure.run(router, model, load, vocab, series)
            result["decode_metrics_delta"] = _delta(before, _scrape(decode))
            found.append(result)
    return found


DELTA = re.compile(r"^(vllm:prompt_tokens_by_source_total|lmcache:\w+)(\{[^}]*\})? ([0-9.eE+-]+)$")


def _delta(before: str, after: str) -> dict[str, float]:
    """Counter and histogram-sum lines that moved between two scrapes."""

    def values(text: str) -> dict[str, float]:
        found = {}
        for line in text.splitlines():
            match = DELTA.match(line)
            if match:
                found[match.group(1) + (match.group(2) or "")] = float(match.group(3))
        return found

    then, now = values(before), values(after)
    return {k: round(v - then.get(k, 0.0), 6) for k, v in now.items() if v != then.get(k, 0.0)}


def _own(extra_env: dict[str, str], engine: str) -> dict[str, str]:
    """PROMETHEUS_MULTIPROC_DIR is per process tree: each engine its own folder (pods each have
    their own /tmp; processes on one host share it)."""
    if "PROMETHEUS_MULTIPROC_DIR" not in extra_env:
        return {}
    folder = Path(extra_env["PROMETHEUS_MULTIPROC_DIR"]) / engine
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.db"):
        stale.unlink()
    return {"PROMETHEUS_MULTIPROC_DIR": str(folder)}


def _progress(out: Path, line: str) -> None:
    with (out / "progress.txt").open("a") as f:
        f.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def run_command(args: argparse.Namespace) -> int:
    plan = json.loads(args.plan.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    model_dir.make(args.config, run.MODEL_DIR)
    record: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "versions": run.versions(),
        "gpu": run.gpu(),
        "values": plan["values"],
        "changes": plan["changes"],
        "commands": {p["name"]: p for p in [*plan["engines"], plan["router"]]},
        "variants": {},
    }
    for spec in args.variant:
        name, _, rest = spec.partition(":")
        extra = dict(kv.split("=", 1) for kv in rest.split(";") if kv)
        record["variants"][name] = variant(plan, name, extra, args.out, args.startup_timeout)
        (args.out / "record.json").write_text(json.dumps(record, indent=1))
    _progress(args.out, "done")
    (args.out / "done").write_text("")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser("plan", help="render both forms and plan the processes")
    plan.add_argument("-f", "--values", type=Path, default=CURRENT)
    plan.add_argument("-o", "--out", type=Path, default=Path("lmcache-plan.json"))
    forms = commands.add_parser("forms", help="what LMCache reads of each form's env")
    forms.add_argument("--plan", type=Path, default=Path("lmcache-plan.json"))
    forms.add_argument("-o", "--out", type=Path, default=Path("lmcache-forms.json"))
    start = commands.add_parser("run", help="start, verify, bench each variant (needs GPUs)")
    start.add_argument("--plan", type=Path, default=Path("lmcache-plan.json"))
    start.add_argument("--config", type=Path, default=run.DEFAULT_CONFIG)
    start.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "lmcache-run")
    start.add_argument("--startup-timeout", type=float, default=600.0)
    start.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE;KEY=VALUE",
        help="a start of the pair with more env (none: as rendered); repeatable, in order",
    )
    args = parser.parse_args()
    if args.command == "plan":
        return plan_command(args)
    if args.command == "forms":
        return forms_command(args)
    if not args.variant:
        args.variant = ["as-rendered:"]
    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
