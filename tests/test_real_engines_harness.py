"""The real-engine harness's parts that need no GPU (benchmarks/real_engines): the generated model
folder, the timed load (against the engine TEST DOUBLE, not vLLM), the KV arithmetic from the
decode's histograms, and the kept record of the GPU run (benchmarks/records)."""

from __future__ import annotations

import json
import random
import socket
import sys
from pathlib import Path
from typing import Any

import jinja2
import pytest

from benchmarks.real_engines import measure, model_dir, models, run
from pdctl.local import layout as local
from pdctl.models import catalog
from pdctl.models.config import from_hf_config
from pdctl.models.memory import weight_bytes
from pdctl.verify import judge
from tests.doubles import start_order
from tests.doubles.vllm_engine import Behaviour, KvRegistry, VllmEngineDouble

CONFIG = Path("tests/fixtures/configs/llama-3.1-8b.json")
RECORDS = Path("benchmarks/records")


def test_the_model_folder_has_the_real_config_and_a_token_per_word(tmp_path: Path) -> None:
    folder = model_dir.make(CONFIG, tmp_path / "model")
    assert json.loads((folder / "config.json").read_text()) == json.loads(CONFIG.read_text())
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    assert tokenizer["model"]["type"] == "WordLevel" and len(vocab) == 128256
    assert sorted(vocab.values()) == list(range(128256))
    assert tokenizer["pre_tokenizer"] == {"type": "WhitespaceSplit"}
    prompt = model_dir.prompt(random.Random(0), 2048, 128256)
    assert len(prompt.split()) == 2048 and all(word in vocab for word in prompt.split())
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    assert settings["tokenizer_class"] == "PreTrainedTokenizerFast"
    messages = [{"role": "user", "content": "w1 w2"}, {"role": "user", "content": "w3"}]
    rendered = jinja2.Template(settings["chat_template"]).render(messages=messages)
    assert rendered.split() == ["w1", "w2", "w3"]  # chat requests work (verify sends one)


def test_no_two_series_or_loads_share_prompts() -> None:
    loads = [*run.PD_LOADS, *run.PD_SIZES, run.ALONE_PREFILL]
    seeds = {measure.seed(series, load) for series in ("ttft", "by-size") for load in loads}
    assert len(seeds) == 2 * len(loads)
    assert measure.seed("ttft", run.PD_LOADS[0]) == measure.seed("ttft", run.PD_LOADS[0])


def test_summary_arithmetic() -> None:
    load = measure.Load(prompt_len=100, output_len=4, concurrency=2, requests=3)
    timings = [
        measure.Timing(ttft=0.1, gaps=[0.01] * 3),
        measure.Timing(ttft=0.3, gaps=[0.02] * 3),
        measure.Timing(error="HTTP 500"),
    ]
    summary = measure.summarize(timings, wall=2.0, load=load)
    assert summary["served"] == 2 and summary["errors"] == ["HTTP 500"]
    assert summary["prompt_tokens_per_s"] == 100.0  # 2 x 100 tokens in 2 s
    assert summary["output_tokens_per_s"] == 4.0
    assert summary["ttft"]["p50_ms"] == 300.0 and summary["ttft"]["mean_ms"] == 200.0
    assert summary["itl"] == {}  # every gap is inside the first WARM_GAPS


def test_timed_load_against_the_engine_double() -> None:
    """TEST DOUBLE: delays injected into the double are lower bounds of what is measured."""
    behaviour = Behaviour(first_token_delay=0.03, inter_token_delay=0.004)
    engine = VllmEngineDouble("alone", KvRegistry(), behaviour=behaviour).up()
    try:
        load = measure.Load(prompt_len=64, output_len=12, concurrency=2, requests=4)
        summary = measure.run(engine.url, engine.model, load, 1000, "test")
    finally:
        engine.down()
    assert summary["served"] == 4 and not summary["errors"]
    assert summary["ttft"]["p50_ms"] >= 30 and summary["itl"]["p50_ms"] >= 4
    prompts = [r.body["prompt"] for r in engine.generation_requests()]
    assert len(set(prompts)) == 4 and all(len(p.split()) == 64 for p in prompts)
    assert all(
        r.body["max_tokens"] == 12 and r.body["ignore_eos"] for r in engine.generation_requests()
    )


def _page(bytes_sum: float, seconds_sum: float, count: int) -> judge.Scrape:
    lines = []
    for name, total in (
        ("nixl_bytes_transferred", bytes_sum),
        ("nixl_xfer_time_seconds", seconds_sum),
    ):
        lines += [f"# TYPE vllm:{name} histogram", f"vllm:{name}_sum {total}"]
        lines.append(f"vllm:{name}_count {count}")
    return judge.parse("\n".join(lines))


def test_kv_moved_is_the_difference_of_the_decode_histograms() -> None:
    moved = run.kv_moved(_page(1e9, 1.0, 2), _page(3e9, 5.0, 6))
    assert moved["bytes"] == 2e9 and moved["seconds"] == 4.0
    assert moved["gbps"] == 0.5 and moved["ms_per_transfer"] == 1000.0
    assert run.kv_moved(judge.parse(""), judge.parse("")) == {}


def test_render_difference_names_the_words_that_differ() -> None:
    def layout(role: str) -> local.Layout:
        engine = local.Process("p", "prefill", ["vllm", "serve", f"--kv-role={role}"], {}, 1)
        return local.Layout([engine], None)

    assert run.render_difference(layout("kv_producer"), layout("kv_producer")) == {}
    different = run.render_difference(layout("kv_producer"), layout("kv_both"))
    assert different == {"p": [["--kv-role=kv_producer"], ["--kv-role=kv_both"]]}


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    return json.loads((RECORDS / "real-engines-h200-1gpu.json").read_text())


