"""DeleteOptions over HTTP (ksched.apiserver.http) and through the REST client: propagationPolicy,
orphanDependents and gracePeriodSeconds from the query or a body, preconditions, delete-collection
with options, invalid options answered as 422 Status objects that change nothing, dryRun refused;
namespaces/finalize; the namespaces that may not be deleted (403)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import Http

from ksched.apiserver.http import ApiServer
from ksched.apiserver.kubeconfig import write_kubeconfig
from ksched.apiserver.store import Store
from ksched.client.rest import RestClient

CJ = "/apis/batch/v1/namespaces/default/cronjobs"


def cronjob(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedule": "@hourly", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def api(store: Store) -> Iterator[Http]:
    s = ApiServer(store, "127.0.0.1", 0)
    s.start()
    try:
        yield Http("127.0.0.1", s.port)
    finally:
        s.stop()


def status(body: Any, code: int, reason: str) -> str:
    assert body["kind"] == "Status" and body["code"] == code and body["reason"] == reason, body
    return str(body["message"])


@pytest.mark.parametrize(("how", "finalizers"), [
    ("?propagationPolicy=Orphan", ["orphan"]),
    ("?propagationPolicy=Foreground", ["foregroundDeletion"]),
    ("?orphanDependents=true", ["orphan"]),
    ({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}, ["foregroundDeletion"]),
])
def test_propagation_from_the_query_or_the_body(api: Http, store: Store, how: Any, finalizers: list[str]) -> None:
    assert api.post(CJ, cronjob("a"))[0] == 201
    if isinstance(how, str):
        code, _, body = api.delete(f"{CJ}/a{how}")
    else:
        code, _, body = api.delete(f"{CJ}/a", how)
    assert code == 200 and body["metadata"]["finalizers"] == finalizers
    assert body["metadata"]["deletionTimestamp"]
    assert store.get("CronJob", "default", "a").finalizers == finalizers


def test_background_deletes_at_once(api: Http, store: Store) -> None:
    api.post(CJ, cronjob("a"))
    assert api.delete(f"{CJ}/a?propagationPolicy=Background")[0] == 200
    assert store.try_get("CronJob", "default", "a") is None


@pytest.mark.parametrize(("query", "body", "message"), [
    ("?propagationPolicy=Sideways", None, 'supported values: "Foreground", "Background", "Orphan", "nil"'),
    ("?propagationPolicy=Orphan&orphanDependents=true", None,
     "orphanDependents and deletionPropagation cannot be both set"),
    ("", {"preconditions": {"uid": "nope"}}, "Precondition failed: UID in precondition: nope"),
])
def test_bad_options_change_nothing(api: Http, store: Store, query: str, body: Any, message: str) -> None:
    api.post(CJ, cronjob("a"))
    code, _, got = api.delete(f"{CJ}/a{query}", body)
    assert code in (409, 422)
    assert message in status(got, code, "Invalid" if code == 422 else "Conflict")
    cj = store.get("CronJob", "default", "a")
    assert cj.deletion_timestamp is None and cj.finalizers == []


def test_bad_option_types_and_dry_run(api: Http) -> None:
    api.post(CJ, cronjob("a"))
    assert "orphanDependents: expected a boolean" in status(api.delete(f"{CJ}/a?orphanDependents=maybe")[2], 400,
                                                           "BadRequest")
    assert "dryRun is not supported" in status(api.delete(f"{CJ}/a?dryRun=All")[2], 400, "BadRequest")
    assert status(api.delete(f"{CJ}/a", [1, 2])[2], 400, "BadRequest")


def test_delete_collection_with_options(api: Http, store: Store) -> None:
    for n in ("a", "b"):
        api.post(CJ, cronjob(n))
    assert api.delete(f"{CJ}?propagationPolicy=Orphan")[0] == 200
    assert [c.finalizers for c in store.items("CronJob")] == [["orphan"], ["orphan"]]


def test_namespaces_finalize_and_the_ones_that_stay(api: Http, store: Store) -> None:
    assert api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "gone"}})[0] == 201
    code, _, ns = api.delete("/api/v1/namespaces/gone")
    assert code == 200 and ns["status"]["phase"] == "Terminating"
    ns["spec"]["finalizers"] = []
    assert api.put("/api/v1/namespaces/gone/finalize", ns)[0] == 200
    assert store.try_get("Namespace", "", "gone") is None
    code, _, body = api.delete("/api/v1/namespaces/kube-system")
    assert status(body, 403, "Forbidden") == 'namespaces "kube-system" is forbidden: this namespace may not be deleted'


def test_the_rest_client_sends_propagation_and_preconditions(api: Http, store: Store, tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{api.port}")
    client = RestClient(kubeconfig=str(kc))
    cj = client.create(cronjob("a"))
    gone = client.delete("CronJob", "default", "a", propagation_policy="Foreground", uid=cj.uid,
                         resource_version=cj.resource_version)
    assert gone is not None and gone.finalizers == ["foregroundDeletion"]
    ns = client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    client.delete("Namespace", "", "x")
    fresh = client.get("Namespace", "", "x")
    client.update({**fresh.raw, "spec": {"finalizers": []}}, "finalize")
    assert store.try_get("Namespace", "", "x") is None and ns.name == "x"
