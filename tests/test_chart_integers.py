"""Integers the chart prints are plain digits (issue 40). Helm reads every YAML number as a float64
and Go prints one of a million or more as `1e+06` (helm/helm issues 1707 and 6431); the chart
re-reads values through fromJson, so an int64 from --set turns float64 too. The chart prints every
integer through pd-stack.int (helm/templates/_numbers.tpl), and the schema bounds every integer key
to 2^53 - 1, the largest integer a float64 holds exactly (scripts/build_schema.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pdctl import manifests
from pdctl.cli.app import app
from pdctl.helm import Helm, TemplateRequest
from pdctl.naming import Release
from pdctl.simulator import options as simulator_options
from pdctl.validation.schema_and_rules import check_values
from pdctl.values import loader
from pdctl.values.loader import SAFE_INTEGER
from tests.helpers import ASSETS, CHART, CI, ROOT, load_values, pool_container, write_values

# The values each integer key is set to, each capped by the key's own maximum (or enum).
BIG = (10**7, 2**40)
# A number as Go prints a float64 (%v, toString) of a million or more: 1e+07, 4.261328e+06.
SCIENTIFIC = re.compile(r"[0-9][0-9.]*[eE][-+]?[0-9]+")

# The values file each key is set in: the first whose prefix the key's path starts with (the
# feature it belongs to is on there); set_path says which items of a `[]` list get it.
CONTEXTS: list[tuple[str, Path]] = [
    ("servingEngineSpec.modelSpec[].lmcacheConfig", ASSETS / "values-16-disagg-prefill.yaml"),
    ("routerSpec.engineScrapeInterval", ASSETS / "values-16-disagg-prefill.yaml"),
    ("routerSpec.requestStatsWindow", ASSETS / "values-16-disagg-prefill.yaml"),
    ("routerSpec.prefixMinMatchLength", ASSETS / "values-16-disagg-prefill.yaml"),
    ("routerSpec.lmcacheController", ASSETS / "values-16-disagg-prefill.yaml"),
    ("servingEngineSpec.modelSpec[].kvTransfer.lmcache", ASSETS / "values-19-lmcache-pd.yaml"),
    ("routerSpec.lmcacheProxy", ASSETS / "values-19-lmcache-pd.yaml"),
    ("servingEngineSpec.modelSpec[].kvTransfer.bootstrapPort", ASSETS / "values-20-mooncake.yaml"),
    ("servingEngineSpec.modelSpec[].kvTransfer.p2pNccl", CI / "p2pnccl-static-router-values.yaml"),
    ("servingEngineSpec.modelSpec[].kvTransfer.kvPort", CI / "p2pnccl-static-router-values.yaml"),
    ("routerSpec.vllmRouter.discoveryPort", CI / "p2pnccl-static-router-values.yaml"),
    ("servingEngineSpec.modelSpec[].multiNode.rayPort", CI / "multinode-ray-values.yaml"),
    (
        "servingEngineSpec.modelSpec[].multiNode.dataParallelRpcPort",
        ASSETS / "values-23-deepseek-wide-ep.yaml",
    ),
    ("servingEngineSpec.modelSpec[].multiNode", ASSETS / "values-22-llama405b-multinode.yaml"),
    ("servingEngineSpec.disaggregatedSet", ASSETS / "values-24-disaggregatedset.yaml"),
    ("routerSpec.llmd", ASSETS / "values-25-llm-d-router.yaml"),
    ("routerSpec.vllmRouter.prefillUrls", CI / "nixl-rdma-hetero-tp-values.yaml"),
    # One aggregated pool: parallel sizes of 10^7 with no connector listening per rank.
    ("servingEngineSpec.modelSpec[].vllmConfig.tensorParallelSize", CI / "aggregated-values.yaml"),
    (
        "servingEngineSpec.modelSpec[].vllmConfig.pipelineParallelSize",
        CI / "aggregated-values.yaml",
    ),
    ("servingEngineSpec.modelSpec[].vllmConfig.dataParallelSize", CI / "aggregated-values.yaml"),
    ("servingEngineSpec.modelSpec[].requestGPU", CI / "aggregated-values.yaml"),
    ("", ASSETS / "values-17-nixl-vllm-router.yaml"),
]
VALUE = object()  # in EXTRAS: the value under test
# What else a key needs set for its value to render (paths from the root, as the keys').
POOL = "servingEngineSpec.modelSpec[]."
EXTRAS: dict[str, dict[str, Any]] = {
    f"{POOL}vllmConfig.tensorParallelSize": {f"{POOL}requestGPU": VALUE},
    f"{POOL}vllmConfig.pipelineParallelSize": {
        f"{POOL}requestGPU": VALUE,
        f"{POOL}vllmConfig.tensorParallelSize": 1,
    },
    f"{POOL}vllmConfig.dataParallelSize": {
        f"{POOL}requestGPU": VALUE,
        f"{POOL}vllmConfig.tensorParallelSize": 1,
    },
    f"{POOL}requestGPU": {f"{POOL}vllmConfig.tensorParallelSize": VALUE},
    f"{POOL}keda.minReplicaCount": {f"{POOL}keda.maxReplicaCount": VALUE},
    f"{POOL}keda.fallback.failureThreshold": {f"{POOL}keda.fallback.replicas": 1},
    f"{POOL}keda.fallback.replicas": {f"{POOL}keda.fallback.failureThreshold": 3},
    f"{POOL}kvTransfer.lmcache.proxyPort": {"routerSpec.lmcacheProxy.notifyPort": VALUE},
    f"{POOL}network.rdmaCount": {f"{POOL}network.rdmaResource": "rdma/ib"},
    "routerSpec.autoscaling.minReplicas": {"routerSpec.autoscaling.maxReplicas": VALUE},
    "routerSpec.nodePort": {"routerSpec.serviceType": "NodePort"},
    "routerSpec.llmd.scheduler.nonCachedTokens": {
        "routerSpec.llmd.scheduler.decider": "prefix-based"
    },
    "routerSpec.llmd.scheduler.promptTokens": {"routerSpec.llmd.scheduler.decider": "prefix-based"},
}
# Keys whose big value a PD rule of the chart refuses; the refusal prints the value, as digits.
REFUSED: dict[str, str] = {
    f"{POOL}keda.idleReplicaCount": "PD023",  # must be below minReplicaCount
    f"{POOL}multiNode.nodes": "PD010",  # 64 pods need 64 x the GPUs the parallelism uses
}
# Keys the chart never prints.
NOT_PRINTED: dict[str, str] = {
    f"{POOL}lmcacheConfig.workerPort": "no effect (helm/files/production-stack.yaml)",
}


@dataclass(frozen=True)
class Key:
    path: str  # dotted, `[]` for every item of a list, `*` for any name
    maximum: int
    allowed: tuple[int, ...]  # an enum's or const's integers, else ()

    def values(self) -> list[int]:
        """10^7 and 2^40, each capped by the maximum and to the largest allowed value."""
        found = set()
        for big in BIG:
            value = min(big, self.maximum)
            if self.allowed:
                value = max(v for v in self.allowed if v <= value)
            found.add(value)
        return sorted(found)


def schema_nodes(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key path, schema) for every schema of the chart's own values (`[]`: every item of a list,
    `*`: any name); Kubernetes objects the chart passes through (`io.k8s.*`) are not walked."""
    definitions = schema["definitions"]

    def walk(node: dict[str, Any], path: str, seen: frozenset[str]) -> Iterator[tuple[str, Any]]:
        ref = node.get("$ref", "").removeprefix("#/definitions/")
        if ref:
            if not ref.startswith("io.k8s.") and ref not in seen:
                yield from walk(definitions[ref], path, seen | {ref})
            return
        yield path, node
        for key in ("oneOf", "anyOf", "allOf"):
            for alternative in node.get(key, []):
                yield from walk(alternative, path, seen)
        for name, child in node.get("properties", {}).items():
            yield from walk(child, f"{path}.{name}" if path else name, seen)
        for key, suffix in (("items", "[]"), ("additionalProperties", ".*")):
            if isinstance(node.get(key), dict):
                yield from walk(node[key], path + suffix, seen)

    yield from walk(schema, "", frozenset())


