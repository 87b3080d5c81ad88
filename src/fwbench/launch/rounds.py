"""One round of runs: every case of a group gets one fresh worker process, built and
warmed up in turn, then timed block by block in alternation.

The worker protocol of a run (build, calibrate, steady, blocks, finish) and what the
driver keeps of a case across its runs (`CaseRuns`) live here; which groups run, how
many rounds and in what order is fwbench.launch.local's job. Each block after a switch
between processes begins with untimed steps (one, or as many as fill
`RunTiming.min_switch_warm_s`), so a cold cache and sleeping threads are not timed
(rule 17), and a noisy machine's drift hits all variants alike.

What a round does to one worker (`start_worker`, `prepare_run`, `switch_blocks`,
`warm_steps` and `step_estimate`) is public: the benchmarks drive workers the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import os
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwbench.cache import cache_dir
from fwbench.case import Case
from fwbench.catalog.frameworks import get_framework
from fwbench.environment import host_environment, host_key
from fwbench.errors import one_line
from fwbench.launch import outputs
from fwbench.launch.forkserver import ForkServers
from fwbench.launch.outcome import CaseOutcome, WorkerFailure
from fwbench.launch.process import (
    Worker,
    WorkerGone,
    WorkerProcess,
    WorkerReported,
    case_env,
)
from fwbench.launch.protocol import CaseReport, CaseRequest, GroupRequest
from fwbench.launch.rank_group import RankGroup
from fwbench.measure import load, trackers, verdicts
from fwbench.measure import runs as case_runs
from fwbench.measure.timing import Prepared, RunTiming, Steady, finish, steady
from fwbench.result import Run, RunFigure
from fwbench.tasks import STEP_TIME


@dataclass
class CaseRuns:
    """The launcher's state of one case of a group, across its runs."""

    request: GroupRequest
    tracking: dict[str, trackers.Guarded] = field(default_factory=dict)  # driver trackers
    runs: list[Run] = field(default_factory=list)  # as stored: run i made in round i
    report: CaseReport | None = None
    ended: CaseOutcome | None = None  # a failure, or a report without a measurement
    stop: str | None = None
    warnings: list[str] = field(default_factory=list)
    # The outcome once made: its trackers' results are read once.
    final: CaseOutcome | None = None
    # Its runs from now on are made after its group was re-opened (LocalExecutor's
    # budget: the time left once every group had its share).
    reopened: bool = False

    @classmethod
    def of(cls, request: GroupRequest) -> CaseRuns:
        state = cls(request)
        state.tracking = trackers.driver_trackers(request.case, state.warnings.append)
        return state

    @property
    def active(self) -> bool:
        return self.ended is None and self.stop is None

    def figure_runs(self, figure: str) -> list[verdicts.RunLike] | None:
        """Its runs as estimators read them, for `figure` (the step time, or one of its
        task's own figures); None when a run lacks it."""
        if figure == STEP_TIME.name:
            return list(self.runs)
        if not all(figure in r.figures for r in self.runs):
            return None
        return [r.figures[figure] for r in self.runs]

    def outcome(self) -> CaseOutcome:
        """Everything its runs found, once no more runs will be made."""
        if self.ended is not None:
            return self.ended
        assert self.report is not None
        if self.final is None:
            plan = self.request.plan
            stop = self.stop or "failed"
            self.final = CaseOutcome(
                self.report,
                None,
                tuple(self.runs),
                {name: tracker("result") for name, tracker in self.tracking.items()},
                stop,
                (*self.warnings, *case_runs.warnings(self.runs, stop, plan)),
            )
        return self.final

    def so_far(self) -> CaseOutcome | None:
        """The outcome if the command ended now: the runs made so far, stopped by
        "unfinished" where more were due; None before its first run is done. The driver
        trackers are left running (reading one ends its window): an unfinished case
        carries none of their figures."""
        if not self.active:
            return self.outcome() if self.ended is not None or self.report else None
        if self.report is None:
            return None
        return self._interim(
            "unfinished",
            f"unfinished: the command ended after {len(self.runs)} of this case's runs, "
            "before its stopping rule was met; --resume measures it again",
        )

    def waiting(self) -> CaseOutcome:
        """The outcome of a case stopped by its share of a budget whose group may be
        re-opened with the time left at the end: "time_share", its runs so far, its driver
        trackers left running (it may go on)."""
        assert self.report is not None
        return self._interim("time_share")

    def _interim(self, stop: str, *said: str) -> CaseOutcome:
        assert self.report is not None
        return CaseOutcome(
            self.report,
            None,
            tuple(self.runs),
            {},
            stop,
            (*self.warnings, *case_runs.warnings(self.runs, stop, self.request.plan), *said),
        )


