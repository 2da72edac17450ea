"""Pod signatures (upstream's SignPod and each plugin's SignPlugin): which pods share one, which
do not, which cannot be signed, and the profile-level rules (every PreFilter/Filter/PreScore/
Score plugin must sign; a refusal or a conflict leaves the pod unsigned)."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.scheduler.config import parse_configuration
from ksched.scheduler.framework.cycle_state import CycleState
from ksched.scheduler.framework.interface import FilterPlugin, SignFragment, SignPlugin
from ksched.scheduler.framework.runtime import Framework, FrameworkError
from ksched.scheduler.framework.signers import (
    HOST_PORTS_SIGNER_NAME,
    LABELS_SIGNER_NAME,
    NODE_NAME_SIGNER_NAME,
    RESOURCES_SIGNER_NAME,
    SCHEDULER_NAME_SIGNER_NAME,
    TOLERATIONS_SIGNER_NAME,
    VOLUMES_SIGNER_NAME,
)
from ksched.scheduler.framework.status import Code, Status
from ksched.scheduler.framework.types import NodeInfo
from ksched.scheduler.plugins.registry import Registry
from ksched.testing import make_pod

NO_SYSTEM_DEFAULTS = {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": []}}


def _informers(namespaces: dict[str, dict[str, str]] | None = None) -> InformerFactory:
    store = Store()
    for name, labels in (namespaces or {}).items():
        if name == "default":  # the store has it
            store.patch("Namespace", "", name, {"metadata": {"labels": labels}})
        else:
            store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
    f = InformerFactory(InProcessClient(store))
    f.informer("Namespace")
    f.poll()
    return f


def fw(raw_profile: dict[str, Any] | None = None, registry: Registry | None = None, informers: Any = None) -> Framework:
    """The default profile without system default spreading (unless ``raw_profile`` says)."""
    prof = raw_profile if raw_profile is not None else {"pluginConfig": [NO_SYSTEM_DEFAULTS]}
    cfg = parse_configuration({"profiles": [prof]})
    return Framework(cfg.profiles[0], registry or Registry(load_entry_points=False),
                     informers=informers if informers is not None else _informers())


BASE: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "128Mi"}, "labels": {"app": "web"}}


def pod(name: str = "p", **kw: Any) -> Pod:
    args = {**BASE, **kw}
    return make_pod(name, **args)


# ------------------------------------------------------------------------ equal signatures


def test_replicas_share_a_signature() -> None:
    f = fw()
    a, b = f.sign_pod(pod("a")), f.sign_pod(pod("b"))
    assert a is not None and a == b
    keys = dict(a)
    assert keys[SCHEDULER_NAME_SIGNER_NAME] == "default-scheduler"
    assert {RESOURCES_SIGNER_NAME, TOLERATIONS_SIGNER_NAME, NODE_NAME_SIGNER_NAME, HOST_PORTS_SIGNER_NAME,
            VOLUMES_SIGNER_NAME, LABELS_SIGNER_NAME} <= set(keys)


SAME = [
    ("a ConfigMap or Secret volume", {"volumes": [{"name": "cfg", "configMap": {"name": "a"}},
                                                 {"name": "s", "secret": {"secretName": "x"}}]}),
    ("tolerations in another order", {"tolerations": [{"key": "b", "operator": "Exists"},
                                                      {"key": "a", "operator": "Exists"}]}),
    ("node affinity terms and values in another order", {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "z", "operator": "In", "values": ["2", "1"]}]},
            {"matchExpressions": [{"key": "y", "operator": "Exists"}]}]}}}}),
    ("another annotation", {"annotations": {"x": "y"}}),
]

SAME_AS = {
    "a ConfigMap or Secret volume": {},
    "tolerations in another order": {"tolerations": [{"key": "a", "operator": "Exists"},
                                                     {"key": "b", "operator": "Exists"}]},
    "node affinity terms and values in another order": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "y", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "z", "operator": "In", "values": ["1", "2"]}]}]}}}},
    "another annotation": {},
}


@pytest.mark.parametrize(("what", "kw"), SAME, ids=[s[0] for s in SAME])
def test_what_scheduling_does_not_read_leaves_the_signature_alone(what: str, kw: dict[str, Any]) -> None:
    f = fw()
    got = f.sign_pod(pod("a", **kw))
    assert got is not None and got == f.sign_pod(pod("b", **SAME_AS[what]))


DIFFERENT = [
    ("requests", {"requests": {"cpu": "200m", "memory": "128Mi"}}),
    ("a container without a cpu request (non-zero default) vs an explicit zero",
     {"requests": {"memory": "128Mi"}}),
    ("tolerations", {"tolerations": [{"key": "a", "operator": "Exists"}]}),
    ("nodeSelector", {"node_selector": {"disk": "ssd"}}),
    ("preferred node affinity weight", {"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 2, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}}}),
    ("required node affinity with no terms (no node matches)", {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}),
    ("host ports", {"host_ports": [80]}),
    ("a host port's protocol (ksched's fragment)", {"host_ports": [("", "UDP", 80)]}),
    ("spec.nodeName", {"node_name": "n1"}),
    ("labels (existing pods' affinity terms match them)", {"labels": {"app": "db"}}),
    ("namespace (ksched's fragment)", {"namespace": "other"}),
    ("images", {"images": ["app:2"]}),
    ("a hostPath volume", {"volumes": [{"name": "h", "hostPath": {"path": "/data"}}]}),
    ("scheduler name", {"scheduler_name": "other"}),
]

DIFFERENT_BASE = {
    "a container without a cpu request (non-zero default) vs an explicit zero": {
        "requests": {"cpu": "0", "memory": "128Mi"}},
    "preferred node affinity weight": {"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}}},
    "required node affinity with no terms (no node matches)": {},
    "a host port's protocol (ksched's fragment)": {"host_ports": [80]},
}


@pytest.mark.parametrize(("what", "kw"), DIFFERENT, ids=[d[0] for d in DIFFERENT])
def test_what_scheduling_reads_changes_the_signature(what: str, kw: dict[str, Any]) -> None:
    f = fw(informers=_informers({"default": {}, "other": {}}))
    base = f.sign_pod(pod("a", **DIFFERENT_BASE.get(what, {})))
    other = f.sign_pod(pod("b", **kw))
    assert base is not None and other is not None
    assert base != other


def test_the_namespace_labels_are_part_of_the_signature() -> None:
    """Existing pods' affinity terms may select namespaces by label: ksched's InterPodAffinity
    fragment holds the pod's namespace labels, so a label change ends a batch."""
    inf = _informers({"default": {"team": "a"}})
    f = fw(informers=inf)
    before = f.sign_pod(pod("a"))
    assert before is not None and f.sign_pod(pod("b")) == before
    inf.client.patch("Namespace", "", "default", {"metadata": {"labels": {"team": "b"}}})
    inf.poll()
    after = f.sign_pod(pod("c"))
    assert after is not None and after != before


