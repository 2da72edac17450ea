"""The Kubernetes REST front of the embedded store (ksched.apiserver.http), in-process on a free
loopback port: discovery, CRUD and Status errors, selectors and pagination, watch streams
(resourceVersion, bookmarks, timeouts, 410 Gone), the three patch types, pods subresources,
server-side Tables, bearer-token auth, TLS, and bad requests that must store nothing."""

from __future__ import annotations

import json
import logging
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from serve_helpers import Http, node, pod

from ksched.apiserver.http import ApiServer, is_loopback
from ksched.apiserver.store import Store
from ksched.apiserver.tls import make_self_signed, server_ssl_context

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
PODS = "/api/v1/namespaces/default/pods"


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def server(store: Store) -> Iterator[ApiServer]:
    s = ApiServer(store, "127.0.0.1", 0, bookmark_interval=0.2)
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def api(server: ApiServer) -> Http:
    return Http("127.0.0.1", server.port)


def assert_status(body: Any, code: int, reason: str) -> dict[str, Any]:
    assert isinstance(body, dict), body
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    assert body["status"] == "Failure", body
    assert body["code"] == code and body["reason"] == reason, body
    assert body["message"], body
    return body


# ----------------------------------------------------------------------------- discovery


def test_discovery_version_and_health(api: Http) -> None:
    st, _, body = api.get("/api")
    assert st == 200 and body["kind"] == "APIVersions" and body["versions"] == ["v1"]
    st, _, body = api.get("/apis")
    assert st == 200 and body["kind"] == "APIGroupList"
    groups = {g["name"]: g for g in body["groups"]}
    assert {"policy", "scheduling.k8s.io", "storage.k8s.io", "coordination.k8s.io"} <= set(groups)
    assert groups["policy"]["preferredVersion"]["groupVersion"] == "policy/v1"
    st, _, body = api.get("/api/v1")
    assert st == 200 and body["kind"] == "APIResourceList" and body["groupVersion"] == "v1"
    res = {r["name"]: r for r in body["resources"]}
    assert res["pods"]["namespaced"] is True and res["pods"]["kind"] == "Pod"
    assert "po" in res["pods"]["shortNames"] and "watch" in res["pods"]["verbs"]
    assert res["nodes"]["namespaced"] is False
    assert {"pods/status", "pods/binding", "pods/eviction", "nodes/status"} <= set(res)
    st, _, body = api.get("/apis/policy/v1")
    assert st == 200 and [r["kind"] for r in body["resources"] if r["name"] == "poddisruptionbudgets"] == \
        ["PodDisruptionBudget"]
    st, _, body = api.get("/apis/policy")
    assert st == 200 and body["kind"] == "APIGroup" and body["name"] == "policy"
    st, _, body = api.get("/version")
    assert st == 200 and body["major"] == "1" and body["gitVersion"].startswith("v1.")
    for path in ("/healthz", "/readyz", "/livez"):
        st, _, body = api.get(path)
        assert (st, body) == (200, "ok")
    st, _, body = api.get("/openapi/v3")
    assert st == 200 and "api/v1" in body["paths"]


def test_unknown_paths_are_404_status(api: Http) -> None:
    for path in ("/apis/example.com", "/apis/example.com/v1", "/api/v2", "/nothing/here",
                 "/api/v1/widgets", "/api/v1/namespaces/default/widgets/w", "/api/v1/pods/a/b/c/d"):
        st, _, body = api.get(path)
        assert st == 404, path
        assert_status(body, 404, "NotFound")


# ----------------------------------------------------------------------------- CRUD and errors


