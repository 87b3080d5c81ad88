"""Import at scale: `fwbench import` of N small records (one run each, five samples),
timed end to end in a fresh process, with that process's peak memory (max RSS).

Prints the records, the JSON's size, the wall time, the rate and the peak RSS.

    PYTHONPATH=src .venv/bin/python benchmarks/import_scale.py --records 100000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from fwbench.case import Case
from fwbench.result import Measurement, Result, Run, StepTime

START: dict[str, Any] = {
    "steps_per_block": 1,
    "build_s": 0.1,
    "first_step_s": 0.2,
    "warmup_steps": 3,
    "warmup_s": 0.3,
    "warmup_stop": "stable",
    "stop_reason": "precision",
    "sync_overhead_s": 0.0,
}


def records(n: int) -> list[dict[str, Any]]:
    """n valid records: 64 cases (batch 1 to 64) recorded over and over, 100 per run."""
    cases = [
        Case.build(framework="torch", model="resnet18", batch_size=b, threads=2)
        for b in range(1, 65)
    ]
    samples = (0.099, 0.1, 0.1, 0.101, 0.1)
    run = Run(
        index=0,
        samples=samples,
        median_s=0.1,
        ci_low_s=0.099,
        ci_high_s=0.101,
        launcher="spawn",
        **START,
    )
    measurement = Measurement(
        step_time_s=StepTime(median=0.1, ci_low=0.099, ci_high=0.101),
        samples=samples,
        runs=(run,),
        **START,
    )
    now = datetime.now()
    base = [
        Result(
            result_id="x",
            invocation_id="x",
            recorded_at=now,
            case=c,
            status="ok",
            measurement=measurement,
        ).to_record()
        for c in cases
    ]
    return [
        {**base[i % len(base)], "result_id": f"r{i:09d}", "invocation_id": f"run{i // 100:07d}"}
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "export.json"
        export.write_text(json.dumps(records(args.records)))
        db = Path(tmp) / "r.duckdb"
        command = [sys.executable, "-m", "fwbench", "import", str(export), "--db", str(db)]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"import failed ({done.returncode}): {done.stdout}{done.stderr}")
        # ru_maxrss of children: the largest RSS any child reached, in KiB on Linux.
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"records      {args.records}")
        print(f"export       {export.stat().st_size / 2**20:.1f} MiB of JSON")
        print(f"import       {wall:.1f} s ({args.records / wall:,.0f} records/s)")
        print(f"peak RSS     {peak_mib:.0f} MiB (the import process)")
        print(f"database     {db.stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
