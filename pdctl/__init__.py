"""pdctl: deploy disaggregated prefill/decode vLLM serving on Kubernetes."""

__version__ = "0.1.0"
