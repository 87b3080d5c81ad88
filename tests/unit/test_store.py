from __future__ import annotations

import gzip
import json
from pathlib import Path

import duckdb
import pytest

from fwbench.errors import StoreError
from fwbench.result import SCHEMA_VERSION, Result
from fwbench.store.db import ResultStore
from fwbench.store.export import export

from .test_parity_and_summary import result


def test_results_round_trip_with_every_sample(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    ok, oom = result("torch", "eager", 0.1, 0.001), result("tensorflow", "graph", 0, 0, "oom")
    with ResultStore(db) as store:
        store.add(ok)
        store.add(oom)
    with ResultStore(db, read_only=True) as store:
        back = store.results()
        assert store.recorded_keys() == {ok.case_key, oom.case_key}
    assert [r.to_record() for r in back] == [ok.to_record(), oom.to_record()]


def test_options_round_trip_through_the_database_and_its_exports(tmp_path: Path) -> None:
    r = result("tensorflow", "graph", 0.1, 0.001)
    tuned = r.model_copy(
        update={"case": r.case.model_copy(update={"options": "onednn=off"}), "result_id": "o"}
    )
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        store.add(r)
        store.add(tuned)
        back = {x.result_id: x for x in store.results()}
        (column,) = store.con.execute(
            "SELECT options FROM results WHERE result_id = 'o'"
        ).fetchone()
        export(store, "json", tmp_path / "r.json")
    assert column == "onednn=off"
    assert back["o"].case.options == "onednn=off" and back["o"].case_key == tuned.case_key
    assert back[r.result_id].case.options is None and back[r.result_id].case_key == r.case_key
    records = {x["result_id"]: x for x in json.loads((tmp_path / "r.json").read_text())}
    assert records["o"]["options"] == "onednn=off"


def test_latest_result_of_each_case_wins(tmp_path: Path) -> None:
    first, second = result("torch", "eager", 0.1, 0.001), result("torch", "eager", 0.2, 0.001)
    with ResultStore(tmp_path / "r.duckdb") as store:
        store.add(first)
        store.add(second.model_copy(update={"result_id": "later"}))
        (latest,) = store.latest([first.case_key])
    assert latest.result_id == "later"


def test_unreadable_file_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "results.duckdb"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"results.duckdb is not a DuckDB database, not an fwb"):
        ResultStore(bad)
    with pytest.raises(StoreError, match="no results file at"):
        ResultStore(tmp_path / "missing.duckdb", read_only=True)


def test_foreign_duckdb_and_newer_schema_are_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.duckdb"
    duckdb.connect(str(foreign)).execute("CREATE TABLE t (x INT)").close()
    with pytest.raises(StoreError, match="not an fwbench results file"):
        ResultStore(foreign)
    newer = tmp_path / "newer.duckdb"
    ResultStore(newer).close()
    con = duckdb.connect(str(newer))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    with pytest.raises(StoreError, match="written by a newer fwbench"):
        ResultStore(newer)


def test_export_formats(tmp_path: Path) -> None:
    made = result("torch", "eager", 0.1, 0.001)
    assert made.measurement is not None
    median = made.measurement.step_time_s.median
    with ResultStore(tmp_path / "r.duckdb") as store:
        store.add(made)
        for fmt in ("csv", "parquet", "json"):
            assert export(store, fmt, tmp_path / f"out.{fmt}") == 1
        with pytest.raises(StoreError, match="valid choices: csv, parquet, json"):
            export(store, "xlsx", tmp_path / "out.xlsx")
    records = json.loads((tmp_path / "out.json").read_text())
    assert records[0]["step_time_s"]["median"] == median
    parquet = duckdb.sql(f"SELECT median_s, len(samples) FROM '{tmp_path / 'out.parquet'}'")
    assert parquet.fetchall() == [(median, 9)]
    assert "median_s" in (tmp_path / "out.csv").read_text().splitlines()[0]
    assert not (tmp_path / "out.xlsx").exists()


def test_a_stored_case_of_an_unloaded_plugin_model_stays_readable(tmp_path: Path) -> None:
    r = result("torch", "eager", 0.1, 0.001)
    plugin_case = r.case.model_copy(update={"model": "not_loaded_here"})
    with ResultStore(tmp_path / "r.duckdb") as store:
        store.add(r.model_copy(update={"case": plugin_case}))
        (back,) = store.results()
    assert back.case.model == "not_loaded_here"


