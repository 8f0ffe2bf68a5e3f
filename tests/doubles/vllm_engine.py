"""The engine the verify, bench and router tests run against: pd-stack's engine SIMULATOR
(pdctl/simulator, not vLLM), under the names these tests have always used. Its steps take no
time unless a test injects delays (Behaviour), so the tests run fast.

One implementation for tests and users: this module only re-exports the product's."""

from __future__ import annotations

from pdctl.simulator.engine import PREFILL_REQUEST_PARAMS, Behaviour, SimulatedEngine
from pdctl.simulator.kv import KvStore

VllmEngineDouble = SimulatedEngine
KvRegistry = KvStore

__all__ = ["PREFILL_REQUEST_PARAMS", "Behaviour", "KvRegistry", "VllmEngineDouble"]
