"""Helpers shared by the benchmark scripts: run cases through fwbench's own API."""

from __future__ import annotations

import tempfile
from pathlib import Path

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.measure.timing import TimingConfig
from fwbench.result import Result
from fwbench.store.db import ResultStore


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
    m = result.measurement
    assert m is not None
    return sum(m.samples) * m.steps_per_block
