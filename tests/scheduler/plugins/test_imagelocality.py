"""ImageLocality, with the cases of upstream's image_locality_test.go (1.36: init containers count)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.scheduler.plugins.imagelocality import (
    MAX_CONTAINER_THRESHOLD,
    MB,
    MIN_THRESHOLD,
    ImageLocality,
    calculate_priority,
    normalized_image_name,
)
from ksched.testing import PluginRunner, make_node, make_pod

ImageList = list[tuple[Sequence[str], int]]

NODE_40_300_2000: ImageList = [(["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
                               (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
                               (["gcr.io/2000:latest"], 2000 * MB)]
NODE_250_10: ImageList = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
NODE_600_40_900: ImageList = [(["gcr.io/600:latest"], 600 * MB), (["gcr.io/40:latest"], 40 * MB),
                              (["gcr.io/900:latest"], 900 * MB)]
NODE_300_600_900: ImageList = [(["gcr.io/300:latest"], 300 * MB), (["gcr.io/600:latest"], 600 * MB),
                               (["gcr.io/900:latest"], 900 * MB)]
NODE_4000_30: ImageList = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]
NODE_20_30_40: ImageList = [(["gcr.io/20:latest"], 20 * MB), (["gcr.io/30:latest"], 30 * MB),
                            (["gcr.io/40:latest"], 40 * MB)]
NO_IMAGES: ImageList = []


def pod_with(containers: Sequence[str], init: Sequence[str] = ()) -> Pod:
    return make_pod("p", containers=[{"name": f"c{i}", "image": img} for i, img in enumerate(containers)],
                    init_containers=[{"name": f"i{i}", "image": img} for i, img in enumerate(init)] or None)


CASES = [
    pytest.param(pod_with(["gcr.io/40", "gcr.io/250"]), [NODE_40_300_2000, NODE_250_10], [0, 5],
                 id="two images spread on two nodes, prefer the larger image one"),
    pytest.param(pod_with(["gcr.io/40", "gcr.io/300"]), [NODE_40_300_2000, NODE_250_10], [7, 0],
                 id="two images on one node, prefer this node"),
    pytest.param(pod_with(["gcr.io/10", "gcr.io/4000"]), [NODE_4000_30, NODE_250_10], [100, 0],
                 id="if exceed limit, use limit"),
    pytest.param(pod_with(["gcr.io/10", "gcr.io/4000"]), [NODE_4000_30, NODE_250_10, NO_IMAGES], [66, 0, 0],
                 id="if exceed limit, use limit (with node which has no images present)"),
    pytest.param(pod_with(["gcr.io/300", "gcr.io/600", "gcr.io/900"]),
                 [NODE_600_40_900, NODE_300_600_900, NO_IMAGES], [32, 36, 0],
                 id="pod with multiple large images, node2 is preferred"),
    pytest.param(pod_with(["gcr.io/30", "gcr.io/40"]), [NODE_20_30_40, NODE_4000_30], [1, 0],
                 id="pod with multiple small images"),
    pytest.param(pod_with(["gcr.io/30"], init=["gcr.io/300"]), [NODE_40_300_2000, NODE_20_30_40], [6, 0],
                 id="include InitContainers: two images spread on two nodes, prefer the larger image one"),
]


def nodes_with(images: list[ImageList]) -> list[Node]:
    return [make_node(f"node{i + 1}", images=imgs) for i, imgs in enumerate(images)]


@pytest.mark.parametrize(("pod", "node_images", "expected"), CASES)
def test_score(pod: Pod, node_images: list[ImageList], expected: list[int]) -> None:
    nodes = nodes_with(node_images)
    r = PluginRunner(["ImageLocality"], nodes)
    got = r.score(pod)["ImageLocality"]  # asserts the vectorized and per-node forms agree
    assert got == {f"node{i + 1}": s for i, s in enumerate(expected)}


def fake_digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(("name", "want"), [
    ("root", "root:latest"),
    ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
    ("root:tag", "root:tag"),
    ("root@" + fake_digest("root"), "root@" + fake_digest("root")),
])
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want


def test_calculate_priority_bounds() -> None:
    assert calculate_priority(0, 1) == 0
    assert calculate_priority(MIN_THRESHOLD, 1) == 0
    assert calculate_priority(MAX_CONTAINER_THRESHOLD, 1) == 100
    assert calculate_priority(10 * MAX_CONTAINER_THRESHOLD, 2) == 100
    # 100 * (500M - 23M) / (1000M - 23M), truncated
    assert calculate_priority(500 * MB, 1) == 48


def test_untagged_pod_image_matches_latest_tag_on_node_only() -> None:
    nodes = [make_node("a", images=[(["nginx:latest"], 900 * MB)]), make_node("b", images=[(["nginx:1.25"],
                                                                                          900 * MB)])]
    r = PluginRunner(["ImageLocality"], nodes)
    got = r.score(pod_with(["nginx"]))["ImageLocality"]
    # 900M * 1/2 = 450M on a: 100 * (450M - 23M) / (1000M - 23M) = 43
    assert got == {"a": 43, "b": 0}
    assert r.score(pod_with(["nginx:1.25"]))["ImageLocality"] == {"a": 0, "b": 43}


def test_same_image_in_two_containers_counts_twice() -> None:
    nodes = [make_node("a", images=[(["img:1"], 600 * MB)]), make_node("b", images=[(["img:1"], 600 * MB)])]
    r = PluginRunner(["ImageLocality"], nodes)
    # sum = 2 * 600M (spread 2/2) = 1200M, max = 2000M: 100 * (1200 - 23) / (2000 - 23) = 59
    assert r.score(pod_with(["img:1", "img:1"]))["ImageLocality"] == {"a": 59, "b": 59}


def test_spread_uses_all_nodes_of_the_snapshot() -> None:
    nodes = [make_node(f"n{i}", images=[(["big:1"], 2000 * MB)] if i < 3 else []) for i in range(10)]
    r = PluginRunner(["ImageLocality"], nodes)
    # only score a subset of nodes: the spread is still 3/10 (int(2000M * 0.3) = 600M)
    got = r.score(pod_with(["big:1"]), nodes=["n0", "n5"])["ImageLocality"]
    want = 100 * (int(2000 * MB * (3 / 10)) - MIN_THRESHOLD) // (MAX_CONTAINER_THRESHOLD - MIN_THRESHOLD)
    assert got == {"n0": want, "n5": 0}


def test_image_size_comes_from_the_first_node_reporting_it() -> None:
    nodes = [make_node("a", images=[(["img:1"], 900 * MB)]), make_node("b", images=[(["img:1"], 100 * MB)])]
    r = PluginRunner(["ImageLocality"], nodes)
    # both nodes share one summary (size 900M, 2 nodes): 100 * (900 - 23) / (1000 - 23) = 89
    assert r.score(pod_with(["img:1"]))["ImageLocality"] == {"a": 89, "b": 89}


def test_plugin_has_no_normalize_and_no_events() -> None:
    p = ImageLocality()
    assert getattr(p, "normalize_score", None) is None
    assert not hasattr(p, "events_to_register")


def test_scores_zero_follows_the_nodes_images() -> None:
    """ImageLocality scores 0 everywhere (and says so, to be left out of Score) exactly while no
    node holds any of the pod's images; a node that gains one changes the answer at the next
    snapshot."""
    from ksched.apiserver.inprocess import InProcessClient
    from ksched.apiserver.store import Store
    from ksched.clock import VirtualClock
    from ksched.scheduler.framework.cycle_state import CycleState
    from ksched.scheduler.scheduler import Scheduler

    store = Store(VirtualClock(), auto_create_namespaces=True)
    for i in range(3):
        store.create(make_node(f"n{i}").raw)
    sched = Scheduler(InProcessClient(store), clock=store.clock)
    sched.sync()
    sched.cache.update_snapshot(sched.snapshot)
    plugin = sched.profiles["default-scheduler"].plugins["ImageLocality"]
    state = CycleState()
    big, other = pod_with(["gcr.io/2000"]), pod_with(["gcr.io/250"])
    assert plugin.scores_zero(state, big) and plugin.scores_zero(state, other)
    node = make_node("n1", images=NODE_40_300_2000)  # images are node status
    store.update(node.raw, "status")
    sched.sync()
    sched.cache.update_snapshot(sched.snapshot)
    assert not plugin.scores_zero(state, big)
    assert plugin.scores_zero(state, other)
    scores = plugin.score_nodes(state, big, sched.snapshot, sched.snapshot.order)
    assert scores.tolist() == [0, calculate_priority(2000 * MB // 3, 1), 0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a:1", "b:1", "c", "gcr.io/d:2"]), max_size=3), min_size=1, max_size=5),
       st.lists(st.sampled_from(["a:1", "b:1", "c", "c:latest", "gcr.io/d:2", "e:9"]), min_size=1, max_size=3))
def test_scores_zero_is_no_node_holding_any_image(node_images: list[list[str]], pod_images: list[str]) -> None:
    """scores_zero's set of the images some node holds answers as the per-row lookup it stands
    for (``_present`` on every image of the pod)."""
    from ksched.apiserver.inprocess import InProcessClient
    from ksched.apiserver.store import Store
    from ksched.clock import VirtualClock
    from ksched.scheduler.framework.cycle_state import CycleState
    from ksched.scheduler.scheduler import Scheduler

    store = Store(VirtualClock(), auto_create_namespaces=True)
    for i, imgs in enumerate(node_images):
        store.create(make_node(f"n{i}", images=[(imgs, 300 * MB)] if imgs else ()).raw)
    sched = Scheduler(InProcessClient(store), clock=store.clock)
    sched.sync()
    sched.cache.update_snapshot(sched.snapshot)
    plugin = sched.profiles["default-scheduler"].plugins["ImageLocality"]
    pod = pod_with(pod_images)
    want = not any(ImageLocality._present(sched.snapshot, img).any()
                   for img in (normalized_image_name(i) for i in pod_images))
    assert plugin.scores_zero(CycleState(), pod) == want
