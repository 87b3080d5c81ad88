"""Fork server: one process imports a framework once, then forks a fresh worker per run.

A case is measured in several worker processes (runs), and importing PyTorch or
TensorFlow costs 2-3 s a process. The server imports the framework's adapter module and
nothing else (no threads of its own, no device initialised, no model built), so each
forked child starts as a fresh worker would after its imports: its own allocator, its
own thread pools (created on first use), its own device context. Isolation between runs
and cases is what it is with spawned workers.

Protocol, one JSON message per packet over a Unix SEQPACKET socket pair whose other end
the launcher holds:
- server -> launcher, once: `{"event": "ready"}` after the imports, or
  `{"event": "refused", "reason": ...}` when forking would not be safe (Python threads
  running after the imports); the launcher then spawns workers instead and says why;
- launcher -> server: `{"op": "fork", "label": ...}` with three file descriptors (the
  worker's stdin, stdout and log), answered by `{"pid": N}`; the child runs
  `fwbench.launch.worker` on those descriptors in a session of its own;
- launcher -> server: `{"op": "wait", "pid": N, "timeout": s}`, answered by
  `{"returncode": rc}` (negative: killed by that signal; null: still running).

Native thread pools that exist after the imports (numpy's OpenBLAS) re-create
themselves in a forked child (pthread_atfork); a Python thread would not, so its
presence refuses forking.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from fwbench.catalog.frameworks import get_framework

if TYPE_CHECKING:
    from fwbench.case import Case

READY_TIMEOUT_S = 120.0


class ForkServerError(Exception):
    """The server could not start or refused to fork; workers are spawned instead."""


# --- the server process ---------------------------------------------------------------


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _receive(sock: socket.socket) -> dict[str, Any]:
    data = sock.recv(65536)
    if not data:
        raise ValueError("the other side closed the socket")
    message: dict[str, Any] = json.loads(data)
    return message


def _child(label: str, fds: list[int], tmp_dir: str | None) -> None:
    """In the forked child: become a worker on the given descriptors, then exit."""
    code = 1
    try:
        os.setsid()  # own process group: a time-out kills the worker and its children
        if tmp_dir:
            # The launcher's per-worker folder (WorkerProcess.tmp_dir), for this process
            # and what it starts: os._exit below skips atexit's clean-up of temp files.
            os.environ["TMPDIR"] = tmp_dir
            tempfile.tempdir = tmp_dir
        _name("fwbench-run")  # `ps -o comm` / top tell a forked worker from its server
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), line_buffering=True)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
        sys.argv = ["fwbench.launch.worker", label]
        from fwbench.launch import worker

        code = worker.main()
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _name(comm: str) -> None:
    """The process's short name (Linux comm, 15 bytes), best effort."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_name = 15
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_name, comm.encode()[:15], 0, 0, 0)


def serve(framework: str, fd: int) -> int:
    from fwbench.lifetime import die_with_parent

    die_with_parent()
    sock = socket.socket(fileno=fd)
    info = get_framework(framework)
    # The adapter first: the Keras adapters choose Keras' backend before Keras is imported.
    for module in (info.adapter_path.partition(":")[0], *info.preload):
        importlib.import_module(module)
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate())
        _send(sock, {"event": "refused", "reason": f"Python threads after import: {names}"})
        return 1
    opened = gpu_driver_files()
    if opened:
        # A CUDA context (or the driver's state) does not survive a fork: the children
        # would fail at their first CUDA call, or worse, share the server's.
        reason = f"the imports opened the GPU driver ({', '.join(opened)})"
        _send(sock, {"event": "refused", "reason": reason})
        return 1
    _send(sock, {"event": "ready", "pid": os.getpid()})
    exited: dict[int, int] = {}
    while True:
        # One request per packet; descriptors come with a fork request only.
        data, fds, _, _ = socket.recv_fds(sock, 65536, 3)
        if not data:
            return 0
        request = json.loads(data)
        if request["op"] == "fork":
            pid = os.fork()
            if pid == 0:
                sock.close()
                _child(request["label"], fds, request.get("tmp"))
            for f in fds:
                os.close(f)
            _send(sock, {"pid": pid})
        elif request["op"] == "wait":
            _send(sock, {"returncode": _wait(request["pid"], request["timeout"], exited)})


def gpu_driver_files() -> list[str]:
    """The GPU driver's device files this process holds open (/dev/nvidia*, the ROCm
    /dev/kfd, the DRM /dev/dri/*): none until something initialises a device."""
    found = []
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.startswith(("/dev/nvidia", "/dev/kfd", "/dev/dri")):
                    found.append(target)
    return sorted(set(found))


def _wait(pid: int, timeout: float, exited: dict[int, int]) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        if pid in exited:
            return exited.pop(pid)
        try:
            done, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return exited.pop(pid, None)
        if done:
            exited[done] = os.waitstatus_to_exitcode(status)
            continue
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


# --- the launcher's side --------------------------------------------------------------


