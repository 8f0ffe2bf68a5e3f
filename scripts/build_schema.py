"""Write helm/values.schema.json from schemas/values.schema.yaml (the one source).

Usage: python scripts/build_schema.py [--check]   (--check: exit 1 if the JSON is stale)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "schemas" / "values.schema.yaml"
TARGET = ROOT / "helm" / "values.schema.json"


def render() -> str:
    schema = yaml.safe_load(SOURCE.read_text(encoding="utf-8"))
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET} is stale: run `make schema`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
