"""pdctl bench: the arithmetic on synthetic timings (exact), and runs against the REAL
vllm-router 0.1.17 in PD mode in front of engine test doubles (tests/doubles/vllm_engine.py,
not vLLM) with injected delays. Timed assertions are lower bounds only, those that follow from
causality (the injection), never upper bounds: this machine's speed is not under test."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl import defaults
from pdctl.bench import dataset
from pdctl.bench import report as files
from pdctl.bench.dataset import Entry
from pdctl.bench.gauges import Sampler
from pdctl.bench.run import run
from pdctl.bench.summary import meets_slo, summarize
from pdctl.bench.workload import (
    BenchSettings,
    DatasetRequests,
    Prompts,
    parse_concurrency,
    parse_rate,
)
from pdctl.cli.app import app
from pdctl.errors import InputError, UsageError
from pdctl.plan.queueing import output_lengths
from pdctl.verify import judge
from pdctl.verify.report import Endpoint
from pdctl.verify.timing import Timed
from tests.doubles.router_stack import Stack, pd_stack
from tests.doubles.vllm_engine import Behaviour

runner = CliRunner()
# What the engine doubles' /v1/models says serves them (they answer as the simulator does).
ENGINES = "the pd-stack simulator (not vLLM)"
PREFILL_DELAY, DECODE_FIRST, DECODE_GAP = 0.05, 0.03, 0.01
OUTPUT = 6


def _timed(ttft: float, gaps: list[float], tokens: int = 3) -> Timed:
    return Timed(
        None, ttft_ms=ttft, e2e_ms=ttft + sum(gaps), gaps_ms=gaps, completion_tokens=tokens
    )


# ---- arithmetic ------------------------------------------------------------------------------


def test_percentiles_throughput_and_goodput_are_exact() -> None:
    timed = [_timed(t, [10.0, 20.0]) for t in (100.0, 200.0, 300.0, 400.0, 500.0)]
    timed.append(Timed("HTTP 500: boom"))
    workload = BenchSettings(concurrency=(2,), slo_ttft_ms=300.0, slo_itl_ms=15.0)
    step = summarize(2, timed, 2.0, workload)
    assert (step["requests"], step["succeeded"], step["errors"]) == (6, 5, 1)
    assert step["error_samples"] == ["1 x HTTP 500: boom"]
    assert step["ttft_ms"] == {
        "mean": 300.0, "p50": 300.0, "p90": 460.0, "p99": 496.0, "min": 100.0, "max": 500.0, "n": 5
    }  # fmt: skip
    assert step["itl_ms"]["p50"] == 15.0 and step["itl_ms"]["n"] == 10
    # each request's first gap alone: where LMCache's proxy puts the KV transfer
    assert step["first_gap_ms"]["max"] == 10.0 and step["first_gap_ms"]["n"] == 5
    assert step["request_throughput"] == 2.5 and step["output_token_throughput"] == 7.5
    # each request's mean ITL is 15 ms (meets 15); TTFT 100, 200 and 300 meet 300 ms
    assert step["good_requests"] == 3 and step["goodput"] == 1.5
    assert step["slo_met"] is False  # 3 of 6 < 90%


def test_slo_per_request() -> None:
    assert meets_slo(_timed(100.0, [5.0, 30.0]), 100.0, 17.5)
    assert not meets_slo(_timed(100.0, [5.0, 31.0]), None, 17.5)
    assert not meets_slo(_timed(101.0, []), 100.0, None)
    assert meets_slo(_timed(50.0, []), None, 1.0)  # one chunk: no gap to judge
    assert not meets_slo(Timed("failed"), None, None)


def test_gauges_sum_queues_over_a_role_and_average_kv_usage() -> None:
    engines = [Endpoint(n, "decode", f"http://{n}") for n in ("d0", "d1")]
    engines.append(Endpoint("p0", "prefill", "http://p0"))
    sampler = Sampler(engines, "m")

    def page(waiting: float, usage: float) -> judge.Scrape:
        labels = 'model_name="m"'
        return judge.parse(
            f"vllm:num_requests_waiting{{{labels}}} {waiting}\n"
            f'vllm:num_requests_waiting{{model_name="other"}} 50\n'
            f"vllm:kv_cache_usage_perc{{{labels}}} {usage}\n"
        )

    sampler.add({"d0": page(2, 0.2), "d1": page(4, 0.6), "p0": page(1, 0.1)})
    sampler.add({"d0": page(0, 0.4), "d1": page(0, 0.4)})  # p0 unread this time
    found = sampler.by_role()
    assert found["decode"]["waiting"] == {"mean": 3.0, "max": 6.0, "samples": 2}
    assert found["decode"]["kv_cache_usage"] == {"mean": 0.4, "max": 0.4, "samples": 2}
    assert found["prefill"]["waiting"] == {"mean": 1.0, "max": 1.0, "samples": 1}
    assert "running" not in found["decode"]  # not on these pages


def test_the_first_gap_is_each_request_s_first_and_absent_without_gaps() -> None:
    """A router that answers with prefill's token first (LMCache's PD proxy) shows the KV
    transfer in the first gap: 780 ms over TCP on one H200, against 5 ms gaps after it."""
    slow = [_timed(80.0, [780.0, 5.0, 5.0]), _timed(80.0, [760.0, 5.0, 6.0])]
    step = summarize(1, [*slow, _timed(50.0, [])], 1.0, BenchSettings())
    assert step["first_gap_ms"]["p50"] == 770.0 and step["first_gap_ms"]["n"] == 2
    assert step["itl_ms"]["p50"] == 5.5  # pooled, the first gaps hardly move it
    assert summarize(1, [_timed(50.0, [])], 1.0, BenchSettings())["first_gap_ms"] is None


def test_no_slo_no_goodput() -> None:
    step = summarize(1, [_timed(1.0, [1.0])], 1.0, BenchSettings())
    assert (step["goodput"], step["good_requests"], step["slo_met"]) == (None, None, None)


def test_workload_options() -> None:
    assert parse_concurrency("1, 4,16") == (1, 4, 16)
    for bad in ("0", "a,b", ""):
        with pytest.raises(UsageError):
            parse_concurrency(bad)
    with pytest.raises(UsageError):
        BenchSettings(requests=4, duration=1.0)
    one, two = Prompts(50, 7), Prompts(50, 7)
    first, output_len = one.next()
    assert len(first.split()) == 50 and first == two.next()[0] and one.next()[0] != first
    assert output_len is None  # the workload's
    assert parse_rate("0.5, 2") == (0.5, 2.0)
    for bad in ("0", "-1", "x", ""):
        with pytest.raises(UsageError):
            parse_rate(bad)
    for bad_share in (-0.1, 1.0):
        with pytest.raises(UsageError):
            BenchSettings(prefix_share=bad_share)
    with pytest.raises(UsageError, match="prefix-share"):
        BenchSettings(prefix_share=0.5, dataset=(Entry("x"),))
    assert BenchSettings(rate=(2.0,)).steps == [(None, 2.0)]
    assert BenchSettings(concurrency=(1, 4)).steps == [(1, None), (4, None)]


def test_prefix_share_makes_a_step_share_its_prompts_first_words() -> None:
    prompts = Prompts(40, 3, shared=30)
    first, second = (prompts.next()[0].split() for _ in range(2))
    assert len(first) == len(second) == 40
    assert first[:30] == second[:30] and first[30:] != second[30:]


def test_dataset_lines_in_order_with_their_output_len_then_wrapped(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text('{"prompt": "a b", "output_len": 3}\n\n# note\n{"prompt": "c"}\n')
    entries = dataset.load(path)
    assert entries == (Entry("a b", 3), Entry("c"))
    source = DatasetRequests(entries)
    assert [source.next() for _ in range(2)] == [("a b", 3), ("c", None)]
    assert not source.wrapped
    assert source.next() == ("a b", 3) and source.wrapped
    body = BenchSettings(output_len=9).body("m", "c", None)
    assert body["max_tokens"] == 9 and body["ignore_eos"] and "min_tokens" not in body
    assert BenchSettings().body("m", "a b", 3)["max_tokens"] == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json}\n", "requests.jsonl:1: not JSON"),
        ('{"prompt": "a"}\n["a"]\n', "requests.jsonl:2: expected an object"),
        ('{"prompt": ""}\n', "requests.jsonl:1: prompt: expected a non-empty string"),
        ('{"prompt": "a", "output_len": 0}\n', "requests.jsonl:1: output_len"),
        ('{"prompt": "a", "output_len": true}\n', "requests.jsonl:1: output_len"),
        ('{"prompt": "a", "max_tokens": 5}\n', "unknown key 'max_tokens'"),
        ("\n# only a comment\n", "no requests"),
        (b"\xff\xfe", "cannot be read as UTF-8"),
    ],
)
def test_bad_dataset_names_file_and_line(tmp_path: Path, text: str | bytes, message: str) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(InputError, match=re.escape(message)):
        dataset.load(path)


def test_oversized_dataset_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text('{"prompt": "a"}\n' * 10)
    monkeypatch.setattr(dataset, "MAX_BYTES", 100)
    with pytest.raises(InputError, match="larger than 100 bytes"):
        dataset.load(path)


# ---- against the real router -------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with pd_stack(tmp_path_factory.mktemp("bench")) as stack:
        yield stack


@pytest.fixture
def stack(shared: Stack) -> Iterator[Stack]:
    shared.reset()
    shared.prefill.behaviour = Behaviour(first_token_delay=PREFILL_DELAY)
    shared.decode.behaviour = Behaviour(
        first_token_delay=DECODE_FIRST, inter_token_delay=DECODE_GAP
    )
    yield shared
    shared.reset()


def test_latencies_are_at_least_the_injected_delays(stack: Stack) -> None:
    workload = BenchSettings(
        input_len=40, output_len=OUTPUT, output_spread=0.0, concurrency=(1, 3), requests=6
    )
    result = run(stack.targets(), workload)
    assert result.model == "double-model" and result.connector == "NixlConnector"
    assert (result.layout, result.engines) == ("1 prefill + 1 decode", ENGINES)
    for step in result.steps:
        assert step["succeeded"] == 6 and step["errors"] == 0, step["error_samples"]
        assert step["completion_tokens"] == 6 * OUTPUT
        ttft, itl, tpot, e2e = (step[k] for k in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"))
        # Bounds that follow from causality, never from a window: every chunk is sent after
        # its injected delays and received after it is sent, so TTFT and e2e, counted from the
        # send time, are at least the delays; a gap between two arrivals is not (a chunk that
        # arrives late shortens the gap after it), but TTFT plus a request's gaps ends at its
        # last chunk, so mean TTFT plus (OUTPUT - 1) x mean TPOT is at least all the delays.
        injected = (PREFILL_DELAY + DECODE_FIRST + (OUTPUT - 1) * DECODE_GAP) * 1000
        assert ttft["min"] >= (PREFILL_DELAY + DECODE_FIRST) * 1000
        assert e2e["min"] >= injected
        assert itl["n"] == 6 * (OUTPUT - 1) and tpot["n"] == 6
        # TPOT is a request's gaps over its OUTPUT - 1 of them: the same mean as the pooled gaps
        assert tpot["mean"] == pytest.approx(itl["mean"], abs=0.01)
        rounding = 0.005 * OUTPUT  # the stats are rounded to 0.01 ms
        assert ttft["mean"] + (OUTPUT - 1) * tpot["mean"] >= injected - rounding
        prefill, decode = step["engines"]["prefill"], step["engines"]["decode"]
        assert prefill["prompt_tokens"] == 6 * 40  # the double counts a token per word
        assert decode["prompt_tokens_by_source"]["external_kv_transfer"] == 6 * 40
        assert decode["prompt_tokens_by_source"]["local_compute"] == 0
        assert decode["generation_tokens"] == 6 * OUTPUT and decode["kv_gbps"] > 0
        # vLLM's phase histograms: prefill's phase is its injected delay, decode's the rest
        assert prefill["phase_requests"] == {"queue": 6, "prefill": 6, "decode": 6}
        assert prefill["phase_mean_s"]["prefill"] >= PREFILL_DELAY
        assert decode["phase_mean_s"]["prefill"] >= DECODE_FIRST
        assert decode["phase_mean_s"]["decode"] >= (OUTPUT - 1) * DECODE_GAP
        # the simulator's scheduler: a request arriving during a step waits for it to end
        assert 0.0 <= decode["phase_mean_s"]["queue"] <= DECODE_FIRST + DECODE_GAP
        # gauges sampled while the step ran (the first sample comes at its start)
        for role in (prefill, decode):
            gauges = role["gauges"]
            assert gauges["waiting"]["max"] <= 3 and gauges["running"]["samples"] >= 1
            # the simulator's KV usage: its blocks in use, of more than a million here
            assert 0.0 <= gauges["kv_cache_usage"]["max"] <= 1.0


def test_output_spread_draws_each_requests_length_and_the_decode_generates_it(
    stack: Stack,
) -> None:
    """--output-spread: each generated request asks for its own length within the share of
    --output-len (a seeded draw, repeated by --seed), and the tokens counted are those."""
    stack.decode.behaviour = Behaviour()  # no injected delays: only lengths matter here
    stack.prefill.behaviour = Behaviour()
    workload = BenchSettings(input_len=8, output_len=20, output_spread=0.5, requests=12, seed=4)
    step = run(stack.targets(), workload).steps[0]
    asked = [r.body["max_tokens"] for r in stack.decode.generation_requests()]
    assert len(asked) == 12 and all(10 <= n <= 30 for n in asked) and len(set(asked)) > 3
    assert all(r.body["ignore_eos"] for r in stack.decode.generation_requests())
    assert step["completion_tokens"] == sum(asked)
    stack.reset()
    run(stack.targets(), workload)
    assert sorted(r.body["max_tokens"] for r in stack.decode.generation_requests()) == sorted(asked)


def test_output_spread_is_a_share_and_not_for_a_dataset() -> None:
    for bad in (-0.1, 1.0):
        with pytest.raises(UsageError, match="output-spread"):
            BenchSettings(output_spread=bad)
    with pytest.raises(UsageError, match="output-spread"):
        BenchSettings(output_spread=0.2, dataset=(Entry("x"),))
    draw = output_lengths(100, 0.1, seed=1)
    drawn = [draw() for _ in range(200)]
    assert 90 <= min(drawn) < 95 and 105 < max(drawn) <= 110
    assert output_lengths(100, 0.0)() == 100 and output_lengths(3, 0.9, seed=2)() >= 2


def test_goodput_all_under_a_loose_slo_none_under_a_tight_one(stack: Stack) -> None:
    loose = BenchSettings(
        input_len=20, output_len=4, requests=4, slo_ttft_ms=60_000.0, slo_itl_ms=60_000.0
    )
    (step,) = run(stack.targets(), loose).steps
    assert step["good_requests"] == 4 and step["slo_met"] is True
    assert step["goodput"] == pytest.approx(4 / step["duration_s"], rel=1e-3)
    tight = BenchSettings(
        input_len=20, output_len=4, requests=4, slo_ttft_ms=1.0
    )  # below injection
    result = run(stack.targets(), tight)
    assert result.steps[0]["good_requests"] == 0 and result.steps[0]["goodput"] == 0.0
    assert result.slo_missed_everywhere


def test_cli_json_csv_and_exit_code(stack: Stack, tmp_path: Path) -> None:
    args = ["bench", *stack.urls(), "--input-len", "20", "--output-len", "4", "--requests", "3"]
    args += ["--concurrency", "1,2", "--report", str(tmp_path), "-o", "json"]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    assert payload["workload"]["concurrency"] == [1, 2]
    for step in payload["steps"]:
        assert {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "goodput", "request_throughput"} <= set(
            step
        )
        assert {"p50", "p90", "p99"} <= set(step["ttft_ms"])
    (table,) = tmp_path.glob("bench-*.csv")
    rows = list(csv.DictReader(table.open()))
    assert [r["concurrency"] for r in rows] == ["1", "2"] and rows[0]["ttft_ms_p90"]
    assert "decode_prompt_tokens_external_kv_transfer" in rows[0]
    if not files.plots_available():
        assert payload["plots"] == files.PLOTS_NEED
    tight = ["bench", "--url", stack.router, "--requests", "2", "--output-len", "2"]
    missed = runner.invoke(  # 200 columns: the one-table layout whose header this reads
        app, [*tight, "--input-len", "10", "--slo-ttft-ms", "1"], env={"COLUMNS": "200"}
    )
    assert missed.exit_code == 1, missed.output
    assert "TTFT p50/p90/p99 ms" in missed.stdout and "MISSED" in missed.stdout
    assert "missed at every load step" in missed.stderr
    assert "[1/1] 1 in flight: sending ..." in missed.stderr  # progress as it runs
    assert "[1/1] 1 in flight: 2 ok, 0 failed in" in missed.stderr


def test_open_loop_steps_and_a_dataset_through_the_router(stack: Stack, tmp_path: Path) -> None:
    workload = BenchSettings(input_len=30, output_len=OUTPUT, rate=(50.0,), requests=5, seed=1)
    (step,) = run(stack.targets(), workload).steps
    assert (step["concurrency"], step["rate"], step["succeeded"]) == (None, 50.0, 5)
    assert step["held_arrivals"] == 0 and step["dataset_wrapped"] is None
    assert step["ttft_ms"]["min"] >= (PREFILL_DELAY + DECODE_FIRST) * 1000
    assert step["engines"]["prefill"]["prompt_tokens"] == 5 * 30
    held = BenchSettings(input_len=5, output_len=2, rate=(1000.0,), requests=4, max_in_flight=1)
    assert run(stack.targets(), held).steps[0]["held_arrivals"] > 0
    path = tmp_path / "requests.jsonl"
    path.write_text('{"prompt": "one two three", "output_len": 2}\n{"prompt": "four five"}\n')
    args = ["bench", *stack.urls(), "--dataset", str(path), "--output-len", "4"]
    done = runner.invoke(app, [*args, "--requests", "3", "-o", "json"])
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    (step,) = payload["steps"]
    assert payload["workload"]["dataset"] == str(path) and payload["workload"]["input_len"] is None
    assert step["completion_tokens"] == 2 + 4 + 2 and step["dataset_wrapped"] is True
    assert step["engines"]["prefill"]["prompt_tokens"] == 3 + 2 + 3
    text = runner.invoke(app, [*args, "--requests", "3"])
    assert "dataset ran out" in text.stderr and "dataset" in text.stdout
    bad = runner.invoke(app, ["bench", "--url", stack.router, "--dataset", str(tmp_path / "no")])
    assert bad.exit_code == 1 and "cannot be read" in bad.stderr


def test_bench_outputs_vary_by_default_and_a_dataset_says_its_own() -> None:
    from pdctl.cli.bench import _spread

    assert _spread(None, dataset=False) == defaults.BENCH_OUTPUT_SPREAD > 0
    assert BenchSettings().output_spread == defaults.BENCH_OUTPUT_SPREAD
    assert _spread(None, dataset=True) == 0.0 and _spread(0.0, dataset=False) == 0.0


def test_a_step_whose_requests_cannot_reach_its_concurrency_is_warned() -> None:
    """`--concurrency 16 --requests 8`: at most 8 are ever in flight; bench says so."""
    (warning,) = BenchSettings(concurrency=(4, 16), requests=8).warnings
    assert warning.startswith("--concurrency 16 with --requests 8: that step never has more than 8")
    assert BenchSettings(concurrency=(8,), requests=8).warnings == []
    assert BenchSettings(rate=(2.0,), requests=1).warnings == []
