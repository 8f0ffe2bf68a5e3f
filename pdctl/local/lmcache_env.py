"""LMCache's PD addresses for engines on one host (pdctl.local.layout): in a cluster each pod has
its own network and a sender names its receiver by Service; as processes on one host every
listener needs a port of its own and every peer is 127.0.0.1. The env the chart renders is
rewritten, nothing else (pdctl/simulator/lmcache.py reads it as LMCache does):

- the PD tutorial's form (LMCACHE_NIXL_*): each receiver's LMCACHE_NIXL_RECEIVER_PORT is a port of
  its own; a sender's LMCACHE_NIXL_RECEIVER_HOST/PORT name the receiver of the pool whose Service it
  named (the only receiver when the name is not a pool's Service);
- LMCache >= 0.3.7 (LMCACHE_PD_*): each receiver's init and alloc ports (one per TP rank) are ports
  of their own; a sender's proxy (LMCACHE_PD_PROXY_HOST/PORT) is the router stand-in's
  notification port.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pdctl import naming
from pdctl.errors import InputError

if TYPE_CHECKING:
    from pdctl.local.layout import Process

RECEIVER_HOST, RECEIVER_PORT = "LMCACHE_NIXL_RECEIVER_HOST", "LMCACHE_NIXL_RECEIVER_PORT"
TUTORIAL_ROLE = "LMCACHE_NIXL_ROLE"
PD_ROLE, INIT_PORTS, ALLOC_PORTS = (
    "LMCACHE_PD_ROLE",
    "LMCACHE_PD_PEER_INIT_PORT",
    "LMCACHE_PD_PEER_ALLOC_PORT",
)
PROXY_HOST, PROXY_PORT = "LMCACHE_PD_PROXY_HOST", "LMCACHE_PD_PROXY_PORT"


def _count(value: str) -> int:
    return max(len([w for w in value.split(",") if w.strip()]), 1)


def _fresh(value: str, ports: Callable[[], int]) -> str:
    return ",".join(str(ports()) for _ in range(_count(value)))


def receivers(engines: list[Process]) -> list[Process]:
    return [e for e in engines if e.env.get(PD_ROLE) == "receiver"]


def wire(
    engines: list[Process],
    pools: dict[str, str],
    release: str,
    ports: Callable[[], int],
    loopback: str,
) -> tuple[list[str], int | None]:
    """Rewrite the engines' LMCache PD env in place (`pools`: engine name -> pool; every address
    `loopback`); the changes for up's record, and the notification port the stand-in must listen
    on (None: no sender reports to a proxy)."""
    changes: list[str] = []
    names = naming.Release(release)
    tutorial = {e.name: e for e in engines if e.env.get(TUTORIAL_ROLE) == "receiver"}
    for receiver in tutorial.values():
        receiver.env.update({RECEIVER_HOST: loopback, RECEIVER_PORT: str(ports())})
    for sender in (e for e in engines if e.env.get(TUTORIAL_ROLE) == "sender"):
        target = _receiver_of(sender, tutorial, pools, names)
        sender.env.update({RECEIVER_HOST: loopback, RECEIVER_PORT: target.env[RECEIVER_PORT]})
        changes.append(
            f"{sender.name}: LMCache's NIXL receiver is {target.name} "
            f"({RECEIVER_HOST}/{RECEIVER_PORT} {loopback}:{target.env[RECEIVER_PORT]})"
        )
    for receiver in receivers(engines):
        for key in (INIT_PORTS, ALLOC_PORTS):
            receiver.env[key] = _fresh(receiver.env.get(key, ""), ports)
    senders = [e for e in engines if e.env.get(PD_ROLE) == "sender"]
    notify = ports() if senders else None
    for sender in senders:
        sender.env.update({PROXY_HOST: loopback, PROXY_PORT: str(notify)})
    if senders:
        changes.append(
            f"LMCache's PD senders report transfers to the router stand-in at {loopback}:{notify} "
            f"({PROXY_HOST}/{PROXY_PORT}); each receiver has init and alloc ports of its own"
        )
    return changes, notify


def _receiver_of(
    sender: Process, receivers: dict[str, Process], pools: dict[str, str], names: naming.Release
) -> Process:
    host = sender.env.get(RECEIVER_HOST, "")
    named = [r for r in receivers.values() if names.pool_service(pools[r.name]) == host]
    found = named or (list(receivers.values()) if len(receivers) == 1 else [])
    if len(found) != 1:
        raise InputError(
            f"engine {sender.name}: its LMCache NIXL receiver {host!r} ({RECEIVER_HOST}) is not "
            "the Service of exactly one receiver pool of this release",
            hint="set lmcacheConfig.nixlPeerHost to the decode pool's Service, "
            "<release>-<pool>-engine-service (tutorials/16-disagg-prefill.md)",
        )
    return found[0]