class _Runner:
    """The launcher's side of one run in the steady state."""

    def __init__(self, state: CaseRuns, worker: Worker, prepared: Prepared, start_s: float) -> None:
        self.state = state
        self.worker = worker
        self.prepared = prepared
        self.start_s = start_s
        # Untimed steps before each block when blocks alternate between processes
        # (enough to fill min_warm_s), and blocks of at least min_block_s then: `alternate`.
        self.warm = 0
        self.min_warm_s = 0.0
        self.min_block_s = 0.0
        # The task's figures beyond the step time, a value per timed block (Workload.figures).
        self.figures: dict[str, list[float]] = {}

    def alternate(self, config: RunTiming) -> None:
        """Its blocks alternate with other processes': each starts after untimed steps
        filling min_switch_warm_s and lasts at least min_switch_block_s, by warmup's
        estimate of a step until the blocks' own steps correct it (`block`)."""
        self.min_warm_s = config.min_switch_warm_s
        self.min_block_s = config.min_switch_block_s
        self.warm = warm_steps(step_estimate(self.prepared), self.min_warm_s)
        self.prepared = switch_blocks(self.prepared, self.min_block_s)

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
        for name, value in (message.get("figures") or {}).items():
            self.figures.setdefault(name, []).append(float(value))
        for tracker, token in zip(tracking, tokens, strict=True):
            # The wall time holds the untimed steps too: what they cost is theirs.
            tracker("after_block", token, wall, steps + self.warm)
        if self.warm and seconds > 0:
            # Warmup's estimate of a step runs high (its early steps, a sync each): the
            # block's own steps say how many fill min_warm_s, and how long a block is.
            self.warm = warm_steps(seconds / steps, self.min_warm_s)
            if seconds < self.min_block_s:
                longer = math.ceil(steps * self.min_block_s / seconds * 1.1)
                self.prepared = dataclasses.replace(self.prepared, steps_per_block=longer)
        return seconds, steps


def end_case(
    state: CaseRuns, failure: WorkerFailure | None, report: CaseReport | None = None
) -> None:
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


def run_round(
    order: list[CaseRuns],
    round_index: int,
    timeout_s: float,
    on_phase: Callable[[str], None] | None,
    servers: ForkServers,
) -> None:
    runners: list[_Runner] = []
    workers: list[Worker] = []
    try:
        for state in order:
            case = state.request.case
            if on_phase:
                on_phase(f"run {round_index + 1}: building and warming up {case.label()}")
            request = state.request.sent
            assert isinstance(request, CaseRequest)
            if round_index > 0:  # FLOPs, profiles and traces are taken once, in the first run
                request = request.model_copy(
                    update={"count_flops": False, "profile_steps": 0, "trace_path": None}
                )
            elif outputs.keeps_outputs(case):  # and a user's model's outputs, for the check
                request = request.model_copy(update={"outputs_path": str(outputs.path_for(case))})
            if request.timing.compile_cache and request.compile_cache is None:
                request = request.model_copy(update={"compile_cache": str(compile_dir(case))})
            prepared = _start_run(state, request, round_index, timeout_s, servers, workers)
            if not isinstance(prepared, _Runner) and _cache_suspect(state, request, prepared):
                # A damaged compile cache fails every compiled case that reads it: the run
                # is tried once more compiling afresh, and the cache is discarded if that
                # run works (the failure was the cache's, not the model's).
                alone = request.timing.model_copy(update={"compile_cache": False})
                afresh = request.model_copy(update={"compile_cache": None, "timing": alone})
                retried = _start_run(state, afresh, round_index, timeout_s, servers, workers)
                if isinstance(retried, _Runner):
                    assert request.compile_cache is not None
                    state.warnings.append(_discard_cache(Path(request.compile_cache), prepared))
                prepared = retried
            if isinstance(prepared, _Runner):
                runners.append(prepared)
            else:
                end_case(state, *prepared)
        if runners:
            if on_phase:
                on_phase(
                    f"run {round_index + 1}: measuring "
                    + " | ".join(r.state.request.case.label() for r in runners)
                )
            # Measured in alternation, the runs take as long together as each alone
            # would one after another: each worker's time-out is counted from now.
            for runner in runners:
                runner.worker.deadline = time.monotonic() + timeout_s * len(runners)
            _measure(runners)
    finally:
        for worker in workers:
            worker.close()


_Failed = tuple[WorkerFailure | None, CaseReport | None]


