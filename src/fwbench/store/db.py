"""ResultStore: open (create, migrate), write one result per transaction, read back."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from pydantic import ValidationError

from fwbench.case import Case, validation_message
from fwbench.errors import StoreError
from fwbench.outputs import database_of
from fwbench.result import (
    SCHEMA_VERSION,
    Measurement,
    Result,
    Run,
    StepTime,
)
from fwbench.store import columns, interrupts, schema, snapshot
from fwbench.store.rescue import Rescue
from fwbench.store.schema import CREATE_V1, MIGRATIONS
from fwbench.store.snapshot import Snapshot

if TYPE_CHECKING:
    import duckdb

_Row = TypeVar("_Row")
_Read = TypeVar("_Read")
_Given = TypeVar("_Given", "Row", Result)

# Rows per INSERT of a bulk write: large enough that DuckDB, not Python, does the work.
BULK_ROWS = 10_000
INVOCATION_COLUMNS = ["invocation_id", "started_at", "command", "host"]


class WriteFailed(StoreError):
    """A write that did not reach the disk (full, read-only, gone); rolled back."""

    def __init__(self, path: Path, exc: Exception) -> None:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if ".wal" in text and ("denied" in text or "not permitted" in text):
            message = _unwritable(path)
            self.why = "its directory is not writable"
        else:
            message = f"cannot write results file {path}: {text}"
            self.why = _short_reason(text)
        super().__init__(message)


def _short_reason(text: str) -> str:
    """The operating system's reason at the end of DuckDB's message, else the message."""
    for reason in ("No space left on device", "Read-only file system", "Disk quota exceeded"):
        if reason in text:
            return reason
    return text


class Row(NamedTuple):
    """A result as the results table stores it, with what its invocation's row needs."""

    result_id: str
    invocation_id: str
    recorded_at: datetime
    host: str  # the host it ran on, as JSON
    values: tuple[Any, ...]  # in the order of columns.names()

    @classmethod
    def of(cls, r: Result) -> Row:
        host = json.dumps(r.environment.get("host", {}), default=str)
        values = tuple(columns.row(r).values())
        return cls(r.result_id, r.invocation_id, r.recorded_at, host, values)


