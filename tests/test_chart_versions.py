"""What the chart renders when it cannot know the image's vLLM version, and the golden render of
the PD tutorial. What it refuses is in tests/test_corpus.py (one corpus for chart and validate)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pdctl import manifests
from pdctl.helm import Helm
from tests.helpers import (
    ASSETS,
    CHART,
    ROOT,
    TUTORIAL_VALUES,
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


def test_tutorial_render_is_unchanged(helm: Helm) -> None:
    """The PD tutorial renders byte for byte as the golden file (tests/golden) records it."""
    golden = (ROOT / "tests" / "golden" / "values-16-disagg-prefill.yaml").read_text()
    result = helm.run(["template", "pd", str(CHART), "-f", str(TUTORIAL_VALUES)])
    assert result.returncode == 0, result.stderr
    assert result.stdout == golden