def test_a_version_1_file_is_migrated_forward(tmp_path: Path) -> None:
    from fwbench.store import schema

    old = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(old))
    for sql in schema.CREATE_V1:
        con.execute(sql)
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.close()
    with ResultStore(old) as store:
        store.add(result("torch", "eager", 0.1, 0.001))
        version = store.con.execute("SELECT value FROM meta").fetchone()
        assert version == (str(SCHEMA_VERSION),)
        assert len(store.results()) == 1


def test_a_results_file_of_schema_6_is_migrated_and_reads_as_one_run_each(
    tmp_path: Path,
) -> None:
    """tests/data/results-schema6.duckdb.gz was written by fwbench before runs existed
    (torch and TensorFlow, tiny_cnn inference, one worker each)."""
    import shutil

    db = fixture_db(tmp_path, 6)
    with ResultStore(db, read_only=True) as store:
        old = store.results()
    assert {r.case.framework for r in old} == {"torch", "tensorflow"}
    for r in old:
        assert r.schema_version == 6
        assert r.measurement is not None and r.measurement.runs == ()
        assert len(r.measurement.per_run()) == 1
        assert r.measurement.ci_method.startswith("within one process")
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    assert con.execute("SELECT DISTINCT n_runs FROM results").fetchall() == [(1,)]
    con.close()
    # New results go in beside the old ones, and both read back.
    new = result("torch", "eager", 0.1, 0.001)
    with ResultStore(db) as store:
        store.add(new)
        back = {r.result_id: r for r in store.results()}
    assert back[new.result_id].measurement is not None
    assert len(back[new.result_id].measurement.runs) == 3  # type: ignore[union-attr]
    shutil.rmtree(tmp_path, ignore_errors=True)


DATA = Path(__file__).parents[1] / "data"


def fixture_db(tmp_path: Path, version: int) -> Path:
    """A working copy of the results database written by the fwbench of `version`."""
    db = tmp_path / f"v{version}.duckdb"
    with gzip.open(DATA / f"results-schema{version}.duckdb.gz") as src:
        db.write_bytes(src.read())
    return db


def test_a_json_export_imports_back_as_the_same_results(tmp_path: Path) -> None:
    from fwbench.store.imports import read_records

    ok, oom = result("torch", "eager", 0.1, 0.001), result("tensorflow", "graph", 0, 0, "oom")
    with ResultStore(tmp_path / "a.duckdb") as store:
        store.add(ok)
        store.add(oom)
        export(store, "json", tmp_path / "a.json")
    read = read_records(tmp_path / "a.json")
    assert [r.to_record() for r in read] == [ok.to_record(), oom.to_record()]
    with ResultStore(tmp_path / "b.duckdb") as store:
        assert store.add_many(read, "import a.json") == 2
        assert store.add_many(read, "import a.json") == 0  # already there: skipped
        back = store.results()
        assert [r["command"] for r in store.invocations()] == ["import a.json"]
    assert [r.to_record() for r in back] == [ok.to_record(), oom.to_record()]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe", "not a JSON export"),
        (b'{"a": 1', "not a JSON export"),
        (b"[1, 2]", "expected a list of result records"),
        (b'[{"schema_version": 99}]', "record 1: schema_version: 99 is not one this fwbench"),
        (b'[{"schema_version": 7, "status": "ok"}]', "record 1: "),
    ],
)
def test_a_bad_json_export_is_one_line_naming_the_record(
    tmp_path: Path, content: bytes, message: str
) -> None:
    from fwbench.store.imports import read_records

    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(StoreError, match=message) as found:
        read_records(bad)
    assert "\n" not in str(found.value)


@pytest.mark.slow
def test_exports_of_every_earlier_schema_read_as_their_migrated_databases(
    tmp_path: Path,
) -> None:
    """tests/data holds, for each earlier schema version, a results file and its JSON
    export, both written by the fwbench of that version (tiny cases, see
    tests/data/README.md). The JSON must read back as the migrated database reads."""
    from fwbench.store.imports import read_records

    versions = sorted(int(p.name.split(".")[0][14:]) for p in DATA.glob("results-schema*.json"))
    assert versions == list(range(1, SCHEMA_VERSION))
    for v in versions:
        db = fixture_db(tmp_path, v)
        with ResultStore(db, read_only=True) as store:
            migrated = store.results()
        imported = read_records(DATA / f"results-schema{v}.json")
        assert migrated and all(r.schema_version == v for r in imported)
        assert [r.to_record() for r in imported] == [r.to_record() for r in migrated], v
        # Exported again (the migration gave it typed settings), it reads as it was: an
        # old record's settings were rebuilt from a timing_config no longer there.
        again = [Result.from_record(json.loads(json.dumps(r.to_record()))) for r in migrated]
        assert [r.to_record() for r in again] == [r.to_record() for r in migrated], v


