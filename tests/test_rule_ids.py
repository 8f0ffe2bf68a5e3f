"""Each PD error rule exists once, in the chart: every `[PDnnn]` a chart template refuses with is
a registry entry (its `rule` comment beside the check) with no Python check; pdctl's own rules
are warnings, except those that say why they are validate-only. Every refusal line has one
grammar, `[PDnnn] key.path: message`, in the templates and in what helm prints."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pdctl.findings import Severity
from pdctl.helm import Helm
from pdctl.rules import load_rules
from pdctl.validation.refusals import REFUSAL, parse, parse_path
from pdctl.values.paths import format_path
from tests.helpers import CHART, ROOT, helm_template_result

sys.path.insert(0, str(ROOT / "scripts"))
from reference_pages import chart_rule_ids  # noqa: E402

# Error rules pdctl checks itself, with the reason (the rule's docstring says it too).
VALIDATE_ONLY = {
    "PD007": "Kubernetes refuses an over-long name at install with its own message; helm template "
    "has no length limit",
}
TEMPLATES = sorted((CHART / "templates").glob("_checks*.tpl"))
# The format string of each refusal: what the checks add to the root's pdStackRefusals.
REFUSAL_FORMAT = re.compile(r'pdStackRefusals (?:\(printf )?"((?:[^"\\]|\\.)*)"')
# A key path as the templates write one: names, [index], and printf verbs standing for either.
KEY_PATH = re.compile(r"(?:%s|[A-Za-z][A-Za-z0-9]*)(?:\.(?:%s|[A-Za-z][A-Za-z0-9]*)|\[%d\])*")


def test_every_id_the_chart_refuses_with_is_a_registered_error_rule_without_a_python_check() -> (
    None
):
    rules = load_rules()
    unknown = sorted(i for i in chart_rule_ids() if i not in rules)
    assert not unknown, f"the chart refuses with ids no rule comment explains: {unknown}"
    for rule_id in chart_rule_ids():
        assert rules[rule_id].severity is Severity.error, rule_id
        assert rules[rule_id].check is None, f"{rule_id} is checked in Python too"
        assert rules[rule_id].source.startswith("helm/templates/_checks"), rule_id


def test_pdctl_checks_only_warnings_and_the_validate_only_errors() -> None:
    for rule_id, rule in load_rules().items():
        if rule.check is None:
            continue
        assert rule.severity is Severity.warning or rule_id in VALIDATE_ONLY, rule_id
        assert rule.source.startswith("pdctl/rules/"), rule_id
    for rule_id in VALIDATE_ONLY:
        assert "Validate only" in (load_rules()[rule_id].check.__doc__ or ""), rule_id
        assert rule_id not in chart_rule_ids()


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_every_refusal_format_has_the_grammar(template: Path) -> None:
    """Static: each refusal's format is `[PDnnn] key.path: message` (no `fail` of its own)."""
    text = template.read_text()
    assert "{{- fail" not in text.replace('{{- fail (printf "the values were refused', "")
    formats = REFUSAL_FORMAT.findall(text)
    assert len(formats) == text.count("pdStackRefusals (") + text.count('pdStackRefusals "')
    for fmt in formats:
        match = re.fullmatch(r"\[PD\d{3}\] (\S+): \S.*", fmt)
        assert match, f"{template.name}: {fmt[:80]!r} is not `[PDnnn] key.path: message`"
        assert KEY_PATH.fullmatch(match.group(1)), f"{template.name}: {match.group(1)!r}"


def test_every_top_level_template_runs_the_checks_first() -> None:
    """So no other template's error pre-empts the refusals, whichever order helm renders in."""
    tops = [p for p in (CHART / "templates").rglob("*") if p.is_file() and p.suffix != ".tpl"]
    assert tops
    for template in tops:
        first = template.read_text().splitlines()[0]
        assert first == '{{- include "pd-stack.checks" . -}}', template.name


def test_refusal_lines_read_back_into_findings() -> None:
    text = (
        "Error: execution error at (pd-stack/templates/x.yaml:1:4): the values were refused:\n"
        '[PD006] servingEngineSpec.modelSpec[1].name: "a" is used twice: rename it\n'
        "[PD016] servingEngineSpec.modelSpec: has no enabled engine pool\n"
    )
    found = parse(text)
    assert [(f.rule, f.path) for f in found] == [
        ("PD006", ("servingEngineSpec", "modelSpec", 1, "name")),
        ("PD016", ("servingEngineSpec", "modelSpec")),
    ]
    assert found[0].message == '"a" is used twice: rename it'
    assert parse_path(format_path(("a", 0, "b", 12))) == ("a", 0, "b", 12)


def test_the_chart_lists_independent_refusals_together(helm: Helm, tmp_path: Path) -> None:
    """Two defects in two places: one helm run names both (it fails once, with all of them)."""
    values = (ROOT / "tests" / "corpus" / "bad" / "pd006-duplicate-pool.yaml").read_text()
    path = tmp_path / "values.yaml"
    path.write_text(values + "routerSpec:\n  extraArgs: [--port=1]\n")
    result = helm_template_result(helm, path)
    assert result.returncode != 0
    ids = {m[0] for m in REFUSAL.findall(result.stderr)}
    assert {"PD006", "PD026"} <= ids, result.stderr
