"""The router and engines that verify and bench talk to: the URLs given, or the release's pods
through port-forwards (cluster mode)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pdctl.errors import UsageError

if TYPE_CHECKING:
    from pdctl.verify.report import Targets


@contextlib.contextmanager
def resolve_targets(
    url: str | None,
    prefill_urls: list[str],
    decode_urls: list[str],
    release: str,
    namespace: str,
    router_port: int,
    engine_port: int,
    engine_urls: list[str] | None = None,
) -> Iterator[Targets]:
    from pdctl.verify import targets  # lazy: start-up

    if url is None:
        if prefill_urls or decode_urls or engine_urls:
            raise UsageError("--prefill-url, --decode-url and --engine-url need --url (the router)")
        from pdctl import cluster  # lazy: start-up
        from pdctl import release as releases  # lazy: start-up

        with targets.from_cluster(
            release,
            namespace,
            releases.release_pods,
            cluster.port_forward,
            router_port,
            engine_port,
        ) as found:
            yield found
    else:
        yield targets.from_urls(url, prefill_urls, decode_urls, engine_urls or ())
