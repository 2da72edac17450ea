"""``ksched run`` operated as kube-scheduler is: HTTPS on --bind-address:--secure-port with
/healthz, /livez, /readyz (the leaderElection watchdog, shutdown, sched-handler-sync), /metrics
and /configz; leader election on kube-scheduler's own Lease when a profile is
default-scheduler; a warm, ready standby that takes over at once when the leader stops cleanly;
exit 1 when the lease is lost; the serving certificate self-signed for localhost/127.0.0.1 or
the one given. Against ``ksched serve`` in another process."""

from __future__ import annotations

import contextlib
import json
import signal
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from serve_helpers import (
    Http,
    Proc,
    free_port,
    ksched_cmd,
    node,
    pod,
    subprocess_env,
    wait_for,
    wait_http_ready,
)

from ksched.apiserver.tls import make_self_signed

PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


class Env:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.kubeconfig = tmp / "kubeconfig"
        self.env = subprocess_env(tmp)
        self.procs: list[Proc] = []
        self.api = Http("127.0.0.1", self.port)

    def start(self, name: str, *args: str) -> Proc:
        p = Proc(ksched_cmd(*args), self.tmp / f"{name}.log", self.env, self.tmp)
        self.procs.append(p)
        return p

    def scheduler(self, name: str, *extra: str) -> tuple[Proc, Http]:
        port = free_port()
        p = self.start(name, "run", "--kubeconfig", str(self.kubeconfig), "--bind-address", "127.0.0.1",
                       "--secure-port", str(port), "--id", name, *extra)
        p.wait_log("ksched scheduling pods", timeout=60)
        return p, Http("127.0.0.1", port, ssl_context=_unverified())

    def lease(self, name: str = "kube-scheduler") -> dict[str, Any]:
        st, _, body = self.api.get(f"{LEASES}/{name}")
        return body if st == 200 else {}

    def holder(self, name: str = "kube-scheduler") -> str:
        return str((self.lease(name).get("spec") or {}).get("holderIdentity") or "")

    def stop(self, since: int = 0) -> None:
        """Stop the processes started since the ``since``-th (all by default)."""
        for p in reversed(self.procs[since:]):
            p.stop()
        del self.procs[max(since, 0):]

    @contextlib.contextmanager
    def own_processes(self) -> Iterator[None]:
        """A test's processes are stopped when it ends, failed or not (the next test shares the
        API server and must not meet them)."""
        mark = len(self.procs)
        try:
            yield
        finally:
            self.stop(mark)


def _unverified() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    e = Env(tmp_path_factory.mktemp("serving"))
    try:
        serve = e.start("serve", "serve", "--no-scheduler", "--listen", f"127.0.0.1:{e.port}",
                        "--kubeconfig-out", str(e.kubeconfig))
        wait_http_ready(e.port, proc=serve)
        serve.wait_log("kubeconfig:")
        st, _, body = e.api.post("/api/v1/nodes", node("n1"))
        assert st == 201, body
        yield e
    finally:
        e.stop()


def _text(http: Http, path: str) -> tuple[int, str]:
    st, _, body = http.get(path)
    return st, body if isinstance(body, str) else json.dumps(body)


def _bound(e: Env, name: str) -> bool:
    st, _, body = e.api.get(f"{PODS}/{name}")
    return st == 200 and bool(body["spec"].get("nodeName"))


