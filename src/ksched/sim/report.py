"""What a simulation reports: per pod (node or why it is pending, its controller), per node
(allocatable and requested), per Job and CronJob (when there are any), a summary; as JSON, as rich
tables, and as a Markdown report with a utilization plot."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from ksched.api.batch import CronJob, Job
from ksched.api.node import Node
from ksched.api.pod import Pod
from ksched.api.quantity import format_bytes, format_milli, format_value
from ksched.api.resource import ResourceClaim
from ksched.api.resources import is_hugepages, pod_requests
from ksched.kubelet import admitted
from ksched.kubelet.admitted import template_requests
from ksched.sim.simulation import Simulation, SimulationResult

__all__ = ["build_report", "format_resources", "render_table", "write_json", "write_markdown_report"]

_BYTES = ("memory", "ephemeral-storage", "storage")


def format_resource(name: str, v: int) -> str:
    if name == "cpu":
        return format_milli(v)
    if name in _BYTES or is_hugepages(name):
        return format_bytes(v)
    return format_value(v)


def format_resources(d: dict[str, int]) -> dict[str, str]:
    return {k: format_resource(k, v) for k, v in sorted(d.items())}


# A pod's requests read from the kubelet's memo per template (``admitted.template_requests``:
# the replicas of a template share the parsed parts ``pod_requests`` reads, so the sum is worked
# out once per template; nothing is kept on the pods); False: ``pod_requests`` of each pod (the
# reference; the same values).
REQUESTS_BY_TEMPLATE = True


def _requested_by_node(sim: Simulation) -> dict[str, dict[str, int]]:
    """Node name -> the summed requests of the non-terminal pods bound to it, and under "pods"
    how many they are."""
    out: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    by_template = REQUESTS_BY_TEMPLATE and admitted.TEMPLATE_REQUESTS  # (the memo, not each pod's cache)
    for p in sim.store.items("Pod"):
        if isinstance(p, Pod) and p.node_name and not p.is_terminal:
            r = out.setdefault(p.node_name, {})
            # (read once: not kept on the pods)
            for k, v in (template_requests(p) if by_template else pod_requests(p, cache=False)).items():
                r[k] = r.get(k, 0) + v
            counts[p.node_name] = counts.get(p.node_name, 0) + 1
    for name, r in out.items():
        r["pods"] = counts[name]
    return out


class _PodEntry:
    """A pod's entry in the report, built as attributes (see :func:`_pod_entry`)."""

    namespace: str
    name: str
    owner: str | None
    node: str | None
    phase: str
    reason: str | None
    message: str | None
    nominatedNode: str | None
    attempts: int


def _pod_entry(sim: Simulation, pod: Pod, explain: bool) -> dict[str, Any]:
    cond = pod.condition("PodScheduled") or {}
    reason = None
    message = None
    if not pod.node_name:
        reason = cond.get("reason") or ("SchedulingGated" if pod.scheduling_gates else None)
        message = cond.get("message") or (
            f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]" if pod.scheduling_gates else None)
        if reason is None and pod.scheduler_name not in sim.scheduler.profiles:
            reason = "NotOurScheduler"
            message = f'schedulerName "{pod.scheduler_name}" is not a profile of this scheduler'
    elif pod.phase == "Failed":  # refused by the node's kubelet (TopologyAffinityError, ...) or failed
        status = pod.raw.get("status") or {}
        reason, message = status.get("reason"), status.get("message")
    ref = pod.controller_ref()
    # The attribute dict of a fresh _PodEntry: a plain dict, equal and in the same order as the
    # literal, but all of them share one table of keys (PEP 412): 168 bytes instead of 280, 11 MB
    # of the report's peak at 100,000 pods.
    e = _PodEntry()
    e.namespace = pod.namespace
    e.name = pod.name
    e.owner = f"{ref.kind}/{ref.name}" if ref is not None else None
    e.node = pod.node_name or None
    e.phase = pod.phase
    e.reason = reason
    e.message = message
    e.nominatedNode = pod.nominated_node_name or None
    e.attempts = sim.scheduler.attempts.get(pod.key, 0)
    entry: dict[str, Any] = e.__dict__
    # What the node's CPU and device managers gave the pod (ksched.kubelet.cm).
    for key, field in (("ksched.io/cpuset", "cpuset"), ("ksched.io/devices", "devices")):
        if key in pod.annotations:
            with contextlib.suppress(ValueError):
                entry[field] = json.loads(pod.annotations[key])
    if explain:
        ex = sim.scheduler.explanations.get(pod.key)
        entry["explain"] = ex.to_dict() if ex is not None else None
    return entry


