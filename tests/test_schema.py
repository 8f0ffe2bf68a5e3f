"""The strict values schema: one source, and helm itself refuses bad values with it."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pdctl.helm import Helm
from tests.helpers import CHART, ROOT, TUTORIAL_VALUES, helm_template_result, write_values

TUTORIAL = yaml.safe_load(TUTORIAL_VALUES.read_text())


def test_chart_schema_is_generated_from_the_source() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_schema.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_schema_is_valid_draft07() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)


def test_chart_defaults_pass_the_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator(schema).validate(yaml.safe_load((CHART / "values.yaml").read_text()))


def mutated(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    values = copy.deepcopy(TUTORIAL)
    change(values)
    return values


def _set_pool(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda v: v["servingEngineSpec"]["modelSpec"][0].__setitem__(key, value)


def _set_vllm(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda v: v["servingEngineSpec"]["modelSpec"][0]["vllmConfig"].__setitem__(key, value)


def _set_lmcache(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda v: v["servingEngineSpec"]["modelSpec"][0]["lmcacheConfig"].__setitem__(key, value)


REFUSED = {
    "unknown top-level key": (lambda v: v.__setitem__("routerSpecc", {}), "routerSpecc"),
    "unknown key in a modelSpec entry": (_set_pool("replicas", 2), "replicas"),
    "string replica count": (_set_pool("replicaCount", "2"), "replicaCount"),
    "negative replica count": (_set_pool("replicaCount", -1), "replicaCount"),
    "bad kvRole": (_set_lmcache("kvRole", "producer"), "kvRole"),
    "uppercase pool name": (_set_pool("name", "Llama-Prefill"), "name"),
    "malformed memory quantity": (_set_pool("requestMemory", "30 GB"), "requestMemory"),
    "bad nixlRole": (_set_lmcache("nixlRole", "sendr"), "nixlRole"),
    "port out of range": (
        lambda v: v["routerSpec"].__setitem__("servicePort", 70000),
        "servicePort",
    ),
    "missing modelURL": (
        lambda v: v["servingEngineSpec"]["modelSpec"][1].pop("modelURL"),
        "modelURL",
    ),
    "bad routing logic": (
        lambda v: v["routerSpec"].__setitem__("routingLogic", "disaggregated"),
        "routingLogic",
    ),
    "label value too long": (
        lambda v: v["routerSpec"]["labels"].__setitem__("environment", "x" * 64),
        "environment",
    ),
    "prometheus multiproc dir on a path the chart mounts": (
        _set_vllm("prometheusMultiprocDir", "/dev/shm"),
        "prometheusMultiprocDir",
    ),
    "prometheus multiproc dir not absolute": (
        _set_vllm("prometheusMultiprocDir", "tmp/prom"),
        "prometheusMultiprocDir",
    ),
    "prometheus multiproc dir a chart mount spelt otherwise": (
        _set_vllm("prometheusMultiprocDir", "/data/"),
        "prometheusMultiprocDir",
    ),
    "gpu memory utilization above 1": (
        _set_vllm("gpuMemoryUtilization", 1.5),
        "gpuMemoryUtilization",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_helm_refuses_bad_values(helm: Helm, tmp_path: Path, case: str) -> None:
    change, key = REFUSED[case]
    result = helm_template_result(helm, write_values(tmp_path, mutated(change)))
    assert result.returncode != 0, f"helm accepted values with {case}"
    assert "schema" in result.stderr.lower()
    assert key in result.stderr


def test_chart_refuses_a_model_label_that_contradicts_the_pool(helm: Helm, tmp_path: Path) -> None:
    change = lambda v: v["servingEngineSpec"]["modelSpec"][0]["labels"].__setitem__("model", "x")  # noqa: E731
    result = helm_template_result(helm, write_values(tmp_path, mutated(change)))
    assert result.returncode != 0
    assert "labels.model" in result.stderr and "must equal the pool name" in result.stderr