@dataclass
class Forked:
    """A worker forked by a server: its pid, and the launcher's ends of its pipes."""

    pid: int
    stdin: IO[bytes]
    stdout: IO[bytes]


class ForkServer:
    """A running server for one framework under one worker environment."""

    def __init__(self, framework: str, env: dict[str, str], log_path: Path) -> None:
        self.framework = framework
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                # -P: a `torch.py` in the user's directory must not shadow the framework.
                [sys.executable, "-P", "-m", __name__, framework, str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        theirs.close()

    def ready(self) -> None:
        """Wait for the server's imports (started by the constructor, so that several
        servers can import at once); ForkServerError if it did not start or refused."""
        self._sock.settimeout(READY_TIMEOUT_S)
        try:
            hello = self._receive()
        except (OSError, ValueError) as exc:
            self.close()
            raise ForkServerError(
                f"fork server for {self.framework} did not start: {exc}"
            ) from None
        if hello.get("event") != "ready":
            self.close()
            raise ForkServerError(str(hello.get("reason", "fork server refused")))
        self._sock.settimeout(30.0)

    def _receive(self) -> dict[str, Any]:
        return _receive(self._sock)

    def fork(self, label: str, log_path: Path, tmp_dir: Path | None = None) -> Forked:
        their_stdin, my_stdin = os.pipe()
        my_stdout, their_stdout = os.pipe()
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            request = {"op": "fork", "label": label, "tmp": str(tmp_dir) if tmp_dir else None}
            payload = json.dumps(request).encode()
            socket.send_fds(self._sock, [payload], [their_stdin, their_stdout, log])
            pid = int(self._receive()["pid"])
        except (OSError, ValueError, KeyError) as exc:
            for fd in (my_stdin, my_stdout):
                os.close(fd)
            raise ForkServerError(f"fork server for {self.framework} failed: {exc}") from None
        finally:
            for fd in (their_stdin, their_stdout, log):
                os.close(fd)
        return Forked(pid, os.fdopen(my_stdin, "wb"), os.fdopen(my_stdout, "rb"))

    def wait(self, pid: int, timeout: float) -> int | None:
        """The child's exit code (negative: its signal), or None if it is still running."""
        try:
            _send(self._sock, {"op": "wait", "pid": pid, "timeout": timeout})
            self._sock.settimeout(timeout + 30.0)
            rc = self._receive()["returncode"]
        except (OSError, ValueError, KeyError):
            return None
        return None if rc is None else int(rc)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


# Children of one server share its address-space layout (ASLR is chosen at exec, and a
# fork keeps it), its libraries' placement and its heap: part of what makes processes
# differ. So the runs of a case come from different servers, each its own exec, and the
# spread between runs includes what separately started processes would show. Measured
# here before this: 10 measurements of one case, 3 runs each from one server, agreed
# with each other's 95% intervals in 61% of pairs (target 80%).
SLOTS = 3


class ForkServers:
    """Servers per (framework, worker environment, slot), started on first use; run k of
    a case uses slot k mod SLOTS. Spawning is the fallback, with the reason kept."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._servers: dict[tuple[Any, ...], ForkServer | str] = {}

    def get(
        self, framework: str, env: dict[str, str], run: int = 0, runs: int = SLOTS
    ) -> ForkServer | str:
        """The server for run `run` of a case, or why there is none (then: spawn).

        The servers for the slots that a case's `runs` will use start together, at its
        first run: their imports overlap (a 3-run comparison on a GPU spent 4.5 s a run
        starting them one round at a time), and none is still importing while a run is
        timed."""
        slots = [(framework, tuple(sorted(env.items())), slot) for slot in range(SLOTS)]
        wanted = slots[: max(1, min(runs, SLOTS), run % SLOTS + 1)]
        starting: list[tuple[Any, ForkServer]] = []
        for key in wanted:
            found = self._servers.get(key)
            if found is None or (isinstance(found, ForkServer) and not found.alive()):
                log = self.directory / f"forkserver-{framework}-{len(self._servers)}.log"
                server = ForkServer(framework, env, log)
                self._servers[key] = server
                starting.append((key, server))
        for key, server in starting:
            try:
                server.ready()
            except ForkServerError as exc:
                self._servers[key] = str(exc)
        return self._servers[slots[run % SLOTS]]

    def for_case(
        self, case: Case, env: dict[str, str], run: int = 0, runs: int = SLOTS
    ) -> ForkServer | str | None:
        """The server a run of `case` forks from (see `get`), or None where its worker is
        spawned: on a GPU, forking is for frameworks whose imports leave the driver
        untouched (`forks_on_cuda`; the server checks it), since CUDA does not survive a
        fork once anything has opened the driver."""
        if case.device != "cpu" and not get_framework(case.framework).forks_on_cuda:
            return None
        return self.get(case.framework, env, run, runs)

    def close(self) -> None:
        for server in self._servers.values():
            if isinstance(server, ForkServer):
                server.close()
        self._servers.clear()


def main() -> int:
    return serve(sys.argv[1], int(sys.argv[2]))


if __name__ == "__main__":
    sys.exit(main())
