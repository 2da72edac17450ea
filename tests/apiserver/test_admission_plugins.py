"""Admission plugins of the embedded API server (ksched.apiserver.admission and its plugins), with
upstream's messages: LimitRanger (defaults with their annotation; min, max and ratio per
container and per pod; claims), ServiceAccount, Priority, RuntimeClass (overhead, node selector,
tolerations), ResourceQuota (constraints, unknown status, exceeded; charged in the same step as
the write), the plugin order, and --disable-admission-plugins."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.errors import Forbidden, Invalid
from ksched.api.pod import Pod
from ksched.apiserver.admission import ADMISSION_PLUGINS
from ksched.apiserver.runtimeclass import merge_tolerations
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock


@pytest.fixture
def store() -> Store:
    return Store(VirtualClock())


def ctr(name: str = "app", req: dict[str, str] | None = None, lim: dict[str, str] | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if req:
        res["requests"] = req
    if lim:
        res["limits"] = lim
    return {"name": name, "image": "i", "resources": res}


def pod(name: str, *containers: dict[str, Any], ns: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": list(containers) or [ctr()], **spec}}


def limit_range(*items: dict[str, Any], name: str = "lr", ns: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": ns},
            "spec": {"limits": list(items)}}


def refused(store: Store, raw: dict[str, Any]) -> str:
    rv = store.resource_version
    with pytest.raises(Forbidden) as ei:
        store.create(raw)
    assert store.resource_version == rv, "a refused object changed the store"
    return ei.value.message


def resources(p: Any, i: int = 0, field: str = "containers") -> dict[str, Any]:
    return p.raw["spec"][field][i]["resources"]  # type: ignore[no-any-return]


def test_the_plugins_and_their_order() -> None:
    assert ADMISSION_PLUGINS == ("NamespaceLifecycle", "LimitRanger", "ServiceAccount", "Priority",
                                 "DefaultTolerationSeconds", "RuntimeClass", "ResourceQuota")


# ---------------------------------------------------------------- LimitRanger


def test_limit_ranger_fills_missing_requests_and_limits_and_says_so(store: Store) -> None:
    store.create(limit_range({"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                              "defaultRequest": {"cpu": "200m"}}))
    p = store.create(pod("a", ctr("app"), ctr("side", req={"cpu": "50m"}),
                         initContainers=[ctr("init", lim={"memory": "64Mi"})]))
    assert resources(p, 0) == {"limits": {"cpu": "500m", "memory": "256Mi"},
                               "requests": {"cpu": "200m", "memory": "256Mi"}}
    # A stated request is kept; the missing limits come from the defaults.
    assert resources(p, 1) == {"requests": {"cpu": "50m", "memory": "256Mi"},
                               "limits": {"cpu": "500m", "memory": "256Mi"}}
    # API defaulting ran first: the init container's request is its limit, not the default request.
    assert resources(p, 0, "initContainers") == {"limits": {"memory": "64Mi", "cpu": "500m"},
                                                 "requests": {"memory": "64Mi", "cpu": "200m"}}
    assert p.annotations["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for container app; "
        "memory request for container side; cpu, memory limit for container side; cpu request for init container "
        "init; cpu limit for init container init")
    assert isinstance(p, Pod) and p.containers[0].requests == {"cpu": 200, "memory": 256 * 1024 * 1024}


@pytest.mark.parametrize(("item", "c", "want"), [
    # Container items default what they bound (min and max become default requests and limits),
    # so a missing request or limit shows with Pod items.
    ({"type": "Pod", "min": {"cpu": "100m"}}, ctr(),
     "minimum cpu usage per Pod is 100m.  No request is specified"),
    ({"type": "Container", "min": {"cpu": "100m"}}, ctr(req={"cpu": "50m"}),
     "minimum cpu usage per Container is 100m, but request is 50m"),
    ({"type": "Pod", "max": {"cpu": "1"}}, ctr(req={"cpu": "50m"}),
     "maximum cpu usage per Pod is 1.  No limit is specified"),
    ({"type": "Container", "max": {"cpu": "1"}}, ctr(lim={"cpu": "2"}),
     "maximum cpu usage per Container is 1, but limit is 2"),
    ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}, ctr(req={"cpu": "100m"}, lim={"cpu": "1"}),
     "cpu max limit to request ratio per Container is 2, but provided ratio is 10.000000"),
    ({"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}}, ctr(lim={"memory": "1Gi"}),
     "cpu max limit to request ratio per Container is 2, but no request is specified or request is 0"),
    ({"type": "Pod", "max": {"memory": "1Gi"}}, ctr(req={"memory": "1Gi"}, lim={"memory": "2Gi"}),
     "maximum memory usage per Pod is 1Gi, but limit is 2Gi"),
    ({"type": "Pod", "min": {"cpu": "100m", "memory": "10Mi"}}, ctr(),
     "[minimum cpu usage per Pod is 100m.  No request is specified, minimum memory usage per Pod is "
     "10Mi.  No request is specified]"),
])
def test_limit_ranger_bounds(store: Store, item: dict[str, Any], c: dict[str, Any], want: str) -> None:
    store.create(limit_range(item))
    assert refused(store, pod("p", c)) == f'pods "p" is forbidden: {want}'


def test_limit_ranger_pod_totals_and_claims(store: Store) -> None:
    store.create(limit_range({"type": "Pod", "max": {"cpu": "1"}},
                             {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}))
    # Two containers within the pod's bound each, over it together.
    assert refused(store, pod("p", ctr("a", lim={"cpu": "600m"}), ctr("b", lim={"cpu": "600m"}))) == (
        'pods "p" is forbidden: maximum cpu usage per Pod is 1, but limit is 1200m')
    store.create(pod("q", ctr("a", lim={"cpu": "500m"}), ctr("b", lim={"cpu": "500m"})))
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "default"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}}
    assert refused(store, claim) == ('persistentvolumeclaims "c" is forbidden: maximum storage usage per '
                                     "PersistentVolumeClaim is 10Gi, but request is 20Gi")


def test_limit_ranges_of_other_namespaces_do_not_apply(store: Store) -> None:
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    store.create(limit_range({"type": "Container", "defaultRequest": {"cpu": "1"}}, ns="other"))
    assert resources(store.create(pod("a")), 0) == {}


# ---------------------------------------------------------------- ServiceAccount and Priority


def test_service_account(store: Store) -> None:
    assert store.create(pod("a")).raw["spec"]["serviceAccountName"] == "default"
    assert refused(store, pod("b", serviceAccountName="robot")) == (
        'pods "b" is forbidden: error looking up service account default/robot: serviceaccount "robot" not found')
    store.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "default"}})
    assert store.create(pod("b", serviceAccountName="robot")).raw["spec"]["serviceAccountName"] == "robot"
    # The deprecated field names the account too.
    assert store.create(pod("c", serviceAccount="robot")).raw["spec"]["serviceAccountName"] == "robot"


def pc(name: str, value: int, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
            **extra}


@pytest.mark.parametrize(("spec", "want"), [
    ({}, (0, "PreemptLowerPriority", None)),
    ({"priorityClassName": "high"}, (1000, "Never", "high")),
    ({"priorityClassName": "high", "priority": 1000}, (1000, "Never", "high")),
    ({"priority": 0}, (0, "PreemptLowerPriority", None)),
    ({"priority": 7}, "the integer value of priority (7) must not be provided in pod spec; priority admission "
                      "controller computed 0 from the given PriorityClass name"),
    ({"priorityClassName": "high", "priority": 5}, "the integer value of priority (5) must not be provided in pod "
                                                   "spec; priority admission controller computed 1000 from the given "
                                                   "PriorityClass name"),
    ({"preemptionPolicy": "Never"}, "the string value of PreemptionPolicy (Never) must not be provided in pod spec; "
                                    "priority admission controller computed PreemptLowerPriority from the given "
                                    "PriorityClass name"),
    ({"priorityClassName": "nope"}, "no PriorityClass with name nope was found"),
])
def test_priority(store: Store, spec: dict[str, Any], want: Any) -> None:
    store.create(pc("high", 1000, preemptionPolicy="Never"))
    if isinstance(want, str):
        assert refused(store, pod("p", **spec)) == f'pods "p" is forbidden: {want}'
    else:
        s = store.create(pod("p", **spec)).raw["spec"]
        assert (s["priority"], s["preemptionPolicy"], s.get("priorityClassName")) == want


def test_only_one_global_default_priority_class(store: Store) -> None:
    store.create(pc("a", 10, globalDefault=True))
    assert refused(store, pc("b", 20, globalDefault=True)) == (
        'priorityclasses.scheduling.k8s.io "b" is forbidden: PriorityClass a is already marked as default. Only '
        "one default can exist")
    store.create(pc("b", 20))
    raw = store.get("PriorityClass", "", "b").deepcopy_raw()
    raw["globalDefault"] = True
    with pytest.raises(Forbidden):
        store.update(raw)


# ---------------------------------------------------------------- RuntimeClass


def runtime_class(name: str = "kata", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": name,
            **extra}


def test_runtime_class_sets_overhead_and_merges_scheduling(store: Store) -> None:
    store.create(runtime_class(overhead={"podFixed": {"cpu": "250m", "memory": "120Mi"}},
                               scheduling={"nodeSelector": {"runtime": "kata"},
                                           "tolerations": [{"key": "kata", "operator": "Exists",
                                                            "effect": "NoSchedule"}]}))
    p = store.create(pod("a", runtimeClassName="kata", nodeSelector={"zone": "a"},
                         tolerations=[{"key": "kata", "operator": "Exists", "effect": "NoSchedule"}]))
    spec = p.raw["spec"]
    assert spec["overhead"] == {"cpu": "250m", "memory": "120Mi"}
    assert spec["nodeSelector"] == {"zone": "a", "runtime": "kata"}
    assert [t["key"] for t in spec["tolerations"]].count("kata") == 1
    assert isinstance(p, Pod) and p.overhead == {"cpu": 250, "memory": 120 * 1024 * 1024}
    # The same overhead stated by the pod is fine; another is not.
    store.create(pod("b", runtimeClassName="kata", overhead={"cpu": "250m", "memory": "120Mi"}))
    assert refused(store, pod("c", runtimeClassName="kata", overhead={"cpu": "1"})) == (
        'pods "c" is forbidden: pod rejected: Pod\'s Overhead doesn\'t match RuntimeClass\'s defined Overhead')
    assert refused(store, pod("d", runtimeClassName="kata", nodeSelector={"runtime": "runc"})) == (
        'pods "d" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[runtime] = kata; '
        "pod.spec.nodeSelector[runtime] = runc")


def test_runtime_class_refusals(store: Store) -> None:
    assert refused(store, pod("a", runtimeClassName="gvisor")) == (
        'pods "a" is forbidden: pod rejected: RuntimeClass "gvisor" not found')
    assert refused(store, pod("b", overhead={"cpu": "1"})) == (
        'pods "b" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead')
    store.create(runtime_class("runc"))
    assert refused(store, pod("c", runtimeClassName="runc", overhead={"cpu": "1"})) == (
        'pods "c" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead')
    assert "overhead" not in store.create(pod("d", runtimeClassName="runc")).raw["spec"]


T = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
EXISTS_K = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
EXISTS_ALL = {"operator": "Exists"}


@pytest.mark.parametrize(("first", "second", "want"), [
    ([T], [T], [T]),
    ([T], [EXISTS_K], [EXISTS_K]),
    ([EXISTS_K], [T], [EXISTS_K]),
    ([T, {"key": "x", "operator": "Exists"}], [EXISTS_ALL], [EXISTS_ALL]),
    # Tolerating a NoExecute taint longer covers tolerating it shorter.
    ([{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}],
     [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20}],
     [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20}]),
    ([{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
     [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20}],
     [{"key": "k", "operator": "Exists", "effect": "NoExecute"}]),
])
def test_merge_tolerations(first: list[Any], second: list[Any], want: list[Any]) -> None:
    assert merge_tolerations(first, second) == want


# ---------------------------------------------------------------- ResourceQuota


def quota(hard: dict[str, str], name: str = "q", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": "default"},
            "spec": {"hard": hard, **spec}}


def with_status(store: Store, name: str = "q", used: dict[str, str] | None = None) -> None:
    """What the resourcequota controller does (this store runs no controllers)."""
    q = store.get("ResourceQuota", "default", name)
    raw = q.deepcopy_raw()
    hard = raw["spec"]["hard"]
    raw["status"] = {"hard": hard, "used": used if used is not None else dict.fromkeys(hard, "0")}
    store.update_status(raw)


def test_quota_needs_known_usage_and_charges_on_creation(store: Store) -> None:
    store.create(quota({"pods": "2", "requests.cpu": "1"}))
    store.create(pod("free"))  # no status yet: the quota limits nothing it knows of
    with_status(store, used={"pods": "1"})
    assert refused(store, pod("a", ctr(req={"cpu": "100m"}))) == (
        'pods "a" is forbidden: status unknown for quota: q, resources: pods,requests.cpu')
    with_status(store)
    store.create(pod("a", ctr(req={"cpu": "600m"})))
    assert store.get("ResourceQuota", "default", "q").raw["status"]["used"] == {"pods": "1", "requests.cpu": "600m"}
    assert refused(store, pod("b", ctr(req={"cpu": "600m"}))) == (
        'pods "b" is forbidden: exceeded quota: q, requested: requests.cpu=600m, used: requests.cpu=600m, limited: '
        "requests.cpu=1")
    store.create(pod("b", ctr(req={"cpu": "400m"})))
    assert refused(store, pod("c", ctr(req={"cpu": "0"}))) == (
        'pods "c" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2')


def test_quota_on_limits_requires_containers_to_state_them(store: Store) -> None:
    store.create(quota({"limits.cpu": "4", "requests.memory": "1Gi"}))
    with_status(store)
    assert refused(store, pod("p", ctr("app", req={"memory": "1Mi"}), ctr("side"))) == (
        'pods "p" is forbidden: failed quota: q: must specify limits.cpu for: app,side; requests.memory for: side')


def test_limit_range_defaults_are_seen_by_quota(store: Store) -> None:
    """LimitRanger runs before ResourceQuota: defaults satisfy a quota's constraints and count."""
    store.create(quota({"limits.cpu": "1", "requests.cpu": "1"}))
    with_status(store)
    store.create(limit_range({"type": "Container", "default": {"cpu": "400m"}, "defaultRequest": {"cpu": "300m"}}))
    store.create(pod("a"))
    store.create(pod("b"))
    assert store.get("ResourceQuota", "default", "q").raw["status"]["used"] == {"limits.cpu": "800m",
                                                                                "requests.cpu": "600m"}
    assert refused(store, pod("c")) == ('pods "c" is forbidden: exceeded quota: q, requested: limits.cpu=400m, used: '
                                        "limits.cpu=800m, limited: limits.cpu=1")


