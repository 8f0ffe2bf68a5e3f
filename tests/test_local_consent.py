"""`pdctl up` runs a file as code on this machine: on a real render, what would change what runs
(env outside the chart's, another command, vLLM flags that load code) is refused unless the user
allows it by name; every process listens on loopback whatever form the render's flags take; the
rendered folder is read as every input is; the state folder is written without following links;
pool names that are up's own are refused (docs/security.md, "pdctl up runs files as code")."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pdctl import manifests, naming, pipeline
from pdctl.cli.app import app
from pdctl.errors import InputError
from pdctl.helm import Helm
from pdctl.local import consent, flags, lifecycle, state
from pdctl.local import layout as local
from pdctl.simulator import options as simulator

runner = CliRunner()
RELEASE = "pd"
SIM = local.Options(engine="sim")


@pytest.fixture(scope="module")
def values(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("init") / "values.yaml"
    init = ["init", "-m", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "2", "--offline"]
    assert runner.invoke(app, [*init, "--mode", "pd", "--out", str(out)]).exit_code == 0
    return out


@pytest.fixture(scope="module")
def rendered(values: Path, helm4: Helm) -> list[manifests.Manifest]:
    return pipeline.render(pipeline.load_values([str(values)]), helm_path=str(helm4.path)).objects


def _containers(objects: list[manifests.Manifest], router: bool) -> list[dict[str, Any]]:
    """The engine containers (router False) or the router's, of a copy the test changes."""
    return [
        o["spec"]["template"]["spec"]["containers"][0]
        for o in objects
        if o["kind"] == "Deployment" and ("-router" in o["metadata"]["name"]) == router
    ]


def _with(
    rendered: list[manifests.Manifest], router: bool, change: Any
) -> list[manifests.Manifest]:
    objects = copy.deepcopy(rendered)
    for container in _containers(objects, router):
        change(container)
    return objects


def _env(name: str, value: str = "/tmp/x") -> Any:
    return lambda c: c.setdefault("env", []).append({"name": name, "value": value})


# ---- the forms of a flag ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "word", ["--host", "--hos", "--h", "--host=0.0.0.0", "--HOST"[:0] + "--ho=1"]
)
def test_every_argparse_form_of_a_flag_is_found(word: str) -> None:
    assert flags.sets(word, "--host")


def test_underscores_and_json_keys_are_read_as_vllm_reads_them() -> None:
    assert flags.sets("--prometheus_host", "--prometheus-host")
    assert flags.name("--kv_transfer_config.kv_connector_module_path=m") == (
        "--kv-transfer-config",
        "kv_connector_module_path",
    )
    assert not flags.sets("--hostile", "--host")
    assert not flags.sets("--", "--host")
    assert not flags.sets("-h", "--host")


def test_drop_takes_the_value_with_each_form() -> None:
    args = ["serve", "m", "--hos", "0.0.0.0", "--port=1", "--x", "y", "--prometheus_host", "h"]
    kept, dropped = flags.drop(args, ["--host", "--port", "--prometheus-host"])
    assert kept == ["serve", "m", "--x", "y"]
    assert dropped == ["--hos", "0.0.0.0", "--port=1", "--prometheus_host", "h"]


# ---- loopback -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra", [["--hos", "0.0.0.0"], ["--host=0.0.0.0"], ["--ho", "::"], ["--uds", "/tmp/s"]]
)
def test_an_engine_listens_on_loopback_whatever_the_render_says(
    rendered: list[manifests.Manifest], extra: list[str]
) -> None:
    """Bypassing the chart's PD026 (a rendered folder), `extraArgs: ["--hos", "0.0.0.0"]` does not
    make an engine listen on all interfaces: the simulator's own parser reads 127.0.0.1."""
    objects = _with(rendered, False, lambda c: c["args"].extend(extra))
    for engine in local.plan(objects, RELEASE, SIM).engines:
        parsed = simulator.parse(engine.argv[3:])  # after python -m pdctl.simulator
        assert (parsed.host, parsed.port) == (local.LOOPBACK, engine.port)
        assert not set(extra) & set(engine.argv[3:])