def integer_keys(schema: dict[str, Any]) -> dict[str, Key]:
    """Every key that takes an integer, with its maximum and allowed values."""
    maxima: dict[str, int] = {}
    allowed: dict[str, tuple[int, ...]] = {}
    for path, node in schema_nodes(schema):
        types = node.get("type")
        if types == "integer" or (isinstance(types, list) and "integer" in types):
            maxima[path] = min(maxima.get(path, SAFE_INTEGER), node.get("maximum", SAFE_INTEGER))
        choices = node.get("enum", [node["const"]] if "const" in node else [])
        ints = tuple(v for v in choices if isinstance(v, int) and not isinstance(v, bool))
        if ints:
            allowed[path] = ints
    return {p: Key(p, m, allowed.get(p, ())) for p, m in maxima.items()}


SCHEMA = json.loads((CHART / "values.schema.json").read_text())
KEYS = integer_keys(SCHEMA)
# Objects with an `enabled` switch: a key inside one is tested with the switch on.
SWITCHED = {
    path.removesuffix(".enabled")
    for path, node in schema_nodes(SCHEMA)
    if path.endswith(".enabled") and node.get("type") == "boolean"
}


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path (`[]`: in every item of the list that has the next key's object, else in
    every item, one made when there is none; `*`: the name `x`)."""
    head, _, rest = path.partition(".")
    name = head.removesuffix("[]").replace("*", "x")
    if head.endswith("[]"):
        items = data.get(name) or [{}]
        data[name] = items
        inner = rest.partition(".")[0]
        having = [item for item in items if "." in rest and isinstance(item.get(inner), dict)]
        for item in having or items:
            set_path(item, rest, value)
    elif rest:
        child = data.get(name)
        data[name] = child if isinstance(child, dict) else {}
        set_path(data[name], rest, value)
    else:
        data[name] = value


def values_for(key: Key, value: int) -> dict[str, Any]:
    base = next(file for prefix, file in CONTEXTS if key.path.startswith(prefix))
    data = load_values(base)
    parts = key.path.split(".")
    for parent in (".".join(parts[:i]) for i in range(1, len(parts))):
        if parent in SWITCHED:
            set_path(data, f"{parent}.enabled", True)
    for path, extra in EXTRAS.get(key.path, {}).items():
        set_path(data, path, value if extra is VALUE else extra)
    set_path(data, key.path, value)
    return data


def problem(helm: Helm, tmp_path: Path, key: Key, value: int) -> str | None:
    """What is wrong with how the chart prints `value` set at `key`, or None."""
    name = f"{key.path.replace('[]', '').replace('*', 'x')}-{value}.yaml"
    values_file = write_values(tmp_path, values_for(key, value), name)
    result = helm.run(
        TemplateRequest(chart=CHART, release="pd", values_files=(values_file,)).args()
    )
    text = result.stdout + result.stderr
    floats = [m for m in SCIENTIFIC.findall(text) if float(m) == value]
    if floats:
        return f"{key.path}={value} printed as {floats[0]}"
    if result.returncode and f"[{REFUSED.get(key.path)}]" not in result.stderr:
        return f"{key.path}={value}: {result.stderr.strip()[-400:]}"
    if key.path not in NOT_PRINTED and str(value) not in text:
        return f"{key.path}={value} is not in the render"
    return None


def test_the_tables_name_schema_keys() -> None:
    """A key renamed in the schema must be renamed here too (else its case would test nothing)."""
    named = set(EXTRAS) | set(REFUSED) | set(NOT_PRINTED)
    assert named <= set(KEYS), named - set(KEYS)
    assert len(KEYS) > 100  # the walk reaches the pools, the routers, the canary


def test_every_integer_key_is_bounded_to_2_53() -> None:
    """Helm would round a larger integer before the chart sees it: the schema refuses it."""
    unbounded = [
        path
        for path, node in schema_nodes(SCHEMA)
        if "integer" in str(node.get("type"))
        and not -SAFE_INTEGER
        <= node.get("minimum", -SAFE_INTEGER - 1)
        <= node.get("maximum", SAFE_INTEGER + 1)
        <= SAFE_INTEGER
    ]
    assert not unbounded


def test_every_integer_key_prints_as_digits(helm: Helm, tmp_path: Path) -> None:
    """Issue 40's acceptance: every integer key of the schema set to 10^7, 2^40 or its maximum,
    whichever is lower; each value appears in the render (flags, env, ports, resources, the
    chart's own refusals) as plain digits, never as Go's float form."""
    cases = [(key, value) for key in KEYS.values() for value in key.values()]
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = pool.map(lambda case: problem(helm, tmp_path, *case), cases)
    problems = [p for p in found if p]
    assert not problems, "\n".join(problems)


def vllm_human_readable_int_or_auto(value: str) -> int:
    """A faithful reimplementation (not vLLM itself, which this machine does not install) of the
    parser vLLM gives --max-model-len: vllm/engine/arg_utils.py sets max_model_len's argparse type
    to human_readable_int_or_auto (vllm/utils/argparse_utils.py): "-1" or "auto", a number with
    one of the suffixes k/m/g/t (decimal) or K/M/G/T (binary, no decimals), else int(value),
    which refuses "4.261328e+06"."""
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix in "kmgt":
            return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
        return int(number) * 2 ** (10 * ("KMGT".index(suffix) + 1))
    return int(value)


def test_the_parser_reimplementation_refuses_the_float_form() -> None:
    assert vllm_human_readable_int_or_auto("4261328") == 4261328
    assert vllm_human_readable_int_or_auto("25.6k") == 25600
    assert vllm_human_readable_int_or_auto("1K") == 1024
    with pytest.raises(ValueError):
        vllm_human_readable_int_or_auto("4.261328e+06")


def engine_flag(args: list[str], flag: str) -> str:
    return str(args[args.index(flag) + 1])


def render(helm: Helm, values_file: Path, *sets: str) -> list[manifests.Manifest]:
    request = TemplateRequest(
        chart=CHART, release="pd", values_files=(values_file,), set_values=sets
    )
    result = helm.run(request.args())
    assert result.returncode == 0, result.stderr
    return manifests.parse(result.stdout)


def test_init_for_llama_4_scout_on_8_h200_renders_a_max_model_len_vllm_accepts(
    helm: Helm, tmp_path: Path
) -> None:
    """Issue 40's acceptance: `pdctl init` (offline, from Llama-4-Scout's real config.json, a
    fixture) plans 4261328 tokens on 8 x H200; the engine gets --max-model-len 4261328, which
    vLLM's parser and the simulator's (pdctl up) read back, not 4.261328e+06."""
    out = tmp_path / "scout.yaml"
    config = ROOT / "tests" / "fixtures" / "configs" / "llama-4-scout-17b-16e-instruct.json"
    argv = ["init", "--model", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "--model-config"]
    argv += [str(config), "--gpus", "8", "--gpu-type", "H200", "--offline", "--out", str(out)]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    values = yaml.safe_load(out.read_text())
    (pool,) = values["servingEngineSpec"]["modelSpec"]
    assert pool["vllmConfig"]["maxModelLen"] == 4261328
    args = pool_container(render(helm, out), values, pool["name"])["args"]
    assert engine_flag(args, "--max-model-len") == "4261328"
    assert vllm_human_readable_int_or_auto(engine_flag(args, "--max-model-len")) == 4261328
    # pdctl up runs the same command on the simulator, whose parser reads it too.
    assert simulator_options.parse([str(arg) for arg in args]).max_model_len == 4261328


@pytest.mark.parametrize(
    ("values_file", "assignment", "flag_or_env", "expected"),
    [
        (
            ASSETS / "values-17-nixl-vllm-router.yaml",
            "servingEngineSpec.modelSpec[{i}].vllmConfig.maxModelLen=4261328",
            "--max-model-len",
            "4261328",
        ),
        (
            ASSETS / "values-16-disagg-prefill.yaml",
            "servingEngineSpec.modelSpec[{i}].lmcacheConfig.nixlBufferSize=1073741824",
            "LMCACHE_NIXL_BUFFER_SIZE",
            "1073741824",
        ),
    ],
    ids=["max-model-len", "nixl-buffer-size"],
)
def test_a_large_integer_given_with_set_prints_as_digits(
    helm: Helm, values_file: Path, assignment: str, flag_or_env: str, expected: str
) -> None:
    """--set makes an int64, which the chart's fromJson round trips turn float64 again."""
    objects = render(helm, values_file, *(assignment.format(i=i) for i in (0, 1)))
    values = load_values(values_file)
    for spec in values["servingEngineSpec"]["modelSpec"]:
        engine = pool_container(objects, values, spec["name"])
        if flag_or_env.startswith("--"):
            assert engine_flag(engine["args"], flag_or_env) == expected
        else:
            assert {e["name"]: e.get("value") for e in engine["env"]}[flag_or_env] == expected


