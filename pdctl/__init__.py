"""pdctl: deploy disaggregated prefill/decode vLLM serving on Kubernetes."""

# The one version of pdctl and of the chart it bundles (helm/Chart.yaml `version` and `appVersion`
# must match; tests/test_versions.py). pyproject.toml reads it from here.
__version__ = "0.1.0"
