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
    independent samples. With fewer than 6 samples no 95% interval exists: the full range
    is returned, and it covers the median with probability 1 - 2**(1 - n) only (94% with
    5 samples, 75% with 3), which `median_ci_coverage` says.
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


def median_ci_coverage(n: int, confidence: float = 0.95) -> float:
    """The coverage `median_ci` really has with n samples: the nominal level when an
    order-statistic interval exists, else that of the full range."""
    if n < 1:
        raise ValueError("coverage of no samples")
    full_range = 1.0 - 2.0 ** (1 - n)
    return confidence if full_range >= confidence else full_range


def log_t_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float] | None:
    """Geometric mean of per-run values and its t interval, on the log scale.

    Each run (worker process) has its own offset, so runs, not blocks, are the
    independent observations; a t interval on n log run-medians is exact for lognormal
    process effects and honest (wide) for n as small as 2. None with one run: no
    between-process interval exists.
    """
    xs = np.log(np.asarray(values, dtype=float))
    if len(xs) < 2:
        return None
    mean = float(xs.mean())
    half = float(stats.t.ppf(0.5 + confidence / 2, len(xs) - 1) * xs.std(ddof=1) / np.sqrt(len(xs)))
    return float(np.exp(mean)), float(np.exp(mean - half)), float(np.exp(mean + half))


def geometric_mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("geometric mean of no values")
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=float)))))
