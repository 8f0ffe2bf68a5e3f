"""One error per cause: when the schema refuses a key, the chart's refusals are not reported
(pdctl/validation/refusals.py) and pdctl's rules that read it stay silent (pdctl/rules/reads.py),
the error says what was meant, and no rule crashes on a value of the wrong type, whichever command
prints the findings."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl import pipeline
from pdctl.cli.app import app
from pdctl.findings import Finding, Severity
from pdctl.helm import find_helm
from pdctl.rules import run_rules
from pdctl.validation import schema_and_rules
from pdctl.validation.refusals import ChartAnswer, ask_chart
from pdctl.values.paths import format_path
from tests.helpers import ASSETS, CHART, load_values, write_values

NIXL = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
LLMD = load_values(ASSETS / "values-25-llm-d-router.yaml")
runner = CliRunner()

# A production-stack KubeRay pipeline-parallel file (its tutorial 15's shape): one GPU per pod,
# pipeline parallelism 2 over the Ray head and worker.
KUBERAY = {
    "servingEngineSpec": {
        "modelSpec": [
            {
                "name": "distilgpt2",
                "repository": "vllm/vllm-openai",
                "tag": "latest",
                "modelURL": "distilbert/distilgpt2",
                "requestGPU": 1,
                "vllmConfig": {"tensorParallelSize": 1, "pipelineParallelSize": 2},
                "raySpec": {
                    "headNode": {"requestCPU": 2, "requestMemory": "20Gi", "requestGPU": 1}
                },
            }
        ]
    }
}


def pool(values: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """values with keys of its first pool changed (dotted keys reach into mappings)."""
    changed = copy.deepcopy(values)
    for dotted, value in changes.items():
        node = changed["servingEngineSpec"]["modelSpec"][0]
        *parents, last = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return changed


def errors(tmp_path: Path, values: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    path = write_values(tmp_path, values)
    report = pipeline.validate([str(path)], pipeline.ValidateOptions())
    return [(f.rule, format_path(f.path), f.message, f.hint) for f in report.errors]


@pytest.mark.parametrize(
    ("values", "key"),
    [
        (pool(NIXL, requestGPU=0.5), "servingEngineSpec.modelSpec[0].requestGPU"),
        (pool(NIXL, vllmConfig__dataParallelSize=0), "vllmConfig.dataParallelSize"),
        (pool(NIXL, pvcStorage="10Gi", pvcAccessMode=3), "modelSpec[0].pvcAccessMode"),
        (pool(LLMD, kvTransfer__bootstrapPort="x"), "kvTransfer.bootstrapPort"),
        (pool(NIXL, vllmConfig__tensorParallelSize="two"), "vllmConfig.tensorParallelSize"),
    ],
    ids=["fractional-gpu", "zero-dp", "numeric-access-mode", "string-port", "string-tp"],
)
def test_a_refused_value_gives_one_schema_error(
    tmp_path: Path, values: dict[str, Any], key: str
) -> None:
    found = errors(tmp_path, values)
    assert len(found) == 1 and found[0][0] == "SCHEMA" and found[0][1].endswith(key), found
    # Without the schema's verdict the rules still answer: they guard every key they read.
    assert isinstance(run_rules(values, None), list)


def test_a_misspelt_router_type_gives_one_error_that_says_what_was_meant(tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    values["routerSpec"]["type"] = "vllm_router"
    found = errors(tmp_path, values)
    assert [(rule, key, hint) for rule, key, _, hint in found] == [
        ("SCHEMA", "routerSpec.type", "did you mean vllm-router?")
    ]
    # What the schema silences: the chart would have said the router cannot route NIXL.
    answer = ask_chart(find_helm(), values, CHART, "pd", "default")
    assert any(f.rule == "PD017" for f in answer.refusals)


def test_a_kuberay_file_is_refused_by_name_alone(tmp_path: Path) -> None:
    found = errors(tmp_path, KUBERAY)
    assert [(rule, key) for rule, key, _, _ in found] == [
        ("PD019", "servingEngineSpec.modelSpec[0].raySpec")
    ]
    assert "KubeRay is not supported" in found[0][2] and "multiNode" in found[0][2]


def test_a_null_that_deletes_a_needed_default_is_named(tmp_path: Path) -> None:
    values = copy.deepcopy(NIXL)
    values["routerSpec"]["servicePort"] = None
    assert errors(tmp_path, values) == [
        (
            "SCHEMA",
            "routerSpec.servicePort",
            "routerSpec lacks the required key 'servicePort'",
            "a null deletes the chart's default for this key: give a value or leave it out",
        )
    ]


def test_findings_carry_the_keys_their_rule_read(tmp_path: Path) -> None:
    """What the silencing stands on: a rule's finding knows the keys behind it."""
    values = pool(NIXL, vllmConfig__gpuMemoryUtilization=0.97)
    found = [f for f in run_rules(values, None) if f.rule == "PD011"]
    assert found
    read = {format_path(path) for path in found[0].inputs}
    assert "servingEngineSpec.modelSpec[0].vllmConfig.gpuMemoryUtilization" in read


