"""User-facing errors: one line that names the problem and the valid choices."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

# How a case, a serving point or one of their runs ended: ok, or the kind of failure.
Status = Literal["ok", "oom", "error", "timeout", "unsupported"]


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


# Units on every part but a lone number of seconds: "1h30" is refused, not read as 1 h 30 s.
_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?|(\d+(?:\.\d+)?)"
)


def duration_seconds(text: str, name: str) -> float:
    """`90`, `90s`, `5m`, `1m30s` or `1h` as seconds above 0, or a SpecError naming `name`."""
    found = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or found is None or not any(found.groups()):
        raise SpecError(
            f"{name}: {text!r} is not a duration; give seconds or units, e.g. 300, 90s, 5m, 1h"
        )
    hours, minutes, seconds, alone = (float(g) if g else 0.0 for g in found.groups())
    return positive_seconds(hours * 3600 + minutes * 60 + seconds + alone, name)


# Lines of a framework's error that say where, not what: TensorFlow's "Graph execution
# error:" and node back-traces, Keras' "Exception encountered when calling ...", stack
# frames. The informative line is the first one that is none of these.
_NOISE = re.compile(
    r"^(graph execution error|detected at node|defined at|exception encountered when"
    r"|arguments received by|file \"|\[\[|•|traceback|during handling|the above exception"
    # OpenVINO's: where in its sources each layer of the error passed through.
    r"|exception from \S+:\d+)",
    re.IGNORECASE,
)
_TF_DECORATION = re.compile(
    r"\{\{function_node [^}]*\}\}|\s*\[Op:[^\]]*\].*$"
    # PyTorch's C++ checks end with a request for feedback on the message itself.
    r"|\s*\(Could this error message be improved\?.*$"
)
# Terminal colour codes (TensorFlow bolds some messages): text, not styling, in a record.
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def informative_line(text: str) -> str:
    """The line of an error message that says what went wrong (pure; tested)."""
    lines = [ln.strip() for ln in _ANSI.sub("", text).strip().splitlines() if ln.strip()]
    for line in lines:
        if line.startswith((" ", "\t")) or _NOISE.match(line):
            continue
        cleaned = _TF_DECORATION.sub("", line).strip().rstrip(":").strip()
        if cleaned and not _NOISE.match(cleaned):
            return cleaned
    return lines[0] if lines else ""


def one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {informative_line(str(exc))}"[:500]


def broken_yaml(source: Any, exc: Exception) -> SpecError:
    """A YAML parser's error in one line: where, and what (PyYAML's own message runs to
    several, the document quoted)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or "invalid YAML"
    return SpecError(f"{source}: broken YAML{where}: {problem}")
