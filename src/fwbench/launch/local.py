"""Run worker requests in fresh processes on this machine.

A case is measured in several runs, each a fresh worker process (METHODOLOGY rules 14
and 16): global framework state never leaks from one run or case into the next, a crash
or a hang takes only its own case down, and the spread between runs is measured rather
than hidden. Runs are made in rounds: in each round every case of the group gets one
run, the workers build and warm up in turn, then the launcher asks them for one timed
block each, in alternation (each block after a switch begins with one untimed step, so
a cold cache is not timed: rule 17), so a noisy machine's drift hits all variants
alike. The order of the cases alternates from round to round (ABBA). Rounds go on until
every case's interval over its runs is precise enough or its budget ends
(fwbench.measure.runs).

Workers are forked from a per-framework fork server (fwbench.launch.forkserver), which
has imported the framework once; GPU cases and a refused server spawn them instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel

from fwbench.launch.executor import GroupDone, OnStart, OnStatus
from fwbench.launch.forkserver import ForkServer, ForkServerError, ForkServers
from fwbench.launch.outcome import CaseOutcome, MeasuredRun, WorkerFailure
from fwbench.launch.protocol import (
    CaseReport,
    CaseRequest,
    CountReport,
    CountRequest,
    PeakReport,
    PeakRequest,
)
from fwbench.measure import energy
from fwbench.measure import runs as case_runs
from fwbench.measure.nvml import NvmlMemorySampler
from fwbench.measure.timing import Prepared, TimingConfig, finish, steady

# Phrases frameworks print when they die of memory exhaustion instead of raising.
_OOM_PHRASES = (
    "out of memory",
    "oom when allocating",
    "can't allocate memory",
    "resourceexhausted",
)
_LOG_TAIL_LINES = 40


class WorkerGone(Exception):
    def __init__(self, failure: WorkerFailure) -> None:
        super().__init__(failure.error)
        self.failure = failure


class WorkerReported(Exception):
    """The worker sent its final report where another message was expected."""

    def __init__(self, report: dict[str, Any]) -> None:
        super().__init__(report.get("error") or report.get("status"))
        self.report = report


def worker_env(threads: int | None, device: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if threads is not None:
        # OpenMP / MKL pools are created at import, before the adapter can set threads.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
    if device == "cpu":
        # A CPU case must not initialise (or reserve memory on) a GPU.
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        # CUDA's own order (fastest first) may differ from NVML's (PCI bus): in PCI order
        # an index names one device for the worker and for the NVML trackers alike.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Like -P: the user's working directory is not on a worker's path, so a `torch.py`
    # there cannot shadow the framework (torchrun's children get it this way).
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


class WorkerProcess:
    """One worker: send JSON lines to it, receive JSON lines from it, before a deadline.

    Forked by `server` when one is given (and it still works), else spawned; either way
    in a process group of its own, with its stderr in a log kept for the result.
    """

    def __init__(
        self,
        label: str,
        env: dict[str, str],
        deadline: float,
        timeout_s: float,
        server: ForkServer | str | None = None,
    ) -> None:
        self.deadline = deadline
        self.timeout_s = timeout_s  # as the user set it, for the message
        self.oom_kills_at_start = oom_kills()
        self._dir = Path(tempfile.mkdtemp(prefix="fwbench-"))
        self.log_path = self._dir / "worker.log"
        # A forked worker's command line is its server's: the label is kept beside its log
        # (`worker_label` reads it back from the process).
        (self._dir / "label").write_text(label)
        self.proc: subprocess.Popen[bytes] | None = None
        self.server: ForkServer | None = None
        why_not = server if isinstance(server, str) else None
        if isinstance(server, ForkServer):
            try:
                forked = server.fork(label, self.log_path)
            except ForkServerError as exc:
                why_not = str(exc)
            else:
                self.server, self.pid = server, forked.pid
                self.stdin, self.stdout = forked.stdin, forked.stdout
                self.launcher = "fork-server"
        if self.server is None:
            with self.log_path.open("wb") as log:
                self.proc = subprocess.Popen(
                    # -P: a `torch.py` in the user's directory must not shadow the
                    # framework. The label only shows in `ps`.
                    [sys.executable, "-P", "-m", "fwbench.launch.worker", label],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=env,
                    # Own process group: a time-out kills the worker and its children.
                    start_new_session=True,
                )
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.pid, self.stdin, self.stdout = self.proc.pid, self.proc.stdin, self.proc.stdout
            self.launcher = f"spawn ({why_not})" if why_not else "spawn"
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.stdout, selectors.EVENT_READ)

    def send(self, message: BaseModel | dict[str, Any]) -> None:
        text = message.model_dump_json() if isinstance(message, BaseModel) else json.dumps(message)
        try:
            self.stdin.write(text.encode() + b"\n")
            self.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerGone(self._failure()) from None

    def receive(self) -> dict[str, Any]:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or not self._selector.select(timeout=remaining):
            self.kill()
            raise WorkerGone(
                WorkerFailure(
                    "timeout",
                    f"no result after {self.timeout_s:g} s; worker stopped",
                    self.log_tail(),
                )
            )
        line = self.stdout.readline()
        if not line:
            raise WorkerGone(self._failure())
        message: dict[str, Any] = json.loads(line)
        return message

    def cpu_seconds(self) -> float:
        """CPU time the worker has used so far (0 once it is gone)."""
        try:
            times = psutil.Process(self.pid).cpu_times()
        except psutil.Error:
            return 0.0
        return float(times.user + times.system + times.children_user + times.children_system)

    def returncode(self, wait_s: float) -> int | None:
        if self.proc is not None:
            try:
                return self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                return None
        assert self.server is not None
        return self.server.wait(self.pid, wait_s)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.returncode(10.0)

    def close(self) -> None:
        # Ctrl-C in the CLI must not leave a worker running on the machine.
        self.kill()
        self._selector.close()
        for stream in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-_LOG_TAIL_LINES:])

    def _failure(self) -> WorkerFailure:
        code = self.returncode(10.0)
        if code is None:
            self.kill()
            code = self.returncode(10.0)
        now = oom_kills()
        killed = (
            None
            if now is None or self.oom_kills_at_start is None
            else now > self.oom_kills_at_start
        )
        return classify_exit(code if code is not None else -signal.SIGKILL, self.log_tail(), killed)


def oom_kills(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """OOM kills so far in this process's cgroup (v2 memory.events), or None if unreadable.
    Workers share the launcher's cgroup: a rise while one ran means the kernel killed it."""
    try:
        line = Path("/proc/self/cgroup").read_text().splitlines()[0]
        events = cgroup_root / line.split("::", 1)[1].lstrip("/") / "memory.events"
        for row in events.read_text().splitlines():
            key, _, value = row.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, IndexError, ValueError):
        return None
    return None


