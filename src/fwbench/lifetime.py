"""A child process's lifetime tied to its parent's: what fwbench starts (workers, the
process that writes a model's random weights) never outlives the command that started it,
even one killed with SIGKILL, so nothing it leaves runs on beside a later measurement."""

from __future__ import annotations

import os
import sys


def die_with_parent() -> None:
    """Linux: if the parent is killed (even with SIGKILL), take this process down too."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)
