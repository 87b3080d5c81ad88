"""DuckDB schema of the results file, and its migrations.

The schema version and its history (the record's and these tables', version by version)
are in one place: fwbench.result. The tables of each version:
  1  meta, runs, results (one row per case result, every sample in a list column),
     param_counts (cache of trainable-parameter counts for the parity check).
  2  results gain memory / energy / work (JSON) and flat columns for SQL users
     (host_peak_bytes, device_peak_bytes, joules_per_sample, flops_per_step,
     achieved_flops); new table peaks (`fwbench peak` measurements).
  3  results gain breakdown (JSON): `fwbench explain`'s time per category.
  4  results gain the token and spectrogram dimensions (seq_len, vocab_size, freq_bins);
     param_counts is keyed by a model's dimensions as JSON (`dims`). It is a cache:
     the migration empties it and counts are made again when next needed.
  5  results gain how the numbers are computed: precision, layout, autotune (None = the
     defaults: fp32, the framework's native layout, autotuning off).
  6  results gain the data-parallel case fields (strategy, world_size), the global
     batch, the communication time per step (comm_s) and distributed (JSON).
  7  results gain runs (JSON: every worker process of the case, its samples and
     start-up), n_runs and ci_method. Rows of earlier versions read as one run each
     (n_runs 1, no runs list): their intervals are within one process.
  8  new table serving: one row per serving point (`fwbench serve`, a sweep with a
     `serve` key), its whole record as JSON and flat columns for SQL users.
  9  results gain tracked (JSON): results of trackers without a column of their own.
 10  results gain the case's framework options (`options`, e.g. "onednn=off"; NULL: the
     framework decided, as for every result before this version).
 11  "run" names a worker process only: the runs table (one row per command invocation)
     becomes invocations, and its run_id, and the run_id of results and serving, become
     invocation_id. Renamed in place: the rows, keys and column order stay.
 12  results gain the task's own dimensions (`task_dims`, e.g. "new_tokens=32"; NULL for
     a task without any, as for every result before this version).
 13  results gain figures (JSON: the task's own figures beyond the step time, each with
     its interval over runs, e.g. a generation's ttft_s and tpot_s; '{}' for train and
     infer, NULL before this version: read alike).
 14  results gain group_id: the id shared by the variants measured together in rounds
     (run i of each in round i), whose verdicts pair their runs by round; NULL for a
     case measured alone, and before this version (read unpaired).
 15  serving gains group_id: the same, for the serving points of one workload measured
     in rounds (NULL before this version: read unpaired).
 16  results gain a user's model: model_path, inputs, objective (NULL for the zoo's
     models, and before this version).
 17  results' timing_config (one JSON dict of every setting) becomes three typed JSON
     columns, by who reads them: run_timing, run_plan and reading (the estimator and the
     equivalence band). Each row's are made from its timing_config as
     fwbench.result.settings_of_old reads an exported record of its version.
 18  (no table changes: each run in results.runs may say it was made after its
     comparison was re-opened, `reopened`; absent before this version: read as false.)
 19  results gain dims (JSON: the case's model dimensions, name -> value, any a model
     declares). The five columns of the dimensions before it (input_size, num_classes,
     seq_len, vocab_size, freq_bins) stay, as flat copies for SQL users; each row's
     dims is made from them.
 20  (no table changes: each serving row's record is a Result's, its scenario's fields in
     its `serving` part; the records of earlier rows are rewritten so.)
A file written by an older fwbench is migrated forward on open by MIGRATIONS[v], which
takes a connection at version v to version v + 1 inside one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from typing import Any

from fwbench.result import invocation_id_of_old, settings_of_old
from fwbench.scenario.record import serving_of_old

# A new file is created at version 1 and migrated forward, so every migration runs
# on every new file.
CREATE_V1 = [
    "CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE runs (
        run_id VARCHAR PRIMARY KEY,
        started_at TIMESTAMP,
        command VARCHAR,
        host VARCHAR
    )""",
    """CREATE TABLE results (
        result_id VARCHAR PRIMARY KEY,
        run_id VARCHAR,
        case_key VARCHAR,
        recorded_at TIMESTAMP,
        schema_version INTEGER,
        framework VARCHAR,
        model VARCHAR,
        task VARCHAR,
        batch_size INTEGER,
        input_size INTEGER,
        num_classes INTEGER,
        device VARCHAR,
        mode VARCHAR,
        threads INTEGER,
        status VARCHAR,
        error VARCHAR,
        median_s DOUBLE,
        ci_low_s DOUBLE,
        ci_high_s DOUBLE,
        throughput DOUBLE,
        samples DOUBLE[],
        steps_per_block INTEGER,
        build_s DOUBLE,
        first_step_s DOUBLE,
        warmup_steps INTEGER,
        warmup_s DOUBLE,
        warmup_stop VARCHAR,
        stop_reason VARCHAR,
        sync_overhead_s DOUBLE,
        param_count BIGINT,
        parity VARCHAR,
        different_work BOOLEAN,
        warnings VARCHAR[],
        environment VARCHAR,
        settings VARCHAR,
        timing_config VARCHAR
    )""",
    "CREATE INDEX results_case_key ON results (case_key)",
    """CREATE TABLE param_counts (
        model VARCHAR,
        framework VARCHAR,
        framework_version VARCHAR,
        input_size INTEGER,
        num_classes INTEGER,
        params BIGINT,
        error VARCHAR,
        PRIMARY KEY (model, framework, framework_version, input_size, num_classes)
    )""",
]