def test_the_kept_gpu_record_proved_pd_and_reported_the_bandwidth(record: dict[str, Any]) -> None:
    """The record of the GPU run (benchmarks/real_engines/README.md): kept, so what docs and the
    measurements catalog cite from it stays checkable."""
    assert record["versions"]["vllm"] == "0.26.0" and "H200" in record["gpu"]
    pair = record["pair"]
    assert pair["verify_exit_code"] == 0
    checks = {c["id"]: c for c in pair["verify"]["checks"]}
    assert all(
        checks[name]["status"] == "pass" for name in ("pd-prefill", "pd-decode", "pd-kv-transfer")
    )
    bandwidth = checks["pd-kv-bandwidth"]
    assert bandwidth["status"] == "warn" and bandwidth["evidence"]["gbps"] < 1.25
    assert pair["deprecation_warnings"] == []  # kv_producer / kv_consumer: no kv_both warning
    argv = record["alone"]["argv"]
    assert json.loads(argv[argv.index("--kv-transfer-config") + 1])["kv_role"] == "kv_producer"
    assert any("tcp/lo" in line for line in pair["ucx"])


def test_the_moe_and_mla_models_are_reduced_and_fit_one_gpu_together() -> None:
    """models.py: each reduced config is one pdctl reads as MoE (and DeepSeek's as MLA), with the
    layers kept; together the weights fit one H200 beside their fixed KV caches."""
    h200 = catalog.gpu("H200").memory_gib * 1024**3
    total = 0.0
    for model in models.MODELS:
        config = models.reduced_config(model)
        arch = from_hf_config(config, model.name)
        assert arch.layers == model.layers and arch.moe is not None
        assert (arch.mla is not None) == (model.name == "deepseek-v3")
        weights = weight_bytes(arch)
        total += weights + models.KV_CACHE_BYTES
        assert weights < model.utilization * h200  # vLLM's start-up check reads utilization
    assert total < 0.8 * h200  # the rest: activations, CUDA graphs, four CUDA contexts
    argv = models.engine(models.MODELS[0], 2, Path("/m")).argv
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == str(models.KV_CACHE_BYTES)
    assert "--kv-transfer-config" not in argv


def test_start_all_reports_each_process(tmp_path: Path) -> None:
    """Processes.start_all on two stand-in processes (plain Python, not vLLM): one answers
    /health, one exits; the second's failure is kept and the first goes on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "health").write_text("ok")
    server = (
        "import functools, http.server as h; "
        f"handler = functools.partial(h.SimpleHTTPRequestHandler, directory={str(tmp_path)!r}); "
        f"h.HTTPServer(('127.0.0.1', {port}), handler).serve_forever()"
    )
    good = local.Process("good", "both", [sys.executable, "-c", server], {}, port)
    bad = local.Process("bad", "both", [sys.executable, "-c", "raise SystemExit(3)"], {}, port + 1)
    processes = run.Processes(tmp_path)
    try:
        started = processes.start_all([good, bad], timeout=30)
    finally:
        processes.stop()
    assert started["good"] is None
    assert started["bad"] is not None and "exited with 3" in started["bad"]


@pytest.mark.parametrize("start", ["start_engines", "start_all"])
def test_the_harness_starts_engines_on_one_gpu_as_pdctl_up_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], start: str
) -> None:
    """Processes.start_engines (the pair) and start_all (models.py, accuracy.py) on stand-in
    engines (tests/doubles/start_order.py, not vLLM) on GPU 0: the second is launched once the
    first is ready, and why is said."""
    first = start_order.engine("first", "prefill", tmp_path, "0")
    second = start_order.engine("second", "decode", tmp_path, "0")
    order = start_order.StartOrder(monkeypatch, [first, second])
    processes = run.Processes(tmp_path / "logs")
    try:
        if start == "start_engines":
            processes.start_engines([first, second], 60, {})
        else:
            assert processes.start_all([first, second], 60) == {"first": None, "second": None}
    finally:
        processes.stop()
    assert order.events == ["launch first", "ready first", "launch second", "ready second"]
    assert "second waits for first (same GPU 0)" in capsys.readouterr().out


def test_the_warm_up_runs_the_prefill_shape_before_it_is_timed() -> None:
    """The 2026-12-02 MoE prefill figures were taken while Triton compiled the fused-MoE kernels
    for the prefill batch (the warm-up had only short prompts): the warm-up now sends the prefill
    load's own shape, with prompts of its own series (no prefix-cache hits on the timed ones)."""
    timed = run.ALONE_PREFILL
    assert any(
        w.prompt_len == timed.prompt_len and w.concurrency == timed.concurrency for w in run.WARM_UP
    )
    assert all(measure.seed("warm-up", w) != measure.seed("prefill", timed) for w in run.WARM_UP)


def test_the_model_folder_keeps_a_modelopt_quantization_file(tmp_path: Path) -> None:
    checkpoint = Path("tests/fixtures/checkpoints/llama-3.1-70b-instruct-fp8")
    folder = model_dir.make(checkpoint / "config.json", tmp_path / "model")
    copied = folder / "hf_quant_config.json"
    assert copied.read_bytes() == (checkpoint / "hf_quant_config.json").read_bytes()
