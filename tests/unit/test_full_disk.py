"""Nothing measured is lost to a failed write (issue 43, defect 2): `fwbench run --db
small/r.duckdb` on a full filesystem measured for 11 s, then exited 2 with "cannot write
results file ... No space left on device", the measurement gone. A result the database
does not take is kept in a JSON file that `fwbench import` reads; the command goes on,
prints what it measured, and ends by naming the file (exit 2). A filesystem that is
already nearly full is refused before anything is measured."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from fwbench.errors import StoreError
from fwbench.store import rescue
from fwbench.store.db import ResultStore, WriteFailed
from fwbench.store.imports import read_records
from fwbench.store.rescue import Rescue, check_free_space

from .test_robustness import cli

DATA = Path(__file__).parent.parent / "data"
TINY = ["--batch-size", "2", "--input-size", "32", "--num-classes", "10", "--threads", "2"]
ONE_SHORT_RUN = ["--min-runs", "1", "--max-runs", "1", "--max-time", "0.3", "--no-flops"]


def full_disk_for(table: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, every transaction that writes `table` fails as DuckDB fails on a full
    disk (rolled back, nothing written); the rest (the invocation's row) still goes in.
    Returns the list that counts the failures."""
    failures: list[int] = []
    real = ResultStore._transaction

    def transaction(self: ResultStore, statements: Iterable[tuple[str, Any]]) -> None:
        statements = list(statements)
        if any(f"INTO {table} " in sql for sql, _ in statements):
            failures.append(1)
            raise WriteFailed(
                self.path,
                duckdb.TransactionException(
                    f'Failed to commit: Could not write file "{self.path}.wal": '
                    "No space left on device"
                ),
            )
        real(self, statements)

    monkeypatch.setattr(ResultStore, "_transaction", transaction)
    return failures


@pytest.mark.slow
def test_a_run_on_a_full_disk_keeps_its_result_for_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.duckdb"
    failures = full_disk_for("results", monkeypatch)
    argv = ["run", "--framework", "torch", "--model", "resnet18", "--task", "infer", *TINY]
    code, out, err = cli([*argv, *ONE_SHORT_RUN, "--db", str(db), "--json"], capsys)
    assert failures, "the fake full disk was never hit"
    assert code == 2, err
    # What was measured is printed, then the one line naming where it is kept.
    record = json.loads(out)
    assert record["status"] == "ok" and record["step_time_s"]["median"] > 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: 1 result could not be written to") and "No space left" in last
    kept = Path(last.split(" kept in ")[1].split(":")[0])
    assert kept.parent == tmp_path and kept.name.startswith("r.duckdb.unsaved-")
    assert f"fwbench import {kept} --db {db}" in last
    assert "measuring goes on" in err  # said when it happened, not only at the end

    # The disk has room again: the import puts the very result back.
    monkeypatch.undo()
    code, _, err = cli(["import", str(kept), "--db", str(db)], capsys)
    assert code == 0, err
    with ResultStore(db, read_only=True) as store:
        (back,) = store.results()
    assert back.result_id == record["result_id"] and back.status == "ok"
    assert back.measurement is not None
    assert back.measurement.step_time_s.median == record["step_time_s"]["median"]


def test_a_database_nearly_full_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.duckdb"
    monkeypatch.setattr(rescue, "MIN_FREE_BYTES", 1 << 62)
    argv = ["run", "--framework", "torch", "--model", "resnet18", "--task", "infer", *TINY]
    code, out, err = cli([*argv, "--db", str(db)], capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: only ") and "free on the filesystem of" in err, err
    assert err.count("\n") == 1 and not db.exists()


def test_a_rescue_goes_where_there_is_room_and_keeps_every_record_in_one_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "gone" / "r.duckdb"
    (tmp_path / "gone").write_text("a file where the database's folder should be")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    kept = Rescue(db)
    first = kept.keep("a", {"result_id": "a", "n": 1}, "No space left on device")
    assert first.parent == tmp_path / "tmp"
    kept.keep("b", {"result_id": "b"}, "No space left on device")
    kept.keep("a", {"result_id": "a", "n": 2}, "No space left on device")  # newer runs
    assert kept.path == first
    assert json.loads(first.read_text()) == [{"result_id": "a", "n": 2}, {"result_id": "b"}]
    assert "2 results could not be written" in kept.message()


def test_a_rescue_with_nowhere_to_go_says_the_result_is_lost(tmp_path: Path) -> None:
    kept = Rescue(tmp_path / "r.duckdb")
    blocker = tmp_path / "file"
    blocker.write_text("")
    kept._places = [blocker / "x.json", blocker / "y.json"]
    with pytest.raises(StoreError, match="this result is lost"):
        kept.keep("a", {}, "No space left on device")


def test_free_space_is_checked_where_the_database_will_be(tmp_path: Path) -> None:
    check_free_space(tmp_path / "not" / "yet" / "r.duckdb", needed=1)
    with pytest.raises(StoreError, match="pass --db on another filesystem"):
        check_free_space(tmp_path / "r.duckdb", needed=1 << 62)


def schema14_point(tmp_path: Path) -> Any:
    """The serving point of a schema-14 database, as this version reads it."""
    old = tmp_path / "v14.duckdb"
    with gzip.open(DATA / "results-schema14.duckdb.gz") as src:
        old.write_bytes(src.read())
    with ResultStore(old) as store:
        (point,) = store.serving()
    return point


def test_a_serving_point_round_trips_through_import(tmp_path: Path) -> None:
    """A serving point kept for import (or printed by `serve --json`) is read back as the
    same point, into the serving table."""
    point = schema14_point(tmp_path)
    exported = tmp_path / "kept.json"
    exported.write_text(json.dumps([point.to_record()]))
    (back,) = read_records(exported)
    assert back == point
    db = tmp_path / "new.duckdb"
    with ResultStore(db) as store:
        assert store.add_rows([], "import", serving=[back]) == 1
        assert store.add_rows([], "import", serving=[back]) == 0  # already there
        assert store.serving() == [point]


def test_an_edited_serving_record_is_refused(tmp_path: Path) -> None:
    point = schema14_point(tmp_path)
    record = {**point.to_record(), "batch_size": point.case.batch_size + 1}
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps([record]))
    with pytest.raises(StoreError, match="point_key"):
        read_records(edited)


