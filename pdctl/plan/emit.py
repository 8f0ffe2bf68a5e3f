"""A plan as a values file: rendered from a Jinja2 template, then checked by the values pipeline.

The values go through `pdctl.pipeline` (schema and PD rules) before anything is written: a
generated file that fails them is a bug in pdctl and is refused. Connector facts (which router
routes the connector, its --kv-connector value, the vLLM versions that have it) come from the
chart's connector table, object names from `pdctl.naming`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl import __version__, chart, connectors, defaults, files, naming, pipeline
from pdctl.chart import bundled_chart_dir
from pdctl.errors import InputError, UsageError
from pdctl.findings import Finding
from pdctl.helm import find_helm
from pdctl.models import memory, pods
from pdctl.plan import layout, objective, report, sizing
from pdctl.rules import summary
from pdctl.validation.refusals import ask_chart
from pdctl.values.loader import loads

TEMPLATE = Path(__file__).resolve().parent / "templates" / "values.yaml.j2"

# The engine image: vLLM's official image, pinned. The chart's version checks read its tag
# (helm/files/vllm-image.yaml).
ENGINE_REPOSITORY = "vllm/vllm-openai"
ENGINE_VLLM_VERSION = "0.33.0"
ENGINE_TAG = f"v{ENGINE_VLLM_VERSION}"
ROUTER = "vllm-router"
ROUTERS = ("vllm-router", "production-stack")
DEFAULT_CONNECTOR = defaults.CONNECTOR
POOL_NAME_LIMIT = 40  # schemas/values.schema.yaml poolName


class GeneratedValuesInvalid(InputError):
    """The values pdctl generated fail the pipeline's checks: a bug in pdctl."""


@dataclass(frozen=True)
class Wiring:
    """How the pools transfer KV and who routes them, from the connector table."""

    connector: connectors.Connector
    router: str
    kv_connector: str | None

    @property
    def hetero_tp(self) -> bool:
        return self.connector.hetero_tp

    @property
    def one_pair(self) -> bool:
        return self.connector.pairing == "1P1D"


# The chart's rules on wiring: a connector the engine image's vLLM lacks (PD012), a router that
# cannot route the connector (PD017).
WIRING_RULES = ("PD012", "PD017")


def wiring(connector: str = DEFAULT_CONNECTOR, router: str | None = None) -> Wiring:
    """The connector's table entry, refused where the chart refuses it (its reasons): the chart
    renders a prefill and a decode pool of the engine image pdctl init writes with this
    connector and router, and says whether the image's vLLM has the connector and the router
    routes it; its summary of the pools (pdctl.rules.summary) says they transfer KV with it and
    the router routes PD. No router: the one pdctl init writes (ROUTER)."""
    table = connectors.load()
    if connector not in table.connectors:
        raise UsageError(
            f"--connector {connector!r} is not a connector of the chart",
            hint="one of " + ", ".join(table.connectors),
        )
    entry = table.connectors[connector]
    router = router or ROUTER
    if router not in ROUTERS:
        raise UsageError(f"--router {router!r}: one of {', '.join(ROUTERS)}")
    _chart_wires(connector, router)
    if router != ROUTER:
        raise InputError(f"pdctl init writes {ROUTER} values only; {router} is not generated yet")
    return Wiring(entry, router, entry.routers[router].get("kvConnector"))


def _chart_wires(connector: str, router: str) -> None:
    """InputError with the chart's reasons where it refuses a prefill and a decode pool of the
    engine image with this connector and router (WIRING_RULES); where it renders them, its
    summary must say they transfer KV with the connector and the router routes PD."""
    pools = [
        {
            "name": role,
            "role": role,
            "repository": ENGINE_REPOSITORY,
            "tag": ENGINE_TAG,
            "modelURL": "pd-stack/wiring-probe",
            "requestGPU": 1,
            "kvTransfer": {"connector": connector},
        }
        for role in ("prefill", "decode")
    ]
    # production-stack's router routes PD with routingLogic disaggregated_prefill only.
    pd_mode = {"routingLogic": "disaggregated_prefill"} if router == "production-stack" else {}
    values = {"servingEngineSpec": {"modelSpec": pools}, "routerSpec": {"type": router, **pd_mode}}
    answer = ask_chart(
        find_helm(), values, bundled_chart_dir(), defaults.RELEASE, defaults.NAMESPACE
    )
    # The first refusal of each rule: the decode pool's repeats the prefill pool's.
    refused = {f.rule: f for f in reversed(answer.refusals) if f.rule in WIRING_RULES}
    if refused:
        raise InputError(
            f"the chart refuses {connector} with {router} on {ENGINE_REPOSITORY}:{ENGINE_TAG}, "
            "the engine image pdctl init writes",
            hint=f"use --connector {DEFAULT_CONNECTOR} --router {ROUTER}",
            details=[
                f"[{rule}] {_as_init_writes(f.message)}" for rule, f in sorted(refused.items())
            ],
        )
    rendered = summary.read(answer.objects).values()
    if any(s.connector != connector or not s.routes_pd for s in rendered):
        raise InputError(f"the chart does not wire {connector} through {router}")


