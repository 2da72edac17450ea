"""The real kubectl against the embedded API server with the new kinds: a CRD applied, waited for
(``condition=established``) and its custom resources applied, listed by short name and category,
refused with the schema's errors; RBAC manifests of a deployment; Services, ConfigMaps and
LimitRanges; and a ``kubectl get ... -A -o yaml`` dump that ``ksched simulate`` re-simulates with
every bound pod on its node."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import node, pod, wait_for

from ksched.apiserver.http import ApiServer
from ksched.apiserver.kubeconfig import write_kubeconfig
from ksched.cli.main import main
from ksched.clock import RealClock
from ksched.sim.cluster import EmbeddedCluster

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}
        self.env.pop("KUBERNETES_SERVICE_HOST", None)

    def run(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        cp = subprocess.run([KUBECTL, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=60)
        if check and cp.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}")
        return cp

    def apply(self, *objs: dict[str, Any]) -> str:
        return self.run("apply", "-f", "-", stdin=yaml.safe_dump_all(objs)).stdout


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedCluster, Kubectl]]:
    d = tmp_path_factory.mktemp("kinds")
    c = EmbeddedCluster(RealClock(), synchronous=False)
    c.start()
    server = ApiServer(c.store, "127.0.0.1", 0)
    server.start()
    try:
        yield c, Kubectl(write_kubeconfig(d / "kubeconfig", server.url), d)
    finally:
        server.stop()
        c.stop()


CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"], "categories": ["all"]},
                "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object", "required": ["size"], "properties": {
                                      "size": {"type": "integer", "maximum": 10},
                                      "color": {"type": "string", "enum": ["red", "blue"], "default": "red"}}},
                                  "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}},
                             {"name": "v1beta1", "served": True, "storage": False, "schema": {"openAPIV3Schema": {
                                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def test_an_operators_crd_and_custom_resources(kubectl: tuple[EmbeddedCluster, Kubectl]) -> None:
    c, k = kubectl
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created" in k.apply(CRD)
    k.run("wait", "--for", "condition=established", "--timeout=20s", "crd/widgets.example.com")
    # kubectl asks for strict field validation: a field the schema does not know is refused...
    cp = k.run("apply", "-f", "-", check=False, stdin=yaml.safe_dump(widget("w1", size=3, extra="pruned")))
    assert cp.returncode != 0 and ('Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
                                   'unknown field "spec.extra"') in cp.stderr
    # ... or, with --validate=warn, dropped with a warning; the schema's defaults are filled in.
    cp = k.run("apply", "--validate=warn", "-f", "-", stdin=yaml.safe_dump(widget("w1", size=3, extra="pruned")))
    assert "widget.example.com/w1 created" in cp.stdout and 'unknown field "spec.extra"' in cp.stderr
    got = json.loads(k.run("get", "wd", "w1", "-o", "json").stdout)
    assert got["spec"] == {"size": 3, "color": "red"}
    k.apply(widget("w1", size=3))  # the dropped field leaves the last-applied configuration
    assert "widget.example.com/w1 unchanged" in k.apply(widget("w1", size=3))
    assert "size\t<integer> -required-" in k.run("explain", "widget.spec").stdout
    assert "widget.example.com/w1" in k.run("get", "all", "-o", "name").stdout
    beta = json.loads(k.run("get", "widgets.v1beta1.example.com", "w1", "-o", "json").stdout)
    assert beta["apiVersion"] == "example.com/v1beta1"
    cp = k.run("apply", "-f", "-", check=False, stdin=yaml.safe_dump(widget("w2", size=30, color="pink")))
    assert cp.returncode != 0
    assert 'spec.color: Unsupported value: "pink": supported values: "red", "blue"' in cp.stderr
    assert "spec.size: Invalid value: 30: spec.size in body should be less than or equal to 10" in cp.stderr
    k.run("patch", "widget", "w1", "--subresource=status", "--type=merge", "-p", '{"status":{"phase":"Ready"}}')
    assert c.store.get("Widget", "default", "w1").raw["status"] == {"phase": "Ready"}
    k.run("delete", "crd", "widgets.example.com")
    assert c.store.scheme.resolve("Widget") is None
    cp = k.run("get", "widgets", check=False)
    assert cp.returncode != 0


def test_deployment_manifests_with_rbac_services_and_config(kubectl: tuple[EmbeddedCluster, Kubectl]) -> None:
    c, k = kubectl
    objs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "op"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op", "namespace": "op"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "op:manager"},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                   {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "op:manager"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "op:manager"},
         "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "op"}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "leader", "namespace": "op"},
         "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "leader", "namespace": "op"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "leader"},
         "subjects": [{"kind": "ServiceAccount", "name": "op"}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "op"}, "data": {"a": "b"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics", "namespace": "op"},
         "spec": {"selector": {"app": "op"}, "ports": [{"name": "https", "port": 8443, "targetPort": "https"}]}},
    ]
    out = k.apply(*objs)
    for ref in ("namespace/op created", "serviceaccount/op created",
                "clusterrole.rbac.authorization.k8s.io/op:manager created",
                "clusterrolebinding.rbac.authorization.k8s.io/op:manager created",
                "role.rbac.authorization.k8s.io/leader created", "rolebinding.rbac.authorization.k8s.io/leader created",
                "configmap/cfg created", "service/metrics created"):
        assert ref in out, out
    again = k.apply(*objs)
    assert "created" not in again and "configured" not in again, again
    wait_for(lambda: c.store.try_get("ServiceAccount", "op", "default") is not None, timeout=10,
             what="the serviceaccount controller")
    svc = json.loads(k.run("get", "svc", "metrics", "-n", "op", "-o", "json").stdout)
    assert svc["spec"]["clusterIP"].startswith("10.96.") and svc["spec"]["ports"][0]["protocol"] == "TCP"
    cp = k.run("run", "nope", "-n", "op", "--image=x", "--overrides", '{"spec":{"serviceAccountName":"ghost"}}',
               check=False)
    assert 'error looking up service account op/ghost: serviceaccount "ghost" not found' in cp.stderr


def test_a_kubectl_dump_resimulates_with_bound_pods_in_place(kubectl: tuple[EmbeddedCluster, Kubectl],
                                                             tmp_path: Path) -> None:
    c, k = kubectl
    k.apply(node("dump-n1", cpu="2"), node("dump-n2", cpu="2"))
    for i in range(3):
        k.apply(pod(f"dump-{i}", cpu="700m"))
        c.store.bind("default", f"dump-{i}", f"dump-n{i % 2 + 1}")
    k.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "dump-high"},
             "value": 5})
    dump = tmp_path / "dump.yaml"
    # A fresh discovery cache: an earlier test deleted a CRD whose kind was in the "all" category.
    dump.write_text(k.run("get", "all,nodes,pc,pdb,pv,pvc,sc", "-A", "-o", "yaml", "--cache-dir",
                          str(tmp_path / "cache")).stdout)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["simulate", str(dump), "--format", "json", "--quiet"])
    assert rc == 0, err.getvalue()
    placed = {p["name"]: p for p in json.loads(out.getvalue())["pods"]}
    for i in range(3):
        assert placed[f"dump-{i}"]["node"] == f"dump-n{i % 2 + 1}" and placed[f"dump-{i}"]["attempts"] == 0
