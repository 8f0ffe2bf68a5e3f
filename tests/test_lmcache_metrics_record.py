"""The LMCache metric names pd-stack uses are the ones a real vLLM + LMCache exports: the /metrics
text kept from LMCache 0.5.6 with vLLM 0.26.0 on one H200 (benchmarks/records/lmcache-h200-1gpu-
metrics-*.txt, the record lmcache-h200-1gpu.json) is the source. Every `lmcache:` name in the
connector table and in the simulator is a family of that text, and the table's LMCacheConnectorV1
transfer metrics are the ones that moved while the real pair moved KV. The second run's texts
(lmcache-h200-1gpu-leak-metrics-*.txt, record lmcache-h200-1gpu-leak.json) export the same names
and show why that pair stalled: the decode held its whole PD buffer and had loaded nothing. The
third's (lmcache-h200-1gpu-v1runner-metrics-*.txt, on vLLM's Model Runner V1) show the load."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pdctl import connectors
from pdctl.verify import judge
from pdctl.verify.proof import resolve_connector
from tests.helpers import ROOT

RECORDS = ROOT / "benchmarks" / "records"
RUN, LEAK = "lmcache-h200-1gpu", "lmcache-h200-1gpu-leak"  # the first two runs' kept texts
V1 = "lmcache-h200-1gpu-v1runner"  # the run whose decode loaded the KV
ROLES = ("prefill", "decode")
NAME = re.compile(r"\blmcache:[a-z0-9_]+")
# Where pd-stack names LMCache metrics: the connector table (verify, the canary, the alerts and
# the simulator read it) and the simulator's own code.
SOURCES = [
    ROOT / "helm" / "files" / "connectors.yaml",
    *sorted((ROOT / "pdctl" / "simulator").rglob("*.py")),
]


def _scrape(name: str, run: str = "lmcache-h200-1gpu") -> judge.Scrape:
    return judge.parse((RECORDS / f"{run}-metrics-{name}.txt").read_text())


def _count(scrape: judge.Scrape, metric: str) -> float:
    family = scrape.family(metric)
    assert family is not None, f"{metric} is not on the page"
    return family.read(scrape)["count"]


def _named_in(path: Path) -> set[str]:
    return set(NAME.findall(path.read_text()))


def _moved(metric: str, role: str, run: str = RUN) -> float:
    before, after = _scrape(f"{role}-before", run), _scrape(role, run)
    family = after.family(metric)
    assert family is not None, f"{metric} is not on the real {role} engine's /metrics"
    then = before.family(metric)
    return family.read(after)["count"] - (then.read(before)["count"] if then else 0.0)


@pytest.mark.parametrize("run", [RUN, LEAK, V1])
def test_every_lmcache_name_pd_stack_uses_is_exported_by_real_lmcache(run: str) -> None:
    pages = [_scrape(role, run) for role in ROLES]
    used = {(name, path.relative_to(ROOT)) for path in SOURCES for name in _named_in(path)}
    unknown = sorted(
        f"{name} ({where})" for name, where in used if not any(p.family(name) for p in pages)
    )
    assert not unknown, f"not exported by LMCache 0.5.6 + vLLM 0.26.0: {unknown}"


@pytest.mark.parametrize("run", [RUN, V1])
def test_the_table_lists_lmcache_transfer_metrics_that_moved_in_real_pd(run: str) -> None:
    transfer = connectors.load().connectors["LMCacheConnectorV1"].metrics["transfer"]
    assert transfer, "the connector table lists no transfer metric for LMCacheConnectorV1"
    for metric in transfer:
        assert max(_moved(metric, role, run) for role in ROLES) > 0, f"{metric} did not move"


def test_with_the_v1_model_runner_the_decode_loaded_every_token_it_was_promised() -> None:
    """vLLM's Model Runner V1 (VLLM_USE_V2_MODEL_RUNNER=0, which the chart renders on LMCache
    pools): the decode's `loaded` counter (lmcache:num_hit_tokens) moved by every token vLLM
    counted as external_kv_transfer, one retrieve a prompt (verify's 4 and the bench's 44)."""
    loaded = connectors.load().connectors["LMCacheConnectorV1"].metrics["loaded"]
    evidence = connectors.load().transfer_evidence
    before, after = _scrape("decode-before", V1), _scrape("decode", V1)
    family = after.family(evidence["metric"])
    assert family is not None
    external = family.read(after, dict(evidence["labels"]))["count"]
    assert external == 90_733
    assert [_moved(metric, "decode", V1) for metric in loaded] == [external]
    assert _moved("lmcache:num_retrieve_requests", "decode", V1) == 48
    assert before.family("lmcache:num_hit_tokens") is not None


@pytest.mark.parametrize("metric", ["lmcache:num_hit_tokens", "lmcache:num_retrieve_requests"])
def test_the_retrieve_counters_do_not_show_a_pd_transfer(metric: str) -> None:
    """vLLM counted the decode's prompt as external_kv_transfer while LMCache's retrieve counters
    stayed still: on vLLM 0.26.0 the receiver's load never ran (lmcache-h200-1gpu-leak.json).
    They are no transfer metric; num_hit_tokens is the table's `loaded` (the test below)."""
    evidence = connectors.load().transfer_evidence
    decode = _scrape("decode").family(evidence["metric"])
    assert decode is not None
    external = decode.read(_scrape("decode"), dict(evidence["labels"]))["count"]
    assert external > 0
    assert _moved(metric, "decode") == 0


