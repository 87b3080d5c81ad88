"""What the sources share: finding a file or folder, hashing it, naming a model by it,
and making a source's model from a user's callable. Framework-free (a callable's
framework is imported when it is called, in a worker)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from fwbench.catalog.models import TENSORS, ModelSpec
from fwbench.errors import SpecError

T = TypeVar("T")

DIGEST_CHARS = 12  # of the sha256: enough that two files never share a name by chance
CHUNK = 1 << 20


def existing(text: str, what: str, folder: bool = False) -> Path:
    """`text` as an absolute path that exists and is a file (or a folder), or a one-line
    SpecError naming the problem."""
    path = Path(os.path.expanduser(text))
    try:
        path = path.resolve(strict=True)
    except FileNotFoundError:
        raise SpecError(f"model: {text}: no such {'folder' if folder else 'file'}") from None
    except (OSError, RuntimeError) as exc:
        raise SpecError(f"model: {text}: cannot be read ({exc})") from None
    if folder and not path.is_dir():
        raise SpecError(f"model: {text}: not a folder; {what} is a folder")
    if not folder and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file"
        raise SpecError(f"model: {text}: {kind}; {what} is a file")
    if not os.access(path, os.R_OK):
        raise SpecError(f"model: {text}: not readable (permissions)")
    return path


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            yield Path(root) / name


def digest(path: Path) -> str:
    """The sha256 of a file, or of a folder's files (their paths within it and their
    bytes, in sorted order): what the model's name carries."""
    h = hashlib.sha256()
    for file in _files(path):
        if path.is_dir():
            h.update(str(file.relative_to(path)).encode() + b"\0")
        try:
            with file.open("rb") as f:
                while chunk := f.read(CHUNK):
                    h.update(chunk)
        except OSError as exc:
            raise SpecError(f"model: {file}: cannot be read ({exc.strerror or exc})") from None
    return h.hexdigest()[:DIGEST_CHARS]


def digest_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def named(base: str, digest_: str) -> str:
    """A user model's name: what the user calls it, then its content hash."""
    return f"{base}@{digest_}"


def file_model(reference: str, content: str, base: str, **fields: Any) -> ModelSpec:
    """A model the user keeps in a file (or a folder, or a function in a file): named by
    what the user calls it (`base`) and its content hash, so two files that share a name
    are never the same work; its reference is how to read it again."""
    return user_model(named(base, content), reference=reference, digest=content, **fields)


def user_model(name: str, **fields: Any) -> ModelSpec:
    """A model of the user's: it takes tensors, and trains on the mean of its outputs
    unless `fields` say otherwise."""
    return ModelSpec(**{"objective": "mean", **fields}, name=name, input_kind=TENSORS)


def read_model(path: str, what: str, read: Callable[[str], T]) -> T:
    """`read(path)`, in the framework's worker: a file that is not what it claims (a
    renamed text file, a truncated one) becomes one line naming it and the reader's
    reason, not the reader's traceback."""
    try:
        return read(path)
    except SpecError:
        raise
    except Exception as exc:  # protobuf's DecodeError, a truncated zip's, ...
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise SpecError(f"model: {path}: not {what} ({type(exc).__name__}: {first})") from None


def callable_parts(text: str, prefix: str) -> tuple[str, str]:
    """`PREFIX:module:function` or `PREFIX:path/file.py:function` as (module or file,
    function), or a SpecError saying how to write it."""
    rest = text[len(prefix) + 1 :]
    module, sep, function = rest.rpartition(":")
    if not sep or not module or not function.isidentifier():
        raise SpecError(
            f"model: {text!r}: write {prefix}:module:function or {prefix}:path/file.py:function "
            "(a function that takes no arguments and returns the model)"
        )
    return module, function


def module_file(module: str, text: str) -> Path:
    """The file a `module` of a callable lives in (a path to a .py file, or a dotted name
    on the Python path), found without running it."""
    if module.endswith(".py"):
        return existing(module, "a Python module")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise SpecError(f"model: {text}: cannot find module {module!r} ({exc})") from None
    if spec is None or spec.origin is None or not os.path.isfile(spec.origin):
        raise SpecError(
            f"model: {text}: no module {module!r} on the Python path; give its file "
            "(path/file.py:function) or add its folder to PYTHONPATH"
        )
    return Path(spec.origin)


def load_module(module: str) -> ModuleType:
    """Import a callable's module: by its file (a .py path) or its dotted name."""
    if module.endswith(".py"):
        path = Path(module)
        name = f"fwbench_user_{digest_text(str(path))}"
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise SpecError(f"model: {module}: not a Python module")
        found = importlib.util.module_from_spec(spec)
        sys.modules[name] = found
        # Its own folder first, as `python file.py` would: it may import its neighbours.
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(found)
        finally:
            sys.path.remove(str(path.parent))
        return found
    return importlib.import_module(module)


def call(module: str, function: str, text: str) -> Any:
    """Call the user's function (no arguments) and return what it made."""
    found = getattr(load_module(module), function, None)
    if found is None or not callable(found):
        raise SpecError(f"model: {text}: {module} has no function {function!r}")
    return found()
