"""Which per-run estimator decides soonest while staying honest: the same runs read by each.

Each group is one interleaved round-robin, through fwbench's own driver, of the same case
three times (three A/A pairs: identical variants, which must be called different at most
5% of the time) and the same model at larger input sizes (positive controls: a real
difference of known direction; its size is the ratio of all runs pooled). Every side
gets a fixed number of runs (worker processes) of equal timed durations, and each run's
blocks are kept, so every estimator (median, low quantiles, minimum of a run's blocks)
reads exactly the same data. The sequential rule is then replayed per pair and
estimator: the verdict read after each round from 3 runs a side, under the plan's
per-look level, stopping at the first decided look, as the driver would. `--noise` runs
another job in bursts on one core meanwhile (a shared machine's interference).

    cd benchmarks && ../.venv/bin/python estimators.py --threads 2 --out est.json [--noise]
    ../.venv/bin/python estimators.py --evaluate est.json

Prints, per framework, thread count and noise, pair and estimator: the share decided
(and which way), the runs a side it took, the run-to-run spread of the estimator (median
coefficient of variation of a side's per-run values), the 95% half-width of the ratio at
the last look, and the pooled ratio.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from common import measure_group

from fwbench.case import Case
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import ESTIMATORS, Comparison, Looks

FRAMEWORKS = {"torch": "eager", "tensorflow": "graph"}


def case(framework: str, model: str, size: int, threads: int) -> Case:
    return Case.build(
        framework=framework, mode=FRAMEWORKS[framework], model=model, task="infer",
        batch_size=4, input_size=size, num_classes=10, threads=threads,
    )  # fmt: skip


# Another job that comes and goes on one core (bursts of work and idle of 0.05-0.5 s):
# the interference of an ordinary shared machine, which only ever adds time.
NOISE = """
import random, time
while True:
    time.sleep(random.uniform(0.05, 0.5))
    end = time.monotonic() + random.uniform(0.05, 0.5)
    while time.monotonic() < end:
        pass
"""


def collect(a: argparse.Namespace) -> None:
    noise = subprocess.Popen([sys.executable, "-c", NOISE]) if a.noise else None
    try:
        _collect(a)
    finally:
        if noise is not None:
            noise.kill()
    evaluate(Path(a.out))


def _collect(a: argparse.Namespace) -> None:
    # Every run takes run_time_s of blocks (no per-run precision stop: target_ci 1e-9),
    # and every side exactly `runs` runs: equal durations, so no estimator is favoured
    # by a run that happened to make more blocks.
    timing = TimingConfig(
        min_runs=a.runs, max_runs=a.runs, run_time_s=0.5, max_warmup_s=3.0,
        max_time_s=1e6, target_ci=1e-9, stop_on="precision",
    )  # fmt: skip
    out = Path(a.out)
    data = json.loads(out.read_text()) if out.exists() else {"groups": []}
    data["machine"] = platform.processor() or platform.machine()
    sizes = [a.size, a.size, a.size, *a.sizes]
    for framework in a.framework or list(FRAMEWORKS):
        for g in range(a.groups):
            started = time.monotonic()
            found = measure_group([case(framework, a.model, s, a.threads) for s in sizes], timing)
            data["groups"].append(
                {
                    "framework": framework,
                    "noise": bool(a.noise),
                    "threads": a.threads,
                    "sizes": sizes,
                    "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                    "sides": [
                        [{"samples": list(r.samples), "other": r.other_cpu_cores} for r in m.runs]
                        for m in found
                    ],
                }
            )
            out.write_text(json.dumps(data))
            print(
                f"{framework} group {g + 1}/{a.groups}: {time.monotonic() - started:.0f} s",
                flush=True,
            )


@dataclass(frozen=True)
class StoredRun:
    """A run as the collection stored it: its blocks (what fwbench's estimators read)."""

    samples: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples)


def _value(run: dict, estimator: str) -> float:
    return ESTIMATORS[estimator](StoredRun(tuple(run["samples"])))


