"""User-facing errors: one line that names the problem and the valid choices."""

from __future__ import annotations

import math
from typing import Any


class FwbenchError(Exception):
    """An error caused by the user's input or environment, shown as one line, exit code 2."""

    exit_code = 2


class SpecError(FwbenchError):
    """A case or sweep specification is invalid."""


class StoreError(FwbenchError):
    """The results file cannot be opened, read or written."""


class ExecutorError(FwbenchError):
    """The chosen executor cannot run the cases (missing, unreachable, cases lost)."""


def positive_seconds(value: Any, name: str) -> float:
    """`value` as a finite number of seconds above 0, or a SpecError naming `name`: the
    one check every time limit passes, from a flag or from a file."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise SpecError(f"{name}: must be a finite number of seconds above 0 (got {value!r})")
    return float(value)