def test_the_table_its_exports_and_the_record_follow_one_declared_column_map(
    tmp_path: Path,
) -> None:
    from fwbench.store import columns

    db = tmp_path / "r.duckdb"
    ok = result("torch", "eager", 0.1, 0.001)
    with ResultStore(db) as store:
        store.add(ok)
        table = [(name, sql) for name, sql, *_ in store.con.execute("DESCRIBE results").fetchall()]
    # The migrations made exactly the declared columns, in the declared order.
    assert table == [(c.name, c.sql) for c in columns.RESULT_COLUMNS]
    # Every column is a key of the JSON record, a part of one, or a flat copy for SQL;
    # every key of the record is stored.
    record = ok.to_record()
    parts = {c.part_of for c in columns.RESULT_COLUMNS if c.part_of}
    for c in columns.RESULT_COLUMNS:
        assert (c.name in record) != bool(c.part_of or c.derived), c.name
    assert set(record) <= set(columns.names()) | parts
    with ResultStore(db, read_only=True) as store:
        export(store, "csv", tmp_path / "r.csv")
    header = (tmp_path / "r.csv").read_text().splitlines()[0].split(",")
    assert header == columns.names()


def test_a_bulk_import_writes_every_row_in_batches_and_reports_its_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fwbench.store import db as store_db

    monkeypatch.setattr(store_db, "BULK_ROWS", 3)
    base = [result("torch", "eager", 0.1, 0.001), result("tensorflow", "graph", 0, 0, "oom")]
    many = [
        r.model_copy(update={"result_id": f"x{i}", "invocation_id": f"run{i % 4}"})
        for i, r in enumerate(base * 5)
    ]
    done: list[int] = []
    with ResultStore(tmp_path / "r.duckdb") as store:
        assert store.add_many(many, "import", progress=done.append) == 10
        back = store.results()
        runs = sorted(r["invocation_id"] for r in store.invocations())
    assert done == [3, 3, 3, 1]
    assert runs == ["run0", "run1", "run2", "run3"]
    by_id = {r.result_id: r.to_record() for r in back}
    assert by_id == {r.result_id: r.to_record() for r in many}


def test_a_schema_10_database_keeps_its_invocations_when_runs_are_renamed(
    tmp_path: Path,
) -> None:
    """Schema 11 renamed the runs table (one row per command invocation) to invocations
    and every run_id column to invocation_id: the rows, their ids and the keys stay."""
    db = fixture_db(tmp_path, 10)
    con = duckdb.connect(str(db), read_only=True)
    before = con.execute("SELECT * FROM runs").fetchall()
    ids = con.execute("SELECT result_id, run_id FROM results ORDER BY result_id").fetchall()
    con.close()
    assert len(before) == 1 and len(ids) == 2
    with ResultStore(db) as store:
        assert sorted((r.result_id, r.invocation_id) for r in store.results()) == ids
        assert len(store.results(invocation_id=before[0][0])) == 2
        assert [r["command"] for r in store.invocations()] == [before[0][2]]
        tables = {r[0] for r in store.con.execute("SHOW TABLES").fetchall()}
        assert "invocations" in tables and "runs" not in tables
        assert store.con.execute("SELECT * FROM invocations").fetchall() == before
        indexes = store.con.execute("SELECT index_name FROM duckdb_indexes()").fetchall()
        assert indexes == [("results_case_key",)]
        with pytest.raises(duckdb.ConstraintException):  # still its primary key
            store.con.execute("INSERT INTO invocations VALUES (?, now(), 'x', '{}')", [ids[0][1]])
        # A new invocation and its results go in beside the old ones.
        new = store.start_invocation("fwbench run", {})
        store.add(result("torch", "eager", 0.1, 0.001).model_copy(update={"invocation_id": new}))
        assert len(store.invocations()) == 2 and len(store.results(invocation_id=new)) == 1


