"""kubectl (and the official Python client) against ``ksched serve`` with its scheduler, simulated
kubelets and controllers, on the wall clock: ``kubectl create job`` / ``create cronjob`` /
``create job --from=cronjob``, ``kubectl get jobs``, ``kubectl wait --for=condition=complete``,
``kubectl delete --cascade=background|foreground|orphan``, ``kubectl drain`` (not waiting for grace
periods), ``kubectl delete namespace`` and the namespaces that may not be deleted; ``kubernetes.client`` reading a PodDisruptionBudget, a Job
and a CronJob."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import Proc, free_port, ksched_cmd, node, subprocess_env, wait_http_ready

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (needed to drive it against "
                                                        "ksched serve)")


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.kubeconfig = kubeconfig
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}
        self.env.pop("KUBERNETES_SERVICE_HOST", None)

    def run(self, *args: str, check: bool = True, stdin: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        cp = subprocess.run([KUBECTL, *args], env=self.env, input=stdin, capture_output=True, text=True,
                            timeout=timeout)
        if check and cp.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}")
        return cp

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.out(*args, "-o", "json"))


def wait_until(pred: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    d = tmp_path_factory.mktemp("serve-batch")
    manifests = d / "cluster.yaml"
    manifests.write_text(yaml.safe_dump_all([node("n1", cpu="64", memory="64Gi", pods="500")]))
    port = free_port()
    kc = d / "kubeconfig"
    proc = Proc(ksched_cmd("serve", "--listen", f"127.0.0.1:{port}", "--load", str(manifests),
                           "--kubeconfig-out", str(kc)), d / "serve.log", subprocess_env(d), d)
    try:
        wait_http_ready(port, proc=proc)
        proc.wait_log("kubeconfig:")
        yield Kubectl(kc, d)
        assert "Traceback" not in proc.log(), proc.log()
    finally:
        proc.stop()


@pytest.fixture
def ns(k: Kubectl, request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:50].strip("-")
    k.out("create", "namespace", name)
    return name


def job_manifest(name: str, ns: str, *, run: float | None, parallelism: int = 1, completions: int = 1,
                 grace: int | None = None) -> str:
    tpl: dict[str, Any] = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}]}}
    if run is not None:
        tpl["metadata"] = {"annotations": {"ksched.io/run-seconds": str(run)}}
    if grace is not None:
        tpl["spec"]["terminationGracePeriodSeconds"] = grace
    return yaml.safe_dump({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
                           "spec": {"parallelism": parallelism, "completions": completions, "template": tpl}})


def pods_of(k: Kubectl, ns: str, job: str) -> list[dict[str, Any]]:
    return k.json("get", "pods", "-n", ns, "-l", f"batch.kubernetes.io/job-name={job}")["items"]  # type: ignore[no-any-return]


def running(k: Kubectl, ns: str, job: str, n: int) -> Callable[[], bool]:
    return lambda: sum(1 for p in pods_of(k, ns, job) if p["status"].get("phase") == "Running") == n


# ---------------------------------------------------------------- jobs


def test_kubectl_create_job_get_jobs_and_delete(k: Kubectl, ns: str) -> None:
    assert k.out("create", "job", "pi", "-n", ns, "--image=busybox", "--", "sleep", "3600").strip() == \
        "job.batch/pi created"
    wait_until(running(k, ns, "pi", 1), "the job's pod to run")
    rows = k.out("get", "jobs", "-n", ns).splitlines()
    assert rows[0].split()[0] == "NAME" and rows[1].split()[0] == "pi"
    # The Job syncs a second after its pod's changes: it reports the pod ready then.
    wait_until(lambda: k.json("get", "job", "pi", "-n", ns)["status"].get("ready") == 1, "ready=1")
    job = k.json("get", "job", "pi", "-n", ns)
    assert job["status"]["active"] == 1
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    (pod,) = pods_of(k, ns, "pi")
    assert pod["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    # kubectl's default cascade is background: the Job goes, then its pods.
    assert k.out("delete", "job", "pi", "-n", ns).strip() == 'job.batch "pi" deleted'
    wait_until(lambda: pods_of(k, ns, "pi") == [], "the pods to go")


def test_kubectl_wait_for_a_job_to_complete(k: Kubectl, ns: str) -> None:
    k.run("apply", "-f", "-", stdin=job_manifest("quick", ns, run=1, parallelism=2, completions=3))
    k.out("wait", "--for=condition=complete", "job/quick", "-n", ns, "--timeout=60s")
    job = k.json("get", "job", "quick", "-n", ns)
    assert job["status"]["succeeded"] == 3
    assert [c["type"] for c in job["status"]["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert job["status"]["conditions"][1]["reason"] == "CompletionsReached"
    assert all(p["status"]["phase"] == "Succeeded" and not p["metadata"].get("finalizers")
               for p in pods_of(k, ns, "quick"))


@pytest.mark.parametrize("cascade", ["background", "foreground", "orphan"])
def test_kubectl_delete_cascade(k: Kubectl, ns: str, cascade: str) -> None:
    k.run("apply", "-f", "-", stdin=job_manifest("j", ns, run=None, parallelism=2, completions=2))
    wait_until(running(k, ns, "j", 2), "two running pods")
    out = k.out("delete", "job", "j", "-n", ns, f"--cascade={cascade}")
    assert out.strip() == 'job.batch "j" deleted'
    assert k.run("get", "job", "j", "-n", ns, check=False).returncode == 1
    if cascade == "orphan":
        # The pods stay, released: no owner reference, no tracking finalizer.
        time.sleep(1)
        pods = pods_of(k, ns, "j")
        assert len(pods) == 2
        for p in pods:
            assert p["status"]["phase"] == "Running"
            assert not p["metadata"].get("ownerReferences") and not p["metadata"].get("finalizers")
    elif cascade == "foreground":
        # kubectl waited for the Job, which waited for its pods.
        assert pods_of(k, ns, "j") == []
    else:
        wait_until(lambda: pods_of(k, ns, "j") == [], "the pods to go")


def test_kubectl_create_cronjob_and_a_job_from_it(k: Kubectl, ns: str) -> None:
    out = k.out("create", "cronjob", "tick", "-n", ns, "--image=busybox", "--schedule=*/5 * * * *", "--",
                "date")
    assert out.strip() == "cronjob.batch/tick created"
    cj = k.json("get", "cronjob", "tick", "-n", ns)
    assert cj["spec"]["concurrencyPolicy"] == "Allow" and cj["spec"]["successfulJobsHistoryLimit"] == 3
    assert k.out("get", "cj", "-n", ns).splitlines()[1].split()[0] == "tick"
    assert k.out("create", "job", "manual", "-n", ns, "--from=cronjob/tick").strip() == "job.batch/manual created"
    job = k.json("get", "job", "manual", "-n", ns)
    assert job["metadata"]["ownerReferences"][0]["name"] == "tick"
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    wait_until(running(k, ns, "manual", 1), "the manual job's pod")


def test_a_bad_schedule_is_refused(k: Kubectl, ns: str) -> None:
    cp = k.run("create", "cronjob", "bad", "-n", ns, "--image=busybox", "--schedule=61 * * * *", check=False)
    assert cp.returncode == 1
    assert cp.stderr.strip() == ('error: failed to create cronjob: CronJob.batch "bad" is invalid: spec.schedule: '
                                 'Invalid value: "61 * * * *": end of range (61) above maximum (59): 61')


def test_kubectl_drain_does_not_wait_for_the_grace_period(k: Kubectl, ns: str) -> None:
    """The simulated kubelet stops a deleted pod's containers in about a second (as a process
    exiting on SIGTERM), not at the end of its 30 s grace period."""
    k.run("apply", "-f", "-", stdin=yaml.safe_dump(node("drainme", labels={"pool": "drain"})))
    manifest = yaml.safe_load(job_manifest("j", ns, run=None, parallelism=2, completions=2, grace=120))
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "drain"}
    k.run("apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    wait_until(running(k, ns, "j", 2), "two running pods on the node")
    started = time.monotonic()
    out = k.out("drain", "drainme", "--timeout=100s")
    took = time.monotonic() - started
    assert "node/drainme cordoned" in out and "node/drainme drained" in out
    assert took < 60, f"drain took {took:.1f}s (the pods' grace period is 120 s)"
    assert all(p["spec"].get("nodeName") != "drainme" or p["status"]["phase"] != "Running"
               for p in pods_of(k, ns, "j"))


# ---------------------------------------------------------------- namespaces


def test_kubectl_delete_namespace(k: Kubectl) -> None:
    k.out("create", "namespace", "doomed")
    k.run("apply", "-f", "-", stdin=job_manifest("j", "doomed", run=None, grace=2))
    wait_until(running(k, "doomed", "j", 1), "the pod to run")
    k.out("delete", "namespace", "doomed", "--wait=false")
    assert k.json("get", "namespace", "doomed")["status"]["phase"] == "Terminating"
    cp = k.run("run", "late", "-n", "doomed", "--image=busybox", check=False)
    assert cp.returncode == 1
    assert "unable to create new content in namespace doomed because it is being terminated" in cp.stderr
    k.out("wait", "--for=delete", "namespace/doomed", "--timeout=60s")
    assert k.run("get", "namespace", "doomed", check=False).returncode == 1


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_system_namespaces_may_not_be_deleted(k: Kubectl, name: str) -> None:
    cp = k.run("delete", "namespace", name, check=False)
    assert cp.returncode == 1
    assert f'Error from server (Forbidden): namespaces "{name}" is forbidden: this namespace may not be deleted' \
        in cp.stderr


# ---------------------------------------------------------------- the official Python client


def test_the_python_client_reads_a_pdb_a_job_and_a_cronjob(k: Kubectl, ns: str) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    k.run("apply", "-f", "-", stdin=yaml.safe_dump({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "budget", "namespace": ns},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"batch.kubernetes.io/job-name": "j"}}}}))
    k.run("apply", "-f", "-", stdin=job_manifest("j", ns, run=None, parallelism=2, completions=2))
    k.out("create", "cronjob", "tick", "-n", ns, "--image=busybox", "--schedule=@hourly")
    wait_until(running(k, ns, "j", 2), "two running pods")
    wait_until(lambda: k.json("get", "pdb", "budget", "-n", ns).get("status", {}).get("currentHealthy") == 2,
               "the budget's status")
    client = kubernetes.config.new_client_from_config(config_file=str(k.kubeconfig))
    pdb = kubernetes.client.PolicyV1Api(client).read_namespaced_pod_disruption_budget("budget", ns)
    assert pdb.status.disruptions_allowed == 1 and pdb.status.current_healthy == 2
    (cond,) = pdb.status.conditions
    assert (cond.type, cond.status, cond.reason, cond.message) == ("DisruptionAllowed", "True", "SufficientPods", "")
    assert cond.last_transition_time is not None and cond.observed_generation == 1
    batch = kubernetes.client.BatchV1Api(client)
    job = batch.read_namespaced_job("j", ns)
    assert job.status.active == 2 and job.spec.template.spec.restart_policy == "Never"
    assert batch.read_namespaced_cron_job("tick", ns).spec.schedule == "@hourly"
    assert [j.metadata.name for j in batch.list_namespaced_job(ns).items] == ["j"]
    pods = kubernetes.client.CoreV1Api(client).list_namespaced_pod(ns).items
    assert all(p.status.container_statuses[0].ready for p in pods)