def worker_label(pid: int) -> str | None:
    """The case label of a running worker (forked or spawned), from the folder of the log
    its stderr goes to; None for any other process."""
    try:
        log = Path(os.readlink(f"/proc/{pid}/fd/2"))
        return (log.parent / "label").read_text() if log.name == "worker.log" else None
    except OSError:
        return None


def classify_exit(returncode: int, log_tail: str, oom_killed: bool | None = None) -> WorkerFailure:
    """Why a worker ended without a report. A SIGKILL is the out-of-memory killer's only
    when the cgroup's OOM-kill count says so (`oom_killed`); otherwise it is said as is."""
    looks_oom = any(p in log_tail.lower() for p in _OOM_PHRASES)
    if returncode < 0:
        name = signal.Signals(-returncode).name
        if name == "SIGKILL" and oom_killed:
            return WorkerFailure(
                "oom", "worker killed by the kernel's out-of-memory killer", log_tail
            )
        if name == "SIGKILL":
            cause = (
                "not by the out-of-memory killer: the cgroup counted no OOM kill"
                if oom_killed is False
                else "cause unknown: the cgroup's OOM-kill count is not readable here"
            )
            return WorkerFailure(
                "oom" if looks_oom else "error", f"worker killed by SIGKILL ({cause})", log_tail
            )
        what = f"worker crashed: killed by {name}"
    else:
        last = next((ln for ln in reversed(log_tail.splitlines()) if ln.strip()), "")
        what = f"worker exited with code {returncode} without a result: {last.strip()[:300]}"
    return WorkerFailure("oom" if looks_oom else "error", what, log_tail)


