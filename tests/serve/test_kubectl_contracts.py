"""The real kubectl against the embedded API server, for the contracts it relies on beyond CRUD:
``apply`` validating against the server's OpenAPI (no ``--validate=false``), ``explain``,
server-side printer columns of ``get``, ``auth can-i`` and ``auth whoami``."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_helpers import REPO
from test_kubectl import Kubectl

from ksched.apiserver.http import ApiServer
from ksched.apiserver.kubeconfig import write_kubeconfig
from ksched.apiserver.store import Store

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Kubectl]]:
    d = tmp_path_factory.mktemp("kubectl-contracts")
    store = Store()
    server = ApiServer(store, "127.0.0.1", 0)
    server.start()
    try:
        kc = write_kubeconfig(d / "kubeconfig", server.url)
        yield store, Kubectl(kc, d)
    finally:
        server.stop()


def test_apply_examples_cluster_validates_without_flags(cluster: tuple[Store, Kubectl]) -> None:
    store, k = cluster
    # kubectl maps every object before it applies any, so a custom resource whose CRD is in the
    # same directory is refused the first time, as against any API server; the rest is applied.
    first = k.run("apply", "-f", str(REPO / "examples" / "cluster"), check=False)
    assert first.returncode == 1
    assert first.stderr.strip().splitlines() == [
        'error: resource mapping not found for name: "kafka-nightly" namespace: "data" from '
        f'"{REPO / "examples" / "cluster" / "30-backup-policy.yaml"}": no matches for kind "BackupPolicy" in version '
        '"example.com/v1"', "ensure CRDs are installed first"]
    out = first.stdout
    assert "node/general-a-0 created" in out and "poddisruptionbudget.policy/frontend created" in out
    assert "deployment.apps/frontend created" in out and "cronjob.batch/retrain-yearly created" in out
    assert store.count("Node") > 0 and store.count("PodDisruptionBudget") == 2
    again = k.out("apply", "-f", str(REPO / "examples" / "cluster"))
    assert "node/general-a-0 unchanged" in again and "deployment.apps/frontend unchanged" in again
    assert "backuppolicy.example.com/kafka-nightly created" in again


def test_apply_validates_lists_client_side(cluster: tuple[Store, Kubectl], tmp_path: Path) -> None:
    _, k = cluster
    # A List is validated by kubectl itself, against /openapi/v2 (protobuf).
    bad_list = tmp_path / "list.yaml"
    bad_list.write_text("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n"
                        "  metadata: {name: typo-list}\n  spek: {}\n")
    cp = k.run("apply", "-f", str(bad_list), check=False)
    assert cp.returncode != 0 and 'unknown field "spek"' in cp.stderr, cp.stderr


def test_apply_unknown_field_is_refused_by_the_server(cluster: tuple[Store, Kubectl], tmp_path: Path) -> None:
    store, k = cluster
    bad = tmp_path / "ns.yaml"
    bad.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: typo-one}\nspek: {}\n")
    cp = k.run("apply", "-f", str(bad), check=False)
    assert cp.returncode != 0, cp.stdout
    assert 'strict decoding error: unknown field "spek"' in cp.stderr, cp.stderr
    assert store.try_get("Namespace", "", "typo-one") is None
    cp = k.run("apply", "--validate=warn", "-f", str(bad), check=False)
    assert cp.returncode == 0 and 'Warning: unknown field "spek"' in cp.stderr, cp.stderr
    assert "spek" not in store.get("Namespace", "", "typo-one").raw


def test_explain_prints_fields_and_types(cluster: tuple[Store, Kubectl]) -> None:
    _, k = cluster
    out = k.out("explain", "pod.spec.containers")
    assert "FIELD: containers <[]Container>" in out
    assert "name\t<string> -required-" in out and "ports\t<[]ContainerPort>" in out
    assert "resources\t<ResourceRequirements>" in out
    out = k.out("explain", "pdb.spec")
    assert "minAvailable" in out and "selector\t<LabelSelector>" in out
    out = k.out("explain", "nodes", "--recursive")
    assert "KIND:       Node" in out and "unschedulable\t<boolean>" in out


def test_auth_can_i_and_whoami(cluster: tuple[Store, Kubectl]) -> None:
    _, k = cluster
    assert k.out("auth", "can-i", "create", "pods").strip() == "yes"
    assert k.out("auth", "can-i", "delete", "nodes", "--subresource=status").strip() == "yes"
    out = k.out("auth", "whoami")
    assert "Username    ksched-admin" in out and "system:masters" in out
    listed = k.out("auth", "can-i", "--list")
    assert listed.splitlines()[1].split() == ["*.*", "[]", "[]", "[*]"]


def test_get_prints_upstreams_columns(cluster: tuple[Store, Kubectl]) -> None:
    store, k = cluster
    store.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "ev1", "namespace": "default"},
                  "type": "Warning", "reason": "FailedScheduling", "message": "0/3 nodes are available",
                  "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "default"}})
    store.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                  "metadata": {"name": "sched", "namespace": "kube-system"}, "spec": {"holderIdentity": "ksched-1"}})
    out = k.out("get", "events")
    assert out.split("\n")[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "Warning   FailedScheduling   pod/web-0   0/3 nodes are available" in out
    assert k.out("get", "ns").split("\n")[0].split() == ["NAME", "STATUS", "AGE"]
    assert k.out("get", "pc").split("\n")[0].split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    out = k.out("get", "lease", "-n", "kube-system")
    assert out.split("\n")[0].split() == ["NAME", "HOLDER", "AGE"] and "ksched-1" in out
    store.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": "columns", "namespace": "default"},
                  "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "columns"}}}})
    out = k.out("get", "pdb", "columns")
    assert out.split("\n")[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS",
                                          "AGE"]
    assert out.split("\n")[1].split()[:3] == ["columns", "N/A", "1"]