def test_as_rendered_the_engines_export_no_lmcache_metric() -> None:
    """Without PROMETHEUS_MULTIPROC_DIR in the engine's env, vLLM's API server does not see the
    metrics LMCache records in the engine core (another process)."""
    page = (RECORDS / "lmcache-h200-1gpu-metrics-decode-as-rendered.txt").read_text()
    assert "vllm:prompt_tokens_by_source_total" in page
    assert not NAME.search(page)


def test_the_stalled_decode_held_its_whole_pd_buffer_and_loaded_nothing() -> None:
    """The sync run's decode after its stall: every chunk of the 2 GiB PD buffer held (64 of
    256 tokens of Llama-3.1-8B's 131,072 bytes a token), 14,957 prompt tokens looked up (verify's
    and seven bench prompts) and none retrieved into vLLM's cache, while the prefill stored
    17,005 (those and the stalled eighth prompt)."""
    decode, prefill = _scrape("decode", LEAK), _scrape("prefill", LEAK)
    assert _count(decode, "lmcache:active_memory_objs_count") == 64
    assert _count(decode, "lmcache:local_cache_usage") == 2 * 1024**3 == 64 * 256 * 131_072
    assert _count(decode, "lmcache:num_lookup_hits") == 600 + 5 + 8 + 8 + 7 * 2048
    for metric in ("lmcache:num_retrieve_requests", "lmcache:num_hit_tokens"):
        assert _count(decode, metric) == 0
    assert _count(decode, "lmcache:num_prompt_tokens") == 0  # counted past the skipped load
    assert _count(prefill, "lmcache:num_stored_tokens") == 17_005


def test_verify_fails_the_pair_whose_decode_loaded_nothing() -> None:
    """pd-kv-transfer on the leak run: the probe's by-source counts as verify read them (the
    record: 600 external, 1 computed) and LMCache's counters from the kept texts (a counter at 0
    at the end of the run was 0 throughout). LMCache's stored and lookup counters moved, but the
    decode's lmcache:num_hit_tokens, the table's `loaded`, did not: FAIL, naming it. (verify
    passed this pair before the table had `loaded`.)"""
    record = json.loads((RECORDS / f"{LEAK}.json").read_text())
    probe = {e["role"]: e for e in record["verify"]["sync"]["engines_moved"]}
    connector = resolve_connector("LMCacheConnectorV1", [])
    rule = connectors.load().transfer_evidence
    value = rule["labels"][judge.SOURCE_LABEL]
    evidence = judge.Evidence(rule["metric"], judge.SOURCE_LABEL, value, rule["poolRole"])
    empty = judge.parse("")
    moves = []
    for role in ROLES:
        read = judge.moves(role, role, empty, _scrape(role, LEAK), "m", evidence, connector)
        sources = probe[role]["prompt_tokens_by_source"]
        moves.append(judge.Moves(role, role, 0, 0, sources, read.connector, read.failures))
    verdict = judge.kv_transfer(moves, 600, evidence, connector)
    assert verdict.status == judge.FAIL and not verdict.facts["recomputed"]
    assert "lmcache:num_hit_tokens +0" in verdict.summary
    assert verdict.facts["connector_transfer_moved"]  # stored and looked up, all the same


def test_verify_passes_the_pair_whose_decode_loaded_the_kv() -> None:
    """pd-kv-transfer on the v1runner run, read as verify reads it: the probe's by-source counts
    as the record kept them (600 external, 1 computed) and LMCache's counters from the kept
    texts: the decode's lmcache:num_hit_tokens moved, so PASS (the leak run above: FAIL)."""
    record = json.loads((RECORDS / f"{V1}.json").read_text())
    probe = record["variants"]["sync-rendered"]["verify"]["pd_kv_transfer_raw"]
    connector = resolve_connector("LMCacheConnectorV1", [])
    rule = connectors.load().transfer_evidence
    value = rule["labels"][judge.SOURCE_LABEL]
    evidence = judge.Evidence(rule["metric"], judge.SOURCE_LABEL, value, rule["poolRole"])
    moves = []
    for role in ROLES:
        before, after = _scrape(f"{role}-before", V1), _scrape(role, V1)
        read = judge.moves(role, role, before, after, "m", evidence, connector)
        sources = probe[role]["prompt_tokens_by_source"]
        moves.append(judge.Moves(role, role, 0, 0, sources, read.connector, read.failures))
    verdict = judge.kv_transfer(moves, 600, evidence, connector)
    assert verdict.status == judge.PASS, verdict.summary
    assert not verdict.facts["recomputed"]
    assert verdict.facts["connector_transfer_moved"]


def test_every_known_failure_names_a_record_that_shows_it() -> None:
    """The connector table's failsWith (PD118) points at a kept record; LMCache's at the run with
    the sender's PD buffer at the decode's (what PD119 asks), where verify passed and no start
    served 16 requests in flight: the buffer rule does not make the failure go away."""
    table = connectors.load().connectors
    failures = [(name, f) for name, c in table.items() for f in c.fails_with]
    assert failures, "the connector table lists no known failure"
    for _, failure in failures:
        assert (ROOT / failure.record).is_file(), failure.record
    (lmcache,) = [f for name, f in failures if name == "LMCacheConnectorV1"]
    record = json.loads((ROOT / lmcache.record).read_text())
    commands = record["commands"].values()
    buffers = [c["env"]["LMCACHE_PD_BUFFER_SIZE"] for c in commands if c.get("env")]
    assert len(buffers) == 2 and len(set(buffers)) == 1, buffers
    for variant in record["variants"].values():
        assert variant["verify"]["passed"] and variant["verify"]["pd_proven"]
        served = {step["in_flight"]: step["succeeded"] == 16 for step in variant["bench"]}
        assert served[1] and not served.get(16, False)
