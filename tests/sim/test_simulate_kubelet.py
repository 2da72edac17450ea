"""``ksched simulate`` with the node side: examples/kubelet/node-pressure.yaml and its
KubeletConfiguration (--kubelet-config): the soft threshold's grace period, then the hard
threshold, evict BestEffort then Burstable-over-request pods with upstream's messages; the
report gives the kubelet's reason; a bad configuration is refused with its file and field."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from ksched.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kubelet"


def simulate(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["simulate", *args, "--quiet"])
    return rc, out.getvalue(), err.getvalue()


def test_node_pressure_example() -> None:
    rc, out, _ = simulate(str(EXAMPLES / "node-pressure.yaml"), "--kubelet-config",
                          str(EXAMPLES / "kubelet-config.yaml"), "--format", "json")
    assert rc == 0
    report: dict[str, Any] = json.loads(out)
    pods = {p["name"]: (p["phase"], p["reason"], p["message"]) for p in report["pods"]}
    assert pods["best-effort"] == (
        "Failed", "Evicted", "The node was low on resource: memory. Threshold quantity: 300Mi, available: 160Mi. "
        "Container app was using 1440Mi, request is 0, has larger consumption of memory. ")
    assert pods["burstable-over"] == (
        "Failed", "Evicted", "The node was low on resource: memory. Threshold quantity: 100Mi, available: -400Mi. "
        "Container app was using 3000Mi, request is 500Mi, has larger consumption of memory. ")
    assert pods["burstable-under"][0] == pods["guaranteed"][0] == "Running"
    # ends when the pressure condition has cleared: 5 min after the last pass that saw it (600 s)
    assert report["summary"]["seconds"] == 905.0


def test_without_the_configuration_upstreams_defaults_apply() -> None:
    rc, out, _ = simulate(str(EXAMPLES / "node-pressure.yaml"), "--format", "json")
    assert rc == 0
    pods = {p["name"]: p for p in json.loads(out)["pods"]}
    assert pods["best-effort"]["message"].startswith(
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: ")


def test_a_bad_kubelet_configuration_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "kc.yaml"
    bad.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                   "evictionSoft: {memory.available: 1Gi}\n")
    rc, _, err = simulate(str(EXAMPLES / "node-pressure.yaml"), "--kubelet-config", str(bad))
    assert rc == 2
    assert f"{bad}: document 1.evictionSoftGracePeriod: grace period must be specified for the soft eviction " \
           "threshold memory.available" in err.replace("\n", "")
    rc, _, err = simulate(str(EXAMPLES / "node-pressure.yaml"), "--kubelet-config", str(tmp_path / "missing.yaml"))
    assert rc == 2 and "missing.yaml" in err
