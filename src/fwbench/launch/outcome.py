"""What a group hands back, wherever it ran: the executors' contract types.

The measurement driver (fwbench.launch.local, for single-process and data-parallel
cases and for serving points alike) and the Ray executor produce these; a case's runs
are already the records that are stored (fwbench.result.Run), and
fwbench.launch.records and fwbench.launch.serving make the rest of its Result (a
serving point's with its `serving` part).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from fwbench.launch.protocol import CaseReport, ServeReport
from fwbench.result import Run

if TYPE_CHECKING:
    from fwbench.scenario.record import ServingRun


@dataclass(frozen=True)
class WorkerFailure:
    """The worker left no report: it crashed, was killed, or timed out."""

    status: Literal["error", "oom", "timeout"]
    error: str
    log_tail: str


@dataclass(frozen=True)
class CaseOutcome:
    """Everything the launcher learned about one case, over all its runs."""

    report: CaseReport | None  # the first run's report; None when no worker reported
    failure: WorkerFailure | None = None
    runs: tuple[Run, ...] = ()  # its measured runs, run i made in round i
    # The driver trackers' results by tracker name (fwbench.measure.trackers).
    tracked: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None  # why no more runs were added
    warnings: tuple[str, ...] = ()
    # Shared by the variants measured with it in rounds (run i of each in round i): their
    # verdicts pair runs by round. None: measured alone.
    group_id: str | None = None


@dataclass(frozen=True)
class PointOutcome:
    """Everything the launcher learned about one serving point: its runs (failed ones
    included), with each run's report where its worker made one."""

    runs: tuple[ServingRun, ...] = ()
    reports: tuple[ServeReport | None, ...] = ()
    # True: the command ended before the point's runs were all made (an outcome so far).
    unfinished: bool = False
    # As CaseOutcome.group_id: the points of one workload run one after another in each
    # round, so their verdicts pair runs by round.
    group_id: str | None = None


Outcome = CaseOutcome | PointOutcome
