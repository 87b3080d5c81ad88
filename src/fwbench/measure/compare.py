"""Is A faster than B? A ratio with a bootstrap CI and a rank test. Pure functions.

The ratio is median(slower) / median(faster) step time, so "1.31x faster" reads the way
the studies plot relative time. Its 95% interval comes from a percentile bootstrap of
both medians; the Mann-Whitney U test on the per-block samples says whether the two
distributions differ at all. A difference is called significant only when both agree
(p < alpha and the interval excludes 1); otherwise fwbench says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class Verdict:
    faster: str
    slower: str
    ratio: float  # median(slower) / median(faster), >= 1
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool

    def text(self) -> str:
        interval = f"{self.ci_low:.2f}-{self.ci_high:.2f}"
        if self.significant:
            return f"{self.faster} {self.ratio:.2f}x faster ({interval})"
        return (
            f"no significant difference ({self.faster} {self.ratio:.2f}x, {interval}, "
            f"p={self.p_value:.2g})"
        )


def _bootstrap_medians(xs: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    idx = rng.integers(0, len(xs), size=(n, len(xs)))
    medians: np.ndarray = np.median(xs[idx], axis=1)
    return medians


@dataclass(frozen=True)
class Ratio:
    """median(a) / median(b), its bootstrap interval, and the rank test's p-value."""

    value: float
    ci_low: float
    ci_high: float
    p_value: float


def ratio(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> Ratio:
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(xa) < 2 or len(xb) < 2:
        raise ValueError("a comparison needs at least two samples on each side")
    rng = np.random.default_rng(seed)  # reproducible: the same samples, the same interval
    boot = _bootstrap_medians(xa, rng, resamples) / _bootstrap_medians(xb, rng, resamples)
    tail = (1 - confidence) / 2 * 100
    low, high = (float(v) for v in np.percentile(boot, [tail, 100 - tail]))
    p = float(sps.mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
    return Ratio(float(np.median(xa) / np.median(xb)), low, high, p)


def compare(
    a: Sequence[float],
    b: Sequence[float],
    name_a: str = "A",
    name_b: str = "B",
    confidence: float = 0.95,
    alpha: float = 0.05,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> Verdict:
    """Compare two sets of step-time samples (seconds; lower is faster)."""
    if len(a) >= 2 and len(b) >= 2 and np.median(a) > np.median(b):
        a, b, name_a, name_b = b, a, name_b, name_a
    r = ratio(b, a, confidence, resamples, seed)  # slower / faster
    significant = r.p_value < alpha and r.ci_low > 1.0
    return Verdict(name_a, name_b, r.value, r.ci_low, r.ci_high, r.p_value, significant)