@pytest.mark.parametrize("command", [["template"], ["deploy", "--dry-run"]])
def test_template_and_deploy_print_the_hints_validate_prints(
    tmp_path: Path, command: list[str]
) -> None:
    values = copy.deepcopy(NIXL)
    values["routerSpec"]["type"] = "vllm_router"
    result = runner.invoke(app, [*command, "-f", str(write_values(tmp_path, values))])
    assert result.exit_code == 1
    assert "hint: did you mean vllm-router?" in result.stderr
    assert "Traceback" not in result.output


def test_validate_refuses_a_bare_string_for_its_list_of_files() -> None:
    """mypy refuses the call (the tests are type-checked); at run time it raises."""
    name: Any = str(ASSETS / "values-17-nixl-vllm-router.yaml")
    with pytest.raises(TypeError, match="list of file names"):
        pipeline.validate(name, pipeline.ValidateOptions())


def test_helm_applies_the_schema_first_and_a_failure_there_asks_no_refusal() -> None:
    """Asked with schema=True, helm applies values.schema.json as `helm install` does: a value
    the schema refuses stops it before the chart's refusals (PD017 here, without the schema)."""
    values = copy.deepcopy(NIXL)
    values["routerSpec"]["type"] = "vllm_router"
    answer = ask_chart(find_helm(), values, CHART, "pd", "default", schema=True)
    assert answer.schema_failed and not any(f.rule.startswith("PD") for f in answer.refusals)
    refused = pool(NIXL, modelURL="other/model")
    answer = ask_chart(find_helm(), refused, CHART, "pd", "default", schema=True)
    assert not answer.schema_failed and any(f.rule.startswith("PD") for f in answer.refusals)


def test_values_helm_renders_skip_pdctls_own_schema_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """helm's schema pass accepted them: pdctl's (jsonschema, which says where and why) is left
    for the values helm fails."""

    def not_asked(*_: Any) -> list[Any]:
        raise AssertionError("pdctl's schema pass ran for values helm rendered")

    monkeypatch.setattr(schema_and_rules, "_schema_findings", not_asked)
    findings = schema_and_rules.check_values(find_helm(), NIXL, "pd", CHART)
    assert not [f for f in findings if f.severity.value == "error"], findings


def test_where_helms_schema_pass_fails_and_pdctls_accepts_the_refusals_are_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Should helm's schema pass and pdctl's ever disagree (helm stricter), the chart's refusals
    are asked again without helm's pass, as validate asked them before helm applied the schema.
    The first answer is a test double: the pinned helms and jsonschema agree on the corpus."""
    refused = pool(NIXL, modelURL="other/model")
    helm = find_helm()

    @contextmanager
    def schema_fails(*_: Any, **__: Any) -> Iterator[Callable[[], ChartAnswer]]:
        yield lambda: ChartAnswer([Finding("HELM", Severity.error, "schema")], [], True)

    expected = schema_and_rules.check_values(helm, refused, "pd", CHART)
    monkeypatch.setattr(schema_and_rules, "asking_chart", schema_fails)
    found = schema_and_rules.check_values(helm, refused, "pd", CHART)
    assert [f.rule for f in found] == [f.rule for f in expected]
    assert any(f.rule.startswith("PD0") for f in found), found
