"""The launcher side of serving: each point in several runs (fresh worker processes),
the frameworks of one workload alternating (ABBA), and the record built from the runs.

A run is one process that builds the model, warms up and runs its scenario's LoadGen
tests; its figures are one observation, and a point's figures are the geometric mean
over runs with a t interval on their logs, as for step times (docs/decisions.md).
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fwbench.case import Case
from fwbench.launch.forkserver import ForkServers
from fwbench.launch.process import WorkerGone, WorkerProcess, case_env
from fwbench.launch.protocol import ServeReport, ServeRequest
from fwbench.measure import load, stats
from fwbench.measure.timing import TimingConfig
from fwbench.serve.result import Figure, ServingResult, ServingRun
from fwbench.serve.spec import ServeSpec, point_key

OnStatus = Callable[[str], None]


@dataclass(frozen=True)
class Point:
    case: Case
    spec: ServeSpec

    def label(self) -> str:
        return f"{self.case.label()} {self.spec.label()}"


def groups(points: Sequence[Point]) -> list[list[Point]]:
    """Points that differ only in framework or mode, together: their runs alternate."""
    found: dict[tuple[Any, ...], list[Point]] = {}
    for p in points:
        found.setdefault((p.case.workload_key(), p.spec), []).append(p)
    return list(found.values())


def figure(values: Sequence[float]) -> Figure | None:
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    found = stats.log_t_interval(values)
    if found is None:
        return Figure(value=values[0], ci_low=values[0], ci_high=values[0], runs=1)
    centre, low, high = found
    return Figure(
        value=centre, ci_low=min(low, centre), ci_high=max(high, centre), runs=len(values)
    )


def build_result(
    point: Point,
    runs: Sequence[ServingRun],
    reports: Sequence[ServeReport | None],
    invocation_id: str,
    result_id: str,
    log_dir: Path | None,
    busy_cores: float = TimingConfig().busy_cores,
) -> ServingResult:
    """The record of one point from its runs (pure; tested on synthetic runs)."""
    ok = [r for r in runs if r.status == "ok"]
    first = next((r for r in reports if r is not None), None)
    common: dict[str, Any] = {
        "result_id": result_id,
        "invocation_id": invocation_id,
        "recorded_at": datetime.now(),
        "point_key": point_key(point.case, point.spec),
        "case": point.case,
        "spec": point.spec,
        "runs": tuple(runs),
        "log_dir": str(log_dir.resolve()) if log_dir else None,
        "environment": first.environment if first else {},
        "settings": first.settings if first else {},
    }
    if not ok:
        failed = runs[0] if runs else None
        return ServingResult(
            **common,
            status=failed.status if failed else "error",
            error=(failed.error if failed else None) or "no run reported",
        )
    warnings = []
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
    latency = {
        p: f
        for p in (mains[0].latency_s if mains else {})
        if (f := figure([t.latency_s.get(p, 0.0) for t in mains])) is not None
    }
    overheads = [r.overhead_s for r in ok if r.overhead_s is not None]
    return ServingResult(
        **common,
        status="ok",
        validity="VALID" if valid else "INVALID",
        invalid_reasons=tuple(reasons),
        latency_s=latency,
        samples_per_s=figure([t.samples_per_s or 0.0 for t in mains]),
        max_qps=figure([r.max_qps or 0.0 for r in ok]) if point.spec.searches else None,
        search_resolution=max(brackets) if brackets else None,
        overhead_s=stats.median(overheads) if overheads else None,
        param_count=next((r.param_count for r in reports if r and r.param_count), None),
        warnings=tuple(warnings + [w for r in ok for w in r.warnings]),
    )


def _reasons(run: ServingRun) -> list[str]:
    if run.invalid_reason:
        return [run.invalid_reason]
    main = run.main_test
    return list(main.invalid_reasons) if main and main.validity != "VALID" else []


def serve_points(
    points: Sequence[Point],
    runs: int,
    timing: TimingConfig,
    timeout_s: float,
    log_root: Path,
    invocation_id: str,
    on_status: OnStatus | None = None,
) -> Iterator[ServingResult]:
    """Measure every point in `runs` runs; yield each group's results once it is done."""
    directory = Path(tempfile.mkdtemp(prefix="fwbench-servers-"))
    servers = ForkServers(directory)
    try:
        for group in groups(points):
            ids = [uuid.uuid4().hex for _ in group]
            found: list[list[tuple[ServingRun, ServeReport | None]]] = [[] for _ in group]
            for r in range(runs):
                order = list(enumerate(group))
                for i, point in order if r % 2 == 0 else order[::-1]:  # ABBA
                    if on_status:
                        on_status(f"{point.label()}: run {r + 1} of {runs}")
                    if timing.require_idle:
                        try:
                            load.wait_until_idle(timing.busy_cores, on_status)
                        except load.MachineBusy as exc:
                            found[i].append((_failed(r, "not started", "error", str(exc)), None))
                            continue
                    log_dir = log_root / ids[i] / f"run{r}"
                    found[i].append(_one_run(point, r, timing, timeout_s, log_dir, servers))
            for i, point in enumerate(group):
                done = [run for run, _ in found[i]]
                reports = [report for _, report in found[i]]
                log_dir = log_root / ids[i]
                yield build_result(
                    point,
                    done,
                    reports,
                    invocation_id,
                    ids[i],
                    log_dir if log_dir.exists() else None,
                    timing.busy_cores,
                )
    finally:
        servers.close()
        shutil.rmtree(directory, ignore_errors=True)


def _one_run(
    point: Point,
    index: int,
    timing: TimingConfig,
    timeout_s: float,
    log_dir: Path,
    servers: ForkServers,
) -> tuple[ServingRun, ServeReport | None]:
    case = point.case
    env = case_env(case)
    server = servers.get(case.framework, env, index) if case.device == "cpu" else None
    request = ServeRequest(case=case, spec=point.spec, timing=timing, log_dir=str(log_dir))
    worker = WorkerProcess(
        f"serve: {point.label()}", env, time.monotonic() + timeout_s, timeout_s, server
    )
    try:
        worker.send(request)
        report = ServeReport.model_validate(worker.receive()["report"])
    except WorkerGone as gone:
        failure = gone.failure
        return _failed(index, worker.launcher, failure.status, failure.error), None
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
