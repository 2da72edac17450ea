"""The real kubectl against the embedded API server: apply -f (client-side apply), create, get
(-o wide|yaml|json, -w, selectors, chunking), describe pod|node, delete, label, annotate,
cordon, uncordon, taint, and the errors kubectl prints from the server's Status objects."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import node, pod

from ksched.api.event import Event
from ksched.apiserver.http import ApiServer
from ksched.apiserver.kubeconfig import write_kubeconfig
from ksched.apiserver.store import Store
from ksched.apiserver.tls import make_self_signed, server_ssl_context

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (needed to drive it against "
                                                        "ksched serve)")


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}
        self.env.pop("KUBERNETES_SERVICE_HOST", None)

    def run(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        cp = subprocess.run([KUBECTL, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=300)
        if check and cp.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}")
        return cp

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.out(*args, "-o", "json"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Kubectl]]:
    d = tmp_path_factory.mktemp("kubectl")
    store = Store()
    server = ApiServer(store, "127.0.0.1", 0)
    server.start()
    try:
        kc = write_kubeconfig(d / "kubeconfig", server.url)
        yield store, Kubectl(kc, d)
    finally:
        server.stop()


@pytest.fixture
def ns(cluster: tuple[Store, Kubectl], request: pytest.FixtureRequest) -> str:
    """A namespace of the test's own (the server is shared by the module)."""
    store, _ = cluster
    name = request.node.name.replace("_", "-")[:50].strip("-").lower()
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def _yaml(*objs: dict[str, Any]) -> str:
    return yaml.safe_dump_all(objs, sort_keys=False)


def _header(text: str) -> list[str]:
    return text.splitlines()[0].split()


def _rows(text: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in text.splitlines()[1:] if line.strip()}


def test_apply_is_client_side_apply(cluster: tuple[Store, Kubectl], ns: str, tmp_path: Path) -> None:
    store, k = cluster
    f = tmp_path / "app.yaml"
    p = pod("web", ns=ns, labels={"app": "web", "tier": "front"})
    f.write_text(_yaml(node(f"{ns}-n1", labels={"zone": "a"}), p))
    out = k.out("apply", "-f", str(f))
    assert f"node/{ns}-n1 created" in out and "pod/web created" in out
    stored = store.get("Pod", ns, "web")
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored.annotations
    assert store.get("Node", "", f"{ns}-n1").labels == {"zone": "a"}
    out = k.out("apply", "-f", str(f))
    assert f"node/{ns}-n1 unchanged" in out and "pod/web unchanged" in out
    # Change a label and drop another: the three-way merge patch removes what the file no longer has.
    p["metadata"]["labels"] = {"app": "web2"}
    p["metadata"]["annotations"] = {"owner": "me"}
    f.write_text(_yaml(p))
    out = k.out("apply", "-f", str(f))
    assert "pod/web configured" in out
    stored = store.get("Pod", ns, "web")
    assert stored.labels == {"app": "web2"} and stored.annotations["owner"] == "me"
    # Server-side apply is refused with a clear message.
    cp = k.run("apply", "--server-side", "-f", str(f), check=False)
    assert cp.returncode != 0 and "server-side apply is not supported" in cp.stderr


def test_create_and_its_errors(cluster: tuple[Store, Kubectl], ns: str, tmp_path: Path) -> None:
    store, k = cluster
    f = tmp_path / "p.yaml"
    f.write_text(_yaml(pod("a", ns=ns)))
    assert k.out("create", "-f", str(f)).strip() == "pod/a created"
    cp = k.run("create", "-f", str(f), check=False)
    assert cp.returncode == 1
    assert f'Error from server (AlreadyExists): error when creating "{f}": pods "a" already exists' in cp.stderr
    bad = pod("b", ns=ns)
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "a lot"
    f.write_text(_yaml(bad))
    rv = store.resource_version
    cp = k.run("create", "-f", str(f), check=False)
    assert cp.returncode == 1 and "Pod \"b\" is invalid" in cp.stderr
    assert "spec.containers[0].resources.requests" in cp.stderr
    assert store.try_get("Pod", ns, "b") is None and store.resource_version == rv
    cp = k.run("create", "-f", "-", stdin='{"apiVersion": "v1", "kind": "Pod", "metadata": {', check=False)
    assert cp.returncode != 0 and store.resource_version == rv
    cp = k.run("get", "pod", "nope", "-n", ns, check=False)
    assert cp.returncode == 1 and 'Error from server (NotFound): pods "nope" not found' in cp.stderr
    cp = k.run("get", "widgets", check=False)
    assert cp.returncode == 1 and 'the server doesn\'t have a resource type "widgets"' in cp.stderr


