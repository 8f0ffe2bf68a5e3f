"""The LMCache pair's plan (benchmarks/real_engines/lmcache_pair.py), from the real render of
tutorial 19's values: the engines as `pdctl up` plans them, LMCache's PD proxy wired to them on
loopback, every change from the render listed; and the counters it reads around a load."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.real_engines import lmcache_pair, run
from pdctl.local import layout as local


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    lmcache_pair.plan_command(argparse.Namespace(values=lmcache_pair.CURRENT, out=out))
    return dict(json.loads(out.read_text()))


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_the_proxy_reaches_the_planned_engines_on_loopback(plan: dict[str, Any]) -> None:
    engines = {e["role"]: e for e in plan["engines"]}
    proxy = plan["router"]["argv"]
    assert proxy[:2] == ["python3", str(lmcache_pair.PROXY_SCRIPT)]
    assert _flag(proxy, "--prefiller-port") == str(engines["prefill"]["port"])
    assert _flag(proxy, "--decoder-port") == str(engines["decode"]["port"])
    for flag in ("--host", "--prefiller-host", "--decoder-host", "--proxy-host"):
        assert _flag(proxy, flag) == local.LOOPBACK
    assert _flag(proxy, "--port") == str(plan["router"]["port"])
    assert _flag(proxy, "--model") == str(run.MODEL_DIR)
    sender, receiver = engines["prefill"]["env"], engines["decode"]["env"]
    assert sender["LMCACHE_PD_PROXY_HOST"] == local.LOOPBACK
    assert sender["LMCACHE_PD_PROXY_PORT"] == _flag(proxy, "--proxy-port")
    assert receiver["LMCACHE_PD_PEER_HOST"] == local.LOOPBACK
    assert receiver["LMCACHE_PD_PEER_INIT_PORT"] == _flag(proxy, "--decoder-init-port")
    assert all(e["argv"][0] == "vllm" for e in plan["engines"])


def test_every_change_from_the_render_is_listed(plan: dict[str, Any]) -> None:
    changes = "\n".join(plan["changes"])
    for said in ("--model", "LMCACHE_PD_PROXY_HOST", "/opt/venv/bin/vllm -> vllm", "dummy"):
        assert said in changes
    assert "vllm-router" not in changes and "static mode" not in changes


def test_the_tutorial_form_env_is_kept_for_the_forms_check(plan: dict[str, Any]) -> None:
    env = plan["tutorial_form"]["env"]
    assert {e["LMCACHE_NIXL_ROLE"] for e in env.values()} == {"sender", "receiver"}
    assert all("LMCACHE_ENABLE_PD" in e for e in plan["current_form_env"].values())


def test_delta_keeps_the_pd_counters_that_moved() -> None:
    external = 'vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}'
    before = f"{external} 10.0\nlmcache:num_lookup_hits_total 5.0\nvllm:other 1.0\n"
    after = f"{external} 2058.0\nlmcache:num_lookup_hits_total 5.0\nvllm:other 9.0\n"
    assert lmcache_pair._delta(before, after) == {external: 2048.0}


def test_loads_through_the_proxy_leave_out_min_tokens() -> None:
    assert all(not load.min_tokens for load in [*lmcache_pair.PAIR_LOADS, *lmcache_pair.PAIR_SIZES])
    assert Path(lmcache_pair.PROXY_SCRIPT).name == "disagg_proxy_server.py"
