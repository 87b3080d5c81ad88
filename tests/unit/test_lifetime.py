"""What fwbench starts dies with what started it (Linux's PR_SET_PDEATHSIG)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

# A parent that starts a child which asks to die with it, prints the child's pid, and
# waits to be killed.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
time.sleep(60)
"""
CHILD_TIED = (
    "import time; from fwbench.lifetime import die_with_parent; die_with_parent(); time.sleep(60)"
)
CHILD_LOOSE = "import time; time.sleep(60)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie no one reaps (its parent is gone) counts as dead.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def _orphan_after_parent_killed(child_code: str) -> bool:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, child_code], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    time.sleep(1.0)  # the child has imported fwbench.lifetime and set its signal
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    alive = _alive(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    return alive


def test_a_tied_child_dies_with_its_killed_parent() -> None:
    assert not _orphan_after_parent_killed(CHILD_TIED)


def test_an_untied_child_outlives_it() -> None:
    # The control: without the call, the child runs on (the test can fail).
    assert _orphan_after_parent_killed(CHILD_LOOSE)
