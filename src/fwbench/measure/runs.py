"""A case from its runs: the estimate, its interval, when to stop adding runs, and what
the runs say about the machine. Pure functions; no processes, no clocks.

Each run is one worker process with its own offset; the case's step time is the
geometric mean of its runs' medians, with a t interval on their logs
(fwbench.measure.stats.log_t_interval). One run has no between-process interval: its
own within-process interval is reported, with a warning saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fwbench.measure import load, stats
from fwbench.measure.timing import RunStop, RunTiming
from fwbench.measure.verdicts import Looks

# "budget": the case's max_time_s of timed blocks; "time_share": its group's share of a
# sweep's wall-clock budget (fwbench.launch.local.LocalExecutor's budget_s) was spent;
# "unfinished": the command ended (was killed) before the case's rule was met, and what
# its finished runs found was kept.
CaseStop = Literal[
    "precision", "verdict", "budget", "time_share", "max_runs", "failed", "unfinished"
]
ONE_RUN = "within one process (1 run): excludes between-process variation"


class RunPlan(BaseModel):
    """How many runs (worker processes) a case gets and when they stop: read by the
    driver, never sent to a worker, and recorded with every result (its verdicts are
    read under the plan its runs could have stopped at: `looks`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Between-process variation is the noise that matters (METHODOLOGY rule 16), so a
    # case is several runs; 1 is allowed, with a warning that its interval then excludes
    # that variation.
    min_runs: int = Field(3, ge=1, le=1000)
    max_runs: int = Field(10, ge=1, le=1000)
    # Stop adding runs when the 95% CI of the case (from its runs) is within +-target;
    # each run's blocks stop on the same target for their own interval (RunTiming.stop).
    target_ci: float = Field(0.02, gt=0, le=1)
    # Stop adding runs when the runs' steady states have taken this long in all.
    max_time_s: float = Field(10.0, gt=0, allow_inf_nan=False)
    # What stops the variants of one workload measured together: "verdict", once their
    # comparison is decided (a sequential interval keeps its error rate over the rounds:
    # fwbench.measure.verdicts.Looks), or "precision", once each case's interval is
    # within target_ci. A case measured alone stops on its precision under either.
    # "runs": nothing read from the data stops anything: max_runs runs, fewer only
    # where max_time_s or a sweep's budget ends them (never below min_runs), and
    # verdicts read as a fixed plan of the runs made.
    stop_on: Literal["precision", "verdict", "runs"] = "verdict"
    # Cores' worth of CPU that other processes may use during a run before it is flagged;
    # require_idle waits for a machine below it before each round (or refuses).
    busy_cores: float = Field(0.25, gt=0)
    require_idle: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> RunPlan:
        if self.max_runs < self.min_runs:
            raise ValueError(f"max_runs ({self.max_runs}) is below min_runs ({self.min_runs})")
        return self

    @property
    def looks(self) -> Looks | None:
        """The sequential plan its verdicts are read under: when its runs could stop on
        a verdict, every look from min_runs to max_runs counts; else (runs stopped on
        precision or their number) a verdict is read once (None: a fixed interval)."""
        if self.stop_on != "verdict":
            return None
        return Looks(self.min_runs, self.max_runs)

    def run_stop(self, timing: RunTiming) -> RunStop:
        """When each run's blocks stop: its own precision on this plan's target, or its
        run_time_s (never more than the case's whole budget)."""
        return timing.stop(self.target_ci, self.max_time_s)


class RunSummary(Protocol):
    """What the case-level rules read of one run: the driver's record of it as stored
    (fwbench.result.Run), or RunFigures."""

    @property
    def median_s(self) -> float: ...

    @property
    def ci_low_s(self) -> float: ...

    @property
    def ci_high_s(self) -> float: ...

    @property
    def steady_s(self) -> float: ...  # seconds of timed blocks

    @property
    def other_cpu_cores(self) -> float | None: ...  # CPU other processes used, in cores


@dataclass(frozen=True)
class RunFigures:
    """What the case-level rules read of one run, as values (a figure over the runs, a
    test's runs)."""

    median_s: float
    ci_low_s: float
    ci_high_s: float
    steady_s: float  # seconds of timed blocks
    other_cpu_cores: float | None = None  # CPU other processes used during it, in cores
    samples: tuple[float, ...] = ()  # its blocks, seconds per step (what estimators read)


@dataclass(frozen=True)
class Estimate:
    median_s: float
    ci_low_s: float
    ci_high_s: float
    method: str

    @property
    def half_width(self) -> float:
        return stats.relative_half_width(self.ci_low_s, self.ci_high_s, self.median_s)


def over_runs(values: Sequence[float]) -> tuple[float, float, float] | None:
    """A figure over its runs, from one value per run: their geometric mean and its 95%
    t interval on the logs (which contains it), or None with one value (no variation
    between processes to build an interval on). The case's step time and task figures,
    and a serving point's figures, are all made here."""
    found = stats.log_t_interval(values)
    if found is None:
        return None
    centre, low, high = found
    return centre, min(low, centre), max(high, centre)


def estimate(runs: Sequence[RunSummary]) -> Estimate:
    if not runs:
        raise ValueError("a case estimate needs at least one run")
    found = over_runs([r.median_s for r in runs])
    if found is None:
        (run,) = runs
        return Estimate(run.median_s, run.ci_low_s, run.ci_high_s, ONE_RUN)
    method = f"t interval on the log medians of {len(runs)} runs (geometric mean)"
    return Estimate(*found, method)


def figure_estimate(series: Sequence[Sequence[float]]) -> Estimate:
    """A task's figure over its runs (`series`: each run's blocks), estimated as the step
    time is from each run's median block; a case of one run gets that median's own 95%
    interval, as its step time has."""
    found = []
    for samples in series:
        med = stats.median(samples)
        low, high = stats.median_ci(samples)
        found.append(RunFigures(med, min(low, med), max(high, med), 0.0))
    return estimate(found)


def stop_reason(
    runs: Sequence[RunSummary], config: RunPlan, precision: bool = True
) -> CaseStop | None:
    """Why the case may stop adding runs now, or None while it needs more. Without
    `precision`, its own interval does not stop it (its comparison decides)."""
    n = len(runs)
    if n >= config.max_runs:
        return "max_runs"
    if n < config.min_runs:
        return None
    if (
        precision
        and config.stop_on != "runs"
        and n >= 2
        and estimate(runs).half_width <= config.target_ci
    ):
        return "precision"
    if sum(r.steady_s for r in runs) >= config.max_time_s:
        return "budget"
    return None


def group_stop(
    runs: Sequence[Sequence[RunSummary]],
    configs: Sequence[RunPlan],
    decided: bool | None = None,
) -> list[CaseStop | None]:
    """Why each case of a group (the variants of one workload, measured in rounds) stops
    now, or None while it goes on. `decided`: whether the group's comparison is decided,
    read under its sequential plan (None: the group stops on precision instead). Variants
    stay interleaved to the last round: a case whose own rule is met goes on while
    another needs more runs, so no variant is ever measured alone; only its `max_runs`,
    a hard cap, stops one case early."""
    if decided:
        return ["verdict"] * len(runs)
    precision = decided is None
    reasons = [stop_reason(r, c, precision) for r, c in zip(runs, configs, strict=True)]
    if all(reason is not None for reason in reasons):
        return reasons
    return [reason if reason == "max_runs" else None for reason in reasons]


def warnings(runs: Sequence[RunSummary], stop: str, config: RunPlan) -> list[str]:
    out: list[str] = []
    if not runs:
        return out
    est = estimate(runs)
    if len(runs) == 1:
        out.append(
            "one run: the interval is within one process and excludes the variation between "
            "processes (usually the larger); use min_runs >= 3 for an interval a rerun confirms"
        )
    elif est.half_width > config.target_ci and stop != "verdict" and config.stop_on != "runs":
        # (Stopped once its comparison was decided: its own precision was not the goal.)
        out.append(
            f"precision target not reached: 95% CI is ±{est.half_width:.1%} over "
            f"{len(runs)} runs, target ±{config.target_ci:.1%} ({stop} ended the measurement)"
        )
    loads = [r.other_cpu_cores for r in runs]
    known = [(i, x) for i, x in enumerate(loads) if x is not None]
    if busy := load.busy_warning(loads, config.busy_cores):
        out.append(busy)
    if len(known) >= 2:
        low_i, low = min(known, key=lambda p: p[1])
        high_i, high = max(known, key=lambda p: p[1])
        if high - low > config.busy_cores:
            out.append(
                f"run {high_i + 1} saw {high:.2f} cores of other load against {low:.2f} in run "
                f"{low_i + 1}: its median ({runs[high_i].median_s * 1e3:.3g} ms) is pooled "
                "with runs that ran under other conditions"
            )
    return out
