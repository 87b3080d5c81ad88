"""Worker processes on this machine: start one (forked from a fork server, or spawned),
talk JSON lines to it before a deadline, and say why it ended when it left no report.

The driver (fwbench.launch.local: a case's rounds in fwbench.launch.rounds, a serving
point's in fwbench.launch.serving) holds its workers through this; one-shot requests
(parameter and FLOP counts, peak throughput) run here whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from pydantic import BaseModel

from fwbench.case import Case
from fwbench.launch.forkserver import READY_TIMEOUT_S, ForkServer, ForkServerError
from fwbench.launch.outcome import WorkerFailure
from fwbench.launch.protocol import CountReport, CountRequest, PeakReport, PeakRequest
from fwbench.measure import load

# Phrases frameworks print when they die of memory exhaustion instead of raising.
_OOM_PHRASES = (
    "out of memory",
    "oom when allocating",
    "can't allocate memory",
    "resourceexhausted",
)
_LOG_TAIL_LINES = 40
# A native library's last words before it aborts: glog's fatal lines (`F1128 12:00:00`,
# or `F0000 00:00:...` before absl's log is set up), a failed CHECK, C++'s terminate.
_FATAL_LINE = re.compile(
    r"^F\d{4} |Check failed|terminate called|Fatal Python error|Segmentation fault"
)


class WorkerGone(Exception):
    def __init__(self, failure: WorkerFailure) -> None:
        super().__init__(failure.error)
        self.failure = failure


class WorkerReported(Exception):
    """The worker sent its final report where another message was expected."""

    def __init__(self, report: dict[str, Any]) -> None:
        super().__init__(report.get("error") or report.get("status"))
        self.report = report


class WorkersStopped(Exception):
    """A worker was asked for after the calls of `in_threads` were stopped."""


class _Threads:
    """The workers started by the calls of one `in_threads`, which stop() kills, and lets
    start no more: a signal reaches only the main thread, so the `finally` blocks that
    close workers elsewhere never run in the threads that hold these."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: set[WorkerProcess] = set()
        self.stopped = False

    def add(self, worker: WorkerProcess) -> bool:
        with self._lock:
            if not self.stopped:
                self._workers.add(worker)
            return not self.stopped

    def discard(self, worker: WorkerProcess) -> None:
        with self._lock:
            self._workers.discard(worker)

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            workers = list(self._workers)
        for worker in workers:
            # Killed only: the thread that holds it reaps it and removes its folder.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.pid, signal.SIGKILL)


# The _Threads of the in_threads call the current thread runs for, if any.
_local = threading.local()
K = TypeVar("K")
T = TypeVar("T")


def in_threads(calls: Mapping[K, Callable[[], T]]) -> dict[K, T]:
    """Each call's result, the calls run at once in threads of their own (each waits on
    workers). Interrupted while waiting (Ctrl-C, SIGTERM) or failing, it kills the
    workers the calls hold and refuses them new ones before it waits for the threads, so
    that it ends at once instead of when the slowest worker's time-out runs out."""
    if not calls:
        return {}
    threads = _Threads()

    def run(call: Callable[[], T]) -> T:
        _local.group = threads
        try:
            return call()
        finally:
            _local.group = None

    pool = ThreadPoolExecutor(len(calls))
    try:
        futures = {key: pool.submit(run, call) for key, call in calls.items()}
        return {key: future.result() for key, future in futures.items()}
    except BaseException:
        threads.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class Worker(Protocol):
    """What the measurement driver holds of a case's run: one worker process, or the
    ranks of a data-parallel case answering as one (fwbench.launch.rank_group)."""

    launcher: str  # how it was started, recorded with the run
    deadline: float  # time.monotonic() by which its next answer must come

    def send(self, message: BaseModel | dict[str, Any]) -> None: ...

    def receive(self) -> dict[str, Any]:
        """The next message; raises WorkerGone when the worker ended without one."""
        ...

    def cpu_seconds(self) -> float: ...

    def log_tail(self) -> str: ...

    def close(self) -> None: ...


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


def case_env(case: Case) -> dict[str, str]:
    """A case's worker environment: its threads and device, and what its options set
    before the framework loads (e.g. TF_ENABLE_ONEDNN_OPTS). Fork servers are kept per
    environment, so a case never forks from a server loaded with other settings."""
    return worker_env(case.threads, case.device) | case.option_env()


