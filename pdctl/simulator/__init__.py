"""pd-stack's engine simulator (not vLLM): one process per engine that speaks vLLM's OpenAI
endpoints, NixlConnector's PD protocol (the KV handoff over the side channel), vLLM's metric
names and faults, with a continuous-batching scheduler whose steps the planner times
(docs/simulator.md). `python -m pdctl.simulator serve MODEL ...` runs one."""
