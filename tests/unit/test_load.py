"""Other processes' load: what fwbench counts as its own work and what it flags.

Real processes spin for a second here: the counters are the kernel's, nothing to fake."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from fwbench.measure import load

# A process that starts a child, which spins on one core for `seconds`: the shape of a
# worker whose compile workers do its work (torch.compile's inductor).
SPIN = "import time\nend = time.perf_counter() + {s}\nwhile time.perf_counter() < end: pass\n"
PARENT = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', {child!r}], check=True)\n"


def _spinning_tree(seconds: float) -> subprocess.Popen[bytes]:
    child = SPIN.format(s=seconds)
    return subprocess.Popen([sys.executable, "-c", PARENT.format(child=child)])


def _wait_for_grandchild(proc: subprocess.Popen[bytes]) -> None:
    import psutil

    deadline = time.monotonic() + 10
    while not psutil.Process(proc.pid).children() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_workers_descendants_are_its_own_work_not_other_load() -> None:
    proc = _spinning_tree(1.5)
    try:
        _wait_for_grandchild(proc)
        time.sleep(0.2)  # past the child's interpreter start
        with_tree = load.LoadWindow(load.launcher_and([lambda: load.tree_cpu_seconds(proc.pid)]))
        launcher_only = load.LoadWindow(load.own_cpu_seconds)
        time.sleep(0.8)
        mine, others = with_tree.other_cores(), launcher_only.other_cores()
    finally:
        proc.wait(10)
    assert mine is not None and others is not None
    # The spinning grandchild is a whole core of the second window's "other" load; the
    # first counts it as the worker's. (Wide margins: the test machine may be shared, and
    # `make test` runs another test process beside this one on two cores.)
    assert others > 0.6
    assert mine < others - 0.3


def test_a_process_gone_counts_nothing_and_a_tree_counts_each_process_once() -> None:
    proc = _spinning_tree(0.3)
    _wait_for_grandchild(proc)
    pid = proc.pid
    assert load.tree_cpu_seconds(pid, pid) == pytest.approx(load.tree_cpu_seconds(pid), abs=0.05)
    proc.wait(10)
    assert load.tree_cpu_seconds(pid) == 0.0


def test_require_idle_refuses_a_machine_another_process_keeps_busy() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", SPIN.format(s=5)])
    try:
        time.sleep(0.3)
        seen: list[str] = []
        with pytest.raises(load.MachineBusy, match=r"machine busy: other processes used"):
            load.wait_until_idle(0.25, seen.append, wait_s=1.0, probe_s=0.3)
        assert seen and seen[0].startswith("waiting for an idle machine")
    finally:
        spinner.kill()
        spinner.wait()


def test_busy_warning_names_the_worst_run_and_ignores_unmeasured_ones() -> None:
    assert load.busy_warning([0.1, None, 0.2], 0.25) is None
    text = load.busy_warning([0.1, 1.2, 0.9], 0.25)
    assert text is not None
    assert text.startswith("busy machine: other processes used 1.20 cores during run 2 (2 of 3")


def test_a_virtual_machines_cpu_time_is_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linux counts the time its guests ran in `user` and `nice` and again in `guest`
    and `guest_nice` (psutil reports both): a host running VMs is not twice as busy."""
    from collections import namedtuple

    fields = "user nice system idle iowait irq softirq steal guest guest_nice"
    times = namedtuple("times", fields)(10.0, 2.0, 3.0, 100.0, 5.0, 0.5, 0.5, 0.0, 4.0, 1.0)
    monkeypatch.setattr(load.psutil, "cpu_times", lambda: times)
    assert load.busy_cpu_seconds() == pytest.approx(10.0 + 2.0 + 3.0 + 0.5 + 0.5)


def test_a_worker_that_ends_in_the_window_leaves_its_cpu_its_own() -> None:
    """A worker that had used 1.5 s of CPU (its start, build and warmup) and was killed
    in the window read 0 once gone: those 1.5 s counted as other processes' load beside
    the run that went on (a false "busy machine"). Two windows over the same second, one
    reading the worker as before, one as the driver now does: they differ by the
    worker's own CPU, whatever else the machine runs (another test process, in CI)."""
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", spin + "time.sleep(60)"])
    try:
        while load.tree_cpu_seconds(proc.pid) < 1.5:
            time.sleep(0.05)
        before = load.LoadWindow(load.launcher_and([lambda: load.tree_cpu_seconds(proc.pid)]))
        worker = load.LastSeen(lambda: load.tree_cpu_seconds(proc.pid))
        now = load.LoadWindow(load.launcher_and([worker]))
        time.sleep(0.3)
        worker()  # what the driver reads after each block
        used = load.tree_cpu_seconds(proc.pid)
    finally:
        proc.kill()
        proc.wait(10)
    time.sleep(0.7)
    wrong, right = before.other_cores(), now.other_cores()
    assert wrong is not None and right is not None
    elapsed = time.perf_counter() - now.start
    # The first window counts the dead worker's CPU as other load; the second does not.
    assert (wrong - right) * elapsed == pytest.approx(used, rel=0.2), (wrong, right, used)
