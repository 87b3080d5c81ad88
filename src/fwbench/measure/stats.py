"""Pure statistics on samples of step times. No I/O, no clocks, no frameworks.

numpy and scipy are imported by the functions that compute: the CLI's help, its errors
and `fwbench env` import the modules above this one without computing anything, and
scipy alone would take most of their start-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def median(samples: Sequence[float]) -> float:
    import numpy as np

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
    import numpy as np
    from scipy import stats

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
    import numpy as np

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
    import numpy as np
    from scipy import stats

    xs = np.log(np.asarray(values, dtype=float))
    if len(xs) < 2:
        return None
    mean = float(xs.mean())
    half = float(stats.t.ppf(0.5 + confidence / 2, len(xs) - 1) * xs.std(ddof=1) / np.sqrt(len(xs)))
    return float(np.exp(mean)), float(np.exp(mean - half)), float(np.exp(mean + half))


def geometric_mean(values: Sequence[float]) -> float:
    import numpy as np

    if not values:
        raise ValueError("geometric mean of no values")
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


@dataclass(frozen=True)
class Clusters:
    """A run's blocks in two separate clusters: each cluster's median and its blocks."""

    low: float
    high: float
    n_low: int
    n_high: int

    @property
    def ratio(self) -> float:
        return self.high / self.low


# Two clusters are said only when each holds at least this share of the blocks (and two
# blocks): a lone slow block is interference, not a mode.
CLUSTER_SHARE = 0.2
# ... their medians are at least this far apart: a split of 5.70 and 5.75 ms changes no
# figure anyone reads ...
CLUSTER_APART = 1.10
# ... and the gap between them is wider than either cluster's range and than this many
# standard deviations within the clusters. In simulation (6 to 40 blocks, noise of 3-20%,
# normal or skewed as interference skews it), one cluster was taken for two in at most
# 3.5% of runs (6 blocks), under 2% from 7 blocks, none from 12; two clusters 1.7x apart
# with 4% noise each were found in 97-99% of runs.
CLUSTER_GAP_SD = 6.0


def two_clusters(samples: Sequence[float]) -> Clusters | None:
    """The two clusters a run's blocks fall in (a step that runs at one of two speeds: a
    thread placement, a clock, a code path that changes between blocks), or None for
    blocks in one cluster, however spread, or fewer than 6 blocks.

    The split is the one that leaves the least spread inside the two groups (on the
    logs: 1-D k-means, exact for two groups of sorted values); it is two clusters when
    each group holds CLUSTER_SHARE of the blocks, their medians are CLUSTER_APART apart
    and the gap between them is wider than either group's range and CLUSTER_GAP_SD of
    their pooled standard deviation: a unimodal run, even a skewed or noisy one, leaves
    no stretch that empty between its halves."""
    import numpy as np

    logs = np.sort(np.log(np.asarray(samples, dtype=float)))
    n = len(logs)
    least = max(2, int(np.ceil(CLUSTER_SHARE * n)))
    if n < max(6, 2 * least):
        return None
    best: tuple[float, int] | None = None
    for k in range(least, n - least + 1):
        lower, upper = logs[:k], logs[k:]
        within = float(((lower - lower.mean()) ** 2).sum() + ((upper - upper.mean()) ** 2).sum())
        if best is None or within < best[0]:
            best = (within, k)
    assert best is not None
    within, k = best
    lower, upper = logs[:k], logs[k:]
    gap = float(upper[0] - lower[-1])
    ranges = max(float(lower[-1] - lower[0]), float(upper[-1] - upper[0]))
    sd = (within / (n - 2)) ** 0.5
    low, high = float(np.exp(np.median(lower))), float(np.exp(np.median(upper)))
    if high / low < CLUSTER_APART or gap <= ranges or gap <= CLUSTER_GAP_SD * sd:
        return None
    return Clusters(low, high, k, n - k)
