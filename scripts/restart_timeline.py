"""Where a restart's wall time goes: ``ksched run`` against the embedded API server, with every
request and response time-stamped on both sides, as one merged timeline.

The server (this process) serves the restart benchmark's cluster (``ksched.sim.restart``: nodes,
bound pods, one pending pod); the scheduler is a child process running this script with
``--child``, which wraps the client's transport (each request's send and answer), the
reflectors (list start, watching) and the binding, then runs ``ksched run``. The server side
stamps each request's arrival and how long its handler took (lists: the store and the JSON
encoding). Times are seconds from the child's start (``time.time()`` on both sides; the CPU
column is the scheduler process's CPU seconds then). With ``--cold`` the server is not warmed
(``ApiServer.warm_up``), which shows the stall of its first write of a kind::

    PYTHONPATH=src python scripts/restart_timeline.py [--cold] [--nodes 5000] [--pods 10000]

The wrappers cost the scheduler a little CPU; ``ksched bench --restart --remote`` gives the
unwrapped figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any


def child(out: str, argv: list[str]) -> int:
    """Run ``ksched run argv`` with its requests stamped; the stamps go to ``out`` at exit."""
    import atexit

    marks: list[tuple[float, float, str]] = []

    def mark(what: str, at: tuple[float, float] | None = None) -> None:
        marks.append((*(at or (time.time(), time.process_time())), what))

    mark("interpreter started")
    atexit.register(lambda: open(out, "w").write(json.dumps(marks)))  # noqa: SIM115

    import ksched.client.informer as informer
    import ksched.client.rest as rest
    import ksched.client.transport as transport

    request, stream = transport.Transport.request, transport.Transport.stream

    def stamped_request(self: Any, method: str, path: str, *a: Any, **kw: Any) -> Any:
        sent = (time.time(), time.process_time())
        r = request(self, method, path, *a, **kw)
        mark(f"sent {method} {path[:70]}", sent)
        mark(f"answered {method} {path[:70]} ({len(r[2])} B)")
        return r

    def stamped_stream(self: Any, method: str, path: str, *a: Any, **kw: Any) -> Any:
        mark(f"watch {path[:70]}")
        return stream(self, method, path, *a, **kw)

    transport.Transport.request = stamped_request  # type: ignore[method-assign]
    transport.Transport.stream = stamped_stream  # type: ignore[method-assign]
    list_and_watch, bind = informer.Reflector.list_and_watch, rest.RestClient.bind

    def stamped_list_and_watch(self: Any) -> None:
        mark(f"list {self.kind}")
        list_and_watch(self)
        mark(f"watching {self.kind}")

    def stamped_bind(self: Any, *a: Any, **kw: Any) -> None:
        mark("binding")
        bind(self, *a, **kw)
        mark("bound")

    informer.Reflector.list_and_watch = stamped_list_and_watch  # type: ignore[method-assign]
    rest.RestClient.bind = stamped_bind  # type: ignore[method-assign]
    from ksched.cli.main import main

    mark("ksched imported")
    return main(["run", *argv])


def server(args: argparse.Namespace) -> int:
    from ksched.apiserver.http import ApiServer
    from ksched.apiserver.kubeconfig import write_kubeconfig
    from ksched.apiserver.store import Store
    from ksched.clock import RealClock
    from ksched.sim.restart import _cluster

    store = Store(RealClock(), auto_create_namespaces=True)
    _cluster(store, args.nodes, args.pods)
    events: list[tuple[float, float, str]] = []  # (time, -1: no CPU column, what)
    bound = threading.Event()

    def hook(etype: str, kind: str, obj: Any, rv: int) -> None:
        if kind == "Pod" and obj.name == "pending-0" and obj.node_name:
            events.append((time.time(), -1.0, f"server: pending-0 bound to {obj.node_name}"))
            bound.set()

    store.on_commit.append(hook)
    api = ApiServer(store, "127.0.0.1", 0)
    dispatch, list_ = api._dispatch, api._list

    async def stamped_dispatch(request: Any) -> Any:
        t = time.time()
        r = await dispatch(request)
        events.append((t, -1.0, f"server: {request.method} {request.path_qs[:70]} handled in "
                                f"{time.time() - t:.4f} s"))
        return r

    def stamped_list(request: Any, cls: Any, namespace: str) -> Any:
        t = time.time()
        r = list_(request, cls, namespace)
        events.append((t, -1.0, f"server: list {cls.KIND} page served in {time.time() - t:.4f} s"))
        return r

    api._dispatch = stamped_dispatch  # type: ignore[method-assign]
    api._list = stamped_list  # type: ignore[method-assign]
    if not args.cold:
        api.warm_up()
    api.start()
    tmp = tempfile.TemporaryDirectory(prefix="ksched-timeline-")
    kubeconfig = str(write_kubeconfig(f"{tmp.name}/kubeconfig", api.url))
    out = f"{tmp.name}/child.json"
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode, as an installed scheduler reads it
    start = time.time()
    proc = subprocess.Popen([sys.executable, __file__, "--child", out, "--kubeconfig", kubeconfig,
                             "--secure-port", "0", "--parent-pid", str(os.getpid())], env=env,
                            stdout=subprocess.DEVNULL)
    try:
        ok = bound.wait(args.timeout)
    finally:
        proc.terminate()
        proc.wait(30)
        api.stop()
    marks = [tuple(m) for m in json.load(open(out))] if os.path.exists(out) else []  # noqa: SIM115
    tmp.cleanup()
    for t, cpu, what in sorted([*marks, *events]):
        side = "server" if cpu < 0 else f"cpu {cpu:5.3f}"
        print(f"{t - start:7.3f}  {side:>9}  {what.removeprefix('server: ')}")
    if not ok:
        print(f"error: the pending pod was not bound in {args.timeout} s", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--cold", action="store_true", help="do not warm the API server up")
    p.add_argument("--timeout", type=float, default=120.0)
    return server(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
