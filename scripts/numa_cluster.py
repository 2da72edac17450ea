"""Write a cluster for measuring what the node resource managers cost in ``ksched simulate``
(docs/benchmarks.md): 500 nodes of 32 CPUs (2 NUMA nodes of 8 cores x 2 threads, 2 GPUs each)
and 2000 Guaranteed pods of 2 CPUs (every fourth with a GPU).

    python scripts/numa_cluster.py cm /tmp/cm.yaml      # nodes with the static CPU manager and single-numa-node
    python scripts/numa_cluster.py plain /tmp/plain.yaml  # the same nodes without (GPUs declared in capacity)
    time ksched simulate /tmp/cm.yaml --quiet --format json > /dev/null
"""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml

LAYOUT = {"sockets": 2, "coresPerNUMANode": 8, "threadsPerCore": 2,
          "devices": [{"resource": "nvidia.com/gpu", "numaNode": 0, "ids": ["g0", "g1"]},
                      {"resource": "nvidia.com/gpu", "numaNode": 1, "ids": ["g2", "g3"]}]}
KUBELET = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node"}


def cluster(with_managers: bool, nodes: int = 500, pods: int = 2000) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for i in range(nodes):
        cap = {"cpu": "32", "memory": "128Gi", "pods": "110"}
        ann = {}
        if with_managers:
            ann = {"ksched.io/topology": json.dumps(LAYOUT), "ksched.io/kubelet-config": json.dumps(KUBELET)}
        else:
            cap["nvidia.com/gpu"] = "4"
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "annotations": ann},
                     "status": {"capacity": cap, "allocatable": {**cap, "cpu": "31"}}})
    for i in range(pods):
        limits = {"cpu": "2", "memory": "1Gi"}
        if i % 4 == 0:
            limits["nvidia.com/gpu"] = "1"
        docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default"},
                     "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": limits}}]}})
    return docs


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("cm", "plain"):
        sys.exit("usage: numa_cluster.py cm|plain OUT.yaml")
    with open(sys.argv[2], "w") as f:
        yaml.safe_dump_all(cluster(sys.argv[1] == "cm"), f)
