"""run_cases and serve_points: validated cases (or serving points) in, stored Results
(a serving point's with its `serving` part) out. The CLI and tests call these.

Each run is a worker process of its own; whatever happens to a case becomes its Result,
stored in one transaction as its runs come in (rewritten in place after each round), so
a killed command keeps what it measured and `resume` picks up the rest. Both go through
one path: groups of requests, an executor that runs them in rounds, and the same resume
rule. Where the workers run is the executor's business: this machine (the default) or a
Ray cluster (step times only).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from fwbench.case import Case
from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.environment import host_environment, host_key
from fwbench.errors import ExecutorError, SpecError, positive_seconds
from fwbench.launch import DEFAULT_TIMEOUT_S, counting, local, outputs, records
from fwbench.launch.executor import Executor, GroupDone, OnStart, OnStatus
from fwbench.launch.outcome import CaseOutcome, PointOutcome
from fwbench.launch.protocol import GroupRequest
from fwbench.launch.serving import Point, build_result, request_of
from fwbench.measure.settings import TimingConfig
from fwbench.result import Result
from fwbench.scenario.spec import point_key
from fwbench.store.db import ResultStore

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class RunOptions:
    timing: TimingConfig = field(default_factory=TimingConfig)
    timeout_s: float = DEFAULT_TIMEOUT_S
    resume: bool = False
    # With resume: also run again the cases whose stored result is a failure (error,
    # timeout, oom); without it they count as done.
    retry_failed: bool = False
    # Alternate the variants (framework / mode) of each workload: runs in time (ABBA),
    # workers block by block.
    interleave: bool = True
    # Which cases alternate: by default the variants of one workload (same work);
    # `tune` confirms a best configuration against the default across precisions.
    group_by: Callable[[Case], Any] | None = None
    count_flops: bool = True
    # `fwbench explain`: profile steps after the measurement; traces go to trace_dir.
    profile_steps: int = 0
    trace_dir: Path | None = None
    category_rules: tuple[tuple[str, str], ...] = ()
    executor: Executor = field(default_factory=local.LocalExecutor)

    def __post_init__(self) -> None:
        positive_seconds(self.timeout_s, "timeout")


def executor_named(
    name: str, address: str | None = None, spread: int = 1, budget_s: float | None = None
) -> Executor:
    """The executor a user names: `local` (this machine; `spread` workloads take turns
    run by run; `budget_s` of wall-clock time shared among the workloads) or `ray` (a
    cluster at `address`, "auto" for the one this machine belongs to; None starts Ray on
    this machine)."""
    if name not in EXECUTORS:
        raise SpecError(f"executor: unknown {name!r}; valid choices: {', '.join(EXECUTORS)}")
    if spread < 1:
        raise SpecError(f"--spread: must be 1 or more (got {spread})")
    if name == "local":
        if address is not None:
            raise SpecError("--address is for --executor ray; the local executor needs none")
        return local.LocalExecutor(spread, budget_s)
    if spread != 1:
        raise SpecError("--spread: applies to the local executor (Ray runs groups at once)")
    if budget_s is not None:
        raise SpecError(
            "--budget: applies to the local executor (Ray runs groups at once, so there is "
            "no order in which to share the time)"
        )
    # Imported here: the module is light, but only a Ray run needs it.
    from fwbench.launch import ray

    if not ray.ray_available():
        raise ExecutorError(f"--executor ray needs Ray: {ray.INSTALL_HINT}")
    return ray.RayExecutor(address=address)


class _Labelled(Protocol):
    def label(self) -> str: ...


_Item = TypeVar("_Item", bound=_Labelled)


def groups(
    items: Sequence[_Item], interleave: bool, key: Callable[[_Item], Any]
) -> list[list[_Item]]:
    """Cases (or points) measured together: alone, or every variant of one workload in
    alternation."""
    if not interleave:
        return [[c] for c in items]
    by_workload: dict[Any, list[_Item]] = {}
    for item in items:
        by_workload.setdefault(key(item), []).append(item)
    return list(by_workload.values())


def _finished(
    batches: Sequence[Sequence[_Item]],
    requests: Sequence[Sequence[GroupRequest]],
    options: RunOptions,
    on_start: OnStart | None,
    on_status: OnStatus | None,
    noun: str,
) -> Iterator[tuple[GroupDone, Sequence[_Item]]]:
    """Each group's outcomes from the executor (so far, and final) with its items; an
    ExecutorError after the rest names the groups it lost, which are not stored."""
    lost: list[str] = []
    for finished in options.executor.run(requests, options.timeout_s, on_start, on_status):
        group = batches[finished.index]
        if finished.lost is not None:
            lost += [f"{item.label()}: {finished.lost}" for item in group]
            continue
        yield finished, group
    if lost:
        total = sum(len(b) for b in batches)
        raise ExecutorError(
            f"{len(lost)} of {total} {noun} were not recorded (first: {lost[0]}); "
            f"run the same command with --resume to run them again"
        )


def _request(case: Case, options: RunOptions) -> GroupRequest:
    trace = None
    if options.profile_steps and options.trace_dir is not None:
        options.trace_dir.mkdir(parents=True, exist_ok=True)
        name = f"{case.label().replace(' ', '_').replace('/', '-')}-{case.key()}"
        suffix = FRAMEWORKS[case.framework].trace_suffix
        trace = str(options.trace_dir / f"{name}{suffix}")
    return GroupRequest.for_case(
        case,
        options.timing,
        count_flops=options.count_flops and FRAMEWORKS[case.framework].counts_flops.available,
        profile_steps=options.profile_steps,
        trace_path=trace,
        category_rules=options.category_rules,
    )


# Statuses a resume with retry_failed measures again.
_FAILED = ("error", "timeout", "oom")


def _done(options: RunOptions, status: str, unfinished: bool) -> bool:
    """The resume rule, for cases and serving points alike: a stored record counts as
    done unless its command ended in the middle of its runs, or (with retry_failed) it
    is a failure."""
    return not unfinished and not (options.retry_failed and status in _FAILED)


def done_keys(store: ResultStore, options: RunOptions) -> set[str]:
    """Cases a resumed run skips, by `_done`'s rule."""
    if not options.resume:
        return set()
    return {
        r.case_key
        for r in store.latest(store.recorded_keys())
        if _done(
            options, r.status, bool(r.measurement and r.measurement.stop_reason == "unfinished")
        )
    }


