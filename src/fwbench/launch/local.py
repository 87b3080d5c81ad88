"""Run worker requests in fresh processes on this machine.

A case is measured in several runs, each a fresh worker process (METHODOLOGY rules 14
and 16): global framework state never leaks from one run or case into the next, a crash
or a hang takes only its own case down, and the spread between runs is measured rather
than hidden. Runs are made in rounds: in each round every case of the group gets one
run; the workers build and warm up in turn under the rules this driver sends them
(`calibrate`: first step, warmup, block size), then it asks them for one timed block
each, in alternation (each block after a switch begins with one untimed step, so a cold
cache is not timed: rule 17), so a noisy machine's drift hits all variants alike. The
order of the cases alternates from round to round (ABBA). Rounds go on until every
case's interval over its runs is precise enough or its budget ends, for all the cases
of the group at once: a case whose own rule is met keeps its place in the rounds while
another needs more, so no variant is measured alone (fwbench.measure.runs.group_stop).
Trackers (fwbench.measure.trackers) run on both sides.

Workers are forked from a per-framework fork server (fwbench.launch.forkserver), which
has imported the framework once; GPU cases and a refused server spawn them instead. The
ranks of a data-parallel case (torchrun, or one process per TensorFlow worker) answer
as one worker (fwbench.distributed.rank_group.RankGroup) and go through the same driver,
one case at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwbench.distributed.rank_group import RankGroup
from fwbench.errors import one_line
from fwbench.launch.executor import GroupDone, OnStart, OnStatus
from fwbench.launch.forkserver import ForkServers
from fwbench.launch.outcome import CaseOutcome, MeasuredRun, WorkerFailure
from fwbench.launch.process import (
    Worker,
    WorkerGone,
    WorkerProcess,
    WorkerReported,
    case_env,
)
from fwbench.launch.protocol import CaseReport, CaseRequest
from fwbench.measure import comparison, load, trackers
from fwbench.measure import runs as case_runs
from fwbench.measure.timing import Prepared, Steady, TimingConfig, finish, steady


@dataclass
class _Case:
    """The launcher's state of one case of a group, across its runs."""

    request: CaseRequest
    tracking: dict[str, trackers.Guarded] = field(default_factory=dict)  # driver trackers
    runs: list[MeasuredRun] = field(default_factory=list)
    report: CaseReport | None = None
    ended: CaseOutcome | None = None  # a failure, or a report without a measurement
    stop: str | None = None
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, request: CaseRequest) -> _Case:
        state = cls(request)
        state.tracking = trackers.driver_trackers(request.case, state.warnings.append)
        return state

    @property
    def active(self) -> bool:
        return self.ended is None and self.stop is None

    def figures(self) -> list[case_runs.RunFigures]:
        return [
            case_runs.RunFigures(
                r.timing.median_s,
                r.timing.ci_low_s,
                r.timing.ci_high_s,
                r.timing.measured_s,
                r.other_cpu_cores,
                r.timing.samples,
            )
            for r in self.runs
        ]

    def outcome(self) -> CaseOutcome:
        if self.ended is not None:
            return self.ended
        assert self.report is not None
        config = self.request.timing
        stop = self.stop or "failed"
        return CaseOutcome(
            self.report,
            None,
            tuple(self.runs),
            {name: tracker("result") for name, tracker in self.tracking.items()},
            stop,
            (*self.warnings, *case_runs.warnings(self.figures(), stop, config)),
        )


