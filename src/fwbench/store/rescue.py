"""Results a database could not take, kept where `fwbench import` reads them back.

A measurement can run for minutes before its result is written. When the write fails (the
disk filled up, the mount went read-only), the record is not dropped: it goes to a JSON
file of records, the format `fwbench export --format json` writes and `fwbench import`
reads, in the first place that takes it: beside the database, then the temporary
directory, then the user's cache. The command goes on (later results may still fit, or go
to the same file) and ends by naming the file and the import that puts it back.

`check_free_space` refuses, before anything is measured, a database whose filesystem is
already nearly full.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from fwbench.errors import StoreError
from fwbench.outputs import check_output

# Refused below this (bytes free on the database's filesystem): a result is a few hundred
# kilobytes of DuckDB blocks, a sweep a few megabytes, and the workers' own temporary files
# (compile caches, traces) need room too.
MIN_FREE_BYTES = 32 << 20


def check_free_space(db: Path, needed: int | None = None) -> None:
    """Refuse, before a measurement, a database whose filesystem has under `needed` bytes
    (MIN_FREE_BYTES) free: its results could not be stored. One line (StoreError, exit
    code 2)."""
    # A place that cannot be written at all says so, not "0.0 MiB free" (/proc).
    check_output(db, "--db")
    needed = MIN_FREE_BYTES if needed is None else needed
    where = db.parent
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return  # not knowable here (a special filesystem): the write itself will tell
    if free < needed:
        raise StoreError(
            f"only {_mib(free)} free on the filesystem of {db} (fwbench needs {_mib(needed)} "
            "to store results); free some space or pass --db on another filesystem"
        )


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def places(db: Path) -> list[Path]:
    """Where rescued records may go, in order: beside the database, the temporary
    directory, the user's cache (three filesystems, often)."""
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    name = f"{db.name}.unsaved-{stamp}.json"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fwbench"
    return [db.parent / name, Path(tempfile.gettempdir()) / name, cache / "unsaved" / name]


class Rescue:
    """The records of one command that its database did not take, by result id (a case's
    record is rewritten as its runs come in: the newest wins), written whole to one file
    after each addition."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.records: dict[str, dict[str, Any]] = {}
        self.path: Path | None = None
        self.why = ""
        self.announced = False  # the command said so (once)
        self._places = places(db)

    def __bool__(self) -> bool:
        return bool(self.records)

    def keep(self, result_id: str, record: dict[str, Any], why: str) -> Path:
        """Add (or replace) a record and write the file; returns where it is. A StoreError
        only if no place could take it (then the record is lost, and the message says)."""
        self.records[result_id] = record
        self.why = why
        text = json.dumps(list(self.records.values()), indent=1, default=str)
        failures = []
        # The file found last time first: every record stays in one file.
        order = [self.path] if self.path is not None else []
        order += [p for p in self._places if p != self.path]
        for path in order:
            try:
                _write(path, text)
            except OSError as exc:
                failures.append(f"{path}: {exc.strerror or exc}")
                continue
            if self.path is not None and self.path != path:
                self.path.unlink(missing_ok=True)  # its records are all in the new file
            self.path = path
            return path
        raise StoreError(
            f"cannot write results file {self.db} ({why}), nor keep its results elsewhere ("
            + "; ".join(failures)
            + "): this result is lost"
        )

    def message(self) -> str:
        """The line a command ends with when it rescued records."""
        n = len(self.records)
        return (
            f"{n} result{'s' if n != 1 else ''} could not be written to {self.db} ({self.why}); "
            f"{'they are' if n != 1 else 'it is'} kept in {self.path}: once there is space, "
            f"`fwbench import {self.path} --db {self.db}` stores "
            f"{'them' if n != 1 else 'it'}, and --resume goes on from there"
        )


def _write(path: Path, text: str) -> None:
    """Write aside and rename, so that a failure never leaves half a file of records."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
