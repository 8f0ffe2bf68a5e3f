"""The planner's weak classes on real vLLM, each engine alone: the decode step over context
length, single-prompt prefill of MoE models (few tokens a step), the KV tokens of models with
sliding-window layers, and FP8 (weights in both kernel families vLLM picks on Hopper, an FP8 MoE,
an FP8 KV cache). Writes a JSON record for the measurements catalog (docs/sizing.md).

    python benchmarks/real_engines/accuracy.py --wave dense --record accuracy-dense.json
    python benchmarks/real_engines/accuracy.py --wave moe --record accuracy-moe.json
    python benchmarks/real_engines/accuracy.py --wave fp8 --record accuracy-fp8.json
    python benchmarks/real_engines/accuracy.py --wave fp8-wide --record accuracy-fp8-wide.json

Which models are fitted and which held out is fixed here, before any run (`Model.use`). A wave's
engines start together (their torch.compile runs overlap) with a fixed KV cache each
(`--kv-cache-memory-bytes`: no memory profiling, which engines starting side by side would
confuse, and a known pool to count tokens in), then are measured one at a time.

- decode: `batch` requests of `context` random tokens, `DECODE_OUTPUT` tokens each, all sent at
  once; the step is the median gap between streamed tokens while every request is decoding (after
  the last first token, before the first request ends), so no prefill chunk shares those steps.
- ttft: one request of n tokens at a time (three, each its own random prompt), 2 tokens out.
- kv: the engine's logged "GPU KV cache size" for its fixed pool.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.real_engines import measure, model_dir, run, steady  # noqa: E402
from pdctl.local import layout as local  # noqa: E402
from pdctl.models.quantization import QUANT_FILE  # noqa: E402

CONFIGS = ROOT / "tests/fixtures/configs"
# NVIDIA's ModelOpt FP8 declaration (FP8 weights per tensor, FP8 KV cache), as
# nvidia/Llama-3.1-70B-Instruct-FP8 ships it beside its config.json.
MODELOPT_FP8 = ROOT / "tests/fixtures/checkpoints/llama-3.1-70b-instruct-fp8" / QUANT_FILE
# Block-scaled FP8 as Qwen/Qwen3-32B-FP8's config.json declares it (tests/fixtures/configs/
# qwen3-32b-fp8.json): vLLM 0.26 runs it with FlashInfer's DeepGEMM block-scaled kernel on Hopper.
BLOCK_FP8 = json.loads((CONFIGS / "qwen3-32b-fp8.json").read_text())["quantization_config"]
GIB = 1024**3
MAX_MODEL_LEN = 9216
FIRST_PORT = 19100
DECODE_OUTPUT = 256
TTFT_REQUESTS = 3


@dataclass(frozen=True)
class Model:
    name: str  # tests/fixtures/configs/<name>.json
    use: str  # "fit" or "check" (held out), decided before the run
    kv_gib: float  # --kv-cache-memory-bytes, in GiB
    utilization: float  # --gpu-memory-utilization: vLLM's start-up check only
    layers: int | None = None  # num_hidden_layers kept (None: all)
    # (context, batch) pairs of the decode grid
    decode: tuple[tuple[int, int], ...] = ()
    ttft: tuple[int, ...] = ()  # prompt lengths timed alone
    prefill: bool = False  # the batched 2,048-token prefill series (32 in flight)
    env: tuple[tuple[str, str], ...] = field(default=())
    base: str = ""  # the fixture config.json when it is not tests/fixtures/configs/<name>.json
    quantization: dict[str, Any] | None = None  # put in config.json as quantization_config
    quant_file: Path | None = None  # copied beside config.json (a ModelOpt checkpoint's)
    args: tuple[str, ...] = ()  # more vLLM flags


GRID = tuple((c, b) for c in (128, 2048, 8192) for b in (1, 16, 64))
# Without 8,192 x 64 (540k tokens): every point fits a pool of about 150k tokens.
SHORT_GRID = tuple(p for p in GRID if p != (8192, 64))
TTFT = (128, 512, 2048, 8192)
# Weights (dummy, bf16 unless the checkpoint says otherwise) plus the pools: wave "dense" about
# 15 + 66, 6 + 16 and 13 + 2 GiB; wave "moe" 57 + 14, 22 + 2 and 13.5 + 2 GiB, on a 140 GiB H200.
WAVES: dict[str, tuple[Model, ...]] = {
    "dense": (
        Model("llama-3.1-8b", "fit", 66, 0.6, decode=GRID, ttft=(128, 512, 2048, 8192)),
        Model(
            "llama-3.2-3b",
            "check",
            16,
            0.16,
            decode=tuple(p for p in GRID if p != (8192, 64)),
            ttft=(128, 2048, 8192),
        ),
        Model("gpt-oss-20b", "check", 2, 0.12),  # sliding window 128 on every other layer
    ),
    "moe": (
        Model(
            "qwen3-30b-a3b",
            "fit",
            14,
            0.52,
            decode=tuple(p for p in GRID if p[0] <= 2048),
            ttft=(128, 512, 2048, 8192),
            prefill=True,
        ),
        Model(
            "mixtral-8x7b",
            "check",
            2,
            0.18,
            layers=8,
            decode=((128, 1), (128, 16), (128, 64)),
            ttft=(128, 512, 2048, 8192),
        ),
        Model("mistral-7b-v0.1", "check", 2, 0.12),  # sliding window 4096 on every layer
    ),
    # Fitted only: Qwen3-32B-FP8, nvidia/Llama-3.1-70B-Instruct-FP8, Qwen3-30B-A3B-FP8 and Qwen3-8B
    # with an FP8 KV cache are held out (measured elsewhere). Weights + pools: 9 + 10, 9 + 20,
    # 16 + 10 and 17.5 + 3 GiB.
    "fp8": (
        Model(  # per-tensor FP8 weights and FP8 KV, as NVIDIA ships its FP8 checkpoints: CUTLASS
            "llama-3.1-8b-fp8-modelopt",
            "fit",
            10,
            0.16,
            decode=SHORT_GRID,
            ttft=TTFT,
            prefill=True,
            base="llama-3.1-8b",
            quant_file=MODELOPT_FP8,
        ),
        Model(  # block-scaled FP8 weights, BF16 KV: FlashInfer + DeepGEMM
            "llama-3.1-8b-fp8-block",
            "fit",
            20,
            0.24,
            decode=SHORT_GRID,
            ttft=TTFT,
            prefill=True,
            base="llama-3.1-8b",
            quantization=BLOCK_FP8,
        ),
        Model(  # BF16 weights, FP8 KV cache: the KV cache's own speed and size
            "llama-3.1-8b-kv-fp8",
            "fit",
            10,
            0.21,
            decode=SHORT_GRID,
            ttft=TTFT,
            prefill=True,
            base="llama-3.1-8b",
            args=("--kv-cache-dtype", "fp8"),
        ),
        Model(  # a block-FP8 MoE (128 experts, 8 a token) cut to 6 of its 94 layers
            "qwen3-235b-a22b-fp8",
            "fit",
            3,
            0.18,
            layers=6,
            decode=SHORT_GRID,
            ttft=TTFT,
            prefill=True,
            base="qwen3-235b-a22b",
            quantization=BLOCK_FP8,
        ),
    ),
    # The per-tensor FP8 GEMMs at a larger width than 8B's (hidden 16,384, intermediate 53,248):
    # Llama-3.1-405B's config cut to 4 of its 126 layers. Weights + pool: 21 + 2 GiB.
    "fp8-wide": (
        Model(
            "llama-3.1-405b-fp8-modelopt",
            "fit",
            2,
            0.2,
            layers=4,
            decode=SHORT_GRID,
            ttft=TTFT,
            prefill=True,
            base="llama-3.1-405b",
            quant_file=MODELOPT_FP8,
        ),
    ),
}


def config(model: Model) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / f"{model.base or model.name}.json").read_text())
    if model.quantization:
        data["quantization_config"] = model.quantization
    if model.layers:
        data["num_hidden_layers"] = model.layers
        if "layer_types" in data:
            data["layer_types"] = data["layer_types"][: model.layers]
    data.pop("num_nextn_predict_layers", None)
    return data


def engine(model: Model, index: int, folder: Path) -> local.Process:
    port = FIRST_PORT + index
    argv = ["vllm", "serve", str(folder), "--host", local.LOOPBACK, "--port", str(port)]
    argv += ["--served-model-name", model.name, "--load-format", "dummy"]
    argv += ["--max-model-len", str(MAX_MODEL_LEN)]
    argv += ["--gpu-memory-utilization", str(model.utilization)]
    argv += ["--kv-cache-memory-bytes", str(int(model.kv_gib * GIB)), *model.args]
    env = {"PYTHONHASHSEED": "123", **dict(model.env)}
    return local.Process(model.name, "both", argv, env, port)


async def _stream(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> list[float]:
    """perf_counter times of the streamed tokens (the send time first)."""
    times = [time.perf_counter()]
    async with client.stream("POST", f"{url}/v1/completions", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                if json.loads(line[6:]).get("choices"):
                    times.append(time.perf_counter())
    return times


async def _decode(url: str, model: str, context: int, batch: int, vocab: int) -> dict[str, Any]:
    rng = random.Random(f"decode:{model}:{context}:{batch}")
    prompts = [model_dir.prompt(rng, context, vocab) for _ in range(batch)]
    limits = httpx.Limits(max_connections=batch + 4)
    async with httpx.AsyncClient(timeout=900, limits=limits) as client:
        runs = await asyncio.gather(
            *(
                _stream(
                    client,
                    url,
                    {
                        "model": model,
                        "prompt": p,
                        "max_tokens": DECODE_OUTPUT,
                        "ignore_eos": True,
                        "temperature": 0,
                        "stream": True,
                    },
                )
                for p in prompts
            )
        )
    all_started = max(times[1] for times in runs)
    first_done = min(times[-1] for times in runs)
    gaps = [
        later - earlier
        for times in runs
        for earlier, later in zip(times[1:], times[2:], strict=False)
        if earlier >= all_started and later <= first_done
    ]
    window = first_done - all_started
    return {
        "context": context,
        "batch": batch,
        "output": DECODE_OUTPUT,
        "steady_gaps": len(gaps),
        "step_ms": round(statistics.median(gaps) * 1e3, 3) if gaps else None,
        "window_s": round(window, 3),
        "mean_step_ms": mean_step_ms(window, batch, len(gaps)),
    }


def mean_step_ms(window_s: float, batch: int, gaps: int) -> float | None:
    """The decode step: the window over the steps each request took in it. The median gap is
    not the step at large batches: the client receives a step's tokens in bursts (at 64
    sequences half the gaps are near 0 and the median lands on the longer ones)."""
    return round(window_s * batch / gaps * 1e3, 3) if gaps else None


def _ttft(url: str, model: str, tokens: int, vocab: int) -> dict[str, Any]:
    load = measure.Load(tokens, 2, 1, TTFT_REQUESTS)
    result = measure.run(url, model, load, vocab, f"ttft:{model}")
    return {"tokens": tokens, "ttft": result["ttft"], "errors": result["errors"]}


def measure_one(model: Model, process: local.Process, vocab: int) -> dict[str, Any]:
    url = process.url
    run.warm_up(url, model.name, vocab)
    part: dict[str, Any] = {}
    part["ttft"] = [_ttft(url, model.name, n, vocab) for n in model.ttft]
    part["decode"] = [asyncio.run(_decode(url, model.name, c, b, vocab)) for c, b in model.decode]
    if model.prefill:
        part["prefill"] = measure.run(url, model.name, run.ALONE_PREFILL, vocab, "prefill")
    return part


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wave", choices=sorted(WAVES), required=True)
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--startup-timeout", type=float, default=480.0)
    parser.add_argument("--only", action="append", default=[], help="a model of the wave (repeat)")
    args = parser.parse_args()
    models = tuple(m for m in WAVES[args.wave] if not args.only or m.name in args.only)
    if not models:
        parser.error(f"--only: none of {args.only} is in wave {args.wave}")
    work = Path(tempfile.mkdtemp(prefix=f"accuracy-{args.wave}-"))
    processes = run.Processes(work)
    record: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "wave": args.wave,
        "versions": run.versions(),
        "gpu": run.gpu(),
        "max_model_len": MAX_MODEL_LEN,
        "models": {},
    }
    engines = []
    for index, model in enumerate(models):
        folder, source = work / model.name, work / f"{model.name}.source"
        source.mkdir()
        config_file = source / "config.json"
        data = config(model)
        config_file.write_text(json.dumps(data))
        if model.quant_file:
            shutil.copyfile(model.quant_file, source / QUANT_FILE)
        model_dir.make(config_file, folder)
        process = engine(model, index, folder)
        engines.append((model, process, int(data["vocab_size"])))
        record["models"][model.name] = {
            "use": model.use,
            "layers": model.layers,
            "config": model.base or model.name,
            "quantization": model.quantization or (model.quant_file and model.quant_file.name),
            "kv_cache_bytes": int(model.kv_gib * GIB),
            "argv": process.argv,
        }
    started = processes.start_all([p for _, p, _ in engines], args.startup_timeout)
    print(f"started: {started}", flush=True)
    try:
        for model, process, vocab in engines:
            entry = record["models"][model.name]
            entry["started"] = started[process.name]
            if started[process.name] is None:
                try:
                    entry.update(measure_one(model, process, vocab))
                    if "prefill" in entry:
                        steady.attach(entry, record["gpu"])
                except Exception as error:  # a run on the GPU host goes on with the next model
                    entry["error"] = f"{type(error).__name__}: {error}"
            entry["log"] = processes.kept_lines(process)
            entry["kv_pool"] = run.kv_pool(entry["log"])
            if "tokens" in entry["kv_pool"]:
                entry["kv_tokens"] = int(entry["kv_pool"]["tokens"].replace(",", ""))
            args.record.write_text(json.dumps(record, indent=1))
            print(f"measured {model.name}", flush=True)
    finally:
        processes.stop()
        args.record.write_text(json.dumps(record, indent=1))
        print(f"wrote {args.record}; engine logs in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
