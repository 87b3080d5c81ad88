"""The answer first (issue 54, items 2 and 3): one sentence per comparison in words,
read from the same verdict as the table, and a line saying when other programs were
busy during the runs."""

from __future__ import annotations

from fwbench.report.answer import answers, busy_line, opening
from fwbench.report.summary import summarise, verdict_notes
from fwbench.result import Result

from .test_parity_and_summary import result


def _busy(r: Result, cores: float) -> Result:
    assert r.measurement is not None
    runs = tuple(run.model_copy(update={"other_cpu_cores": cores}) for run in r.measurement.runs)
    m = r.measurement.model_copy(update={"runs": runs})
    return r.model_copy(update={"measurement": m, "environment": {"cpu_logical_cores": 2}})


def test_one_sentence_per_comparison_with_its_verdict_and_interval() -> None:
    faster = [result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.146, 0.001)]
    same = [
        result("torch", "eager", 0.100, 0.0004, task="infer"),
        result("tensorflow", "graph", 0.1002, 0.0004, task="infer"),
    ]
    _, rows = summarise([*faster, *same])
    said = answers(rows)
    verdict = rows[0].comparison()
    assert verdict is not None
    assert said[0] == (
        "ResNet-18 training, batch 32, 224px c1000, CPU: PyTorch (eager) is 1.46x faster than "
        f"TensorFlow (graph), 95% interval {verdict.interval()}."
    )
    assert said[1].startswith(
        "ResNet-18 inference, batch 32, 224px c1000, CPU: no difference beyond ±2% between"
    )


def test_an_undecided_comparison_says_what_would_likely_decide_it() -> None:
    _, (row,) = summarise(
        [result("torch", "eager", 0.100, 0.02), result("tensorflow", "graph", 0.103, 0.02)]
    )
    verdict = row.comparison()
    assert verdict is not None and verdict.outcome == "inconclusive"
    (said,) = answers([row])
    assert ": undecided: PyTorch (eager) 1.03x against TensorFlow (graph), 95% interval" in said
    assert "more runs a side would likely decide it." in said or "over 100 runs" in said


def test_a_failed_side_is_said_in_words() -> None:
    _, (row,) = summarise(
        [result("torch", "eager", 0.1, 0.001), result("tensorflow", "graph", 0, 0, "oom")]
    )
    assert answers([row]) == [
        "ResNet-18 training, batch 32, 224px c1000, CPU: only PyTorch (eager) measured "
        "(TensorFlow (graph) oom)."
    ]


def test_a_busy_machine_is_said_first_with_the_figure() -> None:
    quiet = [result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.13, 0.001)]
    assert busy_line(quiet) is None
    busy = [_busy(quiet[0], 1.2), _busy(quiet[1], 0.1)]
    line = busy_line(busy)
    assert line == (
        "The machine was busy: other programs used 1.2 of 2 cores during 1 of 2 cases. That, "
        "not the frameworks, is the likeliest reason a comparison stayed open: rerun on a "
        "quiet machine or with --require-idle."
    )
    _, rows = summarise(busy)
    assert opening(busy, rows)[0] == line and len(opening(busy, rows)) == 2


def test_the_note_names_the_comparisons_the_budget_reopened() -> None:
    fast, slow = result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.13, 0.001)

    def reopened(r: Result) -> Result:
        assert r.measurement is not None
        runs = list(r.measurement.runs)
        runs[-1] = runs[-1].model_copy(update={"reopened": True})
        m = r.measurement.model_copy(update={"runs": tuple(runs), "stop_reason": "verdict"})
        return r.model_copy(update={"measurement": m})

    _, (row,) = summarise([reopened(fast), reopened(slow)])
    (note,) = [n for n in verdict_notes([row]) if n.startswith("Re-opened")]
    assert "resnet18 train b32 224px c1000 (torch/eager 1.30x faster)" in note


def test_the_sentence_names_the_level_its_interval_was_read_at() -> None:
    """Runs paired by round are read at a wider level than 95% (docs/methodology.md,
    "Pairing runs by round"): the sentence names it, as the note below the table does."""
    pair = [result("torch", "eager", 0.10, 0.001), result("tensorflow", "graph", 0.146, 0.001)]
    paired = []
    for r in pair:
        assert r.measurement is not None
        m = r.measurement.model_copy(update={"group_id": "g"})
        paired.append(r.model_copy(update={"measurement": m}))
    _, (row,) = summarise(paired)
    assert row.compared.paired and row.compared.level == 0.965
    (said,) = answers([row])
    assert ", 96.5% interval " in said
    assert "at 96.5%" in " ".join(filter(None, verdict_notes([row])))
