"""Run worker requests in fresh processes on this machine.

One process per case (METHODOLOGY rule 14): global framework state never leaks from one
case into the next, and a crash or a hang takes only its own case down. Cases run alone
or as an interleaved group: each worker builds and warms up in turn, then the launcher
asks them for one timed block each, in alternation, so drift of a noisy machine hits all
of them alike (rule 15).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from fwbench.launch.executor import GroupDone, OnStart, OnStatus
from fwbench.launch.protocol import (
    CaseReport,
    CaseRequest,
    CountReport,
    CountRequest,
    PeakReport,
    PeakRequest,
)
from fwbench.measure import energy
from fwbench.measure.nvml import NvmlMemorySampler
from fwbench.measure.timing import Prepared, Timing, finish, steady

# Phrases frameworks print when they die of memory exhaustion instead of raising.
_OOM_PHRASES = (
    "out of memory",
    "oom when allocating",
    "can't allocate memory",
    "resourceexhausted",
)
_LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class WorkerFailure:
    """The worker left no report: it crashed, was killed, or timed out."""

    status: Literal["error", "oom", "timeout"]
    error: str
    log_tail: str


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
    env["PYTHONUNBUFFERED"] = "1"
    return env


class WorkerProcess:
    """One worker: send JSON lines to it, receive JSON lines from it, before a deadline."""

    def __init__(self, label: str, env: dict[str, str], deadline: float, timeout_s: float) -> None:
        self.deadline = deadline
        self.timeout_s = timeout_s  # as the user set it, for the message
        self._dir = Path(tempfile.mkdtemp(prefix="fwbench-"))
        self.log_path = self._dir / "worker.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                # The label only shows in `ps`, so a user can tell which case is running.
                [sys.executable, "-m", "fwbench.launch.worker", label],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                # Own process group: a time-out kills the worker and anything it spawned.
                start_new_session=True,
            )
        self._selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)

    def send(self, message: BaseModel | dict[str, Any]) -> None:
        text = message.model_dump_json() if isinstance(message, BaseModel) else json.dumps(message)
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(text.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerGone(self._failure()) from None

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
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
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerGone(self._failure())
        message: dict[str, Any] = json.loads(line)
        return message

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        # Ctrl-C in the CLI must not leave a worker running on the machine.
        self.kill()
        self._selector.close()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
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
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        return classify_exit(self.proc.returncode, self.log_tail())


def classify_exit(returncode: int, log_tail: str) -> WorkerFailure:
    looks_oom = any(p in log_tail.lower() for p in _OOM_PHRASES)
    if returncode < 0:
        name = signal.Signals(-returncode).name
        if name == "SIGKILL":
            return WorkerFailure(
                "oom",
                "worker killed by SIGKILL (the kernel's out-of-memory killer is the usual cause)",
                log_tail,
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


NO_ENERGY = energy.Energy(status="unavailable", reason="the case has no steady-state measurement")


@dataclass(frozen=True)
class CaseOutcome:
    """Everything the launcher learned about one case."""

    report: CaseReport | None  # None when the worker left no report
    failure: WorkerFailure | None
    timing: Timing | None
    energy: energy.Energy


class _Runner:
    """The launcher's side of one case in the steady state."""

    def __init__(self, request: CaseRequest, worker: WorkerProcess, prepared: Prepared) -> None:
        self.request = request
        self.worker = worker
        self.prepared = prepared
        counters, self.energy_reasons = energy.counters_for(request.case.device)
        self.energy = energy.EnergyAccumulator(counters)

    def block(self) -> float:
        started = self.energy.start()
        wall = time.perf_counter()
        self.worker.send({"op": "block"})
        message = self.worker.receive()
        if message["event"] != "block":
            raise WorkerReported(message.get("report", {}))
        self.energy.stop(started, time.perf_counter() - wall, self.prepared.steps_per_block)
        return float(message["seconds"])