def test_create_get_list_update_delete(api: Http, store: Store) -> None:
    st, _, created = api.post(PODS, pod("web", labels={"app": "web"}))
    assert st == 201
    md = created["metadata"]
    assert md["uid"] and md["resourceVersion"] and md["creationTimestamp"] and md["namespace"] == "default"
    assert created["spec"]["schedulerName"] == "default-scheduler"  # defaulted by admission
    st, _, got = api.get(f"{PODS}/web")
    assert st == 200 and got == created
    st, _, lst = api.get(PODS)
    assert st == 200 and lst["kind"] == "PodList" and lst["apiVersion"] == "v1"
    assert [i["metadata"]["name"] for i in lst["items"]] == ["web"]
    assert int(lst["metadata"]["resourceVersion"]) >= int(md["resourceVersion"])
    # All namespaces.
    st, _, lst = api.get("/api/v1/pods")
    assert st == 200 and [i["metadata"]["name"] for i in lst["items"]] == ["web"]

    upd = json.loads(json.dumps(got))
    upd["metadata"]["labels"]["tier"] = "front"
    st, _, updated = api.put(f"{PODS}/web", upd)
    assert st == 200 and updated["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert int(updated["metadata"]["resourceVersion"]) > int(md["resourceVersion"])
    # The stale resourceVersion now conflicts.
    st, _, body = api.put(f"{PODS}/web", upd)
    body = assert_status(body, 409, "Conflict")
    assert st == 409 and body["details"]["name"] == "web" and body["details"]["kind"] == "pods"
    assert "the object has been modified" in body["message"]

    st, _, gone = api.delete(f"{PODS}/web")
    assert st == 200 and gone["metadata"]["name"] == "web"
    assert store.try_get("Pod", "default", "web") is None
    st, _, body = api.get(f"{PODS}/web")
    assert st == 404
    body = assert_status(body, 404, "NotFound")
    assert body["message"] == 'pods "web" not found'
    assert body["details"] == {"name": "web", "kind": "pods"}
    st, _, body = api.delete(f"{PODS}/web")
    assert st == 404


def test_already_exists_is_409(api: Http, store: Store) -> None:
    assert api.post(PODS, pod("a"))[0] == 201
    rv = store.resource_version
    st, _, body = api.post(PODS, pod("a"))
    assert st == 409
    body = assert_status(body, 409, "AlreadyExists")
    assert body["message"] == 'pods "a" already exists'
    assert store.resource_version == rv


def test_cluster_scoped_and_grouped_kinds(api: Http, store: Store) -> None:
    st, _, n = api.post("/api/v1/nodes", node("n1"))
    assert st == 201 and "namespace" not in n["metadata"]
    assert api.get("/api/v1/namespaces/default/nodes/n1")[0] == 404
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    st, _, got = api.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb)
    assert st == 201 and got["kind"] == "PodDisruptionBudget"
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
          "value": 1000}
    assert api.post("/apis/scheduling.k8s.io/v1/priorityclasses", pc)[0] == 201
    st, _, lst = api.get("/apis/scheduling.k8s.io/v1/priorityclasses")
    assert "high" in [i["metadata"]["name"] for i in lst["items"]]
    # Creating in a namespace that does not exist.
    st, _, body = api.post("/api/v1/namespaces/nope/pods", pod("x", ns="nope"))
    assert st == 404 and assert_status(body, 404, "NotFound")["message"] == 'namespaces "nope" not found'


def test_malformed_json_is_400_and_stores_nothing(api: Http, store: Store) -> None:
    rv = store.resource_version
    st, _, body = api.post(PODS, raw=b'{"apiVersion": "v1", "kind": "Pod", "metadata": {')
    assert st == 400
    assert "not valid JSON" in assert_status(body, 400, "BadRequest")["message"]
    st, _, body = api.post(PODS, raw=b"[1, 2, 3]")
    assert st == 400 and assert_status(body, 400, "BadRequest")
    st, _, body = api.put(f"{PODS}/x", raw=b"not json")
    assert st == 400 and assert_status(body, 400, "BadRequest")
    assert store.count("Pod") == 0 and store.resource_version == rv