def test_health_metrics_configz_and_failover_over_https(env: Env) -> None:
    e = env
    with e.own_processes():
        # A long lease: a standby that took over by waiting for it to expire (not because the leader
        # released it) would need a minute, far beyond the waits below.
        slow = ("--leader-elect-lease-duration", "60s", "--leader-elect-renew-deadline", "40s")
        a, ha = e.scheduler("sched-a", *slow)
        wait_for(lambda: e.holder() == "sched-a", timeout=60, what="sched-a to hold kube-system/kube-scheduler")
        wait_for(lambda: _text(ha, "/readyz")[0] == 200, timeout=60, what="sched-a ready")
        assert _text(ha, "/healthz") == (200, "ok")
        assert _text(ha, "/healthz?verbose") == (200, "[+]leaderElection ok\nhealthz check passed\n")
        assert _text(ha, "/livez?verbose") == (200, "[+]ping ok\nlivez check passed\n")
        assert _text(ha, "/readyz?verbose") == (
            200, "[+]leaderElection ok\n[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check passed\n")
        assert _text(ha, "/readyz/sched-handler-sync") == (200, "ok")
        assert _text(ha, "/healthz/leaderElection") == (200, "ok")
        assert _text(ha, "/nope") == (404, "404 page not found\n")
        st, headers, metrics = ha.get("/metrics")
        assert st == 200 and headers["Content-Type"].startswith("text/plain")
        assert 'leader_election_master_status{name="kube-scheduler"} 1.0' in metrics
        assert 'scheduler_pending_pods{queue="active"}' in metrics and "process_cpu_seconds_total" in metrics
        st, headers, cz = ha.get("/configz")
        assert st == 200 and headers["Content-Type"] == "application/json"
        cc = cz["componentconfig"]
        assert cc["LeaderElection"] == {"LeaderElect": True, "LeaseDuration": "1m0s", "RenewDeadline": "40s",
                                        "RetryPeriod": "2s", "ResourceLock": "leases", "ResourceName": "kube-scheduler",
                                        "ResourceNamespace": "kube-system"}
        assert cc["Profiles"][0]["SchedulerName"] == "default-scheduler"
        assert cc["ClientConnection"]["Kubeconfig"] == str(e.kubeconfig)

        # A second replica: a warm standby, ready, not leading, not scheduling.
        b, hb = e.scheduler("sched-b", *slow)
        wait_for(lambda: _text(hb, "/readyz")[0] == 200, timeout=60, what="the standby ready")
        assert 'leader_election_master_status{name="kube-scheduler"} 0.0' in hb.get("/metrics")[2]
        assert e.api.post(PODS, pod("p1"))[0] == 201
        wait_for(lambda: _bound(e, "p1"), timeout=60, what="p1 bound")
        st, _, events = e.api.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=p1")
        assert [ev["source"]["component"] for ev in events["items"] if ev["reason"] == "Scheduled"] == [
            "default-scheduler"]
        assert e.holder() == "sched-a"

        # SIGTERM: the leader finishes, releases the Lease, and the standby takes over at once.
        a.p.send_signal(signal.SIGTERM)
        assert a.p.wait(60) == 0, a.log()  # its log if not: the cause
        wait_for(lambda: e.holder() == "sched-b", timeout=30, what="sched-b to take over at once (not after 60s)")
        spec = e.lease()["spec"]
        assert spec["leaseTransitions"] >= 1 and spec["leaseDurationSeconds"] == 60
        assert e.api.post(PODS, pod("p2"))[0] == 201
        wait_for(lambda: _bound(e, "p2"), timeout=60, what="p2 bound by the new leader")
        # client-go's lock events, on the Lease.
        st, _, evs = e.api.get("/api/v1/namespaces/kube-system/events?fieldSelector=involvedObject.name=kube-scheduler")
        msgs = [ev["message"] for ev in evs["items"] if ev["reason"] == "LeaderElection"]
        assert "sched-a became leader" in msgs and "sched-a stopped leading" in msgs and "sched-b became leader" in msgs
        b.p.send_signal(signal.SIGTERM)
        assert b.p.wait(60) == 0, b.log()  # its log if not: the cause
        assert "Traceback" not in a.log() + b.log()


def test_losing_the_lease_exits_1(env: Env) -> None:
    e = env
    with e.own_processes():
        cfg = e.tmp / "secondary.yaml"
        cfg.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                       "kind": "KubeSchedulerConfiguration",
                                       "profiles": [{"schedulerName": "batch"}]}))
        p, h = e.scheduler("lossy", "--config", str(cfg), "--leader-elect-lease-duration", "4s",
                           "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms")
        # A secondary scheduler elects on ksched's own Lease, not kube-scheduler's.
        wait_for(lambda: e.holder("ksched") == "lossy", timeout=60, what="lossy to hold kube-system/ksched")
        assert h.get("/configz")[2]["componentconfig"]["LeaderElection"]["ResourceName"] == "ksched"
        # Someone else writes the record: renewals fail until the renew deadline, then it exits.
        lease = e.lease("ksched")
        lease["spec"]["holderIdentity"] = "usurper"
        assert e.api.put(f"{LEASES}/ksched", lease)[0] == 200
        assert p.p.wait(60) == 1
        assert "error: leader election lost" in p.log()


