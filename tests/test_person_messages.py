"""What a person reads when values are wrong: each message names the line (or the --set flag),
the cause and the fix. The tests read the words, not only the exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl import pipeline
from pdctl.cli.app import app
from pdctl.errors import InputError
from pdctl.values.loader import ValuesLoadError, loads
from tests.helpers import TUTORIAL_VALUES

runner = CliRunner()
TUTORIAL = TUTORIAL_VALUES.read_text()
PREFILL_LEN = "servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen"


def _validate(tmp_path: Path, text: str, *args: str) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["validate", str(path), *args])
    assert result.exit_code == 1, result.output
    return result.stdout.replace(str(path), "values.yaml")


def _syntax(text: str) -> ValuesLoadError:
    with pytest.raises(ValuesLoadError) as caught:
        loads(text)
    assert caught.value.code == "YAML001"
    return caught.value


# ---- YAML syntax: the line where the structure broke, the likely mistake, the fix


def test_dedented_key_names_its_line_and_the_blocks_around_it(tmp_path: Path) -> None:
    text = TUTORIAL.replace("        maxModelLen: 32000", "       maxModelLen: 32000", 1)
    out = _validate(tmp_path, text)
    assert out.startswith("values.yaml:20: error YAML001: this line's indentation does not match")
    assert "`maxModelLen:` starts at column 8" in out
    assert "`enablePrefixCaching:` (line 19) starts at column 9" in out
    assert "`vllmConfig:` (line 17) starts at column 7" in out
    assert "indented like its siblings" in out and "expected <block end>" not in out


def test_key_indented_under_a_key_that_has_its_value() -> None:
    error = _syntax("a:\n  b: 1\n   c: 2\n")
    assert (error.line, error.column) == (3, 5)
    assert "`c:` is indented more than `b:` on line 2" in error.reason
    assert "already given on that line" in error.reason
    assert "start `c:` at column 3" in error.reason
    assert "mapping values are not allowed" not in error.reason


def test_a_value_is_never_quoted() -> None:
    error = _syntax("pool:\n  hf_token: hf_SuperSecret123\n    name: x\n")
    assert "`hf_token:`" in error.reason and "SuperSecret" not in error.reason


def test_list_item_at_the_wrong_indentation() -> None:
    error = _syntax("a:\n  items:\n    - x\n   - y\n")
    assert error.line == 4
    assert "`- y` starts at column 4" in error.reason
    assert "`- x` (line 3) starts at column 5" in error.reason


def test_list_item_among_keys_and_key_among_items() -> None:
    item = _syntax("a:\n  b: 1\n  - y\n")
    assert item.line == 3 and "a list item among the keys of a mapping" in item.reason
    assert "`b:` on line 2" in item.reason and "remove the `-`" in item.reason
    key = _syntax("a:\n  - x\n  b: 1\n")
    assert key.line == 3 and "the column of the list item `- x` on line 2" in key.reason


@pytest.mark.parametrize("quote", ['"', "'"])
def test_unclosed_quote_is_named_where_it_opens(quote: str) -> None:
    error = _syntax(f"a:\n  b: {quote}hello\n  c: 2\nd: 3\n")
    assert (error.line, error.column) == (2, 6)
    assert f"the quote `{quote}` opened at column 6 is never closed" in error.reason


@pytest.mark.parametrize(("opened", "closing"), [("[", "]"), ("{", "}")])
def test_unclosed_bracket(opened: str, closing: str) -> None:
    inner = "1, 2" if opened == "[" else "x: 1"
    error = _syntax(f"a:\n  b: {opened}{inner}\n  c: 2\n")
    assert error.line == 3
    assert f"opened with `{opened}` on line 2 (column 6) is still open here" in error.reason
    assert f"close it with `{closing}`" in error.reason


def test_missing_colon_is_named_on_its_own_line() -> None:
    error = _syntax("a:\n  b: 1\n  replicaCount 2\n  d: 3\n")
    assert (error.line, error.column) == (3, 3)
    assert "`replicaCount` has no `:` after it" in error.reason
    assert "write `replicaCount: value`" in error.reason
    spaceless = _syntax("a:\n  b:2\n  c: 1\n")
    assert "`b:2` on line 2 has no space after its `:`" in spaceless.reason


def test_two_keys_on_one_line() -> None:
    error = _syntax("a: b: c\n")
    assert error.line == 1 and "a second `key:` on one line (after `a:`)" in error.reason
    assert "quote the value" in error.reason


# ---- A key one level off: where it belongs


def test_key_beside_its_mapping_belongs_under_it(tmp_path: Path) -> None:
    text = TUTORIAL.replace(
        "        v1: 1\n", "        v1: 1\n      gpuMemoryUtilization: 0.9\n", 1
    )
    out = _validate(tmp_path, text)
    assert (
        "values.yaml:22: error SCHEMA [servingEngineSpec.modelSpec[0].gpuMemoryUtilization]: "
        "gpuMemoryUtilization belongs under servingEngineSpec.modelSpec[0].vllmConfig" in out
    )
    assert "hint: indent it under `vllmConfig:`" in out
    assert "allowed keys here" not in out and "unknown key" not in out


def test_key_one_level_too_deep_or_under_the_wrong_sibling(tmp_path: Path) -> None:
    text = TUTORIAL.replace(
        "        v1: 1\n", "        v1: 1\n        replicaCount: 2\n", 1
    ).replace("        enablePD: true\n", "        enablePD: true\n        maxModelLen: 9\n", 1)
    out = _validate(tmp_path, text)
    assert (
        "values.yaml:22: error SCHEMA [servingEngineSpec.modelSpec[0].vllmConfig.replicaCount]: "
        "replicaCount belongs under servingEngineSpec.modelSpec[0], not in "
        "servingEngineSpec.modelSpec[0].vllmConfig" in out
    )
    assert "hint: indent it like `vllmConfig:`, a key of servingEngineSpec.modelSpec[0]" in out
    assert (
        "values.yaml:34: error SCHEMA [servingEngineSpec.modelSpec[0].lmcacheConfig.maxModelLen]:"
        " maxModelLen belongs under servingEngineSpec.modelSpec[0].vllmConfig" in out
    )


def test_typos_keep_did_you_mean_closest_first_and_each_unknown_key_is_named(
    tmp_path: Path,
) -> None:
    text = TUTORIAL.replace(
        "      replicaCount: 1\n", "      replicaCont: 1\n      REQUESTGPU: 1\n", 1
    )
    out = _validate(tmp_path, text)
    assert "values.yaml:12: error SCHEMA" in out and "hint: did you mean replicaCount?" in out
    assert "values.yaml:13: error SCHEMA" in out and "hint: did you mean requestGPU or" in out


# ---- Findings caused by --set: at the flag


def test_rule_finding_caused_by_set_is_at_the_flag(tmp_path: Path) -> None:
    out = _validate(tmp_path, TUTORIAL, "--set", f"{PREFILL_LEN}=8192")
    assert out.startswith(
        f"--set {PREFILL_LEN}=8192: error PD005 [servingEngineSpec.modelSpec[1].vllmConfig"
        '.maxModelLen]: is "32000" but prefill pool "llama-prefill" has "8192"'
    )
    assert "values.yaml:49" not in out


def test_schema_finding_caused_by_set_in_every_output(tmp_path: Path) -> None:
    flag = f"--set {PREFILL_LEN}=abc"
    out = _validate(tmp_path, TUTORIAL, *flag.split(" "))
    assert f"{flag}: error SCHEMA [{PREFILL_LEN}]: {PREFILL_LEN} must be of type integer" in out
    assert "values.yaml:20" not in out
    report = json.loads(_validate(tmp_path, TUTORIAL, *flag.split(" "), "-o", "json"))
    finding = next(f for f in report["files"][0]["findings"] if f["rule"] == "SCHEMA")
    assert (finding["file"], finding["line"], finding["set"]) == (None, None, f"{PREFILL_LEN}=abc")
    github = _validate(tmp_path, TUTORIAL, *flag.split(" "), "-o", "github")
    assert f"::error file=values.yaml,title=SCHEMA::{flag}: {PREFILL_LEN}: " in github


def test_a_file_finding_stays_at_its_line_beside_a_set(tmp_path: Path) -> None:
    """A --set of the prefill pool's token is read by PD103 for the decode pool too; the
    decode pool's placeholder is the file's, and stays at its line."""
    out = runner.invoke(
        app,
        ["validate", str(TUTORIAL_VALUES), "--set", "servingEngineSpec.modelSpec[0].hf_token=x"],
    ).stdout
    assert f"{TUTORIAL_VALUES}:62: warning PD103 [servingEngineSpec.modelSpec[1].hf_token]" in out
    assert "--set servingEngineSpec.modelSpec[0].hf_token=x: warning PD103" in out


def test_deploy_and_template_refusals_name_the_flag() -> None:
    with pytest.raises(InputError) as caught:
        pipeline.prepare([str(TUTORIAL_VALUES)], [f"{PREFILL_LEN}=8192"])
    assert any(
        line.startswith(f"--set {PREFILL_LEN}=8192: error PD005") for line in caught.value.details
    )


def test_locate_prefers_the_set_that_wrote_the_key_or_a_parent() -> None:
    values = pipeline.load_values(
        [str(TUTORIAL_VALUES)], ["routerSpec.extraArgs={a,b}", "routerSpec.replicaCount=2"]
    )
    assert values.locate(("routerSpec", "extraArgs", 1)).assignment == "routerSpec.extraArgs={a,b}"
    assert values.locate(("routerSpec", "replicaCount")).assignment == "routerSpec.replicaCount=2"
    kept = values.locate(("routerSpec", "containerPort"))
    assert (kept.file, kept.line, kept.assignment) == (str(TUTORIAL_VALUES), 70, None)
