"""The data behind each chart of the report, as plain structures. Pure functions.

The studies' figures: relative time per model (fastest framework = 1.0) over batch x
input shape, with out-of-memory and failed cases kept as marked gaps (Fig 1-3); time per
sample against batch size with a test of the downward trend (Fig 4); energy per sample
against batch size (Fig 5); and peak memory against batch size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fwbench.report.summary import summarise
from fwbench.result import Result
from fwbench.studies.trends import Trend, downward_trend
from fwbench.tasks import STEP_TIME, Task
from fwbench.tasks.infer import INFER

# The relative-time axis reaches this at most. Past it, one slow variant (a 19x bar)
# shrank every other bar to a sliver, the fastest's 1.0 among them, and a 1.1x against
# 1.3x could not be told apart. A bar past it is cut at the top of the axis with its value
# written on it. Not a log axis: a bar's length then no longer says how long it took.
RELATIVE_CAP = 5.0


@dataclass
class Point:
    x: str  # "b8 x 64px"
    value: float | None  # None: no measurement (see status)
    status: str
    error: str | None = None
    ci: tuple[float, float] | None = None


@dataclass
class Panel:
    """One model's chart: a series per variant over the same x categories."""

    title: str
    x: list[str]
    series: dict[str, list[Point]] = field(default_factory=dict)
    note: str = ""
    # The axis' top where a bar goes past RELATIVE_CAP (that bar is cut there); None: none.
    cap: float | None = None

    def shown(self, point: Point) -> float | None:
        """The height a point's bar is drawn to (cut at the cap)."""
        if point.value is None or self.cap is None:
            return point.value
        return min(point.value, self.cap)

    def cut(self, point: Point) -> bool:
        """Whether the point's bar is cut at the top of the axis."""
        return self.cap is not None and point.value is not None and point.value > self.cap


def panel_notes(panels: Sequence[Panel]) -> list[str]:
    """What a chart's caption must say of its panels (a size whose variants did different
    work, and why)."""
    return [f"{p.title.partition(' [')[0]}: {p.note}" for p in panels if p.note]


def _x(r: Result, threads: bool = False) -> str:
    """A workload's place on a model's axis: its batch and shape, its precision where it
    is not fp32, its threads where the model's panel holds more than one count (each
    x one workload: two precisions at one batch are two bars, not one over the other)."""
    c = r.case
    return " ".join(
        [f"b{c.batch_size} {c.shape}"]
        + ([c.precision] if c.precision else [])
        + ([f"{c.threads} threads"] if threads else [])
    )


def relative_subject(task: Task) -> str:
    """What a task's relative chart compares: its step time ("inference time"), or the
    figure its verdicts read, which the chart plots ("time per output token")."""
    if task.verdict_figure == STEP_TIME.name:
        return f"{task.label} time"
    return task.figure(task.verdict_figure).label


def relative_time(results: Sequence[Result], task: str, device: str) -> list[Panel]:
    """Fig 1-3: the time its verdicts read (step time; a generation's time per output
    token) relative to the fastest variant of the same work, with the axis cut at
    RELATIVE_CAP where a bar goes past it."""
    variants, rows = summarise(
        r for r in results if r.case.task == task and r.case.device == device
    )
    panels: dict[str, Panel] = {}
    different: dict[str, list[tuple[str, str]]] = {}  # model -> (x, why)
    counts: dict[str, set[int]] = {}
    for row in rows:
        counts.setdefault(str(row.workload[0]), set()).update(
            r.case.threads for r in row.results.values()
        )
    for row in rows:
        model = str(row.workload[0])
        any_result = next(iter(row.results.values()))
        x = _x(any_result, threads=len(counts[model]) > 1)
        panel = panels.setdefault(model, Panel(title=model, x=[]))
        if x not in panel.x:
            panel.x.append(x)
        for v in variants:
            r = row.results.get(v)
            rel = row.relative(v)
            if r is None:
                continue
            point = Point(x, rel, r.status, r.error)
            # The interval of the figure its verdict reads, against the fastest's figure.
            mine, best = row.shown(v), row.best
            base = row.shown(best) if best is not None else None
            if rel is not None and mine is not None and mine.interval and base is not None:
                low, high = mine.interval
                point.ci = (low / base.value, high / base.value)
            panel.series.setdefault(v, []).append(point)
        if row.different_work:
            different.setdefault(model, []).append((x, row.different_work_reason))
    for model, found in different.items():
        # On the chart itself too: those bars are not the same work's times.
        panels[model].title = f"{model} [DIFFERENT WORK at {', '.join(x for x, _ in found)}]"
        panels[model].note = "; ".join(f"different work at {x}: {why}" for x, why in found)
    for panel in panels.values():
        values = [p.value for ps in panel.series.values() for p in ps if p.value is not None]
        if values and max(values) > RELATIVE_CAP:
            panel.cap = RELATIVE_CAP
    return list(panels.values())


