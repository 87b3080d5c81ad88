from __future__ import annotations

from pathlib import Path

import pytest

from fwbench import sweep
from fwbench.errors import SpecError
from fwbench.measure.settings import TimingConfig


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "framework: [torch, tensorflow]\nmode: {torch: eager}\n",
            "mode: no value for tensorflow, one of the sweep's frameworks (torch, tensorflow), "
            "which would get no case; add `tensorflow: graph` to `mode` or take tensorflow "
            "out of `framework`",
        ),
        (  # the default frameworks
            "mode: {torch: compile}\n",
            "mode: no value for tensorflow, one of the sweep's frameworks (torch, tensorflow: "
            "the default), which would get no case; add `tensorflow: graph` to `mode` or take "
            "tensorflow out of `framework`",
        ),
        (
            "framework: [torch, tensorflow]\nbatch_size: {tensorflow: [1, 8]}\n",
            "batch_size: no value for torch, one of the sweep's frameworks (torch, tensorflow), "
            "which would get no case; add `torch: [1, 8]` to `batch_size` or take torch out "
            "of `framework`",
        ),
    ],
)
def test_a_mapping_that_leaves_out_a_framework_is_refused(text: str, expected: str) -> None:
    # It used to drop every case of that framework without a word.
    with pytest.raises(SpecError) as err:
        sweep.parse("model: resnet18\n" + text)
    assert str(err.value) == f"sweep: {expected}"


def test_options_left_out_for_a_framework_mean_none() -> None:
    s = sweep.parse(
        "model: resnet18\nframework: [torch, tensorflow]\noptions: {tensorflow: onednn=off}\n"
    )
    assert [c.variant for c in s.cases] == ["torch/eager", "tensorflow/graph/onednn=off"]


def test_a_setting_of_some_modes_or_tasks_is_given_where_it_applies() -> None:
    """Flax's state applies to mode jit, Keras' decoding to task generate: beside other
    modes and tasks, a sweep gives them the case without it (one case, not two), as
    a model's cases drop the dimensions it does not take."""
    s = sweep.parse(
        "model: gpt2_tiny\ntask: [train, generate]\nframework: [flax, keras-jax]\n"
        "mode: {flax: [jit, nnx-jit], keras-jax: [jit]}\n"
        "options: {flax: [default, state=arrays], keras-jax: decoding=loop}\n"
    )
    assert [(c.task, c.variant) for c in s.cases] == [
        ("train", "flax/jit"),
        ("train", "flax/jit/state=arrays"),
        ("train", "flax/nnx-jit"),
        ("train", "keras-jax/jit"),
        ("generate", "flax/jit"),
        ("generate", "flax/jit/state=arrays"),
        ("generate", "flax/nnx-jit"),
        ("generate", "keras-jax/jit/decoding=loop"),
    ]
    with pytest.raises(SpecError, match="has no setting 'spinning'; valid choices for flax: state"):
        sweep.parse("model: resnet18\nframework: flax\noptions: spinning=off\n")
    # Given where it applies to no case, it is refused, not dropped without a word.
    says = "options: state applies to none of the sweep's cases [(]it applies to mode jit only"
    with pytest.raises(SpecError, match=says):
        sweep.parse("model: resnet18\nframework: flax\nmode: nnx-jit\noptions: state=arrays\n")
    with pytest.raises(SpecError, match=r"decoding applies to none .* task generate only"):
        sweep.parse("model: gpt2_tiny\nframework: keras-jax\noptions: decoding=loop\n")


def test_timing_and_timeout_are_read() -> None:
    s = sweep.parse("model: resnet18\ntiming: {max_time_s: 2}\ntimeout_s: 30\n")
    assert s.timing.plan.max_time_s == 2
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
        ("1h30", "sweep: budget: '1h30' is not a duration"),  # 1 h 30 s, or 1 h 30 min?
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
    assert len({c.model for c in s.cases}) >= 2
    # Training and inference, each at two batch sizes (a batch-size effect in each).
    assert {(c.task, c.batch_size) for c in s.cases} == {
        (task, batch) for task in ("train", "infer") for batch in (1, 8)
    }
    # Measured until decided, in the time the comparisons share (the README's 5 minutes).
    assert s.timing.plan.max_runs > s.timing.plan.min_runs >= 3
    assert s.budget_s is not None and s.budget_s <= 240
    assert max(c.dims["input_size"] for c in s.cases) <= 96


