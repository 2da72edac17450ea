"""The GPU-share device plugin as an admit handler: a pod runs on exactly the GPUs recorded on it,
and only where they still have the share it asks for."""

from __future__ import annotations

from typing import Any

import pytest

from ksched.kubelet.gpushare import GpuShareAdmitHandler
from ksched.kubelet.lifecycle import PodAdmitAttributes
from ksched.testing import make_node, make_pod


def _node(gpus: int = 2) -> Any:
    return make_node("n1", cpu="32", memory="256Gi", allocatable={"alibabacloud.com/gpu-count": gpus},
                     labels={"alibabacloud.com/gpu-card-model": "T4"})


def _pod(name: str, milli: int | str, count: int | str = 1, index: str | None = None) -> Any:
    ann = {"alibabacloud.com/gpu-milli": str(milli), "alibabacloud.com/gpu-count": str(count)}
    if index is not None:
        ann["alibabacloud.com/gpu-index"] = index
    return make_pod(name, requests={"cpu": "1"}, annotations=ann, node_name="n1")


@pytest.mark.parametrize(("pod", "others", "message"), [
    (_pod("a", 500, index="0"), [_pod("b", 500, index="0")], None),
    (_pod("a", 600, index="0"), [_pod("b", 500, index="0")],
     "Allocate failed due to GPU 0 of node n1 has 500 milli-GPU free, 600 requested, which is unexpected"),
    (_pod("a", 1000, 2, index="0-1"), [], None),
    (_pod("a", 1000, 2, index="0-1"), [_pod("b", 100, index="1")],
     "Allocate failed due to GPU 1 of node n1 has 900 milli-GPU free, 1000 requested, which is unexpected"),
    (_pod("a", 300, index="2"), [], "Allocate failed due to GPU index 2 not on node n1 (2 GPUs), which is unexpected"),
    (_pod("a", 300), [], None),  # placed without the GpuShare plugin: nothing recorded, admitted
    (_pod("a", 1000, 2, index="0-0"), [], "Allocate failed due to alibabacloud.com/gpu-index='0-0' naming 1 "
                                          "distinct GPU(s) for a request of 2, which is unexpected"),
    (_pod("a", "x", index="0"), [], 'Allocate failed due to pod default/a: annotation alibabacloud.com/gpu-milli="x" '
                                    'is not an integer, which is unexpected'),
    # Other pods' malformed annotations hold nothing; pods without GPUs are not this plugin's.
    (_pod("a", 1000, index="1"), [_pod("b", "x", index="1")], None),
    (make_pod("cpu-only", requests={"cpu": "1"}), [_pod("b", 1000, 2, index="0-1")], None),
])
def test_admission(pod: Any, others: list[Any], message: str | None) -> None:
    got = GpuShareAdmitHandler(_node).admit(PodAdmitAttributes(pod, tuple(others)))
    if message is None:
        assert got.admit, got
    else:
        assert (got.admit, got.reason, got.message) == (False, "UnexpectedAdmissionError", message)


def test_the_kubelet_runs_gpu_pods_on_their_recorded_gpus_and_refuses_an_over_commit() -> None:
    """Two pods with spec.nodeName (no scheduler, so nothing checked the shares) ask for 600
    milli of GPU 0: the first runs, the second is refused by the node's GPU-share plugin."""
    from api_objects import mknode, mkpod
    from ksched.api.pod import Pod
    from ksched.sim.simulation import Simulation

    node = mknode("n1")
    node["metadata"]["labels"] = {"alibabacloud.com/gpu-card-model": "T4"}
    node["status"]["capacity"] = {"cpu": "8", "memory": "8Gi", "pods": "110", "alibabacloud.com/gpu-count": "2"}
    node["status"]["allocatable"]["alibabacloud.com/gpu-count"] = "2"

    def gpu_pod(name: str, index: str | None) -> dict[str, Any]:
        raw = mkpod(name, **({"nodeName": "n1"} if index is not None else {}))
        ann = {"alibabacloud.com/gpu-milli": "600", "alibabacloud.com/gpu-count": "1"}
        if index is not None:
            ann["alibabacloud.com/gpu-index"] = index
        raw["metadata"]["annotations"] = ann
        return raw

    sim = Simulation(seed=1)
    sim.load([node, gpu_pod("a", "0"), gpu_pod("b", "0")])
    sim.run()
    a, b = (sim.store.get("Pod", "default", n) for n in ("a", "b"))
    assert isinstance(a, Pod) and isinstance(b, Pod)
    assert a.phase == "Running"
    st = b.raw["status"]
    assert (st["phase"], st["reason"]) == ("Failed", "UnexpectedAdmissionError")
    assert st["message"] == ("Pod was rejected: Allocate failed due to GPU 0 of node n1 has 400 milli-GPU free, "
                             "600 requested, which is unexpected")
