"""Validation of values files: YAML loading, the chart's schema, PD rules, optional render."""
