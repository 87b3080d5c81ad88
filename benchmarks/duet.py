"""Duet against interleaved rounds: does running both sides at once, each on its own
cores, make a comparison steadier or cheaper on this machine?

fwbench measures the variants of a workload in rounds: one fresh worker per variant a
round, built and warmed up in turn, their timed blocks alternating, every worker free to
use every core (threads = cores). "Duet" benchmarking (Bulej et al., 2020) runs the two
sides at the same time instead, each pinned to half the cores, so that whatever else
the machine does hits both in the same instant. This script measures both designs on
the same workloads, at the same thread count per worker (cores / 2, the duet's share),
in alternation (one interleaved group, one duet group, ...), and prints per design:

- the spread of the per-round log ratio (its standard deviation over the rounds, the
  noise a paired verdict reads) for identical variants (A/A) and for PyTorch against
  TensorFlow (A/B),
- the A/B ratio each design measures (a duet's sides share the memory system, so it may
  measure another ratio than each alone),
- the wall time of a round.

A duet round's workers are built and warmed up at the same time, each on its cores, and
then run blocks in lockstep: each side is sent a block, and the next pair starts when
both have answered. The sides swap halves of the machine from round to round. Each
run's value is its 25th-percentile block (fwbench's default).

    cd benchmarks && ../.venv/bin/python duet.py [--rounds 6] [--repeat 2]
        [--workload resnet18:infer:8 ...] [--fixed-halves]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import measure_group, prepare_worker, workload_case

from fwbench.case import Case
from fwbench.launch import rounds as launch_rounds
from fwbench.launch.forkserver import ForkServers
from fwbench.launch.protocol import CaseRequest
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import per_run

DEFAULT_WORKLOADS = ("resnet18:infer:8", "mobilenet_v2:train:1")


def _pin(pid: int, cores: set[int]) -> None:
    """Every thread of the process onto `cores` (threads started later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError, PermissionError):  # a thread ended
            os.sched_setaffinity(int(tid), cores)


class _Samples:
    def __init__(self, samples: list[float]) -> None:
        self.samples = samples

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples)


def duet_round(
    cases: list[Case],
    timing: TimingConfig,
    servers: ForkServers,
    index: int,
    fixed_halves: bool = False,
) -> list[float]:
    """One duet round: a fresh worker per side, each pinned to its own cores, prepared at
    the same time, then timed in lockstep; each side's 25th-percentile block."""
    cpus = sorted(os.sched_getaffinity(0))
    share = len(cpus) // len(cases)
    halves = [set(cpus[i * share : (i + 1) * share]) for i in range(len(cases))]
    # The halves of a machine need not be equal (the launcher, interrupts, where the
    # hypervisor places each virtual CPU): the sides swap halves from round to round.
    turn = 0 if fixed_halves else index % len(halves)
    cores = halves[turn:] + halves[:turn]
    requests = [CaseRequest(case=c, timing=timing.run, count_flops=False) for c in cases]
    deadline = time.monotonic() + 600
    workers: list[Any] = []
    try:
        for request, mine in zip(requests, cores, strict=True):
            runs = timing.plan.max_runs
            worker = launch_rounds.start_worker(request, index, runs, deadline, 600, servers)
            _pin(worker.pid, mine)
            workers.append(worker)

        def prepare(i: int) -> Any:
            prepared = prepare_worker(workers[i], requests[i], timing)
            _pin(workers[i].pid, cores[i])  # the threads its build started
            return prepared

        with concurrent.futures.ThreadPoolExecutor(len(workers)) as pool:
            prepared = list(pool.map(prepare, range(len(workers))))
        samples: list[list[float]] = [[] for _ in workers]
        elapsed = [0.0 for _ in workers]
        run = timing.run
        while min(elapsed) < run.run_time_s or min(len(s) for s in samples) < run.min_samples:
            for worker, p in zip(workers, prepared, strict=True):
                worker.send({"op": "block", "warm": 0, "steps": p.steps_per_block})
            for i, (worker, p) in enumerate(zip(workers, prepared, strict=True)):
                message = worker.receive()
                if message["event"] != "block":
                    raise RuntimeError(f"{cases[i].label()}: {message}")
                seconds = float(message["seconds"])
                elapsed[i] += seconds
                samples[i].append(seconds / p.steps_per_block)
        for worker in workers:
            worker.send({"op": "finish"})
            worker.receive()
    finally:
        for worker in workers:
            worker.close()
    return [per_run([_Samples(s)], "p25")[0] for s in samples]


