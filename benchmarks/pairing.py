"""Runs of an interleaved group, read unpaired (Welch, over runs) and paired by round.

The variants of one workload are measured in rounds: each round starts one fresh worker
per variant, and their timed blocks alternate. Whatever slowed the machine during a round
slowed both sides, so the sides' runs of one round are correlated, and a comparison can
be read on the per-round log ratios (a paired t interval) instead of two independent
sets of runs (Welch). This script measures, on this machine, identical variants (A/A:
one case twice in a group) and a real difference (PyTorch against TensorFlow on the
quick preset's workloads), each at a fixed number of rounds, and reads every group both
ways after 3, 4, ... rounds (each count read alone, as a fixed plan of that many runs
reads it: no stopping here). It prints
how often identical variants are called different and how many real comparisons are
decided under each reading, and the correlation of the two sides' runs.

    cd benchmarks && ../.venv/bin/python pairing.py [--rounds 4] [--repeat 1]
        [--aa-only | --ab-only] [--save runs.json] [--load runs.json] [--db sweep.duckdb]

With --db it also reads each round as blocks paired back to back (`block_pairs`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import MODES, measure_group

from fwbench.case import Case
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import Comparison, Looks

# The quick preset's workloads: (model, task, batch size), 64 px, 1000 classes.
WORKLOADS = [
    (model, task, batch)
    for model in ("resnet18", "mobilenet_v2", "resnet50")
    for task in ("train", "infer")
    for batch in (1, 8)
]
ESTIMATORS = ("p25", "median")


def case(framework: str, model: str, task: str, batch: int) -> Case:
    return Case.build(
        framework=framework, mode=MODES[framework], model=model, task=task,
        batch_size=batch, input_size=64, num_classes=1000, device="cpu",
    )  # fmt: skip


def measure(rounds: int, repeat: int, aa: bool, ab: bool) -> list[dict[str, object]]:
    timing = TimingConfig(
        min_runs=rounds, max_runs=rounds, run_time_s=0.5, max_warmup_s=3.0, max_time_s=1e6
    )
    groups: list[dict[str, object]] = []
    for _ in range(repeat):
        for model, task, batch in WORKLOADS:
            kinds = [("A/A", fw, fw) for fw in MODES if aa] + (
                [("torch/tf", "torch", "tensorflow")] if ab else []
            )
            for kind, left, right in kinds:
                started = time.monotonic()
                sides = measure_group(
                    [case(left, model, task, batch), case(right, model, task, batch)], timing
                )
                group = {
                    "kind": kind,
                    "workload": f"{model} {task} b{batch}",
                    "framework": left if kind == "A/A" else "torch/tf",
                    "seconds": time.monotonic() - started,
                }
                for name in ESTIMATORS:
                    # By round: a run's index is its round in the group.
                    group[name] = [
                        {str(r.index): v for r, v in zip(m.runs, m.per_run(name), strict=True)}
                        for m in sides
                    ]
                groups.append(group)
                print(f"  {kind} {group['workload']} {group['framework']}: "
                      f"{group['seconds']:.0f} s", flush=True)  # fmt: skip
    return groups


def read(group: dict[str, object], estimator: str, n: int) -> tuple[str, str, float]:
    """Both readings of a group's first n rounds: (welch outcome, paired outcome, rho)."""
    left, right = group[estimator]  # type: ignore[misc]
    rounds = sorted(set(left) & set(right), key=int)[:n]
    a = [left[r] for r in rounds]
    b = [right[r] for r in rounds]
    # Each count read once, as a fixed plan of n runs a side would read it (the paired
    # reading at its own level: comparison.PAIRED_MARGIN).
    looks = Looks(n, n)
    values, rounds = {"a": a, "b": b}, {"a": range(n), "b": range(n)}
    welch = Comparison.of(values, looks=looks).verdict().outcome  # type: ignore[union-attr]
    paired = Comparison.of(values, looks=looks, rounds=rounds).verdict().outcome  # type: ignore[union-attr]
    rho = float(np.corrcoef(np.log(a), np.log(b))[0, 1]) if n >= 3 else math.nan
    return welch, paired, rho


