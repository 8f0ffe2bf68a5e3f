"""pd-stack's router stand-in (a test double of a router, named as one wherever it shows): what
`pdctl up` runs in the router's place when the release's router is not vllm-router, which is
not installable from a package index (production-stack's router is a Python package of its own
repository; LMCache's PD proxy an example script). It does what the router it stands in for does
with each request (pdctl.standin.routes), and nothing else (no discovery, no stats, no /metrics).
"""

NAME = "pd-stack router stand-in"
MODULE = "pdctl.standin"
# What it plays, by the routing it was given (pdctl.standin.routes.ROUTINGS).
_PLAYS = {
    "roundrobin": "production-stack's router (roundrobin)",
    "session": "production-stack's router (session)",
    "disaggregated_prefill": "production-stack's router (disaggregated_prefill)",
    "lmcache-proxy": "LMCache's PD proxy",
}


def plays(routing: str) -> str:
    """How every command names the stand-in: "pd-stack router stand-in playing ..."."""
    return f"{NAME} playing {_PLAYS[routing]}"
