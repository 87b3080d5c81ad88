"""Where a sweep's wall time goes: timed blocks against everything else.

Runs a preset (default: quick) into a fresh results file, then prints its wall time, the
seconds of timed blocks over every run of every case, the share outside them (process
start, imports, build, first step, warmup, parameter and FLOP counting), and how many
workers were forked from a fork server or spawned.

    cd benchmarks && ../.venv/bin/python sweep_cost.py [--preset quick] [--db out.duckdb]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import steady_seconds

from fwbench.store.db import ResultStore


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="quick")
    p.add_argument("--db", type=Path, help="Keep the results here (default: a temp file).")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = a.db or Path(tmp) / "sweep.duckdb"
        started = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "fwbench.cli.app",
                "sweep",
                "--preset",
                a.preset,
                "--db",
                str(db),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wall = time.monotonic() - started
        with ResultStore(db, read_only=True) as store:
            results = store.results()
    ok = [r for r in results if r.measurement is not None]
    steady = sum(steady_seconds(r) for r in ok)
    launchers = Counter(
        run.launcher.split(" ")[0] for r in ok for run in r.measurement.runs if r.measurement
    )
    runs = sum(launchers.values())
    print(
        f"preset {a.preset}: {len(results)} cases ({len(ok)} ok), {runs} runs "
        f"({', '.join(f'{n} {k}' for k, n in launchers.items())}) in {wall:.0f} s; timed blocks "
        f"{steady:.0f} s, so {1 - steady / wall:.0%} of the wall time is outside the steady state"
    )


if __name__ == "__main__":
    main()
