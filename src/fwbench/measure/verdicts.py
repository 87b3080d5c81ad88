"""Verdicts: where fwbench decides whether A is faster than B, by how much, or the same.

Everything a verdict is made of lives here, and every view asks it: the summary tables
(terminal, HTML, Markdown), the studies' claims, tune, serving, regressions, scaling,
and the driver's stopping rule. Pure: values in, verdicts out.

- **The reading** (`Reading`, recorded with every result): which value of each run a
  verdict reads (the estimator: each run's median block, or a low quantile of its
  blocks, or its fastest; `ESTIMATORS`), and the equivalence band.
- **The interval.** A case is measured in several worker processes (runs); each run
  gives one value, because each process has its own offset (memory layout, allocator and
  thread placement) that no number of blocks inside it averages away, and blocks inside
  a process are autocorrelated. So the ratio of two cases is the ratio of the geometric
  means of their per-run values, with a t interval on the log scale (METHODOLOGY rule
  16): Welch's for runs made apart (`ratio`), or a paired one on the per-round log
  ratios for runs made in the same rounds (`paired_ratio`: their blocks alternated, so
  whatever slowed the machine in a round slowed both sides).
- **The outcome** (rule 18), against the band: "A 1.31x faster (1.27-1.35)" when the
  whole interval lies beyond it; "equivalent within +-2%" when it lies inside; else
  "inconclusive", with what the interval still rules out and about how many runs would
  decide it. A significant 1.01x is never a finding.
- **The level.** A fixed interval (`confidence`, valid when read once, after the runs
  are made), or a sequential plan (`Looks`): when the driver reads the verdict after
  every round from `first` to `last` runs a side and stops once it is decided, each
  look's interval is at the nominal level that keeps the chance of ever calling
  identical variants different at `alpha` over all the looks (METHODOLOGY rule 5a).
  That level is Pocock's idea, one constant level for every look, calibrated here for
  the t statistic the verdicts read (Welch's, or the paired one): the `alpha` quantile
  of the smallest p-value over the looks, in 20,000 simulated A/A comparisons of normal
  per-run values (a fixed seed: the same plan gives the same level on every machine).
  Runs of one side that are correlated in time (a machine's state that slows one
  framework more than the other for minutes) make later looks overconfident: in
  simulation, with successive runs of a side correlated at 0.5, the levels calibrated
  for 5% let 5.7% of identical pairs be called different. So a plan of several looks is
  calibrated for SEQUENTIAL_MARGIN x alpha (3%), which keeps 5% under that correlation,
  process offsets, drift and one-sided interference (tests/unit/test_sequential.py);
  one look (a fixed number of runs) reads a plain 95% interval (paired: PAIRED_MARGIN).
- **The pairs** (`Comparison`): the variants of one workload and which pairs it decides
  (the fastest against the runner-up, or pairs named by the caller).
- **Stored results** (`comparison_of`): each side's per-run values by the estimator and
  under the plan they were recorded with, paired where they were measured together.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fwbench.measure import stats
from fwbench.tasks import STEP_TIME

# ---------------------------------------------------------------------------------------
# The reading: which value of each run, and the band


class RunLike(Protocol):
    """What an estimator reads of one run (fwbench.result.Run, a driver's timing)."""

    @property
    def median_s(self) -> float: ...

    @property
    def samples(self) -> Sequence[float]: ...  # seconds per step, one per timed block


@dataclass(frozen=True)
class Series:
    """A run's values of a figure other than its step time (a generation's time per
    output token in each block), read by the estimators as its step times are."""

    samples: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples)


def _quantile(q: float) -> Callable[[RunLike], float]:
    def estimate(run: RunLike) -> float:
        import numpy as np

        # A run recorded without its blocks (a driver's figures of an old result) has
        # only its median to give.
        return float(np.quantile(run.samples, q)) if len(run.samples) else run.median_s

    return estimate


