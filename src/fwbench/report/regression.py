"""Two result sets (two versions, two machines, two settings) matched case by case."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fwbench.measure.compare import ratio
from fwbench.result import Result

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
    p_value: float | None = None

    def describe(self) -> str:
        if self.kind in ("only-in-base", "only-in-new"):
            return self.kind.replace("-", " ")
        assert self.base is not None and self.new is not None
        if self.kind == "status":
            return f"status {self.base.status} -> {self.new.status}"
        if self.ratio is None:  # neither side has a measurement
            return f"{self.kind} ({self.new.status})"
        change = (
            f"{self.ratio - 1:+.1%} ({self.ci_low:.3f}-{self.ci_high:.3f}x, p={self.p_value:.2g})"
        )
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


def changes(base: Sequence[Result], new: Sequence[Result], threshold: float = 0.05) -> list[Change]:
    """Every case of either set, regressions first (largest first).

    A regression is a slowdown that is significant (Mann-Whitney p < 0.05 and the bootstrap
    interval of new/base above 1) and larger than `threshold`; an improvement likewise.
    """
    a, b = _latest(base), _latest(new)
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
        r = ratio(cur.measurement.samples, old.measurement.samples)
        significant = r.p_value < ALPHA
        if significant and r.ci_low > 1.0 and r.value - 1 > threshold:
            kind = "regression"
        elif significant and r.ci_high < 1.0 and 1 - r.value > threshold:
            kind = "improvement"
        else:
            kind = "unchanged"
        out.append(Change(label, kind, old, cur, r.value, r.ci_low, r.ci_high, r.p_value))
    return sorted(out, key=lambda c: (_ORDER[c.kind], -(c.ratio or 0)))
