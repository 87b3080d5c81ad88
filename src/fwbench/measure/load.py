"""Other processes' load on the machine, in cores, while fwbench measures.

A figure taken beside another job is inflated, so every run records the CPU that
processes other than fwbench's used during its timed window: the machine's busy CPU
time less the launcher's own and the measured worker's, the worker's whole process
tree included (torch.compile's inductor starts compile workers, a LoadGen run its
threads, torchrun its ranks: a worker's descendants are its own work, not other load).
`--require-idle` waits for a quiet machine before measuring, or refuses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import psutil

IDLE_PROBE_S = 0.5
IDLE_WAIT_S = 30.0


class MachineBusy(Exception):
    """--require-idle: other processes kept the machine busy past the wait."""


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent not idle, since boot. Linux counts the
    time its virtual machines ran (guest, guest_nice) in user and nice as well: once."""
    times = psutil.cpu_times()
    waiting = times.idle + getattr(times, "iowait", 0.0)
    counted_twice = getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    return float(sum(times) - waiting - counted_twice)


def own_cpu_seconds() -> float:
    """CPU seconds of this process alone (its workers are counted by tree_cpu_seconds)."""
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


def tree_cpu_seconds(*pids: int) -> float:
    """CPU seconds of processes and all their descendants (each counted once): the live
    ones, and through each one's reaped children those already gone. A process already
    gone counts 0: read it before it ends."""
    tree: dict[int, psutil.Process] = {}
    for pid in pids:
        try:
            root = psutil.Process(pid)
            tree |= {p.pid: p for p in (root, *root.children(recursive=True))}
        except psutil.Error:
            continue
    total = 0.0
    for process in tree.values():
        try:
            t = process.cpu_times()
        except psutil.Error:
            continue  # ended between the listing and the reading
        total += t.user + t.system + t.children_user + t.children_system
    return total


@dataclass
class LoadWindow:
    """Other processes' CPU over a window: open it, do the work, read `other_cores`.

    `own` says how much CPU fwbench's own processes have used so far (the launcher and
    its measured workers, or a worker's own tree)."""

    own: Callable[[], float]
    busy0: float = 0.0
    own0: float = 0.0
    start: float = 0.0

    def __post_init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.busy0, self.own0, self.start = busy_cpu_seconds(), self.own(), time.perf_counter()

    def other_cores(self) -> float | None:
        elapsed = time.perf_counter() - self.start
        if elapsed <= 0:
            return None
        other = (busy_cpu_seconds() - self.busy0) - (self.own() - self.own0)
        return max(0.0, other / elapsed)


class LastSeen:
    """A process tree's CPU seconds as last read while it lived: a worker that ended in
    the window (crashed, or killed at its time-out) reads 0 once reaped, which would
    count all it had used, its start-up included, as other processes' load beside the
    runs that went on. The driver reads it after each block, so what it used until its
    last block stays its own."""

    def __init__(self, read: Callable[[], float]) -> None:
        self.read, self.last = read, 0.0

    def __call__(self) -> float:
        self.last = max(self.last, self.read())
        return self.last


def launcher_and(workers_cpu: Iterable[Callable[[], float]]) -> Callable[[], float]:
    """fwbench's own CPU as the launcher sees it: itself, and each measured worker."""
    readers = list(workers_cpu)
    return lambda: own_cpu_seconds() + sum(read() for read in readers)


def other_load(seconds: float) -> float:
    """Cores' worth of CPU used by other processes over the next `seconds`."""
    window = LoadWindow(own_cpu_seconds)
    time.sleep(seconds)
    return window.other_cores() or 0.0


def wait_until_idle(
    busy_cores: float,
    on_phase: Callable[[str], None] | None = None,
    wait_s: float = IDLE_WAIT_S,
    probe_s: float = IDLE_PROBE_S,
) -> None:
    """Return once other processes use at most `busy_cores`; MachineBusy after `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        load = other_load(probe_s)
        if load <= busy_cores:
            return
        if time.monotonic() > deadline:
            raise MachineBusy(
                f"machine busy: other processes used {load:.2f} cores (over "
                f"{busy_cores:g}) for {wait_s:g} s; --require-idle refused to measure"
            )
        if on_phase:
            on_phase(f"waiting for an idle machine: other processes use {load:.2f} cores")


def busy_warning(loads: Sequence[float | None], busy_cores: float) -> str | None:
    """The warning for runs that other processes' load may have slowed (None: none did).
    `loads` are the runs' other-process CPU in cores, in run order (None: not measured)."""
    busy = [(i, x) for i, x in enumerate(loads) if x is not None and x > busy_cores]
    if not busy:
        return None
    worst_run, worst = max(busy, key=lambda p: p[1])
    return (
        f"busy machine: other processes used {worst:.2f} cores during run "
        f"{worst_run + 1} ({len(busy)} of {len(loads)} runs over {busy_cores:g}); "
        "its times may be inflated: rerun on an idle machine (or --require-idle), or, "
        "where other work cannot stop, read each run's fastest block (--estimator min, "
        "the value least moved by interference: docs/methodology.md)"
    )