def _replay(a: list[float], b: list[float], looks: Looks) -> tuple[str, int, float]:
    """The sequential verdict as the driver reads it: (outcome, runs a side, ratio)."""
    for n in range(looks.first, looks.last + 1):
        # One group's runs: run i of each side in round i, read paired as fwbench reads them.
        rounds = {"A": range(n), "B": range(n)}
        v = Comparison.of({"A": a[:n], "B": b[:n]}, looks=looks, rounds=rounds).verdict()
        assert v is not None
        if v.outcome != "inconclusive" or n == looks.last:
            key = v.outcome if v.outcome != "faster" else f"{v.faster} faster"
            return key, n, v.ratio
    raise AssertionError("unreachable")


def evaluate(path: Path) -> None:
    data = json.loads(path.read_text())
    by_framework: dict[str, list[dict]] = defaultdict(list)
    for group in data["groups"]:
        noisy = " beside another job" if group.get("noise") else ""
        threads = f", {group.get('threads', 1)} threads"
        by_framework[group["framework"] + threads + noisy].append(group)
    for framework, groups in by_framework.items():
        runs = min(len(side) for g in groups for side in g["sides"])
        looks = Looks(3, runs)
        sizes = groups[0]["sizes"]
        print(f"\n{framework}: {len(groups)} groups, {runs} runs a side; {looks.describe()}")
        pairs = [(0, 1), (0, 2), (1, 2), *((0, i) for i in range(3, len(sizes)))]
        for estimator in ESTIMATORS:
            spreads = []
            for g in groups:
                for side in g["sides"]:
                    values = [_value(r, estimator) for r in side[:runs]]
                    spreads.append(statistics.stdev(values) / statistics.mean(values))
            line = [f"  {estimator:>6}: run-to-run spread {statistics.median(spreads):.1%}"]
            for kind in ["A/A", *(f"{sizes[0]}/{s}" for s in sizes[3:])]:
                chosen = [p for p in pairs if (sizes[p[0]] == sizes[p[1]]) == (kind == "A/A")]
                if kind != "A/A":
                    chosen = [p for p in chosen if f"{sizes[0]}/{sizes[p[1]]}" == kind]
                outcomes: dict[str, int] = defaultdict(int)
                taken, widths, pooled_a, pooled_b = [], [], [], []
                for g in groups:
                    for i, j in chosen:
                        a = [_value(r, estimator) for r in g["sides"][i][:runs]]
                        b = [_value(r, estimator) for r in g["sides"][j][:runs]]
                        key, n, _ = _replay(a, b, looks)
                        outcomes[key] += 1
                        taken.append(n)
                        lo, hi = _ratio_interval(a, b)
                        widths.append((hi - lo) / 2)
                        pooled_a += a
                        pooled_b += b
                total = sum(outcomes.values())
                truth = statistics.geometric_mean(pooled_b) / statistics.geometric_mean(pooled_a)
                shown = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
                line.append(
                    f"{kind} (ratio {truth:.3f}): {shown} of {total}; runs median "
                    f"{statistics.median(taken):g}; +-{statistics.median(widths):.1%} at {runs}"
                )
            print("\n      ".join(line))


def _ratio_interval(a: list[float], b: list[float]) -> tuple[float, float]:
    (r,) = Comparison.of({"B": b, "A": a}, "given", [("B", "A")]).ratios()
    return r.ci_low / r.value, r.ci_high / r.value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groups", type=int, default=7, help="Groups per framework.")
    p.add_argument("--runs", type=int, default=8, help="Runs a side in every group.")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--size", type=int, default=64, help="Input size of the A sides.")
    p.add_argument("--sizes", type=int, nargs="*", default=[67, 72], help="Control sides.")
    p.add_argument("--framework", action="append", choices=list(FRAMEWORKS))
    p.add_argument("--threads", type=int, default=1, help="Threads per worker.")
    p.add_argument("--out", default="results/estimators.json")
    p.add_argument("--evaluate", metavar="FILE", help="Only read a file of groups.")
    p.add_argument(
        "--noise", action="store_true", help="Run another job in bursts on one core meanwhile."
    )
    a = p.parse_args()
    if a.evaluate:
        evaluate(Path(a.evaluate))
    else:
        collect(a)


if __name__ == "__main__":
    main()