def test_a_sweeps_duration_is_estimated_from_its_timing() -> None:
    quick = sweep.load_preset("quick")
    found = sweep.estimate(len(quick.cases), quick.timing, quick.budget_s)
    # 12 cases x 3 runs x (3.3 s overhead + 0.5 s of blocks), and up to 10 runs within
    # the preset's budget of 4 minutes.
    assert found.low_s == pytest.approx(12 * 3 * 3.8)
    assert found.high_s == pytest.approx(240)
    assert found.describe().startswith("estimated 2 min to 4 min (3-10 runs per case x (3.3 s")
    assert not found.needs_confirmation
    # Defaults: 3 runs, more (up to max_time_s / run_time_s = 5) while undecided.
    big = sweep.estimate(10_000, TimingConfig())
    assert big.runs == (3, 5)
    assert big.describe().startswith("estimated 44.2 h to 3.1 days (3-5 runs per case")
    assert big.needs_confirmation
    # A budget cuts runs beyond the minimum, never the minimum.
    assert sweep.estimate(10_000, TimingConfig(), budget_s=60).high_s == big.low_s
    assert sweep.estimate(1001, TimingConfig(min_runs=1, max_runs=1)).needs_confirmation
    assert not sweep.estimate(1000, TimingConfig(min_runs=1, max_runs=1)).needs_confirmation


def test_a_long_sweep_runs_only_with_yes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .test_robustness import cli

    spec = tmp_path / "big.yaml"
    spec.write_text(f"framework: torch\nmodel: resnet18\nbatch_size: {list(range(1, 1002))}\n")
    code, _, err = cli(["sweep", str(spec), "--dry-run"], capsys)
    assert code == 0
    assert err.strip().splitlines()[-1].startswith("1001 cases; estimated 4.4 h to 7.4 h")
    db = tmp_path / "r.duckdb"
    code, out, err = cli(["sweep", str(spec), "--db", str(db)], capsys)
    assert (code, out) == (2, "")
    assert err.strip() == (
        f"error: sweep {spec}: 1001 cases, estimated 4.4 h to 7.4 h (3-5 runs per case x "
        "(3.3 s to start, build and warm up + 2 s measuring); longer for large models and "
        "compiled modes); pass --yes to run it"
    )
    assert not db.exists()


def test_at_a_terminal_a_long_sweep_asks_and_a_no_starts_nothing(tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    spec = tmp_path / "big.yaml"
    spec.write_text(f"framework: torch\nmodel: resnet18\nbatch_size: {list(range(1, 1002))}\n")
    db = tmp_path / "r.duckdb"
    main, terminal = pty.openpty()
    os.write(main, b"n\n")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "fwbench", "sweep", str(spec), "--db", str(db)],
            stdin=terminal, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(main)
        os.close(terminal)
    assert done.returncode == 1, done.stderr
    assert "1001 cases, estimated 4.4 h to 7.4 h" in done.stderr
    assert "Run it? [y/N]:" in done.stderr
    assert done.stderr.strip().endswith("not started")
    assert not db.exists()


