"""One number per verdict: every table shows the figures its verdict reads; runs whose
blocks fall in two clusters are said; the equivalence band is the user's (--band).
Synthetic runs with realistic noise (process offsets, noise shared within a round,
interference that only adds time)."""

from __future__ import annotations

import math
import re
import statistics
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from fwbench.case import Case
from fwbench.measure import stats
from fwbench.measure.runs import RunPlan
from fwbench.measure.verdicts import Reading, comparison_of, per_run, runs_needed
from fwbench.result import Measurement, Result, Run, StepTime

from .test_parity_and_summary import START


def _run(index: int, samples: np.ndarray) -> Run:
    blocks = tuple(float(x) for x in samples)
    median = statistics.median(blocks)
    low, high = stats.median_ci(list(blocks))
    return Run(
        index=index,
        median_s=median,
        ci_low_s=min(low, median),
        ci_high_s=max(high, median),
        samples=blocks,
        launcher="fork-server",
        **START,
    )


def _result(
    framework: str,
    mode: str,
    runs: list[np.ndarray],
    reading: Reading,
    group: str | None = "g",
    plan: RunPlan | None = None,
) -> Result:
    found = tuple(_run(i, blocks) for i, blocks in enumerate(runs))
    medians = [r.median_s for r in found]
    interval = stats.log_t_interval(medians)
    assert interval is not None
    centre, low, high = interval
    m = Measurement(
        step_time_s=StepTime(median=centre, ci_low=min(low, centre), ci_high=max(high, centre)),
        samples=tuple(s for r in found for s in r.samples),
        runs=found,
        group_id=group,
        **START,
    )
    return Result(
        result_id=f"{framework}{mode}",
        invocation_id="r",
        recorded_at=datetime.now(),
        case=Case.build(framework=framework, model="resnet18", mode=mode, threads=2),
        status="ok",
        measurement=m,
        reading=reading,
        run_plan=plan or RunPlan(min_runs=len(runs), max_runs=len(runs), stop_on="runs"),
    )


def _blocks(rng: np.random.Generator, centre: float, n: int, noise: float = 0.02) -> np.ndarray:
    """A run's blocks: lognormal noise, and interference that only adds time."""
    return centre * np.exp(rng.normal(0, noise, n)) * (1 + rng.exponential(noise / 2, n))


def _two_speeds(rng: np.random.Generator, fast: int, slow: int) -> np.ndarray:
    """A run whose step runs at one of two speeds (5.7 and 9.6 ms, the issue's PyTorch
    case), its blocks interleaved."""
    blocks = np.concatenate([_blocks(rng, 5.7e-3, fast), _blocks(rng, 9.6e-3, slow)])
    return rng.permutation(blocks)


def _bimodal_pair(reading: Reading) -> list[Result]:
    """PyTorch's runs in two clusters, mostly slow: its p25 reads the fast cluster, its
    median the slow one; TensorFlow's between them. By the medians TensorFlow is faster,
    by the p25s PyTorch is."""
    rng = np.random.default_rng(7)
    torch_runs = [_two_speeds(rng, 3, 5) for _ in range(3)]
    tf_runs = [_blocks(rng, 7.4e-3, 8) for _ in range(3)]
    return [
        _result("torch", "eager", torch_runs, reading),
        _result("tensorflow", "graph", tf_runs, reading),
    ]


def _terminal(results: list[Result], band: float | None = None) -> str:
    from fwbench.report.terminal import summary_table

    console = Console(width=250, record=True)
    console.print(summary_table(results, band=band))
    return console.export_text()


def _row_of(text: str, word: str) -> str:
    return next(line for line in text.splitlines() if word in line and "x1." in line)