@dataclass
class Curve:
    variant: str
    batch_sizes: list[int]
    values: list[float]
    failed: list[tuple[int, str]]  # batch sizes without a value, and why
    trend: Trend | None = None
    # Each value's 95% interval over runs, drawn as error bars; empty: none to draw.
    intervals: list[tuple[float, float]] = field(default_factory=list)

    def error_bars(self) -> tuple[list[float], list[float]]:
        """Distances from each value down and up to its interval."""
        minus = [v - low for v, (low, _) in zip(self.values, self.intervals, strict=True)]
        plus = [high - v for v, (_, high) in zip(self.values, self.intervals, strict=True)]
        return minus, plus


@dataclass
class CurvePanel:
    title: str
    curves: list[Curve]


def _curves(results: Sequence[Result], task: str, value: str) -> list[CurvePanel]:
    # A panel per workload but its batch size: two precisions or thread counts are two
    # panels, never one curve whose points overwrite each other.
    panels: dict[tuple[Any, ...], dict[str, list[Result]]] = {}
    for r in results:
        if r.case.task != task:
            continue
        key = tuple(v for i, v in enumerate(r.case.workload_key()) if i != 2)
        panels.setdefault(key, {}).setdefault(r.case.variant, []).append(r)
    out = []
    for key, by_variant in panels.items():
        c = next(iter(by_variant.values()))[0].case
        title = f"{key[0]}, {c.shape}, {c.device}"
        if c.precision:
            title += f", {c.precision}"
        if len({k[5] for k in panels if k[:5] == key[:5]}) > 1:
            title += f", {c.threads} threads"
        if c.replicas > 1:
            title += f", {c.replicas} replicas"
        curves = []
        for variant, rs in by_variant.items():
            latest = {r.case.batch_size: r for r in rs}  # a later result of a case wins
            batch_sizes: list[int] = []
            values: list[float] = []
            failed: list[tuple[int, str]] = []
            samples: list[list[float]] = []
            for b in sorted(latest):
                r = latest[b]
                v = _value(r, value)
                if v is None:
                    failed.append((b, r.status if r.status != "ok" else "not measured"))
                    continue
                batch_sizes.append(b)
                values.append(v)
                if r.measurement is not None:
                    samples.append([m / b for m in r.measurement.per_run()])
            trend = downward_trend(batch_sizes, samples) if value == "per_sample_s" else None
            curves.append(Curve(variant, batch_sizes, values, failed, trend))
        if any(c.values for c in curves):  # a panel of failures only has nothing to draw
            out.append(CurvePanel(title, curves))
    return out


def _value(r: Result, value: str) -> float | None:
    m = r.measurement
    if m is None:
        return None
    if value == "per_sample_s":
        return m.step_time_s.median / r.case.batch_size
    if value == "joules_per_sample":
        return r.energy.joules_per_sample if r.energy else None
    if value == "peak_mib":
        if r.memory is None:
            return None
        if r.case.device == "cuda":
            # The device's steady-state peak, or nothing: the host's RSS is not the same
            # figure (JAX's peak, the process's, is not either: jax_common).
            device_peak = (r.memory.device or {}).get("allocated_peak_bytes")
            return device_peak / 2**20 if device_peak else None
        return r.memory.host_peak_bytes / 2**20
    raise ValueError(value)


def per_sample_time(results: Sequence[Result]) -> list[CurvePanel]:
    """Fig 4: inference time per sample against batch size, with the trend test."""
    return _curves(results, INFER.name, "per_sample_s")


def energy_per_sample(results: Sequence[Result]) -> list[CurvePanel]:
    """Fig 5: energy per sample against batch size (empty when nothing was measured)."""
    return _curves(results, INFER.name, "joules_per_sample")


def energy_reasons(results: Sequence[Result]) -> list[str]:
    return sorted({r.energy.reason for r in results if r.energy and r.energy.reason})


def peak_memory(results: Sequence[Result], task: str) -> list[CurvePanel]:
    """Peak memory against batch size: the device allocator's on GPUs, host RSS on CPUs."""
    return _curves(results, task, "peak_mib")
