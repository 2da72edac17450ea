"""PodTopologySpread's constraints and selectors (upstream's
``pkg/scheduler/framework/plugins/podtopologyspread/common.go``, and ``helper.DefaultSelector`` of
``plugins/helper/spread.go``): the parsed constraint type, pod selectors, the node inclusion
policies (``matchNodeInclusionPolicies``), matching-pod counting (``countPodsMatchSelector``) and
the default constraints (``buildDefaultConstraints``).

Counted pods: same namespace as the incoming pod, not terminating, matched by the constraint's
selector (an empty selector counts nothing, as upstream's ``countPodsMatchSelector``).
``nodeAffinityPolicy`` (default Honor) and ``nodeTaintsPolicy`` (default Ignore) decide per
constraint which nodes' pods are counted. ``matchLabelKeys`` arrive already merged into the
selector by ``ksched.api`` (as the API server does), so the plugin does not merge them again.

Divergences from upstream, knowingly:

- **Tolerations** use ``ksched.api.taints`` matching (``Gt``/``Lt`` follow upstream's gate, off).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ksched.api.labels import (
    LabelMatcher,
    LabelSelector,
    NodeSelector,
    NodeSelectorTerm,
    Requirement,
    compile_matcher,
)
from ksched.api.node import Node
from ksched.api.pod import Pod, TopologySpreadConstraint
from ksched.api.taints import Toleration, find_untolerated_taint
from ksched.boundedcache import BoundedCache
from ksched.scheduler.framework.template import template_cache
from ksched.scheduler.framework.types import PodInfo

__all__ = [
    "DO_NOT_SCHEDULE",
    "HONOR",
    "IGNORE",
    "LABEL_HOSTNAME",
    "LABEL_TOPOLOGY_ZONE",
    "NAME",
    "SCHEDULE_ANYWAY",
    "LabelMatcher",
]

# The plugin's name lives here (not in plugin.py) so that filtering.py and scoring.py can name
# their cycle-state keys after it without importing the plugin module.
NAME = "PodTopologySpread"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"

# Controller kinds whose selector upstream's DefaultSelector uses: (apiVersion, kind).
_RC_KIND = ("v1", "ReplicationController")
_RS_KIND = ("apps/v1", "ReplicaSet")
_SS_KIND = ("apps/v1", "StatefulSet")
_CONTROLLER_KINDS = (_RC_KIND, _RS_KIND, _SS_KIND)
_LISTER_KINDS = ("Service", _RC_KIND[1], _RS_KIND[1], _SS_KIND[1])


# ---------------------------------------------------------------- selectors and constraints

class _Selector:
    """A constraint's pod selector. ``empty`` mirrors ``labels.Selector.Empty()`` (upstream counts
    nothing then)."""

    __slots__ = ("_hash", "_match_labels", "empty", "key", "labels")

    def __init__(self, labels: LabelSelector) -> None:
        self.labels = labels
        self.empty = labels.is_empty()
        self.key = labels.key
        self._hash = hash(self.key)
        self._match_labels = compile_matcher(labels)

    def matches(self, pod: Pod) -> bool:
        return self._match_labels(pod.labels)

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _Selector) and self._hash == other._hash and self.key == other.key)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"_Selector({self.labels!r})"




class _Constraint:
    """Upstream's internal topologySpreadConstraint (selector parsed, policies defaulted)."""

    __slots__ = ("honor_affinity", "honor_taints", "is_hostname", "max_skew", "min_domains", "selector",
                 "topology_key")

    def __init__(self, max_skew: int, topology_key: str, selector: _Selector, min_domains: int,
                 node_affinity_policy: str, node_taints_policy: str) -> None:
        self.max_skew = max_skew
        self.topology_key = topology_key
        self.selector = selector
        self.min_domains = min_domains
        self.honor_affinity = node_affinity_policy == HONOR
        self.honor_taints = node_taints_policy == HONOR
        self.is_hostname = topology_key == LABEL_HOSTNAME

    def __repr__(self) -> str:
        return (f"_Constraint(maxSkew={self.max_skew}, key={self.topology_key!r}, {self.selector!r}, "
                f"minDomains={self.min_domains}, affinity={'Honor' if self.honor_affinity else 'Ignore'}, "
                f"taints={'Honor' if self.honor_taints else 'Ignore'})")


