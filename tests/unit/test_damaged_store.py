"""A damaged results database (issue "Nothing lost, nothing crashes", defect 6): every
command that opens it says in one line which file and what is damaged, exit code 2, and
leaves the file as it was."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwbench.store.db import ResultStore

from .test_parity_and_summary import result
from .test_robustness import cli
from .test_store import DATA

# Columns cannot be dropped while the case_key index depends on the table.
UNINDEXED = "DROP INDEX results_case_key"

DAMAGE = [
    (["DROP TABLE results"], "its results table is missing"),
    (["DROP TABLE invocations"], "its invocations table is missing"),
    (["DROP TABLE serving"], "its serving table is missing"),
    (
        [UNINDEXED, "ALTER TABLE results DROP COLUMN median_s"],
        "results table lacks column median_s",
    ),
    (
        [UNINDEXED, "ALTER TABLE results DROP COLUMN case_key"],
        "results table lacks column case_key",
    ),
    (
        ["UPDATE meta SET value = '7' WHERE key = 'schema_version'"],
        "its results table has column invocation_id, tracked, options, task_dims, figures, "
        "group_id, model_path, inputs, objective, run_timing, run_plan, reading, dims of a schema "
        "after the version 7",
    ),
    (
        ["UPDATE meta SET value = '7' WHERE key = 'schema_version'", "DROP TABLE serving"],
        "its results table has column invocation_id, tracked, options, task_dims, figures, "
        "group_id, model_path, inputs, objective, run_timing, run_plan, reading, dims of a schema "
        "after the version 7",
    ),
]


@pytest.mark.parametrize(("statements", "says"), DAMAGE)
@pytest.mark.parametrize("command", ["results", "report", "export", "import"])
def test_a_damaged_database_is_named_in_one_line_and_left_as_it_was(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    statements: list[str],
    says: str,
    command: str,
) -> None:
    db = tmp_path / "r.duckdb"
    ok = result("torch", "eager", 0.1, 0.001)
    with ResultStore(db) as store:
        store.add(ok)
    con = duckdb.connect(str(db))
    for sql in statements:
        con.execute(sql)
    con.close()
    before = db.read_bytes()
    out = tmp_path / "out"
    argv = {
        "results": ["results"],
        "report": ["report", "-o", str(out.with_suffix(".md"))],
        "export": ["export", "-o", str(out.with_suffix(".json"))],
        "import": ["import", str(tmp_path / "in.json")],
    }[command]
    (tmp_path / "in.json").write_text(json.dumps([ok.to_record()]))
    code, _, err = cli([*argv, "--db", str(db)], capsys)
    assert code == 2, err
    assert err.startswith(f"error: {db} is damaged: ") and says in err, err
    assert err.count("\n") == 1, err
    assert db.read_bytes() == before
    assert not out.with_suffix(".md").exists() and not out.with_suffix(".json").exists()


# --- a database in a directory that cannot be written (defect 7) ------------------------


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    """A directory this process cannot create files in, holding r.duckdb (one result,
    its own file writable) and old.duckdb (schema 9, to be migrated). Made read-only by
    its mode, or as root (whom modes do not stop) by the immutable attribute."""
    folder = tmp_path / "ro"
    folder.mkdir()
    with ResultStore(folder / "r.duckdb") as store:
        store.add(result("torch", "eager", 0.1, 0.001))
    with gzip.open(DATA / "results-schema9.duckdb.gz") as src:
        (folder / "old.duckdb").write_bytes(src.read())
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    chattr = shutil.which("chattr")
    made = chattr and subprocess.run([chattr, "+i", str(folder)], capture_output=True)
    if not made or made.returncode != 0:
        pytest.skip("running as root, whom a directory's mode does not stop, and chattr +i failed")
    try:
        yield folder
    finally:
        subprocess.run([str(chattr), "-i", str(folder)], check=True)


@pytest.mark.parametrize(
    ("db", "command", "why"),
    [
        ("r.duckdb", "import", ""),
        ("new.duckdb", "import", ""),
        ("old.duckdb", "results", " (it was written by an older fwbench and must be migrated)"),
    ],
)
def test_a_database_in_a_directory_that_cannot_be_written_is_one_line(
    unwritable: Path, capsys: pytest.CaptureFixture[str], db: str, command: str, why: str
) -> None:
    export = unwritable.parent / "in.json"
    other = result("tensorflow", "graph", 0.2, 0.001)
    export.write_text(json.dumps([other.to_record()]))
    path = unwritable / db
    before = path.read_bytes() if path.exists() else None
    argv = ["import", str(export)] if command == "import" else [command]
    code, _, err = cli([*argv, "--db", str(path)], capsys)
    assert (code, err) == (
        2,
        f"error: cannot write results file {path}{why}: its directory {unwritable} is not "
        f"writable, and DuckDB writes its log {db}.wal beside the file; make the directory "
        "writable or pass --db PATH elsewhere\n",
    )
    assert (path.read_bytes() if path.exists() else None) == before
    # Reading a file of the current schema needs no write.
    code, _, err = cli(["results", "--db", str(unwritable / "r.duckdb")], capsys)
    assert code == 0, err


# --- reports of whatever a store holds (defect 5) ---------------------------------------

CASE_COLUMNS = {
    "batch_size": st.integers(min_value=-3, max_value=3) | st.none(),
    "global_batch_size": st.integers(min_value=-3, max_value=3) | st.none(),
    "world_size": st.integers(min_value=-2, max_value=3) | st.none(),
    "threads": st.integers(min_value=-2, max_value=3) | st.none(),
    "input_size": st.integers(min_value=-2, max_value=3) | st.none(),
    "num_classes": st.integers(min_value=-2, max_value=3) | st.none(),
    "seq_len": st.integers(min_value=-2, max_value=3) | st.none(),
    "framework": st.sampled_from(["nope", "", "torch", "tensorflow"]) | st.none(),
    "model": st.sampled_from(["nope", "", "bert-base", "resnet18"]) | st.none(),
    "mode": st.sampled_from(["nope", "", "graph", "compile"]) | st.none(),
    "device": st.sampled_from(["tpu", "", "cuda"]) | st.none(),
    "task": st.sampled_from(["nope", "", "infer"]) | st.none(),
    "precision": st.sampled_from(["fp8", "", "bf16"]) | st.none(),
    "layout": st.sampled_from(["diagonal", "channels_last"]) | st.none(),
    "strategy": st.sampled_from(["nope", "ddp"]) | st.none(),
    "options": st.sampled_from(["=", "onednn=off", "x"]) | st.none(),
    "error": st.sampled_from(["a\x00b", "", "\x1b[31m"]) | st.none(),
}


@pytest.mark.slow
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(changes=st.dictionaries(st.sampled_from(sorted(CASE_COLUMNS)), st.data(), max_size=4))
def test_reports_read_whatever_case_values_a_store_holds(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    changes: dict[str, st.DataObject],
) -> None:
    tmp = tmp_path_factory.mktemp("store")
    db = tmp / "r.duckdb"
    with ResultStore(db) as store:
        for framework, mode, median in (("torch", "eager", 0.1), ("tensorflow", "graph", 0.12)):
            base = result(framework, mode, median, 0.001)
            for task in ("train", "infer"):
                case = base.case.model_copy(update={"task": task})
                store.add(
                    base.model_copy(update={"case": case, "result_id": base.result_id + task})
                )
    con = duckdb.connect(str(db))
    for column, data in changes.items():
        value = data.draw(CASE_COLUMNS[column])
        con.execute(f"UPDATE results SET {column} = ? WHERE result_id LIKE 'torch%'", [value])
    con.close()
    for argv in (
        ["results"],
        ["report", "-o", str(tmp / "r.md")],
        ["report", "-o", str(tmp / "r.html")],
        ["export", "-o", str(tmp / "r.json")],
    ):
        code, _, err = cli([*argv, "--db", str(db)], capsys)
        assert code == 0 or (code == 2 and err.count("\n") == 1), (argv, err)


def test_a_database_cut_short_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file truncated to half its size failed inside DuckDB ("Could not read enough
    bytes") as an unexpected error, exit 1 (issue 43, defect 4)."""
    import gzip

    db = tmp_path / "cut.duckdb"
    with gzip.open(Path(__file__).parent.parent / "data" / "results-schema15.duckdb.gz") as src:
        db.write_bytes(src.read())
    with db.open("r+b") as f:
        f.truncate(db.stat().st_size // 2)
    code, out, err = cli(["results", "--db", str(db)], capsys)
    assert code == 2 and out == "", err
    assert err.startswith("error: cannot read the results file: ") and err.count("\n") == 1
    assert "damaged or cut short" in err


@pytest.mark.parametrize("flag", ["--db", "-o"])
def test_a_path_too_long_is_one_line(
    flag: str, tmp_path: Path, stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = tmp_path / ("a" * 300 + ".json")
    argv = ["export", "--db", str(stored), "-o", str(name)]
    if flag == "--db":
        argv = ["results", "--db", str(tmp_path / ("a" * 300 + ".duckdb"))]
    code, out, err = cli(argv, capsys)
    assert code == 2 and out == "", err
    assert err.startswith("error: ") and err.rstrip().endswith("File name too long")
    assert err.count("\n") == 1


def test_output_to_a_full_device_is_one_line(stored: Path) -> None:
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "fwbench", "results", "--db", str(stored), "--json"],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "error: cannot write the output: No space left on device\n"


def with_damaged_row(db: Path, statement: str) -> Path:
    """A database of two results, PyTorch's and TensorFlow's, with PyTorch's row changed
    by `statement` (an UPDATE without its WHERE) as a damaged disk or a hand edit would."""
    with ResultStore(db) as store:
        store.add(result("torch", "eager", 0.1, 0.001))
        store.add(result("tensorflow", "graph", 0.2, 0.001))
    con = duckdb.connect(str(db))
    con.execute(statement + " WHERE framework = 'torch'")
    con.close()
    return db


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("UPDATE results SET runs = '{not json'", "runs: not JSON ("),
        ("UPDATE results SET environment = '[1, '", "environment: not JSON ("),
    ],
)
@pytest.mark.parametrize("command", ["results", "report", "export"])
def test_a_damaged_cell_leaves_its_row_out_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], statement: str, says: str, command: str
) -> None:
    db = with_damaged_row(tmp_path / "r.duckdb", statement)
    out = tmp_path / "out"
    argv = {
        "results": ["results"],
        "report": ["report", "-o", str(out.with_suffix(".md"))],
        "export": ["export", "-o", str(out.with_suffix(".json"))],
    }[command]
    code, _, err = cli([*argv, "--db", str(db)], capsys)
    assert code == 0, err
    assert f"results row 'torcheagerNone' is damaged ({says}" in err, err
    assert "it is left out" in err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"SQLite format 3\x00" + bytes(84), "is a SQLite database, not an fwbench results file"),
        (b'[{"schema_version": 16}]', "is a JSON file (`fwbench import` reads exports)"),
    ],
)
@pytest.mark.parametrize("command", ["results", "report", "compare"])
def test_a_file_that_is_not_a_results_database_is_named_for_what_it_is(
    tmp_path: Path,
    stored: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    says: str,
    command: str,
) -> None:
    """A SQLite file made DuckDB fetch an extension from the network; a JSON export given
    to report or compare said "Catalog Error" (issue 43, defect 9)."""
    other = tmp_path / "other.db"
    other.write_bytes(content)
    argv = {
        "results": ["results", "--db", str(other)],
        "report": ["report", str(other), "-o", str(tmp_path / "r.md")],
        "compare": ["compare", str(stored), str(other)],
    }[command]
    code, out, err = cli(argv, capsys)
    assert code == 2 and out == "", err
    assert says in err and err.count("\n") == 1, err
    assert other.read_bytes() == content


def test_a_null_samples_cell_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        store.add(result("torch", "eager", 0.1, 0.001))
    con = duckdb.connect(str(db))
    con.execute("UPDATE results SET samples = NULL")
    con.close()
    code, _, err = cli(["results", "--db", str(db)], capsys)
    assert code == 0, err
    assert "is damaged (samples: empty (NULL) in a measured result)" in err
