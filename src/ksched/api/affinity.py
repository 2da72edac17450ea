"""Node affinity and pod (anti-)affinity as the scheduler reads them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ksched.api.labels import LabelSelector, NodeSelector, NodeSelectorTerm, Requirement

__all__ = [
    "Affinity",
    "NodeAffinity",
    "PodAffinityTerm",
    "PreferredSchedulingTerm",
    "WeightedPodAffinityTerm",
]


class PreferredSchedulingTerm:
    __slots__ = ("term", "weight")

    def __init__(self, weight: int, term: NodeSelectorTerm) -> None:
        self.weight = weight
        self.term = term


class NodeAffinity:
    __slots__ = ("preferred", "required")

    def __init__(self, required: NodeSelector | None, preferred: tuple[PreferredSchedulingTerm, ...]) -> None:
        self.required = required
        self.preferred = preferred

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeAffinity:
        req = d.get("requiredDuringSchedulingIgnoredDuringExecution")
        pref = tuple(
            PreferredSchedulingTerm(int(p.get("weight", 0)), NodeSelectorTerm.from_dict(p.get("preference") or {}))
            for p in d.get("preferredDuringSchedulingIgnoredDuringExecution") or ())
        return cls(NodeSelector.from_dict(req) if req is not None else None, pref)


class PodAffinityTerm:
    """A pod (anti-)affinity term. ``matchLabelKeys``/``mismatchLabelKeys`` are merged into the
    selector with the owning pod's label values, as the API server does at pod creation."""

    __slots__ = ("label_selector", "namespace_selector", "namespaces", "topology_key")

    def __init__(self, label_selector: LabelSelector, namespaces: frozenset[str],
                 namespace_selector: LabelSelector | None, topology_key: str) -> None:
        self.label_selector = label_selector
        self.namespaces = namespaces
        self.namespace_selector = namespace_selector
        self.topology_key = topology_key

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], pod_namespace: str, pod_labels: Mapping[str, str]) -> PodAffinityTerm:
        sel = LabelSelector.from_dict(d.get("labelSelector"))
        extra: list[Requirement] = []
        for k in d.get("matchLabelKeys") or ():
            if k in pod_labels:
                extra.append(Requirement(k, "In", (pod_labels[k],)))
        for k in d.get("mismatchLabelKeys") or ():
            if k in pod_labels:
                extra.append(Requirement(k, "NotIn", (pod_labels[k],)))
        if extra and not sel.is_nothing():
            sel = LabelSelector(sel.requirements + tuple(extra))
        ns_sel_raw = d.get("namespaceSelector")
        ns_sel = LabelSelector.from_dict(ns_sel_raw) if ns_sel_raw is not None else None
        namespaces = frozenset(d.get("namespaces") or ())
        # Upstream: no namespaces and a nil namespaceSelector means the pod's own namespace.
        if not namespaces and ns_sel is None:
            namespaces = frozenset((pod_namespace,))
        return cls(sel, namespaces, ns_sel, d.get("topologyKey") or "")

    def matches_namespace(self, namespace: str, ns_labels: Mapping[str, str] | None) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is not None and ns_labels is not None:
            return self.namespace_selector.matches(ns_labels)
        return False

    def key(self) -> tuple[Any, ...]:
        return (self.label_selector.key, self.namespaces,
                self.namespace_selector.key if self.namespace_selector is not None else None,
                self.topology_key)


class WeightedPodAffinityTerm:
    __slots__ = ("term", "weight")

    def __init__(self, weight: int, term: PodAffinityTerm) -> None:
        self.weight = weight
        self.term = term


def _terms(d: Mapping[str, Any] | None, ns: str, labels: Mapping[str, str]) -> tuple[
        tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    if not d:
        return (), ()
    req = tuple(PodAffinityTerm.from_dict(t, ns, labels)
                for t in d.get("requiredDuringSchedulingIgnoredDuringExecution") or ())
    pref = tuple(WeightedPodAffinityTerm(int(w.get("weight", 0)),
                                         PodAffinityTerm.from_dict(w.get("podAffinityTerm") or {}, ns, labels))
                 for w in d.get("preferredDuringSchedulingIgnoredDuringExecution") or ())
    return req, pref


class Affinity:
    __slots__ = (
        "node_affinity",
        "pod_affinity_preferred",
        "pod_affinity_required",
        "pod_anti_affinity_preferred",
        "pod_anti_affinity_required",
    )

    def __init__(self, d: Mapping[str, Any], pod_namespace: str, pod_labels: Mapping[str, str]) -> None:
        na = d.get("nodeAffinity")
        self.node_affinity = NodeAffinity.from_dict(na) if na else None
        self.pod_affinity_required, self.pod_affinity_preferred = _terms(
            d.get("podAffinity"), pod_namespace, pod_labels)
        self.pod_anti_affinity_required, self.pod_anti_affinity_preferred = _terms(
            d.get("podAntiAffinity"), pod_namespace, pod_labels)
