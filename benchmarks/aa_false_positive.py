"""A/A: how often does fwbench call two identical configurations different?

Each comparison measures the same case twice, as two sides of one interleaved group,
each side with its own runs (worker processes), exactly as two frameworks are compared;
then asks for the verdict. Prints, per framework, the share of comparisons whose verdict
says "faster" (target: at most 5%), and how many were "equivalent" or "inconclusive".

"before" applies fwbench's earlier statistics to the same measurements: the first run of
each side alone, its blocks as samples, a bootstrap interval of the median ratio and a
Mann-Whitney test ("significant" when p < 0.05 and the interval excludes 1).

    cd benchmarks && ../.venv/bin/python aa_false_positive.py [--comparisons 15]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
from common import measure_group, verdict_of
from scipy import stats as sps

from fwbench.case import Case
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import DEFAULT_ESTIMATOR, ESTIMATORS

CASES = {
    "torch": dict(framework="torch", mode="eager"),
    "tensorflow": dict(framework="tensorflow", mode="graph"),
}


def before(a: list[float], b: list[float], resamples: int = 2000) -> bool:
    """fwbench's verdict before runs: per-block samples of one process a side."""
    xa, xb = np.asarray(a), np.asarray(b)
    rng = np.random.default_rng(0)
    boot = np.median(xa[rng.integers(0, len(xa), (resamples, len(xa)))], axis=1) / np.median(
        xb[rng.integers(0, len(xb), (resamples, len(xb)))], axis=1
    )
    low, high = np.percentile(boot, [2.5, 97.5])
    p = sps.mannwhitneyu(xa, xb, alternative="two-sided").pvalue
    return bool(p < 0.05 and (low > 1 or high < 1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--comparisons", type=int, default=15, help="Per framework.")
    p.add_argument("--runs", type=int, default=3, help="Runs per side.")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--input-size", type=int, default=32)
    p.add_argument(
        "--estimator", default=DEFAULT_ESTIMATOR, choices=sorted(ESTIMATORS),
        help="The per-run value verdicts read (default: fwbench's).",
    )  # fmt: skip
    a = p.parse_args()
    timing = TimingConfig(
        min_runs=a.runs, max_runs=a.runs, run_time_s=0.3, max_warmup_s=1.0, min_samples=6
    )
    total: Counter[str] = Counter()
    started = time.monotonic()
    for name, fields in CASES.items():
        case = Case.build(
            **fields, model=a.model, task="infer", batch_size=4, input_size=a.input_size,
            num_classes=10, threads=1,
        )  # fmt: skip
        outcomes: Counter[str] = Counter()
        for i in range(a.comparisons):
            left, right = measure_group([case, case], timing)
            v = verdict_of({"A": left, "A'": right}, a.estimator)
            outcomes[v.outcome] += 1
            old = before(list(left.runs[0].samples), list(right.runs[0].samples))
            outcomes["before"] += old
            print(f"{name} {i + 1:>2}: {v.text()}; before: {'different' if old else 'same'}")
        total += outcomes
        print(
            f"{name}: {outcomes['faster']} of {a.comparisons} called different "
            f"({outcomes['faster'] / a.comparisons:.0%}); {outcomes['equivalent']} equivalent, "
            f"{outcomes['inconclusive']} inconclusive; before: {outcomes['before']} of "
            f"{a.comparisons} ({outcomes['before'] / a.comparisons:.0%})",
            flush=True,
        )
    n = total["faster"] + total["equivalent"] + total["inconclusive"]
    print(
        f"all: {total['faster']} of {n} A/A comparisons called different "
        f"({total['faster'] / n:.1%}, target <= 5%); {total['equivalent']} equivalent, "
        f"{total['inconclusive']} inconclusive; {a.runs} runs a side, read paired by round "
        f"on each run's {a.estimator}; before (one process "
        f"a side, blocks as samples): {total['before']} of {n} ({total['before'] / n:.0%}); "
        f"{time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
