"""Serving's kind of round, and the record built from a point's runs.

A serving point is measured in several runs (fresh worker processes), by the same
scheduler as step times (fwbench.launch.local): the points of one workload (its
frameworks and modes) form a group, every point gets one run per round, the order
alternates from round to round (ABBA), workers fork from the same fork servers, and
`require_idle`, `--spread` and storing as runs finish apply alike. Unlike a case's runs,
a round's serving runs follow one another whole (a LoadGen test is seconds to minutes,
not a block), and a point makes a fixed number of runs.

A run is one process that builds the model, warms up and runs its scenario's LoadGen
tests; its figures are one observation, and a point's figures are the geometric mean
over runs with a t interval on their logs, as for step times (docs/decisions.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fwbench.case import Case
from fwbench.errors import one_line
from fwbench.launch.forkserver import ForkServers
from fwbench.launch.outcome import PointOutcome, WorkerFailure
from fwbench.launch.process import WorkerGone, WorkerProcess, case_env
from fwbench.launch.protocol import GroupRequest, ServeReport, ServeRequest
from fwbench.measure import load, stats
from fwbench.measure.runs import RunPlan, over_runs
from fwbench.measure.settings import TimingConfig
from fwbench.result import Result
from fwbench.scenario.record import Figure, Serving, ServingRun
from fwbench.scenario.spec import ServeSpec, point_key, point_label


@dataclass(frozen=True)
class Point:
    case: Case
    spec: ServeSpec

    def label(self) -> str:
        return point_label(self.case, self.spec)


def figure(values: Sequence[float]) -> Figure | None:
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    found = over_runs(values)
    if found is None:
        return Figure(value=values[0], ci_low=values[0], ci_high=values[0], runs=1)
    centre, low, high = found
    return Figure(value=centre, ci_low=low, ci_high=high, runs=len(values))


def build_result(
    point: Point,
    runs: Sequence[ServingRun],
    reports: Sequence[ServeReport | None],
    invocation_id: str,
    result_id: str,
    log_dir: Path | None,
    busy_cores: float = RunPlan().busy_cores,
    runs_due: int | None = None,
    group_id: str | None = None,
) -> Result:
    """The record of one point from its runs (pure; tested on synthetic runs).

    `runs_due`: the runs the point was to make, given when the command ended before
    they were all made (an outcome so far): the record says so, and `--resume` measures
    the point again. `group_id`: the group it was measured in, in rounds with the other
    points of its workload (PointOutcome.group_id)."""
    ok = [r for r in runs if r.status == "ok"]
    unfinished = runs_due is not None and len(runs) < runs_due
    first = next((r for r in reports if r is not None), None)
    common: dict[str, Any] = {
        "result_id": result_id,
        "invocation_id": invocation_id,
        "recorded_at": datetime.now(),
        "case": point.case,
        "environment": first.environment if first else {},
        "settings": first.settings if first else {},
    }
    served: dict[str, Any] = {
        "point_key": point_key(point.case, point.spec),
        "spec": point.spec,
        "runs": tuple(runs),
        "log_dir": str(log_dir.resolve()) if log_dir else None,
        "unfinished": unfinished,
        "group_id": group_id,
    }
    if not ok:
        failed = runs[0] if runs else None
        return Result(
            **common,
            status=failed.status if failed else "error",
            error=(failed.error if failed else None) or "no run reported",
            serving=Serving(**served),
        )
    warnings = []
    if unfinished:
        warnings.append(
            f"unfinished: the command ended after {len(runs)} of this point's {runs_due} runs; "
            "--resume measures it again"
        )
    if len(ok) < len(runs):
        failed = next(r for r in runs if r.status != "ok")
        warnings.append(
            f"{len(runs) - len(ok)} of {len(runs)} runs failed ({failed.status}: "
            f"{failed.error}); the figures are over the others"
        )
    if len(ok) == 1:
        warnings.append("one run: the figures have no interval (no variation between processes)")
    if busy := load.busy_warning([r.other_cpu_cores for r in ok], busy_cores):
        warnings.append(busy)
    mains = [t for r in ok if (t := r.main_test) is not None]
    if 0 < len(mains) < len(ok):
        warnings.append(
            f"{len(ok) - len(mains)} of {len(ok)} runs found no valid figure "
            f"({'; '.join(_reasons(next(r for r in ok if r.main_test is None)))}); "
            "the figures are over the others and the point is INVALID"
        )
    brackets = [r.max_qps_above / r.max_qps - 1 for r in ok if r.max_qps and r.max_qps_above]
    reasons = sorted({x for r in ok for x in _reasons(r)})
    valid = len(mains) == len(ok) and all(t.validity == "VALID" for t in mains)

    def over_runs(field: str) -> dict[str, Figure]:
        by_percentile: list[dict[str, float]] = [getattr(t, field) for t in mains]
        return {
            p: f
            for p in (by_percentile[0] if by_percentile else {})
            if (f := figure([values.get(p, 0.0) for values in by_percentile])) is not None
        }

    overheads = [r.overhead_s for r in ok if r.overhead_s is not None]
    return Result(
        **common,
        status="ok",
        serving=Serving(
            **served,
            validity="VALID" if valid else "INVALID",
            invalid_reasons=tuple(reasons),
            latency_s=over_runs("latency_s"),
            samples_per_s=figure([t.samples_per_s or 0.0 for t in mains]),
            ttft_s=over_runs("ttft_s"),
            tpot_s=over_runs("tpot_s"),
            tokens_per_s=figure([t.tokens_per_s or 0.0 for t in mains]),
            max_qps=figure([r.max_qps or 0.0 for r in ok]) if point.spec.searches else None,
            search_resolution=max(brackets) if brackets else None,
            overhead_s=stats.median(overheads) if overheads else None,
        ),
        param_count=next((r.param_count for r in reports if r and r.param_count), None),
        warnings=tuple(warnings + [w for r in ok for w in r.warnings]),
    )


def _reasons(run: ServingRun) -> list[str]:
    if run.invalid_reason:
        return [run.invalid_reason]
    main = run.main_test
    return list(main.invalid_reasons) if main and main.validity != "VALID" else []


def request_of(point: Point, timing: TimingConfig, runs: int, log_dir: Path) -> GroupRequest:
    """What the driver is given for a point: `runs` runs, their logs under `log_dir`."""
    sent = ServeRequest(case=point.case, spec=point.spec, timing=timing.run, log_dir=str(log_dir))
    plan = timing.plan.model_copy(update={"min_runs": runs, "max_runs": runs})
    return GroupRequest(sent, plan, timing.reading)


@dataclass
class PointRuns:
    """The launcher's state of one serving point of a group, across its runs."""

    request: GroupRequest
    runs: list[ServingRun] = field(default_factory=list)
    reports: list[ServeReport | None] = field(default_factory=list)
    stop: str | None = None

    @property
    def active(self) -> bool:
        return self.stop is None

    def end(self, failure: WorkerFailure) -> None:
        """No more runs: this one is recorded failed, beside those already made."""
        self.runs.append(_failed(len(self.runs), "not started", failure.status, failure.error))
        self.reports.append(None)
        self.stop = "failed"

    def outcome(self) -> PointOutcome:
        return PointOutcome(tuple(self.runs), tuple(self.reports))

    def so_far(self) -> PointOutcome | None:
        """The outcome if the command ended now (unfinished where runs were still due);
        None before its first run."""
        if not self.runs:
            return None
        return PointOutcome(tuple(self.runs), tuple(self.reports), unfinished=self.active)


