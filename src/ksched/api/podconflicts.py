"""Constraints between pods that a binding must not break given the bindings already accepted:
the conflict resolver's checks beyond one node's resources (``ksched.api.accounting``), for
several schedulers sharing a cluster (docs/multi-scheduler.md, "What the instances share").

Each scheduler instance filters against the bound pods it has seen; with watches lagging, two
instances can each place one of two pods that must not share a zone, or skew a spread. The
embedded API server (``Store(pod_conflicts=True)``, on under ``ksched serve --schedulers N``)
and the binding webhook check every ``pods/binding`` against what is already bound:

* **required pod anti-affinity**, both ways: a bound pod in the target node's topology domain
  that one of the incoming pod's terms selects, or a bound pod whose own term selects the
  incoming pod (upstream's InterPodAffinity Filter, ``filtering.go``);
* **topology spread** with ``whenUnsatisfiable: DoNotSchedule`` (the pod's own constraints):
  ``matching pods in the target domain + self-match - global minimum > maxSkew`` over the
  eligible nodes (those carrying every hard constraint's key and passing the inclusion
  policies), the minimum 0 while fewer domains than ``minDomains`` are eligible (upstream's
  PodTopologySpread Filter);
* **ReadWriteOncePod** claims: no other bound pod may use one (upstream's VolumeRestrictions
  PreFilter).

Counted pods are the bound ones that still hold their node (not Succeeded/Failed); pods being
deleted count for anti-affinity and ReadWriteOncePod, not for spreading, as upstream. The check
only refuses what a scheduler that has seen every accepted binding would refuse too, so the
refused instance, retrying at once on a view that has caught up, goes elsewhere.

Known divergences (never a refusal one scheduler would not make): the cluster's default spread
constraints (a profile's ``defaultConstraints``) are not checked; nominated pods are not counted
(upstream's Filter must also pass without them); required pod *affinity* needs no check (more
bound pods never break it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ksched.api.affinity import PodAffinityTerm
from ksched.api.node import Node
from ksched.api.pod import Pod, TopologySpreadConstraint
from ksched.api.storage import PersistentVolumeClaim
from ksched.api.taints import find_untolerated_taint

__all__ = ["BoundPods", "pod_conflict"]

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
DO_NOT_SCHEDULE = "DoNotSchedule"


def _holds_node(pod: Pod) -> bool:
    return bool(pod.node_name) and not pod.is_terminal


def _anti_terms(pod: Pod) -> tuple[PodAffinityTerm, ...]:
    return pod.affinity.pod_anti_affinity_required if pod.affinity is not None else ()


def _claims(pod: Pod) -> list[str]:
    return [v.claim_name for v in pod.volumes if v.claim_name]


class BoundPods:
    """The bound pods that hold their node, indexed for :func:`pod_conflict`: by namespace, those
    with a required anti-affinity term, and by the claims they use."""

    def __init__(self) -> None:
        self.by_namespace: dict[str, dict[str, Pod]] = {}
        self.with_anti_affinity: dict[str, Pod] = {}
        self.claim_users: dict[tuple[str, str], set[str]] = {}

    def add(self, pod: Pod) -> None:
        if not _holds_node(pod):
            return
        key = pod.key
        self.by_namespace.setdefault(pod.namespace, {})[key] = pod
        if _anti_terms(pod):
            self.with_anti_affinity[key] = pod
        for c in _claims(pod):
            self.claim_users.setdefault((pod.namespace, c), set()).add(key)

    def remove(self, pod: Pod) -> None:
        if not pod.node_name:
            return  # an unbound version never was here (its bound one may be: a binding admitted)
        key = pod.key
        ns = self.by_namespace.get(pod.namespace)
        if ns is None or ns.pop(key, None) is None:
            return
        if not ns:
            del self.by_namespace[pod.namespace]
        self.with_anti_affinity.pop(key, None)
        for c in _claims(pod):
            users = self.claim_users.get((pod.namespace, c))
            if users is not None:
                users.discard(key)
                if not users:
                    del self.claim_users[(pod.namespace, c)]

    def update(self, old: Pod | None, new: Pod | None) -> None:
        if old is not None:
            self.remove(old)
        if new is not None:
            self.add(new)


def _term_selects(term: PodAffinityTerm, pod: Pod, ns_labels: Callable[[str], Mapping[str, str] | None]) -> bool:
    if not term.matches_namespace(pod.namespace, ns_labels(pod.namespace) if term.namespace_selector is not None
                                  else None):
        return False
    return term.label_selector.matches(pod.labels)


def _anti_affinity(pod: Pod, node: Node, bound: BoundPods, node_of: Callable[[str], Node | None],
                   ns_labels: Callable[[str], Mapping[str, str] | None]) -> str | None:
    labels = node.labels
    # The incoming pod's terms against the bound pods of the target's domain.
    for term in _anti_terms(pod):
        value = labels.get(term.topology_key)
        if value is None:
            continue
        candidates: Iterable[Pod]
        if term.namespace_selector is None:
            candidates = (p for ns in sorted(term.namespaces) for p in bound.by_namespace.get(ns, {}).values())
        else:
            candidates = (p for d in bound.by_namespace.values() for p in d.values())
        for other in candidates:
            if other.key == pod.key or not _term_selects(term, other, ns_labels):
                continue
            other_node = node_of(other.node_name)
            if other_node is not None and other_node.labels.get(term.topology_key) == value:
                return (f"node {node.name} would break the required pod anti-affinity of {pod.key}: "
                        f"{other.key} runs on {other.node_name} in {term.topology_key}={value}")
    # Bound pods' terms against the incoming pod.
    for other in bound.with_anti_affinity.values():
        if other.key == pod.key:
            continue
        for term in _anti_terms(other):
            value = labels.get(term.topology_key)
            if value is None or not _term_selects(term, pod, ns_labels):
                continue
            other_node = node_of(other.node_name)
            if other_node is not None and other_node.labels.get(term.topology_key) == value:
                return (f"node {node.name} would break the required pod anti-affinity of {other.key} "
                        f"(on {other.node_name}) in {term.topology_key}={value}")
    return None


def _eligible(c: TopologySpreadConstraint, pod: Pod, node: Node, keys: Iterable[str]) -> bool:
    labels = node.labels
    if any(k not in labels for k in keys):
        return False
    if c.node_affinity_policy == "Honor" and not pod.matches_node_affinity(node.name, node.labels):
        return False
    return not (c.node_taints_policy == "Honor" and find_untolerated_taint(node.taints, pod.tolerations) is not None)


def _spread(pod: Pod, node: Node, bound: BoundPods, nodes: Iterable[Node]) -> str | None:
    hard = [c for c in pod.topology_spread_constraints if c.when_unsatisfiable == DO_NOT_SCHEDULE]
    if not hard:
        return None
    keys = sorted({c.topology_key for c in hard})
    if any(k not in node.labels for k in keys):
        return None  # no scheduler picks such a node (its Filter refuses it as unresolvable)
    all_nodes = list(nodes)
    peers = [p for p in bound.by_namespace.get(pod.namespace, {}).values()
             if p.deletion_timestamp is None and p.key != pod.key]
    for c in hard:
        key = c.topology_key
        domains: dict[str, int] = {}
        eligible_nodes: dict[str, str] = {}
        for n in all_nodes:
            if _eligible(c, pod, n, keys):
                domains.setdefault(n.labels[key], 0)
                eligible_nodes[n.name] = n.labels[key]
        for p in peers:
            d = eligible_nodes.get(p.node_name)
            if d is not None and c.label_selector.matches(p.labels):
                domains[d] += 1
        if not domains:
            continue
        global_min = 0 if len(domains) < c.min_domains else min(domains.values())
        target = node.labels[key]
        count = domains.get(target, 0) + (1 if c.label_selector.matches(pod.labels) else 0)
        if count - global_min > c.max_skew:
            return (f"node {node.name} would break a topology spread constraint of {pod.key} "
                    f"({key}, maxSkew {c.max_skew}): {key}={target} would hold {count} matching pods, "
                    f"the emptiest eligible domain {global_min}")
    return None


def _read_write_once_pod(pod: Pod, bound: BoundPods,
                         claim_of: Callable[[str, str], PersistentVolumeClaim | None]) -> str | None:
    for name in _claims(pod):
        users = bound.claim_users.get((pod.namespace, name))
        others = sorted(u for u in users or () if u != pod.key)
        if not others:
            continue
        pvc = claim_of(pod.namespace, name)
        if pvc is not None and READ_WRITE_ONCE_POD in pvc.access_modes:
            return (f"PersistentVolumeClaim {pod.namespace}/{name} has the ReadWriteOncePod access mode "
                    f"and is in use by {others[0]}")
    return None


def pod_conflict(pod: Pod, node: Node, bound: BoundPods, *, nodes: Iterable[Node],
                 node_of: Callable[[str], Node | None],
                 ns_labels: Callable[[str], Mapping[str, str] | None],
                 claim_of: Callable[[str, str], PersistentVolumeClaim | None]) -> str | None:
    """Why binding ``pod`` to ``node`` would break a constraint between pods given the ``bound``
    ones, or None. ``nodes``: every node; ``node_of``: a node by name; ``ns_labels``: a
    namespace's labels (None if unknown); ``claim_of``: a claim by namespace and name."""
    why = _read_write_once_pod(pod, bound, claim_of)
    if why is None and (bound.with_anti_affinity or _anti_terms(pod)):
        why = _anti_affinity(pod, node, bound, node_of, ns_labels)
    if why is None:
        why = _spread(pod, node, bound, nodes)
    return why
