"""What the untimed steps after a switch buy: how much slower a block is when it starts
cold, right after the other variant's block.

When the variants of a workload alternate block by block, each block after a switch
begins with untimed steps (the other process's block left the caches cold and this
one's thread pool asleep): one step until 2026-11-25, now as many as fill 30 ms
(`min_switch_warm_s`). They cost up to a whole step per block: for a training step of
200 ms in blocks of one step, half of a round's timed phase. This script measures what
they protect against. Each round starts one fresh worker per framework, as fwbench does
(built and warmed up in turn, blocks of at least 50 ms), then alternates their blocks,
cycling through four ways of starting a block, in this fixed order: cold (no untimed
step), one untimed step, untimed steps filling 30 ms from the warmup's estimate of a
step, and no switch at all (the side's block right after its own). Per side it prints
each kind's median block against the no-switch one, median over runs (each run's figure
in brackets): the bias a block carries when it starts that way.

    cd benchmarks && ../.venv/bin/python switch_cost.py [--rounds 3] [--blocks 6]
        [--workload resnet50:train:8 ...]

With --groups N it measures what the verdicts read instead: per workload, N interleaved
groups of PyTorch against TensorFlow (--rounds rounds each) with one untimed step after
a switch (`min_switch_warm_s: 0`) and N with fwbench's default, alternating, and prints
each arm's ratio (geometric mean of the per-round 25th-percentile ratios, with a 95% t
interval over all its rounds) and its wall time a group.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import MODES, measure_group, prepare_worker, workload_case

from fwbench.case import Case
from fwbench.launch import rounds as launch_rounds
from fwbench.launch.forkserver import ForkServers
from fwbench.launch.protocol import CaseRequest
from fwbench.measure.settings import TimingConfig

# Untimed work before a block after a switch, as compared: none, one step (fwbench until
# 2026-11-25), or steps filling WARM_S (its default since); against a block that follows
# the same side's block (no switch).
WARM_S = 0.03
READINGS = ("cold", "1 step", f"{WARM_S * 1e3:g} ms", "no switch")
# Workloads of the quick preset, from its shortest steps to its longest.
DEFAULT_WORKLOADS = (
    "mobilenet_v2:infer:1",
    "resnet18:infer:1",
    "mobilenet_v2:infer:8",
    "resnet18:infer:8",
    "mobilenet_v2:train:1",
    "resnet50:train:8",
)


def one_round(
    cases: list[Case], timing: TimingConfig, servers: ForkServers, index: int, blocks: int
) -> list[dict[str, Any]]:
    """One round; per side: steps a block, seconds a step, and each way of starting a
    block against the no-switch block."""
    requests = [CaseRequest(case=c, timing=timing.run, count_flops=False) for c in cases]
    deadline = time.monotonic() + 600
    workers: list[Any] = []
    prepared: list[Any] = []
    try:
        order = range(len(cases)) if index % 2 == 0 else reversed(range(len(cases)))
        by_side: dict[int, tuple[Any, Any]] = {}
        for i in order:
            runs = timing.plan.max_runs
            worker = launch_rounds.start_worker(requests[i], index, runs, deadline, 600, servers)
            workers.append(worker)
            by_side[i] = (worker, prepare_worker(worker, requests[i], timing))
        prepared = [by_side[i] for i in range(len(cases))]
        found: list[dict[str, list[float]]] = [{k: [] for k in READINGS} for _ in cases]

        def block(i: int, warm: int) -> float:
            worker, ready = prepared[i]
            worker.send({"op": "block", "warm": warm, "steps": ready.steps_per_block})
            message = worker.receive()
            if message["event"] != "block":
                raise RuntimeError(f"{cases[i].label()}: {message}")
            return float(message["seconds"]) / ready.steps_per_block

        # Steps in WARM_S of untimed work, from each side's warmup estimate of a step (fwbench
        # then corrects the count from each block's steps).
        longer = [
            launch_rounds.warm_steps(launch_rounds.step_estimate(ready), WARM_S)
            for _, ready in prepared
        ]
        for _ in range(blocks):
            for reading in READINGS:
                for i in range(len(cases)):
                    if reading == "no switch":
                        block(i, 0)  # the other side ran last: this one is the cold block
                        found[i][reading].append(block(i, 0))
                    else:
                        warm = {"cold": 0, "1 step": 1, f"{WARM_S * 1e3:g} ms": longer[i]}
                        found[i][reading].append(block(i, warm[reading]))
        for worker, _ in prepared:
            worker.send({"op": "finish"})
            worker.receive()
    finally:
        for worker in workers:
            worker.close()
    return [
        {
            "steps": ready.steps_per_block,
            "step_s": statistics.median(f["no switch"]),
            **{k: statistics.median(f[k]) / statistics.median(f["no switch"]) for k in READINGS},
        }
        for (_, ready), f in zip(prepared, found, strict=True)
    ]


def verdict_arms(workloads: list[str], groups: int, rounds: int) -> None:
    from scipy import stats as sps

    arms = {"1 step": 0.0, f"{WARM_S * 1e3:g} ms": WARM_S}
    for workload in workloads:
        cases = [workload_case(fw, workload) for fw in MODES]
        logs: dict[str, list[float]] = {arm: [] for arm in arms}
        walls: dict[str, list[float]] = {arm: [] for arm in arms}
        for g in range(groups):
            for arm in arms if g % 2 == 0 else reversed(list(arms)):
                timing = TimingConfig(
                    min_runs=rounds, max_runs=rounds, run_time_s=0.5, max_warmup_s=3.0,
                    max_time_s=1e6, stop_on="runs", min_switch_warm_s=arms[arm],
                )  # fmt: skip
                started = time.perf_counter()
                torch_side, tf_side = measure_group(cases, timing)
                walls[arm].append(time.perf_counter() - started)
                for a, b in zip(torch_side.per_run("p25"), tf_side.per_run("p25"), strict=True):
                    logs[arm].append(math.log(a / b))
        for arm, found in logs.items():
            n = len(found)
            mean = statistics.fmean(found)
            half = sps.t.ppf(0.975, n - 1) * statistics.stdev(found) / math.sqrt(n)
            print(f"{workload:22s} {arm:6s} PyTorch/TensorFlow {math.exp(mean):.3f} "
                  f"({math.exp(mean - half):.3f}-{math.exp(mean + half):.3f}, {n} rounds); "
                  f"{statistics.median(walls[arm]):.1f} s a group", flush=True)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--blocks", type=int, default=6, help="Cycles of the four kinds a run.")
    p.add_argument("--workload", action="append", help="MODEL:TASK:BATCH (64 px, 1000 classes)")
    p.add_argument("--groups", type=int, default=0, help="Measure verdicts' ratios instead.")
    a = p.parse_args()
    if a.groups:
        verdict_arms(a.workload or list(DEFAULT_WORKLOADS), a.groups, a.rounds)
        return
    timing = TimingConfig(run_time_s=0.5, max_warmup_s=3.0)
    directory = Path(tempfile.mkdtemp(prefix="fwbench-switch-"))
    servers = ForkServers(directory)
    try:
        for workload in a.workload or list(DEFAULT_WORKLOADS):
            cases = [workload_case(fw, workload) for fw in MODES]
            rows = [one_round(cases, timing, servers, r, a.blocks) for r in range(a.rounds)]
            for i, fw in enumerate(MODES):
                step_ms = statistics.median(row[i]["step_s"] for row in rows) * 1e3
                steps = statistics.median(row[i]["steps"] for row in rows)
                against = "; ".join(
                    f"{k} {statistics.median(row[i][k] for row in rows):.3f} ("
                    + ", ".join(format(row[i][k], ".3f") for row in rows)
                    + ")"
                    for k in READINGS[:-1]
                )
                print(f"{workload:22s} {fw:11s} step {step_ms:6.1f} ms, {steps:g} a block; "
                      f"block / no-switch block: {against}", flush=True)  # fmt: skip
    finally:
        servers.close()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