def _as_init_writes(message: str) -> str:
    """The chart's words on the pools it was asked about, which are the ones init would write:
    named by role, not by the probe's key paths."""
    for index, role in enumerate(("prefill", "decode")):
        path = f"servingEngineSpec.modelSpec[{index}]"
        message = message.replace(f"{path}.", f"the {role} pool's ").replace(
            path, f"the {role} pool"
        )
    return message


@dataclass(frozen=True)
class InitOptions:
    wiring: Wiring
    release: str = defaults.RELEASE
    namespace: str = defaults.NAMESPACE
    node_selector: dict[str, str] = field(default_factory=dict)
    secret_name: str = defaults.HF_TOKEN_SECRET
    secret_key: str = defaults.HF_TOKEN_KEY
    command: str = "pdctl init"


def _slug(model: str) -> str:
    tail = model.rstrip("/").split("/")[-1].lower()
    slug = re.sub(r"[^a-z0-9]+", "-", tail).strip("-")
    return slug if slug[:1].isalpha() else f"m-{slug}".rstrip("-")


def pool_names(model: str, release: str) -> dict[str, str]:
    """Pool names <model>-prefill and <model>-decode (and <model> for an aggregated pool, role
    both), cut so that every object name the chart derives from them (pdctl.naming) fits
    Kubernetes' 63 characters."""
    rel = naming.Release(release)
    longest = max(
        len(rel.pool_deployment("")),
        len(rel.pool_service("")),
        len(rel.pool_claim("")),
    )
    room = min(POOL_NAME_LIMIT, naming.NAME_LIMIT - longest) - len("-prefill")
    slug = _slug(model)[: max(room, 0)].rstrip("-")
    if not slug:
        return {"prefill": "prefill", "decode": "decode", "both": "engine"}
    return {"prefill": f"{slug}-prefill", "decode": f"{slug}-decode", "both": slug}


def default_filename(model: str) -> str:
    return f"{_slug(model)}-values.yaml"


def _gib(value: float) -> str:
    return f"{value:.1f}"


