"""The link table (helm/files/links.yaml): the bandwidth a KV transfer can expect over each kind
of link, and which kind a measured speed matches. The one place that the planner (through the GPU
catalog's `network`), verify and the chart's canary (its default floor) read link speeds from."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pdctl.chart import bundled_chart_dir, read_yaml

LINKS_FILE = bundled_chart_dir() / "files" / "links.yaml"


@dataclass(frozen=True)
class Link:
    id: str
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

    def by_id(self, link_id: str) -> Link:
        for link in self.links:
            if link.id == link_id:
                return link
        raise ValueError(f"{LINKS_FILE.name}: no link {link_id!r}")

    def matching(self, gbps: float) -> Link:
        """The fastest link a measured speed fits within (the slowest link when below all)."""
        fitting = [link for link in self.links if gbps <= link.gbps]
        return fitting[-1] if fitting else self.links[0]


@functools.cache
def load() -> Links:
    data = read_yaml(LINKS_FILE)
    links = sorted(
        (Link(e["id"], e["name"], float(e["gbps"]), bool(e["rdma"]), " ".join(e["source"].split()))
         for e in data["links"]),
        key=lambda link: -link.gbps,
    )  # fmt: skip
    return Links(tuple(links), float(data["minimumFraction"]))