def test_unknown_kind_is_refused_and_stores_nothing(api: Http, store: Store) -> None:
    rv = store.resource_version
    # A resource the server does not serve.
    st, _, body = api.post("/api/v1/namespaces/default/widgets",
                           {"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert st == 404 and assert_status(body, 404, "NotFound")
    # A kind in the body that is not the resource's.
    st, _, body = api.post(PODS, {"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert st == 400
    assert "Widget" in assert_status(body, 400, "BadRequest")["message"]
    st, _, body = api.post(PODS, {**pod("w"), "apiVersion": "apps/v1"})
    assert st == 400 and assert_status(body, 400, "BadRequest")
    assert store.count("Pod") == 0 and store.resource_version == rv


def test_invalid_object_is_422_with_field_causes_and_stores_nothing(api: Http, store: Store) -> None:
    rv = store.resource_version
    bad = pod("Bad_Name")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    st, _, body = api.post(PODS, bad)
    assert st == 422
    body = assert_status(body, 422, "Invalid")
    assert body["details"]["kind"] == "Pod" and body["details"]["name"] == "Bad_Name"
    fields = {c["field"] for c in body["details"]["causes"]}
    assert "metadata.name" in fields
    assert any(f.startswith("spec.containers[0].resources.requests") for f in fields), fields
    assert all(c["reason"].startswith("Field") for c in body["details"]["causes"])
    # Several errors: one aggregate message, as upstream ("[a, b]").
    assert body["message"].startswith('Pod "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name"')
    assert body["message"].endswith("]")
    st, _, body = api.post(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"}, "spec": {}})
    assert st == 422
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.containers"]
    assert body["message"] == 'Pod "empty" is invalid: spec.containers: Required value'  # one: no brackets
    assert store.count("Pod") == 0 and store.resource_version == rv

    # An update that makes a stored object invalid is refused and leaves it as it was.
    assert api.post("/api/v1/nodes", node("n1"))[0] == 201
    rv = store.resource_version
    st, _, body = api.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"bad key!": "x"}}},
                            "application/merge-patch+json")
    assert st == 422 and assert_status(body, 422, "Invalid")["details"]["causes"][0]["field"].startswith(
        "metadata.labels")
    assert store.resource_version == rv and "bad key!" not in store.get("Node", "", "n1").labels


def test_body_name_and_namespace_must_match_the_url(api: Http, store: Store) -> None:
    api.post(PODS, pod("a"))
    got = api.get(f"{PODS}/a")[2]
    st, _, body = api.put(f"{PODS}/b", got)
    assert st == 400 and assert_status(body, 400, "BadRequest")
    st, _, body = api.post("/api/v1/namespaces/kube-system/pods", pod("c", ns="default"))
    assert st == 400 and assert_status(body, 400, "BadRequest")
    assert store.try_get("Pod", "kube-system", "c") is None and store.try_get("Pod", "default", "c") is None


def test_malformed_options_are_400_not_500_and_change_nothing(api: Http, store: Store) -> None:
    store.create(node("n1"))
    store.create(pod("a"))
    rv = store.resource_version
    bad = [
        ("GET", f"{PODS}?watch=1&timeoutSeconds=abc", None),
        ("DELETE", f"{PODS}/a?gracePeriodSeconds=soon", None),
        ("DELETE", f"{PODS}/a", {"gracePeriodSeconds": "soon"}),
        ("DELETE", f"{PODS}/a", {"preconditions": "uid"}),
        ("DELETE", f"{PODS}/a", ["not", "options"]),
        ("POST", f"{PODS}/a/eviction", [1]),
        ("POST", f"{PODS}/a/eviction", {"deleteOptions": {"gracePeriodSeconds": "x"}}),
        ("POST", f"{PODS}/a/eviction", {"deleteOptions": "now"}),
        ("POST", f"{PODS}/a/binding", {"metadata": {"name": "a"}, "target": "n1"}),
        ("POST", f"{PODS}/a/binding", {"metadata": "a", "target": {"name": "n1"}}),
    ]
    for method, path, body in bad:
        st, _, got = api.request(method, path, body)
        assert st == 400, (method, path, body, got)
        assert_status(got, 400, "BadRequest")
    assert store.resource_version == rv
    p = store.get("Pod", "default", "a")
    assert p.deletion_timestamp is None and not p.node_name


def test_method_not_allowed(api: Http) -> None:
    st, _, body = api.put(PODS, pod("a"))
    assert st == 405 and assert_status(body, 405, "MethodNotAllowed")


# ----------------------------------------------------------------------------- list


def test_list_label_and_field_selectors(api: Http, store: Store) -> None:
    store.create(node("n1"))
    for i in range(6):
        store.create(pod(f"p{i}", labels={"app": "web" if i % 2 else "db", "idx": str(i)}))
    store.bind("default", "p1", "n1")
    store.bind("default", "p4", "n1")

    def names(query: str) -> list[str]:
        st, _, body = api.get(f"{PODS}?{query}")
        assert st == 200, body
        return sorted(i["metadata"]["name"] for i in body["items"])

    assert names("labelSelector=" + quote("app=web")) == ["p1", "p3", "p5"]
    assert names("labelSelector=" + quote("app in (db),idx!=2")) == ["p0", "p4"]
    assert names("labelSelector=" + quote("!idx")) == []
    assert names("fieldSelector=" + quote("spec.nodeName=n1")) == ["p1", "p4"]
    assert names("fieldSelector=" + quote("spec.nodeName=")) == ["p0", "p2", "p3", "p5"]
    assert names("fieldSelector=" + quote("metadata.name=p3")) == ["p3"]
    assert names("labelSelector=app%3Dweb&fieldSelector=" + quote("spec.nodeName!=n1")) == ["p3", "p5"]
    st, _, body = api.get("/api/v1/nodes?fieldSelector=" + quote("spec.unschedulable=false"))
    assert [i["metadata"]["name"] for i in body["items"]] == ["n1"]

    st, _, body = api.get(f"{PODS}?labelSelector=" + quote("app in (web"))
    assert st == 400 and assert_status(body, 400, "BadRequest")
    st, _, body = api.get(f"{PODS}?fieldSelector=" + quote("spec.containers=x"))
    assert st == 400 and "spec.containers" in assert_status(body, 400, "BadRequest")["message"]


def test_list_pagination_with_limit_and_continue(api: Http, store: Store) -> None:
    for i in range(7):
        store.create(pod(f"p{i}"))
    rv0 = store.resource_version
    seen: list[str] = []
    cont = ""
    pages = 0
    while True:
        q = "limit=3" + (f"&continue={quote(cont)}" if cont else "")
        st, _, body = api.get(f"{PODS}?{q}")
        assert st == 200
        pages += 1
        assert len(body["items"]) <= 3
        # Every page is of the same snapshot version, even if objects change in between.
        assert body["metadata"]["resourceVersion"] == str(rv0)
        seen += [i["metadata"]["name"] for i in body["items"]]
        cont = body["metadata"].get("continue", "")
        if pages == 1:
            store.create(pod("p0a"))  # a write between pages does not change the list's version
        if not cont:
            break
    assert pages == 3
    assert seen[:3] == ["p0", "p1", "p2"] and set(seen) >= {f"p{i}" for i in range(7)}
    st, _, body = api.get(f"{PODS}?limit=x")
    assert st == 400 and assert_status(body, 400, "BadRequest")
    st, _, body = api.get(f"{PODS}?limit=2&continue=garbage")
    assert st == 400 and assert_status(body, 400, "BadRequest")


# ----------------------------------------------------------------------------- watch


def test_watch_from_resource_version_sees_later_changes_only(api: Http, store: Store) -> None:
    store.create(pod("before"))
    st, _, lst = api.get(PODS)
    assert st == 200
    rv = lst["metadata"]["resourceVersion"]
    store.create(pod("after"))
    store.patch("Pod", "default", "after", {"metadata": {"labels": {"x": "1"}}})
    store.delete("Pod", "default", "after")
    with api.stream(f"{PODS}?watch=true&resourceVersion={rv}&timeoutSeconds=1") as w:
        assert w.status == 200
        evs = w.rest()  # the server ends the stream after timeoutSeconds
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    assert evs[1]["object"]["metadata"]["labels"] == {"x": "1"}
    assert evs[0]["object"]["kind"] == "Pod" and evs[0]["object"]["apiVersion"] == "v1"


def test_watch_without_version_starts_with_the_current_objects(api: Http, store: Store) -> None:
    store.create(pod("a", labels={"app": "web"}))
    store.create(pod("b", labels={"app": "db"}))
    with api.stream(f"{PODS}?watch=1&labelSelector=app%3Dweb&timeoutSeconds=5") as w:
        first = w.next()
        assert first is not None and (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "a")
        store.create(pod("c", labels={"app": "web"}))
        store.create(pod("d", labels={"app": "db"}))
        # A label change that moves an object out of the selection is a DELETED.
        store.patch("Pod", "default", "a", {"metadata": {"labels": {"app": "db"}}})
        evs = w.until(lambda e: e["type"] == "DELETED")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "c"), ("DELETED", "a")]