def _one_shot(
    request: BaseModel, label: str, env: dict[str, str], timeout_s: float
) -> dict[str, Any] | WorkerFailure:
    worker = WorkerProcess(label, env, time.monotonic() + timeout_s, timeout_s)
    try:
        worker.send(request)
        return worker.receive()["report"]  # type: ignore[no-any-return]
    except WorkerGone as gone:
        return gone.failure
    finally:
        worker.close()


def run_count(request: CountRequest, timeout_s: float) -> CountReport | WorkerFailure:
    out = _one_shot(request, f"count: {request.framework}", worker_env(None, "cpu"), timeout_s)
    return out if isinstance(out, WorkerFailure) else CountReport.model_validate(out)


def run_peak(request: PeakRequest, timeout_s: float) -> PeakReport | WorkerFailure:
    env = worker_env(request.threads, request.device)
    out = _one_shot(request, f"peak: {request.framework}", env, timeout_s)
    return out if isinstance(out, WorkerFailure) else PeakReport.model_validate(out)


class MachineBusy(Exception):
    """--require-idle: other processes kept the machine busy past the wait."""


@dataclass
class _Case:
    """The launcher's state of one case of a group, across its runs."""

    request: CaseRequest
    counters: list[energy.EnergyCounter]
    energy_reasons: list[str]
    accumulator: energy.EnergyAccumulator
    runs: list[MeasuredRun] = field(default_factory=list)
    report: CaseReport | None = None
    ended: CaseOutcome | None = None  # a failure, or a report without a measurement
    stop: str | None = None
    warnings: list[str] = field(default_factory=list)
    nvml_peak: int | None = None

    @classmethod
    def of(cls, request: CaseRequest) -> _Case:
        counters, reasons = energy.counters_for(request.case.device)
        return cls(request, counters, reasons, energy.EnergyAccumulator(counters))

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
            )
            for r in self.runs
        ]

    def outcome(self) -> CaseOutcome:
        if self.ended is not None:
            return self.ended
        assert self.report is not None
        report = self.report
        if self.nvml_peak is not None and report.memory is not None:
            device_memory = dict(report.memory.get("device") or {})
            device_memory["nvml_used_peak_bytes"] = self.nvml_peak
            report.memory["device"] = device_memory
        config = self.request.timing
        stop = self.stop or "failed"
        return CaseOutcome(
            report,
            None,
            tuple(self.runs),
            energy.summarise(self.accumulator, self.energy_reasons, self.request.case.batch_size),
            stop,
            (*self.warnings, *case_runs.warnings(self.figures(), stop, config)),
        )


class _Runner:
    """The launcher's side of one run in the steady state."""

    def __init__(self, state: _Case, worker: WorkerProcess, prepared: Prepared) -> None:
        self.state = state
        self.worker = worker
        self.prepared = prepared
        # One untimed step before each block when blocks alternate between processes, and
        # blocks of at least min_block_s then.
        self.warm = 0
        self.min_block_s = 0.0

    def block(self) -> tuple[float, int]:
        steps = self.prepared.steps_per_block
        started = self.state.accumulator.start()
        wall = time.perf_counter()
        self.worker.send({"op": "block", "warm": self.warm, "steps": steps})
        message = self.worker.receive()
        if message["event"] != "block":
            raise WorkerReported(message.get("report", {}))
        seconds = float(message["seconds"])
        self.state.accumulator.stop(started, time.perf_counter() - wall, steps)
        if self.warm and 0 < seconds < self.min_block_s:
            # Warmup's estimate of a step was high: lengthen the blocks that follow.
            longer = math.ceil(steps * self.min_block_s / seconds * 1.1)
            self.prepared = dataclasses.replace(self.prepared, steps_per_block=longer)
        return seconds, steps


