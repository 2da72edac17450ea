"""Pod resource math: effective requests (cases from upstream's component-helpers
resource/helpers_test.go), non-zero requests for scoring, and the QoS class (cases from
pkg/apis/core/v1/helper/qos/qos_test.go)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.pod import Pod, resource_units
from ksched.api.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    QOS_BEST_EFFORT,
    QOS_BURSTABLE,
    QOS_GUARANTEED,
    is_extended_resource,
    is_hugepages,
    is_scalar_resource,
    pod_non_zero_requests,
    pod_requests,
    qos_class,
)

Mi = 1024**2
Gi = 1024**3
SIDECAR = "Always"


def ctr(name: str = "c", requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
        restart: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "img"}
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    if res:
        c["resources"] = res
    if restart:
        c["restartPolicy"] = restart
    return c


def pod(containers: list[dict[str, Any]] | None = None, init: list[dict[str, Any]] | None = None,
        overhead: dict[str, Any] | None = None, pod_requests_: dict[str, Any] | None = None,
        pod_limits: dict[str, Any] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": containers if containers is not None else [ctr()]}
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    if pod_requests_ is not None or pod_limits is not None:
        spec["resources"] = {}
        if pod_requests_ is not None:
            spec["resources"]["requests"] = pod_requests_
        if pod_limits is not None:
            spec["resources"]["limits"] = pod_limits
    return Pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec})


# ---------------------------------------------------------------- TestPodRequestsAndLimits (with overhead)


def test_just_overhead() -> None:
    assert pod_requests(pod([ctr()], overhead={"cpu": "5", "memory": "5"})) == {"cpu": 5000, "memory": 5}


def test_request_and_overhead() -> None:
    p = pod([ctr(requests={"cpu": "1", "memory": "10"})], overhead={"cpu": "5", "memory": "5"})
    assert pod_requests(p) == {"cpu": 6000, "memory": 15}


def test_all_requests_limits_and_overhead() -> None:
    p = pod([ctr(requests={"cpu": "1", "memory": "10"}, limits={"cpu": "2", "memory": "12"})],
            overhead={"cpu": "5", "memory": "5"})
    assert pod_requests(p) == {"cpu": 6000, "memory": 15}


def test_limit_only_defaults_the_request() -> None:
    # upstream's unit test feeds an undefaulted pod ("just-limit-no-overhead" -> no request); the API
    # server defaults a missing request to the limit, and ksched reads pods as stored, defaulted.
    p = pod([ctr(limits={"cpu": "9"})])
    assert pod_requests(p) == {"cpu": 9000}


def test_massive_init_container_with_overhead() -> None:
    p = pod(
        [ctr("foobar", {"cpu": "1", "memory": "5"}, {"cpu": "2", "memory": "10"}),
         ctr("foobar2", {"cpu": "4", "memory": "12"}, {"cpu": "8", "memory": "24"})],
        init=[ctr("small-init", {"cpu": "1", "memory": "5"}, {"cpu": "1", "memory": "5"}),
              ctr("big-init", {"cpu": "40", "memory": "120"}, {"cpu": "80", "memory": "240"})],
        overhead={"cpu": "3", "memory": "8"})
    assert pod_requests(p) == {"cpu": 43000, "memory": 128}


def test_two_containers_sum() -> None:
    p = pod([ctr("a", {"cpu": "1", "memory": "5"}), ctr("b", {"cpu": "4", "memory": "12"})])
    assert pod_requests(p) == {"cpu": 5000, "memory": 17}


# ---------------------------------------------------------------- TestPodResourceRequests


@pytest.mark.parametrize(("init", "containers", "overhead", "expected"), [
    pytest.param([ctr("i", {"cpu": "4"})], [ctr("c", {"cpu": "1"})], None, {"cpu": 4000},
                 id="larger init container"),
    pytest.param([ctr("i", {"cpu": "2"})], [ctr("a", {"cpu": "2"}), ctr("b", {"cpu": "3"})], None, {"cpu": 5000},
                 id="larger containers"),
    pytest.param([ctr("i", {"cpu": "2"}, {"cpu": "2"})], [ctr("a", {"cpu": "2"}), ctr("b", {"cpu": "3"})],
                 {"cpu": "1", "memory": "1Gi"}, {"cpu": 6000, "memory": Gi}, id="pod overhead included"),
    pytest.param([ctr("r1", {"cpu": "1"}, restart=SIDECAR)], [ctr("c", {"cpu": "1"})], None, {"cpu": 2000},
                 id="restartable init container"),
    pytest.param([ctr("i1", {"cpu": "5"}), ctr("r1", {"cpu": "1"}, restart=SIDECAR),
                  ctr("r2", {"cpu": "2"}, restart=SIDECAR), ctr("r3", {"cpu": "3"}, restart=SIDECAR)],
                 [ctr("c", {"cpu": "1"})], None, {"cpu": 7000},
                 id="multiple restartable init containers: max(5, 3+2+1+1)"),
    pytest.param([ctr("i1", {"cpu": "5"}), ctr("r1", {"cpu": "1"}, restart=SIDECAR),
                  ctr("r2", {"cpu": "2"}, restart=SIDECAR), ctr("i2", {"cpu": "5"}),
                  ctr("r3", {"cpu": "3"}, restart=SIDECAR)],
                 [ctr("c", {"cpu": "1"})], None, {"cpu": 8000},
                 id="restartable and regular init: i2 needs 5 + the sidecars before it (1+2)"),
    pytest.param([ctr("r1", {"cpu": "10"}, restart=SIDECAR), ctr("i1", {"cpu": "200"})],
                 [ctr("c", {"cpu": "100"})], None, {"cpu": 210000}, id="restartable-init, init and regular"),
])
def test_pod_resource_requests(init: list, containers: list, overhead: dict | None, expected: dict) -> None:
    _both_ways(pod(containers, init=init, overhead=overhead), expected)


def _both_ways(p: Pod, expected: dict) -> None:
    """Not kept (``cache=False``: the report's reading) and kept give the same requests; the
    first leaves the pod as it was, a later uncached read finds the cached value."""
    assert pod_requests(p, cache=False) == expected
    assert p._cache is None
    got = pod_requests(p)
    assert got == expected and p.cached()["requests"] is got
    assert pod_requests(p, cache=False) is got


# ---------------------------------------------------------------- TestPodLevelResourceRequests

HP2 = "hugepages-2Mi"
HP1G = "hugepages-1Gi"


@pytest.mark.parametrize(("pod_req", "pod_lim", "containers", "init", "expected"), [
    pytest.param(None, None, [ctr()], None, {}, id="nil"),
    pytest.param({"memory": "2Mi"}, None, [ctr()], None, {"memory": 2 * Mi}, id="pod level memory"),
    pytest.param({"memory": "2Mi"}, None, [ctr(requests={"cpu": "2m"})], None, {"memory": 2 * Mi, "cpu": 2},
                 id="pod level memory and container level cpu"),
    pytest.param({"storage": "2Mi"}, None, [ctr(requests={"storage": "3Mi"})], None, {"storage": 3 * Mi},
                 id="unsupported resource at both levels: the containers' value"),
    pytest.param({"storage": "2Mi"}, None, [ctr(requests={"memory": "3Mi"})], None, {"memory": 3 * Mi},
                 id="unsupported resource at pod level only is ignored"),
    pytest.param(None, None, [ctr(requests={"memory": "3Mi", "cpu": "2m"})], None, {"memory": 3 * Mi, "cpu": 2},
                 id="only container level"),
    pytest.param({"memory": "6Mi", "cpu": "8m"}, None, [ctr(requests={"memory": "3Mi", "cpu": "2m"})], None,
                 {"memory": 6 * Mi, "cpu": 8}, id="pod level wins over container level"),
    pytest.param(None, None, [ctr(requests={"memory": "3Mi", "cpu": "2m"})],
                 [ctr("i", {"memory": "5Mi", "cpu": "4m"})], {"memory": 5 * Mi, "cpu": 4}, id="init container"),
    pytest.param(None, None, [ctr(requests={"memory": "3Mi", "cpu": "2m"})],
                 [ctr("i", {"memory": "5Mi", "cpu": "4m"}, restart=SIDECAR)], {"memory": 8 * Mi, "cpu": 6},
                 id="sidecar"),
    pytest.param(None, None, [ctr(requests={"memory": "3Mi", "cpu": "2m"})],
                 [ctr("s", {"memory": "5Mi", "cpu": "4m"}, restart=SIDECAR), ctr("i", {"memory": "6Mi", "cpu": "8m"})],
                 {"memory": 11 * Mi, "cpu": 12}, id="init after sidecar"),
    pytest.param({"memory": "15Mi", "cpu": "18m"}, None, [ctr(requests={"memory": "3Mi", "cpu": "2m"})],
                 [ctr("s", {"memory": "5Mi", "cpu": "4m"}, restart=SIDECAR), ctr("i", {"memory": "6Mi", "cpu": "8m"})],
                 {"memory": 15 * Mi, "cpu": 18}, id="pod level over init and sidecar"),
    pytest.param({"memory": "10Mi", HP2: "2Mi"}, {HP2: "2Mi"}, [ctr()], None, {"memory": 10 * Mi, HP2: 2 * Mi},
                 id="hugepages single page size"),
    pytest.param({"cpu": "1", HP2: "2Mi", HP1G: "1Gi"}, {HP2: "2Mi", HP1G: "1Gi"}, [ctr()], None,
                 {"cpu": 1000, HP2: 2 * Mi, HP1G: Gi}, id="hugepages multiple page sizes"),
    pytest.param({"cpu": "1", HP2: "10Mi"}, {HP2: "10Mi"}, [ctr(requests={HP2: "6Mi"}, limits={HP2: "6Mi"})], None,
                 {"cpu": 1000, HP2: 10 * Mi}, id="hugepages at both levels"),
    pytest.param({"cpu": "1", HP2: "10Mi", HP1G: "2Gi"}, {HP2: "10Mi", HP1G: "2Gi"},
                 [ctr(requests={"cpu": "1", HP1G: "2Gi"}, limits={HP1G: "2Gi"})], None,
                 {"cpu": 1000, HP2: 10 * Mi, HP1G: 2 * Gi}, id="hugepages multiple sizes at both levels"),
    pytest.param({"cpu": "1", HP2: "10Mi"}, {HP2: "10Mi"},
                 [ctr(requests={"memory": "4Mi", HP1G: "1Gi"}, limits={HP1G: "1Gi"})], None,
                 {"cpu": 1000, "memory": 4 * Mi, HP2: 10 * Mi, HP1G: Gi}, id="page sizes split between levels"),
])
def test_pod_level_resource_requests(pod_req: dict | None, pod_lim: dict | None, containers: list,
                                     init: list | None, expected: dict) -> None:
    _both_ways(pod(containers, init=init, pod_requests_=pod_req, pod_limits=pod_lim), expected)


def test_pod_level_request_defaults_from_limit_and_overhead_is_added() -> None:
    p = pod([ctr(requests={"cpu": "100m"})], pod_limits={"cpu": "2", "memory": "1Gi"},
            overhead={"cpu": "250m", "memory": "64Mi"})
    assert pod_requests(p) == {"cpu": 2250, "memory": Gi + 64 * Mi}


def test_scalar_and_native_resources_are_summed() -> None:
    p = pod([ctr("a", {"nvidia.com/gpu": 1, "ephemeral-storage": "1Gi"}, {"nvidia.com/gpu": 1}),
             ctr("b", {"nvidia.com/gpu": "2", HP2: "4Mi", "memory": "1Mi"}, {"nvidia.com/gpu": 2, HP2: "4Mi"})])
    assert pod_requests(p) == {"nvidia.com/gpu": 3, "ephemeral-storage": Gi, HP2: 4 * Mi, "memory": Mi}


def test_zero_requests_are_dropped() -> None:
    assert pod_requests(pod([ctr(requests={"cpu": "0", "memory": "0"})])) == {}


def test_requests_are_cached_per_object() -> None:
    p = pod([ctr(requests={"cpu": "1"})])
    assert pod_requests(p) is pod_requests(p)


# ---------------------------------------------------------------- non-zero requests (scoring)

D_CPU, D_MEM = DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST


def test_default_values() -> None:
    assert D_CPU == 100
    assert D_MEM == 209_715_200  # 200Mi


@pytest.mark.parametrize(("p", "expected"), [
    pytest.param(pod([ctr()]), (D_CPU, D_MEM), id="no requests: 100m / 200Mi"),
    pytest.param(pod([ctr(requests={"cpu": "0", "memory": "0"})]), (0, 0), id="explicit zero is kept"),
    pytest.param(pod([ctr(requests={"cpu": "0"})]), (0, D_MEM), id="explicit zero cpu, missing memory"),
    pytest.param(pod([ctr(requests={"memory": "1Gi"})]), (D_CPU, Gi), id="missing cpu"),
    pytest.param(pod([ctr("a", {"cpu": "200m"}), ctr("b")]), (300, 2 * D_MEM), id="defaults per container"),
    pytest.param(pod([ctr("a", {"cpu": "1", "memory": "1Gi"}), ctr("b", {"cpu": "500m", "memory": "1Mi"})]),
                 (1500, Gi + Mi), id="all requests set"),
    pytest.param(pod([ctr()], init=[ctr("i")]), (D_CPU, D_MEM), id="init without requests"),
    pytest.param(pod([ctr()], init=[ctr("i", {"cpu": "1"})]), (1000, D_MEM), id="larger init container"),
    pytest.param(pod([ctr()], init=[ctr("s", restart=SIDECAR)]), (2 * D_CPU, 2 * D_MEM), id="sidecar defaults too"),
    pytest.param(pod([ctr()], overhead={"cpu": "50m", "memory": "10Mi"}), (D_CPU + 50, D_MEM + 10 * Mi),
                 id="overhead added"),
    pytest.param(pod([ctr(limits={"cpu": "2"})]), (2000, D_MEM), id="request defaulted from limit"),
])
def test_non_zero_requests(p: Pod, expected: tuple[int, int]) -> None:
    assert pod_non_zero_requests(p) == expected


def test_non_zero_with_pod_level_resources() -> None:
    # Pod-level cpu and memory: they are the answer.
    p = pod([ctr(), ctr("b")], pod_requests_={"cpu": "1", "memory": "1Gi"})
    assert pod_non_zero_requests(p) == (1000, Gi)
    # Pod-level memory only, no container names cpu: the per-container default applies.
    p = pod([ctr(), ctr("b")], pod_requests_={"memory": "1Gi"})
    assert pod_non_zero_requests(p) == (2 * D_CPU, Gi)
    # Pod-level memory only, a container names cpu (even 0): no default (getNonMissingContainerRequests).
    p = pod([ctr("a", {"cpu": "0"}), ctr("b")], pod_requests_={"memory": "1Gi"})
    assert pod_non_zero_requests(p) == (0, Gi)
    p = pod([ctr("a", {"cpu": "300m"}), ctr("b")], pod_requests_={"memory": "1Gi"})
    assert pod_non_zero_requests(p) == (300, Gi)
    # Without pod-level resources, each container missing cpu gets 100m.
    p = pod([ctr("a", {"cpu": "300m"}), ctr("b")])
    assert pod_non_zero_requests(p) == (300 + D_CPU, 2 * D_MEM)
    # Pod-level ephemeral-storage is not a pod-level resource: container rules apply.
    p = pod([ctr("a", {"cpu": "300m"}), ctr("b")], pod_requests_={"ephemeral-storage": "1Gi"})
    assert pod_non_zero_requests(p) == (300 + D_CPU, 2 * D_MEM)


def test_non_zero_never_below_real_requests_for_cpu_and_memory() -> None:
    for p in [pod([ctr(requests={"cpu": "3", "memory": "5Gi"})]), pod([ctr(), ctr("x", {"cpu": "1"})]),
              pod([ctr()], init=[ctr("i", {"memory": "1Gi"})])]:
        real = pod_requests(p)
        cpu, mem = pod_non_zero_requests(p)
        assert cpu >= real.get("cpu", 0) and mem >= real.get("memory", 0)


# ---------------------------------------------------------------- QoS (TestComputePodQOS)


def rl(cpu: str = "", memory: str = "") -> dict[str, str]:
    out = {}
    if cpu:
        out["cpu"] = cpu
    if memory:
        out["memory"] = memory
    return out


@pytest.mark.parametrize(("p", "expected"), [
    pytest.param(pod([ctr("g", rl("100m", "100Mi"), rl("100m", "100Mi"))]), QOS_GUARANTEED, id="guaranteed"),
    pytest.param(pod([ctr("g", rl("100m", "100Mi"), rl("100m", "100Mi")),
                      ctr("g2", rl("100m", "100Mi"), rl("100m", "100Mi"))]), QOS_GUARANTEED,
                 id="guaranteed-guaranteed"),
    pytest.param(pod([ctr("a"), ctr("b")]), QOS_BEST_EFFORT, id="best-effort-best-effort"),
    pytest.param(pod([ctr("a", rl(), rl())]), QOS_BEST_EFFORT, id="best-effort"),
    pytest.param(pod([ctr("a"), ctr("b", rl("1"), rl("2"))]), QOS_BURSTABLE, id="best-effort-burstable"),
    pytest.param(pod([ctr("a"), ctr("b", rl("10m", "100Mi"), rl("10m", "100Mi"))]), QOS_BURSTABLE,
                 id="best-effort-guaranteed"),
    pytest.param(pod([ctr("a", rl(memory="100Mi"), rl(memory="100Mi"))]), QOS_BURSTABLE,
                 id="burstable-cpu-guaranteed-memory"),
    pytest.param(pod([ctr("a", rl("100m", "100Mi"), rl())]), QOS_BURSTABLE, id="burstable-no-limits"),
    pytest.param(pod([ctr("a", rl("1", "100Mi"), rl("2", "100Mi")), ctr("b", rl("100m", "100Mi"), rl("100m", "100Mi"))]),
                 QOS_BURSTABLE, id="burstable-guaranteed"),
    pytest.param(pod([ctr("a", rl("100m", "100Mi"), rl("200m", "200Mi")), ctr("b", rl("100m", "100Mi"), rl())]),
                 QOS_BURSTABLE, id="burstable-unbounded-but-requests-match-limits"),
    pytest.param(pod([ctr("a", rl("10m", "100Mi"), rl("100m", "200Mi"))]), QOS_BURSTABLE, id="burstable-1"),
    pytest.param(pod([ctr("a", rl("0", "0"), rl("100m", "200Mi"))]), QOS_BURSTABLE, id="burstable-2"),
    pytest.param(pod([ctr("a", {**rl("0", "0"), HP2: "1Gi"}, {**rl("0", "0"), HP2: "1Gi"})]), QOS_BEST_EFFORT,
                 id="best-effort-hugepages"),
    pytest.param(pod([ctr("a")], init=[ctr("i", rl("10m", "100Mi"), rl("100m", "200Mi"))]), QOS_BURSTABLE,
                 id="init-container"),
    pytest.param(pod([ctr("a")], pod_requests_=rl("10m", "100Mi"), pod_limits=rl("10m", "100Mi")), QOS_GUARANTEED,
                 id="guaranteed-with-pod-level-resources"),
    pytest.param(pod([ctr("a", rl("3m", "10Mi"), rl("5m", "20Mi"))], pod_requests_=rl("10m", "100Mi"),
                     pod_limits=rl("10m", "100Mi")), QOS_GUARANTEED,
                 id="guaranteed-with-pod-and-container-level-resources"),
    pytest.param(pod([ctr("a")], pod_requests_=rl("10m", "10Mi"), pod_limits=rl("20m", "50Mi")), QOS_BURSTABLE,
                 id="burstable-with-pod-level-resources"),
    pytest.param(pod([ctr("a", rl("5m", "10Mi"), rl("5m", "10Mi"))], pod_requests_=rl("10m", "10Mi"),
                     pod_limits=rl("20m", "50Mi")), QOS_BURSTABLE,
                 id="burstable-with-pod-and-container-level-resources"),
    pytest.param(pod([ctr("a", rl("5m", "10Mi"), rl())], pod_requests_=rl("10m", "10Mi"), pod_limits=rl()),
                 QOS_BURSTABLE, id="burstable-with-pod-and-container-level-requests"),
    pytest.param(pod([ctr("a", rl("5m", "10Mi"), rl()), ctr("b", rl("5m", "10Mi"), rl("5m", "10Mi"))],
                     pod_requests_=rl("10m", "10Mi"), pod_limits=rl("5m")), QOS_BURSTABLE,
                 id="burstable-with-pod-and-container-level-resources-2"),
    # Limits only: the request defaults to the limit, so this is Guaranteed.
    pytest.param(pod([ctr("a", None, rl("1", "1Gi"))]), QOS_GUARANTEED, id="limits-only"),
    # Pod-level resources naming neither cpu nor memory leave QoS to the containers.
    pytest.param(pod([ctr("a", rl("1", "1Gi"), rl("1", "1Gi"))], pod_requests_={"ephemeral-storage": "1Gi"}),
                 QOS_GUARANTEED, id="pod-level-ephemeral-storage-only"),
])
def test_qos_class(p: Pod, expected: str) -> None:
    assert qos_class(p) == expected


# ---------------------------------------------------------------- resource names


@pytest.mark.parametrize(("name", "hp", "ext", "scalar"), [
    ("cpu", False, False, False),
    ("memory", False, False, False),
    ("ephemeral-storage", False, False, False),
    ("hugepages-2Mi", True, False, True),
    ("hugepages-1Gi", True, False, True),
    ("nvidia.com/gpu", False, True, True),
    ("example.com/foo", False, True, True),
    ("kubernetes.io/something", False, False, False),
    ("requests.example.com/foo", False, False, False),
    ("attachable-volumes-aws-ebs", False, False, True),
])
def test_resource_name_classes(name: str, hp: bool, ext: bool, scalar: bool) -> None:
    assert is_hugepages(name) is hp
    assert is_extended_resource(name) is ext
    assert is_scalar_resource(name) is scalar


_REQ = st.fixed_dictionaries({}, optional={
    "cpu": st.sampled_from(["0", "1m", "100m", "2"]), "memory": st.sampled_from(["0", "1Mi", "200Mi", "1Gi"]),
    "nvidia.com/gpu": st.sampled_from(["0", "1", "2"])})


@settings(max_examples=150, deadline=None)
@given(containers=st.lists(st.one_of(st.none(), _REQ), min_size=1, max_size=3),
       overhead=st.one_of(st.none(), st.fixed_dictionaries({"cpu": st.sampled_from(["10m", "250m"])})))
def test_shortcuts_agree_with_the_general_rule(containers: list[dict[str, Any] | None],
                                               overhead: dict[str, Any] | None) -> None:
    """Pods without init containers or pod-level resources take shortcuts; they give what the
    general rule (sum of containers, the max with each init container, plus overhead) gives,
    which an init container that requests nothing leaves unchanged."""
    cs = [ctr(f"c{i}", requests=r) for i, r in enumerate(containers)]
    plain = pod(cs, overhead=overhead)
    general = pod(cs, init=[ctr("i", requests={"cpu": "0"})], overhead=overhead)
    assert pod_requests(plain) == pod_requests(general)
    # An init container without requests takes the defaults for non-zero requests: compare
    # with sums computed by hand instead (a named request counts as is, even 0).
    def nz(name: str, default: int) -> int:
        return sum(resource_units(name, r[name]) if r and name in r else default for r in containers)

    cpu = nz("cpu", DEFAULT_MILLI_CPU_REQUEST)
    mem = nz("memory", DEFAULT_MEMORY_REQUEST)
    if overhead:
        cpu += resource_units("cpu", overhead["cpu"])
    assert pod_non_zero_requests(plain) == (cpu, mem)
