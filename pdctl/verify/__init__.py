"""pdctl verify: smoke-test a running deployment and prove that requests went prefill, then
decode, with KV moved by the connector (client: HTTP; metrics: Prometheus text; checks: the
verdicts; targets: URLs given, or a release's pods through port-forwards)."""
