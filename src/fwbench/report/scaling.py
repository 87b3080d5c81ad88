"""Scaling of data-parallel cases: throughput and efficiency against workers. Pure.

Scaling efficiency of N workers = throughput(N) / (N x throughput(1)) = t_1 / t_N, with
its interval over runs, against the strategy itself at world size 1: `efficiency`, which
the studies' claims judge too (fwbench.studies.trends says why).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fwbench.measure.verdicts import comparison_of
from fwbench.result import Result
from fwbench.studies.trends import efficiency


@dataclass
class ScalingPoint:
    world_size: int
    status: str
    error: str | None = None
    global_batch_size: int = 0
    step_time_s: float | None = None
    throughput: float | None = None  # samples per second over all replicas
    efficiency: float | None = None  # None: not measured, or no world-size-1 baseline
    efficiency_ci: tuple[float, float] | None = None
    communication_s: float | None = None
    communication_share: float | None = None
    # No profiler ran (the framework's cannot be read; its error is in the record): the
    # communication is unknown, not "none seen".
    communication_unread: bool = False


@dataclass
class ScalingSeries:
    variant: str  # framework/mode/strategy
    points: list[ScalingPoint] = field(default_factory=list)

    @property
    def has_baseline(self) -> bool:
        return any(p.world_size == 1 and p.step_time_s for p in self.points)


@dataclass
class ScalingPanel:
    title: str  # the workload at a fixed per-replica batch
    series: list[ScalingSeries] = field(default_factory=list)


def _workload(r: Result) -> tuple[Any, ...]:
    return r.case.workload_key()[:-1]  # everything but the replicas


def _title(r: Result) -> str:
    c = r.case
    return f"{c.model} {c.task} b{c.batch_size}/replica {c.shape} {c.device} t{c.threads}"


def scaling(results: Iterable[Result]) -> list[ScalingPanel]:
    """One panel per workload with data-parallel results, one series per strategy.

    A later result of the same case replaces an earlier one.
    """
    latest: dict[tuple[Any, ...], dict[str, dict[int, Result]]] = {}
    titles: dict[tuple[Any, ...], str] = {}
    for r in results:
        if not r.case.strategy:
            continue
        key = _workload(r)
        titles.setdefault(key, _title(r))
        latest.setdefault(key, {}).setdefault(r.case.variant, {})[r.case.replicas] = r
    panels = []
    for key, by_variant in latest.items():
        panel = ScalingPanel(titles[key])
        for variant, by_size in by_variant.items():
            series = ScalingSeries(variant)
            base = by_size.get(1)
            base_ok = base is not None and base.measurement is not None
            for n in sorted(by_size):
                series.points.append(_point(by_size[n], base if base_ok else None))
            panel.series.append(series)
        panels.append(panel)
    return panels


def _point(r: Result, base: Result | None) -> ScalingPoint:
    point = ScalingPoint(
        world_size=r.case.replicas,
        status=r.status,
        error=r.error,
        global_batch_size=r.case.global_batch_size,
    )
    if r.measurement is None:
        return point
    # Read as the efficiency beside it reads them (the recorded estimator over runs), so
    # the row's own throughputs give its efficiency: medians here read 0.68 beside 1.00.
    read = comparison_of({"it": r}).variant("it")
    point.step_time_s = read.centre if read is not None else r.measurement.step_time_s.median
    point.throughput = r.case.units_per_step / point.step_time_s
    if base is not None:
        point.efficiency, point.efficiency_ci = efficiency(base, r)
    comm = r.distributed.communication if r.distributed else None
    if comm is not None and comm.in_flight_s is not None:
        point.communication_s = comm.in_flight_s
        point.communication_share = comm.share_of_step
    elif comm is not None and comm.profiler is None and comm.error:
        point.communication_unread = True
    return point


# Under every scaling table: what its times are.
READ = (
    "Step ms and samples/s are read as the efficiency is: each run's value by the "
    "estimator its results were recorded under, their geometric mean over runs."
)


def error_bars(points: list[ScalingPoint]) -> tuple[list[float], list[float]]:
    """Distances from each efficiency down and up to its interval (0 without one)."""
    minus, plus = [], []
    for p in points:
        ci, value = p.efficiency_ci, p.efficiency
        minus.append(value - ci[0] if ci and value is not None else 0.0)
        plus.append(ci[1] - value if ci and value is not None else 0.0)
    return minus, plus


def rows(panels: list[ScalingPanel]) -> tuple[list[str], list[list[str]]]:
    """The scaling table, as text cells: for the terminal, Markdown and HTML alike."""
    head = [
        "workload",
        "strategy",
        "workers",
        "global batch",
        "step ms",
        "samples/s",
        "efficiency (95% CI)",
        "communication ms (share)",
    ]
    body = []
    for panel in panels:
        for series in panel.series:
            for p in series.points:
                if p.step_time_s is None:
                    measured = [p.status.upper(), "", "", ""]
                else:
                    measured = [
                        f"{p.step_time_s * 1e3:.1f}",
                        f"{p.throughput:.1f}" if p.throughput else "",
                        _efficiency_text(p, series.has_baseline),
                        f"{p.communication_s * 1e3:.1f} ({p.communication_share:.0%})"
                        if p.communication_s is not None and p.communication_share is not None
                        else "not read"
                        if p.communication_unread
                        else "none seen",
                    ]
                body.append(
                    [
                        panel.title,
                        series.variant,
                        str(p.world_size),
                        str(p.global_batch_size),
                        *measured,
                    ]
                )
    return head, body


def _efficiency_text(p: ScalingPoint, has_baseline: bool) -> str:
    if p.efficiency is None:
        return "" if has_baseline else "no 1-worker baseline"
    if p.efficiency_ci is None:
        return f"{p.efficiency:.2f}"
    return f"{p.efficiency:.2f} ({p.efficiency_ci[0]:.2f}-{p.efficiency_ci[1]:.2f})"