class _Runner:
    """The launcher's side of one run in the steady state."""

    def __init__(self, state: _Case, worker: Worker, prepared: Prepared) -> None:
        self.state = state
        self.worker = worker
        self.prepared = prepared
        # One untimed step before each block when blocks alternate between processes, and
        # blocks of at least min_block_s then.
        self.warm = 0
        self.min_block_s = 0.0

    def block(self) -> tuple[float, int]:
        steps = self.prepared.steps_per_block
        tracking = self.state.tracking.values()
        tokens = [tracker("before_block") for tracker in tracking]
        wall = time.perf_counter()
        self.worker.send({"op": "block", "warm": self.warm, "steps": steps})
        message = self.worker.receive()
        if message["event"] != "block":
            raise WorkerReported(message.get("report", {}))
        seconds = float(message["seconds"])
        wall = time.perf_counter() - wall
        for tracker, token in zip(tracking, tokens, strict=True):
            tracker("after_block", token, wall, steps)
        if self.warm and 0 < seconds < self.min_block_s:
            # Warmup's estimate of a step was high: lengthen the blocks that follow.
            longer = math.ceil(steps * self.min_block_s / seconds * 1.1)
            self.prepared = dataclasses.replace(self.prepared, steps_per_block=longer)
        return seconds, steps


class _Group:
    """A group's cases across their rounds of runs: one round at a time, so rounds of
    several groups can take turns (LocalExecutor's spread)."""

    def __init__(self, requests: list[CaseRequest], deadline: float | None = None) -> None:
        self.states = [_Case.of(r) for r in requests]
        self.rounds = 0
        self.max_rounds = max(r.timing.max_runs for r in requests)
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
            timing = order[0].request.timing
            if timing.require_idle:
                load.wait_until_idle(timing.busy_cores, on_phase)
        except load.MachineBusy as exc:
            for state in active:
                _end(state, WorkerFailure("error", str(exc), ""))
            self.rounds = self.max_rounds
            return
        _round(order, self.rounds, timeout_s, on_phase, servers)
        live = [state for state in active if state.active]
        reasons = case_runs.group_stop(
            [state.figures() for state in live],
            [state.request.timing for state in live],
            _decided(live),
        )
        spent = self.deadline is not None and time.monotonic() >= self.deadline
        if spent and all(len(s.runs) >= s.request.timing.min_runs for s in live):
            # Its share of the budget is spent and every variant has its minimum (a stop
            # that never looks at the data keeps the sequential plan's error rate).
            reasons = [reason or "time_share" for reason in reasons]
        for state, reason in zip(live, reasons, strict=True):
            state.stop = reason
        self.rounds += 1

    def outcomes(self) -> list[CaseOutcome]:
        return [state.outcome() for state in self.states]


def _decided(live: list[_Case]) -> bool | None:
    """Whether the comparison of a group's variants is decided after this round, read
    under its sequential plan (from min_runs to max_runs runs a side); None where the
    group stops on precision instead (a case alone, or `stop_on: precision`)."""
    configs = [state.request.timing for state in live]
    if len(live) < 2 or any(c.stop_on != "verdict" for c in configs):
        return None
    # By place, not key: an A/A group holds one case twice.
    runs = {f"{i}": state.figures() for i, state in enumerate(live)}
    if min(len(r) for r in runs.values()) < max(c.min_runs for c in configs):
        return False
    looks = comparison.Looks(min(c.min_runs for c in configs), max(c.max_runs for c in configs))
    estimator = comparison.common_estimator(c.estimator for c in configs)
    values = {name: comparison.per_run(r, estimator) for name, r in runs.items()}
    return comparison.Comparison.of(values, looks=looks).decided


