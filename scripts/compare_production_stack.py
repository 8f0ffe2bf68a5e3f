"""Same values, same effect? Render production-stack's own values files through its chart and
through pd-stack's, and compare what each engine and router runs.

For every `tutorials/assets/values-*.yaml` of a production-stack checkout that `pdctl validate`
accepts, both charts are rendered with the real helm (release `pd`), and each Deployment that both
render (the engines' `<release>-<pool>-deployment-vllm`, the router's `<release>-deployment-router`)
is compared: image, replicas, the arguments (command and args as one flag list; flag names with
`_` read as `-`, as vLLM's parser does; `--kv-transfer-config` compared key by key), environment
and resources. Every difference must be listed, with its reason, under `effect` in
helm/files/production-stack.yaml (docs/production-stack.md shows them); the script prints the
differences and exits 1 when one is not listed or a listed one no longer occurs.

production-stack's chart depends on kube-prometheus-stack and prometheus-adapter (both off by
default); the script renders a copy without those dependencies.

    python scripts/compare_production_stack.py --production-stack ../production-stack
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pdctl import defaults, pipeline  # noqa: E402
from pdctl.helm import find_helm  # noqa: E402

TABLE = ROOT / "helm" / "files" / "production-stack.yaml"


@dataclass(frozen=True)
class Difference:
    file: str
    deployment: str
    component: str  # engine | router
    aspect: str  # image | replicas | arg | env | resources
    name: str  # the flag, env name or resource; "" for image and replicas
    theirs: Any
    ours: Any

    def key(self) -> tuple[str, str, str]:
        return self.component, self.aspect, self.name


def flags(argv: list[str]) -> dict[str, Any]:
    """A command line as {flag: value}: positionals under "<positional>", a flag without a value
    as True, --kv-transfer-config's JSON as one entry per key."""
    found: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        word = str(argv[i])
        if not word.startswith("--"):
            positional.append(word)
            i += 1
            continue
        name, _, inline = word.partition("=")
        name = "--" + name[2:].replace("_", "-")
        if inline:
            value: Any = inline
        elif i + 1 < len(argv) and not str(argv[i + 1]).startswith("--"):
            value, i = str(argv[i + 1]), i + 1
        else:
            value = True
        if name == "--kv-transfer-config":
            for key, item in _flatten(json.loads(value)).items():
                found[f"{name}.{key}"] = item
        else:
            found[name] = value
        i += 1
    found["<positional>"] = " ".join(positional)
    return found


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(node, dict):
        return {prefix: node}
    flat: dict[str, Any] = {}
    for key, value in node.items():
        flat |= _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    return flat


def effect(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What a Deployment's first container runs, by aspect."""
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {
        "image": {"": container.get("image")},
        "replicas": {"": deployment["spec"].get("replicas", 1)},
        "arg": flags([*container.get("command", []), *container.get("args", [])]),
        "env": {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])},
        "resources": _flatten(container.get("resources") or {}),
    }


def deployments(text: str) -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc
        for doc in yaml.safe_load_all(text)
        if doc and doc.get("kind") == "Deployment"
    }


def compare(file: str, theirs: str, ours: str) -> Iterator[Difference]:
    their_objects, our_objects = deployments(theirs), deployments(ours)
    for name in sorted(set(their_objects) & set(our_objects)):
        component = "router" if name.endswith("-deployment-router") else "engine"
        a, b = effect(their_objects[name]), effect(our_objects[name])
        for aspect in a:
            for key in sorted(set(a[aspect]) | set(b[aspect])):
                if a[aspect].get(key) != b[aspect].get(key):
                    yield Difference(
                        file, name, component, aspect, key, a[aspect].get(key), b[aspect].get(key)
                    )


def listed() -> set[tuple[str, str, str]]:
    """The differences helm/files/production-stack.yaml lists (`effect`), as Difference keys."""
    table = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    return {(e["component"], e["aspect"], e["name"]) for e in table["effect"]}


def production_stack_chart(checkout: Path, into: Path) -> Path:
    """A copy of production-stack's chart without its (optional, off by default) dependencies."""
    chart = into / "vllm-stack"
    shutil.copytree(checkout / "helm", chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8"))
    meta.pop("dependencies", None)
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta), encoding="utf-8")
    (chart / "Chart.lock").unlink(missing_ok=True)
    return chart


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--production-stack", type=Path, required=True, help="a checkout")
    parser.add_argument("--helm", help="the helm binary (default: PDCTL_HELM, .tools, PATH)")
    args = parser.parse_args()
    helm = find_helm(args.helm)
    known = listed()
    found: list[Difference] = []
    with tempfile.TemporaryDirectory() as tmp:
        chart = production_stack_chart(args.production_stack, Path(tmp))
        files = sorted((args.production_stack / "tutorials" / "assets").glob("values-*.yaml"))
        for path in files:
            report = pipeline.validate(
                [str(path)], pipeline.ValidateOptions(release=defaults.RELEASE)
            )
            if not report.passed():
                print(f"{path.name}: refused by pdctl validate ({report.errors[0].message})")
                continue
            theirs = subprocess.run(
                [str(helm.path), "template", defaults.RELEASE, str(chart), "-f", str(path)],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            values = pipeline.load_values([str(path)])
            ours = pipeline.render(values, release=defaults.RELEASE, helm_path=str(helm.path)).text
            differences = list(compare(path.name, theirs, ours))
            found += differences
            print(f"{path.name}: accepted, {len(differences)} difference(s)")
    unlisted = [d for d in found if d.key() not in known]
    stale = sorted(known - {d.key() for d in found})
    for d in found:
        mark = "UNLISTED " if d.key() not in known else ""
        print(f"  {mark}{d.file} {d.deployment} {d.aspect} {d.name}: {d.theirs!r} -> {d.ours!r}")
    for key in stale:
        print(f"  STALE listed difference that no longer occurs: {' '.join(key)}")
    print(f"{len(found)} difference(s), {len(unlisted)} not listed, {len(stale)} listed but gone")
    return 1 if unlisted or stale else 0


if __name__ == "__main__":
    sys.exit(main())
