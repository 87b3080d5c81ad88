"""Comparisons: the pairs a comparison decides, their verdicts and ratios, and the
estimator that turns a run into one value (pure; synthetic per-run values)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fwbench.measure.comparison import Comparison, common_estimator, per_run


@dataclass(frozen=True)
class FakeRun:
    median_s: float
    samples: tuple[float, ...] = ()


def test_fastest_against_runner_up_is_decided_on_their_runs() -> None:
    runs = {
        "slow": [0.130, 0.132, 0.128],
        "fast": [0.100, 0.101, 0.099],
        "middle": [0.120, 0.119, 0.121],
        "failed": [],
    }
    c = Comparison.of(runs)
    assert [v.name for v in c.variants] == ["slow", "fast", "middle"]  # no runs: left out
    (verdict,) = c.verdicts()
    assert (verdict.faster, verdict.slower, verdict.outcome) == ("fast", "middle", "faster")
    assert verdict.ratio == pytest.approx(1.2, rel=0.01)
    assert c.decided
    noisy = Comparison.of({"a": [0.10, 0.13, 0.09], "b": [0.11, 0.09, 0.12]})
    assert not noisy.decided and noisy.verdict() is not None
    assert Comparison.of({"alone": [0.1, 0.1]}).verdict() is None
    assert not Comparison.of({"alone": [0.1, 0.1]}).decided


def test_given_pairs_keep_their_order_for_ratios_and_skip_missing_sides() -> None:
    c = Comparison.of(
        {"new": [0.11, 0.111, 0.109], "base": [0.10, 0.101, 0.099]},
        "given",
        [("new", "base"), ("new", "gone")],
        confidence=0.99,
    )
    (r,) = c.ratios()
    assert r.value == pytest.approx(1.1, rel=0.01) and r.ci_low > 1.0
    (v,) = c.verdicts()
    assert (v.faster, v.slower) == ("base", "new")  # a verdict names the faster first
    wide = Comparison.of({"a": [0.10, 0.12], "b": [0.11, 0.11]}, "given", [("a", "b")])
    assert wide.verdict() is not None and wide.verdict().outcome == "inconclusive"  # type: ignore[union-attr]


def test_the_band_decides_equivalence() -> None:
    same = {"a": [0.1000, 0.1001, 0.0999, 0.1000], "b": [0.1002, 0.1001, 0.1003, 0.1002]}
    assert Comparison.of(same).verdict().outcome == "equivalent"  # type: ignore[union-attr]
    narrow = Comparison.of(same, band=0.0001)
    assert narrow.verdict().outcome != "equivalent"  # type: ignore[union-attr]


def test_the_estimator_is_named_and_checked() -> None:
    assert per_run([FakeRun(0.1), FakeRun(0.2)]) == (0.1, 0.2)
    with pytest.raises(ValueError, match="unknown estimator 'p50'; valid choices: median, p25"):
        per_run([FakeRun(0.1)], "p50")


def test_low_quantile_estimators_read_the_runs_blocks() -> None:
    blocks = (0.14, 0.10, 0.11, 0.30, 0.12, 0.13, 0.10, 0.16, 0.11)
    run = FakeRun(0.12, blocks)
    assert per_run([run], "median") == (0.12,)  # the run's own median, as recorded
    assert per_run([run], "min") == (0.10,)
    assert per_run([run], "p25") == pytest.approx((0.11,))
    assert per_run([run], "p10") == pytest.approx((0.10,))
    # A run recorded without its blocks has only its median to give.
    assert per_run([FakeRun(0.2)], "p25") == (0.2,)


def test_results_compared_read_the_estimator_they_were_measured_under() -> None:
    assert common_estimator(["p25", "p25"]) == "p25"
    assert common_estimator(["p25", "median"]) == "median"  # both sides read alike
    assert common_estimator([]) == "median"
