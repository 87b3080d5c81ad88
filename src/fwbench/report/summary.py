"""Side-by-side summary of results: one row per workload, one column per framework/mode.

Pure functions over Results; rendering to the terminal or Markdown lives with the caller.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fwbench.result import Result


@dataclass
class SummaryRow:
    workload: tuple[Any, ...]
    results: dict[str, Result] = field(default_factory=dict)  # variant -> result

    @property
    def ok(self) -> dict[str, Result]:
        return {v: r for v, r in self.results.items() if r.measurement is not None}

    @property
    def best(self) -> str | None:
        ok = self.ok
        return min(ok, key=lambda v: _median(ok[v])) if ok else None

    def relative(self, variant: str) -> float | None:
        """Step time relative to the fastest variant (fastest = 1.0), as the studies plot it."""
        ok, best = self.ok, self.best
        if variant not in ok or best is None:
            return None
        return _median(ok[variant]) / _median(ok[best])

    @property
    def different_work(self) -> bool:
        return any(r.different_work for r in self.results.values())

    def verdict(self, short: bool = False) -> str:
        ok = self.ok
        if len(ok) < 2:
            failed = [f"{v} {r.status}" for v, r in self.results.items() if r.measurement is None]
            return "; ".join(failed) if failed else "one framework only"
        ranked = sorted(ok, key=lambda v: _median(ok[v]))
        fast, slow = ok[ranked[0]], ok[ranked[1]]
        assert fast.measurement and slow.measurement
        ratio = _median(slow) / _median(fast)
        # Until the significance test lands, disjoint intervals are the evidence asked for.
        overlap = fast.measurement.step_time_s.ci_high >= slow.measurement.step_time_s.ci_low
        if short:
            text = f"~ {ratio:.2f}x, CIs overlap" if overlap else f"{ranked[0]} {ratio:.2f}x faster"
        elif overlap:
            text = f"no clear difference ({ratio:.2f}x, intervals overlap)"
        else:
            text = f"{ranked[0]} {ratio:.2f}x faster than {ranked[1]}"
        if self.different_work:
            text += " [DIFFERENT WORK]" if short else " [DIFFERENT WORK: parameter counts differ]"
        return text


WORKLOAD_FIELDS = ("model", "task", "batch_size", "input_size", "num_classes", "device", "threads")


def summarise(results: Iterable[Result]) -> tuple[list[str], list[SummaryRow]]:
    """Variants in first-seen order, and rows in first-seen workload order.

    A later result of the same case replaces an earlier one.
    """
    variants: list[str] = []
    rows: dict[tuple[Any, ...], SummaryRow] = {}
    for r in results:
        key = r.case.workload_key()
        row = rows.setdefault(key, SummaryRow(workload=key))
        row.results[r.case.variant] = r
        if r.case.variant not in variants:
            variants.append(r.case.variant)
    return variants, list(rows.values())


def cell(result: Result | None, relative: float | None, short: bool = False) -> str:
    """`12.34 ms (12.10-12.60) x1.08`; short: `12.34 ±1.2% x1.08`."""
    if result is None:
        return "-"
    if result.measurement is None:
        return result.status.upper()
    st = result.measurement.step_time_s
    if short:
        half = (st.ci_high - st.ci_low) / 2 / st.median
        text = f"{st.median * 1e3:.2f} ±{half:.1%}"
    else:
        text = f"{st.median * 1e3:.2f} ms ({st.ci_low * 1e3:.2f}-{st.ci_high * 1e3:.2f})"
    if relative is not None:
        text += f" x{relative:.2f}"
    return text


def _median(r: Result) -> float:
    assert r.measurement is not None
    return r.measurement.step_time_s.median