def test_an_integer_written_as_1e6_prints_as_digits(helm: Helm, tmp_path: Path) -> None:
    """YAML's `1e6` is a number to helm (and to validate, which accepts it as an integer)."""
    text = (ASSETS / "values-17-nixl-vllm-router.yaml").read_text()
    values_file = write_values(tmp_path, text.replace("maxModelLen: 16384", "maxModelLen: 1e6"))
    values = loader.load(values_file).data  # as helm reads it: 1e6 is 1000000.0
    assert values["servingEngineSpec"]["modelSpec"][0]["vllmConfig"]["maxModelLen"] == 1e6
    assert not [f for f in check_values(helm, values, "pd", CHART) if f.severity.value == "error"]
    objects = render(helm, values_file)
    for spec in values["servingEngineSpec"]["modelSpec"]:
        args = pool_container(objects, values, spec["name"])["args"]
        assert engine_flag(args, "--max-model-len") == "1000000"


TOO_BIG = 2**53 + 1  # 9007199254740993: a float64 rounds it to 2^53
KEY = "servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen"


def too_big_values() -> dict[str, Any]:
    data = load_values(ASSETS / "values-17-nixl-vllm-router.yaml")
    for spec in data["servingEngineSpec"]["modelSpec"]:
        spec["vllmConfig"]["maxModelLen"] = TOO_BIG
    return data


