"""Warnings grouped by cause: one line per kind of warning, with the cases it touched.

A sweep's runs repeat the same warning with different figures ("run 2: large spread: IQR
is 23% of the median", "run 3: ... 31% ..."); listed one per run they bury the one that
matters. A cause is a warning's text with its figures taken out; its line shows each
figure's range over the group and names the cases. Pure: (case, warning) pairs in, lines
out, in first-seen order; every view (Markdown, HTML, serving tables) renders these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# Cases named in a line before "and N more".
SHOWN_CASES = 3


@dataclass
class Grouped:
    template: str  # the warning with each figure replaced by "{}"
    figures: list[list[str]] = field(default_factory=list)  # per occurrence, in order
    cases: list[str] = field(default_factory=list)  # distinct, first-seen order

    @property
    def count(self) -> int:
        return len(self.figures)

    def text(self) -> str:
        """The warning, each figure shown as its range over the occurrences."""
        slots = []
        for values in zip(*self.figures, strict=True):
            low = min(values, key=float)
            high = max(values, key=float)
            slots.append(low if float(low) == float(high) else f"{low}-{high}")
        return self.template.format(*slots)

    def where(self) -> str:
        """`3 times in 2 cases: a, b` (the first SHOWN_CASES cases named)."""
        named = ", ".join(self.cases[:SHOWN_CASES])
        if len(self.cases) > SHOWN_CASES:
            named += f" and {len(self.cases) - SHOWN_CASES} more"
        times = f"{self.count} times in " if self.count > len(self.cases) else ""
        return f"{times}{len(self.cases)} case{'s' if len(self.cases) > 1 else ''}: {named}"


def group(pairs: Iterable[tuple[str, str]]) -> list[Grouped]:
    """(case label, warning) pairs grouped by cause, in the order causes first appear."""
    found: dict[str, Grouped] = {}
    for case, warning in pairs:
        template = _NUMBER.sub("{}", warning.replace("{", "(").replace("}", ")"))
        entry = found.setdefault(template, Grouped(template))
        entry.figures.append(_NUMBER.findall(warning))
        if case not in entry.cases:
            entry.cases.append(case)
    return list(found.values())
