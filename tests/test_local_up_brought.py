"""`pdctl up --engine sim` of the LMCache PD files people bring: the PD tutorial's
(tutorials/assets/values-16-disagg-prefill.yaml: LMCache's NIXL sender/receiver, production-stack's
disaggregated_prefill) and a `kvTransfer.connector: LMCacheConnectorV1` file
(tutorials/assets/values-19-lmcache-pd.yaml: LMCache >= 0.3.7, LMCache's PD proxy). The router is
played by pd-stack's router stand-in; verify proves PD (the decode loaded the prompt's KV and
computed none of it) and names the simulator and the stand-in, through LMCache's proxy from its
streamed answers (it streams every completion: verify warns on the non-streaming check and counts
the probe's tokens by the prefill's /tokenize); down leaves nothing running. A decode that
recomputes fails pd-kv-transfer."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl.cli.app import app
from pdctl.helm import Helm
from pdctl.local import lifecycle, state

runner = CliRunner()
RELEASE = "pd"
ASSETS = Path(__file__).resolve().parent.parent / "tutorials" / "assets"
FILES = {
    "tutorial": (ASSETS / "values-16-disagg-prefill.yaml", "production-stack's router"),
    "LMCacheConnectorV1": (ASSETS / "values-19-lmcache-pd.yaml", "LMCache's PD proxy"),
}
RECOMPUTE = "servingEngineSpec.modelSpec[1].vllmConfig.extraArgs={--sim-fault,recompute}"
VERIFY = ["verify", "-o", "json", "--prompt-words", "120", "--max-tokens", "8"]


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    yield tmp_path / "state"
    if state.Folder.of(RELEASE).held():
        lifecycle.down(RELEASE)


def _up(helm: Helm, values: Path, *more: str) -> Any:
    argv = ["up", str(values), "--engine", "sim", "--timeout", "120", "--helm", str(helm.path)]
    result = runner.invoke(app, [*argv, *more])
    assert result.exit_code == 0, result.output
    return result


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2):
            return True
    except (urllib.error.URLError, OSError):
        return False


def _running(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


@pytest.mark.parametrize("form", list(FILES))
def test_up_verify_down(form: str, helm4: Helm, state_home: Path) -> None:
    values, played = FILES[form]
    result = _up(helm4, values)
    assert f"pd-stack router stand-in playing {played}" in result.stdout
    assert "router: the pd-stack router stand-in" in result.stderr  # changed from the render
    found = state.Folder.of(RELEASE).read_state()
    assert found is not None and "stand-in" in found["router_by"]
    # LMCache's metrics reach /metrics through PROMETHEUS_MULTIPROC_DIR: the chart's, one folder
    # each on this host (pdctl.local.multiproc), there and empty at start.
    planned = state.Folder.of(RELEASE).read_layout().engines
    folders = {Path(e.env["PROMETHEUS_MULTIPROC_DIR"]) for e in planned}
    assert len(folders) == len(planned) and all(f.is_dir() for f in folders)
    assert all(f.parent == state.Folder.of(RELEASE).path / "prometheus" for f in folders)

    verified = runner.invoke(app, VERIFY)
    assert verified.exit_code == 0, verified.output
    report = json.loads(verified.stdout)
    assert report["pd_proven"] and report["connector"] == "LMCacheConnectorV1"
    assert report["router_name"].startswith(f"pd-stack router stand-in playing {played}")
    assert "engines: the pd-stack simulator (not vLLM)" in verified.stderr
    checks = {c["id"]: c for c in report["checks"]}
    kv = checks["pd-kv-transfer"]["evidence"]
    assert kv["proof"] == "prompt_tokens_by_source" and kv["local_compute"] <= 1
    assert kv["connector_transfer_moved"]["lmcache:num_lookup_hits"]  # LMCache's own counter
    probe = checks["pd-prefill"]["evidence"]["probe"]
    if form == "LMCacheConnectorV1":  # LMCache's proxy streams every answer, asked or not
        assert checks["completion"]["status"] == "warn"
        assert "answered a non-streaming request with a stream" in checks["completion"]["summary"]
        assert probe["streamed_events"] > 1 and "/tokenize" in probe["counted_by"]
        assert probe["prompt_tokens"] >= 120 and probe["completion_tokens"] == 16
    else:
        assert checks["completion"]["status"] == "pass"
        assert probe["streamed_events"] == 0 and probe["counted_by"] == "the answer's usage"

    # bench asks for exact lengths with ignore_eos alone: no min_tokens, which LMCache's proxy
    # would keep on the prefill's one-token request (vLLM's 400, the proxy's 500).
    argv = ["bench", "-o", "json", "--input-len", "60", "--output-len", "6", "--output-spread", "0"]
    benched = runner.invoke(app, [*argv, "--concurrency", "2", "--requests", "4"])
    assert benched.exit_code == 0, benched.output
    (step,) = json.loads(benched.stdout)["steps"]
    assert step["succeeded"] == 4 and step["errors"] == 0

    urls = [found["router"], *(e["url"] for e in found["engines"])]
    pids = [int(p) for p in found["pids"].values()]
    stopped = runner.invoke(app, ["down"])
    assert stopped.exit_code == 0, stopped.output
    ends = time.monotonic() + 30
    while any(_running(p) for p in pids) and time.monotonic() < ends:
        time.sleep(0.1)
    assert not [p for p in pids if _running(p)]
    assert not [u for u in urls if _answers(u)]
    after = state.Folder.of(RELEASE).read_state()
    assert after is not None and after["status"] == state.STOPPED


@pytest.mark.parametrize("form", list(FILES))
def test_a_decode_that_recomputes_fails_pd_kv_transfer(
    form: str, helm4: Helm, state_home: Path
) -> None:
    _up(helm4, FILES[form][0], "--set", RECOMPUTE)
    verified = runner.invoke(app, VERIFY)
    assert verified.exit_code == 1, verified.output
    report = json.loads(verified.stdout)
    failed = [c["id"] for c in report["checks"] if c["status"] == "fail"]
    assert failed == ["pd-kv-transfer"]
    (kv,) = [c for c in report["checks"] if c["id"] == "pd-kv-transfer"]
    assert kv["evidence"]["recomputed"] and "it was recomputed" in kv["summary"]
