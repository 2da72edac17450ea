"""What `ksched serve` ends with on a set of manifests: start it (one scheduler, or
``--schedulers N``), wait until the cluster is at rest, print one JSON line (pods left, bound,
unschedulable, Preempted events, bound pods per priority, the ``preemption:`` parts of the
pending pods' messages, wall seconds to rest), stop it.

    PYTHONPATH=src python scripts/serve_outcome.py examples/cluster --schedulers 2
    PYTHONPATH=src python scripts/serve_outcome.py examples/cluster --src /tmp/old/src --schedulers 2

``--src``: the ksched sources the server runs (another checkout, for before/after); the
client side is the ``ksched`` on PYTHONPATH. At rest: nothing terminating, every pod bound or
tried and not nominated, nothing changed for 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ksched.api.pod import Pod
from ksched.client.rest import RestClient


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("manifests", type=Path)
    ap.add_argument("--schedulers", type=int, default=1, help="1: one scheduler in-process (default)")
    ap.add_argument("--src", type=Path, default=None, help="ksched sources the server runs")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for rest")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="serve-outcome-")
    kc = os.path.join(tmp, "kubeconfig")
    env = dict(os.environ)
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
    elif env.get("PYTHONPATH"):  # the server runs in a temporary directory: no relative entries
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    cmd = [sys.executable, "-m", "ksched.cli.main", "serve", "--listen", "127.0.0.1:0",
           "--load", str(args.manifests.resolve()), "--kubeconfig-out", kc]
    if args.schedulers > 1:
        cmd += ["--schedulers", str(args.schedulers)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not os.path.exists(kc):
            if proc.poll() is not None:
                print(f"ksched serve exited with {proc.returncode}", file=sys.stderr)
                return 1
            time.sleep(0.2)
        client = RestClient(kubeconfig=kc)
        last: object = None
        quiet = 0
        pods: list[Pod] = []
        while quiet < 5:
            if time.monotonic() - start > args.timeout:
                print(f"not at rest after {args.timeout:.0f} s", file=sys.stderr)
                return 1
            time.sleep(1.0)
            try:
                pods = [p for p in client.list("Pod")[0] if isinstance(p, Pod)]
            except OSError:
                continue  # still starting
            at_rest = bool(pods) and all(
                p.deletion_timestamp is None
                and (p.node_name or (p.condition("PodScheduled") is not None and not p.nominated_node_name))
                for p in pods)
            sig = sorted((p.key, p.node_name, p.resource_version) for p in pods)
            quiet = quiet + 1 if at_rest and sig == last else 0
            last = sig
        seconds = time.monotonic() - start
        pending = [p for p in pods if not p.node_name]
        messages: Counter[str] = Counter()
        for p in pending:
            post = ((p.condition("PodScheduled") or {}).get("message") or "").partition("preemption: ")[2]
            messages["preemption: " + post if post else "(no preemption part)"] += 1
        preempted = sum(1 for e in client.list("Event")[0] if e.raw.get("reason") == "Preempted")
        print(json.dumps({
            "schedulers": args.schedulers, "pods": len(pods), "bound": len(pods) - len(pending),
            "unschedulable": len(pending), "preempted": preempted,
            "bound_per_priority": dict(sorted(Counter(p.priority for p in pods if p.node_name).items())),
            "pending_messages": dict(messages), "seconds": round(seconds, 1)}))
        return 0
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