class _Group:
    """A group's cases across their rounds of runs: one round at a time, so rounds of
    several groups can take turns (LocalExecutor's spread)."""

    def __init__(self, requests: list[CaseRequest]) -> None:
        self.states = [_Case.of(r) for r in requests]
        self.rounds = 0
        self.max_rounds = max(r.timing.max_runs for r in requests)

    @property
    def active(self) -> bool:
        return self.rounds < self.max_rounds and any(s.active for s in self.states)

    def round(
        self, timeout_s: float, on_phase: Callable[[str], None] | None, servers: ForkServers
    ) -> None:
        active = [s for s in self.states if s.active]
        order = active if self.rounds % 2 == 0 else active[::-1]  # ABBA
        try:
            _wait_until_idle(order[0].request.timing, on_phase)
        except MachineBusy as exc:
            for state in active:
                _end(state, WorkerFailure("error", str(exc), ""))
            self.rounds = self.max_rounds
            return
        _round(order, self.rounds, timeout_s, on_phase, servers)
        for state in active:
            if state.active:
                state.stop = case_runs.stop_reason(state.figures(), state.request.timing)
        self.rounds += 1

    def outcomes(self) -> list[CaseOutcome]:
        return [state.outcome() for state in self.states]


def run_group(
    requests: list[CaseRequest],
    timeout_s: float,
    on_phase: Callable[[str], None] | None = None,
    servers: ForkServers | None = None,
) -> list[CaseOutcome]:
    """Measure a group of cases in rounds of runs (one case alone, or every variant of one
    workload in alternation); one outcome per request, in order.

    Each run of a case gets `timeout_s`. Data-parallel cases (a strategy) run alone, their
    ranks driven by fwbench.distributed.launch: interleaving would put two jobs' ranks on
    the same cores.
    """
    if any(r.case.strategy for r in requests):
        return [
            _distributed(r, timeout_s, on_phase)
            if r.case.strategy
            else run_group([r], timeout_s, on_phase, servers)[0]
            for r in requests
        ]
    owned = servers is None
    if servers is None:
        servers = ForkServers(Path(tempfile.mkdtemp(prefix="fwbench-servers-")))
    group = _Group(requests)
    try:
        while group.active:
            group.round(timeout_s, on_phase, servers)
    finally:
        if owned:
            shutil.rmtree(servers.directory, ignore_errors=True)
            servers.close()
    return group.outcomes()


def _distributed(
    request: CaseRequest, timeout_s: float, on_phase: Callable[[str], None] | None
) -> CaseOutcome:
    """A data-parallel case: its runs one after another, each a fresh set of ranks."""
    from fwbench.distributed.launch import run_distributed

    state = _Case.of(request)
    first: CaseOutcome | None = None
    while state.active:
        found = run_distributed(request, timeout_s, on_phase)
        if not found.runs:
            _end(state, found.failure, found.report)
            break
        first = first or found
        run = found.runs[0]
        state.runs.append(run)
        state.report = state.report or found.report
        state.stop = case_runs.stop_reason(state.figures(), request.timing)
    if state.ended is not None or first is None:
        return state.outcome()
    outcome = state.outcome()
    # Energy: the first run's (each set of ranks reads its own counters).
    return CaseOutcome(
        outcome.report, None, outcome.runs, first.energy, outcome.stop_reason, outcome.warnings
    )


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
    workers: list[WorkerProcess] = []
    try:
        for state in order:
            case = state.request.case
            if on_phase:
                on_phase(f"run {round_index + 1}: building and warming up {case.label()}")
            env = worker_env(case.threads, case.device)
            # CUDA does not survive a fork once any import has touched the driver: GPU
            # workers are spawned.
            server = servers.get(case.framework, env, round_index) if case.device == "cpu" else None
            request = state.request
            if round_index > 0:  # FLOPs and profiles are taken once, in the first run
                request = request.model_copy(update={"count_flops": False, "profile_steps": 0})
            worker = WorkerProcess(f"case: {case.label()}", env, deadline, timeout_s, server)
            workers.append(worker)
            try:
                worker.send(request)
                message = worker.receive()
            except WorkerGone as gone:
                _end(state, gone.failure)
                continue
            if message["event"] == "report":
                report = CaseReport.model_validate(message["report"])
                _end(state, None, report)
                continue
            runners.append(_Runner(state, worker, Prepared(**message["prepared"])))
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


def _busy_cpu_seconds() -> float:
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


def _own_cpu_seconds() -> float:
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


