"""Measurements-catalog entries (pdctl/models/catalog/measurements.yaml) from an accuracy.py
record: one entry per figure, `use` as the record says it was decided before the run.

    python -m benchmarks.real_engines.accuracy_catalog benchmarks/records/REC.json >> entries.yaml

The printed YAML is pasted under `measurements:`; `miss` texts are written by hand after the
fit (docs/sizing.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from pdctl.models.quantization import QUANT_FILE

CATALOG_MODEL = {  # fixture name -> model catalog entry with its architecture
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B-Instruct",
    "llama-3.1-405b": "meta-llama/Llama-3.1-405B-Instruct",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "mistral-7b-v0.1": "mistralai/Mistral-7B-v0.1",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
}
HARNESS = "benchmarks/real_engines/accuracy.py"


def _served(model: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """What ran beside the config.json, in words, and the entry's dtype keys. The record's
    `quantization`: a quantization_config, or the name of the ModelOpt file beside config.json
    (QUANT_FILE), whose FP8 KV cache --kv-cache-dtype auto uses."""
    quant, argv = model.get("quantization"), model.get("argv", [])
    kv_fp8 = "--kv-cache-dtype" in argv and argv[argv.index("--kv-cache-dtype") + 1] == "fp8"
    keys, words = {}, ""
    if quant == QUANT_FILE:
        keys, words = {"weightDtype": "fp8"}, ", ModelOpt FP8 (per tensor, FP8 KV cache)"
        kv_fp8 = True
    elif isinstance(quant, dict):
        block = quant.get("weight_block_size")
        keys, words = {"weightDtype": "fp8"}, f", FP8 in blocks of {block}"
    if kv_fp8:
        keys["kvCacheDtype"] = "fp8"
        words += ", --kv-cache-dtype fp8" if quant != QUANT_FILE else ""
    return words, keys


def _base(record: dict[str, Any], url: str, name: str, model: dict[str, Any]) -> dict[str, Any]:
    layers = model.get("layers")
    cut = f", cut to {layers} layers" if layers else ""
    pool = model["kv_cache_bytes"] / 2**30
    catalog_model = CATALOG_MODEL[model.get("config") or name]
    words, keys = _served(model)
    entry: dict[str, Any] = {
        "use": model["use"],
        "source": {
            "title": f"pd-stack planner accuracy run on one H200 ({HARNESS}, "
            f"wave {record['wave']})",
            "url": url,
            "date": record["date"],
            "publisher": "pd-stack",
        },
        "engine": f"vLLM {record['versions']['vllm']} (torch {record['versions']['torch']}, one "
        f"engine alone, --kv-cache-memory-bytes {pool:g} GiB)",
        "servedModel": f"{catalog_model.split('/')[-1]}'s config.json{cut}{words}, "
        "--load-format dummy",
        "model": catalog_model,
        **keys,
    }
    if layers:
        entry["layers"] = layers
    entry.update({"gpu": "H200", "tp": 1})
    return entry


def entries(record: dict[str, Any], url: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, model in record["models"].items():
        if model.get("started") is not None:
            continue
        stem = f"pdstack-h200-{name}" + (f"-{model['layers']}l" if model.get("layers") else "")
        where = f'record models["{name}"]'
        tokens = model["kv_tokens"]
        found[f"{stem}-kv"] = {
            **_base(record, url, name, model),
            "inputLen": 1,
            "outputLen": 1,
            "concurrency": 1,
            "kvCacheBytes": model["kv_cache_bytes"],
            "maxModelLen": record["max_model_len"],
            "harness": f'{HARNESS}: the engine\'s start-up log line "GPU KV cache size: N tokens" '
            "for its fixed pool",
            "measured": {"kvTokens": tokens},
            "published": f"{where}.kv_tokens: {tokens}",
        }
        for ttft in model.get("ttft", []):
            n = ttft["tokens"]
            found[f"{stem}-single-{n}"] = {
                **_base(record, url, name, model),
                "inputLen": n,
                "outputLen": 2,
                "concurrency": 1,
                "harness": f"{HARNESS}: 3 streamed requests one at a time (each a random {n}-token "
                "prompt, 2 tokens out) to the engine alone; p50 time to the first token",
                "measured": {"ttftMs": ttft["ttft"]["p50_ms"]},
                "published": f"{where}.ttft[tokens={n}]: ttft p50 {ttft['ttft']['p50_ms']} ms",
            }
        for d in model.get("decode", []):
            c, b, out = d["context"], d["batch"], d["output"]
            found[f"{stem}-decode-c{c}-b{b}"] = {
                **_base(record, url, name, model),
                "inputLen": c,
                "outputLen": out,
                "concurrency": b,
                "harness": f"{HARNESS}: {b} streamed requests at once (random {c}-token prompts, "
                f"{out} tokens each, ignore_eos); the step: the window in which every request "
                "decodes (after the last first token, before the first request ends) over the "
                "steps each request took in it",
                "measured": {"tpotMs": d["mean_step_ms"]},
                "published": f"{where}.decode[context={c}, batch={b}]: mean_step_ms "
                f"{d['mean_step_ms']} (window {d['window_s']} s, {d['steady_gaps']} gaps)",
            }
        if "prefill" in model:
            steady = "-steady" if model.get("steady_prefill", {}).get("fits") else ""
            found[f"{stem}-prefill-2048{steady}"] = _prefill(record, url, name, model, where)
    return found


def _prefill(
    record: dict[str, Any], url: str, name: str, model: dict[str, Any], where: str
) -> dict[str, Any]:
    """The 2,048-token prefill series: its steady rate where benchmarks/real_engines/steady.py's
    closed-loop model describes the run (a one-off start delay taken out), else the recorded rate
    (tokens over the series' wall time)."""
    steady = model.get("steady_prefill", {})
    if steady.get("fits"):
        rate, how = steady["prompt_tokens_per_s"], "steady_prefill: prompt_tokens_per_s"
        harness = "the steady rate that benchmarks/real_engines/steady.py separates from a "
        harness += "one-off start delay"
    else:
        rate, how = model["prefill"]["prompt_tokens_per_s"], "prefill: prompt_tokens_per_s"
        harness = "the recorded rate (steady.py's closed-loop model does not describe this run)"
    return {
        **_base(record, url, name, model),
        "inputLen": 2048,
        "outputLen": 1,
        "concurrency": 32,
        "harness": f"{HARNESS} (run.ALONE_PREFILL): 96 streamed random 2,048-token prompts, 1 "
        f"token out, 32 in flight; {harness}",
        "measured": {"prefillTokensPerS": rate},
        "published": f"{where}.{how} {rate}",
    }


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    record = json.loads(path.read_text())
    text = yaml.safe_dump(entries(record, str(path)), sort_keys=False, width=100)
    print("\n".join("  " + line if line else line for line in text.splitlines()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
