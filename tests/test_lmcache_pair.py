"""The LMCache pair's plan (benchmarks/real_engines/lmcache_pair.py), from the real render of
tutorial 19's values: the engines as `pdctl up` plans them, LMCache's PD proxy wired to them on
loopback, every change from the render listed; and the counters it reads around a load."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from benchmarks.real_engines import lmcache_pair, run
from pdctl.local import layout as local
from tests.doubles import start_order


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    lmcache_pair.plan_command(argparse.Namespace(values=lmcache_pair.CURRENT, out=out))
    return dict(json.loads(out.read_text()))


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_the_proxy_reaches_the_planned_engines_on_loopback(plan: dict[str, Any]) -> None:
    engines = {e["role"]: e for e in plan["engines"]}
    proxy = plan["router"]["argv"]
    assert proxy[:2] == ["python3", str(lmcache_pair.PROXY_SCRIPT)]
    assert _flag(proxy, "--prefiller-port") == str(engines["prefill"]["port"])
    assert _flag(proxy, "--decoder-port") == str(engines["decode"]["port"])
    for flag in ("--host", "--prefiller-host", "--decoder-host", "--proxy-host"):
        assert _flag(proxy, flag) == local.LOOPBACK
    assert _flag(proxy, "--port") == str(plan["router"]["port"])
    assert _flag(proxy, "--model") == str(run.MODEL_DIR)
    # Rendered for the LMCache release whose script runs (0.4.4 and later size a semaphore over
    # the decoder's PD buffer): that buffer, LMCache's chunk size.
    assert plan["set"] == [f"routerSpec.lmcacheProxy.lmcacheVersion={lmcache_pair.LMCACHE_VERSION}"]
    assert _flag(proxy, "--pd-buffer-size") == engines["decode"]["env"]["LMCACHE_PD_BUFFER_SIZE"]
    assert _flag(proxy, "--chunk-size") == "256" and proxy.count("--model") == 1
    sender, receiver = engines["prefill"]["env"], engines["decode"]["env"]
    assert sender["LMCACHE_PD_PROXY_HOST"] == local.LOOPBACK
    assert sender["LMCACHE_PD_PROXY_PORT"] == _flag(proxy, "--proxy-port")
    assert receiver["LMCACHE_PD_PEER_HOST"] == local.LOOPBACK
    assert receiver["LMCACHE_PD_PEER_INIT_PORT"] == _flag(proxy, "--decoder-init-port")
    assert all(e["argv"][0] == "vllm" for e in plan["engines"])


def test_every_change_from_the_render_is_listed(plan: dict[str, Any]) -> None:
    changes = "\n".join(plan["changes"])
    for said in (
        "--model meta-llama/Llama-3.1-8B-Instruct -> ",
        "LMCACHE_PD_PROXY_HOST",
        "/opt/venv/bin/vllm -> vllm",
        "dummy",
    ):
        assert said in changes
    assert "vllm-router" not in changes and "static mode" not in changes
    assert "stand-in" not in changes  # the real proxy plays the router here


def test_the_tutorial_form_env_is_kept_for_the_forms_check(plan: dict[str, Any]) -> None:
    env = plan["tutorial_form"]["env"]
    assert {e["LMCACHE_NIXL_ROLE"] for e in env.values()} == {"sender", "receiver"}
    assert all("LMCACHE_ENABLE_PD" in e for e in plan["current_form_env"].values())


def test_delta_keeps_the_pd_counters_that_moved() -> None:
    external = 'vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}'
    before = f"{external} 10.0\nlmcache:num_lookup_hits_total 5.0\nvllm:other 1.0\n"
    after = f"{external} 2058.0\nlmcache:num_lookup_hits_total 5.0\nvllm:other 9.0\n"
    assert lmcache_pair._delta(before, after) == {external: 2048.0}


RECORDS = Path(__file__).resolve().parent.parent / "benchmarks" / "records"


def _kept(name: str) -> str:
    return (RECORDS / f"lmcache-h200-1gpu-metrics-{name}.txt").read_text()


def test_lmcache_kv_rates_from_the_real_senders_kept_scrapes() -> None:
    """The H200 run's prefill (sender) pages: 605 tokens stored in 2 stores, 0.0299 s of put time;
    Llama-3.1-8B's 131,072 KV bytes a token: 79.3 MB, 2.65 GB/s a store; over 10 s of load, 7.9
    MB/s sustained."""
    kv = lmcache_pair.lmcache_kv(_kept("prefill-before"), _kept("prefill"), 131_072, 10.0)
    assert kv["exported"] and kv["stored_tokens"] == 605 and kv["stores"] == 2
    assert kv["bytes"] == 605 * 131_072
    assert kv["per_store_gbps"] == 2.649 and kv["store_gbps"] == 2.099
    assert kv["sustained_gbps"] == 0.008


def test_lmcache_kv_says_when_lmcaches_metrics_are_not_exported() -> None:
    page = _kept("decode-as-rendered")
    assert "lmcache:" not in page
    assert lmcache_pair.lmcache_kv(page, page, 131_072, 1.0) == {"exported": False}


def test_kv_bytes_per_token_of_the_served_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the model folder's config.json (Llama-3.1-8B: 32 layers, 8 KV heads of 128, bf16)."""
    (tmp_path / "config.json").write_text(run.DEFAULT_CONFIG.read_text())
    monkeypatch.setattr(run, "MODEL_DIR", tmp_path)
    assert lmcache_pair.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2


