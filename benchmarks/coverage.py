"""Does a case's 95% interval cover what a fresh rerun finds?

Runs one case N times independently (each time its own runs, its own fork server), then
prints, over all ordered pairs (i, j), the share where run i's estimate lies inside run
j's 95% interval. With honest intervals of equal width that share is about 83%; an
interval that ignores the variation between processes scores far lower: "before" scores
each measurement's first run alone, with its within-process interval, as fwbench did
before runs.

    cd benchmarks && ../.venv/bin/python coverage.py [--repeats 10] [--framework torch]
"""

from __future__ import annotations

import argparse
import itertools
import time

from common import measure_group

from fwbench.case import Case
from fwbench.measure.timing import TimingConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--runs", type=int, default=3, help="Runs per measurement.")
    p.add_argument("--framework", default="torch")
    p.add_argument("--mode", default="eager")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--input-size", type=int, default=64)
    a = p.parse_args()
    case = Case.build(
        framework=a.framework, mode=a.mode, model=a.model, task="infer", batch_size=8,
        input_size=a.input_size, threads=2,
    )  # fmt: skip
    timing = TimingConfig(min_runs=a.runs, max_runs=a.runs, run_time_s=0.5)
    found, first = [], []
    started = time.monotonic()
    for i in range(a.repeats):
        (m,) = measure_group([case], timing)
        st = m.step_time_s
        found.append((st.median, st.ci_low, st.ci_high))
        r0 = m.runs[0]
        first.append((r0.median_s, r0.ci_low_s, r0.ci_high_s))
        print(
            f"{i + 1:>2}: {st.median * 1e3:.3f} ms (95% CI {st.ci_low * 1e3:.3f}-"
            f"{st.ci_high * 1e3:.3f}, ±{(st.ci_high - st.ci_low) / 2 / st.median:.1%}) over "
            f"{len(m.runs)} runs",
            flush=True,
        )
    pairs = list(itertools.permutations(range(a.repeats), 2))
    inside = sum(found[j][1] <= found[i][0] <= found[j][2] for i, j in pairs)
    old = sum(first[j][1] <= first[i][0] <= first[j][2] for i, j in pairs)
    print(
        f"{case.label()}: {inside} of {len(pairs)} pairs ({inside / len(pairs):.0%}) have one "
        f"estimate inside the other's 95% CI (target >= 80%, ideal 83%); {a.runs} runs each; "
        f"before (one process, within-process CI): {old} of {len(pairs)} "
        f"({old / len(pairs):.0%}); {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
