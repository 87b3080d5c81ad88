"""Run-to-run spread: the reported median of one case across 5 fresh runs.

Each run is a new worker process with fwbench's defaults; prints each run's median and
95% CI, and the spread of the medians ((max - min) / median and the coefficient of
variation). A precise tool gives medians whose spread is close to their CI widths.

    .venv/bin/python benchmarks/run_to_run.py
"""

from __future__ import annotations

import argparse
import statistics

from common import half_width, run_one

from fwbench.case import Case
from fwbench.measure.settings import TimingConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--framework", default="torch")
    p.add_argument("--mode", default="eager")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--task", default="infer")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--input-size", type=int, default=64)
    a = p.parse_args()
    case = Case.build(
        framework=a.framework,
        model=a.model,
        task=a.task,
        batch_size=a.batch_size,
        input_size=a.input_size,
        mode=a.mode,
        threads=2,
    )
    medians = []
    for i in range(a.runs):
        r = run_one(case, TimingConfig())
        assert r.measurement is not None
        st = r.measurement.step_time_s
        medians.append(st.median)
        print(
            f"run {i + 1}: median {st.median * 1e3:.3f} ms, 95% CI {st.ci_low * 1e3:.3f}-"
            f"{st.ci_high * 1e3:.3f} (+-{half_width(r):.2%}), {len(r.measurement.samples)} "
            f"samples, stopped by {r.measurement.stop_reason}",
            flush=True,
        )
    mid = statistics.median(medians)
    print(
        f"{case.label()}: median of medians {mid * 1e3:.3f} ms, range "
        f"{(max(medians) - min(medians)) / mid:.2%} of it, CV "
        f"{statistics.stdev(medians) / statistics.mean(medians):.2%}"
    )


if __name__ == "__main__":
    main()