def resumed_ids(store: ResultStore, options: RunOptions) -> dict[str, str]:
    """The record each case a resumed run measures again is stored under (an unfinished
    or, with retry_failed, a failed one): the new record replaces it, so every view has
    one current row per case, not the new one beside a stale twin."""
    if not options.resume:
        return {}
    return {
        r.case_key: r.result_id
        for r in store.latest(store.recorded_keys())
        if not _done(
            options, r.status, bool(r.measurement and r.measurement.stop_reason == "unfinished")
        )
    }


def run_cases(
    cases: Sequence[Case],
    store: ResultStore,
    invocation_id: str,
    options: RunOptions | None = None,
    on_start: Callable[[Case], None] | None = None,
    on_status: Callable[[str], None] | None = None,
    host: dict[str, Any] | None = None,
) -> Iterator[Result]:
    """Run each case in a fresh worker (with `options.interleave`, every variant of a
    workload in alternation), store its result, and yield it, in the order the executor
    finishes them (the local executor: the order of `cases`).

    With `options.resume`, cases already in the store are skipped (not yielded). Cases
    the executor lost (a Ray node lost more often than its retries allow) are not
    stored: an ExecutorError after the rest names them, and `resume` runs them again.
    """
    options = options or RunOptions()
    host = host if host is not None else host_environment()
    done = done_keys(store, options)
    todo = [c for c in cases if c.key() not in done]
    if not todo:
        return
    again = resumed_ids(store, options)
    batches = groups(todo, options.interleave, options.group_by or Case.workload_key)
    with options.executor.connect():
        requests = [[_request(c, options) for c in group] for group in batches]
        options.executor.check(requests)
        counts = counting.parameter_counts(
            store, counting.parity_requests(cases, todo), options.timeout_s, on_status
        )
        # One record per case, rewritten as its runs come in: (group, place) -> result_id.
        ids: dict[tuple[int, int], str] = {}
        found = _finished(batches, requests, options, on_start, on_status, "cases")
        for finished, group in found:
            # On a cluster, each result carries the node that measured it.
            where = finished.host if finished.host is not None else host
            made = []
            for place, (case, outcome) in enumerate(zip(group, finished.outcomes, strict=True)):
                assert isinstance(outcome, CaseOutcome)
                # Mixed precision runs on the tensor cores / AMX: its share is of that peak.
                peak_dtype = case.precision or "fp32"
                peak = store.best_peak(host_key(where), case.device, peak_dtype, case.threads)
                result_id = ids.setdefault(
                    (finished.index, place), again.get(case.key()) or uuid.uuid4().hex
                )
                result = records.result_from_outcome(
                    case,
                    invocation_id,
                    outcome,
                    counts,
                    options.timing,
                    where,
                    (peak, peak_dtype),
                    result_id,
                )
                made.append(result)
            whole = {c.variant: outputs.read(c) for c in group if outputs.keeps_outputs(c)}
            for result in records.check_outputs(made, whole):
                store.add(result)
                if finished.final:
                    yield result
            if finished.final:
                for case in group:
                    outputs.discard(case)