def test_watch_path_form_and_single_object(api: Http, store: Store) -> None:
    store.create(pod("a"))
    store.create(pod("b"))
    rv = store.resource_version
    with api.stream(f"/api/v1/watch/namespaces/default/pods/b?resourceVersion={rv}&timeoutSeconds=3") as w:
        store.patch("Pod", "default", "a", {"metadata": {"labels": {"x": "1"}}})
        store.patch("Pod", "default", "b", {"metadata": {"labels": {"x": "2"}}})
        ev = w.next()
    assert ev is not None and ev["type"] == "MODIFIED" and ev["object"]["metadata"]["name"] == "b"


def test_watch_timeout_seconds_ends_the_stream(api: Http) -> None:
    t0 = time.monotonic()
    with api.stream(f"{PODS}?watch=true&resourceVersion=0&timeoutSeconds=1") as w:
        assert w.rest() == []
    assert 0.8 <= time.monotonic() - t0 < 5


def test_watch_bookmarks_only_when_asked(api: Http, store: Store) -> None:
    store.create(pod("a"))
    rv = store.resource_version
    with api.stream(f"{PODS}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=2") as w:
        ev = w.next()
        assert ev is not None and ev["type"] == "BOOKMARK"
        assert ev["object"]["kind"] == "Pod" and ev["object"]["metadata"]["resourceVersion"] == str(rv)
        store.create(pod("b"))
        evs = w.until(lambda e: e["type"] == "BOOKMARK")
        assert [e["type"] for e in evs] == ["ADDED", "BOOKMARK"]
        assert evs[-1]["object"]["metadata"]["resourceVersion"] == str(store.resource_version)
    with api.stream(f"{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=1") as w:
        assert all(e["type"] != "BOOKMARK" for e in w.rest())


