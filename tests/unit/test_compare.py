"""Verdicts on synthetic step times with the noise real machines have: a per-process
offset (each worker has its own memory layout, allocator and thread placement), and
autocorrelated blocks inside a process. The claims are A/A claims: identical workloads
must be called different at most 5% of the time."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from fwbench.measure import stats
from fwbench.measure.runs import RunFigures, estimate
from fwbench.measure.verdicts import RUNS_NEEDED_CAP, compare, outcome_of, ratio


def run_blocks(
    rng: np.random.Generator,
    median: float,
    process_sd: float = 0.03,
    block_sd: float = 0.05,
    rho: float = 0.7,
    blocks: int = 40,
) -> list[float]:
    """One worker process: its own offset, then AR(1) block noise around it (log scale)."""
    offset = rng.normal(0.0, process_sd)
    noise = np.empty(blocks)
    noise[0] = rng.normal(0.0, block_sd)
    for i in range(1, blocks):
        noise[i] = rho * noise[i - 1] + rng.normal(0.0, block_sd * np.sqrt(1 - rho**2))
    return list(median * np.exp(offset + noise))


def run_medians(rng: np.random.Generator, median: float, runs: int, **noise: float) -> list[float]:
    return [stats.median(run_blocks(rng, median, **noise)) for _ in range(runs)]


@pytest.mark.slow
def test_a_3_percent_process_effect_does_not_make_identical_workloads_faster() -> None:
    seeds, called = 1000, 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        a, b = run_medians(rng, 0.1, 3), run_medians(rng, 0.1, 3)
        called += compare(a, b).outcome == "faster"
    assert called / seeds <= 0.05


def test_pooling_blocks_of_one_process_would_call_them_different() -> None:
    """What fwbench did before runs, on the same synthetic machine: one process per side,
    its blocks as independent samples. This is why the statistics moved to runs."""
    seeds, called = 300, 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        a, b = run_blocks(rng, 0.1), run_blocks(rng, 0.1)
        called += sps.mannwhitneyu(a, b).pvalue < 0.05
    assert called / seeds > 0.30


def test_a_real_20_percent_difference_is_found_with_three_runs() -> None:
    found = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        v = compare(run_medians(rng, 0.12, 3), run_medians(rng, 0.10, 3), "slow", "fast")
        found += v.outcome == "faster" and v.faster == "fast"
    assert found / 200 >= 0.8
    rng = np.random.default_rng(7)
    v = compare(run_medians(rng, 0.12, 5), run_medians(rng, 0.10, 5), "slow", "fast")
    assert v.ci_low <= 1.2 <= v.ci_high
    assert v.text().startswith("fast 1.")


def test_equivalence_is_an_answer_and_a_significant_1_01x_is_not_a_finding() -> None:
    rng = np.random.default_rng(3)
    quiet = {"process_sd": 0.002, "block_sd": 0.005}
    v = compare(run_medians(rng, 0.1, 8, **quiet), run_medians(rng, 0.1, 8, **quiet))
    assert v.outcome == "equivalent"
    assert v.text().startswith("equivalent within ±2%")
    # 1% apart, measured very precisely: the interval excludes 1 but not the band.
    v = compare(run_medians(rng, 0.101, 20, **quiet), run_medians(rng, 0.1, 20, **quiet))
    assert v.ci_low > 1.0
    assert v.outcome != "faster"


def test_the_three_outcomes_of_an_interval() -> None:
    assert outcome_of(1.05, 1.10, 0.02) == "faster"
    assert outcome_of(0.90, 0.95, 0.02) == "faster"  # the other way round
    assert outcome_of(0.99, 1.015, 0.02) == "equivalent"
    assert outcome_of(1.01, 1.05, 0.02) == "inconclusive"


def test_one_run_each_has_no_interval_and_is_inconclusive() -> None:
    v = compare([0.10], [0.12], "a", "b")
    assert v.outcome == "inconclusive"
    assert "no interval: one run each" in v.text()
    # One run on one side borrows the other side's spread.
    r = ratio([0.10], [0.12, 0.121, 0.119])
    assert r.has_interval and r.ci_low < 0.10 / 0.12 < r.ci_high


def test_the_case_interval_over_runs_covers_the_truth_at_the_nominal_rate() -> None:
    hits, trials = 0, 1000
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        # The true case time: the median of the process-offset distribution, 0.1.
        figures = [RunFigures(m, m, m, 1.0) for m in run_medians(rng, 0.1, 3)]
        est = estimate(figures)
        hits += est.ci_low_s <= 0.1 <= est.ci_high_s
    assert 0.92 <= hits / trials <= 0.98


def test_the_interval_is_reproducible_and_needs_runs() -> None:
    a, b = [1.0, 1.1, 1.2, 1.05], [2.0, 2.1, 2.2, 2.05]
    assert compare(a, b) == compare(a, b)
    with pytest.raises(ValueError):
        compare([], [2.0, 3.0])


def test_an_inconclusive_verdict_says_what_it_rules_out_and_what_would_decide_it() -> None:
    v = compare([0.10, 0.11, 0.095], [0.105, 0.12, 0.10], "torch", "tf")
    assert v.outcome == "inconclusive"
    assert v.rules_out() == pytest.approx(max(v.ci_high, 1 / v.ci_low))
    assert f"neither is more than {v.rules_out():.2f}x faster" in v.text()
    assert v.runs_needed is not None and 3 < v.runs_needed < RUNS_NEEDED_CAP
    assert (
        f"were it {v.ratio:.2f}x, about {v.runs_needed} runs a side would likely decide it"
        in v.text()
    )
    # At the band's edge no number of runs is likely to decide it.
    edge = compare([0.100, 0.101, 0.099], [0.102, 0.1025, 0.1015])
    assert edge.runs_needed == RUNS_NEEDED_CAP and "x, over 100 runs a side" in edge.text()
    decided = compare([0.10, 0.101, 0.099], [0.13, 0.131, 0.129])
    assert decided.runs_needed is None and "would" not in decided.text()
    assert compare([0.1], [0.2]).runs_needed is None  # one run a side: no spread


def test_the_runs_estimated_to_decide_do_decide_most_of_the_time() -> None:
    """An inconclusive start of 3 runs a side, continued with fresh runs from the same
    process (1.10x, 6% per run) to the estimated count: decided at least 60% of the
    time (the estimate aims at 80%, from a spread and a ratio that 3 runs estimate
    roughly)."""
    rng = np.random.default_rng(1)
    tried = decided = 0
    for _ in range(400):
        a = list(0.10 * np.exp(rng.normal(0, 0.06, 3)))
        b = list(0.11 * np.exp(rng.normal(0, 0.06, 3)))
        v = compare(a, b)
        if v.outcome != "inconclusive" or v.runs_needed is None or v.runs_needed >= 30:
            continue
        more = v.runs_needed - 3
        a += list(0.10 * np.exp(rng.normal(0, 0.06, more)))
        b += list(0.11 * np.exp(rng.normal(0, 0.06, more)))
        tried += 1
        decided += compare(a, b).outcome != "inconclusive"
    assert tried >= 50 and decided / tried >= 0.6, (tried, decided)