def test_an_integer_beyond_2_53_is_refused_naming_the_key(helm: Helm, tmp_path: Path) -> None:
    """By validate (the exact value, the line, why), by helm's schema check and, for a render that
    skips the schema, by pd-stack.int itself; each names maxModelLen."""
    values_file = write_values(tmp_path, too_big_values())
    (finding,) = [f for f in check_values(helm, too_big_values(), "pd", CHART) if f.key == KEY]
    assert f"{KEY} is {TOO_BIG}; it must be <= {SAFE_INTEGER}" in finding.message
    assert finding.hint and "64-bit float" in finding.hint
    result = helm.run(TemplateRequest(chart=CHART, values_files=(values_file,)).args())
    assert result.returncode != 0
    assert "modelSpec/0/vllmConfig/maxModelLen" in result.stderr.replace(".", "/"), result.stderr
    unchecked = TemplateRequest(
        chart=CHART,
        values_files=(ASSETS / "values-17-nixl-vllm-router.yaml",),
        set_values=tuple(f"{KEY.replace('[0]', f'[{i}]')}={TOO_BIG}" for i in (0, 1)),
        skip_schema_validation=True,
    )
    result = helm.run(unchecked.args())
    assert result.returncode != 0
    assert "vllmConfig.maxModelLen: 9.007199254740992e+15 is not an integer" in result.stderr


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


