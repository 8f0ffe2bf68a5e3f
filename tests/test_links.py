"""The link table (helm/files/links.yaml) that verify judges KV bandwidth by, and the
connector table's bandwidth metrics it reads."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from pdctl import connectors
from pdctl.models import catalog, links
from tests.helpers import ROOT


def test_every_link_has_its_source_and_the_floor_is_below_every_rdma_link() -> None:
    table = links.load()
    assert all(link.source and link.gbps > 0 for link in table.links)
    speeds = [link.gbps for link in table.links]
    assert speeds == sorted(speeds, reverse=True)
    assert 0 < table.minimum_gbps < min(link.gbps for link in table.links if link.rdma)
    assert not table.links[-1].rdma  # TCP, the slowest


def test_the_gpu_catalog_names_its_networks_from_the_link_table() -> None:
    """The planner's KV transfer estimate reads the link table through the GPU catalog."""
    table = links.load()
    for gpu in catalog.gpus().values():
        assert gpu.network_gbps == table.by_id(gpu.network).gbps, gpu.name
    assert catalog.gpu("H200").network == "ib-ndr" and catalog.gpu("H200").network_gbps == 50
    with pytest.raises(ValueError, match="no link 'warp-drive'"):
        table.by_id("warp-drive")


def test_a_measured_speed_is_named_by_the_slowest_link_that_carries_it() -> None:
    table = links.load()
    assert table.matching(0.43).name.startswith("TCP")  # the first real-engine run
    assert table.matching(20.0).gbps == 25  # an HDR / 200 GbE link's speed
    assert table.matching(300.0).name.startswith("NVLink")
    assert table.matching(5000.0) == table.links[0]  # faster than any: the fastest


def test_bandwidth_metrics_are_bytes_then_seconds_among_the_transfer_metrics() -> None:
    for entry in connectors.load().connectors.values():
        bandwidth = entry.metrics.get("bandwidth", ())
        assert len(bandwidth) in (0, 2), entry.name
        assert set(bandwidth) <= set(entry.metrics.get("transfer", ())), entry.name
    size, seconds = connectors.load().connectors["NixlConnector"].metrics["bandwidth"]
    assert size.endswith("bytes_transferred") and seconds.endswith("_seconds")


def test_the_link_table_matches_its_schema() -> None:
    schema = yaml.safe_load((ROOT / "schemas" / "links.schema.yaml").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    data = yaml.safe_load(links.LINKS_FILE.read_text())
    assert not list(jsonschema.Draft7Validator(schema).iter_errors(data))
    data["links"][0]["gbps"] = "fast"
    assert list(jsonschema.Draft7Validator(schema).iter_errors(data))  # the schema can refuse
