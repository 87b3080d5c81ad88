"""run_cases and serve_points: validated cases (or serving points) in, stored Results
(or ServingResults) out. The CLI and tests call these.

Each run is a worker process of its own; whatever happens to a case becomes its Result,
stored in one transaction as its runs come in (rewritten in place after each round), so
a killed command keeps what it measured and `resume` picks up the rest. Both go through
one path: groups of requests, an executor that runs them in rounds, and the same resume
rule. Where the workers run is the executor's business: this machine (the default) or a
Ray cluster (step times only).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from fwbench.case import Case
from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.catalog.sources import get_source
from fwbench.environment import host_environment, host_key
from fwbench.errors import ExecutorError, SpecError, positive_seconds
from fwbench.explain.breakdown import Breakdown
from fwbench.launch import DEFAULT_TIMEOUT_S, counting, local
from fwbench.launch.executor import Executor, GroupDone, OnStart, OnStatus
from fwbench.launch.outcome import CaseOutcome, MeasuredRun, PointOutcome
from fwbench.launch.protocol import CountItem, GroupRequest
from fwbench.launch.serving import Point, build_result, request_of
from fwbench.measure import runs as case_runs
from fwbench.measure import stats, trackers
from fwbench.measure.settings import TimingConfig
from fwbench.measure.timing import Prepared
from fwbench.models.parity import Parity, output_check, token_check
from fwbench.models.parity import check as check_parity
from fwbench.result import (
    Blocks,
    Distributed,
    Measurement,
    Result,
    Run,
    RunFigure,
    StepTime,
    Work,
)
from fwbench.serve.result import ServingResult
from fwbench.serve.spec import point_key
from fwbench.store.db import ResultStore

# model, its dimensions as canonical JSON, and what resolves a user's model ("" for the
# zoo's): a count is cached under the first two (a user's model's name carries its hash).
ParityKey = tuple[str, str, str]
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
    if name == "ray":
        # Imported here: the module is light, but only a Ray run needs it.
        from fwbench.launch import ray

        if not ray.ray_available():
            raise ExecutorError(f"--executor ray needs Ray: {ray.INSTALL_HINT}")
        return ray.RayExecutor(address=address)
    raise SpecError(f"executor: unknown {name!r}; valid choices: {', '.join(EXECUTORS)}")


def parity_key(case: Case) -> ParityKey:
    return (case.model, json.dumps(case.dims, sort_keys=True), case.model_path or "")


def parity_frameworks(cases: Sequence[Case]) -> list[str]:
    """Frameworks whose parameter counts each case is checked against.

    Those of the run itself; a single-framework run is checked against every other
    installed framework, so `fwbench run` alone still flags different work. Keras'
    other backends build TensorFlow's Keras models: they add nothing to that check
    unless the run uses them. A user's model only where its source runs it.
    """
    named = sorted({c.framework for c in cases})
    if len(named) > 1:
        return named
    others = [n for n, info in FRAMEWORKS.items() if info.installed() and info.models_from is None]
    users = {c.model_spec.source for c in cases if c.model_path or c.inputs}
    for name in users:
        source = get_source(name)
        if source.runs:
            others = [fw for fw in others if source.can(fw)[0]]
    return sorted({*named, *others})


def ensure_param_counts(
    store: ResultStore,
    keys: Iterable[ParityKey],
    frameworks: Iterable[str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_progress: Callable[[str], None] | None = None,
) -> dict[tuple[str, ParityKey], int]:
    """Trainable-parameter counts per (framework, key), from the cache or count workers.

    Best effort: a framework that cannot build a model here (its error is cached too)
    leaves the comparison to the frameworks that can.
    """
    keys = sorted(set(keys))
    counts: dict[tuple[str, ParityKey], int] = {}
    missing: dict[str, list[ParityKey]] = {}
    versions: dict[str, str] = {}
    for fw in frameworks:
        version = FRAMEWORKS[fw].version()
        if version is None:
            continue
        versions[fw] = version
        for key in keys:
            cached = store.param_count((key[0], fw, version, key[1]))
            if cached is None:
                missing.setdefault(fw, []).append(key)
            elif cached[0] is not None:
                counts[(fw, key)] = cached[0]
    if not missing:
        return counts
    if on_progress:
        on_progress(f"counting parameters of {len(keys)} models in {', '.join(missing)}")
    requests = {
        fw: [CountItem(model=m, dims=json.loads(d), reference=r or None) for m, d, r in fw_keys]
        for fw, fw_keys in missing.items()
    }
    for fw, found in counting.count_in_each(requests, timeout_s).items():
        for key, count in zip(missing[fw], found, strict=True):
            # A crash or a time-out is this attempt's, not the model's: not cached, so the
            # next run tries again (a cached error would disable the check for good).
            if count.definitive:
                store.put_param_count((key[0], fw, versions[fw], key[1]), count.params, count.error)
            if count.params is not None:
                counts[(fw, key)] = count.params
    return counts


def parity_for(case: Case, counts: dict[tuple[str, ParityKey], int], own: int | None) -> Parity:
    key = parity_key(case)
    found = {fw: n for (fw, k), n in counts.items() if k == key}
    if own is not None:
        found[case.framework] = own
    return check_parity(found)


def result_from_outcome(
    case: Case,
    invocation_id: str,
    outcome: CaseOutcome,
    counts: dict[tuple[str, ParityKey], int],
    timing_config: TimingConfig,
    host: dict[str, Any],
    peak: tuple[float | None, str],
    result_id: str | None = None,
) -> Result:
    """Assemble the stored record; the host environment goes into every record so an
    exported row stands on its own. `result_id` names the record an earlier outcome of
    the same case (its runs so far) was stored under, so this one replaces it."""
    common: dict[str, Any] = {
        "result_id": result_id or uuid.uuid4().hex,
        "invocation_id": invocation_id,
        "recorded_at": datetime.now(),
        "case": case,
        "run_timing": timing_config.run,
        "run_plan": timing_config.plan,
        "reading": timing_config.reading,
    }
    report = outcome.report
    if report is None:
        assert outcome.failure is not None
        return Result(
            **common,
            status=outcome.failure.status,
            error=outcome.failure.error,
            parity=parity_for(case, counts, None),
            environment={"host": host},
            settings={"worker_log_tail": outcome.failure.log_tail},
        )
    measurement = None
    warnings: tuple[str, ...] = ()
    if report.status == "ok" and outcome.runs:
        measurement = measurement_of(
            outcome.runs, outcome.stop_reason or "max_runs", outcome.group_id
        )
        warnings = (
            *(f"run {r.index + 1}: {w}" for r in measurement.runs for w in r.warnings),
            *outcome.warnings,
        )
    step_s = measurement.step_time_s.median if measurement else None
    before = report.settings.get("compiles_after_warmup")
    after = report.settings.get("compiles_after_timing")
    if measurement is not None and before is not None and after is not None and after > before:
        warnings = (
            *warnings,
            f"recompiled {after - before} time(s) inside the timed region: steady state "
            "includes compilation",
        )
    # What the workload found wrong as built (e.g. an export whose outputs differ).
    # (Read, not popped: the report is read again for each round's outcome so far.)
    warnings = (*warnings, *report.settings.get("warnings", ()))
    settings = {k: v for k, v in report.settings.items() if k != "warnings"}
    parity = parity_for(case, counts, report.param_count)
    if parity.mismatch:
        warnings = (*warnings, f"different work across frameworks: {parity.describe()}")
    # The driver's trackers watched the steady state: without one, theirs say nothing.
    tracked = report.tracked | (outcome.tracked if measurement else {})
    fields, extra, problems = trackers.record_fields(tracked)
    warnings = (*warnings, *problems)
    return Result(
        **common,
        status=report.status,
        error=report.error,
        measurement=measurement,
        param_count=report.param_count,
        parity=parity,
        memory=fields.get("memory"),
        energy=fields.get("energy"),
        work=_work(fields.get("work"), step_s, peak) or _no_flops(case),
        tracked=extra,
        breakdown=_breakdown(report.breakdown, step_s),
        distributed=Distributed(**report.distributed) if report.distributed else None,
        warnings=warnings,
        environment={"host": host, **report.environment},
        settings=settings,
    )


def measurement_of(
    measured: Sequence[MeasuredRun], stop_reason: str, group_id: str | None = None
) -> Measurement:
    """The case's measurement from its runs: the estimate over runs, every run kept;
    `group_id` names the group whose variants it was measured with, round by round."""
    found = tuple(
        Run(
            index=i,
            median_s=r.timing.median_s,
            ci_low_s=r.timing.ci_low_s,
            ci_high_s=r.timing.ci_high_s,
            samples=r.timing.samples,
            build_s=r.build_s,
            stop_reason=r.timing.stop_reason,
            launcher=r.launcher,
            other_cpu_cores=r.other_cpu_cores,
            warnings=r.timing.warnings,
            start_s=r.start_s,
            finish_s=r.finish_s,
            figures={
                name: RunFigure(samples=values, median_s=statistics.median(values))
                for name, values in r.figures.items()
                if values
            },
            **{f.name: getattr(r.timing, f.name) for f in dataclasses.fields(Prepared)},
        )
        for i, r in enumerate(measured)
    )
    est = case_runs.estimate(
        [case_runs.RunFigures(r.median_s, r.ci_low_s, r.ci_high_s, 0.0) for r in found]
    )
    # Each of the task's own figures over the runs, estimated as the step time is from
    # each run's median of its blocks (and, for a case of one run, that median's own
    # interval, as its step time has).
    figures = {}
    for name in sorted({name for r in found for name in r.figures}):
        series = [r.figures[name] for r in found if name in r.figures]
        if len(series) == len(found):
            over = case_runs.estimate(
                [case_runs.RunFigures(*_median_ci(s.samples), 0.0) for s in series]
            )
            figures[name] = StepTime(
                median=over.median_s, ci_low=over.ci_low_s, ci_high=over.ci_high_s
            )
    first = found[0]
    return Measurement(
        step_time_s=StepTime(median=est.median_s, ci_low=est.ci_low_s, ci_high=est.ci_high_s),
        samples=tuple(s for r in found for s in r.samples),
        # Start-up and block size are the first run's; samples and stop are the case's.
        **first.model_dump(include=set(Blocks.model_fields) - {"samples", "stop_reason"}),
        stop_reason=stop_reason,
        runs=found,
        ci_method=est.method,
        figures=figures,
        group_id=group_id,
    )


def _median_ci(samples: Sequence[float]) -> tuple[float, float, float]:
    low, high = stats.median_ci(list(samples))
    med = statistics.median(samples)
    return med, min(low, med), max(high, med)


def check_outputs(results: Sequence[Result]) -> list[Result]:
    """The variants of one workload that recorded what they computed: each with the check
    of its output against the others' in its settings, and a warning where they differ.
    Generations compare their tokens (models.parity.token_check); a user's model its
    first output on the same inputs (models.parity.output_check). Others as they are."""
    tokens = {
        r.case.variant: list(r.settings["generated_tokens"])
        for r in results
        if r.settings.get("generated_tokens")
    }
    # Outputs are compared between variants that compute in the same numerics, within
    # theirs' tolerance: a runtime's quantised mode (Case.numerics) is checked against its
    # source framework in its own worker, with its mode's tolerance (output_check).
    samples: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        if isinstance(r.settings.get("output_sample"), dict):
            samples.setdefault(r.case.numerics, {})[r.case.variant] = r.settings["output_sample"]
    checked: dict[str, tuple[str, str]] = {}
    found_tokens = token_check(tokens)
    if found_tokens is not None:
        checked |= {variant: ("token_check", found_tokens) for variant in tokens}
    for numerics, group in samples.items():
        found_outputs = output_check(group, numerics)
        if found_outputs is not None:
            checked |= {variant: ("output_agreement", found_outputs) for variant in group}
    out = []
    for r in results:
        if r.case.variant not in checked:
            out.append(r)
            continue
        name, check = checked[r.case.variant]
        warning = f"different work across frameworks: {check}"
        failed = check.startswith("failed")
        out.append(
            r.model_copy(
                update={
                    "settings": r.settings | {name: check},
                    "warnings": (*r.warnings, warning) if failed else r.warnings,
                }
            )
        )
    return out


def _no_flops(case: Case) -> Work | None:
    """Why a case has no FLOP count (said, not silently missing)."""
    can = FRAMEWORKS[case.framework].counts_flops
    if not can.available:
        return Work(error=f"not counted for {case.framework}: {can.reason}")
    if case.strategy:
        return Work(
            error="not counted for data-parallel cases (a step runs collectives on every "
            "rank); the same case without a strategy counts one replica's step"
        )
    return None


def _work(
    counted: dict[str, Any] | None, step_s: float | None, peak: tuple[float | None, str]
) -> Work | None:
    """The FLOP tracker's count, with what the step time and the host's peak make of it."""
    if counted is None:
        return None
    work = Work.model_validate(counted)
    per_step = work.flops_per_step
    achieved = per_step / step_s if per_step and step_s else None
    flops_per_s, dtype = peak
    return work.model_copy(
        update=dict(
            achieved_flops_per_s=achieved,
            peak_flops_per_s=flops_per_s,
            peak_dtype=dtype if flops_per_s else None,
            share_of_peak=achieved / flops_per_s if achieved and flops_per_s else None,
        )
    )


def _breakdown(found: dict[str, Any] | None, step_s: float | None) -> Breakdown | None:
    if found is None:
        return None
    # Profiling overhead shows beside the breakdown: profiled vs unprofiled step.
    return Breakdown(**found).model_copy(update={"unprofiled_step_s": step_s})


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
        counts = ensure_param_counts(
            store,
            (parity_key(c) for c in todo),
            parity_frameworks(cases),
            options.timeout_s,
            on_status,
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
                result = result_from_outcome(
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
            for result in check_outputs(made):
                store.add(result)
                if finished.final:
                    yield result


def done_points(store: ResultStore, options: RunOptions) -> set[str]:
    """Serving points a resumed command skips, by `_done`'s rule (as cases)."""
    if not options.resume:
        return set()
    latest = {r.point_key: r for r in store.serving()}  # oldest first: the newest wins
    return {k for k, r in latest.items() if _done(options, r.status, r.unfinished)}


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
) -> Iterator[ServingResult]:
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
        if options.resume and not _done(options, r.status, r.unfinished)
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