def test_a_verdicts_table_row_shows_the_verdicts_own_figures() -> None:
    results = _bimodal_pair(Reading(estimator="p25"))
    torch, tf = results
    verdict = comparison_of({"torch/eager": torch, "tensorflow/graph": tf}).verdict()
    assert verdict is not None and verdict.faster == "torch/eager"
    # What the verdict reads: the geometric mean over runs of each run's p25.
    torch_p25 = statistics.geometric_mean(per_run(torch.measurement.runs, "p25"))  # type: ignore[union-attr]
    tf_p25 = statistics.geometric_mean(per_run(tf.measurement.runs, "p25"))  # type: ignore[union-attr]
    assert tf_p25 / torch_p25 == pytest.approx(verdict.ratio)
    # By the medians the table used to show, the order is the other way round.
    assert tf.measurement.step_time_s.median < torch.measurement.step_time_s.median  # type: ignore[union-attr]

    text = _terminal(results)
    row = _row_of(text, "resnet18")
    assert f"{torch_p25 * 1e3:.2f} ±" in row and "x1.00" in row
    assert f"{tf_p25 * 1e3:.2f} ±" in row and f"x{verdict.ratio:.2f}" in row
    assert f"torch/eager {verdict.ratio:.2f}x faster" in row
    assert "p25 ms ±95%CI x" in text  # the header names the value
    assert "step_time_s.median" in text  # ... and says where the median is
    # The Markdown and HTML rows are the same cells.
    from fwbench.report import html, markdown

    page, md = html.render(results), markdown.render(results)
    for cell in (f"{torch_p25 * 1e3:.2f} ms (", f"x{verdict.ratio:.2f}", f"{verdict.ratio:.2f}x"):
        assert cell in page and cell in md
    # The median stays in the record, named.
    assert torch.to_record()["step_time_s"]["median"] == torch.measurement.step_time_s.median  # type: ignore[union-attr]


def test_a_table_of_median_readings_is_unchanged() -> None:
    """Results read by their medians (everything recorded before the estimator) show
    what tables always showed: each case's step time and its interval over runs."""
    from fwbench.report.summary import summarise

    results = _bimodal_pair(Reading(estimator="median"))
    _, (row,) = summarise(results)
    for variant, r in row.ok.items():
        found = row.shown(variant)
        st = r.measurement.step_time_s  # type: ignore[union-attr]
        assert found is not None and found.interval is not None
        assert found.value == pytest.approx(st.median)
        assert found.interval == pytest.approx((st.ci_low, st.ci_high))


def test_a_run_in_two_clusters_is_found_and_said_with_what_it_does_to_the_figure() -> None:
    rng = np.random.default_rng(3)
    found = stats.two_clusters(_two_speeds(rng, 3, 5))
    assert found is not None and (found.n_low, found.n_high) == (3, 5)
    assert found.low == pytest.approx(5.7e-3, rel=0.06) and found.ratio > 1.5
    assert stats.two_clusters(_two_speeds(rng, 2, 3)) is None  # too few blocks to say

    text = _terminal(_bimodal_pair(Reading(estimator="p25")))
    note = " ".join(text.split())
    assert "Two clusters of blocks in 3 run(s): torch/eager resnet18" in note
    assert "its p25 reads the faster, its median the slower" in note
    assert "they differ by the clusters' ratio" in note


def test_one_cluster_is_not_taken_for_two() -> None:
    """Noisy, skewed blocks (interference adds time; 3% to 10% noise) of one speed: said
    bimodal in under 3% of runs."""
    rng = np.random.default_rng(11)
    for noise in (0.03, 0.10):
        said = sum(
            stats.two_clusters(_blocks(rng, 8e-3, n, noise)) is not None
            for n in (7, 9, 20)
            for _ in range(300)
        )
        assert said < 0.03 * 900, (noise, said)


def _three_percent_apart(seed: int, runs: int = 10) -> list[Result]:
    """TensorFlow 3% slower than PyTorch, in rounds on a quiet machine: each process
    0.8% off on its own, and what slowed the machine in a round (2%) slowed both (their
    blocks alternated)."""
    rng = np.random.default_rng(seed)
    torch_runs, tf_runs = [], []
    for _ in range(runs):
        shared = math.exp(rng.normal(0, 0.02))
        torch_runs.append(_blocks(rng, 10e-3 * shared * math.exp(rng.normal(0, 0.008)), 8, 0.01))
        tf_runs.append(_blocks(rng, 10.3e-3 * shared * math.exp(rng.normal(0, 0.008)), 8, 0.01))
    reading = Reading(estimator="p25")
    return [
        _result("torch", "eager", torch_runs, reading),
        _result("tensorflow", "graph", tf_runs, reading),
    ]


