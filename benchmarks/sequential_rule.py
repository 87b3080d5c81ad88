"""The sequential rule on synthetic runs: how often identical variants are called
different, and how often a real difference is decided, when the verdict is read after
every round (from 3 to 10 runs a side) and the comparison stops once decided.

The runs come from the generator of tests/unit/test_sequential.py (process offsets,
noise shared within a round, drift, runs of a side correlated in time, one-sided
slowdowns), so the test and these figures speak of the same data. Prints, for the
sequential plan and for a fixed 95% interval read every round (what rule 5a forbids):
the A/A share called "faster", and per ratio the share decided the right way and the
runs a side it took.

    .venv/bin/python benchmarks/sequential_rule.py [--seeds 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.unit.test_sequential import interleaved_runs, until_decided


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--first", type=int, default=3)
    parser.add_argument("--last", type=int, default=10)
    parser.add_argument("--paired", action="store_true", help="Also read the runs paired by round.")
    args = parser.parse_args()
    print(f"runs {args.first}-{args.last} a side, {args.seeds} synthetic comparisons each")
    rules = [(True, False), (False, False)] + ([(True, True)] if args.paired else [])
    for sequential, paired in rules:
        rule = "sequential plan" if sequential else "fixed 95% read every round"
        rule += ", paired" if paired else ""
        for ratio in (1.0, 1.05, 1.10, 1.25):
            found = [
                until_decided(interleaved_runs(s, args.last, ratio), args.first, args.last,
                              sequential, paired)
                for s in range(args.seeds)
            ]  # fmt: skip
            if ratio == 1.0:
                called = sum(outcome == "faster" for outcome, _, _ in found) / len(found)
                print(f"{rule:28} A/A: called different {called:.1%}")
                continue
            right = [n for outcome, faster, n in found if outcome == "faster" and faster == "b"]
            wrong = sum(outcome == "faster" and faster == "a" for outcome, faster, _ in found)
            mean = f"{statistics.mean(right):.1f}" if right else "-"
            print(
                f"{rule:28} {ratio:.2f}x: decided right {len(right) / len(found):.0%} "
                f"(mean {mean} runs a side), wrong way {wrong}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