def test_get_columns_wide_yaml_json(cluster: tuple[Store, Kubectl], ns: str) -> None:
    store, k = cluster
    n = node(f"{ns}-n1", labels={"node-role.kubernetes.io/worker": ""})
    store.create(n)
    store.create(pod("a", ns=ns, labels={"app": "web"}))
    store.create(pod("b", ns=ns, labels={"app": "db"}))
    store.bind(ns, "a", f"{ns}-n1")
    out = k.out("get", "pods", "-n", ns)
    assert _header(out) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    rows = _rows(out)
    assert rows["a"][1:4] == ["0/1", "Pending", "0"] and set(rows) == {"a", "b"}
    out = k.out("get", "pods", "-n", ns, "-o", "wide")
    assert _header(out) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE",
                            "READINESS", "GATES"]
    rows = _rows(out)
    assert rows["a"][5:] == ["<none>", f"{ns}-n1", "<none>", "<none>"]
    assert rows["b"][5:] == ["<none>", "<none>", "<none>", "<none>"]
    out = k.out("get", "node", f"{ns}-n1", "-o", "wide")
    assert _header(out) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
                            "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    line = out.splitlines()[1]
    assert line.split()[:3] == [f"{ns}-n1", "Ready", "worker"]
    assert "v1.36.0" in line and "10.0.0.1" in line and "Ubuntu 24.04" in line and "containerd://2.0" in line
    # -o yaml / -o json: the stored object.
    got = yaml.safe_load(k.out("get", "pod", "a", "-n", ns, "-o", "yaml"))
    assert got == store.get("Pod", ns, "a").raw
    lst = k.json("get", "pods", "-n", ns)
    assert lst["kind"] == "List" and sorted(i["metadata"]["name"] for i in lst["items"]) == ["a", "b"]
    # Selectors and chunked lists.
    assert list(_rows(k.out("get", "pods", "-n", ns, "-l", "app=web"))) == ["a"]
    assert list(_rows(k.out("get", "pods", "-n", ns, "--field-selector", f"spec.nodeName={ns}-n1"))) == ["a"]
    assert list(_rows(k.out("get", "pods", "-n", ns, "--field-selector", "spec.nodeName="))) == ["b"]
    for i in range(5):
        store.create(pod(f"c{i}", ns=ns))
    out = k.out("get", "pods", "-n", ns, "--chunk-size=2")
    assert sorted(_rows(out)) == ["a", "b", "c0", "c1", "c2", "c3", "c4"]
    assert out.count("NAME") == 1
    names = k.out("get", "pods", "-n", ns, "-o", "name", "--chunk-size=3").split()
    assert len(names) == 7 and "pod/c4" in names


