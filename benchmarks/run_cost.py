"""Where a run's time goes: start, build, first step, warmup, timed blocks, final report.

Measures one interleaved A/A group (the same case twice, a fixed number of runs a side)
through fwbench's own driver per framework and configuration, and prints the median of
each phase over the group's runs, the timed share, and the group's wall time: what one
comparison costs. Configurations: the defaults (fork-server workers, compile cache
shared by the command's runs), `nocache` (every run compiles from scratch) and `spawn`
(every worker a fresh interpreter, as GPU cases were started before forking there).

    cd benchmarks && ../.venv/bin/python run_cost.py --framework torch:eager \\
        --framework keras-jax:jit --model resnet18 --task train --batch 8 --size 64 \\
        [--device cuda] [--runs 3] [--configs default,nocache,spawn]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

from common import measure_group, verdict_of

from fwbench.case import Case
from fwbench.catalog.frameworks import FRAMEWORKS, FrameworkInfo
from fwbench.measure.settings import TimingConfig

CONFIGS = ("default", "nocache", "spawn", "spawn-nocache")
PHASES = ("start_s", "build_s", "first_step_s", "warmup_s", "timed_s", "finish_s")


class _NoForkOnCuda:
    """The registry as the launcher reads it, with no framework forking GPU workers."""

    def __getitem__(self, name: str) -> FrameworkInfo:
        return dataclasses.replace(FRAMEWORKS[name], forks_on_cuda=False)


def phases(run: Any) -> dict[str, float]:
    found = {p: getattr(run, p, None) for p in PHASES if p != "timed_s"}
    found["timed_s"] = sum(run.samples) * run.steps_per_block
    return {k: float(v) for k, v in found.items() if v is not None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", action="append", required=True, help="NAME:MODE")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--task", default="train")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=3, help="Runs a side (fixed).")
    p.add_argument("--run-time", type=float, default=0.5, help="Seconds of blocks a run.")
    p.add_argument("--configs", default="default,nocache,spawn")
    a = p.parse_args()
    configs = a.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        p.error(f"unknown config {unknown[0]!r}; valid choices: {', '.join(CONFIGS)}")
    from fwbench.launch import rounds

    print("config | framework | wall s | per run (median s): " + " ".join(PHASES), flush=True)
    for spec in a.framework:
        name, _, mode = spec.partition(":")
        given = {"mode": mode} if mode else {}
        case = Case.build(
            framework=name, model=a.model, task=a.task, batch_size=a.batch,
            input_size=a.size, device=a.device, threads=a.threads, **given,
        )  # fmt: skip
        for config in configs:
            timing = TimingConfig(
                min_runs=a.runs, max_runs=a.runs, run_time_s=a.run_time, max_time_s=1e6,
                stop_on="precision", target_ci=1e-9, compile_cache="nocache" not in config,
            )  # fmt: skip
            rounds.FRAMEWORKS = _NoForkOnCuda() if "spawn" in config else FRAMEWORKS  # type: ignore[attr-defined,assignment]
            started = time.monotonic()
            try:
                left, right = measure_group([case, case], timing)
            except Exception as exc:  # one configuration's failure is its line's figure
                print(f"{config} | {spec} | failed: {exc}", flush=True)
                continue
            wall = time.monotonic() - started
            runs = [*left.runs, *right.runs]
            rows = [phases(r) for r in runs]
            medians = {k: statistics.median(r[k] for r in rows if k in r) for k in PHASES}
            timed = sum(r["timed_s"] for r in rows)
            verdict = verdict_of({"A": left, "B": right}, timing.reading.estimator)
            launchers = sorted({r.launcher.split(" ")[0] for r in runs})
            print(
                f"{config} | {spec} | {wall:.1f} | "
                + " ".join(f"{k.removesuffix('_s')} {medians[k]:.2f}" for k in PHASES)
                + f" | timed {timed / wall:.0%} of wall; {len(runs)} runs; "
                + f"{'/'.join(launchers)}; A/A: {verdict.text() if verdict else '-'}",
                flush=True,
            )
            firsts = [f"{r['first_step_s']:.2f}" for r in rows]
            print(f"    first step per run (A then B): {' '.join(firsts)}", flush=True)


if __name__ == "__main__":
    main()