@pytest.mark.parametrize(("number", "printed"), [(10**7, "10000000"), (2.5, "2.5")])
def test_keys_that_take_any_number_print_whole_ones_as_digits(
    helm: Helm, tmp_path: Path, number: float, printed: str
) -> None:
    """Keys typed `number` (a CPU count, an LMCache size in GiB, servingEngineSpec.configs'
    values) print through pd-stack.number: 10^7 as digits, not 1e+07; a fraction as written."""
    values = load_values(ASSETS / "values-16-disagg-prefill.yaml")
    values["servingEngineSpec"]["configs"] = {"SOME_SIZE": number, "SOME_NAME": "x"}
    pool = values["servingEngineSpec"]["modelSpec"][0]
    pool["requestCPU"] = number
    pool["lmcacheConfig"]["cpuOffloadingBufferSize"] = number
    objects = render(helm, write_values(tmp_path, values))
    config_map = manifests.find(objects, "ConfigMap", Release("pd").engine_configs)
    assert config_map["data"] == {"SOME_SIZE": printed, "SOME_NAME": "x"}
    container = pool_container(objects, values, pool["name"])
    assert str(container["resources"]["requests"]["cpu"]) == printed
    assert _env(container)["LMCACHE_MAX_LOCAL_CPU_SIZE"] == printed
    assert not SCIENTIFIC.search(yaml.safe_dump(config_map) + json.dumps(container))
