"""`fwbench explain`: where each framework spends its step, by category, side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fwbench.catalog.frameworks import core_frameworks, get_framework
from fwbench.cli import choices
from fwbench.cli.bundles import takes
from fwbench.cli.common import (
    console,
    note,
    out,
    print_json,
    timing_config,
    warn,
)
from fwbench.cli.options import (
    DEFAULT_DB,
    ONE_RUN_TIME_FLAGS,
    CoreFrameworksOption,
    DbOption,
    JsonOption,
    ModesOption,
    OneRunTimeOption,
    OptionsOption,
)
from fwbench.cli.workload import Workload
from fwbench.errors import SpecError
from fwbench.explain.categories import load_rules
from fwbench.launch import DEFAULT_TIMEOUT_S
from fwbench.outputs import FileArg, check_folder, database, refuse_overwrite

if TYPE_CHECKING:
    from fwbench.case import Case
    from fwbench.result import Result

# A generation's phases (Breakdown.phases): each table's title, what one occurrence is
# called, and the figure of the unprofiled runs its time per occurrence lines up with.
PHASE_TABLES = (
    (
        "prefill",
        "Where the prefill goes (ms per generation, share of the prefill)",
        "prefill",
        "ttft_s",
        "TTFT",
    ),
    (
        "decode",
        "Where a decoding step goes (ms per decoding step, share of it)",
        "decoding step",
        "tpot_s",
        "TPOT",
    ),
)


# A profile of every op of each step: its traces grow with them (a few MB a step).
MAX_PROFILED_STEPS = 1000


@takes(workload=Workload)
def command(
    model: Annotated[
        str | None,
        typer.Option(
            help="Model name; see `fwbench models`.", autocompletion=choices.complete_model
        ),
    ] = None,
    case: Annotated[
        str | None,
        typer.Option("--case", help="A stored case key (see `results --json`) to explain instead."),
    ] = None,
    framework: CoreFrameworksOption = None,
    mode: ModesOption = None,
    framework_options: OptionsOption = None,
    workload: Workload = Workload(),
    steps: Annotated[int, typer.Option(help="Steady-state steps to profile.")] = 5,
    categories: Annotated[
        Path | None, typer.Option(help="YAML 'category: [regex, ...]' tried before the defaults.")
    ] = None,
    trace_dir: Annotated[
        Path | None, typer.Option(help="Where raw traces go. [default: traces/ beside --db]")
    ] = None,
    max_time: OneRunTimeOption = 5.0,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Profile a few steady-state steps in each framework with its own profiler.

    The case comes from the same flags as `run`, or from a stored case (--case KEY), whose
    workload is then explained in each framework.
    """
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.api import RunOptions
    from fwbench.cli.execute import execute

    modes: list[str | None] = list(mode or [])
    if case is not None:
        stored = _stored_case(db, case)
        model = stored.model
        workload = Workload.of(stored, task_dims=workload.task_dims or stored.task_dims)
        framework = framework or list(dict.fromkeys([stored.framework, *core_frameworks()]))
        # The stored case's own mode and options; the other frameworks in their defaults.
        if not modes:
            modes = [stored.mode if fw == stored.framework else None for fw in framework]
        if not framework_options and stored.options:
            framework_options = [
                stored.options if fw == stored.framework else "default" for fw in framework
            ]
    if model is None:
        raise SpecError("give --model NAME (and the other `run` flags) or --case KEY")
    frameworks = framework or core_frameworks()
    for fw in frameworks:
        get_framework(fw).can_explain.check(fw, "explain")
    if not 1 <= steps <= MAX_PROFILED_STEPS:
        raise SpecError(f"--steps: profile 1 to {MAX_PROFILED_STEPS} steps (got {steps})")
    traces = trace_dir or db.parent / "traces"
    store = database("--db", db)
    rules_file = [FileArg("--categories", categories, "the category rules")] if categories else []
    refuse_overwrite(
        [store, FileArg("--trace-dir", traces, "the trace folder", replaces=False)],
        [store, *rules_file],
    )
    check_folder(traces, "--trace-dir")
    rules = tuple(load_rules(categories)) if categories else ()
    cases = workload.cases(model, frameworks, modes, options=framework_options)
    options = RunOptions(
        # One run: the figure here is the profile; the timing is context for its overhead.
        timing=timing_config(
            ONE_RUN_TIME_FLAGS,
            max_time_s=max_time,
            run_time_s=max_time,
            min_runs=1,
            max_runs=1,
        ),
        interleave=False,
        timeout_s=DEFAULT_TIMEOUT_S,
        count_flops=False,
        profile_steps=steps,
        trace_dir=traces,
        category_rules=rules,
    )
    results = execute(cases, db, options)
    if json:
        print_json([r.to_record() for r in results])
        return
    render(results)


