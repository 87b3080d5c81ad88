"""Comparisons: the pairs a comparison decides, their verdicts and ratios, and the
estimator that turns a run into one value (pure; synthetic per-run values)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pytest

from fwbench.case import Case
from fwbench.measure.verdicts import Comparison, common_estimator, comparison_of, per_run
from fwbench.result import Measurement, Result, StepTime


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


def _grouped(framework: str, medians: list[float], group_id: str | None) -> Result:
    from tests.unit.test_parity_and_summary import START, runs_of

    case = Case.build(framework=framework, model="resnet18", threads=2)
    m = Measurement(
        runs=runs_of(medians),
        step_time_s=StepTime(median=medians[0], ci_low=min(medians), ci_high=max(medians)),
        samples=tuple(medians),
        group_id=group_id,
        **START,
    )
    return Result(
        result_id=framework, invocation_id="r", recorded_at=datetime.now(), case=case,
        status="ok", measurement=m,
    )  # fmt: skip


def test_results_of_one_group_pair_their_runs_by_round() -> None:
    # The machine's state in each round slowed both sides alike; within a round, torch is
    # 1.06x slower, give or take 0.5%.
    rounds = [1.00, 1.18, 0.91, 1.07]
    torch = [0.106 * f * (1 + e) for f, e in zip(rounds, (0.004, -0.003, 0.0, 0.002), strict=True)]
    tf = [0.100 * f for f in rounds]
    together = comparison_of(
        {"torch": _grouped("torch", torch, "g1"), "tf": _grouped("tensorflow", tf, "g1")}
    )
    assert together.paired
    verdict = together.verdict()
    assert verdict is not None and (verdict.faster, verdict.outcome) == ("tf", "faster")
    assert verdict.ratio == pytest.approx(1.06, rel=0.005) and verdict.ci_low > 1.04
    # Measured apart (another group, or before groups were recorded): the rounds' spread
    # is the runs' spread, and nothing is decided.
    for other in ("g2", None):
        apart = comparison_of(
            {"torch": _grouped("torch", torch, "g1"), "tf": _grouped("tensorflow", tf, other)}
        )
        assert not apart.paired
        assert apart.verdict().outcome == "inconclusive"  # type: ignore[union-attr]
    # A side whose fourth run failed: the rounds both ran are paired.
    short = comparison_of(
        {"torch": _grouped("torch", torch[:3], "g1"), "tf": _grouped("tensorflow", tf, "g1")}
    )
    assert short.verdict().runs == (3, 3)  # type: ignore[union-attr]


def test_a_run_without_a_partner_in_its_round_is_left_out_of_its_sides_time_too() -> None:
    """TensorFlow's fourth run failed; torch's fourth was slow (the machine busy). The
    verdict read the three rounds both ran, torch faster; the table's times, ranking and
    chart read all four, torch the slower-looking, the bar outside its own interval."""
    from fwbench.report import figures
    from fwbench.report.summary import summarise

    torch = _grouped("torch", [0.100, 0.102, 0.101, 0.140], "g1")
    tf = _grouped("tensorflow", [0.104, 0.106, 0.105], "g1")
    _, (row,) = summarise([torch, tf])
    verdict = row.comparison()
    assert verdict is not None and verdict.faster == "torch/eager" and verdict.runs == (3, 3)
    mine, theirs = row.shown("torch/eager"), row.shown("tensorflow/graph")
    assert mine is not None and theirs is not None
    assert mine.value < theirs.value and mine.runs == 3
    assert row.best == "torch/eager"
    (panel,) = figures.relative_time([torch, tf], "train", "cpu")
    for points in panel.series.values():
        (point,) = points
        assert point.ci is not None and point.ci[0] <= point.value <= point.ci[1]


def test_a_pair_is_paired_when_its_two_sides_were_measured_together() -> None:
    rounds = [1.00, 1.18, 0.91, 1.07]
    torch = [0.106 * f * (1 + e) for f, e in zip(rounds, (0.004, -0.003, 0.0, 0.002), strict=True)]
    tf = [0.100 * f for f in rounds]
    # A third variant measured elsewhere (a resumed case) does not unpair the two that
    # were measured together; its own pairs read unpaired.
    three = {
        "torch": _grouped("torch", torch, "g1"),
        "tf": _grouped("tensorflow", tf, "g1"),
        "slow": _grouped("torch", [0.2, 0.3, 0.25], "g2"),
    }
    found = comparison_of(three)
    assert found.paired and found.verdict().outcome == "faster"  # type: ignore[union-attr]
    (apart,) = comparison_of(three, "given", [("slow", "tf")]).verdicts()
    assert apart.runs == (4, 3)  # unpaired: every run of each side
    # Fewer than two rounds in common: read unpaired (one run borrows the other's spread).
    short = comparison_of(
        {"torch": _grouped("torch", torch[:1], "g1"), "tf": _grouped("tensorflow", tf, "g1")}
    )
    assert not short.paired and short.verdict().runs == (4, 1)  # type: ignore[union-attr]
    # Values without rounds, or without a group, read unpaired.
    plain = Comparison.of({"a": [0.1, 0.2], "b": [0.1, 0.2]}, rounds={"a": [0, 1]})
    assert not plain.paired
    assert not Comparison.of(
        {"a": [0.1, 0.2], "b": [0.1, 0.2]},
        rounds={"a": [0, 1], "b": [0, 1]},
        groups={"a": None, "b": None},
    ).paired
