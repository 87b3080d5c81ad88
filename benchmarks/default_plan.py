"""The default plan of an interleaved comparison, before and after: how many verdicts each
decides, after how many runs a side, in how many seconds.

A user's `fwbench run --framework torch --framework tensorflow` (no timing flags) is one
interleaved group under TimingConfig's defaults. This script runs such groups through
fwbench's own driver under two plans, alternating which goes first from workload to
workload and round to round (ABBA), on the quick preset's workloads (PyTorch eager
against TensorFlow graph, 64 px, 1000 classes, the machine's cores):

- before (defaults until 2026-11-25): 3 to 10 runs a side of 2 s of blocks each, and at
  most 10 s of blocks a case (so 5 runs a side at most);
- after: 3 to 20 runs a side of 0.5 s each, the same 10 s at most (20 runs).

Each verdict is read under its own plan's sequential rule, as every view reads it.

    cd benchmarks && ../.venv/bin/python default_plan.py [--rounds 1]
        [--workload resnet18:infer:8 ...]
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import measure_group, verdict_of

from fwbench.case import Case
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import Looks

PLANS = {
    "before (3-10 runs of 2 s)": TimingConfig(min_runs=3, max_runs=10, run_time_s=2.0),
    "after (3-20 runs of 0.5 s)": TimingConfig(min_runs=3, max_runs=20, run_time_s=0.5),
}
WORKLOADS = ["resnet18:infer:8", "mobilenet_v2:train:1", "resnet50:infer:1", "mobilenet_v2:infer:8"]


def cases(workload: str) -> list[Case]:
    model, task, batch = workload.split(":")
    fixed = {"model": model, "task": task, "batch_size": int(batch), "input_size": 64}
    return [
        Case.build(framework=fw, mode=mode, num_classes=1000, **fixed)
        for fw, mode in (("torch", "eager"), ("tensorflow", "graph"))
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--workload", action="append", help="model:task:batch (repeat)")
    p.add_argument(
        "--after-first", action="store_true", help="Start with the after plan (a second session)."
    )
    a = p.parse_args()
    workloads = a.workload or WORKLOADS
    found: dict[str, list[tuple[str, int, float]]] = {name: [] for name in PLANS}
    flip = a.after_first
    for r in range(a.rounds):
        for workload in workloads:
            order = list(PLANS) if not flip else list(reversed(PLANS))
            flip = not flip
            for name in order:
                timing = PLANS[name]
                started = time.monotonic()
                left, right = measure_group(cases(workload), timing)
                seconds = time.monotonic() - started
                values = {
                    "torch": left.per_run(timing.reading.estimator),
                    "tensorflow": right.per_run(timing.reading.estimator),
                }
                looks = Looks(timing.plan.min_runs, timing.plan.max_runs)
                v = verdict_of(
                    {"torch": left, "tensorflow": right}, timing.reading.estimator, looks
                )
                assert v is not None
                runs = min(len(x) for x in values.values())
                found[name].append((v.outcome, runs, seconds))
                print(
                    f"round {r + 1} {workload} {name}: {v.text()}; {runs} runs a side, "
                    f"{seconds:.0f} s",
                    flush=True,
                )
    for name, rows in found.items():
        decided = sum(outcome != "inconclusive" for outcome, _, _ in rows)
        print(
            f"{name}: {decided} of {len(rows)} decided; runs a side median "
            f"{statistics.median(r for _, r, _ in rows):g}; seconds a comparison median "
            f"{statistics.median(s for _, _, s in rows):.0f}, total {sum(s for *_, s in rows):.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
