"""The GPU-sharing policies by name (the paper's six, and ours), for the replay engine, the
comparison and the framework plugins."""

from __future__ import annotations

from ksched.scheduler.plugins.gpushare.bestfit import BestFit
from ksched.scheduler.plugins.gpushare.clustering import GpuClustering
from ksched.scheduler.plugins.gpushare.dotprod import DotProd
from ksched.scheduler.plugins.gpushare.fgd import FGD
from ksched.scheduler.plugins.gpushare.fgdpack import FGDPack
from ksched.scheduler.plugins.gpushare.frag import TypicalPods
from ksched.scheduler.plugins.gpushare.packing import GpuPacking
from ksched.scheduler.plugins.gpushare.policy import GpuPolicy
from ksched.scheduler.plugins.gpushare.randomfit import Random

__all__ = ["PAPER_POLICIES", "POLICIES", "make_policy"]

# The paper's order (its artifact numbers them 01-Random .. 06-FGD).
PAPER_POLICIES = ("Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD")
POLICIES = (*PAPER_POLICIES, "FGDPack")


def make_policy(name: str, typical: TypicalPods) -> GpuPolicy:
    """A policy by (case-insensitive) name; ``typical`` is used by those that measure
    fragmentation."""
    key = name.lower()
    simple: dict[str, type[GpuPolicy]] = {"random": Random, "dotprod": DotProd, "gpuclustering": GpuClustering,
                                          "gpupacking": GpuPacking, "bestfit": BestFit}
    if key in simple:
        return simple[key]()
    if key == "fgd":
        return FGD(typical)
    if key == "fgdpack":
        return FGDPack(typical)
    raise ValueError(f'unknown GPU policy "{name}" (one of {", ".join(POLICIES)})')
