"""Does a case's 95% interval cover what a fresh rerun finds?

Runs one case N times independently (each time its own runs, its own fork server), then
prints, over all ordered pairs (i, j), the share where run i's estimate lies inside run
j's 95% interval. With honest intervals of equal width that share is about 83%; an
interval that ignores the variation between processes scores far lower: "before" scores
each measurement's first run alone, with its within-process interval, as fwbench did
before runs.

    cd benchmarks && ../.venv/bin/python coverage.py [--repeats 10] [--framework torch]

With --sweep, each repeat is a small sweep instead (ResNet-18 and MobileNetV2 inference
at batch 1 and 8 in PyTorch and TensorFlow: 8 cases, 4 workloads), alternately run one
workload at a time and with its workloads taking turns round by round (LocalExecutor's
spread), and the share is pooled over the cases, per arm; and the same for each
workload's PyTorch/TensorFlow ratio, with the interval its verdict reads (paired by
round):

    cd benchmarks && ../.venv/bin/python coverage.py --sweep [--repeats 6]
"""

from __future__ import annotations

import argparse
import itertools
import time

from common import measure_group

from fwbench.case import Case
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import comparison_between


def sweep_cases(input_size: int) -> list[list[Case]]:
    return [
        [
            Case.build(
                framework=fw, mode="eager" if fw == "torch" else "graph", model=model,
                task="infer", batch_size=batch, input_size=input_size, threads=2,
            )
            for fw in ("torch", "tensorflow")
        ]
        for model in ("resnet18", "mobilenet_v2")
        for batch in (1, 8)
    ]  # fmt: skip


def covered(sweeps: list[list[tuple[float, float, float]]]) -> tuple[int, int]:
    """Over every ordered pair of sweeps and every item, how often the first's estimate
    lies inside the second's interval (each item: estimate, low, high)."""
    inside = total = 0
    for c in range(len(sweeps[0])):
        for i, j in itertools.permutations(range(len(sweeps)), 2):
            total += 1
            inside += sweeps[j][c][1] <= sweeps[i][c][0] <= sweeps[j][c][2]
    return inside, total


def sweep_arms(repeats: int, runs: int, input_size: int) -> None:
    from fwbench.launch import local
    from fwbench.launch.protocol import GroupRequest
    from fwbench.launch.records import measurement_of

    groups = sweep_cases(input_size)
    timing = TimingConfig(min_runs=runs, max_runs=runs, run_time_s=0.5)
    requests = [[GroupRequest.for_case(c, timing, count_flops=False) for c in g] for g in groups]
    arms = {1: "one workload at a time", len(groups): f"{len(groups)} workloads take turns"}
    found: dict[int, list[list[tuple[float, float, float]]]] = {s: [] for s in arms}
    ratios: dict[int, list[list[tuple[float, float, float]]]] = {s: [] for s in arms}
    started = time.monotonic()
    for i in range(repeats * len(arms)):
        spread = list(arms)[i % len(arms)]
        t0 = time.monotonic()
        by_index = {}
        for done in local.LocalExecutor(spread=spread).run(requests, 600):
            by_index[done.index] = done.outcomes
        row, ratio_row = [], []
        for index in range(len(groups)):
            sides = {}
            for case, outcome in zip(groups[index], by_index[index], strict=True):
                m = measurement_of(outcome.runs, outcome.stop_reason or "", outcome.group_id)
                st = m.step_time_s
                row.append((st.median, st.ci_low, st.ci_high))
                sides[case.framework] = m
            # The verdict's ratio and interval, as fwbench reads it (paired by round).
            r = comparison_between(
                sides, "given", [("torch", "tensorflow")], estimator=timing.reading.estimator
            ).ratios()[0]
            ratio_row.append((r.value, r.ci_low, r.ci_high))
        found[spread].append(row)
        ratios[spread].append(ratio_row)
        print(f"sweep {i + 1} ({arms[spread]}): {time.monotonic() - t0:.0f} s", flush=True)
    for spread, label in arms.items():
        inside, total = covered(found[spread])
        print(
            f"{label}: {inside} of {total} pairs ({inside / total:.0%}) have one estimate "
            f"inside the other's 95% CI; {len(found[spread])} sweeps of "
            f"{len(found[spread][0])} cases, {runs} runs each"
        )
        inside, total = covered(ratios[spread])
        print(
            f"{label}, verdicts: {inside} of {total} pairs ({inside / total:.0%}) have one "
            "sweep's PyTorch/TensorFlow ratio inside another's interval, read as verdicts "
            "read it (paired by round)"
        )
    print(f"{time.monotonic() - started:.0f} s in all")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--sweep", action="store_true", help="Repeat a small sweep, two arms.")
    p.add_argument("--runs", type=int, default=3, help="Runs per measurement.")
    p.add_argument("--framework", default="torch")
    p.add_argument("--mode", default="eager")
    p.add_argument("--model", default="resnet18")
    p.add_argument("--input-size", type=int, default=64)
    a = p.parse_args()
    if a.sweep:
        sweep_arms(a.repeats, a.runs, a.input_size)
        return
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