_CONSTRAINTS: BoundedCache[tuple[object, ...], _Constraint] = BoundedCache()


def _from_api(c: TopologySpreadConstraint) -> _Constraint:
    """The parsed constraint, shared by every pod whose constraint is the same (replicas of one
    template): _Constraint and _Selector are immutable."""
    key = (c.max_skew, c.topology_key, c.label_selector.key, c.min_domains, c.node_affinity_policy,
           c.node_taints_policy)
    got = _CONSTRAINTS.get(key)
    if got is None:
        got = _CONSTRAINTS.put(key, _Constraint(c.max_skew, c.topology_key, _Selector(c.label_selector),
                                                c.min_domains, c.node_affinity_policy, c.node_taints_policy))
    return got


def _pod_constraints(pod: Pod, action: str) -> tuple[_Constraint, ...]:
    """The pod's own constraints with ``whenUnsatisfiable == action`` (computed once per
    template: they read the spec and, for matchLabelKeys, the labels)."""
    cache = template_cache(pod)
    key = "podtopologyspread." + action
    got = cache.get(key)
    if got is None:
        got = cache[key] = tuple(_from_api(c) for c in pod.topology_spread_constraints
                                 if c.when_unsatisfiable == action)
    return got  # type: ignore[no-any-return]


def _node_has_keys(labels: Mapping[str, str], constraints: Sequence[_Constraint]) -> bool:
    for c in constraints:
        if c.topology_key not in labels:
            return False
    return True


def _count_matching(pods: Sequence[PodInfo], selector: _Selector, namespace: str) -> int:
    """Upstream's countPodsMatchSelector."""
    if selector.empty:
        return 0
    n = 0
    for pi in pods:
        p = pi.pod
        if p.deletion_timestamp is not None or p.namespace != namespace:
            continue
        if selector.matches(p):
            n += 1
    return n


# ---------------------------------------------------------------- node inclusion policies


def _requirement_ok(r: Requirement) -> bool:
    """Whether a node selector requirement parses (upstream skips terms that do not)."""
    op = r.op
    if op in ("In", "NotIn"):
        return bool(r.values)
    if op in ("Exists", "DoesNotExist"):
        return not r.values
    if op in ("Gt", "Lt"):
        if len(r.values) != 1:
            return False
        try:
            int(r.values[0])
        except ValueError:
            return False
        return True
    return False


def _term_matches(term: NodeSelectorTerm, name: str, labels: Mapping[str, str]) -> bool:
    if not term.labels and not term.fields:
        return False
    for r in term.labels:
        if not _requirement_ok(r) or not r.matches(labels):
            return False
    for r in term.fields:
        if r.key != "metadata.name" or r.op not in ("In", "NotIn") or len(r.values) != 1:
            return False
        if (name == r.values[0]) != (r.op == "In"):
            return False
    return True


class _RequiredAffinity:
    """The pod's ``nodeSelector`` AND its required node affinity (upstream's
    ``nodeaffinity.GetRequiredNodeAffinity``; terms that do not parse never match)."""

    __slots__ = ("key", "node_selector", "terms")

    def __init__(self, pod: Pod) -> None:
        self.node_selector = tuple(sorted(pod.node_selector.items()))
        aff = pod.affinity
        req: NodeSelector | None = aff.node_affinity.required if aff is not None and aff.node_affinity else None
        self.terms = req.terms if req is not None else None
        self.key = (self.node_selector, req.key() if req is not None else None)

    def is_empty(self) -> bool:
        return not self.node_selector and self.terms is None

    def match(self, node: Node) -> bool:
        labels = node.labels
        for k, v in self.node_selector:
            if labels.get(k) != v:
                return False
        if self.terms is None:
            return True
        for t in self.terms:
            if _term_matches(t, node.name, labels):
                return True
        return False


def _required_affinity(pod: Pod) -> _RequiredAffinity:
    cache = template_cache(pod)
    r = cache.get("podtopologyspread.affinity")
    if r is None:
        r = cache["podtopologyspread.affinity"] = _RequiredAffinity(pod)
    return r  # type: ignore[no-any-return]


