"""An informer index lists the keys of one value in the order they were indexed, so a
controller that walks an index (the taint eviction controller queueing a node's pods, the
ReplicaSet controller's siblings, ...) acts in an order that does not depend on string hashing:
the same simulation gives the same outcome under any PYTHONHASHSEED."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from api_objects import mkpod
from ksched.client.informer import Indexer

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_by_index_lists_keys_in_the_order_they_were_indexed() -> None:
    ix = Indexer()
    ix.add_indexer("node", lambda p: [p.node_name] if p.node_name else [])
    from ksched.api.pod import Pod

    names = [f"p{(i * 7919) % 211:03d}" for i in range(60)]  # an order no hash set keeps
    for n in names:
        ix.upsert(Pod.from_dict(mkpod(n, nodeName="n1")))
    assert [p.name for p in ix.by_index("node", "n1")] == names
    # a move to another value puts the key last there; a removal keeps the others' order
    ix.upsert(Pod.from_dict(mkpod(names[0], nodeName="n2")))
    ix.upsert(Pod.from_dict(mkpod(names[1], nodeName="n2")))
    ix.upsert(Pod.from_dict(mkpod(names[0], nodeName="n1")))
    ix.remove(f"default/{names[5]}")
    assert [p.name for p in ix.by_index("node", "n1")] == [n for n in names[2:] if n != names[5]] + [names[0]]
    assert [p.name for p in ix.by_index("node", "n2")] == [names[1]]
    # an index built after the objects are stored lists them in the store's order
    ix.add_indexer("late", lambda p: ["all"])
    assert [p.name for p in ix.by_index("late", "all")] == [p.name for p in ix.list()]


_SCRIPT = """
import json
from ksched.sim.simulation import Simulation
sim = Simulation(seed=1)
node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}}}
pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{(i * 7919) % 211:03d}", "namespace": "default"},
         "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "img"}]}} for i in range(40)]
sim.load([node] + pods)
sim.run(max_seconds=30)
raw = sim.store.get("Node", "", "n1").raw
spec = dict(raw.get("spec") or {}, taints=[{"key": "drain", "value": "now", "effect": "NoExecute"}])
sim.store.update(dict(raw, spec=spec))
sim.run(max_seconds=30)
events = sorted(sim.store.list("Event")[0], key=lambda e: int(e.raw["metadata"]["resourceVersion"]))
print(json.dumps([e.raw["message"] for e in events if e.raw["reason"] == "TaintManagerEviction"]))
"""


def _evictions(hash_seed: str) -> list[str]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=SRC)
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_taint_evictions_of_one_instant_do_not_depend_on_the_hash_seed() -> None:
    first = _evictions("1")
    assert len(first) == 40 and first == _evictions("2")
    created = [f"p{(i * 7919) % 211:03d}" for i in range(40)]
    assert first == [f"Marking for deletion Pod default/{n}" for n in created]