def done_points(store: ResultStore, options: RunOptions) -> set[str]:
    """Serving points a resumed command skips, by `_done`'s rule (as cases)."""
    if not options.resume:
        return set()
    latest = {r.point_key: r for r in store.serving()}  # oldest first: the newest wins
    return {k for k, r in latest.items() if _done(options, r.status, r.served.unfinished)}


def _point_workload(point: Point) -> Any:
    return (point.case.workload_key(), point.spec)


def serve_points(
    points: Sequence[Point],
    store: ResultStore,
    invocation_id: str,
    runs: int,
    log_root: Path,
    options: RunOptions | None = None,
    on_start: Callable[[Case], None] | None = None,
    on_status: Callable[[str], None] | None = None,
) -> Iterator[Result]:
    """Serve each point in `runs` runs (the frameworks and modes of one workload taking
    turns, with `options.interleave`), by the same executor and rounds as run_cases; store
    its record as its runs come in, and yield it once its runs are done. LoadGen's logs
    go to `log_root/<result id>/run<k>/`.

    With `options.resume`, points already in the store are skipped (not yielded), by
    the rule of run_cases."""
    if runs < 1:
        raise SpecError(f"runs: must be 1 or more (got {runs})")
    options = options or RunOptions()
    done = done_points(store, options)
    todo = [p for p in points if point_key(p.case, p.spec) not in done]
    if not todo:
        return
    batches = groups(todo, options.interleave, _point_workload)
    # A point measured again replaces its unfinished (or failed) record, as cases do.
    again = {
        k: r.result_id
        for k, r in {r.point_key: r for r in store.serving()}.items()
        if options.resume and not _done(options, r.status, r.served.unfinished)
    }
    ids = [
        [again.get(point_key(p.case, p.spec)) or uuid.uuid4().hex for p in group]
        for group in batches
    ]
    requests: list[list[GroupRequest]] = [
        [request_of(p, options.timing, runs, log_root / i) for p, i in zip(g, gi, strict=True)]
        for g, gi in zip(batches, ids, strict=True)
    ]
    with options.executor.connect():
        options.executor.check(requests)
        found = _finished(batches, requests, options, on_start, on_status, "serving points")
        for finished, group in found:
            for place, (point, outcome) in enumerate(zip(group, finished.outcomes, strict=True)):
                assert isinstance(outcome, PointOutcome)
                result_id = ids[finished.index][place]
                log_dir = log_root / result_id
                result = build_result(
                    point,
                    outcome.runs,
                    outcome.reports,
                    invocation_id,
                    result_id,
                    log_dir if log_dir.exists() else None,
                    options.timing.plan.busy_cores,
                    runs if outcome.unfinished else None,
                    outcome.group_id,
                )
                store.add_serving(result)
                if finished.final:
                    yield result