def test_get_watch_streams_changes(cluster: tuple[Store, Kubectl], ns: str) -> None:
    store, k = cluster
    store.create(pod("first", ns=ns))
    assert KUBECTL is not None
    proc = subprocess.Popen([KUBECTL, "get", "pods", "-n", ns, "-w"], env=k.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for ln in proc.stdout:
            lines.put(ln)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    seen: list[str] = []

    def read_until(text: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in ln for ln in seen):
            try:
                seen.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"kubectl get -w: no {text!r} in {seen}") from None

    try:
        read_until("first")
        assert seen[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        store.create(pod("second", ns=ns))
        read_until("second")
        store.create(node(f"{ns}-n"))
        store.bind(ns, "second", f"{ns}-n")
        store.patch("Pod", ns, "second", {"status": {"phase": "Running"}}, subresource="status")
        read_until("Running")
        store.delete("Pod", ns, "first")
        rows = [ln.split() for ln in seen[1:]]
        assert rows[0][:3] == ["first", "0/1", "Pending"] and rows[1][:3] == ["second", "0/1", "Pending"]
        assert rows[-1][:3] == ["second", "0/1", "Running"]
    finally:
        proc.kill()
        proc.wait(10)
        reader.join(5)
        for s in (proc.stdout, proc.stderr):
            if s is not None:
                s.close()


def test_describe_pod_and_node(cluster: tuple[Store, Kubectl], ns: str) -> None:
    store, k = cluster
    nname = f"{ns}-n1"
    n = node(nname, labels={"zone": "a"})
    n["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
    store.create(n)
    store.create(pod("a", ns=ns, labels={"app": "web"}, cpu="500m"))
    store.bind(ns, "a", nname)
    store.create(pod("pending", ns=ns, nodeSelector={"disk": "ssd"}))
    p = store.get("Pod", ns, "pending")
    msg = ("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/1 nodes "
           "are available: 1 Preemption is not helpful for scheduling.")
    store.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "pending.1", "namespace": ns},
                  "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": "pending",
                                     "uid": p.uid},
                  "reason": "FailedScheduling", "message": msg, "type": "Warning", "count": 1,
                  "source": {"component": "default-scheduler"}})
    assert isinstance(store.get("Event", ns, "pending.1"), Event)
    out = k.out("describe", "pod", "pending", "-n", ns)
    assert re.search(r"^Node:\s+<none>$", out, re.M)
    assert re.search(r"^Node-Selectors:\s+disk=ssd$", out, re.M)
    assert re.search(r"^Status:\s+Pending$", out, re.M)
    assert re.search(r"Warning\s+FailedScheduling\s+\S+\s+default-scheduler\s+" + re.escape(msg), out), out
    out = k.out("describe", "pod", "a", "-n", ns)
    assert re.search(rf"^Node:\s+{nname}/$", out, re.M), out
    assert re.search(r"^Labels:\s+app=web$", out, re.M)
    assert re.search(r"^QoS Class:\s+Burstable$", out, re.M)
    assert re.search(r"^\s+PodScheduled\s+True\s*$", out, re.M)
    out = k.out("describe", "node", nname)
    assert re.search(r"^Taints:\s+dedicated=gpu:NoSchedule$", out, re.M), out
    assert re.search(r"^Unschedulable:\s+false$", out, re.M)
    assert re.search(r"^Labels:\s+zone=a$", out, re.M)
    assert re.search(r"^Non-terminated Pods:\s+\(1 in total\)$", out, re.M)
    assert re.search(rf"^\s+{ns}\s+a\s+500m \(12%\)", out, re.M), out
    assert len(re.findall(r"^\s+cpu:\s+4$", out, re.M)) == 2  # capacity and allocatable


def test_label_annotate_delete(cluster: tuple[Store, Kubectl], ns: str, tmp_path: Path) -> None:
    store, k = cluster
    store.create(pod("a", ns=ns, labels={"app": "web"}))
    assert k.out("label", "pod", "a", "-n", ns, "tier=front").strip() == "pod/a labeled"
    assert store.get("Pod", ns, "a").labels == {"app": "web", "tier": "front"}
    cp = k.run("label", "pod", "a", "-n", ns, "tier=back", check=False)
    assert cp.returncode != 0 and "already has a value" in cp.stderr
    k.out("label", "pod", "a", "-n", ns, "tier=back", "--overwrite")
    assert store.get("Pod", ns, "a").labels["tier"] == "back"
    k.out("label", "pod", "a", "-n", ns, "tier-")
    assert store.get("Pod", ns, "a").labels == {"app": "web"}
    assert k.out("annotate", "pod", "a", "-n", ns, "note=hello world").strip() == "pod/a annotated"
    assert store.get("Pod", ns, "a").annotations == {"note": "hello world"}
    k.out("annotate", "pod", "a", "-n", ns, "note-")
    assert store.get("Pod", ns, "a").annotations == {}

    # delete by name, by file, by selector; a bound pod with --grace-period=0 --force.
    assert k.out("delete", "pod", "a", "-n", ns).strip() == 'pod "a" deleted'
    assert store.try_get("Pod", ns, "a") is None
    f = tmp_path / "b.yaml"
    f.write_text(_yaml(pod("b", ns=ns)))
    k.out("create", "-f", str(f))
    assert 'pod "b" deleted' in k.out("delete", "-f", str(f))
    for name in ("c", "d"):
        store.create(pod(name, ns=ns, labels={"group": "x"}))
    out = k.out("delete", "pods", "-n", ns, "-l", "group=x")
    assert 'pod "c" deleted' in out and 'pod "d" deleted' in out
    store.create(node(f"{ns}-n"))
    store.create(pod("bound", ns=ns))
    store.bind(ns, "bound", f"{ns}-n")
    out = k.run("delete", "pod", "bound", "-n", ns, "--grace-period=0", "--force")
    assert 'pod "bound" force deleted' in out.stdout
    assert store.count("Pod") == 0 or all(p.namespace != ns for p in store.items("Pod"))
    cp = k.run("delete", "pod", "bound", "-n", ns, check=False)
    assert cp.returncode == 1 and 'pods "bound" not found' in cp.stderr


