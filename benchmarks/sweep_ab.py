"""Two sweep configurations alternated (A B A B ...): wall time and verdicts decided.

Each arm is a preset name or a sweep file, run through the CLI into a fresh results
file; after each run the verdict table's rows are read back as a user sees them and
counted: faster, equivalent, inconclusive. Alternating puts both arms in the same hours
of the machine, so a slow hour hits both.

    cd benchmarks && ../.venv/bin/python sweep_ab.py quick my-quick.yaml --rounds 2

With --code, each arm runs its own fwbench source (a worktree's src/ at another commit):
the same preset before and after a change. Each case's median is then compared across
arms, by case key, beside the same comparison between two runs of one arm (the noise a
rerun alone gives); a refactor should leave the first within the second.

    git worktree add /tmp/before <commit>
    cd benchmarks && ../.venv/bin/python sweep_ab.py quick quick --code /tmp/before/src ../src
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from fwbench.measure.verdicts import ESTIMATORS, comparison_between, widest
from fwbench.report.summary import summarise
from fwbench.store.db import ResultStore


def run(arm: str, db: Path, code: str | None = None) -> float:
    source = ["--preset", arm] if not arm.endswith((".yaml", ".yml")) else [arm]
    env = {**os.environ, "PYTHONPATH": str(Path(code).resolve())} if code else None
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "fwbench.cli.app", "sweep", *source, "--db", str(db)],
        check=True,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    return time.monotonic() - started


def medians(db: Path) -> dict[str, float]:
    """Each measured case's step time (its runs' geometric mean median), by case key."""
    with ResultStore(db, read_only=True) as store:
        return {
            r.case_key: r.measurement.step_time_s.median
            for r in store.results()
            if r.status == "ok" and r.measurement is not None
        }


def ratios(a: dict[str, float], b: dict[str, float]) -> str:
    """b / a over the cases both measured: geometric mean, and the range."""
    common = sorted(set(a) & set(b))
    if not common:
        return "no case in common"
    logs = [math.log(b[k] / a[k]) for k in common]
    return (
        f"{len(common)} cases, geometric mean {math.exp(statistics.fmean(logs)):.3f}, "
        f"median |log| {statistics.median(abs(x) for x in logs):.3f}, "
        f"range {math.exp(min(logs)):.3f}-{math.exp(max(logs)):.3f}"
    )


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
        ok = {k: r.measurement for k, r in row.ok.items() if r.measurement}
        for name in ESTIMATORS:
            other = comparison_between(ok, looks=looks, estimator=name).verdict()
            by_estimator[name] += other is not None and other.outcome != "inconclusive"
    return found, runs, by_estimator


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", help="A preset name or a sweep file.")
    p.add_argument("b", help="A preset name or a sweep file.")
    p.add_argument("--rounds", type=int, default=2, help="Runs of each arm.")
    p.add_argument(
        "--code",
        nargs=2,
        metavar=("SRC_A", "SRC_B"),
        help="Each arm's fwbench source (a worktree's src/): before and after a change.",
    )
    a = p.parse_args()
    code = dict(zip("ab", a.code or (None, None), strict=True))
    figures: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            sides = ("a", "b") if r % 2 == 0 else ("b", "a")  # ABBA
            for side in sides:
                arm = a.a if side == "a" else a.b
                db = Path(tmp) / f"{r}-{side}-{Path(arm).stem}.duckdb"
                wall = run(arm, db, code[side])
                figures[side].append(medians(db))
                found, runs, by_estimator = verdicts(db)
                decided = found["faster"] + found["equivalent"]
                print(
                    f"round {r + 1} {side.upper()} {arm}: {wall / 60:.2f} min; {decided} of "
                    f"{sum(found.values())} verdicts decided ({found['faster']} faster, "
                    f"{found['equivalent']} equivalent, {found['inconclusive']} inconclusive); "
                    f"runs a side {min(runs)}-{max(runs)}; the same runs read by each "
                    f"estimator: {', '.join(f'{k} {n}' for k, n in by_estimator.items())}",
                    flush=True,
                )
    # Each case's step time, B against A in the same round, beside each arm against its
    # own next round: the first within the second is "no change beyond a rerun's noise".
    for r in range(a.rounds):
        print(f"round {r + 1} medians B/A: {ratios(figures['a'][r], figures['b'][r])}")
    for side in "ab":
        for r in range(1, a.rounds):
            print(
                f"{side.upper()} round {r + 1}/round {r} medians: "
                f"{ratios(figures[side][r - 1], figures[side][r])}"
            )


if __name__ == "__main__":
    main()
