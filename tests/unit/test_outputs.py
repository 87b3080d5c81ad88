"""An output never destroys an input (issue 29, defect 1): `fwbench export --db c.duckdb
-o c.duckdb` replaced the database with its own CSV, every result gone. Each command that
writes a file refuses, before any work, an output that is one of its inputs (by name,
through a symbolic link or as a hard link), two outputs that are one file, and a chart
folder that holds an input; each refusal is one line, exit code 2, every file unchanged."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from fwbench.errors import SpecError
from fwbench.outputs import (
    FileArg,
    database,
    is_duckdb,
    refuse_overwrite,
    report_output,
    write_atomically,
)

from .test_robustness import cli

DATA = Path(__file__).parent.parent / "data"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def make_db(stored: Path, tmp_path: Path) -> Callable[[str], Path]:
    """A fresh copy of the database at tmp_path/<name>."""

    def make(name: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(stored, path)
        return path

    return make


def refused(
    argv: list[str],
    kept: list[Path],
    says: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`fwbench argv` exits 2 with one line that says `says`; every file in `kept` keeps
    its bytes."""
    before = [digest(p) for p in kept]
    code, out, err = cli(argv, capsys)
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert says in err, err
    assert out == ""
    assert [digest(p) for p in kept] == before


# --- export ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_export_onto_its_database_is_refused(
    fmt: str, make_db: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db("c.duckdb")
    argv = ["export", "--db", str(db), "-o", str(db), "--format", fmt]
    refused(argv, [db], f"-o {db} is the results database {db} itself", capsys)
    assert is_duckdb(db)


