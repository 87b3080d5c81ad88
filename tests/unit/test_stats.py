from __future__ import annotations

import numpy as np
import pytest

from fwbench.measure import stats


def test_median_ci_covers_the_true_median_at_about_the_nominal_rate() -> None:
    rng = np.random.default_rng(0)
    # Skewed like step times: lognormal, true median = exp(0) = 1.
    trials, hits = 2000, 0
    for _ in range(trials):
        lo, hi = stats.median_ci(list(rng.lognormal(0.0, 0.3, size=40)))
        hits += lo <= 1.0 <= hi
    assert 0.93 <= hits / trials <= 0.99


def test_median_ci_is_ordered_and_contains_the_median() -> None:
    xs = [5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 9.0, 8.0, 10.0]
    lo, hi = stats.median_ci(xs)
    assert (lo, hi) == (2.0, 9.0)  # ranks 2 and 9 of 10, the textbook interval
    assert lo <= stats.median(xs) <= hi


def test_median_ci_with_too_few_samples_is_the_full_range() -> None:
    assert stats.median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)


def test_empty_samples_are_refused() -> None:
    with pytest.raises(ValueError):
        stats.median([])
    with pytest.raises(ValueError):
        stats.median_ci([])


def test_iqr_and_relative_half_width() -> None:
    assert stats.iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0)
    assert stats.relative_half_width(0.9, 1.1, 1.0) == pytest.approx(0.1)
