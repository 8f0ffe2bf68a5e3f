"""The planner's catalogs of GPUs and models (pdctl/models/catalog/*.yaml), as typed records.

Names are looked up ignoring case, '-', '_', '.', ' ' and '/' differences only through the
aliases each entry lists, so `h100`, `H100-80GB` and `h100-sxm` are one GPU, and
`llama-3.1-8b` is meta-llama/Llama-3.1-8B-Instruct. Unknown names get the close matches.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl.chart import read_yaml
from pdctl.errors import UsageError
from pdctl.hints import closest, did_you_mean
from pdctl.models import links
from pdctl.models.config import Mla, ModelArch, Moe, SlidingWindow

CATALOG_DIR = Path(__file__).resolve().parent / "catalog"
GPUS_FILE = CATALOG_DIR / "gpus.yaml"
MODELS_FILE = CATALOG_DIR / "models.yaml"


@dataclass(frozen=True)
class Gpu:
    name: str
    aliases: tuple[str, ...]
    vendor: str
    memory_gib: float
    nominal_gb: float
    hbm_tbps: float
    bf16_tflops: float
    fp8_tflops: float | None
    link: str
    link_gbps: float
    network: str  # the link table's id of the usual network between nodes (KV transfer)
    network_gbps: float  # that link's bandwidth per GPU and direction
    resource: str
    gpus_per_node: int
    product_label: str | None
    sources: dict[str, str] = field(hash=False)  # where each figure came from (not a figure)
    unverified: tuple[str, ...]


@dataclass(frozen=True)
class CatalogModel:
    arch: ModelArch
    aliases: tuple[str, ...]
    params_billion: float
    active_params_billion: float | None
    sources: dict[str, str]
    unverified: tuple[str, ...]


def _key(name: str) -> str:
    return re.sub(r"[-_. /]+", "", name.lower())


def _read(path: Path) -> dict[str, Any]:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping")
    return data


def _gpu(name: str, data: dict[str, Any]) -> Gpu:
    return Gpu(
        name=name,
        aliases=tuple(data.get("aliases", ())),
        vendor=data["vendor"],
        memory_gib=float(data["memoryGiB"]),
        nominal_gb=float(data["nominalGB"]),
        hbm_tbps=float(data["hbmTBps"]),
        bf16_tflops=float(data["bf16TFLOPS"]),
        fp8_tflops=float(data["fp8TFLOPS"]) if data.get("fp8TFLOPS") else None,
        link=data["link"],
        link_gbps=float(data["linkGBps"]),
        network=data["network"],
        network_gbps=links.load().by_id(data["network"]).gbps,
        resource=data["resource"],
        gpus_per_node=int(data["gpusPerNode"]),
        product_label=data.get("productLabel"),
        sources=dict(data["sources"]),
        unverified=tuple(data.get("unverified", ())),
    )


def _model(name: str, data: dict[str, Any]) -> CatalogModel:
    mla = data.get("mla")
    moe = data.get("moe")
    window = data.get("slidingWindow")
    arch = ModelArch(
        name=name,
        model_type=data["modelType"],
        architecture=data["architecture"],
        layers=data["layers"],
        hidden_size=data["hiddenSize"],
        intermediate_size=data["intermediateSize"],
        heads=data["heads"],
        kv_heads=data["kvHeads"],
        head_dim=data["headDim"],
        vocab_size=data["vocabSize"],
        max_positions=data["maxPositions"],
        tied_embeddings=bool(data["tiedEmbeddings"]),
        weight_dtype=data["weightDtype"],
        mla=Mla(
            mla["kvLoraRank"],
            mla["qkRopeHeadDim"],
            mla["qkNopeHeadDim"],
            mla["vHeadDim"],
            mla.get("qLoraRank"),
        )
        if mla
        else None,
        moe=Moe(
            moe["experts"],
            moe["activeExperts"],
            moe["expertIntermediateSize"],
            moe.get("sharedExperts", 0),
            moe.get("sharedIntermediateSize", 0),
            moe.get("denseLayers", 0),
        )
        if moe
        else None,
        sliding_window=SlidingWindow(window["window"], window["layers"]) if window else None,
        extra_layers=data.get("extraLayers", 0),
        gated=bool(data["gated"]),
        source="the pdctl catalog",
        quantization=data["sources"].get("quantization", ""),
        auto_kv_dtype=data.get("kvCacheDtype"),
    )
    params = data["params"]
    return CatalogModel(
        arch=arch,
        aliases=tuple(data.get("aliases", ())),
        params_billion=float(params["total"]),
        active_params_billion=float(params["active"]) if "active" in params else None,
        sources=dict(data["sources"]),
        unverified=tuple(data.get("unverified", ())),
    )


@functools.cache
def gpus() -> dict[str, Gpu]:
    return {name: _gpu(name, entry) for name, entry in _read(GPUS_FILE)["gpus"].items()}


@functools.cache
def models() -> dict[str, CatalogModel]:
    return {name: _model(name, entry) for name, entry in _read(MODELS_FILE)["models"].items()}


def _index(entries: dict[str, Any]) -> dict[str, str]:
    index: dict[str, str] = {}
    for name, entry in entries.items():
        for alias in (name, *entry.aliases):
            index[_key(alias)] = name
    return index


def gpu(name: str) -> Gpu:
    """The catalog GPU called `name` (or one of its aliases); UsageError with close matches."""
    table = gpus()
    found = _index(table).get(_key(name))
    if found:
        return table[found]
    raise UsageError(
        f"--gpu-type {name!r} is not in the GPU catalog",
        hint=did_you_mean(closest(name, table, cutoff=0.4))
        + "known: "
        + ", ".join(table)
        + " (`pdctl catalog gpus` describes them)",
    )


def find_model(name: str) -> CatalogModel | None:
    """The catalog entry for a repository id or alias, or None."""
    table = models()
    found = _index(table).get(_key(name))
    return table[found] if found else None


def _likeness(given: str, alias: str) -> float:
    """How like `alias` the name typed is (difflib's ratio, ignoring case and the owner): the
    whole name, or only as much of it as the alias is long, so that a name with a suffix the
    catalog leaves out (`Qwen3-32B-Instrcut`) is most like its stem (`qwen3-32b`)."""
    given, alias = given.lower().rpartition("/")[2], alias.lower().rpartition("/")[2]
    whole = difflib.SequenceMatcher(a=alias, b=given).ratio()
    stem = difflib.SequenceMatcher(a=alias, b=given[: len(alias)]).ratio()
    return max(whole, stem)


def model_suggestions(name: str) -> list[str]:
    """Up to three catalog models whose id or an alias is like `name`, the closest first."""
    table = models()
    best: dict[str, float] = {}
    for repo, m in table.items():
        best[repo] = max(_likeness(name, alias) for alias in (repo, *m.aliases))
    ranked = sorted((-score, repo) for repo, score in best.items() if score >= 0.5)
    return [repo for _, repo in ranked[:3]]


def model_entry(entry: CatalogModel) -> dict[str, Any]:
    """A catalog model as `pdctl catalog -o json` lists it."""
    arch = entry.arch
    return {
        "name": arch.name,
        "aliases": list(entry.aliases),
        "params_billion": entry.params_billion,
        "active_params_billion": entry.active_params_billion,
        "architecture": arch.architecture,
        "attention": arch.attention,
        "weight_dtype": arch.weight_dtype,
        "max_positions": arch.max_positions,
        "gated": arch.gated,
    }


def gpu_entry(entry: Gpu) -> dict[str, Any]:
    """A catalog GPU as `pdctl catalog -o json` lists it."""
    return {
        "name": entry.name,
        "aliases": list(entry.aliases),
        "vendor": entry.vendor,
        "memory_gib": entry.memory_gib,
        "hbm_tbps": entry.hbm_tbps,
        "bf16_tflops": entry.bf16_tflops,
        "fp8_tflops": entry.fp8_tflops,
        "network": entry.network,
        "network_gbps": entry.network_gbps,
        "resource": entry.resource,
    }
