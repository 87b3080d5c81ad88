"""Output files (reports, exports): checked before any work, written without clobbering.

A regular file (or a new one) is written aside and renamed over the path, so a failure
leaves the old file or nothing, never half of one. A symbolic link is followed: its
target is replaced, the link stays. Anything else (a FIFO, `/dev/stdout`, a process
substitution like `-o >(wc -c)`, a device) is written through, in place: renaming over
it would replace the special file itself.

No output may be one of the command's inputs, or another of its outputs
(`refuse_overwrite`): a report or export written over its own results file replaced the
database, every result gone. Nor does an export or report ever replace a DuckDB file, or
the log DuckDB keeps beside one (FILE.wal: after a killed writer, the only copy of its
last results).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fwbench.errors import SpecError


def is_special(path: Path) -> bool:
    """Whether `path` (followed through links) exists and is not a regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode)


def check_output(path: Path, what: str) -> None:
    """Refuse, before anything runs, an output that cannot be written; one line."""
    if path.is_dir():
        raise SpecError(f"{what} {path}: is a directory; give a file path")
    if is_special(path):
        if not os.access(path, os.W_OK):
            raise SpecError(f"{what} {path}: not writable")
        return
    target = Path(os.path.realpath(path))
    if target.exists() and not os.access(target, os.W_OK):
        raise SpecError(f"{what} {path}: the file exists and is not writable")
    _can_write_in(target.parent, path, what)


