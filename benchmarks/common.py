"""Helpers shared by the benchmark scripts: run cases through fwbench's own API."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.measure.settings import TimingConfig
from fwbench.result import Result
from fwbench.store.db import ResultStore

# Each framework's default mode, as the quick preset runs them.
MODES = {"torch": "eager", "tensorflow": "graph"}


def workload_case(framework: str, workload: str, threads: int | None = None) -> Case:
    """The quick preset's case of `framework` for "MODEL:TASK:BATCH" (64 px, 1000 classes)."""
    model, task, batch = workload.split(":")
    return Case.build(
        framework=framework, mode=MODES[framework], model=model, task=task,
        batch_size=int(batch), input_size=64, num_classes=1000, device="cpu", threads=threads,
    )  # fmt: skip


def prepare_worker(worker: Any, request: Any, timing: TimingConfig) -> Any:
    """Drive a fresh worker (fwbench.launch.rounds.start_worker) as a round does up to its
    blocks: the request, its build, first step and warmup, then blocks long enough to
    alternate (min_switch_block_s). Returns its Prepared."""
    from fwbench.launch import rounds

    worker.send(request)
    prepared, _ = rounds.prepare_run(worker, timing.run, time.perf_counter())
    return rounds.switch_blocks(prepared, timing.run.min_switch_block_s)


def run_one(case: Case, timing: TimingConfig, db: Path | None = None) -> Result:
    """One case in a fresh worker, stored in `db` (a throw-away file by default)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = db or Path(tmp) / "bench.duckdb"
        with ResultStore(path) as store:
            options = RunOptions(timing=timing, count_flops=False)
            (result,) = run_cases([case], store, "benchmark", options)
    if result.status != "ok":
        raise RuntimeError(f"{case.label()}: {result.status}: {result.error}")
    return result


def half_width(result: Result) -> float:
    m = result.measurement
    assert m is not None
    st = m.step_time_s
    return (st.ci_high - st.ci_low) / 2 / st.median


def steady_seconds(result: Result) -> float:
    """Seconds of timed blocks over all of the result's runs."""
    m = result.measurement
    assert m is not None
    if not m.runs:
        return sum(m.samples) * m.steps_per_block
    return sum(sum(r.samples) * r.steps_per_block for r in m.runs)


def measure_group(cases: list[Case], timing: TimingConfig, timeout_s: float = 600) -> list[Any]:
    """Measurements of cases run as one interleaved group (identical cases included: each
    side gets its own runs), without a results file."""
    from fwbench.launch import local
    from fwbench.launch.protocol import GroupRequest
    from fwbench.launch.records import measurement_of

    requests = [GroupRequest.for_case(c, timing, count_flops=False) for c in cases]
    found = []
    for outcome in local.run_group(requests, timeout_s):
        if not outcome.runs:
            failed = outcome.failure.error if outcome.failure else outcome.report
            raise RuntimeError(f"no measurement: {failed}")
        found.append(measurement_of(outcome.runs, outcome.stop_reason or "", outcome.group_id))
    return found


def verdict_of(sides: dict[str, Any], estimator: str = "p25", looks: Any = None) -> Any:
    """The verdict between measurements (name -> Measurement) as fwbench reads it: paired
    by round where they were measured in one group (measure_group), else unpaired."""
    from fwbench.measure.verdicts import comparison_between

    return comparison_between(sides, looks=looks, estimator=estimator).verdict()


def against_target(low: float, high: float, target: float) -> str:
    """A crosscheck's ratio interval read against 1.00 +- target: 'yes' where the whole
    interval lies within it, 'NO' where the whole interval lies outside it, and '?'
    where it straddles an edge (more rounds would decide)."""
    if 1 - target <= low and high <= 1 + target:
        return "yes"
    return "NO" if low > 1 + target or high < 1 - target else "?"