def serve_round(
    order: list[PointRuns],
    round_index: int,
    timeout_s: float,
    on_phase: Callable[[str], None] | None,
    servers: ForkServers,
) -> None:
    """One run of each point, in `order`, one after another."""
    for state in order:
        request = state.request.sent
        assert isinstance(request, ServeRequest)
        runs = state.request.plan.max_runs
        if on_phase:
            label = point_label(request.case, request.spec)
            on_phase(f"{label}: run {round_index + 1} of {runs}")
        log_dir = Path(request.log_dir) / f"run{round_index}"
        run, report = _one_run(
            request.model_copy(update={"log_dir": str(log_dir), "seed": round_index}),
            round_index,
            runs,
            timeout_s,
            servers,
        )
        state.runs.append(run)
        state.reports.append(report)


def serve_stop(live: Sequence[PointRuns]) -> list[str | None]:
    """A point makes its fixed number of runs: the group's rounds end it."""
    return [None for _ in live]


def _one_run(
    request: ServeRequest, index: int, runs: int, timeout_s: float, servers: ForkServers
) -> tuple[ServingRun, ServeReport | None]:
    case = request.case
    env = case_env(case)
    label = f"serve: {point_label(case, request.spec)}"
    try:
        server = servers.for_case(case, env, index, runs)
        worker = WorkerProcess(label, env, time.monotonic() + timeout_s, timeout_s, server)
    except Exception as exc:
        return _failed(index, "none", "error", f"cannot start a worker: {one_line(exc)}"), None
    try:
        worker.send(request)
        report = ServeReport.model_validate(worker.receive()["report"])
    except WorkerGone as gone:
        failure = gone.failure
        return _failed(index, worker.launcher, failure.status, failure.error), None
    except Exception as exc:
        # What the worker said could not be read (a stray line, a report of another
        # version): this run's failure, as a case's run's is; the sweep goes on.
        return _failed(index, worker.launcher, "error", f"worker: {one_line(exc)}"), None
    finally:
        worker.close()
    run = ServingRun(
        index=index,
        launcher=worker.launcher,
        status=report.status,
        error=report.error,
        **report.run,
    )
    return run, report


def _failed(index: int, launcher: str, status: str, error: str) -> ServingRun:
    return ServingRun.model_validate(
        {"index": index, "launcher": launcher, "status": status, "error": error}
    )
