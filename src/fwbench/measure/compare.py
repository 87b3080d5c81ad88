"""Is A faster than B, by how much, and are they the same? Pure functions on runs.

A case is measured in several worker processes (runs); each run's median step time is
one observation, because each process has its own offset (memory layout, allocator and
thread placement) that no number of blocks inside it averages away, and blocks inside a
process are autocorrelated. So the ratio of two cases is the ratio of the geometric means
of their run medians, with a t interval on the log scale (METHODOLOGY rule 16): Welch's
for runs made apart, or a paired one on the per-round log ratios for runs made in the
same rounds (their blocks alternating, so whatever slowed the machine in a round slowed
both sides).

A verdict has three outcomes (rule 18), against an equivalence band of +-`band`:
- "A 1.31x faster (1.27-1.35)" when the whole interval lies beyond the band;
- "equivalent within +-2%" when the whole interval lies inside it;
- "inconclusive" otherwise: more runs, or a quieter machine, would decide it.
A significant 1.01x is therefore never a finding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

DEFAULT_BAND = 0.02
Outcome = Literal["faster", "equivalent", "inconclusive"]


@dataclass(frozen=True)
class Ratio:
    """geomean(a) / geomean(b) of per-run values, and its interval (nan-free: an
    interval that does not exist is (0, inf))."""

    value: float
    ci_low: float
    ci_high: float
    runs_a: int
    runs_b: int

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.ci_high) and self.ci_low > 0


def ratio(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Ratio:
    """Ratio of the geometric means of two sets of per-run values, with a Welch t interval
    of the difference of mean logs. One run on one side borrows the other side's
    variance (equal-variance assumption, said so by runs_a / runs_b); one run on both
    sides has no interval."""
    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    if len(la) < 1 or len(lb) < 1:
        raise ValueError("a comparison needs at least one run on each side")
    diff = float(la.mean() - lb.mean())
    na, nb = len(la), len(lb)
    if na < 2 and nb < 2:
        return Ratio(math.exp(diff), 0.0, math.inf, na, nb)
    if na >= 2 and nb >= 2:
        va, vb = float(la.var(ddof=1)) / na, float(lb.var(ddof=1)) / nb
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)) if se > 0 else na + nb - 2
    else:
        spread = float((la if na >= 2 else lb).var(ddof=1))
        se = math.sqrt(spread * (1 / na + 1 / nb))
        df = max(na, nb) - 1
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se
    return Ratio(math.exp(diff), math.exp(diff - half), math.exp(diff + half), na, nb)


def paired_ratio(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Ratio:
    """Ratio of the geometric means of per-run values made in the same rounds (a[i] and
    b[i] in round i), with a t interval of the mean per-round log ratio: what the two
    runs of a round shared (the machine's state while their blocks alternated) cancels,
    and what differs between the runs of a round, whichever way it leans, is what the
    interval reads. One round has no interval."""
    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    if len(la) != len(lb) or len(la) < 1:
        raise ValueError("a paired comparison needs the same rounds, at least one, on each side")
    d = la - lb
    n, diff = len(d), float(d.mean())
    if n < 2:
        return Ratio(math.exp(diff), 0.0, math.inf, n, n)
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    return Ratio(math.exp(diff), math.exp(diff - half), math.exp(diff + half), n, n)


@dataclass(frozen=True)
class Verdict:
    faster: str
    slower: str
    ratio: float  # slower / faster, >= 1
    ci_low: float
    ci_high: float
    outcome: Outcome
    band: float
    runs: tuple[int, int]  # runs of the faster and of the slower side
    # Inconclusive only: an estimate of the runs a side that would decide it at the
    # spread these runs showed (None: not estimable, e.g. one run a side).
    runs_needed: int | None = None

    @property
    def significant(self) -> bool:
        """A difference fwbench reports as a finding (beyond the equivalence band)."""
        return self.outcome == "faster"

    def interval(self) -> str:
        if not math.isfinite(self.ci_high):
            return "no interval: one run each"
        return f"{self.ci_low:.2f}-{self.ci_high:.2f}"

    def text(self) -> str:
        if self.outcome == "faster":
            return f"{self.faster} {self.ratio:.2f}x faster ({self.interval()})"
        detail = f"{self.faster} {self.ratio:.2f}x, {self.interval()}"
        if self.outcome == "equivalent":
            return f"equivalent within ±{self.band:.0%} ({detail})"
        return f"inconclusive ({detail}; {self.runs[0]}+{self.runs[1]} runs{self.bound()})"

    def rules_out(self) -> float | None:
        """The largest ratio either way that the interval leaves open: neither side is
        more than this much faster (None without an interval)."""
        if not math.isfinite(self.ci_high) or self.ci_low <= 0:
            return None
        return max(self.ci_high, 1.0 / self.ci_low)

    def bound(self) -> str:
        """What an inconclusive verdict still says: what it rules out, and what would
        decide it."""
        if self.outcome != "inconclusive" or (most := self.rules_out()) is None:
            return ""
        text = f"; neither is more than {most:.2f}x faster"
        if self.runs_needed is None:
            return text
        # Conditional: a difference that looks large after few runs is often smaller
        # (an inconclusive 1.06x of identical variants would not be decided at all).
        if self.runs_needed >= RUNS_NEEDED_CAP:
            return text + f"; were it {self.ratio:.2f}x, over {RUNS_NEEDED_CAP} runs a side"
        runs = f"about {self.runs_needed} runs a side would likely decide it"
        return text + f"; were it {self.ratio:.2f}x, {runs}"

    def short(self) -> str:
        if self.outcome == "faster":
            return f"{self.faster} {self.ratio:.2f}x faster"
        if self.outcome == "equivalent":
            return f"same within ±{self.band:.0%}"
        return f"inconclusive ({self.ratio:.2f}x)"


# Beyond this many runs a side, the estimate says only "over 100".
RUNS_NEEDED_CAP = 100
# The chance that the estimated runs decide it, were the difference and the spread what
# the runs so far showed (the usual sample-size rule: critical value plus this quantile).
POWER = 0.8


def runs_needed(
    a: Sequence[float],
    b: Sequence[float],
    band: float,
    confidence: float,
    paired: bool = False,
) -> int | None:
    """About how many runs a side would decide a comparison that is inconclusive now:
    the fewest n at which, were the ratio and the spread (on the logs: pooled, or of the
    per-round ratios when `paired`) what these runs showed, an interval would clear the
    band (a difference beyond it) or fit inside it (one within it) with probability
    POWER. An estimate: the runs so far estimate both only roughly. None without a
    spread (one run a side, or none at all)."""
    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    if paired:
        spreads = [float((la - lb).var(ddof=1)) / 2] if len(la) >= 2 else []
    else:
        spreads = [float(x.var(ddof=1)) for x in (la, lb) if len(x) >= 2]
    if not spreads or (sd := math.sqrt(float(np.mean(spreads)))) == 0:
        return None
    shown, edge = abs(float(la.mean() - lb.mean())), math.log1p(band)
    room = abs(shown - edge)
    if room == 0:
        return RUNS_NEEDED_CAP
    power = float(sps.norm.ppf(POWER))
    for n in range(max(len(la), len(lb), 2), RUNS_NEEDED_CAP):
        df = n - 1 if paired else 2 * n - 2
        critical = float(sps.t.ppf(0.5 + confidence / 2, df))
        if (critical + power) * sd * math.sqrt(2 / n) < room:
            return n
    return RUNS_NEEDED_CAP


def outcome_of(low: float, high: float, band: float) -> Outcome:
    """Three outcomes of an interval of slower/faster (or new/base) against +-band."""
    upper, lower = 1.0 + band, 1.0 / (1.0 + band)
    if low > upper or high < lower:
        return "faster"
    if lower <= low and high <= upper:
        return "equivalent"
    return "inconclusive"


def compare(
    a: Sequence[float],
    b: Sequence[float],
    name_a: str = "A",
    name_b: str = "B",
    band: float = DEFAULT_BAND,
    confidence: float = 0.95,
    paired: bool = False,
) -> Verdict:
    """Compare two cases by their per-run step times (seconds; lower is faster); with
    `paired`, a[i] and b[i] were made in the same round (paired_ratio)."""
    if len(a) < 1 or len(b) < 1:
        raise ValueError("a comparison needs at least one run on each side")
    if float(np.mean(np.log(a))) > float(np.mean(np.log(b))):
        a, b, name_a, name_b = b, a, name_b, name_a
    r = (paired_ratio if paired else ratio)(b, a, confidence)  # slower / faster
    outcome = outcome_of(r.ci_low, r.ci_high, band)
    needed = runs_needed(a, b, band, confidence, paired) if outcome == "inconclusive" else None
    return Verdict(
        name_a,
        name_b,
        r.value,
        r.ci_low,
        r.ci_high,
        outcome,
        band,
        (r.runs_b, r.runs_a),
        needed,
    )