def test_a_record_written_before_schema_11_reads_its_run_id_as_its_invocation_id() -> None:
    from fwbench.result import Result

    record = result("torch", "eager", 0.1, 0.001).to_record()
    assert "run_id" not in record
    old = {("run_id" if k == "invocation_id" else k): v for k, v in record.items()}
    read = Result.from_record({**old, "schema_version": 10, "run_id": "abc"})
    assert read.invocation_id == "abc" and read.to_record()["invocation_id"] == "abc"
    # From schema 11 on the record names it invocation_id; run_id is no key of its own.
    with pytest.raises(ValueError, match="run_id: not a field of any record fwbench writes"):
        Result.from_record({**old, "run_id": "abc"})


def test_results_and_report_select_an_invocation_and_take_the_old_run_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .test_robustness import cli

    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        for framework in ("torch", "tensorflow"):
            made = store.start_invocation(f"fwbench run {framework}", {})
            r = result(framework, "eager", 0.1, 0.001)
            store.add(r.model_copy(update={"invocation_id": made}))
        first = store.invocations()[0]["invocation_id"]
    for flag in ("--invocation", "--run"):
        code, out, err = cli(["results", "--json", flag, first, "--db", str(db)], capsys)
        assert code == 0, err
        assert [r["invocation_id"] for r in json.loads(out)] == [first]
    code, _, err = cli(["results", "--invocation", first, "--run", "x", "--db", str(db)], capsys)
    assert code == 2 and "--run is the old name of --invocation" in err
    code, _, err = cli(["report", "--invocation", "nope", "--db", str(db)], capsys)
    assert code == 2 and "holds no results for invocation nope" in err
    code, out, _ = cli(["results", "--help"], capsys)
    assert "--invocation" in out and "--run" not in out


def test_a_schema_11_database_gains_an_empty_task_dims_column_and_keeps_its_keys(
    tmp_path: Path,
) -> None:
    """Schema 12 added the task's own dimensions; every result before it was of a task
    without any (NULL), and its case still has the key it was stored under."""
    db = fixture_db(tmp_path, 11)
    with ResultStore(db) as store:
        rows = store.con.execute("SELECT case_key, task_dims FROM results").fetchall()
        back = store.results()
    assert len(rows) == 2 and all(dims is None for _, dims in rows)
    assert sorted(r.case.key() for r in back) == sorted(key for key, _ in rows)
    assert all(r.case.task_dims is None and r.schema_version == 11 for r in back)


def test_a_schema_12_database_gains_an_empty_figures_column_and_reads_as_before(
    tmp_path: Path,
) -> None:
    """Schema 13 added the task's own figures; every result before it was of a task that
    reports its step time only: NULL, read as no figures, its verdicts on the step time."""
    db = fixture_db(tmp_path, 12)
    with ResultStore(db) as store:
        rows = store.con.execute("SELECT case_key, figures FROM results").fetchall()
        back = store.results()
    assert len(rows) == 2 and all(figures is None for _, figures in rows)
    assert sorted(r.case.key() for r in back) == sorted(key for key, _ in rows)
    for r in back:
        assert r.measurement is not None and r.measurement.figures == {}
        assert r.verdict_figure == "step_time_s" and r.schema_version == 12
        assert all(run.figures == {} for run in r.measurement.runs)


def test_a_schema_14_serving_point_gains_an_empty_group_and_reads_unpaired(
    tmp_path: Path,
) -> None:
    """Schema 15 added the serving points' group; a point stored before it was read
    unpaired, and still is (NULL group)."""
    db = fixture_db(tmp_path, 14)
    with ResultStore(db) as store:
        rows = store.con.execute("SELECT group_id FROM serving").fetchall()
        points = store.serving()
    assert rows == [(None,)]
    assert len(points) == 1 and points[0].served.group_id is None and points[0].status == "ok"


