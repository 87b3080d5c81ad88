"""The terminal's tables and lines: what the commands print, drawn with rich from the
same rows as the HTML and Markdown reports (summary.py, generation.py, serving.py,
scaling.py, side_by_side.py, regression.py). The commands only print them."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table as RichTable
from rich.text import Text

from fwbench import tune
from fwbench.measure.verdicts import ESTIMATOR_TEXT
from fwbench.report import generation, scaling
from fwbench.report import serving as serving_report
from fwbench.report.answer import opening
from fwbench.report.plain import escape
from fwbench.report.regression import Change
from fwbench.report.serving import Table as ReportTable
from fwbench.report.side_by_side import CategoryRow
from fwbench.report.summary import (
    alone,
    estimator_of,
    summarise,
    verdict_notes,
    workload_cells,
    workload_head,
)
from fwbench.result import Result
from fwbench.tasks import STEP_TIME, find_task, get_task


class Table(RichTable):
    """A table whose cells and headings are data, never Rich markup: a model's name (a
    user's file name), a framework's message or an output's name may hold brackets
    ("[/b]" would end a style that never began and stop the report)."""

    def add_column(self, header: Any = "", *args: Any, **kwargs: Any) -> None:
        super().add_column(escape(header) if isinstance(header, str) else header, *args, **kwargs)

    def add_row(self, *cells: Any, **kwargs: Any) -> None:
        super().add_row(*(escape(c) if isinstance(c, str) else c for c in cells), **kwargs)


def _table(title: str, columns: Iterable[str], **options: Any) -> Table:
    """A table under a title at its left, with these columns."""
    table = Table(title=title, title_justify="left", **options)
    for column in columns:
        table.add_column(column)
    return table


# --- verdicts -----------------------------------------------------------------------


def summary_table(
    results: Sequence[Result], title: str = "Summary", band: float | None = None
) -> Table:
    """The verdict table: a row per workload, each variant's figure as its verdict reads
    it (`band`: the band verdicts read instead of the recorded one)."""
    variants, rows = summarise(results, band)
    notes = verdict_notes(rows)
    table = Table(
        title=title,
        title_justify="left",
        # Our words hold brackets ("[eager vs compiled]"): text, not Rich markup.
        caption=escape("\n".join(notes)) or None,
        caption_justify="left",
    )
    head = workload_head(rows)
    for col in head:
        table.add_column(col)
    # The value every cell reads (each run's p25...), where the rows agree; else the note
    # under the table says which.
    estimator = estimator_of(rows)
    unit = f"{estimator} ms" if estimator else "ms"
    for v in variants:
        table.add_column(f"{v}\n{unit} ±95%CI x", justify="right")
    table.add_column("verdict")
    for row in rows:
        style = "yellow" if row.different_work else None
        table.add_row(
            *workload_cells(row, head),
            *(row.cell(v, short=True) for v in variants),
            row.verdict(short=True),
            style=style,
        )
    return table


def answer_text(results: Sequence[Result], band: float | None = None) -> Text:
    """The answer first (fwbench.report.answer): the busy machine, then one line per
    comparison, printed before the verdict table."""
    _, rows = summarise(results, band)
    lines = opening(results, rows)
    busy = len(lines) - len(rows)
    text = Text()
    for i, line in enumerate(lines):
        text.append(("" if i == 0 else "\n") + line, style="yellow" if i < busy else "bold")
    return text


def report_tables(results: Sequence[Result]) -> list[Table]:
    """The report's tables that the summary does not hold (a generation's TTFT and TPOT
    with their verdicts)."""
    return [rich_table(t) for t in generation.tables(results)]


def serving_tables(results: Sequence[Result], band: float | None = None) -> list[Table]:
    """The serving tables; `band`: the one their verdicts read (a sweep's), else 2%."""
    return [rich_table(t) for t in serving_report.tables(results, band)]


def rich_table(t: ReportTable) -> Table:
    """A report's table (report.serving.Table) as a terminal table, its note below."""
    # Cells hold our bracketed marks ("[eager vs compiled]"): text, not Rich markup.
    table = _table(t.heading, t.head, caption=escape(t.note), caption_justify="left")
    for row in t.rows:
        table.add_row(*row)
    return table


def scaling_table(results: Sequence[Result]) -> Table:
    head, body = scaling.rows(scaling.scaling(list(results)))
    table = _table(
        "Data-parallel scaling (efficiency = t1 / tN)",
        head,
        caption=scaling.READ,
        caption_justify="left",
    )
    for row in body:
        table.add_row(*row)
    return table


# --- one result -----------------------------------------------------------------------


def describe_result(r: Result) -> str:
    """A result's own lines (rich markup): its status, times, runs, figures, memory,
    energy, work, data parallelism, parity and warnings."""
    # What a framework, a user's model or the machine wrote ("[/job:localhost/...]",
    # "shape [b, t]") is text, not markup.
    lines = [f"[bold]{escape(r.case.label())}[/bold]  status: [bold]{r.status}[/bold]"]
    if r.error:
        lines.append(f"  error: {escape(r.error)}")
    m = r.measurement
    if m is not None:
        st = m.step_time_s
        runs = " ".join(f"{x * 1e3:.3f}" for x in m.per_run())
        lines += [
            f"  median step time: {st.median * 1e3:.3f} ms (95% CI {st.ci_low * 1e3:.3f}-"
            f"{st.ci_high * 1e3:.3f}: {m.ci_method}), stopped by {m.stop_reason}",
            f"  runs (medians, ms): {runs}; {len(m.samples)} blocks in all",
            *read_lines(r),
            *figure_lines(r),
            f"  throughput: {r.throughput:.1f} {unit_of(r)}/s",
            f"  build {m.build_s:.2f} s, first step {m.first_step_s * 1e3:.1f} ms, "
            f"warmup {m.warmup_steps} steps ({m.warmup_stop})",
        ]
    if r.memory is not None:
        mem = r.memory
        text = (
            f"  host memory: peak {mem.host_peak_bytes / 2**20:,.0f} MiB, of which "
            f"{mem.host_framework_bytes / 2**20:,.0f} MiB above the post-import baseline"
        )
        if mem.device:
            text += ", device " + ", ".join(
                f"{k} {v / 2**20:,.0f} MiB" for k, v in mem.device.items()
            )
        lines.append(text)
    if r.energy is not None:
        e = r.energy
        if e.status == "measured" and e.joules_per_sample is not None:
            lines.append(
                f"  energy: {e.joules_per_sample:.4g} J/sample, {e.average_power_w:.1f} W "
                f"average ({e.source})"
            )
        else:
            lines.append(f"  energy: unavailable ({escape(str(e.reason))})")
    flops = r.work.flops_per_step if r.work is not None else None
    if r.work is not None and flops:
        w = r.work
        text = f"  work: {flops / 1e9:.3g} GFLOP/step"
        if w.achieved_flops_per_s:
            text += f", {w.achieved_flops_per_s / 1e9:.1f} GFLOP/s achieved"
        if w.share_of_peak is not None:
            text += f" = {w.share_of_peak:.0%} of the measured peak"
        lines.append(text)
    if r.distributed is not None:
        d = r.distributed
        lines.append(
            f"  data parallel: {d.strategy_label}, {d.replicas} replica(s) in {d.processes} "
            f"process(es), batch {d.per_replica_batch_size}/replica = {d.global_batch_size} "
            f"global, {d.threads_per_process} thread(s)/process, backend {d.backend}"
        )
        comm = d.communication
        if comm is not None and comm.in_flight_s is not None and comm.share_of_step is not None:
            lines.append(
                f"  communication: {comm.in_flight_s * 1e3:.1f} ms/step in flight "
                f"({comm.share_of_step:.0%} of a profiled step; {', '.join(comm.ops)})"
            )
        elif comm is not None:
            lines.append(f"  communication: not measured ({escape(str(comm.error))})")
    if r.parity is not None:
        lines.append(f"  {escape(r.parity.describe())}")
    lines += [f"  [yellow]warning:[/yellow] {escape(w)}" for w in r.warnings]
    return "\n".join(lines)


def read_lines(r: Result) -> list[str]:
    """What its verdicts read of each run, where it is not the median: the value per run
    and, as the tables show it, their geometric mean."""
    m, estimator = r.measurement, r.reading.estimator
    if m is None or estimator == "median" or r.verdict_figure != STEP_TIME.name:
        return []
    values = m.per_run(estimator)
    runs = " ".join(f"{x * 1e3:.3f}" for x in values)
    mean = statistics.geometric_mean(values)
    return [f"  runs ({estimator}, ms; what its verdicts read): {runs}; {mean * 1e3:.3f} over runs"]


def unit_of(r: Result) -> str:
    """What its throughput counts: its task's unit (samples; a generation's tokens)."""
    task = find_task(r.case.task)
    return task.unit if task is not None else "samples"


def figure_lines(r: Result) -> list[str]:
    """Its task's own figures, each with its interval over runs (a generation's)."""
    m, task = r.measurement, find_task(r.case.task)
    if m is None or task is None:
        return []
    lines = []
    for figure in task.figures:
        if figure.name in m.figures:
            f = m.figures[figure.name]
            mark = "  (its verdicts read it)" if figure.name == r.verdict_figure else ""
            what = f" ({figure.what})" if figure.what else ""
            lines.append(
                f"  {figure.label}{what}: {f.median * 1e3:.3f} ms "
                f"(95% CI {f.ci_low * 1e3:.3f}-{f.ci_high * 1e3:.3f}){mark}"
            )
    # Which of a generation's times per token is the time per token, where they differ.
    if (why := generation.skew(r)) is not None:
        lines.append(f"  {escape(why)}")
    return lines


# --- stored results, and what changed between two sets ---------------------------------


def results_table(results: Sequence[Result], db: Path) -> Table:
    """`fwbench results`: a row per stored result, oldest first."""
    columns = ("invocation", "case", "status", "median ms", "95% CI ms", "throughput", "params")
    table = _table(f"{len(results)} results in {db}", (*columns, "note"))
    for r in results:
        m = r.measurement
        table.add_row(
            r.invocation_id,
            r.case.label(),
            r.status,
            f"{m.step_time_s.median * 1e3:.2f}" if m else "-",
            f"{m.step_time_s.ci_low * 1e3:.2f}-{m.step_time_s.ci_high * 1e3:.2f}" if m else "-",
            f"{r.throughput:.1f} {unit_of(r)}/s" if r.throughput else "-",
            f"{r.param_count:,}" if r.param_count else "-",
            (r.error or "") + (" DIFFERENT WORK" if r.different_work else ""),
            style="yellow" if r.different_work else None,
        )
    return table


def changes_table(found: Sequence[Change], title: str) -> Table:
    """`fwbench compare`: each case's change, regressions in red."""
    # A step time's cells are what its change read (each run's p25 block, by default),
    # not the median: beside a change read otherwise they could disagree with it.
    read = sorted({r.reading.estimator for c in found if not c.shown for r in (c.base, c.new) if r})
    caption = (
        f"ms: {' / '.join(ESTIMATOR_TEXT[e] for e in read)}, its geometric mean over runs, "
        "as the change reads it"
        if read
        else None
    )
    table = _table(
        title, ("case", "change", "base ms", "new ms"), caption=caption, caption_justify="left"
    )
    for c in found:
        style = {
            "regression": "red",
            "improvement": "green",
            "status": "yellow",
            "undecided": "yellow",
        }.get(c.kind)
        # A serving point's or a generation's cells come with the change, in their units.
        cells = c.shown or (_ms(c.base), _ms(c.new))
        table.add_row(c.label, c.describe(), *cells, style=style)
    return table


def _ms(r: Result | None) -> str:
    """Its time in a cell: the figure its verdicts read (what a change or a tuning choice
    beside it was decided on)."""
    if r is None:
        return "-"
    if r.measurement is None:
        return r.status
    return alone(r, short=True)


# --- tune -----------------------------------------------------------------------------


def tune_table(outcome: tune.TuneOutcome) -> Table:
    """`fwbench tune`: each framework's default and best, with the verdict between them."""
    table = Table(title="Best configuration per framework", title_justify="left")
    for col in ("framework", "default", "default ms", "best", "best ms", "speed-up", "verdict"):
        table.add_column(col, justify="right" if "ms" in col or col == "speed-up" else "left")
    for c in outcome.choices:
        table.add_row(
            c.framework,
            tune.describe(c.default) if c.default else "-",
            _ms(c.default),
            tune.describe(c.best) if c.best else "none ran",
            _ms(c.best),
            f"{c.speedup:.2f}x" if c.speedup else "-",
            (v.short() if (v := c.confirmed()) else "the default is best"),
        )
    table.caption = f"{outcome.screened} candidates screened, one run each; finalists confirmed"
    return table


# --- explain --------------------------------------------------------------------------


def category_table(
    title: str, variants: list[str], rows: list[CategoryRow], total: str, totals: dict[str, float]
) -> Table:
    """`fwbench explain`: each category's time per step (or per phase) in each variant."""
    table = Table(title=title)
    table.add_column("category")
    for v in variants:
        table.add_column(v, justify="right")
    table.add_column("difference", justify="right")
    for row in rows:
        table.add_row(
            row.category,
            *(f"{row.seconds[v] * 1e3:.2f} ({row.shares.get(v, 0):.0%})" for v in variants),
            f"{row.difference * 1e3:.2f}",
        )
    table.add_row(*[""] * (len(variants) + 2))
    table.add_row(total, *(f"{totals[v] * 1e3:.2f}" for v in variants), "")
    return table


def top_ops_table(r: Result) -> Table:
    """`fwbench explain`: a variant's ten costliest operations per step."""
    assert r.breakdown is not None
    top = _table(f"Top operations: {r.case.variant}", ("op", "category", "ms/step"))
    for op in r.breakdown.top_ops[:10]:
        top.add_row(op.name, op.category, f"{op.seconds_per_step * 1e3:.2f}")
    return top


# --- the machine: models and peaks --------------------------------------------------


def models_table(rows: Sequence[dict[str, Any]], flops: bool, frameworks: Sequence[str]) -> Table:
    """`fwbench models`: each model's parameters (and FLOPs) in each framework."""
    title = "Models (trainable parameters" + (", GFLOPs of one inference sample)" if flops else ")")
    table = Table(title=title, title_justify="left")
    columns = ["model", "family", "input", "dims", *(f"{fw} params" for fw in frameworks)]
    if flops:
        columns += [f"{fw} GFLOPs" for fw in frameworks]
    columns += ["diff", "description"]
    for col in columns:
        table.add_column(col, justify="right" if col.endswith(("params", "GFLOPs")) else "left")
    for row in rows:
        cells = [
            row["name"],
            row["family"],
            row["input_kind"],
            " ".join(f"{k}={v}" for k, v in row["dims"].items()),
        ]
        cells += [_count(row, "params", fw, "{:,}") for fw in frameworks]
        if flops:
            cells += [_count(row, "infer_flops", fw, "{:.3g}", 1e-9) for fw in frameworks]
        diffs = [d for d in (row["max_rel_diff"], row["flops_rel_diff"]) if d is not None]
        diff = "-" if not diffs else f"{max(diffs):.2%}"
        cells += [diff + (" DIFFERENT" if row["mismatch"] else ""), row["description"]]
        table.add_row(*cells, style="yellow" if row["mismatch"] else None)
    return table


def _count(row: dict[str, Any], field: str, fw: str, fmt: str, scale: float | None = None) -> str:
    if fw in row[field]:
        value = row[field][fw]
        # A count stays a whole number ("11,689,512", never "11,689,512.0").
        return fmt.format(value * scale if scale is not None else value)
    return str(row["errors"].get(fw, "-"))


def user_model_table(row: dict[str, Any]) -> Table:
    """`fwbench models --model FILE`: what a model of the user's declares, and which
    frameworks run it, or why not."""
    params = f"{row['params']:,}" if isinstance(row["params"], int) else "unknown"
    inputs = row["inputs"] or "none declared: give --input-shape"
    if row["usual_inputs"]:
        inputs += f" (usually {row['usual_inputs']})"
    table = _table(
        f"{row['name']}: {row['source_label']}",
        ("framework", "runs it", "how, or why not"),
        caption=f"inputs: {inputs}\nparameters: {params}"
        + (f"\noutputs: {row['outputs']}" if row["outputs"] else "")
        + (
            f"\nruns its author's code: {row['runs_code']}"
            if row.get("runs_code")
            else "\nread as data: no code of its author runs"
        )
        + (
            f"\ntrains with: {row['objective']} (--objective to change)"
            if not any(get_task(task).trains for task in row["refuses"])
            else ""
        )
        + "".join(f"\n{task}: no: {why}" for task, why in row["refuses"].items())
        + ("\ngenerates: yes (task generate)" if row["generates"] else ""),
        caption_justify="left",
    )
    for name, found in row["frameworks"].items():
        table.add_row(name, "yes" if found["runs"] else "no", found["how"])
    return table


def peak_table(rows: Sequence[dict[str, Any]], size: int, device: str, threads: int) -> Table:
    """`fwbench peak`: each framework's and precision's FLOP/s on a large matmul."""
    table = Table(title=f"Peak FLOP/s, {size}x{size} matmul, {device}, {threads} threads")
    for col in ("framework", "dtype", "GFLOP/s", "median ms (95% CI)", "note"):
        table.add_column(col)
    for row in rows:
        if "flops_per_s" in row:
            table.add_row(
                row["framework"],
                row["dtype"],
                f"{row['flops_per_s'] / 1e9:.1f}",
                f"{row['median_s'] * 1e3:.2f} ({row['ci_low_s'] * 1e3:.2f}-"
                f"{row['ci_high_s'] * 1e3:.2f})",
                "",
            )
        else:
            table.add_row(row["framework"], row["dtype"], "-", "-", row.get("error", ""))
    return table