def summary(groups: list[dict[str, object]], rounds: int) -> None:
    for estimator in ESTIMATORS:
        print(f"\nper-run value: {estimator}")
        for kind in ("A/A", "torch/tf"):
            found = [g for g in groups if g["kind"] == kind]
            if not found:
                continue
            for n in range(3, rounds + 1):
                read_all = [read(g, estimator, n) for g in found]
                welch = sum(w != "inconclusive" for w, _, _ in read_all)
                paired = sum(p != "inconclusive" for _, p, _ in read_all)
                called = "called different" if kind == "A/A" else "decided"
                if kind == "A/A":
                    welch = sum(w == "faster" for w, _, _ in read_all)
                    paired = sum(p == "faster" for _, p, _ in read_all)
                rhos = [rho for _, _, rho in read_all if not math.isnan(rho)]
                print(
                    f"  {kind} {n} rounds: {called} welch {welch} / paired {paired} "
                    f"of {len(found)}; median rho {statistics.median(rhos):+.2f}"
                )
            serial(found, estimator)
        for n in range(3, rounds + 1):
            reruns(groups, estimator, n)


def serial(groups: list[dict[str, object]], estimator: str) -> None:
    """Whether a group's per-round log ratios are correlated from one round to the next
    (what makes a paired interval too narrow): their pooled lag-1 autocorrelation, beside
    what independent rounds of the same count give (short series read it below zero)."""
    found = []
    for g in groups:
        left, right = g[estimator]  # type: ignore[misc]
        rounds = sorted(set(left) & set(right), key=int)
        found.append(np.log([left[r] for r in rounds]) - np.log([right[r] for r in rounds]))

    def lag1(series: list[np.ndarray]) -> float:
        centred = [d - d.mean() for d in series if len(d) >= 3]
        num = sum(float((c[1:] * c[:-1]).sum()) for c in centred)
        return num / sum(float((c**2).sum()) for c in centred)

    rng = np.random.default_rng(0)
    null = [lag1([rng.standard_normal(len(d)) for d in found]) for _ in range(2000)]
    print(
        f"  per-round log ratios, lag-1 autocorrelation: {lag1(found):+.2f} "
        f"(independent rounds: {np.median(null):+.2f}, 90% within "
        f"{np.quantile(null, 0.05):+.2f} to {np.quantile(null, 0.95):+.2f})"
    )


def reruns(groups: list[dict[str, object]], estimator: str, n: int) -> None:
    """Would a rerun agree? Over ordered pairs of groups of one workload (i, j): the share
    where group i's ratio lies inside group j's interval, each read on its first n rounds
    (honest intervals of equal width score about 83% at 95%, more at small n)."""
    by_workload: dict[str, list[dict[str, object]]] = {}
    for g in groups:
        if g["kind"] == "torch/tf":
            by_workload.setdefault(str(g["workload"]), []).append(g)
    inside = {False: 0, True: 0}
    pairs = 0
    for found in by_workload.values():
        reads = []
        for g in found:
            left, right = g[estimator]  # type: ignore[misc]
            rounds = sorted(set(left) & set(right), key=int)[:n]
            values = {"a": [left[r] for r in rounds], "b": [right[r] for r in rounds]}
            both = {}
            for paired in inside:
                c = Comparison.of(
                    values,
                    "given",
                    [("a", "b")],
                    looks=Looks(n, n),
                    rounds={"a": range(n), "b": range(n)} if paired else None,
                )
                (r,) = c.ratios()
                both[paired] = r
            reads.append(both)
        for i, j in itertools.permutations(range(len(reads)), 2):
            pairs += 1
            for paired in inside:
                r_i, r_j = reads[i][paired], reads[j][paired]
                inside[paired] += r_j.ci_low <= r_i.value <= r_j.ci_high
    if pairs:
        print(
            f"  a rerun's ratio inside the interval ({n} rounds, {pairs} ordered pairs of "
            f"groups): welch {inside[False] / pairs:.0%}, paired {inside[True] / pairs:.0%}"
        )