def test_a_serving_point_of_schema_19_is_one_record_with_its_serving_part(
    tmp_path: Path,
) -> None:
    """Before schema 20 a serving point was a record of its own, its scenario's fields
    beside the case's. The migration rewrites the stored record; its old JSON form
    (`serve --json`, a file kept for import) reads as the same result."""
    from fwbench.result import Result
    from fwbench.store.imports import read_records

    db = fixture_db(tmp_path, 19)
    con = duckdb.connect(str(db))
    (text,) = con.execute("SELECT record FROM serving").fetchone() or ()
    con.close()
    old = json.loads(text)
    assert "spec" in old and "serving" not in old  # the shape before version 20
    with ResultStore(db) as store:
        (point,) = store.serving()
        (stored,) = store.con.execute("SELECT record FROM serving").fetchone() or ()
        assert len(store.results()) == 2  # the cases', unchanged
    assert isinstance(point, Result) and point.measurement is None
    assert point.status == "ok" and point.schema_version == 19
    served = point.served
    assert served.spec.scenario == "single_stream" and len(served.runs) == 2
    assert served.validity == "VALID" and served.latency("90.00") is not None
    rewritten = json.loads(stored)
    assert "spec" not in rewritten and rewritten["serving"]["point_key"] == old["point_key"]
    # The old `serve --json` form: the case flat, the point's fields beside it.
    case = old.pop("case")
    kept = tmp_path / "kept.json"
    kept.write_text(json.dumps([{**case, **old}]))
    (imported,) = read_records(kept)
    assert imported == point
    # ... and today's: one record, its part under `serving`.
    assert Result.from_record(point.to_record()) == point
    assert "step_time_s" in point.to_record() and point.to_record()["step_time_s"] is None


def test_an_empty_record_is_not_taken_for_a_newer_fwbench(tmp_path: Path) -> None:
    """Importing {} said "a newer fwbench wrote it?" (issue 43, defect 9)."""
    from fwbench.errors import StoreError
    from fwbench.store.imports import read_records

    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    with pytest.raises(StoreError, match="schema_version: missing; not a record fwbench wrote"):
        read_records(empty)


def test_a_schema_16_database_gains_its_settings_typed_and_its_verdicts_read_as_before(
    tmp_path: Path,
) -> None:
    """Schema 17 split the untyped timing_config into the settings of each reader: how
    each run was timed, how many runs and when they stopped, and how verdicts read
    them. Every setting a row recorded is kept; the band, new, is the 2% it always was."""
    from fwbench.measure.verdicts import Looks, Reading, comparison_of

    db = fixture_db(tmp_path, 16)
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT result_id, timing_config FROM results").fetchall()
    old = {result_id: json.loads(text) for result_id, text in rows}
    con.close()
    with ResultStore(db) as store:
        columns = [c for c, *_ in store.con.execute("DESCRIBE results").fetchall()]
        back = {r.result_id: r for r in store.results()}
    at = columns.index("run_timing")
    assert "timing_config" not in columns and columns[at : at + 3] == [
        "run_timing",
        "run_plan",
        "reading",
    ]
    assert set(back) == set(old) and len(back) == 2
    for result_id, r in back.items():
        recorded = old[result_id]
        kept = {**r.run_timing.model_dump(), **r.run_plan.model_dump()}
        assert kept | {"estimator": r.reading.estimator} == recorded
        assert r.reading == Reading(estimator=recorded["estimator"], band=0.02)
        assert r.looks == Looks(2, 2)
    verdict = comparison_of({r.case.framework: r for r in back.values()}).verdict()
    assert verdict is not None and verdict.band == 0.02 and verdict.runs == (2, 2)


def test_a_record_from_before_a_setting_existed_reads_as_it_was_measured() -> None:
    """A setting a record's version lacked reads as what measuring without it meant: the
    median (before the estimator), runs that stopped on their precision (before stop_on),
    one untimed step after a switch (before min_switch_warm_s)."""
    from fwbench.result import settings_of_old

    v9 = settings_of_old({"min_runs": 3, "max_runs": 10, "target_ci": 0.02, "max_time_s": 10})
    assert v9.reading.estimator == "median" and v9.plan.looks is None
    assert v9.run.min_switch_warm_s == 0.0 and not v9.run.compile_cache
    v14 = settings_of_old({"stop_on": "verdict", "min_runs": 3, "max_runs": 10, "estimator": "p25"})
    assert v14.reading.estimator == "p25" and v14.plan.looks is not None


def test_a_parameter_count_of_none_reads_back_as_some_none(tmp_path: Path) -> None:
    """One framework counting no parameters is an infinite difference; stored as JSON
    text it was written null, and read back as "no other framework to compare"."""
    from fwbench.models.parity import check

    made = result("torch", "eager", 0.1, 0.001).model_copy(
        update={"parity": check({"torch": 0, "tensorflow": 11_689_512})}
    )
    with ResultStore(tmp_path / "r.duckdb") as store:
        store.add(made)
        (back,) = store.results()
    assert back.parity == made.parity
    assert back.parity is not None and "some none: DIFFERENT WORK" in back.parity.describe()
