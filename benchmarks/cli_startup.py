"""How long the CLI takes to answer: `fwbench --help`, every command's --help, `fwbench
env`, a bad input (a case that fails validation), and `fwbench models` with its counts
cached (warm) and without (cold), each in a fresh process, against `python -c pass`.

The commands take turns in each of the repeats, so a change in the machine's load
during the benchmark falls on all of them alike; each line is the median of the
repeats. The machine's load (1-minute average) is printed before and after: a figure
read on a busy machine is a busy machine's.

    PYTHONPATH=src .venv/bin/python benchmarks/cli_startup.py
    PYTHONPATH=src .venv/bin/python benchmarks/cli_startup.py --no-cold   # minutes less
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from fwbench.cli.app import COMMANDS

FWBENCH = [sys.executable, "-m", "fwbench"]


@dataclass
class Probe:
    """One thing timed: its label, its command line, the exit code it must end with, and
    the user's cache it runs with (None: a fresh, empty one each time)."""

    label: str
    argv: list[str]
    code: int = 0
    cache: Path | None = field(default=None)
    times: list[float] = field(default_factory=list)


def timed(probe: Probe, scratch: Path) -> float:
    env = dict(os.environ)
    cache = probe.cache or Path(tempfile.mkdtemp(prefix="cold-", dir=scratch))
    env["FWBENCH_CACHE_DIR"] = str(cache)
    started = time.perf_counter()
    done = subprocess.run(probe.argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != probe.code:
        raise RuntimeError(
            f"{probe.label}: exit {done.returncode}, expected {probe.code}: {done.stderr[-500:]}"
        )
    return seconds


def probes(scratch: Path, cold: bool) -> list[Probe]:
    warm_cache = scratch / "warm"
    found = [
        Probe("python -c pass", [sys.executable, "-c", "pass"]),
        Probe("fwbench --help", [*FWBENCH, "--help"]),
        *(Probe(f"fwbench {name} --help", [*FWBENCH, name, "--help"]) for name in COMMANDS),
        Probe("fwbench env", [*FWBENCH, "env"]),
        Probe(
            "bad input (run --framework nope)",
            [*FWBENCH, "run", "--framework", "nope", "--model", "resnet18"],
            code=2,
        ),
        Probe("fwbench models (warm)", [*FWBENCH, "models"], cache=warm_cache),
    ]
    if cold:
        found.append(Probe("fwbench models (cold)", [*FWBENCH, "models"]))
    return found


def table(found: Sequence[Probe]) -> str:
    base = statistics.median(found[0].times)
    lines = [
        f"| {'what':<36} | median s | min s | max s | over python -c pass |",
        f"| {'-' * 36} | ---: | ---: | ---: | ---: |",
    ]
    for probe in found:
        med = statistics.median(probe.times)
        lines.append(
            f"| {probe.label:<36} | {med:.3f} | {min(probe.times):.3f} | "
            f"{max(probe.times):.3f} | {med - base:+.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="Times each is run (the median).")
    p.add_argument(
        "--no-cold",
        dest="cold",
        action="store_false",
        help="Leave out `models` cold (it counts the zoo in every framework: a minute or more).",
    )
    a = p.parse_args()
    print(
        f"{datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} CPUs, load before "
        f"{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="fwbench-startup-") as tmp:
        scratch = Path(tmp)
        found = probes(scratch, a.cold)
        # Fill the warm cache: the first `models` counts what the later ones read.
        timed(Probe("fill the cache", [*FWBENCH, "models"], cache=scratch / "warm"), scratch)
        for _ in range(a.repeats):
            for probe in found:
                probe.times.append(timed(probe, scratch))
    print(f"load after {os.getloadavg()[0]:.2f}; median of {a.repeats} each\n")
    print(table(found))


if __name__ == "__main__":
    main()