def run_group(
    requests: list[CaseRequest],
    timeout_s: float,
    on_phase: Callable[[str], None] | None = None,
    servers: ForkServers | None = None,
    deadline: float | None = None,
) -> list[CaseOutcome]:
    """Measure a group of cases in rounds of runs (one case alone, or every variant of one
    workload in alternation); one outcome per request, in order.

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


def _end(state: _Case, failure: WorkerFailure | None, report: CaseReport | None = None) -> None:
    """A run failed: a case with measured runs keeps them (and says what happened to the
    next); one without becomes the failure."""
    what = (
        failure.error
        if failure
        else f"{report.status if report else '?'}: " + str(report.error if report else "")
    )
    if state.runs:
        state.stop = "failed"
        state.warnings.append(f"run {len(state.runs) + 1} failed and no more were made: {what}")
        return
    state.ended = CaseOutcome(report, failure)


def _round(
    order: list[_Case],
    round_index: int,
    timeout_s: float,
    on_phase: Callable[[str], None] | None,
    servers: ForkServers,
) -> None:
    deadline = time.monotonic() + timeout_s * len(order)
    runners: list[_Runner] = []
    workers: list[Worker] = []
    try:
        for state in order:
            case = state.request.case
            if on_phase:
                on_phase(f"run {round_index + 1}: building and warming up {case.label()}")
            request = state.request
            if round_index > 0:  # FLOPs, profiles and traces are taken once, in the first run
                request = request.model_copy(
                    update={"count_flops": False, "profile_steps": 0, "trace_path": None}
                )
            try:
                worker = _start(request, round_index, deadline, timeout_s, servers)
            except Exception as exc:
                _end(state, WorkerFailure("error", f"cannot start a worker: {one_line(exc)}", ""))
                continue
            workers.append(worker)
            try:
                worker.send(request)
                prepared = _prepare(worker, request.timing)
            except WorkerGone as gone:
                _end(state, gone.failure)
                continue
            except WorkerReported as reported:
                _end(state, None, CaseReport.model_validate(reported.report))
                continue
            except Exception as exc:
                _end(state, _broken(worker, exc))
                continue
            runners.append(_Runner(state, worker, prepared))
        if runners:
            if on_phase:
                on_phase(
                    f"run {round_index + 1}: measuring "
                    + " | ".join(r.state.request.case.label() for r in runners)
                )
            _measure(runners)
    finally:
        for worker in workers:
            worker.close()


def _start(
    request: CaseRequest,
    round_index: int,
    deadline: float,
    timeout_s: float,
    servers: ForkServers,
) -> Worker:
    """A fresh worker for one run: the ranks of a data-parallel case, else one process
    forked from the framework's fork server (spawned on a GPU: CUDA does not survive a
    fork once any import has touched the driver)."""
    case = request.case
    if case.strategy:
        return RankGroup(request, deadline, timeout_s)
    env = case_env(case)
    server = servers.get(case.framework, env, round_index) if case.device == "cpu" else None
    return WorkerProcess(f"case: {case.label()}", env, deadline, timeout_s, server)


def _prepare(worker: Worker, config: TimingConfig) -> Prepared:
    """First step, warmup and block size (`timing.calibrate` under the case's rules),
    then the steady state. A single process calibrates itself, its warmup steps back to
    back; a RankGroup drives its ranks through the same rules in lockstep."""

    def answer(event: str) -> dict[str, Any]:
        message = worker.receive()
        if message["event"] != event:
            raise WorkerReported(message.get("report", {}))
        return message

    answer("built")
    worker.send({"op": "calibrate", "timing": config.model_dump()})
    prepared = Prepared(**answer("calibrated")["prepared"])
    worker.send({"op": "steady"})
    answer("steady")
    return prepared


def _measure(runners: list[_Runner]) -> None:
    config = max((r.state.request.timing for r in runners), key=lambda c: c.run_time_s)
    run_config = config.for_run()
    tracking = [t for r in runners for t in r.state.tracking.values()]
    # Some trackers need a long enough window (energy counters, to be read reliably).
    window = max((t.min_window_s for t in tracking), default=0.0)
    if window > run_config.min_time_s:
        run_config = run_config.model_copy(update={"min_time_s": window})
    if len(runners) > 1:
        for runner in runners:
            runner.warm = 1
            runner.min_block_s = config.min_switch_block_s
            runner.prepared = _switch_blocks(runner.prepared, config.min_switch_block_s)
    other_load = load.LoadWindow(load.launcher_and(r.worker.cpu_seconds for r in runners))
    for tracker in tracking:
        tracker("start")
    try:
        found = steady(
            [r.block for r in runners], [r.prepared.steps_per_block for r in runners], run_config
        )
    finally:
        for tracker in tracking:
            tracker("stop")
    other = other_load.other_cores()
    for runner, run in zip(runners, found, strict=True):
        kept = _finish(runner, run, other)
        for tracker in runner.state.tracking.values():
            tracker("end_run", kept)


def _finish(runner: _Runner, run: Steady, other: float | None) -> bool:
    """End one run: its final report, and the run kept if it was measured."""
    state = runner.state
    try:
        if isinstance(run.error, WorkerReported):
            _end(state, None, CaseReport.model_validate(run.error.report))
            return False
        if run.error is not None:
            raise run.error
        runner.worker.send({"op": "finish"})
        report = CaseReport.model_validate(runner.worker.receive()["report"])
    except WorkerGone as gone:
        _end(state, gone.failure)
        return False
    except Exception as exc:
        _end(state, _broken(runner.worker, exc))
        return False
    if report.status != "ok":
        _end(state, None, report)
        return False
    timing = finish(runner.prepared, run, state.request.timing)
    launcher = runner.worker.launcher
    state.runs.append(MeasuredRun(timing, report.build_s or 0.0, launcher, other))
    if state.report is None:
        state.report = report
    else:
        _check_compiles(state, report)
    return True


def _broken(worker: Worker, exc: BaseException) -> WorkerFailure:
    """The driver could not talk to a worker (a garbled message, a reset connection):
    the run's failure, never the sweep's."""
    return WorkerFailure("error", f"driver lost the worker: {one_line(exc)}", worker.log_tail())


def _switch_blocks(prepared: Prepared, min_block_s: float) -> Prepared:
    """Blocks long enough that switching processes between them costs nothing measurable."""
    step = prepared.warmup_s / prepared.warmup_steps if prepared.warmup_steps else 0.0
    step = step or prepared.first_step_s
    if step <= 0:
        return prepared
    steps = max(prepared.steps_per_block, math.ceil(min_block_s / step))
    return dataclasses.replace(prepared, steps_per_block=steps)


def _check_compiles(state: _Case, report: CaseReport) -> None:
    """Recompilations are read per run; the first run's are in its report's settings."""
    before = report.settings.get("compiles_after_warmup")
    after = report.settings.get("compiles_after_timing")
    if before is not None and after is not None and after > before:
        state.warnings.append(
            f"run {len(state.runs)} recompiled {after - before} time(s) inside its timed "
            "blocks: its steady state includes compilation"
        )


# Workloads that take turns in a sweep unless --spread says otherwise. One at a time
# already meets the coverage target in sweeps (85% of pairs; 4 taking turns: 92%,
# docs/decisions.md) and stores each workload as soon as it is done.
DEFAULT_SPREAD = 1


class LocalExecutor:
    """This machine: one group at a time, so no two cases share the hardware. Fork
    servers live as long as the executor runs, so each framework is imported once.

    `spread` > 1 lets that many consecutive groups take turns round by round (round 1 of
    each, then round 2 of each, ...): a case's runs are then minutes apart instead of
    seconds, so its interval over runs includes the machine's drift over that time. A
    group is handed back once all its rounds are done; an interrupted sweep loses the
    unfinished groups of the window in flight (--resume measures them again).
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

    def check(self, groups: Sequence[Sequence[CaseRequest]]) -> None:
        return None

    def run(
        self,
        groups: Sequence[Sequence[CaseRequest]],
        timeout_s: float,
        on_start: OnStart | None = None,
        on_status: OnStatus | None = None,
    ) -> Iterator[GroupDone]:
        directory = Path(tempfile.mkdtemp(prefix="fwbench-servers-"))
        servers = ForkServers(directory)
        started = time.monotonic()
        try:
            window: list[tuple[int, list[CaseRequest]]] = []
            for index, group in enumerate(groups):
                if on_start:
                    for request in group:
                        on_start(request.case)
                if self.spread == 1 or any(r.case.strategy for r in group):
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
        window: list[tuple[int, list[CaseRequest]]],
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
    soon as its last round is done (so a group of one run each is stored at once)."""
    pending = list(window)
    while pending:
        still = []
        for index, group in pending:
            if group.active:
                group.round(timeout_s, on_status, servers)
            if group.active:
                still.append((index, group))
            else:
                yield GroupDone(index, group.outcomes())
        pending = still
