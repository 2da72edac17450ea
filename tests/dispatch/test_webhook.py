"""The binding webhook for real clusters, driven with real AdmissionReview v1 JSON over HTTPS:
it denies (409 Conflict) a binding that would over-commit its node, counting the bindings it
admitted and has not yet observed; and end to end, instances on an API server without a
resolver never over-commit when their bindings go through it."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dispatch_harness import Cluster, node, overcommitted, pod

from ksched.api.pod import Pod
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.apiserver.tls import make_self_signed, server_ssl_context
from ksched.client.rest import _api_error
from ksched.dispatch.webhook import WEBHOOK_NAME, BindingWebhook


class FakeMonotonic:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Hook:
    def __init__(self, store: Store, tmp: Path) -> None:
        cert, key = make_self_signed(tmp / "pki", ["127.0.0.1"])
        self.clock = FakeMonotonic()
        self.hook = BindingWebhook(InProcessClient(store), host="127.0.0.1", port=0,
                                   ssl_context=server_ssl_context(cert, key), admitted_ttl=30, monotonic=self.clock)
        self.hook.start()
        self.ctx = ssl.create_default_context(cafile=str(cert))

    def post(self, body: Any, path: str = "/validate") -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.hook.url + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def bind(self, name: str, node_name: str, *, namespace: str = "default", api_version: str = "admission.k8s.io/v1",
             dry_run: bool = False, legacy: bool = False) -> dict[str, Any]:
        """The AdmissionReview a kube-apiserver sends for POST pods/<name>/binding."""
        uid = str(uuid.uuid4())
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        req: dict[str, Any] = {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Binding"},
            "resource": {"group": "", "version": "v1", "resource": "bindings" if legacy else "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Binding"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": name, "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:ksched"},
            "object": binding, "oldObject": None, "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}
        if not legacy:
            req["subResource"] = "binding"
            req["requestSubResource"] = "binding"
        status, out = self.post({"apiVersion": api_version, "kind": "AdmissionReview", "request": req})
        assert status == 200
        assert out["apiVersion"] == api_version and out["kind"] == "AdmissionReview"
        assert out["response"]["uid"] == uid
        return out["response"]


@pytest.fixture
def store() -> Store:
    s = Store()
    s.create(node("n1", cpu="2", pods=3))
    s.create(node("n2", cpu="8"))
    return s


@pytest.fixture
def hook(store: Store, tmp_path: Path) -> Iterator[Hook]:
    h = Hook(store, tmp_path)
    try:
        yield h
    finally:
        h.hook.stop()


def test_admits_what_fits_and_denies_the_over_commit_before_the_first_binding_is_observed(
        store: Store, hook: Hook) -> None:
    for i in range(3):
        store.create(pod(f"p{i}", cpu="1"))
    r = hook.bind("p0", "n1")
    assert r["allowed"] is True and "status" not in r
    r = hook.bind("p1", "n1")
    assert r["allowed"] is True
    # Neither binding happened in the store yet: only the webhook's admissions fill n1.
    r = hook.bind("p2", "n1")
    assert r["allowed"] is False
    assert r["status"]["code"] == 409 and r["status"]["reason"] == "Conflict"
    assert r["status"]["message"] == ('Operation cannot be fulfilled on pods/binding "p2": node n1 would be '
                                      'over-committed on cpu: requested 1000, allocatable 2000, already '
                                      'requested 2000')
    assert hook.bind("p2", "n2")["allowed"] is True
    assert hook.hook.allowed == 3 and hook.hook.denied == 1


def test_observed_bindings_replace_admissions_and_deletions_free_the_room(store: Store, hook: Hook) -> None:
    for i in range(3):
        store.create(pod(f"p{i}", cpu="1"))
    assert hook.bind("p0", "n1")["allowed"]
    store.bind("default", "p0", "n1")
    assert hook.bind("p1", "n1")["allowed"]
    store.bind("default", "p1", "n1")
    assert not hook.bind("p2", "n1")["allowed"]
    hook.hook.sync()
    assert hook.hook.admitted == {}  # both observed through the informer
    store.delete("Pod", "default", "p0", grace_period_seconds=0)
    assert hook.bind("p2", "n1")["allowed"]


def test_unobserved_admissions_expire(store: Store, hook: Hook) -> None:
    store.create(pod("big", cpu="2"))
    store.create(pod("again", cpu="2"))
    assert hook.bind("big", "n1")["allowed"]  # admitted, then refused further down the chain: never bound
    assert not hook.bind("again", "n1")["allowed"]
    hook.clock.t += 31
    assert hook.bind("again", "n1")["allowed"]


def test_dry_run_admits_without_reserving(store: Store, hook: Hook) -> None:
    store.create(pod("a", cpu="2"))
    store.create(pod("b", cpu="2"))
    assert hook.bind("a", "n1", dry_run=True)["allowed"]
    assert hook.bind("b", "n1")["allowed"]


def test_pod_count_and_host_ports_and_the_legacy_bindings_resource(store: Store, hook: Hook) -> None:
    for i in range(4):
        store.create(pod(f"s{i}", cpu="100m"))
    for i in range(3):
        assert hook.bind(f"s{i}", "n1", legacy=i == 0)["allowed"]
    r = hook.bind("s3", "n1")
    assert not r["allowed"] and "pod limit" in r["status"]["message"]
    store.create(pod("web1", cpu="100m", host_port=8080))
    store.create(pod("web2", cpu="100m", host_port=8080))
    assert hook.bind("web1", "n2")["allowed"]
    r = hook.bind("web2", "n2", legacy=True)
    assert not r["allowed"] and "host port 0.0.0.0:8080/TCP" in r["status"]["message"]


def test_v1beta1_reviews_are_answered_in_kind(store: Store, hook: Hook) -> None:
    store.create(pod("a", cpu="1"))
    assert hook.bind("a", "n1", api_version="admission.k8s.io/v1beta1")["allowed"]


def test_other_requests_and_unknown_pods_are_allowed_and_garbage_is_refused(store: Store, hook: Hook) -> None:
    uid = "7c0a6c2e-6b53-4a0b-9c8c-0d6b0f2f9a11"
    status, out = hook.post({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": "x", "namespace": "default",
        "operation": "UPDATE", "object": {}}})
    assert status == 200 and out["response"] == {"uid": uid, "allowed": True}
    assert hook.bind("no-such-pod", "n1")["allowed"]  # the API server answers NotFound itself
    store.create(pod("a", cpu="1"))
    r = hook.bind("a", "no-such-node")
    assert not r["allowed"] and 'node "no-such-node" not found' in r["status"]["message"]
    assert hook.post(b"{not json")[0] == 400
    assert hook.post({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"})[0] == 400
    with urllib.request.urlopen(hook.hook.url + "/healthz", context=hook.ctx, timeout=5) as resp:
        assert resp.read() == b"ok"


def test_plain_http_is_refused_unless_asked_for() -> None:
    with pytest.raises(ValueError, match="HTTPS"):
        BindingWebhook(InProcessClient(Store()))


class WebhookCheckedClient(InProcessClient):
    """pods/binding as a kube-apiserver without a resolver but with the webhook registered
    does it: an AdmissionReview first; a denial comes back as the Status error the apiserver
    returns (what RestClient raises)."""

    def __init__(self, store: Store, hook: Hook) -> None:
        super().__init__(store)
        self.hook = hook

    def bind(self, pod: Pod, node_name: str, annotations: dict[str, str] | None = None) -> None:
        r = self.hook.bind(pod.name, node_name, namespace=pod.namespace)
        if not r["allowed"]:
            st = dict(r["status"])
            st["message"] = f'admission webhook "{WEBHOOK_NAME}" denied the request: {st["message"]}'
            raise _api_error(st["code"], json.dumps({"kind": "Status", "apiVersion": "v1", **st}))
        super().bind(pod, node_name, annotations)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_instances_behind_the_webhook_never_overcommit(seed: int, tmp_path: Path) -> None:
    c = Cluster(resolver=False, seed=seed)
    h = Hook(c.store, tmp_path)
    try:
        c.create(node(f"n{i}", cpu="2") for i in range(4))
        for name in ("s0", "s1", "s2"):
            c.add_instance(name, client=WebhookCheckedClient(c.store, h))
        c.create(pod(f"p{i}", cpu="1") for i in range(16))
        c.dispatcher.run_until_idle()
        for inst in c.instances.values():
            inst.scheduler.sync()
        c.race(poll_prob=0.1)
        assert overcommitted(c.store) == {}
        assert sum(1 for p in c.pods() if p.node_name) == 8
        conflicts = sum(i.conflicts for i in c.instances.values())
        assert conflicts > 0 and conflicts == h.hook.denied
        assert all(i.stats()["binding_errors"] == 0 for i in c.instances.values())
    finally:
        h.hook.stop()
