"""The policy-comparison report: one self-contained HTML page (inline SVG plots, no scripts, no
external files) and the plots on their own.

Per workload: the allocation curves as the FGD paper's Fig. 9(a) (unallocated GPUs in % of
the cluster's against the arrived workload in % of its GPU capacity, mean over seeds), the
fragmentation curves (fragmentation against the typical pods, in % of capacity), and the summary
table (final GPU allocation mean/median/min/max over seeds, the paper's figure where there is
one, CPU/memory/GPU utilization, fragmentation, seconds per run). Across workloads: one table of
the mean allocation per workload and policy, the best marked.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ksched.sim.compare import mean_curve

__all__ = ["curve_figure", "render_html", "save_curve_plot"]

_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"  # text stays text in the SVG
    return plt


def curve_figure(by_policy: dict[str, Sequence[dict[str, Any]]], key: str, title: str,
                 unallocated: bool = False) -> Any:
    """A matplotlib figure: one line per policy, the mean of ``key`` over its runs against
    arrived %; ``unallocated`` plots 100 - value (Fig. 9(a))."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    for i, (policy, runs) in enumerate(by_policy.items()):
        xs, ys = mean_curve(runs, key)
        if not len(xs):
            continue
        if unallocated:
            ys = 100 - ys
        ax.plot(xs, ys, label=policy, color=_COLORS[i % len(_COLORS)], linewidth=1.6)
    ax.set_xlabel("arrived workload (% of cluster GPU capacity)")
    if unallocated:
        ax.set_ylabel("unallocated GPUs (%)")
    else:
        ax.set_ylabel("fragmented GPU milli (% of capacity)" if key == "frag_pct" else key)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    if unallocated:
        xs_all = [c["arrived_pct"] for runs in by_policy.values() for r in runs for c in r["curve"]]
        if xs_all and max(xs_all) > 60:
            ax.set_xlim(60, max(xs_all))
            ax.set_ylim(0, 45)
    fig.tight_layout()
    return fig


def save_curve_plot(by_policy: dict[str, Sequence[dict[str, Any]]], path: str | Path, title: str) -> Path:
    """Fig. 9(a) as an image file (PNG, SVG or PDF by the suffix)."""
    plt = _plt()
    fig = curve_figure(by_policy, "gpu_alloc_pct", title, unallocated=True)
    p = Path(path)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def _svg(fig: Any, elem_id: str, label: str) -> str:
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    svg = text[start:]
    svg = svg.replace("<svg", f'<svg id="{elem_id}" class="plot" role="img" aria-label="{html.escape(label)}"', 1)
    return svg


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.2f}"
    return html.escape(str(v))


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; }
td.best { font-weight: bold; background: #e6f4ea; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
.plots svg { max-width: 540px; height: auto; border: 1px solid #eee; }
code { background: #f6f6f6; padding: 0 0.2em; }
.note { color: #555; font-size: 0.9em; }
"""


def render_html(results: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]], title: str = "",
                command: str = "") -> str:
    """The report as one HTML string."""
    workloads: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in results:
        workloads.setdefault(r["workload"], {}).setdefault(r["label"], []).append(r)
    policies = list(dict.fromkeys(r["label"] for r in results))
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title or 'ksched policy comparison')}</title>", f"<style>{_CSS}</style></head><body>",
           f"<h1>{html.escape(title or 'ksched policy comparison')}</h1>",
           f'<p class="note">{len(results)} runs, {len(workloads)} workload(s), {len(policies)} policies; generated '
           f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} by ksched compare.</p>"]
    if command:
        out.append(f"<p class='note'>Command: <code>{html.escape(command)}</code></p>")
    by_key = {(s["workload"], s["policy"]): s for s in summary}
    if len(workloads) > 1:
        out.append("<h2>GPU allocation at the end, mean over seeds (%)</h2>")
        out.append('<table id="matrix"><tr><th>workload</th>' +
                   "".join(f"<th>{html.escape(p)}</th>" for p in policies) + "</tr>")
        for w in workloads:
            vals = {p: by_key[(w, p)]["gpu_alloc_mean"] for p in policies if (w, p) in by_key}
            best = max(vals.values()) if vals else None
            cells = []
            for p in policies:
                v = vals.get(p)
                cls = ' class="best"' if v is not None and v == best else ""
                cells.append(f"<td{cls}>{_fmt(v)}</td>")
            out.append(f"<tr><td>{html.escape(w)}</td>{''.join(cells)}</tr>")
        out.append("</table>")
    for wi, (w, by_policy) in enumerate(workloads.items()):
        out.append(f'<section class="workload" id="workload-{wi}"><h2>Workload {html.escape(w)}</h2>')
        out.append('<div class="plots">')
        out.append(_svg(curve_figure(by_policy, "gpu_alloc_pct", f"{w}: unallocated GPUs", unallocated=True),
                        f"plot-alloc-{wi}", f"{w}: unallocated GPU % against arrived workload"))
        if any("frag_pct" in c for runs in by_policy.values() for r in runs for c in r["curve"][:1]):
            out.append(_svg(curve_figure(by_policy, "frag_pct", f"{w}: GPU fragmentation"),
                            f"plot-frag-{wi}", f"{w}: fragmentation against arrived workload"))
        out.append("</div>")
        out.append('<table class="summary"><tr><th>policy</th><th>seeds</th><th>GPU alloc mean</th><th>median</th>'
                   "<th>min</th><th>max</th><th>paper mean</th><th>diff (pp)</th><th>CPU alloc</th>"
                   "<th>memory alloc</th><th>frag %</th><th>frag rate %</th><th>scheduled</th><th>pods</th>"
                   "<th>s/run</th></tr>")
        rows = [by_key[(w, p)] for p in by_policy if (w, p) in by_key]
        best = max((s["gpu_alloc_mean"] for s in rows), default=None)
        for s in sorted(rows, key=lambda s: -s["gpu_alloc_mean"]):
            cls = ' class="best"' if s["gpu_alloc_mean"] == best else ""
            out.append(
                f"<tr><td>{html.escape(s['policy'])}</td><td>{s['seeds']}</td><td{cls}>{_fmt(s['gpu_alloc_mean'])}</td>"
                f"<td>{_fmt(s['gpu_alloc_median'])}</td><td>{_fmt(s['gpu_alloc_min'])}</td>"
                f"<td>{_fmt(s['gpu_alloc_max'])}</td><td>{_fmt(s['paper_mean'])}</td><td>{_fmt(s['diff_pp'])}</td>"
                f"<td>{_fmt(s['cpu_alloc_mean'])}</td><td>{_fmt(s['mem_alloc_mean'])}</td>"
                f"<td>{_fmt(s['frag_mean'])}</td><td>{_fmt(s['frag_rate_mean'])}</td>"
                f"<td>{_fmt(s['scheduled_mean'])}</td><td>{_fmt(s['pods_mean'])}</td>"
                f"<td>{_fmt(s['seconds_mean'])}</td></tr>")
        out.append("</table></section>")
    out.append("<p class='note'>GPU allocation: requested GPU milli of the placed pods over the cluster's, at the "
               "last curve column (130 % arrived under the paper's protocol). Fragmentation: the FGD paper's "
               "measure against the workload's typical pods. Paper means: the artifact's expected results "
               "(default trace only).</p>")
    out.append("</body></html>")
    return "\n".join(out)
