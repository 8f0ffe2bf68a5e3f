"""Run pd-stack's own rendered PD release on real engines on this host's GPUs, prove it with
`pdctl verify`, and write a dated record. See README.md beside this file for what it needs.

    python benchmarks/real_engines/run.py --model-dir /models/llama-3.1-8b-instruct --gpus 1
    python benchmarks/real_engines/run.py -f my-values.yaml --model-dir DIR --out record.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.real_engines import local  # noqa: E402
from pdctl import pipeline  # noqa: E402

PDCTL = [sys.executable, "-m", "pdctl"]
DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for package in ("vllm", "torch", "nixl", "vllm-router", "lmcache"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def default_values(directory: Path, vllm_version: str | None) -> Path:
    """`pdctl init` for the default model on two GPUs, its pools' image tag set to the vLLM that
    runs here (the render follows that version's flags)."""
    out = directory / "values.yaml"
    init = ["init", "-m", DEFAULT_MODEL, "--gpus", "2", "--offline", "--out", str(out), "--force"]
    subprocess.run([*PDCTL, *init], check=True)
    if not vllm_version:
        return out
    values = pipeline.load_values([str(out)]).data
    for pool in values["servingEngineSpec"]["modelSpec"]:
        pool["tag"] = f"v{vllm_version}"
    tagged = directory / "values-tagged.json"
    tagged.write_text(json.dumps(values))
    return tagged


def wait_healthy(process: local.Process, popen: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise SystemExit(f"{process.name} exited with {popen.returncode}")
        try:
            with urllib.request.urlopen(f"{process.url}/health", timeout=2):
                return
        except OSError:
            time.sleep(2)
    raise SystemExit(f"{process.name} not healthy after {timeout:.0f}s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-f", "--values", type=Path, help="default: pdctl init of the 8B layout")
    parser.add_argument("--model-dir", type=Path, required=True, help="config.json + tokenizer")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("real-engines-record.json"))
    parser.add_argument("--startup-timeout", type=float, default=900.0)
    args = parser.parse_args()

    found = versions()
    logs = Path(tempfile.mkdtemp(prefix="real-engines-"))
    values = args.values or default_values(logs, found["vllm"])
    rendered = pipeline.render(pipeline.load_values([str(values)]))
    layout = local.plan(rendered.objects, "pd", args.model_dir, args.gpus)
    running: list[subprocess.Popen[bytes]] = []
    record: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "versions": found}
    record["values"] = str(values)
    record["changes"] = layout.changes
    try:
        for process in [*layout.engines, *([layout.router] if layout.router else [])]:
            log = (logs / f"{process.name}.log").open("wb")
            env = {**os.environ, **process.env}
            running.append(subprocess.Popen(process.argv, env=env, stdout=log, stderr=log))
            wait_healthy(process, running[-1], args.startup_timeout)
        urls = ["--url", layout.router.url] if layout.router else []
        for engine in layout.engines:
            urls += [f"--{engine.role}-url", engine.url] if engine.role != "both" else []
        verify = subprocess.run(
            [*PDCTL, "verify", *urls, "-o", "json"], capture_output=True, text=True, check=False
        )
        record["verify"] = json.loads(verify.stdout) if verify.stdout else verify.stderr
        record["verify_exit_code"] = verify.returncode
        record["deprecation_warnings"] = [
            line
            for path in logs.glob("*.log")
            for line in path.read_text(errors="replace").splitlines()
            if "deprecated" in line
        ]
    finally:
        for popen in running:
            popen.terminate()
        for popen in running:
            popen.wait(timeout=60)
    args.out.write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out}; engine logs in {logs}")
    return int(record["verify_exit_code"])


if __name__ == "__main__":
    sys.exit(main())