def test_the_router_listens_on_loopback_whatever_the_render_says(
    rendered: list[manifests.Manifest],
) -> None:
    extra = ["--prometheus_host", "0.0.0.0", "--host=0.0.0.0", "--port", "80"]
    objects = _with(rendered, True, lambda c: c["args"].extend(extra))
    router = local.plan(objects, RELEASE, SIM).router
    assert router is not None
    found = flags.occurrences(router.argv, local.ROUTER_LISTEN)
    assert {value for flag, _, value in found if flag.endswith("host")} == {local.LOOPBACK}
    assert "0.0.0.0" not in router.argv and "80" not in router.argv


def test_env_naming_a_listening_address_is_loopback(rendered: list[manifests.Manifest]) -> None:
    objects = _with(rendered, False, _env("VLLM_NIXL_SIDE_CHANNEL_HOST", "0.0.0.0"))
    for engine in local.plan(objects, RELEASE, SIM).engines:
        assert engine.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == local.LOOPBACK


# ---- env, commands and code ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["PYTHONPATH", "LD_PRELOAD", "PATH", "VLLM_LOGGING_CONFIG_PATH"])
def test_env_the_chart_does_not_render_is_refused_naming_the_flag(
    rendered: list[manifests.Manifest], name: str
) -> None:
    objects = _with(rendered, False, _env(name))
    with pytest.raises(InputError) as refused:
        local.plan(objects, RELEASE, SIM)
    assert re.search(f"env {name} of pool [a-z0-9-]+-prefill", str(refused.value))
    assert f"--allow-env {name}" in str(refused.value)
    allowed = local.Options(engine="sim", allowed=consent.Consent(env=frozenset({name})))
    assert all(e.env[name] == "/tmp/x" for e in local.plan(objects, RELEASE, allowed).engines)


def test_the_routers_env_is_checked_too(rendered: list[manifests.Manifest]) -> None:
    objects = _with(rendered, True, _env("LD_PRELOAD"))
    with pytest.raises(InputError, match=r"env LD_PRELOAD of the router .*--allow-env LD_PRELOAD"):
        local.plan(objects, RELEASE, SIM)


def test_the_env_the_chart_renders_needs_no_consent(rendered: list[manifests.Manifest]) -> None:
    for objects in (rendered, _with(rendered, False, _env("UCX_TLS", "tcp"))):
        local.plan(objects, RELEASE, SIM)


def test_a_command_override_is_refused_unless_allowed(rendered: list[manifests.Manifest]) -> None:
    def shell(container: dict[str, Any]) -> None:
        container["command"] = ["/bin/sh", "-c", 'touch /tmp/owned; exec vllm "$@"', "sh"]

    objects = _with(rendered, False, shell)
    with pytest.raises(InputError, match=r"runs `/bin/sh -c .*--allow-command"):
        local.plan(objects, RELEASE, SIM)
    allowed = local.Options(engine="sim", allowed=consent.Consent(command=True))
    assert local.plan(objects, RELEASE, allowed).engines


def test_another_router_binary_is_refused(rendered: list[manifests.Manifest]) -> None:
    objects = _with(rendered, True, lambda c: c.update(command=["/tmp/vllm-router"]))
    with pytest.raises(InputError, match="not vllm-router as the chart renders it"):
        local.plan(objects, RELEASE, SIM)


def _kv_module(container: dict[str, Any]) -> None:
    args = container["args"]
    at = args.index("--kv-transfer-config") + 1
    args[at] = json.dumps({**json.loads(args[at]), "kv_connector_module_path": "evil"})