def _start_run(
    state: CaseRuns,
    request: CaseRequest,
    round_index: int,
    timeout_s: float,
    servers: ForkServers,
    workers: list[Worker],
) -> _Runner | _Failed:
    """Start one run's worker, build and warm it up: ready to be timed, or what failed.
    Its time-out is its own, counted from its start: a variant that hung before it
    leaves it all of its time."""
    started = time.perf_counter()
    try:
        runs = state.request.plan.max_runs
        worker = start_worker(request, round_index, runs, timeout_s, servers)
    except Exception as exc:
        return WorkerFailure("error", f"cannot start a worker: {one_line(exc)}", ""), None
    workers.append(worker)
    try:
        worker.send(request)
        first = state.runs[0].steps_per_block if state.runs else None
        prepared, start_s = prepare_run(worker, request.timing, started, first)
    except WorkerGone as gone:
        return gone.failure, None
    except WorkerReported as reported:
        return None, CaseReport.model_validate(reported.report)
    except Exception as exc:
        return _broken(worker, exc), None
    return _Runner(state, worker, prepared, start_s)


def _cache_suspect(state: CaseRuns, request: CaseRequest, failed: _Failed) -> bool:
    """Whether a failed run may have failed on the shared compile cache: a compiled mode
    that read a cache holding programs, failing with an error (not a timeout or lack of
    memory) before any run of the case worked."""
    failure, report = failed
    status = failure.status if failure else (report.status if report else None)
    case = request.case
    folder = request.compile_cache
    return (
        status == "error"
        and not state.runs
        and folder is not None
        and case.mode not in get_framework(case.framework).eager_modes
        and any(p.is_file() for p in Path(folder).rglob("*"))
    )


def _discard_cache(folder: Path, failed: _Failed) -> str:
    """Remove a compile cache a run failed on and worked without; what to tell the user.
    Renamed first, so no later worker reads it half removed."""
    failure, report = failed
    error = failure.error if failure else str(report.error if report else "")
    said = (error.strip().splitlines() or ["no message"])[0][:300]
    aside = folder.with_name(f"{folder.name}.damaged-{os.getpid()}")
    try:
        folder.rename(aside)
        shutil.rmtree(aside, ignore_errors=True)
        done = "it was removed and the programs compiled afresh"
    except OSError as exc:
        done = (
            f"it could not be removed ({one_line(exc)}): remove it, or run with --no-compile-cache"
        )
    return (
        f"the compile cache {folder} failed this case ({said}) and the case ran without it: {done}"
    )


@functools.cache
def _host_fingerprint() -> str:
    """This machine, for the compile cache's key: its name, CPU and cores (a program
    compiled for another machine is never loaded here)."""
    host = host_environment()
    return hashlib.sha256(host_key(host).encode()).hexdigest()[:12]


def compile_dir(case: Case) -> Path:
    """Where a case's compiled programs are kept between commands (issue "first
    contact": start-up paid once): the user's cache (fwbench.cache), keyed by this host,
    the framework's version and the device, so that a program compiled by another
    version or for another machine is never loaded. Every run of every command shares
    it; each result records whether its compilations hit it (Adapter.compile_cache_state)."""
    version = get_framework(case.framework).version() or "unknown"
    folder = f"{case.framework}-{version}-{case.device}"
    return cache_dir() / "compile" / _host_fingerprint() / folder


def start_worker(
    request: CaseRequest,
    round_index: int,
    runs: int,
    timeout_s: float,
    servers: ForkServers,
) -> Worker:
    """A fresh worker for one run: the ranks of a data-parallel case, else one process
    forked from the framework's fork server where it can fork (ForkServers.for_case),
    else spawned. Its time-out counts from now: a fork server started for it had its
    own (READY_TIMEOUT_S) for importing the framework."""
    case = request.case
    if case.strategy:
        return RankGroup(request, time.monotonic() + timeout_s, timeout_s)
    env = case_env(case)
    server = servers.for_case(case, env, round_index, runs)
    deadline = time.monotonic() + timeout_s
    return WorkerProcess(f"case: {case.label()}", env, deadline, timeout_s, server)


def prepare_run(
    worker: Worker, config: RunTiming, started: float, steps_per_block: int | None = None
) -> tuple[Prepared, float]:
    """First step, warmup and block size (`timing.calibrate` under the case's rules; a
    case's later runs take its first run's `steps_per_block`), then the steady state. A
    single process calibrates itself, its warmup steps back to back; a RankGroup drives
    its ranks through the same rules in lockstep. Also the seconds the worker took to
    start (process, imports, device) before its build."""

    def answer(event: str) -> dict[str, Any]:
        message = worker.receive()
        if message["event"] != event:
            raise WorkerReported(message.get("report", {}))
        return message

    built = answer("built")
    start_s = max(0.0, time.perf_counter() - started - float(built.get("build_s", 0.0)))
    worker.send(
        {"op": "calibrate", "timing": config.model_dump(), "steps_per_block": steps_per_block}
    )
    prepared = Prepared(**answer("calibrated")["prepared"])
    worker.send({"op": "steady"})
    answer("steady")
    return prepared, start_s


