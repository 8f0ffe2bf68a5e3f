"""pdctl up's plan of the processes (pdctl.local.layout) on a real render: what runs is the
rendered commands with only the host-level changes, for real vLLM (as the GPU harness,
benchmarks/real_engines/run.py, runs it with dummy weights) and for the simulator."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdctl import defaults, manifests, pipeline, ucx
from pdctl.cli.app import app
from pdctl.errors import EnvironmentProblem, InputError
from pdctl.helm import Helm
from pdctl.local import layout as local

runner = CliRunner()


@pytest.fixture(scope="module")
def rendered(helm4: Helm, tmp_path_factory: pytest.TempPathFactory) -> list[manifests.Manifest]:
    values = tmp_path_factory.mktemp("init") / "values.yaml"
    init = [
        "init",
        "-m",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpus",
        "2",
        "--offline",
        "--mode",
        "pd",
    ]
    assert runner.invoke(app, [*init, "--out", str(values)]).exit_code == 0
    return pipeline.render(pipeline.load_values([str(values)]), helm_path=str(helm4.path)).objects


def test_engines_run_the_rendered_command_with_only_host_changes(
    rendered: list[manifests.Manifest],
) -> None:
    options = local.Options(devices=["0"], weights=Path("/models/llama"))
    layout = local.plan(rendered, "pd", options)
    prefill, decode = layout.engines
    assert (prefill.role, decode.role) == ("prefill", "decode")
    for process, kv_role in ((prefill, "kv_producer"), (decode, "kv_consumer")):
        argv = process.argv
        assert argv[:3] == ["vllm", "serve", "/models/llama"]
        assert argv[argv.index("--served-model-name") + 1] == "meta-llama/Llama-3.1-8B-Instruct"
        assert argv[argv.index("--load-format") + 1] == "dummy"
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
        assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.45"  # two on one GPU
        config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
        assert config["kv_role"] == kv_role  # the rendered transfer config, unchanged
        assert process.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "127.0.0.1"
        assert process.env["PYTHONHASHSEED"] == "123"
        assert not {"HF_HOME", "HF_TOKEN_PATH"} & set(process.env)
        assert process.env["CUDA_VISIBLE_DEVICES"] == "0"  # both on the one GPU
    assert prefill.port != decode.port
    assert prefill.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] != decode.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]
    assert any("0.9 -> 0.45" in change for change in layout.changes)


def test_the_router_gets_the_engines_urls_instead_of_kubernetes_selectors(
    rendered: list[manifests.Manifest],
) -> None:
    layout = local.plan(rendered, "pd", local.Options(devices=["0", "1"]))
    router = layout.router
    assert router is not None
    argv = router.argv
    assert argv[0] == "vllm-router" and "--vllm-pd-disaggregation" in argv
    assert not any(word.startswith("--service-discovery") or "=" in word for word in argv)
    assert argv[argv.index("--prefill") + 1] == layout.engines[0].url
    assert argv[argv.index("--decode") + 1] == layout.engines[1].url
    assert argv[argv.index("--kv-connector") + 1] == "nixl"  # rendered flags kept
    assert argv[argv.index("--policy") + 1] == "cache_aware"
    # On two GPUs each engine keeps the rendered utilization and has a GPU of its own; without
    # dummy weights the engines serve the rendered model (real weights).
    for engine, device in zip(layout.engines, ("0", "1"), strict=True):
        assert engine.argv[engine.argv.index("--gpu-memory-utilization") + 1] == "0.9"
        assert engine.env["CUDA_VISIBLE_DEVICES"] == device
        assert engine.argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
        assert "--load-format" not in engine.argv
    ports = [router.port, *(e.port for e in layout.engines)]
    ports += [int(argv[argv.index("--prometheus-port") + 1])]
    ports += [int(e.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]) for e in layout.engines]
    assert len(set(ports)) == len(ports)  # every listener a port of its own
    assert router.ready_path == "/readiness"  # the rendered readiness probe


def test_the_default_values_are_rendered_for_the_vllm_that_runs_there(tmp_path: Path) -> None:
    """run.py's default: pdctl init's 8B layout, the pools' image tag set to the local vLLM."""
    from benchmarks.real_engines import run

    values = run.init_values(tmp_path, "v0.26.0")
    pools = pipeline.load_values([str(values)]).data["servingEngineSpec"]["modelSpec"]
    assert {pool["tag"] for pool in pools} == {"v0.26.0"} and len(pools) == 2
    assert not pipeline.errors(pipeline.check(pipeline.load_values([str(values)])))