def test_bench_goes_through_the_proxy_as_the_bench_phase_asks(tmp_path: Path) -> None:
    argv = lmcache_pair.bench_argv(["--url", "http://r"], "m", tmp_path / "d.jsonl", "4")
    assert argv[:3] == ["bench", "--url", "http://r"]
    for flag, value in (
        ("--concurrency", "4"),
        ("--requests", str(run.BENCH_REQUESTS)),
        ("--output-len", str(run.BENCH_OUTPUT)),
        ("--connector", "LMCacheConnectorV1"),
        ("-o", "json"),
    ):
        assert _flag(argv, flag) == value
    assert run.BENCH_PROMPT == 2048 and run.BENCH_OUTPUT == 128


def test_the_engines_count_lmcaches_metrics_in_folders_of_their_own(
    plan: dict[str, Any], tmp_path: Path
) -> None:
    """The chart renders PROMETHEUS_MULTIPROC_DIR on LMCache engines (without it vLLM's /metrics
    has none of LMCache's); `run` gives each engine a folder of its own, as pdctl up does."""
    from pdctl.local import multiproc

    engines = [local.Process(**e) for e in plan["engines"]]
    assert all(e.env[multiproc.ENV] == "/tmp/prometheus" for e in engines)
    multiproc.own_folders(engines, tmp_path)
    assert len({e.env[multiproc.ENV] for e in engines}) == len(engines) == 2


def test_the_script_answers_help_on_cpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["lmcache_pair.py", "--help"])
    with pytest.raises(SystemExit) as exited:
        lmcache_pair.main()
    printed = capsys.readouterr().out
    assert exited.value.code == 0
    assert all(word in printed for word in ("plan", "forms", "run"))
    assert Path(lmcache_pair.PROXY_SCRIPT).name == "disagg_proxy_server.py"


