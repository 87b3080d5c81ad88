"""Host memory of a worker: baseline after import, and the steady-state peak RSS.

On Linux the kernel keeps the peak resident set (VmHWM) and lets a process reset it by
writing 5 to /proc/self/clear_refs, so the peak of the steady state is exact and costs
no sampling thread inside the timed process. Elsewhere the lifetime peak (ru_maxrss)
is reported and labelled as such.
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


@dataclass(frozen=True)
class HostMemory:
    baseline_rss_bytes: int  # after the framework is imported, before the model is built
    peak_rss_bytes: int  # during the steady state (see `method`)
    method: str

    @property
    def framework_bytes(self) -> int:
        """Peak attributable to the case: model, optimizer, data, activations, caches."""
        return max(0, self.peak_rss_bytes - self.baseline_rss_bytes)


def _vm_hwm() -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class HostMemoryTracker:
    def __init__(self) -> None:
        self.baseline = 0
        self.window_reset = False

    def mark_baseline(self) -> None:
        self.baseline = psutil.Process().memory_info().rss

    def start_window(self) -> None:
        """Forget the peak so far (build and warmup): the steady state starts now."""
        try:
            _CLEAR_REFS.write_text("5")
            self.window_reset = _vm_hwm() is not None
        except OSError:
            self.window_reset = False

    def result(self) -> HostMemory:
        if self.window_reset:
            peak = _vm_hwm()
            if peak is not None:
                return HostMemory(self.baseline, peak, "steady-state peak (VmHWM after reset)")
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
        return HostMemory(self.baseline, maxrss * scale, "lifetime peak (ru_maxrss)")
