"""Run groups of requests in fresh worker processes on this machine.

A case is measured in several runs, each a fresh worker process (METHODOLOGY rules 14
and 16): global framework state never leaks from one run or case into the next, a crash
or a hang takes only its own case down, and the spread between runs is measured rather
than hidden. Runs are made in rounds: in each round every case of the group gets one
run; the workers build and warm up in turn under the rules this driver sends them
(`calibrate`: first step, warmup, block size), then it asks them for one timed block
each, in alternation (each block after a switch begins with untimed steps,
`RunTiming.min_switch_warm_s` of them, so cold caches and waking threads are not
timed: rule 17), so a noisy machine's drift hits all variants alike. The
order of the cases alternates from round to round (ABBA). Rounds go on until every
case's interval over its runs is precise enough or its budget ends, for all the cases
of the group at once: a case whose own rule is met keeps its place in the rounds while
another needs more, so no variant is measured alone (fwbench.measure.runs.group_stop).
Trackers (fwbench.measure.trackers) run on both sides.

Serving points are the other kind of round (fwbench.launch.serving): the same groups,
rounds, ABBA order, fork servers, idle checks, budget and outcomes so far, with one
whole LoadGen run per point per round instead of alternating blocks.

Workers are forked from a per-framework fork server (fwbench.launch.forkserver), which
has imported the framework once; GPU cases and a refused server spawn them instead. The
ranks of a data-parallel case (torchrun, or one process per TensorFlow worker) answer
as one worker (fwbench.launch.rank_group.RankGroup) and go through the same driver,
one case at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fwbench.launch.executor import GroupDone, OnStart, OnStatus
from fwbench.launch.forkserver import ForkServers
from fwbench.launch.outcome import Outcome, WorkerFailure
from fwbench.launch.protocol import CaseRequest, GroupRequest, ServeRequest
from fwbench.launch.rounds import CaseRuns, end_case, run_round
from fwbench.launch.serving import PointRuns, serve_round, serve_stop
from fwbench.measure import load, verdicts
from fwbench.measure import runs as case_runs
from fwbench.tasks import STEP_TIME, verdict_figure

OnPhase = Callable[[str], None] | None


class Variant(Protocol):
    """The launcher's state of one variant of a group across its runs (a case's
    CaseRuns, a serving point's PointRuns)."""

    stop: str | None

    @property
    def request(self) -> GroupRequest: ...

    @property
    def active(self) -> bool: ...

    @property
    def runs(self) -> Sequence[Any]: ...

    def outcome(self) -> Outcome: ...

    def so_far(self) -> Outcome | None: ...


@dataclass(frozen=True)
class RoundKind:
    """What one kind of request does in a round, and when its variants stop."""

    state: Callable[[Any], Variant]
    # (variants in this round's order, round index, time-out per run, phase, servers)
    run_round: Callable[[list[Any], int, float, OnPhase, ForkServers], None]
    # Why each live variant stops after a round (None: it goes on).
    stop: Callable[[list[Any]], Sequence[str | None]]
    # A variant ended before a round could start (the machine stayed busy).
    end: Callable[[Any, WorkerFailure], None]


def _case_stop(live: list[CaseRuns]) -> Sequence[str | None]:
    return case_runs.group_stop(
        [state.runs for state in live],
        [state.request.plan for state in live],
        _decided(live),
    )


CASES = RoundKind(CaseRuns.of, run_round, _case_stop, end_case)
SERVING = RoundKind(PointRuns, serve_round, serve_stop, PointRuns.end)


def kind_of(requests: Sequence[GroupRequest]) -> RoundKind:
    """The kind of round a group's requests make; a group holds one kind."""
    if all(isinstance(r.sent, CaseRequest) for r in requests):
        return CASES
    if all(isinstance(r.sent, ServeRequest) for r in requests):
        return SERVING
    raise ValueError("a group holds cases or serving points, not both")