def test_a_3_percent_difference_is_the_same_within_5_percent_and_not_within_2() -> None:
    same = 0
    for seed in range(20):
        results = _three_percent_apart(seed)
        sides = {r.case.variant: r for r in results}
        wide = comparison_of(sides, band=0.05).verdict()
        narrow = comparison_of(sides).verdict()  # the 2% they were recorded with
        assert wide is not None and narrow is not None
        # Never a finding at +-5%; never the same at +-2%.
        assert wide.outcome != "faster" and narrow.outcome in ("inconclusive", "faster"), seed
        assert narrow.band == 0.02 and narrow.ratio == wide.ratio
        if wide.outcome == "equivalent":
            assert wide.text().startswith("equivalent within ±5% (torch/eager 1.0")
            same += 1
    # Ten rounds a side on a quiet machine decide it, nearly always.
    assert same >= 17
    # Recorded with the results (--band on run and sweep), it is what every view reads.
    results = _three_percent_apart(0)
    five = [r.model_copy(update={"reading": Reading(estimator="p25", band=0.05)}) for r in results]
    assert "same within ±5%" in _terminal(five)
    assert "Equivalence band: ±5% (--band" in " ".join(_terminal(five).split())
    assert "same within" not in _terminal(results)


def test_the_inconclusive_estimate_of_runs_reads_the_band() -> None:
    results = _three_percent_apart(2, runs=3)
    sides = {r.case.variant: r for r in results}
    for band in (0.02, 0.025):
        compared = comparison_of(sides, band=band)
        verdict = compared.verdict()
        assert verdict is not None and verdict.outcome == "inconclusive"
        fast, slow = (compared.variant(v) for v in (verdict.faster, verdict.slower))
        assert fast is not None and slow is not None
        expected = runs_needed(fast.values, slow.values, band, compared.level, paired=True)
        assert verdict.runs_needed == expected
        assert f"about {expected} runs a side" in verdict.text()
    wider = comparison_of(sides, band=0.025).verdict()
    narrower = comparison_of(sides, band=0.02).verdict()
    assert wider is not None and narrower is not None
    assert wider.runs_needed != narrower.runs_needed


def test_band_is_a_share_or_a_percentage_given_once(tmp_path: Path) -> None:
    from fwbench import sweep
    from fwbench.cli.common import band_flag, timing_flags
    from fwbench.errors import SpecError
    from fwbench.measure.settings import TimingConfig

    assert band_flag("5%") == band_flag("0.05") == pytest.approx(0.05)
    assert band_flag(None) is None
    with pytest.raises(SpecError, match=r"^--band: 5 would be 500%; write 5% or 0.05"):
        band_flag("5")
    with pytest.raises(SpecError, match=r"^--band: "):
        band_flag("-1%")
    # Issue 52, item 10: infinite and vanishing bands were taken, or named as "inf%".
    for given, says in (
        ("inf", "inf is not a finite share; valid: 0.1% to 99.9%"),
        ("1e309", "inf is not a finite share"),
        ("1e-300", "1e-300 is below 0.1%; valid: 0.1% to 99.9%"),
    ):
        with pytest.raises(SpecError, match=f"^--band: {re.escape(says)}"):
            band_flag(given)
    assert timing_flags(TimingConfig(), band="2.5%").reading.band == pytest.approx(0.025)
    found = sweep.parse("model: resnet18\nband: 5%\n")
    assert found.timing.reading.band == pytest.approx(0.05)
    with pytest.raises(SpecError, match="band: given twice"):
        sweep.parse("model: resnet18\nband: 5%\ntiming: {band: 0.05}\n")
    with pytest.raises(SpecError, match=r"^sweep: band: "):
        sweep.parse("model: resnet18\nband: 50\n")


def test_report_and_compare_read_the_band_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from fwbench.store.db import ResultStore

    from .test_robustness import cli

    base, new = tmp_path / "base.duckdb", tmp_path / "new.duckdb"
    for path, seed in ((base, 0), (new, 1)):
        with ResultStore(path) as store:
            for r in _three_percent_apart(seed):
                store.add(r)
    report = tmp_path / "r.md"
    code, _, err = cli(["report", str(base), "-o", str(report), "--band", "5%"], capsys)
    assert code == 0, err
    text = report.read_text()
    assert "equivalent within ±5%" in text and "Equivalence band: ±5% (--band" in text
    code, _, err = cli(["report", str(base), "-o", str(report)], capsys)
    assert code == 0 and "within ±5%" not in report.read_text()
    code, out, err = cli(["compare", str(base), str(new), "--band", "5%", "--json"], capsys)
    assert code == 0, err
    found = json.loads(out)
    assert {c["equivalence_band"] for c in found} == {0.05}
    assert all(c["kind"] == "unchanged" for c in found)
    code, _, err = cli(["compare", str(base), str(new), "--band", "5"], capsys)
    assert code == 2 and err.startswith("error: --band: 5 would be 500%")
