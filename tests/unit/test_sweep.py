from __future__ import annotations

from pathlib import Path

import pytest

from fwbench import sweep
from fwbench.errors import SpecError


def test_grid_expands_with_frameworks_innermost() -> None:
    s = sweep.parse(
        "model: [resnet18, vgg16]\ntask: [train, infer]\nbatch_size: [1, 8]\n"
        "input_size: 64\nthreads: 2\n"
    )
    assert len(s.cases) == 2 * 2 * 2 * 2
    # Both frameworks of one workload run back to back.
    assert [c.framework for c in s.cases[:2]] == ["torch", "tensorflow"]
    assert s.cases[0].workload_key() == s.cases[1].workload_key()


def test_per_framework_values_and_excludes() -> None:
    s = sweep.parse(
        "model: resnet18\nmode: {torch: eager, tensorflow: [eager, graph]}\n"
        "batch_size: [1, 8]\nexclude:\n  - {framework: tensorflow, mode: eager, batch_size: 8}\n"
    )
    variants = [(c.variant, c.batch_size) for c in s.cases]
    assert variants == [
        ("torch/eager", 1),
        ("tensorflow/eager", 1),
        ("tensorflow/graph", 1),
        ("torch/eager", 8),
        ("tensorflow/graph", 8),
    ]


def test_timing_and_timeout_are_read() -> None:
    s = sweep.parse("model: resnet18\ntiming: {max_time_s: 2}\ntimeout_s: 30\n")
    assert s.timing.max_time_s == 2
    assert s.timeout_s == 30
    assert s.budget_s is None


@pytest.mark.parametrize(("value", "seconds"), [("90", 90.0), ("5m", 300.0), ("1m30s", 90.0)])
def test_a_budget_is_seconds_or_a_duration(value: str, seconds: float) -> None:
    assert sweep.parse(f"model: resnet18\nbudget: {value}\n").budget_s == seconds


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5x", "sweep: budget: '5x' is not a duration; give seconds or units, e.g. 300"),
        ("0", "sweep: budget: must be a finite number of seconds above 0 (got 0)"),
        ("-1m", "sweep: budget: '-1m' is not a duration"),
        (".nan", "sweep: budget: must be a finite number of seconds above 0 (got nan)"),
    ],
)
def test_a_bad_budget_is_one_line(value: str, expected: str) -> None:
    with pytest.raises(SpecError) as err:
        sweep.parse(f"model: resnet18\nbudget: {value}\n")
    assert str(err.value).startswith(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model: [resnet18\n", "sweep: broken YAML at line 2"),
        ("- model\n", "sweep: a sweep must be a YAML mapping"),
        ("model: resnet18\nbatchsize: 8\n", "sweep: unknown key 'batchsize'; valid keys: model"),
        ("framework: torch\n", "sweep: missing key 'model'"),
        ("model: [resnet18, alexnet]\n", "sweep: model: unknown model 'alexnet'; valid choices"),
        (
            "model: resnet18\nframework: [torch, jaxx]\n",
            "sweep: framework: unknown framework 'jaxx'",
        ),
        ("model: resnet18\nmode: graph\n", "sweep: mode: PyTorch has no 'graph' mode"),
        ("model: resnet18\nbatch_size: []\n", "sweep: batch_size is an empty list"),
        ("model: resnet18\nexclude: [{colour: red}]\n", "sweep: exclude: unknown key 'colour'"),
        ("model: resnet18\ntiming: {max_time_s: -1}\n", "sweep: timing: max_time_s"),
        ("model: resnet18\nexclude: [{model: resnet18}]\n", "sweep: the sweep expands to no case"),
    ],
)
def test_bad_sweeps_give_one_line_errors(text: str, expected: str) -> None:
    with pytest.raises(SpecError) as err:
        sweep.parse(text)
    assert str(err.value).startswith(expected), str(err.value)
    assert "\n" not in str(err.value)


def test_unreadable_file_and_unknown_preset(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read sweep file"):
        sweep.load_file(tmp_path / "missing.yaml")
    with pytest.raises(
        SpecError, match=r"unknown preset 'slow'; valid choices: asu-infer, .*quick"
    ):
        sweep.load_preset("slow")


def test_quick_preset_covers_what_the_readme_promises() -> None:
    s = sweep.load_preset("quick")
    assert {c.framework for c in s.cases} == {"torch", "tensorflow"}
    assert len({c.model for c in s.cases}) >= 3
    assert {c.task for c in s.cases} == {"train", "infer"}
    assert len({c.batch_size for c in s.cases}) >= 2
    assert max(c.input_size for c in s.cases) <= 96
