"""Run one worker request in a fresh process on this machine.

One process per case (METHODOLOGY rule 14): global framework state never leaks from
one case into the next, and a crash or a hang takes only its own case down.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from fwbench.launch.protocol import CaseReport, CaseRequest, CountReport, CountRequest

# Phrases frameworks print to stderr when they die of memory exhaustion instead of
# raising (TensorFlow aborts in some allocators; the kernel's OOM killer sends SIGKILL).
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


def worker_env(threads: int | None, device: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if threads is not None:
        # OpenMP / MKL pools are created at import, before the adapter can set threads.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
    if device == "cpu":
        # A CPU case must not initialise (or reserve memory on) a GPU.
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run(
    request: BaseModel, label: str, env: dict[str, str], timeout_s: float
) -> tuple[str | None, WorkerFailure | None]:
    with tempfile.TemporaryDirectory(prefix="fwbench-") as tmp:
        out = Path(tmp) / "report.json"
        log_path = Path(tmp) / "worker.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                # The label only shows in `ps`, so a user can tell which case is running.
                [sys.executable, "-m", "fwbench.launch.worker", str(out), label],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                # Own process group: a time-out kills the worker and anything it spawned.
                start_new_session=True,
            )
            try:
                proc.communicate(request.model_dump_json().encode(), timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill(proc)
                return None, WorkerFailure(
                    "timeout", f"no result after {timeout_s:g} s; worker stopped", _tail(log_path)
                )
            finally:
                # Ctrl-C in the CLI must not leave a worker running on the machine.
                if proc.poll() is None:
                    _kill(proc)
        if out.exists():
            return out.read_text(), None
        return None, _failure(proc.returncode, _tail(log_path))


def run_case(request: CaseRequest, timeout_s: float) -> CaseReport | WorkerFailure:
    env = worker_env(request.case.threads, request.case.device)
    text, failure = _run(request, f"case: {request.case.label()}", env, timeout_s)
    if failure is not None:
        return failure
    assert text is not None
    return CaseReport.model_validate_json(text)


def run_count(request: CountRequest, timeout_s: float) -> CountReport | WorkerFailure:
    label = f"count: {request.framework}"
    text, failure = _run(request, label, worker_env(None, "cpu"), timeout_s)
    if failure is not None:
        return failure
    assert text is not None
    return CountReport.model_validate_json(text)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-_LOG_TAIL_LINES:])


def _failure(returncode: int, log_tail: str) -> WorkerFailure:
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