def _measure(runners: list[_Runner]) -> None:
    longest = max((r.state.request for r in runners), key=lambda r: r.timing.run_time_s)
    stop = longest.plan.run_stop(longest.timing)
    tracking = [t for r in runners for t in r.state.tracking.values()]
    # Some trackers need a long enough window (energy counters, to be read reliably).
    window = max((t.min_window_s for t in tracking), default=0.0)
    if window > stop.min_time_s:
        stop = stop.model_copy(update={"min_time_s": window})
    if len(runners) > 1:
        for runner in runners:
            runner.alternate(longest.timing)
    workers_cpu = [load.LastSeen(r.worker.cpu_seconds) for r in runners]
    other_load = load.LoadWindow(load.launcher_and(workers_cpu))

    def seen(block: Callable[[], tuple[float, int]], cpu: load.LastSeen) -> Any:
        def read_after() -> tuple[float, int]:
            try:
                return block()
            finally:
                cpu()  # outside the block's own timing: the worker times its steps

        return read_after

    for tracker in tracking:
        tracker("start")
    try:
        found = steady(
            [seen(r.block, cpu) for r, cpu in zip(runners, workers_cpu, strict=True)],
            [r.prepared.steps_per_block for r in runners],
            stop,
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
            end_case(state, None, CaseReport.model_validate(run.error.report))
            return False
        if run.error is not None:
            raise run.error
        finishing = time.perf_counter()
        runner.worker.send({"op": "finish"})
        report = CaseReport.model_validate(runner.worker.receive()["report"])
        finish_s = time.perf_counter() - finishing
    except WorkerGone as gone:
        end_case(state, gone.failure)
        return False
    except Exception as exc:
        end_case(state, _broken(runner.worker, exc))
        return False
    if report.status != "ok":
        end_case(state, None, report)
        return False
    timing = finish(runner.prepared, run, state.request.timing)
    state.runs.append(
        Run(
            index=len(state.runs),
            median_s=timing.median_s,
            ci_low_s=timing.ci_low_s,
            ci_high_s=timing.ci_high_s,
            samples=timing.samples,
            build_s=report.build_s or 0.0,
            stop_reason=timing.stop_reason,
            launcher=runner.worker.launcher,
            other_cpu_cores=other,
            warnings=timing.warnings,
            start_s=runner.start_s,
            finish_s=finish_s,
            reopened=state.reopened,
            figures={
                name: RunFigure(samples=tuple(values), median_s=statistics.median(values))
                for name, values in runner.figures.items()
                if values
            },
            **{f.name: getattr(timing, f.name) for f in dataclasses.fields(Prepared)},
        )
    )
    if state.report is None:
        state.report = report
    else:
        _check_compiles(state, report)
    return True


def _broken(worker: Worker, exc: BaseException) -> WorkerFailure:
    """The driver could not talk to a worker (a garbled message, a reset connection):
    the run's failure, never the sweep's."""
    return WorkerFailure("error", f"driver lost the worker: {one_line(exc)}", worker.log_tail())


def step_estimate(prepared: Prepared) -> float:
    """Seconds a step, from warmup (else the first step; 0 when neither was timed)."""
    step = prepared.warmup_s / prepared.warmup_steps if prepared.warmup_steps else 0.0
    return step or prepared.first_step_s


def switch_blocks(prepared: Prepared, min_block_s: float) -> Prepared:
    """Blocks long enough that switching processes between them costs nothing measurable."""
    step = step_estimate(prepared)
    if step <= 0:
        return prepared
    steps = max(prepared.steps_per_block, math.ceil(min_block_s / step))
    return dataclasses.replace(prepared, steps_per_block=steps)


def warm_steps(step_s: float, min_warm_s: float) -> int:
    """Untimed steps before a block after a switch: one, or as many steps of `step_s` as
    fill min_warm_s. A process whose threads slept while another ran needs more than one
    short step to reach its steady speed again (docs/methodology.md, "Blocks after a
    switch")."""
    return max(1, math.ceil(min_warm_s / step_s)) if step_s > 0 else 1


def _check_compiles(state: CaseRuns, report: CaseReport) -> None:
    """Recompilations are read per run; the first run's are in its report's settings."""
    before = report.settings.get("compiles_after_warmup")
    after = report.settings.get("compiles_after_timing")
    if before is not None and after is not None and after > before:
        state.warnings.append(
            f"run {len(state.runs)} recompiled {after - before} time(s) inside its timed "
            "blocks: its steady state includes compilation"
        )
