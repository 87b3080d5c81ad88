"""Side by side: each category's time per step in each framework, sorted by the gap."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fwbench.result import Result


@dataclass(frozen=True)
class CategoryRow:
    category: str
    seconds: dict[str, float]  # variant -> seconds per step (or per occurrence of a phase)
    shares: dict[str, float]  # variant -> share of its profiled step (or phase)
    difference: float  # largest minus smallest across variants, seconds


def side_by_side(
    results: Sequence[Result], phase: str | None = None
) -> tuple[list[str], list[CategoryRow]]:
    """Variants with a breakdown, and category rows with the biggest difference first:
    of the whole step, or of one of its phases (Breakdown.phases, per occurrence), from
    the variants that have it."""
    found: dict[str, tuple[dict[str, float], float]] = {}
    for r in results:
        b = r.breakdown
        if b is None:
            continue
        if phase is None:
            found[r.case.variant] = (b.categories, b.profiled_step_s)
        elif phase in b.phases:
            found[r.case.variant] = (b.phases[phase].categories, b.phases[phase].profiled_s)
    variants = list(found)
    categories = list(dict.fromkeys(c for cats, _ in found.values() for c in cats))
    rows = []
    for cat in categories:
        secs = {v: cats.get(cat, 0.0) for v, (cats, _) in found.items()}
        shares = {v: secs[v] / total for v, (_, total) in found.items() if total}
        rows.append(CategoryRow(cat, secs, shares, max(secs.values()) - min(secs.values())))
    return variants, sorted(rows, key=lambda r: -r.difference)
