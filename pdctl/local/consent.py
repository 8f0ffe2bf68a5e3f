"""What `pdctl up` runs on its own, and what needs the user's explicit consent (docs/security.md,
"pdctl up runs files as code").

A values file or a rendered folder is code on this machine: `up` runs only what it recognises as
the chart's (vLLM's `serve` or the simulator's, vllm-router) with the environment the chart
renders by itself. Anything else that would change what runs is refused, naming the flag that
allows it:

- env outside ALLOWED_ENV (names) and ALLOWED_PREFIXES, or in CODE_ENV: `--allow-env NAME`;
- a command other than the chart's: `--allow-command`;
- an engine flag that loads code (CODE_FLAGS, CODE_KEYS): `--allow-code-flag NAME`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pdctl.local import flags

# The env the chart renders by itself (helm/templates/_helpers-engine.tpl pd-stack.engineEnv,
# _router.tpl pd-stack.routerEnv, the connectors' fragments _connector-*.tpl), and what up adds
# (CUDA_VISIBLE_DEVICES, HF_TOKEN; pdctl.local.layout).
ALLOWED_ENV = frozenset(
    {
        "PYTHONHASHSEED",
        "CUDA_VISIBLE_DEVICES",
        "POD_IP",
        "HF_HOME",
        "HF_TOKEN",
        "HF_TOKEN_PATH",
        "OPENAI_API_KEY",
        "PROMETHEUS_MULTIPROC_DIR",
        "OTEL_SERVICE_NAME",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    }
)
# The connectors' and vLLM's own settings (the chart renders UCX_TLS, LMCACHE_*, VLLM_* and, for
# NCCL connectors, leaves NCCL_* to the user).
ALLOWED_PREFIXES = ("VLLM_", "UCX_", "LMCACHE_", "NCCL_")
# Names under those prefixes that load code from a path: a logging dictConfig can name any class
# (vllm/logger.py), UCX loads its modules from UCX_MODULE_DIR, NCCL loads its plugins by name or
# path (NCCL's environment variables documentation).
CODE_ENV = frozenset(
    {
        "VLLM_LOGGING_CONFIG_PATH",
        "UCX_MODULE_DIR",
        "NCCL_NET_PLUGIN",
        "NCCL_TUNER_PLUGIN",
        "NCCL_PROFILER_PLUGIN",
    }
)
# The engine and router commands the chart renders (pd-stack.vllmExecutable in
# _helpers-engine.tpl; deployment-router.yaml), each followed by `serve` for an engine.
ENGINE_COMMANDS = (["vllm"], ["/opt/venv/bin/vllm"])
ROUTER_COMMANDS = (["vllm-router"],)
SERVE = "serve"
# vLLM flags that import code: vllm/entrypoints/openai/cli_args.py (--middleware,
# --tool-parser-plugin, --log-config-file: a dictConfig), vllm/config/parallel.py (--worker-cls,
# --worker-extension-cls), vllm/config/model.py (--logits-processors, --trust-remote-code: the
# model repository's Python), vllm/config/structured_outputs.py (--reasoning-parser-plugin), and
# --config, which reads more flags from a YAML file (vllm/utils/argparse_utils.py).
CODE_FLAGS = (
    "--middleware",
    "--tool-parser-plugin",
    "--reasoning-parser-plugin",
    "--log-config-file",
    "--worker-cls",
    "--worker-extension-cls",
    "--logits-processors",
    "--trust-remote-code",
    "--config",
)
# JSON flags with a key naming a module to import (vllm/config/kv_transfer.py,
# vllm/config/ec_transfer.py).
CODE_KEYS = {
    "--kv-transfer-config": "kv_connector_module_path",
    "--ec-transfer-config": "ec_connector_module_path",
}


@dataclass(frozen=True)
class Consent:
    """What the user allowed on the command line."""

    env: frozenset[str] = frozenset()  # --allow-env NAME
    command: bool = False  # --allow-command
    code_flags: frozenset[str] = frozenset()  # --allow-code-flag NAME (normalised by code_flag)

    def allows_code(self, flag: str) -> bool:
        return code_flag(flag) in self.code_flags


def code_flag(given: str) -> str:
    """A code flag's name as --allow-code-flag takes it: `middleware` for `--middleware`,
    `kv_connector_module_path` as it is."""
    return given.lstrip("-").replace("_", "-")


def env_allowed(name: str) -> bool:
    if name in CODE_ENV:
        return False
    return name in ALLOWED_ENV or name.startswith(ALLOWED_PREFIXES)


def env_refusals(names: Iterable[str], where: str, consent: Consent) -> list[str]:
    return [
        f"env {name} of {where} is not one the chart renders (it can change what runs); "
        f"allow it with --allow-env {name}"
        for name in sorted(names)
        if not env_allowed(name) and name not in consent.env
    ]


def command_refusal(
    command: list[str], args: list[str], where: str, engine: bool, consent: Consent
) -> list[str]:
    """A command other than the chart's engine (`vllm serve`) or router command."""
    known = ENGINE_COMMANDS if engine else ROUTER_COMMANDS
    if consent.command or (command in known and (not engine or args[:1] == [SERVE])):
        return []
    what = "vLLM's serve" if engine else "vllm-router"
    shown = " ".join([*command, *args[:1]]) or "(no command)"
    return [
        f"{where} runs `{shown}`, not {what} as the chart renders it; "
        "allow another command with --allow-command"
    ]


def _json_keys(value: str | None) -> dict[str, Any]:
    try:
        found = json.loads(value or "")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def code_flags(args: list[str]) -> list[str]:
    """The code-loading flags and keys args sets (as --allow-code-flag names them)."""
    found = [code_flag(flag) for flag, _, _ in flags.occurrences(args, CODE_FLAGS)]
    for flag, word, value in flags.occurrences(args, CODE_KEYS):
        key = CODE_KEYS[flag]
        dotted = flags.name(word)[1]
        if dotted == key or (not dotted and key in _json_keys(value)):
            found.append(code_flag(key))
    return sorted(set(found))


def code_refusals(args: list[str], where: str, consent: Consent) -> list[str]:
    return [
        f"{where} sets {name}, which loads code into the engine; "
        f"allow it with --allow-code-flag {name}"
        for name in code_flags(args)
        if not consent.allows_code(name)
    ]