def test_export_through_a_symlink_to_its_database_is_refused(
    make_db: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db("d.duckdb")
    link = tmp_path / "link.csv"
    link.symlink_to(db.name)  # relative, as `ln -s d.duckdb link.csv` makes it
    argv = ["export", "--db", str(db), "-o", str(link)]
    refused(argv, [db], f"-o {link} is the results database {db} itself", capsys)
    assert link.is_symlink()


def test_export_to_a_hard_link_of_its_database_is_refused(
    make_db: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db("d.duckdb")
    hard = tmp_path / "hard.csv"
    os.link(db, hard)
    refused(["export", "--db", str(db), "-o", str(hard)], [db], "is the results database", capsys)
    assert os.path.samefile(db, hard)


def test_export_onto_its_database_spelled_another_way_is_refused(
    make_db: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db("c.duckdb")
    # "missing/.." resolves lexically, as the write would: to c.duckdb.
    other = tmp_path / "missing" / ".." / "c.duckdb"
    argv = ["export", "--db", str(db), "-o", str(other), "--format", "csv"]
    refused(argv, [db], "is the results database", capsys)


def test_export_onto_another_database_is_refused(
    make_db: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db, other = make_db("c.duckdb"), make_db("other.duckdb")
    argv = ["export", "--db", str(db), "-o", str(other), "--format", "csv"]
    refused(argv, [db, other], f"-o {other} is a DuckDB database", capsys)


def test_export_elsewhere_still_works(
    make_db: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db("c.duckdb")
    before = digest(db)
    out = tmp_path / "c.csv"
    code, _, err = cli(["export", "--db", str(db), "-o", str(out)], capsys)
    assert code == 0, err
    assert out.read_text().startswith("result_id,") and digest(db) == before


# --- report ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["html", "md"])
@pytest.mark.parametrize("given", ["argument", "--db"])
def test_report_onto_its_database_is_refused(
    fmt: str,
    given: str,
    make_db: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = make_db("c.duckdb")
    source = [str(db)] if given == "argument" else ["--db", str(db)]
    argv = ["report", *source, "-o", str(db), "--format", fmt]
    refused(argv, [db], f"-o {db} is the results database {db} itself", capsys)


def test_report_whose_default_path_is_its_database_is_refused(
    make_db: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db("report.html")  # the default report beside it has this very name
    refused(["report", str(db)], [db], "the default report path", capsys)


def test_markdown_report_whose_chart_folder_holds_its_database_is_refused(
    make_db: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Writing r.md replaces r-charts/ whole: the database in it went with it.
    db = make_db("r-charts/results.duckdb")
    argv = ["report", str(db), "-o", str(tmp_path / "r.md")]
    refused(argv, [db], "replaces its chart folder", capsys)


def test_chart_folder_is_where_the_report_puts_its_charts(
    make_db: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db("c.duckdb")
    out = tmp_path / "r.md"
    code, _, err = cli(["report", str(db), "-o", str(out)], capsys)
    assert code == 0, err
    folder = report_output("-o", out, "md").folder
    assert folder is not None and folder.is_dir() and any(folder.iterdir())


# --- import ----------------------------------------------------------------------------


def test_import_onto_its_own_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "x.json"
    shutil.copyfile(DATA / "results-schema8.json", data)
    argv = ["import", str(data), "--db", str(data)]
    refused(argv, [data], f"--db {data} is the JSON input {data} itself", capsys)


def test_import_onto_a_hard_link_of_an_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "x.json"
    shutil.copyfile(DATA / "results-schema8.json", data)
    other = tmp_path / "y.duckdb"
    os.link(data, other)
    argv = ["import", str(DATA / "results-schema7.json"), str(data), "--db", str(other)]
    refused(argv, [data], "is the JSON input", capsys)


# --- sweep, serve, explain: a database they write, and reports ------------------------


def test_sweep_report_onto_its_database_is_refused(
    make_db: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # A .html name gets past the report-format check: the report replaced the database
    # after the whole sweep had run into it.
    db = make_db("r.html")
    argv = ["sweep", "--preset", "quick", "--db", str(db), "--report", str(db)]
    refused(argv, [db], f"--report {db} is the results database {db} itself", capsys)


def test_sweep_markdown_report_whose_chart_folder_holds_its_database_is_refused(
    make_db: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db("r-charts/results.duckdb")
    argv = ["sweep", "--preset", "quick", "--db", str(db), "--report", str(tmp_path / "r.md")]
    refused(argv, [db], "which holds the results database", capsys)


def test_sweep_report_twice_to_one_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, report = tmp_path / "r.duckdb", tmp_path / "a.html"
    report.write_text("old report")
    link = tmp_path / "b.html"
    link.symlink_to(report)
    for second in (report, link):
        argv = ["sweep", "--preset", "quick", "--db", str(db)]
        argv += ["--report", str(report), "--report", str(second)]
        refused(argv, [report], "are the same file; give each output its own path", capsys)
    assert not db.exists()


def test_sweep_database_onto_its_sweep_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("model: resnet18\nframework: torch\n")
    argv = ["sweep", str(spec), "--db", str(spec)]
    refused(argv, [spec], f"--db {spec} is the sweep file {spec} itself", capsys)


def test_sweep_with_distinct_outputs_passes_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sweep", "--preset", "quick", "--db", str(tmp_path / "r.duckdb"), "--dry-run"]
    argv += ["--report", str(tmp_path / "a.html"), "--report", str(tmp_path / "a.md")]
    code, _, err = cli(argv, capsys)
    assert code == 0, err


def test_serve_report_onto_its_database_is_refused(
    make_db: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db("s.html")
    argv = ["serve", "--framework", "torch", "--model", "resnet18"]
    argv += ["--db", str(db), "--report", str(db)]
    refused(argv, [db], f"--report {db} is the results database {db} itself", capsys)


def test_explain_database_onto_its_rules_or_traces_is_refused(
    make_db: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("conv: ['conv']\n")
    base = ["explain", "--model", "resnet18", "--framework", "torch"]
    argv = [*base, "--db", str(rules), "--categories", str(rules)]
    refused(argv, [rules], "is the category rules", capsys)
    db = make_db("e.duckdb")
    argv = [*base, "--db", str(db), "--trace-dir", str(db)]
    refused(argv, [db], f"--trace-dir {db} is the results database {db} itself", capsys)


# --- the check itself ------------------------------------------------------------------


def test_outputs_not_created_yet_are_compared_where_they_will_be(tmp_path: Path) -> None:
    dangling = tmp_path / "link.html"
    dangling.symlink_to(tmp_path / "new.html")
    reports = [
        FileArg("--report", tmp_path / "new.html", "the report"),
        FileArg("--report", dangling, "the report"),
    ]
    with pytest.raises(SpecError, match="are the same file"):
        refuse_overwrite(reports)
    # A database read and written is listed as both: not a clash with itself.
    db = database("--db", tmp_path / "r.duckdb")
    refuse_overwrite([db, FileArg("-o", tmp_path / "r.csv", "the export")], [db])


def test_write_atomically_never_replaces_a_database(make_db: Callable[[str], Path]) -> None:
    db = make_db("c.duckdb")
    before = digest(db)

    def write(tmp: Path) -> None:
        tmp.write_text("a,b\n")

    with pytest.raises(SpecError, match="is a DuckDB database"):
        write_atomically(db, write, "export")
    assert digest(db) == before


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_a_report_into_a_folder_not_made_yet_is_written(
    fmt: str, make_db: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A Markdown report built its charts in a scratch folder inside a parent that did not
    # exist yet: FileNotFoundError, exit 1.
    db = make_db("results.duckdb")
    out = tmp_path / "new" / "deeper" / f"r.{fmt}"
    code, _, err = cli(["report", str(db), "-o", str(out)], capsys)
    assert code == 0, err
    assert out.is_file() and out.stat().st_size > 0


# --- the database's log (issue 43, defect 1) -------------------------------------------


@pytest.fixture
def killed_writer(tmp_path: Path) -> Path:
    """A database whose results live only in its log (FILE.wal), as a launcher killed after
    storing them leaves it: a writer that stored two results and died without closing."""
    import subprocess
    import sys

    db = tmp_path / "ks.duckdb"
    script = (
        "import os, sys\n"
        "from fwbench.store.db import ResultStore\n"
        "from fwbench.store.imports import read_records\n"
        f"store = ResultStore({str(db)!r})\n"
        f"store.add_many(read_records(__import__('pathlib').Path({str(DATA)!r}) / "
        "'results-schema8.json'), 'import')\n"
        "sys.stdout.flush(); os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert (tmp_path / "ks.duckdb.wal").stat().st_size > 0
    return db


def _stored_ids(db: Path) -> int:
    from fwbench.store.db import ResultStore

    with ResultStore(db, read_only=True) as store:
        return len(list(store.results()))


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--db", "{db}", "-o", "{wal}", "--format", "json"],
        ["export", "--db", "{db}", "-o", "{wal}", "--format", "csv"],
        ["report", "{db}", "-o", "{wal}", "--format", "md"],
    ],
)
def test_an_output_onto_the_database_log_is_refused(
    argv: list[str], killed_writer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, wal = killed_writer, killed_writer.with_name("ks.duckdb.wal")
    filled = [a.format(db=db, wal=wal) for a in argv]
    refused(filled, [db, wal], "which DuckDB keeps beside the results database", capsys)
    assert _stored_ids(db) == 2


def test_an_output_onto_the_log_through_links_or_of_another_database_is_refused(
    killed_writer: Path, make_db: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    db = killed_writer
    wal = db.with_name("ks.duckdb.wal")
    soft, hard = db.with_name("soft.json"), db.with_name("hard.json")
    soft.symlink_to(wal.name)
    os.link(wal, hard)
    for out in (soft, hard):
        argv = ["export", "--db", str(db), "-o", str(out), "--format", "json"]
        refused(argv, [db, wal], "which DuckDB keeps beside", capsys)
    # Another database's export aimed at this one's log.
    other = make_db("other.duckdb")
    argv = ["export", "--db", str(other), "-o", str(wal), "--format", "json"]
    refused(argv, [db, wal], f"is the log DuckDB keeps beside the database {db}", capsys)
    assert _stored_ids(db) == 2


def test_the_log_given_as_the_database_is_refused(
    killed_writer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wal = killed_writer.with_name("ks.duckdb.wal")
    refused(["results", "--db", str(wal)], [killed_writer, wal], "pass the database itself", capsys)
    assert _stored_ids(killed_writer) == 2


@pytest.mark.parametrize("blocker", ["file", "link"])
def test_a_markdown_report_whose_chart_folder_is_not_a_folder_is_refused_writing_nothing(
    blocker: str,
    make_db: Callable[[str], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """r-charts a file or a link: refused in one line before anything is written (the
    report used to be written first, naming charts that were never there, or a link
    ended in a traceback)."""
    db = make_db("c.duckdb")
    charts = tmp_path / "r-charts"
    if blocker == "file":
        charts.write_text("mine")
    else:
        (tmp_path / "elsewhere").mkdir()
        charts.symlink_to(tmp_path / "elsewhere")
    out = tmp_path / "r.md"
    code, _, err = cli(["report", str(db), "-o", str(out)], capsys)
    assert code == 2, err
    assert err.strip().startswith(f"error: report {out}: its charts go in {charts}, which is")
    assert not out.exists()
    assert charts.is_symlink() or charts.read_text() == "mine"


def test_a_database_a_failed_command_made_and_stored_nothing_in_is_removed(
    tmp_path: Path,
) -> None:
    """`run`, `sweep` and `serve` alike: a database the command created is removed with
    its log when the command fails before storing anything; one holding a result, or
    one that was there before, is kept."""
    from fwbench.cli.execute import removed_if_empty
    from fwbench.store.db import ResultStore

    from .test_regression import _generation

    db = tmp_path / "r.duckdb"
    for stores in (False, True):
        with pytest.raises(RuntimeError), removed_if_empty(db), ResultStore(db) as store:
            store.start_invocation("fwbench serve", {})
            if stores:
                store.add(_generation(0.1, 0.01, "x"))
            raise RuntimeError("found late")
        assert db.exists() is stores
        assert not db.with_name("r.duckdb.wal").exists()
    with pytest.raises(RuntimeError), removed_if_empty(db):
        raise RuntimeError("found late")
    assert db.exists()
