"""pd-stack's router stand-in (a test double of a router, named as one wherever it shows): what
`pdctl up` runs in the router's place when the release's router is not vllm-router, which is
not installable from a package index (production-stack's router is a Python package of its own
repository; LMCache's PD proxy an example script). It does what the router it stands in for does
with each request (pdctl.standin.routes), and nothing else (no discovery, no stats, no /metrics).
How every command names it: pdctl.local.routers.plays.
"""
