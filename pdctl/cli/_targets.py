"""The router and engines that verify and bench talk to: the URLs given, a live local release
(`pdctl up`), or the release's pods through port-forwards (cluster mode); and the API key to
send them."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pdctl.cli import _output
from pdctl.errors import UsageError

if TYPE_CHECKING:
    from pdctl.verify.report import Targets


@dataclass(frozen=True)
class Found:
    targets: Targets
    api_key: str | None  # --api-key-file's, else the environment's, else (cluster) the Secret's


@contextlib.contextmanager
def resolve_targets(
    url: str | None,
    prefill_urls: list[str],
    decode_urls: list[str],
    release: str,
    namespace: str,
    router_port: int,
    engine_port: int,
    api_key_file: Path | None,
    engine_urls: list[str] | None = None,
    cluster: bool = False,
) -> Iterator[Found]:
    """--url and the engines' URLs when given; else the local release `release` when it is up
    (unless --cluster), said on stderr; else the cluster. The API key: pdctl.verify.apikey."""
    from pdctl.verify import apikey, targets  # lazy: start-up

    def key(cluster_release: str | None) -> str | None:
        return apikey.resolve(api_key_file, cluster_release, namespace)

    if url is not None:
        if cluster:
            raise UsageError("--cluster and --url: choose one")
        yield Found(targets.from_urls(url, prefill_urls, decode_urls, engine_urls or ()), key(None))
        return
    if prefill_urls or decode_urls or engine_urls:
        raise UsageError("--prefill-url, --decode-url and --engine-url need --url (the router)")
    if not cluster:
        from pdctl.local import lifecycle  # lazy: start-up

        local = lifecycle.endpoints(release)
        if local is not None:
            _output.info(local.describe())
            engines = local.engines
            found = targets.from_urls(
                local.router, engines["prefill"], engines["decode"], engines["both"]
            )
            router = dataclasses.replace(found.router, name=local.router_by)
            yield Found(dataclasses.replace(found, router=router), key(None))
            return
    from pdctl import cluster as clusters  # lazy: start-up
    from pdctl import release as releases  # lazy: start-up

    with targets.from_cluster(
        release,
        namespace,
        releases.release_pods,
        clusters.port_forward,
        router_port,
        engine_port,
    ) as in_cluster:
        yield Found(in_cluster, key(release))
