"""Two result sets (two versions, two machines, two settings) matched case by case."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from fwbench.measure.verdicts import DEFAULT_BAND, Comparison, comparison_of, outcome_of, percent
from fwbench.report.serving import lower_is_better, undecided, verdict_figures
from fwbench.result import Result
from fwbench.scenario.spec import point_label
from fwbench.tasks import STEP_TIME, find_task

# The chance that a whole comparison calls any unchanged case changed (family-wise).
ALPHA = 0.05


@dataclass(frozen=True)
class Change:
    """A case's change between two result sets, or one verdict figure's of a serving
    point (its latency, or its rate)."""

    label: str
    # regression | improvement | undecided | unchanged | status | only-in-base | only-in-new
    kind: str
    base: Result | None
    new: Result | None
    # new / base of the figure read as a time (a step time, a latency; a rate inverted),
    # so above 1 is slower whatever the figure.
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    runs: tuple[int, int] | None = None  # runs of the base and of the new result
    # The equivalence band it was read against, and whether the whole interval lies
    # inside it (the same within the band: more than "no significant change").
    band: float | None = None
    equivalent: bool | None = None
    figure: str = "step time"
    higher_is_better: bool = False  # a rate: described as the rate's own change
    # A serving point's figure on each side as its record states it (over its runs), in
    # words with the unit; a case's cells are its step times.
    shown: tuple[str, str] | None = None
    # Why its runs cannot decide a change (report.serving.undecided): kind "undecided".
    reason: str | None = None

    def describe(self) -> str:
        if self.kind in ("only-in-base", "only-in-new"):
            return self.kind.replace("-", " ")
        assert self.base is not None and self.new is not None
        if self.kind == "undecided":
            return f"undecided: {self.figure}: {self.reason}"
        if self.kind == "status":
            return f"status {self.base.status} -> {self.new.status}"
        if self.ratio is None:  # neither side has a measurement
            return f"{self.kind} ({self.new.status})"
        assert self.ci_low is not None and self.ci_high is not None and self.runs is not None
        ratio, low, high = self.ratio, self.ci_low, self.ci_high
        if self.higher_is_better:  # the rate's own change: new / base of the rate
            ratio, low, high = 1 / ratio, 1 / high, (1 / low if low > 0 else float("inf"))
        interval = (
            f"{low:.3f}-{high:.3f}x"
            if float("inf") not in (high, self.ci_high)
            else "no interval: one run each"
        )
        change = f"{ratio - 1:+.1%} ({interval}; {self.runs[0]}+{self.runs[1]} runs)"
        if self.kind == "unchanged" and self.band is not None:
            within = "the same" if self.equivalent else "not shown the same"
            change += f"; {within} within ±{percent(self.band)}"
        return f"{self.kind}: {self.figure} {change}"


_ORDER = {
    "regression": 0,
    "status": 1,
    "only-in-base": 2,
    "improvement": 3,
    "undecided": 4,
    "unchanged": 5,
    "only-in-new": 6,
}


def _latest(results: Sequence[Result]) -> dict[str, Result]:
    """The newest result of each case, and of each serving point (its point key: the
    case and its scenario's settings)."""
    out: dict[str, Result] = {}
    for r in sorted(results, key=lambda r: r.recorded_at):
        out[r.point_key if r.serving is not None else r.case_key] = r
    return out


def _label(r: Result) -> str:
    return point_label(r.case, r.served.spec) if r.serving is not None else r.case.label()


class _Served(NamedTuple):
    """A verdict figure of a serving point that both sets measured, each run's value read
    as a time (a rate inverted), so that new / base above 1 is slower."""

    values: str  # its name for report.serving.per_run
    higher_is_better: bool
    called: str
    base: list[float]
    new: list[float]


def _served_figures(old: Result, cur: Result) -> list[_Served]:
    out = []
    for values, higher, called in verdict_figures(cur):
        a, b = ([v for _, v in lower_is_better(r, values, higher)] for r in (old, cur))
        if a and b:
            out.append(_Served(values, higher, called, a, b))
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
    served = {
        k: _served_figures(a[k], b[k])
        for k in a
        if k in b and a[k].serving is not None and b[k].serving is not None
    }
    compared_count = len(both) + sum(len(f) for f in served.values())
    confidence = 1 - ALPHA / max(1, compared_count)
    out: list[Change] = []
    for key in dict.fromkeys([*a, *b]):
        old, cur = a.get(key), b.get(key)
        label = _label(cur or old)  # type: ignore[arg-type]
        if old is None or cur is None:
            out.append(Change(label, "only-in-new" if old is None else "only-in-base", old, cur))
            continue
        if served.get(key):
            out += [
                _served_change(label, old, cur, f, threshold, band, confidence) for f in served[key]
            ]
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
        runs = (r.runs_b, r.runs_a)
        same = outcome_of(r.ci_low, r.ci_high, compared.band) == "equivalent"
        kind = _kind(r.value, r.ci_low, r.ci_high, threshold)
        measured = (r.value, r.ci_low, r.ci_high, runs, compared.band, same)
        out.append(Change(label, kind, old, cur, *measured, figure=_read(compared.figure, cur)))
    return sorted(out, key=lambda c: (_ORDER[c.kind], -(c.ratio or 0)))


def _read(name: str, cur: Result) -> str:
    """The figure a case's change was read on, in words. Its cells are each side's value
    of that figure as the change read it (the step time's, or a generation's time per
    output token: the figure its verdicts read), by the table (terminal._ms), whose
    caption names the estimator; a median here had read 10.00 against 13.00 beside "the
    same" read on the p25."""
    task = find_task(cur.case.task)
    return "step time" if name == STEP_TIME.name or task is None else task.figure(name).label


def _kind(ratio: float, ci_low: float, ci_high: float, threshold: float) -> str:
    if ci_low > 1.0 and ratio - 1 > threshold:
        return "regression"
    if ci_high < 1.0 and 1 - ratio > threshold:
        return "improvement"
    return "unchanged"


def _served_change(
    label: str,
    old: Result,
    cur: Result,
    figure: _Served,
    threshold: float,
    band: float | None,
    confidence: float,
) -> Change:
    """One verdict figure of a serving point, new against base over their runs (two
    commands: unpaired), as the report's serving verdicts read it; a rate search does not
    tell apart rates closer than its resolution, so the band is at least that."""
    shown = (_shown(old, figure.values), _shown(cur, figure.values))
    reasons = [why for r in (old, cur) if (why := undecided(r, figure.values)) is not None]
    if reasons:
        return Change(
            f"{label} ({figure.called})", "undecided", old, cur, figure=figure.called,
            higher_is_better=figure.higher_is_better, shown=shown, reason="; ".join(reasons),
        )  # fmt: skip
    band = DEFAULT_BAND if band is None else band
    if figure.values == "max_qps":
        band = max([band, *(r.served.search_resolution or 0.0 for r in (old, cur))])
    compared = Comparison.of(
        {"new": figure.new, "base": figure.base},
        "given",
        [("new", "base")],
        band=band,
        confidence=confidence,
    )
    (r,) = compared.ratios()
    same = outcome_of(r.ci_low, r.ci_high, compared.band) == "equivalent"
    return Change(
        f"{label} ({figure.called})",
        _kind(r.value, r.ci_low, r.ci_high, threshold),
        old,
        cur,
        r.value,
        r.ci_low,
        r.ci_high,
        (r.runs_b, r.runs_a),
        compared.band,
        same,
        figure=figure.called,
        higher_is_better=figure.higher_is_better,
        shown=shown,
    )


def _shown(r: Result, values: str) -> str:
    """A serving point's figure over its runs, as its record states it, with its unit."""
    served = r.served
    kind, _, percentile = values.rpartition(":")
    if values in ("max_qps", "samples_per_s", "tokens_per_s"):
        rate = getattr(served, values)
        unit = {"max_qps": "queries/s", "samples_per_s": "samples/s"}.get(values, "tokens/s")
        return f"{rate.value:.4g} {unit}" if rate else "-"
    found = {"ttft": served.ttft, "tpot": served.tpot}.get(kind, served.latency)(percentile)
    return f"{found.value * 1e3:.3g} ms" if found else "-"
