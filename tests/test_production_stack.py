"""Values written for vLLM production-stack: its keys are taken with the same effect, or refused by
name with the reason (helm/files/production-stack.yaml), by the chart and by validate alike."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from pdctl import pipeline, production_stack
from pdctl.helm import Helm
from tests.helpers import ASSETS, helm_template_result, load_values, write_values

KEYS = production_stack.load()
REFUSED = [key for key in KEYS.values() if key.status == "refused"]
NIXL = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")


def with_key(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """base with the key at a production-stack path set (list items: the first pool)."""
    values = copy.deepcopy(base)
    node: Any = values
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part.removesuffix("[]"), {})
        if part.endswith("[]"):
            node = node[0]
    node[last] = value
    return values


def validate(tmp_path: Path, values: dict[str, Any]) -> list[str]:
    path = write_values(tmp_path, values)
    report = pipeline.validate([str(path)], pipeline.ValidateOptions())
    return [f"{f.rule} {f.key}: {f.message}" for f in report.errors]


@pytest.mark.parametrize("key", REFUSED, ids=lambda k: k.path)
def test_refused_keys_are_refused_by_name_when_used(
    helm4: Helm, tmp_path: Path, key: production_stack.Key
) -> None:
    used = {key.used_when: "set"} if key.used_when else {"enabled": True, "replicas": 2}
    values = with_key(NIXL, key.path, used)
    errors = validate(tmp_path, values)
    where = key.path.replace("[]", "[0]")
    message = f"production-stack's {key.name} is not supported by pd-stack: {key.note}"
    assert errors == [f"PD019 {where}: {message}"]
    chart = helm_template_result(helm4, write_values(tmp_path, values))
    assert chart.returncode != 0 and f"[PD019] {where}: {message}" in chart.stderr


@pytest.mark.parametrize("key", REFUSED, ids=lambda k: k.path)
def test_refused_keys_pass_when_off(helm4: Helm, tmp_path: Path, key: production_stack.Key) -> None:
    """production-stack values files carry most features switched off: those pass."""
    off = {key.used_when: ""} if key.used_when else {"enabled": False}
    values = with_key(NIXL, key.path, off)
    assert validate(tmp_path, values) == []
    assert helm_template_result(helm4, write_values(tmp_path, values)).returncode == 0


def test_every_key_has_a_status_and_refusals_say_why() -> None:
    for key in KEYS.values():
        assert key.status in {"same", "differs", "refused"}, key.path
        if key.status != "same":
            assert len(key.note) > 20, key.path
