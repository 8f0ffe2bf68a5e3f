"""Secrets (hf_token, vllmApiKey, env values named *TOKEN*, *KEY*, *SECRET*, *PASSWORD*) never
reach what pdctl prints, and control characters reach the terminal only as visible escapes."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import secrets
from pdctl.cli.app import app
from pdctl.helm import Helm
from tests.helpers import ROOT, TUTORIAL_VALUES, write_values

runner = CliRunner()
# Real-looking: "xxx" inside a token does not make it a placeholder.
TOKEN = "hf_AbcxxxDefGhijKlmnOpqrStuvWxyz1234"
PASSWORD = "pa55-w0rd-of-foo"
ESC = "\x1b[2J"


@pytest.fixture(autouse=True)
def _no_remembered_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test masks only what its own command loaded (CliRunner shares one process)."""
    monkeypatch.setattr(secrets, "_known", set())


def _tutorial(**pool_changes: Any) -> dict[str, Any]:
    values = yaml.safe_load(TUTORIAL_VALUES.read_text())
    for pool in values["servingEngineSpec"]["modelSpec"]:
        pool.update(pool_changes)
    return values


def _with_secrets(tmp_path: Path, token: Any = TOKEN) -> Path:
    env = [{"name": "foo_Password", "value": PASSWORD}, {"name": "PLAIN", "value": "visible-1"}]
    return write_values(tmp_path, _tutorial(hf_token=token, env=env))


def _leaks(text: str) -> list[str]:
    b64 = [base64.b64encode(s.encode()).decode() for s in (TOKEN, PASSWORD)]
    return [s for s in (TOKEN, PASSWORD, *b64) if s in text]


# ---- what a secret is ----------------------------------------------------------------------


def test_collect_finds_every_kind_of_secret() -> None:
    values = {
        "servingEngineSpec": {
            "vllmApiKey": "engine-api-key-1",
            "env": [{"name": "OPENAI_API_KEY", "value": "sk-env-value"}],
            "modelSpec": [
                {
                    "name": "a",
                    "hf_token": TOKEN,
                    "env": [{"name": "DB_SECRET", "value": "dbsecret"}],
                },
                {"name": "b", "hf_token": {"secretName": "hf-secret", "secretKey": "token"}},
                {"name": "c", "hf_token": "<your-hf-token>"},
            ],
        },
        "routerSpec": {
            "vllmApiKey": "router-api-key",
            "extraEnv": [
                {"name": "my_token", "value": "tok-lower"},
                {"name": "HOME", "value": "/x"},
            ],
        },
    }
    assert secrets.collect(values) == {
        "engine-api-key-1",
        "sk-env-value",
        TOKEN,
        "dbsecret",
        "router-api-key",
        "tok-lower",
    }  # not Secret references, placeholders or env values of other names


@pytest.mark.parametrize(
    "value",
    ["<your-hf-token>", "<hf-token>", "hf_xxx", "HF_XXXXXXXX", "xxx", "changeme", "your-token"],
)
def test_placeholders_match_whole(value: str) -> None:
    assert secrets.is_placeholder(value)


@pytest.mark.parametrize("value", [TOKEN, "hf_xxxReal", "changeme-later-9f3a", "my<tok>en"])
def test_a_real_token_is_not_a_placeholder(value: str) -> None:
    assert not secrets.is_placeholder(value)


def test_masked_keeps_the_shape_and_hides_the_secrets() -> None:
    values = {"hf_token": {"secretName": "s", "token": TOKEN}, "env": [{"name": "K", "value": 1}]}
    assert secrets.masked(values) == {
        "hf_token": secrets.MARKER,
        "env": [{"name": "K", "value": 1}],
    }


# ---- validate ------------------------------------------------------------------------------


@pytest.mark.parametrize("output", ["text", "json", "github"])
def test_validate_never_prints_a_real_token(tmp_path: Path, output: str) -> None:
    result = runner.invoke(app, ["validate", str(_with_secrets(tmp_path)), "-o", output])
    assert result.exit_code == 0, result.output
    assert "PD103" not in result.output  # a real token, not a placeholder
    assert _leaks(result.output) == []


@pytest.mark.parametrize("output", ["text", "github"])
def test_a_placeholder_is_still_reported_without_its_value(tmp_path: Path, output: str) -> None:
    values = _with_secrets(tmp_path, token="hf_xxxxxxxxxxxx")
    result = runner.invoke(app, ["validate", str(values), "-o", output])
    assert "PD103" in result.output and "servingEngineSpec.modelSpec[0].hf_token" in result.output
    assert "hf_xxxxxxxxxxxx" not in result.output


@pytest.mark.parametrize(
    ("token", "value_printed"),
    [
        (98765432101, "98765432101"),  # a token given as a number
        ({"secretName": "hf", "secretKey": "token", "value": TOKEN}, TOKEN),  # inside a mapping
        ([TOKEN], TOKEN),
    ],
)
def test_schema_errors_do_not_echo_a_token_of_the_wrong_type(
    tmp_path: Path, token: Any, value_printed: str
) -> None:
    result = runner.invoke(app, ["validate", str(_tutorial_file(tmp_path, token)), "-o", "json"])
    assert result.exit_code == 1
    findings = json.loads(result.stdout)["files"][0]["findings"]
    schema = [f for f in findings if f["rule"] == "SCHEMA"]
    assert any(f["path"].startswith("servingEngineSpec.modelSpec[0].hf_token") for f in schema)
    assert value_printed not in result.output


def _tutorial_file(tmp_path: Path, token: Any) -> Path:
    return write_values(tmp_path, _tutorial(hf_token=token))


