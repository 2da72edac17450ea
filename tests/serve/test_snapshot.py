"""``ksched snapshot`` and ``ksched simulate --from-cluster`` against an embedded API server on a
loopback port: only reads (lists page by page), one file per resource, namespace and label
selections, Secrets only when asked; the snapshot (and the live cluster) re-simulate with every
bound pod on its node and custom resources with their definitions."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import node, pod

from ksched.apiserver.http import ApiServer
from ksched.apiserver.kubeconfig import write_kubeconfig
from ksched.apiserver.store import Store
from ksched.cli.main import main
from ksched.client.rest import RestClient
from ksched.client.snapshot import take_snapshot
from ksched.sim.cluster import EmbeddedCluster

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "widgets.example.com"},
       "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "properties": {
                        "size": {"type": "integer"}}}}}}}]}}


class ReadOnly:
    """Fails the test if anything writes to the store while armed."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.writes: list[str] = []
        self.lists: list[tuple[str, int, bool]] = []
        self.armed = False
        for m in ("create", "update", "patch", "delete", "bind", "evict"):
            orig = getattr(store, m)
            monkeypatch.setattr(store, m, self._guard(m, orig))
        orig_list = store.list

        def listing(kind: Any, namespace: Any = None, ls: Any = None, fs: Any = None, limit: int = 0,
                    continue_token: str = "") -> Any:
            if self.armed:
                self.lists.append((getattr(kind, "KIND_KEY", kind), limit, bool(continue_token)))
            return orig_list(kind, namespace, ls, fs, limit, continue_token)

        monkeypatch.setattr(store, "list", listing)

    def _guard(self, name: str, orig: Any) -> Any:
        def wrapped(*a: Any, **kw: Any) -> Any:
            if self.armed:
                self.writes.append(name)
            return orig(*a, **kw)
        return wrapped


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[EmbeddedCluster, Path]]:
    """A small cluster (as ``ksched serve`` runs it, controllers included) behind a loopback server."""
    from ksched.clock import VirtualClock

    c = EmbeddedCluster(VirtualClock())
    s = c.store
    s.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    s.create(node("n1", cpu="4", memory="8Gi"))
    s.create(node("n2", cpu="4", memory="8Gi"))
    s.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
              "value": 1000})
    for i in range(5):
        s.create(pod(f"web-{i}", labels={"app": "web"}, cpu="1", priorityClassName="high"))
        s.bind("default", f"web-{i}", f"n{i % 2 + 1}")
    s.create(pod("pending", cpu="1"))
    s.create(pod("t", ns="team", labels={"app": "t"}, cpu="500m"))
    s.bind("team", "t", "n2")
    s.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
              "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    s.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}})
    s.create(CRD)
    s.create({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}})
    server = ApiServer(s, "127.0.0.1", 0, token="tkn")
    server.start()
    try:
        yield c, write_kubeconfig(tmp_path / "kubeconfig", server.url, token="tkn")
    finally:
        server.stop()


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()


