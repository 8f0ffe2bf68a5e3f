"""The test tiers, in one place: which tier each test module is in (conftest.py marks its tests
from here; `make test-fast` runs the unit tier, `make test` every tier).

- unit: the library and the CLI in this process: no helm, no child process, no server.
- chart: runs the pinned helm (or another pinned tool: promtool, `helm package`) on the chart.
- integration: servers and child processes: the Kubernetes API double, the engine and router
  doubles, the real vllm-router, the OCI registry, pdctl itself as a subprocess.
- records: reads the kept records (benchmarks/records/): GPU runs, validate before and after.

A module's tier is its entry in MODULES, else the tier of the one PATTERNS entry its name
matches. A module in none, or matched by patterns of two tiers, is an error (tests/test_tiers.py
checks every module), as is a unit module whose tests use a helm or Kubernetes fixture, or a
chart module whose tests use the Kubernetes one (FIXTURE_TIERS: conftest.py fails those tests).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

TIERS = ("unit", "chart", "integration", "records")

MODULES: dict[str, str] = {
    "test_action": "chart",
    "test_agreement_property": "chart",
    "test_alerts": "chart",
    "test_bench": "integration",
    "test_bounds": "unit",
    "test_bench_plots": "integration",
    "test_benchmark_script": "integration",
    "test_canary": "integration",
    "test_changelog": "unit",
    "test_cli": "chart",
    "test_closed_loop_record": "records",
    "test_connector_table": "chart",
    "test_corpus": "chart",
    "test_dashboard": "integration",
    "test_defaults": "unit",
    "test_deploy_units": "chart",
    "test_docs_links": "unit",
    "test_engine_flags": "chart",
    "test_helm_lookup": "chart",
    "test_hostile_names": "chart",
    "test_init_aggregated": "chart",
    "test_init_cli": "unit",
    "test_init_grid": "chart",
    "test_init_regenerate": "records",
    "test_layers": "unit",
    "test_links": "unit",
    "test_llmd_router": "chart",
    "test_lmcache_metrics_record": "unit",
    "test_carry_wheels": "unit",
    "test_lmcache_pair": "chart",
    "test_lmcache_proxy": "chart",
    "test_local_consent": "chart",
    "test_local_layout": "chart",
    "test_local_down": "integration",
    "test_local_routers": "unit",
    "test_local_up": "integration",
    "test_local_up_brought": "integration",
    "test_local_up_grid": "integration",
    "test_multinode": "chart",
    "test_naming": "chart",
    "test_oci": "integration",
    "test_one_error_per_cause": "unit",
    "test_output_links": "unit",
    "test_package": "chart",
    "test_person_commands": "integration",
    "test_person_messages": "unit",
    "test_person_output": "integration",
    "test_person_plan": "records",
    "test_person_unscraped": "unit",
    "test_plan_calibrate": "records",
    "test_plan_cli": "integration",
    "test_plan_measurements": "records",
    "test_plan_file_bounds": "unit",
    "test_preflight": "integration",
    "test_preflight_probe": "integration",
    "test_production_readiness": "integration",
    "test_production_stack": "chart",
    "test_real_engines_accuracy": "records",
    "test_real_engines_harness": "records",
    "test_real_engines_recovery": "integration",
    "test_real_engines_steady": "records",
    "test_redteam_set": "integration",
    "test_router_compat": "integration",
    "test_router_tracing": "integration",
    "test_rule_ids": "chart",
    "test_rules": "unit",
    "test_schema": "chart",
    "test_schema_kubernetes": "chart",
    "test_simulator": "integration",
    "test_simulator_bounds": "integration",
    "test_simulator_lmcache": "integration",
    "test_standin": "integration",
    "test_status": "integration",
    "test_template_pipeline": "chart",
    "test_tiers": "unit",
    "test_topology": "unit",
    "test_tutorial_commands": "chart",
    "test_uninstall": "integration",
    "test_validate_cli": "chart",
    "test_validate_record": "records",
    "test_validate_property": "chart",
    "test_values_docs": "unit",
    "test_values_loader": "chart",
    "test_versions": "unit",
    "test_vllm_image": "chart",
    "test_vllm_router": "integration",
    "test_vllm_support": "chart",
    "test_wheel": "chart",
}

# A new module whose name follows one of these gets its tier without an entry above.
PATTERNS: dict[str, tuple[str, ...]] = {
    "unit": ("test_plan_*",),
    "chart": ("test_chart_*",),
    "integration": ("test_deploy_*", "test_verify_*", "test_hostile_*"),
    "records": (),
}

# Fixtures (conftest.py) whose use puts a test beyond a tier: helm runs the chart, kube serves the
# Kubernetes API double.
HELM_FIXTURES = ("helm", "helm3", "helm4", "rendered")
FIXTURE_TIERS: dict[str, tuple[str, ...]] = {
    "unit": (*HELM_FIXTURES, "kube"),
    "chart": ("kube",),
    "integration": (),
    "records": (),
}


class TierError(Exception):
    """A module in no tier, or in two."""


def tier(module: str) -> str:
    """The tier of a test module, by its name without `.py`."""
    if module in MODULES:
        return MODULES[module]
    matched = sorted(
        name
        for name, patterns in PATTERNS.items()
        if any(fnmatchcase(module, pattern) for pattern in patterns)
    )
    if len(matched) == 1:
        return matched[0]
    where = "in no tier" if not matched else f"in {len(matched)} tiers ({', '.join(matched)})"
    raise TierError(f"tests/{module}.py is {where}: give it one in MODULES in tests/tiers.py")


def misplaced(module_tier: str, fixtures: list[str]) -> str | None:
    """Why a test of a module in `module_tier` that uses `fixtures` is not in that tier, if so."""
    beyond = [name for name in fixtures if name in FIXTURE_TIERS[module_tier]]
    if not beyond:
        return None
    return (
        f"this test uses the fixture {beyond[0]!r}, beyond the {module_tier} tier: move its "
        "module to another tier in tests/tiers.py"
    )
