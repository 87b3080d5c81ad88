"""The user's cache directory for what fwbench can keep between commands (what a user's
model declares, ...): `$FWBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/fwbench`, else
`~/.cache/fwbench`. Entries are JSON files named by a hash of their key; one that cannot
be read or written is simply not cached (the work is done again)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from fwbench.errors import SpecError

ENV = "FWBENCH_CACHE_DIR"


def cache_dir() -> Path:
    """The cache folder. One named by $FWBENCH_CACHE_DIR that cannot be made or written
    is a one-line SpecError naming the variable (the user asked for it: weights and
    compiled programs kept elsewhere, or nowhere, would surprise them); the default one
    may be unusable, and then nothing is cached."""
    given = os.environ.get(ENV)
    if given:
        return _usable(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fwbench"


@functools.cache
def _usable(given: str) -> Path:
    path = Path(given)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or str(exc)
    else:
        if os.access(path, os.W_OK | os.X_OK):
            return path
        reason = "not writable"
    raise SpecError(
        f"{ENV}: {given} cannot hold fwbench's cache ({reason}); set it to a folder you can "
        "write, or unset it"
    )


def _path(kind: str, key: str) -> Path:
    return cache_dir() / kind / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def read(kind: str, key: str) -> Any | None:
    """The value cached under `key`, or None."""
    path = _path(kind, key)
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return entry.get("value") if isinstance(entry, dict) and entry.get("key") == key else None


def write(kind: str, key: str, value: Any) -> None:
    """Keep `value` under `key` (written aside and renamed: a reader never sees half)."""
    path = _path(kind, key)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"key": key, "value": value}, f)
            os.replace(name, path)
        finally:
            # A write that failed (a full disk, a value JSON cannot hold) leaves nothing.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
