"""`fwbench sweep`: a grid of cases from a YAML file or a built-in preset."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fwbench import sweep as sweeps
from fwbench import user_models
from fwbench.cli.bundles import takes
from fwbench.cli.common import console, print_json
from fwbench.cli.options import (
    DEFAULT_DB,
    BudgetOption,
    DbOption,
    InterleaveOption,
    JsonOption,
    ReportOption,
    TimeoutOption,
)
from fwbench.cli.workload import Timing
from fwbench.errors import SpecError, duration_seconds
from fwbench.launch import DEFAULT_SPREAD, DEFAULT_TIMEOUT_S
from fwbench.outputs import FileArg, check_output, database, refuse_overwrite, report_output
from fwbench.report.write import check_report_path, report_format, write_report
from fwbench.scenario.spec import point_key, point_label

if TYPE_CHECKING:
    from fwbench.api import RunOptions
    from fwbench.case import Case
    from fwbench.measure.settings import TimingConfig


@takes(timing_flags=Timing)
def command(
    file: Annotated[Path | None, typer.Argument(help="Sweep YAML file.")] = None,
    preset: Annotated[
        str | None, typer.Option(help="A built-in sweep instead of a file, e.g. quick.")
    ] = None,
    db: DbOption = DEFAULT_DB,
    resume: Annotated[bool, typer.Option(help="Skip cases already recorded in --db.")] = False,
    retry_failed: Annotated[
        bool,
        typer.Option(help="With --resume: run again the cases recorded as error, timeout or oom."),
    ] = False,
    timeout: TimeoutOption = None,
    report: ReportOption = None,
    interleave: InterleaveOption = True,
    max_cases: Annotated[
        int, typer.Option(help="Refuse a sweep whose axes combine into more cases than this.")
    ] = sweeps.MAX_CASES,
    timing_flags: Timing = Timing(),
    spread: Annotated[
        int | None,
        typer.Option(
            help="Let this many consecutive workloads take turns run by run, so a case's "
            "runs are a minute or more apart and its interval includes the machine's "
            "drift (1: one workload at a time). See docs/decisions.md. "
            f"[default: {DEFAULT_SPREAD}]"
        ),
    ] = None,
    executor: Annotated[
        str, typer.Option(help="Where the cases run: local (this machine) or ray (a Ray cluster).")
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(
            help="With --executor ray: the cluster's address, or auto for the cluster this "
            "machine belongs to. Without it, Ray is started on this machine."
        ),
    ] = None,
    budget: BudgetOption = None,
    dry_run: Annotated[
        bool, typer.Option(help="List the cases, estimate how long they take, and stop.")
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help=f"Run a sweep of more than {sweeps.CONFIRM_CASES} cases, or estimated to take "
            f"more than {sweeps.CONFIRM_S / 3600:g} h, without asking (refused without it "
            "when not interactive).",
        ),
    ] = False,
    json: JsonOption = False,
) -> None:
    """Run every case of a sweep, each in its own worker; a failed case never stops it."""
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.api import RunOptions, executor_named
    from fwbench.cli.execute import cases_left, execute
    from fwbench.report.terminal import answer_text, report_tables, summary_table

    if (file is None) == (preset is None):
        raise SpecError(
            f"give a sweep FILE or --preset NAME (presets: {', '.join(sweeps.presets())})"
        )
    if max_cases < 1:
        raise SpecError(f"--max-cases: must be 1 or more (got {max_cases})")
    sweep = (
        sweeps.load_file(file, max_cases, user_models.prepare)
        if file is not None
        else sweeps.load_preset(str(preset), max_cases, user_models.prepare)
    )
    reports = report or []
    formats = [report_format(path, None) for path in reports]
    store = database("--db", db)
    refuse_overwrite(
        [store, *(report_output("--report", p, f) for p, f in zip(reports, formats, strict=True))],
        [store, *([FileArg("FILE", file, "the sweep file")] if file is not None else [])],
    )
    for path, fmt in zip(reports, formats, strict=True):
        check_report_path(path, fmt)  # before the sweep runs, not after it
    if not dry_run:
        check_output(db, "--db")
    # Flags win over the file's `timing` and `budget`.
    timing = timing_flags.over(sweep.timing)
    budget_s = duration_seconds(budget, "--budget") if budget is not None else sweep.budget_s
    if budget is None and budget_s is not None and executor == "ray":
        # A file's budget (the quick preset's) orders the local executor's work; Ray runs
        # every group at once, so the sweep runs there without it (--budget is refused).
        console.print(
            f"the sweep's budget applies to the local executor: {executor} runs without it"
        )
        budget_s = None
    runner = executor_named(
        executor, address, DEFAULT_SPREAD if spread is None else spread, budget_s
    )
    # With --resume, what is left of the sweep is listed, estimated and confirmed.
    left = sweep.cases if sweep.serve else cases_left(sweep.cases, db, resume, retry_failed)
    # An explicit --timeout wins, even a bad one (refused below, never silently ignored).
    timeout_s = timeout if timeout is not None else sweep.timeout_s or DEFAULT_TIMEOUT_S
    options = RunOptions(
        timing=timing,
        timeout_s=timeout_s,
        resume=resume or retry_failed,
        retry_failed=retry_failed,
        interleave=interleave,
        executor=runner,
    )
    if sweep.serve:
        # What the run would refuse, a dry run refuses too.
        _check_serving(executor, budget_s)
    if dry_run:
        _dry_run(sweep, left, timing, budget_s, db, json)
        return
    if sweep.serve:
        _serve(sweep, db, options, reports, formats, json)
        return
    _confirm(sweep, len(left), sweeps.estimate(len(left), timing, budget_s), yes)
    on = "" if executor == "local" else f" on Ray ({address or 'a local instance'})"
    console.print(f"sweep [bold]{sweep.name}[/bold]: {len(sweep.cases)} cases into {db}{on}")
    results = execute(sweep.cases, db, options)
    if json:
        print_json([r.to_record() for r in results])
    else:
        if results:
            console.print(answer_text(results, band=None))
        console.print(summary_table(results, title=f"Sweep {sweep.name}"))
        for table in report_tables(results):
            console.print(table)
    for path, fmt in zip(reports, formats, strict=True):
        write_report(results, path, fmt, title=f"fwbench sweep {sweep.name}", study=sweep.study)
        console.print(f"report written to {path}")


def _dry_run(
    sweep: sweeps.Sweep,
    left: list[Case],
    timing: TimingConfig,
    budget_s: float | None,
    db: Path,
    json: bool,
) -> None:
    """What the sweep would measure, and how long it would take; JSON with --json."""
    planned = [
        (point_label(case, spec), point_key(case, spec)) if spec else (case.label(), case.key())
        for spec in sweep.serve or [None]
        for case in left
    ]
    if sweep.serve:
        said = f"{len(planned)} serving points"
    else:
        found = sweeps.estimate(len(left), timing, budget_s)
        done = len(sweep.cases) - len(left)
        said = f"{len(left)} cases"
        if done:
            said = f"{len(left)} of {len(sweep.cases)} cases left ({done} recorded in {db})"
        said += f"; {found.describe()}"
    if json:
        print_json({"planned": [{"label": a, "key": k} for a, k in planned], "summary": said})
        return
    for label, _ in planned:
        console.print(label, markup=False)
    console.print(said, markup=False)


def _confirm(sweep: sweeps.Sweep, count: int, found: sweeps.Estimate, yes: bool) -> None:
    """A sweep of days is a mistake more often than a plan: it starts on a yes, typed or
    given as --yes, never by default."""
    if yes or not found.needs_confirmation:
        return
    what = f"sweep {sweep.name}: {count} cases, {found.describe()}"
    if sys.stdin is None or not sys.stdin.isatty():
        raise SpecError(f"{what}; pass --yes to run it")
    if not typer.confirm(f"{what}. Run it?", err=True):
        console.print("not started", markup=False)
        raise typer.Exit(1)


def _check_serving(executor: str, budget_s: float | None) -> None:
    """The options a serving sweep cannot honour, refused with the reason."""
    from fwbench.launch.ray import SERVING_REFUSED

    if executor != "local":
        raise SpecError(f"--executor {executor}: {SERVING_REFUSED}")
    if budget_s is not None:
        raise SpecError(
            "--budget: a serving point makes a fixed number of runs (the sweep's min_runs), "
            "which a budget would not shorten; set min_runs or the scenarios' duration"
        )


def _serve(
    sweep: sweeps.Sweep,
    db: Path,
    options: RunOptions,
    reports: list[Path],
    formats: list[str],
    json: bool,
) -> None:
    """A sweep with a `serve` key: every case under every scenario, min_runs runs each."""
    from fwbench.cli.serve import execute_serving, log_root, print_tables
    from fwbench.launch.serving import Point

    points = [Point(case, spec) for spec in sweep.serve for case in sweep.cases]
    console.print(f"sweep [bold]{sweep.name}[/bold]: {len(points)} serving points into {db}")
    results = execute_serving(points, db, options.timing.plan.min_runs, options)
    if json:
        print_json([r.to_record() for r in results])
    else:
        # A serving record does not keep the band: the sweep's is read here.
        print_tables(results, options.timing.reading.band)
        console.print(f"LoadGen's logs: {log_root(db)}")
    for path, fmt in zip(reports, formats, strict=True):
        title = f"fwbench sweep {sweep.name}"
        band = options.timing.reading.band
        write_report(results, path, fmt, title=title, band=band)
        console.print(f"report written to {path}")