def test_an_import_puts_a_record_further_along_in_place_of_its_earlier_version(
    tmp_path: Path,
) -> None:
    """A case's record is rewritten as its runs come; when the disk fills after one
    version was stored, the newer one goes to the rescue file. Importing that file puts
    the newer version in the earlier one's place (the import used to skip it as "already
    there", and the measured runs were lost); an older version never replaces a newer."""
    from fwbench.store.db import Row

    from .test_regression import _generation

    done = _generation(0.1, 0.01, "case-x")
    assert done.measurement is not None
    cut = done.measurement.model_copy(
        update={"runs": done.measurement.runs[:2], "stop_reason": "unfinished"}
    )
    partial = done.model_copy(update={"measurement": cut})
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        store.add(partial)
        assert store.add_rows([Row.of(done)], "import") == 1
        (stored,) = store.results()
        assert stored.measurement is not None and stored.measurement.stop_reason == "precision"
        assert len(stored.measurement.runs) == 5
        assert store.add_rows([Row.of(partial)], "import") == 0  # older: skipped
        assert store.add_rows([Row.of(done)], "import") == 0  # the same: already there
        (stored,) = store.results()
        assert len(stored.measurement.runs) == 5  # type: ignore[union-attr]


def test_one_import_given_a_result_twice_keeps_its_furthest_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fwbench import export.json rescue.json`, the rescue file holding an earlier copy
    of a finished case: the copy read last had won, its runs lost, and the message said
    "1 already there" of a new database."""
    from fwbench.launch.records import measurement_of

    from .test_regression import _generation

    made = _generation(0.1, 0.01, "case-x")
    assert made.measurement is not None
    runs = made.measurement.runs
    done = made.model_copy(update={"measurement": measurement_of(runs, "precision")})
    partial = made.model_copy(update={"measurement": measurement_of(runs[:2], "unfinished")})
    files = []
    for name, made in (("done", done), ("partial", partial)):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps([made.to_record()]))
    db = tmp_path / "r.duckdb"
    code, _, err = cli(["import", *map(str, files), "--db", str(db)], capsys)
    assert code == 0, err
    said = " ".join(err.split())  # the console wraps a long line
    assert said == f"1 results imported into {db} (1 given again: the furthest along kept)"
    with ResultStore(db, read_only=True) as store:
        (stored,) = store.results()
    assert stored.measurement is not None and len(stored.measurement.runs) == 5
    point = schema14_point(tmp_path)
    served = point.served
    cut = point.model_copy(
        update={"serving": served.model_copy(update={"runs": served.runs[:-1], "unfinished": True})}
    )
    with ResultStore(tmp_path / "points.duckdb") as store:
        assert store.add_rows([], "import", serving=[point, cut]) == 1
        assert store.serving() == [point]


def test_an_import_puts_a_serving_point_further_along_in_place_of_its_earlier_version(
    tmp_path: Path,
) -> None:
    point = schema14_point(tmp_path)
    served = point.served
    assert served.runs
    cut = point.model_copy(
        update={"serving": served.model_copy(update={"runs": served.runs[:-1], "unfinished": True})}
    )
    with ResultStore(tmp_path / "new.duckdb") as store:
        assert store.add_rows([], "import", serving=[cut]) == 1
        assert store.add_rows([], "import", serving=[point]) == 1  # further along
        assert store.add_rows([], "import", serving=[cut]) == 0  # older: skipped
        assert store.serving() == [point]
