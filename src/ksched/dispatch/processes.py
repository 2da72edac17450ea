"""Running the dispatcher and the scheduler instances as separate processes (``ksched serve
--schedulers N``, ``ksched bench --schedulers N``): each is ``python -m ksched.cli.main run
--instance NAME --dispatch`` or ``... dispatch`` against a kubeconfig, and exits when its
parent does."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["ProcessGroup", "instance_names", "wait_until_signalled"]

log = logging.getLogger(__name__)


def instance_names(n: int, prefix: str = "sched") -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def _base(verbose: int) -> list[str]:
    return [sys.executable, "-m", "ksched.cli.main", *(["-" + "v" * verbose] if verbose else [])]


@dataclass
class ProcessGroup:
    """The dispatcher and the instances, started and stopped together."""

    kubeconfig: str
    verbose: int = 0
    config: str | None = None
    lease_duration: float | None = None
    lease_namespace: str | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # The children's environment (None: this process's).
    env: dict[str, str] | None = None

    def _common(self) -> list[str]:
        # No secure port: several children share this host (and none is probed).
        args = ["--kubeconfig", self.kubeconfig, "--parent-pid", str(os.getpid()), "--secure-port", "0"]
        if self.lease_namespace:
            args += ["--lease-namespace", self.lease_namespace]
        return args

    def start_instance(self, name: str, *, partition_label: str = "", partition: str = "",
                       labels: Sequence[str] = (), extra: Sequence[str] = ()) -> subprocess.Popen[bytes]:
        cmd = [*_base(self.verbose), "run", "--instance", name, "--dispatch", *self._common()]
        if self.config:
            cmd += ["--config", self.config]
        if self.lease_duration is not None:
            cmd += ["--instance-lease-duration", str(self.lease_duration)]
        if partition_label:
            cmd += ["--partition-label", partition_label, "--partition", partition]
        for lab in labels:
            cmd += ["--instance-label", lab]
        cmd += list(extra)
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=self.env)
        self.processes[name] = p
        return p

    def start_scheduler(self, name: str = "scheduler", extra: Sequence[str] = ()) -> subprocess.Popen[bytes]:
        """A plain ``ksched run`` (no dispatcher): it schedules every pod of its profiles."""
        cmd = [*_base(self.verbose), "run", *self._common()]
        if self.config:
            cmd += ["--config", self.config]
        cmd += list(extra)
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=self.env)
        self.processes[name] = p
        return p

    def start_dispatcher(self, scheduler_names: Sequence[str] = (), policy: str | None = None) -> subprocess.Popen[bytes]:
        cmd = [*_base(self.verbose), "dispatch", *self._common()]
        for n in scheduler_names:
            cmd += ["--scheduler-name", n]
        if policy:
            cmd += ["--policy", policy]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=self.env)
        self.processes["dispatcher"] = p
        return p

    def alive(self) -> dict[str, bool]:
        return {n: p.poll() is None for n, p in self.processes.items()}

    def stop(self, timeout: float = 15.0) -> dict[str, int | None]:
        """SIGTERM every process (instances first: they release their Leases), then wait; kill
        what is still there after ``timeout``. Returns the exit codes."""
        order = [n for n in self.processes if n != "dispatcher"] + [n for n in self.processes if n == "dispatcher"]
        for n in order:
            p = self.processes[n]
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for n in order:
            p = self.processes[n]
            try:
                codes[n] = p.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) did not stop: killing it", n, p.pid)
                p.kill()
                codes[n] = p.wait()
        return codes


def wait_until_signalled(parent_pid: int | None = None, stop: threading.Event | None = None,
                         failed: threading.Event | None = None) -> bool:
    """Block until SIGINT/SIGTERM (or ``stop``), or until the parent process ``parent_pid`` is
    gone (a child of ``ksched serve --schedulers`` never outlives it): True. False as soon as
    ``failed`` is set (the scheduling loop crashed)."""
    done = stop or threading.Event()

    def handler(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    while not done.is_set():
        if failed is not None and failed.is_set():
            return False
        done.wait(0.5)
        if parent_pid is not None and os.getppid() != parent_pid:
            log.warning("parent process %d is gone: stopping", parent_pid)
            return True
    return True