class _Group:
    """A group's variants across their rounds of runs: one round at a time, so rounds of
    several groups can take turns (LocalExecutor's spread)."""

    def __init__(self, requests: Sequence[GroupRequest], deadline: float | None = None) -> None:
        self.kind = kind_of(requests)
        self.states: list[Variant] = [self.kind.state(r) for r in requests]
        # Variants measured together: their runs of one round alternate blocks, so their
        # verdicts pair them by round (Measurement.group_id).
        self.group_id = uuid.uuid4().hex if len(requests) > 1 else None
        self.rounds = 0
        self.max_rounds = max(r.plan.max_runs for r in requests)
        # time.monotonic() after which no round beyond min_runs starts (a sweep's budget).
        self.deadline = deadline

    @property
    def active(self) -> bool:
        return self.rounds < self.max_rounds and any(s.active for s in self.states)

    def round(
        self, timeout_s: float, on_phase: Callable[[str], None] | None, servers: ForkServers
    ) -> None:
        active = [s for s in self.states if s.active]
        order = active if self.rounds % 2 == 0 else active[::-1]  # ABBA
        try:
            plan = order[0].request.plan
            if plan.require_idle:
                load.wait_until_idle(plan.busy_cores, on_phase)
        except load.MachineBusy as exc:
            for state in active:
                self.kind.end(state, WorkerFailure("error", str(exc), ""))
            self.rounds = self.max_rounds
            return
        self.kind.run_round(order, self.rounds, timeout_s, on_phase, servers)
        live = [state for state in active if state.active]
        reasons = self.kind.stop(live)
        spent = self.deadline is not None and time.monotonic() >= self.deadline
        if spent and all(len(s.runs) >= s.request.plan.min_runs for s in live):
            # Its share of the budget is spent and every variant has its minimum (a stop
            # that never looks at the data keeps the sequential plan's error rate).
            reasons = [reason or "time_share" for reason in reasons]
        for state, reason in zip(live, reasons, strict=True):
            state.stop = reason
        self.rounds += 1

    def outcomes(self) -> list[Outcome]:
        return [self._grouped(state.outcome()) for state in self.states]

    def so_far(self) -> list[Outcome] | None:
        """The outcomes if the command ended now (see CaseRuns.so_far); None before every
        case has a first run or a failure."""
        found = [state.so_far() for state in self.states]
        return None if any(o is None for o in found) else [self._grouped(o) for o in found if o]

    def _grouped(self, outcome: Outcome) -> Outcome:
        if self.group_id is None or not outcome.runs:
            return outcome
        return dataclasses.replace(outcome, group_id=self.group_id)


def _decided(live: list[CaseRuns]) -> bool | None:
    """Whether the comparison of a group's variants is decided after this round, read
    under its sequential plan (from min_runs to max_runs runs a side); None where the
    verdict does not stop it (a case alone, or `stop_on: precision` or `runs`)."""
    plans = [state.request.plan for state in live]
    if len(live) < 2 or any(p.stop_on != "verdict" for p in plans):
        return None
    if min(len(state.runs) for state in live) < max(p.min_runs for p in plans):
        return False
    looks = verdicts.widest(p.looks for p in plans)
    assert looks is not None  # every plan stops on its verdict
    readings = [state.request.reading for state in live]
    reading = verdicts.Reading(
        estimator=verdicts.common_estimator(r.estimator for r in readings),
        band=verdicts.common_band(r.band for r in readings),
    )
    # The figure the group's verdict reads (a generation's time per output token): the
    # variants of one workload are of one task; the step time where a run lacks it.
    runs = [state.figure_runs(verdict_figure(live[0].request.case.task)) for state in live]
    if any(r is None for r in runs):
        runs = [state.figure_runs(STEP_TIME.name) for state in live]
    return verdicts.as_they_come([r or [] for r in runs], reading, looks).decided


def run_group(
    requests: Sequence[GroupRequest],
    timeout_s: float,
    on_phase: Callable[[str], None] | None = None,
    servers: ForkServers | None = None,
    deadline: float | None = None,
) -> list[Outcome]:
    """Measure a group in rounds of runs (one case or point alone, or every variant of
    one workload in alternation); one outcome per request, in order.

    Each run of a case gets `timeout_s`. Data-parallel cases (a strategy) are measured
    one at a time, by the same driver: interleaving would put two jobs' ranks on the
    same cores.
    """
    if len(requests) > 1 and any(r.case.strategy for r in requests):
        return [run_group([r], timeout_s, on_phase, servers, deadline)[0] for r in requests]
    owned = servers is None
    if servers is None:
        servers = ForkServers(Path(tempfile.mkdtemp(prefix="fwbench-servers-")))
    group = _Group(requests, deadline)
    try:
        while group.active:
            group.round(timeout_s, on_phase, servers)
    finally:
        if owned:
            shutil.rmtree(servers.directory, ignore_errors=True)
            servers.close()
    return group.outcomes()


