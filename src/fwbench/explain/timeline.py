"""Attribute a profiled window's wall time to categories. Pure; no framework needed.

Profilers give nested events on several threads. On each thread only the innermost
event is doing the work at any instant (exclusive time); across threads, an instant's
wall time is shared equally among the ops running on it. Time when nothing runs is idle
/ framework overhead. So the categories add up to the window exactly: nothing is lost,
and parallel executors (TensorFlow's inter-op threads) are not counted twice.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fwbench.explain.categories import IDLE


@dataclass(frozen=True)
class Event:
    thread: str
    start: float  # seconds, any common origin
    end: float
    name: str  # what the categoriser and the top-ops list see (e.g. "aten::conv2d")
    text: str  # what categories match against (ancestors | name | type)


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
