"""verify on LMCache PD: the connector is known from LMCache's own metrics (their names from the
connector table's lmcacheMetrics, as the simulator exports them), and pd-decode passes when the
router answered with the prefill's first token (LMCache's PD proxy) but not when the decode
generated less than the rest."""

from __future__ import annotations

from pdctl import connectors
from pdctl.simulator import lmcache
from pdctl.simulator.engine import Shape, SimulatedEngine
from pdctl.verify import judge
from pdctl.verify.judge import Evidence, Moves
from pdctl.verify.proof import resolve_connector

EVIDENCE = Evidence(
    "vllm:prompt_tokens_by_source_total", "source", "external_kv_transfer", "decode"
)
RECEIVER = lmcache.Settings(lmcache.TUTORIAL, lmcache.RECEIVER)


def _lmcache_page() -> judge.Scrape:
    engine = SimulatedEngine("d", shape=Shape(nixl=False, with_lmcache=True, lmcache_pd=RECEIVER))
    return judge.parse(engine.metrics())


def test_the_lmcache_connector_is_detected_from_lmcaches_metrics() -> None:
    """Not "connector not known": the table names LMCache's counter, the engine exports it; and
    no NIXL metrics come from an LMCache engine (two candidates would leave it unknown)."""
    scrape = _lmcache_page()
    found = resolve_connector(None, [scrape])
    assert found.name == "LMCacheConnectorV1" and found.source == "detected"
    assert found.transfer == tuple(
        connectors.load().connectors["LMCacheConnectorV1"].metrics["transfer"]
    )
    names = [entry["name"] for entry in connectors.load().lmcache_metrics]
    assert all(scrape.family(name) is not None for name in names)
    assert scrape.family("vllm:nixl_xfer_time_seconds") is None


def test_the_tutorial_form_reads_the_same_metrics() -> None:
    table = connectors.load()
    assert table.tutorial_lmcache.metrics == table.connectors["LMCacheConnectorV1"].metrics


def _moves(prefill_generated: float, decode_generated: float) -> list[Moves]:
    sources = {"external_kv_transfer": 99.0, "local_compute": 1.0, "local_cache_hit": 0.0}
    hit = {"lmcache:num_lookup_hits": {"count": 99.0}}
    return [
        Moves("p", "prefill", 100.0, prefill_generated, None, {}, {}),
        Moves("d", "decode", 101.0, decode_generated, sources, hit, {}),
    ]


def _decode_verdict(prefill_generated: float, decode_generated: float) -> judge.Verdict:
    connector = resolve_connector("LMCacheConnectorV1", [])
    verdicts = judge.proof(
        _moves(prefill_generated, decode_generated), 100, 16, EVIDENCE, connector
    )
    return {v.id: v for v in verdicts}["pd-decode"]


def test_pd_decode_passes_when_the_prefill_generated_the_first_token() -> None:
    verdict = _decode_verdict(1, 15)
    assert verdict.status == judge.PASS and verdict.facts["first_token_by"] == "prefill"
    assert "prefill the first" in verdict.summary


def test_pd_decode_fails_when_the_decode_generated_less_than_the_rest() -> None:
    assert _decode_verdict(1, 14).status == judge.FAIL
    assert _decode_verdict(0, 15).status == judge.FAIL  # no first token from the prefill
    assert _decode_verdict(1, 16).status == judge.PASS  # production-stack: all by the decode
