"""What the chart renders when it cannot know the image's vLLM version, and the golden render of
the PD tutorial. What it refuses is in tests/test_corpus.py (one corpus for chart and validate)."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pdctl import manifests
from pdctl.helm import Helm
from tests.helpers import (
    ASSETS,
    CHART,
    ROOT,
    VALUES_FILES,
    container,
    helm_template_result,
    load_values,
    render_file,
    write_values,
)

NIXL = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
SEED = load_values(ASSETS / "values-21-pynccl-seed.yaml")


def change(base: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    values = copy.deepcopy(base)
    edit(values)
    return values


def pool(values: dict[str, Any], i: int) -> dict[str, Any]:
    return values["servingEngineSpec"]["modelSpec"][i]


def _set(i: int, path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(values: dict[str, Any]) -> None:
        target = pool(values, i)
        *parents, last = path.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value

    return edit


def _both(*edits: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def edit(values: dict[str, Any]) -> None:
        for e in edits:
            e(values)

    return edit


def test_unknown_version_renders_without_gates(helm4: Helm, tmp_path: Path) -> None:
    """A tag that names no vLLM version (and no vllmVersion) is not second-guessed."""
    values = change(
        SEED,
        _both(
            _set(0, "repository", "registry.example.com/vllm"),
            _set(0, "tag", "latest"),
            _set(1, "repository", "registry.example.com/vllm"),
            _set(1, "tag", "latest"),
        ),
    )
    result = helm_template_result(helm4, write_values(tmp_path, values))
    assert result.returncode == 0, result.stderr


def test_nixl_without_known_version_leaves_the_policy_out(helm4: Helm, tmp_path: Path) -> None:
    values = change(
        NIXL, _both(_set(0, "repository", "registry.example.com/vllm"), _set(0, "tag", "dev"))
    )
    objects = render_file(helm4, write_values(tmp_path, values))
    args = container(objects, "pd-qwen-prefill-deployment-vllm")["args"]
    config = json.loads(args[args.index("--kv-transfer-config") + 1])
    assert "kv_load_failure_policy" not in config
    assert manifests.find(objects, "Deployment", "pd-qwen-decode-deployment-vllm")


@pytest.mark.parametrize("values_file", VALUES_FILES, ids=lambda p: p.name)
def test_shipped_files_render_as_their_golden(helm: Helm, values_file: Path) -> None:
    """Every tutorial asset and helm/ci scenario renders byte for byte as its golden render
    (tests/golden/renders; PDCTL_REGEN_GOLDEN=1 rewrites them), with each pinned helm."""
    golden = ROOT / "tests" / "golden" / "renders" / values_file.name
    result = helm.run(["template", "pd", str(CHART), "-f", str(values_file)])
    assert result.returncode == 0, result.stderr
    if os.environ.get("PDCTL_REGEN_GOLDEN"):
        golden.write_text(result.stdout)
    assert result.stdout == golden.read_text()
