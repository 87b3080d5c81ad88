from __future__ import annotations

import numpy as np

from fwbench.report.regression import changes
from fwbench.result import Result

from .test_compare import run_medians
from .test_parity_and_summary import result, runs_of


def with_runs(r: Result, medians: list[float], rid: str) -> Result:
    assert r.measurement is not None
    gm = float(np.exp(np.mean(np.log(medians))))
    st = r.measurement.step_time_s.model_copy(
        update={"median": gm, "ci_low": min(medians), "ci_high": max(medians)}
    )
    m = r.measurement.model_copy(update={"runs": runs_of(medians), "step_time_s": st})
    return r.model_copy(update={"measurement": m, "result_id": rid})


def test_regressions_come_first_and_noise_is_unchanged() -> None:
    rng = np.random.default_rng(0)
    a = result("torch", "eager", 0.1, 0.001)
    b = result("tensorflow", "graph", 0.1, 0.001)
    base = [
        with_runs(a, run_medians(rng, 0.1, 5), "a0"),
        with_runs(b, run_medians(rng, 0.1, 5), "b0"),
    ]
    new = [
        with_runs(a, run_medians(rng, 0.1, 5), "a1"),  # the same machine, fresh processes
        with_runs(b, run_medians(rng, 0.125, 5), "b1"),  # 25% slower
    ]
    found = changes(base, new, threshold=0.05)
    assert [c.kind for c in found] == ["regression", "unchanged"]
    assert found[0].label == b.case.label()
    assert found[0].describe().startswith("regression: step time +2")


def test_small_slowdowns_below_the_threshold_do_not_count() -> None:
    rng = np.random.default_rng(1)
    a = result("torch", "eager", 0.1, 0.001)
    quiet = {"process_sd": 0.002, "block_sd": 0.005}
    base = [with_runs(a, run_medians(rng, 0.1, 6, **quiet), "a0")]
    new = [with_runs(a, run_medians(rng, 0.103, 6, **quiet), "a1")]
    (change,) = changes(base, new, threshold=0.05)
    assert change.kind == "unchanged"
    (change,) = changes(base, new, threshold=0.01)
    assert change.kind == "regression"


def test_status_changes_and_missing_cases_are_listed() -> None:
    ok = result("torch", "eager", 0.1, 0.001)
    oom = result("torch", "eager", 0, 0, "oom").model_copy(update={"result_id": "x"})
    other = result("tensorflow", "graph", 0.1, 0.001)
    found = changes([ok, other], [oom])
    kinds = {c.kind for c in found}
    assert kinds == {"status", "only-in-base"}
    assert any(c.describe() == "status ok -> oom" for c in found)


def test_an_unchanged_sweep_of_many_cases_raises_no_false_alarm() -> None:
    """A/A: 24 cases measured twice on a machine with a 3% process effect. Per-case 95%
    intervals would flag about one case in twenty; the family-wise gate flags at most
    5% of whole comparisons."""
    alarms = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        a = result("torch", "eager", 0.1, 0.001)
        base = [
            with_runs(
                a.model_copy(update={"case": a.case.model_copy(update={"batch_size": i + 1})}),
                run_medians(rng, 0.1, 3),
                f"b{i}",
            )
            for i in range(24)
        ]
        new = [with_runs(r, run_medians(rng, 0.1, 3), f"n{i}") for i, r in enumerate(base)]
        alarms += any(c.kind == "regression" for c in changes(base, new, threshold=0.05))
    assert alarms / 100 <= 0.05