class LineReader:
    """The lines a worker writes to a pipe, each read once it is whole, before a deadline.

    Read through a buffer of its own: a file object's readline may take two lines from
    the pipe at once (a count worker's `started` and its report), and select() would then
    wait on an empty pipe while the second sat in the file's buffer."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._pending = bytearray()

    def next(self, deadline: float) -> bytes | None:
        """The next line, without its newline; None at the deadline; EOFError when the
        writer closed the pipe first."""
        while (end := self._pending.find(b"\n")) < 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(timeout=remaining):
                return None
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise EOFError("the worker closed its output")
            self._pending += chunk
        line = bytes(self._pending[:end])
        del self._pending[: end + 1]
        return line

    def close(self) -> None:
        self._selector.close()


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
        self._threads: _Threads | None = getattr(_local, "group", None)
        if self._threads is not None and self._threads.stopped:
            raise WorkersStopped(label)
        self.deadline = deadline
        self.timeout_s = timeout_s  # as the user set it, for the message
        self._ended: int | None = None  # its exit status, once read
        self.oom_kills_at_start = oom_kills()
        self._dir = Path(tempfile.mkdtemp(prefix="fwbench-"))
        self.log_path = self._dir / "worker.log"
        # A forked worker's command line is its server's: the label is kept beside its log
        # (`worker_label` reads it back from the process).
        (self._dir / "label").write_text(label)
        # The worker's temporary files go here, removed with it however it ends: a forked
        # worker leaves by os._exit, so no atexit clean-up runs (TensorFlow's autograph
        # left a module in /tmp per run: 1,080 of them after a day of sweeps here).
        self.tmp_dir = self._dir / "tmp"
        self.tmp_dir.mkdir()
        self.proc: subprocess.Popen[bytes] | None = None
        self.server: ForkServer | None = None
        why_not = server if isinstance(server, str) else None
        if isinstance(server, ForkServer):
            try:
                forked = server.fork(label, self.log_path, self.tmp_dir)
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
                    env={**env, "TMPDIR": str(self.tmp_dir)},
                    # Own process group: a time-out kills the worker and its children.
                    start_new_session=True,
                )
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.pid, self.stdin, self.stdout = self.proc.pid, self.proc.stdin, self.proc.stdout
            self.launcher = f"spawn ({why_not})" if why_not else "spawn"
        self._lines = LineReader(self.stdout)
        if self._threads is not None and not self._threads.add(self):
            self.close()
            raise WorkersStopped(label)

    def send(self, message: BaseModel | dict[str, Any]) -> None:
        text = message.model_dump_json() if isinstance(message, BaseModel) else json.dumps(message)
        try:
            self.stdin.write(text.encode() + b"\n")
            self.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerGone(self._failure()) from None

    def receive(self) -> dict[str, Any]:
        try:
            line = self._lines.next(self.deadline)
        except EOFError:
            raise WorkerGone(self._failure()) from None
        if line is None:
            self.kill()
            raise WorkerGone(
                WorkerFailure(
                    "timeout",
                    f"no result after {self.timeout_s:g} s; worker stopped",
                    self.log_tail(),
                )
            )
        message: dict[str, Any] = json.loads(line)
        return message

    def cpu_seconds(self) -> float:
        """CPU time the worker and its descendants (e.g. inductor's compile workers) have
        used so far (0 once it is gone)."""
        return load.tree_cpu_seconds(self.pid)

    def returncode(self, wait_s: float) -> int | None:
        # Kept once read: a fork server reaps its child once, and asked again it would
        # wait the whole wait_s for a pid it no longer has while a sibling still runs.
        if self._ended is not None:
            return self._ended
        if self.proc is not None:
            try:
                self._ended = self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                return None
        else:
            assert self.server is not None
            self._ended = self.server.wait(self.pid, wait_s)
        return self._ended

    def kill(self) -> None:
        if self._ended is not None:
            return  # reaped: its pid may be another process's by now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        # A child forked a moment ago may not have its own group yet (setsid): the
        # process itself too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)
        self.returncode(10.0)

    def close(self) -> None:
        # Ctrl-C in the CLI must not leave a worker running on the machine.
        self.kill()
        if self._threads is not None:
            self._threads.discard(self)
        self._lines.close()
        for stream in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def log_tail(self) -> str:
        return tail(read_log(self.log_path))

    def _failure(self) -> WorkerFailure:
        code = self.returncode(10.0)
        if code is None:
            self.kill()
            code = self.returncode(10.0)
        code = code if code is not None else -signal.SIGKILL
        killed = oom_killed_since(self.oom_kills_at_start)
        return classify_exit(code, read_log(self.log_path), killed)


def read_log(path: Path) -> str:
    """A worker's log, whole; empty once it is gone."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def tail(log: str) -> str:
    """The lines of a log a failure keeps."""
    return "\n".join(log.splitlines()[-_LOG_TAIL_LINES:])


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


def oom_killed_since(start: int | None) -> bool | None:
    """Whether the cgroup's OOM-kill count rose since it read `start` (oom_kills); None
    where either count is unreadable."""
    now = oom_kills()
    return None if now is None or start is None else now > start


def classify_exit(returncode: int, log: str, oom_killed: bool | None = None) -> WorkerFailure:
    """Why a worker ended without a report, from its log (whole: the line that says why a
    native library aborted may lie further back than the tail the failure keeps). A
    SIGKILL is the out-of-memory killer's only when the cgroup's OOM-kill count says so
    (`oom_killed`); otherwise it is said as is."""
    log_tail = tail(log)
    looks_oom = any(p in log_tail.lower() for p in _OOM_PHRASES)
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:  # a real-time signal (SIGRTMIN+n) has no name of its own
            name = f"signal {-returncode}"
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
        if fatal := _fatal_line(log):
            what += f" ({fatal})"
    else:
        last = next((ln for ln in reversed(log_tail.splitlines()) if ln.strip()), "")
        what = f"worker exited with code {returncode} without a result: {last.strip()[:300]}"
    return WorkerFailure("oom" if looks_oom else "error", what, log_tail)


def _fatal_line(log: str) -> str | None:
    """The first line of the log that says why the process aborted, if one does (the
    first: what follows it is the abort's consequences)."""
    for line in log.splitlines():
        if _FATAL_LINE.search(stripped := line.strip()):
            return stripped[:300]
    return None


def _one_shot(
    request: BaseModel, label: str, env: dict[str, str], timeout_s: float
) -> dict[str, Any] | WorkerFailure:
    # Importing the framework is not the work a time-out is set for (a user's 10 s case on
    # a busy machine lost TensorFlow's count to its import): as a fork server's, it has
    # READY_TIMEOUT_S of its own (or the user's time-out, where longer), and timeout_s
    # starts when the worker says it started.
    start_s = max(READY_TIMEOUT_S, timeout_s)
    worker = WorkerProcess(label, env, time.monotonic() + start_s, start_s)
    try:
        worker.send(request)
        while (message := worker.receive()).get("event") == "started":
            worker.deadline, worker.timeout_s = time.monotonic() + timeout_s, timeout_s
        return message["report"]  # type: ignore[no-any-return]
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
