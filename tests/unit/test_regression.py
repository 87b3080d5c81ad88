from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np

from fwbench.launch.records import measurement_of
from fwbench.report.regression import Change, changes
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


def _generation(step: float, tpot: float, rid: str) -> Result:
    """A generation's result: five runs of about `step` s per generation, `tpot` s per
    token."""
    from fwbench.case import Case
    from fwbench.result import Measurement, RunFigure, StepTime

    from .test_parity_and_summary import START

    case = Case.build(framework="torch", model="gpt2_tiny", task="generate", batch_size=1)
    spread = [1 + 0.001 * i for i in range(5)]
    runs = tuple(
        run.model_copy(
            update={"figures": {"tpot_s": RunFigure(samples=(tpot * k,) * 3, median_s=tpot * k)}}
        )
        for run, k in zip(runs_of([step * k for k in spread]), spread, strict=True)
    )
    m = Measurement(
        step_time_s=StepTime(median=step, ci_low=step * 0.99, ci_high=step * 1.01),
        runs=runs,
        samples=tuple(s for r in runs for s in r.samples),
        **START,
        figures={"tpot_s": StepTime(median=tpot, ci_low=tpot * 0.99, ci_high=tpot * 1.01)},
    )
    return Result(result_id=rid, invocation_id="i", recorded_at=datetime(2026, 11, 29),
                  case=case, status="ok", measurement=m)  # fmt: skip


def test_a_generations_change_is_named_and_shown_by_the_figure_it_was_read_on() -> None:
    """A generation's change is read on its time per output token: so says its line, and
    its cells are that figure as the change read it (the recorded estimator), not the
    generation's step time nor the figure's medians."""
    from rich.console import Console

    from fwbench.measure.verdicts import Reading
    from fwbench.report.terminal import changes_table
    from fwbench.result import RunFigure

    def said(found: list[Change]) -> str:
        console = Console(width=300, record=True)
        console.print(changes_table(found, "t"))
        return console.export_text()

    (change,) = changes([_generation(0.1, 0.01, "a")], [_generation(0.1, 0.02, "b")])
    assert change.kind == "regression"
    assert change.describe().startswith("regression: time per output token +100.0%")
    assert "│ 10.02 ±0.2% │ 20.04 ±0.2% │" in said([change])
    # 5 of 9 decoding steps 30% slower: the p25 it is read on has not moved, the median
    # has. The cells are what the change read, not medians of 10.00 and 13.00.
    made = _generation(0.1, 0.01, "b")
    assert made.measurement is not None
    steps = (0.010,) * 4 + (0.013,) * 5
    slower = tuple(
        run.model_copy(update={"figures": {"tpot_s": RunFigure(samples=steps, median_s=0.013)}})
        for run in made.measurement.runs
    )
    p25 = {"reading": Reading(estimator="p25")}
    new = made.model_copy(update={"measurement": measurement_of(slower, "precision"), **p25})
    (change,) = changes([_generation(0.1, 0.01, "a").model_copy(update=p25)], [new])
    assert change.describe().endswith("the same within ±2%")
    text = said([change])
    assert "│ 10.02 ±0.2% │ 10.00 ±0.0% │" in text and "13.0" not in text
    assert "ms: each run's 25th-percentile block, its geometric mean over runs" in text


def test_what_a_framework_wrote_is_shown_as_text_not_read_as_markup() -> None:
    """An error, a warning or a case's label holding brackets (TensorFlow's device names,
    a shape "[b, t]") is printed as it is: rich would have raised on a closing tag, or
    dropped a bracketed word without a trace."""
    from rich.console import Console

    from fwbench.report.terminal import describe_result, results_table

    said = ("op failed on [/job:localhost/replica:0/task:0/device:CPU:0]; "
            "expected input of shape [b, t]")  # fmt: skip
    failed = _generation(0.1, 0.01, "a").model_copy(
        update={"status": "error", "error": said, "measurement": None, "warnings": [said]}
    )
    console = Console(width=400, record=True)
    console.print(describe_result(failed))
    console.print(results_table([failed], Path("r.duckdb")))
    shown = console.export_text()
    assert shown.count("[/job:localhost/replica:0/task:0/device:CPU:0]") == 3, shown
    assert shown.count("shape [b, t]") == 3, shown
    # A user's model named after its file, brackets and all, in every table's cells.
    from fwbench.report.terminal import summary_table

    ok = _generation(0.1, 0.01, "a")
    named = ok.case.model_copy(update={"model": "net[/b][red].onnx@ab12"})
    console.print(summary_table([ok.model_copy(update={"case": named})]))
    assert "net[/b][red].onnx@ab12" in console.export_text()


def test_a_changes_cells_show_what_the_change_read() -> None:
    """In each new run 5 of 8 blocks took 20% longer, the p25 block none: the change
    (read on each run's p25 block) is "the same", and so are the cells beside it; they
    showed the medians, 10.00 against 11.99."""
    import random
    import statistics

    from rich.console import Console

    from fwbench.case import Case
    from fwbench.launch.records import measurement_of
    from fwbench.measure.verdicts import Reading
    from fwbench.report.terminal import changes_table
    from fwbench.result import Run

    from .test_parity_and_summary import START

    rng = random.Random(1)

    def made(blocks: list[list[float]], rid: str, when: datetime) -> Result:
        runs = tuple(
            Run(index=i, median_s=statistics.median(s), ci_low_s=min(s), ci_high_s=max(s),
                samples=tuple(s), **START, launcher="fork-server")
            for i, s in enumerate(blocks)
        )  # fmt: skip
        case = Case.build(framework="torch", model="resnet18", mode="eager", threads=2)
        return Result(
            reading=Reading(), result_id=rid, invocation_id=rid, recorded_at=when, case=case,
            status="ok", measurement=measurement_of(runs, "max_runs"),
        )  # fmt: skip

    def noisy(t: float) -> float:
        return t * (1 + rng.uniform(-0.002, 0.002))

    base = made([[noisy(0.010) for _ in range(8)] for _ in range(5)], "b", datetime(2024, 1, 1))
    slow = [[noisy(0.010) for _ in range(3)] + [noisy(0.012) for _ in range(5)] for _ in range(5)]
    new = made(slow, "n", datetime(2024, 1, 2))
    (change,) = changes([base], [new])
    assert change.kind == "unchanged" and change.equivalent
    console = Console(width=300, record=True)
    console.print(changes_table([change], "compare"))
    shown = console.export_text()
    assert "11.99" not in shown and "10.01 ±0.1%" in shown, shown
    assert "each run's 25th-percentile block" in shown


def test_control_characters_in_a_record_are_shown_not_obeyed() -> None:
    """An imported record whose model name holds escape sequences (clear the screen, a
    hidden link) reached the terminal as they were: each is shown as U+FFFD."""
    from rich.console import Console

    from fwbench.report.terminal import describe_result, results_table, summary_table

    hostile = "resnet18\x1b[2J\x1b[H\x1b]8;;https://example.invalid/\x1b\\CLICK\r\x07"
    ok = _generation(0.1, 0.01, "a")
    named = ok.model_copy(update={"case": ok.case.model_copy(update={"model": hostile})})
    failed = named.model_copy(
        update={"status": "error", "error": hostile, "measurement": None, "warnings": [hostile]}
    )
    console = Console(width=400, record=True, force_terminal=False)
    console.print(summary_table([named]))
    console.print(describe_result(failed))
    console.print(results_table([failed], Path("r.duckdb")))
    shown = console.export_text()
    assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown
    assert "resnet18\ufffd[2J\ufffd[H\ufffd]8;;https://example.invalid/\ufffd\\CLICK" in shown
