"""User-facing errors: one line that names the problem and the valid choices."""

from __future__ import annotations


class FwbenchError(Exception):
    """An error caused by the user's input or environment, shown as one line, exit code 2."""

    exit_code = 2


class SpecError(FwbenchError):
    """A case or sweep specification is invalid."""


class StoreError(FwbenchError):
    """The results file cannot be opened, read or written."""


class ExecutorError(FwbenchError):
    """The chosen executor cannot run the cases (missing, unreachable, cases lost)."""