def run_group(
    requests: list[CaseRequest],
    timeout_s: float,
    on_phase: Callable[[str], None] | None = None,
) -> list[CaseOutcome]:
    """Run cases in alternation (or one case alone); one outcome per request, in order.

    Every case gets `timeout_s` from the start of the group for each case in it.
    Data-parallel cases (a strategy) run alone, their ranks driven by
    fwbench.distributed.launch: interleaving would put two jobs' ranks on the same cores.
    """
    if any(r.case.strategy for r in requests):
        from fwbench.distributed.launch import run_distributed

        return [
            run_distributed(r, timeout_s, on_phase)
            if r.case.strategy
            else run_group([r], timeout_s, on_phase)[0]
            for r in requests
        ]
    deadline = time.monotonic() + timeout_s * len(requests)
    outcomes: dict[int, CaseOutcome] = {}
    runners: dict[int, _Runner] = {}
    workers: list[WorkerProcess] = []
    try:
        for i, request in enumerate(requests):
            if on_phase:
                on_phase(f"building and warming up {request.case.label()}")
            env = worker_env(request.case.threads, request.case.device)
            worker = WorkerProcess(f"case: {request.case.label()}", env, deadline, timeout_s)
            workers.append(worker)
            try:
                worker.send(request)
                message = worker.receive()
            except WorkerGone as gone:
                outcomes[i] = CaseOutcome(None, gone.failure, None, NO_ENERGY)
                continue
            if message["event"] == "report":
                report = CaseReport.model_validate(message["report"])
                outcomes[i] = CaseOutcome(report, None, None, NO_ENERGY)
                continue
            runners[i] = _Runner(request, worker, Prepared(**message["prepared"]))
        if runners:
            if on_phase:
                on_phase(
                    "measuring " + " | ".join(r.request.case.label() for r in runners.values())
                )
            outcomes |= _measure(runners)
    finally:
        for worker in workers:
            worker.close()
    return [outcomes[i] for i in range(len(requests))]


def _measure(runners: dict[int, _Runner]) -> dict[int, CaseOutcome]:
    config = max((r.request.timing for r in runners.values()), key=lambda c: c.max_time_s)
    if any(r.energy.counters for r in runners.values()):
        # Energy counters need a long enough window to be read reliably.
        config = config.model_copy(
            update={"min_time_s": max(config.min_time_s, energy.MIN_ENERGY_WINDOW_S)}
        )
    order = list(runners)
    devices = {runners[i].request.case.device for i in order}
    with NvmlMemorySampler("cuda" if "cuda" in devices else "cpu") as nvml:
        runs = steady(
            [runners[i].block for i in order],
            [runners[i].prepared.steps_per_block for i in order],
            config,
        )
    outcomes: dict[int, CaseOutcome] = {}
    for i, run in zip(order, runs, strict=True):
        runner = runners[i]
        batch = runner.request.case.batch_size
        try:
            if isinstance(run.error, WorkerReported):
                report = CaseReport.model_validate(run.error.report)
                outcomes[i] = CaseOutcome(report, None, None, NO_ENERGY)
                continue
            if run.error is not None:
                raise run.error
            runner.worker.send({"op": "finish"})
            message = runner.worker.receive()
        except WorkerGone as gone:
            outcomes[i] = CaseOutcome(None, gone.failure, None, NO_ENERGY)
            continue
        report = CaseReport.model_validate(message["report"])
        if nvml.peak_bytes is not None and report.memory is not None:
            device_memory = dict(report.memory.get("device") or {})
            device_memory["nvml_used_peak_bytes"] = nvml.peak_bytes
            report.memory["device"] = device_memory
        timing = (
            finish(runner.prepared, run, runner.request.timing) if report.status == "ok" else None
        )
        outcomes[i] = CaseOutcome(
            report, None, timing, energy.summarise(runner.energy, runner.energy_reasons, batch)
        )
    return outcomes


class LocalExecutor:
    """This machine: one group at a time, in order, so no two cases share the hardware."""

    def connect(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def run(
        self,
        groups: Sequence[Sequence[CaseRequest]],
        timeout_s: float,
        on_start: OnStart | None = None,
        on_status: OnStatus | None = None,
    ) -> Iterator[GroupDone]:
        for index, group in enumerate(groups):
            if on_start:
                for request in group:
                    on_start(request.case)
            yield GroupDone(index, run_group(list(group), timeout_s, on_status))
