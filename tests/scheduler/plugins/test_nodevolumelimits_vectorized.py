"""NodeVolumeLimits' vectorized form (per-row attached counts kept across cycles) agrees with
the per-node form, on random clusters backed by real informers, as volumes and pods change."""

from __future__ import annotations

import random

import pytest

from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.client.informer import InformerFactory
from ksched.clock import VirtualClock
from ksched.testing import PluginRunner, make_node, make_pod

DRIVERS = ("ebs.csi.aws.com", "disk.csi.example.com")


def _pv(name: str, driver: str, handle: str, claim: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                     "claimRef": {"namespace": "default", "name": claim},
                     "csi": {"driver": driver, "volumeHandle": handle}}}


def _pvc(name: str, pv: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv,
                     "resources": {"requests": {"storage": "1Gi"}}}}


@pytest.mark.parametrize("seed", range(8))
def test_vectorized_and_per_node_agree(seed: int) -> None:
    rng = random.Random(seed)
    store = Store(VirtualClock(), auto_create_namespaces=True)
    informers = InformerFactory(InProcessClient(store))
    n_nodes = rng.randint(3, 8)
    nodes = [make_node(f"n{i}") for i in range(n_nodes)]
    for i in range(n_nodes):
        if rng.random() < 0.8:
            store.create({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": f"n{i}"},
                          "spec": {"drivers": [{"name": d, "nodeID": f"n{i}", "allocatable": {"count": rng.randint(1, 4)}}
                                               for d in DRIVERS if rng.random() < 0.8]}})
    n_vols = rng.randint(4, 14)
    for v in range(n_vols):
        store.create(_pv(f"pv{v}", rng.choice(DRIVERS), f"h{v}", f"c{v}"))
        store.create(_pvc(f"c{v}", f"pv{v}"))
    informers.poll()
    pods = []
    for k in range(rng.randint(2, 12)):
        vols = [{"name": f"v{j}", "persistentVolumeClaim": {"claimName": f"c{c}"}}
                for j, c in enumerate(rng.sample(range(n_vols), rng.randint(1, 3)))]
        pods.append(make_pod(f"e{k}", node_name=f"n{rng.randrange(n_nodes)}", volumes=vols))
    runner = PluginRunner(["NodeVolumeLimits"], nodes, pods, informers=informers)
    informers.poll()  # the plugin's informers were created with it: fill them
    plugin = runner.fw.plugins["NodeVolumeLimits"]
    vectorized = 0
    for _ in range(5):
        vols = [{"name": f"v{j}", "persistentVolumeClaim": {"claimName": f"c{c}"}}
                for j, c in enumerate(rng.sample(range(n_vols), rng.randint(1, 3)))]
        incoming = make_pod("incoming", volumes=vols)
        state, _, st = runner.pre_filter(incoming)
        assert st is None
        snap = runner.snapshot
        mask = plugin.filter_nodes(state, incoming, snap, snap.order)
        vectorized += plugin._rows is not None
        per = [plugin.filter(state, incoming, ni) is None for ni in snap.all_nodes()]
        assert mask.tolist() == per
        # Change the cluster: a pod lands somewhere (the node's row changes).
        extra = make_pod(f"x{rng.random()}", node_name=f"n{rng.randrange(n_nodes)}", volumes=vols)
        runner.cache.add_pod(extra)
        runner.refresh()
    assert plugin._reuse and vectorized  # the vectorized path (not the per-node fallback) was exercised
