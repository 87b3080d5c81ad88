"""Two result sets (two versions, two machines, two settings) matched case by case."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fwbench.measure.verdicts import comparison_of, outcome_of, percent
from fwbench.result import Result

# The chance that a whole comparison calls any unchanged case changed (family-wise).
ALPHA = 0.05


@dataclass(frozen=True)
class Change:
    label: str
    kind: str  # regression | improvement | unchanged | status | only-in-base | only-in-new
    base: Result | None
    new: Result | None
    ratio: float | None = None  # new / base median step time
    ci_low: float | None = None
    ci_high: float | None = None
    runs: tuple[int, int] | None = None  # runs of the base and of the new result
    # The equivalence band it was read against, and whether the whole interval lies
    # inside it (the same within the band: more than "no significant change").
    band: float | None = None
    equivalent: bool | None = None

    def describe(self) -> str:
        if self.kind in ("only-in-base", "only-in-new"):
            return self.kind.replace("-", " ")
        assert self.base is not None and self.new is not None
        if self.kind == "status":
            return f"status {self.base.status} -> {self.new.status}"
        if self.ratio is None:  # neither side has a measurement
            return f"{self.kind} ({self.new.status})"
        assert self.ci_low is not None and self.ci_high is not None and self.runs is not None
        interval = (
            f"{self.ci_low:.3f}-{self.ci_high:.3f}x"
            if self.ci_high != float("inf")
            else "no interval: one run each"
        )
        change = f"{self.ratio - 1:+.1%} ({interval}; {self.runs[0]}+{self.runs[1]} runs)"
        if self.kind == "unchanged" and self.band is not None:
            within = "the same" if self.equivalent else "not shown the same"
            change += f"; {within} within ±{percent(self.band)}"
        return f"{self.kind}: step time {change}"


_ORDER = {
    "regression": 0,
    "status": 1,
    "only-in-base": 2,
    "improvement": 3,
    "unchanged": 4,
    "only-in-new": 5,
}


def _latest(results: Sequence[Result]) -> dict[str, Result]:
    out: dict[str, Result] = {}
    for r in sorted(results, key=lambda r: r.recorded_at):
        out[r.case_key] = r
    return out


def changes(
    base: Sequence[Result],
    new: Sequence[Result],
    threshold: float = 0.05,
    band: float | None = None,
) -> list[Change]:
    """Every case of either set, regressions first (largest first).

    new / base is compared over the two results' runs, by the values their verdicts
    read (verdicts.comparison_of). A regression is a slowdown larger than `threshold`
    whose interval lies above 1; an improvement likewise below. The intervals are
    Bonferroni-widened to 1 - ALPHA / (cases compared), so an unchanged set of N cases
    raises a false alarm in at most ALPHA of comparisons, not in N x ALPHA. An unchanged
    case says whether its interval lies within the equivalence band (`band`, else the
    one the results recorded).
    """
    a, b = _latest(base), _latest(new)
    both = [
        k for k in a if k in b and a[k].measurement is not None and b[k].measurement is not None
    ]
    confidence = 1 - ALPHA / max(1, len(both))
    out: list[Change] = []
    for key in dict.fromkeys([*a, *b]):
        old, cur = a.get(key), b.get(key)
        label = (cur or old).case.label()  # type: ignore[union-attr]
        if old is None or cur is None:
            out.append(Change(label, "only-in-new" if old is None else "only-in-base", old, cur))
            continue
        if old.measurement is None or cur.measurement is None:
            kind = "unchanged" if old.status == cur.status else "status"
            out.append(Change(label, kind, old, cur))
            continue
        sides = {"new": cur, "base": old}
        pair = [("new", "base")]
        compared = comparison_of(
            sides, "given", pair, band=band, confidence=confidence, sequential=False
        )
        (r,) = compared.ratios()
        if r.ci_low > 1.0 and r.value - 1 > threshold:
            kind = "regression"
        elif r.ci_high < 1.0 and 1 - r.value > threshold:
            kind = "improvement"
        else:
            kind = "unchanged"
        runs = (r.runs_b, r.runs_a)
        same = outcome_of(r.ci_low, r.ci_high, compared.band) == "equivalent"
        out.append(
            Change(label, kind, old, cur, r.value, r.ci_low, r.ci_high, runs, compared.band, same)
        )
    return sorted(out, key=lambda c: (_ORDER[c.kind], -(c.ratio or 0)))