def _pool_context(plan: layout.Plan, role: layout.RolePlan, name: str) -> dict[str, Any]:
    engine = role.engine
    m = engine.memory
    nodes = sizing.nodes_per_engine(plan.request, engine)
    pod = pods.pod(plan.request.arch, engine.tp // nodes)
    pool_bytes = engine.pool_bytes
    if role.role == "both":
        why = (
            "Aggregated: each engine prefills and decodes its own requests (no KV transfer); "
            f"TP{engine.tp} leaves {_gib(m.kv_pool)} GiB of KV per GPU for concurrent sequences."
        )
    elif role.role == "prefill":
        why = (
            "Prefill is compute-bound: throughput per GPU hardly depends on TP, so the planner "
            "takes the smallest TP that holds the model and a full-length request."
        )
    else:
        why = (
            f"Decode reads the weights and the KV cache every step: TP{engine.tp} leaves "
            f"{_gib(m.kv_pool)} GiB of KV per GPU for concurrent sequences."
        )
    return {
        "role": role.role,
        "name": name,
        "tp": engine.tp,
        "nodes": nodes,
        "tp_per_node": engine.tp // nodes,
        "replicas": role.replicas,
        "why": why,
        "cpu": pod.cpu,
        "memory": f"{pod.memory_gib}Gi",
        "cache": f"{pod.cache_gib}Gi",
        "shm": f"{pod.shm_gib}Gi",
        "requested": _gib(m.requested),
        "weights": _gib(m.weights),
        "activation": f"{m.activation:.2f}",
        "non_torch": f"{m.non_torch:.2f}",
        "kv_pool": _gib(m.kv_pool),
        "kv_tokens": engine.layout.tokens(pool_bytes, max_model_len(plan)),
        "seqs": engine.layout.sequences(pool_bytes, plan.request.workload.total_len),
    }


def _max_model_len_why(plan: layout.Plan, length: int, pool: str, agree: str) -> str:
    """Why maxModelLen is `length`: asked, the model's context, or what `pool` holds; `agree`
    follows each reason (PD: both pools must agree)."""
    arch = plan.request.arch
    if plan.request.max_model_len:
        return f"--max-model-len as asked{agree}."
    if length == arch.max_positions:
        return f"The model's context (max_position_embeddings {arch.max_positions}){agree}."
    return f"The longest request {pool} holds (the model allows {arch.max_positions}){agree}."


def layout_mode(plan: layout.Plan) -> str:
    """The layout to write: the plan's choice (`pdctl plan --mode` decides it, never the file)."""
    assert plan.choice is not None  # sizing.plan sets it
    return plan.choice.mode


def max_model_len(plan: layout.Plan) -> int:
    """The --max-model-len the file holds: the PD layout's (its smaller KV pool), or for an
    aggregated choice its engine's (the model's context, cut to what one engine holds)."""
    aggregated = plan.aggregated_max_model_len
    if layout_mode(plan) != "aggregated" or aggregated is None:
        return plan.max_model_len
    return aggregated


def _aggregated_context(plan: layout.Plan, name: str) -> dict[str, Any]:
    """The aggregated pool (role both) and its estimates (pdctl.plan.aggregated)."""
    a = plan.aggregated
    assert a is not None  # the choice is aggregated only where an aggregated layout fits
    pool = _pool_context(plan, layout.RolePlan("both", a.engine, a.replicas), name)
    estimates = {
        "replicas": a.replicas,
        "tp": a.engine.tp,
        "gpus_used": a.gpus,
        "prefill_ms": f"{a.prefill_ms:.0f}",
        "decode_step_ms": f"{a.decode_step_ms:.1f}",
        "batch": a.batch,
        "itl_ms": f"{a.itl_ms:.1f}",
        "ttft_ms": f"{a.ttft_ms:.0f}",
        "rps": f"{a.requests_per_s:.2f}",
    }
    longest = max_model_len(plan)
    why = _max_model_len_why(plan, longest, "one engine's KV pool", "")
    return {
        "pools": [pool],
        "aggregated": estimates,
        "max_model_len": longest,
        "max_model_len_why": why,
    }


def context(plan: layout.Plan, options: InitOptions, out: Path | None) -> dict[str, Any]:
    """Everything the template needs, as strings and numbers."""
    req, arch, e = plan.request, plan.request.arch, plan.estimates
    p = memory.params(arch)
    choice = plan.choice
    assert choice is not None  # sizing.plan sets it
    names = pool_names(arch.name, options.release)
    if layout_mode(plan) == "aggregated":
        body = _aggregated_context(plan, names["both"])
    else:
        body = {
            "pools": [
                _pool_context(plan, plan.prefill, names["prefill"]),
                _pool_context(plan, plan.decode, names["decode"]),
            ],
            "aggregated": None,
            "max_model_len": plan.max_model_len,
            "max_model_len_why": _max_model_len_why(
                plan, plan.max_model_len, "the smaller KV pool", "; prefill and decode must agree"
            ),
        }
    w = options.wiring
    return {
        **body,
        "version": __version__,
        "command": options.command,
        "model": arch.name,
        "gpu": req.gpu.name,
        "gpus": req.gpus,
        "gpus_used": plan.gpus_used,
        "prefill": {"replicas": plan.prefill.replicas, "tp": plan.prefill.engine.tp},
        "decode": {"replicas": plan.decode.replicas, "tp": plan.decode.engine.tp},
        "params": f"{p.total / 1e9:.2f}",
        "active": f" ({p.active / 1e9:.2f}B active per token)" if arch.moe else "",
        "weight_dtype": arch.weight_dtype.upper(),
        "weights_gib": _gib(memory.weight_bytes(arch) / memory.GiB),
        "checkpoint_gib": _gib(memory.checkpoint_bytes(arch) / memory.GiB),
        "kv_bytes_per_token": memory.kv_bytes_per_token(arch, req.kv_cache_dtype),
        "kv_dtype": "FP8" if req.kv_cache_dtype == "fp8" else "BF16",
        "kv_fp8": req.kv_cache_dtype == "fp8",
        "input_len": req.workload.input_len,
        "output_len": req.workload.output_len,
        "total_len": req.workload.total_len,
        "prefill_ms": f"{e.prefill_ms:.0f}",
        "prefill_tps": f"{e.prefill_tokens_per_s:.0f}",
        "itl_ms": f"{e.itl_ms:.1f}",
        "decode_batch": e.decode_batch,
        "transfer_ms": f"{e.kv_transfer_ms:.1f}",
        "transfer_link": req.link_description,
        "calibration": req.calibration,
        "basis": report.basis(req),
        "ttft_ms": f"{e.ttft_ms:.0f}",
        "rps": f"{e.requests_per_s:.2f}",
        "bottleneck": e.bottleneck,
        "verdict": {"likely": "is likely to", "may": "may", "unlikely": "is unlikely to"}[
            plan.verdict
        ],
        "choice": choice,
        "targets": "; ".join(objective.labels(req.workload)) or "none",
        "reasons": plan.reasons,
        "warnings": plan.warnings,
        "notes": plan.notes,
        "load": report.assumed_load(plan),
        "flips": report.flip_line(plan),
        "fewest_gpus": report.gpus_line(plan),
        "rules_agree": report.rules_agree(plan),
        "out": out.name if out else "values.yaml",
        "vllm_version": ENGINE_VLLM_VERSION,
        "engine_repository": ENGINE_REPOSITORY,
        "engine_tag": ENGINE_TAG,
        "cpu_per_worker": pods.CPU_PER_WORKER,
        "host_per_worker": pods.HOST_GIB_PER_WORKER,
        "shm_per_worker": pods.SHM_GIB_PER_WORKER,
        "gpu_resource": req.gpu.resource,
        "gpu_memory": f"{req.gpu.memory_gib:g}",
        "utilization": req.utilization,
        "node_selector": options.node_selector,
        "product_label": req.gpu.product_label,
        "gated": arch.gated,
        "secret_name": options.secret_name,
        "secret_key": options.secret_key,
        "namespace": options.namespace,
        "connector": w.connector.name,
        "connector_summary": w.connector.summary,
        "kv_connector": w.kv_connector,
        "role_label": naming.ROLE,
        "router_image": connectors.load().router_images[ROUTER],
        "startup": _startup(plan),
    }


def _startup(plan: layout.Plan) -> dict[str, Any]:
    """The engines' startup budget (memory.startup_seconds) as failureThreshold periods of the
    chart's startup probe (servingEngineSpec.startupProbe.periodSeconds)."""

    defaults = chart.default_values(bundled_chart_dir()).get("servingEngineSpec", {})
    period = int(defaults.get("startupProbe", {}).get("periodSeconds", 10))
    seconds = memory.startup_seconds(plan.request.arch)
    return {
        "threshold": -(-seconds // period),
        "period": period,
        "minutes": -(-seconds // 60),
        "download_mibps": memory.STARTUP_DOWNLOAD_MIB_S,
        "base_minutes": memory.STARTUP_BASE_S // 60,
    }


def render(plan: layout.Plan, options: InitOptions, out: Path | None = None) -> str:
    """The values file's text (the Jinja2 template): the layout of the plan's choice."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    environment.filters["q"] = json.dumps  # a JSON string is a YAML double-quoted scalar
    environment.filters["plural"] = _plural
    text = environment.get_template(TEMPLATE.name).render(**context(plan, options, out))
    return "\n".join(_wrap(line) for line in text.rstrip("\n").split("\n")) + "\n"


WIDTH = 100
_COMMANDS = ("pdctl ", "kubectl ")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _wrap(line: str) -> str:
    """Comment lines past WIDTH wrapped at the same indentation (commands stay whole)."""
    stripped = line.lstrip()
    body = stripped[1:].lstrip()
    if len(line) <= WIDTH or not stripped.startswith("#") or body.startswith(_COMMANDS):
        return line
    indent = line[: len(line) - len(stripped)]
    bullet = "- " if body.startswith("- ") else ""
    lead = stripped[: len(stripped) - len(body)]  # "# " or "#   "
    import textwrap

    return "\n".join(
        textwrap.wrap(
            body,
            width=WIDTH,
            initial_indent=indent + lead,
            subsequent_indent=indent + lead + " " * len(bullet),
            break_on_hyphens=False,
        )
    )


def check(text: str, options: InitOptions, name: str = "<generated>") -> list[Finding]:
    """The pipeline's checks (schema and PD rules) on generated values: the warnings, or
    GeneratedValuesInvalid listing the errors."""

    document = loads(text)
    values = pipeline.Values(data=document.data, sources=[(name, document)])
    findings = pipeline.check(values, options.release, namespace=options.namespace)
    refused = pipeline.errors(findings)
    if refused:
        raise GeneratedValuesInvalid(
            "internal error: the values pdctl init generated fail validation (a bug in pdctl; "
            "nothing was written)",
            hint="please report it with the command line",
            details=[line for finding in refused for line in finding.lines()],
        )
    return [f for f in findings if f not in refused]


@dataclass
class Written:
    text: str
    warnings: list[Finding]
    path: Path | None  # None: stdout
    mode: str = "pd"  # the layout written: pd or aggregated


def write(
    plan: layout.Plan,
    options: InitOptions,
    out: Path | None,
    force: bool = False,
) -> Written:
    """Render, check, then write `out` (None: return the text for stdout): the layout of the
    plan's choice. Refuses to overwrite an existing file without `force`."""
    if out is not None and out.exists() and not force:
        raise InputError(
            f"{out} exists", hint="pass --force to overwrite it, or --out another file"
        )
    text = render(plan, options, out)
    warnings = check(text, options, str(out) if out else "<stdout>")
    if out is not None:
        files.write_text(out, text)
    return Written(text, warnings, out, layout_mode(plan))