def _tolerations_key(tolerations: Sequence[Toleration]) -> tuple[Any, ...]:
    return tuple((*t.key_tuple(), t.toleration_seconds) for t in tolerations)


def _taints_tolerated(node: Node, tolerations: Sequence[Toleration]) -> bool:
    return find_untolerated_taint(node.taints, tolerations) is None


def _inclusion_ok(c: _Constraint, pod: Pod, node: Node, affinity: _RequiredAffinity) -> bool:
    """Upstream's matchNodeInclusionPolicies."""
    if c.honor_affinity and not affinity.match(node):
        return False
    return not (c.honor_taints and not _taints_tolerated(node, pod.tolerations))


# ---------------------------------------------------------------- default constraints


def _build_default_constraints(defaults: Sequence[dict[str, Any]], pod: Pod, action: str,
                               selector_of: Callable[[Pod], _Selector]) -> tuple[_Constraint, ...]:
    """Upstream's buildDefaultConstraints: the ``defaults`` with ``whenUnsatisfiable == action``,
    each with the pod's default selector (``selector_of(pod)``, asked only when some constraint
    is picked); none when that selector is empty."""
    picked = [c for c in defaults if (c.get("whenUnsatisfiable") or DO_NOT_SCHEDULE) == action]
    if not picked:
        return ()
    selector = selector_of(pod)
    if selector.empty:
        return ()
    out = []
    for c in picked:
        md = c.get("minDomains")
        out.append(_Constraint(int(c.get("maxSkew") or 0), str(c.get("topologyKey") or ""), selector,
                               int(md) if md is not None else 1, c.get("nodeAffinityPolicy") or HONOR,
                               c.get("nodeTaintsPolicy") or IGNORE))
    return tuple(out)


def _get(lister: Any, namespace: str, name: str) -> Any:
    obj = lister.get(f"{namespace}/{name}")
    if obj is None:
        for o in lister.list():
            if o.namespace == namespace and o.name == name:
                return o
    return obj


def _in_namespace(lister: Any, namespace: str) -> list[Any]:
    indexer = getattr(lister, "indexer", None)
    if indexer is not None:
        return indexer.by_index("namespace", namespace)  # type: ignore[no-any-return]
    return [o for o in lister.list() if o.namespace == namespace]


def _default_selector(pod: Pod, lister_of: Callable[[str], Any]) -> _Selector:
    """Upstream's helper.DefaultSelector: the selectors of the Services selecting the pod, and of
    its controller (ReplicationController, ReplicaSet, StatefulSet) merged; ``lister_of(kind)``
    is the informer of that kind, or None when there is none (then, as a failed Get, that part
    adds nothing)."""
    label_set: dict[str, str] = {}
    services = lister_of("Service")
    if services is not None:
        for svc in _in_namespace(services, pod.namespace):
            # A Service without a selector (or an empty one, which protobuf storage cannot tell
            # from none) selects nothing.
            sel = (svc.raw.get("spec") or {}).get("selector")
            if not sel:
                continue
            if all(pod.labels.get(k) == str(v) for k, v in sel.items()):
                label_set.update({k: str(v) for k, v in sel.items()})
    reqs: list[Requirement] = [Requirement(k, "In", (v,)) for k, v in label_set.items()]
    ref = pod.controller_ref()
    if ref is not None and (ref.api_version, ref.kind) in _CONTROLLER_KINDS:
        lister = lister_of(ref.kind)
        obj = _get(lister, pod.namespace, ref.name) if lister is not None else None
        if obj is not None:
            spec_sel = (obj.raw.get("spec") or {}).get("selector")
            if ref.kind == _RC_KIND[1]:
                merged = dict(label_set)
                merged.update({k: str(v) for k, v in (spec_sel or {}).items()})
                reqs = [Requirement(k, "In", (v,)) for k, v in merged.items()]
            else:
                try:
                    other = LabelSelector.from_dict(spec_sel)
                except ValueError:
                    other = LabelSelector.nothing()
                if not other.is_nothing():
                    reqs.extend(other.requirements)
    reqs.sort(key=lambda r: (r.key, r.op, r.values))
    return _Selector(LabelSelector(tuple(reqs)))
