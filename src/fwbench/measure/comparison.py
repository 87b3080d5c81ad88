"""Comparisons: what fwbench decides between the variants of one workload, in one place.

A comparison holds the variants of one workload (each a name and its per-run values: one
value per worker process, from the run's blocks by the estimator), the pairs it decides
(by a named rule), the equivalence band, and the interval rule. It answers each pair's
verdict (fwbench.measure.compare: faster, equivalent or inconclusive), their ratios, and
whether it is decided. Every view that says "A is faster than B" builds one: the summary
table (terminal, HTML, Markdown), study claims, tune, serving, regressions and scaling;
none reads a run itself. Pure: values in, verdicts out.

The estimator turns a run's blocks into its one value: the median by default, or a low
quantile or the minimum (ESTIMATORS; docs/methodology.md, "Which per-run value verdicts
read"). The interval is a t interval on the logs: paired by round where the variants'
runs were made in the same rounds (`rounds`: the launcher's interleaved groups, whose
blocks alternate within a round), Welch's otherwise (runs made apart: results of
different commands or groups). Either is fixed (`confidence`, valid when read once,
after the runs are made) or sequential (`looks`): when the driver reads the verdict
after every round from `first` to `last` runs a side and stops once it is decided, each
look's interval is at the nominal level that keeps the chance of ever calling identical
variants different at `alpha` over all the looks (METHODOLOGY rule 5a). That level is
Pocock's idea, one constant level for every look, calibrated here for the t statistic
the verdicts read (Welch's, or the paired one): the
`alpha` quantile of the smallest p-value over the looks, in 20,000 simulated A/A
comparisons of normal per-run values (a fixed seed: the same plan gives the same level
on every machine). Runs of one side that are correlated in time (a machine's state that
slows one framework more than the other for minutes) make later looks overconfident: in
simulation, with successive runs of a side correlated at 0.5, the levels calibrated for
5% let 5.7% of identical pairs be called different. So a plan of several looks is
calibrated for SEQUENTIAL_MARGIN x alpha (3%), which keeps 5% under that correlation,
process offsets, drift and one-sided interference (tests/unit/test_sequential.py); one
look (a fixed number of runs) reads a plain 95% interval (paired: PAIRED_MARGIN).
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
from scipy import stats as sps

from fwbench.measure.compare import DEFAULT_BAND, Ratio, Verdict, compare, paired_ratio, ratio


class RunLike(Protocol):
    """What an estimator reads of one run (fwbench.result.Run, a driver's figures)."""

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
        # A run recorded without its blocks (a driver's figures of an old result) has
        # only its median to give.
        return float(np.quantile(run.samples, q)) if len(run.samples) else run.median_s

    return estimate


# One value per run, from its timed blocks (seconds per step). Interference on a shared
# machine only adds time, so a low quantile of a run's blocks moves less from run to run
# than its median; the minimum is the extreme of that, and depends most on how many
# blocks a run made (runs of a case take equal durations: TimingConfig.run_time_s).
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


def common_estimator(names: Iterable[str]) -> str:
    """The estimator a verdict between results reads: theirs where they agree; the
    median where they do not (every run has one, and a verdict must read both sides the
    same way)."""
    found = set(names)
    return found.pop() if len(found) == 1 else "median"


# Which pairs a comparison decides: the fastest variant against the runner-up (tables),
# or pairs named by the caller (a study's a against b, tune's best against its default,
# a regression's new against base).
PairRule = Literal["fastest_vs_runner_up", "given"]


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
        return statistics.geometric_mean(self.values)


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
            return f"{self.confidence:.1%}".replace(".0%", "%") + f" interval{how}"
        return (
            f"read after each of runs {self.first}-{self.last} a side{how}, "
            f"{self.confidence:.1%} intervals keep {1 - self.alpha:.0%} over all looks"
        )


def widest(plans: Iterable[Looks | None]) -> Looks | None:
    """The plan a verdict between results must be read under: every look any side's
    runs could have stopped at (None: none stopped on a verdict, a fixed interval)."""
    found = [p for p in plans if p is not None]
    if not found:
        return None
    return Looks(min(p.first for p in found), max(p.last for p in found), found[0].alpha)


@dataclass(frozen=True)
class Comparison:
    variants: tuple[Variant, ...]
    rule: PairRule = "fastest_vs_runner_up"
    given: tuple[tuple[str, str], ...] = ()  # rule "given": (a, b) by name
    band: float = DEFAULT_BAND
    confidence: float = 0.95  # of a fixed interval; a sequential plan sets its own
    looks: Looks | None = None
    estimator: str = DEFAULT_ESTIMATOR  # what the values are (ESTIMATORS), for the text

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
        return cls(variants, rule, tuple(given), band, confidence, looks, estimator)

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

    def pairs(self) -> list[tuple[Variant, Variant]]:
        """The pairs this comparison decides (a pair whose side has no runs is left out)."""
        if self.rule == "fastest_vs_runner_up":
            ranked = sorted(self.variants, key=lambda v: v.centre)
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

    @property
    def decided(self) -> bool:
        """Every pair has an answer (faster, or equivalent within the band)."""
        found = self.verdicts()
        return bool(found) and all(v.outcome != "inconclusive" for v in found)
