"""A sweep's budget shared by its comparisons, on synthetic runs and a fake clock: how
often identical variants are called different, and how many real differences are
decided, when each comparison gets an equal slice of what is left and stops there
(before), and when each first gets its minimum and the time left then goes, a round at
a time, to the open comparison likeliest to be decided soonest (now:
fwbench.launch.local._Budget). Both arms start no round past their slice or budget.

Each simulated sweep is the quick preset's shape: six comparisons, training rounds
costing three times an inference round; per-run values from
tests/unit/test_sequential.py's generator (process offsets, noise shared within a
round, drift, runs correlated in time, one-sided slowdowns). The real LocalExecutor
schedules them; only the rounds are synthetic.

    .venv/bin/python benchmarks/budget_schedule.py [--sweeps 300] [--budget 110]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pytest

from fwbench.launch import local
from fwbench.launch.outcome import CaseOutcome
from fwbench.launch.protocol import CaseReport, GroupRequest
from fwbench.launch.rounds import CaseRuns
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import comparison_of
from tests.unit.test_budget import Clock, pair, run
from tests.unit.test_sequential import interleaved_runs

PLAN = TimingConfig(min_runs=3, max_runs=10)
# (batch, task, round cost in s): the quick preset's six comparisons.
SHAPE = [(1, "train", 6.0), (8, "train", 6.0), (1, "infer", 2.0), (8, "infer", 2.0),
         (16, "infer", 2.0), (32, "infer", 2.0)]  # fmt: skip


class Rounds:
    """Each case's next run from its pre-drawn values, the clock advanced by its cost."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.values: dict[str, list[float]] = {}
        self.cost: dict[str, float] = {}

    def __call__(self, order: list[CaseRuns], index: int, *_: Any) -> None:
        for state in order:
            label = state.request.case.label()
            value = self.values[label][len(state.runs)]
            self.clock.now += self.cost[label] / 2
            state.runs.append(run(len(state.runs), (value,) * 4, state.reopened))
            if state.report is None:
                state.report = CaseReport(status="ok", build_s=0.1, param_count=10)


@contextmanager
def schedule(now: bool) -> Iterator[Rounds]:
    patch = pytest.MonkeyPatch()
    clock = Clock()
    rounds = Rounds(clock)
    patch.setattr(local, "time", clock)
    patch.setattr(local, "CASES", local.RoundKind(CaseRuns.of, rounds, local._case_stop,
                                                  local.CASES.end))  # fmt: skip
    if not now:

        def equal_slices(self: Any, window: Any, budget: Any, parked: Any, *rest: Any) -> Any:
            deadline = budget.equal(window[0][0], len(window))
            turns = [(i, local._Group(g, deadline)) for i, g in window]
            return local._take_turns(turns, *rest)

        patch.setattr(local.LocalExecutor, "_turns", equal_slices)
    try:
        yield rounds
    finally:
        patch.undo()


def sweep(seed: int, ratios: list[float], budget_s: float, now: bool) -> tuple[list[str], float]:
    """One simulated sweep: each comparison's outcome ("faster", "faster-wrong",
    "equivalent", "inconclusive") and the seconds it took."""
    groups = [pair(batch, task) for batch, task, _ in SHAPE]
    with schedule(now) as rounds:
        for g, ((_, _, cost), ratio) in enumerate(zip(SHAPE, ratios, strict=True)):
            values = interleaved_runs(seed * 100 + g, 10, ratio)
            for case, side in zip(groups[g], ("a", "b"), strict=True):
                rounds.values[case.label()] = values[side]
                rounds.cost[case.label()] = cost
        start = rounds.clock.now
        executor = local.LocalExecutor(budget_s=budget_s)
        requests = [[GroupRequest.for_case(c, PLAN) for c in g] for g in groups]
        finals: dict[int, list[CaseOutcome]] = {}
        for done in executor.run(requests, timeout_s=60):
            if done.final:
                finals[done.index] = [o for o in done.outcomes if isinstance(o, CaseOutcome)]
        took = rounds.clock.now - start
    found = []
    for g in range(len(groups)):
        a, b = (Recorded(o) for o in finals[g])
        verdict = comparison_of({"a": a, "b": b}).verdict()
        assert verdict is not None
        if verdict.outcome == "faster" and ratios[g] > 1 and verdict.faster == "a":
            found.append("faster-wrong")
        else:
            found.append(verdict.outcome)
    return found, took


class Recorded:
    """What a verdict reads of an outcome, as of a stored result (paired by round)."""

    def __init__(self, outcome: CaseOutcome) -> None:
        self.measurement = self
        self.group_id = "g"
        self._runs = outcome.runs
        self.reading = PLAN.reading
        self.looks = PLAN.plan.looks
        self.verdict_figure = "step_time"

    def per_run(self, estimator: str = "median", figure: str = "step_time") -> tuple[float, ...]:
        return tuple(r.median_s for r in self._runs)

    def rounds(self, figure: str = "step_time") -> tuple[int, ...]:
        return tuple(r.index for r in self._runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=300)
    parser.add_argument("--budget", type=float, default=110.0, help="Seconds a sweep.")
    args = parser.parse_args()
    print(f"{args.sweeps} simulated sweeps of 6 comparisons each, budget {args.budget:g} s")
    for name, ratios in (("A/A", [1.0] * 6), ("quick-like", [1.17, 1.21, 1.46, 1.30, 1.13, 1.03])):
        for now in (False, True):
            outcomes: list[str] = []
            took = []
            for seed in range(args.sweeps):
                found, seconds = sweep(seed, ratios, args.budget, now)
                outcomes += found
                took.append(seconds)
            arm = "now (minimum, then where it decides)" if now else "before (equal slices)"
            n = len(outcomes)
            share = {k: outcomes.count(k) / n for k in
                     ("faster", "faster-wrong", "equivalent", "inconclusive")}  # fmt: skip
            real = [o for o, r in zip(outcomes, ratios * args.sweeps, strict=True) if r > 1]
            decided = sum(o == "faster" for o in real) / len(real) if real else float("nan")
            line = (
                f"{name:10} {arm:37} called faster {share['faster']:.1%}, the wrong way "
                f"{share['faster-wrong']:.1%}, equivalent {share['equivalent']:.1%}, "
                f"inconclusive {share['inconclusive']:.1%}; "
            )
            if real:
                line += f"real differences decided {decided:.1%}; "
            line += f"median sweep {statistics.median(took):.0f} s (max {max(took):.0f} s)"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
