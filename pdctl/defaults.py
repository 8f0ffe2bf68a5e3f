"""The defaults that pdctl's commands and its library share, each stated here once.

A command's option (pdctl/cli) and the library function or dataclass behind it both take their
default from here, so `--help` and a library call agree; tests/test_defaults.py fails when a
module in pdctl writes one of these as a literal again. This module imports nothing: the CLI
reads it at start-up.
"""

from __future__ import annotations

# ---- a release: every command that renders, installs or reaches one
RELEASE = "pd"
NAMESPACE = "default"
# Kubernetes version of the schemas `pdctl validate --render` checks against (kubernetes-validate).
KUBE_VERSION = "1.35"
# The container port of the engines and of the router: helm/values.yaml's
# servingEngineSpec.containerPort and routerSpec.containerPort (tests/test_defaults.py holds them
# equal).
PORT = 8000

# ---- plan and init: the hardware and the workload sized for
GPU_TYPE = "H100-80GB"
GPUS_PER_NODE = 8
# vLLM --gpu-memory-utilization: vLLM's own default (`vllm serve --help`).
GPU_MEMORY_UTILIZATION = 0.9
PLAN_INPUT_LEN = 4096
PLAN_OUTPUT_LEN = 512
PLAN_CONCURRENCY = 64
CONNECTOR = "NixlConnector"
# The latency targets in force unless --ttft / --itl change or remove them: MLPerf Inference's
# server scenario for Llama-2-70B, TTFT 2 s and TPOT 200 ms
# (https://mlcommons.org/2024/03/mlperf-llama2-70b/). MLPerf bounds the 99th percentile; the
# planner estimates means, so a mean at these bounds is a loose, defensible floor for chat.
TTFT_MS = 2000.0
ITL_MS = 200.0
# The Secret init's values file reads the Hugging Face token from.
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_KEY = "token"

# ---- bench: one load step
BENCH_CONCURRENCY = 1  # requests in flight, one step
BENCH_INPUT_LEN = 512  # words per prompt
BENCH_OUTPUT_LEN = 128  # tokens per request
# Output lengths drawn within this share of BENCH_OUTPUT_LEN: a closed loop's clients fall out of
# step, as the planner's estimate assumes (docs/sizing.md "TTFT under load"); 0 sends equal ones.
BENCH_OUTPUT_SPREAD = 0.2
BENCH_REQUESTS = 32  # per step, unless a duration is given
BENCH_MAX_IN_FLIGHT = 512  # open loop: arrivals wait while this many are in flight
BENCH_TIMEOUT_S = 600.0  # one request, from sending to its last byte
SLO_ATTAINMENT = 0.9  # share of a step's requests that must meet the SLOs

# ---- waiting on a cluster: preflight's probes, uninstall's objects going (--timeout 5m)
WAIT_S = 300

# ---- verify
VERIFY_REQUESTS = 1  # streaming requests timed
VERIFY_MAX_TOKENS = 32  # output tokens of the completion and streaming checks
VERIFY_PROMPT_WORDS = 600  # words of the PD proof's unique prompt
VERIFY_TIMEOUT_S = 60.0  # one request, from sending to its last byte
VERIFY_SETTLE_S = 3.0  # wait for the engines' counters to show the PD probe

# pdctl up: seconds for every local process to be ready (a first vLLM start compiles and captures
# CUDA graphs for minutes).
UP_TIMEOUT_S = 900.0
