"""A case's stored record (Result) from what its runs found (CaseOutcome): the
measurement over its runs, the same-work checks (parameters, outputs), the trackers'
fields and what the FLOPs make of the step time. launch/serving.py builds a serving
point's record the same way; fwbench.api stores both.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from fwbench.case import Case
from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.explain.breakdown import Breakdown
from fwbench.launch.counting import ParityKey, parity_key
from fwbench.launch.outcome import CaseOutcome
from fwbench.measure import runs as case_runs
from fwbench.measure import trackers
from fwbench.measure.settings import TimingConfig
from fwbench.models.parity import OUTPUT_TOLERANCE, Parity, output_check, token_check
from fwbench.models.parity import check as check_parity
from fwbench.result import (
    Blocks,
    Distributed,
    Measurement,
    Result,
    Run,
    StepTime,
    Work,
)


def parity_for(case: Case, counts: dict[tuple[str, ParityKey], int], own: int | None) -> Parity:
    """Whether the case's model has the same parameters in every framework counted: the
    counts by (framework, key), its own worker's count (`own`) in place of its
    framework's."""
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
    runs: Sequence[Run], stop_reason: str, group_id: str | None = None
) -> Measurement:
    """The case's measurement from its runs (as the driver recorded them): the estimate
    over runs, every run kept; `group_id` names the group whose variants it was measured
    with, round by round."""
    found = tuple(runs)
    est = case_runs.estimate(found)
    # Each of the task's own figures over the runs, estimated as the step time is from
    # each run's median of its blocks (and, for a case of one run, that median's own
    # interval, as its step time has).
    figures = {}
    for name in sorted({name for r in found for name in r.figures}):
        series = [r.figures[name] for r in found if name in r.figures]
        if len(series) == len(found):
            over = case_runs.figure_estimate([s.samples for s in series])
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


def check_outputs(
    results: Sequence[Result], arrays: Mapping[str, list[Any] | None] | None = None
) -> list[Result]:
    """The variants of one workload that recorded what they computed: each with the check
    of its output against the others' in its settings, and a warning where they differ.
    Generations compare their tokens (models.parity.token_check); a user's model its
    outputs on the same inputs (models.parity.output_check: whole where `arrays` has
    them by variant, launch/outputs.py); a task that trains part of the model (LoRA's
    adapters) the number of parameters each trained (`trained_params`). Others as they
    are."""
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
    checked: dict[str, dict[str, str]] = {}
    margins = {
        r.case.variant: list(r.settings["token_margins"])
        for r in results
        if r.case.variant in tokens and r.settings.get("token_margins")
    }
    # A near-tie is judged by the loosest numerics among the generations compared.
    tolerance = max(
        (OUTPUT_TOLERANCE.get(r.case.numerics, 0.0) for r in results if r.case.variant in tokens),
        default=None,
    )
    found_tokens = token_check(tokens, margins, tolerance or None)
    if found_tokens is not None:
        for variant in tokens:
            checked.setdefault(variant, {})["token_check"] = found_tokens
    for numerics, group in samples.items():
        found_outputs = output_check(group, numerics, arrays)
        if found_outputs is not None:
            for variant in group:
                checked.setdefault(variant, {})["output_agreement"] = found_outputs
    trained = {
        r.case.variant: int(r.settings["trained_params"])
        for r in results
        if isinstance(r.settings.get("trained_params"), int)
    }
    found_trained = trained_check(trained)
    if found_trained is not None:
        for variant in trained:
            checked.setdefault(variant, {})["trained_check"] = found_trained
    out = []
    for r in results:
        checks = checked.get(r.case.variant, {})
        failed = tuple(
            f"different work across frameworks: {c}"
            for c in checks.values()
            if c.startswith("failed")
        )
        out.append(
            r.model_copy(
                update={"settings": r.settings | checks, "warnings": (*r.warnings, *failed)}
            )
            if checks
            else r
        )
    return out


def trained_check(trained: Mapping[str, int]) -> str | None:
    """Whether the variants trained the same number of parameters (a LoRA run's
    adapters: keras-hub's factorisation in every framework); None with fewer than two."""
    if len(trained) < 2:
        return None
    said = ", ".join(f"{v} {n:,}" for v, n in sorted(trained.items()))
    if len(set(trained.values())) > 1:
        return f"failed: they train different numbers of parameters ({said})"
    return f"passed: each trains {next(iter(trained.values())):,} parameters"


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