def _other_load(workers: Sequence[WorkerProcess], seconds: float) -> float:
    """Cores' worth of CPU used by processes other than fwbench's over `seconds`."""
    busy, own = _busy_cpu_seconds(), _own_cpu_seconds() + sum(w.cpu_seconds() for w in workers)
    time.sleep(seconds)
    busy2 = _busy_cpu_seconds()
    own2 = _own_cpu_seconds() + sum(w.cpu_seconds() for w in workers)
    return max(0.0, ((busy2 - busy) - (own2 - own)) / seconds)


IDLE_PROBE_S = 0.5
IDLE_WAIT_S = 30.0


def _wait_until_idle(config: TimingConfig, on_phase: Callable[[str], None] | None) -> None:
    if not config.require_idle:
        return
    deadline = time.monotonic() + IDLE_WAIT_S
    while True:
        load = _other_load([], IDLE_PROBE_S)
        if load <= config.busy_cores:
            return
        if time.monotonic() > deadline:
            raise MachineBusy(
                f"machine busy: other processes used {load:.2f} cores (over "
                f"{config.busy_cores:g}) for {IDLE_WAIT_S:g} s; --require-idle refused to measure"
            )
        if on_phase:
            on_phase(f"waiting for an idle machine: other processes use {load:.2f} cores")


def _measure(runners: list[_Runner]) -> None:
    config = max((r.state.request.timing for r in runners), key=lambda c: c.run_time_s)
    run_config = config.for_run()
    if any(r.state.counters for r in runners):
        # Energy counters need a long enough window to be read reliably.
        run_config = run_config.model_copy(
            update={"min_time_s": max(run_config.min_time_s, energy.MIN_ENERGY_WINDOW_S)}
        )
    if len(runners) > 1:
        for runner in runners:
            runner.warm = 1
            runner.min_block_s = config.min_switch_block_s
            runner.prepared = _switch_blocks(runner.prepared, config.min_switch_block_s)
    devices = {r.state.request.case.device for r in runners}
    workers = [r.worker for r in runners]
    busy, own = _busy_cpu_seconds(), _own_cpu_seconds() + sum(w.cpu_seconds() for w in workers)
    wall = time.perf_counter()
    with NvmlMemorySampler("cuda" if "cuda" in devices else "cpu") as nvml:
        found = steady(
            [r.block for r in runners], [r.prepared.steps_per_block for r in runners], run_config
        )
    elapsed = time.perf_counter() - wall
    own2 = _own_cpu_seconds() + sum(w.cpu_seconds() for w in workers)
    other = max(0.0, ((_busy_cpu_seconds() - busy) - (own2 - own)) / elapsed) if elapsed else None
    for runner, run in zip(runners, found, strict=True):
        state = runner.state
        try:
            if isinstance(run.error, WorkerReported):
                _end(state, None, CaseReport.model_validate(run.error.report))
                continue
            if run.error is not None:
                raise run.error
            runner.worker.send({"op": "finish"})
            message = runner.worker.receive()
        except WorkerGone as gone:
            _end(state, gone.failure)
            continue
        report = CaseReport.model_validate(message["report"])
        if report.status != "ok":
            _end(state, None, report)
            continue
        if nvml.peak_bytes is not None:
            state.nvml_peak = max(state.nvml_peak or 0, nvml.peak_bytes)
        timing = finish(runner.prepared, run, state.request.timing)
        launcher = runner.worker.launcher
        state.runs.append(MeasuredRun(timing, report.build_s or 0.0, launcher, other))
        if state.report is None:
            state.report = report
        else:
            _check_compiles(state, report)


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

    def __init__(self, spread: int = 1) -> None:
        if spread < 1:
            raise ValueError(f"spread: must be 1 or more (got {spread})")
        self.spread = spread

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
        try:
            window: list[tuple[int, _Group]] = []
            for index, group in enumerate(groups):
                if on_start:
                    for request in group:
                        on_start(request.case)
                if self.spread == 1 or any(r.case.strategy for r in group):
                    # Data-parallel groups run alone, whole (their ranks fill the cores).
                    yield GroupDone(index, run_group(list(group), timeout_s, on_status, servers))
                    continue
                window.append((index, _Group(list(group))))
                if len(window) == self.spread:
                    yield from _take_turns(window, timeout_s, on_status, servers)
                    window = []
            yield from _take_turns(window, timeout_s, on_status, servers)
        finally:
            servers.close()
            shutil.rmtree(directory, ignore_errors=True)


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