def test_snapshot_writes_one_list_per_resource_and_only_reads(cluster: tuple[EmbeddedCluster, Path], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    c, kc = cluster
    guard = ReadOnly(c.store, monkeypatch)
    rv = c.store.resource_version
    guard.armed = True
    out = tmp_path / "snap"
    rc, _, err = run("snapshot", "--kubeconfig", str(kc), "-o", str(out))
    guard.armed = False
    assert rc == 0, err
    assert guard.writes == [] and c.store.resource_version == rv
    files = sorted(p.name for p in out.iterdir())
    assert "pods.yaml" in files and "widgets.example.com.yaml" in files and "nodes.yaml" in files
    assert "secrets.yaml" not in files and "events.yaml" not in files and "leases.coordination.k8s.io.yaml" not in files
    pods = yaml.safe_load((out / "pods.yaml").read_text())
    assert pods["kind"] == "List" and len(pods["items"]) == 7
    assert all("managedFields" not in p["metadata"] for p in pods["items"])
    assert {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods["items"]}["web-3"] == "n2"
    # A second snapshot into the same directory is refused (it would mix two clusters).
    rc, _, err = run("snapshot", "--kubeconfig", str(kc), "-o", str(out))
    assert rc == 2 and "exists and is not an empty directory" in err


def test_lists_are_paginated(cluster: tuple[EmbeddedCluster, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    c, kc = cluster
    guard = ReadOnly(c.store, monkeypatch)
    client = RestClient(kubeconfig=str(kc))
    client.page_size = 2
    guard.armed = True
    snap = take_snapshot(client)
    guard.armed = False
    assert len(snap.objects["pods"]) == 7
    pod_pages = [x for x in guard.lists if x[0] == "Pod"]
    assert len(pod_pages) == 4 and all(limit == 2 for _, limit, _ in pod_pages)
    assert [cont for _, _, cont in pod_pages] == [False, True, True, True]
    assert guard.writes == []


def test_namespace_selector_and_secrets(cluster: tuple[EmbeddedCluster, Path]) -> None:
    _, kc = cluster
    client = RestClient(kubeconfig=str(kc))
    snap = take_snapshot(client, namespaces=["team"])
    assert [p["metadata"]["name"] for p in snap.objects["pods"]] == ["t"]
    assert [n["metadata"]["name"] for n in snap.objects["namespaces"]] == ["team"]
    assert len(snap.objects["nodes"]) == 2  # cluster-scoped: always whole
    from ksched.api.labels import parse_label_selector

    snap = take_snapshot(client, label_selector=parse_label_selector("app=web"))
    assert sorted(p["metadata"]["name"] for p in snap.objects["pods"]) == [f"web-{i}" for i in range(5)]
    assert "secrets" not in snap.objects
    snap = take_snapshot(client, include_secrets=True)
    assert snap.objects["secrets"][0]["data"] == {"k": "dg=="}


def simulate_json(*args: str) -> dict[str, Any]:
    rc, out, err = run("simulate", *args, "--format", "json", "--quiet")
    assert rc == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_a_snapshot_resimulates_with_bound_pods_in_place(cluster: tuple[EmbeddedCluster, Path],
                                                         tmp_path: Path) -> None:
    c, kc = cluster
    out = tmp_path / "snap"
    assert run("snapshot", "--kubeconfig", str(kc), "-o", str(out))[0] == 0
    report = simulate_json(str(out))
    placed = {f"{p['namespace']}/{p['name']}": p["node"] for p in report["pods"]}
    live = {p.key: p.node_name or None for p in c.store.items("Pod")}
    for key, node_name in live.items():
        if node_name is not None:
            assert placed[key] == node_name, key
    attempts = {f"{p['namespace']}/{p['name']}": p["attempts"] for p in report["pods"]}
    assert all(attempts[k] == 0 for k, n in live.items() if n)
    # The pending pod is scheduled by the simulation: 1 cpu fits where the live pods leave room.
    assert placed["default/pending"] in ("n1", "n2")


def test_simulate_from_the_live_cluster(cluster: tuple[EmbeddedCluster, Path], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    c, kc = cluster
    guard = ReadOnly(c.store, monkeypatch)
    extra = tmp_path / "new.yaml"
    extra.write_text(yaml.safe_dump_all([pod("big", cpu="3"), {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": 3}}]))
    guard.armed = True
    report = simulate_json("--from-cluster", str(kc), str(extra))
    guard.armed = False
    assert guard.writes == []
    placed = {p["name"]: p for p in report["pods"]}
    # n1 holds three 1-cpu pods, n2 two plus 500m: nowhere has 3 cpus (the pending one takes 1).
    assert placed["big"]["node"] is None and "Insufficient cpu" in placed["big"]["message"]
    assert placed["web-0"]["node"] == "n1"


def test_from_cluster_with_a_bad_kubeconfig(tmp_path: Path) -> None:
    rc, _, err = run("simulate", "--from-cluster", str(tmp_path / "missing"), "--quiet")
    # The console wraps long lines, a long temporary path among them, anywhere.
    assert rc == 1 and str(tmp_path / "missing") in "".join(err.split())