def _can_write_in(folder: Path, path: Path, what: str) -> None:
    """Refuse `path` (given as `what`) unless `folder`, or the nearest folder above it
    that exists (where the missing ones will be made), can be written."""
    parent = folder
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise SpecError(f"{what} {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SpecError(f"{what} {path}: cannot write in {parent} (read-only or no permission)")
    # access() answers yes to root for /proc and /sys, and of a read-only mount: a file
    # made and removed there says whether the output can be written, before any work.
    try:
        fd, name = tempfile.mkstemp(prefix=".fwbench-check.", dir=parent)
    except OSError as exc:
        raise SpecError(f"{what} {path}: cannot write in {parent}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(name)


def check_folder(path: Path, what: str) -> None:
    """Refuse, before anything runs, a folder that cannot be made or written; one line."""
    if path.exists() and not path.is_dir():
        raise SpecError(f"{what} {path}: is a file; give a folder")
    _can_write_in(Path(os.path.realpath(path)), path, what)


def write_atomically(path: Path, write: Callable[[Path], None], what: str = "output") -> None:
    """Call `write(tmp)` to fill a scratch file, then publish it at `path` (see module)."""
    check_output(path, what)
    # The last line of defence, for callers that did not run refuse_overwrite.
    refuse_database(path, what)
    special = is_special(path)
    target = path if special else Path(os.path.realpath(path))
    scratch_dir = Path(tempfile.gettempdir()) if special else target.parent
    try:
        scratch_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=scratch_dir)
    except OSError as exc:
        raise SpecError(f"{what} {path}: cannot write: {exc.strerror or exc}") from None
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        if special:
            with tmp.open("rb") as src, path.open("wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
        else:
            # mkstemp makes 0600; a report or export is as readable as any file the
            # user creates (the umask decides), whatever its format.
            umask = os.umask(0)
            os.umask(umask)
            tmp.chmod(0o666 & ~umask)
            tmp.replace(target)
    except OSError as exc:
        raise SpecError(f"{what} {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


# A DuckDB file starts with an 8-byte checksum, then this magic (its storage header).
_DUCKDB_MAGIC = (8, b"DUCK")


def is_duckdb(path: Path) -> bool:
    """Whether `path` is an existing regular file with DuckDB's header."""
    if not path.is_file():  # a regular file only: reading a FIFO would block
        return False
    offset, magic = _DUCKDB_MAGIC
    try:
        with path.open("rb") as f:
            return f.read(offset + len(magic))[offset:] == magic
    except OSError:
        return False


# Files DuckDB keeps beside a database FILE: its write-ahead log, which alone holds the
# results committed since the last checkpoint (a killed writer leaves them there), and
# the folder it spills to.
DATABASE_SIDECARS: tuple[str, ...] = (".wal", ".tmp")


def sidecars(path: Path) -> list[Path]:
    """The files DuckDB keeps beside the database at `path`, existing or not."""
    return [path.with_name(path.name + suffix) for suffix in DATABASE_SIDECARS]


def database_of(path: Path) -> Path | None:
    """The DuckDB database that `path` (followed through links) is a sidecar of, if any."""
    target = Path(os.path.realpath(path))
    for suffix in DATABASE_SIDECARS:
        if target.name.endswith(suffix) and len(target.name) > len(suffix):
            owner = target.with_name(target.name[: -len(suffix)])
            if is_duckdb(owner):
                return owner
    return None


def refuse_database(path: Path, label: str) -> None:
    """Refuse to replace a DuckDB file, or a file DuckDB keeps beside one, with an export
    or a report: it is somebody's results (every one of them, or the last ones committed,
    which live only in the log until a checkpoint), and no export or report format is one."""
    if is_duckdb(path):
        raise SpecError(
            f"{label} {path} is a DuckDB database; a report or export never replaces one "
            "(remove it first, or choose another output path)"
        )
    owner = database_of(path)
    if owner is not None:
        raise SpecError(
            f"{label} {path} is the log DuckDB keeps beside the database {owner} (it may hold "
            "results not yet in the database file); choose another output path"
        )


@dataclass(frozen=True)
class FileArg:
    """A file a command reads or writes, as its command line names it."""

    flag: str  # how it was given, for messages: "-o", "--db", "--report"
    path: Path
    role: str  # what it is, for messages: "the results database", "the sweep file"
    # Replaced whole by write_atomically (a report, an export); False for a database,
    # which DuckDB writes in place, or a folder that files are added to.
    replaces: bool = True
    # A folder that writing this output deletes and replaces (a Markdown report's charts).
    folder: Path | None = None
    # A DuckDB database: its sidecars (DATABASE_SIDECARS) are as much its as the file.
    database: bool = False


def database(flag: str, path: Path) -> FileArg:
    """A results database: read, and written in place."""
    return FileArg(flag, path, "the results database", replaces=False, database=True)


def report_output(flag: str, path: Path, fmt: str) -> FileArg:
    """A report; a Markdown one also replaces its chart folder beside it (where
    fwbench.report.write.write_report puts its charts)."""
    folder = None
    if fmt == "md" and not is_special(path):
        target = Path(os.path.realpath(path))
        folder = target.parent / f"{target.stem}-charts"
    return FileArg(flag, path, "the report", folder=folder)


def refuse_overwrite(outputs: Sequence[FileArg], inputs: Sequence[FileArg] = ()) -> None:
    """Refuse, before any work, outputs that would destroy what the command reads or
    writes: an output that is an input (through a symbolic link, or a hard link to it),
    two outputs that are one file, a replaced folder that holds an input or an output,
    and an export or report over a DuckDB file. One line (SpecError, exit code 2).

    A database that the command both reads and writes is passed in both lists, as the
    same FileArg; it is not compared with itself."""
    for out in outputs:
        for given in inputs:
            if given is out:
                continue
            if _same(out.path, given.path):
                raise SpecError(
                    f"{out.flag} {out.path} is {given.role} {given.path} itself; "
                    "choose another output path"
                )
            if given.database:
                for kept in sidecars(given.path):
                    if _same(out.path, kept):
                        raise SpecError(
                            f"{out.flag} {out.path} is {kept}, which DuckDB keeps beside "
                            f"{given.role} {given.path} (it may hold results not yet in the "
                            "database file); choose another output path"
                        )
            if out.folder is not None and _within(given.path, out.folder):
                raise SpecError(
                    f"{out.flag} {out.path} replaces its chart folder {out.folder}, which "
                    f"holds {given.role} {given.path}; choose another output path"
                )
        if out.replaces:
            refuse_database(out.path, out.flag)
    for i, first in enumerate(outputs):
        for second in outputs[i + 1 :]:
            if _same(first.path, second.path):
                raise SpecError(
                    f"{second.flag} {second.path} and {first.flag} {first.path} are the "
                    "same file; give each output its own path"
                )
            for a, b in ((first, second), (second, first)):
                if a.folder is not None and _within(b.path, a.folder):
                    raise SpecError(
                        f"{a.flag} {a.path} replaces its chart folder {a.folder}, which "
                        f"would hold {b.flag} {b.path}; choose another output path"
                    )


def _same(a: Path, b: Path) -> bool:
    """One file: the same device and inode (links followed, hard links too), or, for a
    path not created yet, the same place once links are resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _within(path: Path, folder: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))