def test_serving_certificates(env: Env, tmp_path: Path) -> None:
    e = env
    with e.own_processes():
        # Self-signed by default, valid for 127.0.0.1 and localhost.
        p, _ = e.scheduler("certs-default", "--leader-elect=false")
        port = int(p.cmd[p.cmd.index("--secure-port") + 1])
        pem = ssl.get_server_certificate(("127.0.0.1", port))
        (tmp_path / "served.crt").write_text(pem)
        ctx = ssl.create_default_context(cafile=str(tmp_path / "served.crt"))
        assert Http("127.0.0.1", port, ssl_context=ctx).get("/livez")[:3:2] == (200, "ok")
        p.stop()
        # The certificate given.
        crt, key = make_self_signed(tmp_path / "pki", ["127.0.0.1"], common_name="operator-ca")
        p, _ = e.scheduler("certs-given", "--leader-elect=false", "--tls-cert-file", str(crt),
                           "--tls-private-key-file", str(key))
        port = int(p.cmd[p.cmd.index("--secure-port") + 1])
        ctx = ssl.create_default_context(cafile=str(crt))
        assert Http("127.0.0.1", port, ssl_context=ctx).get("/healthz?verbose")[:3:2] == (
            200, "[+]ping ok\nhealthz check passed\n")
        p.stop()
        # Half a pair, and a port that is taken, are refused.
        assert _run_in_process("--kubeconfig", str(e.kubeconfig), "--tls-cert-file", str(crt)) == (
            2, "error: --tls-cert-file and --tls-private-key-file go together")
        code, err = _run_in_process("--kubeconfig", str(e.kubeconfig), "--bind-address", "127.0.0.1",
                                    "--secure-port", str(e.port))
        assert code == 1 and err.startswith(f"error: failed to start secure server on 127.0.0.1:{e.port}")


def _run_in_process(*args: str) -> tuple[int, str]:
    """``ksched run ARGS`` in this process (for the cases that end before it starts anything):
    exit code and the last line on stderr."""
    import contextlib
    import io

    from ksched.cli import run
    from ksched.cli.main import build_parser

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = run.run(build_parser().parse_args(["run", *args]))
    return code, err.getvalue().strip().splitlines()[-1]

def test_dispatcher_and_instance_endpoints(env: Env) -> None:
    """The multi-scheduler layout is probed the same way: an instance's /readyz waits for its
    handlers; two dispatchers elect on kube-system/ksched-dispatcher, the standby is ready, and
    the leader hands over at once on SIGTERM."""
    e = env
    with e.own_processes():
        iport = free_port()
        inst = e.start("inst", "run", "--kubeconfig", str(e.kubeconfig), "--dispatch", "--instance", "sched-0",
                       "--bind-address", "127.0.0.1", "--secure-port", str(iport))
        inst.wait_log("ksched instance sched-0", timeout=60)
        hi = Http("127.0.0.1", iport, ssl_context=_unverified())
        wait_for(lambda: _text(hi, "/readyz")[0] == 200, timeout=60, what="the instance ready")
        assert _text(hi, "/readyz?verbose")[1] == "[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check passed\n"
        assert _text(hi, "/healthz?verbose")[1] == "[+]ping ok\nhealthz check passed\n"
        assert "ksched_binding_conflicts_total" in hi.get("/metrics")[2]
        disp: list[tuple[Proc, Http]] = []
        for name in ("disp-a", "disp-b"):
            port = free_port()
            p = e.start(name, "dispatch", "--kubeconfig", str(e.kubeconfig), "--leader-elect", "--id", name,
                        "--leader-elect-lease-duration", "60s", "--leader-elect-renew-deadline", "40s",
                        "--bind-address", "127.0.0.1", "--secure-port", str(port))
            p.wait_log("ksched dispatcher for default-scheduler", timeout=60)
            disp.append((p, Http("127.0.0.1", port, ssl_context=_unverified())))
            if name == "disp-a":
                wait_for(lambda: e.holder("ksched-dispatcher") == "disp-a", timeout=60, what="disp-a leading")
        for _, h in disp:
            wait_for(lambda h=h: _text(h, "/readyz")[0] == 200, timeout=60, what="a dispatcher ready")
            assert _text(h, "/healthz?verbose")[1] == "[+]leaderElection ok\nhealthz check passed\n"
            assert _text(h, "/configz")[0] == 404
        assert 'leader_election_master_status{name="ksched-dispatcher"} 0.0' in disp[1][1].get("/metrics")[2]
        assert e.api.post(PODS, pod("dispatched"))[0] == 201
        wait_for(lambda: _bound(e, "dispatched"), timeout=60, what="the pod dispatched to sched-0 and bound")
        body = e.api.get(f"{PODS}/dispatched")[2]
        assert body["metadata"]["annotations"]["ksched.io/instance"] == "sched-0"
        a = disp[0][0]
        a.p.send_signal(signal.SIGTERM)
        assert a.p.wait(60) == 0, a.log()  # its log if not: the cause
        wait_for(lambda: e.holder("ksched-dispatcher") == "disp-b", timeout=30,
                 what="disp-b taking over at once (not after 60s)")
        for p in (disp[1][0], inst):
            p.p.send_signal(signal.SIGTERM)
            assert p.p.wait(60) == 0, p.log()  # its log if not: the cause
