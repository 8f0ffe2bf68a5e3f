"""The recovery phase of the real-engine harness (benchmarks/real_engines/recovery.py, run.py
`--phase recovery`) on CPU: its loop with a made-up clock, and the whole phase's proof (`pdctl
verify` as a subprocess) against the REAL vllm-router 0.1.17 in PD mode in front of engine TEST
DOUBLES (tests/doubles/vllm_engine.py, not vLLM) whose prefill is replaced: stopped, then started
again on the same port as a new process (a new engine_id, its KV gone)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.real_engines import recovery, run
from tests.doubles.router_stack import pd_stack


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_loop_times_the_first_proof_after_the_restart() -> None:
    clock, events = _Clock(), []
    proofs = iter(
        [recovery.Proof(True)]
        + [recovery.Proof(False, ["engines-health: prefill: connection refused"])] * 3
        + [recovery.Proof(False, ["pd-kv-transfer: decode recomputed 600 of 600"])]
        + [recovery.Proof(True)]
    )
    result = recovery.recover(
        prove=lambda: next(proofs),
        kill=lambda: events.append("kill"),
        start=lambda: events.append("start"),
        limit=300,
        interval=5,
        clock=clock,
        sleep=clock.sleep,
    )
    assert events == ["kill", "start"]
    assert result["recovered"] and result["seconds_to_recovery"] == 20.0
    assert result["restart_seconds"] == 0.0 and result["start_error"] is None
    assert [a["proven"] for a in result["attempts"]] == [False] * 4 + [True]
    assert recovery.failures_seen(result) == {"engines-health": 3, "pd-kv-transfer": 1}


def test_the_loop_gives_up_at_the_limit_and_keeps_what_it_saw() -> None:
    clock = _Clock()

    def start() -> None:
        raise SystemExit("prefill exited with 1: ValueError: Free memory on device cuda:0")

    proofs = iter([recovery.Proof(True)])

    result = recovery.recover(
        prove=lambda: next(proofs, recovery.Proof(False, ["router-health: 502"])),
        kill=lambda: None,
        start=start,
        limit=20,
        interval=5,
        clock=clock,
        sleep=clock.sleep,
    )
    assert not result["recovered"] and result["seconds_to_recovery"] is None
    assert result["start_error"].startswith("SystemExit: prefill exited with 1")
    assert [a["at"] for a in result["attempts"]] == [0.0, 5.0, 10.0, 15.0, 20.0]


def test_the_loop_does_not_kill_a_pair_that_is_not_proven() -> None:
    killed: list[bool] = []
    result = recovery.recover(
        prove=lambda: recovery.Proof(False, ["pd-prefill: no prompt tokens"]),
        kill=lambda: killed.append(True),
        start=lambda: None,
    )
    assert not killed and not result["proven_before"] and not result["recovered"]
    assert result["failed_before"] == ["pd-prefill: no prompt tokens"]


def test_a_replaced_prefill_through_the_real_router_is_proven_again(tmp_path: Path) -> None:
    """TEST DOUBLES behind the real router: the harness's own proof (`pdctl verify -o json`)
    fails while prefill is gone and passes again once the new process answers, with decode
    reading the KV of the new engine_id; no one restarts the router or decode."""
    with pd_stack(tmp_path) as stack:
        old_engine = stack.prefill.engine_id
        refused = threading.Event()  # a proof has failed since the kill

        def prove() -> recovery.Proof:
            proof = run.verify_proof(stack.urls(), timeout=600)
            if not proof.proven:
                refused.set()
            return proof

        def kill() -> None:
            stack.prefill.down()
            stack.prefill.replace()

        def start() -> None:
            # The process is starting (nothing listens on the port) until a proof has failed
            # on it: an event, not a window, however slow this machine runs verify.
            assert refused.wait(timeout=600), "no proof ran while prefill was down"
            stack.prefill.up()

        result = recovery.recover(prove=prove, kill=kill, start=start, limit=600, interval=0.5)
        assert result["proven_before"] and result["recovered"], result
        assert result["restart_seconds"] <= result["seconds_to_recovery"]
        seen = recovery.failures_seen(result)
        assert "engines-health" in seen, result["attempts"]
        last = stack.decode.generation_requests()[-1].body["kv_transfer_params"]
        assert last["remote_engine_id"] == stack.prefill.engine_id != old_engine


def test_bench_part_sweeps_through_the_router_and_one_engine_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--phase bench` on TEST DOUBLES behind the real router: `pdctl bench` (a subprocess, as on
    the GPU host) with the harness's word-level dataset, through the router with both engines'
    counters, then straight to the prefill engine."""
    monkeypatch.setattr(run, "vocab_size", lambda: 500)
    monkeypatch.setattr(run, "BENCH_REQUESTS", 2)
    monkeypatch.setattr(run, "BENCH_PROMPT", 40)
    monkeypatch.setattr(run, "BENCH_OUTPUT", 3)
    with pd_stack(tmp_path) as stack:
        pair = SimpleNamespace(
            urls=stack.urls(),
            prefill=SimpleNamespace(url=stack.prefill.url),
            model=stack.prefill.model,
        )
        part = run.bench_part(pair, tmp_path)  # type: ignore[arg-type]
    for name in ("pd", "alone"):
        assert part[name]["exit_code"] == 0, part[name]["result"]
        steps = part[name]["result"]["steps"]
        assert [s["concurrency"] for s in steps] == [1, 4, 16]
        assert all(s["succeeded"] == 2 and s["completion_tokens"] == 6 for s in steps)
        assert all(not s["dataset_wrapped"] for s in steps)  # every prompt sent once
        assert f"bench-{name}.jsonl" in part[name]["argv"]
    decode = part["pd"]["result"]["steps"][0]["engines"]["decode"]
    assert decode["prompt_tokens_by_source"]["external_kv_transfer"] == 2 * 40
    assert part["alone"]["result"]["steps"][0]["engines"] == {}
    prompts = (tmp_path / "bench-pd.jsonl").read_text().splitlines()
    assert len(prompts) == 6 and len(set(prompts)) == 6
    assert len(json.loads(prompts[0])["prompt"].split()) == 40


def test_phases_parse() -> None:
    assert run.parse_phases("all") == ["alone", "pair"]
    assert run.parse_phases("bench, recovery") == ["bench", "recovery"]
    with pytest.raises(SystemExit, match="choose from"):
        run.parse_phases("pair,warp")
