"""What a group of cases hands back, wherever it ran: the executors' contract types.

The measurement driver (fwbench.launch.local, for single-process and data-parallel
cases alike) and the Ray executor produce these; fwbench.api turns them into Results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from fwbench.launch.protocol import CaseReport
from fwbench.measure.timing import Timing


@dataclass(frozen=True)
class WorkerFailure:
    """The worker left no report: it crashed, was killed, or timed out."""

    status: Literal["error", "oom", "timeout"]
    error: str
    log_tail: str


@dataclass(frozen=True)
class MeasuredRun:
    """One worker process's timing, and how it ran."""

    timing: Timing
    build_s: float
    launcher: str  # fork-server | spawn | torchrun ...
    other_cpu_cores: float | None = None  # other processes' CPU during its blocks
    # Seconds outside the build and the timed phases: from asking for the worker to its
    # build starting (process, imports, device), and its final report after the blocks.
    start_s: float | None = None
    finish_s: float | None = None


@dataclass(frozen=True)
class CaseOutcome:
    """Everything the launcher learned about one case, over all its runs."""

    report: CaseReport | None  # the first run's report; None when no worker reported
    failure: WorkerFailure | None = None
    runs: tuple[MeasuredRun, ...] = ()
    # The driver trackers' results by tracker name (fwbench.measure.trackers).
    tracked: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None  # why no more runs were added
    warnings: tuple[str, ...] = ()
