"""Cross-field PD rules over a values mapping (library level: plain dicts in, findings out)."""

from pdctl.rules.registry import RULES, Rule, load_rules, run_rules

__all__ = ["RULES", "Rule", "load_rules", "run_rules"]