def _stored_case(db: Path, key: str) -> Case:
    from fwbench.store.db import ResultStore

    with ResultStore(db, read_only=True, on_skip=warn, on_snapshot=note) as store:
        matches = [r.case for r in store.results() if r.case_key.startswith(key)]
    if not matches:
        raise SpecError(f"no stored case with key {key!r} in {db}; see `fwbench results --json`")
    return matches[-1]


def render(results: list[Result]) -> None:
    """The step's categories side by side, the profiler's overhead, a generation's
    phases, and each variant's costliest operations."""
    from fwbench.report.side_by_side import side_by_side
    from fwbench.report.terminal import category_table, top_ops_table

    for r in results:
        if r.breakdown is None:
            console.print(f"[red]{r.case.label()}: {r.status}[/red] {r.error or 'no profile'}")
    explained = [(r, r.breakdown) for r in results if r.breakdown is not None]
    variants, rows = side_by_side(results)
    if not variants:
        return
    title = "Where the step goes (ms per step, share of the profiled step)"
    totals = {r.case.variant: b.profiled_step_s for r, b in explained}
    out.print(category_table(title, variants, rows, "total (profiled step)", totals))
    for r, b in explained:
        overhead = f"{b.overhead:+.1%}" if b.overhead is not None else "n/a"
        console.print(
            f"{r.case.variant}: profiled step {b.profiled_step_s * 1e3:.2f} ms vs unprofiled "
            f"{(b.unprofiled_step_s or 0) * 1e3:.2f} ms (profiler overhead {overhead}); "
            f"{b.profiler}; trace: {b.trace}"
        )
    _render_phases(results)
    for r, _ in explained:
        out.print(top_ops_table(r))


def _render_phases(results: list[Result]) -> None:
    """A generation's prefill and decoding step, each side by side as the step is."""
    from fwbench.report.side_by_side import side_by_side
    from fwbench.report.terminal import category_table

    phased = [(r, r.breakdown) for r in results if r.breakdown is not None and r.breakdown.phases]
    if not phased:
        return
    for phase, title, noun, _, _ in PHASE_TABLES:
        variants, rows = side_by_side(results, phase)
        if variants:
            totals = {
                r.case.variant: b.phases[phase].profiled_s for r, b in phased if phase in b.phases
            }
            out.print(category_table(title, variants, rows, f"total ({noun})", totals))
    for r, b in phased:
        parts = []
        in_phases = 0.0
        for phase, _, noun, figure, label in PHASE_TABLES:
            found = b.phases.get(phase)
            if found is None:
                continue
            in_phases += found.profiled_s * found.occurrences / b.steps
            measured = r.measurement.figures.get(figure) if r.measurement else None
            unprofiled = f"{measured.median * 1e3:.2f} ms" if measured else "n/a"
            parts.append(
                f"{noun} {found.profiled_s * 1e3:.2f} ms x {found.occurrences} "
                f"(unprofiled {label} {unprofiled})"
            )
        outside = (b.profiled_step_s - in_phases) * 1e3
        console.print(
            f"{r.case.variant}: {'; '.join(parts)}; in neither phase {outside:.2f} ms per "
            "generation"
        )
    console.print(
        "Per decoding step: the decoding phase's profiled time / (generations profiled x "
        "(new_tokens - 1)), as TPOT is; the timing loop between tokens is in neither phase."
    )
