"""The DRA GPU cluster of examples/dra-gpu through ``ksched simulate``: training pods get four
GPUs on one NUMA node, H100s first and A100s once the H100s are gone (a prioritized list with
matchAttribute); fine-tuning pods one A100 each; inference replicas share the L40S GPUs by
memory (consumable capacity rounded up to the 16Gi step) until the GPUs are full, and the one
left over is unschedulable with kube-scheduler's message. The JSON report lists the claims and
the table shows them."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

from ksched.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dra-gpu"
NUMA = {f"gpu-{i}": 0 if i < 4 else 1 for i in range(8)}  # the H100 nodes' numa lists


def simulate(*extra: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["simulate", str(EXAMPLE), "--quiet", *extra])
    return rc, out.getvalue()


def test_the_dra_gpu_example_places_every_claim_as_its_template_asks() -> None:
    rc, out = simulate("--format", "json")
    assert rc == 0
    report: dict[str, Any] = json.loads(out)
    pods = {p["name"]: p for p in report["pods"]}
    claims = {c["name"].rsplit("-", 1)[0]: c for c in report["resourceClaims"]}
    assert report["summary"] == {"pods": 15, "scheduled": 14, "unschedulable": 1, "pending": 1, "seconds": 0.0}
    # Every allocated claim is on its pod's node and reserved for it alone.
    for name, pod in pods.items():
        claim = next(c for k, c in claims.items() if k.startswith(name + "-"))
        assert claim["node"] == pod["node"]
        assert claim["reservedFor"] == ([name] if pod["node"] else [])
    # Training: four H100s while they last (two nodes x two NUMA halves), then four A100s.
    trains = [claims[f"train-{i}-gpus"] for i in range(5)]
    for c in trains[:4]:
        assert c["node"].startswith("h100-") and {d["request"] for d in c["devices"]} == {"gpus/h100"}
        assert len(c["devices"]) == 4 and len({NUMA[d["device"]] for d in c["devices"]}) == 1
    assert Counter(c["node"] for c in trains[:4]) == {"h100-0": 2, "h100-1": 2}
    assert trains[4]["node"].startswith("a100-") and len(trains[4]["devices"]) == 4
    assert {d["request"] for d in trains[4]["devices"]} == {"gpus/a100"}
    # Fine-tuning: one A100 each, on the A100 node the training pod left free, distinct GPUs.
    tunes = [claims[f"finetune-{i}-gpu"] for i in range(3)]
    other_a100 = ({"a100-0", "a100-1"} - {trains[4]["node"]}).pop()
    assert {c["node"] for c in tunes} == {other_a100}
    assert len({c["devices"][0]["device"] for c in tunes}) == 3
    # Inference: 12Gi rounded up to 16Gi; three slices per 48Gi L40S, two GPUs, one replica left.
    infers = [claims[f"infer-{i}-gpu"] for i in range(7)]
    placed = [c for c in infers if c["allocated"]]
    assert len(placed) == 6 and all(c["node"] == "l40s-0" for c in placed)
    assert all(c["devices"][0]["consumedCapacity"] == {"memory": "16Gi"} and c["devices"][0]["shareID"]
               for c in placed)
    assert Counter(c["devices"][0]["device"] for c in placed) == {"gpu-0": 3, "gpu-1": 3}
    assert len({c["devices"][0]["shareID"] for c in placed}) == 6
    left = next(p for p in pods.values() if p["node"] is None)
    assert left["name"].startswith("infer-") and left["reason"] == "Unschedulable"
    assert left["message"] == ("0/5 nodes are available: 5 cannot allocate all claims. still not schedulable, "
                               "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.")


def test_explain_says_why_the_left_over_replica_got_no_slice() -> None:
    rc, out = simulate("--format", "json", "--explain")
    assert rc == 0
    claim = next(c for c in json.loads(out)["resourceClaims"] if not c["allocated"])
    verdicts = claim["explain"]["nodes"]["l40s-0"]
    assert [v["device"] for v in verdicts] == ["gpu.ksched.io/l40s-0/gpu-0", "gpu.ksched.io/l40s-0/gpu-1"]
    assert all(v["verdict"].startswith("gpu: not enough memory left: 0 of ") for v in verdicts)


def test_the_table_shows_the_resource_claims() -> None:
    rc, out = simulate()
    assert rc == 0
    assert "Resource claims" in out and "(shared)" in out and "pending" in out