# One value per run, from its timed blocks (seconds per step). Interference on a shared
# machine only adds time, so a low quantile of a run's blocks moves less from run to run
# than its median; the minimum is the extreme of that, and depends most on how many
# blocks a run made (runs of a case take equal durations: RunTiming.run_time_s).
# docs/methodology.md ("Which per-run value verdicts read") has the measurements.
ESTIMATORS: dict[str, Callable[[RunLike], float]] = {
    "median": lambda run: run.median_s,  # the run's median block: its typical step
    "p25": _quantile(0.25),
    "p10": _quantile(0.10),
    "min": _quantile(0.0),
}
ESTIMATOR_TEXT = {
    "median": "each run's median block",
    "p25": "each run's 25th-percentile block",
    "p10": "each run's 10th-percentile block",
    "min": "each run's fastest block",
}
Estimator = Literal["median", "p25", "p10", "min"]
# The 25th percentile: in every condition measured (docs/methodology.md) it spread no
# more from run to run than the median, and 20-30% less in most, while its ratios stayed
# within 1-2% of the medians'. The minimum is best under heavy interference, worst on a
# quiet machine, and depends most on how many blocks a run made.
DEFAULT_ESTIMATOR: Estimator = "p25"
# Within +-2% two variants are the same for any decision a user makes on them; a user for
# whom 5% is "the same" says so (--band 5%).
DEFAULT_BAND = 0.02
MIN_BAND = 0.001
BAND_RANGE = "0.1% to 99.9% (0.001 to 0.999)"


def band_value(value: object) -> float:
    """A band as a user writes it: a share (0.05) or a percentage ("5%")."""
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text.removesuffix("%"))
        except ValueError:
            raise ValueError(f"{value!r} is not a share (0.05) or a percentage (5%)") from None
        if text.endswith("%"):
            return number / 100
        value = number
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a share (0.05) or a percentage (5%)")
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite share; valid: {BAND_RANGE}")
    if value >= 1:
        # "5" is far more likely meant as 5% than as 500%: said, not guessed.
        raise ValueError(f"{value:g} would be {value:.0%}; write {value:g}% or {value / 100:g}")
    if 0 < value < MIN_BAND:
        # No run's interval resolves a difference this small: every difference the
        # intervals see would be a finding, which the band is there to prevent.
        raise ValueError(f"{value:g} is below {percent(MIN_BAND)}; valid: {BAND_RANGE}")
    return float(value)


