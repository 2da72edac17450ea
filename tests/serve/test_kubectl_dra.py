"""The real kubectl lists the DRA kinds of ``ksched serve`` with upstream's columns
(printers.go: printDeviceClass, printResourceClaim with resourceClaimState,
printResourceClaimTemplate, printResourceSlice)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ksched.apiserver.http import ApiServer
from ksched.apiserver.kubeconfig import write_kubeconfig
from ksched.apiserver.store import Store

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
DRV = "gpu.example.com"


@pytest.fixture
def kubectl(tmp_path: Path) -> Iterator[tuple[Store, dict[str, str]]]:
    store = Store()
    server = ApiServer(store, "127.0.0.1", 0)
    server.start()
    try:
        kc = write_kubeconfig(tmp_path / "kubeconfig", server.url)
        env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(kc)}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        yield store, env
    finally:
        server.stop()


def run(env: dict[str, str], *args: str) -> list[list[str]]:
    assert KUBECTL is not None
    cp = subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    return [line.split() for line in cp.stdout.splitlines() if line.strip()]


def claim(name: str) -> dict[str, object]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name,
                                                                                     "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}


def test_kubectl_get_lists_the_dra_kinds_with_upstreams_columns(kubectl: tuple[Store, dict[str, str]]) -> None:
    store, env = kubectl
    store.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                  "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRV}"'}}]}})
    store.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
                  "spec": {"driver": DRV, "nodeName": "n1", "pool": {"name": "n1", "generation": 1,
                                                                     "resourceSliceCount": 1},
                           "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}})
    store.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": "one-gpu", "namespace": "default"},
                  "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}})
    store.create(claim("waiting"))
    store.create(claim("allocated"))
    store.create(claim("in-use"))
    allocation = {"devices": {"results": [{"request": "gpu", "driver": DRV, "pool": "n1", "device": "gpu-0"}]}}
    for name, reserved in (("allocated", []), ("in-use", [{"resource": "pods", "name": "p", "uid": "u-1"}])):
        raw = store.get("ResourceClaim", "default", name).deepcopy_raw()
        raw["status"] = {"allocation": allocation, **({"reservedFor": reserved} if reserved else {})}
        store.update_status(raw)

    assert [r[:-1] for r in run(env, "get", "deviceclasses")] == [["NAME"], ["gpu"]]
    assert run(env, "get", "deviceclasses")[0] == ["NAME", "AGE"]
    slices = run(env, "get", "resourceslices")
    assert slices[0] == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    assert slices[1][:4] == ["n1-gpu", "n1", DRV, "n1"]
    claims = run(env, "get", "resourceclaims")
    assert claims[0] == ["NAME", "STATE", "AGE"]
    assert {r[0]: r[1] for r in claims[1:]} == {"allocated": "allocated", "in-use": "allocated,reserved",
                                                "waiting": "pending"}
    templates = run(env, "get", "resourceclaimtemplates")
    assert templates[0] == ["NAME", "AGE"] and templates[1][0] == "one-gpu"
    # Several kinds at once, as kubectl prints them (a header per kind, names qualified).
    both = run(env, "get", "resourceclaims,deviceclasses,resourceslices")
    names = [r[0] for r in both if r[0] != "NAME"]
    assert names == ["resourceclaim.resource.k8s.io/allocated", "resourceclaim.resource.k8s.io/in-use",
                     "resourceclaim.resource.k8s.io/waiting", "deviceclass.resource.k8s.io/gpu",
                     "resourceslice.resource.k8s.io/n1-gpu"]
