"""`fwbench import` of damaged or hostile exports (issue "Nothing lost, nothing crashes",
defects 4 and 5): every record is validated as a result made here is, so a refused
import is one line naming the file, the record and the field, exit code 2, and no
database is made or changed; what is imported reads back and reports."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwbench.store.db import ResultStore

from .test_parity_and_summary import result
from .test_robustness import cli

MISSING = object()


def record(**changes: Any) -> dict[str, Any]:
    """A valid record of a result, with `changes` (MISSING: the key left out)."""
    rec = json.loads(json.dumps(result("torch", "eager", 0.1, 0.001).to_record()))
    for key, value in changes.items():
        if value is MISSING:
            rec.pop(key)
        else:
            rec[key] = value
    return rec


def write(path: Path, records: Any) -> Path:
    path.write_text(json.dumps(records))
    return path


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        # 4: exceptions that went through
        ({"framework": MISSING}, "framework: missing"),
        ({"model": MISSING}, "model: missing"),
        ({"batch_size": "eight"}, "batch_size: "),
        ({"batch_size": 10**30}, "batch_size: "),
        ({"batch_size": 1e30}, "batch_size: Input should be a valid integer (got 1e+30)"),
        ({"threads": 2**63}, "threads: "),
        # 5: records that broke later commands
        ({"batch_size": 0}, "batch_size: "),
        ({"batch_size": -1}, "batch_size: "),
        ({"batch_size": True}, "batch_size: "),
        ({"batch_size": 8.5}, "batch_size: "),
        # issue 43, defect 8: a record without an id was taken for another one
        ({"result_id": ""}, "result_id: empty or missing"),
        ({"result_id": "  "}, "result_id: empty or missing"),
        ({"result_id": MISSING}, "result_id: missing"),
        ({"mode": "nope"}, "mode: PyTorch has no 'nope' mode"),
        ({"device": "tpu"}, "device: invalid value 'tpu'"),
        ({"precision": "fp8"}, "precision: invalid value 'fp8'"),
        ({"input_size": 0}, "input_size: "),
        ({"seq_len": 128}, "seq_len: does not apply to resnet18"),
        ({"case_key": "0000"}, "case_key: '0000' does not match"),
        ({"throughput": float("-inf")}, "throughput: -inf does not match"),
        ({"global_batch_size": 0}, "global_batch_size: 0 does not match"),
        ({"error": "a\x00b"}, "error: contains a NUL byte"),
        ({"environment": {"host\x00": 1}}, "environment.host\x00: contains a NUL byte"),
        (
            {"step_time_s": {"median": 0.1, "ci_low": 0.09, "ci_high": float("inf")}},
            "step_time_s.ci_high: ",
        ),
        ({"samples": [float("nan")]}, "samples.0: "),
        ({"param_count": 2**63}, "param_count: 9223372036854775808 is out of range"),
        ({"steps_per_block": 2**40}, "steps_per_block: 1099511627776 is out of range"),
        # A renamed or added key was dropped without a word: `runs` renamed read as a
        # record of one value a side, `reading` gone as verdicts on another estimator.
        ({"bogus_field": 1}, "bogus_field: not a field of any record fwbench writes"),
        ({"runs": MISSING, "runz": []}, "runz: not a field of any record fwbench writes"),
        ({"runs": MISSING}, "runs: missing, and every version-20 record has it"),
        ({"reading": MISSING}, "reading: missing, and every version-20 record has it"),
        # A null was read as the field's default: reading null as verdicts on the median,
        # an edited case with its derived keys null as unchecked.
        ({"reading": None}, "reading: null, and fwbench never writes it so"),
        ({"run_plan": None}, "run_plan: null, and fwbench never writes it so"),
        (
            {"batch_size": 64, "case_key": None, "global_batch_size": None, "throughput": None},
            "case_key: null, and fwbench never writes it so",
        ),
        ({"throughput": None}, "throughput: None does not match"),
    ],
)
def test_a_bad_record_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], says: str
) -> None:
    bad = write(tmp_path / "bad.json", [record(), record(**{"result_id": "second", **changes})])
    db = tmp_path / "new.duckdb"
    code, _, err = cli(["import", str(bad), "--db", str(db)], capsys)
    assert code == 2, err
    assert err.startswith(f"error: {bad}: record 2: {says}"), err
    assert err.count("\n") == 1, err
    assert not db.exists() and not db.with_name("new.duckdb.wal").exists()
    # A database that existed is left as it was, byte for byte.
    existing = tmp_path / "old.duckdb"
    with ResultStore(existing) as store:
        store.add(result("tensorflow", "graph", 0.2, 0.001))
    before = existing.read_bytes()
    code, _, err = cli(["import", str(bad), "--db", str(existing)], capsys)
    assert code == 2 and existing.read_bytes() == before, err


def test_a_key_named_twice_in_one_object_is_refused_not_read_as_the_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """json keeps the last of two keys of one name: an appended "result_id" (or
    "step_time_s") replaced the one the record was written with."""
    text = json.dumps([record()])
    bad = tmp_path / "twice.json"
    bad.write_text(text[: text.rindex("}")] + ', "result_id": "other-id"}]')
    db = tmp_path / "r.duckdb"
    code, _, err = cli(["import", str(bad), "--db", str(db)], capsys)
    assert (code, err) == (
        2, f"error: {bad}: not a JSON export: key 'result_id' is in one object twice\n"
    )  # fmt: skip
    assert not db.exists()


def test_json_nested_deeper_than_the_reader_goes_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    db = tmp_path / "r.duckdb"
    code, _, err = cli(["import", str(deep), "--db", str(db)], capsys)
    assert (code, err) == (2, f"error: {deep}: not a JSON export: nested too deeply\n")
    assert not db.exists()
    nested: Any = 1
    for _ in range(900):  # within json's limit, deep inside a record
        nested = [nested]
    write(deep, [record(environment={"x": nested})])
    code, _, err = cli(["import", str(deep), "--db", str(db)], capsys)
    assert code in (0, 2) and err.count("\n") == 1, err


def derived_free(tmp_path: Path, **changes: Any) -> Path:
    """An export of one record with `changes`, without the fields fwbench derives on
    export (case_key, throughput, ...): what a user or a plugin's fwbench wrote."""
    rec = record(**changes)
    for derived in ("case_key", "throughput", "global_batch_size", "different_work"):
        rec.pop(derived)
    return write(tmp_path / "x.json", [rec])


