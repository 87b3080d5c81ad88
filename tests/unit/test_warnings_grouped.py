"""Warnings in reports: one line per cause, figures shown as ranges, cases named."""

from __future__ import annotations

from fwbench.report.warnings import group


def test_the_same_warning_with_other_figures_is_one_line_naming_its_cases() -> None:
    spread = "large spread: IQR is {}% of the median (over 10%); the machine may be noisy"
    pairs = [
        ("torch resnet18 b8", "run 1: " + spread.format(23)),
        ("tf resnet18 b8", "run 2: " + spread.format(31)),
        ("torch resnet18 b8", "run 3: " + spread.format(11)),
        ("torch vgg16 b1", "busy machine: other processes used 0.40 cores"),
        ("a", "run 1: " + spread.format(12)),
        ("b", "run 1: " + spread.format(12)),
    ]
    spreads, busy = group(pairs)
    assert spreads.text() == (
        "run 1-3: large spread: IQR is 11-31% of the median (over 10%); the machine may be noisy"
    )
    assert spreads.where() == "5 times in 4 cases: torch resnet18 b8, tf resnet18 b8, a and 1 more"
    assert busy.text() == "busy machine: other processes used 0.40 cores"
    assert busy.where() == "1 case: torch vgg16 b1"
    assert group([]) == []


def test_braces_in_a_warning_do_not_break_it() -> None:
    (g,) = group([("c", "timing: {min_runs: 3} gave 2 runs")])
    assert g.text() == "timing: (min_runs: 3) gave 2 runs"
