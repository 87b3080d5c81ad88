"""Gradient communication time from a profiled window. Pure; no framework needed.

Communication ops (the `communication` category of `fwbench explain`: gloo / NCCL
all-reduce, broadcasts, TensorFlow's collective ops) run on background threads and
overlap the backward pass. The figure recorded is the wall time per step during which
at least one of them was in flight: the union of their intervals, not their sum, so
concurrent buckets are not counted twice. It is an upper bound on the time
communication costs the step (overlapped compute hides some of it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fwbench.explain.timeline import Event

COMMUNICATION = "communication"


def union_length(intervals: Iterable[tuple[float, float]], window: tuple[float, float]) -> float:
    """Length of the union of `intervals`, clipped to `window`."""
    lo, hi = window
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo))
    total = 0.0
    start, end = None, None
    for a, b in clipped:
        if end is None or a > end:
            if start is not None and end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    if start is not None and end is not None:
        total += end - start
    return total


def summarise(
    profiler: str,
    events: list[Event],
    window: tuple[float, float],
    steps: int,
    categorise: Callable[[str], str],
) -> dict[str, Any]:
    """What the profiler showed of communication, per step (see the module docstring)."""
    comm = [e for e in events if categorise(e.text) == COMMUNICATION]
    step_s = (window[1] - window[0]) / steps if steps else 0.0
    in_flight = union_length(((e.start, e.end) for e in comm), window) / steps if steps else 0.0
    return {
        "profiler": profiler,
        "profiled_steps": steps,
        "profiled_step_s": step_s,
        "in_flight_s": in_flight if comm else None,
        "share_of_step": in_flight / step_s if comm and step_s > 0 else None,
        "ops": sorted({e.name for e in comm}),
        "error": None if comm else f"{profiler} showed no communication op in the window",
    }
