"""The informers' intake shortcuts for objects with nothing to match (branch intake8).

``Indexer.by_index`` answers a value no object has with a new empty list; the DaemonSet
controller's namespace lookup returns at once when the namespace has no object; the garbage
collector's graph takes a pod without owner references without a generator; the
ResourceClaim controller's ``_claim_names`` returns at once for a pod with a status naming no
claim and no ``spec.resourceClaims``. Tested here: ``by_index`` and ``_claim_names``, each
against the general code written out (the DaemonSet and garbage-collector shortcuts are not)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.pod import Pod
from ksched.api.resource import pod_claim_refs
from ksched.client.informer import Indexer
from ksched.controllers.resourceclaim import ResourceClaimController


def _reference_claim_names(pod: Pod) -> list[str]:
    status = pod.raw.get("status")
    names = [r.resource_claim_name for r in pod_claim_refs(pod) if r.resource_claim_name]
    for s in (status or {}).get("resourceClaimStatuses") or ():
        if (s or {}).get("resourceClaimName"):
            names.append(s["resourceClaimName"])
    ext = ((status or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if ext:
        names.append(ext)
    return names


_names = st.sampled_from(["", "a", "b-claim"])
_spec_claims = st.one_of(st.none(), st.just([]), st.lists(st.fixed_dictionaries(
    {"name": st.sampled_from(["x", "y"])},
    optional={"resourceClaimName": _names, "resourceClaimTemplateName": _names}), max_size=2))
_status = st.one_of(st.none(), st.just({}), st.fixed_dictionaries(
    {"phase": st.just("Pending")},
    optional={"qosClass": st.just("Burstable"),
              "resourceClaimStatuses": st.one_of(st.none(), st.lists(st.one_of(st.none(), st.fixed_dictionaries(
                  {"name": st.just("x")}, optional={"resourceClaimName": _names})), max_size=2)),
              "extendedResourceClaimStatus": st.one_of(st.none(), st.fixed_dictionaries(
                  {}, optional={"resourceClaimName": _names}))}))


@settings(max_examples=300, deadline=None)
@given(_spec_claims, _status)
def test_claim_names_shortcut_agrees(claims: Any, status: Any) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if claims is not None:
        spec["resourceClaims"] = claims
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}
    if status is not None:
        raw["status"] = status
    pod = Pod(raw)
    assert ResourceClaimController._claim_names(pod) == _reference_claim_names(pod)


def test_claim_names_with_claims_in_status_only() -> None:
    pod = Pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
               "spec": {"containers": [{"name": "c", "image": "i"}]},
               "status": {"phase": "Pending", "resourceClaimStatuses": [{"name": "x", "resourceClaimName": "c1"}],
                          "extendedResourceClaimStatus": {"resourceClaimName": "c2"}}})
    assert ResourceClaimController._claim_names(pod) == ["c1", "c2"]


def _pod(name: str, ns: str) -> Pod:
    return Pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                "spec": {"containers": [{"name": "c", "image": "i"}]}})


def test_by_index_missing_value_is_a_new_empty_list() -> None:
    ix = Indexer()
    ix.upsert(_pod("a", "one"))
    first = ix.by_index("namespace", "two")
    assert first == []
    first.append("x")  # the caller's own list: the next answer is unaffected
    assert ix.by_index("namespace", "two") == []
    assert [p.key for p in ix.by_index("namespace", "one")] == ["one/a"]
    ix.remove("one/a")
    assert ix.by_index("namespace", "one") == []
