"""Progress of a command that measures (run, sweep, explain, serve), on stderr.

On a terminal it is rich's bar. Where stderr is not a terminal (a CI log, `nohup`, a
file) rich draws nothing until the bar's last state, so a sweep of an hour printed nothing
but its final table: there each case says one plain line as it finishes, with the time so
far and an estimate of what is left, and a case that runs long says that it is still
running every HEARTBEAT_S, so that a log (and a CI job watching for output) sees it alive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console

from fwbench.cli.common import console, progress_bar
from fwbench.report.plain import escape
from fwbench.result import Result

# A case running longer than this without a line says it is still running, once per this.
HEARTBEAT_S = 60.0


class CaseProgress(Protocol):
    console: Console

    def status(self, text: str) -> None:
        """What the command is doing between cases (counting parameters, queued on Ray)."""

    def started(self, label: str) -> None:
        """A case (or serving point) started."""

    def finished(self, label: str, status: str, text: str) -> None:
        """A case finished with `status`: `text` is its result in a few words, or (not
        ok) its error."""


def duration(seconds: float) -> str:
    """12 s, 1 min 40 s, 2 h 5 min."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    return f"{s // 3600} h" + (f" {s % 3600 // 60} min" if s % 3600 // 60 else "")


def outcome_of(result: Result) -> tuple[str, str]:
    """A case's status, and its result in a few words or its error (`finished`)."""
    m = result.measurement
    if result.status != "ok" or m is None:
        return result.status, _first_line(result.error)
    text = f"median step {m.step_time_s.median * 1e3:.2f} ms"
    return result.status, text + (" (DIFFERENT WORK)" if result.different_work else "")


def serving_outcome_of(result: Result) -> tuple[str, str]:
    """A serving point's status, and its result in a few words or its error."""
    if result.status != "ok":
        return result.status, _first_line(result.error)
    parts = []
    if result.served.max_qps is not None:
        parts.append(f"max {result.served.max_qps.value:.3g} queries/s")
    elif result.served.samples_per_s is not None:
        parts.append(f"{result.served.samples_per_s.value:.4g} samples/s")
    p90 = result.served.latency("90.00")
    if p90 is not None:
        parts.append(f"p90 latency {p90.value * 1e3:.2f} ms")
    return result.status, ", ".join(parts)


def _first_line(text: str | None) -> str:
    return text.splitlines()[0] if text else "no error message"


class _Bar:
    """rich's bar, on a terminal; a failure is a line above it."""

    def __init__(self, total: int, eta: bool) -> None:
        self.bar = progress_bar(eta=eta)
        self.console = self.bar.console
        self.task = self.bar.add_task("preparing", total=total)

    def status(self, text: str) -> None:
        self.bar.update(self.task, description=text)

    def started(self, label: str) -> None:
        self.bar.update(self.task, description=label)

    def finished(self, label: str, status: str, text: str) -> None:
        self.bar.advance(self.task)
        if status != "ok":
            self.console.print(f"[red]{status}[/red] {escape(label)}: {escape(text)}")


class _Lines:
    """A plain line per finished case, and while one runs long, one every HEARTBEAT_S."""

    def __init__(self, total: int, eta: bool, heartbeat_s: float) -> None:
        self.console = console
        self.total = total
        self.eta = eta
        self.done = 0
        self.start = time.monotonic()
        self.last_line = self.start
        self.running = ""  # the case last started
        self.doing = ""  # what the command said it does last (a run of a case, a phase)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.heartbeat_s = heartbeat_s
        self.thread = threading.Thread(target=self._beat, name="fwbench-progress", daemon=True)

    def _say(self, text: str) -> None:
        with self.lock:
            self.last_line = time.monotonic()
            self.console.print(escape(text), highlight=False, soft_wrap=True)

    def _beat(self) -> None:
        # Waking once in HEARTBEAT_S costs the measured worker nothing it would notice.
        while not self.stop.wait(self.heartbeat_s / 4):
            now = time.monotonic()
            if now - self.last_line >= self.heartbeat_s and (self.doing or self.running):
                doing = self.doing or f"running {self.running}"
                self._say(
                    f"[{self.done + 1}/{self.total}] {doing} ({duration(now - self.start)} in all)"
                )

    def status(self, text: str) -> None:
        # Before the first case, a phase of its own (counting parameters) is said at once;
        # after, a run's steps (three a run) would bury the cases' lines: the heartbeat
        # says the latest.
        self.doing = text
        if not self.running:
            self._say(text)

    def started(self, label: str) -> None:
        self.running = label
        self.doing = ""

    def finished(self, label: str, status: str, text: str) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.start
        when = duration(elapsed)
        left = self.total - self.done
        if self.eta and left and self.done:
            when += f", about {duration(elapsed / self.done * left)} left"
        said = f"{status}: {text}" if status != "ok" else f"ok, {text}" if text else "ok"
        self._say(f"[{self.done}/{self.total}] {label}: {said} ({when})")


@contextmanager
def case_progress(
    total: int, eta: bool = True, heartbeat_s: float = HEARTBEAT_S
) -> Iterator[CaseProgress]:
    """The progress of `total` cases: a bar on a terminal, plain lines elsewhere (see
    module). `eta`: estimate the time left (from the mean time of a case so far)."""
    # A dumb terminal draws no bar either (rich animates only a capable terminal).
    if console.is_terminal and not console.is_dumb_terminal:
        bar = _Bar(total, eta)
        with bar.bar:
            yield bar
            bar.status("done")
        return
    lines = _Lines(total, eta, heartbeat_s)
    lines.thread.start()
    try:
        yield lines
    finally:
        lines.stop.set()
        lines.thread.join()
