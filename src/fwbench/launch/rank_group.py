"""The ranks of one data-parallel case, held by the measurement driver as one worker.

Every rank must take exactly the same number of steps, or a collective waits forever.
So the ranks make no timing decision: `RankGroup` answers the driver's `calibrate`
itself, running the warmup rules (`timing.calibrate`) over blocks it sends to every
rank, and passes each of the driver's other commands to all ranks at once, answering
with one reply for them all; a block's time is the slowest rank's (a step is done when
every replica is). The ranks talk JSON lines over a TCP socket (torchrun owns their
stdin and stdout), one connection per rank, each opened with a hello naming its rank.

Processes: DDP ranks are started by torchrun (`python -m torch.distributed.run`, one
process per replica, gloo on CPU, nccl on GPUs); MultiWorkerMirroredStrategy workers
are started directly, one per replica, each with its TF_CONFIG on localhost ports;
DataParallel and MirroredStrategy run in one process. A time-out, or any rank dying,
ends the run: every process of it is killed and the failure is the run's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel

from fwbench.catalog.strategies import get_strategy
from fwbench.launch.outcome import WorkerFailure
from fwbench.launch.process import (
    WorkerGone,
    WorkerReported,
    case_env,
    classify_exit,
    oom_killed_since,
    oom_kills,
    read_log,
)
from fwbench.launch.protocol import CaseReport, CaseRequest
from fwbench.measure import load
from fwbench.measure.timing import RunTiming, calibrate

LAUNCHER_ENV = "FWBENCH_LAUNCHER"  # host:port the ranks connect back to
_LOG_TAIL_LINES = 40
# After one rank fails, how long the launcher waits for the others to tell their side
# (a rank that crashed outright explains a peer's "connection closed" error).
_GRACE_S = 3.0


# What every rank answers to each command of the protocol (fwbench.launch.protocol).
_ANSWERS = {"case": "built", "block": "block", "overhead": "overhead", "steady": "steady"}


class _Reported(Exception):
    """A rank sent its final report where another answer was expected."""

    def __init__(self, report: CaseReport) -> None:
        super().__init__(report.error)
        self.report = report


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tf_config(ports: list[int], index: int) -> str:
    """TF_CONFIG of worker `index` of a cluster on localhost."""
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


@dataclass
class _Process:
    popen: subprocess.Popen[bytes]
    log: Path


class _Rank:
    """One rank's connection: JSON lines in both directions."""

    def __init__(self, sock: socket.socket, rank: int, pid: int) -> None:
        self.sock = sock
        self.rank = rank
        self.pid = pid
        self.buffer = b""
        self.proc: psutil.Process | None = None
        with contextlib.suppress(psutil.Error):
            self.proc = psutil.Process(pid)  # remembers the start time: no pid-reuse kills

    def send(self, message: dict[str, Any] | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message)
        self.sock.sendall(text.encode() + b"\n")

    def line(self) -> dict[str, Any] | None:
        if b"\n" not in self.buffer:
            return None
        raw, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(raw)
        return message


