"""A case from its runs: when to stop adding runs, and what the runs say (pure)."""

from __future__ import annotations

import pytest

from fwbench.measure import stats
from fwbench.measure.runs import ONE_RUN, RunFigures, RunPlan, estimate, stop_reason, warnings
from fwbench.measure.settings import TimingConfig
from fwbench.measure.timing import RunTiming, drift_of


def fig(median: float, steady: float = 1.0, other: float | None = 0.0) -> RunFigures:
    return RunFigures(median, median * 0.99, median * 1.01, steady, other)


CONFIG = RunPlan(min_runs=3, max_runs=6, target_ci=0.02, max_time_s=10.0)


def test_runs_are_added_until_the_interval_is_precise() -> None:
    assert stop_reason([fig(0.1), fig(0.1001)], CONFIG) is None  # below min_runs
    assert stop_reason([fig(0.1), fig(0.1001), fig(0.0999)], CONFIG) == "precision"
    spread = [fig(0.10), fig(0.11), fig(0.12)]
    assert stop_reason(spread, CONFIG) is None
    assert stop_reason([fig(m, steady=4.0) for m in (0.10, 0.11, 0.12)], CONFIG) == "budget"
    assert stop_reason([fig(0.1 + 0.01 * (i % 2)) for i in range(6)], CONFIG) == "max_runs"


def test_the_estimate_is_the_geometric_mean_of_run_medians() -> None:
    est = estimate([fig(0.1), fig(0.2)])
    assert est.median_s == pytest.approx(stats.geometric_mean([0.1, 0.2]))
    assert est.ci_low_s < est.median_s < est.ci_high_s
    assert "2 runs" in est.method
    one = estimate([fig(0.1)])
    assert (one.ci_low_s, one.ci_high_s, one.method) == (0.099, 0.101, ONE_RUN)


def test_one_run_says_its_interval_is_within_one_process() -> None:
    (found,) = warnings([fig(0.1)], "max_runs", RunPlan(min_runs=1, max_runs=1))
    assert found.startswith("one run: the interval is within one process")


def test_a_busy_machine_and_a_run_unlike_its_siblings_are_flagged() -> None:
    runs = [fig(0.1, other=0.0), fig(0.1, other=0.02), fig(0.13, other=1.1)]
    found = warnings(runs, "max_runs", CONFIG)
    assert any(
        w.startswith("busy machine: other processes used 1.10 cores during run 3") for w in found
    )
    assert any(
        w.startswith("run 3 saw 1.10 cores of other load against 0.00 in run 1") for w in found
    )
    quiet = warnings([fig(0.1), fig(0.1), fig(0.1)], "precision", CONFIG)
    assert quiet == []


def test_a_trend_left_in_a_run_is_measured() -> None:
    assert drift_of([1.0] * 7) is None  # too few blocks to tell
    assert drift_of([1.0] * 5 + [1.1] * 5) == pytest.approx(0.1)
    assert drift_of([1.0, 1.1] * 6) == pytest.approx(0.0)


def test_median_ci_says_its_coverage_with_few_samples() -> None:
    assert stats.median_ci_coverage(5) == pytest.approx(0.9375)
    assert stats.median_ci_coverage(3) == pytest.approx(0.75)
    assert stats.median_ci_coverage(6) == 0.95
    # The smallest default run has a real 95% interval.
    assert stats.median_ci_coverage(RunTiming().min_samples) == 0.95


def test_timing_settings_are_checked_against_each_other() -> None:
    with pytest.raises(ValueError, match="max_runs"):
        TimingConfig(min_runs=5, max_runs=3)
    with pytest.raises(ValueError):
        TimingConfig(max_time_s=float("nan"))
    with pytest.raises(ValueError, match="give settings by name or by part"):
        TimingConfig.model_validate({"plan": {}, "max_runs": 3})
    with pytest.raises(ValueError, match="unknown setting 'max_run'"):
        TimingConfig(max_run=3)


def test_a_group_stops_together_and_no_variant_goes_on_alone() -> None:
    from fwbench.measure.runs import group_stop

    precise = [fig(0.1), fig(0.1001), fig(0.0999)]
    spread = [fig(0.10), fig(0.11), fig(0.12)]
    configs = [CONFIG, CONFIG]
    # The first variant's own rule is met; the second needs more runs: both go on.
    assert group_stop([precise, spread], configs) == [None, None]
    assert group_stop([precise, precise], configs) == ["precision", "precision"]
    budget = [fig(m, steady=4.0) for m in (0.10, 0.11, 0.12)]
    assert group_stop([precise, budget], configs) == ["precision", "budget"]
    # A decided comparison stops the group at once, its own precision aside.
    assert group_stop([spread, spread], configs, decided=True) == ["verdict", "verdict"]
    # Undecided, precision does not stop it; the budget and the cap still do.
    assert group_stop([precise, precise], configs, decided=False) == [None, None]
    assert group_stop([budget, budget], configs, decided=False) == ["budget", "budget"]
    # A hard cap stops its case whatever the others need.
    capped = RunPlan(min_runs=3, max_runs=3, target_ci=0.02, max_time_s=10.0)
    assert group_stop([spread, spread], [capped, CONFIG]) == ["max_runs", None]


def test_a_fixed_number_of_runs_is_not_cut_short_by_what_the_runs_show() -> None:
    fixed = CONFIG.model_copy(update={"stop_on": "runs"})
    precise = [fig(0.1), fig(0.1001), fig(0.0999)]
    assert stop_reason(precise, fixed) is None  # precise, but not at max_runs yet
    assert stop_reason([fig(0.1) for _ in range(6)], fixed) == "max_runs"
    # Time still ends it: the blocks' total, which the values do not decide.
    assert stop_reason([fig(m, steady=4.0) for m in (0.10, 0.11, 0.12)], fixed) == "budget"
    # Short of a precision it never aimed at, it says nothing about precision.
    assert warnings([fig(0.10), fig(0.12), fig(0.14)], "budget", fixed) == []
