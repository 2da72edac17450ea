"""``ksched serve --scenario FILE``: a scenario timeline (``ksched.sim.timeline``, the document
``ksched simulate --timeline`` takes) run against the live embedded cluster on the wall clock,
its times counted from when serve started listening.

The file is read and checked before the cluster is built (a malformed event is refused with the
file, its index in ``events`` and the field, and serve does not start). Each action then runs
when its time has come, in the node agent's thread (before the simulated kubelet's step, so
``failNode`` and the like never race the kubelet), or in a thread of its own when serve runs no
kubelets (``--no-kubelet``: the kubelet actions then fail, as in ``simulate --no-kubelet``). What
each action did is printed as ``scenario: +<seconds>s <action> <detail>``; an action the API
refuses (a patch of an object that does not exist...) is reported as
``scenario: <file>: events[<i>]: <action>: <error>`` on stderr and the others still run;
``scenario: done`` follows the last one.

Divergences from ``simulate --timeline``: no history report (``kubectl get events``, pods and
nodes show what happened); actions run on the agent's 0.1 s ticks, so a little after their
time.
"""

from __future__ import annotations

import logging
import sys
import threading
from dataclasses import dataclass
from typing import Any, TextIO

from ksched.kubelet.agent import NodeAgent
from ksched.sim.timeline import History, TimelineAction, TimelineRunner

__all__ = ["LiveScenario"]

log = logging.getLogger(__name__)


@dataclass
class _LiveCluster:
    """What a TimelineRunner needs of a cluster."""

    clock: Any
    client: Any
    store: Any
    kubelet: Any


class LiveScenario:
    def __init__(self, actions: list[TimelineAction], clock: Any, client: Any, store: Any, kubelet: Any = None,
                 out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.history = History(clock, clock.now())
        self.runner = TimelineRunner(_LiveCluster(clock, client, store, kubelet), actions, self.history)
        self.out = out
        self.err = err
        self.finished = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if not actions:
            self._done()

    def step(self) -> int:
        """Run the actions whose time has come; how many ran."""
        if self.finished.is_set():
            return 0
        rows, errors = len(self.history.rows), len(self.runner.errors)
        try:
            n = self.runner.apply_due()
        except Exception as e:  # a bug in an action: say so, carry on with the next ones
            a = self.runner.actions[self.runner.done - 1]
            log.exception("scenario: %s: %s crashed", a.where, a.op)
            self.runner.errors.append(f"{a.where}: {a.op}: {e}")
            n = 1
        for t, _, what, detail in self.history.rows[rows:]:
            self._print(self.out or sys.stdout, f"scenario: +{t:g}s {what} {detail}")
        for e in self.runner.errors[errors:]:
            self._print(self.err or sys.stderr, f"scenario: {e}")
        if self.runner.done == len(self.runner.actions):
            self._done()
        return n

    def _done(self) -> None:
        self.finished.set()
        self._print(self.out or sys.stdout, f"scenario: done ({len(self.runner.actions)} actions, "
                                            f"{len(self.runner.errors)} failed)")

    @staticmethod
    def _print(stream: TextIO, line: str) -> None:
        print(line, file=stream, flush=True)

    def attach(self, agent: NodeAgent) -> None:
        """Run in the node agent's thread, before each of its steps, acting on its kubelet."""
        self.runner.sim.kubelet = agent.kubelet
        agent.hooks.append(self.step)

    # ---------------------------------------------------------------- without a node agent

    def start(self, interval: float = 0.1) -> None:
        """Run in a thread of its own (serve without kubelets)."""
        def run() -> None:
            while not self._stop.is_set() and not self.finished.is_set():
                self.step()
                self._stop.wait(interval)

        self._thread = threading.Thread(target=run, name="scenario", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
