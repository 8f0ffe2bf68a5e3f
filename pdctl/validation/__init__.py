"""Checks of values (the chart's schema, the PD rules) and of rendered objects (Kubernetes
schemas); pdctl.pipeline runs them in order."""
