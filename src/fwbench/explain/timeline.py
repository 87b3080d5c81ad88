"""Attribute a profiled window's wall time to categories. Pure; no framework needed.

Profilers give nested events on several threads. On each thread only the innermost
event is doing the work at any instant (exclusive time); across threads, an instant's
wall time is shared equally among the ops running on it. Time when nothing runs is idle
/ framework overhead. So the categories add up to the window exactly: nothing is lost,
and parallel executors (TensorFlow's inter-op threads) are not counted twice.

A workload may mark phases inside the window with profiler ranges of its own (a
generation's prefill, and each of its decoding steps): `attribute_ranges` attributes a
phase's ranges the same way, each event to the ranges that contain it in time, on
whatever thread it ran (TensorFlow runs a graph's ops on its executor's threads).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fwbench.explain.categories import IDLE

# The profiler range every adapter opens around the profiled steps: its span is the
# window the categories fill.
WINDOW = "fwbench_window"
# The profiler ranges a generation opens around its phases while profiled
# (GenerateWorkload.mark_phase), by name, and the phase each names. They are not ops: the
# adapters hand them on in their window (Window.phases), not among the events.
PREFILL = "fwbench_prefill"
DECODE = "fwbench_decode"
PHASES = {PREFILL: "prefill", DECODE: "decode"}


@dataclass(frozen=True)
class Event:
    thread: str
    start: float  # seconds, any common origin
    end: float
    name: str  # what the categoriser and the top-ops list see (e.g. "aten::conv2d")
    text: str  # what categories match against (ancestors | name | type)


@dataclass(frozen=True)
class Window:
    """The profiled steps' span on the profiler's clock, and the ranges marked inside it
    by phase name ({} where the workload marks none)."""

    start: float
    end: float
    phases: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    @property
    def span(self) -> tuple[float, float]:
        return self.start, self.end

    @classmethod
    def of(cls, window: Window | tuple[float, float]) -> Window:
        """An adapter's window, which may be its (start, end) alone (no phases marked)."""
        return window if isinstance(window, Window) else cls(*window)


def _exclusive(events: list[Event]) -> list[tuple[float, float, Event]]:
    """Non-overlapping segments of one thread, each owned by its innermost event."""
    events = sorted(events, key=lambda e: (e.start, -(e.end - e.start)))
    segments: list[tuple[float, float, Event]] = []
    stack: list[Event] = []
    cursor = events[0].start if events else 0.0

    def emit(until: float) -> None:
        nonlocal cursor
        if stack and until > cursor:
            segments.append((cursor, until, stack[-1]))
        cursor = max(cursor, until)

    for ev in events:
        while stack and stack[-1].end <= ev.start:
            emit(stack[-1].end)
            stack.pop()
        emit(ev.start)
        cursor = max(cursor, ev.start)
        stack.append(ev)
    while stack:
        emit(stack[-1].end)
        stack.pop()
    return segments


@dataclass(frozen=True)
class Attribution:
    window_s: float
    by_category: dict[str, float]  # seconds in the window, IDLE included
    by_op: dict[tuple[str, str], float]  # (op name, category) -> seconds


def attribute(
    events: Iterable[Event], window: tuple[float, float], categorise: Callable[[str], str]
) -> Attribution:
    start, end = window
    by_thread: dict[str, list[Event]] = defaultdict(list)
    for ev in events:
        s, e = max(ev.start, start), min(ev.end, end)
        if e > s:
            by_thread[ev.thread].append(Event(ev.thread, s, e, ev.name, ev.text))
    segments = [seg for evs in by_thread.values() for seg in _exclusive(evs)]
    # Sweep: at each elementary interval, split its length among the running segments.
    points = sorted({start, end, *(s for s, _, _ in segments), *(e for _, e, _ in segments)})
    starts: dict[float, list[int]] = defaultdict(list)
    ends: dict[float, list[int]] = defaultdict(list)
    for i, (s, e, _) in enumerate(segments):
        starts[s].append(i)
        ends[e].append(i)
    active: set[int] = set()
    by_category: dict[str, float] = defaultdict(float)
    by_op: dict[tuple[str, str], float] = defaultdict(float)  # (op, category) -> seconds
    labels = [categorise(ev.text) for _, _, ev in segments]
    for a, b in itertools.pairwise(points):
        active.difference_update(ends.get(a, ()))
        active.update(starts.get(a, ()))
        length = b - a
        if not active:
            by_category[IDLE] += length
            continue
        share = length / len(active)
        for i in active:
            by_category[labels[i]] += share
            # One op type can serve several categories (a Mul in the optimizer, another
            # in batch norm): each (op, category) pair is its own line.
            by_op[(segments[i][2].name, labels[i])] += share
    return Attribution(end - start, dict(by_category), dict(by_op))


def attribute_ranges(
    events: Iterable[Event], ranges: Iterable[tuple[float, float]], categorise: Callable[[str], str]
) -> Attribution:
    """`attribute` over disjoint ranges, summed: time between them counts in none.

    Each range sees only the events that overlap it, found in one pass over the events
    in time order, so a generation's hundreds of decoding steps cost what one window
    does."""
    ordered = sorted(events, key=lambda e: e.start)
    window_s = 0.0
    by_category: dict[str, float] = defaultdict(float)
    by_op: dict[tuple[str, str], float] = defaultdict(float)
    following = 0
    overlapping: list[Event] = []
    for start, end in sorted(ranges):
        # Events carried over from earlier ranges that reach into this one (an op on
        # another thread still running), then those starting before this one ends.
        overlapping = [e for e in overlapping if e.end > start]
        while following < len(ordered) and ordered[following].start < end:
            if ordered[following].end > start:
                overlapping.append(ordered[following])
            following += 1
        found = attribute(overlapping, (start, end), categorise)
        window_s += found.window_s
        for cat, sec in found.by_category.items():
            by_category[cat] += sec
        for op, sec in found.by_op.items():
            by_op[op] += sec
    return Attribution(window_s, dict(by_category), dict(by_op))
