"""A sweep's budget shared among its comparisons (issue 54, item 1), on synthetic runs
and a fake clock: shares follow what a round costs, a comparison its share stopped while
open is re-opened with the time left and decided, one that cannot be decided never
spends past the budget, and the re-opened runs say so."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fwbench.case import Case
from fwbench.launch import local, rounds
from fwbench.launch.outcome import CaseOutcome, WorkerFailure
from fwbench.launch.protocol import CaseReport, GroupRequest
from fwbench.launch.rounds import CaseRuns
from fwbench.measure.runs import RunPlan
from fwbench.measure.settings import TimingConfig
from fwbench.result import Run


@dataclass
class Clock:
    now: float = 1000.0

    def monotonic(self) -> float:
        return self.now


@dataclass(frozen=True)
class Side:
    """A variant's synthetic runs: each run's blocks around `step_s`, its process offset
    drawn with `noise` (the spread between runs real machines show, lognormal), and
    `cost_s` of wall time per run."""

    step_s: float
    noise: float
    cost_s: float


@dataclass
class Machine:
    clock: Clock
    sides: dict[str, Side]  # by case variant label
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    rounds: list[tuple[float, str]] = field(default_factory=list)  # (end, case label)
    fails: dict[str, int] = field(default_factory=dict)  # case label: the round it fails in

    def run_round(self, order: list[CaseRuns], index: int, timeout_s: float, *_: Any) -> None:
        for state in order:
            if self.fails.get(state.request.case.label()) == index:
                rounds.end_case(state, WorkerFailure("error", "worker crashed", ""))
                continue
            side = self.sides[state.request.case.label()]
            offset = math.exp(self.rng.gauss(0.0, side.noise))
            samples = tuple(side.step_s * offset * (1 + 0.002 * k) for k in range(8))
            self.clock.now += side.cost_s
            state.runs.append(run(len(state.runs), samples, state.reopened))
            if state.report is None:
                state.report = CaseReport(status="ok", build_s=0.1, param_count=10)
            self.rounds.append((self.clock.now, state.request.case.label()))


def run(index: int, samples: tuple[float, ...], reopened: bool) -> Run:
    ordered = sorted(samples)
    return Run(
        index=index,
        median_s=ordered[len(ordered) // 2],
        ci_low_s=ordered[0],
        ci_high_s=ordered[-1],
        samples=samples,
        steps_per_block=1,
        build_s=0.1,
        first_step_s=0.1,
        warmup_steps=1,
        warmup_s=0.1,
        warmup_stop="steps",
        stop_reason="max_samples",
        sync_overhead_s=0.0,
        launcher="fork-server",
        reopened=reopened,
    )


PLAN = TimingConfig(plan=RunPlan(min_runs=3, max_runs=10))


def pair(batch: int, task: str = "infer") -> list[Case]:
    common = {"model": "resnet18", "task": task, "batch_size": batch, "input_size": 32}
    return [
        Case.build(framework="torch", threads=1, **common),
        Case.build(framework="tensorflow", threads=1, **common),
    ]


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Machine]:
    clock = Clock()
    found = Machine(clock, {})
    monkeypatch.setattr(local, "time", clock)
    kind = local.RoundKind(CaseRuns.of, found.run_round, local._case_stop, local.CASES.end)
    monkeypatch.setattr(local, "CASES", kind)
    yield found


def measure(
    machine: Machine, groups: list[list[Case]], budget_s: float
) -> tuple[dict[str, CaseOutcome], list[tuple[int, bool]]]:
    """Run the groups under the budget: each case's final outcome, and each group handed
    back (its index, and whether final), in the order handed back."""
    executor = local.LocalExecutor(budget_s=budget_s)
    requests = [[GroupRequest.for_case(c, PLAN) for c in g] for g in groups]
    finals: dict[str, CaseOutcome] = {}
    order = []
    for done in executor.run(requests, timeout_s=60):
        order.append((done.index, done.final))
        if done.final:
            for case, outcome in zip(groups[done.index], done.outcomes, strict=True):
                assert isinstance(outcome, CaseOutcome)
                finals[case.label()] = outcome
    return finals, order


def test_a_comparison_stopped_by_its_share_is_reopened_and_decided_with_the_time_left(
    machine: Machine,
) -> None:
    """Three comparisons share 100 s: the first is close (1.05x, noisy) and needs more
    runs than its minimum; the two after it decide within theirs, so the time left goes
    to the first, which is re-opened and decided."""
    close, quick, quicker = pair(1), pair(8), pair(16)
    machine.sides = {
        close[0].label(): Side(0.010, 0.04, 4.0),
        close[1].label(): Side(0.0105, 0.04, 4.0),
        **{c.label(): Side(0.01 * (1 + 0.5 * i), 0.01, 2.0) for i, c in enumerate(quick)},
        **{c.label(): Side(0.01 * (1 + 0.5 * i), 0.01, 2.0) for i, c in enumerate(quicker)},
    }
    start = machine.clock.now
    finals, order = measure(machine, [close, quick, quicker], budget_s=100)
    first = [finals[c.label()] for c in close]
    # Stopped by its share first (stored as it stood, not final), re-opened at the end.
    assert [index for index, final in order if final] == [1, 2, 0]
    assert all(o.stop_reason == "verdict" for o in first), [o.stop_reason for o in first]
    made = [len(o.runs) for o in first]
    assert made[0] == made[1] and made[0] > 4
    assert sum(r.reopened for r in first[0].runs) == made[0] - 3  # its minimum: 3 rounds
    assert any(r.reopened for r in first[0].runs) and not first[0].runs[0].reopened
    for case in (*quick, *quicker):
        assert finals[case.label()].stop_reason == "verdict"
        assert not any(r.reopened for r in finals[case.label()].runs)
    assert machine.clock.now - start <= 100


def test_a_comparison_that_cannot_be_decided_never_spends_past_the_budget(
    machine: Machine,
) -> None:
    """An A/A pair with a wide spread (the same variant twice) is undecided whatever its
    runs; re-opened, it stops where another round would overrun the budget."""
    same = pair(2)[0]
    machine.sides = {same.label(): Side(0.01, 0.25, 7.0)}
    decided = pair(4)
    machine.sides |= {c.label(): Side(0.01 * (1 + i), 0.01, 3.0) for i, c in enumerate(decided)}
    start = machine.clock.now
    finals, _ = measure(machine, [[same, same], decided], budget_s=100)
    assert machine.clock.now - start <= 100
    outcome = finals[same.label()]
    assert outcome.stop_reason == "time_share"
    assert 3 <= len(outcome.runs) < 10


def test_the_time_left_goes_first_where_it_decides_soonest(machine: Machine) -> None:
    """Two comparisons equally close (1.06x), one training (rounds of 16 s), one
    inference (4 s): after their minimum, the 40 s left go mostly to the inference one,
    which a few cheap rounds decide, not to the training one first in the sweep's order."""
    train, infer = pair(1, "train"), pair(1, "infer")
    machine.sides = {
        train[0].label(): Side(0.010, 0.03, 8.0),
        train[1].label(): Side(0.0106, 0.03, 8.0),
        infer[0].label(): Side(0.010, 0.03, 2.0),
        infer[1].label(): Side(0.0106, 0.03, 2.0),
    }
    finals, _ = measure(machine, [train, infer], budget_s=100)
    trained, inferred = finals[train[0].label()], finals[infer[0].label()]
    assert inferred.stop_reason == "verdict", inferred.stop_reason
    assert trained.stop_reason == "time_share"
    reopened = [sum(r.reopened for r in o.runs) for o in (trained, inferred)]
    assert reopened[1] > reopened[0], reopened


def test_a_comparison_that_lost_a_side_is_not_reopened(machine: Machine) -> None:
    """TensorFlow's run fails in round 4 of a close comparison: PyTorch's runs after it
    could not enter a verdict paired by round, so the time left goes elsewhere; the
    budget had re-opened it again and measured PyTorch alone until max_runs."""
    close, decided = pair(1), pair(8)
    machine.sides = {
        close[0].label(): Side(0.010, 0.04, 4.0),
        close[1].label(): Side(0.0105, 0.04, 4.0),
        **{c.label(): Side(0.01 * (1 + 0.5 * i), 0.01, 2.0) for i, c in enumerate(decided)},
    }
    machine.fails = {close[1].label(): 3}
    finals, _ = measure(machine, [close, decided], budget_s=100)
    survivor = finals[close[0].label()]
    assert finals[close[1].label()].stop_reason.startswith("failed")
    # Measured no further than the round its partner failed in (before: to max_runs).
    assert len(survivor.runs) == 4, len(survivor.runs)