def test_watch_send_initial_events_ends_with_a_marked_bookmark(api: Http, store: Store) -> None:
    store.create(pod("a"))
    q = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
    with api.stream(f"{PODS}?{q}") as w:
        evs = w.until(lambda e: e["type"] == "BOOKMARK")
    assert [e["type"] for e in evs] == ["ADDED", "BOOKMARK"]
    assert evs[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_expired_version_is_410_gone(api: Http, store: Store) -> None:
    store.create(pod("a"))
    old = store.resource_version
    store.create(pod("b"))
    store.compact()
    with api.stream(f"{PODS}?watch=1&resourceVersion={old}") as w:
        assert w.status == 200  # as kube-apiserver: the error is the stream's only event
        evs = w.rest()
    assert len(evs) == 1 and evs[0]["type"] == "ERROR"
    st = assert_status(evs[0]["object"], 410, "Expired")
    assert "too old resource version" in st["message"]
    # The current version still works.
    with api.stream(f"{PODS}?watch=1&resourceVersion={store.resource_version}&timeoutSeconds=1") as w:
        assert w.rest() == []


def test_watch_resume_after_server_closes_the_stream(api: Http, store: Store) -> None:
    store.create(pod("a"))
    rv = store.resource_version
    with api.stream(f"{PODS}?watch=1&resourceVersion={rv}") as w:
        store.create(pod("b"))
        ev = w.next()
        assert ev is not None and ev["object"]["metadata"]["name"] == "b"
        last = ev["object"]["metadata"]["resourceVersion"]
        store.close_watches()  # as a server restart
        assert w.rest() == []
    store.create(pod("c"))
    with api.stream(f"{PODS}?watch=1&resourceVersion={last}&timeoutSeconds=1") as w:
        assert [e["object"]["metadata"]["name"] for e in w.rest()] == ["c"]


def test_clients_that_hang_up_at_once_are_not_server_errors(api: Http, store: Store, server: ApiServer,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    store.create(pod("a"))
    old = store.resource_version
    store.create(pod("b"))
    store.compact()
    caplog.set_level(logging.DEBUG, logger="ksched.apiserver.http")
    handled = [0]
    real = server._watch

    async def counting(*args: Any) -> Any:
        try:
            return await real(*args)
        finally:
            handled[0] += 1

    server._watch = counting  # type: ignore[method-assign]
    for path in (f"{PODS}?watch=1", f"{PODS}?watch=1&resourceVersion={old}"):
        for _ in range(10):
            with socket.create_connection(("127.0.0.1", api.port)) as c:
                c.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    deadline = time.monotonic() + 5
    while handled[0] < 20 and time.monotonic() < deadline:
        store.create(pod(f"x{time.monotonic_ns()}"))  # an event makes a writer notice a gone client
        time.sleep(0.05)
    assert handled[0] == 20
    time.sleep(0.1)
    assert not server._open_watches and not store.watch_cache.watches("Pod")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert api.get("/healthz")[0] == 200


def test_watch_table_events_for_kubectl_get_w(api: Http, store: Store) -> None:
    rv = store.resource_version
    with api.stream(f"{PODS}?watch=1&resourceVersion={rv}&timeoutSeconds=2", headers={"Accept": TABLE}) as w:
        store.create(pod("a"))
        ev = w.next()
    assert ev is not None and ev["type"] == "ADDED" and ev["object"]["kind"] == "Table"
    assert ev["object"]["rows"][0]["cells"][0] == "a"
    assert ev["object"]["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


# ----------------------------------------------------------------------------- patch


def test_merge_json_and_strategic_patches(api: Http, store: Store) -> None:
    store.create(node("n1"))
    # kubectl label (merge patch)
    st, _, n = api.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"zone": "a"}}},
                         "application/merge-patch+json")
    assert st == 200 and n["metadata"]["labels"] == {"zone": "a"}
    # kubectl cordon (strategic merge patch)
    st, _, n = api.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": True}},
                         "application/strategic-merge-patch+json")
    assert st == 200 and n["spec"]["unschedulable"] is True
    assert store.get("Node", "", "n1").unschedulable
    # kubectl taint (strategic: the list is replaced as kubectl sends it)
    taints = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    st, _, n = api.patch("/api/v1/nodes/n1", {"spec": {"taints": taints}}, "application/strategic-merge-patch+json")
    assert st == 200 and n["spec"]["taints"] == taints
    # kubectl annotate (JSON patch works too)
    st, _, n = api.patch("/api/v1/nodes/n1", [{"op": "add", "path": "/metadata/annotations",
                                               "value": {"note": "x"}}], "application/json-patch+json")
    assert st == 200 and n["metadata"]["annotations"] == {"note": "x"}
    # uncordon: null removes the field
    st, _, n = api.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": None}}, "application/merge-patch+json")
    assert st == 200 and "unschedulable" not in n["spec"]
    # The status the node reported is untouched by patches of the main resource.
    assert n["status"]["allocatable"]["cpu"] == "4"


