"""Pure statistics on samples of step times. No I/O, no clocks, no frameworks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats


def median(samples: Sequence[float]) -> float:
    if not samples:
        raise ValueError("median of no samples")
    return float(np.median(np.asarray(samples, dtype=float)))


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median, from order statistics.

    Step times are skewed (a long right tail of preemptions), so an interval that assumes
    normality would be wrong; the binomial order-statistic interval assumes nothing but
    independent samples. With fewer than 6 samples no 95% interval exists and the full
    range is returned (wider than the nominal level, never narrower).
    """
    if not samples:
        raise ValueError("confidence interval of no samples")
    xs = np.sort(np.asarray(samples, dtype=float))
    n = len(xs)
    alpha = 1.0 - confidence
    # Largest rank r with P(Binomial(n, 1/2) <= r - 1) <= alpha / 2.
    rank = int(stats.binom.ppf(alpha / 2, n, 0.5))
    if stats.binom.cdf(rank - 1, n, 0.5) > alpha / 2:
        rank -= 1
    if rank < 1:
        return float(xs[0]), float(xs[-1])
    return float(xs[rank - 1]), float(xs[n - rank])


def iqr(samples: Sequence[float]) -> float:
    q1, q3 = np.percentile(np.asarray(samples, dtype=float), [25, 75])
    return float(q3 - q1)


def relative_half_width(low: float, high: float, centre: float) -> float:
    return (high - low) / 2.0 / centre if centre > 0 else float("inf")
