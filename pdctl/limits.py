"""The bounds of every number pdctl reads, each stated once: its options (`--help` shows them) and
the fields of the files it reads (bench results, model configs). A number past its bound is a
typo or an attack, never a deployment: refused with its flag or key path, before any work (a plan
on 10^9 GPUs would never answer). This module imports nothing: the CLI reads it at start-up.
"""

from __future__ import annotations

# ---- hardware
GPUS_MAX = 256  # GPUs one plan sizes: `plan --gpus 256` takes minutes; beyond, ever longer
GPUS_PER_NODE_MAX = 72  # GPUs of one node (an NVL72 NVLink domain)
NETWORK_GBPS_MAX = 10_000.0  # GB/s of one GPU's KV link (NVLink 5 is 1,800)

# ---- a workload
# Tokens of one request (prompt, output, --max-model-len): 10 Mi, Llama-4-Scout's context.
TOKENS_MAX = 10_485_760
CONCURRENCY_MAX = 65_536  # requests in flight
RATE_MAX = 1_000_000.0  # requests per second
REQUESTS_MAX = 10_000_000  # requests of one bench step
STEPS_MAX = 1_000  # load steps of one bench run
MS_MAX = 86_400_000.0  # a latency or a target, ms: a day
SECONDS_MAX = 86_400.0  # a timeout or a duration, s: a day
EVENTS_MAX = 10_000  # recent events status shows
SEED_MAX = 2**63 - 1
PORT_MAX = 65_535

# ---- a model (config.json): past these no model's, and 2**53 is where floats stop counting
LAYERS_MAX = 4_096
WIDTH_MAX = 2**20  # hidden, intermediate, head and latent sizes
HEADS_MAX = 2**16
VOCAB_MAX = 2**24
EXPERTS_MAX = 2**16
FIELD_MAX = 2**40  # any other number of a config.json (context length, ids)
PARAMS_MAX = 2**42  # parameters of the whole model: 4.4 trillion, 4 x the largest open model