def _job_entry(job: Job) -> dict[str, Any]:
    st = job.raw.get("status") or {}
    done = job.finished_condition()
    return {"namespace": job.namespace, "name": job.name, "completions": job.completions,
            "parallelism": job.parallelism, "active": job.active, "succeeded": job.succeeded, "failed": job.failed,
            "condition": done.get("type") if done else None, "reason": done.get("reason") if done else None,
            "startTime": st.get("startTime"), "completionTime": st.get("completionTime")}


def _cronjob_entry(cj: CronJob) -> dict[str, Any]:
    st = cj.raw.get("status") or {}
    return {"namespace": cj.namespace, "name": cj.name, "schedule": cj.schedule,
            "active": [r.get("name") for r in cj.active], "lastScheduleTime": st.get("lastScheduleTime"),
            "lastSuccessfulTime": st.get("lastSuccessfulTime")}


def _batch_entries(sim: Simulation) -> dict[str, Any]:
    jobs = sorted((j for j in sim.store.items("Job") if isinstance(j, Job)), key=lambda j: (j.namespace, j.name))
    cjs = sorted((c for c in sim.store.items("CronJob") if isinstance(c, CronJob)),
                 key=lambda c: (c.namespace, c.name))
    out: dict[str, Any] = {}
    if jobs:
        out["jobs"] = [_job_entry(j) for j in jobs]
    if cjs:
        out["cronjobs"] = [_cronjob_entry(c) for c in cjs]
    return out


def build_report(sim: Simulation, result: SimulationResult, explain: bool = False) -> dict[str, Any]:
    pods = sorted((p for p in sim.store.items("Pod") if isinstance(p, Pod)), key=lambda p: (p.namespace, p.name))
    nodes = sorted((n for n in sim.store.items("Node") if isinstance(n, Node)), key=lambda n: n.name)
    requested = _requested_by_node(sim)
    node_entries = [{"name": n.name, "allocatable": format_resources(n.allocatable),
                     "requested": format_resources(requested.get(n.name) or {"pods": 0})} for n in nodes]
    pod_entries = [_pod_entry(sim, p, explain) for p in pods]
    scheduled = sum(1 for p in pods if p.node_name)
    unschedulable = sum(1 for e in pod_entries if e["node"] is None and e["reason"] in ("Unschedulable",
                                                                                      "SchedulerError"))
    out: dict[str, Any] = {
        "pods": pod_entries,
        "nodes": node_entries,
        **_batch_entries(sim),
        "summary": {"pods": len(pods), "scheduled": scheduled, "unschedulable": unschedulable,
                    "pending": len(pods) - scheduled, "seconds": round(result.virtual_seconds, 3)},
    }
    claims = claim_entries(sim, explain)
    if claims:
        out["resourceClaims"] = claims
    return out


# ``write_json`` encodes plain containers and scalars itself (:func:`_chunks`) and hands any
# other value to ``json``'s encoder; False: ``json``'s encoder for the whole report (the
# reference).
FAST_JSON = True

_INDENT = "  "
_encode_str = json.encoder.encode_basestring_ascii  # (C: what JSONEncoder(indent=2) calls)
_INF = float("inf")
# A string key's text as its entry begins (the newline, the indentation, the key and ": "), per
# level (keys kept only of the exact type str: a key equal to one of them is one, ``1 == 1.0 ==
# True`` aside, which are not strings).
_KEY_TEXT: dict[int, dict[str, str]] = {}


def _scalar_text(v: Any) -> str | None:
    """A scalar's JSON text as ``json.JSONEncoder(indent=2)`` writes it (exact types only: a
    subclass is left to ``json``), None for anything else."""
    t = v.__class__
    if t is str:
        return _encode_str(v)  # type: ignore[no-any-return]
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if t is int:
        return int.__repr__(v)
    if t is float:
        if v != v:
            return "NaN"
        if v == _INF:
            return "Infinity"
        if v == -_INF:
            return "-Infinity"
        return float.__repr__(v)
    return None


def _reference_text(o: Any, level: int) -> str:
    """``o`` as ``json.JSONEncoder(indent=2)`` writes it at nesting ``level``: its text at the
    top with every line break followed by the level's indentation (a line break in the text is
    always one of the encoder's: strings are written with escapes)."""
    text = json.JSONEncoder(indent=2).encode(o)
    return text.replace("\n", "\n" + _INDENT * level) if level else text


