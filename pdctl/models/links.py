"""The link table (pdctl/models/catalog/links.yaml): the bandwidth a KV transfer can expect over
each kind of link, and which kind a measured speed matches."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pdctl.chart import read_yaml
from pdctl.models.catalog import CATALOG_DIR


@dataclass(frozen=True)
class Link:
    name: str
    gbps: float  # GB/s per GPU, one direction
    rdma: bool
    source: str


@dataclass(frozen=True)
class Links:
    links: tuple[Link, ...]  # fastest first
    minimum_fraction: float

    @property
    def minimum_gbps(self) -> float:
        """Below this a transfer is slow for any RDMA link: the slowest one x minimumFraction."""
        return min(link.gbps for link in self.links if link.rdma) * self.minimum_fraction

    def matching(self, gbps: float) -> Link:
        """The fastest link a measured speed fits within (the slowest link when below all)."""
        fitting = [link for link in self.links if gbps <= link.gbps]
        return fitting[-1] if fitting else self.links[0]


@functools.cache
def load() -> Links:
    data = read_yaml(CATALOG_DIR / "links.yaml")
    links = sorted(
        (Link(e["name"], float(e["gbps"]), bool(e["rdma"]), " ".join(e["source"].split()))
         for e in data["links"]),
        key=lambda link: -link.gbps,
    )  # fmt: skip
    return Links(tuple(links), float(data["minimumFraction"]))
