"""pdctl verify against an aggregated release: the REAL vllm-router 0.1.17 in regular mode
(--worker-urls, no PD) in front of one engine test double (tests/doubles/vllm_engine.py: not
vLLM) serving whole requests, as an engine of role both does. Health, models, a completion and
streaming still run and pass; the PD checks are skipped with the reason, and the verdict says
an aggregated release was verified."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.cluster import Pod
from pdctl.verify.checks import Settings, run
from pdctl.verify.report import AGGREGATED, Report, Status
from pdctl.verify.targets import from_urls
from tests.doubles.router_stack import Stack, pd_stack

runner = CliRunner()
QUICK = Settings(max_tokens=8, prompt_words=200, settle=0.0, timeout=20.0)
SKIPPED = ("pd-prefill", "pd-decode", "pd-kv-transfer", "pd-kv-bandwidth", "pd-ttft")
RUN = ("router-health", "models", "engines-health", "completion", "chat-stream")


@pytest.fixture(scope="module")
def aggregated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The router sends every request to the one engine double (stack.decode)."""
    with pd_stack(tmp_path_factory.mktemp("agg"), pd=False) as stack:
        yield stack


def _assert_aggregated(report: Report) -> None:
    statuses = {check.id: check.status for check in report.checks}
    assert {statuses[i] for i in RUN} == {Status.passed}, statuses
    for check in report.checks:
        if check.id in SKIPPED:
            assert (check.status, check.summary) == (Status.skipped, AGGREGATED)
    assert report.passed and report.aggregated and not report.pd_proven


def test_engine_urls_verify_an_aggregated_release(aggregated: Stack) -> None:
    targets = from_urls(aggregated.router, [], [], [aggregated.decode.url])
    assert [e.role for e in targets.engines] == ["both"]
    report = run(targets, QUICK)
    _assert_aggregated(report)
    assert aggregated.decode.generation_requests()  # the completions reached the engine
    assert report.as_dict()["aggregated"] is True


def test_the_cli_verdict_names_the_aggregated_release(aggregated: Stack) -> None:
    args = ["verify", "--url", aggregated.router, "--engine-url", aggregated.decode.url]
    args += ["--max-tokens", "8", "--prompt-words", "200", "--settle", "0"]
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    assert f"SKIP  pd-prefill      {AGGREGATED}" in text.stdout
    assert "aggregated release (every engine prefills and decodes)" in text.stderr
    assert "PD not proven" not in text.stderr
    data = runner.invoke(app, [*args, "-o", "json"])
    assert data.exit_code == 0, data.output
    payload = json.loads(data.stdout)
    assert payload["aggregated"] is True and payload["engines"][0]["role"] == "both"


def test_engine_url_needs_the_router() -> None:
    result = runner.invoke(app, ["verify", "--engine-url", "http://127.0.0.1:1"])
    assert result.exit_code == 2
    assert "--engine-url need --url" in result.stderr


def test_cluster_mode_reads_the_role_label(
    aggregated: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release whose engine pods carry role both (pdctl.release.release_pods groups pods by
    the role label) is verified as aggregated, without any flag. release_pods and port_forward
    are test doubles pointing at the local router and engine double."""
    import pdctl.cluster
    import pdctl.release
    import pdctl.verify.apikey

    urls = {"pd-router-1": aggregated.router, "pd-llama-1": aggregated.decode.url}

    def release_pods(release: str, namespace: str) -> dict[str, list[Pod]]:
        pod = Pod("pd-llama-1", {}, "Running", True, 0, ports={})
        return {"router": [Pod("pd-router-1", {}, "Running", True, 0, ports={})], "both": [pod]}

    @contextmanager
    def port_forward(namespace: str, pod: str, port: int) -> Iterator[str]:
        yield urls[pod]

    monkeypatch.setattr(pdctl.release, "release_pods", release_pods)
    monkeypatch.setattr(pdctl.cluster, "port_forward", port_forward)
    monkeypatch.setattr(pdctl.verify.apikey, "from_release", lambda release, namespace: None)
    result = runner.invoke(app, ["verify", "--settle", "0", "--max-tokens", "8", "-o", "json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["aggregated"] is True
    skipped = {c["id"]: c["summary"] for c in payload["checks"] if c["status"] == "skip"}
    assert skipped == dict.fromkeys(SKIPPED, AGGREGATED)


def test_pd_targets_are_not_aggregated() -> None:
    targets = from_urls("http://r:1", ["http://p:1"], ["http://d:1"], ["http://b:1"])
    assert not targets.aggregated and not from_urls("http://r:1", [], []).aggregated