class Reading(BaseModel):
    """How verdicts read a case's runs: the value of each run (`estimator`) and the
    equivalence band. Recorded with every result, read by the driver's stopping rule and
    by every view; the worker never sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    estimator: Estimator = DEFAULT_ESTIMATOR
    band: float = Field(DEFAULT_BAND, gt=0, lt=1)

    @field_validator("band", mode="before")
    @classmethod
    def _share(cls, value: object) -> float:
        return band_value(value)


def percent(share: float) -> str:
    """2%, 2.5%: a band as its text says it; 95%, 96.5%, 99.9%: an interval's level (the
    one way every view writes it)."""
    return f"{share:.1%}".replace(".0%", "%")


def common_estimator(names: Iterable[str]) -> str:
    """The estimator a verdict between results reads: theirs where they agree; the
    median where they do not (every run has one, and a verdict must read both sides the
    same way)."""
    found = set(names)
    return found.pop() if len(found) == 1 else "median"


def common_band(bands: Iterable[float]) -> float:
    """The band a verdict between results reads: theirs where they agree; the default
    where they do not (neither side's is more right than the other's)."""
    found = set(bands)
    return found.pop() if len(found) == 1 else DEFAULT_BAND


def per_run(runs: Sequence[RunLike], estimator: str = "median") -> tuple[float, ...]:
    """One value per worker process, by the estimator: what verdicts and ratios are built
    on (the estimator their results were measured under), and trends and charts (the
    median: each run's typical step)."""
    try:
        estimate = ESTIMATORS[estimator]
    except KeyError:
        raise ValueError(
            f"unknown estimator {estimator!r}; valid choices: {', '.join(ESTIMATORS)}"
        ) from None
    return tuple(estimate(run) for run in runs)


# ---------------------------------------------------------------------------------------
# The interval of a ratio over runs


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
    import numpy as np
    from scipy import stats as sps

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
    import numpy as np
    from scipy import stats as sps

    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    if len(la) != len(lb) or len(la) < 1:
        raise ValueError("a paired comparison needs the same rounds, at least one, on each side")
    d = la - lb
    n, diff = len(d), float(d.mean())
    if n < 2:
        return Ratio(math.exp(diff), 0.0, math.inf, n, n)
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    return Ratio(math.exp(diff), math.exp(diff - half), math.exp(diff + half), n, n)


# ---------------------------------------------------------------------------------------
# The outcome of one pair

Outcome = Literal["faster", "equivalent", "inconclusive"]


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
            return f"equivalent within ±{percent(self.band)} ({detail})"
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
            return f"same within ±{percent(self.band)}"
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
    import numpy as np
    from scipy import stats as sps

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
    # Every candidate n at once: one vectorised quantile call, not one per n (the
    # sequential rule asks this after every round, so it is on the hot path of a sweep).
    n = np.arange(max(len(la), len(lb), 2), RUNS_NEEDED_CAP)
    if not len(n):
        return RUNS_NEEDED_CAP
    critical = sps.t.ppf(0.5 + confidence / 2, n - 1 if paired else 2 * n - 2)
    clears = (critical + float(sps.norm.ppf(POWER))) * sd * np.sqrt(2 / n) < room
    return int(n[np.argmax(clears)]) if clears.any() else RUNS_NEEDED_CAP


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
    import numpy as np

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


# ---------------------------------------------------------------------------------------
# The level of each look

# Several looks are calibrated for this share of alpha (see the module's docstring).
SEQUENTIAL_MARGIN = 0.6
# A paired reading is calibrated for this share of the alpha an unpaired one reads at.
# Pairing removes what the two runs of a round shared, and with it the cushion that
# noise gave the unpaired interval against runs correlated in time (a machine's state
# that favours one side for minutes): in the simulation of tests/unit/test_sequential.py,
# at this share the paired reading calls identical variants different no more often
# than the unpaired one does, at every plan from 3 runs a side to 10, fixed or
# sequential (docs/methodology.md, "Pairing runs by round").
PAIRED_MARGIN = 0.7
# Beyond this many runs a side, the calibration would simulate too much: Bonferroni over
# the looks instead (valid, and more conservative).
_SIMULATED_RUNS = 60
_SIMULATIONS = 20_000


@functools.lru_cache(maxsize=64)
def nominal_alpha(first: int, last: int, alpha: float = 0.05, paired: bool = False) -> float:
    """The two-sided level of each look of a plan that reads the verdict at every round
    from `first` to `last` runs a side, such that identical variants are called
    different at some look with probability `alpha` (see the module's docstring), for
    the Welch t statistic or, `paired`, the t statistic of the per-round differences."""
    import numpy as np
    from scipy import stats as sps

    looks = list(range(max(first, 2), last + 1))
    if len(looks) <= 1:
        return alpha
    if last > _SIMULATED_RUNS:
        return alpha / len(looks)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((_SIMULATIONS, last))
    b = rng.standard_normal((_SIMULATIONS, last))
    smallest = np.ones(_SIMULATIONS)
    for n in looks:
        if paired:
            d = a[:, :n] - b[:, :n]
            t = d.mean(axis=1) / np.sqrt(d.var(axis=1, ddof=1) / n)
            df: Any = n - 1
        else:
            va, vb = a[:, :n].var(axis=1, ddof=1) / n, b[:, :n].var(axis=1, ddof=1) / n
            t = (a[:, :n].mean(axis=1) - b[:, :n].mean(axis=1)) / np.sqrt(va + vb)
            df = (va + vb) ** 2 / ((va**2 + vb**2) / (n - 1))
        smallest = np.minimum(smallest, 2 * sps.t.sf(np.abs(t), df))
    return float(np.quantile(smallest, alpha))


@dataclass(frozen=True)
class Looks:
    """A sequential plan: the verdict is read after each round, from `first` to `last`
    runs a side, and the comparison stops once it is decided; `paired`: read on the
    per-round ratios of runs made in the same rounds."""

    first: int
    last: int
    alpha: float = 0.05
    paired: bool = False

    @property
    def confidence(self) -> float:
        """Each look's interval level: wider than 1 - alpha, so that all looks together
        keep alpha."""
        share = PAIRED_MARGIN if self.paired else 1.0
        if self.last <= max(self.first, 2):
            return 1.0 - self.alpha * share
        return 1.0 - nominal_alpha(
            self.first, self.last, self.alpha * SEQUENTIAL_MARGIN * share, self.paired
        )

    def describe(self) -> str:
        how = ", paired by round" if self.paired else ""
        if self.last <= max(self.first, 2):
            return f"{percent(self.confidence)} interval{how}"
        return (
            f"read after each of runs {self.first}-{self.last} a side{how}, "
            f"{percent(self.confidence)} intervals keep {1 - self.alpha:.0%} over all looks"
        )


def widest(plans: Iterable[Looks | None]) -> Looks | None:
    """The plan a verdict between results must be read under: every look any side's
    runs could have stopped at (None: none stopped on a verdict, a fixed interval)."""
    found = [p for p in plans if p is not None]
    if not found:
        return None
    return Looks(min(p.first for p in found), max(p.last for p in found), found[0].alpha)


# ---------------------------------------------------------------------------------------
# The pairs: a comparison of the variants of one workload

# Which pairs a comparison decides: the fastest variant against the runner-up (tables),
# or pairs named by the caller (a study's a against b, tune's best against its default,
# a regression's new against base).
PairRule = Literal["fastest_vs_runner_up", "given"]


@dataclass(frozen=True)
class Variant:
    """One side: its name (a case's variant, a label) and its per-run values, lower is
    better (times; a rate is given as its inverse); where its runs were made in rounds
    with other variants', the round of each value and the group they were made in."""

    name: str
    values: tuple[float, ...]
    rounds: tuple[int, ...] | None = None
    group: str | None = None

    @property
    def centre(self) -> float:
        """The geometric mean of its values: the figure its verdicts read."""
        return statistics.geometric_mean(self.values)

    def interval(self, confidence: float = 0.95) -> tuple[float, float] | None:
        """The t interval of `centre` on the logs of its values, as a case's step time
        has over its runs (None with one value: no variation between runs to build it
        on)."""
        found = stats.log_t_interval(self.values, confidence)
        return None if found is None else (found[1], found[2])


def matched(a: Variant, b: Variant) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The values of the rounds both sides ran, in round order, where they were measured
    in one group and share at least two rounds (a side whose run failed stopped there;
    the other's later rounds have no partner); None where the pair reads unpaired."""
    if a.rounds is None or b.rounds is None or a.group is None or a.group != b.group:
        return None
    of_a = dict(zip(a.rounds, a.values, strict=True))
    of_b = dict(zip(b.rounds, b.values, strict=True))
    common = sorted(set(of_a) & set(of_b))
    if len(common) < 2:
        return None
    return tuple(of_a[r] for r in common), tuple(of_b[r] for r in common)


def _common_rounds(variants: tuple[Variant, ...]) -> tuple[Variant, ...]:
    """The variants of each group, measured in rounds, read on the rounds they all ran
    (where they share two or more): a run whose partner failed has no pair in its round,
    and a paired verdict leaves it out; its side's time, interval and rank must too, or a
    table shows the slower-looking time beside "faster" (one slow unpaired run)."""
    groups: dict[str | None, list[Variant]] = {}
    for v in variants:
        if v.rounds is not None and v.group is not None:
            groups.setdefault(v.group, []).append(v)
    kept: dict[str, Variant] = {}
    for members in groups.values():
        common = set.intersection(*(set(v.rounds or ()) for v in members))
        if len(members) < 2 or len(common) < 2:
            continue
        for v in members:
            pairs = [(r, x) for r, x in zip(v.rounds or (), v.values, strict=True) if r in common]
            kept[v.name] = dataclasses.replace(
                v, values=tuple(x for _, x in pairs), rounds=tuple(r for r, _ in pairs)
            )
    return tuple(kept.get(v.name, v) for v in variants)


@dataclass(frozen=True)
class Comparison:
    variants: tuple[Variant, ...]
    rule: PairRule = "fastest_vs_runner_up"
    given: tuple[tuple[str, str], ...] = ()  # rule "given": (a, b) by name
    band: float = DEFAULT_BAND
    confidence: float = 0.95  # of a fixed interval; a sequential plan sets its own
    looks: Looks | None = None
    estimator: str = DEFAULT_ESTIMATOR  # what the values are (ESTIMATORS), for the text
    figure: str = STEP_TIME.name  # which figure of each run they are of

    @classmethod
    def of(
        cls,
        values: Mapping[str, Sequence[float]],
        rule: PairRule = "fastest_vs_runner_up",
        given: Sequence[tuple[str, str]] = (),
        band: float = DEFAULT_BAND,
        confidence: float = 0.95,
        looks: Looks | None = None,
        estimator: str = DEFAULT_ESTIMATOR,
        rounds: Mapping[str, Sequence[int]] | None = None,
        groups: Mapping[str, str | None] | None = None,
        figure: str = STEP_TIME.name,
    ) -> Comparison:
        """From name -> per-run values; variants without a value are left out. `rounds`
        (name -> the round of each value) says which variants' runs were made in rounds,
        and `groups` (name -> group) in which group (left out: one group for all); a pair
        of one group is read on its per-round ratios (`matched`)."""
        variants = tuple(
            Variant(
                name,
                tuple(v),
                tuple(rounds[name]) if rounds is not None and name in rounds else None,
                groups.get(name) if groups is not None else "",
            )
            for name, v in values.items()
            if len(v) > 0
        )
        variants = _common_rounds(variants)
        return cls(variants, rule, tuple(given), band, confidence, looks, estimator, figure)

    @property
    def paired(self) -> bool:
        """Every pair it decides reads its per-round ratios (runs made in the same rounds)."""
        found = self.pairs()
        return bool(found) and all(matched(a, b) is not None for a, b in found)

    @property
    def plan(self) -> Looks | None:
        """The sequential plan its verdicts are read under, paired where they are."""
        return dataclasses.replace(self.looks, paired=self.paired) if self.looks else None

    def _level(self, paired: bool) -> float:
        if self.looks is not None:
            return dataclasses.replace(self.looks, paired=paired).confidence
        return 1.0 - (1.0 - self.confidence) * (PAIRED_MARGIN if paired else 1.0)

    @property
    def level(self) -> float:
        """The confidence of the intervals its verdicts read."""
        return self._level(self.paired)

    def ranked(self) -> list[Variant]:
        """Its variants, fastest first, by the figure its verdicts read."""
        return sorted(self.variants, key=lambda v: v.centre)

    def variant(self, name: str) -> Variant | None:
        return next((v for v in self.variants if v.name == name), None)

    def pairs(self) -> list[tuple[Variant, Variant]]:
        """The pairs this comparison decides (a pair whose side has no runs is left out)."""
        if self.rule == "fastest_vs_runner_up":
            ranked = self.ranked()
            return [(ranked[0], ranked[1])] if len(ranked) >= 2 else []
        by_name = {v.name: v for v in self.variants}
        return [(by_name[a], by_name[b]) for a, b in self.given if a in by_name and b in by_name]

    def verdicts(self) -> list[Verdict]:
        found = []
        for a, b in self.pairs():
            sides = matched(a, b)
            paired = sides is not None
            found.append(
                compare(
                    *(sides or (a.values, b.values)),
                    a.name,
                    b.name,
                    self.band,
                    self._level(paired),
                    paired,
                )
            )
        return found

    def verdict(self) -> Verdict | None:
        """The first pair's verdict (the only one under fastest_vs_runner_up)."""
        found = self.verdicts()
        return found[0] if found else None

    def ratios(self) -> list[Ratio]:
        """a / b of each pair, with its interval at `confidence` (regressions, scaling)."""
        found = []
        for a, b in self.pairs():
            sides = matched(a, b)
            if sides is None:
                found.append(ratio(a.values, b.values, self._level(False)))
            else:
                found.append(paired_ratio(*sides, self._level(True)))
        return found

    def relative(self, name: str) -> float | None:
        """A variant's figure against the fastest's (fastest = 1.0), by the values its
        verdicts read: for the pair it decides, the verdict's own ratio, so a table's
        `x` column and its verdict say one number."""
        mine, ranked = self.variant(name), self.ranked()
        if mine is None or not ranked:
            return None
        if self.rule == "fastest_vs_runner_up" and (verdict := self.verdict()) is not None:
            if name == verdict.slower:
                return verdict.ratio
            if name == verdict.faster:
                return 1.0
        return mine.centre / ranked[0].centre

    @property
    def decided(self) -> bool:
        """Every pair has an answer (faster, or equivalent within the band)."""
        found = self.verdicts()
        return bool(found) and all(v.outcome != "inconclusive" for v in found)


def as_they_come(runs: Sequence[Sequence[RunLike]], reading: Reading, looks: Looks) -> Comparison:
    """The comparison of the variants of a group measured together, after a round, as
    the driver's stopping rule reads it: by place (an A/A group holds one case twice),
    each variant's run i made in round i (a variant whose run failed is no longer
    among them), so the pairs read paired by round, as every view will read them."""
    values = {f"{i}": per_run(found, reading.estimator) for i, found in enumerate(runs)}
    rounds = {key: range(len(found)) for key, found in values.items()}
    return Comparison.of(
        values, band=reading.band, looks=looks, estimator=reading.estimator, rounds=rounds
    )


# ---------------------------------------------------------------------------------------
# Stored results, read as they were measured


class Measured(Protocol):
    """What a verdict reads of one side's measurement (fwbench.result.Measurement)."""

    @property
    def group_id(self) -> str | None: ...

    def per_run(self, estimator: str = ..., figure: str = ...) -> tuple[float, ...]: ...

    def rounds(self, figure: str = ...) -> tuple[int, ...]: ...


class Recorded(Protocol):
    """What a verdict reads of one stored result (fwbench.result.Result): its runs, how
    they were planned (the sequential plan they could have stopped at) and read."""

    @property
    def measurement(self) -> Measured | None: ...

    @property
    def reading(self) -> Reading: ...

    @property
    def looks(self) -> Looks | None: ...

    @property
    def verdict_figure(self) -> str: ...


def comparison_of(
    results: Mapping[str, Recorded],
    rule: PairRule = "fastest_vs_runner_up",
    given: Sequence[tuple[str, str]] = (),
    band: float | None = None,
    confidence: float = 0.95,
    sequential: bool = True,
    figure: str | None = None,
) -> Comparison:
    """The comparison of measured results by name, read as they were measured: each
    side's per-run values of `figure` (left out: the figure their task's verdicts read,
    Result.verdict_figure, where the sides agree; the step time where they do not) by
    the estimator they were recorded under (where the sides agree), against the band
    they were recorded under (where they agree; `band` given: that one), and, with
    `sequential`, under the widest plan any side's runs could have stopped at
    (Result.looks). A pair of results measured together in one group
    (Measurement.group_id) is read on its runs paired by round, others unpaired.
    Results without a measurement are left out."""
    measured = {name: r.measurement for name, r in results.items() if r.measurement is not None}
    ok = [results[name] for name in measured]
    return comparison_between(
        measured,
        rule,
        given,
        common_band(r.reading.band for r in ok) if band is None else band,
        confidence,
        widest(r.looks for r in ok) if sequential else None,
        common_estimator(r.reading.estimator for r in ok),
        common_figure(ok) if figure is None else figure,
    )


def comparison_between(
    measurements: Mapping[str, Measured],
    rule: PairRule = "fastest_vs_runner_up",
    given: Sequence[tuple[str, str]] = (),
    band: float = DEFAULT_BAND,
    confidence: float = 0.95,
    looks: Looks | None = None,
    estimator: str = DEFAULT_ESTIMATOR,
    figure: str = STEP_TIME.name,
) -> Comparison:
    """The comparison of measurements by name: each one's per-run values of `figure` by
    `estimator`, under `looks` (None: a fixed interval at `confidence`); a pair measured
    together in one group (Measurement.group_id) is read on its runs paired by round.
    comparison_of reads results through it, with the plan and reading they recorded."""
    values = {name: m.per_run(estimator, figure) for name, m in measurements.items()}
    rounds = {name: m.rounds(figure) for name, m in measurements.items()}
    groups = {name: m.group_id for name, m in measurements.items()}
    return Comparison.of(
        values, rule, given, band, confidence, looks, estimator, rounds, groups, figure
    )


def common_figure(results: Iterable[Recorded]) -> str:
    """The figure verdicts between results read: their verdict figure where they agree,
    the step time (every result has one) where they do not."""
    found = {r.verdict_figure for r in results}
    return found.pop() if len(found) == 1 else STEP_TIME.name
