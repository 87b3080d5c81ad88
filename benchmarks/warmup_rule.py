"""Warmup rules on this machine: "stable" (the last two windows of steps agree within 5%)
against "settled" (the last window is no longer faster than the one before by 5%).

Runs the two rules side by side, one run each in one interleaved group (their timed
blocks alternate, so both see the same load), on the quick preset's kind of cases
(PyTorch and TensorFlow, ResNet-18 inference and MobileNetV2 training, batch 8, 64 px),
through fwbench's own driver. Prints per case and rule: the warmup's median seconds and
steps, how often it ended at its budget, how many runs' timed blocks were still getting
faster (the drift warning: a warmup that ended too soon), and the ratio of the runs'
values (settled / stable: the median over the groups of their 25th percentiles), which
a warmup cut short would push above 1.

    cd benchmarks && ../.venv/bin/python warmup_rule.py [--repeats 6]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

from fwbench.case import Case
from fwbench.launch import local
from fwbench.launch.protocol import GroupRequest
from fwbench.launch.records import measurement_of
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import per_run

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
        # Both rules in one interleaved group per case (their timed blocks alternate, so
        # they see the same load), the order of the two sides alternating by repeat.
        for case in cases():
            rules = RULES if i % 2 == 0 else RULES[::-1]
            requests = [
                GroupRequest.for_case(case, base.replace(warmup_rule=rule), count_flops=False)
                for rule in rules
            ]
            for rule, outcome in zip(rules, local.run_group(requests, 600), strict=True):
                if not outcome.runs:
                    raise RuntimeError(f"{case.label()}: no measurement: {outcome.failure}")
                m = measurement_of(outcome.runs, outcome.stop_reason or "")
                (run,) = m.runs
                key = (case.label(), rule)
                warm[key].append((run.warmup_s, run.warmup_steps, run.warmup_stop))
                values[key] += per_run([run], "p25")
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
        pairs = [
            b / a
            for a, b in zip(values[(label, "stable")], values[(label, "settled")], strict=True)
        ]
        line.append(
            f"run value settled/stable: median of pairs {statistics.median(pairs):.3f} "
            f"({min(pairs):.2f}-{max(pairs):.2f})"
        )
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    main()
