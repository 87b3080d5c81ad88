"""Adaptive repetitions vs the published study's fixed 100 runs, on the same cases.

For each case, alternately: fwbench's default (warmup until stable, then blocks until the
95% CI of the median is within +-1% or 10 s), and a fixed 100 runs after the same warmup
(the comparative study's method). Prints samples, steady-state seconds and the CI
half-width each reached. Target: the same or better precision in less time.

    .venv/bin/python benchmarks/adaptive_vs_fixed.py
"""

from __future__ import annotations

import argparse
import statistics

from common import half_width, run_one, steady_seconds

from fwbench.case import Case
from fwbench.measure.settings import TimingConfig

ADAPTIVE = TimingConfig()
FIXED_100 = TimingConfig(min_samples=100, max_samples=100, target_ci=1e-9, max_time_s=1e9)
CASES = [
    ("torch", "eager", "resnet18", "infer", 8),
    ("tensorflow", "graph", "resnet18", "infer", 8),
    ("torch", "eager", "resnet18", "train", 8),
    ("tensorflow", "graph", "mobilenet_v2", "train", 8),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--input-size", type=int, default=64)
    a = p.parse_args()
    print(f"{a.input_size}px, 2 threads; median of {a.rounds} alternated rounds per method")
    print(f"{'case':44} {'method':9} {'samples':>8} {'steady s':>9} {'CI +-':>7} {'median ms':>10}")
    for fw, mode, model, task, batch in CASES:
        case = Case.build(
            framework=fw,
            model=model,
            task=task,
            batch_size=batch,
            input_size=a.input_size,
            mode=mode,
            threads=2,
        )
        found: dict[str, list[tuple[int, float, float, float]]] = {"adaptive": [], "fixed100": []}
        for _ in range(a.rounds):
            for name, timing in (("adaptive", ADAPTIVE), ("fixed100", FIXED_100)):
                r = run_one(case, timing)
                assert r.measurement is not None
                found[name].append(
                    (
                        len(r.measurement.samples),
                        steady_seconds(r),
                        half_width(r),
                        r.measurement.step_time_s.median,
                    )
                )
        for name, rows in found.items():
            n = statistics.median(x[0] for x in rows)
            secs = statistics.median(x[1] for x in rows)
            hw = statistics.median(x[2] for x in rows)
            med = statistics.median(x[3] for x in rows)
            print(f"{case.label():44} {name:9} {n:8.0f} {secs:9.2f} {hw:7.2%} {med * 1e3:10.2f}")


if __name__ == "__main__":
    main()
