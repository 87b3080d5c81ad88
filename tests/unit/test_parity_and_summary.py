from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from fwbench.case import Case
from fwbench.launch.records import measurement_of
from fwbench.measure.runs import RunPlan
from fwbench.models.parity import check as check_parity
from fwbench.report.summary import summarise, verdict_notes
from fwbench.result import Result, Run, settings_of_old


def test_parity_flags_more_than_two_percent() -> None:
    assert not check_parity({"torch": 100, "tensorflow": 102}).mismatch
    p = check_parity({"torch": 138_357_544, "tensorflow": 43_985_704})
    assert p.mismatch and p.max_rel_diff is not None and p.max_rel_diff > 2
    assert check_parity({"torch": 5}).max_rel_diff is None


def test_a_framework_is_counted_only_for_models_another_frameworks_case_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A case's worker counts its own model: counting it again in a count worker made a
    single-framework run build every model once more (31 s for five models on Keras-JAX)."""
    from fwbench.launch import counting

    def case(framework: str, model: str) -> Case:
        return Case.build(framework=framework, model=model, input_size=32)

    monkeypatch.setattr(counting, "parity_frameworks", lambda cases: ["tensorflow", "torch"])
    both = [case("torch", "resnet18"), case("tensorflow", "resnet18")]
    key = counting.parity_key(both[0])
    assert counting.parity_requests(both, both) == {"tensorflow": [key], "torch": [key]}
    alone = [case("torch", "resnet18"), case("torch", "vgg16")]
    assert counting.parity_requests(alone, alone) == {
        "tensorflow": sorted(counting.parity_key(c) for c in alone)
    }
    # Resumed: the counts are those of the cases still to run, against every framework.
    assert counting.parity_requests(both, both[1:]) == {"torch": [key]}
    # Nothing to compare against: no count worker at all.
    monkeypatch.setattr(counting, "parity_frameworks", lambda cases: ["torch"])
    assert counting.parity_requests(alone, alone) == {}


# The Blocks fields other than samples, as a run or a case's measurement records them.
START: dict[str, Any] = {
    "steps_per_block": 1,
    "build_s": 0.1,
    "first_step_s": 0.2,
    "warmup_steps": 3,
    "warmup_s": 0.3,
    "warmup_stop": "stable",
    "stop_reason": "precision",
    "sync_overhead_s": 0.0,
}


def runs_of(medians: list[float]) -> tuple[Run, ...]:
    """Runs with these medians, each of a few blocks around it."""
    return tuple(
        Run(
            index=i,
            median_s=m,
            ci_low_s=m * 0.99,
            ci_high_s=m * 1.01,
            samples=(m * 0.99, m, m * 1.01),
            **START,
            launcher="fork-server",
        )
        for i, m in enumerate(medians)
    )


def result(
    framework: str,
    mode: str,
    median: float,
    half: float,
    status: str = "ok",
    precision: str | None = None,
    task: str = "train",
) -> Result:
    """A result of three runs spread by +-half/2 around `median`."""
    case = Case.build(
        framework=framework, model="resnet18", mode=mode, threads=2, precision=precision, task=task
    )
    # Its estimate and samples are its runs' own, as a record an import accepts has them.
    m = None
    if status == "ok":
        m = measurement_of(runs_of([median - half / 2, median, median + half / 2]), "max_runs")
    return Result(
        result_id=f"{framework}{mode}{precision}",
        invocation_id="r",
        recorded_at=datetime.now(),
        case=case,
        status=status,  # type: ignore[arg-type]
        error=None if status == "ok" else "boom",
        measurement=m,
    )


def test_summary_relative_times_and_verdicts() -> None:
    variants, rows = summarise(
        [result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.13, 0.001)]
    )
    assert variants == ["torch/eager", "tensorflow/graph"]
    (row,) = rows
    assert row.best == "torch/eager"
    verdict = row.comparison()
    assert verdict is not None and row.relative("tensorflow/graph") == verdict.ratio
    assert verdict.ratio == pytest.approx(1.3, rel=1e-4)
    assert row.verdict().startswith("torch/eager 1.30x faster (1.")
    # PyTorch's default runs op by op, TensorFlow's a tf.function: the verdict says so,
    # and the table's notes say once what that means.
    assert row.verdict().endswith("[eager vs compiled]")
    assert row.verdict(short=True).endswith("faster [eager vs compiled]")
    (note,) = verdict_notes([row])
    assert note.startswith(
        "[eager vs compiled]: torch/eager (op by op) against tensorflow/graph (compiled)."
    )
    _, (alike,) = summarise(
        [result("torch", "eager", 0.10, 0.001), result("tensorflow", "eager", 0.13, 0.001)]
    )
    assert "eager vs compiled" not in alike.verdict() and verdict_notes([alike]) == []


def test_a_verdict_against_other_numerics_says_so_and_outputs_that_differ_are_different_work() -> (
    None
):
    """A runtime's int8 mode against an fp32 framework: marked like eager against
    compiled, explained once; outputs beyond the recorded tolerance: different work."""
    int8 = result("litert", "int8", 0.05, 0.0005, task="infer")
    graph = result("tensorflow", "graph", 0.10, 0.001, task="infer")
    _, (row,) = summarise([int8, graph])
    assert row.verdict(short=True).endswith("faster [dynamic-range int8 vs fp32]")
    (note,) = verdict_notes([row])
    assert note.startswith(
        "[dynamic-range int8 vs fp32]: litert/int8 computes in dynamic-range int8, "
        "tensorflow/graph in fp32. Other arithmetic"
    )
    assert not int8.different_work
    differs = int8.model_copy(
        update={
            "settings": {
                "output_check": "differs",
                "output_max_rel_error": 0.31,
                "output_tolerance": 0.1,
            }
        }
    )
    assert differs.different_work_reason == (
        "the runtime's outputs differ from its source framework's: max error 0.31 of the "
        "largest output, tolerance 0.1"
    )
    _, (marked,) = summarise([differs, graph])
    assert marked.verdict(short=True).endswith("[dynamic-range int8 vs fp32] [DIFFERENT WORK]")


def test_runs_too_spread_to_tell_are_inconclusive() -> None:
    _, (row,) = summarise(
        [result("torch", "eager", 0.100, 0.01), result("tensorflow", "graph", 0.1001, 0.01)]
    )
    assert row.verdict().startswith("inconclusive (")
    assert row.verdict(short=True).startswith("inconclusive (1.00x")


def test_results_recorded_before_runs_are_one_run_and_never_a_finding() -> None:
    old = [result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.13, 0.001)]
    old = [r.model_copy(update={"measurement": r.measurement.model_copy(update={"runs": ()})})
           for r in old if r.measurement]  # fmt: skip
    _, (row,) = summarise(old)
    assert row.verdict().startswith("inconclusive (torch/eager 1.30x, no interval: one run each")


def test_failed_variant_is_reported_as_such() -> None:
    _, (row,) = summarise(
        [result("torch", "eager", 0.1, 0.001), result("tensorflow", "graph", 0, 0, "oom")]
    )
    assert row.relative("tensorflow/graph") is None
    assert row.verdict() == "tensorflow/graph oom"


def test_inconclusive_verdicts_come_with_what_to_do() -> None:
    from fwbench.report.summary import inconclusive_advice

    _, clear = summarise(
        [result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.13, 0.001)]
    )
    assert inconclusive_advice(clear) is None
    _, unsure = summarise(
        [result("torch", "eager", 0.100, 0.01), result("tensorflow", "graph", 0.1001, 0.01)]
    )
    advice = inconclusive_advice(unsure)
    assert advice is not None and advice.startswith("1 of 1 verdicts are inconclusive")
    assert "as few as 3 runs a side" in advice and "--require-idle" in advice


def test_a_wide_interval_shows_its_ends_not_a_percentage_past_100() -> None:
    from fwbench.report.summary import Shown, cell

    r = result("torch", "eager", 0.010, 0.0001)
    assert cell(r, Shown(0.010, (0.0099, 0.0101), 3), None, short=True) == "10.00 ±1.0%"
    assert cell(r, Shown(0.010, (0.004, 0.060), 3), 1.5, short=True) == "10.00 (4-60) x1.50"
    # One run read by another value than its median: no interval to show.
    assert cell(r, Shown(0.010, None, 1), None, short=True) == "10.00 (1 run)"


def test_rows_that_differ_only_in_precision_say_which_is_which() -> None:
    from fwbench.report.summary import workload_cells, workload_head
    from fwbench.report.terminal import summary_table

    both = [
        result("torch", "eager", 0.10, 0.001),
        result("torch", "eager", 0.05, 0.001, precision="bf16"),
    ]
    _, rows = summarise(both)
    head = workload_head(rows)
    assert head == ["model", "task", "batch", "shape", "precision"]
    assert [workload_cells(row, head)[-1] for row in rows] == ["fp32", "bf16"]
    assert "precision" in [column.header for column in summary_table(both).columns]
    # A column that would say the same on every row is left out.
    _, one = summarise(both[:1])
    assert workload_head(one) == ["model", "task", "batch", "shape"]
    assert workload_head(one, always=("device",))[-1] == "device"


def test_the_terminal_table_shows_bracketed_marks_as_text() -> None:
    """Rich would read "[eager vs compiled]" as markup and drop it."""
    from rich.console import Console

    from fwbench.report.terminal import summary_table

    console = Console(record=True, width=250)
    rows = [result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.13, 0.001)]
    console.print(summary_table(rows))
    text = console.export_text()
    assert "faster [eager vs compiled]" in text
    assert "[eager vs compiled]: torch/eager (op by op)" in text


def test_verdicts_of_runs_that_stopped_once_decided_are_read_under_their_plan() -> None:
    """Runs made under stop_on: verdict (3 to 10 a side) are read at the plan's level,
    wider than 95%; results from before (no stop_on) read a fixed 95% interval."""
    plain = [result("torch", "eager", 0.100, 0.004), result("tensorflow", "graph", 0.107, 0.004)]
    plan = RunPlan(stop_on="verdict", min_runs=3, max_runs=10)
    planned = [r.model_copy(update={"run_plan": plan}) for r in plain]
    _, (fixed,) = summarise(plain)
    _, (sequential,) = summarise(planned)
    a, b = fixed.comparison(), sequential.comparison()
    assert a is not None and b is not None and a.ratio == b.ratio
    assert b.ci_low < a.ci_low and b.ci_high > a.ci_high  # 99.0% against 95%
    (note,) = [n for n in verdict_notes([sequential]) if n.startswith("Verdicts of")]
    assert "read after each of runs 3-10 a side, 99% intervals keep 95%" in note
    assert not [n for n in verdict_notes([fixed]) if n.startswith("Verdicts of")]


def test_a_table_says_which_per_run_value_its_verdicts_read_and_when_a_budget_ended_them() -> None:
    def with_timing(r: Result, stop: str = "verdict", **timing: Any) -> Result:
        assert r.measurement is not None
        m = r.measurement.model_copy(update={"stop_reason": stop})
        old = settings_of_old(timing)  # each setting not given as results before it read
        update = {"run_plan": old.plan, "reading": old.reading, "measurement": m}
        return r.model_copy(update=update)

    fast, slow = result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.13, 0.001)
    _, (row,) = summarise([with_timing(fast), with_timing(slow)])
    assert not any("x and verdicts read" in n for n in verdict_notes([row]))
    _, (low,) = summarise(
        [with_timing(fast, estimator="p25"), with_timing(slow, "time_share", estimator="p25")]
    )
    assert row.comparison() != low.comparison()  # the 25th percentile of each run's blocks
    notes = verdict_notes([low])
    assert any(n.startswith("Times, x and verdicts read each run's 25th-percentile") for n in notes)
    assert any(n.startswith("--budget: 1 of the comparisons stopped") for n in notes)
    # Sides measured under different estimators are both read by their medians.
    _, (mixed,) = summarise([with_timing(fast, estimator="p25"), with_timing(slow)])
    assert mixed.comparison() == row.comparison()


def test_a_table_says_which_comparisons_hold_runs_of_a_command_that_ended() -> None:
    fast, slow = result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.13, 0.001)
    assert slow.measurement is not None
    cut = slow.model_copy(
        update={"measurement": slow.measurement.model_copy(update={"stop_reason": "unfinished"})}
    )
    _, (whole,) = summarise([fast, slow])
    _, (row,) = summarise([fast, cut])
    assert not any(n.startswith("unfinished:") for n in verdict_notes([whole]))
    (note,) = [n for n in verdict_notes([row]) if n.startswith("unfinished:")]
    assert note.startswith("unfinished: 1 of the comparisons") and "--resume" in note


def test_frameworks_that_train_different_numbers_of_parameters_did_different_work() -> None:
    from fwbench.launch.records import trained_check

    assert trained_check({"torch": 3_328}) is None
    assert trained_check({"torch": 3_328, "keras-jax": 3_328}) == (
        "passed: each trains 3,328 parameters"
    )
    # PEFT's factorisation against keras-hub's: another model.
    assert trained_check({"torch": 1_792, "keras-jax": 3_328}) == (
        "failed: they train different numbers of parameters (keras-jax 3,328, torch 1,792)"
    )