V2 = [
    "ALTER TABLE results ADD COLUMN memory VARCHAR",
    "ALTER TABLE results ADD COLUMN energy VARCHAR",
    "ALTER TABLE results ADD COLUMN work VARCHAR",
    "ALTER TABLE results ADD COLUMN host_peak_bytes BIGINT",
    "ALTER TABLE results ADD COLUMN device_peak_bytes BIGINT",
    "ALTER TABLE results ADD COLUMN joules_per_sample DOUBLE",
    "ALTER TABLE results ADD COLUMN flops_per_step DOUBLE",
    "ALTER TABLE results ADD COLUMN achieved_flops DOUBLE",
    """CREATE TABLE peaks (
        peak_id VARCHAR PRIMARY KEY,
        measured_at TIMESTAMP,
        host_key VARCHAR,
        framework VARCHAR,
        device VARCHAR,
        dtype VARCHAR,
        threads INTEGER,
        n INTEGER,
        flops_per_s DOUBLE,
        median_s DOUBLE,
        ci_low_s DOUBLE,
        ci_high_s DOUBLE,
        environment VARCHAR
    )""",
]


def _to_v2(con: Any) -> None:
    for sql in V2:
        con.execute(sql)


def _to_v3(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN breakdown VARCHAR")


def _to_v4(con: Any) -> None:
    for dim in ("seq_len", "vocab_size", "freq_bins"):
        con.execute(f"ALTER TABLE results ADD COLUMN {dim} INTEGER")
    con.execute("DROP TABLE param_counts")
    con.execute(
        """CREATE TABLE param_counts (
            model VARCHAR,
            framework VARCHAR,
            framework_version VARCHAR,
            dims VARCHAR,
            params BIGINT,
            error VARCHAR,
            PRIMARY KEY (model, framework, framework_version, dims)
        )"""
    )


def _to_v5(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN precision VARCHAR")
    con.execute("ALTER TABLE results ADD COLUMN layout VARCHAR")
    con.execute("ALTER TABLE results ADD COLUMN autotune BOOLEAN")


def _to_v6(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN strategy VARCHAR")
    con.execute("ALTER TABLE results ADD COLUMN world_size INTEGER")
    con.execute("ALTER TABLE results ADD COLUMN global_batch_size INTEGER")
    con.execute("ALTER TABLE results ADD COLUMN comm_s DOUBLE")
    con.execute("ALTER TABLE results ADD COLUMN distributed VARCHAR")
    # Every result before this version ran one replica: its global batch is its batch.
    con.execute("UPDATE results SET global_batch_size = batch_size")


def _to_v7(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN runs VARCHAR")
    con.execute("ALTER TABLE results ADD COLUMN n_runs INTEGER")
    con.execute("ALTER TABLE results ADD COLUMN ci_method VARCHAR")
    con.execute("UPDATE results SET n_runs = 1 WHERE median_s IS NOT NULL")


def _to_v8(con: Any) -> None:
    con.execute(
        """CREATE TABLE serving (
            result_id VARCHAR PRIMARY KEY,
            run_id VARCHAR,
            point_key VARCHAR,
            recorded_at TIMESTAMP,
            framework VARCHAR,
            model VARCHAR,
            mode VARCHAR,
            batch_size INTEGER,
            device VARCHAR,
            threads INTEGER,
            precision VARCHAR,
            scenario VARCHAR,
            target_qps DOUBLE,
            latency_bound_ms DOUBLE,
            percentile DOUBLE,
            max_wait_ms DOUBLE,
            duration_s DOUBLE,
            status VARCHAR,
            validity VARCHAR,
            p50_s DOUBLE,
            p90_s DOUBLE,
            p99_s DOUBLE,
            samples_per_s DOUBLE,
            max_qps DOUBLE,
            record VARCHAR
        )"""
    )


def _to_v9(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN tracked VARCHAR")


def _to_v10(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN options VARCHAR")


def _altering_results(con: Any, statement: str) -> None:
    """Alter a column of the results table. DuckDB refuses to alter a column of a table
    with an index ("entries that depend on it"): the table's indexes (ours, and any of
    the user's) are dropped for it and made again from their own statements."""
    indexes = con.execute(
        "SELECT index_name, sql FROM duckdb_indexes() "
        "WHERE schema_name = 'main' AND table_name = 'results'"
    ).fetchall()
    for name, _ in indexes:
        con.execute(f'DROP INDEX "{name}"')
    con.execute(statement)
    for _, sql in indexes:
        con.execute(sql)


def _to_v11(con: Any) -> None:
    con.execute("ALTER TABLE runs RENAME TO invocations")
    con.execute("ALTER TABLE invocations RENAME COLUMN run_id TO invocation_id")
    _altering_results(con, "ALTER TABLE results RENAME COLUMN run_id TO invocation_id")
    con.execute("ALTER TABLE serving RENAME COLUMN run_id TO invocation_id")


def _to_v12(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN task_dims VARCHAR")


def _to_v13(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN figures VARCHAR")


def _to_v14(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN group_id VARCHAR")


def _to_v15(con: Any) -> None:
    con.execute("ALTER TABLE serving ADD COLUMN group_id VARCHAR")


def _to_v16(con: Any) -> None:
    for column in ("model_path", "inputs", "objective"):
        con.execute(f"ALTER TABLE results ADD COLUMN {column} VARCHAR")


def _to_v17(con: Any) -> None:
    for column in ("run_timing", "run_plan", "reading"):
        con.execute(f"ALTER TABLE results ADD COLUMN {column} VARCHAR")
    rows = con.execute("SELECT result_id, timing_config FROM results").fetchall()
    typed = []
    for result_id, text in rows:
        settings = settings_of_old(json.loads(text) if text else {})
        parts = (settings.run, settings.plan, settings.reading)
        typed.append([*(part.model_dump_json() for part in parts), result_id])
    if typed:
        con.executemany(
            "UPDATE results SET run_timing = ?, run_plan = ?, reading = ? WHERE result_id = ?",
            typed,
        )
    _altering_results(con, "ALTER TABLE results DROP COLUMN timing_config")


def _to_v18(con: Any) -> None:
    """Nothing to alter: a run's `reopened` is a key of the runs JSON, absent (false) in
    rows of earlier versions."""


_OLD_DIMENSIONS = ("input_size", "seq_len", "vocab_size", "freq_bins", "num_classes")


def _to_v19(con: Any) -> None:
    con.execute("ALTER TABLE results ADD COLUMN dims VARCHAR")
    rows = con.execute(f"SELECT result_id, {', '.join(_OLD_DIMENSIONS)} FROM results").fetchall()
    made = []
    for result_id, *values in rows:
        dims = {n: v for n, v in zip(_OLD_DIMENSIONS, values, strict=True) if v is not None}
        made.append([json.dumps(dict(sorted(dims.items()))), result_id])
    if made:
        con.executemany("UPDATE results SET dims = ? WHERE result_id = ?", made)


def _to_v20(con: Any) -> None:
    rows = con.execute("SELECT result_id, record FROM serving").fetchall()
    made = []
    for result_id, text in rows:
        try:
            record = json.loads(text)
        except (TypeError, ValueError):
            continue  # damaged: left as it is, and left out when read (ResultStore._read_row)
        if isinstance(record, dict):
            made.append([json.dumps(serving_of_old(invocation_id_of_old(record))), result_id])
    if made:
        con.executemany("UPDATE serving SET record = ? WHERE result_id = ?", made)


# version v -> function migrating a connection from v to v + 1
MIGRATIONS: dict[int, Callable[[Any], None]] = {
    1: _to_v2,
    2: _to_v3,
    3: _to_v4,
    4: _to_v5,
    5: _to_v6,
    6: _to_v7,
    7: _to_v8,
    8: _to_v9,
    9: _to_v10,
    10: _to_v11,
    11: _to_v12,
    12: _to_v13,
    13: _to_v14,
    14: _to_v15,
    15: _to_v16,
    16: _to_v17,
    17: _to_v18,
    18: _to_v19,
    19: _to_v20,
}


@cache
def tables_of(version: int) -> dict[str, tuple[str, ...]]:
    """The tables of a results file at `version` and their columns, as the migrations make
    them (built in memory: what a file of that version must hold)."""
    import duckdb  # here: importing the store costs no DuckDB until a file is read

    con = duckdb.connect(":memory:")
    try:
        for sql in CREATE_V1:
            con.execute(sql)
        for v in range(1, version):
            MIGRATIONS[v](con)
        return columns_of(con)
    finally:
        con.close()


def columns_of(con: Any) -> dict[str, tuple[str, ...]]:
    """The tables a connection's database holds, each with its columns in order."""
    rows = con.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall()
    found: dict[str, tuple[str, ...]] = {}
    for table, column in rows:
        found[table] = (*found.get(table, ()), column)
    return found


def damage(found: dict[str, tuple[str, ...]], version: int) -> str | None:
    """What is wrong with a file's tables (`columns_of`) for the schema version its meta
    table states, as one phrase, or None. Tables and columns of the user's own beside
    ours are left alone, unless a later version's migration would add them (a file whose
    stated version is older than its tables)."""
    later = tables_of(max(MIGRATIONS) + 1)
    for table, wanted in tables_of(version).items():
        if table not in found:
            return f"its {table} table is missing"
        # Columns of a later schema first: a column a later version renamed is also
        # missing under its old name, and the later one says what happened.
        ahead = [c for c in found[table] if c not in wanted and c in later.get(table, ())]
        if ahead:
            return (
                f"its {table} table has column {', '.join(ahead)} of a schema after the "
                f"version {version} its meta table states"
            )
        missing = [c for c in wanted if c not in found[table]]
        if missing:
            return f"its {table} table lacks column {', '.join(missing)}"
    ahead = [t for t in found if t in later and t not in tables_of(version)]
    if ahead:
        return (
            f"it has table {', '.join(ahead)} of a schema after the version {version} "
            "its meta table states"
        )
    return None