def test_a_model_no_plugin_registers_here_is_imported_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = derived_free(tmp_path, model="plugin-net")
    rec = json.loads(export.read_text())[0]
    db = tmp_path / "r.duckdb"
    code, _, err = cli(["import", str(export), "--db", str(db)], capsys)
    assert code == 0, err
    assert "model 'plugin-net' is not registered here" in err
    with ResultStore(db, read_only=True) as store:
        (back,) = store.results()
    assert back.case.model == "plugin-net"
    # Impossible values are refused whatever the model.
    write(export, [{**rec, "batch_size": 0}])
    code, _, err = cli(["import", str(export), "--db", str(tmp_path / "b.duckdb")], capsys)
    assert code == 2 and "batch_size: " in err


@pytest.mark.parametrize(("field", "value"), [("framework", "caffe"), ("task", "fly")])
def test_what_reading_shows_an_import_takes_with_the_same_warning(
    field: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row edited to framework caffe or task fly was shown by results, report and
    export, and then its export was refused by import (issue 43, defect 7): both read
    it alike, its fields checked, named as not registered here (a plugin's?)."""
    export = derived_free(tmp_path, **{field: value})
    db = tmp_path / "r.duckdb"
    code, _, err = cli(["import", str(export), "--db", str(db)], capsys)
    assert code == 0, err
    assert f"{field} {value!r} is not registered here" in err
    again = tmp_path / "again.json"
    code, _, err = cli(["export", "--db", str(db), "-o", str(again)], capsys)
    assert code == 0, err
    code, _, err = cli(["import", str(again), "--db", str(tmp_path / "b.duckdb")], capsys)
    assert code == 0, err


def test_a_damaged_row_is_left_out_with_a_warning_and_the_rest_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One bad row blocked every command on the whole database (issue 43, defect 7)."""
    from .test_damaged_store import with_damaged_row

    db = with_damaged_row(tmp_path / "r.duckdb", "UPDATE results SET batch_size = 0")
    code, out, err = cli(["results", "--db", str(db), "--json"], capsys)
    assert code == 0, err
    assert [r["framework"] for r in json.loads(out)] == ["tensorflow"]
    assert "results row 'torcheagerNone' is damaged (batch_size: " in err
    assert err.count("is damaged") == 1
    exported = tmp_path / "x.json"
    code, _, err = cli(["export", "--db", str(db), "-o", str(exported)], capsys)
    assert code == 0 and len(json.loads(exported.read_text())) == 1, err


FIELDS = ["batch_size", "threads", "input_size", "num_classes", "framework", "model", "mode"]
FIELDS += ["device", "task", "precision", "layout", "autotune", "world_size", "strategy"]
FIELDS += ["options", "status", "error", "case_key", "throughput", "samples", "step_time_s"]
FIELDS += ["build_s", "warmup_steps", "runs", "recorded_at", "result_id", "schema_version"]
values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.sampled_from(["torch", "resnet18", "cuda", "infer", "fp16", "channels_last", "ddp"]),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3),
)


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(changes=st.dictionaries(st.sampled_from(FIELDS), values, min_size=1, max_size=3))
def test_any_record_is_imported_and_reports_or_is_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    changes: dict[str, Any],
) -> None:
    tmp = tmp_path_factory.mktemp("any")
    export = tmp / "x.json"
    second = record(**{"result_id": "b", **copy.deepcopy(changes)})
    export.write_text(json.dumps([record(), second]))
    db = tmp / "r.duckdb"
    code, _, err = cli(["import", str(export), "--db", str(db)], capsys)
    assert code in (0, 2) and err.count("\n") == 1, err
    if code == 2:
        assert err.startswith(f"error: {export}: record 2: ") and not db.exists(), err
        return
    for argv in (["results"], ["report", "-o", str(tmp / "r.md")], ["export", "-o", "x.csv"]):
        if argv[0] == "export":
            argv = ["export", "-o", str(tmp / "x.csv")]
        code, _, err = cli([*argv, "--db", str(db)], capsys)
        assert code == 0, (argv, err)


def test_a_long_import_shows_its_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fwbench.cli import imports

    export = write(tmp_path / "x.json", [record(result_id=f"r{i}") for i in range(5)])
    monkeypatch.setattr(imports, "LONG_IMPORT", 5)
    code, _, err = cli(["import", str(export), "--db", str(tmp_path / "r.duckdb")], capsys)
    assert code == 0, err
    assert "checking x.json" in err and "writing" in err and "5/5" in err
    assert err.rstrip().endswith("5 results imported into " + str(tmp_path / "r.duckdb"))


HOSTILE = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n\ndef fn():\n    return 1\n"


@pytest.mark.parametrize(
    ("model", "model_path"),
    [
        ("resnet18", "{file}:fn"),  # a zoo name with a path: the check resolved the path
        ("resnet18", "torch:{file}:fn"),
        ("resnet18", "keras:{file}:fn"),
        ("resnet18", "torch:evilpkg.mod:fn"),  # finding the module ran its package
        ("{file}:fn", None),  # a source's syntax as the name: resolving it imported it
        ("nets.fn@0123456789ab", "{file}:fn"),  # a user's model, as fwbench records one
    ],
)
def test_importing_a_record_never_runs_the_code_it_names(
    model: str,
    model_path: str | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 52, item 2: a record is data. A colleague's export whose model_path names a
    Python file (or a package on the path) made `fwbench import` run it."""
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(HOSTILE.format(marker=str(marker)))
    package = tmp_path / "evilpkg"
    package.mkdir()
    (package / "__init__.py").write_text(HOSTILE.format(marker=str(marker)))
    (package / "mod.py").write_text("def fn():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    changes: dict[str, Any] = {"model": model.format(file=evil)}
    if model_path is not None:
        changes["model_path"] = model_path.format(file=evil)
    export = derived_free(tmp_path, **changes)
    db = tmp_path / "r.duckdb"
    code, _, err = cli(["import", str(export), "--db", str(db)], capsys)
    assert not marker.exists(), "importing a record ran the file it names"
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and not db.exists(), err
    if model == "resnet18":
        assert code == 2 and "model_path: resnet18 is the zoo's" in err, err


def test_user_text_is_printed_as_written_never_as_an_emoji(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 52, item 11: the console turned `hf:llama` into `hf🦙` and a path holding
    `:smile:` into a face."""
    code, _, err = cli(["run", "--framework", "litert", "--model", "hf:llama", "--task",
                        "infer"], capsys)  # fmt: skip
    assert code == 2 and "hf:llama" in err, err
    folder = tmp_path / "emo:smile:"
    folder.mkdir()
    code, _, err = cli(["run", "--framework", "torch", "--model", str(folder / "x.onnx"),
                        "--task", "infer"], capsys)  # fmt: skip
    assert code == 2 and "emo:smile:/x.onnx: no such file" in err, err


def _faster(rec: dict[str, Any]) -> None:
    """Its step time 10% faster, its throughput to match (what a hand edit would do)."""
    rec["step_time_s"] = {k: v * 0.9 for k, v in rec["step_time_s"].items()}
    rec["throughput"] = rec["throughput"] / 0.9


def _run_faster(rec: dict[str, Any]) -> None:
    run = rec["runs"][0]
    run.update(median_s=run["median_s"] * 0.9, ci_low_s=run["ci_low_s"] * 0.9)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            _faster,
            "step_time_s: 0.0899992 (interval 0.0888883 to 0.0911241) is not its runs' "
            "estimate (0.0999992,",
        ),
        (_run_faster, "runs[0] median_s: 0.08955 is not the median of its blocks (0.0995)"),
        (lambda rec: rec["samples"].reverse(), "samples: not its runs' blocks in order"),
        (lambda rec: rec["runs"][1]["samples"].reverse(), "samples: not its runs' blocks"),
    ],
)
def test_an_estimate_that_is_not_its_runs_own_is_refused(change: Any, says: str) -> None:
    """Tables, ratios against a baseline and trends show the case's step time; the
    `median` reading reads each run's median. An edit to either, its blocks left as they
    were, showed one speed beside verdicts read from another."""
    from fwbench.result import Result

    rec = record()
    Result.from_record(copy.deepcopy(rec))
    change(rec)
    with pytest.raises(ValueError, match=re.escape(says)):
        Result.from_record(rec)


def test_a_task_figure_that_is_not_its_runs_own_is_refused() -> None:
    """A generation's time to first token is estimated over its runs as the step time is;
    an edited estimate, or one left out, would show another figure than its runs'."""
    from fwbench.launch.records import measurement_of
    from fwbench.result import Result, RunFigure

    from .test_parity_and_summary import runs_of

    runs = tuple(
        run.model_copy(
            update={
                "figures": {
                    "ttft_s": RunFigure(samples=(0.2, 0.2 + i / 100), median_s=0.2 + i / 200)
                }
            }
        )
        for i, run in enumerate(runs_of([0.1, 0.11, 0.12]))
    )
    made = result("torch", "eager", 0.1, 0.001)
    made = made.model_copy(update={"measurement": measurement_of(runs, "max_runs")})
    rec = json.loads(json.dumps(made.to_record()))
    assert Result.from_record(copy.deepcopy(rec)).measurement == made.measurement
    edited = copy.deepcopy(rec)
    edited["figures"]["ttft_s"].update(median=0.19, ci_low=0.19)
    with pytest.raises(ValueError, match=r"ttft_s: 0\.19 .* is not its runs' estimate"):
        Result.from_record(edited)
    del rec["figures"]["ttft_s"]
    with pytest.raises(ValueError, match=re.escape("figures: [] are not its runs' (['ttft_s'])")):
        Result.from_record(rec)
