"""``fake.DIRECT_STATUS_WRITE``: the kubelet's status writes through the in-process client's
``pod_status_writer`` (``Store.patch_pod_status``) against ``client.patch(..., {"status": ...},
"status", owned=True)`` (the reference): random status patches on random stored pods leave two
stores with the same objects, resourceVersions, watch events and errors; a subclass that
overrides ``patch`` gets its patches; and a node-side day (starts, exits, restarts, evictions,
rejections) ends with the same history and objects either way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ksched.api.errors import ApiError
from ksched.apiserver.inprocess import InProcessClient
from ksched.apiserver.store import Store
from ksched.clock import VirtualClock
from ksched.kubelet import fake

VALUES = st.one_of(st.none(), st.sampled_from(["Running", "Failed", "", "2024-01-01T00:00:00Z", "bad-time"]),
                   st.integers(0, 3), st.just([{"type": "Ready", "status": "True"}]), st.just({"nested": 1}))
STATUS = st.one_of(st.dictionaries(st.sampled_from(["phase", "startTime", "reason", "conditions", "message",
                                                    "podIP"]), VALUES, max_size=4),
                   st.just([1]), st.just("x"))


def _store() -> Store:
    s = Store(VirtualClock())
    s.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"},
              "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Pending"}})
    s.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b", "namespace": "default",
                                                              "finalizers": ["x/y"]},
              "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"}})
    s.delete("Pod", "default", "b")  # (being deleted: the generic path)
    return s


def _outcome(s: Store, writes: list[tuple[str, Any]], direct: bool) -> list[Any]:
    w = s.watch("Pod", None, str(s._rv))
    out: list[Any] = []
    s.after_write.append(lambda: out.append("written"))  # (the controllers' settle)
    client = InProcessClient(s)
    for name, status in writes:
        try:
            if direct:
                got = client.pod_status_writer()("default", name, status)
            else:
                got = client.patch("Pod", "default", name, {"status": status}, "application/merge-patch+json",
                                   "status", owned=True)
            out.append(("ok", json.dumps(got.raw, sort_keys=True), got.resource_version))
        except ApiError as e:
            out.append(("error", type(e).__name__, str(e)))
        except (TypeError, ValueError, AttributeError) as e:
            out.append(("raised", type(e).__name__))
    events = []
    while (ev := w.next(timeout=0)) is not None:
        events.append((ev.type, json.dumps(ev.object.raw, sort_keys=True)))
    out.append(events)
    out.append(sorted(json.dumps(o.raw, sort_keys=True) for o in s.items("Pod")))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "missing"]), STATUS), min_size=1, max_size=5))
def test_the_direct_write_is_the_patch(writes: list[tuple[str, Any]]) -> None:
    assert _outcome(_store(), writes, True) == _outcome(_store(), writes, False)


def test_a_client_overriding_patch_gets_the_kubelets_writes() -> None:
    class Spy(InProcessClient):
        def patch(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(args[2])
            return super().patch(*args, **kwargs)

    seen: list[str] = []
    s = Store(VirtualClock())
    assert fake._status_writer(Spy(s)) is None
    assert fake._status_writer(InProcessClient(s)) is not None
    assert fake._status_writer(object()) is None


def test_a_node_side_day_ends_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from ksched.sim.nodebench import node_side_day

    def state(sim: Any) -> list[str]:
        return sorted(json.dumps(o.raw, default=str) for kind in ("Pod", "Node", "Lease")
                      for o in sim.store.items(kind))

    monkeypatch.setattr(fake, "DIRECT_STATUS_WRITE", False)
    ref, r1 = node_side_day(9, 60, seed=3)
    monkeypatch.setattr(fake, "DIRECT_STATUS_WRITE", True)
    fast, r2 = node_side_day(9, 60, seed=3)
    assert fast.kubelet._write_status is not None
    timings = ("seconds", "cpu_seconds")
    assert {k: v for k, v in r1.items() if not k.endswith(timings)} == {
        k: v for k, v in r2.items() if not k.endswith(timings)}
    assert r1["evicted_by_kubelet"] > 0
    assert list(fast.history.rows) == list(ref.history.rows)
    assert fast.kubelet.pressure.passes == ref.kubelet.pressure.passes
    assert state(fast) == state(ref)
    assert fast.store._rv == ref.store._rv
