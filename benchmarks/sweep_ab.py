"""Two sweep configurations alternated (A B A B ...): wall time and verdicts decided.

Each arm is a preset name or a sweep file, run through the CLI into a fresh results
file; after each run the verdict table's rows are read back as a user sees them and
counted: faster, equivalent, inconclusive. Alternating puts both arms in the same hours
of the machine, so a slow hour hits both.

    cd benchmarks && ../.venv/bin/python sweep_ab.py quick my-quick.yaml --rounds 2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from fwbench.measure.comparison import ESTIMATORS, Comparison, widest
from fwbench.report.summary import summarise
from fwbench.store.db import ResultStore


def run(arm: str, db: Path) -> float:
    source = ["--preset", arm] if not arm.endswith((".yaml", ".yml")) else [arm]
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "fwbench.cli.app", "sweep", *source, "--db", str(db)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - started


def verdicts(db: Path) -> tuple[Counter[str], list[int], dict[str, int]]:
    """The verdicts as the table shows them, and how many each estimator would decide
    on the same runs (read under the same plan)."""
    with ResultStore(db, read_only=True) as store:
        _, rows = summarise(store.results())
    found: Counter[str] = Counter()
    runs = []
    by_estimator = dict.fromkeys(ESTIMATORS, 0)
    for row in rows:
        v = row.comparison()
        if v is None:
            continue
        found[v.outcome] += 1
        runs.append(min(v.runs))
        looks = widest(r.looks for r in row.ok.values())
        for name in ESTIMATORS:
            values = {k: r.measurement.per_run(name) for k, r in row.ok.items() if r.measurement}
            other = Comparison.of(values, looks=looks, estimator=name).verdict()
            by_estimator[name] += other is not None and other.outcome != "inconclusive"
    return found, runs, by_estimator


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", help="A preset name or a sweep file.")
    p.add_argument("b", help="A preset name or a sweep file.")
    p.add_argument("--rounds", type=int, default=2, help="Runs of each arm.")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            arms = (a.a, a.b) if r % 2 == 0 else (a.b, a.a)  # ABBA
            for arm in arms:
                db = Path(tmp) / f"{r}-{Path(arm).stem}.duckdb"
                wall = run(arm, db)
                found, runs, by_estimator = verdicts(db)
                decided = found["faster"] + found["equivalent"]
                print(
                    f"round {r + 1} {arm}: {wall / 60:.2f} min; {decided} of "
                    f"{sum(found.values())} verdicts decided ({found['faster']} faster, "
                    f"{found['equivalent']} equivalent, {found['inconclusive']} inconclusive); "
                    f"runs a side {min(runs)}-{max(runs)}; the same runs read by each "
                    f"estimator: {', '.join(f'{k} {n}' for k, n in by_estimator.items())}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
