"""The rule for bad input (issue 29, item 8): one line naming the problem and the valid
choices, exit code 2, nothing written; or, where a choice is reasonable, say what was
chosen. One test (or a few) per defect, in process and fast."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fwbench import sweep as sweeps
from fwbench.api import RunOptions
from fwbench.errors import SpecError
from fwbench.measure.settings import TimingConfig
from fwbench.report.write import report_format

from .test_robustness import cli


def refused(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = cli(argv, capsys)
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert says in err, err
    assert out == ""
    return err


def parse_error(text: str) -> str:
    with pytest.raises(SpecError) as err:
        sweeps.parse(text)
    assert "\n" not in str(err.value)
    return str(err.value)


# --- 1: a per-framework mapping names a framework that is not in the sweep ------------


@pytest.mark.parametrize(
    ("axis", "value"),
    [
        ("mode", "graph"),  # was: "the sweep expands to no case"
        ("batch_size", "8"),  # was: "the sweep expands to no case"
        ("input_size", "64"),  # was: "input_size applies to none of the sweep's models ()"
        ("options", "onednn=off"),  # was: ignored, the torch case ran alone
    ],
)
def test_1_a_mapping_key_outside_the_sweeps_frameworks_is_refused(axis: str, value: str) -> None:
    text = f"model: resnet18\nframework: [torch]\n{axis}: {{tensorflow: {value}}}\n"
    assert parse_error(text) == (
        f"sweep: {axis}: tensorflow is not one of the sweep's frameworks (torch); "
        f"add it to `framework` or take it out of `{axis}`"
    )


def test_1_the_default_frameworks_are_named_as_the_default() -> None:
    err = parse_error("model: resnet18\nmode: {torch: eager, keras-jax: jit}\n")
    assert err.startswith("sweep: mode: keras-jax is not one of the sweep's frameworks")
    assert "(torch, tensorflow: the default)" in err


def test_1_a_mapping_that_leaves_a_framework_of_the_sweep_out_keeps_its_meaning() -> None:
    # options left out for a framework: none (the framework decides).
    s = sweeps.parse(
        "model: resnet18\nframework: [torch, tensorflow]\noptions: {tensorflow: onednn=off}\n"
    )
    assert [(c.variant, c.options) for c in s.cases] == [
        ("torch/eager", None),
        ("tensorflow/graph/onednn=off", "onednn=off"),
    ]
    # An outer axis: per-framework values, a framework left out gets no case there.
    s = sweeps.parse("model: resnet18\nbatch_size: {torch: [8, 32], tensorflow: 32}\n")
    assert [(c.framework, c.batch_size) for c in s.cases] == [
        ("torch", 8),
        ("torch", 32),
        ("tensorflow", 32),
    ]


def test_1_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("model: resnet18\nframework: [torch]\nbatch_size: {tensorflow: 8}\n")
    db = tmp_path / "r.duckdb"
    refused(["sweep", str(spec), "--db", str(db)], "batch_size: tensorflow is not one", capsys)
    assert not db.exists()


# --- 2: a timing that is not a mapping -------------------------------------------------


@pytest.mark.parametrize("value", ["[1]", "5", "fast"])
def test_2_a_timing_that_is_not_a_mapping_is_one_line(value: str) -> None:
    err = parse_error(f"model: resnet18\ntiming: {value}\n")
    assert err.startswith(
        "sweep: timing: must be a mapping of settings, e.g. {min_runs: 5}; valid keys: "
    )
    assert ", ".join(TimingConfig().flat()) in err
    assert "argument after **" not in err


def test_2_an_unknown_timing_key_names_the_valid_ones() -> None:
    err = parse_error("model: resnet18\ntiming: {min_run: 5}\n")
    assert err.startswith("sweep: timing: unknown key 'min_run'; valid keys: min_warmup_steps")


# --- 3: duplicate keys -----------------------------------------------------------------


def test_3_a_key_given_twice_is_refused_with_its_lines() -> None:
    err = parse_error("model: resnet18\nbatch_size: 8\nthreads: 2\nbatch_size: 16\n")
    assert err == "sweep: key 'batch_size' is given twice, at lines 2 and 4; give each key once"
    err = parse_error("model: resnet18\ntiming: {min_runs: 2, min_runs: 5}\n")
    assert err == "sweep: key 'min_runs' is given twice, on line 2; give each key once"


def test_3_a_merge_may_still_be_overridden_and_the_limits_hold() -> None:
    s = sweeps.parse("model: resnet18\ntiming: {<<: {min_runs: 4}, min_runs: 5}\n")
    assert s.timing.plan.min_runs == 5
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
    for level in "bcdefghij":
        prev = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
    with pytest.raises(SpecError, match="once YAML aliases are expanded"):
        sweeps.parse(bomb + "model: resnet18\ndescription: *j\n")
    with pytest.raises(SpecError, match="could not determine a constructor"):
        sweeps.parse("model: !!python/object/apply:os.system ['true']\n")


# --- 4: an axis given null -------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("batch_size: null", "batch_size: null is not a value; leave the key out for the "
         "default (32)"),
        ("batch_size: [null]", "batch_size: null is not a value; leave the key out for the "
         "default (32)"),
        ("batch_size:", "batch_size: null is not a value; leave the key out for the default (32)"),
        ("mode: ~", "mode: null is not a value; leave the key out for each framework's default "
         "mode"),
        ("input_size: null", "input_size: null is not a value; leave the key out for each "
         "model's default"),
        ("batch_size: {torch: null, tensorflow: 8}", "batch_size: null is not a value (for "
         "torch); give torch a value, or leave the key out for the default (32)"),
        ("timing: null", "timing: null is not a value; leave the key out for the default "
         "measurement settings"),
        ("framework: null", "framework: null is not a framework name"),
    ],
)  # fmt: skip
def test_4_null_is_not_a_value(line: str, expected: str) -> None:
    assert parse_error(f"model: resnet18\n{line}\n") == f"sweep: {expected}"


def test_4_null_beside_other_values_keeps_its_meaning() -> None:
    # `strategy: [ddp, null]` adds the plain cases (docs/distributed.md).
    s = sweeps.parse("model: resnet18\nframework: torch\nstrategy: [ddp, null]\nthreads: 1\n")
    assert sorted(str(c.strategy) for c in s.cases) == ["None", "ddp"]


# --- 5: --max-runs below --min-runs ----------------------------------------------------


def test_5_max_runs_below_min_runs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def execute(cases: Any, db: Path, options: RunOptions) -> list[Any]:
        plan = options.timing.plan
        raise AssertionError(f"ran with min_runs={plan.min_runs}, max_runs={plan.max_runs}")

    monkeypatch.setattr("fwbench.cli.execute.execute", execute)  # never a real benchmark
    db = tmp_path / "r.duckdb"
    argv = ["run", "--framework", "torch", "--model", "resnet18", "--db", str(db)]
    err = refused([*argv, "--min-runs", "5", "--max-runs", "2"], "", capsys)
    assert err == "error: --max-runs (2) is below --min-runs (5)\n"
    assert not db.exists()


def test_5_max_runs_left_out_rises_to_min_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[RunOptions] = []

    def execute(cases: Any, db: Path, options: RunOptions) -> list[Any]:
        seen.append(options)
        return []

    monkeypatch.setattr("fwbench.cli.execute.execute", execute)
    argv = ["run", "--framework", "torch", "--model", "resnet18", "--db", str(tmp_path / "r")]
    for flags, runs in ((["--min-runs", "20"], (20, 20)), ([], (3, 10))):
        code, _, err = cli([*argv, *flags], capsys)
        assert code == 0, err
        assert (seen[-1].timing.plan.min_runs, seen[-1].timing.plan.max_runs) == runs


def test_5_tune_names_its_own_flag_and_checks_before_listing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Its run time is --max-time too: it said "--run-time", a flag tune does not have.
    argv = ["tune", "resnet18", "--framework", "torch", "--dry-run", "--max-time"]
    refused([*argv, "0"], "--max-time: Input should be greater than 0", capsys)
    refused([*argv, "nan"], "--max-time: Input should be a finite number", capsys)


def test_5_a_sweeps_timing_says_it_in_its_own_words() -> None:
    err = parse_error("model: resnet18\ntiming: {min_runs: 5, max_runs: 2}\n")
    assert err == "sweep: timing: max_runs (2) is below min_runs (5)"


# --- 6: compare --threshold ------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "-inf"])
def test_6_a_threshold_outside_its_range_is_refused(
    value: str, stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused(
        ["compare", str(stored), str(stored), f"--threshold={value}"],
        "--threshold: must be a finite share of 0 or more, e.g. 0.05 for a 5% slowdown",
        capsys,
    )


@pytest.mark.parametrize("value", ["0", "0.05", "2"])
def test_6_a_threshold_in_range_is_taken(
    value: str, stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(["compare", str(stored), str(stored), "--threshold", value], capsys)
    assert code == 0, err


# --- 7: a report path with no extension ------------------------------------------------


def test_7_a_report_path_without_extension_is_refused(
    stored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x"
    refused(
        ["report", str(stored), "-o", str(out)],
        f"-o {out}: no extension to tell the report's format; valid extensions: .html, .md "
        "(e.g. x.html), or give --format html|md",
        capsys,
    )
    assert not out.exists()
    code, _, err = cli(["report", str(stored), "-o", str(out), "--format", "md"], capsys)
    assert code == 0 and f"written to {out} (md)" in err, err
    assert out.read_text().startswith("#")
    argv = ["sweep", "--preset", "quick", "--dry-run", "--db", str(tmp_path / "r.duckdb")]
    refused([*argv, "--report", str(tmp_path / "y")], "--report", capsys)


def test_7_a_special_file_or_a_folder_takes_html() -> None:
    assert report_format(Path("/dev/null"), None, "-o") == "html"
    assert report_format(None, None) == "html"  # no -o: report.html beside the results
    assert report_format(Path("r.MD"), None) == "md"


# --- 8: a closed or broken stdout ------------------------------------------------------


@pytest.mark.parametrize("flags", [[], ["--json"], ["--summary"]])
def test_8_a_closed_stdout_is_an_error(
    flags: list[str],
    stored: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdout", None)  # what Python makes of `>&-`
    refused(["results", "--db", str(stored), *flags], "stdout is closed", capsys)


def _fwbench(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fwbench.cli.app", *argv],
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
        **kwargs,
    )


def test_8_closed_and_broken_pipes_in_a_real_process(stored: Path) -> None:
    # `fwbench results >&-` exited 0, having written nothing.
    proc = _fwbench(["results", "--db", str(stored)], preexec_fn=lambda: os.close(1))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: cannot write the output: stdout is closed")
    # `| head -1` once the reader has gone: quiet, as before (no error, no traceback).
    read, write = os.pipe()
    os.close(read)
    try:
        proc = _fwbench(["results", "--db", str(stored), "--json"], stdout=write)
    finally:
        os.close(write)
    assert proc.stderr == "" and proc.returncode != 2


def test_a_presets_budget_is_left_out_where_ray_runs_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick preset's budget orders the local executor's work: on Ray (every group at
    once) the sweep runs without it and says so; --budget itself is refused there, and an
    unknown executor is named before any budget is."""
    db = str(tmp_path / "r.duckdb")
    code, _, err = cli(["sweep", "--preset", "quick", "--executor", "ray", "--dry-run"], capsys)
    assert code == 0, err
    assert "budget applies to the local executor: ray runs without it" in err
    assert "estimated 2 min to 8 min" in err  # 3-10 runs a case, no budget to cut them
    flag = ["sweep", "--preset", "quick", "--executor", "ray", "--budget", "2m", "--db", db]
    refused(flag, "--budget: applies to the local executor", capsys)
    refused(["sweep", "--preset", "quick", "--executor", "slurm", "--db", db], "local, ray", capsys)