def test_timing_flags_are_laid_over_a_sweep_files_timing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run and sweep share one declaration of the timing flags; on a sweep, a flag given
    overrides the file's `timing`, and one left out leaves it as the file says."""
    from fwbench.cli.common import timing_flags
    from fwbench.cli.workload import Timing

    from .test_robustness import cli

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: torch\nmodel: resnet18\nbatch_size: [1, 2]\n"
        "timing: {min_runs: 2, max_runs: 2, run_time_s: 0.5}\n"
    )
    code, _, err = cli(["sweep", str(spec), "--dry-run"], capsys)
    assert code == 0 and "(2 runs per case" in err
    code, _, err = cli(["sweep", str(spec), "--dry-run", "--min-runs", "4"], capsys)
    assert code == 0 and "(4 runs per case" in err  # --max-runs rises with it
    code, _, err = cli(["sweep", str(spec), "--dry-run", "--estimator", "max"], capsys)
    assert code == 2 and err.strip().startswith("error: --estimator: Input should be")
    file_timing = TimingConfig(min_runs=2, max_runs=2, run_time_s=0.5)
    laid = timing_flags(file_timing, estimator="median", require_idle=True)
    found = (laid.reading.estimator, laid.plan.require_idle, laid.run.run_time_s)
    assert found == ("median", True, 0.5)
    assert timing_flags(file_timing) == file_timing
    # The compile cache is on unless --no-compile-cache says otherwise (or the file does);
    # either flag, given, wins over the file's timing both ways, and left out changes
    # nothing (the command's flags as typer leaves them: Timing()).
    assert file_timing.run.compile_cache
    assert not timing_flags(file_timing, compile_cache=False).run.compile_cache
    strict = file_timing.replace(compile_cache=False, require_idle=True)
    assert Timing().over(strict) == strict
    loose = timing_flags(strict, compile_cache=True, require_idle=False)
    assert loose.run.compile_cache and not loose.plan.require_idle
    with pytest.raises(SpecError, match=r"^--max-runs \(1\) is below --min-runs \(2\)"):
        timing_flags(file_timing, max_runs=1)


def test_a_per_framework_mapping_missing_a_framework_is_refused_with_a_whole_example() -> None:
    """An empty mapping crashed with StopIteration, and a scalar value was spelt out letter
    by letter in the example ("[r, e, s, ...]")."""
    with pytest.raises(SpecError, match=r"model: no value for torch, .* add `torch: \.\.\.`"):
        sweep.parse("model: {}\n")
    with pytest.raises(SpecError, match="add `tensorflow: resnet18` to `model`"):
        sweep.parse("framework: [torch, tensorflow]\nmodel: {torch: resnet18}\n")


def test_a_resumed_dry_run_lists_and_estimates_what_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dry-run --resume shows the cases the resumed sweep would measure (those not yet
    recorded), not the whole sweep."""
    from fwbench.store.db import ResultStore

    from .test_regression import _generation
    from .test_robustness import cli

    spec = tmp_path / "s.yaml"
    spec.write_text("framework: torch\nmodel: resnet18\nbatch_size: [1, 2, 4]\n")
    cases = sweep.load_file(spec).cases
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        store.add(_generation(0.1, 0.01, "x").model_copy(update={"case": cases[0]}))
    code, _, err = cli(["sweep", str(spec), "--dry-run", "--resume", "--db", str(db)], capsys)
    assert code == 0, err
    lines = err.strip().splitlines()
    assert lines[:2] == [cases[1].label(), cases[2].label()]
    assert lines[2].startswith(f"2 of 3 cases left (1 recorded in {db}); estimated")
    code, _, err = cli(["sweep", str(spec), "--dry-run", "--db", str(db)], capsys)
    assert err.strip().splitlines()[3].startswith("3 cases; estimated")


def test_an_exclude_rule_naming_a_default_matches_the_cases_that_take_it() -> None:
    """`{model: vgg16, input_size: 224}` and `{precision: fp32}` name the defaults of
    axes the sweep leaves out: they matched nothing, and every case ran."""
    s = sweep.parse(
        "framework: [torch, tensorflow]\nmodel: [resnet18, vgg16]\ntask: infer\n"
        "batch_size: [1, 8]\nexclude:\n  - {model: vgg16, input_size: 224}\n"
        "  - {model: resnet18, precision: fp32, batch_size: 8}\n"
    )
    assert sorted({(c.model, c.batch_size) for c in s.cases}) == [("resnet18", 1)]
    assert len(s.cases) == 2
