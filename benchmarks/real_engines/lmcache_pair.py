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
from pdctl.local import flags, multiproc  # noqa: E402
from pdctl.local import layout as local  # noqa: E402

CURRENT = ROOT / "tutorials/assets/values-19-lmcache-pd.yaml"
TUTORIAL = ROOT / "tutorials/assets/values-16-disagg-prefill.yaml"
RELEASE = "pd"
# Where build_lmcache.sh unpacks LMCache's source release on the GPU host: the proxy script is an
# example of that release (examples/disagg_prefill/disagg_proxy_server.py), not part of the wheel.
LMCACHE_VERSION = "0.5.6"
LMCACHE_SOURCE = Path(f"/tmp/lmcache-{LMCACHE_VERSION}")
# The chart renders the proxy's flags for the LMCache release of its script: this one's.
PROXY_RELEASE = f"routerSpec.lmcacheProxy.lmcacheVersion={LMCACHE_VERSION}"
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


# --- plan: render with pdctl's pipeline (needs helm) ----------------------------------------------


def _render(values: Path, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    from pdctl import pipeline

    return pipeline.render(pipeline.load_values([str(values)], sets)).objects


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
    # The script sizes its PD-buffer semaphore from the model's config.json (--model, rendered as
    # the pools' Hugging Face id, which it would fetch): the local model folder instead.
    rendered = argv[argv.index("--model") + 1]
    argv = flags.replace(argv, "--model", str(run.MODEL_DIR))
    changes.append(f"proxy: --model {rendered} -> {run.MODEL_DIR} (the script reads config.json)")
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

    objects = _render(args.values, (PROXY_RELEASE,))
    router = manifests.summarize(objects).router["name"]
    engines = _engines(objects, router)
    proxy, proxy_changes = _proxy(_container(objects, router), engines, run.FIRST_PORT + 50)
    # The layout's lines on the router it would run (vllm-router's static mode, the stand-in
    # LMCache's senders report to) are not this router's: the proxy's own follow.
    kept = [
        c
        for c in engines.changes
        if not c.startswith("router in static mode") and "router stand-in" not in c
    ]
    changes = [*kept, *_command(engines), *_sender_proxy(engines), *proxy_changes]
    plan = {
        "values": str(args.values.relative_to(ROOT)),
        "set": [PROXY_RELEASE],
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


def _pdctl(argv: list[str], timeout: float, keep: Path) -> dict[str, Any]:
    """One pdctl command; its result also written to `keep` at once (a GPU lease can end before
    the record is: the 2026-12-04 lease lost verify's output that way)."""
    found: dict[str, Any] = {"argv": argv}
    try:
        done = subprocess.run(
            [*run.PDCTL, *argv], capture_output=True, text=True, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        found.update(exit_code=None, error=f"no end in {timeout:.0f}s")
    else:
        try:
            result: Any = json.loads(done.stdout)
        except ValueError:
            result = {"stdout": done.stdout[-3000:], "stderr": done.stderr[-3000:]}
        found.update(exit_code=done.returncode, result=result)
    keep.write_text(json.dumps(found, indent=1))
    return found


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


def parse_variant(spec: str) -> tuple[str, dict[str, str], list[str]]:
    """`NAME:KEY=VALUE;--flag;--flag=value`: the variant's name, the env both engines get more
    and the flags appended to both engines' command."""
    name, _, rest = spec.partition(":")
    items = [item for item in rest.split(";") if item]
    flags = [item for item in items if item.startswith("--")]
    env = dict(item.split("=", 1) for item in items if not item.startswith("--"))
    return name, env, flags


def variant(
    plan: dict[str, Any],
    name: str,
    extra_env: dict[str, str],
    out: Path,
    timeout: float,
    flags: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One start of the engines and the proxy with `extra_env` and `flags`: verify, bench at
    1/4/16 in flight with LMCache's KV rates, KV transfer by prompt size, scrapes, UCX's
    transports."""
    logs = out / f"logs-{name}"
    processes = run.Processes(logs)
    engines = [_process(e) for e in plan["engines"]]
    for engine in engines:
        engine.argv = [*engine.argv, *flags]
    proxy = _process(plan["router"])
    prefill = next(e for e in engines if e.role == "prefill")
    decode = next(e for e in engines if e.role == "decode")
    env = {**run.UCX_DIAGNOSTICS, **extra_env}
    part: dict[str, Any] = {"env": extra_env, "flags": list(flags), "started": {}}
    urls = ["--url", proxy.url, "--prefill-url", prefill.url, "--decode-url", decode.url]
    model = run.served_model(engines[0])
    began = time.monotonic()
    try:
        # The chart's PROMETHEUS_MULTIPROC_DIR (an emptyDir per pod), one folder per engine here.
        part["prometheus_multiproc_dir"] = multiproc.own_folders(engines, out / f"prom-{name}")
        multiproc.fresh(engines)
        processes.start_engines(engines, timeout, env)
        part["started"]["engines_s"] = round(time.monotonic() - began, 1)
        processes.start(proxy, 180, {})
        part["started"]["proxy_s"] = round(time.monotonic() - began, 1)
        _progress(out, f"{name}: up after {time.monotonic() - began:.0f}s")
        before = {e.role: _scrape(e.url) for e in engines}
        part["verify"] = _pdctl(
            ["verify", *urls, "--connector", "LMCacheConnectorV1", "--requests", "2", "-o", "json"],
            300,
            out / f"verify-{name}.json",
        )
        _progress(out, f"{name}: verify exit {part['verify']['exit_code']}")
        part["bench"] = bench_steps(urls, model, prefill.url, out / f"bench-{name}")
        _progress(out, f"{name}: bench exits {[s['exit_code'] for s in part['bench']]}")
        if all(step["exit_code"] == 0 for step in part["bench"]):  # else the pair stopped answering
            part["by_size"] = _by_size(proxy.url, decode.url, model)
            _progress(out, f"{name}: by-size loads done")
        for e in engines:
            (out / f"metrics-{name}-{e.role}-before.txt").write_text(before[e.role])
            (out / f"metrics-{name}-{e.role}.txt").write_text(_scrape(e.url))
    except (SystemExit, OSError) as failed:  # OSError: an engine that died stops answering
        part["failed"] = str(failed)[-4000:]
        _progress(out, f"{name}: failed: {str(failed)[:300]}")
    finally:
        processes.stop()
    part["logs"] = {p.name: _log_lines(logs / f"{p.name}.log", KEPT) for p in [*engines, proxy]}
    part["ucx"] = run.ucx_lines(logs, engines) if logs.exists() else []
    part["wall_s"] = round(time.monotonic() - began, 1)
    return part


# Seven requests of a step at 1 in flight took 6 s on an H200; a step that has not ended in this
# time waits on a pair that stopped answering (the 2026-12-04 lease: 7 minutes, then the next step).
BENCH_STEP_LIMIT_S = 120


def bench_argv(urls: list[str], model: str, dataset: Path, concurrency: str) -> list[str]:
    """`pdctl bench` of one step through the proxy, as run.py's bench phase asks (its prompts of
    run.BENCH_PROMPT tokens, run.BENCH_OUTPUT out, run.BENCH_REQUESTS requests a step)."""
    argv = ["bench", *urls, "--dataset", str(dataset), "--model", model]
    argv += ["--concurrency", concurrency, "--requests", str(run.BENCH_REQUESTS)]
    argv += ["--output-len", str(run.BENCH_OUTPUT), "--connector", "LMCacheConnectorV1"]
    return [*argv, "-o", "json"]


def bench_steps(urls: list[str], model: str, sender: str, stem: Path) -> list[dict[str, Any]]:
    """`pdctl bench` through the proxy at each of run.BENCH_CONCURRENCY, one call a step so that
    the sender's LMCache counters read around it belong to that step alone (lmcache_kv)."""
    per_token = kv_bytes_per_token()
    found = []
    for concurrency in run.BENCH_CONCURRENCY.split(","):
        dataset = run.bench_dataset(
            stem.with_name(f"{stem.name}-{concurrency}.jsonl"),
            f"{stem.name}-{concurrency}",
            run.BENCH_REQUESTS,
        )
        argv = bench_argv(urls, model, dataset, concurrency)
        before = _scrape(sender)
        done = _pdctl(argv, BENCH_STEP_LIMIT_S, dataset.with_suffix(".result.json"))
        done["argv"] = [a if a != str(dataset) else dataset.name for a in argv]
        found.append(done)
        try:
            after = _scrape(sender)
        except OSError as gone:  # the sender died in this step (the 2026-12-04 lease at 16)
            done["lmcache_kv"] = {"exported": None, "error": f"sender's /metrics: {gone}"}
            break
        steps = (
            done.get("result", {}).get("steps") if isinstance(done.get("result"), dict) else None
        )
        wall = steps[0].get("duration_s") if steps else None
        done["lmcache_kv"] = lmcache_kv(before, after, per_token, wall)
        if done["exit_code"] is None:  # the pair stopped answering: later steps would wait too
            break
    return found


def kv_bytes_per_token() -> int:
    """KV bytes a token of the served model's shape holds (all layers, K and V, its dtype)."""
    from pdctl.models.config import load_config_file
    from pdctl.models.memory import kv_bytes_per_token as per_token

    return per_token(load_config_file(run.MODEL_DIR / "config.json", "pair"))


# LMCache's histograms of a store, on the sender (lmcache/observability.py): the whole store
# (GPU copy included), and its put into the PD transfer channel.
TIME_TO_STORE = "lmcache:time_to_store"
STORE_PUT_TIME = "lmcache:store_put_time"


def lmcache_kv(before: str, after: str, per_token: int, wall_s: float | None) -> dict[str, Any]:
    """The KV LMCache's sender moved between two scrapes of its /metrics, and how fast: tokens
    stored (lmcache:num_stored_tokens) x `per_token` bytes over the load's wall time (sustained:
    the rate the load reached, overlapping stores counted once), and over the summed store and
    put times (per store: one store's own rate). None where LMCache's metrics are not exported
    (no PROMETHEUS_MULTIPROC_DIR)."""
    from pdctl import connectors
    from pdctl.verify import judge

    stored = next(
        m["name"] for m in connectors.load().lmcache_metrics if m["counts"] == "stored_tokens"
    )
    then, now = judge.parse(before), judge.parse(after)
    family = now.family(stored)
    if family is None:
        return {"exported": False}

    def moved(name: str, key: str) -> float:
        found = now.family(name)
        if found is None:
            return 0.0
        old = then.family(name)
        return found.read(now)[key] - (old.read(then)[key] if old else 0.0)

    tokens = moved(stored, "count")
    size = tokens * per_token
    put, store = moved(STORE_PUT_TIME, "sum"), moved(TIME_TO_STORE, "sum")
    result: dict[str, Any] = {
        "exported": True,
        "stored_tokens": tokens,
        "kv_bytes_per_token": per_token,
        "bytes": size,
        "stores": moved(STORE_PUT_TIME, "count"),
        "store_put_s": round(put, 6),
        "time_to_store_s": round(store, 6),
        "wall_s": wall_s,
    }
    for key, seconds in (
        ("sustained_gbps", wall_s),
        ("per_store_gbps", put),
        ("store_gbps", store),
    ):
        result[key] = round(size / seconds / 1e9, 3) if seconds else None
    return result


# Prompt sizes whose KV fits the receiver's PD buffer as rendered (LMCACHE_PD_BUFFER_SIZE 2 GiB:
# 16,384 tokens of Llama-3.1-8B at 131,072 bytes each; LMCache 0.5.6's proxy refuses a request
# that needs more chunk slots than the buffer holds, WeightedSemaphore.acquire).
PAIR_SIZES = [measure.Load(n, 16, 1, 3) for n in (2048, 8192, 12288)]


def _by_size(router: str, decode: str, model: str) -> list[dict[str, Any]]:
    """One request at a time at growing prompts through the proxy; around each, the decode
    engine's counters (tokens it loaded from prefill's KV, and LMCache's own)."""
    vocab = run.vocab_size()
    found = []
    for load in PAIR_SIZES:
        before = _scrape(decode)
        result = measure.run(router, model, load, vocab, "by-size")
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
        name, extra, flags = parse_variant(spec)
        record["variants"][name] = variant(
            plan, name, extra, args.out, args.startup_timeout, tuple(flags)
        )
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
        metavar="NAME:KEY=VALUE;--flag",
        help="a start of the pair with more env and engine flags (none: as rendered); "
        "repeatable, in order",
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
