"""Which router `pdctl up` runs in the release router's place: vllm-router as rendered, or the
pd-stack router stand-in (pdctl.standin, a test double named as one) where the render's router is
one that no package index has: production-stack's router (routingLogic roundrobin, session,
disaggregated_prefill) or LMCache's PD proxy. Routers up cannot run are refused with the file,
value or tutorial that would run.

The render is read, never a command's name: production-stack's router image runs `vllm-router`
too (its entry point, docker/Dockerfile), so production-stack's router is told by its
`--routing-logic`, LMCache's proxy by its `--decoder-init-port`, llm-d's endpoint picker by its
`--endpoint-selector` or `--pool-name`; any other is vllm-router, whose command pdctl.local.consent
checks as the chart renders it.
"""

from __future__ import annotations

import sys
from typing import Any

from pdctl.errors import InputError
from pdctl.local import flags

VLLM_ROUTER = "vllm-router"
NAME = "pd-stack router stand-in"
MODULE = "pdctl.standin"  # the stand-in: python -m pdctl.standin
# What it plays, by the routing it was given (pdctl.standin.routes.ROUTINGS).
_PLAYS = {
    "roundrobin": "production-stack's router (roundrobin)",
    "session": "production-stack's router (session)",
    "disaggregated_prefill": "production-stack's router (disaggregated_prefill)",
    "lmcache-proxy": "LMCache's PD proxy",
}


def plays(routing: str) -> str:
    """How every command names the stand-in: "pd-stack router stand-in playing ..."."""
    return f"{NAME} playing {_PLAYS[routing]}"


LMCACHE_PROXY = "lmcache-proxy"
# production-stack's routing logics the stand-in plays (pdctl/standin/routes.py).
PLAYED = ("roundrobin", "session", "disaggregated_prefill")
LOCAL_PD = (
    "for PD on this machine: routerSpec.type vllm-router with NixlConnector "
    "(tutorials/17-nixl-vllm-router.md), the PD tutorial's file "
    "(tutorials/assets/values-16-disagg-prefill.yaml), or LMCacheConnectorV1 with routerSpec.type "
    "lmcache-proxy (tutorials/19-lmcache-pd.md)"
)


def _value(args: list[str], flag: str) -> str | None:
    found = flags.occurrences(args, [flag])
    return found[-1][2] if found else None


def kind(container: dict[str, Any]) -> str:
    """VLLM_ROUTER, LMCACHE_PROXY or a production-stack routing logic of PLAYED; InputError for a
    router up cannot run, naming what would."""
    args = [str(a) for a in container.get("args", [])]
    if _value(args, "--decoder-init-port") is not None:
        return LMCACHE_PROXY
    logic = _value(args, "--routing-logic")
    if logic is not None:
        if logic in PLAYED:
            return logic
        raise InputError(
            f"the release's router is production-stack's with routingLogic {logic}: pdctl up plays "
            f"production-stack's router with {', '.join(PLAYED)} only",
            hint="routerSpec.routingLogic roundrobin (aggregated, as pdctl init writes it) or "
            f"disaggregated_prefill; {LOCAL_PD}; or deploy it to a cluster (pdctl deploy)",
        )
    if any(flags.sets(a, f) for a in args for f in ("--endpoint-selector", "--pool-name")):
        raise InputError(
            "the release's router is llm-d's endpoint picker, which runs behind Envoy or a "
            "Gateway in a cluster: pdctl up does not run it",
            hint=f"deploy it to a cluster (pdctl deploy, tutorials/25-llm-d-router.md); {LOCAL_PD}",
        )
    return VLLM_ROUTER  # a command other than the chart's is refused as any other is (consent)


def standin_argv(
    routing: str,
    rendered_args: list[str],
    listen: tuple[str, int],
    engines: list[tuple[str, str, str]],
    notify_port: int | None,
) -> list[str]:
    """The stand-in's command line: the routing it plays, where it listens, the engines
    (role, URL, and "INIT,../ALLOC,.." receiver ports of an LMCache decode, else ""),
    production-stack's --session-key as rendered, and the port LMCache's senders report to."""
    argv = [sys.executable, "-m", MODULE, "--routing", routing]
    argv += ["--host", listen[0], "--port", str(listen[1])]
    for role, url, kv_ports in engines:
        argv += [f"--{role}" if role in ("prefill", "decode") else "--engine", url]
        if kv_ports and routing == LMCACHE_PROXY:
            argv += ["--decode-ports", kv_ports]
    key = _value(rendered_args, "--session-key")
    if routing == "session" and key:
        argv += ["--session-key", key]
    if notify_port is not None:
        argv += ["--notify-port", str(notify_port)]
    return argv
