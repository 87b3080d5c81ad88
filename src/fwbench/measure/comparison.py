"""Comparisons: what fwbench decides between the variants of one workload, in one place.

A comparison holds the variants of one workload (each a name and its per-run values: one
value per worker process, from the run's blocks by the estimator), the pairs it decides
(by a named rule), the equivalence band, and the interval rule. It answers each pair's
verdict (fwbench.measure.compare: faster, equivalent or inconclusive), their ratios, and
whether it is decided. Every view that says "A is faster than B" builds one: the summary
table (terminal, HTML, Markdown), study claims, tune, serving, regressions and scaling;
none reads a run itself. Pure: values in, verdicts out.

The estimator is the run's median of blocks (the only one today: a documented choice, so
a low quantile can join it). The interval is fixed: a Welch t interval at `confidence`
on the logs, valid when it is read once, after the runs are made (the driver stops on
each variant's precision, never on the verdict: a verdict read after every round needs a
sequential interval to keep its error rate, METHODOLOGY rule 5a).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from fwbench.measure.compare import DEFAULT_BAND, Ratio, Verdict, compare, ratio


class RunLike(Protocol):
    """What an estimator reads of one run (fwbench.result.Run, a driver's figures)."""

    @property
    def median_s(self) -> float: ...


ESTIMATORS: dict[str, Callable[[RunLike], float]] = {
    "median": lambda run: run.median_s,  # the run's median block (seconds per step)
}
DEFAULT_ESTIMATOR = "median"

# Which pairs a comparison decides: the fastest variant against the runner-up (tables),
# or pairs named by the caller (a study's a against b, tune's best against its default,
# a regression's new against base).
PairRule = Literal["fastest_vs_runner_up", "given"]


def per_run(runs: Sequence[RunLike], estimator: str = DEFAULT_ESTIMATOR) -> tuple[float, ...]:
    """One value per worker process: what verdicts, ratios and trends are built on."""
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
    better (times; a rate is given as its inverse)."""

    name: str
    values: tuple[float, ...]

    @property
    def centre(self) -> float:
        return statistics.geometric_mean(self.values)


@dataclass(frozen=True)
class Comparison:
    variants: tuple[Variant, ...]
    rule: PairRule = "fastest_vs_runner_up"
    given: tuple[tuple[str, str], ...] = ()  # rule "given": (a, b) by name
    band: float = DEFAULT_BAND
    confidence: float = 0.95

    @classmethod
    def of(
        cls,
        values: Mapping[str, Sequence[float]],
        rule: PairRule = "fastest_vs_runner_up",
        given: Sequence[tuple[str, str]] = (),
        band: float = DEFAULT_BAND,
        confidence: float = 0.95,
    ) -> Comparison:
        """From name -> per-run values; variants without a value are left out."""
        variants = tuple(Variant(name, tuple(v)) for name, v in values.items() if len(v) > 0)
        return cls(variants, rule, tuple(given), band, confidence)

    def pairs(self) -> list[tuple[Variant, Variant]]:
        """The pairs this comparison decides (a pair whose side has no runs is left out)."""
        if self.rule == "fastest_vs_runner_up":
            ranked = sorted(self.variants, key=lambda v: v.centre)
            return [(ranked[0], ranked[1])] if len(ranked) >= 2 else []
        by_name = {v.name: v for v in self.variants}
        return [(by_name[a], by_name[b]) for a, b in self.given if a in by_name and b in by_name]

    def verdicts(self) -> list[Verdict]:
        return [
            compare(a.values, b.values, a.name, b.name, self.band, self.confidence)
            for a, b in self.pairs()
        ]

    def verdict(self) -> Verdict | None:
        """The first pair's verdict (the only one under fastest_vs_runner_up)."""
        found = self.verdicts()
        return found[0] if found else None

    def ratios(self) -> list[Ratio]:
        """a / b of each pair, with its interval at `confidence` (regressions, scaling)."""
        return [ratio(a.values, b.values, self.confidence) for a, b in self.pairs()]

    @property
    def decided(self) -> bool:
        """Every pair has an answer (faster, or equivalent within the band)."""
        found = self.verdicts()
        return bool(found) and all(v.outcome != "inconclusive" for v in found)