def test_patch_errors(api: Http, store: Store) -> None:
    store.create(pod("a"))
    rv = store.resource_version
    st, _, body = api.patch(f"{PODS}/a", {"metadata": {"labels": {"x": "y"}}}, "text/plain")
    assert st == 415 and assert_status(body, 415, "UnsupportedMediaType")
    st, _, body = api.patch(f"{PODS}/a", {"metadata": {}}, "application/apply-patch+yaml")
    assert st == 415 and "server-side apply" in assert_status(body, 415, "UnsupportedMediaType")["message"]
    st, _, body = api.patch(f"{PODS}/a", [{"op": "test", "path": "/metadata/name", "value": "zzz"}],
                            "application/json-patch+json")
    assert st == 422 and assert_status(body, 422, "Invalid")
    st, _, body = api.patch(f"{PODS}/nope", {"metadata": {}}, "application/merge-patch+json")
    assert st == 404 and assert_status(body, 404, "NotFound")
    # A stale resourceVersion in the patch is a precondition: 409.
    st, _, body = api.patch(f"{PODS}/a", {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}},
                            "application/merge-patch+json")
    assert st == 409 and assert_status(body, 409, "Conflict")
    # Pod spec is immutable (beyond the fields upstream allows).
    st, _, body = api.patch(f"{PODS}/a", {"spec": {"nodeSelector": {"a": "b"}}}, "application/merge-patch+json")
    assert st == 422 and assert_status(body, 422, "Invalid")
    assert store.resource_version == rv


# ----------------------------------------------------------------------------- pods subresources


def test_binding_status_and_eviction(api: Http, store: Store) -> None:
    store.create(node("n1"))
    store.create(pod("a"))
    uid = store.get("Pod", "default", "a").uid
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a", "uid": uid},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
    st, _, body = api.post(f"{PODS}/a/binding", binding)
    assert st == 201 and body["status"] == "Success"
    p = store.get("Pod", "default", "a")
    assert p.node_name == "n1"
    assert [c["status"] for c in p.raw["status"]["conditions"] if c["type"] == "PodScheduled"] == ["True"]
    st, _, body = api.post(f"{PODS}/a/binding", binding)
    assert st == 409 and "already assigned" in assert_status(body, 409, "Conflict")["message"]

    # The legacy bindings resource.
    store.create(pod("b"))
    st, _, _ = api.post("/api/v1/namespaces/default/bindings",
                        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"},
                         "target": {"kind": "Node", "name": "n1"}})
    assert st == 201 and store.get("Pod", "default", "b").node_name == "n1"

    # Over-committing the node (4 cpu) is a conflict and changes nothing.
    store.create(pod("big", cpu="4"))
    rv = store.resource_version
    st, _, body = api.post(f"{PODS}/big/binding", {"apiVersion": "v1", "kind": "Binding",
                                                   "metadata": {"name": "big"}, "target": {"name": "n1"}})
    assert st == 409 and assert_status(body, 409, "Conflict")
    assert store.resource_version == rv and not store.get("Pod", "default", "big").node_name

    # pods/status: the main resource ignores status, the subresource takes it.
    st, _, got = api.patch(f"{PODS}/a/status", {"status": {"phase": "Running"}}, "application/merge-patch+json")
    assert st == 200 and got["status"]["phase"] == "Running"
    st, _, got = api.patch(f"{PODS}/a", {"status": {"phase": "Failed"}}, "application/merge-patch+json")
    assert st == 200 and got["status"]["phase"] == "Running"
    st, _, got = api.get(f"{PODS}/a/status")
    assert st == 200 and got["status"]["phase"] == "Running"
    cur = api.get(f"{PODS}/a")[2]
    cur["status"]["phase"] = "Succeeded"
    st, _, got = api.put(f"{PODS}/a/status", cur)
    assert st == 200 and got["status"]["phase"] == "Succeeded"

    # pods/eviction, blocked by a PDB with no disruptions allowed.
    store.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb"},
                  "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})
    store.create(pod("g", labels={"app": "guarded"}))
    store.bind("default", "g", "n1")
    store.patch("Pod", "default", "g", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}}, subresource="status")
    ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "g", "namespace": "default"}}
    st, _, body = api.post(f"{PODS}/g/eviction", ev)
    assert st == 429 and assert_status(body, 429, "TooManyRequests")
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    st, _, body = api.post(f"{PODS}/b/eviction", {"apiVersion": "policy/v1", "kind": "Eviction",
                                                  "metadata": {"name": "b"},
                                                  "deleteOptions": {"gracePeriodSeconds": 0}})
    assert st == 201 and store.try_get("Pod", "default", "b") is None

    st, _, body = api.post(f"{PODS}/a/exec", {})
    assert st == 404 and assert_status(body, 404, "NotFound")


