"""Output files (reports, exports): checked before any work, written without clobbering.

A regular file (or a new one) is written aside and renamed over the path, so a failure
leaves the old file or nothing, never half of one. A symbolic link is followed: its
target is replaced, the link stays. Anything else (a FIFO, `/dev/stdout`, a process
substitution like `-o >(wc -c)`, a device) is written through, in place: renaming over
it would replace the special file itself.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
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
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise SpecError(f"{what} {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SpecError(f"{what} {path}: cannot write in {parent} (read-only or no permission)")
    if target.exists() and not os.access(target, os.W_OK):
        raise SpecError(f"{what} {path}: the file exists and is not writable")


def write_atomically(path: Path, write: Callable[[Path], None], what: str = "output") -> None:
    """Call `write(tmp)` to fill a scratch file, then publish it at `path` (see module)."""
    check_output(path, what)
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
