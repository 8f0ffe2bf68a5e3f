"""The chart's checks and `pdctl validate` read one table of vLLM version ranges
(helm/files/connectors.yaml); at every boundary they must agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pdctl import pipeline
from pdctl.helm import Helm
from tests.helpers import helm_template_result, write_values


def pair(connector: str, version: str, **kv: Any) -> dict[str, Any]:
    def pool(name: str, role: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": name, "role": role, "repository": "vllm/vllm-openai"}
        spec["tag"] = f"v{version}"
        spec |= {"modelURL": "m", "requestGPU": 1, "kvTransfer": {"connector": connector, **kv}}
        if connector == "PyNcclConnector" and role == "decode":
            spec["kvTransfer"]["peerPool"] = "p"
        return spec

    return {
        "servingEngineSpec": {"modelSpec": [pool("p", "prefill"), pool("d", "decode")]},
        "routerSpec": {"enableRouter": False},
    }


CASES = [
    ("PyNcclConnector", "0.10.0", {}, True),
    ("PyNcclConnector", "0.10.1", {}, False),
    ("P2pNcclConnector", "0.9.1", {}, False),
    ("P2pNcclConnector", "0.9.2", {}, True),
    ("P2pNcclConnector", "0.22.1", {}, True),
    ("P2pNcclConnector", "0.23.0", {}, False),
    ("NixlConnector", "0.11.0", {"loadFailurePolicy": "fail"}, False),
    ("NixlConnector", "0.11.1", {"loadFailurePolicy": "fail"}, True),
]


@pytest.mark.parametrize(("connector", "version", "extra", "supported"), CASES)
def test_chart_and_validate_agree(
    helm4: Helm,
    tmp_path: Path,
    connector: str,
    version: str,
    extra: dict[str, Any],
    supported: bool,
) -> None:
    values = pair(connector, version, **extra)
    rendered = helm_template_result(helm4, write_values(tmp_path, values))
    report = pipeline.validate([str(write_values(tmp_path, values))], pipeline.ValidateOptions())
    flagged = [f for f in report.errors if f.rule == "PD012"]
    assert (rendered.returncode == 0) is supported, rendered.stderr
    assert (not flagged) is supported, flagged
