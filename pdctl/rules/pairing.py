"""Rules on how prefill and decode pools pair up: roles, peers, ports, model agreement."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pdctl.rules.model import ROLE_BY_KV, Deployment, Pool
from pdctl.rules.registry import Issue, rule
from pdctl.validation.findings import Severity

_ROLE_BY_NIXL = {"sender": "prefill", "receiver": "decode"}
_ANY_ADDRESS = {"0.0.0.0", "::"}


@rule("PD001", "KV roles (producer/consumer, sender/receiver) agree with the pool's role and pair")
def roles_agree(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        kv_role, kv_path = pool.kv_role
        declared = pool.spec.get("role")
        implied = ROLE_BY_KV.get(str(kv_role), "both") if kv_role else None
        if declared in ("prefill", "decode", "both") and implied and declared != implied:
            yield Issue(
                kv_path,
                f"pool {pool.name!r} has role {declared} but kvRole {kv_role}",
                "prefill pools use kv_producer, decode pools kv_consumer",
            )
        nixl_role = pool.lmcache.get("nixlRole")
        if pool.legacy_nixl and nixl_role in _ROLE_BY_NIXL:
            if _ROLE_BY_NIXL[nixl_role] != pool.role:
                yield Issue(
                    pool.at("lmcacheConfig", "nixlRole"),
                    f"pool {pool.name!r} is a NIXL {nixl_role} but its role is {pool.role} "
                    f"(kvRole {kv_role or 'unset'})",
                    "a sender is a kv_producer (prefill); a receiver is a kv_consumer (decode)",
                )
        if pool.lmcache.get("enableNixl") and not pool.lmcache.get("enabled"):
            yield Issue(
                pool.at("lmcacheConfig", "enableNixl"),
                f"pool {pool.name!r} enables NIXL but not LMCache (lmcacheConfig.enabled)",
                "set lmcacheConfig.enabled: true, or drop enableNixl",
            )
    prefill, decode = deployment.by_role("prefill"), deployment.by_role("decode")
    for lonely, missing in ((prefill, "decode (kv_consumer)"), (decode, "prefill (kv_producer)")):
        if lonely and not (prefill and decode):
            pool = lonely[0]
            yield Issue(
                pool.kv_role[1],
                f"pool {pool.name!r} transfers KV as {pool.role} but no {missing} pool exists",
                "add the other side of the pair, or make the pool kv_both",
            )


def _service_target(deployment: Deployment, host: str) -> str | None:
    """The pool name a host refers to, if it is one of this release's engine Services."""
    pattern = (
        rf"^{re.escape(deployment.release)}-(?P<pool>[a-z0-9-]+)-engine-service"
        r"(\.[a-z0-9-]+(\.svc(\.cluster\.local)?)?)?$"
    )
    match = re.match(pattern, host)
    return match.group("pool") if match else None


