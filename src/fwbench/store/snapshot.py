"""A copy of a database that another process is writing, for reading what it stored so far.

DuckDB lets one process write a database file and no other process open it meanwhile, not
even read-only (https://duckdb.org/docs/current/connect/concurrency): the writer holds a
lock on the file, and `fwbench results` during a sweep was refused. The writer's files
can still be read as plain files (the lock is advisory and only DuckDB asks for it), so a
reader copies the database and its log (FILE.wal, where results committed since the last
checkpoint live) into a temporary folder and opens the copy read-only; DuckDB replays the
copied log in memory. The writer's files are only read: no lock is taken on them and
nothing is written beside them.

A copy is consistent when the database file did not change while it was made: between
checkpoints the writer only appends to the log, and a log cut short in the middle of a
commit is replayed up to its last whole commit (as after a crash). A checkpoint rewrites
the database file (and its header, in its first blocks) and empties the log; a copy made
across one is made again.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fwbench.errors import StoreError

# DuckDB's header blocks: the file header and the two database headers that a checkpoint
# flips between, each 4 KiB at the start of the file.
HEADER_BYTES = 3 * 4096
# Copies tried before giving up on a database checkpointed during each of them.
ATTEMPTS = 5


@dataclass
class Snapshot:
    """A copy of the database `of` at `path`, in a folder removed by `remove`."""

    of: Path
    path: Path
    taken_at: float  # time.time() when the copy was made

    def remove(self) -> None:
        shutil.rmtree(self.path.parent, ignore_errors=True)

    def note(self, holder: str) -> str:
        """The line a command says when it reads the snapshot."""
        at = time.strftime("%H:%M:%S", time.localtime(self.taken_at))
        return (
            f"read a snapshot of {self.of} taken now ({at}): {holder} is writing it, and "
            "a case it is still measuring shows as unfinished"
        )


def holder_of(message: str) -> str:
    """Who holds the lock, from DuckDB's 'Conflicting lock is held in PROGRAM (PID n)'."""
    found = re.search(r"\(PID (\d+)\)", message)
    return f"another process (PID {found.group(1)}, a sweep?)" if found else "another process"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _state(path: Path) -> tuple[int, int, int, bytes] | None:
    """What a checkpoint would change: inode, size, modification time and the headers."""
    try:
        st = path.stat()
        with path.open("rb") as f:
            head = f.read(HEADER_BYTES)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, head)


def take(db: Path, busy: str) -> Snapshot:
    """Copy `db` and its log into a new temporary folder (see module). `busy` is the line
    to refuse with when no copy can be made (the file is in use by another process)."""
    wal = db.with_name(db.name + ".wal")
    try:
        size = db.stat().st_size + _size(wal)
        where = Path(tempfile.gettempdir())
        free = shutil.disk_usage(where).free
    except OSError as exc:
        raise StoreError(f"{busy}, and it cannot be copied: {exc.strerror or exc}") from None
    # Room for the copy and what DuckDB needs beside it to open it.
    if free < size + (16 << 20):
        raise StoreError(
            f"{busy}, and a copy to read ({size / (1 << 20):.1f} MiB) does not fit in {where} "
            f"({free / (1 << 20):.1f} MiB free); wait for it to finish or set TMPDIR elsewhere"
        )
    try:
        folder = Path(tempfile.mkdtemp(prefix="fwbench-snapshot-"))
    except OSError as exc:
        raise StoreError(f"{busy}, and it cannot be copied: {exc.strerror or exc}") from None
    copy = folder / db.name
    try:
        for _ in range(ATTEMPTS):
            before = _state(db)
            shutil.copyfile(db, copy)
            # The log after the file: what the log adds to the copied file is consistent.
            with contextlib.suppress(FileNotFoundError):
                shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
            if _state(db) == before:
                return Snapshot(db, copy, time.time())
            copy.with_name(copy.name + ".wal").unlink(missing_ok=True)
            time.sleep(0.1)
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise StoreError(f"{busy}, and it cannot be copied: {exc.strerror or exc}") from None
    shutil.rmtree(folder, ignore_errors=True)
    raise StoreError(
        f"{busy}, and it changed during each of {ATTEMPTS} copies; try again in a moment"
    )
