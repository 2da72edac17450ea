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
    return Http("127.0.0.1", server.port)


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
