"""One variant against every other, workload by workload, from a results database.

A table's verdict is its fastest variant against the runner-up; a question such as
"is LiteRT faster than ONNX Runtime here?" needs the pair named. This reads the stored
runs of each workload and asks fwbench's comparison (fwbench.measure.verdicts.comparison_of,
the same reading the tables use: runs paired by round where they were measured together,
each result's estimator and band, its sequential plan) for VARIANT against each other variant,
with the numerics and execution marks the tables add. Usage:

    cd benchmarks && ../.venv/bin/python pair_verdicts.py litert.duckdb litert/fp32
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fwbench.case import execution_note
from fwbench.measure.verdicts import comparison_of
from fwbench.report.summary import summarise
from fwbench.store.db import ResultStore


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("variant", help="e.g. litert/fp32")
    args = parser.parse_args()
    with ResultStore(args.db) as store:
        results = store.results()
    _, rows = summarise(results)
    for row in rows:
        ok = row.ok
        if args.variant not in ok:
            continue
        others = [v for v in ok if v != args.variant]
        found = comparison_of(ok, "given", [(args.variant, v) for v in others])
        model, task, batch = row.workload[:3]
        for verdict in found.verdicts():
            a, b = ok[verdict.faster].case, ok[verdict.slower].case
            other = b.variant if a.variant == args.variant else a.variant
            print(
                f"{model} {task} b{batch}, {args.variant} vs {other}: "
                f"{verdict.text()}{execution_note(a, b)}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