def test_delete_options_grace_and_preconditions(api: Http, store: Store) -> None:
    store.create(node("n1"))
    store.create(pod("a"))
    store.bind("default", "a", "n1")
    # A bound pod is deleted gracefully...
    st, _, got = api.delete(f"{PODS}/a")
    assert st == 200 and got["metadata"]["deletionGracePeriodSeconds"] == 30
    assert store.get("Pod", "default", "a").deletion_timestamp is not None
    # ... unless told otherwise (kubectl delete --grace-period=0 --force).
    st, _, _ = api.delete(f"{PODS}/a", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    assert st == 200 and store.try_get("Pod", "default", "a") is None
    store.create(pod("b"))
    st, _, body = api.delete(f"{PODS}/b", {"preconditions": {"uid": "not-the-uid"}})
    assert st == 409 and assert_status(body, 409, "Conflict")
    assert store.try_get("Pod", "default", "b") is not None
    # deletecollection with a selector.
    store.create(pod("c", labels={"app": "x"}))
    st, _, body = api.delete(f"{PODS}?labelSelector=app%3Dx")
    assert st == 200 and body["status"] == "Success"
    assert store.try_get("Pod", "default", "c") is None and store.try_get("Pod", "default", "b") is not None


# ----------------------------------------------------------------------------- tables


def test_pod_table_has_upstream_columns(api: Http, store: Store) -> None:
    store.create(node("n1"))
    store.create(pod("a"))
    store.create(pod("b", labels={"app": "x"}))
    store.bind("default", "a", "n1")
    store.patch("Pod", "default", "a", {"status": {"phase": "Running", "podIP": "10.1.0.5", "containerStatuses": [
        {"name": "c", "ready": True, "restartCount": 2, "image": "nginx", "imageID": "",
         "state": {"running": {}}}]}}, subresource="status")
    st, _, t = api.get(PODS, headers={"Accept": TABLE})
    assert st == 200 and t["kind"] == "Table" and t["apiVersion"] == "meta.k8s.io/v1"
    cols = [(c["name"], c["priority"]) for c in t["columnDefinitions"]]
    assert cols == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0), ("IP", 1),
                    ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1)]
    rows = {r["cells"][0]: r["cells"] for r in t["rows"]}
    assert rows["a"][1:4] == ["1/1", "Running", "2"]
    assert rows["a"][5:] == ["10.1.0.5", "n1", "<none>", "<none>"]
    assert rows["b"][1:4] == ["0/1", "Pending", "0"]
    assert rows["b"][5:] == ["<none>", "<none>", "<none>", "<none>"]
    assert t["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert t["metadata"]["resourceVersion"] == str(store.resource_version)
    # One object, and the whole object when asked for.
    st, _, t = api.get(f"{PODS}/b?includeObject=Object", headers={"Accept": TABLE})
    assert len(t["rows"]) == 1 and t["rows"][0]["object"]["kind"] == "Pod"
    # Terminating pods say so.
    store.delete("Pod", "default", "a")
    t = api.get(PODS, headers={"Accept": TABLE})[2]
    assert {r["cells"][0]: r["cells"][2] for r in t["rows"]}["a"] == "Terminating"


def test_node_table_has_upstream_columns(api: Http, store: Store) -> None:
    store.create(node("n1", labels={"node-role.kubernetes.io/control-plane": ""}))
    n2 = node("n2")
    n2["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    store.create(n2)
    store.patch("Node", "", "n2", {"spec": {"unschedulable": True}})
    st, _, t = api.get("/api/v1/nodes", headers={"Accept": TABLE})
    assert st == 200
    cols = [(c["name"], c["priority"]) for c in t["columnDefinitions"]]
    assert cols == [("Name", 0), ("Status", 0), ("Roles", 0), ("Age", 0), ("Version", 0), ("Internal-IP", 1),
                    ("External-IP", 1), ("OS-Image", 1), ("Kernel-Version", 1), ("Container-Runtime", 1)]
    rows = {r["cells"][0]: r["cells"] for r in t["rows"]}
    assert rows["n1"][1:3] == ["Ready", "control-plane"]
    assert rows["n1"][4:] == ["v1.36.0", "10.0.0.1", "<none>", "Ubuntu 24.04", "6.8.0", "containerd://2.0"]
    assert rows["n2"][1:3] == ["NotReady,SchedulingDisabled", "<none>"]
    # Other kinds get theirs (tests/apiserver/test_tables.py has them all).
    t = api.get("/api/v1/namespaces", headers={"Accept": TABLE})[2]
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Status", "Age"]
    assert "default" in [r["cells"][0] for r in t["rows"]]


def test_paginated_table(api: Http, store: Store) -> None:
    for i in range(3):
        store.create(pod(f"p{i}"))
    t = api.get(f"{PODS}?limit=2", headers={"Accept": TABLE})[2]
    assert [r["cells"][0] for r in t["rows"]] == ["p0", "p1"] and t["metadata"]["continue"]
    t = api.get(f"{PODS}?limit=2&continue={quote(t['metadata']['continue'])}", headers={"Accept": TABLE})[2]
    assert [r["cells"][0] for r in t["rows"]] == ["p2"] and "continue" not in t["metadata"]


# ----------------------------------------------------------------------------- auth and TLS


def test_is_loopback() -> None:
    for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost"):
        assert is_loopback(h), h
    for h in ("0.0.0.0", "::", "", "10.0.0.1", "192.0.2.1", "example.com"):
        assert not is_loopback(h), h


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_refuses_to_listen_off_loopback_without_tls_and_token(store: Store, host: str, tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="requires TLS and a bearer token"):
        ApiServer(store, host, 0)
    with pytest.raises(ValueError, match="requires TLS and a bearer token"):
        ApiServer(store, host, 0, token="secret")
    crt, key = make_self_signed(tmp_path, ["127.0.0.1"])
    ctx = server_ssl_context(crt, key)
    with pytest.raises(ValueError, match="requires TLS and a bearer token"):
        ApiServer(store, host, 0, ssl_context=ctx)
    with pytest.raises(ValueError, match="requires TLS and a bearer token"):
        ApiServer(store, host, 0, ssl_context=ctx, token="")
    s = ApiServer(store, host, 0, ssl_context=ctx, token="secret")  # allowed (not started here)
    assert s.url.startswith("https://")


def test_bearer_token_is_required_when_set(store: Store) -> None:
    s = ApiServer(store, "127.0.0.1", 0, token="s3cret")
    s.start()
    try:
        anon = Http("127.0.0.1", s.port)
        for path in ("/api", "/apis", "/version", "/api/v1/namespaces", f"{PODS}?watch=1"):
            st, _, body = anon.get(path)
            assert st == 401, path
            assert_status(body, 401, "Unauthorized")
        st, _, body = anon.post(PODS, pod("a"))
        assert st == 401 and store.count("Pod") == 0
        wrong = Http("127.0.0.1", s.port, token="guess")
        assert wrong.get("/api/v1/namespaces")[0] == 401
        st, _, _ = anon.get("/api", headers={"Authorization": "Basic czNjcmV0"})
        assert st == 401
        for path in ("/healthz", "/readyz", "/livez"):
            assert anon.get(path)[0] == 200
        ok = Http("127.0.0.1", s.port, token="s3cret")
        assert ok.get("/api/v1/namespaces")[0] == 200
        assert ok.post(PODS, pod("a"))[0] == 201
    finally:
        s.stop()


def test_https_with_generated_certificate_and_token(store: Store, tmp_path: Any) -> None:
    crt, key = make_self_signed(tmp_path / "pki", ["127.0.0.1", "localhost"])
    s = ApiServer(store, "127.0.0.1", 0, token="tok", ssl_context=server_ssl_context(crt, key))
    s.start()
    try:
        assert s.url == f"https://127.0.0.1:{s.port}"
        client_ctx = ssl.create_default_context(cafile=str(crt))
        ok = Http("127.0.0.1", s.port, token="tok", ssl_context=client_ctx)
        st, _, body = ok.get("/api/v1/namespaces/default")
        assert st == 200 and body["metadata"]["name"] == "default"
        assert ok.post(PODS, pod("a"))[0] == 201
        assert Http("127.0.0.1", s.port, ssl_context=client_ctx).get("/api")[0] == 401
        # Plain HTTP is not served.
        with pytest.raises(OSError):
            Http("127.0.0.1", s.port, token="tok", timeout=3).get("/api")
        # A client that does not trust the certificate refuses it.
        with pytest.raises(ssl.SSLError):
            Http("127.0.0.1", s.port, token="tok", ssl_context=ssl.create_default_context()).get("/api")
    finally:
        s.stop()


def test_port_in_use_is_reported(store: Store, server: ApiServer) -> None:
    other = ApiServer(store, "127.0.0.1", server.port)
    with pytest.raises(OSError):
        other.start()