def test_a_stalled_bench_step_ends_the_steps_and_every_result_is_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 2026-12-04 lease: the pair stopped answering in the first step and the lease ended
    before the record was written. Each pdctl result is written at once; a step with no end stops
    the later ones. pdctl itself is replaced by a test double (`sleep`) that never answers."""
    (tmp_path / "config.json").write_text(run.DEFAULT_CONFIG.read_text())
    monkeypatch.setattr(run, "MODEL_DIR", tmp_path)
    monkeypatch.setattr(run, "PDCTL", ["sh", "-c", "sleep 5", "pdctl"])
    monkeypatch.setattr(lmcache_pair, "BENCH_STEP_LIMIT_S", 0.1)
    monkeypatch.setattr(lmcache_pair, "_scrape", lambda url: "")
    steps = lmcache_pair.bench_steps(["--url", "http://r"], "m", "http://s", tmp_path / "bench")
    assert [s["exit_code"] for s in steps] == [None]
    kept = json.loads((tmp_path / "bench-1.result.json").read_text())
    assert kept["error"].startswith("no end in") and kept["argv"][0] == "bench"


def test_a_variant_carries_env_and_engine_flags() -> None:
    name, env, flags = lmcache_pair.parse_variant(
        "v1:UCX_TLS=cuda_ipc,cuda_copy,tcp;VLLM_USE_V2_MODEL_RUNNER=0;--no-async-scheduling"
    )
    assert name == "v1"
    assert env == {"UCX_TLS": "cuda_ipc,cuda_copy,tcp", "VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert flags == ["--no-async-scheduling"]
    assert lmcache_pair.parse_variant("as-rendered:") == ("as-rendered", {}, [])


def test_a_sender_that_dies_in_a_step_ends_the_steps_with_what_was_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 2026-12-04 lease at 16 in flight: the prefill engine died mid-step and the scrape after
    it raised, losing the record and the next variant. pdctl is a test double (`true`)."""
    (tmp_path / "config.json").write_text(run.DEFAULT_CONFIG.read_text())
    monkeypatch.setattr(run, "MODEL_DIR", tmp_path)
    monkeypatch.setattr(run, "PDCTL", ["true"])
    scrapes = iter(["", "", ""])

    def scrape(url: str) -> str:
        try:
            return next(scrapes)
        except StopIteration:
            raise OSError("Connection refused") from None

    monkeypatch.setattr(lmcache_pair, "_scrape", scrape)
    steps = lmcache_pair.bench_steps(["--url", "http://r"], "m", "http://s", tmp_path / "bench")
    assert [s["exit_code"] for s in steps] == [0, 0]
    assert steps[0]["lmcache_kv"] == {"exported": False}
    assert "Connection refused" in steps[1]["lmcache_kv"]["error"]


def test_the_planned_pair_shares_gpu_0_so_decode_starts_after_prefill(plan: dict[str, Any]) -> None:
    engines = [local.Process(**e) for e in plan["engines"]]
    assert [[e.role for e in wave] for wave in local.start_waves(engines)] == [
        ["prefill"],
        ["decode"],
    ]


def test_a_variant_launches_decode_once_prefill_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """variant() on stand-in engines and proxy (tests/doubles/start_order.py, not vLLM or
    LMCache) on GPU 0, as planned: the 2026-12-04 H200 starts of both at once ended with "No
    available memory for the cache blocks". The first scrape after the start ends the variant."""
    prefill = start_order.engine("prefill", "prefill", tmp_path, "0")
    decode = start_order.engine("decode", "decode", tmp_path, "0")
    proxy = start_order.engine(local.ROUTER, local.ROUTER, tmp_path)
    for engine in (prefill, decode):
        engine.argv += ["--served-model-name", "m"]
    order = start_order.StartOrder(monkeypatch, [prefill, decode, proxy])

    def scrape(url: str) -> str:
        raise OSError("the start is all this test is about")

    monkeypatch.setattr(lmcache_pair, "_scrape", scrape)
    plan = {"engines": [asdict(prefill), asdict(decode)], "router": asdict(proxy)}
    part = lmcache_pair.variant(plan, "v", {}, tmp_path, 60)
    assert part["failed"] == "the start is all this test is about"
    assert order.events == [
        "launch prefill",
        "ready prefill",
        "launch decode",
        "ready decode",
        f"launch {local.ROUTER}",
        f"ready {local.ROUTER}",
    ]