def test_object_count_quotas(store: Store) -> None:
    store.create(quota({"count/configmaps": "1", "services.nodeports": "1"}))
    with_status(store)
    store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    assert refused(store, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}) == (
        'configmaps "b" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=1, '
        "limited: count/configmaps=1")
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
           "spec": {"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}}
    assert refused(store, svc).startswith('services "s" is forbidden: exceeded quota: q, requested: '
                                          "services.nodeports=2")


def test_a_quota_of_another_scope_does_not_apply(store: Store) -> None:
    store.create(quota({"pods": "0"}, scopes=["BestEffort"]))
    with_status(store)
    store.create(pod("burstable", ctr(req={"cpu": "1m"})))
    assert refused(store, pod("best-effort")).endswith("exceeded quota: q, requested: pods=1, used: pods=0, "
                                                       "limited: pods=0")


@given(st.lists(st.tuples(st.integers(0, 600), st.booleans()), min_size=1, max_size=25))
@settings(max_examples=60, deadline=None)
def test_quota_is_never_exceeded(requests: list[tuple[int, bool]]) -> None:
    """Whatever the sequence of creations and deletions, admitted pods never use more than the
    quota allows, and status.used stays the sum of what was admitted (deletions are given back
    by the controller, here recomputed by hand)."""
    st_ = Store(VirtualClock())
    st_.create(quota({"requests.cpu": "1", "pods": "4"}))
    with_status(st_)
    live: dict[str, int] = {}
    for i, (milli, delete) in enumerate(requests):
        if delete and live:
            name = sorted(live)[0]
            st_.delete("Pod", "default", name)
            del live[name]
            with_status(st_, used={"requests.cpu": f"{sum(live.values())}m", "pods": str(len(live))})
            continue
        try:
            st_.create(pod(f"p{i}", ctr(req={"cpu": f"{milli}m"})))
            live[f"p{i}"] = milli
        except Forbidden:
            pass
        assert sum(live.values()) <= 1000 and len(live) <= 4
        used = st_.get("ResourceQuota", "default", "q").raw["status"]["used"]
        assert used["pods"] == str(len(live))


# ---------------------------------------------------------------- disabling plugins


@pytest.mark.parametrize("plugin", ADMISSION_PLUGINS)
def test_each_plugin_can_be_disabled(plugin: str) -> None:
    st_ = Store(VirtualClock(), disable_admission_plugins=[plugin])
    assert st_.disabled_admission == {plugin}


def test_disabled_plugins_do_not_run() -> None:
    st_ = Store(VirtualClock(), disable_admission_plugins=["LimitRanger", "ServiceAccount", "RuntimeClass",
                                                           "ResourceQuota"])
    st_.create(limit_range({"type": "Container", "defaultRequest": {"cpu": "1"}, "max": {"cpu": "1"}}))
    st_.create(quota({"pods": "0"}))
    p = st_.create(pod("a", ctr(lim={"cpu": "8"}), serviceAccountName="robot", runtimeClassName="none",
                       overhead={"cpu": "1"}))
    assert p.raw["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "8"}, "requests": {"cpu": "8"}}


def test_validation_comes_after_mutating_admission(store: Store) -> None:
    """A default limit below the pod's request makes the pod invalid, as upstream."""
    store.create(limit_range({"type": "Container", "default": {"cpu": "500m"}}))
    with pytest.raises(Invalid) as ei:
        store.create(pod("big", ctr(req={"cpu": "3"})))
    assert ei.value.message == ('Pod "big" is invalid: spec.containers[0].resources.requests.cpu: Invalid value: '
                                '"3": must be less than or equal to cpu limit of 500m')
