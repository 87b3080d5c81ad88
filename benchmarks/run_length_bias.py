"""Does a run's length change what a comparison measures?

PyTorch against TensorFlow on one workload, in one interleaved group of long runs (2 s of
timed blocks each, as a user's default comparison makes them). Each run is then read
twice: over its first 0.5 s of blocks (what the quick preset's runs measure) and over
the rest. If a run's first half-second were still warming up, or a framework's steps
drifted within a run, the two readings' ratios would differ; agreeing, they say the
short runs measure the same step as the long ones. Prints each run's blocks, its 25th
percentile in both parts, and the per-round ratios of both readings.

    cd benchmarks && ../.venv/bin/python run_length_bias.py [--model mobilenet_v2]
        [--task train] [--batch 1] [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import numpy as np
from common import MODES, measure_group

from fwbench.case import Case
from fwbench.measure.settings import TimingConfig

SHORT_S = 0.5  # the quick preset's run_time_s


def parts(run: Any) -> tuple[np.ndarray, np.ndarray]:
    """The run's blocks (seconds per step) in its first SHORT_S of timed blocks, and after."""
    x = np.array(run.samples)
    ends = np.cumsum(x * run.steps_per_block)
    return x[ends <= SHORT_S + 1e-9], x[ends > SHORT_S]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mobilenet_v2")
    p.add_argument("--task", default="train", choices=["train", "infer"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--input-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=4)
    a = p.parse_args()
    cases = [
        Case.build(
            framework=fw, mode=mode, model=a.model, task=a.task, batch_size=a.batch,
            input_size=a.input_size, num_classes=1000, device="cpu",
        )
        for fw, mode in MODES.items()
    ]  # fmt: skip
    # A tight target keeps every run going for its full 2 s of blocks.
    timing = TimingConfig(
        min_runs=a.rounds, max_runs=a.rounds, run_time_s=2.0, max_warmup_s=3.0,
        max_time_s=1e6, target_ci=0.001,
    )  # fmt: skip
    sides = measure_group(cases, timing)
    for fw, m in zip(MODES, sides, strict=True):
        for run in m.runs:
            first, rest = parts(run)
            blocks = " ".join(f"{v * 1e3:.1f}" for v in run.samples)
            print(
                f"{fw} run {run.index + 1}: p25 first {np.quantile(first, 0.25) * 1e3:.2f} ms, "
                f"rest {np.quantile(rest, 0.25) * 1e3:.2f} ms; blocks (ms): {blocks}"
            )
    for label, pick in (("first 0.5 s", 0), ("the rest", 1)):
        ratios = [
            float(np.quantile(parts(t)[pick], 0.25) / np.quantile(parts(f)[pick], 0.25))
            for t, f in zip(sides[0].runs, sides[1].runs, strict=True)
        ]
        print(
            f"{label}: PyTorch/TensorFlow per round (25th percentiles) "
            f"{', '.join(f'{r:.3f}' for r in ratios)}; geometric mean "
            f"{statistics.geometric_mean(ratios):.3f}"
        )


if __name__ == "__main__":
    main()