class LocalExecutor:
    """This machine: one group at a time, so no two cases share the hardware. Fork
    servers live as long as the executor runs, so each framework is imported once.

    `spread` > 1 lets that many consecutive groups take turns round by round (round 1 of
    each, then round 2 of each, ...): a case's runs are then minutes apart instead of
    seconds, so its interval over runs includes the machine's drift over that time.

    After each round of a group that goes on, its outcomes so far are handed back too
    (`GroupDone.final` False: cases stopped by "unfinished"), so a command killed in the
    middle of a group keeps the runs it finished; the final outcomes replace them.
    Data-parallel groups are handed back whole.
    """

    def __init__(self, spread: int = 1, budget_s: float | None = None) -> None:
        if spread < 1:
            raise ValueError(f"spread: must be 1 or more (got {spread})")
        if budget_s is not None and not 0 < budget_s < math.inf:
            raise ValueError(f"budget: must be a positive number of seconds (got {budget_s})")
        self.spread = spread
        self.budget_s = budget_s

    def _deadline(self, started: float, groups_left: int, size: int) -> float | None:
        """When the next `size` groups stop adding rounds beyond their minimum: an equal
        share of what is left of the budget for each group still to run, so time a
        decided comparison did not use goes to the open ones after it."""
        if self.budget_s is None:
            return None
        left = self.budget_s - (time.monotonic() - started)
        return time.monotonic() + max(left, 0.0) * size / groups_left

    def connect(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def check(self, groups: Sequence[Sequence[GroupRequest]]) -> None:
        return None

    def run(
        self,
        groups: Sequence[Sequence[GroupRequest]],
        timeout_s: float,
        on_start: OnStart | None = None,
        on_status: OnStatus | None = None,
    ) -> Iterator[GroupDone]:
        directory = Path(tempfile.mkdtemp(prefix="fwbench-servers-"))
        servers = ForkServers(directory)
        started = time.monotonic()
        try:
            window: list[tuple[int, list[GroupRequest]]] = []
            for index, group in enumerate(groups):
                if on_start:
                    for request in group:
                        on_start(request.case)
                if any(r.case.strategy for r in group):
                    # Data-parallel groups run alone, whole (their ranks fill the cores).
                    deadline = self._deadline(started, len(groups) - index, 1)
                    outcomes = run_group(list(group), timeout_s, on_status, servers, deadline)
                    yield GroupDone(index, outcomes)
                    continue
                window.append((index, list(group)))
                if len(window) == self.spread:
                    yield from self._turns(
                        window, started, len(groups), timeout_s, on_status, servers
                    )
                    window = []
            if window:
                yield from self._turns(window, started, len(groups), timeout_s, on_status, servers)
        finally:
            servers.close()
            shutil.rmtree(directory, ignore_errors=True)

    def _turns(
        self,
        window: list[tuple[int, list[GroupRequest]]],
        started: float,
        total: int,
        timeout_s: float,
        on_status: OnStatus | None,
        servers: ForkServers,
    ) -> Iterator[GroupDone]:
        """Run a window of `spread` groups taking turns, within their share of the budget."""
        deadline = self._deadline(started, total - window[0][0], len(window))
        turns = [(i, _Group(g, deadline)) for i, g in window]
        yield from _take_turns(turns, timeout_s, on_status, servers)


def _take_turns(
    window: list[tuple[int, _Group]],
    timeout_s: float,
    on_status: OnStatus | None,
    servers: ForkServers,
) -> Iterator[GroupDone]:
    """Round r of every group of the window, then round r + 1; each group handed back as
    soon as its last round is done (so a group of one run each is stored at once), and
    its outcomes so far after each round before that."""
    pending = list(window)
    while pending:
        still = []
        for index, group in pending:
            if group.active:
                group.round(timeout_s, on_status, servers)
            if group.active:
                still.append((index, group))
                if (so_far := group.so_far()) is not None:
                    yield GroupDone(index, so_far, final=False)
            else:
                yield GroupDone(index, group.outcomes())
        pending = still
