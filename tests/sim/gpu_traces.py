"""Small synthetic GPU traces for the replay and comparison tests (written by the tests)."""

from __future__ import annotations

import random
from pathlib import Path

from ksched.api.gpu import GpuRequest
from ksched.sim.trace import TraceNode, TracePod

OPENB = Path(__file__).resolve().parents[3] / "shared" / "data" / "openb"


def synthetic(n_nodes: int = 12, n_pods: int = 80, seed: int = 3, times: bool = False) -> tuple[list[TraceNode],
                                                                                                list[TracePod]]:
    rnd = random.Random(seed)
    nodes = []
    for i in range(n_nodes):
        g = rnd.choice([0, 1, 2, 4, 8])
        nodes.append(TraceNode(f"node-{i:02d}", rnd.choice([32000, 64000, 96000]), 262144, g,
                               rnd.choice(["T4", "G2", "P100"]) if g else ""))
    pods = []
    t = 0.0
    for i in range(n_pods):
        k = rnd.random()
        if k < 0.2:
            g = None
        elif k < 0.7:
            g = GpuRequest.make(rnd.choice([100, 250, 500, 700]), 1, rnd.choice([None, None, "T4", "G2|P100"]))
        else:
            g = GpuRequest.make(1000, rnd.choice([1, 1, 2, 4]), rnd.choice([None, None, "G2"]))
        t += rnd.uniform(0, 10)
        pods.append(TracePod(f"pod-{i:03d}", rnd.choice([1000, 2000, 4000, 8000]), rnd.choice([1024, 4096, 16384]),
                             g, t if times else None, t + rnd.uniform(5, 200) if times else None))
    return nodes, pods


def write_csv(nodes: list[TraceNode], pods: list[TracePod], d: Path) -> tuple[Path, Path]:
    """openb-style CSVs."""
    nf = d / "nodes.csv"
    nf.write_text("sn,cpu_milli,memory_mib,gpu,model\n" +
                  "".join(f"{n.name},{n.cpu_milli},{n.memory_mib},{n.gpus},{n.model or 'nan'}\n" for n in nodes))
    pf = d / "pods.csv"
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time"]
    for p in pods:
        g = p.gpu
        rows.append(f"{p.name},{p.cpu_milli},{p.memory_mib},{g.count if g else 0},{g.milli if g else 0},"
                    f"{g.models_text if g else ''},{'' if p.arrival is None else p.arrival},"
                    f"{'' if p.departure is None else p.departure}")
    pf.write_text("\n".join(rows) + "\n")
    return nf, pf