def test_cordon_uncordon_taint(cluster: tuple[Store, Kubectl], ns: str) -> None:
    store, k = cluster
    name = f"{ns}-n1"
    store.create(node(name))
    assert k.out("cordon", name).strip() == f"node/{name} cordoned"
    assert store.get("Node", "", name).unschedulable
    rows = _rows(k.out("get", "node", name))
    assert rows[name][1] == "Ready,SchedulingDisabled"
    assert k.out("uncordon", name).strip() == f"node/{name} uncordoned"
    assert not store.get("Node", "", name).unschedulable
    assert k.out("taint", "nodes", name, "gpu=yes:NoSchedule").strip() == f"node/{name} tainted"
    k.out("taint", "nodes", name, "spot=true:PreferNoSchedule")
    taints = store.get("Node", "", name).raw["spec"]["taints"]
    assert sorted((t["key"], t.get("value"), t["effect"]) for t in taints) == [
        ("gpu", "yes", "NoSchedule"), ("spot", "true", "PreferNoSchedule")]
    k.out("taint", "nodes", name, "gpu:NoSchedule-")
    taints = store.get("Node", "", name).raw["spec"].get("taints") or []
    assert [t["key"] for t in taints] == ["spot"]
    k.out("taint", "nodes", name, "spot-")
    assert not store.get("Node", "", name).raw["spec"].get("taints")
    # The node's status (capacity the kubelet reported) survives all of it.
    assert store.get("Node", "", name).raw["status"]["allocatable"]["cpu"] == "4"


def test_api_resources_and_version(cluster: tuple[Store, Kubectl]) -> None:
    _, k = cluster
    out = k.out("api-resources")
    rows = {ln.split()[0]: ln for ln in out.splitlines()[1:]}
    assert {"pods", "nodes", "namespaces", "events", "poddisruptionbudgets", "priorityclasses", "leases"} <= set(rows)
    assert "po" in rows["pods"].split() and "policy/v1" in rows["poddisruptionbudgets"]
    out = k.out("version", "-o", "json")
    assert json.loads(out)["serverVersion"]["major"] == "1"


def test_token_and_tls(tmp_path: Path) -> None:
    store = Store()
    crt, key = make_self_signed(tmp_path / "pki", ["127.0.0.1"])
    server = ApiServer(store, "127.0.0.1", 0, token="sesame", ssl_context=server_ssl_context(crt, key))
    server.start()
    try:
        good = Kubectl(write_kubeconfig(tmp_path / "good", server.url, token="sesame", ca_file=crt), tmp_path)
        assert "default" in good.out("get", "namespaces")
        store.create(pod("a"))
        assert "a" in _rows(good.out("get", "pods"))
        wrong = Kubectl(write_kubeconfig(tmp_path / "wrong", server.url, token="guess", ca_file=crt), tmp_path)
        cp = wrong.run("get", "pods", check=False)
        assert cp.returncode == 1 and "(Unauthorized)" in cp.stderr
        no_ca = Kubectl(write_kubeconfig(tmp_path / "noca", server.url, token="sesame"), tmp_path)
        cp = no_ca.run("get", "pods", check=False)
        assert cp.returncode == 1 and "certificate" in cp.stderr
    finally:
        server.stop()
