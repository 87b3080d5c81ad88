"""Warmup rules on this machine: "stable" (the last two windows of steps agree within 5%)
against "settled" (the last window is no longer faster than the one before by 5%).

Alternates the two rules, one run each, on the quick preset's kind of cases (PyTorch and
TensorFlow, ResNet-18 inference and MobileNetV2 training, batch 8, 64 px), through
fwbench's own driver. Prints per case and rule: the warmup's median seconds and steps,
how often it ended at its budget, how many runs' timed blocks were still getting
faster (the drift warning: a warmup that ended too soon), and the ratio of the runs' values
(settled / stable, geometric mean of the per-run 25th percentiles): a warmup cut short
would show as a ratio above 1.

    cd benchmarks && ../.venv/bin/python warmup_rule.py [--repeats 6]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

from common import measure_group

from fwbench.case import Case
from fwbench.measure.comparison import per_run
from fwbench.measure.runs import RunFigures
from fwbench.measure.timing import TimingConfig

RULES = ("stable", "settled")


def cases() -> list[Case]:
    found = []
    for framework, mode in (("torch", "eager"), ("tensorflow", "graph")):
        for model, task in (("resnet18", "infer"), ("mobilenet_v2", "train")):
            found.append(
                Case.build(
                    framework=framework,
                    mode=mode,
                    model=model,
                    task=task,
                    batch_size=8,
                    input_size=64,
                    num_classes=1000,
                    threads=2,
                )
            )
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=6, help="Runs per case and rule.")
    p.add_argument("--max-warmup", type=float, default=3.0, help="max_warmup_s (quick: 3).")
    a = p.parse_args()
    base = TimingConfig(min_runs=1, max_runs=1, run_time_s=0.5, max_warmup_s=a.max_warmup)
    warm: dict[tuple[str, str], list[tuple[float, int, str]]] = defaultdict(list)
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    drift: dict[tuple[str, str], int] = defaultdict(int)
    started = time.monotonic()
    for i in range(a.repeats):
        for rule in RULES if i % 2 == 0 else RULES[::-1]:
            timing = base.model_copy(update={"warmup_rule": rule})
            for case in cases():
                (m,) = measure_group([case], timing)
                (run,) = m.runs
                key = (case.label(), rule)
                warm[key].append((run.warmup_s, run.warmup_steps, run.warmup_stop))
                figures = RunFigures(run.median_s, run.ci_low_s, run.ci_high_s, 0.0, None,
                                     run.samples)  # fmt: skip
                values[key] += per_run([figures], "p25")
                drift[key] += any(
                    w.startswith("not steady") and "faster" in w for w in run.warnings
                )
        print(f"repeat {i + 1} done at {(time.monotonic() - started) / 60:.1f} min", flush=True)
    for case in cases():
        label = case.label()
        line = [label]
        for rule in RULES:
            w = warm[(label, rule)]
            budget = sum(x[2] == "budget" for x in w)
            line.append(
                f"{rule}: warmup median {statistics.median(x[0] for x in w):.2f} s, "
                f"{statistics.median(x[1] for x in w):g} steps, budget {budget}/{len(w)}, "
                f"still faster {drift[(label, rule)]}"
            )
        ratio = statistics.geometric_mean(values[(label, "settled")]) / statistics.geometric_mean(
            values[(label, "stable")]
        )
        line.append(f"run value settled/stable {ratio:.3f}")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main()