class RankGroup:
    """The processes and rank connections of one run of a data-parallel case, answering
    the driver as one worker (fwbench.launch.process.Worker): a command goes to every
    rank, and `receive` gathers one answer from each and returns them as one."""

    def __init__(self, request: CaseRequest, deadline: float, timeout_s: float) -> None:
        self.case = request.case
        strategy = get_strategy(str(self.case.strategy))
        assert strategy is not None  # the case was validated
        self.strategy = strategy
        self.launcher = "torchrun" if strategy.launch == "torchrun" else "spawn"
        self.nproc = self.strategy.process_count(self.case.replicas)
        self.deadline = deadline
        self.timeout_s = timeout_s
        self.oom_kills_at_start = oom_kills()  # what the kernel killed before: not ours
        self.dir = Path(tempfile.mkdtemp(prefix="fwbench-dist-"))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.processes: list[_Process] = []
        self.ranks: list[_Rank] = []
        self.selector = selectors.DefaultSelector()
        self.expect: str | None = None
        # A calibrate command to answer: its rules, and the block size a first run found.
        self.calibrating: tuple[RunTiming, int | None] | None = None
        self.finished = False  # every rank sent its final report: let them exit cleanly

    # the driver's side -------------------------------------------------------

    def send(self, message: BaseModel | dict[str, Any]) -> None:
        if isinstance(message, BaseModel):  # the request: start the ranks first
            if not self.processes:
                self._start()
            kind, text = str(getattr(message, "kind", "case")), message.model_dump_json()
        else:
            kind, text = str(message["op"]), json.dumps(message)
            if kind == "calibrate":
                # Ranks cannot calibrate on their own (their step counts must agree): the
                # rules run here, over blocks sent to all of them, when the answer is read.
                config = RunTiming.model_validate(message["timing"])
                self.calibrating = (config, message.get("steps_per_block"))
                return
        self.expect = _ANSWERS.get(kind, "report")
        for rank in self.ranks:
            try:
                rank.send(text)
            except OSError:
                raise WorkerGone(self._lost(rank)) from None

    def receive(self) -> dict[str, Any]:
        if self.calibrating is not None:
            (config, steps), self.calibrating = self.calibrating, None
            return self._calibrate(config, steps)
        try:
            replies = self._gather()
        except _Reported as reported:
            crashed = self._first_crash(_GRACE_S) if reported.report.status == "error" else None
            if crashed is not None:  # its peers died first: their crash is the cause
                raise WorkerGone(crashed) from None
            return {"event": "report", "report": reported.report.model_dump()}
        event = self.expect
        if event == "report":
            self.finished = True
            reports = [CaseReport.model_validate(m["report"]) for m in replies]
            return {"event": "report", "report": _combine(reports).model_dump()}
        if event in ("block", "overhead"):
            return {"event": event, "seconds": max(float(m["seconds"]) for m in replies)}
        return replies[0]

    def _calibrate(self, config: RunTiming, steps_per_block: int | None) -> dict[str, Any]:
        """`timing.calibrate` over the ranks in lockstep: the answer a single process
        gives to `calibrate`, or a rank's out-of-turn report."""

        def answer(message: dict[str, Any]) -> float:
            self.send(message)
            found = self.receive()
            if found["event"] == "report":
                raise WorkerReported(found["report"])
            return float(found["seconds"])

        try:
            prepared = calibrate(
                lambda steps: answer({"op": "block", "warm": 0, "steps": steps}),
                lambda: answer({"op": "overhead"}),
                config,
                steps_per_block,
            )
        except WorkerReported as reported:
            return {"event": "report", "report": reported.report}
        return {"event": "calibrated", "prepared": dataclasses.asdict(prepared)}

    def cpu_seconds(self) -> float:
        """CPU time of every process of the run (launchers, ranks and whatever they
        started) so far."""
        pids = [r.proc.pid for r in self.ranks if r.proc is not None]
        return load.tree_cpu_seconds(*pids, *(p.popen.pid for p in self.processes))

    def close(self) -> None:
        self._close(wait_s=30.0 if self.finished else 0.0)

    # starting ---------------------------------------------------------------

    def _start(self) -> None:
        label = f"case: {self.case.label()}"
        env = case_env(self.case)
        env |= self.strategy.env_for(self.case.replicas, env)
        env[LAUNCHER_ENV] = f"127.0.0.1:{self.server.getsockname()[1]}"
        # -P: a `torch.py` in the user's directory must not shadow the framework.
        worker = [sys.executable, "-P", "-m", "fwbench.distributed.worker", label]
        if self.strategy.launch == "torchrun":
            torchrun = [
                sys.executable,
                "-P",
                "-m",
                "torch.distributed.run",
                "--nnodes=1",
                f"--nproc-per-node={self.nproc}",
                "--master-addr=127.0.0.1",
                f"--master-port={free_port()}",
                "--max-restarts=0",
                *worker[2:],  # torchrun's children get PYTHONSAFEPATH instead of -P
            ]
            self._spawn(torchrun, env, "torchrun")
        elif self.strategy.launch == "tf_config":
            ports = [free_port() for _ in range(self.nproc)]
            for rank in range(self.nproc):
                rank_env = env | {
                    "TF_CONFIG": tf_config(ports, rank),
                    "RANK": str(rank),
                    "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": str(self.nproc),
                }
                if self.case.device == "cuda":
                    rank_env["CUDA_VISIBLE_DEVICES"] = str(rank)  # one GPU per worker
                self._spawn(worker, rank_env, f"rank-{rank}")
        else:
            self._spawn(worker, env | {"RANK": "0", "WORLD_SIZE": "1"}, "rank-0")
        self._accept()

    def _spawn(self, argv: list[str], env: dict[str, str], name: str) -> None:
        log = self.dir / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a time-out kills the whole group
            )
        self.processes.append(_Process(popen, log))

    def _accept(self) -> None:
        self.server.setblocking(False)
        pending: dict[socket.socket, bytes] = {}
        self.selector.register(self.server, selectors.EVENT_READ)
        while len(self.ranks) < self.nproc:
            for key, _ in self._select():
                if key.fileobj is self.server:
                    conn, _ = self.server.accept()
                    conn.setblocking(True)
                    pending[conn] = b""
                    self.selector.register(conn, selectors.EVENT_READ)
                    continue
                conn = key.fileobj  # type: ignore[assignment]
                data = conn.recv(65536)
                if not data:
                    self.selector.unregister(conn)
                    conn.close()
                    pending.pop(conn, None)
                    continue
                pending[conn] += data
                if b"\n" in pending[conn]:
                    raw, rest = pending.pop(conn).split(b"\n", 1)
                    hello = json.loads(raw)
                    rank = _Rank(conn, int(hello["rank"]), int(hello["pid"]))
                    rank.buffer = rest
                    self.selector.modify(conn, selectors.EVENT_READ, rank)
                    self.ranks.append(rank)
        self.selector.unregister(self.server)
        self.ranks.sort(key=lambda r: r.rank)

    # talking ----------------------------------------------------------------

    def _select(self) -> list[tuple[selectors.SelectorKey, int]]:
        """Wait for input; end the run when the deadline passes or a process dies."""
        while True:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerGone(self._timeout())
            events = self.selector.select(timeout=min(remaining, 1.0))
            if events:
                return events
            # A process that failed before its ranks connected (or answered) says
            # nothing more; a clean exit only follows a rank's final report.
            failed = [p for p in self.processes if p.popen.poll() not in (None, 0)]
            if failed:
                raise WorkerGone(self._crashed(failed[0]))

    def _gather(self) -> list[dict[str, Any]]:
        """One reply from every rank; a rank's final report out of turn raises
        _Reported, a rank's end WorkerGone."""
        replies: dict[int, dict[str, Any]] = {}
        while len(replies) < len(self.ranks):
            for rank in self.ranks:
                message = rank.line() if rank.rank not in replies else None
                if message is not None:
                    if message["event"] != self.expect:
                        raise _Reported(CaseReport.model_validate(message["report"]))
                    replies[rank.rank] = message
            if len(replies) == len(self.ranks):
                break
            for key, _ in self._select():
                rank = key.data
                if rank is None:
                    continue
                data = rank.sock.recv(65536)
                if not data:
                    if rank.rank in replies:  # answered, then left: its final report
                        self.selector.unregister(rank.sock)
                        continue
                    raise WorkerGone(self._lost(rank))
                rank.buffer += data
        return [replies[r.rank] for r in self.ranks]

    # failures ---------------------------------------------------------------

    def _first_crash(self, wait_s: float) -> WorkerFailure | None:
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            for proc in self.processes:
                code = proc.popen.poll()
                if code is not None and code != 0:
                    return self._crashed(proc)
            time.sleep(0.1)
        return None

    def _lost(self, rank: _Rank) -> WorkerFailure:
        """Rank `rank` closed its connection without a report: find how its process ended."""
        for _ in range(150):  # up to 15 s for torchrun to notice and exit
            dead = [p for p in self.processes if p.popen.poll() is not None]
            if dead:
                dead.sort(key=lambda p: p.popen.returncode == 0)  # a failure explains most
                return self._crashed(dead[0])
            time.sleep(0.1)
        return WorkerFailure(
            "error", f"rank {rank.rank} closed its connection without a result", self.log_tail()
        )

    def _crashed(self, proc: _Process) -> WorkerFailure:
        code = proc.popen.returncode
        killed = oom_killed_since(self.oom_kills_at_start)
        failure = classify_exit(code if code is not None else -1, read_log(proc.log), killed)
        if killed and failure.status != "oom":
            # torchrun exits with 1 when the kernel kills one of its ranks for memory.
            return WorkerFailure(
                "oom",
                f"a rank was killed by the kernel's out-of-memory killer ({proc.log.stem} "
                f"exited with code {code})",
                self.log_tail(),
            )
        # torchrun exits with 1 when a rank dies; say which launcher saw it.
        error = failure.error.replace("worker", f"{proc.log.stem}", 1)
        return WorkerFailure(failure.status, error, self.log_tail())

    def _timeout(self) -> WorkerFailure:
        self._kill()
        return WorkerFailure(
            "timeout",
            f"no result after {self.timeout_s:g} s; all {self.nproc} rank(s) stopped",
            self.log_tail(),
        )

    def log_tail(self) -> str:
        parts = []
        for proc in self.processes:
            try:
                lines = proc.log.read_text(errors="replace").splitlines()
            except OSError:
                continue
            parts.append(f"--- {proc.log.stem} ---")
            parts += lines[-_LOG_TAIL_LINES // max(1, len(self.processes)) :]
        return "\n".join(parts)

    # ending -----------------------------------------------------------------

    def _kill(self) -> None:
        for rank in self.ranks:  # torchrun's children run in sessions of their own
            if rank.proc is not None:
                with contextlib.suppress(psutil.Error):
                    rank.proc.kill()
        for proc in self.processes:
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.popen.pid, signal.SIGKILL)
            proc.popen.wait()

    def _close(self, wait_s: float) -> None:
        # Ranks exit when their connection closes (fwbench.distributed.worker), so none
        # leaves before every rank has reported.
        for rank in self.ranks:
            with contextlib.suppress(OSError):
                rank.sock.close()
        end = time.monotonic() + wait_s
        for proc in self.processes:  # a clean exit first: ranks tear down their groups
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=max(0.0, end - time.monotonic()))
        self._kill()
        self.selector.close()
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _combine(reports: list[CaseReport]) -> CaseReport:
    """Rank 0's report, with what differs between ranks recorded beside it."""
    first = reports[0]
    failed = next((r for r in reports if r.status != "ok"), None)
    if failed is not None:
        return failed
    info = dict(first.distributed or {})
    memory = [r.tracked.get("memory") for r in reports]
    peaks = [m["host_peak_bytes"] for m in memory if m]
    if peaks:
        info["host_peak_bytes_per_rank"] = peaks
    comm = [(r.distributed or {}).get("communication") for r in reports]
    in_flight = [c.get("in_flight_s") for c in comm if c]
    if len(reports) > 1 and all(v is not None for v in in_flight):
        info["communication_in_flight_s_per_rank"] = in_flight
    return first.model_copy(update={"distributed": info})