class ResultStore:
    """One DuckDB file. Use as a context manager; one writer process at a time."""

    def __init__(
        self,
        path: Path | str,
        read_only: bool = False,
        on_skip: Callable[[str], None] | None = None,
        on_snapshot: Callable[[str], None] | None = None,
    ) -> None:
        """`on_snapshot`, for a reader (read_only): a file another process is writing (a
        sweep) is read through a copy taken now (store/snapshot.py), said through it in
        one line; without it, such a file is refused as in use."""
        self.path = Path(path)
        # The file DuckDB opens: the database, or the copy of it a snapshot made.
        self._file = self.path
        self.snapshot: Snapshot | None = None
        # Damaged rows left out of a read (_read_row), each said once through on_skip.
        self.skipped: list[str] = []
        self.on_skip = on_skip
        owner = database_of(self.path)
        if owner is not None:
            # Opened as a database, DuckDB would rewrite another database's log, or create
            # one there that the other would replay as its log.
            raise StoreError(
                f"{self.path} is the log DuckDB keeps beside the database {owner}, not a "
                f"results file; pass the database itself (--db {owner})"
            )
        if read_only and not self.path.exists():
            raise StoreError(f"no results file at {self.path}; run a case or pass --db PATH")
        _refuse_foreign(self.path)
        if not read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create results file {self.path}: {exc.strerror or exc}"
                ) from None
        if not read_only:
            self._check_writable()
        # Records this store could not write (a full disk), kept in a file for import.
        self.rescue = Rescue(self.path)
        try:
            self.con = self._connect(read_only)
        except Locked as exc:
            if not read_only or on_snapshot is None:
                raise
            self.snapshot = snapshot.take(self.path, str(exc))
            self._file = self.snapshot.path
            try:
                self.con = self._connect(read_only)
            except BaseException:
                self.snapshot.remove()
                raise
            on_snapshot(self.snapshot.note(exc.holder))
        try:
            if read_only and self._needs_migration():
                # A file from an older fwbench is migrated on first read, as on write (a
                # snapshot's copy, not the file its writer holds).
                self.con.close()
                if self.snapshot is None:
                    self._check_writable("it was written by an older fwbench and must be migrated")
                self.con = self._connect(read_only=False)
                self._ensure_schema(read_only=False)
                self.con.close()
                self.con = self._connect(read_only=True)
            self._ensure_schema(read_only)
        except BaseException:
            self.close()
            raise

    def _check_writable(self, why: str = "") -> None:
        """Refuse up front a file DuckDB could open but not write: it writes a log
        (FILE.wal) beside the file, so the directory must be writable, not only the file.
        Checked by access(2), which also sees an immutable directory (as root)."""
        parent = self.path.parent
        if not os.access(parent, os.W_OK | os.X_OK):
            raise StoreError(_unwritable(self.path, why))

    def _connect(self, read_only: bool) -> Any:
        # DuckDB loads when a file is opened: the CLI's help and its bad-input errors
        # import this module without opening one.
        import duckdb

        try:
            # Without replacement scans a missing table is an error, not whichever Python
            # variable of the caller happens to have its name.
            config: dict[str, Any] = {"python_enable_replacements": False}
            interrupts.install()
            con = duckdb.connect(str(self._file), read_only=read_only, config=config)
            return interrupts.Guarded(con)
        except duckdb.Error as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if "lock" in text.lower():
                raise Locked(self.path, text) from None
            raise StoreError(_open_error(self.path, exc)) from None

    def _needs_migration(self) -> bool:
        version = self._version()
        return version is not None and version < SCHEMA_VERSION

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            if self.snapshot is not None:
                self.snapshot.remove()

    # schema ---------------------------------------------------------------

    def _version(self) -> int | None:
        tables = {
            r[0]
            for r in self.con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
        if "meta" not in tables:
            if tables:
                raise StoreError(f"{self.path} is a DuckDB file but not an fwbench results file")
            return None
        row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            raise StoreError(
                f"{self.path} has no schema version; it is not an fwbench results file"
            )
        try:
            return int(row[0])
        except ValueError:
            raise StoreError(
                f"{self.path} has schema version {row[0]!r}, not a number; the file is damaged"
            ) from None

    def _ensure_schema(self, read_only: bool) -> None:
        version = self._version()
        if version is not None and version <= SCHEMA_VERSION:
            # A damaged file is named here, not by the first query or migration it breaks.
            found = schema.damage(schema.columns_of(self.con), version)
            if found:
                raise StoreError(f"{self.path} is damaged: {found}")
        if version is None:
            if read_only:
                raise StoreError(f"{self.path} holds no fwbench results")
            self._transaction(
                [(sql, None) for sql in CREATE_V1]
                + [("INSERT INTO meta VALUES ('schema_version', '1')", None)]
            )
            version = 1
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer fwbench (schema {version}, this one reads "
                f"up to {SCHEMA_VERSION}); upgrade fwbench"
            )
        if version < SCHEMA_VERSION:
            for v in range(version, SCHEMA_VERSION):
                self.con.begin()
                try:
                    MIGRATIONS[v](self.con)
                    self.con.execute(
                        "UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(v + 1)]
                    )
                except BaseException:
                    self.con.rollback()
                    raise
                self._commit()

    def _transaction(self, statements: Iterable[tuple[str, list[Any] | None]]) -> None:
        import duckdb

        self.con.begin()
        try:
            for sql, params in statements:
                self.con.execute(sql, params)
        except duckdb.IOException as exc:
            with contextlib.suppress(duckdb.Error):
                self.con.rollback()
            raise WriteFailed(self.path, exc) from None
        except BaseException:
            self.con.rollback()
            raise
        self._commit()

    def _commit(self) -> None:
        """Commit, or a StoreError when the write cannot reach the disk (the directory
        turned read-only, the disk is full); the transaction is then rolled back."""
        import duckdb

        try:
            self.con.commit()
        except (duckdb.IOException, duckdb.TransactionException) as exc:
            with contextlib.suppress(duckdb.Error):
                self.con.rollback()
            raise WriteFailed(self.path, exc) from None

    # writing --------------------------------------------------------------

    def start_invocation(self, command: str, host: dict[str, Any]) -> str:
        """Record one command invocation (its command line and host); returns its id,
        which every result it stores carries."""
        invocation_id = uuid.uuid4().hex[:12]
        self._transaction(
            [
                (
                    "INSERT INTO invocations VALUES (?, ?, ?, ?)",
                    [invocation_id, datetime.now(), command, json.dumps(host)],
                )
            ]
        )
        return invocation_id

    def add(self, result: Result) -> None:
        """Store one result atomically, in place of the one stored under its result_id
        (the same case's runs so far): a killed sweep loses at most the run in flight.
        A write that fails (a full disk) keeps the record in `rescue` instead."""
        row = columns.row(result)
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self._keep(
            result.result_id,
            result.to_record,
            [
                ("DELETE FROM results WHERE result_id = ?", [result.result_id]),
                (f"INSERT INTO results ({cols}) VALUES ({marks})", list(row.values())),
            ],
        )

    def _keep(
        self,
        result_id: str,
        record: Callable[[], dict[str, Any]],
        statements: list[tuple[str, list[Any] | None]],
    ) -> None:
        """Run a result's transaction; if the write fails, the record goes to `rescue`
        (store/rescue.py) and the command goes on. A record rescued earlier that now
        reached the database leaves the rescue file."""
        try:
            self._transaction(statements)
        except WriteFailed as exc:
            self.rescue.keep(result_id, record(), exc.why)
            return
        if result_id in self.rescue.records:
            # The newest version is in the database; the rescued copy is older.
            del self.rescue.records[result_id]

    def add_many(
        self,
        results: Iterable[Result],
        command: str,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Store results made elsewhere (an import) in one transaction; those already here
        (same result_id) are skipped, unless the one given is further along (more runs, or
        ended where the stored one is unfinished), which then takes its place. Returns how
        many were added or replaced; `progress` hears how many more rows were written
        after each batch of them."""
        return self.add_rows([Row.of(r) for r in results], command, progress)

    def add_rows(
        self,
        rows: Sequence[Row],
        command: str,
        progress: Callable[[int], None] | None = None,
        serving: Sequence[Result] = (),
    ) -> int:
        """`add_many` of results already made rows (Row.of): an import of many holds its
        rows, which take less memory than the Results they were made from.

        Rows go in by column, BULK_ROWS at a time (INSERT ... SELECT unnest of one list
        per column): a statement per row made 100k records take minutes. Serving points
        (`serving`) go in the same transaction, those already here skipped or replaced
        likewise."""
        stored = self.con.execute("SELECT result_id, stop_reason, n_runs FROM results").fetchall()
        here = {rid: _progress(reason, runs) for rid, reason, runs in stored}
        known = {r[0] for r in self.con.execute("SELECT invocation_id FROM invocations").fetchall()}
        # A record of the same result further along (more runs, or the case's end where
        # the stored one is unfinished: a rescue file's, kept when the disk filled after
        # an earlier version of it was stored) takes the stored one's place.
        at = {name: i for i, name in enumerate(columns.names())}

        def row_progress(r: Row) -> tuple[bool, int]:
            return _progress(r.values[at["stop_reason"]], r.values[at["n_runs"]])

        # One result given twice (an export and a rescue file of one sweep) is kept as
        # its furthest copy, whichever file came last.
        incoming = _furthest(rows, row_progress)
        further = {
            rid for rid, r in incoming.items() if rid in here and row_progress(r) > here[rid]
        }
        new = [r for rid, r in incoming.items() if rid not in here or rid in further]
        points_in = _furthest(serving, _served_progress)
        served = dict(
            self.con.execute(
                "SELECT result_id, record FROM serving WHERE list_contains(?, result_id)",
                [list(points_in)],
            ).fetchall()
        )
        points_further = {
            rid
            for rid, record in served.items()
            if _served_progress(points_in[rid]) > _stored_progress(record)
        }
        points = [p for rid, p in points_in.items() if rid not in served or rid in points_further]
        invocations: list[list[Any]] = []
        firsts = [(r.invocation_id, r.recorded_at, r.host) for r in new]
        firsts += [
            (p.invocation_id, p.recorded_at, json.dumps(p.environment.get("host", {}), default=str))
            for p in points
        ]
        for invocation_id, recorded_at, host in firsts:
            if invocation_id not in known:
                known.add(invocation_id)
                invocations.append([invocation_id, recorded_at, command, host])
        self.con.begin()
        try:
            for rid in further:
                self.con.execute("DELETE FROM results WHERE result_id = ?", [rid])
            for rid in points_further:
                self.con.execute("DELETE FROM serving WHERE result_id = ?", [rid])
            for point in points:
                row = _serving_row(point)
                cols, marks = ", ".join(row), ", ".join("?" for _ in row)
                self.con.execute(
                    f"INSERT INTO serving ({cols}) VALUES ({marks})", list(row.values())
                )
            for start in range(0, len(invocations), BULK_ROWS):
                chunk = invocations[start : start + BULK_ROWS]
                _insert_columns(self.con, "invocations", INVOCATION_COLUMNS, chunk)
            for start in range(0, len(new), BULK_ROWS):
                chunk = [list(r.values) for r in new[start : start + BULK_ROWS]]
                _insert_columns(self.con, "results", columns.names(), chunk)
                if progress is not None:
                    progress(len(chunk))
        except BaseException:
            self.con.rollback()
            raise
        self._commit()
        return len(new) + len(points)

    def put_param_count(
        self, key: tuple[str, str, str, str], params: int | None, error: str | None
    ) -> None:
        """Cache a count under (model, framework, framework version, dims as JSON)."""
        self._transaction(
            [
                (
                    "INSERT OR REPLACE INTO param_counts VALUES (?, ?, ?, ?, ?, ?)",
                    [*key, params, error],
                )
            ]
        )

    def add_peak(self, peak: dict[str, Any]) -> None:
        cols = ", ".join(peak)
        marks = ", ".join("?" for _ in peak)
        self._transaction([(f"INSERT INTO peaks ({cols}) VALUES ({marks})", list(peak.values()))])

    def add_serving(self, result: Result) -> None:
        """Store one serving point atomically (its record, and flat columns derived from
        it), in place of the one stored under its result_id (its runs so far)."""
        row = _serving_row(result)
        cols, marks = ", ".join(row), ", ".join("?" for _ in row)
        self._keep(
            result.result_id,
            result.to_record,
            [
                ("DELETE FROM serving WHERE result_id = ?", [result.result_id]),
                (f"INSERT INTO serving ({cols}) VALUES ({marks})", list(row.values())),
            ],
        )

    # reading --------------------------------------------------------------

    def _read_row(
        self, table: str, row_id: Any, read: Callable[[_Row], _Read], row: _Row
    ) -> _Read | None:
        """`read(row)`, or None for a damaged row (a cell edited or cut by hand: invalid
        JSON, a value no result can have), said once through `on_skip` and kept in
        `skipped`: one bad row never hides the others, which stay readable and
        exportable. A row is validated as an import validates a record."""
        try:
            return read(row)
        except ValidationError as exc:
            why = validation_message(exc)
        except (ValueError, TypeError, KeyError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        message = f"{self.path}: {table} row {row_id!r} is damaged ({why}); it is left out"
        if message not in self.skipped:
            self.skipped.append(message)
            if self.on_skip is not None:
                self.on_skip(message)
        return None

    def serving(self, invocation_id: str | None = None) -> list[Result]:
        sql = "SELECT record, result_id FROM serving"
        params: list[Any] = []
        if invocation_id is not None:
            sql += " WHERE invocation_id = ?"
            params.append(invocation_id)
        rows = self.con.execute(sql + " ORDER BY recorded_at, result_id", params).fetchall()
        found = (self._read_row("serving", r[1], Result.model_validate_json, r[0]) for r in rows)
        return [r for r in found if r is not None]

    def best_peak(self, host_key: str, device: str, dtype: str, threads: int) -> float | None:
        """The machine's attainable FLOP/s: the best any framework reached here.

        CPU peaks are per thread count; a GPU's does not depend on the host threads.
        """
        query = "SELECT max(flops_per_s) FROM peaks WHERE host_key = ? AND device = ? AND dtype = ?"
        params: list[Any] = [host_key, device, dtype]
        if device == "cpu":
            query += " AND threads = ?"
            params.append(threads)
        row = self.con.execute(query, params).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def peaks(self) -> list[dict[str, Any]]:
        cur = self.con.execute("SELECT * FROM peaks ORDER BY measured_at")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def recorded_keys(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT DISTINCT case_key FROM results").fetchall()}

    def param_count(self, key: tuple[str, str, str, str]) -> tuple[int | None, str | None] | None:
        row = self.con.execute(
            "SELECT params, error FROM param_counts WHERE model = ? AND framework = ? "
            "AND framework_version = ? AND dims = ?",
            list(key),
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def results(
        self, invocation_id: str | None = None, case_keys: Iterable[str] | None = None
    ) -> list[Result]:
        sql = "SELECT * FROM results"
        params: list[Any] = []
        if invocation_id is not None:
            sql += " WHERE invocation_id = ?"
            params.append(invocation_id)
        sql += " ORDER BY recorded_at, result_id"
        cur = self.con.execute(sql, params)
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        found = (self._read_row("results", r["result_id"], _from_row, r) for r in rows)
        results = [r for r in found if r is not None]
        if case_keys is not None:
            keys = set(case_keys)
            results = [r for r in results if r.case_key in keys]
        return results

    def latest(self, case_keys: Iterable[str]) -> list[Result]:
        """The most recent result of each of `case_keys` that is stored, in their order."""
        keys = list(case_keys)
        by_key: dict[str, Result] = {}
        for r in self.results(case_keys=keys):
            by_key[r.case_key] = r
        return [by_key[k] for k in keys if k in by_key]

    def invocations(self) -> list[dict[str, Any]]:
        cur = self.con.execute(
            "SELECT invocation_id, started_at, command FROM invocations ORDER BY started_at"
        )
        return [
            {"invocation_id": r[0], "started_at": r[1], "command": r[2]} for r in cur.fetchall()
        ]


def _furthest(
    items: Iterable[_Given], progress: Callable[[_Given], tuple[bool, int]]
) -> dict[str, _Given]:
    """Each result id's furthest copy (the first of equals)."""
    found: dict[str, _Given] = {}
    for item in items:
        kept = found.get(item.result_id)
        if kept is None or progress(item) > progress(kept):
            found[item.result_id] = item
    return found


def _progress(stop_reason: str | None, runs: int | None) -> tuple[bool, int]:
    """How far a case's record is: ended (anything but a run cut short), and its runs."""
    return (stop_reason != "unfinished", runs or 0)


def _served_progress(r: Result) -> tuple[bool, int]:
    """How far a serving point's record is: ended, and its runs."""
    served = r.serving
    return (not (served and served.unfinished), len(served.runs) if served else 0)


def _stored_progress(record: str) -> tuple[bool, int]:
    """A stored serving point's progress; one that does not read as a record of this
    version is kept as it is (never replaced)."""
    try:
        return _served_progress(Result.model_validate_json(record))
    except ValidationError:
        return (True, 1 << 62)


def _serving_row(r: Result) -> dict[str, Any]:
    s = r.served
    server = s.spec.scenario == "server" or None  # the server's settings, else NULL

    def p(name: str) -> float | None:
        found = s.latency(name)
        return found.value if found else None

    return {
        "result_id": r.result_id,
        "invocation_id": r.invocation_id,
        "point_key": s.point_key,
        "recorded_at": r.recorded_at,
        "framework": r.case.framework,
        "model": r.case.model,
        "mode": r.case.mode,
        "batch_size": r.case.batch_size,
        "device": r.case.device,
        "threads": r.case.threads,
        "precision": r.case.precision or "fp32",
        "scenario": s.spec.scenario,
        "target_qps": s.spec.target_qps,
        "latency_bound_ms": server and s.spec.bound_s * 1e3,
        "percentile": server and s.spec.bound_percentile,
        "max_wait_ms": server and s.spec.wait_s * 1e3,
        "duration_s": s.spec.duration_s,
        "status": r.status,
        "validity": s.validity,
        "p50_s": p("50.00"),
        "p90_s": p("90.00"),
        "p99_s": p("99.00"),
        "samples_per_s": s.samples_per_s.value if s.samples_per_s else None,
        "max_qps": s.max_qps.value if s.max_qps else None,
        "group_id": s.group_id,
        "record": r.model_dump_json(),
    }


def _insert_columns(con: Any, table: str, names: Sequence[str], rows: list[list[Any]]) -> None:
    """Insert `rows` (values in the order of `names`) in one statement, a list per column."""
    if not rows:
        return
    unnested = ", ".join(f"unnest(${i})" for i in range(1, len(names) + 1))
    by_column = [list(values) for values in zip(*rows, strict=True)]
    con.execute(f"INSERT INTO {table} ({', '.join(names)}) SELECT {unnested}", by_column)


def _unwritable(path: Path, why: str = "") -> str:
    because = f" ({why})" if why else ""
    return (
        f"cannot write results file {path}{because}: its directory {path.parent} is not "
        f"writable, and DuckDB writes its log {path.name}.wal beside the file; make the "
        "directory writable or pass --db PATH elsewhere"
    )


# What a file that is not a DuckDB database holds, by its first bytes: DuckDB would try
# to read it through an extension (downloading SQLite's from the network), or fail with
# a message about itself.
_FOREIGN: tuple[tuple[bytes, str], ...] = (
    (b"SQLite format 3\x00", "a SQLite database"),
    (b"PK\x03\x04", "a zip archive"),
    (b"PAR1", "a Parquet file (fwbench export writes those: `fwbench import` reads JSON)"),
)


def _refuse_foreign(path: Path) -> None:
    """Refuse an existing, non-empty file that is not a DuckDB database, naming what it
    is where its first bytes say: never hand DuckDB a SQLite file (it would fetch an
    extension) or a JSON export (it says "Catalog Error" in read-only mode)."""
    if not path.is_file():
        return
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError:
        return  # unreadable: opening it says so
    if not head or head[8:12] == b"DUCK":
        return
    what = next((name for magic, name in _FOREIGN if head.startswith(magic)), None)
    if what is None:
        text = head.lstrip()[:1]
        what = "a JSON file (`fwbench import` reads exports)" if text in (b"[", b"{") else None
    raise StoreError(
        f"{path} is {what or 'not a DuckDB database'}, not an fwbench results file; "
        "give a results file (a DuckDB database fwbench wrote) or a new path"
    )


class Locked(StoreError):
    """The file is open for writing in another process (DuckDB's lock on it)."""

    def __init__(self, path: Path, text: str) -> None:
        self.holder = snapshot.holder_of(text)
        super().__init__(f"results file {path} is in use by {self.holder}")


def _open_error(path: Path, exc: duckdb.Error) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"cannot open results file {path}: {text}"


def _json_cell(row: dict[str, Any], name: str) -> Any:
    """The JSON a cell holds (None when empty), or a ValueError naming the column."""
    text = row.get(name)
    if not text:
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise ValueError(f"{name}: not JSON ({why})") from None


def _samples(row: dict[str, Any]) -> tuple[float, ...]:
    found = row.get("samples")
    if found is None:
        raise ValueError("samples: empty (NULL) in a measured result")
    return tuple(found)


def _from_row(row: dict[str, Any]) -> Result:
    measurement = None
    if row["median_s"] is not None:
        runs = tuple(Run.model_validate(r) for r in _json_cell(row, "runs") or [])
        measurement = Measurement(
            step_time_s=StepTime(
                median=row["median_s"], ci_low=row["ci_low_s"], ci_high=row["ci_high_s"]
            ),
            samples=_samples(row),
            runs=runs,
            figures=_json_cell(row, "figures") or {},
            **({"ci_method": row["ci_method"]} if row.get("ci_method") else {}),
            **{c.name: row[c.name] for c in columns.of_kind("measured") if c.name != "ci_method"},
        )
    return Result(
        schema_version=row["schema_version"],
        result_id=row["result_id"],
        invocation_id=row["invocation_id"],
        recorded_at=row["recorded_at"],
        case=Case.stored(row),
        status=row["status"],
        error=row["error"],
        measurement=measurement,
        param_count=row["param_count"],
        warnings=tuple(row["warnings"] or ()),
        **{c.name: _json_cell(row, c.name) or {} for c in columns.of_kind("json")},
        **{
            c.name: c.model.model_validate_json(row[c.name]) if row[c.name] and c.model else None
            for c in columns.of_kind("model")
        },
    )