def test_the_simulator_runs_the_rendered_arguments_without_gpus(
    rendered: list[manifests.Manifest],
) -> None:
    layout = local.plan(rendered, "pd", local.Options(engine="sim"))
    assert layout.engine == "sim" and layout.gated  # the render reads a token (gated model)
    for engine in layout.engines:
        assert engine.argv[:5] == [*local.SIMULATOR, "serve", "meta-llama/Llama-3.1-8B-Instruct"]
        assert engine.argv[engine.argv.index("--gpu-memory-utilization") + 1] == "0.9"
        assert "CUDA_VISIBLE_DEVICES" not in engine.env
        assert "--kv-transfer-config" in engine.argv
        assert engine.argv[engine.argv.index("--sim-gpu") + 1] == defaults.GPU_TYPE
    assert any("simulator" in change for change in layout.changes)


def test_the_simulator_times_its_steps_for_the_gpu_given(
    rendered: list[manifests.Manifest],
) -> None:
    layout = local.plan(rendered, "pd", local.Options(engine="sim", gpu="H200"))
    for engine in layout.engines:
        assert engine.argv[engine.argv.index("--sim-gpu") + 1] == "H200"
        assert ucx.GET_ZCOPY_ENV not in engine.env  # no GPU, nothing shared
    assert any("steps timed for H200 (--gpu-type)" in change for change in layout.changes)


def test_engines_on_one_gpu_get_cuda_ipc_reads_and_it_is_said(
    rendered: list[manifests.Manifest],
) -> None:
    layout = local.plan(rendered, "pd", local.Options(devices=["0"]))
    assert [e.env[ucx.GET_ZCOPY_ENV] for e in layout.engines] == ["y", "y"]
    said = [c for c in layout.changes if ucx.GET_ZCOPY_ENV in c]
    assert len(said) == 1 and ucx.RECORD in said[0]
    assert said[0].startswith("llama-3-1-8b-instruct-prefill, llama-3-1-8b-instruct-decode: ")


@pytest.mark.parametrize(
    ("tls", "becomes"),
    [
        ("cuda_copy,tcp", "cuda_ipc,cuda_copy,tcp"),
        (" cuda_copy , tcp ", "cuda_ipc,cuda_copy,tcp"),
        ("cuda_ipc,tcp", None),
        ("all", None),
        ("^tcp", None),
        ("", None),
    ],
)
def test_cuda_ipc_is_added_only_to_a_list_of_transports_that_lacks_it(
    tls: str, becomes: str | None
) -> None:
    assert ucx.with_cuda_ipc(tls) == becomes


def test_lmcache_engines_on_one_gpu_get_cuda_ipc_in_their_ucx_tls_and_it_is_said(
    helm4: Helm,
) -> None:
    """Tutorial 19 renders UCX_TLS=cuda_copy,tcp (pods have IPC namespaces of their own); two
    engines of one host do not, and over TCP LMCache's KV took 780 ms a 2,048-token prompt on an
    H200, 26 ms with cuda_ipc. On two GPUs nothing changes."""
    values = Path(__file__).resolve().parent.parent / "tutorials/assets/values-19-lmcache-pd.yaml"
    objects = pipeline.render(pipeline.load_values([str(values)]), helm_path=str(helm4.path))
    one = local.plan(objects.objects, "pd", local.Options(devices=["0"]))
    assert [e.env[ucx.TLS_ENV] for e in one.engines] == ["cuda_ipc,cuda_copy,tcp"] * 2
    (said,) = [c for c in one.changes if ucx.TLS_ENV in c]
    assert said.startswith("llama-prefill: UCX_TLS=cuda_ipc,cuda_copy,tcp; llama-decode: ")
    assert ucx.TLS_RECORD in said
    two = local.plan(objects.objects, "pd", local.Options(devices=["0", "1"]))
    assert [e.env[ucx.TLS_ENV] for e in two.engines] == ["cuda_copy,tcp"] * 2
    assert not any(ucx.TLS_ENV in c for c in two.changes)


def test_engines_on_gpus_of_their_own_do_not(rendered: list[manifests.Manifest]) -> None:
    layout = local.plan(rendered, "pd", local.Options(devices=["0", "1"]))
    assert not any(ucx.GET_ZCOPY_ENV in e.env for e in layout.engines)
    assert not any(ucx.GET_ZCOPY_ENV in c for c in layout.changes)


