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
from typing import Any

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
    # Here, not at import: the CLI starts without numpy and scipy.
    import numpy as np
    from scipy import stats as sps

    xs = [b for b, samples in zip(batch_sizes, per_sample, strict=True) for _ in samples]
    ys = [s for samples in per_sample for s in samples]
    if len(set(batch_sizes)) < 2 or len(ys) < 4:
        return None
    rho = float(sps.spearmanr(xs, ys).statistic)
    if not np.isfinite(rho):  # every value alike: no order to test
        return Trend(0.0, 1.0)
    # The p-value by permutation, not spearmanr's t approximation: at the few runs a
    # study has, that read 5 values over two batch sizes (exact p 0.1) as p 0.029, and a
    # perfect order of 4 (exact p 0.042) as p 0. Exact up to 8 values (8! orders),
    # seeded resamples beyond, so a rerun reads the same p.
    rx = sps.rankdata(xs)
    centred = (rx - rx.mean()) / np.linalg.norm(rx - rx.mean())
    ry = sps.rankdata(ys)
    ry = (ry - ry.mean()) / np.linalg.norm(ry - ry.mean())

    def spearman(y: Any, axis: int = -1) -> Any:
        return np.tensordot(np.moveaxis(y, axis, -1), centred, axes=1)

    found = sps.permutation_test(
        (ry,),
        spearman,
        permutation_type="pairings",
        vectorized=True,
        alternative="less",
        n_resamples=np.inf if len(ys) <= 8 else 20_000,
        rng=np.random.default_rng(0),
    )
    return Trend(rho, float(found.pvalue))


def efficiency(base: Result, scaled: Result) -> tuple[float, tuple[float, float] | None]:
    """t_1 / t_N over their runs, and its interval (None with one run on each side)."""
    assert base.measurement is not None and scaled.measurement is not None
    sides = {"1": base, "N": scaled}
    (found,) = comparison_of(sides, "given", [("1", "N")], sequential=False).ratios()
    return found.value, (found.ci_low, found.ci_high) if found.has_interval else None
