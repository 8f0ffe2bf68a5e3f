"""Rules on how prefill and decode pools pair up: roles, peers, ports, model agreement.

Each error here has a twin in the chart (templates/_checks-pairing.tpl, same rule id
in its message).
"""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.findings import Severity
from pdctl.naming import names_service, service_pool
from pdctl.rules.deployment import ROLE_BY_KV, Deployment, Pool, as_dict, as_int
from pdctl.rules.registry import Issue, rule

_ROLE_BY_NIXL = {"sender": "prefill", "receiver": "decode"}

_OPPOSITE = {"prefill": "decode", "decode": "prefill"}
_ANY_ADDRESS = {"0.0.0.0", "::"}


@rule(
    "PD001",
    "KV roles (producer/consumer, sender/receiver) agree with the pool's role and pair",
    explain=(
        "a declared kvRole agrees with the pool's role (producer = prefill, consumer = "
        "decode), a NIXL `nixlRole` too (sender = prefill); a prefill pool has a decode pool "
        "and vice versa; NIXL needs LMCache enabled"
    ),
)
def roles_agree(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        if pool.lmcache.get("enableNixl") and not pool.lmcache.get("enabled"):
            yield Issue(
                pool.at("lmcacheConfig", "enableNixl"),
                f"pool {pool.name!r} enables NIXL but not LMCache (lmcacheConfig.enabled)",
                "set lmcacheConfig.enabled: true, or drop enableNixl",
            )
        for key, kv_role in (
            ("lmcacheConfig", pool.lmcache.get("kvRole")),
            ("kvTransfer", pool.kv_transfer.get("kvRole")),
        ):
            wanted = ROLE_BY_KV.get(str(kv_role))
            if pool.spec.get("role") and wanted and wanted != pool.role:
                yield Issue(
                    pool.at(key, "kvRole"),
                    f"pool {pool.name!r} has role {pool.role} but {key}.kvRole {kv_role}",
                    "prefill pools use kv_producer, decode pools kv_consumer",
                )
        nixl_role = pool.lmcache.get("nixlRole")
        implied = _ROLE_BY_NIXL.get(str(nixl_role))
        if pool.legacy_nixl and implied and implied != pool.role:
            role, role_key, decided_by = pool.role_source
            yield Issue(
                role_key,
                f"pool {pool.name!r} is a {role} pool by {decided_by} but a {implied} pool by "
                f"lmcacheConfig.nixlRole {nixl_role}",
                "a sender is a kv_producer (prefill), a receiver a kv_consumer (decode): make the "
                "two agree (if the roles were swapped between the pools, swap them back)",
            )
    for role, other in _OPPOSITE.items():
        lonely = deployment.by_role(role)
        if lonely and not deployment.by_role(other):
            yield Issue(
                lonely[0].path,
                f"pool {lonely[0].name!r} is a {role} pool but no {other} pool exists",
                "add the other side of the pair, or make the pool role both",
            )


def lmcache_proxy_notify_port(deployment: Deployment) -> int:
    """The ZMQ port of the LMCache proxy the chart deploys (pd-stack.lmcacheProxyNotifyPort):
    routerSpec.lmcacheProxy.notifyPort (its default is values.yaml's, merged in)."""
    return as_int(as_dict(deployment.router.get("lmcacheProxy")).get("notifyPort"), 0)


def _lmcache_proxy_senders(deployment: Deployment) -> Iterator[Pool]:
    """LMCache senders that report to the LMCache proxy the chart deploys."""
    if not deployment.lmcache_proxy:
        return
    for pool in deployment.pools:
        connector = pool.connector
        if connector and "lmcache-proxy" in connector.routers and pool.kv_role == "kv_producer":
            yield pool


@rule(
    "PD003",
    "peer hosts resolve to a Service this release renders for a pool of the right role",
    explain=(
        "a sender's `nixlPeerHost` is "
        "`<release>-<pool>-engine-service[.<ns>[.svc[.cluster.local]]]` of a decode pool; "
        "`kvTransfer.peerPool` names a pool of the opposite role; a receiver listens on "
        "0.0.0.0 (warning otherwise); an LMCache sender's `lmcache.proxyHost`, if set, names "
        "the proxy the chart deploys"
    ),
)
def peers_resolve(deployment: Deployment) -> Iterator[Issue]:
    proxy = deployment.release.router_service
    for sender in _lmcache_proxy_senders(deployment):
        host = as_dict(sender.kv_transfer.get("lmcache")).get("proxyHost")
        if host and not names_service(deployment.release, proxy, str(host)):
            yield Issue(
                sender.at("kvTransfer", "lmcache", "proxyHost"),
                f"proxyHost {host!r} is not the LMCache proxy this release deploys ({proxy})",
                "leave it unset: it defaults to the proxy (routerSpec.type lmcache-proxy)",
            )
    for pool in deployment.pools:
        yield from _legacy_peer_host(deployment, pool)
        peer = pool.kv_transfer.get("peerPool")
        if peer is None:
            continue
        wanted = _OPPOSITE.get(pool.role)
        matches = deployment.by_name(str(peer))
        if not matches or (wanted and matches[0].role != wanted):
            yield Issue(
                pool.at("kvTransfer", "peerPool"),
                f"pool {pool.name!r} pairs with {peer!r}, which is not a "
                f"{wanted or 'PD'} pool of this release",
                "name a pool of the opposite role in servingEngineSpec.modelSpec",
            )


def _legacy_peer_host(deployment: Deployment, pool: Pool) -> Iterator[Issue]:
    """The tutorial's nixlPeerHost: a sender names a decode pool's Service; a receiver listens."""
    if not pool.legacy_nixl or pool.lmcache.get("nixlPeerHost") is None:
        return
    host = str(pool.lmcache["nixlPeerHost"])
    path = pool.at("lmcacheConfig", "nixlPeerHost")
    target = service_pool(deployment.release, host)
    if pool.lmcache.get("nixlRole") == "receiver":
        if host not in _ANY_ADDRESS and target != pool.name:
            yield Issue(
                path,
                f"receiver {pool.name!r} listens on {host!r}, which is neither 0.0.0.0 nor its "
                "own Service",
                "a receiver normally listens on 0.0.0.0",
                Severity.warning,
            )
    elif pool.lmcache.get("nixlRole") == "sender":
        if not any(p.name == target for p in deployment.by_role("decode")):
            others = [p for p in deployment.by_role("decode") if p.name != pool.name]
            services = [deployment.release.pool_service(p.name) for p in others]
            yield Issue(
                path,
                f"sender {pool.name!r} sends KV to {host!r}, which is not the Service of a "
                f"decode pool of release {deployment.release.name!r}",
                f"use {', '.join(services)}"
                if services
                else "no other pool is a decode (kv_consumer) pool: check the pools' kvRole",
            )


def _legacy_pairs(deployment: Deployment) -> Iterator[tuple[Pool, Pool]]:
    """(sender, receiver) pairs of the tutorial's LMCache NIXL form, joined by nixlPeerHost."""
    for sender in deployment.pools:
        if not (sender.legacy_nixl and sender.lmcache.get("nixlRole") == "sender"):
            continue
        target = service_pool(deployment.release, str(sender.lmcache.get("nixlPeerHost", "")))
        for receiver in deployment.by_name(target or ""):
            if receiver.legacy_nixl and receiver.lmcache.get("nixlRole") == "receiver":
                yield sender, receiver


@rule(
    "PD004",
    "a sender's peer port is the port its receiver listens on",
    explain=(
        "sender and receiver `nixlPeerPort` agree; an LMCache sender's `lmcache.proxyPort`, "
        "if set, is the deployed proxy's `notifyPort`"
    ),
)
def peer_ports_agree(deployment: Deployment) -> Iterator[Issue]:
    for sender in _lmcache_proxy_senders(deployment):
        port = as_dict(sender.kv_transfer.get("lmcache")).get("proxyPort")
        notify = lmcache_proxy_notify_port(deployment)
        if port is not None and as_int(port, -1) != notify:
            yield Issue(
                sender.at("kvTransfer", "lmcache", "proxyPort"),
                f"proxyPort is {port} but the LMCache proxy listens on {notify} "
                "(routerSpec.lmcacheProxy.notifyPort)",
                "leave it unset",
            )
    for sender, receiver in _legacy_pairs(deployment):
        sent, heard = sender.lmcache.get("nixlPeerPort"), receiver.lmcache.get("nixlPeerPort")
        if str(sent) != str(heard):
            yield Issue(
                sender.at("lmcacheConfig", "nixlPeerPort"),
                f"sender {sender.name!r} sends to port {sent} but receiver {receiver.name!r} "
                f"listens on {heard}",
                "use the same nixlPeerPort on both pools",
            )


def _agreement(prefill: Pool, decode: Pool) -> Iterator[tuple[str, object, object]]:
    """(key, prefill value, decode value) of what both sides of a pair must agree on."""
    yield "modelURL", prefill.spec.get("modelURL"), decode.spec.get("modelURL")
    if "maxModelLen" in prefill.vllm and "maxModelLen" in decode.vllm:
        yield "maxModelLen", prefill.vllm["maxModelLen"], decode.vllm["maxModelLen"]
    p_dtype, d_dtype = prefill.vllm.get("kvCacheDtype"), decode.vllm.get("kvCacheDtype")
    yield "kvCacheDtype", p_dtype or "auto", d_dtype or "auto"
    p_block, d_block = prefill.vllm.get("blockSize") or 16, decode.vllm.get("blockSize") or 16
    connector = prefill.connector
    smaller_ok = connector is not None and connector.smaller_prefill_blocks
    if not (smaller_ok and isinstance(p_block, int) and isinstance(d_block, int)):
        yield "blockSize", p_block, d_block
    elif p_block > d_block:
        yield "blockSize", p_block, d_block


@rule(
    "PD005",
    "prefill and decode serve the same model, context length and KV cache layout",
    explain=(
        "prefill and decode agree on modelURL, maxModelLen, kvCacheDtype, blockSize (NIXL: "
        "prefill block size may be smaller)"
    ),
)
def pools_agree(deployment: Deployment) -> Iterator[Issue]:
    for prefill, decode in deployment.pairs():
        for key, p_value, d_value in _agreement(prefill, decode):
            if str(p_value) == str(d_value):
                continue
            path = decode.at("modelURL") if key == "modelURL" else decode.at("vllmConfig", key)
            yield Issue(
                path,
                f"decode pool {decode.name!r} has {key} {d_value!r} but prefill pool "
                f"{prefill.name!r} has {p_value!r}",
                "the KV cache a prefill pool sends is only usable by a decode pool with the "
                "same " + key,
            )


@rule(
    "PD013",
    "prefill and decode use the same connector, with tensor parallelism it allows",
    explain=(
        "prefill and decode use the same connector (or both none); PyNccl and P2pNccl need "
        "equal TP (NIXL, Mooncake, LMCache allow hetero TP)"
    ),
)
def connectors_pair(deployment: Deployment) -> Iterator[Issue]:
    for prefill, decode in deployment.pairs():
        p_conn, d_conn = prefill.connector, decode.connector
        p_name = p_conn.name if p_conn else "no KV connector"
        d_name = d_conn.name if d_conn else "no KV connector"
        if p_name != d_name:
            yield Issue(
                decode.connector_path,
                f"prefill {prefill.name!r} uses {p_name} but decode {decode.name!r} uses {d_name}",
                "both sides of a PD pair use the same connector",
            )
        elif p_conn and not p_conn.hetero_tp and prefill.tp != decode.tp:
            yield Issue(
                decode.at("vllmConfig", "tensorParallelSize"),
                f"{p_conn.name} needs the same tensorParallelSize on prefill and decode "
                f"({prefill.name!r}: {prefill.tp}, {decode.name!r}: {decode.tp})",
                "use NixlConnector for heterogeneous TP",
            )


@rule(
    "PD014",
    "1P1D connectors (PyNccl, the tutorial's LMCache NIXL form): one pod per pool",
    explain=(
        "1P1D connectors (PyNccl, the tutorial's LMCache NIXL form): one replica per pool, "
        "one sender per receiver; with LMCache's proxy (`routerSpec.type: lmcache-proxy`) one"
        " replica per decode pool"
    ),
)
def one_to_one(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.by_role("decode") if deployment.lmcache_proxy else []:
        connector = pool.connector
        if connector and "lmcache-proxy" in connector.routers and pool.replicas > 1:
            yield Issue(
                pool.at("replicaCount"),
                f"decode pool {pool.name!r} has {pool.replicas} replicas, but LMCache's PD proxy "
                "reaches each decode pool through its Service, where a sender's KV must land on "
                "the pod the request decodes on",
                "use replicaCount: 1 per decode pool (add decode pools for more)",
            )
    for pool in deployment.pools:
        connector = pool.connector
        if not connector or connector.pairing != "1P1D" or pool.replicas <= 1:
            continue
        if all(pool.settings.get(flag) for flag in connector.pairing_when):
            yield Issue(
                pool.at("replicaCount"),
                f"pool {pool.name!r} has {pool.replicas} replicas, but {connector.name} "
                f"({connector.settings_key}) pairs exactly one prefill pod with one decode pod",
                "use replicaCount: 1, or a connector that supports xPyD (NixlConnector)",
            )
    senders: dict[str, str] = {}
    for sender, receiver in _legacy_pairs(deployment):
        if receiver.name in senders:
            yield Issue(
                sender.at("lmcacheConfig", "nixlPeerHost"),
                f"sender {sender.name!r} sends to receiver {receiver.name!r}, which "
                f"{senders[receiver.name]!r} sends to as well; the LMCache NIXL form is 1P1D",
            )
        senders.setdefault(receiver.name, sender.name)