def test_schema_error_on_a_secret_env_value_is_masked(tmp_path: Path) -> None:
    values = _tutorial(env=[{"name": "FOO_PASSWORD", "value": 24681357}])
    result = runner.invoke(app, ["validate", str(write_values(tmp_path, values))])
    assert result.exit_code == 1
    assert "servingEngineSpec.modelSpec[0].env[0].value" in result.stdout
    assert "24681357" not in result.output and secrets.MARKER in result.stdout


def test_schema_errors_quote_a_value_that_holds_a_secret_masked(tmp_path: Path) -> None:
    values = _tutorial(hf_token=TOKEN)
    values["servingEngineSpec"]["modelSpec"][0]["env"] = {"FOO_TOKEN": "x"}  # not a list
    values["servingEngineSpec"]["modelSpec"][1] = "pool-as-a-string"
    values["routerSpec"]["vllmApiKey"] = ["router-key-in-a-list"]
    result = runner.invoke(app, ["validate", str(write_values(tmp_path, values))])
    assert result.exit_code == 1
    assert "router-key-in-a-list" not in result.output and TOKEN not in result.output


# ---- template and deploy -------------------------------------------------------------------


def test_template_warnings_never_print_a_token(tmp_path: Path, helm4: Helm) -> None:
    values = _with_secrets(tmp_path)
    result = runner.invoke(app, ["template", "-f", str(values), "--helm", str(helm4.path)])
    assert result.exit_code == 0, result.output
    assert _leaks(result.stderr) == []
    # The manifests are for a pipe to kubectl: the chart's Secret keeps its data there.
    assert base64.b64encode(TOKEN.encode()).decode() in result.stdout


@pytest.mark.parametrize("output", ["text", "json"])
def test_deploy_dry_run_masks_secrets_in_the_manifests(
    tmp_path: Path, helm4: Helm, monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    values = _with_secrets(tmp_path)
    args = ["deploy", "--dry-run", "-f", str(values), "--helm", str(helm4.path), "-o", output]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "visible-1" in result.output  # the manifests are there: an env value of another name
    assert _leaks(result.output) == []
    assert secrets.MARKER in result.output


def test_set_secrets_are_masked_too(
    tmp_path: Path, helm4: Helm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    args = ["deploy", "--dry-run", "-f", str(TUTORIAL_VALUES), "--helm", str(helm4.path)]
    sets = ["--set", f"servingEngineSpec.vllmApiKey={PASSWORD}"]
    result = runner.invoke(app, [*args, *sets])
    assert result.exit_code == 0, result.output
    assert _leaks(result.output) == []


@pytest.fixture
def refusing_chart(tmp_path: Path) -> Iterator[Path]:
    """A chart whose template fails with a message quoting the token and an ESC sequence, so the
    real helm writes both to its stderr."""
    chart = tmp_path / "refusing"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: refusing\nversion: 0.1.0\n")
    (chart / "templates" / "fail.yaml").write_text(
        '{{ fail (printf "bad token %s \\x1b[2J" '
        "(index .Values.servingEngineSpec.modelSpec 0).hf_token) }}\n"
    )
    yield chart


def test_helm_stderr_is_masked_and_escaped(
    tmp_path: Path, helm4: Helm, refusing_chart: Path
) -> None:
    values = _with_secrets(tmp_path)
    args = ["template", "-f", str(values), "--chart", str(refusing_chart), "--skip-validation"]
    result = runner.invoke(app, [*args, "--helm", str(helm4.path)])
    assert result.exit_code == 1
    assert f"bad token {secrets.MARKER} \\x1b[2J" in result.stderr
    assert TOKEN not in result.stderr and "\x1b" not in result.stderr


# ---- control characters --------------------------------------------------------------------


def test_an_escape_in_a_key_is_printed_escaped(tmp_path: Path) -> None:
    """As a subprocess: the bytes a terminal would get."""
    values = tmp_path / "values.yaml"
    values.write_text(TUTORIAL_VALUES.read_text() + '  "\\e[2Jclear": 1\n')
    for output in ("text", "github"):
        result = subprocess.run(
            [sys.executable, "-m", "pdctl", "validate", str(values), "-o", output],
            capture_output=True,
            cwd=ROOT,
            check=False,
        )
        assert result.returncode == 1
        assert b"\x1b" not in result.stdout + result.stderr
        assert b"routerSpec.\\x1b[2Jclear" in result.stdout


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (f"a{ESC}b", "a\\x1b[2Jb"),
        ("over\rwrite", "over\\x0dwrite"),
        ("nul\x00 del\x7f c1\x9b", "nul\\x00 del\\x7f c1\\x9b"),
        ("bidi\u202eevil", "bidi\\u202eevil"),
        ("line\n\ttab", "line\n\ttab"),
    ],
)
def test_control_characters_are_escaped_where_text_is_printed(
    raw: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pdctl.cli import _output

    _output.data(raw)
    _output.info(raw)
    _output.error(raw, hint=raw)
    out, err = capsys.readouterr()
    assert out == shown + "\n"
    assert err == f"{shown}\nerror: {shown}\nhint: {shown}\n"


def test_the_clusters_words_in_the_pod_table_are_escaped_and_not_markup() -> None:
    """A kubelet message quoting an image pull error: rich markup in it is not interpreted (a
    stray closing tag would raise) and its ESC is shown escaped."""
    import io

    from rich.console import Console

    from pdctl.cli._release_view import pod_table
    from pdctl.cluster import Pod
    from pdctl.release.pods import Group

    pod = Pod("pd-x-0", {}, "Pending", False, 0, "ErrImagePull", f"pull [/bold] {ESC}failed")
    group = Group("llama", "prefill", "pd-x", 1, pods=[pod])
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(pod_table([group]))
    assert "ErrImagePull: pull [/bold] \\x1b[2Jfailed" in out.getvalue()
    assert "\x1b" not in out.getvalue()
