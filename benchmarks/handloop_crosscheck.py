"""Does fwbench measure each framework as fast as an expert's own loop? (METHODOLOGY 19b)

For each framework, in its default mode (no --mode given, as a user would run it),
fwbench's figures are set against a loop written as that framework's documentation
writes it (handloops.py), round by round in alternation (ABBA) on this machine:

- `run`: fwbench's step time against the hand loop's median step time;
- `serve` (LoadGen Offline): fwbench's time per batch (batch / samples per second)
  against the same hand loop.

Each figure is one fresh process. Ratios are fwbench / hand (above 1: fwbench slower),
geometric means over rounds with a t interval (fwbench.measure.verdicts.ratio); the
target is 1.00 +- 0.05. Other processes' CPU during each process is recorded, so a busy
machine shows. Usage:

    cd benchmarks && ../.venv/bin/python handloop_crosscheck.py [--rounds 3]
        [--framework torch ...] [--model resnet50] [--batch-size 8] [--input-size 224]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import psutil
from common import against_target

from fwbench.measure import load
from fwbench.measure.verdicts import ratio

HERE = Path(__file__).parent
FWBENCH = str(Path(sys.executable).parent / "fwbench")
FRAMEWORKS = ("torch", "tensorflow", "keras-jax", "flax", "onnxruntime", "openvino", "litert")
TARGET = 0.05


def _own_and_children() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def _timed(argv: list[str]) -> tuple[dict[str, Any] | list[Any], float, float]:
    """Run a command that prints JSON; its output, wall seconds, other processes' cores."""
    window = load.LoadWindow(_own_and_children)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    other = window.other_cores() or 0.0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout), wall, other


def workload(args: argparse.Namespace) -> list[str]:
    return [
        "--model", args.model, "--batch-size", str(args.batch_size),
        "--input-size", str(args.input_size), "--threads", str(args.threads),
    ]  # fmt: skip


def hand(framework: str, args: argparse.Namespace) -> tuple[float, float]:
    argv = [sys.executable, str(HERE / "handloops.py"), framework, *workload(args)]
    found, _, other = _timed([*argv, "--seconds", str(args.seconds)])
    assert isinstance(found, dict)
    return float(found["median_s"]), other


def fwbench_run(framework: str, args: argparse.Namespace, db: Path) -> tuple[float, float]:
    argv = [FWBENCH, "run", "--framework", framework, "--task", "infer", *workload(args)]
    argv += ["--min-runs", "1", "--max-runs", "1", "--no-flops", "--json", "--db", str(db)]
    found, _, other = _timed(argv)
    record = found if isinstance(found, dict) else found[0]
    if record["status"] != "ok":
        raise RuntimeError(f"fwbench run {framework}: {record['status']}: {record['error']}")
    return float(record["step_time_s"]["median"]), other


def fwbench_serve(framework: str, args: argparse.Namespace, db: Path) -> tuple[float, float]:
    argv = [FWBENCH, "serve", "--framework", framework, *workload(args)]
    argv += ["--scenario", "offline", "--runs", "1", "--duration", str(args.seconds)]
    argv += ["--json", "--db", str(db)]
    found, _, other = _timed(argv)
    assert isinstance(found, list)
    (record,) = found
    if record["status"] != "ok":
        raise RuntimeError(f"fwbench serve {framework}: {record['status']}: {record['error']}")
    return args.batch_size / float(record["serving"]["samples_per_s"]["value"]), other


def crosscheck(framework: str, args: argparse.Namespace, db: Path) -> dict[str, Any]:
    sides = {
        "hand": lambda: hand(framework, args),
        "run": lambda: fwbench_run(framework, args, db),
        "serve": lambda: fwbench_serve(framework, args, db),
    }
    names = [n for n in sides if n == "hand" or n in args.commands]
    values: dict[str, list[float]] = {n: [] for n in names}
    loads: list[float] = []
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:  # ABBA
            value, other = sides[name]()
            values[name].append(value)
            loads.append(other)
            print(f"  {framework} round {r + 1} {name}: {value * 1e3:.1f} ms", file=sys.stderr)
    out: dict[str, Any] = {
        "framework": framework,
        "values_s": values,
        "max_other_cores": max(loads),
    }
    for name in names[1:]:
        found = ratio(values[name], values["hand"])
        out[name] = {"ratio": found.value, "ci_low": found.ci_low, "ci_high": found.ci_high}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", action="append", choices=FRAMEWORKS)
    parser.add_argument("--command", dest="commands", action="append", choices=["run", "serve"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--input-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per process")
    parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
    args = parser.parse_args()
    args.commands = args.commands or ["run", "serve"]
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        for framework in args.framework or FRAMEWORKS:
            found.append(crosscheck(framework, args, Path(tmp) / "crosscheck.duckdb"))
    print(
        f"{args.model} inference, batch {args.batch_size}, {args.input_size} px, "
        f"{args.threads} threads, {args.rounds} rounds, {date.today()}; "
        f"ratio = fwbench / hand loop (target 1.00 +- {TARGET:.2f})"
    )
    print(f"{'framework':12} {'hand ms':>8} {'command':>7} {'ratio':>6} {'95% CI':>12} {'ok':>3}")
    for row in found:
        hand_ms = 1e3 * float(sorted(row["values_s"]["hand"])[len(row["values_s"]["hand"]) // 2])
        for command in args.commands:
            r = row[command]
            ok = against_target(r["ci_low"], r["ci_high"], TARGET)
            print(
                f"{row['framework']:12} {hand_ms:8.1f} {command:>7} {r['ratio']:6.3f} "
                f"{r['ci_low']:5.3f}-{r['ci_high']:5.3f} {ok:>3}"
            )
    busiest = max(row["max_other_cores"] for row in found)
    print(f"other processes' CPU during any one process: at most {busiest:.2f} cores")
    print("ok: yes, the interval within the target; NO, outside it; ?, across its edge")
    if args.out:
        args.out.write_text(
            json.dumps(
                {"args": vars(args) | {"out": str(args.out)}, "rows": found}, indent=1, default=str
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