def stored_pairs(paths: list[Path]) -> list[dict[str, Any]]:
    """The PyTorch and TensorFlow results of each workload of stored sweeps (the quick
    preset's), read once: framework -> Result."""
    from fwbench.store.db import ResultStore

    pairs: list[dict[str, Any]] = []
    for path in paths:
        with ResultStore(path, read_only=True) as store:
            results = [r for r in store.results() if r.measurement is not None]
        by_workload: dict[tuple[object, ...], dict[str, Any]] = {}
        for r in results:
            by_workload.setdefault(r.case.workload_key(), {})[r.case.framework] = r
        pairs += [s for s in by_workload.values() if set(s) == {"torch", "tensorflow"}]
    return pairs


def from_db(pairs: list[dict[str, Any]]) -> list[dict[str, object]]:
    """Stored PyTorch-against-TensorFlow groups (`stored_pairs`) in the form `measure`
    saves."""
    groups: list[dict[str, object]] = []
    for sides in pairs:
        case = sides["torch"].case
        group: dict[str, object] = {
            "kind": "torch/tf",
            "workload": f"{case.model} {case.task} b{case.batch_size}",
            "framework": "torch/tf",
        }
        for name in ESTIMATORS:
            group[name] = [
                {str(run.index): v for run, v in zip(m.runs, m.per_run(name), strict=True)}
                for m in (sides[fw].measurement for fw in ("torch", "tensorflow"))
            ]
        groups.append(group)
    return groups


def block_pairs(pairs: list[dict[str, Any]], rounds: int) -> None:
    """Pairing blocks that ran back to back: within a round the variants' blocks
    alternate, so block i of one side and block i of the other ran next to each other.
    Each round read as the median of those blocks' log ratios, against the ratio of the
    two runs' 25th percentiles (fwbench's reading); both then paired over rounds as a
    fixed plan of `rounds` reads them. Prints the median per-round spread and the
    verdicts decided by each reading."""
    spreads: dict[str, list[float]] = {"runs (p25)": [], "block pairs": []}
    decided = dict.fromkeys(spreads, 0)
    groups = 0
    for sides in pairs:
        m_a, m_b = (sides[fw].measurement for fw in ("torch", "tensorflow"))
        if m_a.group_id is None or m_a.group_id != m_b.group_id:
            continue
        of_b = {run.index: run for run in m_b.runs}
        logs: dict[str, list[float]] = {name: [] for name in spreads}
        for run in m_a.runs:
            other = of_b.get(run.index)
            if other is None or len(other.samples) != len(run.samples):
                continue
            a, b = np.log(run.samples), np.log(other.samples)
            logs["runs (p25)"].append(float(np.quantile(a, 0.25) - np.quantile(b, 0.25)))
            logs["block pairs"].append(float(np.median(a - b)))
        if len(logs["runs (p25)"]) < rounds:
            continue
        groups += 1
        for name, found in logs.items():
            found = found[:rounds]
            spreads[name].append(statistics.stdev(found))
            values = {"a": list(np.exp(found)), "b": [1.0] * rounds}
            c = Comparison.of(
                values,
                looks=Looks(rounds, rounds),
                rounds={"a": range(rounds), "b": range(rounds)},
            )
            decided[name] += c.decided
    print(f"\nblocks paired back to back ({groups} PyTorch/TensorFlow groups, {rounds} rounds):")
    for name in spreads:
        spread = statistics.median(spreads[name])
        print(f"  {name}: per-round spread of the log ratio, median {spread:.1%}; "
              f"decided {decided[name]} of {groups}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--aa-only", action="store_true")
    p.add_argument("--ab-only", action="store_true")
    p.add_argument("--save", type=Path, help="Write the groups' per-run values here.")
    p.add_argument("--load", type=Path, action="append", help="Read saved groups instead.")
    p.add_argument("--db", type=Path, action="append", help="Read a stored sweep's groups.")
    a = p.parse_args()
    if a.load or a.db:
        groups = [g for path in a.load or [] for g in json.loads(path.read_text())]
        if a.db:
            pairs = stored_pairs(a.db)
            groups += from_db(pairs)
            block_pairs(pairs, a.rounds)
    else:
        groups = measure(a.rounds, a.repeat, not a.ab_only, not a.aa_only)
        if a.save:
            a.save.write_text(json.dumps(groups))
    summary(groups, a.rounds)


if __name__ == "__main__":
    main()
