"""``taints.fixed_toleration``: a registered toleration entry parses to its registered object,
equal to a parse of its values; any other dict, equal or not, is read as before."""

from __future__ import annotations

import copy

from tests.api.test_pod_with_status import structure

from ksched.api.pod import Pod
from ksched.api.taints import _FIXED, Toleration, fixed_toleration
from ksched.apiserver.admission import _NOT_READY_TOLERATION, _UNREACHABLE_TOLERATION, _default_tolerations


def test_the_default_tolerations_are_registered_and_parse_as_their_values() -> None:
    for d in (_NOT_READY_TOLERATION, _UNREACHABLE_TOLERATION):
        assert _FIXED[id(d)][0] is d
        got = Toleration.from_dict(d)
        assert got is _FIXED[id(d)][1]
        fresh = copy.deepcopy(d)
        assert structure(got) == structure(Toleration(fresh["key"], fresh["operator"], "", fresh["effect"],
                                                      fresh["tolerationSeconds"]))
        assert structure(Toleration.from_dict(fresh)) == structure(got)


def test_a_pod_with_the_defaults_appended_parses_as_one_with_copies_of_them() -> None:
    spec = {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"key": "a", "operator": "Exists"}]}
    _default_tolerations(spec)
    assert spec["tolerations"][1] is _NOT_READY_TOLERATION
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}, "spec": spec}
    assert structure(Pod(raw)) == structure(Pod(copy.deepcopy(raw)))
    assert [t.key for t in Pod(raw).tolerations] == ["a", "node.kubernetes.io/not-ready",
                                                     "node.kubernetes.io/unreachable"]


def test_only_the_registered_dict_itself_is_taken_as_parsed() -> None:
    d = fixed_toleration({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"})
    try:
        other = dict(d, value="w")
        assert Toleration.from_dict(other).value == "w"
        assert Toleration.from_dict(d) is _FIXED[id(d)][1] and Toleration.from_dict(d).value == "v"
    finally:
        del _FIXED[id(d)]
