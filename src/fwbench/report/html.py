"""The self-contained HTML report: plotly charts (library inlined once, compressed, no CDN)
and tables."""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import plotly.graph_objects as go
import plotly.offline
from plotly.subplots import make_subplots

from fwbench.report import figures, generation, scaling, warnings
from fwbench.report import serving as serving_report
from fwbench.report.answer import opening
from fwbench.report.side_by_side import side_by_side
from fwbench.report.style import colour, dash, pattern
from fwbench.report.summary import (
    summarise,
    verdict_notes,
    workload_cells,
    workload_head,
)
from fwbench.result import Result, cases_and_points
from fwbench.studies.claims import load_study, reproduction_table
from fwbench.tasks import all_tasks, task_names

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { margin-bottom: 0; } .sub { color: #666; margin-top: .2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 14px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.warn { color: #a15c00; } .fail { color: #b00020; font-weight: 600; }
.panel-empty { border: 2px dashed #bbb; padding: 1.5em; color: #555; background: #fafafa; }
details pre { background: #f7f7f7; padding: .5em; overflow-x: auto; font-size: 12px; }
.answer p { font-size: 17px; margin: .35em 0; } .answer p.busy { color: #a15c00; }
details.how > summary { font-size: 1.5em; font-weight: bold; margin: .83em 0; cursor: pointer; }
"""


# plotly.js is 4.8 MB, nine tenths of a report of a few results even inlined once. It goes
# in gzip-compressed and base64-encoded (2.0 MB), and the browser unpacks it with its own
# DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 and later): one file, offline,
# no other copy of the library to keep in step with the plotly that drew the figures. Each
# chart's call (plotly's own to_html, include_plotlyjs=False) is queued until then.
_QUEUE_CHARTS = (
    "<script>window.Plotly={newPlot:function(){"
    "(window.fwbenchCharts=window.fwbenchCharts||[]).push(arguments)}};</script>"
)
_DRAW_CHARTS = """<script>
(async function () {
  var queued = window.fwbenchCharts || [];
  try {
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser cannot unpack the charts' library (it lacks " +
        "DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 and later have it)");
    }
    var text = atob(document.getElementById("fwbench-plotly").textContent.trim());
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    var script = document.createElement("script");
    script.textContent = await new Response(stream).text();
    document.head.appendChild(script);  // runs it: window.Plotly is the library now
    queued.forEach(function (args) { Plotly.newPlot.apply(Plotly, args); });
  } catch (err) {
    queued.forEach(function (args) {
      var div = document.getElementById(args[0]);
      if (div) div.textContent = "Chart not drawn: " + err.message;
    });
  }
})();
</script>"""


@functools.cache
def _packed_plotly() -> str:
    """plotly.js as gzip (mtime 0: the same bytes each time), base64-encoded."""
    js = plotly.offline.get_plotlyjs().encode()
    return base64.b64encode(gzip.compress(js, compresslevel=9, mtime=0)).decode("ascii")


def _relative_figure(panels: list[figures.Panel], title: str) -> go.Figure:
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=[p.title for p in panels])
    shown: set[str] = set()
    for row, panel in enumerate(panels, start=1):
        for variant, points in panel.series.items():
            ok = [p for p in points if p.value is not None]
            whole = [p for p in ok if not panel.cut(p)]
            cut = [p for p in ok if panel.cut(p)]
            style = {
                "legendgroup": variant,
                # Both traces of a variant in one slot of each group, as one would be.
                "offsetgroup": variant,
                "marker": {"color": colour(variant), "pattern": {"shape": pattern(variant)}},
                "hovertemplate": (
                    f"{variant}<br>%{{x}}<br>relative time %{{customdata:.3f}}<extra></extra>"
                ),
            }
            fig.add_trace(
                go.Bar(
                    name=variant,
                    showlegend=variant not in shown,
                    x=[p.x for p in whole],
                    y=[p.value for p in whole],
                    customdata=[p.value for p in whole],
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [(p.ci[1] - p.value) if p.ci and p.value else 0 for p in whole],
                        "arrayminus": [
                            (p.value - p.ci[0]) if p.ci and p.value else 0 for p in whole
                        ],
                    },
                    **style,
                ),
                row=row,
                col=1,
            )
            if cut:
                # A bar cut at the axis' top (Panel.cap) says its value, and draws no
                # interval (it would lie above the axis).
                fig.add_trace(
                    go.Bar(
                        name=f"{variant} (cut)",
                        showlegend=False,
                        x=[p.x for p in cut],
                        y=[panel.shown(p) for p in cut],
                        customdata=[p.value for p in cut],
                        text=[f"{p.value:.3g}x, cut" for p in cut],
                        textposition="inside",
                        insidetextanchor="end",
                        textangle=0,
                        # Dark with a white halo: legible on any variant's colour and pattern.
                        insidetextfont={"color": "#111", "shadow": "0 0 3px white"},
                        **style,
                    ),
                    row=row,
                    col=1,
                )
            shown.add(variant)
            gaps = [p for p in points if p.value is None]
            if gaps:
                # A gap stays visible: an X on the axis, labelled with what happened.
                fig.add_trace(
                    _failed(variant, [(p.x, p.status, p.error) for p in gaps], 0.02),
                    row=row,
                    col=1,
                )
        fig.update_yaxes(
            title_text="relative time (fastest = 1)", row=row, col=1, rangemode="tozero"
        )
        if panel.cap is not None:
            fig.update_yaxes(range=[0, panel.cap * 1.04], row=row, col=1)
    fig.update_layout(title=title, barmode="group", height=max(320, 280 * len(panels)))
    return fig


def _relative_caption(panels: list[figures.Panel]) -> str:
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in figures.panel_notes(panels))
    if not any(p.cap is not None for p in panels):
        return notes
    return notes + (
        f"<p>The axis stops at {figures.RELATIVE_CAP:g}x: a bar past it is cut at the top, "
        "its value written on it (“19.3x, cut”), so that the others stay readable.</p>"
    )


def _curve_figure(
    panels: list[figures.CurvePanel], title: str, y_title: str, log: bool
) -> go.Figure:
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=[p.title for p in panels])
    shown: set[str] = set()
    for row, panel in enumerate(panels, start=1):
        for curve in panel.curves:
            name = curve.variant
            label = f"{name}: {curve.trend.describe()}" if curve.trend else name
            error_y = None
            if curve.intervals:
                minus, plus = curve.error_bars()
                error_y = {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus}
            fig.add_trace(
                go.Scatter(
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    x=curve.batch_sizes,
                    y=curve.values,
                    error_y=error_y,
                    mode="lines+markers",
                    line={"color": colour(name), "dash": dash(name)},
                    hovertemplate=(
                        f"{html.escape(label)}<br>batch %{{x}}<br>%{{y:.4g}}<extra></extra>"
                    ),
                ),
                row=row,
                col=1,
            )
            shown.add(name)
        ticks = sorted({b for c in panel.curves for b in c.batch_sizes})
        fig.update_xaxes(
            title_text="batch size",
            type="log" if log else "linear",
            tickmode="array",
            tickvals=ticks,
            row=row,
            col=1,
        )
        fig.update_yaxes(title_text=y_title, row=row, col=1)
    fig.update_layout(title=title, height=max(320, 280 * len(panels)))
    return fig


def _scaling_figure(panels: list[scaling.ScalingPanel]) -> go.Figure:
    """Throughput (left) and scaling efficiency (right) against workers, per strategy."""
    titles = [t for p in panels for t in (f"{p.title}: throughput", f"{p.title}: efficiency")]
    fig = make_subplots(rows=len(panels), cols=2, subplot_titles=titles)
    shown: set[str] = set()
    for row, panel in enumerate(panels, start=1):
        for series in panel.series:
            name = series.variant
            ok = [p for p in series.points if p.throughput is not None]
            line = {"color": colour(name), "dash": dash(name)}
            fig.add_trace(
                go.Scatter(
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    x=[p.world_size for p in ok],
                    y=[p.throughput for p in ok],
                    mode="lines+markers",
                    line=line,
                    hovertemplate=f"{html.escape(name)}<br>%{{x}} workers<br>"
                    "%{y:.1f} samples/s<extra></extra>",
                ),
                row=row,
                col=1,
            )
            shown.add(name)
            eff = [p for p in ok if p.efficiency is not None]
            fig.add_trace(
                go.Scatter(
                    name=name,
                    legendgroup=name,
                    showlegend=False,
                    x=[p.world_size for p in eff],
                    y=[p.efficiency for p in eff],
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": scaling.error_bars(eff)[1],
                        "arrayminus": scaling.error_bars(eff)[0],
                    },
                    mode="lines+markers",
                    line=line,
                    hovertemplate=f"{html.escape(name)}<br>%{{x}} workers<br>"
                    "efficiency %{y:.2f}<extra></extra>",
                ),
                row=row,
                col=2,
            )
            gaps = [p for p in series.points if p.throughput is None]
            if gaps:
                # A failed or unsupported world size stays visible, with its reason.
                fig.add_trace(
                    _failed(name, [(p.world_size, p.status, p.error) for p in gaps], 0),
                    row=row,
                    col=1,
                )
        sizes = sorted({p.world_size for s in panel.series for p in s.points})
        for col in (1, 2):
            fig.update_xaxes(
                title_text="workers", tickmode="array", tickvals=sizes, row=row, col=col
            )
        fig.add_hline(y=1.0, line_dash="dot", line_color="#999", row=row, col=2)
        fig.update_yaxes(title_text="samples/s", rangemode="tozero", row=row, col=1)
        fig.update_yaxes(title_text="t1 / tN (ideal = 1)", rangemode="tozero", row=row, col=2)
    fig.update_layout(
        title="Data-parallel scaling (per-replica batch fixed)", height=max(340, 300 * len(panels))
    )
    return fig


def _table(
    head: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int] | None = None
) -> str:
    numeric = numeric or set()
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        cells = "".join(
            f'<td class="num">{html.escape(c)}</td>'
            if i in numeric
            else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(row)
        )
        out.append(f"<tr>{cells}</tr>")
    return "\n".join(out) + "</table>"


def _breakdown_figures(results: Sequence[Result]) -> list[tuple[str, go.Figure]]:
    """A stacked bar per framework for each profiled workload (`fwbench explain`)."""
    by_workload: dict[tuple[object, ...], list[Result]] = {}
    for r in results:
        if r.breakdown is not None:
            by_workload.setdefault(r.case.workload_key(), []).append(r)
    out = []
    for group in by_workload.values():
        variants, rows = side_by_side(group)
        fig = go.Figure()
        for row in rows:
            fig.add_trace(
                go.Bar(
                    name=row.category,
                    y=variants,
                    x=[row.seconds[v] * 1e3 for v in variants],
                    orientation="h",
                    hovertemplate=f"{html.escape(row.category)}: %{{x:.2f}} ms<extra></extra>",
                )
            )
        case = group[0].case
        title = f"{case.model} {case.task} b{case.batch_size} {case.shape} {case.device}"
        fig.update_layout(
            barmode="stack",
            title=f"Where the step goes: {title}",
            xaxis_title="ms per step (profiled)",
            height=220 + 60 * len(variants),
        )
        out.append((title, fig))
    return out


def _verdicts(results: Sequence[Result], band: float | None) -> str:
    """The verdict table (the notes on how to read it are under "How to read this")."""
    variants, rows = summarise(results, band)
    names = workload_head(rows, always=("device",))
    head = [*names, *variants, "verdict"]
    body = []
    for row in rows:
        body.append(
            [
                *workload_cells(row, names),
                *(row.cell(v) for v in variants),
                row.verdict(),
            ]
        )
    numeric = {names.index("batch"), names.index("shape")}
    return _table(head, body, numeric={*numeric, *range(len(names), len(names) + len(variants))})


def _answer(results: Sequence[Result], band: float | None) -> str:
    """The answer, one sentence per comparison, and the busy machine: the report's first
    words after its title."""
    _, rows = summarise(results, band)
    lines = opening(results, rows)
    busy = len(lines) - len(rows)
    return (
        '<section class="answer">'
        + "".join(
            f'<p class="{"busy" if i < busy else "verdict"}">{html.escape(line)}</p>'
            for i, line in enumerate(lines)
        )
        + "</section>"
    )


# How a verdict is read, said once in a report, after its tables and charts.
_METHOD = (
    "Each case is several worker processes (runs); its time is the geometric mean over its "
    "runs of the value its verdict reads (each run's 25th-percentile block by default; a "
    "note says which), with a 95% interval over runs, and x its ratio to the fastest. A "
    "verdict says “faster” when the interval of the ratio lies beyond the equivalence band "
    "(±2% unless a note says otherwise), “equivalent” when it lies within, “inconclusive” "
    "otherwise."
)


def _how_to_read(results: Sequence[Result], band: float | None) -> str:
    _, rows = summarise(results, band)
    notes = [_METHOD, *verdict_notes(rows)]
    return (
        '<details class="how"><summary>How to read this</summary>'
        + "".join(f"<p>{html.escape(n)}</p>" for n in notes)
        + "</details>"
    )


def _trend_table(panels: list[figures.CurvePanel]) -> str:
    rows = [
        [
            panel.title,
            curve.variant,
            curve.trend.describe() if curve.trend else "too few batch sizes",
        ]
        for panel in panels
        for curve in panel.curves
    ]
    return _table(["workload", "variant", "time per sample vs batch size"], rows)


def _environment(results: Sequence[Result], serving: Sequence[Result] = ()) -> str:
    seen: dict[str, list[str]] = {}
    recorded = [*results, *serving]
    for r in recorded:
        env = json.dumps({"framework": r.case.framework, **r.environment}, sort_keys=True, indent=1)
        seen.setdefault(env, []).append(r.case.label())
    parts = []
    for env, labels in seen.items():
        parts.append(
            f"<details><summary>{html.escape(labels[0])} and {len(labels) - 1} more</summary>"
            f"<pre>{html.escape(env)}</pre></details>"
        )
    settings = {r.case.variant: r.settings for r in recorded if r.status == "ok"}
    parts.append(
        "<details><summary>settings per framework</summary>"
        f"<pre>{html.escape(json.dumps(settings, indent=1, default=str))}</pre></details>"
    )
    return "\n".join(parts)


def _failed(variant: str, gaps: Sequence[tuple[Any, str, str | None]], y: float) -> go.Scatter:
    """A variant's failed points, (x, status, error) each: an X on the axis at `y`,
    labelled with its status, its error on hover, so that a gap stays visible."""
    return go.Scatter(
        name=f"{variant} failed",
        legendgroup=variant,
        showlegend=False,
        x=[x for x, _, _ in gaps],
        y=[y for _ in gaps],
        mode="markers+text",
        marker={"symbol": "x", "size": 12, "color": colour(variant)},
        text=[status.upper() for _, status, _ in gaps],
        textposition="top center",
        hovertext=[f"{variant}: {status}: {error}" for _, status, error in gaps],
        hoverinfo="text",
    )


def _serving_figure(points: Sequence[serving_report.CurvePoint]) -> go.Figure:
    panels = sorted({p.panel for p in points})
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=panels)
    variants = sorted({p.variant for p in points})
    for row, panel in enumerate(panels, start=1):
        for variant in variants:
            mine = sorted((p for p in points if p.panel == panel and p.variant == variant),
                          key=lambda p: p.qps)  # fmt: skip
            if not mine:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[p.qps for p in mine],
                    y=[p.latency_s * 1e3 for p in mine],
                    mode="markers",
                    name=variant,
                    legendgroup=variant,
                    showlegend=row == 1,
                    marker={
                        "color": colour(variant),
                        "symbol": ["circle" if p.valid else "x" for p in mine],
                        "size": 9,
                    },
                    hovertemplate="%{x:.4g} qps: %{y:.3g} ms<extra>" + variant + "</extra>",
                ),
                row=row,
                col=1,
            )
        fig.update_xaxes(title_text="target queries per second", row=row, col=1)
        fig.update_yaxes(
            title_text="latency at the bound's percentile, ms", type="log", row=row, col=1
        )
    fig.update_layout(
        title="Latency against load (every probe of every run; x: LoadGen said INVALID)",
        height=max(360, 320 * len(panels)),
    )
    return fig


def render(
    results: Sequence[Result],
    title: str = "fwbench report",
    study: str | None = None,
    band: float | None = None,
) -> str:
    """The self-contained HTML report of cases' and serving points' results (the points
    make the serving scenarios' tables and latency-throughput curve); `study` adds that
    study's reproduction table; `band`: the band verdicts read instead of the one the
    results recorded."""
    results, serving = cases_and_points(results)
    sections: list[str] = []
    figs: list[tuple[str, go.Figure | None, str]] = []
    for table in [*serving_report.tables(serving, band), *generation.tables(results, band)]:
        figs.append(
            (
                table.heading,
                None,
                f"<p>{html.escape(table.note)}</p>" + _table(table.head, table.rows),
            )
        )
    for _, chart, caption, curves in generation.charts(results):
        figs.append(
            (chart, _curve_figure(curves, chart, "ms", log=True), f"<p>{html.escape(caption)}</p>")
        )
    curve = serving_report.curve(serving)
    if curve:
        figs.append(("Serving: latency against load", _serving_figure(curve), ""))
    devices = sorted({r.case.device for r in results})
    for kind in all_tasks().values():
        # What the chart plots: a generation's is its time per output token.
        subject = figures.relative_subject(kind)
        for device in devices:
            panels = figures.relative_time(results, kind.name, device)
            if panels:
                chart = f"Relative {subject} on {device} (faster framework = 1.0)"
                heading = f"{subject[0].upper()}{subject[1:]}, relative ({device})"
                figs.append((heading, _relative_figure(panels, chart), _relative_caption(panels)))
    scaled = scaling.scaling(results)
    if scaled:
        figs.append(
            (
                "Data-parallel scaling",
                _scaling_figure(scaled),
                "<p>Efficiency = throughput(N) / (N x throughput(1)) = t1 / tN at a fixed "
                "per-replica batch, against the same strategy at one worker; communication is "
                f"the profiled time per step with a collective in flight. {scaling.READ}</p>"
                + _table(*scaling.rows(scaled), numeric={2, 3, 4, 5}),
            )
        )
    per_sample = figures.per_sample_time(results)
    if per_sample:
        figs.append(
            (
                "Inference time per sample vs batch size",
                _curve_figure(
                    per_sample, "Inference time per sample", "seconds per sample", log=True
                ),
                _trend_table(per_sample),
            )
        )
    energy = figures.energy_per_sample(results)
    if energy:
        figs.append(
            (
                "Energy per sample vs batch size",
                _curve_figure(
                    energy, "Energy per sample (inference)", "joules per sample", log=True
                ),
                "",
            )
        )
    elif results:
        reasons = figures.energy_reasons(results) or ["no energy counter was read"]
        figs.append(
            (
                "Energy per sample vs batch size",
                None,
                '<div class="panel-empty"><b>Energy: not measured on this machine.</b><br>'
                + "<br>".join(html.escape(r) for r in reasons)
                + "</div>",
            )
        )
    for label, fig in _breakdown_figures(results):
        figs.append((f"Where the step goes: {label}", fig, ""))
    for task in task_names():
        memory = figures.peak_memory(results, task)
        if memory:
            figs.append(
                (
                    f"Peak memory vs batch size ({task})",
                    _curve_figure(
                        memory,
                        f"Peak memory ({task}; device allocator on GPU, worker RSS on CPU)",
                        "MiB",
                        log=True,
                    ),
                    "",
                )
            )
    charts = 0
    for heading, fig, extra in figs:
        sections.append(f"<h2>{html.escape(heading)}</h2>")
        if fig is not None:
            if not charts:
                sections.append(_QUEUE_CHARTS)
            sections.append(
                fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})
            )
            charts += 1
        sections.append(extra)
    if charts:
        # The library once, after the charts that wait for it (see _QUEUE_CHARTS).
        sections.append(
            f'<script id="fwbench-plotly" type="text/plain">{_packed_plotly()}</script>'
            + _DRAW_CHARTS
        )
    failures = [r for r in results if r.status != "ok"]
    grouped = warnings.group((r.case.label(), w) for r in results for w in r.warnings)
    warn_rows = [[g.text(), g.where()] for g in grouped]
    body = [f"<h1>{html.escape(title)}</h1>"]
    if results:
        body.append(_answer(results, band))
    body.append(
        f'<p class="sub">{len(results)} results, generated {datetime.now():%Y-%m-%d %H:%M}; '
        "how each figure and verdict is read: “How to read this”, after the charts.</p>"
    )
    if results:
        body += ["<h2>Verdicts</h2>", _verdicts(results, band)]
    if study:
        found = load_study(study)
        body += [
            f"<h2>Reproduction: {html.escape(found.title)}</h2>",
            _table(*reproduction_table(found, results)),
        ]
    body += sections
    if results:
        body.append(_how_to_read(results, band))
    if failures:
        body += [
            "<h2>Cases without a measurement</h2>",
            _table(
                ["case", "status", "reason"],
                [[r.case.label(), r.status, r.error or ""] for r in failures],
            ),
        ]
    if warn_rows:
        body += ["<h2>Warnings</h2>", _table(["warning", "where"], warn_rows)]
    body += ["<h2>Environment</h2>", _environment(results, serving)]
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>"
    )