# ------------------------------------------------------------------------ unsignable pods


UNSIGNABLE = [
    ("topology spread constraints", {"topology_spread_constraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}}]}),
    ("pod anti-affinity", {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}),
    ("pod affinity (even preferred)", {"affinity": {"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
            "labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}}]}}}),
    ("a PersistentVolumeClaim (ksched)", {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]}),
    ("a generic ephemeral volume (ksched)", {"volumes": [{"name": "e", "ephemeral": {"volumeClaimTemplate": {
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]}),
    ("a migratable in-tree volume (ksched)", {"volumes": [{"name": "ebs", "awsElasticBlockStore": {
        "volumeID": "vol-1"}}]}),
    ("a DRA resource claim", {"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}}),
]


@pytest.mark.parametrize(("what", "kw"), UNSIGNABLE, ids=[u[0] for u in UNSIGNABLE])
def test_pods_whose_answers_depend_on_other_objects_are_not_signed(what: str, kw: dict[str, Any]) -> None:
    assert fw().sign_pod(pod("a", **kw)) is None


def test_system_default_spreading_signs_no_pod() -> None:
    f = fw({})  # the default profile
    assert f.signatures_enabled
    assert f.sign_pod(pod("a")) is None


def test_the_plugins_fragments() -> None:
    """What each plugin signs (the fragments, as upstream's keys)."""
    f = fw()
    p = pod("a", tolerations=[{"key": "k", "operator": "Exists"}], host_ports=[80], images=["app:1"])
    got = {pl.name: pl.sign_pod(p) for pl in f._signers}  # type: ignore[attr-defined]
    keys = {name: [fr.key for fr in frs or ()] for name, (frs, st) in got.items()}
    assert all(st is None for _, st in got.values())
    assert keys == {
        "NodeUnschedulable": [TOLERATIONS_SIGNER_NAME],
        "NodeName": [NODE_NAME_SIGNER_NAME],
        "TaintToleration": [TOLERATIONS_SIGNER_NAME],
        "NodeAffinity": ["v1.Pod.Spec.Affinity.NodeAffinity", "v1.Pod.Spec.Affinity.NodeSelector"],
        "NodePorts": [HOST_PORTS_SIGNER_NAME],
        "NodeResourcesFit": [RESOURCES_SIGNER_NAME],
        "VolumeRestrictions": [VOLUMES_SIGNER_NAME],
        "NodeVolumeLimits": [VOLUMES_SIGNER_NAME],
        "VolumeBinding": [VOLUMES_SIGNER_NAME],
        "VolumeZone": [VOLUMES_SIGNER_NAME],
        "PodTopologySpread": [],
        "InterPodAffinity": [LABELS_SIGNER_NAME],
        "NodeResourcesBalancedAllocation": [RESOURCES_SIGNER_NAME],
        "ImageLocality": ["v1.Pod.Spec.CanonicalImageNames()"],
        "DynamicResources": [],
    }
    frags = dict(fr for frs, _ in got.values() for fr in frs or ())
    assert frags[HOST_PORTS_SIGNER_NAME] == (("", "TCP", 80),)
    assert frags[TOLERATIONS_SIGNER_NAME] == (("k", "Exists", "", ""),)
    assert frags["v1.Pod.Spec.CanonicalImageNames()"] == ("app:1",)


# ------------------------------------------------------------------------ the profile


class NoSign(FilterPlugin):
    name = "NoSign"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None


class Refuses(FilterPlugin, SignPlugin):
    name = "Refuses"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        if pod.labels.get("refuse"):
            return None, Status(Code.UNSCHEDULABLE, "no")
        return [SignFragment("example.com/refuses", "ok")], None


class Conflicts(FilterPlugin, SignPlugin):
    name = "Conflicts"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment] | None, Status | None]:
        return [SignFragment(NODE_NAME_SIGNER_NAME, "not the node name")], None


class Undeclared(FilterPlugin):
    name = "Undeclared"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None

    def sign_pod(self, pod: Pod) -> Any:
        return [], None


def _with(cls: type) -> Framework:
    reg = Registry({cls.name: cls}, load_entry_points=False)  # type: ignore[attr-defined]
    prof = {"pluginConfig": [NO_SYSTEM_DEFAULTS],
            "plugins": {"multiPoint": {"enabled": [{"name": cls.name}]}}}  # type: ignore[attr-defined]
    return fw(prof, reg)


def test_a_plugin_that_does_not_sign_turns_signatures_off_for_its_profile() -> None:
    f = _with(NoSign)
    assert not f.signatures_enabled and f.unsigned_plugins == ["NoSign"]
    assert f.sign_pod(pod("a")) is None


def test_a_refusal_leaves_the_pod_unsigned_and_is_asked_first_next_time() -> None:
    f = _with(Refuses)
    signed = f.sign_pod(pod("a"))
    assert signed is not None and dict(signed)["example.com/refuses"] == "ok"
    assert f.sign_pod(pod("b", labels={"app": "web", "refuse": "1"})) is None
    assert f._signers[0].name == "Refuses"  # type: ignore[attr-defined]
    assert f.sign_pod(pod("c")) == signed  # the order never changes a signature


def test_two_plugins_giving_one_key_different_values_leave_the_pod_unsigned() -> None:
    assert _with(Conflicts).sign_pod(pod("a")) is None


def test_sign_pod_without_deriving_from_sign_plugin_is_refused() -> None:
    with pytest.raises(FrameworkError, match="defines sign_pod but does not derive from SignPlugin"):
        _with(Undeclared)
