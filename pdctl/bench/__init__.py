"""pdctl bench: a deployment measured under load through its router (workload: the requests
and prompts; load: the closed-loop generator; summary: percentiles, throughput and goodput;
engines: what each role's /metrics counted per step; run: one sweep; report: the --report
folder's files; runs: saved runs read back; plots: charts of runs against load; compare: saved
runs side by side)."""
