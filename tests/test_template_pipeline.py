"""`pdctl template` goes through the values pipeline: what it validated is what helm renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import pipeline
from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.helpers import ASSETS, ROOT, TUTORIAL_VALUES, write_values

runner = CliRunner()
CORPUS = ROOT / "tests" / "corpus" / "bad"
NIXL = ASSETS / "values-17-nixl-vllm-router.yaml"


@pytest.fixture
def helm_opt(helm4: Helm) -> list[str]:
    return ["--helm", str(helm4.path)]


def test_a_pd_rule_error_is_refused_before_helm(helm_opt: list[str]) -> None:
    bad = CORPUS / "pd004-port-mismatch.yaml"
    result = runner.invoke(app, ["template", "-f", str(bad), *helm_opt])
    assert result.exit_code == 1
    assert f"{bad}:30: error PD004 [servingEngineSpec.modelSpec[0].lmcacheConfig.nixlPeerPort]" in (
        result.stderr
    )
    assert 'is 55555 but its receiver "llama-decode" listens on 55556' in result.stderr
    assert "error: the values were refused: 1 error(s)" in result.stderr
    assert "--skip-validation" in result.stderr and not result.stdout


def test_skip_validation_hands_the_values_to_helm(helm_opt: list[str]) -> None:
    """PD007 is validate-only (Kubernetes refuses the long name itself at install), so with
    --skip-validation helm renders the file."""
    bad = CORPUS / "pd007-name-too-long.yaml"
    release = ["--release", "a-rather-long-release-name-for-this-cluster"]
    refused = runner.invoke(app, ["template", "-f", str(bad), *release, *helm_opt])
    assert refused.exit_code == 1 and "PD007" in refused.stderr
    rendered = runner.invoke(
        app, ["template", "-f", str(bad), *release, "--skip-validation", *helm_opt]
    )
    assert rendered.exit_code == 0, rendered.output
    assert "a-rather-long-release-name-for-this-cluster-llama-prefill-engine-service" in (
        rendered.stdout
    )


def test_skip_validation_still_refuses_hostile_yaml(helm_opt: list[str]) -> None:
    bad = CORPUS / "yaml-alias-bomb.yaml"
    result = runner.invoke(app, ["template", "-f", str(bad), "--skip-validation", *helm_opt])
    assert result.exit_code == 1 and "alias bomb" in result.stderr


def test_warnings_are_printed_and_do_not_stop_the_render(helm_opt: list[str]) -> None:
    result = runner.invoke(app, ["template", "-f", str(TUTORIAL_VALUES), *helm_opt])
    assert result.exit_code == 0
    assert "warning PD103 [servingEngineSpec.modelSpec[0].hf_token]" in result.stderr
    assert "kind: Deployment" in result.stdout


def test_several_files_and_set_are_merged_as_helm_merges_them(
    tmp_path: Path, helm_opt: list[str]
) -> None:
    override = write_values(
        tmp_path,
        {
            "servingEngineSpec": {
                "modelSpec": yaml.safe_load(NIXL.read_text())["servingEngineSpec"]["modelSpec"]
            },
            "routerSpec": {"replicaCount": 3, "vllmRouter": {"policy": "random"}},
        },
        "override.yaml",
    )
    args = ["template", "-f", str(NIXL), "-f", str(override), "--summary", "-o", "json"]
    result = runner.invoke(app, [*args, "--set", "routerSpec.replicaCount=2", *helm_opt])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["router"]["routing"] == "vllm-router PD (nixl)"
    values = pipeline.load_values([str(NIXL), str(override)], ["routerSpec.replicaCount=2"])
    # Maps merge key by key (vllmRouter keeps the first file's serviceDiscovery), --set wins.
    assert values.data["routerSpec"]["replicaCount"] == 2
    assert values.data["routerSpec"]["vllmRouter"]["policy"] == "random"
    assert values.data["routerSpec"]["vllmRouter"]["serviceDiscovery"] == "k8s"
    # Findings point into the file that set the key.
    policy_line = override.read_text().splitlines().index("    policy: random") + 1
    policy = values.locate(("routerSpec", "vllmRouter", "policy"))
    assert policy == pipeline.Origin(str(override), policy_line)
    assert values.locate(("routerSpec", "tag")).file == str(NIXL)


def test_the_validated_values_are_the_file_helm_gets(tmp_path: Path) -> None:
    values = pipeline.load_values(
        [str(NIXL)], ["routerSpec.replicaCount=2", "routerSpec.enableRouter=null"]
    )
    with pipeline.merged_file(values) as path:
        assert yaml.safe_load(path.read_text()) == values.data
    # null survives into the file, so helm drops the chart's default exactly as with --set.
    assert values.data["routerSpec"]["enableRouter"] is None


def test_files_as_arguments_merge_before_f_files(helm_opt: list[str], tmp_path: Path) -> None:
    override = write_values(tmp_path, {"routerSpec": {"replicaCount": 3}}, "replicas.yaml")
    result = runner.invoke(
        app, ["template", str(NIXL), "-f", str(override), "--summary", "-o", "json", *helm_opt]
    )
    assert result.exit_code == 0, result.output
    flat = runner.invoke(app, ["template", str(NIXL), str(override), *helm_opt]).stdout
    assert "replicas: 3" in flat