def _chunks(o: Any, level: int, out: list[str], active: set[int]) -> None:
    """Append the text of ``o`` at nesting ``level`` to ``out``, as ``json.JSONEncoder(indent=2)
    .iterencode`` gives it: dicts with string keys, lists and scalars of the exact builtin types
    here, a flat dict (scalars only: a report's pod entry) as one piece; anything else (other
    keys, subclasses, other types and their errors) by ``json``'s encoder. ``active``: the ids
    of the containers being written around ``o`` (a cycle is left to ``json``, which refuses
    it)."""
    t = o.__class__
    if t is dict:
        if not o:
            out.append("{}")
            return
        inner = level + 1
        keys = _KEY_TEXT.get(inner)
        if keys is None:
            keys = _KEY_TEXT[inner] = {}
        parts: list[str] = []
        for k, v in o.items():
            kt = keys.get(k)
            if kt is None:
                if k.__class__ is not str:
                    out.append(_reference_text(o, level))
                    return
                kt = "\n" + _INDENT * inner + _encode_str(k) + ": "
                if len(keys) < 1024:
                    keys[k] = kt
            vt = v.__class__
            if vt is str:
                parts.append(kt + _encode_str(v))
            elif v is None:
                parts.append(kt + "null")
            elif vt is int:
                parts.append(kt + int.__repr__(v))
            else:
                text = _scalar_text(v)
                if text is None:
                    break
                parts.append(kt + text)
        else:
            out.append("{" + ",".join(parts) + "\n" + _INDENT * level + "}")
            return
        # Not flat: the entries one by one, each value by this function.
        if any(k.__class__ is not str for k in o) or id(o) in active:
            out.append(_reference_text(o, level))  # (a cycle: json's ValueError)
            return
        active.add(id(o))
        out.append("{")
        first = True
        for k, v in o.items():
            if not first:
                out.append(",")
            first = False
            out.append("\n" + _INDENT * inner + _encode_str(k) + ": ")
            _chunks(v, inner, out, active)
        out.append("\n" + _INDENT * level + "}")
        active.discard(id(o))
        return
    if t is list:
        if not o:
            out.append("[]")
            return
        if id(o) in active:
            out.append(_reference_text(o, level))
            return
        active.add(id(o))
        inner = level + 1
        sep = "\n" + _INDENT * inner
        out.append("[" + sep)
        first = True
        for v in o:
            if not first:
                out.append("," + sep)
            first = False
            text = _scalar_text(v)
            if text is not None:
                out.append(text)
            else:
                _chunks(v, inner, out, active)
        out.append("\n" + _INDENT * level + "]")
        active.discard(id(o))
        return
    text = _scalar_text(o)
    out.append(text if text is not None else _reference_text(o, level))


def write_json(report: dict[str, Any], out: Any) -> int:
    """Write ``report`` to the text stream ``out`` as ``print(json.dumps(report, indent=2))``
    would, in pieces: the whole text and the list of its parts (millions of them for 20,000
    pods) are never in memory at once. Returns the number of characters written. With
    ``FAST_JSON`` the pieces are made by :func:`_chunks` (about three times faster on a report:
    ``json``'s encoder runs in Python when it indents), otherwise by ``json``'s encoder."""
    if FAST_JSON and report.__class__ is dict:
        return _write_fast(report, out)
    n = 0
    buf: list[str] = []
    for chunk in json.JSONEncoder(indent=2).iterencode(report):
        buf.append(chunk)
        if len(buf) >= 16384:
            text = "".join(buf)
            out.write(text)
            n += len(text)
            buf.clear()
    buf.append("\n")
    text = "".join(buf)
    out.write(text)
    return n + len(text)


def _write_fast(report: dict[str, Any], out: Any) -> int:
    """:func:`write_json` by :func:`_chunks`, a top-level list's items written in batches."""
    if not report or any(k.__class__ is not str for k in report):
        text = _reference_text(report, 0) + "\n"
        out.write(text)
        return len(text)
    n = 0
    buf: list[str] = ["{"]
    first = True
    active = {id(report)}
    for k, v in report.items():
        buf.append(("" if first else ",") + "\n" + _INDENT + _encode_str(k) + ": ")
        first = False
        if v.__class__ is list and v and id(v) not in active:
            active.add(id(v))
            buf.append("[")
            for i, item in enumerate(v):
                buf.append(("\n" if i == 0 else ",\n") + _INDENT * 2)
                text = _scalar_text(item)
                if text is not None:
                    buf.append(text)
                else:
                    _chunks(item, 2, buf, active)
                if len(buf) >= 16384:
                    text = "".join(buf)
                    out.write(text)
                    n += len(text)
                    buf.clear()
            buf.append("\n" + _INDENT + "]")
            active.discard(id(v))
        else:
            _chunks(v, 1, buf, active)
    buf.append("\n}\n")
    text = "".join(buf)
    out.write(text)
    return n + len(text)


