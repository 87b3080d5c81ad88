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
from dataclasses import dataclass, field
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
    found = _comparison(live)
    return case_runs.group_stop(
        [state.runs for state in live],
        [state.request.plan for state in live],
        None if found is None else found.decided,
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
        self.round_s: list[float] = []  # the wall time of each of its rounds
        # Re-opened with the time a budget had left once every group had its minimum.
        self.reopened = False

    @property
    def active(self) -> bool:
        return self.rounds < self.max_rounds and any(s.active for s in self.states)

    @property
    def round_cost(self) -> float | None:
        """Seconds a round of it takes (their mean so far; None before the first)."""
        return sum(self.round_s) / len(self.round_s) if self.round_s else None

    @property
    def parked(self) -> bool:
        """Stopped by the budget while its own rule would go on (its comparison open, or,
        measured alone, its precision not reached) with rounds left: the budget's time
        left may finish it."""
        cases = [s for s in self.states if isinstance(s, CaseRuns)]
        if self.kind is not CASES or self.rounds >= self.max_rounds:
            return False
        if not any(s.stop == "time_share" for s in cases):
            return False
        if len(cases) > 1 and any(s.stop == "failed" for s in cases):
            # A side failed: the other's further runs have no partner in their round, so
            # no verdict paired by round can take them; the time goes where it can decide.
            return False
        live = [s for s in cases if s.ended is None and s.runs]
        return bool(live) and any(reason is None for reason in _case_stop(live))

    def to_decide(self) -> float:
        """The seconds it would likely take to decide its comparison, were the ratio and
        the spread what its runs show (Verdict.runs_needed at its round's cost): the
        order in which parked groups are re-opened, most promising first."""
        live = [s for s in self.states if isinstance(s, CaseRuns) and s.ended is None and s.runs]
        found = _comparison(live)
        verdict = found.verdict() if found is not None else None
        if verdict is None or verdict.runs_needed is None or self.round_cost is None:
            return math.inf
        more = max(verdict.runs_needed - min(verdict.runs), 1)
        return more * self.round_cost

    def reopen(self) -> None:
        """Take more rounds after the budget stopped it: the variants it stopped go on,
        their runs from now on marked as made after the re-opening. The sequential plan
        is the same (the same looks, from min_runs to max_runs runs a side): a group
        that is paused and resumed looks at the runs it would have looked at anyway."""
        self.reopened = True
        for state in self.states:
            if isinstance(state, CaseRuns) and state.stop == "time_share":
                state.stop = None
                state.reopened = True

    def stop_open(self, reason: str) -> None:
        """Stop the variants still going, for `reason` (a budget that another round would
        overrun)."""
        for state in self.states:
            if state.active:
                state.stop = reason

    def round(
        self, timeout_s: float, on_phase: Callable[[str], None] | None, servers: ForkServers
    ) -> None:
        began = time.monotonic()
        try:
            self._round(timeout_s, on_phase, servers, began)
        finally:
            self.round_s.append(time.monotonic() - began)

    def _round(
        self,
        timeout_s: float,
        on_phase: Callable[[str], None] | None,
        servers: ForkServers,
        began: float,
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
        # Spent when another round, at what its rounds took so far, would end past it.
        now = time.monotonic()
        rounds = [*self.round_s, now - began]
        spent = self.deadline is not None and now + sum(rounds) / len(rounds) > self.deadline
        if spent and all(len(s.runs) >= s.request.plan.min_runs for s in live):
            # Its share of the budget is spent and every variant has its minimum (a stop
            # that never looks at the data keeps the sequential plan's error rate).
            reasons = [reason or "time_share" for reason in reasons]
        for state, reason in zip(live, reasons, strict=True):
            state.stop = reason
        self.rounds += 1

    def outcomes(self) -> list[Outcome]:
        return [self._grouped(state.outcome()) for state in self.states]

    def parked_outcomes(self) -> list[Outcome]:
        """What it found when the budget stopped it, stored while it waits for more rounds:
        its variants stopped by "time_share" (their driver trackers left running)."""
        found = []
        for state in self.states:
            if isinstance(state, CaseRuns) and state.stop == "time_share":
                found.append(self._grouped(state.waiting()))
            else:
                found.append(self._grouped(state.outcome()))
        return found

    def so_far(self) -> list[Outcome] | None:
        """The outcomes if the command ended now (see CaseRuns.so_far); None before every
        case has a first run or a failure."""
        found = [state.so_far() for state in self.states]
        return None if any(o is None for o in found) else [self._grouped(o) for o in found if o]

    def _grouped(self, outcome: Outcome) -> Outcome:
        if self.group_id is None or not outcome.runs:
            return outcome
        return dataclasses.replace(outcome, group_id=self.group_id)


def _comparison(live: list[CaseRuns]) -> verdicts.Comparison | None:
    """The comparison of a group's variants after this round, read under its sequential
    plan (from min_runs to max_runs runs a side), as its stopping rule reads it: decided
    or not, and what would likely decide it; None where the verdict does not stop it (a
    case alone, or `stop_on: precision` or `runs`), or before every variant has
    min_runs runs (nothing is decided before)."""
    plans = [state.request.plan for state in live]
    if len(live) < 2 or any(p.stop_on != "verdict" for p in plans):
        return None
    if min(len(state.runs) for state in live) < max(p.min_runs for p in plans):
        return _UNDECIDED
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
    return verdicts.as_they_come([r or [] for r in runs], reading, looks)


# A group before its first min_runs rounds: undecided, nothing estimated.
_UNDECIDED = verdicts.Comparison.of({})


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


@dataclass
class _Budget:
    """A sweep's wall-clock budget (`--budget`), spent in two passes.

    First, every comparison gets its minimum (min_runs rounds), in the sweep's order:
    those it decides are done. Then the time left goes, a round at a time, to the one
    still open that would likely be decided soonest (`_Group.to_decide`: the runs its
    verdict says it still needs, at what a round of it costs, measured), the estimates
    read again after every round, while a round of it still fits in what is left; each
    stops once decided, at max_runs, or when the budget is spent. So a comparison that
    costs most per run (training) is not cut first by an equal slice, and no time is left
    unused while a comparison could still be decided."""

    total_s: float
    groups: int
    started: float = field(default_factory=lambda: time.monotonic())

    @property
    def end(self) -> float:
        return self.started + self.total_s

    def left(self) -> float:
        return max(self.end - time.monotonic(), 0.0)

    def equal(self, index: int, size: int) -> float:
        """The deadline of `size` groups from group `index` that run whole (data-parallel
        ones): an equal share each of what is left."""
        return time.monotonic() + self.left() * size / (self.groups - index)


class LocalExecutor:
    """This machine: one group at a time, so no two cases share the hardware. Fork
    servers live as long as the executor runs, so each framework is imported once.

    `spread` > 1 lets that many consecutive groups take turns round by round (round 1 of
    each, then round 2 of each, ...): a case's runs are then minutes apart instead of
    seconds, so its interval over runs includes the machine's drift over that time.

    `budget_s` of wall-clock time is shared among the groups (`_Budget`): each first gets
    its minimum; one whose comparison is still open is then handed back as it stands
    (its cases stopped by "time_share") and re-opened with the time left, where it decides
    most.

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
        budget = _Budget(self.budget_s, len(groups)) if self.budget_s is not None else None
        parked: list[tuple[int, _Group]] = []
        try:
            window: list[tuple[int, list[GroupRequest]]] = []
            for index, group in enumerate(groups):
                if on_start:
                    for request in group:
                        on_start(request.case)
                if any(r.case.strategy for r in group):
                    # Data-parallel groups run alone, whole (their ranks fill the cores).
                    deadline = budget.equal(index, 1) if budget else None
                    outcomes = run_group(list(group), timeout_s, on_status, servers, deadline)
                    yield GroupDone(index, outcomes)
                    continue
                window.append((index, list(group)))
                if len(window) == self.spread:
                    yield from self._turns(window, budget, parked, timeout_s, on_status, servers)
                    window = []
            if window:
                yield from self._turns(window, budget, parked, timeout_s, on_status, servers)
            if budget is not None:
                yield from _reopen(parked, budget, timeout_s, on_status, servers)
        finally:
            servers.close()
            shutil.rmtree(directory, ignore_errors=True)

    def _turns(
        self,
        window: list[tuple[int, list[GroupRequest]]],
        budget: _Budget | None,
        parked: list[tuple[int, _Group]],
        timeout_s: float,
        on_status: OnStatus | None,
        servers: ForkServers,
    ) -> Iterator[GroupDone]:
        """Run a window of `spread` groups taking turns: to the end without a budget;
        with one, their minimum, a group still open joining `parked`."""
        # A deadline already past: no round beyond min_runs starts in this pass.
        deadline = time.monotonic() if budget else None
        turns = [(i, _Group(g, deadline)) for i, g in window]
        yield from _take_turns(turns, timeout_s, on_status, servers, parked if budget else None)


def _reopen(
    parked: list[tuple[int, _Group]],
    budget: _Budget,
    timeout_s: float,
    on_status: OnStatus | None,
    servers: ForkServers,
) -> Iterator[GroupDone]:
    """The budget's time left, a round at a time, to the parked group likeliest to be
    decided soonest whose round still fits (`_Budget`); each handed back final once it
    stops, and so far after each of its rounds before that."""
    opened: set[int] = set()
    while parked:
        fits = [
            (index, group)
            for index, group in parked
            if group.round_cost is not None and budget.left() >= group.round_cost
        ]
        if not fits:
            break
        index, group = min(fits, key=lambda found: found[1].to_decide())
        group.reopen()
        group.deadline = budget.end
        if on_status and index not in opened:
            case = group.states[0].request.case
            on_status(f"re-opened with the budget's time left: {case.label()}")
        opened.add(index)
        group.round(timeout_s, on_status, servers)
        if group.active:
            group.stop_open("time_share")  # parked again until it is chosen
        if group.parked:
            yield GroupDone(index, group.parked_outcomes(), final=False)
        else:
            parked.remove((index, group))
            yield GroupDone(index, group.outcomes())
    for index, group in parked:
        yield GroupDone(index, group.outcomes())


def _take_turns(
    window: list[tuple[int, _Group]],
    timeout_s: float,
    on_status: OnStatus | None,
    servers: ForkServers,
    parked: list[tuple[int, _Group]] | None = None,
) -> Iterator[GroupDone]:
    """Round r of every group of the window, then round r + 1; each group handed back as
    soon as its last round is done (so a group of one run each is stored at once), and
    its outcomes so far after each round before that. With `parked`, a group its share
    stopped while its comparison is open joins it, handed back as it stands."""
    pending = list(window)
    while pending:
        still = []
        for index, group in pending:
            if group.active:
                group.round(timeout_s, on_status, servers)
            if group.active:
                still.append((index, group))
        for index, group in pending:
            if group.active:
                if (so_far := group.so_far()) is not None:
                    yield GroupDone(index, so_far, final=False)
            elif parked is not None and group.parked:
                parked.append((index, group))
                yield GroupDone(index, group.parked_outcomes(), final=False)
            else:
                yield GroupDone(index, group.outcomes())
        pending = still
