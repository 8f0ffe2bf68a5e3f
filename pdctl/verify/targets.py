"""What verify talks to: the router and each engine, from URLs given on the command line, or
found in a release's pods and reached through port-forwards (cluster mode).

Cluster mode is given two functions of the cluster layer by its caller (the CLI passes
`pdctl.release.release_pods` and `pdctl.cluster.port_forward`, which import the kubernetes
client): a pod lister, (release, namespace) -> {"router": [Pod, ...], "prefill": [...],
"decode": [...], "both": [...]}, and a port-forward, the context manager (namespace, pod, port)
-> "http://127.0.0.1:<local port>". An engine is reached on the engine port, or where vLLM has a
port of its own (naming.VLLM_PORT: behind the llm-d decode sidecar) on that one, so that its
/health is vLLM's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pdctl import defaults
from pdctl.errors import EnvironmentProblem, PdctlError, UsageError
from pdctl.naming import ROLES, VLLM_PORT, Release, selector_text
from pdctl.verify.report import Endpoint, Targets

if TYPE_CHECKING:
    from pdctl.cluster import Pod

PodLister = Callable[[str, str], Mapping[str, Sequence["Pod"]]]
PortForward = Callable[[str, str, int], AbstractContextManager[str]]


def _check_url(option: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{option} {url!r}: expected a URL such as http://127.0.0.1:8000")
    return url.rstrip("/")


def from_urls(
    url: str,
    prefill_urls: Sequence[str],
    decode_urls: Sequence[str],
    engine_urls: Sequence[str] = (),
) -> Targets:
    """Targets given directly: the router, the engines of each PD role (both or none), and
    engines of role both (`engine_urls`, an aggregated release's: no PD proof to run)."""
    if bool(prefill_urls) != bool(decode_urls):
        given, missing = ("--prefill-url", "--decode-url")[:: 1 if prefill_urls else -1]
        raise UsageError(
            f"{given} without {missing}: the PD proof reads both pools",
            hint="give both, or neither to skip the PD proof",
        )
    engines = [
        Endpoint(u, role, _check_url(f"--{option}-url", u))
        for role, option, urls in (
            ("prefill", "prefill", prefill_urls),
            ("decode", "decode", decode_urls),
            ("both", "engine", engine_urls),
        )
        for u in urls
    ]
    router = _check_url("--url", url)
    return Targets(Endpoint(router, "router", router), tuple(engines))


def _local_port(base_url: str) -> int | None:
    return urlsplit(base_url).port


@contextmanager
def from_cluster(
    release: str,
    namespace: str,
    list_pods: PodLister,
    port_forward: PortForward,
    router_port: int = defaults.PORT,
    engine_port: int = defaults.PORT,
) -> Iterator[Targets]:
    """Targets of a release: its first router pod and every engine pod, each behind a
    port-forward that lives as long as the context. A pod that cannot be forwarded to becomes
    an endpoint without a URL (its checks fail with the reason); no cluster access is an
    EnvironmentProblem (exit 3)."""
    names = Release(release, namespace)
    pods = list_pods(release, namespace)
    with ExitStack() as stack:

        def forward(pod: str, role: str, port: int) -> Endpoint:
            try:
                url = stack.enter_context(port_forward(namespace, pod, port))
            except EnvironmentProblem:
                raise
            except PdctlError as error:
                return Endpoint(pod, role, None, error=f"port-forward failed: {error.message}")
            local = _local_port(url)
            command = f"kubectl -n {namespace} port-forward pod/{pod} {local}:{port}"
            return Endpoint(pod, role, url.rstrip("/"), forward=command)

        routers = list(pods.get("router") or ())
        if routers:
            router = forward(routers[0].name, "router", router_port)
        else:
            selector = selector_text(names.router_selector)
            router = Endpoint(
                f"{release} router",
                "router",
                None,
                error=f"no router pod in namespace {namespace} ({selector}); is the release "
                "installed? (pdctl status)",
            )
        engines = [
            forward(pod.name, role, pod.ports.get(VLLM_PORT, engine_port))
            for role in ROLES
            for pod in pods.get(role) or ()
        ]
        yield Targets(router, tuple(engines))