@rule("PD003", "peer hosts resolve to a Service this release renders for a pool of the right role")
def peers_resolve(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        if pool.legacy_nixl and pool.lmcache.get("nixlPeerHost") is not None:
            host = str(pool.lmcache["nixlPeerHost"])
            path = pool.at("lmcacheConfig", "nixlPeerHost")
            if pool.lmcache.get("nixlRole") == "receiver":
                if host not in _ANY_ADDRESS and _service_target(deployment, host) != pool.name:
                    yield Issue(
                        path,
                        f"receiver {pool.name!r} listens on {host!r}, which is neither 0.0.0.0 "
                        "nor its own Service",
                        "a receiver normally listens on 0.0.0.0",
                        Severity.warning,
                    )
                continue
            if pool.lmcache.get("nixlRole") != "sender":
                continue
            target = _service_target(deployment, host)
            decode = [p for p in deployment.by_role("decode") if p.name == target]
            if not decode:
                services = [deployment.service_name(p) for p in deployment.by_role("decode")]
                expected = ", ".join(services)
                yield Issue(
                    path,
                    f"sender {pool.name!r} sends KV to {host!r}, which is not the Service of a "
                    f"decode pool of release {deployment.release!r}",
                    f"use {expected}" if expected else "add a decode (kv_consumer) pool",
                )
        peer = pool.kv_transfer.get("peerPool")
        if peer is not None:
            wanted = {"prefill": "decode", "decode": "prefill"}.get(pool.role)
            matches = deployment.by_name(str(peer))
            if not matches or (wanted and matches[0].role != wanted):
                yield Issue(
                    pool.at("kvTransfer", "peerPool"),
                    f"pool {pool.name!r} pairs with {peer!r}, which is not a "
                    f"{wanted or 'PD'} pool of this release",
                    "name a pool of the opposite role in servingEngineSpec.modelSpec",
                )


def _legacy_pairs(deployment: Deployment) -> Iterator[tuple[Pool, Pool]]:
    """(sender, receiver) pairs of the tutorial's LMCache NIXL form, joined by nixlPeerHost."""
    for sender in deployment.pools:
        if not (sender.legacy_nixl and sender.lmcache.get("nixlRole") == "sender"):
            continue
        target = _service_target(deployment, str(sender.lmcache.get("nixlPeerHost", "")))
        for receiver in deployment.by_name(target or ""):
            if receiver.legacy_nixl and receiver.lmcache.get("nixlRole") == "receiver":
                yield sender, receiver


@rule("PD004", "a sender's peer port is the port its receiver listens on")
def peer_ports_agree(deployment: Deployment) -> Iterator[Issue]:
    for sender, receiver in _legacy_pairs(deployment):
        sent, heard = sender.lmcache.get("nixlPeerPort"), receiver.lmcache.get("nixlPeerPort")
        if sent is not None and heard is not None and str(sent) != str(heard):
            yield Issue(
                sender.at("lmcacheConfig", "nixlPeerPort"),
                f"sender {sender.name!r} sends to port {sent} but receiver {receiver.name!r} "
                f"listens on {heard}",
                "use the same nixlPeerPort on both pools",
            )


def _field(pool: Pool, key: str) -> tuple[object, tuple[str | int, ...]]:
    if key == "modelURL":
        return pool.spec.get("modelURL"), pool.at("modelURL")
    return pool.vllm.get(key), pool.at("vllmConfig", key)


@rule("PD005", "prefill and decode serve the same model, context length and KV cache layout")
def pools_agree(deployment: Deployment) -> Iterator[Issue]:
    for prefill, decode in deployment.pairs():
        connector = prefill.connector[0] or decode.connector[0]
        for key in ("modelURL", "maxModelLen", "kvCacheDtype", "blockSize"):
            p_value, _ = _field(prefill, key)
            d_value, d_path = _field(decode, key)
            if key == "kvCacheDtype":
                p_value, d_value = p_value or "auto", d_value or "auto"
            if key == "blockSize":
                p_value, d_value = p_value or 16, d_value or 16
                if connector == "NixlConnector" and isinstance(p_value, int):
                    if isinstance(d_value, int) and p_value <= d_value:
                        continue  # NIXL allows a smaller prefill block size (non-HMA)
            if p_value is None or d_value is None or p_value == d_value:
                continue
            yield Issue(
                d_path,
                f"decode pool {decode.name!r} has {key} {d_value!r} but prefill pool "
                f"{prefill.name!r} has {p_value!r}",
                "the KV cache a prefill pool sends is only usable by a decode pool with the "
                "same " + key,
            )


@rule("PD014", "the tutorial's LMCache NIXL form is 1P1D: one sender per one receiver pod")
def legacy_one_to_one(deployment: Deployment) -> Iterator[Issue]:
    senders: dict[str, list[str]] = {}
    for sender, receiver in _legacy_pairs(deployment):
        senders.setdefault(receiver.name, []).append(sender.name)
        for pool in (sender, receiver):
            if pool.replicas > 1:
                yield Issue(
                    pool.at("replicaCount"),
                    f"pool {pool.name!r} has {pool.replicas} replicas, but LMCache's NIXL "
                    "sender/receiver form pairs exactly one sender pod with one receiver pod",
                    "use replicaCount: 1, or a connector that supports xPyD (NixlConnector)",
                )
    for receiver, names in senders.items():
        if len(names) > 1:
            pool = deployment.by_name(receiver)[0]
            yield Issue(
                pool.path,
                f"receiver {receiver!r} has {len(names)} senders ({', '.join(names)}); the "
                "LMCache NIXL form is 1P1D",
            )
