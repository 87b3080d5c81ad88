"""Decisive verdicts on this machine: A/A pairs and positive controls under the default
(sequential) rule, as a user's interleaved comparison runs them.

Each comparison is one interleaved group through fwbench's own driver: the same case
twice (A/A: identical variants, which must be called different at most 5% of the time),
or the same model at two input sizes or two class counts (positive controls: a real
difference of a known direction; its size is the ratio of all runs pooled). Class counts
grade the difference finely (only the last layer grows, so 1.05x or 1.10x are within
reach; ResNet-18 at 66 px against 64 px is already 1.16x here). The group stops once its
verdict is decided (stop_on: verdict, runs 3 to --max-runs a side) or at --max-runs; the verdict
is read under the same sequential plan as every view reads it. Prints, per framework and
pair, how many comparisons were decided (and which way), the runs a side, and the
minutes they took.

    cd benchmarks && ../.venv/bin/python decisiveness.py [--aa 20] [--controls 10]
        [--sizes 68 72] [--classes 2000 4000]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections import Counter

from common import measure_group, verdict_of

from fwbench.case import Case
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import Looks

FRAMEWORKS = {"torch": "eager", "tensorflow": "graph", "keras-jax": "jit"}


# One side of a comparison: (input size, number of classes).
Side = tuple[int, int]


def case(framework: str, model: str, side: Side, a: argparse.Namespace) -> Case:
    size, classes = side
    return Case.build(
        framework=framework, mode=FRAMEWORKS[framework], model=model, task=a.task,
        batch_size=a.batch, input_size=size, num_classes=classes, threads=a.threads,
        device=a.device,
    )  # fmt: skip


def describe(side_a: Side, side_b: Side) -> str:
    if side_a == side_b:
        return "A/A"
    if side_a[1] == side_b[1]:
        return f"{side_a[0]} vs {side_b[0]} px"
    return f"{side_a[1]} vs {side_b[1]} classes"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--aa", type=int, default=20, help="A/A comparisons per framework.")
    p.add_argument("--controls", type=int, default=10, help="Per framework and size.")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--size", type=int, default=64, help="Input size of the A side.")
    p.add_argument("--sizes", type=int, nargs="*", default=[68, 72], help="B sides' sizes.")
    p.add_argument("--num-classes", type=int, default=10, help="Classes of the A side.")
    p.add_argument(
        "--classes", type=int, nargs="*", default=[], help="B sides' classes (at --size)."
    )
    p.add_argument("--min-runs", type=int, default=3)
    p.add_argument("--max-runs", type=int, default=10)
    p.add_argument("--framework", action="append", choices=list(FRAMEWORKS))
    p.add_argument("--task", default="infer", choices=["infer", "train"])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = p.parse_args()
    timing = TimingConfig(
        min_runs=a.min_runs, max_runs=a.max_runs, run_time_s=0.5, max_warmup_s=3.0,
        max_time_s=1e6,  # the rounds end on the verdict or at max_runs, not on a budget
    )  # fmt: skip
    looks = Looks(a.min_runs, a.max_runs)
    # The sides of a group are read paired by round (common.verdict_of), as fwbench reads them.
    print(
        f"sequential plan: {dataclasses.replace(looks, paired=True).describe()}; "
        f"{a.model} {a.task}, batch {a.batch}, "
        f"{a.threads} thread(s), {a.device}",
        flush=True,
    )
    for framework in a.framework or ["torch", "tensorflow"]:
        base = (a.size, a.num_classes)
        pairs = [
            (base, base, a.aa),
            *((base, (s, a.num_classes), a.controls) for s in a.sizes),
            *((base, (a.size, c), a.controls) for c in a.classes),
        ]
        for side_a, side_b, count in pairs:
            if count == 0:
                continue
            outcomes: Counter[str] = Counter()
            runs: list[int] = []
            ratios: list[float] = []
            pooled_a: list[float] = []
            pooled_b: list[float] = []
            started = time.monotonic()
            for i in range(count):
                left, right = measure_group(
                    [case(framework, a.model, side_a, a), case(framework, a.model, side_b, a)],
                    timing,
                )
                values = {
                    "A": left.per_run(timing.reading.estimator),
                    "B": right.per_run(timing.reading.estimator),
                }
                v = verdict_of({"A": left, "B": right}, timing.reading.estimator, looks)
                assert v is not None
                key = v.outcome if v.outcome != "faster" else f"{v.faster} faster"
                outcomes[key] += 1
                runs.append(min(len(x) for x in values.values()))
                ratios.append(v.ratio)
                pooled_a += values["A"]
                pooled_b += values["B"]
                print(f"  {framework} {describe(side_a, side_b)} {i + 1}: {v.text()}", flush=True)
            minutes = (time.monotonic() - started) / 60
            truth = statistics.geometric_mean(pooled_b) / statistics.geometric_mean(pooled_a)
            what = describe(side_a, side_b)
            print(
                f"{framework} {what} (pooled ratio {truth:.3f}): "
                + ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items()))
                + f" of {count}; runs a side: median {statistics.median(runs):g}, "
                f"max {max(runs)}; {minutes / count:.2f} min a comparison",
                flush=True,
            )


if __name__ == "__main__":
    main()
