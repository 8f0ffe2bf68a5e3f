"""PD026 reads the flags the chart owns from the commands it renders (issues 39 and 45): a flag
added to the engine's or the router's command in a template is refused in `extraArgs` with no
other edit, in every spelling argparse takes; a flag the chart does not render stays the user's."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from pdctl.helm import Helm, TemplateRequest, find_helm
from pdctl.validation.schema_and_rules import check_values
from tests.helpers import ASSETS, CHART, load_values, write_values

ENGINE = "servingEngineSpec.modelSpec[0].vllmConfig.extraArgs"
# Where the chart starts each command: the engine's `vllm serve` and vllm-router's.
ENGINE_START = '"--host" "0.0.0.0" "--port" (include "pd-stack.vllmPort" .)'
ROUTER_START = (
    '"--port" (include "pd-stack.int" (dict "key" "routerSpec.containerPort" "value"'
    ' $router.containerPort)) "--vllm-pd-disaggregation"'
)


def values(engine: list[str], router: list[str]) -> dict[str, Any]:
    """The vllm-router NIXL tutorial with these extraArgs on the first pool and the router."""
    data = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
    data["servingEngineSpec"]["modelSpec"][0]["vllmConfig"]["extraArgs"] = engine
    data["routerSpec"]["extraArgs"] = router
    return data


def chart_with_new_flags(tmp_path: Path) -> Path:
    """A copy of the chart whose engine and router commands each gain one flag, and nothing else."""
    copy = tmp_path / "chart"
    shutil.copytree(CHART, copy)
    for name, start, flag in [
        ("_helpers-engine.tpl", ENGINE_START, '"--new-engine-flag" "1"'),
        ("_router.tpl", ROUTER_START, '"--new-router-flag"'),
    ]:
        template = copy / "templates" / name
        text = template.read_text()
        assert text.count(start) == 1, name
        template.write_text(text.replace(start, f"{start} {flag}"))
    return copy


def helm_template(helm: Helm, chart: Path, values_file: Path) -> tuple[int, str]:
    request = TemplateRequest(chart=chart, release="pd", values_files=(values_file,))
    result = helm.run(request.args())
    return result.returncode, result.stderr


def test_a_flag_added_to_a_command_in_a_template_is_refused(helm: Helm, tmp_path: Path) -> None:
    """Issue 45's acceptance: the new flags, whole or abbreviated, are the user's in the shipped
    chart and refused by the copy whose templates render them, by helm and by validate."""
    given = values(["--new-engine-flag", "2"], ["--new-router=x"])
    values_file = write_values(tmp_path, given)
    assert helm_template(helm, CHART, values_file)[0] == 0
    code, stderr = helm_template(helm, chart_with_new_flags(tmp_path), values_file)
    assert code != 0
    assert f"[PD026] {ENGINE}[0]: --new-engine-flag sets --new-engine-flag," in stderr, stderr
    assert "[PD026] routerSpec.extraArgs[0]: --new-router=x sets --new-router-flag," in stderr


def test_validate_refuses_a_new_flag_with_its_key_path(tmp_path: Path) -> None:
    found = check_values(
        find_helm(), values(["--new_engine"], []), "pd", chart_with_new_flags(tmp_path)
    )
    assert [(f.rule, f.key) for f in found if f.severity.value == "error"] == [
        ("PD026", f"{ENGINE}[0]")
    ]


def refused(engine: list[str], router: list[str], **vllm: Any) -> list[tuple[str, str]]:
    """(key, message) of each PD026 that validate reports for these extraArgs."""
    data = values(engine, router)
    data["servingEngineSpec"]["modelSpec"][0]["vllmConfig"].update(vllm)
    found = check_values(find_helm(), data, "pd", CHART)
    return [(f.key, f.message) for f in found if f.rule == "PD026"]


@pytest.mark.parametrize(
    ("arg", "owned"),
    [
        ("--hos", "--host"),
        ("--host=0.0.0.0", "--host"),
        ("--p", "--port"),
        ("--max_model_len", "--max-model-len"),
        ("--max-model=8", "--max-model-len"),
        ("--kv-transfer-config.kv_role=kv_both", "--kv-transfer-config"),
        ("--no-enable-prefix", "--no-enable-prefix-caching"),
    ],
)
def test_an_engine_flag_of_the_chart_is_refused_in_every_spelling(arg: str, owned: str) -> None:
    assert refused([arg, "1"], [], enablePrefixCaching=True) == [
        (f"{ENGINE}[0]", f"{arg} sets {owned}, a flag the chart sets in this command")
    ]


@pytest.mark.parametrize(
    "arg", ["--prometheus_host=0.0.0.0", "--prometheus-h", "--hos", "--port=1", "--kv-conn"]
)
def test_a_router_flag_of_the_chart_is_refused_in_every_spelling(arg: str) -> None:
    assert [key for key, _ in refused([], [arg, "x"])] == ["routerSpec.extraArgs[0]"]


def test_the_refusal_names_the_key_the_chart_sets_the_flag_from() -> None:
    found = check_values(find_helm(), values(["--gpu_memory_utilization=0.5"], []), "pd", CHART)
    (refusal,) = [f for f in found if f.rule == "PD026"]
    assert refusal.hint == (
        "set servingEngineSpec.modelSpec[0].vllmConfig.gpuMemoryUtilization instead"
    )


def test_flags_the_chart_does_not_render_stay_the_user_s() -> None:
    """Not a prefix of a rendered flag: --tensor-parallel-size without its key, a value, `--`."""
    engine = ["--enforce-eager", "--tensor-parallel-size", "2", "--max-num-batched-tokens=8"]
    assert refused([*engine, "--", "--anything"], ["--request-timeout-secs", "60"]) == []


def test_the_llm_d_epp_s_flags_are_warned_about_not_refused() -> None:
    """The EPP is a Go program (exact flag names): its rendered flags in extraArgs are PD117's."""
    data = load_values(ASSETS / "values-25-llm-d-router.yaml")
    data["routerSpec"]["extraArgs"] = ["--grpc-port=9010", "--grpc"]
    found = check_values(find_helm(), data, "pd", CHART)
    assert [(f.rule, f.key) for f in found if f.rule in {"PD026", "PD117"}] == [
        ("PD117", "routerSpec.extraArgs[0]")
    ]