def claim_entries(sim: Simulation, explain: bool = False) -> list[dict[str, Any]]:
    """ResourceClaims with their allocation: the devices (and share IDs) each got, the pods it
    is reserved for; with ``explain``, why the other devices of the node were not taken."""
    from ksched.sim.draexplain import explain_claim

    claims = sorted((c for c in sim.store.items("ResourceClaim") if isinstance(c, ResourceClaim)),
                    key=lambda c: (c.namespace, c.name))
    out = []
    for c in claims:
        devices = []
        for r in c.results:
            d = {"request": r.get("request", ""), "driver": r.get("driver", ""), "pool": r.get("pool", ""),
                 "device": r.get("device", "")}
            if r.get("shareID"):
                d["shareID"] = r["shareID"]
            if r.get("consumedCapacity"):
                d["consumedCapacity"] = r["consumedCapacity"]
            if r.get("adminAccess"):
                d["adminAccess"] = True
            devices.append(d)
        node = None
        if c.allocation is not None:
            for t in (c.allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or ():
                for f in t.get("matchFields") or ():
                    if f.get("key") == "metadata.name" and f.get("values"):
                        node = f["values"][0]
        e: dict[str, Any] = {"namespace": c.namespace, "name": c.name, "allocated": c.allocation is not None,
                             "node": node, "devices": devices,
                             "reservedFor": [r.get("name", "") for r in c.reserved_for]}
        if explain:
            e["explain"] = explain_claim(sim, c)
        out.append(e)
    return out


def _pct(req: int, alloc: int) -> str:
    return f"{100 * req / alloc:.0f}%" if alloc else "-"


def render_table(console: Any, sim: Simulation, report: dict[str, Any], explain_pod: str | None = None) -> None:
    from rich.table import Table

    pods = Table(title="Pods", show_lines=False)
    owners = any(e.get("owner") for e in report["pods"])
    for col in ("POD", *(("OWNER",) if owners else ()), "NODE / PENDING REASON", "ATTEMPTS"):
        pods.add_column(col)
    for e in report["pods"]:
        where = e["node"] if e["node"] else f"[yellow]{e['reason'] or 'Pending'}[/]: {e['message'] or ''}"
        if e["nominatedNode"] and not e["node"]:
            where += f" (nominated: {e['nominatedNode']})"
        pods.add_row(f"{e['namespace']}/{e['name']}", *((e.get("owner") or "",) if owners else ()), where,
                     str(e["attempts"]))
    console.print(pods)
    nodes = Table(title="Nodes")
    for col in ("NODE", "CPU", "MEMORY", "PODS", "OTHER"):
        nodes.add_column(col)
    store_nodes = {n.name: n for n in sim.store.items("Node") if isinstance(n, Node)}
    requested = _requested_by_node(sim)
    for e in report["nodes"]:
        n = store_nodes[e["name"]]
        req = requested.get(n.name, {})
        a = n.allocatable
        other = ", ".join(f"{k} {e['requested'].get(k, '0')}/{e['allocatable'][k]}" for k in e["allocatable"]
                          if k not in ("cpu", "memory", "pods", "ephemeral-storage"))
        nodes.add_row(e["name"],
                      f"{e['requested'].get('cpu', '0')}/{e['allocatable'].get('cpu', '0')} "
                      f"({_pct(req.get('cpu', 0), a.get('cpu', 0))})",
                      f"{e['requested'].get('memory', '0')}/{e['allocatable'].get('memory', '0')} "
                      f"({_pct(req.get('memory', 0), a.get('memory', 0))})",
                      f"{e['requested'].get('pods', '0')}/{e['allocatable'].get('pods', '0')}", other)
    console.print(nodes)
    if report.get("jobs"):
        jobs = Table(title="Jobs")
        for col in ("JOB", "COMPLETIONS", "ACTIVE", "FAILED", "STATUS"):
            jobs.add_column(col)
        for j in report["jobs"]:
            jobs.add_row(f"{j['namespace']}/{j['name']}", f"{j['succeeded']}/{j['completions'] or 1}",
                         str(j["active"]), str(j["failed"]),
                         f"{j['condition']} ({j['reason']})" if j["condition"] else "Running")
        console.print(jobs)
    s = report["summary"]
    if report.get("resourceClaims"):
        claims = Table(title="Resource claims")
        for col in ("CLAIM", "NODE", "DEVICES", "RESERVED FOR"):
            claims.add_column(col)
        for c in report["resourceClaims"]:
            devs = ", ".join(f"{d['request']}: {d['pool']}/{d['device']}" + (" (shared)" if d.get("shareID") else "")
                             for d in c["devices"]) or "[yellow]pending[/]"
            claims.add_row(f"{c['namespace']}/{c['name']}", c["node"] or "", devs, ", ".join(c["reservedFor"]))
        console.print(claims)
    console.print(f"[bold]{s['pods']} pods[/]: {s['scheduled']} scheduled, {s['unschedulable']} unschedulable, "
                  f"{s['pending'] - s['unschedulable']} otherwise pending; {s['seconds']} s of simulated time")
    if explain_pod:
        render_explain(console, report, explain_pod)


def render_explain(console: Any, report: dict[str, Any], pod_ref: str) -> None:
    from rich.table import Table

    ns, _, name = pod_ref.rpartition("/")
    ns = ns or "default"
    entry = next((e for e in report["pods"] if e["namespace"] == ns and e["name"] == name), None)
    if entry is None:
        console.print(f"[red]no pod {ns}/{name} in the simulation[/]")
        return
    ex = entry.get("explain")
    if not ex:
        console.print(f"no scheduling attempt recorded for {ns}/{name}")
        return
    t = Table(title=f"Filter verdicts for {ns}/{name}")
    t.add_column("NODE")
    t.add_column("VERDICT")
    for node, v in sorted(ex["filter"].items()):
        t.add_row(node, "passed" if v == "passed" else f"{v['plugin']}: {v['reason']}")
    console.print(t)
    if ex["score"]:
        plugins = sorted({p for sc in ex["score"].values() for p in sc if p != "total"})
        st = Table(title="Scores (raw / normalized / weighted)")
        st.add_column("NODE")
        for p in plugins:
            st.add_column(p)
        st.add_column("TOTAL")
        for node, sc in sorted(ex["score"].items(), key=lambda kv: -kv[1]["total"]):
            st.add_row(node, *(f"{sc[p]['raw']}/{sc[p]['normalized']}/{sc[p]['weighted']}" if p in sc else "-"
                               for p in plugins), str(sc["total"]))
        console.print(st)
    console.print(f"selected node: {ex['selectedNode']}" if ex["selectedNode"] else f"not scheduled: {ex['message']}")


def write_markdown_report(path: str | Path, sim: Simulation, report: dict[str, Any]) -> Path:
    """A Markdown report with a per-node CPU/memory utilization plot (PNG beside it)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    png = p.with_suffix(".png")
    nodes = {n.name: n for n in sim.store.items("Node") if isinstance(n, Node)}
    names = [e["name"] for e in report["nodes"]]
    cpu_u: list[float] = []
    mem_u: list[float] = []
    requested = _requested_by_node(sim)
    for e in report["nodes"]:
        n = nodes[e["name"]]
        req = requested.get(n.name, {})
        cpu_u.append(100 * req.get("cpu", 0) / n.allocatable["cpu"] if n.allocatable.get("cpu") else 0.0)
        mem_u.append(100 * req.get("memory", 0) / n.allocatable["memory"] if n.allocatable.get("memory") else 0.0)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, len(names) * 0.25), 4))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], cpu_u, width=0.4, label="cpu")
    ax.bar([x + 0.2 for x in xs], mem_u, width=0.4, label="memory")
    ax.set_ylabel("requested / allocatable (%)")
    ax.set_ylim(0, 100)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=90, fontsize=6)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    s = report["summary"]
    lines = [
        "# ksched simulation report",
        "",
        f"- pods: {s['pods']}, scheduled: {s['scheduled']}, unschedulable: {s['unschedulable']}",
        f"- simulated time: {s['seconds']} s",
        "",
        f"![utilization]({png.name})",
        "",
        "## Pending pods",
        "",
        "| pod | reason | message |",
        "| --- | --- | --- |",
    ]
    for e in report["pods"]:
        if not e["node"]:
            lines.append(f"| {e['namespace']}/{e['name']} | {e['reason'] or ''} | {(e['message'] or '').replace('|', '/')} |")
    lines += ["", "## Nodes", "", "| node | cpu | memory | pods |", "| --- | --- | --- | --- |"]
    for e in report["nodes"]:
        lines.append(f"| {e['name']} | {e['requested'].get('cpu', '0')}/{e['allocatable'].get('cpu', '0')} | "
                     f"{e['requested'].get('memory', '0')}/{e['allocatable'].get('memory', '0')} | "
                     f"{e['requested'].get('pods', '0')}/{e['allocatable'].get('pods', '0')} |")
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p
