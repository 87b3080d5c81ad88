from __future__ import annotations

import numpy as np
import pytest

from fwbench.measure.compare import compare


def lognormal(rng: np.random.Generator, median: float, n: int) -> list[float]:
    return list(median * rng.lognormal(0.0, 0.05, size=n))


def test_a_known_20_percent_difference_is_significant() -> None:
    rng = np.random.default_rng(1)
    v = compare(lognormal(rng, 0.12, 30), lognormal(rng, 0.10, 30), "slow", "fast")
    assert v.significant
    assert (v.faster, v.slower) == ("fast", "slow")
    assert v.ratio == pytest.approx(1.2, rel=0.03)
    assert v.ci_low <= 1.2 <= v.ci_high
    assert v.text().startswith("fast 1.2")


def test_identical_distributions_are_rarely_called_different() -> None:
    rng = np.random.default_rng(2)
    trials = 200
    false = sum(
        compare(lognormal(rng, 0.1, 30), lognormal(rng, 0.1, 30), seed=i).significant
        for i in range(trials)
    )
    assert false / trials <= 0.08  # nominal 5%
    v = compare(lognormal(rng, 0.1, 30), lognormal(rng, 0.1, 30))
    if not v.significant:
        assert v.text().startswith("no significant difference")


def test_the_interval_is_reproducible_and_needs_samples() -> None:
    a, b = [1.0, 1.1, 1.2, 1.05], [2.0, 2.1, 2.2, 2.05]
    assert compare(a, b) == compare(a, b)
    with pytest.raises(ValueError):
        compare([1.0], [2.0, 3.0])
