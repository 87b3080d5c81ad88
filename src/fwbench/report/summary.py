"""Side-by-side summary of results: one row per workload, one column per framework/mode.

Pure functions over Results; rendering to the terminal or Markdown lives with the caller.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fwbench.case import execution_note
from fwbench.measure import stats
from fwbench.measure.verdicts import (
    DEFAULT_BAND,
    ESTIMATOR_TEXT,
    RUNS_NEEDED_CAP,
    Comparison,
    Series,
    Verdict,
    comparison_of,
    per_run,
    percent,
)
from fwbench.result import Result
from fwbench.tasks import STEP_TIME, find_task

# FLOP counters of different frameworks may differ a little in what they count.
FLOPS_TOLERANCE = 0.05


@dataclass(frozen=True)
class Shown:
    """What a table shows of one variant: the figure its verdict reads (the geometric
    mean over runs of each run's value by the estimator) and its 95% interval over runs,
    or, for one run read by its median, that run's own interval (None: no interval)."""

    value: float
    interval: tuple[float, float] | None
    runs: int


def shown(result: Result, comparison: Comparison, name: str) -> Shown | None:
    """`result`, the variant `name` of `comparison`, as a table shows it."""
    m, variant = result.measurement, comparison.variant(name)
    if m is None or variant is None:
        return None
    interval = variant.interval()
    if interval is None and comparison.estimator == "median":
        # One run (or a result from before runs): its median's interval within the
        # process, as its record has it.
        recorded = m.figure(comparison.figure)
        interval = (recorded.ci_low, recorded.ci_high)
    return Shown(variant.centre, interval, len(variant.values))


@dataclass
class SummaryRow:
    workload: tuple[Any, ...]
    results: dict[str, Result] = field(default_factory=dict)  # variant -> result
    # The band its verdict reads instead of the one its results recorded (--band).
    band: float | None = None

    @property
    def ok(self) -> dict[str, Result]:
        return {v: r for v, r in self.results.items() if r.measurement is not None}

    @functools.cached_property
    def compared(self) -> Comparison:
        """Its measured variants as its verdict reads them (built once the row is full):
        every figure the row shows comes from here, so its times, its `x` column and its
        verdict say the same numbers."""
        return comparison_of(self.ok, band=self.band)

    @property
    def best(self) -> str | None:
        ranked = self.compared.ranked()
        return ranked[0].name if ranked else None

    def relative(self, variant: str) -> float | None:
        """Its figure relative to the fastest variant's (fastest = 1.0), as the studies
        plot it; for the runner-up, the verdict's own ratio (Comparison.relative)."""
        return self.compared.relative(variant)

    def shown(self, variant: str) -> Shown | None:
        result = self.ok.get(variant)
        return shown(result, self.compared, variant) if result is not None else None

    def cell(self, variant: str, short: bool = False) -> str:
        """The table's cell of `variant`: its figure, interval and `x`."""
        result = self.results.get(variant)
        return cell(result, self.shown(variant), self.relative(variant), short)

    @property
    def different_work(self) -> bool:
        return any(r.different_work for r in self.results.values())

    @property
    def different_work_reason(self) -> str:
        """Why the row's variants do not do the same work (the first reason found)."""
        return next((w for r in self.results.values() if (w := r.different_work_reason)), "")

    def comparison(self) -> Verdict | None:
        """The fastest variant against the runner-up, on their runs."""
        return self.compared.verdict()

    def flops_mismatch(self) -> float | None:
        """Largest relative difference of FLOPs per step between variants, if over 5%."""
        counts = [
            r.work.flops_per_step
            for r in self.results.values()
            if r.work is not None and r.work.flops_per_step
        ]
        if len(counts) < 2:
            return None
        diff = (max(counts) - min(counts)) / min(counts)
        return diff if diff > FLOPS_TOLERANCE else None

    def verdict(self, short: bool = False) -> str:
        verdict = self.comparison()
        if verdict is None:
            failed = [f"{v} {r.status}" for v, r in self.results.items() if r.measurement is None]
            return "; ".join(failed) if failed else "one framework only"
        return self.marked(verdict, short)

    def marked(self, verdict: Verdict, short: bool = False) -> str:
        """A verdict of this row's (on its step time or another figure) with the row's
        marks: how its two sides execute, different work, FLOPs that differ."""
        text = verdict.short() if short else verdict.text()
        ok = self.ok
        text += execution_note(ok[verdict.faster].case, ok[verdict.slower].case)
        if self.different_work:
            text += (
                " [DIFFERENT WORK]" if short else f" [DIFFERENT WORK: {self.different_work_reason}]"
            )
        flops = self.flops_mismatch()
        if flops is not None:
            text += f" [FLOPs differ {flops:.0%}]"
        return text


# The fields of Case.workload_key(), in order ("model" is the workload's name, shared by
# two implementations of one network).
WORKLOAD_FIELDS = (
    "model",
    "task",
    "batch_size",
    "shape",
    "precision",
    "device",
    "threads",
    "world_size",
)


def batch_text(workload: dict[str, Any]) -> str:
    """The batch column: `8`, or `8x2` for 8 per replica on 2 replicas."""
    replicas = int(workload.get("world_size") or 1)
    return str(workload["batch_size"]) + (f"x{replicas}" if replicas > 1 else "")


# Workload fields a table shows only where its rows differ in them (or where asked).
VARYING = ("precision", "device", "threads")


def workload_head(rows: Sequence[SummaryRow], always: tuple[str, ...] = ()) -> list[str]:
    """The columns that name a row's workload: model, task, batch, shape, and whichever of
    precision, device and threads tell two rows apart (an fp32 and a bf16 row of the same
    shape would otherwise read the same)."""
    seen = [dict(zip(WORKLOAD_FIELDS, row.workload, strict=True)) for row in rows]
    extra = [f for f in VARYING if f in always or len({str(w[f]) for w in seen}) > 1]
    return ["model", "task", "batch", "shape", *extra]


def workload_cells(row: SummaryRow, head: list[str]) -> list[str]:
    """A row's values under `workload_head`'s columns."""
    w = dict(zip(WORKLOAD_FIELDS, row.workload, strict=True))
    return [batch_text(w) if col == "batch" else str(w[col]) for col in head]


def summarise(
    results: Iterable[Result], band: float | None = None
) -> tuple[list[str], list[SummaryRow]]:
    """Variants in first-seen order, and rows in first-seen workload order; `band`: the
    band their verdicts read instead of the one their results recorded.

    A later result of the same case replaces an earlier one.
    """
    variants: list[str] = []
    rows: dict[tuple[Any, ...], SummaryRow] = {}
    for r in results:
        key = r.case.workload_key()
        row = rows.setdefault(key, SummaryRow(workload=key, band=band))
        row.results[r.case.variant] = r
        if r.case.variant not in variants:
            variants.append(r.case.variant)
    return variants, list(rows.values())


def verdict_notes(rows: Sequence[SummaryRow]) -> list[str]:
    """The lines under a verdict table: what its marks mean and what to do."""
    notes = (
        inconclusive_advice(rows),
        budget_note(rows),
        unfinished_note(rows),
        mode_advice(rows),
        plan_note(rows),
        estimator_note(rows),
        band_note(rows),
        bimodal_note(rows),
        figure_note(rows),
    )
    return [n for n in notes if n]


def figure_note(rows: Iterable[SummaryRow]) -> str | None:
    """Which rows show and compare a figure other than the step time (a generation's time
    per output token), and where the others are."""
    shown: dict[str, str] = {}
    for row in rows:
        for r in row.ok.values():
            task = find_task(r.case.task)
            if r.verdict_figure != STEP_TIME.name and task is not None:
                shown[task.name] = task.figure(r.verdict_figure).label
    if not shown:
        return None
    parts = [f"{task} rows show and compare the {label}" for task, label in shown.items()]
    return (
        "; ".join(parts).capitalize()
        + " (the time to first token and the other figures of each case are in its "
        "record: `fwbench results --json`, `fwbench export`)."
    )


def budget_note(rows: Sequence[SummaryRow]) -> str | None:
    """Which comparisons the budget's time left re-opened and what came of it, and how
    many ended because the budget was spent."""
    measured = [[r.measurement for r in row.ok.values() if r.measurement] for row in rows]
    reopened = [row for row, ms in zip(rows, measured, strict=True) if any(m.reopened for m in ms)]
    ended = [
        row
        for row, ms in zip(rows, measured, strict=True)
        if any(m.stop_reason == "time_share" for m in ms)
    ]
    notes = []
    if reopened:
        names = "; ".join(
            f"{_workload_text(row)} ({v.short() if (v := row.comparison()) else 'no verdict'})"
            for row in reopened
        )
        notes.append(
            f"Re-opened with the budget's time left, once every comparison had had its minimum: "
            f"{names}. A re-opened comparison goes on under the same sequential plan, so its "
            "verdict keeps its error rate."
        )
    if ended:
        open_ = sum(1 for row in ended if (v := row.comparison()) and v.outcome == "inconclusive")
        notes.append(
            f"--budget: {len(ended)} of the comparisons stopped when the time was spent "
            f"({open_} of them inconclusive); a larger budget gives them more runs."
        )
    return " ".join(notes) or None


def _workload_text(row: SummaryRow) -> str:
    """A row's workload in a few words: `resnet18 train b8 64px c1000`."""
    w = dict(zip(WORKLOAD_FIELDS, row.workload, strict=True))
    return f"{w['model']} {w['task']} b{batch_text(w)} {w['shape']}".strip()


def unfinished_note(rows: Iterable[SummaryRow]) -> str | None:
    """How many comparisons hold a case whose command ended in the middle of its runs."""
    cut = sum(
        1
        for row in rows
        if any(r.measurement.stop_reason == "unfinished" for r in row.ok.values() if r.measurement)
    )
    if not cut:
        return None
    return (
        f"unfinished: {cut} of the comparisons hold runs of a command that ended before its "
        "stopping rule was met (their verdicts read the runs made); --resume measures them "
        "again."
    )


def _comparisons(rows: Iterable[SummaryRow]) -> list[Comparison]:
    return [row.compared for row in rows if len(row.ok) >= 2]


def estimator_note(rows: Iterable[SummaryRow]) -> str | None:
    """Which per-run value the times, `x` and verdicts read, where it is not each run's
    median, and how runs are paired where they were made in the same rounds."""
    found = _comparisons(rows)
    shown = [row.compared for row in rows if row.ok]
    used = {c.estimator for c in shown if c.estimator != "median"}
    paired = sum(c.paired for c in found)
    notes = []
    if used:
        notes.append(
            f"Times, x and verdicts read {' / '.join(ESTIMATOR_TEXT[e] for e in sorted(used))} "
            "(its geometric mean over runs, with a 95% interval): interference only adds "
            "time, so it moves less from run to run than the median. Each case's median "
            "step, its typical one, is in its record (`fwbench results`, `--json`: "
            "step_time_s.median)."
        )
    if paired:
        which = "Verdicts" if paired == len(found) else f"{paired} of {len(found)} verdicts"
        fixed = {
            percent(c.level)
            for c in found
            if c.paired and (c.plan is None or c.plan.last <= max(c.plan.first, 2))
        }
        level = f", at {' / '.join(sorted(fixed))} for a fixed number of runs" if fixed else ""
        notes.append(
            f"{which} pair the variants' runs round by round (their blocks alternated in each "
            "round, so what slowed the machine then slowed both): the interval is over the "
            f"rounds' ratios{level}."
        )
    return " ".join(notes) or None


def band_note(rows: Iterable[SummaryRow]) -> str | None:
    """The equivalence band the verdicts read, where it is not the default."""
    bands = sorted({c.band for c in _comparisons(rows)} - {DEFAULT_BAND})
    if not bands:
        return None
    said = " / ".join(f"±{percent(b)}" for b in bands)
    return (
        f"Equivalence band: {said} (--band; the default is ±{percent(DEFAULT_BAND)}): "
        "variants whose ratio's whole interval lies inside it are the same, and a "
        "difference is a finding only beyond it."
    )


# A note names this many bimodal runs, then counts the others.
_NAMED = 3


def bimodal_note(rows: Iterable[SummaryRow]) -> str | None:
    """Runs whose blocks fell in two clusters (stats.two_clusters): which, and which
    cluster the value their verdict reads and their median fall in."""
    found: list[str] = []
    for row in rows:
        estimator = row.compared.estimator
        for r in row.ok.values():
            assert r.measurement is not None
            for run in r.measurement.runs:
                clusters = stats.two_clusters(run.samples)
                if clusters is not None:
                    found.append(
                        f"{r.case.label()} run {run.index + 1} ({clusters.low * 1e3:.3g} ms "
                        f"x{clusters.n_low}, {clusters.high * 1e3:.3g} ms x{clusters.n_high}: "
                        f"{_cluster_read(run.samples, clusters, estimator)})"
                    )
    if not found:
        return None
    named = "; ".join(found[:_NAMED])
    if len(found) > _NAMED:
        named += f"; and {len(found) - _NAMED} more"
    return (
        f"Two clusters of blocks in {len(found)} run(s): {named}. Such a run's value reads "
        "one cluster and leaves the other out, and which one depends on how its blocks "
        "fell between them: its case's figure, the ratio and the verdict move with it from "
        "rerun to rerun. Where its verdict's value and its median read different clusters, "
        "they differ by the clusters' ratio."
    )


def _cluster_read(samples: Sequence[float], clusters: stats.Clusters, estimator: str) -> str:
    """Which cluster a run's verdict value and its median fall in, in words."""
    edge = math.sqrt(clusters.low * clusters.high)
    (value,) = per_run([Series(tuple(samples))], estimator)
    median = stats.median(samples)

    def side(x: float) -> str:
        return "faster" if x < edge else "slower"

    if estimator == "median":
        return f"its median reads the {side(median)}"
    if side(value) == side(median):
        return f"its {estimator} and its median read the {side(median)}"
    return f"its {estimator} reads the {side(value)}, its median the {side(median)}"


def plan_note(rows: Iterable[SummaryRow]) -> str | None:
    """How verdicts whose runs stopped once decided were read (their intervals are wider
    than 95%, so that every look together keeps 95%)."""
    plans = {
        looks.describe()
        for found in _comparisons(rows)
        if (looks := found.plan) is not None and looks.last > max(looks.first, 2)
    }
    if not plans:
        return None
    return (
        "Verdicts of variants measured until decided (stop_on: verdict) are sequential: "
        f"{'; '.join(sorted(plans))}."
    )


def mode_advice(rows: Iterable[SummaryRow]) -> str | None:
    """Says once what "[eager vs compiled]" and "[dynamic-range int8 vs fp32]" mean, when
    a verdict carries them."""
    pairs: dict[str, None] = {}
    # mark -> numerics -> the variants computing in them, in the order seen
    numerics: dict[str, dict[str, dict[str, None]]] = {}
    for row in rows:
        verdict = row.comparison()
        if verdict is None:
            continue
        a, b = row.ok[verdict.faster].case, row.ok[verdict.slower].case
        if a.runs_eagerly != b.runs_eagerly:
            eager, compiled = (a, b) if a.runs_eagerly else (b, a)
            pairs[f"{eager.variant} (op by op) against {compiled.variant} (compiled)"] = None
        if a.numerics != b.numerics:
            sides = numerics.setdefault(f"[{a.numerics} vs {b.numerics}]", {})
            for case in (a, b):
                sides.setdefault(case.numerics, {})[case.variant] = None
    notes = []
    if pairs:
        notes.append(
            f"[eager vs compiled]: {'; '.join(pairs)}. Each framework ran its default mode, as "
            "its users run it; for eager against eager or compiled against compiled, give "
            "--mode (a sweep's `mode`)."
        )
    if numerics:
        said = []
        for mark, sides in numerics.items():
            (first, computing), *rest = sides.items()
            text = f"{mark}: {' and '.join(computing)} computes in {first}"
            said.append(text + "".join(f", {' and '.join(v)} in {kind}" for kind, v in rest))
        notes.append(
            f"{'; '.join(said)}. Other arithmetic: such a result's outputs agree with its "
            "source framework's within a looser tolerance (its settings.output_tolerance); "
            "for like with like, give --mode (a sweep's `mode`)."
        )
    return " ".join(notes) or None


def inconclusive_advice(rows: Iterable[SummaryRow]) -> str | None:
    """What to do when verdicts cannot tell, in one line under the verdict table."""
    verdicts = [v for v in (row.comparison() for row in rows) if v is not None]
    unsure = [v for v in verdicts if v.outcome == "inconclusive"]
    if not unsure:
        return None
    fewest = min(min(v.runs) for v in unsure)
    needed = sorted(v.runs_needed for v in unsure if v.runs_needed is not None)
    estimate = ""
    if needed:
        low, high = needed[0], needed[-1]
        span = f"{low}" if low == high else f"{low} to {high}"
        if high >= RUNS_NEEDED_CAP:
            span = f"{low} to over {RUNS_NEEDED_CAP}" if low < RUNS_NEEDED_CAP else "over 100"
        estimate = (
            f" Were the differences what these runs show, about {span} runs a side would "
            "likely decide them."
        )
    return (
        f"{len(unsure)} of {len(verdicts)} verdicts are inconclusive: the runs of a case "
        f"spread more than the difference (as few as {fewest} runs a side).{estimate} More "
        "runs narrow the interval (`--max-runs`, or `timing: {max_runs: N}` in a sweep); a "
        "quieter machine narrows the spread (`--require-idle` waits for one)."
    )


# Beyond this relative half-width, the short form shows the interval's ends.
WIDE = 0.25


def cell(
    result: Result | None, figure: Shown | None, relative: float | None, short: bool = False
) -> str:
    """`12.34 ms (12.10-12.60) x1.08`; short: `12.34 ±1.2% x1.08` (or, for an interval
    wider than ±25%, `12.34 (8.1-19) x1.08`); `12.34 (1 run)` without an interval.
    `figure` is what the table shows of `result` (`shown`)."""
    if result is None:
        return "-"
    if result.measurement is None or figure is None:
        return result.status.upper()
    value = figure.value
    if figure.interval is None:
        text = f"{value * 1e3:.2f}{'' if short else ' ms'} ({figure.runs} run)"
    else:
        low, high = figure.interval
        half = (high - low) / 2 / value
        if short and half <= WIDE:
            text = f"{value * 1e3:.2f} ±{half:.1%}"
        elif short:
            # An interval over few runs is multiplicative and lopsided when wide: "±250%"
            # would say the time could be negative. Its ends say what it is.
            text = f"{value * 1e3:.2f} ({low * 1e3:.3g}-{high * 1e3:.3g})"
        else:
            text = f"{value * 1e3:.2f} ms ({low * 1e3:.2f}-{high * 1e3:.2f})"
    if relative is not None:
        text += f" x{relative:.2f}"
    return text


def alone(result: Result, short: bool = False) -> str:
    """One result's cell outside a row (tune's table): the figure its verdicts read."""
    found = comparison_of({"it": result})
    return cell(result, shown(result, found, "it"), None, short)


def estimator_of(rows: Iterable[SummaryRow]) -> str | None:
    """The estimator every row's figures read, where they agree (a table's header says
    it), else None."""
    found = {row.compared.estimator for row in rows if row.ok}
    return found.pop() if len(found) == 1 else None