def test_only_the_engines_that_share_a_gpu_get_it(rendered: list[manifests.Manifest]) -> None:
    objects = copy.deepcopy(rendered)
    deployment = next(
        o for o in objects if o["kind"] == "Deployment" and "decode" in o["metadata"]["name"]
    )
    deployment["spec"]["replicas"] = 2  # three engines on two GPUs: 0, 1, 0
    layout = local.plan(objects, "pd", local.Options(devices=["0", "1"]))
    shared = {e.name: ucx.GET_ZCOPY_ENV in e.env for e in layout.engines}
    assert [e.env["CUDA_VISIBLE_DEVICES"] for e in layout.engines] == ["0", "1", "0"]
    assert list(shared.values()) == [True, False, True]


def _on(name: str, gpus: str | None) -> local.Process:
    """An engine seeing `gpus` (CUDA_VISIBLE_DEVICES; None: not set)."""
    env = {} if gpus is None else {local.GPU_ENV: gpus}
    return local.Process(name, "both", ["vllm", "serve", "m"], env, 8000)


def _names(waves: list[list[local.Process]]) -> list[list[str]]:
    return [[p.name for p in wave] for wave in waves]


def test_engines_on_one_gpu_start_one_after_another() -> None:
    waves = local.start_waves([_on("a", "0"), _on("b", "0"), _on("c", "0")])
    assert _names(waves) == [["a"], ["b"], ["c"]]


def test_engines_on_gpus_of_their_own_or_naming_none_start_together() -> None:
    assert _names(local.start_waves([_on("a", "0"), _on("b", "1")])) == [["a", "b"]]
    assert _names(local.start_waves([_on("a", None), _on("b", None)])) == [["a", "b"]]


def test_an_engine_waits_for_any_earlier_one_sharing_one_of_its_gpus() -> None:
    engines = [_on("a", "0,1"), _on("b", "1, 2"), _on("c", "3"), _on("d", "2")]
    assert _names(local.start_waves(engines)) == [["a", "c"], ["b"], ["d"]]


def test_the_pair_on_one_gpu_is_planned_in_two_waves_and_the_simulators_in_one(
    rendered: list[manifests.Manifest],
) -> None:
    """The one-GPU PD pair that failed on the H200 (2026-12-04): decode starts once prefill is
    ready; on two GPUs, and on the simulator, they start together."""
    one = local.plan(rendered, "pd", local.Options(devices=["0"]))
    assert _names(one.engine_waves()) == [[one.engines[0].name], [one.engines[1].name]]
    assert one.engines[0].role == "prefill"
    two = local.plan(rendered, "pd", local.Options(devices=["0", "1"]))
    assert _names(two.engine_waves()) == [[e.name for e in two.engines]]
    sim = local.plan(rendered, "pd", local.Options(engine="sim"))
    sim.engines = [_on(e.name, "0") for e in sim.engines]  # a render that names a GPU
    assert _names(sim.engine_waves()) == [[e.name for e in sim.engines]]


def test_the_renders_own_setting_wins(rendered: list[manifests.Manifest]) -> None:
    objects = copy.deepcopy(rendered)
    for deployment in objects:
        if deployment["kind"] == "Deployment" and "-router" not in deployment["metadata"]["name"]:
            container = deployment["spec"]["template"]["spec"]["containers"][0]
            container["env"].append({"name": ucx.GET_ZCOPY_ENV, "value": "n"})
    layout = local.plan(objects, "pd", local.Options(devices=["0"]))
    assert [e.env[ucx.GET_ZCOPY_ENV] for e in layout.engines] == ["n", "n"]
    assert not any(ucx.GET_ZCOPY_ENV in c for c in layout.changes)


