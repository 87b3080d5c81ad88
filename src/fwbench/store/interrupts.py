"""Ctrl-C during a call into DuckDB, kept.

DuckDB's Python client checks for signals while a query runs and turns the
KeyboardInterrupt that Python's handler raised into its own error: a loop of inserts sent
SIGINT at a random moment ended in `RuntimeError: Query interrupted` 13 times in 20, a
KeyboardInterrupt 7 times (measured 2026-11-27, DuckDB 2.0.1). fwbench would then end
in "unexpected RuntimeError" with a traceback file instead of "interrupted", or, where
a caller treats the error as the case's, go on. So Ctrl-C is counted as it is raised
(`install`, over Python's default handler only), and every call into a store's
connection (`Guarded`) raises KeyboardInterrupt when one arrived during the call and
did not come out of it as such (turned into another error, or dropped).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

_raised = [0]  # Ctrl-C seen by the handler, in this process


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _raised[0] += 1
    raise KeyboardInterrupt


def install() -> None:
    """Count Ctrl-C from now on: where the process still has Python's default handler
    (a program that set its own keeps it), and from the main thread (the only one that
    may set handlers, and the one Python runs them in)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


def _from_duckdb(value: Any) -> bool:
    return type(value).__module__.split(".")[0] in ("duckdb", "_duckdb")


class Guarded:
    """A DuckDB connection (or what its calls return: itself, a relation) whose calls
    re-raise a Ctrl-C that arrived while they ran."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._target, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            before = _raised[0]
            try:
                out = found(*args, **kwargs)
            except Exception as exc:
                # DuckDB's own InterruptException, when it stopped the query for it.
                if _raised[0] != before:
                    raise KeyboardInterrupt from exc
                raise
            if _raised[0] != before:
                raise KeyboardInterrupt
            return Guarded(out) if _from_duckdb(out) else out

        return call
