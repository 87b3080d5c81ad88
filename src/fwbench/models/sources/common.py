"""What the sources share: finding a file or folder, hashing it, naming a model by it,
and making a source's model from a user's callable. Framework-free (a callable's
framework is imported when it is called, in a worker)."""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Mapping
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
    """A model's file, or a folder's files in sorted order: regular files within it only
    (a link to a device, a pipe, or out of the folder would be read forever, or be
    another file's identity), refused in one line."""
    if path.is_file():
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            yield within(Path(root) / name, path)


def within(file: Path, folder: Path) -> Path:
    """`file` of a model's `folder`, checked before it is read: a regular file inside
    the folder, or a one-line SpecError (a link to a device or a pipe would be read
    forever; a link out of the folder would make another file part of the model)."""
    target = file.resolve()
    if not target.is_file():
        raise SpecError(
            f"model: {folder}: {file} is not a regular file (a device, a pipe or a socket); "
            "a model's folder holds files"
        )
    if not target.is_relative_to(folder.resolve()):
        raise SpecError(f"model: {folder}: {file} leads out of the folder ({target})")
    return file


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


# How much of a module's local imports its identity follows: a model's code is a few
# files; a folder of thousands is not read into every name.
CODE_FILES = 200
CODE_FILE_BYTES = 8 * 2**20


def code_digest(path: Path) -> str:
    """The identity of a model defined by Python code: its file and every module beside
    it that it imports, transitively (found by reading their imports, never by running
    them; within the file's folder, and within its package for a module of one), so a
    changed helper module is another model. Regular files only, each at most
    CODE_FILE_BYTES, at most CODE_FILES of them."""
    root = _package_root(path)
    found = _local_modules(path, root)
    h = hashlib.sha256()
    for file in sorted(found, key=str):
        h.update(str(file.relative_to(root)).encode() + b"\0")
        h.update(found[file] + b"\0")
    return h.hexdigest()[:DIGEST_CHARS]


def _package_root(path: Path) -> Path:
    """The folder a module's absolute imports of its own package resolve from: above
    the outermost package (folders with __init__.py) holding it, else its own folder."""
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder


def _code_bytes(file: Path) -> bytes:
    try:
        if not file.is_file() or file.stat().st_size > CODE_FILE_BYTES:
            raise SpecError(
                f"model: {file}: not a regular Python file of at most "
                f"{CODE_FILE_BYTES // 2**20} MiB"
            )
        return file.read_bytes()
    except OSError as exc:
        raise SpecError(f"model: {file}: cannot be read ({exc.strerror or exc})") from None


def _local_modules(path: Path, root: Path) -> dict[Path, bytes]:
    """The local modules `path` imports, transitively, with their bytes (read once: what
    is parsed is what is hashed)."""
    import ast

    seen: dict[Path, bytes] = {}
    pending = [path.absolute()]
    top = root.absolute()
    while pending:
        file = pending.pop()
        if file in seen:
            continue
        if len(seen) >= CODE_FILES:
            raise SpecError(
                f"model: {path}: it imports more than {CODE_FILES} local modules; fwbench "
                "names a model by its code and reads at most that many"
            )
        seen[file] = _code_bytes(file)
        try:
            tree = ast.parse(seen[file], filename=str(file))
        except SyntaxError:
            continue  # importing it says what is wrong, with Python's own message
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [(a.name, 0) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                names = [(base, node.level)] + [
                    (f"{base}.{a.name}" if base else a.name, node.level) for a in node.names
                ]
            else:
                continue
            for dotted, level in names:
                folder = file.parent
                for _ in range(max(level - 1, 0)):
                    folder = folder.parent
                starts = [folder] if level else list(dict.fromkeys([file.parent, top]))
                for start in starts:
                    pending += _module_files(start, dotted, top)
    return seen


def _module_files(start: Path, dotted: str, top: Path) -> list[Path]:
    """The local files `dotted` names from `start` (each package's __init__.py on the
    way, through namespace packages too, and the module itself), within `top`; none for a
    module found elsewhere."""
    found = []
    folder = start
    for part in [p for p in dotted.split(".") if p]:
        module, package = folder / f"{part}.py", folder / part / "__init__.py"
        # Whatever is there is named: a device or a pipe under a module's name is refused
        # when read (_code_bytes), never read until it ends.
        if os.path.lexists(package):
            found.append(package)
            folder = folder / part
        elif os.path.lexists(module):
            found.append(module)
            break
        elif (folder / part).is_dir():
            # A folder without __init__.py imports as a namespace package: its modules
            # are the network's as much as a package's are.
            folder = folder / part
        else:
            break
    return [f.absolute() for f in found if f.absolute().is_relative_to(top)]


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


def callable_model(
    text: str, prefix: str, builds: Mapping[str, Callable[[str], Any]], family: str
) -> ModelSpec:
    """`PREFIX:module:function` (or `PREFIX:path/file.py:function`) as a model of the
    user's: named by its function and the digest of its code (code_digest), read again
    from the file's absolute path, built by `builds[framework](reference)` in each
    framework's worker."""
    module, function = callable_parts(text, prefix)
    path = module_file(module, text)
    reference = f"{prefix}:{path}:{function}" if module.endswith(".py") else text
    return file_model(
        reference, code_digest(path), f"{path.stem}.{function}",
        family=family,
        builders={fw: builder(build, reference) for fw, build in builds.items()},
        description=f"{function}() of {path}",
    )  # fmt: skip


def builder(build: Callable[[str], Any], reference: str) -> Callable[..., Any]:
    """A ModelSpec builder (called with the model's dimensions) that builds a user's
    model from its reference alone: its dimensions are its own."""
    return functools.partial(_built, build, reference)


def _built(build: Callable[[str], Any], reference: str, **_: Any) -> Any:
    return build(reference)


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
    """Call the user's function (no arguments) and return what it made; a module given by
    its file keeps its folder on the path while the function runs, as while it was
    imported, so an import inside the function finds the modules beside it."""
    found = getattr(load_module(module), function, None)
    if found is None or not callable(found):
        raise SpecError(f"model: {text}: {module} has no function {function!r}")
    if not module.endswith(".py"):
        return found()
    folder = str(Path(module).parent)
    sys.path.insert(0, folder)
    try:
        return found()
    finally:
        sys.path.remove(folder)
