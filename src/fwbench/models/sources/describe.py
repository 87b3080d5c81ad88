"""Run as `python -m fwbench.models.sources.describe TEXT`: read what a user's model
declares (its inputs, its parameters), in the framework of its source, and print it as
one marked JSON line. Started by fwbench.launch.describe, in a process of its own: the
command's process imports no framework, and a model that crashes or hangs while it is
read takes only this process with it."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from fwbench.catalog.sources import get_source
from fwbench.errors import SpecError, one_line

MARK = "fwbench-describe: "


def describe(text: str) -> dict[str, Any]:
    from fwbench.catalog.models import get_model

    spec = get_model(text)
    source = get_source(spec.source)
    found = source.describe(spec) if source.describe is not None else {}
    return {"name": spec.name, "inputs": "", "params": None, "outputs": "", **found}


def _unnamed(error: str, text: str) -> str:
    """The error without the model's name: the command's process says it once."""
    error = error.removeprefix("model: ")
    for name in (text, os.path.realpath(os.path.expanduser(text))):
        error = error.removeprefix(f"{name}: ")
    return error


def main(argv: list[str]) -> int:
    try:
        found: dict[str, Any] = {"ok": True, **describe(argv[1])}
    except SpecError as exc:
        found = {"ok": False, "error": _unnamed(str(exc), argv[1])}
    except Exception as exc:  # the user's code, or a file the framework cannot read
        found = {"ok": False, "error": one_line(exc)}
    # Whatever the model's code printed came before: the last marked line is ours.
    sys.stdout.write("\n" + MARK + json.dumps(found) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
