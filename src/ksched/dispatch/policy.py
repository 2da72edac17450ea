"""Which scheduler instances may take a pod: rules matching pod labels and namespaces to
instance labels (for example, GPU pods go to the GPU-labelled instances).

As YAML (``ksched dispatch --policy FILE``)::

    apiVersion: ksched.io/v1alpha1
    kind: DispatchPolicy
    rules:                      # the first rule whose pods match decides
    - name: gpu
      pods:
        labelSelector: {matchExpressions: [{key: accelerator, operator: Exists}]}
        namespaces: [ml, research]      # optional: any namespace when absent
      instances:
        labelSelector: {matchLabels: {gpu: "true"}}
    default:                    # pods no rule matches (absent: every instance)
      instances:
        labelSelector: {matchLabels: {gpu: "false"}}

A pod whose ``nodeSelector`` names an instance's partition label only goes to an instance of
that partition (value equal), whatever the rules say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ksched.api.labels import LabelSelector, SelectorError
from ksched.api.pod import Pod
from ksched.dispatch.instance import InstanceInfo

__all__ = ["DispatchPolicy", "PolicyError", "PolicyRule"]

_EVERYTHING = LabelSelector()


class PolicyError(ValueError):
    pass


@dataclass(slots=True)
class PolicyRule:
    instances: LabelSelector
    pods: LabelSelector = field(default_factory=LabelSelector)
    namespaces: frozenset[str] | None = None
    name: str = ""

    def matches_pod(self, pod: Pod) -> bool:
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.pods.matches(pod.labels)


def _selector(d: Any, where: str) -> LabelSelector:
    if d is None:
        return _EVERYTHING
    if not isinstance(d, Mapping):
        raise PolicyError(f"{where}: a label selector must be an object")
    unknown = set(d) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise PolicyError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    try:
        return LabelSelector.from_dict(d)
    except SelectorError as e:
        raise PolicyError(f"{where}: {e}") from e


@dataclass(slots=True)
class DispatchPolicy:
    rules: list[PolicyRule] = field(default_factory=list)
    default: LabelSelector = field(default_factory=LabelSelector)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> DispatchPolicy:
        if not d:
            return cls()
        if not isinstance(d, Mapping):
            raise PolicyError("a DispatchPolicy must be an object")
        kind = d.get("kind", "DispatchPolicy")
        if kind != "DispatchPolicy":
            raise PolicyError(f"kind {kind!r}: expected DispatchPolicy")
        rules: list[PolicyRule] = []
        for i, r in enumerate(d.get("rules") or ()):
            where = f"rules[{i}]"
            if not isinstance(r, Mapping):
                raise PolicyError(f"{where}: must be an object")
            pods = r.get("pods") or {}
            inst = r.get("instances")
            if not isinstance(pods, Mapping) or not isinstance(inst, Mapping):
                raise PolicyError(f"{where}: 'pods' and 'instances' must be objects ('instances' is required)")
            ns = pods.get("namespaces")
            if ns is not None and (not isinstance(ns, list) or not all(isinstance(x, str) for x in ns)):
                raise PolicyError(f"{where}.pods.namespaces: must be a list of names")
            rules.append(PolicyRule(_selector(inst.get("labelSelector"), f"{where}.instances.labelSelector"),
                                    _selector(pods.get("labelSelector"), f"{where}.pods.labelSelector"),
                                    frozenset(ns) if ns is not None else None, str(r.get("name") or "")))
        dflt = d.get("default") or {}
        if not isinstance(dflt, Mapping):
            raise PolicyError("default: must be an object")
        inst = dflt.get("instances") or {}
        return cls(rules, _selector(inst.get("labelSelector") if isinstance(inst, Mapping) else None,
                                    "default.instances.labelSelector"))

    @classmethod
    def load(cls, path: str | Path) -> DispatchPolicy:
        try:
            d = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as e:
            raise PolicyError(f"{path}: {e}") from e
        try:
            return cls.from_dict(d)
        except PolicyError as e:
            raise PolicyError(f"{path}: {e}") from e

    def selector_for(self, pod: Pod) -> tuple[LabelSelector, str]:
        """The instance selector that applies to ``pod`` and the rule's name ("" for the default)."""
        for r in self.rules:
            if r.matches_pod(pod):
                return r.instances, r.name
        return self.default, ""

    def eligible(self, pod: Pod, instances: Iterable[InstanceInfo]) -> list[InstanceInfo]:
        sel, _ = self.selector_for(pod)
        out = []
        for inst in instances:
            if not sel.matches(inst.labels):
                continue
            if inst.partition_label and inst.partition_label in pod.node_selector and \
                    pod.node_selector[inst.partition_label] != inst.partition:
                continue
            out.append(inst)
        return out