def test_an_engine_bigger_than_the_host_is_refused(rendered: list[manifests.Manifest]) -> None:
    deployment = next(o for o in rendered if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = "4"
    try:
        with pytest.raises(InputError, match="needs 4 GPUs; this host has 2") as refused:
            local.plan(rendered, "pd", local.Options(devices=["0", "1"]))
        assert "--engine sim" in str(refused.value.hint)  # the next step
    finally:
        container["resources"]["limits"]["nvidia.com/gpu"] = "1"


def test_env_from_the_clusters_secrets_is_left_out_and_said(
    rendered: list[manifests.Manifest],
) -> None:
    objects = copy.deepcopy(rendered)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    secret = {"secretKeyRef": {"name": "pd-secrets", "key": "vllmApiKey"}}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["env"].append({"name": "VLLM_API_KEY", "valueFrom": secret})
    layout = local.plan(objects, "pd", local.Options(engine="sim"))
    assert not any("VLLM_API_KEY" in e.env for e in layout.engines)
    assert "env read from the cluster's Secrets left out: VLLM_API_KEY" in layout.changes


def test_ports_are_never_given_twice(rendered: list[manifests.Manifest]) -> None:
    """A probe's port can come back from the next probe (the system reuses it): the plan skips
    a port it already gave, so every listener has one of its own."""
    repeats = iter([9000, 9000, 9001, 9001, 9001, 9002, 9003, 9003, 9004, 9005, 9006, 9007])
    found = local.plan(rendered, "pd", local.Options(), ports=lambda: next(repeats))
    ports = [p.port for p in [*found.engines, found.router] if p is not None]
    ports += [int(p.env[local.NIXL_PORT_ENV]) for p in found.engines]
    assert len(ports) == len(set(ports)) == 5
    same = local.distinct(lambda: 9000)
    assert same() == 9000
    with pytest.raises(EnvironmentProblem, match="no free port"):
        same()


@pytest.fixture(scope="module")
def tutorial(helm4: Helm) -> list[manifests.Manifest]:
    """The PD tutorial's file: LMCache's NIXL sender/receiver, production-stack's router."""
    values = (
        Path(__file__).resolve().parent.parent / "tutorials/assets/values-16-disagg-prefill.yaml"
    )
    return pipeline.render(pipeline.load_values([str(values)]), helm_path=str(helm4.path)).objects


def _router_container(objects: list[manifests.Manifest]) -> dict[str, object]:
    router = next(
        o for o in objects if o["kind"] == "Deployment" and "router" in o["metadata"]["name"]
    )
    container: dict[str, object] = router["spec"]["template"]["spec"]["containers"][0]
    return container


def test_the_stand_in_plays_the_rendered_router_with_its_env_still_checked(
    tutorial: list[manifests.Manifest],
) -> None:
    """production-stack's router (the image's entry point, no command) is not run: the stand-in
    plays it, said in the changes; the router's env is checked as any other (LD_PRELOAD)."""
    found = local.plan(tutorial, "pd", local.Options(engine="sim"))
    assert found.router is not None and found.router.argv[1:3] == ["-m", "pdctl.standin"]
    assert (
        found.router_by
        == "pd-stack router stand-in playing production-stack's router (disaggregated_prefill)"
    )
    assert any(c.startswith(f"router: the {found.router_by}") for c in found.changes)
    objects = copy.deepcopy(tutorial)
    env = _router_container(objects).setdefault("env", [])
    assert isinstance(env, list)
    env.append({"name": "LD_PRELOAD", "value": "/tmp/evil.so"})
    with pytest.raises(InputError, match="env LD_PRELOAD of the router .*--allow-env LD_PRELOAD"):
        local.plan(objects, "pd", local.Options(engine="sim"))


def test_each_lmcache_engine_gets_a_prometheus_folder_of_its_own(
    helm4: Helm, tmp_path: Path
) -> None:
    """The chart gives each LMCache pod an emptyDir at PROMETHEUS_MULTIPROC_DIR; on one host each
    engine gets a folder of its own under the state folder, emptied (a link in its place removed,
    not followed) before it starts; engines without the variable get none."""
    from pdctl.local import multiproc

    values = Path(__file__).resolve().parent.parent / "tutorials/assets/values-19-lmcache-pd.yaml"
    objects = pipeline.render(pipeline.load_values([str(values)]), helm_path=str(helm4.path))
    layout = local.plan(objects.objects, "pd", local.Options(engine="sim"))
    assert {e.env[multiproc.ENV] for e in layout.engines} == {"/tmp/prometheus"}  # as rendered
    changes = multiproc.own_folders(layout.engines, tmp_path / "prometheus")
    folders = [Path(e.env[multiproc.ENV]) for e in layout.engines]
    assert folders == [tmp_path / "prometheus" / e.name for e in layout.engines]
    assert len(changes) == 1 and "a folder of its own" in changes[0]
    stale = folders[0] / "counter_1.db"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an earlier run's")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("not ours")
    folders[1].parent.mkdir(exist_ok=True)
    folders[1].symlink_to(elsewhere)
    multiproc.fresh(layout.engines)
    assert all(f.is_dir() and not f.is_symlink() and not list(f.iterdir()) for f in folders)
    assert (elsewhere / "keep").exists()
    bare = local.Process("x", "decode", ["vllm"], {}, 1)
    assert multiproc.own_folders([bare], tmp_path) == [] and bare.env == {}
