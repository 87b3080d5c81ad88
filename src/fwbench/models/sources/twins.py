"""Twins: one network written once per framework, in one Python file of the user's
(`path/nets.py:NAME`). NAME is a ModelSpec in that file, as a plugin's model is
(docs/adding-a-model.md): its builders (one per framework), its kind of input and
dimensions, its objective. fwbench runs it like a model of the zoo (the same synthetic
data, loss and checks), without an environment variable or a package; its name carries
the file's content hash.

The file is imported in the command's process too: like a plugin, it imports its
frameworks inside the builders only. It is first imported once in a process of its own,
with a deadline (and remembered by its code's hash): a file that hangs, or ends the
process, at import is one line, not a hung or silently ended command."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

from fwbench import cache
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.models.sources.common import code_digest, existing, load_module, named

# Long enough for a file that imports TensorFlow at its top, as some do.
IMPORT_TIMEOUT_S = 120.0
# The probe answers on a copy of its standard output: a file may close sys.stdout.
_IMPORTED, _EXITED, _CLOSED = "fwbench-twins-imported", "fwbench-twins-exit ", "fwbench-closed"
_PROBE = (
    "import importlib.util, os, sys\n"
    "answer = os.dup(1)\n"
    "def say(text): os.write(answer, (text + '\\n').encode())\n"
    "sys.path.insert(0, sys.argv[2])\n"
    "spec = importlib.util.spec_from_file_location('fwbench_twins_probe', sys.argv[1])\n"
    "try:\n"
    "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
    "except SystemExit as exc:\n"
    f"    say({_EXITED!r} + repr(exc.code))\n"
    "    raise\n"
    f"say({_CLOSED!r} if sys.stdout is None or sys.stdout.closed else {_IMPORTED!r})\n"
)

_FORM = re.compile(r"^(?P<file>.+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)$")


def claims(text: str) -> bool:
    return _FORM.match(text) is not None and not text.startswith(("torch:", "keras:"))


def resolve(text: str) -> ModelSpec:
    found = _FORM.match(text)
    assert found is not None
    path = existing(found["file"], "a Python file of twins")
    content = code_digest(path)
    _imports_alone(path, content, text)
    try:
        module = load_module(str(path))
    except SpecError:
        raise
    except SystemExit as exc:
        # A file that ends the process when imported would end fwbench without a word.
        raise SpecError(
            f"model: {text}: importing {path.name} called sys.exit({exc.code!r}); a file of "
            "twins defines ModelSpecs, it runs nothing at import"
        ) from None
    except Exception as exc:
        raise SpecError(f"model: {text}: importing {path.name} failed: {exc}") from None
    spec = getattr(module, found["name"], None)
    if not isinstance(spec, ModelSpec):
        have = [n for n, v in vars(module).items() if isinstance(v, ModelSpec)]
        hint = f"; it has: {', '.join(have)}" if have else "; it defines no ModelSpec"
        raise SpecError(
            f"model: {text}: {path.name} has no ModelSpec named {found['name']!r}{hint}"
        )
    return dataclasses.replace(
        spec,
        name=named(spec.name, content),
        workload="",  # its own name: never compared with another file's
        reference=f"{path}:{found['name']}",
        digest=content,
    )


def _imports_alone(path: Path, content: str, text: str) -> None:
    """Import the file in a process of its own first, with a deadline, once per version
    of its code: a SpecError where it hangs, fails or ends the process."""
    key = f"{path}\0{content}"
    if cache.read("twins-imported", key):
        return
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(path), str(path.parent)],
            capture_output=True, text=True, timeout=IMPORT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise SpecError(
            f"model: {text}: importing {path.name} did not finish in {IMPORT_TIMEOUT_S:g} s; "
            "a file of twins defines ModelSpecs, it runs nothing at import"
        ) from None
    if _IMPORTED in done.stdout.splitlines():
        cache.write("twins-imported", key, True)
        return
    if _CLOSED in done.stdout.splitlines():
        raise SpecError(
            f"model: {text}: importing {path.name} closed the standard output; a file of "
            "twins defines ModelSpecs, it runs nothing at import"
        )
    exited = [x for x in done.stdout.splitlines() if x.startswith(_EXITED)]
    if exited:
        raise SpecError(
            f"model: {text}: importing {path.name} called sys.exit({exited[-1][len(_EXITED) :]}); "
            "a file of twins defines ModelSpecs, it runs nothing at import"
        )
    lines = done.stderr.strip().splitlines()
    if done.returncode == 0 or not lines:
        raise SpecError(
            f"model: {text}: importing {path.name} ended the process (exit code "
            f"{done.returncode}); a file of twins defines ModelSpecs, it runs nothing at import"
        )
    raise SpecError(f"model: {text}: importing {path.name} failed: {lines[-1]}")
