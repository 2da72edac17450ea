"""The manifests under deploy/ applied to ``ksched serve`` with the real kubectl, as
deploy/README.md tells an operator to: ``kubectl apply -f deploy/scheduler/``, ``kubectl apply
-f deploy/multi/`` and the webhook configuration with its CA filled in. Every object of a kind
the server serves is created, stored as given (each field of the manifest reads back with the
given value; the server only adds defaults and metadata) and a second apply changes nothing
(which needs the strategic-merge keys of the kinds' lists, such as the webhooks').

Kinds the embedded server does not serve yet are listed in ``NOT_SERVED`` with the reason; for
them kubectl must report exactly its "no matches for kind" error and nothing else. A kind that
becomes served is checked like the others with no change to this test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import REPO, Proc, free_port, ksched_cmd, subprocess_env, wait_http_ready

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

DEPLOY = REPO / "deploy"
WEBHOOK_CONFIGURATION = DEPLOY / "multi" / "admission" / "validatingwebhookconfiguration.yaml"

# (apiVersion, kind) of the manifests that ksched serve does not serve, and why.
NOT_SERVED = {
    ("apps/v1", "Deployment"): "apps/v1 workloads are not in the embedded API server yet",
}


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}
        self.env.pop("KUBERNETES_SERVICE_HOST", None)

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        return subprocess.run([KUBECTL, *args], env=self.env, input=stdin, capture_output=True, text=True,
                              timeout=120)

    def served(self) -> set[tuple[str, str]]:
        cp = self.run("api-resources", "--no-headers")
        assert cp.returncode == 0, cp.stderr
        # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND
        return {(cols[-3], cols[-1]) for cols in (line.split() for line in cp.stdout.splitlines()) if cols}


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    tmp = tmp_path_factory.mktemp("deploy-apply")
    port = free_port()
    serve = Proc(ksched_cmd("serve", "--no-scheduler", "--listen", f"127.0.0.1:{port}",
                            "--kubeconfig-out", str(tmp / "kubeconfig")), tmp / "serve.log", subprocess_env(tmp), tmp)
    try:
        wait_http_ready(port, timeout=60, proc=serve)
        yield Kubectl(tmp / "kubeconfig", tmp)
    finally:
        serve.stop()
    assert "Traceback" not in serve.log_path.read_text(errors="replace")


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _files_docs(directory: Path) -> list[dict[str, Any]]:
    return [d for f in sorted(directory.glob("*.yaml")) for d in _docs(f.read_text())]


def _key(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["apiVersion"], doc["kind"]


def _mismatches(given: Any, stored: Any, path: str) -> list[str]:
    """Where ``stored`` lacks a field of ``given`` or holds another value (lists item by item)."""
    if isinstance(given, dict):
        if not isinstance(stored, dict):
            return [f"{path}: {stored!r} is not an object"]
        return [m for k, v in given.items()
                for m in (_mismatches(v, stored[k], f"{path}.{k}") if k in stored else [f"{path}.{k}: missing"])]
    if isinstance(given, list):
        if not isinstance(stored, list) or len(stored) != len(given):
            return [f"{path}: {stored!r} is not {given!r}"]
        return [m for i, (g, s) in enumerate(zip(given, stored, strict=True)) for m in _mismatches(g, s, f"{path}[{i}]")]
    return [] if given == stored else [f"{path}: {stored!r} is not {given!r}"]


def _resource(k: Kubectl, doc: dict[str, Any]) -> str:
    group = doc["apiVersion"].rpartition("/")[0]
    return f"{doc['kind'].lower()}.{group}" if group else doc["kind"].lower()


def _apply_and_check(k: Kubectl, docs: list[dict[str, Any]], *args: str, stdin: str | None = None) -> None:
    """``kubectl apply ARGS``: the served objects created and stored as given, the others refused
    with kubectl's no-matches error only; a second apply leaves everything unchanged."""
    served = k.served()
    unserved = {_key(d) for d in docs} - served
    assert unserved <= set(NOT_SERVED), f"kinds in deploy/ the server does not serve: {unserved - set(NOT_SERVED)}"
    applied = [d for d in docs if _key(d) in served]
    cp = k.run("apply", *args, stdin=stdin)
    for d in applied:
        assert f"{_resource(k, d)}/{d['metadata']['name']} created" in cp.stdout, (d["metadata"], cp.stdout, cp.stderr)
    errors = [line for line in cp.stderr.splitlines() if line.strip() and line != "ensure CRDs are installed first"]
    expected = [f'no matches for kind "{d["kind"]}" in version "{d["apiVersion"]}"' for d in docs if _key(d) in unserved]
    assert len(errors) == len(expected), cp.stderr
    for e in expected:
        assert any(e in line for line in errors), (e, cp.stderr)
    assert cp.returncode == (1 if unserved else 0), cp.stderr
    for d in applied:
        md = d["metadata"]
        ns = ["-n", md["namespace"]] if "namespace" in md else []
        got = k.run("get", _resource(k, d), md["name"], *ns, "-o", "json")
        assert got.returncode == 0, got.stderr
        stored = json.loads(got.stdout)
        assert _mismatches(d, stored, f"{d['kind']} {md['name']}") == []
        last_applied = stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        assert _mismatches(d, json.loads(last_applied), "last-applied") == []
    again = k.run("apply", *args, stdin=stdin)
    assert [line for line in again.stdout.splitlines() if not line.endswith(" unchanged")] == [], again.stdout


def test_the_scheduler_manifests_apply(kubectl: Kubectl) -> None:
    docs = _files_docs(DEPLOY / "scheduler")
    assert {d["kind"] for d in docs} >= {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                                         "Deployment", "PodDisruptionBudget"}
    _apply_and_check(kubectl, docs, "-f", str(DEPLOY / "scheduler") + "/")


def test_the_multi_scheduler_manifests_apply(kubectl: Kubectl) -> None:
    docs = _files_docs(DEPLOY / "multi")
    assert {d["kind"] for d in docs} >= {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                                         "ConfigMap", "Service", "Deployment"}
    # kubectl apply -f deploy/multi/ does not descend into admission/ (applied last, with its CA).
    assert all(d["kind"] != "ValidatingWebhookConfiguration" for d in docs)
    _apply_and_check(kubectl, docs, "-f", str(DEPLOY / "multi") + "/")
    # CA_BUNDLE=$(base64 -w0 tls.crt) envsubst < validatingwebhookconfiguration.yaml | kubectl apply -f -
    text = WEBHOOK_CONFIGURATION.read_text()
    assert text.count("${CA_BUNDLE}") == 1
    filled = text.replace("${CA_BUNDLE}", "Y2EtYnVuZGxl")
    _apply_and_check(kubectl, _docs(filled), "-f", "-", stdin=filled)
    table = kubectl.run("get", "validatingwebhookconfigurations").stdout.splitlines()
    assert table[0].split() == ["NAME", "WEBHOOKS", "AGE"]
    assert table[1].split()[:2] == ["ksched-binding-conflicts", "1"]
