"""The answer first: one sentence per comparison, in words, and a line saying when the
machine was busy while it measured. Every report opens with them (HTML, Markdown, the
terminal after a run or a sweep), before the table, the charts and the notes on method.
Pure: the sentences are read from the same rows and verdicts as the tables
(fwbench.report.summary), so they say the same numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence

from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.catalog.models import ZOO, find_model
from fwbench.measure.verdicts import RUNS_NEEDED_CAP, percent
from fwbench.report.summary import WORKLOAD_FIELDS, SummaryRow, batch_text
from fwbench.result import Result
from fwbench.tasks import STEP_TIME, find_task


def answers(rows: Sequence[SummaryRow]) -> list[str]:
    """One sentence per row: which variant is faster, by how much, with what interval;
    the same within the band; or undecided, and what would likely decide it."""
    return [f"{_workload(row)}: {_said(row)}" for row in rows]


def _said(row: SummaryRow) -> str:
    verdict = row.comparison()
    if verdict is None:
        ok = list(row.ok)
        failed = [f"{_variant(v)} {r.status}" for v, r in row.results.items() if v not in row.ok]
        if ok and failed:
            return f"only {_variant(ok[0])} measured ({'; '.join(failed)})."
        if failed:
            return f"nothing measured ({'; '.join(failed)})."
        return f"{_variant(ok[0])} alone, nothing to compare." if ok else "nothing measured."
    faster, slower = _variant(verdict.faster), _variant(verdict.slower)
    interval = (
        f"{percent(row.compared.level)} interval {verdict.interval()}"
        if math.isfinite(verdict.ci_high)
        else "no interval (one run a side)"
    )
    figure = _figure(row)
    if verdict.outcome == "faster":
        text = f"{faster} is {verdict.ratio:.2f}x faster than {slower}{figure}, {interval}."
    elif verdict.outcome == "equivalent":
        text = (
            f"no difference beyond ±{percent(verdict.band)} between {faster} and {slower}"
            f"{figure} ({verdict.ratio:.2f}x, {interval})."
        )
    else:
        text = (
            f"undecided{figure}: {faster} {verdict.ratio:.2f}x against {slower}, {interval}"
            f"{_to_decide(verdict.runs_needed, min(verdict.runs))}."
        )
    if row.different_work:
        text += f" They did not do the same work: {row.different_work_reason}."
    return text


def _to_decide(needed: int | None, made: int) -> str:
    if needed is None:
        return ""
    if needed >= RUNS_NEEDED_CAP:
        return f"; were the difference what it shows, over {RUNS_NEEDED_CAP} runs a side"
    return f"; about {max(needed - made, 1)} more runs a side would likely decide it"


def _figure(row: SummaryRow) -> str:
    """The figure its verdict reads, where it is not the step time."""
    name = row.compared.figure
    task = find_task(str(row.workload[1]))
    if name == STEP_TIME.name or task is None:
        return ""
    return f" in {task.figure(name).label}"


def _workload(row: SummaryRow) -> str:
    """`ResNet-18 inference, batch 1, 64px c1000, CPU`: the workload in words."""
    w = dict(zip(WORKLOAD_FIELDS, row.workload, strict=True))
    spec = find_model(str(w["model"]))
    name = str(w["model"])
    if spec is not None and spec.source == ZOO and spec.description:
        # Its description up to its first qualifier: "ResNet-50 v1.5 (torchvision's)".
        name = spec.description.split(" (")[0].split(",")[0].split(":")[0].strip() or name
    task = find_task(str(w["task"]))
    parts = [f"{name} {task.label if task else w['task']}", f"batch {batch_text(w)}"]
    if w["shape"]:
        parts.append(str(w["shape"]))
    if w["precision"] and w["precision"] != "fp32":
        parts.append(str(w["precision"]))
    parts.append("GPU" if w["device"] == "cuda" else str(w["device"]).upper())
    return ", ".join(parts)


def _variant(variant: str) -> str:
    """`tensorflow/graph` as `TensorFlow (graph)`; `torch/compile/channels_last` as
    `PyTorch (compile, channels_last)`."""
    framework, *rest = variant.split("/")
    info = FRAMEWORKS.get(framework)
    label = info.label if info is not None else framework
    return f"{label} ({', '.join(rest)})" if rest else label


def busy_line(results: Sequence[Result]) -> str | None:
    """Where the load detector saw other programs at work during the runs: how much, in
    how many cases, and what to do; the first reason a comparison stays open."""
    busy_loads: list[float] = []
    cases = 0
    for r in results:
        if r.measurement is None:
            continue
        threshold = r.run_plan.busy_cores
        loads = [
            run.other_cpu_cores
            for run in r.measurement.runs
            if run.other_cpu_cores is not None and run.other_cpu_cores > threshold
        ]
        if loads:
            cases += 1
            busy_loads += loads
    measured = sum(1 for r in results if r.measurement is not None)
    if not cases:
        return None
    cores = {r.environment.get("cpu_logical_cores") for r in results}
    of = f" of {cores.pop()}" if len(cores) == 1 and None not in cores else ""
    mean = sum(busy_loads) / len(busy_loads)
    return (
        f"The machine was busy: other programs used {mean:.1f}{of} cores during {cases} of "
        f"{measured} cases. That, not the frameworks, is the likeliest reason a comparison "
        "stayed open: rerun on a quiet machine or with --require-idle."
    )


def opening(results: Sequence[Result], rows: Sequence[SummaryRow]) -> list[str]:
    """What every report opens with: the busy machine, then one answer per comparison."""
    busy = busy_line(results)
    return [*([busy] if busy else []), *answers(rows)]
