"""`fwbench peak`: the machine's attainable FLOP/s, from a large matmul in each framework."""

from __future__ import annotations

import json as jsonlib
import uuid
from datetime import datetime
from typing import Annotated, Any

import typer

from fwbench.case import DEVICES, MAX_THREADS, default_threads
from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.cli.common import console, out, print_json
from fwbench.cli.options import DEFAULT_DB, DbOption, DeviceOption, JsonOption, ThreadsOption
from fwbench.errors import SpecError
from fwbench.measure.runs import RunPlan
from fwbench.measure.timing import RunTiming

DTYPES = ("fp32", "tf32", "bf16", "fp16")


# Three n x n matrices at 16384 are 3 GiB in fp32.
MAX_SIZE = 16384


def command(
    device: DeviceOption = "cpu",
    dtype: Annotated[
        list[str] | None,
        typer.Option(help="fp32 | tf32 (cuda) | bf16 | fp16 (repeat). [default: fp32, bf16]"),
    ] = None,
    size: Annotated[int, typer.Option(help="Matrix side n (n x n by n x n).")] = 2048,
    threads: ThreadsOption = 0,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Measure peak FLOP/s per framework and dtype; results then show their share of it."""
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.environment import host_environment, host_key
    from fwbench.launch import outcome, process
    from fwbench.launch.protocol import PeakRequest
    from fwbench.report.terminal import peak_table
    from fwbench.store.db import ResultStore

    dtypes = tuple(dtype or ["fp32", "bf16"])
    bad = [d for d in (*dtypes,) if d not in DTYPES]
    if bad:
        raise SpecError(f"dtype: invalid value {bad[0]!r}; valid choices: {', '.join(DTYPES)}")
    if device not in DEVICES:
        raise SpecError(f"device: invalid value {device!r}; valid choices: {', '.join(DEVICES)}")
    if device != "cuda" and "tf32" in dtypes:
        raise SpecError("dtype: tf32 is a tensor-core mode of NVIDIA GPUs (--device cuda only)")
    if not 16 <= size <= MAX_SIZE:
        raise SpecError(f"--size: {size} is outside 16 to {MAX_SIZE} (512 or more measures a peak)")
    if not 0 <= threads <= MAX_THREADS:
        raise SpecError(f"--threads: {threads} is outside 1 to {MAX_THREADS} (0: physical cores)")
    threads = threads or default_threads()
    host = host_environment()
    # One run in the worker's own process: its blocks stop on the default precision
    # target, or after 3 s.
    timing = RunTiming(min_samples=10, run_time_s=3.0)
    stop = RunPlan(max_time_s=3.0).run_stop(timing)
    rows: list[dict[str, Any]] = []
    with ResultStore(db) as store:
        for name, info in FRAMEWORKS.items():
            if not info.installed() or not info.can_measure_peak.available:
                continue  # e.g. a Keras backend's matmul is its backend framework's
            with console.status(f"{info.label}: {size}x{size} matmul, {', '.join(dtypes)}"):
                request = PeakRequest(
                    framework=name,
                    device=device,
                    threads=threads,
                    dtypes=dtypes,
                    n=size,
                    timing=timing,
                    stop=stop,
                )
                report = process.run_peak(request, timeout_s=600)
            if isinstance(report, outcome.WorkerFailure):
                rows.append({"framework": name, "dtype": "*", "error": report.error})
                continue
            for dt, found in report.results.items():
                row = {
                    "framework": name,
                    "device": device,
                    "dtype": dt,
                    "threads": threads,
                    **found,
                }
                rows.append(row)
                if "flops_per_s" in found:
                    store.add_peak(
                        {
                            "peak_id": uuid.uuid4().hex,
                            "measured_at": datetime.now(),
                            "host_key": host_key(host),
                            "framework": name,
                            "device": device,
                            "dtype": dt,
                            "threads": threads,
                            "n": size,
                            "flops_per_s": found["flops_per_s"],
                            "median_s": found["median_s"],
                            "ci_low_s": found["ci_low_s"],
                            "ci_high_s": found["ci_high_s"],
                            "environment": jsonlib.dumps(report.environment),
                        }
                    )
    if json:
        print_json(rows)
        return
    out.print(peak_table(rows, size, device, threads))
    console.print(
        f"stored in {db}: later results on this host show their share of the best peak "
        "in their own precision"
    )
