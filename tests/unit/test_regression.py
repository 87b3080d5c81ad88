from __future__ import annotations

import numpy as np

from fwbench.report.regression import changes
from fwbench.result import Result

from .test_parity_and_summary import result


def with_samples(r: Result, samples: list[float], rid: str) -> Result:
    assert r.measurement is not None
    xs = sorted(samples)
    st = r.measurement.step_time_s.model_copy(
        update={"median": float(np.median(xs)), "ci_low": xs[0], "ci_high": xs[-1]}
    )
    m = r.measurement.model_copy(update={"samples": tuple(samples), "step_time_s": st})
    return r.model_copy(update={"measurement": m, "result_id": rid})


def test_regressions_come_first_and_noise_is_unchanged() -> None:
    rng = np.random.default_rng(0)
    a = result("torch", "eager", 0.1, 0.001)
    b = result("tensorflow", "graph", 0.1, 0.001)
    base = [
        with_samples(a, list(0.1 * rng.lognormal(0, 0.02, 30)), "a0"),
        with_samples(b, list(0.1 * rng.lognormal(0, 0.02, 30)), "b0"),
    ]
    new = [
        with_samples(a, list(0.1 * rng.lognormal(0, 0.02, 30)), "a1"),  # same distribution
        with_samples(b, list(0.125 * rng.lognormal(0, 0.02, 30)), "b1"),  # 25% slower
    ]
    found = changes(base, new, threshold=0.05)
    assert [c.kind for c in found] == ["regression", "unchanged"]
    assert found[0].label == b.case.label()
    assert found[0].describe().startswith("regression: step time +2")


def test_small_slowdowns_below_the_threshold_do_not_count() -> None:
    rng = np.random.default_rng(1)
    a = result("torch", "eager", 0.1, 0.001)
    base = [with_samples(a, list(0.1 * rng.lognormal(0, 0.005, 40)), "a0")]
    new = [with_samples(a, list(0.103 * rng.lognormal(0, 0.005, 40)), "a1")]
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
