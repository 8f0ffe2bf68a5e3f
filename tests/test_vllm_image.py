"""One definition of "a vLLM version tag" (helm/files/vllm-image.yaml): the chart's
pd-stack.vllmVersion, under each pinned helm, gives the version of every tag of one table, and
pdctl reads what the chart gives (its summary of each pool, pdctl/rules/summary.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from pdctl import vllm_image
from pdctl.helm import Helm
from tests.helpers import CHART, TUTORIAL_VALUES

OFFICIAL = "vllm/vllm-openai"
SHA = "0123456789abcdef0123456789abcdef01234567"
DIGEST = "sha256:" + "ab" * 32
# (repository, tag, vllmVersion, the version as "X.Y.Z" or "" when the image says none)
TABLE = [
    (OFFICIAL, "v0.26.0", None, "0.26.0"),
    (OFFICIAL, "0.26.0", None, "0.26.0"),
    (OFFICIAL, "v0.10.1.1", None, "0.10.1"),  # a post-release counts as its release
    (OFFICIAL, "0.9.0rc1", None, "0.9.0"),  # so does a pre-release
    (OFFICIAL, "v0.9.0rc1", None, "0.9.0"),
    (OFFICIAL, "0.26.0-cu129", None, "0.26.0"),  # and a build suffix
    (OFFICIAL, "v0.11.0-aarch64", None, "0.11.0"),
    (OFFICIAL, "v0.10.0@" + DIGEST, None, "0.10.0"),
    (OFFICIAL, "latest", None, ""),
    (OFFICIAL, "nightly", None, ""),
    (OFFICIAL, "nightly-" + SHA, None, ""),
    (OFFICIAL, SHA, None, ""),
    (OFFICIAL, DIGEST, None, ""),
    (OFFICIAL, "v0.10", None, ""),  # X.Y alone names no release
    (OFFICIAL, "release-v0.10.1", None, ""),  # the version must lead
    (OFFICIAL, "", None, ""),
    ("docker.io/vllm/vllm-openai", "v0.11.2", None, "0.11.2"),
    ("registry.example.com/mirror/vllm/vllm-openai", "v0.11.2", None, "0.11.2"),
    ("lmcache/vllm-openai", "v0.3.9", None, ""),  # an LMCache build, not a vLLM release
    ("vllm/vllm-openai-rocm", "v0.11.2", None, ""),
    ("example.com/my-vllm", "v0.11.2", None, ""),
    ("example.com/my-vllm", "latest", "0.10.2", "0.10.2"),  # stated: any image
    (OFFICIAL, "v0.11.0", "0.10.2", "0.10.2"),  # stated wins over the tag
    ("lmcache/vllm-openai", "latest", "v0.10.1.1", "0.10.1"),  # read as a tag is
]
PROBE = "templates/zz-vllm-version-probe.yaml"


def _probe_chart(tmp_path: Path) -> Path:
    """A copy of the chart with one more template: a ConfigMap of pd-stack.vllmVersion for each
    row of TABLE (a test's probe; the chart itself is unchanged)."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    rows = [
        "{{- $pools := list "
        + " ".join(
            f'(dict "repository" {json.dumps(r)} "tag" {json.dumps(t)} '
            f'"vllmVersion" {json.dumps(s or "")})'
            for r, t, s, _ in TABLE
        )
        + " }}",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata: {name: probe}",
        "data:",
        "{{- range $i, $spec := $pools }}",
        '  "{{ $i }}": {{ include "pd-stack.vllmVersion" (dict "spec" $spec "root" $) | quote }}',
        "{{- end }}",
    ]
    (chart / PROBE).write_text("\n".join(rows) + "\n")
    return chart


def test_the_chart_reads_the_table_alike(helm: Helm, tmp_path: Path) -> None:
    chart = _probe_chart(tmp_path)
    args = ["template", "pd", str(chart), "-f", str(TUTORIAL_VALUES), "--show-only", PROBE]
    result = helm.run(args)
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(result.stdout)["data"]
    found = [(row[:3], data[str(i)]) for i, row in enumerate(TABLE)]
    assert found == [(row[:3], row[3]) for row in TABLE]
    for version in filter(None, data.values()):  # pdctl reads the chart's X.Y.Z back
        assert ".".join(map(str, vllm_image.parse_version(version) or ())) == version


def test_the_table_covers_the_grammar() -> None:
    """Each clause of the file's grammar has a row: stated, official, other images, none."""
    official = [r for r in TABLE if vllm_image.grammar().official_repository.search(r[0])]
    others = [r for r in TABLE if not vllm_image.grammar().official_repository.search(r[0])]
    assert any(r[3] for r in official) and any(not r[3] for r in official)
    assert any(r[2] for r in others) and any(not r[2] for r in others)