@pytest.mark.parametrize(
    ("change", "name"),
    [
        (lambda c: c["args"].extend(["--middleware", "evil.mw"]), "middleware"),
        (lambda c: c["args"].append("--tool_parser_plugin=/tmp/p.py"), "tool-parser-plugin"),
        (lambda c: c["args"].extend(["--worker-ext", "evil.W"]), "worker-extension-cls"),
        (lambda c: c["args"].append("--trust-remote-code"), "trust-remote-code"),
        (_kv_module, "kv-connector-module-path"),
        (
            lambda c: c["args"].extend(["--kv-transfer-config.kv_connector_module_path", "evil"]),
            "kv-connector-module-path",
        ),
    ],
)
def test_flags_that_load_code_need_consent(
    rendered: list[manifests.Manifest], change: Any, name: str
) -> None:
    objects = _with(rendered, False, change)
    with pytest.raises(InputError, match=f"loads code .*--allow-code-flag {name}"):
        local.plan(objects, RELEASE, SIM)
    allowed = consent.Consent(code_flags=frozenset({consent.code_flag(name)}))
    assert local.plan(objects, RELEASE, local.Options(engine="sim", allowed=allowed)).engines


# ---- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize("taken", [local.ROUTER, local.SUPERVISOR])
def test_a_pool_named_as_ups_own_processes_is_refused(
    rendered: list[manifests.Manifest], taken: str
) -> None:
    objects = copy.deepcopy(rendered)
    names = naming.Release(RELEASE)
    pool = manifests.summarize(objects).pools[-1].name
    for obj in objects:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == names.pool_deployment(pool):
            obj["metadata"]["name"] = names.pool_deployment(taken)
            for labels in (
                obj["metadata"]["labels"],
                obj["spec"]["template"]["metadata"]["labels"],
            ):
                for key, value in labels.items():
                    if value == pool:
                        labels[key] = taken
    with pytest.raises(InputError, match=f"engine {taken}: .*'{taken}' is its own"):
        local.plan(objects, RELEASE, SIM)


# ---- files --------------------------------------------------------------------------------------


def test_a_rendered_yaml_that_is_a_fifo_or_links_to_dev_zero_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "a.yaml")
    with pytest.raises(InputError, match=r"a\.yaml: a FIFO"):
        lifecycle.read_rendered(tmp_path)
    (tmp_path / "a.yaml").unlink()
    (tmp_path / "a.yaml").symlink_to("/dev/zero")
    with pytest.raises(InputError, match=r"a\.yaml: a character device"):
        lifecycle.read_rendered(tmp_path)


def test_a_rendered_yaml_too_large_is_refused(tmp_path: Path) -> None:
    with (tmp_path / "big.yaml").open("wb") as out:
        out.truncate(lifecycle.RENDERED_BYTES + 1)  # sparse: no disk used
    with pytest.raises(InputError, match="larger than 4 MiB"):
        lifecycle.read_rendered(tmp_path)


def test_the_state_folder_is_written_without_following_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = state.Folder.of(RELEASE)
    victim = tmp_path / "victim"
    victim.write_text("kept")
    folder.path.mkdir(parents=True)
    (folder.path / ".state.json.partial").symlink_to(victim)
    with pytest.raises(InputError, match=r"\.state\.json\.partial: a symbolic link"):
        folder.write_state({"status": "starting"})
    (folder.path / "lock").symlink_to(victim)
    with pytest.raises(InputError, match="lock: a symbolic link"):
        folder.claim(RELEASE)
    folder.logs.mkdir()
    folder.log("prefill").symlink_to(victim)
    with pytest.raises(InputError, match="prefill.log: a symbolic link"):
        state.append(folder.log("prefill"))
    assert victim.read_text() == "kept"


def test_a_logs_link_is_replaced_not_followed(tmp_path: Path) -> None:
    folder = state.Folder(tmp_path / "release")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious").write_text("kept")
    folder.path.mkdir()
    folder.logs.symlink_to(elsewhere)
    lifecycle._fresh_logs(folder)
    assert folder.logs.is_dir() and not folder.logs.is_symlink()
    assert (elsewhere / "precious").read_text() == "kept"


def test_a_release_folder_that_is_a_link_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = state.Folder.of(RELEASE)
    folder.path.parent.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    folder.path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="a symbolic link"):
        folder.claim(RELEASE)
