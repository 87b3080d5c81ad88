"""Progress where output is not a terminal (issue 43, item 11): a sweep printed only its
final table when stderr was not a terminal (CI logs, nohup), rich's bar drawing nothing
until its end. There each case now says a plain line as it finishes, with the time so far
and what is left, and a long case says it is still running."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from rich.console import Console

from fwbench.cli import progress
from fwbench.cli.progress import case_progress, duration, outcome_of

from .test_parity_and_summary import result
from .test_robustness import cli

TINY = ["--batch-size", "2", "--input-size", "32", "--num-classes", "10", "--threads", "1"]
ONE_SHORT_RUN = ["--min-runs", "1", "--max-runs", "1", "--max-time", "0.3", "--no-flops"]


@pytest.mark.slow
def test_a_run_whose_stderr_is_not_a_terminal_says_a_line_per_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(
        [
            "run", "--framework", "torch", "--framework", "torch", "--mode", "eager",
            "--mode", "script", "--model", "resnet18", "--task", "infer", *TINY,
            *ONE_SHORT_RUN, "--db", str(tmp_path / "r.duckdb"),
        ],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    lines = err.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("[1/2] "))
    assert re.fullmatch(
        r"\[1/2\] torch/eager resnet18 infer b2 32px c10 cpu t1: ok, median step [\d.]+ ms "
        r"\(\d+ s, about \d+ s left\)",
        lines[first],
    ), lines[first]
    assert re.fullmatch(
        r"\[2/2\] torch/script resnet18 infer b2 32px c10 cpu t1: ok, median step [\d.]+ ms "
        r"\(\d+ s\)",
        lines[first + 1],
    ), lines[first + 1]
    # The steps of each run are not said one by one: they would bury the cases' lines.
    assert not any("building and warming up" in line for line in lines)


def test_lines_say_each_case_the_time_left_and_a_heartbeat_while_one_runs_long(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with case_progress(3, heartbeat_s=0.2) as shown:
        shown.status("counting parameters of 1 models in torch")
        shown.started("torch/eager resnet18")
        shown.status("run 1: measuring torch/eager resnet18")  # kept for the heartbeat
        shown.finished("torch/eager resnet18", *outcome_of(result("torch", "eager", 0.0123, 0)))
        shown.started("torch/script resnet18")
        shown.status("run 2: measuring torch/script resnet18")
        time.sleep(0.5)
        failed = result("torch", "script", 0.1, 0, status="error")
        shown.finished("torch/script resnet18", *outcome_of(failed))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "counting parameters of 1 models in torch"
    assert lines[1] == "[1/3] torch/eager resnet18: ok, median step 12.30 ms (0 s, about 0 s left)"
    assert re.fullmatch(r"\[2/3\] run 2: measuring torch/script resnet18 \(\d s in all\)", lines[2])
    assert re.fullmatch(
        r"\[2/3\] torch/script resnet18: error: boom \(\d s, about \d s left\)", lines[-1]
    )
    assert not any("run 1: measuring" in line for line in lines)


def test_a_terminal_keeps_the_bar_and_a_failure_line(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100, no_color=True)
    monkeypatch.setattr(progress, "console", terminal)
    monkeypatch.setattr(progress, "progress_bar", lambda eta: progress_bar(terminal))
    with case_progress(1) as shown:
        shown.finished("torch/script resnet18", "error", "boom")
    text = screen.getvalue()
    assert "error torch/script resnet18: boom" in text
    assert "[1/1]" not in text and "1/1" in text  # the bar's count, no plain line


def progress_bar(console: Console) -> object:
    from rich.progress import MofNCompleteColumn, Progress, TextColumn

    return Progress(TextColumn("{task.description}"), MofNCompleteColumn(), console=console)


def test_durations_read_as_minutes_and_hours() -> None:
    assert [duration(s) for s in (0.4, 12, 60, 100, 3599.6, 3600, 7500)] == [
        "0 s", "12 s", "1 min", "1 min 40 s", "1 h", "1 h", "2 h 5 min",
    ]  # fmt: skip
