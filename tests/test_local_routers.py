"""Which router `pdctl up` runs (pdctl.local.routers): the stand-in for production-stack's router
and LMCache's PD proxy, told from the render and never from the command's name; production-stack's
`vllm-router` told from vLLM's by the module it runs; each refusal names what would run; and
LMCache's PD addresses rewritten for one host (pdctl.local.lmcache_env)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.errors import EnvironmentProblem, InputError
from pdctl.local import lifecycle, lmcache_env, routers
from pdctl.local.layout import Process


@pytest.mark.parametrize(
    ("container", "kind"),
    [
        ({"args": ["--routing-logic", "disaggregated_prefill"]}, "disaggregated_prefill"),
        ({"args": ["--routing-logic=roundrobin"]}, "roundrobin"),
        ({"command": ["python", "p.py"], "args": ["--decoder-init-port", "7300"]}, "lmcache-proxy"),
        # production-stack's image runs `vllm-router` too: its flags tell it, not the name
        ({"command": ["vllm-router"], "args": ["--routing-logic", "session"]}, "session"),
        ({"command": ["vllm-router"], "args": ["--vllm-pd-disaggregation"]}, routers.VLLM_ROUTER),
    ],
)
def test_the_router_is_told_from_the_render(container: dict[str, list[str]], kind: str) -> None:
    assert routers.kind(container) == kind


def test_a_routing_logic_up_cannot_play_names_what_would_run() -> None:
    with pytest.raises(InputError, match="routingLogic kvaware") as refused:
        routers.kind({"args": ["--routing-logic", "kvaware"]})
    assert "tutorials/assets/values-16-disagg-prefill.yaml" in str(refused.value.hint)
    assert "pdctl deploy" in str(refused.value.hint)


def test_llm_d_names_what_would_run() -> None:
    with pytest.raises(InputError, match="llm-d") as refused:
        routers.kind({"args": ["--pool-name", "p"]})
    assert "tutorials/25-llm-d-router.md" in str(refused.value.hint)


def _script(folder: Path, module: str) -> Path:
    path = folder / "vllm-router"
    path.write_text(
        f"#!/usr/bin/python3\nimport sys\nfrom {module} import main\nsys.exit(main())\n"
    )
    path.chmod(0o755)
    return path


def test_production_stacks_command_is_told_by_its_module(tmp_path: Path) -> None:
    (tmp_path / "ps").mkdir()
    (tmp_path / "vllm").mkdir()
    assert lifecycle.production_stack_command(str(_script(tmp_path / "ps", "vllm_router.app")))
    vllms = _script(tmp_path / "vllm", "vllm_router.launch_router")
    assert not lifecycle.production_stack_command(str(vllms))


def test_production_stacks_router_is_not_taken_for_vllm_router(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(tmp_path, "vllm_router.app")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match="production-stack's router") as refused:
        lifecycle.router_binary()
    assert "pdctl[local]" in str(refused.value.hint)


def _engine(name: str, env: dict[str, str]) -> Process:
    return Process(name, "prefill" if "sender" in env.values() else "decode", [], dict(env), 0)


def test_the_tutorials_sender_sends_to_the_receiver_its_service_names() -> None:
    ports = iter(range(41000, 41100))
    decode = _engine("llama-decode", {lmcache_env.TUTORIAL_ROLE: "receiver"})
    other = _engine("other-decode", {lmcache_env.TUTORIAL_ROLE: "receiver"})
    sender = _engine(
        "llama-prefill",
        {
            lmcache_env.TUTORIAL_ROLE: "sender",
            lmcache_env.RECEIVER_HOST: "pd-llama-decode-engine-service",
        },
    )
    pools = {e.name: e.name for e in (decode, other, sender)}
    changes, notify = lmcache_env.wire(
        [sender, decode, other], pools, "pd", lambda: next(ports), "127.0.0.1"
    )
    assert sender.env[lmcache_env.RECEIVER_PORT] == decode.env[lmcache_env.RECEIVER_PORT]
    assert decode.env[lmcache_env.RECEIVER_PORT] != other.env[lmcache_env.RECEIVER_PORT]
    assert sender.env[lmcache_env.RECEIVER_HOST] == "127.0.0.1" and notify is None
    assert "llama-prefill: LMCache's NIXL receiver is llama-decode" in changes[0]
    sender.env[lmcache_env.RECEIVER_HOST] = "elsewhere"
    with pytest.raises(InputError, match="not the Service of exactly one") as refused:
        lmcache_env.wire([sender, decode, other], pools, "pd", lambda: next(ports), "127.0.0.1")
    assert "tutorials/16-disagg-prefill.md" in str(refused.value.hint)


def test_current_lmcache_receivers_get_ports_of_their_own_and_senders_the_stand_in() -> None:
    ports = iter(range(42000, 42100))
    receiver = _engine(
        "d",
        {
            lmcache_env.PD_ROLE: "receiver",
            lmcache_env.INIT_PORTS: "7300,7301",
            lmcache_env.ALLOC_PORTS: "7400,7401",
        },
    )
    sender = _engine(
        "p", {lmcache_env.PD_ROLE: "sender", lmcache_env.PROXY_HOST: "pd-router-service"}
    )
    _, notify = lmcache_env.wire(
        [sender, receiver], {"d": "d", "p": "p"}, "pd", lambda: next(ports), "127.0.0.1"
    )
    assert len(receiver.env[lmcache_env.INIT_PORTS].split(",")) == 2  # one per TP rank
    assert "7300" not in receiver.env[lmcache_env.INIT_PORTS]
    assert sender.env[lmcache_env.PROXY_PORT] == str(notify)
    assert sender.env[lmcache_env.PROXY_HOST] == "127.0.0.1"
