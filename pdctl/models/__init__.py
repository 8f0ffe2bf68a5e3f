"""What pdctl knows about LLMs and GPUs, below every other layer: the model and GPU catalogs, a
model's architecture from its config.json, and the memory arithmetic (weights, KV cache, vLLM's
memory profile, download time). The planner, the rules and the emitter build on it; it imports
none of them."""
