"""tune reads its best configuration and its speed-up from a Comparison: by the value
its verdicts read (each run's p25), not by median step time (synthetic runs)."""

from __future__ import annotations

import numpy as np
import pytest

from fwbench import tune
from fwbench.case import Case
from fwbench.measure.verdicts import Reading
from fwbench.result import Result

from .test_verdict_tables import _blocks, _result, _two_speeds


def _candidate(precision: str, runs: list[np.ndarray]) -> Result:
    r = _result("torch", "eager", runs, Reading(estimator="p25"), group="finalists")
    case = Case.build(
        framework="torch", model="resnet18", mode="eager", threads=2, precision=precision
    )
    return r.model_copy(update={"case": case, "result_id": precision})


def test_the_best_and_its_speed_up_are_what_the_verdict_reads() -> None:
    rng = np.random.default_rng(5)
    # The default (fp32) steps at one speed, 7.4 ms; bf16 at one of two, mostly the slow
    # one: its median is slower than fp32's, its p25 (the fast cluster) faster.
    default = _candidate("fp32", [_blocks(rng, 7.4e-3, 8) for _ in range(3)])
    other = _candidate("bf16", [_two_speeds(rng, 3, 5) for _ in range(3)])
    results = [default, other]
    assert other.measurement is not None and default.measurement is not None
    assert other.measurement.step_time_s.median > default.measurement.step_time_s.median
    defaults = {"torch": default.case}
    (choice,) = tune.choose(["torch"], results, defaults).choices
    assert choice.best is other and choice.default is default
    verdict = choice.confirmed()
    assert verdict is not None and verdict.faster == tune.describe(other)
    assert choice.speedup == pytest.approx(verdict.ratio) and choice.speedup > 1.2
    # The default best of its framework: no verdict, a speed-up of 1.
    (alone,) = tune.choose(["torch"], [default], defaults).choices
    assert alone.best is default and alone.confirmed() is None and alone.speedup == 1.0
