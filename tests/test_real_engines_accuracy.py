"""The planner's accuracy run (benchmarks/real_engines/accuracy.py) and the catalog entries made
from its kept records (accuracy_catalog.py): what the catalog holds is what the records say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks.real_engines import accuracy, accuracy_catalog
from pdctl.plan import measurements

ROOT = Path(__file__).resolve().parent.parent
RECORDS = sorted((ROOT / "benchmarks/records").glob("real-engines-h200-accuracy-*.json"))
CATALOG = yaml.safe_load(measurements.MEASUREMENTS_FILE.read_text())["measurements"]


def test_the_decode_step_is_the_window_over_the_steps_each_request_took() -> None:
    # 64 requests, 16,000 gaps inside a 1.5 s window: 250 steps each, 6 ms a step
    assert accuracy.mean_step_ms(1.5, 64, 16_000) == 6.0
    assert accuracy.mean_step_ms(1.5, 64, 0) is None


@pytest.mark.parametrize("record", RECORDS, ids=lambda p: p.name)
def test_every_figure_of_a_kept_record_is_in_the_catalog_as_generated(record: Path) -> None:
    data = json.loads(record.read_text())
    generated = accuracy_catalog.entries(data, str(record.relative_to(ROOT)))
    assert len(generated) >= 10
    for key, entry in generated.items():
        kept = dict(CATALOG[key])
        kept.pop("miss", None)  # written by hand after the fit
        assert kept == entry, key


def test_fit_and_held_out_models_are_fixed_in_the_script_and_the_records() -> None:
    for record in RECORDS:
        data = json.loads(record.read_text())
        wave = {m.name: m.use for m in accuracy.WAVES[data["wave"]]}
        assert {name: m["use"] for name, m in data["models"].items()} == wave
        assert set(wave.values()) == {"fit", "check"}