def duet_group(
    cases: list[Case], timing: TimingConfig, rounds: int, fixed_halves: bool = False
) -> list[list[float]]:
    directory = Path(tempfile.mkdtemp(prefix="fwbench-duet-"))
    servers = ForkServers(directory)
    try:
        return [duet_round(cases, timing, servers, r, fixed_halves) for r in range(rounds)]
    finally:
        servers.close()
        shutil.rmtree(directory, ignore_errors=True)


def interleaved_group(cases: list[Case], timing: TimingConfig) -> list[list[float]]:
    found = measure_group(cases, timing)
    values = [m.per_run("p25") for m in found]
    return [list(v) for v in zip(*values, strict=True)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--repeat", type=int, default=2, help="Groups per design and pair.")
    p.add_argument("--workload", action="append", help="MODEL:TASK:BATCH (64 px, 1000 classes)")
    p.add_argument("--run-time", type=float, default=0.5)
    p.add_argument(
        "--fixed-halves", action="store_true", help="Each side keeps its half in every round."
    )
    a = p.parse_args()
    workloads = a.workload or list(DEFAULT_WORKLOADS)
    cpus = len(os.sched_getaffinity(0))
    threads = max(1, cpus // 2)
    timing = TimingConfig(
        min_runs=a.rounds, max_runs=a.rounds, run_time_s=a.run_time, max_warmup_s=3.0,
        max_time_s=1e6, stop_on="runs",
    )  # fmt: skip
    print(f"{cpus} cores; {threads} thread(s) a worker in both designs; "
          f"{a.rounds} rounds a group, {a.run_time} s of blocks a run")  # fmt: skip
    rows: list[dict[str, Any]] = []
    for rep in range(a.repeat):
        for workload in workloads:
            for pair in (("torch", "torch"), ("tensorflow", "tensorflow"), ("torch", "tensorflow")):
                cases = [workload_case(fw, workload, threads) for fw in pair]
                designs = ("interleaved", "duet") if rep % 2 == 0 else ("duet", "interleaved")
                for design in designs:
                    started = time.perf_counter()
                    if design == "duet":
                        values = duet_group(cases, timing, a.rounds, a.fixed_halves)
                    else:
                        values = interleaved_group(cases, timing)
                    wall = time.perf_counter() - started
                    logs = [math.log(x) - math.log(y) for x, y in values]
                    row = {
                        "workload": workload, "pair": "/".join(pair), "design": design,
                        "sd": statistics.stdev(logs), "ratio": math.exp(statistics.fmean(logs)),
                        "round_s": wall / a.rounds,
                    }  # fmt: skip
                    rows.append(row)
                    print(f"  {workload:22s} {row['pair']:22s} {design:11s} "
                          f"ratio {row['ratio']:.3f}  per-round sd {row['sd']:.1%}  "
                          f"{row['round_s']:.1f} s a round", flush=True)  # fmt: skip
    print("\nsummary (median over groups)")
    for workload in workloads:
        for pair in ("torch/torch", "tensorflow/tensorflow", "torch/tensorflow"):
            for design in ("interleaved", "duet"):
                found = [
                    r for r in rows
                    if r["workload"] == workload and r["pair"] == pair and r["design"] == design
                ]  # fmt: skip
                if not found:
                    continue
                print(f"  {workload:22s} {pair:22s} {design:11s} "
                      f"sd {np.median([r['sd'] for r in found]):.1%}  "
                      f"ratios {', '.join(format(r['ratio'], '.3f') for r in found)}  "
                      f"{np.median([r['round_s'] for r in found]):.1f} s a round")  # fmt: skip


if __name__ == "__main__":
    main()
