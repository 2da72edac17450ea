"""The API server's contracts kubectl and the official clients rely on, over HTTP: the OpenAPI
endpoints (ETag, 304, hash redirects, protobuf for v2), fieldValidation, request and object
size limits, SelfSubjectAccessReview/SelfSubjectReview, and list/watch edge cases (a table of
requests and the status and reason upstream answers), every error a Status object."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from serve_helpers import Http

from ksched.apiserver.http import ApiServer
from ksched.apiserver.openapi_proto import PROTOBUF_CONTENT_TYPE, PROTOBUF_MIME
from ksched.apiserver.store import Store


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
    # The first OpenAPI request builds every document (about 5 s on a busy machine, more with the
    # whole suite running): a generous timeout.
    return Http("127.0.0.1", server.port, timeout=60.0)


def assert_status(body: Any, code: int, reason: str) -> dict[str, Any]:
    assert isinstance(body, dict), body
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    assert body["status"] == "Failure" and body["code"] == code and body["reason"] == reason, body
    assert body["message"], body
    return body


# ----------------------------------------------------------------------------- OpenAPI


def test_openapi_v3_index_documents_etag_and_hash_redirect(api: Http) -> None:
    st, _, index = api.get("/openapi/v3")
    assert st == 200 and {"api/v1", "apis/policy/v1", "apis/scheduling.k8s.io/v1"} <= set(index["paths"])
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    st, headers, doc = api.get(url)
    assert st == 200 and doc["openapi"].startswith("3.0")
    etag = headers["ETag"]
    assert etag == f'"{url.split("hash=")[1]}"'
    assert headers["Cache-Control"] == "public, immutable"
    assert "io.k8s.api.core.v1.Pod" in doc["components"]["schemas"]
    st, _, body = api.get(url, headers={"If-None-Match": etag})
    assert st == 304 and body is None
    c = api.conn()
    try:
        c.request("GET", "/openapi/v3/api/v1?hash=0123")
        r = c.getresponse()
        r.read()
        assert r.status == 301 and r.headers["Location"] == url
    finally:
        c.close()
    for path in ("/openapi/v3/apis/example.com/v1", "/openapi/v3/api/v2", "/openapi/v3/apis/policy"):
        st, _, body = api.get(path)
        assert_status(body, 404, "NotFound")


def test_openapi_v2_json_protobuf_and_not_acceptable(api: Http) -> None:
    st, headers, doc = api.get("/openapi/v2")
    assert st == 200 and doc["swagger"] == "2.0" and headers["Content-Type"].startswith("application/json")
    assert "io.k8s.api.core.v1.Node" in doc["definitions"]
    c = api.conn()
    try:
        c.request("GET", "/openapi/v2", headers={"Accept": PROTOBUF_MIME})
        r = c.getresponse()
        pb = r.read()
        assert r.status == 200 and r.headers["Content-Type"] == PROTOBUF_CONTENT_TYPE
        assert pb[:5] == b"\n\x032.0"  # field 1 (swagger), length 3
        assert r.headers["ETag"] == headers["ETag"]
    finally:
        c.close()
    st, _, body = api.get("/openapi/v2", headers={"Accept": "application/vnd.example+xml"})
    assert_status(body, 406, "NotAcceptable")


# ----------------------------------------------------------------------------- fieldValidation

NS = "/api/v1/namespaces"
CMS = "/api/v1/namespaces/default/pods"


def _pod_json(extra_spec: str = "", extra_meta: str = "") -> bytes:
    return ('{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"' + extra_meta + '},"spec":{"containers":'
            '[{"name":"c","image":"i"' + extra_spec + '}]' + '}}').encode()


def _warnings(headers: Any) -> list[str]:
    return headers.get_all("Warning") or []


@pytest.mark.parametrize(("query", "code", "warnings", "stored_foo"), [
    ("?fieldValidation=Strict", 400, [], None),
    ("?fieldValidation=Warn", 201, ['299 - "unknown field \\"spec.containers[0].foo\\""'], False),
    ("", 201, ['299 - "unknown field \\"spec.containers[0].foo\\""'], False),
    ("?fieldValidation=Ignore", 201, [], False),
])
def test_create_unknown_field_per_directive(api: Http, store: Store, query: str, code: int, warnings: list[str],
                                            stored_foo: bool | None) -> None:
    st, headers, body = api.post(CMS + query, raw=_pod_json(',"foo":1'))
    assert st == code, body
    assert _warnings(headers) == warnings
    if code == 400:
        assert_status(body, 400, "BadRequest")
        assert body["message"] == ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                                   'unknown field "spec.containers[0].foo"')
        assert store.try_get("Pod", "default", "p") is None  # nothing half-applied
    else:
        assert "foo" not in body["spec"]["containers"][0]
        assert "foo" not in store.get("Pod", "default", "p").raw["spec"]["containers"][0]


def test_strict_reports_unknown_and_duplicate_fields_in_document_order(api: Http, store: Store) -> None:
    raw = (b'{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a","name":"b","bogus":1},'
           b'"spec":{"finalizers":[],"x":{}},"y":2}')
    st, _, body = api.post(NS + "?fieldValidation=Strict", raw=raw)
    assert_status(body, 400, "BadRequest")
    assert body["message"].endswith('strict decoding error: duplicate field "metadata.name", unknown field '
                                    '"metadata.bogus", unknown field "spec.x", unknown field "y"')
    assert store.try_get("Namespace", "", "b") is None
    st, headers, body = api.post(NS + "?fieldValidation=Warn", raw=raw)
    assert st == 201 and body["metadata"]["name"] == "b"  # the last duplicate wins, as Go's decoder
    assert _warnings(headers) == ['299 - "duplicate field \\"metadata.name\\""',
                                  '299 - "unknown field \\"metadata.bogus\\""', '299 - "unknown field \\"spec.x\\""',
                                  '299 - "unknown field \\"y\\""']
    # Free-form maps (labels) take any key.
    st, headers, _ = api.post(NS + "?fieldValidation=Strict",
                              {"metadata": {"name": "c", "labels": {"anything": "goes"}}})
    assert st == 201 and not _warnings(headers)


def test_warm_up_builds_the_field_validation_schemas_before_serving(store: Store) -> None:
    """``warm_up`` builds at once what the first write of each kind would build while it holds
    the server (the restart benchmark's server is warmed so): the schemas of the kinds given,
    of every served built-in kind by default; validation answers as before."""
    from ksched.api.lease import Lease

    s = ApiServer(store, "127.0.0.1", 0)
    built = s.field_validator._schemas
    assert not built
    s.warm_up([Lease])
    assert [k[:2] for k in built] == [(Lease.API_VERSION, "Lease")]
    s.warm_up()
    assert {k[1] for k in built} >= {"Lease", "Event", "Pod", "Node", "Namespace"}
    s.start()
    try:
        api = Http("127.0.0.1", s.port, timeout=60.0)
        st, headers, _ = api.post(NS, raw=b'{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"w"},"x":1}')
        assert st == 201 and _warnings(headers) == ['299 - "unknown field \\"x\\""']
    finally:
        s.stop()


def test_update_and_patch_unknown_fields(api: Http, store: Store) -> None:
    st, _, created = api.post(NS, {"metadata": {"name": "u"}})
    assert st == 201
    created["spec"]["bogus"] = True
    st, _, body = api.put(f"{NS}/u?fieldValidation=Strict", created)
    assert_status(body, 400, "BadRequest")
    assert body["message"].endswith('strict decoding error: unknown field "spec.bogus"')
    rv = store.get("Namespace", "", "u").resource_version
    assert rv == created["metadata"]["resourceVersion"]  # nothing written
    for ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        st, _, body = api.request("PATCH", f"{NS}/u?fieldValidation=Strict", {"metadata": {"labels": {"a": "b"}},
                                                                               "spec": {"nope": 1}},
                                  content_type=ctype)
        assert_status(body, 422, "Invalid")
        assert 'patch: Invalid value: ' in body["message"]
        assert body["message"].endswith('strict decoding error: unknown field "spec.nope"')
        assert store.get("Namespace", "", "u").resource_version == rv and not store.get("Namespace", "", "u").labels
    st, headers, body = api.request("PATCH", f"{NS}/u", raw=b'{"metadata":{"labels":{"a":"1","a":"2"}},"zz":1}',
                                    content_type="application/merge-patch+json")
    assert st == 200 and body["metadata"]["labels"] == {"a": "2"} and "zz" not in body
    assert _warnings(headers) == ['299 - "duplicate field \\"metadata.labels.a\\""', '299 - "unknown field \\"zz\\""']
    st, headers, body = api.request("PATCH", f"{NS}/u?fieldValidation=Ignore", {"zz": 1},
                                    content_type="application/merge-patch+json")
    assert st == 200 and not _warnings(headers) and "zz" not in body


def test_invalid_directive_is_400(api: Http, store: Store) -> None:
    _, _, body = api.post(NS + "?fieldValidation=Loose", {"metadata": {"name": "d"}})
    assert_status(body, 400, "BadRequest")
    assert "fieldValidation" in body["message"] and store.try_get("Namespace", "", "d") is None


def test_request_and_object_size_limits(api: Http, store: Store) -> None:
    big = "x" * (3 * 1024 * 1024)
    _, _, body = api.post(NS, {"metadata": {"name": "big", "annotations": {"a": big}}})
    assert_status(body, 413, "RequestEntityTooLarge")
    assert body["message"] == "Request entity too large: limit is 3145728"
    # Under the request limit but over what etcd keeps for one object.
    _, _, body = api.post(NS, {"metadata": {"name": "big"}, "spec": {"finalizers": ["f" * 200] * 9000}})
    assert_status(body, 413, "RequestEntityTooLarge")
    assert store.try_get("Namespace", "", "big") is None
    assert api.post(NS, {"metadata": {"name": "small"}})[0] == 201
    _, _, body = api.request("PATCH", f"{NS}/small", {"spec": {"finalizers": ["f" * 200] * 9000}},
                              content_type="application/merge-patch+json")
    assert_status(body, 413, "RequestEntityTooLarge")
    assert store.get("Namespace", "", "small").raw["spec"]["finalizers"] == ["kubernetes"]


# ----------------------------------------------------------------------------- access reviews


def _pb_string(field: int, s: str) -> bytes:
    data = s.encode()
    return bytes([field << 3 | 2, len(data)]) + data


def _pb_message(field: int, body: bytes) -> bytes:
    return bytes([field << 3 | 2, len(body)]) + body


def test_reviews_are_discoverable_and_answer_for_the_one_user(api: Http) -> None:
    st, _, groups = api.get("/apis")
    names = {g["name"] for g in groups["groups"]}
    assert {"authentication.k8s.io", "authorization.k8s.io"} <= names
    st, _, lst = api.get("/apis/authorization.k8s.io/v1")
    res = {r["name"]: r for r in lst["resources"]}
    assert res["selfsubjectaccessreviews"]["verbs"] == ["create"]
    assert res["selfsubjectrulesreviews"]["kind"] == "SelfSubjectRulesReview"
    st, _, body = api.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert st == 201 and body["status"]["userInfo"] == {"username": "ksched-admin",
                                                        "groups": ["system:masters", "system:authenticated"]}
    spec = {"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "default"}}
    st, _, body = api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {"spec": spec})
    assert st == 201 and body["status"] == {"allowed": True} and body["spec"] == spec
    st, _, body = api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {"spec": {}})
    assert_status(body, 422, "Invalid")
    st, _, body = api.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", {"spec": {"namespace": "x"}})
    assert st == 201 and body["status"]["resourceRules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
    st, _, body = api.get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert_status(body, 405, "MethodNotAllowed")
    st, _, body = api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ["not", "an", "object"])
    assert_status(body, 400, "BadRequest")


def test_reviews_read_protobuf_bodies(api: Http) -> None:
    attrs = _pb_string(2, "get") + _pb_string(5, "nodes") + _pb_string(6, "status")
    obj = _pb_message(2, _pb_message(1, attrs))
    envelope = b"k8s\x00" + _pb_message(1, _pb_string(1, "authorization.k8s.io/v1")) + _pb_message(2, obj)
    st, _, body = api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", raw=envelope,
                           content_type="application/vnd.kubernetes.protobuf")
    assert st == 201, body
    assert body["spec"] == {"resourceAttributes": {"verb": "get", "resource": "nodes", "subresource": "status"}}
    for bad in (b"nope", b"k8s\x00\x12\x09"):
        st, _, body = api.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", raw=bad,
                               content_type="application/vnd.kubernetes.protobuf")
        assert_status(body, 400, "BadRequest")


# ----------------------------------------------------------------------------- list/watch edge cases

EDGE_CASES = [
    # (method, path, body, code, reason)
    ("GET", "/api/v1/namespaces?resourceVersion=abc", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?resourceVersion=-3", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?limit=-1", None, 200, None),
    ("GET", "/api/v1/namespaces?limit=x", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?resourceVersionMatch=Exact", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?resourceVersion=0&resourceVersionMatch=Exact", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?resourceVersion=1&resourceVersionMatch=Sometime", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?resourceVersion=1&resourceVersionMatch=Exact", None, 410, "Expired"),
    ("GET", "/api/v1/namespaces?resourceVersion={rv}&resourceVersionMatch=Exact", None, 200, None),
    ("GET", "/api/v1/namespaces?resourceVersion=0&resourceVersionMatch=NotOlderThan", None, 200, None),
    ("GET", "/api/v1/namespaces?resourceVersion=999999", None, 504, "Timeout"),
    ("GET", "/api/v1/namespaces?watch=1&resourceVersion=999999", None, 504, "Timeout"),
    ("GET", "/api/v1/namespaces?watch=1&resourceVersion=abc", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?watch=1&resourceVersion=1&resourceVersionMatch=NotOlderThan", None, 400,
     "BadRequest"),
    ("GET", "/api/v1/namespaces?watch=1&sendInitialEvents=true", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?sendInitialEvents=true&resourceVersionMatch=NotOlderThan", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?labelSelector=a%20in", None, 400, "BadRequest"),
    ("GET", "/api/v1/namespaces?continue=garbage", None, 400, "BadRequest"),
    ("POST", "/api/v1/namespaces", {"metadata": {"name": "no-kind"}}, 201, None),
    ("POST", "/api/v1/namespaces", {"kind": "Pod", "metadata": {"name": "wrong-kind"}}, 400, "BadRequest"),
    ("POST", "/api/v1/namespaces", {"apiVersion": "v2", "metadata": {"name": "wrong-version"}}, 400, "BadRequest"),
    ("POST", "/api/v1/namespaces", [1, 2], 400, "BadRequest"),
    ("POST", "/api/v1/namespaces", "just a string", 400, "BadRequest"),
    ("POST", "/api/v1/namespaces", {"metadata": "not an object"}, 422, "Invalid"),
    ("PUT", "/api/v1/namespaces", {"metadata": {"name": "x"}}, 405, "MethodNotAllowed"),
    ("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews/extra", {}, 404, "NotFound"),
]


@pytest.mark.parametrize(("method", "path", "body", "code", "reason"), EDGE_CASES,
                         ids=[f"{m} {p}" for m, p, *_ in EDGE_CASES])
def test_edge_cases_answer_as_upstream(api: Http, store: Store, method: str, path: str, body: Any, code: int,
                                       reason: str | None) -> None:
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bump"}})
    before = store.count("Namespace")
    path = path.replace("{rv}", str(store.resource_version))
    st, _, got = api.request(method, path, body)
    assert st == code, got
    if reason is not None:
        assert_status(got, code, reason)
        assert store.count("Namespace") == before  # nothing half-applied
    if code == 504:
        assert got["details"]["causes"] == [{"reason": "ResourceVersionTooLarge",
                                             "message": "Too large resource version"}]
        assert got["details"]["retryAfterSeconds"] == 1


@pytest.mark.parametrize("flag", ["--tls-cert", "--tls-key"])
def test_serve_refuses_a_certificate_without_its_key(tmp_path: Any, flag: str) -> None:
    import subprocess
    import sys

    from serve_helpers import REPO

    from ksched.cli.common import EXIT_INVALID_INPUT

    (tmp_path / "f.pem").write_text("x")
    cp = subprocess.run([sys.executable, "-m", "ksched.cli.main", "serve", "--listen", "127.0.0.1:0", flag,
                         str(tmp_path / "f.pem"), "--kubeconfig-out", str(tmp_path / "kc")],
                        capture_output=True, text=True, timeout=60, cwd=tmp_path,
                        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert cp.returncode == EXIT_INVALID_INPUT, cp.stderr
    assert "--tls-cert and --tls-key go together" in cp.stderr
    assert not (tmp_path / "kc").exists()
