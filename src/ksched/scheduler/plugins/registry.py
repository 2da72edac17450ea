"""The plugin registry: in-tree plugins by upstream name, plugins published by other packages
under the ``ksched.plugins`` entry-point group, and ``module:Class`` names in a configuration."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from ksched.scheduler.framework.interface import Plugin

__all__ = ["IN_TREE", "Registry", "RegistryError"]

IN_TREE: dict[str, str] = {
    "PrioritySort": "ksched.scheduler.plugins.queuesort:PrioritySort",
    "SchedulingGates": "ksched.scheduler.plugins.schedulinggates:SchedulingGates",
    "NodeUnschedulable": "ksched.scheduler.plugins.nodeunschedulable:NodeUnschedulable",
    "NodeName": "ksched.scheduler.plugins.nodename:NodeName",
    "TaintToleration": "ksched.scheduler.plugins.tainttoleration:TaintToleration",
    "NodeAffinity": "ksched.scheduler.plugins.nodeaffinity:NodeAffinity",
    "NodePorts": "ksched.scheduler.plugins.nodeports:NodePorts",
    "NodeResourcesFit": "ksched.scheduler.plugins.noderesources.fit:Fit",
    "NodeResourcesBalancedAllocation": "ksched.scheduler.plugins.noderesources.balanced_allocation:BalancedAllocation",
    "VolumeRestrictions": "ksched.scheduler.plugins.volumerestrictions:VolumeRestrictions",
    "NodeVolumeLimits": "ksched.scheduler.plugins.nodevolumelimits:NodeVolumeLimits",
    "VolumeBinding": "ksched.scheduler.plugins.volumebinding.volume_binding:VolumeBinding",
    "VolumeZone": "ksched.scheduler.plugins.volumezone:VolumeZone",
    "PodTopologySpread": "ksched.scheduler.plugins.podtopologyspread.plugin:PodTopologySpread",
    "InterPodAffinity": "ksched.scheduler.plugins.interpodaffinity:InterPodAffinity",
    "DynamicResources": "ksched.scheduler.plugins.dynamicresources.plugin:DynamicResources",
    "DefaultPreemption": "ksched.scheduler.plugins.defaultpreemption:DefaultPreemption",
    "ImageLocality": "ksched.scheduler.plugins.imagelocality:ImageLocality",
    "DefaultBinder": "ksched.scheduler.plugins.defaultbinder:DefaultBinder",
    # GPU sharing (the FGD paper's policies; not in upstream's default profile)
    "GpuShare": "ksched.scheduler.plugins.gpushare.plugin:GpuShare",
    "FGD": "ksched.scheduler.plugins.gpushare.scoring:FGD",
    "BestFit": "ksched.scheduler.plugins.gpushare.scoring:BestFit",
    "DotProd": "ksched.scheduler.plugins.gpushare.scoring:DotProd",
    "GpuPacking": "ksched.scheduler.plugins.gpushare.scoring:GpuPacking",
    "GpuClustering": "ksched.scheduler.plugins.gpushare.scoring:GpuClustering",
    "Random": "ksched.scheduler.plugins.gpushare.scoring:Random",
    "FGDPack": "ksched.scheduler.plugins.gpushare.scoring:FGDPack",
}

ENTRY_POINT_GROUP = "ksched.plugins"


class RegistryError(LookupError):
    pass


def _import(ref: str) -> type[Plugin]:
    mod, _, attr = ref.partition(":")
    try:
        cls = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as e:
        raise RegistryError(f'cannot load plugin "{ref}": {e}') from e
    if not (isinstance(cls, type) and issubclass(cls, Plugin)):
        raise RegistryError(f'"{ref}" is not a ksched plugin class')
    return cls


class Registry:
    """Plugin name -> class. Out-of-tree plugins: ``add``, entry points, or ``module:Class``."""

    def __init__(self, extra: dict[str, type[Plugin]] | None = None, load_entry_points: bool = True) -> None:
        self._refs: dict[str, str] = dict(IN_TREE)
        self._classes: dict[str, type[Plugin]] = dict(extra or {})
        if load_entry_points:
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                self._refs.setdefault(ep.name, ep.value)

    def add(self, cls: type[Plugin], name: str | None = None) -> None:
        self._classes[name or cls.name] = cls

    def get(self, name: str) -> type[Plugin]:
        cls = self._classes.get(name)
        if cls is not None:
            return cls
        ref = self._refs.get(name)
        if ref is None and ":" in name:
            ref = name
        if ref is None:
            raise RegistryError(f'plugin "{name}" does not exist')
        cls = _import(ref)
        self._classes[name] = cls
        return cls

    def names(self) -> list[str]:
        return sorted(set(self._refs) | set(self._classes))
