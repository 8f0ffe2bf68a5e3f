"""Rules on the images' tags: pinned, and saying the vLLM version the version checks read."""

from __future__ import annotations

from collections.abc import Iterator

from pdctl.findings import Severity
from pdctl.rules.deployment import Deployment, Pool
from pdctl.rules.registry import Issue, rule

MOVING = "latest"


@rule(
    "PD114",
    "images are pinned, and the version checks can read vLLM's version",
    Severity.warning,
    explain=(
        "an engine pool or the router on tag `latest` without a `digest` (the tag moves: pods "
        "started later may run another build), or a `vllm/vllm-openai` pool whose tag is not "
        "`vX.Y.Z` and that states no `vllmVersion`: the version checks (PD012, PD020, PD113) "
        "read vLLM's version from that tag and, finding none, assume the image has every "
        "connector and flag pd-stack renders"
    ),
)
def pinned_images(deployment: Deployment) -> Iterator[Issue]:
    for pool in deployment.pools:
        issue = _pool_image(pool)
        if issue:
            yield issue
    router = deployment.router
    if deployment.router_enabled and router.get("tag") == MOVING and not router.get("digest"):
        yield Issue(
            ("routerSpec", "tag"),
            f"the router image {router.get('repository')}:{MOVING} is a tag that moves: a "
            "router pod started later may run another version",
            "pin a tag that names one build, or add routerSpec.digest (sha256:...)",
        )


def _pool_image(pool: Pool) -> Issue | None:
    tag = pool.spec.get("tag")
    image = f"{pool.spec.get('repository')}:{tag}"
    moving = tag == MOVING and not pool.spec.get("digest")
    version, version_path = pool.version
    unread = version is None and version_path == pool.at("tag")
    if unread:
        why = "a tag that moves, and " if moving else ""
        return Issue(
            pool.at("tag"),
            f"pool {pool.name!r} runs {image}, {why}the version checks read vLLM's version from "
            f"this tag, which states none: they assume the image has every connector and flag "
            "pd-stack renders",
            "pin a version: a vX.Y.Z tag, or state the image's vLLM version in vllmVersion "
            "(with a digest to pin the image)",
        )
    if moving:
        return Issue(
            pool.at("tag"),
            f"pool {pool.name!r} runs {image}, a tag that moves: pods started later may run "
            "another build than those running now"
            + (
                ", and vllmVersion may no longer say it"
                if version_path == pool.at("vllmVersion")
                else ""
            ),
            "pin a tag that names one build, or add a digest (sha256:...)",
        )
    return None
