"""MoE and MLA models on real vLLM, each engine alone, for the planner's fit and check (issue
"Planner 2"): prefill tokens/s at 2,048-token prompts and the decode step at 1, 16 and 64
sequences, per model, written to a JSON record.

    python benchmarks/real_engines/models.py --record models.json   # where the GPU is

Each model is its real config.json with fewer layers (`MODELS`: so that all of them fit one GPU
together; the planner is compared on the same reduced config, so the comparison is like for
like), dummy weights, the generated word-level tokenizer (model_dir.py). The engines start
together (their torch.compile runs overlap on the host's cores) with a fixed KV cache size
(`--kv-cache-memory-bytes`: no memory profiling, which engines starting side by side would
confuse) and are then measured one at a time, so none shares the GPU's compute with another.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.real_engines import measure, model_dir, run, steady  # noqa: E402
from pdctl.local import layout as local  # noqa: E402

CONFIGS = ROOT / "tests/fixtures/configs"
KV_CACHE_BYTES = 2 * 1024**3  # per engine: over 40k tokens on every model here (64 x 320 needed)
MAX_MODEL_LEN = 4096
FIRST_PORT = 19000


@dataclass(frozen=True)
class Model:
    name: str  # the fixture's name (tests/fixtures/configs/<name>.json)
    layers: int  # num_hidden_layers kept
    utilization: float  # --gpu-memory-utilization: only vLLM's start-up check reads it here
    env: tuple[tuple[str, str], ...] = ()


# Weights at these layer counts (dummy, the checkpoint's dtype): about 31, 24, 28 and 22 GB.
MODELS = (
    Model("qwen3-30b-a3b", 24, 0.26),  # 128 experts, 8 active, GQA
    Model("mixtral-8x7b", 8, 0.2),  # 8 experts, 2 active, GQA
    # MLA; 3 dense layers then MoE (256 experts, 8 active), FP8 blocks. Without DeepGEMM: its
    # warm-up of 2,052 shapes did not end within 400 s beside the other engines' starts on the
    # H200 (2026-12-02), so vLLM's CUTLASS/Triton block-FP8 kernels run instead.
    Model("deepseek-v3", 5, 0.24, (("VLLM_USE_DEEP_GEMM", "0"),)),
    Model("qwen3-235b-a22b", 4, 0.2),  # 128 experts, 8 active, wider experts
)


def reduced_config(model: Model) -> dict[str, Any]:
    config = json.loads((CONFIGS / f"{model.name}.json").read_text())
    config["num_hidden_layers"] = model.layers
    config.pop("num_nextn_predict_layers", None)  # the MTP layer is not served here
    return config


def engine(model: Model, index: int, folder: Path) -> local.Process:
    port = FIRST_PORT + index
    argv = ["vllm", "serve", str(folder), "--host", local.LOOPBACK, "--port", str(port)]
    argv += ["--served-model-name", model.name, "--load-format", "dummy"]
    argv += [
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--gpu-memory-utilization",
        str(model.utilization),
    ]
    argv += ["--kv-cache-memory-bytes", str(KV_CACHE_BYTES)]
    return local.Process(
        model.name, "both", argv, {"PYTHONHASHSEED": "123", **dict(model.env)}, port
    )


def measure_one(process: local.Process, vocab: int) -> dict[str, Any]:
    model = process.name
    run.warm_up(process.url, model, vocab)
    return {
        "prefill": measure.run(process.url, model, run.ALONE_PREFILL, vocab, "prefill"),
        "decode": {
            str(batch): measure.run(
                process.url, model, measure.Load(128, 192, batch, batch), vocab, "decode"
            )
            for batch in run.DECODE_BATCHES
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, default=Path("models-record.json"))
    parser.add_argument("--only", action="append", default=[], help="model name (repeatable)")
    parser.add_argument("--startup-timeout", type=float, default=420.0)
    parser.add_argument("--layers", type=int, help="layers to keep, for every model chosen")
    parser.add_argument("--utilization", type=float, help="for every model chosen")
    args = parser.parse_args()
    chosen = [
        replace(m, layers=args.layers or m.layers, utilization=args.utilization or m.utilization)
        for m in MODELS
        if not args.only or m.name in args.only
    ]
    work = Path(tempfile.mkdtemp(prefix="real-engines-models-"))
    processes = run.Processes(work)
    record: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "versions": run.versions(),
        "gpu": run.gpu(),
        "kv_cache_bytes": KV_CACHE_BYTES,
        "models": {},
    }
    engines = []
    for index, model in enumerate(chosen):
        config = reduced_config(model)
        folder = work / model.name
        folder.mkdir()
        (work / f"{model.name}.config.json").write_text(json.dumps(config))
        model_dir.make(work / f"{model.name}.config.json", folder)
        process = engine(model, index, folder)
        engines.append((model, process, int(config["vocab_size"])))
        record["models"][model.name] = {"layers": model.layers, "argv": process.argv}
    started = processes.start_all([p for _, p, _ in engines], args.startup_timeout)
    try:
        for model, process, vocab in engines:
            entry = record["models"][model.name]
            entry["started"] = started[process.name]
            if started[process.name] is None:
                entry.update(measure_one(process, vocab))
                steady.attach(entry, record["gpu"])
            entry["log"] = processes.kept_lines(process)
            entry["kv_pool"] = run.kv_pool(entry["log"])
            args.record.write_text(json.dumps(record, indent=1))
    finally:
        processes.stop()
        args.record.write_text(json.dumps(record, indent=1))
        print(f"wrote {args.record}; engine logs in {work}")
    return 0 if all(v.get("decode") for v in record["models"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
