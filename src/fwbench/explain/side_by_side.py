"""Side by side: each category's time per step in each framework, sorted by the gap."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fwbench.result import Result


@dataclass(frozen=True)
class CategoryRow:
    category: str
    seconds: dict[str, float]  # variant -> seconds per step
    shares: dict[str, float]  # variant -> share of its profiled step
    difference: float  # largest minus smallest across variants, seconds


def side_by_side(results: Sequence[Result]) -> tuple[list[str], list[CategoryRow]]:
    """Variants with a breakdown, and category rows with the biggest difference first."""
    found = {r.case.variant: r.breakdown for r in results if r.breakdown is not None}
    variants = list(found)
    categories = list(dict.fromkeys(c for b in found.values() for c in b.categories))
    rows = []
    for cat in categories:
        secs = {v: b.categories.get(cat, 0.0) for v, b in found.items()}
        shares = {v: secs[v] / b.profiled_step_s for v, b in found.items() if b.profiled_step_s}
        rows.append(CategoryRow(cat, secs, shares, max(secs.values()) - min(secs.values())))
    return variants, sorted(rows, key=lambda r: -r.difference)
