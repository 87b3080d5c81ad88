"""How time changes with size: the two statistics that both a study's claim is judged by
(fwbench.studies.claims) and a report's chart draws (fwbench.report). Pure.

Time per sample against batch size: does it fall as the batch grows? A one-sided
Spearman test over one value per run and batch size (Figure 4's trend).

Scaling efficiency of N workers = throughput(N) / (N x throughput(1)), for the same
model, per-replica batch, shape, device, threads per process and strategy (variant).
With the per-replica batch fixed, the throughputs are N·b/t_N and b/t_1, so the
efficiency is t_1 / t_N: the ratio of the two step times over their runs, whose 95%
interval is Welch's (compare.ratio), as for verdicts between results measured apart:
data-parallel cases run one at a time, never in one group whose runs pair. The
baseline is the strategy itself at world size 1 (DDP with one rank, not plain
training), so the figure is what adding workers costs, not what the wrapper costs;
plain training beside it shows in the verdict table, where both share one row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fwbench.measure.verdicts import comparison_of
from fwbench.result import Result


@dataclass
class Trend:
    rho: float
    p_value: float

    def describe(self) -> str:
        if self.p_value < 0.05 and self.rho < 0:
            verdict = "significant downward trend"
        else:
            verdict = "no significant downward trend"
        return f"{verdict} (Spearman rho={self.rho:.2f}, one-sided p={self.p_value:.2g})"


def downward_trend(
    batch_sizes: Sequence[int], per_sample: Sequence[Sequence[float]]
) -> Trend | None:
    """Does time per sample fall as the batch grows? Spearman over one value per run and
    batch size: blocks of one process are not independent (METHODOLOGY rule 19), and
    thousands of them would make two batch sizes look like p = 1e-59."""
    from scipy import stats as sps  # here, not at import: the CLI starts without scipy

    xs = [b for b, samples in zip(batch_sizes, per_sample, strict=True) for _ in samples]
    ys = [s for samples in per_sample for s in samples]
    if len(set(batch_sizes)) < 2 or len(ys) < 4:
        return None
    res = sps.spearmanr(xs, ys, alternative="less")
    return Trend(float(res.statistic), float(res.pvalue))


def efficiency(base: Result, scaled: Result) -> tuple[float, tuple[float, float] | None]:
    """t_1 / t_N over their runs, and its interval (None with one run on each side)."""
    assert base.measurement is not None and scaled.measurement is not None
    sides = {"1": base, "N": scaled}
    (found,) = comparison_of(sides, "given", [("1", "N")], sequential=False).ratios()
    return found.value, (found.ci_low, found.ci_high) if found.has_interval else None
