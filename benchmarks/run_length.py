"""Run length against run count, from measured variances and costs (Kalibera and Jones).

A case's estimate is the mean of its runs' values (logs of the per-run estimator, p25 by
default); its variance with R runs of n blocks each is (S_b^2 + S_w^2 / n) / R, where S_w^2
is the variance one block adds inside a run and S_b^2 what differs between runs however
long they are (process layout, the machine's drift). A run costs c_run outside its blocks
(start, build, first step, warmup, final report) and c_block a block. At a fixed cost,
the variance is least with n* = sqrt(c_run * S_w^2 / (c_block * S_b^2)) blocks a run
(Kalibera and Jones, "Rigorous benchmarking in reasonable time", 2013): more, shorter
runs when runs differ more than blocks do.

Reads the ok results of a results file (each with at least 3 runs and their blocks),
estimates S_w^2 by resampling each run's blocks and S_b^2 as what the runs' spread leaves
beyond it (resampling treats blocks as independent: where they are autocorrelated, S_w^2
comes out low and n* short), and prints per case and overall: blocks and seconds of
blocks a run now, n* and its seconds, and the variance at today's cost with n* against
today's n.

    cd benchmarks && ../.venv/bin/python run_length.py RESULTS.duckdb [--estimator p25]
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

import numpy as np

from fwbench.measure.verdicts import ESTIMATORS
from fwbench.store.db import ResultStore
from fwbench.sweep import RUN_OVERHEAD_S

RESAMPLES = 400


def within_variance(samples: tuple[float, ...], estimator: str, rng: np.random.Generator) -> float:
    """Variance of log(estimator) over resamples of one run's blocks."""
    q = {"median": 0.5, "p25": 0.25, "p10": 0.10, "min": 0.0}[estimator]
    blocks = np.asarray(samples)
    draws = rng.choice(blocks, size=(RESAMPLES, len(blocks)), replace=True)
    return float(np.var(np.log(np.quantile(draws, q, axis=1)), ddof=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("db", type=Path)
    p.add_argument("--estimator", default="p25", choices=list(ESTIMATORS))
    a = p.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    pooled: list[tuple[float, float, float, float, float]] = []
    with ResultStore(a.db, read_only=True) as store:
        results = [r for r in store.results() if r.measurement and len(r.measurement.runs) >= 3]
    print(
        "case | blocks a run | s a block | run overhead s | S_w^2 | S_b^2 | n* | run s now -> n* "
        "| variance at equal cost, n* / now"
    )
    for r in results:
        m = r.measurement
        assert m is not None
        runs = m.runs
        n = statistics.median(len(run.samples) for run in runs)
        c_block = statistics.median(run.median_s * run.steps_per_block for run in runs)
        overhead = [
            (run.start_s if run.start_s is not None else RUN_OVERHEAD_S)
            + run.build_s + run.first_step_s + run.warmup_s + (run.finish_s or 0.0)
            for run in runs
        ]  # fmt: skip
        c_run = statistics.mean(overhead)
        var_within_run = statistics.mean(
            within_variance(run.samples, a.estimator, rng) for run in runs if len(run.samples) > 2
        )
        s_w2 = var_within_run * n
        values = [math.log(v) for v in m.per_run(a.estimator)]
        total = statistics.variance(values)
        s_b2 = max(total - var_within_run, 1e-12)
        n_star = math.sqrt(c_run * s_w2 / (c_block * s_b2))
        cost_run_now = c_run + n * c_block
        # Equal cost: R runs now, R' = R * cost_now / cost_star runs of n* blocks.
        cost_run_star = c_run + max(n_star, 1) * c_block
        var_now = (s_b2 + s_w2 / n) / 1
        var_star = (s_b2 + s_w2 / max(n_star, 1)) * cost_run_star / cost_run_now
        rows.append((n, c_block, c_run, n_star, var_star / var_now))
        pooled.append((s_w2, total - var_within_run, c_run, c_block, n))
        print(
            f"{r.case.label()} | {n:g} | {c_block:.3f} | {c_run:.2f} | {s_w2:.2e} | {s_b2:.2e} "
            f"| {n_star:.0f} | {n * c_block:.2f} -> {n_star * c_block:.2f} "
            f"| {var_star / var_now:.2f}"
        )
    if not rows:
        print("no results with 3 or more runs")
        return
    # With 3 runs a case, its S_b^2 is a poor estimate (often below zero: clipped above).
    # Pooled over cases, unclipped, the components are what one plan for all should use.
    s_w2 = statistics.mean(x[0] for x in pooled)
    s_b2 = statistics.mean(x[1] for x in pooled)
    c_run = statistics.median(x[2] for x in pooled)
    c_block = statistics.median(x[3] for x in pooled)
    n_now = statistics.median(x[4] for x in pooled)
    if s_b2 > 0:
        n_pool = math.sqrt(c_run * s_w2 / (c_block * s_b2))
        ratio = ((s_b2 + s_w2 / max(n_pool, 1)) * (c_run + max(n_pool, 1) * c_block)) / (
            (s_b2 + s_w2 / n_now) * (c_run + n_now * c_block)
        )
        print(
            f"pooled over {len(pooled)} cases: S_w^2 {s_w2:.2e}, S_b^2 {s_b2:.2e} (runs differ "
            f"beyond their blocks by a CV of {math.sqrt(s_b2):.1%}), c_run {c_run:.2f} s, "
            f"c_block {c_block:.3f} s: n* {n_pool:.1f} blocks ({n_pool * c_block:.2f} s a run, "
            f"now {n_now:g} = {n_now * c_block:.2f} s); variance at equal cost {ratio:.2f}x"
        )
    else:
        print(f"pooled over {len(pooled)} cases: runs differ no more than their blocks explain")
    secs = [min(ns, 10_000) * cb for _, cb, _, ns, _ in rows]
    print(
        f"{len(rows)} cases: run overhead median {statistics.median(x[2] for x in rows):.2f} s; "
        f"blocks a run now median {statistics.median(x[0] for x in rows):g} "
        f"({statistics.median(x[0] * x[1] for x in rows):.2f} s); n* median "
        f"{statistics.median(x[3] for x in rows):.0f} ({statistics.median(secs):.2f} s of blocks; "
        f"quartiles {np.quantile(secs, 0.25):.2f}-{np.quantile(secs, 0.75):.2f} s); variance at "
        f"equal cost with n*, median {statistics.median(x[4] for x in rows):.2f}x today's"
    )


if __name__ == "__main__":
    main()
